/*
 * The directory sink against a real directory under /tmp. Each test runs in
 * a fresh one (removed afterwards) with the log captured to a file there, so
 * that tests can read what was logged (and that secrets were not).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kreflect.h"
#include "log.h"
#include "sink_dir.h"
#include "test.h"

static struct kr_dirsink D;
static char tmp_dir[256];   /* the test's directory: log file and the sink's root */
static char root[300];      /* tmp_dir/out */
static char log_path[300];
static int saved_stderr = -1;

/* --- helpers ------------------------------------------------------------------------ */

static int rm_rf(const char *path)
{
	struct stat st;
	DIR *dir;
	struct dirent *de;

	if (lstat(path, &st) != 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return unlink(path);
	chmod(path, 0700);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) != NULL) {
		char sub[1024];

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		rm_rf(sub);
	}
	closedir(dir);
	return rmdir(path);
}

/* Files under path (recursively) whose name starts with prefix. */
static int count_named(const char *path, const char *prefix)
{
	DIR *dir = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!dir)
		return 0;
	while ((de = readdir(dir)) != NULL) {
		char sub[1024];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			n += count_named(sub, prefix);
	}
	closedir(dir);
	return n;
}

/* Entries under path, recursively (files and directories). */
static int count_all(const char *path)
{
	return count_named(path, "");
}

static const char *at(const char *rel)
{
	static char buf[4][1200];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", root, rel);
	return buf[i];
}

/* Reads the file at path into buf; returns its length or -1. */
static long slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	long n = 0;

	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t r = read(fd, buf + n, size - 1 - (size_t)n);

		if (r <= 0)
			break;
		n += r;
	}
	close(fd);
	buf[n] = '\0';
	return n;
}

/* Nonzero if the file at root/rel holds exactly want[0..len). */
static int holds(const char *rel, const char *want, size_t len)
{
	static char buf[65536];
	long n = slurp(at(rel), buf, sizeof(buf));

	return n == (long)len && memcmp(buf, want, len) == 0;
}

static int holds_str(const char *rel, const char *want)
{
	return holds(rel, want, strlen(want));
}

static void pause_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static unsigned mode_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xffffu;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static int append_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* Nonzero if the captured log contains s. */
static int logged(const char *s)
{
	static char buf[262144];

	fflush(stderr);
	return slurp(log_path, buf, sizeof(buf)) >= 0 && strstr(buf, s) != NULL;
}

static int open_sink_mode(int layout_object, size_t max_files, int batch)
{
	struct kr_dirsink_opts o;
	char err[256];

	kr_dirsink_close(&D);  /* a restart: the earlier run's root descriptor goes */
	memset(&o, 0, sizeof(o));
	o.path = root;
	o.layout_object = layout_object;
	o.max_files = max_files;
	o.batch = batch;
	return kr_dirsink_init(&D, &o, err, sizeof(err));
}

static int open_sink(int layout_object, size_t max_files)
{
	return open_sink_mode(layout_object, max_files, 0);
}

static void send(enum kr_event_type type, const char *res, const char *key, const char *obj)
{
	struct kr_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.resource = res;
	ev.key = key;
	ev.rv = "1";
	ev.obj = obj;
	ev.objlen = obj ? strlen(obj) : 0;
	kr_dirsink_event(&D, &ev);
}

static void synced(const char *res)
{
	send(KR_EV_SYNCED, res, NULL, NULL);
}

/* A ConfigMap or Secret object: kind, namespace/name, optional annotation, the data members. */
static const char *object(const char *kind, const char *ns, const char *name, const char *ann,
			  const char *members)
{
	static char buf[2][16384];
	static int i;
	char annotations[1200] = "";

	i = (i + 1) % 2;
	if (ann)
		snprintf(annotations, sizeof(annotations),
			 ",\"annotations\":{\"kreflect.io/target-dir\":\"%s\"}", ann);
	snprintf(buf[i], sizeof(buf[i]),
		 "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
		 "\"namespace\":\"%s\",\"resourceVersion\":\"5\"%s}%s%s}",
		 kind, name, ns, annotations, members[0] ? "," : "", members);
	return buf[i];
}

static const char *cm(const char *name, const char *ann, const char *members)
{
	return object("ConfigMap", "default", name, ann, members);
}

struct names {
	char list[16][128];
	int n, nulls;
};

static void collect(void *arg, const char *path)
{
	struct names *c = arg;

	if (!path)
		c->nulls++;
	else if (c->n < 16)
		snprintf(c->list[c->n++], sizeof(c->list[0]), "%s", path);
}

static int listed(const struct names *c, const char *path)
{
	int i;

	for (i = 0; i < c->n; i++)
		if (strcmp(c->list[i], path) == 0)
			return 1;
	return 0;
}

/* Runs body in a fresh directory with the log captured; always cleans up. */
static int with_dir(int (*body)(void))
{
	int fd, r;

	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/kreflect-sinkdir-XXXXXX");
	if (!mkdtemp(tmp_dir))
		return __LINE__;
	snprintf(root, sizeof(root), "%s/out", tmp_dir);
	snprintf(log_path, sizeof(log_path), "%s/log", tmp_dir);
	fflush(stderr);
	saved_stderr = dup(2);
	fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || saved_stderr < 0)
		return __LINE__;
	dup2(fd, 2);
	close(fd);
	kr_set_log_level(KR_LOG_TRACE);
	r = body();
	kr_dirsink_close(&D);
	kr_set_log_level(KR_LOG_INFO);
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	if (r != 0) {
		char buf[8192];
		long n = slurp(log_path, buf, sizeof(buf));

		if (n > 0)
			fprintf(stderr, "--- log of the failed test:\n%s---\n", buf);
	}
	rm_rf(tmp_dir);
	return r;
}

