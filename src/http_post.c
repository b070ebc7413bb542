#include "http_post.h"

#include <string.h>

#include "fmt.h"
#include "json.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

/* Room always kept for the {"type":"DROPPED","events":N} line (at most 49 bytes). */
#define MARK_RESERVE 64

#define URLLIB3_BACKOFF_MAX_MS 120000  /* urllib3's Retry.DEFAULT_BACKOFF_MAX */

/* Appends s as a JSON string, quotes included. */
static void put_json_str(struct kr_out *o, const char *s)
{
	kr_out_put(o, "\"", 1);
	kr_json_escape(o, s);
	kr_out_put(o, "\"", 1);
}

/*
 * Adds one line for ev to the window, written in place after the lines
 * before it, or counts it as dropped if it does not fit (the room for the
 * DROPPED line is always kept).
 */
static void add_line(struct kr_http_post *p, const struct kr_event *ev)
{
	struct kr_out o = { p->next, sizeof(p->next) - MARK_RESERVE, p->next_len, 0 };
	char count[32];

	/* Once one line is left out, later ones are too: the batch stays in order. */
	o.overflow = p->next_dropped > 0;
	kr_out_str(&o, "{\"type\":");
	put_json_str(&o, kr_event_name(ev->type));
	kr_out_str(&o, ",\"resource\":");
	put_json_str(&o, ev->resource ? ev->resource : "");
	if (ev->type != KR_EV_SYNCED) {
		kr_out_str(&o, ",\"key\":");
		put_json_str(&o, ev->key ? ev->key : "");
	}
	kr_out_str(&o, ",\"resourceVersion\":");
	put_json_str(&o, ev->rv ? ev->rv : "");
	if (ev->type == KR_EV_SYNCED) {
		kr_snprintf(count, sizeof(count), ",\"count\":%zu", ev->count);
		kr_out_str(&o, count);
	}
	kr_out_str(&o, "}\n");
	if (o.overflow) {
		p->next_dropped++;
		return;
	}
	p->next_len = o.len;
}

static void send_batch(struct kr_http_post *p);

static void done(struct kr_http_post *p)
{
	p->attempt = 0;
	p->body_len = 0;
	p->body_changes = 0;
	kr_debounce_set_busy(&p->db, 0);
}

/*
 * urllib3's Retry, as k8s-sidecar configures it: a failure of a kind uses up
 * one of its retries and one of the total; when either is spent, it is final.
 * The wait before the next attempt: none after the first failure, then
 * factor * 2^(failures - 1). Returns the wait in ms, or -1 when final.
 */
static int64_t urllib3_next(struct kr_http_post *p, int kind)
{
	int n = p->attempt;            /* failures so far, this one included */

	if (kind == 'c' && ++p->connect_failures > p->o.connect_retries)
		return -1;
	if (kind == 'r' && ++p->read_failures > p->o.read_retries)
		return -1;
	if (kind == 's' && !p->o.retry_5xx)
		return -1;
	if (n > p->o.retries)
		return -1;
	if (n <= 1)
		return 0;
	if (n > 20 || (int64_t)p->o.backoff_factor_ms << (n - 1) > URLLIB3_BACKOFF_MAX_MS)
		return URLLIB3_BACKOFF_MAX_MS;
	return (int64_t)p->o.backoff_factor_ms << (n - 1);
}

/* kind: 'c' connection failed, 'r' timeout or broken answer, 's' a retryable status. */
static void failed(struct kr_http_post *p, const char *why, int kind)
{
	kr_ms_t now = kr_port_now_ms();
	int64_t delay;

	p->attempts_failed++;
	if (p->o.urllib3) {
		delay = urllib3_next(p, kind);
		if (delay < 0) {
			kr_log(KR_LOG_ERROR, "unable to send the request for %lu changes to %s after "
			       "%d attempts: %s", p->body_changes, p->url, p->attempt, why);
			p->batches_dropped++;
			done(p);
			return;
		}
		kr_log(KR_LOG_WARN, "unable to send the request for %lu changes to %s (attempt %d): "
		       "%s; retrying in %lld ms", p->body_changes, p->url, p->attempt, why,
		       (long long)delay);
		kr_loop_timer_at(p->loop, &p->retry, now + delay);
		return;
	}
	if (p->attempt >= KR_HTTP_POST_ATTEMPTS) {
		kr_log(KR_LOG_ERROR, "unable to post %lu changes to %s after %d attempts: %s; "
		       "dropping them", p->body_changes, p->url, p->attempt, why);
		p->batches_dropped++;
		done(p);
		return;
	}
	delay = kr_backoff_next(&p->backoff, now);
	kr_log(KR_LOG_WARN, "unable to post %lu changes to %s (attempt %d of %d): %s; "
	       "retrying in %lld ms", p->body_changes, p->url, p->attempt, KR_HTTP_POST_ATTEMPTS,
	       why, (long long)delay);
	kr_loop_timer_at(p->loop, &p->retry, now + delay);
}

