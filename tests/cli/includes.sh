#!/bin/sh
# main.c is a user of the library: it includes kreflect.h and the headers
# below, nothing else of src/ (issue 30):
#
#  1. every #include "..." of src/main.c is in ALLOWED;
#  2. main.c compiles with an include path holding only copies of the ALLOWED
#     headers (no -Isrc): "main.c needs nothing but the allowed headers";
#  3. the check can fail: main.c with one more header of src/ compiles with
#     -Isrc and not on the restricted path.
#
#   sh tests/cli/includes.sh        (after make: the generated usage_gz.h)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/result.sh

# Allowed, and why:
#  kreflect.h         the library's API
#  port.h             the process: memory reserved at start-up, children reaped and
#                     signalled, signal names, files read, writes, the clock; the
#                     platform layer a firmware's own main would use too (port/)
#  fmt.h              formatting and number parsing in place of the C library's
#                     printf family and strtol, which `make lint` bans in src/ (text
#                     helpers with no client state)
#  kreflect_config.h  the build's configuration (config/): the KR_WITH_* features and
#                     capacities --version prints and the flags are checked against
#  help.h usage_gz.h  the CLI's own --help, stored compressed (src/help.c, generated)
#  sidecar_env.h      the CLI's own --k8s-sidecar: k8s-sidecar's environment read into
#                     kreflect.h's resource specs, kr_dir_config and kr_hooks_config,
#                     the structs the flags fill (src/sidecar_env.c); it includes only
#                     kreflect.h and kreflect_config.h
ALLOWED="kreflect.h port.h fmt.h kreflect_config.h help.h usage_gz.h sidecar_env.h"

included=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' src/main.c)
if [ -z "$included" ]; then
	bad "no #include \"...\" found in src/main.c"
fi

outside=""
for h in $included; do
	case " $ALLOWED " in
	*" $h "*) ;;
	*) outside="$outside $h" ;;
	esac
done
if [ -z "$outside" ]; then
	ok "main.c includes only allowed headers ($(echo "$included" | wc -l))"
else
	bad "main.c includes headers that are not allowed:$outside (use kreflect.h)"
fi

# The compile: the allowed headers, copied flat (the project's include
# directories are flat too); mbedTLS's own tree as a system one.
cc=x86_64-linux-musl-gcc
gen=build/x86_64/gen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags="-isystem build/deps/mbedtls/include -DMBEDTLS_CONFIG_FILE=\"$PWD/config/mbedtls_config.h\"
-I$PWD/port/crypto -D_POSIX_C_SOURCE=200809L -DKR_TARGET=\"x86_64\" -DKR_PORT_posix=1"
copy=""
for h in $ALLOWED; do
	for d in src port config "$gen"; do
		[ -f "$d/$h" ] && copy="$copy $d/$h"
	done
done
mkdir "$tmp/inc"
for f in $copy; do cp "$f" "$tmp/inc/"; done
if [ ! -f "$gen/usage_gz.h" ]; then
	bad "$gen/usage_gz.h is not built (make build/kreflect first)"
else
	# shellcheck disable=SC2086
	if $cc -std=c11 -Wall -Werror -I"$tmp/inc" $flags -fsyntax-only src/main.c 2>"$tmp/cc.err"; then
		ok "main.c compiles with only the $(ls "$tmp/inc" | wc -l) allowed headers on its include path"
	else
		bad "main.c does not compile with only the allowed headers: $(grep -m3 error "$tmp/cc.err")"
	fi
fi

# The check must be able to fail: main.c with one more header of src/, one not
# copied, compiles with -Isrc and not with the restricted path.
probe=""
for f in src/*.h; do
	[ -f "$tmp/inc/${f#src/}" ] || { probe=${f#src/}; break; }
done
if [ -z "$probe" ]; then
	bad "every header of src/ is on the restricted include path: it restricts nothing"
else
	sed "s/^#include \"kreflect.h\"\$/#include \"kreflect.h\"\n#include \"$probe\"/" src/main.c >"$tmp/main_probe.c"
	# shellcheck disable=SC2086
	if ! $cc -std=c11 -Iconfig -Iport -Isrc -Ibuild/include -I"$gen" $flags -fsyntax-only "$tmp/main_probe.c" 2>/dev/null; then
		bad "main.c with $probe does not compile even with -Isrc: the probe proves nothing"
	elif $cc -std=c11 -I"$tmp/inc" $flags -fsyntax-only "$tmp/main_probe.c" 2>/dev/null; then
		bad "main.c including $probe compiled on the restricted include path"
	else
		ok "main.c including $probe (not allowed) fails on the restricted include path"
	fi
fi

result
