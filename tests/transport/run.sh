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
# Fresh each run: the loops below read ports from logs that a forked server
# truncates only once it runs, and an old log would give an old port.
rm -rf "$dir" && mkdir -p "$dir" || exit 1
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

# 2b. on_body taking at most 7 bytes a call (the rest kept, reading stopped until
#     kr_conn_resume): the same bodies, over TLS records and chunks, on one
#     kept-alive connection.
run whole $tls 127.0.0.1 "$port" /chunked/40/1000 /hello /tiny/700
run take $tls --take 7 127.0.0.1 "$port" /chunked/40/1000 /hello /tiny/700
w=$(grep '^request' "$dir/whole.out")
t=$(grep '^request' "$dir/take.out")
takes=$(sed -n 's/^partial-takes //p' "$dir/take.out")
if [ $rc -eq 0 ] && [ -n "$w" ] && [ "$w" = "$t" ] && has take "^connects 1 requests 3" &&
	[ "${takes:-0}" -gt 1000 ]; then
	ok "partial takes: same 3 bodies 7 bytes at a time ($takes holds, 1 connection)"
else bad "partial takes (holds: $takes)" "$dir/take.out"; fi

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

# 10. Through an HTTP CONNECT proxy (tests/proxy/proxy.py): the TLS handshake
#     with the server runs inside the tunnel, verified against 127.0.0.1.
# start_proxy NAME ARGS...: starts a proxy, sets $pport; its pids go to $ppids
ppids=""
trap 'kill $spid $ppids 2>/dev/null' EXIT
start_proxy() {
	pn=$1
	shift
	: >"$dir/$pn.log"
	python3 tests/proxy/proxy.py --log "$dir/$pn.log" --lifetime 300 "$@" >"$dir/$pn.out" 2>&1 &
	ppids="$ppids $!"
	pport=""
	i=0
	while [ -z "$pport" ] && [ $i -lt 100 ]; do
		pport=$(sed -n 's/^PORT //p' "$dir/$pn.out")
		[ -n "$pport" ] || sleep 0.05
		i=$((i + 1))
	done
}
nconnect() { grep -c "^CONNECT 127.0.0.1:$port -> $2" "$dir/$1.log"; }
start_proxy proxy-open
open_port=$pport
if [ -z "$open_port" ]; then
	bad "proxy did not start" "$dir/proxy-open.out"
else
	run proxy $tls --proxy "http://127.0.0.1:$open_port" 127.0.0.1 "$port" /hello
	if [ $rc -eq 0 ] && has proxy "request 1: status 200 bytes 12" &&
		[ "$(nconnect proxy-open 200)" -eq 1 ] && [ "$(wc -l <"$dir/proxy-open.log")" -eq 1 ] &&
		grep -q "ua=kreflect/" "$dir/proxy-open.log"; then
		ok "proxy: GET through CONNECT 127.0.0.1:$port, TLS verified inside the tunnel"
	else bad "proxy GET" "$dir/proxy.out"; fi

	: >"$dir/proxy-open.log"
	run proxy-keepalive $tls --proxy "http://127.0.0.1:$open_port/" 127.0.0.1 "$port" /hello /chunked/3/1000 /hello
	if [ $rc -eq 0 ] && has proxy-keepalive "^connects 1 requests 3 full-handshakes 1" &&
		has proxy-keepalive "request 2: status 200 bytes 3000" && [ "$(nconnect proxy-open 200)" -eq 1 ]; then
		ok "proxy keep-alive: 3 requests, 1 CONNECT, 1 handshake"
	else bad "proxy keep-alive" "$dir/proxy-keepalive.out"; fi

	: >"$dir/proxy-open.log"
	run proxy-resume $tls --reconnect --proxy "http://127.0.0.1:$open_port" 127.0.0.1 "$port" /hello /hello /hello
	if [ $rc -eq 0 ] && has proxy-resume "^connects 3 requests 3 full-handshakes 1 resumed-handshakes 2" &&
		[ "$(nconnect proxy-open 200)" -eq 3 ]; then
		ok "proxy: 3 reconnects, 3 CONNECTs, TLS resumed through the tunnel"
	else bad "proxy resumption" "$dir/proxy-resume.out"; fi

	run proxy-stall $tls --idle-ms 1500 --proxy "http://127.0.0.1:$open_port" 127.0.0.1 "$port" /stall/100
	if [ $rc -ne 0 ] && has proxy-stall "read-idle deadline \(1500 ms\)"; then
		ok "proxy: read-idle deadline works through the tunnel"
	else bad "proxy read-idle" "$dir/proxy-stall.out"; fi

	run proxy-wrongname $tls --name api.wrong.example --proxy "http://127.0.0.1:$open_port" 127.0.0.1 "$port" /hello
	if [ $rc -ne 0 ] && has proxy-wrongname "TLS handshake failed: server certificate not trusted"; then
		ok "proxy: server certificate still verified inside the tunnel"
	else bad "proxy name mismatch" "$dir/proxy-wrongname.out"; fi

	run proxy-bypass $tls --proxy "http://127.0.0.1:1" --no-proxy " other.example, 127.0.0.0/8 " 127.0.0.1 "$port" /hello
	if [ $rc -eq 0 ] && has proxy-bypass "^proxy: bypassed for 127.0.0.1" && has proxy-bypass "request 1: status 200"; then
		ok "NO_PROXY (CIDR entry) bypasses the proxy"
	else bad "NO_PROXY bypass" "$dir/proxy-bypass.out"; fi
