#include "resource.h"

#include <string.h>
#include <strings.h>

#include "fmt.h"
#include "kreflect.h"

struct builtin {
	const char *group, *version, *plural, *kind, *shortname;
	int namespaced;
};

/* Common built-in types: found without a discovery round trip. */
static const struct builtin builtins[] = {
	{ "", "v1", "configmaps", "ConfigMap", "cm", 1 },
	{ "", "v1", "secrets", "Secret", "", 1 },
	{ "", "v1", "pods", "Pod", "po", 1 },
	{ "", "v1", "services", "Service", "svc", 1 },
	{ "", "v1", "endpoints", "Endpoints", "ep", 1 },
	{ "", "v1", "serviceaccounts", "ServiceAccount", "sa", 1 },
	{ "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", "pvc", 1 },
	{ "", "v1", "events", "Event", "ev", 1 },
	{ "", "v1", "namespaces", "Namespace", "ns", 0 },
	{ "", "v1", "nodes", "Node", "no", 0 },
	{ "", "v1", "persistentvolumes", "PersistentVolume", "pv", 0 },
	{ "apps", "v1", "deployments", "Deployment", "deploy", 1 },
	{ "apps", "v1", "statefulsets", "StatefulSet", "sts", 1 },
	{ "apps", "v1", "daemonsets", "DaemonSet", "ds", 1 },
	{ "apps", "v1", "replicasets", "ReplicaSet", "rs", 1 },
	{ "batch", "v1", "jobs", "Job", "", 1 },
	{ "batch", "v1", "cronjobs", "CronJob", "cj", 1 },
	{ "networking.k8s.io", "v1", "ingresses", "Ingress", "ing", 1 },
	{ "networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", "netpol", 1 },
	{ "coordination.k8s.io", "v1", "leases", "Lease", "", 1 },
	{ "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", "", 1 },
	{ "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", "pdb", 1 },
	{ "rbac.authorization.k8s.io", "v1", "roles", "Role", "", 1 },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", "", 1 },
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", "", 0 },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", "", 0 },
};

/*
 * The compile-time table as strings: a struct kr_resource initialised in
 * .data would carry its 1.8 KB of mostly empty arrays in the file, per row.
 * kr_resource_defaults() copies the rows into zeroed memory instead.
 */
struct default_row {
	struct builtin b;              /* no short name */
	const char *ns, *label_selector, *field_selector;
	unsigned arena_share;
};

#define KR_RESOURCE(g, v, p, k, nsd, ns, ls, fs, share) { { g, v, p, k, "", nsd }, ns, ls, fs, share },
static const struct default_row rows[] = {
#ifdef KR_RESOURCES_FILE
#include KR_RESOURCES_FILE
#else
#include "resources.def"
#endif
};
#undef KR_RESOURCE

/* Each row's strings fit their arrays, as an initialiser of the struct itself would check. */
#define KR_RESOURCE(g, v, p, k, nsd, ns, ls, fs, share)                                   \
	_Static_assert(sizeof(g) <= KR_NAME_MAX + 192 && sizeof(v) <= KR_NAME_MAX &&         \
		       sizeof(p) <= KR_NAME_MAX && sizeof(k) <= KR_NAME_MAX &&               \
		       sizeof(ns) <= KR_NAME_MAX && sizeof(ls) <= KR_SELECTOR_MAX &&          \
		       sizeof(fs) <= KR_SELECTOR_MAX, "a resources.def string is too long");
#ifdef KR_RESOURCES_FILE
#include KR_RESOURCES_FILE
#else
#include "resources.def"
#endif
#undef KR_RESOURCE

static struct kr_resource defaults[sizeof(rows) / sizeof(rows[0])];

void kr_resource_set_name(struct kr_resource *r)
{
	if (r->group[0])
		kr_snprintf(r->name, sizeof(r->name), "%s.%s", r->plural, r->group);
	else
		kr_snprintf(r->name, sizeof(r->name), "%s", r->plural);
}

static void fill(struct kr_resource *out, const struct builtin *b)
{
	memset(out, 0, sizeof(*out));
	kr_snprintf(out->group, sizeof(out->group), "%s", b->group);
	kr_snprintf(out->version, sizeof(out->version), "%s", b->version);
	kr_snprintf(out->plural, sizeof(out->plural), "%s", b->plural);
	kr_snprintf(out->kind, sizeof(out->kind), "%s", b->kind);
	out->namespaced = b->namespaced;
	out->arena_share = 100;
	kr_resource_set_name(out);
}

