#!/bin/sh
# Runs every test suite for the given build targets and sums their results.
# Each suite prints its own "N passed, N failed" last; a suite that dies
# without one counts as one failure. The last line is the total, for CI.
#
#   sh tests/run.sh x86_64 asan aarch64 armv7
#
# The suites run in two lanes at once (TEST_LANES=1 runs them one after the
# other): the x86_64 build and the host-only suites in one, the other builds
# in the other. Most suites wait on servers, timeouts and qemu far more than
# they compute, so two lanes share the machine's two cores; every suite's
# timeouts already allow for qemu-user and valgrind, which are slower than a
# busy core. A suite's lines are printed whole when it ends, with its name.
set -u
cd "$(dirname "$0")/.." || exit 1

log_dir=build/test-logs
mkdir -p "$log_dir"
lanes=${TEST_LANES:-2}

qemu_for() {
	case "$1" in
	aarch64) echo "qemu-aarch64" ;;
	armv7) echo "qemu-arm" ;;
	*) echo "" ;;
	esac
}

# run_suite NAME COMMAND...: runs it, then prints its name, result and time,
# the failures it shows, and adds its counts to the lane's totals.
run_suite() {
	name=$1
	shift
	log="$log_dir/$(echo "$name" | tr '/ ' '__').log"
	t0=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - t0))
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	# Failures and the summary go out in one write, so lanes do not interleave them.
	{
		if [ -z "$line" ]; then
			echo "== $name: exited $rc without a result line ($took s)"
			tail -20 "$log"
		else
			echo "== $name: $line ($took s)"
		fi
		grep -E '^(FAIL|not ok|ERROR|==[0-9]+==|.*runtime error)' "$log" | head -40
	} >"$log.summary"
	cat "$log.summary"
	if [ -z "$line" ]; then
		lane_fail=$((lane_fail + 1))
		lane_failed="$lane_failed $name"
		return
	fi
	p=$(echo "$line" | sed 's/ passed.*//')
	f=$(echo "$line" | sed 's/.* passed, \([0-9]*\) failed.*/\1/')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "$name: exited $rc although nothing failed"
		f=1
	fi
	lane_pass=$((lane_pass + p))
	lane_fail=$((lane_fail + f))
	[ "$f" -eq 0 ] || lane_failed="$lane_failed $name"
}

# The suites of one build target (ARM under qemu-user).
target_suites() {
	t=$1
	q=$(qemu_for "$t")
	run_suite "unit/$t" $q "build/$t/tests/unit"
	for r in build/"$t"/tests/replay_*; do
		[ -x "$r" ] || continue
		n=${r##*/replay_}
		run_suite "corpus-$n/$t" $q "$r" "tests/corpus/$n"
	done
	run_suite "tls/$t" sh tests/tls/run.sh "$t"
	run_suite "transport/$t" sh tests/transport/run.sh "$t"
	# Cluster access and the reflector end to end against the test API server.
	run_suite "access/$t" sh tests/access/run.sh "$t"
	run_suite "e2e/$t" sh tests/e2e/run.sh "$t"
	# Every flag's messages and bounds (the expected answers are the x86_64 build's capacities).
	case $t in x86_64) run_suite "cli/$t" python3 tests/cli/run.py "$t" ;; esac
	run_suite "files/$t" sh tests/files/run.sh "$t"
	run_suite "supervise/$t" sh tests/supervise/run.sh "$t"
	run_suite "example/$t" python3 tests/example/run.py "$t"
	run_suite "serve/$t" sh tests/serve/run.sh "$t"
	run_suite "state/$t" sh tests/state/run.sh "$t"
	run_suite "sidecar/$t" sh tests/sidecar/run.sh "$t"
	# Against the real API server library on a real etcd (make realapi); ARM: the basic cases.
	run_suite "realapi/$t" python3 tests/realapi/run.py "$t"
	# The PROFILE=tiny build (config/README.md "The tiny profile"): on x86_64, and on
	# the ARM targets under qemu-user.
	# The sandbox from the inside (and, on x86_64, its allow list against strace): the musl
	# builds, whose allow list it is (the sanitizer build on glibc has Landlock only, and
	# every other suite of it runs under that).
	case $t in x86_64 | aarch64 | armv7) run_suite "sandbox/$t" sh tests/sandbox/run.sh "$t" ;; esac
	case $t in x86_64 | aarch64 | armv7) run_suite "tiny/$t" sh tests/tiny/run.sh "$t" ;; esac
}

