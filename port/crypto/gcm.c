/*
 * AES-GCM (NIST SP 800-38D) for mbedTLS's MBEDTLS_GCM_ALT hook: see gcm_alt.h for why.
 *
 * Three paths, chosen per key in mbedtls_gcm_setkey():
 *   - x86_64 with AES-NI, PCLMULQDQ and SSSE3: GHASH over four blocks with one
 *     reduction (the sum of X1*H^4 + X2*H^3 + X3*H^2 + X4*H), counter mode four
 *     blocks at a time so that the AES units overlap;
 *   - aarch64 with the crypto extension (HWCAP_AES and HWCAP_PMULL): the same with
 *     AESE/AESMC and PMULL;
 *   - portable: Shoup's 4-bit table GHASH ([MGV] 4.1) and one mbedtls_aes_crypt_ecb
 *     per counter block. KREFLECT_GCM_SOFTWARE=1 in the environment when the key is
 *     set forces it, so that the tests run it on machines that have the hardware.
 * GHASH on the hardware paths works on byte-reversed blocks: the carry-less product
 * of two reversed operands is the reversed product shifted right by one bit, which
 * one left shift fixes before the reduction modulo x^128 + x^7 + x^2 + x + 1.
 * Shift and reduction are linear, so four unreduced products can be summed first.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mbedtls/build_info.h"
#include "mbedtls/constant_time.h"
#include "mbedtls/gcm.h"
#include "mbedtls/platform_util.h"

/* A build profile without GCM (MBEDTLS_GCM_C off) gets none of this. */
#if defined(MBEDTLS_GCM_ALT) && defined(MBEDTLS_GCM_C)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KR_GCM_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define KR_GCM_ARMV8 1
#include <sys/auxv.h>
#endif

/* The GHASH and AES helpers are a few instructions each: a call would cost more. */
#define KR_INLINE inline __attribute__((always_inline))

/* GCM's limits: 2^36 - 32 bytes of text per IV, 2^61 - 1 bytes of AD. */
#define KR_GCM_MAX_TEXT 0xFFFFFFFE0ull

static uint64_t be64(const unsigned char *p)
{
	return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
	       ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
	       ((uint64_t)p[6] << 8) | (uint64_t)p[7];
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)v;
		v >>= 8;
	}
}

static void xor16(unsigned char *d, const unsigned char *a, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)(a[i] ^ b[i]);
}

/* The AES round keys mbedtls_aes_setkey_enc() made. Its software schedule and its
 * AES-NI one lay out the same bytes on a little-endian CPU (the FIPS-197 order that
 * AESENC and AESE take); the known-answer tests of both paths check it. */
#if defined(KR_GCM_X86) || defined(KR_GCM_ARMV8)
static const unsigned char *round_keys(const mbedtls_gcm_context *ctx)
{
	return (const unsigned char *)(ctx->aes.MBEDTLS_PRIVATE(buf) + ctx->aes.MBEDTLS_PRIVATE(rk_offset));
}
#endif

/* ---------------------------------------------------------------- portable */

/* The reduction of the four bits a 4-bit right shift drops, in the top 16 bits. */
static const uint16_t gcm_last4[16] = {
	0x0000, 0x1c20, 0x3840, 0x2460, 0x7080, 0x6ca0, 0x48c0, 0x54e0,
	0xe100, 0xfd20, 0xd940, 0xc560, 0x9180, 0x8da0, 0xa9c0, 0xb5e0,
};

static void soft_table(mbedtls_gcm_context *ctx, const unsigned char h[16])
{
	uint64_t vh = be64(h), vl = be64(h + 8);

	/* htab[8] = H, htab[4] = H*x, htab[2] = H*x^2, htab[1] = H*x^3: the high bit
	 * of a nibble is its lowest power of x. */
	ctx->htab[0][0] = ctx->htab[0][1] = 0;
	ctx->htab[8][0] = vh;
	ctx->htab[8][1] = vl;
	for (int i = 4; i > 0; i >>= 1) {
		uint64_t carry = vl & 1;
		vl = (vh << 63) | (vl >> 1);
		vh = (vh >> 1) ^ (carry ? 0xe100000000000000ull : 0);
		ctx->htab[i][0] = vh;
		ctx->htab[i][1] = vl;
	}
	for (int i = 2; i <= 8; i *= 2)
		for (int j = 1; j < i; j++) {
			ctx->htab[i + j][0] = ctx->htab[i][0] ^ ctx->htab[j][0];
			ctx->htab[i + j][1] = ctx->htab[i][1] ^ ctx->htab[j][1];
		}
}

