#include "reflector.h"

#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

#define VERY_SHORT_WATCH_MS 1000
#define ROOM_RELIST_MS 1000         /* after a partial sync that left room, or a delete while partial: relist */
#define MAX_RETRY_AFTER 10             /* client-go's REST layer retries */
#define TAIL_STALL_MS 2000             /* an object in the tail silent this long may be cut */
#define WL_DEADLINE_CAP 10             /* initial events: at most 10 quiet times in all */
#define MAX_RETRY_AFTER_S 600          /* a server asking for more is capped */
#define KIND_ROOM 160                  /* room to add kind/apiVersion to list items */
#define INITIAL_EVENTS_END "k8s.io/initial-events-end"

/* A mirror restored from the state directory: never in a build without one (dead code there). */
#define RESTORED(r) (KR_WITH_STATE && (r)->restored)

/*
 * The steps from one framed event's bytes to the store (parse_event,
 * wrong_kind, read_meta, settle_object; kr_store_put is out of line anyway)
 * stay whole functions so that `make bench` can add up their inclusive cost
 * under callgrind, the parse+store figure. One call each per event.
 */
#if defined(__clang__)
#define MEASURED __attribute__((noinline))
#else
#define MEASURED __attribute__((noinline, noclone))
#endif

/*
 * What is tokenized of a watch event (kr_json_parse_sel): the envelope, the
 * object's top level and its metadata with the annotations (the bookmark
 * that ends the initial events has one); spec, data, status, labels and
 * managedFields are checked but stay one token each. List items: the same,
 * so that KR_JSON_TOKENS holds or refuses an object whichever way it came.
 */
static const char *const sel_event_paths[] = { "object.metadata.annotations" };
#define EVENT_PATHS 1
static const char *const sel_item_paths[] = { "metadata.annotations" };
#define ITEM_PATHS 1
#define TOKENS_FULL "more JSON tokens than KR_JSON_TOKENS, or nesting deeper than KR_JSON_DEPTH_MAX"

enum { REQ_WATCHLIST, REQ_LIST, REQ_WATCH };

static void start_cycle(struct kr_reflector *r);
static void start_list(struct kr_reflector *r);
static void start_watch(struct kr_reflector *r);
static void request(struct kr_reflector *r, int kind);
static void warm_synced(struct kr_reflector *r, int restored);
static void unreachable(struct kr_reflector *r);
static int skipped_object(struct kr_reflector *r, size_t have, size_t size, const char *prefix);

void kr_reflector_opts_default(struct kr_reflector_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->watch_list = KR_WL_AUTO;
	o->page_size = 500;
	o->initial_events_timeout_ms = 30000;
	/* kube-apiserver bookmarks about every 60 s: a stall shows within 70 s. */
	o->idle_default_ms = 65000;
	o->min_watch_timeout_s = 300;
	o->gzip = 1;
}

/* --- output ---------------------------------------------------------------------- */

static void emit(struct kr_reflector *r, enum kr_event_type type, const char *key, const char *rv,
		 const char *obj, size_t objlen, size_t count)
{
	struct kr_reflect *top = r->top;
	struct kr_event ev;
	int i;

	ev.type = type;
	ev.res = r->index;
	ev.resource = r->res.name;
	ev.key = key;
	ev.rv = rv;
	ev.obj = obj;
	ev.objlen = objlen;
	ev.count = count;
	ev.partial = type == KR_EV_SYNCED && r->partial;
	ev.restored = 0;
	ev.warm = 0;
	for (i = 0; i < top->nsinks; i++)
		top->sinks[i].event(top->sinks[i].arg, &ev);
}

static void emit_view(struct kr_reflector *r, enum kr_event_type type, const struct kr_store_view *v)
{
	if (v->held)
		emit(r, type, v->key, v->rv, v->obj, v->objlen, 0);
}

/* Tells the library's state callback, if any. */
static void tell_state(struct kr_reflector *r, enum kr_health state, const char *reason, int64_t next_ms)
{
	struct kr_state_change st;

	/* A re-watch or the next page is no news; every backoff step is. */
	if (state == r->told_state && state != KR_HEALTH_BACKOFF)
		return;
	r->told_state = state;
	if (!r->top->on_state)
		return;
	if (state == KR_HEALTH_BACKOFF)
		r->failures[r->failure.cls]++;
	st.res = r->index;
	st.resource = r->res.name;
	st.state = state;
	st.reason = reason ? reason : "";
	st.next_attempt_ms = next_ms;
	st.failure = state == KR_HEALTH_BACKOFF ? r->failure.cls : KR_FAIL_NONE;
	st.http_status = state == KR_HEALTH_BACKOFF ? r->failure.http_status : 0;
	st.status_reason = state == KR_HEALTH_BACKOFF ? r->failure.status_reason : "";
	r->top->on_state(r->top->state_arg, &st);
}

static void copy_str(char *dst, size_t size, const char *src)
{
	kr_snprintf(dst, size, "%s", src ? src : "");
}

/* --- waiting ----------------------------------------------------------------------- */

static void on_wait(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_reflector *r = t->arg;
	void (*next)(struct kr_reflector *) = r->after_wait;

	(void)loop;
	r->after_wait = NULL;
	if (next)
		next(r);
}

static void wait_then(struct kr_reflector *r, int64_t ms, void (*next)(struct kr_reflector *))
{
	r->phase = KR_PH_IDLE;
	r->after_wait = next;
	kr_log(KR_LOG_TRACE, "%s: waiting %lld ms", r->res.name, (long long)ms);
	kr_loop_timer_at(r->top->loop, &r->wait, kr_port_now_ms() + ms);
}

/* One client-go backoff step, then next. */
static void backoff_then(struct kr_reflector *r, void (*next)(struct kr_reflector *), const char *why)
{
	int64_t ms = kr_backoff_next(&r->backoff, kr_port_now_ms());

	kr_reflector_classify_failure(r);
	kr_log(KR_LOG_DEBUG, "%s: %s (%s); next attempt in %lld ms", r->res.name, why,
	       kr_failure_name(r->failure.cls), (long long)ms);
	wait_then(r, ms, next);
	tell_state(r, KR_HEALTH_BACKOFF, why, ms);
}

/* --- Status objects (ERROR events and error responses) ---------------------------- */

static void read_status(struct kr_reflector *r, const char *json, const kr_json_tok *t, int n, int o)
{
	int v, causes, i;
	long long code = 0;

	r->req.err_code = 0;
	r->req.err_reason[0] = r->req.err_message[0] = '\0';
	r->req.err_too_large = 0;
	if ((v = kr_json_find(json, t, n, o, "code")) >= 0 && kr_json_int(json, &t[v], &code) == 0)
		r->req.err_code = (int)code;
	if ((v = kr_json_find(json, t, n, o, "reason")) >= 0)
		kr_json_unescape(json, &t[v], r->req.err_reason, sizeof(r->req.err_reason));
	if ((v = kr_json_find(json, t, n, o, "message")) >= 0 &&
	    kr_json_unescape(json, &t[v], r->req.err_message, sizeof(r->req.err_message)) == KR_ETOOBIG) {
		/* Long messages are cut, not lost. */
		size_t len = (size_t)(t[v].end - t[v].start);

		kr_snprintf(r->req.err_message, sizeof(r->req.err_message), "%.*s...",
			 (int)(len < sizeof(r->req.err_message) - 4 ? len : sizeof(r->req.err_message) - 4),
			 json + t[v].start);
	}
	causes = kr_json_find(json, t, n, o, "details.causes");
	if (causes >= 0 && t[causes].type == KR_JSON_T_ARRAY) {
		for (i = causes + 1; i < n && t[i].start < t[causes].end; i++) {
			if (t[i].parent != causes || t[i].type != KR_JSON_T_OBJECT)
				continue;
			v = kr_json_find(json, t, n, i, "reason");
			if (v >= 0 && kr_json_str_eq(json, &t[v], "ResourceVersionTooLarge"))
				r->req.err_too_large = 1;
			v = kr_json_find(json, t, n, i, "message");
			if (v >= 0 && kr_json_str_eq(json, &t[v], "Too large resource version"))
				r->req.err_too_large = 1;
		}
	}
	if (strstr(r->req.err_message, "Too large resource version") && r->req.err_code == 504)
		r->req.err_too_large = 1;
}

/* client-go's isExpiredError: reason Expired or Gone, or a 410 with no reason. */
static int is_expired(const struct kr_reflector *r)
{
	return strcmp(r->req.err_reason, "Expired") == 0 || strcmp(r->req.err_reason, "Gone") == 0 ||
	       (r->req.err_code == 410 && r->req.err_reason[0] == '\0');
}

/* --- objects ------------------------------------------------------------------------ */

struct meta {
	char key[KR_KEY_MAX];
	size_t keylen;
	char rv[KR_RV_MAX];
	char uid[KR_RV_MAX];
};

/*
 * The members of an object the reflector reads, found in one pass over it
 * (kr_json_members; the first of repeated keys, as kr_json_find).
 */
enum { OK_KIND, OK_API, OK_META, OK_N };
static const char *const object_keys[OK_N] = { "kind", "apiVersion", "metadata" };
enum { MK_RV, MK_UID, MK_NS, MK_NAME, MK_N };
static const char *const meta_keys[MK_N] = { "resourceVersion", "uid", "namespace", "name" };

/*
 * Reads namespace/name, resourceVersion and uid of the object whose
 * members ix (object_keys) names. 0 or KR_EINVAL.
 */
static MEASURED int read_meta(const char *json, const kr_json_tok *t, int n, const int *ix,
			      struct meta *m)
{
	int md = ix[OK_META], v[MK_N], nl, sl = 0;

	if (md < 0 || t[md].type != KR_JSON_T_OBJECT)
		return KR_EINVAL;
	kr_json_members(json, t, n, md, meta_keys, MK_N, v);
	m->rv[0] = m->uid[0] = '\0';
	if (v[MK_RV] >= 0 && kr_json_unescape(json, &t[v[MK_RV]], m->rv, sizeof(m->rv)) < 0)
		return KR_EINVAL;
	if (v[MK_UID] >= 0 && kr_json_unescape(json, &t[v[MK_UID]], m->uid, sizeof(m->uid)) < 0)
		return KR_EINVAL;
	/* The key is namespace/name, or name: unescaped in place, each bounded by what is left. */
	if (v[MK_NS] >= 0) {
		sl = kr_json_unescape(json, &t[v[MK_NS]], m->key, sizeof(m->key));
		if (sl < 0)
			return KR_EINVAL;
		if (sl > 0)
			m->key[sl++] = '/';
	}
	if (v[MK_NAME] < 0 || (size_t)sl >= sizeof(m->key))
		return KR_EINVAL;
	nl = kr_json_unescape(json, &t[v[MK_NAME]], m->key + sl, sizeof(m->key) - (size_t)sl);
	if (nl <= 0)
		return KR_EINVAL;
	m->keylen = (size_t)sl + (size_t)nl;
	/* A \u0000 would cut the key short wherever it is used as a C string. */
	if (memchr(m->key, '\0', m->keylen))
		return KR_EINVAL;
	return 0;
}

/* Nonzero if the object's kind/apiVersion (when present, ix: object_keys) are not the resource's. */
static MEASURED int wrong_kind(struct kr_reflector *r, const char *json, const kr_json_tok *t,
			       const int *ix)
{
	char api[KR_NAME_MAX + 256];
	const kr_json_tok *v;
	size_t gl = strlen(r->res.group), vl = strlen(r->res.version);

	if (ix[OK_KIND] >= 0 && !kr_json_str_eq(json, &t[ix[OK_KIND]], r->res.kind))
		return 1;
	if (ix[OK_API] < 0)
		return 0;
	v = &t[ix[OK_API]];
	/* As sent, without escapes (the apiserver's way): group/version compared in place. */
	if (v->type == KR_JSON_T_STRING && !memchr(json + v->start, '\\', (size_t)(v->end - v->start))) {
		const char *a = json + v->start;
		size_t al = (size_t)(v->end - v->start);

		if (!gl)
			return al != vl || memcmp(a, r->res.version, vl) != 0;
		return al != gl + 1 + vl || memcmp(a, r->res.group, gl) != 0 || a[gl] != '/' ||
		       memcmp(a + gl + 1, r->res.version, vl) != 0;
	}
	if (gl)
		kr_snprintf(api, sizeof(api), "%s/%s", r->res.group, r->res.version);
	else
		kr_snprintf(api, sizeof(api), "%s", r->res.version);
	return !kr_json_str_eq(json, v, api);
}

/*
 * Removes metadata.managedFields from metadata object token md of
 * json[0..len) in place: every copy of the key, since a reader that takes
 * the last of repeated keys still sees one. The last goes first, so that the
 * tokens of the others stay right (nothing before a removed member moves).
 * Returns the new length.
 */
