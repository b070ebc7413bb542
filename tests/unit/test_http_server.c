#include <stdio.h>
#include <string.h>

#include "http_server.h"
#include "kreflect.h"
#include "test.h"

/* What one parse said, to compare feeds split in different places. */
struct got {
	int rc;
	size_t used;
	int status;
	int method;
	char target[KR_SERVE_TARGET_MAX];
	int minor, keep_alive, has_body, has_auth;
	char auth[KR_HTTP_SERVER_AUTH_MAX];
};

/* Feeds in[0..len) as [0, cut) then the rest, or byte by byte (cut == (size_t)-1). */
static int parse(const char *in, size_t len, size_t cut, struct got *g)
{
	static struct kr_http_server_req r;
	size_t pos = 0;

	memset(g, 0, sizeof(*g));
	kr_http_server_init(&r);
	g->rc = 0;
	while (pos < len) {
		size_t n = cut == (size_t)-1 ? 1 : pos < cut ? cut - pos : len - pos, used = 99;

		if (n > len - pos)
			n = len - pos;
		g->rc = kr_http_server_feed(&r, in + pos, n, &used);
		check(used <= n);
		pos += used;
		if (g->rc != 0)
			break;
		check(used == n);
	}
	g->used = pos;
	g->status = r.status;
	g->method = r.method;
	memcpy(g->target, r.target, sizeof(g->target));
	g->minor = r.minor;
	g->keep_alive = r.keep_alive;
	g->has_body = r.has_body;
	g->has_auth = r.has_auth;
	memcpy(g->auth, r.auth, sizeof(g->auth));
	if (g->rc < 0) {
		size_t u = 7;

		/* A failed reader stays failed. */
		check(kr_http_server_feed(&r, "GET / HTTP/1.1\r\n\r\n", 18, &u) == KR_EPROTO && u == 0);
	}
	return 0;
}

static int same_got(const struct got *a, const struct got *b)
{
	return a->rc == b->rc && a->used == b->used && a->status == b->status &&
	       a->method == b->method && strcmp(a->target, b->target) == 0 && a->minor == b->minor &&
	       a->keep_alive == b->keep_alive && a->has_body == b->has_body &&
	       a->has_auth == b->has_auth && strcmp(a->auth, b->auth) == 0;
}

/* Parses whole, split at every byte boundary and byte by byte: all must agree. */
static int parse_all_ways(const char *in, size_t len, struct got *whole)
{
	static struct got other;
	size_t cut;

	check(parse(in, len, len, whole) == 0);
	for (cut = 0; cut <= len; cut++) {
		check(parse(in, len, cut, &other) == 0);
		check(same_got(whole, &other));
	}
	check(parse(in, len, (size_t)-1, &other) == 0);
	check(same_got(whole, &other));
	return 0;
}

KR_TEST(http_server, get_with_headers_every_split)
{
	static const char req[] =
		"GET /api/v1/namespaces/default/configmaps?watch=1&labelSelector=a%3Db HTTP/1.1\r\n"
		"Host: 127.0.0.1:8080\r\nUser-Agent: kubectl/v1.32\r\n"
		"authorization:   Bearer s3cret-token  \r\nAccept: application/json\r\n\r\n"
		"GET /next";
	static struct got g;

	check(parse_all_ways(req, sizeof(req) - 1, &g) == 0);
	check(g.rc == 1);
	check(g.used == sizeof(req) - 1 - strlen("GET /next"));
	check(g.method == KR_HM_GET && g.minor == 1 && g.keep_alive && !g.has_body);
	check(strcmp(g.target, "/api/v1/namespaces/default/configmaps?watch=1&labelSelector=a%3Db") == 0);
	check(g.has_auth && strcmp(g.auth, "Bearer s3cret-token") == 0);
	return 0;
}

