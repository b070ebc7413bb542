#!/bin/sh
# End-to-end tests: the real kreflect binary against tests/apiserver over TLS.
#
#   sh tests/e2e/run.sh [TARGET] [NAME ...]
#
# TARGET picks the binary: x86_64 -> build/kreflect, anything else ->
# build/TARGET/kreflect (asan -> build/asan/kreflect; aarch64 and armv7 under
# qemu-user). The last line is
# "N passed, N failed"; what each scenario saw is kept in build/test/e2e-TARGET/.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
case "$target" in
x86_64) bin=build/kreflect ;;
*) bin=build/$target/kreflect ;;
esac
if [ ! -x "$bin" ]; then
	echo "FAIL setup: $bin is not built (make, or make TARGET=$target target-bin)"
	echo "0 passed, 1 failed"
	exit 1
fi
# ARM builds run under qemu-user, through a wrapper that execs it (same pid, same signals).
case "$target" in
aarch64 | armv7)
	q=qemu-aarch64
	[ "$target" = armv7 ] && q=qemu-arm
	mkdir -p build/test
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$q" "$PWD" "$bin" >"build/test/kreflect-$target"
	chmod +x "build/test/kreflect-$target"
	bin=build/test/kreflect-$target
	;;
esac
exec python3 tests/e2e/test_e2e.py "$bin" "$@"
