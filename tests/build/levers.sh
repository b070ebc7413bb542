#!/bin/sh
# Measures, in bytes of the stripped x86_64 (or TARGET) binary, what each
# mbedTLS option costs: mbedTLS is rebuilt with config/mbedtls_config.h plus
# one change, kreflect is linked against it (without LTO, so that changes are
# not blurred by whole-program inlining), and the file size is compared with
# the unchanged configuration. Not part of `make test` (minutes of CPU):
#
#   make                                      # objects of the target first
#   sh tests/build/levers.sh [TARGET] [NAME...]
#
# A lever that mbedTLS's check_config.h refuses is reported as such.
set -u
cd "$(dirname "$0")/../.." || exit 1
t=${1:-x86_64}
[ $# -gt 0 ] && shift
case $t in
x86_64) cc=x86_64-linux-musl-gcc; strip=strip; arch= ;;
aarch64) cc=aarch64-linux-musl-gcc; strip=aarch64-linux-gnu-strip; arch= ;;
armv7) cc=arm-linux-musleabihf-gcc; strip=arm-linux-gnueabihf-strip
	arch="-march=armv7-a -mfpu=vfpv3-d16 -mfloat-abi=hard -mthumb" ;;
*) echo "kreflect: unable to measure levers: unknown target $t" >&2; exit 2 ;;
esac
ar=${strip%strip}ar
objs=$(ls build/$t/obj/src/*.o build/$t/obj/port/posix/*.o build/$t/obj/port/common/*.o 2>/dev/null)
if [ -z "$objs" ]; then
	echo "kreflect: unable to measure levers: build/$t/obj is empty (run make TARGET=$t first)" >&2
	exit 1
fi
out=build/levers/$t
mkdir -p "$out"

# NAME|lines added after the configuration (\n between lines)
levers='base|
no-nist-optim|#undef MBEDTLS_ECP_NIST_OPTIM
no-p384|#undef MBEDTLS_ECP_DP_SECP384R1_ENABLED
no-use-psa|#undef MBEDTLS_USE_PSA_CRYPTO
no-use-psa-asn1w|#undef MBEDTLS_USE_PSA_CRYPTO\n#undef MBEDTLS_ASN1_WRITE_C
no-tickets|#undef MBEDTLS_SSL_SESSION_TICKETS\n#undef MBEDTLS_SSL_TLS1_3_KEY_EXCHANGE_MODE_PSK_EPHEMERAL_ENABLED
no-compat|#undef MBEDTLS_SSL_TLS1_3_COMPATIBILITY_MODE
sha-smaller|#define MBEDTLS_SHA256_SMALLER\n#define MBEDTLS_SHA512_SMALLER
no-decrypt|#define MBEDTLS_BLOCK_CIPHER_NO_DECRYPT
no-chachapoly|#undef MBEDTLS_CHACHA20_C\n#undef MBEDTLS_POLY1305_C\n#undef MBEDTLS_CHACHAPOLY_C
no-tls12|#undef MBEDTLS_SSL_PROTO_TLS1_2\n#undef MBEDTLS_KEY_EXCHANGE_ECDHE_RSA_ENABLED\n#undef MBEDTLS_KEY_EXCHANGE_ECDHE_ECDSA_ENABLED\n#undef MBEDTLS_SSL_EXTENDED_MASTER_SECRET
no-rsa|#undef MBEDTLS_RSA_C\n#undef MBEDTLS_PKCS1_V15\n#undef MBEDTLS_PKCS1_V21\n#undef MBEDTLS_X509_RSASSA_PSS_SUPPORT\n#undef MBEDTLS_KEY_EXCHANGE_ECDHE_RSA_ENABLED
mpi-window-1|#undef MBEDTLS_MPI_WINDOW_SIZE\n#define MBEDTLS_MPI_WINDOW_SIZE 1'

base_size=
printf '%s\n' "$levers" | while IFS='|' read -r name lines; do
	if [ $# -gt 0 ] && ! echo " base $* " | grep -q " $name "; then continue; fi
	d=$out/$name
	mkdir -p "$d/obj"
	{
		echo "#include \"$(pwd)/config/mbedtls_config.h\""
		printf '%b\n' "$lines"
	} >"$d/config.h.new"
	if ! cmp -s "$d/config.h.new" "$d/config.h" || [ ! -f "$d/libmbedtls.a" ]; then
		mv "$d/config.h.new" "$d/config.h"
		rm -f "$d/obj/"*.o "$d/libmbedtls.a"
		ls build/deps/mbedtls/library/*.c | xargs -P2 -I{} sh -c \
			"$cc -std=c99 -Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables \
			-fno-unwind-tables $arch -fstack-protector-strong -fno-plt -w \
			-isystem build/deps/mbedtls/include -Ibuild/deps/mbedtls/library \
			-DMBEDTLS_CONFIG_FILE='\"$(pwd)/$d/config.h\"' -c -o $d/obj/\$(basename {} .c).o {}" \
			2>"$d/errors.log"
		if [ -s "$d/errors.log" ]; then
			echo "$name: refused by mbedTLS: $(grep -m1 -o '#error.*\|error: .*' "$d/errors.log")"
			continue
		fi
		$ar rcs "$d/libmbedtls.a" "$d"/obj/*.o
	fi
	if ! $cc -static $arch -Wl,--gc-sections -Wl,-z,relro,-z,now,-z,noexecstack -Wl,--build-id=none \
		-fno-lto -o "$d/kreflect" $objs "$d/libmbedtls.a" 2>"$d/link.log"; then
		echo "$name: kreflect does not link: $(grep -m1 'undefined reference' "$d/link.log")"
		continue
	fi
	$strip "$d/kreflect"
	s=$(stat -c %s "$d/kreflect")
	tx=$(${strip%strip}size "$d/kreflect" | awk 'NR==2 {print $1}')
	[ "$name" = base ] && echo "$s $tx" >"$out/base.size"
	read -r bs btx <"$out/base.size"
	printf '%-18s file %7d (%+7d)  text %7d (%+7d)\n' "$name" "$s" $((s - bs)) "$tx" $((tx - btx))
done
