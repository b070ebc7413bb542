#!/bin/sh
# Cluster access, end to end: the real binary against the test API server over
# TLS. How kreflect finds the cluster (--kubeconfig, $KUBECONFIG merged,
# in-cluster), token rotation without a relist, client certificates, what it
# refuses, custom resources through discovery, and a build with another
# resources.def. Last line "N passed, N failed"; exit 0 only if all passed.
#
#   sh tests/access/run.sh [x86_64|asan|aarch64|armv7]
set -u
[ -n "${ACCESS_TRACE:-}" ] && set -x
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
BIN=$PWD/build/$target/kreflect
SECRETS_DIR=build/$target-secrets
SECRETS_BIN=$PWD/$SECRETS_DIR/kreflect
pass=0
fail=0
T=$(mktemp -d /tmp/kreflect-access.XXXXXX) || exit 1
W=$T/server
SRV_PID=""
KR_PID=""

cleanup() {
	[ -n "$KR_PID" ] && kill "$KR_PID" 2>/dev/null
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null
	[ -n "$SRV_PID" ] && wait "$SRV_PID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

[ -x "$BIN" ] || { echo "missing $BIN (make)"; echo "0 passed, 1 failed"; exit 1; }

# --- the server ------------------------------------------------------------------

mkdir -p "$W"
python3 tests/apiserver/apiserver.py --workdir "$W" --ready-file "$W/ready.json" \
	--crd widgets.example.com/v1=Widget >"$T/server.log" 2>&1 &
SRV_PID=$!
i=0
while [ ! -f "$W/ready.json" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -f "$W/ready.json" ] || { cat "$T/server.log"; echo "0 passed, 1 failed"; exit 1; }
rd() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$W/ready.json" "$1"; }
PORT=$(rd port)
SERVER=$(rd server)
CTL=$(rd control)
CA=$W/ca.crt

# ctl PATH JSON: POST to the control API, prints the answer.
ctl() { curl -sf "$CTL$1" -d "${2:-{\}}"; }
log_mark() { ctl /log '{"since":0}' | python3 -c "import json,sys; e=json.load(sys.stdin)['entries']; print(max([x['id'] for x in e] or [0]))"; }

ctl /create '{"resource":"configmaps","namespace":"default","name":"a","data":{"k":"v"}}' >/dev/null
ctl /create '{"resource":"configmaps","namespace":"edge","name":"edge-cm","data":{"k":"e"}}' >/dev/null
ctl /create '{"resource":"secrets","namespace":"edge","name":"gw-1","stringData":{"k":"1"},"labels":{"app":"gateway"}}' >/dev/null
ctl /create '{"resource":"secrets","namespace":"edge","name":"gw-2","stringData":{"k":"2"},"labels":{"app":"gateway"}}' >/dev/null
ctl /create '{"resource":"secrets","namespace":"edge","name":"other","stringData":{"k":"3"},"labels":{"app":"db"}}' >/dev/null
ctl /create '{"resource":"secrets","namespace":"default","name":"gw-default","stringData":{"k":"4"},"labels":{"app":"gateway"}}' >/dev/null

# ARM builds run under qemu-user: a wrapper that execs qemu keeps the pid and signals.
qemu_wrap() { # BINARY NAME: prints the path to run
	case "$target" in
	aarch64) q=qemu-aarch64 ;;
	armv7) q=qemu-arm ;;
	*) echo "$1"; return ;;
	esac
	printf '#!/bin/sh\nexec %s %s "$@"\n' "$q" "$1" >"$T/$2"
	chmod +x "$T/$2"
	echo "$T/$2"
}
BIN=$(qemu_wrap "$BIN" kreflect-wrapper)

# Hermetic environment: no kubeconfig, no in-cluster variables, no proxies.
run() { env -i PATH="$PATH" HOME=/nonexistent "$@"; }

# names FILE: sorted "namespace/name@resourceVersion" of the objects in jsonl output.
names() {
	python3 -c '
import json, sys
seen = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("type") in ("ADDED", "MODIFIED", "RESYNC"):
        m = e["object"]["metadata"]
        seen.add("%s/%s@%s" % (m.get("namespace", ""), m["name"], m["resourceVersion"]))
print(" ".join(sorted(seen)))' "$1"
}
# server_names RESOURCE [NAMESPACE] [SELECTOR]: the same from the server's state.
server_names() {
	python3 - "$CTL" "$@" <<'EOF'
import json, sys, urllib.request
ctl, res = sys.argv[1], sys.argv[2]
ns = sys.argv[3] if len(sys.argv) > 3 else ""
sel = sys.argv[4] if len(sys.argv) > 4 else ""
body = {"resource": res, "objects": True}
if ns:
    body["namespace"] = ns
st = json.load(urllib.request.urlopen(ctl + "/state", json.dumps(body).encode()))
out = []
for key, o in st["objects"].items():
    obj = o.get("object") or {}
    m = obj.get("metadata", {})
    if sel:
        k, v = sel.split("=")
        if (m.get("labels") or {}).get(k) != v:
            continue
    out.append("%s/%s@%s" % (m.get("namespace", ""), m.get("name"), o["resourceVersion"]))
print(" ".join(sorted(out)))
EOF
}

