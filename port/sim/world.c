/*
 * The simulated world's clock, PRNG and network, and kr_port_poll, which is
 * its scheduler: nothing ever sleeps. A poll that finds no descriptor ready
 * moves the virtual clock to the earlier of its timeout and the next world
 * event (a connect completing, bytes arriving, a server timer, a scheduled
 * write or weather change), runs everything due then, and looks again.
 *
 * A socket is two byte streams. Client to server: kr_port_send appends to
 * `in`, which the server sees one latency later. Server to client: the
 * server appends to a ring; each write is a mark that becomes visible one
 * latency later; kr_port_recv takes what is visible, in pieces of a size
 * the connection's read mode chooses. The server ends its side with a FIN or
 * a reset after the bytes written so far (the client reads those first), and
 * a link can be frozen (nothing delivered) until some time.
 */
#include "sim.h"
#include "kreflect.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FD_WAKE 98
#define FD_SIGNALS 99
#define FD_SOCKET0 100
#define FD_RESOLVER0 150
#define RESOLVERS 8
#define OUT_MAX (256u * 1024u)         /* server -> client bytes in flight per socket */
#define IN_MAX 16384u                  /* client -> server bytes not yet read by the server */
#define MARKS 64
#define VERDICTS 4
#define OBS_MAX 2048
#define SERVER_IP "10.96.0.1"
#define SERVER_NAME "kube.sim"
#define NO_OFFSET UINT64_MAX

enum { SK_FREE, SK_CONNECTING, SK_OPEN, SK_REFUSED };
enum { RECV_WHOLE, RECV_RANDOM, RECV_TINY };

struct mark {
	uint64_t end;                  /* stream offset the write reached */
	kr_ms_t at;                    /* when it is visible to the client */
};

struct verdict {
	uint64_t start;                /* the failing piece's first byte */
	uint64_t at;                   /* the client has failed once it read this many bytes */
	int req_kind;
	int asked;                     /* the answer carried Retry-After */
	char what[64];
	char token[64];                /* "": unconditional; else only if the file still holds it */
	int64_t date;                  /* a Retry-After date: no wait owed once it has passed */
};

struct sock {
	int state;
	int owner;
	kr_ms_t connect_at;            /* CONNECTING/REFUSED: when the outcome is known; NEVER: hangs */
	int latency;
	int recv_mode;
	unsigned recv_max;
	int partial_sends;
	/* client -> server */
	char in[IN_MAX];
	size_t inlen;
	kr_ms_t in_at;                 /* when the bytes in `in` have arrived */
	kr_ms_t req_sent;              /* when the first byte of the pending request was sent */
	/* server -> client */
	uint64_t wtotal, rtotal;
	struct mark marks[MARKS];
	int nmarks;
	uint64_t fin_at, rst_at;       /* offsets after which the client sees EOF / a reset */
	kr_ms_t fin_time, rst_time;
	kr_ms_t frozen_until;
	uint64_t freeze_at;            /* the client reads up to here, then the link freezes */
	int freeze_ms;
	int freeze_step, freeze_left;  /* a trickle: step bytes, then freeze again, left times */
	int server_closed;
	struct verdict verdicts[VERDICTS];
	int nverdicts;
};

struct resolver {
	int used;
	int owner;
	kr_ms_t ready_at;              /* NEVER: the lookup hangs */
	int answer;                    /* addresses found */
};

static struct {
	uint64_t rng;
	kr_ms_t now;
	int trace;
	unsigned long polls, deadlocks, unsettled;
	void (*hook)(void *);
	void *hook_arg;
	const char *error;
	struct resolver resolvers[RESOLVERS];
	struct kr_sim_obs obs[OBS_MAX];
	unsigned obs_head, obs_count;
	unsigned long obs_lost;
} w;

static struct sock socks[KR_SIM_SOCKETS];
static char outbuf[KR_SIM_SOCKETS][OUT_MAX];

