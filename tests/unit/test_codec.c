/* The shared codecs (src/codec.c): hex digits and base64, at their bounds. */
#include <string.h>

#include "codec.h"
#include "test.h"

KR_TEST(codec, hex_digits_both_cases_and_nothing_else)
{
	check(kr_hex_value('0') == 0 && kr_hex_value('9') == 9);
	check(kr_hex_value('a') == 10 && kr_hex_value('F') == 15);
	check(kr_hex_value('g') == -1 && kr_hex_value('G') == -1 && kr_hex_value('/') == -1);
	check(kr_hex_value(':') == -1 && kr_hex_value(0) == -1 && kr_hex_value(0xff) == -1);
	return 0;
}

KR_TEST(codec, base64_encode_pads_and_stops_at_the_buffer)
{
	char out[9];

	check(kr_base64_encode(out, sizeof(out), (const unsigned char *)"user:pw", 7) == -1);
	check(kr_base64_encode(out, sizeof(out), (const unsigned char *)"user:p", 6) == 8);
	check(strcmp(out, "dXNlcjpw") == 0);
	check(kr_base64_encode(out, 8, (const unsigned char *)"user:p", 6) == -1);  /* no room for the NUL */
	check(kr_base64_encode(out, sizeof(out), (const unsigned char *)"a", 1) == 4 && strcmp(out, "YQ==") == 0);
	check(kr_base64_encode(out, sizeof(out), (const unsigned char *)"ab", 2) == 4 && strcmp(out, "YWI=") == 0);
	check(kr_base64_encode(out, 1, (const unsigned char *)"", 0) == 0 && out[0] == '\0');
	check(kr_base64_encode(out, 0, (const unsigned char *)"", 0) == -1);
	return 0;
}

KR_TEST(codec, base64_decode_in_place_refuses_what_is_not_base64)
{
	char s[16];

	memcpy(s, "dXNlcjpw", 8);
	check(kr_base64_decode(s, 8) == 6 && memcmp(s, "user:p", 6) == 0);
	memcpy(s, "YQ==", 4);
	check(kr_base64_decode(s, 4) == 1 && s[0] == 'a');
	memcpy(s, "YQ", 2);
	check(kr_base64_decode(s, 2) == 1 && s[0] == 'a');     /* padding optional */
	memcpy(s, "Y", 1);
	check(kr_base64_decode(s, 1) == -1);
	memcpy(s, "YQ=a", 4);
	check(kr_base64_decode(s, 4) == -1);                    /* data after padding */
	memcpy(s, "Y Q=", 4);
	check(kr_base64_decode(s, 4) == -1);
	memcpy(s, "YQ===", 5);
	check(kr_base64_decode(s, 5) == -1);
	check(kr_base64_value('+') == 62 && kr_base64_value('/') == 63 && kr_base64_value('=') == -1);
	return 0;
}
