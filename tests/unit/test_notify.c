#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kreflect.h"
#include "debounce.h"
#include "notify.h"
#include "test.h"

static struct kr_notify n;
static struct kr_loop loop;

static void change(const char *key)
{
	struct kr_event ev = { KR_EV_MODIFIED, 0, "configmaps", key, "1", "{}", 2, 0, 0, 0, 0 };

	kr_notify_event(&n, &ev);
}

static void synced(void)
{
	struct kr_event ev = { KR_EV_SYNCED, 0, "configmaps", NULL, "1", NULL, 0, 1, 0, 0, 0 };

	kr_notify_event(&n, &ev);
}

/* Runs the loop for ms, reaping children as SIGCHLD would. */
static void spin(int ms)
{
	kr_ms_t end = kr_port_now_ms() + ms;
	int pid, code;

	while (kr_port_now_ms() < end) {
		kr_loop_once(&loop, 10);
		while ((pid = kr_port_reap(&code)) > 0)
			kr_notify_child_exited(&n, pid, code);
	}
}

static int read_out(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t got;

	if (!f)
		return -1;
	got = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[got] = '\0';
	return (int)got;
}

KR_TEST(notify, one_run_per_window_never_before_sync)
{
	struct kr_notify_opts o = { 0 };
	char err[128], cmd[256], out[4096];
	char path[] = "/tmp/kr-notify-XXXXXX";
	int fd = mkstemp(path), i;

	check(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "sh -c 'echo \"$KREFLECT_EVENTS\" >> %s; cat >> %s'", path, path);
	o.exec = cmd;
	o.debounce_ms = 150;
	o.resources = 1;
	kr_loop_init(&loop);
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == 0);
	change("default/early");
	spin(300);
	check(n.runs == 0);                       /* nothing before the first sync */
	synced();
	for (i = 0; i < 100; i++)
		change(i % 2 ? "default/a" : "default/b");
	spin(600);
	check(n.runs == 1);
	check(read_out(path, out, sizeof(out)) > 0);
	check(strncmp(out, "101\n", 4) == 0);    /* early + 100 (the sync adds none) */
	check(strstr(out, "configmaps/default/early\n") != NULL);
	check(strstr(out, "configmaps/default/a\n") != NULL);
	unlink(path);
	return 0;
}

KR_TEST(notify, changes_during_a_run_make_exactly_one_more)
{
	struct kr_notify_opts o = { 0 };
	char err[128];
	int i;

	o.exec = "sleep 0.4";
	o.debounce_ms = 50;
	o.resources = 1;
	kr_loop_init(&loop);
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == 0);
	synced();
	spin(150);
	check(n.runs == 1 && n.child > 0);
	for (i = 0; i < 20; i++)
		change("default/x");
	spin(300);
	check(n.runs == 1);                       /* still running: no second one yet */
	spin(1200);
	check(n.runs == 2 && n.child == 0 && n.last_exit == 0);
	return 0;
}

KR_TEST(notify, signal_to_a_pid_and_exit_codes)
{
	struct kr_notify_opts o = { 0 };
	const char *const argv[] = { "sleep", "5", NULL };
	char err[128], why[128];
	int pid = kr_port_spawn(argv, NULL, "", 0, why, sizeof(why)), code = 0, got = 0, i;

	check(pid > 0);
	o.signal = kr_port_signal_number("SIGTERM");
	check(o.signal == SIGTERM);
	o.signal_pid = pid;
	o.resources = 1;
	kr_loop_init(&loop);
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == 0);
	synced();
	kr_loop_once(&loop, 50);
	check(n.signals_sent == 1);
	for (i = 0; i < 100 && got != pid; i++) {
		kr_port_poll(NULL, 0, 10);
		got = kr_port_reap(&code);
	}
	check(got == pid && code == 128 + SIGTERM);
	return 0;
}

KR_TEST(notify, bad_commands_and_signal_names)
{
	struct kr_notify_opts o = { 0 };
	char err[128];

	kr_loop_init(&loop);
	o.exec = "   ";
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == KR_EINVAL);
	o.exec = "echo 'unterminated";
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "unterminated") != NULL);
	o.exec = "a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 7";
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == KR_EINVAL);
	o.exec = "printf '%s\\n' \"two words\" x";
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == 0);
	check(strcmp(n.argv[1], "%s\\n") == 0 && strcmp(n.argv[2], "two words") == 0 && !n.argv[4]);
	check(kr_port_signal_number("hup") == SIGHUP && kr_port_signal_number("9") == 9);
	check(kr_port_signal_number("NOPE") == -1 && kr_port_signal_number("99") == -1);
	return 0;
}

