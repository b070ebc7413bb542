#!/usr/bin/env python3
"""The decision table in src/reflector.c (kr_reflect_rules) names, for each
row, the test that drives the test API server into it: an e2e scenario
(tests/e2e/test_e2e.py), "sim NAME", a sim regression (tests/sim/regress.c),
or "sim seed N", a random schedule that reaches it. Checks that every row
names one and that each named test exists; rows that say "test: none yet"
are listed as gaps and fail.
The last line is "N passed, N failed"."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def rows(src):
    """(comment, row text) for each row of kr_reflect_rules."""
    start = src.index("const struct kr_rule kr_reflect_rules[] = {")
    body = src[start:src.index("\n};", start)]
    out = []
    comment = None
    for line in body.splitlines()[1:]:
        s = line.strip()
        if s.startswith("/*"):
            comment = s
        elif s.startswith("{ "):
            out.append((comment, s))
            comment = None
    return out


def main():
    src = read("src/reflector.c")
    scenarios = set(re.findall(r'@scenario\("([^"]+)"', read("tests/e2e/test_e2e.py")))
    regressions = set(re.findall(r'^\s*\{ "([^"]+)", "', read("tests/sim/regress.c"), re.M))
    passed = failed = 0
    table = rows(src)
    if len(table) < 2:
        print("FAIL the table: %d rows found in src/reflector.c" % len(table))
        print("0 passed, 1 failed")
        return 1
    for comment, row in table:
        what = re.match(r"\{ (\w+), (KR_OC_\w+)", row)
        name = "%s %s" % (what.group(1), what.group(2)) if what else row[:40]
        m = re.search(r"test: (.+?) \*/", comment or "")
        if not m:
            failed += 1
            print("FAIL %s: no 'test:' in the comment before the row" % name)
            continue
        test = m.group(1)
        if test == "none yet":
            failed += 1
            print("FAIL %s: no test drives the server into this row yet" % name)
        elif re.fullmatch(r"sim seed [1-9][0-9]*", test):
            # A random schedule reaches the row (build/sim/sim --seed N -v shows it); no
            # directed regression does yet.
            passed += 1
            print("ok %s: %s (a random schedule, not a directed test)" % (name, test))
        elif test.startswith("sim ") and test[4:] in regressions:
            passed += 1
            print("ok %s: sim regression %s" % (name, test[4:]))
        elif not test.startswith("sim ") and test in scenarios:
            passed += 1
            print("ok %s: e2e scenario %s" % (name, test))
        else:
            failed += 1
            print("FAIL %s: the test it names, %s, does not exist" % (name, test))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
