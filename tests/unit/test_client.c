/*
 * The public API (kreflect.h): misuse returns KR_EINVAL / KR_ESTATE /
 * KR_ENOSPC and never crashes; callbacks may call only the read-only
 * functions; the field getter reads values and refuses bad input.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"
#include "test.h"

/* Enough for the client with the small capacities below. */
static char mem[4u << 20] __attribute__((aligned(16)));
/* And for a directory sink (kr_dir_memory), an endpoint or hooks. */
static char dir_mem[4u << 20] __attribute__((aligned(16)));
static char listen_mem[1u << 20] __attribute__((aligned(16)));

/* A client of a plain-HTTP server nobody listens on: every connection is refused. */
static void small_config(struct kr_config *cfg)
{
	kr_config_init(cfg);
	cfg->server = "http://127.0.0.1:1";
	cfg->no_auto_source = 1;
	cfg->max_objects = 64;
	cfg->arena_bytes = 256 * 1024;
	cfg->log_level = 0;
}

static struct kr_client *new_client(void)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	char err[200];

	small_config(&cfg);
	if (kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) != 0)
		return NULL;
	return c;
}

KR_TEST(client, null_arguments_are_einval)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	struct kr_client_fd fds[4];
	struct kr_object o;
	struct kr_status st;
	char err[100], buf[8];
	int t;

	small_config(&cfg);
	check(kr_client_memory(NULL) == 0);
	check(kr_client_init(NULL, mem, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	check(kr_client_init(&c, NULL, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	check(kr_client_init(&c, mem, sizeof(mem), NULL, err, sizeof(err)) == KR_EINVAL);
	check(err[0] != '\0');
	check(kr_client_add_resource(NULL, "configmaps", err, sizeof(err)) == KR_EINVAL);
	check(kr_client_add(NULL, NULL, NULL, 0) == KR_EINVAL);
	check(kr_client_on_event(NULL, NULL, NULL) == KR_EINVAL);
	check(kr_client_on_state(NULL, NULL, NULL) == KR_EINVAL);
	check(kr_client_start(NULL, NULL, 0) == KR_EINVAL);
	check(kr_client_run(NULL) == KR_EINVAL);
	check(kr_client_stop(NULL) == KR_EINVAL);
	check(kr_client_fds(NULL, fds, 4, &t) == KR_EINVAL);
	check(kr_client_process(NULL, fds, 0) == KR_EINVAL);
	check(kr_client_get(NULL, 0, "a/b", &o) == KR_EINVAL);
	check(kr_client_foreach(NULL, 0, NULL, NULL) == KR_EINVAL);
	check(kr_client_status(NULL, 0, &st) == KR_EINVAL);
	check(kr_client_resources(NULL) == KR_EINVAL);
	check(kr_client_resource_name(NULL, 0) == NULL);
	check(kr_client_ready(NULL) == KR_EINVAL);
	check(kr_object_field(NULL, 0, "a", buf, sizeof(buf)) == KR_EINVAL);
	/* Memory that is not a client is not taken for one. */
	memset(mem, 0x5a, 4096);
	check(kr_client_start((struct kr_client *)(void *)mem, NULL, 0) == KR_EINVAL);
	return 0;
}

KR_TEST(client, memory_too_small_misaligned_or_capacities_out_of_range)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	char err[200];
	size_t need;

	small_config(&cfg);
	need = kr_client_memory(&cfg);
	check(need > 256 * 1024 && need <= sizeof(mem));
	check(kr_client_init(&c, mem, need - 1, &cfg, err, sizeof(err)) == KR_ENOSPC);
	check(strstr(err, "bytes of memory") != NULL && c == NULL);
	check(kr_client_init(&c, mem + 8, need, &cfg, err, sizeof(err)) == KR_EINVAL);
	check(kr_client_init(&c, mem, need, &cfg, err, sizeof(err)) == 0 && c != NULL);
	cfg.max_objects = (size_t)KR_MAX_OBJECTS_CEILING + 1;
	check(kr_client_memory(&cfg) == 0);
	check(kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	small_config(&cfg);
	cfg.arena_bytes = KR_ARENA_MIN - 1;
	check(kr_client_memory(&cfg) == 0);
	small_config(&cfg);
	cfg.page_size = -1;
	check(kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	small_config(&cfg);
	cfg.no_auto_source = 1;
	cfg.server = NULL;
	check(kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "server") != NULL);
	/* A memory budget alone: the whole reservation stays inside it. */
	small_config(&cfg);
	cfg.max_objects = 0;
	cfg.arena_bytes = 0;
	cfg.memory_bytes = 3u << 20;
	need = kr_client_memory(&cfg);
	check(need > 0 && need <= cfg.memory_bytes);
	/* Less than the client itself: refused, never the default arena instead. */
	cfg.memory_bytes = 512u * 1024u;
	check(kr_client_memory(&cfg) == 0);
	return 0;
}

KR_TEST(client, calls_in_the_wrong_state_are_estate)
{
	struct kr_client *c = new_client();
	struct kr_client_fd fds[4];
	struct kr_object o;
	struct kr_status st;
	char err[200];
	int t, i;

	check(c != NULL);
	check(kr_client_run(c) == KR_ESTATE);
	check(kr_client_fds(c, fds, 4, &t) == KR_ESTATE);
	check(kr_client_process(c, fds, 0) == KR_ESTATE);
	check(kr_client_get(c, 0, "default/x", &o) == KR_EINVAL);  /* no resource yet */
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_add_resource(c, "no such", err, sizeof(err)) < 0 && err[0]);
	check(kr_client_get(c, 0, "default/x", &o) == KR_ESTATE);
	check(kr_client_status(c, 0, &st) == 0 && !st.synced && strcmp(st.resource, "configmaps") == 0);
	check(kr_client_status(c, 1, &st) == KR_EINVAL);
	for (i = 1; i < KR_MAX_RESOURCES; i++)
		check(kr_client_add_resource(c, "secrets", err, sizeof(err)) == i);
	check(kr_client_add_resource(c, "secrets", err, sizeof(err)) == KR_ENOSPC);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == KR_ESTATE);
	check(kr_client_add_resource(c, "pods", err, sizeof(err)) == KR_ESTATE);
	check(kr_client_get(c, 0, "default/x", &o) == KR_ENOENT);
	check(kr_client_fds(c, fds, 4, NULL) == KR_EINVAL);
	check(kr_client_process(c, NULL, 2) == KR_EINVAL);
	check(kr_client_stop(c) == 0);
	check(kr_client_stop(c) == 0);                 /* idempotent */
	check(kr_client_run(c) == 0);                  /* stopped: returns at once */
	check(kr_client_fds(c, fds, 4, &t) == 0 && t == -1);
	check(kr_client_start(c, err, sizeof(err)) == KR_ESTATE);
	return 0;
}

static struct {
	struct kr_client *c;
	int calls, start, add, run, process, fds, get, status, stop, dir, dir_stats, hooks_flush, hooks_stats;
	int program, program_status;
} cb;

static void on_state(void *arg, const struct kr_state_change *st)
{
	struct kr_client_fd fds[2];
	struct kr_object o;
	struct kr_status s;
	struct kr_dir_config dc;
	struct kr_dir_stats ds;
	struct kr_hooks_stats hs;
	struct kr_program_config pc;
	struct kr_program_status ps;
	static const char *const prog[] = { "/bin/true", NULL };
	char err[100];
	int t;

	(void)arg;
	if (st->state != KR_HEALTH_BACKOFF || cb.calls++)
		return;
	kr_dir_config_init(&dc);
	dc.path = "/nonexistent/kreflect-unit";
	cb.start = kr_client_start(cb.c, err, sizeof(err));
	cb.add = kr_client_add_resource(cb.c, "pods", err, sizeof(err));
	cb.run = kr_client_run(cb.c);
	cb.process = kr_client_process(cb.c, fds, 0);
	cb.fds = kr_client_fds(cb.c, fds, 2, &t);
	cb.get = kr_client_get(cb.c, 0, "default/x", &o);
	cb.status = kr_client_status(cb.c, 0, &s);
	cb.dir = kr_client_dir(cb.c, dir_mem, sizeof(dir_mem), &dc, err, sizeof(err));
	cb.dir_stats = kr_client_dir_stats(cb.c, &ds);
	cb.hooks_flush = kr_client_hooks_flush(cb.c);
	cb.hooks_stats = kr_client_hooks_stats(cb.c, &hs);
	kr_program_config_init(&pc);
	pc.argv = prog;
	cb.program = kr_client_program(cb.c, listen_mem, sizeof(listen_mem), &pc, err, sizeof(err));
	cb.program_status = kr_client_program_status(cb.c, &ps);
	cb.stop = kr_client_stop(cb.c);
}

/* Drives the client from a poll() loop of our own until it stops or 5 s pass. */
static int drive(struct kr_client *c)
{
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	struct pollfd pfd[KR_CLIENT_MAX_FDS];
	kr_ms_t end = kr_port_now_ms() + 5000;
	int n, i, t;

	while (kr_port_now_ms() < end) {
		n = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
		if (n < 0)
			return n;
		if (n == 0 && t < 0)
			return 0;                      /* stopped */
		for (i = 0; i < n; i++) {
			pfd[i].fd = fds[i].fd;
			pfd[i].events = (short)((fds[i].events & KR_POLLIN ? POLLIN : 0) |
						(fds[i].events & KR_POLLOUT ? POLLOUT : 0));
		}
		if (poll(pfd, (nfds_t)n, t < 0 || t > 100 ? 100 : t) < 0)
			return KR_EIO;
		for (i = 0; i < n; i++)
			fds[i].revents = (short)((pfd[i].revents & POLLIN ? KR_POLLIN : 0) |
						 (pfd[i].revents & POLLOUT ? KR_POLLOUT : 0) |
						 (pfd[i].revents & (POLLERR | POLLHUP) ? KR_POLLERR : 0));
		if (kr_client_process(c, fds, n) < 0)
			return KR_EIO;
	}
	return KR_ETIMEDOUT;
}

KR_TEST(client, a_callback_may_only_read_and_stop)
{
	struct kr_client *c = new_client();
	char err[200];

	check(c != NULL);
	memset(&cb, 0, sizeof(cb));
	cb.c = c;
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_on_state(c, on_state, NULL) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	/* The refused connection backs off: the callback runs, tries everything, stops. */
	check(drive(c) == 0);
	check(cb.calls == 1);
	check(cb.start == KR_ESTATE && cb.add == KR_ESTATE && cb.run == KR_ESTATE);
	check(cb.process == KR_ESTATE && cb.fds == KR_ESTATE);
	check(cb.get == KR_ENOENT && cb.status == 0 && cb.stop == 0);
	check(cb.dir == KR_ESTATE && cb.dir_stats == KR_ESTATE);  /* no sink; the read is legal */
	check(cb.hooks_flush == KR_ESTATE && cb.hooks_stats == 0);
	check(cb.program == KR_ESTATE && cb.program_status == KR_ESTATE);
	return 0;
}

static void nop_event(void *arg, const struct kr_event *ev)
{
	(void)arg;
	(void)ev;
}

KR_TEST(client, callbacks_have_a_bound)
{
	struct kr_client *c = new_client();
	int i;

	check(c != NULL);
	for (i = 0; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_on_event(c, nop_event, NULL) == KR_ENOSPC);
	check(kr_client_on_event(c, NULL, NULL) == KR_EINVAL);
	return 0;
}

/* kr_client_dir (1.1): the sized configuration, every misuse in words, the bounds, the close at stop. */
KR_TEST(client, the_directory_sink_before_start)
{
	struct kr_client *c = new_client();
	struct kr_dir_config dc, big[2];
	struct kr_dir_stats st;
	char err[200], tmp[] = "/tmp/kreflect-clientdir-XXXXXX", root[64], file[96], rm[128];
	size_t need;
	int i, fd;

	check(c != NULL);
	check(mkdtemp(tmp) != NULL);
	snprintf(root, sizeof(root), "%s/out", tmp);
	kr_dir_config_init(&dc);
	check(dc.struct_size == sizeof(dc) && !dc.path && dc.layout == KR_DIR_LAYOUT_FLAT &&
	      dc.sync == KR_DIR_SYNC_BATCH && !dc.sweep_by_scope);
	kr_dir_config_init_size(NULL, sizeof(dc));               /* ignored */
	kr_dir_config_init_size(&dc, 4);                          /* too small: left alone */
	check(dc.struct_size == sizeof(dc));
	dc.path = root;
	need = kr_dir_memory(&dc);
	check(need > 0 && need <= sizeof(dir_mem) && need % 16 == 0);
	check(kr_dir_memory(NULL) == 0);
	dc.max_files = (size_t)-1;                               /* above the compile-time most */
	check(kr_dir_memory(&dc) == 0);
	check(kr_client_dir(c, dir_mem, sizeof(dir_mem), &dc, err, sizeof(err)) == KR_EINVAL && err[0]);
	dc.max_files = 0;
	/* No client, memory, configuration; one not made by its init; unaligned; too small. */
	check(kr_client_dir(NULL, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "client"));
	check(kr_client_dir(c, NULL, need, &dc, err, sizeof(err)) == KR_EINVAL && err[0]);
	check(kr_client_dir(c, dir_mem, need, NULL, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_dir_config_init"));
	dc.struct_size = 0;
	check(kr_dir_memory(&dc) == 0);
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_dir_config_init"));
	dc.struct_size = sizeof(dc);
	check(kr_client_dir(c, dir_mem + 8, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "aligned"));
	check(kr_client_dir(c, dir_mem, need - 1, &dc, err, sizeof(err)) == KR_ENOSPC && strstr(err, "bytes"));
	/* Enums and modes out of range, a path missing, a root that is a file. */
	dc.layout = (enum kr_dir_layout)2;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "layout"));
	dc.layout = KR_DIR_LAYOUT_OBJECT;
	dc.sync = (enum kr_dir_sync)-1;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "sync"));
	dc.sync = KR_DIR_SYNC_EACH;
	dc.file_mode = 01000;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "0777"));
	dc.file_mode = 0640;
	dc.path = NULL;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL && strstr(err, "no path"));
	snprintf(file, sizeof(file), "%s/file", tmp);
	fd = open(file, O_WRONLY | O_CREAT, 0600);
	check(fd >= 0);
	close(fd);
	dc.path = file;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "not a directory"));
	/* A newer caller's longer struct: taken while its extra bytes are zero. */
	memset(big, 0, sizeof(big));
	kr_dir_config_init_size(&big[0], sizeof(big));
	big[0].path = root;
	check(kr_dir_memory(&big[0]) == need);
	((unsigned char *)big)[sizeof(dc) + 5] = 1;
	check(kr_dir_memory(&big[0]) == 0);
	check(kr_client_dir(c, dir_mem, need, &big[0], err, sizeof(err)) == KR_ENOTSUP &&
	      strstr(err, "does not have"));
	/* No sink yet: no counts. */
	check(kr_client_dir_stats(c, &st) == KR_ESTATE);
	check(kr_client_dir_stats(NULL, &st) == KR_EINVAL);
	check(kr_client_dir_stats(c, NULL) == KR_EINVAL);
	/* Set up: the root made, counted from zero; once only. */
	dc.path = root;
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == 0 && err[0] == '\0');
	check(kr_port_fs_is_dir(root) == 0);
	check(kr_client_dir_stats(c, &st) == 0 && st.written == 0 && st.errors == 0 && st.files == 0);
	check(kr_client_dir(c, dir_mem, need, &dc, err, sizeof(err)) == KR_ESTATE && strstr(err, "once"));
	/* It took one of the callbacks: the rest are the caller's. */
	for (i = 1; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_on_event(c, nop_event, NULL) == KR_ENOSPC);
	check(kr_client_stop(c) == 0);
	check(kr_client_dir_stats(c, &st) == 0);                 /* the counts stay after the close */
	check(kr_client_stop(c) == 0);                           /* the close once */
	snprintf(rm, sizeof(rm), "rm -rf '%s'", tmp);
	check(system(rm) == 0);
	return 0;
}

