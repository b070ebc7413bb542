/*
 * The hooks through the library's door (kreflect.h "hooks"): the command and
 * the signal (notify.c), the POST (http_post.c) and the supervised program
 * (supervise.c), each set up in the caller's memory as one of the client's
 * event callbacks with its debounce window on the client's loop. Apart from client.c so that a program without
 * hooks links none of them.
 */
#include "client.h"
#include "kreflect_config.h"

#include <stdint.h>
#include <string.h>

#include "fmt.h"
#include <signal.h>

#include "http_post.h"
#include "loop.h"
#include "notify.h"
#include "supervise.h"

/* struct kr_hooks_config as 1.1 released it: a struct_size below this is not one of ours. */
#define HOOKS_CONFIG_SIZE_1_1 (offsetof(struct kr_hooks_config, skip_first) + sizeof(int))
#define DEBOUNCE_DEFAULT_MS 1000

void kr_hooks_config_init_size(struct kr_hooks_config *hc, size_t size)
{
	if (kr_client_sized_init(hc, size, HOOKS_CONFIG_SIZE_1_1) == 0)
		hc->debounce_ms = DEBOUNCE_DEFAULT_MS;
}

/* The caller's configuration as this library's: 0, KR_EINVAL, KR_ENOTSUP. */
static int hooks_config_in(const struct kr_hooks_config *hc, struct kr_hooks_config *in)
{
	kr_hooks_config_init(in);
	return kr_client_sized_in(hc, HOOKS_CONFIG_SIZE_1_1, in, sizeof(*in));
}

static size_t notify_bytes(const struct kr_hooks_config *in)
{
	return in->exec || in->signal ? ALIGN16(sizeof(struct kr_notify)) : 0;
}

size_t kr_hooks_memory(const struct kr_hooks_config *hc)
{
	struct kr_hooks_config in;

	if (!KR_WITH_HOOKS || hooks_config_in(hc, &in) != 0 || in.debounce_ms < 0)
		return 0;
	return notify_bytes(&in) + (in.http_post ? ALIGN16(sizeof(struct kr_http_post)) : 0);
}

static int fail(char *err, size_t errlen, int code, const char *text)
{
	if (err && errlen)
		kr_snprintf(err, errlen, "%s", text);
	return code;
}

/* The command and the signal: their window on the client's loop. */
static int init_notify(struct kr_client *c, struct kr_notify *n, const struct kr_hooks_config *in,
		       char *err, size_t errlen)
{
	struct kr_notify_opts o;

	memset(&o, 0, sizeof(o));
	o.exec = in->exec;
	o.signal = in->signal;
	o.signal_pid = in->signal_pid;
	o.signal_pidfile = in->signal_pidfile;
	o.debounce_ms = in->debounce_ms;
	o.resources = kr_client_resources(c);
	return kr_notify_init(n, kr_client_loop(c), &o, err, errlen);
}

/* The POST: its connection and window on the client's loop (the connection last: nothing fails after it). */
static int init_post(struct kr_client *c, struct kr_http_post *p, const struct kr_hooks_config *in,
		     char *err, size_t errlen)
{
	struct kr_http_post_opts o;

	memset(&o, 0, sizeof(o));
	o.method = in->method;
	o.body = in->body;
	o.body_len = in->body_len;
	o.content_type = in->content_type;
	o.authorization = in->authorization;
	o.urllib3 = in->urllib3;
	o.retries = in->retries;
	o.connect_retries = in->connect_retries;
	o.read_retries = in->read_retries;
	o.backoff_factor_ms = in->backoff_factor_ms;
	o.retry_5xx = in->retry_5xx;
	o.timeout_ms = in->timeout_ms;
	o.skip_first = in->skip_first;
	return kr_http_post_init_opts(p, kr_client_loop(c), in->http_post, in->debounce_ms,
				      kr_client_resources(c), &o, err, errlen);
}