void kr_sim_model_reset(uint64_t start_rv);

/* --- PRNG, clock, trace ------------------------------------------------------------------ */

uint64_t kr_sim_rand(void)
{
	/* splitmix64: one 64-bit state, every bit of the seed matters. */
	uint64_t z = (w.rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t kr_sim_below(uint64_t n)
{
	return n ? kr_sim_rand() % n : 0;
}

int64_t kr_sim_range(int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)kr_sim_below((uint64_t)(hi - lo) + 1);
}

int kr_sim_chance(unsigned permille)
{
	return kr_sim_below(1000) < permille;
}

kr_ms_t kr_port_now_ms(void)
{
	return w.now;
}

int64_t kr_port_wall_seconds(void)
{
	/* 2026-01-01T00:00:00Z plus virtual time: Retry-After dates are read against it. */
	return 1767225600 + w.now / 1000;
}

void kr_sim_set_trace(int on)
{
	w.trace = on;
}

int kr_sim_tracing(void)
{
	return w.trace;
}

void kr_sim_trace(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!w.trace)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "[%10.3f] sim: %s\n", (double)w.now / 1000.0, line);
}

void kr_port_log_write(const char *line, size_t len)
{
	if (w.trace)
		fprintf(stderr, "[%10.3f] %.*s", (double)w.now / 1000.0, (int)len, line);
}

void kr_sim_set_poll_hook(void (*fn)(void *arg), void *arg)
{
	w.hook = fn;
	w.hook_arg = arg;
}

unsigned long kr_sim_polls(void)
{
	return w.polls;
}

const char *kr_port_last_error(void)
{
	return w.error ? w.error : "no error";
}

void kr_sim_reset(uint64_t seed)
{
	int trace = w.trace;

	memset(&w, 0, sizeof(w));
	memset(socks, 0, sizeof(socks));
	w.trace = trace;
	w.rng = seed;
	/* A resourceVersion of any length: from 3 to 13 digits. */
	kr_sim_model_reset(100 + kr_sim_below(4) * kr_sim_below(1000000000000ull));
	kr_sim_server_reset();
	kr_sim_chaos_reset();
	kr_sim_files_clear();
	kr_sim_fs_reset(seed);
}

void kr_sim_block(kr_ms_t ms)
{
	if (ms > 0)
		w.now += ms;
}

void kr_sim_process_exit(void)
{
	int s, i;

	for (s = 0; s < KR_SIM_SOCKETS; s++) {
		if (socks[s].state == SK_FREE)
			continue;
		kr_sim_trace("fd %d closed: the process is gone", FD_SOCKET0 + s);
		if (socks[s].state == SK_OPEN)
			kr_sim_server_gone(s);
		socks[s].state = SK_FREE;
	}
	for (i = 0; i < RESOLVERS; i++)
		w.resolvers[i].used = 0;
	w.obs_head = w.obs_count = 0;
	kr_sim_fs_exit();
}

/* --- observations ------------------------------------------------------------------------ */

static void observe(int kind, int fd, int owner, int req_kind, int asked, kr_ms_t t, const char *what)
{
	struct kr_sim_obs *o;

	if (w.obs_count == OBS_MAX) {
		w.obs_lost++;
		return;
	}
	o = &w.obs[(w.obs_head + w.obs_count) % OBS_MAX];
	w.obs_count++;
	o->t = t;
	o->kind = kind;
	o->fd = fd;
	o->owner = owner;
	o->req_kind = req_kind;
	o->asked = asked;
	o->outage = kr_sim_outage();
	snprintf(o->what, sizeof(o->what), "%s", what);
}

int kr_sim_obs_take(struct kr_sim_obs *o)
{
	if (!w.obs_count)
		return 0;
	*o = w.obs[w.obs_head];
	w.obs_head = (w.obs_head + 1) % OBS_MAX;
	w.obs_count--;
	return 1;
}