/* x = x * H, Horner's rule from the highest power of x down, 4 bits a step. */
static void soft_mult(const mbedtls_gcm_context *ctx, unsigned char x[16])
{
	uint64_t zh = 0, zl = 0;

	for (int i = 15; i >= 0; i--) {
		unsigned nib[2] = { x[i] & 0xfu, x[i] >> 4 };
		for (int k = 0; k < 2; k++) {
			unsigned rem = (unsigned)(zl & 0xf);
			zl = (zh << 60) | (zl >> 4);
			zh = (zh >> 4) ^ ((uint64_t)gcm_last4[rem] << 48);
			zh ^= ctx->htab[nib[k]][0];
			zl ^= ctx->htab[nib[k]][1];
		}
	}
	put_be64(x, zh);
	put_be64(x + 8, zl);
}

static void soft_ghash(mbedtls_gcm_context *ctx, const unsigned char *p, size_t nblocks)
{
	for (; nblocks > 0; nblocks--, p += 16) {
		xor16(ctx->x, ctx->x, p, 16);
		soft_mult(ctx, ctx->x);
	}
}

static void incr32(unsigned char y[16])
{
	for (int i = 15; i >= 12; i--)
		if (++y[i] != 0)
			break;
}

static void soft_ctr(mbedtls_gcm_context *ctx, const unsigned char *in, unsigned char *out,
		     size_t nblocks)
{
	unsigned char ks[16];

	for (; nblocks > 0; nblocks--, in += 16, out += 16) {
		incr32(ctx->y);
		(void)mbedtls_aes_crypt_ecb(&ctx->aes, MBEDTLS_AES_ENCRYPT, ctx->y, ks);
		xor16(out, in, ks, 16);
	}
	mbedtls_platform_zeroize(ks, sizeof(ks));
}

/* ---------------------------------------------------------------- x86_64 */

#if defined(KR_GCM_X86)
#define KR_X86 __attribute__((target("aes,pclmul,ssse3")))

static int x86_has_hardware(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	/* ECX: bit 1 PCLMULQDQ, bit 9 SSSE3, bit 25 AES */
	return (c & (1u << 1)) && (c & (1u << 9)) && (c & (1u << 25));
}

static KR_X86 KR_INLINE __m128i x86_rev(__m128i v)
{
	return _mm_shuffle_epi8(v, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

/* lo, mid, hi += the three partial products of a * b (64 x 64 bits each). */
static KR_X86 KR_INLINE void x86_clmul(__m128i a, __m128i b, __m128i *lo, __m128i *mid, __m128i *hi)
{
	*lo = _mm_xor_si128(*lo, _mm_clmulepi64_si128(a, b, 0x00));
	*hi = _mm_xor_si128(*hi, _mm_clmulepi64_si128(a, b, 0x11));
	*mid = _mm_xor_si128(*mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10),
						 _mm_clmulepi64_si128(a, b, 0x01)));
}

/* The 256-bit sum of products, shifted left by one and reduced to 128 bits. */
static KR_X86 KR_INLINE __m128i x86_reduce(__m128i lo, __m128i mid, __m128i hi)
{
	lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
	hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));

	__m128i clo = _mm_srli_epi64(lo, 63), chi = _mm_srli_epi64(hi, 63);
	lo = _mm_or_si128(_mm_slli_epi64(lo, 1), _mm_slli_si128(clo, 8));
	hi = _mm_or_si128(_mm_or_si128(_mm_slli_epi64(hi, 1), _mm_slli_si128(chi, 8)),
			  _mm_srli_si128(clo, 8));

	/* Fold the low 128 bits into the high ones: first the low 64 bits into the
	 * next 64 (x^128 = x^7 + x^2 + x + 1, in reflected order shifts by 63, 62, 57),
	 * then those 128 bits into the result (right shifts by 1, 2, 7). */
	__m128i t = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi64(lo, 63), _mm_slli_epi64(lo, 62)),
				  _mm_slli_epi64(lo, 57));
	lo = _mm_xor_si128(lo, _mm_slli_si128(t, 8));
	__m128i u = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi64(lo, 63), _mm_slli_epi64(lo, 62)),
				  _mm_slli_epi64(lo, 57));
	__m128i r = _mm_xor_si128(_mm_xor_si128(lo, _mm_srli_epi64(lo, 1)),
				  _mm_xor_si128(_mm_srli_epi64(lo, 2), _mm_srli_epi64(lo, 7)));
	r = _mm_xor_si128(r, _mm_srli_si128(u, 8));
	return _mm_xor_si128(hi, r);
}

static KR_X86 __m128i x86_mult(__m128i a, __m128i b)
{
	__m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
	x86_clmul(a, b, &lo, &mid, &hi);
	return x86_reduce(lo, mid, hi);
}

