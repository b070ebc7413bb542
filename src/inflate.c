#include "inflate.h"

#include <string.h>

#include "kreflect.h"

/*
 * A stream is decoded in states, each resumable where the input ran out:
 * every step first makes sure the bits it needs are buffered, and only then
 * takes them, so a step never half happens. Header and trailer bytes are
 * taken whole; the bit buffer holds up to 32 bits, least significant first.
 */
enum state {
	S_HEADER,                      /* the 10 fixed bytes */
	S_XLEN,                        /* FEXTRA's length */
	S_EXTRA,
	S_NAME,                        /* FNAME, up to its NUL */
	S_COMMENT,                     /* FCOMMENT, up to its NUL */
	S_HCRC,                        /* FHCRC */
	S_BLOCK,                       /* BFINAL and BTYPE */
	S_STORED_LEN,                  /* LEN and NLEN */
	S_STORED,
	S_TABLE,                       /* HLIT, HDIST, HCLEN */
	S_CLEN,                        /* code length code lengths */
	S_LENS,                        /* literal/length and distance code lengths */
	S_CODES,                       /* a literal/length symbol */
	S_LENEXT,                      /* its extra bits */
	S_DIST,                        /* a distance symbol */
	S_DISTEXT,                     /* its extra bits */
	S_COPY,                        /* the match, as far as the window allows */
	S_TRAILER,                     /* CRC32 and ISIZE */
	S_END,
	S_FAILED,
};

/* Why run() stopped, besides an error. */
enum { R_NEED = 0, R_FULL = 2, R_END = 3 };  /* 1: go on (a step ended) */

#define FLG_HCRC 0x02
#define FLG_EXTRA 0x04
#define FLG_NAME 0x08
#define FLG_COMMENT 0x10
#define FLG_RESERVED 0xe0

#define FAST_MASK ((1u << KR_INFLATE_FAST_BITS) - 1)
#define RATIO_FLOOR (1ULL << 20)

struct in {
	const uint8_t *p;
	size_t left;
};


static const uint16_t len_base[29] = {
	3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
	35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
};
static const uint8_t len_extra[29] = {
	0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
};
static const uint16_t dist_base[30] = {
	1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
	257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
};
static const uint8_t dist_extra[30] = {
	0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
};
static const uint8_t clen_order[19] = {
	16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
};

/*
 * CRC-32 four bytes at a time (slicing by 4): a byte-wise table cost 9
 * instructions per decoded byte, two thirds of all inflating (make bench,
 * callgrind); this costs about a third of that. The tables are built in z
 * at each init (about 5,000 instructions) instead of 4 KB of .rodata.
 */
static void crc_tables(uint32_t t[4][256])
{
	uint32_t c;
	unsigned n, k;

	for (n = 0; n < 256; n++) {
		c = n;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		t[0][n] = c;
	}
	for (n = 0; n < 256; n++)
		for (k = 1; k < 4; k++)
			t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xff];
}

static int fail(struct kr_inflate *z, int err, const char *why)
{
	z->state = S_FAILED;
	z->err = err;
	z->error = why;
	return err;
}

void kr_inflate_init(struct kr_inflate *z, unsigned long long max_out, unsigned max_ratio)
{
	/* The tables and the window need no clearing: each is written before it is read. */
	z->error = NULL;
	z->total_in = 0;
	z->total_out = 0;
	z->max_out = max_out;
	z->max_ratio = max_ratio;
	z->state = S_HEADER;
	z->err = 0;
	z->bits = 0;
	z->nbits = 0;
	z->hdr_len = 0;
	z->flags = 0;
	z->skip = 0;
	z->hdr_crc = 0xffffffffu;
	z->last = 0;
	z->tlen = 0;
	z->crc = 0xffffffffu;
	z->wpos = z->rpos = z->cpos = 0;
	z->whave = 0;
	z->span = 0;
	crc_tables(z->crc_table);
}

void kr_inflate_reset(struct kr_inflate *z)
{
	kr_inflate_init(z, z->max_out, z->max_ratio);
}

