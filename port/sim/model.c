/*
 * The simulated API server's state: four resource types, a fixed set of
 * possible objects (slots) per type, one global resourceVersion bumped by
 * every write, and every write of the run kept as an event indexed by its
 * resourceVersion. The history the server serves is the suffix of that
 * archive after the compaction point, so a snapshot at any resourceVersion
 * is the current state with the later events undone.
 *
 * An object version is a few numbers; its JSON is derived from them on
 * demand (kr_sim_object_json), in the forms the wire and the store use.
 */
#include "sim.h"
#include "fmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX 96
#define LARGE_MAX 6                    /* large objects present at once, per type */

struct type_info {
	const char *plural, *kind, *api_version, *prefix;
	int namespaced;
};

static const struct type_info types[KR_SIM_NTYPES] = {
	[KR_SIM_CONFIGMAPS] = { "configmaps", "ConfigMap", "v1", "cm", 1 },
	[KR_SIM_SECRETS] = { "secrets", "Secret", "v1", "secret", 1 },
	[KR_SIM_DEPLOYMENTS] = { "deployments", "Deployment", "apps/v1", "deploy", 1 },
	[KR_SIM_NAMESPACES] = { "namespaces", "Namespace", "v1", "team", 0 },
};

static const char *const namespaces[KR_SIM_NAMESPACES_USED] = { "default", "kube-system", "edge" };
static const char *const tiers[KR_SIM_TIERS] = { "edge", "core", "batch" };

static struct {
	uint64_t start_rv, rv, compacted, cap;
	uint32_t uids;
	unsigned large_permille;
	uint32_t forced_size;
	struct kr_sim_ver cur[KR_SIM_NTYPES][KR_SIM_SLOTS];
	char keys[KR_SIM_NTYPES][KR_SIM_SLOTS][KEY_MAX];
	size_t keylen[KR_SIM_NTYPES][KR_SIM_SLOTS];
	const char *names[KR_SIM_NTYPES][KR_SIM_SLOTS];
	int sorted[KR_SIM_NTYPES][KR_SIM_SLOTS];
} m;

static struct kr_sim_event archive[KR_SIM_ARCHIVE_MAX];

const char *kr_sim_type_plural(int type) { return types[type].plural; }
const char *kr_sim_type_kind(int type) { return types[type].kind; }
const char *kr_sim_type_api_version(int type) { return types[type].api_version; }
int kr_sim_type_namespaced(int type) { return types[type].namespaced; }
const char *kr_sim_namespace(int ns) { return ns >= 0 && ns < KR_SIM_NAMESPACES_USED ? namespaces[ns] : "?"; }
const char *kr_sim_tier(int tier) { return tiers[tier % KR_SIM_TIERS]; }

const char *kr_sim_key(int type, int slot)
{
	return m.keys[type][slot];
}

size_t kr_sim_key_len(int type, int slot)
{
	return m.keylen[type][slot];
}

int kr_sim_slot_ns(int type, int slot)
{
	return types[type].namespaced ? slot % KR_SIM_NAMESPACES_USED : -1;
}

int kr_sim_slot_of(int type, const char *key, size_t len)
{
	int i;

	for (i = 0; i < KR_SIM_SLOTS; i++)
		if (m.keylen[type][i] == len && memcmp(m.keys[type][i], key, len) == 0)
			return i;
	return -1;
}

static int sorted_type;

static int by_key(const void *a, const void *b)
{
	return strcmp(m.keys[sorted_type][*(const int *)a], m.keys[sorted_type][*(const int *)b]);
}

/* The slots of type in key order (the order of LIST and initial events). */
const int *kr_sim_sorted(int type)
{
	return m.sorted[type];
}

void kr_sim_set_large_permille(unsigned p)
{
	m.large_permille = p;
}