# --- (a) --kubeconfig with the server's generated kubeconfig -----------------------

run "$BIN" --kubeconfig "$W/kubeconfig" --once configmaps >"$T/a.out" 2>"$T/a.err"
rc=$?
got=$(names "$T/a.out")
want=$(server_names configmaps default)
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -q '"type":"SYNCED"' "$T/a.out"; then
	ok "a: --kubeconfig syncs ($got)"
else
	bad "a: --kubeconfig" "rc=$rc got=[$got] want=[$want]" "$(tail -3 "$T/a.err")"
fi

# --- (b) KUBECONFIG with two files, first wins ---------------------------------------

cat >"$T/kc1.yaml" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: $SERVER
    certificate-authority: $CA
users:
- name: tok
  user:
    tokenFile: $W/token
contexts:
- name: picked
  context:
    cluster: real
    user: tok
    namespace: edge
current-context: picked
EOF
cat >"$T/kc2.yaml" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
users:
- name: tok
  user:
    token: not-the-token
contexts:
- name: picked
  context:
    cluster: nowhere
    user: tok
    namespace: default
- name: wrong
  context:
    cluster: nowhere
    user: tok
current-context: wrong
EOF
run KUBECONFIG="$T/kc1.yaml:$T/kc2.yaml" "$BIN" --once --timeout 10 configmaps >"$T/b.out" 2>"$T/b.err"
rc=$?
got=$(names "$T/b.out")
want=$(server_names configmaps edge)
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -q "context picked (cluster real" "$T/b.err"; then
	ok "b: KUBECONFIG a:b merged, first file's current-context and entries win"
else
	bad "b: KUBECONFIG merge" "rc=$rc got=[$got] want=[$want]" "$(tail -3 "$T/b.err")"
fi

# --- (c) in-cluster ----------------------------------------------------------------------

SA=$T/sa
mkdir -p "$SA"
cp "$CA" "$SA/ca.crt"
cp "$W/token" "$SA/token"
printf 'edge\n' >"$SA/namespace"
run KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" \
	KREFLECT_SERVICEACCOUNT_DIR="$SA" "$BIN" --once --timeout 10 configmaps >"$T/c.out" 2>"$T/c.err"
rc=$?
got=$(names "$T/c.out")
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -q "in-cluster" "$T/c.err"; then
	ok "c: in-cluster with the service account's namespace ($got)"
else
	bad "c: in-cluster" "rc=$rc got=[$got] want=[$want]" "$(tail -3 "$T/c.err")"
fi

# --- (d) token rotation mid-run: no relist -----------------------------------------------

cp "$W/token" "$T/tok"
# Not through run(): a backgrounded function is a subshell, and $! would be its
# pid, not kreflect's, which then outlived the suite. env execs kreflect.
env -i PATH="$PATH" HOME=/nonexistent "$BIN" --server "$SERVER" --certificate-authority "$CA" \
	--token-file "$T/tok" -n default configmaps >"$T/d.out" 2>"$T/d.err" &
