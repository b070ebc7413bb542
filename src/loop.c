#include "loop.h"

#include <string.h>

#include "kreflect.h"

void kr_loop_init(struct kr_loop *loop)
{
	memset(loop, 0, sizeof(*loop));
	loop->signals.fd = -1;
}

/* Adds fn to a list of *n hooks, at its end or (first) at its start. */
static int add_hook(struct kr_loop_hook *h, int *n, int first, int (*fn)(void *arg), void *arg)
{
	int at = first ? 0 : *n;

	if (*n >= KR_LOOP_MAX_HOOKS)
		return KR_ENOSPC;
	memmove(&h[at + 1], &h[at], (size_t)(*n - at) * sizeof(h[0]));
	h[at].fn = fn;
	h[at].arg = arg;
	(*n)++;
	return 0;
}

int kr_loop_before_poll(struct kr_loop *loop, int (*fn)(void *arg), void *arg)
{
	return add_hook(loop->hooks, &loop->nhooks, 0, fn, arg);
}

int kr_loop_before_poll_first(struct kr_loop *loop, int (*fn)(void *arg), void *arg)
{
	return add_hook(loop->hooks, &loop->nhooks, 1, fn, arg);
}

int kr_loop_before_timers(struct kr_loop *loop, int (*fn)(void *arg), void *arg)
{
	return add_hook(loop->timer_hooks, &loop->ntimer_hooks, 0, fn, arg);
}

static void signal_ready(struct kr_loop *loop, struct kr_source *s, int got)
{
	int sig;

	(void)got;
	while ((sig = kr_port_signal_read(s->fd)) > 0)
		if (loop->on_signal)
			loop->on_signal(loop, sig, loop->signal_arg);
}

int kr_loop_signals(struct kr_loop *loop, void (*fn)(struct kr_loop *, int, void *), void *arg)
{
	int fd = kr_port_signals_open();

	if (fd < 0)
		return KR_EIO;
	loop->on_signal = fn;
	loop->signal_arg = arg;
	loop->signals.fd = fd;
	loop->signals.want = KR_POLL_IN;
	loop->signals.ready = signal_ready;
	return kr_loop_add(loop, &loop->signals);
}

int kr_loop_add(struct kr_loop *loop, struct kr_source *s)
{
	if (s->registered)
		return 0;
	if (loop->nsources == KR_LOOP_MAX_SOURCES)
		return KR_ENOSPC;
	loop->sources[loop->nsources++] = s;
	s->registered = 1;
	return 0;
}

void kr_loop_remove(struct kr_loop *loop, struct kr_source *s)
{
	int i;

	for (i = 0; i < loop->nsources; i++)
		if (loop->sources[i] == s) {
			loop->sources[i] = loop->sources[--loop->nsources];
			break;
		}
	s->registered = 0;
}

int kr_loop_timer_at(struct kr_loop *loop, struct kr_timer *t, kr_ms_t deadline)
{
	if (!t->armed) {
		if (loop->ntimers == KR_LOOP_MAX_TIMERS)
			return KR_ENOSPC;
		loop->timers[loop->ntimers++] = t;
		t->armed = 1;
	}
	t->deadline = deadline;
	return 0;
}

void kr_loop_timer_cancel(struct kr_loop *loop, struct kr_timer *t)
{
	int i;

	if (!t->armed)
		return;
	for (i = 0; i < loop->ntimers; i++)
		if (loop->timers[i] == t) {
			loop->timers[i] = loop->timers[--loop->ntimers];
			break;
		}
	t->armed = 0;
}

/* Milliseconds until the nearest deadline: 0 if one is due, -1 if none is armed. */
static int next_wait(const struct kr_loop *loop, kr_ms_t now)
{
	kr_ms_t nearest = -1;
	int i;

	for (i = 0; i < loop->ntimers; i++)
		if (nearest < 0 || loop->timers[i]->deadline < nearest)
			nearest = loop->timers[i]->deadline;
	if (nearest < 0)
		return -1;
	if (nearest <= now)
		return 0;
	/* Deadlines further than ~24 days wait in steps: poll takes an int. */
	return nearest - now > 0x7fffffff ? 0x7fffffff : (int)(nearest - now);
}

