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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"
#include "sidecar_env.h"

#define EXIT_FATAL 1
#define EXIT_USAGE 2
#define EXIT_CANNOT_RUN 126            /* as a shell: found but could not be run */
#define EXIT_NOT_FOUND 127

/* The client lives in memory reserved once at start-up (--print-budget). */
static struct kr_client *client;
static const char *resource_args[KR_MAX_RESOURCES];

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
	"  --listen-tls-sessions N        TLS sessions at once, 15 to 40 KB of RAM each while\n"
	"                                 open (default and most: " KR_STR(KR_SERVE_TLS_CONNS) ")\n"
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
	struct kr_dir_config dir;      /* --dir and its flags */
	struct kr_hooks_config hooks;  /* --exec, --signal, --http-post, --debounce */
	int sidecar;                   /* --k8s-sidecar: configured from the environment */
	int log_level;                 /* >= 0: set directly (k8s-sidecar's LOG_LEVEL) */
	struct kr_program_config program;  /* -- PROGRAM and the supervisor flags */
	const char *sup_flag;          /* a supervisor flag given (needs -- PROGRAM) */
	struct kr_endpoint_config serve;
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
	kr_dprintf(1, "mbedTLS: %s\n", kr_mbedtls_version());
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

/* One item of the budget: printed, and added to its kind's total (sums[1] reserved, sums[0] static). */
static void budget_item(void *arg, const char *name, size_t bytes, int reserved, const char *why)
{
	size_t *sums = arg;

	kr_dprintf(1, "%-14s %10zu  %s\n", name, bytes, why);
	sums[reserved ? 1 : 0] += bytes;
}

