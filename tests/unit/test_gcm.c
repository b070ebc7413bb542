/*
 * AES-GCM of port/crypto/gcm.c (mbedTLS's MBEDTLS_GCM_ALT): the McGrew-Viega test
 * cases (AES-128 and AES-256, empty text, text not a multiple of 16, AD, 8- and
 * 60-byte IVs), tag truncation and tampering, streaming with every split, the
 * limits, and the hardware path against the portable one (forced with
 * KREFLECT_GCM_SOFTWARE=1) on random inputs. Each test runs on both paths.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mbedtls/gcm.h"
#include "port.h"
#include "test.h"

/* A build profile without AES-GCM has nothing here to test. */
#if defined(MBEDTLS_GCM_C) && defined(MBEDTLS_GCM_ALT)

struct kat {
	const char *key, *iv, *aad, *pt, *ct, *tag;
};

#define P64 "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72" \
	    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
#define P60 "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72" \
	    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"
#define AAD "feedfacedeadbeeffeedfacedeadbeefabaddad2"
#define K1 "feffe9928665731c6d6a8f9467308308"
#define Z16 "00000000000000000000000000000000"

/* Test cases 1-6 and 13-16 of McGrew and Viega, "The Galois/Counter Mode of
 * Operation (GCM)", revised 2005 (test data). */
static const struct kat kats[] = {
	{ Z16, "000000000000000000000000", "", "", "", "58e2fccefa7e3061367f1d57a4e7455a" },
	{ Z16, "000000000000000000000000", "", Z16, "0388dace60b6a392f328c2b971b2fe78",
	  "ab6e47d42cec13bdf53a67b21257bddf" },
	{ K1, "cafebabefacedbaddecaf888", "", P64,
	  "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
	  "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
	  "4d5c2af327cd64a62cf35abd2ba6fab4" },
	{ K1, "cafebabefacedbaddecaf888", AAD, P60,
	  "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
	  "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
	  "5bc94fbc3221a5db94fae95ae7121a47" },
	{ K1, "cafebabefacedbad", AAD, P60,
	  "61353b4c2806934a777ff51fa22a4755699b2a714fcdc6f83766e5f97b6c7423"
	  "73806900e49f24b22b097544d4896b424989b5e1ebac0f07c23f4598",
	  "3612d2e79e3b0785561be14aaca2fccb" },
	{ K1,
	  "9313225df88406e555909c5aff5269aa6a7a9538534f7da1e4c303d2a318a728"
	  "c3c0c95156809539fcf0e2429a6b525416aedbf5a0de6a57a637b39b",
	  AAD, P60,
	  "8ce24998625615b603a033aca13fb894be9112a5c3a211a8ba262a3cca7e2ca7"
	  "01e4a9a4fba43c90ccdcb281d48c7c6fd62875d2aca417034c34aee5",
	  "619cc5aefffe0bfa462af43c1699d050" },
	{ Z16 Z16, "000000000000000000000000", "", "", "", "530f8afbc74536b9a963b4f1c4cb738b" },
	{ Z16 Z16, "000000000000000000000000", "", Z16, "cea7403d4d606b6e074ec5d3baf39d18",
	  "d0d1c8a799996bf0265b98b5d48ab919" },
	{ K1 K1, "cafebabefacedbaddecaf888", "", P64,
	  "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
	  "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
	  "b094dac5d93471bdec1a502270e3cc6c" },
	{ K1 K1, "cafebabefacedbaddecaf888", AAD, P60,
	  "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
	  "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
	  "76fc6ece0f4e1768cddf8853bb2d551b" },
};

struct bytes {
	unsigned char b[128];
	size_t n;
};

static struct bytes hex(const char *s)
{
	struct bytes r = { { 0 }, 0 };
	for (; s[0] && s[1] && r.n < sizeof(r.b); s += 2) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			break;
		r.b[r.n++] = (unsigned char)v;
	}
	return r;
}

/* 0: the path the CPU allows; 1: the portable one. */
static void force_software(int on)
{
	if (on)
		setenv("KREFLECT_GCM_SOFTWARE", "1", 1);
	else
		unsetenv("KREFLECT_GCM_SOFTWARE");
}

