#define _GNU_SOURCE /* pipe2 */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int kr_worker_start(struct kr_worker *slots, size_t n, int *wfd)
{
	int p[2];
	pid_t pid;
	size_t i;

	for (i = 0; i < n && slots[i].fd >= 0; i++)
		;
	if (i == n) {
		errno = EBUSY;
		return -1;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		errno = e;
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		*wfd = p[1];
		return -2;
	}
	close(p[1]);
	slots[i].fd = p[0];
	slots[i].pid = pid;
	return p[0];
}

struct kr_worker *kr_worker_find(struct kr_worker *slots, size_t n, int fd)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (slots[i].fd == fd && fd >= 0)
			return &slots[i];
	return NULL;
}

void kr_worker_end(struct kr_worker *w, int kill_first)
{
	if (kill_first)
		kill(w->pid, SIGKILL);
	/* Already collected by a SIGCHLD handler that reaps every child: ECHILD, harmless. */
	while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(w->fd);
	w->fd = -1;
	w->pid = 0;
}