/* The budget for the capacities the flags chose. Returns an exit code. */
static int print_budget(const struct kr_config *cfg)
{
	size_t objects, arena, sums[2] = { 0, 0 };
	size_t fixed, reserved;

	if (kr_client_budget(cfg, &objects, &arena, budget_item, sums) < 0) {
		kr_dprintf(2, "kreflect: --max-objects, --arena-bytes or --memory out of range (see --help)\n");
		return EXIT_USAGE;
	}
	fixed = sums[0];
	reserved = sums[1];
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

static void on_signal(void *arg, int sig)
{
	(void)arg;
	if (sig == SIGCHLD) {
		int pid, code;

		/* Every child that ended, also orphans handed to us as PID 1 (and name
		 * lookups, whose owner finds them reaped): each to its owner, if any. */
		while ((pid = kr_port_reap(&code)) > 0) {
			if (kr_client_child_exited(client, pid, code) == 1)   /* a hook's, the program */
				continue;
			kr_log(KR_LOG_DEBUG, "reaped pid %d (exit %d)", pid, code);
		}
		return;
	}
	/* The supervised program takes the signal while it runs; kreflect ends with it. */
	if (kr_client_program_signal(client, sig) == 1)
		return;
	if (sig == SIGTERM || sig == SIGINT) {
		kr_log(KR_LOG_INFO, "stopping on signal %d", sig);
		kr_client_stop(client);
	}
}

/* The outputs main can add: --dir, --exec/--signal, --http-post, -- PROGRAM, --listen, JSON lines. */
#define MAIN_SINKS 6
_Static_assert(KR_CLIENT_MAX_CALLBACKS >= MAIN_SINKS, "every output main can add needs a callback slot");

/* need bytes reserved now, once (--print-budget); NULL, said on stderr, if the system refuses. */
static void *reserve(size_t need)
{
	void *mem = need ? kr_port_reserve(need) : NULL;

	if (!mem)
		kr_dprintf(2, "kreflect: unable to reserve %zu bytes of memory at start-up: %s\n", need,
			   kr_port_last_error());
	return mem;
}

/* -o jsonl on stdout; a full callback table would drop events silently, so it is fatal. */
static int add_jsonl(void)
{
	size_t need = kr_jsonl_memory();
	void *mem = reserve(need);

	if (!mem)
		return -1;
	if (kr_client_jsonl(client, mem, need, 1) == 0)
		return 0;
	kr_dprintf(2, "kreflect: too many outputs for KR_CLIENT_MAX_CALLBACKS (%d)\n", KR_CLIENT_MAX_CALLBACKS);
	return -1;
}

/* The hooks h names, in memory reserved now. Returns 0 or an exit code. */
static int add_hooks(const struct kr_hooks_config *h, const char *flag)
{
	char err[512];
	size_t need = kr_hooks_memory(h);
	void *mem = reserve(need);
	int r;

	if (!mem)
		return EXIT_FATAL;
	r = kr_client_hooks(client, mem, need, h, err, sizeof(err));
	if (r == KR_ENOSPC) {
		kr_dprintf(2, "kreflect: %s\n", err);
		return EXIT_FATAL;
	}
	return r ? usage_error("%s: %s", flag, err) : 0;
}

static int once_failed;
static int once_hooks;                 /* --once: synced; the hooks are running */

/* The supervised program ended (or could not start): so does kreflect. */
static void on_program_end(void *arg)
{
	(void)arg;
	kr_client_stop(client);
}

/* --once's --timeout (kr_client_timer): still counting while the hooks run after the sync. */
static void on_once_timeout(void *arg, int slot)
{
	struct kr_status st;
	struct kr_hooks_stats hs;
	int i, n = kr_client_resources(client);

	(void)arg;
	(void)slot;
	kr_client_hooks_stats(client, &hs);
	for (i = 0; i < n; i++)
		if (kr_client_status(client, i, &st) == 0 && !st.synced)
			kr_log(KR_LOG_ERROR, "unable to sync %s within the --timeout: %s", st.resource,
			       st.reason[0] ? st.reason : "no answer");
	/* (KR_WITH_HOOKS: a build without hooks carries none of their texts.) */
	if (KR_WITH_HOOKS && once_hooks && hs.command_pid) {
		kr_log(KR_LOG_ERROR, "--once: %s (pid %d) still running at the --timeout: stopping it",
		       hs.command, hs.command_pid);
		kr_port_kill(hs.command_pid, SIGTERM);
	}
	if (KR_WITH_HOOKS && once_hooks && hs.post_busy)
		kr_log(KR_LOG_ERROR, "--once: the --http-post batch was not delivered within the --timeout");
	once_failed = 1;
	kr_client_stop(client);        /* also ends run_hooks_once's loop */
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

/*
 * The flags, one row each: X(name, text, hi, field, kind, bits, short). The
 * kind says what the value is and how it is checked, field where it goes in
 * struct options. Messages are made from the row, in the words the if/else
 * chain before this table used (tests/cli pins every one of them). The rows
 * expand to three arrays, so that a row costs 12 bytes and its texts no
 * pointers (the tiny build's read-only data is a page's last bytes). The
 * help text stays hand-laid (its columns and paragraphs are not one line per
 * flag); tests/cli/run.py checks that --help and the rows name the same flags.
 */
enum flag_kind {
	F_STR,          /* a string; text: what it "needs" if it may not be empty */
	F_SET,          /* no value: sets an int to 1 */
	F_NUM,          /* a decimal number in [0 or 1, hi] */
	F_ENUM,         /* one of text's words ("auto|on|off"): its index (F_NEG: 1 - index) */
	F_VERBOSITY,    /* F_NUM, and the client's log level too */
	F_SIGNAL,       /* --signal SIG:PID|SIG:@PIDFILE */
	F_CHILD_SIGNAL, /* a signal's name */
	F_MODE,         /* an octal file mode */
	F_BYTES,        /* a byte count with K, M, G: at least hi x KR_ARENA_MIN */
};

/* Bits of a row beside its kind. */
#define F_LO1 0x01      /* F_NUM: the least value is 1 (else 0) */
#define F_MS 0x02       /* F_NUM: seconds on the command line, milliseconds stored */
#define F_WHAT 0x04     /* F_NUM: text is the whole "must be ..." (else a unit after the range) */
#define F_GOT 0x08      /* F_STR: empty or too long: "needs TEXT, got 'V'" */
#define F_NEG 0x10      /* F_ENUM: the first word is 1, the second 0 */
#define F_SUP 0x20      /* a supervisor flag: needs -- PROGRAM */

#define SECONDS " seconds"

#if KR_WITH_LISTEN
#define FLAGS_LISTEN_FILES(X) \
	X("--listen-cert-file", "", 0, serve.cert_file, F_STR, 0, 0) \
	X("--listen-key-file", "", 0, serve.key_file, F_STR, 0, 0) \
	X("--listen-client-ca-file", "", 0, serve.client_ca_file, F_STR, 0, 0) \
	X("--listen-access-file", "", 0, serve.access_file, F_STR, 0, 0) \
	X("--listen-insecure", "", 0, serve.insecure, F_SET, 0, 0)
#else
#define FLAGS_LISTEN_FILES(X)   /* a build without the endpoint: unknown flags */
#endif

#define FLAGS(X) \
	/* connection */ \
	X("--kubeconfig", "", 0, cfg.kubeconfig, F_STR, 0, 0) \
	X("--context", "", 0, cfg.context, F_STR, 0, 0) \
	X("--server", "", 0, cfg.server, F_STR, 0, 0) \
	X("--token-file", "", 0, cfg.token_file, F_STR, 0, 0) \
	X("--certificate-authority", "", 0, cfg.ca_file, F_STR, 0, 0) \
	X("--client-certificate", "", 0, cfg.cert_file, F_STR, 0, 0) \
	X("--client-key", "", 0, cfg.key_file, F_STR, 0, 0) \
	X("--insecure-skip-tls-verify", "", 0, cfg.insecure_skip_tls_verify, F_SET, 0, 0) \
	/* what to mirror */ \
	X("--namespace", "a namespace name", KR_NAME_MAX, cfg.ns, F_STR, F_GOT, 'n') \
	X("--all-namespaces", "", 0, cfg.all_namespaces, F_SET, 0, 'A') \
	X("--selector", "", KR_SELECTOR_MAX, cfg.label_selector, F_STR, 0, 'l') \
	X("--field-selector", "", KR_SELECTOR_MAX, cfg.field_selector, F_STR, 0, 0) \
	/* how */ \
	X("--watch-list", "auto|on|off", 0, cfg.watch_list, F_ENUM, 0, 0) \
	X("--page-size", "a number from 1 to 100000", 100000, cfg.page_size, F_NUM, F_LO1 | F_WHAT, 0) \
	X("--gzip", "on|off", 0, cfg.gzip, F_ENUM, F_NEG, 0) \
	X("--resync", SECONDS, KR_RESYNC_MAX_S, cfg.resync_s, F_NUM, 0, 0) \
	X("--initial-events-timeout", SECONDS, 3600, cfg.initial_events_timeout_s, F_NUM, F_LO1, 0) \
	X("--watch-idle-timeout", SECONDS, 86400, cfg.watch_idle_timeout_s, F_NUM, F_LO1, 0) \
	X("--keep-managed-fields", "", 0, cfg.keep_managed_fields, F_SET, 0, 0) \
	/* memory */ \
	X("--max-objects", "", (int)KR_MAX_OBJECTS_CEILING, cfg.max_objects, F_NUM, F_LO1, 0) \
	X("--arena-bytes", "", 1, cfg.arena_bytes, F_BYTES, 0, 0) \
	X("--memory", "", 2, cfg.memory_bytes, F_BYTES, 0, 0) \
	X("--once", "", 0, once, F_SET, 0, 0) \
	X("--timeout", SECONDS, 86400, timeout_s, F_NUM, F_LO1, 0) \
	/* output */ \
	X("--dir", "a directory", 0, dir.path, F_STR, 0, 0) \
	X("--dir-layout", "flat|object", 0, dir.layout, F_ENUM, 0, 0) \
	X("--dir-annotation", "", 0, dir.annotation, F_STR, 0, 0) \
	X("--file-mode", "", 0, dir.file_mode, F_MODE, 0, 0) \
	X("--secret-file-mode", "", 0, dir.secret_mode, F_MODE, 0, 0) \
	X("--dir-sync", "batch|each", 0, dir.sync, F_ENUM, 0, 0) \
	X("--exec", "a command", 0, hooks.exec, F_STR, 0, 0) \
	X("--signal", "", 0, hooks.signal, F_SIGNAL, 0, 0) \
	X("--http-post", "a URL", 0, hooks.http_post, F_STR, 0, 0) \
	/* state */ \
	X("--state-dir", "", KR_STATE_PATH_MAX, cfg.state_dir, F_STR, 0, 0) \
	X("--state-sync", "child|inline", 0, cfg.state_sync_inline, F_ENUM, 0, 0) \
	X("--state-interval", SECONDS, 86400, cfg.state_interval_s, F_NUM, F_LO1, 0) \
	X("--max-stale", "a number of seconds", 86400 * 3650, cfg.max_stale_s, F_NUM, F_WHAT, 0) \
	X("--debounce", " milliseconds", 3600000, hooks.debounce_ms, F_NUM, 0, 0) \
	X("--output", "jsonl|none", 0, output_none, F_ENUM, 0, 'o') \
	X("--verbosity", "", 3, verbosity, F_VERBOSITY, 0, 'v') \
	/* supervisor mode */ \
	X("--child-signal", "", 0, program.change_signal, F_CHILD_SIGNAL, F_SUP, 0) \
	X("--on-change", "signal|restart", 0, program.restart, F_ENUM, F_SUP, 0) \
	X("--grace", SECONDS, 3600, program.grace_ms, F_NUM, F_MS | F_SUP, 0) \
	/* local endpoint */ \
	X("--listen", "127.0.0.1:PORT, [::1]:PORT or unix:/PATH", 0, serve.address, F_STR, 0, 0) \
	X("--listen-token-file", "a file", 0, serve.token_file, F_STR, 0, 0) \
	FLAGS_LISTEN_FILES(X) \
	X("--listen-max-conns", " (KR_SERVE_MAX_CONNS)", KR_SERVE_MAX_CONNS, serve.max_conns, F_NUM, F_LO1, 0) \
	X("--listen-tls-sessions", " (KR_SERVE_TLS_CONNS)", KR_SERVE_TLS_CONNS, serve.tls_sessions, F_NUM, F_LO1, 0) \
	X("--serve-secrets", "", 0, serve.serve_secrets, F_SET, 0, 0) \
	X("--listen-health-only", "", 0, serve.health_only, F_SET, 0, 0) \
	X("--readyz-max-silence", SECONDS, 86400, serve.ready_silence_s, F_NUM, F_LO1, 0) \
	X("--listen-idle-timeout", SECONDS, 3600, serve.idle_s, F_NUM, F_LO1, 0) \
	X("--listen-bookmark-interval", SECONDS, 3600, serve.bookmark_s, F_NUM, F_LO1, 0) \
	/* least privilege */ \
	X("--sandbox", "auto|on|off", 0, sandbox, F_ENUM, 0, 0) \
	X("--user", "", 0, user, F_STR, 0, 0) \
	X("--group", "", 0, group, F_STR, 0, 0)

struct flag {
	int hi;                        /* F_NUM: the largest value; F_STR: a length limit (0:
					  none); F_BYTES: the least, in KR_ARENA_MIN */
	unsigned short off;            /* the field: offsetof(struct options, ...) */
	unsigned char size;            /* and its sizeof */
	unsigned char kind, bits;
	char shortname;                /* 'n' for -n, or 0 */
};

/* A field's size; one neither int- nor long-sized (store() writes those two) does not compile. */
#define FIELD_SIZE(field) (sizeof(((struct options *)0)->field) * \
	sizeof(char[sizeof(((struct options *)0)->field) == sizeof(int) || \
		    sizeof(((struct options *)0)->field) == sizeof(long) ? 1 : -1]))
#define FLAG_ROW(name, text, hi, field, kind, bits, sh) \
	{ hi, (unsigned short)offsetof(struct options, field), FIELD_SIZE(field), kind, bits, sh },
#define FLAG_NAME(name, text, hi, field, kind, bits, sh) name "\0"
#define FLAG_TEXT(name, text, hi, field, kind, bits, sh) text "\0"

static const struct flag flags[] = { FLAGS(FLAG_ROW) };
static const char flag_names[] = FLAGS(FLAG_NAME);    /* row k's: kr_str_nth(flag_names, k) */
static const char flag_texts[] = FLAGS(FLAG_TEXT);

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))
_Static_assert(sizeof(struct options) <= 65535, "a row's field offset is an unsigned short");

