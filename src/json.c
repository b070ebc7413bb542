#include "json.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fmt.h"
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

/* Hot and tiny: -Os would otherwise make a call of it. */
static inline __attribute__((always_inline)) int is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* --- the framing core -------------------------------------------------------------- */

enum framer_state {
	F_BETWEEN = 0,  /* between objects: whitespace or '{' */
	F_VALUE,        /* inside an object, outside strings */
	F_STRING,       /* inside a string */
	F_ESC,          /* after a backslash in a string */
	F_FAILED,
};

/* The bytes that matter outside strings; everything else is passed over. */
static const unsigned char structural[256] = {
	['"'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1,
};

/* The same in line mode, where a newline inside an object ends it too early. */
static const unsigned char structural_lines[256] = {
	['"'] = 1, ['{'] = 1, ['}'] = 1, ['['] = 1, [']'] = 1, ['\n'] = 1,
};

#define ONES ((size_t)-1 / 255)
#define HIGHS (ONES * 0x80)
/* Nonzero if some byte of word v is zero (exact as a yes/no, whatever the byte order). */
#define HAS_ZERO(v) (((v) - ONES) & ~(v) & HIGHS)
/* Nonzero if some byte of word v is below n, for n <= 128 (exact as a yes/no). */
#define HAS_LESS(v, n) (((v) - ONES * (n)) & ~(v) & HIGHS)

/*
 * Strings are most of a Kubernetes object, and both the framer and the
 * tokenizer look for the end of each: 16 bytes a step with the vector unit
 * every x86_64 and aarch64 has (SSE2, NEON), else a machine word a step
 * (armv7, or any build with -DKR_JSON_NO_SIMD, which tests that path).
 */
#if !defined(KR_JSON_NO_SIMD) && defined(__SSE2__)
#include <emmintrin.h>
#define KR_JSON_SIMD 1

/* Bit i set if byte i of the 16 at p is '"' or '\\' (or, with ctl, below 0x20). */
static unsigned stop_mask(const char *p, int ctl)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
				 _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));

	if (ctl)
		m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v));
	return (unsigned)_mm_movemask_epi8(m);
}
#elif !defined(KR_JSON_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define KR_JSON_SIMD 1

static unsigned stop_mask(const char *p, int ctl)
{
	uint8x16_t v = vld1q_u8((const uint8_t *)p);
	uint8x16_t m = vorrq_u8(vceqq_u8(v, vdupq_n_u8('"')), vceqq_u8(v, vdupq_n_u8('\\')));
	uint8_t b[16];
	unsigned bits = 0;
	int i;

	if (ctl)
		m = vorrq_u8(m, vcltq_u8(v, vdupq_n_u8(0x20)));
	if (vmaxvq_u8(m) == 0)
		return 0;
	vst1q_u8(b, m);
	for (i = 0; i < 16; i++)
		bits |= (unsigned)(b[i] & 1) << i;
	return bits;
}
#endif

/* First '"' or '\\' in [p, end) (or control byte, with ctl), or end. */
static const char *find_stop(const char *p, const char *end, int ctl)
{
#ifdef KR_JSON_SIMD
	while (end - p >= 16) {
		unsigned m = stop_mask(p, ctl);

		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	while ((size_t)(end - p) >= sizeof(size_t)) {
		size_t v;

		memcpy(&v, p, sizeof(v));
		if (HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) | (ctl ? HAS_LESS(v, 0x20) : 0))
			break;
		p += sizeof(size_t);
	}
	while (p < end && *p != '"' && *p != '\\' && (!ctl || (unsigned char)*p >= 0x20))
		p++;
	return p;
}

/* First '"' or '\\' in [p, end), or end. */
static const char *string_stop(const char *p, const char *end)
{
	return find_stop(p, end, 0);
}

/*
 * As string_stop, and also at a control byte (below 0x20), which JSON never
 * allows raw inside a string: in a line-delimited stream it means the string
 * was cut and the next line's bytes are being read as its contents.
 */
static const char *string_stop_ctl(const char *p, const char *end)
{
	return find_stop(p, end, 1);
}

