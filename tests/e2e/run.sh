#!/bin/sh
# End-to-end tests: the real kreflect binary against tests/apiserver over TLS.
#
#   sh tests/e2e/run.sh [TARGET] [NAME ...]
#
# TARGET picks the binary: x86_64 -> build/kreflect, anything else ->
# build/TARGET/kreflect (asan -> build/asan/kreflect; aarch64 and armv7 under
# qemu-user); valgrind -> the host binary (unstripped, for readable reports)
# under valgrind's memcheck. The last line is
# "N passed, N failed"; what each scenario saw is kept in build/test/e2e-TARGET/.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
case "$target" in
x86_64) bin=build/kreflect ;;
valgrind) bin=build/x86_64/kreflect.unstripped ;;
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
	# In a directory named after the target: test_e2e.py names its artifacts
	# directory after the binary's, so aarch64 and armv7 run side by side.
	mkdir -p "build/test/$target"
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$q" "$PWD" "$bin" >"build/test/$target/kreflect"
	chmod +x "build/test/$target/kreflect"
	bin=build/test/$target/kreflect
	;;
valgrind)
	# Memcheck on the static musl binary: every use of uninitialised memory
	# (with its origin), every system call given unaddressable or undefined
	# bytes, every access outside mapped memory. --leak-check=full has nothing
	# to find: valgrind cannot replace malloc in a static binary, and kreflect
	# makes no heap calls after start-up (tests/malloc counts them).
	# Each process (forks included) writes its report to vg/; an error exits
	# 1, and the reports are read after the run, since some scenarios expect
	# kreflect to exit 1 anyway. The wrapper lives in a directory of its own
	# so that its artifacts go to build/test/e2e-valgrind/.
	command -v valgrind >/dev/null || {
		echo "FAIL setup: valgrind is not installed (make test-deps)"
		echo "0 passed, 1 failed"
		exit 1
	}
	vg=build/test/e2e-valgrind/vg
	rm -rf "$vg" && mkdir -p "$vg" build/test/valgrind || exit 1
	printf '#!/bin/sh\nexec valgrind --tool=memcheck --error-exitcode=1 --leak-check=full --track-origins=yes --log-file=%s/%%p.log %s/%s "$@"\n' \
		"$PWD/$vg" "$PWD" "$bin" >build/test/valgrind/kreflect
	chmod +x build/test/valgrind/kreflect
	# One scenario cannot run under memcheck, which makes kreflect some 20
	# times slower: StaleKeepAliveConnection. Its server drops connections
	# idle for 0.3 s, and it needs kreflect's next request on the same
	# connection within that time; a longer idle time would no longer be
	# shorter than the backoff the scenario is about. It runs in every other
	# build. Naming scenarios runs exactly those.
	if [ $# -eq 0 ]; then
		set -- $(python3 -c 'import sys; sys.path.insert(0, "tests/e2e"); import test_e2e
print(" ".join(n for n, _, _ in test_e2e.SCENARIOS if n != "StaleKeepAliveConnection"))') || exit 1
	fi
	# Timing checks are scaled for valgrind's slowness (test_e2e.py: KR_E2E_SLOW),
	# and fewer scenarios run at once: memcheck makes each one CPU-bound.
	out=build/test/e2e-valgrind/output
	KR_E2E_SLOW=${KR_E2E_SLOW:-4} python3 tests/e2e/test_e2e.py build/test/valgrind/kreflect \
		-j 2 "$@" >"$out" 2>&1
	rc=$?
	grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$out"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	p=$(echo "${line:-0 passed}" | sed 's/ passed.*//')
	f=$(echo "${line:-0 passed, 1 failed}" | sed 's/.* passed, \([0-9]*\) failed.*/\1/')
	[ -n "$line" ] || echo "FAIL e2e: exited $rc without a result line"
	bad=0
	for log in "$vg"/*.log; do
		[ -f "$log" ] || continue
		# A process the scenario killed (SIGKILL) has no summary: look for reports.
		grep -q -E 'ERROR SUMMARY: [1-9]|== (Invalid|Conditional jump|Use of uninitialised|Syscall param|Source and destination|Mismatched)|definitely lost: [1-9]' \
			"$log" || continue
		echo "FAIL valgrind: $log"
		grep -E '^==[0-9]+== ' "$log" | head -30 | sed 's/^/    /'
		bad=$((bad + 1))
	done
	n=$(ls "$vg" | wc -l)
	# One more check: no process that valgrind watched reported an error.
	if [ "$bad" -eq 0 ] && [ "$n" -gt 0 ]; then
		echo "ok valgrind: $n process reports, 0 errors"
		p=$((p + 1))
	else
		echo "FAIL valgrind: $bad of $n process reports have errors"
		f=$((f + 1))
	fi
	echo "$p passed, $f failed"
	[ "$f" -eq 0 ]
	exit
	;;
esac
exec python3 tests/e2e/test_e2e.py "$bin" "$@"
