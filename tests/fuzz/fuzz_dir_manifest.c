/*
 * Fuzzes the directory sink's manifest, the one file kreflect reads back
 * from flash and acts on: at start-up it loads the list of files it owns and,
 * at the first sync of each resource, removes those no object wants any more.
 * A manifest cut by a power loss, bit-rotted or written by hand must never
 * make kreflect touch a file outside its root, follow a link out of it, or
 * remove a file it does not own.
 *
 * Input: byte 0 picks the options (bit 0: the input follows a valid header
 * line rather than bringing its own; bit 1: the object layout; bit 2: one
 * ConfigMap is written before the syncs; bit 3: batch mode). The rest is the manifest. Each run
 * starts from the same tree:
 *
 *   base/root/a, base/root/b/c            plain files
 *   base/root/s -> ../outside             a link to a directory outside
 *   base/root/t -> ../outside/victim      a link to a file outside
 *   base/outside/victim                   must survive every run unchanged
 *
 * then loads the manifest (kr_dirsink_init), optionally writes the ConfigMap,
 * and sends SYNCED for every resource the manifest names (each removal
 * path). Checked on every call: each creating, renaming or removing file
 * system call names a path whose directory, links resolved, is the root or
 * inside it, and no component is ".." (a call relative to a directory
 * descriptor: that directory, as the kernel has it, is the root or inside it,
 * and the name is one component); the victim is still there with its
 * bytes; an error is a known code with a one-line message; and the manifest
 * as left on disk loads again, whole, with the same number of files.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kreflect.h"
#include "log.h"
#include "port.h"
#include "sink.h"
#include "sink_dir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define VICTIM "not kreflect's\n"
#define MAX_SYNCS 8

static struct kr_dirsink sink, again;
static char base[PATH_MAX], root[PATH_MAX], root_real[PATH_MAX], outside[PATH_MAX], victim[PATH_MAX];
static char manifest[PATH_MAX];

static const char cm[] =
	"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\",\"namespace\":\"b\","
	"\"resourceVersion\":\"7\",\"uid\":\"u\"},\"data\":{\"a\":\"1\",\"c\":\"2\",\"s\":\"3\"}}";

/* --- confinement: the sink's file system calls, checked, then made ---------------------- */

int __real_kr_port_fs_unlink(const char *path);
int __real_kr_port_fs_rmdir(const char *path);
int __real_kr_port_fs_rename(const char *from, const char *to);
int __real_kr_port_fs_create(const char *path, unsigned mode);
int __real_kr_port_fs_mkdir(const char *path, unsigned mode);
int __real_kr_port_fs_open_append(const char *path);

int __wrap_kr_port_fs_unlink(const char *path);
int __wrap_kr_port_fs_rmdir(const char *path);
int __wrap_kr_port_fs_rename(const char *from, const char *to);
int __wrap_kr_port_fs_create(const char *path, unsigned mode);
int __wrap_kr_port_fs_mkdir(const char *path, unsigned mode);
int __wrap_kr_port_fs_open_append(const char *path);

int __real_kr_port_fs_unlink_at(int dirfd, const char *name);
int __real_kr_port_fs_rmdir_at(int dirfd, const char *name);
int __real_kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to);
int __real_kr_port_fs_create_at(int dirfd, const char *name, unsigned mode);
int __real_kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode);
int __real_kr_port_fs_open_append_at(int dirfd, const char *name);

int __wrap_kr_port_fs_unlink_at(int dirfd, const char *name);
int __wrap_kr_port_fs_rmdir_at(int dirfd, const char *name);
int __wrap_kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to);
int __wrap_kr_port_fs_create_at(int dirfd, const char *name, unsigned mode);
int __wrap_kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode);
int __wrap_kr_port_fs_open_append_at(int dirfd, const char *name);

static void escape(const char *what, const char *path)
{
	fprintf(stderr, "fuzz_dir_manifest: %s %s: outside the root %s\n", what, path, root);
	abort();
}

