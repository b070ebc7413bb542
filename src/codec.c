#include "codec.h"

#include <stdint.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int kr_hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int kr_base64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long kr_base64_encode(char *out, size_t size, const unsigned char *in, size_t len)
{
	size_t o = 0, i, groups = len / 3 + (len % 3 != 0);

	if (size == 0 || groups > (size - 1) / 4)
		return -1;
	for (i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < len ? in[i + 2] : 0);

		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	return (long)o;
}

long kr_base64_decode(char *s, size_t len)
{
	size_t i, out = 0, pad = 0;
	uint32_t acc = 0;
	int bits = 0;

	for (i = 0; i < len; i++) {
		int v;

		if (s[i] == '=') {
			pad++;
			continue;
		}
		v = kr_base64_value((unsigned char)s[i]);
		if (v < 0 || pad)
			return -1;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[out++] = (char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (pad > 2 || (len - pad) % 4 == 1 || (pad && len % 4 != 0))
		return -1;
	return (long)out;
}
