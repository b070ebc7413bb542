/*
 * The calls and fields of the 1.0 API (kreflect.h): the version, the sized
 * configuration and status, kr_client_wakeup (from a thread, a signal
 * handler and the host's loop), the log handler, and failures as data.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "mbedtls/build_info.h"
#include "port.h"
#include "reflector.h"
#include "test.h"

static char mem[4u << 20] __attribute__((aligned(16)));

/* A client of a plain-HTTP server nobody listens on: every connection is refused. */
static struct kr_client *refused_client(void)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	char err[200];

	kr_config_init(&cfg);
	cfg.server = "http://127.0.0.1:1";
	cfg.no_auto_source = 1;
	cfg.max_objects = 64;
	cfg.arena_bytes = 256 * 1024;
	cfg.log_level = -1;
	if (kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) != 0 ||
	    kr_client_add_resource(c, "configmaps", err, sizeof(err)) != 0)
		return NULL;
	return c;
}

KR_TEST(client_v1, version_at_run_time_matches_the_header)
{
	int n = 0;

	check(strcmp(kr_version(NULL), KR_VERSION) == 0);
	check(strcmp(kr_version(&n), "1.1.0") == 0 && n == KR_VERSION_NUM && n == 0x010100);
	check(KR_READY_NOT_SYNCED == 0 && KR_READY_DEGRADED == 1 && KR_READY_OK == 2);
	return 0;
}

static char host_line[1100];
static int host_level = -9, host_lines;

static void host_log(void *arg, int level, const char *text)
{
	(void)arg;
	host_level = level;
	host_lines++;
	kr_snprintf(host_line, sizeof(host_line), "%s", text);
}

/* 1.1: the host's own lines through the library's handler and level. */
KR_TEST(client_v1, host_lines_through_the_handler_and_level)
{
	char big[1500];

	check(kr_set_log_handler(host_log, NULL) == 0);
	kr_set_log_level(KR_LOG_INFO);
	kr_log(KR_LOG_WARN, "disk %d%% full", 93);
	check(host_lines == 1 && host_level == KR_LOG_WARN && strcmp(host_line, "disk 93% full") == 0);
	kr_log(KR_LOG_DEBUG, "not at info");
	check(host_lines == 1);
	kr_log(KR_LOG_INFO, NULL);                     /* misuse: nothing, no crash */
	check(host_lines == 1);
	kr_log(-7, "below the range: an error");
	check(host_lines == 2 && host_level == KR_LOG_ERROR);
	kr_set_log_level(-1);                          /* none */
	kr_log(KR_LOG_ERROR, "dropped");
	check(host_lines == 2);
	kr_set_log_level(KR_LOG_TRACE);
	kr_log(99, "above the range: trace");
	check(host_lines == 3 && host_level == KR_LOG_TRACE);
	/* The line's bound: a longer text reaches the handler cut to 1023 bytes. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kr_log(KR_LOG_INFO, "%s", big);
	check(host_lines == 4 && strlen(host_line) == 1023 && host_line[1022] == 'x');
	kr_set_log_handler(NULL, NULL);
	kr_set_log_level(KR_LOG_INFO);
	return 0;
}

/* 1.1: the mbedTLS the library was built with, as --version prints it; no client needed. */
KR_TEST(client_v1, mbedtls_version_is_the_one_built_with)
{
	const char *v = kr_mbedtls_version();

	check(v != NULL && strcmp(v, MBEDTLS_VERSION_STRING) == 0 && strncmp(v, "3.6.", 4) == 0);
	check(kr_mbedtls_version() == v);
	return 0;
}

KR_TEST(client_v1, config_init_writes_only_the_callers_size)
{
	struct {
		struct kr_config cfg;
		unsigned char after[32];
	} b;
	size_t i;

	memset(&b, 0xaa, sizeof(b));
	kr_config_init(&b.cfg);
	check(b.cfg.struct_size == sizeof(struct kr_config));
	check(b.cfg.log_level == 1 && b.cfg.max_stale_s == -1);
	for (i = 0; i < sizeof(b.after); i++)
		check(b.after[i] == 0xaa);
	/* Below 1.0's struct: not one of ours, left as it is. */
	memset(&b, 0xaa, sizeof(b));
	kr_config_init_size(&b.cfg, 8);
	check(((unsigned char *)&b.cfg)[0] == 0xaa);
	kr_config_init_size(NULL, sizeof(b.cfg));
	return 0;
}

KR_TEST(client_v1, a_config_not_made_by_init_is_refused_in_words)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	char err[200];

	memset(&cfg, 0, sizeof(cfg));
	cfg.server = "http://127.0.0.1:1";
	check(kr_client_memory(&cfg) == 0);
	check(kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "kr_config_init") != NULL && c == NULL);
	return 0;
}