int kr_client_hooks(struct kr_client *c, void *mem, size_t len, const struct kr_hooks_config *hc,
		    char *err, size_t errlen)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);
	struct kr_hooks_config in;
	struct kr_notify *n;
	struct kr_http_post *p;
	int r, need_cb;

	if (err && errlen)
		err[0] = '\0';
	if (!slot || !mem || ((uintptr_t)mem & 15u))
		return fail(err, errlen, KR_EINVAL, "the hooks need a client and 16-byte aligned memory");
	if (!KR_WITH_HOOKS)
		return fail(err, errlen, KR_ENOTSUP, "unable to run hooks: they are not built into this kreflect");
	r = hooks_config_in(hc, &in);
	if (r == KR_ENOTSUP)
		return fail(err, errlen, r, "the hooks' configuration sets a field this kreflect does not have");
	if (r != 0)
		return fail(err, errlen, r, "the hooks' configuration was not made by kr_hooks_config_init");
	if (!in.exec && !in.signal && !in.http_post)
		return fail(err, errlen, KR_EINVAL, "the hooks' configuration names no command, signal or URL");
	if (in.debounce_ms < 0 || in.signal < 0 || in.signal_pid < 0)
		return fail(err, errlen, KR_EINVAL, "the hooks' debounce_ms, signal or signal_pid is negative");
	need_cb = (in.exec || in.signal) + (in.http_post != NULL);
	r = kr_client_may_add(c, need_cb);
	if (r == KR_ESTATE || (r == 0 && (((in.exec || in.signal) && slot->notify) ||
					  (in.http_post && slot->post))))
		return fail(err, errlen, KR_ESTATE, "each hook is added once, before kr_client_start");
	if (r == KR_ENOSPC)
		return fail(err, errlen, r, "no event callback left for the hooks");
	if (len < kr_hooks_memory(&in)) {
		kr_snprintf(err, errlen, "the hooks need %zu bytes of memory, given %zu", kr_hooks_memory(&in), len);
		return KR_ENOSPC;
	}
	/* Both set up before either is attached: a call that fails adds nothing. */
	n = in.exec || in.signal ? mem : NULL;
	p = in.http_post ? (struct kr_http_post *)(void *)((char *)mem + notify_bytes(&in)) : NULL;
	if (n && (r = init_notify(c, n, &in, err, errlen)) != 0)
		return r;
	if (p && (r = init_post(c, p, &in, err, errlen)) != 0)
		return r;
	if (n) {
		kr_client_on_event(c, kr_notify_event, n);       /* room checked above */
		slot->notify = n;
	}
	if (p) {
		kr_client_on_event(c, kr_http_post_event, p);
		slot->post = p;
	}
	return 0;
}

int kr_client_child_exited(struct kr_client *c, int pid, int code)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);

	if (!slot)
		return KR_EINVAL;
	if (!KR_WITH_HOOKS || pid <= 0)
		return 0;
	if (slot->notify && kr_notify_child_exited(slot->notify, pid, code))
		return 1;
	return slot->program && kr_supervise_child_exited(slot->program, pid, code) ? 1 : 0;
}

int kr_client_hooks_wait(struct kr_client *c)
{
	struct kr_loop *loop = kr_client_loop(c);
	struct kr_hooks_stats hs;
	int r = kr_client_hooks_flush(c);

	if (r < 0)
		return r;
	loop->stop = 0;                    /* kr_client_stop, before or during, sets it */
	while (KR_WITH_HOOKS && !loop->stop && kr_client_hooks_stats(c, &hs) == 0 &&
	       (hs.command_pid || hs.post_busy))
		if (kr_loop_once(loop, -1) < 0)
			return KR_EIO;
	return loop->stop ? 1 : 0;
}

int kr_client_hooks_flush(struct kr_client *c)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);
	int r = 0;

	if (!slot)
		return KR_EINVAL;
	if (kr_client_in_callback(c))
		return KR_ESTATE;
	if (!KR_WITH_HOOKS)
		return 0;
	if (slot->notify)
		r |= kr_notify_flush(slot->notify);
	if (slot->post)
		r |= kr_http_post_flush(slot->post);
	return r != 0;
}

int kr_client_hooks_stats(struct kr_client *c, struct kr_hooks_stats *st)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);
	const struct kr_notify *n;
	const struct kr_http_post *p;

	if (!slot || !st)
		return KR_EINVAL;
	memset(st, 0, sizeof(*st));
	if (!KR_WITH_HOOKS)
		return 0;
	n = slot->notify;
	p = slot->post;
	if (n) {
		st->command = n->argv[0];
		st->command_pid = n->child;
		st->last_exit = n->last_exit;
		st->runs = n->runs;
		st->signals_sent = n->signals_sent;
		st->failures = n->failures;
	}
	if (p) {
		st->post_url = p->url;
		st->post_host = p->conn.cfg.host;
		st->post_port = p->conn.cfg.port;
		st->post_loopback = kr_http_post_loopback(p) != 0;
		st->post_busy = kr_http_post_busy(p) != 0;
		st->delivered = p->delivered;
		st->attempts_failed = p->attempts_failed;
		st->batches_dropped = p->batches_dropped;
	}
	return 0;
}