static KR_X86 void x86_powers(mbedtls_gcm_context *ctx, const unsigned char h[16])
{
	__m128i h1 = x86_rev(_mm_loadu_si128((const __m128i *)h));
	__m128i h2 = x86_mult(h1, h1);
	__m128i h3 = x86_mult(h2, h1);
	__m128i h4 = x86_mult(h3, h1);
	_mm_storeu_si128((__m128i *)ctx->hpow[0], h1);
	_mm_storeu_si128((__m128i *)ctx->hpow[1], h2);
	_mm_storeu_si128((__m128i *)ctx->hpow[2], h3);
	_mm_storeu_si128((__m128i *)ctx->hpow[3], h4);
}

static KR_X86 void x86_ghash(mbedtls_gcm_context *ctx, const unsigned char *p, size_t nblocks)
{
	const __m128i *in = (const __m128i *)p;
	__m128i x = x86_rev(_mm_loadu_si128((const __m128i *)ctx->x));
	__m128i h1 = _mm_loadu_si128((const __m128i *)ctx->hpow[0]);
	__m128i h2 = _mm_loadu_si128((const __m128i *)ctx->hpow[1]);
	__m128i h3 = _mm_loadu_si128((const __m128i *)ctx->hpow[2]);
	__m128i h4 = _mm_loadu_si128((const __m128i *)ctx->hpow[3]);

	for (; nblocks >= 4; nblocks -= 4, in += 4) {
		__m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
		x86_clmul(_mm_xor_si128(x, x86_rev(_mm_loadu_si128(in))), h4, &lo, &mid, &hi);
		x86_clmul(x86_rev(_mm_loadu_si128(in + 1)), h3, &lo, &mid, &hi);
		x86_clmul(x86_rev(_mm_loadu_si128(in + 2)), h2, &lo, &mid, &hi);
		x86_clmul(x86_rev(_mm_loadu_si128(in + 3)), h1, &lo, &mid, &hi);
		x = x86_reduce(lo, mid, hi);
	}
	for (; nblocks > 0; nblocks--, in++)
		x = x86_mult(_mm_xor_si128(x, x86_rev(_mm_loadu_si128(in))), h1);
	_mm_storeu_si128((__m128i *)ctx->x, x86_rev(x));
}

static KR_X86 void x86_ctr(mbedtls_gcm_context *ctx, const unsigned char *p, unsigned char *q,
			   size_t nblocks)
{
	const unsigned char *rkb = round_keys(ctx);
	int nr = ctx->aes.MBEDTLS_PRIVATE(nr);
	__m128i rk[15];
	for (int i = 0; i <= nr; i++)
		rk[i] = _mm_loadu_si128((const __m128i *)(rkb + 16 * i));
	/* The counter is the last 32 bits, big-endian: reversed, it is the low lane. */
	__m128i ctr = x86_rev(_mm_loadu_si128((const __m128i *)ctx->y));
	const __m128i one = _mm_set_epi32(0, 0, 0, 1);
	const __m128i *in = (const __m128i *)p;
	__m128i *out = (__m128i *)q;

	/* Four blocks in flight: AESENC's latency is several cycles, its throughput
	 * one or two a cycle. Named variables, not an array, keep them in registers. */
	for (; nblocks >= 4; nblocks -= 4, in += 4, out += 4) {
		__m128i c0 = _mm_add_epi32(ctr, one), c1 = _mm_add_epi32(c0, one);
		__m128i c2 = _mm_add_epi32(c1, one), c3 = _mm_add_epi32(c2, one);
		ctr = c3;
		__m128i b0 = _mm_xor_si128(x86_rev(c0), rk[0]), b1 = _mm_xor_si128(x86_rev(c1), rk[0]);
		__m128i b2 = _mm_xor_si128(x86_rev(c2), rk[0]), b3 = _mm_xor_si128(x86_rev(c3), rk[0]);
		/* Rounds written out (10, 12 or 14): no loop counter between them. */
#define KR_X86_ROUND(r)                              \
	do {                                         \
		b0 = _mm_aesenc_si128(b0, rk[r]);    \
		b1 = _mm_aesenc_si128(b1, rk[r]);    \
		b2 = _mm_aesenc_si128(b2, rk[r]);    \
		b3 = _mm_aesenc_si128(b3, rk[r]);    \
	} while (0)
		KR_X86_ROUND(1);
		KR_X86_ROUND(2);
		KR_X86_ROUND(3);
		KR_X86_ROUND(4);
		KR_X86_ROUND(5);
		KR_X86_ROUND(6);
		KR_X86_ROUND(7);
		KR_X86_ROUND(8);
		KR_X86_ROUND(9);
		if (nr > 10) {
			KR_X86_ROUND(10);
			KR_X86_ROUND(11);
		}
		if (nr > 12) {
			KR_X86_ROUND(12);
			KR_X86_ROUND(13);
		}
#undef KR_X86_ROUND
		_mm_storeu_si128(out, _mm_xor_si128(_mm_aesenclast_si128(b0, rk[nr]), _mm_loadu_si128(in)));
		_mm_storeu_si128(out + 1, _mm_xor_si128(_mm_aesenclast_si128(b1, rk[nr]), _mm_loadu_si128(in + 1)));
		_mm_storeu_si128(out + 2, _mm_xor_si128(_mm_aesenclast_si128(b2, rk[nr]), _mm_loadu_si128(in + 2)));
		_mm_storeu_si128(out + 3, _mm_xor_si128(_mm_aesenclast_si128(b3, rk[nr]), _mm_loadu_si128(in + 3)));
	}
	for (; nblocks > 0; nblocks--, in++, out++) {
		ctr = _mm_add_epi32(ctr, one);
		__m128i b = _mm_xor_si128(x86_rev(ctr), rk[0]);
		for (int r = 1; r < nr; r++)
			b = _mm_aesenc_si128(b, rk[r]);
		_mm_storeu_si128(out, _mm_xor_si128(_mm_aesenclast_si128(b, rk[nr]), _mm_loadu_si128(in)));
	}
	_mm_storeu_si128((__m128i *)ctx->y, x86_rev(ctr));
	mbedtls_platform_zeroize(rk, sizeof(rk));
}
#endif /* KR_GCM_X86 */

