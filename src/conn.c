#include "conn.h"

#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"

#define DEFAULT_CONNECT_MS 10000
#define DEFAULT_IDLE_MS 60000
/* Reads per readiness callback, so one busy stream cannot starve the others. */
#define READS_PER_TURN 4

static const char *const state_names[KR_CONN_NSTATES] = {
	[KR_CONN_IDLE] = "idle",
	[KR_CONN_RESOLVING] = "resolving",
	[KR_CONN_CONNECTING] = "connecting",
	[KR_CONN_PROXY] = "proxy CONNECT",
	[KR_CONN_HANDSHAKE] = "handshake",
	[KR_CONN_READY] = "ready",
	[KR_CONN_SENDING] = "sending",
	[KR_CONN_RECEIVING] = "receiving",
};

/*
 * The deadline column of the state x event table: what a timer firing in
 * each state means. READY and IDLE have no deadline.
 */
static const char *const deadline_reason[KR_CONN_NSTATES] = {
	[KR_CONN_RESOLVING] = "name lookup timed out",
	[KR_CONN_CONNECTING] = "TCP connect timed out",
	[KR_CONN_PROXY] = "proxy CONNECT timed out",
	[KR_CONN_HANDSHAKE] = "TLS handshake timed out",
	[KR_CONN_SENDING] = "request write timed out",
	[KR_CONN_RECEIVING] = "no bytes from the server within the read-idle deadline",
};

const char *kr_conn_state_name(enum kr_conn_state s)
{
	return (unsigned)s < KR_CONN_NSTATES ? state_names[s] : "?";
}

static void on_ready(struct kr_loop *loop, struct kr_source *s, int got);
static void do_proxy(struct kr_conn *c);
static void on_deadline(struct kr_loop *loop, struct kr_timer *t);

static int conn_pending(struct kr_source *s)
{
	struct kr_conn *c = s->arg;

	return c->state == KR_CONN_RECEIVING && !c->held && c->cfg.tls && kr_tls_pending(&c->tls);
}

int kr_conn_init(struct kr_conn *c, struct kr_loop *loop, const struct kr_conn_cfg *cfg)
{
	kr_port_zero(c, sizeof(*c));  /* its buffers: only pages already written */
	c->cfg = *cfg;
	if (!c->cfg.connect_timeout_ms)
		c->cfg.connect_timeout_ms = DEFAULT_CONNECT_MS;
	if (!c->cfg.idle_timeout_ms)
		c->cfg.idle_timeout_ms = DEFAULT_IDLE_MS;
	if (!c->cfg.server_name[0])
		memcpy(c->cfg.server_name, c->cfg.host, sizeof(c->cfg.host));
	c->loop = loop;
	c->state = KR_CONN_IDLE;
	c->resolve_fd = -1;
	c->src.fd = -1;
	c->src.arg = c;
	c->src.ready = on_ready;
	c->src.pending = conn_pending;
	c->timer.fire = on_deadline;
	c->timer.arg = c;
	kr_tls_init(&c->tls);
	return kr_loop_add(loop, &c->src);
}

/* Where TCP goes: the proxy if there is one, else the API server. */
static const char *dial_host(const struct kr_conn *c)
{
	return c->cfg.proxy ? c->cfg.proxy->host : c->cfg.host;
}

static uint16_t dial_port(const struct kr_conn *c)
{
	return c->cfg.proxy ? c->cfg.proxy->port : c->cfg.port;
}

/* "proxy " when TCP goes to a proxy, for error messages. */
static const char *via(const struct kr_conn *c)
{
	return c->cfg.proxy ? "proxy " : "";
}

static void arm(struct kr_conn *c, int ms)
{
	kr_loop_timer_at(c->loop, &c->timer, kr_port_now_ms() + ms);
}

