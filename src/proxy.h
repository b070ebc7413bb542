/*
 * HTTPS through an HTTP proxy, as kubectl and client-go do it: a plain TCP
 * connection to the proxy, "CONNECT host:port", and once the proxy answers
 * 200 the TLS handshake with the API server runs inside that tunnel, verified
 * against the API server's name as if there were no proxy.
 *
 * This module only parses and decides (no I/O): the proxy URL, the NO_PROXY
 * rule, which proxy applies, and the CONNECT request's bytes. src/conn drives
 * the exchange. Only http:// proxies are supported (no TLS to the proxy, no
 * SOCKS). The Proxy-Authorization value is a credential: never log it.
 */
#ifndef KR_PROXY_H
#define KR_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

#ifndef KR_PROXY_HOST_MAX
#define KR_PROXY_HOST_MAX 256          /* DNS names are at most 253 bytes */
#endif
#ifndef KR_PROXY_AUTH_MAX
#define KR_PROXY_AUTH_MAX 352          /* "Basic " + base64 of user:pass (<= 256 bytes) */
#endif

struct kr_proxy {
	char host[KR_PROXY_HOST_MAX];  /* DNS name or IP literal (no brackets) */
	uint16_t port;                 /* 80 unless the URL names one */
	char auth[KR_PROXY_AUTH_MAX];  /* "Basic <base64(user:pass)>", "" = none. SECRET */
};

/*
 * Parses url, "http://[user:pass@]host[:port][/]" (IPv6 host in brackets;
 * user and password percent-decoded; no scheme means http://, as Go), into
 * *p. Returns 0, or KR_EINVAL with a one-line reason in err (which never
 * quotes the userinfo): https:// and other schemes, an empty or bad host, a
 * bad port, bad percent-encoding, credentials too long.
 */
int kr_proxy_parse(struct kr_proxy *p, const char *url, char *err, size_t errsize);

/*
 * 1 if host (a name or an IP literal without brackets) must be reached
 * directly according to no_proxy (NULL or "" = proxy everything), else 0.
 * Comma-separated entries, blanks around them ignored: "*" matches all;
 * "example.com" matches it and its subdomains, ".example.com" (or
 * "*.example.com") only its subdomains, like Go's httpproxy; an IP literal
 * matches that address; a CIDR ("10.0.0.0/8", "fd00::/8") its range. A
 * ":port" on an entry is ignored. Names compare case-insensitively; a
 * malformed entry (bad CIDR, bad brackets) matches nothing, and a name entry
 * never matches an IP host.
 */
int kr_proxy_bypass(const char *no_proxy, const char *host);

/*
 * Which proxy URL applies to the API server host, the way client-go decides:
 * kubeconfig's proxy-url (kubeconfig_url) if non-empty, always; otherwise
 * HTTPS_PROXY, else https_proxy (the first non-empty), unless host is
 * "localhost" or a loopback IP, or matches NO_PROXY, else no_proxy. Returns
 * one of the given strings (not copied), or NULL for a direct connection.
 * Any argument may be NULL.
 */
const char *kr_proxy_choose(const char *kubeconfig_url, const char *https_proxy_upper,
			    const char *https_proxy_lower, const char *no_proxy_upper,
			    const char *no_proxy_lower, const char *host);

/*
 * Copies url into buf without its userinfo ("http://u:p@h:3128" ->
 * "http://h:3128"), for logs: everything between the scheme (if any) and the
 * last '@' goes, whatever the rest looks like. Always terminates buf (if
 * size > 0).
 */
void kr_proxy_redact(const char *url, char *buf, size_t size);

/*
 * Writes "CONNECT host:port HTTP/1.1" with Host, User-Agent (as the API
 * requests, arch from kr_target()) and Proxy-Authorization if p->auth is set,
 * then the blank line, into buf[0..size) (no NUL). IPv6 hosts get brackets.
 * Returns the length, KR_ETOOBIG if it does not fit, KR_EINVAL if host holds
 * a control byte, a space or is empty.
 */
int kr_proxy_write_connect(char *buf, size_t size, const struct kr_proxy *p, const char *host,
			   uint16_t port, const char *arch);

/* "Forbidden" for 403 and so on for statuses a proxy answers CONNECT with; "" if unknown. */
const char *kr_proxy_status_text(int status);

#endif /* KR_PROXY_H */
