#include <stdio.h>
#include <string.h>

#include "kreflect.h"
#include "port.h"
#include "store.h"
#include "test.h"

#include "../fuzz/store_model.h"

#define ARENA 16384
#define ENTRIES 64

static _Alignas(16) char arena[ARENA + 16];
static struct kr_entry ents[ENTRIES];
static int32_t bkts[ENTRIES];
static struct kr_store st;

static struct kr_store *fresh(size_t arena_size, uint32_t max, uint32_t nb, size_t reserve)
{
	/* Caller memory need not be zeroed: the index's too starts as garbage. */
	memset(arena, 0x5a, sizeof(arena));
	memset(ents, 0x5a, sizeof(ents));
	memset(bkts, 0x5a, sizeof(bkts));
	kr_store_init(&st, arena, arena_size, ents, max, bkts, nb, reserve);
	return &st;
}

static int put(struct kr_store *s, int res, const char *key, const char *rv, const char *uid,
	       const char *obj, uint32_t seen, struct kr_store_view *old)
{
	return kr_store_put(s, res, key, strlen(key), rv, uid, obj, obj ? strlen(obj) : 0, seen, old);
}

static int get(const struct kr_store *s, int res, const char *key, struct kr_store_view *v)
{
	return kr_store_get(s, res, key, strlen(key), v);
}

static int view_is(const struct kr_store_view *v, int res, const char *key, const char *rv,
		   const char *uid, const char *obj)
{
	if (v->res != res || !v->key || v->keylen != strlen(key) || strcmp(v->key, key) ||
	    strcmp(v->rv, rv) || strcmp(v->uid, uid))
		return 0;
	if (!obj)
		return !v->held && v->obj == NULL && v->objlen == 0;
	return v->held && v->objlen == strlen(obj) && memcmp(v->obj, obj, v->objlen) == 0;
}

static int consistent(const struct kr_store *s)
{
	const char *why = NULL;
	int rc = kr_store_check(s, &why);

	if (rc)
		fprintf(stderr, "kr_store_check: %s\n", why);
	return rc == 0;
}

KR_TEST(store, add_modify_unchanged_replaced_delete)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	struct kr_store_view old, v;

	check(put(s, 0, "default/a", "1", "u1", "{\"v\":1}", 7, &old) == KR_STORE_ADDED);
	check(old.key == NULL && old.held == 0);
	check(get(s, 0, "default/a", &v) == 1 && view_is(&v, 0, "default/a", "1", "u1", "{\"v\":1}"));
	check(v.key[v.keylen] == '\0');
	check(s->objects == 1 && s->not_held == 0 && s->nentries == 1 && s->garbage == 0);
	check(s->entries[0].seen == 7);

	/* same rv: nothing written, seen updated */
	size_t used = s->used;
	check(put(s, 0, "default/a", "1", "u1", "{\"v\":1, changed?}", 8, &old) == KR_STORE_UNCHANGED);
	check(view_is(&old, 0, "default/a", "1", "u1", "{\"v\":1}"));
	check(s->used == used && s->garbage == 0 && s->entries[0].seen == 8);
	/* an unknown uid is not a different uid */
	check(put(s, 0, "default/a", "1", "", "{}", 8, NULL) == KR_STORE_UNCHANGED);
	check(put(s, 0, "default/a", "1", NULL, "{}", 8, NULL) == KR_STORE_UNCHANGED);

	check(put(s, 0, "default/a", "2", "u1", "{\"v\":2}", 9, &old) == KR_STORE_MODIFIED);
	check(view_is(&old, 0, "default/a", "1", "u1", "{\"v\":1}"));
	check(get(s, 0, "default/a", &v) == 1 && view_is(&v, 0, "default/a", "2", "u1", "{\"v\":2}"));
	check(s->garbage == used && s->objects == 1 && s->nentries == 1);

	check(put(s, 0, "default/a", "3", "u2", "{\"v\":3}", 9, &old) == KR_STORE_REPLACED);
	check(view_is(&old, 0, "default/a", "2", "u1", "{\"v\":2}"));
	check(get(s, 0, "default/a", &v) == 1 && view_is(&v, 0, "default/a", "3", "u2", "{\"v\":3}"));
	/* same rv but a different uid is a replacement too, not "unchanged" */
	check(put(s, 0, "default/a", "3", "u3", "{\"v\":4}", 9, &old) == KR_STORE_REPLACED);
	/* an empty uid on either side never replaces */
	check(put(s, 0, "default/a", "4", "", "{\"v\":5}", 9, &old) == KR_STORE_MODIFIED);
	check(put(s, 0, "default/a", "5", "u9", "{\"v\":6}", 9, &old) == KR_STORE_MODIFIED);
	check(strcmp(old.uid, "") == 0);

	/* the same key under another resource is another entry */
	check(put(s, 1, "default/a", "1", "u1", "{\"r\":1}", 1, NULL) == KR_STORE_ADDED);
	check(kr_store_count(s, 0) == 1 && kr_store_count(s, 1) == 1 && kr_store_count(s, -1) == 2);

	check(kr_store_delete(s, 0, "default/a", 9, &old) == 1);
	check(view_is(&old, 0, "default/a", "5", "u9", "{\"v\":6}"));
	check(get(s, 0, "default/a", &v) == 0 && v.key == NULL);
	check(get(s, 1, "default/a", &v) == 1 && view_is(&v, 1, "default/a", "1", "u1", "{\"r\":1}"));
	check(kr_store_delete(s, 0, "default/a", 9, &old) == 0 && old.key == NULL);
	check(kr_store_delete(s, 1, "default/a", 9, NULL) == 1);
	check(s->nentries == 0 && s->objects == 0 && s->garbage == s->used);
	check(kr_store_mark(s, 1, "default/a", 9, 3) == 0);
	check(consistent(s));
	return 0;
}

