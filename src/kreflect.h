/*
 * kreflect: a Kubernetes reflector as a C library.
 *
 * One client lists and watches resources on a Kubernetes API server over
 * HTTPS, keeps an exact mirror of them in memory the caller gives it, and
 * hands every change to callbacks. No heap, no threads: everything lives in
 * one block of caller memory (kr_client_memory() says how much), and the
 * client runs either its own poll() loop (kr_client_run) or inside the
 * host's loop (kr_client_fds + kr_client_process, as libcurl's multi API).
 *
 *     struct kr_config cfg;
 *     kr_config_init(&cfg);
 *     cfg.kubeconfig = "/etc/gw/kubeconfig";
 *     size_t need = kr_client_memory(&cfg);           // then give it need bytes
 *     kr_client_init(&c, mem, need, &cfg, err, sizeof(err));
 *     kr_client_add_resource(c, "configmaps", err, sizeof(err));
 *     kr_client_on_event(c, on_change, NULL);
 *     kr_client_start(c, err, sizeof(err));
 *     kr_client_run(c);                                // until kr_client_stop()
 *
 * Errors: 0 (or a count) is success, a negative KR_E... code is failure;
 * kr_strerror() names it. Functions taking err/errlen also write a one-line
 * message there ("" on success). A NULL client or a missing required
 * argument is KR_EINVAL; a call in the wrong state (see each function) is
 * KR_ESTATE; a caller buffer too small is KR_ENOSPC. Misuse never crashes.
 *
 * Callbacks run inside kr_client_run/kr_client_process. From a callback
 * only these calls are legal: kr_client_stop, kr_client_wakeup,
 * kr_client_get, kr_client_foreach, kr_client_status, kr_client_resource_name,
 * kr_client_ready, kr_client_timer, kr_client_dir_stats, kr_client_hooks_stats,
 * kr_client_program_status and kr_object_field (and the ones that take no
 * client);
 * any other returns KR_ESTATE. Views
 * (const char * + length) passed to callbacks or filled by kr_client_get are
 * valid until the callback returns or until the client next runs.
 *
 * C99; usable from C++.
 *
 * ABI (1.0 and on): libkreflect.so.1 keeps its soname while programs built
 * against any 1.x header keep working. How the structs evolve:
 *  - struct kr_config starts with struct_size, which kr_config_init() (an
 *    inline wrapper: the size is the caller's sizeof, compiled into the
 *    program) fills. A newer library reads an older, shorter struct and
 *    gives the fields it lacks their defaults; an older library takes a
 *    newer, longer one only if the fields it does not know are all zero
 *    (else KR_ENOTSUP), as Linux's extensible system calls (openat2,
 *    clone3) do. Fields are only ever added at the end.
 *  - struct kr_status is filled up to the caller's sizeof (kr_client_status
 *    is an inline wrapper passing it), so it can grow at the end too.
 *  - structs the library hands to callbacks (kr_event, kr_state_change,
 *    kr_object) only grow at the end: read the fields you know.
 *  - struct kr_endpoint_config, kr_dir_config, kr_hooks_config and
 *    kr_program_config (1.1) grow as kr_config does.
 *  - struct kr_resource_spec, kr_listen_config, kr_client_fd, kr_dir_stats,
 *    kr_hooks_stats and kr_program_status are frozen:
 *    a new option comes as a new call, not a new field.
 * Why a size field and not opaque setters (libcurl's curl_easy_setopt with
 * CURLOPT_* numbers, mosquitto's mosquitto_int_option): setters need the
 * options object to live somewhere, and this library has no heap; they also
 * turn every misspelt option into a run-time error. c-ares' ares_init_options
 * keeps a struct and says which fields are set with a bit mask (optmask):
 * the mask is one more thing a caller can get wrong, where a zero or default
 * field already says "not set", and c-ares locked that struct at 1.6.0 (its
 * later options are calls). A size keeps the plain struct that 0.x programs
 * wrote, and makes growing it safe both ways.
 * tests/abi/ pins every public struct's size and offsets and every
 * prototype; `make test` fails when one changes incompatibly.
 *
 * Process-wide effects (shared by every client of the process):
 *  - one static heap for TLS (mbedTLS's buffer allocator), outside the
 *    memory kr_client_memory() counts;
 *  - the log level and the log handler (kr_set_log_handler);
 *  - children forked for name lookups and, with a state directory and
 *    state_sync_inline 0, for each snapshot's fsync and rename: a host
 *    that reaps every child (waitpid(-1, ...)) takes their exit status
 *    from the client, which then sees the lookup or the write fail;
 *  - SIGPIPE is ignored once a client starts (a closed socket is an error
 *    code, not a signal).
 */
#ifndef KREFLECT_H
#define KREFLECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KR_VERSION "1.1.0"
#define KR_VERSION_MAJOR 1
#define KR_VERSION_MINOR 1
#define KR_VERSION_PATCH 0
/* 0xMMmmpp: compare at compile time (#if KR_VERSION_NUM >= 0x010100). */
#define KR_VERSION_NUM ((KR_VERSION_MAJOR << 16) | (KR_VERSION_MINOR << 8) | KR_VERSION_PATCH)

/*
 * The version of the library the program runs with (which may be newer than
 * the header it was built with): the string ("1.1.0"), and in *num, if not
 * NULL, its KR_VERSION_NUM.
 */
const char *kr_version(int *num);

enum kr_err {
	KR_OK = 0,
	KR_EINVAL = -1,     /* bad argument or malformed input */
	KR_ENOSPC = -2,     /* a fixed capacity is exhausted */
	KR_EIO = -3,        /* an operating-system call failed */
	KR_ETLS = -4,       /* TLS handshake, verification or record failure */
	KR_EPROTO = -5,     /* the peer broke HTTP, chunking or JSON framing */
	KR_ETIMEDOUT = -6,  /* a deadline passed */
	KR_ECLOSED = -7,    /* the peer closed the connection */
	KR_ETOOBIG = -8,    /* an item is larger than its configured bound */
	KR_ENOENT = -9,     /* no such file, name or object */
	KR_EAUTH = -10,     /* credentials refused */
	KR_ESTATE = -11,    /* call not valid in the current state */
	KR_ECANCELED = -12, /* abandoned by the caller */
	KR_ENOTSUP = -13,   /* the feature is not built into this library
	                       (config/README.md "Leaving features out") */
};

/* A short, static, human-readable name for a KR_E... code (never NULL). */
const char *kr_strerror(int err);

/* The build target ("x86_64", "aarch64", "armv7", ...), fixed at compile time. */
const char *kr_target(void);

