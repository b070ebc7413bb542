/*
 * bench_transport: how fast kreflect's watch-stream path (HTTP/1.1 chunked
 * decoding by kr_http_resp_feed, then object framing by kr_json_framer_feed)
 * runs, next to the memchr and memcpy ceilings over the same bytes.
 *
 *   bench_transport [-n EVENTS] [-r REPEATS]      (defaults: 100000 events, 7 repeats)
 *
 * It builds a watch response in memory: an HTTP/1.1 200 head as kube-apiserver
 * sends it, then EVENTS MODIFIED events of a ConfigMap, one compact JSON object
 * of exactly 1024 bytes per line (newline included), chunked two ways:
 *
 *   A. one event per chunk (kube-apiserver flushes after every event);
 *   B. 16 KiB chunks cut through events, as a proxy or a fast server sends them.
 *
 * Each variant is fed in 16 KiB reads (one TLS record's plaintext) to the same
 * loop as src/conn.c's feed() and src/reflector.c's on_body(): the framer's
 * output is re-armed after every object. Measurements alternate round-robin
 * (pipeline, pipeline+parse, memchr, memcpy, then again) so that noise from a
 * shared machine falls on all of them alike; each figure is the median of the
 * repeats, in MB/s of wire bytes (1 MB = 10^6 bytes).
 *
 * "decoder only" stops after kr_http_resp_feed: it shows what the chunked
 * decoding costs by itself (it hands out spans of the input, so with large
 * chunks it hardly touches the bytes at all). "decoder+framer+kr_json_parse"
 * adds jsmn's tokenizer with its checks, which reflector.c ran on every event
 * until kr_json_parse_sel; "decoder+framer+kr_json_parse_sel" the one it runs
 * now (the same verdict, tokens only for the envelope and metadata).
 *
 * Before timing, one pass checks the pipeline: the number of objects framed,
 * their total length and an FNV-1a hash over all of them must equal what was
 * generated, and the response must end (KR_HTTP_DONE). Every timed pass checks
 * the count and byte total again. Any mismatch exits 1 with "FAIL".
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "json.h"
#include "kreflect.h"
#include "kreflect_config.h"

#define EVENT_BYTES 1024u           /* one event line, newline included */
#define READ_BYTES 16384u           /* one TLS record of plaintext */
#define SPAN_CHUNK 16384u           /* variant B's chunk size */
#define MAX_EVENTS 200000u
#define MAX_REPEATS 51
/* Chunk framing per event in variant A: "400\r\n" + "\r\n". */
#define WIRE_MAX ((size_t)MAX_EVENTS * (EVENT_BYTES + 16u) + 65536u)
#define ABSENT_BYTE 0x01            /* a byte no Kubernetes JSON text here contains */

static char wire[WIRE_MAX];
static size_t wire_len;
static char out[KR_MAX_OBJECT_BYTES];      /* the framer's output, as big as the product's */
static kr_json_tok toks[KR_JSON_TOKENS];
static char copy_dst[READ_BYTES];

/* What the generator produced (the objects: event lines without their newline). */
struct expect {
	unsigned long events;
	unsigned long long object_bytes;
	uint64_t hash;
	size_t chunks;
};

/* What one pass over the wire found. */
struct got {
	unsigned long events;
	unsigned long long object_bytes;
	uint64_t hash;
	unsigned long parsed_tokens;
	int done;
	const char *why;
};

__attribute__((format(printf, 1, 2), noreturn))
static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench_transport: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV_SEED 0xcbf29ce484222325ull

/* --- the stream ------------------------------------------------------------------------ */

static void wire_put(const char *p, size_t n)
{
	if (n > WIRE_MAX - wire_len)
		fail("wire buffer too small (%zu + %zu bytes)", wire_len, n);
	memcpy(wire + wire_len, p, n);
	wire_len += n;
}

static void wire_chunk(const char *p, size_t n)
{
	char h[24];
	int hl = snprintf(h, sizeof(h), "%zx\r\n", n);

	wire_put(h, (size_t)hl);
	wire_put(p, n);
	wire_put("\r\n", 2);
}

/*
 * Config-file text as it appears JSON-escaped in a ConfigMap's data: newlines
 * as \n, quotes as \". Units are copied whole so that an escape is never cut.
 */
