/*
 * The public client (kreflect.h): configuration sources, TLS, discovery,
 * the store and the reflectors behind one opaque struct in caller memory.
 *
 * The caller's block holds, in this order: struct kr_client, the index
 * entries, the hash buckets, the arena. Start-up work that needs large
 * buffers only once (the kubeconfig reader's work area, PEM files, discovery
 * answers) borrows the arena before the store is set up over it, and those
 * pages are handed back to the kernel afterwards.
 */
#include "client.h"
#include "kreflect_config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "discovery.h"
#include "fmt.h"
#include "json.h"
#include "kubeconfig.h"
#include "log.h"
#include "proxy.h"
#include "reflector.h"
#include "resource.h"
#include "serve.h"
#include "state.h"
#include "store.h"
#include "tls.h"

#define DISCOVERY_TIMEOUT_MS 15000
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_CALLBACKS KR_CLIENT_MAX_CALLBACKS
/* A resource named on the command line, kept until discovery resolves it. */
#define SPEC_NAME_MAX (KR_NAME_MAX * 2 + 256)

enum { ST_INIT, ST_STARTED, ST_STOPPED };

struct kr_client;
static void open_wakeup(struct kr_client *c);

/*
 * The public structs as 1.0 released them: a caller's struct_size (or size)
 * below these is not one of ours. They stay these expressions when fields are
 * added after the last 1.0 one (kreflect.h "ABI"); tests/abi/ pins the numbers.
 */
#define CONFIG_SIZE_1_0 (offsetof(struct kr_config, memory_bytes) + sizeof(size_t))
#define STATUS_SIZE_1_0 (offsetof(struct kr_status, status_reason) + sizeof(const char *))
#define ENDPOINT_SIZE_1_1 (offsetof(struct kr_endpoint_config, tls_sessions) + sizeof(int))

struct kr_client {
	uint32_t magic;
	int state;
	int in_callback;               /* >0 while a user callback runs */
	int started;                   /* the store and the reflectors were set up */
	int stop_asked;
	volatile int wake_fd;          /* kr_client_wakeup's eventfd once started, else -1 */
	int running;                   /* inside kr_client_run: a wake-up ends its loop */
	int woken;                     /* the wake-up descriptor was read */
	struct kr_source wake;
	struct kr_config cfg;          /* the caller's; strings not kept past start */
	size_t max_objects, arena_bytes, nbuckets;
	struct kr_entry *entries;
	int32_t *buckets;
	char *arena;

	struct kr_kubeconfig kcfg;     /* wiped at the end of init */
	char source_ns[KR_NAME_MAX];   /* the namespace the source named ("" none) */
	struct kr_conn_cfg conn_cfg;
	int plain;
	struct kr_tls_ctx tls;
	struct kr_auth auth;
	struct kr_proxy proxy;
	struct kr_reflector_opts ropts;

	struct kr_resource res[KR_MAX_RESOURCES];
	char discover_arg[KR_MAX_RESOURCES][SPEC_NAME_MAX]; /* "" once resolved */
	int nres;
	int kcfg_read, pem_read;       /* start-up scratch in the arena was written */

	struct {
		void (*fn)(void *arg, const struct kr_event *ev);
		void *arg;
	} cb[MAX_CALLBACKS];
	int ncb;
	void (*state_fn)(void *arg, const struct kr_state_change *st);
	void *state_arg;
	void (*signal_fn)(void *arg, int sig);     /* kr_client_signals' */
	void *signal_arg;

	struct kr_serve *serve;        /* the local endpoint, in the caller's memory, or NULL */
	/* kr_serve_close through a pointer: a program that never listens links no endpoint. */
	void (*serve_close)(struct kr_serve *s);
	struct kr_client_hooks hooks;  /* kr_client_hooks', in the caller's memory; also the endpoint's metrics */
	struct {
		void *p;               /* the directory sink, the JSON lines: caller's memory, or NULL */
		void (*end)(void *p);  /* through a pointer: a program without one links none of it */
	} out[KR_CLIENT_OUTS];
	int state_on;                  /* snapshots go to cfg.state_dir */
	struct kr_state persist;
	struct kr_state_history history;    /* the endpoint's ring, saved with the state */

	struct kr_loop loop;
	struct host_timer {            /* kr_client_timer's slots */
		struct kr_timer t;     /* first: the loop's fire hands back &t */
		struct kr_client *c;
		kr_timer_fn fn;
		void *arg;
	} timers[KR_CLIENT_MAX_TIMERS];
	struct kr_store store;
	struct kr_reflect top;
	struct kr_reflector refl[KR_MAX_RESOURCES];
};

#define CLIENT_MAGIC 0x6b72636cu /* "krcl" */

static int valid(const struct kr_client *c)
{
	return c && c->magic == CLIENT_MAGIC;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		kr_vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

const char *kr_version(int *num)
{
	if (num)
		*num = KR_VERSION_NUM;
	return KR_VERSION;
}

/*
 * Defaults into the first size bytes of cfg (a program built against an
 * older or newer header). Every 1.0 field lies within CONFIG_SIZE_1_0; a
 * field added later gets its default only where size holds it.
 */
int kr_client_sized_init(void *cfg, size_t size, size_t min)
{
	if (!cfg || size < min)
		return KR_EINVAL;
	memset(cfg, 0, size);
	memcpy(cfg, &size, sizeof(size));
	return 0;
}

void kr_config_init_size(struct kr_config *cfg, size_t size)
{
	if (kr_client_sized_init(cfg, size, CONFIG_SIZE_1_0) != 0)
		return;
	cfg->watch_list = KR_WL_AUTO;
	cfg->log_level = 1;
	cfg->gzip = KR_WITH_GZIP;          /* a build without the inflater lists plain */
	cfg->state_dir = KR_STATE_DIR_DEFAULT;
	cfg->max_stale_s = -1;
}

/*
 * A caller's sized struct (given, its size first) as this library's (out,
 * out_size bytes, its defaults already in place): an older, shorter one
 * keeps the defaults of the fields it lacks; a newer, longer one is taken
 * only if the fields this library does not know are zero. Returns 0,
 * KR_EINVAL (a size below min: not made by its init) or KR_ENOTSUP (a
 * field this library lacks).
 */
static int sized_in(const void *given, size_t min, void *out, size_t out_size)
{
	return kr_client_sized_in(given, min, out, out_size);
}

int kr_client_sized_in(const void *given, size_t min, void *out, size_t out_size)
{
	size_t size, i;

	if (!given)
		return KR_EINVAL;
	memcpy(&size, given, sizeof(size));
	if (size < min)
		return KR_EINVAL;
	for (i = out_size; i < size; i++)
		if (((const unsigned char *)given)[i] != 0)
			return KR_ENOTSUP;
	memcpy(out, given, size < out_size ? size : out_size);
	memcpy(out, &out_size, sizeof(out_size));
	return 0;
}

/* The caller's configuration as this library's struct (sized_in). */
static int config_in(const struct kr_config *cfg, struct kr_config *out)
{
	kr_config_init_size(out, sizeof(*out));
	return sized_in(cfg, CONFIG_SIZE_1_0, out, sizeof(*out));
}

/* --- memory ------------------------------------------------------------------------- */

static uint32_t buckets_for(size_t objects)
{
	uint32_t n = 256;

	while (n < objects && n < (1u << 30))
		n <<= 1;
	return n;
}

/*
 * The capacities a configuration asks for: given ones win, then a memory
 * budget split as one index slot per KR_MEMORY_PER_OBJECT bytes with the
 * rest for the arena, then the compile-time defaults. 0 if impossible.
 */
static int capacities(const struct kr_config *cfg, size_t *objects, size_t *arena)
{
	size_t o = cfg->max_objects, a = cfg->arena_bytes;

	if (cfg->memory_bytes) {
		size_t m = cfg->memory_bytes, idx;

		if (!o)
			o = m / KR_MEMORY_PER_OBJECT;
		if (o > KR_MAX_OBJECTS_CEILING)
			o = KR_MAX_OBJECTS_CEILING;
		/* The budget is the whole reservation: the client itself counts too. */
		idx = o * sizeof(struct kr_entry) + buckets_for(o) * sizeof(int32_t) +
		      ALIGN16(sizeof(struct kr_client)) + 64u;
		if (!a) {
			/* A budget too small for the client itself is refused, not replaced by the default. */
			a = m > idx ? (m - idx) & ~(size_t)15u : 0;
			if (a < KR_ARENA_MIN)
				return -1;
		}
	}
	if (!o)
		o = KR_MAX_OBJECTS;
	if (!a)
		a = KR_ARENA_BYTES;
	if (o < 1 || o > KR_MAX_OBJECTS_CEILING || a < KR_ARENA_MIN || a > KR_ARENA_BYTES_CEILING)
		return -1;
	*objects = o;
	*arena = a;
	return 0;
}

size_t kr_client_memory(const struct kr_config *cfg)
{
	struct kr_config in;
	size_t o, a;

	if (config_in(cfg, &in) != 0 || capacities(&in, &o, &a) != 0)
		return 0;
	return ALIGN16(sizeof(struct kr_client)) + ALIGN16(o * sizeof(struct kr_entry)) +
	       ALIGN16(buckets_for(o) * sizeof(int32_t)) + ALIGN16(a);
}

int kr_client_capacities_for(const struct kr_config *cfg, size_t *objects, size_t *arena)
{
	struct kr_config in;

	return config_in(cfg, &in) == 0 && capacities(&in, objects, arena) == 0 ? 0 : KR_EINVAL;
}

size_t kr_client_struct_size(void)
{
	return sizeof(struct kr_client);
}

/* --- where to connect ------------------------------------------------------------------ */

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
		pn = kr_parse_num(num, 1, 65535);
		if (pn < 0)
			return -1;
		p = port + plen;
	}
	if (*p && strcmp(p, "/") != 0)
		return -1;  /* a path prefix (proxies) is not supported */
	cfg->port = (uint16_t)pn;
	return 0;
}