/* Since 1.1: the version of the mbedTLS the library was built with ("3.6.2"). */
const char *kr_mbedtls_version(void);

/* --- configuration ------------------------------------------------------------ */

enum kr_watch_list_mode { KR_WL_AUTO, KR_WL_ON, KR_WL_OFF };

/*
 * Everything a client needs before it starts. kr_config_init() fills the
 * defaults; set what you need. Strings are the caller's and are read (and
 * copied where kept) by kr_client_init and kr_client_start only.
 *
 * Where to connect, in kubectl's order: `kubeconfig` (a path; several
 * joined by ':' are merged), else $KUBECONFIG, else in-cluster
 * ($KUBERNETES_SERVICE_HOST and the service account's files), else
 * ~/.kube/config; then `server`, `token_file`, `ca_file`, the client
 * certificate and `insecure_skip_tls_verify` override the chosen source
 * field by field. With `no_auto_source` set, only the fields given here
 * count (firmware that has no kubeconfig and wants no environment lookups).
 * HTTPS_PROXY/NO_PROXY (or the cluster's proxy-url) choose a proxy.
 */
struct kr_config {
	size_t struct_size;            /* sizeof(struct kr_config), set by kr_config_init */

	/* connection */
	const char *kubeconfig;        /* path, or paths joined by ':' */
	const char *context;           /* kubeconfig context; NULL: current-context */
	const char *server;            /* https://host[:port] (http:// only if named) */
	const char *token;             /* bearer token itself (never logged) */
	const char *token_file;        /* bearer token file, re-read on change and after a 401 */
	const char *ca_file;           /* CA bundle (PEM) */
	const char *cert_file;         /* client certificate (PEM) */
	const char *key_file;          /* client key (PEM) */
	const unsigned char *ca_pem;   /* or the CA bundle's bytes (with ca_pem_len) */
	size_t ca_pem_len;
	int insecure_skip_tls_verify;  /* 1: do not verify the server (logged per connection) */
	int no_auto_source;            /* 1: no kubeconfig/environment lookup */

	/* what */
	const char *ns;                /* namespace; NULL: the source's, else "default" */
	int all_namespaces;
	const char *label_selector;    /* "a=b,c!=d" */
	const char *field_selector;    /* "metadata.name=x" */

	/* how (client-go's defaults) */
	enum kr_watch_list_mode watch_list; /* AUTO: watch-list, else paginated LIST (remembered) */
	int page_size;                 /* 0: 500, as client-go */
	int resync_s;                  /* re-deliver every object as RESYNC this often; 0 off */
	int initial_events_timeout_s;  /* watch-list quiet time before LIST; 0: 30 */
	int watch_idle_timeout_s;      /* a silent watch before the bookmark cadence is known; 0: default */
	int watch_timeout_s;           /* timeoutSeconds asked of the server, in [s, 2s); 0: 300 */
	int keep_managed_fields;       /* 1: keep metadata.managedFields */
	int gzip;                      /* 1: ask for gzip LIST bodies (watches never); default
					  1, or 0 in a build WITHOUT=gzip (KR_ENOTSUP if set) */
	int stop_after_sync;           /* 1: kr_client_run returns once every resource synced */
	int log_level;                 /* -1 none, 0 warnings, 1 info (default), 2 debug, 3 trace */

	/* persistence (src/README.md "The state directory"): NULL or "" off */
	const char *state_dir;         /* snapshots of the mirror: a restart watches from where it
					  stopped, with no list (default KR_STATE_DIR_DEFAULT, "") */
	int state_interval_s;          /* at most one write per interval; 0: 60 */
	long max_stale_s;              /* server unreachable at start: a restored mirror this young
					  counts as synced; -1 (default): never */
	int state_sync_inline;         /* 1: each write's fsync and rename inside the loop; 0
					  (default): in a short-lived child, the loop goes on */

	/* capacities (0: the compile-time default); never above the compile-time ceiling */
	size_t max_objects;            /* objects indexed, held or not, over all resources */
	size_t arena_bytes;            /* object bytes held */
	size_t memory_bytes;           /* or one budget for both: split by kr_client_memory() */
};

/*
 * Fills cfg with the defaults (every field zero or the default above) and
 * sets cfg->struct_size. A configuration not made by it (struct_size 0) is
 * refused by kr_client_memory (0) and kr_client_init (KR_EINVAL).
 */
void kr_config_init_size(struct kr_config *cfg, size_t size);
static inline void kr_config_init(struct kr_config *cfg)
{
	kr_config_init_size(cfg, sizeof(*cfg));
}

/* --- the client ---------------------------------------------------------------- */

struct kr_client;                  /* opaque; lives in the memory given to kr_client_init */

/*
 * Bytes of memory a client with this configuration needs (the client
 * itself, the object index and the arena), rounded up to 16; 0 if the
 * configuration asks for more than the compile-time ceilings allow. Also
 * resolves memory_bytes into max_objects/arena_bytes the way init will.
 * Pages never written (most of the arena, until it fills) cost no RAM on
 * an MMU system.
 */
size_t kr_client_memory(const struct kr_config *cfg);

/*
 * Since 1.1: the memory budget, item by item (`kreflect --print-budget`):
 * calls fn(arg, name, bytes, reserved, why) for each, in order. reserved 1:
 * what kr_client_memory counts ("arena", "index", "client"), for cfg's
 * capacities; 0: static memory (.data + .bss) of a program built as
 * kreflect is: the TLS heap, and the CLI's outputs ("jsonl", "dir-sink",
 * "listen", ...; 0 bytes when not built in). why says what the bytes are
 * (may hold newlines). *objects and *arena (either may be NULL) get the
 * capacities cfg resolves to. Returns how many items fn was given, or
 * KR_EINVAL (no cfg or fn, cfg not made by kr_config_init, capacities above
 * the ceilings), fn then not called.
 */
typedef void (*kr_budget_fn)(void *arg, const char *name, size_t bytes, int reserved, const char *why);
int kr_client_budget(const struct kr_config *cfg, size_t *objects, size_t *arena, kr_budget_fn fn,
		     void *arg);

/*
 * Sets up a client in mem[0..len) (16-byte aligned, at least
 * kr_client_memory(cfg) bytes; the caller keeps it until the client is no
 * longer used, and frees nothing: there is nothing to free). Reads the
 * configuration sources (kubeconfig, in-cluster files, PEM files) and sets
 * up TLS; does no network I/O. *out gets the client. Errors: KR_EINVAL (a
 * bad field, message in err), KR_ENOSPC (len too small), KR_ENOENT or KR_EIO
 * (a file), KR_ETLS (credentials mbedTLS refused).
 */
