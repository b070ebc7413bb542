/*
 * Fuzzes the LIST items framer. Input: byte 0 chooses the output capacity,
 * byte 1 seeds the piece sizes, the rest is the body. The body is read twice,
 * whole with room for anything and in pieces with the chosen capacity; both
 * runs must agree item for item and on the metadata, never write past the
 * capacity, and every item must frame to itself with the object framer. When
 * the body is valid JSON (kr_json_parse accepts it), the items and metadata
 * must be exactly those its tokens show, and an error must have a reason in
 * the tokens (items not an array of objects, a metadata value of a wrong type
 * or too long).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 4096
#define BIG_CAP (1u << 20)
#define CANARY 32

struct event {
	int r;
	size_t at;
	size_t len;
};

struct run {
	struct event ev[MAX_EVENTS];
	int n;
	char rv[KR_RV_MAX];
	char cont[KR_JSON_CONTINUE_MAX];
	long long remaining;
};

static struct run whole, pieces;
static struct kr_json_items it;
static char big_out[BIG_CAP];
static char small_out[512 + CANARY];
static char again_out[BIG_CAP];
static kr_json_tok toks[1 << 14];
static char unesc[KR_JSON_CONTINUE_MAX];

static uint32_t rng_next(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

static size_t piece_size(uint32_t *s)
{
	uint32_t r = rng_next(s);

	return 1 + (r >> 8) % (1u << (r % 12));
}

static void check_reframes(const char *obj, size_t len)
{
	struct kr_json_framer f;
	size_t used;

	kr_json_framer_init(&f);
	kr_json_framer_set_output(&f, again_out, len);
	if (kr_json_framer_feed(&f, obj, len, &used) != KR_JSON_OBJECT || used != len ||
	    f.len != len || memcmp(again_out, obj, len) != 0)
		abort();
}

static void read_body(const char *body, size_t n, char *out, size_t cap, uint32_t seed,
		      struct run *run)
{
	size_t at = 0;
	int r = 0, ended = 0;

	run->n = 0;
	kr_json_items_init(&it);
	kr_json_items_set_output(&it, out, cap);
	if (out == small_out)
		memset(small_out + cap, 0x5a, CANARY);
	while (at < n && run->n < MAX_EVENTS - 1) {
		size_t len = seed ? piece_size(&seed) : n - at, used;

		if (len > n - at)
			len = n - at;
		r = kr_json_items_feed(&it, body + at, len, &used);
		if (used > len || it.len > cap)
			abort();
		if (r == 0 && used != len)
			abort();
		at += used;
		if (r == 0)
			continue;
		run->ev[run->n].r = r;
		run->ev[run->n].at = at;
		run->ev[run->n].len = r == KR_JSON_SKIPPED ? it.skipped_bytes
				      : r == KR_JSON_OBJECT ? it.len : 0;
		run->n++;
		if (r < 0) {
			size_t again;

			if (it.error == NULL || kr_json_items_feed(&it, body + at, n - at, &again) != r ||
			    again != 0)
				abort();
			break;
		}
		if (r == KR_JSON_END) {
			if (ended++)
				abort();
		} else if (r == KR_JSON_OBJECT) {
			if (ended || it.len > at || memcmp(out, body + at - it.len, it.len) != 0)
				abort();
			check_reframes(out, it.len);
		} else if (r == KR_JSON_SKIPPED) {
			if (ended || it.skipped_bytes <= cap || it.len != cap ||
			    memcmp(out, body + at - it.skipped_bytes, cap) != 0)
				abort();
		} else {
			abort();
		}
		kr_json_items_set_output(&it, out, cap);
	}
	if (out == small_out)
		for (size_t i = cap; i < cap + CANARY; i++)
			if (small_out[i] != 0x5a)
				abort();
	if (run->n < MAX_EVENTS - 1 && r >= 0) {
		run->ev[run->n].r = 100 + kr_json_items_eof(&it);
		run->ev[run->n].at = at;
		run->ev[run->n].len = 0;
		run->n++;
	}
	memcpy(run->rv, it.resource_version, sizeof(run->rv));
	memcpy(run->cont, it.continue_token, sizeof(run->cont));
	run->remaining = it.remaining_item_count;
	if (strnlen(run->rv, sizeof(run->rv)) == sizeof(run->rv) ||
	    strnlen(run->cont, sizeof(run->cont)) == sizeof(run->cont))
		abort();
}

/* Nonzero if token k's text as sent is exactly name (the framer compares keys raw). */
static int raw_is(const char *js, const kr_json_tok *k, const char *name)
{
	size_t n = strlen(name);

	return k->type == KR_JSON_T_STRING && (size_t)(k->end - k->start) == n &&
	       memcmp(js + k->start, name, n) == 0;
}

static int is_null(const char *js, const kr_json_tok *t)
{
	return t->type == KR_JSON_T_PRIMITIVE && js[t->start] == 'n';
}