/* ---------------------------------------------------------------- aarch64 */

#if defined(KR_GCM_ARMV8)
/* Only these functions may use the crypto extension: the CPU is checked first. */
#pragma GCC push_options
#pragma GCC target("+crypto")
#include <arm_neon.h>

static int armv8_has_hardware(void)
{
	unsigned long hw = getauxval(AT_HWCAP);
	/* HWCAP_AES (1 << 3) and HWCAP_PMULL (1 << 4) of the arm64 kernel ABI */
	return (hw & (1ul << 3)) && (hw & (1ul << 4));
}

static KR_INLINE uint64x2_t armv8_rev(uint64x2_t v)
{
	uint8x16_t b = vrev64q_u8(vreinterpretq_u8_u64(v));
	return vreinterpretq_u64_u8(vextq_u8(b, b, 8));
}

static KR_INLINE uint64x2_t armv8_load(const unsigned char *p)
{
	return vreinterpretq_u64_u8(vld1q_u8(p));
}

static KR_INLINE void armv8_store(unsigned char *p, uint64x2_t v)
{
	vst1q_u8(p, vreinterpretq_u8_u64(v));
}

static KR_INLINE uint64x2_t pmull(uint64_t a, uint64_t b)
{
	return vreinterpretq_u64_p128(vmull_p64((poly64_t)a, (poly64_t)b));
}

/* Lane moves of x86's byte shifts by 8: up puts lane 0 into lane 1, down lane 1 into 0. */
static KR_INLINE uint64x2_t up8(uint64x2_t v)
{
	return vextq_u64(vdupq_n_u64(0), v, 1);
}

static KR_INLINE uint64x2_t down8(uint64x2_t v)
{
	return vextq_u64(v, vdupq_n_u64(0), 1);
}

static KR_INLINE void armv8_clmul(uint64x2_t a, uint64x2_t b, uint64x2_t *lo, uint64x2_t *mid,
			       uint64x2_t *hi)
{
	uint64_t a0 = vgetq_lane_u64(a, 0), a1 = vgetq_lane_u64(a, 1);
	uint64_t b0 = vgetq_lane_u64(b, 0), b1 = vgetq_lane_u64(b, 1);
	*lo = veorq_u64(*lo, pmull(a0, b0));
	*hi = veorq_u64(*hi, pmull(a1, b1));
	*mid = veorq_u64(*mid, veorq_u64(pmull(a0, b1), pmull(a1, b0)));
}

/* The same shift and reduction as x86_reduce(). */
static KR_INLINE uint64x2_t armv8_reduce(uint64x2_t lo, uint64x2_t mid, uint64x2_t hi)
{
	lo = veorq_u64(lo, up8(mid));
	hi = veorq_u64(hi, down8(mid));

	uint64x2_t clo = vshrq_n_u64(lo, 63), chi = vshrq_n_u64(hi, 63);
	lo = vorrq_u64(vshlq_n_u64(lo, 1), up8(clo));
	hi = vorrq_u64(vorrq_u64(vshlq_n_u64(hi, 1), up8(chi)), down8(clo));

	uint64x2_t t = veorq_u64(veorq_u64(vshlq_n_u64(lo, 63), vshlq_n_u64(lo, 62)), vshlq_n_u64(lo, 57));
	lo = veorq_u64(lo, up8(t));
	uint64x2_t u = veorq_u64(veorq_u64(vshlq_n_u64(lo, 63), vshlq_n_u64(lo, 62)), vshlq_n_u64(lo, 57));
	uint64x2_t r = veorq_u64(veorq_u64(lo, vshrq_n_u64(lo, 1)),
				 veorq_u64(vshrq_n_u64(lo, 2), vshrq_n_u64(lo, 7)));
	r = veorq_u64(r, down8(u));
	return veorq_u64(hi, r);
}