unsigned long kr_sim_obs_lost(void)
{
	return w.obs_lost;
}

/* --- descriptors ------------------------------------------------------------------------ */

static struct sock *sock_of(int fd)
{
	int s = fd - FD_SOCKET0;

	if (s < 0 || s >= KR_SIM_SOCKETS || socks[s].state == SK_FREE)
		return NULL;
	return &socks[s];
}

static struct resolver *resolver_of(int fd)
{
	int i = fd - FD_RESOLVER0;

	if (i < 0 || i >= RESOLVERS || !w.resolvers[i].used)
		return NULL;
	return &w.resolvers[i];
}

void kr_sim_tag(int fd, int owner)
{
	struct sock *k = sock_of(fd);
	struct resolver *r = resolver_of(fd);

	if (k)
		k->owner = owner;
	if (r)
		r->owner = owner;
}

int kr_sim_owner(int fd)
{
	struct sock *k = sock_of(fd);
	struct resolver *r = resolver_of(fd);

	return k ? k->owner : r ? r->owner : -1;
}

int kr_sim_open_descriptors(void)
{
	int i, n = 0;

	for (i = 0; i < KR_SIM_SOCKETS; i++)
		n += socks[i].state != SK_FREE;
	for (i = 0; i < RESOLVERS; i++)
		n += w.resolvers[i].used;
	return n;
}

/* --- name lookups ------------------------------------------------------------------------- */

int kr_port_resolve_start(const char *host)
{
	struct resolver *r = NULL;
	kr_ms_t delay = 0;
	int i, outcome;

	for (i = 0; i < RESOLVERS; i++)
		if (!w.resolvers[i].used) {
			r = &w.resolvers[i];
			break;
		}
	if (!r) {
		w.error = "too many name lookups at once";
		return -1;
	}
	outcome = kr_sim_chaos_resolve(&delay);
	r->used = 1;
	r->owner = -1;
	r->ready_at = outcome == 2 ? KR_SIM_NEVER : w.now + delay;
	r->answer = outcome == 0 && strcmp(host, SERVER_NAME) == 0;
	kr_sim_trace("resolve %s: %s", host, outcome == 2 ? "will hang" : r->answer ? "ok" : "no such name");
	observe(KR_SIM_OBS_RESOLVE, FD_RESOLVER0 + i, -1, 0, 0, w.now, host);
	return FD_RESOLVER0 + i;
}

int kr_port_resolve_finish(int fd, uint16_t port, struct kr_addr *out, int max, int abandon)
{
	struct resolver *r = resolver_of(fd);
	int n;

	if (!r)
		return 0;
	if (!abandon && w.now < r->ready_at)
		return KR_IO_WAIT;
	n = abandon ? 0 : r->answer;
	if (n > max)
		n = max;
	if (n > 0 && out)
		kr_port_parse_ip(SERVER_IP, port, &out[0]);
	if ((abandon && r->ready_at == KR_SIM_NEVER) || (!abandon && n == 0))
		observe(KR_SIM_OBS_FAILURE, fd, r->owner, -1, 0,
			w.now, abandon ? "name lookup hung" : "name lookup failed");
	r->used = 0;
	return n;
}

/* --- sockets -------------------------------------------------------------------------------- */

