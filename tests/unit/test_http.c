#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "kreflect.h"
#include "test.h"

/* --- driver: feed a response in pieces and record everything it says ----------------- */

#define BODY_CAP 8192

struct outcome {
	int rc;                        /* KR_HTTP_DONE, 0 (wants more) or an error */
	int heads;
	int status;
	int minor_version;
	int chunked;
	int keep_alive;
	long long content_length;
	long retry_after_seconds;
	int64_t retry_after_epoch;
	char content_type[64];
	size_t used;                   /* bytes consumed up to DONE or the error */
	int eof_rc;                    /* kr_http_resp_eof afterwards */
	const char *error;
	size_t body_len;
	char body[BODY_CAP];
};

/*
 * Feeds in[0..len) to a fresh parser as pieces: [0, first), then step bytes
 * at a time (step 0: the rest at once). Stops at DONE or an error, then calls
 * kr_http_resp_eof. Checks the contract on every call.
 */
static int feed(const char *in, size_t len, size_t first, size_t step, struct outcome *out)
{
	struct kr_http_resp r;
	size_t pos = 0, end = first < len ? first : len;
	long guard = 0;

	memset(out, 0, sizeof(*out));
	kr_http_resp_init(&r);
	for (;;) {
		size_t off = pos;

		for (;;) {
			size_t c = 99, bl = 99;
			const char *b = in;
			int rc = kr_http_resp_feed(&r, in + off, end - off, &c, &b, &bl);

			check(++guard < 100000);
			check(c <= end - off);
			if (rc == KR_HTTP_BODY) {
				check(bl > 0 && b >= in + off && b + bl <= in + off + c);
				check(out->body_len + bl <= BODY_CAP);
				memcpy(out->body + out->body_len, b, bl);
				out->body_len += bl;
			} else {
				check(b == NULL && bl == 0);
			}
			off += c;
			if (rc == KR_HTTP_HEAD) {
				check(out->heads == 0);
				out->heads++;
				out->status = r.status;
				out->minor_version = r.minor_version;
				out->chunked = r.chunked;
				out->keep_alive = r.keep_alive;
				out->content_length = r.content_length;
				out->retry_after_seconds = r.retry_after_seconds;
				out->retry_after_epoch = r.retry_after_epoch;
				memcpy(out->content_type, r.content_type, sizeof(out->content_type));
			} else if (rc == 0) {
				check(off == end);
				break;
			} else if (rc != KR_HTTP_BODY) {
				check(rc == KR_HTTP_DONE || rc < 0);
				check(rc == KR_HTTP_DONE || r.error != NULL);
				out->rc = rc;
				out->used = off;
				out->error = r.error;
				out->eof_rc = kr_http_resp_eof(&r);
				return 0;
			}
		}
		if (end == len)
			break;
		pos = end;
		end = step == 0 || len - pos <= step ? len : pos + step;
	}
	out->rc = 0;
	out->used = len;
	out->eof_rc = kr_http_resp_eof(&r);
	out->error = r.error;
	return 0;
}

static int same(const struct outcome *a, const struct outcome *b)
{
	check(a->rc == b->rc);
	check(a->heads == b->heads);
	check(a->status == b->status);
	check(a->minor_version == b->minor_version);
	check(a->chunked == b->chunked);
	check(a->keep_alive == b->keep_alive);
	check(a->content_length == b->content_length);
	check(a->retry_after_seconds == b->retry_after_seconds);
	check(a->retry_after_epoch == b->retry_after_epoch);
	check(strcmp(a->content_type, b->content_type) == 0);
	check(a->used == b->used);
	check(a->eof_rc == b->eof_rc);
	check(a->error == b->error);
	check(a->body_len == b->body_len);
	check(memcmp(a->body, b->body, a->body_len) == 0);
	return 0;
}

/*
 * Parses in whole, split in two at every byte boundary, and one byte at a
 * time (after an empty first feed). Every way must agree; *o gets the result.
 */
static int parse_every_way(const char *in, size_t len, struct outcome *out)
{
	static struct outcome t;
	size_t k;

	check(feed(in, len, len, 0, out) == 0);
	for (k = 0; k <= len; k++) {
		check(feed(in, len, k, 0, &t) == 0);
		if (same(out, &t) != 0) {
			printf("  split at byte %zu of %zu differs from the whole parse\n", k, len);
			return __LINE__;
		}
	}
	check(feed(in, len, 0, 1, &t) == 0);
	check(same(out, &t) == 0);
	return 0;
}

#define S(lit) lit, sizeof(lit) - 1

/* Parses a literal every way; the result is left in the static `o`. */
static struct outcome o;

static int every_way(const char *in, size_t len)
{
	return parse_every_way(in, len, &o);
}

/* The parser's reason mentions what; reasons are part of the log line a user reads. */
static int error_has(const struct outcome *x, const char *what)
{
	return x->error != NULL && strstr(x->error, what) != NULL;
}

static int body_is(const struct outcome *x, const char *s)
{
	return x->body_len == strlen(s) && memcmp(x->body, s, x->body_len) == 0;
}

/* --- golden responses ----------------------------------------------------------------- */

