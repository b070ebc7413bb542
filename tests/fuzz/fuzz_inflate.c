/*
 * Fuzzes the gzip inflater: the input is the compressed body.
 *
 * It is decoded three ways by the streaming inflater (whole; one byte at a
 * time; pieces whose sizes come from a hash of the input, the consumer taking
 * a random part of each span and handing the rest back) and once by a plain
 * reference decoder below, written from RFC 1951/1952 in the simplest form
 * (the whole input at once, one bit at a time, canonical codes walked bit by
 * bit). All must agree: success with the same bytes, or failure; what the
 * inflater handed out before failing is a prefix of what the reference
 * produced. The output bound is small (FUZZ_MAX_OUT), so that bombs hit it.
 * abort() on any disagreement or broken contract.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inflate.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_OUT (256u * 1024u)

static uint8_t ref_out[FUZZ_MAX_OUT + 1];
static size_t ref_len;

/* --- the reference --------------------------------------------------------------------- */

struct ref {
	const uint8_t *in;
	size_t n, pos;
	unsigned bit;                  /* next bit of in[pos] */
};

/* One bit; -1 past the end. */
static int ref_bit(struct ref *s)
{
	int b;

	if (s->pos >= s->n)
		return -1;
	b = (s->in[s->pos] >> s->bit) & 1;
	if (++s->bit == 8) {
		s->bit = 0;
		s->pos++;
	}
	return b;
}

static long ref_bits(struct ref *s, unsigned n)
{
	long v = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		int b = ref_bit(s);

		if (b < 0)
			return -1;
		v |= (long)b << i;
	}
	return v;
}

static int ref_byte(struct ref *s)
{
	if (s->bit != 0)
		abort();
	return s->pos < s->n ? s->in[s->pos++] : -1;
}

struct code {
	short count[16];
	short symbol[288];
};

/* 0 complete, > 0 incomplete, < 0 over-subscribed (as RFC 1951's construction). */
static int ref_build(struct code *c, const uint8_t *len, int n)
{
	short offs[16];
	int s, l, left = 1;

	memset(c->count, 0, sizeof(c->count));
	for (s = 0; s < n; s++)
		c->count[len[s]]++;
	if (c->count[0] == n)
		return 0;
	for (l = 1; l < 16; l++) {
		left = left * 2 - c->count[l];
		if (left < 0)
			return left;
	}
	offs[1] = 0;
	for (l = 1; l < 15; l++)
		offs[l + 1] = (short)(offs[l] + c->count[l]);
	for (s = 0; s < n; s++)
		if (len[s])
			c->symbol[offs[len[s]]++] = (short)s;
	return left;
}

/* A symbol; -1 past the end of input, -2 no such code. */
static int ref_decode(struct ref *s, const struct code *c)
{
	int code = 0, first = 0, index = 0, l;

	for (l = 1; l < 16; l++) {
		int b = ref_bit(s);

		if (b < 0)
			return -1;
		code |= b;
		if (code - c->count[l] < first)
			return c->symbol[index + (code - first)];
		index += c->count[l];
		first = (first + c->count[l]) << 1;
		code <<= 1;
	}
	return -2;
}

static int ref_put(uint8_t b)
{
	if (ref_len >= FUZZ_MAX_OUT)
		return -1;
	ref_out[ref_len++] = b;
	return 0;
}

static const short lbase[29] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43,
				 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
static const short lext[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
				5, 5, 5, 5, 0 };
static const short dbase[30] = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385,
				 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577 };
static const short dext[30] = { 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10,
				10, 11, 11, 12, 12, 13, 13 };