# The suites that run on the host build only.
host_suites() {
	run_suite build sh tests/build/run.sh
	# main.c includes kreflect.h and a few allowed headers only; what it still needs of
	# the library's insides is listed, and the list only shrinks (tests/cli/includes.sh).
	run_suite cli-includes sh tests/cli/includes.sh
	# The man page against --help, and make install into a DESTDIR.
	run_suite install sh tests/install/run.sh
	# The systemd unit, the procd script and the OpenWrt and Buildroot recipes (config/examples/).
	run_suite gateway sh tests/install/gateway.sh
	run_suite apiserver python3 tests/apiserver/test_apiserver.py
	run_suite readme-library python3 tests/example/readme.py
	# Every relative Markdown link, and every README section named in words, resolves.
	run_suite docs python3 tests/docs/check_docs.py
	# Every row of the reflector's decision table names a test that exists.
	run_suite rules python3 tests/rules/check_rules.py
	# libkreflect's ABI against the 1.0 baseline, and libkreflect.so.1's exports (tests/abi/).
	run_suite abi python3 tests/abi/check.py
	# kreflect beside client-go's own Reflector on every fault (make peers).
	run_suite peers python3 tests/peers/test_peers.py
	# The test API server against kubectl 1.32 and client-go 0.32 (make test-deps, make peers).
	run_suite real-clients python3 tests/peers/test_real_clients.py
	# Upstream -> relay -> second-level relay -> 50 kreflects, kubectl -w, client-go,
	# python3-kubernetes and client-node, under faults at every level (make peers, make test-deps).
	run_suite relay python3 tests/relay/test_relay.py
	# The same tree with TLS, the CA and a token below the first relay (10 downstreams,
	# to keep the suite short; a relay holds KR_SERVE_TLS_CONNS, 512, TLS sessions).
	run_suite relay-tls python3 tests/relay/test_relay.py --tls --downstreams 10
	run_suite malloc sh tests/malloc/run.sh
	# The e2e scenarios once more with --state-dir on (warm restarts inside scenarios).
	run_suite e2e/state-on sh tests/state/e2e_on.sh
	# The end-to-end suite once more, the host binary under valgrind's memcheck.
	run_suite e2e/valgrind sh tests/e2e/run.sh valgrind
	# The deterministic simulation: directed regressions and 1,000 random fault
	# schedules (make sim SEEDS=N runs more), then a few under ASan+UBSan.
	run_suite sim build/sim/sim --seeds 1000
	run_suite sim/asan build/asan-sim/sim --seeds 200 --first 100001
}

# run_lane N ITEM...: runs each item (a build target, or "host") and writes
# "passed failed suites..." to the lane's result file.
run_lane() {
	lane=$1
	shift
	lane_pass=0
	lane_fail=0
	lane_failed=""
	for item in "$@"; do
		if [ "$item" = host ]; then
			host_suites
		else
			target_suites "$item"
		fi
	done
	echo "$lane_pass $lane_fail$lane_failed" >"$log_dir/lane-$lane.result"
}

# Lane 1: x86_64 and the host-only suites (when x86_64 is asked for); lane 2:
# every other target.
lane1=""
lane2=""
for t in "$@"; do
	if [ "$t" = x86_64 ]; then
		lane1="$lane1 x86_64 host"
	elif [ "$lanes" -ge 2 ]; then
		lane2="$lane2 $t"
	else
		lane1="$lane1 $t"
	fi
done
rm -f "$log_dir"/lane-*.result
if [ -n "$lane2" ]; then
	# shellcheck disable=SC2086
	run_lane 2 $lane2 &
	lane2_pid=$!
fi
# shellcheck disable=SC2086
[ -z "$lane1" ] || run_lane 1 $lane1
[ -z "$lane2" ] || wait "$lane2_pid"

total_pass=0
total_fail=0
failed_suites=""
for lane in 1 2; do
	f="$log_dir/lane-$lane.result"
	case $lane in 1) items=$lane1 ;; *) items=$lane2 ;; esac
	[ -n "$items" ] || continue
	if [ ! -f "$f" ]; then
		echo "lane $lane ($items) ended without its result"
		total_fail=$((total_fail + 1))
		failed_suites="$failed_suites lane-$lane"
		continue
	fi
	read -r p n rest <"$f"
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + n))
	[ -z "$rest" ] || failed_suites="$failed_suites $rest"
done
[ -z "$failed_suites" ] || echo "failed suites:$failed_suites"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
