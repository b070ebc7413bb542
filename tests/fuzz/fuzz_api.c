/*
 * Fuzzes the public API (kreflect.h) with random call sequences: every call
 * in every state, from inside callbacks too, with NULLs, bad indexes, small
 * buffers and made-up readiness. Besides never crashing, each answer must be
 * one the header allows for that call in that state: KR_EINVAL for bad
 * arguments, KR_ESTATE for the wrong state or a callback, and the client's
 * state must hold together (after stop, nothing is polled).
 *
 * The server is 127.0.0.1 port 1: every connection is refused at once, so the
 * client backs off, the state callback runs, and nothing waits.
 *
 * Input: a sequence of (opcode, argument) byte pairs.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kreflect.h"
#include "kreflect_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char mem[2u << 20] __attribute__((aligned(16)));
static char endpoint_mem[256u << 10] __attribute__((aligned(16)));
static char dir_mem[4u << 20] __attribute__((aligned(16)));
static char hooks_mem[2][128u << 10] __attribute__((aligned(16)));
static char program_mem[4u << 10] __attribute__((aligned(16)));
static char jsonl_mem[64u << 10] __attribute__((aligned(16)));
static char dir_root[] = "/tmp/kreflect-fuzz-api-XXXXXX";   /* made once; holds the manifest only */

enum { NONE, INIT, STARTED, STOPPED };

static struct {
	struct kr_client *c;
	int state;
	int in_cb;                     /* the fuzz input's nested calls run from here */
	int discovery;                 /* a name left for discovery was added: start may fail */
	int dir;                       /* the client has its directory sink */
	int notify, post;              /* the client has the command or signal, the POST */
	int program;                   /* the client supervises a program */
	int jsonl;                     /* the client writes JSON lines */
	int signals;                   /* the client takes the process's signals */
	const uint8_t *data;
	size_t size, at;
} f;

static const char *const names[] = {
	"configmaps", "cm", "secrets", "deployments.apps", "apps/v1/deployments", "pods",
	"", "a b", "v1/", "x/y/z/w", "no such",
};
static const char obj[] = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":\"v\"}},\"data\":{\"x\":\"\\u00e9\",\"n\":12}}";

static void fail(const char *what, int got)
{
	fprintf(stderr, "fuzz_api: %s answered %d in state %d (callback %d)\n", what, got, f.state, f.in_cb);
	abort();
}

static void expect(const char *what, int got, int ok1, int ok2)
{
	if (got != ok1 && got != ok2)
		fail(what, got);
}

static void step(uint8_t op, uint8_t arg);

/* A callback runs the next few operations from inside it. */
static void nested(void)
{
	int n = 3;

	if (f.in_cb)
		return;
	f.in_cb = 1;
	while (n-- > 0 && f.at + 1 < f.size) {
		uint8_t op = f.data[f.at], arg = f.data[f.at + 1];

		f.at += 2;
		step(op, arg);
	}
	f.in_cb = 0;
}

static void on_event(void *arg, const struct kr_event *ev)
{
	(void)arg;
	if (!ev || !ev->resource)
		fail("an event without a resource", -100);
	nested();
}

static void on_state(void *arg, const struct kr_state_change *st)
{
	(void)arg;
	if (!st || !st->resource || !st->reason)
		fail("a state change without a resource or reason", -100);
	nested();
}

static void on_log(void *arg, int level, const char *text)
{
	(void)arg;
	if (level < KR_LOG_ERROR || level > KR_LOG_TRACE || !text || strlen(text) >= 1024)
		fail("a log line out of its bounds", level);
}

static void each(void *arg, const struct kr_object *o)
{
	(void)arg;
	if (!o->key || !o->rv)
		fail("an object without a key", -100);
}

/*
 * kr_client_endpoint with a loopback, a refused or no address, times in and
 * out of range, an older (too short) or unmade struct; it opens only when
 * everything is right; then kr_client_endpoint_where with a buffer that fits
 * the address or one that does not.
 */
