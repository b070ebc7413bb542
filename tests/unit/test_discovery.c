/* Discovery: names on the command line, APIGroup and APIResourceList golden documents. */
#include <stdio.h>
#include <string.h>

#include "discovery.h"
#include "kreflect.h"
#include "port.h"
#include "test.h"

static char doc[16384];
static size_t doclen;
static kr_json_tok toks[1024];
static struct kr_resource res;
static char err[256];

/* Reads tests/discovery/<name> into doc. */
static int golden(const char *name)
{
	char path[512];
	long n;

	snprintf(path, sizeof(path), "%s/discovery/%s", kr_test_dir(), name);
	n = kr_port_read_file(path, doc, sizeof(doc));
	if (n <= 0)
		return -1;
	doclen = (size_t)n;
	return 0;
}

static int arg(const char *a)
{
	return kr_discovery_parse_arg(a, &res, err, sizeof(err));
}

KR_TEST(discovery, arg_plural_group)
{
	check(arg("widgets.example.com") == 0);
	check(strcmp(res.plural, "widgets") == 0);
	check(strcmp(res.group, "example.com") == 0);
	check(res.version[0] == '\0');
	check(res.arena_share == 100);
	return 0;
}

KR_TEST(discovery, arg_plural_version_group)
{
	check(arg("widgets.v1beta2.example.com") == 0);
	check(strcmp(res.plural, "widgets") == 0);
	check(strcmp(res.version, "v1beta2") == 0);
	check(strcmp(res.group, "example.com") == 0);
	/* "v1x" is no version: it is part of the group */
	check(arg("widgets.v1x.example.com") == 0);
	check(strcmp(res.group, "v1x.example.com") == 0);
	return 0;
}

KR_TEST(discovery, arg_group_version_plural)
{
	check(arg("example.com/v1/widgets") == 0);
	check(strcmp(res.group, "example.com") == 0);
	check(strcmp(res.version, "v1") == 0);
	check(strcmp(res.plural, "widgets") == 0);
	check(arg("v1/things") == 0);
	check(res.group[0] == '\0' && strcmp(res.version, "v1") == 0);
	check(arg("things") == 0);
	check(res.group[0] == '\0' && res.version[0] == '\0');
	return 0;
}

KR_TEST(discovery, arg_invalid)
{
	check(arg("") == KR_EINVAL);
	check(arg("example.com//widgets") == KR_EINVAL);
	check(arg("example.com/one/widgets") == KR_EINVAL);
	check(arg("a/b/c/d") == KR_EINVAL);
	check(arg("widgets.") == KR_EINVAL);
	check(arg("wid gets.example.com") == KR_EINVAL);
	check(arg("widgets.example.com?x=1") == KR_EINVAL);
	check(arg("example.com/v1/widgets.x") == KR_EINVAL);
	check(strstr(err, "widgets.x") != NULL);
	return 0;
}

KR_TEST(discovery, group_preferred_version)
{
	char v[64];

	check(golden("apis_example.com.json") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, sizeof(v)) == 0);
	check(strcmp(v, "v1") == 0);
	check(golden("crd-group-multiversion.json") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, sizeof(v)) == 0);
	check(strcmp(v, "v2") == 0);
	/* no preferredVersion: the first listed */
	check(golden("group-no-preferred.json") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, sizeof(v)) == 0);
	check(strcmp(v, "v1alpha1") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, 3) == KR_ETOOBIG);
	check(kr_discovery_parse_group(doc, doclen, toks, 4, v, sizeof(v)) == KR_ENOSPC);
	return 0;
}

KR_TEST(discovery, group_rejects_other_documents)
{
	char v[64];

	check(golden("not-a-list.json") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, sizeof(v)) == KR_EPROTO);
	check(golden("apis_example.com_v1.json") == 0);
	check(kr_discovery_parse_group(doc, doclen, toks, 1024, v, sizeof(v)) == KR_EPROTO);
	check(kr_discovery_parse_group("{\"kind\":\"APIGroup\",\"versions\":[]}", 33, toks, 1024,
				       v, sizeof(v)) == KR_ENOENT);
	check(kr_discovery_parse_group("not json", 8, toks, 1024, v, sizeof(v)) == KR_EPROTO);
	return 0;
}