static size_t strip_managed_fields(char *json, size_t len, const kr_json_tok *t, int n, int md)
{
	int last, k;

	if (md < 0 || t[md].type != KR_JSON_T_OBJECT)
		return len;
	for (last = md + 1; last < n && t[last].start < t[md].end; last++)
		;
	/* (unescaping only shortens: a key written shorter than the name cannot be it) */
	for (k = last - 2; k > md; k--)
		if (t[k].parent == md && t[k + 1].parent == k &&
		    t[k].end - t[k].start >= (int)sizeof("managedFields") - 1 &&
		    kr_json_str_eq(json, &t[k], "managedFields"))
			len = kr_json_remove_member(json, len, t, n, k + 1);
	return len;
}

/*
 * Moves the object (token o of json) to the start of the scratch area,
 * without managedFields unless asked to keep them, adding kind and
 * apiVersion when a typed list left them out. Returns its new length.
 */
static MEASURED size_t settle_object(struct kr_reflector *r, char *json, size_t len, kr_json_tok *t,
				     int n, int o, const int *ix)
{
	struct kr_reflect *top = r->top;
	size_t start = (size_t)t[o].start, end = (size_t)t[o].end, objlen;
	int need_kind = ix[OK_KIND] < 0;

	if (!top->opts.keep_managed_fields)
		end -= len - strip_managed_fields(json, len, t, n, ix[OK_META]);
	objlen = end - start;
	if (need_kind && objlen >= 2 && objlen + KIND_ROOM <= r->req.scratch_cap) {
		char head[KIND_ROOM];
		int h;

		if (r->res.group[0])
			h = kr_snprintf(head, sizeof(head), "{\"kind\":\"%s\",\"apiVersion\":\"%s/%s\"%s",
				     r->res.kind, r->res.group, r->res.version, objlen > 2 ? "," : "");
		else
			h = kr_snprintf(head, sizeof(head), "{\"kind\":\"%s\",\"apiVersion\":\"%s\"%s",
				     r->res.kind, r->res.version, objlen > 2 ? "," : "");
		if (h > 0 && (size_t)h < sizeof(head)) {
			memmove(r->req.scratch + h, json + start + 1, objlen - 1);
			memcpy(r->req.scratch, head, (size_t)h);
			return objlen - 1 + (size_t)h;
		}
	}
	if (start)
		memmove(r->req.scratch, json + start, objlen);
	return objlen;
}

/* Puts one object into the store and tells the sinks what changed. */
/*
 * A gzip list is checked (CRC-32) only at its end, and its items were
 * applied as they came: one whose bytes were corrupt but whose
 * resourceVersion was not is in the store. The plain relist after it
 * compares such items byte for byte and puts the server's copy back.
 */
static void repair_object(struct kr_reflector *r, const struct meta *m, size_t objlen,
			  const struct kr_store_view *held)
{
	struct kr_store *s = r->top->store;
	struct kr_store_view gone;
	int res;

	if (!held->held || (held->objlen == objlen && memcmp(held->obj, r->req.scratch, objlen) == 0))
		return;
	kr_log(KR_LOG_WARN, "%s: %s differs from the copy the broken gzip list left; replacing it",
	       r->res.name, m->key);
	/* As for a changed uid: the sinks drop the bad copy and take the good one. */
	kr_store_delete(s, r->index, m->key, m->keylen, &gone);
	emit_view(r, KR_EV_DELETED, &gone);
	res = kr_store_put(s, r->index, m->key, m->keylen, m->rv, m->uid, r->req.scratch, objlen, r->gen, NULL);
	if (res == KR_STORE_ADDED)
		emit(r, KR_EV_ADDED, m->key, m->rv, r->req.scratch, objlen, 0);
}

/*
 * A changed object the arena holds only once its own old version is gone:
 * the store puts the new record beside the old one, so a held object that
 * grows or stays as large, in a tail shorter than it plus the reserve, was
 * recorded as present but not held (the mirror partial, a relist at the next
 * delete) though compaction would have made the room (seed 5337, the arena
 * packed tight by a restore). Drops the old version, compacts and holds the
 * new one, telling the sinks as kr_store_put's MODIFIED or REPLACED would.
 * Returns 1 when it did; 0 leaves the object to the ordinary put.
 */
static int hold_in_place(struct kr_reflector *r, const struct meta *m, size_t objlen)
{
	struct kr_store *s = r->top->store;
	struct kr_store_view cur, now;
	size_t need, room = s->size - s->used, live;
	int replaced;

	if (!KR_HOLD_IN_PLACE || !kr_store_get(s, r->index, m->key, m->keylen, &cur) || !cur.held)
		return 0;
	need = KR_STORE_RECORD_SIZE(objlen, m->keylen, strlen(m->rv), strlen(m->uid));
	if (need <= room && room - need >= s->reserve)
		return 0;
	live = s->used - s->garbage - KR_STORE_RECORD_SIZE(cur.objlen, m->keylen, strlen(cur.rv), strlen(cur.uid));
	if (live + need + s->reserve > s->size || (strcmp(cur.rv, m->rv) == 0 && strcmp(cur.uid, m->uid) == 0) ||
	    (r->index < KR_MAX_RESOURCES && s->quota[r->index] &&
	     s->held_bytes[r->index] - cur.objlen + objlen > s->quota[r->index]))
		return 0;
	replaced = (*cur.uid && *m->uid && strcmp(cur.uid, m->uid) != 0) ||
		   (r->list_verify && r->phase == KR_PH_LIST);
	/* The old bytes are gone after the compaction: the sinks drop them first. */
	if (replaced)
		emit_view(r, KR_EV_DELETED, &cur);
	kr_store_delete(s, r->index, m->key, m->keylen, NULL);
	/* Moves only records below the tail: the new object, framed there, stays whole. */
	kr_store_compact(s);
	if (kr_store_put(s, r->index, m->key, m->keylen, m->rv, m->uid, r->req.scratch, objlen, r->gen, NULL) !=
		    KR_STORE_ADDED ||
	    !kr_store_get(s, r->index, m->key, m->keylen, &now))
		return 1; /* cannot happen: the room was counted above */
	emit(r, replaced ? KR_EV_ADDED : KR_EV_MODIFIED, m->key, m->rv, now.obj, now.objlen, 0);
	return 1;
}

/* A sync attempt starts: nothing of it skipped yet (the counts outlive its requests: a list's pages). */
static void new_attempt(struct kr_reflector *r)
{
	r->skipped = 0;
	r->skipped_known = 0;
	r->skipped_arena = 0;
}

#define ARENA_USED_UP "the arena is used up"

/*
 * A named object the store could not record, not even its key: counted for
 * the sync (partial), and whether the cause was the arena (its key-only
 * record did not fit, the index had a slot) rather than the index.
 */
static void not_stored(struct kr_reflector *r, const char *key, size_t keylen, int res)
{
	const struct kr_store *s = r->top->store;

	r->skipped++;
	r->skipped_known++;
	if (res == KR_ENOSPC && (s->nentries < s->max_entries || kr_store_get(s, r->index, key, keylen, NULL)))
		r->skipped_arena++;
}

static void apply_object(struct kr_reflector *r, const struct meta *m, size_t objlen)
{
	struct kr_store_view old;
	int res, arena;

	if (hold_in_place(r, m, objlen))
		return;
	res = kr_store_put(r->top->store, r->index, m->key, m->keylen, m->rv, m->uid, r->req.scratch, objlen, r->gen,
			   &old);

	switch (res) {
	case KR_STORE_ADDED:
		emit(r, KR_EV_ADDED, m->key, m->rv, r->req.scratch, objlen, 0);
		break;
	case KR_STORE_MODIFIED:
		if (r->list_verify && r->phase == KR_PH_LIST) {
			/*
			 * The copy held may be the broken gzip list's, whose resourceVersion
			 * itself may be corrupt (newer than the server's): as a repair, the
			 * sinks drop it and take the server's, never a MODIFIED going back.
			 */
			emit_view(r, KR_EV_DELETED, &old);
			emit(r, KR_EV_ADDED, m->key, m->rv, r->req.scratch, objlen, 0);
			break;
		}
		emit(r, KR_EV_MODIFIED, m->key, m->rv, r->req.scratch, objlen, 0);
		break;
	case KR_STORE_REPLACED:
		emit_view(r, KR_EV_DELETED, &old);
		emit(r, KR_EV_ADDED, m->key, m->rv, r->req.scratch, objlen, 0);
		break;
	case KR_STORE_UNCHANGED:
		if (r->list_verify && r->phase == KR_PH_LIST)
			repair_object(r, m, objlen, &old);
		break;
	case KR_STORE_NOT_HELD:
		/* The store dropped the old object: so do the sinks (ADDED again once held). */
		emit_view(r, KR_EV_DELETED, &old);
		kr_log(KR_LOG_ERROR, "%s: %s (%zu bytes) is present but not held: %s (%zu of %zu "
		       "bytes used)", r->res.name, m->key, objlen,
		       r->top->store->quota[r->index] ? "the arena is full or the resource's share "
							"of it is used" : "the arena is full",
		       r->top->store->quota[r->index] ? r->top->store->held_bytes[r->index]
						      : (size_t)r->top->store->used,
		       r->top->store->quota[r->index] ? r->top->store->quota[r->index]
						      : (size_t)r->top->store->size);
		break;
	default:
		/*
		 * Not even its key fits (index full, or the arena used up to the bytes
		 * a name takes): keep the old state rather than let a sweep drop it,
		 * and say the sync is partial. One line per object would flood the
		 * log: the first few, then the count at SYNCED.
		 */
		arena = r->skipped_arena;
		not_stored(r, m->key, m->keylen, res);
		kr_store_mark(r->top->store, r->index, m->key, m->keylen, r->gen);
		if (r->skipped > 3)
			break;
		arena = r->skipped_arena > arena;
		kr_log(KR_LOG_ERROR, "%s: unable to store %s: %s (--%s is %zu)%s", r->res.name, m->key,
		       arena ? ARENA_USED_UP ", not even its name fits" : kr_strerror(res),
		       arena ? "arena-bytes" : "max-objects",
		       arena ? (size_t)r->top->store->size : (size_t)r->top->store->max_entries,
		       r->skipped == 3 ? "; further ones are counted at the sync" : "");
		break;
	}
}

/* Where the next object is framed: the store's free tail. */
static void next_output(struct kr_reflector *r)
{
	struct kr_store *s = r->top->store;
	size_t slack = KR_STORE_HDR + KR_STORE_TAIL_ROOM + s->reserve;
	size_t free_tail = s->size - s->used, want = KR_MAX_OBJECT_BYTES;

	/*
	 * The store compacts (O(arena)) only when asked for more than the tail
	 * holds and compaction gives it. Ask for a whole largest object when
	 * compaction yields one; else only when it reclaims a sixteenth of
	 * the arena, so its cost stays amortised over the bytes appended in
	 * between; else take the tail as it is.
	 */
	if (free_tail + s->garbage < want + slack) {
		if (s->garbage >= s->size / 16 && free_tail + s->garbage > slack)
			want = free_tail + s->garbage - slack;
		else
			want = free_tail > slack ? free_tail - slack : 0;
	}
	r->req.scratch = kr_store_scratch(s, want, &r->req.scratch_cap);
	/*
	 * A tail used up (by objects present but not held, down to 0 bytes) must
	 * still read bookmarks and name the objects it cannot hold: the spare
	 * buffer, shared like the tail. kr_store_put copies an object from it
	 * if the arena has room after all.
	 */
	if (r->req.scratch_cap < sizeof(r->top->spare)) {
		r->req.scratch = r->top->spare;
		r->req.scratch_cap = sizeof(r->top->spare);
	}
	if (r->req.scratch_cap > KR_MAX_OBJECT_BYTES + KIND_ROOM)
		r->req.scratch_cap = KR_MAX_OBJECT_BYTES + KIND_ROOM;
	r->req.scratch_used = s->used;
	r->req.scratch_compactions = s->compactions;
}

/* List items leave room to add kind and apiVersion. */
static size_t item_cap(const struct kr_reflector *r)
{
	return r->req.scratch_cap > KIND_ROOM ? r->req.scratch_cap - KIND_ROOM : 0;
}

/* --- watch events ------------------------------------------------------------------- */

static void sweep_fn(void *arg, const struct kr_store_view *v)
{
	emit_view(arg, KR_EV_DELETED, v);
}

/* Objects named but not indexed: a sync under way counts its own, else the last one's. */
static size_t not_indexed(const struct kr_reflector *r)
{
	return (size_t)(r->skipped_known > r->unindexed ? r->skipped_known : r->unindexed);
}

size_t kr_reflector_held(const struct kr_reflector *r, size_t *present)
{
	size_t count = kr_store_count(r->top->store, r->index);

	if (present)
		*present = count + not_indexed(r);
	return count - kr_store_not_held(r->top->store, r->index);
}

/*
 * Every way an object can be missing from the mirror makes it partial: not
 * read, not indexed, or present but not held. O(1): after every watch event.
 */
static int lacks_objects(const struct kr_reflector *r)
{
	return kr_store_not_held(r->top->store, r->index) > 0 || not_indexed(r) > 0 || r->unread > 0 ||
	       r->skipped > r->skipped_known;
}

