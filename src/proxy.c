#include "proxy.h"

#include <string.h>
#include <strings.h>

#include "codec.h"
#include "fmt.h"
#include "kreflect.h"
#include "port.h"

/* user:pass before base64; keeps the encoded value inside KR_PROXY_AUTH_MAX. */
#define CRED_MAX (((KR_PROXY_AUTH_MAX - 7) / 4) * 3)
/* One NO_PROXY entry; longer ones cannot be a host name and match nothing. */
#define ENTRY_MAX 300

static int lower(int ch)
{
	return ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch;
}

/* Appends the percent-decoding of s[0..n) to out at *len. Returns 0 or -1 (bad %, full). */
static int decode(const char *s, size_t n, char *out, size_t size, size_t *len)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];

		if (ch == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return -1;
			hi = kr_hex_value((unsigned char)s[i + 1]);
			lo = kr_hex_value((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			ch = hi * 16 + lo;
			i += 2;
		}
		if (*len + 1 >= size)
			return -1;
		out[(*len)++] = (char)ch;
	}
	return 0;
}

static int bad(char *err, size_t errsize, const char *why)
{
	if (errsize)
		kr_snprintf(err, errsize, "%s", why);
	return KR_EINVAL;
}

/* A host name byte we accept in a proxy URL (no spaces, controls, or URL delimiters). */
static int host_byte(int ch)
{
	return ch > 0x20 && ch < 0x7f && !strchr("/?#@[]:%\\\"", ch);
}

/*
 * Past the "://" of url's scheme, or NULL when it names none: a scheme is a
 * letter, then letters, digits, '+', '-' or '.', at the start. A "://" later
 * on ("u:p@proxy:3128/x://y") is part of the rest, as Go reads it.
 */
static const char *after_scheme(const char *url)
{
	const char *s = url;

	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return NULL;
	while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
	       *s == '+' || *s == '-' || *s == '.')
		s++;
	return strncmp(s, "://", 3) == 0 ? s + 3 : NULL;
}

int kr_proxy_parse(struct kr_proxy *p, const char *url, char *err, size_t errsize)
{
	const char *s = url, *auth_end, *host, *host_end, *at, *colon;
	size_t hlen, i, clen = 0;
	char cred[CRED_MAX + 1];
	long port = 80;
	int bracketed = 0;

	memset(p, 0, sizeof(*p));
	if (!url || !*url)
		return bad(err, errsize, "empty proxy URL");
	if (strncasecmp(s, "http://", 7) == 0) {
		s += 7;
	} else if (after_scheme(s)) {
		if (strncasecmp(s, "https://", 8) == 0)
			return bad(err, errsize, "https:// proxies are not supported: use an "
				   "http:// proxy URL (the API server's TLS still runs end to end)");
		return bad(err, errsize, "unsupported proxy scheme: only http:// proxies are supported");
	}
	auth_end = s + strcspn(s, "/?#");
	at = NULL;
	for (i = 0; s + i < auth_end; i++)
		if (s[i] == '@')
			at = s + i;
	if (at) {
		colon = memchr(s, ':', (size_t)(at - s));
		if (!colon)
			colon = at;
		if (decode(s, (size_t)(colon - s), cred, sizeof(cred), &clen) != 0)
			return bad(err, errsize, "bad proxy user name (percent-encoding or length)");
		if (clen + 1 >= sizeof(cred))
			return bad(err, errsize, "proxy credentials too long");
		cred[clen++] = ':';
		if (colon < at && decode(colon + 1, (size_t)(at - colon - 1), cred, sizeof(cred), &clen) != 0)
			return bad(err, errsize, "bad proxy password (percent-encoding or length)");
		s = at + 1;
	}
	bracketed = *s == '[';
	if (bracketed) {
		host = s + 1;
		host_end = memchr(host, ']', (size_t)(auth_end - host));
		if (!host_end)
			return bad(err, errsize, "bad proxy URL: '[' without ']'");
		s = host_end + 1;
	} else {
		host = s;
		host_end = s;
		while (host_end < auth_end && *host_end != ':')
			host_end++;
		for (i = 0; host + i < host_end; i++)
			if (!host_byte((unsigned char)host[i]))
				return bad(err, errsize, "bad proxy URL: invalid byte in the host");
		s = host_end;
	}
	hlen = (size_t)(host_end - host);
	if (hlen == 0)
		return bad(err, errsize, "bad proxy URL: no host");
	if (hlen >= sizeof(p->host))
		return bad(err, errsize, "bad proxy URL: host too long");
	memcpy(p->host, host, hlen);
	p->host[hlen] = '\0';
	if (bracketed) {
		struct kr_addr a;

		if (kr_port_parse_ip(p->host, 0, &a) != 0 || a.family != 6)
			return bad(err, errsize, "bad proxy URL: not an IPv6 address in brackets");
	}
	if (s < auth_end && *s == ':') {
		s++;
		if (s == auth_end)
			return bad(err, errsize, "bad proxy URL: empty port");
		port = 0;
		for (; s < auth_end; s++) {
			if (*s < '0' || *s > '9' || port > 65535)
				return bad(err, errsize, "bad proxy URL: port is not a number");
			port = port * 10 + (*s - '0');
		}
		if (port < 1 || port > 65535)
			return bad(err, errsize, "bad proxy URL: port out of range");
	} else if (s != auth_end) {
		return bad(err, errsize, "bad proxy URL: junk after the host");
	}
	p->port = (uint16_t)port;
	if (at) {
		memcpy(p->auth, "Basic ", 6);
		/* Fits: CRED_MAX bounds the credentials to what the encoded value has room for. */
		kr_base64_encode(p->auth + 6, sizeof(p->auth) - 6, (const unsigned char *)cred, clen);
	}
	memset(cred, 0, sizeof(cred));
	return 0;
}