const struct kr_resource *kr_resource_defaults(size_t *n)
{
	size_t i;

	*n = sizeof(defaults) / sizeof(defaults[0]);
	for (i = 0; i < *n; i++) {
		const struct default_row *w = &rows[i];
		struct kr_resource *r = &defaults[i];

		fill(r, &w->b);
		kr_snprintf(r->ns, sizeof(r->ns), "%s", w->ns);
		kr_snprintf(r->label_selector, sizeof(r->label_selector), "%s", w->label_selector);
		kr_snprintf(r->field_selector, sizeof(r->field_selector), "%s", w->field_selector);
		r->arena_share = w->arena_share;
	}
	return defaults;
}

/* Matches a name against plural, kind (any case) or short name. */
static int name_matches(const struct builtin *b, const char *name)
{
	return strcmp(b->plural, name) == 0 || strcasecmp(b->kind, name) == 0 ||
	       (b->shortname[0] && strcmp(b->shortname, name) == 0);
}

int kr_resource_lookup(const char *arg, struct kr_resource *out, char *err, size_t errlen)
{
	char buf[320], *group = NULL, *version = NULL, *name, *slash, *dot;
	size_t i;

	if (strlen(arg) >= sizeof(buf) || !arg[0]) {
		kr_snprintf(err, errlen, "invalid resource name '%.64s'", arg);
		return KR_EINVAL;
	}
	kr_snprintf(buf, sizeof(buf), "%s", arg);
	name = buf;
	slash = strrchr(buf, '/');
	if (slash) {
		/* "v1/configmaps" or "apps/v1/deployments" */
		*slash = '\0';
		name = slash + 1;
		version = buf;
		slash = strchr(buf, '/');
		if (slash) {
			*slash = '\0';
			group = buf;
			version = slash + 1;
		} else {
			group = "";
		}
	} else if ((dot = strchr(buf, '.')) != NULL) {
		/* "deployments.apps", "ingresses.networking.k8s.io" */
		*dot = '\0';
		group = dot + 1;
	}
	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		const struct builtin *b = &builtins[i];

		if (!name_matches(b, name))
			continue;
		if (group && strcmp(group, b->group) != 0)
			continue;
		if (version && strcmp(version, b->version) != 0)
			continue;
		fill(out, b);
		return 0;
	}
	kr_snprintf(err, errlen, "unknown resource '%s': not one of the built-in types "
		 "(configmaps, secrets, pods, deployments.apps, ...)", arg);
	return KR_ENOENT;
}

const char *kr_resource_short_name(const struct kr_resource *r)
{
	size_t i;

	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i].group, r->group) == 0 && strcmp(builtins[i].plural, r->plural) == 0)
			return builtins[i].shortname;
	return "";
}

int kr_resource_path(const struct kr_resource *r, char *buf, size_t size)
{
	int n;

	if (r->group[0])
		n = kr_snprintf(buf, size, "/apis/%s/%s", r->group, r->version);
	else
		n = kr_snprintf(buf, size, "/api/%s", r->version);
	if (n > 0 && (size_t)n < size && r->namespaced && !r->all_namespaces && r->ns[0])
		n += kr_snprintf(buf + n, size - (size_t)n, "/namespaces/%s", r->ns);
	if (n > 0 && (size_t)n < size)
		n += kr_snprintf(buf + n, size - (size_t)n, "/%s", r->plural);
	if (n < 0 || (size_t)n >= size)
		return KR_ETOOBIG;
	return n;
}

int kr_resource_covers(const struct kr_resource *r, const char *key)
{
	const char *slash = strchr(key, '/'), *name = slash ? slash + 1 : key;
	const char *fs = r->field_selector;
	size_t nl = strlen(r->ns);

	if (r->namespaced && !r->all_namespaces && r->ns[0] &&
	    (!slash || (size_t)(slash - key) != nl || strncmp(key, r->ns, nl) != 0))
		return 0;
	if (strncmp(fs, "metadata.name", 13) == 0 && !strchr(fs, ',')) {
		const char *v = fs + 13;

		if (v[0] == '=' && v[1] == '=')
			return strcmp(name, v + 2) == 0;
		if (v[0] == '=')
			return strcmp(name, v + 1) == 0;
	}
	return 1;
}