/* In a pod: the API server from the environment, the service account's files. */
static void in_cluster(struct kr_kubeconfig *k, const char *host, const char *port)
{
	const char *dir = getenv("KREFLECT_SERVICEACCOUNT_DIR");
	char nsfile[600];
	long n;

	if (!dir || !*dir)
		dir = SA_DIR;
	if (strchr(host, ':'))
		kr_snprintf(k->server, sizeof(k->server), "https://[%s]:%s", host, port);
	else
		kr_snprintf(k->server, sizeof(k->server), "https://%s:%s", host, port);
	kr_snprintf(k->ca_file, sizeof(k->ca_file), "%s/ca.crt", dir);
	kr_snprintf(k->token_file, sizeof(k->token_file), "%s/token", dir);
	kr_snprintf(nsfile, sizeof(nsfile), "%s/namespace", dir);
	n = kr_port_read_file(nsfile, k->ns, sizeof(k->ns) - 1);
	if (n < 0)
		n = 0;
	while (n > 0 && (k->ns[n - 1] == '\n' || k->ns[n - 1] == ' ' || k->ns[n - 1] == '\r'))
		n--;
	k->ns[n] = '\0';
	kr_log(KR_LOG_INFO, "connecting in-cluster to %s as the service account in %s", k->server, dir);
}

/*
 * Where to connect and as whom, in kubectl's order: the configured
 * kubeconfig, then $KUBECONFIG, then in-cluster, then ~/.kube/config.
 * The kubeconfig reader works in w (borrowed arena). KR_EINVAL and a
 * message when nothing names a server.
 */
static int choose_source(struct kr_client *c, struct kr_kubeconfig_work *w, char *err, size_t errlen)
{
	const struct kr_config *o = &c->cfg;
	const char *list = getenv("KUBECONFIG"), *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT"), *home = getenv("HOME");
	char path[600];
	const char *paths[1];
	struct kr_fs_stat st;
	int r;

	if (!KR_WITH_KUBECONFIG) {
		/* Built without the kubeconfig reader: the configuration alone, or in-cluster. */
		if (o->kubeconfig || (!o->no_auto_source && !o->server && list && *list))
			return fail(err, errlen, KR_ENOTSUP, "unable to read a kubeconfig: the reader is not built "
				    "into this kreflect (give the server and credentials directly, or run in a pod)");
		if (!o->no_auto_source && !o->server && host && *host && port && *port && !o->context) {
			in_cluster(&c->kcfg, host, port);
			return 0;
		}
		return o->server ? 0 : fail(err, errlen, KR_EINVAL, "no API server: give --server or run in a pod");
	}
	if (!w && (o->kubeconfig || (!o->no_auto_source && !o->server &&
				      !((host && *host && port && *port && !o->context)))))
		return fail(err, errlen, KR_ENOSPC, "an arena of %zu bytes is too small to read a kubeconfig "
			    "(%zu needed): give a larger one, or the server and credentials directly",
			    c->arena_bytes, sizeof(*w) + (size_t)KR_PEM_MAX + 3u);
	if (o->kubeconfig) {
		r = strchr(o->kubeconfig, ':')
			? kr_kubeconfig_load_list(&c->kcfg, w, o->kubeconfig, o->context, err, errlen)
			: (paths[0] = o->kubeconfig,
			   kr_kubeconfig_load(&c->kcfg, w, paths, 1, o->context, err, errlen));
	} else if (o->no_auto_source) {
		return o->server ? 0 : fail(err, errlen, KR_EINVAL, "no API server: set server");
	} else if (list && *list) {
		r = kr_kubeconfig_load_list(&c->kcfg, w, list, o->context, err, errlen);
	} else if (host && *host && port && *port && !o->context) {
		in_cluster(&c->kcfg, host, port);
		return 0;
	} else if (home && *home && kr_snprintf(path, sizeof(path), "%s/.kube/config", home) > 0 &&
		   kr_port_fs_stat(path, &st) == 0 && st.type != KR_FS_NONE) {
		paths[0] = path;
		r = kr_kubeconfig_load(&c->kcfg, w, paths, 1, o->context, err, errlen);
	} else {
		if (o->server)
			return 0;   /* the configuration alone */
		return fail(err, errlen, KR_EINVAL, "no API server: give --server or --kubeconfig, set "
			    "KUBECONFIG, run in a pod, or create ~/.kube/config");
	}
	c->kcfg_read = 1;
	if (r != 0)
		return r == KR_ENOENT || r == KR_EIO ? r : KR_EINVAL;
	kr_log(KR_LOG_INFO, "using kubeconfig context %s (cluster %s, user %s)", c->kcfg.context,
	       c->kcfg.cluster, c->kcfg.user);
	return 0;
}

/* Explicit fields win over the chosen source, field by field. */
static int apply_overrides(struct kr_client *c, char *err, size_t errlen)
{
	const struct kr_config *o = &c->cfg;
	struct kr_kubeconfig *k = &c->kcfg;

	if (o->server)
		kr_snprintf(k->server, sizeof(k->server), "%s", o->server);
	if (o->ca_file || o->ca_pem) {
		kr_snprintf(k->ca_file, sizeof(k->ca_file), "%s", o->ca_file ? o->ca_file : "");
		k->ca_data = NULL;
		k->ca_data_len = 0;
		k->insecure_skip_tls_verify = 0;
	}
	if (o->cert_file || o->key_file) {
		kr_snprintf(k->cert_file, sizeof(k->cert_file), "%s", o->cert_file ? o->cert_file : "");
		kr_snprintf(k->key_file, sizeof(k->key_file), "%s", o->key_file ? o->key_file : "");
		k->cert_data = k->key_data = NULL;
		k->cert_data_len = k->key_data_len = 0;
	}
	if (o->token_file) {
		kr_snprintf(k->token_file, sizeof(k->token_file), "%s", o->token_file);
		memset(k->token, 0, sizeof(k->token));
	}
	if (o->token) {
		if (strlen(o->token) >= sizeof(k->token) || strchr(o->token, '\n') || strchr(o->token, '\r'))
			return fail(err, errlen, KR_EINVAL, "the bearer token is longer than %u bytes or "
				    "holds a line break", (unsigned)KR_TOKEN_MAX);
		kr_snprintf(k->token, sizeof(k->token), "%s", o->token);
		k->token_file[0] = '\0';
	}
	if (o->insecure_skip_tls_verify)
		k->insecure_skip_tls_verify = 1;
	if (o->ns) {
		if (!*o->ns || strlen(o->ns) >= KR_NAME_MAX)
			return fail(err, errlen, KR_EINVAL, "namespace '%.80s' is empty or too long", o->ns);
		kr_snprintf(k->ns, sizeof(k->ns), "%s", o->ns);
	}
	if (k->username[0] && !k->token[0] && !k->token_file[0] && !k->cert_file[0] && !k->cert_data)
		return fail(err, errlen, KR_EINVAL, "user %s uses basic auth (username/password), which "
			    "kreflect does not support: use a token, a token file or a client certificate",
			    k->user);
	return 0;
}

