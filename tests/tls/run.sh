#!/bin/sh
# The TLS proof: build/TARGET/tests/tls_probe (linked like kreflect) against
# `openssl s_server` on loopback, with certificates made here by openssl.
# Positive cases must complete a verified handshake and one HTTP request;
# negative cases must fail for the stated reason, not for any other.
#
#   sh tests/tls/run.sh x86_64|asan|aarch64|armv7
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
case "$target" in
aarch64) run="qemu-aarch64" ;;
armv7) run="qemu-arm" ;;
*) run="" ;;
esac
probe="build/$target/tests/tls_probe"
[ -x "$probe" ] || { echo "missing $probe"; echo "0 passed, 1 failed"; exit 1; }

certs=build/test/tls-certs
pass=0
fail=0

make_certs() {
	rm -rf "$certs.tmp" && mkdir -p "$certs.tmp" && cd "$certs.tmp" || exit 1
	cat >ca.cnf <<'EOF'
[ ca ]
default_ca = test_ca
[ test_ca ]
dir = .
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
[ any ]
commonName = supplied
[ req ]
distinguished_name = dn
[ dn ]
[ v3_ca ]
basicConstraints = critical,CA:true
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[ server ]
basicConstraints = CA:false
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = @san
[ san ]
DNS.1 = localhost
IP.1 = 127.0.0.1
IP.2 = ::1
[ elsewhere ]
basicConstraints = CA:false
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:api.elsewhere.example,IP:10.9.9.9
[ client ]
basicConstraints = CA:false
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
EOF
	: >index.txt
	echo 01 >serial
	o="openssl"
	# CAs: the trusted one (RSA, like kubeadm's) and an unknown one.
	$o req -x509 -new -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
		-subj /CN=kreflect-test-ca -config ca.cnf -extensions v3_ca 2>/dev/null || exit 1
	$o req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout evil-ca.key \
		-out evil-ca.crt -days 3650 -subj /CN=unknown-ca -config ca.cnf -extensions v3_ca 2>/dev/null || exit 1
	sign() { # name keyopts ext [ca] [dates]
		name=$1 keyopt=$2 ext=$3 ca=${4:-ca} dates=${5:-}
		$o req -new -newkey $keyopt -nodes -keyout "$name.key" -out "$name.csr" \
			-subj "/CN=$name" -config ca.cnf 2>/dev/null || exit 1
		$o ca -batch -config ca.cnf -cert "$ca.crt" -keyfile "$ca.key" -in "$name.csr" \
			-out "$name.crt" -extensions "$ext" ${dates:--days 3650} -notext 2>/dev/null || exit 1
	}
	sign server-ec "ec -pkeyopt ec_paramgen_curve:P-256" server
	sign server-ec384 "ec -pkeyopt ec_paramgen_curve:P-384" server
	sign server-rsa "rsa:2048" server
	sign server-rsa4096 "rsa:4096" server
	sign server-elsewhere "ec -pkeyopt ec_paramgen_curve:P-256" elsewhere
	sign server-unknown "ec -pkeyopt ec_paramgen_curve:P-256" server evil-ca
	sign server-expired "ec -pkeyopt ec_paramgen_curve:P-256" server ca \
		"-startdate 20200101000000Z -enddate 20210101000000Z"
	sign client-ec "ec -pkeyopt ec_paramgen_curve:P-256" client
	sign client-rsa "rsa:2048" client
	# The same client key as SEC1 ("EC PRIVATE KEY") and PKCS#1 ("RSA PRIVATE KEY").
	$o ec -in client-ec.key -out client-ec-sec1.key 2>/dev/null || exit 1
	$o rsa -in client-rsa.key -traditional -out client-rsa-pkcs1.key 2>/dev/null || exit 1
	cd - >/dev/null || exit 1
	rm -rf "$certs" && mv "$certs.tmp" "$certs"
}
# The lanes of tests/run.sh run this for two targets at once: one makes the
# certificates while the other waits, and neither sees a half-made directory.
mkdir -p build/test || exit 1
{
	flock 9 || exit 1
	[ -f "$certs/client-rsa-pkcs1.key" ] || make_certs
} 9>build/test/tls-certs.lock

