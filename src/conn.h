/*
 * One connection to the API server: name lookup, non-blocking connect, TLS
 * handshake, then requests one after another on the kept-alive connection.
 *
 * Everything is driven from the loop; nothing here blocks. Each request
 * hands its response on through callbacks as bytes arrive (head, body spans,
 * end), so a watch that never ends costs no more than one read buffer.
 * With cfg.proxy set, lookup and connect go to the proxy and a CONNECT
 * tunnel is opened before the TLS handshake.
 * Every state that waits has a deadline: lookup, connect, proxy CONNECT and
 * handshake share the connect timeout; a response has a read-idle deadline (no byte
 * for that long closes the connection with a reason).
 */
#ifndef KR_CONN_H
#define KR_CONN_H

#include <stdint.h>

#include "http.h"
#include "inflate.h"
#include "kreflect_config.h"
#include "loop.h"
#include "proxy.h"
#include "tls.h"

#ifndef KR_HOST_MAX
#define KR_HOST_MAX 256            /* DNS names are at most 253 bytes */
#endif
#ifndef KR_DNS_CACHE_MS
#define KR_DNS_CACHE_MS 30000      /* a lookup's answer is reused this long */
#endif
#ifndef KR_CONN_MAX_HEADERS
#define KR_CONN_MAX_HEADERS 8      /* extra headers of one request (Content-Type, ...) */
#endif
#ifndef KR_CONN_MAX_ADDRS
#define KR_CONN_MAX_ADDRS 8        /* addresses tried in turn for one name */
#endif

enum kr_conn_state {
	KR_CONN_IDLE,                  /* no socket */
	KR_CONN_RESOLVING,             /* name lookup running in a child */
	KR_CONN_CONNECTING,            /* TCP connect in flight (to the proxy, if any) */
	KR_CONN_PROXY,                 /* CONNECT sent to the proxy, waiting for its 200 */
	KR_CONN_HANDSHAKE,             /* TLS handshake */
	KR_CONN_READY,                 /* connected, no request in flight */
	KR_CONN_SENDING,               /* writing a request */
	KR_CONN_RECEIVING,             /* reading its response */
	KR_CONN_NSTATES
};

struct kr_conn_cfg {
	char host[KR_HOST_MAX];        /* DNS name or IP literal (no brackets) */
	uint16_t port;
	char server_name[KR_HOST_MAX]; /* name the certificate must match; "" = host */
	struct kr_tls_ctx *tls;        /* NULL: plain TCP (simulator, benchmarks) */
	int connect_timeout_ms;        /* lookup + connect + handshake; 0 = 10 s */
	int idle_timeout_ms;           /* default read-idle deadline; 0 = 60 s */
	/* NULL: connect directly. Else an HTTP proxy (caller-owned, must outlive
	 * the connection): TCP goes to it, "CONNECT host:port" opens a tunnel, and
	 * TLS to the API server (verified against server_name) runs inside it. */
	const struct kr_proxy *proxy;
};

struct kr_request {
	const char *method;            /* NULL = "GET" */
	const char *path;
	const struct kr_http_param *params;
	size_t nparams;
	const char *bearer_token;      /* NULL or "" = no Authorization header */
	int idle_timeout_ms;           /* 0 = the connection's default */
	/* Extra headers after the standard ones (at most KR_CONN_MAX_HEADERS). */
	const struct kr_http_header *headers;
	size_t nheaders;
	/* A request body (NULL = none), sent after the head with its
	 * Content-Length; not copied: the caller keeps it until on_end. */
	const char *body;
	size_t body_len;
	/* NULL: ask for no coding, and fail a response that has one. Else
	 * (caller-owned, its bounds set, kept until on_end): send
	 * "Accept-Encoding: gzip" and inflate a gzip body through it, so that
	 * on_body sees the decoded bytes. A corrupt body or a bound hit ends the
	 * request with inflate->error set. */
	struct kr_inflate *inflate;
	/* Status and headers are known. Return < 0 to abandon the request: the
	 * connection is closed and on_end gets KR_ECANCELED. */
	int (*on_head)(void *arg, const struct kr_http_resp *resp);
	/* Decoded body bytes, valid during the call. Returns how many it took:
	 * len, or fewer to stop there (the connection keeps the rest and stops
	 * reading until kr_conn_resume() hands it over again; meanwhile its
	 * read-idle deadline does not run, so the caller that stopped it owns
	 * the wait and must resume or close it), or < 0 to abandon. */
	long (*on_body)(void *arg, const char *data, size_t len);
	/* Exactly once per request, unless kr_conn_close() ended it: err 0 =
	 * complete response, else why it failed. May start the next request. */
	void (*on_end)(void *arg, int err, const char *reason);
	void *arg;
};