/*
 * As client-go: the cluster's proxy-url always; else HTTPS_PROXY (then
 * https_proxy) unless the host is loopback or matches NO_PROXY (then
 * no_proxy). Plain http:// servers are tunnelled too.
 */
static int use_proxy(struct kr_client *c, char *err, size_t errlen)
{
	struct kr_conn_cfg *cfg = &c->conn_cfg;
	const char *env_upper = c->cfg.no_auto_source ? NULL : getenv("HTTPS_PROXY");
	const char *env_lower = c->cfg.no_auto_source ? NULL : getenv("https_proxy");
	const char *url = kr_proxy_choose(c->kcfg.proxy_url, env_upper, env_lower, getenv("NO_PROXY"),
					  getenv("no_proxy"), cfg->host);
	const char *from = url == c->kcfg.proxy_url ? "the cluster's proxy-url" : "HTTPS_PROXY";
	char shown[KR_KUBECONFIG_URL_MAX], why[200];

	if (!url) {
		if ((env_upper && *env_upper) || (env_lower && *env_lower))
			kr_log(KR_LOG_INFO, "connecting to %s directly (NO_PROXY or loopback)", cfg->host);
		return 0;
	}
	if (!KR_WITH_PROXY)
		return fail(err, errlen, KR_ENOTSUP, "unable to use the proxy from %s: proxy support is not "
			    "built into this kreflect", from);
	kr_proxy_redact(url, shown, sizeof(shown));
	if (kr_proxy_parse(&c->proxy, url, why, sizeof(why)) != 0)
		return fail(err, errlen, KR_EINVAL, "unable to use the proxy %s from %s: %s", shown, from, why);
	cfg->proxy = &c->proxy;
	kr_log(KR_LOG_INFO, "connecting to %s through the proxy %s (from %s%s)", cfg->host, shown,
	       from, c->proxy.auth[0] ? ", with credentials" : "");
	return 0;
}

/* Reads a PEM file into buf[*used...], NUL-terminated. Returns its start or NULL. */
static const unsigned char *load_pem(const char *what, const char *path, unsigned char *buf,
				     size_t cap, size_t *used, size_t *len, char *err, size_t errlen)
{
	long n;

	if (*used + 1 >= cap) {
		fail(err, errlen, 0, "%s %s: the PEM files together exceed %zu bytes", what, path, cap);
		return NULL;
	}
	n = kr_port_read_file(path, buf + *used, cap - *used - 1);
	if (n < 0) {
		fail(err, errlen, 0, "%s %s: unable to read: %s", what, path,
		     n == KR_ETOOBIG ? "larger than KR_PEM_MAX" : kr_port_last_error());
		return NULL;
	}
	buf[*used + (size_t)n] = '\0';
	*len = (size_t)n;
	*used += (size_t)n + 1;
	return buf + *used - (size_t)n - 1;
}

/* TLS credentials from the chosen source; PEM files read into the borrowed pem buffer. */
static int setup_tls(struct kr_client *c, unsigned char *pem, size_t cap, char *err, size_t errlen)
{
	struct kr_kubeconfig *k = &c->kcfg;
	struct kr_tls_opts t;
	size_t used = 0;
	int r;

	memset(&t, 0, sizeof(t));
	t.insecure_skip_verify = k->insecure_skip_tls_verify;
	if (c->cfg.ca_pem) {
		if (c->cfg.ca_pem_len + 1 > cap)
			return fail(err, errlen, KR_ETOOBIG, "the CA bundle is larger than %zu bytes", cap);
		memcpy(pem, c->cfg.ca_pem, c->cfg.ca_pem_len);
		pem[c->cfg.ca_pem_len] = '\0';     /* mbedTLS's PEM parser wants the NUL */
		t.ca = pem;
		t.ca_len = c->cfg.ca_pem_len;
		used = c->cfg.ca_pem_len + 1;
	} else if (k->ca_data) {
		t.ca = k->ca_data;
		t.ca_len = k->ca_data_len;
	} else if (k->ca_file[0] &&
		   !(t.ca = load_pem("certificate-authority", k->ca_file, pem, cap, &used, &t.ca_len, err,
				     errlen))) {
		return KR_EIO;
	}
	if (k->cert_data) {
		t.cert = k->cert_data;
		t.cert_len = k->cert_data_len;
	} else if (k->cert_file[0] &&
		   !(t.cert = load_pem("client-certificate", k->cert_file, pem, cap, &used, &t.cert_len,
				       err, errlen))) {
		return KR_EIO;
	}
	if (k->key_data) {
		t.key = k->key_data;
		t.key_len = k->key_data_len;
	} else if (k->key_file[0] &&
		   !(t.key = load_pem("client-key", k->key_file, pem, cap, &used, &t.key_len, err, errlen))) {
		return KR_EIO;
	}
	c->pem_read = used > 0;
	kr_tls_ctx_init(&c->tls);
	r = kr_tls_ctx_setup(&c->tls, &t, err, errlen);
	/* The key's bytes are not needed any more: do not keep them around. */
	memset(pem, 0, used);
	if (r != 0)
		return KR_ETLS;
	c->conn_cfg.tls = &c->tls;
	return 0;
}

/* --- setup --------------------------------------------------------------------------------- */

