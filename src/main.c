/*
 * kreflect: flags -> configuration -> loop. Exit codes (documented in --help):
 *   0  clean stop (SIGTERM/SIGINT), --once finished, --help/--version
 *   1  fatal error at run time
 *   2  usage or configuration error
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "log.h"
#include "loop.h"
#include "mbedtls/build_info.h"
#include "reflector.h"
#include "resource.h"
#include "sink.h"
#include "sink_dir.h"
#include "store.h"
#include "tls.h"

#define EXIT_FATAL 1
#define EXIT_USAGE 2

/* All of kreflect's memory, reserved here at build time (see --print-budget). */
static char arena[KR_ARENA_BYTES] __attribute__((aligned(16)));
static struct kr_entry entries[KR_MAX_OBJECTS];
static int32_t buckets[KR_STORE_BUCKETS];
static struct kr_reflector reflectors[KR_MAX_RESOURCES];
static struct kr_reflect top;
static struct kr_store store;
static struct kr_loop loop;
static struct kr_tls_ctx tls_ctx;
static struct kr_jsonl jsonl;
static struct kr_dirsink dirsink;
static struct kr_resource resources[KR_MAX_RESOURCES];
static unsigned char pem[KR_PEM_MAX + 3];
static char token[KR_TOKEN_MAX + 1];

static const char usage[] =
	"usage: kreflect [flags] [RESOURCE ...]\n"
	"\n"
	"Lists and watches Kubernetes resources and mirrors them locally, printing\n"
	"every change as a JSON line on stdout.\n"
	"\n"
	"RESOURCE: configmaps | v1/configmaps | deployments.apps | apps/v1/deployments\n"
	"          (a built-in type; short names like cm work). None given: the\n"
	"          compile-time table in config/resources.def.\n"
	"\n"
	"connection:\n"
	"  --server URL                   API server, https://host[:port] (http:// only if named)\n"
	"  --token-file PATH              bearer token file\n"
	"  --certificate-authority PATH   CA bundle (PEM) to verify the server with\n"
	"  --client-certificate PATH      client certificate (PEM)\n"
	"  --client-key PATH              client key (PEM: PKCS#1, SEC1 or PKCS#8)\n"
	"  --insecure-skip-tls-verify     do not verify the server (logs a warning per connection)\n"
	"what to mirror:\n"
	"  -n, --namespace NS             namespace (default: \"default\")\n"
	"  -A, --all-namespaces           every namespace\n"
	"  -l, --selector SEL             label selector (a=b,c!=d,e in (f,g),!h)\n"
	"      --field-selector SEL       field selector (metadata.name=x)\n"
	"how:\n"
	"  --watch-list auto|on|off       streaming initial list (default auto: fall back\n"
	"                                 to paginated lists and remember it)\n"
	"  --page-size N                  list page size (default 500, as client-go)\n"
	"  --resync SECONDS               re-deliver every object as RESYNC this often (default off)\n"
	"  --initial-events-timeout SECONDS  quiet time before giving up on watch-list (default 30)\n"
	"  --keep-managed-fields          keep metadata.managedFields (dropped by default)\n"
	"  --once                         list, print, exit 0 (exit 1 if not synced in --timeout)\n"
	"  --timeout SECONDS              --once: give up after this long (default 60)\n"
	"output:\n"
	"  --dir PATH                     write objects as files under PATH (ConfigMaps and\n"
	"                                 Secrets: one file per data key; others: <ns>_<name>.json),\n"
	"                                 atomically, never rewriting unchanged files, removing\n"
	"                                 exactly the files of deleted objects (manifest in PATH)\n"
	"  --dir-layout flat|object       flat: PATH/<key>; object: PATH/<ns>/<name>/<key>\n"
	"  --dir-annotation KEY           annotation choosing a subdirectory (default\n"
	"                                 kreflect.io/target-dir; \"\" turns it off)\n"
	"  --file-mode MODE               mode of files written (octal, default 0644)\n"
	"  --secret-file-mode MODE        mode of Secret data files (octal, default 0600)\n"
	"  -o, --output jsonl|none        default jsonl on stdout:\n"
	"        {\"type\":\"ADDED|MODIFIED|DELETED|RESYNC\",\"object\":{...}}\n"
	"        {\"type\":\"SYNCED\",\"resource\":\"...\",\"resourceVersion\":\"...\",\"count\":N}\n"
	"  -v, --verbosity N              0 errors and warnings, 1 info (default), 2 debug, 3 trace\n"
	"other:\n"
	"  --print-budget                 print the static memory the capacities reserve\n"
	"  --version                      print version, target, mbedTLS version and capacities\n"
	"  -h, --help                     this help\n"
	"\n"
	"Logs go to stderr, one line each. Secrets and tokens are never logged.\n"
	"\n"
	"exit codes:\n"
	"  0  clean stop (SIGTERM/SIGINT), --once finished, --help/--version/--print-budget\n"
	"  1  fatal error at run time (--once: not synced within --timeout)\n"
	"  2  usage or configuration error (the message names the flag)\n";

