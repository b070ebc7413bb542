/*
 * What to mirror: a Kubernetes resource (group, version, plural, kind),
 * where (one namespace or all) and which objects (label and field selectors).
 * Names on the command line are matched against a built-in table of common
 * types; the compile-time default set comes from config/resources.def.
 */
#ifndef KR_RESOURCE_H
#define KR_RESOURCE_H

#include <stddef.h>

#include "kreflect_config.h"       /* KR_SELECTOR_MAX, KR_NAME_MAX */

struct kr_resource {
	char group[KR_NAME_MAX + 192]; /* DNS subdomain: up to 253 bytes */
	char version[KR_NAME_MAX];
	char plural[KR_NAME_MAX];
	char kind[KR_NAME_MAX];
	int namespaced;
	int all_namespaces;            /* -A: the cluster-wide path */
	char ns[KR_NAME_MAX];          /* "" until defaulted */
	char label_selector[KR_SELECTOR_MAX];
	char field_selector[KR_SELECTOR_MAX];
	unsigned arena_share;          /* percent of the arena this resource may use */
	char name[KR_NAME_MAX + 192 + 2]; /* "configmaps" or "deployments.apps", for output */
};

/*
 * Resolves a command-line name ("configmaps", "cm", "configmap", "v1/configmaps",
 * "deployments.apps", "apps/v1/deployments") against the built-in table.
 * Returns 0, or KR_ENOENT with a message in err naming the argument.
 */
int kr_resource_lookup(const char *arg, struct kr_resource *out, char *err, size_t errlen);

/* The compile-time default resources (config/resources.def); *n gets their number. */
const struct kr_resource *kr_resource_defaults(size_t *n);

/*
 * Nonzero if an object with key ("namespace/name" or "name") can be one that
 * r lists: in its namespace (unless all namespaces) and, when its field
 * selector is a single metadata.name=NAME, of that name. Labels are not known
 * from a key, so they never exclude it.
 */
int kr_resource_covers(const struct kr_resource *r, const char *key);

/* Fills r->name from group and plural. */
void kr_resource_set_name(struct kr_resource *r);

/*
 * Writes the collection path ("/api/v1/namespaces/ns/configmaps",
 * "/apis/apps/v1/deployments") into buf. Returns its length or KR_ETOOBIG.
 */
int kr_resource_path(const struct kr_resource *r, char *buf, size_t size);

/* The built-in short name of r ("cm" for configmaps), or "" (for discovery documents). */
const char *kr_resource_short_name(const struct kr_resource *r);

#endif /* KR_RESOURCE_H */
