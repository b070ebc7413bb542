#include "tls.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fmt.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"

#include "mbedtls/asn1.h"
#include "mbedtls/base64.h"
#include "mbedtls/bignum.h"
#include "mbedtls/ecp.h"
#include "mbedtls/error.h"
#include "mbedtls/memory_buffer_alloc.h"
#include "mbedtls/net_sockets.h"
#include "mbedtls/oid.h"
#include "mbedtls/pem.h"
#include "mbedtls/pk.h"
#include "mbedtls/platform_util.h"
#include "mbedtls/psa_util.h"
#include "mbedtls/rsa.h"
#include "mbedtls/x509_crt.h"
#include "psa/crypto.h"

/* mbedTLS's only heap: every handshake, record buffer and certificate lives here. */
static unsigned char tls_heap[KR_TLS_HEAP_SIZE] __attribute__((aligned(16)));
/* Set while the allocator starts: it zeroes the heap, which is static storage never written yet. */
static int tls_heap_fresh;

#if defined(MBEDTLS_ENTROPY_HARDWARE_ALT)
/* A firmware's own mbedTLS with an entropy pool: the hook it calls by this name. */
int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen);

int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen)
{
	return kr_port_entropy(data, output, len, olen);
}
#endif

#if defined(MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG)
/* Our configurations: the kernel's generator serves PSA directly, without mbedTLS's DRBG. */
psa_status_t mbedtls_psa_external_get_random(mbedtls_psa_external_random_context_t *context,
					     uint8_t *output, size_t output_size, size_t *output_length)
{
	return kr_port_entropy(context, output, output_size, output_length) == 0
		       ? PSA_SUCCESS : PSA_ERROR_INSUFFICIENT_ENTROPY;
}
#endif

const char *kr_mbedtls_version(void)
{
	return MBEDTLS_VERSION_STRING;
}

void *kr_tls_heap_memset(void *p, int c, size_t n)
{
	if (c != 0)
		return memset(p, c, n);
	if (tls_heap_fresh && p == (void *)tls_heap && n == sizeof(tls_heap))
		return p;              /* zero already: not even read, so no page is mapped */
	kr_port_zero(p, n);
	return p;
}

int kr_tls_global_init(void)
{
	static int started;

	if (started)
		return 0;
	/*
	 * The allocator zeroes the whole heap (memory_buffer_alloc.c), which
	 * made every page of it resident at start (the peak RSS) when its
	 * memset was the C library's. With kr_tls_heap_memset it is left as it
	 * is, zero, and only the first block's header is written; what the
	 * allocator hands out later it zeroes page by page as needed (calloc).
	 */
	tls_heap_fresh = 1;
	mbedtls_memory_buffer_alloc_init(tls_heap, sizeof(tls_heap));
	tls_heap_fresh = 0;
	if (psa_crypto_init() != PSA_SUCCESS)
		return KR_ETLS;
	started = 1;
	return 0;
}

/* Codes seldom met, or met only with RSA, encrypted PEM or malformed certificate
 * fields the verification names anyway: in words only with KR_TLS_ERROR_TEXTS_FULL
 * (not in the tiny build, which prints their code). */