KR_TEST(notify, bounds_of_command_and_key_list)
{
	static char longcmd[1100];
	struct kr_notify_opts o = { 0 };
	char err[128], key[64];
	int i;

	kr_loop_init(&loop);
	memset(longcmd, 'a', sizeof(longcmd) - 1);
	o.exec = longcmd;
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "longer than") != NULL);
	o.exec = "true";
	o.resources = 1;
	o.debounce_ms = 100000;
	check(kr_notify_init(&n, &loop, &o, err, sizeof(err)) == 0);
	/* More changed keys than KR_NOTIFY_KEYS_BYTES hold: the list stops, whole lines only. */
	for (i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "default/object-%05d", i);
		change(key);
	}
	check(n.db.pending == 2000);
	check(n.keys_lost == 1);
	check(n.keys_len <= sizeof(n.keys) && n.keys_len > sizeof(n.keys) - 64);
	check(n.keys[n.keys_len - 1] == '\n');
	return 0;
}

/* Two resources: a relist of the first is not the second's first sync. */
KR_TEST(notify, every_resource_must_sync_not_one_twice)
{
	struct kr_debounce d;
	struct kr_loop l;
	struct kr_event cm = { KR_EV_SYNCED, 0, "configmaps", NULL, "1", NULL, 0, 1, 0, 0, 0 };
	struct kr_event sec = { KR_EV_SYNCED, 1, "secrets", NULL, "1", NULL, 0, 1, 0, 0, 0 };
	struct kr_event bad = { KR_EV_SYNCED, KR_MAX_RESOURCES, "x", NULL, "1", NULL, 0, 1, 0, 0, 0 };

	kr_loop_init(&l);
	kr_debounce_init(&d, &l, 100, 2, NULL, NULL);
	check(kr_debounce_count(&d, &cm) == 0);
	check(kr_debounce_count(&d, &cm) == 0);   /* configmaps relisted: still not ready */
	check(kr_debounce_count(&d, &bad) == 0);  /* out of range: ignored */
	check(!d.ready);
	check(kr_debounce_count(&d, &sec) == 1);
	check(d.ready);
	check(kr_debounce_count(&d, &sec) == 0);  /* only the first time */
	return 0;
}

/* A child starts with every signal at its default action, even those kreflect ignores. */
KR_TEST(notify, children_do_not_inherit_ignored_signals)
{
	char path[] = "/tmp/kr-sigign-XXXXXX", cmd[200], out[256], why[128];
	const char *argv[] = { "sh", "-c", cmd, NULL };
	int fd = mkstemp(path), pid, code = -1, i;
	unsigned long long mask;
	void (*old)(int) = signal(SIGHUP, SIG_IGN);

	check(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "grep SigIgn /proc/$$/status > %s", path);
	pid = kr_port_spawn(argv, NULL, "", 0, why, sizeof(why));
	signal(SIGHUP, old);
	check(pid > 0);
	for (i = 0; i < 500 && kr_port_reap(&code) != pid; i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	check(code == 0);
	check(read_out(path, out, sizeof(out)) > 0);
	unlink(path);
	check(sscanf(out, "SigIgn: %llx", &mask) == 1);
	check((mask & (1ULL << (SIGHUP - 1))) == 0);
	check((mask & (1ULL << (SIGPIPE - 1))) == 0);
	return 0;
}

/* A program that cannot start is said at once, with the system's reason, not as a later exit 127. */
KR_TEST(notify, spawn_failures_are_named)
{
	const char *const missing[] = { "kreflect-no-such-program", NULL };
	const char *const notexec[] = { "/etc/passwd", NULL };
	char why[128], big[1];

	check(kr_port_spawn(missing, NULL, "", 0, why, sizeof(why)) == KR_ENOENT);
	check(strstr(why, "No such file") != NULL);
	check(kr_port_spawn(notexec, NULL, NULL, 0, why, sizeof(why)) == KR_EIO);
	check(strstr(why, "ermission") != NULL);
	check(kr_port_spawn(missing, NULL, big, 65537, why, sizeof(why)) == KR_EINVAL);
	check(strstr(why, "64 KiB") != NULL);
	return 0;
}