/* Tears the socket down; the request (if any) is left to the caller. */
static void drop_socket(struct kr_conn *c, const char *reason)
{
	if (c->resolve_fd >= 0) {
		kr_port_resolve_finish(c->resolve_fd, 0, NULL, 0, 1);
		if (c->src.fd == c->resolve_fd)
			c->src.fd = -1;
		c->resolve_fd = -1;
	}
	if (c->src.fd >= 0) {
		if (c->cfg.tls)
			kr_tls_close(&c->tls);
		kr_port_close(c->src.fd);
	}
	c->src.fd = -1;
	c->src.want = 0;
	kr_loop_timer_cancel(c->loop, &c->timer);
	c->state = KR_CONN_IDLE;
	c->gen++;
	c->held = 0;
	c->inflating = 0;
	if (reason)
		kr_snprintf(c->reason, sizeof(c->reason), "%s", reason);
}

/*
 * Ends the request in flight. The state is settled before on_end runs, so
 * on_end may start the next request on this connection.
 */
static void end_request(struct kr_conn *c, int err, const char *reason)
{
	void (*on_end)(void *, int, const char *) = c->req.on_end;
	void *arg = c->req.arg;
	char why[sizeof(c->reason)];

	kr_snprintf(why, sizeof(why), "%s", reason ? reason : "");
	c->have_request = 0;
	c->gen++;
	c->held = 0;
	c->inflating = 0;
	if (on_end)
		on_end(arg, err, why);
}

/* The connection failed: close it and report to the request, if one waits. */
static void fail(struct kr_conn *c, int err, const char *reason)
{
	char where[sizeof(c->reason)];

	kr_snprintf(where, sizeof(where), "%s:%u: %s", c->cfg.host, (unsigned)c->cfg.port, reason);
	c->fail_err = err;
	c->fail_state = c->state;
	kr_log(KR_LOG_DEBUG, "connection to %s:%u closed while %s: %s", c->cfg.host,
	       (unsigned)c->cfg.port, state_names[c->state], reason);
	drop_socket(c, where);
	if (c->have_request)
		end_request(c, err, where);
}

static void start_sending(struct kr_conn *c)
{
	c->state = KR_CONN_SENDING;
	c->src.want = KR_POLL_OUT;
	arm(c, c->idle_ms);
}

/* TCP (or the proxy's tunnel) is up: TLS next, or the request on plain TCP. */
static void tunnel_up(struct kr_conn *c)
{
	if (c->cfg.tls) {
		if (kr_tls_open(&c->tls, c->cfg.tls, c->src.fd, c->cfg.server_name) != 0) {
			char why[200], text[160];

			/* mbedTLS's reason: not only memory (a configuration it refuses, too). */
			kr_tls_describe(&c->tls, text, sizeof(text));
			kr_snprintf(why, sizeof(why), "unable to start TLS: %s", text);
			fail(c, KR_ETLS, why);
			return;
		}
		c->state = KR_CONN_HANDSHAKE;
		c->src.want = KR_POLL_OUT;
		return;
	}
	c->reused = 0;
	start_sending(c);
}

static void connected(struct kr_conn *c)
{
	int n;

	if (!KR_WITH_PROXY || !c->cfg.proxy) {
		tunnel_up(c);
		return;
	}
	/* rbuf is free until the tunnel is up: the CONNECT is written and sent from it. */
	n = kr_proxy_write_connect(c->rbuf, sizeof(c->rbuf), c->cfg.proxy, c->cfg.host,
				   c->cfg.port, kr_target());
	if (n < 0) {
		fail(c, n, "unable to write the proxy CONNECT request (host name too long?)");
		return;
	}
	c->proxylen = (size_t)n;
	c->proxysent = 0;
	kr_http_resp_init(&c->resp);
	c->state = KR_CONN_PROXY;
	c->src.want = KR_POLL_OUT;
}

/* Tries addresses from c->addr_index on until a connect starts. */
static void try_connect(struct kr_conn *c)
{
	char addr[64];

	while (c->addr_index < c->naddrs) {
		int fd = kr_port_tcp_connect(&c->addrs[c->addr_index]);

		if (fd >= 0) {
			c->src.fd = fd;
			c->src.want = KR_POLL_OUT;
			c->state = KR_CONN_CONNECTING;
			c->connects++;
			return;
		}
		kr_port_addr_format(&c->addrs[c->addr_index], addr, sizeof(addr));
		kr_log(KR_LOG_DEBUG, "unable to connect to %s%s: %s", via(c), addr, kr_port_last_error());
		c->addr_index++;
	}
	c->resolved_at = 0;
	fail(c, KR_EIO, c->cfg.proxy ? "unable to connect to the proxy: no address answered"
				     : "unable to connect: no address answered");
}