KR_TEST(http, golden_content_length)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: application/json\r\n"
		"content-length:  24 \r\n"
		"Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
		"\r\n"
		"{\"kind\":\"ConfigMapList\"}";

	check(every_way(S(in)) == 0);
	check(o.rc == KR_HTTP_DONE && o.heads == 1 && o.error == NULL);
	check(o.status == 200 && o.minor_version == 1);
	check(o.content_length == 24 && !o.chunked && o.keep_alive);
	check(strcmp(o.content_type, "application/json") == 0);
	check(o.retry_after_seconds == -1 && o.retry_after_epoch == 0);
	check(body_is(&o, "{\"kind\":\"ConfigMapList\"}"));
	check(o.used == sizeof(in) - 1);
	check(o.eof_rc == KR_HTTP_DONE);
	return 0;
}

KR_TEST(http, golden_chunked_with_extensions_and_trailers)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\n"
		"Transfer-Encoding: Chunked\r\n"
		"\r\n"
		"5;name=value\r\n"
		"hello\r\n"
		"1A ; a=1;b=\"q r\"\r\n"
		"abcdefghijklmnopqrstuvwxyz\r\n"
		"00000000000000F\r\n"
		"0123456789ABCDE\r\n"
		"000;last\r\n"
		"Trailer-One: x\r\n"
		"Server-Timing: a;dur=1\r\n"
		"\r\n";

	check(every_way(S(in)) == 0);
	check(o.rc == KR_HTTP_DONE && o.error == NULL);
	check(o.status == 200 && o.chunked && o.content_length == -1 && o.keep_alive);
	check(body_is(&o, "helloabcdefghijklmnopqrstuvwxyz0123456789ABCDE"));
	check(o.used == sizeof(in) - 1);
	return 0;
}

KR_TEST(http, golden_close_delimited)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: text/plain\r\n"
		"\r\n"
		"until the connection closes\r\n\r\nHTTP/1.1 200 OK";

	check(every_way(S(in)) == 0);
	check(o.rc == 0 && o.status == 200);
	check(!o.keep_alive && !o.chunked && o.content_length == -1);
	check(body_is(&o, "until the connection closes\r\n\r\nHTTP/1.1 200 OK"));
	check(o.eof_rc == KR_HTTP_DONE);
	return 0;
}

KR_TEST(http, golden_100_continue_then_200)
{
	static const char in[] =
		"HTTP/1.1 100 Continue\r\n"
		"\r\n"
		"HTTP/1.1 103 Early Hints\r\n"
		"Link: </a>; rel=preload\r\n"
		"Content-Length: 99\r\n"
		"\r\n"
		"HTTP/1.1 200 OK\r\n"
		"Content-Length: 2\r\n"
		"\r\n"
		"ok";

	check(every_way(S(in)) == 0);
	check(o.rc == KR_HTTP_DONE && o.heads == 1);
	check(o.status == 200 && o.content_length == 2);
	check(body_is(&o, "ok"));
	return 0;
}

KR_TEST(http, golden_204_and_304_have_no_body)
{
	static const char no_content[] =
		"HTTP/1.1 204 No Content\r\n"
		"Transfer-Encoding: chunked\r\n"
		"\r\n"
		"HTTP/1.1 200 OK\r\n";
	static const char not_modified[] =
		"HTTP/1.1 304 Not Modified\r\n"
		"Content-Length: 1234\r\n"
		"ETag: \"x\"\r\n"
		"\r\n"
		"next";

	check(every_way(S(no_content)) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 204 && !o.chunked && o.body_len == 0);
	check(o.used == sizeof(no_content) - 1 - strlen("HTTP/1.1 200 OK\r\n"));
	check(o.keep_alive);
	check(every_way(S(not_modified)) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 304 && o.body_len == 0);
	check(o.content_length == 1234);
	check(o.used == sizeof(not_modified) - 1 - 4);
	return 0;
}

/* A kube-apiserver watch: its real head, then one chunk per JSON event line. */
static const char *const watch_events[] = {
	"{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
	"\"metadata\":{\"name\":\"a\",\"namespace\":\"default\",\"resourceVersion\":\"101\"},"
	"\"data\":{\"k\":\"v\"}}}\n",
	"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
	"\"metadata\":{\"name\":\"a\",\"namespace\":\"default\",\"resourceVersion\":\"102\"},"
	"\"data\":{\"k\":\"w\\r\\n\"}}}\n",
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
	"\"metadata\":{\"resourceVersion\":\"103\",\"annotations\":"
	"{\"k8s.io/initial-events-end\":\"true\"}}}}\n",
};

static const char watch_head[] =
	"HTTP/1.1 200 OK\r\n"
	"Audit-Id: 6f1c3d6e-2b7f-4c55-9d0a-0e4f2f1a9b77\r\n"
	"Cache-Control: no-cache, private\r\n"
	"Content-Type: application/json\r\n"
	"Date: Wed, 02 Dec 2026 12:00:00 GMT\r\n"
	"Transfer-Encoding: chunked\r\n"
	"\r\n";

