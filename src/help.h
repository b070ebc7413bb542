/*
 * The long --help, stored gzip-compressed in the binary and expanded at
 * --help time by our inflater (tests/build/README.md "Where the bytes go": 7 KB less in the file).
 */
#ifndef KR_HELP_H
#define KR_HELP_H

#include <stddef.h>

/* Bytes of caller-owned memory kr_help_write needs for its decoder (about 40 KB). */
size_t kr_help_mem(void);

/*
 * Writes the text that gz[0..gzlen) decodes to onto fd, decoding in
 * mem[0..memlen) (aligned for any type). Returns 0, or KR_ENOSPC (memlen
 * below kr_help_mem()), KR_EIO (the write failed) or KR_EPROTO (the data does
 * not decode to exactly textlen bytes).
 */
int kr_help_write(int fd, const unsigned char *gz, size_t gzlen, size_t textlen, void *mem,
		  size_t memlen);

#endif /* KR_HELP_H */