#if KR_TLS_ERROR_TEXTS_FULL
#define KR_TLS_ERRORS_RARE(X) \
	X(MBEDTLS_ERR_SSL_BUFFER_TOO_SMALL, "a TLS record is larger than the buffer for it") \
	X(MBEDTLS_ERR_SSL_UNEXPECTED_RECORD, "unexpected TLS record from the server") \
	X(MBEDTLS_ERR_SSL_VERSION_MISMATCH, "the server changed the TLS version mid-session") \
	X(MBEDTLS_ERR_SSL_FEATURE_UNAVAILABLE, "the server asked for a TLS feature not built in") \
	X(MBEDTLS_ERR_SSL_PRIVATE_KEY_REQUIRED, "a client certificate without its private key") \
	X(MBEDTLS_ERR_SSL_PK_TYPE_MISMATCH, "the client key does not suit the certificate") \
	X(MBEDTLS_ERR_SSL_COUNTER_WRAPPING, "the TLS record counter ran out") \
	X(MBEDTLS_ERR_SSL_CERTIFICATE_VERIFICATION_WITHOUT_HOSTNAME, "no server name to check the certificate against") \
	X(MBEDTLS_ERR_ERROR_CORRUPTION_DETECTED, "TLS state corrupted (a bug)") \
	X(MBEDTLS_ERR_SSL_ILLEGAL_PARAMETER, "illegal parameter in a TLS message") \
	X(MBEDTLS_ERR_SSL_UNSUPPORTED_EXTENSION, "unsupported TLS extension from the server") \
	X(MBEDTLS_ERR_SSL_BAD_INPUT_DATA, "bad TLS input") \
	X(MBEDTLS_ERR_SSL_BAD_CONFIG, "bad TLS configuration") \
	X(MBEDTLS_ERR_SSL_TIMEOUT, "TLS timeout") \
	X(MBEDTLS_ERR_X509_INVALID_VERSION, "certificate: invalid version") \
	X(MBEDTLS_ERR_X509_INVALID_SERIAL, "certificate: invalid serial") \
	X(MBEDTLS_ERR_X509_INVALID_EXTENSIONS, "certificate: invalid extensions") \
	X(MBEDTLS_ERR_X509_UNKNOWN_VERSION, "certificate: unknown version") \
	X(MBEDTLS_ERR_X509_SIG_MISMATCH, "certificate: signature algorithms do not match") \
	X(MBEDTLS_ERR_X509_CERT_UNKNOWN_FORMAT, "certificate: unknown format") \
	X(MBEDTLS_ERR_X509_BAD_INPUT_DATA, "certificate: bad input") \
	X(MBEDTLS_ERR_X509_FEATURE_UNAVAILABLE, "certificate: feature not built in") \
	X(MBEDTLS_ERR_PK_BAD_INPUT_DATA, "key: bad input") \
	X(MBEDTLS_ERR_PK_KEY_INVALID_VERSION, "key: unsupported version") \
	X(MBEDTLS_ERR_PK_PASSWORD_MISMATCH, "key: wrong password") \
	X(MBEDTLS_ERR_PK_INVALID_PUBKEY, "key: invalid public key") \
	X(MBEDTLS_ERR_PK_INVALID_ALG, "key: invalid algorithm") \
	X(MBEDTLS_ERR_PK_FEATURE_UNAVAILABLE, "key: feature not built in") \
	X(MBEDTLS_ERR_PEM_INVALID_ENC_IV, "invalid PEM encryption IV") \
	X(MBEDTLS_ERR_PEM_UNKNOWN_ENC_ALG, "unknown PEM encryption") \
	X(MBEDTLS_ERR_PEM_BAD_INPUT_DATA, "bad PEM input") \
	X(MBEDTLS_ERR_ASN1_UNEXPECTED_TAG, "unexpected ASN.1 tag") \
	X(MBEDTLS_ERR_ASN1_INVALID_LENGTH, "invalid ASN.1 length") \
	X(MBEDTLS_ERR_ASN1_LENGTH_MISMATCH, "ASN.1 length mismatch") \
	X(MBEDTLS_ERR_ASN1_INVALID_DATA, "invalid ASN.1 data") \
	X(MBEDTLS_ERR_RSA_KEY_CHECK_FAILED, "RSA key check failed") \
	X(MBEDTLS_ERR_RSA_VERIFY_FAILED, "RSA signature verification failed")
#else
#define KR_TLS_ERRORS_RARE(X)
#endif

/*
 * mbedTLS's own error texts (MBEDTLS_ERROR_C) cost 14 KB of a 350 KB binary;
 * these are the errors a user can act on, the rest print as their code. A
 * code is a high-level part (SSL, X509, PK) plus a low-level one (ASN.1,
 * bignum, PEM): both are named when known. One row per code: X(code, text).
 */
#define KR_TLS_ERRORS(X) \
	X(MBEDTLS_ERR_NET_RECV_FAILED, "the connection broke while receiving") \
	X(MBEDTLS_ERR_NET_SEND_FAILED, "the connection broke while sending") \
	X(MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE, "the server sent a fatal alert") \
	X(MBEDTLS_ERR_SSL_HANDSHAKE_FAILURE, "handshake failed: no common protocol version, cipher, group or signature") \
	X(MBEDTLS_ERR_SSL_BAD_PROTOCOL_VERSION, "handshake failed: the server's TLS version is not 1.2 or 1.3") \
	X(MBEDTLS_ERR_SSL_CONN_EOF, "the connection was closed") \
	X(MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY, "the server closed the TLS session") \
	X(MBEDTLS_ERR_SSL_ALLOC_FAILED, "out of TLS memory (KR_TLS_HEAP_SIZE)") \
	X(MBEDTLS_ERR_SSL_DECODE_ERROR, "malformed TLS message from the server") \
	X(MBEDTLS_ERR_SSL_INVALID_RECORD, "invalid TLS record from the server") \
	X(MBEDTLS_ERR_SSL_INVALID_MAC, "TLS record failed its integrity check") \
	X(MBEDTLS_ERR_SSL_UNEXPECTED_MESSAGE, "unexpected TLS message from the server") \
	X(MBEDTLS_ERR_SSL_BAD_CERTIFICATE, "the server's certificate could not be used") \
	X(MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE, "no client certificate") \
	X(MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED, "no CA certificate configured") \
	X(MBEDTLS_ERR_SSL_UNRECOGNIZED_NAME, "the server does not know the name asked for (SNI)") \
	X(MBEDTLS_ERR_SSL_INTERNAL_ERROR, "internal TLS error") \
	KR_TLS_ERRORS_RARE(X) \
	X(MBEDTLS_ERR_X509_CERT_VERIFY_FAILED, "certificate verification failed") \
	X(MBEDTLS_ERR_X509_INVALID_FORMAT, "certificate: invalid format") \
	X(MBEDTLS_ERR_X509_INVALID_ALG, "certificate: invalid algorithm") \
	X(MBEDTLS_ERR_X509_INVALID_NAME, "certificate: invalid name") \
	X(MBEDTLS_ERR_X509_INVALID_DATE, "certificate: invalid date") \
	X(MBEDTLS_ERR_X509_INVALID_SIGNATURE, "certificate: invalid signature") \
	X(MBEDTLS_ERR_X509_UNKNOWN_SIG_ALG, "certificate: unsupported signature algorithm") \
	X(MBEDTLS_ERR_X509_ALLOC_FAILED, "certificate: out of TLS memory (KR_TLS_HEAP_SIZE)") \
	X(MBEDTLS_ERR_PK_ALLOC_FAILED, "key: out of TLS memory (KR_TLS_HEAP_SIZE)") \
	X(MBEDTLS_ERR_PK_TYPE_MISMATCH, "key: wrong type") \
	X(MBEDTLS_ERR_PK_KEY_INVALID_FORMAT, "key: invalid format") \
	X(MBEDTLS_ERR_PK_UNKNOWN_PK_ALG, "key: unknown algorithm") \
	X(MBEDTLS_ERR_PK_PASSWORD_REQUIRED, "key: encrypted (a password is needed; not supported)") \
	X(MBEDTLS_ERR_PK_UNKNOWN_NAMED_CURVE, "key: unsupported curve") \
	X(MBEDTLS_ERR_PEM_NO_HEADER_FOOTER_PRESENT, "no PEM header or footer") \
	X(MBEDTLS_ERR_PEM_INVALID_DATA, "invalid PEM data") \
	X(MBEDTLS_ERR_PEM_PASSWORD_REQUIRED, "PEM key is encrypted (not supported)") \
	X(MBEDTLS_ERR_BASE64_INVALID_CHARACTER, "invalid base64 character") \
	X(MBEDTLS_ERR_ASN1_OUT_OF_DATA, "ASN.1 data ends early") \
	X(MBEDTLS_ERR_MPI_ALLOC_FAILED, "out of TLS memory (KR_TLS_HEAP_SIZE)") \
	X(MBEDTLS_ERR_ECP_FEATURE_UNAVAILABLE, "elliptic curve not built in") \
	X(MBEDTLS_ERR_ECP_VERIFY_FAILED, "ECDSA signature verification failed")

