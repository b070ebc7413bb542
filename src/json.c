/*
 * One JSON object in memory (json.h): jsmn's tokenizer with the grammar it
 * lets through checked, the selective tokenizer of the reflector's path (and
 * its error offsets), field lookup, unescaping and escaping. The framers that
 * cut a stream into objects are json_frame.c's.
 */
#include "json.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fmt.h"
#include "json_scan.h"
#include "kreflect.h"

/* jsmn lives in this translation unit only, with every symbol static. */
#define JSMN_STATIC
#define JSMN_STRICT
#define JSMN_PARENT_LINKS
#include <jsmn.h>

_Static_assert(sizeof(kr_json_tok) == sizeof(jsmntok_t), "kr_json_tok must match jsmntok_t");
_Static_assert(sizeof(jsmntype_t) == sizeof(int), "jsmntype_t must be int-sized");
_Static_assert(offsetof(kr_json_tok, type) == offsetof(jsmntok_t, type), "type");
_Static_assert(offsetof(kr_json_tok, start) == offsetof(jsmntok_t, start), "start");
_Static_assert(offsetof(kr_json_tok, end) == offsetof(jsmntok_t, end), "end");
_Static_assert(offsetof(kr_json_tok, size) == offsetof(jsmntok_t, size), "size");
_Static_assert(offsetof(kr_json_tok, parent) == offsetof(jsmntok_t, parent), "parent");
_Static_assert(KR_JSON_T_OBJECT == (int)JSMN_OBJECT && KR_JSON_T_ARRAY == (int)JSMN_ARRAY &&
	       KR_JSON_T_STRING == (int)JSMN_STRING &&
	       KR_JSON_T_PRIMITIVE == (int)JSMN_PRIMITIVE, "token types must match jsmn's");

/* --- unescaping ------------------------------------------------------------------- */

static int hex4(const char *p)
{
	int i, v = 0;

	for (i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * Decodes the escape at p (p[0] is the backslash) into out as UTF-8. Returns
 * the bytes of input it used (2, 6, or 12 for a surrogate pair) and sets *olen,
 * or KR_EPROTO for a bad or truncated escape or a lone surrogate.
 */
static int decode_escape(const char *p, const char *end, char out[4], int *olen)
{
	long cp;
	int used = 6;

	if (end - p < 2 || p[0] != '\\')
		return KR_EPROTO;
	*olen = 1;
	switch (p[1]) {
	case '"': out[0] = '"'; return 2;
	case '\\': out[0] = '\\'; return 2;
	case '/': out[0] = '/'; return 2;
	case 'b': out[0] = '\b'; return 2;
	case 'f': out[0] = '\f'; return 2;
	case 'n': out[0] = '\n'; return 2;
	case 'r': out[0] = '\r'; return 2;
	case 't': out[0] = '\t'; return 2;
	case 'u': break;
	default: return KR_EPROTO;
	}
	if (end - p < 6 || (cp = hex4(p + 2)) < 0)
		return KR_EPROTO;
	if (cp >= 0xDC00 && cp <= 0xDFFF)
		return KR_EPROTO;
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		int lo;

		if (end - p < 12 || p[6] != '\\' || p[7] != 'u')
			return KR_EPROTO;
		lo = hex4(p + 8);
		if (lo < 0xDC00 || lo > 0xDFFF)
			return KR_EPROTO;
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		used = 12;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
	} else if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		*olen = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		*olen = 3;
	} else {
		out[0] = (char)(0xF0 | (cp >> 18));
		out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[3] = (char)(0x80 | (cp & 0x3F));
		*olen = 4;
	}
	return used;
}

int kr_json_unescape_span(const char *raw, size_t n, char *out, size_t size)
{
	size_t i = 0, o = 0;

	if (size == 0)
		return KR_ETOOBIG;
	if (n > INT_MAX)
		return KR_ETOOBIG;
	while (i < n) {
		const char *bs = memchr(raw + i, '\\', n - i);
		size_t run = bs ? (size_t)(bs - (raw + i)) : n - i;
		char tmp[4];
		int used, tl;

		if (run >= size - o)
			return KR_ETOOBIG;
		memmove(out + o, raw + i, run);
		o += run;
		i += run;
		if (!bs)
			break;
		used = decode_escape(raw + i, raw + n, tmp, &tl);
		if (used < 0)
			return used;
		if ((size_t)tl >= size - o)
			return KR_ETOOBIG;
		memcpy(out + o, tmp, (size_t)tl);
		o += (size_t)tl;
		i += (size_t)used;
	}
	out[o] = '\0';
	return (int)o;
}