/* Index of the first token after the subtree of token i. */
static int after(const kr_json_tok *t, int n, int i)
{
	int j = i + 1;

	while (j < n && t[j].start < t[i].end)
		j++;
	return j;
}

/*
 * Checks the whole run against the tokens of a valid body: walks the top
 * level in order, as the framer reads it, and aborts on any difference.
 */
static void check_against_tokens(const char *js, int nt)
{
	int k = 1, m, ev = 0, must_fail = 0;
	char rv[KR_RV_MAX] = "", cont[KR_JSON_CONTINUE_MAX] = "";
	long long remaining = -1;

	for (m = 0; m < toks[0].size && !must_fail; m++) {
		int v = k + 1;

		if (raw_is(js, &toks[k], "items") && !is_null(js, &toks[v])) {
			if (toks[v].type != KR_JSON_T_ARRAY) {
				must_fail = 1;
			} else {
				int e = v + 1, i;

				for (i = 0; i < toks[v].size; i++) {
					size_t len = (size_t)(toks[e].end - toks[e].start);

					if (toks[e].type != KR_JSON_T_OBJECT) {
						must_fail = 1;
						break;
					}
					if (ev >= whole.n || whole.ev[ev].r != KR_JSON_OBJECT ||
					    whole.ev[ev].len != len || whole.ev[ev].at != (size_t)toks[e].end)
						abort();
					ev++;
					e = after(toks, nt, e);
				}
			}
		} else if (raw_is(js, &toks[k], "metadata") && !is_null(js, &toks[v])) {
			int mk = v + 1, mm;

			if (toks[v].type != KR_JSON_T_OBJECT)
				must_fail = 1;
			for (mm = 0; !must_fail && mm < toks[v].size; mm++) {
				const kr_json_tok *val = &toks[mk + 1];
				int is_rv = raw_is(js, &toks[mk], "resourceVersion");

				if ((is_rv || raw_is(js, &toks[mk], "continue")) && !is_null(js, val)) {
					size_t cap = is_rv ? sizeof(rv) : sizeof(cont);

					if (val->type != KR_JSON_T_STRING ||
					    (size_t)(val->end - val->start) >= cap ||
					    kr_json_unescape(js, val, unesc, sizeof(unesc)) < 0)
						must_fail = 1;
					else
						memcpy(is_rv ? rv : cont, unesc, strlen(unesc) + 1);
				} else if (raw_is(js, &toks[mk], "remainingItemCount") && !is_null(js, val)) {
					long long x;
					int d;

					for (d = val->start; d < val->end; d++)
						if (js[d] < '0' || js[d] > '9')
							break;
					if (val->type != KR_JSON_T_PRIMITIVE || d != val->end ||
					    kr_json_int(js, val, &x) != 0)
						must_fail = 1;
					else
						remaining = x;
				}
				mk = after(toks, nt, mk + 1);
			}
		}
		k = after(toks, nt, v);
	}
	if (must_fail) {
		if (ev >= whole.n || whole.ev[ev].r >= 0)
			abort();
		return;
	}
	if (ev + 2 != whole.n || whole.ev[ev].r != KR_JSON_END || whole.ev[ev + 1].r != 100)
		abort();
	if (strcmp(rv, whole.rv) != 0 || strcmp(cont, whole.cont) != 0 || remaining != whole.remaining)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body;
	size_t n, cap;
	uint32_t seed;
	int i, nt;

	if (size < 2 || size - 2 > BIG_CAP)
		return 0;
	cap = data[0] < 200 ? data[0] : (size_t)(data[0] - 200) * 8;
	seed = 0x85ebca6bu ^ data[1] ^ ((uint32_t)size << 8);
	body = (const char *)data + 2;
	n = size - 2;

	read_body(body, n, big_out, BIG_CAP, 0, &whole);
	read_body(body, n, small_out, cap, seed, &pieces);
	if (whole.n != pieces.n)
		abort();
	for (i = 0; i < whole.n; i++) {
		const struct event *w = &whole.ev[i], *p = &pieces.ev[i];

		if (w->at != p->at || w->len != p->len)
			abort();
		if (w->r == KR_JSON_OBJECT) {
			if (p->r != (w->len <= cap ? KR_JSON_OBJECT : KR_JSON_SKIPPED))
				abort();
		} else if (w->r != p->r) {
			abort();
		}
	}
	if (strcmp(whole.rv, pieces.rv) != 0 || strcmp(whole.cont, pieces.cont) != 0 ||
	    whole.remaining != pieces.remaining)
		abort();

	nt = kr_json_parse(body, n, toks, (int)(sizeof(toks) / sizeof(toks[0])));
	if (nt > 0 && whole.n < MAX_EVENTS - 1)
		check_against_tokens(body, nt);
	return 0;
}