static int fire_due(struct kr_loop *loop, kr_ms_t now)
{
	struct kr_timer *due[KR_LOOP_MAX_TIMERS];
	int i, n = 0, calls = 0;

	/*
	 * Snapshot first: callbacks may arm, re-arm or cancel any timer. Those
	 * due fire in deadline order, also when a late wake-up (a busy machine)
	 * finds several due at once: each is inserted by its deadline.
	 */
	for (i = 0; i < loop->ntimers; i++) {
		struct kr_timer *t = loop->timers[i];
		int j;

		if (t->deadline > now)
			continue;
		for (j = n++; j > 0 && due[j - 1]->deadline > t->deadline; j--)
			due[j] = due[j - 1];
		due[j] = t;
	}
	for (i = 0; n > 0 && i < loop->ntimer_hooks; i++)
		loop->timer_hooks[i].fn(loop->timer_hooks[i].arg);
	for (i = 0; i < n; i++) {
		/* Skip one cancelled or moved into the future by an earlier callback. */
		if (!due[i]->armed || due[i]->deadline > now)
			continue;
		kr_loop_timer_cancel(loop, due[i]);
		due[i]->fire(loop, due[i]);
		calls++;
	}
	return calls;
}

int kr_loop_fds(struct kr_loop *loop, struct kr_pollfd *fds, int max, int *wait_ms)
{
	int i, n = 0, pending = 0, wait;

	for (i = 0; i < loop->nsources; i++) {
		struct kr_source *s = loop->sources[i];

		pending |= s->pending && s->pending(s);
		s->slot = -1;
		if (s->fd < 0 || !s->want)
			continue;
		if (n == max)
			return KR_ENOSPC;
		s->slot = n;
		fds[n].fd = s->fd;
		fds[n].want = (short)s->want;
		fds[n].got = 0;
		n++;
	}
	wait = pending ? 0 : next_wait(loop, kr_port_now_ms());
	for (i = 0; wait != 0 && i < loop->nhooks; i++)
		loop->hooks[i].fn(loop->hooks[i].arg);
	loop->passes++;
	*wait_ms = wait;
	return n;
}

int kr_loop_process(struct kr_loop *loop, const struct kr_pollfd *fds, int n)
{
	struct kr_source *snap[KR_LOOP_MAX_SOURCES];
	int done[KR_LOOP_MAX_SOURCES];
	int i, j, ns = loop->nsources, calls = 0;

	/* Snapshot: callbacks may add or remove sources. */
	for (i = 0; i < ns; i++) {
		snap[i] = loop->sources[i];
		done[i] = 0;
	}
	/* Buffered bytes first: they arrived before anything the socket holds,
	 * and reading them reads what the socket had too (its readiness is stale). */
	for (i = 0; i < ns; i++) {
		struct kr_source *s = snap[i];

		if (!s->registered || !s->pending || !s->pending(s))
			continue;
		s->ready(loop, s, KR_POLL_IN);
		done[i] = 1;
		calls++;
	}
	for (i = 0; i < ns; i++) {
		struct kr_source *s = snap[i];

		if (done[i] || !s->registered || s->fd < 0 || s->slot < 0)
			continue;
		/* Its own entry, found in one step: a scan of every entry for every
		 * source would cost connections squared per pass. */
		if (s->slot < n && fds[s->slot].fd == s->fd) {
			if (fds[s->slot].got) {
				s->ready(loop, s, fds[s->slot].got);
				calls++;
			}
			continue;
		}
		/* Its entry moved (fds not from kr_loop_fds as it stands): look for it. */
		for (j = 0; j < n; j++) {
			if (!fds[j].got || fds[j].fd != s->fd || !s->registered || s->fd < 0)
				continue;
			s->ready(loop, s, fds[j].got);
			calls++;
			break;
		}
	}
	return calls + fire_due(loop, kr_port_now_ms());
}

int kr_loop_once(struct kr_loop *loop, int max_wait_ms)
{
	struct kr_pollfd fds[KR_LOOP_MAX_SOURCES];
	int n, r, wait;

	n = kr_loop_fds(loop, fds, KR_LOOP_MAX_SOURCES, &wait);
	if (n < 0)
		return n;
	if (max_wait_ms >= 0 && (wait < 0 || wait > max_wait_ms))
		wait = max_wait_ms;
	r = kr_port_poll(fds, n, wait);
	if (r < 0)
		return KR_EIO;
	if (r > 0)
		loop->wakeups++;
	return kr_loop_process(loop, fds, n);
}

int kr_loop_run(struct kr_loop *loop)
{
	while (!loop->stop)
		if (kr_loop_once(loop, -1) < 0)
			return KR_EIO;
	return 0;
}
