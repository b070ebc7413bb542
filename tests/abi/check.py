#!/usr/bin/env python3
"""libkreflect's ABI against the released baseline (tests/abi/kreflect-1.0.*.abi).

For each target (x86_64, aarch64, armv7 under qemu-user), a program generated
from src/kreflect.h prints the size of every public struct, the offset and size
of every field, every enum value and numeric #define; the header's function
prototypes are taken from its text. Every line of the baseline must still hold:
a struct that may grow at the end (kreflect.h "ABI") may only get larger, any
other line must be unchanged; new lines (fields at the end, new calls, new enum
values) are allowed and listed. Then libkreflect.so.1: its soname, and that it
exports exactly the header's functions (config/libkreflect.map), and a program
linked against it runs (tests/abi/smoke.c).

    python3 tests/abi/check.py            check (the suite of `make test`)
    python3 tests/abi/check.py --update   rewrite the baselines (a new release)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "src", "kreflect.h")
MAP = os.path.join(ROOT, "config", "libkreflect.map")
BASE = "kreflect-1.0"
# Structs the library may lengthen at the end (kreflect.h "ABI"); the rest are frozen.
GROWABLE = {"kr_config", "kr_status", "kr_event", "kr_state_change", "kr_object",
            "kr_endpoint_config", "kr_dir_config", "kr_hooks_config", "kr_program_config"}
TARGETS = {
    "x86_64": ("x86_64-linux-musl-gcc", []),
    "aarch64": ("aarch64-linux-musl-gcc", ["qemu-aarch64"]),
    "armv7": ("arm-linux-musleabihf-gcc", ["qemu-arm"]),
}

passed = failed = 0


def tally(good, what):
    global passed, failed
    passed, failed = (passed + 1, failed) if good else (passed, failed + 1)
    print(("ok   " if good else "FAIL ") + what)


def ok(what):
    tally(True, what)


def bad(what):
    tally(False, what)


def header_text():
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def structs(text):
    """{name: [field, ...]} of every struct with a body."""
    out = {}
    for m in re.finditer(r"struct (kr_\w+) \{(.*?)\n\};", text, re.S):
        fields = []
        for decl in m.group(2).split(";"):
            decl = " ".join(re.sub(r"\[[^\]]*\]", "", decl).split())   # arrays: the name
            if not decl:
                continue
            fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
            if fp:
                fields.append(fp.group(1))
                continue
            parts = decl.split(",")
            fields.append(re.findall(r"\w+", parts[0])[-1])
            fields.extend(re.findall(r"\w+", p)[-1] for p in parts[1:])
        out[m.group(1)] = fields
    return out


def enums(text):
    names = []
    for m in re.finditer(r"enum (kr_\w+) \{(.*?)\};", text, re.S):
        for item in m.group(2).split(","):
            w = re.match(r"\s*(KR_\w+)", item)
            if w:
                names.append(w.group(1))
    return names


def defines(text):
    return [n for n, v in re.findall(r"#define (KR_\w+) (-?\d+)\b", text)
            if not n.startswith("KR_VERSION")]


def prototypes(text):
    """The exported functions' declarations, whitespace collapsed: {name: text}."""
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    out = {}
    for piece in text.split(";"):
        if "static inline" in piece:
            continue
        piece = " ".join(re.split(r"[{}]", piece)[-1].split())
        m = re.match(r"^(?!return\b|typedef\b)[A-Za-z_][\w ]*[\w\*] ?\**(kr_\w+) ?\((.*)\)$", piece)
        if m:
            out[m.group(1)] = piece
    return out


def layout_program(text):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "kreflect.h"', "int main(void)", "{"]
    for s, fields in structs(text).items():
        lines.append('\tprintf("sizeof %s %%zu\\n", sizeof(struct %s));' % (s, s))
        for f in fields:
            lines.append('\tprintf("offset %s.%s %%zu size %%zu\\n", offsetof(struct %s, %s), '
                         'sizeof(((struct %s *)0)->%s));' % (s, f, s, f, s, f))
    for e in enums(text):
        lines.append('\tprintf("enum %s %%d\\n", (int)%s);' % (e, e))
    for d in defines(text):
        lines.append('\tprintf("define %s %%d\\n", (int)%s);' % (d, d))
    lines += ["\treturn 0;", "}"]
    return "\n".join(lines) + "\n"


def layout(target, text):
    cc, runner = TARGETS[target]
    out = os.path.join(ROOT, "build", "abi-" + target)
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, "layout.c")
    with open(src, "w") as f:
        f.write(layout_program(text))
    exe = os.path.join(out, "layout")
    subprocess.run([cc, "-std=c99", "-static", "-I" + os.path.join(ROOT, "src"), "-o", exe, src],
                   check=True)
    run = subprocess.run(runner + [exe], check=True, capture_output=True, text=True)
    return run.stdout.splitlines()


def current(target, text):
    lines = layout(target, text)
    lines += ["prototype " + p for _, p in sorted(prototypes(text).items())]
    return lines


def differences(base, now):
    """The baseline lines that no longer hold, and the lines added since."""
    now_set = set(now)
    sizes = {l.split()[1]: int(l.split()[2]) for l in now if l.startswith("sizeof ")}
    broken = []
    for line in base:
        if line in now_set:
            continue
        w = line.split()
        if w[0] == "sizeof" and w[1] in GROWABLE and sizes.get(w[1], -1) >= int(w[2]):
            continue
        broken.append(line)
    return broken, [l for l in now if l not in set(base)]


