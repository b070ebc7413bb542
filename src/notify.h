/*
 * Notifications for the device: run a command or signal a process after
 * changes, debounced, and never before the first complete sync of every
 * resource. It is a sink (it sees every event) with a debounce window
 * (debounce.h) on the loop.
 *
 * A window opens at the first change: every change until it closes
 * (--debounce ms later) makes one notification; the first complete sync is
 * one too. A command never runs twice at once: changes during a run
 * schedule exactly one more run after it.
 */
#ifndef KR_NOTIFY_H
#define KR_NOTIFY_H

#include <stddef.h>

#include "debounce.h"
#include "loop.h"
#include "sink.h"

#ifndef KR_NOTIFY_ARGS
#define KR_NOTIFY_ARGS 32          /* words of an --exec command */
#endif
#ifndef KR_NOTIFY_KEYS_BYTES
#define KR_NOTIFY_KEYS_BYTES 16384 /* changed keys handed to the command's stdin */
#endif

struct kr_notify_opts {
	const char *exec;              /* "CMD ARGS", split on blanks (quotes group words); NULL = none */
	int signal;                    /* signal to send; 0 = none */
	int signal_pid;                /* to this pid, or */
	const char *signal_pidfile;    /* to the pid in this file (read at each send) */
	int debounce_ms;
	int resources;                 /* how many resources must sync before anything fires */
};

struct kr_notify {
	struct kr_notify_opts o;
	struct kr_debounce db;         /* the window; busy while the command runs */
	char cmd[1024];                /* the --exec text, split in place */
	char *argv[KR_NOTIFY_ARGS + 1];
	char keys[KR_NOTIFY_KEYS_BYTES];
	size_t keys_len;
	int keys_lost;                 /* more keys than fit: the command sees a marker */
	int child;                     /* pid of the running command, 0 if none */
	unsigned long runs, signals_sent, failures;
	int last_exit;
};

/*
 * Sets n up on loop with o (strings must outlive n). Returns 0, or KR_EINVAL
 * with a reason in err (empty command, too many words, unterminated quote).
 */
int kr_notify_init(struct kr_notify *n, struct kr_loop *loop, const struct kr_notify_opts *o,
		   char *err, size_t errlen);

/* The sink: counts changes (ADDED, MODIFIED, DELETED) and syncs. */
void kr_notify_event(void *arg, const struct kr_event *ev);

/*
 * A child ended (call on SIGCHLD for every pid reaped). Returns 1 if it was
 * the command's (its status is logged and a pending run is scheduled), else 0.
 */
int kr_notify_child_exited(struct kr_notify *n, int pid, int code);

/*
 * --once: runs the notification for what has collected now, without waiting
 * for the window to close. Returns 1 if a signal was sent or a command
 * started, else 0.
 */
int kr_notify_flush(struct kr_notify *n);

#endif /* KR_NOTIFY_H */