static int key(mbedtls_gcm_context *g, const struct bytes *k, int software)
{
	force_software(software);
	mbedtls_gcm_init(g);
	int r = mbedtls_gcm_setkey(g, MBEDTLS_CIPHER_ID_AES, k->b, (unsigned)k->n * 8);
	force_software(0);
	return r;
}

KR_TEST(gcm, path_is_the_hardware_one_where_the_cpu_has_it)
{
	mbedtls_gcm_context g;
	struct bytes k = hex(K1);
	check(key(&g, &k, 0) == 0);
	int hw = g.path;
	mbedtls_gcm_free(&g);
	check(key(&g, &k, 1) == 0);
	check(g.path == KR_GCM_PATH_PORTABLE);
	mbedtls_gcm_free(&g);
	printf("gcm: hardware path %s on this CPU\n", hw != KR_GCM_PATH_PORTABLE ? "in use" : "not available");
	/* gcm.c and the cipher order (port/common/cpu.c) must agree on the CPU. */
	check((hw != KR_GCM_PATH_PORTABLE) == kr_port_cpu_has_aes());
	return 0;
}

static int kat_one(const struct kat *t, int software)
{
	struct bytes k = hex(t->key), iv = hex(t->iv), a = hex(t->aad), p = hex(t->pt);
	struct bytes c = hex(t->ct), tag = hex(t->tag);
	unsigned char out[128], back[128], tg[16];
	mbedtls_gcm_context g;

	check(key(&g, &k, software) == 0);
	check(mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, p.n, iv.b, iv.n, a.b, a.n, p.b, out, 16,
					tg) == 0);
	check(memcmp(out, c.b, c.n) == 0);
	check(memcmp(tg, tag.b, 16) == 0);
	/* Truncated tags are prefixes of the full one; 4..16 bytes only. */
	for (size_t tl = 4; tl <= 16; tl += 4) {
		memset(tg, 0, sizeof(tg));
		check(mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, p.n, iv.b, iv.n, a.b, a.n, p.b,
						out, tl, tg) == 0);
		check(memcmp(tg, tag.b, tl) == 0);
		check(mbedtls_gcm_auth_decrypt(&g, c.n, iv.b, iv.n, a.b, a.n, tag.b, tl, c.b, back) == 0);
		check(memcmp(back, p.b, p.n) == 0);
	}
	check(mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, p.n, iv.b, iv.n, a.b, a.n, p.b, out, 3,
					tg) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, p.n, iv.b, iv.n, a.b, a.n, p.b, out, 17,
					tg) == MBEDTLS_ERR_GCM_BAD_INPUT);

	/* Any changed bit of tag, ciphertext or AD is rejected, and no plaintext is left. */
	for (size_t bit = 0; bit < 8 * (16 + c.n + a.n); bit += 7) {
		struct bytes c2 = c, a2 = a, t2 = tag;
		size_t byte = bit / 8;
		if (byte < 16)
			t2.b[byte] ^= (unsigned char)(1u << (bit % 8));
		else if (byte < 16 + c.n)
			c2.b[byte - 16] ^= (unsigned char)(1u << (bit % 8));
		else
			a2.b[byte - 16 - c.n] ^= (unsigned char)(1u << (bit % 8));
		memset(back, 0xaa, sizeof(back));
		check(mbedtls_gcm_auth_decrypt(&g, c.n, iv.b, iv.n, a2.b, a2.n, t2.b, 16, c2.b, back) ==
		      MBEDTLS_ERR_GCM_AUTH_FAILED);
		for (size_t i = 0; i < c.n; i++)
			check(back[i] == 0);
	}

	/* Streaming: AD and text each cut at every point, the same bytes and tag. */
	for (size_t sa = 0; sa <= a.n; sa++)
		for (size_t sp = 0; sp <= p.n; sp++) {
			size_t o1, o2, o3;
			for (int mode = 0; mode < 2; mode++) {
				const struct bytes *in = mode ? &c : &p, *want = mode ? &p : &c;
				memset(out, 0, sizeof(out));
				check(mbedtls_gcm_starts(&g, mode ? MBEDTLS_GCM_DECRYPT : MBEDTLS_GCM_ENCRYPT, iv.b,
							 iv.n) == 0);
				check(mbedtls_gcm_update_ad(&g, a.b, sa) == 0);
				check(mbedtls_gcm_update_ad(&g, a.b + sa, a.n - sa) == 0);
				check(mbedtls_gcm_update(&g, in->b, sp, out, sp, &o1) == 0 && o1 == sp);
				check(mbedtls_gcm_update(&g, in->b + sp, in->n - sp, out + sp, in->n - sp, &o2) == 0 &&
				      o2 == in->n - sp);
				check(mbedtls_gcm_finish(&g, NULL, 0, &o3, tg, 16) == 0 && o3 == 0);
				check(memcmp(out, want->b, want->n) == 0);
				check(memcmp(tg, tag.b, 16) == 0);
			}
		}
	mbedtls_gcm_free(&g);
	return 0;
}

