#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kreflect.h"
#include "kubeconfig.h"
#include "port.h"
#include "test.h"
#include "tls.h"

static struct kr_kubeconfig kc;
static struct kr_kubeconfig_work work;
static char err[512];
static char paths[4][512];
static char want[600];
static unsigned char pem[8192];

/* tests/kubeconfig/NAME, in slot i. */
static const char *fx(int i, const char *name)
{
	snprintf(paths[i], sizeof(paths[i]), "%s/kubeconfig/%s", kr_test_dir(), name);
	return paths[i];
}

static int load1(const char *name, const char *context)
{
	const char *p = fx(0, name);

	return kr_kubeconfig_load(&kc, &work, &p, 1, context, err, sizeof(err));
}

static int load2(const char *a, const char *b, const char *context)
{
	const char *p[2];

	p[0] = fx(0, a);
	p[1] = fx(1, b);
	return kr_kubeconfig_load(&kc, &work, p, 2, context, err, sizeof(err));
}

static int mem(const char *text, const char *context)
{
	return kr_kubeconfig_load_buffer(&kc, &work, text, strlen(text), "/etc/edge/kubeconfig", context,
					 err, sizeof(err));
}

/* Nonzero if err starts with "kubeconfig tests/kubeconfig/NAME:LINE: " and has what. */
static int err_at(const char *name, unsigned line, const char *what)
{
	snprintf(want, sizeof(want), "kubeconfig %s/kubeconfig/%s:%u: ", kr_test_dir(), name, line);
	if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, what)) {
		fprintf(stderr, "  got: %s\n  want: %s...%s\n", err, want, what);
		return 0;
	}
	return 1;
}

/* The same, for the buffers above (named /etc/edge/kubeconfig). */
static int merr(unsigned line, const char *what)
{
	snprintf(want, sizeof(want), "kubeconfig /etc/edge/kubeconfig:%u: ", line);
	if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, what)) {
		fprintf(stderr, "  got: %s\n  want: %s...%s\n", err, want, what);
		return 0;
	}
	return 1;
}

/* Nonzero if data[0..len) is the file tests/kubeconfig/pki/NAME, NUL after it. */
static int same_as(const unsigned char *data, size_t len, const char *name)
{
	char p[512];
	long n;

	snprintf(p, sizeof(p), "pki/%s", name);
	n = kr_port_read_file(fx(3, p), pem, sizeof(pem));
	return data && n > 0 && (size_t)n == len && memcmp(data, pem, len) == 0 && data[len] == '\0';
}

/* Hands the answer's credentials to mbedTLS, as main.c would. */
static int tls_accepts(void)
{
	struct kr_tls_ctx ctx;
	struct kr_tls_opts o;
	char why[256];
	int r;

	if (kr_tls_global_init() != 0)
		return 0;
	memset(&o, 0, sizeof(o));
	o.ca = kc.ca_data;
	o.ca_len = kc.ca_data_len;
	o.cert = kc.cert_data;
	o.cert_len = kc.cert_data_len;
	o.key = kc.key_data;
	o.key_len = kc.key_data_len;
	kr_tls_ctx_init(&ctx);
	r = kr_tls_ctx_setup(&ctx, &o, why, sizeof(why));
	if (r != 0)
		fprintf(stderr, "  kr_tls_ctx_setup: %s\n", why);
	kr_tls_ctx_free(&ctx);
	return r == 0;
}

/* --- realistic files ----------------------------------------------------------------- */

KR_TEST(kubeconfig, kubeadm_admin_conf)
{
	check(load1("admin.conf", NULL) == 0);
	check(strcmp(kc.context, "kubernetes-admin@kubernetes") == 0);
	check(strcmp(kc.cluster, "kubernetes") == 0);
	check(strcmp(kc.user, "kubernetes-admin") == 0);
	check(strcmp(kc.server, "https://192.168.56.10:6443") == 0);
	check(kc.ns[0] == '\0' && kc.token[0] == '\0' && kc.ca_file[0] == '\0');
	check(!kc.insecure_skip_tls_verify);
	check(same_as(kc.ca_data, kc.ca_data_len, "ca.crt"));
	check(same_as(kc.cert_data, kc.cert_data_len, "admin.crt"));
	check(same_as(kc.key_data, kc.key_data_len, "admin.key"));
	check(tls_accepts());
	check(err[0] == '\0');
	return 0;
}