static int on_head(void *arg, const struct kr_http_resp *resp)
{
	struct kr_http_post *p = arg;

	p->status = resp->status;
	return 0;
}

static long on_body(void *arg, const char *data, size_t len)
{
	struct kr_http_post *p = arg;

	(void)data;
	p->reply_bytes += len;
	return p->reply_bytes > KR_HTTP_POST_REPLY_MAX ? -1 : (long)len;
}

static void on_end(void *arg, int err, const char *reason)
{
	struct kr_http_post *p = arg;
	char why[sizeof(p->conn.reason) + 32];
	/* No byte of the request went out: a connection failure (the connection is
	 * already closed here, so its state cannot tell; reqsent counts this request). */
	int kind = p->conn.reqsent == 0 ? 'c' : 'r';

	p->in_flight = 0;
	kr_conn_close(&p->conn, NULL);
	if (err == 0 && p->status >= 200 && p->status < 300) {
		p->delivered++;
		if (p->o.urllib3)
			kr_log(KR_LOG_INFO, "sent the request for %lu changes to %s: HTTP %d",
			       p->body_changes, p->url, p->status);
		else
			kr_log(KR_LOG_INFO, "posted %lu changes (%zu bytes) to %s: HTTP %d",
			       p->body_changes, p->body_len, p->url, p->status);
		done(p);
		return;
	}
	if (err == 0 && p->o.urllib3 && p->status != 500 && p->status != 502 && p->status != 503 &&
	    p->status != 504) {
		/* As k8s-sidecar: an answer it does not retry is the end, logged. */
		kr_log(p->status < 400 ? KR_LOG_INFO : KR_LOG_ERROR, "sent the request for %lu changes "
		       "to %s: HTTP %d", p->body_changes, p->url, p->status);
		p->delivered += p->status < 400;
		p->batches_dropped += p->status >= 400;
		done(p);
		return;
	}
	if (err == 0)
		kr_snprintf(why, sizeof(why), "HTTP %d", p->status);
	else if (err == KR_ECANCELED && p->reply_bytes > KR_HTTP_POST_REPLY_MAX)
		kr_snprintf(why, sizeof(why), "an answer longer than %d bytes", KR_HTTP_POST_REPLY_MAX);
	else
		kr_snprintf(why, sizeof(why), "%s", reason && *reason ? reason : kr_strerror(err));
	failed(p, why, err == 0 ? 's' : kind);
}

static void send_batch(struct kr_http_post *p)
{
	struct kr_request req;
	int r;

	memset(&req, 0, sizeof(req));
	req.method = p->o.method;
	req.path = p->path;
	req.headers = p->headers;
	req.nheaders = p->nheaders;
	if (strcmp(p->o.method, "GET") != 0) {
		req.body = p->o.body ? p->o.body : p->body;
		req.body_len = p->o.body ? p->o.body_len : p->body_len;
	}
	req.on_head = on_head;
	req.on_body = on_body;
	req.on_end = on_end;
	req.arg = p;
	p->status = 0;
	p->reply_bytes = 0;
	p->attempt++;
	p->in_flight = 1;
	r = kr_conn_request(&p->conn, &req);
	if (r < 0) {
		p->in_flight = 0;
		failed(p, kr_strerror(r), 'c');
	}
}

static void on_retry(struct kr_loop *loop, struct kr_timer *t)
{
	(void)loop;
	send_batch(t->arg);
}

