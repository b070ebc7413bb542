/*
 * The JSON framers (json.h): the object framer that cuts a watch stream into
 * whole objects, and the list items framer that yields a LIST body's items
 * and reads its metadata. Byte for byte, resumable, copying each object once.
 * The tokenizers and the field lookup of one object in memory are json.c's.
 */
#include "json.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "fmt.h"
#include "json_scan.h"
#include "kreflect.h"

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
			if (kr_json_unescape_span(it->field, it->field_len, it->field, it->field_size) < 0) {
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