#define DIR_TEST(name)                                 \
	static int body_##name(void);                  \
	KR_TEST(sinkdir, name)                         \
	{                                              \
		return with_dir(body_##name);          \
	}                                              \
	static int body_##name(void)

/* --- files and content -------------------------------------------------------------------- */

DIR_TEST(configmap_files_hold_exact_content)
{
	static const char bin[4] = { 0x00, 0x01, (char)0xff, 0x00 };
	struct names c;

	check(open_sink(0, 0) == 0);
	check(mode_of(root) == 0755);
	send(KR_EV_ADDED, "configmaps", "default/app",
	     cm("app", NULL, "\"data\":{\"app.conf\":\"port = 80\\nname = \\\"x\\\"\\n\","
		"\"empty\":\"\",\"u\":\"\\u00e9\\u0000z\"},\"binaryData\":{\"blob\":\"AAH/AA==\"}"));
	check(holds_str("app.conf", "port = 80\nname = \"x\"\n"));
	check(holds("empty", "", 0));
	check(holds("u", "\xc3\xa9\0z", 4));
	check(holds("blob", bin, sizeof(bin)));
	check(mode_of(at("app.conf")) == 0644 && mode_of(at("blob")) == 0644);
	check(mode_of(at(".kreflect-manifest")) == 0600);
	check(D.stats.written == 4 && D.stats.errors == 0 && D.stats.conflicts == 0);
	check(kr_dirsink_files(&D) == 4);
	check(kr_dirsink_changed(&D));
	memset(&c, 0, sizeof(c));
	check(kr_dirsink_take_changes(&D, collect, &c) == 4);
	check(c.n == 4 && c.nulls == 0 && listed(&c, "app.conf") && listed(&c, "blob"));
	check(!kr_dirsink_changed(&D));
	check(kr_dirsink_take_changes(&D, collect, &c) == 0);
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(secret_files_are_0600_decoded_and_never_logged)
{
	static const char token[6] = { 's', '3', 'c', 'r', 0x00, 't' };

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "secrets", "default/creds",
	     object("Secret", "default", "creds", NULL,
		    "\"type\":\"Opaque\",\"data\":{\"token\":\"czNjcgB0\",\"other\":\"dG9wAHNlY3JldAA=\","
		    "\"bad\":\"c2VjcmV0!!\"}"));
	check(holds("token", token, sizeof(token)));
	check(holds("other", "top\0secret\0", 11));
	check(mode_of(at("token")) == 0600 && mode_of(at("other")) == 0600);
	check(!exists(at("bad")));  /* not base64: an error, and no file */
	check(D.stats.written == 2 && D.stats.errors == 1);
	/* Debug logging is on: names and keys are logged, values never. */
	check(logged("token") && logged("bad"));
	check(!logged("czNjcgB0") && !logged("s3cr") && !logged("dG9wAHNlY3JldAA"));
	check(!logged("secret\n") && !logged("c2VjcmV0") && !logged("top"));
	return 0;
}

DIR_TEST(identical_event_leaves_files_untouched)
{
	const char *obj = cm("app", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"}");
	struct stat before, after;

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", obj);
	check(kr_dirsink_take_changes(&D, NULL, NULL) == 2);
	check(stat(at("a"), &before) == 0);
	pause_ms(20);  /* a rewrite would show in the mtime */
	send(KR_EV_MODIFIED, "configmaps", "default/app", obj);
	send(KR_EV_RESYNC, "configmaps", "default/app", obj);
	check(stat(at("a"), &after) == 0);
	check(before.st_ino == after.st_ino);
	check(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
	      before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
	check(D.stats.written == 2 && D.stats.unchanged == 4);
	check(!kr_dirsink_changed(&D));
	return 0;
}

DIR_TEST(changed_key_rewrites_only_that_file)
{
	struct stat a1, b1, a2, b2;

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"}"));
	check(stat(at("a"), &a1) == 0 && stat(at("b"), &b1) == 0);
	kr_dirsink_take_changes(&D, NULL, NULL);
	pause_ms(20);
	/* Same size, other bytes: the compare must look at the bytes, not the size. */
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"9\",\"b\":\"2\"}"));
	check(stat(at("a"), &a2) == 0 && stat(at("b"), &b2) == 0);
	check(holds_str("a", "9") && holds_str("b", "2"));
	check(a1.st_ino != a2.st_ino);  /* replaced by rename */
	check(b1.st_ino == b2.st_ino && b1.st_mtim.tv_nsec == b2.st_mtim.tv_nsec);
	check(D.stats.written == 3 && D.stats.unchanged == 1);
	{
		struct names c;

		memset(&c, 0, sizeof(c));
		check(kr_dirsink_take_changes(&D, collect, &c) == 1 && c.n == 1 && listed(&c, "a"));
	}
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(removed_key_removes_its_file)
{
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app",
	     cm("app", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"},\"binaryData\":{\"c\":\"AA==\"}"));
	check(exists(at("a")) && exists(at("b")) && exists(at("c")));
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	check(exists(at("a")) && !exists(at("b")) && !exists(at("c")));
	check(D.stats.removed == 2 && kr_dirsink_files(&D) == 1);
	/* No data at all: every file goes. */
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, ""));
	check(!exists(at("a")) && kr_dirsink_files(&D) == 0);
	return 0;
}

DIR_TEST(deleted_removes_exactly_its_files)
{
	check(mkdir(root, 0755) == 0);
	check(write_text(at("foreign"), "mine\n") == 0);
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/one", cm("one", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"}"));
	send(KR_EV_ADDED, "configmaps", "default/two", cm("two", NULL, "\"data\":{\"c\":\"3\"}"));
	send(KR_EV_ADDED, "secrets", "default/one", object("Secret", "default", "one", NULL,
							    "\"data\":{\"s\":\"AA==\"}"));
	check(kr_dirsink_files(&D) == 4);
	kr_dirsink_take_changes(&D, NULL, NULL);
	/* The ConfigMap default/one goes; the Secret of the same name stays. */
	send(KR_EV_DELETED, "configmaps", "default/one", cm("one", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"}"));
	check(!exists(at("a")) && !exists(at("b")));
	check(holds_str("c", "3") && exists(at("s")) && holds_str("foreign", "mine\n"));
	check(D.stats.removed == 2 && kr_dirsink_files(&D) == 2);
	check(kr_dirsink_take_changes(&D, NULL, NULL) == 2);
	/* Unknown object: nothing happens. */
	send(KR_EV_DELETED, "configmaps", "default/nobody", NULL);
	check(D.stats.removed == 2 && D.stats.errors == 0);
	check(count_all(root) == 4);  /* c, s, foreign, manifest */
	return 0;
}

