/*
 * kreflect: flags -> configuration -> loop. Exit codes (documented in --help):
 *   0  clean stop (SIGTERM/SIGINT), --once finished, --help/--version
 *   1  fatal error at run time
 *   2  usage or configuration error
 *   supervisor mode: the program's own code (128 + N after signal N);
 *   126 it could not be started, 127 it was not found
 */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "budget.h"
#include "discovery.h"
#include "fmt.h"
#include "http_post.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "kubeconfig.h"
#include "log.h"
#include "loop.h"
#include "mbedtls/build_info.h"
#include "notify.h"
#include "proxy.h"
#include "reflector.h"
#include "resource.h"
#include "sink.h"
#include "sink_dir.h"
#include "store.h"
#include "supervise.h"
#include "tls.h"

#define EXIT_FATAL 1
#define EXIT_USAGE 2
#define EXIT_CANNOT_RUN 126            /* as a shell: found but could not be run */
#define EXIT_NOT_FOUND 127

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
static struct kr_notify notify;
static int notify_on;
static struct kr_http_post post;
static int post_on;
static struct kr_supervise sup;
static int sup_on;
static struct kr_resource resources[KR_MAX_RESOURCES];
static unsigned char pem[KR_PEM_MAX + 3];
static struct kr_auth auth;
static struct kr_kubeconfig kcfg;
static struct kr_kubeconfig_work kwork;
static struct kr_proxy proxy;
/* Command-line names left for discovery, by index into resources[]; NULL = resolved. */
static const char *discover_arg[KR_MAX_RESOURCES];