/*
 * After a watch event: an object that could not be held makes the mirror
 * partial at once (logged; the health reports and the state directory say
 * so; the JSON lines print nothing for it), one held again may make it whole.
 */
static void watch_partial(struct kr_reflector *r)
{
	int was = r->partial;
	size_t held, present;

	if (r->phase != KR_PH_WATCH)
		return;
	r->partial = lacks_objects(r);
	if (!r->partial || was)
		return;
	held = kr_reflector_held(r, &present);
	kr_log(KR_LOG_ERROR, "%s: the mirror is partial: %zu of %zu objects held", r->res.name, held, present);
}

/* A complete (re)list: unseen objects are gone; tell the sinks. */
static void synced(struct kr_reflector *r, const char *rv, const char *how)
{
	struct kr_reflect *top = r->top;
	size_t count, held, present, swept = 0;
	char part[96] = "";

	/*
	 * Objects whose key could not be read may be ones the store holds: keep
	 * what it holds rather than delete it. Those named but not indexed (no
	 * room) are not in the store, so what was not seen is gone from the
	 * server, and must go, or deleted objects would keep the room for good.
	 */
	if (r->skipped > r->skipped_known)
		kr_log(KR_LOG_ERROR, "%s: %d objects could not be read or held; keeping their old "
		       "state rather than deleting it", r->res.name, r->skipped);
	else
		swept = kr_store_sweep(top->store, r->index, r->gen, sweep_fn, r);
	/* The index full, or (an index with slots) the arena used up even for names. */
	if (r->skipped && r->skipped == r->skipped_known)
		kr_log(KR_LOG_ERROR, "%s: %d objects could not be read or held: %s (--%s)", r->res.name,
		       r->skipped, r->skipped_arena ? ARENA_USED_UP ", even for their names" : "no room in the index",
		       r->skipped_arena ? "arena-bytes" : "max-objects");
	copy_str(r->last_rv, sizeof(r->last_rv), rv);
	r->rv_unavailable = 0;
	r->unindexed = r->skipped_known;
	r->unread = r->skipped - r->skipped_known;
	r->partial = lacks_objects(r);
	r->synced_partial = r->partial;
	/*
	 * The sweep may have freed the room the list lacked: list again for the
	 * rest, soon. Index slots for those not indexed; arena bytes for those
	 * not held.
	 */
	if ((r->skipped_known && top->store->nentries < top->store->max_entries) ||
	    (swept && kr_store_not_held(top->store, r->index)))
		kr_loop_timer_at(top->loop, &r->room, kr_port_now_ms() + ROOM_RELIST_MS);
	r->listing = 0;
	r->restored = 0;
	held = kr_reflector_held(r, &present);
	count = present - not_indexed(r);
	emit(r, KR_EV_SYNCED, NULL, r->last_rv, NULL, 0, count);
	if (r->partial)
		kr_snprintf(part, sizeof(part), ", partial: %zu of %zu held%s", held, present,
			    r->unread ? ", more unread" : "");
	kr_log(r->partial ? KR_LOG_ERROR : KR_LOG_INFO, "%s: synced %zu objects at resourceVersion %s "
	       "by %s in %lld ms%s", r->res.name, count, r->last_rv, how,
	       (long long)(kr_port_now_ms() - r->cycle_start), part);
	tell_state(r, KR_HEALTH_SYNCED, NULL, 0);
	if (!r->synced) {
		r->synced = 1;
		top->synced_count++;
		if (top->opts.resync_ms > 0)
			kr_loop_timer_at(top->loop, &r->resync, kr_port_now_ms() + top->opts.resync_ms);
		if (top->opts.once && top->synced_count == top->nrefl)
			top->loop->stop = 1;
	}
}

/* Every watch in progress takes the server's read-idle deadline (cadence.h). */
static void watches_take_cadence(struct kr_reflect *top)
{
	int i, ms = kr_cadence_idle_ms(&top->cadence);

	for (i = 0; i < top->nrefl; i++) {
		struct kr_reflector *r = &top->refl[i];

		if ((r->phase == KR_PH_WATCH || r->phase == KR_PH_WATCHLIST) && r->conn.have_request)
			kr_conn_set_idle_timeout(&r->conn, ms);
	}
}

/* Checks and tokenizes watch event json[0..len) into t (kr_json_parse_sel). */
static MEASURED int tokenize_event(const char *json, size_t len, kr_json_tok *t)
{
	return kr_json_parse_sel(json, len, t, KR_JSON_TOKENS, sel_event_paths, EVENT_PATHS);
}

/* A watch event's type, read once from its "type" string. */
enum watch_type { WT_UNKNOWN, WT_ADDED, WT_MODIFIED, WT_DELETED, WT_BOOKMARK, WT_ERROR };

static enum watch_type watch_type_of(const char *type)
{
	static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(type, names[i]) == 0)
			return (enum watch_type)(i + 1);
	return WT_UNKNOWN;
}

/*
 * Finds the object (*o) and type of watch event json[0..len), tokenized
 * into t[0..n) (tokenize_event). Returns n, or KR_EINVAL when the type or
 * the object is missing.
 */
static MEASURED int parse_event(const char *json, size_t len, kr_json_tok *t, int n, int *o,
				char type[16], enum watch_type *wt, int ix[OK_N])
{
	int v;

	v = kr_json_find(json, t, n, 0, "type");
	*o = kr_json_find(json, t, n, 0, "object");
	if (v < 0 || *o < 0 || t[*o].type != KR_JSON_T_OBJECT ||
	    kr_json_unescape(json, &t[v], type, 16) < 0)
		return KR_EINVAL;
	*wt = watch_type_of(type);
	/* An ERROR's Status is read whole (details.causes), as far as tokens go. */
	if (*wt == WT_ERROR &&
	    (v = kr_json_parse_sel(json, len, t + n, KR_JSON_TOKENS - n, NULL, -1)) > 0) {
		memmove(t, t + n, (size_t)v * sizeof(*t));
		n = v;
		*o = kr_json_find(json, t, n, 0, "object");
	}
	kr_json_members(json, t, n, *o, object_keys, OK_N, ix);
	return n;
}

/*
 * Handles one framed watch event in the scratch area, already tokenized
 * into top->toks[0..pre) if pre > 0. Returns < 0 to end the stream.
 */
static int watch_event(struct kr_reflector *r, size_t len, int pre)
{
	struct kr_reflect *top = r->top;
	kr_json_tok *t = top->toks;
	char *json = r->req.scratch, type[16] = "";
	struct meta m;
	enum watch_type wt = WT_UNKNOWN;
	int n, o = -1, v, ix[OK_N] = { -1, -1, -1 };

	n = pre > 0 ? pre : tokenize_event(json, len, t);
	if (n > 0)
		n = parse_event(json, len, t, n, &o, type, &wt, ix);
	else if (n == 0)
		n = KR_EPROTO;  /* not returned: a valid text has a token */
	if (n < 0 && n != KR_EINVAL) {
		kr_log(KR_LOG_ERROR, "%s: unable to parse a watch event of %zu bytes: %s", r->res.name,
		       len, n == KR_ENOSPC ? TOKENS_FULL : "malformed JSON");
		if (n == KR_ENOSPC) {
			/* Too many tokens to read: like an object too large to hold. */
			if (skipped_object(r, len, len, "object.") < 0 && r->phase == KR_PH_WATCH)
				return -1;
			return 0;
		}
		r->req.stream_error = 1;
		return -1;
	}
	if (n < 0) {
		kr_log(KR_LOG_ERROR, "%s: watch event without type or object", r->res.name);
		r->req.stream_error = 1;
		return -1;
	}
	if (wt == WT_ERROR) {
		read_status(r, json, t, n, o);
		r->req.error_event = 1;
		kr_log(KR_LOG_WARN, "%s: watch ended by the server: %d %s: %s", r->res.name,
		       r->req.err_code, r->req.err_reason, r->req.err_message);
		return -1;
	}
	if (wrong_kind(r, json, t, ix)) {
		kr_log(KR_LOG_WARN, "%s: skipped a %s event of another kind", r->res.name, type);
		return 0;
	}
	if (wt == WT_BOOKMARK) {
		int md = kr_json_find(json, t, n, o, "metadata"), ann;
		kr_ms_t now = kr_port_now_ms();

		if (md < 0 || (v = kr_json_find(json, t, n, md, "resourceVersion")) < 0 ||
		    kr_json_unescape(json, &t[v], m.rv, sizeof(m.rv)) < 0) {
			kr_log(KR_LOG_WARN, "%s: skipped a bookmark without resourceVersion", r->res.name);
			return 0;
		}
		r->req.events++;
		ann = kr_json_find(json, t, n, md, "annotations");
		if (ann >= 0)
			ann = kr_json_find_key(json, t, n, ann, INITIAL_EVENTS_END,
					       sizeof(INITIAL_EVENTS_END) - 1);
		/* Gaps within one stream only: the server's timer restarts with each watch. */
		if (r->req.last_bookmark && kr_cadence_saw_gap(&top->cadence, now - r->req.last_bookmark)) {
			kr_log(KR_LOG_DEBUG, "%s: bookmarks every %lld ms or more; watches are dropped "
			       "after %d ms without a byte", r->res.name, (long long)kr_cadence_get(&top->cadence),
			       kr_cadence_idle_ms(&top->cadence));
			watches_take_cadence(top);
		}
		r->req.last_bookmark = now;
		if (r->phase == KR_PH_WATCHLIST) {
			if (ann >= 0 && kr_json_str_eq(json, &t[ann], "true")) {
				r->req.bookmark_seen = 1;
				kr_loop_timer_cancel(top->loop, &r->deadline);
				r->phase = KR_PH_WATCH;
				r->req.propagate = 1;
				synced(r, m.rv, "watch-list");
			}
			return 0;
		}
		copy_str(r->last_rv, sizeof(r->last_rv), m.rv);
		return 0;
	}
	if (read_meta(json, t, n, ix, &m) != 0) {
		kr_log(KR_LOG_WARN, "%s: skipped a %s event without metadata", r->res.name, type);
		return 0;
	}
	r->req.events++;
	if (r->phase == KR_PH_WATCHLIST) {
		/*
		 * Events keep a stream that never sends the end bookmark open: quiet
		 * time alone would never run out while the resource is busy. It is
		 * bounded by WL_DEADLINE_CAP times the quiet time from the start.
		 */
		kr_ms_t quiet = kr_port_now_ms() + top->opts.initial_events_timeout_ms;
		kr_ms_t cap = r->req.watch_start + WL_DEADLINE_CAP * (kr_ms_t)top->opts.initial_events_timeout_ms;

		kr_loop_timer_at(top->loop, &r->deadline, quiet < cap ? quiet : cap);
		r->applied++;
	}
	if (wt == WT_ADDED || wt == WT_MODIFIED) {
		size_t objlen = settle_object(r, json, len, t, n, o, ix);
		int skipped = r->skipped;

		apply_object(r, &m, objlen);
		/* A change the index has no room for is not skipped: relist, and say partial. */
		if (r->phase == KR_PH_WATCH && r->skipped > skipped)
			return -1;
	} else if (wt == WT_DELETED) {
		size_t objlen = settle_object(r, json, len, t, n, o, ix);
		struct kr_store_view old;

		/*
		 * The server's last state of the object, not ours: it is newer. Not for
		 * an object present but not held: the sinks were told DELETED when the
		 * store dropped it.
		 */
		if (kr_store_delete(top->store, r->index, m.key, m.keylen, &old) && old.held)
			emit(r, KR_EV_DELETED, m.key, m.rv, r->req.scratch, objlen, 0);
	} else {
		kr_log(KR_LOG_WARN, "%s: skipped an event of unknown type %s", r->res.name, type);
		return 0;
	}
	/* During the watch-list's initial events the RV moves only at the bookmark. */
	if (r->phase == KR_PH_WATCH && (r->req.propagate || wt != WT_ADDED))
		copy_str(r->last_rv, sizeof(r->last_rv), m.rv);
	if (wt != WT_ADDED)
		r->req.propagate = 1;
	watch_partial(r);
	/*
	 * The objects a partial sync could not index or hold may fit now (or the
	 * deletes took them all, and a SYNCED should say the mirror is whole):
	 * one relist for them, a moment later (on_room), while the watch goes on
	 * taking the rest of a burst of deletes. Ending the watch here relisted
	 * at this delete's RV (exact, when paginated), one delete at a time,
	 * each after a longer backoff.
	 */
	if (r->phase == KR_PH_WATCH && (r->partial || r->synced_partial) && wt == WT_DELETED && !r->room.armed)
		kr_loop_timer_at(top->loop, &r->room, kr_port_now_ms() + ROOM_RELIST_MS);
	return 0;
}

/*
 * Reads the name of an object too large for the space it had from its first
 * `have` bytes in the scratch area into r->req.skip. prefix is "" for a list
 * item, "object." for a watch event.
 */
