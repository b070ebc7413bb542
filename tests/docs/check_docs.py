#!/usr/bin/env python3
"""Every link between the repository's documents resolves.

    python3 tests/docs/check_docs.py

Two kinds of pointer are checked, in every file git tracks (and every new file
it would track), build/ and binary files aside:

- a relative Markdown link, [text](path), [text](path#anchor) or
  [text](#anchor), in a *.md file outside code: the path must exist, and the
  anchor must be the GitHub slug of a heading of the file it names;
- a section named in words, README "Section" (the top README.md) or
  some/dir/README.md "Section" (any *.md, from the repository's top), in any
  text file, code comments included: the file must have a heading with exactly
  that text (inline code marks aside).

And the top README's "Usage" section names every long flag of the full
`--help` text in src/main.c, and no flag that text does not have.

Self-tests first: a temporary tree with good and broken pointers of each kind,
which must give exactly the broken ones. The last line is "N passed, N failed".
"""

import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SELF = "tests/docs/check_docs.py"
passed = failed = 0


def result(good, what):
    global passed, failed
    if good:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what)


FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]\n]|\][^(\n])*?\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.*?)\1")
# A section named in words: README "X", README.md "X", dir/README.md "X",
# dir/NAME.md "X"; a comma, a colon or an opening parenthesis may sit between.
# The quoted name may wrap onto the next line of a comment.
REF = re.compile(r"(?<![\w./\"'-])((?:[\w.-]+/)*(?:README(?:\.md)?|[\w.-]+\.md))"
                 r"(?:[,:]?[ \t]+\(?|[ \t]*\()\"([^\"]{1,100})\"")
COMMENT_LEAD = re.compile(r"\s*\n\s*(?:\*|#|//|;)?\s*")


def plain_heading(text):
    """A heading as GitHub renders its text: links to their text, marks gone."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    return text.replace("**", "").strip()


def slug(text):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = plain_heading(text).lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def outside_code(text):
    """The lines of a Markdown text outside fenced blocks, with line numbers."""
    fenced = False
    for no, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line


def headings(path, cache={}):
    """(plain texts, slugs) of a Markdown file's headings, or None when unreadable."""
    if path in cache:
        return cache[path]
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError):
        cache[path] = None
        return None
    texts, slugs, seen = set(), set(), {}
    for _, line in outside_code(text):
        m = HEADING.match(line)
        if not m:
            continue
        texts.add(plain_heading(m.group(2)))
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        slugs.add(s if n == 0 else "%s-%d" % (s, n))
    cache[path] = (texts, slugs)
    return cache[path]


def check_links(root, rel, text):
    """Problems of the relative links of one Markdown file: [(line, message)]; and the count checked."""
    problems, count = [], 0
    here = os.path.dirname(os.path.join(root, rel))
    for no, line in outside_code(text):
        line = INLINE_CODE.sub("", line)
        for m in LINK.finditer(line):
            target = m.group(1)
            if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue
            count += 1
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(root, rel)
            if path.startswith("/") or not os.path.exists(full):
                problems.append((no, "link to %s: no such file in the repository" % target))
                continue
            if not anchor:
                continue
            h = headings(full) if full.endswith(".md") else None
            if h is None:
                problems.append((no, "link to %s: an anchor into a file that is not Markdown" % target))
            elif anchor not in h[1]:
                problems.append((no, "link to %s: %s has no heading with that anchor" %
                                 (target, os.path.relpath(full, root))))
    return problems, count


def check_refs(root, rel, text):
    """Problems of the sections one file names in words: [(line, message)]; and the count checked."""
    problems, count = [], 0
    for m in REF.finditer(text):
        name, section = m.group(1), COMMENT_LEAD.sub(" ", m.group(2)).strip()
        if name in ("README", "README.md"):
            target = "README.md"
        else:
            target = name
        full = os.path.normpath(os.path.join(root, target))
        if not os.path.isfile(full):
            other = os.path.normpath(os.path.join(root, os.path.dirname(rel), target))
            if os.path.isfile(other) and name not in ("README", "README.md"):
                full = other
            elif name in ("README", "README.md") or "/" in name:
                pass
            else:
                continue            # a bare NAME.md that is not one of ours: not a pointer
        count += 1
        no = text.count("\n", 0, m.start()) + 1
        h = headings(full) if os.path.isfile(full) else None
        if h is None:
            problems.append((no, '%s "%s": no such Markdown file' % (name, section)))
        elif section not in h[0]:
            problems.append((no, '%s "%s": %s has no heading "%s"' %
                             (name, section, os.path.relpath(full, root), section)))
    return problems, count


LONG_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def help_flags(main_c):
    """The long flags of the full --help text: the first usage[] literal of src/main.c."""
    m = re.search(r"static const char usage\[\] =\n(.*?);\n", main_c, re.S)
    if not m:
        return None
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
    return set(LONG_FLAG.findall(text))


def section(text, title):
    """The lines of a Markdown file's section with that heading, down to the next heading of its level."""
    out, level = None, 0
    for line in text.split("\n"):
        h = HEADING.match(line)
        if out is not None and h and len(h.group(1)) <= level:
            break
        if out is not None:
            out.append(line)
        elif h and plain_heading(h.group(2)) == title:
            out, level = [], len(h.group(1))
    return None if out is None else "\n".join(out)


