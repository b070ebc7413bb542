/*
 * A scripted network under the real reflector, for fuzz targets.
 *
 * The target is linked with -Wl,--wrap for the port's clock and socket calls
 * (NETSIM_WRAP in the Makefile), so the unmodified loop, connection, HTTP
 * parser, chunked decoder, framers, reflector, store and sinks run on
 * descriptors that exist only here: a connect always succeeds (unless the
 * script refuses it), requests are swallowed, and each request gets the next
 * scripted response, read back in pieces whose sizes the script chooses.
 * Time is virtual: when nothing is readable, poll advances the clock to the
 * loop's nearest deadline (backoff, Retry-After, read-idle, the watch-list
 * bookmark deadline), so every timer path runs at full speed.
 *
 * A script is a list of responses. Each has two header bytes, then the bytes
 * the server sends:
 *   h0 bits 0-1: after the bytes, 0 = stay open (silent), 1 = close (EOF),
 *                2 = reset, 3 = refuse this request's connect (no bytes sent)
 *   h0 bits 2-3: read sizes: 0 = as much as the reader asks for, 1 = 1..8,
 *                2 = 1..64, 3 = 1..1024 bytes
 *   h1:          seeds the read sizes
 *
 * Checks, abort() on failure: kr_store_check after every event; the event
 * stream folded from empty (per resource: key -> resourceVersion and hash of
 * the bytes) never sees ADDED for a key it holds nor MODIFIED, DELETED or
 * RESYNC for one it does not; at every SYNCED and at the end the fold equals
 * the store's held objects exactly; every request is a GET under /api and
 * nothing follows its blank line; no descriptor is used after close, closed
 * twice or left open after kr_reflect_stop. NETSIM_TRACE=1 prints the run
 * (requests, events, log lines) to stderr.
 */
#ifndef KR_FUZZ_NETSIM_H
#define KR_FUZZ_NETSIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "log.h"
#include "loop.h"
#include "port.h"
#include "reflector.h"
#include "resource.h"
#include "sink.h"
#include "store.h"

#define NS_FD_BASE 1000
#define NS_MAX_SOCKS 64                /* descriptors handed out in one run */
#define NS_MAX_RESPONSES 256
#define NS_MAX_STEPS 20000             /* loop passes in one run */
#define NS_MAX_KEYS 512                /* objects the fold tracks per resource */
#define NS_ARENA_MAX (1u << 20)
#define NS_ENTRIES 256
#define NS_BUCKETS 256
#define NS_START_MS 1000000
#define NS_WALL_SECONDS 1767225600     /* 2026-01-01: fixed, for Retry-After dates */

#define NS_KEEP 0
#define NS_EOF 1
#define NS_RESET 2
#define NS_REFUSE 3

struct ns_response {
	const uint8_t *data;
	size_t len;
	int end;                       /* NS_KEEP, NS_EOF, NS_RESET, NS_REFUSE */
	int sizes;                     /* read size class */
	uint32_t rng;
};

struct ns_sock {
	int open;
	struct ns_response *resp;      /* what the server is sending on it, or NULL */
	size_t pos;
	char req_head[8];              /* first bytes of the request being written */
	size_t req_len;
	char req_tail[4];              /* its last four bytes */
};

struct ns_key {
	char key[KR_KEY_MAX];
	char rv[KR_RV_MAX];
	uint64_t hash;
	size_t len;
};

struct ns_fold {
	struct ns_key keys[NS_MAX_KEYS];
	int n;
};

struct ns_state {
	kr_ms_t now;
	int stuck;                     /* poll found nothing to wait for: stop */
	struct ns_response responses[NS_MAX_RESPONSES];
	int nresponses, next_response;
	struct ns_sock socks[NS_MAX_SOCKS];
	int nsocks;
	int exhausted;                 /* a request found no response left: stop */
	unsigned long requests;
	unsigned long events;
	struct kr_store *store;
	struct ns_fold fold[2];        /* last: ns_reset clears what comes before */
};

