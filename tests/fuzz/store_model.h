/*
 * A reference model of the store and an interpreter of random operations on
 * both, shared by tests/fuzz/fuzz_store.c (operations decoded from the fuzz
 * input) and tests/unit/test_store.c (operations from a seeded PRNG).
 *
 * The model keeps a table indexed by (resource, key number) and its own idea
 * of the arena's bump tail and garbage, computed from the documented record
 * size (KR_STORE_RECORD_SIZE) and the documented rules for holding an object
 * (it must leave `reserve` bytes free) and for compacting (kr_store_scratch,
 * when the tail is short and the garbage would make it long enough, or when
 * the garbage is at least the bytes held and at least the reserve). After
 * every step it predicts the exact return code and checks the entry it
 * touched; every m->verify_every steps (1 unless changed after sm_init) it
 * checks every counter, the tail, every entry's view byte for byte and the
 * absence of the others, and runs kr_store_check.
 *
 * sm_step() returns 0, or the line of the first failed expectation with
 * m->fail_what describing it.
 */
#ifndef KR_STORE_MODEL_H
#define KR_STORE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kreflect.h"
#include "store.h"

#define SM_ARENA_MAX 16384
#define SM_MAX_ENTRIES 64
#define SM_MAX_BUCKETS 128
#define SM_RES 4
#define SM_KEYS 24            /* valid keys; SM_KEYS is "", SM_KEYS + 1 is too long */
#define SM_RVS 8              /* rv 7 is too long */
#define SM_UIDS 5             /* uid 4 is too long */
#define SM_OBJ_MAX 6000

struct sm_params {
	size_t arena_size;       /* bytes passed to init (<= SM_ARENA_MAX) */
	unsigned misalign;       /* arena start = aligned buffer + misalign */
	uint32_t max_entries;    /* <= SM_MAX_ENTRIES */
	uint32_t nbuckets;       /* <= SM_MAX_BUCKETS, any value */
	uint64_t hash_mask;
	size_t reserve;
};

struct sm_ent {
	int used;
	int rv, uid;             /* indices */
	int held;
	size_t objlen;
	uint32_t seen;
	size_t recsize;
};

/* Bytes to drive the model: from a buffer, or from a PRNG when p is NULL. */
struct sm_rd {
	const uint8_t *p;
	size_t n;
	uint64_t rng;
};

struct sm {
	struct kr_store s;
	struct kr_entry entries[SM_MAX_ENTRIES];
	int32_t buckets[SM_MAX_BUCKETS];
	struct sm_ent ent[SM_RES][SM_KEYS];
	struct sm_params p;
	size_t size, used, garbage, high_water, count, max_entries;
	unsigned long untracked, compactions;
	uint32_t counter;
	char *scratch;           /* valid while scratch_valid */
	size_t scratch_cap;
	int scratch_valid;
	/* sweep bookkeeping */
	int sweep_res;
	uint32_t sweep_seen;
	size_t sweep_calls;
	int sweep_bad;
	const char *fail_what;
	unsigned verify_every;   /* full verification every n steps (sm_init: 1) */
	unsigned long steps, ops[12];
	/* not cleared by sm_init: */
	_Alignas(16) char arena[SM_ARENA_MAX + 16];
	char outside[SM_OBJ_MAX];
	char pending[SM_ARENA_MAX];                   /* the object of the put under way */
	char shadow[SM_RES][SM_KEYS][SM_ARENA_MAX];   /* each held object's bytes */
};

