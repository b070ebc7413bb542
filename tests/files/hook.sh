#!/bin/sh
# The --exec command of the notification tests. One record per run, appended
# to LOG in one write once the run is over:
#
#   RUN <start> <end> <KREFLECT_EVENTS> <exit>
#   key <each line kreflect gave on stdin>
#   file <the content of FILE when the run started, or "<missing>">
#   .
#
#   sh hook.sh LOG SLEEP EXIT [FILE]
#
# SLEEP seconds keep the run going (changes meanwhile must make exactly one
# more run); EXIT is its exit status.
log=$1 pause=$2 code=$3 file=${4:-}
start=$(date +%s.%N)
keys=$(cat)
if [ -n "$file" ]; then
	content=$(cat "$file" 2>/dev/null) || content="<missing>"
fi
[ "$pause" = 0 ] || sleep "$pause"
end=$(date +%s.%N)
{
	printf 'RUN %s %s %s %s\n' "$start" "$end" "${KREFLECT_EVENTS:-<unset>}" "$code"
	[ -z "$keys" ] || printf '%s\n' "$keys" | sed 's/^/key /'
	[ -z "$file" ] || printf 'file %s\n' "$content"
	printf '.\n'
} >"$log.$$"
cat "$log.$$" >>"$log"
rm -f "$log.$$"
exit "$code"