static void endpoint(uint8_t arg)
{
	struct kr_endpoint_config ec;
	char err[128], where[16];
	int r, token = -1;

	kr_endpoint_config_init(&ec);
	ec.address = arg & 1 ? "127.0.0.1:0" : arg & 2 ? "10.0.0.1:1" : NULL;
	ec.max_conns = 1;
	ec.health_only = (arg >> 2) & 1;
	ec.healthz_ready = (arg >> 3) & 1;
	ec.idle_s = arg & 16 ? 3601 : 0;
	if (arg & 32)
		ec.struct_size = arg & 64 ? 0 : offsetof(struct kr_endpoint_config, tls_sessions);
	if (kr_endpoint_memory(&ec) > sizeof(endpoint_mem) || (kr_endpoint_memory(&ec) == 0) != !!(arg & 32))
		fail("kr_endpoint_memory", (int)kr_endpoint_memory(&ec));
	r = kr_client_endpoint(f.c, endpoint_mem, sizeof(endpoint_mem), &ec, err, sizeof(err));
	if (r == 0 && (f.state != STARTED || f.in_cb || !(arg & 1) || (arg & 48)))
		fail("kr_client_endpoint that must fail", r);
	if (r != 0 && (!err[0] || (r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC && r != KR_EIO)))
		fail("kr_client_endpoint's error", r);
	r = kr_client_endpoint_where(f.c, where, arg & 128 ? sizeof(where) : 4, &token);
	if (r == 0 ? !where[0] || (token != 0 && token != 1)
		   : (r == KR_ENOSPC && where[0]) || (r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC))
		fail("kr_client_endpoint_where", r);
	if (!f.c && r != KR_EINVAL)
		fail("kr_client_endpoint_where without a client", r);
}

/* kr_client_budget (1.1): the items' count, never a call after a refusal. */
static void on_budget(void *arg, const char *name, size_t bytes, int reserved, const char *why)
{
	(void)bytes;
	if (!name || !why || (reserved != 0 && reserved != 1))
		fail("kr_client_budget's item", reserved);
	(*(int *)arg)++;
}

static void budget(uint8_t arg)
{
	struct kr_config cfg;
	size_t objects = 0;
	int r, n = 0;

	kr_config_init(&cfg);
	cfg.max_objects = arg & 1 ? (size_t)KR_MAX_OBJECTS_CEILING + (arg >> 4) : (size_t)(arg >> 4);
	cfg.memory_bytes = arg & 2 ? (size_t)(arg >> 2) << 16 : 0;
	if (arg & 4)
		cfg.struct_size = arg & 8 ? 5 : 0;      /* not made by kr_config_init */
	r = kr_client_budget(arg & 64 ? NULL : &cfg, arg & 32 ? NULL : &objects, NULL,
			     arg & 128 ? NULL : on_budget, &n);
	if (r >= 0 ? r != n || r == 0 || (arg & (4 | 64 | 128)) : n != 0 || r != KR_EINVAL)
		fail("kr_client_budget", r);
}

/* kr_client_timer (1.1): a due timer is a callback, which runs the next operations. */
static void on_timer(void *arg, int slot)
{
	if (arg != &f || slot < 0 || slot >= KR_CLIENT_MAX_TIMERS)
		fail("a host timer's callback", slot);
	nested();
}

static void timer(uint8_t arg)
{
	int slot = (int)(arg % 6) - 1;                  /* -1 to KR_CLIENT_MAX_TIMERS */
	long ms = arg & 8 ? (arg & 16 ? -1 : 2147483648L) : (long)((arg >> 5) & 1);
	int r = kr_client_timer(f.c, slot, ms, arg & 128 ? NULL : on_timer, &f);

	if (r == 0 && (!f.c || slot < 0 || slot >= KR_CLIENT_MAX_TIMERS || (arg & 8) || f.state == STOPPED))
		fail("kr_client_timer that must fail", r);
	if (r != 0 && r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC)
		fail("kr_client_timer's error", r);
}

/*
 * kr_client_dir with a directory, one that cannot be made, none, a mode out
 * of range, an unmade, too short or too long struct, in any state; the sink
 * is set up only before start, outside a callback, once (or finds no callback
 * left); then kr_client_dir_stats, which answers wherever there is a sink.
 * No event reaches it (the server refuses): its root holds the manifest only.
 */
static void remove_dir_root(void)
{
	char manifest[sizeof(dir_root) + 32];

	snprintf(manifest, sizeof(manifest), "%s/.kreflect-manifest", dir_root);
	unlink(manifest);
	rmdir(dir_root);
}

