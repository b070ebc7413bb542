/*
 * Zeroing that leaves untouched pages untouched, for every port. A page of
 * a fresh anonymous mapping (kr_port_reserve) or of .bss that was never
 * written reads as the kernel's shared zero page and is not in the
 * process's RSS; a memset would give it a page of its own. So each page is
 * read first and written only if some byte in it is not zero: the caller's
 * memory ends up zeroed whatever it held, and on an MMU system only the
 * pages that held something cost RAM.
 */
#include "port.h"

#include <stdint.h>
#include <string.h>

#define ZERO_PAGE 4096u

static int all_zero(const unsigned char *p, size_t n)
{
	size_t w;

	for (; n > 0 && ((uintptr_t)p & (sizeof(w) - 1u)); n--)
		if (*p++)
			return 0;
	for (; n >= sizeof(w); n -= sizeof(w), p += sizeof(w)) {
		memcpy(&w, p, sizeof(w));
		if (w)
			return 0;
	}
	for (; n > 0; n--)
		if (*p++)
			return 0;
	return 1;
}

void kr_port_zero(void *mem, size_t len)
{
	unsigned char *p = mem;

	while (len > 0) {
		size_t step = ZERO_PAGE - ((uintptr_t)p & (ZERO_PAGE - 1u));

		if (step > len)
			step = len;
		if (!all_zero(p, step))
			memset(p, 0, step);
		p += step;
		len -= step;
	}
}