KR_TEST(client, the_directory_sink_needs_a_callback_and_no_start)
{
	struct kr_client *c = new_client();
	struct kr_dir_config dc;
	char err[200], tmp[] = "/tmp/kreflect-clientdir-XXXXXX", rm[128];
	int i;

	check(c != NULL);
	check(mkdtemp(tmp) != NULL);
	kr_dir_config_init(&dc);
	dc.path = tmp;
	for (i = 0; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_dir(c, dir_mem, sizeof(dir_mem), &dc, err, sizeof(err)) == KR_ENOSPC &&
	      strstr(err, "callback"));
	c = new_client();
	check(c != NULL);
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_dir(c, dir_mem, sizeof(dir_mem), &dc, err, sizeof(err)) == KR_ESTATE &&
	      strstr(err, "before kr_client_start"));
	check(kr_client_stop(c) == 0);
	check(kr_client_dir(c, dir_mem, sizeof(dir_mem), &dc, err, sizeof(err)) == KR_ESTATE);
	snprintf(rm, sizeof(rm), "rm -rf '%s'", tmp);
	check(system(rm) == 0);
	return 0;
}

/* kr_client_jsonl (1.1): every misuse, the memory bound exactly, once, before start, a callback. */
KR_TEST(client, the_json_lines_before_start)
{
	struct kr_client *c = new_client();
	size_t need = kr_jsonl_memory();
	int p[2], i;
	char byte;

	check(c != NULL);
	check(need >= KR_JSONL_BUFFER_BYTES && need % 16 == 0 && need <= sizeof(dir_mem));
	check(pipe(p) == 0);
	check(kr_client_jsonl(NULL, dir_mem, need, p[1]) == KR_EINVAL);
	check(kr_client_jsonl(c, NULL, need, p[1]) == KR_EINVAL);
	check(kr_client_jsonl(c, dir_mem + 8, need, p[1]) == KR_EINVAL);   /* not 16-byte aligned */
	check(kr_client_jsonl(c, dir_mem, need, -1) == KR_EINVAL);
	check(kr_client_jsonl(c, dir_mem, need - 1, p[1]) == KR_ENOSPC);   /* one byte short */
	check(kr_client_jsonl(c, dir_mem, need, p[1]) == 0);               /* exactly enough */
	check(kr_client_jsonl(c, dir_mem, need, p[1]) == KR_ESTATE);       /* once */
	check(kr_client_stop(c) == 0);                                     /* nothing gathered: no write */
	check(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0 && read(p[0], &byte, 1) < 0);
	check(kr_client_jsonl(c, dir_mem, need, p[1]) == KR_ESTATE);       /* stopped */

	c = new_client();                                                  /* every callback taken */
	check(c != NULL);
	for (i = 0; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_jsonl(c, dir_mem, need, p[1]) == KR_ENOSPC);
	c = new_client();                                                  /* started */
	check(c != NULL);
	check(kr_client_add_resource(c, "configmaps", NULL, 0) == 0);
	check(kr_client_start(c, NULL, 0) == 0);
	check(kr_client_jsonl(c, dir_mem, need, p[1]) == KR_ESTATE);
	check(kr_client_stop(c) == 0);
	close(p[0]);
	close(p[1]);
	return 0;
}