int kr_port_tcp_connect(const struct kr_addr *addr)
{
	const struct kr_sim_server_settings *st = kr_sim_server();
	struct kr_addr server;
	struct sock *k = NULL;
	kr_ms_t delay = 0;
	int s, outcome;

	for (s = 0; s < KR_SIM_SOCKETS; s++)
		if (socks[s].state == SK_FREE) {
			k = &socks[s];
			break;
		}
	if (!k) {
		w.error = "Too many open files";
		return KR_IO_ERR;
	}
	memset(k, 0, sizeof(*k));
	k->owner = -1;
	k->latency = (int)kr_sim_range(st->latency_min_ms, st->latency_max_ms);
	k->fin_at = k->rst_at = k->freeze_at = NO_OFFSET;
	/* How this connection's bytes are cut on the way: mostly as written, some in random
	 * pieces, a few a handful of bytes at a time. */
	k->recv_mode = kr_sim_chance(850) ? RECV_WHOLE : kr_sim_chance(900) ? RECV_RANDOM : RECV_TINY;
	k->recv_max = k->recv_mode == RECV_TINY ? (unsigned)kr_sim_range(1, 16)
						: (unsigned)kr_sim_range(1, 4096);
	k->partial_sends = kr_sim_chance(100);
	kr_port_parse_ip(SERVER_IP, 6443, &server);
	if (addr->family != server.family || memcmp(addr->ip, server.ip, 4) != 0 || addr->port != server.port) {
		char a[64];

		/* Nothing listens there; and kreflect had no reason to go there. */
		kr_port_addr_format(addr, a, sizeof(a));
		observe(KR_SIM_OBS_BAD_ADDRESS, FD_SOCKET0 + s, -1, 0, 0, w.now, a);
		outcome = 1;
	} else {
		outcome = kr_sim_chaos_connect(&delay);
	}
	if (outcome == 2) {
		k->state = SK_CONNECTING;
		k->connect_at = KR_SIM_NEVER;
	} else if (outcome == 1) {
		k->state = SK_REFUSED;
		k->connect_at = w.now + k->latency;
	} else {
		k->state = SK_CONNECTING;
		k->connect_at = w.now + 2 * k->latency + delay;
	}
	kr_sim_trace("connect fd %d: %s (latency %d ms)", FD_SOCKET0 + s,
		     outcome == 2 ? "will hang" : outcome == 1 ? "will be refused" : "accepted", k->latency);
	observe(KR_SIM_OBS_CONNECT, FD_SOCKET0 + s, -1, 0, 0, w.now, "connect");
	return FD_SOCKET0 + s;
}

int kr_port_connect_result(int fd)
{
	struct sock *k = sock_of(fd);

	if (!k) {
		w.error = "Bad file descriptor";
		return -9;
	}
	if (k->state == SK_REFUSED && w.now >= k->connect_at) {
		w.error = "Connection refused";
		if (k->connect_at != 0) {
			observe(KR_SIM_OBS_FAILURE, fd, k->owner, -1, 0, w.now, "connection refused");
			k->connect_at = 0;     /* observed once */
		}
		return -111;
	}
	if (k->state != SK_OPEN) {
		w.error = "Operation now in progress";
		return -115;
	}
	return 0;
}

/* The stream offset the client can read up to now. */
static uint64_t visible_end(const struct sock *k)
{
	uint64_t end = k->rtotal;
	int i;

	if (k->frozen_until > w.now)
		return k->rtotal;
	for (i = 0; i < k->nmarks && k->marks[i].at <= w.now; i++)
		end = k->marks[i].end;
	if (k->rst_at != NO_OFFSET && end > k->rst_at)
		end = k->rst_at;
	if (k->freeze_at != NO_OFFSET && end > k->freeze_at)
		end = k->freeze_at > k->rtotal ? k->freeze_at : k->rtotal;
	return end;
}

static int reset_seen(const struct sock *k)
{
	return k->rst_at != NO_OFFSET && w.now >= k->rst_time && k->rtotal >= k->rst_at;
}

static int eof_seen(const struct sock *k)
{
	return k->fin_at != NO_OFFSET && w.now >= k->fin_time && k->rtotal >= k->fin_at &&
	       k->frozen_until <= w.now;
}

