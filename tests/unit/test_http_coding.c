/*
 * Content-Encoding as the response parser reports it: identity, exactly one
 * gzip, or something the caller cannot decode (what conn then refuses).
 */
#include <string.h>

#include "fmt.h"
#include "http.h"
#include "kreflect.h"
#include "test.h"

static int coding_of(const char *headers)
{
	static struct kr_http_resp r;
	char buf[512];
	const char *body;
	size_t used, blen, n;

	n = (size_t)kr_snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n%sContent-Length: 0\r\n\r\n", headers);
	kr_http_resp_init(&r);
	if (kr_http_resp_feed(&r, buf, n, &used, &body, &blen) != KR_HTTP_HEAD)
		return -1;
	return r.content_encoding;
}

KR_TEST(http_coding, content_encoding)
{
	check(coding_of("") == KR_HTTP_CE_IDENTITY);
	check(coding_of("Content-Encoding: identity\r\n") == KR_HTTP_CE_IDENTITY);
	check(coding_of("Content-Encoding: gzip\r\n") == KR_HTTP_CE_GZIP);
	check(coding_of("content-encoding:  GZip \r\n") == KR_HTTP_CE_GZIP);
	check(coding_of("Content-Encoding: x-gzip\r\n") == KR_HTTP_CE_GZIP);
	check(coding_of("Content-Encoding: identity, gzip\r\n") == KR_HTTP_CE_GZIP);
	check(coding_of("Content-Encoding: gzip, gzip\r\n") == KR_HTTP_CE_OTHER);
	check(coding_of("Content-Encoding: gzip\r\nContent-Encoding: gzip\r\n") == KR_HTTP_CE_OTHER);
	check(coding_of("Content-Encoding: br\r\n") == KR_HTTP_CE_OTHER);
	check(coding_of("Content-Encoding: deflate\r\n") == KR_HTTP_CE_OTHER);
	check(coding_of("Content-Encoding: gzip, br\r\n") == KR_HTTP_CE_OTHER);
	check(coding_of("Content-Encoding: gzip;q=1\r\n") == KR_HTTP_CE_OTHER);
	return 0;
}

KR_TEST(http_coding, accept_encoding_written_only_as_an_extra_header)
{
	static const struct kr_http_header gz[] = { { "Accept-Encoding", "gzip" } };
	char buf[512];
	int n = kr_http_write_request_ex(buf, sizeof(buf), "GET", "h", "/api/v1/configmaps", NULL, 0, NULL,
					 "x86_64", gz, 1);

	check(n > 0);
	buf[n] = '\0';
	check(strstr(buf, "\r\nAccept-Encoding: gzip\r\n") != NULL);
	n = kr_http_write_request(buf, sizeof(buf), "GET", "h", "/api/v1/configmaps", NULL, 0, NULL, "x86_64");
	check(n > 0);
	buf[n] = '\0';
	check(strstr(buf, "Accept-Encoding") == NULL);
	return 0;
}