KR_TEST(client_v1, a_newer_callers_config_is_taken_unless_it_sets_unknown_fields)
{
	/* A program built against a later header: its struct is longer. */
	struct {
		struct kr_config cfg;
		int later_field;
	} big;
	struct kr_client *c = NULL;
	char err[200];

	kr_config_init_size(&big.cfg, sizeof(big));
	check(big.cfg.struct_size == sizeof(big) && big.later_field == 0);
	big.cfg.server = "http://127.0.0.1:1";
	big.cfg.no_auto_source = 1;
	big.cfg.max_objects = 64;
	big.cfg.arena_bytes = 256 * 1024;
	big.cfg.log_level = -1;
	check(kr_client_memory(&big.cfg) > 0);
	check(kr_client_init(&c, mem, sizeof(mem), &big.cfg, err, sizeof(err)) == 0 && c != NULL);
	big.later_field = 7;
	check(kr_client_memory(&big.cfg) == 0);
	check(kr_client_init(&c, mem, sizeof(mem), &big.cfg, err, sizeof(err)) == KR_ENOTSUP);
	check(strstr(err, "does not have") != NULL && c == NULL);
	return 0;
}

KR_TEST(client_v1, status_fills_the_callers_size_only)
{
	struct kr_client *c = refused_client();
	struct {
		struct kr_status st;
		unsigned char later[16];
	} big;
	struct kr_status st;
	size_t i;

	check(c != NULL);
	check(kr_client_status_size(c, 0, &st, 8) == KR_EINVAL);
	check(kr_client_status_size(c, 0, NULL, sizeof(st)) == KR_EINVAL);
	memset(&big, 0xaa, sizeof(big));
	check(kr_client_status_size(c, 0, &big.st, sizeof(big)) == 0);
	for (i = 0; i < sizeof(big.later); i++)
		check(big.later[i] == 0);          /* fields this library does not know: zero */
	check(big.st.failure == KR_FAIL_NONE && big.st.http_status == 0);
	check(big.st.status_reason && big.st.status_reason[0] == '\0');
	check(kr_client_status(c, 0, &st) == 0 && st.state == KR_HEALTH_STARTING);
	return 0;
}

static struct {
	int backoffs;
	enum kr_failure failure;
	int http_status;
	const char *status_reason;
} seen;

static void on_state(void *arg, const struct kr_state_change *st)
{
	struct kr_client *c = arg;

	if (st->state != KR_HEALTH_BACKOFF)
		return;
	seen.backoffs++;
	seen.failure = st->failure;
	seen.http_status = st->http_status;
	seen.status_reason = st->status_reason;
	kr_client_stop(c);
}

static void *wake_later(void *arg)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	kr_client_wakeup(arg);
	return NULL;
}

KR_TEST(client_v1, wakeup_from_another_thread_ends_run)
{
	struct kr_client *c = refused_client();
	pthread_t th;
	char err[200];
	kr_ms_t t0;

	check(c != NULL);
	check(kr_client_wakeup(NULL) == KR_EINVAL);
	check(kr_client_wakeup(c) == KR_ESTATE);          /* not started */
	check(kr_client_start(c, err, sizeof(err)) == 0);
	/* One kept from before the loop runs: the first run returns at once. */
	check(kr_client_wakeup(c) == 0);
	check(kr_client_wakeup(c) == 0);
	check(kr_client_run(c) == KR_RUN_WOKEN);
	/* Then one from a thread while the loop sleeps in its backoff. */
	t0 = kr_port_now_ms();
	check(pthread_create(&th, NULL, wake_later, c) == 0);
	check(kr_client_run(c) == KR_RUN_WOKEN);
	check(pthread_join(th, NULL) == 0);
	check(kr_port_now_ms() - t0 >= 40);
	check(kr_client_stop(c) == 0);
	check(kr_client_wakeup(c) == KR_ESTATE);          /* stopped: the descriptor is gone */
	check(kr_client_run(c) == 0);
	return 0;
}

static struct kr_client *alarm_client;
static volatile sig_atomic_t alarm_answer = 99;

static void on_alarm(int sig)
{
	(void)sig;
	alarm_answer = kr_client_wakeup(alarm_client);
}

