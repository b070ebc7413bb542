#!/bin/sh
# The malloc-count proof: "zero malloc calls after start-up".
#
# build/x86_64/kreflect-malloc is kreflect linked with --wrap around malloc,
# calloc, realloc, free, posix_memalign, aligned_alloc and memalign
# (tests/malloc/malloc_count.c): every call from src/, port/, mbedTLS or the C
# library is counted in the original process, split at kr_loop_run into
# "startup" and "running", and reported at exit. It mirrors the test API
# server's ConfigMaps over TLS through everything a reflector lives through:
# the initial watch-list, updates, creates, deletes, 9,000 MODIFIED events
# (more bytes than the 8 MiB arena it is given, so the store compacts), a dropped watch
# re-watched through randomly cut chunks, and a relist forced by compaction
# (410 on the re-watch, watch-list refused with 422, paginated LIST). Then
# SIGTERM, and the counts must be zero.
#
# --server names "localhost" so that the name is resolved by getaddrinfo in a
# forked child (port/posix): the child's allocations are shown as "child"
# lines, not counted, and prove that the wrappers see the C library's own
# calls. When strace works here, the run is also traced: the kreflect process
# must make no brk/mmap/mremap system call at all (a heap that grew would),
# while the child does.
#
#   sh tests/malloc/run.sh            (after make malloc-variant)
# Figures are split into words on purpose: set -- $(...).
# shellcheck disable=SC2046,SC2086
set -u
cd "$(dirname "$0")/../.." || exit 1
bin=build/x86_64/kreflect-malloc
work=build/test/malloc
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && [ -f "$2" ] && sed 's/^/     /' "$2" | tail -20; }
note() { echo "     $1"; }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if [ ! -x "$bin" ]; then
	bad "$bin is missing: run 'make malloc-variant'"
	finish
fi
rm -rf "$work" && mkdir -p "$work"
out=$work/out.jsonl
counts=$work/counts
ready=$work/ready.json
ctl() { python3 tests/apiserver/control.py --ready-file "$ready" "$@" >>"$work/control.log" 2>&1; }
# ctl_py CODE: runs Python CODE with c = Control(...) in one interpreter (many calls, one start).
ctl_py() {
	python3 - "$ready" "$1" >>"$work/control.log" 2>&1 <<'EOF'
import sys
sys.path.insert(0, "tests/apiserver")
from control import Control
c = Control(ready_file=sys.argv[1])
exec(sys.argv[2])
EOF
}

# Prints the request log after entry $1, one line each: id method status watch=0|1 path?query
logq() {
	python3 - "$ready" "$1" <<'EOF'
import sys
sys.path.insert(0, "tests/apiserver")
from control import Control
for e in Control(ready_file=sys.argv[1]).log(since=int(sys.argv[2])):
    print(e["id"], e["method"], e["status"], "watch=%d" % bool(e.get("watch")),
          e["path"] + "?" + (e.get("raw_query") or ""))
EOF
}
last_log_id() { id=$(logq 0 | tail -n 1 | cut -d" " -f1); echo "${id:-0}"; }

# wait_lines PATTERN N: until $out has N lines matching PATTERN (20 s at most).
wait_lines() {
	i=0
	while [ "$(grep -c -- "$1" "$out")" -lt "$2" ] && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(grep -c -- "$1" "$out")" -ge "$2" ]
}
n_of() { grep -c -- "$1" "$out"; }

python3 tests/apiserver/apiserver.py --workdir "$work" --ready-file "$ready" --initial 300 \
	--initial-size 1024 --bookmark-interval 1 --seed 1 >"$work/apiserver.log" 2>&1 &