def compare(target, base, now):
    broken, added = differences(base, now)
    if broken:
        bad("%s: %d line(s) of the 1.0 ABI changed or went:" % (target, len(broken)))
        for l in broken[:40]:
            print("    was: " + l)
    else:
        ok("%s: the %d lines of the 1.0 ABI hold (%d added since)" % (target, len(base), len(added)))
    for l in added[:20]:
        print("    added: " + l)


def self_test(base):
    """The comparison flags what it is there for (a check that cannot fail is none)."""
    def mutated(pred, change):
        return [change(l) if pred(l) else l for l in base]
    bump = lambda l: re.sub(r"(\d+)( size \d+)?$", lambda m: str(int(m.group(1)) + 8) + (m.group(2) or ""), l)
    shrink = lambda l: re.sub(r"\d+$", lambda m: str(int(m.group(0)) - 8), l)
    grow = lambda l: re.sub(r"\d+$", lambda m: str(int(m.group(0)) + 8), l)
    cases = [
        ("a moved field", mutated(lambda l: l.startswith("offset kr_config.server "), bump), 1),
        ("a shrunk growable struct", mutated(lambda l: l.startswith("sizeof kr_status "), shrink), 1),
        ("a grown frozen struct", mutated(lambda l: l.startswith("sizeof kr_listen_config "), grow), 1),
        ("a grown growable struct", mutated(lambda l: l.startswith("sizeof kr_config "), grow), 0),
        ("a renumbered enum", mutated(lambda l: l.startswith("enum KR_FAIL_TLS "), grow), 1),
        ("a changed prototype", mutated(lambda l: l.startswith("prototype int kr_client_run("),
                                        lambda l: l.replace("struct kr_client *c", "const struct kr_client *c")), 1),
        ("a removed call", [l for l in base if not l.startswith("prototype int kr_client_wakeup(")], 1),
    ]
    wrong = [what for what, now, want in cases if len(differences(base, now)[0]) != want]
    if wrong:
        bad("the comparison misjudges: " + ", ".join(wrong))
    else:
        ok("the comparison flags a moved field, a shrunk or frozen struct's size, a renumbered enum, "
           "a changed or removed prototype, and lets a growable struct grow")


def map_symbols():
    text = re.sub(r"/\*.*?\*/", " ", open(MAP).read(), flags=re.S)
    return set(re.findall(r"\b(kr_\w+);", text))


def check_shared(text):
    lib = os.path.join(ROOT, "build", "x86_64", "libkreflect.so.1")
    if not os.path.exists(lib):
        bad("%s missing: run make TARGET=x86_64 target-lib" % lib)
        return
    dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True).stdout
    if "Library soname: [libkreflect.so.1]" in dyn:
        ok("libkreflect.so.1 has the soname libkreflect.so.1")
    else:
        bad("libkreflect.so.1's soname: %s" % re.findall(r"soname: \[(.*?)\]", dyn))
    nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
    exported = {l.split()[2].split("@")[0] for l in nm.splitlines() if len(l.split()) == 3}
    exported = {n for n in exported if not n.startswith("KREFLECT_")}
    declared = set(prototypes(text))
    mapped = map_symbols()
    if exported == declared == mapped:
        ok("libkreflect.so.1 exports exactly the %d functions kreflect.h declares" % len(declared))
    else:
        bad("exports differ: not declared %s; declared, not exported %s; map vs header %s"
            % (sorted(exported - declared), sorted(declared - exported), sorted(mapped ^ declared)))
    versioned = [l for l in nm.splitlines() if "@@KREFLECT_" in l]
    if len(versioned) == len(exported):
        ok("every export carries a version node (KREFLECT_1.0, ...)")
    else:
        bad("%d of %d exports carry a KREFLECT_ version" % (len(versioned), len(exported)))
    exe = os.path.join(ROOT, "build", "abi-x86_64", "smoke")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    subprocess.run(["x86_64-linux-musl-gcc", "-std=c99", "-I" + os.path.join(ROOT, "src"), "-o", exe,
                    os.path.join(ROOT, "tests", "abi", "smoke.c"), "-L" + os.path.dirname(lib),
                    "-lkreflect"], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
    run = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
    needed = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
    if run.returncode == 0 and run.stdout.startswith("ok ") and "[libkreflect.so.1]" in needed:
        ok("a program linked against libkreflect.so.1 runs a client: " + run.stdout.strip())
    else:
        bad("smoke program: exit %d: %s%s" % (run.returncode, run.stdout, run.stderr))


def main():
    text = header_text()
    update = "--update" in sys.argv[1:]
    for target in TARGETS:
        path = os.path.join(ROOT, "tests", "abi", "%s.%s.abi" % (BASE, target))
        now = current(target, text)
        if update:
            with open(path, "w") as f:
                f.write("\n".join(now) + "\n")
            print("wrote %s (%d lines)" % (path, len(now)))
            continue
        if not os.path.exists(path):
            bad("%s: no baseline %s" % (target, path))
            continue
        compare(target, open(path).read().splitlines(), now)
        if target == "x86_64":
            self_test(open(path).read().splitlines())
    if not update:
        check_shared(text)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
