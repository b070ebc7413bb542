/*
 * The simulated kube-apiserver: HTTP/1.1 over the simulated sockets, one
 * request at a time per connection (keep-alive), with the semantics of
 * tests/apiserver (kstore.py, apiserver.py) and src/README.md "The wire
 * format":
 *
 *   LIST   resourceVersion "" (latest), "0" (latest; limit ignored if the
 *          setting says so), N without limit (NotOlderThan: latest), N with
 *          limit (Exact: a snapshot at N, 410 once compacted); limit and
 *          continue (base64url {"v","rv","start"} tokens, every page a
 *          snapshot at the first page's rv, 410 with the "inconsistent
 *          continue" Status once compacted); typed lists carry no kind or
 *          apiVersion per item; Content-Length or chunked bodies.
 *   WATCH  from N: the history after N (410 ERROR event if compacted), then
 *          live events; sendInitialEvents=true: ADDED for the current
 *          objects and the k8s.io/initial-events-end bookmark; "" or "0"
 *          without it: defaulted to watch-list (WatchList gate on) or
 *          synthetic ADDED (gate off, 422 for sendInitialEvents); periodic
 *          and pre-timeout bookmarks; a clean end at timeoutSeconds; a
 *          watcher behind the compaction point is ended.
 *   Selectors move objects into and out of a watch as ADDED and DELETED.
 *
 * Responses are produced lazily as the link has room, in pieces (an item,
 * an event) gathered into HTTP chunks of sizes the fault plan chooses, so a
 * body of any size costs one piece of memory. A fault plan per request
 * (chaos.c) can answer with a status, cut the response after K bytes (reset
 * or FIN), stall the server or freeze the link, or end a watch with an
 * ERROR event, garbage, a bad chunk or a clean end after N events.
 */
#include "sim.h"
#include "codec.h"
#include "kreflect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PIECE_MAX (KR_SIM_OBJECT_MAX + 8192)  /* one or more items or events, enveloped */
#define CHUNK_MIN 16                          /* smallest chunk but a body's last */
#define FRAMED_MAX (PIECE_MAX * 2 + 64)       /* the piece in chunks of CHUNK_MIN bytes or more */
#define HEAD_MAX 1024
#define PARAMS 16
#define VALUE_MAX 600
#define TOKEN_MAX 512

enum { RK_NONE, RK_STATUS, RK_LIST, RK_WATCH };
enum { REQ_LIST, REQ_WATCH, REQ_WATCHLIST };

struct conn {
	int active;
	int nreq;
	int busy;                      /* a response is in progress */
	kr_ms_t idle_since;
	/* the response */
	int kind;
	int req_kind;
	int chunked;
	int keep;
	struct kr_sim_fault f;
	uint64_t base;                 /* socket offset where the response started */
	kr_ms_t paused_until;
	int stalled, frozen, ev_fault_done, broken;
	int64_t ra_date;               /* the Retry-After date the head carried, 0 if none */
	int ra_sent;                   /* the head carried a Retry-After (seconds or a date) */
	/* a status response: its bytes */
	char status_buf[2048];
	size_t status_len;
	/* list */
	int type;
	struct kr_sim_filter flt;
	struct kr_sim_ver snap[KR_SIM_SLOTS];
	uint64_t snap_rv;
	int items[KR_SIM_SLOTS];
	int nitems, next_item;
	int list_stage;
	char cont[TOKEN_MAX];
	int remaining;
	uint64_t content_length;
	/* watch */
	uint64_t cursor;
	kr_ms_t start, deadline, last_bookmark;
	int bookmarks, pre_sent, events;
	int initial[KR_SIM_SLOTS];
	struct kr_sim_ver initial_ver[KR_SIM_SLOTS];  /* the state when the watch began */
	int ninitial, next_initial;
	int iee_pending;
	kr_ms_t iee_at;
	int too_old;                   /* answer with the 410 ERROR event, then end */
};

struct request {
	char path[VALUE_MAX];
	int nparams;
	char key[PARAMS][32];
	char value[PARAMS][VALUE_MAX];
};

static struct conn conns[KR_SIM_SOCKETS];
static struct kr_sim_server_settings settings;
static char piece[PIECE_MAX];
static char framed[FRAMED_MAX];
static char objbuf[KR_SIM_OBJECT_MAX];
static struct request req_scratch;

static const char msg_list_expired[] = "The resourceVersion for the provided list is too old.";
static const char msg_continue_inconsistent[] =
	"The provided continue parameter is too old to display a consistent list result. You can "
	"start a new list without the continue parameter, or use the continue token in this response "
	"to retrieve the remainder of the results. Continuing with the provided token results in an "
	"inconsistent list - objects that were created, modified, or deleted between the time the "
	"first chunk was returned and now may show up in the list.";
static const char msg_no_watch_list[] =
	"ListOptions.meta.k8s.io \\\"\\\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents "
	"is forbidden for watch unless the WatchList feature gate is enabled";

const struct kr_sim_server_settings *kr_sim_server(void)
{
	return &settings;
}

void kr_sim_server_settings_set(const struct kr_sim_server_settings *st)
{
	settings = *st;
}

void kr_sim_server_reset(void)
{
	memset(conns, 0, sizeof(conns));
	memset(&settings, 0, sizeof(settings));
	settings.watch_list = 1;
	settings.bookmark_ms = 60000;
	settings.pretimeout_bookmark = 1;
	settings.rv0_ignores_limit = 1;
	settings.latency_min_ms = 1;
	settings.latency_max_ms = 20;
}

void kr_sim_server_accept(int s)
{
	memset(&conns[s], 0, sizeof(conns[s]));
	conns[s].active = 1;
	conns[s].idle_since = kr_port_now_ms();
}

void kr_sim_server_gone(int s)
{
	conns[s].active = 0;
	conns[s].busy = 0;
}

/* --- writing ------------------------------------------------------------------------------- */

/* The server's side ends: the response (if any) is abandoned. */
static void hang_up(int s, int reset)
{
	kr_sim_sock_close(s, reset);
	conns[s].active = 0;
	conns[s].busy = 0;
}

/*
 * Response bytes, through the fault plan's byte budget: a cut after K bytes
 * writes exactly K and then resets or closes. Returns 0, or -1 when the
 * connection is gone.
 */
static int emit(int s, const char *data, size_t len)
{
	struct conn *c = &conns[s];
	uint64_t sent = kr_sim_sock_written(s) - c->base;
	int64_t cut = c->f.reset_after >= 0 ? c->f.reset_after : c->f.eof_after;

	if (cut >= 0 && sent + len >= (uint64_t)cut) {
		size_t n = (uint64_t)cut > sent ? (size_t)((uint64_t)cut - sent) : 0;

		kr_sim_sock_write(s, data, n);
		kr_sim_trace("fd %d: fault: %s after %lld response bytes", 100 + s,
			     c->f.reset_after >= 0 ? "reset" : "close", (long long)cut);
		hang_up(s, c->f.reset_after >= 0);
		return -1;
	}
	kr_sim_sock_write(s, data, len);
	return 0;
}