/* Nonzero if raw[0..n) unescaped equals s[0..slen). */
static int eq_unescaped(const char *raw, size_t n, const char *s, size_t slen)
{
	size_t i = 0, j = 0;

	/*
	 * Unescaping only shortens: shorter text never matches, text of the same
	 * length only byte for byte and without escapes. Most keys looked up
	 * are told apart here, by their length.
	 */
	if (n < slen || (n > 0 && raw[0] != '\\' && (slen == 0 || raw[0] != s[0])))
		return 0;
	if (n == slen)
		return memcmp(raw, s, n) == 0 && !memchr(raw, '\\', n);
	while (i < n) {
		const char *bs = memchr(raw + i, '\\', n - i);
		size_t run = bs ? (size_t)(bs - (raw + i)) : n - i;
		char tmp[4];
		int used, tl;

		if (run > slen - j || memcmp(raw + i, s + j, run) != 0)
			return 0;
		i += run;
		j += run;
		if (!bs)
			break;
		used = decode_escape(raw + i, raw + n, tmp, &tl);
		if (used < 0 || (size_t)tl > slen - j || memcmp(tmp, s + j, (size_t)tl) != 0)
			return 0;
		i += (size_t)used;
		j += (size_t)tl;
	}
	return j == slen;
}

/* --- tokens ---------------------------------------------------------------------------- */

/* First and one-past-last byte of t in the text, quotes included. */
static int raw_start(const kr_json_tok *t)
{
	return t->type == KR_JSON_T_STRING ? t->start - 1 : t->start;
}

static int raw_end(const kr_json_tok *t)
{
	return t->type == KR_JSON_T_STRING ? t->end + 1 : t->end;
}

static int is_container(const kr_json_tok *t)
{
	return t->type == KR_JSON_T_OBJECT || t->type == KR_JSON_T_ARRAY;
}

/* Nonzero if s[a..b) is whitespace only. */
static int only_ws(const char *s, int a, int b)
{
	if (a > b)
		return 0;
	for (; a < b; a++)
		if (!is_ws(s[a]))
			return 0;
	return 1;
}

/* Nonzero if s[a..b) is whitespace, sep, whitespace. */
static int sep_gap(const char *s, int a, int b, char sep)
{
	while (a < b && is_ws(s[a]))
		a++;
	return a < b && s[a] == sep && only_ws(s, a + 1, b);
}

/* Nonzero if s[0..n) is true, false, null or a JSON number (jsmn checks none). */
static int valid_primitive(const char *s, int n)
{
	int i = 0;

	if ((n == 4 && memcmp(s, "true", 4) == 0) || (n == 5 && memcmp(s, "false", 5) == 0) ||
	    (n == 4 && memcmp(s, "null", 4) == 0))
		return 1;
	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0') {
		i++;
	} else if (i < n && is_digit(s[i])) {
		while (i < n && is_digit(s[i]))
			i++;
	} else {
		return 0;
	}
	if (i < n && s[i] == '.') {
		if (++i >= n || !is_digit(s[i]))
			return 0;
		while (i < n && is_digit(s[i]))
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= n || !is_digit(s[i]))
			return 0;
		while (i < n && is_digit(s[i]))
			i++;
	}
	return i == n;
}

/*
 * Nonzero if [p, p + n) holds a control byte, which a JSON string may not.
 * A word at a time: a 1 KiB string is checked in about 130 steps, not 1024.
 */
static int has_control(const char *p, size_t n)
{
	const char *end = p + n;

	for (; (size_t)(end - p) >= sizeof(size_t); p += sizeof(size_t)) {
		size_t v;

		memcpy(&v, p, sizeof(v));
		if (HAS_LESS(v, 0x20))
			return 1;
	}
	for (; p < end; p++)
		if ((unsigned char)*p < 0x20)
			return 1;
	return 0;
}

/*
 * From token k, whose text ends at *pos, up its ancestors below stop (its
 * parent, or -1 for all up to the root): each container passed must close
 * after whitespace alone; *pos moves past its bracket. 0 if not, or if a
 * parent link is broken.
 */