static const char usage[] =
	"usage: kreflect [flags] [RESOURCE ...] [-- PROGRAM [ARGS ...]]\n"
	"\n"
	"Lists and watches Kubernetes resources and mirrors them locally, printing\n"
	"every change as a JSON line on stdout. With -- PROGRAM, kreflect also runs\n"
	"PROGRAM once the mirror is complete, and lives and dies with it (see below).\n"
	"\n"
	"RESOURCE: configmaps | v1/configmaps | deployments.apps | apps/v1/deployments\n"
	"          (a built-in type; short names like cm work), or any other resource the\n"
	"          server serves, found by discovery at start-up: widgets.example.com,\n"
	"          widgets.v1.example.com, example.com/v1/widgets (exit 2 if it does not\n"
	"          exist). None given: the compile-time table in config/resources.def.\n"
	"\n"
	"connection (in kubectl's order: --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config;\n"
	"the flags below then override the chosen source field by field):\n"
	"  --kubeconfig PATH              kubeconfig file (YAML or JSON)\n"
	"  --context NAME                 kubeconfig context (default: current-context)\n"
	"  --server URL                   API server, https://host[:port] (http:// only if named)\n"
	"  --token-file PATH              bearer token file, re-read when it changes and after a 401\n"
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
	"  --watch-idle-timeout SECONDS   a watch that brings no byte for this long is dropped and\n"
	"                                 re-watched (default 65: the apiserver bookmarks about\n"
	"                                 every 60 s); once the server has shown its bookmark\n"
	"                                 cadence, 2 x the longest gap + 5 s, at least 30 s, and\n"
	"                                 never more than this\n"
	"  --keep-managed-fields          keep metadata.managedFields (dropped by default)\n"
	"  --once                         list every resource, write the files (--dir), run the\n"
	"                                 hooks once (--exec, --signal, --http-post) and wait for\n"
	"                                 them, exit 0; exit 1 naming the resource not synced, or\n"
	"                                 if a hook failed or was not done, within --timeout\n"
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
	"  --exec 'CMD ARGS'              after changes, run CMD (no shell; write sh -c '...' for one)\n"
	"                                 with KREFLECT_EVENTS=<count> and the changed\n"
	"                                 resource/namespace/name keys on stdin; never two at once\n"
	"  --signal SIG:PID|SIG:@PIDFILE  after changes, send SIG (HUP, USR1, ...) to a process\n"
	"  --http-post URL                after changes, POST them to http://HOST[:PORT][/PATH] as\n"
	"                                 JSON lines (application/x-ndjson), one per change:\n"
	"                                 {\"type\":\"MODIFIED\",\"resource\":\"configmaps\",\"key\":\"ns/name\",\n"
	"                                 \"resourceVersion\":\"...\"} (never object content); the first\n"
	"                                 batch adds a SYNCED line per resource; a window too big for\n"
	"                                 one batch ends in {\"type\":\"DROPPED\",\"events\":N}. Plain\n"
	"                                 HTTP only (no https://), straight to the host named: no\n"
	"                                 proxy, no redirect. Non-2xx or no answer: retried with\n"
	"                                 backoff, 5 attempts, then logged and dropped; changes\n"
	"                                 meanwhile go in the next batch (never two in flight)\n"
	"  --debounce MS                  batch changes for MS milliseconds into one notification\n"
	"                                 (default 1000); nothing fires before the first full sync\n"
	"  -o, --output jsonl|none        default jsonl on stdout:\n"
	"        {\"type\":\"ADDED|MODIFIED|DELETED|RESYNC\",\"object\":{...}}\n"
	"        {\"type\":\"SYNCED\",\"resource\":\"...\",\"resourceVersion\":\"...\",\"count\":N}\n"
	"  -v, --verbosity N              0 errors and warnings, 1 info (default), 2 debug, 3 trace\n"
	"supervisor mode (kreflect [flags] [RESOURCE ...] -- PROGRAM [ARGS ...]):\n"
	"  PROGRAM (looked up on PATH unless it has a /; no shell) starts after the first\n"
	"  complete sync, with the files written. kreflect passes SIGTERM, SIGINT, SIGHUP,\n"
	"  SIGUSR1 and SIGUSR2 on to it, reaps every orphan when it is PID 1, and when\n"
	"  PROGRAM ends, stops and exits with PROGRAM's exit code (128+N after signal N).\n"
	"  SIGTERM before the first sync just stops kreflect (exit 0).\n"
	"  --child-signal SIG             sent to PROGRAM after changes (default HUP)\n"
	"  --on-change signal|restart     restart: SIGTERM, --grace, SIGKILL, start again\n"
	"  --grace SECONDS                after SIGTERM, before SIGKILL (default 10)\n"
	"other:\n"
	"  --print-budget                 print the static memory the capacities reserve\n"
	"  --version                      print version, target, mbedTLS version and capacities\n"
	"  -h, --help                     this help\n"
	"\n"
	"Logs go to stderr, one line each. Secrets and tokens are never logged.\n"
	"\n"
	"environment:\n"
	"  KUBECONFIG                     kubeconfig files separated by ':' (merged, first wins)\n"
	"  KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT\n"
	"                                 in a pod: connect to the API server in-cluster with the\n"
	"                                 service account's token, CA and namespace\n"
	"  KREFLECT_SERVICEACCOUNT_DIR    where the service account files are\n"
	"                                 (default /var/run/secrets/kubernetes.io/serviceaccount)\n"
	"  HOME                           for ~/.kube/config\n"
	"  HTTPS_PROXY, https_proxy       http://[user:pass@]host[:port] proxy for the API server\n"
	"                                 (HTTP CONNECT; TLS still verified end to end); the\n"
	"                                 cluster's proxy-url wins over it; only http:// proxies\n"
	"  NO_PROXY, no_proxy             comma-separated hosts reached directly: *, name (and\n"
	"                                 its subdomains), .domain (subdomains), IP, CIDR;\n"
	"                                 localhost and loopback IPs never use HTTPS_PROXY\n"
	"\n"
	"exit codes:\n"
	"  0  clean stop (SIGTERM/SIGINT), --once finished, --help/--version/--print-budget\n"
	"  1  fatal error at run time (--once: not synced within --timeout, or a hook failed)\n"
	"  2  usage or configuration error (the message names the flag)\n"
	"  supervisor mode: PROGRAM's exit code (128+N if signal N ended it); 126 if PROGRAM\n"
	"  could not be run, 127 if it was not found\n";

struct options {
	const char *kubeconfig;
	const char *context;
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
	struct kr_notify_opts notify;
	const char *http_post;
	struct kr_supervise_opts sup;
	const char *sup_flag;          /* a supervisor flag given (needs -- PROGRAM) */
};

