#include "http_server.h"

#include <string.h>

#include "codec.h"
#include "kreflect.h"

enum state {
	S_METHOD,
	S_TARGET,
	S_VERSION,
	S_REQ_LF,
	S_LINE_START,                  /* a header name, or the blank line */
	S_NAME,
	S_VALUE_WS,
	S_VALUE,
	S_LINE_LF,
	S_END_LF,
	S_DONE,
	S_FAILED,
};

enum field { F_NONE, F_AUTH, F_CONNECTION, F_LENGTH, F_TE };

void kr_http_server_init(struct kr_http_server_req *r)
{
	memset(r, 0, sizeof(*r));
	r->state = S_METHOD;
	r->content_length = -1;
}

static int fail(struct kr_http_server_req *r, int status, const char *why)
{
	r->state = S_FAILED;
	r->status = status;
	r->why = why;
	return KR_EPROTO;
}

/* RFC 9110 tchar: the characters of a token (method, header name). */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive equality of s[0..n) with the lowercase literal lit. */
static int same_ci(const char *s, size_t n, const char *lit)
{
	size_t i;

	if (strlen(lit) != n)
		return 0;
	for (i = 0; i < n; i++)
		if (lower(s[i]) != lit[i])
			return 0;
	return 1;
}

/* Contains the comma-separated token lit (lowercase), case-insensitively. */
static int has_token(const char *s, size_t n, const char *lit)
{
	size_t i = 0;

	while (i < n) {
		size_t a, b;

		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
			i++;
		a = i;
		while (i < n && s[i] != ',')
			i++;
		b = i;
		while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'))
			b--;
		if (b > a && same_ci(s + a, b - a, lit))
			return 1;
	}
	return 0;
}

static int end_method(struct kr_http_server_req *r)
{
	r->method_name[r->mlen] = '\0';
	if (strcmp(r->method_name, "GET") == 0)
		r->method = KR_HM_GET;
	else if (strcmp(r->method_name, "HEAD") == 0)
		r->method = KR_HM_HEAD;
	else
		r->method = KR_HM_OTHER;
	return 0;
}

/* A header line is complete: keep what routing needs. */
static int end_header(struct kr_http_server_req *r)
{
	const char *v = r->value;
	size_t n = r->vlen;

	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	switch (r->field) {
	case F_AUTH:
		if (r->has_auth)
			return fail(r, 400, "more than one Authorization header");
		memcpy(r->auth, v, n);
		r->auth[n] = '\0';
		r->has_auth = 1;
		break;
	case F_CONNECTION:
		if (has_token(v, n, "close"))
			r->conn_close = 1;
		if (has_token(v, n, "keep-alive"))
			r->conn_keep = 1;
		break;
	case F_LENGTH: {
		long cl = 0;
		size_t i;

		if (n == 0 || n > 12)
			return fail(r, 400, "bad Content-Length");
		for (i = 0; i < n; i++) {
			if (v[i] < '0' || v[i] > '9')
				return fail(r, 400, "bad Content-Length");
			cl = cl * 10 + (v[i] - '0');
		}
		if (r->content_length >= 0 && r->content_length != cl)
			return fail(r, 400, "conflicting Content-Length headers");
		r->content_length = cl;
		if (cl > 0)
			r->has_body = 1;
		break;
	}
	case F_TE:
		r->has_body = 1;
		break;
	default:
		break;
	}
	return 0;
}

static void choose_field(struct kr_http_server_req *r)
{
	if (same_ci(r->name, r->nlen, "authorization"))
		r->field = F_AUTH;
	else if (same_ci(r->name, r->nlen, "connection"))
		r->field = F_CONNECTION;
	else if (same_ci(r->name, r->nlen, "content-length"))
		r->field = F_LENGTH;
	else if (same_ci(r->name, r->nlen, "transfer-encoding"))
		r->field = F_TE;
	else
		r->field = F_NONE;
}

static void finish(struct kr_http_server_req *r)
{
	r->state = S_DONE;
	if (r->minor >= 1)
		r->keep_alive = !r->conn_close;
	else
		r->keep_alive = r->conn_keep && !r->conn_close;
	if (r->has_body)
		r->keep_alive = 0;     /* its body is never read: nothing after it can be framed */
}