/* A window closed: its lines become the batch to deliver. */
static void fire(void *arg, unsigned long changes)
{
	struct kr_http_post *p = arg;

	memcpy(p->body, p->next, p->next_len);
	p->body_len = p->next_len;
	if (p->next_dropped)
		p->body_len += (size_t)kr_snprintf(p->body + p->body_len, sizeof(p->body) - p->body_len,
						"{\"type\":\"DROPPED\",\"events\":%lu}\n", p->next_dropped);
	p->body_changes = changes;
	p->next_len = 0;
	p->next_dropped = 0;
	p->attempt = 0;
	p->connect_failures = p->read_failures = 0;
	if (p->o.skip_first && !p->first_done) {
		/* k8s-sidecar's REQ_SKIP_INIT: the first sync makes no request. */
		p->first_done = 1;
		kr_log(KR_LOG_INFO, "not sending the request for the first sync to %s (as asked)",
		       p->url);
		p->body_len = 0;
		p->body_changes = 0;
		return;
	}
	p->first_done = 1;
	kr_backoff_init(&p->backoff, &p->rand, kr_port_now_ms());
	kr_debounce_set_busy(&p->db, 1);
	send_batch(p);
}

void kr_http_post_event(void *arg, const struct kr_event *ev)
{
	struct kr_http_post *p = arg;

	/* A restart that needed no list has nothing new to tell (restored, warm). */
	if (((ev->type == KR_EV_ADDED || ev->type == KR_EV_MODIFIED || ev->type == KR_EV_DELETED) &&
	     !ev->restored) || (ev->type == KR_EV_SYNCED && !p->db.ready && !ev->warm))
		add_line(p, ev);
	if (kr_debounce_count(&p->db, ev) && !p->db.pending && !ev->warm)
		p->db.pending = 1;     /* the first sync is worth a batch, even of no objects */
	kr_debounce_arm(&p->db);
}

int kr_http_post_flush(struct kr_http_post *p)
{
	return kr_debounce_flush(&p->db);
}

int kr_http_post_busy(const struct kr_http_post *p)
{
	return p->db.busy;
}

int kr_http_post_loopback(const struct kr_http_post *p)
{
	const char *h = p->conn.cfg.host;

	return strcmp(h, "localhost") == 0 || strcmp(h, "::1") == 0 ||
	       (strncmp(h, "127.", 4) == 0 && kr_port_parse_ip(h, 0, &(struct kr_addr){ 0 }) == 0);
}

/* http://host[:port][/path][?query]; IPv6 in brackets. */
static int parse_url(struct kr_http_post *p, const char *url, struct kr_conn_cfg *cfg,
		     char *err, size_t errlen)
{
	const char *s, *host, *host_end, *rest;
	unsigned long port = 80;
	size_t hlen, i;

	if (strncmp(url, "https://", 8) == 0) {
		kr_snprintf(err, errlen, "https:// is not supported: the hook is plain HTTP to a local "
			 "agent (kreflect has no TLS for it); give http://HOST[:PORT][/PATH]");
		return KR_EINVAL;
	}
	if (strncmp(url, "http://", 7) != 0) {
		kr_snprintf(err, errlen, "must be http://HOST[:PORT][/PATH], not '%s'", url);
		return KR_EINVAL;
	}
	for (i = 0; url[i]; i++) {
		if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f || url[i] == '#') {
			kr_snprintf(err, errlen, "a space, control byte or '#' in the URL");
			return KR_EINVAL;
		}
	}
	s = url + 7;
	if (memchr(s, '@', strcspn(s, "/?"))) {
		kr_snprintf(err, errlen, "user:password@ in '%s' is not supported", url);
		return KR_EINVAL;
	}
	if (*s == '[') {
		host = s + 1;
		host_end = strchr(host, ']');
		if (!host_end) {
			kr_snprintf(err, errlen, "unterminated [IPv6] host in '%s'", url);
			return KR_EINVAL;
		}
		rest = host_end + 1;
	} else {
		host = s;
		host_end = s + strcspn(s, ":/?");
		rest = host_end;
	}
	hlen = (size_t)(host_end - host);
	if (hlen == 0 || hlen >= sizeof(cfg->host)) {
		kr_snprintf(err, errlen, "no usable host in '%s'", url);
		return KR_EINVAL;
	}
	for (i = 0; i < hlen; i++) {
		char c = host[i];

		/* A DNS name or an IP literal: nothing else reaches the resolver. */
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '_' || (c == ':' && *s == '['))) {
			kr_snprintf(err, errlen, "no usable host in '%s'", url);
			return KR_EINVAL;
		}
	}
	memcpy(cfg->host, host, hlen);
	cfg->host[hlen] = '\0';
	if (*rest == ':') {
		const char *d = ++rest;

		port = 0;
		while (*d >= '0' && *d <= '9' && port <= 65535)
			port = port * 10 + (unsigned long)(*d++ - '0');
		if (d == rest || port < 1 || port > 65535 || (*d && *d != '/' && *d != '?')) {
			kr_snprintf(err, errlen, "bad port in '%s'", url);
			return KR_EINVAL;
		}
		rest = d;
	} else if (*rest && *rest != '/' && *rest != '?') {
		kr_snprintf(err, errlen, "must be http://HOST[:PORT][/PATH], not '%s'", url);
		return KR_EINVAL;
	}
	cfg->port = (uint16_t)port;
	if (kr_snprintf(p->path, sizeof(p->path), "%s%s", *rest == '/' ? "" : "/", rest) >=
	    (int)sizeof(p->path)) {
		kr_snprintf(err, errlen, "path longer than %d bytes", KR_HTTP_POST_PATH_MAX - 1);
		return KR_EINVAL;
	}
	/* Logged without the query, which may carry a key of the receiver's. */
	kr_snprintf(p->url, sizeof(p->url), "http://%s%s%s:%u%.*s", *s == '[' ? "[" : "", cfg->host,
		 *s == '[' ? "]" : "", (unsigned)cfg->port, (int)strcspn(p->path, "?"), p->path);
	return 0;
}

