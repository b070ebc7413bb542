/*
 * The posix port's file-system calls (the directory sink's needs): Linux
 * with musl or glibc. Every call records errno for kr_port_fs_error().
 */
#define _GNU_SOURCE
#include "port.h"
#include "kreflect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>  /* rename */
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int fs_errno;

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

int kr_port_fs_open_read(const char *path)
{
	struct stat s;
	/* O_NONBLOCK: opening a fifo must not wait for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

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

int kr_port_fs_create(const char *path, unsigned mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY,
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
		unlink(path);
		return KR_EIO;
	}
	return fd;
}

int kr_port_fs_open_append(const char *path)
{
	struct stat s;
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

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
		fs_errno = EINVAL;
		close(fd);
		return KR_EINVAL;
	}
	return fd;
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
	if (fsync(fd) != 0) {
		fs_errno = errno;
		close(fd);
		return KR_EIO;
	}
	close(fd);
	return 0;
}
