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

#include "budget.h"
#include "client.h"
#include "fmt.h"
#include "http_post.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "log.h"
#include "loop.h"
#include "mbedtls/build_info.h"
#include "notify.h"
#include "serve.h"
#include "sidecar_env.h"
#include "sink.h"
#include "sink_dir.h"
#include "state.h"
#include "supervise.h"

#define EXIT_FATAL 1
#define EXIT_USAGE 2
#define EXIT_CANNOT_RUN 126            /* as a shell: found but could not be run */
#define EXIT_NOT_FOUND 127

/* The client lives in memory reserved once at start-up (--print-budget). */
static struct kr_client *client;
static struct kr_loop *loop;
static struct kr_jsonl jsonl;
static struct kr_dirsink dirsink;
static struct kr_notify notify;
static int notify_on;
static struct kr_http_post post;
static int post_on;
static struct kr_supervise sup;
static int sup_on;
static const char *resource_args[KR_MAX_RESOURCES];
/* The local endpoint's memory: its state, then KR_SERVE_MAX_CONNS connections. */
static char serve_mem[sizeof(struct kr_serve) + 16 + KR_SERVE_MAX_CONNS * sizeof(struct kr_serve_conn) + 16]
	__attribute__((aligned(16)));

#define KR_STR_(x) #x
#define KR_STR(x) KR_STR_(x)

/*
 * With the inflater built in, the long text below is compiled as gzip bytes
 * instead (7 KB less): the Makefile runs this file through the preprocessor
 * with KR_HELP_EXTRACT and tests/tools/help_gz.py makes usage_gz.h of it.
 */
#if KR_WITH_FULL_HELP && KR_WITH_GZIP && !defined(KR_HELP_EXTRACT)
#define KR_HELP_GZ 1
#include "help.h"
#include "usage_gz.h"
#else
#define KR_HELP_GZ 0
#endif

#if KR_WITH_FULL_HELP && !KR_HELP_GZ
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
	"  --gzip on|off                  ask for gzip LIST bodies (default on; watches are never\n"
	"                                 compressed); a corrupt one turns it off for the server\n"
	"  --resync SECONDS               re-deliver every object as RESYNC this often (default off)\n"
	"  --initial-events-timeout SECONDS  quiet time before giving up on watch-list (default 30)\n"
	"  --watch-idle-timeout SECONDS   a watch that brings no byte for this long is dropped and\n"
	"                                 re-watched (default 65: the apiserver bookmarks about\n"
	"                                 every 60 s); once the server has shown its bookmark\n"
	"                                 cadence, 2 x the longest gap + 5 s, at least 30 s, and\n"
	"                                 never more than this\n"
	"  --keep-managed-fields          keep metadata.managedFields (dropped by default)\n"
	"memory (reserved once at start-up; --print-budget shows the total):\n"
	"  --max-objects N                objects indexed over all resources (default 16384)\n"
	"  --arena-bytes B                bytes of objects held (default 32M; K, M, G suffixes)\n"
	"  --memory B                     one budget for both: an index slot per 512 bytes,\n"
	"                                 the rest for objects (the two above override it)\n"
	"                                 Objects that do not fit are named in an error line, and\n"
	"                                 SYNCED says \"partial\":true (--once: exit 1)\n"
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
	"  --dir-sync batch|each          batch (default): the files of a loop pass made durable\n"
	"                                 with one file system sync before their renames and one\n"
	"                                 after; each: fsync of every file and directory in turn\n"
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
	"state (warm restart, offline start):\n"
	"  --state-dir PATH               keep snapshots of the mirror in PATH (mode 0700; the\n"
	"                                 file is 0600): a restart watches from where it stopped,\n"
	"                                 with no list, and only the changes made meanwhile reach\n"
	"                                 the outputs (default off; a firmware build may set\n"
	"                                 KR_STATE_DIR_DEFAULT; \"\" turns it off)\n"
	"  --state-sync child|inline      child (default): each state write's fsync and rename in a\n"
	"                                 short-lived child process, the watches served meanwhile;\n"
	"                                 inline: inside the loop\n"
	"  --state-interval SECONDS       at most one snapshot per interval, none while nothing\n"
	"                                 changed, one more at a clean stop (default 60)\n"
	"  --max-stale SECONDS            when the server cannot be reached at start, a restored\n"
	"                                 mirror younger than this counts as synced: files in\n"
	"                                 place, PROGRAM started, --once succeeds (default off)\n"
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
	"k8s-sidecar mode:\n"
	"  --k8s-sidecar                  configuration from kiwigrid k8s-sidecar's environment\n"
	"                                 variables (LABEL, FOLDER, NAMESPACE, RESOURCE, METHOD,\n"
	"                                 REQ_URL, SCRIPT, ...; see README), files in its layout;\n"
	"                                 also when run under the name k8s-sidecar. Arguments then:\n"
	"                                 --req-username-file PATH, --req-password-file PATH only\n"
	"local endpoint (off unless --listen is given):\n"
	"  --listen ADDR                  serve /healthz, /readyz, /metrics and a read-only\n"
	"                                 Kubernetes API of the mirror (kubectl --server) on\n"
	"                                 127.0.0.1:PORT, [::1]:PORT or unix:/PATH (mode 0600);\n"
	"                                 another IP:PORT only with a token or client CA, and\n"
	"                                 TLS or --listen-insecure\n"
	"  --listen-token-file PATH       clients must send Authorization: Bearer <the file's\n"
	"                                 token>, or of one of its token,user lines (constant-\n"
	"                                 time compare)\n"
	"  --listen-access-file PATH      what each user may read: lines of 'USER NAMESPACES\n"
	"                                 RESOURCES' (comma lists or *; secrets only if named);\n"
	"                                 both files are re-read within 10 s of a change, and\n"
	"                                 open watches that lose access end with a 401/403\n"
	"  --listen-cert-file PATH        serve TLS 1.2/1.3 with this certificate (chain, PEM)\n"
	"  --listen-key-file PATH         and its key (both re-read when they change)\n"
	"  --listen-client-ca-file PATH   clients may authenticate by a certificate it signed\n"
	"  --listen-insecure              allow a non-loopback address without TLS (logged)\n"
	"  --listen-max-conns N           local connections at once (default and most: "
	KR_STR(KR_SERVE_MAX_CONNS) ")\n"
	"  --serve-secrets                serve mirrored Secrets too (403 otherwise)\n"
	"  --listen-health-only           serve /healthz, /livez and /readyz only (404 for the\n"
	"                                 rest), on any IP:PORT without a token: kubelet probes\n"
	"  --readyz-max-silence SECONDS   /readyz fails for a resource whose API server sent\n"
	"                                 nothing for this long (default 180)\n"
	"  --listen-idle-timeout SECONDS  a request head must arrive within this, and an answer\n"
	"                                 (not a watch) be read within twice this (default 30)\n"
	"  --listen-bookmark-interval SECONDS  BOOKMARK events to local watches that ask\n"
	"                                 (default 60)\n"
	"least privilege (after start-up: files, certificates and the socket open):\n"
	"  --sandbox auto|on|off          auto (default): no_new_privs, Landlock (read the\n"
	"                                 token files only, write only --dir and --state-dir,\n"
	"                                 TCP only to the ports in use) and a system-call allow\n"
	"                                 list, as far as the kernel has them (one log line\n"
	"                                 says which); off with --exec or -- PROGRAM, which\n"
	"                                 would inherit it; on: all of it (also for them) or\n"
	"                                 an error\n"
	"  --user USER, --group GROUP     become this user and group (names or numbers); the\n"
	"                                 directories written must be writable by them\n"
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
#elif !KR_WITH_FULL_HELP
/* A smaller build (config/README.md "Leaving features out"): the full text is 15 KB. */
static const char usage[] =
	"usage: kreflect [flags] [RESOURCE ...]\n"
	"a smaller build of kreflect: the flags are those of the README's full build, less\n"
	"those it leaves out (they say \"not built into this kreflect\"); kreflect --version\n"
	"names the build. exit codes: 0 clean stop or --once done, 1 fatal error at run\n"
	"time, 2 usage or configuration error\n";