int kr_client_init(struct kr_client **out, void *mem, size_t len, const struct kr_config *cfg,
		   char *err, size_t errlen);

/*
 * Adds a resource to mirror, before kr_client_start: a built-in name
 * ("configmaps", "cm", "deployments.apps", "apps/v1/deployments") or any
 * other the server serves, resolved by discovery at start
 * ("widgets.example.com", "example.com/v1/widgets"). Returns its index
 * (0, 1, ...: the `res` of events), or KR_EINVAL (bad name), KR_ENOSPC
 * (more than the compile-time resource table), KR_ESTATE (started).
 * With none added, the compile-time table (config/resources.def) is used.
 */
int kr_client_add_resource(struct kr_client *c, const char *name, char *err, size_t errlen);

/*
 * The same with its own namespace and selectors (NULL: the configuration's),
 * so one client can mirror, say, ConfigMaps of two namespaces.
 */
struct kr_resource_spec {
	const char *name;
	const char *ns;
	int all_namespaces;
	const char *label_selector;
	const char *field_selector;
};
int kr_client_add(struct kr_client *c, const struct kr_resource_spec *spec, char *err, size_t errlen);

/* What a change callback receives. Views valid during the call only. */
enum kr_event_type {
	KR_EV_ADDED,
	KR_EV_MODIFIED,
	KR_EV_DELETED,                 /* obj is the last version held */
	KR_EV_RESYNC,                  /* periodic re-delivery of a held object (resync_s) */
	KR_EV_SYNCED,                  /* a (re)list of one resource completed */
};

struct kr_event {
	enum kr_event_type type;
	int res;                       /* resource index */
	const char *resource;          /* "configmaps", "deployments.apps" */
	const char *key;               /* "namespace/name"; NULL for SYNCED */
	const char *rv;                /* resourceVersion of the object or of the list */
	const char *obj;               /* object JSON (not NUL-terminated); NULL for SYNCED */
	size_t objlen;
	size_t count;                  /* SYNCED: objects of the resource the mirror knows,
					  held or present but not held */
	int partial;                   /* SYNCED: the mirror lacks objects: some could not
					  be read or indexed, or are present but not held
					  (arena full, the resource's share used, larger
					  than the space for one); nothing may be concluded
					  from an object's absence (kr_client_status tells
					  when a watch event makes it partial later) */
	int restored;                  /* ADDED: replayed from the state directory at start
					  (the outputs had it before the restart); SYNCED: the
					  mirror is the restored one, not yet confirmed by
					  the server ("state":"restored" rather than "live") */
	int warm;                      /* SYNCED: no list preceded it, the outputs already hold
					  every object (restored, or resumed by a watch from
					  the saved resourceVersion): nothing to notify */
};

/* The name of an event type as printed ("ADDED"). */
const char *kr_event_name(enum kr_event_type t);

/*
 * Calls fn for every change, in order, after the callbacks added before it.
 * Up to KR_CLIENT_MAX_CALLBACKS callbacks. Returns 0, KR_ENOSPC, KR_EINVAL or
 * KR_ESTATE (from a callback).
 */
#define KR_CLIENT_MAX_CALLBACKS 8
int kr_client_on_event(struct kr_client *c, void (*fn)(void *arg, const struct kr_event *ev),
		       void *arg);

/*
 * Why a resource is backing off, as data: the class of its last failure.
 * The CLI's log lines and /metrics (kreflect_failures_total) use the same
 * names (kr_failure_name). Values are never renumbered; new ones are added
 * at the end, so treat an unknown value as KR_FAIL_OTHER.
 */
enum kr_failure {
	KR_FAIL_NONE = 0,
	KR_FAIL_NETWORK,                /* refused, unreachable, reset, a deadline with no answer */
	KR_FAIL_DNS,                    /* the server's name did not resolve */
	KR_FAIL_TLS,                    /* handshake or verification failed */
	KR_FAIL_UNAUTHORIZED,           /* HTTP 401: credentials refused */
	KR_FAIL_FORBIDDEN,              /* HTTP 403: RBAC does not allow it */
	KR_FAIL_NOT_FOUND,              /* HTTP 404: the resource is not served */
	KR_FAIL_THROTTLED,              /* HTTP 429 (or an ERROR event 429), Retry-After */
	KR_FAIL_SERVER,                 /* HTTP 5xx */
	KR_FAIL_EXPIRED,                /* HTTP 410 or an ERROR event 410: relist */
	KR_FAIL_PROTOCOL,               /* broken HTTP, chunking, JSON; another 4xx or ERROR */
	KR_FAIL_CAPACITY,               /* an object could not be held: relist for room */
	KR_FAIL_OTHER,                  /* none of the above (a very short watch, ...) */
	KR_FAIL_N                       /* the count; not a class */
};

/* The class's short name ("forbidden"); "other" for an unknown value. */
const char *kr_failure_name(enum kr_failure f);

/* What a resource's reflector is doing. */
enum kr_health {
	KR_HEALTH_STARTING,             /* not asked yet */
	KR_HEALTH_CONNECTED,            /* the server accepted a list, watch-list or watch */
	KR_HEALTH_SYNCED,               /* a (re)list completed */
	KR_HEALTH_BACKOFF,              /* waiting before the next attempt */
	KR_HEALTH_STOPPED,
};

struct kr_state_change {
	int res;                       /* resource index */
	const char *resource;
	enum kr_health state;
	const char *reason;            /* BACKOFF: why ("watch expired", ...); else "" */
	int64_t next_attempt_ms;       /* BACKOFF: milliseconds from now until the next try */
	/* since 1.0 */
	enum kr_failure failure;       /* BACKOFF: the class of the failure; else KR_FAIL_NONE */
	int http_status;               /* BACKOFF: the HTTP status (or an ERROR event's code), 0 none */
	const char *status_reason;     /* BACKOFF: the server's Status reason ("Forbidden",
					  "Expired"), "" if it sent none */
};

/* Calls fn on every state change of any resource. One callback; NULL removes it. */
int kr_client_on_state(struct kr_client *c, void (*fn)(void *arg, const struct kr_state_change *st),
		       void *arg);

/*
 * Resolves discovered resources (blocking, at most 15 s per name, before
 * any other work) and starts every reflector; the loop does the rest.
 * Returns 0, KR_ESTATE (already started, or stopped), KR_ENOENT (a
 * resource the server does not serve), KR_EINVAL (the state directory
 * cannot be used), or the connection's error (the server did not answer
 * discovery).
 */
int kr_client_start(struct kr_client *c, char *err, size_t errlen);