static int close_up(const char *js, const kr_json_tok *t, int k, int stop, int *pos)
{
	while (t[k].parent != stop) {
		k = t[k].parent;
		if (k < 0)
			return 0;
		if (is_container(&t[k])) {
			if (!only_ws(js, *pos, t[k].end - 1))
				return 0;
			*pos = t[k].end;
		}
	}
	return 1;
}

/*
 * Checks what jsmn lets through even in strict mode: missing or doubled
 * commas and colons, keys without values, values in key position, bad
 * literals and numbers, control bytes in strings, text after the object.
 * Walks the tokens once; each closing bracket is checked once, when the token
 * after it (or the end) is reached. Returns nonzero if the text is valid.
 */
static int validate(const char *js, size_t len, const kr_json_tok *t, int n)
{
	int i, pos;

	if (t[0].type != KR_JSON_T_OBJECT || t[0].parent != -1 || !only_ws(js, 0, t[0].start))
		return 0;
	for (i = 0; i < n; i++) {
		const kr_json_tok *c = &t[i];
		int p = c->parent;

		if (i > 0) {
			if (p < 0 || p >= i)
				return 0;  /* a second top-level value, or a broken link */
			if (t[p].type == KR_JSON_T_OBJECT) {
				if (c->type != KR_JSON_T_STRING || c->size != 1)
					return 0;  /* not a key, or a key without one value */
			} else if (t[p].type == KR_JSON_T_PRIMITIVE) {
				return 0;
			} else if (c->type == KR_JSON_T_STRING && c->size != 0) {
				return 0;  /* a value used as a key */
			}
			if (p == i - 1) {
				if (t[p].type == KR_JSON_T_STRING) {
					if (!sep_gap(js, t[p].end + 1, raw_start(c), ':'))
						return 0;
				} else if (!only_ws(js, t[p].start + 1, raw_start(c))) {
					return 0;
				}
			} else {
				if (t[p].type == KR_JSON_T_STRING)
					return 0;
				/* Close what ended between the previous sibling and c. */
				pos = raw_end(&t[i - 1]);
				if (!close_up(js, t, i - 1, p, &pos) || !sep_gap(js, pos, raw_start(c), ','))
					return 0;
			}
		}
		switch (c->type) {
		case KR_JSON_T_OBJECT:
		case KR_JSON_T_ARRAY:
			if (c->end <= c->start || (c->size == 0 && !only_ws(js, c->start + 1, c->end - 1)))
				return 0;
			break;
		case KR_JSON_T_STRING:
			if (has_control(js + c->start, (size_t)(c->end - c->start)))
				return 0;
			break;
		case KR_JSON_T_PRIMITIVE:
			if (c->size != 0 || !valid_primitive(js + c->start, c->end - c->start))
				return 0;
			break;
		default:
			return 0;
		}
	}
	/* Close everything still open (t[0] is the root, whose parent is -1). */
	pos = raw_end(&t[n - 1]);
	return close_up(js, t, n - 1, -1, &pos) && only_ws(js, pos, (int)len);
}

int kr_json_parse(const char *json, size_t len, kr_json_tok *toks, int ntoks)
{
	jsmn_parser parser;
	int n;

	if (!toks || ntoks < 0)
		return KR_EINVAL;
	if (len > INT_MAX)
		return KR_ETOOBIG;
	jsmn_init(&parser);
	n = jsmn_parse(&parser, json, len, (jsmntok_t *)(void *)toks, (unsigned int)ntoks);
	if (n == JSMN_ERROR_NOMEM)
		return KR_ENOSPC;
	if (n <= 0 || !validate(json, len, toks, n))
		return KR_EPROTO;
	return n;
}

/* --- selective tokenizing ---------------------------------------------------------- */

/* Bytes a number or a literal is made of; valid_primitive checks their order. */
static const unsigned char prim_byte_tab[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
	['8'] = 1, ['9'] = 1, ['-'] = 1, ['+'] = 1, ['.'] = 1, ['e'] = 1, ['E'] = 1,
	['t'] = 1, ['r'] = 1, ['u'] = 1, ['f'] = 1, ['a'] = 1, ['l'] = 1, ['s'] = 1, ['n'] = 1,
};

/* Deepest level of the paths that kr_json_parse_sel follows (the root is level 0). */
#define SEL_LEVELS 8

static inline __attribute__((always_inline)) const char *skip_ws(const char *p, const char *end)
{
	while (p < end && is_ws(*p))
		p++;
	return p;
}