static int got_signal;

static void stop_on_signal(void *arg, int sig)
{
	got_signal = sig;
	kr_client_stop(arg);               /* legal here: called from the loop, not a handler */
}

static void stop_on_timer(void *arg, int slot)
{
	(void)slot;
	kr_client_stop(arg);
}

/*
 * kr_client_signals (1.1): misuse, once, a signal raised while blocked
 * reaches fn from kr_client_run; kr_client_hooks_wait with no hooks returns
 * at once, 1 after a stop ended it, and not from a callback (fuzz_api).
 */
KR_TEST(client, signals_and_the_hooks_wait)
{
	struct kr_client *c = new_client();
	sigset_t set;

	check(c != NULL);
	check(kr_client_signals(NULL, stop_on_signal, c) == KR_EINVAL);
	check(kr_client_signals(c, NULL, c) == KR_EINVAL);
	check(kr_client_hooks_wait(NULL) == KR_EINVAL);
	check(kr_client_hooks_wait(c) == 0);                    /* no hooks: done at once */
	check(kr_client_signals(c, stop_on_signal, c) == 0);
	check(kr_client_signals(c, stop_on_signal, c) == KR_ESTATE);   /* once */
	check(kr_client_add_resource(c, "configmaps", NULL, 0) == 0);
	check(kr_client_start(c, NULL, 0) == 0);
	check(kr_client_timer(c, 0, 2000, stop_on_timer, c) == 0);    /* a bound, if it never came */
	got_signal = 0;
	check(raise(SIGUSR2) == 0);                             /* blocked: it waits on the descriptor */
	check(got_signal == 0);
	check(kr_client_run(c) == 0);
	check(got_signal == SIGUSR2);
	check(kr_client_hooks_wait(c) == 0);                    /* stopped before: no hooks, done */
	check(kr_client_signals(c, stop_on_signal, c) == KR_ESTATE);   /* stopped */
	sigfillset(&set);
	check(sigprocmask(SIG_UNBLOCK, &set, NULL) == 0);      /* the other tests as before */
	return 0;
}

