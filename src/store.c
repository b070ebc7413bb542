#include "store.h"

#include "port.h"

#include <string.h>

#include "kreflect.h"

/*
 * A record header. It is read and written with memcpy, never through a cast
 * pointer: the arena is the caller's char array, and memcpy keeps the access
 * well-defined whatever its declared type (it compiles to two loads or stores).
 */
struct rec {
	uint32_t size;     /* whole record, a multiple of KR_STORE_ALIGN */
	uint32_t entry;    /* index of the owning entry, or DEAD */
	uint32_t objlen;   /* 0 for a key-only record */
	uint16_t keylen;   /* KR_KEY_MAX <= 65536, so keylen <= 65535 */
	uint8_t rvlen;     /* KR_RV_MAX <= 256 */
	uint8_t uidlen;
};

_Static_assert(sizeof(struct rec) == KR_STORE_HDR, "record header must be KR_STORE_HDR bytes");
_Static_assert(KR_STORE_HDR % KR_STORE_ALIGN == 0, "objects must start aligned");
_Static_assert(sizeof(struct kr_entry) == 24, "struct kr_entry should stay 24 bytes");
_Static_assert(KR_STORE_KEY_RECORD_MAX >= KR_STORE_HDR + KR_STORE_STRINGS_MAX,
	       "KR_STORE_RECORD_SIZE must count the NULs");

#define DEAD UINT32_MAX
#define F_USED 1u
#define F_HELD 2u
/* Offsets and sizes are kept in 32 bits. */
#define ARENA_MAX ((size_t)UINT32_MAX & ~(size_t)(KR_STORE_ALIGN - 1u))

static struct rec rec_load(const struct kr_store *s, size_t off)
{
	struct rec r;

	memcpy(&r, s->arena + off, sizeof(r));
	return r;
}

static void rec_store(struct kr_store *s, size_t off, const struct rec *r)
{
	memcpy(s->arena + off, r, sizeof(*r));
}

static void rec_kill(struct kr_store *s, size_t off)
{
	uint32_t dead = DEAD;

	memcpy(s->arena + off + offsetof(struct rec, entry), &dead, sizeof(dead));
}

/*
 * The key hash (see store.h): FNV-1a's shape a word at a time. The state starts
 * from res and keylen; each 8-byte word of the key (read with memcpy; the last
 * one zero-padded, which the length disambiguates) is folded in as
 * h = (h ^ w) * K; h ^= h >> 29, a bijection of h for a given w; MurmurHash3's
 * fmix64 finishes it so that the low bits choosing the bucket depend on all of
 * it. One multiply per 8 key bytes instead of one per byte matters on 32-bit
 * ARM, where each 64-bit multiply is three.
 */
static uint64_t key_hash(const struct kr_store *s, int res, const char *key, size_t keylen)
{
	const uint64_t k = 0x87c37b91114253d5ULL;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)(unsigned)res << 32) ^ keylen, w;

	for (; keylen >= 8; key += 8, keylen -= 8) {
		memcpy(&w, key, 8);
		h = (h ^ w) * k;
		h ^= h >> 29;
	}
	if (keylen) {
		w = 0;
		memcpy(&w, key, keylen);
		h = (h ^ w) * k;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h & s->hash_mask;
}

static int32_t *bucket_of(const struct kr_store *s, uint64_t h)
{
	return &s->buckets[h & (s->nbuckets - 1u)];
}

static void fill_view(const struct kr_store *s, uint32_t idx, struct kr_store_view *v)
{
	const struct kr_entry *e = &s->entries[idx];
	struct rec r = rec_load(s, e->rec);
	const char *base = s->arena + e->rec + KR_STORE_HDR;

	v->res = e->res;
	v->key = base + r.objlen;
	v->keylen = r.keylen;
	v->rv = v->key + r.keylen + 1;
	v->uid = v->rv + r.rvlen + 1;
	v->held = (e->flags & F_HELD) != 0;
	v->obj = v->held ? base : NULL;
	v->objlen = v->held ? r.objlen : 0;
}

static void clear_view(struct kr_store_view *v)
{
	if (v) {
		memset(v, 0, sizeof(*v));
		v->res = -1;
	}
}

