#!/bin/sh
# The sandbox (port/posix/sandbox.c): the probe applies it as kreflect does
# and tries what a parser bug would (tests/sandbox/probe.c); on x86_64 a few
# e2e scenarios and a name lookup run under strace and every call made after
# the filter is set must be on the allow list, and every call on it must have
# been made or have its reason (tests/sandbox/calls.py).
#
#   sh tests/sandbox/run.sh [TARGET]
#
# ARM builds run under qemu-user, which hands seccomp() and Landlock's calls
# to the host kernel: the filter then judges qemu's own x86_64 calls with the
# target's audit arch, so it is applied with --sandbox auto only to show the
# per-target numbers compile and the probe's refusals by Landlock hold.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
case "$target" in
x86_64) cc=x86_64-linux-musl-gcc q="" ;;
aarch64) cc=aarch64-linux-musl-gcc q=qemu-aarch64 ;;
armv7) cc=arm-linux-musleabihf-gcc q=qemu-arm ;;
*) echo "FAIL setup: no probe for $target"; echo "0 passed, 1 failed"; exit 1 ;;
esac
w=build/test/sandbox-$target
rm -rf "$w"
mkdir -p "$w/out"
passed=0
failed=0
if ! $cc -static -O2 -Wall -Wextra -Werror -Iport -Isrc -Iconfig -Ibuild/include -o "$w/probe" \
	tests/sandbox/probe.c port/posix/sandbox.c src/fmt.c 2>"$w/cc.log"; then
	cat "$w/cc.log"
	echo "FAIL setup: cannot build tests/sandbox/probe.c for $target"
	echo "0 passed, 1 failed"
	exit 1
fi
echo secret >"$w/allowed"
rm -f /tmp/kreflect-sandbox-escape   # left by an earlier run without the sandbox
if [ -n "$q" ]; then
	# qemu-user answers Landlock's calls with ENOSYS and cannot run a filter
	# of the target's arch: auto must say so in its line and the probe run.
	$q "$w/probe" "$w/out" "$w/allowed" auto >"$w/probe.log" 2>&1
	cat "$w/probe.log"
	if grep -q '^ok applied: sandbox: no_new_privs' "$w/probe.log"; then
		echo "ok auto under $q: $(sed -n 's/^ok applied: //p' "$w/probe.log")"
		echo "1 passed, 0 failed"
		exit 0
	fi
	echo "FAIL auto under $q"
	echo "0 passed, 1 failed"
	exit 1
fi
# As kreflect without hooks, then with one program named (a hook under --sandbox on).
for prog in "" "$PWD/$w/probe"; do
	"$w/probe" "$w/out" "$w/allowed" on $prog >"$w/probe.log" 2>&1
	cat "$w/probe.log"
	line=$(tail -n 1 "$w/probe.log")
	case "$line" in
	*" passed, "*" failed") p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*} ;;
	*) p=0 f=1; echo "FAIL the probe ended without a result" ;;
	esac
	passed=$((passed + p))
	failed=$((failed + f))
done
[ -e /tmp/kreflect-sandbox-escape ] && { echo "FAIL /tmp/kreflect-sandbox-escape exists"; failed=$((failed + 1)); }
rm -f /tmp/kreflect-sandbox-escape
# kreflect's own flags: each case's stderr must hold its words (no server: port 1 refuses).
check_flags() {
	name=$1 want=$2
	shift 2
	timeout 3 build/kreflect --server https://127.0.0.1:1 --insecure-skip-tls-verify "$@" configmaps \
		>/dev/null 2>"$w/flags.log"
	if grep -q -- "$want" "$w/flags.log"; then
		echo "ok $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name: no '$want' in: $(head -c 300 "$w/flags.log")"
		failed=$((failed + 1))
	fi
}
if [ "$target" = x86_64 ] && [ -x build/kreflect ]; then
	mkdir -p "$w/rootdir"
	chmod 755 "$w/rootdir"
	check_flags "--sandbox auto applies every layer here" "sandbox: no_new_privs, Landlock ABI" --dir "$w/out"
	check_flags "--sandbox off" "sandbox: off" --sandbox off
	check_flags "--sandbox with a bad value" "--sandbox must be auto, on or off" --sandbox maybe
	check_flags "auto with --exec leaves it off and says why" "would inherit it" --exec /bin/true
	check_flags "on with a hook found on PATH is refused" "name the program to run by its path" \
		--sandbox on --exec true
	check_flags "on with a hook by path" "seccomp: instructions" --sandbox on --exec "$PWD/$w/probe --true"
	check_flags "--user that does not exist" "no user 'no-such-user-kr' in /etc/passwd" --user no-such-user-kr
	check_flags "--user who could not write --dir" "could not write $w/rootdir (owner 0:0, mode 0755)" \
		--user 65534 --group 65534 --dir "$w/rootdir"
	check_flags "--user and --group by number" "uid 65534 gid 65534" --user 65534 --group 65534
