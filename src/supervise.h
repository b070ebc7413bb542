/*
 * Supervisor mode (kreflect [flags] -- PROGRAM ARGS...): kreflect starts the
 * program it configures once the first complete sync of every resource is
 * done (and the files are written: the sinks before this one run first),
 * tells it about changes, and lives and dies with it.
 *
 *   - a change (debounced like every hook) sends it --child-signal (HUP), or
 *     with --on-change=restart stops it (SIGTERM, --grace, SIGKILL) and
 *     starts it again;
 *   - SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 to kreflect are passed
 *     on; after SIGTERM or SIGINT it gets the grace period, then SIGKILL;
 *   - when it ends, kreflect stops and exits with its exit code (128 + N
 *     if signal N killed it).
 * Children that are not its own (orphans handed to kreflect as PID 1) are
 * reaped by the caller's SIGCHLD handling and ignored here.
 */
#ifndef KR_SUPERVISE_H
#define KR_SUPERVISE_H

#include "debounce.h"
#include "kreflect_config.h"
#include "loop.h"
#include "sink.h"

/* After SIGKILL, how long to wait for the kernel to hand back the program. */
#ifndef KR_SUPERVISE_KILL_WAIT_MS
#define KR_SUPERVISE_KILL_WAIT_MS 5000
#endif

enum kr_supervise_state {
	KR_SUP_WAITING,                /* before the first sync: not started yet */
	KR_SUP_RUNNING,
	KR_SUP_RESTARTING,             /* stopped for a change; starts again when it has ended */
	KR_SUP_STOPPING,               /* kreflect is stopping: it has the grace period to end */
	KR_SUP_ENDED,                  /* it ended (code), or could not start (start_error) */
};

struct kr_supervise_opts {
	const char *const *argv;       /* PROGRAM ARGS..., NULL-terminated; strings outlive s */
	int child_signal;              /* sent on a change (default SIGHUP) */
	int restart;                   /* --on-change=restart: restart it instead */
	int grace_ms;                  /* SIGTERM, then this long, then SIGKILL */
	int debounce_ms;
	int resources;                 /* how many resources must sync before it starts */
	/* Called once when the program has ended for good or could not start. */
	void (*on_end)(void *arg);
	void *arg;
};

struct kr_supervise {
	struct kr_supervise_opts o;
	const char *argv[KR_SUPERVISE_ARGS + 1];
	struct kr_debounce db;         /* busy while a restart waits for the old one */
	struct kr_loop *loop;
	struct kr_timer grace;
	enum kr_supervise_state state;
	int pid;                       /* the program, 0 when none runs */
	int code;                      /* ENDED: its exit code, or 128 + signal */
	int start_error;               /* ENDED: 0, or why it could not start (KR_ENOENT, KR_EIO) */
	int killed;                    /* SIGKILL sent after the grace period */
	char why[160];                 /* the reason it could not start */
	unsigned long starts, signals_sent, signals_forwarded;
};

/*
 * Sets s up on loop. Returns 0, or KR_EINVAL with a reason in err (no
 * program, more than KR_SUPERVISE_ARGS words).
 */
int kr_supervise_init(struct kr_supervise *s, struct kr_loop *loop,
		      const struct kr_supervise_opts *o, char *err, size_t errlen);

/* The sink: starts the program at the first complete sync; changes signal or restart it. */
void kr_supervise_event(void *arg, const struct kr_event *ev);

/*
 * A child ended (call on SIGCHLD for every pid reaped). Returns 1 if it was
 * the program, else 0.
 */
int kr_supervise_child_exited(struct kr_supervise *s, int pid, int code);

/*
 * kreflect received sig. Returns 1 if the program has it now (passed on;
 * SIGTERM and SIGINT also start the grace period and make kreflect end with
 * the program), 0 if no program runs and kreflect should act on it itself.
 */
int kr_supervise_signal(struct kr_supervise *s, int sig);

#endif /* KR_SUPERVISE_H */