static int key_ok(int res, const char *key, size_t keylen)
{
	return key && keylen > 0 && keylen < KR_KEY_MAX && res >= 0 && res <= UINT16_MAX;
}

/* Index of (res, key) with hash h, or -1. *link (may be NULL) gets the slot pointing at it. */
static int32_t find(const struct kr_store *s, int res, const char *key, size_t keylen,
		    uint64_t h, int32_t **link)
{
	int32_t *l, i;

	if (!s->nbuckets)
		return -1;
	for (l = bucket_of(s, h); (i = *l - 1) >= 0; l = &s->entries[i].next) {
		const struct kr_entry *e = &s->entries[i];
		struct rec r;

		if (e->hash != h || e->res != (uint16_t)res)
			continue;
		r = rec_load(s, e->rec);
		if (r.keylen == keylen &&
		    memcmp(s->arena + e->rec + KR_STORE_HDR + r.objlen, key, keylen) == 0) {
			if (link)
				*link = l;
			return i;
		}
	}
	return -1;
}

static int32_t lookup(const struct kr_store *s, int res, const char *key, size_t keylen)
{
	if (!key_ok(res, key, keylen))
		return -1;
	return find(s, res, key, keylen, key_hash(s, res, key, keylen), NULL);
}

/* Unlinks entry idx (which is in use) and frees its slot and record. */
/* Counts a record of resource res in (sign 1) or out (sign -1) of the totals. */
static void tally(struct kr_store *s, unsigned res, int held, size_t objlen, int sign)
{
	if (held) {
		s->objects += (size_t)sign;
		if (res < KR_MAX_RESOURCES)
			s->held_bytes[res] += (size_t)sign * objlen;
	} else {
		s->not_held += (size_t)sign;
		if (res < KR_MAX_RESOURCES)
			s->not_held_res[res] += (size_t)sign;
	}
}

static void remove_entry(struct kr_store *s, int32_t idx, int32_t *link)
{
	struct kr_entry *e = &s->entries[idx];
	struct rec r = rec_load(s, e->rec);

	if (!link)
		for (link = bucket_of(s, e->hash); *link != idx + 1; link = &s->entries[*link - 1].next)
			;
	*link = e->next;
	rec_kill(s, e->rec);
	s->garbage += r.size;
	tally(s, e->res, e->flags & F_HELD, r.objlen, -1);
	e->flags = 0;
	e->next = s->free_list;
	s->free_list = idx + 1;
	s->nentries--;
}

void kr_store_init(struct kr_store *s, char *arena, size_t arena_size, struct kr_entry *entries,
		   uint32_t max_entries, int32_t *buckets, uint32_t nbuckets, size_t reserve)
{
	memset(s, 0, sizeof(*s));
	if (arena) {
		size_t pad = (size_t)(-(uintptr_t)arena & (KR_STORE_ALIGN - 1u));

		if (pad < arena_size) {
			s->arena = arena + pad;
			s->size = (arena_size - pad) & ~(size_t)(KR_STORE_ALIGN - 1u);
			if (s->size > ARENA_MAX)
				s->size = ARENA_MAX;
		}
	}
	while (nbuckets & (nbuckets - 1u))
		nbuckets &= nbuckets - 1u;
	if (nbuckets > (uint32_t)INT32_MAX + 1u)
		nbuckets = (uint32_t)INT32_MAX + 1u;
	if (!entries || !buckets || !nbuckets) {
		max_entries = 0;
		nbuckets = 0;
	}
	if (max_entries > (uint32_t)INT32_MAX)
		max_entries = (uint32_t)INT32_MAX;
	s->entries = entries;
	s->max_entries = max_entries;
	s->buckets = buckets;
	s->nbuckets = nbuckets;
	s->reserve = reserve;
	s->hash_mask = ~(uint64_t)0;
	/* Empty buckets are 0, and entries are taken in order from `fresh` up,
	 * each set as it is taken: only the bucket pages with something in them
	 * are written, and no entry page before its first object. */
	if (nbuckets)
		kr_port_zero(buckets, (size_t)nbuckets * sizeof(buckets[0]));
}

