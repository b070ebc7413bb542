/*
 * gzip (RFC 1952) around deflate (RFC 1951), decoded as a stream in bounded
 * memory: a resumable state machine fed whatever bytes arrived (split at any
 * byte), whose output is handed on as spans of its own 32 KiB window, so a
 * compressed LIST body of any length costs this struct and nothing else.
 *
 * Everything is checked: the header (magic, method 8, no reserved flags, its
 * optional CRC16, a bounded length), every code set (over-subscribed and
 * incomplete sets refused as zlib refuses them), every symbol and distance
 * (nothing before the start of the stream), stored-block lengths, and the
 * trailer's CRC-32 and ISIZE. One member only: bytes after it are an error.
 * The output is bounded in total and in its ratio to the input, so a gzip
 * bomb ends with a clear error instead of burning CPU for ever.
 */
#ifndef KR_INFLATE_H
#define KR_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

/* Largest decoded body of one response (a 500-object page of 1.5 MiB objects is 750 MiB). */
#ifndef KR_INFLATE_MAX_OUTPUT
#define KR_INFLATE_MAX_OUTPUT (1ULL << 30)
#endif
/*
 * Decoded bytes allowed per compressed byte once 1 MiB came out. Deflate
 * can reach 1032:1 on a run of one byte; JSON lists come near 30:1 when
 * repetitive. Above this the body is treated as a bomb (the reflector then
 * lists without gzip, which costs bandwidth, never data).
 */
#ifndef KR_INFLATE_MAX_RATIO
#define KR_INFLATE_MAX_RATIO 256u
#endif
/* gzip header bytes accepted (FEXTRA, FNAME, FCOMMENT included); servers send 10. */
#ifndef KR_INFLATE_HEADER_MAX
#define KR_INFLATE_HEADER_MAX 1024u
#endif

#define KR_INFLATE_WINDOW 32768u       /* deflate's largest distance */
#define KR_INFLATE_FAST_BITS 9         /* codes this short decode with one lookup */

/* What kr_inflate_feed found (errors are negative KR_E... codes). */
#define KR_INFLATE_DATA 1
#define KR_INFLATE_END 2

/* One canonical Huffman code: a lookup for short codes, counts and symbols for the rest. */
struct kr_inflate_huff {
	uint16_t fast[1u << KR_INFLATE_FAST_BITS];  /* symbol | length << 12; 0: longer code */
	uint16_t count[16];            /* codes of each length */
	uint16_t symbol[288];          /* symbols in canonical order */
};

/* One gzip stream being decoded; the caller owns it (no pointers to other memory). */
struct kr_inflate {
	const char *error;             /* why it failed, NULL until it does */
	unsigned long long total_in;   /* compressed bytes taken */
	unsigned long long total_out;  /* decoded bytes produced */
	unsigned long long max_out;    /* bound on total_out */
	unsigned max_ratio;            /* bound on total_out / total_in past 1 MiB; 0: none */

	/* private: progress */
	int state;
	int err;                       /* the code a failed decoder keeps returning */
	uint32_t bits;                 /* bit buffer, least significant bit first */
	unsigned nbits;
	unsigned hdr_len;              /* gzip header bytes so far */
	unsigned flags;                /* gzip FLG */
	unsigned skip;                 /* FEXTRA bytes still to skip */
	uint32_t hdr_crc;              /* CRC-32 of the header (for FHCRC) */
	int last;                      /* the block in progress is the final one */
	unsigned stored;               /* bytes left in a stored block */
	unsigned hlit, hdist, hclen, nlen;  /* dynamic block header */
	unsigned len;                  /* match length, or repeat count, pending */
	unsigned sym;                  /* length or distance symbol pending extra bits */
	unsigned dist;
	unsigned tlen;                 /* trailer bytes read */
	uint8_t trailer[8];
	uint32_t crc;                  /* CRC-32 of the output handed out so far */
	size_t wpos;                   /* next write in window */
	size_t rpos;                   /* window[rpos, wpos) produced, not yet handed out */
	size_t cpos;                   /* window[.., cpos) is in crc */
	size_t whave;                  /* nonzero once the window wrapped: all of it is history */
	size_t span;                   /* length of the span handed out last */
	uint8_t lengths[320];          /* code lengths of a dynamic block */
	uint32_t crc_table[4][256];    /* CRC-32, slicing by 4 */
	struct kr_inflate_huff lencode;
	struct kr_inflate_huff distcode;
	unsigned char window[KR_INFLATE_WINDOW];
};

/*
 * Makes z ready for one gzip stream with the bounds max_out (decoded bytes)
 * and max_ratio (decoded per compressed byte past 1 MiB; 0: none). Cannot fail.
 */
void kr_inflate_init(struct kr_inflate *z, unsigned long long max_out, unsigned max_ratio);

/* Makes z ready for the next stream with the bounds it had. Cannot fail. */
void kr_inflate_reset(struct kr_inflate *z);

/*
 * Feeds in[0..len) and stops at the first thing to report, with *consumed
 * bytes of in used: KR_INFLATE_DATA (*out, *out_len: decoded bytes inside z's
 * window, valid until the next call on z), KR_INFLATE_END (the trailer
 * matched and everything was handed out; nothing may follow), or 0 (all of in
 * used, more needed). Call again with the rest until it returns 0 or < 0;
 * with len == 0 too, as output may still be waiting. Errors: KR_EPROTO
 * (corrupt or truncated data, bytes after the end), KR_ETOOBIG (an output
 * bound, or a header longer than KR_INFLATE_HEADER_MAX), with z->error set;
 * a failed decoder stays failed.
 */
int kr_inflate_feed(struct kr_inflate *z, const void *in, size_t len, size_t *consumed,
		    const char **out, size_t *out_len);

/*
 * The caller used all but the last n bytes of the span kr_inflate_feed just
 * returned: the next call returns those n bytes first. n larger than the
 * span is cut to it.
 */
void kr_inflate_unread(struct kr_inflate *z, size_t n);

/*
 * The compressed input ended. Returns KR_INFLATE_END if the stream was
 * complete (trailer checked), else KR_EPROTO ("truncated") or the decoder's
 * own error, with z->error set.
 */
int kr_inflate_finish(struct kr_inflate *z);

#endif /* KR_INFLATE_H */