struct kr_conn {
	struct kr_conn_cfg cfg;
	struct kr_loop *loop;
	struct kr_source src;
	struct kr_timer timer;
	enum kr_conn_state state;
	struct kr_tls tls;
	struct kr_http_resp resp;
	struct kr_addr addrs[KR_CONN_MAX_ADDRS];
	int naddrs;
	int addr_index;
	int resolve_fd;
	kr_ms_t resolved_at;           /* when addrs came from a lookup; 0 = never / stale */
	struct kr_request req;         /* the request in flight (callbacks) */
	int have_request;
	int reused;                    /* sent on a kept-alive connection */
	int retried;                   /* already resent once after a stale reuse */
	int response_started;          /* a response byte arrived */
	int idle_ms;                   /* read-idle deadline of this request */
	int inflating;                 /* the body goes through req.inflate */
	int held;                      /* on_body took only part: not reading */
	const char *held_body;         /* what it did not take (inside rbuf; gzip: not inflated yet) */
	size_t held_blen;
	size_t held_off;               /* rbuf[held_off, held_n) not yet parsed */
	size_t held_n;
	unsigned gen;                  /* bumped on every close and request end */
	size_t reqlen;
	size_t reqsent;
	size_t proxylen;               /* CONNECT request bytes (kept in rbuf while sent) */
	size_t proxysent;
	char reason[192];              /* why the connection last closed */
	int fail_err;                  /* the last failure's KR_E code and the state it broke */
	enum kr_conn_state fail_state; /* in (a lookup, the handshake): its class for the host */
	/* counters */
	unsigned long connects;
	unsigned long requests;
	unsigned long long bytes_in;   /* response bytes after TLS */
	char reqbuf[KR_HTTP_REQUEST_MAX];
	char rbuf[KR_IO_CHUNK];
};

/* Sets c up for cfg and registers it with loop. Returns 0 or KR_ENOSPC (loop full). */
int kr_conn_init(struct kr_conn *c, struct kr_loop *loop, const struct kr_conn_cfg *cfg);

/*
 * Starts req on c: reuses the kept-alive connection, or connects first. The
 * request head is written into c's own buffer at once, so req's strings need
 * not outlive the call (its body must: it is sent from where it is). Returns
 * 0, KR_ESTATE if a request is in flight, KR_ETOOBIG if the head does not fit
 * KR_HTTP_REQUEST_MAX, KR_EINVAL if it could inject a header or has more than
 * KR_CONN_MAX_HEADERS extra headers. Failures after this point arrive through
 * on_end.
 */
int kr_conn_request(struct kr_conn *c, const struct kr_request *req);

/*
 * Closes the connection and abandons any request without calling on_end.
 * reason (may be NULL) is kept in c->reason. Safe inside callbacks.
 */
void kr_conn_close(struct kr_conn *c, const char *reason);

/* Closes and unregisters c; the TLS session saved for resumption is freed too. */
void kr_conn_free(struct kr_conn *c);

/*
 * After on_body took only part of its bytes: hands it the rest again, then
 * parses the rest of the buffer and reads on. Does nothing unless held; on_body
 * may stop short again. Call it from the loop (a timer), not from c's callbacks.
 */
void kr_conn_resume(struct kr_conn *c);

/* Sets the read-idle deadline of the request in flight (e.g. learnt bookmark cadence). */
void kr_conn_set_idle_timeout(struct kr_conn *c, int idle_ms);

/* Short name of a state ("handshake"), for logs. */
const char *kr_conn_state_name(enum kr_conn_state s);

#endif /* KR_CONN_H */