static void print_version(void)
{
	kr_dprintf(1, "kreflect %s\n", KR_VERSION);
	kr_dprintf(1, "target: %s (linux, static)\n", kr_target());
	kr_dprintf(1, "mbedTLS: %s\n", MBEDTLS_VERSION_STRING);
	kr_dprintf(1, "capacities: resources=%u objects=%u arena=%u max-object=%u "
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
		kr_dprintf(1, "%-14s %10zu  %s\n", it[i].name, it[i].bytes, it[i].why);
	kr_dprintf(1, "%-14s %10zu  bytes of static memory (.data + .bss) reserved; pages never\n"
	       "%-14s %10s  touched (most of the arena, until it fills) cost no RAM\n",
	       "total", kr_budget_total(), "", "");
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	char msg[512];

	va_start(ap, fmt);
	kr_vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	kr_dprintf(2, "kreflect: %s (see --help)\n", msg);
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
		kr_dprintf(2, "kreflect: %s %s: the PEM files together exceed %u bytes\n", flag, path,
			(unsigned)KR_PEM_MAX);
		return NULL;
	}
	n = kr_port_read_file(path, pem + *used, sizeof(pem) - *used - 1);
	if (n < 0) {
		kr_dprintf(2, "kreflect: %s %s: unable to read: %s\n", flag, path,
			n == KR_ETOOBIG ? "larger than KR_PEM_MAX" : kr_port_last_error());
		return NULL;
	}
	pem[*used + (size_t)n] = '\0';
	*len = (size_t)n;
	*used += (size_t)n + 1;
	return pem + *used - (size_t)n - 1;
}

static void on_signal(struct kr_loop *l, int sig, void *arg)
{
	(void)arg;
	if (sig == SIGCHLD) {
		int pid, code;

		/* Every child that ended, also orphans handed to us as PID 1 (and name
		 * lookups, whose owner finds them reaped): each to its owner, if any. */
		while ((pid = kr_port_reap(&code)) > 0) {
			if (notify_on && kr_notify_child_exited(&notify, pid, code))
				continue;
			if (sup_on && kr_supervise_child_exited(&sup, pid, code))
				continue;
			kr_log(KR_LOG_DEBUG, "reaped pid %d (exit %d)", pid, code);
		}
		return;
	}
	/* The supervised program takes the signal while it runs; kreflect ends with it. */
	if (sup_on && kr_supervise_signal(&sup, sig))
		return;
	if (sig == SIGTERM || sig == SIGINT) {
		kr_log(KR_LOG_INFO, "stopping on signal %d", sig);
		kr_reflect_stop(&top);
		l->stop = 1;
	}
}

/* The outputs main can add: --dir, --exec/--signal, --http-post, -- PROGRAM, JSON lines. */
#define MAIN_SINKS 5
_Static_assert(KR_MAX_SINKS >= MAIN_SINKS, "every output main can add needs a sink slot");

/* Adds an output; a full table would drop events silently, so it is fatal. */
static int add_sink(void (*event)(void *arg, const struct kr_event *ev), void *arg)
{
	struct kr_sink sink = { event, arg };

	if (kr_reflect_add_sink(&top, &sink) == 0)
		return 0;
	kr_dprintf(2, "kreflect: too many outputs for KR_MAX_SINKS (%d)\n", KR_MAX_SINKS);
	return -1;
}

static int once_failed;
static int once_hooks;                 /* --once: synced; the hooks are running */

/* The supervised program ended (or could not start): so does kreflect. */
static void on_program_end(void *arg)
{
	(void)arg;
	kr_reflect_stop(&top);
	loop.stop = 1;
}

