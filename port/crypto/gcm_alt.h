/*
 * kreflect's AES-GCM behind mbedTLS's MBEDTLS_GCM_ALT hook (config/mbedtls_config.h):
 * mbedtls/gcm.h includes this file for the context type, and port/crypto/gcm.c
 * defines every mbedtls_gcm_* function of that header.
 *
 * Why: mbedTLS 3.6 multiplies one 16-byte block at a time in GHASH, even with
 * PCLMULQDQ, and goes through its cipher layer for every counter block; on a 1 KiB
 * watch event that was about half of all instructions (make bench, callgrind).
 * gcm.c hashes four blocks per reduction and encrypts four counter blocks at a time
 * with AES-NI + PCLMULQDQ (x86_64) or the Armv8 crypto extension (aarch64), both
 * checked at run time; anything else (armv7, older CPUs, or KREFLECT_GCM_SOFTWARE=1
 * in the environment when the key is set) takes a portable path: 4-bit table GHASH
 * and AES through mbedtls_aes_crypt_ecb.
 */
#ifndef KR_GCM_ALT_H
#define KR_GCM_ALT_H

#include <stdint.h>

#include "mbedtls/aes.h"

/* The path a context was keyed for (mbedtls_gcm_context.path). */
#define KR_GCM_PATH_PORTABLE 0
#define KR_GCM_PATH_X86      1 /* AES-NI + PCLMULQDQ + SSSE3 */
#define KR_GCM_PATH_ARMV8    2 /* AESE/AESMC + PMULL */

typedef struct mbedtls_gcm_context {
	mbedtls_aes_context aes;    /* the key schedule: every path reads its round keys */
	uint64_t htab[16][2];       /* portable GHASH: i * H for each 4-bit i, big-endian halves */
	unsigned char hpow[4][16];  /* hardware GHASH: H, H^2, H^3, H^4, bytes reversed */
	unsigned char x[16];        /* GHASH accumulator */
	unsigned char y[16];        /* counter block of the last block encrypted */
	unsigned char ek0[16];      /* E(K, J0), which masks the tag */
	unsigned char part[16];     /* an AD or ciphertext block not yet hashed */
	unsigned char ectr[16];     /* keystream of the current partial block */
	uint64_t len;               /* bytes of plaintext/ciphertext so far */
	uint64_t add_len;           /* bytes of additional data so far */
	int mode;                   /* MBEDTLS_GCM_ENCRYPT or MBEDTLS_GCM_DECRYPT */
	int path;                   /* KR_GCM_PATH_* */
	int keyed;
} mbedtls_gcm_context;

#endif /* KR_GCM_ALT_H */
