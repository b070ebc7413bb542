#!/usr/bin/env python3
"""Where the bytes of a binary go, read from a GNU ld map (-Wl,-Map) of a
link without LTO (LTO merges modules, so their bytes cannot be told apart).

    python3 tests/build/linkmap.py build/x86_64/kreflect.map [--all]

Prints one row per group: each src/ and port/ module, mbedTLS by module
group (its objects with --all), musl by part, libgcc; columns are code
(.text), read-only data (.rodata and other read-only sections), initialised
data, and their sum, which is what the file carries (.bss costs no file
bytes). The sum over all rows is within a few KB of the stripped file: the
rest is ELF headers and page alignment between segments.
"""
import os
import re
import sys

# mbedTLS objects by what they are for, first match wins.
MBEDTLS_GROUPS = [
    ("mbedTLS TLS 1.3", r"^ssl_tls13"),
    ("mbedTLS TLS common + 1.2", r"^ssl_"),
    ("mbedTLS X.509", r"^x509"),
    ("mbedTLS PSA crypto", r"^psa_"),
    ("mbedTLS PK, ASN.1, PEM, OID", r"^(pk|asn1|pem|base64|oid)"),
    ("mbedTLS bignum + RSA", r"^(rsa|bignum)"),
    ("mbedTLS ECC (ECP, ECDSA, ECDH)", r"^(ecp|ecdsa|ecdh)"),
    ("mbedTLS AES, GCM, ChaCha20-Poly1305", r"^(aes|gcm|chacha|poly1305|cipher|block_cipher)"),
    ("mbedTLS hashes, HKDF", r"^(sha|md|hkdf|hmac)"),
    ("mbedTLS RNG, platform, memory", r"."),
]
MUSL_GROUPS = [
    ("musl malloc (DNS, putenv, mbedTLS)", r"^(malloc|free|calloc|realloc|lite_malloc|donate|"
     r"aligned_alloc|memalign|posix_memalign|libc_calloc|glue|expand_heap|__malloc|"
     r"malloc_usable_size|replaced)"),
    ("musl resolver (getaddrinfo)", r"^(getaddrinfo|freeaddrinfo|lookup_|res_|__res_|dns_|"
     r"resolvconf|inet_|gai_|__dns|getservbyname|serv)"),
    ("musl other", r"."),
]

# Sections that take file bytes, by column.
CODE = re.compile(r"^\.(text|init|fini|plt|iplt)")
RODATA = re.compile(r"^\.(rodata|eh_frame|gcc_except|note|init_array|fini_array|"
                    r"data\.rel\.ro|got|tdata|preinit_array|ctors|dtors)")
DATA = re.compile(r"^\.(data|sdata)")


def group_of(path, detail):
    base = os.path.basename(path)
    m = re.match(r"(.*)\((.*)\)$", base)
    if m:
        lib, member = m.group(1), m.group(2)
        member = re.sub(r"\.(o|lo)$", "", member)
        if lib == "libmbedtls.a":
            if detail:
                return "mbedTLS " + member
            for name, pat in MBEDTLS_GROUPS:
                if re.match(pat, member):
                    return name
        if lib == "libc.a":
            for name, pat in MUSL_GROUPS:
                if re.match(pat, member):
                    return name
        if lib.startswith("libgcc"):
            return "libgcc"
        return lib
    m = re.search(r"/obj/((src|port)/.*)\.o$", path)
    if m:
        return m.group(1) + ".c"
    if re.search(r"(crt\w*\.o)$", base):
        return "musl other"
    return base


def parse(path, detail):
    rows = {}
    in_map = False
    pending = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not in_map:
                in_map = line.startswith("Linker script and memory map")
                continue
            if line.startswith("/DISCARD/"):
                break
            line = line.rstrip("\n")
            m = re.match(r"^ (\.\S+)\s*$", line)
            if m:
                pending = m.group(1)
                continue
            m = re.match(r"^ (\.\S+)?\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$", line)
            if not m:
                pending = None if not line.startswith("  ") else pending
                continue
            sect = m.group(1) or pending
            pending = None
            if not sect:
                continue
            size = int(m.group(3), 16)
            if size == 0 or int(m.group(2), 16) == 0:
                continue
            col = 0 if CODE.match(sect) else 1 if RODATA.match(sect) else \
                2 if DATA.match(sect) else None
            if col is None:
                continue  # .bss, .tbss, comments: no file bytes
            g = group_of(m.group(4).strip(), detail)
            r = rows.setdefault(g, [0, 0, 0])
            r[col] += size
    return rows


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    detail = "--all" in sys.argv
    if len(args) != 1:
        sys.stderr.write("usage: linkmap.py MAP [--all]\n")
        return 2
    try:
        rows = parse(args[0], detail)
    except OSError as e:
        sys.stderr.write("kreflect: unable to read link map %s: %s\n" % (args[0], e.strerror))
        return 1
    if not rows:
        sys.stderr.write("kreflect: unable to read link map %s: no sections found\n" % args[0])
        return 1
    order = sorted(rows.items(), key=lambda kv: -sum(kv[1]))
    tot = [sum(r[i] for r in rows.values()) for i in range(3)]
    print("%-38s %8s %8s %6s %8s %6s" % ("module", "code", "rodata", "data", "total", "%"))
    for kind, pred in (("kreflect", lambda g: g.startswith(("src/", "port/"))),
                       ("mbedTLS", lambda g: g.startswith("mbedTLS")),
                       ("C library and compiler", lambda g: True)):
        part = [(g, r) for g, r in order if pred(g) and g in rows]
        sub = [sum(r[i] for _, r in part) for i in range(3)]
        print("%-38s %8d %8d %6d %8d %5.1f%%" % ("== " + kind, sub[0], sub[1], sub[2], sum(sub),
                                               100.0 * sum(sub) / sum(tot)))
        for g, r in part:
            print("  %-36s %8d %8d %6d %8d %5.1f%%" % (g, r[0], r[1], r[2], sum(r),
                                                    100.0 * sum(r) / sum(tot)))
            del rows[g]
    print("%-38s %8d %8d %6d %8d" % ("all", tot[0], tot[1], tot[2], sum(tot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