KR_TEST(kubeconfig, k3s_yaml)
{
	check(load1("k3s.yaml", NULL) == 0);
	check(strcmp(kc.context, "default") == 0 && strcmp(kc.cluster, "default") == 0 &&
	      strcmp(kc.user, "default") == 0);
	check(strcmp(kc.server, "https://127.0.0.1:6443") == 0);
	check(same_as(kc.ca_data, kc.ca_data_len, "k3s-ca.crt"));
	check(same_as(kc.cert_data, kc.cert_data_len, "k3s-admin.crt"));
	check(same_as(kc.key_data, kc.key_data_len, "k3s-admin.key"));
	check(tls_accepts());
	return 0;
}

KR_TEST(kubeconfig, kind_config)
{
	check(load1("kind.yaml", NULL) == 0);
	check(strcmp(kc.context, "kind-kind") == 0 && strcmp(kc.user, "kind-kind") == 0);
	check(strcmp(kc.server, "https://127.0.0.1:41239") == 0);
	check(same_as(kc.ca_data, kc.ca_data_len, "ca.crt"));
	check(kc.cert_data_len > 0 && kc.key_data_len > 0);
	return 0;
}

KR_TEST(kubeconfig, minikube_file_paths)
{
	char p[600];

	check(load1("minikube/config", NULL) == 0);
	check(strcmp(kc.server, "https://192.168.49.2:8443") == 0);
	check(strcmp(kc.ns, "default") == 0);
	/* Absolute paths stay; relative ones hang off the kubeconfig's directory. */
	check(strcmp(kc.ca_file, "/home/edge/.minikube/ca.crt") == 0);
	snprintf(p, sizeof(p), "%s/kubeconfig/minikube/profiles/minikube/client.crt", kr_test_dir());
	check(strcmp(kc.cert_file, p) == 0);
	snprintf(p, sizeof(p), "%s/kubeconfig/minikube/./profiles/minikube/client.key", kr_test_dir());
	check(strcmp(kc.key_file, p) == 0);
	check(!kc.ca_data && !kc.cert_data && !kc.key_data);
	return 0;
}

KR_TEST(kubeconfig, merged_first_file_wins)
{
	char p[600];

	/* merge-a.yaml first: its current-context, context, cluster and user win. */
	check(load2("merge-a.yaml", "merge-b.yaml", NULL) == 0);
	check(strcmp(kc.context, "ctx-a") == 0 && strcmp(kc.ns, "team-a") == 0);
	check(strcmp(kc.cluster, "shared") == 0 && strcmp(kc.server, "https://a.example.com:6443") == 0);
	check(kc.insecure_skip_tls_verify == 1);
	check(strcmp(kc.token, "token-of-alice-from-a") == 0);
	/* merge-b.yaml first: everything comes from it. */
	check(load2("merge-b.yaml", "merge-a.yaml", NULL) == 0);
	check(strcmp(kc.context, "ctx-b") == 0 && strcmp(kc.ns, "team-b") == 0);
	check(strcmp(kc.server, "https://only-b.example.com:6443") == 0);
	snprintf(p, sizeof(p), "%s/kubeconfig/pki/only-b-ca.crt", kr_test_dir());
	check(strcmp(kc.ca_file, p) == 0);
	check(strcmp(kc.token, "token-of-alice-from-b") == 0);
	/* A context from one file, its user from the other, the path relative to that one. */
	check(load2("merge-a.yaml", "merge-b.yaml", "ctx-cross") == 0);
	check(strcmp(kc.server, "https://a.example.com:6443") == 0);
	check(kc.token[0] == '\0');
	snprintf(p, sizeof(p), "%s/kubeconfig/secrets/bob.token", kr_test_dir());
	check(strcmp(kc.token_file, p) == 0);
	/* The ctx-a of merge-a.yaml shadows merge-b.yaml's. */
	check(load2("merge-b.yaml", "merge-a.yaml", "ctx-a") == 0);
	check(strcmp(kc.cluster, "only-b") == 0 && strcmp(kc.user, "bob") == 0);
	return 0;
}