static void start_connect(struct kr_conn *c)
{
	struct kr_addr literal;

	c->addr_index = 0;
	c->reused = 0;
	arm(c, c->cfg.connect_timeout_ms);
	/* Not into addrs[0]: a name is not parsed, but out is cleared, and the cache below lives there. */
	if (kr_port_parse_ip(dial_host(c), dial_port(c), &literal) == 0) {
		c->addrs[0] = literal;
		c->naddrs = 1;
		try_connect(c);
		return;
	}
	/* A reconnect soon after a lookup reuses its answer: no fork per reconnect. */
	if (c->naddrs > 0 && c->resolved_at && kr_port_now_ms() - c->resolved_at < KR_DNS_CACHE_MS) {
		try_connect(c);
		return;
	}
	if (!KR_WITH_DNS) {
		fail(c, KR_EINVAL, "unable to look up the host: name lookups are not built into this kreflect");
		return;
	}
	c->resolve_fd = kr_port_resolve_start(dial_host(c));
	if (c->resolve_fd < 0) {
		fail(c, KR_EIO, "unable to start a name lookup");
		return;
	}
	c->src.fd = c->resolve_fd;
	c->src.want = KR_POLL_IN;
	c->state = KR_CONN_RESOLVING;
}

int kr_conn_request(struct kr_conn *c, const struct kr_request *req)
{
	char host[KR_HOST_MAX + 16], length[24];
	struct kr_http_header headers[KR_CONN_MAX_HEADERS + 2];
	size_t nheaders = req->nheaders;
	int n;

	if (c->have_request)
		return KR_ESTATE;
	if (nheaders > KR_CONN_MAX_HEADERS || (nheaders && !req->headers))
		return KR_EINVAL;
	c->fail_err = 0;                   /* a failure of an earlier request is not this one's */
	c->fail_state = KR_CONN_IDLE;
	if (nheaders)
		memcpy(headers, req->headers, nheaders * sizeof(headers[0]));
	if (req->body) {
		kr_snprintf(length, sizeof(length), "%zu", req->body_len);
		headers[nheaders++] = (struct kr_http_header){ "Content-Length", length };
	}
	if (req->inflate)
		headers[nheaders++] = (struct kr_http_header){ "Accept-Encoding", "gzip" };
	if (strchr(c->cfg.host, ':'))
		kr_snprintf(host, sizeof(host), "[%s]:%u", c->cfg.host, (unsigned)c->cfg.port);
	else if (c->cfg.port == 443)
		kr_snprintf(host, sizeof(host), "%s", c->cfg.host);
	else
		kr_snprintf(host, sizeof(host), "%s:%u", c->cfg.host, (unsigned)c->cfg.port);
	n = kr_http_write_request_ex(c->reqbuf, sizeof(c->reqbuf), req->method ? req->method : "GET",
				     host, req->path, req->params, req->nparams, req->bearer_token,
				     kr_target(), headers, nheaders);
	if (n < 0)
		return n;
	c->reqlen = (size_t)n;
	c->reqsent = 0;
	c->req = *req;
	c->req.params = NULL;          /* already written; not kept */
	c->req.path = NULL;
	c->req.bearer_token = NULL;
	c->req.headers = NULL;
	c->req.nheaders = 0;
	if (!req->body)
		c->req.body_len = 0;
	c->have_request = 1;
	c->retried = 0;
	c->response_started = 0;
	c->idle_ms = req->idle_timeout_ms > 0 ? req->idle_timeout_ms : c->cfg.idle_timeout_ms;
	c->requests++;
	kr_http_resp_init(&c->resp);
	if (c->state == KR_CONN_READY) {
		c->reused = 1;
		start_sending(c);
	} else if (c->state == KR_CONN_IDLE) {
		start_connect(c);
	}
	return 0;
}

