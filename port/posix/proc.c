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

/* In the child: the errno of a failed step goes to the parent, then exit 127. */
static void child_failed(int fd)
{
	int err = errno;

	if (write(fd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

int kr_port_spawn(const char *const *argv, const char *const *env, const void *stdin_data,
		  size_t len, char *why, size_t size)
{
	int in[2] = { -1, -1 }, p[2], err = 0;
	pid_t pid;
	ssize_t n;

	/* The data fits the pipe (callers keep it under 64 KiB): no writer process needed. */
	if (stdin_data && len > 65536) {
		kr_snprintf(why, size, "standard input of %zu bytes is over 64 KiB", len);
		return KR_EINVAL;
	}
	if (stdin_data && pipe2(in, O_CLOEXEC) < 0) {
		kr_snprintf(why, size, "unable to make a pipe: %s", strerror(errno));
		return KR_EIO;
	}
	if (stdin_data && len > 0 && write(in[1], stdin_data, len) != (ssize_t)len) {
		kr_snprintf(why, size, "unable to fill its standard input: %s", strerror(errno));
		close(in[0]);
		close(in[1]);
		return KR_EIO;
	}
	if (in[1] >= 0)
		close(in[1]);
	if (pipe2(p, O_CLOEXEC) < 0) {
		kr_snprintf(why, size, "unable to make a pipe: %s", strerror(errno));
		if (in[0] >= 0)
			close(in[0]);
		return KR_EIO;
	}
	pid = fork();
	if (pid < 0) {
		kr_snprintf(why, size, "unable to fork: %s", strerror(errno));
		if (in[0] >= 0)
			close(in[0]);
		close(p[0]);
		close(p[1]);
		return KR_EIO;
	}
	if (pid == 0) {
		size_t i;

		child_signals();
		close(p[0]);
		if (in[0] >= 0 && dup2(in[0], 0) < 0)
			child_failed(p[1]);
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execvp(argv[0], (char *const *)argv);
		child_failed(p[1]);  /* only reached when exec failed */
	}
	if (in[0] >= 0)
		close(in[0]);
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
	long long n;
	size_t i;

	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	n = kr_strtoll(name, &end, 10);
	if (*name && !*end)
		return n > 0 && n < 65 ? (int)n : -1;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcasecmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return -1;
}