long kr_port_recv(int fd, void *buf, size_t len)
{
	struct sock *k = sock_of(fd);
	uint64_t avail;
	size_t n, pos, first;

	if (!k || k->state != SK_OPEN) {
		w.error = k && k->state == SK_REFUSED ? "Connection refused" : "Transport endpoint is not connected";
		return KR_IO_ERR;
	}
	if (reset_seen(k)) {
		w.error = "Connection reset by peer";
		return KR_IO_ERR;
	}
	avail = visible_end(k) - k->rtotal;
	if (avail == 0)
		return eof_seen(k) ? 0 : KR_IO_WAIT;
	n = len < avail ? len : (size_t)avail;
	if (k->recv_mode != RECV_WHOLE) {
		size_t cut = (size_t)kr_sim_range(1, k->recv_max);

		if (n > cut)
			n = cut;
	}
	if (k->nverdicts > 0) {
		const struct verdict *v = &k->verdicts[0];

		if (k->rtotal < v->start) {
			/* Up to the failing piece, not into it (see kr_sim_sock_verdict). */
			if (k->rtotal + n > v->start)
				n = (size_t)(v->start - k->rtotal);
		} else if (k->rtotal < v->at) {
			/* The failing piece alone, and whole when it has all arrived and fits. */
			size_t piece = (size_t)(v->at - k->rtotal);

			n = piece <= len && piece <= avail ? piece : n < piece ? n : piece;
		}
	}
	pos = (size_t)(k->rtotal % OUT_MAX);
	first = OUT_MAX - pos < n ? OUT_MAX - pos : n;
	memcpy(buf, outbuf[k - socks] + pos, first);
	memcpy((char *)buf + first, outbuf[k - socks], n - first);
	k->rtotal += n;
	if (k->freeze_at != NO_OFFSET && k->rtotal >= k->freeze_at) {
		k->frozen_until = w.now + k->freeze_ms;
		k->freeze_at = NO_OFFSET;
		if (k->freeze_left > 0 && k->freeze_step > 0) {
			k->freeze_left--;
			k->freeze_at = k->rtotal + (uint64_t)k->freeze_step;
		}
		kr_sim_trace("fd %d: fault: link freezes %d ms after %llu bytes read", fd, k->freeze_ms,
			     (unsigned long long)k->rtotal);
	}
	while (k->nmarks > 0 && k->marks[0].end <= k->rtotal) {
		memmove(k->marks, k->marks + 1, (size_t)(k->nmarks - 1) * sizeof(k->marks[0]));
		k->nmarks--;
	}
	while (k->nverdicts > 0 && k->verdicts[0].at <= k->rtotal) {
		struct verdict *v = &k->verdicts[0];

		if ((!v->token[0] || kr_sim_auth_file_is(v->token)) &&
		    (!v->date || v->date - kr_port_wall_seconds() >= 1))
			observe(KR_SIM_OBS_FAILURE, fd, k->owner, v->req_kind, v->asked, w.now, v->what);
		memmove(k->verdicts, k->verdicts + 1, (size_t)(k->nverdicts - 1) * sizeof(k->verdicts[0]));
		k->nverdicts--;
	}
	return (long)n;
}

long kr_port_send(int fd, const void *buf, size_t len)
{
	struct sock *k = sock_of(fd);
	size_t n;

	if (!k || k->state != SK_OPEN) {
		w.error = "Transport endpoint is not connected";
		return KR_IO_ERR;
	}
	if (reset_seen(k) || (k->rst_at != NO_OFFSET && w.now >= k->rst_time)) {
		w.error = "Connection reset by peer";
		return KR_IO_ERR;
	}
	if (k->server_closed)
		return (long)len;      /* goes nowhere: the peer has closed */
	n = IN_MAX - k->inlen;
	if (n == 0)
		return KR_IO_WAIT;
	if (n > len)
		n = len;
	if (k->partial_sends && n > 1)
		n = (size_t)kr_sim_range(1, (int64_t)n);
	if (k->inlen == 0)
		k->req_sent = w.now;
	memcpy(k->in + k->inlen, buf, n);
	k->inlen += n;
	k->in_at = w.now + k->latency;
	return (long)n;
}