KR_TEST(discovery, resources_from_test_server)
{
	check(golden("apis_example.com_v1.json") == 0);
	check(arg("widgets.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.kind, "Widget") == 0);
	check(res.namespaced == 1);
	check(strcmp(res.group, "example.com") == 0 && strcmp(res.version, "v1") == 0);
	check(strcmp(res.name, "widgets.example.com") == 0);
	return 0;
}

KR_TEST(discovery, resources_skip_subresources)
{
	char path[128];

	check(golden("crd-resources-subresources.json") == 0);
	check(arg("crontabs.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.plural, "crontabs") == 0);
	check(strcmp(res.kind, "CronTab") == 0);   /* not Scale, not the status entry */
	check(res.namespaced == 1);
	check(strcmp(res.version, "v2") == 0);
	snprintf(res.ns, sizeof(res.ns), "edge");
	check(kr_resource_path(&res, path, sizeof(path)) > 0);
	check(strcmp(path, "/apis/stable.example.com/v2/namespaces/edge/crontabs") == 0);
	/* the subresource itself is never a match */
	check(arg("stable.example.com/v2/crontabs") == 0);
	snprintf(res.plural, sizeof(res.plural), "status");
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == KR_ENOENT);
	return 0;
}

KR_TEST(discovery, resources_by_other_names)
{
	check(golden("crd-resources-subresources.json") == 0);
	check(arg("ct.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.plural, "crontabs") == 0);
	check(arg("crontab.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.plural, "crontabs") == 0);
	check(arg("clusterwidget.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.plural, "clusterwidgets") == 0);
	check(res.namespaced == 0);
	return 0;
}

KR_TEST(discovery, resources_not_found_or_not_watchable)
{
	check(golden("crd-resources-subresources.json") == 0);
	check(arg("gadgets.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == KR_ENOENT);
	check(arg("tokenreviews.stable.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == KR_EPROTO);
	check(golden("not-a-list.json") == 0);
	check(arg("widgets.example.com") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == KR_EPROTO);
	return 0;
}

KR_TEST(discovery, resources_core)
{
	check(golden("api_v1.json") == 0);
	check(arg("v1/secrets") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(res.group[0] == '\0' && strcmp(res.version, "v1") == 0);
	check(strcmp(res.kind, "Secret") == 0 && res.namespaced);
	check(strcmp(res.name, "secrets") == 0);
	check(golden("apis_apps_v1.json") == 0);
	check(arg("apps/v1/deploy") == 0);
	check(kr_discovery_parse_resources(doc, doclen, toks, 1024, &res) == 0);
	check(strcmp(res.plural, "deployments") == 0 && strcmp(res.group, "apps") == 0);
	return 0;
}

/* What the server names goes into request paths: nothing that could bend one. */
KR_TEST(discovery, resources_refuse_names_unfit_for_a_path)
{
	static const char *const bad[] = {
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":[{\"name\":"
		"\"wid gets\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":[{\"name\":"
		"\"widgets?watch=0\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":[{\"name\":"
		"\"w\\r\\nHost: evil\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":[{\"name\":"
		"\"widgets\",\"singularName\":\"widget\",\"kind\":\"Wid\\nget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x io/v1\",\"resources\":[{\"name\":"
		"\"widgets\",\"kind\":\"Widget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1?a=b\",\"resources\":[{\"name\":"
		"\"widgets\",\"kind\":\"Widget\",\"namespaced\":true}]}",
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/../v1\",\"resources\":[{\"name\":"
		"\"widgets\",\"kind\":\"Widget\",\"namespaced\":true}]}",
	};
	static const char good[] =
		"{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1beta2\",\"resources\":[{\"name\":"
		"\"widgets\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":false}]}";
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		check(arg("widget.x.io") == 0);
		check(kr_discovery_parse_resources(bad[i], strlen(bad[i]), toks, 1024, &res) == KR_EPROTO);
	}
	/* the same answer with fit names is taken */
	check(arg("widget.x.io") == 0);
	check(kr_discovery_parse_resources(good, strlen(good), toks, 1024, &res) == 0);
	check(strcmp(res.name, "widgets.x.io") == 0 && strcmp(res.version, "v1beta2") == 0);
	return 0;
}

/* The entry's name fills r->plural (KR_NAME_MAX with its NUL) or is refused; empty or NUL inside is no name. */
KR_TEST(discovery, resources_name_bound)
{
	char json[512], name[KR_NAME_MAX + 1];

	memset(name, 'w', sizeof(name));
	name[KR_NAME_MAX - 1] = '\0';   /* the longest that fits */
	snprintf(json, sizeof(json), "{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":"
		 "[{\"name\":\"%s\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}", name);
	check(arg("widget.x.io") == 0);
	check(kr_discovery_parse_resources(json, strlen(json), toks, 1024, &res) == 0);
	check(strlen(res.plural) == KR_NAME_MAX - 1);
	name[KR_NAME_MAX - 1] = 'w';
	name[KR_NAME_MAX] = '\0';       /* one more */
	snprintf(json, sizeof(json), "{\"kind\":\"APIResourceList\",\"groupVersion\":\"x.io/v1\",\"resources\":"
		 "[{\"name\":\"%s\",\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}", name);
	check(arg("widget.x.io") == 0);
	check(kr_discovery_parse_resources(json, strlen(json), toks, 1024, &res) == KR_ETOOBIG);
	snprintf(json, sizeof(json), "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"\","
		 "\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}");
	check(arg("widget.x.io") == 0);
	check(kr_discovery_parse_resources(json, strlen(json), toks, 1024, &res) == KR_EPROTO);
	snprintf(json, sizeof(json), "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"wid\\u0000x\","
		 "\"singularName\":\"widget\",\"kind\":\"Widget\",\"namespaced\":true}]}");
	check(arg("widget.x.io") == 0);
	check(kr_discovery_parse_resources(json, strlen(json), toks, 1024, &res) == KR_EPROTO);
	return 0;
}