static void on_once_timeout(struct kr_loop *l, struct kr_timer *t)
{
	int i;

	(void)t;
	for (i = 0; i < top.nrefl; i++)
		if (!top.refl[i].synced)
			kr_log(KR_LOG_ERROR, "unable to sync %s within the --timeout: %s", top.refl[i].res.name,
			       top.refl[i].conn.reason[0] ? top.refl[i].conn.reason : "no answer");
	if (once_hooks && notify_on && notify.child) {
		kr_log(KR_LOG_ERROR, "--once: %s (pid %d) still running at the --timeout: stopping it",
		       notify.argv[0], notify.child);
		kr_port_kill(notify.child, SIGTERM);
	}
	if (once_hooks && post_on && kr_http_post_busy(&post))
		kr_log(KR_LOG_ERROR, "--once: the --http-post batch was not delivered within the --timeout");
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
	int i, r;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			/* The rest is the supervised program's, untouched. */
			if (i + 1 >= argc || !argv[i + 1][0])
				return usage_error("-- must be followed by a PROGRAM to run%s", "");
			if (argc - i - 1 > KR_SUPERVISE_ARGS)
				return usage_error("-- PROGRAM has more than %d words (KR_SUPERVISE_ARGS)",
						   KR_SUPERVISE_ARGS);
			o->sup.argv = (const char *const *)argv + i + 1;
			break;
		}
		if ((v = value_of(argc, argv, &i, "--kubeconfig", NULL))) {
			o->kubeconfig = v;
		} else if ((v = value_of(argc, argv, &i, "--context", NULL))) {
			o->context = v;
		} else if ((v = value_of(argc, argv, &i, "--server", NULL))) {
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
		} else if ((v = value_of(argc, argv, &i, "--exec", NULL))) {
			if (!*v)
				return usage_error("--exec needs a command%s", "");
			o->notify.exec = v;
		} else if ((v = value_of(argc, argv, &i, "--signal", NULL))) {
			char name[16];
			const char *colon = strchr(v, ':');
			size_t nl = colon ? (size_t)(colon - v) : 0;

			if (!colon || nl == 0 || nl >= sizeof(name))
				return usage_error("--signal must be SIG:PID or SIG:@PIDFILE, not '%s'", v);
			memcpy(name, v, nl);
			name[nl] = '\0';
			o->notify.signal = kr_port_signal_number(name);
			if (o->notify.signal <= 0)
				return usage_error("--signal: unknown signal '%s'", name);
			if (colon[1] == '@' && colon[2]) {
				o->notify.signal_pidfile = colon + 2;
			} else {
				long pid = parse_num(colon + 1, 1, 0x7fffffff);

				if (pid < 0)
					return usage_error("--signal: '%s' is not a pid or @pidfile", colon + 1);
				o->notify.signal_pid = (int)pid;
			}
		} else if ((v = value_of(argc, argv, &i, "--http-post", NULL))) {
			if (!*v)
				return usage_error("--http-post needs a URL%s", "");
			o->http_post = v;
		} else if ((v = value_of(argc, argv, &i, "--child-signal", NULL))) {
			o->sup.child_signal = kr_port_signal_number(v);
			if (o->sup.child_signal <= 0)
				return usage_error("--child-signal: unknown signal '%s'", v);
			o->sup_flag = "--child-signal";
		} else if ((v = value_of(argc, argv, &i, "--on-change", NULL))) {
			if (strcmp(v, "signal") == 0)
				o->sup.restart = 0;
			else if (strcmp(v, "restart") == 0)
				o->sup.restart = 1;
			else
				return usage_error("--on-change must be signal or restart, not '%s'", v);
			o->sup_flag = "--on-change";
		} else if ((v = value_of(argc, argv, &i, "--grace", NULL))) {
			long n = parse_num(v, 0, 3600);

			if (n < 0)
				return usage_error("--grace must be 0 to 3600 seconds, not '%s'", v);
			o->sup.grace_ms = (int)n * 1000;
			o->sup_flag = "--grace";
		} else if ((v = value_of(argc, argv, &i, "--debounce", NULL))) {
			long n = parse_num(v, 0, 3600000);

			if (n < 0)
				return usage_error("--debounce must be 0 to 3600000 milliseconds, not '%s'", v);
			o->notify.debounce_ms = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--watch-idle-timeout", NULL))) {
			long n = parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--watch-idle-timeout must be 1 to 86400 seconds, not '%s'", v);
			o->ropts.idle_default_ms = (int)n * 1000;
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
			r = kr_resource_lookup(a, &resources[*nres], err, sizeof(err));
			if (r == KR_ENOENT) {
				/* Not built in: asked of the server once the connection is known. */
				r = kr_discovery_parse_arg(a, &resources[*nres], err, sizeof(err));
				discover_arg[*nres] = a;
			}
			if (r != 0) {
				kr_dprintf(2, "kreflect: %s\n", err);
				return EXIT_USAGE;
			}
			(*nres)++;
		}
	}
	return 0;
}

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* In a pod: the API server from the environment, the service account's files. */
static int in_cluster(const char *host, const char *port)
{
	const char *dir = getenv("KREFLECT_SERVICEACCOUNT_DIR");
	char nsfile[600];
	long n;

	if (!dir || !*dir)
		dir = SA_DIR;
	if (strchr(host, ':'))
		kr_snprintf(kcfg.server, sizeof(kcfg.server), "https://[%s]:%s", host, port);
	else
		kr_snprintf(kcfg.server, sizeof(kcfg.server), "https://%s:%s", host, port);
	kr_snprintf(kcfg.ca_file, sizeof(kcfg.ca_file), "%s/ca.crt", dir);
	kr_snprintf(kcfg.token_file, sizeof(kcfg.token_file), "%s/token", dir);
	kr_snprintf(nsfile, sizeof(nsfile), "%s/namespace", dir);
	n = kr_port_read_file(nsfile, kcfg.ns, sizeof(kcfg.ns) - 1);
	if (n < 0)
		n = 0;
	while (n > 0 && (kcfg.ns[n - 1] == '\n' || kcfg.ns[n - 1] == ' ' || kcfg.ns[n - 1] == '\r'))
		n--;
	kcfg.ns[n] = '\0';
	kr_log(KR_LOG_INFO, "connecting in-cluster to %s as the service account in %s", kcfg.server, dir);
	return 0;
}

