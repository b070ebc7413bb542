#!/bin/sh
# config/examples/systemd/kreflect.service under a real systemd: a Debian
# bookworm container (debootstrap) booted with systemd-nspawn, systemd as its
# PID 1, the unit enabled against the test API server on the host's loopback.
# A probe unit in the container checks the sandbox (dynamic user, no
# capability, no new privileges, seccomp on), the files and /readyz, a
# restart (the state written at the stop, a warm start), a SIGKILL (restarted
# by Restart=on-failure), and writes what it saw to the report.
#
#   sh tests/install/nspawn.sh        (as root; needs build/kreflect, the packages
#                                      debootstrap and systemd-container, and
#                                      Debian's archive for the first run)
#
# Not in `make test`: it needs root, a network download of ~150 MB the first
# time and a host where systemd-nspawn can boot a container. The last line is
# "N passed, N failed"; the report is build/nspawn/out/report.txt.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/install/common.sh
for tool in debootstrap systemd-nspawn unshare; do
	command -v "$tool" >/dev/null || { bad "$tool is missing (apt-get install debootstrap systemd-container)"; finish; }
done
[ -x build/kreflect ] || { bad "build/kreflect is missing: run make"; finish; }
n=$PWD/build/nspawn
R=$n/rootfs
mkdir -p "$n"
if [ ! -x "$R/lib/systemd/systemd" ]; then
	rm -rf "$R"
	debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl bookworm "$R" \
		"${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$n/debootstrap.log" 2>&1 ||
		{ bad "debootstrap: $(tail -3 "$n/debootstrap.log")"; finish; }
fi

# The test API server on the host's loopback (the container shares the network).
rm -rf "$n/api" "$n/out" && mkdir -p "$n/out"
start_api "$n/api"
# The kubeconfig as the unit needs it: everything inline (the service's user reads no other file).
python3 - "$n" <<'EOF'
import base64, json, sys
n = sys.argv[1]
r = json.load(open(n + "/api/ready.json"))
ca = base64.b64encode(open(r["ca"], "rb").read()).decode()
tok = open(r["token_file"]).read().strip()
open(n + "/kubeconfig", "w").write(
    "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: %s\n"
    "    certificate-authority-data: %s\nusers:\n- name: token\n  user:\n    token: %s\n"
    "contexts:\n- name: test\n  context:\n    cluster: test\n    user: token\n"
    "current-context: test\n" % (r["server"], ca, tok))
EOF

install -m 0755 build/kreflect "$R/usr/bin/kreflect"
install -D -m 0644 src/kreflect.1 "$R/usr/share/man/man1/kreflect.1"
install -d -m 0700 "$R/etc/kreflect"
install -m 0600 "$n/kubeconfig" "$R/etc/kreflect/kubeconfig"
rm -rf "$R/var/lib/private/kreflect" "$R/var/lib/kreflect"
cp config/examples/systemd/kreflect.service "$R/etc/systemd/system/"
ln -sf /etc/systemd/system/kreflect.service "$R/etc/systemd/system/multi-user.target.wants/"
cat >"$R/etc/systemd/system/kreflect-probe.service" <<'EOF'
[Unit]
Description=checks kreflect.service, then powers off
After=kreflect.service

[Service]
Type=oneshot
ExecStart=/bin/sh /probe/probe.sh
ExecStopPost=/bin/systemctl --no-block poweroff
EOF
ln -sf /etc/systemd/system/kreflect-probe.service "$R/etc/systemd/system/multi-user.target.wants/"
cat >"$n/out/probe.sh" <<'EOF'
o=/probe/report.txt
show() { systemctl show kreflect -p "$1" --value; }
{
	sleep 6
	p=$(show MainPID)
	echo "state $(show ActiveState)/$(show SubState) user $(show User) pid $p"
	grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp):' "/proc/$p/status"
	echo "readyz $(curl -s -m 5 http://127.0.0.1:8081/readyz)"
	echo "files $(ls /run/kreflect/files | tr '\n' ' ')"
	echo "mode $(cat /run/kreflect/files/mode)"
	echo "token-mode $(stat -c %a /run/kreflect/files/token)"
	# In kreflect's mount namespace: / read-only, its state directory writable.
	echo "rootfs-write $(nsenter -t "$p" -m touch /usr/probe-test 2>&1 && echo allowed)"
	echo "state-write $(nsenter -t "$p" -m touch /var/lib/kreflect/probe-test 2>&1 && echo allowed)"
	nsenter -t "$p" -m rm -f /var/lib/kreflect/probe-test /usr/probe-test
	systemctl restart kreflect
	sleep 4
	echo "after-restart $(show ActiveState) state-files $(ls /var/lib/kreflect | tr '\n' ' ')"
	systemctl kill --signal=KILL kreflect
	sleep 9
	echo "after-kill $(show ActiveState) restarts $(show NRestarts)"
	echo "--- journal"
	journalctl -u kreflect --no-pager -o cat
} >"$o" 2>&1
EOF
# nspawn removes its propagation directory only from a tmpfs: one of its own, in
# a mount namespace of its own. No system bus here: no registration, no scope.
unshare -m sh -c "mount --make-rprivate / && mkdir -p /run/systemd/nspawn &&
	mount -t tmpfs tmpfs /run/systemd/nspawn &&
	timeout 240 systemd-nspawn -q --keep-unit --register=no -D '$R' --bind='$n/out:/probe' --boot" \
	>"$n/nspawn.log" 2>&1
rc=$?
r=$n/out/report.txt
[ $rc -eq 0 ] && [ -s "$r" ] || { bad "systemd-nspawn exited $rc: $(tail -3 "$n/nspawn.log")"; finish; }
grep -q '^PID 1\|systemd 252\|Welcome to' "$n/nspawn.log" && ok "booted: $(grep -m1 -o 'systemd [0-9]*[^)]*' "$n/nspawn.log" || echo systemd)"
check() { if grep -qE "$1" "$r"; then ok "$2"; else bad "$2: $(grep -E "^${1%% *}" "$r" | head -2)"; fi; }
check '^state active/running user kreflect' "kreflect.service active under DynamicUser (user kreflect)"
check '^CapEff:	0+$' "no effective capability"
check '^NoNewPrivs:	1$' "no new privileges"
check '^Seccomp:	2$' "the system call filter is on (seccomp mode 2)"
check '^readyz ok$' "/readyz ok on 127.0.0.1:8081"
check '^mode edge$' "the ConfigMap's file in /run/kreflect/files"
check '^token-mode 600$' "the Secret's file is 0600"
check '^rootfs-write .*Read-only' "in its mount namespace, /usr is read-only (ProtectSystem=strict)"
check '^state-write allowed' "and its state directory writable"
check '^after-restart active state-files state' "systemctl restart: the state written at the stop, running again"
check '^after-kill active restarts 1$' "SIGKILL: restarted once by Restart=on-failure"
if grep -qiE 'operation not permitted|bad system call' "$r"; then
	bad "a call refused under the filter: $(grep -iE 'operation not permitted|bad system call' "$r" | head -2)"
else
	ok "no call refused by the filter in the journal"
fi
finish
