/*
 * Fuzzes the proxy settings kreflect takes from the environment and the
 * kubeconfig: the proxy URL (kr_proxy_parse), its redacted form for logs
 * (kr_proxy_redact), the NO_PROXY rule (kr_proxy_bypass, kr_proxy_choose) and
 * the CONNECT request (kr_proxy_write_connect).
 *
 * Input: byte 0 sizes the redaction buffer, then the URL, the NO_PROXY value
 * and the API server's host, separated by NUL bytes. Besides never crashing or
 * reading past them, the answers must hold together, and the proxy's user
 * name and password must never show: the redacted URL is the scheme and what
 * follows the last '@', and an error message holds no '@' and not the user
 * info. A parsed
 * proxy has a host without blanks or control bytes, a port, and credentials
 * only as "Basic " and base64; a CONNECT request is one request head whose
 * lines hold no bare CR or LF.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "port.h"
#include "proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PART_MAX 1024

/*
 * Where a user name or password may sit in url, in any reading of it: from
 * *start (after a "scheme://" at the start, or the start) to the last '@'
 * after it (*at, NULL if none).
 */
static void userinfo(const char *url, const char **start, const char **at)
{
	const char *s = url, *sep = strstr(url, "://"), *p;

	if (sep && sep > url && ((*url >= 'a' && *url <= 'z') || (*url >= 'A' && *url <= 'Z'))) {
		for (p = url; p < sep && (strchr("+-.", *p) || (*p >= 'a' && *p <= 'z') ||
					  (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')); p++)
			;
		if (p == sep)
			s = sep + 3;
	}
	*start = s;
	*at = strrchr(s, '@');
}

/*
 * Nonzero if text holds the user info: at least 16 bytes (no chance match
 * with the fixed words of a message) found nowhere else in url.
 */
static int leaks(const char *text, const char *url, const char *start, const char *at)
{
	char needle[PART_MAX + 1];
	size_t len = at ? (size_t)(at - start) : 0;
	const char *hit;

	if (len < 16)
		return 0;
	memcpy(needle, start, len);
	needle[len] = '\0';
	for (hit = strstr(url, needle); hit; hit = strstr(hit + 1, needle))
		if (hit != start)
			return 0;
	return strstr(text, needle) != NULL;
}

static int base64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
	       c == '/' || c == '=';
}

static void check_connect(const struct kr_proxy *p, const char *host)
{
	char buf[2048];
	int n = kr_proxy_write_connect(buf, sizeof(buf), p, host, 6443, "x86_64");
	int i, crlf = 0;

	if (n == KR_ETOOBIG || n == KR_EINVAL)
		return;
	if (n < 4 || n > (int)sizeof(buf) || memcmp(buf, "CONNECT ", 8) != 0 ||
	    memcmp(buf + n - 4, "\r\n\r\n", 4) != 0)
		abort();
	for (i = 0; i < n; i++) {
		if (buf[i] == '\r' && i + 1 < n && buf[i + 1] == '\n') {
			crlf++;
			i++;
			continue;
		}
		if (buf[i] == '\r' || buf[i] == '\n' || buf[i] == '\0')
			abort();   /* a bare CR or LF: a line smuggled into the head */
	}
	if (crlf < 3)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct kr_proxy p;
	char part[3][PART_MAX + 1], err[256], red[PART_MAX + 8];
	char want[PART_MAX + 1];
	const char *ui, *ui_end;
	size_t redsize, at = 1, i;
	int k, rc;

	if (size < 1)
		return 0;
	redsize = 1 + data[0] % sizeof(red);
	for (k = 0; k < 3; k++) {
		size_t n = 0;

		while (at < size && data[at] != '\0' && n < PART_MAX)
			part[k][n++] = (char)data[at++];
		part[k][n] = '\0';
		at++;
	}
	userinfo(part[0], &ui, &ui_end);

	/* The redacted URL is the scheme, then what follows the last '@', cut to the buffer. */
	memset(red, 'x', sizeof(red));
	kr_proxy_redact(part[0], red, redsize);
	snprintf(want, sizeof(want), "%.*s%s", (int)(ui - part[0]), part[0], ui_end ? ui_end + 1 : ui);
	if (!memchr(red, '\0', redsize) || strchr(red, '@') || strncmp(red, want, redsize - 1) != 0 ||
	    strlen(red) != (strlen(want) < redsize - 1 ? strlen(want) : redsize - 1))
		abort();

	memset(err, 'x', sizeof(err));
	rc = kr_proxy_parse(&p, part[0], err, sizeof(err));
	if (rc != 0) {
		if (rc != KR_EINVAL || !memchr(err, '\0', sizeof(err)) || !err[0] || strchr(err, '\n') ||
		    strchr(err, '@') || leaks(err, part[0], ui, ui_end))
			abort();
	} else {
		if (!p.host[0] || !memchr(p.host, '\0', sizeof(p.host)) || p.port == 0)
			abort();
		for (i = 0; p.host[i]; i++)
			if ((unsigned char)p.host[i] <= ' ' || p.host[i] == 0x7f)
				abort();
		if (!memchr(p.auth, '\0', sizeof(p.auth)))
			abort();
		if (p.auth[0]) {
			if (strncmp(p.auth, "Basic ", 6) != 0 || !p.auth[6])
				abort();
			for (i = 6; p.auth[i]; i++)
				if (!base64_char(p.auth[i]))
					abort();
		}
		check_connect(&p, part[2]);
	}

	rc = kr_proxy_bypass(part[1], part[2]);
	if (rc != 0 && rc != 1)
		abort();
	{
		const char *c = kr_proxy_choose(NULL, part[0], NULL, part[1], NULL, part[2]);

		if (c && c != part[0])
			abort();
		struct kr_addr a;

		/* A proxy is skipped only for what NO_PROXY names, localhost and (loopback) IPs. */
		if (!c && part[0][0] && !rc && strcmp(part[2], "localhost") != 0 &&
		    kr_port_parse_ip(part[2], 0, &a) != 0)
			abort();
	}
	return 0;
}