/*
 * Advances f through buf[0..len) of the value being framed: an object or
 * array (state F_VALUE, depth 0 before its opening bracket) or a lone string
 * (state F_STRING, depth 0). Returns the bytes that belong to the value and
 * sets *done when its last byte was among them. In line mode (f->lines) a
 * newline outside strings or a control byte inside one stops it with
 * *done = -1 and f->error set; the bad byte is not counted.
 */
static size_t scan(struct kr_json_framer *f, const char *buf, size_t len, int *done)
{
	const char *p = buf, *end = buf + len;
	size_t depth = f->depth;
	unsigned char st = f->state;
	const unsigned char *stops = f->lines ? structural_lines : structural;

	*done = 0;
	while (p < end) {
		if (st == F_STRING) {
			p = f->lines ? string_stop_ctl(p, end) : string_stop(p, end);
			if (p == end)
				break;
			if ((unsigned char)*p < 0x20) {
				f->error = *p == '\n' ? "a newline inside a string: the event was cut short"
						      : "a control byte inside a string";
				*done = -1;
				break;
			}
			if (*p++ == '\\') {
				st = F_ESC;
			} else {
				st = F_VALUE;
				if (depth == 0) {
					*done = 1;
					break;
				}
			}
		} else if (st == F_ESC) {
			/* Whatever follows a backslash cannot end the string. */
			if (f->lines && (unsigned char)*p < 0x20) {
				f->error = *p == '\n' ? "a newline inside a string: the event was cut short"
						      : "a control byte inside a string";
				*done = -1;
				break;
			}
			p++;
			st = F_STRING;
		} else {
			char c;

			while (p < end && !stops[(unsigned char)*p])
				p++;
			if (p == end)
				break;
			c = *p;
			if (c == '\n') {
				/* Only in line mode: the apiserver ends each event with one. */
				f->error = "a newline inside an object: the event was cut short";
				*done = -1;
				break;
			}
			p++;
			if (c == '"') {
				st = F_STRING;
			} else if (c == '{' || c == '[') {
				depth++;
			} else if (depth <= 1) {
				depth = 0;
				*done = 1;
				break;
			} else {
				depth--;
			}
		}
	}
	f->depth = depth;
	f->state = st;
	return (size_t)(p - buf);
}

/* Starts framing a value in f at its first byte. */
static void begin(struct kr_json_framer *f, unsigned char state)
{
	f->len = 0;
	f->size = 0;
	f->skipped_bytes = 0;
	f->depth = 0;
	f->overflow = 0;
	f->state = state;
}

/* Appends src[0..n) of the current object to the output, as far as it fits. */
static void put(struct kr_json_framer *f, const char *src, size_t n)
{
	if (n == 0)
		return;
	if (!f->overflow) {
		size_t room = f->cap - f->len;

		if (n <= room) {
			memcpy(f->dst + f->len, src, n);
			f->len += n;
		} else {
			if (room)
				memcpy(f->dst + f->len, src, room);
			f->len = f->cap;
			f->overflow = 1;
		}
	}
	/* Saturates rather than wraps on a 32-bit target fed an endless object. */
	f->size = f->size > SIZE_MAX - n ? SIZE_MAX : f->size + n;
}

/* The outcome of a value that just closed. */
static int finish(struct kr_json_framer *f)
{
	if (f->overflow) {
		f->skipped_bytes = f->size;
		return KR_JSON_SKIPPED;
	}
	return KR_JSON_OBJECT;
}

static int framer_fail(struct kr_json_framer *f, int err, const char *why)
{
	f->state = F_FAILED;
	f->err = err;
	f->error = why;
	return err;
}

void kr_json_framer_init(struct kr_json_framer *f)
{
	memset(f, 0, sizeof(*f));
	f->state = F_BETWEEN;
}

void kr_json_framer_set_lines(struct kr_json_framer *f, int on)
{
	f->lines = on ? 1 : 0;
}

void kr_json_framer_set_output(struct kr_json_framer *f, char *dst, size_t cap)
{
	f->dst = dst;
	f->cap = dst ? cap : 0;
	if (f->state != F_BETWEEN && f->state != F_FAILED) {
		/* Half an object went to the old buffer: this one cannot be whole. */
		f->len = 0;
		f->overflow = 1;
	}
}

static int in_object(const struct kr_json_framer *f)
{
	return f->state == F_VALUE || f->state == F_STRING || f->state == F_ESC;
}

