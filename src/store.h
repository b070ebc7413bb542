/*
 * The store: every object kreflect holds, keyed by (resource index,
 * "namespace/name"), in one fixed arena with a fixed index. No allocation: the
 * caller passes the arena, the entry array and the bucket array.
 *
 * Arena. Records are appended at the tail ("bump") and never move except in
 * compaction. A record is 8-byte aligned:
 *
 *     header (KR_STORE_HDR = 16 bytes): size, entry index, objlen, keylen,
 *                                       rvlen, uidlen
 *     object bytes [objlen]             (absent when the entry is not held)
 *     key \0  rv \0  uid \0  padding to 8
 *
 * so an object framed straight into the tail at tail + KR_STORE_HDR (the
 * "scratch") is committed by writing the header before it and the strings
 * after it: no copy. Replacing or deleting an entry only marks its old record
 * dead (its bytes count as garbage and stay readable); kr_store_scratch, and
 * nothing else, slides live records down over dead ones when the tail is short.
 *
 * Index. Entries live in a caller-owned array; free ones form a list through
 * `next`, used ones are chained per bucket. The hash is FNV-1a's xor-multiply
 * taken 8 key bytes at a time (state seeded with the resource index and key
 * length; an odd 64-bit multiplier and a shift per word), finished with
 * MurmurHash3's fmix64 so that the low bits picking the bucket depend on every
 * input byte. It is not keyed: names chosen to collide cost chain walks, never
 * wrong answers. A lookup compares the full hash, then the resource, then the
 * key's length and bytes: colliding keys are never confused. The bucket count
 * is fixed; with nbuckets >= max_entries chains stay short.
 *
 * Views (struct kr_store_view) point into the arena. Those from put/delete and
 * sweep callbacks stay readable until the next kr_store_scratch or
 * kr_store_compact; every view is invalidated by those two calls.
 */
#ifndef KR_STORE_H
#define KR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

#if KR_KEY_MAX < 2 || KR_KEY_MAX > 65536
#error "KR_KEY_MAX must be between 2 and 65536: the store keeps key lengths in 16 bits"
#endif
#if KR_RV_MAX < 2 || KR_RV_MAX > 256
#error "KR_RV_MAX must be between 2 and 256: the store keeps rv and uid lengths in 8 bits"
#endif

/* Bytes of a record header; records are aligned to KR_STORE_ALIGN. */
#define KR_STORE_HDR 16u
#define KR_STORE_ALIGN 8u

/* Largest key + rv + uid of one record, with their NULs. */
#define KR_STORE_STRINGS_MAX ((size_t)KR_KEY_MAX + 2u * (size_t)KR_RV_MAX)

/* What kr_store_scratch keeps free after *cap: the strings and the alignment padding. */
#define KR_STORE_TAIL_ROOM (KR_STORE_STRINGS_MAX + KR_STORE_ALIGN - 1u)

/* Arena bytes of one record (objlen 0 for a key-only record); lengths without NULs. */
#define KR_STORE_RECORD_SIZE(objlen, keylen, rvlen, uidlen)                          \
	((KR_STORE_HDR + (size_t)(objlen) + (size_t)(keylen) + (size_t)(rvlen) +    \
	  (size_t)(uidlen) + 3u + (KR_STORE_ALIGN - 1u)) & ~(size_t)(KR_STORE_ALIGN - 1u))

/* The largest key-only record: a reserve at least this big can always record a key. */
#define KR_STORE_KEY_RECORD_MAX                                                       \
	KR_STORE_RECORD_SIZE(0, KR_KEY_MAX - 1, KR_RV_MAX - 1, KR_RV_MAX - 1)

/* What kr_store_put did. Errors are negative KR_E... codes. */
#define KR_STORE_ADDED 1
#define KR_STORE_MODIFIED 2
#define KR_STORE_UNCHANGED 3
#define KR_STORE_REPLACED 4     /* same key, different uid: caller emits DELETED(old) then ADDED(new) */
#define KR_STORE_NOT_HELD 5     /* no room for the object: key, rv, uid remembered without the bytes */