/* --- the supervised program ------------------------------------------------------------------ */

#define PROGRAM_CONFIG_SIZE_1_1 (offsetof(struct kr_program_config, arg) + sizeof(void *))
#define GRACE_DEFAULT_MS 10000

void kr_program_config_init_size(struct kr_program_config *pc, size_t size)
{
	if (kr_client_sized_init(pc, size, PROGRAM_CONFIG_SIZE_1_1) != 0)
		return;
	pc->change_signal = SIGHUP;
	pc->grace_ms = GRACE_DEFAULT_MS;
	pc->debounce_ms = DEBOUNCE_DEFAULT_MS;
}

static int program_config_in(const struct kr_program_config *pc, struct kr_program_config *in)
{
	kr_program_config_init(in);
	return kr_client_sized_in(pc, PROGRAM_CONFIG_SIZE_1_1, in, sizeof(*in));
}

size_t kr_program_memory(const struct kr_program_config *pc)
{
	struct kr_program_config in;

	if (!KR_WITH_HOOKS || program_config_in(pc, &in) != 0)
		return 0;
	return ALIGN16(sizeof(struct kr_supervise));
}

int kr_client_program(struct kr_client *c, void *mem, size_t len, const struct kr_program_config *pc,
		      char *err, size_t errlen)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);
	struct kr_program_config in;
	struct kr_supervise_opts o;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!slot || !mem || ((uintptr_t)mem & 15u))
		return fail(err, errlen, KR_EINVAL, "the program needs a client and 16-byte aligned memory");
	if (!KR_WITH_HOOKS)
		return fail(err, errlen, KR_ENOTSUP, "unable to run a program: supervision is not built into "
			    "this kreflect");
	r = program_config_in(pc, &in);
	if (r == KR_ENOTSUP)
		return fail(err, errlen, r, "the program's configuration sets a field this kreflect does not have");
	if (r != 0)
		return fail(err, errlen, r, "the program's configuration was not made by kr_program_config_init");
	if (in.grace_ms < 0 || in.debounce_ms < 0 || in.change_signal < 0)
		return fail(err, errlen, KR_EINVAL, "the program's grace_ms, debounce_ms or change_signal is negative");
	r = kr_client_may_add(c, 1);
	if (r == KR_ESTATE || (r == 0 && slot->program))
		return fail(err, errlen, KR_ESTATE, "the program is added once, before kr_client_start");
	if (r == KR_ENOSPC)
		return fail(err, errlen, r, "no event callback left for the program");
	if (len < kr_program_memory(&in)) {
		kr_snprintf(err, errlen, "the program needs %zu bytes of memory, given %zu", kr_program_memory(&in),
			    len);
		return KR_ENOSPC;
	}
	memset(&o, 0, sizeof(o));
	o.argv = in.argv;
	o.child_signal = in.change_signal;
	o.restart = in.restart != 0;
	o.grace_ms = in.grace_ms;
	o.debounce_ms = in.debounce_ms;
	o.resources = kr_client_resources(c);
	o.on_end = in.on_end;
	o.arg = in.arg;
	r = kr_supervise_init(mem, kr_client_loop(c), &o, err, errlen);
	if (r != 0)
		return r;
	kr_client_on_event(c, kr_supervise_event, mem);  /* room checked above */
	slot->program = mem;
	return 0;
}

int kr_client_program_signal(struct kr_client *c, int sig)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);

	if (!slot)
		return KR_EINVAL;
	return KR_WITH_HOOKS && slot->program && kr_supervise_signal(slot->program, sig) ? 1 : 0;
}

int kr_client_program_status(struct kr_client *c, struct kr_program_status *st)
{
	struct kr_client_hooks *slot = kr_client_hooks_slot(c);
	const struct kr_supervise *s;

	if (!slot || !st)
		return KR_EINVAL;
	memset(st, 0, sizeof(*st));
	if (!KR_WITH_HOOKS || !slot->program)
		return KR_ESTATE;
	s = slot->program;
	st->pid = s->pid;
	st->ended = s->state == KR_SUP_ENDED;
	st->code = s->code;
	st->start_error = s->start_error;
	st->starts = s->starts;
	st->signals_sent = s->signals_sent;
	st->signals_forwarded = s->signals_forwarded;
	return 0;
}
