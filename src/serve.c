#include "serve.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "http_post.h"
#include "json.h"
#include "kreflect.h"
#include "log.h"
#include "notify.h"
#include "access.h"
#include "port.h"
#include "state.h"


#define STATUS_MAX 1024                /* a Status or small JSON document */
/* Room kept free in a watcher's buffer for the Status that drops it. */
#define DROP_ROOM 512
/* How often the TLS, token and access files are looked at for a change. */
#define FILES_RECHECK_MS 10000

/* --- the history ring ------------------------------------------------------------- */

/*
 * Records are [hdr][key][rv], 4-byte aligned, appended at ring_head. One that
 * does not fit before the end wraps to 0, leaving a pad (a WRAP record, or
 * fewer than HDR bytes that readers skip). The oldest go when room is needed.
 */
#define REC_ADDED 0
#define REC_MODIFIED 1
#define REC_DELETED 2
#define REC_MARK 3                     /* a resourceVersion handed out (a list's) */
#define REC_WRAP 0xff

struct rec {
	uint32_t size;
	uint16_t res;
	uint8_t type;
	uint8_t rvlen;
	uint16_t keylen;
	uint16_t pad;
};

#define HDR sizeof(struct rec)

static struct rec rec_at(const struct kr_serve *s, size_t pos)
{
	struct rec r;

	memcpy(&r, s->ring + pos, HDR);
	return r;
}

/* Where the record at pos really starts (pads skipped); pos must not be ring_head. */
static size_t rec_pos(const struct kr_serve *s, size_t pos)
{
	if (sizeof(s->ring) - pos < HDR || rec_at(s, pos).type == REC_WRAP)
		return 0;
	return pos;
}

static size_t ring_used(const struct kr_serve *s)
{
	if (s->seq_head == s->seq_tail)
		return 0;
	return s->ring_head > s->ring_tail ? s->ring_head - s->ring_tail
					   : sizeof(s->ring) - s->ring_tail + s->ring_head;
}

static void ring_drop_oldest(struct kr_serve *s)
{
	size_t pos = rec_pos(s, s->ring_tail);

	s->ring_tail = pos + rec_at(s, pos).size;
	if (s->ring_tail >= sizeof(s->ring))
		s->ring_tail = 0;
	s->seq_tail++;
	if (s->seq_tail == s->seq_head)
		s->ring_tail = s->ring_head;
}

static void ring_add(struct kr_serve *s, int res, int type, const char *key, const char *rv)
{
	size_t kl = key ? strlen(key) : 0, rl = strlen(rv);
	size_t size = (HDR + kl + rl + 3u) & ~(size_t)3u;
	size_t at = s->ring_head;
	struct rec r;

	if (rl > 255 || kl > 65535 || size > sizeof(s->ring) / 4)
		return;
	if (sizeof(s->ring) - at < size)
		at = 0;
	/* Drop the oldest until [at, at + size) holds no live record. */
	while (s->seq_tail != s->seq_head) {
		size_t used = ring_used(s), tail = s->ring_tail;
		int overlap;

		if (at == 0 && s->ring_head != 0) {
			/* Wrapping: the pad from head to the end and [0, size) must be free. */
			overlap = tail < size || tail >= s->ring_head;
		} else {
			overlap = used + size > sizeof(s->ring) ||
				  (tail >= at && tail < at + size && used > 0);
		}
		if (!overlap)
			break;
		ring_drop_oldest(s);
	}
	if (at == 0 && s->ring_head != 0 && sizeof(s->ring) - s->ring_head >= HDR) {
		memset(&r, 0, sizeof(r));
		r.type = REC_WRAP;
		r.size = (uint32_t)(sizeof(s->ring) - s->ring_head);
		memcpy(s->ring + s->ring_head, &r, HDR);
	}
	if (s->seq_tail == s->seq_head)
		s->ring_tail = at;
	memset(&r, 0, sizeof(r));
	r.size = (uint32_t)size;
	r.res = (uint16_t)res;
	r.type = (uint8_t)type;
	r.rvlen = (uint8_t)rl;
	r.keylen = (uint16_t)kl;
	memcpy(s->ring + at, &r, HDR);
	if (kl)
		memcpy(s->ring + at + HDR, key, kl);
	memcpy(s->ring + at + HDR + kl, rv, rl);
	s->ring_head = at + size;
	if (s->ring_head >= sizeof(s->ring))
		s->ring_head = 0;
	s->seq_head++;
}

/* The record after the one at p (pads skipped): its start in *at; returns where the next starts. */
static size_t rec_step(const struct kr_serve *s, size_t p, size_t *at)
{
	*at = rec_pos(s, p);
	p = *at + rec_at(s, *at).size;
	return p >= sizeof(s->ring) ? 0 : p;
}

int kr_serve_history_find(const struct kr_serve *s, int res, const char *rv, uint64_t *seq,
			  size_t *pos)
{
	size_t p = s->ring_tail, rl = strlen(rv);
	uint64_t q;
	int found = 0;

	for (q = s->seq_tail; q < s->seq_head; q++) {
		size_t at;
		struct rec r;

		p = rec_step(s, p, &at);
		r = rec_at(s, at);
		if (r.res == res && r.type != REC_WRAP && r.rvlen == rl &&
		    memcmp(s->ring + at + HDR + r.keylen, rv, rl) == 0) {
			*seq = q + 1;
			*pos = p;
			found = 1;
		}
	}
	return found;
}

uint64_t kr_serve_history_walk(void *arg, uint64_t from,
			       void (*fn)(void *ctx, uint64_t seq, int res, int type, const char *key,
					  size_t keylen, const char *rv, size_t rvlen),
			       void *ctx)
{
	const struct kr_serve *s = arg;
	size_t p = s->ring_tail;
	uint64_t q;

	for (q = s->seq_tail; q < s->seq_head; q++) {
		size_t at;
		struct rec r;

		p = rec_step(s, p, &at);
		r = rec_at(s, at);
		if (q >= from)
			fn(ctx, q, r.res, r.type, (const char *)s->ring + at + HDR, r.keylen,
			   (const char *)s->ring + at + HDR + r.keylen, r.rvlen);
	}
	return s->seq_head;
}

void kr_serve_history_add(void *arg, uint64_t seq, int res, int type, const char *key, const char *rv)
{
	struct kr_serve *s = arg;

	if (type < REC_ADDED || type > REC_MARK || (seq < s->seq_head && s->seq_head != s->seq_tail))
		return;                /* not a record, or one the ring has (written twice) */
	if (seq != s->seq_head) {
		/* Not the next one: records between were lost, so what came before is no
		 * history to resume from. Start afresh, numbered as written. */
		s->ring_head = s->ring_tail = 0;
		s->seq_head = s->seq_tail = seq;
	}
	ring_add(s, res, type, type == REC_MARK ? NULL : key, rv);
}

/* --- the sink ---------------------------------------------------------------------------- */

static void wake_watchers(struct kr_serve *s);
static void rearm_conn(struct kr_serve_conn *c);
static void rv_waited(struct kr_serve_conn *c);

void kr_serve_event(void *arg, const struct kr_event *ev)
{
	struct kr_serve *s = arg;
	struct kr_serve_res *sr;

	if (ev->res < 0 || ev->res >= KR_MAX_RESOURCES)
		return;
	sr = &s->res[ev->res];
	switch (ev->type) {
	case KR_EV_ADDED:
	case KR_EV_MODIFIED:
	case KR_EV_DELETED:
		sr->events[ev->type]++;
		ring_add(s, ev->res, ev->type == KR_EV_ADDED ? REC_ADDED
				     : ev->type == KR_EV_MODIFIED ? REC_MODIFIED : REC_DELETED,
			 ev->key, ev->rv ? ev->rv : "");
		kr_snprintf(sr->rv, sizeof(sr->rv), "%s", ev->rv ? ev->rv : "");
		if (ev->type == KR_EV_DELETED) {
			s->gone_obj = ev->obj;
			s->gone_len = ev->objlen;
			s->gone_seq = s->seq_head - 1;
		}
		wake_watchers(s);
		s->gone_obj = NULL;
		break;
	case KR_EV_RESYNC:
		sr->events[3]++;
		break;
	case KR_EV_SYNCED:
		sr->syncs++;
		sr->last_sync_wall = kr_port_wall_seconds();
		kr_snprintf(sr->rv, sizeof(sr->rv), "%s", ev->rv ? ev->rv : "");
		ring_add(s, ev->res, REC_MARK, NULL, sr->rv);
		wake_watchers(s);
		break;
	}
}

/* --- output -------------------------------------------------------------------------------- */

static size_t room(const struct kr_serve_conn *c)
{
	return sizeof(c->out) - c->out_len;
}

static int put(struct kr_serve_conn *c, const char *p, size_t n)
{
	if (n > room(c))
		return KR_ENOSPC;
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
	return 0;
}

/* One chunk (or the plain bytes of an HTTP/1.0 or HEAD response) of parts. */
static int put_chunk(struct kr_serve_conn *c, const char *const *parts, const size_t *lens, int n)
{
	size_t total = 0, need;
	char hex[20];
	int i, hl = 0;

	for (i = 0; i < n; i++)
		total += lens[i];
	if (total == 0 || c->head_only)
		return 0;
	if (c->chunked)
		hl = kr_snprintf(hex, sizeof(hex), "%zx\r\n", total);
	need = total + (size_t)hl + (c->chunked ? 2u : 0u);
	/* A watch's events leave DROP_ROOM for the Status that may end it. */
	if (need + (c->state == KR_SC_WATCHING ? DROP_ROOM : 0u) > room(c))
		return KR_ENOSPC;
	put(c, hex, (size_t)hl);
	for (i = 0; i < n; i++)
		put(c, parts[i], lens[i]);
	if (c->chunked)
		put(c, "\r\n", 2);
	return 0;
}

static int put_text_chunk(struct kr_serve_conn *c, const char *text)
{
	size_t len = strlen(text);

	return put_chunk(c, &text, &len, 1);
}

/* --- TLS on the endpoint ------------------------------------------------------------ */

#if KR_WITH_LISTEN_TLS
/* The certificate, key and client CA files, read one after the other. */
static unsigned char tls_pem[KR_PEM_MAX];

/* Reads one file into tls_pem at *used, NUL-terminated. Returns its length or a KR_E code. */
static long pem_read(const char *path, size_t *used)
{
	long n;

	if (!path)
		return 0;
	if (*used + 1 >= sizeof(tls_pem))
		return KR_ETOOBIG;
	n = kr_port_read_file(path, tls_pem + *used, sizeof(tls_pem) - *used - 1);
	if (n < 0)
		return n;
	tls_pem[*used + (size_t)n] = '\0';
	*used += (size_t)n + 1;
	return n;
}

/*
 * Reads the files and, when their contents differ from sum (or force),
 * sets up tls[slot] from them. Returns 1 set up, 0 unchanged, < 0 failed
 * with the reason in err.
 */
static int tls_load(struct kr_serve *s, int slot, int force, char *err, size_t errlen)
{
	const struct kr_serve_opts *o = &s->opts;
	const char *paths[3] = { o->cert_file, o->key_file, o->client_ca_file };
	long len[3];
	size_t used = 0, at[3];
	struct kr_tls_opts to;
	uint32_t sum;
	int i, r;

	for (i = 0; i < 3; i++) {
		at[i] = used;
		len[i] = pem_read(paths[i], &used);
		if (len[i] < 0) {
			kr_snprintf(err, errlen, "unable to read %s: %s", paths[i],
				    len[i] == KR_ETOOBIG ? "larger than KR_PEM_MAX" : kr_strerror((int)len[i]));
			return (int)len[i];
		}
	}
	sum = kr_state_crc32(0, tls_pem, used);
	if (!force && sum == s->tls_sum)
		return 0;
	memset(&to, 0, sizeof(to));
	to.cert = tls_pem + at[0];
	to.cert_len = (size_t)len[0];
	to.key = tls_pem + at[1];
	to.key_len = (size_t)len[1];
	to.ca = len[2] > 0 ? tls_pem + at[2] : NULL;
	to.ca_len = (size_t)len[2];
	if (o->client_ca_file && len[2] == 0) {
		kr_snprintf(err, errlen, "the client CA file %s is empty", o->client_ca_file);
		r = KR_EINVAL;
	} else {
		r = kr_tls_ctx_setup_server(&s->tls[slot], &to, err, errlen);
	}
	s->tls_sum = sum;              /* a bad rotation is reported once, not at every accept */
	kr_port_zero(tls_pem, used);   /* the key does not stay in this buffer */
	return r < 0 ? r : 1;
}

/* From files_recheck: new files take effect for the connections after. */
static void tls_recheck(struct kr_serve *s)
{
	char err[256];
	int other = 1 - s->tls_cur, r;

	if (s->tls_users[other] > 0)
		return;                /* sessions still use the other slot: the next look */
	r = tls_load(s, other, 0, err, sizeof(err));
	if (r < 0) {
		kr_log(KR_LOG_WARN, "listen: keeping the TLS certificate in use: %s", err);
	} else if (r > 0) {
		s->tls_cur = other;
		s->tls_reloads++;
		kr_log(KR_LOG_INFO, "listen: TLS certificate files changed: new connections use them");
	}
}