/*
 * Runs the client's own poll() loop until kr_client_stop() (from a
 * callback) or, with stop_after_sync, until every resource synced: then
 * returns 0. Returns KR_RUN_WOKEN after kr_client_wakeup() (from a signal
 * handler or another thread; call it again to go on), KR_EIO if poll()
 * failed, KR_ESTATE if not started or called from a callback.
 */
int kr_client_run(struct kr_client *c);

/*
 * Since 1.1: the host's timers on the client's loop, for a host whose loop
 * is kr_client_run (a host with its own loop keeps its own timers beside
 * kr_client_fds' timeout). KR_CLIENT_MAX_TIMERS slots, 0 to
 * KR_CLIENT_MAX_TIMERS - 1: kr_client_timer(c, slot, after_ms, fn, arg)
 * arms slot to call fn(arg, slot) once, after_ms milliseconds from now (0:
 * in the loop's next pass), in place of what it held; fn NULL disarms it.
 * fn runs inside kr_client_run/kr_client_process like the other callbacks
 * (the same calls are legal, kr_client_timer too: a periodic timer re-arms
 * itself). kr_client_stop leaves the slots armed, but a stopped client runs
 * no loop to fire them. Returns 0, KR_EINVAL (no client, slot out of range,
 * after_ms below 0 or above 2147483647: about 24 days), KR_ESTATE (stopped),
 * KR_ENOSPC (the loop's timer table is full).
 */
#define KR_CLIENT_MAX_TIMERS 4
typedef void (*kr_timer_fn)(void *arg, int slot);
int kr_client_timer(struct kr_client *c, int slot, long after_ms, kr_timer_fn fn, void *arg);

/*
 * Closes every connection and cancels every timer of its own (the host's,
 * kr_client_timer, stay armed: nothing runs them); no event follows.
 * Legal from a callback (takes effect when it returns). Idempotent.
 * With a state directory, writes one last snapshot first if the mirror
 * moved since the last one (inline: its fsync and rename before it
 * returns), and waits for a snapshot's child still running.
 */
int kr_client_stop(struct kr_client *c);

/* --- the host's loop -------------------------------------------------------- */

#define KR_POLLIN 1
#define KR_POLLOUT 2
#define KR_POLLERR 4

struct kr_client_fd {
	int fd;
	short events;                  /* KR_POLLIN | KR_POLLOUT, to wait for */
	short revents;                 /* filled by the host after its poll() */
};

/*
 * The descriptors the client waits on now (at most max; each with the
 * events to wait for) and *timeout_ms, how long the host may sleep before
 * calling kr_client_process even if nothing is ready (-1: no deadline; 0:
 * bytes are already buffered, do not sleep). Call before every poll(): the
 * set changes as connections come and go. Returns the count, KR_ENOSPC if
 * max is too small (max >= KR_CLIENT_MAX_FDS always suffices), KR_ESTATE.
 */
#define KR_CLIENT_MAX_FDS 32
int kr_client_fds(struct kr_client *c, struct kr_client_fd *fds, int max, int *timeout_ms);

/*
 * Hands back what the host's poll() reported for fds[0..n) (the array
 * from kr_client_fds, revents filled; order and extra entries of the
 * host's own do not matter), then fires due timers. Call it also when the
 * timeout passed with nothing ready (n may be 0). Returns callbacks made
 * (>= 0), KR_ESTATE (not started, or from a callback).
 */
int kr_client_process(struct kr_client *c, const struct kr_client_fd *fds, int n);

/* --- reading the mirror ------------------------------------------------------ */

struct kr_object {
	int res;
	const char *key;               /* "namespace/name" */
	const char *rv;
	const char *obj;               /* NULL when the object is known but too large to hold */
	size_t objlen;
};

/*
 * Looks up key ("namespace/name", or "name" when cluster-scoped) in
 * resource res. Returns 0 with *out filled (views valid until the client
 * next runs), KR_ENOENT, KR_EINVAL.
 */
int kr_client_get(struct kr_client *c, int res, const char *key, struct kr_object *out);

/*
 * Calls fn for every object of resource res (res < 0: all), in no
 * particular order; fn must not call back into the client except the
 * read-only calls. Returns the count or KR_EINVAL.
 */
int kr_client_foreach(struct kr_client *c, int res,
		      void (*fn)(void *arg, const struct kr_object *o), void *arg);

/*
 * Copies the string (JSON-unescaped) or the literal text of a number,
 * true/false, at a dotted path of an object, into buf (NUL-terminated):
 * "data.log-level", "metadata.labels.app", "metadata.name". A path part
 * holding dots cannot be named: use "\." inside a part
 * ("metadata.annotations.example\.com/x"). Returns the length, KR_ENOENT
 * (no such path, or it is an object/array/null), KR_ENOSPC (buf too small;
 * buf holds ""), KR_EINVAL (not a JSON object, bad arguments).
 */
int kr_object_field(const char *obj, size_t objlen, const char *path, char *buf, size_t size);

/* --- the local endpoint -------------------------------------------------------- */

/*
 * /healthz, /readyz, Prometheus /metrics and a read-only Kubernetes API of
 * the mirror (lists, gets, watches from the mirror's change feed) for the
 * other programs of the device, served from the client's own loop (its
 * descriptors come out of kr_client_fds like the others). src/README.md
 * "The local endpoint".
 */
struct kr_listen_config {
	const char *address;           /* 127.0.0.1:PORT, [::1]:PORT or unix:/PATH (mode 0600);
					  another IP:PORT only with token_file */
	const char *token_file;        /* clients send Authorization: Bearer <its token> */
	int max_conns;                 /* 0: the compile-time most (KR_SERVE_MAX_CONNS) */
	int serve_secrets;             /* 1: Secrets too (403 otherwise) */
	int ready_silence_s;           /* /readyz fails for a resource silent this long; 0: 180 */
	int idle_s;                    /* a request head within this; 0: 30 */
	int bookmark_s;                /* BOOKMARKs to local watches that ask; 0: 60 */
	int health_only;               /* 1: /healthz, /livez and /readyz only, no data (404 for
					  the rest), on any address without a token (probes) */
};

/* Bytes of memory the endpoint needs (its connections and change history); 0 if lc is bad. */
size_t kr_listen_memory(const struct kr_listen_config *lc);

/*
 * Opens the endpoint in mem[0..len) (16-byte aligned, kr_listen_memory
 * bytes, kept until the client stops) after kr_client_start. Uses one of
 * the 8 event callbacks. Returns 0, KR_EINVAL (bad address, a non-loopback
 * one without token_file or health_only; message in err), KR_ENOSPC (len too small, or
 * no callback left), KR_ESTATE (not started, listening already, or from a
 * callback), KR_EIO (the socket could not be opened).
 */