static struct ns_state ns;
static int ns_trace = -1;              /* NETSIM_TRACE=1 in the environment: print the run */

static struct kr_loop ns_loop;
static struct kr_store ns_store;
static char ns_arena[NS_ARENA_MAX] __attribute__((aligned(16)));
static struct kr_entry ns_entries[NS_ENTRIES];
static int32_t ns_buckets[NS_BUCKETS];
static struct kr_reflect ns_top;
static struct kr_reflector ns_refl[2];

#define NS_FAIL(...)                                                                  \
	do {                                                                          \
		fprintf(stderr, "netsim: " __VA_ARGS__);                              \
		fputc('\n', stderr);                                                  \
		abort();                                                              \
	} while (0)

static uint32_t ns_rng(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

static uint64_t ns_hash(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	while (n--)
		h = (h ^ (uint8_t)*p++) * 1099511628211ull;
	return h;
}

static void ns_add_response(const uint8_t *p, size_t n)
{
	struct ns_response *r;

	if (ns.nresponses == NS_MAX_RESPONSES)
		return;
	r = &ns.responses[ns.nresponses++];
	r->end = n > 0 ? p[0] & 3 : NS_EOF;
	r->sizes = n > 0 ? (p[0] >> 2) & 3 : 0;
	r->rng = 0x9e3779b9u ^ (n > 1 ? p[1] : 0) * 0x01000193u;
	r->data = n > 2 ? p + 2 : p;
	r->len = n > 2 ? n - 2 : 0;
}

/* --- the wrapped port calls -------------------------------------------------------- */

kr_ms_t __wrap_kr_port_now_ms(void);
int64_t __wrap_kr_port_wall_seconds(void);
int __wrap_kr_port_resolve_start(const char *host);
int __wrap_kr_port_tcp_connect(const struct kr_addr *addr);
int __wrap_kr_port_connect_result(int fd);
long __wrap_kr_port_send(int fd, const void *buf, size_t len);
long __wrap_kr_port_recv(int fd, void *buf, size_t len);
void __wrap_kr_port_close(int fd);
const char *__wrap_kr_port_last_error(void);
int __wrap_kr_port_poll(struct kr_pollfd *fds, int n, int timeout_ms);
void __wrap_kr_port_log_write(const char *line, size_t len);

kr_ms_t __wrap_kr_port_now_ms(void)
{
	return ns.now;
}

int64_t __wrap_kr_port_wall_seconds(void)
{
	return NS_WALL_SECONDS;
}

int __wrap_kr_port_resolve_start(const char *host)
{
	NS_FAIL("a name lookup of '%s' (the harness connects to an IP literal)", host);
	return -1;
}

static struct ns_sock *ns_sock(int fd, const char *what)
{
	struct ns_sock *s;

	if (fd < NS_FD_BASE || fd >= NS_FD_BASE + ns.nsocks)
		NS_FAIL("%s on descriptor %d, never opened", what, fd);
	s = &ns.socks[fd - NS_FD_BASE];
	if (!s->open)
		NS_FAIL("%s on descriptor %d after close", what, fd);
	return s;
}

int __wrap_kr_port_tcp_connect(const struct kr_addr *addr)
{
	struct ns_response *next = ns.next_response < ns.nresponses
					   ? &ns.responses[ns.next_response] : NULL;
	struct ns_sock *s;

	(void)addr;
	if (next && next->end == NS_REFUSE) {
		ns.next_response++;    /* this response is the refusal */
		return KR_IO_ERR;
	}
	if (ns.nsocks == NS_MAX_SOCKS) {
		ns.exhausted = 1;
		return KR_IO_ERR;
	}
	s = &ns.socks[ns.nsocks++];
	memset(s, 0, sizeof(*s));
	s->open = 1;
	return NS_FD_BASE + ns.nsocks - 1;
}

int __wrap_kr_port_connect_result(int fd)
{
	ns_sock(fd, "connect result");
	return 0;
}

static int ns_dead(const struct ns_sock *s)
{
	return s->resp && s->pos == s->resp->len && s->resp->end != NS_KEEP;
}

/* The request written on s is complete: check it, and give it the next response. */
static void ns_request_done(struct ns_sock *s)
{
	ns.requests++;
	if (ns_trace > 0)
		fprintf(stderr, "[%lld] request %lu on descriptor %d gets %s\n", (long long)ns.now,
			ns.requests, NS_FD_BASE + (int)(s - ns.socks),
			ns_dead(s) ? "the close" : s->resp && s->pos < s->resp->len ? "leftover bytes"
			: ns.next_response < ns.nresponses ? "the next response" : "nothing: end");
	if (memcmp(s->req_head, "GET /api", 8) != 0)
		NS_FAIL("request %lu does not start with 'GET /api': '%.8s'", ns.requests, s->req_head);
	if (ns_dead(s))
		return;                /* the server closed: the client finds out by reading */
	/* Bytes the server sent after the last response: they answer this request. */
	if (s->resp && s->pos < s->resp->len)
		return;
	if (ns.next_response == ns.nresponses) {
		ns.exhausted = 1;
		s->resp = NULL;
		return;
	}
	s->resp = &ns.responses[ns.next_response++];
	s->pos = 0;
}

long __wrap_kr_port_send(int fd, const void *buf, size_t len)
{
	struct ns_sock *s = ns_sock(fd, "send");
	const char *p = buf;
	size_t i;

	if (len == 0)
		NS_FAIL("a send of 0 bytes");
	for (i = 0; i < len; i++) {
		if (s->req_len < sizeof(s->req_head))
			s->req_head[s->req_len] = p[i];
		s->req_len++;
		memmove(s->req_tail, s->req_tail + 1, 3);
		s->req_tail[3] = p[i];
		if (memcmp(s->req_tail, "\r\n\r\n", 4) == 0) {
			ns_request_done(s);
			s->req_len = 0;
			memset(s->req_tail, 0, sizeof(s->req_tail));
			if (i + 1 != len)
				NS_FAIL("bytes after the end of a request head");
		}
	}
	return (long)len;
}

long __wrap_kr_port_recv(int fd, void *buf, size_t len)
{
	struct ns_sock *s = ns_sock(fd, "recv");
	struct ns_response *r = s->resp;
	size_t n, left, most;

	if (len == 0)
		NS_FAIL("a recv of 0 bytes");
	if (!r)
		return KR_IO_WAIT;
	left = r->len - s->pos;
	if (left == 0)
		return r->end == NS_EOF ? 0 : r->end == NS_RESET ? KR_IO_ERR : KR_IO_WAIT;
	most = r->sizes == 0 ? len : r->sizes == 1 ? 8 : r->sizes == 2 ? 64 : 1024;
	n = r->sizes == 0 ? len : 1 + ns_rng(&r->rng) % most;
	if (n > len)
		n = len;
	if (n > left)
		n = left;
	memcpy(buf, r->data + s->pos, n);
	s->pos += n;
	return (long)n;
}

void __wrap_kr_port_close(int fd)
{
	ns_sock(fd, "close")->open = 0;
}

const char *__wrap_kr_port_last_error(void)
{
	return "Connection reset by peer (simulated)";
}

int __wrap_kr_port_poll(struct kr_pollfd *fds, int n, int timeout_ms)
{
	int i, ready = 0;

	for (i = 0; i < n; i++) {
		struct ns_sock *s = ns_sock(fds[i].fd, "poll");

		fds[i].got = 0;
		if (fds[i].want & KR_POLL_OUT)
			fds[i].got |= KR_POLL_OUT;
		if ((fds[i].want & KR_POLL_IN) && s->resp &&
		    (s->pos < s->resp->len || s->resp->end != NS_KEEP))
			fds[i].got |= KR_POLL_IN;
		ready += fds[i].got != 0;
	}
	if (ready)
		return ready;
	if (timeout_ms < 0)
		ns.stuck = 1;
	else
		ns.now += timeout_ms;
	return 0;
}

void __wrap_kr_port_log_write(const char *line, size_t len)
{
	/* Formatted (so hostile strings go through the formatter), written only when tracing. */
	if (len == 0 || line[len - 1] != '\n')
		NS_FAIL("a log line without its newline");
	if (ns_trace > 0)
		fprintf(stderr, "[%lld] %.*s", (long long)ns.now, (int)len, line);
}

/* --- the fold of the event stream ------------------------------------------------------ */

static struct ns_key *ns_find(struct ns_fold *f, const char *key)
{
	int i;

	for (i = 0; i < f->n; i++)
		if (strcmp(f->keys[i].key, key) == 0)
			return &f->keys[i];
	return NULL;
}

static void ns_compare_fn(void *arg, const struct kr_store_view *v)
{
	struct ns_fold *f = arg;
	struct ns_key *k;

	if (!v->held)
		return;
	k = ns_find(f, v->key);
	if (!k)
		NS_FAIL("%s is held in the store but was never ADDED", v->key);
	if (strcmp(k->rv, v->rv) != 0 || k->len != v->objlen || k->hash != ns_hash(v->obj, v->objlen))
		NS_FAIL("%s: the store holds rv %s (%zu bytes), the events said rv %s (%zu bytes)",
			v->key, v->rv, v->objlen, k->rv, k->len);
}

static int ns_held_count;

static void ns_count_fn(void *arg, const struct kr_store_view *v)
{
	(void)arg;
	ns_held_count += v->held != 0;
}

/* The fold of resource res equals the store's held objects of res. */
static void ns_compare(int res)
{
	ns_held_count = 0;
	kr_store_foreach(ns.store, res, ns_compare_fn, &ns.fold[res]);
	kr_store_foreach(ns.store, res, ns_count_fn, NULL);
	if (ns_held_count != ns.fold[res].n)
		NS_FAIL("resource %d: the store holds %d objects, the events say %d", res,
			ns_held_count, ns.fold[res].n);
}

static void ns_event(void *arg, const struct kr_event *ev)
{
	struct ns_fold *f;
	struct ns_key *k;
	const char *why;

	(void)arg;
	ns.events++;
	if (ns_trace > 0)
		fprintf(stderr, "[%lld] event %s %s rv %s %zu bytes\n", (long long)ns.now,
			kr_event_name(ev->type), ev->key ? ev->key : "-", ev->rv ? ev->rv : "-",
			ev->objlen);
	if (kr_store_check(ns.store, &why) != 0)
		NS_FAIL("kr_store_check after event %lu: %s", ns.events, why ? why : "?");
	if (ev->res < 0 || ev->res > 1)
		NS_FAIL("an event of resource %d", ev->res);
	f = &ns.fold[ev->res];
	if (ev->type == KR_EV_SYNCED) {
		ns_compare(ev->res);
		return;
	}
	if (!ev->key || !ev->rv || !ev->obj || strlen(ev->key) >= KR_KEY_MAX ||
	    strlen(ev->rv) >= KR_RV_MAX)
		NS_FAIL("a %s event without a key, rv or object", kr_event_name(ev->type));
	k = ns_find(f, ev->key);
	switch (ev->type) {
	case KR_EV_ADDED:
		if (k)
			NS_FAIL("ADDED %s, which was already added", ev->key);
		if (f->n == NS_MAX_KEYS)
			NS_FAIL("more than %d objects", NS_MAX_KEYS);
		k = &f->keys[f->n++];
		snprintf(k->key, sizeof(k->key), "%s", ev->key);
		/* fall through */
	case KR_EV_MODIFIED:
		if (!k)
			NS_FAIL("MODIFIED %s, which was never added", ev->key);
		snprintf(k->rv, sizeof(k->rv), "%s", ev->rv);
		k->len = ev->objlen;
		k->hash = ns_hash(ev->obj, ev->objlen);
		break;
	case KR_EV_DELETED:
		if (!k)
			NS_FAIL("DELETED %s, which was never added", ev->key);
		*k = f->keys[--f->n];
		break;
	case KR_EV_RESYNC:
		if (!k)
			NS_FAIL("RESYNC of %s, which was never added", ev->key);
		break;
	default:
		NS_FAIL("an event of unknown type %d", (int)ev->type);
	}
}

/* --- a run ------------------------------------------------------------------------------ */

struct ns_config {
	int watch_list;                /* KR_WL_... */
	int keep_managed_fields;
	int two_resources;             /* configmaps and deployments.apps */
	int page_size;                 /* 0: client-go's default */
	size_t arena;
	int quota;                     /* configmaps get half the arena */
	uint8_t seed;
};

static void ns_resource(const char *name, struct kr_resource *r)
{
	char err[128];

	if (kr_resource_lookup(name, r, err, sizeof(err)) != 0)
		NS_FAIL("%s", err);
	r->all_namespaces = 1;
}

/*
 * Runs the reflector(s) against the responses added so far until a request
 * finds none left, nothing more can happen, or NS_MAX_STEPS passes.
 */
static void ns_run(const struct ns_config *c)
{
	struct kr_conn_cfg cfg;
	struct kr_reflector_opts o;
	struct kr_resource res[2];
	struct kr_sink sink = { ns_event, NULL };
	int i, steps, nres = c->two_resources ? 2 : 1;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.host, sizeof(cfg.host), "127.0.0.1");
	cfg.port = 6443;
	kr_reflector_opts_default(&o);
	o.watch_list = c->watch_list;
	o.keep_managed_fields = c->keep_managed_fields;
	if (c->page_size) {
		o.page_size = c->page_size;
		o.page_size_forced = 1;
	}
	ns_resource("configmaps", &res[0]);
	ns_resource("deployments.apps", &res[1]);
	if (c->quota)
		res[0].arena_share = 50;

	kr_set_log_level(KR_LOG_TRACE);
	kr_store_init(&ns_store, ns_arena, c->arena, ns_entries, NS_ENTRIES, ns_buckets,
		      NS_BUCKETS, c->arena / 16);
	ns.store = &ns_store;
	kr_loop_init(&ns_loop);
	if (kr_reflect_init(&ns_top, &ns_loop, &ns_store, &cfg, &o, ns_refl, res, nres) != 0)
		NS_FAIL("kr_reflect_init failed");
	kr_rand_seed(&ns_top.rand, c->seed);
	if (kr_reflect_add_sink(&ns_top, &sink) != 0)
		NS_FAIL("kr_reflect_add_sink failed");
	kr_reflect_start(&ns_top);
	for (steps = 0; steps < NS_MAX_STEPS && !ns.exhausted && !ns.stuck; steps++)
		if (kr_loop_once(&ns_loop, -1) < 0)
			NS_FAIL("kr_loop_once failed");
	for (i = 0; i < nres; i++)
		ns_compare(i);
	kr_reflect_stop(&ns_top);
	for (i = 0; i < nres; i++)
		kr_conn_free(&ns_refl[i].conn);
	for (i = 0; i < ns.nsocks; i++)
		if (ns.socks[i].open)
			NS_FAIL("descriptor %d left open after stop", NS_FD_BASE + i);
}

/* Resets the network for a new input. */
static void ns_reset(void)
{
	memset(&ns, 0, offsetof(struct ns_state, fold));
	if (ns_trace < 0) {
		const char *t = getenv("NETSIM_TRACE");

		ns_trace = t && *t && *t != '0';
	}
	ns.fold[0].n = ns.fold[1].n = 0;
	ns.now = NS_START_MS;
}

#endif /* KR_FUZZ_NETSIM_H */