/* A session could not start: a clear line, and the socket closed (no memory for a Status). */
static void tls_refuse(struct kr_serve *s, int fd, const char *why)
{
	kr_log(KR_LOG_WARN, "listen: TLS connection refused: %s", why);
	kr_port_close(fd);
	s->tls_refused++;
	s->refused++;
}
#endif

static long conn_send(struct kr_serve_conn *c, const void *buf, size_t len)
{
#if KR_WITH_LISTEN_TLS
	if (c->srv->tls_on)
		return kr_tls_write(&c->tls, buf, len);
#endif
	return kr_port_send(c->src.fd, buf, len);
}

static long conn_recv(struct kr_serve_conn *c, void *buf, size_t len)
{
#if KR_WITH_LISTEN_TLS
	if (c->srv->tls_on)
		return kr_tls_read(&c->tls, buf, len);
#endif
	return kr_port_recv(c->src.fd, buf, len);
}

static void conn_close(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;

	if (c->state == KR_SC_FREE)
		return;
	kr_loop_remove(s->loop, &c->src);
#if KR_WITH_LISTEN_TLS
	if (s->tls_on) {
		kr_tls_free(&c->tls);  /* close_notify, best effort, and its memory back */
		s->tls_sessions--;
		s->tls_users[c->tls_slot]--;
	}
#endif
	{
		/* Unread request bytes would turn the close into a reset that can
		 * destroy the answer still in flight: read what is there first. */
		char sink[4096];
		int i;

		for (i = 0; i < 16 && kr_port_recv(c->src.fd, sink, sizeof(sink)) > 0; i++)
			;
	}
	kr_port_close(c->src.fd);
	c->src.fd = -1;
	c->state = KR_SC_FREE;
}

/* Sends what is buffered. Returns 1 when empty, 0 when the socket is full, < 0 closed. */
static int flush(struct kr_serve_conn *c)
{
	while (c->out_off < c->out_len) {
		long n = conn_send(c, c->out + c->out_off, c->out_len - c->out_off);

		if (n == KR_IO_WAIT)
			return 0;
		if (n <= 0) {
			conn_close(c);
			return KR_ECLOSED;
		}
		c->out_off += (size_t)n;
		c->srv->bytes_out += (unsigned long long)n;
	}
	c->out_off = c->out_len = 0;
	return 1;
}

static const char *reason_phrase(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 410: return "Gone";
	case 422: return "Unprocessable Entity";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

static void count_status(struct kr_serve *s, int code)
{
	if (code >= 100 && code < 600)
		s->responses[code / 100]++;
}

/* A complete response with body[0..len); HEAD gets the head only. */
static void respond(struct kr_serve_conn *c, int code, const char *ctype, const char *body,
		    size_t len, const char *extra)
{
	char head[512];
	int hl;

	count_status(c->srv, code);
	hl = kr_snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-cache, private\r\n%s%s\r\n",
			 code, reason_phrase(code), ctype, len, extra ? extra : "",
			 c->keep_alive ? "" : "Connection: close\r\n");
	c->out_off = c->out_len = 0;
	if (put(c, head, (size_t)hl) != 0 || (!c->head_only && put(c, body, len) != 0)) {
		/* Only a caller bug can get here: bodies are bounded below the buffer. */
		c->out_len = 0;
		c->keep_alive = 0;
		hl = kr_snprintf(head, sizeof(head), "HTTP/1.1 500 Internal Server Error\r\n"
				 "Content-Length: 0\r\nConnection: close\r\n\r\n");
		put(c, head, (size_t)hl);
	}
	c->state = KR_SC_WRITING;
}

static const char *status_reason(int code)
{
	switch (code) {
	case 400: return "BadRequest";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 405: return "MethodNotAllowed";
	case 406: return "NotAcceptable";
	case 410: return "Expired";
	case 422: return "Invalid";
	case 503: return "ServiceUnavailable";
	case 504: return "Timeout";
	case 500: return "InternalError";
	default: return "";
	}
}

/* The kube-apiserver's details of its 504 for a resourceVersion the cache has not reached:
 * client-go's reflector knows the error by this cause and lists again from "". */
#define TOO_LARGE_DETAILS "{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":" \
	"\"Too large resource version\"}],\"retryAfterSeconds\":1}"

/* The Status object the kube-apiserver sends, into o; a 504 is the too-large resourceVersion's. */
static void status_json(struct kr_out *o, int code, const char *message)
{
	char num[16];

	kr_out_str(o, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
		   "\"status\":\"Failure\",\"message\":\"");
	kr_json_escape(o, message);
	kr_out_str(o, "\",\"reason\":\"");
	kr_out_str(o, status_reason(code));
	if (code == 504)
		kr_out_str(o, "\",\"details\":" TOO_LARGE_DETAILS ",\"code\":");
	else
		kr_out_str(o, "\",\"code\":");
	kr_snprintf(num, sizeof(num), "%d", code);
	kr_out_str(o, num);
	kr_out_str(o, "}");
}

__attribute__((format(printf, 3, 4)))
static void respond_status(struct kr_serve_conn *c, int code, const char *fmt, ...)
{
	char msg[512], body[STATUS_MAX];
	struct kr_out o = { body, sizeof(body), 0, 0 };
	va_list ap;

	va_start(ap, fmt);
	kr_vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	status_json(&o, code, msg);
	respond(c, code, "application/json", body, o.overflow ? 0 : o.len,
		code == 401 ? "WWW-Authenticate: Bearer\r\n" : NULL);
}

/* --- health ----------------------------------------------------------------------------- */

static int64_t silent_ms(const struct kr_reflector *r, kr_ms_t now)
{
	return r->body_at ? now - r->body_at : -1;
}

static void serve_readyz(struct kr_serve_conn *c, int verbose)
{
	struct kr_serve *s = c->srv;
	char body[4096];
	struct kr_out o = { body, sizeof(body), 0, 0 };
	kr_ms_t now = kr_port_now_ms();
	int i, failed = 0;

	kr_out_str(&o, "[+]ping ok\n");
	for (i = 0; i < s->top->nrefl; i++) {
		const struct kr_reflector *r = &s->top->refl[i];
		int64_t quiet = silent_ms(r, now);
		char line[512];

		if (!r->synced) {
			kr_snprintf(line, sizeof(line), "[-]synced:%s failed: not synced yet%s%s\n",
				    r->res.name, r->conn.reason[0] ? ": " : "", r->conn.reason);
			failed++;
		} else {
			kr_snprintf(line, sizeof(line), "[+]synced:%s ok\n", r->res.name);
		}
		kr_out_str(&o, line);
		/* A partial mirror would serve a list without the objects it lacks. */
		if (r->synced) {
			size_t present, held = kr_reflector_held(r, &present);

			if (r->partial) {
				kr_snprintf(line, sizeof(line), "[-]complete:%s failed: the mirror is partial: "
					    "%zu of %zu objects held (--arena-bytes, --max-objects)\n",
					    r->res.name, held, present);
				failed++;
			} else {
				kr_snprintf(line, sizeof(line), "[+]complete:%s ok\n", r->res.name);
			}
			kr_out_str(&o, line);
		}
		if (quiet < 0 || quiet > s->opts.ready_silence_ms) {
			if (quiet < 0)
				kr_snprintf(line, sizeof(line), "[-]upstream:%s failed: no byte from the "
					    "API server yet\n", r->res.name);
			else
				kr_snprintf(line, sizeof(line), "[-]upstream:%s failed: no byte from the "
					    "API server for %lld s (limit %d s)\n", r->res.name,
					    (long long)(quiet / 1000), s->opts.ready_silence_ms / 1000);
			failed++;
		} else {
			kr_snprintf(line, sizeof(line), "[+]upstream:%s ok\n", r->res.name);
		}
		kr_out_str(&o, line);
	}
	if (failed) {
		kr_out_str(&o, "readyz check failed\n");
		respond(c, 503, "text/plain; charset=utf-8", body, o.len, NULL);
		return;
	}
	if (!verbose) {
		respond(c, 200, "text/plain; charset=utf-8", "ok", 2, NULL);
		return;
	}
	kr_out_str(&o, "readyz check passed\n");
	respond(c, 200, "text/plain; charset=utf-8", body, o.len, NULL);
}

/* --- metrics ------------------------------------------------------------------------------ */

static const char *const restart_names[KR_RS_N] = {
	"closed", "expired", "error_event", "http_error", "throttled", "stream_error",
	"connection", "very_short", "not_held",
};
static const char *const event_names[4] = { "ADDED", "MODIFIED", "DELETED", "RESYNC" };

__attribute__((format(printf, 2, 3)))
static void outf(struct kr_out *o, const char *fmt, ...)
{
	char line[768];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = kr_vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		o->overflow = 1;
		return;
	}
	kr_out_put(o, line, (size_t)n);
}

