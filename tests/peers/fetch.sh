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
arch=$(dpkg --print-architecture)

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt="$dir/.apt"
rm -rf "$apt" "$dir/.stamp"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
: >"$apt/status"
echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
	>"$apt/sources.list"
set -- -o Dir::Etc::SourceList="$apt/sources.list" \
	-o Dir::Etc::SourceParts=/dev/null \
	-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
	-o Dir::State::Lists="$apt/lists" -o Dir::State::status="$apt/status" \
	-o Dir::Cache="$apt/cache" \
	-o APT::Architecture="$arch" -o APT::Architectures="$arch" \
	-o Debug::NoLocking=1 -o APT::Sandbox::User=root

apt-get "$@" -qq update

# The closure: every package reached through Depends and Pre-Depends.
# shellcheck disable=SC2086
apt-cache "$@" depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances $roots >"$apt/closure.txt"
pkgs=$(grep -E '^[a-z0-9]' "$apt/closure.txt" | grep -E '^(golang-|kubernetes-client$|kubectl$)' | sort -u)
for r in $roots; do
	echo "$pkgs" | grep -qx "$r" || { echo "kreflect: unable to fetch $r: trixie does not have it" >&2; exit 1; }
done
n=$(echo "$pkgs" | wc -l)
echo "  FETCH   $n packages from trixie into $dir"

# shellcheck disable=SC2086
(cd "$apt/debs" && apt-get "$@" -qq download $pkgs)
for deb in "$apt/debs"/*.deb; do
	dpkg -x "$deb" "$dir"
done

# Absolute links into /usr (a -dev package linking into another's tree) would
# leave DIR for the system's files: point them inside DIR.
find "$dir/usr" -type l | while read -r l; do
	t=$(readlink "$l")
	case "$t" in /usr/*) ln -sfn "$dir$t" "$l" ;; esac
done

go="$dir/usr/lib/go-1.24/bin/go"
"$go" version | grep -q 'go1\.24' || { echo "kreflect: unable to run $go" >&2; exit 1; }
kc="$dir/usr/bin/kubectl"
"$kc" version --client 2>/dev/null | grep -q 'v1\.32\.' || { echo "kreflect: unable to run $kc as kubectl 1.32" >&2; exit 1; }
for deb in "$apt/debs"/*.deb; do
	dpkg-deb -f "$deb" Package Version | paste -sd' '
done >"$dir/.stamp.tmp"
rm -rf "$apt/debs" "$apt/cache"
mv "$dir/.stamp.tmp" "$dir/.stamp"
echo "  $n packages unpacked; $("$go" version); kubectl $("$kc" version --client 2>/dev/null | sed -n 's/^Client Version: //p')"
