/*
 * The inflater against zlib's output (tests/inflate/, written by vectors.py
 * from the same generator as plain_text below): every block type and header
 * field, fed whole, one byte at a time, split at every byte boundary, with
 * the consumer taking only part of each span; then every error it must name:
 * corrupt headers, codes and distances, truncation at every byte, CRC-32 and
 * ISIZE, bytes after the end, and the output bounds a gzip bomb hits.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "inflate.h"
#include "kreflect.h"
#include "test.h"

static struct kr_inflate z;
static unsigned char gz[96 * 1024];
static char plain[256 * 1024];
static char got[256 * 1024];

/* tests/inflate/vectors.py's plain_text(items), byte for byte. */
static size_t plain_text(int items)
{
	static const char *const words[16] = {
		"alpha ", "beta=", "gamma-", "delta_", "eps", "zeta1 ", "eta22=", "theta",
		"iota ", "kappa.", "lambda ", "mu", "nu9 ", "xi=x ", "omicron-", "pi ",
	};
	static size_t start[400], len[400];
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	size_t n = 0;
	int i;

	n += (size_t)snprintf(plain + n, sizeof(plain) - n, "%s", "{\"kind\":\"ConfigMapList\",\"items\":[");
	for (i = 0; i < items; i++) {
		uint64_t r;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		r = x >> 33;
		if (i)
			plain[n++] = ',';
		n += (size_t)snprintf(plain + n, sizeof(plain) - n,
				      "{\"metadata\":{\"name\":\"cm-%05d\",\"resourceVersion\":\"%d\"},"
				      "\"data\":{\"k\":\"", i, 1000 + i);
		start[i] = n;
		if (i % 7 == 6 && i >= 20) {
			memmove(plain + n, plain + start[i - 20], len[i - 20]);
			n += len[i - 20];
		} else if (i % 11 == 10) {
			size_t k, c = 300 + (size_t)(r % 3000);

			for (k = 0; k < c; k++)
				plain[n++] = 'a';
		} else {
			uint64_t k, c = 2 + r % 200;

			for (k = 0; k < c; k++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				n += (size_t)snprintf(plain + n, sizeof(plain) - n, "%s", words[(x >> 40) % 16]);
			}
		}
		len[i] = n - start[i];
		n += (size_t)snprintf(plain + n, sizeof(plain) - n, "%s", "\"}}");
	}
	n += (size_t)snprintf(plain + n, sizeof(plain) - n, "%s", "]}");
	return n;
}