static void family(struct kr_out *o, const char *name, const char *type, const char *help)
{
	outf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Per-resource counter or gauge lines of one family. */
#define PER_RES(o, s, metric, fmt, expr)                                                  \
	do {                                                                            \
		int i_;                                                                 \
		for (i_ = 0; i_ < (s)->top->nrefl; i_++) {                              \
			const struct kr_reflector *r = &(s)->top->refl[i_];             \
			const struct kr_serve_res *sr = &(s)->res[i_];                  \
			(void)r;                                                        \
			(void)sr;                                                       \
			outf(o, "%s{resource=\"%s\"} " fmt "\n", metric, r->res.name, expr); \
		}                                                                       \
	} while (0)

void kr_serve_metrics(struct kr_serve *s, struct kr_out *o)
{
	const struct kr_store *st = s->store;
	kr_ms_t now = kr_port_now_ms();
	unsigned long long bytes_in = 0, full = 0, resumed = 0;
	int i, k, watchers = 0, open = 0;

	family(o, "kreflect_build_info", "gauge", "kreflect's version and build target.");
	outf(o, "kreflect_build_info{version=\"%s\",target=\"%s\"} 1\n", KR_VERSION, kr_target());

	family(o, "kreflect_objects", "gauge", "Objects of the resource the mirror holds.");
	for (i = 0; i < s->top->nrefl; i++) {
		size_t n = kr_store_count(st, i);

		outf(o, "kreflect_objects{resource=\"%s\"} %zu\n", s->top->refl[i].res.name, n);
	}
	family(o, "kreflect_objects_not_held", "gauge",
	       "Objects known by key only: too large for the arena or its quota.");
	outf(o, "kreflect_objects_not_held %zu\n", st->not_held);
	family(o, "kreflect_events_total", "counter", "Changes applied to the mirror, by type.");
	for (i = 0; i < s->top->nrefl; i++)
		for (k = 0; k < 4; k++)
			outf(o, "kreflect_events_total{resource=\"%s\",type=\"%s\"} %llu\n",
			     s->top->refl[i].res.name, event_names[k], s->res[i].events[k]);
	family(o, "kreflect_lists_total", "counter", "LIST requests sent (pages included).");
	PER_RES(o, s, "kreflect_lists_total", "%lu", r->lists);
	family(o, "kreflect_watch_lists_total", "counter", "Watch-list (streaming list) requests sent.");
	PER_RES(o, s, "kreflect_watch_lists_total", "%lu", r->watch_lists);
	family(o, "kreflect_watches_total", "counter", "Watch requests sent.");
	PER_RES(o, s, "kreflect_watches_total", "%lu", r->watches);
	family(o, "kreflect_relists_total", "counter", "Relists after the first sync.");
	PER_RES(o, s, "kreflect_relists_total", "%lu", r->relists);
	family(o, "kreflect_syncs_total", "counter", "Completed (re)lists.");
	PER_RES(o, s, "kreflect_syncs_total", "%lu", sr->syncs);
	family(o, "kreflect_watch_restarts_total", "counter", "Watches ended and started again, by reason.");
	for (i = 0; i < s->top->nrefl; i++)
		for (k = 0; k < KR_RS_N; k++)
			outf(o, "kreflect_watch_restarts_total{resource=\"%s\",reason=\"%s\"} %lu\n",
			     s->top->refl[i].res.name, restart_names[k], s->top->refl[i].restarts[k]);
	family(o, "kreflect_failures_total", "counter",
	       "Back-offs by the class of the failure (the library's enum kr_failure).");
	for (i = 0; i < s->top->nrefl; i++)
		for (k = KR_FAIL_NONE + 1; k < KR_FAIL_N; k++)
			outf(o, "kreflect_failures_total{resource=\"%s\",class=\"%s\"} %lu\n",
			     s->top->refl[i].res.name, kr_failure_name((enum kr_failure)k),
			     s->top->refl[i].failures[k]);
	family(o, "kreflect_expired_total", "counter",
	       "410 Gone/Expired answers and ERROR events from the API server.");
	PER_RES(o, s, "kreflect_expired_total", "%lu", r->expired);
	family(o, "kreflect_synced", "gauge", "1 once the resource has completed a sync.");
	PER_RES(o, s, "kreflect_synced", "%d", r->synced ? 1 : 0);
	family(o, "kreflect_partial", "gauge",
	       "1 while the mirror lacks objects the server has: not indexed or not held.");
	PER_RES(o, s, "kreflect_partial", "%d", r->partial ? 1 : 0);
	family(o, "kreflect_objects_held", "gauge", "Objects of the resource held with their bytes.");
	PER_RES(o, s, "kreflect_objects_held", "%zu", kr_reflector_held(r, NULL));
	family(o, "kreflect_last_sync_timestamp_seconds", "gauge",
	       "When the resource last completed a (re)list, seconds since the epoch.");
	PER_RES(o, s, "kreflect_last_sync_timestamp_seconds", "%lld", (long long)sr->last_sync_wall);
	family(o, "kreflect_upstream_silence_seconds", "gauge",
	       "Seconds since the last byte of a response from the API server (-1: none yet).");
	PER_RES(o, s, "kreflect_upstream_silence_seconds", "%lld",
		(long long)(r->body_at ? (now - r->body_at) / 1000 : -1));

	for (i = 0; i < s->top->nrefl; i++) {
		const struct kr_conn *c = &s->top->refl[i].conn;

		bytes_in += c->bytes_in;
		full += c->tls.full_handshakes;
		resumed += c->tls.resumed_handshakes;
	}
	family(o, "kreflect_received_bytes_total", "counter",
	       "Response bytes from the API server after TLS, over every resource.");
	outf(o, "kreflect_received_bytes_total %llu\n", bytes_in);
	family(o, "kreflect_tls_handshakes_total", "counter",
	       "TLS handshakes with the API server: full, or resumed from a saved session.");
	outf(o, "kreflect_tls_handshakes_total{kind=\"full\"} %llu\n", full);
	outf(o, "kreflect_tls_handshakes_total{kind=\"resumed\"} %llu\n", resumed);

	family(o, "kreflect_arena_bytes", "gauge",
	       "Arena bytes in use: live records, and dead ones awaiting compaction.");
	outf(o, "kreflect_arena_bytes{state=\"live\"} %zu\n", st->used - st->garbage);
	outf(o, "kreflect_arena_bytes{state=\"garbage\"} %zu\n", st->garbage);
	family(o, "kreflect_arena_capacity_bytes", "gauge", "Arena size.");
	outf(o, "kreflect_arena_capacity_bytes %zu\n", st->size);
	family(o, "kreflect_index_entries", "gauge", "Index entries in use.");
	outf(o, "kreflect_index_entries %u\n", (unsigned)st->nentries);
	family(o, "kreflect_index_capacity_entries", "gauge", "Index size.");
	outf(o, "kreflect_index_capacity_entries %u\n", (unsigned)st->max_entries);

	if (s->opts.notify || s->opts.post) {
		family(o, "kreflect_hook_runs_total", "counter",
		       "Notifications made: --exec runs and signals sent, --http-post batches delivered.");
		if (s->opts.notify) {
			outf(o, "kreflect_hook_runs_total{hook=\"exec\"} %lu\n", s->opts.notify->runs);
			outf(o, "kreflect_hook_runs_total{hook=\"signal\"} %lu\n",
			     s->opts.notify->signals_sent);
		}
		if (s->opts.post)
			outf(o, "kreflect_hook_runs_total{hook=\"http_post\"} %lu\n", s->opts.post->delivered);
		family(o, "kreflect_hook_failures_total", "counter",
		       "Notifications that failed: --exec exited non-zero or did not start, --http-post "
		       "attempts that failed.");
		if (s->opts.notify)
			outf(o, "kreflect_hook_failures_total{hook=\"exec\"} %lu\n", s->opts.notify->failures);
		if (s->opts.post)
			outf(o, "kreflect_hook_failures_total{hook=\"http_post\"} %lu\n",
			     s->opts.post->attempts_failed);
	}

	for (i = 0; i < s->used_hi; i++) {
		if (s->conns[i].state != KR_SC_FREE)
			open++;
		if (s->conns[i].state == KR_SC_WATCHING)
			watchers++;
	}
	family(o, "kreflect_serve_connections", "gauge", "Local connections open.");
	outf(o, "kreflect_serve_connections %d\n", open);
	family(o, "kreflect_serve_connections_max", "gauge", "Local connections allowed at once.");
	outf(o, "kreflect_serve_connections_max %d\n", s->nconns);
	family(o, "kreflect_serve_accepted_total", "counter", "Local connections accepted.");
	outf(o, "kreflect_serve_accepted_total %llu\n", s->accepted);
	family(o, "kreflect_serve_refused_total", "counter",
	       "Local connections refused with a 503 because every slot was taken.");
	outf(o, "kreflect_serve_refused_total %llu\n", s->refused);
	family(o, "kreflect_serve_requests_total", "counter", "Local requests read.");
	outf(o, "kreflect_serve_requests_total %llu\n", s->requests);
	family(o, "kreflect_serve_responses_total", "counter", "Local responses, by status class.");
	for (k = 1; k < 6; k++)
		outf(o, "kreflect_serve_responses_total{code=\"%dxx\"} %llu\n", k, s->responses[k]);
	family(o, "kreflect_serve_watchers", "gauge", "Local watch streams open.");
	outf(o, "kreflect_serve_watchers %d\n", watchers);
	family(o, "kreflect_serve_watchers_dropped_total", "counter",
	       "Local watchers dropped because the change history passed them (too slow).");
	outf(o, "kreflect_serve_watchers_dropped_total %llu\n", s->watchers_dropped);
	family(o, "kreflect_serve_history_records", "gauge", "Changes the history ring holds.");
	outf(o, "kreflect_serve_history_records %llu\n",
	     (unsigned long long)(s->seq_head - s->seq_tail));
	family(o, "kreflect_serve_sent_bytes_total", "counter", "Bytes sent to local clients.");
	outf(o, "kreflect_serve_sent_bytes_total %llu\n", s->bytes_out);
}

static void serve_metrics(struct kr_serve_conn *c)
{
	/* The text goes to the buffer's end first, then moves behind the head. */
	size_t reserve = 512;
	struct kr_out o = { c->out + reserve, sizeof(c->out) - reserve, 0, 0 };
	char head[256];
	int hl;

	kr_serve_metrics(c->srv, &o);
	if (o.overflow) {
		respond_status(c, 500, "the metrics do not fit KR_SERVE_OUT_BYTES (%u)",
			       (unsigned)KR_SERVE_OUT_BYTES);
		return;
	}
	count_status(c->srv, 200);
	hl = kr_snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
			 "version=0.0.4; charset=utf-8\r\nContent-Length: %zu\r\n%s\r\n", o.len,
			 c->keep_alive ? "" : "Connection: close\r\n");
	memmove(c->out + hl, c->out + reserve, c->head_only ? 0 : o.len);
	memcpy(c->out, head, (size_t)hl);
	c->out_off = 0;
	c->out_len = (size_t)hl + (c->head_only ? 0 : o.len);
	c->state = KR_SC_WRITING;
}

/* --- discovery ------------------------------------------------------------------------------ */

static int verbs_json(struct kr_out *o, const struct kr_resource *r, int shown)
{
	kr_out_str(o, shown ? ",{\"name\":\"" : "{\"name\":\"");
	kr_out_str(o, r->plural);
	kr_out_str(o, "\",\"singularName\":\"");
	{
		char low[KR_NAME_MAX];
		size_t i;

		for (i = 0; r->kind[i] && i + 1 < sizeof(low); i++)
			low[i] = (char)(r->kind[i] >= 'A' && r->kind[i] <= 'Z' ? r->kind[i] - 'A' + 'a'
									    : r->kind[i]);
		low[i] = '\0';
		kr_out_str(o, low);
	}
	kr_out_str(o, "\",\"namespaced\":");
	kr_out_str(o, r->namespaced ? "true" : "false");
	kr_out_str(o, ",\"kind\":\"");
	kr_out_str(o, r->kind);
	kr_out_str(o, "\",\"verbs\":[\"get\",\"list\",\"watch\"]");
	if (kr_resource_short_name(r)[0]) {
		kr_out_str(o, ",\"shortNames\":[\"");
		kr_out_str(o, kr_resource_short_name(r));
		kr_out_str(o, "\"]");
	}
	kr_out_str(o, "}");
	return 1;
}

static int can_serve(const struct kr_serve *s, const struct kr_resource *r)
{
	return s->opts.serve_secrets || r->group[0] || strcmp(r->plural, "secrets") != 0;
}

/* APIResourceList of group/version (group "" = core). */
static void serve_resource_list(struct kr_serve_conn *c, const char *group, const char *version)
{
	struct kr_serve *s = c->srv;
	char body[STATUS_MAX * 4];
	struct kr_out o = { body, sizeof(body), 0, 0 };
	int i, shown = 0, any = 0;

	kr_out_str(&o, "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"");
	if (group[0]) {
		kr_out_str(&o, group);
		kr_out_str(&o, "/");
	}
	kr_out_str(&o, version);
	kr_out_str(&o, "\",\"resources\":[");
	for (i = 0; i < s->top->nrefl; i++) {
		const struct kr_resource *r = &s->top->refl[i].res;

		if (strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0)
			continue;
		any = 1;
		if (can_serve(s, r))
			shown += verbs_json(&o, r, shown);
	}
	kr_out_str(&o, "]}");
	if (!any && !(group[0] == '\0' && strcmp(version, "v1") == 0)) {
		respond_status(c, 404, "the server could not find the requested resource");
		return;
	}
	if (o.overflow) {
		respond_status(c, 500, "the resource list is too long");
		return;
	}
	respond(c, 200, "application/json", body, o.len, NULL);
}

/* APIGroupList (group NULL) or one APIGroup. */
static void serve_groups(struct kr_serve_conn *c, const char *only)
{
	struct kr_serve *s = c->srv;
	char body[STATUS_MAX * 4];
	struct kr_out o = { body, sizeof(body), 0, 0 };
	int i, j, shown = 0;

	if (!only)
		kr_out_str(&o, "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[");
	for (i = 0; i < s->top->nrefl; i++) {
		const struct kr_resource *r = &s->top->refl[i].res;
		int dup = 0;

		if (!r->group[0] || (only && strcmp(only, r->group) != 0))
			continue;
		for (j = 0; j < i; j++)
			if (strcmp(s->top->refl[j].res.group, r->group) == 0)
				dup = 1;
		if (dup)
			continue;
		/* One version per group: the one mirrored (the first, if several). */
		kr_out_str(&o, shown ? "," : "");
		kr_out_str(&o, only ? "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":\""
				    : "{\"name\":\"");
		kr_out_str(&o, r->group);
		kr_out_str(&o, "\",\"versions\":[{\"groupVersion\":\"");
		kr_out_str(&o, r->group);
		kr_out_str(&o, "/");
		kr_out_str(&o, r->version);
		kr_out_str(&o, "\",\"version\":\"");
		kr_out_str(&o, r->version);
		kr_out_str(&o, "\"}],\"preferredVersion\":{\"groupVersion\":\"");
		kr_out_str(&o, r->group);
		kr_out_str(&o, "/");
		kr_out_str(&o, r->version);
		kr_out_str(&o, "\",\"version\":\"");
		kr_out_str(&o, r->version);
		kr_out_str(&o, "\"}}");
		shown++;
	}
	if (!only)
		kr_out_str(&o, "]}");
	if (only && !shown) {
		respond_status(c, 404, "the server could not find the requested resource");
		return;
	}
	if (o.overflow) {
		respond_status(c, 500, "the group list is too long");
		return;
	}
	respond(c, 200, "application/json", body, o.len, NULL);
}

static void serve_version(struct kr_serve_conn *c)
{
	char body[512];
	int n = kr_snprintf(body, sizeof(body),
			    "{\"major\":\"1\",\"minor\":\"\",\"gitVersion\":\"v1.0.0-kreflect.%s\","
			    "\"gitCommit\":\"\",\"gitTreeState\":\"\",\"buildDate\":\"\","
			    "\"goVersion\":\"\",\"compiler\":\"kreflect\",\"platform\":\"linux/%s\"}",
			    KR_VERSION, kr_target());

	respond(c, 200, "application/json", body, (size_t)n, NULL);
}

/* --- label selectors ------------------------------------------------------------------------ */

/* The value of label name[0..nl) of the object into val; 1 found, 0 not. */
static int label_of(const char *obj, const kr_json_tok *t, int n, const char *name, size_t nl,
		    char *val, size_t cap)
{
	int labels = kr_json_find(obj, t, n, 0, "metadata.labels"), v;

	if (labels < 0 || t[labels].type != KR_JSON_T_OBJECT)
		return 0;
	v = kr_json_find_key(obj, t, n, labels, name, nl);
	if (v < 0)
		return 0;
	if (kr_json_unescape(obj, &t[v], val, cap) < 0)
		val[0] = '\0';
	return 1;
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ')
		p++;
	return p;
}

static int is_label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '/';
}