static void name_skipped(struct kr_reflector *r, size_t have, const char *prefix)
{
	static const char *const item_paths[] = { "metadata.name", "metadata.namespace",
						  "metadata.resourceVersion", "metadata.uid", "type" };
	static const char *const event_paths[] = { "object.metadata.name", "object.metadata.namespace",
						   "object.metadata.resourceVersion", "object.metadata.uid",
						   "type" };
	struct kr_skipped_name *k = &r->req.skip;
	char v[5][KR_JSON_PREFIX_VALUE];
	int found, len;

	k->state = -1;
	k->have = have;
	kr_json_prefix_strings(r->req.scratch, have, prefix[0] ? event_paths : item_paths, 5, v, &found);
	if (!v[0][0] || !v[2][0] || strlen(v[2]) >= sizeof(k->rv) || strlen(v[3]) >= sizeof(k->uid))
		return;
	len = v[1][0] ? kr_snprintf(k->key, sizeof(k->key), "%s/%s", v[1], v[0])
		      : kr_snprintf(k->key, sizeof(k->key), "%s", v[0]);
	if (len < 0 || (size_t)len >= sizeof(k->key))
		return;
	k->keylen = (size_t)len;
	memcpy(k->rv, v[2], strlen(v[2]) + 1);
	memcpy(k->uid, v[3], strlen(v[3]) + 1);
	k->deleted = strcmp(v[4], "DELETED") == 0;
	k->state = 1;
}

/*
 * An object too large for the space it had was skipped; its name was read
 * from its first bytes (before its end, or now from the scratch area). If it
 * has one, it is recorded as present but not held (never silently dropped,
 * never deleted by the next sweep). Returns 0 when recorded, -1 when the
 * object could not even be named.
 */
static int skipped_object(struct kr_reflector *r, size_t have, size_t size, const char *prefix)
{
	struct kr_skipped_name *k = &r->req.skip;
	int res;

	if (!k->state)
		name_skipped(r, have, prefix);
	res = k->state;
	k->state = 0;
	if (res < 0) {
		r->skipped++;
		kr_log(KR_LOG_ERROR, "%s: an object of %zu bytes is larger than the space for it "
		       "(%zu bytes) and its metadata could not be read", r->res.name, size, k->have);
		return -1;
	}
	if (k->deleted) {
		struct kr_store_view old;

		if (kr_store_delete(r->top->store, r->index, k->key, k->keylen, &old))
			emit_view(r, KR_EV_DELETED, &old);
	} else {
		struct kr_store_view old;

		res = kr_store_put(r->top->store, r->index, k->key, k->keylen, k->rv, k->uid, NULL, 0,
				   r->gen, &old);
		if (res < 0) {
			not_stored(r, k->key, k->keylen, res);
			return -1;
		}
		/*
		 * UNCHANGED: the store holds this very version (an event repeated after a
		 * re-watch), so nothing is lost. Else the store dropped the old object:
		 * so do the sinks (ADDED again once held).
		 */
		if (res != KR_STORE_UNCHANGED) {
			kr_log(KR_LOG_ERROR, "%s: %s (%zu bytes) is present but not held: larger than the "
			       "space for it (%zu bytes)", r->res.name, k->key, size, k->have);
			emit_view(r, KR_EV_DELETED, &old);
		}
	}
	if (prefix[0] && r->phase == KR_PH_WATCH)
		copy_str(r->last_rv, sizeof(r->last_rv), k->rv);
	if (prefix[0])
		watch_partial(r);
	return 0;
}

/*
 * Handles one LIST item in the scratch area. Returns < 0 to end the list: a
 * list names each object once, so a second copy means a corrupt body (a
 * gzip stream can decode to valid JSON for a while after a flipped byte).
 */
static int list_item(struct kr_reflector *r, size_t len)
{
	kr_json_tok *t = r->top->toks;
	struct meta m;
	int n = kr_json_parse_sel(r->req.scratch, len, t, KR_JSON_TOKENS, sel_item_paths, ITEM_PATHS);
	int ix[OK_N];
	int32_t idx;

	r->req.events++;
	if (n == KR_ENOSPC) {
		/* Too many tokens to read: like an object too large to hold. */
		kr_log(KR_LOG_ERROR, "%s: unable to read a list item of %zu bytes: " TOKENS_FULL,
		       r->res.name, len);
		skipped_object(r, len, len, "");
		return 0;
	}
	if (n > 0)
		kr_json_members(r->req.scratch, t, n, 0, object_keys, OK_N, ix);
	if (n < 0 || read_meta(r->req.scratch, t, n, ix, &m) != 0) {
		r->skipped++;
		kr_log(KR_LOG_ERROR, "%s: unable to read a list item of %zu bytes: %s", r->res.name, len,
		       n < 0 ? "malformed JSON" : "no metadata.name");
		return 0;
	}
	idx = kr_store_index(r->top->store, r->index, m.key, m.keylen);
	if (idx >= 0 && r->top->store->entries[idx].seen == r->gen) {
		kr_log(KR_LOG_ERROR, "%s: malformed list response: it names %s twice", r->res.name, m.key);
		r->req.stream_error = 1;
		return -1;
	}
	apply_object(r, &m, settle_object(r, r->req.scratch, len, t, n, 0, ix));
	r->applied++;
	return 0;
}

/* --- responses -------------------------------------------------------------------------- */

static int on_head(void *arg, const struct kr_http_resp *resp)
{
	struct kr_reflector *r = arg;

	r->req.status = resp->status;
	if (r->req.status != 401)
		r->auth_retried = 0;
	if (r->req.status == 401 || r->req.status == 403)
		kr_log(KR_LOG_WARN, "%s: the server answered %d %s", r->res.name, r->req.status,
		       r->req.status == 401 ? "Unauthorized: the credentials were refused"
					: "Forbidden: check the RBAC rules for get, list and watch");
	r->req.retry_after_s = kr_http_retry_after_delay(resp, kr_port_wall_seconds());
	/*
	 * The initial-events deadline is quiet time in a stream the server has
	 * accepted: a late answer (APF queueing, a slow link) is not a server
	 * that never sends the bookmark, and must not be remembered as one.
	 */
	if (r->req.status == 200)
		tell_state(r, r->synced && r->phase == KR_PH_WATCH ? KR_HEALTH_SYNCED : KR_HEALTH_CONNECTED,
			   NULL, 0);
	if (r->phase == KR_PH_WATCHLIST && r->req.status == 200)
		kr_loop_timer_at(r->top->loop, &r->deadline,
				 kr_port_now_ms() + r->top->opts.initial_events_timeout_ms);
	/* The server accepted the saved resourceVersion: the restored mirror is live. */
	if (r->phase == KR_PH_WATCH && r->req.status == 200 && RESTORED(r))
		warm_synced(r, 0);
	/* The tail is named with the first body bytes (check_output), when it is free. */
	kr_json_framer_init(&r->req.framer);
	/* A watch stream is one event per line: a line cut short is a broken stream. */
	kr_json_framer_set_lines(&r->req.framer, r->req.status == 200);
	kr_json_items_init(&r->req.items);
	return 0;
}

static long on_body_status(struct kr_reflector *r, const char *data, size_t len)
{
	size_t used;
	int res;

	/* An error response: its Status body, kept only if it fits. */
	res = kr_json_framer_feed(&r->req.framer, data, len, &used);
	if (res == KR_JSON_OBJECT) {
		kr_json_tok *t = r->top->toks;
		int n = kr_json_parse(r->req.scratch, r->req.framer.len, t, KR_JSON_TOKENS);

		if (n > 0)
			read_status(r, r->req.scratch, t, n, 0);
	}
	return (long)len;
}

/*
 * Every reflector frames into the one free tail of the store, one object at
 * a time: the resource that named the tail last (tail_user) keeps it while
 * it is in the middle of an object there. Another resource's bytes wait in
 * its connection (which stops reading) until that object is whole, and the
 * one in the middle yields at its next object boundary when somebody waits,
 * so busy streams take turns object by object. Only an object whose stream
 * has sent nothing for TAIL_STALL_MS is cut for another: its resource reads
 * it again (lost_by_move).
 */

/* Nonzero while r has half an object in its output buffer. */
static int framing(const struct kr_reflector *r)
{
	if (r->phase == KR_PH_LIST && r->req.status == 200)
		return kr_json_items_busy(&r->req.items);
	return kr_json_framer_busy(&r->req.framer);
}

/* Nonzero while r holds the tail: half an object in it, on a live response. */
static int holds_tail(const struct kr_reflector *r)
{
	return r->conn.have_request && r->conn.state == KR_CONN_RECEIVING && framing(r);
}

/* Some other resource's bytes wait for the tail. */
static int tail_wanted(const struct kr_reflector *r)
{
	const struct kr_reflect *top = r->top;
	int i;

	for (i = 0; i < top->nrefl; i++)
		if (&top->refl[i] != r && top->refl[i].tail_waiting)
			return 1;
	return 0;
}

/*
 * The tail is free: every resource waiting for it but `from` (the one that
 * just let it go, may be NULL) looks again, in the next loop pass.
 */
static void tail_released(struct kr_reflect *top, const struct kr_reflector *from)
{
	int i;

	for (i = 0; i < top->nrefl; i++)
		if (top->refl[i].tail_waiting && &top->refl[i] != from)
			kr_loop_timer_at(top->loop, &top->refl[i].tail_wait, kr_port_now_ms());
}

/* r waits for the tail until at (or until tail_released says it is free). */
static void wait_for_tail(struct kr_reflector *r, kr_ms_t at)
{
	r->tail_waiting = 1;
	kr_loop_timer_at(r->top->loop, &r->tail_wait, at);
}

/* Nonzero if r must hold its bytes back because another resource holds the tail. */
static int tail_busy(struct kr_reflector *r)
{
	struct kr_reflector *h = r->top->tail_user;
	kr_ms_t now;

	if (!h || h == r || !holds_tail(h))
		return 0;
	now = kr_port_now_ms();
	if (now - h->body_at >= TAIL_STALL_MS) {
		kr_log(KR_LOG_INFO, "%s: %s sent nothing for %d ms in the middle of an object; "
		       "it will read that object again", r->res.name, h->res.name, TAIL_STALL_MS);
		r->tail_cuts++;
		return 0;
	}
	r->tail_waits++;
	wait_for_tail(r, h->body_at + TAIL_STALL_MS);
	return 1;
}

static void on_tail_wait(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_reflector *r = t->arg;

	(void)loop;
	r->tail_waiting = 0;
	if (r->conn.held)
		kr_conn_resume(&r->conn);
	else
		tail_released(r->top, r);  /* its request ended meanwhile: the next one may go */
}

/*
 * Names the tail as r's output before r writes a byte, unless r named it
 * last and nothing was framed, committed or compacted there since. Renamed in
 * the middle of an object (after another cut it), that object is lost: it
 * comes out as SKIPPED with nothing kept, and on_body ends the response.
 */
static void check_output(struct kr_reflector *r)
{
	struct kr_reflect *top = r->top;
	struct kr_store *s = top->store;

	if (r->req.scratch && top->tail_user == r && r->req.scratch_used == s->used &&
	    r->req.scratch_compactions == s->compactions)
		return;
	top->tail_user = r;
	/* Sticky until the object ends: renamed again later, it is no longer "framing". */
	if (framing(r))
		r->req.scratch_moved = 1;
	next_output(r);
	if (r->phase == KR_PH_LIST && r->req.status == 200)
		kr_json_items_set_output(&r->req.items, r->req.scratch, item_cap(r));
	else
		kr_json_framer_set_output(&r->req.framer, r->req.scratch, r->req.scratch_cap);
}

/* A SKIPPED object with nothing kept after check_output: it was cut by the move. */
static int lost_by_move(struct kr_reflector *r, size_t kept)
{
	if (!r->req.scratch_moved || kept)
		return 0;
	kr_log(KR_LOG_INFO, "%s: another resource's object took the buffer of one in progress; "
	       "reading it again", r->res.name);
	r->req.tail_lost = 1;
	r->tail_rereads++;
	return 1;
}

/*
 * An object that outgrew its space needs no more of the tail, only its
 * name: read it from the bytes it has there, then frame the rest into
 * nothing, so that no other resource waits for the end of an object that
 * will not be held (however long, or endless, it is).
 */
static void let_go_if_too_large(struct kr_reflector *r)
{
	int list = r->phase == KR_PH_LIST;

	if (r->req.skip.state ||
	    !(list ? kr_json_items_outgrown(&r->req.items) : kr_json_framer_outgrown(&r->req.framer)))
		return;
	name_skipped(r, list ? r->req.items.f.len : r->req.framer.len, list ? "" : "object.");
	if (list)
		kr_json_items_set_output(&r->req.items, NULL, 0);
	else
		kr_json_framer_set_output(&r->req.framer, NULL, 0);
}

