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
. tests/e2e/target.sh
kr_pick_binary "$target"
kr_qemu_wrap "build/test/state-$target"
exec python3 tests/state/test_state.py "$bin" "$@"
