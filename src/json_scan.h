/*
 * The byte scanners the JSON framers (json_frame.c) and the tokenizers
 * (json.c) share: whitespace, digits, and the end of a string's run of plain
 * bytes, found many bytes a step; and the unescaper of a string's contents.
 * Internal to those two files; the scanners are inline, so that each file
 * keeps its loops whole.
 */
#ifndef KR_JSON_SCAN_H
#define KR_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Hot and tiny: -Os would otherwise make a call of it. */
static inline __attribute__((always_inline)) int is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

#define ONES ((size_t)-1 / 255)
#define HIGHS (ONES * 0x80)
/* Nonzero if some byte of word v is zero (exact as a yes/no, whatever the byte order). */
#define HAS_ZERO(v) (((v) - ONES) & ~(v) & HIGHS)
/* Nonzero if some byte of word v is below n, for n <= 128 (exact as a yes/no). */
#define HAS_LESS(v, n) (((v) - ONES * (n)) & ~(v) & HIGHS)

/*
 * Strings are most of a Kubernetes object, and both the framer and the
 * tokenizer look for the end of each: 16 bytes a step with the vector unit
 * every x86_64 and aarch64 has (SSE2, NEON), else a machine word a step
 * (armv7, or any build with -DKR_JSON_NO_SIMD, which tests that path).
 */
#if !defined(KR_JSON_NO_SIMD) && defined(__SSE2__)
#include <emmintrin.h>
#define KR_JSON_SIMD 1

/* Bit i set if byte i of the 16 at p is '"' or '\\' (or, with ctl, below 0x20). */
static inline unsigned stop_mask(const char *p, int ctl)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	__m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
				 _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));

	if (ctl)
		m = _mm_or_si128(m, _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v));
	return (unsigned)_mm_movemask_epi8(m);
}
#elif !defined(KR_JSON_NO_SIMD) && defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define KR_JSON_SIMD 1

static inline unsigned stop_mask(const char *p, int ctl)
{
	uint8x16_t v = vld1q_u8((const uint8_t *)p);
	uint8x16_t m = vorrq_u8(vceqq_u8(v, vdupq_n_u8('"')), vceqq_u8(v, vdupq_n_u8('\\')));
	uint8_t b[16];
	unsigned bits = 0;
	int i;

	if (ctl)
		m = vorrq_u8(m, vcltq_u8(v, vdupq_n_u8(0x20)));
	if (vmaxvq_u8(m) == 0)
		return 0;
	vst1q_u8(b, m);
	for (i = 0; i < 16; i++)
		bits |= (unsigned)(b[i] & 1) << i;
	return bits;
}
#endif

/* First '"' or '\\' in [p, end) (or control byte, with ctl), or end. */
static inline const char *find_stop(const char *p, const char *end, int ctl)
{
#ifdef KR_JSON_SIMD
	while (end - p >= 16) {
		unsigned m = stop_mask(p, ctl);

		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	while ((size_t)(end - p) >= sizeof(size_t)) {
		size_t v;

		memcpy(&v, p, sizeof(v));
		if (HAS_ZERO(v ^ (ONES * '"')) | HAS_ZERO(v ^ (ONES * '\\')) | (ctl ? HAS_LESS(v, 0x20) : 0))
			break;
		p += sizeof(size_t);
	}
	while (p < end && *p != '"' && *p != '\\' && (!ctl || (unsigned char)*p >= 0x20))
		p++;
	return p;
}

/* First '"' or '\\' in [p, end), or end. */
static inline const char *string_stop(const char *p, const char *end)
{
	return find_stop(p, end, 0);
}

/*
 * As string_stop, and also at a control byte (below 0x20), which JSON never
 * allows raw inside a string: in a line-delimited stream it means the string
 * was cut and the next line's bytes are being read as its contents.
 */
static inline const char *string_stop_ctl(const char *p, const char *end)
{
	return find_stop(p, end, 1);
}

/*
 * Unescapes raw[0..n) (string contents without quotes) into out[0..size),
 * NUL-terminated. out may be raw itself: the text only shrinks. Returns the
 * length, KR_ETOOBIG or KR_EPROTO.
 */
int kr_json_unescape_span(const char *raw, size_t n, char *out, size_t size);

#endif /* KR_JSON_SCAN_H */
