/*
 * The long --help, stored gzip-compressed in the binary and expanded at
 * --help time by our inflater (README "Sizes": 7 KB less in the file).
 */
#ifndef KR_HELP_H
#define KR_HELP_H

#include <stddef.h>

/*
 * Writes the text that gz[0..gzlen) decodes to onto fd. Returns 0, or
 * KR_EIO (no memory for the decoder, or the write failed) or KR_EPROTO (the
 * data does not decode to exactly textlen bytes).
 */
int kr_help_write(int fd, const unsigned char *gz, size_t gzlen, size_t textlen);

#endif /* KR_HELP_H */