static void dir_sink(uint8_t arg)
{
	struct kr_dir_config dc[2];
	struct kr_dir_stats st;
	char err[128];
	int r, good;

	if (dir_root[sizeof(dir_root) - 2] == 'X') {
		if (!mkdtemp(dir_root))
			fail("mkdtemp", -100);
		atexit(remove_dir_root);
	}
	memset(dc, 0, sizeof(dc));
	kr_dir_config_init_size(&dc[0], arg & 64 ? sizeof(dc) : sizeof(dc[0]));
	dc[0].path = arg & 1 ? dir_root : arg & 2 ? "/proc/kreflect-fuzz/out" : NULL;
	dc[0].layout = (enum kr_dir_layout)((arg >> 2) & 1);
	dc[0].sync = (enum kr_dir_sync)((arg >> 3) & 1);
	dc[0].file_mode = arg & 16 ? 01000 : 0;
	dc[0].sweep_by_scope = 1;
	if (arg & 32)
		dc[0].struct_size = arg & 128 ? 0 : sizeof(dc[0]) - sizeof(int);
	else if (arg & 128)
		((unsigned char *)dc)[sizeof(dc[0]) + 1] = 1;   /* a field this library lacks (64: in the size) */
	good = (arg & 1) && !(arg & 16) && !(arg & 32) && !((arg & 64) && (arg & 128));
	if ((kr_dir_memory(&dc[0]) == 0) != ((arg & 32) || ((arg & 64) && (arg & 128))) ||
	    kr_dir_memory(&dc[0]) > sizeof(dir_mem))
		fail("kr_dir_memory", (int)kr_dir_memory(&dc[0]));
	r = kr_client_dir(f.c, dir_mem, sizeof(dir_mem), &dc[0], err, sizeof(err));
	if (r == 0 && (!good || f.state != INIT || f.in_cb || f.dir))
		fail("kr_client_dir that must fail", r);
	if (r != 0 && (!err[0] || (r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC && r != KR_EIO &&
				    r != KR_ENOTSUP)))
		fail("kr_client_dir's error", r);
	if (r != 0 && r != KR_ENOSPC && good && f.state == INIT && !f.in_cb && !f.dir)
		fail("kr_client_dir of a good configuration", r);
	if (r == 0)
		f.dir = 1;
	r = kr_client_dir_stats(f.c, arg & 4 ? &st : NULL);
	if (r != (!f.c || !(arg & 4) ? KR_EINVAL : f.dir ? 0 : KR_ESTATE) || (r == 0 && st.files != 0))
		fail("kr_client_dir_stats", r);
}

/*
 * kr_client_hooks with a command (or one that cannot be split), a signal, a
 * POST (or a URL that is not one), none, a negative window, an unmade or too
 * long struct, in any state: each kind is added only before start, outside a
 * callback, once (or finds no callback left); then the counts, a flush (not
 * from a callback) and a child that is none of ours. No hook ever fires: the
 * server refuses, nothing syncs.
 */
static void hooks(uint8_t arg)
{
	struct kr_hooks_config hc[2];
	struct kr_hooks_stats st;
	char err[128];
	int r, made, good, post = (arg >> 2) & 1, cmd = arg & 3;

	memset(hc, 0, sizeof(hc));
	kr_hooks_config_init_size(&hc[0], arg & 64 ? sizeof(hc) : sizeof(hc[0]));
	hc[0].exec = cmd == 1 ? "/bin/true a" : cmd == 2 ? "/bin/true 'open" : NULL;
	hc[0].signal = cmd == 3 ? 10 : 0;
	hc[0].signal_pid = 1;
	hc[0].http_post = post ? (arg & 8 ? "http://127.0.0.1:9/h" : "ftp://x") : NULL;
	hc[0].debounce_ms = arg & 16 ? -1 : 0;
	if (arg & 32)
		hc[0].struct_size = arg & 128 ? 0 : sizeof(hc[0]) - sizeof(int);
	else if (arg & 128)
		((unsigned char *)hc)[sizeof(hc[0]) + 1] = 1;   /* a field this library lacks (64: in the size) */
	/* Made right (not too short, no unknown field, a window that is not negative), naming a hook. */
	made = (arg & 48) == 0 && !((arg & 64) && (arg & 128));
	good = made && (cmd || post) && cmd != 2 && (!post || (arg & 8));
	if (kr_hooks_memory(&hc[0]) > sizeof(hooks_mem[0]) ||
	    (kr_hooks_memory(&hc[0]) != 0) != (made && (cmd || post)))
		fail("kr_hooks_memory", (int)kr_hooks_memory(&hc[0]));
	r = kr_client_hooks(f.c, hooks_mem[post], sizeof(hooks_mem[0]), &hc[0], err, sizeof(err));
	if (r == 0 && (!good || f.state != INIT || f.in_cb || (cmd && f.notify) || (post && f.post)))
		fail("kr_client_hooks that must fail", r);
	if (r != 0 && r != KR_ENOSPC && good && f.state == INIT && !f.in_cb && !(cmd && f.notify) && !(post && f.post))
		fail("kr_client_hooks of a good configuration", r);
	if (r != 0 && (!err[0] || (r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC && r != KR_ENOTSUP)))
		fail("kr_client_hooks' error", r);
	if (r == 0) {
		f.notify |= cmd != 0;
		f.post |= post;
	}
	r = kr_client_hooks_stats(f.c, arg & 8 ? &st : NULL);
	if (r != (!f.c || !(arg & 8) ? KR_EINVAL : 0) ||
	    (r == 0 && ((st.post_url != NULL) != f.post || (st.command && !f.notify) || st.command_pid ||
			st.runs || st.delivered)))
		fail("kr_client_hooks_stats", r);
	r = kr_client_hooks_flush(f.c);
	if (r != (!f.c ? KR_EINVAL : f.in_cb ? KR_ESTATE : 0))
		fail("kr_client_hooks_flush", r);
	r = kr_client_child_exited(f.c, 1 + arg, 0);
	if (r != (f.c ? 0 : KR_EINVAL))
		fail("kr_client_child_exited", r);
}

