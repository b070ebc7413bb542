#!/bin/sh
# Keeps tests/corpus/NAME minimal for each NAME given (make fuzz-merge: all):
# of the inputs there and in build/fuzz-corpus/NAME (what make fuzz learnt),
# a hash-named one stays only if it covers an edge that no other input does.
# Hit counts are not kept (that corpus is many times larger; build/fuzz-corpus
# keeps it for the next local run). Named inputs (hand-written seeds, past
# crashes: anything not named by its 40-digit SHA-1) always stay, once.
#
#   sh tests/fuzz/merge.sh NAME...
set -u
cd "$(dirname "$0")/../.." || exit 1

for n in "$@"; do
	out=build/fuzz-min/$n
	mkdir -p "build/fuzz-corpus/$n" "tests/corpus/$n" || exit 1
	rm -rf "$out" && mkdir -p "$out" || exit 1
	if ! "build/fuzz/fuzz/$n" -merge=1 -use_counters=0 "$out" "tests/corpus/$n" \
		"build/fuzz-corpus/$n" >"$out.log" 2>&1; then
		tail -20 "$out.log"
		echo "  FAIL    merging $n: see $out.log"
		exit 1
	fi
	for f in "tests/corpus/$n"/*; do
		[ -f "$f" ] || continue
		b=${f##*/}
		case $b in
		*[!0-9a-f]*) ;;
		*) [ ${#b} -eq 40 ] && continue ;;
		esac
		cp "$f" "$out/" && rm -f "$out/$(sha1sum <"$f" | cut -c1-40)" || exit 1
	done
	rm -rf "tests/corpus/$n" && mv "$out" "tests/corpus/$n" || exit 1
	echo "  $n: $(ls "tests/corpus/$n" | wc -l) inputs, $(cat "tests/corpus/$n"/* | wc -c) bytes"
done