struct options {
	const char *server;
	const char *token_file;
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
	int insecure;
	const char *ns;
	int all_namespaces;
	const char *label_selector;
	const char *field_selector;
	int output_none;
	int verbosity;
	int once;
	int timeout_s;
	struct kr_reflector_opts ropts;
	struct kr_dirsink_opts dir;
};

static void print_version(void)
{
	printf("kreflect %s\n", KR_VERSION);
	printf("target: %s (linux, static)\n", kr_target());
	printf("mbedTLS: %s\n", MBEDTLS_VERSION_STRING);
	printf("capacities: resources=%u objects=%u arena=%u max-object=%u "
	       "json-tokens=%u connections=%u tls-heap=%u\n",
	       (unsigned)KR_MAX_RESOURCES, (unsigned)KR_MAX_OBJECTS,
	       (unsigned)KR_ARENA_BYTES, (unsigned)KR_MAX_OBJECT_BYTES,
	       (unsigned)KR_JSON_TOKENS, (unsigned)KR_MAX_CONNS,
	       (unsigned)KR_TLS_HEAP_SIZE);
}

static void print_budget(void)
{
	const struct kr_budget_item *it;
	size_t n, i;

	it = kr_budget_items(&n);
	for (i = 0; i < n; i++)
		printf("%-14s %10zu  %s\n", it[i].name, it[i].bytes, it[i].why);
	printf("%-14s %10zu  bytes of static memory (.data + .bss) reserved; pages never\n"
	       "%-14s %10s  touched (most of the arena, until it fills) cost no RAM\n",
	       "total", kr_budget_total(), "", "");
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kreflect: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see --help)\n");
	return EXIT_USAGE;
}

/* Parses a whole decimal number in [lo, hi]; -1 if it is not one. */
static long parse_num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi)
		return -1;
	return v;
}

/* https://host[:port][/] or http://...; IPv6 literals in brackets. */
static int parse_server(const char *url, struct kr_conn_cfg *cfg, int *plain)
{
	const char *p, *host, *host_end, *port = NULL;
	size_t hlen;
	long pn;

	if (strncmp(url, "https://", 8) == 0) {
		*plain = 0;
		p = url + 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		*plain = 1;
		p = url + 7;
	} else {
		return -1;
	}
	if (*p == '[') {
		host = p + 1;
		host_end = strchr(host, ']');
		if (!host_end)
			return -1;
		p = host_end + 1;
	} else {
		host = p;
		host_end = p + strcspn(p, ":/");
		p = host_end;
	}
	if (*p == ':')
		port = p + 1;
	hlen = (size_t)(host_end - host);
	if (hlen == 0 || hlen >= sizeof(cfg->host))
		return -1;
	memcpy(cfg->host, host, hlen);
	cfg->host[hlen] = '\0';
	pn = *plain ? 80 : 443;
	if (port) {
		char num[8];
		size_t plen = strcspn(port, "/");

		if (plen == 0 || plen >= sizeof(num))
			return -1;
		memcpy(num, port, plen);
		num[plen] = '\0';
		pn = parse_num(num, 1, 65535);
		if (pn < 0)
			return -1;
		p = port + plen;
	}
	if (*p && strcmp(p, "/") != 0)
		return -1;  /* a path prefix (proxies) is not supported */
	cfg->port = (uint16_t)pn;
	return 0;
}

/* Reads a PEM file into pem[*used...], NUL-terminated. Returns its start or NULL. */
static const unsigned char *load_pem(const char *flag, const char *path, size_t *used, size_t *len)
{
	long n;

	if (*used + 1 >= sizeof(pem)) {
		fprintf(stderr, "kreflect: %s %s: the PEM files together exceed %u bytes\n", flag, path,
			(unsigned)KR_PEM_MAX);
		return NULL;
	}
	n = kr_port_read_file(path, pem + *used, sizeof(pem) - *used - 1);
	if (n < 0) {
		fprintf(stderr, "kreflect: %s %s: unable to read: %s\n", flag, path,
			n == KR_ETOOBIG ? "larger than KR_PEM_MAX" : kr_port_last_error());
		return NULL;
	}
	pem[*used + (size_t)n] = '\0';
	*len = (size_t)n;
	*used += (size_t)n + 1;
	return pem + *used - (size_t)n - 1;
}