/*
 * The closing quote of the string whose contents start at p, or NULL if it
 * holds a control byte or a bad escape or is not closed. Same checks as
 * jsmn's strict mode plus validate's control bytes, at a word a step.
 */
static const char *string_end(const char *p, const char *end)
{
	for (;;) {
		p = string_stop_ctl(p, end);
		if (p == end || (unsigned char)*p < 0x20)
			return NULL;
		if (*p == '"')
			return p;
		if (++p == end)
			return NULL;
		switch (*p) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
			p++;
			break;
		case 'u':
			if (end - p < 5 || hex4(p + 1) < 0)
				return NULL;
			p += 5;
			break;
		default:
			return NULL;
		}
	}
}

/*
 * Whether the container opened under key token k of the container at
 * level lv (following path at[lv], of which its first len[lv] bytes are
 * matched) is on one of the paths: then at/len of level lv + 1 are set.
 * Once per object or array at the levels followed: a few per event.
 */
static int sel_follow(const char *json, const kr_json_tok *k, const char *const *paths, int npaths,
		      int *at, size_t *len, int lv)
{
	size_t plen = len[lv], sl;
	int q;

	if (lv + 1 >= SEL_LEVELS)
		return 0;
	for (q = 0; q < npaths; q++) {
		const char *seg = paths[q];

		if (plen) {
			const char *pre = paths[at[lv]];

			/* (stops at seg's NUL too: pre has none in its first plen bytes) */
			for (sl = 0; sl < plen && seg[sl] == pre[sl]; sl++)
				;
			if (sl < plen || seg[plen] != '.')
				continue;
			seg += plen + 1;
		}
		for (sl = 0; seg[sl] && seg[sl] != '.'; sl++)
			;
		if (sl && eq_unescaped(json + k->start, (size_t)(k->end - k->start), seg, sl)) {
			at[lv + 1] = q;
			len[lv + 1] = (size_t)(seg - paths[q]) + sl;
			return 1;
		}
	}
	return 0;
}

/* Where parse_sel stopped on an error, and why: for kr_json_error_at. */
struct sel_error {
	const char *at;
	const char *why;
};

/*
 * kr_json_parse_sel, and with err set (toks[0..1) is then enough) the finder
 * of the first error: the root is skipped too, so no token but its own.
 */
static int parse_sel(const char *json, size_t len, kr_json_tok *toks, int ntoks,
		     const char *const *paths, int npaths, struct sel_error *err)
{
	const char *p, *q, *end = json + len;
	unsigned char objs[(KR_JSON_DEPTH_MAX + 7) / 8];  /* bit d: level d is an object */
	int at[SEL_LEVELS];
	size_t plen[SEL_LEVELS];
	int n = 0, cur = -1, par = -1, depth = 0, lv = 0, skip_at = 0, skiptok = -1;
	char c;

	if (!toks || ntoks < 0 || (npaths > 0 && !paths))
		return KR_EINVAL;
	if (len > INT_MAX)
		return KR_ETOOBIG;
	at[0] = -1;
	plen[0] = 0;

/* Appends a token (only outside skipped values), or fails with KR_ENOSPC. */
#define TOK(ty, s, e, pa) do {							\
		if (n >= ntoks)							\
			FAIL(KR_ENOSPC, p, "too many values");			\
		toks[n].type = (ty);						\
		toks[n].start = (int)(s);					\
		toks[n].end = (int)(e);						\
		toks[n].size = 0;						\
		toks[n].parent = (pa);						\
		n++;								\
	} while (0)
/* Returns code; for kr_json_error_at, says where and why first. */
#define FAIL(code, where, reason) do {						\
		if (err) {							\
			err->at = (where);					\
			err->why = (reason);					\
		}								\
		return (code);							\
	} while (0)
#define END_WHY "unexpected end of the JSON text"
#define IS_OBJ(d) (objs[(d) >> 3] & (1u << ((d) & 7)))

	p = skip_ws(json, end);
	if (p == end || *p != '{')
		FAIL(KR_EPROTO, p, p == end ? END_WHY : "the top level is not an object");