/* Flag value: "--flag value" or "--flag=value" (a short flag: "-n value" only). */
static const char *value_of(int argc, char **argv, int *i, const char *longname, char shortname)
{
	const char *a = argv[*i];
	size_t ll = strlen(longname);

	if (strcmp(a, longname) == 0 || (shortname && a[0] == '-' && a[1] == shortname && !a[2])) {
		if (*i + 1 >= argc)
			return "";
		return argv[++*i];
	}
	if (strncmp(a, longname, ll) == 0 && a[ll] == '=')
		return a + ll + 1;
	return NULL;
}

/* The row of flag a (its value in *v, argv[*i] moved past it), or -1. */
static int find_flag(int argc, char **argv, int *i, const char **v)
{
	const char *a = argv[*i], *name = flag_names;
	size_t k;

	for (k = 0; k < NFLAGS; k++, name += strlen(name) + 1) {
		const struct flag *f = &flags[k];

		if (f->kind == F_SET) {
			/* Exactly the flag: a switch takes no "=value". */
			if (strcmp(a, name) == 0 || (f->shortname && a[0] == '-' && a[1] == f->shortname && !a[2]))
				return (int)k;
		} else if ((*v = value_of(argc, argv, i, name, f->shortname))) {
			return (int)k;
		}
	}
	return -1;
}

