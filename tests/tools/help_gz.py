#!/usr/bin/env python3
"""The long --help for the binary, gzip-compressed (src/help.c expands it).

    cc ... -DKR_HELP_EXTRACT -E src/main.c | python3 tests/tools/help_gz.py > usage_gz.h
    ... | python3 tests/tools/help_gz.py --text    (the text itself, for checks)

Reads src/main.c after the preprocessor (so the capacities its text names
through KR_STR() are this build's), takes the string literals of
`static const char usage[] = ...;`, and writes a C header with the gzip bytes
(mtime 0: the same text gives the same bytes) and the text's length.
"""
import gzip
import re
import sys


def usage_text(src):
    m = re.search(r"static\s+const\s+char\s+usage\s*\[\s*\]\s*=", src)
    if not m:
        sys.exit("help_gz.py: no 'static const char usage[] =' in the input")
    out = bytearray()
    pos = m.end()
    lit = re.compile(r'\s*"((?:[^"\\\n]|\\.)*)"', re.S)
    while True:
        t = lit.match(src, pos)
        if not t:
            break
        # C escapes as Python's; other bytes (UTF-8) kept as they are.
        out += t.group(1).encode("utf-8").decode("unicode_escape").encode("latin-1")
        pos = t.end()
    if not re.match(r"\s*;", src[pos:]):
        sys.exit("help_gz.py: usage[] is not a plain run of string literals")
    return bytes(out)


def main():
    text = usage_text(sys.stdin.read())
    if "--text" in sys.argv[1:]:
        sys.stdout.buffer.write(text)
        return
    gz = gzip.compress(text, 9, mtime=0)
    lines = ["/* Made by tests/tools/help_gz.py from src/main.c's usage text: do not edit. */",
             "#define KR_USAGE_LEN %du" % len(text),
             "static const unsigned char kr_usage_gz[] = {"]
    for i in range(0, len(gz), 16):
        lines.append("\t" + ", ".join("0x%02x" % b for b in gz[i:i + 16]) + ",")
    lines.append("};")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