void kr_sim_model_reset(uint64_t start_rv)
{
	int t, i;

	memset(&m, 0, sizeof(m));
	m.start_rv = m.rv = m.compacted = start_rv;
	m.cap = 1000;
	m.large_permille = 20;
	for (t = 0; t < KR_SIM_NTYPES; t++) {
		for (i = 0; i < KR_SIM_SLOTS; i++) {
			/* Names of different lengths; every fourth one long. */
			const char *tail = i % 4 == 3 ? "-edge-gateway-settings" : i % 4 == 1 ? "-x" : "";
			int n;

			if (types[t].namespaced)
				n = snprintf(m.keys[t][i], KEY_MAX, "%s/%s-%02d%s", namespaces[i % KR_SIM_NAMESPACES_USED],
					     types[t].prefix, i, tail);
			else
				n = snprintf(m.keys[t][i], KEY_MAX, "%s-%02d%s", types[t].prefix, i, tail);
			m.keylen[t][i] = (size_t)n;
			m.names[t][i] = types[t].namespaced ? strchr(m.keys[t][i], '/') + 1 : m.keys[t][i];
			m.sorted[t][i] = i;
		}
		sorted_type = t;
		qsort(m.sorted[t], KR_SIM_SLOTS, sizeof(int), by_key);
	}
}

int kr_sim_match(const struct kr_sim_filter *f, int type, int slot, const struct kr_sim_ver *v)
{
	if (!v->present || type != f->type)
		return 0;
	if (f->ns == -2 || (f->ns >= 0 && kr_sim_slot_ns(type, slot) != f->ns))
		return 0;
	if (f->selop == KR_SIM_SEL_EQ && v->tier != f->tier)
		return 0;
	if (f->selop == KR_SIM_SEL_NE && v->tier == f->tier)
		return 0;
	return 1;
}

const struct kr_sim_ver *kr_sim_current(int type, int slot)
{
	return &m.cur[type][slot];
}

uint64_t kr_sim_rv(void) { return m.rv; }
uint64_t kr_sim_compacted_rv(void) { return m.compacted; }
uint64_t kr_sim_start_rv(void) { return m.start_rv; }

const struct kr_sim_event *kr_sim_event_at(uint64_t rv)
{
	if (rv <= m.start_rv || rv > m.rv)
		return NULL;
	return &archive[rv - m.start_rv - 1];
}

void kr_sim_compact(uint64_t rv)
{
	if (rv > m.rv)
		rv = m.rv;
	if (rv > m.compacted) {
		m.compacted = rv;
		kr_sim_trace("compacted the history to %llu", (unsigned long long)rv);
	}
}

void kr_sim_set_history_cap(uint64_t cap)
{
	m.cap = cap ? cap : 1;
}

/* --- writes ---------------------------------------------------------------------------- */

static int large_present(int type)
{
	int i, n = 0;

	for (i = 0; i < KR_SIM_SLOTS; i++)
		n += m.cur[type][i].present && m.cur[type][i].size > 2048;
	return n;
}

/* Payload bytes: mostly small, some medium, a few large (several TLS records). */
void kr_sim_force_size(uint32_t size)
{
	m.forced_size = size;
}

static uint32_t draw_size(int type)
{
	uint64_t r = kr_sim_below(1000);

	if (m.forced_size)
		return m.forced_size;
	if (r < m.large_permille && large_present(type) < LARGE_MAX)
		return (uint32_t)kr_sim_range(4096, 24000);
	if (r < 300)
		return (uint32_t)kr_sim_range(100, 2000);
	return (uint32_t)kr_sim_range(0, 100);
}

static const char *const etype_names[] = { "?", "ADDED", "MODIFIED", "DELETED" };

static int record(int etype, int type, int slot, const struct kr_sim_ver *cur,
		  const struct kr_sim_ver *prev)
{
	struct kr_sim_event *e;

	if (m.rv - m.start_rv >= KR_SIM_ARCHIVE_MAX)
		return -1;
	e = &archive[m.rv - m.start_rv];
	e->etype = (uint8_t)etype;
	e->type = (uint8_t)type;
	e->slot = (uint16_t)slot;
	e->cur = *cur;
	e->prev = *prev;
	m.rv++;
	if (m.rv - m.compacted > m.cap)
		m.compacted = m.rv - m.cap;
	kr_sim_trace("write %s %s %s rv %llu (uid %u, %u bytes, tier %s)", etype_names[etype],
		     types[type].plural, m.keys[type][slot], (unsigned long long)m.rv, cur->uid,
		     cur->size, tiers[cur->tier]);
	return 0;
}

