#!/bin/sh
# The e2e scenarios (tests/e2e/test_e2e.py) once more with --state-dir on:
# the host binary through a wrapper that adds --state-dir $HOME/state-on
# (HOME is the scenario's own directory, so a scenario that runs kreflect
# twice restarts it warm). Left out, by design: the scenarios that restart
# kreflect and expect the second run to list cold, or its stdout to hold the
# whole mirror, which a warm restart does not print (it prints only the
# changes): RandomChunkBoundaries, OnceExitsAfterSync, LabelSelector,
# CapacityObjectsAtList; and, since the first snapshot is written right after
# the first sync (not an interval later), the four whose second run used to
# come within that interval: ContentEncodingNotAskedFor, ConfigMap1MiBByteExact,
# ObjectsTooLargeToHold, CapacityBytesAtList (its "off" run restores the "on"
# run's partial snapshot, lists, holds the same objects and so prints none of
# them; StateArenaPartialRestart in tests/state checks that restart).
#
#   sh tests/state/e2e_on.sh
#
# Last line: "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
bin=$PWD/build/kreflect
if [ ! -x "$bin" ]; then
	echo "FAIL setup: $bin is not built (make)"
	echo "0 passed, 1 failed"
	exit 1
fi
mkdir -p build/test/state-on || exit 1
printf '#!/bin/sh\nexec %s --state-dir "$HOME/state-on" "$@"\n' "$bin" >build/test/state-on/kreflect
chmod +x build/test/state-on/kreflect
set -- $(python3 -c 'import sys; sys.path.insert(0, "tests/e2e"); import test_e2e
skip = ("RandomChunkBoundaries", "OnceExitsAfterSync", "LabelSelector", "CapacityObjectsAtList",
        "ContentEncodingNotAskedFor", "ConfigMap1MiBByteExact", "ObjectsTooLargeToHold",
        "CapacityBytesAtList")
print(" ".join(n for n, _, _ in test_e2e.SCENARIOS if n not in skip))') || exit 1
exec python3 tests/e2e/test_e2e.py build/test/state-on/kreflect -j 3 "$@"