void kr_proxy_redact(const char *url, char *buf, size_t size)
{
	const char *start = after_scheme(url), *at;

	if (size == 0)
		return;
	if (!start)
		start = url;
	/* Up to the last '@' anywhere: whatever reading of the URL someone had in mind,
	 * no part of a user name or password is left for the log. */
	at = strrchr(start, '@');
	if (!at) {
		kr_snprintf(buf, size, "%s", url);
		return;
	}
	kr_snprintf(buf, size, "%.*s%s", (int)(start - url), url, at + 1);
}

/* --- NO_PROXY -------------------------------------------------------------------- */

/* 4-byte form of IPv4 and IPv4-mapped IPv6 addresses, so 10.0.0.0/8 matches ::ffff:10.1.2.3. */
static void normalize(struct kr_addr *a)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (a->family == 6 && memcmp(a->ip, mapped, 12) == 0) {
		memmove(a->ip, a->ip + 12, 4);
		memset(a->ip + 4, 0, 12);
		a->family = 4;
	}
}

static int parse_ip(const char *s, struct kr_addr *a)
{
	if (kr_port_parse_ip(s, 0, a) != 0)
		return -1;
	normalize(a);
	return 0;
}

static int prefix_match(const struct kr_addr *net, const struct kr_addr *ip, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (net->family != ip->family)
		return 0;
	if (memcmp(net->ip, ip->ip, full) != 0)
		return 0;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (net->ip[full] & mask) == (ip->ip[full] & mask);
	}
	return 1;
}

/* Does the entry e (trimmed, lower-case, port removed) cover host (lower-case)? */
static int entry_match(const char *e, const char *host, const struct kr_addr *hip)
{
	const char *slash = strchr(e, '/');
	size_t elen, hlen;

	if (slash) {
		char net[64];
		struct kr_addr a;
		unsigned long bits = 0;
		const char *b = slash + 1;

		if ((size_t)(slash - e) >= sizeof(net) || !*b)
			return 0;
		memcpy(net, e, (size_t)(slash - e));
		net[slash - e] = '\0';
		if (kr_port_parse_ip(net, 0, &a) != 0)
			return 0;
		for (; *b; b++) {
			if (*b < '0' || *b > '9' || bits > 128)
				return 0;
			bits = bits * 10 + (unsigned long)(*b - '0');
		}
		if (bits > (a.family == 4 ? 32u : 128u))
			return 0;
		if (a.family == 6 && bits >= 96) {
			struct kr_addr m = a;

			normalize(&m);
			if (m.family == 4) {
				a = m;
				bits -= 96;
			}
		}
		return hip && prefix_match(&a, hip, (unsigned)bits);
	}
	{
		struct kr_addr a;

		if (parse_ip(e, &a) == 0)
			return hip && a.family == hip->family &&
			       memcmp(a.ip, hip->ip, a.family == 4 ? 4 : 16) == 0;
	}
	if (hip)
		return 0;          /* name entries never match an IP ("0.1" is not a suffix of 10.0.0.1) */
	if (e[0] == '*' && e[1] == '.')
		e++;
	elen = strlen(e);
	hlen = strlen(host);
	if (elen == 0 || (e[0] == '.' && elen == 1))
		return 0;
	if (e[0] == '.')        /* subdomains only */
		return hlen > elen && strcmp(host + hlen - elen, e) == 0;
	if (strcmp(host, e) == 0)
		return 1;
	return hlen > elen && host[hlen - elen - 1] == '.' && strcmp(host + hlen - elen, e) == 0;
}

