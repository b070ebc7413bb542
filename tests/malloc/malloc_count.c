/*
 * malloc_count: linked only into build/x86_64/kreflect-malloc (see the
 * Makefile's MALLOC_WRAP), never into kreflect itself. The linker's --wrap
 * sends every call of malloc, calloc, realloc, free, posix_memalign,
 * aligned_alloc and memalign made by any object in the link (src/, port/,
 * mbedTLS and the C library's own archive members) here first; each wrapper
 * counts the call and passes it on, so the program behaves as before.
 *
 * Start-up ends where main() calls kr_loop_run (wrapped too): calls before
 * that count as "startup", calls after as "running". Only the process that
 * started counts: kreflect resolves names in a forked child (port/posix),
 * whose allocations are its own and die with it.
 *
 * At exit (kreflect returns from main after SIGTERM, so atexit runs), the
 * counts and the first callers of each phase are appended to the file named
 * by $KR_MALLOC_COUNT_FILE, or written to stderr; a child's calls are appended
 * as they happen, one "child" line each, and never counted:
 *
 *   malloc-count pid=P phase=startup malloc=0 calloc=0 ... free_null=0 total=0
 *   malloc-count pid=P phase=running ...
 *   malloc-count caller phase=running fn=malloc bytes=N from=0xADDR
 *   malloc-count child pid=C fn=malloc bytes=N from=0xADDR (not counted)
 *
 * "total" counts every call except free(NULL), which touches no memory.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

enum { F_MALLOC, F_CALLOC, F_REALLOC, F_FREE, F_FREE_NULL, F_POSIX_MEMALIGN,
	F_ALIGNED_ALLOC, F_MEMALIGN, F_N };

static const char *const fn_names[F_N] = {
	"malloc", "calloc", "realloc", "free", "free_null", "posix_memalign",
	"aligned_alloc", "memalign",
};

#define CALLERS 16

struct caller {
	int fn;
	size_t bytes;
	void *from;
};

struct phase {
	unsigned long count[F_N];
	struct caller first[CALLERS];
	int ncallers;
};

static struct phase phases[2];   /* 0: start-up, 1: running (inside kr_loop_run) */
static int running;
static pid_t owner;
/* Set in a forked child by the fork wrapper: once kreflect's sandbox is on, getpid is
 * not on its system-call list, so a child is told apart without asking. */
static volatile long in_child;

pid_t __real_fork(void);
pid_t __wrap_fork(void);

pid_t __wrap_fork(void)
{
	pid_t pid = __real_fork();

	if (pid == 0)
		in_child = -1;  /* its pid is not asked for either */
	return pid;
}
static int depth;                /* calloc calling malloc inside the C library counts once */
static const char *count_file;   /* $KR_MALLOC_COUNT_FILE, or NULL for stderr */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
int __real_posix_memalign(void **p, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__real_memalign(size_t align, size_t n);
int __real_kr_loop_run(struct kr_loop *l);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_memalign(size_t align, size_t n);
int __wrap_kr_loop_run(struct kr_loop *l);

/* Opened once at start: after start-up kreflect's sandbox lets it open nothing outside --dir. */
static int count_fd = -1;

static int open_out(void)
{
	return count_fd < 0 ? 2 : count_fd;
}

static void out(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(int fn, size_t bytes, void *from)
{
	struct phase *ph;

	if (!owner)
		owner = getpid();
	if (depth > 0)
		return;
	if (in_child) {
		/* Shown, not counted: it proves the wrappers see the C library's own calls. */
		int fd = open_out();

		out(fd, "malloc-count child pid=%ld fn=%s bytes=%zu from=%p (not counted)\n",
		    (long)in_child, fn_names[fn], bytes, from);
		return;
	}
	ph = &phases[running];
	ph->count[fn]++;
	if (fn != F_FREE_NULL && ph->ncallers < CALLERS) {
		ph->first[ph->ncallers].fn = fn;
		ph->first[ph->ncallers].bytes = bytes;
		ph->first[ph->ncallers].from = from;
		ph->ncallers++;
	}
}

void *__wrap_malloc(size_t n)
{
	void *r;

	note(F_MALLOC, n, __builtin_return_address(0));
	depth++;
	r = __real_malloc(n);
	depth--;
	return r;
}

void *__wrap_calloc(size_t n, size_t size)
{
	void *r;

	note(F_CALLOC, n * size, __builtin_return_address(0));
	depth++;
	r = __real_calloc(n, size);
	depth--;
	return r;
}

void *__wrap_realloc(void *p, size_t n)
{
	void *r;

	note(F_REALLOC, n, __builtin_return_address(0));
	depth++;
	r = __real_realloc(p, n);
	depth--;
	return r;
}

void __wrap_free(void *p)
{
	note(p ? F_FREE : F_FREE_NULL, 0, __builtin_return_address(0));
	depth++;
	__real_free(p);
	depth--;
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	int r;

	note(F_POSIX_MEMALIGN, n, __builtin_return_address(0));
	depth++;
	r = __real_posix_memalign(p, align, n);
	depth--;
	return r;
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
	void *r;

	note(F_ALIGNED_ALLOC, n, __builtin_return_address(0));
	depth++;
	r = __real_aligned_alloc(align, n);
	depth--;
	return r;
}

void *__wrap_memalign(size_t align, size_t n)
{
	void *r;

	note(F_MEMALIGN, n, __builtin_return_address(0));
	depth++;
	r = __real_memalign(align, n);
	depth--;
	return r;
}

int __wrap_kr_loop_run(struct kr_loop *l)
{
	running = 1;
	return __real_kr_loop_run(l);
}

/* snprintf into a stack buffer and write(2): no stdio buffers, no allocation. */
static void out(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		return;
}

static void report(void)
{
	static const char *const names[2] = {"startup", "running"};
	int fd, p, f, i;

	if (in_child)
		return;
	fd = open_out();
	for (p = 0; p < 2; p++) {
		char line[400];
		size_t len = 0;
		unsigned long total = 0;

		for (f = 0; f < F_N; f++) {
			int n = snprintf(line + len, sizeof(line) - len, " %s=%lu", fn_names[f],
					 phases[p].count[f]);

			if (n > 0 && (size_t)n < sizeof(line) - len)
				len += (size_t)n;
			if (f != F_FREE_NULL)
				total += phases[p].count[f];
		}
		out(fd, "malloc-count pid=%ld phase=%s%s total=%lu loop_started=%d\n", (long)owner,
		    names[p], line, total, running);
	}
	for (p = 0; p < 2; p++)
		for (i = 0; i < phases[p].ncallers; i++)
			out(fd, "malloc-count caller phase=%s fn=%s bytes=%zu from=%p\n", names[p],
			    fn_names[phases[p].first[i].fn], phases[p].first[i].bytes,
			    phases[p].first[i].from);
}

__attribute__((constructor))
static void malloc_count_start(void)
{
	const char *path = getenv("KR_MALLOC_COUNT_FILE");

	if (!owner)
		owner = getpid();
	count_file = path && *path ? path : NULL;
	if (count_file)
		count_fd = open(count_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	depth++;                 /* atexit's own bookkeeping is not kreflect's */
	atexit(report);
	depth--;
}