/* --- restart ----------------------------------------------------------------------------- */

DIR_TEST(restart_removes_objects_deleted_while_down)
{
	struct stat a1, a2;

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"a1\":\"x\",\"a2\":\"y\"}"));
	send(KR_EV_ADDED, "configmaps", "default/b", cm("b", NULL, "\"data\":{\"b1\":\"x\"}"));
	send(KR_EV_ADDED, "configmaps", "default/c", cm("c", "sub", "\"data\":{\"c1\":\"x\"}"));
	send(KR_EV_ADDED, "deployments.apps", "default/web", "{\"kind\":\"Deployment\",\"metadata\":{}}");
	synced("configmaps");
	check(kr_dirsink_files(&D) == 5);
	check(stat(at("a1"), &a1) == 0);

	/* The next run: a came back without a2; b and c were deleted meanwhile. */
	check(open_sink(0, 0) == 0);
	check(kr_dirsink_files(&D) == 5);
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"a1\":\"x\"}"));
	check(!exists(at("a2")) && exists(at("b1")) && exists(at("sub/c1")));
	synced("configmaps");
	check(holds_str("a1", "x") && !exists(at("b1")) && !exists(at("sub/c1")));
	check(stat(at("a1"), &a2) == 0 && a1.st_ino == a2.st_ino);  /* not rewritten */
	check(exists(at("default_web.json")));  /* another resource: not synced yet */
	check(D.stats.removed == 3 && D.stats.unchanged == 1 && D.stats.written == 0);
	/* A second SYNCED removes nothing more. */
	synced("configmaps");
	check(D.stats.removed == 3);
	synced("deployments.apps");
	check(!exists(at("default_web.json")) && kr_dirsink_files(&D) == 1);

	/* And the manifest says so for the run after. */
	check(open_sink(0, 0) == 0);
	check(kr_dirsink_files(&D) == 1);
	synced("configmaps");
	check(!exists(at("a1")) && kr_dirsink_files(&D) == 0);
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(object_that_cannot_be_read_keeps_its_files_at_sync)
{
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"a1\":\"x\"}"));
	check(open_sink(0, 0) == 0);
	send(KR_EV_MODIFIED, "configmaps", "default/a", "{\"data\":{\"a1\":");  /* cut */
	check(D.stats.errors == 1);
	synced("configmaps");
	check(holds_str("a1", "x"));
	return 0;
}

DIR_TEST(manifest_cut_by_a_crash_loads_and_bad_paths_are_ignored)
{
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"a1\":\"x\"}"));
	check(mkdir(at("keep"), 0755) == 0);
	check(write_text(at("keep/victim"), "not kreflect's") == 0);
	check(write_text(at("../victim"), "not kreflect's") == 0);
	check(append_text(at(".kreflect-manifest"),
			  "+\tconfigmaps\tdefault/evil\t../victim\n"
			  "+\tconfigmaps\tdefault/evil\tkeep/../../victim\n"
			  "+\tconfigmaps\tdefault/evil\t/etc/passwd\n"
			  "garbage\n"
			  "+\tconfigmaps\tdefault/x\tkeep/vic") == 0);
	check(open_sink(0, 0) == 0);
	check(kr_dirsink_files(&D) == 1);
	check(logged("ignored 5 unreadable lines"));
	{
		char buf[512];

		check(slurp(at(".kreflect-manifest"), buf, sizeof(buf)) > 0);
		/* rewritten clean */
		check(strcmp(buf, "kreflect-manifest 1\n+\tconfigmaps\tdefault/a\ta1\n") == 0);
	}
	synced("configmaps");
	check(holds_str("keep/victim", "not kreflect's") && holds_str("../victim", "not kreflect's"));
	check(!exists(at("a1")));
	return 0;
}