/* One requirement sel[0..len) against the object; 1, 0 or KR_EINVAL. */
static int requirement(const char *p, const char *end, const char *obj, const kr_json_tok *t, int n)
{
	char key[320], val[256], have[256];
	size_t kl = 0, vl = 0;
	int neg = 0, found, op;

	p = skip_ws(p);
	if (p < end && *p == '!') {
		neg = 1;
		p = skip_ws(p + 1);
	}
	while (p < end && is_label_char(*p)) {
		if (kl + 1 >= sizeof(key))
			return KR_EINVAL;
		key[kl++] = *p++;
	}
	key[kl] = '\0';
	if (kl == 0)
		return KR_EINVAL;
	p = skip_ws(p);
	found = label_of(obj, t, n, key, kl, have, sizeof(have));
	if (p == end)
		return neg ? !found : found;
	if (neg)
		return KR_EINVAL;
	if (*p == '=' || (*p == '!' && p + 1 < end && p[1] == '=')) {
		op = *p == '!';
		p += op ? 2 : 1;
		if (!op && p < end && *p == '=')
			p++;
		p = skip_ws(p);
		while (p < end && *p != ' ') {
			if (!is_label_char(*p) || vl + 1 >= sizeof(val))
				return KR_EINVAL;
			val[vl++] = *p++;
		}
		val[vl] = '\0';
		if (skip_ws(p) != end)
			return KR_EINVAL;
		if (op)
			return !found || strcmp(have, val) != 0;
		return found && strcmp(have, val) == 0;
	}
	/* in (a,b) / notin (a,b) */
	if ((size_t)(end - p) > 3 && memcmp(p, "in ", 3) == 0)
		op = 0, p += 3;
	else if ((size_t)(end - p) > 6 && memcmp(p, "notin ", 6) == 0)
		op = 1, p += 6;
	else
		return KR_EINVAL;
	p = skip_ws(p);
	if (p >= end || *p != '(' || end[-1] != ')')
		return KR_EINVAL;
	p++;
	{
		int hit = 0;

		while (p < end - 1) {
			vl = 0;
			p = skip_ws(p);
			while (p < end - 1 && *p != ',' && *p != ' ') {
				if (!is_label_char(*p) || vl + 1 >= sizeof(val))
					return KR_EINVAL;
				val[vl++] = *p++;
			}
			val[vl] = '\0';
			p = skip_ws(p);
			if (p < end - 1) {
				if (*p != ',')
					return KR_EINVAL;
				p++;
			}
			if (found && strcmp(have, val) == 0)
				hit = 1;
		}
		return op ? !hit : hit;
	}
}

int kr_serve_labels_match(const char *sel, const char *obj, size_t objlen, kr_json_tok *toks,
			  int ntoks)
{
	const char *p = sel;
	int n = -1;

	if (!*sel)
		return 1;
	n = kr_json_parse(obj, objlen, toks, ntoks);
	if (n < 0)
		return 0;
	while (*p) {
		const char *e = p;
		int depth = 0, r;

		while (*e && (depth || *e != ',')) {
			if (*e == '(')
				depth++;
			else if (*e == ')')
				depth--;
			e++;
		}
		if (e == p)
			return KR_EINVAL;
		r = requirement(p, e, obj, toks, n);
		if (r <= 0)
			return r;
		p = *e ? e + 1 : e;
	}
	return 1;
}

/* --- lists and watches ------------------------------------------------------------------------- */

/* Whether the stored object v belongs in c's list or watch. */
static int wanted(struct kr_serve_conn *c, const struct kr_store_view *v)
{
	const char *slash = memchr(v->key, '/', v->keylen);
	const char *name = slash ? slash + 1 : v->key;
	size_t nslen = slash ? (size_t)(slash - v->key) : 0;
	int r;

	if (v->res != c->res)
		return 0;
	if (c->ns[0] && (nslen != strlen(c->ns) || memcmp(v->key, c->ns, nslen) != 0))
		return 0;
	if (c->name[0]) {
		size_t nl = v->keylen - (size_t)(name - v->key);
		int same = nl == strlen(c->name) && memcmp(name, c->name, nl) == 0;

		if (same == c->name_neg)
			return 0;
	}
	if (!c->labels[0])
		return 1;
	if (!v->held)
		return 0;
	r = kr_serve_labels_match(c->labels, v->obj, v->objlen, c->srv->top->toks, KR_JSON_TOKENS);
	return r > 0;
}

/*
 * Writes one item: prefix, the object (or rest of it), suffix, as one chunk.
 * An object larger than the buffer is sent from the arena (big_*). Returns 1
 * written, 0 no room now (flush first), < 0 not possible.
 */
static int put_item(struct kr_serve_conn *c, const char *prefix, const struct kr_store_view *v,
		    const char *suffix)
{
	const char *parts[3] = { prefix, v->obj, suffix };
	size_t lens[3] = { strlen(prefix), v->objlen, strlen(suffix) };
	char hex[20];
	int hl;

	if (put_chunk(c, parts, lens, 3) == 0)
		return 1;
	if (c->out_len > 0)
		return 0;
	/* Alone it does not fit: header and prefix now, the object straight from the arena. */
	hl = c->chunked ? kr_snprintf(hex, sizeof(hex), "%zx\r\n", lens[0] + lens[1] + lens[2]) : 0;
	put(c, hex, (size_t)hl);
	put(c, prefix, lens[0]);
	if (v->keylen >= sizeof(c->big_key))
		return KR_ETOOBIG;
	memcpy(c->big_key, v->key, v->keylen);
	c->big_key[v->keylen] = '\0';
	kr_snprintf(c->big_rv, sizeof(c->big_rv), "%s", v->rv);
	c->big_off = 0;
	c->big_len = v->objlen;
	c->big = 1;
	/* The suffix waits in the big state: only lists (",") and watches ("}\n") use this. */
	return 1;
}

/* Sends the big object from the arena. 1 done, 0 socket full, < 0 closed. */
static int send_big(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	struct kr_store_view v;

	while (c->big_off < c->big_len) {
		long n;

		if (!kr_store_get(s->store, c->res, c->big_key, strlen(c->big_key), &v) || !v.held ||
		    strcmp(v.rv, c->big_rv) != 0 || v.objlen != c->big_len) {
			/* Replaced while being sent: what went out cannot be taken back. */
			kr_log(KR_LOG_INFO, "local client: %s changed while being sent; closing",
			       c->big_key);
			conn_close(c);
			return KR_ECLOSED;
		}
		n = conn_send(c, v.obj + c->big_off, c->big_len - c->big_off);
		if (n == KR_IO_WAIT)
			return 0;
		if (n <= 0) {
			conn_close(c);
			return KR_ECLOSED;
		}
		c->big_off += (size_t)n;
		s->bytes_out += (unsigned long long)n;
	}
	c->big = 0;
	put(c, c->state == KR_SC_WATCHING ? "}\n" : "", c->state == KR_SC_WATCHING ? 2 : 0);
	if (c->chunked)
		put(c, "\r\n", 2);
	return 1;
}

static void gv_of(const struct kr_resource *r, char *buf, size_t size)
{
	if (r->group[0])
		kr_snprintf(buf, size, "%s/%s", r->group, r->version);
	else
		kr_snprintf(buf, size, "%s", r->version);
}

static void end_body(struct kr_serve_conn *c)
{
	if (c->chunked && !c->head_only)
		put(c, "0\r\n\r\n", 5);
	c->state = KR_SC_WRITING;
}

/* List items from the cursor while they fit; the list's end when done. */
static void produce_list(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	struct kr_store_view v;

	while (c->cursor < s->store->max_entries) {
		int r;

		if (c->limit && c->sent >= c->limit)
			break;
		if (!kr_store_at(s->store, c->cursor, &v) || !v.held || !wanted(c, &v)) {
			c->cursor++;
			continue;
		}
		r = put_item(c, c->first ? "" : ",", &v, "");
		if (r == 0)
			return;
		if (r < 0) {
			conn_close(c);
			return;
		}
		c->first = 0;
		c->sent++;
		c->cursor++;
		if (c->big)
			return;
	}
	{
		char tail[256];
		int more = 0;
		uint32_t i;

		/* A continue token only if another wanted object follows. */
		if (c->limit && c->sent >= c->limit)
			for (i = c->cursor; i < s->store->max_entries && !more; i++)
				more = kr_store_at(s->store, i, &v) && v.held && wanted(c, &v);
		if (more)
			kr_snprintf(tail, sizeof(tail), "],\"metadata\":{\"resourceVersion\":\"%s\","
				    "\"continue\":\"%lu.%s\"}}", s->res[c->res].rv,
				    (unsigned long)c->cursor, s->res[c->res].rv);
		else
			kr_snprintf(tail, sizeof(tail), "],\"metadata\":{\"resourceVersion\":\"%s\"}}",
				    s->res[c->res].rv);
		if (put_text_chunk(c, tail) != 0)
			return;
		end_body(c);
	}
}

static int put_bookmark(struct kr_serve_conn *c, int initial_end)
{
	const struct kr_resource *r = &c->srv->top->refl[c->res].res;
	char gv[320], ev[768];

	gv_of(r, gv, sizeof(gv));
	kr_snprintf(ev, sizeof(ev), "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":"
		    "\"%s\",\"metadata\":{\"resourceVersion\":\"%s\"%s}}}\n", r->kind, gv,
		    c->srv->res[c->res].rv,
		    initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "");
	return put_text_chunk(c, ev);
}

/* The watch ends with an ERROR event of a Status like the kube-apiserver's: 410 when
 * the watcher fell behind the ring (count: it is counted as dropped), 401 or 403
 * when its identity lost access. */
static void drop_watcher(struct kr_serve_conn *c, int code, const char *why, int count)
{
	char body[STATUS_MAX], ev[STATUS_MAX + 64];
	struct kr_out o = { body, sizeof(body), 0, 0 };

	status_json(&o, code, why);
	kr_snprintf(ev, sizeof(ev), "{\"type\":\"ERROR\",\"object\":%.*s}\n", (int)o.len, body);
	c->srv->watchers_dropped += (unsigned long long)count;
	c->deadline = kr_port_now_ms() + c->srv->opts.idle_ms;
	/* The events kept DROP_ROOM free for this; were it short, the close says it. */
	c->state = KR_SC_WRITING;
	put_text_chunk(c, ev);
	end_body(c);
	c->keep_alive = 0;
	rearm_conn(c);
	if (count)
		kr_log(KR_LOG_INFO, "local watcher dropped: %s", why);
}

/* A DELETED event of key[0..keylen) at resourceVersion rv[0..rvlen). 1 when it went out, 0 no room. */
static int put_deleted(struct kr_serve_conn *c, const char *key, size_t keylen, const char *rv, size_t rvlen)
{
	const struct kr_resource *res = &c->srv->top->refl[c->res].res;
	char gv[320], ev[1024], name[KR_KEY_MAX], ns[KR_KEY_MAX];
	const char *slash = memchr(key, '/', keylen);

	if (slash) {
		kr_snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
		kr_snprintf(name, sizeof(name), "%.*s", (int)(keylen - (size_t)(slash - key) - 1), slash + 1);
	} else {
		ns[0] = '\0';
		kr_snprintf(name, sizeof(name), "%.*s", (int)keylen, key);
	}
	gv_of(res, gv, sizeof(gv));
	kr_snprintf(ev, sizeof(ev), "{\"type\":\"DELETED\",\"object\":{\"kind\":\"%s\","
		    "\"apiVersion\":\"%s\",\"metadata\":{\"name\":\"%s\"%s%s%s,"
		    "\"resourceVersion\":\"%.*s\"}}}\n", res->kind, gv, name,
		    ns[0] ? ",\"namespace\":\"" : "", ns, ns[0] ? "\"" : "", (int)rvlen, rv);
	return put_text_chunk(c, ev) == 0;
}

static int told(const struct kr_serve_conn *c, int32_t idx)
{
	return c->matched[idx / 8] & (1u << (idx % 8));
}

static void tell(struct kr_serve_conn *c, int32_t idx, int match)
{
	if (idx < 0 || idx >= (int32_t)KR_SERVE_TRACK_OBJECTS)
		return;
	if (match)
		c->matched[idx / 8] |= (unsigned char)(1u << (idx % 8));
	else
		c->matched[idx / 8] &= (unsigned char)~(1u << (idx % 8));
}

/*
 * A change of key on a label-selector watch, as the watch cache sends it: an
 * object that starts matching is ADDED, one that stops is DELETED, one that
 * still does is MODIFIED. In a resumed watch's gap (what it saw is unknown)
 * an object that does not match is DELETED and one that does is MODIFIED.
 * Returns 1 sent (or nothing to send), 0 no room, < 0 the connection failed.
 */
static int tracked_change(struct kr_serve_conn *c, const char *key, size_t keylen, int added, int gap)
{
	struct kr_serve *s = c->srv;
	struct kr_store_view v;
	int32_t idx = kr_store_index(s->store, c->res, key, keylen);
	int have = idx >= 0 && kr_store_at(s->store, (uint32_t)idx, &v) && v.held;
	int now = have && wanted(c, &v), before, r;

	if (added)
		before = 0;            /* new: whatever its slot held before, not this object */
	else if (gap)
		before = 1;
	else if (idx >= 0 && idx < (int32_t)KR_SERVE_TRACK_OBJECTS)
		before = told(c, idx) != 0;
	else
		before = now;          /* untracked: as without a selector's memory */
	if (now) {
		r = put_item(c, before ? "{\"type\":\"MODIFIED\",\"object\":"
				       : "{\"type\":\"ADDED\",\"object\":", &v, "}\n");
		if (r == 1)
			tell(c, idx, 1);
		return r;
	}
	if (!before || !have) {
		if (have)
			tell(c, idx, 0);
		return 1;              /* never told, or gone (its DELETED record follows) */
	}
	r = put_deleted(c, key, keylen, v.rv, strlen(v.rv));
	if (r == 1)
		tell(c, idx, 0);
	return r;
}

