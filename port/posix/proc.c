/*
 * The posix port: child processes for hooks and the supervised program.
 */
#define _GNU_SOURCE
#include "fmt.h"
#include "kreflect.h"
#include "port.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * In a child before exec: every signal unblocked (the parent blocks them for
 * its signalfd) and at its default action. An ignored signal stays ignored
 * across exec, so a kreflect started ignoring SIGHUP (nohup) or SIGPIPE (its
 * own sockets) would hand that on, and an application under supervision
 * could not be told to reload.
 */
static void child_signals(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int kr_port_spawn(const char *const *argv, const char *const *env, const void *stdin_data,
		  size_t len)
{
	int p[2];
	pid_t pid;

	/* The data fits the pipe (callers keep it under 64 KiB): no writer process needed. */
	if (len > 65536 || pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (len > 0 && write(p[1], stdin_data, len) != (ssize_t)len) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	close(p[1]);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	if (pid == 0) {
		size_t i;

		child_signals();
		if (dup2(p[0], 0) < 0)
			_exit(127);
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[0]);
	return (int)pid;
}

int kr_port_start(const char *const *argv, char *why, size_t size)
{
	int p[2], err = 0;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0) {
		kr_snprintf(why, size, "unable to make a pipe: %s", strerror(errno));
		return KR_EIO;
	}
	pid = fork();
	if (pid < 0) {
		kr_snprintf(why, size, "unable to fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return KR_EIO;
	}
	if (pid == 0) {
		child_signals();
		close(p[0]);
		execvp(argv[0], (char *const *)argv);
		/* Only reached when exec failed: tell the parent why. */
		err = errno;
		if (write(p[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(p[1]);
	/* EOF (the exec closed the pipe) or the child's errno; both come at once. */
	do
		n = read(p[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == (ssize_t)sizeof(err)) {
		int code;

		waitpid(pid, &code, 0);
		kr_snprintf(why, size, "%s", strerror(err));
		return err == ENOENT ? KR_ENOENT : KR_EIO;
	}
	return (int)pid;
}

int kr_port_reap(int *code)
{
	int status;
	pid_t pid = waitpid(-1, &status, WNOHANG);

	if (pid <= 0)
		return 0;
	if (WIFEXITED(status))
		*code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		*code = 128 + WTERMSIG(status);
	else
		*code = -1;
	return (int)pid;
}

int kr_port_kill(int pid, int sig)
{
	return pid > 0 && kill((pid_t)pid, sig) == 0 ? 0 : KR_IO_ERR;
}

int kr_port_signal_number(const char *name)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
		{ "STOP", SIGSTOP }, { "WINCH", SIGWINCH }, { "ALRM", SIGALRM },
	};
	char *end;
	long n;
	size_t i;

	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	n = strtol(name, &end, 10);
	if (*name && !*end)
		return n > 0 && n < 65 ? (int)n : -1;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcasecmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return -1;
}
