/*
 * Discovery: resolving a resource name that is not in the built-in table
 * (a custom resource, "widgets.example.com" or "example.com/v1/widgets")
 * by asking the API server, as kubectl does, once at start-up:
 *
 *   GET /apis/<group>            APIGroup: preferredVersion.version, when no
 *                                version was named
 *   GET /apis/<group>/<version>  APIResourceList: the entry whose name is the
 *                                plural (or whose singularName, shortNames or
 *                                kind match), giving kind and namespaced
 *   GET /api/v1                  the same for a core name ("v1/foo", "foo")
 *
 * Subresources ("widgets/status") are never matched. The parsers work on a
 * whole response body held in the caller's buffer with the caller's tokens;
 * the driver runs the caller's loop and connection until done or a deadline.
 */
#ifndef KR_DISCOVERY_H
#define KR_DISCOVERY_H

#include <stddef.h>

#include "conn.h"
#include "json.h"
#include "loop.h"
#include "resource.h"

/*
 * Splits a command-line name into r->group, r->version (may stay "") and
 * r->plural; the other fields are zeroed (arena_share 100). Accepts
 * "plural.group", "plural.version.group" (version like v1, v2beta1),
 * "group/version/plural", "version/plural" and "plural" (core group).
 * Returns 0, or KR_EINVAL with a message in err naming arg.
 */
int kr_discovery_parse_arg(const char *arg, struct kr_resource *r, char *err, size_t errlen);

/*
 * Reads an APIGroup document json[0..len) and writes preferredVersion.version
 * (else the first of versions[]) into version[0..size). toks[0..ntoks) is
 * scratch. Returns 0, KR_ENOENT (no version in it), KR_EPROTO (not an
 * APIGroup), KR_ENOSPC (too many tokens) or KR_ETOOBIG (version too long).
 */
int kr_discovery_parse_group(const char *json, size_t len, kr_json_tok *toks, int ntoks,
			     char *version, size_t size);

/*
 * Finds r->plural in an APIResourceList json[0..len): the first entry whose
 * name equals it, else whose singularName, one of shortNames, or kind (any
 * case) does; names with a '/' (subresources) are skipped. Fills r->plural
 * (the entry's name), r->kind and r->namespaced and, when the list says so,
 * r->group and r->version from groupVersion; sets r->name. Returns 0,
 * KR_ENOENT (no such entry), KR_EPROTO (not an APIResourceList, the entry
 * cannot be listed and watched, or a name or groupVersion holds anything but
 * letters, digits, '-' and '.', a kind anything but letters and digits: they
 * go into request paths), KR_ENOSPC or KR_ETOOBIG.
 */
int kr_discovery_parse_resources(const char *json, size_t len, kr_json_tok *toks, int ntoks,
				 struct kr_resource *r);

/* Scratch the driver works in; all of it is the caller's. */
struct kr_discovery_work {
	struct kr_conn *conn;          /* not yet initialised: the driver sets it up and frees it */
	char *body;                    /* one response body, up to cap bytes */
	size_t cap;
	kr_json_tok *toks;
	int ntoks;
};

/*
 * Resolves r (filled by kr_discovery_parse_arg from arg) against the server
 * of cfg, authenticating with token (NULL or "" = none), running loop until
 * done or timeout_ms has passed. Returns 0 with r complete; KR_ENOENT (no
 * such group, version or resource: err names arg), KR_EAUTH (401/403),
 * KR_ETIMEDOUT, or another negative code when the server is unreachable or
 * answers nonsense; err says why in each case.
 */
int kr_discovery_resolve(struct kr_loop *loop, const struct kr_conn_cfg *cfg, const char *token,
			 struct kr_discovery_work *w, const char *arg, struct kr_resource *r,
			 int timeout_ms, char *err, size_t errlen);

#endif /* KR_DISCOVERY_H */
