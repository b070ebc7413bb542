/*
 * The local endpoint's HTTP/1.1 request reader: a resumable state machine fed
 * whatever bytes arrived, that keeps only what routing needs (method, target,
 * the bearer token, keep-alive, whether a body follows) in bounded fields of
 * a caller-owned struct, and answers everything else with the status a
 * server sends: 400 for broken syntax, 414 for a long target, 431 for a long
 * or crowded head, 505 for another HTTP version. Bodies are never read: the
 * endpoint is read-only, so a request announcing one is answered and closed.
 *
 * Query and path helpers decode percent-encoding into caller buffers.
 */
#ifndef KR_HTTP_SERVER_H
#define KR_HTTP_SERVER_H

#include <stddef.h>

#include "kreflect_config.h"

/* Longest header name kept for matching; longer names are 431. */
#define KR_HTTP_SERVER_NAME_MAX 64
/* Longest Authorization value kept ("Bearer " and the token). */
#define KR_HTTP_SERVER_AUTH_MAX 512
/* Most header lines in one request. */
#define KR_HTTP_SERVER_MAX_HEADERS 64

enum kr_http_method { KR_HM_NONE, KR_HM_GET, KR_HM_HEAD, KR_HM_OTHER };

struct kr_http_server_req {
	int state;
	int status;                    /* after an error: the status to answer */
	const char *why;               /* after an error: a short reason, static */
	enum kr_http_method method;
	char method_name[16];
	size_t mlen;
	char target[KR_SERVE_TARGET_MAX];  /* NUL-terminated, as sent (still encoded) */
	size_t tlen;
	int minor;                     /* HTTP/1.minor */
	size_t head;                   /* bytes of the head so far (bounded by KR_SERVE_IN_BYTES) */
	int nheaders;
	char name[KR_HTTP_SERVER_NAME_MAX];
	size_t nlen;
	int field;                     /* which header's value is being read */
	char value[KR_HTTP_SERVER_AUTH_MAX];
	size_t vlen;
	int keep_alive;                /* the connection stays open after the answer */
	int conn_close, conn_keep;     /* Connection: close / keep-alive seen */
	int has_body;                  /* Content-Length > 0 or Transfer-Encoding */
	long content_length;           /* -1: none */
	char auth[KR_HTTP_SERVER_AUTH_MAX];  /* Authorization value, NUL-terminated */
	int has_auth;
};

/* Makes r ready for a request; cannot fail. */
void kr_http_server_init(struct kr_http_server_req *r);

/*
 * Feeds buf[0..len). Sets *consumed to the bytes used (those after a
 * complete head are left for the next request). Returns 1 when the head is
 * complete, 0 when more is needed, KR_EPROTO on a broken or oversized head
 * (r->status and r->why say which; further calls return KR_EPROTO).
 */
int kr_http_server_feed(struct kr_http_server_req *r, const char *buf, size_t len,
			size_t *consumed);

/*
 * The value of query parameter name in target (the part after '?'),
 * percent-decoded ('+' is a space) into out[0..cap) and NUL-terminated.
 * Returns its length, KR_ENOENT if absent, KR_ETOOBIG if it does not fit,
 * KR_EINVAL for a broken escape or an encoded NUL. The first occurrence wins.
 */
int kr_http_server_param(const char *target, const char *name, char *out, size_t cap);

/*
 * The path of target (before '?'), percent-decoded into out[0..cap) and
 * NUL-terminated. Returns its length, KR_ETOOBIG, or KR_EINVAL for a broken
 * escape, an encoded NUL or '/' (which would change the path's segments).
 */
int kr_http_server_path(const char *target, char *out, size_t cap);

/* Nonzero if a and b (length n each) are equal, in time that depends only on n. */
int kr_http_server_same(const char *a, const char *b, size_t n);

#endif /* KR_HTTP_SERVER_H */