/*
 * kr_client_program with a program, none, an empty word, a negative time, an
 * unmade or too long struct, in any state: added only before start, outside
 * a callback, once (or no callback left); then its state (never started: the
 * server refuses, nothing syncs), a signal it never takes, a child not its.
 */
static void program(uint8_t arg)
{
	static const char *const prog[] = { "/bin/true", NULL };
	static const char *const empty[] = { "", NULL };
	struct kr_program_config pc[2];
	struct kr_program_status st;
	char err[128];
	int r, made, good;

	memset(pc, 0, sizeof(pc));
	kr_program_config_init_size(&pc[0], arg & 64 ? sizeof(pc) : sizeof(pc[0]));
	pc[0].argv = arg & 1 ? prog : arg & 2 ? empty : NULL;
	pc[0].grace_ms = arg & 4 ? -1 : 0;
	pc[0].restart = (arg >> 3) & 1;
	if (arg & 32)
		pc[0].struct_size = arg & 128 ? 0 : sizeof(pc[0]) - sizeof(void *);
	else if (arg & 128)
		((unsigned char *)pc)[sizeof(pc[0]) + 1] = 1;   /* a field this library lacks (64: in the size) */
	made = !(arg & 32) && !((arg & 64) && (arg & 128));
	good = made && (arg & 1) && !(arg & 4);
	if ((kr_program_memory(&pc[0]) != 0) != made || kr_program_memory(&pc[0]) > sizeof(program_mem))
		fail("kr_program_memory", (int)kr_program_memory(&pc[0]));
	r = kr_client_program(f.c, program_mem, sizeof(program_mem), &pc[0], err, sizeof(err));
	if (r == 0 && (!good || f.state != INIT || f.in_cb || f.program))
		fail("kr_client_program that must fail", r);
	if (r != 0 && (!err[0] || (r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC && r != KR_ENOTSUP)))
		fail("kr_client_program's error", r);
	if (r != 0 && r != KR_ENOSPC && good && f.state == INIT && !f.in_cb && !f.program)
		fail("kr_client_program of a good configuration", r);
	f.program |= r == 0;
	r = kr_client_program_status(f.c, arg & 16 ? &st : NULL);
	if (r != (!f.c || !(arg & 16) ? KR_EINVAL : f.program ? 0 : KR_ESTATE) ||
	    (r == 0 && (st.pid || st.ended || st.starts)))
		fail("kr_client_program_status", r);
	if (kr_client_program_signal(f.c, 15) != (f.c ? 0 : KR_EINVAL) ||
	    kr_client_child_exited(f.c, 1 + arg, 0) != (f.c ? 0 : KR_EINVAL))
		fail("kr_client_program_signal or kr_client_child_exited", arg);
}

/*
 * kr_client_jsonl to /dev/null or fd -1, with memory enough, one byte short,
 * misaligned or none, in any state: set up only before start, outside a
 * callback, once (or no callback left). No event reaches it (the server
 * refuses); kr_client_stop flushes nothing.
 */
