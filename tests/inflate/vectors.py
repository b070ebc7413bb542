#!/usr/bin/env python3
"""Writes the gzip test vectors of tests/unit/test_inflate.c into this directory.

The plain text is a list-like JSON body from a fixed pseudo-random generator
that tests/unit/test_inflate.c repeats byte for byte (plain_text there), so
the unit test compares what it decodes with what it generated itself, not
with the decoder's own CRC. Each vector compresses it with another zlib
strategy, so that stored, fixed and dynamic blocks, long and short matches,
distances up to 32 KiB and every header field are decoded. Run it again
(python3 tests/inflate/vectors.py) only to change the vectors.
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