void kr_conn_set_idle_timeout(struct kr_conn *c, int idle_ms)
{
	if (idle_ms <= 0)
		return;
	c->idle_ms = idle_ms;
	if (c->state == KR_CONN_RECEIVING && !c->held)
		arm(c, idle_ms);
}

void kr_conn_close(struct kr_conn *c, const char *reason)
{
	c->have_request = 0;
	drop_socket(c, reason);
}

void kr_conn_free(struct kr_conn *c)
{
	kr_conn_close(c, NULL);
	kr_tls_free(&c->tls);
	kr_loop_remove(c->loop, &c->src);
}

/*
 * A kept-alive connection can be closed by the server just as we reuse it.
 * If no byte of the answer came, the GET is resent once on a new connection.
 */
static int retry_stale(struct kr_conn *c)
{
	if (!c->reused || c->retried || c->response_started)
		return 0;
	kr_log(KR_LOG_DEBUG, "kept-alive connection to %s was closed; reconnecting", c->cfg.host);
	drop_socket(c, "kept-alive connection closed by the server");
	c->retried = 1;
	c->reqsent = 0;
	kr_http_resp_init(&c->resp);
	start_connect(c);
	return 1;
}

/* --- I/O ---------------------------------------------------------------------------- */

static long conn_read(struct kr_conn *c, void *buf, size_t len)
{
	if (c->cfg.tls) {
		long n = kr_tls_read(&c->tls, buf, len);

		if (n == KR_IO_WAIT)
			c->src.want = c->tls.want;
		return n;
	}
	return kr_port_recv(c->src.fd, buf, len);
}

static long conn_write(struct kr_conn *c, const void *buf, size_t len)
{
	if (c->cfg.tls) {
		long n = kr_tls_write(&c->tls, buf, len);

		if (n == KR_IO_WAIT)
			c->src.want = c->tls.want;
		return n;
	}
	return kr_port_send(c->src.fd, buf, len);
}

static void describe_io_error(struct kr_conn *c, const char *what, char *buf, size_t size)
{
	char tls[160];

	if (c->cfg.tls && c->tls.last_error) {
		kr_tls_describe(&c->tls, tls, sizeof(tls));
		kr_snprintf(buf, size, "%s: %s", what, tls);
	} else {
		kr_snprintf(buf, size, "%s: %s", what, kr_port_last_error());
	}
}

static void do_send(struct kr_conn *c)
{
	char why[160];

	/* The head from reqbuf, then the body from where the caller keeps it. */
	while (c->reqsent < c->reqlen + c->req.body_len) {
		long n = c->reqsent < c->reqlen
			 ? conn_write(c, c->reqbuf + c->reqsent, c->reqlen - c->reqsent)
			 : conn_write(c, c->req.body + (c->reqsent - c->reqlen),
				      c->req.body_len - (c->reqsent - c->reqlen));

		if (n == KR_IO_WAIT) {
			if (!c->cfg.tls)
				c->src.want = KR_POLL_OUT;
			return;
		}
		if (n < 0) {
			if (retry_stale(c))
				return;
			describe_io_error(c, "unable to send the request", why, sizeof(why));
			fail(c, KR_EIO, why);
			return;
		}
		c->reqsent += (size_t)n;
	}
	c->state = KR_CONN_RECEIVING;
	c->src.want = KR_POLL_IN;
	arm(c, c->idle_ms);
}

/* A callback refused the response (or closed c itself): close, and say so once. */
static int abandoned(struct kr_conn *c, unsigned gen)
{
	if (gen != c->gen)
		return 1;
	drop_socket(c, "request abandoned");
	if (c->have_request)
		end_request(c, KR_ECANCELED, "request abandoned");
	return 1;
}

/*
 * on_body took only part of body[0..blen): keep the rest, and rbuf[off, n)
 * after it. The read-idle deadline stops while c holds bytes back: they show
 * the server alive, and the wait is the caller's (kr_conn_resume restarts it).
 */