int kr_json_framer_busy(const struct kr_json_framer *f)
{
	return f->dst && !f->overflow && in_object(f);
}

int kr_json_framer_outgrown(const struct kr_json_framer *f)
{
	return f->dst && f->overflow && f->len && in_object(f);
}

int kr_json_framer_feed(struct kr_json_framer *f, const char *buf, size_t len,
			size_t *consumed)
{
	size_t p = 0, n;
	int done;

	*consumed = 0;
	if (f->state == F_FAILED)
		return f->err;
	if (len == 0)
		return 0;
	if (f->state == F_BETWEEN) {
		while (p < len && is_ws(buf[p]))
			p++;
		*consumed = p;
		if (p == len)
			return 0;
		if (buf[p] != '{')
			return framer_fail(f, KR_EPROTO, buf[p] == '}' || buf[p] == ']'
					   ? "closing bracket without an open object"
					   : "expected '{' between objects");
		begin(f, F_VALUE);
	}
	n = scan(f, buf + p, len - p, &done);
	if (done < 0) {
		/* Counted up to the bad byte, which is where the caller should look. */
		*consumed = p + n;
		return framer_fail(f, KR_EPROTO, f->error);
	}
	if (done && buf[p + n - 1] != '}') {
		*consumed = p + n - 1;
		return framer_fail(f, KR_EPROTO, "']' closes an object");
	}
	put(f, buf + p, n);
	*consumed = p + n;
	if (!done)
		return 0;
	f->state = F_BETWEEN;
	return finish(f);
}

/* First '\n' in [p, end), or end: 16 bytes a step where there is a vector unit. */
static const char *find_newline(const char *p, const char *end)
{
#if !defined(KR_JSON_NO_SIMD) && defined(__SSE2__)
	for (; end - p >= 16; p += 16) {
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
			_mm_loadu_si128((const __m128i *)(const void *)p), _mm_set1_epi8('\n')));

		if (m)
			return p + __builtin_ctz(m);
	}
#elif !defined(KR_JSON_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
	for (; end - p >= 16; p += 16)
		if (vmaxvq_u8(vceqq_u8(vld1q_u8((const uint8_t *)p), vdupq_n_u8('\n'))))
			break;
#endif
	p = memchr(p, '\n', (size_t)(end - p));
	return p ? p : end;
}

int kr_json_framer_line(struct kr_json_framer *f, const char *buf, size_t len, size_t *consumed)
{
	const char *p = buf, *end = buf + len, *q;

	*consumed = 0;
	if (!f->lines || f->state != F_BETWEEN || !f->dst)
		return 0;
	while (p < end && is_ws(*p))
		p++;
	if (p == end || *p != '{')
		return 0;
	q = find_newline(p + 1, end);
	if (q == end)
		return 0;
	while (q > p && is_ws(q[-1]))
		q--;
	if (q - p < 2 || q[-1] != '}' || (size_t)(q - p) > f->cap)
		return 0;
	memcpy(f->dst, p, (size_t)(q - p));
	f->len = (size_t)(q - p);
	*consumed = (size_t)(q - buf);
	return KR_JSON_OBJECT;
}

int kr_json_framer_eof(struct kr_json_framer *f)
{
	switch (f->state) {
	case F_BETWEEN:
		return 0;
	case F_FAILED:
		return f->err;
	case F_VALUE:
		return framer_fail(f, KR_EPROTO, "stream ended inside an object");
	default:
		return framer_fail(f, KR_EPROTO, "stream ended inside a string");
	}
}

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

/*
 * Unescapes raw[0..n) (string contents without quotes) into out[0..size),
 * NUL-terminated. out may be raw itself: the text only shrinks. Returns the
 * length, KR_ETOOBIG or KR_EPROTO.
 */
static int unescape_span(const char *raw, size_t n, char *out, size_t size)
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

/* --- list items framer --------------------------------------------------------------- */

