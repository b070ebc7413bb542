/*
 * Who may read what from the local endpoint (--listen): identities and scope.
 *
 * Identities come from the token file (--listen-token-file), in the format of
 * the kube-apiserver's --token-auth-file: one "token,user[,uid[,groups]]" line
 * per identity (uid and groups are read past). A file of one line without a
 * comma is one shared token with no user name, as before identities. A client
 * certificate's common name is an identity too (--listen-client-ca-file).
 *
 * Scope comes from the access file (--listen-access-file), one rule a line:
 *
 *     # user        namespaces          resources
 *     device-17     default,site-a      configmaps
 *     relay-2       *                   configmaps,secrets
 *
 * Namespaces and resources are comma lists or "*"; a user may have several
 * lines. "*" among resources does not include secrets: an identity that may
 * read secrets names them (and the endpoint serves them only with
 * --serve-secrets). Without an access file every identity reads everything
 * mirrored; with one, an identity it does not name reads nothing.
 *
 * Both parsers take the file's bytes and keep a copy in fixed storage; they
 * never read past len and say what is wrong with the line number.
 */
#ifndef KR_ACCESS_H
#define KR_ACCESS_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

/* Longest user name (and certificate common name) kept. */
#define KR_ACCESS_USER_MAX 64

struct kr_tokens {
	char buf[KR_SERVE_ACCESS_BYTES];   /* tokens and users, each NUL-terminated */
	int n;                             /* identities */
	int shared;                        /* one token without a user (the old format) */
	uint32_t tok[KR_SERVE_IDENTITIES]; /* offsets into buf */
	uint32_t toklen[KR_SERVE_IDENTITIES];
	uint32_t user[KR_SERVE_IDENTITIES];
};

struct kr_rules {
	char buf[KR_SERVE_ACCESS_BYTES];   /* user, namespaces, resources: NUL-terminated */
	int n;
	uint32_t user[KR_SERVE_IDENTITIES];
	uint32_t ns[KR_SERVE_IDENTITIES];
	uint32_t res[KR_SERVE_IDENTITIES];
};

/*
 * Parses a token file's text[0..len). Returns 0, or KR_EINVAL / KR_ETOOBIG
 * with "line N: why" in err (never a token).
 */
int kr_tokens_parse(struct kr_tokens *t, const char *text, size_t len, char *err, size_t errlen);

/*
 * The user of token[0..len): its name ("" for the shared token), or NULL
 * when no identity has it. Every token is compared, in constant time each.
 */
const char *kr_tokens_user(const struct kr_tokens *t, const char *token, size_t len);

/*
 * Nonzero if some token of t belongs to user ("" for the shared token): a token
 * replaced by another of the same user is a rotation, not a user cut off.
 */
int kr_tokens_have_user(const struct kr_tokens *t, const char *user);

/* Parses an access file's text[0..len). Returns 0, or KR_EINVAL / KR_ETOOBIG with "line N: why". */
int kr_rules_parse(struct kr_rules *r, const char *text, size_t len, char *err, size_t errlen);

/*
 * Nonzero if user may read resource (its plural, or its full name such as
 * "deployments.apps") in namespace ns ("" or NULL = every namespace: only a
 * "*" rule allows that). secret: the resource is the core group's secrets.
 */
int kr_rules_allow(const struct kr_rules *r, const char *user, const char *ns, const char *plural,
		   const char *name, int secret);

#endif /* KR_ACCESS_H */