static void jsonl(uint8_t arg)
{
	static int null_fd = -2;
	size_t need = kr_jsonl_memory();
	char *m = arg & 2 ? NULL : arg & 4 ? jsonl_mem + 8 : jsonl_mem;
	int fd, r, good;

	if (null_fd == -2)
		null_fd = open("/dev/null", O_WRONLY);
	if (null_fd < 0 || need == 0 || need > sizeof(jsonl_mem))
		fail("kr_jsonl_memory or /dev/null", (int)need);
	fd = arg & 1 ? -1 : null_fd;
	good = !(arg & 7) && !(arg & 8);
	r = kr_client_jsonl(f.c, m, arg & 8 ? need - 1 : need, fd);
	if (r == 0 && (!good || f.state != INIT || f.in_cb || f.jsonl))
		fail("kr_client_jsonl that must fail", r);
	if (r != 0 && r != KR_EINVAL && r != KR_ESTATE && r != KR_ENOSPC)
		fail("kr_client_jsonl's error", r);
	if (r != 0 && r != KR_ENOSPC && good && f.state == INIT && !f.in_cb && !f.jsonl)
		fail("kr_client_jsonl of a good configuration", r);
	if (!f.c && r != KR_EINVAL)
		fail("kr_client_jsonl(NULL)", r);
	f.jsonl |= r == 0;
}

static void on_fuzz_signal(void *arg, int sig)
{
	(void)arg;
	(void)sig;
}

/*
 * kr_client_signals with no function, no client, or for real: the real one
 * once a process (each takes a descriptor that a dropped client keeps), then
 * again on that client, which must refuse. kr_client_hooks_wait in any
 * state: no hook ever fires, so it returns at once.
 */
static void signals_and_wait(uint8_t arg)
{
	static int taken;                  /* a client of this process took them */
	int r;

	if (arg & 1) {
		int real = f.c && !(arg & 2);

		if (real && taken && !f.signals && f.state != STOPPED)
			return;            /* one descriptor a process: not called */
		r = kr_client_signals(f.c, arg & 2 ? NULL : on_fuzz_signal, NULL);
		if (!real)
			expect("kr_client_signals(NULL)", r, KR_EINVAL, KR_EINVAL);
		else if (f.signals || f.state == STOPPED)
			expect("kr_client_signals again or stopped", r, KR_ESTATE, KR_ESTATE);
		else if (r == 0)
			taken = f.signals = 1;
		else
			expect("kr_client_signals", r, KR_EIO, KR_EIO);
		return;
	}
	if (arg & 2)
		return;
	r = kr_client_hooks_wait(f.c);
	expect("kr_client_hooks_wait", r, !f.c ? KR_EINVAL : f.in_cb ? KR_ESTATE : 0,
	       !f.c ? KR_EINVAL : f.in_cb ? KR_ESTATE : 0);
}