enum items_state {
	L_START = 0,    /* before the list object */
	L_OPEN_KEY,     /* after '{': a key or '}' */
	L_KEY,          /* after ',': a key */
	L_KEY_STR,      /* inside a key */
	L_KEY_ESC,      /* after a backslash in a key */
	L_COLON,
	L_VALUE,        /* the first byte of a value */
	L_SKIP,         /* inside a value nobody asked for (the core scans it) */
	L_PRIM,         /* inside a number, true, false or null */
	L_AFTER,        /* after a value: ',' or '}' */
	L_ITEMS_FIRST,  /* after "items":[ */
	L_ITEMS_NEXT,   /* after an item: ',' or ']' */
	L_ITEMS_ELEM,   /* after ',' in items: an object */
	L_ITEM,         /* inside an item (the core copies it) */
	L_FIELD,        /* inside a metadata string we keep */
	L_FIELD_ESC,
	L_NUM,          /* inside remainingItemCount */
	L_DONE,         /* the list object closed */
	L_FAILED,
};

enum items_key {
	K_OTHER = 0,
	K_ITEMS,
	K_METADATA,
	K_RV,
	K_CONTINUE,
	K_REMAINING,
};

static int items_fail(struct kr_json_items *it, int err, const char *why)
{
	it->state = L_FAILED;
	it->err = err;
	it->error = why;
	return err;
}

static int key_is(const struct kr_json_items *it, const char *name)
{
	size_t n = strlen(name);

	return it->klen == n && memcmp(it->kbuf, name, n) == 0;
}

static unsigned char classify_key(const struct kr_json_items *it)
{
	if (it->level == 1) {
		if (key_is(it, "items"))
			return K_ITEMS;
		if (key_is(it, "metadata"))
			return K_METADATA;
	} else {
		if (key_is(it, "resourceVersion"))
			return K_RV;
		if (key_is(it, "continue"))
			return K_CONTINUE;
		if (key_is(it, "remainingItemCount"))
			return K_REMAINING;
	}
	return K_OTHER;
}

static void key_byte(struct kr_json_items *it, char c)
{
	/* A key longer than kbuf gets klen past it, so it matches nothing. */
	if (it->klen < sizeof(it->kbuf))
		it->kbuf[it->klen] = c;
	if (it->klen <= sizeof(it->kbuf))
		it->klen++;
}

static int prim_byte(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '-' || c == '+' || c == '.';
}

/* Dispatches on the first byte of a value; returns bytes used (0 or 1) or an error. */
static int items_value(struct kr_json_items *it, char c)
{
	int known_null = c == 'n';

	switch (it->key) {
	case K_ITEMS:
		if (c == '[') {
			it->state = L_ITEMS_FIRST;
			return 1;
		}
		if (!known_null)
			return items_fail(it, KR_EPROTO, "list items is not an array");
		break;
	case K_METADATA:
		if (c == '{') {
			it->level = 2;
			it->state = L_OPEN_KEY;
			return 1;
		}
		if (!known_null)
			return items_fail(it, KR_EPROTO, "list metadata is not an object");
		break;
	case K_RV:
	case K_CONTINUE:
		if (c == '"') {
			it->field = it->key == K_RV ? it->resource_version : it->continue_token;
			it->field_size = it->key == K_RV ? sizeof(it->resource_version)
							  : sizeof(it->continue_token);
			it->field_len = 0;
			it->state = L_FIELD;
			return 1;
		}
		if (!known_null)
			return items_fail(it, KR_EPROTO, "list metadata string is not a string");
		break;
	case K_REMAINING:
		if (is_digit(c)) {
			it->num = 0;
			it->state = L_NUM;
			return 0;
		}
		if (!known_null)
			return items_fail(it, KR_EPROTO, "remainingItemCount is not a count");
		break;
	default:
		if (c == '{' || c == '[') {
			begin(&it->f, F_VALUE);
			it->state = L_SKIP;
			return 0;
		}
		if (c == '"') {
			begin(&it->f, F_STRING);
			it->state = L_SKIP;
			return 1;
		}
		if (!prim_byte(c))
			return items_fail(it, KR_EPROTO, "expected a value in the list object");
		break;
	}
	it->state = L_PRIM;
	return 0;
}

/* A '}' closed the metadata or the list. */
static int items_close(struct kr_json_items *it)
{
	if (it->level == 2) {
		it->level = 1;
		it->state = L_AFTER;
		return 0;
	}
	it->state = L_DONE;
	return KR_JSON_END;
}

/*
 * Reads the bytes of a kept metadata string. Returns the bytes used; on an
 * error (it->state is then L_FAILED) they stop at the offending byte.
 */
