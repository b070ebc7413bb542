/*
 * http_get: drives src/conn (the real loop, connection and HTTP parser) for
 * the transport tests. Runs the given paths one after another on ONE
 * connection object and prints, per request, the status, the body's length
 * and FNV-1a hash, or the error; then the connection counters.
 *
 *   http_get [--ca F] [--insecure] [--plain] [--name N] [--idle-ms N]
 *            [--connect-ms N] [--reconnect] [--token T] [--proxy URL]
 *            [--no-proxy LIST] [--take N] HOST PORT PATH...
 *
 * --take N takes at most N body bytes per on_body call: the connection keeps
 * the rest and stops reading until a timer due at once calls kr_conn_resume
 * (the back-pressure the reflector uses when another resource holds the
 * store's tail); the final line then counts the partial takes.
 * --reconnect closes the connection between requests (to show resumption).
 * --proxy tunnels through an http:// proxy with CONNECT; --no-proxy applies
 * the NO_PROXY rule (kr_proxy_bypass) to HOST and prints "proxy: bypassed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "log.h"
#include "port.h"
#include "tls.h"

static unsigned char ca_buf[KR_PEM_MAX + 1];
static struct kr_tls_ctx tls_ctx;
static struct kr_loop loop;
static struct kr_conn conn;
static struct kr_proxy proxy;
static struct kr_timer resume_timer;

struct run {
	char **paths;
	int npaths;
	int next;
	int reconnect;
	int idle_ms;
	const char *token;
	size_t take;                   /* 0: all */
	unsigned long partial_takes;
	unsigned long long body_bytes;
	unsigned long hash;
	int status;
	int failures;
};

static int on_head(void *arg, const struct kr_http_resp *r)
{
	struct run *run = arg;

	run->status = r->status;
	return 0;
}

static void on_resume(struct kr_loop *l, struct kr_timer *t)
{
	(void)l;
	(void)t;
	kr_conn_resume(&conn);
}

static long on_body(void *arg, const char *data, size_t len)
{
	struct run *run = arg;
	size_t i, n = run->take && len > run->take ? run->take : len;

	for (i = 0; i < n; i++)
		run->hash = (run->hash ^ (unsigned char)data[i]) * 16777619ul;
	run->body_bytes += n;
	if (n < len) {
		run->partial_takes++;
		kr_loop_timer_at(&loop, &resume_timer, kr_port_now_ms());
	}
	return (long)n;
}

static void start_next(struct run *run);

static void on_end(void *arg, int err, const char *reason)
{
	struct run *run = arg;

	if (err == 0)
		printf("request %d: status %d bytes %llu hash %08lx\n", run->next, run->status,
		       run->body_bytes, run->hash & 0xffffffffu);
	else
		printf("request %d: error %s: %s (after %llu body bytes)\n", run->next,
		       kr_strerror(err), reason, run->body_bytes);
	run->failures += err != 0;
	if (run->reconnect)
		kr_conn_close(&conn, "reconnect requested");
	start_next(run);
}

static void start_next(struct run *run)
{
	struct kr_request req;
	int r;

	if (run->next == run->npaths) {
		loop.stop = 1;
		return;
	}
	memset(&req, 0, sizeof(req));
	req.path = run->paths[run->next++];
	req.on_head = on_head;
	req.on_body = on_body;
	req.on_end = on_end;
	req.arg = run;
	req.idle_timeout_ms = run->idle_ms;
	req.bearer_token = run->token;
	run->body_bytes = 0;
	run->hash = 2166136261ul;
	run->status = 0;
	r = kr_conn_request(&conn, &req);
	if (r < 0) {
		printf("request %d: refused: %s\n", run->next, kr_strerror(r));
		run->failures++;
		start_next(run);
	}
}

