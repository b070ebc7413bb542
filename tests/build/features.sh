#!/bin/sh
# What each optional feature costs in the stripped binary: the default build
# against one built WITHOUT that feature (make WITHOUT=NAME, its own build
# directory build/TARGET-without-NAME/, sharing the target's mbedTLS but for
# listen and listen_tls: build/TARGET-no-tls-server/mbedtls), then
# all of them left out at once. Not part of `make test` (a full build each):
#
#   sh tests/build/features.sh [TARGET]
set -u
cd "$(dirname "$0")/../.." || exit 1
t=${1:-x86_64}
features="listen listen_tls sidecar state proxy discovery hooks dir kubeconfig dns full_help gzip"
make --no-print-directory TARGET=$t target-bin >/dev/null || exit 1
case $t in x86_64) sz=size ;; aarch64) sz=aarch64-linux-gnu-size ;; *) sz=arm-linux-gnueabihf-size ;; esac
base=$(stat -c %s build/$t/kreflect)
btx=$($sz build/$t/kreflect | awk 'NR==2 {print $1}')
printf '%-44s %8s %8s %8s %8s\n' "build ($t)" "bytes" "saved" "text" "saved"
printf '%-44s %8d %8s %8d %8s\n' "default (every feature)" "$base" "-" "$btx" "-"
for f in $features "$features"; do
	make --no-print-directory TARGET=$t WITHOUT="$f" target-bin >/dev/null || exit 1
	d=build/$t-without-$(echo $f | tr ' ' '\n' | sort | tr '\n' '-' | sed 's/-$//')
	s=$(stat -c %s "$d/kreflect")
	tx=$($sz "$d/kreflect" | awk 'NR==2 {print $1}')
	printf '%-44s %8d %8d %8d %8d\n' "WITHOUT=\"$f\"" "$s" $((base - s)) "$tx" $((btx - tx))
done