static int load_token(const char *path)
{
	long n = kr_port_read_file(path, token, KR_TOKEN_MAX);

	if (n < 0) {
		fprintf(stderr, "kreflect: --token-file %s: unable to read: %s\n", path,
			n == KR_ETOOBIG ? "larger than KR_TOKEN_MAX" : kr_port_last_error());
		return -1;
	}
	while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r' || token[n - 1] == ' '))
		n--;
	token[n] = '\0';
	if (n == 0 || strpbrk(token, "\r\n")) {
		fprintf(stderr, "kreflect: --token-file %s: not a single-line token\n", path);
		return -1;
	}
	return 0;
}

static void on_signal(struct kr_loop *l, int sig, void *arg)
{
	(void)arg;
	if (sig == SIGTERM || sig == SIGINT) {
		kr_log(KR_LOG_INFO, "stopping on signal %d", sig);
		kr_reflect_stop(&top);
		l->stop = 1;
	}
}

static int once_failed;

static void on_once_timeout(struct kr_loop *l, struct kr_timer *t)
{
	int i;

	(void)t;
	for (i = 0; i < top.nrefl; i++)
		if (!top.refl[i].synced)
			kr_log(KR_LOG_ERROR, "unable to sync %s within the --timeout: %s", top.refl[i].res.name,
			       top.refl[i].conn.reason[0] ? top.refl[i].conn.reason : "no answer");
	once_failed = 1;
	kr_reflect_stop(&top);
	l->stop = 1;
}

/* Flag value: "--flag value" or "--flag=value". */
static const char *value_of(int argc, char **argv, int *i, const char *longname, const char *shortname)
{
	const char *a = argv[*i];
	size_t ll = strlen(longname);

	if ((strcmp(a, longname) == 0 || (shortname && strcmp(a, shortname) == 0))) {
		if (*i + 1 >= argc)
			return "";
		return argv[++*i];
	}
	if (strncmp(a, longname, ll) == 0 && a[ll] == '=')
		return a + ll + 1;
	return NULL;
}