int kr_client_listen(struct kr_client *c, void *mem, size_t len, const struct kr_listen_config *lc,
		     char *err, size_t errlen);

/*
 * Since 1.1: every option of the endpoint (the CLI's --listen and its flags),
 * in a struct that grows as kr_config does (struct_size, filled by
 * kr_endpoint_config_init; fields only ever added at the end). Times in
 * seconds, 0 for the default.
 */
struct kr_endpoint_config {
	size_t struct_size;            /* sizeof(struct kr_endpoint_config), set by its init */
	const char *address;           /* as kr_listen_config's; another IP:PORT needs token_file
					  or client_ca_file, and cert_file or insecure */
	const char *token_file;        /* Authorization: Bearer <its token>, or of one of its
					  "token,user" lines; re-read when it changes */
	const char *access_file;       /* what each user may read: "USER NAMESPACES RESOURCES"
					  lines (comma lists or *); NULL: everything */
	const char *cert_file;         /* serve TLS 1.2/1.3 with this certificate chain (PEM) */
	const char *key_file;          /* and its key (both re-read when they change) */
	const char *client_ca_file;    /* clients may authenticate by a certificate it signed */
	int insecure;                  /* 1: a non-loopback address without TLS (a warning) */
	int max_conns;                 /* 0: the compile-time most (KR_SERVE_MAX_CONNS) */
	int serve_secrets;             /* 1: Secrets too (403 otherwise) */
	int health_only;               /* 1: /healthz, /livez and /readyz only */
	int healthz_ready;             /* 1: /healthz answers as /readyz (k8s-sidecar's probe) */
	int ready_silence_s;           /* /readyz fails for a resource silent this long; 0: 180 */
	int idle_s;                    /* a request head within this; 0: 30 */
	int bookmark_s;                /* BOOKMARKs to local watches that ask; 0: 60 */
	int tls_sessions;              /* TLS sessions at once, 1..KR_SERVE_TLS_CONNS (each
					  15 to 40 KB while open); 0: that most */
};

/* Fills ec with the defaults (zeros) and sets ec->struct_size. */
void kr_endpoint_config_init_size(struct kr_endpoint_config *ec, size_t size);
static inline void kr_endpoint_config_init(struct kr_endpoint_config *ec)
{
	kr_endpoint_config_init_size(ec, sizeof(*ec));
}

/*
 * Bytes of memory the endpoint needs; 0 if ec is bad (not made by its init,
 * max_conns out of range). For a buffer sized at compile time,
 * KR_ENDPOINT_MEMORY(max_conns) of the build's config/kreflect_config.h is
 * at least this (an upper bound from the capacities the library was built with).
 */
size_t kr_endpoint_memory(const struct kr_endpoint_config *ec);

/*
 * kr_client_listen with every option: the same memory, states and errors
 * (the file or setting at fault named in err), and KR_EINVAL for a
 * configuration not made by kr_endpoint_config_init or a time out of range
 * (ready_silence_s above 86400, idle_s or bookmark_s above 3600), KR_ENOTSUP
 * for one that sets a field this library does not have.
 */
int kr_client_endpoint(struct kr_client *c, void *mem, size_t len, const struct kr_endpoint_config *ec,
		       char *err, size_t errlen);

/*
 * Where the open endpoint listens ("127.0.0.1:8080", "[::1]:8443",
 * "unix:/run/kreflect.sock"), NUL-terminated in where, and in
 * *token_required (if not NULL) 1 if clients must authenticate. Returns 0,
 * KR_EINVAL (no client, no buffer), KR_ESTATE (no endpoint open), KR_ENOSPC
 * (where too small: it holds "").
 */
int kr_client_endpoint_where(struct kr_client *c, char *where, size_t len, int *token_required);

/* --- the directory sink ---------------------------------------------------------- */

/*
 * Since 1.1: the process's SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1 and
 * SIGUSR2 on the client's loop: blocked, read from a descriptor (signalfd)
 * and handed to fn(arg, sig) from kr_client_run, kr_client_process or
 * kr_client_hooks_wait, never from a signal handler, so fn may call
 * kr_client_stop, kr_client_child_exited (SIGCHLD: reap, then hand each
 * child over) or kr_client_program_signal. SIGPIPE is ignored. Once a
 * client, at any time before kr_client_stop; kept after it (the hooks'
 * children are still reaped). For a host that owns no signal handling of
 * its own; one that does keeps it and calls kr_client_wakeup from its
 * handler. Returns 0, KR_EINVAL (no client or fn), KR_ESTATE (stopped, or
 * already), KR_EIO (the descriptor cannot be opened).
 */
int kr_client_signals(struct kr_client *c, void (*fn)(void *arg, int sig), void *arg);

/*
 * Since 1.1: kreflect's own output (the CLI's -o jsonl), every event as one
 * line on fd: {"type":"ADDED","object":{...}} for an object (MODIFIED,
 * DELETED, RESYNC alike), {"type":"SYNCED","resource":"...",
 * "resourceVersion":"...","count":N,"state":"live"} (",\"partial\":true"
 * before "state" when the mirror lacks objects; "restored" for a restored
 * one). Lines are gathered in mem and written when it is full, before the
 * client's loop sleeps (ahead of the directory sink's batch, whenever each
 * was added) and at every kr_client_stop; fd is not closed. A write that
 * fails (a closed pipe) is logged once and ends the output; the client goes
 * on. Once, before kr_client_start, from mem[0..len) (16-byte aligned,
 * kr_jsonl_memory() bytes: the build's line buffer, kept until the client
 * stops); one of the 8 event callbacks, after the ones added before it.
 * Returns 0, KR_EINVAL (no client, no or misaligned memory, fd < 0),
 * KR_ESTATE (started, from a callback, or an output already), KR_ENOSPC (len
 * too small, no callback left).
 */
size_t kr_jsonl_memory(void);
int kr_client_jsonl(struct kr_client *c, void *mem, size_t len, int fd);

/*
 * Since 1.1: the objects as files under one root directory (the CLI's --dir),
 * for programs that read files rather than speak to the API. ConfigMaps and
 * Secrets become one file per data key (`data` as text, `binaryData` and a
 * Secret's `data` decoded), named by the key; every other resource one file
 * <namespace>_<name>.json holding the object. Files are replaced atomically
 * and only when their bytes or mode differ; the root is opened once and
 * nothing under it is reached through a symbolic link; a manifest in the root
 * lists the files the sink owns, so it removes exactly its own (objects
 * deleted while it was not running too) and never writes over another's
 * (src/README.md "Outputs"). The struct grows as kr_config does.
 */