static const char *const payload_units[] = {
	"server.port=8080\\n", "server.address=0.0.0.0\\n", "log.level=info\\n",
	"log.format=json\\n", "db.url=\\\"postgres://db.default.svc:5432/app\\\"\\n",
	"db.pool.max=32\\n", "cache.ttl=300s\\n", "feature.flags=alpha,beta\\n",
	"tls.minVersion=1.2\\n", "retry.backoff=\\\"exponential\\\"\\n",
	"metrics.path=/metrics\\n", "upstream.timeout=15s\\n",
};

/*
 * Writes event i into ev: exactly EVENT_BYTES bytes, the last a newline.
 * Returns EVENT_BYTES.
 */
static size_t make_event(unsigned long i, char *ev)
{
	static const char suffix[] = "\"}}}\n";
	size_t n, need, u = i % (sizeof(payload_units) / sizeof(payload_units[0]));
	int hl;

	hl = snprintf(ev, EVENT_BYTES,
		      "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
		      "\"metadata\":{\"name\":\"app-config-%05lu\",\"namespace\":\"default\","
		      "\"uid\":\"%08lx-5d2c-4c6e-9a1b-%012lx\",\"resourceVersion\":\"%lu\","
		      "\"creationTimestamp\":\"2024-05-01T12:00:00Z\","
		      "\"labels\":{\"app.kubernetes.io/name\":\"edge-agent\","
		      "\"app.kubernetes.io/part-of\":\"fleet\"},"
		      "\"managedFields\":[{\"manager\":\"kubectl-client-side-apply\","
		      "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":\"2024-05-01T12:00:00Z\","
		      "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\".\":{},"
		      "\"f:app.properties\":{}},\"f:metadata\":{\"f:labels\":{\".\":{},"
		      "\"f:app.kubernetes.io/name\":{},\"f:app.kubernetes.io/part-of\":{}}}}}]},"
		      "\"data\":{\"app.properties\":\"",
		      i % 4096, (unsigned long)(0x9e3779b9ul * (i % 4096)) & 0xfffffffful,
		      i % 4096, 1000000ul + i);
	if (hl < 0 || (size_t)hl + sizeof(suffix) - 1 > EVENT_BYTES)
		fail("event template of %d bytes does not fit %u", hl, EVENT_BYTES);
	n = (size_t)hl;
	need = EVENT_BYTES - (sizeof(suffix) - 1);
	for (;;) {
		const char *unit = payload_units[u++ % (sizeof(payload_units) / sizeof(payload_units[0]))];
		size_t ul = strlen(unit);

		if (n + ul > need)
			break;
		memcpy(ev + n, unit, ul);
		n += ul;
	}
	memset(ev + n, 'x', need - n);     /* plain filler: never cuts an escape */
	memcpy(ev + need, suffix, sizeof(suffix) - 1);
	return EVENT_BYTES;
}

static const char head[] =
	"HTTP/1.1 200 OK\r\n"
	"Audit-Id: 3f1c9a52-7d0e-4b8a-9c55-1e2f3a4b5c6d\r\n"
	"Cache-Control: no-cache, private\r\n"
	"Content-Type: application/json\r\n"
	"Date: Wed, 01 May 2024 12:00:00 GMT\r\n"
	"X-Kubernetes-Pf-Flowschema-Uid: 5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b\r\n"
	"X-Kubernetes-Pf-Prioritylevel-Uid: 1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d\r\n"
	"Transfer-Encoding: chunked\r\n"
	"\r\n";

/* Builds variant A (span == 0: one event per chunk) or B (chunks of span bytes). */
static void build_stream(unsigned long nevents, size_t span, struct expect *e)
{
	static char pend[SPAN_CHUNK];
	char ev[EVENT_BYTES];
	size_t plen = 0;
	unsigned long i;

	wire_len = 0;
	memset(e, 0, sizeof(*e));
	e->hash = FNV_SEED;
	wire_put(head, sizeof(head) - 1);
	for (i = 0; i < nevents; i++) {
		size_t n = make_event(i, ev), k = 0;

		e->events++;
		e->object_bytes += n - 1;
		e->hash = fnv1a(e->hash, ev, n - 1);
		if (span == 0) {
			wire_chunk(ev, n);
			e->chunks++;
			continue;
		}
		while (k < n) {
			size_t take = n - k < span - plen ? n - k : span - plen;

			memcpy(pend + plen, ev + k, take);
			plen += take;
			k += take;
			if (plen == span) {
				wire_chunk(pend, plen);
				e->chunks++;
				plen = 0;
			}
		}
	}
	if (plen) {
		wire_chunk(pend, plen);
		e->chunks++;
	}
	wire_put("0\r\n\r\n", 5);
}