DIR_TEST(manifest_journal_stays_bounded)
{
	char members[256], buf[65536];
	int i, lines = 0;
	long n;

	check(open_sink(0, 0) == 0);
	for (i = 0; i < 300; i++) {
		snprintf(members, sizeof(members), "\"data\":{\"k%d\":\"v\",\"stay\":\"s\"}", i);
		send(KR_EV_MODIFIED, "configmaps", "default/a", cm("a", NULL, members));
	}
	check(kr_dirsink_files(&D) == 2 && holds_str("stay", "s") && holds_str("k299", "v"));
	check(!exists(at("k298")) && D.stats.removed == 299);
	n = slurp(at(".kreflect-manifest"), buf, sizeof(buf));
	check(n > 0);
	for (i = 0; i < n; i++)
		lines += buf[i] == '\n';
	check(lines <= 2 * 2 + 64 + 2);
	check(open_sink(0, 0) == 0);
	check(kr_dirsink_files(&D) == 2);
	synced("configmaps");
	check(!exists(at("k299")) && !exists(at("stay")));
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

/* --- confinement and hostile input -------------------------------------------------------- */

DIR_TEST(annotation_chooses_a_confined_subdirectory)
{
	static const char *const bad[] = { "../x", "/etc", "a/../../b", "..", "a/..", "ok/.kreflect-x",
					   "a\\nb" };
	size_t i;

	check(open_sink(0, 0) == 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		send(KR_EV_ADDED, "configmaps", "default/evil", cm("evil", bad[i], "\"data\":{\"k\":\"v\"}"));
		check(D.stats.errors == i + 1);
	}
	check(D.stats.written == 0 && kr_dirsink_files(&D) == 0);
	check(logged("default/evil") && logged("refused"));
	check(!exists(at("../x")) && !exists(at("../b")) && !exists(at("k")));
	check(count_all(tmp_dir) == 3);  /* log, out, manifest */

	send(KR_EV_ADDED, "configmaps", "default/good", cm("good", "./a//b/", "\"data\":{\"k\":\"v\"}"));
	check(holds_str("a/b/k", "v") && mode_of(at("a")) == 0755 && mode_of(at("a/b")) == 0755);
	/* Moving it: written there first, then removed here. */
	send(KR_EV_MODIFIED, "configmaps", "default/good", cm("good", "c", "\"data\":{\"k\":\"v\"}"));
	check(holds_str("c/k", "v") && !exists(at("a/b/k")));
	/* A symbolic link on the way is not followed. */
	check(symlink(tmp_dir, at("link")) == 0);
	send(KR_EV_ADDED, "configmaps", "default/linked", cm("linked", "link/x", "\"data\":{\"k\":\"v\"}"));
	check(!exists(at("link/x")) && D.stats.errors == i + 1 && kr_dirsink_files(&D) == 1);
	/* An owned path whose directory became a link: removing it does not follow. */
	check(rename(at("c"), at("c2")) == 0 && symlink(at("c2"), at("c")) == 0);
	send(KR_EV_DELETED, "configmaps", "default/good", NULL);
	check(holds_str("c2/k", "v") && kr_dirsink_files(&D) == 0);
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(a_path_too_long_is_refused_and_the_log_line_still_names_the_object)
{
	char ann[1001];
	size_t i;

	/* 999 bytes of directories: with the root and a key, past KR_DIRSINK_PATH_MAX. */
	for (i = 0; i < 1000; i += 2)
		memcpy(ann + i, "d/", 2);
	ann[999] = '\0';
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/long", cm("long", ann, "\"data\":{\"k\":\"v\"}"));
	send(KR_EV_ADDED, "configmaps", "default/short", cm("short", NULL, "\"data\":{\"k\":\"v\"}"));
	check(D.stats.errors == 1 && D.stats.written == 1 && holds_str("k", "v"));
	/* The path is shortened in the middle, so the line is not cut before the object. */
	check(logged("d/d/.../d/d/") &&
	      logged("d/d/k for configmaps default/long: the path is longer than 1023 bytes"));
	check(!exists(at("d")));
	return 0;
}

DIR_TEST(hostile_keys_are_refused_and_the_rest_written)
{
	char members[2048], longkey[301];

	memset(longkey, 'k', 300);
	longkey[300] = '\0';
	snprintf(members, sizeof(members),
		 "\"data\":{\"../x\":\"1\",\"a/b\":\"2\",\".\":\"3\",\"..\":\"4\",\"%s\":\"5\","
		 "\".kreflect-manifest\":\"6\",\"\":\"7\",\"ok\":\"8\",\"nl\\n\":\"9\",\"nul\\u0000\":\"10\","
		 "\"obj\":{\"x\":1}},\"binaryData\":{\".kreflect-tmp-x\":\"AA==\",\"ok2\":\"AA==\"}",
		 longkey);
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/evil", cm("evil", NULL, members));
	check(holds_str("ok", "8") && holds("ok2", "", 1));
	check(D.stats.written == 2 && D.stats.errors == 11);
	check(!exists(at("../x")) && !exists(at("a")) && count_all(tmp_dir) == 5);
	{
		char buf[512];

		check(slurp(at(".kreflect-manifest"), buf, sizeof(buf)) > 0);
		check(strncmp(buf, "kreflect-manifest 1\n", 20) == 0);
	}
	check(logged("\"a/b\" of configmaps default/evil") && logged("255 bytes"));
	/* A key of exactly 255 bytes is fine. */
	longkey[255] = '\0';
	snprintf(members, sizeof(members), "\"data\":{\"%s\":\"long\"}", longkey);
	send(KR_EV_MODIFIED, "configmaps", "default/evil", cm("evil", NULL, members));
	check(holds_str(longkey, "long") && !exists(at("ok")));
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(two_objects_writing_one_file_first_keeps_it)
{
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/first", cm("first", NULL, "\"data\":{\"same\":\"1\"}"));
	send(KR_EV_ADDED, "configmaps", "default/second", cm("second", NULL,
							     "\"data\":{\"same\":\"2\",\"own\":\"3\"}"));
	check(holds_str("same", "1") && holds_str("own", "3"));
	check(D.stats.conflicts == 1);
	check(logged("configmaps default/first") && logged("configmaps default/second"));
	/* The loser's delete leaves the winner's file. */
	send(KR_EV_DELETED, "configmaps", "default/second", NULL);
	check(holds_str("same", "1") && !exists(at("own")));
	/* Once the owner lets go, the next event of the other takes it. */
	send(KR_EV_ADDED, "configmaps", "default/second", cm("second", NULL, "\"data\":{\"same\":\"2\"}"));
	check(D.stats.conflicts == 2);
	send(KR_EV_DELETED, "configmaps", "default/first", NULL);
	check(!exists(at("same")));
	send(KR_EV_RESYNC, "configmaps", "default/second", cm("second", NULL, "\"data\":{\"same\":\"2\"}"));
	check(holds_str("same", "2"));
	return 0;
}

DIR_TEST(file_not_owned_is_never_overwritten)
{
	check(mkdir(root, 0755) == 0);
	check(write_text(at("app.conf"), "hand-made\n") == 0);
	check(mkdir(at("adir"), 0755) == 0);
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app",
	     cm("app", NULL, "\"data\":{\"app.conf\":\"x\",\"adir\":\"y\",\"new\":\"z\"}"));
	check(holds_str("app.conf", "hand-made\n") && holds_str("new", "z"));
	check(D.stats.conflicts == 2 && D.stats.written == 1);
	check(logged("app.conf for configmaps default/app"));
	send(KR_EV_DELETED, "configmaps", "default/app", NULL);
	check(holds_str("app.conf", "hand-made\n") && exists(at("adir")) && !exists(at("new")));
	return 0;
}

/* --- layouts, kinds, modes ---------------------------------------------------------------- */