KR_TEST(store, commit_in_place_from_scratch)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	static const char obj[] = "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"7\"}}";
	struct kr_store_view v;
	size_t cap, used;
	char *p;

	p = kr_store_scratch(s, sizeof(obj), &cap);
	check(p != NULL && cap >= sizeof(obj));
	check(p == s->arena + KR_STORE_HDR);
	check(p + cap + KR_STORE_TAIL_ROOM == s->arena + s->size);
	memcpy(p, obj, sizeof(obj) - 1);
	check(kr_store_put(s, 2, "ns/x", 4, "7", "uid-x", p, sizeof(obj) - 1, 1, NULL) == KR_STORE_ADDED);
	check(get(s, 2, "ns/x", &v) == 1);
	check(v.obj == p);   /* not copied */
	check(view_is(&v, 2, "ns/x", "7", "uid-x", obj));

	/* the next scratch starts after that record */
	used = s->used;
	p = kr_store_scratch(s, 100, &cap);
	check(p == s->arena + used + KR_STORE_HDR);
	/* an object framed a few bytes into the scratch is moved down to it */
	memcpy(p + 5, obj, sizeof(obj) - 1);
	check(kr_store_put(s, 2, "ns/y", 4, "8", NULL, p + 5, sizeof(obj) - 1, 1, NULL) == KR_STORE_ADDED);
	check(get(s, 2, "ns/y", &v) == 1 && v.obj == p && view_is(&v, 2, "ns/y", "8", "", obj));

	/* key and rv built in the tail room right after the object are safe */
	p = kr_store_scratch(s, 100, &cap);
	memcpy(p, obj, sizeof(obj) - 1);
	memcpy(p + sizeof(obj) - 1, "ns/z", 5);
	memcpy(p + sizeof(obj) - 1 + 5, "9", 2);
	check(kr_store_put(s, 2, p + sizeof(obj) - 1, 4, p + sizeof(obj) - 1 + 5, "u", p,
			   sizeof(obj) - 1, 1, NULL) == KR_STORE_ADDED);
	check(get(s, 2, "ns/z", &v) == 1 && v.obj == p && view_is(&v, 2, "ns/z", "9", "u", obj));

	/* the same in the key-only case, where the record header lands on the strings */
	p = kr_store_scratch(s, 100, &cap);
	memcpy(p, "ns/w", 5);
	memcpy(p + 5, "10", 3);
	check(kr_store_put(s, 2, p, 4, p + 5, p + 5, NULL, 0, 1, NULL) == KR_STORE_NOT_HELD);
	check(get(s, 2, "ns/w", &v) == 1 && view_is(&v, 2, "ns/w", "10", "10", NULL));

	/* an object running past the arena's end is refused */
	p = kr_store_scratch(s, 100, &cap);
	check(kr_store_put(s, 2, "ns/q", 4, "1", NULL, p, cap + KR_STORE_TAIL_ROOM + 1, 1, NULL) ==
	      KR_EINVAL);
	check(consistent(s));
	return 0;
}

KR_TEST(store, copy_in_from_outside_buffer)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	char buf[600];
	struct kr_store_view v;
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)('A' + i % 23);
	check(kr_store_put(s, 0, "kube-system/cm", 14, "42", "u", buf, sizeof(buf), 0, NULL) ==
	      KR_STORE_ADDED);
	check(get(s, 0, "kube-system/cm", &v) == 1);
	check(v.obj != buf && v.obj == s->arena + KR_STORE_HDR && v.objlen == sizeof(buf));
	check(memcmp(v.obj, buf, sizeof(buf)) == 0);
	memset(buf, 0, sizeof(buf));   /* the store does not keep the caller's buffer */
	check(v.obj[0] == 'A' && v.obj[599] == (char)('A' + 599 % 23));
	check(s->used == KR_STORE_RECORD_SIZE(600, 14, 2, 1) && s->used % 8 == 0);
	check(s->high_water == s->used);
	/* an empty object is held as such, distinct from a key-only record */
	check(kr_store_put(s, 0, "e", 1, "1", NULL, buf, 0, 0, NULL) == KR_STORE_ADDED);
	check(get(s, 0, "e", &v) == 1 && v.held == 1 && v.obj != NULL && v.objlen == 0);
	check(consistent(s));
	return 0;
}

struct swept {
	int n;
	char keys[8][16];
	int res[8];
};

static void on_swept(void *arg, const struct kr_store_view *v)
{
	struct swept *w = arg;

	if (w->n < 8) {
		snprintf(w->keys[w->n], sizeof(w->keys[0]), "%s", v->key);
		w->res[w->n] = v->res;
	}
	w->n++;
}

