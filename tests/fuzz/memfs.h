/*
 * A file system in memory that can lose power, for the state directory's
 * tests (fuzz_state_load, fuzz_state_crash) and the simulated port
 * (port/sim/fs.c). In the fuzz targets it is linked with --wrap around the
 * port's kr_port_fs_ calls (Makefile: FUZZ_LDFLAGS_state_*); the simulated
 * port defines MEMFS_FN(name) as kr_port_fs_##name before including it, so
 * the calls are the port's own. Either way the unmodified src/state.c runs
 * on it.
 *
 * Every inode has volatile bytes (what reads see) and durable bytes (what
 * survives a power cut): kr_port_fs_sync makes them equal. The directory
 * has a volatile and a durable table of names likewise, made equal by
 * kr_port_fs_sync_dir. memfs_cut(k) powers the machine off just before the
 * k-th call that changes anything (create, write, sync, close, rename,
 * unlink, sync_dir): that call and every later one fail with KR_EIO and
 * change nothing. memfs_reboot(mode) then picks what the disk holds:
 *
 *   MEMFS_DURABLE   only what was made durable (names and bytes)
 *   MEMFS_NAMES     every name as the volatile table had it, bytes durable
 *                   (a file system that journals names before data)
 *   MEMFS_ALL       everything volatile reached the disk (also: the process
 *                   died, the kernel kept its page cache)
 *   MEMFS_TORN      durable names; each inode's bytes: the durable ones,
 *                   then half of what was written after them
 *
 * memfs.fault, when set, is asked before every changing call while the
 * power is on and may fail it (an I/O error, a full disk) or make it slow
 * (the simulated port moves its clock): a failed call changes nothing.
 *
 * One directory, a few files: enough for DIR/state, DIR/state.tmp and
 * DIR/journal. Files only grow (create, append): an inode's durable bytes
 * are always a prefix of its volatile ones, so a copy of the lengths
 * restores a disk. No heap: the bytes are static storage (untouched pages
 * cost nothing).
 */
#ifndef KR_TEST_MEMFS_H
#define KR_TEST_MEMFS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "port.h"

#define MEMFS_INODES 8
#define MEMFS_NAMES 4
#define MEMFS_FDS 4
#define MEMFS_BYTES (4u << 20)

/* The calls' names: the fuzz targets' --wrap ones unless the includer chose. */
#ifndef MEMFS_FN
#define MEMFS_FN(name) __wrap_kr_port_fs_##name
#define MEMFS_WRAPPED 1
#endif
/* The first descriptor number (the simulated port keeps them apart from its sockets). */
#ifndef MEMFS_FD0
#define MEMFS_FD0 100
#endif

/* The changing calls, as memfs.fault sees them. */
enum { MEMFS_OP_CREATE, MEMFS_OP_WRITE, MEMFS_OP_SYNC, MEMFS_OP_CLOSE, MEMFS_OP_RENAME,
       MEMFS_OP_UNLINK, MEMFS_OP_SYNC_DIR };

enum { MEMFS_DURABLE, MEMFS_NAMES_ONLY, MEMFS_ALL, MEMFS_TORN, MEMFS_MODES };

struct memfs_inode {
	int used;
	size_t vlen, dlen;
	unsigned char *v, *d;          /* MEMFS_BYTES each, in memfs_bytes */
};

struct memfs_name {
	char name[600];
	int ino;                       /* -1: no entry */
};

struct memfs_fd {
	int ino;                       /* -1: closed */
	size_t pos;
	int writing;
};

static struct {
	struct memfs_inode ino[MEMFS_INODES];
	struct memfs_name vdir[MEMFS_NAMES], ddir[MEMFS_NAMES];
	struct memfs_fd fd[MEMFS_FDS];
	long ops;                      /* changing calls made so far */
	long cut;                      /* power off before this call (-1: never) */
	int dir_exists;
	int (*fault)(int op);          /* NULL, or: 0 go on, a KR_E code to fail this call */
	const char *why;               /* the reason of the last failure */
} memfs;

static unsigned char memfs_bytes[MEMFS_INODES][2][MEMFS_BYTES];