int kr_sim_create(int type, int slot)
{
	struct kr_sim_ver v, none;

	if (m.cur[type][slot].present || m.rv - m.start_rv >= KR_SIM_ARCHIVE_MAX)
		return -1;
	memset(&v, 0, sizeof(v));
	memset(&none, 0, sizeof(none));
	v.rv = m.rv + 1;
	v.uid = ++m.uids;
	v.content = (uint32_t)kr_sim_rand();
	v.size = draw_size(type);
	v.tier = (uint8_t)kr_sim_below(KR_SIM_TIERS);
	v.present = 1;
	if (record(KR_SIM_ADDED, type, slot, &v, &none) != 0)
		return -1;
	m.cur[type][slot] = v;
	return 0;
}

static int change(int type, int slot, int relabel)
{
	struct kr_sim_ver v, old = m.cur[type][slot];

	if (!old.present || m.rv - m.start_rv >= KR_SIM_ARCHIVE_MAX)
		return -1;
	v = old;
	v.rv = m.rv + 1;
	if (relabel) {
		v.tier = (uint8_t)((old.tier + 1 + kr_sim_below(KR_SIM_TIERS - 1)) % KR_SIM_TIERS);
	} else {
		v.content = (uint32_t)kr_sim_rand();
		if (kr_sim_chance(300))
			v.size = draw_size(type);
	}
	if (record(KR_SIM_MODIFIED, type, slot, &v, &old) != 0)
		return -1;
	m.cur[type][slot] = v;
	return 0;
}

int kr_sim_update(int type, int slot)
{
	return change(type, slot, 0);
}

int kr_sim_relabel(int type, int slot)
{
	return change(type, slot, 1);
}

int kr_sim_delete(int type, int slot)
{
	struct kr_sim_ver gone, old = m.cur[type][slot];

	if (!old.present || m.rv - m.start_rv >= KR_SIM_ARCHIVE_MAX)
		return -1;
	gone = old;
	gone.rv = m.rv + 1;
	if (record(KR_SIM_DELETED, type, slot, &gone, &old) != 0)
		return -1;
	memset(&m.cur[type][slot], 0, sizeof(m.cur[type][slot]));
	return 0;
}

/* The state of every slot of type as it was at resourceVersion at (at <= current). */
void kr_sim_snapshot(int type, uint64_t at, struct kr_sim_ver out[KR_SIM_SLOTS])
{
	uint64_t rv;

	memcpy(out, m.cur[type], sizeof(m.cur[type]));
	if (at < m.start_rv)
		at = m.start_rv;
	for (rv = m.rv; rv > at; rv--) {
		const struct kr_sim_event *e = &archive[rv - m.start_rv - 1];

		if (e->type != type)
			continue;
		if (e->etype == KR_SIM_ADDED)
			memset(&out[e->slot], 0, sizeof(out[e->slot]));
		else
			out[e->slot] = e->prev;
	}
}

/* --- JSON -------------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}


/* Decimal digits of v. */
static void put_u64(struct kr_out *o, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	kr_out_put(o, tmp + i, sizeof(tmp) - i);
}

/*
 * n bytes of JSON string content, varied so that a framer that looks for
 * braces or quotes without following strings and escapes gets it wrong:
 * braces, brackets, escaped quotes and backslashes, \n, \u escapes, UTF-8.
 * Written straight into the buffer, eight characters per random word.
 */