KR_TEST(store, sweep_removes_exactly_the_unseen_entries_of_that_resource)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	struct swept w = { 0 };
	struct kr_store_view v;
	char key[16];
	int i;

	/* resource 0: a0..a9 listed at generation 1; resource 1: same keys, generation 1 */
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "ns/a%d", i);
		check(put(s, 0, key, "1", "u", "{}", 1, NULL) == KR_STORE_ADDED);
		check(put(s, 1, key, "1", "u", "{}", 1, NULL) == KR_STORE_ADDED);
	}
	/* relist of resource 0 at generation 2 sees all but a3 and a7 */
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "ns/a%d", i);
		if (i == 3 || i == 7)
			continue;
		if (i % 2)
			check(put(s, 0, key, "1", "u", "{}", 2, NULL) == KR_STORE_UNCHANGED);
		else
			check(kr_store_mark(s, 0, key, strlen(key), 2) == 1);
	}
	check(kr_store_sweep(s, 0, 2, on_swept, &w) == 2);
	check(w.n == 2 && w.res[0] == 0 && w.res[1] == 0);
	check((strcmp(w.keys[0], "ns/a3") == 0 && strcmp(w.keys[1], "ns/a7") == 0) ||
	      (strcmp(w.keys[0], "ns/a7") == 0 && strcmp(w.keys[1], "ns/a3") == 0));
	check(get(s, 0, "ns/a3", &v) == 0 && get(s, 0, "ns/a7", &v) == 0);
	check(get(s, 0, "ns/a4", &v) == 1);
	check(kr_store_count(s, 0) == 8 && kr_store_count(s, 1) == 10);   /* resource 1 untouched */
	/* a second sweep with the same mark finds nothing; NULL fn is allowed */
	check(kr_store_sweep(s, 0, 2, NULL, NULL) == 0);
	check(kr_store_sweep(s, 5, 2, on_swept, &w) == 0);
	check(kr_store_sweep(s, -1, 2, on_swept, &w) == 0 && w.n == 2);
	/* resource 1 relisted empty: everything goes */
	check(kr_store_sweep(s, 1, 3, NULL, NULL) == 10);
	check(kr_store_count(s, 1) == 0 && kr_store_count(s, -1) == 8);
	check(consistent(s));
	return 0;
}

KR_TEST(store, full_arena_not_held_then_held_again)
{
	/* room for four 600-byte objects, with a reserve that can record keys */
	size_t rec = KR_STORE_RECORD_SIZE(600, 5, 1, 1);
	size_t reserve = KR_STORE_KEY_RECORD_MAX;
	struct kr_store *s = fresh(4 * rec + reserve + 8, ENTRIES, ENTRIES, reserve);
	struct kr_store_view v, old;
	char obj[600], key[8], *p;
	size_t cap;
	int i;

	memset(obj, 'o', sizeof(obj));
	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "ns/o%d", i);
		check(kr_store_put(s, 0, key, 5, "1", "u", obj, sizeof(obj), 1, NULL) == KR_STORE_ADDED);
	}
	/* the fifth would eat into the reserve: key, rv and uid only */
	check(kr_store_put(s, 0, "ns/o4", 5, "1", "u", obj, sizeof(obj), 1, NULL) == KR_STORE_NOT_HELD);
	check(get(s, 0, "ns/o4", &v) == 1 && view_is(&v, 0, "ns/o4", "1", "u", NULL));
	check(s->not_held == 1 && s->objects == 4 && s->nentries == 5);
	/* the same rv again, still no room: nothing written */
	size_t used = s->used;
	check(kr_store_put(s, 0, "ns/o4", 5, "1", "u", obj, sizeof(obj), 2, &old) == KR_STORE_NOT_HELD);
	check(s->used == used && s->not_held == 1 && view_is(&old, 0, "ns/o4", "1", "u", NULL));
	/* a held object updated with one that does not fit loses its bytes, keeps its key */
	check(kr_store_put(s, 0, "ns/o0", 5, "2", "u", obj, sizeof(obj) - 1, 1, &old) == KR_STORE_NOT_HELD);
	check(old.held == 1 && old.objlen == 600);
	check(get(s, 0, "ns/o0", &v) == 1 && view_is(&v, 0, "ns/o0", "2", "u", NULL));
	check(s->not_held == 2 && s->objects == 3);
	check(consistent(s));

	/* room comes back: two deletes, then the scratch compacts */
	check(kr_store_delete(s, 0, "ns/o1", 5, NULL) == 1);
	check(kr_store_delete(s, 0, "ns/o2", 5, NULL) == 1);
	p = kr_store_scratch(s, sizeof(obj), &cap);
	check(s->compactions == 1 && s->garbage == 0);
	check(p != NULL && cap >= sizeof(obj));
	memset(p, 'n', sizeof(obj));
	check(kr_store_put(s, 0, "ns/o4", 5, "1", "u", p, sizeof(obj), 3, &old) == KR_STORE_ADDED);
	check(old.key != NULL && old.held == 0);
	check(get(s, 0, "ns/o4", &v) == 1 && v.held && v.obj == p && v.objlen == 600 && v.obj[599] == 'n');
	check(s->not_held == 1 && s->objects == 2);
	/* ns/o0 comes back with a new rv: ADDED too, it was never announced */
	p = kr_store_scratch(s, sizeof(obj), &cap);
	memset(p, 'm', sizeof(obj));
	check(kr_store_put(s, 0, "ns/o0", 5, "3", "u", p, sizeof(obj), 3, NULL) == KR_STORE_ADDED);
	check(s->not_held == 0 && s->objects == 3);
	check(get(s, 0, "ns/o3", &v) == 1 && v.held && v.obj[0] == 'o' && v.obj[599] == 'o');
	check(consistent(s));
	return 0;
}

