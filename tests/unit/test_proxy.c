/* src/proxy: proxy URL, NO_PROXY (Go httpproxy semantics), choice, CONNECT bytes. */
#include <string.h>

#include "kreflect.h"
#include "proxy.h"
#include "test.h"

static struct kr_proxy p;
static char err[200];

KR_TEST(proxy, url_plain_default_port)
{
	check(kr_proxy_parse(&p, "http://proxy.corp", err, sizeof(err)) == 0);
	check(strcmp(p.host, "proxy.corp") == 0);
	check(p.port == 80);
	check(p.auth[0] == '\0');
	check(kr_proxy_parse(&p, "http://10.1.2.3:3128/", err, sizeof(err)) == 0);
	check(strcmp(p.host, "10.1.2.3") == 0 && p.port == 3128);
	return 0;
}

KR_TEST(proxy, url_without_scheme_is_http)
{
	check(kr_proxy_parse(&p, "proxy:8080", err, sizeof(err)) == 0);
	check(strcmp(p.host, "proxy") == 0 && p.port == 8080);
	return 0;
}

KR_TEST(proxy, url_ipv6)
{
	check(kr_proxy_parse(&p, "http://[fd00::1]:3128", err, sizeof(err)) == 0);
	check(strcmp(p.host, "fd00::1") == 0 && p.port == 3128);
	check(kr_proxy_parse(&p, "http://[::1]", err, sizeof(err)) == 0);
	check(strcmp(p.host, "::1") == 0 && p.port == 80);
	check(kr_proxy_parse(&p, "[::1]:3128", err, sizeof(err)) == 0);
	check(strcmp(p.host, "::1") == 0 && p.port == 3128);
	check(kr_proxy_parse(&p, "http://[fd00::1:3128", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://[proxy]:3128", err, sizeof(err)) == KR_EINVAL);
	return 0;
}

KR_TEST(proxy, url_userinfo_basic_auth)
{
	/* base64("user:pass") = dXNlcjpwYXNz */
	check(kr_proxy_parse(&p, "http://user:pass@proxy:3128", err, sizeof(err)) == 0);
	check(strcmp(p.auth, "Basic dXNlcjpwYXNz") == 0);
	check(strcmp(p.host, "proxy") == 0 && p.port == 3128);
	/* percent-decoded: "a@b" : "p:w%" -> base64("a@b:p:w%") = YUBiOnA6dyU= */
	check(kr_proxy_parse(&p, "http://a%40b:p%3aw%25@proxy", err, sizeof(err)) == 0);
	check(strcmp(p.auth, "Basic YUBiOnA6dyU=") == 0);
	/* user only: "u:" -> dTo= */
	check(kr_proxy_parse(&p, "http://u@proxy", err, sizeof(err)) == 0);
	check(strcmp(p.auth, "Basic dTo=") == 0);
	/* an '@' in the password, unencoded: the last '@' ends the userinfo */
	check(kr_proxy_parse(&p, "http://u:p@ss@proxy", err, sizeof(err)) == 0);
	check(strcmp(p.host, "proxy") == 0);
	check(strcmp(p.auth, "Basic dTpwQHNz") == 0);
	return 0;
}

KR_TEST(proxy, url_refused_schemes)
{
	check(kr_proxy_parse(&p, "https://proxy:3128", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "https:// proxies are not supported") != NULL);
	check(kr_proxy_parse(&p, "socks5://proxy:1080", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "only http://") != NULL);
	return 0;
}

KR_TEST(proxy, url_malformed)
{
	check(kr_proxy_parse(&p, "", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://:3128", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://proxy:", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://proxy:0", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://proxy:65536", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://proxy:99999999999999999999", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://proxy:31a", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://pro xy:3128", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://u:p%zz@proxy", err, sizeof(err)) == KR_EINVAL);
	check(kr_proxy_parse(&p, "http://u:p%4@proxy", err, sizeof(err)) == KR_EINVAL);
	return 0;
}

KR_TEST(proxy, url_error_never_quotes_the_password)
{
	check(kr_proxy_parse(&p, "http://user:s3cret@:0", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "s3cret") == NULL);
	check(kr_proxy_parse(&p, "http://user:s3cret%zz@proxy", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "s3cret") == NULL);
	return 0;
}

KR_TEST(proxy, url_credentials_too_long)
{
	char url[1200];
	size_t i;

	memcpy(url, "http://u:", 9);
	for (i = 9; i < 9 + 600; i++)
		url[i] = 'x';
	memcpy(url + i, "@proxy", 7);
	check(kr_proxy_parse(&p, url, err, sizeof(err)) == KR_EINVAL);
	return 0;
}

KR_TEST(proxy, redact)
{
	char buf[128];

	kr_proxy_redact("http://user:pass@proxy:3128", buf, sizeof(buf));
	check(strcmp(buf, "http://proxy:3128") == 0);
	kr_proxy_redact("http://proxy:3128/", buf, sizeof(buf));
	check(strcmp(buf, "http://proxy:3128/") == 0);
	kr_proxy_redact("u:p@proxy", buf, sizeof(buf));
	check(strcmp(buf, "proxy") == 0);
	/* found by fuzz_proxy: a "://" after the userinfo is no scheme, and hid it from the redaction */
	kr_proxy_redact("u:s3cret@proxy:3128/x://y", buf, sizeof(buf));
	check(strcmp(buf, "proxy:3128/x://y") == 0);
	kr_proxy_redact("HTTP://u:s3cret@proxy", buf, sizeof(buf));
	check(strcmp(buf, "HTTP://proxy") == 0);
	return 0;
}

KR_TEST(proxy, scheme_only_at_the_start)
{
	/* as Go reads HTTPS_PROXY: no scheme, then http:// is assumed */
	check(kr_proxy_parse(&p, "u:pw@proxy:3128/x://y", err, sizeof(err)) == 0);
	check(strcmp(p.host, "proxy") == 0 && p.port == 3128);
	check(strcmp(p.auth, "Basic dTpwdw==") == 0);
	/* schemes compare without case */
	check(kr_proxy_parse(&p, "HTTP://proxy:8080", err, sizeof(err)) == 0 && p.port == 8080);
	check(kr_proxy_parse(&p, "HTTPS://proxy:8443", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "https:// proxies are not supported") != NULL);
	check(kr_proxy_parse(&p, "socks5://proxy:1080", err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "unsupported proxy scheme") != NULL);
	return 0;
}

KR_TEST(proxy, bypass_empty_and_star)
{
	check(kr_proxy_bypass(NULL, "api.example.com") == 0);
	check(kr_proxy_bypass("", "api.example.com") == 0);
	check(kr_proxy_bypass(" , ,", "api.example.com") == 0);
	check(kr_proxy_bypass("*", "api.example.com") == 1);
	check(kr_proxy_bypass("foo, * ", "10.0.0.1") == 1);
	return 0;
}

KR_TEST(proxy, bypass_exact_and_suffix)
{
	/* "example.com" matches itself and subdomains */
	check(kr_proxy_bypass("example.com", "example.com") == 1);
	check(kr_proxy_bypass("example.com", "a.example.com") == 1);
	check(kr_proxy_bypass("example.com", "a.b.example.com") == 1);
	check(kr_proxy_bypass("example.com", "badexample.com") == 0);
	check(kr_proxy_bypass("example.com", "example.com.evil") == 0);
	/* ".example.com" (and "*.example.com") subdomains only, as Go */
	check(kr_proxy_bypass(".example.com", "a.example.com") == 1);
	check(kr_proxy_bypass(".example.com", "example.com") == 0);
	check(kr_proxy_bypass("*.example.com", "a.example.com") == 1);
	check(kr_proxy_bypass("*.example.com", "example.com") == 0);
	check(kr_proxy_bypass(".example.com", "badexample.com") == 0);
	return 0;
}

KR_TEST(proxy, bypass_case_blanks_ports)
{
	check(kr_proxy_bypass("  Example.COM  ", "API.example.com") == 1);
	check(kr_proxy_bypass("other.org,\texample.com:6443 ", "api.example.com") == 1);
	check(kr_proxy_bypass("example.com:1", "example.com") == 1);   /* port ignored */
	check(kr_proxy_bypass("10.0.0.1:443", "10.0.0.1") == 1);
	check(kr_proxy_bypass("[fd00::1]:443", "fd00::1") == 1);
	check(kr_proxy_bypass("[fd00::1]", "fd00::1") == 1);
	check(kr_proxy_bypass("example.com.", "api.example.com.") == 1);
	return 0;
}

KR_TEST(proxy, bypass_ip_literals)
{
	check(kr_proxy_bypass("10.0.0.1", "10.0.0.1") == 1);
	check(kr_proxy_bypass("10.0.0.1", "10.0.0.2") == 0);
	check(kr_proxy_bypass("fd00::1", "fd00::1") == 1);
	check(kr_proxy_bypass("fd00::1", "FD00:0::1") == 1);
	check(kr_proxy_bypass("fd00::1", "fd00::2") == 0);
	/* an IP entry does not match names and the reverse */
	check(kr_proxy_bypass("10.0.0.1", "host.10.0.0.1") == 0);
	check(kr_proxy_bypass("0.1", "10.0.0.1") == 0);
	return 0;
}

KR_TEST(proxy, bypass_cidr)
{
	check(kr_proxy_bypass("10.0.0.0/8", "10.200.3.4") == 1);
	check(kr_proxy_bypass("10.0.0.0/8", "11.0.0.1") == 0);
	check(kr_proxy_bypass("192.168.1.0/25", "192.168.1.127") == 1);
	check(kr_proxy_bypass("192.168.1.0/25", "192.168.1.128") == 0);
	check(kr_proxy_bypass("0.0.0.0/0", "8.8.8.8") == 1);
	check(kr_proxy_bypass("fd00::/8", "fd12:3456::1") == 1);
	check(kr_proxy_bypass("fd00::/8", "fe80::1") == 0);
	check(kr_proxy_bypass("10.0.0.0/8", "fd00::1") == 0);
	check(kr_proxy_bypass("10.0.0.0/8", "::ffff:10.1.2.3") == 1);
	check(kr_proxy_bypass("10.0.0.0/8", "example.com") == 0);
	check(kr_proxy_bypass("10.0.0.1/32", "10.0.0.1") == 1);
	return 0;
}

KR_TEST(proxy, bypass_malformed_entries_match_nothing)
{
	check(kr_proxy_bypass("10.0.0.0/33", "10.0.0.1") == 0);
	check(kr_proxy_bypass("10.0.0.0/", "10.0.0.1") == 0);
	check(kr_proxy_bypass("10.0.0.0/x", "10.0.0.1") == 0);
	check(kr_proxy_bypass("10.0.0/8", "10.0.0.1") == 0);
	check(kr_proxy_bypass("fd00::/129", "fd00::1") == 0);
	check(kr_proxy_bypass("[fd00::1", "fd00::1") == 0);
	check(kr_proxy_bypass(".", "example.com") == 0);
	/* a bad entry does not spoil the good ones after it */
	check(kr_proxy_bypass("10.0.0.0/33, [bad, example.com", "a.example.com") == 1);
	return 0;
}

KR_TEST(proxy, choose_like_client_go)
{
	const char *k = "http://kube-proxy:1";

	/* kubeconfig proxy-url wins, even over NO_PROXY and loopback */
	check(kr_proxy_choose(k, "http://env:2", NULL, "*", NULL, "127.0.0.1") == k);
	/* HTTPS_PROXY wins over https_proxy */
	check(strcmp(kr_proxy_choose("", "http://upper:2", "http://lower:3", NULL, NULL, "api"),
		     "http://upper:2") == 0);
	check(strcmp(kr_proxy_choose(NULL, "", "http://lower:3", NULL, NULL, "api"),
		     "http://lower:3") == 0);
	check(kr_proxy_choose(NULL, NULL, NULL, NULL, NULL, "api") == NULL);
	/* NO_PROXY wins over no_proxy; either bypasses */
	check(kr_proxy_choose(NULL, "http://p:2", NULL, "api", "other", "api") == NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, "other", "api", "api") != NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, "", "api", "api") == NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, "10.0.0.0/8", NULL, "10.96.0.1") == NULL);
	/* loopback and localhost are never proxied from the environment (Go) */
	check(kr_proxy_choose(NULL, "http://p:2", NULL, NULL, NULL, "localhost") == NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, NULL, NULL, "127.0.0.1") == NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, NULL, NULL, "::1") == NULL);
	check(kr_proxy_choose(NULL, "http://p:2", NULL, NULL, NULL, "10.0.0.1") != NULL);
	return 0;
}