void kr_store_set_quota(struct kr_store *s, int res, size_t bytes)
{
	if (res >= 0 && res < KR_MAX_RESOURCES)
		s->quota[res] = bytes;
}

/*
 * How many dead bytes a store holding `held` bytes collects before it
 * compacts (kr_store_scratch): as many as it holds, and at least the reserve.
 * Moving the held bytes then costs at most a byte per dead byte, and the
 * arena's touched pages stay near twice the mirror, not the whole arena,
 * however long the stream.
 */
static size_t dead_limit(const struct kr_store *s, size_t held)
{
	return held > s->reserve ? held : s->reserve;
}

size_t kr_store_compact(struct kr_store *s)
{
	size_t rd = 0, wr = 0, before = s->used, dead;

	while (rd < s->used) {
		struct rec r = rec_load(s, rd);

		if (r.size < KR_STORE_HDR || r.size > s->used - rd)
			break; /* cannot happen: kr_store_check proves the walk */
		if (r.entry != DEAD) {
			if (wr != rd)
				memmove(s->arena + wr, s->arena + rd, r.size);
			s->entries[r.entry].rec = (uint32_t)wr;
			wr += r.size;
		}
		rd += r.size;
	}
	s->used = wr;
	s->garbage = 0;
	s->compactions++;
	/*
	 * The tail up to the next compaction (the bytes held and as many dead
	 * ones, see kr_store_scratch) is about to be written again: its pages
	 * stay, or every cycle would fault them back in (a page fault per 4 KiB
	 * of events was a third of the CPU of a steady stream). The pages above
	 * it go back, so RSS follows the bytes held after the mirror shrinks.
	 */
	dead = dead_limit(s, wr);
	if (before > wr && before - wr > dead)
		kr_port_discard(s->arena + wr + dead, before - wr - dead);
	return before - wr;
}

