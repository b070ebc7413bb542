/*
 * The compressed --help (src/help.c): the text comes out whole, and damaged or
 * mismatched data is an error, never a partial text reported as success.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "help.h"
#include "kreflect.h"
#include "test.h"

/* gzip -9 (mtime 0) of "kreflect help\n" three times: 42 bytes of text. */
static const unsigned char gz[] = {
	0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x2e, 0x4a, 0x4d, 0xcb,
	0x49, 0x4d, 0x2e, 0x51, 0xc8, 0x48, 0xcd, 0x29, 0xe0, 0xca, 0xc6, 0xc3, 0x03, 0x00, 0x33,
	0x46, 0xdc, 0x9c, 0x2a, 0x00, 0x00, 0x00,
};

static unsigned char mem[64 * 1024] __attribute__((aligned(16)));

/* Runs kr_help_write into a pipe; returns its result, the text read back in out. */
static int run(const unsigned char *data, size_t len, size_t textlen, char *out, size_t cap, size_t *got)
{
	int p[2], r;
	ssize_t n;

	if (pipe(p) != 0)
		return 99;
	r = kr_help_write(p[1], data, len, textlen, mem, sizeof(mem));
	close(p[1]);
	*got = 0;
	while ((n = read(p[0], out + *got, cap - *got)) > 0)
		*got += (size_t)n;
	close(p[0]);
	return r;
}

KR_TEST(help, expands_the_whole_text)
{
	char out[256];
	size_t got;

	check(run(gz, sizeof(gz), 42, out, sizeof(out), &got) == 0);
	check(got == 42 && memcmp(out, "kreflect help\nkreflect help\nkreflect help\n", 42) == 0);
	return 0;
}

KR_TEST(help, damaged_or_mismatched_data_is_an_error)
{
	unsigned char bad[sizeof(gz)];
	char out[256];
	size_t got;

	memcpy(bad, gz, sizeof(gz));
	bad[sizeof(bad) - 6] ^= 1;   /* the CRC-32 */
	check(run(bad, sizeof(bad), 42, out, sizeof(out), &got) == KR_EPROTO);
	check(run(gz, sizeof(gz) - 3, 42, out, sizeof(out), &got) == KR_EPROTO);   /* truncated */
	check(run(gz, sizeof(gz), 41, out, sizeof(out), &got) == KR_EPROTO);       /* longer than said */
	check(got <= 41);
	check(run(gz, sizeof(gz), 43, out, sizeof(out), &got) == KR_EPROTO);       /* shorter than said */
	check(kr_help_mem() <= sizeof(mem));
	check(kr_help_write(1, gz, sizeof(gz), 42, mem, kr_help_mem() - 1) == KR_ENOSPC);
	return 0;
}
