#!/bin/sh
# Transport tests: build/TARGET/tests/http_get (the real loop, connection,
# TLS and HTTP parser) against tests/transport/server.py over TLS.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
case "$target" in aarch64) q=qemu-aarch64 ;; armv7) q=qemu-arm ;; *) q= ;; esac
get="$q build/$target/tests/http_get"
certs=build/test/tls-certs
[ -f $certs/server-ec.crt ] || sh tests/tls/run.sh "$target" >/dev/null 2>&1
dir=build/test/transport-$target
mkdir -p "$dir"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     /' "$2" | head -20; }

python3 tests/transport/server.py --cert $certs/server-ec.crt --key $certs/server-ec.key \
	--log "$dir/server.log" --lifetime 300 >"$dir/server.out" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null' EXIT
port=""
i=0
while [ -z "$port" ] && [ $i -lt 100 ]; do
	port=$(sed -n 's/^PORT //p' "$dir/server.out")
	[ -n "$port" ] || sleep 0.05
	i=$((i + 1))
done
[ -n "$port" ] || { echo "FAIL server did not start"; echo "0 passed, 1 failed"; exit 1; }
tls="--ca $certs/ca.crt"

# run NAME ARGS...: output in $dir/NAME.out, exit code in $rc
run() {
	n=$1
	shift
	# shellcheck disable=SC2086
	$get "$@" >"$dir/$n.out" 2>&1
	rc=$?
}
has() { grep -q -E -- "$2" "$dir/$1.out"; }

# 1. Three requests on one kept-alive TLS connection.
: >"$dir/server.log"
run keepalive $tls 127.0.0.1 "$port" /hello /chunked/3/1000 /hello
conns=$(sed -n 's/^conn=\([0-9]*\).*/\1/p' "$dir/server.log" | sort -u | wc -l)
if [ $rc -eq 0 ] && has keepalive "^connects 1 requests 3 full-handshakes 1" && [ "$conns" -eq 1 ] &&
	has keepalive "request 2: status 200 bytes 3000"; then
	ok "keep-alive: 3 requests, 1 TCP connection, 1 handshake"
else bad "keep-alive (server saw $conns connections)" "$dir/keepalive.out"; fi

# 2. A response whose every byte is its own TLS record decodes to the same body.
run tiny $tls 127.0.0.1 "$port" /chunked/1/700 /tiny/700
h1=$(sed -n 's/^request 1: status 200 bytes 700 hash //p' "$dir/tiny.out")
h2=$(sed -n 's/^request 2: status 200 bytes 700 hash //p' "$dir/tiny.out")
if [ $rc -eq 0 ] && [ -n "$h1" ] && [ "$h1" = "$h2" ]; then
	ok "1-byte TLS records: same 700-byte body ($h2)"
else bad "1-byte TLS records" "$dir/tiny.out"; fi

# 3. A server that stalls mid-body: the read-idle deadline closes it, with no
#    poll() wake-ups while waiting.
t0=$(date +%s%N)
run stall $tls --idle-ms 2000 127.0.0.1 "$port" /stall/100
ms=$((($(date +%s%N) - t0) / 1000000))
w=$(sed -n 's/.* wakeups \([0-9]*\) .*/\1/p' "$dir/stall.out")
if [ $rc -ne 0 ] && has stall "request 1: error timed out: .*read-idle deadline \(2000 ms\) \(after 100 body bytes\)" &&
	[ "$ms" -ge 1900 ] && [ "$ms" -lt 6000 ] && [ -n "$w" ] && [ "$w" -le 8 ]; then
	ok "stall: closed by the read-idle deadline after ${ms} ms, $w poll wake-ups in all"
else bad "stall (${ms} ms, wakeups ${w:-?})" "$dir/stall.out"; fi

# 4. A server that closes mid-chunk: a clean error naming it.
run cut $tls 127.0.0.1 "$port" /cut/50 /hello
if has cut "request 1: error connection closed by peer: .*the server closed the connection .*chunk" &&
	has cut "request 2: status 200 bytes 12"; then
	ok "close mid-chunk: error reported, next request on a new connection works"
else bad "close mid-chunk" "$dir/cut.out"; fi

# 5. Reconnects resume the TLS session: one full handshake for three connections.
run resume $tls --reconnect 127.0.0.1 "$port" /hello /hello /hello
if [ $rc -eq 0 ] && has resume "^connects 3 requests 3 full-handshakes 1 resumed-handshakes 2"; then
	ok "TLS 1.3 resumption: 3 connections, 1 full handshake"
else bad "resumption" "$dir/resume.out"; fi

# 6. The server closes a kept-alive connection: the next GET is resent once.
run stale $tls 127.0.0.1 "$port" /hello-then-close /hello
if [ $rc -eq 0 ] && has stale "request 2: status 200 bytes 12" && has stale "^connects 2 "; then
	ok "stale keep-alive connection: request resent on a new connection"
else bad "stale keep-alive" "$dir/stale.out"; fi

# 7. Body delimited by close.
run close $tls 127.0.0.1 "$port" /close/5000 /hello
if [ $rc -eq 0 ] && has close "request 1: status 200 bytes 5000" && has close "request 2: status 200"; then
	ok "body delimited by close, then a new connection"
else bad "close-delimited" "$dir/close.out"; fi

# 8. Names are resolved (in a child process) and verified against the DNS SAN.
run name $tls localhost "$port" /hello
if [ $rc -eq 0 ] && has name "request 1: status 200"; then
	ok "host name resolved and verified (localhost)"
else bad "name resolution" "$dir/name.out"; fi

# 9. Failures are errors with a reason, not hangs.
run refused $tls --connect-ms 3000 127.0.0.1 1 /hello
if [ $rc -ne 0 ] && has refused "request 1: error .*unable to connect to 127.0.0.1:1: Connection refused"; then
	ok "connection refused: clear error"
else bad "connection refused" "$dir/refused.out"; fi
run nxdomain $tls --connect-ms 5000 no-such-host.invalid "$port" /hello
if [ $rc -ne 0 ] && has nxdomain "request 1: error .*(unable to resolve host name 'no-such-host.invalid'|name lookup timed out)"; then
	ok "unknown host name: clear error"
else bad "unknown host" "$dir/nxdomain.out"; fi
run wrongname $tls --name api.wrong.example 127.0.0.1 "$port" /hello
if [ $rc -ne 0 ] && has wrongname "TLS handshake failed: server certificate not trusted"; then
	ok "certificate name mismatch refused"
else bad "name mismatch" "$dir/wrongname.out"; fi
run insecure --insecure 127.0.0.1 "$port" /hello
if [ $rc -eq 0 ] && has insecure "warn: TLS certificate of 127.0.0.1 NOT verified"; then
	ok "--insecure works and warns once per connection"
else bad "insecure" "$dir/insecure.out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
