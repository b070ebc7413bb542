#include "state.h"

#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "reflector.h"
#include "store.h"

#define MAGIC "KRSTATE\n"
#define JMAGIC "KRJOURN\n"
#define DIR_MODE 0700u
#define FILE_MODE 0600u               /* Secrets may be in it */
#define REC_RES 'R'
#define REC_OBJ 'O'
#define REC_END 'E'
#define REC_DEL 'D'
#define REC_COMMIT 'C'
#define REC_HIST 'H'
#define HIST_HEAD 16u                 /* type kind rvlen 0 res keylen seq */
#define HIST_KINDS 4u                 /* the ring's added, modified, deleted, mark */
#define DEL_HEAD 6u                   /* type 0 res keylen */
#define RES_HEAD 16u                  /* type rvlen res count gap */
#define OBJ_HEAD 12u                  /* type rvlen uidlen held res keylen objlen */
#define RETRY_MS 1000                 /* a relist in progress: look again soon */

/* --- encoding -------------------------------------------------------------------- */

static void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, v);
	put16(p + 2, v >> 16);
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get16(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t get32(const unsigned char *p)
{
	return get16(p) | get16(p + 2) << 16;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

uint32_t kr_state_crc32(uint32_t crc, const void *p, size_t n)
{
	/* Half-byte table: 64 bytes of constants instead of 1 KiB. */
	static const uint32_t t[16] = {
		0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
		0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
		0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
	};
	const unsigned char *b = p;

	crc = ~crc;
	while (n--) {
		crc ^= *b++;
		crc = (crc >> 4) ^ t[crc & 15];
		crc = (crc >> 4) ^ t[crc & 15];
	}
	return ~crc;
}

void kr_state_header(unsigned char *out, uint32_t version, uint32_t nres, uint64_t config,
		     int64_t written_s, uint64_t gen)
{
	memcpy(out, MAGIC, 8);
	put32(out + 8, version);
	put32(out + 12, nres);
	put64(out + 16, config);
	put64(out + 24, (uint64_t)written_s);
	put64(out + 32, gen);
	put32(out + 40, kr_state_crc32(0, out, 40));
}

void kr_state_journal_header(unsigned char *out, uint32_t version, uint64_t config, uint64_t gen)
{
	memcpy(out, JMAGIC, 8);
	put32(out + 8, version);
	put64(out + 12, config);
	put64(out + 20, gen);
	put32(out + 28, kr_state_crc32(0, out, 28));
}

/* FNV-1a 64 of a string, continued (with a separator, so "ab","c" != "a","bc"). */
static uint64_t hash_str(uint64_t h, const char *s)
{
	for (;; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
		if (!*s)
			return h;
	}
}

static uint64_t hash_int(uint64_t h, long v)
{
	char num[24];

	kr_snprintf(num, sizeof(num), "%ld", v);
	return hash_str(h, num);
}

/* What the mirror depends on; anything else (sinks, timeouts) may change freely. */
static uint64_t config_hash(const struct kr_reflect *top)
{
	uint64_t h = 0xcbf29ce484222325ull;
	int i;

	/* Version 1's, whatever is written now: a state directory of version 1 stays this
	 * configuration's (the version is in the header, checked on its own). */
	h = hash_int(h, 1);
	h = hash_str(h, top->conn_cfg.host);
	h = hash_int(h, top->conn_cfg.port);
	h = hash_int(h, top->opts.keep_managed_fields);
	h = hash_int(h, top->nrefl);
	for (i = 0; i < top->nrefl; i++) {
		const struct kr_resource *r = &top->refl[i].res;

		h = hash_str(h, r->group);
		h = hash_str(h, r->version);
		h = hash_str(h, r->plural);
		h = hash_int(h, r->namespaced);
		h = hash_int(h, r->all_namespaces);
		h = hash_str(h, r->all_namespaces ? "" : r->ns);
		h = hash_str(h, r->label_selector);
		h = hash_str(h, r->field_selector);
	}
	return h;
}

static void sum_not_held(void *arg, const struct kr_store_view *v)
{
	if (!v->held)
		*(uint64_t *)arg += hash_str(hash_str(hash_int(0xcbf29ce484222325ull, v->res), v->key), v->rv);
}

/*
 * A sum over the objects present but not held (key and resourceVersion),
 * independent of their order. Their changes reach no sink (the outputs
 * never had them), so the journal, which writes what the events named,
 * cannot carry them: when this sum moved since the last write, the next
 * write is a snapshot. 0 when there are none, without a walk.
 */
static uint64_t not_held_sum(const struct kr_store *s)
{
	uint64_t sum = 0;

	if (s->not_held > 0)
		kr_store_foreach(s, -1, sum_not_held, &sum);
	return sum;
}

/* --- setup ------------------------------------------------------------------------- */

static void on_timer(struct kr_loop *loop, struct kr_timer *t);

void kr_state_opts_default(struct kr_state_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->dir = KR_STATE_DIR_DEFAULT;
	o->interval_ms = 60000;
	o->max_stale_s = -1;
}

int kr_state_init(struct kr_state *st, struct kr_reflect *top, struct kr_loop *loop,
		  const struct kr_state_opts *o, char *why, size_t size)
{
	struct kr_fs_stat fs;
	size_t n;
	int r;

	kr_port_zero(st, sizeof(*st));
	st->o = *o;
	st->top = top;
	st->fd = -1;
	st->commit.fd = -1;
	st->timer.fire = on_timer;
	st->timer.arg = st;
	(void)loop;
	n = strlen(o->dir ? o->dir : "");
	if (n == 0 || n >= sizeof(st->dir)) {
		kr_snprintf(why, size, "%s", n ? "the path is too long" : "no directory");
		return KR_ETOOBIG;
	}
	memcpy(st->dir, o->dir, n + 1);
	kr_snprintf(st->path, sizeof(st->path), "%s/state", st->dir);
	kr_snprintf(st->tmp, sizeof(st->tmp), "%s/state.tmp", st->dir);
	kr_snprintf(st->jpath, sizeof(st->jpath), "%s/journal", st->dir);
	st->config = config_hash(top);
	r = kr_port_fs_mkdir(st->dir, DIR_MODE);
	if (r == 1) {
		if (kr_port_fs_is_dir(st->dir) != 0) {
			kr_snprintf(why, size, "unable to use %s: not a directory", st->dir);
			return KR_EIO;
		}
	} else if (r < 0) {
		kr_snprintf(why, size, "unable to create %s: %s", st->dir, kr_port_fs_error());
		return KR_EIO;
	}
	/* A snapshot cut short by a power cut is never read: remove it. */
	if (kr_port_fs_stat(st->tmp, &fs) == 0 && fs.type == KR_FS_FILE)
		kr_port_fs_unlink(st->tmp);
	return 0;
}

/* --- reading ------------------------------------------------------------------------ */

/* Exactly n bytes into dst (NULL: skipped) through the buffer; KR_EINVAL at a short file. */
static int rd(struct kr_state *st, void *dst, size_t n)
{
	unsigned char *d = dst;

	while (n > 0) {
		size_t take;

		if (st->pos == st->len) {
			long got = kr_port_fs_read(st->fd, st->buf, sizeof(st->buf));

			if (got < 0)
				return KR_EIO;
			if (got == 0) {
				st->short_read = 1;
				return KR_EINVAL;
			}
			st->len = (size_t)got;
			st->pos = 0;
			st->total += (uint64_t)got;
		}
		take = st->len - st->pos < n ? st->len - st->pos : n;
		if (d) {
			memcpy(d, st->buf + st->pos, take);
			d += take;
		}
		st->crc = kr_state_crc32(st->crc, st->buf + st->pos, take);
		st->pos += take;
		n -= take;
	}
	return 0;
}

/* The record's CRC, after its bytes were read with rd(). */
static int rd_crc(struct kr_state *st)
{
	uint32_t want = st->crc;
	unsigned char c[4];
	int r = rd(st, c, 4);

	if (r < 0)
		return r;
	return get32(c) == want ? 0 : KR_EINVAL;
}

/* Empties the store again (its quotas stay): nothing of a bad snapshot is kept. */
static void store_reset(struct kr_store *s)
{
	size_t quota[KR_MAX_RESOURCES];

	memcpy(quota, s->quota, sizeof(quota));
	kr_store_init(s, s->arena, s->size, s->entries, s->max_entries, s->buckets, s->nbuckets,
		      s->reserve);
	memcpy(s->quota, quota, sizeof(quota));
}

struct res_rec {
	char rv[KR_RV_MAX];
	uint32_t count;
	uint32_t got;
	int64_t gap_ms;
};

/* HISTORY: a pass that only gives the history records back (the rest as CHECK). */
enum { SNAPSHOT, CHECK, APPLY, HISTORY };

/* Where reading is in the file. */
static uint64_t at(const struct kr_state *st)
{
	return st->total - (st->len - st->pos);
}

/*
 * Reads one object record: into the store as a new key (SNAPSHOT), only
 * checked with its bytes skipped (CHECK), or over what the store holds
 * (APPLY, a journal's). *what names the problem.
 */
static int load_object(struct kr_state *st, int nres, struct res_rec *rr, int mode, const char **what)
{
	struct kr_store *s = st->top->store;
	unsigned char h[OBJ_HEAD - 1];
	char key[KR_KEY_MAX], rv[KR_RV_MAX], uid[KR_RV_MAX];
	uint32_t rvlen, uidlen, held, res, keylen, objlen;
	char *obj = NULL;
	size_t cap = 0;
	int r;

	if ((r = rd(st, h, sizeof(h))) < 0)
		return r;
	rvlen = h[0];
	uidlen = h[1];
	held = h[2];
	res = get16(h + 3);
	keylen = get16(h + 5);
	objlen = get32(h + 7);
	*what = "an object record out of bounds";
	if (res >= (uint32_t)nres || keylen == 0 || keylen >= KR_KEY_MAX || rvlen == 0 ||
	    rvlen >= KR_RV_MAX || uidlen >= KR_RV_MAX || held > 1 || (!held && objlen) ||
	    objlen > KR_MAX_OBJECT_BYTES || (mode == SNAPSHOT && rr[res].got >= rr[res].count))
		return KR_EINVAL;
	if ((r = rd(st, key, keylen)) < 0 || (r = rd(st, rv, rvlen)) < 0 || (r = rd(st, uid, uidlen)) < 0)
		return r;
	key[keylen] = rv[rvlen] = uid[uidlen] = '\0';
	*what = "a key, resourceVersion or uid with a NUL byte";
	if (strlen(key) != keylen || strlen(rv) != rvlen || strlen(uid) != uidlen)
		return KR_EINVAL;
	if (held && mode == CHECK) {
		if ((r = rd(st, NULL, objlen)) < 0)
			return r;
	} else if (held) {
		obj = kr_store_scratch(s, objlen, &cap);
		*what = "more objects than the arena holds";
		if (!obj || cap < objlen)
			return KR_ENOSPC;
		if ((r = rd(st, obj, objlen)) < 0)
			return r;
	}
	*what = "a record checksum";
	if ((r = rd_crc(st)) < 0)
		return r;
	if (mode == CHECK)
		return 0;
	r = kr_store_put(s, (int)res, key, keylen, rv, uid, obj, objlen, 0, NULL);
	*what = "an object twice, or more than the store holds";
	if (mode == APPLY)
		return r < 0 ? r : 0;
	if (r != (held ? KR_STORE_ADDED : KR_STORE_NOT_HELD))
		return r < 0 ? r : KR_EINVAL;
	rr[res].got++;
	return 0;
}

/* A resource record (type byte read): checked, and kept in rr[] unless CHECK. */
static int load_res(struct kr_state *st, struct res_rec *rr, uint32_t nres, int mode, uint32_t want)
{
	unsigned char b[RES_HEAD - 1];
	char rv[KR_RV_MAX];
	uint32_t rvlen, res;
	int64_t gap;
	int r;

	if ((r = rd(st, b, sizeof(b))) < 0)
		return r;
	rvlen = b[0];
	res = get16(b + 1);
	gap = (int64_t)get64(b + 7);
	if (res >= nres || (mode == SNAPSHOT && res != want) || rvlen >= KR_RV_MAX ||
	    gap < 0 || gap > 86400000)
		return KR_EINVAL;
	if ((r = rd(st, rv, rvlen)) < 0)
		return r;
	rv[rvlen] = '\0';
	if ((r = rd_crc(st)) < 0)
		return r;
	if (strlen(rv) != rvlen)
		return KR_EINVAL;
	if (mode == CHECK)
		return 0;
	memcpy(rr[res].rv, rv, rvlen + 1);
	rr[res].gap_ms = gap;
	if (mode == SNAPSHOT)
		rr[res].count = get32(b + 3);
	return 0;
}

/* A journal's delete record (type byte read). */
static int load_delete(struct kr_state *st, uint32_t nres, int mode)
{
	unsigned char h[DEL_HEAD - 1];
	char key[KR_KEY_MAX];
	uint32_t res, keylen;
	int r;

	if ((r = rd(st, h, sizeof(h))) < 0)
		return r;
	res = get16(h + 1);
	keylen = get16(h + 3);
	if (h[0] || res >= nres || keylen == 0 || keylen >= KR_KEY_MAX)
		return KR_EINVAL;
	if ((r = rd(st, key, keylen)) < 0)
		return r;
	key[keylen] = '\0';
	if ((r = rd_crc(st)) < 0)
		return r;
	if (strlen(key) != keylen)
		return KR_EINVAL;
	if (mode == APPLY)
		kr_store_delete(st->top->store, (int)res, key, keylen, NULL);
	return 0;
}

/* A history record (type byte read): checked, and given back in a HISTORY pass. */
static int load_hist(struct kr_state *st, uint32_t nres, int mode)
{
	unsigned char h[HIST_HEAD - 1];
	char key[KR_KEY_MAX], rv[KR_RV_MAX];
	uint32_t kind, rvlen, res, keylen;
	uint64_t seq;
	int r;

	if (st->version < 2)
		return KR_EINVAL;      /* version 1 has none: not a file this code wrote */
	if ((r = rd(st, h, sizeof(h))) < 0)
		return r;
	kind = h[0];
	rvlen = h[1];
	res = get16(h + 3);
	keylen = get16(h + 5);
	seq = get64(h + 7);
	if (kind >= HIST_KINDS || h[2] || res >= nres || rvlen >= KR_RV_MAX || keylen >= KR_KEY_MAX ||
	    (keylen == 0) != (kind == HIST_KINDS - 1))
		return KR_EINVAL;
	if ((r = rd(st, key, keylen)) < 0 || (r = rd(st, rv, rvlen)) < 0 || (r = rd_crc(st)) < 0)
		return r;
	key[keylen] = rv[rvlen] = '\0';
	if (strlen(key) != keylen || strlen(rv) != rvlen)
		return KR_EINVAL;
	if (mode == HISTORY && st->hist) {
		st->hist->add(st->hist->arg, seq, (int)res, (int)kind, key, rv);
		st->hist_next = seq + 1;
		st->hist_restored++;
	}
	return 0;
}

/*
 * Reads journal groups after its header. CHECK: finds where the last whole
 * group ends (*good_end) and how many there are, stopping at the first bad
 * or cut record (a group without its commit never counts). APPLY: applies
 * every record before end. Returns 0 or a negative KR_E code (APPLY).
 */
static int journal_pass(struct kr_state *st, struct res_rec *rr, uint32_t nres, int mode,
			uint64_t end, uint64_t *good_end, unsigned long *groups)
{
	const char *what;
	uint32_t nrec = 0;
	int r;

	for (;;) {
		unsigned char type, c[7];

		if (mode != CHECK && at(st) >= end)
			return 0;
		st->crc = 0;
		if ((r = rd(st, &type, 1)) < 0)
			return mode == CHECK ? 0 : r;
		if (type == REC_OBJ)
			r = load_object(st, (int)nres, rr, mode == HISTORY ? CHECK : mode, &what);
		else if (type == REC_RES)
			r = load_res(st, rr, nres, mode == HISTORY ? CHECK : mode, 0);
		else if (type == REC_DEL)
			r = load_delete(st, nres, mode == HISTORY ? CHECK : mode);
		else if (type == REC_HIST)
			r = load_hist(st, nres, mode);
		else if (type == REC_COMMIT && (r = rd(st, c, sizeof(c))) == 0 &&
			 (r = rd_crc(st)) == 0 && !c[0] && !c[1] && !c[2] && get32(c + 3) == nrec) {
			nrec = 0;
			if (mode == CHECK) {
				*good_end = at(st);
				(*groups)++;
			}
			continue;
		} else
			r = KR_EINVAL;
		if (r < 0)
			return mode == CHECK ? 0 : r;
		nrec++;
	}
}

/* Opens the journal for reading and checks its header. 1 if it follows this snapshot. */
static int journal_open(struct kr_state *st)
{
	unsigned char h[KR_STATE_JOURNAL_HEADER_BYTES];

	st->len = st->pos = 0;
	st->total = 0;
	st->fd = kr_port_fs_open_read(st->jpath);
	if (st->fd < 0) {
		st->fd = -1;
		return 0;
	}
	st->crc = 0;
	if (rd(st, h, 28) < 0 || rd_crc(st) < 0 || memcmp(h, JMAGIC, 8) != 0 ||
	    get32(h + 8) != st->version || get64(h + 12) != st->config || get64(h + 20) != st->gen)
		return 0;
	return 1;
}

static void journal_close(struct kr_state *st)
{
	if (st->fd >= 0)
		kr_port_fs_close(st->fd);
	st->fd = -1;
}

/*
 * After the snapshot: the journal's whole groups, if it follows this
 * snapshot. Returns 0 (applied, or nothing to apply) or a negative KR_E code.
 */
static int load_journal(struct kr_state *st, struct res_rec *rr, uint32_t nres, int mode)
{
	uint64_t good_end = 0;
	unsigned long groups = 0;
	int r;

	if (mode == HISTORY) {
		if (!st->replayed_groups)
			return 0;
	} else {
		st->journal_ok = 1;
		st->journal_exists = 0;
	}
	if (!journal_open(st)) {
		journal_close(st);
		return 0;
	}
	journal_pass(st, rr, nres, CHECK, 0, &good_end, &groups);
	journal_close(st);
	st->short_read = 0;
	if (groups == 0)
		return 0;
	/* Read again, applying: the first pass proved every record up to good_end whole. */
	if (!journal_open(st)) {
		journal_close(st);
		return KR_EIO;
	}
	r = journal_pass(st, rr, nres, mode, good_end, NULL, NULL);
	journal_close(st);
	if (mode == HISTORY)
		return r;
	st->replayed_groups = groups;
	st->loaded_bytes += good_end;
	/* The next write folds the journal into a new snapshot. */
	st->journal_ok = 0;
	return r;
}

static int load_file(struct kr_state *st, struct res_rec *rr, int mode, const char **what)
{
	struct kr_reflect *top = st->top;
	unsigned char h[KR_STATE_HEADER_BYTES];
	uint32_t nres, i, total = 0, loaded = 0;
	int r;

	*what = "a short header";
	st->crc = 0;
	if ((r = rd(st, h, 40)) < 0)
		return r;
	if ((r = rd_crc(st)) < 0 || memcmp(h, MAGIC, 8) != 0) {
		*what = "not a kreflect state file, or its header is damaged";
		return KR_EINVAL;
	}
	st->version = get32(h + 8);
	if (st->version < 1 || st->version > KR_STATE_VERSION) {
		*what = "another format version";
		return KR_EINVAL;
	}
	if (get64(h + 16) != st->config) {
		*what = "other config";
		return KR_ESTATE;
	}
	nres = get32(h + 12);
	st->written_s = (int64_t)get64(h + 24);
	st->gen = get64(h + 32);
	if (nres != (uint32_t)top->nrefl) {
		*what = "other config";
		return KR_ESTATE;
	}
	for (i = 0; i < nres; i++) {
		unsigned char type;

		*what = "a resource record";
		st->crc = 0;
		if ((r = rd(st, &type, 1)) < 0)
			return r;
		if (type != REC_RES || (r = load_res(st, rr, nres, SNAPSHOT, i)) < 0)
			return r < 0 ? r : KR_EINVAL;
		/* Counts come from the file: checked before they are trusted. */
		if (rr[i].count > top->store->max_entries || total + rr[i].count > top->store->max_entries)
			return KR_EINVAL;
		total += rr[i].count;
	}
	for (;;) {
		unsigned char type;

		st->crc = 0;
		*what = "a truncated file";
		if ((r = rd(st, &type, 1)) < 0)
			return r;
		if (type == REC_END)
			break;
		if (type == REC_HIST) {
			*what = "a history record";
			if ((r = load_hist(st, nres, mode)) < 0)
				return r;
			continue;
		}
		*what = "an unknown record";
		if (type != REC_OBJ)
			return KR_EINVAL;
		if ((r = load_object(st, (int)nres, rr, mode == HISTORY ? CHECK : SNAPSHOT, what)) < 0)
			return r;
		loaded++;
	}
	*what = "the end record";
	if ((r = rd(st, h, 7)) < 0 || (r = rd_crc(st)) < 0)
		return r < 0 ? r : KR_EINVAL;
	if (h[0] || h[1] || h[2] || get32(h + 3) != loaded || loaded != total)
		return KR_EINVAL;
	for (i = 0; i < nres && mode == SNAPSHOT; i++)
		if (rr[i].got != rr[i].count)
			return KR_EINVAL;
	/* Bytes after the end record: not a file this code wrote. */
	*what = "bytes after the end record";
	if (st->pos != st->len || kr_port_fs_read(st->fd, h, 1) != 0)
		return KR_EINVAL;
	st->loaded_objects = loaded;
	return 0;
}

enum kr_state_load kr_state_load(struct kr_state *st)
{
	struct kr_reflect *top = st->top;
	struct res_rec rr[KR_MAX_RESOURCES];
	const char *what = "";
	int i, r, fresh;

	memset(rr, 0, sizeof(rr));
	st->len = st->pos = 0;
	st->total = 0;
	st->short_read = 0;
	st->fd = kr_port_fs_open_read(st->path);
	if (st->fd == KR_ENOENT) {
		st->fd = -1;
		kr_log(KR_LOG_INFO, "state: no snapshot in %s yet; starting with a full sync", st->dir);
		return st->load = KR_STATE_NONE;
	}
	if (st->fd < 0) {
		kr_log(KR_LOG_ERROR, "unable to read the state snapshot %s: %s; starting with a full sync",
		       st->path, st->fd == KR_EINVAL ? "not a regular file" : kr_port_fs_error());
		st->fd = -1;
		return st->load = KR_STATE_UNREADABLE;
	}
	r = load_file(st, rr, SNAPSHOT, &what);
	kr_port_fs_close(st->fd);
	st->fd = -1;
	st->loaded_bytes = st->total;
	st->last_bytes = st->total;
	if (r == 0 && (r = load_journal(st, rr, (uint32_t)top->nrefl, APPLY)) < 0)
		what = "its journal could not be applied";
	if (r < 0) {
		store_reset(top->store);
		st->loaded_objects = 0;
		if (r == KR_ESTATE) {
			kr_log(KR_LOG_WARN, "state: ignoring the snapshot %s: it was written for another "
			       "configuration (server, resources, namespace, selectors or "
			       "--keep-managed-fields differ); starting with a full sync", st->path);
			return st->load = KR_STATE_OTHER_CONFIG;
		}
		if (r == KR_EIO) {
			kr_log(KR_LOG_ERROR, "unable to read the state snapshot %s: %s; starting with a "
			       "full sync", st->path, kr_port_fs_error());
			return st->load = KR_STATE_UNREADABLE;
		}
		if (st->short_read)
			what = "the file ends in the middle of a record (cut short)";
		kr_log(KR_LOG_WARN, "state: ignoring the snapshot %s: %s (at byte %llu); starting "
		       "with a full sync", st->path, what,
		       (unsigned long long)(st->total - (st->len - st->pos)));
		return st->load = KR_STATE_INVALID;
	}
	st->load = KR_STATE_LOADED;
	/* An older version's journal takes no history records: the next write is a snapshot. */
	if (st->version < KR_STATE_VERSION)
		st->journal_ok = 0;
	st->not_held_sum = not_held_sum(top->store);
	fresh = st->o.max_stale_s >= 0 && kr_state_age_s(st) <= st->o.max_stale_s;
	for (i = 0; i < top->nrefl; i++) {
		kr_reflect_restore(top, i, rr[i].rv, rr[i].gap_ms, fresh);
		kr_snprintf(st->saved_rv[i], sizeof(st->saved_rv[i]), "%s", rr[i].rv);
	}
	st->last_objects = st->loaded_objects;
	kr_log(KR_LOG_INFO, "state: restored %zu objects from %s (%llu bytes with %lu journal groups, "
	       "written %lld s ago); a snapshot costs about %llu bytes of flash per write",
	       kr_store_count(top->store, -1), st->path, (unsigned long long)st->loaded_bytes,
	       st->replayed_groups, (long long)kr_state_age_s(st), (unsigned long long)st->last_bytes);
	return st->load = KR_STATE_LOADED;
}

int kr_state_history(struct kr_state *st, const struct kr_state_history *h)
{
	struct res_rec rr[KR_MAX_RESOURCES];
	const char *what;
	int r;

	st->hist = h;
	if (st->load != KR_STATE_LOADED)
		return 0;
	memset(rr, 0, sizeof(rr));
	st->len = st->pos = 0;
	st->total = 0;
	st->fd = kr_port_fs_open_read(st->path);
	if (st->fd < 0) {
		st->fd = -1;
		return KR_EIO;
	}
	r = load_file(st, rr, HISTORY, &what);
	kr_port_fs_close(st->fd);
	st->fd = -1;
	if (r == 0)
		r = load_journal(st, rr, (uint32_t)st->top->nrefl, HISTORY);
	if (r < 0)
		kr_log(KR_LOG_WARN, "state: the relay's change history in %s could not be read again; "
		       "watchers that resume from before this start get 410", st->path);
	else if (st->hist_restored)
		kr_log(KR_LOG_INFO, "state: restored %lu records of the relay's change history",
		       st->hist_restored);
	return r;
}

int64_t kr_state_age_s(const struct kr_state *st)
{
	int64_t now = kr_port_wall_seconds();

	if (st->load != KR_STATE_LOADED || now < st->written_s)
		return 0;
	return now - st->written_s;
}

/* --- writing ------------------------------------------------------------------------ */

static void flush(struct kr_state *st)
{
	if (st->len && !st->err && kr_port_fs_write(st->fd, st->buf, st->len) < 0)
		st->err = KR_EIO;
	st->len = 0;
}

/* Appends p[0..n) to the file through the buffer, into the record's CRC. */
static void wr(struct kr_state *st, const void *p, size_t n)
{
	st->crc = kr_state_crc32(st->crc, p, n);
	st->total += n;
	if (st->len + n > sizeof(st->buf))
		flush(st);
	if (n > sizeof(st->buf)) {
		/* A large object goes straight from the arena. */
		if (!st->err && kr_port_fs_write(st->fd, p, n) < 0)
			st->err = KR_EIO;
		return;
	}
	memcpy(st->buf + st->len, p, n);
	st->len += n;
}

static void wr_crc(struct kr_state *st)
{
	unsigned char c[4];

	put32(c, st->crc);
	wr(st, c, 4);
	st->crc = 0;
}

struct save_ctx {
	struct kr_state *st;
	uint32_t objects;
};

static void save_object(void *arg, const struct kr_store_view *v)
{
	struct save_ctx *c = arg;
	struct kr_state *st = c->st;
	unsigned char h[OBJ_HEAD];
	size_t rvlen = strlen(v->rv), uidlen = strlen(v->uid);

	h[0] = REC_OBJ;
	h[1] = (unsigned char)rvlen;
	h[2] = (unsigned char)uidlen;
	h[3] = (unsigned char)(v->held ? 1 : 0);
	put16(h + 4, (uint32_t)v->res);
	put16(h + 6, (uint32_t)v->keylen);
	put32(h + 8, (uint32_t)(v->held ? v->objlen : 0));
	st->crc = 0;
	wr(st, h, sizeof(h));
	wr(st, v->key, v->keylen);
	wr(st, v->rv, rvlen);
	wr(st, v->uid, uidlen);
	if (v->held)
		wr(st, v->obj, v->objlen);
	wr_crc(st);
	c->objects++;
}

/* One of the ring's records (struct kr_state_history's walk). */
static void save_hist(void *arg, uint64_t seq, int res, int kind, const char *key, size_t keylen,
		      const char *rv, size_t rvlen)
{
	struct save_ctx *c = arg;
	struct kr_state *st = c->st;
	unsigned char h[HIST_HEAD];

	if (res < 0 || res >= st->top->nrefl || kind < 0 || (unsigned)kind >= HIST_KINDS ||
	    keylen >= KR_KEY_MAX || rvlen >= KR_RV_MAX)
		return;                /* not one the load would take: the next starts afresh */
	h[0] = REC_HIST;
	h[1] = (unsigned char)kind;
	h[2] = (unsigned char)rvlen;
	h[3] = 0;
	put16(h + 4, (uint32_t)res);
	put16(h + 6, (uint32_t)keylen);
	put64(h + 8, seq);
	st->crc = 0;
	wr(st, h, sizeof(h));
	wr(st, key, keylen);
	wr(st, rv, rvlen);
	wr_crc(st);
	c->objects++;
}

/* The ring's records from st->hist_next on (all of them: 0); returns how many. */
static uint32_t wr_history(struct kr_state *st, uint64_t from)
{
	struct save_ctx c = { st, 0 };

	if (st->hist)
		st->hist_next = st->hist->walk(st->hist->arg, from, save_hist, &c);
	return c.objects;
}

/* Nonzero when resource r's store entries are exactly its state at its last_rv. */
static int consistent(const struct kr_reflector *r)
{
	return r->synced && !r->listing && r->last_rv[0];
}

static int changed_rv(const struct kr_state *st)
{
	int i;

	for (i = 0; i < st->top->nrefl; i++)
		if (strcmp(st->saved_rv[i], st->top->refl[i].last_rv) != 0)
			return 1;
	return 0;
}

static void wr_res_records(struct kr_state *st)
{
	struct kr_reflect *top = st->top;
	int i;

	for (i = 0; i < top->nrefl; i++) {
		const struct kr_reflector *rf = &top->refl[i];
		unsigned char b[RES_HEAD];
		/* A partial mirror cannot be resumed by a watch: no resourceVersion, a list on restart. */
		const char *rv = rf->partial ? "" : rf->last_rv;
		size_t rvlen = strlen(rv);

		b[0] = REC_RES;
		b[1] = (unsigned char)rvlen;
		put16(b + 2, (uint32_t)i);
		put32(b + 4, (uint32_t)kr_store_count(top->store, i));
		/* The bookmark cadence is the server's (cadence.h): the same for every resource. */
		put64(b + 8, (uint64_t)kr_cadence_get(&top->cadence));
		st->crc = 0;
		wr(st, b, sizeof(b));
		wr(st, rv, rvlen);
		wr_crc(st);
	}
}

static const char *const step_name[4] = { "write", "flush", "rename", "flush the directory of" };

/*
 * What the steps of a commit did to what is on disk, for the next writes:
 * r 0 (all done) or the failed step (1 fsync, 2 rename, 3 directory fsync).
 * A snapshot renamed is the one on disk (its old journal no longer counts),
 * and counts for good only with its directory synced.
 */
static int commit_applied(struct kr_state *st, int journal, int r, int step, const char **what)
{
	if (r < 0)
		*what = step_name[step >= 0 && step <= 3 ? step : 0];
	if (journal) {
		if (r == 0) {
			st->journal_exists = 1;
			st->journal_bytes += st->total;
		}
		return r;
	}
	if (r == 0 || step == 3) {
		st->gen++;
		st->journal_ok = 0;
	}
	if (r == 0) {
		st->journal_ok = 1;
		st->journal_exists = 0;
		st->journal_bytes = 0;
	}
	return r;
}

static void on_commit(struct kr_loop *loop, struct kr_source *s, int got);
static void arm(struct kr_state *st);

/*
 * The buffered bytes out; then fsync, (a snapshot) rename over the old one,
 * and directory fsync (a snapshot, or a journal just created), in this
 * order: in a child process unless inline (the loop goes on; on_commit
 * finishes), else here. Returns 0, 1 (in flight), or a KR_E code with *step.
 */
static int commit(struct kr_state *st, int journal, int created, const char **step)
{
	const char *tmp = journal ? NULL : st->tmp, *path = journal ? NULL : st->path;
	const char *dir = !journal || created ? st->dir : NULL;
	int r, c, failed = 0, cfd = KR_EIO;

	flush(st);
	if (st->err) {
		kr_port_fs_close(st->fd);
		st->fd = -1;
		*step = "write";
		return st->err;
	}
	if (!st->o.commit_inline && !st->closing)
		cfd = kr_port_fs_commit_start(st->fd, tmp, path, dir);
	if (cfd >= 0) {
		/* The child holds the file open; its fsync reports what a close would. */
		kr_port_fs_close(st->fd);
		st->fd = -1;
		r = kr_port_fs_commit_finish(cfd, 0, &failed);
		if (r == KR_IO_WAIT) {
			st->commit.fd = cfd;
			st->commit.want = KR_POLL_IN;
			st->commit.ready = on_commit;
			st->commit.arg = st;
			if (kr_loop_add(st->top->loop, &st->commit) == 0) {
				st->committing = 1;
				st->c_journal = journal;
				return 1;
			}
			r = kr_port_fs_commit_finish(cfd, 1, &failed);  /* no room in the loop: wait */
		}
		return commit_applied(st, journal, r, failed, step);
	}
	r = kr_port_fs_sync(st->fd);
	failed = 1;
	c = kr_port_fs_close(st->fd);
	st->fd = -1;
	if (r == 0 && (r = c) < 0) {
		commit_applied(st, journal, r, 1, step);
		*step = "close";
		return r;
	}
	/* Only a whole, durable file takes the old one's place. */
	if (r == 0 && tmp) {
		failed = 2;
		r = kr_port_fs_rename(tmp, path);
	}
	if (r == 0 && dir) {
		failed = 3;
		r = kr_port_fs_sync_dir(dir);
	}
	return commit_applied(st, journal, r, failed, step);
}

/* A whole snapshot of generation gen + 1: temp file, fsync, rename, directory fsync. */
static int write_snapshot(struct kr_state *st, const char **step, uint32_t *objects)
{
	struct kr_reflect *top = st->top;
	struct save_ctx c = { st, 0 };
	unsigned char h[KR_STATE_HEADER_BYTES], e[8];
	int r;

	kr_port_fs_unlink(st->tmp);
	st->fd = kr_port_fs_create(st->tmp, FILE_MODE);
	if (st->fd < 0) {
		*step = "create";
		r = st->fd;
		st->fd = -1;
		return r;
	}
	kr_state_header(h, KR_STATE_VERSION, (uint32_t)top->nrefl, st->config, kr_port_wall_seconds(),
			st->gen + 1);
	wr(st, h, sizeof(h));
	wr_res_records(st);
	kr_store_foreach(top->store, -1, save_object, &c);
	wr_history(st, 0);
	memset(e, 0, sizeof(e));
	e[0] = REC_END;
	put32(e + 4, c.objects);
	st->crc = 0;
	wr(st, e, sizeof(e));
	wr_crc(st);
	*objects = c.objects;
	return commit(st, 0, 0, step);
}

/* One journal group: the changed objects as they are now, the RVs, a commit. */
static int append_journal(struct kr_state *st, const char **step, uint32_t *objects)
{
	struct kr_store *s = st->top->store;
	struct save_ctx c = { st, 0 };
	unsigned char e[8];
	uint32_t nrec = 0;
	size_t i = 0;
	int r, created = 0;

	if (!st->journal_exists) {
		unsigned char h[KR_STATE_JOURNAL_HEADER_BYTES];

		/* The journal of an older snapshot (or a cut group) goes. */
		kr_port_fs_unlink(st->jpath);
		st->fd = kr_port_fs_create(st->jpath, FILE_MODE);
		kr_state_journal_header(h, KR_STATE_VERSION, st->config, st->gen);
		created = 1;
		if (st->fd >= 0)
			wr(st, h, sizeof(h));
	} else {
		st->fd = kr_port_fs_open_append(st->jpath);
	}
	if (st->fd < 0) {
		*step = "open";
		r = st->fd;
		st->fd = -1;
		return r;
	}
	while (i < st->jlen) {
		int res = (unsigned char)st->jkeys[i];
		const char *key = st->jkeys + i + 1;
		size_t keylen = strlen(key);
		struct kr_store_view v;

		i += keylen + 2;
		nrec++;
		if (kr_store_get(s, res, key, keylen, &v)) {
			save_object(&c, &v);
		} else {
			unsigned char d[DEL_HEAD];

			d[0] = REC_DEL;
			d[1] = 0;
			put16(d + 2, (uint32_t)res);
			put16(d + 4, (uint32_t)keylen);
			st->crc = 0;
			wr(st, d, sizeof(d));
			wr(st, key, keylen);
			wr_crc(st);
		}
	}
	nrec += wr_history(st, st->hist_next);
	wr_res_records(st);
	nrec += (uint32_t)st->top->nrefl;
	memset(e, 0, sizeof(e));
	e[0] = REC_COMMIT;
	put32(e + 4, nrec);
	st->crc = 0;
	wr(st, e, sizeof(e));
	wr_crc(st);
	*objects = c.objects;
	return commit(st, 1, created, step);
}

/* The bookkeeping once the outcome of a write is known (loop_ms: the part spent in the loop). */
static int save_done(struct kr_state *st, int r, const char *step, int journal, uint32_t objects,
		     kr_ms_t t0, kr_ms_t loop_ms)
{
	struct kr_reflect *top = st->top;
	kr_ms_t took = kr_port_now_ms() - t0;

	if (r < 0) {
		st->failures++;
		/* Whatever is half-written is never appended to: the next write is a snapshot. */
		st->overflow = 1;
		st->journal_exists = 0;
		st->dirty = 1;
		kr_log(KR_LOG_ERROR, "unable to %s the state %s %s: %s", step, journal ? "journal" : "snapshot",
		       journal ? st->jpath : st->tmp, kr_port_fs_error());
		if (!st->timer.armed)
			kr_loop_timer_at(top->loop, &st->timer, kr_port_now_ms() + st->o.interval_ms);
		return r;
	}
	st->bytes_written += st->total;
	if (journal) {
		st->appends++;
		kr_log(KR_LOG_INFO, "state: journal: %u changed objects appended to %s: %llu bytes in %lld ms, "
		       "%lld in the loop (%llu since the snapshot)", (unsigned)objects, st->jpath,
		       (unsigned long long)st->total, (long long)took, (long long)loop_ms,
		       (unsigned long long)st->journal_bytes);
	} else {
		st->snapshots++;
		st->last_bytes = st->total;
		st->last_objects = objects;
		kr_log(KR_LOG_INFO, "state: snapshot of %u objects written to %s: %llu bytes in %lld ms, "
		       "%lld in the loop", (unsigned)objects, st->path, (unsigned long long)st->total,
		       (long long)took, (long long)loop_ms);
	}
	return 1;
}

/* A commit in flight, done: its outcome applied and logged; changes made meanwhile wait their turn. */
static void commit_end(struct kr_state *st, int r, int failed)
{
	const char *step = "write";

	kr_loop_remove(st->top->loop, &st->commit);
	st->commit.fd = -1;
	st->committing = 0;
	r = commit_applied(st, st->c_journal, r, failed, &step);
	save_done(st, r, step, st->c_journal, st->c_objects, st->c_t0, st->c_loop);
	if (st->dirty)
		arm(st);
}

static void on_commit(struct kr_loop *loop, struct kr_source *s, int got)
{
	struct kr_state *st = s->arg;
	int r, failed;

	(void)loop;
	(void)got;
	r = kr_port_fs_commit_finish(s->fd, 0, &failed);
	if (r != KR_IO_WAIT)
		commit_end(st, r, failed);
}

/* Waits for a commit in flight (kr_state_close, a forced write). */
static void commit_wait(struct kr_state *st)
{
	int r, failed;

	if (!st->committing)
		return;
	r = kr_port_fs_commit_finish(st->commit.fd, 1, &failed);
	commit_end(st, r, failed);
}

int kr_state_save(struct kr_state *st, int force)
{
	struct kr_reflect *top = st->top;
	kr_ms_t t0 = kr_port_now_ms();
	const char *step = "write";
	uint32_t objects = 0;
	uint64_t nh;
	int i, r, journal;

	if (st->committing) {
		if (!force) {
			st->postponed++;
			return 0;
		}
		commit_wait(st);
	}
	if (!st->dirty && !force)
		return 0;
	for (i = 0; i < top->nrefl; i++)
		if (!consistent(&top->refl[i])) {
			st->postponed++;
			kr_log(KR_LOG_DEBUG, "state: write postponed: %s is not synced", top->refl[i].res.name);
			return 0;
		}
	/* A journal while it stays smaller than the snapshot it follows. */
	nh = not_held_sum(top->store);
	journal = st->journal_ok && !st->overflow && st->last_bytes > 0 &&
		  st->journal_bytes < st->last_bytes && nh == st->not_held_sum;
	st->err = 0;
	st->len = 0;
	st->total = 0;
	r = journal ? append_journal(st, &step, &objects) : write_snapshot(st, &step, &objects);
	/*
	 * What changed so far is in the file: changes from now on are the next
	 * write's (a failure makes that one a snapshot, which holds them all).
	 */
	st->dirty = 0;
	st->jlen = 0;
	st->overflow = 0;
	st->not_held_sum = nh;
	st->last_write = kr_port_now_ms();
	for (i = 0; i < top->nrefl; i++)
		kr_snprintf(st->saved_rv[i], sizeof(st->saved_rv[i]), "%s", top->refl[i].last_rv);
	if (r == 1) {
		st->c_objects = objects;
		st->c_t0 = t0;
		st->c_loop = kr_port_now_ms() - t0;
		return 1;
	}
	return save_done(st, r, step, journal, objects, t0, kr_port_now_ms() - t0);
}

/* --- coalescing --------------------------------------------------------------------- */

static void arm(struct kr_state *st)
{
	kr_ms_t now = kr_port_now_ms(), at = st->last_write ? st->last_write + st->o.interval_ms : now + st->o.interval_ms;

	if (st->timer.armed)
		return;
	kr_loop_timer_at(st->top->loop, &st->timer, at > now ? at : now);
}

static void on_timer(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_state *st = t->arg;

	(void)loop;
	if (kr_state_save(st, 0) == 0 && st->dirty)
		kr_loop_timer_at(st->top->loop, &st->timer, kr_port_now_ms() + RETRY_MS);
}

/* Notes a changed key for the next journal group (once); no room: the next write is a snapshot. */
static void remember(struct kr_state *st, int res, const char *key)
{
	size_t i = 0, n = key ? strlen(key) : 0;

	if (st->overflow)
		return;
	if (!key || res < 0 || res > 255 || n == 0) {
		st->overflow = 1;
		return;
	}
	while (i < st->jlen) {
		size_t len = strlen(st->jkeys + i + 1);

		if ((unsigned char)st->jkeys[i] == res && len == n && memcmp(st->jkeys + i + 1, key, n) == 0)
			return;
		i += len + 2;
	}
	if (st->jlen + n + 2 > sizeof(st->jkeys)) {
		st->overflow = 1;
		return;
	}
	st->jkeys[st->jlen] = (char)res;
	memcpy(st->jkeys + st->jlen + 1, key, n + 1);
	st->jlen += n + 2;
}

void kr_state_event(void *arg, const struct kr_event *ev)
{
	struct kr_state *st = arg;

	if (ev->restored)
		return;
	switch (ev->type) {
	case KR_EV_ADDED:
	case KR_EV_MODIFIED:
	case KR_EV_DELETED:
		st->dirty = 1;
		remember(st, ev->res, ev->key);
		arm(st);
		break;
	case KR_EV_SYNCED:
		/* A relist that changed nothing still moved the RV: worth one write. */
		if (!ev->warm) {
			st->dirty = 1;
			/*
			 * Nothing on disk yet: the first snapshot goes at once (or as
			 * soon as every resource is synced), not an interval later, so
			 * a gateway that reboots early does not relist.
			 */
			if (st->load != KR_STATE_LOADED && st->snapshots == 0 && !st->committing) {
				kr_loop_timer_cancel(st->top->loop, &st->timer);
				kr_loop_timer_at(st->top->loop, &st->timer, kr_port_now_ms());
			}
			arm(st);
		}
		break;
	case KR_EV_RESYNC:
		break;
	}
}

void kr_state_close(struct kr_state *st)
{
	commit_wait(st);
	st->closing = 1;
	kr_loop_timer_cancel(st->top->loop, &st->timer);
	if (st->dirty || changed_rv(st))
		kr_state_save(st, 1);
}
