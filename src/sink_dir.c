/*
 * The directory sink's objects as files (sink_dir.h): the no-follow file
 * system walk from the root, writing and removing files, an object's data
 * keys mapped to files, and the sink's public calls. Which names are allowed
 * and the manifest of the files kreflect owns are dir_manifest.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "codec.h"
#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"
#include "dir_manifest.h"
#include "sink_dir.h"

enum kind { KIND_OTHER, KIND_CONFIGMAP, KIND_SECRET };

/* The object an event is about, as the helpers below need it. */
struct obj {
	const struct kr_event *ev;
	int ntoks;
	enum kind kind;
	uint32_t owner_hash;
	char ns[KR_DIRSINK_NAME_MAX + 1];
	char name[KR_DIRSINK_NAME_MAX + 1];
	char dir[KR_DIRSINK_PATH_MAX];   /* directory of its files, relative to the root */
	char file[2 * KR_DIRSINK_NAME_MAX + 8];  /* KIND_OTHER: its one file's name */
};
/* --- files ------------------------------------------------------------------------------- */

static void note_change(struct kr_dirsink *d, const char *rel)
{
	size_t i, n = strlen(rel) + 1;

	for (i = 0; i < d->changes_len; i += strlen(d->changes + i) + 1)
		if (strcmp(d->changes + i, rel) == 0)
			return;
	if (d->nchanges < 0x7fffffff)
		d->nchanges++;
	if (d->changes_len + n > sizeof(d->changes)) {
		d->changes_lost = 1;
		return;
	}
	memcpy(d->changes + d->changes_len, rel, n);
	d->changes_len += n;
}

/* Closes a descriptor open_rel_dir returned (the root's stays open). */
static void close_dir(const struct kr_dirsink *d, int fd)
{
	if (fd >= 0 && fd != d->rootfd)
		kr_port_fs_close(fd);
}

/*
 * Opens directory rel (relative to the root; "" is the root) one component
 * at a time from the root's descriptor, never following a symbolic link: a
 * component swapped for a link fails instead of leading out of the root.
 * With create, missing components are made (their entries flushed at once,
 * or by the batch's flush). Returns a descriptor for close_dir, KR_ENOENT,
 * KR_EINVAL (a component is a link or not a directory), KR_ETOOBIG, KR_EIO.
 */