enum kr_dir_layout {
	KR_DIR_LAYOUT_FLAT,            /* keys' files in the target directory */
	KR_DIR_LAYOUT_OBJECT,          /* in <target>/<namespace>/<name>/ */
};

enum kr_dir_sync {
	KR_DIR_SYNC_BATCH,             /* the files of a batch renamed into place together, with one
					  file system sync before and one after, before the loop
					  sleeps and before a timer fires */
	KR_DIR_SYNC_EACH,              /* an fsync per file and its directory, inside the event */
};

struct kr_dir_config {
	size_t struct_size;            /* sizeof(struct kr_dir_config), set by its init */
	const char *path;              /* the root directory; created (0755) if missing */
	enum kr_dir_layout layout;
	const char *annotation;        /* the annotation naming a subdirectory of the root as an
					  object's target; NULL: "kreflect.io/target-dir", "": none */
	unsigned file_mode;            /* 0: 0644; at most 0777 */
	unsigned secret_mode;          /* a Secret's files; 0: 0600 */
	enum kr_dir_sync sync;
	size_t max_files;              /* files owned at once; 0: the compile-time most */
	/* k8s-sidecar's ways (kreflect --k8s-sidecar); all 0 by default: */
	int unique_names;              /* ConfigMap and Secret files named
					  namespace_<ns>.<configmap|secret>_<name>.<key> */
	int annotation_absolute;       /* an absolute annotation inside the root names the same
					  directory relative to it (others are refused) */
	int url_keys_refused;          /* keys ending in ".url" are refused, not written */
	int sweep_by_scope;            /* 1: a resource's SYNCED removes only the files its
					  namespace and name selector could list (several
					  resources of one type); 0: every file of its type */
};

/* Fills dc with the defaults (zeros) and sets dc->struct_size. */
void kr_dir_config_init_size(struct kr_dir_config *dc, size_t size);
static inline void kr_dir_config_init(struct kr_dir_config *dc)
{
	kr_dir_config_init_size(dc, sizeof(*dc));
}

/*
 * Bytes of memory the sink needs (its manifest of max_files files, one
 * decoded value: about 2.5 MiB with the defaults, pages never written cost
 * no RAM); 0 if dc is bad (not made by its init, max_files above the most).
 */
size_t kr_dir_memory(const struct kr_dir_config *dc);

/*
 * Writes the client's objects under dc->path, from mem[0..len) (16-byte
 * aligned, kr_dir_memory bytes, kept until the client stops). Once, before
 * kr_client_start: creates the root, loads the manifest, checks the root is
 * writable. Uses one of the 8 event callbacks, before the ones added after
 * it (a hook added later runs when the files are in place). kr_client_stop
 * puts the last batch in place and closes the root. Returns 0, KR_EINVAL (no
 * client, path or memory, a configuration not made by kr_dir_config_init, a
 * mode above 0777, the root not a directory), KR_ENOTSUP (a field this
 * library does not have, or a build without the sink), KR_ESTATE (started,
 * from a callback, or a sink already), KR_ENOSPC (len too small, no callback
 * left), KR_EPROTO (the manifest is not one), KR_EIO (the root cannot be
 * made or written); the reason in err.
 */
int kr_client_dir(struct kr_client *c, void *mem, size_t len, const struct kr_dir_config *dc,
		  char *err, size_t errlen);

/* What the sink did since kr_client_dir, counted per file. Frozen: new counts come as a new call. */
struct kr_dir_stats {
	unsigned long long written;    /* files created or replaced */
	unsigned long long unchanged;  /* files already holding the bytes and mode */
	unsigned long long removed;    /* files removed */
	unsigned long long conflicts;  /* files not written: another owner, or not the sink's */
	unsigned long long errors;     /* refused names, bad values, failed system calls (each
					  named in an error line as it happened) */
	size_t files;                  /* files the manifest owns now */
};

/* Fills *st. Returns 0, KR_EINVAL (no client or st), KR_ESTATE (no sink). Legal from a callback. */
int kr_client_dir_stats(struct kr_client *c, struct kr_dir_stats *st);

/* --- hooks ------------------------------------------------------------------------ */

/*
 * Since 1.1: what the device does after changes (the CLI's --exec, --signal,
 * --http-post and --debounce). Nothing fires before the first complete sync
 * of every resource; the changes of a --debounce window make one run. A
 * command runs without a shell, with KREFLECT_EVENTS=<count> in its
 * environment and the changed keys on stdin, never twice at once. A signal
 * goes to a pid, or to the pid a file holds (read at each send). A POST
 * carries the window's changes as JSON lines (application/x-ndjson, plain
 * HTTP only), retried with the reflector's backoff. The struct grows as
 * kr_config does.
 */
struct kr_hooks_config {
	size_t struct_size;            /* sizeof(struct kr_hooks_config), set by its init */
	const char *exec;              /* "CMD ARGS" (quotes group words); NULL: none */
	int signal;                    /* a signal number; 0: none */
	int signal_pid;                /* sent to this process, or */
	const char *signal_pidfile;    /* to the one whose pid this file holds */
	const char *http_post;         /* http://HOST[:PORT]/PATH; NULL: none */
	int debounce_ms;               /* the window; kr_hooks_config_init: 1000; 0: none */
	/* The request of http_post, k8s-sidecar's REQ_* (0 and NULL: the change lines by POST): */
	const char *method;            /* "POST" (NULL) or "GET" (never a body) */
	const char *body;              /* POST this fixed body instead (body_len bytes) */
	size_t body_len;
	const char *content_type;      /* of the fixed body; NULL: application/json */
	const char *authorization;     /* an Authorization header's value: a secret, never logged */
	int urllib3;                   /* 1: retried as Python urllib3's Retry, with: */
	int retries;                   /*   retries after the first attempt, at most */
	int connect_retries;           /*   of them after a failed connection */
	int read_retries;              /*   after a timeout or a broken answer */
	int backoff_factor_ms;         /*   waiting 0, then factor * 2^(n-1) ms (at most 120 s) */
	int retry_5xx;                 /*   retrying 500, 502, 503 and 504 (other statuses are final) */
	int timeout_ms;                /* connect, and silence before the answer; 0: 10 s */
	int skip_first;                /* 1: the first sync's batch is not sent */
};

/* Fills hc with the defaults (debounce_ms 1000, the rest zero) and sets hc->struct_size. */
void kr_hooks_config_init_size(struct kr_hooks_config *hc, size_t size);
static inline void kr_hooks_config_init(struct kr_hooks_config *hc)
{
	kr_hooks_config_init_size(hc, sizeof(*hc));
}