KR_PID=$!
i=0
while ! grep -q '"type":"SYNCED"' "$T/d.out" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ctl /wait-watches '{"count":1,"match":"configmaps","timeout":5}' >/dev/null
mark=$(log_mark)
newtok=$(ctl /token/rotate | python3 -c "import json,sys; print(json.load(sys.stdin)['token'])")
printf '%s\n' "$newtok" >"$T/tok.new" && mv -f "$T/tok.new" "$T/tok"
ctl /drop-watches >/dev/null
sleep 0.3
ctl /create '{"resource":"configmaps","namespace":"default","name":"after-rotation","data":{"k":"r"}}' >/dev/null
i=0
while ! grep -q '"name":"after-rotation"' "$T/d.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
seen=$(grep -c '"name":"after-rotation"' "$T/d.out")
verdict=$(ctl /log "{\"since\":$mark}" | python3 -c '
import json, sys
e = [x for x in json.load(sys.stdin)["entries"] if "configmaps" in x["path"]]
lists = [x for x in e if not x["watch"]]
wl = [x for x in e if x["query"].get("sendInitialEvents") in ("true", ["true"])]
u = [x for x in e if x["status"] == 401]
ok200 = [x for x in e if x["watch"] and x["status"] in (200, None)]
print("lists=%d watchlists=%d 401s=%d watches200=%d" % (len(lists), len(wl), len(u), len(ok200)))
if not ok200: print("entries:", [(x["path"], x["raw_query"], x["status"]) for x in e], file=sys.stderr)')
kill "$KR_PID" 2>/dev/null
wait "$KR_PID" 2>/dev/null
KR_PID=""
case "$verdict" in
"lists=0 watchlists=0 401s="[01]" watches200="[1-9]*)
	if [ "$seen" -ge 1 ]; then ok "d: token rotation: watch resumed, no relist ($verdict)"
	else bad "d: token rotation" "the object created after rotation never arrived ($verdict)" "$(tail -3 "$T/d.err")"; fi ;;
*) bad "d: token rotation" "$verdict, after-rotation seen $seen" "$(tail -5 "$T/d.err")" ;;
esac

# --- (e) client certificate, no token ----------------------------------------------------

mark=$(log_mark)
run "$BIN" --server "$SERVER" --certificate-authority "$CA" --client-certificate "$W/client.crt" \
	--client-key "$W/client.key" --once --timeout 10 configmaps >"$T/e.out" 2>"$T/e.err"
rc=$?
auths=$(ctl /log "{\"since\":$mark}" | python3 -c '
import json, sys
print(" ".join(sorted(set(str(x["auth"]) for x in json.load(sys.stdin)["entries"]))))')
run "$BIN" --kubeconfig "$W/kubeconfig" --context cert --once --timeout 10 configmaps >"$T/e2.out" 2>"$T/e2.err"
rc2=$?
if [ $rc -eq 0 ] && [ "$auths" = "cert:kreflect-test" ] && [ $rc2 -eq 0 ] &&
	[ "$(names "$T/e.out")" = "$(names "$T/e2.out")" ] && [ -n "$(names "$T/e.out")" ]; then
	ok "e: client certificate (flags and kubeconfig context cert), auth $auths"
else
	bad "e: client certificate" "rc=$rc rc2=$rc2 auths=[$auths]" "$(tail -3 "$T/e.err")"
fi

# --- (f) exec user refused ------------------------------------------------------------------

cat >"$T/exec.yaml" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: $SERVER
    certificate-authority: $CA
users:
- name: eks-admin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: aws
      args:
      - eks
      - get-token
contexts:
- name: eks
  context:
    cluster: real
    user: eks-admin
current-context: eks
EOF
run "$BIN" --kubeconfig "$T/exec.yaml" --once configmaps >"$T/f.out" 2>"$T/f.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "eks-admin" "$T/f.err" && [ ! -s "$T/f.out" ]; then
	ok "f: exec user -> exit 2 naming it: $(head -1 "$T/f.err" | cut -c1-100)"
else
	bad "f: exec user" "rc=$rc" "$(cat "$T/f.err")"
fi

# --- (g) unknown --context -------------------------------------------------------------------

run "$BIN" --kubeconfig "$W/kubeconfig" --context no-such-ctx --once configmaps >"$T/g.out" 2>"$T/g.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "no-such-ctx" "$T/g.err"; then
	ok "g: unknown --context -> exit 2 naming it"
else
	bad "g: unknown --context" "rc=$rc" "$(cat "$T/g.err")"
fi

# --- (h) custom resources found by discovery --------------------------------------------------

ctl /create '{"resource":"widgets.example.com","namespace":"default","name":"w1","spec":{"size":1}}' >/dev/null
ctl /create '{"resource":"widgets.example.com","namespace":"default","name":"w2","spec":{"size":2}}' >/dev/null
ctl /create '{"resource":"widgets.example.com","namespace":"edge","name":"w3","spec":{"size":3}}' >/dev/null
ctl /register '{"group":"other.io","version":"v1alpha1","plural":"gadgets","kind":"Gadget","namespaced":false}' >/dev/null
ctl /create '{"resource":"gadgets.other.io","name":"g1","spec":{"x":1}}' >/dev/null
ctl /create '{"resource":"gadgets.other.io","name":"g2","spec":{"x":2}}' >/dev/null
hok=1
for spec in "widgets.example.com|default" "example.com/v1/widgets|default" "widgets.v1.example.com|default" \
	"gadgets.other.io|"; do
	arg=${spec%|*}
	ns=${spec#*|}
	run "$BIN" --kubeconfig "$W/kubeconfig" --once --timeout 10 "$arg" >"$T/h.out" 2>"$T/h.err"
	rc=$?
	got=$(names "$T/h.out")
	res=${arg%%.v1.*}
	case "$arg" in example.com/v1/widgets) res=widgets.example.com ;; widgets.v1.*) res=widgets.example.com ;; esac
	want=$(server_names "$res" "$ns")
	kind=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] == "ADDED": print(e["object"]["kind"]); break' "$T/h.out")
	if [ $rc -ne 0 ] || [ "$got" != "$want" ] || [ -z "$got" ]; then
		hok=0
		bad "h: discovery of $arg" "rc=$rc got=[$got] want=[$want]" "$(tail -3 "$T/h.err")"
	fi
