#!/usr/bin/env python3
"""Every flag's parsing, pinned: exit code, stdout and stderr of kreflect on
each flag's bad values, bounds, missing values, "--flag=value" and short
forms, each followed by an unknown flag so that a value accepted is seen to
be accepted (the run stops at the unknown flag with exit 2, before any
connection). The expected answers are in tests/cli/expected.txt. Also: the
flag table's rows in src/main.c and the flags --help names are the same set
(the help text is hand-laid, the table is not generated from it).

    python3 tests/cli/run.py [TARGET]           check (x86_64: build/kreflect)
    python3 tests/cli/run.py [TARGET] --update  write expected.txt from the binary

--update is for a deliberate change of a message; review its diff.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXPECTED = os.path.join(ROOT, "tests", "cli", "expected.txt")
END = "--zz-end"   # an unknown flag: everything before it was parsed and accepted

# Flags taking a value and the values to try: bounds, one below and above, junk.
VALUED = {
    "--kubeconfig": ["", "/nonexistent"],
    "--context": ["", "c"],
    "--server": ["", "https://127.0.0.1:1"],
    "--token-file": ["", "/t"],
    "--certificate-authority": ["", "/ca"],
    "--client-certificate": ["", "/c"],
    "--client-key": ["", "/k"],
    "--namespace": ["", "ns", "n" * 63, "n" * 64],
    "--selector": ["", "a=b", "s" * 511, "s" * 512],
    "--field-selector": ["", "metadata.name=x", "s" * 511, "s" * 512],
    "--output": ["", "jsonl", "none", "yaml"],
    "--watch-list": ["", "auto", "on", "off", "maybe"],
    "--gzip": ["", "on", "off", "yes"],
    "--page-size": ["", "0", "1", "100000", "100001", "x", "-1"],
    "--resync": ["", "-1", "0", "86400", "999999999", "x"],
    "--initial-events-timeout": ["", "0", "1", "3600", "3601"],
    "--dir": ["", "/tmp/x"],
    "--dir-layout": ["", "flat", "object", "tree"],
    "--dir-sync": ["", "batch", "each", "all"],
    "--dir-annotation": ["", "a/b"],
    "--file-mode": ["", "0640", "07777", "010000", "8", "-1", "0x1"],
    "--secret-file-mode": ["", "0600", "07777", "010000", "9"],
    "--exec": ["", "/bin/true"],
    "--signal": ["", "HUP", "HUP:", ":1", "HUP:1", "HUP:0", "HUP:x", "HUP:@", "HUP:@/p",
                 "NOPE:1", "ABCDEFGHIJKLMNOPQ:1", "USR1:2147483647", "USR1:2147483648"],
    "--http-post": ["", "http://127.0.0.1:9/"],
    "--child-signal": ["", "HUP", "TERM", "NOPE"],
    "--on-change": ["", "signal", "restart", "reload"],
    "--grace": ["", "-1", "0", "3600", "3601"],
    "--state-dir": ["", "/s", "p" * 200, "p" * 5000],
    "--state-interval": ["", "0", "1", "86400", "86401"],
    "--state-sync": ["", "child", "inline", "fork"],
    "--max-stale": ["", "-1", "0", "315360000", "315360001", "x"],
    "--debounce": ["", "-1", "0", "3600000", "3600001"],
    "--watch-idle-timeout": ["", "0", "1", "86400", "86401"],
    "--listen": ["", "127.0.0.1:1"],
    "--listen-token-file": ["", "/t"],
    "--listen-cert-file": ["", "/c"],
    "--listen-key-file": ["", "/k"],
    "--listen-client-ca-file": ["", "/ca"],
    "--listen-access-file": ["", "/a"],
    "--listen-max-conns": ["", "0", "1", "512", "513", "100000"],
    "--listen-tls-sessions": ["", "0", "1", "512", "513"],
    "--readyz-max-silence": ["", "0", "1", "86400", "86401"],
    "--listen-idle-timeout": ["", "0", "1", "3600", "3601"],
    "--listen-bookmark-interval": ["", "0", "1", "3600", "3601"],
    "--sandbox": ["", "auto", "on", "off", "strict"],
    "--user": ["", "root"],
    "--group": ["", "root"],
    "--timeout": ["", "0", "1", "86400", "86401", "abc"],
    "--verbosity": ["", "-1", "0", "3", "4", "9"],
    "--max-objects": ["", "0", "1", "1048576", "1048577"],
    "--arena-bytes": ["", "127K", "128K", "3G", "2G", "10x", "1KB", "131072", "k"],
    "--memory": ["", "255K", "256K", "1KB", "512K", "2G", "3G"],
}
SHORT = {"-n": "--namespace", "-l": "--selector", "-o": "--output", "-v": "--verbosity"}
SWITCHES = ["--insecure-skip-tls-verify", "-A", "--all-namespaces", "--keep-managed-fields", "--once",
            "--serve-secrets", "--listen-health-only", "--listen-insecure"]


def cases():
    out = []
    for flag, values in VALUED.items():
        out.append([flag])                      # the value missing at the end
        for v in values:
            out.append([flag, v, END])
            out.append([flag + "=" + v, END])
    for short, flag in SHORT.items():
        for v in VALUED[flag][:3]:
            out.append([short, v, END])
        out.append([short + "=x", END])         # no "=" form for short flags
    for s in SWITCHES:
        out.append([s, END])
        out.append([s + "=1", END])             # a switch takes no value
    out += [
        ["-"], ["-x"], ["--"], ["--", ""], ["--", "/bin/true"] + ["a"] * 64, ["--", "/bin/true"] + ["a"] * 63 + [END],
        ["--grace", "1"], ["--on-change", "restart"], ["--child-signal", "TERM"],
        ["--max-stale", "5"], ["--once", "--", "/bin/true"],
        ["--server", "ftp://x"], [END, "--namespace"], ["a", "b", END],
        ["--dir", "/tmp/x", "--dir-layoutx", "flat"],
    ]
    return out


def run(binary, args):
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "KUBECONFIG": "/nonexistent"}
    p = subprocess.run(binary + args, capture_output=True, timeout=30, env=env)
    return "%d|%s|%s" % (p.returncode, p.stdout.decode("utf-8", "replace").replace("\n", "\\n"),
                         p.stderr.decode("utf-8", "replace").replace("\n", "\\n"))


# Flags --help names that are not rows of main.c's table: main() reads them first,
# or they belong to the k8s-sidecar mode (src/sidecar_env.c).
NOT_IN_TABLE = {"--help", "--version", "--print-budget", "--k8s-sidecar", "--req-username-file",
                "--req-password-file"}


def table_vs_help(binary):
    """The table's rows (X("--name", ...) in src/main.c) and the flags --help names: the same set."""
    with open(os.path.join(ROOT, "src", "main.c")) as f:
        table = set(re.findall(r'X\("(--[a-z0-9-]+)"', f.read()))
    text = subprocess.run(binary + ["--help"], capture_output=True, timeout=30).stdout.decode()
    named = set(t.rstrip("-") for t in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))
    problems = []
    if len(table) < 50:
        problems.append("only %d rows found in src/main.c's flag table" % len(table))
    if "usage: kreflect" not in text:
        problems.append("--help printed no usage")
    elif "left out" not in text and "smaller build" not in text:
        # The full help: every row documented, every documented flag a row.
        if table - named:
            problems.append("rows --help does not name: %s" % ", ".join(sorted(table - named)))
        if named - table - NOT_IN_TABLE:
            problems.append("--help names flags with no row: %s" % ", ".join(sorted(named - table - NOT_IN_TABLE)))
    return problems