int kr_http_post_init(struct kr_http_post *p, struct kr_loop *loop, const char *url,
		      int debounce_ms, int resources, char *err, size_t errlen)
{
	return kr_http_post_init_opts(p, loop, url, debounce_ms, resources, NULL, err, errlen);
}

int kr_http_post_init_opts(struct kr_http_post *p, struct kr_loop *loop, const char *url,
			   int debounce_ms, int resources, const struct kr_http_post_opts *o,
			   char *err, size_t errlen)
{
	struct kr_conn_cfg cfg;
	int r, get;

	kr_port_zero(p, sizeof(*p));
	memset(&cfg, 0, sizeof(cfg));
	if (o)
		p->o = *o;
	if (!p->o.method)
		p->o.method = "POST";
	get = strcmp(p->o.method, "GET") == 0;
	if (!get && strcmp(p->o.method, "POST") != 0) {
		kr_snprintf(err, errlen, "the method must be GET or POST, not '%.16s'", p->o.method);
		return KR_EINVAL;
	}
	r = parse_url(p, url, &cfg, err, errlen);
	if (r != 0)
		return r;
	if (!get)
		p->headers[p->nheaders++] = (struct kr_http_header){ "Content-Type",
			p->o.body ? (p->o.content_type ? p->o.content_type : "application/json")
				  : "application/x-ndjson" };
	/* One connection per attempt: batches are seconds apart, and a kept-alive
	 * connection the receiver closed meanwhile would cost an attempt. */
	p->headers[p->nheaders++] = (struct kr_http_header){ "Connection", "close" };
	if (p->o.authorization)
		p->headers[p->nheaders++] = (struct kr_http_header){ "Authorization",
								     p->o.authorization };
	/* The request head must be writable once: the path is the only part that varies.
	 * (The error never shows the Authorization value.) */
	if (kr_http_write_request_ex(p->conn.reqbuf, sizeof(p->conn.reqbuf), p->o.method, cfg.host,
				     p->path, NULL, 0, NULL, kr_target(), p->headers,
				     p->nheaders) < 0) {
		memset(p->conn.reqbuf, 0, sizeof(p->conn.reqbuf));
		kr_snprintf(err, errlen, "the path or a header cannot be sent in a request: '%s'",
			    p->path);
		return KR_EINVAL;
	}
	memset(p->conn.reqbuf, 0, sizeof(p->conn.reqbuf));
	cfg.tls = NULL;                /* plain HTTP, never through a proxy */
	cfg.connect_timeout_ms = p->o.timeout_ms > 0 ? p->o.timeout_ms : KR_HTTP_POST_TIMEOUT_MS;
	cfg.idle_timeout_ms = cfg.connect_timeout_ms;
	p->loop = loop;
	if (kr_conn_init(&p->conn, loop, &cfg) != 0) {
		kr_snprintf(err, errlen, "no room in the loop for its connection");
		return KR_EINVAL;
	}
	kr_rand_seed(&p->rand, 0);
	p->retry.fire = on_retry;
	p->retry.arg = p;
	kr_debounce_init(&p->db, loop, debounce_ms, resources, fire, p);
	return 0;
}
