#include <stdio.h>
#include <string.h>

#include "http_post.h"
#include "kreflect.h"
#include "test.h"

static struct kr_http_post p;
static struct kr_loop loop;

static int init(const char *url, char *err, size_t errlen)
{
	kr_loop_init(&loop);
	return kr_http_post_init(&p, &loop, url, 0, 1, err, errlen);
}

/* Nonzero if s occurs in buf[0..len) (the buffers are not NUL-terminated). */
static int has(const char *buf, size_t len, const char *s)
{
	size_t n = strlen(s), i;

	for (i = 0; i + n <= len; i++)
		if (memcmp(buf + i, s, n) == 0)
			return 1;
	return 0;
}

static void event(enum kr_event_type type, const char *key, const char *rv)
{
	struct kr_event ev = { type, 0, "configmaps", key, rv, key ? "{}" : NULL, key ? 2 : 0, 7, 0, 0, 0 };

	kr_http_post_event(&p, &ev);
}

KR_TEST(http_post, urls_taken_and_refused)
{
	static char longpath[1200];
	char err[256];

	check(init("http://127.0.0.1:8080/hook?token=x", err, sizeof(err)) == 0);
	check(strcmp(p.conn.cfg.host, "127.0.0.1") == 0 && p.conn.cfg.port == 8080);
	check(strcmp(p.path, "/hook?token=x") == 0);
	check(strcmp(p.url, "http://127.0.0.1:8080/hook") == 0);   /* the query is never logged */
	check(p.conn.cfg.tls == NULL && p.conn.cfg.proxy == NULL && kr_http_post_loopback(&p));
	check(init("http://[::1]:9", err, sizeof(err)) == 0);
	check(strcmp(p.conn.cfg.host, "::1") == 0 && p.conn.cfg.port == 9 && strcmp(p.path, "/") == 0);
	check(strcmp(p.url, "http://[::1]:9/") == 0 && kr_http_post_loopback(&p));
	check(init("http://localhost", err, sizeof(err)) == 0);
	check(p.conn.cfg.port == 80 && kr_http_post_loopback(&p));
	check(init("http://agent.local?q=1", err, sizeof(err)) == 0);
	check(strcmp(p.path, "/?q=1") == 0 && !kr_http_post_loopback(&p));
	check(init("http://127.0.0.1.example.com/", err, sizeof(err)) == 0 && !kr_http_post_loopback(&p));

	check(init("https://127.0.0.1/", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "https:// is not supported") != NULL);
	check(init("ftp://h/", err, sizeof(err)) == KR_EINVAL && strstr(err, "must be http://"));
	check(init("http://", err, sizeof(err)) == KR_EINVAL);
	check(init("http://:80/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h:0/", err, sizeof(err)) == KR_EINVAL && strstr(err, "bad port"));
	check(init("http://h:65536/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h:99999999999999999999/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h:80x/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h:/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://u:pw@h/", err, sizeof(err)) == KR_EINVAL && strstr(err, "user:password@"));
	check(init("http://h/a b", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h/a#b", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h/a\r\nX: y", err, sizeof(err)) == KR_EINVAL);
	check(init("http://[::1/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h]x/", err, sizeof(err)) == KR_EINVAL);
	check(init("http://h%2f/", err, sizeof(err)) == KR_EINVAL);
	memcpy(longpath, "http://h/", 9);
	memset(longpath + 9, 'a', sizeof(longpath) - 10);
	check(init(longpath, err, sizeof(err)) == KR_EINVAL && strstr(err, "path longer than"));
	return 0;
}

KR_TEST(http_post, first_batch_lines_and_escapes)
{
	static const char first[] =
		"{\"type\":\"ADDED\",\"resource\":\"configmaps\",\"key\":\"default/a\\\"b\\\\c\","
		"\"resourceVersion\":\"5\"}\n"
		"{\"type\":\"SYNCED\",\"resource\":\"configmaps\",\"resourceVersion\":\"9\",\"count\":7}\n";
	char err[256];

	check(init("http://127.0.0.1:1/", err, sizeof(err)) == 0);
	event(KR_EV_ADDED, "default/a\"b\\c", "5");
	event(KR_EV_RESYNC, "default/x", "5");           /* not a change: no line */
	check(!kr_http_post_flush(&p));                   /* nothing before the first sync */
	event(KR_EV_SYNCED, NULL, "9");
	check(kr_http_post_flush(&p) == 1 && kr_http_post_busy(&p));
	check(p.body_changes == 1 && p.attempt == 1);
	check(memchr(p.body, 0, p.body_len) == NULL);
	check(p.body_len == strlen(first) && memcmp(p.body, first, p.body_len) == 0);
	/* While it is delivered, changes collect for the next batch; later SYNCEDs add nothing. */
	event(KR_EV_MODIFIED, "default/a", "10");
	event(KR_EV_SYNCED, NULL, "11");
	check(!kr_http_post_flush(&p));
	check(p.next_len > 0 && !has(p.next, p.next_len, "SYNCED") && has(p.next, p.next_len, "\"10\""));
	kr_conn_close(&p.conn, NULL);
	return 0;
}

KR_TEST(http_post, a_window_larger_than_a_batch_ends_in_dropped)
{
	char err[256], key[64];
	const char *mark;
	unsigned long dropped = 0, kept = 0;
	size_t i;
	int n;

	check(init("http://127.0.0.1:1/", err, sizeof(err)) == 0);
	for (n = 0; n < 2000; n++) {
		snprintf(key, sizeof(key), "default/object-%05d", n);
		event(KR_EV_ADDED, key, "1");
	}
	event(KR_EV_SYNCED, NULL, "2");
	check(kr_http_post_flush(&p) == 1);
	check(p.body_len <= sizeof(p.body) && p.body_len > sizeof(p.body) - 200);
	check(p.body[p.body_len - 1] == '\n');
	for (i = 0; i < p.body_len; i++)
		kept += p.body[i] == '\n';
	check(has(p.body, p.body_len, "{\"type\":\"DROPPED\",\"events\":"));
	for (mark = p.body + p.body_len - 2; mark > p.body && mark[-1] != '\n'; mark--)
		;
	check(sscanf(mark, "{\"type\":\"DROPPED\",\"events\":%lu}", &dropped) == 1);
	check(kept - 1 + dropped == 2001);                 /* every ADDED and the SYNCED */
	check(has(p.body, p.body_len, "default/object-00000") && !has(p.body, p.body_len, "SYNCED"));
	kr_conn_close(&p.conn, NULL);
	return 0;
}
