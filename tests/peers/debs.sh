# Shared by tests/peers/fetch.sh and tests/realapi/fetch.sh (sourced, not run):
# Debian binary packages through a private apt configuration with an empty dpkg
# status, never over the system. apt reads the suite's signed Release file and
# apt-get download checks each .deb against it.
#
#   debs_setup APTDIR SUITE MIRROR   the configuration; sets "$@" to apt's options
#   debs_closure FILTER ROOTS...     prints "package version" for every package
#                                    reached through Depends/Pre-Depends whose
#                                    name matches the extended regex FILTER
#   debs_unpack DEST PKG=VER...      downloads, checks, unpacks under DEST and
#                                    points absolute links into /usr inside DEST
# Each fails with a sentence naming what is missing.

debs_setup() {
	debs_apt=$1
	debs_arch=$(dpkg --print-architecture)
	rm -rf "$debs_apt"
	mkdir -p "$debs_apt/lists/partial" "$debs_apt/cache/archives/partial" "$debs_apt/debs"
	: >"$debs_apt/status"
	echo "deb [arch=$debs_arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $3 $2 main" \
		>"$debs_apt/sources.list"
	debs_opts="-o Dir::Etc::SourceList=$debs_apt/sources.list
		-o Dir::Etc::SourceParts=/dev/null
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
		-o Dir::State::Lists=$debs_apt/lists -o Dir::State::status=$debs_apt/status
		-o Dir::Cache=$debs_apt/cache
		-o APT::Architecture=$debs_arch -o APT::Architectures=$debs_arch
		-o Debug::NoLocking=1 -o APT::Sandbox::User=root"
	# shellcheck disable=SC2086
	apt-get $debs_opts -qq update || { echo "kreflect: unable to read Debian $2 from $3" >&2; return 1; }
}

debs_closure() {
	filter=$1
	shift
	# shellcheck disable=SC2086
	apt-cache $debs_opts depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances "$@" >"$debs_apt/closure.txt" || return 1
	pkgs=$(grep -E '^[a-z0-9]' "$debs_apt/closure.txt" | grep -E "$filter" | sort -u)
	for r in "$@"; do
		r=${r%%=*}
		echo "$pkgs" | grep -qx "$r" || { echo "kreflect: unable to fetch $r: the suite does not have it" >&2; return 1; }
	done
	# One policy call for all of them (one per package reloads the cache each time).
	# shellcheck disable=SC2086
	apt-cache $debs_opts policy $pkgs |
		awk '/^[^ ]/ { p = $1; sub(/:$/, "", p) } /^  Candidate: / { print p, $2 }'
}

debs_unpack() {
	dest=$1
	shift
	mkdir -p "$dest"
	# shellcheck disable=SC2086
	(cd "$debs_apt/debs" && apt-get $debs_opts -qq download "$@") || return 1
	for deb in "$debs_apt/debs"/*.deb; do
		dpkg -x "$deb" "$dest" || return 1
	done
	find "$dest/usr" -type l | while read -r l; do
		t=$(readlink "$l")
		case "$t" in /usr/*) ln -sfn "$dest$t" "$l" ;; esac
	done
	for deb in "$debs_apt/debs"/*.deb; do
		dpkg-deb -f "$deb" Package Version | paste -sd' '
	done >"$debs_apt/unpacked.txt"
	rm -rf "$debs_apt/debs"/*.deb "$debs_apt/cache"
}