KR_TEST(http_server, keep_alive_rules)
{
	static struct got g;
	static const char a[] = "GET / HTTP/1.0\r\n\r\n";
	static const char b[] = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
	static const char c[] = "HEAD / HTTP/1.1\r\nConnection: foo, close\r\n\r\n";
	static const char d[] = "GET / HTTP/1.1\nHost: x\n\n";   /* bare LF lines */
	static const char e[] = "DELETE /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
	static const char f[] = "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";

	check(parse_all_ways(a, sizeof(a) - 1, &g) == 0 && g.rc == 1 && !g.keep_alive && g.minor == 0);
	check(parse_all_ways(b, sizeof(b) - 1, &g) == 0 && g.rc == 1 && g.keep_alive);
	check(parse_all_ways(c, sizeof(c) - 1, &g) == 0 && g.rc == 1 && !g.keep_alive &&
	      g.method == KR_HM_HEAD);
	check(parse_all_ways(d, sizeof(d) - 1, &g) == 0 && g.rc == 1 && g.keep_alive);
	check(parse_all_ways(e, sizeof(e) - 1, &g) == 0 && g.rc == 1 && g.has_body && !g.keep_alive &&
	      g.method == KR_HM_OTHER && g.used == sizeof(e) - 1 - 5);
	check(parse_all_ways(f, sizeof(f) - 1, &g) == 0 && g.rc == 1 && g.has_body && !g.keep_alive);
	return 0;
}

static int expect_error(const char *in, size_t len, int status)
{
	static struct got g;

	check(parse_all_ways(in, len, &g) == 0);
	check(g.rc == KR_EPROTO);
	check(g.status == status);
	return 0;
}

#define ERR(lit, status) check(expect_error(lit, sizeof(lit) - 1, status) == 0)

KR_TEST(http_server, syntax_errors)
{
	ERR("G(T / HTTP/1.1\r\n\r\n", 400);
	ERR("GET  HTTP/1.1\r\n\r\n", 400);
	ERR("GET x HTTP/1.1\r\n\r\n", 400);
	ERR("GET /a\x01 HTTP/1.1\r\n\r\n", 400);
	ERR("GET /\xff HTTP/1.1\r\n\r\n", 400);
	ERR("GET / HTTP/2.0\r\n\r\n", 505);
	ERR("GET / HTTP/1.1x\r\n\r\n", 400);
	ERR("GET / http/1.1\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\rX\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\n folded: yes\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\n: empty\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nContent-Length: 1234567890123\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 400);
	ERR("GET / HTTP/1.1\r\nX: y\r\r\n", 400);
	ERR("VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n", 501);
	ERR("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
	    "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", 400);
	return 0;
}

/* A request whose target is n bytes ("/" and 'a's). */
static size_t with_target(char *buf, size_t size, size_t n)
{
	size_t len = 0;

	len += (size_t)snprintf(buf, size, "GET /");
	memset(buf + len, 'a', n - 1);
	len += n - 1;
	len += (size_t)snprintf(buf + len, size - len, " HTTP/1.1\r\n\r\n");
	return len;
}

KR_TEST(http_server, bounds_hit_exactly)
{
	static char buf[KR_SERVE_IN_BYTES * 2];
	static struct got g;
	size_t len, i;

	/* The longest target fits; one more byte is 414. */
	len = with_target(buf, sizeof(buf), KR_SERVE_TARGET_MAX - 1);
	check(parse(buf, len, len, &g) == 0 && g.rc == 1 && strlen(g.target) == KR_SERVE_TARGET_MAX - 1);
	len = with_target(buf, sizeof(buf), KR_SERVE_TARGET_MAX);
	check(parse(buf, len, len, &g) == 0 && g.rc == KR_EPROTO && g.status == 414);
	check(parse(buf, len, (size_t)-1, &g) == 0 && g.rc == KR_EPROTO && g.status == 414);

	/* The whole head: exactly KR_SERVE_IN_BYTES is read, one more is 431. */
	len = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nX: ");
	memset(buf + len, 'v', KR_SERVE_IN_BYTES - len - 4);
	len = KR_SERVE_IN_BYTES - 4;
	memcpy(buf + len, "\r\n\r\n", 4);
	len += 4;
	check(parse(buf, len, len, &g) == 0 && g.rc == 1);
	memmove(buf + 20, buf + 19, len - 19);
	len++;
	check(parse(buf, len, len, &g) == 0 && g.rc == KR_EPROTO && g.status == 431);

	/* Header lines: KR_HTTP_SERVER_MAX_HEADERS pass, one more is 431. */
	len = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	for (i = 0; i < KR_HTTP_SERVER_MAX_HEADERS; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "H%zu: v\r\n", i);
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "\r\n");
	check(parse(buf, len, len, &g) == 0 && g.rc == 1);
	len -= 2;
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "One: more\r\n\r\n");
	check(parse(buf, len, len, &g) == 0 && g.rc == KR_EPROTO && g.status == 431);

	/* A header name of KR_HTTP_SERVER_NAME_MAX bytes passes; one more is 431. */
	len = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	memset(buf + len, 'n', KR_HTTP_SERVER_NAME_MAX);
	len += KR_HTTP_SERVER_NAME_MAX;
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, ": v\r\n\r\n");
	check(parse(buf, len, len, &g) == 0 && g.rc == 1);
	memmove(buf + 17, buf + 16, len - 16);
	len++;
	check(parse(buf, len, len, &g) == 0 && g.rc == KR_EPROTO && g.status == 431);

	/* An Authorization value of KR_HTTP_SERVER_AUTH_MAX - 1 bytes passes; one more is 431. */
	len = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nAuthorization: ");
	memset(buf + len, 't', KR_HTTP_SERVER_AUTH_MAX - 1);
	len += KR_HTTP_SERVER_AUTH_MAX - 1;
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "\r\n\r\n");
	check(parse(buf, len, len, &g) == 0 && g.rc == 1 && strlen(g.auth) == KR_HTTP_SERVER_AUTH_MAX - 1);
	memmove(buf + 32, buf + 31, len - 31);
	len++;
	check(parse(buf, len, len, &g) == 0 && g.rc == KR_EPROTO && g.status == 431);
	return 0;
}

