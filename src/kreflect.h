/*
 * kreflect public API: the reflector as a C library.
 *
 * Error convention everywhere: 0 (or a positive count) is success, a negative
 * KR_E... value is failure; kr_strerror() names it. Parsers use three outcomes:
 * done (> 0), need more input (0), error (< 0).
 */
#ifndef KREFLECT_H
#define KREFLECT_H

#include <stddef.h>

#define KR_VERSION "0.1.0"

enum kr_err {
	KR_OK = 0,
	KR_EINVAL = -1,     /* bad argument or malformed input */
	KR_ENOSPC = -2,     /* a fixed capacity is exhausted */
	KR_EIO = -3,        /* an operating-system call failed */
	KR_ETLS = -4,       /* TLS handshake, verification or record failure */
	KR_EPROTO = -5,     /* the peer broke HTTP, chunking or JSON framing */
	KR_ETIMEDOUT = -6,  /* a deadline passed */
	KR_ECLOSED = -7,    /* the peer closed the connection */
	KR_ETOOBIG = -8,    /* an item is larger than its configured bound */
	KR_ENOENT = -9,     /* no such file, name or object */
	KR_EAUTH = -10,     /* credentials refused */
	KR_ESTATE = -11,    /* call not valid in the current state */
	KR_ECANCELED = -12, /* abandoned by the caller */
};

/* A short, static, human-readable name for a KR_E... code (never NULL). */
const char *kr_strerror(int err);

/* The build target ("x86_64", "aarch64", "armv7", ...), fixed at compile time. */
const char *kr_target(void);

#endif /* KREFLECT_H */