/* The codes (all fit 16 bits) and the texts, each ended by a NUL, in the same
 * order: no table of pointers (16 bytes a row) beside the texts. */
#define KR_TLS_ERR_CODE(code, text) code,
#define KR_TLS_ERR_TEXT(code, text) text "\0"
static const short tls_error_codes[] = { KR_TLS_ERRORS(KR_TLS_ERR_CODE) };
static const char tls_error_texts[] = KR_TLS_ERRORS(KR_TLS_ERR_TEXT);

/*
 * The fatal alerts a server sends, by their number (RFC 8446 6.2): what it
 * refused, seen from the client. One row per alert: X(number, text).
 */
#define KR_TLS_ALERTS(X) \
	X(MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE, "handshake failure: no common cipher, group or signature algorithm") \
	X(MBEDTLS_SSL_ALERT_MSG_PROTOCOL_VERSION, "protocol version: no TLS version both sides accept") \
	X(MBEDTLS_SSL_ALERT_MSG_INSUFFICIENT_SECURITY, "insufficient security: the server wants stronger ciphers") \
	X(MBEDTLS_SSL_ALERT_MSG_CERT_REQUIRED, "certificate required: the server wants a client certificate (--cert, --key)") \
	X(MBEDTLS_SSL_ALERT_MSG_NO_CERT, "no certificate: the server wants a client certificate (--cert, --key)") \
	X(MBEDTLS_SSL_ALERT_MSG_BAD_CERT, "bad certificate: the server refused the client certificate") \
	X(MBEDTLS_SSL_ALERT_MSG_UNSUPPORTED_CERT, "unsupported certificate: the server refused the client certificate's type or usage") \
	X(MBEDTLS_SSL_ALERT_MSG_CERT_REVOKED, "certificate revoked: the client certificate was revoked") \
	X(MBEDTLS_SSL_ALERT_MSG_CERT_EXPIRED, "certificate expired: the client certificate has expired") \
	X(MBEDTLS_SSL_ALERT_MSG_CERT_UNKNOWN, "certificate unknown: the server refused the client certificate") \
	X(MBEDTLS_SSL_ALERT_MSG_UNKNOWN_CA, "unknown CA: the server does not trust the client certificate's issuer") \
	X(MBEDTLS_SSL_ALERT_MSG_ACCESS_DENIED, "access denied") \
	X(MBEDTLS_SSL_ALERT_MSG_DECRYPT_ERROR, "decrypt error: a signature or key exchange failed on the server") \
	X(MBEDTLS_SSL_ALERT_MSG_DECODE_ERROR, "decode error: the server could not parse a message") \
	X(MBEDTLS_SSL_ALERT_MSG_ILLEGAL_PARAMETER, "illegal parameter") \
	X(MBEDTLS_SSL_ALERT_MSG_UNEXPECTED_MESSAGE, "unexpected message") \
	X(MBEDTLS_SSL_ALERT_MSG_BAD_RECORD_MAC, "bad record MAC") \
	X(MBEDTLS_SSL_ALERT_MSG_RECORD_OVERFLOW, "record overflow") \
	X(MBEDTLS_SSL_ALERT_MSG_INTERNAL_ERROR, "internal error on the server") \
	X(MBEDTLS_SSL_ALERT_MSG_MISSING_EXTENSION, "missing extension") \
	X(MBEDTLS_SSL_ALERT_MSG_UNSUPPORTED_EXT, "unsupported extension") \
	X(MBEDTLS_SSL_ALERT_MSG_UNRECOGNIZED_NAME, "unrecognized name: the server does not serve the name asked for (SNI)") \
	X(MBEDTLS_SSL_ALERT_MSG_NO_APPLICATION_PROTOCOL, "no application protocol")