static uint32_t crc_update(const uint32_t t[4][256], uint32_t c, const unsigned char *p, size_t n)
{
	for (; n >= 4; n -= 4, p += 4) {
		c ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		c = t[3][c & 0xff] ^ t[2][(c >> 8) & 0xff] ^ t[1][(c >> 16) & 0xff] ^ t[0][c >> 24];
	}
	while (n--)
		c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

/* Takes window[cpos, wpos) into the CRC and the output count. */
static void crc_upto(struct kr_inflate *z)
{
	z->crc = crc_update(z->crc_table, z->crc, z->window + z->cpos, z->wpos - z->cpos);
	z->total_out += z->wpos - z->cpos;
	z->cpos = z->wpos;
}

/* --- bits --------------------------------------------------------------------------- */

/* Buffers at least n bits (n <= 25, or 32 on a byte boundary); 0 if the input ran out first. */
static int need(struct kr_inflate *z, struct in *c, unsigned n)
{
	while (z->nbits < n) {
		if (c->left == 0)
			return 0;
		z->bits |= (uint32_t)*c->p++ << z->nbits;
		z->nbits += 8;
		c->left--;
	}
	return 1;
}

static unsigned take(struct kr_inflate *z, unsigned n)
{
	unsigned v = z->bits & ((1u << n) - 1);

	z->bits >>= n;
	z->nbits -= n;
	return v;
}

/* Buffers as many bits as the input allows, at least 25 if it has them. */
static void fill(struct kr_inflate *z, struct in *c)
{
	while (z->nbits <= 24 && c->left) {
		z->bits |= (uint32_t)*c->p++ << z->nbits;
		z->nbits += 8;
		c->left--;
	}
}

/* --- Huffman codes ---------------------------------------------------------------- */

/*
 * Builds h from the code lengths of n symbols. Returns 0 for a complete code
 * (or no code at all), > 0 for an incomplete one, < 0 for an over-subscribed
 * one (then h is unusable).
 */
static int construct(struct kr_inflate_huff *h, const uint8_t *lengths, unsigned n)
{
	uint16_t offs[16];
	unsigned s, len, idx, code;
	int left;

	memset(h->count, 0, sizeof(h->count));
	for (s = 0; s < n; s++)
		h->count[lengths[s]]++;
	memset(h->fast, 0, sizeof(h->fast));
	if (h->count[0] == n)
		return 0;              /* no codes: any symbol read is an error */
	left = 1;
	for (len = 1; len < 16; len++) {
		left <<= 1;
		left -= h->count[len];
		if (left < 0)
			return left;
	}
	offs[1] = 0;
	for (len = 1; len < 15; len++)
		offs[len + 1] = (uint16_t)(offs[len] + h->count[len]);
	for (s = 0; s < n; s++)
		if (lengths[s] != 0)
			h->symbol[offs[lengths[s]]++] = (uint16_t)s;
	/* Short codes into the lookup: canonical codes, bit-reversed as they arrive. */
	idx = 0;
	code = 0;
	for (len = 1; len <= KR_INFLATE_FAST_BITS; len++) {
		unsigned k;

		for (k = 0; k < h->count[len]; k++, code++) {
			unsigned rev = 0, b, i;

			for (b = 0; b < len; b++)
				rev |= ((code >> b) & 1u) << (len - 1 - b);
			for (i = rev; i <= FAST_MASK; i += 1u << len)
				h->fast[i] = (uint16_t)(h->symbol[idx + k] | len << 12);
		}
		idx += h->count[len];
		code <<= 1;
	}
	return left;
}

#define NEED_BITS (-1)
#define BAD_CODE (-2)

/*
 * The symbol at the head of bits[0..nbits) in h, its length in *len, nothing
 * taken: NEED_BITS if the code runs past nbits, BAD_CODE if no code matches.
 */
static int decode(const struct kr_inflate_huff *h, uint32_t bits, unsigned nbits, unsigned *len)
{
	unsigned e = h->fast[bits & FAST_MASK];
	int code = 0, first = 0, index = 0;
	unsigned l;

	if (e != 0 && (e >> 12) <= nbits) {
		*len = e >> 12;
		return (int)(e & 0xfff);
	}
	/* Longer codes (or too few bits for the lookup): one bit at a time. */
	for (l = 1; l < 16; l++) {
		int count = h->count[l];

		if (l > nbits)
			return NEED_BITS;
		code |= (int)((bits >> (l - 1)) & 1u);
		if (code - count < first) {
			*len = l;
			return h->symbol[index + (code - first)];
		}
		index += count;
		first += count;
		first <<= 1;
		code <<= 1;
	}
	return BAD_CODE;
}

static void fixed_codes(struct kr_inflate *z)
{
	unsigned s;

	for (s = 0; s < 144; s++)
		z->lengths[s] = 8;
	for (; s < 256; s++)
		z->lengths[s] = 9;
	for (; s < 280; s++)
		z->lengths[s] = 7;
	for (; s < 288; s++)
		z->lengths[s] = 8;
	construct(&z->lencode, z->lengths, 288);
	for (s = 0; s < 30; s++)
		z->lengths[s] = 5;
	construct(&z->distcode, z->lengths, 30);
}

/* An incomplete code is allowed only as a single code of one bit (RFC 1951 3.2.7, zlib). */
static int code_ok(const struct kr_inflate_huff *h, int res, unsigned n)
{
	return res == 0 || (res > 0 && n == (unsigned)h->count[0] + h->count[1]);
}

/* --- the stream ------------------------------------------------------------------------ */

/* One header byte, counted and taken into the header CRC; 0 if none left. */
static int header_byte(struct kr_inflate *z, struct in *c, unsigned *b)
{
	if (c->left == 0)
		return 0;
	*b = *c->p++;
	c->left--;
	z->hdr_crc = z->crc_table[0][(z->hdr_crc ^ *b) & 0xff] ^ (z->hdr_crc >> 8);
	if (++z->hdr_len > KR_INFLATE_HEADER_MAX)
		return fail(z, KR_ETOOBIG, "gzip header longer than KR_INFLATE_HEADER_MAX");
	return 1;
}

/* After the header's fixed part or one of its optional fields: the next one present. */
static void next_header_field(struct kr_inflate *z)
{
	if (z->state < S_XLEN && (z->flags & FLG_EXTRA)) {
		z->state = S_XLEN;
		z->tlen = 0;
		z->skip = 0;
	} else if (z->state < S_NAME && (z->flags & FLG_NAME)) {
		z->state = S_NAME;
	} else if (z->state < S_COMMENT && (z->flags & FLG_COMMENT)) {
		z->state = S_COMMENT;
	} else if (z->state < S_HCRC && (z->flags & FLG_HCRC)) {
		z->state = S_HCRC;
		z->tlen = 0;
		z->skip = 0;
	} else {
		z->state = S_BLOCK;
	}
}

static int header(struct kr_inflate *z, struct in *c)
{
	unsigned b;
	int r;

	while (z->state < S_BLOCK) {
		switch (z->state) {
		case S_HEADER:
			if ((r = header_byte(z, c, &b)) <= 0)
				return r;
			if ((z->hdr_len == 1 && b != 0x1f) || (z->hdr_len == 2 && b != 0x8b))
				return fail(z, KR_EPROTO, "not a gzip stream (bad magic)");
			if (z->hdr_len == 3 && b != 8)
				return fail(z, KR_EPROTO, "gzip compression method other than deflate");
			if (z->hdr_len == 4) {
				if (b & FLG_RESERVED)
					return fail(z, KR_EPROTO, "reserved gzip header flags set");
				z->flags = b;
			}
			if (z->hdr_len == 10)
				next_header_field(z);
			break;
		case S_XLEN:
			if ((r = header_byte(z, c, &b)) <= 0)
				return r;
			z->skip |= b << (8 * z->tlen);
			if (++z->tlen == 2) {
				z->state = S_EXTRA;
				if (z->skip == 0)
					next_header_field(z);
			}
			break;
		case S_EXTRA:
			if ((r = header_byte(z, c, &b)) <= 0)
				return r;
			if (--z->skip == 0)
				next_header_field(z);
			break;
		case S_NAME:
		case S_COMMENT:
			if ((r = header_byte(z, c, &b)) <= 0)
				return r;
			if (b == 0)
				next_header_field(z);
			break;
		default: /* S_HCRC: the low 16 bits of the CRC-32 of the bytes before it */
			if (z->tlen == 0)
				z->skip = (~z->hdr_crc) & 0xffffu;
			if ((r = header_byte(z, c, &b)) <= 0)
				return r;
			if (b != ((z->skip >> (8 * z->tlen)) & 0xff))
				return fail(z, KR_EPROTO, "gzip header CRC mismatch");
			if (++z->tlen == 2)
				z->state = S_BLOCK;
			break;
		}
	}
	return 1;
}

static void end_block(struct kr_inflate *z)
{
	if (z->last) {
		z->bits >>= z->nbits & 7;  /* the trailer starts on a byte */
		z->nbits &= ~7u;
		z->tlen = 0;
		z->state = S_TRAILER;
	} else {
		z->state = S_BLOCK;
	}
}

/* The code lengths of a dynamic block, then its two codes. */
static int dynamic_lengths(struct kr_inflate *z, struct in *c)
{
	unsigned total = z->hlit + z->hdist, len, n;
	int sym, res;

	while (z->nlen < total) {
		fill(z, c);
		sym = decode(&z->lencode, z->bits, z->nbits, &len);
		if (sym == NEED_BITS)
			return R_NEED;
		if (sym < 0)
			return fail(z, KR_EPROTO, "invalid code length code");
		if (sym < 16) {
			take(z, len);
			z->lengths[z->nlen++] = (uint8_t)sym;
			continue;
		}
		n = sym == 16 ? 2 : sym == 17 ? 3 : 7;
		if (z->nbits < len + n)
			return R_NEED;
		take(z, len);
		n = (sym == 16 ? 3 : sym == 17 ? 3 : 11) + take(z, n);
		if (z->nlen + n > total)
			return fail(z, KR_EPROTO, "code lengths repeat past their count");
		if (sym == 16 && z->nlen == 0)
			return fail(z, KR_EPROTO, "code length repeat with nothing before it");
		memset(z->lengths + z->nlen, sym == 16 ? z->lengths[z->nlen - 1] : 0, n);
		z->nlen += n;
	}
	if (z->lengths[256] == 0)
		return fail(z, KR_EPROTO, "dynamic block without an end-of-block code");
	res = construct(&z->lencode, z->lengths, z->hlit);
	if (!code_ok(&z->lencode, res, z->hlit))
		return fail(z, KR_EPROTO, "invalid literal/length code (over-subscribed or incomplete)");
	res = construct(&z->distcode, z->lengths + z->hlit, z->hdist);
	if (!code_ok(&z->distcode, res, z->hdist))
		return fail(z, KR_EPROTO, "invalid distance code (over-subscribed or incomplete)");
	z->state = S_CODES;
	return 1;
}

/*
 * Literals and matches into the window until it is full, the block ends or
 * the input runs out. The hot loop keeps the bit buffer and the write
 * position in locals: window stores could alias them through z.
 */
static int codes(struct kr_inflate *z, struct in *c)
{
	uint32_t bits = z->bits;
	unsigned nbits = z->nbits, len, n;
	size_t wpos = z->wpos;
	unsigned char *w = z->window;
	int sym, rc = 1;

	for (;;) {
		if (z->state == S_CODES) {
			if (wpos == KR_INFLATE_WINDOW) {
				rc = R_FULL;
				break;
			}
			while (nbits <= 24 && c->left) {
				bits |= (uint32_t)*c->p++ << nbits;
				nbits += 8;
				c->left--;
			}
			sym = decode(&z->lencode, bits, nbits, &len);
			if (sym < 0) {
				rc = sym == NEED_BITS ? R_NEED
						      : fail(z, KR_EPROTO, "invalid literal/length code");
				break;
			}
			bits >>= len;
			nbits -= len;
			if (sym < 256) {
				w[wpos++] = (unsigned char)sym;
				continue;
			}
			if (sym == 256) {
				z->bits = bits;
				z->nbits = nbits;
				end_block(z);
				bits = z->bits;
				nbits = z->nbits;
				break;
			}
			sym -= 257;
			if (sym >= 29) {
				rc = fail(z, KR_EPROTO, "invalid literal/length symbol (286 or 287)");
				break;
			}
			z->sym = (unsigned)sym;
			z->state = S_LENEXT;
		}
		if (z->state == S_LENEXT) {
			n = len_extra[z->sym];
			while (nbits < n && c->left) {
				bits |= (uint32_t)*c->p++ << nbits;
				nbits += 8;
				c->left--;
			}
			if (nbits < n) {
				rc = R_NEED;
				break;
			}
			z->len = len_base[z->sym] + (bits & ((1u << n) - 1));
			bits >>= n;
			nbits -= n;
			z->state = S_DIST;
		}
		if (z->state == S_DIST) {
			while (nbits <= 24 && c->left) {
				bits |= (uint32_t)*c->p++ << nbits;
				nbits += 8;
				c->left--;
			}
			sym = decode(&z->distcode, bits, nbits, &len);
			if (sym < 0) {
				/* Fixed codes leave 30 and 31 out of the table: invalid here too. */
				rc = sym == NEED_BITS ? R_NEED : fail(z, KR_EPROTO, "invalid distance code");
				break;
			}
			bits >>= len;
			nbits -= len;
			z->sym = (unsigned)sym;
			z->state = S_DISTEXT;
		}
		if (z->state == S_DISTEXT) {
			n = dist_extra[z->sym];
			while (nbits < n && c->left) {
				bits |= (uint32_t)*c->p++ << nbits;
				nbits += 8;
				c->left--;
			}
			if (nbits < n) {
				rc = R_NEED;
				break;
			}
			z->dist = dist_base[z->sym] + (bits & ((1u << n) - 1));
			bits >>= n;
			nbits -= n;
			if (z->dist > (z->whave ? KR_INFLATE_WINDOW : wpos)) {
				rc = fail(z, KR_EPROTO, "distance too far back");
				break;
			}
			z->state = S_COPY;
		}
		/* S_COPY */
		n = (unsigned)(KR_INFLATE_WINDOW - wpos);
		if (n > z->len)
			n = z->len;
		if (wpos >= z->dist && n <= z->dist) {
			memcpy(w + wpos, w + wpos - z->dist, n);
			wpos += n;
		} else {
			size_t from = wpos >= z->dist ? wpos - z->dist : wpos + KR_INFLATE_WINDOW - z->dist;
			unsigned i;

			for (i = 0; i < n; i++) {
				w[wpos++] = w[from++];
				if (from == KR_INFLATE_WINDOW)
					from = 0;
			}
		}
		z->len -= n;
		if (z->len == 0)
			z->state = S_CODES;
		else {
			rc = R_FULL;
			break;
		}
	}
	if (z->state != S_FAILED) {
		z->bits = bits;
		z->nbits = nbits;
	}
	z->wpos = wpos;
	return rc;
}

/* Decodes from c until the window is full, the input runs out, the stream ends or fails. */
static int run(struct kr_inflate *z, struct in *c)
{
	unsigned i;
	int r;

	for (;;) {
		switch (z->state) {
		case S_HEADER: case S_XLEN: case S_EXTRA: case S_NAME: case S_COMMENT: case S_HCRC:
			if ((r = header(z, c)) <= 0)
				return r < 0 ? r : R_NEED;
			break;
		case S_BLOCK:
			if (!need(z, c, 3))
				return R_NEED;
			z->last = (int)take(z, 1);
			switch (take(z, 2)) {
			case 0:
				z->bits >>= z->nbits & 7;  /* LEN starts on a byte */
				z->nbits &= ~7u;
				z->state = S_STORED_LEN;
				break;
			case 1:
				fixed_codes(z);
				z->state = S_CODES;
				break;
			case 2:
				z->state = S_TABLE;
				break;
			default:
				return fail(z, KR_EPROTO, "invalid deflate block type 3");
			}
			break;
		case S_STORED_LEN:
			if (!need(z, c, 32))
				return R_NEED;
			z->stored = take(z, 16);
			if (take(z, 16) != (~z->stored & 0xffffu))
				return fail(z, KR_EPROTO, "stored block length does not match its complement");
			z->state = S_STORED;
			break;
		case S_STORED:
			while (z->stored > 0) {
				size_t n;

				if (z->wpos == KR_INFLATE_WINDOW)
					return R_FULL;
				if (z->nbits >= 8) {
					z->window[z->wpos++] = (unsigned char)take(z, 8);
					z->stored--;
					continue;
				}
				if (c->left == 0)
					return R_NEED;
				n = KR_INFLATE_WINDOW - z->wpos;
				if (n > c->left)
					n = c->left;
				if (n > z->stored)
					n = z->stored;
				memcpy(z->window + z->wpos, c->p, n);
				z->wpos += n;
				c->p += n;
				c->left -= n;
				z->stored -= (unsigned)n;
			}
			end_block(z);
			break;
		case S_TABLE:
			if (!need(z, c, 14))
				return R_NEED;
			z->hlit = take(z, 5) + 257;
			z->hdist = take(z, 5) + 1;
			z->hclen = take(z, 4) + 4;
			if (z->hlit > 286 || z->hdist > 30)
				return fail(z, KR_EPROTO, "too many length or distance codes");
			z->nlen = 0;
			z->state = S_CLEN;
			break;
		case S_CLEN:
			while (z->nlen < z->hclen) {
				if (!need(z, c, 3))
					return R_NEED;
				z->lengths[clen_order[z->nlen++]] = (uint8_t)take(z, 3);
			}
			for (i = z->hclen; i < 19; i++)
				z->lengths[clen_order[i]] = 0;
			if (construct(&z->lencode, z->lengths, 19) != 0)
				return fail(z, KR_EPROTO, "invalid code length code (over-subscribed or incomplete)");
			z->nlen = 0;
			z->state = S_LENS;
			break;
		case S_LENS:
			if ((r = dynamic_lengths(z, c)) <= 0)
				return r;
			break;
		case S_CODES: case S_LENEXT: case S_DIST: case S_DISTEXT: case S_COPY:
			r = codes(z, c);
			if (r != 1)
				return r;
			break;
		case S_TRAILER:
			while (z->tlen < 8) {
				if (z->nbits >= 8)
					z->trailer[z->tlen++] = (uint8_t)take(z, 8);
				else if (c->left) {
					z->trailer[z->tlen++] = *c->p++;
					c->left--;
				} else {
					return R_NEED;
				}
			}
			crc_upto(z);
			if ((~z->crc) != ((uint32_t)z->trailer[0] | (uint32_t)z->trailer[1] << 8 |
					  (uint32_t)z->trailer[2] << 16 | (uint32_t)z->trailer[3] << 24))
				return fail(z, KR_EPROTO, "gzip CRC-32 mismatch: the body is corrupt");
			if ((uint32_t)z->total_out !=
			    ((uint32_t)z->trailer[4] | (uint32_t)z->trailer[5] << 8 |
			     (uint32_t)z->trailer[6] << 16 | (uint32_t)z->trailer[7] << 24))
				return fail(z, KR_EPROTO, "gzip ISIZE mismatch: the body is corrupt");
			z->state = S_END;
			break;
		case S_END:
			if (z->nbits || c->left)
				return fail(z, KR_EPROTO, "bytes after the end of the gzip stream");
			return R_END;
		default:
			return fail(z, KR_ESTATE, "inflate in an unknown state");
		}
	}
}

/* Hands out window[rpos, wpos), checking the output bounds first. */
static int deliver(struct kr_inflate *z, const char **out, size_t *out_len)
{
	crc_upto(z);
	if (z->total_out > z->max_out)
		return fail(z, KR_ETOOBIG, "decoded body larger than its bound (a gzip bomb?)");
	if (z->max_ratio && z->total_out > RATIO_FLOOR &&
	    z->total_out / z->max_ratio > z->total_in)
		return fail(z, KR_ETOOBIG, "decoded body too large for its compressed size (a gzip bomb?)");
	*out = (const char *)z->window + z->rpos;
	*out_len = z->wpos - z->rpos;
	z->span = *out_len;
	z->rpos = z->wpos;
	return KR_INFLATE_DATA;
}

int kr_inflate_feed(struct kr_inflate *z, const void *in, size_t len, size_t *consumed,
		    const char **out, size_t *out_len)
{
	struct in c = { in, len };
	int r;

	*consumed = 0;
	*out = NULL;
	*out_len = 0;
	if (z->state == S_FAILED)
		return z->err;
	if (z->rpos < z->wpos)
		return deliver(z, out, out_len);
	if (z->wpos == KR_INFLATE_WINDOW) {
		/* Everything in the window was handed out: start over at its beginning. */
		z->wpos = z->rpos = z->cpos = 0;
		z->whave = 1;
	}
	r = run(z, &c);
	*consumed = len - c.left;
	z->total_in += *consumed;
	if (r < 0)
		return r;
	if (z->rpos < z->wpos)
		return deliver(z, out, out_len);
	return r == R_END ? KR_INFLATE_END : 0;
}

void kr_inflate_unread(struct kr_inflate *z, size_t n)
{
	if (n > z->span)
		n = z->span;
	z->rpos -= n;
	z->span -= n;
}

int kr_inflate_finish(struct kr_inflate *z)
{
	if (z->state == S_FAILED)
		return z->err;
	if (z->state == S_END && z->rpos == z->wpos && z->nbits == 0)
		return KR_INFLATE_END;
	return fail(z, KR_EPROTO, "the gzip stream is truncated");
}