#endif

struct options {
	struct kr_config cfg;          /* connection, what, how, capacities */
	int output_none;
	int verbosity;
	int once;
	int timeout_s;
	struct kr_dirsink_opts dir;
	int dir_sync_each;             /* --dir-sync each: an fsync per file, inside the event */
	struct kr_notify_opts notify;
	const char *http_post;
	const struct kr_http_post_opts *post_opts;  /* NULL: --http-post's own */
	int sidecar;                   /* --k8s-sidecar: configured from the environment */
	int log_level;                 /* >= 0: set directly (k8s-sidecar's LOG_LEVEL) */
	struct kr_supervise_opts sup;
	const char *sup_flag;          /* a supervisor flag given (needs -- PROGRAM) */
	struct kr_serve_opts serve;
	enum kr_sandbox_mode sandbox;  /* --sandbox auto|on|off */
	const char *user, *group;      /* --user, --group: names or numbers */
};

static void print_version(void)
{
	/* What a smaller build (config/README.md "Leaving features out") leaves out,
	 * so that a device can tell. */
	static const struct {
		int on;
		const char *name;
	} feature[] = {
		{ KR_WITH_LISTEN, "listen" }, { KR_WITH_SIDECAR, "sidecar" }, { KR_WITH_STATE, "state" },
		{ KR_WITH_PROXY, "proxy" }, { KR_WITH_DISCOVERY, "discovery" }, { KR_WITH_HOOKS, "hooks" },
		{ KR_WITH_DIR, "dir" }, { KR_WITH_KUBECONFIG, "kubeconfig" }, { KR_WITH_DNS, "dns" },
		{ KR_WITH_FULL_HELP, "full_help" }, { KR_WITH_GZIP, "gzip" }, { KR_WITH_SANDBOX, "sandbox" },
	};
	size_t i, out = 0;

	kr_dprintf(1, "kreflect %s\n", KR_VERSION);
	kr_dprintf(1, "target: %s (linux, static)\n", kr_target());
	kr_dprintf(1, "mbedTLS: %s\n", MBEDTLS_VERSION_STRING);
	kr_dprintf(1, "capacities: resources=%u objects=%u (ceiling %u) arena=%u max-object=%u "
	       "json-tokens=%u connections=%u tls-heap=%u\n",
	       (unsigned)KR_MAX_RESOURCES, (unsigned)KR_MAX_OBJECTS, (unsigned)KR_MAX_OBJECTS_CEILING,
	       (unsigned)KR_ARENA_BYTES, (unsigned)KR_MAX_OBJECT_BYTES,
	       (unsigned)KR_JSON_TOKENS, (unsigned)KR_MAX_CONNS,
	       (unsigned)KR_TLS_HEAP_SIZE);
	for (i = 0; i < sizeof(feature) / sizeof(feature[0]); i++)
		if (!feature[i].on)
			kr_dprintf(1, "%s%s", out++ ? " " : "left out (WITHOUT): ", feature[i].name);
	if (out)
		kr_dprintf(1, "\n");
}

/* The budget for the capacities the flags chose. Returns an exit code. */
static int print_budget(const struct kr_config *cfg)
{
	struct kr_budget_item it[KR_BUDGET_ITEMS];
	size_t n, i, objects, arena, fixed = 0, reserved = 0;

	if (kr_client_capacities_for(cfg, &objects, &arena) != 0) {
		kr_dprintf(2, "kreflect: --max-objects, --arena-bytes or --memory out of range (see --help)\n");
		return EXIT_USAGE;
	}
	n = kr_budget_items(it, KR_BUDGET_ITEMS, objects, arena);
	for (i = 0; i < n && i < KR_BUDGET_ITEMS; i++) {
		kr_dprintf(1, "%-14s %10zu  %s\n", it[i].name, it[i].bytes, it[i].why);
		if (it[i].reserved)
			reserved += it[i].bytes;
		else
			fixed += it[i].bytes;
	}
	kr_dprintf(1, "%-14s %10zu  bytes reserved once at start-up for %zu objects and a %zu-byte arena\n"
		   "%-14s %10s  (--max-objects, --arena-bytes, --memory); untouched pages cost no RAM\n",
		   "reserved", reserved, objects, arena, "", "");
	kr_dprintf(1, "%-14s %10zu  arena bytes per object slot: the average stored size assumed\n",
		   "per-object", arena / (objects ? objects : 1));
	kr_dprintf(1, "%-14s %10zu  bytes of static memory (.data + .bss)\n", "static", fixed);
	kr_dprintf(1, "%-14s %10zu  bytes in all\n", "total", fixed + reserved);
	return 0;
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
		kr_client_stop(client);
	}
}