/* --- the measured work ------------------------------------------------------------------- */

/*
 * Feeds the wire in READ_BYTES reads through the HTTP parser and the framer,
 * the way conn.c and reflector.c do (line mode, as for a watch; pipe_lines). hash: also FNV-1a every object (the check
 * pass); parse: also tokenize every object with kr_json_parse (1) or with
 * kr_json_parse_sel and the reflector's paths (2); frame 0: stop
 * after the HTTP parser (g->object_bytes then counts decoded body bytes).
 */
/* Line mode, as the reflector frames a watch stream; 0 for the structure-only variant. */
static int pipe_lines = 1;

static void run_pipeline(int hash, int parse, int frame, struct got *g)
{
	struct kr_http_resp r;
	struct kr_json_framer f;
	size_t off = 0;

	memset(g, 0, sizeof(*g));
	g->hash = FNV_SEED;
	kr_http_resp_init(&r);
	kr_json_framer_init(&f);
	kr_json_framer_set_lines(&f, pipe_lines);
	kr_json_framer_set_output(&f, out, sizeof(out));
	while (off < wire_len && !g->done) {
		size_t len = wire_len - off < READ_BYTES ? wire_len - off : READ_BYTES;
		const char *p = wire + off;
		size_t o = 0;

		off += len;
		for (;;) {
			const char *body = NULL;
			size_t used = 0, blen = 0;
			int rc = kr_http_resp_feed(&r, p + o, len - o, &used, &body, &blen);

			o += used;
			if (rc == 0)
				break;
			if (rc < 0) {
				g->why = r.error ? r.error : kr_strerror(rc);
				return;
			}
			if (rc == KR_HTTP_HEAD) {
				if (r.status != 200 || !r.chunked) {
					g->why = "head: not 200 chunked";
					return;
				}
			} else if (rc == KR_HTTP_DONE) {
				g->done = 1;
				break;
			} else if (rc == KR_HTTP_BODY && !frame) {
				g->object_bytes += blen;      /* decoder only: body bytes */
			} else if (rc == KR_HTTP_BODY) {
				while (blen > 0) {
					size_t u = 0;
					int fr = kr_json_framer_feed(&f, body, blen, &u);

					body += u;
					blen -= u;
					if (fr == KR_JSON_OBJECT) {
						g->events++;
						g->object_bytes += f.len;
						if (hash)
							g->hash = fnv1a(g->hash, out, f.len);
						if (parse) {
							static const char *const paths[] = {
								"object.metadata.annotations" };
							int nt = parse == 1 ? kr_json_parse(out, f.len, toks, KR_JSON_TOKENS)
									    : kr_json_parse_sel(out, f.len, toks, KR_JSON_TOKENS,
												paths, 1);

							if (nt <= 0) {
								g->why = "kr_json_parse refused a framed event";
								return;
							}
							g->parsed_tokens += (unsigned long)nt;
						}
						kr_json_framer_set_output(&f, out, sizeof(out));
					} else if (fr == KR_JSON_SKIPPED) {
						g->why = "framer skipped an event";
						return;
					} else if (fr < 0) {
						g->why = f.error ? f.error : kr_strerror(fr);
						return;
					}
				}
			}
		}
	}
	if (!g->done)
		g->why = "the response did not end (no KR_HTTP_DONE)";
	else if (frame && kr_json_framer_eof(&f) != 0)
		g->why = "the stream ended inside an object";
}

static const char *volatile sink_ptr;