void kr_port_close(int fd)
{
	struct sock *k = sock_of(fd);
	struct resolver *r = resolver_of(fd);

	if (k) {
		if (k->state == SK_CONNECTING && k->connect_at == KR_SIM_NEVER)
			observe(KR_SIM_OBS_FAILURE, fd, k->owner, -1, 0, w.now,
				"connect hung");
		kr_sim_trace("fd %d closed by kreflect (%llu of %llu bytes read)", fd,
			     (unsigned long long)k->rtotal, (unsigned long long)k->wtotal);
		if (k->state == SK_OPEN)
			kr_sim_server_gone((int)(k - socks));
		k->state = SK_FREE;
	}
	if (r)
		r->used = 0;
}

/* --- the network as the server and the weather see it --------------------------------------- */

size_t kr_sim_sock_space(int s)
{
	return OUT_MAX - (size_t)(socks[s].wtotal - socks[s].rtotal);
}

void kr_sim_sock_write(int s, const void *data, size_t len)
{
	struct sock *k = &socks[s];
	size_t pos = (size_t)(k->wtotal % OUT_MAX), first;
	kr_ms_t at = w.now + k->latency;

	if (k->server_closed || len == 0 || len > kr_sim_sock_space(s))
		return;
	first = OUT_MAX - pos < len ? OUT_MAX - pos : len;
	memcpy(outbuf[s] + pos, data, first);
	memcpy(outbuf[s], (const char *)data + first, len - first);
	k->wtotal += len;
	if (k->nmarks > 0 && k->marks[k->nmarks - 1].at == at) {
		k->marks[k->nmarks - 1].end = k->wtotal;
	} else if (k->nmarks == MARKS) {
		/* Out of marks: the last one takes this write too, a little later. */
		k->marks[MARKS - 1].end = k->wtotal;
		k->marks[MARKS - 1].at = at;
	} else {
		k->marks[k->nmarks].end = k->wtotal;
		k->marks[k->nmarks].at = at;
		k->nmarks++;
	}
}

void kr_sim_sock_close(int s, int reset)
{
	struct sock *k = &socks[s];

	if (k->server_closed)
		return;
	k->server_closed = 1;
	if (reset) {
		k->rst_at = k->wtotal;
		k->rst_time = w.now + k->latency;
	} else {
		k->fin_at = k->wtotal;
		k->fin_time = w.now + k->latency;
	}
	kr_sim_trace("fd %d: server %s after %llu bytes", FD_SOCKET0 + s, reset ? "resets" : "closes",
		     (unsigned long long)k->wtotal);
}

size_t kr_sim_sock_input(int s, const char **data)
{
	struct sock *k = &socks[s];

	*data = k->in;
	if (k->server_closed || w.now < k->in_at || k->frozen_until > w.now)
		return 0;
	return k->inlen;
}

void kr_sim_sock_consume(int s, size_t n)
{
	struct sock *k = &socks[s];

	if (n > k->inlen)
		n = k->inlen;
	memmove(k->in, k->in + n, k->inlen - n);
	k->inlen -= n;
	if (k->inlen)
		k->req_sent = w.now;
}

uint64_t kr_sim_sock_written(int s)
{
	return socks[s].wtotal;
}

void kr_sim_sock_freeze(int s, kr_ms_t until)
{
	if (socks[s].frozen_until < until)
		socks[s].frozen_until = until;
}

void kr_sim_sock_freeze_at(int s, uint64_t offset, int ms, int step, int times)
{
	socks[s].freeze_at = offset;
	socks[s].freeze_ms = ms;
	socks[s].freeze_step = step;
	socks[s].freeze_left = times;
}