/* kr_client_hooks (1.1): the sized configuration, every misuse in words, each kind once, the counts. */
KR_TEST(client, the_hooks_before_start)
{
	struct kr_client *c = new_client();
	struct kr_hooks_config hc, post, big[2];
	struct kr_hooks_stats st;
	char err[200];
	size_t need;
	int i;

	check(c != NULL);
	kr_hooks_config_init(&hc);
	check(hc.struct_size == sizeof(hc) && hc.debounce_ms == 1000 && !hc.exec && !hc.http_post &&
	      !hc.method && !hc.urllib3);
	kr_hooks_config_init_size(NULL, sizeof(hc));             /* ignored */
	kr_hooks_config_init_size(&hc, 4);                        /* too small: left alone */
	check(hc.struct_size == sizeof(hc));
	check(kr_hooks_memory(NULL) == 0);
	check(kr_hooks_memory(&hc) == 0);                         /* names no hook */
	check(kr_client_hooks(c, dir_mem, sizeof(dir_mem), &hc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "names no"));
	hc.exec = "/bin/true --flag";
	need = kr_hooks_memory(&hc);
	check(need > 0 && need % 16 == 0 && need <= sizeof(dir_mem));
	hc.debounce_ms = -1;
	check(kr_hooks_memory(&hc) == 0);
	check(kr_client_hooks(c, dir_mem, need, &hc, err, sizeof(err)) == KR_EINVAL && strstr(err, "negative"));
	hc.debounce_ms = 0;
	/* No client, memory, configuration; one not made by its init; unaligned; too small. */
	check(kr_client_hooks(NULL, dir_mem, need, &hc, err, sizeof(err)) == KR_EINVAL && strstr(err, "client"));
	check(kr_client_hooks(c, NULL, need, &hc, err, sizeof(err)) == KR_EINVAL && err[0]);
	check(kr_client_hooks(c, dir_mem + 8, need, &hc, err, sizeof(err)) == KR_EINVAL && strstr(err, "aligned"));
	check(kr_client_hooks(c, dir_mem, need, NULL, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_hooks_config_init"));
	hc.struct_size = 0;
	check(kr_hooks_memory(&hc) == 0);
	check(kr_client_hooks(c, dir_mem, need, &hc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_hooks_config_init"));
	hc.struct_size = sizeof(hc);
	check(kr_client_hooks(c, dir_mem, need - 1, &hc, err, sizeof(err)) == KR_ENOSPC && strstr(err, "bytes"));
	/* A newer caller's longer struct: taken while its extra bytes are zero. */
	memset(big, 0, sizeof(big));
	kr_hooks_config_init_size(&big[0], sizeof(big));
	check(big[0].debounce_ms == 1000);
	big[0].exec = hc.exec;
	check(kr_hooks_memory(&big[0]) == need);
	((unsigned char *)big)[sizeof(hc) + 2] = 1;
	check(kr_hooks_memory(&big[0]) == 0);
	check(kr_client_hooks(c, dir_mem, need, &big[0], err, sizeof(err)) == KR_ENOTSUP &&
	      strstr(err, "does not have"));
	/* What the parts refuse, in their words. */
	hc.exec = "/bin/true 'open";
	check(kr_client_hooks(c, dir_mem, need, &hc, err, sizeof(err)) == KR_EINVAL && err[0]);
	hc.exec = "/bin/true --flag";
	kr_hooks_config_init(&post);
	post.http_post = "ftp://127.0.0.1/x";
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &post, err, sizeof(err)) == KR_EINVAL && err[0]);
	post.http_post = "http://127.0.0.1:9/hook";
	post.method = "PUT";
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &post, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "GET or POST"));
	post.method = NULL;
	/* No hook yet: empty counts; nothing to flush; no child of ours. */
	check(kr_client_hooks_stats(c, &st) == 0 && !st.command && !st.post_url && !st.runs);
	check(kr_client_hooks_stats(NULL, &st) == KR_EINVAL && kr_client_hooks_stats(c, NULL) == KR_EINVAL);
	check(kr_client_hooks_flush(c) == 0 && kr_client_hooks_flush(NULL) == KR_EINVAL);
	check(kr_client_child_exited(c, 4242, 0) == 0 && kr_client_child_exited(NULL, 4242, 0) == KR_EINVAL);
	/* The command, then the POST, each once. */
	check(kr_client_hooks(c, dir_mem, need, &hc, err, sizeof(err)) == 0 && err[0] == '\0');
	check(kr_client_hooks(c, dir_mem, need, &hc, err, sizeof(err)) == KR_ESTATE && strstr(err, "once"));
	check(kr_hooks_memory(&post) <= sizeof(listen_mem));
	check(kr_client_hooks(c, listen_mem, kr_hooks_memory(&post), &post, err, sizeof(err)) == 0);
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &post, err, sizeof(err)) == KR_ESTATE);
	check(kr_client_hooks_stats(c, &st) == 0);
	check(st.command && strcmp(st.command, "/bin/true") == 0 && st.command_pid == 0 && st.runs == 0);
	check(st.post_url && strstr(st.post_url, "127.0.0.1:9") && st.post_host &&
	      strcmp(st.post_host, "127.0.0.1") == 0 && st.post_port == 9 && st.post_loopback == 1 && !st.post_busy);
	check(kr_client_hooks_flush(c) == 0);                     /* not synced: nothing collected */
	check(kr_client_child_exited(c, 4242, 0) == 0);           /* not the command's */
	/* Two callbacks taken: the rest are the caller's. */
	for (i = 2; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_on_event(c, nop_event, NULL) == KR_ENOSPC);
	return 0;
}