/* Frames data[0..len) into the tail. Returns the bytes taken (fewer to yield the tail) or -1. */
static long take_body(struct kr_reflector *r, const char *data, size_t len)
{
	size_t left = len;

	while (left > 0) {
		size_t used = 0;
		int res;

		if (r->phase == KR_PH_LIST) {
			res = kr_json_items_feed(&r->req.items, data, left, &used);
			data += used;
			left -= used;
			if (res == KR_JSON_OBJECT) {
				r->req.scratch_moved = 0;
				if (list_item(r, r->req.items.len) < 0)
					return -1;
			} else if (res == KR_JSON_SKIPPED) {
				if (lost_by_move(r, r->req.items.len))
					return -1;
				r->req.scratch_moved = 0;
				skipped_object(r, r->req.items.len, r->req.items.skipped_bytes, "");
			} else if (res == KR_JSON_END) {
				r->req.list_complete = 1;
				continue;
			} else if (res < 0) {
				kr_log(KR_LOG_ERROR, "%s: malformed list response: %s", r->res.name,
				       r->req.items.error ? r->req.items.error : "?");
				r->req.stream_error = 1;
				return -1;
			} else {
				let_go_if_too_large(r);
				continue;
			}
		} else {
			int pre = 0;

			/*
			 * A whole line in hand is copied and checked in one pass, unscanned
			 * by the framer; only if it is not exactly one valid object does the
			 * framer take the same bytes, and decide as it always has.
			 */
			res = kr_json_framer_line(&r->req.framer, data, left, &used);
			if (res == KR_JSON_OBJECT &&
			    (pre = tokenize_event(r->req.scratch, r->req.framer.len, r->top->toks)) <= 0)
				res = 0;
			if (res != KR_JSON_OBJECT) {
				pre = 0;
				res = kr_json_framer_feed(&r->req.framer, data, left, &used);
			}
			data += used;
			left -= used;
			if (res == KR_JSON_OBJECT) {
				r->req.scratch_moved = 0;
				if (watch_event(r, r->req.framer.len, pre) < 0)
					return -1;
			} else if (res == KR_JSON_SKIPPED) {
				if (lost_by_move(r, r->req.framer.len))
					return -1;
				r->req.scratch_moved = 0;
				/* A change that cannot even be named must not go unnoticed: relist. */
				if (skipped_object(r, r->req.framer.len, r->req.framer.skipped_bytes, "object.") < 0 &&
				    r->phase == KR_PH_WATCH)
					return -1;
			} else if (res < 0) {
				kr_log(KR_LOG_ERROR, "%s: unable to read the watch stream: %s; dropping it, "
				       "%s%s", r->res.name, r->req.framer.error ? r->req.framer.error : "?",
				       r->phase == KR_PH_WATCH ? "watching again from resourceVersion "
							       : "falling back to a list",
				       r->phase == KR_PH_WATCH ? r->last_rv : "");
				r->req.stream_error = 1;
				return -1;
			} else {
				let_go_if_too_large(r);
				continue;
			}
		}
		/* An object is done: between objects, the tail goes to whoever waits for it. */
		if (left > 0 && tail_wanted(r)) {
			r->tail_yields++;
			wait_for_tail(r, kr_port_now_ms() + TAIL_STALL_MS);
			return (long)(len - left);
		}
		next_output(r);
		if (r->phase == KR_PH_LIST)
			kr_json_items_set_output(&r->req.items, r->req.scratch, item_cap(r));
		else
			kr_json_framer_set_output(&r->req.framer, r->req.scratch, r->req.scratch_cap);
	}
	return (long)len;
}

static long on_body(void *arg, const char *data, size_t len)
{
	struct kr_reflector *r = arg;
	long took;

	if (tail_busy(r))
		return 0;
	r->body_at = kr_port_now_ms();
	check_output(r);
	took = r->req.status != 200 ? on_body_status(r, data, len) : take_body(r, data, len);
	if (took >= 0 && !framing(r))
		tail_released(r->top, r);
	return took;
}

/* Retry-After on a 429 or any 5xx, with retries left (honour_retry_after). */
static int retry_after_due(const struct kr_reflector *r)
{
	return (r->req.status == 429 || r->req.status >= 500) && r->req.retry_after_s >= 0 &&
	       r->retry_after_count < MAX_RETRY_AFTER;
}

/* After a 429 or any 5xx with Retry-After (client-go's REST layer): the same request again, at most 10 times. */
static void honour_retry_after(struct kr_reflector *r, void (*again)(struct kr_reflector *))
{
	long s = r->req.retry_after_s;

	if (s > MAX_RETRY_AFTER_S)
		s = MAX_RETRY_AFTER_S;
	r->retry_after_count++;
	kr_reflector_classify_failure(r);
	kr_log(KR_LOG_WARN, "%s: server answered %d, retrying in %ld s as it asked", r->res.name,
	       r->req.status, s);
	wait_then(r, s * 1000, again);
	tell_state(r, KR_HEALTH_BACKOFF, "the server asked to retry later (Retry-After)", s * 1000);
}

/* The same page again: not one more page (list_pages picks the list's RV). */
static void again_list_page(struct kr_reflector *r)
{
	r->list.pages--;
	request(r, REQ_LIST);
}

static void again_watch(struct kr_reflector *r)
{
	request(r, REQ_WATCH);
}

static void again_watch_list(struct kr_reflector *r)
{
	request(r, REQ_WATCHLIST);
}

/* A page that asks for more: the next one, with its continue token (client-go's pager). */
static void next_page(struct kr_reflector *r)
{
	if (r->list.pages == 1)
		copy_str(r->list.rv, sizeof(r->list.rv), r->req.items.resource_version);
	copy_str(r->list.continue_token, sizeof(r->list.continue_token), r->req.items.continue_token);
	request(r, REQ_LIST);
}

/* The list's last page: synced at the list's resourceVersion, then a watch from it. */
static void list_synced(struct kr_reflector *r)
{
	if (r->list.pages == 1 || r->list.full_retry)
		copy_str(r->list.rv, sizeof(r->list.rv), r->req.items.resource_version);
	/* RV "0" answered in pages: the server has no watch cache; stay paginated. */
	if (r->list.has_rv && strcmp(r->list.req_rv, "0") == 0 && r->list.pages > 1)
		r->paginated_result = 1;
	r->list_verify = 0;
	synced(r, r->list.rv, r->list.pages > 1 ? "paginated list" : "list");
	start_watch(r);
}

/* The pager's one full list, without a limit, at the original RV after an expired continue token. */
static void full_list(struct kr_reflector *r)
{
	kr_log(KR_LOG_INFO, "%s: continue token expired; listing in full", r->res.name);
	/* A list of its own: what the pages marked seen may be gone by now. */
	r->gen++;
	new_attempt(r);
	r->list.full_retry = 1;
	r->list.continue_token[0] = '\0';
	r->list.limit = 0;
	r->list.pages = 0;
	request(r, REQ_LIST);
}

/* The first page again at once at RV "" (a consistent read), once per list. */
static void list_latest(struct kr_reflector *r)
{
	kr_log(KR_LOG_INFO, "%s: resourceVersion %s is not available (%s); listing the latest",
	       r->res.name, r->list.req_rv, r->req.err_reason);
	r->rv_unavailable = 1;
	r->list.expired_retried = 1;
	r->list.has_rv = 0;
	r->list.req_rv[0] = '\0';
	r->list.pages = 0;
	request(r, REQ_LIST);
}

/*
 * A sync attempt that broke off after putting objects out (a list's items
 * go out as they come; a watch-list's events before its end bookmark) had
 * some newer than the resourceVersion it started from: the pager's full
 * list after an expired token and a watch-list are served at the newest.
 * The next list at that resourceVersion (exact when paginated) would hand
 * them out again, older; the latest (a consistent read) never is. With no
 * resourceVersion yet the list is at "0" (any), as client-go's first.
 */
static void list_latest_after_partial(struct kr_reflector *r)
{
	if (r->applied && r->last_rv[0])
		r->rv_unavailable = 1;
}

/*
 * The inflater for r's next list, or NULL to list plain: gzip is off, failed
 * before on this server, or another resource's list is using it (that one is
 * still listing: once it watches, the inflater is free).
 */
static struct kr_inflate *list_gzip(struct kr_reflector *r)
{
	struct kr_reflect *top = r->top;
	struct kr_reflector *u = top->gzip_user;

	r->gzip_list = 0;
#if !KR_WITH_GZIP
	(void)u;
	return NULL;
#else
	if (!top->opts.gzip || top->gzip_broken ||
	    (u && u != r && u->gzip_list && u->phase == KR_PH_LIST && u->conn.have_request))
		return NULL;
	top->gzip_user = r;
	r->gzip_list = 1;
	kr_inflate_reset(&top->gz);
	return &top->gz;
#endif
}

/* What the inflater said of a gzip list that failed, or NULL. */
static const char *gzip_error(const struct kr_reflect *top)
{
#if KR_WITH_GZIP
	return top->gz.error;
#else
	(void)top;
	return NULL;
#endif
}

/*
 * What a list's body leaves behind before its end is classified: a corrupt
 * gzip body or a bomb (or a list that decoded to broken JSON, which a
 * corrupt body can do before its CRC is reached) sends the relist, and every
 * list after it, plain, checking what this one left; a body that ended
 * before its list object closed is not complete.
 */
static void list_body_ended(struct kr_reflector *r, int err)
{
	if (err != 0 && r->gzip_list && (gzip_error(r->top) || r->req.stream_error) && !r->top->gzip_broken) {
		r->top->gzip_broken = 1;
		r->list_verify = 1;
		kr_log(KR_LOG_WARN, "%s: unable to inflate the gzip list: %s; listing without gzip "
		       "from now on", r->res.name,
		       gzip_error(r->top) ? gzip_error(r->top) : "it decoded to malformed JSON");
	}
	if (err == 0 && r->req.status == 200 && !r->req.stream_error && kr_json_items_eof(&r->req.items) != 0)
		r->req.list_complete = 0;
}

static void watch_list_fallback(struct kr_reflector *r, int remember, const char *why)
{
	struct kr_reflect *top = r->top;

	kr_loop_timer_cancel(top->loop, &r->deadline);
	if (remember && top->opts.watch_list == KR_WL_AUTO && !top->watch_list_unsupported) {
		top->watch_list_unsupported = 1;
		kr_log(KR_LOG_WARN, "%s: the server does not support watch-list (%s); using "
		       "paginated lists from now on", r->res.name, why);
	} else {
		kr_log(KR_LOG_INFO, "%s: watch-list failed (%s); falling back to a list",
		       r->res.name, why);
	}
	list_latest_after_partial(r);
	start_list(r);
}

/* --- how a watch-list or a watch ended, and what comes next ------------------------ */

/*
 * A list's Status that the pager acts on before the status code, each way
 * once per list: an expired continue token (a full list), an RV it cannot
 * serve on the first page (the latest). KR_OC_N when neither.
 */
static enum kr_outcome list_status(const struct kr_reflector *r)
{
	if (r->list.continue_token[0]) {
		if (strcmp(r->req.err_reason, "Expired") == 0 && !r->list.full_retry)
			return KR_OC_TOKEN_EXPIRED;
		return KR_OC_N;
	}
	if (r->list.expired_retried)
		return KR_OC_N;
	return is_expired(r) ? KR_OC_GONE : r->req.err_too_large ? KR_OC_TOO_LARGE : KR_OC_N;
}

enum kr_outcome kr_reflector_outcome(const struct kr_reflector *r, int err, kr_ms_t now)
{
	int list = r->phase == KR_PH_LIST;
	enum kr_outcome o;

	if (r->req.tail_lost)
		return KR_OC_MOVED;
	/* No head: nothing of the body (events, ERROR, stream error) either. */
	if (r->req.status == 0 && err != 0)
		return err == KR_EPROTO ? KR_OC_BAD_HEAD : KR_OC_NO_ANSWER;
	if (list && r->req.status == 200 && err == 0 && !r->req.stream_error) {
		if (!r->req.list_complete)
			return KR_OC_ENDED_EARLY;
		return r->req.items.continue_token[0] ? KR_OC_PAGE : KR_OC_COMPLETE;
	}
	/* A list body that broke off, or an error answer cut short: what it said is not whole. */
	if (list && (err != 0 || r->req.status == 200))
		return KR_OC_STREAM_ERROR;
	if (r->req.status != 200) {
		if (retry_after_due(r))
			return KR_OC_RETRY_AFTER;
		if (list && (o = list_status(r)) != KR_OC_N)
			return o;
		if (r->req.status == 429)
			return KR_OC_THROTTLED;
		if (r->req.status == 401 || r->req.status == 403)
			return KR_OC_REFUSED;
		/* A list's are list_status's, once. */
		if (!list && is_expired(r))
			return KR_OC_GONE;
		if (!list && r->req.err_too_large)
			return KR_OC_TOO_LARGE;
		if (r->req.status == 400 || r->req.status == 405 || r->req.status == 422)
			return KR_OC_REJECTED;
		return KR_OC_HTTP_ERROR;
	}
	if (r->req.error_event) {
		if (r->req.err_code == 429)
			return KR_OC_ERROR_429;
		if (is_expired(r))
			return KR_OC_ERROR_GONE;
		if (r->req.err_too_large)
			return KR_OC_ERROR_TOO_LARGE;
		if (strstr(r->req.err_message, "RequestWatchProgress"))
			return KR_OC_ERROR_NO_PROGRESS;
		return KR_OC_ERROR_EVENT;
	}
	/* Broken JSON, or broken chunking or HTTP framing (conn's KR_EPROTO): the same thing. */
	if (r->req.stream_error || err == KR_EPROTO)
		return KR_OC_STREAM_ERROR;
	/* During a watch-list, objects not held make its sync partial, not a relist. */
	if (r->phase == KR_PH_WATCH && r->skipped)
		return KR_OC_NOT_HELD;
	if (now - r->req.watch_start < VERY_SHORT_WATCH_MS && r->req.events == 0)
		return KR_OC_VERY_SHORT;
	return KR_OC_CLOSED;
}

