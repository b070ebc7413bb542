#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "kreflect.h"
#include "loop.h"
#include "sink.h"
#include "test.h"

static int capture(const struct kr_event *ev, char *out, size_t size)
{
	struct kr_jsonl j;
	int p[2];
	ssize_t n;

	if (pipe(p) != 0)
		return -1;
	kr_jsonl_init(&j, p[1]);
	kr_jsonl_event(&j, ev);
	kr_jsonl_flush(&j);
	close(p[1]);
	n = read(p[0], out, size - 1);
	close(p[0]);
	if (n < 0)
		return -1;
	out[n] = '\0';
	return (int)j.lines;
}

KR_TEST(sink, jsonl_object_line)
{
	struct kr_event ev = { KR_EV_MODIFIED, 0, "configmaps", "default/a", "7",
			       "{\"metadata\":{\"name\":\"a\"}}", 25, 0, 0, 0, 0 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n") == 0);
	return 0;
}

KR_TEST(sink, jsonl_synced_line_escapes)
{
	struct kr_event ev = { KR_EV_SYNCED, 0, "we\"ird", NULL, "12\\3", NULL, 0, 42, 0, 0, 0 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"SYNCED\",\"resource\":\"we\\\"ird\",\"resourceVersion\":\"12\\\\3\",\"count\":42,\"state\":\"live\"}\n") == 0);
	return 0;
}

KR_TEST(sink, jsonl_write_failure_is_reported_once)
{
	struct kr_event ev = { KR_EV_ADDED, 0, "configmaps", "k", "1", "{}", 2, 0, 0, 0, 0 };
	struct kr_jsonl j;
	int p[2];

	check(pipe(p) == 0);
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	kr_jsonl_init(&j, p[1]);
	kr_jsonl_event(&j, &ev);
	check(j.failed == 0 && j.lines == 1);     /* gathered, not written yet */
	check(kr_jsonl_flush(&j) == KR_EIO);
	check(j.failed == 1);
	kr_jsonl_event(&j, &ev);
	check(j.lines == 1 && j.len == 0);        /* nothing more is gathered */
	check(kr_jsonl_flush(&j) == KR_EIO);
	close(p[1]);
	return 0;
}

KR_TEST(sink, jsonl_partial_sync_is_marked)
{
	struct kr_event ev = { KR_EV_SYNCED, 0, "configmaps", NULL, "9", NULL, 0, 3, 1, 0, 0 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"SYNCED\",\"resource\":\"configmaps\",\"resourceVersion\":\"9\",\"count\":3,\"partial\":true,\"state\":\"live\"}\n") == 0);
	return 0;
}

KR_TEST(sink, jsonl_restored_sync_and_objects)
{
	struct kr_event sync = { KR_EV_SYNCED, 0, "configmaps", NULL, "9", NULL, 0, 3, 0, 1, 1 };
	struct kr_event obj = { KR_EV_ADDED, 0, "configmaps", "k", "1", "{}", 2, 0, 0, 1, 0 };
	char out[256];

	/* A restored object was printed before the restart: not again. */
	check(capture(&obj, out, sizeof(out)) == 0);
	check(capture(&sync, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"SYNCED\",\"resource\":\"configmaps\",\"resourceVersion\":\"9\",\"count\":3,\"state\":\"restored\"}\n") == 0);
	return 0;
}

/* Reads everything the pipe holds now (the writer's end stays open). */
static size_t drain(int fd, char *out, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size && (n = read(fd, out + got, size - got)) > 0)
		got += (size_t)n;
	return got;
}

/*
 * Lines are gathered and written in one go; the buffer's bound is hit
 * exactly, then by a line that crosses it, then by one larger than all of it.
 */