/* Bytes of memory the hooks hc names need; 0 if hc is bad or names none. */
size_t kr_hooks_memory(const struct kr_hooks_config *hc);

/*
 * Adds the hooks hc names, from mem[0..len) (16-byte aligned, kr_hooks_memory
 * bytes, kept until the client stops), before kr_client_start: the command
 * and the signal, and the POST, each kind once (a host wanting to tell their
 * errors apart adds them in two calls). Each is one of the 8 event
 * callbacks, after the ones added before it (the directory sink's files are
 * in place when a hook runs); their counters appear on the endpoint's
 * /metrics. Returns 0, KR_EINVAL (no client or memory, a configuration not
 * made by its init or naming no hook, a command that cannot be split, a URL
 * that is not http://HOST[:PORT]/PATH, a method other than GET and POST, a
 * negative debounce_ms), KR_ENOTSUP (a field this library lacks, a build
 * without hooks), KR_ESTATE (started, from a callback, that kind added
 * already), KR_ENOSPC (len too small, no callback left); the reason in err.
 * exec is copied; signal_pidfile and the request's strings are read while
 * the client runs: keep them. The command is a child of the process: the
 * host reaps it (SIGCHLD, waitpid) and hands its pid and code to
 * kr_client_child_exited; until then it counts as running (no second run).
 */
int kr_client_hooks(struct kr_client *c, void *mem, size_t len, const struct kr_hooks_config *hc,
		    char *err, size_t errlen);

/*
 * A child process ended (pid and its exit code, or 128 + a signal's number):
 * 1 if it was a hook's command or the supervised program (its end is
 * logged; a run that waited starts, or the program restarts or ends), 0 if
 * not, KR_EINVAL. For a host that reaps every child (SIGCHLD).
 */
int kr_client_child_exited(struct kr_client *c, int pid, int code);

/*
 * Runs the hooks now for what has collected, without waiting for the window
 * to close (a run-once program after the sync). Returns 1 if something was
 * started or sent, 0 if not, KR_EINVAL, KR_ESTATE (from a callback).
 */
int kr_client_hooks_flush(struct kr_client *c);

/*
 * Since 1.1: kr_client_hooks_flush, then the client's loop until the hooks
 * are done (the command ended, the POST answered), also after kr_client_stop
 * (a run-once program after the sync: stop, then wait). Timers and the
 * signals of kr_client_signals still run; kr_client_stop from one of them
 * ends the wait. Returns 0 when done, 1 when kr_client_stop ended it,
 * KR_EINVAL, KR_ESTATE (from a callback), KR_EIO (poll() failed).
 */
int kr_client_hooks_wait(struct kr_client *c);

/* What the hooks did and are doing. Frozen: new fields come as a new call. */
struct kr_hooks_stats {
	const char *command;           /* the command's program (its first word), or NULL */
	int command_pid;               /* the command running now, 0 if none */
	int last_exit;                 /* the command's last exit code */
	unsigned long runs, signals_sent, failures;  /* runs and signals, those that failed */
	const char *post_url;          /* http_post as used in logs, or NULL */
	const char *post_host;         /* its host (a name or an IP) and port */
	int post_port;
	int post_loopback;             /* 1: the host is a loopback address */
	int post_busy;                 /* 1: a batch is in flight or waiting to be retried */
	unsigned long delivered, attempts_failed, batches_dropped;
};

/* Fills *st. Returns 0, KR_EINVAL (no client or st). Legal from a callback. */
int kr_client_hooks_stats(struct kr_client *c, struct kr_hooks_stats *st);

/*
 * Since 1.1: a program the client supervises (the CLI's -- PROGRAM): started
 * once every resource has synced (the files and hooks in place), sent a
 * signal (or restarted) after each --debounce window of changes, given the
 * signals the host passes on, stopped with SIGTERM and, after grace_ms,
 * SIGKILL. The struct grows as kr_config does.
 */
struct kr_program_config {
	size_t struct_size;            /* sizeof(struct kr_program_config), set by its init */
	const char *const *argv;       /* PROGRAM ARGS..., NULL-terminated, at most
					  64 words (the build's KR_SUPERVISE_ARGS); kept */
	int change_signal;             /* sent after changes; init: SIGHUP */
	int restart;                   /* 1: restart it after changes instead */
	int grace_ms;                  /* SIGTERM, this long, then SIGKILL; init: 10000 */
	int debounce_ms;               /* the window; init: 1000 */
	void (*on_end)(void *arg);     /* once, when it has ended for good or could not start */
	void *arg;
};

/* Fills pc with the defaults above and sets pc->struct_size. */
void kr_program_config_init_size(struct kr_program_config *pc, size_t size);
static inline void kr_program_config_init(struct kr_program_config *pc)
{
	kr_program_config_init_size(pc, sizeof(*pc));
}

/* Bytes of memory the supervisor needs; 0 if pc is bad. */
size_t kr_program_memory(const struct kr_program_config *pc);

/*
 * Supervises pc->argv from mem[0..len) (16-byte aligned, kr_program_memory
 * bytes, kept until the client stops), once, before kr_client_start; one of
 * the 8 event callbacks, after those added before it. Its process is a child:
 * the host reaps it and hands it to kr_client_child_exited. Returns 0,
 * KR_EINVAL (no client or memory, a configuration not made by its init, no
 * program, too many words, a negative time), KR_ENOTSUP (a field this library
 * lacks, a build without hooks), KR_ESTATE (started, from a callback, a
 * program already), KR_ENOSPC (len too small, no callback left).
 */
int kr_client_program(struct kr_client *c, void *mem, size_t len, const struct kr_program_config *pc,
		      char *err, size_t errlen);

/*
 * A signal the host received: 1 if the running program was sent it instead
 * (SIGTERM and SIGINT also start its stop: the client stops when it has
 * ended), 0 if the host should act on it itself, KR_EINVAL.
 */
int kr_client_program_signal(struct kr_client *c, int sig);

/* The supervised program's state. Frozen: new fields come as a new call. */
struct kr_program_status {
	int pid;                       /* running now, 0 if none */
	int ended;                     /* 1: it ended for good, or could not start */
	int code;                      /* then: its exit code, 128 + N after signal N */
	int start_error;               /* then: 0, KR_ENOENT (not found) or another KR_E... */
	unsigned long starts, signals_sent, signals_forwarded;
};

/* Fills *st. Returns 0, KR_EINVAL (no client or st), KR_ESTATE (no program). Legal from a callback. */
int kr_client_program_status(struct kr_client *c, struct kr_program_status *st);