done
[ "$kind" = "Gadget" ] || { hok=0; bad "h: cluster-scoped gadgets" "kind=[$kind]"; }
[ $hok -eq 1 ] && ok "h: custom resources by discovery (widgets 3 spellings, cluster-scoped gadgets v1alpha1)"

run "$BIN" --kubeconfig "$W/kubeconfig" --once gizmos.example.com >"$T/h2.out" 2>"$T/h2.err"
rc=$?
run "$BIN" --kubeconfig "$W/kubeconfig" --once widgets.nope.io >/dev/null 2>"$T/h3.err"
rc3=$?
run "$BIN" --server https://127.0.0.1:1 --certificate-authority "$CA" --token-file "$W/token" \
	--once widgets.example.com >/dev/null 2>"$T/h4.err"
rc4=$?
if [ $rc -eq 2 ] && grep -q "gizmos.example.com" "$T/h2.err" && [ $rc3 -eq 2 ] && grep -q "widgets.nope.io" "$T/h3.err" &&
	[ $rc4 -eq 1 ] && grep -q "widgets.example.com" "$T/h4.err"; then
	ok "h: no such resource/group -> exit 2, unreachable -> exit 1, each naming the resource"
else
	bad "h: discovery errors" "gizmos rc=$rc nope rc=$rc3 unreachable rc=$rc4" "$(cat "$T/h2.err" "$T/h3.err" "$T/h4.err")"
fi

# --- (i) a build with another resources.def -------------------------------------------------------

if [ ! -x "$SECRETS_BIN" ] || [ config/examples/secrets-edge.def -nt "$SECRETS_BIN" ]; then
	make --no-print-directory TARGET="$target" O="$SECRETS_DIR" \
		KR_RESOURCES=config/examples/secrets-edge.def target-bin >"$T/i.build" 2>&1 ||
		{ tail -20 "$T/i.build"; }
