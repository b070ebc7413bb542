#!/bin/sh
# Supervisor mode, --http-post and --once with hooks: the real kreflect binary
# against tests/apiserver over TLS (scenarios in test_supervise.py, on the
# harness of tests/e2e/test_e2e.py). Supervisor scenarios run kreflect as PID 1
# of a new PID namespace (unshare, as root).
#
#   sh tests/supervise/run.sh [TARGET] [NAME ...]
#
# TARGET picks the binary as tests/e2e/run.sh does (aarch64 and armv7 under
# qemu-user). The last line is "N passed, N failed"; what each scenario saw
# is kept in build/test/e2e-supervise-TARGET/.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
. tests/e2e/target.sh
kr_pick_binary "$target"
[ "$(id -u)" = 0 ] && command -v unshare >/dev/null ||
	kr_setup_fail "the PID-namespace scenarios need root and unshare (util-linux)"
q=$qemu
# The binary the harness runs: it execs kreflect (under qemu-user for ARM; same
# pid, same signals); an argument --test-pid1 (removed) makes it PID 1 of a new
# PID namespace instead, with its own /proc.
w=build/test/supervise-$target
mkdir -p "$w"
cat >"$w/kreflect" <<WRAP
#!/bin/sh
pid1=
for a; do
	shift
	if [ "\$a" = --test-pid1 ]; then pid1=1; else set -- "\$@" "\$a"; fi
done
if [ -n "\$pid1" ]; then
	exec unshare --pid --fork --mount-proc --kill-child $q "$PWD/$bin" "\$@"
fi
exec $q "$PWD/$bin" "\$@"
WRAP
chmod +x "$w/kreflect"
exec python3 tests/supervise/test_supervise.py "$w/kreflect" -j 3 "$@"