static int ref_codes(struct ref *s, const struct code *lc, const struct code *dc)
{
	for (;;) {
		int sym = ref_decode(s, lc);
		long len, dist, e;

		if (sym < 0)
			return -1;
		if (sym < 256) {
			if (ref_put((uint8_t)sym) < 0)
				return -1;
			continue;
		}
		if (sym == 256)
			return 0;
		sym -= 257;
		if (sym >= 29 || (e = ref_bits(s, (unsigned)lext[sym])) < 0)
			return -1;
		len = lbase[sym] + e;
		sym = ref_decode(s, dc);
		if (sym < 0 || sym >= 30 || (e = ref_bits(s, (unsigned)dext[sym])) < 0)
			return -1;
		dist = dbase[sym] + e;
		if ((size_t)dist > ref_len)
			return -1;
		while (len--)
			if (ref_put(ref_out[ref_len - (size_t)dist]) < 0)
				return -1;
	}
}

static uint32_t ref_crc(const uint8_t *p, size_t n, uint32_t c)
{
	size_t i;
	int k;

	c = ~c;
	for (i = 0; i < n; i++) {
		c ^= p[i];
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return ~c;
}

/* 0 if in[0..n) is one valid gzip member whose output fits FUZZ_MAX_OUT, else -1. */
static int reference(const uint8_t *in, size_t n)
{
	struct ref s = { in, n, 0, 0 };
	static struct code lc, dc;
	uint8_t len[320];
	int flg, last, b, i;
	long v;

	ref_len = 0;
	if (n < 10 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8 || (in[3] & 0xe0))
		return -1;
	flg = in[3];
	s.pos = 10;
	if (flg & 4) {
		if (s.pos + 2 > n)
			return -1;
		s.pos += 2 + (size_t)(in[s.pos] | in[s.pos + 1] << 8);
		if (s.pos > n)
			return -1;
	}
	for (i = 8; i <= 16; i *= 2)
		if (flg & i) {
			do {
				if ((b = ref_byte(&s)) < 0)
					return -1;
			} while (b != 0);
		}
	if (flg & 2) {
		uint32_t c = ref_crc(in, s.pos, 0);

		if (s.pos + 2 > n || in[s.pos] != (c & 0xff) || in[s.pos + 1] != ((c >> 8) & 0xff))
			return -1;
		s.pos += 2;
	}
	if (s.pos > n || s.pos > KR_INFLATE_HEADER_MAX)
		return -1;
	do {
		if ((last = ref_bit(&s)) < 0 || (v = ref_bits(&s, 2)) < 0)
			return -1;
		if (v == 0) {
			long l, nl;

			if (s.bit) {
				s.bit = 0;
				s.pos++;
			}
			if (s.pos + 4 > n)
				return -1;
			l = in[s.pos] | in[s.pos + 1] << 8;
			nl = in[s.pos + 2] | in[s.pos + 3] << 8;
			s.pos += 4;
			if (l != (~nl & 0xffff))
				return -1;
			for (i = 0; i < l; i++)
				if (s.pos >= n || ref_put(in[s.pos++]) < 0)
					return -1;
		} else if (v == 1) {
			for (i = 0; i < 288; i++)
				len[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
			ref_build(&lc, len, 288);
			for (i = 0; i < 30; i++)
				len[i] = 5;
			ref_build(&dc, len, 30);
			if (ref_codes(&s, &lc, &dc) < 0)
				return -1;
		} else if (v == 2) {
			static const uint8_t order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 };
			long nlen = ref_bits(&s, 5), ndist = ref_bits(&s, 5), ncode = ref_bits(&s, 4);
			int idx = 0, err;

			if (ncode < 0)
				return -1;
			nlen += 257;
			ndist += 1;
			ncode += 4;
			if (nlen > 286 || ndist > 30)
				return -1;
			memset(len, 0, 19);
			for (i = 0; i < ncode; i++) {
				if ((v = ref_bits(&s, 3)) < 0)
					return -1;
				len[order[i]] = (uint8_t)v;
			}
			if (ref_build(&lc, len, 19) != 0)
				return -1;
			while (idx < nlen + ndist) {
				int sym = ref_decode(&s, &lc), rep;
				uint8_t val = 0;

				if (sym < 0)
					return -1;
				if (sym < 16) {
					len[idx++] = (uint8_t)sym;
					continue;
				}
				if (sym == 16) {
					if (idx == 0)
						return -1;
					val = len[idx - 1];
					v = ref_bits(&s, 2);
					rep = 3;
				} else {
					v = ref_bits(&s, sym == 17 ? 3 : 7);
					rep = sym == 17 ? 3 : 11;
				}
				if (v < 0 || idx + rep + v > nlen + ndist)
					return -1;
				for (rep += (int)v; rep > 0; rep--)
					len[idx++] = val;
			}
			if (len[256] == 0)
				return -1;
			err = ref_build(&lc, len, (int)nlen);
			if (err < 0 || (err > 0 && nlen - lc.count[0] != 1))
				return -1;
			err = ref_build(&dc, len + nlen, (int)ndist);
			if (err < 0 || (err > 0 && ndist - dc.count[0] != 1))
				return -1;
			if (ref_codes(&s, &lc, &dc) < 0)
				return -1;
		} else {
			return -1;
		}
	} while (!last);
	if (s.bit) {
		s.bit = 0;
		s.pos++;
	}
	if (s.pos + 8 != n)
		return -1;
	if ((uint32_t)(in[n - 8] | in[n - 7] << 8 | in[n - 6] << 16 | (uint32_t)in[n - 5] << 24) !=
	    ref_crc(ref_out, ref_len, 0))
		return -1;
	if ((uint32_t)(in[n - 4] | in[n - 3] << 8 | in[n - 2] << 16 | (uint32_t)in[n - 1] << 24) !=
	    (uint32_t)ref_len)
		return -1;
	return 0;
}

/* --- the inflater, fed in pieces ---------------------------------------------------------- */

static uint64_t next_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 0 (whole), 1 (byte by byte), 2 (random pieces, partial takes). Returns 0 or the error. */
static int run(const uint8_t *in, size_t len, int mode, uint64_t seed)
{
	static struct kr_inflate z;
	size_t pos = 0, outn = 0;

	kr_inflate_init(&z, FUZZ_MAX_OUT, 0);
	for (;;) {
		size_t want = mode == 0 ? len : mode == 1 ? 1 : (size_t)(next_random(&seed) % 300);
		size_t end = want > len - pos ? len : pos + want;
		int r;

		do {
			const char *out;
			size_t used, olen, take;

			r = kr_inflate_feed(&z, in + pos, end - pos, &used, &out, &olen);
			if (used > end - pos || olen > KR_INFLATE_WINDOW || (r != KR_INFLATE_DATA && olen))
				abort();
			pos += used;
			if (r < 0) {
				if (!z.error || kr_inflate_feed(&z, in, len, &used, &out, &olen) != r || used)
					abort();   /* a failed inflater stays failed, with a reason */
				return r;
			}
			take = olen;
			if (mode == 2 && olen)
				take = (size_t)(next_random(&seed) % (olen + 1));
			/* Every byte handed out is the reference's byte at that place. */
			if (outn + take > ref_len || (take && memcmp(ref_out + outn, out, take) != 0))
				abort();
			outn += take;
			if (r == KR_INFLATE_DATA)
				kr_inflate_unread(&z, olen - take);
		} while (r == KR_INFLATE_DATA || (r == KR_INFLATE_END && pos < end));
		if (r == KR_INFLATE_END && pos == len) {
			if (outn != ref_len)
				abort();
			return 0;
		}
		if (r == KR_INFLATE_END)
			continue;      /* more input: it must fail on it */
		if (r != 0 || pos != end)
			abort();
		if (pos == len) {
			r = kr_inflate_finish(&z);
			if (r == KR_INFLATE_END) {
				if (outn != ref_len)
					abort();
				return 0;
			}
			if (r >= 0 || !z.error)
				abort();
			return r;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seed = 0x9E3779B97F4A7C15ULL ^ size;
	int want = reference(data, size), mode;
	size_t i;

	for (i = 0; i < size && i < 64; i++)
		seed = (seed ^ data[i]) * 1099511628211ULL;
	seed |= 1;
	for (mode = 0; mode < 3; mode++) {
		int got = run(data, size, mode, seed);

		if ((want == 0) != (got == 0))
			abort();
	}
	return 0;
}
