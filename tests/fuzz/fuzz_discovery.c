/*
 * Fuzzes discovery: the resource name from the command line
 * (kr_discovery_parse_arg) and the API server's APIGroup and APIResourceList
 * answers (kr_discovery_parse_group, kr_discovery_parse_resources).
 *
 * Input: the name, a newline, then the response body (copied to a buffer of
 * exactly its size). Besides never crashing or reading outside it, every
 * answer must hold together: an error is a known code, leaves nothing behind
 * (an empty version; a parse_arg error zeroes the resource and says why in
 * one line naming the argument); a success leaves strings terminated inside
 * their arrays, and every part that goes into a request path (group,
 * version, plural) and the kind made only of the characters a Kubernetes
 * name or version may hold: a server answering with "a b", "x?watch=0" or
 * "..\r\nHost: evil" must not get it into kreflect's requests.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "discovery.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kr_json_tok toks[512];

#define TERMINATED(field) (memchr((field), '\0', sizeof(field)) != NULL)

/* Letters, digits, '-' and '.': what a path segment built from it may hold. */
static int path_safe(const char *s, int may_be_empty)
{
	if (!s[0])
		return may_be_empty;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '.'))
			return 0;
	return 1;
}

static void check_resource(const struct kr_resource *r, int with_kind)
{
	if (!TERMINATED(r->group) || !TERMINATED(r->version) || !TERMINATED(r->plural) ||
	    !TERMINATED(r->kind) || !TERMINATED(r->name))
		abort();
	if (!path_safe(r->group, 1) || !path_safe(r->version, 1) || !path_safe(r->plural, 0) ||
	    !path_safe(r->kind, !with_kind))
		abort();
	if (r->namespaced != 0 && r->namespaced != 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct kr_resource r;
	char arg[320], err[256], version[64], *body;
	const uint8_t *nl = memchr(data, '\n', size < sizeof(arg) ? size : sizeof(arg));
	size_t alen, blen;
	int rc;

	if (!nl || memchr(data, '\0', (size_t)(nl - data)))
		return 0;
	alen = (size_t)(nl - data);
	memcpy(arg, data, alen);
	arg[alen] = '\0';
	blen = size - alen - 1;

	memset(err, 'x', sizeof(err));
	rc = kr_discovery_parse_arg(arg, &r, err, sizeof(err));
	if (rc != 0) {
		static const struct kr_resource zero;

		if (rc != KR_EINVAL || memcmp(&r, &zero, sizeof(r)) != 0)
			abort();
		if (!memchr(err, '\0', sizeof(err)) || strchr(err, '\n') ||
		    strncmp(err, "invalid resource name '", 23) != 0)
			abort();
		return 0;
	}
	check_resource(&r, 0);

	body = malloc(blen ? blen : 1);
	if (!body)
		return 0;
	memcpy(body, nl + 1, blen);

	rc = kr_discovery_parse_group(body, blen, toks, (int)(sizeof(toks) / sizeof(toks[0])), version,
				      sizeof(version));
	if (!TERMINATED(version))
		abort();
	if (rc != 0) {
		if ((rc != KR_ENOENT && rc != KR_EPROTO && rc != KR_ENOSPC && rc != KR_ETOOBIG &&
		     rc != KR_EINVAL) || version[0])
			abort();
	} else if (!path_safe(version, 0) || version[0] != 'v') {
		abort();
	}

	rc = kr_discovery_parse_resources(body, blen, toks, (int)(sizeof(toks) / sizeof(toks[0])), &r);
	if (rc != 0) {
		if (rc != KR_ENOENT && rc != KR_EPROTO && rc != KR_ENOSPC && rc != KR_ETOOBIG &&
		    rc != KR_EINVAL)
			abort();
	} else {
		check_resource(&r, 1);
		if (strchr(r.plural, '/') || !r.name[0])
			abort();
	}
	free(body);
	return 0;
}
