/*
 * CPU facts that choose between code paths at start-up, for every port: the
 * same checks as port/crypto/gcm.c's (which lives in mbedTLS's archive and so
 * may export only mbedtls_ names).
 */
#include "port.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

int kr_port_cpu_has_aes(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	/* ECX: bit 1 PCLMULQDQ, bit 9 SSSE3, bit 25 AES */
	return (c & (1u << 1)) && (c & (1u << 9)) && (c & (1u << 25));
#elif defined(__aarch64__) && defined(__linux__)
	unsigned long hw = getauxval(AT_HWCAP);
	/* HWCAP_AES (1 << 3) and HWCAP_PMULL (1 << 4) of the arm64 kernel ABI */
	return (hw & (1ul << 3)) && (hw & (1ul << 4));
#else
	return 0;
#endif
}
