/*
 * Addresses as text, for every port: parsing an IP literal and the
 * "1.2.3.4:443" / "[::1]:443" form used in logs.
 */
#include "fmt.h"
#include "port.h"

#include <arpa/inet.h>
#include <string.h>

int kr_port_parse_ip(const char *host, uint16_t port, struct kr_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->port = port;
	if (inet_pton(AF_INET, host, out->ip) == 1) {
		out->family = 4;
		return 0;
	}
	if (inet_pton(AF_INET6, host, out->ip) == 1) {
		out->family = 6;
		return 0;
	}
	return -1;
}

/*
 * RFC 5952 text: lowercase hex without leading zeros, the longest run of two
 * or more zero groups (the first of equal runs) as "::". Written here rather
 * than with the C library's inet_ntop, which would link its printf engine.
 */
static void ip6_format(const uint8_t *ip, char *out, size_t size)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	int best = -1, best_len = 0, i;
	size_t n = 0;

	if (memcmp(ip, mapped, sizeof(mapped)) == 0) {  /* an IPv4 address: ::ffff:a.b.c.d */
		kr_snprintf(out, size, "::ffff:%u.%u.%u.%u", ip[12], ip[13], ip[14], ip[15]);
		return;
	}
	for (i = 0; i < 8;) {
		int j = i;

		while (j < 8 && ip[2 * j] == 0 && ip[2 * j + 1] == 0)
			j++;
		if (j - i > best_len && j - i >= 2) {
			best = i;
			best_len = j - i;
		}
		i = j > i ? j : i + 1;
	}
	out[0] = '\0';
	for (i = 0; i < 8 && n < size; i++) {
		if (i == best) {
			n += (size_t)kr_snprintf(out + n, size - n, "::");
			i += best_len - 1;
			continue;
		}
		n += (size_t)kr_snprintf(out + n, size - n, "%s%x", n && out[n - 1] != ':' ? ":" : "",
					 (unsigned)(ip[2 * i] << 8 | ip[2 * i + 1]));
	}
}

void kr_port_addr_format(const struct kr_addr *addr, char *buf, size_t size)
{
	char ip[48];
	const uint8_t *a = addr->ip;

	if (size == 0)
		return;
	if (addr->family == 6) {
		ip6_format(a, ip, sizeof(ip));
		kr_snprintf(buf, size, "[%s]:%u", ip, (unsigned)addr->port);
	} else {
		kr_snprintf(buf, size, "%u.%u.%u.%u:%u", a[0], a[1], a[2], a[3], (unsigned)addr->port);
	}
}