/*
 * Where to connect and as whom, in kubectl's order: --kubeconfig, then
 * $KUBECONFIG, then in-cluster, then ~/.kube/config. Fills kcfg; flags
 * override it afterwards. Returns 0 or an exit code (message printed).
 */
static int choose_source(const struct options *o)
{
	const char *list = getenv("KUBECONFIG"), *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT"), *home = getenv("HOME");
	char err[512], path[600];
	const char *paths[1];
	struct kr_fs_stat st;
	int r;

	if (o->kubeconfig) {
		paths[0] = o->kubeconfig;
		r = kr_kubeconfig_load(&kcfg, &kwork, paths, 1, o->context, err, sizeof(err));
	} else if (list && *list) {
		r = kr_kubeconfig_load_list(&kcfg, &kwork, list, o->context, err, sizeof(err));
	} else if (host && *host && port && *port && !o->context) {
		return in_cluster(host, port);
	} else if (home && *home && kr_snprintf(path, sizeof(path), "%s/.kube/config", home) > 0 &&
		   kr_port_fs_stat(path, &st) == 0 && st.type != KR_FS_NONE) {
		paths[0] = path;
		r = kr_kubeconfig_load(&kcfg, &kwork, paths, 1, o->context, err, sizeof(err));
	} else {
		if (o->server)
			return 0;   /* flags alone */
		kr_dprintf(2, "kreflect: no API server: give --server or --kubeconfig, set KUBECONFIG, "
			"run in a pod, or create ~/.kube/config (see --help)\n");
		return EXIT_USAGE;
	}
	if (r != 0) {
		kr_dprintf(2, "kreflect: %s\n", err);
		return EXIT_USAGE;
	}
	kr_log(KR_LOG_INFO, "using kubeconfig context %s (cluster %s, user %s)", kcfg.context,
	       kcfg.cluster, kcfg.user);
	return 0;
}

/* Explicit flags win over the chosen source, field by field. */
static int apply_flags(const struct options *o)
{
	if (o->server)
		kr_snprintf(kcfg.server, sizeof(kcfg.server), "%s", o->server);
	if (o->ca_file) {
		kr_snprintf(kcfg.ca_file, sizeof(kcfg.ca_file), "%s", o->ca_file);
		kcfg.ca_data = NULL;
		kcfg.ca_data_len = 0;
		kcfg.insecure_skip_tls_verify = 0;
	}
	if (o->cert_file || o->key_file) {
		kr_snprintf(kcfg.cert_file, sizeof(kcfg.cert_file), "%s", o->cert_file ? o->cert_file : "");
		kr_snprintf(kcfg.key_file, sizeof(kcfg.key_file), "%s", o->key_file ? o->key_file : "");
		kcfg.cert_data = kcfg.key_data = NULL;
		kcfg.cert_data_len = kcfg.key_data_len = 0;
	}
	if (o->token_file) {
		kr_snprintf(kcfg.token_file, sizeof(kcfg.token_file), "%s", o->token_file);
		memset(kcfg.token, 0, sizeof(kcfg.token));
	}
	if (o->insecure)
		kcfg.insecure_skip_tls_verify = 1;
	if (o->ns)
		kr_snprintf(kcfg.ns, sizeof(kcfg.ns), "%s", o->ns);
	if (kcfg.username[0] && !kcfg.token[0] && !kcfg.token_file[0] && !kcfg.cert_file[0] &&
	    !kcfg.cert_data) {
		kr_dprintf(2, "kreflect: user %s uses basic auth (username/password), which kreflect "
			"does not support: use a token, a token file or a client certificate\n", kcfg.user);
		return EXIT_USAGE;
	}
	/* The proxy (kubeconfig proxy-url, HTTPS_PROXY, NO_PROXY) is chosen by
	 * use_proxy() once the server's host is known. */
	return 0;
}