/* The outputs main can add: --dir, --exec/--signal, --http-post, -- PROGRAM, --listen, JSON lines. */
#define MAIN_SINKS 6
_Static_assert(KR_CLIENT_MAX_CALLBACKS >= MAIN_SINKS, "every output main can add needs a callback slot");

/* Adds an output; a full table would drop events silently, so it is fatal. */
static int add_sink(void (*event)(void *arg, const struct kr_event *ev), void *arg)
{
	if (kr_client_on_event(client, event, arg) == 0)
		return 0;
	kr_dprintf(2, "kreflect: too many outputs for KR_CLIENT_MAX_CALLBACKS (%d)\n", KR_CLIENT_MAX_CALLBACKS);
	return -1;
}

static int once_failed;
static int once_hooks;                 /* --once: synced; the hooks are running */

/* The supervised program ended (or could not start): so does kreflect. */
static void on_program_end(void *arg)
{
	(void)arg;
	kr_client_stop(client);
}

static void on_once_timeout(struct kr_loop *l, struct kr_timer *t)
{
	struct kr_status st;
	int i, n = kr_client_resources(client);

	(void)l;
	(void)t;
	for (i = 0; i < n; i++)
		if (kr_client_status(client, i, &st) == 0 && !st.synced)
			kr_log(KR_LOG_ERROR, "unable to sync %s within the --timeout: %s", st.resource,
			       st.reason[0] ? st.reason : "no answer");
	if (once_hooks && notify_on && notify.child) {
		kr_log(KR_LOG_ERROR, "--once: %s (pid %d) still running at the --timeout: stopping it",
		       notify.argv[0], notify.child);
		kr_port_kill(notify.child, SIGTERM);
	}
	if (once_hooks && post_on && kr_http_post_busy(&post))
		kr_log(KR_LOG_ERROR, "--once: the --http-post batch was not delivered within the --timeout");
	once_failed = 1;
	kr_client_stop(client);
	loop->stop = 1;
}