int kr_client_init(struct kr_client **out, void *mem, size_t len, const struct kr_config *given,
		   char *err, size_t errlen)
{
	struct kr_config in;
	const struct kr_config *cfg = &in;
	struct kr_client *c = mem;
	struct kr_kubeconfig_work *w;
	unsigned char *pem;
	size_t need, o, a, off, scratch, pem_cap;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!out || !mem || !given)
		return fail(err, errlen, KR_EINVAL, "kr_client_init needs out, memory and a configuration");
	*out = NULL;
	r = config_in(given, &in);
	if (r == KR_ENOTSUP)
		return fail(err, errlen, r, "the configuration sets a field kreflect %s does not have "
			    "(struct_size %zu, this library's %zu)", KR_VERSION, given->struct_size, sizeof(in));
	if (r != 0)
		return fail(err, errlen, r, "the configuration was not made by kr_config_init (struct_size %zu)",
			    given->struct_size);
	if ((uintptr_t)mem & 15u)
		return fail(err, errlen, KR_EINVAL, "the client's memory must be 16-byte aligned");
	if (capacities(cfg, &o, &a) != 0)
		return fail(err, errlen, KR_EINVAL, "capacities out of range: objects 1..%u, arena %u..%llu bytes",
			    (unsigned)KR_MAX_OBJECTS_CEILING, (unsigned)KR_ARENA_MIN,
			    (unsigned long long)KR_ARENA_BYTES_CEILING);
	need = kr_client_memory(cfg);
	if (len < need)
		return fail(err, errlen, KR_ENOSPC, "the client needs %zu bytes of memory, given %zu", need, len);
	if (cfg->page_size < 0 || cfg->page_size > 100000 || cfg->resync_s < 0 ||
	    cfg->resync_s > KR_RESYNC_MAX_S ||
	    cfg->initial_events_timeout_s < 0 || cfg->initial_events_timeout_s > 3600 ||
	    cfg->watch_idle_timeout_s < 0 || cfg->watch_idle_timeout_s > 86400 ||
	    cfg->watch_timeout_s < 0 || cfg->watch_timeout_s > 86400 ||
	    cfg->watch_list < KR_WL_AUTO || cfg->watch_list > KR_WL_OFF ||
	    cfg->log_level < -1 || cfg->log_level > 3)
		return fail(err, errlen, KR_EINVAL, "a configuration value is out of range");
	if (cfg->state_interval_s < 0 || cfg->state_interval_s > 86400 ||
	    (cfg->state_dir && strlen(cfg->state_dir) >= KR_STATE_PATH_MAX))
		return fail(err, errlen, KR_EINVAL, "state_interval_s is out of range or state_dir too long");
	if (cfg->max_stale_s >= 0 && !(cfg->state_dir && *cfg->state_dir))
		return fail(err, errlen, KR_EINVAL, "--max-stale needs --state-dir: there is no mirror to restore");
	if ((cfg->label_selector && strlen(cfg->label_selector) >= KR_SELECTOR_MAX) ||
	    (cfg->field_selector && strlen(cfg->field_selector) >= KR_SELECTOR_MAX))
		return fail(err, errlen, KR_EINVAL, "a selector is longer than %u bytes",
			    (unsigned)KR_SELECTOR_MAX - 1);

	/* The struct only, and only its pages that are not zero already: most of
	 * it is buffers (connections, TLS, the inflater's window) that a client
	 * may never use, and the arena's pages stay untouched until they are used. */
	kr_port_zero(c, sizeof(*c));
	c->wake_fd = -1;
	c->cfg = *cfg;
	c->max_objects = o;
	c->arena_bytes = a;
	c->nbuckets = buckets_for(o);
	off = ALIGN16(sizeof(*c));
	c->entries = (struct kr_entry *)(void *)((char *)mem + off);
	off += ALIGN16(o * sizeof(struct kr_entry));
	c->buckets = (int32_t *)(void *)((char *)mem + off);
	off += ALIGN16(c->nbuckets * sizeof(int32_t));
	c->arena = (char *)mem + off;
	kr_loop_init(&c->loop);
	kr_set_log_level(cfg->log_level < 0 ? -1 : cfg->log_level == 0 ? KR_LOG_WARN
			 : cfg->log_level == 1 ? KR_LOG_INFO : cfg->log_level == 2 ? KR_LOG_DEBUG : KR_LOG_TRACE);

	kr_reflector_opts_default(&c->ropts);
	c->ropts.watch_list = cfg->watch_list;
	if (cfg->page_size) {
		c->ropts.page_size = cfg->page_size;
		c->ropts.page_size_forced = 1;
	}
	c->ropts.resync_ms = cfg->resync_s * 1000;
	if (cfg->initial_events_timeout_s)
		c->ropts.initial_events_timeout_ms = cfg->initial_events_timeout_s * 1000;
	if (cfg->watch_idle_timeout_s)
		c->ropts.idle_default_ms = cfg->watch_idle_timeout_s * 1000;
	c->ropts.keep_managed_fields = cfg->keep_managed_fields;
	if (cfg->watch_timeout_s)
		c->ropts.min_watch_timeout_s = cfg->watch_timeout_s;
	c->ropts.gzip = cfg->gzip;
	c->ropts.once = cfg->stop_after_sync;

	/* Start-up scratch in the arena: the kubeconfig reader, then PEM files. */
	scratch = ALIGN16(sizeof(struct kr_kubeconfig_work));
	pem_cap = (size_t)KR_PEM_MAX + 3u;
	w = (struct kr_kubeconfig_work *)(void *)c->arena;
	pem = (unsigned char *)c->arena + scratch;
	if (a < scratch + pem_cap) {
		/* A small arena: enough for the PEM files; a kubeconfig is refused when it comes to it. */
		w = NULL;
		pem = (unsigned char *)c->arena;
		pem_cap = a < pem_cap ? a : pem_cap;
	}
	r = choose_source(c, w, err, errlen);
	if (r == 0)
		r = apply_overrides(c, err, errlen);
	if (r == 0 && parse_server(c->kcfg.server, &c->conn_cfg, &c->plain) != 0)
		r = fail(err, errlen, KR_EINVAL, "server '%s' is not https://HOST[:PORT] (IPv6 in brackets)",
			 c->kcfg.server);
	if (r == 0 && !KR_WITH_DNS) {
		struct kr_addr ip;

		/* In a pod the server is an IP address already (KUBERNETES_SERVICE_HOST). */
		if (kr_port_parse_ip(c->conn_cfg.host, c->conn_cfg.port, &ip) != 0)
			r = fail(err, errlen, KR_ENOTSUP, "unable to look up %s: name lookups are not built into "
				 "this kreflect (give the server's IP address)", c->conn_cfg.host);
	}
	if (r == 0 && c->kcfg.tls_server_name[0])
		kr_snprintf(c->conn_cfg.server_name, sizeof(c->conn_cfg.server_name), "%s",
			    c->kcfg.tls_server_name);
	if (r == 0)
		r = use_proxy(c, err, errlen);
	if (r == 0 && kr_tls_global_init() != 0)
		r = fail(err, errlen, KR_ETLS, "unable to start TLS");
	if (r == 0) {
		kr_auth_init(&c->auth);
		if (c->kcfg.token[0]) {
			memcpy(c->auth.token, c->kcfg.token, sizeof(c->auth.token));
		} else if (c->kcfg.token_file[0]) {
			r = kr_auth_set_file(&c->auth, c->kcfg.token_file);
			if (r != 0)
				r = fail(err, errlen, r == KR_EINVAL ? KR_EINVAL : r, "token file %s: unable to "
					 "read: %s", c->kcfg.token_file,
					 r == KR_EINVAL ? "empty or more than one line" : kr_strerror(r));
		}
	}
	if (r == 0 && !c->plain)
		r = setup_tls(c, pem, pem_cap, err, errlen);
	else if (r == 0)
		kr_log(KR_LOG_WARN, "server %s is plain HTTP: nothing is encrypted or verified", c->kcfg.server);
	if (strlen(c->kcfg.ns) < sizeof(c->source_ns))
		kr_snprintf(c->source_ns, sizeof(c->source_ns), "%s", c->kcfg.ns);
	/* Secrets read at start-up do not stay in memory. */
	kr_kubeconfig_wipe(&c->kcfg, w);
	/* The pages the kubeconfig reader or the PEM files wrote go back to the kernel. */
	if (c->kcfg_read || c->pem_read)
		kr_port_discard(c->arena, a < scratch + (size_t)KR_PEM_MAX + 3u ? a : scratch + (size_t)KR_PEM_MAX + 3u);
	if (r != 0) {
		c->magic = 0;
		return r;
	}
	c->magic = CLIENT_MAGIC;
	c->state = ST_INIT;
	*out = c;
	return 0;
}

int kr_client_add(struct kr_client *c, const struct kr_resource_spec *spec, char *err, size_t errlen)
{
	struct kr_resource *res;
	const char *ns, *ls, *fs;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!valid(c) || !spec || !spec->name || !*spec->name)
		return fail(err, errlen, KR_EINVAL, "kr_client_add needs a client and a resource name");
	if (c->in_callback || c->state != ST_INIT)
		return fail(err, errlen, KR_ESTATE, "resources are added before kr_client_start");
	if (c->nres == KR_MAX_RESOURCES)
		return fail(err, errlen, KR_ENOSPC, "more resources than KR_MAX_RESOURCES (%d), at '%.80s'",
			    KR_MAX_RESOURCES, spec->name);
	if (strlen(spec->name) >= SPEC_NAME_MAX)
		return fail(err, errlen, KR_EINVAL, "resource name '%.40s...' is too long", spec->name);
	res = &c->res[c->nres];
	memset(res, 0, sizeof(*res));
	c->discover_arg[c->nres][0] = '\0';
	r = kr_resource_lookup(spec->name, res, err, errlen);
	if (r == KR_ENOENT && !KR_WITH_DISCOVERY)
		return fail(err, errlen, KR_ENOENT, "unable to watch '%.80s': not in the compiled-in resource "
			    "table, and discovery is not built into this kreflect", spec->name);
	if (r == KR_ENOENT) {
		/* Not built in: asked of the server at start. */
		r = kr_discovery_parse_arg(spec->name, res, err, errlen);
		if (r == 0)
			kr_snprintf(c->discover_arg[c->nres], SPEC_NAME_MAX, "%s", spec->name);
	}
	if (r != 0)
		return r;
	ns = spec->ns ? spec->ns : c->cfg.ns;
	ls = spec->label_selector ? spec->label_selector : c->cfg.label_selector;
	fs = spec->field_selector ? spec->field_selector : c->cfg.field_selector;
	if ((ns && (!*ns || strlen(ns) >= sizeof(res->ns))) ||
	    (ls && strlen(ls) >= sizeof(res->label_selector)) ||
	    (fs && strlen(fs) >= sizeof(res->field_selector)))
		return fail(err, errlen, KR_EINVAL, "%s: namespace or selector empty or too long", spec->name);
	if (spec->all_namespaces || c->cfg.all_namespaces)
		res->all_namespaces = 1;
	/* Namespace: the spec's, the configuration's, the source's, "default". */
	if (spec->ns)
		kr_snprintf(res->ns, sizeof(res->ns), "%s", spec->ns);
	else if (c->source_ns[0] && (c->cfg.ns || !res->ns[0]))
		kr_snprintf(res->ns, sizeof(res->ns), "%s", c->source_ns);
	else if (!res->ns[0])
		kr_snprintf(res->ns, sizeof(res->ns), "default");
	if (ls)
		kr_snprintf(res->label_selector, sizeof(res->label_selector), "%s", ls);
	if (fs)
		kr_snprintf(res->field_selector, sizeof(res->field_selector), "%s", fs);
	return c->nres++;
}