DIR_TEST(object_layout_puts_files_under_namespace_and_name)
{
	check(open_sink(1, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"k\":\"v\"}"));
	send(KR_EV_ADDED, "configmaps", "other/app", object("ConfigMap", "other", "app", NULL,
							    "\"data\":{\"k\":\"w\"}"));
	send(KR_EV_ADDED, "secrets", "default/db", object("Secret", "default", "db", "sub",
							   "\"data\":{\"pw\":\"cHc=\"}"));
	check(holds_str("default/app/k", "v") && holds_str("other/app/k", "w"));
	check(holds_str("sub/default/db/pw", "pw") && mode_of(at("sub/default/db/pw")) == 0600);
	check(mode_of(at("default")) == 0755 && mode_of(at("default/app")) == 0755);
	/* Other kinds are one file whatever the layout. */
	send(KR_EV_ADDED, "services", "default/web", "{\"kind\":\"Service\"}");
	check(holds_str("default_web.json", "{\"kind\":\"Service\"}"));
	/* Deleting removes the object's now empty directories, not the others'. */
	send(KR_EV_DELETED, "configmaps", "other/app", NULL);
	check(!exists(at("other/app/k")) && !exists(at("other/app")) && !exists(at("other")));
	send(KR_EV_DELETED, "configmaps", "default/app", NULL);
	check(!exists(at("default/app")) && !exists(at("default")));
	send(KR_EV_DELETED, "secrets", "default/db", NULL);
	check(!exists(at("sub/default")) && exists(at("sub")));
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(other_kinds_are_one_json_file_as_given)
{
	const char *dep = "{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"web\","
			  "\"namespace\":\"prod\"},\"data\":{\"not\":\"split\"}}";
	const char *ns = "{\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-system\","
			 "\"annotations\":{\"kreflect.io/target-dir\":\"namespaces\"}}}";

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "deployments.apps", "prod/web", dep);
	send(KR_EV_ADDED, "namespaces", "kube-system", ns);
	check(holds_str("prod_web.json", dep) && mode_of(at("prod_web.json")) == 0644);
	check(holds_str("namespaces/kube-system.json", ns));
	check(!exists(at("not")) && kr_dirsink_files(&D) == 2);
	send(KR_EV_DELETED, "deployments.apps", "prod/web", dep);
	check(!exists(at("prod_web.json")) && kr_dirsink_files(&D) == 1);
	return 0;
}

DIR_TEST(modes_are_configurable_and_enforced)
{
	struct kr_dirsink_opts o;
	char err[256];
	mode_t old_umask;

	memset(&o, 0, sizeof(o));
	o.path = root;
	o.file_mode = 0640;
	o.secret_mode = 0400;
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == 0);
	old_umask = umask(077);  /* the modes asked for are exact, whatever the umask */
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", "d", "\"data\":{\"k\":\"v\"}"));
	send(KR_EV_ADDED, "secrets", "default/s", object("Secret", "default", "s", NULL,
							  "\"data\":{\"t\":\"dA==\"}"));
	umask(old_umask);
	check(mode_of(at("d/k")) == 0640 && mode_of(at("t")) == 0400 && mode_of(at("d")) == 0755);
	/* One mode for all, next run: the same bytes are rewritten for the mode. */
	o.file_mode = 0600;
	o.secret_mode = 0600;
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == 0);
	send(KR_EV_RESYNC, "configmaps", "default/a", cm("a", "d", "\"data\":{\"k\":\"v\"}"));
	send(KR_EV_RESYNC, "secrets", "default/s", object("Secret", "default", "s", NULL,
							   "\"data\":{\"t\":\"dA==\"}"));
	check(mode_of(at("d/k")) == 0600 && mode_of(at("t")) == 0600 && D.stats.written == 2);
	o.file_mode = 01777;
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == KR_EINVAL);
	return 0;
}

/* --- bounds and errors ------------------------------------------------------------------- */

DIR_TEST(manifest_capacity_is_an_error_not_a_crash)
{
	check(open_sink(0, 3) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a",
	     cm("a", NULL, "\"data\":{\"k1\":\"1\",\"k2\":\"2\",\"k3\":\"3\",\"k4\":\"4\",\"k5\":\"5\"}"));
	check(kr_dirsink_files(&D) == 3 && D.stats.written == 3 && D.stats.errors == 2);
	check(logged("manifest is full"));
	send(KR_EV_ADDED, "configmaps", "default/b", cm("b", NULL, "\"data\":{\"b\":\"1\"}"));
	check(!exists(at("b")) && D.stats.errors == 3);
	send(KR_EV_DELETED, "configmaps", "default/a", NULL);
	send(KR_EV_ADDED, "configmaps", "default/b", cm("b", NULL, "\"data\":{\"b\":\"1\"}"));
	check(holds_str("b", "1") && kr_dirsink_files(&D) == 1);
	/* A manifest holding more than the next run allows: the excess is an error. */
	send(KR_EV_ADDED, "configmaps", "default/c", cm("c", NULL, "\"data\":{\"c1\":\"1\",\"c2\":\"1\"}"));
	check(kr_dirsink_files(&D) == 3);
	check(open_sink(0, 2) == 0);
	check(kr_dirsink_files(&D) == 2 && D.stats.errors == 1);
	return 0;
}