value:
	/* p is at the first byte of a value; par is its parent token. */
	c = *p;
	if (c == '"') {
		if (!(q = string_end(p + 1, end)))
			FAIL(KR_EPROTO, p, "invalid JSON string");
		if (!skip_at)
			TOK(KR_JSON_T_STRING, p + 1 - json, q - json, par);
		p = q + 1;
		goto after_value;
	}
	if (c == '{' || c == '[') {
		if (depth >= KR_JSON_DEPTH_MAX)
			FAIL(KR_ENOSPC, p, "nested too deep");
		if (c == '{')
			objs[depth >> 3] |= (unsigned char)(1u << (depth & 7));
		else
			objs[depth >> 3] &= (unsigned char)~(1u << (depth & 7));
		depth++;
		if (!skip_at) {
			int follow = npaths < 0 || (cur < 0 ? !err :
				     toks[cur].type == KR_JSON_T_OBJECT &&
				     sel_follow(json, &toks[par], paths, npaths, at, plen, lv));

			if (follow) {
				TOK(c == '{' ? KR_JSON_T_OBJECT : KR_JSON_T_ARRAY, p - json, -1, par);
				cur = n - 1;
				if (npaths >= 0 && depth > 1)
					lv++;
			} else {
				TOK(KR_JSON_T_SKIPPED, p - json, -1, par);
				skiptok = n - 1;
				skip_at = depth;
			}
		}
		p = skip_ws(p + 1, end);
		if (p == end)
			FAIL(KR_EPROTO, p, END_WHY);
		if (*p == (c == '{' ? '}' : ']'))
			goto close;
		if (c == '{')
			goto key;
		if (!skip_at) {
			toks[cur].size++;
			par = cur;
		}
		goto value;
	}
	if (prim_byte_tab[(unsigned char)c] && c != '+' && c != '.' && c != 'e' && c != 'E') {
		for (q = p + 1; q < end && prim_byte_tab[(unsigned char)*q]; q++)
			;
		if (!valid_primitive(p, (int)(q - p)))
			FAIL(KR_EPROTO, p, "invalid JSON value");
		if (!skip_at)
			TOK(KR_JSON_T_PRIMITIVE, p - json, q - json, par);
		p = q;
		goto after_value;
	}
	FAIL(KR_EPROTO, p, "invalid JSON value");

key:
	/* p is at the first byte of a member: its key. */
	if (*p != '"' || !(q = string_end(p + 1, end)))
		FAIL(KR_EPROTO, p, "expected a string key");
	if (!skip_at) {
		TOK(KR_JSON_T_STRING, p + 1 - json, q - json, cur);
		toks[n - 1].size = 1;
		toks[cur].size++;
		par = n - 1;
	}
	p = skip_ws(q + 1, end);
	if (p == end || *p != ':')
		FAIL(KR_EPROTO, p, p == end ? END_WHY : "expected ':'");
	p = skip_ws(p + 1, end);
	if (p == end)
		FAIL(KR_EPROTO, p, END_WHY);
	goto value;

after_value:
	p = skip_ws(p, end);
	if (p == end)
		FAIL(KR_EPROTO, p, END_WHY);
	c = *p;
	if (c == ',') {
		p = skip_ws(p + 1, end);
		if (p == end)
			FAIL(KR_EPROTO, p, END_WHY);
		if (IS_OBJ(depth - 1))
			goto key;
		if (!skip_at) {
			toks[cur].size++;
			par = cur;
		}
		goto value;
	}
	if (c == (IS_OBJ(depth - 1) ? '}' : ']'))
		goto close;
	FAIL(KR_EPROTO, p, "expected ',' or a closing bracket");

close:
	/* p is at the closing bracket of the innermost open container. */
	if (skip_at) {
		if (depth == skip_at) {
			toks[skiptok].end = (int)(p + 1 - json);
			skip_at = 0;
		}
	} else {
		int k = toks[cur].parent;

		toks[cur].end = (int)(p + 1 - json);
		if (k >= 0 && toks[k].type == KR_JSON_T_STRING)
			k = toks[k].parent;
		cur = k;
		if (npaths >= 0 && lv > 0)
			lv--;
	}
	depth--;
	p++;
	if (depth == 0) {
		p = skip_ws(p, end);
		if (p != end)
			FAIL(KR_EPROTO, p, "text after the JSON object");
		return n;
	}
	goto after_value;
#undef TOK
#undef FAIL
#undef END_WHY
#undef IS_OBJ
}

int kr_json_parse_sel(const char *json, size_t len, kr_json_tok *toks, int ntoks,
		      const char *const *paths, int npaths)
{
	return parse_sel(json, len, toks, ntoks, paths, npaths, NULL);
}