KR_TEST(kubeconfig, kubeconfig_list)
{
	char list[1600];

	/* Missing files and empty entries are skipped, as kubectl skips them. */
	snprintf(list, sizeof(list), "%s::%s:%s:", fx(0, "does-not-exist"), fx(1, "merge-b.yaml"),
		 fx(2, "merge-a.yaml"));
	check(kr_kubeconfig_load_list(&kc, &work, list, NULL, err, sizeof(err)) == 0);
	check(strcmp(kc.context, "ctx-b") == 0 && strcmp(kc.token, "token-of-alice-from-b") == 0);
	/* current-context comes from the first file that sets one. */
	snprintf(list, sizeof(list), "%s:%s", fx(0, "no-current.yaml"), fx(1, "merge-a.yaml"));
	check(kr_kubeconfig_load_list(&kc, &work, list, NULL, err, sizeof(err)) == 0);
	check(strcmp(kc.context, "ctx-a") == 0);
	/* Nothing exists. */
	snprintf(list, sizeof(list), "%s:%s", fx(0, "nope-1"), fx(1, "nope-2"));
	check(kr_kubeconfig_load_list(&kc, &work, list, NULL, err, sizeof(err)) == KR_ENOENT);
	check(strstr(err, "kubeconfig: none of the files in \"") && strstr(err, "nope-2\" exists"));
	check(load1("nope-3", NULL) == KR_ENOENT && strstr(err, "nope-3: no such file"));
	check(kr_kubeconfig_load_list(&kc, &work, ":", NULL, err, sizeof(err)) == KR_ENOENT);
	check(strcmp(err, "kubeconfig: no file named") == 0);
	check(kr_kubeconfig_load(&kc, &work, NULL, 0, NULL, err, sizeof(err)) == KR_ENOENT);
	return 0;
}

KR_TEST(kubeconfig, no_current_context)
{
	check(load1("no-current.yaml", NULL) == KR_EINVAL);
	check(strstr(err, "no-current.yaml") && strstr(err, "no current-context"));
	/* Named, it resolves as far as its user, which the file does not have. */
	check(load1("no-current.yaml", "lab") == KR_ENOENT);
	check(strstr(err, "user \"lab\"") != NULL && strstr(err, "not found") != NULL);
	return 0;
}

KR_TEST(kubeconfig, json_from_kubectl_config_view)
{
	check(load1("view.json", NULL) == 0);
	check(strcmp(kc.context, "kind-edge") == 0);
	check(strcmp(kc.server, "https://127.0.0.1:35671") == 0);
	check(same_as(kc.ca_data, kc.ca_data_len, "ca.crt"));
	check(same_as(kc.cert_data, kc.cert_data_len, "admin.crt"));
	check(same_as(kc.key_data, kc.key_data_len, "admin.key"));
	check(load1("view.json", "staging") == 0);
	check(strcmp(kc.ns, "edge-system") == 0);
	check(strcmp(kc.tls_server_name, "api.staging.internal") == 0);
	check(strncmp(kc.token, "eyJhbGciOiJSUzI1NiIs", 20) == 0);
	check(same_as(kc.ca_data, kc.ca_data_len, "k3s-ca.crt"));
	check(!kc.cert_data && !kc.key_data);
	return 0;
}

KR_TEST(kubeconfig, json_escapes_and_errors)
{
	static const char good[] =
		"{\"current-context\": \"dev\\u0026test\",\n"
		" \"clusters\": [{\"name\": \"c\\u00e9\", \"cluster\": {\"server\": \"https:\\/\\/h\\ud83d\\ude00\","
		" \"insecure-skip-tls-verify\": true}}],\n"
		" \"contexts\": [{\"name\": \"dev&test\", \"context\": {\"cluster\": \"c\xc3\xa9\", \"user\": \"u\","
		" \"namespace\": null}}],\n"
		" \"users\": [{\"name\": \"u\", \"user\": {}}]}\n";

	check(mem(good, NULL) == 0);
	check(strcmp(kc.server, "https://h\xf0\x9f\x98\x80") == 0);
	check(kc.insecure_skip_tls_verify == 1 && kc.ns[0] == '\0');
	/* A byte order mark before JSON: offsets still right on every pass. */
	check(mem("\xef\xbb\xbf {\"current-context\": \"x\", \"contexts\": [{\"name\": \"x\", \"context\": "
		  "{\"cluster\": \"c\", \"user\": \"u\"}}], \"clusters\": [{\"name\": \"c\", \"cluster\": "
		  "{\"server\": \"https://bom\", \"certificate-authority-data\": \"QUJD\"}}], \"users\": "
		  "[{\"name\": \"u\", \"user\": {\"token\": \"t\"}}]}", NULL) == 0);
	check(strcmp(kc.server, "https://bom") == 0 && kc.ca_data_len == 3 && memcmp(kc.ca_data, "ABC", 4) == 0);
	check(mem("{\n  \"clusters\": [\n    {\"name\": \"a\",}\n  ]\n}\n", NULL) == KR_EINVAL);
	check(merr(3, "expected a string key"));
	check(mem("{\"a\": 1}\n\n{}", NULL) == KR_EINVAL);
	check(merr(3, "text after the JSON object"));
	/* A malformed number is one bad value (json.c's words), not a good 0 and a stray 1. */
	check(mem("{\"a\":\n 01}", NULL) == KR_EINVAL);
	check(merr(2, "invalid JSON value"));
	check(mem("{\"clusters\": [{\"name\": \"c\", \"cluster\": {\"server\": 5}}]}", NULL) == KR_EINVAL);
	check(merr(1, "cluster \"c\": server must be a string"));
	check(mem("{\"clusters\": [{\"name\": \"c\", \"cluster\": {\"insecure-skip-tls-verify\": \"yes\"}}]}",
		  NULL) == KR_EINVAL);
	check(merr(1, "must be true or false"));
	{
		static char deep[200];
		int i;

		for (i = 0; i < 40; i++)
			deep[i] = '[';
		memcpy(deep, "{\"a\":\n", 6);
		for (i = 0; i < 40 - 6; i++)
			deep[40 + i] = ']';
		deep[74] = '}';
		check(mem(deep, NULL) == KR_EINVAL);
		check(merr(2, "nested deeper than"));
	}
	return 0;
}