static int open_rel_dir(struct kr_dirsink *d, const char *rel, int create)
{
	char comp[KR_DIRSINK_NAME_MAX + 1];
	const char *p = rel;
	int fd = d->rootfd;

	while (*p) {
		size_t n = strcspn(p, "/");
		int next;

		if (n == 0) {
			p++;
			continue;
		}
		if (n > KR_DIRSINK_NAME_MAX) {
			close_dir(d, fd);
			return KR_ETOOBIG;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		next = kr_port_fs_open_dir_at(fd, comp);
		if (next == KR_ENOENT && create) {
			int r = kr_port_fs_mkdir_at(fd, comp, KR_DIRSINK_DIR_MODE);

			if (r == 0 && d->batch)
				d->unsynced = 1;
			else if (r == 0 && kr_port_fs_sync(fd) < 0)
				r = KR_EIO;  /* its entry must last as the files in it will */
			next = r < 0 ? r : kr_port_fs_open_dir_at(fd, comp);
		}
		close_dir(d, fd);
		if (next < 0)
			return next;
		fd = next;
		p += n;
	}
	return fd;
}

/* Syncs the directory whose entries changed last, if any. */
static void dir_sync(struct kr_dirsink *d)
{
	int fd;

	if (!d->syncdir_set)
		return;
	d->syncdir_set = 0;
	fd = open_rel_dir(d, d->syncdir, 0);
	if (fd == KR_ENOENT)
		return;  /* removed since: its parent's sync covers it */
	if (fd < 0 || kr_port_fs_sync(fd) < 0) {
		kr_log(KR_LOG_ERROR, "unable to sync directory %s/%s: %s", d->root, d->syncdir,
		       fd == KR_EINVAL ? "it is no longer a directory" : kr_port_fs_error());
		d->stats.errors++;
	}
	close_dir(d, fd);
}

/*
 * Notes that directory rel changed; one fsync per directory per run of
 * changes, or in batch mode one file system sync at the flush.
 */
static void dir_dirty(struct kr_dirsink *d, const char *rel)
{
	if (d->batch) {
		d->unsynced = 1;
		return;
	}
	if (d->syncdir_set && strcmp(d->syncdir, rel) == 0)
		return;
	dir_sync(d);
	kr_snprintf(d->syncdir, sizeof(d->syncdir), "%s", rel);
	d->syncdir_set = 1;
}

/*
 * Batch mode: forgets the file waiting to be renamed to rel (its temporary
 * file removed), so that what is on disk now is what a new write compares
 * with and a removal removes.
 */
static void cancel_pending(struct kr_dirsink *d, const char *rel)
{
	char dir[KR_DIRSINK_PATH_MAX];
	size_t i;
	int fd;

	for (i = 0; i < d->npending; i++) {
		if (strcmp(d->pending[i].rel, rel) != 0)
			continue;
		kr_dir_dirname(rel, dir, sizeof(dir));
		fd = open_rel_dir(d, dir, 0);
		if (fd >= 0)
			kr_port_fs_unlink_at(fd, d->pending[i].tmp);
		close_dir(d, fd);
		d->npending--;
		memmove(&d->pending[i], &d->pending[i + 1], (d->npending - i) * sizeof(d->pending[0]));
		return;
	}
}

/*
 * Opens (creating what is missing) directory rel of o, refusing any
 * component that exists as something other than a directory (a symbolic link
 * could lead out of the root). Returns a descriptor for close_dir, or an
 * error (logged).
 */
static int make_dirs(struct kr_dirsink *d, const char *rel, const struct obj *o)
{
	char sp[SHOWN_PATH];
	int fd = open_rel_dir(d, rel, 1);

	if (fd == KR_EINVAL)
		kr_log(KR_LOG_ERROR, "unable to create directory %s for %s %s: something other than a "
		       "directory is there", kr_dir_short_path(&sp, rel), o->ev->resource, o->ev->key);
	else if (fd < 0)
		kr_log(KR_LOG_ERROR, "unable to create directory %s for %s %s: %s",
		       kr_dir_short_path(&sp, rel), o->ev->resource, o->ev->key,
		       fd == KR_ETOOBIG ? "a name is too long" : kr_port_fs_error());
	return fd;
}

/* 1 if the regular file name in dirfd holds exactly buf[0..len), 0 if not, < 0 on error. */
static int same_bytes(struct kr_dirsink *d, int dirfd, const char *name, const char *buf, size_t len)
{
	size_t at = 0;
	long n;
	int fd = kr_port_fs_open_read_at(dirfd, name);

	if (fd < 0)
		return fd;
	while ((n = kr_port_fs_read(fd, d->chunk, sizeof(d->chunk))) > 0) {
		if ((size_t)n > len - at || memcmp(d->chunk, buf + at, (size_t)n) != 0)
			break;
		at += (size_t)n;
	}
	kr_port_fs_close(fd);
	if (n < 0)
		return (int)n;
	return n == 0 && at == len;
}

/*
 * Makes rel (relative to the root, in directory o->dir, named base) hold
 * exactly buf[0..len) with mode: nothing if it already does, else a
 * temporary file renamed over it (in batch mode, by the next flush).
 */
/* The one message of a file that could not be written: "unable to write <file> for <resource> <key>: why". */
__attribute__((format(printf, 3, 4)))
static void cannot_write(const char *shown, const struct kr_event *ev, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	kr_vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	kr_log(KR_LOG_ERROR, "unable to write %s for %s %s: %s", shown, ev->resource, ev->key, why);
}

static int write_file(struct kr_dirsink *d, const struct obj *o, const char *rel,
		      const char *base, const char *buf, size_t len, unsigned mode)
{
	char tmp[KR_DIRSINK_NAME_MAX + 1], sp[SHOWN_PATH];
	const char *shown = kr_dir_short_path(&sp, rel);
	struct kr_fs_stat st;
	int dfd, fd, r, batched;

	if (d->batch)
		cancel_pending(d, rel);
	dfd = make_dirs(d, o->dir, o);
	if (dfd < 0)
		goto error;
	if (kr_port_fs_stat_at(dfd, base, &st) < 0) {
		cannot_write(shown, o->ev, "%s", kr_port_fs_error());
		goto error;
	}
	if (st.type != KR_FS_NONE && st.type != KR_FS_FILE) {
		cannot_write(shown, o->ev, "it is not a regular file");
		goto error;
	}
	if (st.type == KR_FS_FILE && st.mode == mode && st.size == (uint64_t)len &&
	    same_bytes(d, dfd, base, buf, len) == 1) {
		close_dir(d, dfd);
		d->stats.unchanged++;
		return 0;
	}
	if (d->batch && d->npending == KR_DIRSINK_BATCH_FILES)
		kr_dirsink_flush(d);
	fd = kr_dir_create_tmp(d, dfd, base, mode, tmp, sizeof(tmp));
	if (fd < 0) {
		cannot_write(shown, o->ev, "%s", fd == KR_EINVAL ? "no free temporary file name"
			     : fd == KR_ETOOBIG ? "the path is too long" : kr_port_fs_error());
		goto error;
	}
	/*
	 * The batch's syncfs covers the root's file system only: a file on another
	 * one mounted below the root is synced on its own, as with batch off.
	 */
	batched = d->batch && d->rootdev_known && kr_port_fs_stat_at(dfd, tmp, &st) == 0 &&
		  st.dev == d->rootdev;
	r = kr_dir_finish_tmp(dfd, fd, tmp, buf, len, !batched);
	if (r == 0 && batched) {
		struct kr_dirsink_pending *p = &d->pending[d->npending++];

		kr_snprintf(p->rel, sizeof(p->rel), "%s", rel);
		kr_snprintf(p->tmp, sizeof(p->tmp), "%s", tmp);
		close_dir(d, dfd);
		kr_log(KR_LOG_DEBUG, "wrote %s (%zu bytes) for %s %s; renamed at the next flush", shown,
		       len, o->ev->resource, o->ev->key);
		return 0;
	}
	/* Not batched in batch mode: the manifest lines appended so far are made durable first. */
	if (r == 0 && d->batch && kr_port_fs_sync_all(d->rootfd) < 0) {
		kr_port_fs_unlink_at(dfd, tmp);
		r = KR_EIO;
	}
	if (r == 0 && kr_port_fs_rename_at(dfd, tmp, dfd, base) < 0) {
		kr_port_fs_unlink_at(dfd, tmp);
		r = KR_EIO;
	}
	if (r == 0 && d->batch && kr_port_fs_sync(dfd) < 0)
		r = KR_EIO;  /* renamed, but not known to be durable */
	if (r < 0) {
		cannot_write(shown, o->ev, "%s", kr_port_fs_error());
		goto error;
	}
	close_dir(d, dfd);
	if (!d->batch)
		dir_dirty(d, o->dir);
	d->stats.written++;
	note_change(d, rel);
	kr_log(KR_LOG_DEBUG, "wrote %s (%zu bytes) for %s %s", shown, len, o->ev->resource,
	       o->ev->key);
	return 0;
error:
	close_dir(d, dfd);
	d->stats.errors++;
	return KR_EIO;
}

/* Forgets a pending sync of directory rel (it was removed) in favour of its parent. */
static void dir_removed(struct kr_dirsink *d, const char *rel)
{
	char parent[KR_DIRSINK_PATH_MAX];

	if (d->syncdir_set && strcmp(d->syncdir, rel) == 0)
		d->syncdir_set = 0;
	kr_dir_dirname(rel, parent, sizeof(parent));
	dir_dirty(d, parent);
}

/* Removes the empty directory rel (not the root). 0 or a KR_E code. */
static int remove_dir(struct kr_dirsink *d, const char *rel)
{
	char parent[KR_DIRSINK_PATH_MAX];
	int fd, r;

	kr_dir_dirname(rel, parent, sizeof(parent));
	fd = open_rel_dir(d, parent, 0);
	if (fd < 0)
		return fd;
	r = kr_port_fs_rmdir_at(fd, kr_dir_basename(rel));
	close_dir(d, fd);
	return r;
}

/*
 * Removes the file of entry e and the entry; the object layout's <ns>/<name>
 * and <ns> directories go too once empty. why is for the log. On failure the
 * entry is kept, to try again on the next event of its object or restart.
 */
static void remove_entry(struct kr_dirsink *d, struct kr_dirsink_entry *e, const char *why)
{
	char dir[KR_DIRSINK_PATH_MAX], rel[KR_DIRSINK_PATH_MAX];
	char sp[SHOWN_PATH];
	const char *res = kr_dir_entry_res(d, e), *key = kr_dir_entry_key(d, e), *shown, *base;
	struct kr_fs_stat st;
	size_t dl, kl;
	int r, dfd;

	kr_snprintf(rel, sizeof(rel), "%s", kr_dir_entry_path(d, e));
	shown = kr_dir_short_path(&sp, rel);
	base = kr_dir_basename(rel);
	if (d->batch)
		cancel_pending(d, rel);
	kr_dir_dirname(rel, dir, sizeof(dir));
	dfd = open_rel_dir(d, dir, 0);
	r = dfd < 0 ? dfd : 0;
	if (r == KR_EIO || r == KR_ETOOBIG || (r == 0 && kr_port_fs_stat_at(dfd, base, &st) < 0)) {
		kr_log(KR_LOG_ERROR, "unable to remove %s of %s %s: %s", shown, res, key,
		       kr_port_fs_error());
		close_dir(d, dfd);
		d->stats.errors++;
		return;
	}
	if (r == KR_ENOENT) {
		st.type = KR_FS_NONE;  /* its directory is gone, and the file with it */
	} else if (r < 0) {
		kr_log(KR_LOG_WARN, "a directory on the way to %s of %s %s is now a link or a file; "
		       "leaving it", shown, res, key);
		st.type = KR_FS_DIR;
	}
	if (st.type == KR_FS_DIR) {
		/* Someone made a directory of it (or of the way): forget it, touch nothing. */
		if (r == 0)
			kr_log(KR_LOG_WARN, "%s of %s %s is now a directory; leaving it", shown, res,
			       key);
	} else if (st.type != KR_FS_NONE) {
		/* A link there is removed itself, never followed. */
		r = kr_port_fs_unlink_at(dfd, base);
		if (r < 0 && r != KR_ENOENT) {
			kr_log(KR_LOG_ERROR, "unable to remove %s of %s %s: %s", shown, res, key,
			       kr_port_fs_error());
			close_dir(d, dfd);
			d->stats.errors++;
			return;
		}
		if (r == 0) {
			d->stats.removed++;
			note_change(d, rel);
			kr_log(KR_LOG_DEBUG, "removed %s of %s %s (%s)", shown, res, key, why);
		}
	}
	close_dir(d, dfd);
	/*
	 * Dead before the journal line: a rewrite it may cause must not list it.
	 * res and key stay readable, as names only move in add_entry. The line
	 * comes after the file is gone: a crash between leaves a harmless entry.
	 */
	kr_dir_drop_entry(d, e);
	if (kr_dir_journal_add(d, "-", NULL, NULL, rel) < 0)
		d->stats.errors++;
	dir_dirty(d, dir);

	/* A directory ending in the owner's "<ns>/<name>" is the object layout's. */
	dl = strlen(dir);
	kl = strlen(key);
	if (!strchr(key, '/') || dl < kl || strcmp(dir + dl - kl, key) != 0 ||
	    (dl > kl && dir[dl - kl - 1] != '/'))
		return;
	if (remove_dir(d, dir) < 0)
		return;  /* not empty, most likely: other files of the object or someone's */
	dir_removed(d, dir);
	kr_dir_dirname(dir, rel, sizeof(rel));
	if (rel[0] && remove_dir(d, rel) == 0)
		dir_removed(d, rel);
}

/* --- objects ------------------------------------------------------------------------------ */

enum phase { CLAIM, WRITE };

/*
 * Takes ownership of o->dir/base for the current event: the path must be
 * unowned and absent, or owned by this object. New entries go to the journal.
 */
static void claim(struct kr_dirsink *d, const struct obj *o, const char *base)
{
	const struct kr_event *ev = o->ev;
	char rel[KR_DIRSINK_PATH_MAX], full[KR_DIRSINK_PATH_MAX], sp[SHOWN_PATH];
	const char *shown;
	struct kr_dirsink_entry *e;
	struct kr_fs_stat st;
	int dfd, r;

	if (kr_dir_join(rel, sizeof(rel), o->dir, base) < 0 ||
	    kr_dir_join(full, sizeof(full), d->root, rel) < 0) {
		char whole[2 * KR_DIRSINK_PATH_MAX];

		/* base is at most 2 names and o->dir shorter than a path: it fits. */
		kr_snprintf(whole, sizeof(whole), "%s%s%s", o->dir, o->dir[0] ? "/" : "", base);
		cannot_write(kr_dir_short_path(&sp, whole), ev, "the path is longer than %d bytes",
			     (int)KR_DIRSINK_PATH_MAX - 1);
		d->stats.errors++;
		return;
	}
	shown = kr_dir_short_path(&sp, rel);
	e = kr_dir_find_path(d, rel);
	if (e && !kr_dir_owned_by(d, e, o->owner_hash, ev->resource, ev->key)) {
		/* Names both; an owner's key is "namespace/name", never a secret. */
		cannot_write(shown, ev, "conflict: %s %s writes it; the first owner keeps it",
			     kr_dir_entry_res(d, e), kr_dir_entry_key(d, e));
		d->stats.conflicts++;
		return;
	}
	if (e && e->stamp == d->stamp) {
		cannot_write(shown, ev, "the object has that key twice");
		d->stats.errors++;
		return;
	}
	if (e) {
		e->stamp = d->stamp;
		e->flags |= F_SEEN | F_TODO;
		return;
	}
	/* Not reachable without a link (KR_EINVAL): nothing there; the write will say why. */
	dfd = open_rel_dir(d, o->dir, 0);
	r = dfd == KR_ENOENT || dfd == KR_EINVAL ? 0 : dfd < 0 ? dfd : kr_port_fs_stat_at(dfd, base, &st);
	if (dfd < 0)
		st.type = KR_FS_NONE;
	close_dir(d, dfd);
	if (r < 0) {
		cannot_write(shown, ev, "%s", kr_port_fs_error());
		d->stats.errors++;
		return;
	}
	if (st.type != KR_FS_NONE) {
		cannot_write(shown, ev, "conflict: the file exists and is not kreflect's");
		d->stats.conflicts++;
		return;
	}
	e = kr_dir_add_entry(d, ev->resource, ev->key, rel, F_SEEN | F_TODO | F_NEW);
	if (!e) {
		cannot_write(shown, ev, "the manifest is full (%zu files)", d->max_files);
		d->stats.errors++;
		return;
	}
	/* journal_add may rewrite the manifest, which reads entries but never moves them. */
	if (kr_dir_journal_add(d, "+", ev->resource, ev->key, rel) < 0) {
		kr_dir_drop_entry(d, e);
		d->stats.errors++;
	}
}

/* The entry claimed for o->dir/base in this event and not yet written, or NULL. */
static struct kr_dirsink_entry *claimed(struct kr_dirsink *d, const struct obj *o,
					const char *base, char *rel, size_t size)
{
	struct kr_dirsink_entry *e;

	if (kr_dir_join(rel, size, o->dir, base) < 0)
		return NULL;
	e = kr_dir_find_path(d, rel);
	if (!e || !(e->flags & F_TODO) || e->stamp != d->stamp ||
	    !kr_dir_owned_by(d, e, o->owner_hash, o->ev->resource, o->ev->key))
		return NULL;
	e->flags &= ~F_TODO;
	return e;
}

/* Gives up an entry this event added but could not write: no file, no claim. */
static void unclaim(struct kr_dirsink *d, struct kr_dirsink_entry *e)
{
	if (!(e->flags & F_NEW))
		return;  /* an old file stays as it was */
	kr_dir_drop_entry(d, e);
	if (kr_dir_journal_add(d, "-", NULL, NULL, kr_dir_entry_path(d, e)) < 0)
		d->stats.errors++;
}

/*
 * k8s-sidecar's naming, when asked for: a ".url" key refused (k8s-sidecar
 * would download it), UNIQUE_FILENAMES' "namespace_<ns>.<kind>_<name>.<key>"
 * in place of key (size bytes). Returns NULL, or why the key is refused.
 */
static const char *sidecar_name(const struct kr_dirsink *d, const struct obj *o, char *key,
				 size_t size)
{
	size_t len = strlen(key);
	char name[KR_DIRSINK_NAME_MAX + 2];
	int n;

	if (d->url_keys_refused && len >= 4 && strcmp(key + len - 4, ".url") == 0)
		return "a .url key asks k8s-sidecar to download the file, which kreflect does not do";
	if (!d->unique_names)
		return NULL;
	n = kr_snprintf(name, sizeof(name), "namespace_%s.%s_%s.%s", o->ns,
			o->kind == KIND_SECRET ? "secret" : "configmap", o->name, key);
	if (n < 0 || (size_t)n > KR_DIRSINK_NAME_MAX || (size_t)n >= size)
		return "its unique file name (UNIQUE_FILENAMES) is longer than 255 bytes";
	memcpy(key, name, (size_t)n + 1);
	return kr_dir_bad_name(key, (size_t)n);
}

/* One data key (token k, value k + 1) of a ConfigMap or Secret, in one phase. */
static void data_key(struct kr_dirsink *d, const struct obj *o, int k, int base64,
		     enum phase phase)
{
	const char *json = o->ev->obj;
	const kr_json_tok *t = d->toks;
	char key[KR_DIRSINK_NAME_MAX + 1], rel[KR_DIRSINK_PATH_MAX], shown[80];
	struct kr_dirsink_entry *e;
	const char *why;
	unsigned mode = o->kind == KIND_SECRET ? d->secret_mode : d->file_mode;
	int len = kr_json_unescape(json, &t[k], key, sizeof(key));
	long vlen;

	why = len == KR_ETOOBIG ? "longer than 255 bytes" : len < 0 ? "not a valid string"
								  : kr_dir_bad_name(key, (size_t)len);
	if (!why)
		why = sidecar_name(d, o, key, sizeof(key));
	if (phase == CLAIM) {
		kr_dir_printable(shown, sizeof(shown), json + t[k].start, (size_t)(t[k].end - t[k].start));
		if (!why && (k + 1 >= o->ntoks || t[k + 1].type != KR_JSON_T_STRING))
			why = "its value is not a string";
		if (why) {
			kr_log(KR_LOG_ERROR, "unable to write key \"%s\" of %s %s: refused: %s",
			       shown, o->ev->resource, o->ev->key, why);
			d->stats.errors++;
			return;
		}
		claim(d, o, key);
		return;
	}
	if (why || (e = claimed(d, o, key, rel, sizeof(rel))) == NULL)
		return;
	vlen = kr_json_unescape(json, &t[k + 1], d->buf, sizeof(d->buf));
	if (vlen >= 0 && base64)
		vlen = kr_base64_decode(d->buf, (size_t)vlen);
	if (vlen < 0) {
		/* The value itself is never logged: it may be a secret. */
		char sp[SHOWN_PATH];

		cannot_write(kr_dir_short_path(&sp, rel), o->ev, "the value is not valid %s",
			     base64 ? "base64" : "JSON text");
		d->stats.errors++;
		unclaim(d, e);
		return;
	}
	if (write_file(d, o, rel, key, d->buf, (size_t)vlen, mode) < 0)
		unclaim(d, e);
}

/* Every file of o, in one phase. */
static void each_file(struct kr_dirsink *d, const struct obj *o, enum phase phase)
{
	static const char *const sections[2] = { "data", "binaryData" };
	const char *json = o->ev->obj;
	const kr_json_tok *t = d->toks;
	char rel[KR_DIRSINK_PATH_MAX];
	struct kr_dirsink_entry *e;
	int s;

	if (o->kind == KIND_OTHER) {
		if (phase == CLAIM)
			claim(d, o, o->file);
		else if ((e = claimed(d, o, o->file, rel, sizeof(rel))) != NULL &&
			 write_file(d, o, rel, o->file, o->ev->obj, o->ev->objlen, d->file_mode) < 0)
			unclaim(d, e);
		return;
	}
	for (s = 0; s < 2; s++) {
		int v, k;

		if (o->kind == KIND_SECRET && s == 1)
			continue;  /* a Secret's data is base64 already; it has no binaryData */
		v = kr_json_find(json, t, o->ntoks, 0, sections[s]);
		if (v < 0 || t[v].type == KR_JSON_T_PRIMITIVE)
			continue;  /* absent or null */
		if (t[v].type != KR_JSON_T_OBJECT) {
			if (phase == CLAIM) {
				kr_log(KR_LOG_ERROR, "unable to write %s %s: its %s is not an object",
				       o->ev->resource, o->ev->key, sections[s]);
				d->stats.errors++;
			}
			continue;
		}
		for (k = v + 1; k < o->ntoks && t[k].start < t[v].end; k++)
			if (t[k].parent == v)
				data_key(d, o, k, s == 1 || o->kind == KIND_SECRET, phase);
	}
}

/* Marks every file of the owner as wanted, so that a failed event removes none. */
static void keep_all(struct kr_dirsink *d, const struct kr_event *ev, uint32_t oh)
{
	size_t i;

	for (i = 0; i < d->nentries; i++)
		if (kr_dir_owned_by(d, &d->entries[i], oh, ev->resource, ev->key))
			d->entries[i].flags |= F_SEEN;
}

/* Splits "ns/name" (or "name") into o->ns and o->name. Returns NULL or why not. */
static const char *split_key(struct obj *o)
{
	const char *key = o->ev->key, *slash = strchr(key, '/');
	size_t nl = slash ? (size_t)(slash - key) : 0;
	const char *name = slash ? slash + 1 : key, *why;

	if (nl > KR_DIRSINK_NAME_MAX || strlen(name) > KR_DIRSINK_NAME_MAX)
		return "its namespace or name is longer than 255 bytes";
	memcpy(o->ns, key, nl);
	o->ns[nl] = '\0';
	kr_snprintf(o->name, sizeof(o->name), "%s", name);
	if ((slash && (why = kr_dir_bad_name(o->ns, nl)) != NULL) ||
	    (why = kr_dir_bad_name(o->name, strlen(o->name))) != NULL)
		return "its namespace or name cannot be a file name";
	return NULL;
}

/*
 * With annotation_absolute, an absolute annotation naming the root or a
 * directory below it, as k8s-sidecar's users write it, becomes the same
 * directory relative to the root; anything else is returned as it is (an
 * absolute path outside the root is then refused).
 */
static const char *absolute_in_root(const struct kr_dirsink *d, const char *ann)
{
	size_t rl = strcmp(d->root, "/") == 0 ? 0 : strlen(d->root);

	if (!d->annotation_absolute || ann[0] != '/' || strncmp(ann, d->root, rl) != 0 ||
	    (ann[rl] != '/' && ann[rl] != '\0'))
		return ann;
	ann += rl;
	while (*ann == '/')
		ann++;
	return ann;
}

/* The target directory from the annotation into o->dir. Returns NULL or why not. */
static const char *target_dir(struct kr_dirsink *d, struct obj *o, char *ann, size_t size)
{
	const char *json = o->ev->obj, *why;
	int a, v, len;

	ann[0] = '\0';
	o->dir[0] = '\0';
	if (d->annotation[0]) {
		a = kr_json_find(json, d->toks, o->ntoks, 0, "metadata.annotations");
		v = a < 0 ? -1 : kr_json_find_key(json, d->toks, o->ntoks, a, d->annotation,
						    strlen(d->annotation));
		if (v >= 0) {
			len = kr_json_unescape(json, &d->toks[v], ann, size);
			if (len < 0)
				return "is not a string of at most 1023 bytes";
			if (strlen(ann) != (size_t)len)
				return "contains a NUL byte";
			if (kr_dir_has_control(ann))
				return "contains a control character";
			why = kr_dir_normalize(absolute_in_root(d, ann), o->dir, sizeof(o->dir));
			if (why)
				return why;
		}
	}
	if (o->kind != KIND_OTHER && d->layout_object) {
		char sub[KR_DIRSINK_PATH_MAX], top[KR_DIRSINK_PATH_MAX];

		kr_snprintf(top, sizeof(top), "%s", o->dir);
		if (kr_dir_join(sub, sizeof(sub), o->ns, o->name) < 0 ||
		    kr_dir_join(o->dir, sizeof(o->dir), top, sub) < 0)
			return "makes a path that is too long";
	}
	return NULL;
}

/* Nonzero if the event's resource and key can be written into the manifest. */
static int good_owner(const struct kr_event *ev)
{
	return ev->resource && ev->key && ev->resource[0] && ev->key[0] &&
	       strlen(ev->resource) < KR_DIRSINK_RES_MAX && strlen(ev->key) < KR_KEY_MAX &&
	       !kr_dir_has_control(ev->resource) && !kr_dir_has_control(ev->key);
}

/* ADDED, MODIFIED, RESYNC: claim, record, write, then remove what it no longer has. */
static void put_object(struct kr_dirsink *d, const struct kr_event *ev)
{
	struct obj o;
	char ann[KR_DIRSINK_PATH_MAX], shown[80];
	const char *why = NULL;
	size_t i;

	o.ev = ev;
	o.owner_hash = kr_dir_owner_hash(ev->resource, ev->key);
	o.kind = strcmp(ev->resource, "configmaps") == 0 ? KIND_CONFIGMAP
		 : strcmp(ev->resource, "secrets") == 0 ? KIND_SECRET : KIND_OTHER;
	o.ntoks = ev->obj ? kr_json_parse(ev->obj, ev->objlen, d->toks, KR_JSON_TOKENS) : KR_EINVAL;
	if (o.ntoks < 0) {
		kr_log(KR_LOG_ERROR, "unable to write %s %s: the object cannot be read: %s",
		       ev->resource, ev->key, kr_strerror(o.ntoks));
		goto refused;
	}
	why = split_key(&o);
	if (why) {
		kr_log(KR_LOG_ERROR, "unable to write %s %s: %s", ev->resource, ev->key, why);
		goto refused;
	}
	why = target_dir(d, &o, ann, sizeof(ann));
	if (why) {
		kr_dir_printable(shown, sizeof(shown), ann, strlen(ann));
		kr_log(KR_LOG_ERROR, "unable to write %s %s: annotation %s=\"%s\" refused: %s",
		       ev->resource, ev->key, d->annotation, shown, why);
		goto refused;
	}
	if (o.kind == KIND_OTHER) {
		kr_snprintf(o.file, sizeof(o.file), o.ns[0] ? "%s_%s.json" : "%s%s.json", o.ns, o.name);
		why = kr_dir_bad_name(o.file, strlen(o.file));
		if (why) {
			kr_log(KR_LOG_ERROR, "unable to write %s %s: file name refused: %s",
			       ev->resource, ev->key, why);
			goto refused;
		}
	}

	if (++d->stamp == 0)
		d->stamp = 1;  /* 0 is the stamp of entries loaded from the manifest */
	each_file(d, &o, CLAIM);
	if (kr_dir_journal_flush(d) < 0) {
		/* Files the manifest does not record must not appear: undo and keep the old. */
		for (i = 0; i < d->nentries; i++) {
			struct kr_dirsink_entry *e = &d->entries[i];

			if ((e->flags & (F_NEW | F_DEAD)) == F_NEW)
				kr_dir_drop_entry(d, e);
		}
		goto refused;
	}
	each_file(d, &o, WRITE);
	for (i = 0; i < d->nentries; i++) {
		struct kr_dirsink_entry *e = &d->entries[i];

		if (!kr_dir_owned_by(d, e, o.owner_hash, ev->resource, ev->key))
			continue;
		e->flags &= ~(F_TODO | F_NEW);
		if (e->stamp != d->stamp)
			remove_entry(d, e, "no longer in the object");
	}
	return;
refused:
	d->stats.errors++;
	keep_all(d, ev, o.owner_hash);
	for (i = 0; i < d->nentries; i++)
		d->entries[i].flags &= ~(F_TODO | F_NEW);
}

static void delete_object(struct kr_dirsink *d, const struct kr_event *ev)
{
	uint32_t oh = kr_dir_owner_hash(ev->resource, ev->key);
	size_t i;

	for (i = 0; i < d->nentries; i++)
		if (kr_dir_owned_by(d, &d->entries[i], oh, ev->resource, ev->key))
			remove_entry(d, &d->entries[i], "the object is gone");
}

/* Nonzero if a resource named res covers key (so only its own sweep may remove it). */
static int covered_by_any(const struct kr_dirsink *d, const char *res, const char *key)
{
	int i;

	for (i = 0; i < d->nscopes; i++)
		if (strcmp(d->scopes[i].name, res) == 0 && kr_resource_covers(&d->scopes[i], key))
			return 1;
	return 0;
}

/*
 * After a complete list: files of the resource no event wanted since init are
 * gone, among those it covers (another resource of the same type may list the
 * others: another namespace, another name) or that no resource covers any more.
 */
static void sweep(struct kr_dirsink *d, const struct kr_event *ev)
{
	const struct kr_resource *scope = d->scopes && ev->res >= 0 && ev->res < d->nscopes
					  ? &d->scopes[ev->res] : NULL;
	const char *res = ev->resource;
	size_t i, n = 0;

	for (i = 0; i < d->nentries; i++) {
		struct kr_dirsink_entry *e = &d->entries[i];

		if (!(e->flags & (F_SEEN | F_DEAD)) && strcmp(kr_dir_entry_res(d, e), res) == 0 &&
		    (!scope || kr_resource_covers(scope, kr_dir_entry_key(d, e)) ||
		     !covered_by_any(d, res, kr_dir_entry_key(d, e)))) {
			remove_entry(d, e, "the object was deleted while kreflect was not running");
			n++;
		}
	}
	if (n)
		kr_log(KR_LOG_INFO, "%s: removed %zu files of objects deleted while kreflect was "
		       "not running", res, n);
}

/* --- public ---------------------------------------------------------------------------- */

void kr_dirsink_event(void *arg, const struct kr_event *ev)
{
	struct kr_dirsink *d = arg;

	if (!d->ready)
		return;
	if (ev->type == KR_EV_SYNCED) {
		/* A partial sync proves nothing about absent objects: no sweep. */
		if (ev->resource && !ev->partial)
			sweep(d, ev);
	} else if (!good_owner(ev)) {
		kr_log(KR_LOG_ERROR, "unable to write an object of %s: its resource or key cannot "
		       "be recorded", ev->resource ? ev->resource : "(none)");
		d->stats.errors++;
		return;
	} else if (ev->type == KR_EV_DELETED) {
		delete_object(d, ev);
	} else {
		put_object(d, ev);
	}
	if (kr_dir_journal_flush(d) < 0)
		d->stats.errors++;
	dir_sync(d);
	/* A program started or a hook run at the sync finds every file in place. */
	if (ev->type == KR_EV_SYNCED)
		kr_dirsink_flush(d);
}

int kr_dirsink_flush(void *arg)
{
	struct kr_dirsink *d = arg;
	char dir[KR_DIRSINK_PATH_MAX], sp[SHOWN_PATH];
	size_t i, n = d->npending;
	int r = 0;

	if (!d->batch || !d->ready || (!d->npending && !d->unsynced))
		return 0;
	/* The temporary files and manifest lines durable before any rename shows them. */
	if (n && kr_port_fs_sync_all(d->rootfd) < 0) {
		kr_log(KR_LOG_ERROR, "unable to flush %zu files to %s: %s; they keep their old content",
		       n, d->root, kr_port_fs_error());
		while (d->npending)
			cancel_pending(d, d->pending[0].rel);
		d->stats.errors += n;
		return KR_EIO;
	}
	for (i = 0; i < n; i++) {
		const struct kr_dirsink_pending *p = &d->pending[i];
		const char *shown = kr_dir_short_path(&sp, p->rel);
		int fd;

		kr_dir_dirname(p->rel, dir, sizeof(dir));
		fd = open_rel_dir(d, dir, 0);
		r = fd < 0 ? fd : kr_port_fs_rename_at(fd, p->tmp, fd, kr_dir_basename(p->rel));
		if (r < 0) {
			kr_log(KR_LOG_ERROR, "unable to write %s: %s", shown,
			       fd == KR_EINVAL ? "a directory on the way is no longer a directory"
			       : kr_port_fs_error());
			if (fd >= 0)
				kr_port_fs_unlink_at(fd, p->tmp);
			d->stats.errors++;
		} else {
			d->stats.written++;
			note_change(d, p->rel);
		}
		close_dir(d, fd);
	}
	d->npending = 0;
	/* The renames, removals and new directories durable. */
	if (kr_port_fs_sync_all(d->rootfd) < 0) {
		kr_log(KR_LOG_ERROR, "unable to flush %s: %s", d->root, kr_port_fs_error());
		d->stats.errors++;
		return KR_EIO;
	}
	d->unsynced = 0;
	return 0;
}

void kr_dirsink_close(struct kr_dirsink *d)
{
	if (!d->ready)
		return;
	kr_dirsink_flush(d);
	dir_sync(d);
	kr_port_fs_close(d->rootfd);
	d->rootfd = -1;
	d->ready = 0;
}

/* Creates the root and its missing parents (following links: the root is the user's). */
static int make_root(const char *root)
{
	char p[KR_DIRSINK_PATH_MAX];
	size_t i;

	kr_snprintf(p, sizeof(p), "%s", root);
	for (i = 1;; i++) {
		char c = p[i];

		if (c != '/' && c != '\0')
			continue;
		p[i] = '\0';
		if (kr_port_fs_is_dir(p) == KR_ENOENT) {
			int r = kr_port_fs_mkdir(p, KR_DIRSINK_DIR_MODE);

			if (r < 0)
				return r;
		}
		if (c == '\0')
			return 0;
		p[i] = '/';
	}
}

int kr_dirsink_init(struct kr_dirsink *d, const struct kr_dirsink_opts *o, char *err,
		    size_t errlen)
{
	char tmp[KR_DIRSINK_PATH_MAX];
	const char *ann = o->annotation ? o->annotation : KR_DIRSINK_ANNOTATION;
	size_t len;
	int r, rewrite = 0, fd;

	memset(d, 0, offsetof(struct kr_dirsink, entries));
	d->rootfd = -1;
	if (errlen)
		err[0] = '\0';
	d->batch = o->batch;
	d->layout_object = o->layout_object;
	d->unique_names = o->unique_names;
	d->annotation_absolute = o->annotation_absolute;
	d->url_keys_refused = o->url_keys_refused;
	d->scopes = o->scopes;
	d->nscopes = o->nscopes;
	d->file_mode = o->file_mode ? o->file_mode : KR_DIRSINK_FILE_MODE;
	d->secret_mode = o->secret_mode ? o->secret_mode : KR_DIRSINK_SECRET_MODE;
	d->max_files = o->max_files ? o->max_files : KR_DIRSINK_MAX_FILES;
	if (!o->path || !o->path[0]) {
		kr_snprintf(err, errlen, "unable to use the output directory: no path given");
		return KR_EINVAL;
	}
	if (d->file_mode > 0777 || d->secret_mode > 0777 || d->max_files > KR_DIRSINK_MAX_FILES) {
		kr_snprintf(err, errlen, "unable to use %s: file modes above 0777 or more than %zu "
			 "files are not supported", o->path, (size_t)KR_DIRSINK_MAX_FILES);
		return KR_EINVAL;
	}
	if (strlen(ann) >= sizeof(d->annotation) || kr_dir_has_control(ann)) {
		kr_snprintf(err, errlen, "unable to use the annotation %.64s: too long or not text", ann);
		return KR_EINVAL;
	}
	kr_snprintf(d->annotation, sizeof(d->annotation), "%s", ann);
	len = strlen(o->path);
	while (len > 1 && o->path[len - 1] == '/')
		len--;
	/* Room for "/" and a longest file name below the root. */
	if (len + 2 + KR_DIRSINK_NAME_MAX > sizeof(d->root) || kr_dir_has_control(o->path)) {
		kr_snprintf(err, errlen, "unable to use %.64s...: the path is too long", o->path);
		return KR_EINVAL;
	}
	memcpy(d->root, o->path, len);
	d->root[len] = '\0';

	r = make_root(d->root);
	if (r == 0)
		r = d->rootfd = kr_port_fs_open_dir(d->root);
	if (r < 0) {
		kr_snprintf(err, errlen, "unable to use %s: %s", o->path,
			 r == KR_EINVAL ? "not a directory" : kr_port_fs_error());
		d->rootfd = -1;
		return r == KR_EINVAL ? KR_EINVAL : KR_EIO;
	}
	r = kr_dir_manifest_load(d, &rewrite, err, errlen);
	if (r == 0 && rewrite && kr_dir_manifest_write(d) < 0) {
		kr_snprintf(err, errlen, "unable to write %s/%s: %s", o->path,
			 KR_DIRSINK_MANIFEST, kr_port_fs_error());
		r = KR_EIO;
	} else if (r == 0 && !rewrite) {
		/* Nothing to write: prove that files can be created here. */
		fd = kr_dir_create_tmp(d, d->rootfd, "probe", 0600, tmp, sizeof(tmp));
		if (fd < 0) {
			kr_snprintf(err, errlen, "unable to create files in %s: %s", o->path,
				 kr_port_fs_error());
			r = KR_EIO;
		} else {
			kr_port_fs_close(fd);
			kr_port_fs_unlink_at(d->rootfd, tmp);
		}
	}
	if (r < 0) {
		kr_port_fs_close(d->rootfd);
		d->rootfd = -1;
		return r;
	}
	/* The root's file system, which the batch's syncfs covers (the manifest is on it). */
	{
		struct kr_fs_stat ms;

		d->rootdev_known = kr_port_fs_stat_at(d->rootfd, KR_DIRSINK_MANIFEST, &ms) == 0 &&
				   ms.type == KR_FS_FILE;
		d->rootdev = ms.dev;
	}
	d->ready = 1;
	kr_log(KR_LOG_INFO, "writing files to %s (%zu owned from an earlier run)", o->path, d->nlive);
	return 0;
}

int kr_dirsink_changed(const struct kr_dirsink *d)
{
	return d->nchanges > 0 || d->npending > 0;
}

int kr_dirsink_take_changes(struct kr_dirsink *d, void (*fn)(void *arg, const char *path),
			    void *arg)
{
	size_t i;
	int n;

	kr_dirsink_flush(d);
	n = d->nchanges;
	if (fn) {
		for (i = 0; i < d->changes_len; i += strlen(d->changes + i) + 1)
			fn(arg, d->changes + i);
		if (d->changes_lost)
			fn(arg, NULL);
	}
	d->nchanges = 0;
	d->changes_len = 0;
	d->changes_lost = 0;
	return n;
}

size_t kr_dirsink_files(const struct kr_dirsink *d)
{
	return d->nlive;
}