static void hold(struct kr_conn *c, const char *body, size_t blen, size_t off, size_t n)
{
	c->held = 1;
	c->held_body = body;
	c->held_blen = blen;
	c->held_off = off;
	c->held_n = n;
	c->src.want = 0;
	kr_loop_timer_cancel(c->loop, &c->timer);
}

/*
 * The head is in: a body coding must be one this request asked for. Returns
 * 0, or 1 after failing the request.
 */
static int check_coding(struct kr_conn *c)
{
	c->inflating = 0;
	if (c->resp.content_encoding == KR_HTTP_CE_IDENTITY)
		return 0;
	if (KR_WITH_GZIP && c->resp.content_encoding == KR_HTTP_CE_GZIP && c->req.inflate) {
		kr_inflate_reset(c->req.inflate);
		c->inflating = 1;
		return 0;
	}
	fail(c, KR_EPROTO, c->resp.content_encoding == KR_HTTP_CE_GZIP
			   ? "bad HTTP response: a gzip body the request did not ask for"
			   : "bad HTTP response: a Content-Encoding other than gzip");
	return 1;
}

static void inflate_failed(struct kr_conn *c, int err)
{
	char why[160];

	kr_snprintf(why, sizeof(why), "unable to inflate the gzip body: %s",
		    c->req.inflate->error ? c->req.inflate->error : kr_strerror(err));
	fail(c, err == KR_ETOOBIG ? KR_ETOOBIG : KR_EPROTO, why);
}

/*
 * Hands data[0..len) of the body to on_body, through the inflater when the
 * body is gzip. Returns the bytes of data used, with *stopped set if on_body
 * took less than it was given (for gzip, the decoded rest stays in the
 * inflater and comes first next time), or -1 when the request ended here.
 */
static long give(struct kr_conn *c, const char *data, size_t len, int *stopped)
{
	unsigned gen = c->gen;
	size_t off = 0;
	long took;

	*stopped = 0;
	if (!KR_WITH_GZIP || !c->inflating) {  /* without the inflater, the code below goes */
		took = c->req.on_body(c->req.arg, data, len);
		if (took < 0 || gen != c->gen) {
			abandoned(c, gen);
			return -1;
		}
		*stopped = (size_t)took < len;
		return took;
	}
	for (;;) {
		const char *out;
		size_t used, olen;
		int r = kr_inflate_feed(c->req.inflate, data + off, len - off, &used, &out, &olen);

		off += used;
		if (r < 0) {
			inflate_failed(c, r);
			return -1;
		}
		if (r == KR_INFLATE_END && off < len)
			continue;      /* bytes after the stream: the inflater fails them */
		if (r != KR_INFLATE_DATA)
			return (long)off;
		took = c->req.on_body(c->req.arg, out, olen);
		if (took < 0 || gen != c->gen) {
			abandoned(c, gen);
			return -1;
		}
		if ((size_t)took < olen) {
			kr_inflate_unread(c->req.inflate, olen - (size_t)took);
			*stopped = 1;
			return (long)off;
		}
	}
}

/* The body ended: a gzip body must have ended with its stream. 0, or 1 after failing. */
static int body_complete(struct kr_conn *c)
{
	int r;

	if (!c->inflating)
		return 0;
	r = kr_inflate_finish(c->req.inflate);
	if (r == KR_INFLATE_END)
		return 0;
	inflate_failed(c, r);
	return 1;
}

/*
 * Feeds rbuf[off, n). Returns 0 to go on reading, 1 when the request ended or
 * was abandoned or on_body stopped short.
 */
