#!/bin/sh
# The man page and `make install`:
#  - every flag of `kreflect --help` has an entry in src/kreflect.1 and every
#    entry is a flag of --help; every metric of src/serve.c, every path of the
#    endpoint and every environment variable of --help is in the page; its
#    version is the binary's; groff and man render it without one warning;
#  - `make install DESTDIR=... PREFIX=/usr` puts binary, man page, header,
#    archives and pkg-config file in place; the installed binary runs, man
#    reads the installed page, and a small C program (tests/install/app.c)
#    builds with the installed .pc alone and runs.
#
#   sh tests/install/run.sh       (needs build/kreflect; groff and man-db)
#
# The last line is "N passed, N failed"; what it made is in build/test/install/.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/install/common.sh

bin=build/kreflect
page=src/kreflect.1
work=build/test/install
rm -rf "$work" && mkdir -p "$work" || exit 1
for tool in groff man pkg-config x86_64-linux-musl-gcc; do
	command -v "$tool" >/dev/null || { bad "$tool is missing (make test-deps)"; finish; }
done
[ -x "$bin" ] || { bad "$bin is missing: run make"; finish; }

# --- the man page against --help --------------------------------------------------------------

"$bin" --help >"$work/help.txt" || bad "$bin --help failed"
# --help: every --long word anywhere, and the -x of "  -x, --long" lines.
{
	grep -oE -- '--[a-z][a-z0-9-]*' "$work/help.txt"
	grep -oE '^ +-[a-zA-Z],' "$work/help.txt" | tr -d ' ,'
} | sort -u >"$work/help.flags"
# The page: the flags of each entry's heading (the line after .TP or .TQ).
awk '/^\.T[PQ]$/ { getline; print }' "$page" | sed 's/\\-/-/g' |
	grep -oE -- '(^|[ "])--?[a-zA-Z][a-z0-9-]*' | tr -d ' "' | sort -u >"$work/page.flags"
n=$(wc -l <"$work/help.flags")
missing=$(comm -23 "$work/help.flags" "$work/page.flags" | tr '\n' ' ')
extra=$(comm -13 "$work/help.flags" "$work/page.flags" | tr '\n' ' ')
if [ "$n" -gt 40 ] && [ -z "$missing" ]; then
	ok "each of the $n flags of --help has an entry in the man page"
else
	bad "flags of --help ($n) without an entry in $page: $missing"
fi
if [ -z "$extra" ]; then
	ok "each entry of the man page is a flag of --help"
else
	bad "entries of $page that --help does not have: $extra"
fi

# The environment variables --help lists (its "environment:" section).
vars=$(sed -n '/^environment:/,/^$/p' "$work/help.txt" | grep -oE '^  [A-Z_]+(, [A-Za-z_]+)*' |
	tr ',' '\n' | tr -d ' ' | sort -u)