fi

start_proxy proxy-auth --user kube --password 's3cr:t@x'
if [ -n "$pport" ]; then
	run proxy-auth-ok $tls --proxy "http://kube:s3cr%3At%40x@127.0.0.1:$pport" 127.0.0.1 "$port" /hello
	if [ $rc -eq 0 ] && has proxy-auth-ok "request 1: status 200" && [ "$(nconnect proxy-auth 200)" -eq 1 ]; then
		ok "proxy basic auth: percent-encoded credentials accepted"
	else bad "proxy auth (right credentials)" "$dir/proxy-auth-ok.out"; fi
	run proxy-auth-bad $tls --proxy "http://kube:wrong@127.0.0.1:$pport" 127.0.0.1 "$port" /hello
	if [ $rc -ne 0 ] && has proxy-auth-bad "request 1: error .*proxy 127.0.0.1:$pport refused CONNECT: 407 Proxy Authentication Required \(credentials refused\)" &&
		! grep -q wrong "$dir/proxy-auth-bad.out"; then
		ok "proxy basic auth: wrong credentials give a clear 407 error"
	else bad "proxy auth (wrong credentials)" "$dir/proxy-auth-bad.out"; fi
	run proxy-auth-none $tls --proxy "http://127.0.0.1:$pport" 127.0.0.1 "$port" /hello
	if [ $rc -ne 0 ] && has proxy-auth-none "refused CONNECT: 407 Proxy Authentication Required \(no credentials"; then
		ok "proxy basic auth: no credentials, 407 says so"
	else bad "proxy auth (no credentials)" "$dir/proxy-auth-none.out"; fi
else bad "auth proxy did not start" "$dir/proxy-auth.out"; fi

start_proxy proxy-refuse --refuse
if [ -n "$pport" ]; then
	run proxy-refused $tls --proxy "http://127.0.0.1:$pport" 127.0.0.1 "$port" /hello
	if [ $rc -ne 0 ] && has proxy-refused "request 1: error .*proxy 127.0.0.1:$pport refused CONNECT: 403 Forbidden"; then
		ok "refusing proxy: clear 403 error"
	else bad "refusing proxy" "$dir/proxy-refused.out"; fi
else bad "refusing proxy did not start" "$dir/proxy-refuse.out"; fi

start_proxy proxy-junk --junk
run proxy-junk $tls --proxy "http://127.0.0.1:$pport" 127.0.0.1 "$port" /hello
if [ $rc -ne 0 ] && has proxy-junk "request 1: error .*proxy 127.0.0.1:$pport sent 4 unexpected bytes after its CONNECT answer"; then
	ok "proxy sending bytes after its 200: refused, not fed to TLS"
else bad "proxy junk after 200" "$dir/proxy-junk.out"; fi

start_proxy proxy-silent --silent
t0=$(date +%s%N)
run proxy-silent $tls --connect-ms 1500 --proxy "http://127.0.0.1:$pport" 127.0.0.1 "$port" /hello
ms=$((($(date +%s%N) - t0) / 1000000))
if [ $rc -ne 0 ] && has proxy-silent "request 1: error timed out: .*proxy CONNECT timed out" &&
	[ "$ms" -ge 1400 ] && [ "$ms" -lt 5000 ]; then
	ok "silent proxy: 'proxy CONNECT timed out' after ${ms} ms"
else bad "silent proxy (${ms} ms)" "$dir/proxy-silent.out"; fi

run proxy-down $tls --connect-ms 3000 --proxy "http://127.0.0.1:1" 127.0.0.1 "$port" /hello
if [ $rc -ne 0 ] && has proxy-down "request 1: error .*unable to connect to proxy 127.0.0.1:1: Connection refused"; then
	ok "proxy not listening: clear error naming the proxy"
else bad "proxy down" "$dir/proxy-down.out"; fi

run proxy-https $tls --proxy "https://127.0.0.1:1" 127.0.0.1 "$port" /hello
if [ $rc -eq 2 ] && has proxy-https "https:// proxies are not supported"; then
	ok "https:// proxy URL refused with a clear error"
else bad "https proxy URL" "$dir/proxy-https.out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