int main(int argc, char **argv)
{
	struct kr_conn_cfg cfg;
	struct kr_tls_opts opts;
	struct run run;
	const char *proxy_url = NULL, *no_proxy = NULL;
	char err[256];
	int i, plain = 0;

	memset(&cfg, 0, sizeof(cfg));
	memset(&opts, 0, sizeof(opts));
	memset(&run, 0, sizeof(run));
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--ca") == 0 && i + 1 < argc) {
			long n = kr_port_read_file(argv[++i], ca_buf, KR_PEM_MAX);

			if (n < 0) {
				fprintf(stderr, "http_get: unable to read %s\n", argv[i]);
				return 2;
			}
			ca_buf[n] = '\0';
			opts.ca = ca_buf;
			opts.ca_len = (size_t)n;
		} else if (strcmp(argv[i], "--insecure") == 0) {
			opts.insecure_skip_verify = 1;
		} else if (strcmp(argv[i], "--plain") == 0) {
			plain = 1;
		} else if (strcmp(argv[i], "--reconnect") == 0) {
			run.reconnect = 1;
		} else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
			snprintf(cfg.server_name, sizeof(cfg.server_name), "%s", argv[++i]);
		} else if (strcmp(argv[i], "--idle-ms") == 0 && i + 1 < argc) {
			run.idle_ms = (int)strtol(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--connect-ms") == 0 && i + 1 < argc) {
			cfg.connect_timeout_ms = (int)strtol(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--token") == 0 && i + 1 < argc) {
			run.token = argv[++i];
		} else if (strcmp(argv[i], "--proxy") == 0 && i + 1 < argc) {
			proxy_url = argv[++i];
		} else if (strcmp(argv[i], "--no-proxy") == 0 && i + 1 < argc) {
			no_proxy = argv[++i];
		} else if (strcmp(argv[i], "--take") == 0 && i + 1 < argc) {
			run.take = (size_t)strtoul(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "-v") == 0) {
			kr_set_log_level(KR_LOG_DEBUG);
		} else {
			fprintf(stderr, "http_get: unknown flag %s\n", argv[i]);
			return 2;
		}
	}
	if (argc - i < 3) {
		fprintf(stderr, "usage: http_get [flags] HOST PORT PATH...\n");
		return 2;
	}
	snprintf(cfg.host, sizeof(cfg.host), "%s", argv[i]);
	cfg.port = (uint16_t)strtol(argv[i + 1], NULL, 10);
	if (proxy_url && kr_proxy_bypass(no_proxy, cfg.host)) {
		printf("proxy: bypassed for %s\n", cfg.host);
	} else if (proxy_url) {
		if (kr_proxy_parse(&proxy, proxy_url, err, sizeof(err)) != 0) {
			fprintf(stderr, "http_get: --proxy: %s\n", err);
			return 2;
		}
		cfg.proxy = &proxy;
	}
	run.paths = argv + i + 2;
	run.npaths = argc - i - 2;
	if (kr_tls_global_init() != 0)
		return 1;
	if (!plain) {
		kr_tls_ctx_init(&tls_ctx);
		if (kr_tls_ctx_setup(&tls_ctx, &opts, err, sizeof(err)) != 0) {
			fprintf(stderr, "http_get: %s\n", err);
			return 2;
		}
		cfg.tls = &tls_ctx;
	}
	kr_loop_init(&loop);
	resume_timer.fire = on_resume;
	if (kr_conn_init(&conn, &loop, &cfg) != 0)
		return 1;
	start_next(&run);
	if (kr_loop_run(&loop) != 0)
		return 1;
	printf("connects %lu requests %lu full-handshakes %u resumed-handshakes %u "
	       "wakeups %lu bytes-in %llu\n", conn.connects, conn.requests,
	       conn.tls.full_handshakes, conn.tls.resumed_handshakes, loop.wakeups, conn.bytes_in);
	if (run.take)
		printf("partial-takes %lu\n", run.partial_takes);
	kr_conn_free(&conn);
	return run.failures ? 1 : 0;
}