static void run_memchr(void)
{
	size_t off;

	for (off = 0; off < wire_len; off += READ_BYTES) {
		size_t len = wire_len - off < READ_BYTES ? wire_len - off : READ_BYTES;
		const char *hit = memchr(wire + off, ABSENT_BYTE, len);

		if (hit)
			fail("memchr found byte 0x01 at offset %td of %zu", hit - wire, wire_len);
		sink_ptr = hit;
	}
}

static void run_memcpy(void)
{
	size_t off;

	for (off = 0; off < wire_len; off += READ_BYTES) {
		size_t len = wire_len - off < READ_BYTES ? wire_len - off : READ_BYTES;

		memcpy(copy_dst, wire + off, len);
		/* The copy is observed: the compiler may not drop it. */
		__asm__ volatile("" : : "r"(copy_dst) : "memory");
	}
}

/* --- timing ---------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void check(const struct got *g, const struct expect *e, int with_hash, const char *what)
{
	if (g->why)
		fail("%s: pipeline error: %s", what, g->why);
	if (g->events != e->events)
		fail("%s: framed %lu events, generated %lu", what, g->events, e->events);
	if (g->object_bytes != e->object_bytes)
		fail("%s: framed %llu object bytes, generated %llu", what, g->object_bytes,
		     e->object_bytes);
	if (with_hash && g->hash != e->hash)
		fail("%s: FNV-1a of the framed objects %016llx differs from the generated %016llx",
		     what, (unsigned long long)g->hash, (unsigned long long)e->hash);
}

enum { M_PIPE, M_DECODE, M_PARSE, M_MEMCHR, M_MEMCPY, M_NOLINES, M_SEL, M_N };

static const char *const m_names[M_N] = {
	"decoder+framer", "decoder only (no framer)", "decoder+framer+kr_json_parse",
	"memchr (absent byte)", "memcpy (16 KiB reads)", "decoder+framer, no line mode",
	"decoder+framer+kr_json_parse_sel",
};

static void measure(const char *name, unsigned long nevents, size_t span, int repeats)
{
	static double t[M_N][MAX_REPEATS];
	double med[M_N], lo, hi, mb, pair_chr[MAX_REPEATS], pair_cpy[MAX_REPEATS];
	unsigned long long body_bytes;
	struct expect e;
	struct got g;
	int k, m;

	build_stream(nevents, span, &e);
	body_bytes = e.object_bytes + e.events;   /* every event line with its newline */
	mb = (double)wire_len / 1e6;
	printf("\nvariant %s\n", name);
	printf("  wire: %.1f MB (%zu bytes) = head + %lu events x %u bytes in %zu chunks + last chunk\n",
	       mb, wire_len, e.events, EVENT_BYTES, e.chunks);

	/* The check pass, untimed: also warms caches and branch predictors. */
	run_pipeline(1, 0, 1, &g);
	check(&g, &e, 1, name);
	printf("  check: %lu events framed = %lu generated, %llu object bytes, FNV-1a %016llx: ok\n",
	       g.events, e.events, g.object_bytes, (unsigned long long)g.hash);
	run_memchr();
	run_memcpy();

	for (k = 0; k < repeats; k++) {
		for (m = 0; m < M_N; m++) {
			double t0 = now_s();

			if (m == M_PIPE)
				run_pipeline(0, 0, 1, &g);
			else if (m == M_DECODE)
				run_pipeline(0, 0, 0, &g);
			else if (m == M_PARSE)
				run_pipeline(0, 1, 1, &g);
			else if (m == M_SEL)
				run_pipeline(0, 2, 1, &g);
			else if (m == M_NOLINES) {
				pipe_lines = 0;
				run_pipeline(0, 0, 1, &g);
				pipe_lines = 1;
			} else if (m == M_MEMCHR)
				run_memchr();
			else
				run_memcpy();
			t[m][k] = now_s() - t0;
			if (m == M_PIPE || m == M_PARSE || m == M_NOLINES || m == M_SEL)
				check(&g, &e, 0, name);
			else if (m == M_DECODE && (g.why || g.object_bytes != body_bytes))
				fail("%s: decoder alone gave %llu body bytes, generated %llu (%s)", name,
				     g.object_bytes, body_bytes, g.why ? g.why : "no error");
		}
	}
	for (m = 0; m < M_N; m++) {
		double s[MAX_REPEATS];

		memcpy(s, t[m], sizeof(double) * (size_t)repeats);
		med[m] = median(s, repeats);
		lo = s[0];
		hi = s[repeats - 1];
		printf("  %-30s %9.1f MB/s  (runs %.1f..%.1f MB/s)  %7.1f ms  %6.2f M events/s\n",
		       m_names[m], mb / med[m], mb / hi, mb / lo, med[m] * 1e3,
		       (double)e.events / med[m] / 1e6);
	}
	if (span)
		printf("  (decoder only: with %u-byte chunks the parser reads chunk-size lines and hands\n"
		       "   out spans without reading them, so that figure is framing overhead, not a speed)\n",
		       SPAN_CHUNK);
	/* Each round's ratio pairs runs made seconds apart: steadier than the medians' ratio. */
	for (k = 0; k < repeats; k++) {
		pair_chr[k] = t[M_MEMCHR][k] / t[M_PIPE][k];
		pair_cpy[k] = t[M_MEMCPY][k] / t[M_PIPE][k];
	}
	printf("  ratio decoder+framer : memchr = %.3f : 1 (median of %d paired rounds; "
	       "ratio of medians %.3f)\n", median(pair_chr, repeats), repeats,
	       med[M_MEMCHR] / med[M_PIPE]);
	printf("  ratio decoder+framer : memcpy = %.3f : 1 (median of %d paired rounds; "
	       "ratio of medians %.3f)\n", median(pair_cpy, repeats), repeats,
	       med[M_MEMCPY] / med[M_PIPE]);
	for (k = 0; k < repeats; k++)
		pair_cpy[k] = t[M_PIPE][k] / t[M_NOLINES][k];
	printf("  ratio decoder+framer in line mode : structure only = %.3f : 1 (time; median of %d "
	       "paired rounds)\n", median(pair_cpy, repeats), repeats);
	printf("  cost: decoder+framer %.2f ns/byte, memchr %.3f ns/byte, "
	       "kr_json_parse adds %.0f ns/event, kr_json_parse_sel %.0f\n",
	       med[M_PIPE] * 1e9 / (double)wire_len, med[M_MEMCHR] * 1e9 / (double)wire_len,
	       (med[M_PARSE] - med[M_PIPE]) * 1e9 / (double)e.events,
	       (med[M_SEL] - med[M_PIPE]) * 1e9 / (double)e.events);
	for (k = 0; k < repeats; k++)
		pair_cpy[k] = t[M_PARSE][k] / t[M_SEL][k];
	printf("  ratio decoder+framer+kr_json_parse_sel : decoder+framer+kr_json_parse = %.2f : 1 "
	       "(throughput; median of %d paired rounds)\n", median(pair_cpy, repeats), repeats);
}