static size_t load(const char *name)
{
	char path[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/inflate/%s", kr_test_dir(), name);
	f = fopen(path, "rb");
	if (!f)
		return 0;
	n = fread(gz, 1, sizeof(gz), f);
	fclose(f);
	return n;
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * Decodes in[0..n) fed in pieces of `piece` bytes (0: random sizes), the
 * consumer taking all of each span or (partial) a random part of it.
 * Returns KR_INFLATE_END, or the error; *out_len the bytes decoded into got.
 */
static int decode_all(const unsigned char *in, size_t n, size_t piece, int partial, size_t *out_len)
{
	size_t off = 0, outn = 0;

	kr_inflate_init(&z, KR_INFLATE_MAX_OUTPUT, KR_INFLATE_MAX_RATIO);
	for (;;) {
		size_t p = piece ? piece : (size_t)(next() % 700);
		size_t used, olen;
		const char *out;
		int r;

		if (p > n - off)
			p = n - off;
		r = kr_inflate_feed(&z, in + off, p, &used, &out, &olen);
		if (used > p)
			return -100;
		off += used;
		if (r < 0) {
			*out_len = outn;
			return r;
		}
		if (r == KR_INFLATE_DATA) {
			size_t take = olen;

			if (partial && olen > 0)
				take = (size_t)(next() % (olen + 1));
			if (outn + take > sizeof(got))
				return -101;
			memcpy(got + outn, out, take);
			outn += take;
			kr_inflate_unread(&z, olen - take);
			continue;
		}
		if (r == KR_INFLATE_END && off < n)
			continue;      /* what follows must make it fail */
		if (r == KR_INFLATE_END) {
			*out_len = outn;
			return KR_INFLATE_END;
		}
		/* 0: all of the piece used */
		if (used != p)
			return -103;
		if (off == n) {
			*out_len = outn;
			return kr_inflate_finish(&z);
		}
	}
}

static const struct {
	const char *file;
	int items;
} vectors[] = {
	{ "list-l1.gz", 300 }, { "list-l6.gz", 300 }, { "list-l9.gz", 300 },
	{ "list-fixed.gz", 300 }, { "list-stored.gz", 100 }, { "list-huffman.gz", 100 },
	{ "list-rle.gz", 100 }, { "small-l6.gz", 6 }, { "small-fields.gz", 6 },
	{ "small-fixed.gz", 6 }, { "small-stored.gz", 6 }, { "empty.gz", -1 },
};

static size_t expected(int items)
{
	return items < 0 ? 0 : plain_text(items);
}

KR_TEST(inflate, zlib_vectors_whole_bytewise_random_partial)
{
	size_t i;

	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		size_t n = load(vectors[i].file), want = expected(vectors[i].items), outn = 0;

		check(n > 0);
		check(decode_all(gz, n, n, 0, &outn) == KR_INFLATE_END);
		check(outn == want && memcmp(got, plain, want) == 0);
		check(z.total_in == n && z.total_out == want);
		check(decode_all(gz, n, 1, 0, &outn) == KR_INFLATE_END);
		check(outn == want && memcmp(got, plain, want) == 0);
		check(decode_all(gz, n, 0, 1, &outn) == KR_INFLATE_END);
		check(outn == want && memcmp(got, plain, want) == 0);
		check(decode_all(gz, n, 1, 1, &outn) == KR_INFLATE_END);
		check(outn == want && memcmp(got, plain, want) == 0);
	}
	return 0;
}

/* Two pieces cut at every byte boundary, and three around every boundary. */
KR_TEST(inflate, split_at_every_byte)
{
	static const char *const small[] = { "small-l6.gz", "small-fields.gz", "small-fixed.gz",
					     "small-stored.gz", "empty.gz" };
	size_t i;

	for (i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
		size_t n = load(small[i]), want = expected(i == 4 ? -1 : 6), k;

		check(n > 0);
		for (k = 0; k <= n; k++) {
			const char *out;
			size_t used, olen, outn = 0, off = 0, cut[3] = { k, k + 3 <= n ? 3 : n - k, 0 };
			int r = 0, part;

			cut[2] = n - cut[0] - cut[1];
			kr_inflate_init(&z, KR_INFLATE_MAX_OUTPUT, KR_INFLATE_MAX_RATIO);
			for (part = 0; part < 3; part++) {
				size_t end = off + cut[part];

				do {
					r = kr_inflate_feed(&z, gz + off, end - off, &used, &out, &olen);
					check(r >= 0);
					off += used;
					if (olen)
						memcpy(got + outn, out, olen);
					outn += olen;
				} while (r == KR_INFLATE_DATA);
				check(off == end);
			}
			check(kr_inflate_finish(&z) == KR_INFLATE_END);
			check(outn == want && memcmp(got, plain, want) == 0);
		}
	}
	return 0;
}

KR_TEST(inflate, truncated_at_every_byte)
{
	size_t n = load("small-l6.gz"), k, outn;

	check(n > 0);
	for (k = 0; k < n; k++) {
		int r = decode_all(gz, k, 0, 0, &outn);

		check(r == KR_EPROTO);
		check(z.error && strstr(z.error, "truncated"));
	}
	return 0;
}

static int expect_error(const unsigned char *in, size_t n, int err, const char *why)
{
	size_t outn;
	int r = decode_all(in, n, n, 0, &outn);

	if (r != err || !z.error || !strstr(z.error, why))
		return 1;
	/* A failed decoder stays failed. */
	if (decode_all(in, n, 1, 0, &outn) != err)
		return 1;
	return 0;
}

KR_TEST(inflate, header_errors)
{
	size_t n = load("small-fields.gz"), i;
	unsigned char saved;

	check(n > 20);
	gz[0] = 0x1e;
	check(expect_error(gz, n, KR_EPROTO, "bad magic") == 0);
	gz[0] = 0x1f;
	gz[2] = 7;
	check(expect_error(gz, n, KR_EPROTO, "method other than deflate") == 0);
	gz[2] = 8;
	saved = gz[3];
	gz[3] |= 0x20;
	check(expect_error(gz, n, KR_EPROTO, "reserved") == 0);
	gz[3] = saved;
	/* The header CRC16 covers the name: change one letter of it. */
	for (i = 10; i < 40; i++)
		if (gz[i] == 'l') {
			gz[i] = 'L';
			break;
		}
	check(i < 40);
	check(expect_error(gz, n, KR_EPROTO, "header CRC") == 0);
	/* A name longer than KR_INFLATE_HEADER_MAX. */
	memcpy(gz, "\x1f\x8b\x08\x08\0\0\0\0\0\xff", 10);
	memset(gz + 10, 'n', KR_INFLATE_HEADER_MAX);
	check(expect_error(gz, 10 + KR_INFLATE_HEADER_MAX, KR_ETOOBIG, "KR_INFLATE_HEADER_MAX") == 0);
	/* ...and one that just fits. */
	gz[KR_INFLATE_HEADER_MAX - 1] = 0;
	memcpy(gz + KR_INFLATE_HEADER_MAX, "\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00", 10);
	{
		size_t outn;

		check(decode_all(gz, KR_INFLATE_HEADER_MAX + 10, 7, 0, &outn) == KR_INFLATE_END);
		check(outn == 0);
	}
	return 0;
}

KR_TEST(inflate, trailer_errors_and_bytes_after)
{
	size_t n = load("list-l6.gz");

	check(n > 0);
	gz[n - 8] ^= 1;
	check(expect_error(gz, n, KR_EPROTO, "CRC-32 mismatch") == 0);
	gz[n - 8] ^= 1;
	gz[n - 1] ^= 1;
	check(expect_error(gz, n, KR_EPROTO, "ISIZE mismatch") == 0);
	gz[n - 1] ^= 1;
	gz[n] = 0;
	check(expect_error(gz, n + 1, KR_EPROTO, "after the end") == 0);
	/* A second member is bytes after the end too. */
	memcpy(gz + n, gz, n);
	check(expect_error(gz, 2 * n, KR_EPROTO, "after the end") == 0);
	return 0;
}

/* --- hand-made deflate streams ---------------------------------------------------- */

struct bw {
	unsigned char *p;
	size_t n;
	uint32_t acc;
	unsigned nacc;
};

static void bits(struct bw *w, uint32_t v, unsigned n)
{
	w->acc |= v << w->nacc;
	w->nacc += n;
	while (w->nacc >= 8) {
		w->p[w->n++] = (unsigned char)w->acc;
		w->acc >>= 8;
		w->nacc -= 8;
	}
}

/* A Huffman code: most significant bit first. */
static void code(struct bw *w, uint32_t c, unsigned n)
{
	while (n--)
		bits(w, (c >> n) & 1u, 1);
}

static void fixed_lit(struct bw *w, unsigned sym)
{
	if (sym < 144)
		code(w, 0x30 + sym, 8);
	else if (sym < 256)
		code(w, 0x190 + sym - 144, 9);
	else if (sym < 280)
		code(w, sym - 256, 7);
	else
		code(w, 0xc0 + sym - 280, 8);
}

static void start(struct bw *w)
{
	memcpy(gz, "\x1f\x8b\x08\0\0\0\0\0\0\xff", 10);
	w->p = gz;
	w->n = 10;
	w->acc = 0;
	w->nacc = 0;
}

static size_t finish(struct bw *w)
{
	if (w->nacc)
		bits(w, 0, 8 - w->nacc);
	memset(gz + w->n, 0, 8);
	return w->n + 8;
}

KR_TEST(inflate, block_errors)
{
	struct bw w;
	size_t n;

	start(&w);
	bits(&w, 1, 1);
	bits(&w, 3, 2);
	check(expect_error(gz, finish(&w), KR_EPROTO, "block type 3") == 0);

	start(&w);
	bits(&w, 1, 1);
	bits(&w, 0, 2);
	bits(&w, 0, 5);
	bits(&w, 5, 16);
	bits(&w, 0xfffb, 16);  /* ~5 would be 0xfffa */
	check(expect_error(gz, finish(&w), KR_EPROTO, "complement") == 0);

	/* Fixed codes: a match before any output. */
	start(&w);
	bits(&w, 1, 1);
	bits(&w, 1, 2);
	fixed_lit(&w, 257);    /* length 3 */
	code(&w, 0, 5);        /* distance 1 */
	check(expect_error(gz, finish(&w), KR_EPROTO, "too far back") == 0);

	/* One byte out, then distance 2. */
	start(&w);
	bits(&w, 1, 1);
	bits(&w, 1, 2);
	fixed_lit(&w, 'x');
	fixed_lit(&w, 257);
	code(&w, 1, 5);
	check(expect_error(gz, finish(&w), KR_EPROTO, "too far back") == 0);

	/* ...distance 1 is fine: "xxxx". */
	start(&w);
	bits(&w, 1, 1);
	bits(&w, 1, 2);
	fixed_lit(&w, 'x');
	fixed_lit(&w, 257);
	code(&w, 0, 5);
	fixed_lit(&w, 256);
	n = finish(&w);
	memcpy(gz + n - 8, "\x77\x64\x15\x6c\x04\0\0\0", 8);  /* crc32("xxxx"), 4 */
	{
		size_t outn;

		check(decode_all(gz, n, 1, 0, &outn) == KR_INFLATE_END);
		check(outn == 4 && memcmp(got, "xxxx", 4) == 0);
	}

	start(&w);
	bits(&w, 1, 1);
	bits(&w, 1, 2);
	fixed_lit(&w, 286);
	check(expect_error(gz, finish(&w), KR_EPROTO, "286 or 287") == 0);

	start(&w);
	bits(&w, 1, 1);
	bits(&w, 1, 2);
	fixed_lit(&w, 'x');
	fixed_lit(&w, 257);
	code(&w, 30, 5);
	check(expect_error(gz, finish(&w), KR_EPROTO, "invalid distance code") == 0);
	return 0;
}

/*
 * A dynamic block header whose code length code gives length 1..3 bits to
 * the code-length symbols in clen[0..19) (0: unused); hlit, hdist as counts.
 */
static void dyn_header(struct bw *w, unsigned hlit, unsigned hdist, const uint8_t clen[19])
{
	static const uint8_t order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15 };
	unsigned i;

	bits(w, 1, 1);
	bits(w, 2, 2);
	bits(w, hlit - 257, 5);
	bits(w, hdist - 1, 5);
	bits(w, 19 - 4, 4);
	for (i = 0; i < 19; i++)
		bits(w, clen[order[i]], 3);
}

