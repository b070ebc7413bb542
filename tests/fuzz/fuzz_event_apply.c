/*
 * Fuzzes the watch event decoder and the store apply: the input is the body
 * of one watch response (raw bytes of watch event objects). The reflector
 * lists an empty collection, watches, and gets the input as its watch stream
 * on the scripted network of netsim.h; its framer, event decoder and store do
 * the rest, with netsim's checks (kr_store_check after every event, the
 * folded event stream equal to the store).
 *
 * Independently, a simple reference reads the same input the way the watch
 * protocol says: frame each object (one per line: a newline inside one, or a
 * control byte inside a string, is malformed), skip events of another kind, bookmarks,
 * unknown types and objects without a name; stop at an ERROR event or
 * malformed JSON; ADDED and MODIFIED put key -> resourceVersion and uid,
 * DELETED removes (the same resourceVersion again is no change unless both
 * uids are known and differ, as the store decides). Unless the input left that simple world (more JSON
 * tokens than KR_JSON_TOKENS, more objects than the index holds), the store
 * must then hold exactly the reference's keys with their resourceVersions
 * and uids, each object stored as JSON that parses, has a kind and has no
 * metadata.managedFields.
 */
#include "netsim.h"

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EA_MAX_INPUT (64u << 10)

struct ref_key {
	char key[KR_KEY_MAX];
	size_t keylen;
	char rv[KR_RV_MAX];
	char uid[KR_RV_MAX];
};

static struct ref_key ref[NS_ENTRIES];
static int nref;
static char frame_buf[EA_MAX_INPUT];
static kr_json_tok toks[KR_JSON_TOKENS];
static uint8_t list_resp[512];
static uint8_t watch_resp[EA_MAX_INPUT + 256];

static struct ref_key *ref_find(const char *key)
{
	int i;

	for (i = 0; i < nref; i++)
		if (strcmp(ref[i].key, key) == 0)
			return &ref[i];
	return NULL;
}

/*
 * 1 if string member path of o is present and unescapes into out[0..size),
 * 2 if it does but holds a \u0000, 0 if absent, -1 if it does not fit.
 */
static int ref_string(const char *json, int n, int o, const char *path, char *out, size_t size)
{
	int v = kr_json_find(json, toks, n, o, path), r;

	out[0] = '\0';
	if (v < 0)
		return 0;
	r = kr_json_unescape(json, &toks[v], out, size);
	if (r < 0)
		return -1;
	return (size_t)r != strlen(out) ? 2 : 1;
}

/*
 * Applies one framed event to the reference. Returns 1 to go on, 0 when the
 * stream ends here, -1 when the input is outside what the reference models.
 */
static int ref_event(const char *json, size_t len)
{
	char type[16], nspace[KR_KEY_MAX], name[KR_KEY_MAX], rv[KR_RV_MAX], uid[KR_RV_MAX];
	struct ref_key *k;
	int n = kr_json_parse(json, len, toks, KR_JSON_TOKENS), v, o, md, klen;

	if (n == KR_ENOSPC)
		return -1;
	if (n < 0)
		return 0;
	v = kr_json_find(json, toks, n, 0, "type");
	o = kr_json_find(json, toks, n, 0, "object");
	if (v < 0 || o < 0 || toks[o].type != KR_JSON_T_OBJECT ||
	    kr_json_unescape(json, &toks[v], type, sizeof(type)) < 0)
		return 0;
	if (strcmp(type, "ERROR") == 0)
		return 0;
	v = kr_json_find(json, toks, n, o, "kind");
	if (v >= 0 && !kr_json_str_eq(json, &toks[v], "ConfigMap"))
		return 1;
	v = kr_json_find(json, toks, n, o, "apiVersion");
	if (v >= 0 && !kr_json_str_eq(json, &toks[v], "v1"))
		return 1;
	if (strcmp(type, "BOOKMARK") == 0)
		return 1;
	md = kr_json_find(json, toks, n, o, "metadata");
	/* A namespace or name holding \u0000 names no object (the key is a C string). */
	if (md < 0 || toks[md].type != KR_JSON_T_OBJECT ||
	    ref_string(json, n, md, "resourceVersion", rv, sizeof(rv)) < 0 ||
	    ref_string(json, n, md, "uid", uid, sizeof(uid)) < 0 ||
	    (v = ref_string(json, n, md, "namespace", nspace, sizeof(nspace))) < 0 || v == 2 ||
	    ref_string(json, n, md, "name", name, sizeof(name)) != 1 || !name[0])
		return 1;
	if (nspace[0] && strlen(nspace) + 1 + strlen(name) >= KR_KEY_MAX)
		return 1;
	if (!nspace[0] && strlen(name) >= KR_KEY_MAX)
		return 1;
	if (strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0 &&
	    strcmp(type, "DELETED") != 0)
		return 1;
	{
		char key[KR_KEY_MAX];

		klen = nspace[0] ? snprintf(key, sizeof(key), "%s/%s", nspace, name)
			     : snprintf(key, sizeof(key), "%s", name);
		k = ref_find(key);
		if (strcmp(type, "DELETED") == 0) {
			if (k)
				*k = ref[--nref];
			return 1;
		}
		/* The same resourceVersion is the same object unless both uids are known and differ. */
		if (!k) {
			/* One index slot stays free for the scratch's sake: keep well inside. */
			if (nref == NS_ENTRIES / 2)
				return -1;
			k = &ref[nref++];
			memcpy(k->key, key, (size_t)klen + 1);
			k->keylen = (size_t)klen;
		} else if (strcmp(k->rv, rv) == 0 && (!k->uid[0] || !uid[0] || strcmp(k->uid, uid) == 0))
			return 1;
		snprintf(k->rv, sizeof(k->rv), "%s", rv);
		snprintf(k->uid, sizeof(k->uid), "%s", uid);
	}
	return 1;
}

