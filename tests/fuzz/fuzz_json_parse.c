/*
 * Fuzzes kr_json_parse and the helpers that read its tokens. Input: byte 0
 * picks a token for kr_json_find and kr_json_remove_member, the rest is the
 * text. kr_json_parse must accept exactly what a plain recursive-descent JSON
 * grammar check accepts (a top-level object, RFC 8259); kr_json_unescape and
 * kr_json_str_eq must agree with a reference unescaper; kr_json_find_key must
 * return the first key with the given text; kr_json_remove_member must leave
 * valid JSON with exactly that member gone; kr_json_error_at must find no
 * error in a valid text and one inside an invalid text.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKS (1 << 15)
#define MAX_LEN (1 << 20)
#define MAX_DEPTH 2000

static kr_json_tok toks[MAX_TOKS], toks2[MAX_TOKS];
static char text[MAX_LEN], edited[MAX_LEN];
static char got[MAX_LEN + 1], want[MAX_LEN + 1], key[MAX_LEN + 1], path[4096];

/* --- reference grammar check ------------------------------------------------------------ */

struct ref {
	const char *s;
	size_t n, i;
	int too_deep;
};

static void ref_ws(struct ref *r)
{
	while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' ||
			       r->s[r->i] == '\r'))
		r->i++;
}

static int ref_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int ref_string(struct ref *r)
{
	if (r->i >= r->n || r->s[r->i] != '"')
		return 0;
	r->i++;
	while (r->i < r->n) {
		unsigned char c = (unsigned char)r->s[r->i++];

		if (c == '"')
			return 1;
		if (c < 0x20)
			return 0;
		if (c == '\\') {
			if (r->i >= r->n)
				return 0;
			c = (unsigned char)r->s[r->i++];
			if (c == 'u') {
				int k;

				for (k = 0; k < 4; k++)
					if (r->i >= r->n || !ref_hex(r->s[r->i++]))
						return 0;
			} else if (!strchr("\"\\/bfnrt", c) || c == 0) {
				return 0;
			}
		}
	}
	return 0;
}

static int ref_digits(struct ref *r)
{
	size_t start = r->i;

	while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9')
		r->i++;
	return r->i > start;
}

static int ref_number(struct ref *r)
{
	if (r->i < r->n && r->s[r->i] == '-')
		r->i++;
	if (r->i < r->n && r->s[r->i] == '0')
		r->i++;
	else if (!(r->i < r->n && r->s[r->i] >= '1' && r->s[r->i] <= '9') || !ref_digits(r))
		return 0;
	if (r->i < r->n && r->s[r->i] == '.') {
		r->i++;
		if (!ref_digits(r))
			return 0;
	}
	if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
		r->i++;
		if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-'))
			r->i++;
		if (!ref_digits(r))
			return 0;
	}
	return 1;
}

static int ref_word(struct ref *r, const char *w)
{
	size_t n = strlen(w);

	if (r->n - r->i < n || memcmp(r->s + r->i, w, n) != 0)
		return 0;
	r->i += n;
	return 1;
}

static int ref_value(struct ref *r, int depth);

static int ref_object(struct ref *r, int depth)
{
	r->i++;
	ref_ws(r);
	if (r->i < r->n && r->s[r->i] == '}') {
		r->i++;
		return 1;
	}
	for (;;) {
		ref_ws(r);
		if (!ref_string(r))
			return 0;
		ref_ws(r);
		if (r->i >= r->n || r->s[r->i++] != ':')
			return 0;
		if (!ref_value(r, depth + 1))
			return 0;
		ref_ws(r);
		if (r->i >= r->n)
			return 0;
		if (r->s[r->i] == '}') {
			r->i++;
			return 1;
		}
		if (r->s[r->i++] != ',')
			return 0;
	}
}

static int ref_array(struct ref *r, int depth)
{
	r->i++;
	ref_ws(r);
	if (r->i < r->n && r->s[r->i] == ']') {
		r->i++;
		return 1;
	}
	for (;;) {
		if (!ref_value(r, depth + 1))
			return 0;
		ref_ws(r);
		if (r->i >= r->n)
			return 0;
		if (r->s[r->i] == ']') {
			r->i++;
			return 1;
		}
		if (r->s[r->i++] != ',')
			return 0;
	}
}

static int ref_value(struct ref *r, int depth)
{
	char c;

	if (depth > MAX_DEPTH) {
		r->too_deep = 1;
		return 0;
	}
	ref_ws(r);
	if (r->i >= r->n)
		return 0;
	c = r->s[r->i];
	if (c == '{')
		return ref_object(r, depth);
	if (c == '[')
		return ref_array(r, depth);
	if (c == '"')
		return ref_string(r);
	if (c == 't')
		return ref_word(r, "true");
	if (c == 'f')
		return ref_word(r, "false");
	if (c == 'n')
		return ref_word(r, "null");
	return ref_number(r);
}

