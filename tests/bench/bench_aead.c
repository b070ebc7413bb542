/*
 * bench_aead: the AEAD work of TLS records, for counting instructions per KiB
 * on each target (tests/bench/aead.sh runs it under callgrind on x86_64 and
 * under qemu-user's instruction trace on aarch64 and armv7).
 *
 *   bench_aead MODE RECORDS
 *
 * MODE: gcm (port/crypto/gcm.c's path for this CPU), gcm-portable (the same
 * with KREFLECT_GCM_SOFTWARE=1), chacha (mbedTLS's ChaCha20-Poly1305). It
 * authenticates and decrypts RECORDS records of 1 KiB with a 5-byte AAD, as
 * the TLS 1.3 record layer does (AES-256-GCM: what the test API server picks
 * for a client that lists AES-GCM first). aead.sh runs it with N and 2N
 * records: the difference over N is the cost of one KiB, start-up excluded.
 * Each record's tag is checked, and the last plaintext against the original:
 * a mismatch exits 1 with "FAIL".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mbedtls/chachapoly.h"
#include "mbedtls/gcm.h"

#define RECORD 1024

int main(int argc, char **argv)
{
	static unsigned char pt[RECORD], ct[RECORD], out[RECORD];
	unsigned char key[32], iv[12] = { 0 }, aad[5] = { 0x17, 0x03, 0x03, 0x04, 0x10 }, tag[16];
	char *end;

	if (argc != 3) {
		fprintf(stderr, "usage: bench_aead gcm|gcm-portable|chacha RECORDS\n");
		return 2;
	}
	unsigned long n = strtoul(argv[2], &end, 10);
	if (*end != '\0' || n == 0 || n > 1000000) {
		fprintf(stderr, "bench_aead: RECORDS must be 1 to 1000000\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (unsigned char)(i * 7 + 1);
	for (size_t i = 0; i < RECORD; i++)
		pt[i] = (unsigned char)('a' + i % 26);

	int gcm = strcmp(argv[1], "gcm") == 0 || strcmp(argv[1], "gcm-portable") == 0;
	if (!gcm && strcmp(argv[1], "chacha") != 0) {
		fprintf(stderr, "bench_aead: unknown mode %s\n", argv[1]);
		return 2;
	}
	if (strcmp(argv[1], "gcm-portable") == 0)
		setenv("KREFLECT_GCM_SOFTWARE", "1", 1);

	mbedtls_gcm_context g;
	mbedtls_chachapoly_context cp;
	mbedtls_gcm_init(&g);
	mbedtls_chachapoly_init(&cp);
	int r = gcm ? mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, 256) : mbedtls_chachapoly_setkey(&cp, key);
	if (r == 0)
		r = gcm ? mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, RECORD, iv, sizeof(iv), aad, sizeof(aad),
						    pt, ct, sizeof(tag), tag)
			: mbedtls_chachapoly_encrypt_and_tag(&cp, RECORD, iv, aad, sizeof(aad), pt, ct, tag);
	/* Only the AEAD in the loop: the plaintext is compared once, after it. */
	for (unsigned long i = 0; r == 0 && i < n; i++)
		r = gcm ? mbedtls_gcm_auth_decrypt(&g, RECORD, iv, sizeof(iv), aad, sizeof(aad), tag, sizeof(tag), ct,
						   out)
			: mbedtls_chachapoly_auth_decrypt(&cp, RECORD, iv, aad, sizeof(aad), tag, ct, out);
	if (r == 0 && memcmp(out, pt, RECORD) != 0)
		r = -1;
	mbedtls_gcm_free(&g);
	mbedtls_chachapoly_free(&cp);
	if (r != 0) {
		printf("FAIL %s: %d\n", argv[1], r);
		return 1;
	}
	printf("%s: %lu records of %d bytes decrypted and verified\n", argv[1], n, RECORD);
	return 0;
}