KR_TEST(gcm, mcgrew_viega_vectors_on_both_paths)
{
	for (int sw = 0; sw < 2; sw++)
		for (size_t i = 0; i < sizeof(kats) / sizeof(kats[0]); i++) {
			int line = kat_one(&kats[i], sw);
			if (line != 0) {
				fprintf(stderr, "gcm: test case index %zu, %s path\n", i,
					sw ? "portable" : "default");
				return line;
			}
		}
	return 0;
}

KR_TEST(gcm, limits_are_errors)
{
	struct bytes k = hex(K1);
	unsigned char buf[64] = { 0 }, tg[16];
	size_t o;
	mbedtls_gcm_context g;

	mbedtls_gcm_init(&g);
	check(mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, k.b, 100) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_CAMELLIA, k.b, 128) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_starts(&g, MBEDTLS_GCM_ENCRYPT, buf, 12) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, k.b, 128) == 0);
	check(mbedtls_gcm_starts(&g, MBEDTLS_GCM_ENCRYPT, buf, 0) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_starts(&g, MBEDTLS_GCM_ENCRYPT, buf, 12) == 0);
	check(mbedtls_gcm_update(&g, buf, 32, buf + 32, 31, &o) == MBEDTLS_ERR_GCM_BUFFER_TOO_SMALL);
	check(mbedtls_gcm_update(&g, buf, 32, buf + 1, 32, &o) == MBEDTLS_ERR_GCM_BAD_INPUT);
	check(mbedtls_gcm_update(&g, buf, 32, buf, 32, &o) == 0); /* in place */
	check(mbedtls_gcm_update_ad(&g, buf, 1) == MBEDTLS_ERR_GCM_BAD_INPUT); /* AD after text */
	check(mbedtls_gcm_finish(&g, NULL, 0, &o, tg, 16) == 0);
	mbedtls_gcm_free(&g);
	return 0;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 16);
}

/* Encrypts or decrypts in random chunks (AD too), in place half of the time. */
static int stream(mbedtls_gcm_context *g, int mode, const unsigned char *iv, size_t ivn,
		  const unsigned char *a, size_t an, const unsigned char *in, unsigned char *out, size_t n,
		  unsigned char tag[16])
{
	size_t o, i = 0;
	check(mbedtls_gcm_starts(g, mode, iv, ivn) == 0);
	while (i < an) {
		size_t c = rnd() % 40;
		c = c > an - i ? an - i : c;
		check(mbedtls_gcm_update_ad(g, a + i, c) == 0);
		i += c;
	}
	int inplace = rnd() & 1;
	if (inplace)
		memcpy(out, in, n);
	for (i = 0; i < n;) {
		size_t c = rnd() % 100;
		c = c > n - i ? n - i : c;
		check(mbedtls_gcm_update(g, inplace ? out + i : in + i, c, out + i, c, &o) == 0 && o == c);
		i += c;
	}
	check(mbedtls_gcm_finish(g, NULL, 0, &o, tag, 16) == 0);
	return 0;
}

