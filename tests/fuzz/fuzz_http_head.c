/*
 * Fuzzes the HTTP response parser with whole responses (heads, bodies, 1xx,
 * keep-alive sequences) and the request writer's encoding.
 *
 * The input is parsed three ways: whole, one byte at a time, and in pieces
 * whose sizes come from a hash of the input. After DONE the parser is re-inited
 * and goes on with the next response, as on a kept-alive connection. The three
 * transcripts (heads, body bytes, where each response ended, the error, the
 * EOF verdict) must be identical, and every call must keep the contract:
 * consumed <= len, body spans inside the consumed bytes, a failed parser
 * stays failed. Any violation abort()s.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FNV_OFFSET 1469598103934665603ULL

struct transcript {
	uint64_t hash;                 /* of heads, body bytes, response ends, the error */
	size_t body;                   /* body bytes handed out */
	int responses;                 /* completed */
	int rc;                        /* 0, or the error that stopped it */
	int eof;                       /* kr_http_resp_eof at the end */
};

static void mix(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;

	for (i = 0; i < n; i++)
		*h = (*h ^ s[i]) * 1099511628211ULL;
}

static uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Piece sizes: mostly tiny (framing edge cases), sometimes large. */
static size_t piece(uint64_t *s)
{
	uint64_t v = next_random(s);

	switch (v & 3) {
	case 0: return 1 + (v >> 8) % 3;
	case 1: return 1 + (v >> 8) % 16;
	case 2: return 1 + (v >> 8) % 256;
	default: return (v >> 8) % 4096;  /* 0 too: empty feeds are legal */
	}
}

static void mix_head(uint64_t *h, const struct kr_http_resp *r)
{
	long delay;

	mix(h, "H", 1);
	mix(h, &r->status, sizeof(r->status));
	mix(h, &r->minor_version, sizeof(r->minor_version));
	mix(h, &r->content_length, sizeof(r->content_length));
	mix(h, &r->chunked, sizeof(r->chunked));
	mix(h, &r->keep_alive, sizeof(r->keep_alive));
	mix(h, &r->retry_after_seconds, sizeof(r->retry_after_seconds));
	mix(h, &r->retry_after_epoch, sizeof(r->retry_after_epoch));
	mix(h, r->content_type, strlen(r->content_type));
	delay = kr_http_retry_after_delay(r, 784111777);
	if (delay < -1 || (delay == -1 && (r->retry_after_seconds != -1 || r->retry_after_epoch)))
		abort();
	mix(h, &delay, sizeof(delay));
}

/* mode 0: whole; 1: byte by byte; 2: pieces from seed. */
static void run(const char *in, size_t len, int mode, uint64_t seed, struct transcript *t)
{
	static struct kr_http_resp r;
	size_t pos = 0;
	int heads = 0;

	memset(t, 0, sizeof(*t));
	t->hash = FNV_OFFSET;
	kr_http_resp_init(&r);
	while (pos < len) {
		size_t want = mode == 0 ? len : mode == 1 ? 1 : piece(&seed);
		size_t end = want > len - pos ? len : pos + want;
		size_t off = pos;

		for (;;) {
			size_t c = (size_t)-1, bl = (size_t)-1, avail = end - off;
			const char *b = "unset";     /* the parser must overwrite it */
			int rc = kr_http_resp_feed(&r, in + off, avail, &c, &b, &bl);

			if (c > avail)
				abort();
			if (rc == KR_HTTP_BODY) {
				if (heads != 1 || bl == 0 || b < in + off || b + bl > in + off + c)
					abort();
				mix(&t->hash, b, bl);
				t->body += bl;
				if (t->body > len)
					abort();
			} else if (b != NULL || bl != 0) {
				abort();
			}
			if (rc > 0 && rc != KR_HTTP_DONE && c == 0)
				abort();             /* HEAD and BODY always use bytes */
			off += c;
			if (rc == KR_HTTP_HEAD) {
				if (heads++ != 0 || r.status < 200 || r.status > 599 || r.error)
					abort();
				if (r.content_type[sizeof(r.content_type) - 1] != '\0')
					abort();
				mix_head(&t->hash, &r);
			} else if (rc == KR_HTTP_DONE) {
				size_t at = off;

				if (heads != 1)
					abort();
				mix(&t->hash, "D", 1);
				mix(&t->hash, &at, sizeof(at));
				t->responses++;
				heads = 0;
				kr_http_resp_init(&r);
			} else if (rc == 0) {
				if (off != end)
					abort();
				break;
			} else if (rc < 0) {
				if ((rc != KR_EPROTO && rc != KR_ETOOBIG) || r.error == NULL)
					abort();
				/* A failed parser stays failed and takes nothing more. */
				if (kr_http_resp_feed(&r, in + off, end - off, &c, &b, &bl) != rc ||
				    c != 0 || b != NULL || bl != 0)
					abort();
				mix(&t->hash, r.error, strlen(r.error));
				t->rc = rc;
				t->eof = kr_http_resp_eof(&r);
				if (t->eof != rc)
					abort();
				return;
			}
		}
		pos = end;
	}
	t->eof = kr_http_resp_eof(&r);
	if (t->eof != KR_HTTP_DONE && t->eof != KR_EPROTO && t->eof != KR_ECLOSED)
		abort();
	if (t->eof != KR_HTTP_DONE && r.error == NULL)
		abort();
}

