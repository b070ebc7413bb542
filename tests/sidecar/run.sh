#!/bin/sh
# kreflect --k8s-sidecar end to end: k8s-sidecar's environment variables, its
# file layout and the request after a change, the real binary against
# tests/apiserver over TLS (scenarios in test_sidecar.py, on the harness of
# tests/e2e/test_e2e.py).
#
#   sh tests/sidecar/run.sh [TARGET] [NAME ...]
#
# TARGET picks the binary as tests/e2e/run.sh does (aarch64 and armv7 under
# qemu-user). The last line is "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
. tests/e2e/target.sh
kr_pick_binary "$target"
if [ -n "$qemu" ]; then
	# ARM under qemu-user: a wrapper that keeps the name it was run under
	# (k8s-sidecar, through a link) as the program's argv[0].
	w=build/test/sidecar-$target
	mkdir -p "$w"
	printf '#!/bin/sh\nexec %s -0 "$0" "%s" "$@"\n' "$qemu" "$PWD/$bin" >"$w/kreflect"
	chmod +x "$w/kreflect"
	bin=$w/kreflect
fi
exec python3 tests/sidecar/test_sidecar.py "$bin" -j 3 "$@"