static void produce_watch(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	struct kr_store_view v;
	kr_ms_t now = kr_port_now_ms();

	while (c->initial) {
		int r;

		if (c->cursor >= s->store->max_entries) {
			c->initial = 0;
			if (c->bookmarks == 2 && put_bookmark(c, 1) != 0) {
				c->initial = 1;
				return;
			}
			break;
		}
		if (!kr_store_at(s->store, c->cursor, &v) || !v.held || !wanted(c, &v)) {
			c->cursor++;
			continue;
		}
		if (room(c) < DROP_ROOM)
			return;
		r = put_item(c, "{\"type\":\"ADDED\",\"object\":", &v, "}\n");
		if (r == 0)
			return;
		if (r < 0) {
			conn_close(c);
			return;
		}
		if (c->track)
			tell(c, (int32_t)c->cursor, 1);
		c->cursor++;
		if (c->big)
			return;
	}
	for (;;) {
		struct rec r;
		size_t p;
		const char *key;
		int ok;

		if (c->seq < s->seq_tail) {
			drop_watcher(c, 410, "too old resource version: the local watcher fell behind "
				     "kreflect's change history (KR_SERVE_HISTORY)", 1);
			return;
		}
		if (c->seq >= s->seq_head)
			break;
		if (room(c) < DROP_ROOM)
			return;
		p = rec_pos(s, c->pos);
		r = rec_at(s, p);
		key = (const char *)s->ring + p + HDR;
		ok = 1;
		if (r.res != c->res || r.type == REC_MARK) {
			ok = 1;
		} else if (r.type == REC_DELETED) {
			struct kr_store_view dv;

			memset(&dv, 0, sizeof(dv));
			dv.res = c->res;
			dv.key = key;
			dv.keylen = r.keylen;
			dv.held = 0;
			/* A selector watch rendering the DELETED as it happens knows the
			 * object it removed: one that did not match was never told. */
			if (c->track && c->seq == s->gone_seq && s->gone_obj && c->seq >= c->gap_seq &&
			    kr_serve_labels_match(c->labels, s->gone_obj, s->gone_len, s->top->toks,
						  KR_JSON_TOKENS) == 0)
				goto next;
			/* Namespace and name filters apply; labels are gone with the object. */
			if (c->ns[0] || c->name[0]) {
				int saved = c->labels[0];

				c->labels[0] = '\0';
				ok = wanted(c, &dv);
				c->labels[0] = (char)saved;
				if (!ok) {
					ok = 1;
					goto next;
				}
			}
			ok = put_deleted(c, key, r.keylen, key + r.keylen, r.rvlen);
		} else if (c->track) {
			int w = tracked_change(c, key, r.keylen, r.type == REC_ADDED, c->seq < c->gap_seq);

			if (w < 0) {
				conn_close(c);
				return;
			}
			ok = w == 1;
		} else if (kr_store_get(s->store, c->res, key, r.keylen, &v) && v.held && wanted(c, &v)) {
			/* The object as it is now: a later change of it follows in the ring anyway. */
			int w = put_item(c, r.type == REC_ADDED ? "{\"type\":\"ADDED\",\"object\":"
							       : "{\"type\":\"MODIFIED\",\"object\":",
					 &v, "}\n");

			if (w < 0) {
				conn_close(c);
				return;
			}
			ok = w == 1;
		}
next:
		if (!ok)
			return;
		c->pos = p + r.size;
		if (c->pos >= sizeof(s->ring))
			c->pos = 0;
		c->seq++;
		if (c->big)
			return;
	}
	if (c->bookmarks && now >= c->bookmark_at) {
		if (put_bookmark(c, 0) != 0)
			return;
		c->bookmark_at = now + s->opts.bookmark_ms;
	}
	if (c->watch_end && now >= c->watch_end)
		end_body(c);
}

/* Moves c on as far as its socket takes; sets what it waits for. */
static void pump(struct kr_serve_conn *c)
{
	for (;;) {
		int r = flush(c);

		if (r < 0)
			return;
		if (r == 0) {
			c->src.want = KR_POLL_OUT;
			return;
		}
		if (c->big) {
			r = send_big(c);
			if (r < 0)
				return;
			if (r == 0) {
				c->src.want = KR_POLL_OUT;
				return;
			}
			continue;
		}
		switch (c->state) {
		case KR_SC_WRITING:
			if (!c->keep_alive) {
				conn_close(c);
				return;
			}
			c->state = KR_SC_READING;
			kr_http_server_init(&c->req);
			c->deadline = kr_port_now_ms() + c->srv->opts.idle_ms;
			c->src.want = KR_POLL_IN;
			return;
		case KR_SC_LISTING:
			produce_list(c);
			if (c->state == KR_SC_FREE)
				return;
			if (c->out_len == 0 && !c->big && c->state == KR_SC_LISTING)
				return;        /* cannot happen: an item always fits or goes big */
			break;
		case KR_SC_WATCHING:
			produce_watch(c);
			if (c->state == KR_SC_FREE)
				return;
			if (c->out_len == 0 && !c->big && c->state == KR_SC_WATCHING) {
				c->src.want = KR_POLL_IN;  /* caught up: only a close is of interest */
				return;
			}
			break;
		case KR_SC_WAITING:
			rv_waited(c);
			if (c->state == KR_SC_WAITING || c->state == KR_SC_FREE)
				return;
			break;
		default:
			c->src.want = KR_POLL_IN;
			return;
		}
	}
}

static void wake_watchers(struct kr_serve *s)
{
	int i;

	for (i = 0; i < s->used_hi; i++) {
		struct kr_serve_conn *c = &s->conns[i];

		if (c->state == KR_SC_WAITING)
			c->src.want |= KR_POLL_OUT;  /* its resourceVersion may be reached: a look */
		if (c->state != KR_SC_WATCHING)
			continue;
		c->src.want |= KR_POLL_OUT;
		if (c->seq < s->seq_tail && !c->big) {
			/* Passed by the ring while its socket is full: drop it now (the
			 * Status goes if it fits; the close tells the rest). */
			drop_watcher(c, 410, "too old resource version: the local watcher did not read "
				     "and fell behind kreflect's change history", 1);
			continue;
		}
		/* Render the change now, while the store holds the object as this
		 * change left it: several changes applied from one read of the
		 * upstream would otherwise all be rendered from the last one's
		 * object, and a label-selector watch would miss the transitions in
		 * between. The socket write waits for the poll; a watcher whose
		 * buffer is full renders later, from the objects as they are then. */
		if (!c->big)
			produce_watch(c);
	}
}

/* --- routing ---------------------------------------------------------------------------------- */

static int find_resource(const struct kr_serve *s, const char *group, const char *version,
			 const char *plural)
{
	int i;

	for (i = 0; i < s->top->nrefl; i++) {
		const struct kr_resource *r = &s->top->refl[i].res;

		if (strcmp(r->group, group) == 0 && strcmp(r->version, version) == 0 &&
		    strcmp(r->plural, plural) == 0)
			return i;
	}
	return -1;
}

/* A bool query parameter, as Go's strconv.ParseBool reads it (python sends "True"). */
static int param_true(const char *target, const char *name)
{
	static const char *const yes[] = { "1", "t", "T", "true", "TRUE", "True" };
	char v[8];
	size_t i;

	if (kr_http_server_param(target, name, v, sizeof(v)) < 0)
		return 0;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (strcmp(v, yes[i]) == 0)
			return 1;
	return 0;
}

static void chunked_head(struct kr_serve_conn *c)
{
	char head[256];
	int hl;

	count_status(c->srv, 200);
	c->chunked = c->req.minor >= 1;
	if (!c->chunked)
		c->keep_alive = 0;
	hl = kr_snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			 "Cache-Control: no-cache, private\r\n%s%s\r\n",
			 c->chunked ? "Transfer-Encoding: chunked\r\n" : "",
			 c->keep_alive ? "" : "Connection: close\r\n");
	c->out_off = c->out_len = 0;
	put(c, head, (size_t)hl);
}

static void rearm(struct kr_serve *s);

/*
 * A label-selector watch remembers what it told: nothing yet when it starts
 * with the initial events; when it resumes, the objects that match now (those
 * the gap's records do not change were matching at its resourceVersion too).
 */
static void track_start(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	struct kr_store_view v;
	uint32_t i;

	c->track = c->labels[0] != '\0';
	c->gap_seq = 0;
	if (!c->track)
		return;
	memset(c->matched, 0, sizeof(c->matched));
	if (c->initial)
		return;
	c->gap_seq = s->seq_head;
	for (i = 0; i < s->store->max_entries && i < KR_SERVE_TRACK_OBJECTS; i++)
		if (kr_store_at(s->store, i, &v) && v.held && v.res == c->res && wanted(c, &v))
			tell(c, (int32_t)i, 1);
}

/* -1, 0, 1 as resourceVersion a is older, the same, newer than b; 2 when either is not a number. */
static int rv_cmp(const char *a, const char *b)
{
	size_t la = strspn(a, "0123456789"), lb = strspn(b, "0123456789");
	int d;

	if (!la || !lb || a[la] || b[lb] || a[0] == '0' || b[0] == '0')
		return strcmp(a, b) == 0 ? 0 : 2;
	if (la != lb)
		return la < lb ? -1 : 1;
	d = strcmp(a, b);            /* same length: the digits in order */
	return d < 0 ? -1 : d > 0;
}

/* How long a request for a resourceVersion newer than the mirror's waits for
 * it (the kube-apiserver's watch cache waits as long) before its 504. */
#define RV_WAIT_MS 3000

static void watch_begin(struct kr_serve_conn *c);
static void list_begin(struct kr_serve_conn *c);

/* c (a list or a watch of c->res) asked for rv, newer than the mirror: it
 * waits, its deadline on the tick and each change a look (rv_waited). */
static void rv_wait(struct kr_serve_conn *c, const char *rv, int list)
{
	struct kr_serve *s = c->srv;

	kr_snprintf(c->wait_rv, sizeof(c->wait_rv), "%s", rv);
	c->wait_list = list;
	c->seq = s->seq_head;          /* a watch's events are past here (and past rv) */
	c->pos = s->ring_head;
	c->deadline = kr_port_now_ms() + RV_WAIT_MS;
	c->state = KR_SC_WAITING;
}

/* From (*seq, *pos) on, the record after the last of resource res at rv or
 * older: where a watch from rv starts. 0 when the ring has passed *seq. */
static int history_after(const struct kr_serve *s, int res, const char *rv, uint64_t *seq,
			 size_t *pos)
{
	size_t p = *pos;
	uint64_t q;
	char v[KR_RV_MAX];

	if (*seq < s->seq_tail)
		return 0;
	for (q = *seq; q < s->seq_head; q++) {
		size_t at;
		struct rec r;

		p = rec_step(s, p, &at);
		r = rec_at(s, at);
		if (r.res != res || r.type == REC_WRAP || r.rvlen >= sizeof(v))
			continue;
		memcpy(v, s->ring + at + HDR + r.keylen, r.rvlen);
		v[r.rvlen] = '\0';
		if (rv_cmp(v, rv) <= 0) {
			*seq = q + 1;
			*pos = p;
		}
	}
	return 1;
}

/* A waiting request, after a change or at its deadline: still waiting, begun, or its 504. */
static void rv_waited(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	const char *cur = s->res[c->res].rv;
	char why[200];

	if (rv_cmp(c->wait_rv, cur) == 1) {
		if (kr_port_now_ms() < c->deadline) {
			c->src.want = KR_POLL_IN;  /* only a close is of interest until then */
			return;
		}
		kr_snprintf(why, sizeof(why), "Timeout: Too large resource version: %s, current: %s",
			    c->wait_rv, cur);
		if (c->wait_list) {
			respond_status(c, 504, "%s", why);
			return;
		}
		/* As its other errors once the request was accepted: a 200 stream, one ERROR event. */
		chunked_head(c);
		c->state = KR_SC_WATCHING;
		drop_watcher(c, 504, why, 0);
		return;
	}
	c->deadline = kr_port_now_ms() + 2 * (kr_ms_t)s->opts.idle_ms;
	if (c->wait_list) {
		list_begin(c);
		return;
	}
	if (c->initial) {
		c->seq = s->seq_head;  /* the current objects first, then what follows them */
		c->pos = s->ring_head;
	} else if (!history_after(s, c->res, c->wait_rv, &c->seq, &c->pos)) {
		chunked_head(c);
		c->state = KR_SC_WATCHING;
		kr_snprintf(why, sizeof(why), "too old resource version: %s (%s)", c->wait_rv, cur);
		drop_watcher(c, 410, why, 0);
		return;
	}
	watch_begin(c);
}

/*
 * A list's resourceVersion and resourceVersionMatch, as the kube-apiserver
 * reads them. The mirror holds one state, its newest: "" and "0" get it, so
 * does NotOlderThan (or no match) of a version it has reached; a newer one
 * waits up to RV_WAIT_MS for the mirror to reach it and then is the
 * apiserver's 504 "Too large resource version" (a reflector then lists from
 * ""); Exact of a newer one gets that 504 at once, of an older one 410 (no
 * older state is kept). Returns 1 when the list may go on, 0 when an error
 * was answered or the request waits (KR_SC_WAITING).
 */