KR_TEST(client_v1, wakeup_from_a_signal_handler_ends_run)
{
	struct itimerval it = { { 0, 0 }, { 0, 50 * 1000 } };
	struct sigaction sa, old;
	char err[200];
	int r;

	alarm_client = refused_client();
	check(alarm_client != NULL);
	check(kr_client_start(alarm_client, err, sizeof(err)) == 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	check(sigaction(SIGALRM, &sa, &old) == 0);
	check(setitimer(ITIMER_REAL, &it, NULL) == 0);
	r = kr_client_run(alarm_client);
	sigaction(SIGALRM, &old, NULL);
	check(r == KR_RUN_WOKEN);
	check(alarm_answer == 0);
	check(kr_client_stop(alarm_client) == 0);
	return 0;
}

/* The host's loop: the wake-up descriptor is one of kr_client_fds and wakes its poll(). */
KR_TEST(client_v1, wakeup_wakes_the_hosts_poll)
{
	struct kr_client *c = refused_client();
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	struct pollfd pfd[KR_CLIENT_MAX_FDS];
	char err[200];
	int n, i, t, ready;

	check(c != NULL);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_wakeup(c) == 0);
	n = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
	check(n >= 1);
	for (i = 0; i < n; i++) {
		pfd[i].fd = fds[i].fd;
		pfd[i].events = POLLIN;
	}
	ready = poll(pfd, (nfds_t)n, 1000);
	check(ready >= 1);
	for (i = 0; i < n; i++)
		fds[i].revents = (short)(pfd[i].revents & POLLIN ? KR_POLLIN : 0);
	check(kr_client_process(c, fds, n) >= 0);
	/* Drained: the same descriptors are quiet now (the refused connect aside). */
	for (i = 0; i < n; i++)
		pfd[i].revents = 0;
	n = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
	check(n >= 1);
	for (i = 0; i < n; i++) {
		pfd[i].fd = fds[i].fd;
		pfd[i].events = POLLIN;
	}
	check(poll(pfd, (nfds_t)n, 0) == 0);
	check(kr_client_stop(c) == 0);
	return 0;
}

KR_TEST(client_v1, a_refused_connection_is_a_network_failure)
{
	struct kr_client *c = refused_client();
	struct kr_status st;
	char err[200];

	check(c != NULL);
	memset(&seen, 0, sizeof(seen));
	check(kr_client_on_state(c, on_state, c) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_run(c) == 0);
	check(seen.backoffs == 1);
	check(seen.failure == KR_FAIL_NETWORK && seen.http_status == 0);
	check(seen.status_reason && seen.status_reason[0] == '\0');
	check(kr_client_status(c, 0, &st) == 0 && st.failure == KR_FAIL_NETWORK);
	return 0;
}

KR_TEST(client_v1, failure_names_are_distinct)
{
	int i, j;

	for (i = 0; i < KR_FAIL_N; i++)
		for (j = 0; j < i; j++)
			check(strcmp(kr_failure_name((enum kr_failure)i), kr_failure_name((enum kr_failure)j)) != 0);
	check(strcmp(kr_failure_name(KR_FAIL_FORBIDDEN), "forbidden") == 0);
	check(strcmp(kr_failure_name((enum kr_failure)KR_FAIL_N), "other") == 0);
	check(strcmp(kr_failure_name((enum kr_failure)-1), "other") == 0);
	return 0;
}