KR_TEST(client, the_hooks_need_callbacks_and_no_start)
{
	struct kr_client *c = new_client();
	struct kr_hooks_config hc;
	char err[200];
	int i;

	check(c != NULL);
	kr_hooks_config_init(&hc);
	hc.signal = 10;
	hc.signal_pid = 1;
	hc.http_post = "http://127.0.0.1:9/hook";
	/* Both kinds need two callbacks; one left is not enough, and nothing is added. */
	for (i = 1; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &hc, err, sizeof(err)) == KR_ENOSPC &&
	      strstr(err, "callback"));
	hc.http_post = NULL;
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &hc, err, sizeof(err)) == 0);
	c = new_client();
	check(c != NULL);
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_hooks(c, listen_mem, sizeof(listen_mem), &hc, err, sizeof(err)) == KR_ESTATE &&
	      strstr(err, "before kr_client_start"));
	check(kr_client_stop(c) == 0);
	return 0;
}

/* kr_client_program (1.1): the sized configuration, every misuse in words, once, its state. */
KR_TEST(client, the_program_before_start)
{
	static const char *const prog[] = { "/bin/true", "--flag", NULL };
	static const char *const none[] = { NULL };
	static const char *words[KR_SUPERVISE_ARGS + 2];
	struct kr_client *c = new_client();
	struct kr_program_config pc, big[2];
	struct kr_program_status st;
	char err[200];
	size_t need;
	int i;

	check(c != NULL);
	kr_program_config_init(&pc);
	check(pc.struct_size == sizeof(pc) && pc.change_signal == SIGHUP && pc.grace_ms == 10000 &&
	      pc.debounce_ms == 1000 && !pc.argv && !pc.restart && !pc.on_end);
	kr_program_config_init_size(NULL, sizeof(pc));           /* ignored */
	kr_program_config_init_size(&pc, 4);                      /* too small: left alone */
	check(pc.struct_size == sizeof(pc));
	need = kr_program_memory(&pc);
	check(need > 0 && need % 16 == 0 && need <= sizeof(listen_mem));
	check(kr_program_memory(NULL) == 0);
	/* No client, memory, configuration; one not made by its init; unaligned; too small. */
	pc.argv = prog;
	check(kr_client_program(NULL, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL && strstr(err, "client"));
	check(kr_client_program(c, NULL, need, &pc, err, sizeof(err)) == KR_EINVAL && err[0]);
	check(kr_client_program(c, listen_mem + 8, need, &pc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "aligned"));
	check(kr_client_program(c, listen_mem, need, NULL, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_program_config_init"));
	pc.struct_size = 0;
	check(kr_program_memory(&pc) == 0);
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_program_config_init"));
	pc.struct_size = sizeof(pc);
	check(kr_client_program(c, listen_mem, need - 1, &pc, err, sizeof(err)) == KR_ENOSPC && strstr(err, "bytes"));
	memset(big, 0, sizeof(big));
	kr_program_config_init_size(&big[0], sizeof(big));
	big[0].argv = prog;
	check(kr_program_memory(&big[0]) == need);
	((unsigned char *)big)[sizeof(pc) + 3] = 1;
	check(kr_program_memory(&big[0]) == 0);
	check(kr_client_program(c, listen_mem, need, &big[0], err, sizeof(err)) == KR_ENOTSUP &&
	      strstr(err, "does not have"));
	/* No program, one word too many (the bound), a negative time. */
	pc.argv = NULL;
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL && strstr(err, "no program"));
	pc.argv = none;
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL && strstr(err, "no program"));
	for (i = 0; i < KR_SUPERVISE_ARGS + 1; i++)
		words[i] = "/bin/true";
	words[i] = NULL;
	pc.argv = words;
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "KR_SUPERVISE_ARGS"));
	words[KR_SUPERVISE_ARGS] = NULL;                          /* exactly the most: taken below */
	pc.grace_ms = -1;
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_EINVAL && strstr(err, "negative"));
	pc.grace_ms = 0;
	/* Not yet: no state; no signal taken; no child of its. */
	check(kr_client_program_status(c, &st) == KR_ESTATE);
	check(kr_client_program_status(NULL, &st) == KR_EINVAL && kr_client_program_status(c, NULL) == KR_EINVAL);
	check(kr_client_program_signal(c, SIGTERM) == 0 && kr_client_program_signal(NULL, SIGTERM) == KR_EINVAL);
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == 0 && err[0] == '\0');
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_ESTATE && strstr(err, "once"));
	check(kr_client_program_status(c, &st) == 0 && st.pid == 0 && !st.ended && st.starts == 0);
	check(kr_client_program_signal(c, SIGTERM) == 0);         /* not running: the host's to act on */
	check(kr_client_child_exited(c, 4242, 0) == 0);
	for (i = 1; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_on_event(c, nop_event, NULL) == KR_ENOSPC);
	c = new_client();
	check(c != NULL);
	for (i = 0; i < KR_CLIENT_MAX_CALLBACKS; i++)
		check(kr_client_on_event(c, nop_event, NULL) == 0);
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_ENOSPC && strstr(err, "callback"));
	c = new_client();
	check(c != NULL);
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_program(c, listen_mem, need, &pc, err, sizeof(err)) == KR_ESTATE &&
	      strstr(err, "before kr_client_start"));
	check(kr_client_stop(c) == 0);
	return 0;
}

