#!/bin/sh
# The gateway installs of config/examples/, run as far as this machine allows:
#  - systemd/kreflect.service: systemd-analyze verify (against the binary and
#    man page `make install` puts in a DESTDIR); its ExecStart run against the
#    test API server under strace, with the paths systemd would give it, and
#    every system call kreflect made inside the unit's SystemCallFilter=
#    (tests/install/syscalls.py);
#  - openwrt/kreflect/files/kreflect.init: start_service with procd's and
#    UCI's functions recorded, and the command it builds run with --once;
#  - openwrt/kreflect/Makefile and buildroot/kreflect/kreflect.mk: the
#    recipes' own prepare, build and install commands on a copy of this tree,
#    through a stand-in for OpenWrt's and Buildroot's make machinery, with the
#    musl cross compilers (aarch64 for OpenWrt, armv7 for Buildroot) and a
#    DESTDIR; the installed binaries run under qemu-user. The downloads are
#    replaced by local files: the mbedTLS source Debian ships (make deps
#    fetched it; its sha256 must be the recipes') and jsmn.h from libjsmn-dev.
#
#   sh tests/install/gateway.sh      (needs build/kreflect, make deps, make test-deps)
#
# The last line is "N passed, N failed"; what it made is in build/test/gateway/.
set -u
cd "$(dirname "$0")/../.." || exit 1
# Not the caller's make flags: the recipes' makes are their own.
unset MAKEFLAGS MFLAGS MAKELEVEL
. tests/install/common.sh

top=$PWD
work=$top/build/test/gateway
ex=config/examples
rm -rf "$work" && mkdir -p "$work" || exit 1
for tool in systemd-analyze strace curl qemu-aarch64 qemu-arm aarch64-linux-musl-gcc arm-linux-musleabihf-gcc; do
	command -v "$tool" >/dev/null || { bad "$tool is missing (make deps; make test-deps)"; finish; }
done
[ -x build/kreflect ] || { bad "build/kreflect is missing: run make"; finish; }
mbedtls_orig=$(ls build/deps/apt/src/mbedtls_*.orig.tar.bz2 2>/dev/null | head -1)
[ -f "$mbedtls_orig" ] || { bad "no mbedTLS source package in build/deps/apt/src: run make deps"; finish; }

start_api "$work/api"
kubeconfig=$work/api/kubeconfig
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- systemd ---------------------------------------------------------------------------------

unit=$ex/systemd/kreflect.service
root=$work/root
make --no-print-directory install DESTDIR="$root" PREFIX=/usr >"$work/install.log" 2>&1 ||
	bad "make install: $(tail -3 "$work/install.log")"
# verify finds the command and the man page of Documentation=; they are in the DESTDIR.
sed "s|/usr/bin/kreflect|$root/usr/bin/kreflect|" "$unit" >"$work/kreflect.service"
out=$(MANPATH=$root/usr/share/man systemd-analyze verify "$work/kreflect.service" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then
	ok "systemd-analyze verify $unit: clean"
else
	bad "systemd-analyze verify $unit exited $rc: $out"
fi
for key in Restart=on-failure DynamicUser=yes StateDirectory=kreflect ProtectSystem=strict \
	NoNewPrivileges=yes RestrictAddressFamilies= SystemCallFilter= CapabilityBoundingSet=; do
	grep -q "^$key" "$unit" || bad "$unit has no $key"
done
# ExecStart as systemd runs it: %d is the credentials directory, StateDirectory
# and RuntimeDirectory are /var/lib/kreflect and /run/kreflect.
cmd=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | sed 's/^ExecStart=//; s/\\$//' | tr '\n\t' '  ')
for f in $(echo "$cmd" | grep -oE -- '--[a-z-]+'); do
	build/kreflect --help | grep -q -- "$f" || bad "ExecStart's $f is not a flag of kreflect --help"
