#!/bin/sh
# What each optional feature costs in the stripped binary: the default build
# against one built WITHOUT that feature (make WITHOUT=NAME, its own build
# directory build/TARGET-without-NAME/, sharing the target's mbedTLS), then
# all of them left out at once. Not part of `make test` (a full build each):
#
#   sh tests/build/features.sh [TARGET]
set -u
cd "$(dirname "$0")/../.." || exit 1
t=${1:-x86_64}
features="listen sidecar state proxy discovery hooks dir"
make --no-print-directory TARGET=$t target-bin >/dev/null || exit 1
base=$(stat -c %s build/$t/kreflect)
printf '%-44s %8s %8s\n' "build ($t)" "bytes" "saved"
printf '%-44s %8d %8s\n' "default (every feature)" "$base" "-"
for f in $features "$features"; do
	make --no-print-directory TARGET=$t WITHOUT="$f" target-bin >/dev/null || exit 1
	d=build/$t-without-$(echo $f | tr ' ' '\n' | sort | tr '\n' '-' | sed 's/-$//')
	s=$(stat -c %s "$d/kreflect")
	printf '%-44s %8d %8d\n' "WITHOUT=\"$f\"" "$s" $((base - s))
done
