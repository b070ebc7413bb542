#!/bin/sh
# Fetches the reference peers from Debian trixie's binary packages into DIR
# (default build/deps/trixie), never over the system: Go 1.24, client-go 0.32
# with apimachinery and api and every golang-* package they depend on, and
# kubectl 1.32 (kubernetes-client).
#
#   sh tests/peers/fetch.sh DIR [MIRROR]
#
# A private apt configuration under DIR/.apt (the machine's sources, lists and
# dpkg status are untouched) reads trixie's signed Release file; apt-get
# download checks each .deb against it. The .debs are deleted once unpacked. The set of packages is not a hand
# list: it is the closure of the roots' Depends as apt computes it, keeping
# the golang-* packages (Go sources and the toolchain; their C libraries are
# only for cgo, which the peers do not use), kubernetes-client and kubectl
# (a Go binary linked against the machine's libc). dpkg -x
# unpacks each one under DIR; absolute symbolic links into /usr are made to
# point inside DIR. DIR/.stamp lists what was unpacked, last.
set -eu
dir=${1:?usage: fetch.sh DIR [MIRROR]}
mirror=${2:-http://deb.debian.org/debian}
roots="golang-1.24-go golang-1.24-src golang-k8s-client-go-dev
	golang-k8s-apimachinery-dev golang-k8s-api-dev kubernetes-client"
. "$(dirname "$0")/debs.sh"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -f "$dir/.stamp"
debs_setup "$dir/.apt" trixie "$mirror"
# shellcheck disable=SC2086
pkgs=$(debs_closure '^(golang-|kubernetes-client$|kubectl$)' $roots | sed 's/ /=/')
n=$(echo "$pkgs" | wc -l)
echo "  FETCH   $n packages from trixie into $dir"
# shellcheck disable=SC2086
debs_unpack "$dir" $pkgs

go="$dir/usr/lib/go-1.24/bin/go"
"$go" version | grep -q 'go1\.24' || { echo "kreflect: unable to run $go" >&2; exit 1; }
kc="$dir/usr/bin/kubectl"
"$kc" version --client 2>/dev/null | grep -q 'v1\.32\.' || { echo "kreflect: unable to run $kc as kubectl 1.32" >&2; exit 1; }
mv "$dir/.apt/unpacked.txt" "$dir/.stamp"
echo "  $n packages unpacked; $("$go" version); kubectl $("$kc" version --client 2>/dev/null | sed -n 's/^Client Version: //p')"
