/*
 * The posix port's descriptor-relative file calls (port/port.h): one name
 * each, never following a symbolic link, modes exact, under a fresh
 * directory in /tmp with a link pointing outside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kreflect.h"
#include "port.h"
#include "test.h"

static char base[256], inside[300], outside[300];

static int setup(void)
{
	char p[400];
	int fd;

	snprintf(base, sizeof(base), "/tmp/kreflect-portfs-XXXXXX");
	if (!mkdtemp(base))
		return -1;
	snprintf(inside, sizeof(inside), "%s/in", base);
	snprintf(outside, sizeof(outside), "%s/out", base);
	if (mkdir(inside, 0755) != 0 || mkdir(outside, 0755) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/victim", outside);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || write(fd, "v", 1) != 1)
		return -1;
	close(fd);
	snprintf(p, sizeof(p), "%s/dirlink", inside);
	if (symlink(outside, p) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/filelink", inside);
	if (symlink("../out/victim", p) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/dangling", inside);
	if (symlink("../out/new", p) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/fifo", inside);
	if (mkfifo(p, 0600) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/file", inside);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static void teardown(void)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "test_port_fs: could not remove %s\n", base);
}

/* Nothing new outside: only the victim, with its one byte. */
static int outside_untouched(void)
{
	char p[400], b[8];
	struct stat st;
	int fd, n;

	snprintf(p, sizeof(p), "%s/new", outside);
	if (lstat(p, &st) == 0)
		return 0;
	snprintf(p, sizeof(p), "%s/victim", outside);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return 0;
	n = (int)read(fd, b, sizeof(b));
	close(fd);
	return n == 1 && b[0] == 'v';
}

static int body_names_and_links(int root)
{
	struct kr_fs_stat st;
	int fd;

	/* One component only: never a path, never "." or "..". */
	check(kr_port_fs_open_dir_at(root, "..") == KR_EINVAL);
	check(kr_port_fs_open_dir_at(root, ".") == KR_EINVAL);
	check(kr_port_fs_open_dir_at(root, "") == KR_EINVAL);
	check(kr_port_fs_create_at(root, "dirlink/x", 0644) == KR_EINVAL);
	check(kr_port_fs_unlink_at(root, "../out/victim") == KR_EINVAL);
	check(kr_port_fs_rename_at(root, "file", root, "../out/victim") == KR_EINVAL);
	check(kr_port_fs_mkdir_at(root, "a/b", 0755) == KR_EINVAL);
	check(kr_port_fs_stat_at(root, "dirlink/victim", &st) == KR_EINVAL);
	/* A link is never followed. */
	check(kr_port_fs_open_dir_at(root, "dirlink") == KR_EINVAL);
	check(kr_port_fs_open_dir_at(root, "file") == KR_EINVAL);
	check(kr_port_fs_open_dir_at(root, "missing") == KR_ENOENT);
	check(kr_port_fs_open_read_at(root, "filelink") == KR_EINVAL);
	check(kr_port_fs_open_append_at(root, "filelink") == KR_EINVAL);
	check(kr_port_fs_create_at(root, "dangling", 0644) == KR_EINVAL);
	check(kr_port_fs_create_at(root, "filelink", 0644) == KR_EINVAL);
	check(kr_port_fs_mkdir_at(root, "dirlink", 0755) == 1);
	check(kr_port_fs_stat_at(root, "dirlink", &st) == 0 && st.type == KR_FS_OTHER);
	check(kr_port_fs_stat_at(root, "missing", &st) == 0 && st.type == KR_FS_NONE);
	/* A fifo is refused without waiting for a writer; a directory is not a file. */
	check(kr_port_fs_open_read_at(root, "fifo") == KR_EINVAL);
	check(kr_port_fs_mkdir_at(root, "d", 0700) == 0);
	check(kr_port_fs_open_read_at(root, "d") == KR_EINVAL);
	fd = kr_port_fs_open_dir_at(root, "d");
	check(fd >= 0);
	check(kr_port_fs_close(fd) == 0);
	/* Removing or renaming over a link touches the link only. */
	check(kr_port_fs_unlink_at(root, "filelink") == 0);
	check(kr_port_fs_rename_at(root, "file", root, "dangling") == 0);
	check(kr_port_fs_stat_at(root, "dangling", &st) == 0 && st.type == KR_FS_FILE);
	check(kr_port_fs_unlink_at(root, "missing") == KR_ENOENT);
	check(outside_untouched());
	return 0;
}

KR_TEST(portfs, names_and_links_never_lead_out)
{
	int root, r;

	check(setup() == 0);
	root = kr_port_fs_open_dir(inside);
	r = root < 0 ? __LINE__ : body_names_and_links(root);
	if (root >= 0)
		kr_port_fs_close(root);
	teardown();
	return r;
}