fi
SECRETS_BIN=$(qemu_wrap "$SECRETS_BIN" secrets-wrapper)
run "$SECRETS_BIN" --kubeconfig "$W/kubeconfig" --once --timeout 10 >"$T/i.out" 2>"$T/i.err"
rc=$?
got=$(names "$T/i.out")
want=$(server_names secrets edge app=gateway)
synced=$(grep -c '"type":"SYNCED"' "$T/i.out")
run "$BIN" --kubeconfig "$W/kubeconfig" --once --timeout 10 >"$T/i2.out" 2>"$T/i2.err"
dflt=$(python3 -c 'import json,sys
print(" ".join(sorted({json.loads(l).get("resource","") for l in open(sys.argv[1]) if "SYNCED" in l})))' "$T/i2.out")
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && [ "$synced" -eq 1 ] && grep -q '"resource":"secrets"' "$T/i.out" &&
	[ "$dflt" = "configmaps" ]; then
	ok "i: KR_RESOURCES=secrets-edge.def build mirrors exactly $got (default build: $dflt)"
else
	bad "i: KR_RESOURCES build" "rc=$rc got=[$got] want=[$want] synced=$synced default=[$dflt]" "$(tail -3 "$T/i.err")"
fi

# --- (j) through an HTTPS proxy: the cluster's proxy-url ------------------------------------------

proxy_start() { # LOG ARGS...: starts tests/proxy/proxy.py, sets PROXY_PID and PROXY_PORT
	plog=$1
	shift
	: >"$plog" # before the proxy's redirect makes it, or the first read says it is not there
	python3 tests/proxy/proxy.py --log "$plog.connects" "$@" >"$plog" 2>&1 &
	PROXY_PID=$!
	PROXY_PORT=""
	i=0
	while [ -z "$PROXY_PORT" ] && [ $i -lt 100 ]; do
		PROXY_PORT=$(sed -n 's/^PORT //p' "$plog" | head -n 1)
		[ -n "$PROXY_PORT" ] || sleep 0.1
		i=$((i + 1))
	done
}
proxy_stop() { kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null; }

proxy_start "$T/proxy.log"
sed "s|^\(  *\)server: \(.*\)$|\1server: \2\n\1proxy-url: http://127.0.0.1:$PROXY_PORT|" "$W/kubeconfig" >"$T/proxied.yaml"
run "$BIN" --kubeconfig "$T/proxied.yaml" --once --timeout 10 configmaps >"$T/j.out" 2>"$T/j.err"
rc=$?
got=$(names "$T/j.out")
want=$(server_names configmaps default)
proxy_stop
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && grep -q "127.0.0.1:$PORT" "$T/proxy.log.connects" &&
	grep -q "through the proxy http://127.0.0.1:$PROXY_PORT" "$T/j.err"; then
	ok "j: syncs through the cluster's proxy-url (CONNECT seen by the proxy, TLS verified inside)"
else
	bad "j: proxy-url" "rc=$rc got=[$got] want=[$want]" "$(tail -3 "$T/j.err")" "$(tail -3 "$T/proxy.log")"
fi
proxy_start "$T/proxy2.log" --refuse
sed "s|^\(  *\)server: \(.*\)$|\1server: \2\n\1proxy-url: http://127.0.0.1:$PROXY_PORT|" "$W/kubeconfig" >"$T/refused.yaml"
run "$BIN" --kubeconfig "$T/refused.yaml" --once --timeout 4 configmaps >"$T/j2.out" 2>"$T/j2.err"
rc=$?
proxy_stop
if [ $rc -eq 1 ] && grep -q "refused CONNECT: 403" "$T/j2.err"; then
	ok "j: a refusing proxy: exit 1 within --timeout, the reason named"
else
	bad "j: refusing proxy" "rc=$rc" "$(tail -3 "$T/j2.err")"
fi

# --- (k) the proxy's password never in the log -------------------------------------------------
# No scheme (http:// assumed, as Go reads it) and a "://" later in the URL: the credentials are
# used (this proxy demands them) and the log shows the URL from after the last '@'.
secret=hunter2-proxy-secret
proxy_start "$T/proxy3.log" --user alice --password "$secret"
sed "s|^\(  *\)server: \(.*\)$|\1server: \2\n\1proxy-url: \"alice:$secret@127.0.0.1:$PROXY_PORT/x://y\"|" \
	"$W/kubeconfig" >"$T/authproxy.yaml"
run "$BIN" --kubeconfig "$T/authproxy.yaml" --once --timeout 10 -v 3 configmaps >"$T/k.out" 2>"$T/k.err"
rc=$?
got=$(names "$T/k.out")
proxy_stop
if [ $rc -eq 0 ] && [ "$got" = "$want" ] && ! grep -q "$secret" "$T/k.err" &&
	grep -q "through the proxy 127.0.0.1:$PROXY_PORT/x://y" "$T/k.err"; then
	ok "k: a proxy URL with credentials and no scheme: used, and the password not in the trace"
else
	bad "k: proxy credentials" "rc=$rc got=[$got]" "$(grep -c "$secret" "$T/k.err") lines with the password" \
		"$(grep -i proxy "$T/k.err" | head -3 | sed "s/$secret/<SECRET>/g")"
fi
# A URL kreflect refuses is named in the error, without what stood before its last '@'.
for url in "9ttp://alice:$secret@127.0.0.1:1" "socks5://alice:$secret@127.0.0.1:1" \
	"http://alice:$secret@127.0.0.1:99999" "alice:$secret@[::1@x]:1"; do
	sed "s|^\(  *\)server: \(.*\)$|\1server: \2\n\1proxy-url: \"$url\"|" "$W/kubeconfig" >"$T/badproxy.yaml"
	run "$BIN" --kubeconfig "$T/badproxy.yaml" --once --timeout 2 configmaps >/dev/null 2>"$T/k2.err"
	rc=$?
	if [ $rc -eq 2 ] && ! grep -q "$secret" "$T/k2.err" && grep -q "unable to use the proxy" "$T/k2.err"; then
		ok "k: refused proxy URL ${url%%:*}:...: exit 2, no password in the message"
	else
		bad "k: refused proxy URL" "rc=$rc" "$(sed "s/$secret/<SECRET>/g" "$T/k2.err" | tail -2)"
	fi
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
