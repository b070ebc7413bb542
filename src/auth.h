/*
 * Credentials that change under a running process: a bearer token read from
 * a file that the kubelet (or an operator) replaces about every hour. The
 * file is re-read before each request (one small read: requests are
 * minutes apart on a watch) and at once after a 401. The token is never
 * logged.
 */
#ifndef KR_AUTH_H
#define KR_AUTH_H

#include "kreflect_config.h"

struct kr_auth {
	char path[512];                /* token file; "" = a fixed token or none */
	char token[KR_TOKEN_MAX + 1];  /* the current token, "" = none */
	unsigned long reloads;         /* times the file gave a new token */
	int last_error;                /* the last read failure (KR_E...), 0 if none */
};

/* No token: requests carry no Authorization header. Cannot fail. */
void kr_auth_init(struct kr_auth *a);

/*
 * Reads the token file (path kept in a). Returns 0, or KR_ENOENT / KR_EIO /
 * KR_ETOOBIG / KR_EINVAL (empty, or more than one line) with nothing changed.
 */
int kr_auth_set_file(struct kr_auth *a, const char *path);

/*
 * Re-reads the token file if there is one. Returns 1 if the token changed,
 * 0 if not (or no file), or a negative KR_E code when the file cannot be
 * read now — then the previous token stays in use (a rotation in progress).
 */
int kr_auth_refresh(struct kr_auth *a);

/* The token for the Authorization header, or NULL for none. */
const char *kr_auth_token(const struct kr_auth *a);

#endif /* KR_AUTH_H */