__attribute__((unused)) static void memfs_init(void)
{
	int i;

	for (i = 0; i < MEMFS_INODES; i++) {
		memfs.ino[i].v = memfs_bytes[i][0];
		memfs.ino[i].d = memfs_bytes[i][1];
		memfs.ino[i].used = 0;
		memfs.ino[i].vlen = memfs.ino[i].dlen = 0;
	}
	for (i = 0; i < MEMFS_NAMES; i++)
		memfs.vdir[i].ino = memfs.ddir[i].ino = -1;
	for (i = 0; i < MEMFS_FDS; i++)
		memfs.fd[i].ino = -1;
	memfs.ops = 0;
	memfs.cut = -1;
	memfs.dir_exists = 1;
	memfs.fault = NULL;
	memfs.why = "power is off";
}

__attribute__((unused)) static void memfs_cut(long k)
{
	memfs.ops = 0;
	memfs.cut = k;
}

/* Nonzero once the power is off. */
__attribute__((unused)) static int memfs_power_off(void)
{
	return memfs.cut >= 0 && memfs.ops >= memfs.cut;
}

/* Before changing call op: 0 to go on, or why it fails (the power is off, or an injected fault). */
static int memfs_off_op(int op)
{
	int r;

	if (memfs_power_off()) {
		memfs.why = "power is off";
		return KR_EIO;
	}
	memfs.ops++;
	if (memfs.fault && (r = memfs.fault(op)) != 0) {
		memfs.why = r == KR_ENOSPC ? "No space left on device (injected)" : "Input/output error (injected)";
		return r;
	}
	return 0;
}

static struct memfs_name *memfs_find(struct memfs_name *dir, const char *path)
{
	int i;

	for (i = 0; i < MEMFS_NAMES; i++)
		if (dir[i].ino >= 0 && strcmp(dir[i].name, path) == 0)
			return &dir[i];
	return NULL;
}

static struct memfs_name *memfs_slot(struct memfs_name *dir)
{
	int i;

	for (i = 0; i < MEMFS_NAMES; i++)
		if (dir[i].ino < 0)
			return &dir[i];
	return NULL;
}

/* Inodes no name in either table points at, and no descriptor holds, are freed. */
static void memfs_gc(void)
{
	int i, j, live;

	for (i = 0; i < MEMFS_INODES; i++) {
		live = 0;
		for (j = 0; j < MEMFS_NAMES; j++)
			live |= memfs.vdir[j].ino == i || memfs.ddir[j].ino == i;
		for (j = 0; j < MEMFS_FDS; j++)
			live |= memfs.fd[j].ino == i;
		if (!live)
			memfs.ino[i].used = 0;
	}
}

__attribute__((unused)) static void memfs_reboot(int mode)
{
	int i;

	for (i = 0; i < MEMFS_FDS; i++)
		memfs.fd[i].ino = -1;
	if (mode == MEMFS_NAMES_ONLY || mode == MEMFS_ALL)
		memcpy(memfs.ddir, memfs.vdir, sizeof(memfs.ddir));
	else
		memcpy(memfs.vdir, memfs.ddir, sizeof(memfs.vdir));
	for (i = 0; i < MEMFS_INODES; i++) {
		struct memfs_inode *n = &memfs.ino[i];

		if (!n->used)
			continue;
		if (mode == MEMFS_ALL) {
			memcpy(n->d, n->v, n->vlen);
			n->dlen = n->vlen;
		} else if (mode == MEMFS_TORN && n->vlen > n->dlen) {
			/* The first half of the bytes written after the last sync made it. */
			size_t keep = n->dlen + (n->vlen - n->dlen) / 2;

			memcpy(n->d + n->dlen, n->v + n->dlen, keep - n->dlen);
			n->dlen = keep;
		}
		memcpy(n->v, n->d, n->dlen);
		n->vlen = n->dlen;
	}
	memfs_gc();
	memfs.cut = -1;
	memfs.ops = 0;
}

/* Puts a file at path with bytes p[0..n), durable, as if written long ago. */
__attribute__((unused)) static void memfs_put(const char *path, const void *p, size_t n)
{
	struct memfs_name *e = memfs_find(memfs.vdir, path), *d;
	int i;

	if (n > MEMFS_BYTES)
		n = MEMFS_BYTES;
	if (!e) {
		for (i = 0; i < MEMFS_INODES && memfs.ino[i].used; i++)
			;
		if (i == MEMFS_INODES || !(e = memfs_slot(memfs.vdir)))
			abort();
		memfs.ino[i].used = 1;
		e->ino = i;
		snprintf(e->name, sizeof(e->name), "%s", path);
	}
	memcpy(memfs.ino[e->ino].v, p, n);
	memcpy(memfs.ino[e->ino].d, p, n);
	memfs.ino[e->ino].vlen = memfs.ino[e->ino].dlen = n;
	d = memfs_find(memfs.ddir, path);
	if (!d && !(d = memfs_slot(memfs.ddir)))
		abort();
	*d = *e;
}