KR_TEST(proxy, connect_request)
{
	char buf[512];
	int n;

	check(kr_proxy_parse(&p, "http://proxy:3128", err, sizeof(err)) == 0);
	n = kr_proxy_write_connect(buf, sizeof(buf), &p, "api.example.com", 6443, "x86_64");
	check(n > 0);
	buf[n] = '\0';
	check(strcmp(buf, "CONNECT api.example.com:6443 HTTP/1.1\r\n"
			  "Host: api.example.com:6443\r\n"
			  "User-Agent: kreflect/" KR_VERSION " (linux/x86_64)\r\n\r\n") == 0);
	check(kr_proxy_parse(&p, "http://user:pass@proxy:3128", err, sizeof(err)) == 0);
	n = kr_proxy_write_connect(buf, sizeof(buf), &p, "fd00::1", 443, "x86_64");
	check(n > 0);
	buf[n] = '\0';
	check(strncmp(buf, "CONNECT [fd00::1]:443 HTTP/1.1\r\nHost: [fd00::1]:443\r\n", 52) == 0);
	check(strstr(buf, "\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n") != NULL);
	check(kr_proxy_write_connect(buf, 40, &p, "api.example.com", 6443, "x86_64") == KR_ETOOBIG);
	check(kr_proxy_write_connect(buf, sizeof(buf), &p, "api\r\nX: y", 443, "x86_64") == KR_EINVAL);
	check(kr_proxy_write_connect(buf, sizeof(buf), &p, "", 443, "x86_64") == KR_EINVAL);
	return 0;
}

KR_TEST(proxy, status_text)
{
	check(strcmp(kr_proxy_status_text(403), "Forbidden") == 0);
	check(strcmp(kr_proxy_status_text(407), "Proxy Authentication Required") == 0);
	check(strcmp(kr_proxy_status_text(299), "") == 0);
	return 0;
}