KR_TEST(kubeconfig, token_user)
{
	check(load1("token.yaml", NULL) == 0);
	check(strcmp(kc.context, "reflector@edge-prod") == 0);
	check(strcmp(kc.server, "https://k8s.example.com:443") == 0);
	check(strcmp(kc.ca_file, "/etc/kreflect/ca.crt") == 0);
	check(strcmp(kc.tls_server_name, "kubernetes.default.svc") == 0);
	check(strcmp(kc.proxy_url, "http://proxy.local:3128") == 0);
	check(strcmp(kc.ns, "edge-devices") == 0);
	check(strncmp(kc.token, "eyJhbGciOiJSUzI1NiIsImtpZCI6InJlZmxlY3RvciJ9.", 45) == 0);
	check(strlen(kc.token) == 207);
	check(kc.username[0] == '\0' && kc.token_file[0] == '\0');
	return 0;
}

KR_TEST(kubeconfig, token_file_user)
{
	char p[600];

	check(load1("sa/kubeconfig", NULL) == 0);
	check(strcmp(kc.server, "https://10.96.0.1:443") == 0 && strcmp(kc.ns, "kube-system") == 0);
	snprintf(p, sizeof(p), "%s/kubeconfig/sa/token", kr_test_dir());
	check(strcmp(kc.token_file, p) == 0);
	snprintf(p, sizeof(p), "%s/kubeconfig/sa/ca.crt", kr_test_dir());
	check(strcmp(kc.ca_file, p) == 0);
	check(kc.token[0] == '\0');
	return 0;
}

KR_TEST(kubeconfig, basic_auth_user)
{
	check(load1("basic.yaml", NULL) == 0);
	check(strcmp(kc.username, "admin@legacy") == 0);
	check(strcmp(kc.password, "pa'ss #not-a-comment") == 0);
	check(kc.insecure_skip_tls_verify == 1);
	check(kc.token[0] == '\0');
	return 0;
}

KR_TEST(kubeconfig, exec_user_is_refused)
{
	check(load1("exec.yaml", NULL) == KR_EINVAL);
	check(err_at("exec.yaml", 18, "user \"arn:aws:eks:eu-west-1:123456789012:cluster/edge\""));
	check(strstr(err, "exec plugin (aws)") != NULL);
	check(strstr(err, "token") && strstr(err, "tokenFile") && strstr(err, "client certificate"));
	check(kc.server[0] == '\0' && !kc.ca_data);   /* no half answer */
	return 0;
}

KR_TEST(kubeconfig, auth_provider_user_is_refused)
{
	check(load1("auth-provider.yaml", NULL) == KR_EINVAL);
	check(err_at("auth-provider.yaml", 18, "user \"gke_edge-project_europe-west1-b_edge\""));
	check(strstr(err, "auth-provider \"gcp\"") != NULL);
	check(strstr(err, "tokenFile") != NULL);
	check(strstr(err, "ya29") == NULL);
	return 0;
}