/* The watch stream into buf; with end, the last chunk the server sends at its timeout. */
static size_t watch_stream(char *buf, size_t size, int end)
{
	size_t i, n = (size_t)snprintf(buf, size, "%s", watch_head);

	for (i = 0; i < sizeof(watch_events) / sizeof(watch_events[0]); i++)
		n += (size_t)snprintf(buf + n, size - n, "%zx\r\n%s\r\n", strlen(watch_events[i]),
				      watch_events[i]);
	if (end)
		n += (size_t)snprintf(buf + n, size - n, "0\r\n\r\n");
	return n;
}

KR_TEST(http, golden_kube_apiserver_watch)
{
	char in[2048], want[1024];
	size_t i, n, wl = 0;

	for (i = 0; i < sizeof(watch_events) / sizeof(watch_events[0]); i++) {
		check(wl + strlen(watch_events[i]) < sizeof(want));
		memcpy(want + wl, watch_events[i], strlen(watch_events[i]));
		wl += strlen(watch_events[i]);
	}
	want[wl] = '\0';

	n = watch_stream(in, sizeof(in), 0);
	check(n < sizeof(in));
	check(every_way(in, n) == 0);
	check(o.rc == 0 && o.heads == 1 && o.status == 200);
	check(o.chunked && o.keep_alive && o.content_length == -1);
	check(strcmp(o.content_type, "application/json") == 0);
	check(body_is(&o, want));
	check(o.eof_rc == KR_EPROTO);            /* a watch cut by the network is not a clean end */

	n = watch_stream(in, sizeof(in), 1);
	check(every_way(in, n) == 0);
	check(o.rc == KR_HTTP_DONE && o.used == n && body_is(&o, want));
	return 0;
}

/* Chunk data is handed on as it arrives, in one span per feed. */
KR_TEST(http, big_chunk_streams_in_input_sized_spans)
{
	static char in[(1u << 20) + 256];
	static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n";
	struct kr_http_resp r;
	size_t n = sizeof(head) - 1, data_start = n, pos, total = 0, spans = 0;
	const char *b;
	size_t c, bl;

	memcpy(in, head, n);
	memset(in + n, 'x', 1u << 20);
	n += 1u << 20;
	memcpy(in + n, "\r\n0\r\n\r\n", 7);
	n += 7;
	kr_http_resp_init(&r);
	check(kr_http_resp_feed(&r, in, data_start, &c, &b, &bl) == KR_HTTP_HEAD);
	check(kr_http_resp_feed(&r, in + c, data_start - c, &c, &b, &bl) == 0);
	for (pos = data_start; pos + 100 <= data_start + (1u << 20); pos += 100) {
		check(kr_http_resp_feed(&r, in + pos, 100, &c, &b, &bl) == KR_HTTP_BODY);
		check(c == 100 && bl == 100 && b == in + pos);
		total += bl;
		spans++;
		check(kr_http_resp_feed(&r, in + pos + 100, 0, &c, &b, &bl) == 0);
	}
	check(spans == (1u << 20) / 100);
	/* The 76 data bytes left, the CRLF and the last chunk in one feed: BODY, then DONE. */
	check(kr_http_resp_feed(&r, in + pos, n - pos, &c, &b, &bl) == KR_HTTP_BODY);
	check(bl == (1u << 20) - total && c == bl);
	pos += c;
	check(kr_http_resp_feed(&r, in + pos, n - pos, &c, &b, &bl) == KR_HTTP_DONE);
	check(pos + c == n);
	return 0;
}

/* --- keep-alive ------------------------------------------------------------------------- */

/* Parses back-to-back responses from one buffer, in pieces of step bytes (0 = whole). */
static int parse_pipeline(const char *in, size_t len, size_t step, int *statuses,
			  char *bodies, size_t *nresp)
{
	struct kr_http_resp r;
	size_t pos = 0, blen = 0;
	long guard = 0;

	*nresp = 0;
	kr_http_resp_init(&r);
	while (pos < len) {
		size_t off = pos, end = step == 0 || len - pos <= step ? len : pos + step;

		for (;;) {
			size_t c, bl;
			const char *b;
			int rc = kr_http_resp_feed(&r, in + off, end - off, &c, &b, &bl);

			check(++guard < 100000);
			check(rc >= 0);
			off += c;
			if (rc == KR_HTTP_HEAD) {
				statuses[*nresp] = r.status;
			} else if (rc == KR_HTTP_BODY) {
				memcpy(bodies + blen, b, bl);
				blen += bl;
			} else if (rc == KR_HTTP_DONE) {
				bodies[blen++] = '|';
				(*nresp)++;
				kr_http_resp_init(&r);
			} else {
				break;
			}
		}
		pos = end;
	}
	bodies[blen] = '\0';
	return 0;
}