int kr_http_server_feed(struct kr_http_server_req *r, const char *buf, size_t len,
			size_t *consumed)
{
	size_t i = 0;

	*consumed = 0;
	if (r->state == S_FAILED)
		return KR_EPROTO;
	if (r->state == S_DONE)
		return 1;
	while (i < len) {
		unsigned char c = (unsigned char)buf[i];

		if (++r->head > KR_SERVE_IN_BYTES) {
			*consumed = i;
			return fail(r, 431, "request head too large");
		}
		i++;
		switch (r->state) {
		case S_METHOD:
			if (c == ' ' && r->mlen > 0) {
				end_method(r);
				r->state = S_TARGET;
			} else if (c == '\r' || c == '\n') {
				/* A few blank-line bytes before a request are allowed (RFC 9112 2.2). */
				if (r->mlen > 0 || ++r->vlen > 8) {
					*consumed = i;
					return fail(r, 400, "no request line");
				}
			} else if (!is_tchar(c)) {
				*consumed = i;
				return fail(r, 400, "bad method");
			} else if (r->mlen + 1 >= sizeof(r->method_name)) {
				*consumed = i;
				return fail(r, 501, "method too long");
			} else {
				r->method_name[r->mlen++] = (char)c;
			}
			break;
		case S_TARGET:
			if (c == ' ' && r->tlen > 0) {
				r->target[r->tlen] = '\0';
				if (r->target[0] != '/') {
					*consumed = i;
					return fail(r, 400, "request target is not a path");
				}
				r->state = S_VERSION;
				r->vlen = 0;
			} else if (c <= 0x20 || c >= 0x7f) {
				*consumed = i;
				return fail(r, 400, "bad character in the request target");
			} else if (r->tlen + 1 >= sizeof(r->target)) {
				*consumed = i;
				return fail(r, 414, "request target too long");
			} else {
				r->target[r->tlen++] = (char)c;
			}
			break;
		case S_VERSION:
			if (c == '\r' || c == '\n') {
				if (r->vlen != 8 || memcmp(r->value, "HTTP/", 5) != 0 ||
				    r->value[5] < '0' || r->value[5] > '9' || r->value[6] != '.' ||
				    r->value[7] < '0' || r->value[7] > '9') {
					*consumed = i;
					return fail(r, 400, "bad HTTP version");
				}
				if (r->value[5] != '1') {
					*consumed = i;
					return fail(r, 505, "HTTP version not supported");
				}
				r->minor = r->value[7] - '0';
				r->vlen = 0;
				r->state = c == '\r' ? S_REQ_LF : S_LINE_START;
			} else if (r->vlen >= 8) {
				*consumed = i;
				return fail(r, 400, "bad HTTP version");
			} else {
				r->value[r->vlen++] = (char)c;
			}
			break;
		case S_REQ_LF:
		case S_LINE_LF:
			if (c != '\n') {
				*consumed = i;
				return fail(r, 400, "CR without LF");
			}
			r->state = S_LINE_START;
			break;
		case S_LINE_START:
			if (c == '\r') {
				r->state = S_END_LF;
				break;
			}
			if (c == '\n') {
				finish(r);
				*consumed = i;
				return 1;
			}
			if (c == ' ' || c == '\t') {
				*consumed = i;
				return fail(r, 400, "folded header line");
			}
			if (++r->nheaders > KR_HTTP_SERVER_MAX_HEADERS) {
				*consumed = i;
				return fail(r, 431, "too many header lines");
			}
			r->nlen = 0;
			r->state = S_NAME;
			/* fall through */
		case S_NAME:
			if (c == ':') {
				if (r->nlen == 0) {
					*consumed = i;
					return fail(r, 400, "empty header name");
				}
				choose_field(r);
				r->vlen = 0;
				r->state = S_VALUE_WS;
			} else if (!is_tchar(c)) {
				*consumed = i;
				return fail(r, 400, "bad header name");
			} else if (r->nlen >= sizeof(r->name)) {
				*consumed = i;
				return fail(r, 431, "header name too long");
			} else {
				r->name[r->nlen++] = (char)c;
			}
			break;
		case S_VALUE_WS:
			if (c == ' ' || c == '\t')
				break;
			r->state = S_VALUE;
			/* fall through */
		case S_VALUE:
			if (c == '\r' || c == '\n') {
				if (end_header(r) < 0) {
					*consumed = i;
					return KR_EPROTO;
				}
				r->state = c == '\r' ? S_LINE_LF : S_LINE_START;
			} else if ((c < 0x20 && c != '\t') || c == 0x7f) {
				*consumed = i;
				return fail(r, 400, "control character in a header value");
			} else if (r->field != F_NONE) {
				if (r->vlen + 1 >= sizeof(r->value)) {
					*consumed = i;
					return fail(r, 431, "header value too long");
				}
				r->value[r->vlen++] = (char)c;
			}
			break;
		case S_END_LF:
			if (c != '\n') {
				*consumed = i;
				return fail(r, 400, "CR without LF");
			}
			finish(r);
			*consumed = i;
			return 1;
		default:
			*consumed = i;
			return fail(r, 400, "bad state");
		}
	}
	*consumed = i;
	return 0;
}

/* Decodes s[0..n) into out; plus: '+' means space. Returns length or KR_E. */
static int decode(const char *s, size_t n, int plus, int no_slash, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return KR_EINVAL;
			h = kr_hex_value((unsigned char)s[i + 1]);
			l = kr_hex_value((unsigned char)s[i + 2]);
			if (h < 0 || l < 0)
				return KR_EINVAL;
			c = (char)(h * 16 + l);
			if (c == '\0' || (no_slash && c == '/'))
				return KR_EINVAL;
			i += 2;
		} else if (plus && c == '+') {
			c = ' ';
		}
		if (o + 1 >= cap)
			return KR_ETOOBIG;
		out[o++] = c;
	}
	if (cap == 0)
		return KR_ETOOBIG;
	out[o] = '\0';
	return (int)o;
}

int kr_http_server_param(const char *target, const char *name, char *out, size_t cap)
{
	const char *q = strchr(target, '?');
	size_t nl = strlen(name);

	if (!q)
		return KR_ENOENT;
	q++;
	while (*q) {
		const char *end = strchr(q, '&'), *eq;
		size_t len = end ? (size_t)(end - q) : strlen(q);
		char key[64];
		int kl;

		eq = memchr(q, '=', len);
		kl = decode(q, eq ? (size_t)(eq - q) : len, 1, 0, key, sizeof(key));
		if (kl == (int)nl && memcmp(key, name, nl) == 0) {
			if (!eq) {
				if (cap == 0)
					return KR_ETOOBIG;
				out[0] = '\0';
				return 0;
			}
			return decode(eq + 1, len - (size_t)(eq + 1 - q), 1, 0, out, cap);
		}
		if (!end)
			break;
		q = end + 1;
	}
	return KR_ENOENT;
}

int kr_http_server_path(const char *target, char *out, size_t cap)
{
	const char *q = strchr(target, '?');

	return decode(target, q ? (size_t)(q - target) : strlen(target), 0, 1, out, cap);
}

int kr_http_server_same(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;
	size_t i;

	for (i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}