void kr_sim_sock_verdict(int s, uint64_t start, uint64_t at, int req_kind, int asked, const char *what)
{
	struct sock *k = &socks[s];
	struct verdict *v;

	if (k->nverdicts == VERDICTS)
		return;
	v = &k->verdicts[k->nverdicts++];
	v->start = start;
	v->at = at;
	v->req_kind = req_kind;
	v->asked = asked;
	snprintf(v->what, sizeof(v->what), "%s", what);
	v->token[0] = '\0';
	v->date = 0;
}

void kr_sim_sock_verdict_date(int s, int64_t epoch)
{
	struct sock *k = &socks[s];

	if (k->nverdicts > 0)
		k->verdicts[k->nverdicts - 1].date = epoch;
}

void kr_sim_sock_verdict_token(int s, const char *token)
{
	struct sock *k = &socks[s];

	if (k->nverdicts > 0)
		snprintf(k->verdicts[k->nverdicts - 1].token, sizeof(k->verdicts[0].token), "%s", token);
}

void kr_sim_sock_protocol_error(int s, const char *what)
{
	observe(KR_SIM_OBS_PROTOCOL, FD_SOCKET0 + s, socks[s].owner, 0, 0, w.now, what);
}

void kr_sim_sock_request_seen(int s, int req_kind, const char *what)
{
	observe(KR_SIM_OBS_REQUEST, FD_SOCKET0 + s, socks[s].owner, req_kind, 0, socks[s].req_sent, what);
}

int kr_sim_sock_is_open(int s)
{
	return socks[s].state == SK_OPEN && !socks[s].server_closed;
}

void kr_sim_net_reset_all(void)
{
	int s;

	for (s = 0; s < KR_SIM_SOCKETS; s++) {
		struct sock *k = &socks[s];

		if (k->state == SK_OPEN && !k->server_closed) {
			kr_sim_server_gone(s);
			kr_sim_sock_close(s, 1);
		} else if (k->state == SK_CONNECTING) {
			k->state = SK_REFUSED;
			k->connect_at = w.now + k->latency;
		}
	}
}

void kr_sim_net_freeze_all(kr_ms_t until)
{
	int s;

	for (s = 0; s < KR_SIM_SOCKETS; s++) {
		if (socks[s].state == SK_OPEN)
			kr_sim_sock_freeze(s, until);
		else if (socks[s].state == SK_CONNECTING)
			socks[s].connect_at = KR_SIM_NEVER;
	}
}

void kr_sim_net_thaw_all(void)
{
	int s;

	for (s = 0; s < KR_SIM_SOCKETS; s++) {
		if (socks[s].frozen_until > w.now)
			socks[s].frozen_until = w.now;
		socks[s].freeze_at = NO_OFFSET;
		socks[s].freeze_left = 0;
	}
}

/* --- the scheduler ---------------------------------------------------------------------------- */

/* Runs everything due at time now until nothing more happens. */
static void step(void)
{
	int progress, s, rounds = 0;

	do {
		progress = kr_sim_chaos_due(w.now);
		for (s = 0; s < KR_SIM_SOCKETS; s++) {
			struct sock *k = &socks[s];

			if (k->state == SK_CONNECTING && k->connect_at <= w.now) {
				k->state = SK_OPEN;
				kr_sim_server_accept(s);
				progress = 1;
			}
			if (k->state == SK_OPEN && !k->server_closed)
				progress |= kr_sim_server_pump(s, w.now);
		}
	} while (progress && ++rounds < 1000);
	if (progress)
		w.unsettled++;
}

unsigned long kr_sim_unsettled(void)
{
	return w.unsettled;
}

static void earliest(kr_ms_t *best, kr_ms_t t)
{
	if (t > w.now && t < *best)
		*best = t;
}

