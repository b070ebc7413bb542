/*
 * The notification window every action after changes shares (--exec and
 * --signal, --http-post, the supervised program's signal or restart).
 *
 * Nothing fires before the first complete sync of every resource. The first
 * change after that opens a window; when it closes (ms later) the owner's
 * fire() runs once for every change in it. While the owner is busy (a
 * command still running, a POST not yet delivered, a program restarting) no
 * window closes: changes collect, and one window opens when it is done.
 */
#ifndef KR_DEBOUNCE_H
#define KR_DEBOUNCE_H

#include "kreflect_config.h"
#include "loop.h"
#include "sink.h"

struct kr_debounce {
	struct kr_loop *loop;
	struct kr_timer timer;
	int ms;
	int resources;                 /* resources that must sync before anything fires */
	int synced;                    /* resources synced at least once */
	unsigned char synced_res[KR_MAX_RESOURCES]; /* which: a relist of one is not another's sync */
	int ready;                     /* all of them: windows may close */
	int busy;                      /* the owner's action is still going on */
	unsigned long pending;         /* changes not yet handed to fire() */
	/* A window closed: changes is how many it held (>= 1). */
	void (*fire)(void *arg, unsigned long changes);
	void *arg;
};

/* Sets d up on loop; no window is open. Cannot fail. */
void kr_debounce_init(struct kr_debounce *d, struct kr_loop *loop, int ms, int resources,
		      void (*fire)(void *arg, unsigned long changes), void *arg);

/*
 * Counts ev: ADDED, MODIFIED and DELETED are changes (also before the first
 * sync: they are in the first window), SYNCED counts towards readiness,
 * RESYNC is nothing. Returns 1 when ev completed the first sync of every
 * resource, else 0. Opens no window: the owner decides what the first sync
 * means, then calls kr_debounce_arm().
 */
int kr_debounce_count(struct kr_debounce *d, const struct kr_event *ev);

/* Opens a window if changes wait, the first sync is done and the owner is not busy. */
void kr_debounce_arm(struct kr_debounce *d);

/* The owner's action started (busy = 1) or ended (0; a waiting window opens). */
void kr_debounce_set_busy(struct kr_debounce *d, int busy);

/*
 * Closes the open window now instead of at its end (--once: nothing more
 * will come). Returns 1 if fire() ran, 0 if nothing was waiting or the
 * owner is busy.
 */
int kr_debounce_flush(struct kr_debounce *d);

#endif /* KR_DEBOUNCE_H */