static int list_rv_ok(struct kr_serve_conn *c, int ri, const char *rv)
{
	const char *cur = c->srv->res[ri].rv;
	char m[32];
	uint64_t seq;
	size_t pos;
	int exact, d;

	if (kr_http_server_param(c->req.target, "resourceVersionMatch", m, sizeof(m)) <= 0)
		m[0] = '\0';
	exact = strcmp(m, "Exact") == 0;
	if (m[0] && !exact && strcmp(m, "NotOlderThan") != 0) {
		respond_status(c, 422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
			       "Unsupported value: \"%s\": supported values: \"Exact\", \"NotOlderThan\", \"\"", m);
		return 0;
	}
	if (m[0] && !rv[0]) {
		respond_status(c, 422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
			       "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided");
		return 0;
	}
	if (exact && strcmp(rv, "0") == 0) {
		respond_status(c, 422, "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
			       "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
		return 0;
	}
	if (!rv[0] || strcmp(rv, "0") == 0)
		return 1;
	d = rv_cmp(rv, cur);
	if (d == 0 || (d < 0 && !exact))
		return 1;
	if (d == 2 && !exact && kr_serve_history_find(c->srv, ri, rv, &seq, &pos))
		return 1;              /* not numbers, but a version it has passed */
	if (d > 0 && !exact) {
		rv_wait(c, rv, 1);     /* the mirror may get there within RV_WAIT_MS */
		return 0;
	}
	if (d > 0 || (d == 2 && !exact)) {
		respond_status(c, 504, "Timeout: Too large resource version: %s, current: %s", rv, cur);
		return 0;
	}
	respond_status(c, 410, "too old resource version: %s (%s)", rv, cur);
	return 0;
}

/* Nonzero if the access file lets c's identity read resource r in ns (NULL = every namespace). */
static int allowed(const struct kr_serve *s, const struct kr_serve_conn *c, const struct kr_resource *r,
		   const char *ns)
{
	return !s->have_rules || kr_rules_allow(&s->rules, c->who, ns, r->plural, r->name,
						!r->group[0] && strcmp(r->plural, "secrets") == 0);
}

/* The kube-apiserver's words for an RBAC refusal of verb on r (name: a get's object). */
static void forbidden_text(char *msg, size_t n, const char *who, const char *verb, const struct kr_resource *r,
			   const char *ns, const char *name)
{
	kr_snprintf(msg, n, "%s%s%s%s is forbidden: User \"%s\" cannot %s resource \"%s\" in API group "
		    "\"%s\" %s%s%s", r->plural, name ? " \"" : "", name ? name : "", name ? "\"" : "",
		    who, verb, r->plural, r->group, ns ? "in the namespace \"" : "at the cluster scope",
		    ns ? ns : "", ns ? "\"" : "");
}

static void serve_collection(struct kr_serve_conn *c, int ri, const char *ns, const char *name)
{
	struct kr_serve *s = c->srv;
	const struct kr_reflector *refl = &s->top->refl[ri];
	const struct kr_resource *r = &refl->res;
	const char *t = c->req.target;
	char fs[320], rv[KR_RV_MAX], num[32];
	int n;

	if (!can_serve(s, r)) {
		respond_status(c, 403, "%s is forbidden: kreflect serves secrets only with --serve-secrets",
			       r->name);
		return;
	}
	if (!allowed(s, c, r, ns)) {
		char msg[512];

		forbidden_text(msg, sizeof(msg), c->who, name ? "get" : param_true(t, "watch") ? "watch" : "list",
			       r, ns, name);
		respond_status(c, 403, "%s", msg);
		s->forbidden++;
		return;
	}
	if (r->namespaced && !r->all_namespaces && (!ns || strcmp(ns, r->ns) != 0)) {
		respond_status(c, 403, "%s%s%s is forbidden: kreflect mirrors namespace %s only",
			       r->name, ns ? " in namespace " : " in every namespace", ns ? ns : "",
			       r->ns);
		return;
	}
	if (!r->namespaced && ns) {
		respond_status(c, 404, "the server could not find the requested resource");
		return;
	}
	/* Restored from the state directory and not live yet: only a watch that resumes
	 * from the saved ring is served (it holds that watcher's gap); the rest waits. */
	if (!refl->synced && !(refl->restored && param_true(t, "watch"))) {
		respond_status(c, 503, "%s: the mirror has not synced yet", r->name);
		return;
	}
	c->res = ri;
	kr_snprintf(c->ns, sizeof(c->ns), "%s", ns ? ns : "");
	c->name[0] = '\0';
	c->name_neg = 0;
	c->labels[0] = '\0';

	if (name) {
		struct kr_store_view v;
		char key[KR_KEY_MAX];
		int kl = kr_snprintf(key, sizeof(key), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);

		if (kl >= (int)sizeof(key) || !kr_store_get(s->store, ri, key, (size_t)kl, &v)) {
			respond_status(c, 404, "%s \"%s\" not found", r->name, name);
			return;
		}
		if (!v.held) {
			respond_status(c, 503, "%s \"%s\" is too large for kreflect's arena", r->name, name);
			return;
		}
		{
			char head[256];
			int hl;

			count_status(s, 200);
			hl = kr_snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: "
					 "application/json\r\nContent-Length: %zu\r\n%s\r\n", v.objlen,
					 c->keep_alive ? "" : "Connection: close\r\n");
			c->out_off = c->out_len = 0;
			c->chunked = 0;
			put(c, head, (size_t)hl);
			c->state = KR_SC_WRITING;
			if (!c->head_only) {
				if (put(c, v.obj, v.objlen) != 0) {
					memcpy(c->big_key, key, (size_t)kl + 1);
					kr_snprintf(c->big_rv, sizeof(c->big_rv), "%s", v.rv);
					c->big_off = 0;
					c->big_len = v.objlen;
					c->big = 1;
				}
			}
		}
		return;
	}
	n = kr_http_server_param(t, "labelSelector", c->labels, sizeof(c->labels));
	if (n == KR_ETOOBIG || n == KR_EINVAL) {
		respond_status(c, 400, "labelSelector: too long or badly encoded");
		return;
	}
	if (n < 0)
		c->labels[0] = '\0';
	if (c->labels[0] && kr_serve_labels_match(c->labels, "{}", 2, s->top->toks, 8) < 0) {
		respond_status(c, 400, "unable to parse requirement: labelSelector \"%s\"", c->labels);
		return;
	}
	n = kr_http_server_param(t, "fieldSelector", fs, sizeof(fs));
	if (n > 0) {
		const char *eq = strchr(fs, '=');
		int neg = eq && eq > fs && eq[-1] == '!';
		size_t fl = eq ? (size_t)(eq - fs) - (size_t)neg : 0;
		const char *val = eq ? eq + 1 + (eq[1] == '=' && !neg) : NULL;

		if (!eq || strchr(val, ',') || strlen(val) >= sizeof(c->name)) {
			respond_status(c, 400, "fieldSelector \"%s\": kreflect serves one "
				       "metadata.name or metadata.namespace requirement", fs);
			return;
		}
		if (fl == 13 && memcmp(fs, "metadata.name", 13) == 0) {
			kr_snprintf(c->name, sizeof(c->name), "%s", val);
			c->name_neg = neg;
			if (!*val && !neg) {
				respond_status(c, 400, "fieldSelector: empty name");
				return;
			}
		} else if (fl == 18 && memcmp(fs, "metadata.namespace", 18) == 0 && r->namespaced) {
			if (neg || (c->ns[0] && strcmp(c->ns, val) != 0)) {
				respond_status(c, 400, "fieldSelector \"%s\" is not supported by kreflect", fs);
				return;
			}
			kr_snprintf(c->ns, sizeof(c->ns), "%s", val);
		} else {
			respond_status(c, 400, "\"%.*s\" is not a known field selector: only "
				       "\"metadata.name\", \"metadata.namespace\"", (int)fl, fs);
			return;
		}
	} else if (n == KR_ETOOBIG || n == KR_EINVAL) {
		respond_status(c, 400, "fieldSelector: too long or badly encoded");
		return;
	}
	if (kr_http_server_param(t, "resourceVersion", rv, sizeof(rv)) < 0)
		rv[0] = '\0';

	if (param_true(t, "watch")) {
		long long ts = 0;

		if (kr_http_server_param(t, "timeoutSeconds", num, sizeof(num)) > 0) {
			ts = kr_parse_num(num, 0, LONG_MAX);
			if (ts < 0) {
				respond_status(c, 400, "timeoutSeconds: not a number of seconds");
				return;
			}
		}
		c->initial = 0;
		c->bookmarks = param_true(t, "allowWatchBookmarks");
		if (param_true(t, "sendInitialEvents")) {
			c->initial = 1;
			c->bookmarks = 2;   /* and the initial-events-end bookmark */
		} else if (!rv[0] || strcmp(rv, "0") == 0) {
			c->initial = 1;     /* "Get State and Start at Most Recent" */
		}
		if (!refl->synced && (c->initial || !kr_serve_history_find(s, ri, rv, &c->seq, &c->pos))) {
			respond_status(c, 503, "%s: the mirror has not synced yet", r->name);
			return;
		}
		c->watch_end = ts > 0 ? kr_port_now_ms() + (kr_ms_t)ts * 1000 : 0;
		if (rv[0] && rv_cmp(rv, s->res[ri].rv) == 1) {
			rv_wait(c, rv, 0);    /* newer than the mirror: it may get there soon */
			return;
		}
		if (!c->initial && strcmp(rv, s->res[ri].rv) != 0) {
			uint64_t seq;
			size_t pos;

			if (!kr_serve_history_find(s, ri, rv, &seq, &pos)) {
				/* As the kube-apiserver: a 200 stream whose one event is the 410. */
				chunked_head(c);
				c->state = KR_SC_WATCHING;
				char why[200];

				kr_snprintf(why, sizeof(why), "too old resource version: %s (%s)", rv,
					    s->res[ri].rv);
				drop_watcher(c, 410, why, 0);
				return;
			}
			c->seq = seq;
			c->pos = pos;
		} else {
			/* Initial events (if any) walk the store first; the ring waits here. */
			c->seq = s->seq_head;
			c->pos = s->ring_head;
		}
		watch_begin(c);
		return;
	}
	if (list_rv_ok(c, ri, rv))
		list_begin(c);
}

/* A watch whose start (c->seq, c->pos) is known: its head, then events as they come. */
static void watch_begin(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;

	track_start(c);
	chunked_head(c);
	c->state = KR_SC_WATCHING;
	c->bookmark_at = kr_port_now_ms() + s->opts.bookmark_ms;
	s->watches_started++;
	if (c->initial)
		c->cursor = 0;
	rearm_conn(c);
}

/* A list of c->res whose resourceVersion the mirror has reached: limit, continue, the head. */
static void list_begin(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	const struct kr_resource *r = &s->top->refl[c->res].res;
	const char *t = c->req.target;
	char fs[320], num[32];
	int ri = c->res;

	c->limit = 0;
	if (kr_http_server_param(t, "limit", num, sizeof(num)) > 0) {
		c->limit = kr_parse_num(num, 0, LONG_MAX);
		if (c->limit < 0) {
			respond_status(c, 400, "limit: not a number");
			return;
		}
	}
	c->cursor = 0;
	if (kr_http_server_param(t, "continue", fs, sizeof(fs)) > 0) {
		char *end;
		long long at = kr_strtoll(fs, &end, 10);

		if (*end != '.' || at < 0 || (unsigned long long)at >= s->store->max_entries) {
			respond_status(c, 400, "continue: not a token from this server");
			return;
		}
		if (strcmp(end + 1, s->res[ri].rv) != 0) {
			respond_status(c, 410, "The provided continue parameter is too old to display a "
				       "consistent list result. You can start a new list without the "
				       "continue parameter.");
			return;
		}
		c->cursor = (uint32_t)at;
	}
	{
		char head[1024], gv[320];

		gv_of(r, gv, sizeof(gv));
		chunked_head(c);
		kr_snprintf(head, sizeof(head), "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"items\":[",
			    r->kind, gv);
		put_text_chunk(c, head);
		c->first = 1;
		c->sent = 0;
		c->state = KR_SC_LISTING;
	}
}

/* Splits path into at most max segments (in place). Returns the count, or -1. */
static int split(char *path, char **seg, int max)
{
	int n = 0;
	char *p = path;

	if (*p != '/')
		return -1;
	while (*p) {
		while (*p == '/')
			*p++ = '\0';
		if (!*p)
			break;
		if (n == max)
			return -1;
		seg[n++] = p;
		while (*p && *p != '/')
			p++;
	}
	return n;
}

/* A file that cannot be read: said once, not at every look (its sum, until it can be). */
#define SUM_UNREADABLE 0xffffffffu

/*
 * Reads the token file (rules 0) or the access file (rules 1) and, when its
 * bytes changed, parses it into s->next and only then puts it in use. Returns
 * 1 replaced, 0 unchanged (or a failure already said), or a KR_E code with the
 * reason in err: the file in use stays.
 */
