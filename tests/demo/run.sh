#!/bin/sh
# make demo: kreflect's main job against the bundled test API server.
# Starts the server on loopback with two dozen sample ConfigMaps, runs
# build/kreflect against it over TLS, changes some objects while it runs,
# then stops both cleanly. Everything lives in build/demo/.
set -u
cd "$(dirname "$0")/../.." || exit 1
work=build/demo
rm -rf "$work" && mkdir -p "$work"
ctl() { python3 tests/apiserver/control.py --ready-file "$work/ready.json" "$@" >/dev/null; }
say() { printf '\n### %s\n' "$*" >&2; }

python3 tests/apiserver/apiserver.py --workdir "$work" --ready-file "$work/ready.json" \
	--initial 24 --initial-size 24 --bookmark-interval 5 >"$work/apiserver.log" 2>&1 &
api=$!
trap 'kill $api 2>/dev/null' EXIT
i=0
while [ ! -s "$work/ready.json" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$work/ready.json" ] || { echo "demo: the test API server did not start:" >&2; cat "$work/apiserver.log" >&2; exit 1; }
server=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["server"])' "$work/ready.json")

say "kreflect --server $server --certificate-authority $work/ca.crt --token-file $work/token configmaps"
build/kreflect --server "$server" --certificate-authority "$work/ca.crt" \
	--token-file "$work/token" configmaps &
kr=$!
sleep 1.5
say "changing objects on the server: update cm-00003, create demo-new, delete cm-00007"
ctl update configmaps default cm-00003 greeting=hello
ctl create configmaps default demo-new color=blue
ctl delete configmaps default cm-00007
sleep 1
say "dropping every watch stream (a flaky uplink); kreflect re-watches from its last resourceVersion"
ctl drop-watches
sleep 1
ctl update configmaps default demo-new color=green
sleep 1
say "stopping kreflect with SIGTERM"
kill -TERM $kr
wait $kr
rc=$?
echo "kreflect exited with $rc" >&2
exit $rc
