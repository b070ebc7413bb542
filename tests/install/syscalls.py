#!/usr/bin/env python3
"""Every system call kreflect made (strace -f output) against a unit's
SystemCallFilter= allow list, expanded by systemd-analyze.

    python3 tests/install/syscalls.py UNIT STRACE_LOG

Counts the calls of kreflect's own processes: a child's calls after its
execve belong to the program it ran, not to kreflect. Prints the calls seen
and any outside the list; exit 0 when there are none, 1 otherwise.
"""

import re
import subprocess
import sys

# Allowed whatever the list says (systemd.exec(5), SystemCallFilter=).
IMPLICIT = {"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn",
            "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep",
            "clock_nanosleep"}


def expand(names, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if not n.startswith("@"):
            out.add(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        r = subprocess.run(["systemd-analyze", "syscall-filter", n], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("systemd-analyze syscall-filter %s: %s" % (n, r.stderr.strip()))
        members = [ln.strip() for ln in r.stdout.splitlines()[1:]
                   if ln.strip() and not ln.strip().startswith("#")]
        out |= expand(members, seen)
    return out


def allow_list(unit):
    names = []
    for ln in open(unit):
        m = re.match(r"^SystemCallFilter=(.*)$", ln.strip())
        if m:
            if m.group(1).startswith("~"):
                sys.exit("%s: a deny list (~): this check reads allow lists" % unit)
            names += m.group(1).split()
    if not names:
        sys.exit("%s: no SystemCallFilter=" % unit)
    return expand(names) | IMPLICIT


def calls(log):
    line_re = re.compile(r"^(\d+)\s+(?:<\.\.\. )?(\w+)[( ]")
    execed, seen, first = set(), set(), None
    for ln in open(log, errors="replace"):
        m = line_re.match(ln)
        if not m:
            continue
        pid, name = m.groups()
        if first is None:
            first = pid
        if pid in execed:
            continue
        if name == "execve" and pid != first and "= 0" in ln:
            execed.add(pid)
        seen.add(name)
    return seen


def main():
    unit, log = sys.argv[1], sys.argv[2]
    allowed = allow_list(unit)
    used = calls(log)
    outside = sorted(used - allowed)
    print("calls: %s" % " ".join(sorted(used)))
    print("allowed by the unit: %d names" % len(allowed))
    if outside:
        print("outside the unit's SystemCallFilter: %s" % " ".join(outside))
        return 1
    return 0 if len(used) > 15 else 1


if __name__ == "__main__":
    sys.exit(main())