static uint64x2_t armv8_mult(uint64x2_t a, uint64x2_t b)
{
	uint64x2_t lo = vdupq_n_u64(0), mid = lo, hi = lo;
	armv8_clmul(a, b, &lo, &mid, &hi);
	return armv8_reduce(lo, mid, hi);
}

static void armv8_powers(mbedtls_gcm_context *ctx, const unsigned char h[16])
{
	uint64x2_t h1 = armv8_rev(armv8_load(h));
	uint64x2_t h2 = armv8_mult(h1, h1);
	uint64x2_t h3 = armv8_mult(h2, h1);
	uint64x2_t h4 = armv8_mult(h3, h1);
	armv8_store(ctx->hpow[0], h1);
	armv8_store(ctx->hpow[1], h2);
	armv8_store(ctx->hpow[2], h3);
	armv8_store(ctx->hpow[3], h4);
}

static void armv8_ghash(mbedtls_gcm_context *ctx, const unsigned char *p, size_t nblocks)
{
	uint64x2_t x = armv8_rev(armv8_load(ctx->x));
	uint64x2_t h1 = armv8_load(ctx->hpow[0]), h2 = armv8_load(ctx->hpow[1]);
	uint64x2_t h3 = armv8_load(ctx->hpow[2]), h4 = armv8_load(ctx->hpow[3]);

	for (; nblocks >= 4; nblocks -= 4, p += 64) {
		uint64x2_t lo = vdupq_n_u64(0), mid = lo, hi = lo;
		armv8_clmul(veorq_u64(x, armv8_rev(armv8_load(p))), h4, &lo, &mid, &hi);
		armv8_clmul(armv8_rev(armv8_load(p + 16)), h3, &lo, &mid, &hi);
		armv8_clmul(armv8_rev(armv8_load(p + 32)), h2, &lo, &mid, &hi);
		armv8_clmul(armv8_rev(armv8_load(p + 48)), h1, &lo, &mid, &hi);
		x = armv8_reduce(lo, mid, hi);
	}
	for (; nblocks > 0; nblocks--, p += 16)
		x = armv8_mult(veorq_u64(x, armv8_rev(armv8_load(p))), h1);
	armv8_store(ctx->x, armv8_rev(x));
}

static KR_INLINE uint8x16_t armv8_aes(uint8x16_t b, const uint8x16_t *rk, int nr)
{
	for (int r = 0; r < nr - 1; r++)
		b = vaesmcq_u8(vaeseq_u8(b, rk[r]));
	return veorq_u8(vaeseq_u8(b, rk[nr - 1]), rk[nr]);
}

static void armv8_ctr(mbedtls_gcm_context *ctx, const unsigned char *in, unsigned char *out,
		      size_t nblocks)
{
	const unsigned char *rkb = round_keys(ctx);
	int nr = ctx->aes.MBEDTLS_PRIVATE(nr);
	uint8x16_t rk[15];
	for (int i = 0; i <= nr; i++)
		rk[i] = vld1q_u8(rkb + 16 * i);
	uint64x2_t ctr = armv8_rev(armv8_load(ctx->y));
	const uint64x2_t one = vcombine_u64(vcreate_u64(1), vcreate_u64(0));
	/* A 32-bit counter: the carry must not leave the low 32 bits. */
	const uint32x4_t one32 = vreinterpretq_u32_u64(one);

	/* Four blocks in flight, in named variables so that they stay in registers. */
	for (; nblocks >= 4; nblocks -= 4, in += 64, out += 64) {
		uint32x4_t c0 = vaddq_u32(vreinterpretq_u32_u64(ctr), one32), c1 = vaddq_u32(c0, one32);
		uint32x4_t c2 = vaddq_u32(c1, one32), c3 = vaddq_u32(c2, one32);
		ctr = vreinterpretq_u64_u32(c3);
		uint8x16_t b0 = vreinterpretq_u8_u64(armv8_rev(vreinterpretq_u64_u32(c0)));
		uint8x16_t b1 = vreinterpretq_u8_u64(armv8_rev(vreinterpretq_u64_u32(c1)));
		uint8x16_t b2 = vreinterpretq_u8_u64(armv8_rev(vreinterpretq_u64_u32(c2)));
		uint8x16_t b3 = vreinterpretq_u8_u64(armv8_rev(vreinterpretq_u64_u32(c3)));
		/* Rounds written out (10, 12 or 14): no loop counter between them. */
#define KR_ARMV8_ROUND(r)                                  \
	do {                                               \
		b0 = vaesmcq_u8(vaeseq_u8(b0, rk[r]));     \
		b1 = vaesmcq_u8(vaeseq_u8(b1, rk[r]));     \
		b2 = vaesmcq_u8(vaeseq_u8(b2, rk[r]));     \
		b3 = vaesmcq_u8(vaeseq_u8(b3, rk[r]));     \
	} while (0)
		KR_ARMV8_ROUND(0);
		KR_ARMV8_ROUND(1);
		KR_ARMV8_ROUND(2);
		KR_ARMV8_ROUND(3);
		KR_ARMV8_ROUND(4);
		KR_ARMV8_ROUND(5);
		KR_ARMV8_ROUND(6);
		KR_ARMV8_ROUND(7);
		KR_ARMV8_ROUND(8);
		if (nr > 10) {
			KR_ARMV8_ROUND(9);
			KR_ARMV8_ROUND(10);
		}
		if (nr > 12) {
			KR_ARMV8_ROUND(11);
			KR_ARMV8_ROUND(12);
		}
#undef KR_ARMV8_ROUND
		vst1q_u8(out, veorq_u8(veorq_u8(vaeseq_u8(b0, rk[nr - 1]), rk[nr]), vld1q_u8(in)));
		vst1q_u8(out + 16, veorq_u8(veorq_u8(vaeseq_u8(b1, rk[nr - 1]), rk[nr]), vld1q_u8(in + 16)));
		vst1q_u8(out + 32, veorq_u8(veorq_u8(vaeseq_u8(b2, rk[nr - 1]), rk[nr]), vld1q_u8(in + 32)));
		vst1q_u8(out + 48, veorq_u8(veorq_u8(vaeseq_u8(b3, rk[nr - 1]), rk[nr]), vld1q_u8(in + 48)));
	}
	for (; nblocks > 0; nblocks--, in += 16, out += 16) {
		ctr = vreinterpretq_u64_u32(vaddq_u32(vreinterpretq_u32_u64(ctr), one32));
		uint8x16_t b = armv8_aes(vreinterpretq_u8_u64(armv8_rev(ctr)), rk, nr);
		vst1q_u8(out, veorq_u8(b, vld1q_u8(in)));
	}
	armv8_store(ctx->y, armv8_rev(ctr));
	mbedtls_platform_zeroize(rk, sizeof(rk));
}
#pragma GCC pop_options
#endif /* KR_GCM_ARMV8 */