# case NAME EXPECT(ok|fail:PATTERN) SERVER-ARGS -- PROBE-ARGS
# SERVER-ARGS "reset" is no TLS server: a socket that reads the ClientHello
# and resets the connection (SO_LINGER 0), as a server going down does.
server_pid=""
stop_server() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	server_pid=""
}
trap stop_server EXIT

tcase() {
	name=$1 expect=$2
	shift 2
	sargs=""
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do sargs="$sargs $1"; shift; done
	[ $# -gt 0 ] && shift
	out=build/test/tls-$target-$name.log
	# Emptied here, before the fork: the child's own ">" truncates only once it
	# runs, and until then the loop below would read the port of an earlier
	# run's log (a connect refused "after ACCEPT" under two busy lanes).
	: >"$out.server" || exit 1
	if [ "$sargs" = " reset" ]; then
		python3 -u -c '
import socket, struct
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
print("ACCEPT 127.0.0.1:%d" % s.getsockname()[1])
c, _ = s.accept()
c.recv(4096)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
c.close()
' >"$out.server" 2>&1 &
	else
		# shellcheck disable=SC2086
		openssl s_server -accept 127.0.0.1:0 -www $sargs >"$out.server" 2>&1 &
	fi
	server_pid=$!
	port=""
	i=0
	while [ -z "$port" ] && [ $i -lt 100 ]; do
		port=$(sed -n 's/^ACCEPT 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out.server" | head -n 1)
		[ -n "$port" ] || sleep 0.05
		i=$((i + 1))
	done
	if [ -z "$port" ]; then
		echo "FAIL $name: openssl s_server did not start: $(head -3 "$out.server")"
		fail=$((fail + 1))
		stop_server
		return
	fi
	# shellcheck disable=SC2086
	$run "$probe" "$@" 127.0.0.1 "$port" >"$out" 2>&1
	rc=$?
	stop_server
	result=$(grep '^result:' "$out" | tail -n 1)
	case "$expect" in
	ok*)
		want=${expect#ok}
		if [ $rc -eq 0 ] && echo "$result" | grep -q "^result: ok" &&
			{ [ -z "$want" ] || grep -q -- "${want#:}" "$out"; }; then
			pass=$((pass + 1))
			echo "ok   $name: $(grep '^connection 1:' "$out" | sed 's/^connection 1: ok //') $(echo "$result" | sed 's/^result: ok //')"
		else
			fail=$((fail + 1))
			echo "FAIL $name: expected success${want:+ with '${want#:}'}, got rc=$rc: $result"
		fi
		;;
	fail:*)
		pattern=${expect#fail:}
		if [ $rc -ne 0 ] && echo "$result" | grep -q -i -E "$pattern"; then
			pass=$((pass + 1))
			echo "ok   $name: refused as expected: ${result#result: }"
		else
			fail=$((fail + 1))
			echo "FAIL $name: expected a failure matching '$pattern', got rc=$rc: $result"
		fi
		;;
	esac
}

c=$certs
tcase tls13-ecdsa-p256 ok:TLSv1.3 -tls1_3 -cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls13-ecdsa-p384 ok:TLSv1.3 -tls1_3 -cert $c/server-ec384.crt -key $c/server-ec384.key -- --ca $c/ca.crt
tcase tls13-rsa2048 ok:TLSv1.3 -tls1_3 -cert $c/server-rsa.crt -key $c/server-rsa.key -- --ca $c/ca.crt
tcase tls13-rsa4096 ok:TLSv1.3 -tls1_3 -cert $c/server-rsa4096.crt -key $c/server-rsa4096.key -- --ca $c/ca.crt
tcase tls13-chacha20 ok:CHACHA20 -tls1_3 -ciphersuites TLS_CHACHA20_POLY1305_SHA256 \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls13-x25519 ok:TLSv1.3 -tls1_3 -groups X25519 -cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls13-p384-group ok:TLSv1.3 -tls1_3 -groups P-384 -cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls12-ecdhe-rsa-aes128-gcm ok:ECDHE-RSA-WITH-AES-128-GCM-SHA256 -tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256 \
	-cert $c/server-rsa.crt -key $c/server-rsa.key -- --ca $c/ca.crt
tcase tls12-ecdhe-ecdsa-chacha20 ok:ECDHE-ECDSA-WITH-CHACHA20-POLY1305 -tls1_2 -cipher ECDHE-ECDSA-CHACHA20-POLY1305 \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls12-ecdhe-ecdsa-aes256-gcm ok:AES-256-GCM -tls1_2 -cipher ECDHE-ECDSA-AES256-GCM-SHA384 \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
# The client's AEAD order (src/tls.c, KR_TLS_PREFER_CHACHA): ChaCha20-Poly1305 first on
# armv7 (no AES instructions), AES-GCM first elsewhere. The server keeps its own order
# unless the client's first choice is ChaCha20, as Go's crypto/tls (kube-apiserver) does.
case $target in armv7) aead13=TLS1-3-CHACHA20 aead12=CHACHA20 ;; *) aead13=TLS1-3-AES aead12=AES-256-GCM ;; esac
tcase tls13-client-aead-order ok:$aead13 -tls1_3 -serverpref -prioritize_chacha \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase tls12-client-aead-order ok:ECDHE-ECDSA-WITH-$aead12 -tls1_2 -serverpref -prioritize_chacha \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt
tcase dns-name-localhost ok -cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt --name localhost
tcase client-cert-ec-pkcs8 ok -tls1_3 -Verify 1 -CAfile $c/ca.crt -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt --cert $c/client-ec.crt --key $c/client-ec.key
tcase client-cert-ec-sec1-tls12 ok:TLSv1.2 -tls1_2 -Verify 1 -CAfile $c/ca.crt -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt --cert $c/client-ec.crt --key $c/client-ec-sec1.key
tcase client-cert-rsa-pkcs1 ok -tls1_3 -Verify 1 -CAfile $c/ca.crt -cert $c/server-rsa.crt -key $c/server-rsa.key \
	-- --ca $c/ca.crt --cert $c/client-rsa.crt --key $c/client-rsa-pkcs1.key
