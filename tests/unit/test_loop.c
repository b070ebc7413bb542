#include <string.h>
#include <unistd.h>

#include "kreflect.h"
#include "loop.h"
#include "test.h"

static int order[8], norder;

static void record(struct kr_loop *loop, struct kr_timer *t)
{
	(void)loop;
	order[norder++] = (int)(long)t->arg;
}

/* Three timers 1, 2, 3 armed in that order at now + d1, d2, d3; returns what arming said. */
static int arm_three(struct kr_loop *loop, struct kr_timer t[3], kr_ms_t d1, kr_ms_t d2, kr_ms_t d3)
{
	kr_ms_t now = kr_port_now_ms();
	int i;

	kr_loop_init(loop);
	norder = 0;
	memset(t, 0, 3 * sizeof(*t));
	for (i = 0; i < 3; i++) {
		t[i].fire = record;
		t[i].arg = (void *)(long)(i + 1);
	}
	return kr_loop_timer_at(loop, &t[0], now + d1) | kr_loop_timer_at(loop, &t[1], now + d2) |
	       kr_loop_timer_at(loop, &t[2], now + d3);
}

KR_TEST(loop, timers_fire_in_deadline_order_once)
{
	struct kr_loop loop;
	struct kr_timer t[3];

	check(arm_three(&loop, t, 30, 10, 20) == 0);
	while (norder < 3)
		check(kr_loop_once(&loop, 1000) >= 0);
	check(order[0] == 2 && order[1] == 3 && order[2] == 1);
	check(loop.ntimers == 0);
	check(!t[0].armed && !t[1].armed && !t[2].armed);
	return 0;
}

/* A late wake-up finds several due at once: still in deadline order, not arming order. */
KR_TEST(loop, timers_due_together_fire_in_deadline_order)
{
	struct kr_loop loop;
	struct kr_timer t[3];

	check(arm_three(&loop, t, -1, -3, -2) == 0);
	check(kr_loop_once(&loop, 0) >= 0);
	check(norder == 3);
	check(order[0] == 2 && order[1] == 3 && order[2] == 1);
	return 0;
}

KR_TEST(loop, cancelled_and_moved_timers)
{
	struct kr_loop loop;
	struct kr_timer a = { 0 }, b = { 0 };
	kr_ms_t now = kr_port_now_ms();

	kr_loop_init(&loop);
	norder = 0;
	a.fire = b.fire = record;
	a.arg = (void *)1L;
	b.arg = (void *)2L;
	kr_loop_timer_at(&loop, &a, now + 5);
	kr_loop_timer_at(&loop, &b, now + 5);
	kr_loop_timer_cancel(&loop, &a);
	kr_loop_timer_cancel(&loop, &a);            /* twice is harmless */
	kr_loop_timer_at(&loop, &b, now + 40);      /* re-arming moves, not duplicates */
	check(loop.ntimers == 1);
	kr_loop_once(&loop, 20);
	/* Not before it is due; a loaded machine may make it due by now. */
	check(norder == 0 || kr_port_now_ms() >= now + 40);
	while (norder < 1)
		kr_loop_once(&loop, 1000);
	check(norder == 1 && order[0] == 2);
	check(kr_port_now_ms() >= now + 40);
	return 0;
}

KR_TEST(loop, timer_capacity_is_bounded)
{
	static struct kr_timer t[KR_LOOP_MAX_TIMERS + 1];
	struct kr_loop loop;
	int i;

	kr_loop_init(&loop);
	memset(t, 0, sizeof(t));
	for (i = 0; i < KR_LOOP_MAX_TIMERS; i++)
		check(kr_loop_timer_at(&loop, &t[i], 1000000 + i) == 0);
	check(kr_loop_timer_at(&loop, &t[KR_LOOP_MAX_TIMERS], 5) == KR_ENOSPC);
	check(!t[KR_LOOP_MAX_TIMERS].armed);
	return 0;
}

static int readable_calls;

static void on_pipe(struct kr_loop *loop, struct kr_source *s, int got)
{
	char b[16];

	(void)loop;
	readable_calls++;
	if (got & KR_POLL_IN)
		(void)!read(s->fd, b, sizeof(b));
}

KR_TEST(loop, idle_wait_sleeps_until_deadline_without_wakeups)
{
	struct kr_loop loop;
	struct kr_source s = { 0 };
	struct kr_timer t = { 0 };
	int p[2];
	kr_ms_t start = kr_port_now_ms();

	check(pipe(p) == 0);
	kr_loop_init(&loop);
	s.fd = p[0];
	s.want = KR_POLL_IN;
	s.ready = on_pipe;
	check(kr_loop_add(&loop, &s) == 0);
	norder = 0;
	t.fire = record;
	kr_loop_timer_at(&loop, &t, start + 300);
	/* One pass: nothing is readable, so the only return is the deadline. */
	check(kr_loop_once(&loop, -1) == 1);
	check(norder == 1);
	check(kr_port_now_ms() - start >= 300);
	check(loop.wakeups == 0);
	check(loop.passes == 1);
	check(write(p[1], "x", 1) == 1);
	check(kr_loop_once(&loop, -1) == 1);
	check(readable_calls == 1 && loop.wakeups == 1);
	close(p[0]);
	close(p[1]);
	return 0;
}

