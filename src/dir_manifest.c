/*
 * The directory sink's name policy and its manifest (dir_manifest.h): the
 * names a file and a target directory may have, the manifest in memory, and
 * the manifest on disk (journal lines appended, rewritten atomically, loaded
 * at start). The file system walk and the objects are sink_dir.c's.
 */
#include "dir_manifest.h"

#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

#define TMP_TRIES 8

/* --- names --------------------------------------------------------------------------- */

static uint32_t hash_add(uint32_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

uint32_t kr_dir_owner_hash(const char *res, const char *key)
{
	return hash_add(hash_add(2166136261u, res) * 16777619u, key);
}

static uint32_t path_hash(const char *path)
{
	return hash_add(2166136261u, path);
}

int kr_dir_has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

const char *kr_dir_bad_name(const char *s, size_t len)
{
	if (len == 0)
		return "empty";
	if (len > KR_DIRSINK_NAME_MAX)
		return "longer than 255 bytes";
	if (strlen(s) != len)
		return "contains a NUL byte";
	if (strchr(s, '/'))
		return "contains '/'";
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return "is '.' or '..'";
	if (strncmp(s, RESERVED_PREFIX, sizeof(RESERVED_PREFIX) - 1) == 0)
		return "starts with the reserved '" RESERVED_PREFIX "'";
	if (kr_dir_has_control(s))
		return "contains a control character";
	return NULL;
}

const char *kr_dir_normalize(const char *src, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	if (src[0] == '/')
		return "is an absolute path";
	while (*src) {
		const char *end = strchr(src, '/');
		size_t len = end ? (size_t)(end - src) : strlen(src);
		char comp[KR_DIRSINK_NAME_MAX + 1];
		const char *why;

		if (len == 0 || (len == 1 && src[0] == '.')) {
			src += len + (end ? 1 : 0);
			continue;
		}
		if (len == 2 && src[0] == '.' && src[1] == '.')
			return "contains a '..' component";
		if (len > KR_DIRSINK_NAME_MAX)
			return "has a component longer than 255 bytes";
		memcpy(comp, src, len);
		comp[len] = '\0';
		why = kr_dir_bad_name(comp, len);
		if (why)
			return why;
		if (n + (n ? 1 : 0) + len + 1 > size)
			return "is too long";
		if (n)
			out[n++] = '/';
		memcpy(out + n, comp, len + 1);
		n += len;
		src += len + (end ? 1 : 0);
	}
	return NULL;
}

int kr_dir_good_rel(const char *rel)
{
	char norm[KR_DIRSINK_PATH_MAX];

	return rel[0] && !kr_dir_normalize(rel, norm, sizeof(norm)) && strcmp(norm, rel) == 0;
}

int kr_dir_join(char *out, size_t size, const char *a, const char *b)
{
	int n = a[0] ? kr_snprintf(out, size, "%s/%s", a, b) : kr_snprintf(out, size, "%s", b);

	return n < 0 || (size_t)n >= size ? KR_ETOOBIG : 0;
}

void kr_dir_dirname(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n >= size)
		n = size - 1;
	memcpy(out, path, n);
	out[n] = '\0';
}

const char *kr_dir_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

