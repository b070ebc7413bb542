#!/bin/sh
# Instructions per KiB of TLS record decryption (tests/bench/bench_aead.c) on each
# built target: AES-256-GCM on the CPU's path (port/crypto/gcm.c), the same on the
# portable path, and mbedTLS's ChaCha20-Poly1305.
#   x86_64:        valgrind --tool=callgrind, the program's total instructions;
#   aarch64/armv7: qemu-user in single-step mode with its execution trace
#                  (-singlestep -d exec,nochain): one trace line per guest
#                  instruction. Debian's qemu-user ships no TCG plugins
#                  (no libinsn.so), so the trace is the counter.
# Each figure is (instructions with 2N records - with N records) / N, N = $1 (16: the counts are exact, so a small N suffices).
#
#   sh tests/bench/aead.sh [N] [TARGET...]     (make bench-aead)
set -u
cd "$(dirname "$0")/../.." || exit 1
n=${1:-16}
[ $# -gt 0 ] && shift
targets=${*:-x86_64 aarch64 armv7}

count() { # target mode records -> instructions
	bin=build/$1/bench/bench_aead
	case $1 in
	x86_64)
		out=$(mktemp)
		valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$2" "$3" >/dev/null 2>&1 || { rm -f "$out"; return 1; }
		sed -n 's/^summary: *//p; s/^totals: *//p' "$out" | head -n 1
		rm -f "$out"
		;;
	aarch64 | armv7)
		q=qemu-aarch64
		[ "$1" = armv7 ] && q=qemu-arm
		# The trace goes to descriptor 3, the program's own output to /dev/null.
		{ $q -singlestep -d exec,nochain -D /dev/fd/3 "$bin" "$2" "$3" >/dev/null; } 3>&1 | grep -c '^Trace'
		;;
	esac
}

printf '%-8s %22s %22s %22s\n' target "AES-256-GCM (CPU path)" "AES-256-GCM portable" "ChaCha20-Poly1305"
for t in $targets; do
	[ -x "build/$t/bench/bench_aead" ] || { echo "$t: build/$t/bench/bench_aead missing (make TARGET=$t target-bench)"; continue; }
	line=$(printf '%-8s' "$t")
	for m in gcm gcm-portable chacha; do
		a=$(count "$t" "$m" "$n") && b=$(count "$t" "$m" $((2 * n))) || { echo "$t $m: FAIL"; exit 1; }
		line="$line $(printf '%22s' "$(((b - a) / n))")"
	done
	echo "$line"
done
echo "(instructions per 1 KiB record, decrypt and verify; $n vs $((2 * n)) records)"