/* 1 valid, 0 invalid, -1 too deep to tell. */
static int ref_valid(const char *s, size_t n)
{
	struct ref r = { s, n, 0, 0 };
	int ok;

	ref_ws(&r);
	if (r.i >= n || s[r.i] != '{')
		return 0;
	ok = ref_value(&r, 0);
	if (r.too_deep)
		return -1;
	ref_ws(&r);
	return ok && r.i == n;
}

/* --- reference unescaper ------------------------------------------------------------------ */

static long ref_hex4(const char *p)
{
	char tmp[5];

	memcpy(tmp, p, 4);
	tmp[4] = 0;
	return strtol(tmp, NULL, 16);
}

static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Unescapes the contents of a valid JSON string; -1 on a lone surrogate. */
static long ref_unescape(const char *s, size_t n, char *o)
{
	size_t i = 0, k = 0;

	while (i < n) {
		unsigned long cp;

		if (s[i] != '\\') {
			o[k++] = s[i++];
			continue;
		}
		switch (s[i + 1]) {
		case 'b': o[k++] = '\b'; i += 2; continue;
		case 'f': o[k++] = '\f'; i += 2; continue;
		case 'n': o[k++] = '\n'; i += 2; continue;
		case 'r': o[k++] = '\r'; i += 2; continue;
		case 't': o[k++] = '\t'; i += 2; continue;
		case 'u': break;
		default: o[k++] = s[i + 1]; i += 2; continue;
		}
		cp = (unsigned long)ref_hex4(s + i + 2);
		i += 6;
		if (cp >= 0xDC00 && cp <= 0xDFFF)
			return -1;
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			unsigned long lo;

			if (n - i < 6 || s[i] != '\\' || s[i + 1] != 'u')
				return -1;
			lo = (unsigned long)ref_hex4(s + i + 2);
			if (lo < 0xDC00 || lo > 0xDFFF)
				return -1;
			i += 6;
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		}
		k += put_utf8(o + k, cp);
	}
	o[k] = 0;
	return (long)k;
}

/* --- checks --------------------------------------------------------------------------- */

static int after(const kr_json_tok *t, int n, int i)
{
	int j = i + 1;

	while (j < n && t[j].start < t[i].end)
		j++;
	return j;
}

static void check_strings(const char *s, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		const kr_json_tok *t = &toks[i];
		long w;
		int g;

		if (t->type != KR_JSON_T_STRING) {
			if (kr_json_unescape(s, t, got, 8) != KR_EINVAL || got[0] != 0 ||
			    kr_json_str_eq(s, t, ""))
				abort();
			continue;
		}
		w = ref_unescape(s + t->start, (size_t)(t->end - t->start), want);
		g = kr_json_unescape(s, t, got, sizeof(got));
		if (w < 0) {
			if (g != KR_EPROTO || got[0] != 0)
				abort();
			continue;
		}
		if (g != w || memcmp(got, want, (size_t)w + 1) != 0)
			abort();
		if (kr_json_unescape(s, t, got, (size_t)w + 1) != w)
			abort();
		if (kr_json_unescape(s, t, got, (size_t)w) != KR_ETOOBIG || (w > 0 && got[0] != 0))
			abort();
		if (strlen(want) == (size_t)w) {
			if (!kr_json_str_eq(s, t, want))
				abort();
			want[w] = 'x';
			want[w + 1] = 0;
			if (kr_json_str_eq(s, t, want))
				abort();
			if (w > 0) {
				want[w - 1] = 0;
				if (kr_json_str_eq(s, t, want))
					abort();
			}
		}
	}
}

static void check_find_key(const char *s, int n)
{
	int o;

	for (o = 0; o < n; o++) {
		int k, m;

		if (toks[o].type != KR_JSON_T_OBJECT || toks[o].size > 64)
			continue;
		for (k = o + 1, m = 0; m < toks[o].size; m++, k = after(toks, n, k + 1)) {
			long kl = ref_unescape(s + toks[k].start, (size_t)(toks[k].end - toks[k].start), key);
			int first, j, mm;

			if (kl < 0) {
				continue;
			}
			/* The first key of o with the same text. */
			for (j = o + 1, mm = 0, first = -1; mm < toks[o].size; mm++, j = after(toks, n, j + 1)) {
				long jl = ref_unescape(s + toks[j].start, (size_t)(toks[j].end - toks[j].start),
						       want);

				if (jl == kl && memcmp(want, key, (size_t)kl) == 0) {
					first = j + 1;
					break;
				}
			}
			if (first < 0 || kr_json_find_key(s, toks, n, o, key, (size_t)kl) != first)
				abort();
		}
	}
}