/* Each way a response or a connection ends, and its class. */
KR_TEST(client_v1, classifier_names_every_class)
{
	static struct kr_reflector r;
	static const struct {
		int status, error_event, err_code, stream_error, skipped, fail_err;
		enum kr_conn_state fail_state;
		const char *reason;
		enum kr_failure want;
		int want_code;
	} cases[] = {
		{ 401, 0, 0, 0, 0, 0, KR_CONN_IDLE, "Unauthorized", KR_FAIL_UNAUTHORIZED, 401 },
		{ 403, 0, 0, 0, 0, 0, KR_CONN_IDLE, "Forbidden", KR_FAIL_FORBIDDEN, 403 },
		{ 404, 0, 0, 0, 0, 0, KR_CONN_IDLE, "NotFound", KR_FAIL_NOT_FOUND, 404 },
		{ 429, 0, 0, 0, 0, 0, KR_CONN_IDLE, "TooManyRequests", KR_FAIL_THROTTLED, 429 },
		{ 503, 0, 0, 0, 0, 0, KR_CONN_IDLE, "", KR_FAIL_SERVER, 503 },
		{ 410, 0, 0, 0, 0, 0, KR_CONN_IDLE, "Expired", KR_FAIL_EXPIRED, 410 },
		{ 400, 0, 0, 0, 0, 0, KR_CONN_IDLE, "BadRequest", KR_FAIL_PROTOCOL, 400 },
		{ 200, 1, 410, 0, 0, 0, KR_CONN_IDLE, "Expired", KR_FAIL_EXPIRED, 410 },
		{ 200, 1, 0, 0, 0, 0, KR_CONN_IDLE, "Gone", KR_FAIL_EXPIRED, 0 },
		{ 200, 1, 500, 0, 0, 0, KR_CONN_IDLE, "InternalError", KR_FAIL_SERVER, 500 },
		{ 200, 1, 429, 0, 0, 0, KR_CONN_IDLE, "", KR_FAIL_THROTTLED, 429 },
		{ 200, 0, 0, 1, 0, 0, KR_CONN_IDLE, "", KR_FAIL_PROTOCOL, 0 },
		{ 200, 0, 0, 0, 0, KR_EPROTO, KR_CONN_RECEIVING, "", KR_FAIL_PROTOCOL, 0 },
		{ 200, 0, 0, 0, 1, 0, KR_CONN_IDLE, "", KR_FAIL_CAPACITY, 0 },
		{ 200, 0, 0, 0, 0, 0, KR_CONN_IDLE, "", KR_FAIL_OTHER, 0 },
		{ 0, 0, 0, 0, 0, KR_ETIMEDOUT, KR_CONN_RESOLVING, "", KR_FAIL_DNS, 0 },
		{ 0, 0, 0, 0, 0, KR_ETLS, KR_CONN_HANDSHAKE, "", KR_FAIL_TLS, 0 },
		{ 0, 0, 0, 0, 0, KR_ETLS, KR_CONN_RECEIVING, "", KR_FAIL_TLS, 0 },
		{ 0, 0, 0, 0, 0, KR_EIO, KR_CONN_CONNECTING, "", KR_FAIL_NETWORK, 0 },
		{ 0, 0, 0, 0, 0, KR_ECLOSED, KR_CONN_RECEIVING, "", KR_FAIL_NETWORK, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&r, 0, sizeof(r));
		r.req.status = cases[i].status;
		r.req.error_event = cases[i].error_event;
		r.req.err_code = cases[i].err_code;
		r.req.stream_error = cases[i].stream_error;
		r.skipped = cases[i].skipped;
		r.conn.fail_err = cases[i].fail_err;
		r.conn.fail_state = cases[i].fail_state;
		kr_snprintf(r.req.err_reason, sizeof(r.req.err_reason), "%s", cases[i].reason);
		kr_reflector_classify_failure(&r);
		if (r.failure.cls != cases[i].want || r.failure.http_status != cases[i].want_code) {
			kr_test_failed(__FILE__, (int)i, kr_failure_name(r.failure.cls));
			return __LINE__;
		}
		check(strcmp(r.failure.status_reason, r.failure.http_status ? cases[i].reason : "") == 0);
	}
	return 0;
}

static struct {
	int calls, level;
	char text[KR_LOG_LINE_MAX + 8];
} logged;

static void on_log(void *arg, int level, const char *text)
{
	(void)arg;
	logged.calls++;
	logged.level = level;
	kr_snprintf(logged.text, sizeof(logged.text), "%s", text);
}

KR_TEST(client_v1, log_handler_gets_the_text_and_level)
{
	char big[KR_LOG_LINE_MAX * 2];

	memset(&logged, 0, sizeof(logged));
	kr_set_log_level(KR_LOG_INFO);
	check(kr_set_log_handler(on_log, NULL) == 0);
	kr_log(KR_LOG_WARN, "unable to open %d", 7);
	check(logged.calls == 1 && logged.level == KR_LOG_WARN);
	check(strcmp(logged.text, "unable to open 7") == 0);
	kr_log(KR_LOG_DEBUG, "above the level: %d", 1);
	check(logged.calls == 1);
	/* The bound: a longer text is cut at KR_LOG_LINE_MAX - 1 bytes. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	kr_log(KR_LOG_ERROR, "%s", big);
	check(logged.calls == 2 && logged.level == KR_LOG_ERROR);
	check(strlen(logged.text) == KR_LOG_LINE_MAX - 1);
	check(kr_set_log_handler(NULL, NULL) == 0);
	kr_log(KR_LOG_WARN, "back on stderr");
	check(logged.calls == 2);
	return 0;
}