/* A byte count with an optional K, M or G (binary) suffix; 0 if it is not one. */
static unsigned long long parse_bytes(const char *s)
{
	unsigned long long v, mul = 1;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return 0;
	v = (unsigned long long)kr_strtoll(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		mul = 1024ull;
	else if (*end == 'M' || *end == 'm')
		mul = 1024ull * 1024u;
	else if (*end == 'G' || *end == 'g')
		mul = 1024ull * 1024u * 1024u;
	else if (*end)
		return 0;
	if (mul > 1 && end[1])
		return 0;
	if (v > (1ull << 40) / mul)
		return 0;
	return v * mul;
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
	const char *v;
	int i;

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
			o->cfg.kubeconfig = v;
		} else if ((v = value_of(argc, argv, &i, "--context", NULL))) {
			o->cfg.context = v;
		} else if ((v = value_of(argc, argv, &i, "--server", NULL))) {
			o->cfg.server = v;
		} else if ((v = value_of(argc, argv, &i, "--token-file", NULL))) {
			o->cfg.token_file = v;
		} else if ((v = value_of(argc, argv, &i, "--certificate-authority", NULL))) {
			o->cfg.ca_file = v;
		} else if ((v = value_of(argc, argv, &i, "--client-certificate", NULL))) {
			o->cfg.cert_file = v;
		} else if ((v = value_of(argc, argv, &i, "--client-key", NULL))) {
			o->cfg.key_file = v;
		} else if (strcmp(a, "--insecure-skip-tls-verify") == 0) {
			o->cfg.insecure_skip_tls_verify = 1;
		} else if ((v = value_of(argc, argv, &i, "--namespace", "-n"))) {
			if (!*v || strlen(v) >= KR_NAME_MAX)
				return usage_error("--namespace needs a namespace name, got '%s'", v);
			o->cfg.ns = v;
		} else if (strcmp(a, "-A") == 0 || strcmp(a, "--all-namespaces") == 0) {
			o->cfg.all_namespaces = 1;
		} else if ((v = value_of(argc, argv, &i, "--selector", "-l"))) {
			if (strlen(v) >= KR_SELECTOR_MAX)
				return usage_error("--selector is too long: '%.40s...'", v);
			o->cfg.label_selector = v;
		} else if ((v = value_of(argc, argv, &i, "--field-selector", NULL))) {
			if (strlen(v) >= KR_SELECTOR_MAX)
				return usage_error("--field-selector is too long: '%.40s...'", v);
			o->cfg.field_selector = v;
		} else if ((v = value_of(argc, argv, &i, "--output", "-o"))) {
			if (strcmp(v, "jsonl") == 0)
				o->output_none = 0;
			else if (strcmp(v, "none") == 0)
				o->output_none = 1;
			else
				return usage_error("--output must be jsonl or none, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--watch-list", NULL))) {
			if (strcmp(v, "auto") == 0)
				o->cfg.watch_list = KR_WL_AUTO;
			else if (strcmp(v, "on") == 0)
				o->cfg.watch_list = KR_WL_ON;
			else if (strcmp(v, "off") == 0)
				o->cfg.watch_list = KR_WL_OFF;
			else
				return usage_error("--watch-list must be auto, on or off, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--gzip", NULL))) {
			if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)
				o->cfg.gzip = strcmp(v, "on") == 0;
			else
				return usage_error("--gzip must be on or off, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--page-size", NULL))) {
			long n = kr_parse_num(v, 1, 100000);

			if (n < 0)
				return usage_error("--page-size must be a number from 1 to 100000, not '%s'", v);
			o->cfg.page_size = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--resync", NULL))) {
			long n = kr_parse_num(v, 0, KR_RESYNC_MAX_S);

			if (n < 0)
				return usage_error("--resync must be 0 to %d seconds, not '%s'", KR_RESYNC_MAX_S, v);
			o->cfg.resync_s = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--initial-events-timeout", NULL))) {
			long n = kr_parse_num(v, 1, 3600);

			if (n < 0)
				return usage_error("--initial-events-timeout must be 1 to 3600 seconds, not '%s'", v);
			o->cfg.initial_events_timeout_s = (int)n;
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
		} else if ((v = value_of(argc, argv, &i, "--dir-sync", NULL))) {
			if (strcmp(v, "batch") != 0 && strcmp(v, "each") != 0)
				return usage_error("--dir-sync must be batch or each, not '%s'", v);
			o->dir_sync_each = strcmp(v, "each") == 0;
		} else if ((v = value_of(argc, argv, &i, "--dir-annotation", NULL))) {
			o->dir.annotation = v;
		} else if ((v = value_of(argc, argv, &i, "--file-mode", NULL)) ||
			   (v = value_of(argc, argv, &i, "--secret-file-mode", NULL))) {
			char *end;
			long long mode = kr_strtoll(v, &end, 8);

			if (!*v || *end || mode < 0 || mode > 07777)
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
			/* Without hooks the flag is refused by name below: no signal table needed. */
			o->notify.signal = KR_WITH_HOOKS ? kr_port_signal_number(name) : 1;
			if (o->notify.signal <= 0)
				return usage_error("--signal: unknown signal '%s'", name);
			if (colon[1] == '@' && colon[2]) {
				o->notify.signal_pidfile = colon + 2;
			} else {
				long pid = kr_parse_num(colon + 1, 1, 0x7fffffff);

				if (pid < 0)
					return usage_error("--signal: '%s' is not a pid or @pidfile", colon + 1);
				o->notify.signal_pid = (int)pid;
			}
		} else if ((v = value_of(argc, argv, &i, "--http-post", NULL))) {
			if (!*v)
				return usage_error("--http-post needs a URL%s", "");
			o->http_post = v;
		} else if ((v = value_of(argc, argv, &i, "--child-signal", NULL))) {
			o->sup.child_signal = KR_WITH_HOOKS ? kr_port_signal_number(v) : 1;
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
			long n = kr_parse_num(v, 0, 3600);

			if (n < 0)
				return usage_error("--grace must be 0 to 3600 seconds, not '%s'", v);
			o->sup.grace_ms = (int)n * 1000;
			o->sup_flag = "--grace";
		} else if ((v = value_of(argc, argv, &i, "--state-dir", NULL))) {
			if (strlen(v) >= KR_STATE_PATH_MAX)
				return usage_error("--state-dir is too long: '%.40s...'", v);
			o->cfg.state_dir = v;  /* "" turns a compiled-in default off */
		} else if ((v = value_of(argc, argv, &i, "--state-interval", NULL))) {
			long n = kr_parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--state-interval must be 1 to 86400 seconds, not '%s'", v);
			o->cfg.state_interval_s = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--state-sync", NULL))) {
			if (strcmp(v, "child") != 0 && strcmp(v, "inline") != 0)
				return usage_error("--state-sync must be child or inline, not '%s'", v);
			o->cfg.state_sync_inline = strcmp(v, "inline") == 0;
		} else if ((v = value_of(argc, argv, &i, "--max-stale", NULL))) {
			long n = kr_parse_num(v, 0, 86400L * 3650);

			if (n < 0)
				return usage_error("--max-stale must be a number of seconds, not '%s'", v);
			o->cfg.max_stale_s = n;
		} else if ((v = value_of(argc, argv, &i, "--debounce", NULL))) {
			long n = kr_parse_num(v, 0, 3600000);

			if (n < 0)
				return usage_error("--debounce must be 0 to 3600000 milliseconds, not '%s'", v);
			o->notify.debounce_ms = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--watch-idle-timeout", NULL))) {
			long n = kr_parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--watch-idle-timeout must be 1 to 86400 seconds, not '%s'", v);
			o->cfg.watch_idle_timeout_s = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--listen", NULL))) {
			if (!*v)
				return usage_error("--listen needs 127.0.0.1:PORT, [::1]:PORT or unix:/PATH%s", "");
			o->serve.listen = v;
		} else if ((v = value_of(argc, argv, &i, "--listen-token-file", NULL))) {
			if (!*v)
				return usage_error("--listen-token-file needs a file%s", "");
			o->serve.token_file = v;
		} else if (KR_WITH_LISTEN && (v = value_of(argc, argv, &i, "--listen-cert-file", NULL))) {
			o->serve.cert_file = v;      /* a build without the endpoint: unknown flags */
		} else if (KR_WITH_LISTEN && (v = value_of(argc, argv, &i, "--listen-key-file", NULL))) {
			o->serve.key_file = v;
		} else if (KR_WITH_LISTEN && (v = value_of(argc, argv, &i, "--listen-client-ca-file", NULL))) {
			o->serve.client_ca_file = v;
		} else if (KR_WITH_LISTEN && (v = value_of(argc, argv, &i, "--listen-access-file", NULL))) {
			o->serve.access_file = v;
		} else if (KR_WITH_LISTEN && strcmp(a, "--listen-insecure") == 0) {
			o->serve.insecure = 1;
		} else if ((v = value_of(argc, argv, &i, "--listen-max-conns", NULL))) {
			long n = kr_parse_num(v, 1, KR_SERVE_MAX_CONNS);

			if (n < 0)
				return usage_error("--listen-max-conns must be 1 to %d (KR_SERVE_MAX_CONNS), not '%s'",
						   KR_SERVE_MAX_CONNS, v);
			o->serve.max_conns = (int)n;
		} else if (strcmp(a, "--serve-secrets") == 0) {
			o->serve.serve_secrets = 1;
		} else if (strcmp(a, "--listen-health-only") == 0) {
			o->serve.health_only = 1;
		} else if ((v = value_of(argc, argv, &i, "--readyz-max-silence", NULL))) {
			long n = kr_parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--readyz-max-silence must be 1 to 86400 seconds, not '%s'", v);
			o->serve.ready_silence_ms = (int)n * 1000;
		} else if ((v = value_of(argc, argv, &i, "--listen-idle-timeout", NULL))) {
			long n = kr_parse_num(v, 1, 3600);

			if (n < 0)
				return usage_error("--listen-idle-timeout must be 1 to 3600 seconds, not '%s'", v);
			o->serve.idle_ms = (int)n * 1000;
		} else if ((v = value_of(argc, argv, &i, "--listen-bookmark-interval", NULL))) {
			long n = kr_parse_num(v, 1, 3600);

			if (n < 0)
				return usage_error("--listen-bookmark-interval must be 1 to 3600 seconds, not '%s'", v);
			o->serve.bookmark_ms = (int)n * 1000;
		} else if ((v = value_of(argc, argv, &i, "--sandbox", NULL))) {
			if (strcmp(v, "auto") == 0)
				o->sandbox = KR_SANDBOX_MODE_AUTO;
			else if (strcmp(v, "on") == 0)
				o->sandbox = KR_SANDBOX_MODE_ON;
			else if (strcmp(v, "off") == 0)
				o->sandbox = KR_SANDBOX_MODE_OFF;
			else
				return usage_error("--sandbox must be auto, on or off, not '%s'", v);
		} else if ((v = value_of(argc, argv, &i, "--user", NULL))) {
			o->user = v;
		} else if ((v = value_of(argc, argv, &i, "--group", NULL))) {
			o->group = v;
		} else if (strcmp(a, "--keep-managed-fields") == 0) {
			o->cfg.keep_managed_fields = 1;
		} else if (strcmp(a, "--once") == 0) {
			o->once = 1;
		} else if ((v = value_of(argc, argv, &i, "--timeout", NULL))) {
			long n = kr_parse_num(v, 1, 86400);

			if (n < 0)
				return usage_error("--timeout must be 1 to 86400 seconds, not '%s'", v);
			o->timeout_s = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--verbosity", "-v"))) {
			long n = kr_parse_num(v, 0, 3);

			if (n < 0)
				return usage_error("--verbosity must be 0 to 3, not '%s'", v);
			o->verbosity = (int)n;
			o->cfg.log_level = (int)n;
		} else if ((v = value_of(argc, argv, &i, "--max-objects", NULL))) {
			long n = kr_parse_num(v, 1, (long)KR_MAX_OBJECTS_CEILING);

			if (n < 0)
				return usage_error("--max-objects must be 1 to %u, not '%s'",
						   (unsigned)KR_MAX_OBJECTS_CEILING, v);
			o->cfg.max_objects = (size_t)n;
		} else if ((v = value_of(argc, argv, &i, "--arena-bytes", NULL)) ||
			   (v = value_of(argc, argv, &i, "--memory", NULL))) {
			unsigned long long n = parse_bytes(v);

			if (strncmp(a, "--arena-bytes", 13) == 0) {
				if (n < KR_ARENA_MIN || n > KR_ARENA_BYTES_CEILING)
					return usage_error("--arena-bytes must be %uK to %lluM (K, M, G suffixes), not '%s'",
							   (unsigned)(KR_ARENA_MIN / 1024),
							   (unsigned long long)(KR_ARENA_BYTES_CEILING >> 20), v);
				o->cfg.arena_bytes = (size_t)n;
			} else {
				if (n < 2ull * KR_ARENA_MIN || n > KR_ARENA_BYTES_CEILING)
					return usage_error("--memory must be %uK to %lluM (K, M, G suffixes), not '%s'",
							   (unsigned)(2 * KR_ARENA_MIN / 1024),
							   (unsigned long long)(KR_ARENA_BYTES_CEILING >> 20), v);
				o->cfg.memory_bytes = (size_t)n;
			}
		} else if (a[0] == '-') {
			return usage_error("unknown flag '%s'", a);
		} else {
			if (*nres == KR_MAX_RESOURCES)
				return usage_error("more resources than KR_MAX_RESOURCES, at '%s'", a);
			resource_args[*nres] = a;
			(*nres)++;
		}
	}
	return 0;
}

