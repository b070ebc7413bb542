/*
 * Fuzzes the object framer. Input: byte 0 chooses the output capacity, byte 1
 * seeds the piece sizes (its low bit: line mode, as for a watch stream), the
 * rest is the stream. The stream is framed twice:
 * whole with room for anything, and in pieces with the chosen capacity. Both
 * runs must agree object for object (an object over the capacity is skipped
 * with its true size and prefix), the output must never pass the capacity,
 * every framed object must frame to itself, and a stream that is one valid
 * JSON object must frame to exactly that object (in line mode: if it has no
 * newline; an object framed in line mode never has one).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 4096
#define BIG_CAP (1u << 20)
#define CANARY 32

struct event {
	int r;           /* what feed returned, or 100 + eof's result */
	size_t at;       /* stream offset after the call */
	size_t len;      /* object length (or skipped size) */
	size_t off;      /* where the previous event left the stream */
};

static struct event whole[MAX_EVENTS], pieces[MAX_EVENTS];
static char big_out[BIG_CAP];
static char small_out[512 + CANARY];
static char again_out[BIG_CAP];
static kr_json_tok toks[1 << 14];
static int lines;          /* line mode for this input */

static uint32_t rng_next(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* A piece size: mostly small, sometimes large, never zero. */
static size_t piece_size(uint32_t *s)
{
	uint32_t r = rng_next(s);

	return 1 + (r >> 8) % (1u << (r % 12));
}

static void check_reframes(const char *obj, size_t len)
{
	struct kr_json_framer f;
	size_t used;

	if (len < 2 || obj[0] != '{' || obj[len - 1] != '}')
		abort();
	kr_json_framer_init(&f);
	kr_json_framer_set_output(&f, again_out, len);
	if (kr_json_framer_feed(&f, obj, len, &used) != KR_JSON_OBJECT || used != len ||
	    f.len != len || memcmp(again_out, obj, len) != 0)
		abort();
	if (kr_json_framer_eof(&f) != 0)
		abort();
}

/* Frames stream[0..n) and records every outcome; returns the number recorded. */
static int frame(const char *stream, size_t n, char *out, size_t cap, uint32_t seed,
		 struct event *ev)
{
	struct kr_json_framer f;
	size_t at = 0, prev = 0;
	int k = 0, r;

	kr_json_framer_init(&f);
	kr_json_framer_set_lines(&f, lines);
	kr_json_framer_set_output(&f, out, cap);
	if (out == small_out)
		memset(small_out + cap, 0x5a, CANARY);
	while (at < n && k < MAX_EVENTS - 1) {
		size_t len = seed ? piece_size(&seed) : n - at, used;

		if (len > n - at)
			len = n - at;
		r = kr_json_framer_feed(&f, stream + at, len, &used);
		if (used > len || f.len > cap)
			abort();
		if (r == 0 && used != len)
			abort();
		at += used;
		if (r == 0)
			continue;
		ev[k].r = r;
		ev[k].at = at;
		ev[k].off = prev;
		ev[k].len = r == KR_JSON_SKIPPED ? f.skipped_bytes : r == KR_JSON_OBJECT ? f.len : 0;
		k++;
		if (r < 0) {
			size_t again;

			if (f.error == NULL || kr_json_framer_feed(&f, stream + at, n - at, &again) != r ||
			    again != 0)
				abort();
			break;
		}
		if (r == KR_JSON_SKIPPED) {
			if (f.skipped_bytes <= cap || f.len != cap || f.skipped_bytes > at - prev ||
			    memcmp(out, stream + at - f.skipped_bytes, cap) != 0)
				abort();
		} else if (r == KR_JSON_OBJECT) {
			if (f.len > at - prev || memcmp(out, stream + at - f.len, f.len) != 0)
				abort();
			if (lines && memchr(out, '\n', f.len) != NULL)
				abort();
			check_reframes(out, f.len);
		} else {
			abort();
		}
		prev = at;
		kr_json_framer_set_output(&f, out, cap);
	}
	if (out == small_out)
		for (size_t i = cap; i < cap + CANARY; i++)
			if (small_out[i] != 0x5a)
				abort();
	if (k < MAX_EVENTS - 1 && (k == 0 || ev[k - 1].r >= 0)) {
		ev[k].r = 100 + kr_json_framer_eof(&f);
		ev[k].at = at;
		ev[k].off = ev[k].len = 0;
		k++;
	}
	return k;
}

/* Objects start where the whitespace before them ends. */
static size_t object_start(const char *s, size_t from, size_t n)
{
	while (from < n && (s[from] == ' ' || s[from] == '\n' || s[from] == '\r' || s[from] == '\t'))
		from++;
	return from;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *stream;
	size_t n, cap;
	uint32_t seed;
	int nw, np, i;

	if (size < 2 || size - 2 > BIG_CAP)
		return 0;
	cap = data[0] < 200 ? data[0] : (size_t)(data[0] - 200) * 8;
	seed = 0x9e3779b9u ^ data[1] ^ ((uint32_t)size << 8);
	lines = data[1] & 1;
	stream = (const char *)data + 2;
	n = size - 2;

	nw = frame(stream, n, big_out, BIG_CAP, 0, whole);
	np = frame(stream, n, small_out, cap, seed, pieces);
	if (nw != np)
		abort();
	for (i = 0; i < nw; i++) {
		const struct event *w = &whole[i], *p = &pieces[i];

		if (w->at != p->at || w->len != p->len)
			abort();
		if (w->r == KR_JSON_OBJECT) {
			if (p->r != (w->len <= cap ? KR_JSON_OBJECT : KR_JSON_SKIPPED))
				abort();
			if (object_start(stream, w->off, n) + w->len != w->at)
				abort();
		} else if (w->r != p->r) {
			abort();
		}
	}

	/* One valid object, whitespace around: exactly that object, then a clean end. */
	{
		int t = kr_json_parse(stream, n, toks, (int)(sizeof(toks) / sizeof(toks[0])));

		if (t > 0 && !(lines && memchr(stream + toks[0].start, '\n',
					       (size_t)(toks[0].end - toks[0].start)) != NULL)) {
			if (nw != 2 || whole[0].r != KR_JSON_OBJECT || whole[1].r != 100 ||
			    whole[0].len != (size_t)toks[0].end - (size_t)toks[0].start ||
			    whole[0].at != (size_t)toks[0].end)
				abort();
		}
	}
	return 0;
}
