/*
 * mbedTLS 3.6 configuration for kreflect: a TLS client and nothing more.
 *
 * What a Kubernetes API server needs from its clients, and no more:
 *   - TLS 1.3 and TLS 1.2, client side, and the server side for --listen (no DTLS, no renegotiation);
 *   - ECDHE on X25519, P-256 and P-384;
 *   - server certificates signed with RSA 2048-4096 (kubeadm) or ECDSA P-256/P-384 (k3s);
 *   - AES-128/256-GCM and ChaCha20-Poly1305 with SHA-256/384;
 *   - X.509 parsing and verification, DNS and IP subject alternative names;
 *   - PEM/base64, client certificates with RSA or EC keys (PKCS#1, SEC1, PKCS#8);
 *   - session resumption (TLS 1.3 tickets, TLS 1.2 session IDs and tickets).
 * Memory comes from one static buffer (MBEDTLS_MEMORY_BUFFER_ALLOC_C) whose size
 * is KR_TLS_HEAP_SIZE in config/kreflect_config.h. Entropy comes from the port
 * (kr_port_entropy as PSA's external generator, see src/tls.c). Files are read
 * by kreflect, not by mbedTLS.
 */
#ifndef KR_MBEDTLS_CONFIG_H
#define KR_MBEDTLS_CONFIG_H

/* Platform: our own allocator and entropy; no stdio file access. */
#define MBEDTLS_HAVE_ASM
#define MBEDTLS_HAVE_TIME
#define MBEDTLS_HAVE_TIME_DATE          /* certificate validity periods are checked */
#define MBEDTLS_PLATFORM_C
#define MBEDTLS_PLATFORM_MEMORY
/* No C library defaults: before src/tls.c hands mbedTLS its static heap, an
 * allocation fails (mbedTLS's own NULL-returning calloc) instead of reaching
 * musl's allocator. */
#define MBEDTLS_PLATFORM_NO_STD_FUNCTIONS
/* mbedTLS formats names and numbers with kreflect's small snprintf (src/fmt.c),
 * so that the C library's printf engine is not linked at all. */
#include <stddef.h>
int kr_snprintf(char *buf, size_t size, const char *fmt, ...);
#define MBEDTLS_PLATFORM_SNPRINTF_MACRO kr_snprintf
#define MBEDTLS_MEMORY_BUFFER_ALLOC_C
#define MBEDTLS_MEMORY_ALIGN_MULTIPLE 16  /* the default 4 misaligns 64-bit headers */
#define MBEDTLS_DEPRECATED_REMOVED
/* No MBEDTLS_ERROR_C, MBEDTLS_X509_REMOVE_INFO: src/tls.c names the errors and
 * verify failures a user can act on in far fewer bytes (about 20 KB saved). */
#define MBEDTLS_X509_REMOVE_INFO
#define MBEDTLS_PLATFORM_GMTIME_R_ALT   /* src/tls.c: UTC dates without musl's time zones */

/* Randomness straight from the kernel (getrandom through kr_port_entropy,
 * src/tls.c), as PSA's external generator: no entropy pool and no DRBG in the
 * binary or in RAM. */
#define MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG

/* PSA crypto is required by TLS 1.3 in 3.6. Without MBEDTLS_USE_PSA_CRYPTO,
 * X.509, PK and the TLS 1.2 records call the crypto directly: 10,464 bytes of
 * text less, and the same instructions per event over TLS (callgrind, 116,543
 * against 116,488: tests/build/levers.sh, tests/build/README.md "mbedTLS options"). */
#define MBEDTLS_PSA_CRYPTO_C
#define MBEDTLS_PSA_KEY_STORE_DYNAMIC
/* Our buffers are never shared with another party: PSA need not copy every
 * TLS record in and out through the heap (two 16 KiB allocations per record). */
#define MBEDTLS_PSA_ASSUME_EXCLUSIVE_BUFFERS

/* Symmetric ciphers and hashes. */
#define MBEDTLS_AES_C
#define MBEDTLS_AES_ROM_TABLES          /* tables in .rodata, not built into RAM */
#define MBEDTLS_AES_FEWER_TABLES
/* AES-NI and PCLMULQDQ where the CPU has them (checked at run time, x86 only;
 * other targets ignore it): software AES-GCM was 70 % of the instructions per
 * 1 KiB watch event over TLS (make bench, callgrind). */
#define MBEDTLS_AESNI_C
#define MBEDTLS_GCM_C
/* --- kreflect's AES-GCM (branch crypto) -------------------------------------
 * mbedTLS 3.6's GCM multiplies one block at a time in GHASH even with PCLMULQDQ
 * and calls its cipher layer per counter block: about 60,000 instructions per
 * 1 KiB watch event. port/crypto/gcm.c (context type in port/crypto/gcm_alt.h,
 * found through -Iport/crypto) replaces all of library/gcm.c: four blocks per
 * GHASH reduction and four AES blocks at a time with AES-NI + PCLMULQDQ (x86_64)
 * or AESE + PMULL (aarch64), checked at run time, and a portable path elsewhere
 * (KREFLECT_GCM_SOFTWARE=1 forces it). Figures: tests/bench/README.md "AEAD per
 * target (make bench-aead)". */