static void put_text(struct kr_out *o, uint64_t *st, size_t n)
{
	static const char alnum[64] = "abcdefghijklmnopqrstuvwxyz0123456789-_.ABCDEFGHIJKLMNOPQRSTUVWXY";
	static const char *const pieces[16] = { " ", " ", " ", "{", "}", "{", "}", "[]", "\\\"", "\\\\",
						"\\n", "\\u00e9", "\xc3\xa9", ":", ",", "\\t" };
	char *p;
	size_t done = 0;

	if (o->overflow || n + 8 > o->size - o->len) {
		o->overflow = 1;
		return;
	}
	p = o->buf + o->len;
	while (done < n) {
		uint64_t x;
		int k;

		*st = mix(*st);
		x = *st;
		for (k = 0; k < 8 && done < n; k++, x >>= 8) {
			unsigned b = (unsigned)(x & 0xff);

			if (b < 200) {
				p[done++] = alnum[b & 63];
			} else {
				const char *q = pieces[b & 15];
				size_t len = strlen(q);

				if (done + len > n + 7)
					break;
				memcpy(p + done, q, len);
				done += len;
			}
		}
	}
	o->len += done;
}

static void put_b64(struct kr_out *o, uint64_t *st, size_t n)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *p;
	size_t i;

	n = (n + 3) / 4 * 4;
	if (o->overflow || n > o->size - o->len) {
		o->overflow = 1;
		return;
	}
	p = o->buf + o->len;
	for (i = 0; i < n; i += 8) {
		uint64_t x;
		size_t k;

		*st = mix(*st);
		x = *st;
		for (k = 0; k < 8 && i + k < n; k++, x >>= 6)
			p[i + k] = b64[x & 63];
	}
	if (n && (*st & 1))
		p[n - 1] = '=';
	o->len += n;
}

static void put_managed_fields(struct kr_out *o, int type, const char *ts)
{
	kr_out_str(o, ",\"managedFields\":[{\"manager\":\"kubectl-edit\",\"operation\":\"Update\",\"apiVersion\":\"");
	kr_out_str(o, types[type].api_version);
	kr_out_str(o, "\",\"time\":\"");
	kr_out_str(o, ts);
	kr_out_str(o, "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{");
	if (type == KR_SIM_CONFIGMAPS || type == KR_SIM_SECRETS)
		kr_out_str(o, "\"f:data\":{\".\":{},\"f:k0\":{}}");
	else
		kr_out_str(o, "\"f:metadata\":{\"f:labels\":{\".\":{},\"f:tier\":{}}}");
	kr_out_str(o, "}}]");
}

static void hex(char *p, uint64_t v, int digits)
{
	static const char h[] = "0123456789abcdef";

	while (digits--) {
		p[digits] = h[v & 15];
		v >>= 4;
	}
}

void kr_sim_uid_string(uint32_t uid, char out[40])
{
	uint64_t h = mix(uid);

	/* 8-4-4-4-12; the last group is the creation number, so uids never repeat. */
	hex(out, h >> 32, 8);
	out[8] = '-';
	hex(out + 9, h >> 16, 4);
	memcpy(out + 13, "-4", 2);
	hex(out + 15, h >> 4, 3);
	memcpy(out + 18, "-a", 2);
	hex(out + 20, h >> 20, 3);
	out[23] = '-';
	hex(out + 24, uid, 12);
	out[36] = '\0';
}

static void two(char *p, unsigned v)
{
	p[0] = (char)('0' + v / 10 % 10);
	p[1] = (char)('0' + v % 10);
}

static void put_kv(struct kr_out *o, const char *key, const char *value)
{
	kr_out_str(o, key);
	kr_out_str(o, value);
	kr_out_str(o, "\"");
}