/* ---------------------------------------------------------------- dispatch */

static void ghash(mbedtls_gcm_context *ctx, const unsigned char *p, size_t nblocks)
{
	switch (ctx->path) {
#if defined(KR_GCM_X86)
	case KR_GCM_PATH_X86:
		x86_ghash(ctx, p, nblocks);
		return;
#endif
#if defined(KR_GCM_ARMV8)
	case KR_GCM_PATH_ARMV8:
		armv8_ghash(ctx, p, nblocks);
		return;
#endif
	default:
		soft_ghash(ctx, p, nblocks);
	}
}

/* Counter mode over whole blocks: y is incremented before each block. */
static void ctr(mbedtls_gcm_context *ctx, const unsigned char *in, unsigned char *out, size_t nblocks)
{
	switch (ctx->path) {
#if defined(KR_GCM_X86)
	case KR_GCM_PATH_X86:
		x86_ctr(ctx, in, out, nblocks);
		return;
#endif
#if defined(KR_GCM_ARMV8)
	case KR_GCM_PATH_ARMV8:
		armv8_ctr(ctx, in, out, nblocks);
		return;
#endif
	default:
		soft_ctr(ctx, in, out, nblocks);
	}
}

/* One 16-byte block that is zero-padded first. */
static void ghash_partial(mbedtls_gcm_context *ctx, const unsigned char *p, size_t n)
{
	unsigned char b[16] = { 0 };
	memcpy(b, p, n);
	ghash(ctx, b, 1);
}

static int choose_path(void)
{
	const char *force = getenv("KREFLECT_GCM_SOFTWARE");
	if (force != NULL && force[0] != '\0' && strcmp(force, "0") != 0)
		return KR_GCM_PATH_PORTABLE;
#if defined(KR_GCM_X86)
	if (x86_has_hardware())
		return KR_GCM_PATH_X86;
#endif
#if defined(KR_GCM_ARMV8)
	if (armv8_has_hardware())
		return KR_GCM_PATH_ARMV8;
#endif
	return KR_GCM_PATH_PORTABLE;
}

/* ---------------------------------------------------------------- mbedTLS's API */

void mbedtls_gcm_init(mbedtls_gcm_context *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	mbedtls_aes_init(&ctx->aes);
}

void mbedtls_gcm_free(mbedtls_gcm_context *ctx)
{
	if (ctx == NULL)
		return;
	mbedtls_aes_free(&ctx->aes);
	mbedtls_platform_zeroize(ctx, sizeof(*ctx));
}