size_t kr_json_error_at(const char *json, size_t len, const char **why)
{
	struct sel_error e = { NULL, NULL };
	kr_json_tok root;

	if (parse_sel(json, len, &root, 1, NULL, 0, &e) >= 0 || !e.at) {
		*why = NULL;
		return len;
	}
	*why = e.why;
	return (size_t)(e.at - json);
}

/* Index of the first token after the subtree of token v. */
static int after(const kr_json_tok *toks, int ntoks, int v)
{
	int lo = v + 1, hi = ntoks, end = toks[v].end;

	/* Most values (strings, numbers, skipped or empty containers) have none under them. */
	if (lo >= hi || toks[lo].start >= end)
		return lo;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (toks[mid].start < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int kr_json_find_key(const char *json, const kr_json_tok *toks, int ntoks, int obj,
		     const char *key, size_t keylen)
{
	int m, k;

	if (obj < 0 || obj >= ntoks || toks[obj].type != KR_JSON_T_OBJECT)
		return -1;
	k = obj + 1;
	for (m = 0; m < toks[obj].size && k + 1 < ntoks; m++) {
		const kr_json_tok *kt = &toks[k];

		if (kt->type == KR_JSON_T_STRING &&
		    eq_unescaped(json + kt->start, (size_t)(kt->end - kt->start), key, keylen))
			return k + 1;
		k = after(toks, ntoks, k + 1);
	}
	return -1;
}

int kr_json_members(const char *json, const kr_json_tok *toks, int ntoks, int obj,
		    const char *const *keys, int nkeys, int *out)
{
	int m, k, i, found = 0;

	for (i = 0; i < nkeys; i++)
		out[i] = -1;
	if (obj < 0 || obj >= ntoks || toks[obj].type != KR_JSON_T_OBJECT)
		return 0;
	k = obj + 1;
	for (m = 0; m < toks[obj].size && k + 1 < ntoks && found < nkeys; m++) {
		const kr_json_tok *kt = &toks[k];
		const char *raw = json + kt->start;

		/* The first byte tells most keys apart before any length is taken. */
		for (i = 0; i < nkeys; i++)
			if (out[i] < 0 && (kt->end == kt->start || raw[0] == keys[i][0] || raw[0] == '\\') &&
			    eq_unescaped(raw, (size_t)(kt->end - kt->start), keys[i], strlen(keys[i]))) {
				out[i] = k + 1;
				found++;
				break;
			}
		k = after(toks, ntoks, k + 1);
	}
	return found;
}

int kr_json_find(const char *json, const kr_json_tok *toks, int ntoks, int root,
		 const char *path)
{
	int cur = root;

	for (;;) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);

		if (n == 0)
			return -1;
		cur = kr_json_find_key(json, toks, ntoks, cur, path, n);
		if (cur < 0 || !dot)
			return cur;
		path = dot + 1;
	}
}

int kr_json_str_eq(const char *json, const kr_json_tok *t, const char *s)
{
	if (t->type != KR_JSON_T_STRING)
		return 0;
	return eq_unescaped(json + t->start, (size_t)(t->end - t->start), s, strlen(s));
}

int kr_json_unescape(const char *json, const kr_json_tok *t, char *out, size_t size)
{
	int r;

	if (t->type != KR_JSON_T_STRING) {
		r = KR_EINVAL;
	} else {
		r = kr_json_unescape_span(json + t->start, (size_t)(t->end - t->start), out, size);
	}
	if (r < 0 && size > 0)
		out[0] = '\0';
	return r;
}

int kr_json_int(const char *json, const kr_json_tok *t, long long *out)
{
	const char *s = json + t->start;
	int i, n = t->end - t->start, neg;
	long long v = 0;

	if (t->type != KR_JSON_T_PRIMITIVE || n <= 0)
		return KR_EPROTO;
	neg = s[0] == '-';
	if (neg >= n)
		return KR_EPROTO;
	for (i = neg; i < n; i++)
		if (!is_digit(s[i]))
			return KR_EPROTO;
	for (i = neg; i < n; i++) {
		int d = s[i] - '0';

		/* Accumulates negatively so that LLONG_MIN fits. */
		if (v < (LLONG_MIN + d) / 10)
			return KR_ETOOBIG;
		v = v * 10 - d;
	}
	if (!neg) {
		if (v == LLONG_MIN)
			return KR_ETOOBIG;
		v = -v;
	}
	*out = v;
	return 0;
}

