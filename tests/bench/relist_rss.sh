#!/bin/sh
# Relist memory: what a relist of 10,000 ConfigMaps of 1 KiB costs in RSS.
#
#   sh tests/bench/relist_rss.sh [paged|cache] [KREFLECT]   (make bench-relist runs both)
#
# KREFLECT (default build/x86_64-relist/kreflect) must hold 10,000 objects: the
# Makefile's relist-variant builds it with KR_MAX_OBJECTS=16384 and a 32 MiB
# arena. It mirrors the test API server's ConfigMaps with --watch-list off, so
# every (re)list is a LIST, printing JSON lines to a file. The mode says how
# the server pages:
#
#   paged  the server honours limit even at resourceVersion=0 (an apiserver
#          without the watch cache): the first list comes in pages of 500, so
#          relists are paginated too (client-go keeps paging once it saw pages);
#   cache  the server ignores limit at resourceVersion=0, as kube-apiserver's
#          watch cache does: the first list is one response, and a relist at
#          the last resourceVersion is sent without limit (client-go does the
#          same, to be served from the watch cache): 10,000 items in one body.
#
# After the first SYNCED it samples /proc/PID/status, resets the peak (VmHWM,
# by writing 5 to /proc/PID/clear_refs) and forces two relists:
#
#   A. nothing changed: kreflect is stopped (SIGSTOP) while its watch is
#      dropped, a ConfigMap in another namespace moves the resourceVersion on
#      and the history is compacted; resumed, its re-watch gets 410 and it
#      relists 10,000 unchanged objects;
#   B. everything changed: the same, but every one of the 10,000 objects is
#      modified while it is stopped, so the relist replaces each of them.
#
# For each it reports RSS before, the kernel's peak (VmHWM) during, RSS after,
# and the store's arena figures read from the process (struct kr_store, located
# through the unstripped binary's symbol table and checked against the
# configured sizes), with the same figures estimated from the mirrored bytes.
# The claim tested: "a relist does not raise peak memory above the arena's
# configured size plus the fixed buffers".
# Figures are split into words on purpose: set -- $(...).
# shellcheck disable=SC2046,SC2086
set -u
cd "$(dirname "$0")/../.." || exit 1
mode=paged
case "${1:-}" in paged | cache) mode=$1; shift ;; esac
bin=${1:-build/x86_64-relist/kreflect}
work=build/test/relist-$mode
ready=$work/ready.json
out=$work/out.jsonl
N=10000
[ -x "$bin" ] || { echo "relist_rss: $bin is missing: run 'make relist-variant'" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
ctl() { python3 tests/apiserver/control.py --ready-file "$ready" "$@" >>"$work/control.log" 2>&1; }
die() { echo "relist_rss: FAIL: $*" >&2; [ -f "$work/kreflect.log" ] && tail -5 "$work/kreflect.log" >&2; exit 1; }

python3 tests/apiserver/apiserver.py --workdir "$work" --ready-file "$ready" --initial $N \
	--initial-size 1024 --bookmark-interval 0 --history 100000 --seed 1 \
	>"$work/apiserver.log" 2>&1 &
api=$!
kr=
trap 'kill $api $kr 2>/dev/null' EXIT
i=0
while [ ! -s "$ready" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$ready" ] || die "the test API server did not start"
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$ready")

[ $mode = paged ] && ctl settings rv0_ignores_limit=false
"$bin" --server "https://127.0.0.1:$port" --certificate-authority "$work/ca.crt" \
	--token-file "$work/token" --watch-list off -o jsonl -v 2 configmaps \
	>"$out" 2>"$work/kreflect.log" &
kr=$!

# wait_synced N: until the output has N SYNCED lines (120 s at most).
wait_synced() {
	i=0
	while [ "$(grep -c '"type":"SYNCED"' "$out")" -lt "$1" ] && [ $i -lt 1200 ]; do
		kill -0 "$kr" 2>/dev/null || die "kreflect exited"
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(grep -c '"type":"SYNCED"' "$out")" -ge "$1" ] || die "no SYNCED number $1"
}
kb() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$kr/status"; }
last_log_id() {
	python3 - "$ready" <<'EOF'
import sys
sys.path.insert(0, "tests/apiserver")
from control import Control
e = Control(ready_file=sys.argv[1]).log(since=0)
print(e[-1]["id"] if e else 0)
EOF
}
# list_pages SINCE: "pages status-200-pages items" of non-watch configmaps GETs after entry SINCE.
list_pages() {
	python3 - "$ready" "$1" <<'EOF'
import sys
sys.path.insert(0, "tests/apiserver")
from control import Control
es = [e for e in Control(ready_file=sys.argv[1]).log(since=int(sys.argv[2]))
      if not e.get("watch") and e["path"].endswith("/configmaps") and e["method"] == "GET"]
ok = [e for e in es if e["status"] == 200]
print(len(es), len(ok), sum(e.get("items") or 0 for e in ok))
EOF
}

# Arena figures read from the live process (see tests/bench/store_stats.py):
# "used garbage high_water nentries objects compactions", or "?".
store_stats() { python3 tests/bench/store_stats.py "$kr" "$bin.unstripped"; }
# Arena bytes the mirrored objects need: each record is a 16-byte header, the
# object, key, rv and uid with NULs, padded to 8 (src/store.h), estimated from
# the JSON lines of the last full (re)list state.
estimate_arena() {
	python3 - "$out" <<'EOF'
import json, sys
objs = {}
for line in open(sys.argv[1]):
    ev = json.loads(line)
    if ev["type"] in ("ADDED", "MODIFIED"):
        o = ev["object"]; md = o["metadata"]
        key = md["namespace"] + "/" + md["name"]
        body = len(json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode())
        rec = 16 + body + len(key) + len(md["resourceVersion"]) + len(md.get("uid", "")) + 3
        objs[key] = (rec + 7) & ~7
    elif ev["type"] == "DELETED":
        objs.pop(ev["object"]["metadata"]["namespace"] + "/" + ev["object"]["metadata"]["name"], None)
print(len(objs), sum(objs.values()))
EOF
}
# Samples VmRSS every 10 ms until the file $2 exists; prints the largest, in kB.
sample_rss() {
	python3 - "$kr" "$1" <<'EOF' &
import os, sys, time
pid, stop = sys.argv[1], sys.argv[2]
top = 0
while not os.path.exists(stop):
    try:
        for l in open("/proc/%s/status" % pid):
            if l.startswith("VmRSS:"):
                top = max(top, int(l.split()[1]))
    except OSError:
        break
    time.sleep(0.01)
open(stop + ".max", "w").write(str(top))
EOF
}

t0=$(date +%s%N)
wait_synced 1
t1=$(date +%s%N)
grep -q "\"type\":\"SYNCED\".*\"count\":$N" "$out" || die "the first SYNCED does not count $N objects"
sleep 1
rss0=$(kb VmRSS); hwm0=$(kb VmHWM); anon0=$(kb RssAnon); file0=$(kb RssFile)
st0=$(store_stats); est0=$(estimate_arena)
budget=$("$bin" --print-budget | awk '$1 == "total" { print $2 }')
arena_cfg=$("$bin" --print-budget | awk '$1 == "arena" { print $2 }')
fixed=$((budget - arena_cfg))
text=$(size "$bin" | awk 'NR == 2 { print $1 }')

echo "relist_rss ($mode): $N ConfigMaps of 1 KiB (data.payload 1024 bytes), kreflect $bin"
echo "  capacities: $("$bin" --version | sed -n 's/^capacities: //p')"
echo "  static budget (--print-budget total): $budget bytes = arena $arena_cfg + fixed buffers $fixed; text $text bytes"
set -- $(list_pages 0)
echo "  first sync (--watch-list off): $1 LIST requests, $3 items; $(((t1 - t0) / 1000000)) ms wall from start to SYNCED;" \
	"kreflect: $(sed -n 's/.*: synced \([0-9]*\) objects.* by \(.*\) in \([0-9]*\) ms/\1 objects by \2 in \3 ms/p' "$work/kreflect.log" | head -n 1)"
echo "  after the first sync, idle: VmRSS $rss0 kB (RssAnon $anon0 kB, RssFile $file0 kB), VmHWM $hwm0 kB"
set -- $st0
[ "$1" != "?" ] && echo "    arena: used $1 B, garbage $2 B, high water $3 B; $4 entries, $5 held; $6 compactions  (read from the process)"
set -- $est0
echo "    arena estimated from the mirrored JSON: $2 B for $1 objects"

# relist NAME CHANGE: forces one relist (see the header), reports it.
relist() {
	name=$1
	change=$2
	echo 5 >"/proc/$kr/clear_refs" || die "cannot reset VmHWM"
	before=$(kb VmRSS); hwm_reset=$(kb VmHWM); st_b=$(store_stats)
	mark=$(last_log_id)
	synced=$(grep -c '"type":"SYNCED"' "$out")
	kill -STOP "$kr"
	ctl drop-watches
	if [ "$change" = all ]; then
		ctl touch configmaps default --count 1
	fi
	ctl create configmaps elsewhere "bump-$name" x=1
	ctl compact
	rm -f "$work/stop-$name" "$work/stop-$name.max"
	sample_rss "$work/stop-$name"
	ts=$(date +%s%N)
	kill -CONT "$kr"
	wait_synced $((synced + 1))
	te=$(date +%s%N)
	touch "$work/stop-$name"
	i=0
	while [ ! -s "$work/stop-$name.max" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	peak=$(kb VmHWM); after=$(kb VmRSS); sampled=$(cat "$work/stop-$name.max" 2>/dev/null || echo '?')
	st_a=$(store_stats)
	set -- $(list_pages "$mark")
	[ "$2" -ge 1 ] || die "$name: no LIST request after the forced relist"
	echo
	echo "relist $name ($change changed): $1 LIST requests after the drop ($2 answered 200 with $3 items in all), $(((te - ts) / 1000000)) ms from SIGCONT to SYNCED"
	echo "  kreflect: waited $(sed -n 's/.*watch expired; next attempt in \([0-9]*\) ms/\1/p' "$work/kreflect.log" | tail -n 1) ms after the 410 (backoff step), then" \
		"$(sed -n 's/.*: synced \([0-9]*\) objects.* by \(.*\) in \([0-9]*\) ms/\1 objects by \2 in \3 ms/p' "$work/kreflect.log" | tail -n 1)"
	echo "  VmRSS before $before kB (VmHWM reset to $hwm_reset kB), peak during (VmHWM) $peak kB, after $after kB; largest 10 ms sample $sampled kB"
	echo "  peak - before: $((peak - before)) kB"
	set -- $st_b
	if [ "$1" != "?" ]; then
		ub=$1
		set -- $st_a
		echo "  arena before: used $ub B; after: used $1 B, garbage $2 B, high water $3 B, $6 compactions in all"
		echo "  arena growth during the relist: $(($1 - ub)) B = $((($1 - ub) / 1024)) kB (dirty arena pages stay resident)"
	fi
	echo "  changes printed: $(tail -n +"$((lines_before + 1))" "$out" | grep -c -v SYNCED) lines since the previous relist"
	worst=$((peak * 1024))
	bound=$((budget + text))
	if [ "$worst" -le "$bound" ]; then
		echo "  claim: peak $worst B <= static budget + text $bound B: holds"
	else
		echo "  claim: peak $worst B > static budget + text $bound B: DOES NOT HOLD"
	fi
	lines_before=$(wc -l <"$out")
}
lines_before=$(wc -l <"$out")
relist A none
relist B all

# C. No relist: every object modified twice more through the live watch. The
#    arena's bump tail moves on until it is short, then compacts; the pages it
#    passed stay resident, so RSS tends to the whole arena over time.
rss_c=$(kb VmRSS); st_c=$(store_stats)
mods=$(grep -c '"type":"MODIFIED"' "$out")
ctl touch configmaps default --count 2
i=0
while [ "$(grep -c '"type":"MODIFIED"' "$out")" -lt $((mods + 2 * N)) ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(grep -c '"type":"MODIFIED"' "$out")" -ge $((mods + 2 * N)) ] || die "churn: the MODIFIED events did not all arrive"
echo
echo "churn C (no relist, $((2 * N)) MODIFIED events through the watch): VmRSS $rss_c kB -> $(kb VmRSS) kB, VmHWM $(kb VmHWM) kB"
set -- $st_c
if [ "$1" != "?" ]; then
	ub=$1
	set -- $(store_stats)
	echo "  arena used $ub B -> $1 B, garbage $2 B, high water $3 B, $6 compactions in all"
fi
python3 - "$ready" >"$work/requests.txt" <<'EOF'
import sys
sys.path.insert(0, "tests/apiserver")
from control import Control
for e in Control(ready_file=sys.argv[1]).log(since=0):
    print(e["id"], e["method"], e["status"], "watch=%d" % bool(e.get("watch")),
          "items=%s" % e.get("items"), "events=%s" % e.get("events"),
          "%.3fs" % (e.get("duration") or 0), e["path"] + "?" + (e.get("raw_query") or ""))
EOF
echo
kill -TERM "$kr"
wait "$kr"
echo "relist_rss: kreflect exited $? after SIGTERM; logs in $work/"
kr=