KR_TEST(store, reserve_is_kept_for_objects_not_for_keys)
{
	struct kr_store *s = fresh(1024, ENTRIES, ENTRIES, 512);
	size_t room = s->size, rec;
	char obj[512];
	struct kr_store_view v;

	memset(obj, 'x', sizeof(obj));
	/* largest object that leaves exactly the reserve: held */
	rec = room - 512;
	check(kr_store_put(s, 0, "k", 1, "1", NULL, obj, rec - KR_STORE_HDR - 1 - 1 - 1 - 3, 1, NULL) ==
	      KR_STORE_ADDED);
	check(s->size - s->used == 512);
	/* any object now would cut into the reserve; a key-only record may */
	check(kr_store_put(s, 0, "j", 1, "1", NULL, obj, 1, 1, NULL) == KR_STORE_NOT_HELD);
	check(get(s, 0, "j", &v) == 1 && !v.held);
	check(s->size - s->used == 512 - KR_STORE_RECORD_SIZE(0, 1, 1, 0));
	check(consistent(s));
	return 0;
}

KR_TEST(store, index_full_and_arena_full_refuse_without_change)
{
	struct kr_store *s = fresh(ARENA, 4, 4, 0);
	struct kr_store_view v;
	size_t used;
	char key[8];
	int i;

	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		check(put(s, 0, key, "1", "", "{}", 1, NULL) == KR_STORE_ADDED);
	}
	used = s->used;
	check(put(s, 0, "k4", "1", "", "{}", 1, NULL) == KR_ENOSPC);
	check(put(s, 0, "k5", "1", "", NULL, 1, NULL) == KR_ENOSPC);
	check(s->untracked == 2 && s->used == used && s->nentries == 4 && s->garbage == 0);
	check(get(s, 0, "k4", &v) == 0);
	/* existing keys still update */
	check(put(s, 0, "k2", "2", "", "{\"a\":1}", 1, NULL) == KR_STORE_MODIFIED);
	check(consistent(s));

	/* an arena too small for even the key-only record */
	s = fresh(KR_STORE_RECORD_SIZE(0, 2, 1, 0) - 8, 4, 4, 0);
	check(put(s, 0, "k1", "1", "", "{}", 1, NULL) == KR_ENOSPC);
	check(s->untracked == 1 && s->used == 0 && s->nentries == 0);
	check(consistent(s));
	s = fresh(KR_STORE_RECORD_SIZE(0, 2, 1, 0), 4, 4, 0);
	check(put(s, 0, "k1", "1", "", "{\"a\":1}", 1, NULL) == KR_STORE_NOT_HELD);
	check(s->used == s->size);
	/* an update that cannot be recorded leaves the old version and its seen mark */
	check(put(s, 0, "k1", "22", "", NULL, 5, NULL) == KR_ENOSPC);
	check(get(s, 0, "k1", &v) == 1 && strcmp(v.rv, "1") == 0 && s->entries[0].seen == 1);
	check(kr_store_scratch(s, 0, &used) == NULL && used == 0);
	check(consistent(s));

	/* no buckets: nothing can be stored, nothing breaks */
	kr_store_init(&st, arena, ARENA, ents, ENTRIES, bkts, 0, 0);
	check(put(&st, 0, "a", "1", "", "{}", 1, NULL) == KR_ENOSPC);
	check(get(&st, 0, "a", &v) == 0 && kr_store_count(&st, -1) == 0);
	check(consistent(&st));
	return 0;
}

static char shadow[64][400];
static size_t shadow_len[64];

