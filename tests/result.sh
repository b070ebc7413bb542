# shellcheck shell=sh
# Sourced by the shell suites that need no more than this: the counters, a line
# per check, and the last line, "N passed, N failed" (result's status says
# whether all passed). Run from the top of the tree.
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
result() {
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
