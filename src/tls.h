/*
 * TLS over a non-blocking socket, on mbedTLS 3.6.
 *
 * A kr_tls_ctx holds what all connections to one server share: the CA, the
 * client certificate and key, the verification mode. A kr_tls is one session
 * on one socket; it keeps the last session ticket across kr_tls_close() so the
 * next kr_tls_open() to the same server resumes instead of doing a full
 * handshake. All memory comes from mbedTLS's static heap (KR_TLS_HEAP_SIZE).
 */
#ifndef KR_TLS_H
#define KR_TLS_H

#include <stddef.h>

#include "mbedtls/pk.h"
#include "mbedtls/ssl.h"
#include "mbedtls/x509_crt.h"

/* PEM or DER buffers; lengths exclude any terminating NUL. NULL/0 = absent. */
struct kr_tls_opts {
	const unsigned char *ca;
	size_t ca_len;
	const unsigned char *cert;     /* client certificate (chain) */
	size_t cert_len;
	const unsigned char *key;      /* client key: PKCS#1, SEC1 or PKCS#8 */
	size_t key_len;
	int insecure_skip_verify;      /* only from --insecure-skip-tls-verify */
};

struct kr_tls_ctx {
	mbedtls_ssl_config conf;
	mbedtls_x509_crt ca;
	mbedtls_x509_crt cert;
	mbedtls_pk_context key;
	int insecure;
	int ready;
};

struct kr_tls {
	mbedtls_ssl_context ssl;
	mbedtls_ssl_session session;   /* saved for resumption */
	struct kr_tls_ctx *ctx;
	int fd;
	int open;
	int have_session;
	int done;                      /* handshake complete */
	int want;                      /* KR_POLL_IN / KR_POLL_OUT the last call waits for */
	int last_error;                /* mbedTLS error code of the last failure */
	int alert;                     /* then: the fatal alert the server sent, -1: none */
	const char *os_error;          /* the system's reason the socket failed, NULL: none */
	int saw_certificate;           /* this handshake verified a certificate chain */
	int unclean_eof;               /* the peer closed without close_notify */
	int server;                    /* accepted (kr_tls_accept): the peer is a client */
	unsigned full_handshakes;      /* counters, for tests and stats */
	unsigned resumed_handshakes;
};

/*
 * Points mbedTLS's allocator at the static heap and starts PSA crypto. Call
 * once before anything else here. Returns 0 or KR_ETLS.
 */
int kr_tls_global_init(void);

/*
 * The memset of mbedTLS's buffer allocator (the Makefile builds
 * memory_buffer_alloc.c with memset named this): zeroes with kr_port_zero,
 * which writes only pages that are not zero already, so zeroing the static
 * heap at start-up and fresh blocks later makes no page resident.
 */
void *kr_tls_heap_memset(void *p, int c, size_t n);

/* Makes ctx empty; cannot fail. */
void kr_tls_ctx_init(struct kr_tls_ctx *ctx);

/*
 * Loads the CA and client credentials and sets up the shared configuration.
 * Returns 0, or KR_EINVAL with a reason in err (never key material).
 */
int kr_tls_ctx_setup(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts,
		     char *err, size_t errlen);

/*
 * The server side (TLS on --listen): opts->cert/key are the server's own,
 * opts->ca the optional client CA (a client certificate is then asked for,
 * and one that is sent must verify). Returns 0, or KR_EINVAL with a reason
 * in err (never key material), also when the build has no server side.
 */
int kr_tls_ctx_setup_server(struct kr_tls_ctx *ctx, const struct kr_tls_opts *opts,
			    char *err, size_t errlen);

/* Releases everything ctx holds; it may be set up again. */
void kr_tls_ctx_free(struct kr_tls_ctx *ctx);

/* Makes t empty (no saved session); cannot fail. */
void kr_tls_init(struct kr_tls *t);

/*
 * Starts a client session on the connected non-blocking socket fd. server_name
 * is the host the certificate must match (DNS name or IP literal) and is sent
 * as SNI when it is a name. Returns 0 or KR_ETLS (out of TLS heap).
 */
int kr_tls_open(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd, const char *server_name);

/*
 * Starts a server session on the accepted non-blocking socket fd (t is made
 * empty first). Returns 0 or KR_ETLS (out of TLS heap); kr_tls_handshake
 * goes on from there.
 */
int kr_tls_accept(struct kr_tls *t, struct kr_tls_ctx *ctx, int fd);

/*
 * After a server handshake: 1 and the certificate's common name in cn when
 * the client sent a certificate that verified against the client CA, 0 when
 * it sent none, KR_ETLS when it did not verify or names no one (no CN, or a
 * CN longer than size - 1).
 */
int kr_tls_peer_verified(struct kr_tls *t, char *cn, size_t size);

/*
 * Advances the handshake. Returns 1 when complete, 0 when it waits for the
 * socket (t->want says for what), KR_ETLS on failure (kr_tls_describe says why).
 */
int kr_tls_handshake(struct kr_tls *t);

/*
 * Reads decrypted bytes: n > 0, 0 when the peer closed (close_notify or EOF),
 * KR_IO_WAIT (t->want says for what), KR_IO_ERR on failure.
 */
long kr_tls_read(struct kr_tls *t, void *buf, size_t len);

/*
 * Writes: n > 0 bytes accepted, KR_IO_WAIT, KR_IO_ERR. After KR_IO_WAIT the
 * same buffer must be passed again (mbedTLS's WANT_WRITE rule).
 */
long kr_tls_write(struct kr_tls *t, const void *buf, size_t len);

/* Nonzero if decrypted or buffered bytes are waiting: do not sleep in poll(). */
int kr_tls_pending(struct kr_tls *t);

/* Ends the session (saving its ticket for resumption) and frees its memory. The fd is not closed. */
void kr_tls_close(struct kr_tls *t);

/* Forgets the saved session too; t is empty again. */
void kr_tls_free(struct kr_tls *t);

/* Writes a one-line description of the last failure into buf. */
void kr_tls_describe(const struct kr_tls *t, char *buf, size_t size);

/* Negotiated protocol and cipher suite names ("TLSv1.3", "TLS1-3-AES-128-GCM-SHA256"). */
const char *kr_tls_version(struct kr_tls *t);
const char *kr_tls_cipher(struct kr_tls *t);

#endif /* KR_TLS_H */