static size_t items_field(struct kr_json_items *it, const char *buf, size_t len)
{
	size_t p = 0;

	while (p < len) {
		char c = buf[p];

		if (it->state == L_FIELD_ESC) {
			it->state = L_FIELD;
		} else if (c == '"') {
			it->field[it->field_len] = '\0';
			if (unescape_span(it->field, it->field_len, it->field, it->field_size) < 0) {
				it->field[0] = '\0';
				items_fail(it, KR_EPROTO, "bad escape in list metadata");
				return p;
			}
			it->state = L_AFTER;
			return p + 1;
		} else if (c == '\\') {
			it->state = L_FIELD_ESC;
		} else if ((unsigned char)c < 0x20) {
			items_fail(it, KR_EPROTO, "control character in list metadata");
			return p;
		}
		if (it->field_len + 1 >= it->field_size) {
			it->field[0] = '\0';
			items_fail(it, KR_ETOOBIG, it->field == it->continue_token
				   ? "continue token longer than KR_JSON_CONTINUE_MAX"
				   : "resourceVersion longer than KR_RV_MAX");
			return p;
		}
		it->field[it->field_len++] = c;
		p++;
	}
	return p;
}

void kr_json_items_init(struct kr_json_items *it)
{
	memset(it, 0, sizeof(*it));
	kr_json_framer_init(&it->f);
	it->remaining_item_count = -1;
	it->state = L_START;
	it->level = 1;
}

void kr_json_items_set_output(struct kr_json_items *it, char *dst, size_t cap)
{
	it->f.dst = dst;
	it->f.cap = dst ? cap : 0;
	if (it->state == L_ITEM) {
		/* Half an item went to the old buffer: this one cannot be whole. */
		it->f.len = 0;
		it->f.overflow = 1;
	}
}

int kr_json_items_busy(const struct kr_json_items *it)
{
	return it->f.dst && !it->f.overflow && it->state == L_ITEM;
}

int kr_json_items_outgrown(const struct kr_json_items *it)
{
	return it->f.dst && it->f.overflow && it->f.len && it->state == L_ITEM;
}

