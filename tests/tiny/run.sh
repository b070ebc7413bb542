#!/bin/sh
# The PROFILE=tiny build end to end (test_tiny.py): 100 ConfigMaps synced and
# watched over TLS 1.3 from a server with an ECDSA P-256 certificate, its peak
# memory (x86_64), and what the profile leaves out refused by name.
#
#   sh tests/tiny/run.sh [TARGET] [NAME ...]
#
# TARGET x86_64 (default) runs build/x86_64-tiny/kreflect; aarch64 or armv7
# build/TARGET-tiny/kreflect under qemu-user (no memory figure: qemu's own
# memory would be counted). The last line is "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
bin=build/$target-tiny/kreflect
if [ ! -x "$bin" ]; then
	echo "FAIL setup: $bin is not built (make PROFILE=tiny TARGET=$target target-bin)"
	echo "0 passed, 1 failed"
	exit 1
fi
native=1
case "$target" in
aarch64 | armv7)
	q=qemu-aarch64
	[ "$target" = armv7 ] && q=qemu-arm
	mkdir -p "build/test/tiny-$target"
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$q" "$PWD" "$bin" >"build/test/tiny-$target/kreflect"
	chmod +x "build/test/tiny-$target/kreflect"
	bin=build/test/tiny-$target/kreflect
	native=0
	;;
esac
KR_TINY_NATIVE=$native exec python3 tests/tiny/test_tiny.py "$bin" -j 3 "$@"
