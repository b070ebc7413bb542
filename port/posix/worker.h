/*
 * A short-lived child that does one blocking job away from the loop and
 * answers down a pipe (the posix port's name lookups and state commits).
 * The loop polls the pipe's read end; the child never returns into
 * kreflect's code, it writes its answer and _exit()s.
 */
#ifndef KR_POSIX_WORKER_H
#define KR_POSIX_WORKER_H

#include <stddef.h>
#include <sys/types.h>

struct kr_worker {
	int fd;        /* the pipe's read end, or -1 for a free slot */
	pid_t pid;
};

#define KR_WORKER_FREE { -1, 0 }

/*
 * Forks a child with a non-blocking, close-on-exec pipe, in a free slot of
 * slots[0..n). In the parent: the slot's read end (>= 0). In the child: -2,
 * with *wfd the write end. On failure -1 and errno (EBUSY: no free slot).
 */
int kr_worker_start(struct kr_worker *slots, size_t n, int *wfd);

/* The slot whose read end is fd, or NULL. */
struct kr_worker *kr_worker_find(struct kr_worker *slots, size_t n, int fd);

/* Kills the child first if asked, reaps it, closes the pipe, frees the slot. */
void kr_worker_end(struct kr_worker *w, int kill_first);

#endif