/* A read-only view into the arena. */
struct kr_store_view {
	int res;                    /* resource index */
	const char *key;            /* "namespace/name" (or "name" for cluster-scoped), NUL-terminated */
	size_t keylen;
	const char *rv;             /* resourceVersion, NUL-terminated */
	const char *uid;            /* NUL-terminated, "" if unknown */
	const char *obj;            /* object JSON; NULL when not held */
	size_t objlen;              /* 0 when not held */
	int held;                   /* 1 if obj is present */
};

/* One index slot. Private to store.c except for reading. */
struct kr_entry {
	uint64_t hash;              /* of (res, key), masked with kr_store.hash_mask */
	uint32_t rec;               /* arena offset of the record */
	int32_t next;               /* next in the bucket chain, or in the free list: index + 1; 0 ends */
	uint32_t seen;              /* the caller's mark (relist generation) */
	uint16_t res;
	uint8_t flags;              /* used, held */
	uint8_t spare;
};

struct kr_store {
	char *arena;                /* 8-byte aligned start of the caller's arena */
	size_t size;                /* usable arena bytes (a multiple of 8, at most 4 GiB - 8) */
	size_t used;                /* bump tail: records occupy [0, used) */
	size_t garbage;             /* bytes of dead records below used */
	size_t high_water;          /* largest used ever */
	struct kr_entry *entries;
	uint32_t max_entries;
	uint32_t nentries;          /* entries in use, held or not */
	uint32_t fresh;             /* entries [fresh, max_entries) were never taken */
	int32_t free_list;          /* index + 1 of the first freed entry; 0: none */
	int32_t *buckets;           /* index + 1 of each chain's first entry; 0: empty */
	uint32_t nbuckets;          /* power of two */
	size_t reserve;             /* bytes kept free: an object is held only if it leaves this much free */
	size_t objects;             /* entries whose object is held */
	size_t not_held;            /* entries recorded without their object; objects + not_held == nentries */
	unsigned long compactions;  /* times the arena was compacted */
	unsigned long untracked;    /* puts refused with KR_ENOSPC */
	uint64_t hash_mask;         /* ~0; tests narrow it (on an empty store) to force full-hash collisions */
	/* Per-resource quotas (resources 0..KR_MAX_RESOURCES-1): 0 = only the arena limits it. */
	size_t quota[KR_MAX_RESOURCES];
	size_t held_bytes[KR_MAX_RESOURCES];  /* object bytes held per resource */
	size_t not_held_res[KR_MAX_RESOURCES]; /* entries recorded without their object, per resource */
};

/*
 * Sets s up over caller-owned storage; cannot fail. The arena is trimmed to
 * 8-byte alignment (and to 4 GiB - 8). nbuckets should be a power of two
 * >= max_entries; another value is rounded down to a power of two (0 buckets
 * means nothing can be stored). reserve: see struct kr_store.
 */
void kr_store_init(struct kr_store *s, char *arena, size_t arena_size, struct kr_entry *entries,
		   uint32_t max_entries, int32_t *buckets, uint32_t nbuckets, size_t reserve);

/*
 * Where to write the next incoming object: a pointer into the arena's free tail
 * (after room for a record header) and *cap bytes usable there, leaving
 * KR_STORE_TAIL_ROOM after them for the record's strings. First compacts when the
 * tail could not hold a `want`-byte object plus the reserve and compaction would
 * let it, or when the dead bytes are as many as the held ones (and at least the
 * reserve): the arena's touched pages stay near twice the bytes held. Returns NULL with *cap = 0 when the tail has not even that much room.
 * Valid until the next scratch call or put; every earlier view becomes invalid.
 */
char *kr_store_scratch(struct kr_store *s, size_t want, size_t *cap);

/*
 * Inserts or updates (res, key) with rv, uid (NULL = "") and obj[0..objlen).
 * obj in the last scratch area is committed in place (if it starts later than
 * the scratch pointer it is moved down); obj elsewhere is copied in; obj NULL
 * records the key without an object (NOT_HELD). Never compacts.
 *
 * Returns, and sets the entry's seen mark to `seen`:
 *   ADDED      a new key held, or a key recorded as NOT_HELD before now held
 *              (whatever its rv: the caller never announced it);
 *   MODIFIED   a held object replaced by a newer held one;
 *   UNCHANGED  same rv, already held, uids not different: nothing written;
 *   REPLACED   held before and now, but the uids differ (both non-empty);
 *   NOT_HELD   the object does not fit with the reserve left free (or obj is
 *              NULL): key, rv and uid are kept, the previous object (if any) is
 *              gone. Repeating a NOT_HELD put with the same rv and uid writes
 *              nothing.
 * *old (may be NULL) receives the entry as it was before the call when it
 * existed (old->key NULL otherwise); its bytes stay intact until the next
 * scratch. Errors: KR_EINVAL (empty key, key >= KR_KEY_MAX, rv or uid >=
 * KR_RV_MAX bytes, rv NULL, res outside 0..65535, obj NULL with objlen > 0, obj
 * running past the arena), KR_ENOSPC (index full, or not even the key-only
 * record fits: s->untracked++). On error nothing changed, not even the seen mark.
 */