#define MBEDTLS_GCM_ALT
/* --- end of kreflect's AES-GCM --------------------------------------------- */
#define MBEDTLS_CHACHA20_C
#define MBEDTLS_POLY1305_C
#define MBEDTLS_CHACHAPOLY_C
#define MBEDTLS_CIPHER_C
#define MBEDTLS_MD_C
#define MBEDTLS_SHA224_C                /* SHA-256 implementation shares it */
#define MBEDTLS_SHA256_C
#define MBEDTLS_SHA384_C
#define MBEDTLS_SHA512_C                /* SHA-384 implementation shares it */
/* Hashes run in handshakes and certificate checks only (records use AEADs):
 * the rolled-up loops, 2,944 bytes less. */
#define MBEDTLS_SHA256_SMALLER
#define MBEDTLS_SHA512_SMALLER
#define MBEDTLS_HKDF_C

/* Public key: RSA and ECDSA, ECDHE on X25519 / P-256 / P-384. */
#define MBEDTLS_BIGNUM_C
#define MBEDTLS_RSA_C
#define MBEDTLS_PKCS1_V15
#define MBEDTLS_PKCS1_V21               /* RSA-PSS, mandatory for TLS 1.3 with RSA */
#define MBEDTLS_ECP_C
#define MBEDTLS_ECDH_C
#define MBEDTLS_ECDSA_C
#define MBEDTLS_ECP_DP_SECP256R1_ENABLED
#define MBEDTLS_ECP_DP_SECP384R1_ENABLED
#define MBEDTLS_ECP_DP_CURVE25519_ENABLED
#define MBEDTLS_ECP_NIST_OPTIM
#define MBEDTLS_ECP_WINDOW_SIZE 2       /* RAM over speed: the handshake is rare */
#define MBEDTLS_ECP_FIXED_POINT_OPTIM 0
#define MBEDTLS_MPI_MAX_SIZE 512        /* RSA 4096 */
#define MBEDTLS_MPI_WINDOW_SIZE 2

/* Keys and certificates. */
#define MBEDTLS_ASN1_PARSE_C
#define MBEDTLS_ASN1_WRITE_C
#define MBEDTLS_OID_C
#define MBEDTLS_BASE64_C
#define MBEDTLS_PEM_PARSE_C
#define MBEDTLS_PK_C
#define MBEDTLS_PK_PARSE_C
#define MBEDTLS_X509_USE_C
#define MBEDTLS_X509_CRT_PARSE_C
#define MBEDTLS_X509_RSASSA_PSS_SUPPORT /* TLS 1.3 signs with RSA-PSS */

/* TLS 1.2 and 1.3. */
#define MBEDTLS_SSL_TLS_C
#define MBEDTLS_SSL_CLI_C
/* The server side, for TLS on --listen (kreflect serving kreflect). The build
 * passes -DKR_WITH_LISTEN_TLS=0 here too when WITHOUT= leaves it out. */
#if !defined(KR_WITH_LISTEN_TLS) || KR_WITH_LISTEN_TLS
#define MBEDTLS_SSL_SRV_C
#endif
#define MBEDTLS_SSL_PROTO_TLS1_2
#define MBEDTLS_SSL_PROTO_TLS1_3
#define MBEDTLS_SSL_TLS1_3_COMPATIBILITY_MODE
#define MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_EPHEMERAL_ENABLED
#define MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_PSK_EPHEMERAL_ENABLED
#define MBEDTLS_KEY_EXCHANGE_ECDHE_RSA_ENABLED
#define MBEDTLS_KEY_EXCHANGE_ECDHE_ECDSA_ENABLED
#define MBEDTLS_SSL_SERVER_NAME_INDICATION
#define MBEDTLS_SSL_KEEP_PEER_CERTIFICATE  /* required by TLS 1.3 in 3.6 */
#define MBEDTLS_SSL_SESSION_TICKETS
#define MBEDTLS_SSL_EXTENDED_MASTER_SECRET
/* No ENCRYPT_THEN_MAC (only CBC suites use it: none here) and no
 * ALL_ALERT_MESSAGES (the fatal alerts that matter are sent anyway). */

/*
 * Record buffers. The server chooses its record size and Kubernetes does not
 * negotiate max_fragment_length, so the input side must take a full 16 KiB
 * record. We only send small requests, so the output side is smaller.
 */
#define MBEDTLS_SSL_IN_CONTENT_LEN  16384
#define MBEDTLS_SSL_OUT_CONTENT_LEN 4096

#endif /* KR_MBEDTLS_CONFIG_H */
