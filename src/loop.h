/*
 * The single poll() loop.
 *
 * Sources (a descriptor, what it waits for, and a callback) and timers
 * (absolute monotonic deadlines) are structs the caller owns and registers.
 * Each pass rebuilds the pollfd set from the sources' current `want`, sleeps
 * exactly until the nearest deadline (forever if there is none: no periodic
 * wake-ups), and never sleeps while a source reports bytes already buffered
 * above the socket (mbedTLS's decrypted records). Signals arrive through a
 * descriptor and are dispatched from inside the loop like any other event.
 */
#ifndef KR_LOOP_H
#define KR_LOOP_H

#include "kreflect_config.h"
#include "port.h"

#ifndef KR_LOOP_MAX_SOURCES
/* connections, the signal fd, resolvers, children; the listener and its connections */
#if KR_WITH_LISTEN
#define KR_LOOP_MAX_SOURCES (32 + 1 + KR_SERVE_MAX_CONNS)
#else
#define KR_LOOP_MAX_SOURCES 32
#endif
#endif
#if KR_LOOP_MAX_SOURCES > KR_PORT_POLL_MAX
#error "KR_LOOP_MAX_SOURCES exceeds what one kr_port_poll call takes (KR_PORT_POLL_MAX)"
#endif
#ifndef KR_LOOP_MAX_TIMERS
#define KR_LOOP_MAX_TIMERS 64      /* per connection, per resource, debounce, ... */
#endif
#ifndef KR_LOOP_MAX_HOOKS
#define KR_LOOP_MAX_HOOKS 4        /* before-poll work: the batched JSON-lines output */
#endif

struct kr_loop;

struct kr_source {
	int fd;                        /* -1: not polled this pass */
	int want;                      /* KR_POLL_IN | KR_POLL_OUT; 0: not polled */
	/* Nonzero if bytes are buffered above fd (may be NULL). */
	int (*pending)(struct kr_source *s);
	/* Called with what poll() reported (KR_POLL_*), or KR_POLL_IN when pending. */
	void (*ready)(struct kr_loop *loop, struct kr_source *s, int got);
	void *arg;
	int registered;
	int slot;                      /* its entry in kr_loop_fds' array; -1: none */
};

struct kr_timer {
	kr_ms_t deadline;              /* absolute, on kr_port_now_ms()'s clock */
	void (*fire)(struct kr_loop *loop, struct kr_timer *t);
	void *arg;
	int armed;
};

struct kr_loop {
	struct kr_source *sources[KR_LOOP_MAX_SOURCES];
	int nsources;
	struct kr_timer *timers[KR_LOOP_MAX_TIMERS];
	int ntimers;
	struct kr_source signals;      /* the signal descriptor, when opened */
	void (*on_signal)(struct kr_loop *loop, int sig, void *arg);
	void *signal_arg;
	struct kr_loop_hook {
		int (*fn)(void *arg);
		void *arg;
	} hooks[KR_LOOP_MAX_HOOKS];    /* run before a poll() that may sleep */
	int nhooks;
	struct kr_loop_hook timer_hooks[KR_LOOP_MAX_HOOKS]; /* run before due timers fire */
	int ntimer_hooks;
	int stop;                      /* set to leave kr_loop_run */
	unsigned long wakeups;         /* poll() returns, for the idle test */
	unsigned long passes;          /* loop passes, counting pending-only ones */
};

/* Makes an empty loop; cannot fail. */
void kr_loop_init(struct kr_loop *loop);

/*
 * Runs fn(arg) before every poll() that may sleep (not while buffered bytes
 * or due timers keep the loop busy): for work gathered during a busy spell,
 * such as output written in batches. Returns 0 or KR_ENOSPC.
 */
int kr_loop_before_poll(struct kr_loop *loop, int (*fn)(void *arg), void *arg);
/* The same, run before those added earlier (output that must precede their batches). */
int kr_loop_before_poll_first(struct kr_loop *loop, int (*fn)(void *arg), void *arg);

/*
 * Runs fn(arg) in a pass that has due timers, before they fire: for work
 * gathered in the pass that a timer's callback must find done, such as
 * files renamed into place before a debounced hook runs. Returns 0 or
 * KR_ENOSPC.
 */
int kr_loop_before_timers(struct kr_loop *loop, int (*fn)(void *arg), void *arg);

/*
 * Opens the signal descriptor (SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1,
 * SIGUSR2 blocked and delivered through it; SIGPIPE ignored) and calls fn
 * for each signal from inside the loop. Returns 0 or KR_EIO.
 */
int kr_loop_signals(struct kr_loop *loop, void (*fn)(struct kr_loop *, int, void *), void *arg);

/* Registers s (owned by the caller until removed). Returns 0 or KR_ENOSPC. */
int kr_loop_add(struct kr_loop *loop, struct kr_source *s);

/* Unregisters s; harmless if it is not registered. */
void kr_loop_remove(struct kr_loop *loop, struct kr_source *s);

/*
 * Arms t to fire at the absolute time deadline (re-arming moves it).
 * Returns 0 or KR_ENOSPC when KR_LOOP_MAX_TIMERS timers are armed.
 */
int kr_loop_timer_at(struct kr_loop *loop, struct kr_timer *t, kr_ms_t deadline);

/* Disarms t; harmless if it is not armed. */
void kr_loop_timer_cancel(struct kr_loop *loop, struct kr_timer *t);

/*
 * One pass: waits at most max_wait_ms (-1: until the nearest deadline or
 * event) and dispatches what is ready, then due timers. Returns the number
 * of callbacks made, or KR_EIO if poll() failed.
 */
int kr_loop_once(struct kr_loop *loop, int max_wait_ms);

/*
 * The two halves of a pass, for a host that polls itself: fills fds[0..max)
 * with the descriptors to wait on and *wait_ms with how long it may sleep
 * (-1: no deadline, 0: buffered bytes or a due timer), running the
 * before-poll hooks when it may sleep. Returns the count or KR_ENOSPC.
 */
int kr_loop_fds(struct kr_loop *loop, struct kr_pollfd *fds, int max, int *wait_ms);

/*
 * Dispatches what the host's poll reported in fds[0..n) (matched by
 * descriptor, in any order), bytes buffered above sockets first, then due
 * timers. Returns the number of callbacks made.
 */
int kr_loop_process(struct kr_loop *loop, const struct kr_pollfd *fds, int n);

/* Runs passes until loop->stop is set. Returns 0, or KR_EIO if poll() failed. */
int kr_loop_run(struct kr_loop *loop);

#endif /* KR_LOOP_H */