KR_TEST(inflate, dynamic_code_errors)
{
	uint8_t clen[19];
	struct bw w;
	unsigned i;

	/* Four code-length symbols of one bit each: over-subscribed. */
	memset(clen, 0, sizeof(clen));
	clen[0] = clen[16] = clen[17] = clen[18] = 1;
	start(&w);
	dyn_header(&w, 257, 1, clen);
	check(expect_error(gz, finish(&w), KR_EPROTO, "invalid code length code") == 0);

	/* One code-length symbol of two bits: incomplete. */
	memset(clen, 0, sizeof(clen));
	clen[0] = 2;
	start(&w);
	dyn_header(&w, 257, 1, clen);
	check(expect_error(gz, finish(&w), KR_EPROTO, "invalid code length code") == 0);

	/* Code-length symbols 0 ('0') and 1 ('1'). */
	memset(clen, 0, sizeof(clen));
	clen[0] = clen[1] = 1;
	/* every literal/length of one bit: over-subscribed */
	start(&w);
	dyn_header(&w, 257, 1, clen);
	for (i = 0; i < 258; i++)
		code(&w, 1, 1);
	check(expect_error(gz, finish(&w), KR_EPROTO, "invalid literal/length code (over") == 0);
	/* no end-of-block code */
	start(&w);
	dyn_header(&w, 257, 1, clen);
	code(&w, 1, 1);
	code(&w, 1, 1);
	for (i = 2; i < 258; i++)
		code(&w, 0, 1);
	check(expect_error(gz, finish(&w), KR_EPROTO, "end-of-block") == 0);

	/* Symbols 0 ('0'), 1 ('10'), 2 ('11'): literal 0 of one bit, 256 of two: incomplete. */
	memset(clen, 0, sizeof(clen));
	clen[0] = 1;
	clen[1] = clen[2] = 2;
	start(&w);
	dyn_header(&w, 257, 1, clen);
	code(&w, 2, 2);        /* literal 0: length 1 */
	for (i = 1; i < 256; i++)
		code(&w, 0, 1);
	code(&w, 3, 2);        /* 256: length 2 */
	code(&w, 2, 2);        /* distance 0: length 1 */
	check(expect_error(gz, finish(&w), KR_EPROTO, "invalid literal/length code") == 0);

	/* Symbols 16 ('0') and 0 ('1'): a repeat with nothing before it. */
	memset(clen, 0, sizeof(clen));
	clen[16] = clen[0] = 1;
	start(&w);
	dyn_header(&w, 257, 1, clen);
	code(&w, 1, 1);        /* 0 sorts first as '0', so '1' is 16, first */
	bits(&w, 0, 2);
	check(expect_error(gz, finish(&w), KR_EPROTO, "nothing before it") == 0);

	/* HLIT of 287 or 288 codes. */
	start(&w);
	bits(&w, 1, 1);
	bits(&w, 2, 2);
	bits(&w, 30, 5);
	bits(&w, 0, 5);
	bits(&w, 0, 4);
	check(expect_error(gz, finish(&w), KR_EPROTO, "too many length or distance codes") == 0);
	return 0;
}