int mbedtls_gcm_setkey(mbedtls_gcm_context *ctx, mbedtls_cipher_id_t cipher,
		       const unsigned char *key, unsigned int keybits)
{
	static const unsigned char zero[16] = { 0 };
	unsigned char h[16];

	if (cipher != MBEDTLS_CIPHER_ID_AES || (keybits != 128 && keybits != 192 && keybits != 256))
		return MBEDTLS_ERR_GCM_BAD_INPUT;
	mbedtls_gcm_free(ctx);
	mbedtls_gcm_init(ctx);
	if (mbedtls_aes_setkey_enc(&ctx->aes, key, keybits) != 0 ||
	    mbedtls_aes_crypt_ecb(&ctx->aes, MBEDTLS_AES_ENCRYPT, zero, h) != 0) {
		mbedtls_gcm_free(ctx);
		return MBEDTLS_ERR_GCM_BAD_INPUT;
	}
	ctx->path = choose_path();
	switch (ctx->path) {
#if defined(KR_GCM_X86)
	case KR_GCM_PATH_X86:
		x86_powers(ctx, h);
		break;
#endif
#if defined(KR_GCM_ARMV8)
	case KR_GCM_PATH_ARMV8:
		armv8_powers(ctx, h);
		break;
#endif
	default:
		soft_table(ctx, h);
	}
	mbedtls_platform_zeroize(h, sizeof(h));
	ctx->keyed = 1;
	return 0;
}

int mbedtls_gcm_starts(mbedtls_gcm_context *ctx, int mode, const unsigned char *iv, size_t iv_len)
{
	if (!ctx->keyed || iv_len == 0 || (uint64_t)iv_len >> 61 != 0 ||
	    (mode != MBEDTLS_GCM_ENCRYPT && mode != MBEDTLS_GCM_DECRYPT))
		return MBEDTLS_ERR_GCM_BAD_INPUT;

	ctx->mode = mode;
	ctx->len = 0;
	ctx->add_len = 0;
	memset(ctx->x, 0, sizeof(ctx->x));
	memset(ctx->part, 0, sizeof(ctx->part));
	if (iv_len == 12) {
		memcpy(ctx->y, iv, 12);
		ctx->y[12] = ctx->y[13] = ctx->y[14] = 0;
		ctx->y[15] = 1;
	} else {
		/* J0 = GHASH(IV, zero-padded, then the IV's length in bits). */
		unsigned char lenblock[16] = { 0 };
		ghash(ctx, iv, iv_len / 16);
		if (iv_len % 16 != 0)
			ghash_partial(ctx, iv + iv_len / 16 * 16, iv_len % 16);
		put_be64(lenblock + 8, (uint64_t)iv_len * 8);
		ghash(ctx, lenblock, 1);
		memcpy(ctx->y, ctx->x, 16);
		memset(ctx->x, 0, sizeof(ctx->x));
	}
	return mbedtls_aes_crypt_ecb(&ctx->aes, MBEDTLS_AES_ENCRYPT, ctx->y, ctx->ek0) == 0
		       ? 0
		       : MBEDTLS_ERR_GCM_BAD_INPUT;
}

int mbedtls_gcm_update_ad(mbedtls_gcm_context *ctx, const unsigned char *add, size_t add_len)
{
	/* AD comes before the text, and GCM allows 2^61 - 1 bytes of it. */
	if (ctx->len != 0 || ctx->add_len + (uint64_t)add_len < ctx->add_len ||
	    (ctx->add_len + (uint64_t)add_len) >> 61 != 0)
		return MBEDTLS_ERR_GCM_BAD_INPUT;
	if (add_len == 0)
		return 0;

	size_t off = (size_t)(ctx->add_len % 16);
	ctx->add_len += add_len;
	if (off != 0) {
		size_t n = 16 - off < add_len ? 16 - off : add_len;
		memcpy(ctx->part + off, add, n);
		add += n;
		add_len -= n;
		if (off + n < 16)
			return 0;
		ghash(ctx, ctx->part, 1);
	}
	ghash(ctx, add, add_len / 16);
	add += add_len / 16 * 16;
	memcpy(ctx->part, add, add_len % 16);
	return 0;
}

/* The text of one call, whole blocks: the GHASH always reads the ciphertext. */
static void bulk(mbedtls_gcm_context *ctx, const unsigned char *in, unsigned char *out, size_t nblocks)
{
	if (ctx->mode == MBEDTLS_GCM_DECRYPT) {
		ghash(ctx, in, nblocks);
		ctr(ctx, in, out, nblocks);
	} else {
		ctr(ctx, in, out, nblocks);
		ghash(ctx, out, nblocks);
	}
}

