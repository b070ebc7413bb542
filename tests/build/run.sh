#!/bin/sh
# Checks on the built artifacts: static linking, --version on every
# architecture (ARM under qemu-user), the size ceiling, the static memory
# budget against the binary's real .data + .bss, exported symbols and lint.
set -u
cd "$(dirname "$0")/../.." || exit 1
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# Stripped x86_64 binary ceiling (bytes): today's size plus 2 %, so that growth is a
# decision, not an accident; the README table has the real figures. 359,360 bytes
# before the library API (+12,288: the client's own checks and messages), gzip lists
# (src/inflate.c, +9,088 of text), the local endpoint (--listen: src/serve.c,
# src/http_server.c, +36,840), the state directory (src/state.c) and k8s-sidecar
# mode (src/sidecar_env.c, +20,480); 455,000 is the merged binary (445,376) plus 2 %.
# Slow-flash I/O (descriptor-relative --dir calls, batched syncs, the state's commits in
# a child process) made it 457,704: 467,000 is that plus 2 %. Issue #20's 300 KB needs a
# profile without some of them (not done yet).
MAX_X86_64=${KR_MAX_BINARY_BYTES:-467000}

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
done

size=$(stat -c %s build/x86_64/kreflect 2>/dev/null || echo 0)
if [ "$size" -gt 0 ] && [ "$size" -le "$MAX_X86_64" ]; then
	ok "x86_64 binary is $size bytes (ceiling $MAX_X86_64)"
else
	bad "x86_64 binary is $size bytes (ceiling $MAX_X86_64)"
fi

# No printf engine (12 KB): src/fmt.c formats for kreflect and mbedTLS, and no libc
# call may pull vfprintf back in (inet_ntop did).
if nm build/x86_64/kreflect.unstripped 2>/dev/null | grep -qE ' (vfprintf|printf_core)$'; then
	bad "the C library's printf engine is linked: $(nm build/x86_64/kreflect.unstripped | grep -E ' (vfprintf|printf_core)$' | tr '\n' ' ')"
else
	ok "no printf engine linked"
fi

# The printed budget must account for the binary's static memory: every large
# buffer is in the budget, and the rest (libc, small tables) stays small.
budget=$(build/x86_64/kreflect --print-budget | awk '$1 == "static" {print $2}')
databss=$(size build/x86_64/kreflect.unstripped | awk 'NR == 2 {print $2 + $3}')
slack=$((databss - budget))
if [ -n "$budget" ] && [ "$slack" -ge 0 ] && [ "$slack" -le 32768 ]; then
	ok "budget $budget bytes vs .data+.bss $databss bytes (unbudgeted $slack)"
else
	bad "budget ${budget:-?} bytes vs .data+.bss $databss bytes: unbudgeted $slack (allowed 0..32768)"
fi

if make --no-print-directory check-symbols >build/test-logs/check-symbols.log 2>&1; then ok "check-symbols"; else bad "check-symbols: $(cat build/test-logs/check-symbols.log)"; fi
if make --no-print-directory lint >build/test-logs/lint.log 2>&1; then ok "lint"; else bad "lint: $(cat build/test-logs/lint.log)"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
