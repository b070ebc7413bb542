#!/usr/bin/env python3
"""Writes the gzip test vectors of tests/unit/test_inflate.c into this directory.

The plain text is a list-like JSON body from a fixed pseudo-random generator
that tests/unit/test_inflate.c repeats byte for byte (plain_text there), so
the unit test compares what it decodes with what it generated itself, not
with the decoder's own CRC. Each vector compresses it with another zlib
strategy, so that stored, fixed and dynamic blocks, long and short matches,
distances up to 32 KiB and every header field are decoded. Run it again
(python3 tests/inflate/vectors.py) only to change the vectors. It also writes
the named seeds of the fuzz target, tests/corpus/inflate/.
"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
MASK = (1 << 64) - 1
WORDS = [b"alpha ", b"beta=", b"gamma-", b"delta_", b"eps", b"zeta1 ", b"eta22=", b"theta",
         b"iota ", b"kappa.", b"lambda ", b"mu", b"nu9 ", b"xi=x ", b"omicron-", b"pi "]


def plain_text(items):
    """The generator of test_inflate.c's plain_text(), for `items` items."""
    x = 0x9E3779B97F4A7C15
    out = bytearray(b'{"kind":"ConfigMapList","items":[')
    datas = []
    for i in range(items):
        x = (x * 6364136223846793005 + 1442695040888963407) & MASK
        r = x >> 33
        if i % 7 == 6 and len(datas) >= 20:
            data = datas[-20]                 # far back: long distances
        elif i % 11 == 10:
            data = b"a" * (300 + r % 3000)    # one long run: distance 1
        else:
            n = 2 + r % 200
            d = bytearray()
            for _ in range(n):
                x = (x * 6364136223846793005 + 1442695040888963407) & MASK
                d += WORDS[(x >> 40) % 16]
            data = bytes(d)
        datas.append(data)
        if i:
            out += b","
        out += b'{"metadata":{"name":"cm-%05d","resourceVersion":"%d"},"data":{"k":"' % (i, 1000 + i)
        out += data + b'"}}'
    out += b"]}"
    return bytes(out)


def gzip_member(raw_deflate, plain, flags=0, extra=b"", name=b"", comment=b""):
    head = bytearray(b"\x1f\x8b\x08") + bytes([flags]) + b"\x00\x00\x00\x00\x00\xff"
    if flags & 4:
        head += struct.pack("<H", len(extra)) + extra
    if flags & 8:
        head += name + b"\x00"
    if flags & 16:
        head += comment + b"\x00"
    if flags & 2:
        head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    return bytes(head) + raw_deflate + struct.pack("<II", zlib.crc32(plain), len(plain) & 0xFFFFFFFF)


def deflate(plain, level=6, strategy=zlib.Z_DEFAULT_STRATEGY):
    c = zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)
    return c.compress(plain) + c.flush()


class Bits:
    """Deflate bits, least significant first; Huffman codes most significant bit first."""

    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def bits(self, v, n):
        self.acc |= v << self.n
        self.n += n
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8
        return self

    def code(self, c, n):
        for i in reversed(range(n)):
            self.bits((c >> i) & 1, 1)
        return self

    def lit(self, sym):                 # the fixed literal/length code
        if sym < 144:
            return self.code(0x30 + sym, 8)
        if sym < 256:
            return self.code(0x190 + sym - 144, 9)
        if sym < 280:
            return self.code(sym - 256, 7)
        return self.code(0xC0 + sym - 280, 8)

    def done(self):
        if self.n:
            self.bits(0, 8 - self.n)
        return bytes(self.out)


def member(raw, plain):
    return gzip_member(raw, plain)