#define L KR_PH_LIST
#define WL KR_PH_WATCHLIST
#define W KR_PH_WATCH
#define LF KR_RULE_LIST_FAILED
#define ERRS KR_RULE_ERRORS
#define EXP KR_RULE_EXPIRED

/*
 * The decision table: phase x outcome -> step, the single source of the
 * rules (src/README.md "How a request ends" is this table in words). Each
 * row: the client-go behaviour it reproduces (or kreflect's documented
 * difference), then "test:" the e2e scenario (tests/e2e/test_e2e.py), sim
 * regression (tests/sim/regress.c) or sim seed (a random schedule, where no
 * directed test reaches the row yet) that drives the test API server into it;
 * tests/unit/test_rules.c walks the rows, tests/rules/check_rules.py checks
 * that each named test exists.
 */
/*
 * The texts of the table's rows, each ended by a NUL in one string: a row
 * names its text by a byte (0: none) instead of two pointers (16 bytes a row).
 */
#define KR_RULE_TEXTS(X) \
	X(RT_CUT, "the stream stalled in the middle of an object, which was cut") \
	X(RT_WL_FAILED, "watch-list request failed") \
	X(RT_WL_429, "watch-list got 429") \
	X(RT_WL_REFUSED, "watch-list refused") \
	X(RT_MALFORMED, "malformed stream") \
	X(RT_VERY_SHORT, "very short watch") \
	X(RT_W_FAILED, "watch request failed") \
	X(RT_W_MALFORMED, "malformed watch stream") \
	X(RT_W_429, "watch got 429") \
	X(RT_W_REFUSED, "watch refused") \
	X(RT_W_ERROR_429, "watch ERROR 429") \
	X(RT_W_EXPIRED, "watch expired") \
	X(RT_W_ERROR, "watch ERROR event") \
	X(RT_NOT_HELD, "an event could not be held") \
	X(RT_VERY_SHORT_LONG, "very short watch: the watch lasted less than a second with no events") \
	X(RT_LIST_FAILED, "list failed") \
	X(RT_ENDED_EARLY, "the list response ended early") \
	X(RT_LIST_MALFORMED, "malformed list response")
#define KR_RULE_TEXT_ENUM(name, text) name,
#define KR_RULE_TEXT_STR(text_name, text) text "\0"
enum { RT_NONE, KR_RULE_TEXTS(KR_RULE_TEXT_ENUM) RT_N };
static const char rule_texts[] = "\0" KR_RULE_TEXTS(KR_RULE_TEXT_STR);

/* Text i of rule_texts, or NULL for 0. */
static const char *rule_text(unsigned i)
{
	return i == RT_NONE || i >= RT_N ? NULL : kr_str_nth(rule_texts, i);
}