static const char cm[] =
	"{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"gw\",\"namespace\":\"edge\","
	"\"labels\":{\"app\":\"gateway\",\"tier\":\"edge\"},"
	"\"annotations\":{\"example.com/owner\":\"ops\"}},"
	"\"data\":{\"log-level\":\"debug\",\"interval\":\"30\",\"quoted\":\"a \\\"b\\\" \\u00e9\\n\","
	"\"esc\\u0061ped\":\"key escaped\",\"list\":[1,{\"x\":\"}\"}],\"n\":null},"
	"\"spec\":{\"replicas\":3,\"paused\":false,\"ratio\":-1.5e3}}";

KR_TEST(client, field_reads_strings_numbers_and_booleans)
{
	char buf[64];

	check(kr_object_field(cm, sizeof(cm) - 1, "data.log-level", buf, sizeof(buf)) == 5);
	check(strcmp(buf, "debug") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "metadata.labels.tier", buf, sizeof(buf)) == 4);
	check(strcmp(buf, "edge") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.quoted", buf, sizeof(buf)) > 0);
	check(strcmp(buf, "a \"b\" \xc3\xa9\n") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.escaped", buf, sizeof(buf)) > 0);
	check(strcmp(buf, "key escaped") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "metadata.annotations.example\\.com/owner", buf,
			      sizeof(buf)) == 3 && strcmp(buf, "ops") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "spec.replicas", buf, sizeof(buf)) == 1);
	check(strcmp(buf, "3") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "spec.paused", buf, sizeof(buf)) == 5);
	check(strcmp(buf, "false") == 0);
	check(kr_object_field(cm, sizeof(cm) - 1, "spec.ratio", buf, sizeof(buf)) == 6);
	check(strcmp(buf, "-1.5e3") == 0);
	return 0;
}

KR_TEST(client, field_refuses_what_is_not_a_value)
{
	char buf[8], big[64];

	check(kr_object_field(cm, sizeof(cm) - 1, "data.missing", big, sizeof(big)) == KR_ENOENT);
	check(kr_object_field(cm, sizeof(cm) - 1, "data", big, sizeof(big)) == KR_ENOENT);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.list", big, sizeof(big)) == KR_ENOENT);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.n", big, sizeof(big)) == KR_ENOENT);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.log-level.x", big, sizeof(big)) == KR_ENOENT);
	check(kr_object_field(cm, sizeof(cm) - 1, "data..x", big, sizeof(big)) == KR_EINVAL);
	check(kr_object_field(cm, sizeof(cm) - 1, "", big, sizeof(big)) == KR_ENOENT);
	/* The bound: 5 bytes and a NUL fit in 6, not in 5. */
	check(kr_object_field(cm, sizeof(cm) - 1, "data.log-level", buf, 6) == 5);
	check(kr_object_field(cm, sizeof(cm) - 1, "data.log-level", buf, 5) == KR_ENOSPC);
	check(buf[0] == '\0');
	check(kr_object_field(cm, sizeof(cm) - 1, "spec.paused", buf, 5) == KR_ENOSPC);
	check(kr_object_field("[1]", 3, "a", big, sizeof(big)) == KR_EINVAL);
	check(kr_object_field("{\"a\":\"x\" \"b\":1}", 15, "b", big, sizeof(big)) == KR_EINVAL);
	check(kr_object_field(cm, 0, "data.n", big, sizeof(big)) == KR_EINVAL);
	return 0;
}

KR_TEST(client, field_never_reads_past_a_cut_object)
{
	char buf[64];
	size_t len;

	/* Every prefix: a value that is whole in it, or an error; ASan watches the bounds. */
	for (len = 0; len < sizeof(cm) - 1; len++) {
		char *cut = malloc(len ? len : 1);     /* exactly len bytes: ASan sees one more */
		int r;

		check(cut != NULL);
		memcpy(cut, cm, len);
		r = kr_object_field(cut, len, "spec.ratio", buf, sizeof(buf));
		check(r == KR_EINVAL || r == KR_ENOENT || (r > 0 && strncmp(buf, "-1.5e3", (size_t)r) == 0));
		r = kr_object_field(cut, len, "data.quoted", buf, sizeof(buf));
		free(cut);
		check(r == KR_EINVAL || r == KR_ENOENT || r > 0);
	}
	return 0;
}

KR_TEST(client, the_endpoint_opens_once_after_start)
{
	struct kr_client *c = new_client();
	struct kr_listen_config lc;
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	char err[200];
	size_t need;
	int n, t, before;

	check(c != NULL);
	memset(&lc, 0, sizeof(lc));
	lc.address = "127.0.0.1:0";
	lc.max_conns = 4;
	need = kr_listen_memory(&lc);
	check(need > 0 && need <= sizeof(listen_mem));
	lc.max_conns = 100000;
	check(kr_listen_memory(&lc) == 0);
	lc.max_conns = 4;
	check(kr_client_listen(NULL, listen_mem, need, &lc, err, sizeof(err)) == KR_EINVAL);
	check(kr_client_listen(c, listen_mem, need, &lc, err, sizeof(err)) == KR_ESTATE);
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_listen(c, listen_mem, need - 1, &lc, err, sizeof(err)) == KR_ENOSPC);
	check(kr_client_listen(c, listen_mem + 8, need, &lc, err, sizeof(err)) == KR_EINVAL);
	lc.address = "10.0.0.1:8080";                  /* not loopback and no token: refused */
	check(kr_client_listen(c, listen_mem, need, &lc, err, sizeof(err)) == KR_EINVAL && err[0]);
	lc.address = "0.0.0.0:0";                      /* any address for health checks alone */
	lc.health_only = 1;
	before = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
	check(before >= 0);
	check(kr_client_listen(c, listen_mem, need, &lc, err, sizeof(err)) == 0);
	check(kr_client_listen(c, listen_mem, need, &lc, err, sizeof(err)) == KR_ESTATE);
	n = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
	check(n == before + 1);                        /* the listening socket */
	check(kr_client_stop(c) == 0);
	check(kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t) == 0);
	return 0;
}

/* kr_client_timer (1.1): host timers under kr_client_run and kr_client_process. */
static struct {
	struct kr_client *c;
	int fired[KR_CLIENT_MAX_TIMERS], order[8], n, rearm, add, start, bad;
	void *arg;
} ht;