done
mkdir -p "$work/creds" "$work/run" "$work/state" && chmod 0700 "$work/state"
cp "$kubeconfig" "$work/creds/kubeconfig"
port=$(free_port)
cmd=$(echo "$cmd" | sed -e "s|%d|$work/creds|g" -e "s|/run/kreflect|$work/run|g" \
	-e "s|/var/lib/kreflect|$work/state|g" -e "s|127.0.0.1:8081|127.0.0.1:$port|" \
	-e "s|/usr/bin/kreflect|$top/build/kreflect|")
echo "$cmd" >"$work/execstart.cmd"
# shellcheck disable=SC2086
strace -f -qq -o "$work/strace.log" $cmd 2>"$work/execstart.err" &
kr=$!
i=0
until curl -sf -m 5 "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.2; i=$((i + 1)); done
ctl update configmaps edge gateway-config mode=changed
ctl drop-watches
sleep 2
ready=$(curl -s -m 5 "http://127.0.0.1:$port/readyz")
# SIGTERM to kreflect itself (strace's child): strace passes on no signal it gets.
kpid=$(ps -o pid= --ppid "$kr" | tr -d ' ')
[ -n "$kpid" ] && kill -TERM "$kpid"
wait $kr
rc=$?
if [ "$ready" = ok ] && [ $rc -eq 0 ] && [ "$(cat "$work/run/files/mode" 2>/dev/null)" = changed ] &&
	[ -f "$work/run/files/token" ] && [ -f "$work/state/state" ]; then
	ok "the unit's ExecStart: files in RuntimeDirectory, state in StateDirectory, /readyz ok, exit 0 on SIGTERM"
else
	bad "the unit's ExecStart: /readyz '$ready', exit $rc, files: $(ls "$work/run/files" "$work/state" 2>&1 | tr '\n' ' '); $(tail -3 "$work/execstart.err")"
fi
if python3 tests/install/syscalls.py "$unit" "$work/strace.log" >"$work/syscalls.txt" 2>&1; then
	ok "every system call of the run is in the unit's SystemCallFilter ($(head -1 "$work/syscalls.txt" | wc -w) names)"
else
	bad "system calls outside the unit's filter: $(tail -2 "$work/syscalls.txt")"
fi

# --- OpenWrt: the procd init script --------------------------------------------------------------

# start_service with UCI's and procd's functions replaced by ones that record.
owrt=$ex/openwrt/kreflect
mkdir -p "$work/procd"
cat >"$work/procd/env.sh" <<EOF
w=$work/procd
config_load() { echo "config_load \$1" >>"\$w/calls"; }
config_get() {
	case \$3 in
	kubeconfig) v=$kubeconfig ;; namespace) v=edge ;; selector) v=app=gateway ;;
	dir) v=$work/procd/files ;; state_dir) v=$work/procd/state ;; state_interval) v=3600 ;;
	listen) v=127.0.0.1:\$(cat "\$w/port") ;; extra_args) v="--timeout 30" ;; *) v=\$4 ;;
	esac
	eval "\$1=\\\$v"
}
config_get_bool() { eval "\$1=1"; }
config_list_foreach() { for r in configmaps secrets; do "\$3" "\$r"; done; }
chown() { echo "chown \$*" >>"\$w/calls"; }
procd_open_instance() { : >"\$w/command"; echo open >>"\$w/calls"; }
procd_set_param() {
	k=\$1; shift
	if [ "\$k" = command ]; then : >"\$w/command"; for a in "\$@"; do printf '%s\n' "\$a" >>"\$w/command"; done
	else echo "param \$k \$*" >>"\$w/calls"; fi
}
procd_append_param() { shift; for a in "\$@"; do printf '%s\n' "\$a" >>"\$w/command"; done; }
procd_close_instance() { echo close >>"\$w/calls"; }
EOF
free_port >"$work/procd/port"
( . "$work/procd/env.sh" && . "$owrt/files/kreflect.init" && start_service ) >"$work/procd/out" 2>&1 ||
	bad "start_service failed: $(tail -3 "$work/procd/out")"