/* The index of v among words ("auto|on|off"), or -1; "auto, on or off" in buf. */
static int choice(const char *words, const char *v, char *buf, size_t len)
{
	const char *w = words;
	size_t l, at = 0;
	int k, n = 1, found = -1;

	for (l = 0; words[l]; l++)
		n += words[l] == '|';
	for (k = 0; k < n; k++, w += l + 1) {
		l = strcspn(w, "|");
		if (strlen(v) == l && strncmp(v, w, l) == 0)
			found = k;
		if (at < len)
			at += (size_t)kr_snprintf(buf + at, len - at, "%s%.*s",
						  k == 0 ? "" : k + 1 < n ? ", " : " or ", (int)l, w);
	}
	return found;
}

/* Stores v in the row's field, an integer of the field's size (all hold non-negative values). */
static void store(struct options *o, const struct flag *f, long long v)
{
	char *p = (char *)o + f->off;
	int i = (int)v;
	long l = (long)v;

	if (f->size == sizeof(int))
		memcpy(p, &i, sizeof(i));
	else
		memcpy(p, &l, sizeof(l));
}

/* --signal SIG:PID or SIG:@PIDFILE. Returns 0 or an exit code. */
static int set_signal(struct options *o, const char *v)
{
	char name[16];
	const char *colon = strchr(v, ':');
	size_t nl = colon ? (size_t)(colon - v) : 0;

	if (!colon || nl == 0 || nl >= sizeof(name))
		return usage_error("--signal must be SIG:PID or SIG:@PIDFILE, not '%s'", v);
	memcpy(name, v, nl);
	name[nl] = '\0';
	/* Without hooks the flag is refused by name later: no signal table needed. */
	o->hooks.signal = KR_WITH_HOOKS ? kr_port_signal_number(name) : 1;
	if (o->hooks.signal <= 0)
		return usage_error("--signal: unknown signal '%s'", name);
	if (colon[1] == '@' && colon[2]) {
		o->hooks.signal_pidfile = colon + 2;
	} else {
		long pid = kr_parse_num(colon + 1, 1, 0x7fffffff);

		if (pid < 0)
			return usage_error("--signal: '%s' is not a pid or @pidfile", colon + 1);
		o->hooks.signal_pid = (int)pid;
	}
	return 0;
}

