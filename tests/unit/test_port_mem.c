/* kr_port_zero (port/common/mem.c): zeroes any memory, writes no page that is zero already. */
#define _GNU_SOURCE /* MAP_ANONYMOUS under glibc with _POSIX_C_SOURCE */
#include "test.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "port.h"

/*
 * Five pages: 0 and 2 zero and read-only (a write to them faults, so the
 * test dies if kr_port_zero writes one), 1 and 3 dirty in one byte each at
 * a page edge, 4 dirty past the range's end. The range starts and ends
 * inside a page, so the partial ends are covered too.
 */
KR_TEST(port_mem, zero_writes_only_the_pages_that_are_not_zero)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *m;
	size_t i, from, to;

	check(pg >= 4096);
	m = mmap(NULL, (size_t)pg * 5, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(m != MAP_FAILED);
	m[(size_t)pg * 1] = 7;                   /* first byte of page 1 */
	m[(size_t)pg * 4 - 1] = 9;               /* last byte of page 3 */
	m[(size_t)pg * 4 + 100] = 5;             /* page 4, after the range's end */
	check(mprotect(m, (size_t)pg, PROT_READ) == 0);
	check(mprotect(m + pg * 2, (size_t)pg, PROT_READ) == 0);
	from = 17;
	to = (size_t)pg * 4 + 50;
	kr_port_zero(m + from, to - from);
	for (i = from; i < to; i++)
		if (m[i])
			break;
	check(i == to);
	check(m[(size_t)pg * 4 + 100] == 5);     /* outside the range: kept */
	/* Dirty bytes inside a read-only page would have been a fault: none was written. */
	munmap(m, (size_t)pg * 5);
	return 0;
}

KR_TEST(port_mem, zero_of_nothing_and_of_unaligned_bytes)
{
	unsigned char b[40];

	memset(b, 0xa5, sizeof(b));
	kr_port_zero(b + 3, 0);
	check(b[3] == 0xa5);
	kr_port_zero(b + 3, 5);
	check(b[2] == 0xa5 && b[3] == 0 && b[7] == 0 && b[8] == 0xa5);
	kr_port_zero(b + 1, 37);
	for (size_t i = 1; i < 38; i++)
		check(b[i] == 0);
	check(b[0] == 0xa5 && b[38] == 0xa5);
	return 0;
}
