#!/usr/bin/env python3
"""Writes the named seeds of tests/corpus/state_load/ and tests/corpus/state_crash/.

    python3 tests/fuzz/state_seeds.py

state_load inputs start with a byte whose bit 0 asks the target to put a
valid header (its own configuration) in front of the rest; the format is
in src/state.h.
"""
import os
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rec(b):
    return b + struct.pack("<I", zlib.crc32(b))


def res(i, rv, count, gap=60000):
    return rec(struct.pack("<BBHIq", ord("R"), len(rv), i, count, gap) + rv)


def obj(r, key, rv, uid, data, held=True):
    return rec(struct.pack("<BBBBHHI", ord("O"), len(rv), len(uid), 1 if held else 0, r, len(key),
                           len(data) if held else 0) + key + rv + uid + (data if held else b""))


def end(n):
    return rec(struct.pack("<BBBBI", ord("E"), 0, 0, 0, n))


def header(version, nres, config=0x1234, written=1800000000, gen=1):
    h = b"KRSTATE\n" + struct.pack("<IIQqQ", version, nres, config, written, gen)
    return rec(h)


def delete(r, key):
    return rec(struct.pack("<BBHH", ord("D"), 0, r, len(key)) + key)


def hist(kind, r, seq, key, rv):
    """A history record (version 2): kind 0 added, 1 modified, 2 deleted, 3 a mark (no key)."""
    return rec(struct.pack("<BBBBHHQ", ord("H"), kind, len(rv), 0, r, len(key), seq) + key + rv)


def commit(n):
    return rec(struct.pack("<BBBBI", ord("C"), 0, 0, 0, n))


CM = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"default"},"data":{"k":"v"}}'
body = (res(0, b"120", 2) + res(1, b"77", 1) +
        obj(0, b"default/a", b"101", b"u1", CM) +
        obj(1, b"edge/s", b"77", b"u2", b"", held=False) +
        obj(0, b"default/b", b"102", b"u3", CM * 300) + end(3))
empty = res(0, b"5", 0) + res(1, b"6", 0) + end(0)
load = {
    "valid": b"\x01" + body,
    "valid-empty": b"\x01" + empty,
    "truncated": b"\x01" + body[:len(body) * 2 // 3],
    "bit-flipped": b"\x01" + body[:40] + bytes([body[40] ^ 0x10]) + body[41:],
    "wrong-version": b"\x00" + header(3, 2) + body,
    # bit 2: a version-1 header (no history records): still loads
    "v1-valid": b"\x05" + body,
    "v1-with-history": b"\x05" + body[:-len(end(3))] + hist(1, 0, 5, b"default/a", b"101") + end(3),
    "history-valid": b"\x01" + body[:-len(end(3))] + hist(3, 0, 4, b"", b"100") +
                     hist(1, 0, 5, b"default/a", b"101") + hist(0, 0, 6, b"default/b", b"102") + end(3),
    "history-gap": b"\x01" + body[:-len(end(3))] + hist(1, 0, 5, b"default/a", b"101") +
                   hist(0, 0, 9, b"default/b", b"102") + end(3),
    "history-bad-kind": b"\x01" + body[:-len(end(3))] + hist(4, 0, 5, b"default/a", b"101") + end(3),
    "history-mark-with-key": b"\x01" + body[:-len(end(3))] + hist(3, 0, 5, b"default/a", b"101") + end(3),
    "history-resource-out-of-range": b"\x01" + body[:-len(end(3))] + hist(1, 5, 5, b"x/a", b"1") + end(3),
    "journal-history": b"\x03" + obj(0, b"default/c", b"20", b"u3", CM) + hist(0, 0, 0, b"default/c", b"20") +
                       res(0, b"20", 0) + res(1, b"11", 0) + commit(4),
    "other-config": b"\x00" + header(1, 2) + body,
    "huge-count": b"\x01" + res(0, b"5", 0xffffffff) + res(1, b"6", 0) + end(0),
    "huge-object": b"\x01" + res(0, b"5", 1) + res(1, b"6", 0) +
                   rec(struct.pack("<BBBBHHI", ord("O"), 1, 0, 1, 0, 3, 0xfffffff0) + b"a/b5") + end(1),
    "duplicate-key": b"\x01" + res(0, b"5", 2) + res(1, b"6", 0) +
                     obj(0, b"default/a", b"1", b"u", CM) * 2 + end(2),
    "count-short": b"\x01" + res(0, b"5", 2) + res(1, b"6", 0) + obj(0, b"default/a", b"1", b"u", CM) + end(1),
    "after-end": b"\x01" + empty + b"x",
    "nul-in-key": b"\x01" + res(0, b"5", 1) + res(1, b"6", 0) + obj(0, b"defa\0lt/a", b"1", b"u", CM) + end(1),
    "resource-out-of-range": b"\x01" + res(0, b"5", 1) + res(1, b"6", 0) + obj(7, b"x/a", b"1", b"u", CM) + end(1),
    # bit 1: a journal after the target's own snapshot (default/a, edge/b not held; generation 7)
    "journal-valid": b"\x03" + obj(0, b"default/c", b"20", b"u3", CM) + delete(0, b"default/a") +
                     res(0, b"20", 0) + res(1, b"11", 0) + commit(4) +
                     obj(1, b"edge/b", b"21", b"u2", b"{}") + res(0, b"20", 0) + res(1, b"21", 0) + commit(3),
    "journal-torn-group": b"\x03" + obj(0, b"default/c", b"20", b"u3", CM) + res(0, b"20", 0) +
                          res(1, b"11", 0) + commit(3) + obj(0, b"default/d", b"22", b"u4", CM)[:30],
    "journal-bad-commit": b"\x03" + delete(0, b"default/a") + res(0, b"20", 0) + res(1, b"11", 0) + commit(9),
    "journal-other-generation": b"\x02" + b"KRJOURN\n" + struct.pack("<IQQ", 1, 0, 3) + b"\0" * 4 +
                                delete(0, b"default/a") + commit(1),
}
crash = {
    "first-snapshot": b"\x00" + bytes([4, 0, 200, 4, 1, 17, 132, 0, 90]),
    "all-kinds": b"\x01" + bytes([0, 0, 100, 1, 0, 180, 2, 0, 50, 3, 1, 0, 4, 0, 30, 5, 0, 0,
                                  0x80, 0, 70, 0x81, 0x60, 0, 0x42, 0, 9]),
    "large-objects": b"\x01" + bytes([1, 0x50, 0, 4, 0x90, 0, 0, 0xb0, 0, 3, 0x40, 0]),
    "empty-to-some": b"\x01" + bytes([4, 0, 10, 4, 0, 11]),
    "some-to-empty": b"\x01" + bytes([2, 0, 10, 2, 0, 11]),
    "journal-all-kinds": b"\x03" + bytes([0, 0, 100, 1, 0, 180, 2, 0, 50, 3, 1, 0, 4, 0, 30, 5, 0, 0,
                                          0x80, 0, 70, 0x81, 0x60, 0, 0x42, 0, 9, 1, 0, 3, 2, 0, 4]),
    "journal-large": b"\x02" + bytes([1, 0x50, 0, 4, 0x90, 0, 0, 0xb0, 0, 1, 0x40, 0, 1, 0, 7]),
}
for name, files in (("state_load", load), ("state_crash", crash)):
    d = os.path.join(ROOT, "tests", "corpus", name)
    os.makedirs(d, exist_ok=True)
    for n, b in files.items():
        with open(os.path.join(d, "seed-" + n), "wb") as f:
            f.write(b)