/* 16 MiB of zeros in 16 KiB: the ratio bound stops it, then the total bound. */
KR_TEST(inflate, bomb_hits_the_output_bounds)
{
	size_t n = load("bomb.gz"), off = 0, outn = 0, used, olen;
	const char *out;
	int r;

	check(n > 0 && n < 20000);
	kr_inflate_init(&z, KR_INFLATE_MAX_OUTPUT, KR_INFLATE_MAX_RATIO);
	do {
		r = kr_inflate_feed(&z, gz + off, n - off, &used, &out, &olen);
		off += used;
		outn += olen;
	} while (r == KR_INFLATE_DATA);
	check(r == KR_ETOOBIG && strstr(z.error, "compressed size"));
	/* Output stopped at the bound's first check past 1 MiB: one window at most. */
	check(outn <= (1u << 20) + KR_INFLATE_WINDOW && outn > (1u << 20) - KR_INFLATE_WINDOW);

	/* Without the ratio bound, the total bound. */
	kr_inflate_init(&z, 5u << 20, 0);
	off = outn = 0;
	do {
		r = kr_inflate_feed(&z, gz + off, n - off, &used, &out, &olen);
		off += used;
		outn += olen;
	} while (r == KR_INFLATE_DATA);
	check(r == KR_ETOOBIG && strstr(z.error, "larger than its bound"));
	check(outn <= 5u << 20);
	check(outn > (5u << 20) - KR_INFLATE_WINDOW);

	/* Without either, all of it (and its CRC) comes out. */
	kr_inflate_init(&z, 1ULL << 40, 0);
	off = outn = 0;
	do {
		r = kr_inflate_feed(&z, gz + off, n - off, &used, &out, &olen);
		off += used;
		outn += olen;
		if (olen && (out[0] != 0 || out[olen - 1] != 0))
			return __LINE__;
	} while (r == KR_INFLATE_DATA);
	check(r == 0 || r == KR_INFLATE_END);
	if (r == 0)
		check(kr_inflate_finish(&z) == KR_INFLATE_END);
	check(outn == 16u << 20);
	return 0;
}
