#!/usr/bin/env python3
"""Reads kreflect's store figures from a running process.

    store_stats.py PID UNSTRIPPED_BINARY

Prints "used garbage high_water nentries objects compactions" (bytes, bytes,
bytes, entries, held objects, count) of main.c's `static struct kr_store
store`, or "?" and a reason on stderr. The address comes from the binary's
symbol table (static, non-PIE); the bytes from /proc/PID/mem (same user, no
Yama restriction needed for a process we may ptrace). The layout is
src/store.h's on x86_64, and is checked before it is trusted: the arena and
entries pointers must equal the `arena` and `entries` symbols and the size the
`arena` symbol's size.
"""
import struct
import subprocess
import sys

# src/store.h, x86_64: arena, size, used, garbage, high_water, entries,
# max_entries, nentries, free_list, buckets, nbuckets, reserve, objects,
# not_held, compactions, untracked.
LAYOUT = "<QQQQQQIIi4xQI4xQQQQQ"


def static_objects(exe):
    """{name: [(address, size), ...]} of the data and bss objects of a static
    binary. Link-time optimisation renames file-local ones (`store` becomes
    `store.lto_priv.0`): the source name is the key."""
    syms = {}
    nm = subprocess.run(["nm", "-S", exe], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "bBdD":
            syms.setdefault(f[3].split(".lto_priv.")[0], []).append((int(f[0], 16), int(f[1], 16)))
    return syms


def main():
    pid, exe = sys.argv[1], sys.argv[2]
    syms = static_objects(exe)
    for name in ("store", "arena", "entries"):
        if len(syms.get(name, [])) != 1:
            raise ValueError("symbol %r: %d definitions" % (name, len(syms.get(name, []))))
    (store, _), = syms["store"]
    (arena, arena_size), = syms["arena"]
    (entries, _), = syms["entries"]
    with open("/proc/%s/mem" % pid, "rb") as m:
        m.seek(store)
        raw = m.read(struct.calcsize(LAYOUT))
    (a, size, used, garbage, hw, ent, _maxe, nent, _fl, _bk, _nbk, _reserve, objs, _nh, comp,
     _untracked) = struct.unpack(LAYOUT, raw)
    if a != arena or ent != entries or size != arena_size & ~7 or used > size or hw > size:
        raise ValueError("struct kr_store does not match the symbols: layout changed?")
    print(used, garbage, hw, nent, objs, comp)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the callers print "?" and go on
        print("?")
        print("store_stats: unavailable: %s" % e, file=sys.stderr)