/*
 * As client-go: the cluster's proxy-url always; else HTTPS_PROXY (then
 * https_proxy) unless the host is loopback or matches NO_PROXY (then
 * no_proxy). Plain http:// servers are tunnelled too (client-go would send
 * absolute-form requests; CONNECT works with every proxy that allows it).
 * Returns 0 or an exit code (message printed).
 */
static int use_proxy(struct kr_conn_cfg *cfg)
{
	const char *url = kr_proxy_choose(kcfg.proxy_url, getenv("HTTPS_PROXY"), getenv("https_proxy"),
					  getenv("NO_PROXY"), getenv("no_proxy"), cfg->host);
	const char *from = url == kcfg.proxy_url ? "the cluster's proxy-url" : "HTTPS_PROXY";
	char shown[KR_KUBECONFIG_URL_MAX], err[200];

	if (!url) {
		if ((getenv("HTTPS_PROXY") && *getenv("HTTPS_PROXY")) ||
		    (getenv("https_proxy") && *getenv("https_proxy")))
			kr_log(KR_LOG_INFO, "connecting to %s directly (NO_PROXY or loopback)", cfg->host);
		return 0;
	}
	kr_proxy_redact(url, shown, sizeof(shown));
	if (kr_proxy_parse(&proxy, url, err, sizeof(err)) != 0) {
		kr_dprintf(2, "kreflect: unable to use the proxy %s from %s: %s\n", shown, from, err);
		return EXIT_USAGE;
	}
	cfg->proxy = &proxy;
	kr_log(KR_LOG_INFO, "connecting to %s through the proxy %s (from %s%s)", cfg->host, shown,
	       from, proxy.auth[0] ? ", with credentials" : "");
	return 0;
}

#define DISCOVERY_TIMEOUT_MS 15000

/*
 * Resolves the names parse_flags left for discovery, before the store exists:
 * its arena is the scratch (connection, tokens, response body). Returns 0 or
 * an exit code: EXIT_USAGE when a resource does not exist, EXIT_FATAL when
 * the server could not tell.
 */
static int discover(const struct kr_conn_cfg *cfg, int nres)
{
	struct kr_discovery_work w;
	char err[512];
	size_t off, tokbytes;
	int i, r;

	off = (sizeof(struct kr_conn) + 15u) & ~(size_t)15u;
	tokbytes = (size_t)KR_JSON_TOKENS * sizeof(kr_json_tok);
	if (off + tokbytes + 65536u > sizeof(arena))
		tokbytes = (sizeof(arena) - off) / 2 / sizeof(kr_json_tok) * sizeof(kr_json_tok);
	w.conn = (struct kr_conn *)(void *)arena;
	w.toks = (kr_json_tok *)(void *)(arena + off);
	w.ntoks = (int)(tokbytes / sizeof(kr_json_tok));
	w.body = arena + off + tokbytes;
	w.cap = sizeof(arena) - off - tokbytes;
	for (i = 0; i < nres; i++) {
		if (!discover_arg[i])
			continue;
		kr_loop_init(&loop);
		r = kr_discovery_resolve(&loop, cfg, kr_auth_token(&auth), &w, discover_arg[i],
					 &resources[i], DISCOVERY_TIMEOUT_MS, err, sizeof(err));
		if (r != 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return r == KR_ENOENT ? EXIT_USAGE : EXIT_FATAL;
		}
		discover_arg[i] = NULL;
	}
	/* The store starts over the scratch: untouched pages stay untouched. */
	return 0;
}

/*
 * --once after the sync: the hooks once, now, and the loop until they are
 * done (the --timeout still counts). Returns the exit code.
 */