KR_TEST(http_server, query_parameters)
{
	char out[16];

	check(kr_http_server_param("/x?a=1&b=two+words&c=%41%2f%3d&d&e=", "b", out, sizeof(out)) == 9 &&
	      strcmp(out, "two words") == 0);
	check(kr_http_server_param("/x?a=1&b=2", "a", out, sizeof(out)) == 1 && strcmp(out, "1") == 0);
	check(kr_http_server_param("/x?a=1&b=%41%2f%3d", "b", out, sizeof(out)) == 3 &&
	      strcmp(out, "A/=") == 0);
	check(kr_http_server_param("/x?d&e=", "d", out, sizeof(out)) == 0 && out[0] == '\0');
	check(kr_http_server_param("/x?d&e=", "e", out, sizeof(out)) == 0 && out[0] == '\0');
	check(kr_http_server_param("/x?a=1&a=2", "a", out, sizeof(out)) == 1 && out[0] == '1');
	check(kr_http_server_param("/x?%61=enc", "a", out, sizeof(out)) == 3);
	check(kr_http_server_param("/x?a=1", "b", out, sizeof(out)) == KR_ENOENT);
	check(kr_http_server_param("/x", "a", out, sizeof(out)) == KR_ENOENT);
	check(kr_http_server_param("/x?aa=1", "a", out, sizeof(out)) == KR_ENOENT);
	check(kr_http_server_param("/x?a=%zz", "a", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_param("/x?a=%4", "a", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_param("/x?a=%", "a", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_param("/x?a=%00", "a", out, sizeof(out)) == KR_EINVAL);
	/* The buffer's bound: 15 bytes and the NUL fit, 16 do not. */
	check(kr_http_server_param("/x?a=123456789012345", "a", out, sizeof(out)) == 15);
	check(kr_http_server_param("/x?a=1234567890123456", "a", out, sizeof(out)) == KR_ETOOBIG);
	check(kr_http_server_param("/x?a=1", "a", out, 0) == KR_ETOOBIG);
	return 0;
}

KR_TEST(http_server, path_decoding)
{
	char out[16];

	check(kr_http_server_path("/api/v1?x=%2F", out, sizeof(out)) == 7 && strcmp(out, "/api/v1") == 0);
	check(kr_http_server_path("/a%62c", out, sizeof(out)) == 4 && strcmp(out, "/abc") == 0);
	check(kr_http_server_path("/a+b", out, sizeof(out)) == 4 && strcmp(out, "/a+b") == 0);
	check(kr_http_server_path("/a%2Fb", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_path("/a%2fb", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_path("/a%00", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_path("/a%g0", out, sizeof(out)) == KR_EINVAL);
	check(kr_http_server_path("/23456789012345", out, sizeof(out)) == 15);
	check(kr_http_server_path("/234567890123456", out, sizeof(out)) == KR_ETOOBIG);
	return 0;
}

KR_TEST(http_server, constant_time_compare)
{
	check(kr_http_server_same("abc", "abc", 3));
	check(!kr_http_server_same("abc", "abd", 3));
	check(!kr_http_server_same("xbc", "abc", 3));
	check(kr_http_server_same("", "", 0));
	return 0;
}