/* path must be the root, or name an entry of a directory that resolves inside the root. */
static void confined(const char *what, const char *path)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash, *p;
	size_t rl = strlen(root_real);

	if (strcmp(path, root) == 0)
		return;
	if (strncmp(path, root, strlen(root)) != 0 || path[strlen(root)] != '/')
		escape(what, path);
	for (p = path; (p = strstr(p, "..")) != NULL; p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			escape(what, path);
	slash = strrchr(path, '/');
	if ((size_t)(slash - path) >= sizeof(dir))
		escape(what, path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	/* A directory that does not resolve (missing, a file, a loop): the call fails
	 * on it as realpath did, and nothing is touched. */
	if (!realpath(dir, real))
		return;
	if (strncmp(real, root_real, rl) != 0 || (real[rl] != '\0' && real[rl] != '/'))
		escape(what, path);
}

int __wrap_kr_port_fs_unlink(const char *path)
{
	confined("unlink", path);
	return __real_kr_port_fs_unlink(path);
}

int __wrap_kr_port_fs_rmdir(const char *path)
{
	confined("rmdir", path);
	return __real_kr_port_fs_rmdir(path);
}

int __wrap_kr_port_fs_rename(const char *from, const char *to)
{
	confined("rename from", from);
	confined("rename to", to);
	return __real_kr_port_fs_rename(from, to);
}

int __wrap_kr_port_fs_create(const char *path, unsigned mode)
{
	confined("create", path);
	return __real_kr_port_fs_create(path, mode);
}

int __wrap_kr_port_fs_mkdir(const char *path, unsigned mode)
{
	/* make_root walks the root's parents, which exist: only a missing one is made. */
	if (strncmp(path, root, strlen(root)) == 0)
		confined("mkdir", path);
	else if (strncmp(root, path, strlen(path)) != 0)
		escape("mkdir", path);
	return __real_kr_port_fs_mkdir(path, mode);
}

int __wrap_kr_port_fs_open_append(const char *path)
{
	confined("append to", path);
	return __real_kr_port_fs_open_append(path);
}

/* dirfd's directory, as the kernel resolved it, must be the root or inside it; name one component. */
static void confined_at(const char *what, int dirfd, const char *name)
{
	char link[64], dir[PATH_MAX];
	size_t rl = strlen(root_real);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n < 0)
		escape(what, link);
	dir[n] = '\0';
	if (strncmp(dir, root_real, rl) != 0 || (dir[rl] != '\0' && dir[rl] != '/'))
		escape(what, dir);
	/* The port refuses these itself; the sink must never ask. */
	if (strchr(name, '/') || strcmp(name, "..") == 0 || strcmp(name, ".") == 0 || !name[0])
		escape(what, name);
}

int __wrap_kr_port_fs_unlink_at(int dirfd, const char *name)
{
	confined_at("unlink", dirfd, name);
	return __real_kr_port_fs_unlink_at(dirfd, name);
}

int __wrap_kr_port_fs_rmdir_at(int dirfd, const char *name)
{
	confined_at("rmdir", dirfd, name);
	return __real_kr_port_fs_rmdir_at(dirfd, name);
}

int __wrap_kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to)
{
	confined_at("rename from", fromfd, from);
	confined_at("rename to", tofd, to);
	return __real_kr_port_fs_rename_at(fromfd, from, tofd, to);
}

int __wrap_kr_port_fs_create_at(int dirfd, const char *name, unsigned mode)
{
	confined_at("create", dirfd, name);
	return __real_kr_port_fs_create_at(dirfd, name, mode);
}

int __wrap_kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode)
{
	confined_at("mkdir", dirfd, name);
	return __real_kr_port_fs_mkdir_at(dirfd, name, mode);
}

int __wrap_kr_port_fs_open_append_at(int dirfd, const char *name)
{
	confined_at("append to", dirfd, name);
	return __real_kr_port_fs_open_append_at(dirfd, name);
}

/* --- the tree ---------------------------------------------------------------------------- */

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void put_file(const char *path, const char *bytes, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(2);
	}
}

