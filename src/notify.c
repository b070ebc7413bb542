#include "notify.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

/* Splits n->cmd in place into words; '...' and "..." group a word. */
static int split(struct kr_notify *n, char *err, size_t errlen)
{
	char *p = n->cmd, *w;
	int argc = 0;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (argc == KR_NOTIFY_ARGS) {
			kr_snprintf(err, errlen, "more than %d words", KR_NOTIFY_ARGS);
			return KR_EINVAL;
		}
		n->argv[argc++] = w = p;
		while (*p && *p != ' ' && *p != '\t') {
			if (*p == '\'' || *p == '"') {
				char q = *p++;

				while (*p && *p != q)
					*w++ = *p++;
				if (*p != q) {
					kr_snprintf(err, errlen, "unterminated %c quote", q);
					return KR_EINVAL;
				}
				p++;
			} else {
				*w++ = *p++;
			}
		}
		if (*p)
			p++;
		*w = '\0';
	}
	n->argv[argc] = NULL;
	if (argc == 0) {
		kr_snprintf(err, errlen, "empty command");
		return KR_EINVAL;
	}
	return 0;
}

static void fire(void *arg, unsigned long changes);

int kr_notify_init(struct kr_notify *n, struct kr_loop *loop, const struct kr_notify_opts *o,
		   char *err, size_t errlen)
{
	kr_port_zero(n, sizeof(*n));
	n->o = *o;
	kr_debounce_init(&n->db, loop, o->debounce_ms, o->resources, fire, n);
	if (o->exec) {
		if (strlen(o->exec) >= sizeof(n->cmd)) {
			kr_snprintf(err, errlen, "longer than %zu bytes", sizeof(n->cmd) - 1);
			return KR_EINVAL;
		}
		memcpy(n->cmd, o->exec, strlen(o->exec) + 1);
		return split(n, err, errlen);
	}
	return 0;
}

static void add_key(struct kr_notify *n, const struct kr_event *ev)
{
	size_t need = strlen(ev->resource) + 1 + strlen(ev->key) + 1;

	/* snprintf also writes a NUL: a line that fills the buffer exactly would lose its newline. */
	if (n->keys_len + need >= sizeof(n->keys)) {
		n->keys_lost = 1;
		return;
	}
	n->keys_len += (size_t)kr_snprintf(n->keys + n->keys_len, sizeof(n->keys) - n->keys_len,
					"%s/%s\n", ev->resource, ev->key);
}

void kr_notify_event(void *arg, const struct kr_event *ev)
{
	struct kr_notify *n = arg;

	/* The first sync itself is worth one notification, unless it was a restart
	 * that needed no list: then the files are what they were. */
	if (kr_debounce_count(&n->db, ev) && !n->db.pending && !ev->warm)
		n->db.pending = 1;
	if (ev->restored)
		return;
	if (ev->type == KR_EV_ADDED || ev->type == KR_EV_MODIFIED || ev->type == KR_EV_DELETED)
		add_key(n, ev);
	kr_debounce_arm(&n->db);
}

static int send_signal(struct kr_notify *n, unsigned long changes)
{
	char buf[32];
	int pid = n->o.signal_pid;

	if (n->o.signal_pidfile) {
		long len = kr_port_read_file(n->o.signal_pidfile, buf, sizeof(buf) - 1);
		char *end;

		if (len <= 0) {
			kr_log(KR_LOG_ERROR, "unable to read pid file %s: %s", n->o.signal_pidfile,
			       len == 0 ? "empty" : kr_strerror((int)len));
			return -1;
		}
		buf[len] = '\0';
		long long v = kr_strtoll(buf, &end, 10);

		if (v <= 0 || v > INT_MAX || (*end && *end != '\n' && *end != ' ')) {
			kr_log(KR_LOG_ERROR, "pid file %s does not hold a pid", n->o.signal_pidfile);
			return -1;
		}
		pid = (int)v;
	}
	if (kr_port_kill(pid, n->o.signal) != 0) {
		kr_log(KR_LOG_ERROR, "unable to send signal %d to pid %d: %s", n->o.signal, pid,
		       kr_port_last_error());
		return -1;
	}
	n->signals_sent++;
	kr_log(KR_LOG_INFO, "sent signal %d to pid %d after %lu changes", n->o.signal, pid,
	       changes);
	return 0;
}

static void run(struct kr_notify *n, unsigned long changes)
{
	char count[48], why[160];
	const char *env[2] = { count, NULL };
	int pid;

	if (n->keys_lost && n->keys_len + 2 <= sizeof(n->keys)) {
		memcpy(n->keys + n->keys_len, "*\n", 2);   /* more changes than listed */
		n->keys_len += 2;
	}
	kr_snprintf(count, sizeof(count), "KREFLECT_EVENTS=%lu", changes);
	pid = kr_port_spawn((const char *const *)n->argv, env, n->keys, n->keys_len, why, sizeof(why));
	if (pid < 0) {
		n->failures++;
		kr_log(KR_LOG_ERROR, "unable to run %s: %s", n->argv[0], why);
	} else {
		n->child = pid;
		n->runs++;
		kr_debounce_set_busy(&n->db, 1);
		kr_log(KR_LOG_INFO, "running %s for %lu changes (pid %d)", n->argv[0], changes, pid);
	}
}

/* A window closed: the signal, then the command (never while one runs: busy). */
static void fire(void *arg, unsigned long changes)
{
	struct kr_notify *n = arg;

	if (n->o.signal && send_signal(n, changes) != 0)
		n->failures++;
	if (n->argv[0])
		run(n, changes);
	n->keys_len = 0;
	n->keys_lost = 0;
}

int kr_notify_flush(struct kr_notify *n)
{
	return kr_debounce_flush(&n->db);
}

int kr_notify_child_exited(struct kr_notify *n, int pid, int code)
{
	if (!n->child || pid != n->child)
		return 0;
	n->child = 0;
	n->last_exit = code;
	if (code != 0)
		n->failures++;
	kr_log(code ? KR_LOG_WARN : KR_LOG_INFO, "%s exited with %d", n->argv[0], code);
	/* Changes during the run: exactly one more run, after the debounce. */
	kr_debounce_set_busy(&n->db, 0);
	return 1;
}