KR_TEST(store, fragmentation_is_undone_by_scratch_compaction)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	struct kr_store_view v;
	size_t cap, want, freed = 0;
	char key[16], *p;
	int i, j, n = 0;

	/* fill the arena with objects of varied sizes framed in place */
	for (;;) {
		size_t len = 200 + (size_t)(n * 37) % 190;

		p = kr_store_scratch(s, len, &cap);
		if (!p || cap < len || n == 64)
			break;
		for (j = 0; j < (int)len; j++)
			p[j] = shadow[n][j] = (char)(n * 7 + j);
		shadow_len[n] = len;
		snprintf(key, sizeof(key), "ns/o%d", n);
		check(kr_store_put(s, 1, key, strlen(key), "1", "u", p, len, 1, NULL) == KR_STORE_ADDED);
		n++;
	}
	check(n > 20 && s->nentries == (uint32_t)n);
	/* delete every other object */
	for (i = 0; i < n; i += 2) {
		snprintf(key, sizeof(key), "ns/o%d", i);
		check(kr_store_get(s, 1, key, strlen(key), &v) == 1);
		freed += KR_STORE_RECORD_SIZE(v.objlen, v.keylen, 1, 1);
		check(kr_store_delete(s, 1, key, strlen(key), NULL) == 1);
	}
	check(s->garbage == freed);
	/* a big object needs contiguous room that only compaction gives */
	want = s->size - s->used + freed / 2;
	p = kr_store_scratch(s, want, &cap);
	check(s->compactions == 1 && s->garbage == 0);
	check(p != NULL && cap >= want);
	memset(p, 'B', want);
	check(kr_store_put(s, 1, "ns/big", 6, "1", "u", p, want, 1, NULL) == KR_STORE_ADDED);
	check(kr_store_get(s, 1, "ns/big", 6, &v) == 1 && v.obj == p && v.objlen == want);
	/* every survivor is intact */
	for (i = 1; i < n; i += 2) {
		snprintf(key, sizeof(key), "ns/o%d", i);
		check(kr_store_get(s, 1, key, strlen(key), &v) == 1);
		check(v.objlen == shadow_len[i] && memcmp(v.obj, shadow[i], v.objlen) == 0);
		check(strcmp(v.rv, "1") == 0 && strcmp(v.uid, "u") == 0);
	}
	for (i = 0; i < n; i += 2) {
		snprintf(key, sizeof(key), "ns/o%d", i);
		check(kr_store_get(s, 1, key, strlen(key), &v) == 0);
	}
	/* a scratch that compaction cannot satisfy does not compact */
	check(kr_store_delete(s, 1, "ns/o1", 5, NULL) == 1);
	p = kr_store_scratch(s, ARENA, &cap);
	check(s->compactions == 1 && s->garbage != 0);
	check(kr_store_compact(s) > 0 && s->garbage == 0 && s->compactions == 2);
	check(consistent(s));
	return 0;
}

