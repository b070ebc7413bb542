#include "tls.h"

#include <stdio.h>
#include <string.h>

#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"

#include "mbedtls/error.h"
#include "mbedtls/memory_buffer_alloc.h"
#include "mbedtls/net_sockets.h"
#include "mbedtls/psa_util.h"
#include "psa/crypto.h"

/* mbedTLS's only heap: every handshake, record buffer and certificate lives here. */
static unsigned char tls_heap[KR_TLS_HEAP_SIZE] __attribute__((aligned(16)));

/* The entropy hook mbedTLS calls by this name (MBEDTLS_ENTROPY_HARDWARE_ALT). */
int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen);

int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen)
{
	return kr_port_entropy(data, output, len, olen);
}

int kr_tls_global_init(void)
{
	static int started;

	if (started)
		return 0;
	mbedtls_memory_buffer_alloc_init(tls_heap, sizeof(tls_heap));
	if (psa_crypto_init() != PSA_SUCCESS)
		return KR_ETLS;
	started = 1;
	return 0;
}

static void describe_error(int code, char *buf, size_t size)
{
	mbedtls_strerror(code, buf, size);
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
 */
static const uint16_t sig_algs[] = {
	MBEDTLS_TLS1_3_SIG_ECDSA_SECP256R1_SHA256,
	MBEDTLS_TLS1_3_SIG_ECDSA_SECP384R1_SHA384,
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA256,
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA384,
	MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA512,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA256,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA384,
	MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA512,
	MBEDTLS_TLS1_3_SIG_NONE,
};

static int fail(char *err, size_t errlen, const char *what, int code)
{
	char reason[128];

	if (code) {
		describe_error(code, reason, sizeof(reason));
		snprintf(err, errlen, "%s: %s", what, reason);
	} else {
		snprintf(err, errlen, "%s", what);
	}
	return KR_EINVAL;
}

int kr_tls_ctx_setup(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts,
		     char *err, size_t errlen)
{
	size_t n;
	int r;

	kr_tls_ctx_free(ctx);
	r = mbedtls_ssl_config_defaults(&ctx->conf, MBEDTLS_SSL_IS_CLIENT,
					MBEDTLS_SSL_TRANSPORT_STREAM,
					MBEDTLS_SSL_PRESET_DEFAULT);
	if (r)
		return fail(err, errlen, "unable to set up TLS", r);
	mbedtls_ssl_conf_rng(&ctx->conf, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
	mbedtls_ssl_conf_min_tls_version(&ctx->conf, MBEDTLS_SSL_VERSION_TLS1_2);
	mbedtls_ssl_conf_max_tls_version(&ctx->conf, MBEDTLS_SSL_VERSION_TLS1_3);
	mbedtls_ssl_conf_sig_algs(&ctx->conf, sig_algs);

	ctx->insecure = opts->insecure_skip_verify;
	if (opts->ca_len > 0) {
		n = parse_len(opts->ca, opts->ca_len);
		if (n == 0)
			return fail(err, errlen, "unable to parse CA certificate: PEM buffer not terminated", 0);
		r = mbedtls_x509_crt_parse(&ctx->ca, opts->ca, n);
		if (r < 0)
			return fail(err, errlen, "unable to parse CA certificate", r);
		if (r > 0 && ctx->ca.version == 0)
			return fail(err, errlen, "unable to parse CA certificate: no valid certificate in the file", 0);
		mbedtls_ssl_conf_ca_chain(&ctx->conf, &ctx->ca, NULL);
	} else if (!ctx->insecure) {
		return fail(err, errlen, "no CA certificate to verify the server with (give one, or --insecure-skip-tls-verify)", 0);
	}
	mbedtls_ssl_conf_authmode(&ctx->conf, ctx->insecure ? MBEDTLS_SSL_VERIFY_NONE
							    : MBEDTLS_SSL_VERIFY_REQUIRED);

	if ((opts->cert_len > 0) != (opts->key_len > 0))
		return fail(err, errlen, "a client certificate needs its key, and a key its certificate", 0);
	if (opts->cert_len > 0) {
		n = parse_len(opts->cert, opts->cert_len);
		if (n == 0)
			return fail(err, errlen, "unable to parse client certificate: PEM buffer not terminated", 0);
		r = mbedtls_x509_crt_parse(&ctx->cert, opts->cert, n);
		if (r != 0)
			return fail(err, errlen, "unable to parse client certificate", r < 0 ? r : 0);
		n = parse_len(opts->key, opts->key_len);
		if (n == 0)
			return fail(err, errlen, "unable to parse client key: PEM buffer not terminated", 0);
		r = mbedtls_pk_parse_key(&ctx->key, opts->key, n, NULL, 0,
					 mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
		if (r != 0)
			return fail(err, errlen, "unable to parse client key", r);
		r = mbedtls_pk_check_pair(&ctx->cert.pk, &ctx->key,
					  mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
		if (r != 0)
			return fail(err, errlen, "client key does not match the client certificate", 0);
		r = mbedtls_ssl_conf_own_cert(&ctx->conf, &ctx->cert, &ctx->key);
		if (r != 0)
			return fail(err, errlen, "unable to use client certificate", r);
	}
	mbedtls_ssl_conf_session_tickets(&ctx->conf, MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
	mbedtls_ssl_conf_tls13_enable_signal_new_session_tickets(
		&ctx->conf, MBEDTLS_SSL_TLS1_3_SIGNAL_NEW_SESSION_TICKETS_ENABLED);
	ctx->ready = 1;
	return 0;
}

/* --- sessions ------------------------------------------------------------------------ */

static int bio_send(void *p, const unsigned char *buf, size_t len)
{
	struct kr_tls *t = p;
	long n = kr_port_send(t->fd, buf, len);

	if (n == KR_IO_WAIT) {
		t->want = KR_POLL_OUT;
		return MBEDTLS_ERR_SSL_WANT_WRITE;
	}
	if (n < 0)
		return MBEDTLS_ERR_NET_SEND_FAILED;
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
	if (n < 0)
		return MBEDTLS_ERR_NET_RECV_FAILED;
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

int kr_tls_open(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd, const char *server_name)
{
	int r;

	if (t->open)
		kr_tls_close(t);
	mbedtls_ssl_init(&t->ssl);
	t->ctx = ctx;
	t->fd = fd;
	t->done = 0;
	t->want = KR_POLL_OUT;
	t->last_error = 0;
	t->saw_certificate = 0;
	t->unclean_eof = 0;
	r = mbedtls_ssl_setup(&t->ssl, &ctx->conf);
	if (r == 0)
		r = mbedtls_ssl_set_hostname(&t->ssl, server_name);
	if (r != 0) {
		t->last_error = r;
		mbedtls_ssl_free(&t->ssl);
		return KR_ETLS;
	}
	t->open = 1;
	mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
	mbedtls_ssl_set_verify(&t->ssl, on_verify, t);
	if (t->have_session && mbedtls_ssl_set_session(&t->ssl, &t->session) != 0)
		t->have_session = 0;
	return 0;
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
	t->last_error = r;
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
			t->last_error = r;
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
	t->last_error = r;
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
	char reason[160];
	uint32_t flags;

	if (size == 0)
		return;
	if (t->last_error == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
		flags = mbedtls_ssl_get_verify_result(&t->ssl);
		if (mbedtls_x509_crt_verify_info(reason, sizeof(reason), "", flags) <= 0)
			snprintf(reason, sizeof(reason), "flags 0x%x", (unsigned)flags);
		/* verify_info ends each reason with a newline: make it one line. */
		for (char *p = reason; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : '\0';
		snprintf(buf, size, "server certificate not trusted: %s", reason);
		return;
	}
	if (t->last_error == 0) {
		snprintf(buf, size, "no error");
		return;
	}
	describe_error(t->last_error, reason, sizeof(reason));
	snprintf(buf, size, "%s (-0x%04x)", reason, (unsigned)-t->last_error);
}

const char *kr_tls_version(struct kr_tls *t)
{
	return t->open ? mbedtls_ssl_get_version(&t->ssl) : "none";
}

const char *kr_tls_cipher(struct kr_tls *t)
{
	return t->open ? mbedtls_ssl_get_ciphersuite(&t->ssl) : "none";
}