/* The process is gone (killed, or stopped without closing): its descriptors close, nothing is written. */
__attribute__((unused)) static void memfs_close_all(void)
{
	int i;

	for (i = 0; i < MEMFS_FDS; i++)
		memfs.fd[i].ino = -1;
	memfs_gc();
}

/* --- the port calls (wrapped in the fuzz targets, the simulated port's own there) ------- */

#ifdef MEMFS_WRAPPED
int MEMFS_FN(mkdir)(const char *path, unsigned mode);
int MEMFS_FN(is_dir)(const char *path);
int MEMFS_FN(stat)(const char *path, struct kr_fs_stat *st);
int MEMFS_FN(unlink)(const char *path);
int MEMFS_FN(open_read)(const char *path);
long MEMFS_FN(read)(int fd, void *buf, size_t len);
int MEMFS_FN(create)(const char *path, unsigned mode);
int MEMFS_FN(open_append)(const char *path);
int MEMFS_FN(write)(int fd, const void *buf, size_t len);
int MEMFS_FN(sync)(int fd);
int MEMFS_FN(close)(int fd);
int MEMFS_FN(rename)(const char *from, const char *to);
int MEMFS_FN(sync_dir)(const char *path);
int MEMFS_FN(commit_start)(int fd, const char *tmp, const char *path, const char *dir);
int MEMFS_FN(commit_finish)(int cfd, int wait, int *step);
const char *MEMFS_FN(error)(void);
#endif

int MEMFS_FN(mkdir)(const char *path, unsigned mode)
{
	(void)path;
	(void)mode;
	return memfs.dir_exists ? 1 : 0;
}

int MEMFS_FN(is_dir)(const char *path)
{
	(void)path;
	return 0;
}

int MEMFS_FN(stat)(const char *path, struct kr_fs_stat *st)
{
	struct memfs_name *e = memfs_find(memfs.vdir, path);

	memset(st, 0, sizeof(*st));
	st->type = e ? KR_FS_FILE : KR_FS_NONE;
	if (e)
		st->size = memfs.ino[e->ino].vlen;
	return 0;
}

int MEMFS_FN(unlink)(const char *path)
{
	struct memfs_name *e;
	int r;

	if ((r = memfs_off_op(MEMFS_OP_UNLINK)) != 0)
		return r;
	e = memfs_find(memfs.vdir, path);
	if (!e)
		return KR_ENOENT;
	e->ino = -1;
	memfs_gc();
	return 0;
}

static int memfs_open(int ino, int writing)
{
	int i;

	for (i = 0; i < MEMFS_FDS; i++)
		if (memfs.fd[i].ino < 0) {
			memfs.fd[i].ino = ino;
			memfs.fd[i].pos = 0;
			memfs.fd[i].writing = writing;
			return MEMFS_FD0 + i;
		}
	abort();                   /* more files open at once than the state directory ever needs */
}

static struct memfs_fd *memfs_fd(int fd)
{
	if (fd < MEMFS_FD0 || fd >= MEMFS_FD0 + MEMFS_FDS || memfs.fd[fd - MEMFS_FD0].ino < 0)
		abort();           /* the code under test used a descriptor it does not hold */
	return &memfs.fd[fd - MEMFS_FD0];
}

int MEMFS_FN(open_read)(const char *path)
{
	struct memfs_name *e = memfs_find(memfs.vdir, path);

	return e ? memfs_open(e->ino, 0) : KR_ENOENT;
}

long MEMFS_FN(read)(int fd, void *buf, size_t len)
{
	struct memfs_fd *f = memfs_fd(fd);
	struct memfs_inode *n = &memfs.ino[f->ino];
	size_t left = n->vlen - f->pos;

	/* Short reads on purpose: the reader must loop. */
	if (len > 4099)
		len = 4099;
	if (len > left)
		len = left;
	memcpy(buf, n->v + f->pos, len);
	f->pos += len;
	return (long)len;
}

