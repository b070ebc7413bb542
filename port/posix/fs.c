/*
 * The posix port's file-system calls (the directory sink's needs): Linux
 * with musl or glibc. Every call records errno for kr_port_fs_error().
 */
#define _GNU_SOURCE
#include "port.h"
#include "kreflect.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>  /* rename */
#include <stdlib.h> /* getenv */
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

static int fs_errno;

/*
 * Test hook, never set in production: KREFLECT_FAULT_FSYNC_MS=N (1..60000)
 * makes every fsync, directory fsync and syncfs take N ms longer, as on a
 * slow SD card, so that the loop stall they cause can be measured
 * (tests/bench/stall.py). Read once, at the first sync; announced on the log.
 */
static long fault_ms = -1;

static void fault_init(void)
{
	if (fault_ms < 0) {
		const char *v = getenv("KREFLECT_FAULT_FSYNC_MS");
		long n = 0;

		for (; v && *v >= '0' && *v <= '9' && n <= 60000; v++)
			n = n * 10 + (*v - '0');
		fault_ms = v && *v == '\0' && n <= 60000 ? n : 0;
		if (fault_ms > 0) {
			static const char msg[] = "kreflect: test hook KREFLECT_FAULT_FSYNC_MS is set: "
						  "every fsync is slowed down\n";

			kr_port_log_write(msg, sizeof(msg) - 1);
		}
	}
}

static void fault_delay(void)
{
	fault_init();
	if (fault_ms > 0) {
		struct timespec ts = { fault_ms / 1000, (fault_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

/* Records errno and maps it to the KR_E code the contract names. */
static int fail(int enoent_code)
{
	fs_errno = errno;
	return errno == ENOENT ? enoent_code : KR_EIO;
}

const char *kr_port_fs_error(void)
{
	return strerror(fs_errno);
}

int kr_port_fs_stat(const char *path, struct kr_fs_stat *st)
{
	struct stat s;

	memset(st, 0, sizeof(*st));
	if (lstat(path, &s) != 0) {
		if (errno == ENOENT || errno == ENOTDIR) {
			st->type = KR_FS_NONE;
			return 0;
		}
		return fail(KR_EIO);
	}
	st->type = S_ISREG(s.st_mode) ? KR_FS_FILE : S_ISDIR(s.st_mode) ? KR_FS_DIR : KR_FS_OTHER;
	st->mode = (unsigned)(s.st_mode & 07777);
	st->size = (uint64_t)s.st_size;
	st->dev = (uint64_t)s.st_dev;
	st->ino = (uint64_t)s.st_ino;
	st->mtime_ns = (int64_t)s.st_mtim.tv_sec * 1000000000 + s.st_mtim.tv_nsec;
	return 0;
}

int kr_port_fs_is_dir(const char *path)
{
	struct stat s;

	if (stat(path, &s) != 0)
		return fail(KR_ENOENT);
	if (!S_ISDIR(s.st_mode)) {
		fs_errno = ENOTDIR;
		return KR_EINVAL;
	}
	return 0;
}

int kr_port_fs_mkdir(const char *path, unsigned mode)
{
	if (mkdir(path, (mode_t)mode) != 0)
		return errno == EEXIST ? 1 : fail(KR_ENOENT);
	/* mkdir applies the umask; the contract promises the mode asked for. */
	if (chmod(path, (mode_t)mode) != 0)
		return fail(KR_EIO);
	return 0;
}

/* Opens path (relative to dirfd) with flags, for a regular file only; never follows a last link. */
static int open_regular(int dirfd, const char *path, int flags)
{
	struct stat s;
	int fd;

	/* O_NONBLOCK: opening a fifo must not wait for the other end. */
	fd = openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ELOOP) {
			fs_errno = errno;
			return KR_EINVAL;
		}
		return fail(KR_ENOENT);
	}
	if (fstat(fd, &s) != 0) {
		fs_errno = errno;
		close(fd);
		return KR_EIO;
	}
	if (!S_ISREG(s.st_mode)) {
		fs_errno = S_ISDIR(s.st_mode) ? EISDIR : EINVAL;
		close(fd);
		return KR_EINVAL;
	}
	return fd;
}

int kr_port_fs_open_read(const char *path)
{
	return open_regular(AT_FDCWD, path, O_RDONLY);
}

long kr_port_fs_read(int fd, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = read(fd, buf, len);

		if (n >= 0)
			return (long)n;
		if (errno != EINTR) {
			fs_errno = errno;
			return KR_EIO;
		}
	}
}

/* Creates path (relative to dirfd) as a new file with exactly mode; never follows a link. */
static int create_file(int dirfd, const char *path, unsigned mode)
{
	int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
			(mode_t)mode);

	if (fd < 0) {
		if (errno == EEXIST) {
			fs_errno = errno;
			return KR_EINVAL;
		}
		return fail(KR_ENOENT);
	}
	/* open applied the umask; the contract promises the mode asked for. */
	if (fchmod(fd, (mode_t)mode) != 0) {
		fs_errno = errno;
		close(fd);
		unlinkat(dirfd, path, 0);
		return KR_EIO;
	}
	return fd;
}