# in_page WHAT MIN PATTERN WORD...: each WORD matches PATTERN (WORD in place of
# @) in the page, and there are at least MIN of them.
in_page() {
	what=$1 min=$2 pat=$3
	shift 3
	lost=""
	for w in "$@"; do grep -q "$(echo "$pat" | sed "s|@|$w|")" "$page" || lost="$lost $w"; done
	if [ $# -ge "$min" ] && [ -z "$lost" ]; then
		ok "the $# $what are in the man page"
	else
		bad "$what missing from $page ($# found):$lost"
	fi
}
# shellcheck disable=SC2086
in_page "environment variables of --help" 5 @ $vars
# Every metric the endpoint serves and every path it answers itself.
metrics=$(grep -oE '"kreflect_[a-z_]+' src/serve.c | tr -d '"' | sort -u)
# shellcheck disable=SC2086
in_page "metrics of src/serve.c" 20 @ $metrics
paths=$(grep -oE 'strcmp\(path, "/[a-z]+"\)' src/serve.c | grep -oE '/[a-z]+' | sort -u)
# shellcheck disable=SC2086
in_page "paths the endpoint answers itself ($(echo $paths))" 5 '^\.B.* @' $paths
for code in 0 1 2; do
	grep -q "^\.B $code\$" "$page" || bad "exit code $code has no entry in $page"
done

version=$(sed -n 's/^#define KR_VERSION "\(.*\)"/\1/p' src/kreflect.h)
if grep -q "^\.TH KREFLECT 1 \"[0-9-]*\" \"kreflect $version\"" "$page"; then
	ok "the page is of kreflect $version"
else
	bad "the .TH line does not name kreflect $version: $(grep '^\.TH' "$page")"
fi

# Rendered without a warning, by groff and by man as a user reads it.
warn=$(groff -ww -z -man "$page" 2>&1)
if [ -z "$warn" ]; then ok "groff -ww -man: no warning"; else bad "groff -ww -man: $warn"; fi
MANWIDTH=80 man --warnings -l "$page" >"$work/page.txt" 2>"$work/man.err"
rc=$?
if [ $rc -eq 0 ] && [ ! -s "$work/man.err" ] && grep -q '^EXIT STATUS' "$work/page.txt" &&
	[ "$(awk 'length > 80' "$work/page.txt" | wc -l)" -eq 0 ]; then
	ok "man --warnings -l: no warning, $(wc -l <"$work/page.txt") lines within 80 columns"
else
	bad "man --warnings -l exited $rc: $(head -c 400 "$work/man.err")"
fi

# --- make install ------------------------------------------------------------------------------

root=$PWD/$work/root
make --no-print-directory install DESTDIR="$root" PREFIX=/usr TARGET=x86_64 >"$work/install.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "make install DESTDIR=... PREFIX=/usr"; else bad "make install exited $rc: $(tail -3 "$work/install.log")"; fi
for f in bin/kreflect:755 share/man/man1/kreflect.1:644 include/kreflect.h:644 lib/libkreflect.a:644 \
	lib/libkreflect-mbedtls.a:644 lib/pkgconfig/kreflect.pc:644; do
	p=$root/usr/${f%%:*}
	m=$(stat -c %a "$p" 2>/dev/null)
	[ "$m" = "${f##*:}" ] || bad "$p: mode '$m', want ${f##*:}"
done
if cmp -s "$root/usr/bin/kreflect" build/x86_64/kreflect; then
	ok "the installed binary is the x86_64 build's"
else
	bad "$root/usr/bin/kreflect differs from build/x86_64/kreflect"
fi
v=$("$root/usr/bin/kreflect" --version 2>&1)
case $v in "kreflect $version"*) ok "the installed binary runs: $(echo "$v" | head -1)" ;;
*) bad "the installed binary's --version: $v" ;; esac
if MANWIDTH=80 man --warnings -l "$root/usr/share/man/man1/kreflect.1" 2>&1 >/dev/null | grep -q . ||
	! MANWIDTH=80 man -l "$root/usr/share/man/man1/kreflect.1" 2>/dev/null | grep -q -- '--listen-token-file'; then
	bad "man -l of the installed page"
else
	ok "man -l reads the installed page"
fi
# The .pc names PREFIX, not DESTDIR: the sysroot variable puts DESTDIR in front.
pc=$root/usr/lib/pkgconfig/kreflect.pc
if grep -q "^prefix=/usr$" "$pc" && ! grep -q "$root" "$pc"; then
	ok "the installed kreflect.pc names /usr, not the DESTDIR"
else
	bad "kreflect.pc: $(tr '\n' ' ' <"$pc")"
fi
flags=$(PKG_CONFIG_LIBDIR="$root/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" \
	pkg-config --cflags --libs kreflect 2>&1)
# shellcheck disable=SC2086
if x86_64-linux-musl-gcc -std=c11 -Wall -Wextra -Werror -static -o "$work/app" tests/install/app.c $flags \
	>"$work/app.log" 2>&1; then
	ok "a C program builds with the installed pkg-config file alone ($flags)"
else
	bad "the C program did not build with '$flags': $(head -5 "$work/app.log")"
fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=install-test \
	-keyout "$work/ca.key" -out "$work/ca.crt" >"$work/openssl.log" 2>&1 || bad "openssl: $(tail -2 "$work/openssl.log")"
out=$("$work/app" "$work/ca.crt" 2>&1)
if [ "$out" = "app: x86_64 edge-config 1" ]; then
	ok "it runs against the installed library: $out"
else
	bad "the installed library's program said: $out"
fi
finish