static void cleanup(void)
{
	if (base[0])
		nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup_once(void)
{
	const char *tmp = getenv("TMPDIR");

	/* Memory rather than disk when there is some: every run syncs files. */
	if (!tmp || !tmp[0])
		tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(base, sizeof(base), "%s/kr-fuzz-dir-XXXXXX", tmp);
	if (!mkdtemp(base)) {
		perror(base);
		exit(2);
	}
	atexit(cleanup);
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(outside, sizeof(outside), "%s/outside", base);
	snprintf(victim, sizeof(victim), "%s/victim", outside);
	snprintf(manifest, sizeof(manifest), "%s/%s", root, KR_DIRSINK_MANIFEST);
	if (mkdir(outside, 0755) != 0 || mkdir(root, 0755) != 0 || !realpath(root, root_real)) {
		perror(base);
		exit(2);
	}
	put_file(victim, VICTIM, strlen(VICTIM));
	kr_set_log_level(-1);
}

static void fresh_tree(void)
{
	char p[PATH_MAX];

	nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	if (mkdir(root, 0755) != 0) {
		perror(root);
		exit(2);
	}
	snprintf(p, sizeof(p), "%s/a", root);
	put_file(p, "a\n", 2);
	snprintf(p, sizeof(p), "%s/b", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/b/c", root);
	put_file(p, "c\n", 2);
	snprintf(p, sizeof(p), "%s/s", root);
	if (symlink("../outside", p) != 0) {
		perror(p);
		exit(2);
	}
	snprintf(p, sizeof(p), "%s/t", root);
	if (symlink("../outside/victim", p) != 0) {
		perror(p);
		exit(2);
	}
}

/* The victim and nothing else outside, with its bytes. */
static void check_outside(void)
{
	char got[64];
	FILE *f = fopen(victim, "rb");
	size_t n;

	if (!f)
		abort();
	n = fread(got, 1, sizeof(got), f);
	fclose(f);
	if (n != strlen(VICTIM) || memcmp(got, VICTIM, n) != 0)
		abort();
}

static void check_error(int r, const char *err, size_t size)
{
	if (r == 0)
		return;
	if (r != KR_EINVAL && r != KR_EPROTO && r != KR_EIO)
		abort();
	if (!memchr(err, '\0', size) || !err[0] || strchr(err, '\n'))
		abort();
}

/* The distinct resources the loaded manifest names, up to max. */
static int resources_named(const char **out, int max)
{
	size_t i;
	int n = 0, j;

	for (i = 0; i < sink.nentries && n < max; i++) {
		const char *res = sink.names + sink.entries[i].off;

		for (j = 0; j < n && strcmp(out[j], res) != 0; j++)
			;
		if (j == n)
			out[n++] = res;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct kr_dirsink_opts o;
	struct kr_event ev;
	const char *res[MAX_SYNCS + 1];
	char err[512];
	int r, n, i;
	FILE *f;

	if (size < 1)
		return 0;
	if (!ready) {
		setup_once();
		ready = 1;
	}
	fresh_tree();
	f = fopen(manifest, "wb");
	if (!f)
		abort();
	if (data[0] & 1)
		fputs(KR_DIRSINK_MANIFEST_HEADER "\n", f);
	if (fwrite(data + 1, 1, size - 1, f) != size - 1 || fclose(f) != 0)
		abort();
	memset(&o, 0, sizeof(o));
	o.path = root;
	o.layout_object = (data[0] & 2) != 0;
	o.batch = (data[0] & 8) != 0;
	memset(err, 'x', sizeof(err));
	r = kr_dirsink_init(&sink, &o, err, sizeof(err));
	check_error(r, err, sizeof(err));
	if (r == 0) {
		memset(&ev, 0, sizeof(ev));
		if (data[0] & 4) {
			ev.type = KR_EV_ADDED;
			ev.resource = "configmaps";
			ev.key = "b/c";
			ev.rv = "7";
			ev.obj = cm;
			ev.objlen = sizeof(cm) - 1;
			kr_dirsink_event(&sink, &ev);
		}
		n = resources_named(res, MAX_SYNCS);
		res[n++] = "configmaps";
		for (i = 0; i < n; i++) {
			memset(&ev, 0, sizeof(ev));
			ev.type = KR_EV_SYNCED;
			ev.resource = res[i];
			ev.rv = "8";
			kr_dirsink_event(&sink, &ev);
		}
		/* What is on disk now (the batch flushed) is a manifest kreflect reads back whole. */
		kr_dirsink_close(&sink);
		memset(err, 0, sizeof(err));
		r = kr_dirsink_init(&again, &o, err, sizeof(err));
		if (r != 0 || kr_dirsink_files(&again) != kr_dirsink_files(&sink))
			abort();
		kr_dirsink_close(&again);
	}
	check_outside();
	return 0;
}