static size_t sat_add(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

char *kr_store_scratch(struct kr_store *s, size_t want, size_t *cap)
{
	size_t room = s->size - s->used;
	size_t need = sat_add(sat_add(want, KR_STORE_HDR + KR_STORE_TAIL_ROOM), s->reserve);

	if (s->garbage && ((room < need && room + s->garbage >= need) ||
			   s->garbage >= dead_limit(s, s->used - s->garbage)))
		kr_store_compact(s);
	room = s->size - s->used;
	if (room < KR_STORE_HDR + KR_STORE_TAIL_ROOM) {
		*cap = 0;
		return NULL;
	}
	*cap = room - KR_STORE_HDR - KR_STORE_TAIL_ROOM;
	return s->arena + s->used + KR_STORE_HDR;
}

/* Does p[0..n) overlap the arena's tail [used, size)? */
static int in_tail(const struct kr_store *s, const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, lo, hi;

	if (!s->arena || !n)
		return 0;
	lo = (uintptr_t)(s->arena + s->used);
	hi = (uintptr_t)(s->arena + s->size);
	return a < hi && a + n > lo;
}

int kr_store_put(struct kr_store *s, int res, const char *key, size_t keylen, const char *rv,
		 const char *uid, const char *obj, size_t objlen, uint32_t seen,
		 struct kr_store_view *old)
{
	char staged[KR_STORE_STRINGS_MAX];
	const char *skey = key, *srv = rv, *suid;
	size_t rvlen, uidlen, room, need = 0, at, strings;
	int32_t idx;
	struct kr_entry *e = NULL;
	struct kr_store_view cur;
	int hold, was_held = 0, same_rv = 0, same_uid = 0, uid_differs = 0, rc;
	uint64_t h;
	struct rec r;
	char *dst;

	clear_view(old);
	if (!key_ok(res, key, keylen) || !rv || (!obj && objlen))
		return KR_EINVAL;
	if (!uid)
		uid = "";
	suid = uid;
	rvlen = strnlen(rv, KR_RV_MAX);
	uidlen = strnlen(uid, KR_RV_MAX);
	if (rvlen >= KR_RV_MAX || uidlen >= KR_RV_MAX)
		return KR_EINVAL;
	if (obj && in_tail(s, obj, 1) &&
	    objlen > (size_t)(s->arena + s->size - obj))
		return KR_EINVAL;

	h = key_hash(s, res, key, keylen);
	idx = find(s, res, key, keylen, h, NULL);
	if (idx >= 0) {
		e = &s->entries[idx];
		fill_view(s, (uint32_t)idx, &cur);
		if (old)
			*old = cur;
		was_held = cur.held;
		same_rv = strlen(cur.rv) == rvlen && memcmp(cur.rv, rv, rvlen) == 0;
		same_uid = strlen(cur.uid) == uidlen && memcmp(cur.uid, uid, uidlen) == 0;
		uid_differs = !same_uid && *cur.uid && *uid;
		if (was_held && same_rv && !uid_differs) {
			e->seen = seen;
			return KR_STORE_UNCHANGED;
		}
	}

	room = s->size - s->used;
	hold = 0;
	if (obj && objlen <= s->size) {
		need = KR_STORE_RECORD_SIZE(objlen, keylen, rvlen, uidlen);
		hold = need <= room && room - need >= s->reserve;
		/* The resource's share: its held bytes, this object replacing the old one. */
		if (hold && res < KR_MAX_RESOURCES && s->quota[res] &&
		    s->held_bytes[res] - (was_held ? cur.objlen : 0) + objlen > s->quota[res])
			hold = 0;
	}
	if (!hold) {
		need = KR_STORE_RECORD_SIZE(0, keylen, rvlen, uidlen);
		objlen = 0;
		if (e && !was_held && same_rv && same_uid) {
			e->seen = seen;
			return KR_STORE_NOT_HELD;
		}
	}
	if ((!e && !s->free_list && s->fresh >= s->max_entries) || need > room) {
		s->untracked++;
		return KR_ENOSPC;
	}

	/* Strings in the tail would be overwritten by the object or each other: stage them. */
	strings = keylen + rvlen + uidlen + 3;
	if (in_tail(s, key, keylen) || in_tail(s, rv, rvlen + 1) || in_tail(s, uid, uidlen + 1)) {
		memcpy(staged, key, keylen);
		memcpy(staged + keylen + 1, rv, rvlen);
		memcpy(staged + keylen + 1 + rvlen + 1, uid, uidlen);
		skey = staged;
		srv = staged + keylen + 1;
		suid = srv + rvlen + 1;
	}

	at = s->used;
	dst = s->arena + at + KR_STORE_HDR;
	if (hold && obj != dst)
		memmove(dst, obj, objlen);
	dst += objlen;
	memcpy(dst, skey, keylen);
	dst[keylen] = '\0';
	dst += keylen + 1;
	memcpy(dst, srv, rvlen);
	dst[rvlen] = '\0';
	dst += rvlen + 1;
	memcpy(dst, suid, uidlen);
	dst[uidlen] = '\0';
	dst += uidlen + 1;
	memset(dst, 0, need - KR_STORE_HDR - objlen - strings);

	if (!e) {
		if (s->free_list) {
			idx = s->free_list - 1;
			e = &s->entries[idx];
			s->free_list = e->next;
		} else {
			idx = (int32_t)s->fresh++;
			e = &s->entries[idx];
			memset(e, 0, sizeof(*e));
		}
		e->hash = h;
		e->res = (uint16_t)res;
		e->next = *bucket_of(s, h);
		*bucket_of(s, h) = idx + 1;
		s->nentries++;
		rc = hold ? KR_STORE_ADDED : KR_STORE_NOT_HELD;
	} else {
		r = rec_load(s, e->rec);
		rec_kill(s, e->rec);
		s->garbage += r.size;
		tally(s, (unsigned)res, was_held, r.objlen, -1);
		if (!hold)
			rc = KR_STORE_NOT_HELD;
		else if (!was_held)
			rc = KR_STORE_ADDED;
		else
			rc = uid_differs ? KR_STORE_REPLACED : KR_STORE_MODIFIED;
	}
	r.size = (uint32_t)need;
	r.entry = (uint32_t)idx;
	r.objlen = (uint32_t)objlen;
	r.keylen = (uint16_t)keylen;
	r.rvlen = (uint8_t)rvlen;
	r.uidlen = (uint8_t)uidlen;
	rec_store(s, at, &r);
	e->rec = (uint32_t)at;
	e->flags = (uint8_t)(F_USED | (hold ? F_HELD : 0u));
	e->seen = seen;
	tally(s, (unsigned)res, hold, objlen, 1);
	s->used += need;
	if (s->used > s->high_water)
		s->high_water = s->used;
	return rc;
}

int kr_store_delete(struct kr_store *s, int res, const char *key, size_t keylen,
		    struct kr_store_view *old)
{
	int32_t idx, *link = NULL;

	clear_view(old);
	if (!key_ok(res, key, keylen))
		return 0;
	idx = find(s, res, key, keylen, key_hash(s, res, key, keylen), &link);
	if (idx < 0)
		return 0;
	if (old)
		fill_view(s, (uint32_t)idx, old);
	remove_entry(s, idx, link);
	return 1;
}

int kr_store_at(const struct kr_store *s, uint32_t idx, struct kr_store_view *v)
{
	if (idx >= s->max_entries || !(s->entries[idx].flags & F_USED))
		return 0;
	fill_view(s, idx, v);
	return 1;
}

int kr_store_get(const struct kr_store *s, int res, const char *key, size_t keylen,
		 struct kr_store_view *v)
{
	int32_t idx = lookup(s, res, key, keylen);

	if (idx < 0) {
		clear_view(v);
		return 0;
	}
	if (v)
		fill_view(s, (uint32_t)idx, v);
	return 1;
}

int32_t kr_store_index(const struct kr_store *s, int res, const char *key, size_t keylen)
{
	return lookup(s, res, key, keylen);
}

int kr_store_mark(struct kr_store *s, int res, const char *key, size_t keylen, uint32_t seen)
{
	int32_t idx = lookup(s, res, key, keylen);

	if (idx < 0)
		return 0;
	s->entries[idx].seen = seen;
	return 1;
}

size_t kr_store_sweep(struct kr_store *s, int res, uint32_t seen,
		      void (*fn)(void *arg, const struct kr_store_view *v), void *arg)
{
	struct kr_store_view v;
	size_t n = 0;
	uint32_t i;

	if (res < 0 || res > UINT16_MAX)
		return 0;
	for (i = 0; i < s->fresh && s->nentries; i++) {
		const struct kr_entry *e = &s->entries[i];

		if (!(e->flags & F_USED) || e->res != (uint16_t)res || e->seen == seen)
			continue;
		if (fn) {
			fill_view(s, i, &v);
			fn(arg, &v);
		}
		remove_entry(s, (int32_t)i, NULL);
		n++;
	}
	return n;
}

size_t kr_store_foreach(const struct kr_store *s, int res,
			void (*fn)(void *arg, const struct kr_store_view *v), void *arg)
{
	struct kr_store_view v;
	size_t n = 0;
	uint32_t i;

	for (i = 0; i < s->fresh && n < s->nentries; i++) {
		const struct kr_entry *e = &s->entries[i];

		if (!(e->flags & F_USED) || (res >= 0 && e->res != res))
			continue;
		if (fn) {
			fill_view(s, i, &v);
			fn(arg, &v);
		}
		n++;
	}
	return n;
}

size_t kr_store_not_held(const struct kr_store *s, int res)
{
	if (res < 0)
		return s->not_held;
	return res < KR_MAX_RESOURCES ? s->not_held_res[res] : 0;
}

size_t kr_store_count(const struct kr_store *s, int res)
{
	if (res < 0)
		return s->nentries;
	return kr_store_foreach(s, res, NULL, NULL);
}

#define FAIL(msg)                                                                     \
	do {                                                                              \
		if (why)                                                                  \
			*why = (msg);                                                     \
		return KR_EINVAL;                                                         \
	} while (0)

int kr_store_check(const struct kr_store *s, const char **why)
{
	size_t off = 0, dead = 0, live = 0, held = 0, chained = 0, nfree = 0;
	uint32_t i;
	int32_t j;

	if (why)
		*why = NULL;
	if (s->used > s->size || s->used % KR_STORE_ALIGN || s->size % KR_STORE_ALIGN ||
	    (uintptr_t)s->arena % KR_STORE_ALIGN)
		FAIL("arena bounds or alignment");
	if (s->high_water < s->used || s->high_water > s->size)
		FAIL("high_water");
	while (off < s->used) {
		struct rec r = rec_load(s, off);
		const char *str;

		if (r.size < KR_STORE_HDR || r.size % KR_STORE_ALIGN || r.size > s->used - off)
			FAIL("record size breaks the walk");
		if (r.size != KR_STORE_RECORD_SIZE(r.objlen, r.keylen, r.rvlen, r.uidlen))
			FAIL("record size disagrees with its lengths");
		if (r.entry == DEAD) {
			dead += r.size;
			off += r.size;
			continue;
		}
		if (r.entry >= s->max_entries)
			FAIL("record's entry out of range");
		if (!(s->entries[r.entry].flags & F_USED) || s->entries[r.entry].rec != off)
			FAIL("record and entry do not point at each other");
		if (!(s->entries[r.entry].flags & F_HELD) && r.objlen)
			FAIL("key-only record with object bytes");
		str = s->arena + off + KR_STORE_HDR + r.objlen;
		if (r.keylen == 0 || r.keylen >= KR_KEY_MAX || str[r.keylen] ||
		    str[r.keylen + 1 + r.rvlen] || str[r.keylen + 1 + r.rvlen + 1 + r.uidlen] ||
		    strlen(str + r.keylen + 1) != r.rvlen ||
		    strlen(str + r.keylen + 1 + r.rvlen + 1) != r.uidlen)
			FAIL("record strings");
		if (key_hash(s, s->entries[r.entry].res, str, r.keylen) != s->entries[r.entry].hash)
			FAIL("entry hash is not the key's");
		live++;
		off += r.size;
	}
	if (dead != s->garbage)
		FAIL("dead bytes do not sum to garbage");
	if (live != s->nentries)
		FAIL("live records != nentries");
	if (s->fresh > s->max_entries)
		FAIL("entries taken beyond the index");
	for (i = 0; i < s->fresh; i++) {
		const struct kr_entry *e = &s->entries[i];

		if (!(e->flags & F_USED)) {
			if (e->flags)
				FAIL("free entry with flags");
			continue;
		}
		if (e->rec >= s->used)
			FAIL("entry's record beyond the tail");
		if (e->flags & F_HELD)
			held++;
	}
	if (held != s->objects || s->nentries - held != s->not_held)
		FAIL("objects/not_held counters");
	{
		size_t bytes[KR_MAX_RESOURCES] = { 0 }, keys[KR_MAX_RESOURCES] = { 0 };

		for (i = 0; i < s->fresh; i++) {
			const struct kr_entry *e = &s->entries[i];

			if (!(e->flags & F_USED) || e->res >= KR_MAX_RESOURCES)
				continue;
			if (e->flags & F_HELD)
				bytes[e->res] += rec_load(s, e->rec).objlen;
			else
				keys[e->res]++;
		}
		for (i = 0; i < KR_MAX_RESOURCES; i++) {
			if (bytes[i] != s->held_bytes[i])
				FAIL("held bytes per resource");
			if (keys[i] != s->not_held_res[i])
				FAIL("objects not held per resource");
		}
	}
	for (i = 0; i < s->nbuckets; i++)
		for (j = s->buckets[i] - 1; j >= 0; j = s->entries[j].next - 1) {
			if ((uint32_t)j >= s->fresh || !(s->entries[j].flags & F_USED))
				FAIL("chain reaches a free or invalid entry");
			if ((s->entries[j].hash & (s->nbuckets - 1u)) != i)
				FAIL("entry in the wrong bucket");
			if (++chained > s->nentries)
				FAIL("chains longer than nentries (a cycle?)");
		}
	if (chained != s->nentries)
		FAIL("an entry is in no chain");
	for (j = s->free_list - 1; j >= 0; j = s->entries[j].next - 1) {
		if ((uint32_t)j >= s->fresh || s->entries[j].flags)
			FAIL("free list reaches a used or invalid entry");
		if (++nfree > s->fresh - s->nentries)
			FAIL("free list too long (a cycle?)");
	}
	if (nfree != s->fresh - s->nentries)
		FAIL("free list misses entries");
	return 0;
}