KR_TEST(store, invalid_arguments)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	char key[KR_KEY_MAX + 1], rv[KR_RV_MAX + 1];
	struct kr_store_view old;

	memset(key, 'k', sizeof(key));
	memset(rv, '7', sizeof(rv));
	rv[KR_RV_MAX] = '\0';
	check(kr_store_put(s, 0, key, KR_KEY_MAX, "1", "", "{}", 2, 0, &old) == KR_EINVAL);
	check(old.key == NULL);
	check(kr_store_put(s, 0, key, KR_KEY_MAX - 1, "1", "", "{}", 2, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_put(s, 0, "", 0, "1", "", "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 0, NULL, 3, "1", "", "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 0, "a", 1, rv, "", "{}", 2, 0, NULL) == KR_EINVAL);          /* 64 */
	check(kr_store_put(s, 0, "a", 1, rv + 1, "", "{}", 2, 0, NULL) == KR_STORE_ADDED); /* 63 */
	check(kr_store_put(s, 0, "b", 1, "1", rv, "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 0, "b", 1, "1", rv + 1, "{}", 2, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_put(s, 0, "c", 1, NULL, "", "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 0, "c", 1, "1", "", NULL, 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, -1, "c", 1, "1", "", "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 65536, "c", 1, "1", "", "{}", 2, 0, NULL) == KR_EINVAL);
	check(kr_store_put(s, 65535, "c", 1, "1", "", "{}", 2, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_get(s, 0, key, KR_KEY_MAX, NULL) == 0);
	check(kr_store_get(s, -1, "c", 1, NULL) == 0);
	check(kr_store_count(s, -1) == 4 && s->untracked == 0);
	check(consistent(s));
	return 0;
}

KR_TEST(store, colliding_hashes_never_confuse_keys)
{
	static const uint32_t buckets[] = { 1, 2, 64 };
	struct kr_store_view v;
	char key[64];
	int b, i, r;

	for (b = 0; b < 3; b++) {
		struct kr_store *s = fresh(ARENA, ENTRIES, buckets[b], 0);

		s->hash_mask = b == 2 ? 0 : 1;  /* every full hash equal (or nearly) */
		for (i = 0; i < 30; i++)
			for (r = 0; r < 2; r++) {
				/* equal lengths, differing only in the last byte */
				snprintf(key, sizeof(key), "namespace/name-%c", 'A' + i);
				check(put(s, r, key, r ? "2" : "1", "", r ? "{\"r\":1}" : "{\"r\":0}", 0,
					  NULL) == KR_STORE_ADDED);
			}
		check(s->nentries == 60);
		for (i = 0; i < 30; i += 3) {
			snprintf(key, sizeof(key), "namespace/name-%c", 'A' + i);
			check(kr_store_delete(s, i % 2, key, strlen(key), NULL) == 1);
		}
		for (i = 0; i < 30; i++)
			for (r = 0; r < 2; r++) {
				snprintf(key, sizeof(key), "namespace/name-%c", 'A' + i);
				if (i % 3 == 0 && r == i % 2) {
					check(get(s, r, key, &v) == 0);
					continue;
				}
				check(get(s, r, key, &v) == 1);
				check(view_is(&v, r, key, r ? "2" : "1", "", r ? "{\"r\":1}" : "{\"r\":0}"));
			}
		check(get(s, 0, "namespace/name-", &v) == 0);
		check(get(s, 0, "namespace/name-AA", &v) == 0);
		check(consistent(s));
	}
	return 0;
}

KR_TEST(store, init_trims_alignment_and_bucket_count)
{
	struct kr_store_view v;

	kr_store_init(&st, arena + 3, 1000, ents, ENTRIES, bkts, 48, 0);
	check((uintptr_t)st.arena % 8 == 0 && st.arena == arena + 8);
	check(st.size == (1000 - 5) / 8 * 8);
	check(st.nbuckets == 32);
	check(put(&st, 0, "a", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(get(&st, 0, "a", &v) == 1 && (uintptr_t)v.obj % 8 == 0);
	check(consistent(&st));
	kr_store_init(&st, NULL, 1000, ents, ENTRIES, bkts, 64, 0);
	check(st.size == 0 && put(&st, 0, "a", "1", "", "{}", 0, NULL) == KR_ENOSPC);
	check(consistent(&st));
	return 0;
}

static void count_views(void *arg, const struct kr_store_view *v)
{
	size_t *n = arg;

	if (v->key && v->rv && v->uid)
		(*n)++;
}

KR_TEST(store, foreach_and_count_by_resource)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 0);
	size_t n = 0;

	check(put(s, 0, "a", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 3, "a", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 3, "b", "1", "", NULL, 0, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_foreach(s, 3, count_views, &n) == 2 && n == 2);
	check(kr_store_foreach(s, -1, count_views, &n) == 3 && n == 5);
	check(kr_store_foreach(s, 1, count_views, &n) == 0 && n == 5);
	check(kr_store_count(s, 0) == 1 && kr_store_count(s, 3) == 2 && kr_store_count(s, -1) == 3);
	return 0;
}

static struct sm model;

static int run_model(const struct sm_params *p, uint64_t seed, unsigned long steps)
{
	struct sm_rd rd = { NULL, 0, seed };
	unsigned long i;
	int line;

	sm_init(&model, p);
	for (i = 0; i < steps; i++) {
		line = sm_step(&model, &rd);
		if (line) {
			fprintf(stderr, "store model: step %lu: store_model.h:%d: %s\n", model.steps, line,
				model.fail_what ? model.fail_what : "?");
			return line;
		}
	}
	return 0;
}

KR_TEST(store, randomized_100000_operations_match_the_model)
{
	static const struct sm_params cfg[] = {
		{ SM_ARENA_MAX, 0, SM_MAX_ENTRIES, SM_MAX_ENTRIES, ~(uint64_t)0, 0 },
		{ 8000, 3, 48, 4, 3, KR_STORE_KEY_RECORD_MAX },
		{ 3000, 5, SM_MAX_ENTRIES, SM_MAX_BUCKETS, ~(uint64_t)0, 1024 },
		{ SM_ARENA_MAX, 0, 5, 8, ~(uint64_t)0, 0 },
	};
	unsigned long compactions = 0;
	size_t c;

	for (c = 0; c < sizeof(cfg) / sizeof(cfg[0]); c++) {
		check(run_model(&cfg[c], 0x9E3779B97F4A7C15ULL + c, 25000) == 0);
		compactions += model.s.compactions;
	}
	check(compactions > 0);   /* the runs did compact */
	return 0;
}

KR_TEST(store, randomized_configurations_match_the_model)
{
	struct sm_rd rd = { NULL, 0, 12345 };
	struct sm_params p;
	int i;

	for (i = 0; i < 40; i++) {
		sm_params_from(&rd, &p);
		check(run_model(&p, 1000 + (uint64_t)i, 1500) == 0);
	}
	return 0;
}

KR_TEST(store, check_catches_corruption)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, 4, 0);
	const char *why = NULL;
	uint32_t u32;
	uint64_t h;

	check(put(s, 0, "a", "1", "", "{\"x\":1}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "b", "1", "", "{\"x\":2}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "a", "2", "", "{\"x\":3}", 0, NULL) == KR_STORE_MODIFIED);
	check(kr_store_check(s, &why) == 0 && why == NULL);

	s->garbage += 8;
	check(kr_store_check(s, &why) == KR_EINVAL && why != NULL);
	s->garbage -= 8;
	memcpy(&u32, s->arena, 4);          /* the first record's size */
	u32 += 8;
	memcpy(s->arena, &u32, 4);
	check(kr_store_check(s, &why) == KR_EINVAL);
	u32 -= 8;
	memcpy(s->arena, &u32, 4);
	h = s->entries[1].hash;
	s->entries[1].hash ^= 1;
	check(kr_store_check(s, &why) == KR_EINVAL);
	s->entries[1].hash = h;
	s->objects++;
	check(kr_store_check(s, &why) == KR_EINVAL);
	s->objects--;
	check(kr_store_delete(s, 0, "b", 1, NULL) == 1);   /* entry 1 goes on the free list */
	check(kr_store_check(s, NULL) == 0);
	s->entries[1].next = 2;             /* links are index + 1: a free-list cycle */
	check(kr_store_check(s, &why) == KR_EINVAL);
	s->entries[1].next = 0;
	s->fresh = ENTRIES + 1;             /* more entries taken than the index has */
	check(kr_store_check(s, &why) == KR_EINVAL);
	s->fresh = 2;
	check(kr_store_check(s, NULL) == 0);
	return 0;
}

/* Entries are taken in order as objects come (none is written before), freed
 * ones first: the order a whole free list set up at init gave. */
KR_TEST(store, entries_are_taken_in_order_and_freed_ones_first)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, 4, 0);

	check(s->fresh == 0 && s->free_list == 0);
	check(put(s, 0, "a", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "b", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "c", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(s->fresh == 3);
	check(kr_store_delete(s, 0, "b", 1, NULL) == 1);
	check(kr_store_delete(s, 0, "a", 1, NULL) == 1);
	check(put(s, 0, "d", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(s->fresh == 3 && s->entries[0].flags != 0);   /* a's entry, freed last */
	check(put(s, 0, "e", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "f", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(s->fresh == 4 && kr_store_count(s, 0) == 4);
	check(kr_store_check(s, NULL) == 0);
	return 0;
}

/* A full index refuses the next new key, whatever the arena has left. */
KR_TEST(store, a_full_index_refuses_a_new_key)
{
	struct kr_store *s = fresh(ARENA, 2, 4, 0);

	check(put(s, 0, "a", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "b", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "c", "1", "", "{}", 0, NULL) == KR_ENOSPC);
	check(put(s, 0, "b", "2", "", "{}", 0, NULL) == KR_STORE_MODIFIED);
	check(kr_store_delete(s, 0, "a", 1, NULL) == 1);
	check(put(s, 0, "c", "1", "", "{}", 0, NULL) == KR_STORE_ADDED);
	check(kr_store_check(s, NULL) == 0);
	return 0;
}

KR_TEST(store, quota_caps_one_resource_only)
{
	static char qarena[1 << 16] __attribute__((aligned(8)));
	static struct kr_entry qentries[64];
	static int32_t qbuckets[64];
	static char qobj[1000];
	struct kr_store s;
	struct kr_store_view v;
	const char *why = NULL;

	memset(qobj, 'x', sizeof(qobj));
	qobj[0] = '{';
	qobj[sizeof(qobj) - 1] = '}';
	kr_store_init(&s, qarena, sizeof(qarena), qentries, 64, qbuckets, 64, 1024);
	kr_store_set_quota(&s, 0, 2500);
	check(kr_store_put(&s, 0, "ns/a", 4, "1", "u1", qobj, sizeof(qobj), 1, NULL) == KR_STORE_ADDED);
	check(kr_store_put(&s, 0, "ns/b", 4, "1", "u2", qobj, sizeof(qobj), 1, NULL) == KR_STORE_ADDED);
	check(s.held_bytes[0] == 2000);
	/* A third 1000 bytes would pass 2500: recorded, not held. */
	check(kr_store_put(&s, 0, "ns/c", 4, "1", "u3", qobj, sizeof(qobj), 1, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_get(&s, 0, "ns/c", 4, &v) == 1 && !v.held);
	check(kr_store_not_held(&s, 0) == 1 && kr_store_not_held(&s, 1) == 0);
	/* Another resource is not limited by it. */
	check(kr_store_put(&s, 1, "ns/c", 4, "1", "u4", qobj, sizeof(qobj), 1, NULL) == KR_STORE_ADDED);
	/* Replacing a held object counts the new size only once. */
	check(kr_store_put(&s, 0, "ns/a", 4, "2", "u1", qobj, sizeof(qobj), 1, NULL) == KR_STORE_MODIFIED);
	check(s.held_bytes[0] == 2000);
	/* Room again under the quota: the not-held one is held on its next put. */
	check(kr_store_delete(&s, 0, "ns/b", 4, NULL) == 1);
	check(s.held_bytes[0] == 1000);
	check(kr_store_put(&s, 0, "ns/c", 4, "1", "u3", qobj, sizeof(qobj), 1, NULL) == KR_STORE_ADDED);
	check(s.held_bytes[0] == 2000 && s.held_bytes[1] == 1000);
	check(kr_store_not_held(&s, 0) == 0 && kr_store_not_held(&s, -1) == 0);
	check(kr_store_check(&s, &why) == 0);
	return 0;
}

/*
 * Every way an entry is present but not held (the arena full, an object
 * larger than the arena, a key recorded without bytes) is counted for its
 * resource alone, and uncounted when it is held again, replaced or deleted:
 * a mirror is partial exactly while its count is not zero.
 */
KR_TEST(store, objects_not_held_are_counted_per_resource)
{
	static char big[ARENA];
	struct kr_store *s = fresh(2048, ENTRIES, ENTRIES, 256);
	const char *why = NULL;
	char obj[600];

	memset(big, 'x', sizeof(big) - 1);
	memset(obj, 'y', sizeof(obj) - 1);
	obj[sizeof(obj) - 1] = '\0';
	check(put(s, 0, "a", "1", "", obj, 0, NULL) == KR_STORE_ADDED);
	check(put(s, 0, "b", "1", "", obj, 0, NULL) == KR_STORE_ADDED);
	/* The arena (2 KiB less a 256-byte reserve) is full. */
	check(put(s, 0, "c", "1", "", obj, 0, NULL) == KR_STORE_NOT_HELD);
	check(put(s, 1, "c", "1", "", obj, 0, NULL) == KR_STORE_NOT_HELD);
	check(put(s, 1, "d", "1", "", big, 0, NULL) == KR_STORE_NOT_HELD);
	check(put(s, 1, "e", "1", "", NULL, 0, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_not_held(s, 0) == 1 && kr_store_not_held(s, 1) == 3);
	check(kr_store_not_held(s, -1) == 4 && s->not_held == 4);
	/* Resources past the per-resource counters are counted in the total only. */
	check(put(s, KR_MAX_RESOURCES, "f", "1", "", NULL, 0, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_not_held(s, KR_MAX_RESOURCES) == 0 && kr_store_not_held(s, -1) == 5);
	/* The same version again writes nothing and counts nothing twice. */
	check(put(s, 0, "c", "1", "", NULL, 0, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_not_held(s, 0) == 1);
	/* Room again: held on its next put, uncounted. */
	check(kr_store_delete(s, 0, "a", 1, NULL) == 1);
	check(kr_store_compact(s) > 0);
	check(put(s, 0, "c", "2", "", obj, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_not_held(s, 0) == 0);
	/* A held object that no longer fits is counted; deleting entries uncounts them. */
	check(put(s, 0, "b", "2", "", big, 0, NULL) == KR_STORE_NOT_HELD);
	check(kr_store_not_held(s, 0) == 1);
	check(kr_store_check(s, &why) == 0);
	check(kr_store_delete(s, 0, "b", 1, NULL) == 1 && kr_store_delete(s, 1, "d", 1, NULL) == 1);
	check(kr_store_not_held(s, 0) == 0 && kr_store_not_held(s, 1) == 2);
	check(kr_store_sweep(s, 1, 1, NULL, NULL) == 2 && kr_store_not_held(s, 1) == 0);
	check(kr_store_check(s, &why) == 0);
	return 0;
}

/*
 * A steady stream of changes to a few objects: the store compacts once the
 * dead bytes reach the held ones, so the bump tail (and with it the arena's
 * touched pages) stays near twice the mirror however long the stream, not
 * the whole arena; the arena here is 16 times the mirror.
 */
KR_TEST(store, steady_stream_keeps_the_tail_near_twice_the_held_bytes)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 256);
	char obj[200], key[8], rv[16];
	size_t cap, held, rec = 0;
	int i;

	memset(obj, 'x', sizeof(obj) - 1);
	obj[sizeof(obj) - 1] = 0;
	for (i = 0; i < 4000; i++) {
		char *p = kr_store_scratch(s, sizeof(obj), &cap);

		check(p != NULL && cap >= sizeof(obj));
		snprintf(key, sizeof(key), "ns/%d", i % 4);
		snprintf(rv, sizeof(rv), "%d", i + 1);
		memcpy(p, obj, sizeof(obj) - 1);
		check(kr_store_put(s, 0, key, strlen(key), rv, "", p, sizeof(obj) - 1, 0, NULL) >= 0);
		if (i == 3)
			rec = s->used / 4;   /* one record's bytes */
	}
	held = s->used - s->garbage;
	check(kr_store_count(s, 0) == 4 && held <= 4 * rec + 64);
	check(s->compactions > 10);
	/* held + as many dead bytes + the record that crossed the line */
	check(s->high_water <= 2 * held + 256 + rec);
	check(s->high_water < ARENA / 4);
	check(consistent(s));
	return 0;
}

/* Does kr_port_discard give pages back here? qemu-user may ignore the advice. */
static int discard_zeroes(void)
{
	static _Alignas(4096) char page[8192];

	memset(page, 0x5a, sizeof(page));
	kr_port_discard(page, sizeof(page));
	return page[0] == 0 && page[sizeof(page) - 1] == 0;
}

/*
 * A mirror that shrinks: the compaction gives back the pages above the held
 * bytes and as many dead ones (they read as zero again), and keeps the ones
 * below, which the next cycle writes.
 */
KR_TEST(store, compaction_gives_back_the_pages_above_twice_the_held_bytes)
{
	struct kr_store *s = fresh(ARENA, ENTRIES, ENTRIES, 256);
	char obj[300], key[16];
	size_t cap, held, from, to;
	uintptr_t lo, hi;
	int i;

	memset(obj, 'x', sizeof(obj));
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "ns/%d", i);
		check(kr_store_put(s, 0, key, strlen(key), "1", "", obj, sizeof(obj), 0, NULL) >= 0);
	}
	for (i = 4; i < 40; i++) {
		snprintf(key, sizeof(key), "ns/%d", i);
		check(kr_store_delete(s, 0, key, strlen(key), NULL) == 1);
	}
	from = s->used;
	check(kr_store_scratch(s, 100, &cap) != NULL);
	check(s->compactions == 1 && s->garbage == 0);
	held = s->used;
	check(from > 4 * held);
	/* The whole pages in [2 x held, the old tail): zero, when the port discards. */
	lo = ((uintptr_t)(s->arena + 2 * held) + 4095) & ~(uintptr_t)4095;
	hi = (uintptr_t)(s->arena + from) & ~(uintptr_t)4095;
	check(hi > lo);
	if (discard_zeroes()) {
		for (to = 0; to < hi - lo; to++)
			check(((const char *)lo)[to] == 0);
	} else {
		printf("store: kr_port_discard leaves pages as they are here (qemu-user)\n");
	}
	/* The held objects are intact below. */
	for (i = 0; i < 4; i++) {
		struct kr_store_view v;

		snprintf(key, sizeof(key), "ns/%d", i);
		check(get(s, 0, key, &v) == 1 && v.objlen == sizeof(obj) && memcmp(v.obj, obj, sizeof(obj)) == 0);
	}
	check(consistent(s));
	return 0;
}