KR_TEST(http, keep_alive_back_to_back)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
		"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n"
		"HTTP/1.1 204 No Content\r\n\r\n"
		"HTTP/1.1 410 Gone\r\nContent-Length: 4\r\n\r\ngone";
	static const size_t steps[] = { 0, 1, 2, 3, 7, 64 };
	int statuses[8];
	char bodies[128];
	size_t i, n;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		memset(statuses, 0, sizeof(statuses));
		check(parse_pipeline(S(in), steps[i], statuses, bodies, &n) == 0);
		check(n == 4);
		check(statuses[0] == 200 && statuses[1] == 201 && statuses[2] == 204 &&
		      statuses[3] == 410);
		check(strcmp(bodies, "first|second||gone|") == 0);
	}
	return 0;
}

KR_TEST(http, done_then_next_response_starts_at_the_right_byte)
{
	static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 x\r\n";
	struct kr_http_resp r;
	size_t c, bl, off = 0;
	const char *b;

	kr_http_resp_init(&r);
	check(kr_http_resp_feed(&r, in, sizeof(in) - 1, &c, &b, &bl) == KR_HTTP_HEAD);
	off += c;
	check(kr_http_resp_feed(&r, in + off, sizeof(in) - 1 - off, &c, &b, &bl) == KR_HTTP_BODY);
	check(bl == 3 && memcmp(b, "abc", 3) == 0);
	off += c;
	check(kr_http_resp_feed(&r, in + off, sizeof(in) - 1 - off, &c, &b, &bl) == KR_HTTP_DONE);
	check(c == 0 && memcmp(in + off, "HTTP/1.1 404", 12) == 0);
	/* Feeding a finished parser is a caller bug, not a peer's: it consumes nothing. */
	check(kr_http_resp_feed(&r, in + off, sizeof(in) - 1 - off, &c, &b, &bl) == KR_ESTATE);
	check(c == 0);
	kr_http_resp_init(&r);
	check(kr_http_resp_feed(&r, in + off, sizeof(in) - 1 - off, &c, &b, &bl) == 0);
	check(c == sizeof(in) - 1 - off);
	return 0;
}