/*
 * --once after the sync: the hooks once, now, and the loop until they are
 * done (the --timeout still counts). Returns the exit code.
 */
static int run_hooks_once(void)
{
	once_hooks = 1;
	loop->stop = 0;
	if (notify_on)
		kr_notify_flush(&notify);
	if (post_on)
		kr_http_post_flush(&post);
	while (!loop->stop && ((notify_on && notify.child) || (post_on && kr_http_post_busy(&post))))
		if (kr_loop_once(loop, -1) < 0) {
			kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
			return EXIT_FATAL;
		}
	if (once_failed)
		return EXIT_FATAL;
	if (loop->stop)
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

/*
 * --once: a resource whose mirror is partial fails the run: objects that
 * could not be read or indexed, or are present but not held (the arena
 * full, the resource's share used, larger than the space for one), are
 * missing from the output, files and hooks alike.
 */
static int partial_mirror(void)
{
	struct kr_status st;
	int i, n = kr_client_resources(client), bad = 0;

	for (i = 0; i < n; i++)
		if (kr_client_status(client, i, &st) == 0 && st.partial) {
			kr_log(KR_LOG_ERROR, "--once: the mirror of %s is partial: the objects it lacks are named "
			       "above (see --arena-bytes, --max-objects)",
			       st.resource);
			bad = 1;
		}
	return bad;
}

/*
 * --once: the files the directory sink refused (a key that cannot be a file
 * name, a value that cannot be decoded) or failed to write are each named in
 * an error line as they happen; the run's last line counts them, so that a
 * script reading only the end still sees that some are missing.
 */
static void once_refused_line(const struct kr_dirsink *d, const char *flag)
{
	unsigned long long n = d->stats.errors + d->stats.conflicts;

	if (n)
		kr_log(KR_LOG_WARN, "--once: %s refused or could not write %llu file%s or object%s (each "
		       "named above); every other file is in place", flag, n, n == 1 ? "" : "s",
		       n == 1 ? "" : "s");
}

static struct kr_sidecar sidecar;

static const char *env_get(void *arg, const char *name)
{
	(void)arg;
	return getenv(name);
}

/*
 * A flag whose feature this build leaves out (config/README.md "Leaving features
 * out") is refused by name: running without the endpoint or the hooks the user asked for would
 * look like success.
 */
static int features_check(const struct options *o)
{
	const char *flag = !KR_WITH_LISTEN && o->serve.listen ? "--listen"
		: !KR_WITH_STATE && o->cfg.state_dir && *o->cfg.state_dir ? "--state-dir"
		: !KR_WITH_DIR && o->dir.path ? "--dir"
		: !KR_WITH_HOOKS && o->notify.exec ? "--exec"
		: !KR_WITH_HOOKS && o->notify.signal ? "--signal"
		: !KR_WITH_HOOKS && o->http_post ? "--http-post"
		: !KR_WITH_HOOKS && o->sup.argv ? "-- PROGRAM"
		: !KR_WITH_GZIP && o->cfg.gzip ? "--gzip on"
		: !KR_WITH_SANDBOX && (o->user || o->group) ? "--user and --group"
		: !KR_WITH_SANDBOX && o->sandbox == KR_SANDBOX_MODE_ON ? "--sandbox on" : NULL;

	if (flag)
		return usage_error("unable to use %s: it is not built into this kreflect (a smaller build)",
				   flag);
	return 0;
}

/* --k8s-sidecar: k8s-sidecar's variables (sidecar_env.h) instead of flags. */
static int sidecar_options(int argc, char **argv, struct options *o, int *nres)
{
	char err[512];

	if (!KR_WITH_SIDECAR)
		return usage_error("unable to use --k8s-sidecar (or the name k8s-sidecar): it is not built "
				   "into this kreflect%s", "");
	if (kr_sidecar_parse(&sidecar, env_get, NULL, argc, argv, err, sizeof(err)) != 0) {
		kr_dprintf(2, "kreflect: unable to use the k8s-sidecar configuration: %s\n", err);
		return EXIT_USAGE;
	}
	*nres = sidecar.nres;              /* added to the client from sidecar.res by make_client */
	o->sidecar = 1;
	o->output_none = 1;
	o->dir = sidecar.dir;
	o->notify.exec = sidecar.script;
	o->http_post = sidecar.req_url;
	o->post_opts = &sidecar.post;
	o->cfg.insecure_skip_tls_verify = sidecar.insecure;
	o->once = sidecar.method == KR_SIDECAR_LIST;
	o->log_level = sidecar.log_level;
	if (sidecar.idle_ms)
		o->cfg.watch_idle_timeout_s = (sidecar.idle_ms + 999) / 1000;
	if (sidecar.watch_timeout_s)
		o->cfg.watch_timeout_s = sidecar.watch_timeout_s;
	/* k8s-sidecar's health server: /healthz is its readiness (503 until synced); a build
	 * without the endpoint (WITHOUT=listen) has none, as with HEALTH_PORT=0. */
	if (KR_WITH_LISTEN && sidecar.health_listen[0] && !o->once) {
		o->serve.listen = sidecar.health_listen;
		o->serve.health_only = 1;
		o->serve.healthz_ready = 1;
		o->serve.max_conns = 4;
	}
	return 0;
}

/* The server was never reached: say that the mirror in use is the restored one. */
static void restored_warnings(void)
{
	struct kr_status st;
	int i, n = kr_client_resources(client);

	for (i = 0; i < n; i++)
		if (kr_client_status(client, i, &st) == 0 && st.restored)
			kr_log(KR_LOG_WARN, "%s: the mirror is the one restored from the state directory, "
			       "%lld s old: the server was not reached", st.resource, (long long)st.restored_age_s);
}

/* Sets the client up in memory reserved now, once. Returns 0 or an exit code. */
static int make_client(const struct options *o, int nres)
{
	char err[512];
	size_t need = kr_client_memory(&o->cfg);
	void *mem;
	int i, r;

	if (!need)
		return usage_error("--max-objects, --arena-bytes or --memory out of range%s", "");
	mem = kr_port_reserve(need);
	if (!mem) {
		kr_dprintf(2, "kreflect: unable to reserve %zu bytes of memory at start-up: %s\n", need,
			   kr_port_last_error());
		return EXIT_FATAL;
	}
	r = kr_client_init(&client, mem, need, &o->cfg, err, sizeof(err));
	if (r != 0) {
		if (o->cfg.server && strstr(err, "is not https://"))
			return usage_error("--server must be https://HOST[:PORT] (IPv6 in brackets), not '%s'",
					   o->cfg.server);
		kr_dprintf(2, "kreflect: %s\n", err[0] ? err : kr_strerror(r));
		return EXIT_USAGE;
	}
	for (i = 0; i < nres; i++) {
		struct kr_resource_spec spec;
		const struct kr_resource *sr = &sidecar.res[i];

		memset(&spec, 0, sizeof(spec));
		if (o->sidecar) {
			/* One entry per namespace and type, each with its own selectors. */
			spec.name = sr->name;
			spec.ns = sr->ns[0] ? sr->ns : NULL;
			spec.all_namespaces = sr->all_namespaces;
			spec.label_selector = sr->label_selector;
			spec.field_selector = sr->field_selector[0] ? sr->field_selector : NULL;
		} else {
			spec.name = resource_args[i];
		}
		if (kr_client_add(client, &spec, err, sizeof(err)) < 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return EXIT_USAGE;
		}
	}
	loop = kr_client_loop(client);
	return 0;
}

/*
 * The id of a user or group given by number or by name (/etc/passwd or
 * /etc/group, read whole: no C-library lookup, which would allocate); with
 * gid, a user's primary group too. Returns the id, or -1 with err set.
 */
static long id_of(const char *name, const char *file, long *gid, char *err, size_t errlen)
{
	char buf[32768];
	char *line, *next;
	long n = kr_parse_num(name, 0, 2147483647L);

	if (n >= 0)
		return n;
	n = kr_port_read_file(file, buf, sizeof(buf) - 1);
	if (n < 0) {
		kr_snprintf(err, errlen, "unable to read %s to find '%s': %s (give a number)", file, name,
			    n == KR_ETOOBIG ? "larger than 32 KiB" : kr_strerror((int)n));
		return -1;
	}
	buf[n] = '\0';
	for (line = buf; line && *line; line = next) {
		char *f[4] = { 0 }, *p = line;
		int k;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (k = 0; k < 4 && p; k++) {
			f[k] = p;
			p = strchr(p, ':');
			if (p)
				*p++ = '\0';
		}
		if (k < 3 || strcmp(f[0], name) != 0)
			continue;
		n = kr_parse_num(f[2], 0, 2147483647L);
		if (gid && f[3] && p)
			*gid = kr_parse_num(f[3], 0, 2147483647L);
		if (n >= 0)
			return n;
	}
	kr_snprintf(err, errlen, "no %s '%s' in %s", gid ? "user" : "group", name, file);
	return -1;
}

/*
 * After start-up, once every file and the listening socket are open: the
 * user and group of --user/--group and the sandbox (--sandbox). With auto,
 * a hook or supervised program (which would inherit it, and could not run
 * what it needs) leaves the sandbox off; --sandbox on applies it to them too.
 */
static int apply_sandbox(const struct options *o)
{
	struct kr_sandbox_opts sb;
	struct kr_addr a;
	char msg[512];
	long gid = -1;
	int r, children = KR_WITH_HOOKS && (o->notify.exec || o->sup.argv);

	if (!KR_WITH_SANDBOX)
		return 0;
	memset(&sb, 0, sizeof(sb));
	sb.mode = o->sandbox;
	sb.syscall_filter = 1;
	sb.uid = sb.gid = -1;
	if (o->user && (sb.uid = id_of(o->user, "/etc/passwd", &gid, msg, sizeof(msg))) < 0)
		return usage_error("--user: %s", msg);
	sb.gid = o->user ? gid : -1;
	if (o->group && (sb.gid = id_of(o->group, "/etc/group", NULL, msg, sizeof(msg))) < 0)
		return usage_error("--group: %s", msg);
	if (o->sandbox == KR_SANDBOX_MODE_AUTO && children)
		sb.mode = KR_SANDBOX_MODE_OFF;
	if (KR_WITH_DIR && o->dir.path)
		sb.write_dirs[0] = o->dir.path;
	if (KR_WITH_HOOKS && o->notify.signal_pidfile)
		sb.read_files[0] = o->notify.signal_pidfile;
	sb.signal_others = KR_WITH_HOOKS && o->notify.signal;
	if (KR_WITH_HOOKS && o->sup.argv)
		sb.programs[0] = o->sup.argv[0];
	if (KR_WITH_HOOKS && o->notify.exec)
		sb.programs[1] = notify.argv[0];
	if (KR_WITH_HOOKS && post_on) {
		sb.tcp_ports[0] = post.conn.cfg.port;
		sb.lookups = kr_port_parse_ip(post.conn.cfg.host, 0, &a) != 0;
	}
	if (sb.mode == KR_SANDBOX_MODE_ON &&
	    ((sb.programs[0] && !strchr(sb.programs[0], '/')) || (sb.programs[1] && !strchr(sb.programs[1], '/'))))
		return usage_error("--sandbox on: name the program to run by its path (/usr/bin/NAME): "
				   "the sandbox allows running that file only, not a lookup on PATH%s", "");
	if (!sb.programs[0] && sb.programs[1]) {
		sb.programs[0] = sb.programs[1];
		sb.programs[1] = NULL;
	}
	r = kr_client_sandbox(client, &sb, msg, sizeof(msg));
	if (r != 0) {
		kr_dprintf(2, "kreflect: %s\n", msg);
		return r == KR_EINVAL ? EXIT_USAGE : EXIT_FATAL;
	}
	kr_log(KR_LOG_INFO, "%s%s", msg, o->sandbox == KR_SANDBOX_MODE_AUTO && children
	       ? " (--sandbox auto: a hook or -- PROGRAM would inherit it; --sandbox on applies it "
		 "to them too)" : "");
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	struct kr_timer once_timer;
	char err[512];
	size_t i;
	int nres = 0, r, budget = 0;

	for (i = 1; i < (size_t)argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			print_version();
			return 0;
		}
		if (strcmp(argv[i], "--print-budget") == 0)
			budget = 1;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
#if KR_HELP_GZ
			/* The decoder (its 32 KiB window) is reserved only when --help asks,
			 * at start-up like the client's memory; the process ends after it. */
			void *mem = kr_port_reserve(kr_help_mem());

			r = kr_help_write(1, kr_usage_gz, sizeof(kr_usage_gz), KR_USAGE_LEN, mem, kr_help_mem());
			if (r != 0) {
				kr_dprintf(2, "kreflect: unable to write the help text: %s\n", kr_strerror(r));
				return EXIT_FATAL;
			}
#else
			struct kr_iov iov = { usage, sizeof(usage) - 1 };

			kr_port_writev_all(1, &iov, 1);
#endif
			return 0;
		}
	}
	memset(&o, 0, sizeof(o));
	kr_config_init(&o.cfg);
	o.verbosity = 1;
	o.timeout_s = 60;
	o.notify.debounce_ms = 1000;
	o.sup.child_signal = SIGHUP;
	o.sup.grace_ms = 10000;
	o.log_level = -1;
	if (budget) {
		/* Only the capacity flags matter here; the others are checked when running. */
		for (i = 1; i < (size_t)argc && strcmp(argv[i], "--") != 0; i++) {
			int j = (int)i;
			const char *v;

			if ((v = value_of(argc, argv, &j, "--max-objects", NULL)))
				o.cfg.max_objects = (size_t)kr_parse_num(v, 0, (long)KR_MAX_OBJECTS_CEILING + 1);
			else if ((v = value_of(argc, argv, &j, "--arena-bytes", NULL)))
				o.cfg.arena_bytes = (size_t)parse_bytes(v);
			else if ((v = value_of(argc, argv, &j, "--memory", NULL)))
				o.cfg.memory_bytes = (size_t)parse_bytes(v);
			i = (size_t)j;
		}
		return print_budget(&o.cfg);
	}
	r = kr_sidecar_wanted(argc, argv) ? sidecar_options(argc, argv, &o, &nres)
					   : parse_flags(argc, argv, &o, &nres);
	if (r)
		return r;
	r = features_check(&o);
	if (r)
		return r;
	if (o.sup_flag && !o.sup.argv)
		return usage_error("%s is for supervisor mode: give -- PROGRAM [ARGS ...] last", o.sup_flag);
	if (o.cfg.max_stale_s >= 0 && !(o.cfg.state_dir && *o.cfg.state_dir))
		return usage_error("--max-stale needs --state-dir: there is no mirror to restore%s", "");
	if (o.once && o.sup.argv)
		return usage_error("--once and -- PROGRAM exclude each other: --once exits after one "
				   "sync%s", "");
	kr_log_set_level(o.verbosity == 0 ? KR_LOG_WARN : o.verbosity == 1 ? KR_LOG_INFO
			 : o.verbosity == 2 ? KR_LOG_DEBUG : KR_LOG_TRACE);
	o.cfg.stop_after_sync = o.once;
	r = make_client(&o, nres);
	if (r)
		return r;
	if (o.log_level >= 0)
		kr_log_set_level(o.log_level);
	for (i = 0; o.sidecar && i < (size_t)sidecar.nnotes; i++)
		kr_log(KR_LOG_INFO, "%s", sidecar.notes[i]);
	nres = kr_client_resources(client);
	if (kr_loop_signals(loop, on_signal, NULL) != 0) {
		kr_dprintf(2, "kreflect: unable to set up signal handling\n");
		return EXIT_FATAL;
	}
	if (KR_WITH_DIR && o.dir.path) {
		if (o.sidecar) {
			/* A sweep removes only the files of what its own resource covers. */
			o.dir.scopes = kr_client_resource(client, 0);
			o.dir.nscopes = nres;
		}
		o.dir.batch = !o.dir_sync_each;
		if (kr_dirsink_init(&dirsink, &o.dir, err, sizeof(err)) != 0) {
			kr_dprintf(2, "kreflect: %s %s: %s\n", o.sidecar ? "FOLDER" : "--dir", o.dir.path, err);
			return EXIT_USAGE;
		}
		if (add_sink(kr_dirsink_event, &dirsink) != 0)
			return EXIT_FATAL;
	}
	if (KR_WITH_HOOKS && (o.notify.exec || o.notify.signal)) {
		o.notify.resources = nres;
		if (kr_notify_init(&notify, loop, &o.notify, err, sizeof(err)) != 0)
			return usage_error("%s: %s", o.sidecar ? "SCRIPT" : "--exec", err);
		/* After the files: a notification means they are in place. */
		if (add_sink(kr_notify_event, &notify) != 0)
			return EXIT_FATAL;
		notify_on = 1;
	}
	if (KR_WITH_HOOKS && o.http_post) {
		const char *flag = o.sidecar ? "REQ_URL" : "--http-post";

		if (kr_http_post_init_opts(&post, loop, o.http_post, o.notify.debounce_ms, nres,
					   o.post_opts, err, sizeof(err)) != 0)
			return usage_error("%s: %s", flag, err);
		if (!kr_http_post_loopback(&post))
			kr_log(KR_LOG_WARN, "%s to %s: not a loopback address; %s travel unencrypted",
			       flag, post.url, o.sidecar ? "the request and its credentials"
			       : "the changed keys");
		if (add_sink(kr_http_post_event, &post) != 0)
			return EXIT_FATAL;
		post_on = 1;
	}
	if (KR_WITH_HOOKS && o.sup.argv) {
		o.sup.debounce_ms = o.notify.debounce_ms;
		o.sup.resources = nres;
		o.sup.on_end = on_program_end;
		if (kr_supervise_init(&sup, loop, &o.sup, err, sizeof(err)) != 0)
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
		kr_loop_before_poll(loop, kr_jsonl_flush, &jsonl);
	}
	if (KR_WITH_DIR && o.dir.path) {
		/* The batch's files in place before the loop sleeps and before any timer (a hook). */
		kr_loop_before_poll(loop, kr_dirsink_flush, &dirsink);
		kr_loop_before_timers(loop, kr_dirsink_flush, &dirsink);
	}
	/* The outputs are in place before the start: a restored mirror reaches them first. */
	r = kr_client_start(client, err, sizeof(err));
	if (r != 0) {
		kr_dprintf(2, "kreflect: %s\n", err[0] ? err : kr_strerror(r));
		/* No such resource, or a state directory that cannot be used: usage; else the server. */
		return r == KR_ENOENT || r == KR_EINVAL ? EXIT_USAGE : EXIT_FATAL;
	}
	if (KR_WITH_LISTEN && o.serve.listen) {
		o.serve.notify = notify_on ? &notify : NULL;
		o.serve.post = post_on ? &post : NULL;
		r = kr_client_listen_opts(client, serve_mem, sizeof(serve_mem), &o.serve, err, sizeof(err));
		if (r == KR_EIO && o.sidecar) {
			/* As k8s-sidecar's health thread: a port taken (two sidecars in one pod) is
			 * not fatal, the files are what the sidecar is for. */
			kr_log(KR_LOG_WARN, "%s; going on without the health endpoint (HEALTH_PORT)", err);
		} else if (r != 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return r == KR_EIO ? EXIT_FATAL : EXIT_USAGE;
		} else {
			const struct kr_serve *sv = (const struct kr_serve *)(const void *)serve_mem;

			kr_log(KR_LOG_INFO, "serving %s on %s%s%s", o.serve.health_only ? "health checks"
			       : "the mirror", sv->where, o.serve.cert_file ? " over TLS" : "",
			       sv->need_token ? " (bearer token required)" : "");
			if (o.serve.insecure && !o.serve.cert_file)
				kr_log(KR_LOG_WARN, "--listen-insecure: %s is served without TLS: tokens and "
				       "objects cross the network in clear", sv->where);
		}
	} else if (o.serve.token_file || o.serve.max_conns || o.serve.serve_secrets ||
		   o.serve.health_only || o.serve.cert_file || o.serve.key_file ||
		   o.serve.client_ca_file || o.serve.insecure || o.serve.access_file) {
		return usage_error("the --listen-* flags and --serve-secrets need --listen%s", "");
	}
	r = apply_sandbox(&o);
	if (r)
		return r;
	if (o.once) {
		memset(&once_timer, 0, sizeof(once_timer));
		once_timer.fire = on_once_timeout;
		kr_loop_timer_at(loop, &once_timer, kr_port_now_ms() + (kr_ms_t)o.timeout_s * 1000);
	}
	if (kr_client_run(client) != 0) {
		kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
		return EXIT_FATAL;
	}
	restored_warnings();
	kr_client_stop(client);                /* closes the endpoint, writes the last snapshot */
	if (KR_WITH_DIR && o.dir.path)
		kr_dirsink_close(&dirsink);    /* the last batch of files in place */
	if (!o.output_none)
		kr_jsonl_flush(&jsonl);
	if (o.once) {
		/* Not ready and not failed: a signal stopped it, a clean stop. */
		r = once_failed ? EXIT_FATAL : kr_client_ready(client) <= 0 ? 0
		    : partial_mirror() ? EXIT_FATAL : run_hooks_once();
		if (KR_WITH_DIR && o.dir.path)
			once_refused_line(&dirsink, o.sidecar ? "FOLDER" : "--dir");
		return r;
	}
	if (sup_on && sup.state == KR_SUP_ENDED)
		return sup.start_error == KR_ENOENT ? EXIT_NOT_FOUND
		       : sup.start_error ? EXIT_CANNOT_RUN : sup.code;
	return once_failed ? EXIT_FATAL : 0;
}