const char *kr_dir_printable(char *out, size_t size, const char *s, size_t len)
{
	size_t i, n = 0, max = size > 4 ? size - 4 : 0;

	for (i = 0; i < len && n < max && i < 64; i++) {
		unsigned char c = (unsigned char)s[i];

		out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (i < len && size >= 4) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

const char *kr_dir_short_path(char (*out)[SHOWN_PATH], const char *path)
{
	size_t len = strlen(path), head = (SHOWN_PATH - 4) / 3, tail = SHOWN_PATH - 4 - head;

	if (len < SHOWN_PATH)
		return path;
	memcpy(*out, path, head);
	memcpy(*out + head, "...", 3);
	memcpy(*out + head + 3, path + len - tail, tail + 1);
	return *out;
}

/* --- the manifest in memory ------------------------------------------------------------ */

const char *kr_dir_entry_res(const struct kr_dirsink *d, const struct kr_dirsink_entry *e)
{
	return d->names + e->off;
}

const char *kr_dir_entry_key(const struct kr_dirsink *d, const struct kr_dirsink_entry *e)
{
	const char *r = kr_dir_entry_res(d, e);

	return r + strlen(r) + 1;
}

const char *kr_dir_entry_path(const struct kr_dirsink *d, const struct kr_dirsink_entry *e)
{
	const char *k = kr_dir_entry_key(d, e);

	return k + strlen(k) + 1;
}

int kr_dir_owned_by(const struct kr_dirsink *d, const struct kr_dirsink_entry *e, uint32_t oh,
		    const char *res, const char *key)
{
	return !(e->flags & F_DEAD) && e->owner_hash == oh && strcmp(kr_dir_entry_res(d, e), res) == 0 &&
	       strcmp(kr_dir_entry_key(d, e), key) == 0;
}

struct kr_dirsink_entry *kr_dir_find_path(struct kr_dirsink *d, const char *rel)
{
	uint32_t h = path_hash(rel);
	size_t i;

	for (i = 0; i < d->nentries; i++) {
		struct kr_dirsink_entry *e = &d->entries[i];

		if (!(e->flags & F_DEAD) && e->path_hash == h && strcmp(kr_dir_entry_path(d, e), rel) == 0)
			return e;
	}
	return NULL;
}

void kr_dir_drop_entry(struct kr_dirsink *d, struct kr_dirsink_entry *e)
{
	e->flags |= F_DEAD;
	d->nlive--;
	d->names_garbage += e->len;
}

/* Slides the live entries and their names down over the dead ones. */
static void compact_names(struct kr_dirsink *d)
{
	size_t i, j = 0, used = 0;

	for (i = 0; i < d->nentries; i++) {
		struct kr_dirsink_entry e = d->entries[i];

		if (e.flags & F_DEAD)
			continue;
		memmove(d->names + used, d->names + e.off, e.len);
		e.off = (uint32_t)used;
		used += e.len;
		d->entries[j++] = e;
	}
	d->nentries = j;
	d->names_used = used;
	d->names_garbage = 0;
}

struct kr_dirsink_entry *kr_dir_add_entry(struct kr_dirsink *d, const char *res, const char *key,
					  const char *rel, uint32_t flags)
{
	size_t lr = strlen(res) + 1, lk = strlen(key) + 1, lp = strlen(rel) + 1;
	size_t need = lr + lk + lp;
	struct kr_dirsink_entry *e;

	if (d->nlive >= d->max_files)
		return NULL;
	/*
	 * Also as soon as the dead outweigh the live: a long run of changes
	 * would otherwise walk through the whole (static) manifest before the
	 * first compaction and leave every page of it resident (make soak).
	 */
	if (d->nentries == KR_DIRSINK_MAX_FILES || d->names_used + need > sizeof(d->names) ||
	    d->nentries - d->nlive > d->nlive + 64 ||
	    d->names_garbage > d->names_used - d->names_garbage + 4096)
		compact_names(d);
	if (d->nentries == KR_DIRSINK_MAX_FILES || d->names_used + need > sizeof(d->names))
		return NULL;
	e = &d->entries[d->nentries++];
	e->off = (uint32_t)d->names_used;
	e->len = (uint32_t)need;
	memcpy(d->names + d->names_used, res, lr);
	memcpy(d->names + d->names_used + lr, key, lk);
	memcpy(d->names + d->names_used + lr + lk, rel, lp);
	d->names_used += need;
	e->owner_hash = kr_dir_owner_hash(res, key);
	e->path_hash = path_hash(rel);
	e->stamp = d->stamp;
	e->flags = flags;
	d->nlive++;
	return e;
}

/* --- the manifest on disk --------------------------------------------------------------- */

static int manifest_path(const struct kr_dirsink *d, char *out, size_t size)
{
	return kr_dir_join(out, size, d->root, KR_DIRSINK_MANIFEST);
}

/* Appends one line of fields (tab-separated) to buf[*len..size); 0 or KR_ENOSPC. */
static int put_line(char *buf, size_t *len, size_t size, const char *const *fields, int n)
{
	size_t at = *len;
	int i;

	for (i = 0; i < n; i++) {
		size_t l = strlen(fields[i]);

		if (at + l + 1 > size)
			return KR_ENOSPC;
		memcpy(buf + at, fields[i], l);
		at += l;
		buf[at++] = i + 1 < n ? '\t' : '\n';
	}
	*len = at;
	return 0;
}

int kr_dir_create_tmp(struct kr_dirsink *d, int dirfd, const char *base, unsigned mode,
		      char *tmp, size_t size)
{
	int i, fd = KR_EINVAL;

	for (i = 0; i < TMP_TRIES && fd == KR_EINVAL; i++) {
		int n = kr_snprintf(tmp, size, TMP_PREFIX "%.200s-%lu", base, d->tmp_seq++);

		if (n < 0 || (size_t)n >= size)
			return KR_ETOOBIG;
		fd = kr_port_fs_create_at(dirfd, tmp, mode);
	}
	return fd;
}

int kr_dir_finish_tmp(int dirfd, int fd, const char *tmp, const void *buf, size_t len, int sync)
{
	int r = kr_port_fs_write(fd, buf, len);

	if (r == 0 && sync)
		r = kr_port_fs_sync(fd);
	if (kr_port_fs_close(fd) < 0 && r == 0)
		r = KR_EIO;
	if (r < 0)
		kr_port_fs_unlink_at(dirfd, tmp);
	return r;
}

int kr_dir_manifest_write(struct kr_dirsink *d)
{
	char path[KR_DIRSINK_PATH_MAX], tmp[KR_DIRSINK_NAME_MAX + 1];
	const char *header = KR_DIRSINK_MANIFEST_HEADER "\n";
	size_t i, len;
	int fd, r = 0;

	d->rewrite = 1;
	if (manifest_path(d, path, sizeof(path)) < 0)
		return KR_EIO;
	fd = kr_dir_create_tmp(d, d->rootfd, "manifest", KR_DIRSINK_MANIFEST_MODE, tmp, sizeof(tmp));
	if (fd < 0) {
		kr_log(KR_LOG_ERROR, "unable to write %s: %s", path,
		       fd == KR_EINVAL ? "no free temporary file name" : kr_port_fs_error());
		return KR_EIO;
	}
	len = strlen(header);
	memcpy(d->chunk, header, len);
	for (i = 0; i < d->nentries && r == 0; i++) {
		const struct kr_dirsink_entry *e = &d->entries[i];
		const char *f[4];

		if (e->flags & F_DEAD)
			continue;
		f[0] = "+";
		f[1] = kr_dir_entry_res(d, e);
		f[2] = kr_dir_entry_key(d, e);
		f[3] = kr_dir_entry_path(d, e);
		if (put_line(d->chunk, &len, sizeof(d->chunk), f, 4) == 0)
			continue;
		r = kr_port_fs_write(fd, d->chunk, len);
		len = 0;
		if (r == 0 && put_line(d->chunk, &len, sizeof(d->chunk), f, 4) < 0)
			r = KR_EIO;  /* cannot happen: the chunk holds a longest line */
	}
	if (r < 0) {
		kr_port_fs_close(fd);
		kr_port_fs_unlink_at(d->rootfd, tmp);
	} else {
		/* Always durable before the rename, also in batch mode: it is the record of ownership. */
		r = kr_dir_finish_tmp(d->rootfd, fd, tmp, d->chunk, len, 1);
	}
	if (r == 0 && kr_port_fs_rename_at(d->rootfd, tmp, d->rootfd, KR_DIRSINK_MANIFEST) < 0) {
		kr_port_fs_unlink_at(d->rootfd, tmp);
		r = KR_EIO;
	}
	if (r == 0)
		r = kr_port_fs_sync(d->rootfd);
	if (r < 0) {
		kr_log(KR_LOG_ERROR, "unable to write %s: %s", path, kr_port_fs_error());
		return KR_EIO;
	}
	d->rewrite = 0;
	d->jlen = 0;
	d->jlines = 0;
	d->manifest_lines = d->nlive;
	return 0;
}

int kr_dir_journal_flush(struct kr_dirsink *d)
{
	char path[KR_DIRSINK_PATH_MAX];
	int fd, r;

	if (d->rewrite)
		return kr_dir_manifest_write(d);
	if (d->jlen == 0)
		return 0;
	if (manifest_path(d, path, sizeof(path)) < 0)
		return KR_EIO;
	fd = kr_port_fs_open_append_at(d->rootfd, KR_DIRSINK_MANIFEST);
	if (fd == KR_ENOENT)
		return kr_dir_manifest_write(d);  /* removed under us: write it whole */
	if (fd < 0) {
		kr_log(KR_LOG_ERROR, "unable to append to %s: %s", path, kr_port_fs_error());
		return KR_EIO;
	}
	r = kr_port_fs_write(fd, d->journal, d->jlen);
	/* Batch mode: the flush's sync makes the lines durable before any file they own appears. */
	if (r == 0 && !d->batch)
		r = kr_port_fs_sync(fd);
	if (r == 0 && d->batch)
		d->unsynced = 1;
	if (kr_port_fs_close(fd) < 0 && r == 0)
		r = KR_EIO;
	if (r < 0) {
		/* Part of the lines may be in: a whole rewrite is the way back to a known state. */
		kr_log(KR_LOG_ERROR, "unable to append to %s: %s", path, kr_port_fs_error());
		d->rewrite = 1;
		return KR_EIO;
	}
	d->manifest_lines += d->jlines;
	d->jlen = 0;
	d->jlines = 0;
	/* Keeps the journal under twice the live entries: amortised O(1) per change. */
	if (d->manifest_lines > 2 * d->nlive + 64)
		return kr_dir_manifest_write(d);
	return 0;
}

int kr_dir_journal_add(struct kr_dirsink *d, const char *op, const char *res, const char *key,
		       const char *rel)
{
	const char *f[4];
	int n = 0;

	f[n++] = op;
	if (res) {
		f[n++] = res;
		f[n++] = key;
	}
	f[n++] = rel;
	if (put_line(d->journal, &d->jlen, sizeof(d->journal), f, n) < 0) {
		if (kr_dir_journal_flush(d) < 0)
			return KR_EIO;
		if (put_line(d->journal, &d->jlen, sizeof(d->journal), f, n) < 0)
			return KR_EIO;
	}
	d->jlines++;
	return 0;
}

/* Applies one manifest line at load. Returns 0, or -1 if the line is not one. */
static int load_line(struct kr_dirsink *d, char *line)
{
	char *f[4];
	int n = 0;

	f[n++] = line;
	for (; *line; line++) {
		if (*line != '\t')
			continue;
		if (n == 4)
			return -1;
		*line = '\0';
		f[n++] = line + 1;
	}
	if (n == 2 && strcmp(f[0], "-") == 0) {
		struct kr_dirsink_entry *e = kr_dir_find_path(d, f[1]);

		if (e)
			kr_dir_drop_entry(d, e);
		return 0;
	}
	if (n != 4 || strcmp(f[0], "+") != 0)
		return -1;
	if (!f[1][0] || strlen(f[1]) >= KR_DIRSINK_RES_MAX || kr_dir_has_control(f[1]))
		return -1;
	if (!f[2][0] || strlen(f[2]) >= KR_KEY_MAX || kr_dir_has_control(f[2]) || !kr_dir_good_rel(f[3]))
		return -1;
	{
		struct kr_dirsink_entry *e = kr_dir_find_path(d, f[3]);

		if (e)
			kr_dir_drop_entry(d, e);
	}
	if (!kr_dir_add_entry(d, f[1], f[2], f[3], 0)) {
		kr_log(KR_LOG_ERROR, "unable to load the manifest entry of %s: the manifest is full "
		       "(%d files); kreflect will not remove that file", f[3],
		       (int)KR_DIRSINK_MAX_FILES);
		d->stats.errors++;
	}
	return 0;
}

int kr_dir_manifest_load(struct kr_dirsink *d, int *rewrite, char *err, size_t errlen)
{
	char path[KR_DIRSINK_PATH_MAX];
	size_t ll = 0, lines = 0, bad = 0, total = 0, max = d->max_files, j;
	int fd, overlong = 0, header = 0;
	long n;

	if (manifest_path(d, path, sizeof(path)) < 0) {
		kr_snprintf(err, errlen, "unable to use %s: the path is too long", d->root);
		return KR_EINVAL;
	}
	fd = kr_port_fs_open_read_at(d->rootfd, KR_DIRSINK_MANIFEST);
	if (fd == KR_ENOENT) {
		*rewrite = 1;
		return 0;
	}
	if (fd < 0) {
		kr_snprintf(err, errlen, "unable to read %s: %s", path,
			 fd == KR_EINVAL ? "not a regular file" : kr_port_fs_error());
		return fd == KR_EINVAL ? KR_EINVAL : KR_EIO;
	}
	/* The journal's history may pass this run's bound; only what is left counts. */
	d->max_files = KR_DIRSINK_MAX_FILES;
	while ((n = kr_port_fs_read(fd, d->chunk, sizeof(d->chunk))) > 0) {
		long i;

		total += (size_t)n;
		for (i = 0; i < n; i++) {
			char c = d->chunk[i];

			if (c != '\n') {
				if (ll < KR_DIRSINK_LINE_MAX)
					d->buf[ll++] = c;
				else
					overlong = 1;
				continue;
			}
			d->buf[ll] = '\0';
			if (!header) {
				if (strcmp(d->buf, KR_DIRSINK_MANIFEST_HEADER) != 0) {
					kr_port_fs_close(fd);
					d->max_files = max;
					kr_snprintf(err, errlen, "unable to read %s: not a kreflect "
						 "manifest (first line is not \"%s\")", path,
						 KR_DIRSINK_MANIFEST_HEADER);
					return KR_EPROTO;
				}
				header = 1;
			} else if (overlong || load_line(d, d->buf) < 0) {
				bad++;
			} else {
				lines++;
			}
			ll = 0;
			overlong = 0;
		}
	}
	kr_port_fs_close(fd);
	d->max_files = max;
	if (n < 0) {
		kr_snprintf(err, errlen, "unable to read %s: %s", path, kr_port_fs_error());
		return KR_EIO;
	}
	if (!header && total > 0) {
		/* Never written by kreflect, whose first write of it is whole and renamed. */
		kr_snprintf(err, errlen, "unable to read %s: not a kreflect manifest", path);
		return KR_EPROTO;
	}
	for (j = d->nentries; j-- > 0 && d->nlive > max;) {
		struct kr_dirsink_entry *e = &d->entries[j];

		if (e->flags & F_DEAD)
			continue;
		kr_log(KR_LOG_ERROR, "unable to keep the manifest entry of %s: the manifest is full "
		       "(%zu files); kreflect will not remove that file", kr_dir_entry_path(d, e), max);
		d->stats.errors++;
		kr_dir_drop_entry(d, e);
		*rewrite = 1;
	}
	if (ll > 0 || overlong)
		bad++;  /* a last line cut by a crash during an append */
	if (bad)
		kr_log(KR_LOG_WARN, "%s: ignored %zu unreadable lines", path, bad);
	if (bad || !header || lines != d->nlive)
		*rewrite = 1;
	d->manifest_lines = lines;
	return 0;
}