#if KR_TLS_ERROR_TEXTS_FULL
static const short tls_alert_codes[] = { KR_TLS_ALERTS(KR_TLS_ERR_CODE) };
static const char tls_alert_texts[] = KR_TLS_ALERTS(KR_TLS_ERR_TEXT);
#endif

/* The text of `code` in a pair of tables as above, or NULL. */
#define TABLE_TEXT(codes, texts, code) table_text(codes, sizeof(codes) / sizeof(codes[0]), texts, code)

static const char *table_text(const short *codes, size_t n, const char *t, int code)
{
	for (size_t i = 0; i < n; i++)
		if (codes[i] == code)
			return kr_str_nth(t, i);
	return NULL;
}

static void describe_error(int code, char *buf, size_t size)
{
	int high = -((-code) & 0xff80), low = -((-code) & 0x7f);
	const char *h = high ? TABLE_TEXT(tls_error_codes, tls_error_texts, high) : NULL;
	const char *l = low ? TABLE_TEXT(tls_error_codes, tls_error_texts, low) : NULL;

	if (h && l)
		kr_snprintf(buf, size, "%s: %s", h, l);
	else if (h || l)
		kr_snprintf(buf, size, "%s", h ? h : l);
	else
		kr_snprintf(buf, size, "mbedTLS error -0x%04x", (unsigned)-code);
}

/*
 * Why a certificate was not trusted, from mbedTLS's verify flags (its own
 * texts go with MBEDTLS_X509_REMOVE_INFO, for size).
 */
static const struct {
	uint32_t flag;
	const char *text;
} verify_flags[] = {
	{ MBEDTLS_X509_BADCERT_EXPIRED, "the certificate has expired" },
	{ MBEDTLS_X509_BADCERT_FUTURE, "the certificate is not valid yet" },
	{ MBEDTLS_X509_BADCERT_CN_MISMATCH, "its names (CN, SAN) do not match the server's name" },
	{ MBEDTLS_X509_BADCERT_NOT_TRUSTED, "not signed by a trusted CA" },
	{ MBEDTLS_X509_BADCERT_REVOKED, "the certificate was revoked" },
	{ MBEDTLS_X509_BADCERT_MISSING, "no certificate" },
	{ MBEDTLS_X509_BADCERT_SKIP_VERIFY, "verification skipped" },
	{ MBEDTLS_X509_BADCERT_KEY_USAGE, "key usage does not allow it" },
	{ MBEDTLS_X509_BADCERT_EXT_KEY_USAGE, "extended key usage does not allow server authentication" },
	{ MBEDTLS_X509_BADCERT_NS_CERT_TYPE, "Netscape certificate type does not allow it" },
	{ MBEDTLS_X509_BADCERT_BAD_MD, "signed with a hash that is not accepted" },
	{ MBEDTLS_X509_BADCERT_BAD_PK, "signed with a key type that is not accepted" },
	{ MBEDTLS_X509_BADCERT_BAD_KEY, "signed with a key that is too small" },
	{ MBEDTLS_X509_BADCERT_OTHER, "other reason" },
};

static void describe_verify(uint32_t flags, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(verify_flags) / sizeof(verify_flags[0]) && used < size; i++) {
		if (!(flags & verify_flags[i].flag))
			continue;
		int n = kr_snprintf(buf + used, size - used, "%s%s", used ? "; " : "", verify_flags[i].text);
		if (n < 0)
			break;
		used += (size_t)n;
		flags &= ~verify_flags[i].flag;
	}
	if (flags && used < size)
		kr_snprintf(buf + used, size - used, "%sflags 0x%x", used ? "; " : "", (unsigned)flags);
}

/*
 * mbedTLS's certificate dates in UTC without musl's time-zone code (5 KB):
 * days since the epoch to a civil date in 400-year eras of 146097 days,
 * with years counted from March so that the leap day comes last.
 */
struct tm *mbedtls_platform_gmtime_r(const mbedtls_time_t *tt, struct tm *tm);

struct tm *mbedtls_platform_gmtime_r(const mbedtls_time_t *tt, struct tm *tm)
{
	int64_t t = (int64_t)*tt, days = t / 86400, secs = t % 86400;

	if (secs < 0) {
		secs += 86400;
		days--;
	}
	memset(tm, 0, sizeof(*tm));
	tm->tm_hour = (int)(secs / 3600);
	tm->tm_min = (int)(secs / 60 % 60);
	tm->tm_sec = (int)(secs % 60);
	tm->tm_wday = (int)(((days % 7) + 11) % 7);  /* 1970-01-01 was a Thursday */
	days += 719468;
	int64_t era = (days >= 0 ? days : days - 146096) / 146097;
	int64_t doe = days - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	int64_t y = yoe + era * 400 + (m <= 2);