int kr_client_add_resource(struct kr_client *c, const char *name, char *err, size_t errlen)
{
	struct kr_resource_spec spec;

	memset(&spec, 0, sizeof(spec));
	spec.name = name;
	return kr_client_add(c, &spec, err, errlen);
}

/* Every change to every callback, in the order they were added. */
static void dispatch_event(void *arg, const struct kr_event *ev)
{
	struct kr_client *c = arg;
	int i;

	c->in_callback++;
	for (i = 0; i < c->ncb; i++)
		c->cb[i].fn(c->cb[i].arg, ev);
	c->in_callback--;
}

static void dispatch_state(void *arg, const struct kr_state_change *st)
{
	struct kr_client *c = arg;

	if (!c->state_fn)
		return;
	c->in_callback++;
	c->state_fn(c->state_arg, st);
	c->in_callback--;
}

int kr_client_on_event(struct kr_client *c, void (*fn)(void *arg, const struct kr_event *ev), void *arg)
{
	if (!valid(c) || !fn)
		return KR_EINVAL;
	if (c->in_callback || c->state == ST_STOPPED)
		return KR_ESTATE;
	if (c->ncb == MAX_CALLBACKS)
		return KR_ENOSPC;
	c->cb[c->ncb].fn = fn;
	c->cb[c->ncb].arg = arg;
	c->ncb++;
	return 0;
}

int kr_client_on_state(struct kr_client *c, void (*fn)(void *arg, const struct kr_state_change *st),
		       void *arg)
{
	if (!valid(c))
		return KR_EINVAL;
	if (c->in_callback)
		return KR_ESTATE;
	c->state_fn = fn;
	c->state_arg = arg;
	return 0;
}

/*
 * Resolves the names left for discovery, before the store exists: its
 * arena is the scratch (connection, tokens, response body). Returns how
 * many were asked of the server, or a negative KR_E code.
 */
static int discover(struct kr_client *c, char *err, size_t errlen)
{
	struct kr_discovery_work w;
	struct kr_loop once;           /* discovery's own: the client's loop keeps its sources */
	size_t off, tokbytes;
	int i, r, asked = 0;

	off = ALIGN16(sizeof(struct kr_conn));
	tokbytes = (size_t)KR_JSON_TOKENS * sizeof(kr_json_tok);
	if (off + tokbytes + 65536u > c->arena_bytes)
		tokbytes = (c->arena_bytes - off) / 2 / sizeof(kr_json_tok) * sizeof(kr_json_tok);
	w.conn = (struct kr_conn *)(void *)c->arena;
	w.toks = (kr_json_tok *)(void *)(c->arena + off);
	w.ntoks = (int)(tokbytes / sizeof(kr_json_tok));
	w.body = c->arena + off + tokbytes;
	w.cap = c->arena_bytes - off - tokbytes;
	for (i = 0; i < c->nres; i++) {
		if (!c->discover_arg[i][0])
			continue;
		kr_loop_init(&once);
		r = kr_discovery_resolve(&once, &c->conn_cfg, kr_auth_token(&c->auth), &w,
					 c->discover_arg[i], &c->res[i], DISCOVERY_TIMEOUT_MS, err, errlen);
		if (r != 0)
			return r;
		c->discover_arg[i][0] = '\0';
		asked++;
	}
	return asked;
}

/* No resource added: the compile-time table (config/resources.def). */
static void apply_defaults(struct kr_client *c)
{
	size_t ndef, i;
	const struct kr_resource *d = kr_resource_defaults(&ndef);

	for (i = 0; i < ndef && i < KR_MAX_RESOURCES; i++) {
		/* The table's entries keep their own namespace unless one was configured. */
		c->res[c->nres] = d[i];
		c->discover_arg[c->nres][0] = '\0';
		if (c->cfg.all_namespaces)
			c->res[c->nres].all_namespaces = 1;
		if (c->source_ns[0] && (c->cfg.ns || !c->res[c->nres].ns[0]))
			kr_snprintf(c->res[c->nres].ns, sizeof(c->res[0].ns), "%s", c->source_ns);
		else if (!c->res[c->nres].ns[0])
			kr_snprintf(c->res[c->nres].ns, sizeof(c->res[0].ns), "default");
		if (c->cfg.label_selector)
			kr_snprintf(c->res[c->nres].label_selector, sizeof(c->res[0].label_selector), "%s",
				    c->cfg.label_selector);
		if (c->cfg.field_selector)
			kr_snprintf(c->res[c->nres].field_selector, sizeof(c->res[0].field_selector), "%s",
				    c->cfg.field_selector);
		c->nres++;
	}
}

int kr_client_start(struct kr_client *c, char *err, size_t errlen)
{
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!valid(c))
		return fail(err, errlen, KR_EINVAL, "kr_client_start needs a client");
	if (c->in_callback || c->state != ST_INIT)
		return fail(err, errlen, KR_ESTATE, "the client was started already");
	if (c->nres == 0)
		apply_defaults(c);
	r = KR_WITH_DISCOVERY ? discover(c, err, errlen) : 0;
	if (r < 0)
		return r;
	/* The discovery scratch's pages go back; the store starts over them. */
	if (r > 0)
		kr_port_discard(c->arena, c->arena_bytes < (4u << 20) ? c->arena_bytes : (4u << 20));
	kr_store_init(&c->store, c->arena, c->arena_bytes, c->entries, (uint32_t)c->max_objects, c->buckets,
		      (uint32_t)c->nbuckets, KR_STORE_RESERVE);
	r = kr_reflect_init(&c->top, &c->loop, &c->store, &c->conn_cfg, &c->ropts, c->refl, c->res, c->nres);
	if (r != 0)
		return fail(err, errlen, r, "unable to set up the reflector: %s", kr_strerror(r));
	if (c->auth.token[0] || c->auth.path[0])
		c->top.auth = &c->auth;
	c->top.on_state = dispatch_state;
	c->top.state_arg = c;
	{
		struct kr_sink sink = { dispatch_event, c };

		kr_reflect_add_sink(&c->top, &sink);
	}
	if (c->cfg.gzip && !KR_WITH_GZIP)
		return fail(err, errlen, KR_ENOTSUP, "unable to ask for gzip lists: the inflater is not built "
			    "into this kreflect");
	if (c->cfg.state_dir && *c->cfg.state_dir && !KR_WITH_STATE)
		return fail(err, errlen, KR_ENOTSUP, "unable to use the state directory %.80s: it is not built "
			    "into this kreflect", c->cfg.state_dir);
	if (KR_WITH_STATE && c->cfg.state_dir && *c->cfg.state_dir) {
		struct kr_state_opts so;
		struct kr_sink sink = { kr_state_event, &c->persist };

		kr_state_opts_default(&so);
		so.dir = c->cfg.state_dir;
		if (c->cfg.state_interval_s)
			so.interval_ms = c->cfg.state_interval_s * 1000;
		so.max_stale_s = c->cfg.max_stale_s;
		so.commit_inline = c->cfg.state_sync_inline;
		r = kr_state_init(&c->persist, &c->top, &c->loop, &so, err, errlen);
		if (r != 0)
			return KR_EINVAL;      /* a state directory that cannot be used: configuration */
		/* Last: it only notes that the mirror changed. */
		kr_reflect_add_sink(&c->top, &sink);
		c->state_on = 1;
		c->started = 1;
		c->state = ST_STARTED;
		/* The restored mirror reaches the callbacks (as restored ADDED events) first. */
		kr_state_load(&c->persist);
	}
	c->state = ST_STARTED;
	c->started = 1;
	open_wakeup(c);
	kr_reflect_start(&c->top);
	return 0;
}

/* --- driving it ------------------------------------------------------------------------------ */

static void on_wakeup(struct kr_loop *loop, struct kr_source *s, int got)
{
	struct kr_client *c = s->arg;

	(void)got;
	kr_port_wakeup_drain(s->fd);
	c->woken = 1;
	if (c->running)
		loop->stop = 1;
}

/* The wake-up descriptor; without one (no descriptor left), kr_client_wakeup says KR_ESTATE. */
static void open_wakeup(struct kr_client *c)
{
	int fd;

	if (!KR_WITH_WAKEUP)
		return;
	fd = kr_port_wakeup_open();
	if (fd < 0) {
		kr_log(KR_LOG_WARN, "unable to open the wake-up descriptor: %s", kr_port_last_error());
		return;
	}
	c->wake.fd = fd;
	c->wake.want = KR_POLL_IN;
	c->wake.ready = on_wakeup;
	c->wake.arg = c;
	if (kr_loop_add(&c->loop, &c->wake) != 0) {
		kr_port_close(fd);
		return;
	}
	c->wake_fd = fd;
}