static int feed(struct kr_conn *c, size_t off, size_t n)
{
	unsigned gen = c->gen;

	c->response_started = 1;
	for (;;) {
		const char *body;
		size_t used = 0, blen = 0;
		int r = kr_http_resp_feed(&c->resp, c->rbuf + off, n - off, &used, &body, &blen);

		off += used;
		if (r == 0)
			return 0;
		if (r < 0) {
			char why[160];

			kr_snprintf(why, sizeof(why), "bad HTTP response: %s",
				 c->resp.error ? c->resp.error : kr_strerror(r));
			fail(c, KR_EPROTO, why);
			return 1;
		}
		if (r == KR_HTTP_HEAD && check_coding(c)) {
			return 1;
		} else if (r == KR_HTTP_HEAD && c->req.on_head) {
			if (c->req.on_head(c->req.arg, &c->resp) < 0 || gen != c->gen)
				return abandoned(c, gen);
		} else if (r == KR_HTTP_BODY && c->req.on_body) {
			int stopped;
			long took = give(c, body, blen, &stopped);

			if (took < 0)
				return 1;
			if (stopped) {
				hold(c, body + took, blen - (size_t)took, off, n);
				return 1;
			}
		} else if (r == KR_HTTP_DONE) {
			/* No pipelining: bytes after a response mean a confused server. */
			int keep = c->resp.keep_alive && off == n;

			if (body_complete(c))
				return 1;
			kr_loop_timer_cancel(c->loop, &c->timer);
			if (keep) {
				c->state = KR_CONN_READY;
				c->src.want = KR_POLL_IN;
			} else {
				drop_socket(c, c->resp.keep_alive ? "unexpected bytes after a response"
								  : "server asked to close");
			}
			end_request(c, 0, "complete");
			return 1;
		}
	}
}

static void do_receive(struct kr_conn *c)
{
	char why[160];
	int turn;

	for (turn = 0; turn < READS_PER_TURN; turn++) {
		long n = conn_read(c, c->rbuf, sizeof(c->rbuf));

		if (n == KR_IO_WAIT) {
			if (!c->cfg.tls)
				c->src.want = KR_POLL_IN;
			return;
		}
		if (n == 0) {
			int r = kr_http_resp_eof(&c->resp);

			/* A body that ends at the close is whole only if TLS says so. */
			if (r == KR_HTTP_DONE && c->cfg.tls && c->tls.unclean_eof &&
			    !c->resp.chunked && c->resp.content_length < 0) {
				fail(c, KR_EPROTO, "TLS closed without close_notify: the body may be cut short");
			} else if (r == KR_HTTP_DONE) {
				if (body_complete(c))
					return;
				drop_socket(c, "server closed after the response");
				end_request(c, 0, "complete");
			} else if (r == KR_ECLOSED && retry_stale(c)) {
				return;
			} else {
				if (r == KR_ECLOSED)
					kr_snprintf(why, sizeof(why), "the server closed the connection before any response");
				else
					kr_snprintf(why, sizeof(why), "the server closed the connection mid-response (%s)",
						 c->resp.error ? c->resp.error : "cut short");
				fail(c, KR_ECLOSED, why);
			}
			return;
		}
		if (n < 0) {
			if (!c->response_started && retry_stale(c))
				return;
			describe_io_error(c, "unable to read the response", why, sizeof(why));
			fail(c, c->cfg.tls && c->tls.last_error ? KR_ETLS : KR_EIO, why);
			return;
		}
		c->bytes_in += (unsigned long long)n;
		/* Any byte resets the read-idle deadline (cheap: no system call). */
		c->timer.deadline = kr_port_now_ms() + c->idle_ms;
		if (feed(c, 0, (size_t)n))
			return;
	}
}

void kr_conn_resume(struct kr_conn *c)
{
	int stopped;
	long took;

	if (!c->held || c->state != KR_CONN_RECEIVING)
		return;
	c->held = 0;
	arm(c, c->idle_ms);
	took = give(c, c->held_body, c->held_blen, &stopped);
	if (took < 0)
		return;
	if (stopped) {
		hold(c, c->held_body + took, c->held_blen - (size_t)took, c->held_off, c->held_n);
		return;
	}
	if (feed(c, c->held_off, c->held_n))
		return;
	/* Read on: what the socket or TLS holds, until it would block. */
	c->src.want = KR_POLL_IN;
	do_receive(c);
}