def check_usage(root):
    """Problems of the README's Usage section against --help: [(line, message)]; and the flags checked."""
    try:
        want = help_flags(open(os.path.join(root, "src", "main.c")).read())
        usage = section(open(os.path.join(root, "README.md")).read(), "Usage")
    except OSError as e:
        return [(0, "cannot read src/main.c or README.md: %s" % e)], 0
    if not want:
        return [(0, "src/main.c has no usage[] text to compare with")], 0
    if usage is None:
        return [(0, "README.md has no Usage section")], 0
    have = set(LONG_FLAG.findall(usage))
    problems = [(0, "Usage does not list %s, a flag of --help" % f) for f in sorted(want - have)]
    problems += [(0, "Usage lists %s, which --help does not have" % f) for f in sorted(have - want)]
    return problems, len(want | have)


def tracked(root):
    """The files git tracks or would track, build output aside."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return sorted(f for f in set(out.stdout.split("\n")) if f and not f.startswith("build/")
                  and os.path.isfile(os.path.join(root, f)))


def check_tree(root, files):
    """Every problem of the files given: [(file, line, message)]; and the pointers checked."""
    problems, count = [], 0
    for rel in files:
        if rel == SELF:
            continue                # its examples and self-tests point nowhere on purpose
        try:
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read(2 << 20)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\0" in text:
            continue
        if rel.endswith(".md"):
            p, n = check_links(root, rel, text)
            problems += [(rel, no, msg) for no, msg in p]
            count += n
        p, n = check_refs(root, rel, text)
        problems += [(rel, no, msg) for no, msg in p]
        count += n
    return problems, count


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_tests():
    """A tree with a known set of broken pointers: exactly those must be found."""
    q = '"'
    result(slug("Serve the mirror locally (--listen)") == "serve-the-mirror-locally---listen",
           "slug of a heading with parentheses and a flag")
    result(slug("`make PROFILE=tiny`") == "make-profiletiny", "slug of a heading in inline code")
    result(slug("Restarts: the state directory") == "restarts-the-state-directory",
           "slug of a heading with a colon")
    result(slug("kreflect's `--dir`, files") == "kreflects---dir-files", "slug with an apostrophe and a comma")
    with tempfile.TemporaryDirectory() as root:
        headings.__defaults__[0].clear()
        write(root, "README.md", "\n".join([
            "# Top", "## Sizes", "## Sizes", "### `make PROFILE=tiny`",
            "```sh", "# not a heading", "```",
            "[good](docs/README.md#the-flow)", "[good too](#sizes-1)", "[same file](#make-profiletiny)",
            "[web](https://example.com/x#y) `[in code](nowhere.md)`",
            "```", "[in a block](nowhere.md)", "```",
            "[bad file](docs/NOPE.md)", "[bad anchor](docs/README.md#no-such)",
            "[bad self](#not-a-heading)", "[dir](docs/)", "[bad dir](nodir/)", ""]))
        write(root, "docs/README.md", "# Docs\n## The flow\n[up](../README.md#top)\n[bad up](../README.md#flow)\n")
        write(root, "src/a.c", "\n".join([
            "/* good: README " + q + "Sizes" + q + ", docs/README.md " + q + "The flow" + q + " */",
            "/* good across lines (README, " + q + "make", " * PROFILE=tiny" + q + ") */",
            "/* bad: README " + q + "Nowhere" + q + " */",
            "/* bad: docs/README.md: " + q + "Flow" + q + " */",
            "/* bad: docs/GONE.md " + q + "X" + q + " */",
            "/* not a pointer: open(" + q + "README.md" + q + ") and other.md " + q + "x" + q + " */", ""]))
        problems, count = check_tree(root, ["README.md", "docs/README.md", "src/a.c"])
        found = sorted((f, no) for f, no, _ in problems)
        want = [("README.md", 15), ("README.md", 16), ("README.md", 17), ("README.md", 19),
                ("docs/README.md", 4), ("src/a.c", 4), ("src/a.c", 5), ("src/a.c", 6)]
        result(found == want, "a tree with 8 broken pointers gives exactly those 8 (got %s)" % found)
        result(count == 16, "it checked the 8 good and 8 broken pointers, skipping the rest (%d)" % count)
        msgs = {(f, no): m for f, no, m in problems}
        write(root, "src/main.c", "\n".join([
            "static const char usage[] =", '\t"  --kubeconfig PATH  (sh -c is not a flag)\\n"',
            '\t"  --dir PATH \\"--quoted\\"\\n";', "static const char usage[] =", '\t"  --short-help\\n";', ""]))
        write(root, "README.md", "# Top\n## Usage\n```\n--kubeconfig PATH --stale-flag\n```\n## Next\n--dir\n")
        p, n = check_usage(root)
        result(sorted(m for _, m in p) == ["Usage does not list --dir, a flag of --help",
                                           "Usage does not list --quoted, a flag of --help",
                                           "Usage lists --stale-flag, which --help does not have"],
               "a Usage section missing two flags and naming a stale one gives those three (%s)" % p)
        result("no heading with that anchor" in msgs.get(("README.md", 16), ""),
               "a bad anchor says so in words (%s)" % msgs.get(("README.md", 16)))
        result('has no heading "Nowhere"' in msgs.get(("src/a.c", 4), ""),
               "a bad section says which heading is missing (%s)" % msgs.get(("src/a.c", 4)))
        headings.__defaults__[0].clear()


def main():
    self_tests()
    files = tracked(ROOT)
    result(files is not None, "git lists the repository's files")
    if files:
        problems, count = check_tree(ROOT, files)
        for f, no, msg in problems:
            result(False, "%s:%d: %s" % (f, no, msg))
        result(count > 0, "the repository has pointers to check (%d checked)" % count)
        p, n = check_usage(ROOT)
        for _, msg in p:
            result(False, "README.md: " + msg)
        result(n > 50 and not p, "README.md's Usage names the %d long flags of --help, no more" % n)
        passed_here = count - len(problems)
        print("checked %d links and section references in %d files: %d resolve" %
              (count, len(files), passed_here))
        global passed
        passed += passed_here
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