KR_TEST(gcm, hardware_and_portable_paths_agree_on_random_inputs)
{
	static unsigned char p[600], a[80], c1[600], c2[600], c3[600], d[600];
	unsigned char k[32], iv[40], t1[16], t2[16], t3[16];
	mbedtls_gcm_context hw, sw;

	for (int round = 0; round < 300; round++) {
		size_t kn = (size_t)(16 + 8 * (rnd() % 3)), ivn = rnd() % 3 ? 12 : 1 + rnd() % 40;
		size_t an = rnd() % sizeof(a), n = rnd() % sizeof(p);
		struct bytes kb = { { 0 }, kn };
		for (size_t i = 0; i < kn; i++)
			kb.b[i] = k[i] = (unsigned char)rnd();
		for (size_t i = 0; i < ivn; i++)
			iv[i] = (unsigned char)rnd();
		for (size_t i = 0; i < an; i++)
			a[i] = (unsigned char)rnd();
		for (size_t i = 0; i < n; i++)
			p[i] = (unsigned char)rnd();
		check(key(&hw, &kb, 0) == 0);
		check(key(&sw, &kb, 1) == 0);
		check(mbedtls_gcm_crypt_and_tag(&hw, MBEDTLS_GCM_ENCRYPT, n, iv, ivn, a, an, p, c1, 16, t1) == 0);
		check(mbedtls_gcm_crypt_and_tag(&sw, MBEDTLS_GCM_ENCRYPT, n, iv, ivn, a, an, p, c2, 16, t2) == 0);
		check(memcmp(c1, c2, n) == 0 && memcmp(t1, t2, 16) == 0);
		int r1 = stream(&hw, MBEDTLS_GCM_ENCRYPT, iv, ivn, a, an, p, c3, n, t3);
		check(r1 == 0);
		check(memcmp(c1, c3, n) == 0 && memcmp(t1, t3, 16) == 0);
		check(stream(&sw, MBEDTLS_GCM_DECRYPT, iv, ivn, a, an, c1, d, n, t3) == 0);
		check(memcmp(d, p, n) == 0 && memcmp(t1, t3, 16) == 0);
		check(mbedtls_gcm_auth_decrypt(&hw, n, iv, ivn, a, an, t1, 16, c1, d) == 0);
		check(memcmp(d, p, n) == 0);
		mbedtls_gcm_free(&hw);
		mbedtls_gcm_free(&sw);
	}
	return 0;
}

/* The counter is the low 32 bits only: from ffffffff it wraps to 0 and leaves the
 * IV's 96 bits alone, on both paths (set just before the wrap through the context). */
KR_TEST(gcm, counter_wraps_in_32_bits)
{
	struct bytes k = hex(K1 K1);
	static const unsigned char iv[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	unsigned char p[150] = { 0 }, c[150], blk[16], ks[16];
	size_t o;
	mbedtls_gcm_context g;

	for (int sw = 0; sw < 2; sw++) {
		check(key(&g, &k, sw) == 0);
		check(mbedtls_gcm_starts(&g, MBEDTLS_GCM_ENCRYPT, iv, sizeof(iv)) == 0);
		g.y[12] = g.y[13] = g.y[14] = 0xff;
		g.y[15] = 0xfc; /* the next blocks use fffffffd, fffffffe, ffffffff, 0, 1, ... */
		check(mbedtls_gcm_update(&g, p, 7, c, 7, &o) == 0);       /* partial first */
		check(mbedtls_gcm_update(&g, p + 7, 143, c + 7, 143, &o) == 0);
		for (size_t b = 0; b * 16 < sizeof(p); b++) {
			uint32_t ctr = 0xfffffffdu + (uint32_t)b;
			memcpy(blk, iv, 12);
			blk[12] = (unsigned char)(ctr >> 24);
			blk[13] = (unsigned char)(ctr >> 16);
			blk[14] = (unsigned char)(ctr >> 8);
			blk[15] = (unsigned char)ctr;
			check(mbedtls_aes_crypt_ecb(&g.aes, MBEDTLS_AES_ENCRYPT, blk, ks) == 0);
			size_t n = sizeof(p) - b * 16 < 16 ? sizeof(p) - b * 16 : 16;
			check(memcmp(c + b * 16, ks, n) == 0);
		}
		mbedtls_gcm_free(&g);
	}
	return 0;
}

#endif /* MBEDTLS_GCM_C && MBEDTLS_GCM_ALT */