api=$!
kr=
tracer=
trap 'kill $api $kr $tracer 2>/dev/null' EXIT
i=0
while [ ! -s "$ready" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
if [ ! -s "$ready" ]; then
	bad "the test API server did not start" "$work/apiserver.log"
	finish
fi
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$ready")

use_strace=0
seccomp=
if command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true >/dev/null 2>&1; then
	use_strace=1
	# Stop kreflect only at the traced calls, not at every one (strace >= 5.3).
	strace -f --seccomp-bpf -e trace=brk -o /dev/null true >/dev/null 2>&1 && seccomp=--seccomp-bpf
fi
set -- "$bin" --server "https://localhost:$port" --certificate-authority "$work/ca.crt" \
	--token-file "$work/token" --page-size 100 --arena-bytes 8M -v 2 --state-dir "$work/state" --state-interval 1 configmaps
if [ $use_strace = 1 ]; then
	KR_MALLOC_COUNT_FILE=$counts strace -f -qq $seccomp -e trace=execve,brk,mmap,mremap,munmap,fork,clone,clone3,connect \
		-o "$work/strace.log" "$@" >"$out" 2>"$work/kreflect.log" &
	tracer=$!
	i=0
	while [ -z "$kr" ] && [ $i -lt 100 ]; do
		kr=$(pgrep -P "$tracer" 2>/dev/null | head -n 1)
		[ -n "$kr" ] || sleep 0.05
		i=$((i + 1))
	done
else
	KR_MALLOC_COUNT_FILE=$counts "$@" >"$out" 2>"$work/kreflect.log" &
	kr=$!
fi

# 1. The initial list (watch-list: the server has the gate on).
if [ -n "$kr" ] && wait_lines '"type":"SYNCED".*"count":300' 1; then
	ok "initial sync: 300 ConfigMaps over TLS from https://localhost (resolved by getaddrinfo)"
else
	bad "initial sync" "$work/kreflect.log"
fi

# 2. Single changes.
ctl_py '
for n in (3, 4, 5, 6, 8):
    c.update("configmaps", "default", "cm-%05d" % n, data={"color": "blue"})
for n in "abc":
    c.create("configmaps", "default", "new-" + n, data={"color": "green"})
for n in (7, 9, 10):
    c.delete("configmaps", "default", "cm-%05d" % n)
'
if wait_lines '"type":"MODIFIED"' 5 && wait_lines '"type":"ADDED"' 303 &&
	wait_lines '"type":"DELETED"' 3; then
	ok "5 updates, 3 creates, 3 deletes mirrored"
else
	bad "single changes: MODIFIED $(n_of '"type":"MODIFIED"'), ADDED $(n_of '"type":"ADDED"'), DELETED $(n_of '"type":"DELETED"')" "$work/kreflect.log"
fi

# 3. 300 objects touched 30 times: 9,000 MODIFIED events, more bytes than the arena.
ctl touch configmaps default --count 30
if wait_lines '"type":"MODIFIED"' 9005; then
	# Object bytes stored: each line less {"type":"MODIFIED","object": and } and its newline.
	stored=$(grep '"type":"MODIFIED"' "$out" | awk '{ n += length($0) - 29 } END { print n }')
	arena=$("$bin" --arena-bytes 8M --print-budget 2>/dev/null | awk '$1 == "arena" { print $2 }')
	# The store's own figures, read from the process: it must have compacted.
	set -- $(python3 tests/bench/store_stats.py "$kr" "$bin")
	if [ "$stored" -gt "$arena" ] && [ "${6:-0}" != "?" ] && [ "${6:-0}" -ge 1 ]; then
		ok "9,000 MODIFIED events mirrored: $stored object bytes through a $arena-byte arena, $6 compactions"
	elif [ "$1" = "?" ] && [ "$stored" -gt "$arena" ]; then
		ok "9,000 MODIFIED events mirrored: $stored object bytes through a $arena-byte arena (compactions not readable)"
	else
		bad "bulk touch: $stored object bytes through a $arena-byte arena, store figures: $*"
	fi
else
	bad "bulk touch: $(n_of '"type":"MODIFIED"') MODIFIED of 9005" "$work/kreflect.log"
fi

# 4. A dropped watch; the re-watch gets its events cut into random chunks of 1-64 bytes.
mark=$(last_log_id)
ctl_py '
c.fault(kind="random_chunks", seed=7, min=1, max=64, watch=True, count=1)
c.drop_watches()
c.wait_watches(1, match="configmaps", timeout=10)
c.update("configmaps", "default", "cm-00011", data={"color": "red"})
'
if wait_lines '"name":"cm-00011".*"color":"red"' 1 &&
	[ "$(logq "$mark" | grep -c 'watch=1 .*resourceVersion=')" -ge 1 ]; then
	ok "dropped watch: re-watched from its resourceVersion, event through 1-64 byte chunks"
else
	bad "re-watch after a drop" "$work/kreflect.log"
fi

# 5. A relist: kreflect is stopped while its watch is dropped and the history
#    compacted past its resourceVersion (a write in another namespace moves it
#    on), so the re-watch gets 410. The WatchList gate is now off: the relist's
#    watch-list is refused (422) and it falls back to a paginated LIST.
ctl settings watch_list=false
mark=$(last_log_id)
synced_before=$(n_of '"type":"SYNCED"')
kill -STOP "$kr"
ctl_py '
c.drop_watches()
c.create("configmaps", "elsewhere", "bump", data={"x": "1"})
c.compact()
'
kill -CONT "$kr"
if wait_lines '"type":"SYNCED"' $((synced_before + 1)); then
	logq "$mark" >"$work/relist-requests.txt"
	pages=$(grep -c ' GET 200 watch=0 /api/v1/namespaces/default/configmaps?.*limit=100' "$work/relist-requests.txt")
	if [ "$pages" -ge 3 ]; then
		ok "relist after 410: paginated LIST of $pages pages, SYNCED again"
	else
		bad "relist: $pages LIST pages seen" "$work/relist-requests.txt"
	fi
else
	bad "relist: no second SYNCED" "$work/kreflect.log"
fi
ctl update configmaps default cm-00012 color=violet
if wait_lines '"name":"cm-00012".*"color":"violet"' 1; then
	ok "watching again after the relist"
else
	bad "no event after the relist" "$work/kreflect.log"
fi

if grep -q '^kreflect: error:' "$work/kreflect.log"; then
	bad "kreflect logged errors" "$work/kreflect.log"
else
	ok "no errors in kreflect's log (every object held: no \"not held\")"
fi

# 6. SIGTERM: main returns, atexit writes the counts.
kill -TERM "$kr"
if [ -n "$tracer" ]; then wait "$tracer"; else wait "$kr"; fi
rc=$?
krpid=$kr
kr=
tracer=
if [ $rc -eq 0 ] && [ -s "$counts" ]; then
	ok "SIGTERM: exit 0, counts written"
else
	bad "SIGTERM: exit $rc, counts file $( [ -s "$counts" ] && echo present || echo missing)" "$work/kreflect.log"
	finish
fi

field() { sed -n "s/^malloc-count pid=[0-9]* phase=$1 .* $2=\([0-9]*\).*/\1/p" "$counts"; }
callers() {
	grep "^malloc-count caller phase=$1 " "$counts" | while read -r _ _ _ fn bytes from; do
		a=${from#from=}
		echo "$fn $bytes in $(addr2line -f -e "$bin" "$a" | head -n 1) ($a)"
	done
}
for ph in startup running; do
	line=$(grep "^malloc-count pid=[0-9]* phase=$ph " "$counts" | sed 's/^malloc-count pid=[0-9]* //')
	if [ "$(field $ph total)" = 0 ]; then
		ok "$ph: zero allocator calls ($line)"
	else
		bad "$ph: allocator calls ($line)"
		callers $ph | sed 's/^/     /'
	fi
done
if [ "$(field running loop_started)" = 1 ]; then
	ok "the start-up/running boundary (kr_loop_run) was crossed"
else
	bad "kr_loop_run was never entered: the running phase means nothing"
fi

# 7. The wrappers see the C library's own calls: the resolver child's.
children=$(grep -c '^malloc-count child ' "$counts")
if [ "$children" -gt 0 ]; then
	ok "positive control: the getaddrinfo child made $children allocator calls, seen and not counted"
else
	bad "no allocator call seen in the resolver child: are the wrappers linked in?" "$counts"
fi

# 8. The kernel's view: the kreflect process never grew a heap.
if [ $use_strace = 1 ]; then
	parent=$krpid
	# The start-up reservations (kr_port_reserve: MAP_NORESERVE; the client's and one
	# per output, all before the first connection) are the only mappings kreflect may
	# make; nothing may grow a heap.
	reserved=$(grep -E "^$parent +mmap\(" "$work/strace.log" | grep -c MAP_NORESERVE)
	grown=$(grep -E "^$parent +(brk|mmap|mremap)\(" "$work/strace.log" | grep -v -c MAP_NORESERVE)
	child=$(grep -E '^[0-9]+ +(brk|mmap)\(' "$work/strace.log" | grep -v -c "^$parent ")
	first_connect=$(grep -n -E "^$parent +connect\(" "$work/strace.log" | head -n 1 | cut -d: -f1)
	last_reserve=$(grep -n -E "^$parent +mmap\(.*MAP_NORESERVE" "$work/strace.log" | tail -n 1 | cut -d: -f1)
	if [ "$grown" -eq 0 ] && [ "$reserved" -ge 1 ] && [ -n "$first_connect" ] &&
		[ "${last_reserve:-0}" -lt "$first_connect" ] && [ "$child" -gt 0 ]; then
		ok "strace: no brk/mmap/mremap in kreflect (pid $parent) but its $reserved start-up reservation(s), all before its first connection; $child in its resolver child"
	else
		bad "strace: $grown brk/mmap/mremap in kreflect besides $reserved start-up reservation(s) (the last at line ${last_reserve:-none}, the first connect at ${first_connect:-none}), $child in children" "$work/strace.log"
	fi
else
	note "strace not usable here: the system-call cross-check was skipped"
fi

# 9. A start-up reservation the system refuses (here: an address-space limit) is
# exit 1 with the size and the reason in words, before anything is served. The
# limits are derived from the stock binary's static memory: room for it and
# 14 MiB, so an 8 MiB --memory fits and the 20 MiB --listen endpoint does not.
stock=build/kreflect
static=$("$stock" --print-budget 2>/dev/null | awk '$1 == "static" {print $2}')
if [ -z "$static" ]; then
	bad "$stock --print-budget names no static memory (make build/kreflect)"
	finish
fi
refused() { # KB ARGS...: runs the stock binary under ulimit -v KB; its stderr in $work/refused.err
	kb=$1
	shift
	(ulimit -v "$kb" && exec "$stock" --server http://127.0.0.1:1 --once --timeout 2 "$@" configmaps) \
		>/dev/null 2>"$work/refused.err"
}
reserve_line() { grep -E "^kreflect: unable to reserve [0-9]+ bytes of memory at start-up: " "$work/refused.err"; }
refused $(((static + 64 * 1048576) / 1024)) --arena-bytes 1G
rc=$?
line=$(reserve_line)
set -- $(echo "$line" | awk '{print $5}')
if [ $rc -eq 1 ] && [ "${1:-0}" -ge 1073741824 ] && ! echo "$line" | grep -q "No error information"; then
	ok "a refused client reservation: exit 1, \"${line#kreflect: }\""
else
	bad "a refused client reservation: rc=$rc, line [$line]" "$work/refused.err"
fi
refused $(((static + 14 * 1048576) / 1024)) --memory 8M --listen 127.0.0.1:0
rc=$?
line=$(reserve_line)
set -- $(echo "$line" | awk '{print $5}')
if [ $rc -eq 1 ] && [ "${1:-0}" -ge 16777216 ] && ! echo "$line" | grep -q "No error information" &&
	! grep -q "serving the mirror" "$work/refused.err"; then
	ok "a refused --listen reservation: exit 1 before serving, \"${line#kreflect: }\""
else
	bad "a refused --listen reservation: rc=$rc, line [$line]" "$work/refused.err"
fi
finish