DIR_TEST(init_creates_the_root_and_refuses_what_is_not_a_directory)
{
	struct kr_dirsink_opts o;
	char err[256], path[400];

	memset(&o, 0, sizeof(o));
	snprintf(path, sizeof(path), "%s/a/b/c/", root);
	o.path = path;
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == 0);
	check(mode_of(at("a/b/c")) == 0755 && exists(at("a/b/c/.kreflect-manifest")));
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"k\":\"v\"}"));
	check(holds_str("a/b/c/k", "v"));

	check(write_text(at("file"), "x") == 0);
	o.path = at("file");
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "not a directory") != NULL);
	/* Events after a failed init are ignored. */
	send(KR_EV_ADDED, "configmaps", "default/z", cm("z", NULL, "\"data\":{\"z\":\"v\"}"));
	check(D.stats.written == 0);

	check(mkdir(at("alien"), 0755) == 0 && write_text(at("alien/.kreflect-manifest"), "hello\n") == 0);
	o.path = at("alien");
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == KR_EPROTO);
	check(holds_str("alien/.kreflect-manifest", "hello\n"));

	o.path = "";
	check(kr_dirsink_init(&D, &o, err, sizeof(err)) == KR_EINVAL);

	if (geteuid() != 0) {
		check(mkdir(at("ro"), 0555) == 0);
		o.path = at("ro");
		check(kr_dirsink_init(&D, &o, err, sizeof(err)) == KR_EIO);
	}
	return 0;
}

DIR_TEST(bad_values_and_bad_objects_are_errors)
{
	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a",
	     cm("a", NULL, "\"data\":{\"n\":1,\"ok\":\"v\"},\"binaryData\":{\"b\":\"A\"}"));
	check(holds_str("ok", "v") && !exists(at("n")) && !exists(at("b")));
	check(D.stats.errors == 2);
	send(KR_EV_ADDED, "configmaps", "default/x", cm("x", NULL, "\"data\":[\"k\"]"));
	check(D.stats.errors == 3);
	send(KR_EV_ADDED, "configmaps", "default/y", "not json");
	check(D.stats.errors == 4);
	send(KR_EV_ADDED, "configmaps", "default/../y", cm("y", NULL, "\"data\":{\"k\":\"v\"}"));
	check(D.stats.errors == 5 && !exists(at("k")));
	send(KR_EV_ADDED, "configmaps", "de\nfault/y", cm("y", NULL, "\"data\":{\"k\":\"v\"}"));
	check(D.stats.errors == 6 && !exists(at("k")));
	check(kr_dirsink_files(&D) == 1);
	return 0;
}

DIR_TEST(changes_list_is_bounded_and_deduplicated)
{
	struct names c;
	char members[256];
	int i;

	check(open_sink(0, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"k\":\"1\"}"));
	send(KR_EV_MODIFIED, "configmaps", "default/a", cm("a", NULL, "\"data\":{\"k\":\"2\"}"));
	memset(&c, 0, sizeof(c));
	check(kr_dirsink_take_changes(&D, collect, &c) == 1 && c.n == 1 && listed(&c, "k"));
	for (i = 0; i < 100; i++) {
		char name[300];

		memset(name, 'n', 200);
		snprintf(name + 200, sizeof(name) - 200, "%d", i);
		snprintf(members, sizeof(members), "\"data\":{\"%s\":\"v\"}", name);
		send(KR_EV_MODIFIED, "configmaps", "default/a", cm("a", NULL, members));
	}
	/* 100 written, 99 removed, "k" removed: more than fits. */
	memset(&c, 0, sizeof(c));
	check(kr_dirsink_take_changes(&D, collect, &c) >= 101);
	check(c.nulls == 1 && listed(&c, "k"));
	check(kr_dirsink_take_changes(&D, collect, &c) == 0);
	return 0;
}

/* Churn does not walk through the whole manifest: the dead never outweigh the live by much. */
DIR_TEST(manifest_compacts_as_the_dead_outweigh_the_live)
{
	char data[64], name[16];
	int i;

	check(open_sink(0, 0) == 0);
	for (i = 0; i < 3000; i++) {
		snprintf(data, sizeof(data), "\"data\":{\"k%d\":\"v\",\"stay\":\"s\"}", i);
		send(KR_EV_MODIFIED, "configmaps", "default/c", cm("c", NULL, data));
		check(D.nlive == 2);
		check(D.nentries <= 2 * D.nlive + 66);
		check(D.names_garbage <= D.names_used - D.names_garbage + 4096 + 64);
	}
	check(holds_str("k2999", "v") && holds_str("stay", "s"));
	snprintf(name, sizeof(name), "k%d", 2998);
	check(access(at(name), F_OK) != 0);
	check(kr_dirsink_files(&D) == 2);
	return 0;
}

/* k8s-sidecar's options: its names, absolute annotations inside the root only,
 * .url keys refused, and sweeps scoped to what each resource covers. */
static int open_sidecar_sink(const struct kr_resource *scopes, int nscopes)
{
	struct kr_dirsink_opts o;
	char err[256];

	memset(&o, 0, sizeof(o));
	o.path = root;
	o.annotation = "k8s-sidecar-target-directory";
	o.unique_names = 1;
	o.annotation_absolute = 1;
	o.url_keys_refused = 1;
	o.scopes = scopes;
	o.nscopes = nscopes;
	return kr_dirsink_init(&D, &o, err, sizeof(err));
}

static const char *sc_cm(const char *ns, const char *name, const char *dir, const char *members)
{
	static char buf[2][4096];
	static int i;
	char ann[1200] = "";

	i = (i + 1) % 2;
	if (dir)
		snprintf(ann, sizeof(ann), ",\"annotations\":{\"k8s-sidecar-target-directory\":\"%s\"}", dir);
	snprintf(buf[i], sizeof(buf[i]),
		 "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
		 "\"namespace\":\"%s\",\"resourceVersion\":\"5\"%s},%s}", name, ns, ann, members);
	return buf[i];
}

