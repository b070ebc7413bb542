#include "debounce.h"

#include <string.h>

static int close_window(struct kr_debounce *d)
{
	unsigned long changes = d->pending;

	if (!d->ready || !changes || d->busy)
		return 0;
	kr_loop_timer_cancel(d->loop, &d->timer);
	d->pending = 0;
	d->fire(d->arg, changes);
	return 1;
}

static void on_timer(struct kr_loop *loop, struct kr_timer *t)
{
	(void)loop;
	close_window(t->arg);
}

void kr_debounce_init(struct kr_debounce *d, struct kr_loop *loop, int ms, int resources,
		      void (*fire)(void *arg, unsigned long changes), void *arg)
{
	memset(d, 0, sizeof(*d));
	d->loop = loop;
	d->ms = ms < 0 ? 0 : ms;
	d->resources = resources;
	d->fire = fire;
	d->arg = arg;
	d->timer.fire = on_timer;
	d->timer.arg = d;
}

int kr_debounce_count(struct kr_debounce *d, const struct kr_event *ev)
{
	switch (ev->type) {
	case KR_EV_ADDED:
	case KR_EV_MODIFIED:
	case KR_EV_DELETED:
		/* A restored object is what the sinks had before the restart: no change. */
		if (!ev->restored)
			d->pending++;
		return 0;
	case KR_EV_SYNCED:
		if (d->ready || ev->res < 0 || ev->res >= KR_MAX_RESOURCES || d->synced_res[ev->res])
			return 0;
		d->synced_res[ev->res] = 1;
		if (++d->synced >= d->resources) {
			d->ready = 1;
			return 1;
		}
		return 0;
	case KR_EV_RESYNC:
		break;
	}
	return 0;
}

void kr_debounce_arm(struct kr_debounce *d)
{
	if (d->ready && d->pending && !d->busy && !d->timer.armed)
		kr_loop_timer_at(d->loop, &d->timer, kr_port_now_ms() + d->ms);
}

void kr_debounce_set_busy(struct kr_debounce *d, int busy)
{
	d->busy = busy;
	if (busy)
		kr_loop_timer_cancel(d->loop, &d->timer);
	else
		kr_debounce_arm(d);
}

int kr_debounce_flush(struct kr_debounce *d)
{
	return close_window(d);
}
