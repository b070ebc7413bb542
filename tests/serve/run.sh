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
. tests/e2e/target.sh
kr_pick_binary "$target"
kr_qemu_wrap "build/test/serve-$target"
exec python3 tests/serve/test_serve.py "$bin" -j 3 "$@"