static int pending_left;

static int has_pending(struct kr_source *s)
{
	(void)s;
	return pending_left > 0;
}

static void drain_pending(struct kr_loop *loop, struct kr_source *s, int got)
{
	(void)loop;
	(void)s;
	(void)got;
	pending_left--;
}

KR_TEST(loop, never_sleeps_while_bytes_are_pending)
{
	struct kr_loop loop;
	struct kr_source s = { 0 };
	kr_ms_t start = kr_port_now_ms();

	kr_loop_init(&loop);
	s.fd = -1;
	s.pending = has_pending;
	s.ready = drain_pending;
	kr_loop_add(&loop, &s);
	pending_left = 3;
	/* Would sleep 5 s per pass if pending bytes were ignored. */
	while (pending_left > 0)
		check(kr_loop_once(&loop, 5000) == 1);
	check(kr_port_now_ms() - start < 1000);
	return 0;
}

KR_TEST(loop, source_capacity_and_removal)
{
	static struct kr_source s[KR_LOOP_MAX_SOURCES + 1];
	struct kr_loop loop;
	int i;

	kr_loop_init(&loop);
	memset(s, 0, sizeof(s));
	for (i = 0; i < KR_LOOP_MAX_SOURCES; i++)
		check(kr_loop_add(&loop, &s[i]) == 0);
	check(kr_loop_add(&loop, &s[KR_LOOP_MAX_SOURCES]) == KR_ENOSPC);
	kr_loop_remove(&loop, &s[3]);
	check(!s[3].registered && loop.nsources == KR_LOOP_MAX_SOURCES - 1);
	check(kr_loop_add(&loop, &s[KR_LOOP_MAX_SOURCES]) == 0);
	return 0;
}

static int hook_runs;

static int count_hook(void *arg)
{
	(void)arg;
	/* A timer's callback must find the hook's work done: it records 9 first. */
	order[norder++] = 9;
	hook_runs++;
	return 0;
}

KR_TEST(loop, before_timers_hook_runs_only_ahead_of_due_timers)
{
	struct kr_loop loop;
	struct kr_timer a = { 0 };
	struct kr_pollfd fds[4];
	int i, wait;

	kr_loop_init(&loop);
	norder = 0;
	hook_runs = 0;
	check(kr_loop_before_timers(&loop, count_hook, NULL) == 0);
	/* No timer due: a pass runs no hook. */
	check(kr_loop_process(&loop, fds, 0) == 0);
	check(hook_runs == 0);
	a.fire = record;
	a.arg = (void *)1L;
	check(kr_loop_timer_at(&loop, &a, kr_port_now_ms()) == 0);
	check(kr_loop_fds(&loop, fds, 4, &wait) == 0 && wait == 0);
	check(kr_loop_process(&loop, fds, 0) == 1);
	check(hook_runs == 1 && norder == 2 && order[0] == 9 && order[1] == 1);
	for (i = 1; i < KR_LOOP_MAX_HOOKS; i++)
		check(kr_loop_before_timers(&loop, count_hook, NULL) == 0);
	check(kr_loop_before_timers(&loop, count_hook, NULL) == KR_ENOSPC);
	return 0;
}

static int got_of[3];

static void note_got(struct kr_loop *loop, struct kr_source *s, int got)
{
	(void)loop;
	got_of[(int)(long)s->arg] = got;
}

KR_TEST(loop, ready_sources_get_their_own_entry_in_place_or_compacted)
{
	struct kr_loop loop;
	struct kr_source s[3];
	struct kr_pollfd fds[KR_LOOP_MAX_SOURCES], one;
	int i, n, wait;

	kr_loop_init(&loop);
	memset(s, 0, sizeof(s));
	for (i = 0; i < 3; i++) {
		s[i].fd = 40 + i;              /* never polled: the test sets what poll() would */
		s[i].want = i == 1 ? 0 : KR_POLL_IN;
		s[i].ready = note_got;
		s[i].arg = (void *)(long)i;
		check(kr_loop_add(&loop, &s[i]) == 0);
	}
	n = kr_loop_fds(&loop, fds, KR_LOOP_MAX_SOURCES, &wait);
	check(n == 2 && fds[0].fd == 40 && fds[1].fd == 42);
	check(s[0].slot == 0 && s[1].slot == -1 && s[2].slot == 1);
	/* In place, as kr_loop_once hands them over. */
	fds[0].got = 0;
	fds[1].got = KR_POLL_IN | KR_POLL_ERR;
	memset(got_of, 0, sizeof(got_of));
	check(kr_loop_process(&loop, fds, n) == 1);
	check(got_of[0] == 0 && got_of[1] == 0 && got_of[2] == (KR_POLL_IN | KR_POLL_ERR));
	/* Compacted to the reported ones, as kr_client_process makes them: found by fd. */
	one.fd = 42;
	one.want = 0;
	one.got = KR_POLL_OUT;
	memset(got_of, 0, sizeof(got_of));
	check(kr_loop_process(&loop, &one, 1) == 1);
	check(got_of[0] == 0 && got_of[1] == 0 && got_of[2] == KR_POLL_OUT);
	return 0;
}