DIR_TEST(k8s_sidecar_names_and_absolute_annotations)
{
	char abs[600], evil[600], member[700];

	check(open_sidecar_sink(NULL, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "mon/a", sc_cm("mon", "a", NULL, "\"data\":{\"k.json\":\"1\"}"));
	check(holds_str("namespace_mon.configmap_a.k.json", "1"));
	send(KR_EV_ADDED, "secrets", "mon/s", "{\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\","
	     "\"namespace\":\"mon\"},\"data\":{\"p\":\"eA==\"}}");
	check(holds_str("namespace_mon.secret_s.p", "x") && mode_of(at("namespace_mon.secret_s.p")) == 0600);
	/* Absolute inside the root: the same directory relative to it. */
	snprintf(abs, sizeof(abs), "%s/team", root);
	send(KR_EV_ADDED, "configmaps", "mon/b", sc_cm("mon", "b", abs, "\"data\":{\"b.json\":\"2\"}"));
	check(holds_str("team/namespace_mon.configmap_b.b.json", "2"));
	snprintf(abs, sizeof(abs), "%s//", root);
	send(KR_EV_ADDED, "configmaps", "mon/c", sc_cm("mon", "c", abs, "\"data\":{\"c.json\":\"3\"}"));
	check(holds_str("namespace_mon.configmap_c.c.json", "3"));
	/* A sibling whose name starts like the root is outside it; so is /etc. */
	snprintf(evil, sizeof(evil), "%s-evil/x", root);
	send(KR_EV_ADDED, "configmaps", "mon/d", sc_cm("mon", "d", evil, "\"data\":{\"d.json\":\"4\"}"));
	send(KR_EV_ADDED, "configmaps", "mon/e", sc_cm("mon", "e", "/etc", "\"data\":{\"e.json\":\"5\"}"));
	check(!exists(evil) && count_named(tmp_dir, "out-evil") == 0);
	check(logged("mon/d: annotation k8s-sidecar-target-directory=") && logged("is an absolute path"));
	check(!exists("/etc/namespace_mon.configmap_e.e.json"));
	/* .url keys: refused by name; the other keys are written. */
	send(KR_EV_ADDED, "configmaps", "mon/u", sc_cm("mon", "u", NULL,
	     "\"data\":{\"x.json.url\":\"http://h/x\",\"y.json\":\"6\"}"));
	check(holds_str("namespace_mon.configmap_u.y.json", "6"));
	check(!exists(at("namespace_mon.configmap_u.x.json.url")) && logged("\"x.json.url\" of configmaps mon/u"));
	/* The unique name's bound: "namespace_mon.configmap_long." (29 bytes) and a
	 * key of 226 make 255 bytes, written; a key of 227, refused. */
	{
		char key[300], name[300];

		memset(key, 'k', 227);
		key[226] = '\0';
		snprintf(member, sizeof(member), "\"data\":{\"%s\":\"7\"}", key);
		send(KR_EV_ADDED, "configmaps", "mon/long", sc_cm("mon", "long", NULL, member));
		snprintf(name, sizeof(name), "namespace_mon.configmap_long.%s", key);
		check(strlen(name) == 255 && holds_str(name, "7"));
		key[226] = 'k';
		key[227] = '\0';
		snprintf(member, sizeof(member), "\"data\":{\"%s\":\"8\"}", key);
		send(KR_EV_ADDED, "configmaps", "mon/long2", sc_cm("mon", "long2", NULL, member));
		check(logged("unique file name (UNIQUE_FILENAMES) is longer than 255 bytes"));
	}
	return 0;
}

DIR_TEST(k8s_sidecar_sweep_scoped_to_each_namespace)
{
	struct kr_resource scopes[2];
	char e[200];

	memset(scopes, 0, sizeof(scopes));
	check(kr_resource_lookup("configmaps", &scopes[0], e, sizeof(e)) == 0);
	scopes[1] = scopes[0];
	snprintf(scopes[0].ns, sizeof(scopes[0].ns), "mon");
	snprintf(scopes[1].ns, sizeof(scopes[1].ns), "apps");
	check(open_sidecar_sink(scopes, 2) == 0);
	send(KR_EV_ADDED, "configmaps", "mon/a", sc_cm("mon", "a", NULL, "\"data\":{\"a\":\"1\"}"));
	send(KR_EV_ADDED, "configmaps", "apps/b", sc_cm("apps", "b", NULL, "\"data\":{\"b\":\"2\"}"));
	send(KR_EV_ADDED, "configmaps", "gone/c", sc_cm("gone", "c", NULL, "\"data\":{\"c\":\"3\"}"));
	/* A restart: the manifest holds all three; mon syncs first with nothing. */
	check(open_sidecar_sink(scopes, 2) == 0);
	{
		struct kr_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.type = KR_EV_SYNCED;
		ev.resource = "configmaps";
		ev.res = 0;
		kr_dirsink_event(&D, &ev);
	}
	check(!exists(at("namespace_mon.configmap_a.a")));       /* mon's own: gone */
	check(holds_str("namespace_apps.configmap_b.b", "2"));   /* apps': not mon's to judge */
	check(!exists(at("namespace_gone.configmap_c.c")));      /* no resource covers it any more */
	return 0;
}

/* --- batch mode ---------------------------------------------------------------------------- */

DIR_TEST(batch_files_appear_at_the_flush_all_at_once)
{
	struct names c;

	check(open_sink_mode(0, 0, 1) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\",\"b\":\"2\"}"));
	/* Written, not yet in place: the manifest holds them, the names do not exist yet. */
	check(!exists(at("a")) && !exists(at("b")));
	check(count_named(root, ".kreflect-tmp-") == 2);
	check(D.npending == 2 && kr_dirsink_changed(&D));
	check(kr_dirsink_files(&D) == 2);
	check(kr_dirsink_flush(&D) == 0);
	check(holds_str("a", "1") && holds_str("b", "2"));
	check(count_named(root, ".kreflect-tmp-") == 0);
	check(D.npending == 0 && D.unsynced == 0);
	check(D.stats.written == 2 && D.stats.errors == 0);
	memset(&c, 0, sizeof(c));
	check(kr_dirsink_take_changes(&D, collect, &c) == 2);
	check(listed(&c, "a") && listed(&c, "b"));
	/* Nothing waiting: a flush does nothing. */
	check(kr_dirsink_flush(&D) == 0 && D.stats.written == 2);
	return 0;
}