if grep -qx 'param user kreflect' "$work/procd/calls" && grep -qx 'param respawn 3600 5 5' "$work/procd/calls" &&
	grep -qx close "$work/procd/calls" && [ "$(head -1 "$work/procd/command")" = /usr/bin/kreflect ]; then
	ok "procd init: an instance of /usr/bin/kreflect as user kreflect, respawned"
else
	bad "procd init: $(tr '\n' ' ' <"$work/procd/calls"); command $(head -1 "$work/procd/command")"
fi
# The command it built, with --once: the files of the selected objects, exit 0.
set --
while IFS= read -r a; do set -- "$@" "$a"; done <"$work/procd/command"
shift
build/kreflect "$@" --once >"$work/procd/once.out" 2>"$work/procd/once.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(cat "$work/procd/files/level" 2>/dev/null)" = 2 ] && [ -f "$work/procd/files/token" ] &&
	[ ! -e "$work/procd/files/x" ]; then
	ok "procd init: its command line ($*) mirrors the selected objects (--once)"
else
	bad "procd init's command ($*) exited $rc: $(tail -2 "$work/procd/once.err")"
fi
sh -n "$owrt/files/kreflect.init" || bad "$owrt/files/kreflect.init: sh -n"

# --- the package recipes ---------------------------------------------------------------------

