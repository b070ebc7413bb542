#!/bin/sh
# Runs libFuzzer targets one after the other, SECONDS each, each with its
# dictionary, starting from tests/corpus/NAME/ and writing what it learns to
# build/fuzz-corpus/NAME/ (log: build/fuzz-corpus/NAME.log, crashes:
# build/fuzz-corpus/NAME-crash-*). Prints the final figures of each and stops
# at the first target that fails (FUZZ_KEEP_GOING=1: runs the others first).
#
#   sh tests/fuzz/run.sh SECONDS NAME...      (make fuzz FUZZ_SECONDS=N runs all)
#
# The binaries are copied first, so that a rebuild during a long run does not
# change the program under test.
set -u
cd "$(dirname "$0")/../.." || exit 1

[ $# -ge 2 ] || { echo "usage: sh tests/fuzz/run.sh SECONDS NAME..." >&2; exit 2; }
seconds=$1
shift

# The dictionaries a target uses: most share json.dict or http.dict; a target
# with several gets them joined into one file (libFuzzer reads one -dict).
dicts_for() {
	case "$1" in
	http_head | chunked) echo http ;;
	object_framer | items_framer | json_parse | json_sel | event_apply) echo json ;;
	watch_path) echo http json watch_path ;;
	discovery) echo json discovery ;;
	*) [ -f "tests/fuzz/$1.dict" ] && echo "$1" ;;
	esac
}

dict_for() {
	set -- "$1" $(dicts_for "$1")
	case $# in
	1) ;;
	2) echo "tests/fuzz/$2.dict" ;;
	*)
		out=build/fuzz-corpus/$1.dict
		shift
		for d in "$@"; do cat "tests/fuzz/$d.dict"; done >"$out" && echo "$out"
		;;
	esac
}

bin_dir=build/fuzz-corpus/bin
mkdir -p "$bin_dir"
for n in "$@"; do
	[ -x "build/fuzz/fuzz/$n" ] || { echo "no build/fuzz/fuzz/$n: make TARGET=fuzz target-fuzz" >&2; exit 2; }
	cp "build/fuzz/fuzz/$n" "$bin_dir/$n.tmp" && mv -f "$bin_dir/$n.tmp" "$bin_dir/$n" || exit 1
done

failed=""
for n in "$@"; do
	mkdir -p "build/fuzz-corpus/$n" "tests/corpus/$n"
	dict=$(dict_for "$n")
	echo "  FUZZ    $n for $seconds s${dict:+ with $dict} ($(date -u +%H:%M:%S))"
	"$bin_dir/$n" -max_total_time="$seconds" -print_final_stats=1 ${dict:+-dict=$dict} \
		-artifact_prefix="build/fuzz-corpus/$n-" "build/fuzz-corpus/$n" "tests/corpus/$n" \
		>"build/fuzz-corpus/$n.log" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -40 "build/fuzz-corpus/$n.log"
		echo "  FAIL    $n (exit $rc): see build/fuzz-corpus/$n.log"
		failed="$failed $n"
		[ "${FUZZ_KEEP_GOING:-0}" = 1 ] && continue
		exit 1
	fi
	# The last status line (cov:, ft:, corp:, exec/s) and the final counts.
	grep -E '^#[0-9]+' "build/fuzz-corpus/$n.log" | tail -n 1
	grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec' "build/fuzz-corpus/$n.log"
done
[ -z "$failed" ] || { echo "  failed:$failed"; exit 1; }
