# Sourced by the end-to-end runners (tests/files, tests/supervise, tests/sidecar,
# tests/serve, tests/state):
# which kreflect binary a build target means and how it runs.
#
#   kr_pick_binary TARGET   sets bin (x86_64 -> build/kreflect, else
#                           build/TARGET/kreflect) and qemu (qemu-aarch64 or
#                           qemu-arm for the ARM builds, else empty); a binary
#                           that is not built fails the suite's setup
#   kr_setup_fail REASON    prints the failure and a result line, exits 1

kr_setup_fail() {
	echo "FAIL setup: $1"
	echo "0 passed, 1 failed"
	exit 1
}

kr_pick_binary() {
	case "$1" in
	x86_64) bin=build/kreflect ;;
	*) bin=build/$1/kreflect ;;
	esac
	case "$1" in
	aarch64) qemu=qemu-aarch64 ;;
	armv7) qemu=qemu-arm ;;
	*) qemu= ;;
	esac
	[ -x "$bin" ] || kr_setup_fail "$bin is not built (make, or make TARGET=$1 target-bin)"
}

# kr_qemu_wrap DIR: for an ARM build, DIR/kreflect execs it under qemu-user
# (same pid, same signals) and bin names that wrapper; otherwise nothing.
kr_qemu_wrap() {
	[ -n "$qemu" ] || return 0
	mkdir -p "$1" || kr_setup_fail "unable to create $1"
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$qemu" "$PWD" "$bin" >"$1/kreflect"
	chmod +x "$1/kreflect"
	bin=$1/kreflect
}