int kr_store_put(struct kr_store *s, int res, const char *key, size_t keylen, const char *rv,
		 const char *uid, const char *obj, size_t objlen, uint32_t seen,
		 struct kr_store_view *old);

/*
 * Caps the object bytes resource res may hold at bytes (0: no cap but the
 * arena). A put that would pass the cap records the key as NOT_HELD, as
 * when the arena is full. Resources >= KR_MAX_RESOURCES have no quota.
 */
void kr_store_set_quota(struct kr_store *s, int res, size_t bytes);

/*
 * Removes (res, key). Returns 1 and fills *old (may be NULL; readable until the
 * next scratch), or 0 if absent. The record's bytes become garbage.
 */
int kr_store_delete(struct kr_store *s, int res, const char *key, size_t keylen,
		    struct kr_store_view *old);

/* Looks up (res, key): returns 1 with *v filled (v may be NULL), or 0. */
int kr_store_get(const struct kr_store *s, int res, const char *key, size_t keylen,
		 struct kr_store_view *v);

/*
 * Entry slot idx (0 .. max_entries-1) for a walk that resumes across loop
 * passes (the local endpoint's lists): returns 1 with *v filled if the slot
 * is in use, 0 if not. Slots keep their index while the arena moves.
 */
int kr_store_at(const struct kr_store *s, uint32_t idx, struct kr_store_view *v);

/* The index slot (as kr_store_at takes) of (res, key), or -1 when absent. */
int32_t kr_store_index(const struct kr_store *s, int res, const char *key, size_t keylen);

/* Sets the seen mark of an existing entry (a relisted item that is unchanged); 1 if found, else 0. */
int kr_store_mark(struct kr_store *s, int res, const char *key, size_t keylen, uint32_t seen);

/*
 * For every entry of resource res whose seen mark != seen: calls fn(arg, view)
 * (fn may be NULL; the view is valid during the call and until the next scratch),
 * then removes it. Returns how many. fn must not modify the store.
 */
size_t kr_store_sweep(struct kr_store *s, int res, uint32_t seen,
		      void (*fn)(void *arg, const struct kr_store_view *v), void *arg);

/*
 * Calls fn (may be NULL) for every entry of res (res < 0: all resources), in
 * index order, which is neither insertion nor key order. Returns the count. fn
 * must not modify the store.
 */
size_t kr_store_foreach(const struct kr_store *s, int res,
			void (*fn)(void *arg, const struct kr_store_view *v), void *arg);

/*
 * Entries of res recorded without their object (present but not held), in
 * O(1); res < 0: of every resource. Resources >= KR_MAX_RESOURCES are not
 * counted apart: 0.
 */
size_t kr_store_not_held(const struct kr_store *s, int res);

/* Number of entries of res (res < 0: all, in O(1)), held or not. Scans the index for one res. */
size_t kr_store_count(const struct kr_store *s, int res);

/*
 * Slides live records down over dead ones now, whatever the tail holds.
 * Returns the bytes reclaimed. Invalidates every view and the scratch pointer.
 * kr_store_scratch does this by itself when it helps; this is for callers
 * that want the largest free tail (a budget report, a test).
 */
size_t kr_store_compact(struct kr_store *s);

/*
 * Checks every invariant of s (records walk the arena exactly, dead bytes sum
 * to garbage, entries and records point at each other, chains and free list
 * are whole, counters agree). Returns 0, or KR_EINVAL with *why (may be NULL)
 * naming the first broken one. O(arena records + entries): for tests and fuzzing.
 */
int kr_store_check(const struct kr_store *s, const char **why);

#endif /* KR_STORE_H */