/* Checks and stores row k's value v (a: the argument as given). Returns 0 or an exit code. */
static int set_flag(struct options *o, int k, const char *a, const char *v)
{
	const struct flag *f = &flags[k];
	const char *name = kr_str_nth(flag_names, (size_t)k), *text = kr_str_nth(flag_texts, (size_t)k);
	char buf[64];
	long n;

	switch (f->kind) {
	case F_STR:
		if ((*text && !*v) || (f->hi && strlen(v) >= (size_t)f->hi)) {
			if (f->bits & F_GOT)
				return usage_error("%s needs %s, got '%s'", name, text, v);
			if (!*v)
				return usage_error("%s needs %s", name, text);
			return usage_error("%s is too long: '%.40s...'", name, v);
		}
		memcpy((char *)o + f->off, &v, sizeof(v));        /* a const char * field */
		break;
	case F_SET:
		store(o, f, 1);
		break;
	case F_NUM:
	case F_VERBOSITY:
		n = kr_parse_num(v, f->bits & F_LO1 ? 1 : 0, f->hi);
		if (n < 0 && f->bits & F_WHAT)
			return usage_error("%s must be %s, not '%s'", name, text, v);
		if (n < 0)
			return usage_error("%s must be %d to %d%s, not '%s'", name, f->bits & F_LO1 ? 1 : 0, f->hi,
					   text, v);
		store(o, f, f->bits & F_MS ? n * 1000 : n);
		if (f->kind == F_VERBOSITY)
			o->cfg.log_level = (int)n;
		break;
	case F_ENUM:
		n = choice(text, v, buf, sizeof(buf));
		if (n < 0)
			return usage_error("%s must be %s, not '%s'", name, buf, v);
		store(o, f, f->bits & F_NEG ? 1 - n : n);
		break;
	case F_SIGNAL:
		return set_signal(o, v);
	case F_CHILD_SIGNAL:
		n = KR_WITH_HOOKS ? kr_port_signal_number(v) : 1;
		if (n <= 0)
			return usage_error("--child-signal: unknown signal '%s'", v);
		store(o, f, n);
		break;
	case F_MODE: {
		char *end;
		long long mode = kr_strtoll(v, &end, 8);

		if (!*v || *end || mode < 0 || mode > 07777)
			return usage_error("%s must be an octal mode like 0640, not '%s'", a, v);
		store(o, f, mode);
		break;
	}
	case F_BYTES: {
		unsigned long long b = parse_bytes(v);

		if (b < (unsigned long long)f->hi * KR_ARENA_MIN || b > KR_ARENA_BYTES_CEILING)
			return usage_error("%s must be %uK to %lluM (K, M, G suffixes), not '%s'", name,
					   (unsigned)(f->hi * KR_ARENA_MIN / 1024),
					   (unsigned long long)(KR_ARENA_BYTES_CEILING >> 20), v);
		store(o, f, (long long)b);
		break;
	}
	}
	if (f->bits & F_SUP)
		o->sup_flag = name;
	return 0;
}

