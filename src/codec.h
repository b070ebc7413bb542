/*
 * The small text codecs several modules share: hex digits (chunk sizes,
 * percent-escapes, YAML/JSON \x and \u escapes) and base64 (proxy and
 * sidecar Basic credentials, kubeconfig *-data, Secret data in files).
 */
#ifndef KR_CODEC_H
#define KR_CODEC_H

#include <stddef.h>

/* The value of hex digit c (0-9, a-f, A-F), or -1. */
int kr_hex_value(int c);

/* The value of base64 letter c (A-Z a-z 0-9 + /), or -1 ('=' and whitespace included). */
int kr_base64_value(int c);

/*
 * Writes the padded base64 of in[0..len) and a NUL to out[0..size). Returns
 * the length written (without the NUL), or -1 (out untouched) if it does not fit.
 */
long kr_base64_encode(char *out, size_t size, const unsigned char *in, size_t len);

/*
 * Decodes standard base64 (padding optional, no whitespace) in place.
 * Returns the decoded length, or -1 if s[0..len) is not base64. The output
 * never overtakes the input.
 */
long kr_base64_decode(char *s, size_t len);

#endif /* KR_CODEC_H */
