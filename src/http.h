/*
 * HTTP/1.1 client side: a request writer and an incremental response parser.
 *
 * The parser is a resumable state machine fed whatever bytes arrived (one or a
 * megabyte). It keeps the current head line in a fixed buffer inside the
 * struct and hands body bytes on as spans pointing into the caller's input
 * (chunk framing removed), so a watch stream that never ends costs nothing
 * beyond the struct. Framing is strict, because a client that guesses where a
 * body ends can be fed a forged event:
 *
 *   - head lines and chunk framing end in CRLF; a bare LF or CR is an error
 *     (kube-apiserver, Go's net/http, always sends CRLF);
 *   - obs-fold, whitespace before a header's colon and control bytes are errors;
 *   - Content-Length with Transfer-Encoding, Content-Lengths that differ, any
 *     Transfer-Encoding but exactly "chunked", and chunked in HTTP/1.0 are errors;
 *   - chunk sizes have at most 16 hex digits and stay below 2^62.
 */
#ifndef KR_HTTP_H
#define KR_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

/* Interim (1xx) responses skipped before the final one; more is an error. */
#ifndef KR_HTTP_MAX_INTERIM
#define KR_HTTP_MAX_INTERIM 8
#endif

#if KR_HTTP_MAX_HEADERS < 1
#error "KR_HTTP_MAX_HEADERS must be at least 1"
#endif

/* What kr_http_resp_feed found (errors are negative KR_E... codes). */
#define KR_HTTP_HEAD 1
#define KR_HTTP_BODY 2
#define KR_HTTP_DONE 3

/* Content-Encoding of a response (kr_http_resp.content_encoding). */
#define KR_HTTP_CE_IDENTITY 0          /* absent, or only "identity" */
#define KR_HTTP_CE_GZIP 1              /* exactly one gzip (or x-gzip) */
#define KR_HTTP_CE_OTHER 2             /* anything else: a coding we cannot decode */

/* --- request writer ----------------------------------------------------------- */

/* One query parameter. The writer percent-encodes key and value (RFC 3986). */
struct kr_http_param {
	const char *key;
	const char *value;             /* NULL leaves the parameter out */
};

/* One extra request header, written as "name: value". */
struct kr_http_header {
	const char *name;
	const char *value;
};

/*
 * Writes a request head into buf[0..size): request line (path, then "?" or
 * "&" and the encoded params), Host, User-Agent "kreflect/<KR_VERSION>
 * (linux/<arch>)", Accept: application/json, Authorization: Bearer when
 * bearer_token is non-NULL and non-empty, and the blank line. No NUL is
 * written: the request is exactly the returned number of bytes. Returns that
 * length, KR_ETOOBIG if it does not fit (buf then holds nothing usable), or
 * KR_EINVAL if an argument could inject a line (CR, LF, other control bytes;
 * also a space in method or path, a path not starting with '/').
 */
int kr_http_write_request(char *buf, size_t size, const char *method, const char *host_header,
			  const char *path, const struct kr_http_param *params, size_t nparams,
			  const char *bearer_token, const char *arch);

/*
 * kr_http_write_request with extra headers after the standard ones (names must
 * be HTTP tokens, values free of control bytes other than tab). Same returns.
 */
int kr_http_write_request_ex(char *buf, size_t size, const char *method,
			     const char *host_header, const char *path,
			     const struct kr_http_param *params, size_t nparams,
			     const char *bearer_token, const char *arch,
			     const struct kr_http_header *headers, size_t nheaders);

/* --- response parser ------------------------------------------------------------ */

/*
 * One response being parsed. The caller owns it (it holds no pointer to
 * other memory but error, a static string); fields are valid after
 * kr_http_resp_feed returned KR_HTTP_HEAD.
 */
struct kr_http_resp {
	int status;                    /* 200, 410, ... (the final response's) */
	int minor_version;             /* 0 for HTTP/1.0, 1 for HTTP/1.1 and later 1.x */
	long long content_length;      /* the header's value, -1 if absent */
	int chunked;                   /* the body is chunked (0 for 204, 304) */
	int keep_alive;                /* the connection can carry the next request */
	long retry_after_seconds;      /* Retry-After delay-seconds, -1 if absent */
	int64_t retry_after_epoch;     /* Retry-After HTTP-date (>= 1), 0 if absent */
	char content_type[64];         /* Content-Type, cut to fit, "" if absent */
	int content_encoding;          /* KR_HTTP_CE_...: the caller decides what it accepts */
	const char *error;             /* why the parser failed, NULL until it does */

	/* private: progress */
	int state;
	int err;                       /* the code a failed parser keeps returning */
	int started;                   /* some byte of a response arrived */
	int interim;                   /* 1xx responses skipped so far */
	int nheaders;                  /* header (or trailer) lines so far */
	int have_te;
	int conn_close;
	int conn_keep_alive;
	unsigned long long remaining;  /* body or chunk bytes still to come */
	size_t line_len;
	char line[KR_HTTP_LINE_MAX + 1];  /* one head line and its CR */
};

/* Makes r ready for one response; cannot fail. Call again before the next one. */
void kr_http_resp_init(struct kr_http_resp *r);

/*
 * Feeds buf[0..len) and stops at the first thing to report, with *consumed
 * bytes used: KR_HTTP_HEAD (status and headers parsed), KR_HTTP_BODY (*body,
 * *body_len: decoded bytes inside buf, valid while buf is), KR_HTTP_DONE (the
 * response is complete; later bytes belong to the next one), or 0 (all of buf
 * used, more needed). Call again with the rest until it returns 0 or < 0; with
 * len == 0 too, as DONE may follow the last BODY. Errors: KR_EPROTO or
 * KR_ETOOBIG with r->error set (*consumed is then only a hint), and the parser
 * stays failed; KR_ESTATE when fed after DONE (init it first), nothing consumed.
 */
int kr_http_resp_feed(struct kr_http_resp *r, const char *buf, size_t len, size_t *consumed,
		      const char **body, size_t *body_len);

/*
 * The connection closed. Returns KR_HTTP_DONE if the response is complete or
 * its body was delimited by the close; KR_ECLOSED if no byte of a response had
 * arrived (a kept-alive connection the server closed: safe to retry);
 * KR_EPROTO with r->error if it was cut in the head, in a chunk or short of
 * Content-Length; a failed parser's own error.
 */
int kr_http_resp_eof(struct kr_http_resp *r);

/*
 * Seconds to wait according to Retry-After, measured from now_epoch (wall
 * clock): the delay-seconds value, or the HTTP-date minus now (0 if already
 * past). Returns -1 if the response had no usable Retry-After.
 */
long kr_http_retry_after_delay(const struct kr_http_resp *r, int64_t now_epoch);

#endif /* KR_HTTP_H */
