/*
 * Fuzzes the chunked decoder: the input is the body of a response whose head
 * says "Transfer-Encoding: chunked".
 *
 * It is decoded three ways by the streaming parser (whole, one byte at a time,
 * pieces whose sizes come from a hash of the input) and once by a plain
 * reference decoder below that sees the whole input at once. All four must
 * agree on the decoded bytes, on where the body ended, on the error, and on
 * the EOF verdict. abort() on any disagreement or broken contract.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FNV_OFFSET 1469598103934665603ULL

static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			   "Transfer-Encoding: chunked\r\n\r\n";

struct result {
	uint64_t hash;                 /* of the decoded bytes */
	size_t body;                   /* decoded bytes */
	int rc;                        /* KR_HTTP_DONE, 0 (wants more) or the error */
	size_t used;                   /* input bytes through DONE */
	int eof;
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

static size_t piece(uint64_t *s)
{
	uint64_t v = next_random(s);

	switch (v & 3) {
	case 0: return 1 + (v >> 8) % 3;
	case 1: return 1 + (v >> 8) % 16;
	case 2: return 1 + (v >> 8) % 256;
	default: return (v >> 8) % 4096;
	}
}

/* --- the reference: the chunked grammar read straight off a complete buffer ------------- */

/*
 * The line at d[*pos..n): 1 with its content in [*pos, *pos + *len) and *pos
 * past its CRLF, 0 if no LF yet, or an error. Same bounds as the parser: at
 * most KR_HTTP_LINE_MAX bytes before CRLF, no control bytes but tab.
 */
static int ref_line(const uint8_t *d, size_t n, size_t *pos, size_t *start, size_t *len)
{
	const uint8_t *lf = memchr(d + *pos, '\n', n - *pos);
	size_t before = lf ? (size_t)(lf - (d + *pos)) : n - *pos, i;

	if (before > KR_HTTP_LINE_MAX + 1)
		return KR_ETOOBIG;
	if (!lf)
		return 0;
	if (before == 0 || d[*pos + before - 1] != '\r')
		return KR_EPROTO;
	for (i = 0; i + 1 < before; i++) {
		uint8_t c = d[*pos + i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return KR_EPROTO;
	}
	*start = *pos;
	*len = before - 1;
	*pos += before + 1;
	return 1;
}

static int ref_hex(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void reference(const uint8_t *d, size_t n, struct result *res)
{
	size_t pos = 0, s, l, k, digits;
	int rc, trailers;
	uint64_t size;

	memset(res, 0, sizeof(*res));
	res->hash = FNV_OFFSET;
	for (;;) {
		rc = ref_line(d, n, &pos, &s, &l);
		if (rc <= 0)
			goto out;
		size = 0;
		for (digits = 0; digits < l && ref_hex(d[s + digits]) >= 0; digits++) {
			if (digits == 16) {
				rc = KR_ETOOBIG;
				goto out;
			}
			size = size * 16 + (uint64_t)ref_hex(d[s + digits]);
			if (size >= (1ULL << 62)) {
				rc = KR_ETOOBIG;
				goto out;
			}
		}
		if (digits == 0) {
			rc = KR_EPROTO;
			goto out;
		}
		k = digits;
		if (k < l) {
			while (k < l && (d[s + k] == ' ' || d[s + k] == '\t'))
				k++;
			if (k == l || d[s + k] != ';') {
				rc = KR_EPROTO;
				goto out;
			}
		}
		if (size == 0)
			break;
		if (n - pos <= size) {
			mix(&res->hash, d + pos, n - pos);
			res->body += n - pos;
			rc = 0;
			goto out;
		}
		mix(&res->hash, d + pos, (size_t)size);
		res->body += (size_t)size;
		pos += (size_t)size;
		if (pos < n && d[pos] != '\r') {
			rc = KR_EPROTO;
			goto out;
		}
		if (pos + 1 < n && d[pos + 1] != '\n') {
			rc = KR_EPROTO;
			goto out;
		}
		if (pos + 2 > n) {
			rc = 0;
			goto out;
		}
		pos += 2;
	}
	for (trailers = 0;; trailers++) {
		rc = ref_line(d, n, &pos, &s, &l);
		if (rc <= 0)
			goto out;
		if (l == 0) {
			res->rc = KR_HTTP_DONE;
			res->used = pos;
			res->eof = KR_HTTP_DONE;
			return;
		}
		if (trailers == KR_HTTP_MAX_HEADERS) {
			rc = KR_ETOOBIG;
			goto out;
		}
	}
out:
	res->rc = rc;
	res->eof = rc == 0 ? KR_EPROTO : rc;
}

/* --- the parser, fed in pieces ------------------------------------------------------------ */

static void run(const uint8_t *in, size_t len, int mode, uint64_t seed, struct result *res)
{
	static struct kr_http_resp r;
	size_t c, bl, pos = 0;
	const char *b;

	memset(res, 0, sizeof(*res));
	res->hash = FNV_OFFSET;
	kr_http_resp_init(&r);
	if (kr_http_resp_feed(&r, head, sizeof(head) - 1, &c, &b, &bl) != KR_HTTP_HEAD ||
	    c != sizeof(head) - 1 || !r.chunked)
		abort();
	for (;;) {
		size_t want = mode == 0 ? len : mode == 1 ? 1 : piece(&seed);
		size_t end = want > len - pos ? len : pos + want;
		size_t off = pos;

		for (;;) {
			size_t avail = end - off;
			int rc = kr_http_resp_feed(&r, (const char *)in + off, avail, &c, &b, &bl);

			if (c > avail)
				abort();
			if (rc == KR_HTTP_BODY) {
				if (bl == 0 || (const uint8_t *)b < in + off ||
				    (const uint8_t *)b + bl > in + off + c)
					abort();
				/* Chunk data goes out in one span: only framing is ever held back. */
				if ((const uint8_t *)b + bl != in + off + c)
					abort();
				mix(&res->hash, b, bl);
				res->body += bl;
				if (res->body > len)
					abort();
			} else if (b != NULL || bl != 0) {
				abort();
			}
			off += c;
			if (rc == 0) {
				if (off != end)
					abort();
				break;
			}
			if (rc == KR_HTTP_DONE || rc < 0) {
				if (rc < 0 && ((rc != KR_EPROTO && rc != KR_ETOOBIG) || r.error == NULL))
					abort();
				res->rc = rc;
				res->used = rc == KR_HTTP_DONE ? off : 0;
				res->eof = kr_http_resp_eof(&r);
				if (res->eof != (rc < 0 ? rc : KR_HTTP_DONE))
					abort();
				return;
			}
			if (rc != KR_HTTP_BODY)
				abort();
		}
		if (end == len)
			break;
		pos = end;
	}
	res->rc = 0;
	res->eof = kr_http_resp_eof(&r);
	if (res->eof != KR_EPROTO)
		abort();
}

static void same(const struct result *a, const struct result *b)
{
	if (a->hash != b->hash || a->body != b->body || a->rc != b->rc || a->used != b->used ||
	    a->eof != b->eof)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct result ref, whole, bytes, pieces;
	uint64_t seed = FNV_OFFSET;

	mix(&seed, data, size);
	seed |= 1;
	reference(data, size, &ref);
	run(data, size, 0, 0, &whole);
	run(data, size, 1, 0, &bytes);
	run(data, size, 2, seed, &pieces);
	same(&ref, &whole);
	same(&ref, &bytes);
	same(&ref, &pieces);
	return 0;
}
