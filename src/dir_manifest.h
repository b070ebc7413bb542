/*
 * The directory sink's name policy and manifest (dir_manifest.c), beside the
 * part that writes objects as files (sink_dir.c): which names a file and a
 * target directory may have, the list of the files kreflect owns in memory,
 * and that list on disk as an append-only journal rewritten atomically.
 * Internal to the sink: kr_dirsink and its entries are in sink_dir.h.
 */
#ifndef KR_DIR_MANIFEST_H
#define KR_DIR_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "sink_dir.h"

#define F_SEEN 1u  /* wanted by an event since init; loaded entries are not, yet */
#define F_DEAD 2u  /* removed; its names wait for compaction */
#define F_TODO 4u  /* claimed by the current event, not written yet */
#define F_NEW 8u   /* added by the current event: undone if the manifest cannot say so */

#define TMP_PREFIX ".kreflect-tmp-"
#define RESERVED_PREFIX ".kreflect"
#define SHOWN_PATH 160  /* longest path shown in a log line, with its NUL */

/* --- names --- */

/* The owner of a file, hashed: resource and namespace/name key. */
uint32_t kr_dir_owner_hash(const char *res, const char *key);
/* Nonzero if s holds a control byte. */
int kr_dir_has_control(const char *s);
/* Why s[0..len) cannot be a file name, or NULL if it can. */
const char *kr_dir_bad_name(const char *s, size_t len);
/*
 * Copies a relative path src into out, dropping empty and "." components.
 * Returns NULL, or why src is refused: absolute, "..", a bad component.
 */
const char *kr_dir_normalize(const char *src, char *out, size_t size);
/* A manifest path: relative, every component a file name. Nonzero if good. */
int kr_dir_good_rel(const char *rel);
/* out = a "/" b, or b alone when a is "". Returns 0, or KR_ETOOBIG. */
int kr_dir_join(char *out, size_t size, const char *a, const char *b);
/* The directory part of path (up to its last '/'), or "" if it has none. */
void kr_dir_dirname(const char *path, char *out, size_t size);
/* The last component of path. */
const char *kr_dir_basename(const char *path);
/* s[0..len) made fit for a log line: control bytes as '?', cut at 64 with "...". */
const char *kr_dir_printable(char *out, size_t size, const char *s, size_t len);
/*
 * A path short enough for a log line that names the object after it (a line
 * is cut at KR_LOG_LINE_MAX): the middle of a long one becomes "...".
 * Returns path itself when it is short, else out.
 */
const char *kr_dir_short_path(char (*out)[SHOWN_PATH], const char *path);

/* --- the manifest in memory --- */

/* An entry's resource, namespace/name key and path (relative to the root). */
const char *kr_dir_entry_res(const struct kr_dirsink *d, const struct kr_dirsink_entry *e);
const char *kr_dir_entry_key(const struct kr_dirsink *d, const struct kr_dirsink_entry *e);
const char *kr_dir_entry_path(const struct kr_dirsink *d, const struct kr_dirsink_entry *e);
/* Nonzero if live entry e belongs to res and key (oh: their kr_dir_owner_hash). */
int kr_dir_owned_by(const struct kr_dirsink *d, const struct kr_dirsink_entry *e, uint32_t oh,
		    const char *res, const char *key);
/* The live entry of path rel, or NULL. */
struct kr_dirsink_entry *kr_dir_find_path(struct kr_dirsink *d, const char *rel);
/* Marks e removed; its names go at the next compaction. */
void kr_dir_drop_entry(struct kr_dirsink *d, struct kr_dirsink_entry *e);
/*
 * Adds an entry (pointers to entries are stale after). Returns it, or NULL
 * when the manifest is full.
 */
struct kr_dirsink_entry *kr_dir_add_entry(struct kr_dirsink *d, const char *res, const char *key,
					  const char *rel, uint32_t flags);

/* --- the manifest on disk --- */

/*
 * Creates a temporary file in directory dirfd for base, trying a few numbers.
 * Returns the descriptor (its name in tmp) or a negative KR_E code.
 */
int kr_dir_create_tmp(struct kr_dirsink *d, int dirfd, const char *base, unsigned mode,
		      char *tmp, size_t size);
/*
 * Writes buf[0..len) to fd, syncs it (with sync) and closes it; on failure
 * removes tmp from dirfd. 0 or KR_EIO.
 */
int kr_dir_finish_tmp(int dirfd, int fd, const char *tmp, const void *buf, size_t len, int sync);
/*
 * Rewrites the whole manifest from memory, atomically; pending journal lines
 * are part of memory, so they are dropped once it is written. Returns 0 or
 * KR_EIO (logged; the journal is kept and d->rewrite set to try again).
 */
int kr_dir_manifest_write(struct kr_dirsink *d);
/*
 * Appends the pending journal lines to the manifest and syncs it (or rewrites
 * it whole when that is due). Returns 0 or KR_EIO (logged; lines kept).
 */
int kr_dir_journal_flush(struct kr_dirsink *d);
/* Queues a manifest line ("+" res key path or "-" path). Returns 0 or KR_EIO. */
int kr_dir_journal_add(struct kr_dirsink *d, const char *op, const char *res, const char *key,
		       const char *rel);
/*
 * Reads the manifest into memory. Returns 0 (with *rewrite set if the file
 * should be rewritten: missing, removed entries, bad lines), or an error.
 */
int kr_dir_manifest_load(struct kr_dirsink *d, int *rewrite, char *err, size_t errlen);

#endif /* KR_DIR_MANIFEST_H */