static void on_host_timer(void *arg, int slot)
{
	char err[100];

	ht.arg = arg;
	ht.fired[slot]++;
	if (ht.n < 8)
		ht.order[ht.n++] = slot;
	/* A callback: the calls it may make, kr_client_timer among them. */
	ht.add = kr_client_add_resource(ht.c, "pods", err, sizeof(err));
	ht.start = kr_client_start(ht.c, err, sizeof(err));
	if (slot == 1 && ht.rearm-- > 0 && kr_client_timer(ht.c, 1, 0, on_host_timer, arg) != 0)
		ht.bad++;
	if (slot == 3)
		kr_client_stop(ht.c);
}

KR_TEST(client, host_timers_fire_once_in_order_and_rearm)
{
	struct kr_client *c = new_client();
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	char err[200];
	int t, n, guard;
	kr_ms_t t0;

	check(c != NULL);
	memset(&ht, 0, sizeof(ht));
	ht.c = c;
	/* Misuse: every bound of slot and after_ms. */
	check(kr_client_timer(NULL, 0, 0, on_host_timer, NULL) == KR_EINVAL);
	check(kr_client_timer(c, -1, 0, on_host_timer, NULL) == KR_EINVAL);
	check(kr_client_timer(c, KR_CLIENT_MAX_TIMERS, 0, on_host_timer, NULL) == KR_EINVAL);
	check(kr_client_timer(c, 0, -1, on_host_timer, NULL) == KR_EINVAL);
	check(kr_client_timer(c, 0, 2147483648L, on_host_timer, NULL) == KR_EINVAL);
	check(kr_client_timer(c, 0, 2147483647L, on_host_timer, NULL) == 0);   /* armed before start */
	check(kr_client_timer(c, 0, 0, NULL, NULL) == 0);                      /* and disarmed */
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	/* Slot 2 later than 1, 0 replaced by a later time, 1 re-arms itself twice; 3 stops. */
	t0 = kr_port_now_ms();
	ht.rearm = 2;
	check(kr_client_timer(c, 0, 5, on_host_timer, &ht) == 0);
	check(kr_client_timer(c, 2, 30, on_host_timer, &ht) == 0);
	check(kr_client_timer(c, 1, 10, on_host_timer, &ht) == 0);
	check(kr_client_timer(c, 0, 60, on_host_timer, &ht) == 0);
	check(kr_client_timer(c, 3, 200, on_host_timer, &ht) == 0);
	/* The host's loop: kr_client_fds' timeout counts the host timers. */
	for (guard = 0; ht.fired[0] == 0 && guard < 1000; guard++) {
		n = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
		check(n >= 0 && t >= 0 && t <= 60);
		check(kr_client_process(c, fds, 0) >= 0);
		poll(NULL, 0, t > 0 ? t : 1);
	}
	check(ht.fired[0] == 1 && ht.fired[1] == 3 && ht.fired[2] == 1 && ht.fired[3] == 0);
	/* By deadline: 1 first, 2 (30 ms) before 0 (moved to 60 ms); a loaded machine may put 2
	 * between 1's re-arms, which are due at once. */
	check(ht.n == 5 && ht.order[0] == 1);
	for (n = 0; n < 5 && ht.order[n] != 2; n++)
		check(ht.order[n] != 0);
	check(kr_port_now_ms() - t0 >= 60 && ht.arg == &ht);
	check(ht.add == KR_ESTATE && ht.start == KR_ESTATE && !ht.bad);   /* not from a callback */
	/* kr_client_run fires them too; slot 3 stops the client. */
	check(kr_client_run(c) == 0 && ht.fired[3] == 1 && kr_port_now_ms() - t0 >= 200);
	check(kr_client_timer(c, 0, 0, on_host_timer, &ht) == KR_ESTATE);     /* stopped */
	return 0;
}

/*
 * kr_client_budget (1.1): every item once; the reserved ones are the client's
 * memory (what kr_client_memory counts) and the outputs' (kr_jsonl_memory,
 * kr_dir_memory, kr_hooks_memory, kr_program_memory: the CLI reserves them at
 * start-up too).
 */
struct budget_seen {
	int n, reserved, bad;
	size_t sum;                    /* of the client's own: arena, index, client */
};

static void on_budget(void *arg, const char *name, size_t bytes, int reserved, const char *why)
{
	struct budget_seen *b = arg;

	b->n++;
	if (!name || !name[0] || !why || (reserved != 0 && reserved != 1))
		b->bad++;
	if (reserved) {
		b->reserved++;
		if (strcmp(name, "arena") == 0 || strcmp(name, "index") == 0 || strcmp(name, "client") == 0)
			b->sum += bytes;
	}
}

KR_TEST(client, the_budget_item_by_item)
{
	struct kr_config cfg;
	struct budget_seen b;
	size_t objects = 0, arena = 0;
	int n;

	kr_config_init(&cfg);
	cfg.max_objects = 1000;
	cfg.arena_bytes = 1u << 20;
	memset(&b, 0, sizeof(b));
	n = kr_client_budget(&cfg, &objects, &arena, on_budget, &b);
	check(n > 4 && n == b.n && !b.bad && b.reserved == 4 + 3 * KR_WITH_HOOKS + KR_WITH_DIR + KR_WITH_LISTEN);
	check(objects == 1000 && arena == (1u << 20));
	/* the reserved items are the client's memory, but for its 16-byte roundings */
	check(b.sum <= kr_client_memory(&cfg) && kr_client_memory(&cfg) - b.sum < 64);
	check(kr_client_budget(&cfg, NULL, NULL, on_budget, &b) == n);
	/* Misuse: fn not called, nothing written. */
	memset(&b, 0, sizeof(b));
	objects = 7;
	check(kr_client_budget(NULL, &objects, NULL, on_budget, &b) == KR_EINVAL);
	check(kr_client_budget(&cfg, &objects, NULL, NULL, &b) == KR_EINVAL);
	cfg.max_objects = (size_t)KR_MAX_OBJECTS_CEILING + 1;     /* above the ceiling */
	check(kr_client_budget(&cfg, &objects, NULL, on_budget, &b) == KR_EINVAL);
	kr_config_init(&cfg);
	cfg.struct_size = 0;                                      /* not made by kr_config_init */
	check(kr_client_budget(&cfg, &objects, NULL, on_budget, &b) == KR_EINVAL);
	check(b.n == 0 && objects == 7);
	return 0;
}