static int body_modes(int root)
{
	struct kr_fs_stat st;
	mode_t old = umask(077);
	int fd, r = 0;

	/* The mode asked for, whatever the umask. */
	fd = kr_port_fs_create_at(root, "f", 0644);
	if (fd < 0 || kr_port_fs_write(fd, "abc", 3) != 0 || kr_port_fs_sync(fd) != 0 ||
	    kr_port_fs_close(fd) != 0)
		r = __LINE__;
	if (!r && kr_port_fs_mkdir_at(root, "sub", 0755) != 0)
		r = __LINE__;
	umask(old);
	check(r == 0);
	check(kr_port_fs_stat_at(root, "f", &st) == 0 && st.type == KR_FS_FILE && st.mode == 0644 &&
	      st.size == 3);
	check(kr_port_fs_stat_at(root, "sub", &st) == 0 && st.type == KR_FS_DIR && st.mode == 0755);
	check(kr_port_fs_create_at(root, "f", 0644) == KR_EINVAL);
	fd = kr_port_fs_open_append_at(root, "f");
	check(fd >= 0 && kr_port_fs_write(fd, "d", 1) == 0 && kr_port_fs_close(fd) == 0);
	check(kr_port_fs_stat_at(root, "f", &st) == 0 && st.size == 4);
	/* Across directories, then removal of what is empty only. */
	fd = kr_port_fs_open_dir_at(root, "sub");
	check(fd >= 0);
	check(kr_port_fs_rename_at(root, "f", fd, "g") == 0);
	check(kr_port_fs_rmdir_at(root, "sub") == KR_EIO);
	check(kr_port_fs_unlink_at(fd, "g") == 0);
	check(kr_port_fs_sync(fd) == 0);
	kr_port_fs_close(fd);
	check(kr_port_fs_rmdir_at(root, "sub") == 0);
	check(kr_port_fs_rmdir_at(root, "sub") == KR_ENOENT);
	check(kr_port_fs_sync_all(root) == 0);
	return 0;
}

KR_TEST(portfs, modes_exact_and_removal)
{
	int root, r;

	check(setup() == 0);
	root = kr_port_fs_open_dir(inside);
	r = root < 0 ? __LINE__ : body_modes(root);
	if (root >= 0)
		kr_port_fs_close(root);
	teardown();
	return r;
}

KR_TEST(portfs, open_dir_root)
{
	char p[400];
	int fd;

	check(setup() == 0);
	snprintf(p, sizeof(p), "%s/file", inside);
	fd = kr_port_fs_open_dir(p);
	snprintf(p, sizeof(p), "%s/missing", inside);
	/* The root itself may be a link (it is the user's): followed. */
	if (fd != KR_EINVAL || kr_port_fs_open_dir(p) != KR_ENOENT) {
		teardown();
		return __LINE__;
	}
	snprintf(p, sizeof(p), "%s/dirlink", inside);
	fd = kr_port_fs_open_dir(p);
	teardown();
	check(fd >= 0);
	kr_port_fs_close(fd);
	return 0;
}

/* Writes "new" to a fresh file at path; returns its descriptor (open) or -1. */
static int fresh(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0 && write(fd, "new", 3) != 3) {
		close(fd);
		return -1;
	}
	return fd;
}

static int body_commit(void)
{
	char tmp[400], path[400], p2[400];
	char b[8];
	int fd, cfd, step = -1, r, rfd;

	snprintf(tmp, sizeof(tmp), "%s/state.tmp", inside);
	snprintf(path, sizeof(path), "%s/state", inside);
	fd = fresh(tmp);
	check(fd >= 0);
	/* fsync, rename, directory fsync in a child; the caller closes its copy at once. */
	cfd = kr_port_fs_commit_start(fd, tmp, path, inside);
	close(fd);
	check(cfd >= 0);
	r = kr_port_fs_commit_finish(cfd, 1, &step);
	check(r == 0 && step == 0);
	rfd = open(path, O_RDONLY);
	check(rfd >= 0);
	r = (int)read(rfd, b, sizeof(b));
	close(rfd);
	check(r == 3 && memcmp(b, "new", 3) == 0);
	check(access(tmp, F_OK) != 0);
	/* Only the fsync (a journal append): nothing renamed. */
	fd = fresh(tmp);
	check(fd >= 0);
	cfd = kr_port_fs_commit_start(fd, NULL, NULL, NULL);
	close(fd);
	check(cfd >= 0);
	while ((r = kr_port_fs_commit_finish(cfd, 0, &step)) == KR_IO_WAIT) {
		struct timespec ts = { 0, 1000000L };

		nanosleep(&ts, NULL);
	}
	check(r == 0 && access(tmp, F_OK) == 0);
	/* The rename fails (no such directory): step 2, and the reason. */
	snprintf(p2, sizeof(p2), "%s/missing/state", inside);
	fd = open(tmp, O_RDONLY | O_CLOEXEC);
	check(fd >= 0);
	cfd = kr_port_fs_commit_start(fd, tmp, p2, inside);
	close(fd);
	check(cfd >= 0);
	r = kr_port_fs_commit_finish(cfd, 1, &step);
	check(r == KR_EIO && step == 2 && strstr(kr_port_fs_error(), "No such file") != NULL);
	/* An unknown descriptor is an error, not a wait. */
	check(kr_port_fs_commit_finish(12345, 0, &step) == KR_EIO);
	return 0;
}

KR_TEST(portfs, commit_in_a_child_in_order)
{
	int r;

	check(setup() == 0);
	r = body_commit();
	teardown();
	return r;
}