static void step(uint8_t op, uint8_t arg)
{
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	struct kr_resource_spec spec;
	struct kr_config cfg;
	struct kr_object o;
	struct kr_status st;
	char err[128], buf[16];
	int r, t, i, live = f.state == STARTED && !f.in_cb;

	switch (op % 25) {
	case 0:                            /* a new client (the old one is dropped as it is) */
		if (f.in_cb)
			return;
		if (f.c)
			kr_client_stop(f.c);
		kr_config_init(&cfg);
		cfg.server = arg & 1 ? "http://127.0.0.1:1" : (arg & 2 ? "ftp://x" : NULL);
		cfg.no_auto_source = 1;
		cfg.log_level = -1;
		cfg.max_objects = arg & 4 ? 16 : (size_t)KR_MAX_OBJECTS_CEILING + (arg & 8);
		cfg.arena_bytes = 128u * 1024u;
		cfg.page_size = arg & 16 ? -1 : 0;
		if (arg & 64)
			cfg.struct_size = arg & 128 ? 3 : 0;   /* not made by kr_config_init */
		r = kr_client_init(&f.c, mem, (arg & 32) ? 1000 : sizeof(mem), &cfg, err, sizeof(err));
		if (r == 0) {
			if (!(arg & 1) || !(arg & 4) || (arg & 16) || (arg & 32) || (arg & 64))
				fail("kr_client_init of a bad configuration", r);
			f.state = INIT;
		} else {
			expect("kr_client_init", r, KR_EINVAL, KR_ENOSPC);
			f.c = NULL;
			f.state = NONE;
		}
		f.discovery = 0;
		f.dir = 0;
		f.notify = f.post = f.program = f.jsonl = f.signals = 0;
		return;
	case 1:
		i = arg % (sizeof(names) / sizeof(names[0]));
		r = kr_client_add_resource(f.c, names[i], err, sizeof(err));
		if (!f.c)
			expect("kr_client_add_resource(NULL)", r, KR_EINVAL, KR_EINVAL);
		else if (f.state != INIT || f.in_cb)
			expect("kr_client_add_resource after start", r, KR_ESTATE, KR_EINVAL);
		else if (r < 0 && r != KR_EINVAL && r != KR_ENOSPC && r != KR_ENOENT)
			fail("kr_client_add_resource", r);
		if (r >= 0 && i > 5)
			f.discovery = 1;
		return;
	case 2:
		memset(&spec, 0, sizeof(spec));
		spec.name = arg & 1 ? "configmaps" : NULL;
		spec.ns = arg & 2 ? "" : (arg & 4 ? "edge" : NULL);
		spec.label_selector = arg & 8 ? "a=b" : NULL;
		spec.all_namespaces = arg & 16;
		r = kr_client_add(f.c, arg & 32 ? NULL : &spec, err, sizeof(err));
		if (r >= 0 && (!f.c || f.state != INIT || f.in_cb || !(arg & 1) || (arg & 2) || (arg & 32)))
			fail("kr_client_add that must fail", r);
		return;
	case 3:
		r = kr_client_on_event(f.c, arg & 1 ? on_event : NULL, NULL);
		if (r == 0 && (!f.c || !(arg & 1) || f.in_cb))
			fail("kr_client_on_event that must fail", r);
		return;
	case 4:
		r = kr_client_on_state(f.c, arg & 1 ? on_state : NULL, NULL);
		if (r == 0 && (!f.c || f.in_cb))
			fail("kr_client_on_state that must fail", r);
		return;
	case 5:
		t = f.state;
		r = kr_client_start(f.c, err, sizeof(err));
		if (r == 0) {
			if (t != INIT || f.in_cb)
				fail("kr_client_start in the wrong state", r);
			if (f.state == INIT)       /* unless a callback inside it stopped it */
				f.state = STARTED;
		} else if (f.c && t == INIT && !f.in_cb && !f.discovery) {
			fail("kr_client_start of a fresh client", r);   /* no discovery: it cannot fail */
		}
		return;
	case 6:
		r = kr_client_fds(f.c, fds, arg % (KR_CLIENT_MAX_FDS + 1), arg & 64 ? NULL : &t);
		if (r >= 0 && (!f.c || f.state == INIT || f.state == NONE || f.in_cb || (arg & 64)))
			fail("kr_client_fds that must fail", r);
		if (r > 0 && f.state == STOPPED)
			fail("kr_client_fds after stop", r);
		return;
	case 7:                            /* readiness, real or made up */
		r = live ? kr_client_fds(f.c, fds, KR_CLIENT_MAX_FDS, &t) : 0;
		if (r < 0)
			r = 0;
		for (i = 0; i < r; i++)
			fds[i].revents = (short)(arg & 7);
		if (arg & 8) {
			fds[r].fd = arg >> 4;
			fds[r].events = KR_POLLIN;
			fds[r].revents = (short)((arg >> 1) & 7);
			r++;
		}
		r = kr_client_process(f.c, fds, r);
		if (r >= 0 && (!f.c || f.state == INIT || f.state == NONE || f.in_cb))
			fail("kr_client_process that must fail", r);
		return;
	case 8:
		r = kr_client_stop(f.c);
		if (f.c) {
			expect("kr_client_stop", r, 0, 0);
			f.state = STOPPED;
		}
		return;
	case 9:
		r = kr_client_get(f.c, (int)(arg % 4) - 1, arg & 4 ? "default/a" : "", &o);
		if (r == 0 && (!o.key || !o.rv))
			fail("kr_client_get gave an empty view", r);
		return;
	case 10:
		r = kr_client_foreach(f.c, (int)(arg % 4) - 1, arg & 4 ? each : NULL, NULL);
		if (r >= 0 && (!f.c || !(arg & 4)))
			fail("kr_client_foreach that must fail", r);
		return;
	case 11:
		r = kr_client_status(f.c, (int)(arg % 10) - 1, &st);
		if (r == 0 && (!st.resource || !st.last_rv || !st.reason))
			fail("kr_client_status left a string NULL", r);
		(void)kr_client_ready(f.c);
		(void)kr_client_resources(f.c);
		(void)kr_client_resource_name(f.c, (int)(arg % 10) - 1);
		return;
	case 12:
		r = kr_object_field(obj, (arg & 1) ? sizeof(obj) - 1 : (size_t)(arg >> 1) % sizeof(obj),
				    arg & 2 ? "data.x" : "metadata.labels.k", buf, (size_t)(arg >> 4));
		if (r > 0 && (size_t)r >= (size_t)(arg >> 4))
			fail("kr_object_field wrote past its buffer", r);
		return;
	case 13:                           /* run: only where it returns at once */
		if (f.state == STARTED && !f.in_cb)
			return;
		r = kr_client_run(f.c);
		if (r == 0 && (!f.c || f.state == INIT || f.state == NONE || f.in_cb))
			fail("kr_client_run that must fail", r);
		return;
	case 14:                           /* a wake-up, then run returns because of it */
		r = kr_client_wakeup(f.c);
		if (!f.c)
			expect("kr_client_wakeup(NULL)", r, KR_EINVAL, KR_EINVAL);
		else if (f.state == STARTED)
			expect("kr_client_wakeup while started", r, 0, 0);
		else
			expect("kr_client_wakeup while not started", r, KR_ESTATE, KR_ESTATE);
		if (r == 0 && !f.in_cb && (arg & 1)) {
			r = kr_client_run(f.c);
			if (r != KR_RUN_WOKEN && !(r == 0 && f.state == STOPPED))
				fail("kr_client_run after a wake-up", r);
		}
		return;
	case 15:                           /* a status struct of any size */
		memset(&st, 0x5a, sizeof(st));
		r = kr_client_status_size(f.c, (int)(arg & 1), &st, (size_t)(arg >> 1) % (sizeof(st) + 1));
		if (r == 0 && ((size_t)(arg >> 1) % (sizeof(st) + 1) != sizeof(st) ||
			       (unsigned)st.failure >= KR_FAIL_N || !st.status_reason))
			fail("kr_client_status_size", r);
		return;
	case 16:                           /* the process-wide calls */
		kr_set_log_handler(arg & 1 ? on_log : NULL, NULL);
		if (!kr_failure_name((enum kr_failure)(arg >> 1)) || strcmp(kr_version(&t), KR_VERSION) != 0 ||
		    t != KR_VERSION_NUM || strncmp(kr_mbedtls_version(), "3.6.", 4) != 0)
			fail("kr_failure_name, kr_version or kr_mbedtls_version", arg);
		/* The host's own lines, at any level (a stray one is clamped), through on_log (which
		 * checks them); without the handler at level -1, so that stderr stays quiet. */
		kr_set_log_level(arg & 1 ? (int)(arg >> 2) % 7 - 1 : -1);
		kr_log((int)(arg >> 3) % 9 - 2, "host line %d", arg);
		kr_log(KR_LOG_ERROR, NULL);
		kr_set_log_level(-1);
		return;
	case 17:                           /* the endpoint (1.1): any state, any struct, then where */
		endpoint(arg);
		return;
	case 18:                           /* the memory budget (1.1), no client needed */
		budget(arg);
		return;
	case 19:                           /* a host timer (1.1), fired by run and process */
		timer(arg);
		return;
	case 20:                           /* the directory sink (1.1): any state, any struct, its counts */
		dir_sink(arg);
		return;
	case 21:                           /* the hooks (1.1): any state, any struct, counts, flush, a child */
		hooks(arg);
		return;
	case 22:                           /* the supervised program (1.1): any state, any struct, its state */
		program(arg);
		return;
	case 23:                           /* the JSON lines (1.1): any state, any memory, any fd */
		jsonl(arg);
		return;
	case 24:                           /* signals on the loop (1.1), the hooks' wait */
		signals_and_wait(arg);
		return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	memset(&f, 0, sizeof(f));
	f.data = data;
	f.size = size;
	while (f.at + 1 < f.size) {
		uint8_t op = f.data[f.at], arg = f.data[f.at + 1];

		f.at += 2;
		step(op, arg);
	}
	if (f.c)
		kr_client_stop(f.c);       /* closes every connection: nothing leaks into the next input */
	kr_set_log_handler(NULL, NULL);
	return 0;
}
