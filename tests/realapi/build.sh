#!/bin/sh
# Fetches and builds the real API server for tests/realapi/ (see its README):
# Debian sid's Go 1.27 and k8s.io/apiserver with the closure of their golang-*
# Depends, and trixie's etcd-server and etcd-client, through a private apt
# configuration (tests/peers/debs.sh), never over the system.
#
#   sh tests/realapi/build.sh CACHE [MIRROR]
#
# Everything lands in CACHE/<key>/, outside the clone, where <key> is a hash of
# the exact package versions: a second run with the same versions reuses the
# unpacked packages, the Go build cache and the server; new versions build
# from scratch beside them. CACHE/<key>/versions.txt lists the versions, and
# build/realapi/ in the clone links to what the suite runs. If the server no
# longer builds, this fails naming the versions.
set -eu
cache=${1:?usage: build.sh CACHE [MIRROR]}
mirror=${2:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
clone=$(cd "$here/../.." && pwd)
. "$clone/tests/peers/debs.sh"
sid_roots="golang-1.27-go golang-1.27-src golang-k8s-apiserver-dev golang-k8s-api-dev
	golang-k8s-apimachinery-dev golang-k8s-client-go-dev golang-k8s-component-base-dev
	golang-etcd-server-dev"
trixie_roots="etcd-server etcd-client"

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
debs_setup "$cache/apt-sid" sid "$mirror"
# shellcheck disable=SC2086
sid=$(debs_closure '^golang-' $sid_roots)
sid_opts=$debs_opts
debs_setup "$cache/apt-trixie" trixie "$mirror"
# shellcheck disable=SC2086
trixie=$(debs_closure '^etcd-(server|client)$' $trixie_roots)
trixie_opts=$debs_opts
versions=$( (echo "$sid" | sed 's/^/sid /'; echo "$trixie" | sed 's/^/trixie /') )
key=$(echo "$versions" | sha256sum | cut -c1-16)
dir="$cache/$key"
echo "  REALAPI $(echo "$versions" | wc -l) packages, key $key, in $dir"
echo "$versions" | grep -E ' (golang-1\.27-go|golang-k8s-apiserver-dev|golang-k8s-api-dev|golang-k8s-client-go-dev|golang-etcd-server-dev|etcd-server|etcd-client) ' |
	sed 's/^/          /'

if [ ! -f "$dir/versions.txt" ]; then
	echo "  FETCH   into $dir/root"
	rm -rf "$dir/root"
	debs_apt="$cache/apt-sid" debs_opts=$sid_opts
	# shellcheck disable=SC2086
	debs_unpack "$dir/root" $(echo "$sid" | sed 's/ /=/')
	debs_apt="$cache/apt-trixie" debs_opts=$trixie_opts
	# shellcheck disable=SC2086
	debs_unpack "$dir/root" $(echo "$trixie" | sed 's/ /=/')
	echo "$versions" >"$dir/versions.txt"
fi

# The server: rebuilt when its source changes (the Go build cache keeps it quick).
src="$here/server"
srchash=$(cat "$src"/*.go | sha256sum | cut -c1-12)
bin="$dir/bin/kreflect-realapi-server-$srchash"
goroot="$dir/root/usr/lib/go-1.27"
if [ ! -x "$bin" ]; then
	echo "  GO      $bin"
	mkdir -p "$dir/gopath/src/kreflect" "$dir/gocache" "$dir/bin"
	rm -rf "$dir/gopath/src/kreflect/realapi-server"
	cp -r "$src" "$dir/gopath/src/kreflect/realapi-server"
	if ! env GOROOT="$goroot" GOPATH="$dir/gopath:$dir/root/usr/share/gocode" \
		GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0 \
		GOCACHE="$dir/gocache" HOME="$dir" \
		"$goroot/bin/go" build -trimpath -ldflags='-s -w' -o "$bin.tmp" kreflect/realapi-server; then
		echo "kreflect: the real API server does not build with these packages:" >&2
		sed 's/^/  /' "$dir/versions.txt" >&2
		exit 1
	fi
	mv -f "$bin.tmp" "$bin"
	cp "$dir/versions.txt" "$bin.versions.txt"
fi
mkdir -p "$clone/build/realapi"
ln -sfn "$bin" "$clone/build/realapi/server"
ln -sfn "$dir/versions.txt" "$clone/build/realapi/versions.txt"
ln -sfn "$dir/root/usr/bin" "$clone/build/realapi/bin"
"$dir/root/usr/bin/etcd" --version | head -1
echo "  REALAPI server $bin"