fi
# A real run under --sandbox on: the test API server, --dir, --state-dir and a
# hook (the probe, a static program) that must run after the sync.
if [ "$target" = x86_64 ] && [ -x build/kreflect ]; then
	mkdir -p "$w/api" "$w/files" "$w/state"
	python3 tests/apiserver/apiserver.py --workdir "$w/api" --ready-file "$w/api/ready.json" \
		--initial 3 >"$w/api/log" 2>&1 &
	api=$!
	i=0
	while [ ! -s "$w/api/ready.json" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	kc=$(sed -n 's/.*"kubeconfig": "\(.*\)".*/\1/p' "$w/api/ready.json")
	timeout 30 build/kreflect --kubeconfig "$kc" --sandbox on --once --output none --dir "$w/files" \
		--state-dir "$w/state" --exec "$PWD/$w/probe --true" configmaps >/dev/null 2>"$w/on.log"
	rc=$?
	kill "$api"
	wait "$api" 2>/dev/null
	if [ $rc -eq 0 ] && grep -q 'seccomp: instructions' "$w/on.log" &&
	   grep -q "probe exited with 0" "$w/on.log" && [ -s "$w/files/payload" ] &&
	   [ -n "$(ls "$w/state")" ]; then
		echo "ok --sandbox on: synced, files and state written, the hook ran and exited 0"
		passed=$((passed + 1))
	else
		echo "FAIL --sandbox on with --dir, --state-dir and a hook: exit $rc; $(tail -n 5 "$w/on.log")"
		failed=$((failed + 1))
	fi
fi
if [ "$target" = x86_64 ] && [ -x build/kreflect ] && command -v strace >/dev/null; then
	mkdir -p "$w/traces"
	# -D: strace runs as a grandchild and kreflect keeps the pid the harness
	# signals and kills (strace as the parent left it running when killed).
	printf '#!/bin/sh\nexec strace -D -f -qq -o %s/traces/t.$$ %s/build/kreflect "$@"\n' "$PWD/$w" "$PWD" >"$w/kreflect"
	chmod +x "$w/kreflect"
	python3 tests/e2e/test_e2e.py "$PWD/$w/kreflect" TokenRotation MultipleResources \
		TestReflectorListAndWatch ReconnectWithoutAnswer >"$w/e2e.log" 2>&1
	echo "e2e under strace: $(tail -n 1 "$w/e2e.log")"
	# A name to look up: the resolver child (UDP, /etc/hosts, its allocations).
	timeout 3 "$w/kreflect" --server https://localhost:1 --insecure-skip-tls-verify configmaps \
		>/dev/null 2>"$w/lookup.log"
	grep -q 'unable to connect to 127.0.0.1:1' "$w/lookup.log" && echo "ok localhost looked up in the sandbox" ||
		{ echo "FAIL localhost was not looked up in the sandbox: $(tail -n 2 "$w/lookup.log")"; failed=$((failed + 1)); }
	grep -q 'unable to resolve' "$w/lookup.log" &&
		{ echo "FAIL a lookup failed in the sandbox"; failed=$((failed + 1)); }
	"$w/probe" --calls >"$w/allowed-calls"
	python3 tests/sandbox/calls.py "$w/allowed-calls" "$w"/traces/* >"$w/calls.log" 2>&1
	cat "$w/calls.log"
	line=$(tail -n 1 "$w/calls.log")
	p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
	passed=$((passed + p))
	failed=$((failed + f))
	tail -n 1 "$w/e2e.log" | grep -q ' 0 failed' || { echo "FAIL e2e scenarios under strace"; failed=$((failed + 1)); }
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