static int identity_file_load(struct kr_serve *s, int rules, char *err, size_t errlen)
{
	const char *path = rules ? s->opts.access_file : s->opts.token_file;
	uint32_t *sum = rules ? &s->rules_sum : &s->tokens_sum;
	int have = rules ? s->have_rules : s->tokens.n > 0;
	long n = kr_port_read_file(path, s->file_raw, sizeof(s->file_raw));
	uint32_t now_sum;
	int r;

	if (n < 0) {
		if (have && *sum == SUM_UNREADABLE)
			return 0;
		*sum = SUM_UNREADABLE;
		kr_snprintf(err, errlen, "%s", n == KR_ETOOBIG ? "larger than KR_SERVE_ACCESS_BYTES"
							  : kr_strerror((int)n));
		return (int)n;
	}
	now_sum = kr_state_crc32(0, s->file_raw, (size_t)n);
	if (have && now_sum == *sum)
		return 0;
	*sum = now_sum;                /* a bad file is said once, not at every look */
	r = rules ? kr_rules_parse(&s->next.rules, s->file_raw, (size_t)n, err, errlen)
		  : kr_tokens_parse(&s->next.tokens, s->file_raw, (size_t)n, err, errlen);
	kr_port_zero(s->file_raw, (size_t)n);
	if (r == 0 && rules) {
		memcpy(&s->rules, &s->next.rules, sizeof(s->rules));
		s->have_rules = 1;
	} else if (r == 0) {
		memcpy(&s->tokens, &s->next.tokens, sizeof(s->tokens));
	}
	kr_port_zero(&s->next, sizeof(s->next));  /* tokens, parsed whole or in part */
	return r == 0 ? 1 : r;
}

/*
 * After the token or access file changed: every open watch is asked again what
 * its request was asked, and one its identity may no longer make ends now, with
 * the ERROR event of the Status the request would get (401: its user is no
 * longer in the token file; 403: the access file no longer lets it read what it
 * watches). A token replaced by another of the same user is a rotation: that
 * user's watches go on (ending them would make every downstream list again).
 */
static void revoke(struct kr_serve *s)
{
	int i;

	for (i = 0; i < s->nconns; i++) {
		struct kr_serve_conn *c = &s->conns[i];
		const struct kr_resource *r;
		const char *ns = c->ns[0] ? c->ns : NULL;
		char msg[512];
		int code = 0;

		if (c->state != KR_SC_WATCHING)
			continue;
		r = &s->top->refl[c->res].res;
		if (s->need_token && !c->user[0]) {  /* by token: c->req still holds it */
			const char *who = kr_tokens_user(&s->tokens, c->req.auth + 7, strlen(c->req.auth + 7));

			if (who)
				kr_snprintf(c->who, sizeof(c->who), "%s", who);
			else if (!kr_tokens_have_user(&s->tokens, c->who))
				code = 401;
		}
		if (code == 0 && !allowed(s, c, r, ns)) {
			code = 403;
			s->forbidden++;
		}
		if (code == 0)
			continue;
		kr_log(KR_LOG_INFO, "listen: a watch of %s by \"%s\" ended (%d): %s", r->name, c->who, code,
		       code == 401 ? "its user is no longer in the token file"
				   : "the access file no longer allows it");
		if (c->big) {
			conn_close(c);         /* in the middle of an object: the close ends it */
			continue;
		}
		if (code == 401)
			kr_snprintf(msg, sizeof(msg), "Unauthorized");
		else
			forbidden_text(msg, sizeof(msg), c->who, "watch", r, ns, NULL);
		drop_watcher(c, code, msg, 0);
		c->src.want |= KR_POLL_OUT;
	}
}

/*
 * At most every FILES_RECHECK_MS (at an accept, a request, and the tick while
 * watches are open when there are identity files): new TLS files are used for
 * the connections after, a new token or access file for the requests after and
 * the watches open (revoke). A file that does not read or parse is said once,
 * in words, and the one in use stays.
 */
static void files_recheck(struct kr_serve *s)
{
	kr_ms_t now = kr_port_now_ms();
	int changed = 0, i;

	if (now - s->files_checked < FILES_RECHECK_MS)
		return;
	s->files_checked = now;
#if KR_WITH_LISTEN_TLS
	if (s->tls_on)
		tls_recheck(s);
#endif
	for (i = 0; i < 2; i++) {
		const char *path = i ? s->opts.access_file : s->opts.token_file;
		char why[192];
		int r;

		if (!path)
			continue;
		r = identity_file_load(s, i, why, sizeof(why));
		if (r < 0)
			kr_log(KR_LOG_WARN, "listen: keeping the %s in use: %s: %s", i ? "access rules" : "identities",
			       path, why);
		else if (r > 0)
			kr_log(KR_LOG_INFO, "listen: %s changed: the requests after and the watches open follow it",
			       path);
		changed |= r > 0;
	}
	if (changed)
		revoke(s);
}

/* Sets c->who to the request's identity. 0 when it has none that is accepted. */
static int authorized(struct kr_serve *s, struct kr_serve_conn *c)
{
	const char *a = c->req.auth, *who;

	kr_snprintf(c->who, sizeof(c->who), "%s", c->user);
	if (!s->need_auth || c->user[0])
		return 1;              /* no credentials asked for, or a verified client certificate */
	if (!s->need_token || !c->req.has_auth || strncmp(a, "Bearer ", 7) != 0)
		return 0;
	a += 7;
	who = kr_tokens_user(&s->tokens, a, strlen(a));
	if (!who)
		return 0;
	kr_snprintf(c->who, sizeof(c->who), "%s", who);
	return 1;
}

static void route(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	char path[KR_SERVE_TARGET_MAX];
	char *seg[8];
	int n, verbose;

	s->requests++;
	files_recheck(s);
	/* A reader that stops does not keep its slot (the kube-apiserver's 60 s, by default). */
	c->deadline = kr_port_now_ms() + 2 * (kr_ms_t)s->opts.idle_ms;
	c->keep_alive = c->req.keep_alive;
	c->head_only = c->req.method == KR_HM_HEAD;
	c->chunked = 0;
	/* health_only serves no data: a probe is let in without the token it cannot send. */
	if (!s->opts.health_only && !authorized(s, c)) {
		respond_status(c, 401, "Unauthorized");
		return;
	}
	{
		char v[8];

		verbose = kr_http_server_param(c->req.target, "verbose", v, sizeof(v)) != KR_ENOENT;
	}
	if (kr_http_server_path(c->req.target, path, sizeof(path)) < 0) {
		respond_status(c, 400, "the request path is badly encoded");
		return;
	}
	if (c->req.method == KR_HM_OTHER) {
		respond_status(c, 405, "the server does not allow this method on the requested "
			       "resource: kreflect serves a read-only mirror");
		return;
	}
	if (c->req.has_body) {
		respond_status(c, 400, "a GET request has no body");
		return;
	}
	if (strcmp(path, "/healthz") == 0 && s->opts.healthz_ready) {
		serve_readyz(c, verbose);
		return;
	}
	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0) {
		if (verbose) {
			const char *b = strcmp(path, "/healthz") == 0 ? "[+]ping ok\nhealthz check passed\n"
								  : "[+]ping ok\nlivez check passed\n";

			respond(c, 200, "text/plain; charset=utf-8", b, strlen(b), NULL);
		} else {
			respond(c, 200, "text/plain; charset=utf-8", "ok", 2, NULL);
		}
		return;
	}
	if (strcmp(path, "/readyz") == 0) {
		serve_readyz(c, verbose);
		return;
	}
	if (s->opts.health_only) {
		respond_status(c, 404, "the server could not find the requested resource: this "
			       "endpoint serves /healthz, /livez and /readyz only");
		return;
	}
	if (strcmp(path, "/metrics") == 0) {
		serve_metrics(c);
		return;
	}
	if (strcmp(path, "/version") == 0) {
		serve_version(c);
		return;
	}
	n = split(path, seg, 8);
	if (n >= 1 && strcmp(seg[0], "api") == 0) {
		if (n == 1) {
			const char *b = "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],"
					"\"serverAddressByClientCIDRs\":[{\"clientCIDR\":\"0.0.0.0/0\","
					"\"serverAddress\":\"\"}]}";

			respond(c, 200, "application/json", b, strlen(b), NULL);
			return;
		}
		if (n == 2 && strcmp(seg[1], "v1") == 0) {
			serve_resource_list(c, "", "v1");
			return;
		}
		if (strcmp(seg[1], "v1") == 0) {
			seg[0] = (char *)"";  /* the core group */
			goto resource;
		}
	} else if (n >= 1 && strcmp(seg[0], "apis") == 0) {
		if (n == 1) {
			serve_groups(c, NULL);
			return;
		}
		if (n == 2) {
			serve_groups(c, seg[1]);
			return;
		}
		if (n == 3) {
			serve_resource_list(c, seg[1], seg[2]);
			return;
		}
		memmove(seg, seg + 1, sizeof(seg[0]) * (size_t)(n - 1));
		n--;
		goto resource;
	}
	respond_status(c, 404, "the server could not find the requested resource");
	return;

resource:
	/* seg: group, version, [namespaces, NS,] plural [, name] */
	{
		const char *ns = NULL, *plural, *name = NULL;
		int ri, rest = n - 2;
		char **p = seg + 2;

		if (rest >= 3 && strcmp(p[0], "namespaces") == 0) {
			ns = p[1];
			p += 2;
			rest -= 2;
		}
		if (rest < 1 || rest > 2) {
			respond_status(c, 404, "the server could not find the requested resource");
			return;
		}
		plural = p[0];
		if (rest == 2)
			name = p[1];
		ri = find_resource(s, seg[0], seg[1], plural);
		if (ri < 0) {
			respond_status(c, 404, "the server could not find the requested resource");
			return;
		}
		serve_collection(c, ri, ns, name);
	}
}

/* --- connections ------------------------------------------------------------------------------ */

#if KR_WITH_LISTEN_TLS
/* Advances a TLS handshake. Returns 1 when a request may be read, 0 when not yet (or closed). */
static int handshake(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	char why[192];
	int r = kr_tls_handshake(&c->tls);

	if (r == 0) {
		c->src.want = c->tls.want;
		return 0;
	}
	if (r < 0) {
		/* A client that does not trust us says so in an alert: worth a line, not an error. */
		kr_tls_describe(&c->tls, why, sizeof(why));
		kr_log(KR_LOG_INFO, "listen: TLS handshake failed: %s", why);
		s->tls_failed++;
		conn_close(c);
		return 0;
	}
	r = kr_tls_peer_verified(&c->tls, c->user, sizeof(c->user));
	if (r < 0) {
		kr_log(KR_LOG_WARN, "listen: client certificate refused: %s",
		       mbedtls_ssl_get_peer_cert(&c->tls.ssl) && mbedtls_ssl_get_verify_result(&c->tls.ssl)
			       ? "not signed by --listen-client-ca-file (or expired)"
			       : "no common name, or one longer than 63 bytes");
		s->tls_failed++;
		conn_close(c);
		return 0;
	}
	s->tls_handshakes++;
	c->state = KR_SC_READING;
	c->src.want = KR_POLL_IN;
	if (c->tls_over) {
		/* The session past --listen-tls-sessions: a Status the client can read, then the close. */
		kr_log(KR_LOG_WARN, "listen: TLS connection refused: all %d --listen-tls-sessions "
		       "sessions are in use (answered 503)", s->tls_max);
		c->keep_alive = 0;
		c->head_only = 0;
		s->tls_refused++;
		s->refused++;
		respond_status(c, 503, "too many TLS sessions at once (--listen-tls-sessions %d)", s->tls_max);
		pump(c);
		return 0;
	}
	return 1;
}
#endif

static void on_conn(struct kr_loop *loop, struct kr_source *src, int got)
{
	struct kr_serve_conn *c = src->arg;
	char buf[4096];

	(void)loop;
#if KR_WITH_LISTEN_TLS
	if (c->state == KR_SC_HANDSHAKE && !handshake(c))
		return;
again:
#endif
	if (c->state == KR_SC_READING || (got & (KR_POLL_IN | KR_POLL_ERR))) {
		long n = conn_recv(c, buf, sizeof(buf));

		if (n == 0 || n == KR_IO_ERR) {
			conn_close(c);
			return;
		}
		if (n > 0 && c->state == KR_SC_READING) {
			size_t used = 0;
			int r = kr_http_server_feed(&c->req, buf, (size_t)n, &used);

			if (r < 0) {
				c->keep_alive = 0;
				c->head_only = 0;
				c->srv->requests++;
				respond_status(c, c->req.status, "%s", c->req.why);
			} else if (r > 0) {
				route(c);
				/* Pipelined bytes are not kept: the answer closes the connection. */
				if (used < (size_t)n)
					c->keep_alive = 0;
				if (c->state == KR_SC_READING)
					return;
			} else {
#if KR_WITH_LISTEN_TLS
				/* The rest of the head may be decrypted already: poll() would not say. */
				if (c->srv->tls_on && kr_tls_pending(&c->tls))
					goto again;
#endif
				return;
			}
		} else if (n > 0) {
			/* Bytes while answering or watching are a request that will not
			 * be read (pipelining): answer this one, then close. Not the
			 * request just routed above: that ended every keep-alive. */
			c->keep_alive = 0;
		}
	}
	pump(c);
	rearm_conn(c);
}

static void refuse(struct kr_serve *s, int fd)
{
	static const char body[] =
		"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
		"\"message\":\"too many local connections (--listen-max-conns)\",\"reason\":"
		"\"ServiceUnavailable\",\"code\":503}";
	char head[192];
	int hl = kr_snprintf(head, sizeof(head), "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
			     "application/json\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
			     sizeof(body) - 1);

	/* Best effort into an empty socket buffer: it never blocks. */
	kr_port_send(fd, head, (size_t)hl);
	kr_port_send(fd, body, sizeof(body) - 1);
	kr_port_close(fd);
	s->refused++;
	count_status(s, 503);
}