KR_TEST(sink, jsonl_gathers_lines_up_to_its_bound)
{
	static struct kr_jsonl j;
	static char obj[KR_JSONL_BUFFER_BYTES + 100], out[4 * KR_JSONL_BUFFER_BYTES];
	struct kr_event ev = { KR_EV_MODIFIED, 0, "configmaps", "k", "1", obj, 0, 0, 0, 0, 0 };
	const size_t frame = strlen("{\"type\":\"MODIFIED\",\"object\":") + 2;
	size_t got, i;
	int p[2];

	check(pipe(p) == 0);
	check(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
	check(fcntl(p[1], F_SETPIPE_SZ, 1 << 20) > 0);
	memset(obj, 'x', sizeof(obj));
	obj[0] = '"';
	kr_jsonl_init(&j, p[1]);
	/* Four lines that fill the buffer to the byte: gathered, not written. */
	ev.objlen = KR_JSONL_BUFFER_BYTES / 4 - frame;
	obj[ev.objlen - 1] = '"';
	for (i = 0; i < 4; i++)
		kr_jsonl_event(&j, &ev);
	check(j.len == KR_JSONL_BUFFER_BYTES && j.writes == 0);
	check(drain(p[0], out, sizeof(out)) == 0);
	/* One more: the full buffer goes out first, the line is gathered. */
	kr_jsonl_event(&j, &ev);
	check(j.writes == 1 && j.len == KR_JSONL_BUFFER_BYTES / 4);
	check(drain(p[0], out, sizeof(out)) == KR_JSONL_BUFFER_BYTES);
	obj[ev.objlen - 1] = 'x';
	/* A line larger than the buffer: what is gathered, then the line itself. */
	ev.objlen = KR_JSONL_BUFFER_BYTES + 50;
	obj[ev.objlen - 1] = '"';
	kr_jsonl_event(&j, &ev);
	check(j.writes == 3 && j.len == 0 && j.lines == 6);
	got = drain(p[0], out, sizeof(out));
	check(got == KR_JSONL_BUFFER_BYTES / 4 + frame + ev.objlen);
	check(memcmp(out + got - 3, "\"}\n", 3) == 0);
	check(kr_jsonl_flush(&j) == 0 && j.writes == 3);  /* nothing left: no empty write */
	close(p[0]);
	close(p[1]);
	return 0;
}

static int hook_calls;

static int count_hook(void *arg)
{
	(void)arg;
	hook_calls++;
	return 0;
}

static void no_op(struct kr_loop *l, struct kr_timer *t)
{
	(void)l;
	(void)t;
}

/* The before-poll hooks run when the loop may sleep, not while timers are due. */
KR_TEST(sink, loop_runs_hooks_before_it_may_sleep)
{
	static struct kr_loop l;
	struct kr_timer t;
	int i;

	kr_loop_init(&l);
	hook_calls = 0;
	for (i = 0; i < KR_LOOP_MAX_HOOKS; i++)
		check(kr_loop_before_poll(&l, count_hook, NULL) == 0);
	check(kr_loop_before_poll(&l, count_hook, NULL) == KR_ENOSPC);
	memset(&t, 0, sizeof(t));
	t.fire = no_op;
	kr_loop_timer_at(&l, &t, kr_port_now_ms() - 1);  /* due: poll(0), no hooks */
	kr_loop_once(&l, 50);
	check(hook_calls == 0);
	kr_loop_once(&l, 5);                             /* may sleep: every hook once */
	check(hook_calls == KR_LOOP_MAX_HOOKS);
	return 0;
}

/* The order hooks ran in, by their arg: '0' + k. */
static char hook_order[KR_LOOP_MAX_HOOKS + 1];

static int order_hook(void *arg)
{
	size_t n = strlen(hook_order);

	if (n < KR_LOOP_MAX_HOOKS)
		hook_order[n] = (char)('0' + (int)(intptr_t)arg);
	return 0;
}

/* A hook added "first" runs before those added earlier (JSON lines before the files' batch). */
KR_TEST(sink, loop_first_hook_runs_before_earlier_ones)
{
	static struct kr_loop l;

	kr_loop_init(&l);
	memset(hook_order, 0, sizeof(hook_order));
	check(kr_loop_before_poll(&l, order_hook, (void *)(intptr_t)1) == 0);
	check(kr_loop_before_poll(&l, order_hook, (void *)(intptr_t)2) == 0);
	check(kr_loop_before_poll_first(&l, order_hook, (void *)(intptr_t)0) == 0);
	check(kr_loop_before_poll(&l, order_hook, (void *)(intptr_t)3) == 0);
	kr_loop_once(&l, 5);
	check(strcmp(hook_order, "0123") == 0);
	while (l.nhooks < KR_LOOP_MAX_HOOKS)
		check(kr_loop_before_poll_first(&l, order_hook, (void *)(intptr_t)4) == 0);
	check(kr_loop_before_poll_first(&l, order_hook, (void *)(intptr_t)5) == KR_ENOSPC);
	check(kr_loop_before_timers(&l, order_hook, NULL) == 0);
	return 0;
}
