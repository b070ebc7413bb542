#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mbedtls/pk.h"
#include "mbedtls/ssl.h"
#include "mbedtls/x509.h"
#include "tls.h"
#include "test.h"

struct tm *mbedtls_platform_gmtime_r(const mbedtls_time_t *tt, struct tm *tm);

/* Our UTC conversion (for certificate dates) against the C library's. */
KR_TEST(tls, gmtime_matches_libc)
{
	static const int64_t fixed[] = {
		0, -1, 86399, 86400, -86400, -86401, 951782400 /* 2000-02-29 */, 951868800,
		4107542399LL /* 2100-02-28 23:59:59 */, 4107542400LL, 253402300799LL /* 9999-12-31 */,
		-2208988800LL /* 1900-01-01 */, 1767225600LL /* 2026-01-01 */, 2147483647LL,
	};
	struct tm a, b;
	uint64_t x = 88172645463325252ULL;
	int i;

	for (i = 0; i < 2000 + (int)(sizeof(fixed) / sizeof(fixed[0])); i++) {
		time_t t;

		if (i < (int)(sizeof(fixed) / sizeof(fixed[0]))) {
			t = (time_t)fixed[i];
		} else {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			t = (time_t)((int64_t)(x % 20000000000ULL) - 5000000000LL);
		}
		mbedtls_time_t mt = (mbedtls_time_t)t;
		check(mbedtls_platform_gmtime_r(&mt, &a) == &a);
		check(gmtime_r(&t, &b) == &b);
		if (a.tm_year != b.tm_year || a.tm_mon != b.tm_mon || a.tm_mday != b.tm_mday ||
		    a.tm_hour != b.tm_hour || a.tm_min != b.tm_min || a.tm_sec != b.tm_sec ||
		    a.tm_wday != b.tm_wday) {
			fprintf(stderr, "t=%lld: %d-%d-%d %d:%d:%d w%d vs %d-%d-%d %d:%d:%d w%d\n",
				(long long)t, a.tm_year, a.tm_mon, a.tm_mday, a.tm_hour, a.tm_min,
				a.tm_sec, a.tm_wday, b.tm_year, b.tm_mon, b.tm_mday, b.tm_hour,
				b.tm_min, b.tm_sec, b.tm_wday);
			check(0);
		}
	}
	return 0;
}

/* Errors are named in words: the high-level part and the low-level cause. */
KR_TEST(tls, errors_are_described)
{
	struct kr_tls t;
	char buf[200];

	memset(&t, 0, sizeof(t));
	t.last_error = MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE;
	kr_tls_describe(&t, buf, sizeof(buf));
	check(strstr(buf, "fatal alert") && strstr(buf, "-0x7780"));
	t.last_error = MBEDTLS_ERR_PK_KEY_INVALID_FORMAT + MBEDTLS_ERR_ASN1_OUT_OF_DATA;
	kr_tls_describe(&t, buf, sizeof(buf));
	check(strstr(buf, "key: invalid format: ASN.1 data ends early"));
	t.last_error = -0x7fff;  /* not in the table: the code */
	kr_tls_describe(&t, buf, sizeof(buf));
	check(strstr(buf, "-0x7fff"));
	kr_tls_describe(&t, buf, 8);  /* bounded */
	check(strlen(buf) == 7);
	return 0;
}
