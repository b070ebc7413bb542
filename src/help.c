#include "help.h"

#include "inflate.h"
#include "kreflect.h"
#include "port.h"

size_t kr_help_mem(void)
{
	return sizeof(struct kr_inflate);
}

int kr_help_write(int fd, const unsigned char *gz, size_t gzlen, size_t textlen, void *mem,
		  size_t memlen)
{
	struct kr_inflate *z = mem;
	size_t off = 0, total = 0;

	if (!z || memlen < sizeof(*z))
		return KR_ENOSPC;
	kr_inflate_init(z, textlen, 0);
	for (;;) {
		const char *out;
		size_t used, n;
		int r = kr_inflate_feed(z, gz + off, gzlen - off, &used, &out, &n);

		off += used;
		if (r == KR_INFLATE_DATA) {
			struct kr_iov iov = { out, n };

			if (kr_port_writev_all(fd, &iov, 1) != 0)
				return KR_EIO;
			total += n;
			continue;
		}
		if (r == 0)
			r = kr_inflate_finish(z);
		if (r != KR_INFLATE_END)
			return KR_EPROTO;
		return total == textlen ? 0 : KR_EPROTO;
	}
}