	if (y - 1900 > INT32_MAX || y - 1900 < INT32_MIN)
		return NULL;
	tm->tm_year = (int)(y - 1900);
	tm->tm_mon = (int)(m - 1);
	tm->tm_mday = (int)d;
	return tm;
}

void kr_tls_ctx_init(struct kr_tls_ctx *ctx)
{
	memset(ctx, 0, sizeof(*ctx));
	mbedtls_ssl_config_init(&ctx->conf);
	mbedtls_x509_crt_init(&ctx->ca);
	mbedtls_x509_crt_init(&ctx->cert);
	mbedtls_pk_init(&ctx->key);
}

void kr_tls_ctx_free(struct kr_tls_ctx *ctx)
{
	mbedtls_ssl_config_free(&ctx->conf);
	mbedtls_x509_crt_free(&ctx->ca);
	mbedtls_x509_crt_free(&ctx->cert);
	mbedtls_pk_free(&ctx->key);
	kr_tls_ctx_init(ctx);
}

/* PEM parsers want the terminating NUL counted; DER must not have it. */
static size_t parse_len(const unsigned char *buf, size_t len)
{
	static const char begin[] = "-----BEGIN";
	size_t i;

	for (i = 0; i + sizeof(begin) - 1 <= len; i++)
		if (memcmp(buf + i, begin, sizeof(begin) - 1) == 0)
			return buf[len] == '\0' ? len + 1 : 0;
	return len;
}

/*
 * Signature algorithms in our order of preference. PKCS#1 v1.5 comes before
 * RSA-PSS because mbedTLS 3.6 verifies PSS only in TLS 1.3: a TLS 1.2 server
 * that honours the client's order (OpenSSL, Go) then signs with PKCS#1, while
 * TLS 1.3 (which forbids PKCS#1 signatures in the handshake) still gets PSS.
 * A smaller mbedTLS configuration (PROFILE=tiny) offers only what it can verify.
 */
static const uint16_t sig_algs[] = {
	MBEDTLS_TLS1_3_SIG_ECDSA_SECP256R1_SHA256,
#if defined(MBEDTLS_ECP_DP_SECP384R1_ENABLED)
	MBEDTLS_TLS1_3_SIG_ECDSA_SECP384R1_SHA384,
#endif
#if defined(MBEDTLS_RSA_C)
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA256,
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA384,
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA512,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA256,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA384,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA512,
#endif
	MBEDTLS_TLS1_3_SIG_NONE,
};

static int fail(char *err, size_t errlen, const char *what, int code)
{
	char reason[128];

	if (code) {
		describe_error(code, reason, sizeof(reason));
		kr_snprintf(err, errlen, "%s: %s", what, reason);
	} else {
		kr_snprintf(err, errlen, "%s", what);
	}
	return KR_EINVAL;
}

/* The AEADs in the order the client offers them (KR_TLS_AEAD_FIRST): AES-GCM is
 * cheapest with AES instructions (port/crypto/gcm.c), ChaCha20-Poly1305 without. */
static const int aes_first[] = {
	MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
	MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
	MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	0,
};
static const int chacha_first[] = {
	MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
	MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	0,
};

static const int *aead_order(void)
{
	if (KR_TLS_AEAD_FIRST == 1)
		return aes_first;
	if (KR_TLS_AEAD_FIRST == 2)
		return chacha_first;
	return kr_port_cpu_has_aes() ? aes_first : chacha_first;
}

#define UNTERMINATED ": PEM buffer not terminated"