int kr_port_fs_create(const char *path, unsigned mode)
{
	return create_file(AT_FDCWD, path, mode);
}

int kr_port_fs_open_append(const char *path)
{
	return open_regular(AT_FDCWD, path, O_WRONLY | O_APPEND);
}

int kr_port_fs_write(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fs_errno = n < 0 ? errno : ENOSPC;
			return KR_EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int kr_port_fs_sync(int fd)
{
	fault_delay();
	if (fsync(fd) != 0) {
		fs_errno = errno;
		return KR_EIO;
	}
	return 0;
}

int kr_port_fs_close(int fd)
{
	/* Not retried on EINTR: on Linux the descriptor is gone either way. */
	if (close(fd) != 0 && errno != EINTR) {
		fs_errno = errno;
		return KR_EIO;
	}
	return 0;
}

int kr_port_fs_rename(const char *from, const char *to)
{
	if (rename(from, to) != 0)
		return fail(KR_EIO);
	return 0;
}

int kr_port_fs_unlink(const char *path)
{
	if (unlink(path) != 0)
		return fail(KR_ENOENT);
	return 0;
}

int kr_port_fs_rmdir(const char *path)
{
	if (rmdir(path) != 0)
		return fail(KR_ENOENT);
	return 0;
}

int kr_port_fs_sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return fail(KR_EIO);
	fault_delay();
	if (fsync(fd) != 0) {
		fs_errno = errno;
		close(fd);
		return KR_EIO;
	}
	close(fd);
	return 0;
}

/* --- relative to a directory ------------------------------------------------------ */

/* Nonzero if name is one plain component: never "", ".", ".." nor a path. */
static int one_name(const char *name)
{
	if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		fs_errno = EINVAL;
		return 0;
	}
	return 1;
}

/* Fills st from s. */
static void to_stat(const struct stat *s, struct kr_fs_stat *st)
{
	st->type = S_ISREG(s->st_mode) ? KR_FS_FILE : S_ISDIR(s->st_mode) ? KR_FS_DIR : KR_FS_OTHER;
	st->mode = (unsigned)(s->st_mode & 07777);
	st->size = (uint64_t)s->st_size;
	st->dev = (uint64_t)s->st_dev;
	st->ino = (uint64_t)s->st_ino;
	st->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
}

int kr_port_fs_open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOTDIR) {
			fs_errno = errno;
			return KR_EINVAL;
		}
		return fail(KR_ENOENT);
	}
	return fd;
}

int kr_port_fs_open_dir_at(int dirfd, const char *name)
{
	int fd;

	if (!one_name(name))
		return KR_EINVAL;
	/* O_NOFOLLOW with O_DIRECTORY: a link fails (ELOOP), a file too (ENOTDIR). */
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR) {
			fs_errno = errno;
			return KR_EINVAL;
		}
		return fail(KR_ENOENT);
	}
	return fd;
}

int kr_port_fs_stat_at(int dirfd, const char *name, struct kr_fs_stat *st)
{
	struct stat s;

	memset(st, 0, sizeof(*st));
	if (!one_name(name))
		return KR_EINVAL;
	if (fstatat(dirfd, name, &s, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT) {
			st->type = KR_FS_NONE;
			return 0;
		}
		return fail(KR_EIO);
	}
	to_stat(&s, st);
	return 0;
}

int kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode)
{
	int fd;

	if (!one_name(name))
		return KR_EINVAL;
	if (mkdirat(dirfd, name, (mode_t)mode) != 0)
		return errno == EEXIST ? 1 : fail(KR_ENOENT);
	/* The mode through a descriptor: a link swapped in since mkdirat is never chmodded. */
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(KR_EIO);
	if (fchmod(fd, (mode_t)mode) != 0) {
		fs_errno = errno;
		close(fd);
		return KR_EIO;
	}
	close(fd);
	return 0;
}

/* Opens name (one name: no '/') in dirfd with flags, for a regular file only. */
static int open_regular_at(int dirfd, const char *name, int flags)
{
	if (!one_name(name))
		return KR_EINVAL;
	return open_regular(dirfd, name, flags);
}

int kr_port_fs_open_read_at(int dirfd, const char *name)
{
	return open_regular_at(dirfd, name, O_RDONLY);
}

int kr_port_fs_open_append_at(int dirfd, const char *name)
{
	return open_regular_at(dirfd, name, O_WRONLY | O_APPEND);
}

int kr_port_fs_create_at(int dirfd, const char *name, unsigned mode)
{
	if (!one_name(name))
		return KR_EINVAL;
	return create_file(dirfd, name, mode);
}

int kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to)
{
	if (!one_name(from) || !one_name(to))
		return KR_EINVAL;
	/* rename never follows a link at either name: one at `to` is replaced, not written through. */
	if (renameat(fromfd, from, tofd, to) != 0)
		return fail(KR_EIO);
	return 0;
}

int kr_port_fs_unlink_at(int dirfd, const char *name)
{
	if (!one_name(name))
		return KR_EINVAL;
	if (unlinkat(dirfd, name, 0) != 0)
		return fail(KR_ENOENT);
	return 0;
}

int kr_port_fs_rmdir_at(int dirfd, const char *name)
{
	if (!one_name(name))
		return KR_EINVAL;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
		return fail(KR_ENOENT);
	return 0;
}

int kr_port_fs_sync_all(int fd)
{
	fault_delay();
	if (syncfs(fd) != 0) {
		fs_errno = errno;
		return KR_EIO;
	}
	return 0;
}

/* --- commits in a child ------------------------------------------------------------- */

static struct kr_worker committing[2] = { KR_WORKER_FREE, KR_WORKER_FREE };

int kr_port_fs_commit_start(int fd, const char *tmp, const char *path, const char *dir)
{
	int rfd, wfd = -1;

	fault_init();  /* once, here: the child only sleeps */
	rfd = kr_worker_start(committing, sizeof(committing) / sizeof(committing[0]), &wfd);
	if (rfd == -1) {
		fs_errno = errno;
		return KR_EIO;
	}
	if (rfd == -2) {
		/* The child: two ints down the pipe, then _exit. */
		int msg[2] = { 0, 0 }, dfd;

		fault_delay();
		if (fsync(fd) != 0) {
			msg[0] = 1;
		} else if (tmp && rename(tmp, path) != 0) {
			msg[0] = 2;
		} else if (dir) {
			dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			fault_delay();
			if (dfd < 0 || fsync(dfd) != 0)
				msg[0] = 3;
		}
		msg[1] = msg[0] ? errno : 0;
		if (write(wfd, msg, sizeof(msg)) < 0)
			_exit(1);
		_exit(0);
	}
	return rfd;
}

int kr_port_fs_commit_finish(int cfd, int wait, int *step)
{
	int msg[2] = { 1, EIO };
	struct kr_worker *w;
	ssize_t n;

	*step = 0;
	w = kr_worker_find(committing, sizeof(committing) / sizeof(committing[0]), cfd);
	if (!w) {
		fs_errno = EBADF;
		*step = 1;
		return KR_EIO;
	}
	for (;;) {
		n = read(cfd, msg, sizeof(msg));
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (!wait)
			return KR_IO_WAIT;
		if (errno == EAGAIN) {
			struct pollfd pf = { cfd, POLLIN, 0 };

			poll(&pf, 1, -1);
		}
	}
	kr_worker_end(w, 0);
	if (n != (ssize_t)sizeof(msg)) {
		/* The child died before it could say: nothing is known to be durable. */
		*step = 1;
		fs_errno = EIO;
		return KR_EIO;
	}
	if (msg[0] == 0)
		return 0;
	*step = msg[0];
	fs_errno = msg[1];
	return KR_EIO;
}