static void do_handshake(struct kr_conn *c)
{
	char why[200];
	int r = kr_tls_handshake(&c->tls);

	if (r == 0) {
		c->src.want = c->tls.want;
		return;
	}
	if (r < 0) {
		char tls[160];

		kr_tls_describe(&c->tls, tls, sizeof(tls));
		kr_snprintf(why, sizeof(why), "TLS handshake failed: %s", tls);
		fail(c, KR_ETLS, why);
		return;
	}
	if (c->cfg.tls->insecure)
		kr_log(KR_LOG_WARN, "TLS certificate of %s NOT verified (--insecure-skip-tls-verify)",
		       c->cfg.host);
	kr_log(KR_LOG_DEBUG, "connected to %s:%u%s with %s %s (%s)", c->cfg.host,
	       (unsigned)c->cfg.port, c->cfg.proxy ? " through the proxy" : "",
	       kr_tls_version(&c->tls), kr_tls_cipher(&c->tls),
	       c->tls.saw_certificate ? "full handshake" : "resumed");
	c->reused = 0;
	start_sending(c);
}

/*
 * The CONNECT exchange, on the raw socket: send the request from rbuf, then
 * read the proxy's answer head into rbuf. A 200 has no body, and nothing
 * may follow it before we speak: TLS starts with our ClientHello, so any
 * extra byte is a confused (or hostile) proxy and ends the connection.
 */
static void do_proxy(struct kr_conn *c)
{
	char proxy[KR_PROXY_HOST_MAX + 16];
	char why[sizeof(c->reason)];

	if (strchr(dial_host(c), ':'))
		kr_snprintf(proxy, sizeof(proxy), "[%s]:%u", dial_host(c), (unsigned)dial_port(c));
	else
		kr_snprintf(proxy, sizeof(proxy), "%s:%u", dial_host(c), (unsigned)dial_port(c));
	while (c->proxysent < c->proxylen) {
		long n = kr_port_send(c->src.fd, c->rbuf + c->proxysent, c->proxylen - c->proxysent);

		if (n == KR_IO_WAIT) {
			c->src.want = KR_POLL_OUT;
			return;
		}
		if (n < 0) {
			kr_snprintf(why, sizeof(why), "unable to send CONNECT to proxy %s: %s", proxy,
				 kr_port_last_error());
			fail(c, KR_EIO, why);
			return;
		}
		c->proxysent += (size_t)n;
	}
	for (;;) {
		const char *body;
		size_t used = 0, blen = 0;
		long n = kr_port_recv(c->src.fd, c->rbuf, sizeof(c->rbuf));
		int r;

		if (n == KR_IO_WAIT) {
			c->src.want = KR_POLL_IN;
			return;
		}
		if (n == 0) {
			kr_snprintf(why, sizeof(why), "proxy %s closed the connection before answering CONNECT",
				 proxy);
			fail(c, KR_ECLOSED, why);
			return;
		}
		if (n < 0) {
			kr_snprintf(why, sizeof(why), "unable to read the CONNECT answer of proxy %s: %s",
				 proxy, kr_port_last_error());
			fail(c, KR_EIO, why);
			return;
		}
		r = kr_http_resp_feed(&c->resp, c->rbuf, (size_t)n, &used, &body, &blen);
		if (r == 0)
			continue;
		if (r < 0 || r != KR_HTTP_HEAD) {
			kr_snprintf(why, sizeof(why), "bad CONNECT answer from proxy %s: %s", proxy,
				 c->resp.error ? c->resp.error : kr_strerror(r));
			fail(c, KR_EPROTO, why);
			return;
		}
		if (c->resp.status != 200) {
			int st = c->resp.status;
			const char *text = kr_proxy_status_text(st);

			kr_snprintf(why, sizeof(why), "proxy %s refused CONNECT: %d%s%s%s", proxy, st,
				 *text ? " " : "", text,
				 st != 407 ? "" : c->cfg.proxy->auth[0] ? " (credentials refused)"
									  : " (no credentials in the proxy URL)");
			fail(c, st == 407 ? KR_EAUTH : KR_EIO, why);
			return;
		}
		if (used != (size_t)n) {
			kr_snprintf(why, sizeof(why), "proxy %s sent %zu unexpected bytes after its CONNECT answer",
				 proxy, (size_t)n - used);
			fail(c, KR_EPROTO, why);
			return;
		}
		kr_log(KR_LOG_DEBUG, "proxy %s opened a tunnel to %s:%u", proxy, c->cfg.host,
		       (unsigned)c->cfg.port);
		kr_http_resp_init(&c->resp);   /* fresh for the API server's response */
		tunnel_up(c);
		if (c->state == KR_CONN_HANDSHAKE)
			do_handshake(c);
		else if (c->state == KR_CONN_SENDING)
			do_send(c);
		return;
	}
}