/*
 * KR_ENDPOINT_MEMORY (config/kreflect_config.h), what a static buffer is sized
 * by: never below kr_endpoint_memory, not far above it, and enough to open.
 */
static char static_mem[KR_ENDPOINT_MEMORY(3)] __attribute__((aligned(16)));

KR_TEST(client, the_endpoint_fits_its_static_size)
{
	static const int conns[] = { 1, 2, 3, 17, KR_SERVE_MAX_CONNS };
	struct kr_client *c = new_client();
	struct kr_endpoint_config ec;
	char err[200];
	size_t i, need, bound;

	check(c != NULL);
	kr_endpoint_config_init(&ec);
	for (i = 0; i < sizeof(conns) / sizeof(conns[0]); i++) {
		ec.max_conns = conns[i];
		need = kr_endpoint_memory(&ec);
		bound = KR_ENDPOINT_MEMORY(conns[i]);
		check(need > 0 && need <= bound);
		check(bound - need < 8192u + (size_t)conns[i] * 1024u);
	}
	ec.max_conns = 0;                              /* the default: the most */
	check(kr_endpoint_memory(&ec) <= KR_ENDPOINT_MEMORY(KR_SERVE_MAX_CONNS));
	ec.address = "127.0.0.1:0";
	ec.max_conns = 4;                              /* one more than the buffer holds */
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	check(kr_client_endpoint(c, static_mem, sizeof(static_mem), &ec, err, sizeof(err)) == KR_ENOSPC);
	ec.max_conns = 3;
	check(kr_client_endpoint(c, static_mem, sizeof(static_mem), &ec, err, sizeof(err)) == 0);
	check(kr_client_stop(c) == 0);
	return 0;
}

/* kr_client_endpoint (1.1): the sized configuration, every misuse in words, where it listens. */
KR_TEST(client, the_endpoint_with_every_option)
{
	struct kr_client *c = new_client();
	struct kr_endpoint_config ec, big[2];
	struct kr_listen_config lc = { "127.0.0.1:0", NULL, 4, 0, 0, 0, 0, 0 };
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	char err[200], where[64];
	size_t need;
	int t, token = -1, before;

	check(c != NULL);
	kr_endpoint_config_init(&ec);
	check(ec.struct_size == sizeof(ec) && !ec.address && !ec.max_conns && !ec.healthz_ready);
	kr_endpoint_config_init_size(NULL, sizeof(ec));          /* ignored */
	ec.address = "127.0.0.1:0";
	ec.max_conns = 4;
	need = kr_endpoint_memory(&ec);
	check(need > 0 && need <= sizeof(listen_mem));
	check(kr_endpoint_memory(NULL) == 0);
	ec.max_conns = 100000;
	check(kr_endpoint_memory(&ec) == 0);
	ec.max_conns = 4;
	/* Not started, no client, no configuration, one not made by its init. */
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_ESTATE && err[0]);
	check(kr_client_endpoint(NULL, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL && err[0]);
	check(kr_client_endpoint(c, listen_mem, need, NULL, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_endpoint_config_init"));
	ec.struct_size = 0;
	check(kr_endpoint_memory(&ec) == 0);
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL &&
	      strstr(err, "kr_endpoint_config_init"));
	/* A newer caller's longer struct: taken while its extra bytes are zero. */
	memset(big, 0, sizeof(big));
	kr_endpoint_config_init_size(&big[0], sizeof(big));
	big[0].address = "127.0.0.1:0";
	kr_endpoint_config_init(&ec);
	check(kr_endpoint_memory(&big[0]) == kr_endpoint_memory(&ec));
	((unsigned char *)big)[sizeof(ec) + 3] = 1;
	check(kr_endpoint_memory(&big[0]) == 0);
	check(kr_client_endpoint(c, listen_mem, need, &big[0], err, sizeof(err)) == KR_ENOTSUP &&
	      strstr(err, "does not have"));
	kr_endpoint_config_init(&ec);
	ec.address = "127.0.0.1:0";
	ec.max_conns = 4;
	check(kr_client_endpoint_where(c, where, sizeof(where), &token) == KR_ESTATE && where[0] == '\0');
	check(kr_client_add_resource(c, "configmaps", err, sizeof(err)) == 0);
	check(kr_client_start(c, err, sizeof(err)) == 0);
	/* Times out of range, each bound. */
	ec.ready_silence_s = 86401;
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL && strstr(err, "range"));
	ec.ready_silence_s = 0;
	ec.idle_s = 3601;
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL);
	ec.idle_s = 0;
	ec.bookmark_s = -1;
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL);
	ec.bookmark_s = 3600;
	check(kr_client_endpoint(c, listen_mem, need - 1, &ec, err, sizeof(err)) == KR_ENOSPC);
	check(kr_client_endpoint(c, listen_mem + 8, need, &ec, err, sizeof(err)) == KR_EINVAL);
	/* Not loopback: a token or a client CA, and TLS or insecure. */
	ec.address = "10.0.0.1:8080";
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_EINVAL && err[0]);
	ec.address = "127.0.0.1:0";
	ec.healthz_ready = 1;
	before = kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t);
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == 0 && err[0] == '\0');
	check(kr_client_fds(c, fds, KR_CLIENT_MAX_FDS, &t) == before + 1);
	check(kr_client_endpoint(c, listen_mem, need, &ec, err, sizeof(err)) == KR_ESTATE);
	check(kr_client_listen(c, listen_mem, need, &lc, err, sizeof(err)) == KR_ESTATE);
	/* Where: the address, no token; each misuse; a buffer too small holds "". */
	check(kr_client_endpoint_where(c, where, sizeof(where), &token) == 0);
	check(strncmp(where, "127.0.0.1:", 10) == 0 && token == 0);
	check(kr_client_endpoint_where(c, where, sizeof(where), NULL) == 0);
	check(kr_client_endpoint_where(NULL, where, sizeof(where), &token) == KR_EINVAL);
	check(kr_client_endpoint_where(c, NULL, sizeof(where), &token) == KR_EINVAL);
	check(kr_client_endpoint_where(c, where, 0, &token) == KR_EINVAL);
	check(kr_client_endpoint_where(c, where, strlen("127.0.0.1:"), &token) == KR_ENOSPC && where[0] == '\0');
	check(kr_client_stop(c) == 0);
	check(kr_client_endpoint_where(c, where, sizeof(where), &token) == KR_ESTATE);
	return 0;
}
