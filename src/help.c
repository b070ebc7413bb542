#include "help.h"

#include "inflate.h"
#include "kreflect.h"
#include "port.h"

int kr_help_write(int fd, const unsigned char *gz, size_t gzlen, size_t textlen)
{
	/* The decoder (its 32 KiB window) is reserved only when --help asks: at
	 * start-up, like the client's memory, and the process ends after it. */
	struct kr_inflate *z = kr_port_reserve(sizeof(*z));
	size_t off = 0, total = 0;

	if (!z)
		return KR_EIO;
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
