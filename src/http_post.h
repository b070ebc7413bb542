/*
 * --http-post URL: after each debounced window of changes, POST what changed
 * to a plain-HTTP endpoint as JSON lines (Content-Type application/x-ndjson),
 * from the loop, through the same conn/http modules as the API server's
 * requests (no TLS here: the hook is for a local agent).
 *
 * One line per change: {"type":"MODIFIED","resource":"configmaps",
 * "key":"default/app","resourceVersion":"123"}; the first batch also has a
 * {"type":"SYNCED","resource":...,"resourceVersion":...,"count":N} line per
 * resource. Object content is never sent (Secrets, and plain HTTP). A window
 * whose lines do not fit KR_HTTP_POST_BATCH_BYTES ends with
 * {"type":"DROPPED","events":N} instead of the N lines left out.
 *
 * Delivery: a 2xx answer delivers a batch; a failed connection, a timeout,
 * any other status (redirects are not followed) is retried with the
 * reflector's backoff (0.8 s doubling, jitter), KR_HTTP_POST_ATTEMPTS
 * attempts in all, then the batch is logged and dropped. Never two in
 * flight: changes during a delivery collect into the next batch, sent (after
 * its window) once the current one is delivered or dropped.
 */
#ifndef KR_HTTP_POST_H
#define KR_HTTP_POST_H

#include <stddef.h>

#include "backoff.h"
#include "conn.h"
#include "debounce.h"
#include "kreflect_config.h"
#include "loop.h"
#include "sink.h"

#ifndef KR_HTTP_POST_TIMEOUT_MS
#define KR_HTTP_POST_TIMEOUT_MS 10000  /* connect, and silence while waiting for the answer */
#endif
#ifndef KR_HTTP_POST_REPLY_MAX
#define KR_HTTP_POST_REPLY_MAX 65536   /* response body bytes read (and ignored) */
#endif
#define KR_HTTP_POST_PATH_MAX 1024     /* path and query of the URL */

/*
 * How a request is made, for k8s-sidecar's REQ_* variables; zeroed means
 * --http-post's own behaviour (POST of the change lines, every failure
 * retried with the reflector's backoff, KR_HTTP_POST_ATTEMPTS in all).
 */
struct kr_http_post_opts {
	const char *method;            /* "POST" (NULL) or "GET" (never a body) */
	const char *body;              /* POST: this fixed body instead of the change lines */
	size_t body_len;
	const char *content_type;      /* of the fixed body; NULL: application/json */
	const char *authorization;     /* Authorization header value, a secret: never logged */
	int urllib3;                   /* retries as urllib3's Retry (below), not the reflector's */
	int retries;                   /* urllib3: retries after the first attempt, at most */
	int connect_retries;           /* ... of them after a failed connection */
	int read_retries;              /* ... after a timeout or a broken answer */
	int backoff_factor_ms;         /* ... waiting 0, then factor * 2^(n-1) ms (at most 120 s) */
	int retry_5xx;                 /* ... retrying 500, 502, 503, 504; other statuses are final */
	int timeout_ms;                /* connect, and silence before the answer; 0: default */
	int skip_first;                /* the first sync's batch is not sent */
};

struct kr_http_post {
	struct kr_debounce db;         /* the window; busy while a batch is delivered */
	struct kr_conn conn;
	struct kr_loop *loop;
	struct kr_rand rand;
	struct kr_backoff backoff;
	struct kr_timer retry;
	char url[KR_HTTP_POST_PATH_MAX + KR_HOST_MAX + 16];  /* for logs */
	char path[KR_HTTP_POST_PATH_MAX];
	/* The window being collected. */
	char next[KR_HTTP_POST_BATCH_BYTES];
	size_t next_len;
	unsigned long next_dropped;    /* lines that did not fit */
	/* The batch being delivered (in flight or waiting to retry). */
	char body[KR_HTTP_POST_BATCH_BYTES];
	size_t body_len;
	unsigned long body_changes;
	int attempt;                   /* attempts made for body; 0 = none waiting */
	int connect_failures, read_failures;
	struct kr_http_post_opts o;
	struct kr_http_header headers[3];
	size_t nheaders;
	int first_done;                /* the first sync's batch went (or was skipped) */
	int in_flight;
	int status;                    /* status of the answer in flight, 0 before */
	size_t reply_bytes;
	/* counters */
	unsigned long delivered, attempts_failed, batches_dropped;
};

/*
 * Sets p up to post to url ("http://host[:port][/path]"; IPv6 in brackets)
 * on loop, debounced by debounce_ms, once resources have synced. Returns 0,
 * or KR_EINVAL with the reason in err (https://, not a URL, too long).
 */
int kr_http_post_init(struct kr_http_post *p, struct kr_loop *loop, const char *url,
		      int debounce_ms, int resources, char *err, size_t errlen);

/*
 * kr_http_post_init with the request shaped by o (copied; its strings must
 * outlive p). Same returns; also KR_EINVAL for a method other than GET or
 * POST, or headers that cannot be sent.
 */
int kr_http_post_init_opts(struct kr_http_post *p, struct kr_loop *loop, const char *url,
			   int debounce_ms, int resources, const struct kr_http_post_opts *o,
			   char *err, size_t errlen);

/* The sink: collects a line per change (and per first SYNCED). */
void kr_http_post_event(void *arg, const struct kr_event *ev);

/*
 * --once: sends what has collected now instead of at the window's end.
 * Returns 1 if a delivery started, else 0.
 */
int kr_http_post_flush(struct kr_http_post *p);

/* Nonzero while a batch is being delivered (in flight or waiting to retry). */
int kr_http_post_busy(const struct kr_http_post *p);

/* Nonzero if the host of url is loopback (localhost, 127.0.0.0/8, ::1). */
int kr_http_post_loopback(const struct kr_http_post *p);

#endif /* KR_HTTP_POST_H */
