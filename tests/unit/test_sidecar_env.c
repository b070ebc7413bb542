#include <stdio.h>
#include <string.h>

#include "kreflect.h"
#include "log.h"
#include "resource.h"
#include "sidecar_env.h"
#include "test.h"

/* The environment of one case: "NAME=value" strings, NULL-terminated. */
static const char *lookup(void *arg, const char *name)
{
	const char *const *e = arg;
	size_t n = strlen(name);

	for (; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static struct kr_sidecar sc;
static char err[512];

static int parse(const char *const *env)
{
	char *argv[] = { "kreflect", "--k8s-sidecar", NULL };

	return kr_sidecar_parse(&sc, lookup, (void *)env, 2, argv, err, sizeof(err));
}

#define BASE "LABEL=grafana_dashboard", "FOLDER=/tmp/dashboards"

KR_TEST(sidecar_env, defaults_are_k8s_sidecars)
{
	const char *env[] = { BASE, NULL };

	check(parse(env) == 0);
	check(sc.nres == 1);
	check(strcmp(sc.res[0].name, "configmaps") == 0);
	check(strcmp(sc.res[0].label_selector, "grafana_dashboard") == 0);
	check(!sc.res[0].ns && !sc.res[0].all_namespaces);  /* the pod's namespace */
	check(strcmp(sc.dir.path, "/tmp/dashboards") == 0);
	check(strcmp(sc.dir.annotation, "k8s-sidecar-target-directory") == 0);
	check(sc.dir.annotation_absolute && sc.dir.url_keys_refused && !sc.dir.unique_names);
	check(sc.dir.file_mode == 0 && sc.dir.secret_mode == 0);     /* the sink's 0644 / 0600 */
	check(sc.method == KR_SIDECAR_WATCH);
	check(!sc.hooks.http_post && !sc.hooks.exec && !sc.insecure);
	check(sc.log_level == KR_LOG_INFO);
	check(sc.hooks.retries == 5 && sc.hooks.connect_retries == 10 && sc.hooks.read_retries == 5);
	check(sc.hooks.backoff_factor_ms == 1100 && sc.hooks.timeout_ms == 10000 && sc.hooks.retry_5xx);
	return 0;
}

/* Each good value and what it becomes. */
KR_TEST(sidecar_env, every_variable_mapped)
{
	const char *env[] = { BASE, "LABEL_VALUE=1", "NAMESPACE=mon,apps", "RESOURCE=both",
			      "FOLDER_ANNOTATION=grafana_folder", "METHOD=LIST", "UNIQUE_FILENAMES=TRUE",
			      "DEFAULT_FILE_MODE=440", "REQ_URL=http://localhost:3000/api/reload",
			      "REQ_METHOD=POST", "REQ_PAYLOAD={\"a\": 1}", "REQ_USERNAME=admin",
			      "REQ_PASSWORD=pw", "REQ_RETRY_TOTAL=2", "REQ_RETRY_CONNECT=3",
			      "REQ_RETRY_READ=4", "REQ_RETRY_BACKOFF_FACTOR=0.25", "REQ_TIMEOUT=2.5",
			      "REQ_SKIP_INIT=true", "REQ_SKIP_TLS_VERIFY=false", "ENABLE_5XX=true",
			      "SKIP_TLS_VERIFY=true", "WATCH_SERVER_TIMEOUT=60", "WATCH_CLIENT_TIMEOUT=66",
			      "IGNORE_ALREADY_PROCESSED=true", "LOG_LEVEL=warning", "SLEEP_TIME=5",
			      "ERROR_THROTTLE_SLEEP=5", "SCRIPT=/nonexistent/reload.sh", NULL };
	int i;

	check(parse(env) == 0);
	check(sc.nres == 4);
	for (i = 0; i < 4; i++) {
		check(strcmp(sc.res[i].label_selector, "grafana_dashboard=1") == 0);
		check(strcmp(sc.res[i].name, i < 2 ? "secrets" : "configmaps") == 0);
		check(strcmp(sc.res[i].ns, i % 2 ? "apps" : "mon") == 0);
	}
	check(strcmp(sc.dir.annotation, "grafana_folder") == 0);
	check(sc.method == KR_SIDECAR_LIST);
	check(sc.dir.unique_names);
	check(sc.dir.file_mode == 0440 && sc.dir.secret_mode == 0440);
	check(strcmp(sc.hooks.http_post, "http://localhost:3000/api/reload") == 0);
	check(strcmp(sc.hooks.method, "POST") == 0);
	check(sc.hooks.body_len == 8 && memcmp(sc.hooks.body, "{\"a\": 1}", 8) == 0);
	check(strcmp(sc.hooks.authorization, "Basic YWRtaW46cHc=") == 0);  /* admin:pw */
	check(sc.hooks.retries == 2 && sc.hooks.connect_retries == 3 && sc.hooks.read_retries == 4);
	check(sc.hooks.backoff_factor_ms == 250 && sc.hooks.timeout_ms == 2500);
	check(!sc.hooks.retry_5xx);
	check(!sc.hooks.skip_first);           /* REQ_SKIP_INIT is for the watch's first list only */
	check(sc.insecure);
	check(sc.watch_timeout_s == 60 && sc.idle_ms == 66000);
	check(sc.log_level == KR_LOG_WARN);
	check(strcmp(sc.hooks.exec, "sh '/nonexistent/reload.sh'") == 0);  /* not executable: sh */
	check(sc.nnotes == 1);                /* ERROR_THROTTLE_SLEEP */
	return 0;
}

KR_TEST(sidecar_env, payload_that_is_not_json_is_posted_as_a_string)
{
	const char *env[] = { BASE, "REQ_URL=http://h/", "REQ_METHOD=POST", "REQ_PAYLOAD=say \"hi\"", NULL };
	const char *none[] = { BASE, "REQ_URL=http://h/", "REQ_METHOD=POST", NULL };

	check(parse(env) == 0);
	check(strcmp(sc.hooks.body, "\"say \\\"hi\\\"\"") == 0);
	const char *array[] = { BASE, "REQ_URL=http://h/", "REQ_METHOD=POST", "REQ_PAYLOAD= [1, 2]", NULL };
	const char *number[] = { BASE, "REQ_URL=http://h/", "REQ_METHOD=POST", "REQ_PAYLOAD=42", NULL };
	static char big[2000];
	const char *many[] = { BASE, "REQ_URL=http://h/", "REQ_METHOD=POST", big, NULL };
	size_t i, n = 0;

	check(parse(array) == KR_EINVAL && strstr(err, "REQ_PAYLOAD must be a JSON object"));
	check(parse(number) == KR_EINVAL && strstr(err, "REQ_PAYLOAD must be a JSON object"));
	/* An object of more tokens than KR_SIDECAR_PAYLOAD_TOKENS is refused, not quoted. */
	n += (size_t)snprintf(big, sizeof(big), "REQ_PAYLOAD={");
	for (i = 0; i < KR_SIDECAR_PAYLOAD_TOKENS / 2 + 1; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%s\"%zx\":1", i ? "," : "", i);
	snprintf(big + n, sizeof(big) - n, "}");
	check(parse(many) == KR_EINVAL && strstr(err, "more than 256 JSON tokens"));
	check(parse(none) == 0);
	check(sc.hooks.body && sc.hooks.body_len == 0);   /* POST without payload: no body */
	return 0;
}

KR_TEST(sidecar_env, namespace_all_and_names)
{
	const char *all[] = { BASE, "NAMESPACE=ALL", "RESOURCE=secret", NULL };
	const char *names[] = { BASE, "NAMESPACE=mon,apps", "RESOURCE=both",
				"RESOURCE_NAME=mon/configmap/a,secret/b,c", NULL };
	const char *fallback[] = { BASE, "NAMESPACE=mon,apps", "RESOURCE=both",
				   "RESOURCE_NAME=mon/configmap/a,secret/b", NULL };

	check(parse(all) == 0);
	check(sc.nres == 1 && sc.res[0].all_namespaces && strcmp(sc.res[0].name, "secrets") == 0);
	/* k8s-sidecar reads each entry from the right: name, type, namespace. */
	check(parse(names) == 0);
	check(sc.nres == 7);      /* secrets b, c in mon and apps; configmaps a, c in mon; c in apps */
	check(strcmp(sc.res[0].ns, "mon") == 0 && strcmp(sc.res[0].field_selector, "metadata.name=b") == 0);
	check(strcmp(sc.res[1].ns, "mon") == 0 && strcmp(sc.res[1].field_selector, "metadata.name=c") == 0);
	check(strcmp(sc.res[4].name, "configmaps") == 0 && strcmp(sc.res[4].ns, "mon") == 0);
	check(strcmp(sc.res[4].field_selector, "metadata.name=a") == 0);
	check(sc.res[4].label_selector[0] == '\0');     /* by name: no label, as k8s-sidecar */
	check(strcmp(sc.res[6].ns, "apps") == 0 && strcmp(sc.res[6].field_selector, "metadata.name=c") == 0);
	/* A type and namespace no entry names fall back to the label, as in k8s-sidecar. */
	check(parse(fallback) == 0);
	check(sc.nres == 4);
	check(strcmp(sc.res[3].name, "configmaps") == 0 && strcmp(sc.res[3].ns, "apps") == 0);
	check(strcmp(sc.res[3].label_selector, "grafana_dashboard") == 0 && !sc.res[3].field_selector);
	return 0;
}

/* Every bad value is refused, naming its variable; a password never shows. */
KR_TEST(sidecar_env, bad_values_name_the_variable)
{
	static const struct {
		const char *var;
		const char *value;
		const char *want;
	} bad[] = {
		{ "LABEL", "", "LABEL must be set" },
		{ "LABEL", "a b", "LABEL must be a label key" },
		{ "LABEL_VALUE", "a=b", "LABEL_VALUE" },
		{ "FOLDER", "", "FOLDER must be set" },
		{ "NAMESPACE", "-x", "NAMESPACE" },
		{ "NAMESPACE", "a,b,c,d,e,f,g,h,i", "KR_MAX_RESOURCES" },
		{ "NAMESPACE", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "more than 16 namespaces" },
		{ "RESOURCE", "cm", "RESOURCE" },
		{ "RESOURCE_NAME", "x/", "RESOURCE_NAME" },
		{ "RESOURCE_NAME", "ns/configmap/x", "set NAMESPACE too" },
		{ "METHOD", "watch", "METHOD" },
		{ "SLEEP_TIME", "0", "SLEEP_TIME" },
		{ "REQ_URL", "https://x/", "REQ_URL" },
		{ "REQ_METHOD", "get", "REQ_METHOD" },
		{ "REQ_PAYLOAD", "{}", "REQ_PAYLOAD" },
		{ "REQ_USERNAME", "u", "REQ_USERNAME is set without REQ_PASSWORD" },
		{ "REQ_PASSWORD", "hunter2", "REQ_PASSWORD is set without REQ_USERNAME" },
		{ "REQ_USERNAME_FILE", "/nonexistent", "REQ_USERNAME_FILE /nonexistent" },
		{ "REQ_BASIC_AUTH_ENCODING", "cp1252", "REQ_BASIC_AUTH_ENCODING" },
		{ "REQ_RETRY_TOTAL", "101", "REQ_RETRY_TOTAL" },
		{ "REQ_RETRY_CONNECT", "-1", "REQ_RETRY_CONNECT" },
		{ "REQ_RETRY_READ", "1.5", "REQ_RETRY_READ" },
		{ "REQ_RETRY_BACKOFF_FACTOR", "121", "REQ_RETRY_BACKOFF_FACTOR" },
		{ "REQ_TIMEOUT", "x", "REQ_TIMEOUT" },
		{ "REQ_SKIP_INIT", "1", "REQ_SKIP_INIT" },
		{ "REQ_SKIP_TLS_VERIFY", "no", "REQ_SKIP_TLS_VERIFY" },
		{ "SCRIPT", "/a\"b", "SCRIPT" },
		{ "ERROR_THROTTLE_SLEEP", "-5", "ERROR_THROTTLE_SLEEP" },
		{ "SKIP_TLS_VERIFY", "TRUE", "SKIP_TLS_VERIFY" },
		{ "DISABLE_X509_STRICT_VERIFICATION", "true", "DISABLE_X509_STRICT_VERIFICATION" },
		{ "UNIQUE_FILENAMES", "yes", "UNIQUE_FILENAMES" },
		{ "DEFAULT_FILE_MODE", "0", "DEFAULT_FILE_MODE" },
		{ "DEFAULT_FILE_MODE", "64a", "DEFAULT_FILE_MODE" },
		{ "ENABLE_5XX", "y", "ENABLE_5XX" },
		{ "WATCH_SERVER_TIMEOUT", "86401", "WATCH_SERVER_TIMEOUT" },
		{ "WATCH_CLIENT_TIMEOUT", "", NULL },  /* empty is unset */
		{ "IGNORE_ALREADY_PROCESSED", "t", "IGNORE_ALREADY_PROCESSED" },
		{ "LOG_LEVEL", "verbose", "LOG_LEVEL" },
		{ "LOG_FORMAT", "LOGFMT", "LOG_FORMAT" },
		{ "LOG_TZ", "LOCAL", "LOG_TZ" },
		{ "LOG_CONFIG", "/c", "LOG_CONFIG" },
		{ "HEALTH_PORT", "http", "HEALTH_PORT must be" },
		{ "HEALTH_PORT", "65536", "HEALTH_PORT must be" },
		{ "HEALTH_PORT", "-1", "HEALTH_PORT must be" },
		{ "HEALTH_HOST", "localhost", "HEALTH_HOST must be" },
		{ "HEALTH_HOST", "[::1]", "HEALTH_HOST must be" },
		{ "HEALTH_HOST", "1.2.3.4.5", "HEALTH_HOST must be" },
		{ "HEALTH_HOST", "fe80::1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1:1", "HEALTH_HOST must be" },
	};
	char label[600], folder[64], one[600], extra[64];
	const char *env[6];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = 0;

		snprintf(one, sizeof(one), "%s=%s", bad[i].var, bad[i].value);
		snprintf(label, sizeof(label), "LABEL=%s", strcmp(bad[i].var, "LABEL") ? "app" : bad[i].value);
		snprintf(folder, sizeof(folder), "FOLDER=%s", strcmp(bad[i].var, "FOLDER") ? "/f" : "");
		env[n++] = label;
		env[n++] = folder;
		env[n++] = one;
		if (strcmp(bad[i].var, "REQ_PAYLOAD") == 0)
			env[n++] = "REQ_URL=http://h/";
		snprintf(extra, sizeof(extra), "REQ_PASSWORD=p");
		if (strcmp(bad[i].var, "REQ_USERNAME_FILE") == 0)
			env[n++] = extra;
		if (strcmp(bad[i].var, "RESOURCE") && strncmp(bad[i].var, "NAMESPACE", 9))
			env[n++] = "RESOURCE=both";
		env[n] = NULL;
		err[0] = '\0';
		if (!bad[i].want) {
			check(parse(env) == 0);
			continue;
		}
		if (parse(env) != KR_EINVAL || !strstr(err, bad[i].want)) {
			fprintf(stderr, "case %zu %s=%s: got '%s'\n", i, bad[i].var, bad[i].value, err);
			check(0);
		}
		check(!strstr(err, "hunter2"));
	}
	return 0;
}

KR_TEST(sidecar_env, health_endpoint_as_k8s_sidecars)
{
	const char *dflt[] = { BASE, NULL };
	const char *off[] = { BASE, "HEALTH_PORT=0", NULL };
	const char *v6[] = { BASE, "HEALTH_PORT=9000", "HEALTH_HOST=::", NULL };
	const char *v4[] = { BASE, "HEALTH_HOST=127.0.0.1", NULL };

	check(parse(dflt) == 0);
	check(strcmp(sc.health_listen, "0.0.0.0:8080") == 0);   /* k8s-sidecar always serves it */
	check(parse(off) == 0);
	check(sc.health_listen[0] == '\0');
	check(parse(v6) == 0);
	check(strcmp(sc.health_listen, "[::]:9000") == 0);
	check(parse(v4) == 0);
	check(strcmp(sc.health_listen, "127.0.0.1:8080") == 0);
	return 0;
}

KR_TEST(sidecar_env, arguments_and_program_name)
{
	const char *env[] = { BASE, "REQ_URL=http://h/", "REQ_USERNAME=u", NULL };
	char *as_sidecar[] = { "/usr/bin/k8s-sidecar", NULL };
	char *flag[] = { "kreflect", "-v", "--k8s-sidecar", NULL };
	char *plain[] = { "/bin/kreflect", "-n", "x", NULL };
	char *bad[] = { "k8s-sidecar", "--namespace", "x", NULL };
	char *nofile[] = { "k8s-sidecar", "--req-password-file", NULL };
	char *pwfile[] = { "k8s-sidecar", "--req-password-file=/nonexistent/pw", NULL };

	check(kr_sidecar_wanted(1, as_sidecar));
	check(kr_sidecar_wanted(3, flag));
	check(!kr_sidecar_wanted(3, plain));
	{
		char *child[] = { "kreflect", "cm", "--", "app", "--k8s-sidecar", NULL };

		check(!kr_sidecar_wanted(5, child));   /* the supervised program's argument */
	}
	check(kr_sidecar_parse(&sc, lookup, (void *)env, 3, bad, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "the only arguments are") != NULL);
	check(kr_sidecar_parse(&sc, lookup, (void *)env, 2, nofile, err, sizeof(err)) == KR_EINVAL);
	/* The flag wins over REQ_PASSWORD (unset here): its file is read. */
	check(kr_sidecar_parse(&sc, lookup, (void *)env, 2, pwfile, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "--req-password-file /nonexistent/pw") != NULL);
	return 0;
}

KR_TEST(sidecar_env, resource_covers_namespace_and_name)
{
	struct kr_resource r;
	char e[200];

	check(kr_resource_lookup("configmaps", &r, e, sizeof(e)) == 0);
	snprintf(r.ns, sizeof(r.ns), "mon");
	check(kr_resource_covers(&r, "mon/a"));
	check(!kr_resource_covers(&r, "apps/a"));
	check(!kr_resource_covers(&r, "mo/a"));
	check(!kr_resource_covers(&r, "monx/a"));
	snprintf(r.field_selector, sizeof(r.field_selector), "metadata.name=a");
	check(kr_resource_covers(&r, "mon/a"));
	check(!kr_resource_covers(&r, "mon/ab"));
	snprintf(r.field_selector, sizeof(r.field_selector), "metadata.name==b");
	check(kr_resource_covers(&r, "mon/b"));
	snprintf(r.field_selector, sizeof(r.field_selector), "metadata.name!=b");
	check(kr_resource_covers(&r, "mon/b"));          /* not a single name: no exclusion */
	r.all_namespaces = 1;
	r.field_selector[0] = '\0';
	check(kr_resource_covers(&r, "apps/a"));
	return 0;
}
