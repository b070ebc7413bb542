#include <arpa/inet.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "port.h"
#include "test.h"

/* Both formatters into buffers of every size from 0 to 40: same text, same return. */
#define SAME(...)                                                                          \
	do {                                                                               \
		char a_[64], b_[64];                                                       \
		for (size_t sz_ = 0; sz_ <= 40; sz_++) {                                  \
			memset(a_, 'x', sizeof(a_));                                       \
			memset(b_, 'x', sizeof(b_));                                       \
			int ra_ = kr_snprintf(sz_ ? a_ : NULL, sz_, __VA_ARGS__);          \
			int rb_ = snprintf(sz_ ? b_ : NULL, sz_, __VA_ARGS__);             \
			if (ra_ != rb_ || memcmp(a_, b_, sizeof(a_)) != 0) {               \
				fprintf(stderr, "size %zu: '%.*s' (%d) vs '%.*s' (%d)\n",  \
					sz_, (int)sz_, a_, ra_, (int)sz_, b_, rb_);        \
				check(0);                                                  \
			}                                                                  \
		}                                                                          \
	} while (0)

KR_TEST(fmt, matches_the_c_library)
{
	SAME("plain text");
	SAME("%s|%5s|%-5s|%.2s|%.*s|%10.3s|", "abc", "ab", "ab", "abc", 2, "xyz", "abcdef");
	SAME("%d %d %d %i", 0, -1, INT_MAX, INT_MIN);
	SAME("%u %x %X %04x %02x %08X", 0u, 0xdeadbeefu, 0xabcu, 7u, 255u, 0x1234u);
	SAME("%ld %lu %lld %llu", LONG_MIN, ULONG_MAX, LLONG_MIN, ULLONG_MAX);
	SAME("%zu %zd %jd %ju", (size_t)SIZE_MAX, (ssize_t)-5, (intmax_t)INTMAX_MIN, (uintmax_t)UINTMAX_MAX);
	SAME("%5d|%-5d|%05d|%.3d|%.0d|%8.3d|%-8.3d|%05d", 42, 42, -42, 7, 0, -7, 7, -7);
	SAME("%*d|%-*d|%*d", 6, 1, 6, 2, -6, 3);
	SAME("%c%c%3c%-3c|", 'a', 'b', 'c', 'd');
	SAME("100%% %s", "done");
	SAME("%hhu %hu %hhx", (unsigned char)200, (unsigned short)60000, (unsigned char)0xfe);
	SAME("%10zu  %s", (size_t)123456, "why");
	SAME("%-14s %10zu  %s", "name", (size_t)9, "x");
	SAME("[%s]:%u", "::1", 443u);
	SAME("%.80s", "a long string that goes on and on and on and on and on and on and on and on and on");
	return 0;
}

KR_TEST(fmt, random_integers_match)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	int i;

	for (i = 0; i < 5000; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int w = (int)(x % 25), p = (int)((x >> 8) % 25);
		SAME("%*.*lld|%-*llx|%0*llu", w, p, (long long)x, w, (unsigned long long)x, w,
		     (unsigned long long)(x >> (x % 64)));
	}
	return 0;
}

KR_TEST(fmt, addresses_are_formatted_as_rfc5952)
{
	static const char *ips[] = {
		"::", "::1", "1::", "2001:db8::1", "2001:db8:0:0:1:0:0:1", "2001:0:0:1::1",
		"fe80::1:2:3:4", "::ffff:10.1.2.3", "1:2:3:4:5:6:7:8", "1:0:3:4:5:6:7:8", "::ffff:0:1", "0:1::",
		"ff02::2", "1:2:3:0:0:6:7:8",
	};
	struct kr_addr a;
	char want[80], got[80], text[INET6_ADDRSTRLEN];
	size_t i;

	for (i = 0; i < sizeof(ips) / sizeof(ips[0]); i++) {
		check(kr_port_parse_ip(ips[i], 443, &a) == 0 && a.family == 6);
		check(inet_ntop(AF_INET6, a.ip, text, sizeof(text)) != NULL);
		snprintf(want, sizeof(want), "[%s]:443", text);
		kr_port_addr_format(&a, got, sizeof(got));
		if (strcmp(want, got) != 0) {
			fprintf(stderr, "%s: %s vs %s\n", ips[i], got, want);
			check(0);
		}
	}
	check(kr_port_parse_ip("10.0.0.255", 6443, &a) == 0);
	kr_port_addr_format(&a, got, sizeof(got));
	check(strcmp(got, "10.0.0.255:6443") == 0);
	kr_port_addr_format(&a, got, 5);  /* bounded */
	check(strcmp(got, "10.0") == 0);
	return 0;
}

/* kr_strtoll stands in for strtol/strtoul: same value, end and saturation as the C library's. */
KR_TEST(fmt, strtoll_matches_the_c_library)
{
	static const char *in[] = {
		"0", "7", "-7", "+42", "  \t\n12x", "x", "", "-", "+", " ", "0777", "1238", "ff", "FfG",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "99999999999999999999999", "-99999999999999999999999",
		"4294967297", "65535", "65536", "12 34", "--1", "+-1", "0x10",
	};
	static const int bases[] = { 10, 8, 16, 2 };
	size_t i, b;

	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		for (b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
			char *e1, *e2;
			long long want, got;

			if (bases[b] == 16 && strchr(in[i], 'x'))
				continue;   /* no 0x prefix by design */
			want = strtoll(in[i], &e1, bases[b]);
			got = kr_strtoll(in[i], &e2, bases[b]);
			if (want != got || e1 != e2) {
				fprintf(stderr, "'%s' base %d: %lld end +%d, libc %lld end +%d\n", in[i], bases[b],
					got, (int)(e2 - in[i]), want, (int)(e1 - in[i]));
				check(0);
			}
		}
	check(kr_strtoll("12", NULL, 10) == 12);
	check(kr_parse_num("65535", 1, 65535) == 65535);
	check(kr_parse_num("65536", 1, 65535) == -1);
	check(kr_parse_num("99999999999999999999", 0, 0x7fffffff) == -1);
	check(kr_parse_num(" 5", 0, 9) == 5);
	check(kr_parse_num("5 ", 0, 9) == -1);
	return 0;
}

KR_TEST(fmt, nth_of_a_string_list)
{
	static const char list[] = "\0one\0two\0three";

	check(*kr_str_nth(list, 0) == '\0');
	check(strcmp(kr_str_nth(list, 1), "one") == 0);
	check(strcmp(kr_str_nth(list, 3), "three") == 0);
	return 0;
}