# Downloads replaced by local files.
dl=$work/dl
mkdir -p "$dl/jsmn-1.1.0"
cp "$mbedtls_orig" "$dl/"
cp /usr/include/jsmn.h "$dl/jsmn-1.1.0/"
tar -C "$dl" -czf "$dl/jsmn_1.1.0.orig.tar.gz" jsmn-1.1.0
sum=$(sha256sum "$mbedtls_orig" | cut -d' ' -f1)
file=${mbedtls_orig##*/}
ver=$(echo "$file" | sed 's/^mbedtls_\(.*\)\.orig\..*/\1/')
for r in "$owrt/Makefile" "$ex/buildroot/kreflect/kreflect.hash"; do
	if grep -q "$sum" "$r" && grep -qE "mbedtls_$ver|MBEDTLS_VERSION:=$ver" "$r"; then
		ok "$r: mbedTLS is $file, sha256 $sum (as Debian's signed .dsc)"
	else
		bad "$r does not name $file with sha256 $sum"
	fi
done
# The source: this tree as a recipe would unpack it (the files git knows, no build/).
src_copy() {
	mkdir -p "$1" && git ls-files -co --exclude-standard | grep -v '^build/' | tar -cf - -T - | tar -C "$1" -xf -
}

# OpenWrt: rules.mk and package.mk stand-ins that run the recipe's Build/Prepare,
# Build/Compile and Package/kreflect/install in the order OpenWrt does.
wt=$work/openwrt
mkdir -p "$wt/top/include" "$wt/ipkg"
src_copy "$wt/src"
cat >"$wt/top/rules.mk" <<EOF
INCLUDE_DIR:=\$(TOPDIR)/include
BUILD_DIR:=$wt/build
DL_DIR:=$dl
TAR:=tar
INSTALL_DIR:=install -d -m0755
INSTALL_BIN:=install -m0755
INSTALL_CONF:=install -m0600
TARGET_CC:=aarch64-linux-musl-gcc
TARGET_CROSS:=aarch64-linux-gnu-
CONFIG_aarch64:=y
EOF
cat >"$wt/top/include/package.mk" <<EOF
PKG_BUILD_DIR:=\$(BUILD_DIR)/\$(PKG_NAME)-\$(PKG_VERSION)
PKG_INSTALL_DIR:=\$(PKG_BUILD_DIR)/ipkg-install
define Build/Prepare/Default
	rm -rf \$(PKG_BUILD_DIR) && mkdir -p \$(BUILD_DIR) && cp -a $wt/src \$(PKG_BUILD_DIR)
endef
define Download
\$(eval \$(Download/\$(1)))
DOWNLOADED+=\$(FILE)
endef
define BuildPackage
harness: \$(PKG_BUILD_DIR)/.harness
\$(PKG_BUILD_DIR)/.harness:
	for f in \$\$(DOWNLOADED); do test -f \$(DL_DIR)/\$\$\$\$f || exit 1; done
	\$\$(call Build/Prepare)
	\$\$(call Build/Compile)
	\$\$(call Package/\$(1)/install,$wt/ipkg)
endef
EOF
(cd "$owrt" && make --no-print-directory TOPDIR="$wt/top" -f Makefile harness) >"$wt/build.log" 2>&1
rc=$?
b=$wt/ipkg/usr/bin/kreflect
if [ $rc -eq 0 ] && file "$b" | grep -q 'ARM aarch64.*statically linked' &&
	qemu-aarch64 "$b" --version | grep -q 'target: aarch64' && [ -x "$wt/ipkg/etc/init.d/kreflect" ] &&
	[ -f "$wt/ipkg/etc/config/kreflect" ]; then
	ok "OpenWrt recipe (aarch64): prepare, compile, install: $(qemu-aarch64 "$b" --version | head -1), init script, UCI config"
else
	bad "OpenWrt recipe exited $rc: $(grep -E 'Error|error' "$wt/build.log" | head -3) $(tail -2 "$wt/build.log")"
fi

# Buildroot: the variables its package infrastructure gives a package, and its
# steps in order: extract hooks, build, staging, target, the systemd unit.
br=$work/buildroot
mkdir -p "$br/staging" "$br/target"
# The source directory Buildroot names after the recipe's version.
BR_VERSION=$(sed -n 's/^KREFLECT_VERSION = v//p' config/examples/buildroot/kreflect/kreflect.mk)
src_copy "$br/kreflect-v$BR_VERSION"
cat >"$br/harness.mk" <<EOF
BR2_arm:=y
BR2_ARM_CPU_ARMV7A:=y
TARGET_CC:=arm-linux-musleabihf-gcc
TARGET_CROSS:=arm-linux-gnueabihf-
TARGET_DIR:=$br/target
STAGING_DIR:=$br/staging
KREFLECT_DL_DIR:=$dl
TARGET_MAKE_ENV:=PATH=\$(PATH)
TAR:=tar
INSTALL:=install
include $top/$ex/buildroot/kreflect/kreflect.mk
harness: $br/kreflect-v$BR_VERSION/.harness
$br/kreflect-v$BR_VERSION/.harness:
	\$(\$(strip \$(KREFLECT_POST_EXTRACT_HOOKS)))
	\$(KREFLECT_BUILD_CMDS)
	\$(KREFLECT_INSTALL_STAGING_CMDS)
	\$(KREFLECT_INSTALL_TARGET_CMDS)
	\$(KREFLECT_INSTALL_INIT_SYSTEMD)
EOF
make --no-print-directory -f "$br/harness.mk" harness >"$br/build.log" 2>&1
rc=$?
b=$br/target/usr/bin/kreflect
if [ $rc -eq 0 ] && file "$b" | grep -q 'ARM, EABI5.*statically linked' &&
	qemu-arm "$b" --version | grep -q 'target: armv7' &&
	[ -f "$br/target/usr/lib/systemd/system/kreflect.service" ] &&
	grep -q "^prefix=/usr$" "$br/staging/usr/lib/pkgconfig/kreflect.pc" &&
	[ -f "$br/staging/usr/lib/libkreflect.a" ] && [ -f "$br/staging/usr/include/kreflect.h" ]; then
	ok "Buildroot recipe (armv7): build, staging (header, archives, .pc), target: $(qemu-arm "$b" --version | head -1), unit"
else
	bad "Buildroot recipe exited $rc: $(grep -E 'Error|error' "$br/build.log" | head -3) $(tail -2 "$br/build.log")"
fi
grep -q '^config BR2_PACKAGE_KREFLECT$' "$ex/buildroot/kreflect/Config.in" || bad "Config.in has no BR2_PACKAGE_KREFLECT"
finish
