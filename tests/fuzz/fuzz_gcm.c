/*
 * Fuzzes port/crypto/gcm.c (mbedTLS's MBEDTLS_GCM_ALT): the input chooses the
 * key size, key, IV (1 to 32 bytes), AD, text and the points where AD and text
 * are cut for streaming. The CPU's path encrypts in one call; the portable path
 * (KREFLECT_GCM_SOFTWARE=1) encrypts the same in the cut pieces: ciphertext and
 * tag must agree. The portable path then decrypts in one call and the CPU's path
 * through mbedtls_gcm_auth_decrypt, which must give the text back; a tag with one
 * bit flipped must be refused and leave no plaintext. abort() on any difference.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mbedtls/gcm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(MBEDTLS_GCM_C) && defined(MBEDTLS_GCM_ALT)

#define MAX_TEXT 2048
#define MAX_AD 256

static void keyed(mbedtls_gcm_context *g, const uint8_t *key, unsigned bits, int portable)
{
	if (portable)
		setenv("KREFLECT_GCM_SOFTWARE", "1", 1);
	else
		unsetenv("KREFLECT_GCM_SOFTWARE");
	mbedtls_gcm_init(g);
	if (mbedtls_gcm_setkey(g, MBEDTLS_CIPHER_ID_AES, key, bits) != 0)
		abort();
	unsetenv("KREFLECT_GCM_SOFTWARE");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t c1[MAX_TEXT], c2[MAX_TEXT], back[MAX_TEXT];
	uint8_t t1[16], t2[16], bad[16];
	size_t o;

	/* header: key size, IV length, AD length, AD cut, text cut, then key, IV, AD, text */
	if (size < 5 + 32)
		return 0;
	unsigned bits = 128 + 64 * (data[0] % 3);
	size_t ivn = 1 + data[1] % 32, adn = data[2] % (MAX_AD + 1);
	size_t adcut = data[3], textcut = (size_t)data[4] * 8;
	const uint8_t *key = data + 5, *p = data + 5 + 32;
	size -= 5 + 32;
	if (size < ivn + adn)
		return 0;
	const uint8_t *iv = p, *ad = p + ivn, *text = p + ivn + adn;
	size_t n = size - ivn - adn;
	if (n > MAX_TEXT)
		n = MAX_TEXT;
	adcut = adcut > adn ? adn : adcut;
	textcut = textcut > n ? n : textcut;

	mbedtls_gcm_context hw, sw;
	keyed(&hw, key, bits, 0);
	keyed(&sw, key, bits, 1);
	if (mbedtls_gcm_crypt_and_tag(&hw, MBEDTLS_GCM_ENCRYPT, n, iv, ivn, ad, adn, text, c1, 16, t1) != 0)
		abort();
	if (mbedtls_gcm_starts(&sw, MBEDTLS_GCM_ENCRYPT, iv, ivn) != 0 || mbedtls_gcm_update_ad(&sw, ad, adcut) != 0 ||
	    mbedtls_gcm_update_ad(&sw, ad + adcut, adn - adcut) != 0 ||
	    mbedtls_gcm_update(&sw, text, textcut, c2, textcut, &o) != 0 || o != textcut ||
	    mbedtls_gcm_update(&sw, text + textcut, n - textcut, c2 + textcut, n - textcut, &o) != 0 ||
	    o != n - textcut || mbedtls_gcm_finish(&sw, NULL, 0, &o, t2, 16) != 0)
		abort();
	if (memcmp(c1, c2, n) != 0 || memcmp(t1, t2, 16) != 0)
		abort();
	if (mbedtls_gcm_crypt_and_tag(&sw, MBEDTLS_GCM_DECRYPT, n, iv, ivn, ad, adn, c1, back, 16, t2) != 0 ||
	    memcmp(back, text, n) != 0 || memcmp(t1, t2, 16) != 0)
		abort();
	if (mbedtls_gcm_auth_decrypt(&hw, n, iv, ivn, ad, adn, t1, 16, c1, back) != 0 || memcmp(back, text, n) != 0)
		abort();
	memcpy(bad, t1, 16);
	bad[adcut % 16] ^= (uint8_t)(1u << (textcut % 8));
	if (mbedtls_gcm_auth_decrypt(&hw, n, iv, ivn, ad, adn, bad, 16, c1, back) != MBEDTLS_ERR_GCM_AUTH_FAILED)
		abort();
	for (size_t i = 0; i < n; i++)
		if (back[i] != 0)
			abort();
	mbedtls_gcm_free(&hw);
	mbedtls_gcm_free(&sw);
	return 0;
}

#else /* a build profile without AES-GCM */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	return 0;
}
#endif