/* Loads opts' certificate and key into ctx as its own ("client" or "server", for messages). */
static int own_cert(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts, const char *who,
		    char *err, size_t errlen)
{
	char what[64];
	size_t n;
	int r;

	n = parse_len(opts->cert, opts->cert_len);
	kr_snprintf(what, sizeof(what), "unable to parse %s certificate%s", who, n ? "" : UNTERMINATED);
	if (n == 0)
		return fail(err, errlen, what, 0);
	r = mbedtls_x509_crt_parse(&ctx->cert, opts->cert, n);
	if (r != 0)
		return fail(err, errlen, what, r < 0 ? r : 0);
	n = parse_len(opts->key, opts->key_len);
	kr_snprintf(what, sizeof(what), "unable to parse %s key%s", who, n ? "" : UNTERMINATED);
	if (n == 0)
		return fail(err, errlen, what, 0);
	r = mbedtls_pk_parse_key(&ctx->key, opts->key, n, NULL, 0,
				 mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
	if (r != 0)
		return fail(err, errlen, what, r);
	r = mbedtls_pk_check_pair(&ctx->cert.pk, &ctx->key,
				  mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
	kr_snprintf(what, sizeof(what), "%s key does not match the %s certificate", who, who);
	if (r != 0)
		return fail(err, errlen, what, 0);
	kr_snprintf(what, sizeof(what), "unable to use %s certificate", who);
	r = mbedtls_ssl_conf_own_cert(&ctx->conf, &ctx->cert, &ctx->key);
	if (r != 0)
		return fail(err, errlen, what, r);
	return 0;
}

/* What client and server share: RNG, versions 1.2-1.3, signatures and suites. */
static int conf_common(struct kr_tls_ctx *ctx, int endpoint, char *err, size_t errlen)
{
	int r;

	kr_tls_ctx_free(ctx);
	r = mbedtls_ssl_config_defaults(&ctx->conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
					MBEDTLS_SSL_PRESET_DEFAULT);
	if (r)
		return fail(err, errlen, "unable to set up TLS", r);
	mbedtls_ssl_conf_rng(&ctx->conf, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
#if defined(MBEDTLS_SSL_PROTO_TLS1_2)
	mbedtls_ssl_conf_min_tls_version(&ctx->conf, MBEDTLS_SSL_VERSION_TLS1_2);
#else
	mbedtls_ssl_conf_min_tls_version(&ctx->conf, MBEDTLS_SSL_VERSION_TLS1_3);
#endif
	mbedtls_ssl_conf_max_tls_version(&ctx->conf, MBEDTLS_SSL_VERSION_TLS1_3);
	mbedtls_ssl_conf_sig_algs(&ctx->conf, sig_algs);
	mbedtls_ssl_conf_ciphersuites(&ctx->conf, aead_order());
	return 0;
}

/* Parses a CA bundle into ctx->ca ("CA certificate" or "client CA certificate", for messages). */
static int load_ca(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts, const char *what,
		   char *err, size_t errlen)
{
	char msg[96];
	size_t n = parse_len(opts->ca, opts->ca_len);
	int r;

	kr_snprintf(msg, sizeof(msg), "unable to parse %s%s", what, n ? "" : UNTERMINATED);
	if (n == 0)
		return fail(err, errlen, msg, 0);
	r = mbedtls_x509_crt_parse(&ctx->ca, opts->ca, n);
	if (r < 0)
		return fail(err, errlen, msg, r);
	if (r > 0 && ctx->ca.version == 0) {
		kr_snprintf(msg, sizeof(msg), "unable to parse %s: no valid certificate in the file", what);
		return fail(err, errlen, msg, 0);
	}
	mbedtls_ssl_conf_ca_chain(&ctx->conf, &ctx->ca, NULL);
	return 0;
}

int kr_tls_ctx_setup(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts,
		     char *err, size_t errlen)
{
	int r = conf_common(ctx, MBEDTLS_SSL_IS_CLIENT, err, errlen);

	if (r)
		return r;
	ctx->insecure = opts->insecure_skip_verify;
	if (opts->ca_len > 0) {
		if ((r = load_ca(ctx, opts, "CA certificate", err, errlen)) != 0)
			return r;
	} else if (!ctx->insecure) {
		return fail(err, errlen, "no CA certificate to verify the server with (give one, or --insecure-skip-tls-verify)", 0);
	}
	mbedtls_ssl_conf_authmode(&ctx->conf, ctx->insecure ? MBEDTLS_SSL_VERIFY_NONE
							    : MBEDTLS_SSL_VERIFY_REQUIRED);

	if ((opts->cert_len > 0) != (opts->key_len > 0))
		return fail(err, errlen, "a client certificate needs its key, and a key its certificate", 0);
	if (opts->cert_len > 0 && (r = own_cert(ctx, opts, "client", err, errlen)) != 0)
		return r;
#if defined(MBEDTLS_SSL_SESSION_TICKETS)
	/* A build without tickets (PROFILE=tiny) makes a full handshake on every reconnect. */
	mbedtls_ssl_conf_session_tickets(&ctx->conf, MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
#if defined(MBEDTLS_SSL_PROTO_TLS1_3)
	mbedtls_ssl_conf_tls13_enable_signal_new_session_tickets(
		&ctx->conf, MBEDTLS_SSL_TLS1_3_SIGNAL_NEW_SESSION_TICKETS_ENABLED);
#endif
#endif
	ctx->ready = 1;
	return 0;
}

int kr_tls_ctx_setup_server(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts,
			    char *err, size_t errlen)
{
#if defined(MBEDTLS_SSL_SRV_C)
	int r;

	if (opts->cert_len == 0 || opts->key_len == 0)
		return fail(err, errlen, "a TLS server needs its certificate and its key", 0);
	r = conf_common(ctx, MBEDTLS_SSL_IS_SERVER, err, errlen);
	if (r)
		return r;
	/*
	 * With a client CA, a certificate is asked for and, if sent, must verify
	 * (as the kube-apiserver's --client-ca-file: a client may use a token
	 * instead). kr_tls_peer_verified() tells the two apart.
	 */
	if (opts->ca_len > 0) {
		if ((r = load_ca(ctx, opts, "client CA certificate", err, errlen)) != 0)
			return r;
		mbedtls_ssl_conf_authmode(&ctx->conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
	} else {
		mbedtls_ssl_conf_authmode(&ctx->conf, MBEDTLS_SSL_VERIFY_NONE);
	}
	if ((r = own_cert(ctx, opts, "server", err, errlen)) != 0)
		return r;
	ctx->ready = 1;
	return 0;
#else
	(void)ctx;
	(void)opts;
	return fail(err, errlen, "TLS on --listen is not built in (WITHOUT=listen_tls)", 0);
#endif
}

/* --- sessions ------------------------------------------------------------------------ */

/* A failed mbedTLS call: its code, and the alert a server's refusal carried. */
static void failed(struct kr_tls *t, int code)
{
	t->last_error = code;
	t->alert = -1;
	if (KR_TLS_ERROR_TEXTS_FULL && code == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE &&
	    t->ssl.MBEDTLS_PRIVATE(in_msg))
		t->alert = t->ssl.MBEDTLS_PRIVATE(in_msg)[1];
}

static int bio_send(void *p, const unsigned char *buf, size_t len)
{
	struct kr_tls *t = p;
	long n = kr_port_send(t->fd, buf, len);

	if (n == KR_IO_WAIT) {
		t->want = KR_POLL_OUT;
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	}
	if (n < 0) {
		t->os_error = kr_port_last_error();
		return MBEDTLS_ERR_NET_SEND_FAILED;
	}
	return (int)n;
}

static int bio_recv(void *p, unsigned char *buf, size_t len)
{
	struct kr_tls *t = p;
	long n = kr_port_recv(t->fd, buf, len);

	if (n == KR_IO_WAIT) {
		t->want = KR_POLL_IN;
		return MBEDTLS_ERR_SSL_WANT_READ;
	}
	if (n < 0) {
		t->os_error = kr_port_last_error();
		return MBEDTLS_ERR_NET_RECV_FAILED;
	}
	return (int)n;
}

/* Called for each certificate of the chain, only in a full handshake. */
static int on_verify(void *p, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
	struct kr_tls *t = p;

	(void)crt;
	(void)depth;
	(void)flags;
	t->saw_certificate = 1;
	return 0;
}

/*
 * Keeps the session the server just offered (a TLS 1.3 ticket, or the TLS 1.2
 * session) for the next connection. A failed fetch keeps the previous one.
 */
static void save_session(struct kr_tls *t)
{
	mbedtls_ssl_session s;

	mbedtls_ssl_session_init(&s);
	if (mbedtls_ssl_get_session(&t->ssl, &s) != 0) {
		mbedtls_ssl_session_free(&s);
		return;
	}
	mbedtls_ssl_session_free(&t->session);
	t->session = s;
	t->have_session = 1;
}

void kr_tls_init(struct kr_tls *t)
{
	memset(t, 0, sizeof(*t));
	mbedtls_ssl_init(&t->ssl);
	mbedtls_ssl_session_init(&t->session);
	t->fd = -1;
}

/* Sets up a session on fd: a client's (naming server_name) or, with NULL, a server's. */
static int session_start(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd, const char *server_name)
{
	int r;

	mbedtls_ssl_init(&t->ssl);
	t->ctx = ctx;
	t->fd = fd;
	t->done = 0;
	t->want = server_name ? KR_POLL_OUT : KR_POLL_IN;   /* a client speaks first */
	t->last_error = 0;
	t->alert = -1;
	t->os_error = NULL;
	t->saw_certificate = 0;
	t->unclean_eof = 0;
	r = mbedtls_ssl_setup(&t->ssl, &ctx->conf);
	if (r == 0 && server_name)
		r = mbedtls_ssl_set_hostname(&t->ssl, server_name);
	if (r != 0) {
		t->last_error = r;
		mbedtls_ssl_free(&t->ssl);
		return KR_ETLS;
	}
	t->open = 1;
	mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
	return 0;
}

int kr_tls_open(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd, const char *server_name)
{
	if (t->open)
		kr_tls_close(t);
	if (session_start(t, ctx, fd, server_name) != 0)
		return KR_ETLS;
	mbedtls_ssl_set_verify(&t->ssl, on_verify, t);
	if (t->have_session && mbedtls_ssl_set_session(&t->ssl, &t->session) != 0)
		t->have_session = 0;
	return 0;
}

int kr_tls_accept(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd)
{
	kr_tls_init(t);
	t->server = 1;
	return session_start(t, ctx, fd, NULL);
}

int kr_tls_peer_verified(struct kr_tls *t, char *cn, size_t size)
{
	const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&t->ssl);
	const mbedtls_x509_name *name;

	if (size)
		cn[0] = '\0';
	if (!crt)
		return 0;
	if (mbedtls_ssl_get_verify_result(&t->ssl) != 0)
		return KR_ETLS;
	for (name = &crt->subject; name; name = name->next)
		if (name->oid.len == MBEDTLS_OID_SIZE(MBEDTLS_OID_AT_CN) &&
		    memcmp(name->oid.p, MBEDTLS_OID_AT_CN, name->oid.len) == 0) {
			if (name->val.len == 0 || name->val.len >= size ||
			    memchr(name->val.p, '\0', name->val.len))
				return KR_ETLS;
			memcpy(cn, name->val.p, name->val.len);
			cn[name->val.len] = '\0';
			return 1;
		}
	return KR_ETLS;                /* verified, but names no one */
}

int kr_tls_handshake(struct kr_tls *t)
{
	int r;

	if (t->done)
		return 1;
	r = mbedtls_ssl_handshake(&t->ssl);
	if (r == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) {
		save_session(t);
		r = mbedtls_ssl_is_handshake_over(&t->ssl) ? 0 : MBEDTLS_ERR_SSL_WANT_READ;
	}
	if (r == 0) {
		t->done = 1;
		if (t->saw_certificate)
			t->full_handshakes++;
		else
			t->resumed_handshakes++;
		return 1;
	}
	if (r == MBEDTLS_ERR_SSL_WANT_READ) {
		t->want = KR_POLL_IN;
		return 0;
	}
	if (r == MBEDTLS_ERR_SSL_WANT_WRITE) {
		t->want = KR_POLL_OUT;
		return 0;
	}
	failed(t, r);
	return KR_ETLS;
}

long kr_tls_read(struct kr_tls *t, void *buf, size_t len)
{
	for (;;) {
		int r = mbedtls_ssl_read(&t->ssl, buf, len);

		if (r > 0)
			return r;
		switch (r) {
		case 0:
		case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
			return 0;
		case MBEDTLS_ERR_SSL_CONN_EOF:
			t->unclean_eof = 1;
			return 0;
		case MBEDTLS_ERR_SSL_WANT_READ:
			t->want = KR_POLL_IN;
			return KR_IO_WAIT;
		case MBEDTLS_ERR_SSL_WANT_WRITE:
			t->want = KR_POLL_OUT;
			return KR_IO_WAIT;
		case MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET:
			save_session(t);
			continue;
		default:
			failed(t, r);
			return KR_IO_ERR;
		}
	}
}

long kr_tls_write(struct kr_tls *t, const void *buf, size_t len)
{
	int r = mbedtls_ssl_write(&t->ssl, buf, len);

	if (r >= 0)
		return r;
	if (r == MBEDTLS_ERR_SSL_WANT_WRITE) {
		t->want = KR_POLL_OUT;
		return KR_IO_WAIT;
	}
	if (r == MBEDTLS_ERR_SSL_WANT_READ) {
		t->want = KR_POLL_IN;
		return KR_IO_WAIT;
	}
	failed(t, r);
	return KR_IO_ERR;
}

int kr_tls_pending(struct kr_tls *t)
{
	if (!t->open)
		return 0;
	return mbedtls_ssl_get_bytes_avail(&t->ssl) > 0 || mbedtls_ssl_check_pending(&t->ssl);
}

void kr_tls_close(struct kr_tls *t)
{
	if (!t->open)
		return;
	if (t->done) {
		/* Best effort: the socket is non-blocking and about to be closed. */
		(void)mbedtls_ssl_close_notify(&t->ssl);
		/* TLS 1.2 sessions are taken here; TLS 1.3 tickets as they arrive. */
		if (mbedtls_ssl_get_version_number(&t->ssl) == MBEDTLS_SSL_VERSION_TLS1_2)
			save_session(t);
	}
	mbedtls_ssl_free(&t->ssl);
	t->open = 0;
	t->done = 0;
}

void kr_tls_free(struct kr_tls *t)
{
	unsigned full = t->full_handshakes, resumed = t->resumed_handshakes;

	kr_tls_close(t);
	mbedtls_ssl_session_free(&t->session);
	kr_tls_init(t);
	t->full_handshakes = full;
	t->resumed_handshakes = resumed;
}

void kr_tls_describe(const struct kr_tls *t, char *buf, size_t size)
{
	char reason[160], tag[24] = "";
	const char *why = NULL;
	uint32_t flags;

	if (size == 0)
		return;
	if (t->last_error == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
		flags = mbedtls_ssl_get_verify_result(&t->ssl);
		describe_verify(flags, reason, sizeof(reason));
		kr_snprintf(buf, size, "server certificate not trusted: %s", reason);
		return;
	}
	if (t->last_error == 0) {
		kr_snprintf(buf, size, "no error");
		return;
	}
	describe_error(t->last_error, reason, sizeof(reason));
	/* The socket's own reason after a transport failure; a server's alert in words. */
	if (t->last_error == MBEDTLS_ERR_NET_RECV_FAILED || t->last_error == MBEDTLS_ERR_NET_SEND_FAILED)
		why = t->os_error;
#if KR_TLS_ERROR_TEXTS_FULL
	if (t->last_error == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE && t->alert >= 0) {
		kr_snprintf(tag, sizeof(tag), "TLS alert %d, ", t->alert);
		why = TABLE_TEXT(tls_alert_codes, tls_alert_texts, t->alert);
		if (why)
			kr_snprintf(reason, sizeof(reason), "the server refused");
	}
#endif
	if (t->server) {
		/* The texts are written from a client's side: here the peer is the client. */
		char *p = strstr(reason, "the server");

		if (p)
			memcpy(p, "the client", 10);
	}
	kr_snprintf(buf, size, "%s%s%s (%s-0x%04x)", reason, why ? ": " : "", why ? why : "", tag,
		    (unsigned)-t->last_error);
}

const char *kr_tls_version(struct kr_tls *t)
{
	return t->open ? mbedtls_ssl_get_version(&t->ssl) : "none";
}

const char *kr_tls_cipher(struct kr_tls *t)
{
	return t->open ? mbedtls_ssl_get_ciphersuite(&t->ssl) : "none";
}