int kr_json_items_feed(struct kr_json_items *it, const char *buf, size_t len,
		       size_t *consumed)
{
	size_t p = 0;

	*consumed = 0;
	if (it->state == L_FAILED)
		return it->err;
	while (p < len) {
		char c = buf[p];
		size_t n;
		long r;
		int done;

		switch (it->state) {
		case L_START:
			if (c == '{') {
				it->state = L_OPEN_KEY;
			} else if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "list body is not an object");
			}
			p++;
			break;
		case L_OPEN_KEY:
		case L_KEY:
			if (c == '"') {
				it->klen = 0;
				it->state = L_KEY_STR;
			} else if (c == '}' && it->state == L_OPEN_KEY) {
				p++;
				if (items_close(it) == KR_JSON_END) {
					*consumed = p;
					return KR_JSON_END;
				}
				break;
			} else if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "expected a key in the list object");
			}
			p++;
			break;
		case L_KEY_STR:
			if (c == '"') {
				it->key = classify_key(it);
				it->state = L_COLON;
			} else if ((unsigned char)c < 0x20) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "control character in a key");
			} else {
				key_byte(it, c);
				if (c == '\\')
					it->state = L_KEY_ESC;
			}
			p++;
			break;
		case L_KEY_ESC:
			key_byte(it, c);
			it->state = L_KEY_STR;
			p++;
			break;
		case L_COLON:
			if (c == ':') {
				it->state = L_VALUE;
			} else if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "expected ':' in the list object");
			}
			p++;
			break;
		case L_VALUE:
			if (is_ws(c)) {
				p++;
				break;
			}
			r = items_value(it, c);
			if (r < 0) {
				*consumed = p;
				return (int)r;
			}
			p += (size_t)r;
			break;
		case L_SKIP:
			p += scan(&it->f, buf + p, len - p, &done);
			if (done) {
				it->f.state = F_BETWEEN;
				it->state = L_AFTER;
			}
			break;
		case L_PRIM:
			if (prim_byte(c))
				p++;
			else
				it->state = L_AFTER;
			break;
		case L_AFTER:
			if (c == ',') {
				it->state = L_KEY;
			} else if (c == '}') {
				p++;
				if (items_close(it) == KR_JSON_END) {
					*consumed = p;
					return KR_JSON_END;
				}
				break;
			} else if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "expected ',' or '}' in the list object");
			}
			p++;
			break;
		case L_ITEMS_FIRST:
		case L_ITEMS_NEXT:
		case L_ITEMS_ELEM:
			if (c == '{' && it->state != L_ITEMS_NEXT) {
				begin(&it->f, F_VALUE);
				it->state = L_ITEM;
				break;
			}
			if (c == ']' && it->state != L_ITEMS_ELEM) {
				it->state = L_AFTER;
			} else if (c == ',' && it->state == L_ITEMS_NEXT) {
				it->state = L_ITEMS_ELEM;
			} else if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, it->state == L_ITEMS_NEXT
						  ? "expected ',' or ']' in list items"
						  : "list item is not an object");
			}
			p++;
			break;
		case L_ITEM:
			n = scan(&it->f, buf + p, len - p, &done);
			if (done && buf[p + n - 1] != '}') {
				*consumed = p + n - 1;
				return items_fail(it, KR_EPROTO, "']' closes a list item");
			}
			put(&it->f, buf + p, n);
			p += n;
			if (done) {
				int res = finish(&it->f);

				it->f.state = F_BETWEEN;
				it->state = L_ITEMS_NEXT;
				it->len = it->f.len;
				it->skipped_bytes = it->f.skipped_bytes;
				*consumed = p;
				return res;
			}
			break;
		case L_FIELD:
		case L_FIELD_ESC:
			p += items_field(it, buf + p, len - p);
			if (it->state == L_FAILED) {
				*consumed = p;
				return it->err;
			}
			break;
		case L_NUM:
			if (is_digit(c)) {
				if (it->num > (LLONG_MAX - (c - '0')) / 10) {
					*consumed = p;
					return items_fail(it, KR_EPROTO, "remainingItemCount out of range");
				}
				it->num = it->num * 10 + (c - '0');
				p++;
			} else if (is_ws(c) || c == ',' || c == '}') {
				it->remaining_item_count = it->num;
				it->state = L_AFTER;
			} else {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "remainingItemCount is not a count");
			}
			break;
		default: /* L_DONE */
			if (!is_ws(c)) {
				*consumed = p;
				return items_fail(it, KR_EPROTO, "data after the list object");
			}
			p++;
			break;
		}
	}
	*consumed = p;
	return 0;
}

int kr_json_items_eof(struct kr_json_items *it)
{
	if (it->state == L_DONE)
		return 0;
	if (it->state == L_FAILED)
		return it->err;
	return items_fail(it, KR_EPROTO, "list body ended before the list object closed");
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
 * Checks what jsmn lets through even in strict mode: missing or doubled
 * commas and colons, keys without values, values in key position, bad
 * literals and numbers, control bytes in strings, text after the object.
 * Walks the tokens once; each closing bracket is checked once, when the token
 * after it (or the end) is reached. Returns nonzero if the text is valid.
 */
static int validate(const char *js, size_t len, const kr_json_tok *t, int n)
{
	int i, k, pos;

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
				for (k = i - 1; t[k].parent != p;) {
					k = t[k].parent;
					if (k < 0)
						return 0;
					if (is_container(&t[k])) {
						if (!only_ws(js, pos, t[k].end - 1))
							return 0;
						pos = t[k].end;
					}
				}
				if (!sep_gap(js, pos, raw_start(c), ','))
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
	pos = raw_end(&t[n - 1]);
	for (k = n - 1; k != 0;) {
		k = t[k].parent;
		if (k < 0)
			return 0;
		if (is_container(&t[k])) {
			if (!only_ws(js, pos, t[k].end - 1))
				return 0;
			pos = t[k].end;
		}
	}
	return only_ws(js, pos, (int)len);
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
		r = unescape_span(json + t->start, (size_t)(t->end - t->start), out, size);
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
				if (unescape_span(buf + p + 1, n, keys[depth - 1], PREFIX_KEY) < 0)
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
					    unescape_span(buf + p + 1, n, out[i], KR_JSON_PREFIX_VALUE) > 0) {
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