static int parse_flags(int argc, char **argv, struct options *o, int *nres)
{
	char err[256];
	const char *v;
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if ((v = value_of(argc, argv, &i, "--server", NULL))) {
			o->server = v;
		} else if ((v = value_of(argc, argv, &i, "--token-file", NULL))) {
			o->token_file = v;
		} else if ((v = value_of(argc, argv, &i, "--certificate-authority", NULL))) {
			o->ca_file = v;
		} else if ((v = value_of(argc, argv, &i, "--client-certificate", NULL))) {
			o->cert_file = v;
		} else if ((v = value_of(argc, argv, &i, "--client-key", NULL))) {
			o->key_file = v;
		} else if (strcmp(a, "--insecure-skip-tls-verify") == 0) {
			o->insecure = 1;
		} else if ((v = value_of(argc, argv, &i, "--namespace", "-n"))) {
			if (!*v || strlen(v) >= KR_NAME_MAX)
				return usage_error("--namespace needs a namespace name, got '%s'", v);
			o->ns = v;
		} else if (strcmp(a, "-A") == 0 || strcmp(a, "--all-namespaces") == 0) {
			o->all_namespaces = 1;
		} else if ((v = value_of(argc, argv, &i, "--selector", "-l"))) {
			if (strlen(v) >= KR_SELECTOR_MAX)
				return usage_error("--selector is too long: '%.40s...'", v);
			o->label_selector = v;
		} else if ((v = value_of(argc, argv, &i, "--field-selector", NULL))) {
			if (strlen(v) >= KR_SELECTOR_MAX)
				return usage_error("--field-selector is too long: '%.40s...'", v);
			o->field_selector = v;
		} else if ((v = value_of(argc, argv, &i, "--output", "-o"))) {
			if (strcmp(v, "jsonl") == 0)
				o->output_none = 0;
			else if (strcmp(v, "none") == 0)
				o->output_none = 1;
			else
				return usage_error("--output must be jsonl or none, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--watch-list", NULL))) {
			if (strcmp(v, "auto") == 0)
				o->ropts.watch_list = KR_WL_AUTO;
			else if (strcmp(v, "on") == 0)
				o->ropts.watch_list = KR_WL_ON;
			else if (strcmp(v, "off") == 0)
				o->ropts.watch_list = KR_WL_OFF;
			else
				return usage_error("--watch-list must be auto, on or off, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--page-size", NULL))) {
			long n = parse_num(v, 1, 100000);

			if (n < 0)
				return usage_error("--page-size must be a number from 1 to 100000, not '%s'", v);
			o->ropts.page_size = (int)n;
			o->ropts.page_size_forced = 1;
		} else if ((v = value_of(argc, argv, &i, "--resync", NULL))) {
			long n = parse_num(v, 0, 86400 * 365);

			if (n < 0)
				return usage_error("--resync must be a number of seconds, not '%s'", v);
			o->ropts.resync_ms = (int)n * 1000;
		} else if ((v = value_of(argc, argv, &i, "--initial-events-timeout", NULL))) {
			long n = parse_num(v, 1, 3600);

			if (n < 0)
				return usage_error("--initial-events-timeout must be 1 to 3600 seconds, not '%s'", v);
			o->ropts.initial_events_timeout_ms = (int)n * 1000;
		} else if ((v = value_of(argc, argv, &i, "--dir", NULL))) {
			if (!*v)
				return usage_error("--dir needs a directory%s", "");
			o->dir.path = v;
		} else if ((v = value_of(argc, argv, &i, "--dir-layout", NULL))) {
			if (strcmp(v, "flat") == 0)
				o->dir.layout_object = 0;
			else if (strcmp(v, "object") == 0)
				o->dir.layout_object = 1;
			else
				return usage_error("--dir-layout must be flat or object, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--dir-annotation", NULL))) {
			o->dir.annotation = v;
		} else if ((v = value_of(argc, argv, &i, "--file-mode", NULL)) ||
			   (v = value_of(argc, argv, &i, "--secret-file-mode", NULL))) {
			char *end;
			unsigned long mode = strtoul(v, &end, 8);

			if (!*v || *end || mode > 07777)
				return usage_error("%s must be an octal mode like 0640, not '%s'", a, v);
			if (strncmp(a, "--file-mode", 11) == 0)
				o->dir.file_mode = (unsigned)mode;
			else
				o->dir.secret_mode = (unsigned)mode;
		} else if (strcmp(a, "--keep-managed-fields") == 0) {
			o->ropts.keep_managed_fields = 1;
		} else if (strcmp(a, "--once") == 0) {
			o->once = 1;
		} else if ((v = value_of(argc, argv, &i, "--timeout", NULL))) {
			long n = parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--timeout must be 1 to 86400 seconds, not '%s'", v);
			o->timeout_s = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--verbosity", "-v"))) {
			long n = parse_num(v, 0, 3);

			if (n < 0)
				return usage_error("--verbosity must be 0 to 3, not '%s'", v);
			o->verbosity = (int)n;
		} else if (a[0] == '-') {
			return usage_error("unknown flag '%s'", a);
		} else {
			if (*nres == KR_MAX_RESOURCES)
				return usage_error("more resources than KR_MAX_RESOURCES, at '%s'", a);
			if (kr_resource_lookup(a, &resources[*nres], err, sizeof(err)) != 0) {
				fprintf(stderr, "kreflect: %s\n", err);
				return EXIT_USAGE;
			}
			(*nres)++;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	struct kr_conn_cfg cfg;
	struct kr_tls_opts topts;
	struct kr_sink sink;
	struct kr_timer once_timer;
	char err[256];
	size_t used = 0, ndef, i;
	int nres = 0, plain = 0, r;

	for (i = 1; i < (size_t)argc; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			print_version();
			return 0;
		}
		if (strcmp(argv[i], "--print-budget") == 0) {
			print_budget();
			return 0;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		}
	}
	memset(&o, 0, sizeof(o));
	o.verbosity = 1;
	o.timeout_s = 60;
	kr_reflector_opts_default(&o.ropts);
	r = parse_flags(argc, argv, &o, &nres);
	if (r)
		return r;
	kr_log_set_level(o.verbosity == 0 ? KR_LOG_WARN : o.verbosity == 1 ? KR_LOG_INFO
			 : o.verbosity == 2 ? KR_LOG_DEBUG : KR_LOG_TRACE);
	o.ropts.once = o.once;

	memset(&cfg, 0, sizeof(cfg));
	if (!o.server)
		return usage_error("no API server: give --server https://HOST:PORT%s", "");
	if (parse_server(o.server, &cfg, &plain) != 0)
		return usage_error("--server must be https://HOST[:PORT] (IPv6 in brackets), not '%s'", o.server);

	if (nres == 0) {
		const struct kr_resource *d = kr_resource_defaults(&ndef);

		if (ndef > KR_MAX_RESOURCES)
			ndef = KR_MAX_RESOURCES;
		for (i = 0; i < ndef; i++)
			resources[i] = d[i];
		nres = (int)ndef;
	}
	for (i = 0; i < (size_t)nres; i++) {
		struct kr_resource *res = &resources[i];

		if (o.all_namespaces)
			res->all_namespaces = 1;
		if (o.ns)
			snprintf(res->ns, sizeof(res->ns), "%s", o.ns);
		else if (!res->ns[0])
			snprintf(res->ns, sizeof(res->ns), "default");
		if (o.label_selector)
			snprintf(res->label_selector, sizeof(res->label_selector), "%s", o.label_selector);
		if (o.field_selector)
			snprintf(res->field_selector, sizeof(res->field_selector), "%s", o.field_selector);
	}

	if (kr_tls_global_init() != 0) {
		fprintf(stderr, "kreflect: unable to start TLS\n");
		return EXIT_FATAL;
	}
	if (o.token_file && load_token(o.token_file) != 0)
		return EXIT_USAGE;
	if (!plain) {
		memset(&topts, 0, sizeof(topts));
		topts.insecure_skip_verify = o.insecure;
		if (o.ca_file && !(topts.ca = load_pem("--certificate-authority", o.ca_file, &used, &topts.ca_len)))
			return EXIT_USAGE;
		if (o.cert_file && !(topts.cert = load_pem("--client-certificate", o.cert_file, &used, &topts.cert_len)))
			return EXIT_USAGE;
		if (o.key_file && !(topts.key = load_pem("--client-key", o.key_file, &used, &topts.key_len)))
			return EXIT_USAGE;
		kr_tls_ctx_init(&tls_ctx);
		if (kr_tls_ctx_setup(&tls_ctx, &topts, err, sizeof(err)) != 0) {
			fprintf(stderr, "kreflect: %s\n", err);
			return EXIT_USAGE;
		}
		/* The key's bytes are not needed any more: do not keep them around. */
		memset(pem, 0, used);
		cfg.tls = &tls_ctx;
	} else {
		kr_log(KR_LOG_WARN, "--server %s is plain HTTP: nothing is encrypted or verified", o.server);
	}

	kr_store_init(&store, arena, sizeof(arena), entries, KR_MAX_OBJECTS, buckets,
		      KR_STORE_BUCKETS, KR_STORE_RESERVE);
	kr_loop_init(&loop);
	if (kr_loop_signals(&loop, on_signal, NULL) != 0) {
		fprintf(stderr, "kreflect: unable to set up signal handling\n");
		return EXIT_FATAL;
	}
	r = kr_reflect_init(&top, &loop, &store, &cfg, &o.ropts, reflectors, resources, nres);
	if (r != 0) {
		fprintf(stderr, "kreflect: unable to set up the reflector: %s\n", kr_strerror(r));
		return EXIT_FATAL;
	}
	top.token = token[0] ? token : NULL;
	if (o.dir.path) {
		if (kr_dirsink_init(&dirsink, &o.dir, err, sizeof(err)) != 0) {
			fprintf(stderr, "kreflect: --dir %s: %s\n", o.dir.path, err);
			return EXIT_USAGE;
		}
		sink.event = kr_dirsink_event;
		sink.arg = &dirsink;
		kr_reflect_add_sink(&top, &sink);
	}
	if (!o.output_none) {
		kr_jsonl_init(&jsonl, 1);
		sink.event = kr_jsonl_event;
		sink.arg = &jsonl;
		kr_reflect_add_sink(&top, &sink);
	}
	if (o.once) {
		memset(&once_timer, 0, sizeof(once_timer));
		once_timer.fire = on_once_timeout;
		kr_loop_timer_at(&loop, &once_timer, kr_port_now_ms() + (kr_ms_t)o.timeout_s * 1000);
	}
	kr_reflect_start(&top);
	if (kr_loop_run(&loop) != 0) {
		kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
		return EXIT_FATAL;
	}
	if (o.once && !once_failed)
		kr_reflect_stop(&top);
	return once_failed ? EXIT_FATAL : 0;
}