int kr_client_wakeup(struct kr_client *c)
{
	int fd;

	if (!valid(c))
		return KR_EINVAL;
	if (!KR_WITH_WAKEUP)
		return KR_ENOTSUP;
	fd = c->wake_fd;                   /* one read: kr_client_stop sets -1 before it closes */
	if (fd < 0)
		return KR_ESTATE;
	kr_port_wakeup_signal(fd);
	return 0;
}

static void on_loop_signal(struct kr_loop *loop, int sig, void *arg)
{
	struct kr_client *c = arg;

	(void)loop;
	c->signal_fn(c->signal_arg, sig);
}

int kr_client_signals(struct kr_client *c, void (*fn)(void *arg, int sig), void *arg)
{
	if (!valid(c) || !fn)
		return KR_EINVAL;
	if (c->state == ST_STOPPED || c->loop.signals.fd >= 0)
		return KR_ESTATE;
	c->signal_fn = fn;
	c->signal_arg = arg;
	return kr_loop_signals(&c->loop, on_loop_signal, c) == 0 ? 0 : KR_EIO;
}

int kr_client_stop(struct kr_client *c)
{
	int i;

	if (!valid(c))
		return KR_EINVAL;
	if (c->state == ST_STARTED)
		kr_reflect_stop(&c->top);
	if (c->serve) {
		c->serve_close(c->serve);
		c->serve = NULL;
	}
	if (KR_WITH_STATE && c->state_on) {
		kr_state_close(&c->persist);     /* the last snapshot, if anything changed */
		c->state_on = 0;
	}
	for (i = 0; i < KR_CLIENT_OUTS; i++)  /* the last batch of files in place, the last lines */
		if (c->out[i].p)
			c->out[i].end(c->out[i].p);
	if (KR_WITH_WAKEUP && c->wake_fd >= 0) {
		int fd = c->wake_fd;

		c->wake_fd = -1;
		kr_loop_remove(&c->loop, &c->wake);
		kr_port_close(fd);
	}
	c->loop.stop = 1;
	c->state = ST_STOPPED;
	return 0;
}

int kr_client_run(struct kr_client *c)
{
	int r;

	if (!valid(c))
		return KR_EINVAL;
	if (c->in_callback || c->state == ST_INIT)
		return KR_ESTATE;
	if (c->state != ST_STARTED)
		return 0;
	/* kr_client_stop sets loop.stop: the loop's own run is the whole of it; a wake-up too. */
	c->running = 1;
	r = kr_loop_run(&c->loop);
	c->running = 0;
	if (r < 0)
		return KR_EIO;
	if (c->woken && c->state == ST_STARTED) {
		c->woken = 0;
		c->loop.stop = 0;
		return KR_RUN_WOKEN;
	}
	return 0;
}

/* A host timer is due: its callback, as a callback (the calls it may make are a callback's). */
static void host_timer_fire(struct kr_loop *loop, struct kr_timer *t)
{
	struct host_timer *h = (struct host_timer *)(void *)t;
	struct kr_client *c = h->c;

	(void)loop;
	c->in_callback++;
	h->fn(h->arg, (int)(h - c->timers));
	c->in_callback--;
}

int kr_client_timer(struct kr_client *c, int slot, long after_ms, kr_timer_fn fn, void *arg)
{
	struct host_timer *h;

	if (!valid(c) || slot < 0 || slot >= KR_CLIENT_MAX_TIMERS || after_ms < 0 || after_ms > 2147483647L)
		return KR_EINVAL;
	if (c->state == ST_STOPPED)
		return KR_ESTATE;
	h = &c->timers[slot];
	kr_loop_timer_cancel(&c->loop, &h->t);
	h->fn = fn;
	h->arg = arg;
	if (!fn)
		return 0;
	h->c = c;
	h->t.fire = host_timer_fire;
	return kr_loop_timer_at(&c->loop, &h->t, kr_port_now_ms() + after_ms) == 0 ? 0 : KR_ENOSPC;
}

int kr_client_fds(struct kr_client *c, struct kr_client_fd *fds, int max, int *timeout_ms)
{
	struct kr_pollfd pf[KR_LOOP_MAX_SOURCES];
	int i, n;

	if (!valid(c) || (!fds && max > 0) || max < 0 || !timeout_ms)
		return KR_EINVAL;
	if (c->in_callback || c->state == ST_INIT)
		return KR_ESTATE;
	if (c->state == ST_STOPPED || c->loop.stop) {
		*timeout_ms = -1;
		return 0;
	}
	n = kr_loop_fds(&c->loop, pf, KR_LOOP_MAX_SOURCES, timeout_ms);
	if (n < 0)
		return n;
	if (n > max)
		return KR_ENOSPC;
	for (i = 0; i < n; i++) {
		fds[i].fd = pf[i].fd;
		fds[i].events = (short)((pf[i].want & KR_POLL_IN ? KR_POLLIN : 0) |
					(pf[i].want & KR_POLL_OUT ? KR_POLLOUT : 0));
		fds[i].revents = 0;
	}
	return n;
}

int kr_client_process(struct kr_client *c, const struct kr_client_fd *fds, int n)
{
	struct kr_pollfd pf[KR_LOOP_MAX_SOURCES];
	int i, m = 0;

	if (!valid(c) || n < 0 || (n > 0 && !fds))
		return KR_EINVAL;
	if (c->in_callback || c->state == ST_INIT)
		return KR_ESTATE;
	if (c->state == ST_STOPPED)
		return 0;
	/* Only what was reported matters; the host's array may be larger than ours. */
	for (i = 0; i < n && m < KR_LOOP_MAX_SOURCES; i++) {
		if (!fds[i].revents)
			continue;
		pf[m].fd = fds[i].fd;
		pf[m].want = 0;
		pf[m].got = (short)((fds[i].revents & KR_POLLIN ? KR_POLL_IN : 0) |
				    (fds[i].revents & KR_POLLOUT ? KR_POLL_OUT : 0) |
				    (fds[i].revents & KR_POLLERR ? KR_POLL_ERR : 0));
		m++;
	}
	if (m)
		c->loop.wakeups++;
	m = kr_loop_process(&c->loop, pf, m);
	c->woken = 0;                      /* the host's loop needs no more than the poll() it woke */
	return m;
}

/* --- the local endpoint ----------------------------------------------------------------------- */

/* What a caller sizes a static buffer by (config/kreflect_config.h) holds kr_listen_memory. */
_Static_assert(sizeof(struct kr_serve) <= KR_ENDPOINT_BASE_BYTES,
	       "struct kr_serve outgrew KR_ENDPOINT_BASE_BYTES: raise its fixed part");
_Static_assert(sizeof(struct kr_serve_conn) <= KR_ENDPOINT_CONN_BYTES,
	       "struct kr_serve_conn outgrew KR_ENDPOINT_CONN_BYTES: raise its fixed part");

size_t kr_listen_memory(const struct kr_listen_config *lc)
{
	int n;

	if (!lc || lc->max_conns < 0 || lc->max_conns > KR_SERVE_MAX_CONNS)
		return 0;
	n = lc->max_conns ? lc->max_conns : KR_SERVE_MAX_CONNS;
	return ALIGN16(sizeof(struct kr_serve)) + ALIGN16((size_t)n * sizeof(struct kr_serve_conn));
}