def main():
    argv = sys.argv[1:]
    update = "--update" in argv
    argv = [a for a in argv if a != "--update"]
    target = argv[0] if argv else "x86_64"
    path = os.path.join(ROOT, "build", "kreflect" if target == "x86_64" else target + "/kreflect")
    q = {"aarch64": ["qemu-aarch64"], "armv7": ["qemu-arm"]}.get(target, [])
    if not os.access(path, os.X_OK):
        print("FAIL setup: %s is not built" % path)
        print("0 passed, 1 failed")
        return 1
    got = [(" ".join(repr(a) for a in c), run(q + [path], c)) for c in cases()]
    if update:
        with open(EXPECTED, "w") as f:
            for k, v in got:
                f.write(k + "\n" + v + "\n")
        print("wrote %d cases to %s" % (len(got), EXPECTED))
        print("%d passed, 0 failed" % len(got))
        return 0
    with open(EXPECTED) as f:
        lines = f.read().split("\n")
    want = dict(zip(lines[0::2], lines[1::2]))
    passed = failed = 0
    problems = table_vs_help(q + [path])
    for p in problems:
        print("FAIL table vs --help: " + p)
    failed += len(problems)
    passed += not problems
    for k, v in got:
        if want.get(k) == v:
            passed += 1
        else:
            failed += 1
            print("FAIL %s\n  want %s\n  got  %s" % (k, want.get(k, "(no such case in expected.txt)"), v))
    if len(want) != len(got):
        failed += 1
        print("FAIL expected.txt has %d cases, the suite %d: --update after a deliberate change" %
              (len(want), len(got)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
