#!/bin/sh
# The state directory end to end (tests/state/test_state.py) against the test
# API server, for one build target:
#
#   sh tests/state/run.sh [TARGET] [NAME ...]
#
# Last line: "N passed, N failed".
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
exec python3 tests/state/test_state.py "$bin" "$@"
