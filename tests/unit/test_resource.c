#include <stdio.h>
#include <string.h>

#include "kreflect.h"
#include "resource.h"
#include "test.h"

static int lookup_path(const char *arg, const char *ns, int all, char *path, size_t size)
{
	struct kr_resource r;
	char err[200];

	if (kr_resource_lookup(arg, &r, err, sizeof(err)) != 0)
		return -1;
	snprintf(r.ns, sizeof(r.ns), "%s", ns);
	r.all_namespaces = all;
	return kr_resource_path(&r, path, size);
}

KR_TEST(resource, every_spelling_of_a_builtin)
{
	char path[256];

	check(lookup_path("configmaps", "default", 0, path, sizeof(path)) > 0);
	check(strcmp(path, "/api/v1/namespaces/default/configmaps") == 0);
	check(lookup_path("cm", "edge", 0, path, sizeof(path)) > 0);
	check(strcmp(path, "/api/v1/namespaces/edge/configmaps") == 0);
	check(lookup_path("ConfigMap", "x", 0, path, sizeof(path)) > 0);
	check(lookup_path("v1/configmaps", "x", 1, path, sizeof(path)) > 0);
	check(strcmp(path, "/api/v1/configmaps") == 0);
	check(lookup_path("deployments.apps", "prod", 0, path, sizeof(path)) > 0);
	check(strcmp(path, "/apis/apps/v1/namespaces/prod/deployments") == 0);
	check(lookup_path("apps/v1/deployments", "prod", 1, path, sizeof(path)) > 0);
	check(strcmp(path, "/apis/apps/v1/deployments") == 0);
	check(lookup_path("ingresses.networking.k8s.io", "a", 0, path, sizeof(path)) > 0);
	check(strcmp(path, "/apis/networking.k8s.io/v1/namespaces/a/ingresses") == 0);
	/* Cluster-scoped resources ignore the namespace. */
	check(lookup_path("nodes", "default", 0, path, sizeof(path)) > 0);
	check(strcmp(path, "/api/v1/nodes") == 0);
	return 0;
}

KR_TEST(resource, names_and_errors)
{
	struct kr_resource r;
	char err[200];

	check(kr_resource_lookup("deploy", &r, err, sizeof(err)) == 0);
	check(strcmp(r.name, "deployments.apps") == 0 && strcmp(r.kind, "Deployment") == 0);
	check(kr_resource_lookup("widgets.example.com", &r, err, sizeof(err)) == KR_ENOENT);
	check(strstr(err, "widgets.example.com") != NULL);
	check(kr_resource_lookup("apps/v2/deployments", &r, err, sizeof(err)) == KR_ENOENT);
	check(kr_resource_lookup("v1/deployments", &r, err, sizeof(err)) == KR_ENOENT);
	check(kr_resource_lookup("", &r, err, sizeof(err)) == KR_EINVAL);
	return 0;
}

KR_TEST(resource, path_bound)
{
	struct kr_resource r;
	char err[200], path[40];

	check(kr_resource_lookup("configmaps", &r, err, sizeof(err)) == 0);
	snprintf(r.ns, sizeof(r.ns), "a-namespace-name-that-is-long");
	check(kr_resource_path(&r, path, sizeof(path)) == KR_ETOOBIG);
	snprintf(r.ns, sizeof(r.ns), "n");
	check(kr_resource_path(&r, path, sizeof(path)) == (int)strlen("/api/v1/namespaces/n/configmaps"));
	return 0;
}

KR_TEST(resource, compiled_defaults)
{
	size_t n;
	const struct kr_resource *d = kr_resource_defaults(&n);

	check(n >= 1);
	check(strcmp(d[0].name, "configmaps") == 0 && d[0].namespaced);
	return 0;
}
