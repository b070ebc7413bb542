/*
 * mbedTLS 3.6 configuration of `make PROFILE=tiny` (config/README.md "The tiny profile"): the
 * smallest client that still talks to a real API server over verified TLS.
 *
 *   - TLS 1.3 only (kube-apiserver offers it since Go 1.13), client side;
 *   - ECDHE on X25519 and P-256, server certificates ECDSA P-256 with SHA-256
 *     (k3s, and kubeadm clusters set up with ECDSA keys); no RSA at all, so an
 *     RSA-signed API server is refused in the handshake;
 *   - one AEAD: TLS_AES_128_GCM_SHA256 (the suite every TLS 1.3 server must
 *     offer, RFC 8446 9.1), or TLS_CHACHA20_POLY1305_SHA256 on armv7 (below);
 *   - no session tickets (a reconnect makes a full handshake).
 * Everything else (memory, entropy, buffers) as config/mbedtls_config.h.
 */
#ifndef KR_MBEDTLS_CONFIG_H
#define KR_MBEDTLS_CONFIG_H

#define MBEDTLS_HAVE_ASM
#define MBEDTLS_HAVE_TIME
#define MBEDTLS_HAVE_TIME_DATE
#define MBEDTLS_PLATFORM_C
#define MBEDTLS_PLATFORM_MEMORY
/* No C library defaults: before src/tls.c hands mbedTLS its static heap, an
 * allocation fails (mbedTLS's own NULL-returning calloc) instead of pulling in
 * musl's allocator, 8 KB that nothing else in this build uses. */
#define MBEDTLS_PLATFORM_NO_STD_FUNCTIONS
#include <stddef.h>
int kr_snprintf(char *buf, size_t size, const char *fmt, ...);
#define MBEDTLS_PLATFORM_SNPRINTF_MACRO kr_snprintf
#define MBEDTLS_MEMORY_BUFFER_ALLOC_C
#define MBEDTLS_MEMORY_ALIGN_MULTIPLE 16
#define MBEDTLS_DEPRECATED_REMOVED
#define MBEDTLS_X509_REMOVE_INFO
#define MBEDTLS_PLATFORM_GMTIME_R_ALT

/* Random numbers straight from the kernel (getrandom, src/tls.c), as PSA's
 * external generator: no entropy pool and no DRBG in the binary. */
#define MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG

#define MBEDTLS_PSA_CRYPTO_C            /* TLS 1.3 in 3.6 needs it */
/* No MBEDTLS_USE_PSA_CRYPTO: X.509 and PK call the crypto directly (10 KB less). */
/* A fixed key store: a handshake holds a few keys at a time. */
#define MBEDTLS_PSA_KEY_SLOT_COUNT 16
#define MBEDTLS_PSA_ASSUME_EXCLUSIVE_BUFFERS

/*
 * One AEAD. On x86_64 AES-128-GCM, the suite every TLS 1.3 server must offer,
 * through AES-NI (with a software fallback on CPUs without it). On armv7 and
 * aarch64 ChaCha20-Poly1305: this build has no code for Arm's AES instructions
 * (mbedTLS's AESCE is not in it), so AES would be software AES with table
 * lookups; ChaCha20 needs none, and is 2,796 (armv7) and 2,192 (aarch64) bytes
 * of text smaller (tests/build/README.md "Sizes"). kube-apiserver (Go) always offers
 * TLS_CHACHA20_POLY1305_SHA256 with TLS 1.3.
 */
#if defined(__arm__) || defined(__aarch64__)
#define MBEDTLS_CHACHA20_C
#define MBEDTLS_POLY1305_C
#define MBEDTLS_CHACHAPOLY_C
#else
#define MBEDTLS_AES_C
#define MBEDTLS_AES_ROM_TABLES
#define MBEDTLS_AES_FEWER_TABLES
#define MBEDTLS_AES_ONLY_128_BIT_KEY_LENGTH
/* GCM uses only the cipher's encrypt direction. On x86_64 the Makefile builds
 * aesni.c with -maes -mpclmul: mbedTLS 3.6's AES-NI assembly would jump to the
 * decrypt label this leaves out (the LTO link failed), its intrinsics do not. */
#define MBEDTLS_BLOCK_CIPHER_NO_DECRYPT
#define MBEDTLS_AESNI_C
#define MBEDTLS_GCM_C
#endif
#define MBEDTLS_CIPHER_C
#define MBEDTLS_MD_C
#define MBEDTLS_SHA256_C
#define MBEDTLS_SHA256_SMALLER          /* hashes only the handshake */
#define MBEDTLS_HKDF_C

#define MBEDTLS_BIGNUM_C
#define MBEDTLS_ECP_C
#define MBEDTLS_ECDH_C
#define MBEDTLS_ECDSA_C
#define MBEDTLS_ECP_DP_SECP256R1_ENABLED
#define MBEDTLS_ECP_DP_CURVE25519_ENABLED
/* No MBEDTLS_ECP_NIST_OPTIM: a slower P-256 handshake (rare) for 3 KB. */
#define MBEDTLS_ECP_WINDOW_SIZE 2
#define MBEDTLS_ECP_FIXED_POINT_OPTIM 0
#define MBEDTLS_MPI_MAX_SIZE 66         /* P-256 and X25519 only */
#define MBEDTLS_MPI_WINDOW_SIZE 1

#define MBEDTLS_ASN1_PARSE_C
#define MBEDTLS_ASN1_WRITE_C            /* ECDSA signatures between PSA and X.509 */
#define MBEDTLS_OID_C
#define MBEDTLS_BASE64_C
#define MBEDTLS_PEM_PARSE_C
#define MBEDTLS_PK_C
#define MBEDTLS_PK_PARSE_C
#define MBEDTLS_X509_USE_C
#define MBEDTLS_X509_CRT_PARSE_C

#define MBEDTLS_SSL_TLS_C
#define MBEDTLS_SSL_CLI_C
#define MBEDTLS_SSL_PROTO_TLS1_3
#define MBEDTLS_SSL_TLS1_3_COMPATIBILITY_MODE
#define MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_EPHEMERAL_ENABLED
#define MBEDTLS_SSL_SERVER_NAME_INDICATION
#define MBEDTLS_SSL_KEEP_PEER_CERTIFICATE  /* required by TLS 1.3 in 3.6 */

#define MBEDTLS_SSL_IN_CONTENT_LEN  16384
#define MBEDTLS_SSL_OUT_CONTENT_LEN 4096

#endif /* KR_MBEDTLS_CONFIG_H */
