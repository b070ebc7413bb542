#!/bin/sh
# The directory sink and the notifications end to end: the real kreflect
# binary against tests/apiserver over TLS (tests/files/test_files.py, which
# runs on the end-to-end suite's harness).
#
#   sh tests/files/run.sh [TARGET] [NAME ...]
#
# TARGET picks the binary: x86_64 -> build/kreflect, anything else ->
# build/TARGET/kreflect (aarch64 and armv7 under qemu-user). The last line is
# "N passed, N failed"; what each scenario saw is kept in
# build/test/e2e-files-TARGET/.
set -u
cd "$(dirname "$0")/../.." || exit 1
target=${1:-x86_64}
[ $# -gt 0 ] && shift
. tests/e2e/target.sh
kr_pick_binary "$target"
# The reader runs on the build machine whatever the target.
mkdir -p build/test "build/test/files-$target"
# Built aside and renamed in: the other lane of tests/run.sh may be running it.
cc -O2 -Wall -Wextra -Werror -o "build/test/files-reader.$$" tests/files/reader.c &&
	mv -f "build/test/files-reader.$$" build/test/files-reader ||
	kr_setup_fail "cannot build tests/files/reader.c"
# The harness names its artifacts directory after the binary's directory:
# the binary is reached through build/test/files-TARGET/kreflect, a link (or
# for ARM a wrapper that execs qemu-user: same pid, same signals).
w=build/test/files-$target/kreflect
rm -f "$w"
if [ -n "$qemu" ]; then
	printf '#!/bin/sh\nexec %s %s/%s "$@"\n' "$qemu" "$PWD" "$bin" >"$w"
	chmod +x "$w"
else
	ln -s "$PWD/$bin" "$w"
fi
exec python3 tests/files/test_files.py "$w" "$@"