/* Runs the reference over the stream; 1 if it stayed inside what it models. */
static int ref_run(const uint8_t *data, size_t size)
{
	struct kr_json_framer f;
	size_t used;
	int r;

	nref = 0;
	kr_json_framer_init(&f);
	/* One event per line, as the apiserver writes them: a line cut short ends the stream. */
	kr_json_framer_set_lines(&f, 1);
	kr_json_framer_set_output(&f, frame_buf, sizeof(frame_buf));
	while (size > 0) {
		r = kr_json_framer_feed(&f, (const char *)data, size, &used);
		data += used;
		size -= used;
		if (r == KR_JSON_OBJECT) {
			r = ref_event(frame_buf, f.len);
			if (r <= 0)
				return r == 0;
			kr_json_framer_set_output(&f, frame_buf, sizeof(frame_buf));
		} else if (r != 0) {
			return r < 0;  /* malformed: the stream ends; skipped cannot happen here */
		}
	}
	return 1;
}

static void check_held(void *arg, const struct kr_store_view *v)
{
	int n;

	(void)arg;
	if (!v->held)
		NS_FAIL("%s is not held although the arena has room", v->key);
	if (!ref_find(v->key))
		NS_FAIL("%s is in the store, the reference has no such object", v->key);
	n = kr_json_parse(v->obj, v->objlen, toks, KR_JSON_TOKENS);
	if (n <= 0 || toks[0].type != KR_JSON_T_OBJECT)
		NS_FAIL("%s is stored as malformed JSON (%d)", v->key, n);
	if (kr_json_find(v->obj, toks, n, 0, "kind") < 0)
		NS_FAIL("%s is stored without a kind", v->key);
	if (kr_json_find(v->obj, toks, n, 0, "metadata.managedFields") >= 0)
		NS_FAIL("%s is stored with its managedFields", v->key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char list_body[] =
		"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":"
		"{\"resourceVersion\":\"1\"},\"items\":[]}";
	static const char watch_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					 "Connection: close\r\n\r\n";
	struct ns_config c;
	int n, exact, i;

	if (size > EA_MAX_INPUT)
		return 0;
	exact = ref_run(data, size);
	ns_reset();
	memset(&c, 0, sizeof(c));
	c.watch_list = KR_WL_OFF;
	c.arena = NS_ARENA_MAX;
	/* Header bytes: stay open after the list; close after the watch stream. */
	n = snprintf((char *)list_resp, sizeof(list_resp),
		     "%c%cHTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n%s", NS_KEEP, 1, sizeof(list_body) - 1, list_body);
	ns_add_response(list_resp, (size_t)n);
	watch_resp[0] = NS_EOF;
	watch_resp[1] = 1;
	memcpy(watch_resp + 2, watch_head, sizeof(watch_head) - 1);
	memcpy(watch_resp + 2 + sizeof(watch_head) - 1, data, size);
	ns_add_response(watch_resp, 2 + sizeof(watch_head) - 1 + size);
	ns_run(&c);
	if (!exact || ns_store.untracked || ns_store.not_held)
		return 0;
	if (kr_store_count(&ns_store, 0) != (size_t)nref)
		NS_FAIL("the store has %zu objects, the reference %d",
			kr_store_count(&ns_store, 0), nref);
	for (i = 0; i < nref; i++) {
		struct kr_store_view v;

		if (!kr_store_get(&ns_store, 0, ref[i].key, ref[i].keylen, &v))
			NS_FAIL("%s is missing from the store", ref[i].key);
		if (strcmp(v.rv, ref[i].rv) != 0 || strcmp(v.uid, ref[i].uid) != 0)
			NS_FAIL("%s: the store has rv %s uid %s, the reference rv %s uid %s",
				ref[i].key, v.rv, v.uid, ref[i].rv, ref[i].uid);
	}
	kr_store_foreach(&ns_store, 0, check_held, NULL);
	return 0;
}