tcase resume-tls13-ticket "ok:full=1 resumed=2" -tls1_3 -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt --connections 3
tcase resume-tls12-session "ok:full=1 resumed=2" -tls1_2 -cert $c/server-rsa.crt -key $c/server-rsa.key \
	-- --ca $c/ca.crt --connections 3

tcase unknown-ca "fail:not trusted" -cert $c/server-unknown.crt -key $c/server-unknown.key -- --ca $c/ca.crt
tcase san-mismatch-ip "fail:not trusted.*(CN|name)" -cert $c/server-elsewhere.crt -key $c/server-elsewhere.key -- --ca $c/ca.crt
tcase san-mismatch-dns "fail:not trusted.*(CN|name)" -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt --name api.wrong.example
tcase expired "fail:not trusted.*expired" -cert $c/server-expired.crt -key $c/server-expired.key -- --ca $c/ca.crt
tcase client-cert-missing "fail:the server refused: certificate required.*TLS alert 116" -tls1_3 -Verify 1 -CAfile $c/ca.crt -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt
tcase tls11-only-refused "fail:the server refused: protocol version: no TLS version.*TLS alert 70" -tls1_1 -cert $c/server-rsa.crt -key $c/server-rsa.key -- --ca $c/ca.crt
tcase client-cert-unknown-ca "fail:the server refused: unknown CA.*TLS alert 48" -tls1_3 -Verify 1 -verify_return_error -CAfile $c/ca.crt \
	-cert $c/server-ec.crt -key $c/server-ec.key -- --ca $c/ca.crt --cert $c/server-unknown.crt --key $c/server-unknown.key
tcase no-common-cipher "fail:the server refused: handshake failure: no common cipher.*TLS alert 40" -tls1_2 \
	-cipher AES128-SHA -cert $c/server-rsa.crt -key $c/server-rsa.key -- --ca $c/ca.crt
tcase reset-during-handshake "fail:the connection broke while receiving: .*reset.*\(-0x004c\)" reset -- --ca $c/ca.crt
tcase no-ca-no-insecure "fail:no CA certificate" -cert $c/server-ec.crt -key $c/server-ec.key --
tcase key-not-matching-cert "fail:does not match" -cert $c/server-ec.crt -key $c/server-ec.key \
	-- --ca $c/ca.crt --cert $c/client-ec.crt --key $c/client-rsa.key

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