const struct kr_rule kr_reflect_rules[] = {
	/* --- list: ListAndWatch's paginated LIST, page by page (client-go's pager) ------ */
	/* kreflect: the shared tail was taken mid-object: the same page after a backoff step. test: sim seed 23 */
	{ L, KR_OC_MOVED, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_CUT, 0 },
	/* client-go: the list's error -> backoff, a new ListAndWatch (relist at the last RV). test: ListFails/no-answer */
	{ L, KR_OC_NO_ANSWER, KR_STEP_BACKOFF_RELIST, -1, ERRS | LF, RT_LIST_FAILED, 0 },
	/* as NO_ANSWER: a head that does not parse (or a coding not asked for). test: ListFails/bad-head */
	{ L, KR_OC_BAD_HEAD, KR_STEP_BACKOFF_RELIST, -1, ERRS | LF, RT_LIST_FAILED, 0 },
	/* client-go: a page whose continue token asks for more: the next page, without an RV. test: TestReflectorWatchListPageSize */
	{ L, KR_OC_PAGE, KR_STEP_NEXT_PAGE, -1, 0, 0, 0 },
	/* client-go: the last page: synced at the list's RV (its first page's), then a watch from it. test: TestReflectorListAndWatch/list */
	{ L, KR_OC_COMPLETE, KR_STEP_SYNCED, -1, 0, 0, 0 },
	/* client-go: a body that ends before the list object closes fails the list: backoff, relist. test: ListFails/ended-early */
	{ L, KR_OC_ENDED_EARLY, KR_STEP_BACKOFF_RELIST, -1, ERRS | LF, RT_LIST_FAILED, RT_ENDED_EARLY },
	/* client-go: a body cut short, broken chunking or JSON (or an error answer cut short): the same. test: ListCutMidBody */
	{ L, KR_OC_STREAM_ERROR, KR_STEP_BACKOFF_RELIST, -1, ERRS | LF, RT_LIST_FAILED, RT_LIST_MALFORMED },
	/* client-go's REST layer: the same page after Retry-After, at most 10 times. test: ListRetryAfter */
	{ L, KR_OC_RETRY_AFTER, KR_STEP_RETRY_AFTER, -1, 0, 0, 0 },
	/* client-go's pager: 410 Expired on a continue token -> one full list at the original RV, no limit. test: TestReflectorFullListIfExpired */
	{ L, KR_OC_TOKEN_EXPIRED, KR_STEP_FULL_LIST, -1, EXP, 0, 0 },
	/* client-go: a 429 with no Retry-After (or none left) fails the list: backoff, relist. test: ListFails/429 */
	{ L, KR_OC_THROTTLED, KR_STEP_BACKOFF_RELIST, -1, ERRS | EXP | LF, RT_LIST_FAILED, 0 },
	/* client-go: 401 (the token re-read did not help) or 403: the same. test: ListFails/403 */
	{ L, KR_OC_REFUSED, KR_STEP_BACKOFF_RELIST, -1, ERRS | EXP | LF, RT_LIST_FAILED, 0 },
	/* client-go: isExpiredError on the first page -> isLastSyncResourceVersionUnavailable: at once at RV "", once. test: TestReflectorExpiredExactResourceVersion */
	{ L, KR_OC_GONE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: isTooLargeResourceVersionError on the first page: the same. test: TestReflectorFullListIfTooLarge */
	{ L, KR_OC_TOO_LARGE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: 400, 405, 422: the list failed: backoff, relist. test: ListFails/422 */
	{ L, KR_OC_REJECTED, KR_STEP_BACKOFF_RELIST, -1, ERRS | EXP | LF, RT_LIST_FAILED, 0 },
	/* client-go: any other status (a 410 after the RV "" retry included): the same. test: TestReflectorListAndWatchWithErrors */
	{ L, KR_OC_HTTP_ERROR, KR_STEP_BACKOFF_RELIST, -1, ERRS | EXP | LF, RT_LIST_FAILED, 0 },

	/* --- watch-list: ListAndWatch's sendInitialEvents stream, before its end bookmark --- */
	/* kreflect: the shared tail was taken mid-object: the same watch-list after a backoff step. test: sim seed 458 */
	{ WL, KR_OC_MOVED, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_CUT, 0 },
	/* client-go: watchList's error -> backoff, try again (the watch-list is not given up for a dead link). test: OnceNothingListening */
	{ WL, KR_OC_NO_ANSWER, KR_STEP_BACKOFF_AGAIN, -1, ERRS | KR_RULE_NO_ANSWER, RT_WL_FAILED, 0 },
	/* as NO_ANSWER: a head that does not parse (or a coding not asked for) is no answer. test: BadHeadBacksOff/watch-list */
	{ WL, KR_OC_BAD_HEAD, KR_STEP_BACKOFF_AGAIN, -1, ERRS | KR_RULE_NO_ANSWER, RT_WL_FAILED, 0 },
	/* client-go's REST layer: the same request after Retry-After, at most 10 times. test: WatchListRetryAfter */
	{ WL, KR_OC_RETRY_AFTER, KR_STEP_RETRY_AFTER, -1, 0, 0, 0 },
	/* client-go: a 429 is not a reason to give up watch-list: backoff, again. test: TestWatchList/g-429-retried */
	{ WL, KR_OC_THROTTLED, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_WL_429, 0 },
	/* client-go: 401/403 neither: backoff, again. test: BadToken401 */
	{ WL, KR_OC_REFUSED, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_WL_REFUSED, 0 },
	/* client-go: isExpiredError -> isLastSyncResourceVersionUnavailable: at once at RV "". test: WatchListEnds/410-gone-at-once */
	{ WL, KR_OC_GONE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: isTooLargeResourceVersionError: the same. test: WatchListEnds/504-too-large-at-once */
	{ WL, KR_OC_TOO_LARGE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: a server without watch-list (400/405/422): LIST, remembered. test: TestWatchList/d-422-falls-back-remembered */
	{ WL, KR_OC_REJECTED, KR_STEP_FALLBACK_FOR_GOOD, -1, 0, 0, 0 },
	/* client-go: any other failure of watchList: fall back to LIST, not remembered. test: TestWatchList/c-error-falls-back-not-remembered */
	{ WL, KR_OC_HTTP_ERROR, KR_STEP_FALLBACK, -1, 0, 0, 0 },
	/* client-go: ERROR 429 as a 429. test: WatchListEnds/error-429-backs-off */
	{ WL, KR_OC_ERROR_429, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_WL_429, 0 },
	/* client-go: ERROR 410 at an RV: at once at RV "". test: WatchListEnds/error-410-at-once */
	{ WL, KR_OC_ERROR_GONE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: ERROR TooLarge (the cacher behind the RV): at once at RV "". test: WatchListRelistTooLargeRV */
	{ WL, KR_OC_ERROR_TOO_LARGE, KR_STEP_LATEST, -1, EXP, 0, 0 },
	/* client-go: a server that cannot RequestWatchProgress has no watch-list: LIST, remembered. test: WatchListEnds/error-no-watch-progress-lists */
	{ WL, KR_OC_ERROR_NO_PROGRESS, KR_STEP_FALLBACK_FOR_GOOD, -1, 0, 0, 0 },
	/* client-go: another ERROR: fall back to LIST, not remembered. test: WatchListEnds/error-500-lists */
	{ WL, KR_OC_ERROR_EVENT, KR_STEP_FALLBACK, -1, 0, 0, 0 },
	/* client-go: a broken stream fails watchList: fall back to LIST. test: CutEventDuringWatchListFallsBack */
	{ WL, KR_OC_STREAM_ERROR, KR_STEP_FALLBACK, -1, 0, RT_MALFORMED, 0 },
	/* client-go: a very short watch-list: fall back to LIST. test: VeryShortWatchListFallsBack */
	{ WL, KR_OC_VERY_SHORT, KR_STEP_FALLBACK, -1, 0, RT_VERY_SHORT, 0 },
	/* client-go: ended before the bookmark: watch-list again at once with a fresh mark. test: TestWatchList/h-closed-before-bookmark */
	{ WL, KR_OC_CLOSED, KR_STEP_AGAIN, -1, 0, 0, 0 },

	/* --- watch: after a sync, from the last RV ------------------------------------------ */
	/* kreflect: the shared tail was taken mid-object: the same watch after a backoff step. test: sim seed 129 */
	{ W, KR_OC_MOVED, KR_STEP_BACKOFF_AGAIN, -1, 0, RT_CUT, 0 },
	/* kreflect's improvement on client-go's relist: no answer keeps the RV; backoff, re-watch. test: ReconnectWithoutAnswer */
	{ W, KR_OC_NO_ANSWER, KR_STEP_BACKOFF_AGAIN, KR_RS_CONNECTION, ERRS | KR_RULE_NO_ANSWER, RT_W_FAILED, 0 },
	/* as STREAM_ERROR: a head that does not parse (or a coding not asked for). test: BadHeadBacksOff/watch */
	{ W, KR_OC_BAD_HEAD, KR_STEP_BACKOFF_AGAIN, KR_RS_STREAM_ERROR, ERRS, RT_W_MALFORMED, 0 },
	/* client-go's REST layer: the same watch after Retry-After. test: ServerErrorRetryAfter */
	{ W, KR_OC_RETRY_AFTER, KR_STEP_RETRY_AFTER, -1, 0, 0, 0 },
	/* client-go: a 429 keeps the RV: backoff, re-watch, no relist. test: TestNoRelistOnTooManyRequests */
	{ W, KR_OC_THROTTLED, KR_STEP_BACKOFF_AGAIN, KR_RS_THROTTLED, 0, RT_W_429, 0 },
	/* client-go: 401/403 keep the RV too. test: WatchRefusedRewatches/403 */
	{ W, KR_OC_REFUSED, KR_STEP_BACKOFF_AGAIN, KR_RS_THROTTLED, 0, RT_W_REFUSED, 0 },
	/* client-go: a watch refused with 410: relist after a backoff step. test: WatchRefusedRelists/410-gone */
	{ W, KR_OC_GONE, KR_STEP_BACKOFF_RELIST, KR_RS_HTTP_ERROR, ERRS | KR_RULE_EXPIRED_410 | KR_RULE_WARN_WHY, 0, 0 },
	/* client-go: the same for any refused watch. test: WatchRefusedRelists/504-too-large */
	{ W, KR_OC_TOO_LARGE, KR_STEP_BACKOFF_RELIST, KR_RS_HTTP_ERROR, ERRS | KR_RULE_EXPIRED_410 | KR_RULE_WARN_WHY, 0, 0 },
	/* client-go: the same. test: WatchRefusedRelists/422-rejected */
	{ W, KR_OC_REJECTED, KR_STEP_BACKOFF_RELIST, KR_RS_HTTP_ERROR, ERRS | KR_RULE_EXPIRED_410 | KR_RULE_WARN_WHY, 0, 0 },
	/* client-go: the same. test: TestReflectorListAndWatchWithErrors */
	{ W, KR_OC_HTTP_ERROR, KR_STEP_BACKOFF_RELIST, KR_RS_HTTP_ERROR, ERRS | KR_RULE_EXPIRED_410 | KR_RULE_WARN_WHY, 0, 0 },
	/* client-go: ERROR 429 keeps the RV: backoff, re-watch. test: TestBackoffOnTooManyRequests */
	{ W, KR_OC_ERROR_429, KR_STEP_BACKOFF_AGAIN, KR_RS_THROTTLED, 0, RT_W_ERROR_429, 0 },
	/* client-go: ERROR 410: relist at the last RV after one backoff step. test: TestReflectorExpiredExactResourceVersion */
	{ W, KR_OC_ERROR_GONE, KR_STEP_BACKOFF_RELIST, KR_RS_EXPIRED, EXP, RT_W_EXPIRED, 0 },
	/* client-go: any other ERROR ends the watch: relist after a backoff step. test: WatchErrorRelists/504-too-large */
	{ W, KR_OC_ERROR_TOO_LARGE, KR_STEP_BACKOFF_RELIST, KR_RS_ERROR_EVENT, 0, RT_W_ERROR, 0 },
	/* client-go: the same. test: WatchErrorRelists/no-watch-progress */
	{ W, KR_OC_ERROR_NO_PROGRESS, KR_STEP_BACKOFF_RELIST, KR_RS_ERROR_EVENT, 0, RT_W_ERROR, 0 },
	/* client-go: the same. test: WatchErrorEventsRelist */
	{ W, KR_OC_ERROR_EVENT, KR_STEP_BACKOFF_RELIST, KR_RS_ERROR_EVENT, 0, RT_W_ERROR, 0 },
	/* kreflect (client-go relists): never skip an event: re-watch from the last applied after a backoff step. test: MalformedStreamRewatches */
	{ W, KR_OC_STREAM_ERROR, KR_STEP_BACKOFF_AGAIN, KR_RS_STREAM_ERROR, ERRS, RT_W_MALFORMED, 0 },
	/* kreflect: an event not held: relist for it (the sync says partial). test: CapacityObjectsByWatch */
	{ W, KR_OC_NOT_HELD, KR_STEP_BACKOFF_RELIST, KR_RS_NOT_HELD, 0, RT_NOT_HELD, 0 },
	/* client-go: RT_VERY_SHORT: relist after a backoff step. test: VeryShortWatchRelists */
	{ W, KR_OC_VERY_SHORT, KR_STEP_BACKOFF_RELIST, KR_RS_VERY_SHORT, 0, RT_VERY_SHORT,
	  RT_VERY_SHORT_LONG },
	/* client-go: a clean end (timeoutSeconds) or a dropped stream: re-watch at once. test: CleanEndRewatches */
	{ W, KR_OC_CLOSED, KR_STEP_AGAIN, KR_RS_CLOSED, 0, 0, 0 },
};

const int kr_reflect_nrules = (int)(sizeof(kr_reflect_rules) / sizeof(kr_reflect_rules[0]));

#undef L
#undef WL
#undef W
#undef LF
#undef ERRS
#undef EXP

const struct kr_rule *kr_reflect_rule(int phase, enum kr_outcome o)
{
	int i;

	for (i = 0; i < kr_reflect_nrules; i++)
		if (kr_reflect_rules[i].phase == phase && kr_reflect_rules[i].outcome == o)
			return &kr_reflect_rules[i];
	return NULL;
}

/* A list, a watch-list or a watch ended: one classification, one row of the table, its step. */
static void end_request(struct kr_reflector *r, int err, const char *reason)
{
	int wl = r->phase == KR_PH_WATCHLIST, list = r->phase == KR_PH_LIST;
	void (*again)(struct kr_reflector *) = list ? again_list_page : wl ? again_watch_list : again_watch;
	enum kr_outcome o;
	const struct kr_rule *rule;
	const char *why;
	char text[320];

	if (wl)
		kr_loop_timer_cancel(r->top->loop, &r->deadline);
	if (list)
		list_body_ended(r, err);
	o = kr_reflector_outcome(r, err, kr_port_now_ms());
	rule = kr_reflect_rule(r->phase, o);
	if (!rule)
		return;  /* not reached: tests/unit/test_rules.c covers every phase and outcome */
	if (rule->restart >= 0)
		r->restarts[rule->restart]++;
	if (rule->flags & KR_RULE_ERRORS)
		r->errors++;
	if (rule->flags & KR_RULE_EXPIRED)
		r->expired += is_expired(r);
	if ((rule->flags & KR_RULE_EXPIRED_410) && r->req.status == 410)
		r->expired++;
	if (rule->flags & KR_RULE_NO_ANSWER) {
		kr_log(KR_LOG_WARN, "%s: %s", r->res.name, reason);
		unreachable(r);
	}
	why = rule_text(rule->why);
	if (!why || (rule->flags & KR_RULE_LIST_FAILED)) {
		if (list)
			kr_snprintf(text, sizeof(text), "%d %s: %s", r->req.status, r->req.err_reason,
				    r->req.err_message);
		else if (!wl)
			kr_snprintf(text, sizeof(text), "watch got %d %s: %s", r->req.status, r->req.err_reason,
				    r->req.err_message);
		else if (r->req.error_event)
			kr_snprintf(text, sizeof(text), "ERROR %d %s", r->req.err_code, r->req.err_reason);
		else
			kr_snprintf(text, sizeof(text), "%d %s", r->req.status, r->req.err_reason);
		if (!why)
			why = text;
	}
	if (rule->flags & KR_RULE_LIST_FAILED) {
		/* What failed: the connection's reason, the row's text, or the server's Status. */
		if (r->req.status == 0)
			unreachable(r);
		list_latest_after_partial(r);
		kr_log(KR_LOG_WARN, "%s: list failed: %s", r->res.name,
		       err ? reason : rule->warn ? rule_text(rule->warn) : text);
	} else if (rule->warn || (rule->flags & KR_RULE_WARN_WHY)) {
		kr_log(KR_LOG_WARN, "%s: %s", r->res.name, rule->warn ? rule_text(rule->warn) : why);
	}
	switch ((enum kr_step)rule->step) {
	case KR_STEP_AGAIN:
		if (wl)
			kr_log(KR_LOG_INFO, "%s: watch-list stream ended before the initial-events-end "
			       "bookmark (%s); starting again", r->res.name, err ? reason : "clean end");
		else if (err != 0)
			kr_log(KR_LOG_INFO, "%s: watch closed: %s; watching again from %s", r->res.name,
			       reason, r->last_rv);
		request(r, wl ? REQ_WATCHLIST : REQ_WATCH);
		return;
	case KR_STEP_BACKOFF_AGAIN:
		backoff_then(r, again, why);
		return;
	case KR_STEP_RETRY_AFTER:
		honour_retry_after(r, again);
		return;
	case KR_STEP_LATEST:
		if (list) {
			list_latest(r);
			return;
		}
		r->rv_unavailable = 1;
		request(r, REQ_WATCHLIST);
		return;
	case KR_STEP_BACKOFF_RELIST:
		backoff_then(r, start_cycle, why);
		return;
	case KR_STEP_FALLBACK:
	case KR_STEP_FALLBACK_FOR_GOOD:
		watch_list_fallback(r, rule->step == KR_STEP_FALLBACK_FOR_GOOD, why);
		return;
	case KR_STEP_NEXT_PAGE:
		next_page(r);
		return;
	case KR_STEP_SYNCED:
		list_synced(r);
		return;
	case KR_STEP_FULL_LIST:
		full_list(r);
		return;
	case KR_STEP_N:
		return;
	}
}

/*
 * A 401: the token may have been rotated since the request left. Re-read it
 * now and, if it changed, send the same request again at once (once).
 */
static int retry_unauthorized(struct kr_reflector *r)
{
	struct kr_auth *a = r->top->auth;

	if (!a || r->auth_retried)
		return 0;
	kr_auth_refresh(a);
	if (a->reloads == r->req.auth_gen)
		return 0;
	r->auth_retried = 1;
	kr_log(KR_LOG_INFO, "%s: 401 Unauthorized; retrying with the new token from the file",
	       r->res.name);
	if (r->phase == KR_PH_LIST) {
		r->list.pages--;       /* the same page again */
		request(r, REQ_LIST);
	} else {
		request(r, r->phase == KR_PH_WATCH ? REQ_WATCH : REQ_WATCHLIST);
	}
	return 1;
}

static void on_end(void *arg, int err, const char *reason)
{
	struct kr_reflector *r = arg;

	tail_released(r->top, NULL);

	kr_log(KR_LOG_DEBUG, "%s: %s request ended: status %d, %lu %s, %s%s%s", r->res.name,
	       r->phase == KR_PH_LIST ? "list" : r->phase == KR_PH_WATCH ? "watch" : "watch-list",
	       r->req.status, r->req.events, r->phase == KR_PH_LIST ? "items" : "events",
	       err ? kr_strerror(err) : "complete", err ? ": " : "",
	       err ? reason : "");
	if (r->req.status == 401 && retry_unauthorized(r))
		return;
	if (r->phase != KR_PH_IDLE)
		end_request(r, err, reason);
}

/* --- requests ------------------------------------------------------------------------------ */

static void request(struct kr_reflector *r, int kind)
{
	struct kr_reflect *top = r->top;
	struct kr_http_param p[10];
	struct kr_request req;
	char limit[24], timeout[24];
	size_t n = 0;
	int res;

	memset(&req, 0, sizeof(req));
	/* Nothing of the last response is left: its status, Status, stream and object in progress. */
	memset(&r->req, 0, sizeof(r->req));
	kr_snprintf(timeout, sizeof(timeout), "%lld",
		 (long long)kr_rand_range(&top->rand, top->opts.min_watch_timeout_s,
					  2 * (int64_t)top->opts.min_watch_timeout_s));
	if (kind == REQ_WATCHLIST || kind == REQ_WATCH) {
		const char *rv = r->rv_unavailable ? "" : r->last_rv;

		p[n++] = (struct kr_http_param){ "allowWatchBookmarks", "true" };
		if (r->res.field_selector[0])
			p[n++] = (struct kr_http_param){ "fieldSelector", r->res.field_selector };
		if (r->res.label_selector[0])
			p[n++] = (struct kr_http_param){ "labelSelector", r->res.label_selector };
		if (rv[0])
			p[n++] = (struct kr_http_param){ "resourceVersion", rv };
		if (kind == REQ_WATCHLIST) {
			p[n++] = (struct kr_http_param){ "resourceVersionMatch", "NotOlderThan" };
			p[n++] = (struct kr_http_param){ "sendInitialEvents", "true" };
		}
		p[n++] = (struct kr_http_param){ "timeoutSeconds", timeout };
		p[n++] = (struct kr_http_param){ "watch", "true" };
		r->phase = kind == REQ_WATCH ? KR_PH_WATCH : KR_PH_WATCHLIST;
		r->req.watch_start = kr_port_now_ms();
		/* A watch or a watch-list is a sync attempt of its own. */
		r->applied = 0;
		new_attempt(r);
		/* The cadence is the server's, kept across re-watches (and restored from a snapshot). */
		req.idle_timeout_ms = kr_cadence_idle_ms(&top->cadence);
		if (kind == REQ_WATCHLIST) {
			r->gen++;
			r->watch_lists++;
			r->listing = 1;
			/* The bookmark deadline starts with the server's answer (on_head). */
			kr_loop_timer_cancel(top->loop, &r->deadline);
		} else {
			r->watches++;
			r->req.propagate = !(r->last_rv[0] == '\0' || strcmp(r->last_rv, "0") == 0);
		}
	} else {
		if (r->list.continue_token[0])
			p[n++] = (struct kr_http_param){ "continue", r->list.continue_token };
		if (r->res.field_selector[0])
			p[n++] = (struct kr_http_param){ "fieldSelector", r->res.field_selector };
		if (r->res.label_selector[0])
			p[n++] = (struct kr_http_param){ "labelSelector", r->res.label_selector };
		if (r->list.limit > 0) {
			kr_snprintf(limit, sizeof(limit), "%d", r->list.limit);
			p[n++] = (struct kr_http_param){ "limit", limit };
		}
		/* A continuation carries no resourceVersion (client-go's pager). */
		if (!r->list.continue_token[0] && r->list.has_rv)
			p[n++] = (struct kr_http_param){ "resourceVersion", r->list.req_rv };
		r->phase = KR_PH_LIST;
		r->lists++;     /* every page is a LIST request (kreflect_lists_total) */
		r->list.pages++;
		req.inflate = list_gzip(r);
	}
	req.path = r->path;
	req.params = p;
	req.nparams = n;
	if (top->auth) {
		/* Rotated tokens are picked up before each request (a small read). */
		if (kr_auth_refresh(top->auth) == 1)
			kr_log(KR_LOG_INFO, "%s: the token file changed; using the new token", r->res.name);
		req.bearer_token = kr_auth_token(top->auth);
		r->req.auth_gen = top->auth->reloads;
	}
	req.on_head = on_head;
	req.on_body = on_body;
	req.on_end = on_end;
	req.arg = r;
	res = kr_conn_request(&r->conn, &req);
	if (res < 0) {
		kr_log(KR_LOG_ERROR, "%s: unable to build the request: %s", r->res.name, kr_strerror(res));
		backoff_then(r, start_cycle, "request too large");
	}
}

static void start_list(struct kr_reflector *r)
{
	struct kr_reflect *top = r->top;
	const char *rv = r->rv_unavailable ? "" : (r->last_rv[0] ? r->last_rv : "0");

	r->gen++;
	r->listing = 1;
	new_attempt(r);
	r->applied = 0;
	r->retry_after_count = 0;
	memset(&r->list, 0, sizeof(r->list));
	copy_str(r->list.req_rv, sizeof(r->list.req_rv), rv);
	r->list.has_rv = rv[0] != '\0';
	/* client-go's page size rules (src/README.md "One ListAndWatch"). */
	if (top->opts.page_size_forced)
		r->list.limit = top->opts.page_size;
	else if (r->paginated_result)
		r->list.limit = top->opts.page_size;
	else if (rv[0] && strcmp(rv, "0") != 0)
		r->list.limit = 0;
	else
		r->list.limit = top->opts.page_size;
	request(r, REQ_LIST);
}

static void start_watch(struct kr_reflector *r)
{
	r->retry_after_count = 0;
	request(r, REQ_WATCH);
}

/* One ListAndWatch. */
static void start_cycle(struct kr_reflector *r)
{
	struct kr_reflect *top = r->top;

	r->cycle_start = kr_port_now_ms();
	r->retry_after_count = 0;
	/* This relist is the one a room timer would make: its sync arms it again if need be. */
	kr_loop_timer_cancel(top->loop, &r->room);
	if (r->synced)
		r->relists++;
	if (top->opts.watch_list == KR_WL_OFF ||
	    (top->opts.watch_list == KR_WL_AUTO && top->watch_list_unsupported)) {
		start_list(r);
		return;
	}
	request(r, REQ_WATCHLIST);
}

static void on_initial_events_deadline(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_reflector *r = t->arg;
	int quiet_ms = r->top->opts.initial_events_timeout_ms;
	kr_ms_t now = kr_port_now_ms(), cap = r->req.watch_start + WL_DEADLINE_CAP * (kr_ms_t)quiet_ms;
	char why[96];

	(void)loop;
	if (r->phase != KR_PH_WATCHLIST)
		return;
	if (now < cap) {
		/*
		 * Not quiet: an object still arriving on a slow link (bytes since,
		 * no event yet), or bytes held back while another resource frames
		 * its object in the tail. Checked here, not per read.
		 */
		kr_ms_t quiet = r->conn.held ? now + quiet_ms : r->body_at + quiet_ms;

		if (quiet > now) {
			kr_loop_timer_at(r->top->loop, &r->deadline, quiet < cap ? quiet : cap);
			return;
		}
	}
	if (now >= cap)
		kr_snprintf(why, sizeof(why), "no initial-events-end bookmark within %lld ms of events",
			    (long long)(now - r->req.watch_start));
	else
		kr_snprintf(why, sizeof(why), "no initial-events-end bookmark after %d ms without events",
			    quiet_ms);
	kr_conn_close(&r->conn, why);
	tail_released(r->top, NULL);
	watch_list_fallback(r, 1, why);
}

/*
 * A partial sync left room behind it (stale objects swept at its end), or a
 * delete made room while partial (watch_event): one relist for the objects
 * it could not hold, however many deletes came meanwhile. Also when the
 * deletes left nothing missing: its SYNCED says the mirror is whole.
 */
static void on_room(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_reflector *r = t->arg;

	(void)loop;
	if (r->phase != KR_PH_WATCH || !(r->partial || r->synced_partial))
		return;
	r->restarts[KR_RS_NOT_HELD]++;
	kr_conn_close(&r->conn, "relisting for objects the last sync had no room for");
	backoff_then(r, start_cycle, "the last sync left room for objects it could not hold");
}

static void resync_fn(void *arg, const struct kr_store_view *v)
{
	emit_view(arg, KR_EV_RESYNC, v);
}

static void on_resync(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_reflector *r = t->arg;

	kr_store_foreach(r->top->store, r->index, resync_fn, r);
	kr_loop_timer_at(loop, t, kr_port_now_ms() + r->top->opts.resync_ms);
}

/* --- setup -------------------------------------------------------------------------------- */

int kr_reflect_init(struct kr_reflect *top, struct kr_loop *loop, struct kr_store *store,
		    const struct kr_conn_cfg *conn_cfg, const struct kr_reflector_opts *opts,
		    struct kr_reflector *refl, const struct kr_resource *res, int n)
{
	int i, rc;

	/* Its scratch, tokens and the inflater's window are most of it: only the
	 * pages already written are written again (kr_port_zero), and a client
	 * that never inflates or never fills its scratch keeps them out of RAM. */
	kr_port_zero(top, sizeof(*top));
	top->loop = loop;
	top->store = store;
	top->opts = *opts;
	top->conn_cfg = *conn_cfg;
	top->refl = refl;
	top->nrefl = n;
	kr_rand_seed(&top->rand, 0);
#if KR_WITH_GZIP
	kr_inflate_init(&top->gz, KR_INFLATE_MAX_OUTPUT, KR_INFLATE_MAX_RATIO);
#endif
	kr_cadence_init(&top->cadence, opts->idle_default_ms);
	for (i = 0; i < n; i++) {
		struct kr_reflector *r = &refl[i];

		kr_port_zero(r, sizeof(*r));
		r->top = top;
		r->index = i;
		r->res = res[i];
		if (kr_resource_path(&r->res, r->path, sizeof(r->path)) < 0)
			return KR_ETOOBIG;
		/* The resource's share of the arena (resources.def), if it has one. */
		if (r->res.arena_share > 0 && r->res.arena_share < 100)
			kr_store_set_quota(store, i, store->size / 100 * r->res.arena_share);
		rc = kr_conn_init(&r->conn, loop, conn_cfg);
		if (rc < 0)
			return rc;
		r->wait.fire = on_wait;
		r->wait.arg = r;
		r->deadline.fire = on_initial_events_deadline;
		r->deadline.arg = r;
		r->resync.fire = on_resync;
		r->resync.arg = r;
		r->tail_wait.fire = on_tail_wait;
		r->tail_wait.arg = r;
		r->room.fire = on_room;
		r->room.arg = r;
		kr_backoff_init(&r->backoff, &top->rand, kr_port_now_ms());
	}
	return 0;
}

int kr_reflect_add_sink(struct kr_reflect *top, const struct kr_sink *sink)
{
	if (top->nsinks == KR_MAX_SINKS)
		return KR_ENOSPC;
	top->sinks[top->nsinks++] = *sink;
	return 0;
}

void kr_reflect_restore(struct kr_reflect *top, int i, const char *rv, int64_t bookmark_gap_ms,
			int counts_as_synced)
{
	struct kr_reflector *r = &top->refl[i];

	copy_str(r->last_rv, sizeof(r->last_rv), rv);
	r->restored = 1;
	r->restored_synced = counts_as_synced;
	/* The cadence the server showed before the restart, until it shows it again. */
	if (bookmark_gap_ms > kr_cadence_get(&top->cadence))
		kr_cadence_set(&top->cadence, bookmark_gap_ms);
}

static void restored_fn(void *arg, const struct kr_store_view *v)
{
	struct kr_reflector *r = arg;
	struct kr_reflect *top = r->top;
	struct kr_event ev;
	int i;

	if (!v->held)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.type = KR_EV_ADDED;
	ev.res = r->index;
	ev.resource = r->res.name;
	ev.key = v->key;
	ev.rv = v->rv;
	ev.obj = v->obj;
	ev.objlen = v->objlen;
	ev.restored = 1;
	for (i = 0; i < top->nsinks; i++)
		top->sinks[i].event(top->sinks[i].arg, &ev);
}

/*
 * A resource that needs no list: its mirror was restored (restored = 1:
 * not confirmed yet, an offline start) or the server accepted a watch from
 * the saved resourceVersion (0). Nothing is swept: no list was made.
 */
static void warm_synced(struct kr_reflector *r, int restored)
{
	struct kr_reflect *top = r->top;
	size_t count = kr_store_count(top->store, r->index);
	struct kr_event ev;
	int i;

	memset(&ev, 0, sizeof(ev));
	ev.type = KR_EV_SYNCED;
	ev.res = r->index;
	ev.resource = r->res.name;
	ev.rv = r->last_rv;
	ev.count = count;
	ev.restored = restored;
	ev.warm = 1;
	r->unindexed = 0;
	r->unread = 0;
	r->partial = lacks_objects(r);
	r->synced_partial = r->partial;
	ev.partial = r->partial;
	if (!restored)
		r->restored = 0;
	for (i = 0; i < top->nsinks; i++)
		top->sinks[i].event(top->sinks[i].arg, &ev);
	kr_log(KR_LOG_INFO, "%s: synced %zu objects at resourceVersion %s %s in %lld ms", r->res.name,
	       count, r->last_rv, restored ? "from the state directory (restored, not yet confirmed "
					     "by the server)" : "by a watch from the restored state (no list)",
	       (long long)(kr_port_now_ms() - r->cycle_start));
	if (!r->synced) {
		r->synced = 1;
		top->synced_count++;
		if (top->opts.resync_ms > 0)
			kr_loop_timer_at(top->loop, &r->resync, kr_port_now_ms() + top->opts.resync_ms);
		if (top->opts.once && top->synced_count == top->nrefl)
			top->loop->stop = 1;
	}
}

/* The server did not answer: a restored mirror young enough (--max-stale) counts as synced. */
static void unreachable(struct kr_reflector *r)
{
	if (RESTORED(r) && r->restored_synced && !r->synced)
		warm_synced(r, 1);
}

/*
 * From a restored mirror: the sinks see it again (the dir sink checks its
 * files), then a watch from the saved resourceVersion. --once lists instead
 * (reconciled against the restored mirror: only changes reach the sinks),
 * since a watch cannot tell when the changes made meanwhile have all come.
 */
static void start_warm(struct kr_reflector *r)
{
	r->cycle_start = kr_port_now_ms();
	r->retry_after_count = 0;
	kr_store_foreach(r->top->store, r->index, restored_fn, r);
	/* No resourceVersion saved (the mirror was partial): a list, reconciled as --once's. */
	if (r->top->opts.once || !r->last_rv[0])
		start_cycle(r);
	else
		start_watch(r);
}

void kr_reflect_start(struct kr_reflect *top)
{
	int i;

	for (i = 0; i < top->nrefl; i++) {
		if (RESTORED(&top->refl[i]))
			start_warm(&top->refl[i]);
		else
			start_cycle(&top->refl[i]);
	}
}

void kr_reflect_stop(struct kr_reflect *top)
{
	int i;

	for (i = 0; i < top->nrefl; i++) {
		struct kr_reflector *r = &top->refl[i];

		r->phase = KR_PH_IDLE;
		tell_state(r, KR_HEALTH_STOPPED, NULL, 0);
		kr_loop_timer_cancel(top->loop, &r->wait);
		kr_loop_timer_cancel(top->loop, &r->deadline);
		kr_loop_timer_cancel(top->loop, &r->resync);
		kr_loop_timer_cancel(top->loop, &r->tail_wait);
		kr_loop_timer_cancel(top->loop, &r->room);
		r->tail_waiting = 0;
		kr_conn_close(&r->conn, "stopping");
	}
}

int kr_reflect_ready(const struct kr_reflect *top)
{
	int i, degraded = top->store->not_held > 0 || top->store->untracked > 0;

	if (top->synced_count < top->nrefl)
		return 0;
	for (i = 0; i < top->nrefl; i++)
		degraded |= top->refl[i].partial;
	return degraded ? 1 : 2;
}