DIR_TEST(batch_later_write_of_a_path_replaces_the_waiting_one)
{
	check(open_sink_mode(0, 0, 1) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"v1\"}"));
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"v2\"}"));
	check(D.npending == 1 && count_named(root, ".kreflect-tmp-") == 1);
	check(kr_dirsink_flush(&D) == 0);
	check(holds_str("a", "v2"));
	/* v3 waits; then back to what is on disk: nothing is written, v3 is forgotten. */
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"v3\"}"));
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"v2\"}"));
	check(D.npending == 0 && count_named(root, ".kreflect-tmp-") == 0);
	check(kr_dirsink_flush(&D) == 0);
	check(holds_str("a", "v2"));
	check(D.stats.written == 1 && D.stats.unchanged == 1);
	return 0;
}

DIR_TEST(batch_delete_before_the_flush_leaves_nothing)
{
	check(open_sink_mode(1, 0, 1) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	send(KR_EV_DELETED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	check(D.npending == 0);
	check(kr_dirsink_flush(&D) == 0);
	check(!exists(at("default/app/a")) && !exists(at("default/app")) && !exists(at("default")));
	check(count_named(root, ".kreflect-tmp-") == 0);
	check(kr_dirsink_files(&D) == 0 && D.stats.errors == 0);
	/* What the manifest says after a restart: nothing owned. */
	check(open_sink_mode(1, 0, 1) == 0 && kr_dirsink_files(&D) == 0);
	return 0;
}

DIR_TEST(batch_full_table_flushes_first_and_sync_flushes)
{
	static char members[KR_DIRSINK_BATCH_FILES * 24 + 64];
	char last[32], value[32];
	size_t len = 0;
	int k;

	check(open_sink_mode(0, 0, 1) == 0);
	len += (size_t)snprintf(members + len, sizeof(members) - len, "\"data\":{");
	for (k = 0; k < KR_DIRSINK_BATCH_FILES + 3; k++)
		len += (size_t)snprintf(members + len, sizeof(members) - len, "%s\"k%d\":\"%d\"",
					k ? "," : "", k, k);
	snprintf(members + len, sizeof(members) - len, "}");
	send(KR_EV_ADDED, "configmaps", "default/many", cm("many", NULL, members));
	/* The table filled once: its files are in place, the rest wait. */
	check(D.npending == 3);
	check(D.stats.written == KR_DIRSINK_BATCH_FILES);
	snprintf(last, sizeof(last), "k%d", KR_DIRSINK_BATCH_FILES + 2);
	snprintf(value, sizeof(value), "%d", KR_DIRSINK_BATCH_FILES + 2);
	check(holds_str("k0", "0") && !exists(at(last)));
	/* A SYNCED event: everything in place before whoever it starts. */
	synced("configmaps");
	check(D.npending == 0 && D.stats.written == KR_DIRSINK_BATCH_FILES + 3);
	check(holds_str(last, value));
	check(count_named(root, ".kreflect-tmp-") == 0);
	return 0;
}

DIR_TEST(batch_take_changes_and_close_flush)
{
	struct names c;

	check(open_sink_mode(0, 0, 1) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	memset(&c, 0, sizeof(c));
	check(kr_dirsink_take_changes(&D, collect, &c) == 1 && listed(&c, "a"));
	check(holds_str("a", "1"));
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"2\"}"));
	kr_dirsink_close(&D);
	check(holds_str("a", "2") && count_named(root, ".kreflect-tmp-") == 0);
	kr_dirsink_close(&D);  /* twice: harmless */
	return 0;
}

/* --- links swapped in while it runs ------------------------------------------------------ */

/* Swaps root/rel (a directory) for a link to tmp_dir/outside; nonzero on failure. */
static int swap_for_link(const char *rel)
{
	char moved[1100], outside[300];

	snprintf(moved, sizeof(moved), "%s.moved", at(rel));
	snprintf(outside, sizeof(outside), "%s/outside", tmp_dir);
	return mkdir(outside, 0755) != 0 || rename(at(rel), moved) != 0 || symlink(outside, at(rel)) != 0;
}

static int outside_empty(void)
{
	char outside[300];

	snprintf(outside, sizeof(outside), "%s/outside", tmp_dir);
	return count_all(outside) == 0;
}

DIR_TEST(link_swapped_for_a_directory_is_never_followed)
{
	check(open_sink(1, 0) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	check(holds_str("default/app/a", "1"));
	check(swap_for_link("default/app") == 0);
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"2\",\"b\":\"3\"}"));
	check(outside_empty());
	check(logged("unable to create directory default/app for configmaps default/app: something other "
		     "than a directory is there"));
	send(KR_EV_DELETED, "configmaps", "default/app", cm("app", NULL, "\"data\":{}"));
	check(outside_empty());
	check(logged("is now a link or a file; leaving it"));
	return 0;
}

DIR_TEST(batch_link_swapped_in_before_the_flush_is_never_followed)
{
	check(open_sink_mode(1, 0, 1) == 0);
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	check(kr_dirsink_flush(&D) == 0);
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"2\"}"));
	check(D.npending == 1);
	/* Between the write and the rename, the directory becomes a link out of the root. */
	check(swap_for_link("default/app") == 0);
	check(kr_dirsink_flush(&D) == 0);
	check(outside_empty());
	check(logged("unable to write default/app/a: a directory on the way is no longer a directory"));
	check(D.stats.errors == 1);
	return 0;
}

DIR_TEST(batch_file_on_another_file_system_is_synced_on_its_own)
{
	check(open_sink_mode(0, 0, 1) == 0);
	check(D.rootdev_known);
	/* As if the root's file system were another than the file's: the batch's syncfs would not cover it. */
	D.rootdev ^= 1;
	send(KR_EV_ADDED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"1\"}"));
	check(D.npending == 0);
	check(holds_str("a", "1") && count_named(root, ".kreflect-tmp-") == 0);
	check(D.stats.written == 1 && D.stats.errors == 0);
	D.rootdev ^= 1;
	send(KR_EV_MODIFIED, "configmaps", "default/app", cm("app", NULL, "\"data\":{\"a\":\"2\"}"));
	check(D.npending == 1 && holds_str("a", "1"));
	check(kr_dirsink_flush(&D) == 0 && holds_str("a", "2"));
	return 0;
}