static int parse_flags(int argc, char **argv, struct options *o, int *nres)
{
	int i, r;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int k;

		if (strcmp(a, "--") == 0) {
			/* The rest is the supervised program's, untouched. */
			if (i + 1 >= argc || !argv[i + 1][0])
				return usage_error("-- must be followed by a PROGRAM to run%s", "");
			if (argc - i - 1 > KR_SUPERVISE_ARGS)
				return usage_error("-- PROGRAM has more than %d words (KR_SUPERVISE_ARGS)",
						   KR_SUPERVISE_ARGS);
			o->program.argv = (const char *const *)argv + i + 1;
			break;
		}
		k = find_flag(argc, argv, &i, &v);
		if (k >= 0) {
			r = set_flag(o, k, a, v);
			if (r)
				return r;
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
	struct kr_hooks_stats hs;
	int r;

	once_hooks = 1;
	r = kr_client_hooks_wait(client);
	if (r < 0) {
		kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
		return EXIT_FATAL;
	}
	if (once_failed)
		return EXIT_FATAL;
	if (r == 1)
		return 0;      /* SIGTERM while the hooks ran: a clean stop */
	kr_client_hooks_stats(client, &hs);
	if (KR_WITH_HOOKS && hs.failures) {
		if (hs.command && hs.last_exit)
			kr_log(KR_LOG_ERROR, "--once: the --exec command %s exited with %d",
			       hs.command, hs.last_exit);
		else
			kr_log(KR_LOG_ERROR, "--once: the hook failed (see above)");
		return EXIT_FATAL;
	}
	if (KR_WITH_HOOKS && hs.batches_dropped) {
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
static void once_refused_line(const char *flag)
{
	struct kr_dir_stats st;
	unsigned long long n = kr_client_dir_stats(client, &st) == 0 ? st.errors + st.conflicts : 0;

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
	const char *flag = !KR_WITH_LISTEN && o->serve.address ? "--listen"
		: !KR_WITH_STATE && o->cfg.state_dir && *o->cfg.state_dir ? "--state-dir"
		: !KR_WITH_DIR && o->dir.path ? "--dir"
		: !KR_WITH_HOOKS && o->hooks.exec ? "--exec"
		: !KR_WITH_HOOKS && o->hooks.signal ? "--signal"
		: !KR_WITH_HOOKS && o->hooks.http_post ? "--http-post"
		: !KR_WITH_HOOKS && o->program.argv ? "-- PROGRAM"
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
	o->dir = sidecar.dir;              /* FOLDER and the rest */
	o->hooks = sidecar.hooks;          /* SCRIPT, REQ_URL and its request */
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
		o->serve.address = sidecar.health_listen;
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
	mem = reserve(need);
	if (!mem)
		return EXIT_FATAL;
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

		memset(&spec, 0, sizeof(spec));
		if (o->sidecar)
			spec = sidecar.res[i];     /* one per namespace and type, with its selectors */
		else
			spec.name = resource_args[i];
		if (kr_client_add(client, &spec, err, sizeof(err)) < 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return EXIT_USAGE;
		}
	}
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
	struct kr_hooks_stats hs;
	int r, children = KR_WITH_HOOKS && (o->hooks.exec || o->program.argv);

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
	if (KR_WITH_HOOKS && o->hooks.signal_pidfile)
		sb.read_files[0] = o->hooks.signal_pidfile;
	sb.signal_others = KR_WITH_HOOKS && o->hooks.signal;
	if (KR_WITH_HOOKS && o->program.argv)
		sb.programs[0] = o->program.argv[0];
	kr_client_hooks_stats(client, &hs);
	if (KR_WITH_HOOKS && o->hooks.exec)
		sb.programs[1] = hs.command;
	if (KR_WITH_HOOKS && hs.post_url) {
		sb.tcp_ports[0] = (uint16_t)hs.post_port;
		sb.lookups = kr_port_parse_ip(hs.post_host, 0, &a) != 0;
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
	struct kr_program_status ps;
	char err[512];
	size_t i, serve_len = 0;
	void *serve_mem = NULL;
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
	kr_endpoint_config_init(&o.serve);
	kr_dir_config_init(&o.dir);
	kr_hooks_config_init(&o.hooks);        /* --debounce 1000 */
	kr_program_config_init(&o.program);    /* --child-signal HUP, --grace 10 */
	o.verbosity = 1;
	o.timeout_s = 60;
	o.log_level = -1;
	if (budget) {
		/* Only the capacity flags matter here; the others are checked when running. */
		for (i = 1; i < (size_t)argc && strcmp(argv[i], "--") != 0; i++) {
			int j = (int)i;
			const char *v;

			if ((v = value_of(argc, argv, &j, "--max-objects", 0)))
				o.cfg.max_objects = (size_t)kr_parse_num(v, 0, (long)KR_MAX_OBJECTS_CEILING + 1);
			else if ((v = value_of(argc, argv, &j, "--arena-bytes", 0)))
				o.cfg.arena_bytes = (size_t)parse_bytes(v);
			else if ((v = value_of(argc, argv, &j, "--memory", 0)))
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
	if (o.sup_flag && !o.program.argv)
		return usage_error("%s is for supervisor mode: give -- PROGRAM [ARGS ...] last", o.sup_flag);
	if (o.cfg.max_stale_s >= 0 && !(o.cfg.state_dir && *o.cfg.state_dir))
		return usage_error("--max-stale needs --state-dir: there is no mirror to restore%s", "");
	if (o.once && o.program.argv)
		return usage_error("--once and -- PROGRAM exclude each other: --once exits after one "
				   "sync%s", "");
	kr_set_log_level(o.verbosity == 0 ? KR_LOG_WARN : o.verbosity == 1 ? KR_LOG_INFO
			 : o.verbosity == 2 ? KR_LOG_DEBUG : KR_LOG_TRACE);
	o.cfg.stop_after_sync = o.once;
	r = make_client(&o, nres);
	if (r)
		return r;
	if (o.log_level >= 0)
		kr_set_log_level(o.log_level);
	for (i = 0; o.sidecar && i < (size_t)sidecar.nnotes; i++)
		kr_log(KR_LOG_INFO, "%s", sidecar.notes[i]);
	nres = kr_client_resources(client);
	if (kr_client_signals(client, on_signal, NULL) != 0) {
		kr_dprintf(2, "kreflect: unable to set up signal handling\n");
		return EXIT_FATAL;
	}
	if (KR_WITH_DIR && o.dir.path) {
		size_t need = kr_dir_memory(&o.dir);
		void *mem = reserve(need);

		if (!mem)
			return EXIT_FATAL;
		r = kr_client_dir(client, mem, need, &o.dir, err, sizeof(err));
		if (r != 0) {
			kr_dprintf(2, "kreflect: %s %s: %s\n", o.sidecar ? "FOLDER" : "--dir", o.dir.path, err);
			return r == KR_ENOSPC ? EXIT_FATAL : EXIT_USAGE;
		}
	}
	if (KR_WITH_HOOKS && (o.hooks.exec || o.hooks.signal)) {
		/* After the files: a notification means they are in place. */
		struct kr_hooks_config h = o.hooks;

		h.http_post = NULL;
		r = add_hooks(&h, o.sidecar ? "SCRIPT" : "--exec");
		if (r)
			return r;
	}
	if (KR_WITH_HOOKS && o.hooks.http_post) {
		const char *flag = o.sidecar ? "REQ_URL" : "--http-post";
		struct kr_hooks_config h = o.hooks;
		struct kr_hooks_stats hs;

		h.exec = NULL;
		h.signal = 0;
		r = add_hooks(&h, flag);
		if (r)
			return r;
		kr_client_hooks_stats(client, &hs);
		if (!hs.post_loopback)
			kr_log(KR_LOG_WARN, "%s to %s: not a loopback address; %s travel unencrypted",
			       flag, hs.post_url, o.sidecar ? "the request and its credentials"
			       : "the changed keys");
	}
	if (KR_WITH_HOOKS && o.program.argv) {
		size_t need = kr_program_memory(&o.program);
		void *mem = reserve(need);

		if (!mem)
			return EXIT_FATAL;
		o.program.debounce_ms = o.hooks.debounce_ms;
		o.program.on_end = on_program_end;
		/* After the files and hooks: the program starts with everything in place. */
		r = kr_client_program(client, mem, need, &o.program, err, sizeof(err));
		if (r == KR_ENOSPC) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return EXIT_FATAL;
		}
		if (r)
			return usage_error("-- PROGRAM: %s", err);
	}
	/* Its lines written before the files' batch is put in place, as they come. */
	if (!o.output_none && add_jsonl() != 0)
		return EXIT_FATAL;
	/*
	 * The endpoint's memory (its state, then --listen-max-conns connections) is
	 * reserved with the rest, before the start, and only for --listen: kept out
	 * of .bss, it costs a device without --listen no address space.
	 */
	if (KR_WITH_LISTEN && o.serve.address) {
		serve_len = kr_endpoint_memory(&o.serve);
		if (serve_len && !(serve_mem = reserve(serve_len)))
			return EXIT_FATAL;
	}
	/* The outputs are in place before the start: a restored mirror reaches them first. */
	r = kr_client_start(client, err, sizeof(err));
	if (r != 0) {
		kr_dprintf(2, "kreflect: %s\n", err[0] ? err : kr_strerror(r));
		/* No such resource, or a state directory that cannot be used: usage; else the server. */
		return r == KR_ENOENT || r == KR_EINVAL ? EXIT_USAGE : EXIT_FATAL;
	}
	if (KR_WITH_LISTEN && o.serve.address) {
		r = kr_client_endpoint(client, serve_mem, serve_len, &o.serve, err, sizeof(err));
		if (r == KR_EIO && o.sidecar) {
			/* As k8s-sidecar's health thread: a port taken (two sidecars in one pod) is
			 * not fatal, the files are what the sidecar is for. */
			kr_log(KR_LOG_WARN, "%s; going on without the health endpoint (HEALTH_PORT)", err);
		} else if (r != 0) {
			kr_dprintf(2, "kreflect: %s\n", err);
			return r == KR_EIO ? EXIT_FATAL : EXIT_USAGE;
		} else {
			char where[128];
			int token = 0;

			kr_client_endpoint_where(client, where, sizeof(where), &token);
			kr_log(KR_LOG_INFO, "serving %s on %s%s%s", o.serve.health_only ? "health checks"
			       : "the mirror", where, o.serve.cert_file ? " over TLS" : "",
			       token ? " (bearer token required)" : "");
			if (o.serve.insecure && !o.serve.cert_file)
				kr_log(KR_LOG_WARN, "--listen-insecure: %s is served without TLS: tokens and "
				       "objects cross the network in clear", where);
		}
	} else if (o.serve.token_file || o.serve.max_conns || o.serve.serve_secrets ||
		   o.serve.health_only || o.serve.cert_file || o.serve.key_file ||
		   o.serve.client_ca_file || o.serve.insecure || o.serve.access_file) {
		return usage_error("the --listen-* flags and --serve-secrets need --listen%s", "");
	}
	r = apply_sandbox(&o);
	if (r)
		return r;
	/* Slot 0 of a started client, at most 86400 s: it cannot fail. */
	if (o.once)
		(void)kr_client_timer(client, 0, (long)o.timeout_s * 1000, on_once_timeout, NULL);
	if (kr_client_run(client) != 0) {
		kr_log(KR_LOG_ERROR, "unable to wait for events: %s", kr_port_last_error());
		return EXIT_FATAL;
	}
	restored_warnings();
	/* Closes the endpoint, writes the last snapshot, puts the last batch of files in place,
	 * writes the last JSON lines. */
	kr_client_stop(client);
	if (o.once) {
		/* Not ready and not failed: a signal stopped it, a clean stop. */
		r = once_failed ? EXIT_FATAL : kr_client_ready(client) <= 0 ? 0
		    : partial_mirror() ? EXIT_FATAL : run_hooks_once();
		if (KR_WITH_DIR && o.dir.path)
			once_refused_line(o.sidecar ? "FOLDER" : "--dir");
		return r;
	}
	if (kr_client_program_status(client, &ps) == 0 && ps.ended)
		return ps.start_error == KR_ENOENT ? EXIT_NOT_FOUND
		       : ps.start_error ? EXIT_CANNOT_RUN : ps.code;
	return once_failed ? EXIT_FATAL : 0;
}