int kr_client_listen_opts(struct kr_client *c, void *mem, size_t len, const struct kr_serve_opts *o,
			  char *err, size_t errlen)
{
	struct kr_serve *s = mem;
	struct kr_listen_config lc;
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!valid(c) || !mem || !o || !o->listen || ((uintptr_t)mem & 15u))
		return fail(err, errlen, KR_EINVAL, "the endpoint needs a client, 16-byte aligned memory and an "
			    "address");
	if (!KR_WITH_LISTEN)
		return fail(err, errlen, KR_ENOTSUP, "unable to listen: the endpoint is not built into this "
			    "kreflect");
	if (c->in_callback || !c->started || c->state != ST_STARTED || c->serve)
		return fail(err, errlen, KR_ESTATE, "the endpoint opens once, after kr_client_start");
	memset(&lc, 0, sizeof(lc));
	lc.max_conns = o->max_conns;
	if (kr_listen_memory(&lc) == 0 || len < kr_listen_memory(&lc))
		return fail(err, errlen, KR_ENOSPC, "the endpoint needs %zu bytes of memory, given %zu",
			    kr_listen_memory(&lc), len);
	if (c->ncb == MAX_CALLBACKS)
		return fail(err, errlen, KR_ENOSPC, "no event callback left for the endpoint");
	r = kr_serve_init(s, &c->loop, &c->top, &c->store, o,
			  (struct kr_serve_conn *)(void *)((char *)mem + ALIGN16(sizeof(struct kr_serve))),
			  err, errlen);
	if (r != 0)
		return r;
	c->cb[c->ncb].fn = kr_serve_event;
	c->cb[c->ncb].arg = s;
	c->ncb++;
	c->serve = s;
	c->serve_close = kr_serve_close;
	if (KR_WITH_STATE && c->state_on) {
		/* Its ring back before the first event, so watchers resume across a restart. */
		c->history.arg = s;
		c->history.walk = kr_serve_history_walk;
		c->history.add = kr_serve_history_add;
		kr_state_history(&c->persist, &c->history);
	}
	return 0;
}

int kr_client_listen(struct kr_client *c, void *mem, size_t len, const struct kr_listen_config *lc,
		     char *err, size_t errlen)
{
	struct kr_endpoint_config ec;

	if (!lc)
		return fail(err, errlen, KR_EINVAL, "kr_client_listen needs a configuration");
	kr_endpoint_config_init(&ec);
	ec.address = lc->address;
	ec.token_file = lc->token_file;
	ec.max_conns = lc->max_conns;
	ec.serve_secrets = lc->serve_secrets;
	ec.ready_silence_s = lc->ready_silence_s;
	ec.idle_s = lc->idle_s;
	ec.bookmark_s = lc->bookmark_s;
	ec.health_only = lc->health_only;
	return kr_client_endpoint(c, mem, len, &ec, err, errlen);
}

struct kr_client_hooks *kr_client_hooks_slot(struct kr_client *c)
{
	return valid(c) ? &c->hooks : NULL;
}

int kr_client_may_add(struct kr_client *c, int callbacks)
{
	if (!valid(c))
		return KR_EINVAL;
	if (c->in_callback || c->state != ST_INIT)
		return KR_ESTATE;
	return c->ncb + callbacks > MAX_CALLBACKS ? KR_ENOSPC : 0;
}

int kr_client_in_callback(struct kr_client *c)
{
	return valid(c) && c->in_callback;
}

int kr_client_set_output(struct kr_client *c, enum kr_client_output o, void *p, void (*end)(void *p))
{
	if (!valid(c) || (unsigned)o >= KR_CLIENT_OUTS)
		return KR_EINVAL;
	if (c->in_callback || c->state != ST_INIT || c->out[o].p)
		return KR_ESTATE;
	if (!p)
		return c->ncb == MAX_CALLBACKS ? KR_ENOSPC : 0;
	c->out[o].p = p;
	c->out[o].end = end;
	return 0;
}

void *kr_client_output(struct kr_client *c, enum kr_client_output o)
{
	return valid(c) && (unsigned)o < KR_CLIENT_OUTS ? c->out[o].p : NULL;
}

void kr_endpoint_config_init_size(struct kr_endpoint_config *ec, size_t size)
{
	kr_client_sized_init(ec, size, ENDPOINT_SIZE_1_1);
}

size_t kr_endpoint_memory(const struct kr_endpoint_config *ec)
{
	struct kr_endpoint_config in;
	struct kr_listen_config lc;

	kr_endpoint_config_init(&in);
	if (sized_in(ec, ENDPOINT_SIZE_1_1, &in, sizeof(in)) != 0)
		return 0;
	memset(&lc, 0, sizeof(lc));
	lc.max_conns = in.max_conns;
	return kr_listen_memory(&lc);
}

int kr_client_endpoint(struct kr_client *c, void *mem, size_t len, const struct kr_endpoint_config *ec,
		       char *err, size_t errlen)
{
	struct kr_endpoint_config in;
	struct kr_serve_opts o;
	int r;

	kr_endpoint_config_init(&in);
	r = sized_in(ec, ENDPOINT_SIZE_1_1, &in, sizeof(in));
	if (r == KR_ENOTSUP)
		return fail(err, errlen, r, "the endpoint's configuration sets a field kreflect %s does not have "
			    "(struct_size %zu, this library's %zu)", KR_VERSION, ec->struct_size, sizeof(in));
	if (r != 0)
		return fail(err, errlen, r, "the endpoint's configuration was not made by "
			    "kr_endpoint_config_init");
	if (in.ready_silence_s < 0 || in.ready_silence_s > 86400 || in.idle_s < 0 || in.idle_s > 3600 ||
	    in.bookmark_s < 0 || in.bookmark_s > 3600 || in.tls_sessions < 0 ||
	    in.tls_sessions > KR_SERVE_TLS_CONNS)
		return fail(err, errlen, KR_EINVAL, "the endpoint's ready_silence_s (0..86400), idle_s or "
			    "bookmark_s (0..3600) or tls_sessions (0..%d) is out of range", KR_SERVE_TLS_CONNS);
	memset(&o, 0, sizeof(o));
	o.listen = in.address;
	o.token_file = in.token_file;
	o.access_file = in.access_file;
	o.cert_file = in.cert_file;
	o.key_file = in.key_file;
	o.client_ca_file = in.client_ca_file;
	o.insecure = in.insecure != 0;
	o.max_conns = in.max_conns;
	o.serve_secrets = in.serve_secrets != 0;
	o.health_only = in.health_only != 0;
	o.healthz_ready = in.healthz_ready != 0;
	o.ready_silence_ms = in.ready_silence_s * 1000;
	o.idle_ms = in.idle_s * 1000;
	o.bookmark_ms = in.bookmark_s * 1000;
	o.tls_sessions = in.tls_sessions;
	if (valid(c)) {
		o.notify = c->hooks.notify;
		o.post = c->hooks.post;
	}
	return kr_client_listen_opts(c, mem, len, &o, err, errlen);
}

int kr_client_endpoint_where(struct kr_client *c, char *where, size_t len, int *token_required)
{
	if (!valid(c) || !where || !len)
		return KR_EINVAL;
	where[0] = '\0';
	if (!KR_WITH_LISTEN || !c->serve)
		return KR_ESTATE;
	if (strlen(c->serve->where) >= len)
		return KR_ENOSPC;
	memcpy(where, c->serve->where, strlen(c->serve->where) + 1);
	if (token_required)
		*token_required = c->serve->need_token;
	return 0;
}

/* --- reading ------------------------------------------------------------------------------- */

static void to_object(const struct kr_store_view *v, struct kr_object *o)
{
	o->res = v->res;
	o->key = v->key;
	o->rv = v->rv;
	o->obj = v->held ? v->obj : NULL;
	o->objlen = v->held ? v->objlen : 0;
}

int kr_client_get(struct kr_client *c, int res, const char *key, struct kr_object *out)
{
	struct kr_store_view v;

	if (!valid(c) || !key || !out || res < 0 || res >= c->nres)
		return KR_EINVAL;
	if (!c->started)
		return KR_ESTATE;
	if (!kr_store_get(&c->store, res, key, strlen(key), &v))
		return KR_ENOENT;
	to_object(&v, out);
	return 0;
}

struct each {
	void (*fn)(void *arg, const struct kr_object *o);
	void *arg;
};

static void each_fn(void *arg, const struct kr_store_view *v)
{
	struct each *e = arg;
	struct kr_object o;

	to_object(v, &o);
	e->fn(e->arg, &o);
}

int kr_client_foreach(struct kr_client *c, int res, void (*fn)(void *arg, const struct kr_object *o),
		      void *arg)
{
	struct each e;
	size_t n;

	if (!valid(c) || !fn || res >= c->nres)
		return KR_EINVAL;
	if (!c->started)
		return KR_ESTATE;
	e.fn = fn;
	e.arg = arg;
	c->in_callback++;
	n = kr_store_foreach(&c->store, res < 0 ? -1 : res, each_fn, &e);
	c->in_callback--;
	return n > 0x7fffffff ? 0x7fffffff : (int)n;
}