size_t kr_json_remove_member(char *json, size_t len, const kr_json_tok *toks, int ntoks, int v)
{
	size_t a, b, j;
	int k;

	if (v <= 0 || v >= ntoks)
		return len;
	k = toks[v].parent;
	if (k < 0 || k >= v || toks[k].type != KR_JSON_T_STRING || toks[k].parent < 0 ||
	    toks[toks[k].parent].type != KR_JSON_T_OBJECT)
		return len;
	a = (size_t)raw_start(&toks[k]);
	b = (size_t)raw_end(&toks[v]);
	if (a >= b || b > len)
		return len;
	j = b;
	while (j < len && is_ws(json[j]))
		j++;
	if (j < len && json[j] == ',') {
		/* Not the last member: take the comma after it and the space before the next key. */
		j++;
		while (j < len && is_ws(json[j]))
			j++;
		b = j;
	} else {
		/* The last member: take the comma before it and the space around. */
		j = a;
		while (j > 0 && is_ws(json[j - 1]))
			j--;
		if (j > 0 && json[j - 1] == ',') {
			j--;
			while (j > 0 && is_ws(json[j - 1]))
				j--;
			a = j;
		}
	}
	memmove(json + a, json + b, len - b);
	return len - (b - a);
}

/* --- metadata from the prefix of a skipped object ---------------------------------- */

#define PREFIX_DEPTH 8
#define PREFIX_KEY 64

int kr_json_prefix_strings(const char *buf, size_t len, const char *const *paths, int npaths,
			   char (*out)[KR_JSON_PREFIX_VALUE], int *found)
{
	char keys[PREFIX_DEPTH][PREFIX_KEY];
	char path[PREFIX_DEPTH * PREFIX_KEY];
	int depth = 0, in_array[PREFIX_DEPTH + 1] = { 0 }, expect_key = 0, left = npaths, i;
	size_t p = 0;

	*found = 0;
	for (i = 0; i < npaths; i++)
		out[i][0] = '\0';
	while (p < len && left > 0) {
		char c = buf[p];

		if (c == '{' || c == '[') {
			if (depth == PREFIX_DEPTH)
				return KR_ETOOBIG;
			depth++;
			in_array[depth] = c == '[';
			keys[depth - 1][0] = '\0';
			expect_key = c == '{';
			p++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return 0;
			depth--;
			expect_key = 0;
			p++;
		} else if (c == ',') {
			expect_key = depth > 0 && !in_array[depth];
			p++;
		} else if (c == '"') {
			const char *end = buf + p + 1, *stop = buf + len;
			size_t n;

			/* Find the closing quote, stepping over escapes. */
			while (end < stop && *end != '"')
				end += *end == '\\' ? 2 : 1;
			if (end >= stop)
				return *found;   /* the prefix ends inside a string */
			n = (size_t)(end - (buf + p + 1));
			if (expect_key) {
				if (kr_json_unescape_span(buf + p + 1, n, keys[depth - 1], PREFIX_KEY) < 0)
					keys[depth - 1][0] = '\0';
				expect_key = 0;
			} else if (depth > 0 && !in_array[depth]) {
				size_t pl = 0;
				int d;

				for (d = 0; d < depth && pl < sizeof(path) - 1; d++)
					pl += (size_t)kr_snprintf(path + pl, sizeof(path) - pl, "%s%s",
							       d ? "." : "", keys[d]);
				for (i = 0; i < npaths; i++)
					if (!out[i][0] && strcmp(path, paths[i]) == 0 &&
					    kr_json_unescape_span(buf + p + 1, n, out[i], KR_JSON_PREFIX_VALUE) > 0) {
						(*found)++;
						left--;
					}
			}
			p += n + 2;
		} else {
			p++;
		}
	}
	return *found;
}

void kr_json_escape(struct kr_out *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = o->len;

	for (; *s && !o->overflow; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[6] = { '\\', (char)c, 0, 0, 0, 0 };

		if (c == '"' || c == '\\') {
			kr_out_put(o, esc, 2);
		} else if (c < 0x20) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			kr_out_put(o, esc, 6);
		} else {
			kr_out_put(o, (const char *)s, 1);
		}
	}
	if (o->overflow)
		o->len = start;
}
