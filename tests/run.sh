#!/bin/sh
# Runs every test suite for the given build targets and sums their results.
# Each suite prints its own "N passed, N failed" last; a suite that dies
# without one counts as one failure. The last line is the total, for CI.
#
#   sh tests/run.sh x86_64 asan aarch64 armv7
set -u
cd "$(dirname "$0")/.." || exit 1

total_pass=0
total_fail=0
failed_suites=""
log_dir=build/test-logs
mkdir -p "$log_dir"

qemu_for() {
	case "$1" in
	aarch64) echo "qemu-aarch64" ;;
	armv7) echo "qemu-arm" ;;
	*) echo "" ;;
	esac
}

# run_suite NAME COMMAND...: runs it, shows its output, adds its counts.
run_suite() {
	name=$1
	shift
	log="$log_dir/$(echo "$name" | tr '/ ' '__').log"
	echo "== $name"
	t0=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	echo "($name took $(($(date +%s) - t0)) s)"
	# Show failures and the summary; the whole log stays in build/test-logs/.
	grep -E '^(FAIL|not ok|ERROR|==[0-9]+==|.*runtime error)' "$log" | head -40
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		tail -20 "$log"
		echo "$name: exited $rc without a result line"
		total_fail=$((total_fail + 1))
		failed_suites="$failed_suites $name"
		return
	fi
	echo "$line"
	p=$(echo "$line" | sed 's/ passed.*//')
	f=$(echo "$line" | sed 's/.* passed, \([0-9]*\) failed.*/\1/')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "$name: exited $rc although nothing failed"
		f=1
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	[ "$f" -eq 0 ] || failed_suites="$failed_suites $name"
}

for t in "$@"; do
	q=$(qemu_for "$t")
	run_suite "unit/$t" $q "build/$t/tests/unit"
	for r in build/"$t"/tests/replay_*; do
		[ -x "$r" ] || continue
		n=${r##*/replay_}
		run_suite "corpus-$n/$t" $q "$r" "tests/corpus/$n"
	done
	if [ -f tests/tls/run.sh ]; then
		run_suite "tls/$t" sh tests/tls/run.sh "$t"
	fi
	run_suite "transport/$t" sh tests/transport/run.sh "$t"
	# End to end against the test API server: the product build and the sanitizers.
	# Cluster access and the reflector end to end, on every build (ARM under qemu-user).
	run_suite "access/$t" sh tests/access/run.sh "$t"
	run_suite "e2e/$t" sh tests/e2e/run.sh "$t"
	run_suite "files/$t" sh tests/files/run.sh "$t"
	run_suite "supervise/$t" sh tests/supervise/run.sh "$t"
	run_suite "example/$t" python3 tests/example/run.py "$t"
	run_suite "serve/$t" sh tests/serve/run.sh "$t"
	run_suite "state/$t" sh tests/state/run.sh "$t"
	run_suite "sidecar/$t" sh tests/sidecar/run.sh "$t"
	# The PROFILE=tiny build (README "Sizes"): on x86_64, and on armv7 under qemu-user.
	case $t in x86_64 | armv7) run_suite "tiny/$t" sh tests/tiny/run.sh "$t" ;; esac
done

case " $* " in
*" x86_64 "*)
	run_suite build sh tests/build/run.sh
	run_suite apiserver python3 tests/apiserver/test_apiserver.py
	run_suite readme-library python3 tests/example/readme.py
	# kreflect beside client-go's own Reflector on every fault (make peers).
	run_suite peers python3 tests/peers/test_peers.py
	# The test API server against kubectl 1.32 and client-go 0.32 (make deps, make peers).
	run_suite real-clients python3 tests/peers/test_real_clients.py
	run_suite malloc sh tests/malloc/run.sh
	# The e2e scenarios once more with --state-dir on (warm restarts inside scenarios).
	run_suite e2e/state-on sh tests/state/e2e_on.sh
	# The end-to-end suite once more, the host binary under valgrind's memcheck.
	run_suite e2e/valgrind sh tests/e2e/run.sh valgrind
	# The deterministic simulation: directed regressions and 1,000 random fault
	# schedules (make sim SEEDS=N runs more), then a few under ASan+UBSan.
	run_suite sim build/sim/sim --seeds 1000
	run_suite sim/asan build/asan-sim/sim --seeds 200 --first 100001
	;;
esac

[ -z "$failed_suites" ] || echo "failed suites:$failed_suites"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