/* Body bytes: raw, or in HTTP chunks no longer than the plan's chunk_max. */
static int body(int s, const char *data, size_t len)
{
	struct conn *c = &conns[s];
	size_t n = 0;

	if (!c->chunked)
		return emit(s, data, len);
	while (len > 0) {
		size_t take = len;
		int h;

		if (c->f.chunk_max > 0) {
			size_t lo = (size_t)c->f.chunk_max / 4 + 1;
			size_t lim = (size_t)kr_sim_range(lo < CHUNK_MIN ? CHUNK_MIN : (int64_t)lo, c->f.chunk_max);

			if (take > lim)
				take = lim;
		}
		if (n + take + 16 > sizeof(framed))
			break;
		h = snprintf(framed + n, sizeof(framed) - n, "%zx\r\n", take);
		n += (size_t)h;
		memcpy(framed + n, data, take);
		n += take;
		memcpy(framed + n, "\r\n", 2);
		n += 2;
		data += take;
		len -= take;
	}
	return emit(s, framed, n);
}

static const char *phrase(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 410: return "Gone";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Unknown";
	}
}

static void http_date(char *buf, size_t size, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* The response head. content_length < 0: chunked. */
static size_t head(char *buf, size_t size, int s, int code, long long content_length)
{
	struct conn *c = &conns[s];
	char date[64], ra[96] = "";
	int n;

	http_date(date, sizeof(date), kr_port_wall_seconds());
	c->ra_date = 0;
	c->ra_sent = c->f.retry_after >= 0 && (code == 429 || code == 503 || code == 504);
	if (c->ra_sent) {
		if (c->f.retry_after_date) {
			char when[64];

			/* One second more: the client's clock may already be inside the next second. */
			c->ra_date = kr_port_wall_seconds() + c->f.retry_after + 1;
			http_date(when, sizeof(when), c->ra_date);
			snprintf(ra, sizeof(ra), "Retry-After: %s\r\n", when);
		} else {
			snprintf(ra, sizeof(ra), "Retry-After: %d\r\n", c->f.retry_after);
		}
	}
	n = snprintf(buf, size,
		     "HTTP/1.1 %d %s\r\nAudit-Id: %08x-5a1d-4c0e-9d3b-%012llx\r\n"
		     "Cache-Control: no-cache, private\r\nContent-Type: application/json\r\n"
		     "Date: %s\r\n%s%s",
		     code, phrase(code), (unsigned)kr_sim_rand(), (unsigned long long)(kr_sim_rand() >> 16),
		     date, ra, c->keep ? "" : "Connection: close\r\n");
	if (content_length >= 0)
		n += snprintf(buf + n, size - (size_t)n, "Content-Length: %lld\r\n\r\n", content_length);
	else
		n += snprintf(buf + n, size - (size_t)n, "Transfer-Encoding: chunked\r\n\r\n");
	return (size_t)n;
}

/* --- Status responses ------------------------------------------------------------------------ */

struct status {
	int code;
	const char *reason;
	const char *message;
	const char *meta_continue;     /* metadata.continue, or NULL */
	int too_large;                 /* a ResourceVersionTooLarge cause */
	int retry_after;               /* details.retryAfterSeconds, -1 none */
};

static size_t status_json(char *buf, size_t size, const struct status *st)
{
	int n;

	n = snprintf(buf, size, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{");
	if (st->meta_continue)
		n += snprintf(buf + n, size - (size_t)n, "\"continue\":\"%s\"", st->meta_continue);
	n += snprintf(buf + n, size - (size_t)n, "},\"status\":\"Failure\",\"message\":\"%s\",\"reason\":\"%s\"",
		      st->message, st->reason);
	if (st->too_large || st->retry_after >= 0) {
		n += snprintf(buf + n, size - (size_t)n, ",\"details\":{");
		if (st->too_large)
			n += snprintf(buf + n, size - (size_t)n, "\"causes\":[{\"reason\":\"ResourceVersionTooLarge\","
				      "\"message\":\"Too large resource version\"}]%s", st->retry_after >= 0 ? "," : "");
		if (st->retry_after >= 0)
			n += snprintf(buf + n, size - (size_t)n, "\"retryAfterSeconds\":%d", st->retry_after);
		n += snprintf(buf + n, size - (size_t)n, "}");
	}
	n += snprintf(buf + n, size - (size_t)n, ",\"code\":%d}", st->code);
	return (size_t)n < size ? (size_t)n : size - 1;
}

static const char *default_reason(int code)
{
	switch (code) {
	case 400: return "BadRequest";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 410: return "Expired";
	case 422: return "Invalid";
	case 429: return "TooManyRequests";
	case 500: return "InternalError";
	case 503: return "ServiceUnavailable";
	case 504: return "Timeout";
	default: return "Unknown";
	}
}

static const char *default_message(int code)
{
	switch (code) {
	case 403: return "configmaps is forbidden: User \\\"system:serviceaccount:edge:kreflect\\\" cannot list resource";
	case 410: return msg_list_expired;
	case 429: return "Too many requests, please try again later.";
	case 500: return "Internal error occurred: injected fault";
	case 503: return "The server is currently unable to handle the request";
	case 504: return "Timeout: Too large resource version";
	default: return "the server rejected the request";
	}
}

/*
 * Does client-go's reflector (and so kreflect) have to wait before its next request after
 * this answer? (src/README.md "One ListAndWatch" and "Watch"): a list's 410 and TooLarge
 * are retried at once (RV ""), a watch-list's 5xx/4xx fall back to a LIST at once, except
 * 429/401/403 and anything with Retry-After; every failed watch waits (backoff, or
 * Retry-After).
 */
static int must_wait(int req_kind, int code, int retry_after, int too_large)
{
	if (code < 400)
		return 0;
	if (retry_after >= 0 && (code == 429 || code == 503))
		return 1;
	switch (req_kind) {
	case REQ_LIST:
		return code != 410 && !too_large;
	case REQ_WATCHLIST:
		return code == 429 || code == 401 || code == 403;
	default:
		return 1;
	}
}

/* Starts a Status response. 1 if kreflect must wait after it (a verdict was recorded). */
static int start_status(int s, const struct status *st0)
{
	struct conn *c = &conns[s];
	struct status st = *st0;
	char js[1400], what[96];
	size_t jl, hl;

	if (st.retry_after < 0 && c->f.retry_after >= 0 && (st.code == 429 || st.code == 503))
		st.retry_after = c->f.retry_after;
	jl = status_json(js, sizeof(js) - 1, &st);
	js[jl++] = '\n';
	c->kind = RK_STATUS;
	c->chunked = 0;
	hl = head(c->status_buf, sizeof(c->status_buf), s, st.code, (long long)jl);
	if (hl + jl > sizeof(c->status_buf))
		jl = sizeof(c->status_buf) - hl;
	memcpy(c->status_buf + hl, js, jl);
	c->status_len = hl + jl;
	kr_sim_trace("fd %d: answer %d %s", 100 + s, st.code, st.reason);
	if (must_wait(c->req_kind, st.code, st.retry_after, st.too_large)) {
		snprintf(what, sizeof(what), "%s answered %d %s", c->req_kind == REQ_LIST ? "list" :
			 c->req_kind == REQ_WATCH ? "watch" : "watch-list", st.code, st.reason);
		/* Retry-After is at least 1 s here, so the backoff's floor holds for it too. */
		kr_sim_sock_verdict(s, c->base, c->base + c->status_len, c->req_kind, c->ra_sent, what);
		/* A date read after it passed is a Retry-After of 0: kreflect may ask again at once. */
		if (c->ra_date && (st.code == 429 || st.code == 503))
			kr_sim_sock_verdict_date(s, c->ra_date);
		return 1;
	}
	return 0;
}

static void simple_status(int s, int code, const char *reason, const char *message)
{
	struct status st = { code, reason, message, NULL, 0, -1 };

	start_status(s, &st);
}

/*
 * A request the server rejects as malformed: kreflect should never send one
 * (an observation the driver turns into a failed property).
 */
static void client_error(int s, int code, const char *reason, const char *message)
{
	char what[200];

	snprintf(what, sizeof(what), "%d %s: %s", code, reason, message);
	kr_sim_sock_protocol_error(s, what);
	simple_status(s, code, reason, message);
}

/* --- requests -------------------------------------------------------------------------------- */

/* Percent-decodes src[0..n) into dst (size bytes). -1 if malformed or too long. */
static int unescape(char *dst, size_t size, const char *src, size_t n)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int ch = (unsigned char)src[i];

		if (ch == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return -1;
			hi = kr_hex_value((unsigned char)src[i + 1]);
			lo = kr_hex_value((unsigned char)src[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			ch = hi * 16 + lo;
			i += 2;
		} else if (ch == '+') {
			ch = ' ';
		}
		if (o + 1 >= size)
			return -1;
		dst[o++] = (char)ch;
	}
	dst[o] = '\0';
	return 0;
}

static int parse_target(const char *t, size_t n, struct request *rq)
{
	const char *q = memchr(t, '?', n), *end = t + n;

	memset(rq, 0, sizeof(*rq));
	if (unescape(rq->path, sizeof(rq->path), t, q ? (size_t)(q - t) : n) != 0)
		return -1;
	while (q && q < end) {
		const char *p = q + 1, *amp = memchr(p, '&', (size_t)(end - p)), *eq;
		const char *stop = amp ? amp : end;

		q = amp;
		if (p == stop)
			continue;
		if (rq->nparams == PARAMS)
			return -1;
		eq = memchr(p, '=', (size_t)(stop - p));
		if (unescape(rq->key[rq->nparams], sizeof(rq->key[0]), p, (size_t)((eq ? eq : stop) - p)) != 0)
			return -1;
		if (eq && unescape(rq->value[rq->nparams], sizeof(rq->value[0]), eq + 1,
				   (size_t)(stop - eq - 1)) != 0)
			return -1;
		rq->nparams++;
	}
	return 0;
}

static const char *param(const struct request *rq, const char *key)
{
	int i;

	for (i = 0; i < rq->nparams; i++)
		if (strcmp(rq->key[i], key) == 0)
			return rq->value[i];
	return NULL;
}

/* Go's strconv.ParseBool. -1 if not a boolean. */
static int go_bool(const char *v)
{
	static const char *const t[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const f[] = { "0", "f", "F", "FALSE", "false", "False" };
	size_t i;

	for (i = 0; i < 6; i++) {
		if (strcmp(v, t[i]) == 0)
			return 1;
		if (strcmp(v, f[i]) == 0)
			return 0;
	}
	return -1;
}

/* A decimal resourceVersion (> 0 unless zero_ok). */
static int parse_rv(const char *v, uint64_t *out, int zero_ok)
{
	char *e;
	unsigned long long n;

	if (!*v || *v == '-' || *v == '+' || *v == ' ')
		return -1;
	n = strtoull(v, &e, 10);
	if (*e || (!zero_ok && n == 0))
		return -1;
	*out = n;
	return 0;
}

/* The collection a path names. 0, or -1 (404). */
static int route(const char *path, int *type, int *ns)
{
	char ns_name[VALUE_MAX], plural[64];
	const char *p;
	int t, group_apps;

	if (strncmp(path, "/api/v1/", 8) == 0) {
		p = path + 8;
		group_apps = 0;
	} else if (strncmp(path, "/apis/apps/v1/", 14) == 0) {
		p = path + 14;
		group_apps = 1;
	} else {
		return -1;
	}
	*ns = -1;
	if (strncmp(p, "namespaces/", 11) == 0 && strchr(p + 11, '/')) {
		const char *slash = strchr(p + 11, '/');
		size_t len = (size_t)(slash - (p + 11));
		int i;

		if (len == 0 || len >= sizeof(ns_name))
			return -1;
		memcpy(ns_name, p + 11, len);
		ns_name[len] = '\0';
		*ns = -2;
		for (i = 0; i < KR_SIM_NAMESPACES_USED; i++)
			if (strcmp(ns_name, kr_sim_namespace(i)) == 0)
				*ns = i;
		p = slash + 1;
	}
	if (strlen(p) >= sizeof(plural) || strchr(p, '/'))
		return -1;
	snprintf(plural, sizeof(plural), "%s", p);
	for (t = 0; t < KR_SIM_NTYPES; t++) {
		if (strcmp(plural, kr_sim_type_plural(t)) != 0)
			continue;
		if ((t == KR_SIM_DEPLOYMENTS) != group_apps)
			return -1;
		if (!kr_sim_type_namespaced(t) && *ns != -1)
			return -1;
		*type = t;
		return 0;
	}
	return -1;
}

/* tier=x, tier==x, tier!=x; "" for none. 0, or -1 (400). */
static int parse_selector(const char *sel, struct kr_sim_filter *f)
{
	const char *v;
	int i;

	f->selop = KR_SIM_SEL_NONE;
	if (!sel || !*sel)
		return 0;
	if (strncmp(sel, "tier!=", 6) == 0) {
		f->selop = KR_SIM_SEL_NE;
		v = sel + 6;
	} else if (strncmp(sel, "tier==", 6) == 0) {
		f->selop = KR_SIM_SEL_EQ;
		v = sel + 6;
	} else if (strncmp(sel, "tier=", 5) == 0) {
		f->selop = KR_SIM_SEL_EQ;
		v = sel + 5;
	} else {
		return -1;
	}
	for (i = 0; i < KR_SIM_TIERS; i++)
		if (strcmp(v, kr_sim_tier(i)) == 0) {
			f->tier = i;
			return 0;
		}
	/* A value nobody has: an equality matches nothing, an inequality everything. */
	f->tier = KR_SIM_TIERS + 1;
	return 0;
}

/* --- continue tokens: base64url of {"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"} ------- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void encode_continue(char *out, size_t size, long long rv, const char *key)
{
	char raw[TOKEN_MAX];
	int n = snprintf(raw, sizeof(raw), "{\"v\":\"meta.k8s.io/v1\",\"rv\":%lld,\"start\":\"%s\\u0000\"}", rv, key);
	size_t i, o = 0;

	if (n < 0 || (size_t)n >= sizeof(raw))
		n = 0;
	for (i = 0; i < (size_t)n && o + 5 < size; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)raw[i] << 16;
		size_t left = (size_t)n - i;

		if (left > 1)
			v |= (uint32_t)(unsigned char)raw[i + 1] << 8;
		if (left > 2)
			v |= (unsigned char)raw[i + 2];
		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		if (left > 1)
			out[o++] = b64url[(v >> 6) & 63];
		if (left > 2)
			out[o++] = b64url[v & 63];
	}
	out[o] = '\0';
}

/* 0 with *rv and key, or -1 if the token is not one of ours. */
static int decode_continue(const char *tok, long long *rv, char *key, size_t keysize)
{
	char raw[TOKEN_MAX];
	size_t o = 0, i, n = strlen(tok);
	uint32_t acc = 0;
	int bits = 0;
	const char *p, *q;
	char *e;
	static const char head[] = "{\"v\":\"meta.k8s.io/v1\",\"rv\":";

	for (i = 0; i < n; i++) {
		const char *c = memchr(b64url, tok[i], 64);

		if (!c || !tok[i])
			return -1;
		acc = (acc << 6) | (uint32_t)(c - b64url);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o + 1 >= sizeof(raw))
				return -1;
			raw[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	raw[o] = '\0';
	if (strncmp(raw, head, sizeof(head) - 1) != 0)
		return -1;
	*rv = strtoll(raw + sizeof(head) - 1, &e, 10);
	if (e == raw + sizeof(head) - 1 || *rv == 0 || strncmp(e, ",\"start\":\"", 10) != 0)
		return -1;
	p = e + 10;
	q = strstr(p, "\\u0000\"}");
	if (!q || q == p || q[8] != '\0' || (size_t)(q - p) >= keysize)
		return -1;
	memcpy(key, p, (size_t)(q - p));
	key[q - p] = '\0';
	return 0;
}

/* --- LIST ------------------------------------------------------------------------------------- */

static void start_list(int s, const struct request *rq, int type, struct kr_sim_filter *flt)
{
	struct conn *c = &conns[s];
	const char *rv = param(rq, "resourceVersion"), *cont = param(rq, "continue");
	const char *lim = param(rq, "limit");
	const int *order = kr_sim_sorted(type);
	char start_key[128] = "";
	long long limit = 0;
	uint64_t want = 0;
	int i, pos = 0;

	if (!rv)
		rv = "";
	if (lim && *lim) {
		char *e;

		limit = strtoll(lim, &e, 10);
		if (*e) {
			client_error(s, 400, "BadRequest", "limit: invalid value");
			return;
		}
		if (limit < 0)
			limit = 0;
	}
	if (param(rq, "sendInitialEvents")) {
		client_error(s, 422, "Invalid", "ListOptions.meta.k8s.io \\\"\\\" is invalid: sendInitialEvents: "
			     "Forbidden: sendInitialEvents is forbidden for list");
		return;
	}
	if (cont && *cont) {
		long long tok_rv;

		if (strcmp(rv, "") != 0 && strcmp(rv, "0") != 0) {
			client_error(s, 400, "BadRequest", "specifying resource version is not allowed when using continue");
			return;
		}
		if (decode_continue(cont, &tok_rv, start_key, sizeof(start_key)) != 0) {
			client_error(s, 400, "BadRequest", "invalid continue token: continue key is not valid");
			return;
		}
		if (tok_rv == -1) {
			c->snap_rv = kr_sim_rv();
		} else if ((uint64_t)tok_rv < kr_sim_compacted_rv()) {
			struct status st = { 410, "Expired", msg_continue_inconsistent, NULL, 0, -1 };
			char fresh[TOKEN_MAX];

			encode_continue(fresh, sizeof(fresh), -1, start_key);
			st.meta_continue = fresh;
			start_status(s, &st);
			return;
		} else if ((uint64_t)tok_rv > kr_sim_rv()) {
			client_error(s, 400, "BadRequest", "invalid continue token: resourceVersion is in the future");
			return;
		} else {
			c->snap_rv = (uint64_t)tok_rv;
		}
	} else if (strcmp(rv, "") == 0) {
		c->snap_rv = kr_sim_rv();
	} else if (strcmp(rv, "0") == 0) {
		c->snap_rv = kr_sim_rv();
		if (settings.rv0_ignores_limit)
			limit = 0;
	} else if (parse_rv(rv, &want, 0) != 0) {
		client_error(s, 400, "BadRequest", "invalid resource version");
		return;
	} else if (want > kr_sim_rv()) {
		struct status st = { 504, "Timeout", "Timeout: Too large resource version", NULL, 1, 1 };

		/* Resource versions never go back here: kreflect asked for one it was never given. */
		kr_sim_sock_protocol_error(s, "a list at a resourceVersion newer than the server's");
		start_status(s, &st);
		return;
	} else if (limit > 0) {
		/* The legacy rule: a limit makes an RV an Exact match, served from etcd. */
		if (want < kr_sim_compacted_rv()) {
			simple_status(s, 410, "Expired", msg_list_expired);
			return;
		}
		c->snap_rv = want;
	} else {
		c->snap_rv = kr_sim_rv();
	}
	kr_sim_snapshot(type, c->snap_rv, c->snap);
	c->type = type;
	c->flt = *flt;
	c->nitems = 0;
	c->cont[0] = '\0';
	c->remaining = -1;
	if (start_key[0])
		while (pos < KR_SIM_SLOTS && strcmp(kr_sim_key(type, order[pos]), start_key) <= 0)
			pos++;
	for (; pos < KR_SIM_SLOTS; pos++) {
		int slot = order[pos];

		if (!kr_sim_match(flt, type, slot, &c->snap[slot]))
			continue;
		c->items[c->nitems++] = slot;
		if (limit && c->nitems >= limit) {
			pos++;
			break;
		}
	}
	/* More keys after the page (matching or not): a token, as etcd gives one. */
	if (limit && c->nitems >= limit) {
		int more = 0;

		for (i = pos; i < KR_SIM_SLOTS; i++)
			more += flt->ns < 0 || kr_sim_slot_ns(type, order[i]) == flt->ns;
		if (more) {
			encode_continue(c->cont, sizeof(c->cont), (long long)c->snap_rv,
					kr_sim_key(type, c->items[c->nitems - 1]));
			if (flt->selop == KR_SIM_SEL_NONE)
				c->remaining = more;
		}
	}
	c->kind = RK_LIST;
	c->chunked = settings.list_chunked;
	c->list_stage = 0;
	c->next_item = 0;
	kr_sim_trace("fd %d: list %s at %llu: %d items%s", 100 + s, kr_sim_type_plural(type),
		     (unsigned long long)c->snap_rv, c->nitems, c->cont[0] ? " and a continue token" : "");
}

static size_t list_prefix(char *buf, size_t size, const struct conn *c)
{
	int n = snprintf(buf, size, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%llu\"",
			 kr_sim_type_kind(c->type), kr_sim_type_api_version(c->type),
			 (unsigned long long)c->snap_rv);

	if (c->cont[0])
		n += snprintf(buf + n, size - (size_t)n, ",\"continue\":\"%s\"", c->cont);
	if (c->remaining >= 0)
		n += snprintf(buf + n, size - (size_t)n, ",\"remainingItemCount\":%d", c->remaining);
	n += snprintf(buf + n, size - (size_t)n, "},\"items\":[");
	return (size_t)n;
}

static size_t item_json(char *buf, size_t size, const struct conn *c, int i)
{
	int slot = c->items[i];

	return kr_sim_object_json(buf, size, c->type, slot, &c->snap[slot], KR_SIM_ITEM);
}

/* The body's length, for Content-Length: the pieces measured once before they are sent. */
static uint64_t list_length(const struct conn *c)
{
	uint64_t n = list_prefix(piece, sizeof(piece), c) + 3;   /* ...]}\n */
	int i;

	for (i = 0; i < c->nitems; i++)
		n += item_json(objbuf, sizeof(objbuf), c, i) + (i > 0);
	return n;
}

static void list_begin(int s)
{
	struct conn *c = &conns[s];
	char h[HEAD_MAX];
	size_t hl;

	if (c->chunked) {
		hl = head(h, sizeof(h), s, 200, -1);
	} else {
		c->content_length = list_length(c);
		hl = head(h, sizeof(h), s, 200, (long long)c->content_length);
	}
	emit(s, h, hl);
}

/*
 * The plan's fault in a list body, after ev_after items: a clean end of the
 * chunked body with the list unfinished, bytes that are not JSON, a chunk
 * size that is not hex, or a reset. Every one makes the list fail (client-go
 * backs off). Returns 1 if the response ended.
 */
static int list_fault(int s)
{
	struct conn *c = &conns[s];
	uint64_t at = kr_sim_sock_written(s);

	c->ev_fault_done = 1;
	switch (c->f.ev_fault) {
	case KR_SIM_EV_END:
		kr_sim_trace("fd %d: fault: list body ends after %d items", 100 + s, c->next_item);
		kr_sim_sock_verdict(s, at, at + 5, REQ_LIST, 0, "list body ended early");
		if (emit(s, "0\r\n\r\n", 5) == 0) {
			c->busy = 0;
			c->idle_since = kr_port_now_ms();
			if (!c->keep)
				hang_up(s, 0);
		}
		return 1;
	case KR_SIM_EV_GARBAGE:
		kr_sim_trace("fd %d: fault: list body not JSON after %d items", 100 + s, c->next_item);
		kr_sim_sock_verdict(s, at, at + 6, REQ_LIST, 0, "list body not JSON");
		emit(s, "11\r\n,this is not JSON\r\n", 23);
		c->broken = 1;
		return 1;
	case KR_SIM_EV_BAD_CHUNK:
		kr_sim_trace("fd %d: fault: list chunk size not hex after %d items", 100 + s, c->next_item);
		/* The parser judges a chunk-size line once it has the whole line. */
		kr_sim_sock_verdict(s, at, at + 4, REQ_LIST, 0, "list chunk size not hex");
		emit(s, "zz\r\n", 4);
		c->broken = 1;
		return 1;
	case KR_SIM_EV_RESET:
		kr_sim_trace("fd %d: fault: reset after %d list items", 100 + s, c->next_item);
		hang_up(s, 1);
		return 1;
	default:
		return 0;
	}
}

/* Produces the next part of a LIST body. 1 if it wrote, 0 if done or blocked. */
static int list_pump(int s)
{
	struct conn *c = &conns[s];
	size_t n = 0;

	/* Faults that need chunked framing apply only to chunked bodies. */
	if (!c->ev_fault_done && c->f.ev_fault != KR_SIM_EV_NONE && c->list_stage == 1 &&
	    c->next_item >= c->f.ev_after && (c->chunked || c->f.ev_fault == KR_SIM_EV_RESET))
		return list_fault(s);

	if (c->list_stage == 0) {
		n = list_prefix(piece, sizeof(piece), c);
		c->list_stage = 1;
	}
	while (c->list_stage == 1 && c->next_item < c->nitems) {
		size_t len;

		if (n + KR_SIM_OBJECT_MAX + 1 > sizeof(piece))
			break;
		if (c->next_item > 0)
			piece[n++] = ',';
		len = item_json(piece + n, sizeof(piece) - n, c, c->next_item);
		n += len;
		c->next_item++;
		if (n >= (size_t)c->f.merge_bytes || (!c->ev_fault_done && c->f.ev_fault != KR_SIM_EV_NONE &&
							 c->next_item >= c->f.ev_after))
			break;
	}
	if (c->list_stage == 1 && c->next_item == c->nitems && n + 3 <= sizeof(piece)) {
		memcpy(piece + n, "]}\n", 3);
		n += 3;
		c->list_stage = 2;
	}
	if (n && body(s, piece, n) != 0)
		return 1;
	if (c->list_stage == 2) {
		if (c->chunked && emit(s, "0\r\n\r\n", 5) != 0)
			return 1;
		c->busy = 0;
		c->idle_since = kr_port_now_ms();
		if (!c->keep)
			hang_up(s, 0);
	}
	return n > 0 || c->list_stage == 2;
}

/* --- WATCH ------------------------------------------------------------------------------------ */

static size_t bookmark_line(char *buf, size_t size, int type, uint64_t rv, int initial_end)
{
	return (size_t)snprintf(buf, size, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\","
				"\"metadata\":{\"resourceVersion\":\"%llu\"%s}}}\n",
				kr_sim_type_kind(type), kr_sim_type_api_version(type), (unsigned long long)rv,
				initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "");
}

static size_t event_line(char *buf, size_t size, const char *etype, int type, int slot,
			 const struct kr_sim_ver *v)
{
	int h = snprintf(buf, size, "{\"type\":\"%s\",\"object\":", etype);
	size_t len;

	if (h < 0 || (size_t)h >= size)
		return 0;
	len = kr_sim_object_json(buf + h, size - (size_t)h - 2, type, slot, v, KR_SIM_FULL);
	if (!len)
		return 0;
	memcpy(buf + h + len, "}\n", 2);
	return (size_t)h + len + 2;
}

static size_t error_line(char *buf, size_t size, int code, uint64_t cursor)
{
	char msg[160];
	struct status st = { code, default_reason(code), msg, NULL, code == 504, code == 504 || code == 429 ? 1 : -1 };
	int h = snprintf(buf, size, "{\"type\":\"ERROR\",\"object\":");
	size_t n;

	if (code == 410)
		snprintf(msg, sizeof(msg), "too old resource version: %llu (%llu)", (unsigned long long)cursor,
			 (unsigned long long)kr_sim_compacted_rv());
	else if (code == 500)
		snprintf(msg, sizeof(msg), "Internal error occurred: etcdserver: leader changed");
	else
		snprintf(msg, sizeof(msg), "%s", default_message(code));
	n = (size_t)h + status_json(buf + h, size - (size_t)h - 3, &st);
	memcpy(buf + n, "}\n", 2);
	return n + 2;
}

static void start_watch(int s, const struct request *rq, int type, struct kr_sim_filter *flt)
{
	struct conn *c = &conns[s];
	const char *rv = param(rq, "resourceVersion"), *rvm = param(rq, "resourceVersionMatch");
	const char *sie_s = param(rq, "sendInitialEvents"), *bm = param(rq, "allowWatchBookmarks");
	const char *to = param(rq, "timeoutSeconds");
	int sie = sie_s ? go_bool(sie_s) : -1, bookmarks = bm ? go_bool(bm) : 0;
	long long timeout = 0;
	kr_ms_t now = kr_port_now_ms();
	uint64_t want = 0;
	char h[HEAD_MAX];

	if (!rv)
		rv = "";
	if ((sie_s && sie < 0) || bookmarks < 0) {
		client_error(s, 400, "BadRequest", "invalid boolean");
		return;
	}
	if (to && *to) {
		char *e;

		timeout = strtoll(to, &e, 10);
		if (*e) {
			client_error(s, 400, "BadRequest", "timeoutSeconds: invalid value");
			return;
		}
	}
	/* SetListOptionsDefaults: with the gate on, a watch from "" or "0" is a watch-list. */
	if (settings.watch_list && sie < 0 && !rvm && (!*rv || strcmp(rv, "0") == 0)) {
		sie = 1;
		rvm = "NotOlderThan";
	}
	if (sie >= 0 && (!rvm || strcmp(rvm, "NotOlderThan") != 0)) {
		client_error(s, 422, "Invalid", "ListOptions.meta.k8s.io \\\"\\\" is invalid: resourceVersionMatch: "
			     "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
		return;
	}
	if (sie >= 0 && (!settings.watch_list || (sie == 1 && c->f.reject_watch_list))) {
		simple_status(s, 422, "Invalid", msg_no_watch_list);
		return;
	}
	if (rvm && sie < 0) {
		client_error(s, 422, "Invalid", "ListOptions.meta.k8s.io \\\"\\\" is invalid: resourceVersionMatch: "
			     "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
		return;
	}
	if (*rv && strcmp(rv, "0") != 0 && parse_rv(rv, &want, 1) != 0) {
		client_error(s, 400, "BadRequest", "invalid resource version");
		return;
	}
	memset(&c->initial, 0, sizeof(c->initial));
	c->ninitial = c->next_initial = 0;
	c->iee_pending = 0;
	c->too_old = 0;
	c->type = type;
	c->flt = *flt;
	c->cursor = kr_sim_rv();
	if (sie == 1 || (sie < 0 && (!*rv || strcmp(rv, "0") == 0))) {
		/* Initial events: every matching object now, in key order. */
		const int *order = kr_sim_sorted(type);
		int i;

		for (i = 0; i < KR_SIM_SLOTS; i++)
			if (kr_sim_match(flt, type, order[i], kr_sim_current(type, order[i]))) {
				c->initial_ver[c->ninitial] = *kr_sim_current(type, order[i]);
				c->initial[c->ninitial++] = order[i];
			}
		c->iee_pending = sie == 1 && bookmarks && !c->f.no_initial_end;
		c->iee_at = now + c->f.initial_end_delay_ms;
	} else if (*rv && strcmp(rv, "0") != 0) {
		if (want < kr_sim_compacted_rv()) {
			c->too_old = 1;
			c->cursor = want;
		} else {
			c->cursor = want > kr_sim_rv() ? kr_sim_rv() : want;
		}
	}
	if (timeout <= 0)
		timeout = 1800 + (long long)kr_sim_below(1800);
	c->kind = RK_WATCH;
	c->chunked = 1;
	c->start = now;
	c->deadline = now + timeout * 1000;
	c->last_bookmark = now;
	c->bookmarks = bookmarks;
	c->pre_sent = 0;
	c->events = 0;
	kr_sim_trace("fd %d: watch %s from %llu%s: %d initial events, ends in %lld s", 100 + s,
		     kr_sim_type_plural(type), (unsigned long long)c->cursor,
		     c->too_old ? " (too old)" : sie == 1 ? " (watch-list)" : "", c->ninitial, timeout);
	emit(s, h, head(h, sizeof(h), s, 200, -1));
}

static kr_ms_t bookmark_due(const struct conn *c)
{
	kr_ms_t due = KR_SIM_NEVER;

	if (!c->bookmarks || c->ninitial > c->next_initial || c->iee_pending)
		return KR_SIM_NEVER;
	if (settings.bookmark_ms > 0)
		due = c->last_bookmark + settings.bookmark_ms;
	if (settings.pretimeout_bookmark && !c->pre_sent && c->deadline - 2000 > c->start &&
	    c->deadline - 2000 < due)
		due = c->deadline - 2000;
	return due;
}

static void watch_end(int s)
{
	struct conn *c = &conns[s];

	if (emit(s, "0\r\n\r\n", 5) != 0)
		return;
	c->busy = 0;
	c->idle_since = kr_port_now_ms();
	if (!c->keep)
		hang_up(s, 0);
}

static size_t watch_next(int s, size_t n, kr_ms_t now, int *ended);

/*
 * Applies the plan's watch fault. Returns 1 if the response ended (or the
 * connection), 0 if it wrote and the stream goes on, -1 if it could do
 * nothing yet (a cut with no line to cut).
 */
static int watch_fault(int s)
{
	struct conn *c = &conns[s];
	char what[96];
	size_t n;

	c->ev_fault_done = 1;
	switch (c->f.ev_fault) {
	case KR_SIM_EV_ERROR:
		n = error_line(piece, sizeof(piece), c->f.ev_code, c->cursor);
		kr_sim_trace("fd %d: fault: ERROR %d after %d events", 100 + s, c->f.ev_code, c->events);
		if (c->req_kind == REQ_WATCH || c->f.ev_code == 429) {
			snprintf(what, sizeof(what), "%s ended by ERROR %d", c->req_kind == REQ_WATCH ? "watch" : "watch-list",
				 c->f.ev_code);
			/* The client acts on the event's closing brace; the framing after it does not matter. */
			uint64_t at = kr_sim_sock_written(s);

			kr_sim_sock_verdict(s, at, at + (uint64_t)snprintf(NULL, 0, "%zx\r\n", n) + n - 1,
					    c->req_kind, 0, what);
		}
		if (emit(s, framed, (size_t)snprintf(framed, sizeof(framed), "%zx\r\n", n)) != 0 ||
		    emit(s, piece, n) != 0 || emit(s, "\r\n", 2) != 0)
			return 1;
		watch_end(s);
		return 1;
	case KR_SIM_EV_END:
		kr_sim_trace("fd %d: fault: clean end after %d events", 100 + s, c->events);
		watch_end(s);
		return 1;
	case KR_SIM_EV_GARBAGE:
		kr_sim_trace("fd %d: fault: garbage after %d events", 100 + s, c->events);
		/* One chunk, its first byte the first that is not JSON: the client stops there. */
		if (c->req_kind == REQ_WATCH)
			kr_sim_sock_verdict(s, kr_sim_sock_written(s), kr_sim_sock_written(s) + 5, c->req_kind,
					    0, "watch stream not JSON");
		return emit(s, "13\r\nthis is not JSON {\n\r\n", 25) != 0;
	case KR_SIM_EV_CUT: {
		int ended = 0;
		size_t len = watch_next(s, 0, kr_port_now_ms(), &ended), k;
		uint64_t at;
		int h;

		if (len < 3) {
			/* Nothing to cut yet: the next line will be (-1: nothing done, no progress). */
			c->ev_fault_done = ended;
			if (!ended)
				return -1;
			watch_end(s);
			return 1;
		}
		c->events++;
		/* At least its last '}' is missing, so the line cannot be a whole object. */
		k = 1 + (size_t)kr_sim_below(len - 2);
		piece[k] = '\n';
		kr_sim_trace("fd %d: fault: event %d cut after %zu of its %zu bytes", 100 + s, c->events, k, len);
		/* One chunk; the client stops at the newline that ends the cut line. */
		at = kr_sim_sock_written(s);
		h = snprintf(framed, sizeof(framed), "%zx\r\n", k + 1);
		if (c->req_kind == REQ_WATCH)
			kr_sim_sock_verdict(s, at, at + (uint64_t)h + k + 1, c->req_kind, 0, "watch event cut short");
		memcpy(framed + h, piece, k + 1);
		memcpy(framed + h + k + 1, "\r\n", 2);
		/* The stream goes on with whole events (the client is gone by then). */
		return emit(s, framed, (size_t)h + k + 3) != 0;
	}
	case KR_SIM_EV_BAD_CHUNK:
		kr_sim_trace("fd %d: fault: bad chunk after %d events", 100 + s, c->events);
		/* As for a stream that is not JSON (src/README.md "Watch": a malformed stream);
		 * the parser judges a chunk-size line once it has the whole line. */
		if (c->req_kind == REQ_WATCH)
			kr_sim_sock_verdict(s, kr_sim_sock_written(s), kr_sim_sock_written(s) + 4, c->req_kind,
					    0, "watch stream with a chunk size that is not hex");
		emit(s, "zz\r\n{\"type\":\"MODIFIED\"", 22);
		c->broken = 1;
		return 1;
	case KR_SIM_EV_RESET:
		kr_sim_trace("fd %d: fault: reset after %d events", 100 + s, c->events);
		hang_up(s, 1);
		return 1;
	default:
		return 0;
	}
}

/* The next event line this watcher gets, into piece+n. Returns its length, 0 if none now. */
static size_t watch_next(int s, size_t n, kr_ms_t now, int *ended)
{
	struct conn *c = &conns[s];
	char *out = piece + n;
	size_t room = sizeof(piece) - n;

	*ended = 0;
	if (c->next_initial < c->ninitial) {
		int i = c->next_initial++;

		return event_line(out, room, "ADDED", c->type, c->initial[i], &c->initial_ver[i]);
	}
	if (c->iee_pending && now >= c->iee_at) {
		c->iee_pending = 0;
		c->last_bookmark = now;
		return bookmark_line(out, room, c->type, c->cursor, 1);
	}
	if (now >= c->deadline) {
		*ended = 1;
		return 0;
	}
	if (now >= bookmark_due(c)) {
		if (c->deadline - 2000 <= now)
			c->pre_sent = 1;
		c->last_bookmark = now;
		return bookmark_line(out, room, c->type, c->cursor, 0);
	}
	while (c->cursor < kr_sim_rv()) {
		const struct kr_sim_event *e;
		struct kr_sim_ver v;
		int cur, old;

		if (c->cursor < kr_sim_compacted_rv()) {
			/* Fell behind the compaction point: the cacher ends such a watcher. */
			kr_sim_trace("fd %d: watcher at %llu is behind the compaction point; ending it", 100 + s,
				     (unsigned long long)c->cursor);
			*ended = 1;
			return 0;
		}
		e = kr_sim_event_at(++c->cursor);
		if (e->type != c->type)
			continue;
		cur = e->etype != KR_SIM_DELETED && kr_sim_match(&c->flt, e->type, e->slot, &e->cur);
		old = e->prev.present && kr_sim_match(&c->flt, e->type, e->slot, &e->prev);
		if (cur)
			return event_line(out, room, old ? "MODIFIED" : "ADDED", e->type, e->slot, &e->cur);
		if (!old)
			continue;
		if (e->etype == KR_SIM_DELETED)
			return event_line(out, room, "DELETED", e->type, e->slot, &e->cur);
		v = e->prev;               /* left the selection: its last state, the event's rv */
		v.rv = c->cursor;
		return event_line(out, room, "DELETED", e->type, e->slot, &v);
	}
	return 0;
}

/* Produces what the watch has now. 1 if it wrote something. */
static int watch_pump(int s, kr_ms_t now)
{
	struct conn *c = &conns[s];
	size_t n = 0;
	int ended = 0, wrote = 0, r;

	if (c->too_old) {
		c->f.ev_fault = KR_SIM_EV_ERROR;
		c->f.ev_code = 410;
		c->too_old = 0;
		watch_fault(s);
		return 1;
	}
	for (;;) {
		size_t len;

		if (!c->ev_fault_done && c->f.ev_fault != KR_SIM_EV_NONE && c->events >= c->f.ev_after) {
			if (n && body(s, piece, n) != 0)
				return 1;
			n = 0;
			r = watch_fault(s);
			if (r > 0)
				return 1;
			if (r == 0)
				wrote = 1;
		}
		if (n + KR_SIM_OBJECT_MAX + 256 > sizeof(piece))
			break;
		len = watch_next(s, n, now, &ended);
		if (!len)
			break;
		n += len;
		c->events++;
		if (n >= (size_t)c->f.merge_bytes)
			break;
	}
	if (n) {
		if (body(s, piece, n) != 0)
			return 1;
		wrote = 1;
	}
	if (ended) {
		watch_end(s);
		return 1;
	}
	return wrote;
}

/* --- dispatch ------------------------------------------------------------------------------------ */

static const struct status unauthorized = { 401, "Unauthorized", "Unauthorized", NULL, 0, -1 };

/* The bearer token in the head [head, end), or NULL; *len gets its length. */
static const char *bearer(const char *head, const char *end, size_t *len)
{
	static const char name[] = "\r\nAuthorization: Bearer ";
	const char *p = head, *v, *eol;

	for (;;) {
		p = memchr(p, '\r', (size_t)(end - p));
		if (!p || (size_t)(end - p) < sizeof(name) - 1)
			return NULL;
		if (memcmp(p, name, sizeof(name) - 1) == 0)
			break;
		p++;
	}
	v = p + sizeof(name) - 1;
	eol = memchr(v, '\r', (size_t)(end - v));
	*len = (size_t)((eol ? eol : end) - v);
	return v;
}

/* A watch-list: sendInitialEvents=true, or "" / "0" defaulted to one by the WatchList gate. */
static int is_watch_list(const struct request *rq, const char *sie)
{
	const char *rv = param(rq, "resourceVersion");

	if (sie)
		return go_bool(sie) == 1;
	return settings.watch_list && (!rv || !*rv || strcmp(rv, "0") == 0);
}

/* The request target as a string (for scripts to match), cut at 2 KiB. */
static const char *copy_target(const char *t, size_t n)
{
	static char target[2048];

	if (n >= sizeof(target))
		n = sizeof(target) - 1;
	memcpy(target, t, n);
	target[n] = '\0';
	return target;
}

static void dispatch(int s, const char *line, size_t n, const char *end)
{
	struct conn *c = &conns[s];
	const char *sp1 = memchr(line, ' ', n), *sp2;
	struct request *rq = &req_scratch;
	struct kr_sim_filter flt;
	const char *watch_s, *sie;
	int watch, type = 0, ns = -1, reused = c->nreq > 0;
	char what[160];

	c->nreq++;
	c->busy = 1;
	c->kind = RK_NONE;
	c->base = kr_sim_sock_written(s);
	c->stalled = c->frozen = c->ev_fault_done = c->broken = 0;
	c->paused_until = 0;
	c->keep = 1;
	kr_sim_fault_none(&c->f);
	c->req_kind = REQ_LIST;
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line + n - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || (size_t)(line + n - sp2 - 1) < 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 ||
	    parse_target(sp1 + 1, (size_t)(sp2 - sp1 - 1), rq) != 0) {
		c->keep = 0;
		client_error(s, 400, "BadRequest", "malformed request line");
		return;
	}
	watch_s = param(rq, "watch");
	watch = watch_s && go_bool(watch_s) == 1;
	sie = param(rq, "sendInitialEvents");
	if (watch)
		c->req_kind = is_watch_list(rq, sie) ? REQ_WATCHLIST : REQ_WATCH;
	snprintf(what, sizeof(what), "GET %.*s", (int)(sp2 - sp1 - 1 < 150 ? sp2 - sp1 - 1 : 150), sp1 + 1);
	kr_sim_sock_request_seen(s, c->req_kind == REQ_LIST && param(rq, "continue") ? 3 : c->req_kind, what);
	kr_sim_trace("fd %d: request #%d: %s", 100 + s, c->nreq, what);
	kr_sim_chaos_request(copy_target(sp1 + 1, (size_t)(sp2 - sp1 - 1)), watch, c->req_kind == REQ_WATCHLIST,
			     reused, &c->f);
	if (c->f.close_after)
		c->keep = 0;
	if (c->f.compact_first)
		kr_sim_compact(kr_sim_rv());
	if (sp1 - line != 3 || memcmp(line, "GET", 3) != 0) {
		client_error(s, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
		return;
	}
	if (c->f.status) {
		struct status st = { c->f.status, default_reason(c->f.status), default_message(c->f.status),
				     NULL, c->f.too_large, -1 };

		if (c->f.status == 410 && param(rq, "continue"))
			st.message = msg_continue_inconsistent;
		start_status(s, &st);
		return;
	}
	if (settings.require_auth) {
		size_t tl = 0;
		const char *tok = bearer(line, end, &tl);

		if (!tok || !kr_sim_auth_ok(tok, tl)) {
			char sent[64];

			snprintf(sent, sizeof(sent), "%.*s", tok ? (int)(tl < 63 ? tl : 63) : 0, tok ? tok : "");
			/* After a rotation kreflect retries at once if its re-read finds a new token. */
			if (start_status(s, &unauthorized) && tok)
				kr_sim_sock_verdict_token(s, sent);
			return;
		}
	}
	if (route(rq->path, &type, &ns) != 0) {
		client_error(s, 404, "NotFound", "the server could not find the requested resource");
		return;
	}
	memset(&flt, 0, sizeof(flt));
	flt.type = type;
	flt.ns = ns;
	if (parse_selector(param(rq, "labelSelector"), &flt) != 0) {
		client_error(s, 400, "BadRequest", "unable to parse requirement: found unexpected token");
		return;
	}
	if (param(rq, "fieldSelector") && *param(rq, "fieldSelector")) {
		client_error(s, 400, "BadRequest", "field label not supported by the simulated server");
		return;
	}
	if (watch)
		start_watch(s, rq, type, &flt);
	else
		start_list(s, rq, type, &flt);
	if (c->kind == RK_LIST)
		list_begin(s);
}

/* Reads a request if one has arrived. 1 if it started a response. */
static int take_request(int s)
{
	const char *data, *end;
	size_t n = kr_sim_sock_input(s, &data);

	if (!n)
		return 0;
	end = NULL;
	if (n >= 4) {
		size_t i;

		for (i = 0; i + 3 < n; i++)
			if (data[i] == '\r' && data[i + 1] == '\n' && data[i + 2] == '\r' && data[i + 3] == '\n') {
				end = data + i;
				break;
			}
	}
	if (!end) {
		if (n >= 16384) {
			conns[s].keep = 0;
			conns[s].busy = 1;
			conns[s].base = kr_sim_sock_written(s);
			memset(&conns[s].f, 0, sizeof(conns[s].f));
			conns[s].f.retry_after = -1;
			conns[s].f.reset_after = conns[s].f.eof_after = -1;
			conns[s].f.stall_after = conns[s].f.freeze_after = -1;
			client_error(s, 431, "RequestHeaderFieldsTooLarge", "request header fields too large");
			kr_sim_sock_consume(s, n);
			return 1;
		}
		return 0;
	}
	{
		const char *eol = memchr(data, '\r', (size_t)(end - data) + 1);

		dispatch(s, data, (size_t)(eol - data), end + 2);
	}
	kr_sim_sock_consume(s, (size_t)(end - data) + 4);
	return 1;
}

int kr_sim_server_pump(int s, kr_ms_t now)
{
	struct conn *c = &conns[s];
	int did = 0;

	if (!c->active)
		return 0;
	if (!c->busy) {
		if (take_request(s))
			did = 1;
		else if (settings.keepalive_close_ms > 0 && now >= c->idle_since + settings.keepalive_close_ms) {
			kr_sim_trace("fd %d: server closes the idle kept-alive connection", 100 + s);
			hang_up(s, 0);
			return 1;
		}
		if (!c->busy || !c->active)
			return did;
	}
	/* Room for a whole piece in its worst framing, or wait for the client to read. */
	while (c->active && c->busy && !c->broken && kr_sim_sock_space(s) >= FRAMED_MAX + HEAD_MAX) {
		uint64_t sent = kr_sim_sock_written(s) - c->base;
		int wrote;

		if (c->paused_until > now)
			break;
		if (!c->stalled && c->f.stall_after >= 0 && sent >= (uint64_t)c->f.stall_after) {
			c->stalled = 1;
			c->paused_until = now + c->f.stall_ms;
			kr_sim_trace("fd %d: fault: server stalls %d ms after %llu bytes", 100 + s, c->f.stall_ms,
				     (unsigned long long)sent);
			did = 1;
			break;
		}
		if (!c->frozen && c->f.freeze_after >= 0) {
			c->frozen = 1;
			kr_sim_sock_freeze_at(s, c->base + (uint64_t)c->f.freeze_after, c->f.freeze_ms,
					      c->f.freeze_step, c->f.freeze_times);
		}
		switch (c->kind) {
		case RK_STATUS:
			if (emit(s, c->status_buf, c->status_len) == 0) {
				c->busy = 0;
				c->idle_since = now;
				if (!c->keep)
					hang_up(s, 0);
			}
			wrote = 1;
			break;
		case RK_LIST:
			wrote = list_pump(s);
			break;
		case RK_WATCH:
			wrote = watch_pump(s, now);
			break;
		default:
			wrote = 0;
			break;
		}
		if (!wrote)
			break;
		did = 1;
	}
	return did;
}

kr_ms_t kr_sim_server_next(int s)
{
	struct conn *c = &conns[s];
	kr_ms_t t = KR_SIM_NEVER, b;

	if (!c->active)
		return KR_SIM_NEVER;
	if (!c->busy)
		return settings.keepalive_close_ms > 0 ? c->idle_since + settings.keepalive_close_ms : KR_SIM_NEVER;
	if (c->paused_until > kr_port_now_ms())
		return c->paused_until;
	if (c->kind != RK_WATCH || c->broken)
		return KR_SIM_NEVER;
	t = c->deadline;
	b = bookmark_due(c);
	if (b < t)
		t = b;
	if (c->iee_pending && c->next_initial >= c->ninitial && c->iee_at < t)
		t = c->iee_at;
	return t;
}

void kr_sim_server_zap(int s, int what, int code)
{
	struct conn *c = &conns[s];

	if (!c->active)
		return;
	if (what == KR_SIM_EV_RESET || !c->busy || c->kind != RK_WATCH) {
		kr_sim_trace("fd %d: zap: the server %s the connection", 100 + s,
			     what == KR_SIM_EV_RESET ? "resets" : "closes");
		hang_up(s, what == KR_SIM_EV_RESET);
		return;
	}
	/* Into the stream now: an ERROR event, a clean end, garbage or a bad chunk. */
	c->f.ev_fault = what;
	c->f.ev_code = code;
	c->f.ev_after = c->events;
	c->ev_fault_done = 0;
	kr_sim_trace("fd %d: zap: watch fault %d (code %d) now", 100 + s, what, code);
}

void kr_sim_server_cut_all(void)
{
	int s;

	for (s = 0; s < KR_SIM_SOCKETS; s++)
		if (conns[s].active && conns[s].busy) {
			kr_sim_trace("fd %d: the server goes down: response cut", 100 + s);
			hang_up(s, 1);
		}
}