static uint8_t sm_rd8(struct sm_rd *r)
{
	if (!r->p) {
		r->rng ^= r->rng << 13;
		r->rng ^= r->rng >> 7;
		r->rng ^= r->rng << 17;
		return (uint8_t)(r->rng >> 24);
	}
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static unsigned sm_rd16(struct sm_rd *r)
{
	unsigned lo = sm_rd8(r);

	return lo | (unsigned)sm_rd8(r) << 8;
}

/* Key k: valid lengths vary; keys of equal length differ only in their last byte. */
static size_t sm_key(int k, char *buf)
{
	static const size_t lens[] = { 1, 2, 7, 8, 9, 16, 31, 33, 64, 100, 200, KR_KEY_MAX - 1 };
	size_t len, i;

	if (k == SM_KEYS)
		return 0;
	len = k == SM_KEYS + 1 ? KR_KEY_MAX : lens[k % 12];
	for (i = 0; i < len; i++)
		buf[i] = (char)('a' + i % 26);
	if (len > 3)
		buf[2] = '/';
	buf[len - 1] = (char)('A' + k);
	buf[len] = '\0';
	return len;
}

/* The keys, made once. */
static const char *sm_keyp(int k, size_t *len)
{
	static char keys[SM_KEYS + 2][KR_KEY_MAX + 1];
	static size_t lens[SM_KEYS + 2];
	static int ready;

	if (!ready) {
		int i;

		for (i = 0; i < SM_KEYS + 2; i++)
			lens[i] = sm_key(i, keys[i]);
		ready = 1;
	}
	*len = lens[k];
	return keys[k];
}

static const char *sm_rv(int i)
{
	static const char *rvs[SM_RVS] = {
		"1", "2", "10", "", "12345678901234567890",
		"111111111111111111111111111111111111111111111111111111111111111",  /* 63 */
		"222222222222222222222222222222222222222222222222222222222222222",  /* 63 */
		"3333333333333333333333333333333333333333333333333333333333333333", /* 64 */
	};
	return rvs[i];
}

static const char *sm_uid(int i)
{
	static const char *uids[SM_UIDS] = {
		"", "uid-a", "uid-b",
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",  /* 63 */
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", /* 64 */
	};
	return uids[i];
}

/* Object bytes that differ from put to put. */
static void sm_fill(char *dst, uint32_t seed, size_t n)
{
	uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ULL | 1;
	size_t i;

	for (i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(dst + i, &x, n - i < 8 ? n - i : 8);
	}
}

#define SM_CHECK(cond)                                                                \
	do {                                                                          \
		if (!(cond)) {                                                        \
			m->fail_what = #cond;                                         \
			return __LINE__;                                              \
		}                                                                     \
	} while (0)

static void sm_init(struct sm *m, const struct sm_params *p)
{
	uint32_t nb = p->nbuckets;
	size_t pad = (8u - p->misalign % 8u) % 8u;

	memset(m, 0, offsetof(struct sm, arena));
	m->p = *p;
	while (nb & (nb - 1u))
		nb &= nb - 1u;
	m->max_entries = nb ? p->max_entries : 0;
	m->size = pad < p->arena_size ? (p->arena_size - pad) & ~(size_t)7 : 0;
	kr_store_init(&m->s, m->arena + p->misalign % 8u, p->arena_size, m->entries, p->max_entries,
		      m->buckets, p->nbuckets, p->reserve);
	m->s.hash_mask = p->hash_mask;
	m->sweep_res = -1;
	m->verify_every = 1;
}

/* Does v show model entry (res, k)? */
static int sm_match(struct sm *m, const struct kr_store_view *v, int res, int k)
{
	const struct sm_ent *e = &m->ent[res][k];
	size_t keylen;
	const char *key = sm_keyp(k, &keylen);

	SM_CHECK(e->used);
	SM_CHECK(v->res == res);
	SM_CHECK(v->key && v->keylen == keylen && memcmp(v->key, key, keylen) == 0);
	SM_CHECK(v->key[keylen] == '\0');
	SM_CHECK(v->rv && strcmp(v->rv, sm_rv(e->rv)) == 0);
	SM_CHECK(v->uid && strcmp(v->uid, sm_uid(e->uid)) == 0);
	SM_CHECK(v->held == e->held);
	if (!e->held) {
		SM_CHECK(v->obj == NULL && v->objlen == 0);
		return 0;
	}
	SM_CHECK(v->objlen == e->objlen && v->obj != NULL);
	SM_CHECK((uintptr_t)(v->obj - KR_STORE_HDR) % KR_STORE_ALIGN == 0);
	SM_CHECK(memcmp(v->obj, m->shadow[res][k], e->objlen) == 0);
	return 0;
}

static int sm_verify(struct sm *m)
{
	struct kr_store_view v;
	size_t held = 0, per[SM_RES] = { 0 };
	const char *why = NULL;
	int res, k, rc;

	rc = kr_store_check(&m->s, &why);
	if (rc) {
		m->fail_what = why;
		return __LINE__;
	}
	SM_CHECK(m->s.size == m->size);
	SM_CHECK(m->s.max_entries == m->max_entries);
	SM_CHECK(m->s.used == m->used);
	SM_CHECK(m->s.garbage == m->garbage);
	SM_CHECK(m->s.high_water == m->high_water);
	SM_CHECK(m->s.nentries == m->count);
	SM_CHECK(m->s.untracked == m->untracked);
	SM_CHECK(m->s.compactions == m->compactions);
	for (res = 0; res < SM_RES; res++)
		for (k = 0; k < SM_KEYS; k++) {
			size_t keylen;
			const char *key = sm_keyp(k, &keylen);

			if (!m->ent[res][k].used) {
				/* absent keys: every 4th step (the touched key is checked by its op) */
				if (m->steps % 4)
					continue;
				SM_CHECK(kr_store_get(&m->s, res, key, keylen, &v) == 0);
				SM_CHECK(v.key == NULL);
				continue;
			}
			SM_CHECK(kr_store_get(&m->s, res, key, keylen, &v) == 1);
			rc = sm_match(m, &v, res, k);
			if (rc)
				return rc;
			held += m->ent[res][k].held;
			per[res]++;
		}
	SM_CHECK(m->s.objects == held);
	SM_CHECK(m->s.not_held == m->count - held);
	SM_CHECK(kr_store_count(&m->s, -1) == m->count);
	SM_CHECK(kr_store_foreach(&m->s, -1, NULL, NULL) == m->count);
	for (res = 0; res < SM_RES; res++)
		SM_CHECK(kr_store_count(&m->s, res) == per[res]);
	return 0;
}

static int sm_pick_res(struct sm_rd *r)
{
	uint8_t b = sm_rd8(r);

	if (b % 17 == 16)
		return b & 0x80 ? -1 : 65536;
	return b % SM_RES;
}

static int sm_pick_key(struct sm_rd *r)
{
	uint8_t b = sm_rd8(r);

	if (b % 31 == 30)
		return SM_KEYS + (b >> 7);   /* "" or too long */
	return b % SM_KEYS;
}

static int sm_pick_rv(struct sm_rd *r)
{
	uint8_t b = sm_rd8(r);

	return b % 23 == 22 ? SM_RVS - 1 : b % (SM_RVS - 1);
}

static int sm_pick_uid(struct sm_rd *r)
{
	uint8_t b = sm_rd8(r);

	if (b % 29 == 28)
		return SM_UIDS - 1;
	b %= 16;
	return b < 6 ? 0 : b < 10 ? 1 : b < 14 ? 2 : 3;
}

static size_t sm_pick_len(struct sm_rd *r, size_t max)
{
	unsigned v = sm_rd16(r);
	size_t n;

	switch (v & 3) {
	case 0: n = (v >> 2) % 65; break;
	case 1: n = (v >> 2) % 1025; break;
	case 2: n = (v >> 2) % (SM_OBJ_MAX + 1); break;
	default: n = max - (v >> 2) % 64; break;   /* near the limit */
	}
	return n > max ? max : n;
}

enum sm_src { SM_COPY, SM_SCRATCH, SM_NULL, SM_ARENA };

/*
 * One put, predicted by the model. obj/objlen/seed describe the object (obj
 * NULL: key only). inplace: obj lies in the scratch (then a held result must
 * sit exactly at the scratch pointer).
 */
static int sm_put(struct sm *m, int res, int k, int rvi, int uidi, const char *obj, size_t objlen,
		  uint32_t seen, const char *keyp, const char *rvp)
{
	struct sm_ent prev, *e = NULL;
	struct kr_store_view old, now;
	size_t keylen, rvlen = strlen(sm_rv(rvi)), uidlen = strlen(sm_uid(uidi));
	const char *key = sm_keyp(k, &keylen);
	size_t room, need = 0, at = m->used;
	int want, rc, hold, r;

	if (!keyp)
		keyp = key;
	if (!rvp)
		rvp = sm_rv(rvi);
	if (obj)
		memcpy(m->pending, obj, objlen);
	rc = kr_store_put(&m->s, res, keyp, keylen, rvp, sm_uid(uidi), obj, objlen, seen, &old);

	if (res < 0 || res >= SM_RES || k >= SM_KEYS || rvi == SM_RVS - 1 || uidi == SM_UIDS - 1) {
		SM_CHECK(rc == KR_EINVAL);
		SM_CHECK(old.key == NULL);
		return 0;
	}
	e = &m->ent[res][k];
	prev = *e;
	if (prev.used) {
		/* old was taken after the put: the previous version's bytes survived it */
		SM_CHECK(old.key != NULL);
		r = sm_match(m, &old, res, k);
		if (r)
			return r;
	} else {
		SM_CHECK(old.key == NULL);
	}
	if (e->used && e->held && e->rv == rvi && !(uidi && e->uid && uidi != e->uid)) {
		SM_CHECK(rc == KR_STORE_UNCHANGED);
		e->seen = seen;
		return 0;
	}
	room = m->size - m->used;
	hold = 0;
	if (obj) {
		need = KR_STORE_RECORD_SIZE(objlen, keylen, rvlen, uidlen);
		hold = need <= room && room - need >= m->p.reserve;
	}
	if (!hold) {
		need = KR_STORE_RECORD_SIZE(0, keylen, rvlen, uidlen);
		if (e->used && !e->held && e->rv == rvi && e->uid == uidi) {
			SM_CHECK(rc == KR_STORE_NOT_HELD);
			e->seen = seen;
			return 0;
		}
	}
	if ((!e->used && m->count == m->max_entries) || need > room) {
		SM_CHECK(rc == KR_ENOSPC);
		SM_CHECK(e->used || kr_store_get(&m->s, res, key, keylen, NULL) == 0);
		m->untracked++;
		return 0;
	}
	if (!e->used)
		want = hold ? KR_STORE_ADDED : KR_STORE_NOT_HELD;
	else if (!hold)
		want = KR_STORE_NOT_HELD;
	else if (!e->held)
		want = KR_STORE_ADDED;
	else if (uidi && e->uid && uidi != e->uid)
		want = KR_STORE_REPLACED;
	else
		want = KR_STORE_MODIFIED;
	SM_CHECK(rc == want);
	if (e->used)
		m->garbage += e->recsize;
	else
		m->count++;
	e->used = 1;
	e->rv = rvi;
	e->uid = uidi;
	e->held = hold;
	e->objlen = hold ? objlen : 0;
	memcpy(m->shadow[res][k], m->pending, e->objlen);
	e->seen = seen;
	e->recsize = need;
	m->used += need;
	if (m->used > m->high_water)
		m->high_water = m->used;
	SM_CHECK(kr_store_get(&m->s, res, key, keylen, &now) == 1);
	SM_CHECK(now.key == m->s.arena + at + KR_STORE_HDR + e->objlen);
	if (hold)
		SM_CHECK(now.obj == m->s.arena + at + KR_STORE_HDR);
	return 0;
}

static void sm_sweep_cb(void *arg, const struct kr_store_view *v)
{
	struct sm *m = arg;
	const char *key;
	size_t keylen;
	int k;

	m->sweep_calls++;
	if (v->res != m->sweep_res) {
		m->sweep_bad = __LINE__;
		return;
	}
	for (k = 0; k < SM_KEYS; k++) {
		key = sm_keyp(k, &keylen);
		if (keylen == v->keylen && memcmp(key, v->key, keylen) == 0)
			break;
	}
	if (k == SM_KEYS || !m->ent[v->res][k].used || m->ent[v->res][k].seen == m->sweep_seen ||
	    sm_match(m, v, v->res, k)) {
		m->sweep_bad = __LINE__;
		return;
	}
	/* Mark it swept: seen == the sweep's mark, which the model never keeps for a live one here. */
	m->ent[v->res][k].seen = m->sweep_seen;
	m->ent[v->res][k].used = 2;
}

static int sm_step(struct sm *m, struct sm_rd *r)
{
	const char *key;
	size_t keylen;
	struct kr_store_view v;
	uint8_t op = sm_rd8(r) % 12;
	int res, k, rc;

	m->steps++;
	m->ops[op]++;
	switch (op) {
	case 0: case 1: case 2: {  /* put, copied in */
		int rvi, uidi;
		size_t n;

		res = sm_pick_res(r);
		k = sm_pick_key(r);
		rvi = sm_pick_rv(r);
		uidi = sm_pick_uid(r);
		n = sm_pick_len(r, SM_OBJ_MAX);
		m->counter++;
		sm_fill(m->outside, m->counter, n);
		rc = sm_put(m, res, k, rvi, uidi, m->outside, n, sm_rd8(r) % 4, NULL, NULL);
		if (rc)
			return rc;
		m->scratch_valid = 0;
		break;
	}
	case 3: case 4: {  /* put from the scratch, maybe moved down, maybe with strings in the tail */
		int rvi, uidi;
		size_t off, n;
		uint8_t how;
		char *keyp = NULL, *rvp = NULL;

		res = sm_pick_res(r);
		k = sm_pick_key(r);
		rvi = sm_pick_rv(r);
		uidi = sm_pick_uid(r);
		how = sm_rd8(r);
		if (!m->scratch_valid || !m->scratch)
			break;
		off = how & 1 ? (how >> 1) % 24 : 0;
		if (off > m->scratch_cap)
			off = m->scratch_cap;
		n = sm_pick_len(r, m->scratch_cap - off);
		m->counter++;
		sm_fill(m->scratch + off, m->counter, n);
		if ((how & 6) == 6 && k < SM_KEYS && rvi < SM_RVS - 1) {
			/* key and rv copied right after the object, inside the tail room */
			keyp = m->scratch + off + n;
			sm_key(k, keyp);
			rvp = keyp + strlen(keyp) + 1;
			memcpy(rvp, sm_rv(rvi), strlen(sm_rv(rvi)) + 1);
		}
		rc = sm_put(m, res, k, rvi, uidi, m->scratch + off, n, sm_rd8(r) % 4, keyp, rvp);
		if (rc)
			return rc;
		m->scratch_valid = 0;
		break;
	}
	case 5: {  /* key only */
		int rvi, uidi;

		res = sm_pick_res(r);
		k = sm_pick_key(r);
		rvi = sm_pick_rv(r);
		uidi = sm_pick_uid(r);
		rc = sm_put(m, res, k, rvi, uidi, NULL, 0, sm_rd8(r) % 4, NULL, NULL);
		if (rc)
			return rc;
		m->scratch_valid = 0;
		break;
	}
	case 6: {  /* put an object that lives in the arena (another entry's view) */
		int rvi, uidi, sr, sk;
		struct sm_ent *src;

		sr = sm_rd8(r) % SM_RES;
		sk = sm_rd8(r) % SM_KEYS;
		res = sm_pick_res(r);
		k = sm_pick_key(r);
		rvi = sm_pick_rv(r);
		uidi = sm_pick_uid(r);
		src = &m->ent[sr][sk];
		if (!src->used || !src->held)
			break;
		key = sm_keyp(sk, &keylen);
		SM_CHECK(kr_store_get(&m->s, sr, key, keylen, &v) == 1);
		rc = sm_put(m, res, k, rvi, uidi, v.obj, v.objlen, sm_rd8(r) % 4, NULL, NULL);
		if (rc)
			return rc;
		m->scratch_valid = 0;
		break;
	}
	case 7: {  /* delete */
		res = sm_pick_res(r);
		k = sm_pick_key(r);
		key = sm_keyp(k, &keylen);
		rc = kr_store_delete(&m->s, res, key, keylen, &v);
		if (res < 0 || res >= SM_RES || k >= SM_KEYS || !m->ent[res][k].used) {
			SM_CHECK(rc == 0 && v.key == NULL);
			break;
		}
		SM_CHECK(rc == 1);
		rc = sm_match(m, &v, res, k);   /* after the delete: bytes still intact */
		if (rc)
			return rc;
		m->garbage += m->ent[res][k].recsize;
		m->ent[res][k].used = 0;
		m->count--;
		SM_CHECK(kr_store_get(&m->s, res, key, keylen, NULL) == 0);
		break;
	}
	case 8: {  /* scratch */
		size_t want = (size_t)sm_rd16(r) % (SM_ARENA_MAX + 1), cap = 1, need, room, held;
		char *p;

		if (sm_rd8(r) & 1)
			want %= 2048;
		room = m->size - m->used;
		need = want + KR_STORE_HDR + KR_STORE_TAIL_ROOM + m->p.reserve;
		held = m->used - m->garbage;
		if (m->garbage && ((room < need && room + m->garbage >= need) ||
				   m->garbage >= (held > m->p.reserve ? held : m->p.reserve))) {
			m->used -= m->garbage;
			m->garbage = 0;
			m->compactions++;
		}
		p = kr_store_scratch(&m->s, want, &cap);
		room = m->size - m->used;
		if (room < KR_STORE_HDR + KR_STORE_TAIL_ROOM) {
			SM_CHECK(p == NULL && cap == 0);
			m->scratch_valid = 0;
			break;
		}
		SM_CHECK(p == m->s.arena + m->used + KR_STORE_HDR);
		SM_CHECK(cap == room - KR_STORE_HDR - KR_STORE_TAIL_ROOM);
		SM_CHECK(p + cap + KR_STORE_TAIL_ROOM == m->s.arena + m->size);
		m->scratch = p;
		m->scratch_cap = cap;
		m->scratch_valid = 1;
		break;
	}
	case 9: {  /* mark */
		uint32_t seen = sm_rd8(r) % 4;

		res = sm_pick_res(r);
		k = sm_pick_key(r);
		key = sm_keyp(k, &keylen);
		rc = kr_store_mark(&m->s, res, key, keylen, seen);
		if (res < 0 || res >= SM_RES || k >= SM_KEYS || !m->ent[res][k].used) {
			SM_CHECK(rc == 0);
			break;
		}
		SM_CHECK(rc == 1);
		m->ent[res][k].seen = seen;
		break;
	}
	case 10: {  /* sweep */
		uint32_t seen = sm_rd8(r) % 4;
		size_t n, expect = 0;

		res = sm_pick_res(r);
		m->sweep_res = res;
		m->sweep_seen = seen;
		m->sweep_calls = 0;
		m->sweep_bad = 0;
		if (res >= 0 && res < SM_RES)
			for (k = 0; k < SM_KEYS; k++)
				if (m->ent[res][k].used && m->ent[res][k].seen != seen)
					expect++;
		n = kr_store_sweep(&m->s, res, seen, sm_sweep_cb, m);
		SM_CHECK(m->sweep_bad == 0);
		SM_CHECK(n == expect && m->sweep_calls == expect);
		if (res >= 0 && res < SM_RES)
			for (k = 0; k < SM_KEYS; k++)
				if (m->ent[res][k].used == 2) {
					m->ent[res][k].used = 0;
					m->garbage += m->ent[res][k].recsize;
					m->count--;
				}
		break;
	}
	default: {  /* compact */
		size_t got = kr_store_compact(&m->s);

		SM_CHECK(got == m->garbage);
		m->used -= m->garbage;
		m->garbage = 0;
		m->compactions++;
		m->scratch_valid = 0;
		break;
	}
	}
	if (m->steps % m->verify_every)
		return 0;
	return sm_verify(m);
}

/* Parameters from the first bytes of a fuzz input (or the PRNG). */
static void sm_params_from(struct sm_rd *r, struct sm_params *p)
{
	uint8_t b;

	p->arena_size = 64 + sm_rd16(r) % (SM_ARENA_MAX - 64 + 1);
	p->misalign = sm_rd8(r) % 8;
	b = sm_rd8(r);
	p->max_entries = b % 8 == 7 ? b % 4 : 1 + (uint32_t)(b >> 2) % SM_MAX_ENTRIES;
	b = sm_rd8(r);
	p->nbuckets = b % 5 == 4 ? b % (SM_MAX_BUCKETS + 1) : 1u << (b % 8);
	b = sm_rd8(r);
	p->hash_mask = b % 3 == 0 ? (uint64_t)(b >> 2) % 8 : ~(uint64_t)0;
	b = sm_rd8(r);
	p->reserve = b % 4 == 0 ? 0 : b % 4 == 1 ? KR_STORE_KEY_RECORD_MAX : (size_t)b * 8;
}

#endif /* KR_STORE_MODEL_H */
