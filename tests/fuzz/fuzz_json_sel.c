/*
 * Fuzzes kr_json_parse_sel against kr_json_parse (jsmn plus its grammar
 * checks, itself fuzzed against a reference grammar in fuzz_json_parse.c).
 * Input: byte 0 picks the paths, the rest is the text. Both must give the
 * same verdict; asked for everything, the same tokens; asked for paths, a
 * subset of those tokens in which each object or array off the paths is one
 * KR_JSON_T_SKIPPED token with the same span and nothing under it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKS (1 << 15)
#define MAX_LEN (1 << 20)

static kr_json_tok full[MAX_TOKS], sel[MAX_TOKS];
static char text[MAX_LEN];

/* Path sets byte 0 chooses from: the reflector's, and shapes that nest and repeat. */
static const char *const set0[] = { "object.metadata.annotations" };
static const char *const set1[] = { "metadata" };
static const char *const set2[] = { "a", "a.b", "a.b.c", "x.y" };
static const char *const set3[] = { "object.metadata", "object.spec", "status" };
static const char *const *const sets[] = { set0, set1, set2, set3, NULL };
static const int set_n[] = { 1, 1, 4, 3, 0 };

static int by_start(int n, int start)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (full[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && full[lo].start == start ? lo : -1;
}

static void check_subset(int nf, int ns)
{
	int i, prev = -1;

	for (i = 0; i < ns; i++) {
		int f = by_start(nf, sel[i].start), p = sel[i].parent;

		if (f <= prev || sel[i].end != full[f].end)
			abort();
		if (sel[i].type == KR_JSON_T_SKIPPED) {
			if ((full[f].type != KR_JSON_T_OBJECT && full[f].type != KR_JSON_T_ARRAY) ||
			    sel[i].size != 0 || (i + 1 < ns && sel[i + 1].start < sel[i].end))
				abort();
		} else if (sel[i].type != full[f].type || sel[i].size != full[f].size) {
			abort();
		}
		if (p < -1 || p >= i || (p < 0 ? full[f].parent != -1 : by_start(nf, sel[p].start) != full[f].parent))
			abort();
		prev = f;
	}
}

/* Nesting of text[0..len) counted over brackets outside strings (only to tell KR_ENOSPC apart). */
static int too_deep(const char *s, size_t len)
{
	int d = 0, in_str = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		if (in_str) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				in_str = 0;
		} else if (s[i] == '"') {
			in_str = 1;
		} else if (s[i] == '{' || s[i] == '[') {
			if (++d > KR_JSON_DEPTH_MAX)
				return 1;
		} else if (s[i] == '}' || s[i] == ']') {
			d--;
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len;
	int nf, na, ns, pick;

	if (size < 1 || size - 1 > MAX_LEN)
		return 0;
	len = size - 1;
	pick = data[0] % 5;
	memcpy(text, data + 1, len);
	nf = kr_json_parse(text, len, full, MAX_TOKS);
	na = kr_json_parse_sel(text, len, sel, MAX_TOKS, NULL, -1);
	if (nf == KR_ENOSPC)
		return 0;
	if (na == KR_ENOSPC) {
		/* only for nesting past the bound, which the text must then have */
		if (!too_deep(text, len))
			abort();
		return 0;
	}
	if (na != nf || (nf <= 0 && nf != KR_EPROTO))
		abort();
	if (nf > 0 && memcmp(full, sel, (size_t)nf * sizeof(full[0])) != 0)
		abort();
	ns = kr_json_parse_sel(text, len, sel, MAX_TOKS, sets[pick], set_n[pick]);
	if (ns == KR_ENOSPC && too_deep(text, len))
		return 0;
	if ((ns > 0) != (nf > 0) || (nf < 0 && ns != nf))
		abort();
	if (nf > 0) {
		check_subset(nf, ns);
		/* one token fewer than it needs: KR_ENOSPC, whatever the text */
		if (kr_json_parse_sel(text, len, sel, ns - 1, sets[pick], set_n[pick]) != KR_ENOSPC)
			abort();
	}
	return 0;
}