/* Builds the dotted path to token v, if every step is an object key without dots. */
static void check_find_path(const char *s, int n, int v)
{
	int chain[64], depth = 0, cur, i;
	size_t pl = 0;

	if (v <= 0 || toks[toks[v].parent].type != KR_JSON_T_STRING)
		return;
	for (cur = v; cur != 0;) {
		int k = toks[cur].parent;

		if (k < 0 || toks[k].type != KR_JSON_T_STRING || depth == 64)
			return;
		chain[depth++] = k;
		cur = toks[k].parent;
	}
	for (i = depth - 1; i >= 0; i--) {
		long kl = ref_unescape(s + toks[chain[i]].start,
				       (size_t)(toks[chain[i]].end - toks[chain[i]].start), key);

		if (kl <= 0 || (size_t)kl != strlen(key) || strchr(key, '.') ||
		    pl + (size_t)kl + 2 > sizeof(path))
			return;
		memcpy(path + pl, key, (size_t)kl);
		pl += (size_t)kl;
		path[pl++] = i ? '.' : 0;
	}
	/*
	 * Same as stepping with find_key (checked above): v itself unless a
	 * duplicate key came first, and then no later than v, or nothing (-1)
	 * when the first of the duplicates has no such path under it.
	 */
	cur = 0;
	for (i = depth - 1; i >= 0 && cur >= 0; i--) {
		long kl = ref_unescape(s + toks[chain[i]].start,
				       (size_t)(toks[chain[i]].end - toks[chain[i]].start), key);

		cur = kr_json_find_key(s, toks, n, cur, key, (size_t)kl);
	}
	if (kr_json_find(s, toks, n, 0, path) != cur || cur > v)
		abort();
}

static void check_remove(const char *s, size_t len, int n, int v)
{
	size_t nl, removed, a, lcp;
	int k, o, n2, gone, ks;

	memcpy(edited, s, len);
	nl = kr_json_remove_member(edited, len, toks, n, v);
	k = v > 0 && v < n ? toks[v].parent : -1;
	if (k < 0 || toks[k].type != KR_JSON_T_STRING) {
		if (nl != len || memcmp(edited, s, len) != 0)
			abort();
		return;
	}
	o = toks[k].parent;
	if (nl >= len)
		abort();
	n2 = kr_json_parse(edited, nl, toks2, MAX_TOKS);
	gone = after(toks, n, v) - k;
	if (n2 != n - gone || toks2[o].size != toks[o].size - 1)
		abort();
	/* The text lost is one run that covers the member, and nothing else changed. */
	removed = len - nl;
	ks = toks[k].start - 1;
	for (lcp = 0; lcp < nl && edited[lcp] == s[lcp]; lcp++)
		;
	a = lcp < (size_t)ks ? lcp : (size_t)ks;
	if (memcmp(edited + a, s + a + removed, nl - a) != 0)
		abort();
	if (a + removed < (size_t)(toks[v].type == KR_JSON_T_STRING ? toks[v].end + 1 : toks[v].end))
		abort();
}

static void check_ints(const char *s, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		long long x = 0, y;
		int r, d, plain = 1;
		char num[64];
		size_t len = (size_t)(toks[i].end - toks[i].start);

		if (toks[i].type != KR_JSON_T_PRIMITIVE)
			continue;
		r = kr_json_int(s, &toks[i], &x);
		for (d = toks[i].start + (s[toks[i].start] == '-'); d < toks[i].end; d++)
			if (s[d] < '0' || s[d] > '9')
				plain = 0;
		if (!plain || s[toks[i].end - 1] == '-') {
			if (r != KR_EPROTO)
				abort();
			continue;
		}
		if (len >= sizeof(num)) {
			if (r != KR_ETOOBIG)
				abort();
			continue;
		}
		memcpy(num, s + toks[i].start, len);
		num[len] = 0;
		errno = 0;
		y = strtoll(num, NULL, 10);
		if (errno == ERANGE ? r != KR_ETOOBIG : (r != 0 || x != y))
			abort();
	}
}

/*
 * kr_json_error_at finds no error in a valid text, and in an invalid one an
 * offset inside it where the text up to there is a whole valid object only
 * if the error is text after it (every other error is inside the object).
 */
static void check_error_at(const char *s, size_t len, int valid)
{
	const char *why = "unset";
	size_t at = kr_json_error_at(s, len, &why);
	int prefix;

	if (valid ? (at != len || why != NULL) : (at > len || !why || !why[0]))
		abort();
	if (valid)
		return;
	prefix = ref_valid(s, at);
	if (prefix >= 0 && (prefix == 1) != (strcmp(why, "text after the JSON object") == 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len;
	int n, ref, pick;

	if (size < 1 || size - 1 > MAX_LEN)
		return 0;
	len = size - 1;
	memcpy(text, data + 1, len);
	n = kr_json_parse(text, len, toks, MAX_TOKS);
	ref = ref_valid(text, len);
	if (n == KR_ENOSPC || ref < 0)
		return 0;
	if ((n > 0) != (ref == 1) || (n <= 0 && n != KR_EPROTO))
		abort();
	check_error_at(text, len, n > 0);
	if (n <= 0)
		return 0;
	if (kr_json_parse(text, len, toks2, n) != n || kr_json_parse(text, len, toks2, n - 1) != KR_ENOSPC)
		abort();
	check_strings(text, n);
	check_find_key(text, n);
	check_ints(text, n);
	pick = data[0] % n;
	check_find_path(text, n, pick);
	check_remove(text, len, n, pick);
	return 0;
}
