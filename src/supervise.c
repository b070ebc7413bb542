#include "supervise.h"

#include <signal.h>
#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

static void fire(void *arg, unsigned long changes);

static void on_grace(struct kr_loop *loop, struct kr_timer *t);

int kr_supervise_init(struct kr_supervise *s, struct kr_loop *loop,
		      const struct kr_supervise_opts *o, char *err, size_t errlen)
{
	int n;

	memset(s, 0, sizeof(*s));
	s->o = *o;
	s->loop = loop;
	for (n = 0; o->argv && o->argv[n]; n++) {
		if (n == KR_SUPERVISE_ARGS) {
			kr_snprintf(err, errlen, "more than %d words (KR_SUPERVISE_ARGS)", KR_SUPERVISE_ARGS);
			return KR_EINVAL;
		}
		s->argv[n] = o->argv[n];
	}
	if (n == 0 || !s->argv[0][0]) {
		kr_snprintf(err, errlen, "no program to run");
		return KR_EINVAL;
	}
	s->argv[n] = NULL;
	if (s->o.grace_ms < 0)
		s->o.grace_ms = 0;
	s->grace.fire = on_grace;
	s->grace.arg = s;
	kr_debounce_init(&s->db, loop, o->debounce_ms, o->resources, fire, s);
	return 0;
}

/* The program is gone for good (or never came): kreflect ends with it. */
static void ended(struct kr_supervise *s)
{
	s->state = KR_SUP_ENDED;
	s->pid = 0;
	kr_loop_timer_cancel(s->loop, &s->grace);
	if (s->o.on_end)
		s->o.on_end(s->o.arg);
}

static void start(struct kr_supervise *s)
{
	int pid = kr_port_spawn(s->argv, NULL, NULL, 0, s->why, sizeof(s->why));

	if (pid < 0) {
		kr_log(KR_LOG_ERROR, "unable to start %s: %s", s->argv[0], s->why);
		s->start_error = pid;
		ended(s);
		return;
	}
	s->pid = pid;
	s->killed = 0;
	s->starts++;
	s->state = KR_SUP_RUNNING;
	kr_log(KR_LOG_INFO, "started %s (pid %d)%s", s->argv[0], pid,
	       s->starts > 1 ? " again" : " after the first sync");
}

/* SIGTERM now, SIGKILL when the grace period is over. */
static void stop_program(struct kr_supervise *s, int sig)
{
	if (kr_port_kill(s->pid, sig) != 0)
		kr_log(KR_LOG_WARN, "unable to send signal %d to %s (pid %d)", sig, s->argv[0], s->pid);
	if (!s->grace.armed && !s->killed)
		kr_loop_timer_at(s->loop, &s->grace, kr_port_now_ms() + s->o.grace_ms);
}

static void on_grace(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_supervise *s = t->arg;

	(void)loop;
	if (!s->pid)
		return;
	if (!s->killed) {
		kr_log(KR_LOG_WARN, "%s (pid %d) did not end within the grace period of %d ms: "
		       "sending SIGKILL", s->argv[0], s->pid, s->o.grace_ms);
		kr_port_kill(s->pid, SIGKILL);
		s->killed = 1;
		kr_loop_timer_at(s->loop, &s->grace, kr_port_now_ms() + KR_SUPERVISE_KILL_WAIT_MS);
		return;
	}
	/* Not even SIGKILL ended it (a process stuck in the kernel): give up waiting. */
	kr_log(KR_LOG_ERROR, "%s (pid %d) did not end %d ms after SIGKILL; giving up on it",
	       s->argv[0], s->pid, KR_SUPERVISE_KILL_WAIT_MS);
	s->code = 128 + SIGKILL;
	ended(s);
}

/* A window of changes closed while the program runs. */
static void fire(void *arg, unsigned long changes)
{
	struct kr_supervise *s = arg;

	if (s->state != KR_SUP_RUNNING)
		return;
	if (s->o.restart) {
		kr_log(KR_LOG_INFO, "restarting %s (pid %d) after %lu changes", s->argv[0], s->pid,
		       changes);
		s->state = KR_SUP_RESTARTING;
		kr_debounce_set_busy(&s->db, 1);
		stop_program(s, SIGTERM);
		return;
	}
	if (kr_port_kill(s->pid, s->o.child_signal) != 0) {
		kr_log(KR_LOG_WARN, "unable to send signal %d to %s (pid %d)", s->o.child_signal,
		       s->argv[0], s->pid);
		return;
	}
	s->signals_sent++;
	kr_log(KR_LOG_INFO, "sent signal %d to %s (pid %d) after %lu changes", s->o.child_signal,
	       s->argv[0], s->pid, changes);
}

void kr_supervise_event(void *arg, const struct kr_event *ev)
{
	struct kr_supervise *s = arg;

	if (kr_debounce_count(&s->db, ev) && s->state == KR_SUP_WAITING) {
		/* It starts with everything so far in place: nothing to tell it yet. */
		s->db.pending = 0;
		start(s);
	}
	if (s->state == KR_SUP_RUNNING)
		kr_debounce_arm(&s->db);
}

int kr_supervise_child_exited(struct kr_supervise *s, int pid, int code)
{
	if (!s->pid || pid != s->pid)
		return 0;
	kr_loop_timer_cancel(s->loop, &s->grace);
	s->pid = 0;
	s->code = code;
	switch (s->state) {
	case KR_SUP_RESTARTING:
		kr_log(KR_LOG_INFO, "%s exited with %d for the restart", s->argv[0], code);
		/* It starts again with every change so far in place: nothing to tell it. */
		s->db.pending = 0;
		start(s);
		if (s->state == KR_SUP_RUNNING)
			kr_debounce_set_busy(&s->db, 0);
		break;
	case KR_SUP_RUNNING:
		kr_log(code ? KR_LOG_WARN : KR_LOG_INFO, "%s exited with %d: stopping", s->argv[0], code);
		ended(s);
		break;
	default:
		kr_log(KR_LOG_INFO, "%s exited with %d", s->argv[0], code);
		ended(s);
		break;
	}
	return 1;
}

int kr_supervise_signal(struct kr_supervise *s, int sig)
{
	if (!s->pid)
		return 0;
	s->signals_forwarded++;
	if (sig == SIGTERM || sig == SIGINT) {
		if (s->state != KR_SUP_STOPPING)
			kr_log(KR_LOG_INFO, "passing signal %d on to %s (pid %d); SIGKILL in %d ms if "
			       "it is still running", sig, s->argv[0], s->pid, s->o.grace_ms);
		/* A restart in progress becomes a stop: it is not started again. */
		s->state = KR_SUP_STOPPING;
		stop_program(s, sig);
		return 1;
	}
	kr_log(KR_LOG_DEBUG, "passing signal %d on to %s (pid %d)", sig, s->argv[0], s->pid);
	if (kr_port_kill(s->pid, sig) != 0)
		kr_log(KR_LOG_WARN, "unable to send signal %d to %s (pid %d)", sig, s->argv[0], s->pid);
	return 1;
}