/* Cuts a ":port" off the entry: "[::1]:80" -> "::1", "h:80" -> "h"; bare IPv6 kept. Returns -1 if malformed. */
static int strip_port(char *e)
{
	char *colon;

	if (e[0] == '[') {
		char *close = strchr(e, ']');

		if (!close || (close[1] != '\0' && close[1] != ':'))
			return -1;
		*close = '\0';
		memmove(e, e + 1, strlen(e + 1) + 1);
		return 0;
	}
	colon = strchr(e, ':');
	if (colon && !strchr(colon + 1, ':'))
		*colon = '\0';     /* exactly one colon: host:port */
	return 0;
}

int kr_proxy_bypass(const char *no_proxy, const char *host)
{
	char h[KR_PROXY_HOST_MAX], e[ENTRY_MAX];
	struct kr_addr hip;
	const char *s = no_proxy;
	size_t i, n;
	int have_ip;

	if (!no_proxy || !host || !*host)
		return 0;
	n = strlen(host);
	if (n >= sizeof(h))
		return 0;
	for (i = 0; i <= n; i++)
		h[i] = (char)lower((unsigned char)host[i]);
	while (n > 1 && h[n - 1] == '.')  /* "example.com." is example.com */
		h[--n] = '\0';
	have_ip = parse_ip(h, &hip) == 0;
	while (*s) {
		const char *end = s + strcspn(s, ",");
		const char *a = s, *b = end;

		s = *end ? end + 1 : end;
		while (a < b && (*a == ' ' || *a == '\t' || *a == '\n' || *a == '\r'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\n' || b[-1] == '\r'))
			b--;
		if (a == b || (size_t)(b - a) >= sizeof(e))
			continue;
		for (i = 0; a + i < b; i++)
			e[i] = (char)lower((unsigned char)a[i]);
		e[i] = '\0';
		if (strcmp(e, "*") == 0)
			return 1;
		if (strip_port(e) != 0)
			continue;
		n = strlen(e);
		while (n > 1 && e[n - 1] == '.' && !strchr(e, '/'))
			e[--n] = '\0';
		if (entry_match(e, h, have_ip ? &hip : NULL))
			return 1;
	}
	return 0;
}

static int is_loopback(const char *host)
{
	struct kr_addr a;
	static const uint8_t one[16] = { [15] = 1 };

	if (strcmp(host, "localhost") == 0)
		return 1;
	if (parse_ip(host, &a) != 0)
		return 0;
	return a.family == 4 ? a.ip[0] == 127 : memcmp(a.ip, one, 16) == 0;
}

const char *kr_proxy_choose(const char *kubeconfig_url, const char *https_proxy_upper,
			    const char *https_proxy_lower, const char *no_proxy_upper,
			    const char *no_proxy_lower, const char *host)
{
	const char *proxy, *no_proxy;

	if (kubeconfig_url && *kubeconfig_url)
		return kubeconfig_url;
	proxy = https_proxy_upper && *https_proxy_upper ? https_proxy_upper
		: https_proxy_lower && *https_proxy_lower ? https_proxy_lower : NULL;
	if (!proxy || !host)
		return NULL;
	if (is_loopback(host))
		return NULL;
	no_proxy = no_proxy_upper && *no_proxy_upper ? no_proxy_upper : no_proxy_lower;
	if (kr_proxy_bypass(no_proxy, host))
		return NULL;
	return proxy;
}

/* --- CONNECT ----------------------------------------------------------------------- */

int kr_proxy_write_connect(char *buf, size_t size, const struct kr_proxy *p, const char *host,
			   uint16_t port, const char *arch)
{
	char target[KR_PROXY_HOST_MAX + 16];
	const char *s;
	int n;

	if (!*host)
		return KR_EINVAL;
	for (s = host; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return KR_EINVAL;
	for (s = arch; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return KR_EINVAL;
	if (strchr(host, ':'))
		n = kr_snprintf(target, sizeof(target), "[%s]:%u", host, (unsigned)port);
	else
		n = kr_snprintf(target, sizeof(target), "%s:%u", host, (unsigned)port);
	if (n < 0 || (size_t)n >= sizeof(target))
		return KR_ETOOBIG;
	n = kr_snprintf(buf, size,
		     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kreflect/" KR_VERSION
		     " (linux/%s)\r\n%s%s%s\r\n",
		     target, target, arch, p->auth[0] ? "Proxy-Authorization: " : "", p->auth,
		     p->auth[0] ? "\r\n" : "");
	if (n < 0 || (size_t)n >= size)
		return KR_ETOOBIG;
	return n;
}

const char *kr_proxy_status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 407: return "Proxy Authentication Required";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}