static int run_hooks_once(void)
{
	once_hooks = 1;
	loop.stop = 0;
	if (notify_on)
		kr_notify_flush(&notify);
	if (post_on)
		kr_http_post_flush(&post);
	while (!loop.stop && ((notify_on && notify.child) || (post_on && kr_http_post_busy(&post))))
		if (kr_loop_once(&loop, -1) < 0) {
			kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
			return EXIT_FATAL;
		}
	if (once_failed)
		return EXIT_FATAL;
	if (loop.stop)
		return 0;      /* SIGTERM while the hooks ran: a clean stop */
	if (notify_on && notify.failures) {
		if (notify.argv[0] && notify.last_exit)
			kr_log(KR_LOG_ERROR, "--once: the --exec command %s exited with %d",
			       notify.argv[0], notify.last_exit);
		else
			kr_log(KR_LOG_ERROR, "--once: the hook failed (see above)");
		return EXIT_FATAL;
	}
	if (post_on && post.batches_dropped) {
		kr_log(KR_LOG_ERROR, "--once: the --http-post batch could not be delivered");
		return EXIT_FATAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	struct kr_conn_cfg cfg;
	struct kr_tls_opts topts;
	struct kr_timer once_timer;
	char err[256];
	size_t used = 0, ndef, i;
	int nres = 0, plain = 0, r;

	for (i = 1; i < (size_t)argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			print_version();
			return 0;
		}
		if (strcmp(argv[i], "--print-budget") == 0) {
			print_budget();
			return 0;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			struct kr_iov iov = { usage, sizeof(usage) - 1 };

			kr_port_writev_all(1, &iov, 1);
			return 0;
		}
	}
	memset(&o, 0, sizeof(o));
	o.verbosity = 1;
	o.timeout_s = 60;
	o.notify.debounce_ms = 1000;
	o.sup.child_signal = SIGHUP;
	o.sup.grace_ms = 10000;
	kr_reflector_opts_default(&o.ropts);
	r = parse_flags(argc, argv, &o, &nres);
	if (r)
		return r;
	if (o.sup_flag && !o.sup.argv)
		return usage_error("%s is for supervisor mode: give -- PROGRAM [ARGS ...] last", o.sup_flag);
	if (o.once && o.sup.argv)
		return usage_error("--once and -- PROGRAM exclude each other: --once exits after one "
				   "sync%s", "");
	kr_log_set_level(o.verbosity == 0 ? KR_LOG_WARN : o.verbosity == 1 ? KR_LOG_INFO
			 : o.verbosity == 2 ? KR_LOG_DEBUG : KR_LOG_TRACE);
	o.ropts.once = o.once;

	memset(&cfg, 0, sizeof(cfg));
	r = choose_source(&o);
	if (r == 0)
		r = apply_flags(&o);
	if (r)
		return r;
	if (parse_server(kcfg.server, &cfg, &plain) != 0) {
		if (o.server)
			return usage_error("--server must be https://HOST[:PORT] (IPv6 in brackets), not '%s'",
					   o.server);
		kr_dprintf(2, "kreflect: cluster %s: server '%s' is not https://HOST[:PORT]\n",
			kcfg.cluster, kcfg.server);
		return EXIT_USAGE;
	}
	if (kcfg.tls_server_name[0])
		kr_snprintf(cfg.server_name, sizeof(cfg.server_name), "%s", kcfg.tls_server_name);
	r = use_proxy(&cfg);
	if (r)
		return r;

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
		if (kcfg.ns[0] && (o.ns || !res->ns[0]))
			kr_snprintf(res->ns, sizeof(res->ns), "%s", kcfg.ns);
		else if (!res->ns[0])
			kr_snprintf(res->ns, sizeof(res->ns), "default");
		if (o.label_selector)
			kr_snprintf(res->label_selector, sizeof(res->label_selector), "%s", o.label_selector);
		if (o.field_selector)
			kr_snprintf(res->field_selector, sizeof(res->field_selector), "%s", o.field_selector);
	}

	if (kr_tls_global_init() != 0) {
		kr_dprintf(2, "kreflect: unable to start TLS\n");
		return EXIT_FATAL;
	}
	kr_auth_init(&auth);
	if (kcfg.token[0]) {
		memcpy(auth.token, kcfg.token, sizeof(auth.token));
	} else if (kcfg.token_file[0]) {
		r = kr_auth_set_file(&auth, kcfg.token_file);
		if (r != 0) {
			kr_dprintf(2, "kreflect: token file %s: unable to read: %s\n", kcfg.token_file,
				r == KR_EINVAL ? "empty or more than one line" : kr_strerror(r));
			return EXIT_USAGE;
		}
	}
	if (!plain) {
		memset(&topts, 0, sizeof(topts));
		topts.insecure_skip_verify = kcfg.insecure_skip_tls_verify;
		if (kcfg.ca_data) {
			topts.ca = kcfg.ca_data;
			topts.ca_len = kcfg.ca_data_len;
		} else if (kcfg.ca_file[0] &&
			   !(topts.ca = load_pem("certificate-authority", kcfg.ca_file, &used, &topts.ca_len))) {
			return EXIT_USAGE;
		}
		if (kcfg.cert_data) {
			topts.cert = kcfg.cert_data;
			topts.cert_len = kcfg.cert_data_len;
		} else if (kcfg.cert_file[0] &&
			   !(topts.cert = load_pem("client-certificate", kcfg.cert_file, &used, &topts.cert_len))) {
			return EXIT_USAGE;
		}
		if (kcfg.key_data) {
			topts.key = kcfg.key_data;
			topts.key_len = kcfg.key_data_len;
		} else if (kcfg.key_file[0] &&
			   !(topts.key = load_pem("client-key", kcfg.key_file, &used, &topts.key_len))) {
			return EXIT_USAGE;
		}
		kr_tls_ctx_init(&tls_ctx);
		if (kr_tls_ctx_setup(&tls_ctx, &topts, err, sizeof(err)) != 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return EXIT_USAGE;
		}
		/* The key's bytes are not needed any more: do not keep them around. */
		memset(pem, 0, used);
		kr_kubeconfig_wipe(&kcfg, &kwork);
		cfg.tls = &tls_ctx;
	} else {
		kr_log(KR_LOG_WARN, "server %s is plain HTTP: nothing is encrypted or verified", kcfg.server);
	}

	r = discover(&cfg, nres);
	if (r)
		return r;
	kr_store_init(&store, arena, sizeof(arena), entries, KR_MAX_OBJECTS, buckets,
		      KR_STORE_BUCKETS, KR_STORE_RESERVE);
	kr_loop_init(&loop);
	if (kr_loop_signals(&loop, on_signal, NULL) != 0) {
		kr_dprintf(2, "kreflect: unable to set up signal handling\n");
		return EXIT_FATAL;
	}
	r = kr_reflect_init(&top, &loop, &store, &cfg, &o.ropts, reflectors, resources, nres);
	if (r != 0) {
		kr_dprintf(2, "kreflect: unable to set up the reflector: %s\n", kr_strerror(r));
		return EXIT_FATAL;
	}
	top.auth = &auth;
	if (o.dir.path) {
		if (kr_dirsink_init(&dirsink, &o.dir, err, sizeof(err)) != 0) {
			kr_dprintf(2, "kreflect: --dir %s: %s\n", o.dir.path, err);
			return EXIT_USAGE;
		}
		if (add_sink(kr_dirsink_event, &dirsink) != 0)
			return EXIT_FATAL;
	}
	if (o.notify.exec || o.notify.signal) {
		o.notify.resources = nres;
		if (kr_notify_init(&notify, &loop, &o.notify, err, sizeof(err)) != 0)
			return usage_error("--exec: %s", err);
		/* After the files: a notification means they are in place. */
		if (add_sink(kr_notify_event, &notify) != 0)
			return EXIT_FATAL;
		notify_on = 1;
	}
	if (o.http_post) {
		if (kr_http_post_init(&post, &loop, o.http_post, o.notify.debounce_ms, nres, err,
				      sizeof(err)) != 0)
			return usage_error("--http-post: %s", err);
		if (!kr_http_post_loopback(&post))
			kr_log(KR_LOG_WARN, "--http-post to %s: not a loopback address; the changed keys "
			       "travel unencrypted", post.url);
		if (add_sink(kr_http_post_event, &post) != 0)
			return EXIT_FATAL;
		post_on = 1;
	}
	if (o.sup.argv) {
		o.sup.debounce_ms = o.notify.debounce_ms;
		o.sup.resources = nres;
		o.sup.on_end = on_program_end;
		if (kr_supervise_init(&sup, &loop, &o.sup, err, sizeof(err)) != 0)
			return usage_error("-- PROGRAM: %s", err);
		/* After the files and hooks: the program starts with everything in place. */
		if (add_sink(kr_supervise_event, &sup) != 0)
			return EXIT_FATAL;
		sup_on = 1;
	}
	if (!o.output_none) {
		kr_jsonl_init(&jsonl, 1);
		if (add_sink(kr_jsonl_event, &jsonl) != 0)
			return EXIT_FATAL;
		kr_loop_before_poll(&loop, kr_jsonl_flush, &jsonl);
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
	kr_reflect_stop(&top);
	if (!o.output_none)
		kr_jsonl_flush(&jsonl);
	if (o.once && !once_failed && top.synced_count == top.nrefl)
		return run_hooks_once();
	if (sup_on && sup.state == KR_SUP_ENDED)
		return sup.start_error == KR_ENOENT ? EXIT_NOT_FOUND
		       : sup.start_error ? EXIT_CANNOT_RUN : sup.code;
	return once_failed ? EXIT_FATAL : 0;
}
