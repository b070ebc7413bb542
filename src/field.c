/*
 * kr_object_field (kreflect.h): one value out of an object's JSON by a
 * dotted path, without a token array, so a firmware reads its settings with
 * no JSON parser and no memory of its own. It walks the text once, skipping
 * the values it does not want; nesting is counted, not recursed, and every
 * step is bounded by the object's length, so hostile bytes end in
 * KR_EINVAL, never outside the buffer.
 */
#include <string.h>

#include "json.h"
#include "kreflect.h"

/* Longest path segment (a data key is at most 253 bytes). */
#define SEGMENT_MAX 320

static const char *skip_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* p at '"': the byte after the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\') {
			if (++p == e)
				return NULL;
		} else if (*p == '"') {
			return p + 1;
		} else if ((unsigned char)*p < 0x20) {
			return NULL;
		}
	}
	return NULL;
}

/* p at a value: the byte after it, or NULL if it is not one. */
static const char *skip_value(const char *p, const char *e)
{
	long depth = 0;

	if (p >= e)
		return NULL;
	if (*p == '"')
		return skip_string(p, e);
	if (*p != '{' && *p != '[') {
		const char *s = p;

		while (p < e && !strchr(",}] \t\r\n", *p) && *p)
			p++;
		return p > s ? p : NULL;
	}
	while (p < e) {
		if (*p == '"') {
			p = skip_string(p, e);
			if (!p)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if (*p == '}' || *p == ']')
			if (--depth == 0)
				return p + 1;
		p++;
	}
	return NULL;
}

/* Unescapes the string at p (at '"', ending before q's quote) into out. */
static int unescape(const char *p, const char *q, char *out, size_t size)
{
	kr_json_tok t;

	memset(&t, 0, sizeof(t));
	t.type = KR_JSON_T_STRING;
	t.start = 1;
	t.end = (int)(q - 1 - p);
	return kr_json_unescape(p, &t, out, size);
}

/*
 * The next segment of path (after *pp) into seg, "\." read as a dot.
 * Returns its length, or -1 if it is empty or too long.
 */
static int next_segment(const char **pp, char *seg)
{
	const char *p = *pp;
	int n = 0;

	while (*p && *p != '.') {
		if (*p == '\\' && p[1] == '.')
			p++;
		if (n == SEGMENT_MAX - 1)
			return -1;
		seg[n++] = *p++;
	}
	seg[n] = '\0';
	if (*p == '.')
		p++;
	*pp = p;
	return n > 0 ? n : -1;
}

/* In the object at p, the value of key seg: its first byte, NULL if absent, or *bad set. */
static const char *member(const char *p, const char *e, const char *seg, int seglen, int *bad)
{
	char key[SEGMENT_MAX];

	p = skip_ws(p + 1, e);
	if (p < e && *p == '}')
		return NULL;
	while (p < e) {
		const char *k = p, *ke;
		int klen;

		if (*p != '"' || !(ke = skip_string(p, e)))
			break;
		klen = unescape(k, ke, key, sizeof(key));
		p = skip_ws(ke, e);
		if (p >= e || *p != ':')
			break;
		p = skip_ws(p + 1, e);
		if (klen == seglen && memcmp(key, seg, (size_t)seglen) == 0)
			return p;
		if (!(p = skip_value(p, e)))
			break;
		p = skip_ws(p, e);
		if (p < e && *p == ',') {
			p = skip_ws(p + 1, e);
			continue;
		}
		if (p < e && *p == '}')
			return NULL;
		break;
	}
	*bad = 1;
	return NULL;
}

int kr_object_field(const char *obj, size_t objlen, const char *path, char *buf, size_t size)
{
	const char *p, *e, *v;
	char seg[SEGMENT_MAX];
	int n, bad = 0;

	if (!obj || !path || !buf || size == 0 || objlen > 0x7fffffff)
		return KR_EINVAL;
	buf[0] = '\0';
	e = obj + objlen;
	p = skip_ws(obj, e);
	if (p >= e || *p != '{')
		return KR_EINVAL;
	while (*path) {
		if (p >= e)
			return KR_EINVAL;      /* the object ends where a value should be */
		if (*p != '{')
			return KR_ENOENT;      /* a path through a string, number or array */
		if ((n = next_segment(&path, seg)) < 0)
			return KR_EINVAL;
		p = member(p, e, seg, n, &bad);
		if (!p)
			return bad ? KR_EINVAL : KR_ENOENT;
	}
	if (p >= e || *p == '{' || *p == '[' || *p == 'n')
		return p < e ? KR_ENOENT : KR_EINVAL;
	if (!(v = skip_value(p, e)))
		return KR_EINVAL;
	if (*p == '"') {
		n = unescape(p, v, buf, size);
		if (n == KR_ETOOBIG)
			return KR_ENOSPC;
		return n < 0 ? KR_EINVAL : n;
	}
	if ((size_t)(v - p) >= size)
		return KR_ENOSPC;
	memcpy(buf, p, (size_t)(v - p));
	buf[v - p] = '\0';
	return (int)(v - p);
}