/* The next time something happens in the world (after now), or NEVER. */
static kr_ms_t next_event(void)
{
	kr_ms_t best = KR_SIM_NEVER;
	int s, i;

	earliest(&best, kr_sim_chaos_next());
	for (s = 0; s < KR_SIM_SOCKETS; s++) {
		struct sock *k = &socks[s];

		if (k->state == SK_CONNECTING || k->state == SK_REFUSED) {
			earliest(&best, k->connect_at);
			continue;
		}
		if (k->state != SK_OPEN)
			continue;
		for (i = 0; i < k->nmarks; i++)
			if (k->marks[i].at > w.now) {
				earliest(&best, k->marks[i].at);
				break;
			}
		if (k->wtotal > k->rtotal || k->fin_at != NO_OFFSET || k->inlen)
			earliest(&best, k->frozen_until);
		if (k->fin_at != NO_OFFSET)
			earliest(&best, k->fin_time);
		if (k->rst_at != NO_OFFSET)
			earliest(&best, k->rst_time);
		if (k->inlen)
			earliest(&best, k->in_at);
		if (!k->server_closed)
			earliest(&best, kr_sim_server_next(s));
	}
	for (i = 0; i < RESOLVERS; i++)
		if (w.resolvers[i].used)
			earliest(&best, w.resolvers[i].ready_at);
	return best;
}

static int wake_pending;               /* kr_port_wakeup_signal, until drained */

static int ready_of(int fd, int want)
{
	struct sock *k = sock_of(fd);
	struct resolver *r = resolver_of(fd);
	int got = 0;

	if (r)
		return (want & KR_POLL_IN) && w.now >= r->ready_at ? KR_POLL_IN : 0;
	if (!k)
		return fd == FD_SIGNALS ? 0 : fd == FD_WAKE ? (wake_pending ? want & KR_POLL_IN : 0)
			: KR_POLL_ERR;
	switch (k->state) {
	case SK_REFUSED:
		return w.now >= k->connect_at ? KR_POLL_OUT | KR_POLL_ERR : 0;
	case SK_OPEN:
		if (reset_seen(k))
			return KR_POLL_IN | KR_POLL_ERR | ((want & KR_POLL_OUT) ? KR_POLL_OUT : 0);
		if ((want & KR_POLL_IN) && (visible_end(k) > k->rtotal || eof_seen(k)))
			got |= KR_POLL_IN;
		if ((want & KR_POLL_OUT) && k->inlen < IN_MAX)
			got |= KR_POLL_OUT;
		return got;
	default:
		return 0;
	}
}

static int scan(struct kr_pollfd *fds, int n)
{
	int i, ready = 0;

	for (i = 0; i < n; i++) {
		fds[i].got = (short)ready_of(fds[i].fd, fds[i].want);
		ready += fds[i].got != 0;
	}
	return ready;
}

int kr_port_poll(struct kr_pollfd *fds, int n, int timeout_ms)
{
	kr_ms_t deadline = timeout_ms < 0 ? KR_SIM_NEVER : w.now + timeout_ms;

	w.polls++;
	if (w.hook)
		w.hook(w.hook_arg);
	for (;;) {
		kr_ms_t next;
		int ready;

		step();
		ready = scan(fds, n);
		if (ready)
			return ready;
		next = next_event();
		if (next >= deadline) {
			if (deadline == KR_SIM_NEVER) {
				/* Nothing armed and nothing will ever happen: a real loop would hang here. */
				w.deadlocks++;
				w.error = "the loop would wait forever: no deadline armed and nothing in flight";
				return KR_IO_ERR;
			}
			w.now = deadline;
			step();
			return scan(fds, n);
		}
		w.now = next;
	}
}

int kr_port_signals_open(void)
{
	/* A descriptor that never becomes readable: no signal ever arrives in the simulation. */
	return FD_SIGNALS;
}

int kr_port_signal_read(int fd)
{
	(void)fd;
	return 0;
}

int kr_port_wakeup_open(void)
{
	wake_pending = 0;
	return FD_WAKE;
}

void kr_port_wakeup_signal(int fd)
{
	(void)fd;
	wake_pending = 1;
}

void kr_port_wakeup_drain(int fd)
{
	(void)fd;
	wake_pending = 0;
}
