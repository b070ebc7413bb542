#!/bin/sh
# Checks on the built artifacts: static linking, --version on every
# architecture (ARM under qemu-user), the size ceiling, the static memory
# budget against the binary's real .data + .bss, exported symbols and lint.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/result.sh

# Stripped binary ceilings (bytes), default and PROFILE=tiny builds: the sizes
# `make size` measured plus 2 % (the x86_64 and aarch64 files grow in 4 KiB
# steps), so that growth is a decision, not an accident; tests/build/README.md "Sizes" has the
# figures and where the bytes go. Default: x86_64 464,064, aarch64 480,408, armv7
# 357,368 (issue #20's 300/320/260 KB need a build WITHOUT some features: tests/build/README.md);
# the relay (TLS on --listen, mbedTLS's server side; identities; list and selector
# watch semantics) added 24,576 / 24,576 / 16,384 of them, most of it the TLS
# server, which WITHOUT=listen_tls takes out again.
# Tiny: 201,816, 201,784, 144,252 (200 KB met on all three; x86_64's code segment
# ends 1,533 bytes below the page that would add 4 KiB to its file).
# Library 1.0 (failure classes, sized configuration and status): text +0.3 % (default)
# to +0.7 % (tiny) on every target, files unchanged except armv7-tiny, whose code
# segment ended 88 bytes below a page: its 1,012 bytes took the next 4 KiB (148,348).
# The sandbox (Landlock, seccomp, --user: about 8 KB of code on x86_64) on top:
# x86_64 480,448, aarch64 496,792, armv7 369,656.
# Library 1.1 (the endpoint, the --dir sink, the hooks, -- PROGRAM, host timers and the
# budget as calls; main.c's flag table) and the relay's 512 slots: x86_64 488,640,
# aarch64 504,984, armv7 377,840, whose code segment crossed a page by 1,784 bytes (the
# ceiling follows: +1 % of that); tiny 201,816, 197,688, 144,252.
MAX_X86_64=${KR_MAX_BINARY_BYTES:-490100}
MAX_AARCH64=506800
MAX_ARMV7=381600
MAX_X86_64_TINY=205900
MAX_AARCH64_TINY=205900
MAX_ARMV7_TINY=151400

for t in x86_64 aarch64 armv7; do
	b=build/$t/kreflect
	case $t in aarch64) q=qemu-aarch64 ;; armv7) q=qemu-arm ;; *) q= ;; esac
	if [ ! -x "$b" ]; then
		bad "$t: $b missing"
		continue
	fi
	if file "$b" | grep -q 'statically linked'; then ok "$t: statically linked"; else bad "$t: not static: $(file "$b")"; fi
	if file "$b" | grep -q 'stripped' && ! file "$b" | grep -q 'not stripped'; then ok "$t: stripped"; else bad "$t: not stripped"; fi
	v=$($q "$b" --version 2>&1)
	if echo "$v" | grep -q "^kreflect [0-9]" && echo "$v" | grep -q "target: $t" &&
		echo "$v" | grep -q "mbedTLS: 3\.6\."; then
		ok "$t: --version runs ($(echo "$v" | head -1))"
	else
		bad "$t: --version: $v"
	fi
	$q "$b" --no-such-flag >/dev/null 2>&1
	rc=$?
	if [ $rc -eq 2 ]; then ok "$t: unknown flag exits 2"; else bad "$t: unknown flag exited $rc"; fi
	# The long --help is stored compressed: it must come out whole (src/help.c).
	h=build/$t/gen/usage_gz.h
	if [ -f "$h" ]; then
		want=$(sed -n 's/^#define KR_USAGE_LEN \([0-9]*\)u$/\1/p' "$h")
		got=$($q "$b" --help | wc -c)
		first=$($q "$b" --help | head -1)
		if [ "$got" = "$want" ] && [ "${first#usage: kreflect}" != "$first" ]; then
			ok "$t: --help expands to its $want bytes"
		else
			bad "$t: --help gave $got bytes (want $want), first line '$first'"
		fi
		# An output that cannot be written is an error, not a help text cut short.
		err=$($q "$b" --help 2>&1 >/dev/full)
		rc=$?
		if [ $rc -eq 1 ] && [ "${err#kreflect: unable to write the help text: }" != "$err" ]; then
			ok "$t: --help to a full device exits 1 and says so"
		else
			bad "$t: --help to /dev/full exited $rc: '$err'"
		fi
	fi
done

# make test builds the tiny profile of every target.
for t in x86_64 aarch64 armv7 x86_64-tiny armv7-tiny aarch64-tiny; do
	case $t in
	x86_64) max=$MAX_X86_64 ;; aarch64) max=$MAX_AARCH64 ;; armv7) max=$MAX_ARMV7 ;;
	x86_64-tiny) max=$MAX_X86_64_TINY ;; armv7-tiny) max=$MAX_ARMV7_TINY ;;
	aarch64-tiny) max=$MAX_AARCH64_TINY ;;
	esac
	size=$(stat -c %s build/$t/kreflect 2>/dev/null || echo 0)
	if [ "$size" -gt 0 ] && [ "$size" -le "$max" ]; then
		ok "$t binary is $size bytes (ceiling $max)"
	else
		bad "$t binary is $size bytes (ceiling $max)"
	fi
done

# No printf engine (12 KB): src/fmt.c formats for kreflect and mbedTLS, and no libc
# call may pull vfprintf back in (inet_ntop did).
if nm build/x86_64/kreflect.unstripped 2>/dev/null | grep -qE ' (vfprintf|printf_core)$'; then
	bad "the C library's printf engine is linked: $(nm build/x86_64/kreflect.unstripped | grep -E ' (vfprintf|printf_core)$' | tr '\n' ' ')"
else
	ok "no printf engine linked"
fi

# The printed budget must account for the binary's static memory: every large
# buffer is in the budget, and the rest (libc, small tables) stays small.
for d in x86_64 x86_64-tiny; do
	budget=$(build/$d/kreflect --print-budget | awk '$1 == "static" {print $2}')
	databss=$(size build/$d/kreflect.unstripped | awk 'NR == 2 {print $2 + $3}')
	slack=$((databss - budget))
	if [ -n "$budget" ] && [ "$slack" -ge 0 ] && [ "$slack" -le 32768 ]; then
		ok "$d: budget $budget bytes vs .data+.bss $databss bytes (unbudgeted $slack)"
	else
		bad "$d: budget ${budget:-?} bytes vs .data+.bss $databss bytes: unbudgeted $slack (allowed 0..32768)"
	fi
done

if make --no-print-directory check-symbols >build/test-logs/check-symbols.log 2>&1; then ok "check-symbols"; else bad "check-symbols: $(cat build/test-logs/check-symbols.log)"; fi
if make --no-print-directory lint >build/test-logs/lint.log 2>&1; then ok "lint"; else bad "lint: $(cat build/test-logs/lint.log)"; fi

result