KR_TEST(http, connection_keep_alive_rules)
{
	check(every_way(S("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")) == 0);
	check(o.rc == KR_HTTP_DONE && o.minor_version == 0 && !o.keep_alive);
	check(every_way(S("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok")) == 0);
	check(o.rc == KR_HTTP_DONE && o.keep_alive);
	check(every_way(S("HTTP/1.1 200 OK\r\nConnection: keep-alive, CLOSE\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && !o.keep_alive);
	check(every_way(S("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.keep_alive);
	check(every_way(S("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")) == 0);
	check(o.rc == KR_EPROTO && o.heads == 0);
	return 0;
}

/* --- bounds ----------------------------------------------------------------------------------- */

static char big[4 * KR_HTTP_LINE_MAX + 8 * KR_HTTP_MAX_HEADERS + 256];

/* A response whose "X-Long" header line is exactly line_len bytes without its CRLF. */
static size_t long_line_response(size_t line_len)
{
	size_t n = 0;

	n += (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nX-Long: ");
	memset(big + n, 'v', line_len - strlen("X-Long: "));
	n += line_len - strlen("X-Long: ");
	n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\nContent-Length: 0\r\n\r\n");
	return n;
}

KR_TEST(http, header_line_limit)
{
	size_t n = long_line_response(KR_HTTP_LINE_MAX);

	check(feed(big, n, n, 0, &o) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 200);
	check(feed(big, n, 0, 1, &o) == 0);
	check(o.rc == KR_HTTP_DONE);

	n = long_line_response(KR_HTTP_LINE_MAX + 1);
	check(feed(big, n, n, 0, &o) == 0);
	check(o.rc == KR_ETOOBIG && o.heads == 0 && o.error != NULL);
	check(o.eof_rc == KR_ETOOBIG);
	check(feed(big, n, 0, 1, &o) == 0);
	check(o.rc == KR_ETOOBIG);
	check(feed(big, n, 0, 4096, &o) == 0);
	check(o.rc == KR_ETOOBIG);
	return 0;
}

/* A status line, nheaders header lines (one is Content-Length: 0), the blank line. */
static size_t many_headers_response(int nheaders)
{
	size_t n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n");
	int i;

	for (i = 1; i < nheaders; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "X-%d: %d\r\n", i, i);
	n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
	return n;
}

KR_TEST(http, header_count_limit)
{
	size_t n = many_headers_response(KR_HTTP_MAX_HEADERS);

	check(n < sizeof(big));
	check(feed(big, n, n, 0, &o) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 200);
	n = many_headers_response(KR_HTTP_MAX_HEADERS + 1);
	check(feed(big, n, n, 0, &o) == 0);
	check(o.rc == KR_ETOOBIG && o.heads == 0);
	check(feed(big, n, 0, 1, &o) == 0);
	check(o.rc == KR_ETOOBIG);
	return 0;
}

KR_TEST(http, trailer_count_limit)
{
	size_t n;
	int i;

	for (i = 0; i < 2; i++) {
		int count = KR_HTTP_MAX_HEADERS + i, k;

		n = (size_t)snprintf(big, sizeof(big),
				     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n");
		for (k = 0; k < count; k++)
			n += (size_t)snprintf(big + n, sizeof(big) - n, "T: %d\r\n", k);
		n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
		check(n < sizeof(big));
		check(feed(big, n, n, 0, &o) == 0);
		check(o.rc == (i == 0 ? KR_HTTP_DONE : KR_ETOOBIG));
	}
	return 0;
}

KR_TEST(http, too_many_interim_responses)
{
	size_t n = 0;
	int i;

	for (i = 0; i < KR_HTTP_MAX_INTERIM + 1; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "HTTP/1.1 100 Continue\r\n\r\n");
	n += (size_t)snprintf(big + n, sizeof(big) - n, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	check(feed(big, n, n, 0, &o) == 0);
	check(o.rc == KR_ETOOBIG && o.heads == 0);
	return 0;
}

/* --- chunked errors ------------------------------------------------------------------------------ */

#define CHUNKED_HEAD "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

KR_TEST(http, chunk_size_bounds)
{
	check(every_way(S(CHUNKED_HEAD "00000000000000001\r\nx\r\n0\r\n\r\n")) == 0);
	check(o.rc == KR_ETOOBIG && o.heads == 1 && o.body_len == 0);
	check(every_way(S(CHUNKED_HEAD "0000000000000001\r\nx\r\n0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && body_is(&o, "x"));
	check(every_way(S(CHUNKED_HEAD "4000000000000000\r\n")) == 0);
	check(o.rc == KR_ETOOBIG);
	check(every_way(S(CHUNKED_HEAD "ffffffffffffffff\r\n")) == 0);
	check(o.rc == KR_ETOOBIG);
	check(every_way(S(CHUNKED_HEAD "3fffffffffffffff\r\nabc")) == 0);
	check(o.rc == 0 && body_is(&o, "abc") && o.eof_rc == KR_EPROTO);
	return 0;
}

KR_TEST(http, chunk_size_garbage)
{
	static const char *const bad[] = {
		CHUNKED_HEAD "-1\r\n",
		CHUNKED_HEAD "\r\n",
		CHUNKED_HEAD "zz\r\n",
		CHUNKED_HEAD "0x5\r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "5 x\r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "5 \r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD " 5\r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "+5\r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "5\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "5;a\rb\r\nhello\r\n0\r\n\r\n",
		CHUNKED_HEAD "5;\x01\r\nhello\r\n0\r\n\r\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		check(o.rc == KR_EPROTO && o.heads == 1 && o.body_len == 0 && o.error != NULL);
	}
	return 0;
}

KR_TEST(http, chunk_data_needs_crlf)
{
	static const char *const bad[] = {
		CHUNKED_HEAD "5\r\nhelloX\r\n0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhello\n0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhello\r0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhello0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhello!\r\n0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhelloXY0\r\n\r\n",
		CHUNKED_HEAD "5\r\nhello\rX0\r\n\r\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		/* The chunk's bytes were handed on before the bad framing was seen. */
		check(o.rc == KR_EPROTO && body_is(&o, "hello"));
		check(error_has(&o, "CRLF"));
	}
	/* The last chunk's trailer section ends in CRLF too. */
	check(every_way(S(CHUNKED_HEAD "0\r\n\n")) == 0);
	check(o.rc == KR_EPROTO);
	return 0;
}

KR_TEST(http, eof_mid_chunk)
{
	static const char *const cut[] = {
		CHUNKED_HEAD,
		CHUNKED_HEAD "a",
		CHUNKED_HEAD "a\r",
		CHUNKED_HEAD "a\r\n",
		CHUNKED_HEAD "a\r\nhello",
		CHUNKED_HEAD "5\r\nhello",
		CHUNKED_HEAD "5\r\nhello\r",
		CHUNKED_HEAD "5\r\nhello\r\n",
		CHUNKED_HEAD "5\r\nhello\r\n0\r\n",
		CHUNKED_HEAD "5\r\nhello\r\n0\r\nTrailer: x\r\n",
		CHUNKED_HEAD "5\r\nhello\r\n0\r\n\r",
	};
	size_t i;

	for (i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		check(every_way(cut[i], strlen(cut[i])) == 0);
		check(o.rc == 0 && o.eof_rc == KR_EPROTO);
	}
	check(every_way(S(CHUNKED_HEAD "5\r\nhello\r\n0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.eof_rc == KR_HTTP_DONE);
	return 0;
}

/* --- Content-Length and Transfer-Encoding ------------------------------------------------------ */

KR_TEST(http, eof_short_of_content_length)
{
	struct kr_http_resp r;
	static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345";
	size_t c, bl;
	const char *b;

	check(every_way(S(in)) == 0);
	check(o.rc == 0 && body_is(&o, "12345") && o.eof_rc == KR_EPROTO);
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")) == 0);
	check(o.rc == 0 && o.eof_rc == KR_EPROTO);
	/* Cut in the head. */
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n")) == 0);
	check(o.rc == 0 && o.heads == 0 && o.eof_rc == KR_EPROTO);
	/* EOF right after the last body byte, before DONE was collected, is complete. */
	kr_http_resp_init(&r);
	check(kr_http_resp_feed(&r, S("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), &c, &b, &bl) ==
	      KR_HTTP_HEAD);
	check(kr_http_resp_feed(&r, S("ok"), &c, &b, &bl) == KR_HTTP_BODY);
	check(kr_http_resp_eof(&r) == KR_HTTP_DONE);
	return 0;
}

KR_TEST(http, eof_before_any_byte_is_closed)
{
	struct kr_http_resp r;

	kr_http_resp_init(&r);
	check(kr_http_resp_eof(&r) == KR_ECLOSED);
	check(r.error != NULL);
	kr_http_resp_init(&r);
	check(every_way(S("H")) == 0);
	check(o.eof_rc == KR_EPROTO);
	return 0;
}

KR_TEST(http, content_length_values)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 05x\r\n\r\nhello",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		check(o.rc == KR_EPROTO && o.heads == 0);
	}
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n")) == 0);
	check(o.rc == KR_ETOOBIG);
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 4611686018427387904\r\n\r\n")) == 0);
	check(o.rc == KR_ETOOBIG);
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 4611686018427387903\r\n\r\n")) == 0);
	check(o.rc == 0 && o.content_length == 4611686018427387903LL);
	/* The same value twice is one length (RFC 9110 8.6). */
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 005\r\n\r\nhello")) == 0);
	check(o.rc == KR_HTTP_DONE && o.content_length == 5 && body_is(&o, "hello"));
	return 0;
}

KR_TEST(http, transfer_encoding_rules)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		check(o.rc == KR_EPROTO && o.heads == 0 && o.error != NULL);
	}
	check(every_way(S("HTTP/1.1 200 OK\r\ntransfer-encoding:\tCHUNKED \r\n\r\n0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.chunked);
	return 0;
}

/* --- the head's syntax --------------------------------------------------------------------------- */

KR_TEST(http, bad_status_lines)
{
	static const char *const bad[] = {
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 200OK\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"http/1.1 200 OK\r\n\r\n",
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.x 200 OK\r\n\r\n",
		"HTTP/1.11 200 OK\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1 600 High\r\n\r\n",
		"HTTP/1.1 -20 OK\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 200 O\x01K\r\n\r\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		check(o.rc == KR_EPROTO && o.heads == 0 && o.error != NULL);
	}
	/* No reason phrase at all, and an empty one, are fine. */
	check(every_way(S("HTTP/1.1 503\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 503);
	check(every_way(S("HTTP/1.1 429 \r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 429);
	return 0;
}

KR_TEST(http, bad_header_lines)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n\tfolded\r\n\r\n",
		"HTTP/1.1 200 OK\r\n leading\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX(y): z\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n",
		/* Bare LF: kube-apiserver always sends CRLF, so this parser does not guess. */
		"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
	};
	static const char nul[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(every_way(bad[i], strlen(bad[i])) == 0);
		check(o.rc == KR_EPROTO && o.heads == 0 && o.error != NULL);
	}
	/* Each is refused for its own reason, not by accident further on. */
	check(every_way(S("HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n")) == 0);
	check(error_has(&o, "obs-fold"));
	check(every_way(S("HTTP/1.1 200 OK\r\n\tX: a\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(error_has(&o, "obs-fold"));
	check(every_way(S("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n")) == 0);
	check(error_has(&o, "bare LF"));
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n")) == 0);
	check(error_has(&o, "bare LF"));
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Length: 1\r\r\n\r\nx")) == 0);
	check(error_has(&o, "control character"));
	check(every_way(S(nul)) == 0);
	check(o.rc == KR_EPROTO);
	/* obs-text (bytes >= 0x80) in a value is allowed and passed over. */
	check(every_way(S("HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE);
	return 0;
}

KR_TEST(http, failed_parser_stays_failed)
{
	struct kr_http_resp r;
	size_t c, bl;
	const char *b;
	const char *why;

	kr_http_resp_init(&r);
	check(kr_http_resp_feed(&r, S("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n"), &c, &b, &bl) ==
	      KR_EPROTO);
	why = r.error;
	check(why != NULL && strstr(why, "Transfer-Encoding") != NULL);
	check(kr_http_resp_feed(&r, S("\r\n"), &c, &b, &bl) == KR_EPROTO);
	check(c == 0 && b == NULL && bl == 0 && r.error == why);
	check(kr_http_resp_feed(&r, "", 0, &c, &b, &bl) == KR_EPROTO);
	check(kr_http_resp_eof(&r) == KR_EPROTO && r.error == why);
	return 0;
}

KR_TEST(http, content_type_is_cut_to_fit)
{
	check(every_way(S("HTTP/1.1 200 OK\r\nContent-Type: application/json;"
			  " charset=utf-8; profile=\"https://example.com/a/very/long/profile\"\r\n"
			  "Content-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE);
	check(strlen(o.content_type) == sizeof(o.content_type) - 1);
	check(strncmp(o.content_type, "application/json; charset=utf-8; profile=", 41) == 0);
	return 0;
}

/* --- Retry-After ------------------------------------------------------------------------------------ */

KR_TEST(http, retry_after_seconds)
{
	struct kr_http_resp r;

	check(every_way(S("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.status == 429);
	check(o.retry_after_seconds == 120 && o.retry_after_epoch == 0);
	check(every_way(S("HTTP/1.1 503 x\r\nRetry-After: 99999999999999999999\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.retry_after_seconds == 2147483647L);
	check(every_way(S("HTTP/1.1 503 x\r\nRetry-After: soon\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.rc == KR_HTTP_DONE && o.retry_after_seconds == -1 && o.retry_after_epoch == 0);
	check(every_way(S("HTTP/1.1 503 x\r\nRetry-After: -5\r\nContent-Length: 0\r\n\r\n")) == 0);
	check(o.retry_after_seconds == -1 && o.retry_after_epoch == 0);

	kr_http_resp_init(&r);
	check(kr_http_retry_after_delay(&r, 1000) == -1);
	r.retry_after_seconds = 7;
	check(kr_http_retry_after_delay(&r, 1000) == 7);
	return 0;
}

KR_TEST(http, retry_after_http_date)
{
	static const char *const forms[] = {
		"HTTP/1.1 503 x\r\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 503 x\r\nRetry-After: Sunday, 06-Nov-94 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 503 x\r\nRetry-After: Sun Nov  6 08:49:37 1994\r\nContent-Length: 0\r\n\r\n",
	};
	static const char *const junk[] = {
		"Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 06 Nov 1994 24:49:37 GMT",
		"Sun, 32 Nov 1994 08:49:37 GMT",
		"Sun, 06 Now 1994 08:49:37 GMT",
		"Sun, 6 Nov 1994 08:49:37 GMT",
		"Sunday, 06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37",
		"Sunday, 06-Nov-94 08:49:37 UTC",
		"Sunday, 06-Nov-9x 08:49:37 GMT",
		"Sun Nov  6 08:49:37 19x4",
		"Sun Nov 6 08:49:37 1994",
		"Fun Nov  6 08:49:37 1994",
		"Sun Nov  6 08-49-37 1994",
	};
	struct kr_http_resp r;
	char in[256];
	size_t i;
	int n;

	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		check(every_way(forms[i], strlen(forms[i])) == 0);
		check(o.rc == KR_HTTP_DONE);
		check(o.retry_after_seconds == -1);
		check(o.retry_after_epoch == 784111777);
	}
	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		n = snprintf(in, sizeof(in), "HTTP/1.1 503 x\r\nRetry-After: %s\r\nContent-Length: 0\r\n\r\n",
			     junk[i]);
		check(every_way(in, (size_t)n) == 0);
		check(o.rc == KR_HTTP_DONE && o.retry_after_epoch == 0 && o.retry_after_seconds == -1);
	}
	/* A later date than the epoch's first century, and leap days. */
	check(every_way(S("HTTP/1.1 503 x\r\nRetry-After: Thu, 29 Feb 2024 23:59:59 GMT\r\n"
			  "Content-Length: 0\r\n\r\n")) == 0);
	check(o.retry_after_epoch == 1709251199);
	/* RFC 850's two-digit year: 26 is 2026, 94 was 1994. */
	check(every_way(S("HTTP/1.1 503 x\r\nRetry-After: Thursday, 01-Jan-26 00:00:00 GMT\r\n"
			  "Content-Length: 0\r\n\r\n")) == 0);
	check(o.retry_after_epoch == 1767225600);

	kr_http_resp_init(&r);
	r.retry_after_epoch = 784111777;
	check(kr_http_retry_after_delay(&r, 784111777 - 30) == 30);
	check(kr_http_retry_after_delay(&r, 784111777 + 30) == 0);
	return 0;
}

/* --- request writer -------------------------------------------------------------------------------- */

KR_TEST(http, request_golden)
{
	static const struct kr_http_param params[] = {
		{ "allowWatchBookmarks", "true" },
		{ "labelSelector", "app in (a,b),!x" },
		{ "resourceVersion", NULL },
		{ "timeoutSeconds", "423" },
		{ "watch", "true" },
	};
	static const char want[] =
		"GET /api/v1/namespaces/default/configmaps?allowWatchBookmarks=true"
		"&labelSelector=app%20in%20%28a%2Cb%29%2C%21x&timeoutSeconds=423&watch=true HTTP/1.1\r\n"
		"Host: 10.0.0.1:6443\r\n"
		"User-Agent: kreflect/" KR_VERSION " (linux/aarch64)\r\n"
		"Accept: application/json\r\n"
		"Authorization: Bearer eyJhbGciOi.J9-_x\r\n"
		"\r\n";
	char buf[1024];
	int n;

	n = kr_http_write_request(buf, sizeof(buf), "GET", "10.0.0.1:6443",
				  "/api/v1/namespaces/default/configmaps", params,
				  sizeof(params) / sizeof(params[0]), "eyJhbGciOi.J9-_x", "aarch64");
	check(n == (int)sizeof(want) - 1);
	check(memcmp(buf, want, (size_t)n) == 0);
	return 0;
}

KR_TEST(http, request_without_token_or_params)
{
	static const char want[] =
		"GET /version HTTP/1.1\r\n"
		"Host: kubernetes.default.svc\r\n"
		"User-Agent: kreflect/" KR_VERSION " (linux/armv7)\r\n"
		"Accept: application/json\r\n"
		"\r\n";
	char buf[512];
	int n = kr_http_write_request(buf, sizeof(buf), "GET", "kubernetes.default.svc", "/version",
				      NULL, 0, "", "armv7");

	check(n == (int)sizeof(want) - 1 && memcmp(buf, want, (size_t)n) == 0);
	n = kr_http_write_request(buf, sizeof(buf), "GET", "kubernetes.default.svc", "/version",
				  NULL, 0, NULL, "armv7");
	check(n == (int)sizeof(want) - 1 && memcmp(buf, want, (size_t)n) == 0);
	/* No arch given: the User-Agent says so rather than lying. */
	n = kr_http_write_request(buf, sizeof(buf), "GET", "k", "/version", NULL, 0, NULL, NULL);
	check(n > 0 && n < (int)sizeof(buf));
	buf[n] = '\0';
	check(strstr(buf, "User-Agent: kreflect/" KR_VERSION " (linux/unknown)\r\n") != NULL);
	return 0;
}

KR_TEST(http, request_percent_encoding)
{
	static const struct kr_http_param params[] = {
		{ "labelSelector", "app in (a,b),!x" },
		{ "fieldSelector", "metadata.name=a-b_c.d~e" },
		{ "continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEi+/=" },
		{ "k y", "\xc3\xa9%&#?" },
	};
	static const char want[] =
		"GET /api/v1/pods?x=1&labelSelector=app%20in%20%28a%2Cb%29%2C%21x"
		"&fieldSelector=metadata.name%3Da-b_c.d~e"
		"&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEi%2B%2F%3D"
		"&k%20y=%C3%A9%25%26%23%3F HTTP/1.1\r\n";
	char buf[1024];
	int n = kr_http_write_request(buf, sizeof(buf), "GET", "h", "/api/v1/pods?x=1", params,
				      sizeof(params) / sizeof(params[0]), NULL, "x86_64");

	check(n > 0);
	check(memcmp(buf, want, sizeof(want) - 1) == 0);
	return 0;
}

KR_TEST(http, request_exact_size_fits_one_less_does_not)
{
	static const struct kr_http_param params[] = { { "labelSelector", "app in (a,b),!x" } };
	static const struct kr_http_header extra[] = { { "X-Trace", "1" } };
	char buf[512], ref[512];
	int n, m;
	size_t k;

	n = kr_http_write_request_ex(ref, sizeof(ref), "GET", "h:443", "/api/v1/pods", params, 1,
				     "tok", "x86_64", extra, 1);
	check(n > 0 && n < (int)sizeof(buf));
	check(memcmp(ref + n - 14, "X-Trace: 1\r\n\r\n", 14) == 0);
	memset(buf, '#', sizeof(buf));
	m = kr_http_write_request_ex(buf, (size_t)n, "GET", "h:443", "/api/v1/pods", params, 1,
				     "tok", "x86_64", extra, 1);
	check(m == n && memcmp(buf, ref, (size_t)n) == 0);
	check(buf[n] == '#');                    /* nothing written past the request */
	for (k = 0; k < (size_t)n; k++) {
		memset(buf, '#', sizeof(buf));
		check(kr_http_write_request_ex(buf, k, "GET", "h:443", "/api/v1/pods", params, 1,
					       "tok", "x86_64", extra, 1) == KR_ETOOBIG);
		check(buf[k] == '#');
	}
	return 0;
}

KR_TEST(http, request_rejects_injection)
{
	static const struct kr_http_header crlf_value[] = { { "X", "a\r\nEvil: 1" } };
	static const struct kr_http_header bad_name[] = { { "X Y", "a" } };
	static const struct kr_http_param no_key[] = { { NULL, "a" } };
	char buf[1024];

	check(kr_http_write_request(buf, sizeof(buf), "GET\r\n", "h", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "G T", "h", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "", "h", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h\r\nEvil: 1", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h\n", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "", "/", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/a b", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/a\r\nX: y", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "a", NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", NULL, NULL, 0, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", NULL, 0, "tok\r\nEvil: 1", "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", NULL, 0, "tok\n", "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", NULL, 0, NULL, "x\r\n") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", no_key, 1, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", NULL, 1, NULL, "a") == KR_EINVAL);
	check(kr_http_write_request_ex(buf, sizeof(buf), "GET", "h", "/", NULL, 0, NULL, "a",
				       crlf_value, 1) == KR_EINVAL);
	check(kr_http_write_request_ex(buf, sizeof(buf), "GET", "h", "/", NULL, 0, NULL, "a",
				       bad_name, 1) == KR_EINVAL);
	/* CR and LF inside query values are encoded, never written raw. */
	{
		static const struct kr_http_param p[] = { { "k", "a\r\nEvil: 1" } };
		static const char want[] = "GET /?k=a%0D%0AEvil%3A%201 HTTP/1.1\r\n";
		int n = kr_http_write_request(buf, sizeof(buf), "GET", "h", "/", p, 1, NULL, "a");

		check(n > 0 && memcmp(buf, want, sizeof(want) - 1) == 0);
	}
	return 0;
}