/* --- health ------------------------------------------------------------------------ */

struct kr_status {
	const char *resource;
	enum kr_health state;
	int synced;                    /* completed a sync at least once */
	int partial;                   /* the mirror lacks objects the server has: not read,
					  not indexed or not held, at the last sync or by a
					  watch event since; whole again when room frees and
					  a relist (started by a delete) holds them */
	int restored;                  /* synced from the state directory, not yet confirmed live */
	int64_t restored_age_s;        /* then: how old the restored mirror is */
	size_t objects;                /* held or known-but-not-held */
	const char *last_rv;
	const char *reason;            /* the last connection problem, "" if none */
	unsigned long lists, watch_lists, watches, relists, errors;
	/* since 1.0 */
	enum kr_failure failure;       /* the class of the last failure, KR_FAIL_NONE if none */
	int http_status;               /* its HTTP status (or ERROR event's code), 0 if none */
	const char *status_reason;     /* the server's Status reason, "" if none */
};

/*
 * Fills *st for resource res. Returns 0, KR_EINVAL. The library fills
 * size bytes of it (the inline wrapper passes the caller's sizeof): a
 * size below 1.0's struct is KR_EINVAL.
 */
int kr_client_status_size(struct kr_client *c, int res, struct kr_status *st, size_t size);
static inline int kr_client_status(struct kr_client *c, int res, struct kr_status *st)
{
	return kr_client_status_size(c, res, st, sizeof(*st));
}

/* Number of resources (after start: discovered ones included), or KR_EINVAL. */
int kr_client_resources(struct kr_client *c);

/* The name of resource res ("configmaps"), or NULL. */
const char *kr_client_resource_name(struct kr_client *c, int res);

/* What kr_client_ready answers (the numbers are those of 0.x). */
enum kr_ready {
	KR_READY_NOT_SYNCED = 0,        /* not every resource synced yet */
	KR_READY_DEGRADED = 1,          /* synced, but some objects could not be held */
	KR_READY_OK = 2,                /* every resource synced and whole */
};

/* A KR_READY_... value, or KR_EINVAL. */
int kr_client_ready(struct kr_client *c);

/* --- waking, logging ------------------------------------------------------------- */

/*
 * Wakes the client's loop: kr_client_run returns KR_RUN_WOKEN soon after
 * (the host checks its own flags and calls kr_client_run again, or
 * kr_client_stop), and in the host's loop the client's wake-up descriptor
 * (one of kr_client_fds) becomes readable. Safe from a signal handler and
 * from any thread (one write(2) to an eventfd); not concurrently with
 * kr_client_stop from another thread. Wake-ups before the loop runs are
 * kept (one). Returns 0, KR_EINVAL, KR_ESTATE (not started, or stopped),
 * KR_ENOTSUP (a build without it: the PROFILE=tiny CLI).
 *
 * Timers of the host: kr_client_run has none, by design. A host that has
 * its own work on a clock runs its own loop (kr_client_fds and
 * kr_client_process) and takes kr_client_fds' timeout into its own; one
 * that has only events from other threads or signals calls this.
 */
#define KR_RUN_WOKEN 1
int kr_client_wakeup(struct kr_client *c);

/* Levels of log lines (the handler's level argument). */
enum kr_log_level {
	KR_LOG_ERROR = 0,
	KR_LOG_WARN = 1,
	KR_LOG_INFO = 2,
	KR_LOG_DEBUG = 3,
	KR_LOG_TRACE = 4,
};

/*
 * Sends every log line to fn (process-wide: all clients) instead of
 * stderr: fn(arg, level, text) with the text alone (no "kreflect: info: "
 * prefix, no newline, NUL-terminated, at most 1023 bytes), from inside the
 * loop, never with a secret in it. NULL goes back to stderr. Lines above
 * the configured log_level are not formatted at all. Set it before
 * starting clients; the call itself is not thread-safe. Returns 0.
 */
int kr_set_log_handler(void (*fn)(void *arg, int level, const char *text), void *arg);

/*
 * Since 1.1, the host's own lines: kr_set_log_level sets the most verbose
 * level written, process-wide (KR_LOG_ERROR .. KR_LOG_TRACE; -1: none;
 * kr_client_init sets it from kr_config.log_level); kr_log formats one line
 * and hands it to the log handler (at most 1023 bytes), or writes
 * "kreflect: <level>: <text>" to stderr (a longer one cut, ending in "..."),
 * as the library's own lines (a level outside the range counts as the nearest one;
 * a NULL fmt writes nothing). No heap; not thread-safe, as the handler.
 */
#if defined(__GNUC__)
#define KR_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define KR_PRINTF_LIKE(f, a)
#endif
void kr_set_log_level(int level);
void kr_log(int level, const char *fmt, ...) KR_PRINTF_LIKE(2, 3);

/* --- least privilege ---------------------------------------------------------------- */

enum kr_sandbox_mode { KR_SANDBOX_MODE_AUTO, KR_SANDBOX_MODE_ON, KR_SANDBOX_MODE_OFF };

/* What the host itself still needs once it is ready; NULL ends each list. */
struct kr_sandbox_opts {
	enum kr_sandbox_mode mode;     /* AUTO: what the kernel supports; ON: all or an error */
	const char *write_dirs[4];     /* the host's own output trees */
	const char *read_files[4];     /* files the host re-reads (their directories too) */
	const char *programs[4];       /* programs the host starts (hooks): they may be run */
	uint16_t tcp_ports[4];         /* other TCP ports the host connects to; 0 ends */
	int lookups;                   /* 1: the host looks up names itself */
	int syscall_filter;            /* 1: the system-call allow list too: from then on the
					  host itself may make only the calls the client makes */
	int signal_others;             /* 1: the host signals processes it did not start */
	long uid, gid;                 /* the user and group to become (-1: keep) */
};

/*
 * Call once, after kr_client_start (and kr_client_listen): from now on the
 * process and every child it starts can read only the client's token and the
 * files named, write only under the state directory and write_dirs, run only
 * programs, connect only to the API server's, the proxy's and tcp_ports, and
 * (with syscall_filter) make only the system calls the client needs (Linux:
 * Landlock, seccomp, no_new_privs; other ports: nothing). Cannot be undone. Returns 0 with what
 * was applied in msg (one line), or KR_ENOTSUP (ON and the kernel lacks a
 * layer), KR_EINVAL, KR_ESTATE or KR_EIO with the reason in msg.
 */
int kr_client_sandbox(struct kr_client *c, const struct kr_sandbox_opts *o, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* KREFLECT_H */
