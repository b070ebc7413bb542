#!/bin/sh
# The local endpoint (--listen) end to end: tests/serve/test_serve.py against
# the real binary of TARGET (x86_64 -> build/kreflect, else build/TARGET/kreflect;
# aarch64 and armv7 under qemu-user). The last line is "N passed, N failed".
#
#   sh tests/serve/run.sh [TARGET] [NAME ...]
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
case "$target" in
x86_64) bin=build/kreflect ;;
*) bin=build/$target/kreflect ;;
esac
if [ ! -x "$bin" ]; then
	echo "FAIL setup: $bin is not built"
	echo "0 passed, 1 failed"
	exit 1
fi
case "$target" in
aarch64 | armv7)
	q=qemu-aarch64
	[ "$target" = armv7 ] && q=qemu-arm
	mkdir -p "build/test/serve-$target"
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$q" "$PWD" "$bin" >"build/test/serve-$target/kreflect"
	chmod +x "build/test/serve-$target/kreflect"
	bin=build/test/serve-$target/kreflect
	;;
esac
exec python3 tests/serve/test_serve.py "$bin" -j 3 "$@"