int MEMFS_FN(create)(const char *path, unsigned mode)
{
	struct memfs_name *e;
	int i, r;

	(void)mode;
	if ((r = memfs_off_op(MEMFS_OP_CREATE)) != 0)
		return r;
	if (memfs_find(memfs.vdir, path))
		return KR_EINVAL;
	for (i = 0; i < MEMFS_INODES && memfs.ino[i].used; i++)
		;
	if (i == MEMFS_INODES || !(e = memfs_slot(memfs.vdir)))
		abort();
	memfs.ino[i].used = 1;
	memfs.ino[i].vlen = memfs.ino[i].dlen = 0;
	e->ino = i;
	snprintf(e->name, sizeof(e->name), "%s", path);
	return memfs_open(i, 1);
}

int MEMFS_FN(open_append)(const char *path)
{
	struct memfs_name *e = memfs_find(memfs.vdir, path);

	return e ? memfs_open(e->ino, 1) : KR_ENOENT;
}

int MEMFS_FN(write)(int fd, const void *buf, size_t len)
{
	struct memfs_fd *f = memfs_fd(fd);
	struct memfs_inode *n = &memfs.ino[f->ino];
	int r;

	if ((r = memfs_off_op(MEMFS_OP_WRITE)) != 0)
		return r;
	if (!f->writing || n->vlen + len > MEMFS_BYTES) {
		memfs.why = "No space left on device";
		return KR_EIO;
	}
	memcpy(n->v + n->vlen, buf, len);
	n->vlen += len;
	return 0;
}

int MEMFS_FN(sync)(int fd)
{
	struct memfs_fd *f = memfs_fd(fd);
	struct memfs_inode *n = &memfs.ino[f->ino];
	int r;

	if ((r = memfs_off_op(MEMFS_OP_SYNC)) != 0)
		return r;
	memcpy(n->d, n->v, n->vlen);
	n->dlen = n->vlen;
	return 0;
}

int MEMFS_FN(close)(int fd)
{
	struct memfs_fd *f = memfs_fd(fd);
	int r = f->writing ? memfs_off_op(MEMFS_OP_CLOSE) : 0;

	/* The descriptor is gone either way, as on Linux. */
	f->ino = -1;
	memfs_gc();
	return r;
}

int MEMFS_FN(rename)(const char *from, const char *to)
{
	struct memfs_name *a, *b;
	int r;

	if ((r = memfs_off_op(MEMFS_OP_RENAME)) != 0)
		return r;
	a = memfs_find(memfs.vdir, from);
	if (!a)
		return KR_EIO;
	b = memfs_find(memfs.vdir, to);
	if (!b)
		b = a;
	else
		b->ino = a->ino, a->ino = -1;
	snprintf(b->name, sizeof(b->name), "%s", to);
	memfs_gc();
	return 0;
}

int MEMFS_FN(sync_dir)(const char *path)
{
	int r;

	(void)path;
	if ((r = memfs_off_op(MEMFS_OP_SYNC_DIR)) != 0)
		return r;
	memcpy(memfs.ddir, memfs.vdir, sizeof(memfs.ddir));
	memfs_gc();
	return 0;
}

/*
 * The child process of a commit, played here: its steps in its order
 * (fsync, rename, directory fsync), each a boundary where the power may go
 * off, as inline; the outcome waits for kr_port_fs_commit_finish.
 */
static int memfs_commit_step = -1;

#define MEMFS_COMMIT_FD 4000

int MEMFS_FN(commit_start)(int fd, const char *tmp, const char *path, const char *dir)
{
	int step = 0;

	if (MEMFS_FN(sync)(fd) < 0)
		step = 1;
	else if (tmp && MEMFS_FN(rename)(tmp, path) < 0)
		step = 2;
	else if (dir && MEMFS_FN(sync_dir)(dir) < 0)
		step = 3;
	memfs_commit_step = step;
	return MEMFS_COMMIT_FD;
}

int MEMFS_FN(commit_finish)(int cfd, int wait, int *step)
{
	(void)wait;
	if (cfd != MEMFS_COMMIT_FD || memfs_commit_step < 0)
		abort();
	*step = memfs_commit_step;
	memfs_commit_step = -1;
	return *step ? KR_EIO : 0;
}

const char *MEMFS_FN(error)(void)
{
	return memfs.why;
}

#endif /* KR_TEST_MEMFS_H */
