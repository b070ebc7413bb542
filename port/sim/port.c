/*
 * The rest of port.h in the simulation: entropy from the world's PRNG,
 * addresses, memory, output, files held in memory (the token file), and
 * no child processes (calls fail with a reason, as on a system where they
 * are not allowed). The flash the state directory writes to is fs.c.
 */
#include "sim.h"
#include "fmt.h"
#include "kreflect.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int kr_port_entropy(void *ctx, unsigned char *out, size_t len, size_t *olen)
{
	size_t done = 0;

	(void)ctx;
	while (done < len) {
		uint64_t r = kr_sim_rand();
		size_t n = len - done < sizeof(r) ? len - done : sizeof(r);

		memcpy(out + done, &r, n);
		done += n;
	}
	*olen = done;
	return 0;
}

/*
 * The contract says the discarded bytes hold nothing worth keeping; posix
 * gives back whole pages (they read as zeros). Here every byte is poisoned,
 * so a caller that reads discarded memory gets garbage, not a lucky zero.
 */
void kr_port_discard(void *p, size_t len)
{
	memset(p, 0xa5, len);
}

/* Standard output and error are real (a sink may print in a traced run); nothing else exists. */
int kr_port_writev_all(int fd, struct kr_iov *iov, int n)
{
	int i;

	if (fd != 1 && fd != 2)
		return KR_IO_ERR;
	for (i = 0; i < n; i++) {
		const char *p = iov[i].base;
		size_t left = iov[i].len;

		while (left > 0) {
			ssize_t w = write(fd, p, left);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return KR_IO_ERR;
			p += w;
			left -= (size_t)w;
		}
	}
	return 0;
}

/* --- files: a few held in memory, set by the driver -------------------------------------- */

#define FILES 4
#define FILE_PATH_MAX 128
#define FILE_MAX 4096

static struct {
	char path[FILE_PATH_MAX];
	char data[FILE_MAX];
	size_t len;
	int used;
} files[FILES];

int kr_sim_file_set(const char *path, const void *data, size_t len)
{
	int i, free_slot = -1;

	if (strlen(path) >= FILE_PATH_MAX || len > FILE_MAX)
		return KR_ETOOBIG;
	for (i = 0; i < FILES; i++) {
		if (files[i].used && strcmp(files[i].path, path) == 0)
			break;
		if (!files[i].used && free_slot < 0)
			free_slot = i;
	}
	if (i == FILES)
		i = free_slot;
	if (i < 0)
		return KR_ENOSPC;
	snprintf(files[i].path, sizeof(files[i].path), "%s", path);
	memcpy(files[i].data, data, len);
	files[i].len = len;
	files[i].used = 1;
	return 0;
}

void kr_sim_files_clear(void)
{
	memset(files, 0, sizeof(files));
}

long kr_port_read_file(const char *path, void *buf, size_t size)
{
	int i;

	for (i = 0; i < FILES; i++) {
		if (!files[i].used || strcmp(files[i].path, path) != 0)
			continue;
		if (files[i].len > size)
			return KR_ETOOBIG;
		memcpy(buf, files[i].data, files[i].len);
		return (long)files[i].len;
	}
	return KR_ENOENT;
}

/* --- the directory sink and processes: not part of the simulated device ---------------------- */

/* Its file system (fs.c) is the state directory's; the directory sink's calls fail here. */
int kr_port_fs_rmdir(const char *path) { (void)path; return KR_EIO; }
/* The directory sink's descriptor-relative calls: no file system here either. */
int kr_port_fs_open_dir(const char *path) { (void)path; return KR_EIO; }
int kr_port_fs_open_dir_at(int dirfd, const char *name) { (void)dirfd; (void)name; return KR_EIO; }
int kr_port_fs_stat_at(int dirfd, const char *name, struct kr_fs_stat *st)
{
	(void)dirfd;
	(void)name;
	(void)st;
	return KR_EIO;
}
int kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode) { (void)dirfd; (void)name; (void)mode; return KR_EIO; }
int kr_port_fs_open_read_at(int dirfd, const char *name) { (void)dirfd; (void)name; return KR_EIO; }
int kr_port_fs_create_at(int dirfd, const char *name, unsigned mode) { (void)dirfd; (void)name; (void)mode; return KR_EIO; }
int kr_port_fs_open_append_at(int dirfd, const char *name) { (void)dirfd; (void)name; return KR_EIO; }
int kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to)
{
	(void)fromfd;
	(void)from;
	(void)tofd;
	(void)to;
	return KR_EIO;
}
int kr_port_fs_unlink_at(int dirfd, const char *name) { (void)dirfd; (void)name; return KR_EIO; }
int kr_port_fs_rmdir_at(int dirfd, const char *name) { (void)dirfd; (void)name; return KR_EIO; }
int kr_port_fs_sync_all(int fd) { (void)fd; return KR_EIO; }

int kr_port_spawn(const char *const *argv, const char *const *env, const void *stdin_data,
		  size_t len, char *why, size_t size)
{
	(void)env;
	(void)stdin_data;
	(void)len;
	snprintf(why, size, "%s: the simulated port runs no programs", argv && argv[0] ? argv[0] : "?");
	return KR_EIO;
}

int kr_port_reap(int *code)
{
	(void)code;
	return 0;
}

int kr_port_kill(int pid, int sig)
{
	(void)pid;
	(void)sig;
	return KR_IO_ERR;
}

int kr_port_signal_number(const char *name)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "KILL", 9 }, { "USR1", 10 },
		{ "USR2", 12 }, { "TERM", 15 },
	};
	size_t i;

	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return -1;
}

/* --- listening: the simulated device serves nothing locally ------------------------------ */

int kr_port_tcp_listen(const struct kr_addr *addr)
{
	(void)addr;
	return KR_IO_ERR;
}

int kr_port_unix_listen(const char *path, unsigned mode)
{
	(void)path;
	(void)mode;
	return KR_IO_ERR;
}

int kr_port_accept(int fd)
{
	(void)fd;
	return KR_IO_ERR;
}

/* The simulation is one process with no kernel to ask: nothing to apply. */
int kr_port_sandbox(const struct kr_sandbox *sb, char *done, size_t size)
{
	(void)sb;
	kr_snprintf(done, size, "sandbox: none in the simulation");
	return 0;
}

int kr_port_sandbox_calls(char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	return 0;
}