def seeds(corpus):
    """The named seeds of tests/corpus/inflate (fuzz_inflate.c): each a case the inflater must name."""
    small = plain_text(6)
    good = deflate(small, 6)
    full = gzip_member(good, small)
    fixed = Bits().bits(1, 1).bits(1, 2)
    out = {
        "valid-dynamic": full,
        "valid-fixed": gzip_member(deflate(small, 6, zlib.Z_FIXED), small),
        "valid-stored": gzip_member(deflate(small, 0), small),
        "valid-header-fields": gzip_member(deflate(small, 9), small, flags=2 | 4 | 8 | 16,
                                           extra=b"AP\x02\x00hi", name=b"n", comment=b"c"),
        "valid-go-style": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff"
                          + zlib.compressobj(1, zlib.DEFLATED, -15).compress(small)
                          + b"",
        "truncated-trailer": full[:-3],
        "truncated-deflate": full[:len(full) // 2],
        "truncated-header": full[:7],
        "bad-crc": full[:-8] + bytes([full[-8] ^ 1]) + full[-7:],
        "bad-isize": full[:-1] + bytes([full[-1] ^ 1]),
        "bytes-after-end": full + b"\x00",
        "bad-magic": b"\x1f\x8c" + full[2:],
        "block-type-3": member(Bits().bits(1, 1).bits(3, 2).done(), b""),
        "stored-bad-complement": member(Bits().bits(1, 1).bits(0, 2).bits(0, 5).bits(5, 16).bits(0xFFFB, 16)
                                        .done() + b"hello", b"hello"),
        "distance-too-far-back": member(Bits().bits(1, 1).bits(1, 2).lit(ord("x")).lit(257).code(1, 5)
                                        .lit(256).done(), b"xxxx"),
        "distance-at-start": member(Bits().bits(1, 1).bits(1, 2).lit(257).code(0, 5).lit(256).done(), b""),
        "invalid-length-286": member(fixed.lit(286).done(), b""),
        "invalid-distance-30": member(Bits().bits(1, 1).bits(1, 2).lit(ord("x")).lit(257).code(30, 5)
                                      .done(), b""),
        "oversubscribed-clen": member(Bits().bits(1, 1).bits(2, 2).bits(0, 5).bits(0, 5).bits(15, 4)
                                      .bits(1, 3).bits(1, 3).bits(1, 3).bits(1, 3).done(), b""),
        "too-many-lengths": member(Bits().bits(1, 1).bits(2, 2).bits(30, 5).bits(0, 5).bits(0, 4).done(), b""),
        # 1 MiB of zeros in about 1 KiB: past the fuzz target's 256 KiB output bound.
        "bomb": gzip_member(deflate(bytes(1 << 20), 9), bytes(1 << 20)),
    }
    # The Go-style seed ends as Go's Close does: a flush and an empty final stored block.
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    out["valid-go-style"] = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff" + c.compress(small)
                             + c.flush(zlib.Z_SYNC_FLUSH) + b"\x01\x00\x00\xff\xff"
                             + struct.pack("<II", zlib.crc32(small), len(small)))
    os.makedirs(corpus, exist_ok=True)
    for name, data in out.items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)


def main():
    big = plain_text(300)
    mid = plain_text(100)
    small = plain_text(6)
    vectors = {
        "list-l1.gz": gzip_member(deflate(big, 1), big),
        "list-l6.gz": gzip_member(deflate(big, 6), big),
        "list-l9.gz": gzip_member(deflate(big, 9), big),
        "list-stored.gz": gzip_member(deflate(mid, 0), mid),
        "list-fixed.gz": gzip_member(deflate(big, 6, zlib.Z_FIXED), big),
        "list-huffman.gz": gzip_member(deflate(mid, 6, zlib.Z_HUFFMAN_ONLY), mid),
        "list-rle.gz": gzip_member(deflate(mid, 6, zlib.Z_RLE), mid),
        "small-l6.gz": gzip_member(deflate(small, 6), small),
        "small-fields.gz": gzip_member(deflate(small, 9), small, flags=2 | 4 | 8 | 16,
                                       extra=b"AP\x04\x00abcd", name=b"list.json",
                                       comment=b"a comment"),
        "small-fixed.gz": gzip_member(deflate(small, 6, zlib.Z_FIXED), small),
        "small-stored.gz": gzip_member(deflate(small, 0), small),
        "empty.gz": gzip_member(deflate(b"", 6), b""),
        # 16 MiB of zeros in 16 KiB: past 1 MiB, 1,000 times more out than in.
        "bomb.gz": gzip_member(deflate(bytes(16 << 20), 9), bytes(16 << 20)),
    }
    for name, data in vectors.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
    with open(os.path.join(HERE, "sizes.txt"), "w") as f:
        f.write("big %d\nmid %d\nsmall %d\n" % (len(big), len(mid), len(small)))


if __name__ == "__main__":
    main()
    seeds(os.path.join(HERE, "..", "corpus", "inflate"))