size_t kr_sim_object_json(char *buf, size_t cap, int type, int slot, const struct kr_sim_ver *v,
			  int form)
{
	struct kr_out o = { buf, cap, 0, 0 };
	const char *name = m.names[type][slot];
	uint64_t st = mix(((uint64_t)v->content << 20) ^ (uint64_t)slot ^ ((uint64_t)type << 8));
	int mf = form != KR_SIM_CANON, mf_middle = v->content & 1;
	char uid[40], ts[] = "2026-01-00T00:00:00Z";
	unsigned gen = 1 + v->content % 9, replicas = v->content % 5;

	kr_sim_uid_string(v->uid, uid);
	two(ts + 8, 1 + v->uid % 28);
	two(ts + 11, v->uid % 24);
	two(ts + 14, (v->uid / 24) % 60);
	two(ts + 17, (v->uid / 7) % 60);
	kr_out_str(&o, "{");
	if (form != KR_SIM_ITEM) {
		put_kv(&o, "\"kind\":\"", types[type].kind);
		put_kv(&o, ",\"apiVersion\":\"", types[type].api_version);
		kr_out_str(&o, ",");
	}
	put_kv(&o, "\"metadata\":{\"name\":\"", name);
	if (types[type].namespaced)
		put_kv(&o, ",\"namespace\":\"", namespaces[slot % KR_SIM_NAMESPACES_USED]);
	put_kv(&o, ",\"uid\":\"", uid);
	kr_out_str(&o, ",\"resourceVersion\":\"");
	put_u64(&o, v->rv);
	kr_out_str(&o, "\"");
	if (type == KR_SIM_DEPLOYMENTS) {
		kr_out_str(&o, ",\"generation\":");
		put_u64(&o, gen);
	}
	put_kv(&o, ",\"creationTimestamp\":\"", ts);
	if (mf && mf_middle)
		put_managed_fields(&o, type, ts);
	put_kv(&o, ",\"labels\":{\"app\":\"", name);
	put_kv(&o, ",\"tier\":\"", tiers[v->tier % KR_SIM_TIERS]);
	if (type == KR_SIM_NAMESPACES)
		put_kv(&o, ",\"kubernetes.io/metadata.name\":\"", name);
	kr_out_str(&o, "}");
	if (type == KR_SIM_NAMESPACES) {
		kr_out_str(&o, ",\"annotations\":{\"payload\":\"");
		put_text(&o, &st, v->size);
		kr_out_str(&o, "\"}");
	}
	if (mf && !mf_middle)
		put_managed_fields(&o, type, ts);
	kr_out_str(&o, "}");
	switch (type) {
	case KR_SIM_CONFIGMAPS: {
		unsigned keys = 1 + v->content % 3, k;

		kr_out_str(&o, ",\"data\":{");
		for (k = 0; k < keys; k++) {
			char key[8] = ",\"k0\":\"";

			key[3] = (char)('0' + k);
			kr_out_str(&o, k ? key : key + 1);
			put_text(&o, &st, v->size / keys);
			kr_out_str(&o, "\"");
		}
		kr_out_str(&o, "}");
		break;
	}
	case KR_SIM_SECRETS:
		kr_out_str(&o, ",\"data\":{\"k0\":\"");
		put_b64(&o, &st, v->size);
		kr_out_str(&o, "\"},\"type\":\"Opaque\"");
		break;
	case KR_SIM_DEPLOYMENTS:
		kr_out_str(&o, ",\"spec\":{\"replicas\":");
		put_u64(&o, replicas);
		put_kv(&o, ",\"selector\":{\"matchLabels\":{\"app\":\"", name);
		put_kv(&o, "}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"", name);
		kr_out_str(&o, "},\"annotations\":{\"payload\":\"");
		put_text(&o, &st, v->size);
		kr_out_str(&o, "\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"registry.k8s.io/pause:3.10\"}]}}},");
		kr_out_str(&o, "\"status\":{\"observedGeneration\":");
		put_u64(&o, gen);
		kr_out_str(&o, ",\"replicas\":");
		put_u64(&o, replicas);
		kr_out_str(&o, "}");
		break;
	default:
		kr_out_str(&o, ",\"spec\":{\"finalizers\":[\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}");
		break;
	}
	kr_out_str(&o, "}");
	return o.overflow ? 0 : o.len;
}