int mbedtls_gcm_update(mbedtls_gcm_context *ctx, const unsigned char *input, size_t input_length,
		       unsigned char *output, size_t output_size, size_t *output_length)
{
	if (output_size < input_length)
		return MBEDTLS_ERR_GCM_BUFFER_TOO_SMALL;
	*output_length = input_length;
	if (input_length == 0)
		return 0;
	/* In place is fine; an output that starts inside the input is not. */
	if (output > input && (size_t)(output - input) < input_length)
		return MBEDTLS_ERR_GCM_BAD_INPUT;
	if (ctx->len + input_length < ctx->len || ctx->len + input_length > KR_GCM_MAX_TEXT)
		return MBEDTLS_ERR_GCM_BAD_INPUT;

	if (ctx->len == 0 && ctx->add_len % 16 != 0)
		ghash_partial(ctx, ctx->part, (size_t)(ctx->add_len % 16));

	size_t off = (size_t)(ctx->len % 16);
	ctx->len += input_length;
	if (off != 0) {
		/* Finish the block begun by the last call, with its keystream. */
		size_t n = 16 - off < input_length ? 16 - off : input_length;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = input[i];
			output[i] = (unsigned char)(c ^ ctx->ectr[off + i]);
			ctx->part[off + i] = ctx->mode == MBEDTLS_GCM_DECRYPT ? c : output[i];
		}
		input += n;
		output += n;
		input_length -= n;
		if (off + n < 16)
			return 0;
		ghash(ctx, ctx->part, 1);
	}

	size_t whole = input_length / 16;
	if (whole > 0)
		bulk(ctx, input, output, whole);
	input += whole * 16;
	output += whole * 16;
	input_length %= 16;

	if (input_length > 0) {
		/* A partial block: its keystream is kept for the next call. */
		static const unsigned char zero[16] = { 0 };
		ctr(ctx, zero, ctx->ectr, 1);
		for (size_t i = 0; i < input_length; i++) {
			unsigned char c = input[i];
			output[i] = (unsigned char)(c ^ ctx->ectr[i]);
			ctx->part[i] = ctx->mode == MBEDTLS_GCM_DECRYPT ? c : output[i];
		}
	}
	return 0;
}

int mbedtls_gcm_finish(mbedtls_gcm_context *ctx, unsigned char *output, size_t output_size,
		       size_t *output_length, unsigned char *tag, size_t tag_len)
{
	unsigned char lenblock[16];

	(void)output;
	(void)output_size;
	*output_length = 0;
	if (tag_len > 16 || tag_len < 4)
		return MBEDTLS_ERR_GCM_BAD_INPUT;

	if (ctx->len == 0 && ctx->add_len % 16 != 0)
		ghash_partial(ctx, ctx->part, (size_t)(ctx->add_len % 16));
	else if (ctx->len % 16 != 0)
		ghash_partial(ctx, ctx->part, (size_t)(ctx->len % 16));
	put_be64(lenblock, ctx->add_len * 8);
	put_be64(lenblock + 8, ctx->len * 8);
	ghash(ctx, lenblock, 1);
	xor16(tag, ctx->x, ctx->ek0, tag_len);
	mbedtls_platform_zeroize(ctx->ectr, sizeof(ctx->ectr));
	mbedtls_platform_zeroize(ctx->part, sizeof(ctx->part));
	return 0;
}

int mbedtls_gcm_crypt_and_tag(mbedtls_gcm_context *ctx, int mode, size_t length,
			      const unsigned char *iv, size_t iv_len, const unsigned char *add,
			      size_t add_len, const unsigned char *input, unsigned char *output,
			      size_t tag_len, unsigned char *tag)
{
	int ret;
	size_t olen;

	if ((ret = mbedtls_gcm_starts(ctx, mode, iv, iv_len)) != 0 ||
	    (ret = mbedtls_gcm_update_ad(ctx, add, add_len)) != 0 ||
	    (ret = mbedtls_gcm_update(ctx, input, length, output, length, &olen)) != 0 ||
	    (ret = mbedtls_gcm_finish(ctx, NULL, 0, &olen, tag, tag_len)) != 0)
		return ret;
	return 0;
}

int mbedtls_gcm_auth_decrypt(mbedtls_gcm_context *ctx, size_t length, const unsigned char *iv,
			     size_t iv_len, const unsigned char *add, size_t add_len,
			     const unsigned char *tag, size_t tag_len, const unsigned char *input,
			     unsigned char *output)
{
	unsigned char check[16];
	int ret;

	if ((ret = mbedtls_gcm_crypt_and_tag(ctx, MBEDTLS_GCM_DECRYPT, length, iv, iv_len, add,
					     add_len, input, output, tag_len, check)) != 0)
		return ret;
	ret = mbedtls_ct_memcmp(tag, check, tag_len) == 0 ? 0 : MBEDTLS_ERR_GCM_AUTH_FAILED;
	if (ret != 0)
		mbedtls_platform_zeroize(output, length); /* no unauthenticated plaintext */
	mbedtls_platform_zeroize(check, sizeof(check));
	return ret;
}

#endif /* MBEDTLS_GCM_ALT && MBEDTLS_GCM_C */