static void on_listener(struct kr_loop *loop, struct kr_source *src, int got)
{
	struct kr_serve *s = src->arg;
	int i, accepted = 0;

	(void)got;
	while (accepted < 16) {
		int fd = kr_port_accept(s->listener.fd);

		if (fd < 0)
			break;
		accepted++;
		files_recheck(s);
#if KR_WITH_LISTEN_TLS
		if (s->tls_on) {
			/* One session more is kept to say 503 in a Status; past it, a close. */
			if (s->tls_sessions > s->tls_max) {
				tls_refuse(s, fd, "all --listen-tls-sessions sessions are in use");
				continue;
			}
		}
#endif
		/* The lowest free slot, or the first never taken: slots are touched
		 * only when a connection takes one, so idle ones cost no memory. */
		for (i = 0; i < s->used_hi; i++)
			if (s->conns[i].state == KR_SC_FREE)
				break;
		if (i == s->used_hi && s->used_hi < s->nconns)
			s->used_hi++;
		if (i == s->used_hi) {
#if KR_WITH_LISTEN_TLS
			if (s->tls_on) {       /* plain bytes would mean nothing to a TLS client */
				tls_refuse(s, fd, "all --listen-max-conns connections are in use");
				continue;
			}
#endif
			refuse(s, fd);
			continue;
		}
		{
			struct kr_serve_conn *c = &s->conns[i];

			memset(&c->src, 0, sizeof(c->src));
			c->srv = s;
			c->src.fd = fd;
			c->src.want = KR_POLL_IN;
			c->src.ready = on_conn;
			c->src.arg = c;
			c->state = KR_SC_READING;
			c->user[0] = '\0';
#if KR_WITH_LISTEN_TLS
			if (s->tls_on) {
				if (kr_tls_accept(&c->tls, &s->tls[s->tls_cur], fd) != 0) {
					kr_tls_free(&c->tls);
					c->state = KR_SC_FREE;
					tls_refuse(s, fd, "out of TLS memory (KR_TLS_HEAP_SIZE)");
					continue;
				}
				c->tls_slot = s->tls_cur;
				s->tls_users[c->tls_slot]++;
				c->tls_over = s->tls_sessions++ == s->tls_max;
				c->state = KR_SC_HANDSHAKE;
			}
#endif
			c->out_len = c->out_off = 0;
			c->big = 0;
			c->watch_end = 0;
			kr_http_server_init(&c->req);
			c->deadline = kr_port_now_ms() + s->opts.idle_ms;  /* the head's deadline */
			if (kr_loop_add(loop, &c->src) != 0) {
#if KR_WITH_LISTEN_TLS
				if (s->tls_on) {
					kr_tls_free(&c->tls);
					s->tls_sessions--;
					s->tls_users[c->tls_slot]--;
				}
#endif
				kr_port_close(fd);
				c->state = KR_SC_FREE;
				s->refused++;
				continue;
			}
			s->accepted++;
			rearm_conn(c);
		}
	}
}

/* --- timers: bookmarks, watch ends, idle request heads ---------------------------------------- */

static void on_tick(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_serve *s = t->arg;
	kr_ms_t now = kr_port_now_ms();
	int i;

	(void)loop;
	files_recheck(s);
	for (i = 0; i < s->used_hi; i++) {
		struct kr_serve_conn *c = &s->conns[i];

		if ((c->state == KR_SC_READING || c->state == KR_SC_WRITING ||
		     c->state == KR_SC_LISTING || c->state == KR_SC_HANDSHAKE) &&
		    c->deadline && now >= c->deadline) {
			conn_close(c);         /* no request head, or its answer not read, in time */
		} else if (c->state == KR_SC_WAITING && now >= c->deadline) {
			pump(c);               /* the mirror did not reach the version in time: 504 */
		} else if (c->state == KR_SC_WATCHING &&
			   ((c->bookmarks && now >= c->bookmark_at) ||
			    (c->watch_end && now >= c->watch_end))) {
			pump(c);
		}
	}
	rearm(s);
}

/* When c next needs the tick: its request head's or answer's deadline, its next
 * bookmark or the end of its watch; 0 for none. */
static kr_ms_t conn_deadline(const struct kr_serve_conn *c)
{
	kr_ms_t d = 0;

	if (c->state == KR_SC_READING || c->state == KR_SC_WRITING ||
	    c->state == KR_SC_LISTING || c->state == KR_SC_HANDSHAKE || c->state == KR_SC_WAITING)
		d = c->deadline;
	else if (c->state == KR_SC_WATCHING) {
		if (c->bookmarks)
			d = c->bookmark_at;
		if (c->watch_end && (!d || c->watch_end < d))
			d = c->watch_end;
		if (c->srv->opts.token_file || c->srv->opts.access_file) {
			kr_ms_t f = c->srv->files_checked + FILES_RECHECK_MS;  /* revoke() */

			if (!d || f < d)
				d = f;
		}
	}
	return d;
}

/* The tick at the nearest deadline of all: a scan, so only at start and from the tick. */
static void rearm(struct kr_serve *s)
{
	kr_ms_t next = 0;
	int i;

	for (i = 0; i < s->used_hi; i++) {
		kr_ms_t d = conn_deadline(&s->conns[i]);

		if (d && (!next || d < next))
			next = d;
	}
	if (next)
		kr_loop_timer_at(s->loop, &s->tick, next);
	else
		kr_loop_timer_cancel(s->loop, &s->tick);
}

/* After c's deadline moved: the tick comes earlier if c needs it earlier. A deadline
 * that moved later leaves the tick where it is; it comes early once, finds nothing
 * due and rearms from all. One step per connection, so a change told to N watchers
 * costs N steps here, not N scans of N. */
static void rearm_conn(struct kr_serve_conn *c)
{
	struct kr_serve *s = c->srv;
	kr_ms_t d = conn_deadline(c);

	if (d && (!s->tick.armed || d < s->tick.deadline))
		kr_loop_timer_at(s->loop, &s->tick, d);
}

/* --- set-up ------------------------------------------------------------------------------------- */

int kr_serve_parse_listen(const char *spec, struct kr_addr *addr, int *loopback, char *path,
			  size_t pathlen)
{
	const char *colon, *host = spec;
	char h[64];
	size_t hl;
	char *end;
	long long port;

	if (strncmp(spec, "unix:", 5) == 0) {
		if (spec[5] != '/' || strlen(spec + 5) >= pathlen)
			return KR_EINVAL;
		kr_snprintf(path, pathlen, "%s", spec + 5);
		*loopback = 1;
		return 1;
	}
	if (*spec == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':')
			return KR_EINVAL;
		host = spec + 1;
		hl = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(spec, ':');
		if (!colon || memchr(spec, ':', (size_t)(colon - spec)))
			return KR_EINVAL;
		hl = (size_t)(colon - spec);
	}
	if (hl == 0 || hl >= sizeof(h))
		return KR_EINVAL;
	memcpy(h, host, hl);
	h[hl] = '\0';
	port = kr_strtoll(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535)
		return KR_EINVAL;
	if (kr_port_parse_ip(h, (uint16_t)port, addr) != 0)
		return KR_EINVAL;
	if (addr->family == 4)
		*loopback = addr->ip[0] == 127;
	else
		*loopback = memcmp(addr->ip, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0;
	return 0;
}

int kr_serve_init(struct kr_serve *s, struct kr_loop *loop, struct kr_reflect *top,
		  struct kr_store *store, const struct kr_serve_opts *opts,
		  struct kr_serve_conn *conns, char *err, size_t errlen)
{
	struct kr_addr addr;
	char path[108];
	int loopback = 0, kind, fd;

	kr_port_zero(s, sizeof(*s));  /* its history and connections: only pages already written */
	s->loop = loop;
	s->top = top;
	s->store = store;
	s->opts = *opts;
	s->conns = conns;
	s->nconns = opts->max_conns > 0 && opts->max_conns < KR_SERVE_MAX_CONNS ? opts->max_conns
									       : KR_SERVE_MAX_CONNS;
	if (s->opts.ready_silence_ms <= 0)
		s->opts.ready_silence_ms = 180000;
	if (s->opts.bookmark_ms <= 0)
		s->opts.bookmark_ms = 60000;
	if (s->opts.idle_ms <= 0)
		s->opts.idle_ms = 30000;
	kind = kr_serve_parse_listen(opts->listen, &addr, &loopback, path, sizeof(path));
	if (kind < 0) {
		kr_snprintf(err, errlen, "unable to listen on %s: not 127.0.0.1:PORT, [::1]:PORT, "
			    "unix:/PATH or IP:PORT", opts->listen);
		return KR_EINVAL;
	}
	if (opts->token_file) {
		char why[192];

		if (identity_file_load(s, 0, why, sizeof(why)) < 0) {
			kr_snprintf(err, errlen, "unable to read the listen token file %s: %s", opts->token_file, why);
			return KR_EAUTH;
		}
		s->need_token = 1;
	}
	if (opts->access_file) {
		char why[192];

		if (identity_file_load(s, 1, why, sizeof(why)) < 0) {
			kr_snprintf(err, errlen, "unable to read the listen access file %s: %s", opts->access_file, why);
			return KR_EINVAL;
		}
		if (!opts->token_file && !opts->client_ca_file) {
			kr_snprintf(err, errlen, "--listen-access-file names identities: it needs "
				    "--listen-token-file or --listen-client-ca-file");
			return KR_EINVAL;
		}
	}
	s->need_auth = s->need_token || opts->client_ca_file;
	if (!loopback && !s->need_auth && !opts->health_only) {
		kr_snprintf(err, errlen, "unable to listen on %s: not a loopback address, so "
			    "--listen-token-file or --listen-client-ca-file (or --listen-health-only) "
			    "is required", opts->listen);
		return KR_EINVAL;
	}
	if ((opts->cert_file != NULL) != (opts->key_file != NULL) ||
	    (opts->client_ca_file && !opts->cert_file)) {
		kr_snprintf(err, errlen, "TLS on %s needs --listen-cert-file and --listen-key-file "
			    "(and --listen-client-ca-file only with them)", opts->listen);
		return KR_EINVAL;
	}
	if (!loopback && !opts->cert_file && !opts->insecure && !opts->health_only) {
		kr_snprintf(err, errlen, "unable to listen on %s: not a loopback address, so TLS "
			    "(--listen-cert-file, --listen-key-file) or an explicit --listen-insecure "
			    "is required", opts->listen);
		return KR_EINVAL;
	}
	if (opts->cert_file && kind == 1) {
		kr_snprintf(err, errlen, "TLS on a unix socket (%s) is not supported", opts->listen);
		return KR_EINVAL;
	}
	if (opts->cert_file) {
#if KR_WITH_LISTEN_TLS
		char why[256];
		int i;

		for (i = 0; i < 2; i++)
			kr_tls_ctx_init(&s->tls[i]);
		if (tls_load(s, 0, 1, why, sizeof(why)) < 0) {
			kr_snprintf(err, errlen, "TLS on %s: %s", opts->listen, why);
			return KR_EINVAL;
		}
		s->tls_on = 1;
		s->tls_max = opts->tls_sessions > 0 && opts->tls_sessions < KR_SERVE_TLS_CONNS
				     ? opts->tls_sessions : KR_SERVE_TLS_CONNS;
#else
		kr_snprintf(err, errlen, "--listen-cert-file: TLS on --listen is not built in");
		return KR_ENOTSUP;
#endif
	}
	if (kind == 1) {
		fd = kr_port_unix_listen(path, 0600);
		s->unix_socket = 1;
		kr_snprintf(s->where, sizeof(s->where), "%s", path);
	} else {
		fd = kr_port_tcp_listen(&addr);
		kr_port_addr_format(&addr, s->where, sizeof(s->where));
	}
	if (fd < 0) {
		/* KR_EINVAL from the unix socket only: the TCP one's failures are KR_IO_ERR (-1 too). */
		int not_socket = kind == 1 && fd == KR_EINVAL;

		kr_snprintf(err, errlen, "unable to listen on %s: %s", opts->listen,
			    not_socket ? "something other than a socket is at that path" : kr_port_last_error());
		return not_socket ? KR_EINVAL : KR_EIO;
	}
	s->listener.fd = fd;
	s->listener.want = KR_POLL_IN;
	s->listener.ready = on_listener;
	s->listener.arg = s;
	s->tick.fire = on_tick;
	s->tick.arg = s;
	if (kr_loop_add(loop, &s->listener) != 0) {
		kr_port_close(fd);
		kr_snprintf(err, errlen, "unable to listen on %s: the loop is full", opts->listen);
		return KR_ENOSPC;
	}
	s->started = kr_port_now_ms();
	s->files_checked = s->started;
	return 0;
}

void kr_serve_close(struct kr_serve *s)
{
	int i;

	for (i = 0; i < s->used_hi; i++)
		conn_close(&s->conns[i]);
	if (s->listener.fd >= 0) {
		kr_loop_remove(s->loop, &s->listener);
		kr_port_close(s->listener.fd);
		s->listener.fd = -1;
		if (s->unix_socket)
			kr_port_fs_unlink(s->where);
	}
	kr_loop_timer_cancel(s->loop, &s->tick);
#if KR_WITH_LISTEN_TLS
	if (s->tls_on) {
		kr_tls_ctx_free(&s->tls[0]);
		kr_tls_ctx_free(&s->tls[1]);
		s->tls_on = 0;
	}
#endif
}