int kr_client_status_size(struct kr_client *c, int res, struct kr_status *out, size_t size)
{
	const struct kr_reflector *r;
	struct kr_status *st = out;

	/* Every 1.0 field lies within STATUS_SIZE_1_0; a newer caller's later fields stay zero. */
	if (!valid(c) || !out || size < STATUS_SIZE_1_0 || res < 0 || res >= c->nres)
		return KR_EINVAL;
	memset(out, 0, size);
	st->resource = c->res[res].name;
	st->status_reason = "";
	if (!c->started) {
		st->state = c->state == ST_STOPPED ? KR_HEALTH_STOPPED : KR_HEALTH_STARTING;
		st->last_rv = "";
		st->reason = "";
		return 0;
	}
	r = &c->refl[res];
	st->state = c->state == ST_STOPPED ? KR_HEALTH_STOPPED : r->told_state;
	st->synced = r->synced;
	st->partial = r->partial;
	st->restored = r->restored && r->synced;
	st->restored_age_s = st->restored && KR_WITH_STATE && c->state_on ? kr_state_age_s(&c->persist) : 0;
	st->objects = kr_store_count(&c->store, res);
	st->last_rv = r->last_rv;
	st->reason = r->conn.reason;
	st->lists = r->lists;
	st->watch_lists = r->watch_lists;
	st->watches = r->watches;
	st->relists = r->relists;
	st->errors = r->errors;
	st->failure = r->failure.cls;
	st->http_status = r->failure.http_status;
	st->status_reason = r->failure.status_reason;
	return 0;
}

int kr_client_resources(struct kr_client *c)
{
	if (!valid(c))
		return KR_EINVAL;
	if (!c->started && c->nres == 0 && !c->in_callback)
		apply_defaults(c);         /* what start would mirror: the compile-time table */
	return c->nres;
}

const char *kr_client_resource_name(struct kr_client *c, int res)
{
	if (!valid(c) || res < 0 || res >= c->nres)
		return NULL;
	return c->res[res].name;
}

int kr_client_ready(struct kr_client *c)
{
	if (!valid(c))
		return KR_EINVAL;
	if (!c->started)
		return 0;
	return kr_reflect_ready(&c->top);
}

/* --- for kreflect's own outputs and tests (client.h) ---------------------------------------- */

struct kr_loop *kr_client_loop(struct kr_client *c)
{
	return valid(c) ? &c->loop : NULL;
}

struct kr_reflect *kr_client_reflect(struct kr_client *c)
{
	return valid(c) && c->started ? &c->top : NULL;
}

struct kr_store *kr_client_store(struct kr_client *c)
{
	return valid(c) && c->started ? &c->store : NULL;
}

struct kr_reflector_opts *kr_client_opts(struct kr_client *c)
{
	return valid(c) && c->state == ST_INIT ? &c->ropts : NULL;
}

struct kr_resource *kr_client_resource(struct kr_client *c, int res)
{
	return valid(c) && res >= 0 && res < c->nres ? &c->res[res] : NULL;
}

/* --- least privilege --------------------------------------------------------------- */

/*
 * The port's lists hold what kr_client_sandbox can add to them: the host's
 * four of each kind and the client's own five files, one directory or port.
 */
#define SB_HOST 4
_Static_assert(sizeof(((struct kr_sandbox_opts *)0)->read_files) / sizeof(char *) == SB_HOST &&
	       sizeof(((struct kr_sandbox_opts *)0)->write_dirs) / sizeof(char *) == SB_HOST &&
	       sizeof(((struct kr_sandbox_opts *)0)->programs) / sizeof(char *) == SB_HOST &&
	       sizeof(((struct kr_sandbox_opts *)0)->tcp_ports) / sizeof(uint16_t) == SB_HOST,
	       "kr_sandbox_opts changed: size KR_SANDBOX_PATHS and KR_SANDBOX_PORTS again");
_Static_assert(KR_SANDBOX_PATHS >= SB_HOST + 5 && KR_SANDBOX_PORTS >= SB_HOST + 1,
	       "KR_SANDBOX_PATHS or KR_SANDBOX_PORTS too small for a host's and the client's");

/* Appends s (if any) to list[0..KR_SANDBOX_PATHS), which has room (above). */
static void sb_add(const char **list, const char *s)
{
	size_t i;

	if (!s || !*s)
		return;
	for (i = 0; i < KR_SANDBOX_PATHS && list[i]; i++)
		;
	if (i < KR_SANDBOX_PATHS)
		list[i] = s;
}

static void sb_port(uint16_t *ports, uint16_t port)
{
	size_t i;

	for (i = 0; i < KR_SANDBOX_PORTS && ports[i] && ports[i] != port; i++)
		;
	if (i < KR_SANDBOX_PORTS)
		ports[i] = port;
}

/* A token file and its directory: a rotation swaps a symbolic link inside it. */
static void sb_token(struct kr_sandbox *sb, const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!*path)
		return;
	if (!slash)
		kr_snprintf(dir, size, ".");
	else
		kr_snprintf(dir, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	sb_add(sb->read, path);
	sb_add(sb->read_dir, dir);
}

int kr_client_sandbox(struct kr_client *c, const struct kr_sandbox_opts *o, char *msg, size_t len)
{
	/* The client's token, then --listen's token, certificate, key and client CA:
	 * each re-read when it changes, so its directory is read too. */
	static char token_dir[5][sizeof(((struct kr_auth *)0)->path)];
	static char socket_dir[sizeof(((struct kr_serve *)0)->where)];
	static char file_dir[SB_HOST][512];
	struct kr_sandbox sb;
	struct kr_addr a;
	size_t i;

	if (!valid(c) || !o || !msg || !len)
		return KR_EINVAL;
	if (!KR_WITH_SANDBOX)
		return fail(msg, len, KR_ENOTSUP, "sandbox: not built into this library (WITHOUT=sandbox)");
	if (!c->started)
		return fail(msg, len, KR_ESTATE, "sandbox: call kr_client_sandbox after kr_client_start");
	memset(&sb, 0, sizeof(sb));
	sb.mode = o->mode == KR_SANDBOX_MODE_ON ? KR_SANDBOX_ON
		  : o->mode == KR_SANDBOX_MODE_OFF ? KR_SANDBOX_OFF : KR_SANDBOX_AUTO;
	sb.uid = o->uid;
	sb.gid = o->gid;
	sb.lookups = o->lookups;
	sb.filter = o->syscall_filter;
	sb.signal_others = o->signal_others;
	for (i = 0; i < SB_HOST; i++) {
		/* A file re-read may be replaced (a new pid file, a rotated token): its directory too. */
		sb_add(sb.write_dir, o->write_dirs[i]);
		sb_add(sb.exec, o->programs[i]);
		if (o->read_files[i])
			sb_token(&sb, o->read_files[i], file_dir[i], sizeof(file_dir[i]));
		if (o->tcp_ports[i])
			sb_port(sb.connect, o->tcp_ports[i]);
	}
	sb_token(&sb, c->auth.path, token_dir[0], sizeof(token_dir[0]));
	if (c->state_on)
		sb_add(sb.write_dir, c->persist.dir);
	/* Through a proxy the TCP connection and the name lookup are the proxy's. */
	if (c->conn_cfg.proxy) {
		sb_port(sb.connect, c->proxy.port);
		sb.lookups |= kr_port_parse_ip(c->proxy.host, 0, &a) != 0;
	} else {
		sb_port(sb.connect, c->conn_cfg.port);
		sb.lookups |= kr_port_parse_ip(c->conn_cfg.host, 0, &a) != 0;
	}
	if (c->serve) {
		const char *where = c->serve->where, *colon = strrchr(where, ':');
		const struct kr_serve_opts *so = &c->serve->opts;

		sb_token(&sb, so->token_file ? so->token_file : "", token_dir[1], sizeof(token_dir[1]));
		sb_token(&sb, so->cert_file ? so->cert_file : "", token_dir[2], sizeof(token_dir[2]));
		sb_token(&sb, so->key_file ? so->key_file : "", token_dir[3], sizeof(token_dir[3]));
		sb_token(&sb, so->client_ca_file ? so->client_ca_file : "", token_dir[4],
				sizeof(token_dir[4]));
		if (c->serve->unix_socket) {
			/* The socket is removed at the end: its directory allows only that. */
			const char *slash = strrchr(where, '/');

			kr_snprintf(socket_dir, sizeof(socket_dir), "%.*s",
				    !slash ? 1 : slash == where ? 1 : (int)(slash - where), slash ? where : ".");
			sb_add(sb.remove_in, socket_dir);
		} else if (colon && kr_parse_num(colon + 1, 1, 65535) > 0) {
			sb_port(sb.bind, (uint16_t)kr_parse_num(colon + 1, 1, 65535));
		}
	}
	return kr_port_sandbox(&sb, msg, len);
}