static void on_ready(struct kr_loop *loop, struct kr_source *s, int got)
{
	struct kr_conn *c = s->arg;
	char why[160];
	int r;

	(void)loop;
	switch (c->state) {
	case KR_CONN_RESOLVING:
		r = kr_port_resolve_finish(c->resolve_fd, dial_port(c), c->addrs, KR_CONN_MAX_ADDRS, 0);
		if (r == KR_IO_WAIT)
			return;
		c->resolve_fd = -1;
		c->src.fd = -1;
		if (r <= 0) {
			kr_snprintf(why, sizeof(why), "unable to resolve %shost name '%s'", via(c), dial_host(c));
			fail(c, KR_ENOENT, why);
			return;
		}
		c->naddrs = r;
		c->resolved_at = kr_port_now_ms();
		try_connect(c);
		return;
	case KR_CONN_CONNECTING:
		r = kr_port_connect_result(s->fd);
		if (r != 0) {
			char addr[64];

			kr_port_addr_format(&c->addrs[c->addr_index], addr, sizeof(addr));
			kr_log(KR_LOG_DEBUG, "unable to connect to %s%s: %s", via(c), addr, kr_port_last_error());
			kr_port_close(s->fd);
			s->fd = -1;
			if (c->addr_index + 1 < c->naddrs) {
				c->addr_index++;
				try_connect(c);
				return;
			}
			kr_snprintf(why, sizeof(why), "unable to connect to %s%s: %s", via(c), addr,
				 kr_port_last_error());
			c->resolved_at = 0;    /* look the name up again next time */
			fail(c, KR_EIO, why);
			return;
		}
		connected(c);
		if (KR_WITH_PROXY && c->state == KR_CONN_PROXY)
			do_proxy(c);
		else if (c->state == KR_CONN_HANDSHAKE)
			do_handshake(c);
		return;
	case KR_CONN_PROXY:
		/* Only a build with the proxy reaches this state (connected()). */
		if (KR_WITH_PROXY)
			do_proxy(c);
		return;
	case KR_CONN_HANDSHAKE:
		do_handshake(c);
		if (c->state == KR_CONN_SENDING)
			do_send(c);
		return;
	case KR_CONN_SENDING:
		do_send(c);
		return;
	case KR_CONN_RECEIVING:
		do_receive(c);
		return;
	case KR_CONN_READY:
		/* Nothing is expected between requests: EOF or junk ends the connection. */
		if (got & (KR_POLL_IN | KR_POLL_ERR)) {
			long n = conn_read(c, c->rbuf, sizeof(c->rbuf));

			if (n != KR_IO_WAIT)
				drop_socket(c, n == 0 ? "server closed the idle connection"
						      : "unexpected bytes on an idle connection");
		}
		return;
	case KR_CONN_IDLE:
	case KR_CONN_NSTATES:
		s->want = 0;
		return;
	}
}

static void on_deadline(struct kr_loop *loop, struct kr_timer *t)
{
	struct kr_conn *c = t->arg;
	char why[192];

	(void)loop;
	if (c->state == KR_CONN_RECEIVING)
		kr_snprintf(why, sizeof(why), "%s (%d ms)", deadline_reason[c->state], c->idle_ms);
	else
		kr_snprintf(why, sizeof(why), "%s", deadline_reason[c->state] ? deadline_reason[c->state]
									    : "deadline passed");
	fail(c, KR_ETIMEDOUT, why);
}
