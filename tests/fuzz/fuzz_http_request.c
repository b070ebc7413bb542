/*
 * Fuzzes the local endpoint's request reader (src/http_server.c) and its
 * query and path decoders.
 *
 * The input is a stream of requests as a client would send them on a kept-
 * alive connection. It is read three ways: whole, one byte at a time, and in
 * pieces whose sizes come from a hash of the input; after each complete head
 * the reader starts again on the bytes that follow. The three transcripts
 * (method, target, version, keep-alive, body flag, Authorization, the status
 * of an error) must be identical, and every call must keep the contract:
 * consumed <= len, a failed reader stays failed, every field NUL-terminated
 * inside its bound. Every target read is then decoded as a path and for a set
 * of parameters: results must stay inside their buffers, and a decoded value
 * never holds a NUL. Any violation abort()s.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_server.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct transcript {
	uint64_t hash;
	int heads;
	int rc;
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

static void check_decoders(const char *target)
{
	static const char *const names[] = { "watch", "labelSelector", "fieldSelector", "limit",
					     "continue", "resourceVersion", "timeoutSeconds", "" };
	char out[KR_SERVE_TARGET_MAX];
	size_t i;
	int n;

	n = kr_http_server_path(target, out, sizeof(out));
	/* A decoded path may hold '?' (%3F) but never a NUL or an encoded '/'. */
	if (n >= (int)sizeof(out) || (n >= 0 && strlen(out) != (size_t)n))
		abort();
	{
		const char *q = strchr(target, '?'), *slash = strstr(target, "%2F");

		if (n >= 0 && slash && (!q || slash < q))
			abort();
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char small[16];

		n = kr_http_server_param(target, names[i], out, sizeof(out));
		if (n >= (int)sizeof(out) || (n >= 0 && strlen(out) != (size_t)n))
			abort();
		if (n < 0 && n != KR_ENOENT && n != KR_ETOOBIG && n != KR_EINVAL)
			abort();
		n = kr_http_server_param(target, names[i], small, sizeof(small));
		if (n >= (int)sizeof(small) || (n >= 0 && strlen(small) != (size_t)n))
			abort();
	}
}

/* Reads in[0..len) in pieces (step 0: the hash decides; 1: bytes; else whole). */
static void run(const uint8_t *in, size_t len, int mode, uint64_t seed, struct transcript *t)
{
	static struct kr_http_server_req r;
	size_t pos = 0;
	uint64_t rnd = seed | 1;

	memset(t, 0, sizeof(*t));
	t->hash = 1469598103934665603ULL;
	kr_http_server_init(&r);
	while (pos < len) {
		size_t n = mode == 0 ? piece(&rnd) : mode == 1 ? 1 : len - pos, used = (size_t)-1;
		int rc;

		if (n > len - pos)
			n = len - pos;
		rc = kr_http_server_feed(&r, (const char *)in + pos, n, &used);
		if (used > n)
			abort();
		pos += used;
		if (rc < 0) {
			size_t u = 5;

			if (rc != KR_EPROTO || r.status < 400 || r.status > 505 || !r.why)
				abort();
			if (kr_http_server_feed(&r, "GET / HTTP/1.1\r\n\r\n", 18, &u) != KR_EPROTO || u != 0)
				abort();
			mix(&t->hash, &r.status, sizeof(r.status));
			t->rc = rc;
			return;
		}
		if (rc == 0) {
			if (used != n)
				abort();
			continue;
		}
		if (r.tlen >= sizeof(r.target) || r.target[r.tlen] != '\0' || strlen(r.target) != r.tlen ||
		    r.target[0] != '/' || strlen(r.auth) >= sizeof(r.auth) || r.mlen >= sizeof(r.method_name))
			abort();
		mix(&t->hash, r.method_name, r.mlen);
		mix(&t->hash, r.target, r.tlen);
		mix(&t->hash, &r.minor, sizeof(r.minor));
		mix(&t->hash, &r.keep_alive, sizeof(r.keep_alive));
		mix(&t->hash, &r.has_body, sizeof(r.has_body));
		mix(&t->hash, r.auth, strlen(r.auth));
		t->heads++;
		if (mode == 2)
			check_decoders(r.target);
		kr_http_server_init(&r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct transcript a, b, c;
	uint64_t seed = 1469598103934665603ULL;

	mix(&seed, data, size < 64 ? size : 64);
	run(data, size, 2, seed, &a);
	run(data, size, 1, seed, &b);
	run(data, size, 0, seed, &c);
	if (a.hash != b.hash || a.hash != c.hash || a.heads != b.heads || a.heads != c.heads ||
	    a.rc != b.rc || a.rc != c.rc)
		abort();
	return 0;
}