static unsigned long arg_num(const char *s, unsigned long lo, unsigned long hi, const char *flag)
{
	char *end;
	unsigned long v = s ? strtoul(s, &end, 10) : 0;

	if (!s || !*s || *end || v < lo || v > hi) {
		fprintf(stderr, "bench_transport: %s needs a number from %lu to %lu\n", flag, lo, hi);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned long nevents = 100000;
	int repeats = 7, i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0)
			nevents = arg_num(argv[++i], 1, MAX_EVENTS, "-n");
		else if (strcmp(argv[i], "-r") == 0)
			repeats = (int)arg_num(argv[++i], 5, MAX_REPEATS, "-r");
		else {
			fprintf(stderr, "usage: bench_transport [-n EVENTS] [-r REPEATS (5..%d)]\n",
				MAX_REPEATS);
			return 2;
		}
	}
	printf("bench_transport: kreflect %s, target %s; %lu ConfigMap MODIFIED events of %u bytes,\n"
	       "fed in %u-byte reads; median of %d runs per figure, measurements interleaved;\n"
	       "MB = 10^6 bytes of wire (HTTP head + chunk framing + events)\n",
	       KR_VERSION, kr_target(), nevents, EVENT_BYTES, READ_BYTES, repeats);
	measure("A: one event per chunk", nevents, 0, repeats);
	measure("B: 16 KiB chunks spanning events", nevents, SPAN_CHUNK, repeats);
	printf("\nbench_transport: ok\n");
	return 0;
}