/* --- malformed files: the error names the file and the line ---------------------------- */

KR_TEST(kubeconfig, bad_indentation)
{
	check(load1("bad-indent.yaml", NULL) == KR_EINVAL);
	check(err_at("bad-indent.yaml", 5, "bad indentation (3 spaces where 2 were expected)"));
	return 0;
}

KR_TEST(kubeconfig, tab_in_indentation)
{
	check(load1("tabs.yaml", NULL) == KR_EINVAL);
	check(err_at("tabs.yaml", 8, "tab in indentation"));
	return 0;
}

KR_TEST(kubeconfig, unknown_context)
{
	check(load1("admin.conf", "prod") == KR_ENOENT);
	check(strstr(err, "admin.conf: context \"prod\" not found") != NULL);
	check(kc.context[0] == '\0');
	return 0;
}

KR_TEST(kubeconfig, missing_cluster_and_user)
{
	check(load1("missing-cluster.yaml", NULL) == KR_ENOENT);
	check(strstr(err, "cluster \"nowhere\" of context \"x\" not found") != NULL);
	check(load1("missing-user.yaml", NULL) == KR_ENOENT);
	check(strstr(err, "user \"nobody\" of context \"x\" not found") != NULL);
	return 0;
}

KR_TEST(kubeconfig, file_over_the_limit)
{
	static char big[KR_KUBECONFIG_MAX + 2];
	char tmp[] = "/tmp/kreflect-kubeconfig-XXXXXX";
	const char *p = tmp;
	int fd, r;

	memset(big, '#', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	fd = mkstemp(tmp);
	check(fd >= 0);
	r = write(fd, big, sizeof(big)) == (long)sizeof(big);
	close(fd);
	check(r);
	r = kr_kubeconfig_load(&kc, &work, &p, 1, NULL, err, sizeof(err));
	unlink(tmp);
	check(r == KR_ETOOBIG);
	check(strstr(err, tmp) && strstr(err, "larger than 262144 bytes"));
	/* One byte less is read (and is all comment: no current-context). */
	check(kr_kubeconfig_load_buffer(&kc, &work, big + 2, KR_KUBECONFIG_MAX, "b", NULL, err,
					sizeof(err)) == KR_EINVAL);
	check(strstr(err, "no current-context") != NULL);
	check(kr_kubeconfig_load_buffer(&kc, &work, big, KR_KUBECONFIG_MAX + 1, "b", NULL, err,
					sizeof(err)) == KR_ETOOBIG);
	return 0;
}

KR_TEST(kubeconfig, binary_garbage)
{
	check(load1("garbage.bin", NULL) == KR_EINVAL);
	check(err_at("garbage.bin", 2, "control character 0x1f"));
	return 0;
}

KR_TEST(kubeconfig, unterminated_quote)
{
	check(load1("unterminated.yaml", NULL) == KR_EINVAL);
	check(err_at("unterminated.yaml", 4, "unterminated double-quoted string"));
	return 0;
}

KR_TEST(kubeconfig, block_scalar_bad_indentation)
{
	check(load1("block-indent.yaml", NULL) == KR_EINVAL);
	check(err_at("block-indent.yaml", 6, "bad indentation (5 spaces where 4 were expected)"));
	return 0;
}

KR_TEST(kubeconfig, too_deep)
{
	check(load1("deep.yaml", NULL) == KR_EINVAL);
	check(err_at("deep.yaml", 35, "nested deeper than 32 levels"));
	return 0;
}

/* --- the YAML kubectl writes, and what it does not ---------------------------------------- */

static const char tail[] =
	"contexts:\n- context:\n    cluster: c\n    user: u\n  name: x\ncurrent-context: x\n"
	"users:\n- name: u\n  user:\n    token: t\n";

/* Loads a cluster entry's body (indented by 4) followed by a working tail. */
static int cluster(const char *body)
{
	static char text[4096];

	snprintf(text, sizeof(text), "clusters:\n- name: c\n  cluster:\n%s%s", body, tail);
	return mem(text, NULL);
}

KR_TEST(kubeconfig, scalars)
{
	/* Plain, folded over lines; comments only after a space. */
	check(cluster("    server: https://h.example.com/a#b   # comment\n") == 0);
	check(strcmp(kc.server, "https://h.example.com/a#b") == 0);
	check(cluster("    server: https://h.example.com/a\n      b\n\n      c\n") == 0);
	check(strcmp(kc.server, "https://h.example.com/a b\nc") == 0);
	check(cluster("    server:\n      https://next-line\n") == 0);
	check(strcmp(kc.server, "https://next-line") == 0);
	/* Single quotes: '' is a quote, no escapes, folding. */
	check(cluster("    server: 'https://x/''q''\\n'\n") == 0);
	check(strcmp(kc.server, "https://x/'q'\\n") == 0);
	check(cluster("    server: 'a\n      b  \n\n       c'\n") == 0);
	check(strcmp(kc.server, "a b\nc") == 0);
	/* Double quotes: escapes, escaped line breaks. */
	check(cluster("    server: \"\\x41\\t\\u00e9\\U0001F600\\\"\\\\\\/\\0end\"\n") == KR_EINVAL);
	check(merr(4, "contains a NUL"));
	check(cluster("    server: \"\\x41\\t\\u00e9\\U0001F600\\\"\\\\\\/ \\N\"\n") == 0);
	check(strcmp(kc.server, "A\t\xc3\xa9\xf0\x9f\x98\x80\"\\/ \xc2\x85") == 0);
	check(cluster("    server: \"https://a\\\n      b \\\n      c\"\n") == 0);
	check(strcmp(kc.server, "https://ab c") == 0);
	/* Block scalars: literal, folded, chomping, explicit indentation. */
	check(cluster("    tls-server-name: |\n      a\n       b\n\n      c\n\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "a\n b\n\nc\n") == 0);
	check(cluster("    tls-server-name: >-\n      a\n      b\n\n      c\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "a b\nc") == 0);
	check(cluster("    tls-server-name: |+\n      a\n\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "a\n\n") == 0);
	check(cluster("    tls-server-name: |2-\n        a\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "  a") == 0);
	check(cluster("    tls-server-name: >\n      a\n        b\n      c\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "a\n  b\nc\n") == 0);
	/* Only blank lines: indented as the most indented of them, so nothing is text. */
	check(cluster("    tls-server-name: |+\n      \n\n    server: s\n") == 0);
	check(strcmp(kc.tls_server_name, "\n\n") == 0);
	/* Nulls and empty values. */
	check(cluster("    server: s\n    proxy-url: ~\n    tls-server-name:\n    certificate-authority: null\n") == 0);
	check(kc.proxy_url[0] == '\0' && kc.tls_server_name[0] == '\0' && kc.ca_file[0] == '\0');
	/* Quoted keys; booleans as go-yaml reads them. */
	check(cluster("    \"server\": s\n    'insecure-skip-tls-verify': yes\n") == 0);
	check(strcmp(kc.server, "s") == 0 && kc.insecure_skip_tls_verify == 1);
	check(cluster("    server: s\n    insecure-skip-tls-verify: \"true\"\n") == KR_EINVAL);
	check(merr(5, "must be true or false"));
	return 0;
}

KR_TEST(kubeconfig, document_forms)
{
	/* A BOM, comments, --- and ..., CRLF line ends, the root indented. */
	check(mem("\xef\xbb\xbf# written by hand\r\n--- # start\r\n  current-context: x\r\n"
		  "  clusters:\r\n  - name: c\r\n    cluster:\r\n      server: \"s\"\r\n"
		  "  contexts:\r\n  -   name: x\r\n"
		  "      context:\r\n        cluster: c\r\n        user: u\r\n  users:\r\n  - name: u\r\n"
		  "    user:\r\n      token: |-\r\n        t\r\n...\r\n# end\r\n", NULL) == 0);
	check(strcmp(kc.server, "s") == 0 && strcmp(kc.token, "t") == 0);
	/* A cluster with no server is not usable. */
	check(mem("current-context: x\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n"
		  "  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\n", NULL) == KR_EINVAL);
	check(merr(3, "cluster \"c\" has no server"));
	check(mem("---\ncurrent-context: x\nclusters:\n  - name: c\n    cluster:\n      server: s\n"
		  "contexts:\n  - name: x\n    context:\n      cluster: c\n      user: u\nusers:\n"
		  "  - name: u\n    user:\n      username: a\n      password: b\n...\n", NULL) == 0);
	check(strcmp(kc.server, "s") == 0 && strcmp(kc.password, "b") == 0);
	/* Empty files and comment-only files are empty kubeconfigs. */
	check(mem("", NULL) == KR_EINVAL && strstr(err, "no current-context"));
	check(mem("# nothing\n\n   \n", "x") == KR_ENOENT && strstr(err, "context \"x\" not found"));
	check(mem("{}", "x") == KR_ENOENT);
	return 0;
}

KR_TEST(kubeconfig, unsupported_yaml)
{
	check(cluster("    server: &a s\n") == KR_EINVAL && merr(4, "anchors"));
	check(cluster("    server: *a\n") == KR_EINVAL && merr(4, "aliases"));
	check(cluster("    server: !!str s\n") == KR_EINVAL && merr(4, "tags"));
	check(cluster("    server: s\n    extensions: [a]\n") == KR_EINVAL &&
	      merr(5, "non-empty flow sequence"));
	check(cluster("    server: {a: b}\n") == KR_EINVAL && merr(4, "non-empty flow mapping"));
	check(cluster("    server: a: b\n") == KR_EINVAL && merr(4, "\": \" inside a value"));
	check(cluster("    server: s\n    server: t\n") == KR_EINVAL && merr(5, "duplicate key \"server\""));
	check(cluster("    server: s\n    - t\n") == KR_EINVAL && merr(5, "where a key was expected"));
	check(cluster("    server: s\n    just text\n") == KR_EINVAL && merr(5, "expected \"key: value\""));
	check(cluster("    server: \"\\q\"\n") == KR_EINVAL && merr(4, "invalid escape"));
	check(cluster("    server: 'open\n") == KR_EINVAL && merr(4, "unterminated single-quoted string"));
	check(cluster("    server: |x\n") == KR_EINVAL && merr(4, "invalid block scalar header"));
	check(cluster("    server: \"s\" trailing\n") == KR_EINVAL && merr(4, "unexpected text after a value"));
	check(cluster("    server: s\r    x: y\n") == KR_EINVAL && merr(4, "carriage return"));
	check(cluster("    server: s\xff\n") == KR_EINVAL && merr(4, "invalid UTF-8"));
	check(cluster("    server: |\n          \n        a\n") == KR_EINVAL && merr(5, "leading empty line"));
	check(mem("%YAML 1.1\n---\n", NULL) == KR_EINVAL && merr(1, "directives"));
	check(mem("a: b\n---\nc: d\n", NULL) == KR_EINVAL && merr(3, "more than one YAML document"));
	check(mem("--- a: b\n", NULL) == KR_EINVAL && merr(1, "text after \"---\""));
	check(mem("- a\n- b\n", NULL) == KR_EINVAL && merr(1, "top level is not a mapping"));
	check(mem("clusters: x\n", NULL) == KR_EINVAL && merr(1, "clusters must be a list"));
	check(mem("clusters:\n- x\n", NULL) == KR_EINVAL && merr(2, "an entry of clusters is not a mapping"));
	check(mem("users:\n- name: u\n  user:\n    token:\n      a: b\n", NULL) == KR_EINVAL &&
	      merr(4, "user \"u\": token must be a string"));
	return 0;
}

/* --- kubectl's checks, secrets, limits --------------------------------------------------- */

static int user(const char *body, const char *server_extra)
{
	static char text[KR_TOKEN_MAX + 4096];

	snprintf(text, sizeof(text),
		 "clusters:\n- name: c\n  cluster:\n    server: https://s\n%s"
		 "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
		 "users:\n- name: u\n  user:\n%s",
		 server_extra, body);
	return mem(text, NULL);
}

KR_TEST(kubeconfig, conflicting_settings)
{
	check(user("    token: supersecret-token\n    username: a\n    password: supersecret-password\n", "") ==
	      KR_EINVAL);
	check(strstr(err, "both a token and a username/password") != NULL);
	check(!strstr(err, "supersecret") && kc.token[0] == '\0' && kc.password[0] == '\0');
	check(user("    client-certificate: a.crt\n", "") == KR_EINVAL && strstr(err, "no client key"));
	check(user("    client-key: a.key\n", "") == KR_EINVAL && strstr(err, "no client certificate"));
	check(user("    client-certificate: a.crt\n    client-certificate-data: QUJD\n    client-key: k\n", "") ==
	      KR_EINVAL && strstr(err, "both client-certificate and client-certificate-data"));
	check(user("    token: t\n", "    certificate-authority: ca\n    certificate-authority-data: QUJD\n") ==
	      KR_EINVAL && strstr(err, "both certificate-authority and certificate-authority-data"));
	check(user("    token: t\n", "    certificate-authority: ca\n    insecure-skip-tls-verify: true\n") ==
	      KR_EINVAL && strstr(err, "insecure-skip-tls-verify"));
	check(user("    token: t\n    as: root\n", "") == KR_EINVAL && strstr(err, "impersonates (as)"));
	check(user("    exec:\n      command: kubelogin\n", "") == KR_EINVAL && merr(14, "exec plugin (kubelogin)"));
	/* No credentials at all is an anonymous user, as kubectl has it. */
	check(user("    {}\n", "") == 0 && kc.token[0] == '\0');
	check(user("    extensions: []\n", "") == 0 && kc.token[0] == '\0' && !kc.key_data);
	return 0;
}

KR_TEST(kubeconfig, base64_data)
{
	/* Block scalars and line breaks inside base64 are fine, as in Go's decoder. */
	check(user("    token: t\n", "    certificate-authority-data: |\n      QUJD\n      REVG\n      Rw==\n") == 0);
	check(kc.ca_data_len == 7 && memcmp(kc.ca_data, "ABCDEFG", 8) == 0);
	check(user("    token: t\n", "    certificate-authority-data: QUJDRA=\n") == KR_EINVAL);
	check(merr(5, "cluster \"c\": certificate-authority-data is not valid base64"));
	check(user("    token: t\n", "    certificate-authority-data: QUJD=A==\n") == KR_EINVAL);
	check(user("    token: t\n", "    certificate-authority-data: DATA+OMITTED\n") == KR_EINVAL);
	check(strstr(err, "kubectl config view --raw") != NULL);
	check(user("    client-certificate-data: QUJD\n    client-key-data: REDACTED\n", "") == KR_EINVAL);
	check(strstr(err, "placeholder (REDACTED)") != NULL);
	/* A key that is not base64 is reported without its text. */
	check(user("    client-certificate-data: QUJD\n    client-key-data: c2VjcmV0LWtleQ?=\n", "") == KR_EINVAL);
	check(strstr(err, "client-key-data is not valid base64") && !strstr(err, "c2VjcmV0"));
	/* kubectl decodes the whole file: bad data in an unused entry fails too. */
	check(mem("current-context: x\nclusters:\n- name: unused\n  cluster:\n    certificate-authority-data: '!'\n",
		  NULL) == KR_EINVAL);
	check(merr(5, "cluster \"unused\": certificate-authority-data is not valid base64"));
	return 0;
}

KR_TEST(kubeconfig, limits)
{
	static char text[KR_TOKEN_MAX + 4096], tok[KR_TOKEN_MAX + 2];
	int i;

	memset(tok, 'a', sizeof(tok) - 1);
	tok[sizeof(tok) - 1] = '\0';
	snprintf(text, sizeof(text), "    token: %s\n", tok);
	check(user(text, "") == KR_ETOOBIG);
	check(merr(14, "user \"u\": token is longer than 16384 bytes"));
	check(!strstr(err, "aaaa"));
	tok[KR_TOKEN_MAX] = '\0';
	snprintf(text, sizeof(text), "    token: %s\n", tok);
	check(user(text, "") == 0 && strlen(kc.token) == KR_TOKEN_MAX);
	/* Too many nodes. */
	{
		static char many[KR_KUBECONFIG_NODES * 8];
		size_t n = 0;

		for (i = 0; i < KR_KUBECONFIG_NODES; i++)
			n += (size_t)snprintf(many + n, sizeof(many) - n, "- %d\n", i % 10);
		check(kr_kubeconfig_load_buffer(&kc, &work, many, n, "m", NULL, err, sizeof(err)) == KR_ETOOBIG);
		check(strstr(err, "m:4096: more than 4096 values") != NULL);
	}
	/* A name too long for the answer only fails when it is asked for. */
	memset(tok, 'n', 300);
	tok[300] = '\0';
	snprintf(text, sizeof(text), "current-context: x\ncontexts:\n- name: %s\n  context: {}\n", tok);
	check(mem(text, NULL) == KR_ENOENT && strstr(err, "context \"x\" not found"));
	check(mem(text, tok) == KR_ENOENT && strstr(err, "no context has a name that long"));
	return 0;
}

KR_TEST(kubeconfig, wipe)
{
	check(load1("admin.conf", NULL) == 0);
	check(kc.key_data_len > 0);
	kr_kubeconfig_wipe(&kc, &work);
	check(kc.key_data == NULL && kc.server[0] == '\0');
	check(work.data[0] == 0 && work.file[10] == 0);
	return 0;
}