static void same(const struct transcript *a, const struct transcript *b)
{
	if (a->hash != b->hash || a->body != b->body || a->responses != b->responses ||
	    a->rc != b->rc || a->eof != b->eof)
		abort();
}

/* RFC 3986 unreserved, the only bytes an encoded value may show unescaped. */
static int unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static int hexv(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;                     /* lower case is not what we write */
}

/*
 * The request writer: the input (to its first NUL, at most 1 KiB) as a query
 * value must come back byte for byte after percent-decoding; as a token it is
 * either refused or written on one line; one byte less room is KR_ETOOBIG.
 */
static void check_writer(const uint8_t *data, size_t size)
{
	static char value[1025], out[8192], again[8192];
	static const char key[] = "labelSelector=";
	struct kr_http_param p = { "labelSelector", value };
	struct kr_http_header hdr;
	size_t vn = 0, i;
	int n, crlf = 0;

	while (vn < size && vn < sizeof(value) - 1 && data[vn] != 0) {
		value[vn] = (char)data[vn];
		vn++;
	}
	value[vn] = '\0';

	n = kr_http_write_request(out, sizeof(out), "GET", "h:6443", "/api/v1/pods", &p,
				  vn ? 1 : 0, NULL, "x86_64");
	if (n <= 0 || (size_t)n > sizeof(out))
		abort();
	if (vn) {
		const char *q = memchr(out, '=', (size_t)n), *end = memchr(out, ' ', (size_t)n);
		size_t j;

		end = end ? memchr(end + 1, ' ', (size_t)n - (size_t)(end + 1 - out)) : NULL;
		if (!q || !end || memcmp(q - (sizeof(key) - 2), key, sizeof(key) - 1) != 0)
			abort();
		for (i = (size_t)(q + 1 - out), j = 0; i < (size_t)(end - out); j++) {
			unsigned char c = (unsigned char)out[i];

			if (c == '%') {
				int hi = i + 2 < (size_t)n ? hexv((unsigned char)out[i + 1]) : -1;
				int lo = hi >= 0 ? hexv((unsigned char)out[i + 2]) : -1;

				if (lo < 0 || unreserved((unsigned char)(hi << 4 | lo)))
					abort();     /* escapes only what must be escaped */
				c = (unsigned char)(hi << 4 | lo);
				i += 3;
			} else if (!unreserved(c)) {
				abort();
			} else {
				i++;
			}
			if (j >= vn || (unsigned char)value[j] != c)
				abort();
		}
		if (j != vn)
			abort();
	}
	if (kr_http_write_request(again, (size_t)n - 1, "GET", "h:6443", "/api/v1/pods", &p,
				  vn ? 1 : 0, NULL, "x86_64") != KR_ETOOBIG)
		abort();
	if (kr_http_write_request(again, (size_t)n, "GET", "h:6443", "/api/v1/pods", &p,
				  vn ? 1 : 0, NULL, "x86_64") != n || memcmp(again, out, (size_t)n) != 0)
		abort();

	/*
	 * As a bearer token, a Host and an extra header's value: refused, or
	 * exactly seven CRLFs and no other CR or LF.
	 */
	hdr.name = "X-Fuzz";
	hdr.value = value;
	n = kr_http_write_request_ex(out, sizeof(out), "GET", vn ? value : "h", "/", NULL, 0, value,
				     "x86_64", &hdr, 1);
	if (n == KR_EINVAL)
		return;
	if (n <= 0)
		abort();
	for (i = 0; i < (size_t)n; i++) {
		if (out[i] == '\r') {
			if (i + 1 >= (size_t)n || out[i + 1] != '\n')
				abort();
			crlf++;
			i++;
		} else if (out[i] == '\n') {
			abort();
		}
	}
	if (crlf != (vn ? 7 : 6) || memcmp(out + n - 4, "\r\n\r\n", 4) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct transcript whole, bytes, pieces;
	uint64_t seed = FNV_OFFSET;

	mix(&seed, data, size);
	seed |= 1;
	run((const char *)data, size, 0, 0, &whole);
	run((const char *)data, size, 1, 0, &bytes);
	run((const char *)data, size, 2, seed, &pieces);
	same(&whole, &bytes);
	same(&whole, &pieces);
	check_writer(data, size);
	return 0;
}
