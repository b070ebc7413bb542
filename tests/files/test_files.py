#!/usr/bin/env python3
"""The directory sink (--dir) and the notifications (--exec, --signal) end to end:
the real kreflect binary against the test API server over TLS.

    python3 tests/files/test_files.py [BINARY] [-j N] [NAME ...]

The harness is the end-to-end suite's (tests/e2e/test_e2e.py: the scenario
registry, the Kreflect process wrapper, the per-scenario server, the runner);
this file only adds its scenarios and what they need to look at a directory.
Each scenario prints "ok NAME" or "FAIL NAME: reason"; the last line is
"N passed, N failed". What a scenario saw is kept under build/test/ (the
runner names the directory after the binary's: run.sh links the binary into
build/test/files-TARGET/, so the artifacts go to build/test/e2e-files-TARGET/).

Needs build/test/files-reader (tests/files/reader.c; run.sh builds it).
"""

import atexit
import base64
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.dont_write_bytecode = True      # no __pycache__ left in the source tree
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until  # noqa: E402

# Importing the harness registered the e2e suite's scenarios: they are not this suite's.
del e2e.SCENARIOS[:]
scenario = e2e.scenario

READER = os.path.join(ROOT, "build", "test", "files-reader")
HOOK = os.path.join(HERE, "hook.sh")
APP = os.path.join(HERE, "app.sh")
MANIFEST = ".kreflect-manifest"
ANN = "kreflect.io/target-dir"


def default_signals():
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


class FilesScenario(e2e.Scenario):
    """The e2e scenario, plus helper processes stopped at cleanup."""

    def __init__(self, name):
        super().__init__(name)
        self.procs = []

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def spawn(self, cmd, **kw):
        """A helper process in its own process group (killed whole at cleanup),
        with the signals the tests send at their default action: a test run
        under nohup would otherwise hand on an ignored SIGHUP, which a shell
        cannot trap."""
        p = subprocess.Popen(cmd, start_new_session=True, preexec_fn=default_signals, **kw)
        e2e.remember(p)
        self.procs.append(p)
        return p

    def kreflect_plain(self, *args, name=None, resources=()):
        """kreflect with args and no --server, token or CA added by the
        harness (only its -v 2): the command lines of the README recipes."""
        self.nkr += 1
        bare = types.SimpleNamespace(srv=None, dir=self.dir)
        kr = e2e.Kreflect(bare, args, name or "kreflect%d" % self.nkr, resources=resources)
        self.krs.append(kr)
        return kr

    def cleanup(self):
        for p in self.procs:
            try:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(5)
            except (OSError, subprocess.SubprocessError):
                pass
            e2e.forget(p)
        return super().cleanup()


e2e.Scenario = FilesScenario


# =========================================================================== objects

def b64(raw):
    return base64.b64encode(raw).decode()


def put(s, res, name, ns="default", data=None, binary=None, secret=None, labels=None, annotations=None,
        **kw):
    """Creates or replaces an object: ConfigMap data as text, binaryData and
    Secret data as bytes (base64-encoded here)."""
    body = dict(kw)
    if data is not None:
        body["data"] = data
    if binary is not None:
        body["binaryData"] = {k: b64(v) for k, v in binary.items()}
    if secret is not None:
        body["data"] = {k: b64(v) for k, v in secret.items()}
    if labels is not None:
        body["labels"] = labels
    if annotations is not None:
        body["annotations"] = annotations
    return s.ctl.create(res, ns, name, upsert=True, **body)


def server_objects(s, res, ns="default"):
    """The objects of res in ns (None: every namespace), sorted by key."""
    q = {"resource": res, "objects": True}
    if ns is not None:
        q["namespace"] = ns
    st = s.ctl.state(**q)["objects"]
    return [v["object"] for _, v in sorted(st.items())]


def norm_dir(d):
    return "/".join(c for c in d.split("/") if c not in ("", "."))


def want_files(s, resources=("configmaps",), ns="default", selector=None, layout="flat", ann=ANN):
    """The files the server's objects make: {relative path: bytes, or the
    object itself for the <ns>_<name>.json of other kinds}."""
    files = {}
    for res in resources:
        for obj in server_objects(s, res, ns):
            md = obj["metadata"]
            labels = md.get("labels") or {}
            if selector and any(labels.get(k) != v for k, v in selector.items()):
                continue
            d = norm_dir(((md.get("annotations") or {}).get(ann, "")) if ann else "")
            if res in ("configmaps", "secrets"):
                if layout == "object":
                    d = "/".join(x for x in (d, md["namespace"], md["name"]) if x)
                for k, v in (obj.get("data") or {}).items():
                    files[(d + "/" if d else "") + k] = v.encode() if res == "configmaps" else base64.b64decode(v)
                for k, v in (obj.get("binaryData") or {}).items():
                    files[(d + "/" if d else "") + k] = base64.b64decode(v)
            else:
                files[(d + "/" if d else "") + "%s_%s.json" % (md["namespace"], md["name"])] = obj
    return files


# =========================================================================== the directory

class Entry:
    def __init__(self, full):
        st = os.lstat(full)
        self.kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else \
            "file" if stat.S_ISREG(st.st_mode) else "other"
        self.mode = stat.S_IMODE(st.st_mode)
        self.ino, self.mtime = st.st_ino, st.st_mtime_ns
        self.data = None
        if self.kind == "file":
            with open(full, "rb") as f:
                self.data = f.read()
        elif self.kind == "link":
            self.data = os.readlink(full)

    def same_inode(self, other):
        return (self.ino, self.mtime) == (other.ino, other.mtime)


def tree(root):
    """{relative path: Entry} of every file and link under root (directories
    are walked, not listed; links are not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, n)
            try:
                out[os.path.relpath(full, root)] = Entry(full)
            except FileNotFoundError:
                pass        # a temporary file renamed meanwhile: the next look sees the result
    return out


def dirs(root):
    return sorted(os.path.relpath(os.path.join(dp, d), root) for dp, dn, _ in os.walk(root) for d in dn)


def manifest(root):
    """The manifest read as kreflect reads it: {path: (resource, key)}."""
    with open(os.path.join(root, MANIFEST)) as f:
        lines = f.read().split("\n")
    check(lines[0] == "kreflect-manifest 1", "the manifest starts with %r" % lines[0][:40])
    owned = {}
    for ln in lines[1:]:
        if not ln:
            continue
        f = ln.split("\t")
        if f[0] == "+" and len(f) == 4:
            owned[f[3]] = (f[1], f[2])
        elif f[0] == "-" and len(f) == 2:
            owned.pop(f[1], None)
        else:
            raise Fail("manifest line %r is not one" % ln[:80])
    return owned


def show(v):
    if isinstance(v, dict):
        return "object %s" % v.get("metadata", {}).get("name")
    if isinstance(v, (bytes, bytearray)):
        return repr(bytes(v[:40])) + ("...(%d bytes)" % len(v) if len(v) > 40 else "")
    return repr(v)


def diff_files(root, want, ignore=()):
    """What differs between the files under root and want ({} if nothing)."""
    got = {k: e for k, e in tree(root).items() if k != MANIFEST and k not in ignore}
    problems = {}
    for k in sorted(set(want) | set(got)):
        if k not in got:
            problems[k] = "missing"
        elif k not in want:
            problems[k] = "extra (%s)" % show(got[k].data)
        elif got[k].kind != "file":
            problems[k] = "a %s" % got[k].kind
        elif isinstance(want[k], dict):
            try:
                obj = json.loads(got[k].data)
            except ValueError:
                problems[k] = "not JSON"
                continue
            md, wmd = obj.get("metadata", {}), want[k]["metadata"]
            if (md.get("resourceVersion"), md.get("uid"), obj.get("kind")) != \
                    (wmd["resourceVersion"], wmd["uid"], want[k]["kind"]):
                problems[k] = "holds %s %s, expected %s" % (obj.get("kind"), md.get("resourceVersion"),
                                                            wmd["resourceVersion"])
            elif "managedFields" in md:
                problems[k] = "holds managedFields"
        elif got[k].data != want[k]:
            problems[k] = "holds %s, expected %s" % (show(got[k].data), show(want[k]))
    return problems


def wait_files(root, want_fn, timeout=10, ignore=(), what="the files to match the server"):
    last = {}

    def p():
        last["d"] = diff_files(root, want_fn(), ignore)
        return not last["d"]
    try:
        wait_until(p, timeout, what, 0.05)
    except Fail:
        raise Fail("%s after %d s: %s" % (what, timeout, "; ".join(
            "%s: %s" % kv for kv in list(last["d"].items())[:6]))) from None


def check_manifest(root, ignore=(), timeout=5):
    """The manifest owns exactly the files kreflect wrote (not ignore), and
    each is there. Waited for: a removal's line follows the file's removal."""
    last = {}

    def p():
        owned = manifest(root)
        files = {k for k, e in tree(root).items() if k != MANIFEST and k not in ignore}
        last["d"] = (sorted(set(owned) - files)[:5], sorted(files - set(owned))[:5])
        return (owned,) if set(owned) == files else None
    try:
        return wait_until(p, timeout, "the manifest", 0.05)[0]
    except Fail:
        raise Fail("the manifest owns %s that the directory does not hold, and not %s that it holds"
                   % last["d"]) from None


def stamps(root, names):
    t = tree(root)
    return {n: t[n] for n in names}


def check_untouched(before, root, what):
    now = tree(root)
    moved = [n for n, e in before.items() if n not in now or not e.same_inode(now[n])]
    check(not moved, "%s rewrote %s (inode or mtime changed)" % (what, moved[:5]))


def errors(kr):
    return [ln for ln in kr.stderr().splitlines() if ": error: " in ln]


# =========================================================================== notification logs

def runs(path):
    """The hook's records: [{start, end, events, exit, keys, file}]."""
    out = []
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return out
    cur = None
    for ln in text.split("\n"):
        if ln.startswith("RUN "):
            _, start, end, events, code = ln.split(" ")
            cur = {"start": float(start), "end": float(end), "events": events, "exit": int(code),
                   "keys": [], "file": None}
        elif ln.startswith("key ") and cur is not None:
            cur["keys"].append(ln[4:])
        elif ln.startswith("file ") and cur is not None:
            cur["file"] = ln[5:]
        elif ln == "." and cur is not None:
            out.append(cur)
            cur = None
    return out


def hups(path):
    """The app's SIGHUP records: [(time, content)]."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for ln in lines:
        _, t, content = (ln.split(" ", 2) + [""])[:3]
        out.append((float(t), content.strip()))
    return out


def hook_cmd(log, pause=0, code=0, file=None):
    return "sh %s %s %s %s%s" % (HOOK, log, pause, code, " " + file if file else "")


def synced_at(kr, n=1):
    """Wall-clock time of kreflect's nth SYNCED line."""
    with kr.lock:
        seen = 0
        for ev, t in zip(kr.lines, kr.times):
            if ev.get("type") == "SYNCED":
                seen += 1
                if seen == n:
                    return t
    return None


def watch_relist(s, kr, nres):
    """Makes every watch end in ERROR 410, so each resource relists; waits for the SYNCEDs."""
    n = len(kr.synced())
    s.ctl.wait_watches(nres, timeout=10)
    time.sleep(1.1)                 # not a "very short watch" when it ends
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=nres)
    s.ctl.drop_watches()
    kr.wait_synced(n + nres, timeout=15)


# =========================================================================== 1. files follow the server

TEXT = "h\u00e9llo w\u00f6rld \u2713\ttab\n"
ALL_BYTES = bytes(range(256))
NOT_UTF8 = b"\xff\xfe\x00\x80\xc3\x28 \xed\xa0\x80"


@scenario("FilesFollowTheServer", 8)
def t_files_follow(s):
    """ConfigMap data as text, binaryData and Secret data decoded byte-exact
    (every byte value, invalid UTF-8, empty values), other kinds as
    <ns>_<name>.json; files change and go with the server; files of unchanged
    objects and keys keep their inode and mtime through other updates, a
    relist and a restart; modes 0644 and 0600."""
    s.server()
    res = ("configmaps", "secrets", "deployments.apps")
    srv_res = ("configmaps", "secrets", "deployments")
    put(s, "configmaps", "text", data={"app.conf": TEXT, "empty": "", "multi": "a\nb\n"})
    put(s, "configmaps", "bin", data={"plain": "x"}, binary={"all": ALL_BYTES, "notutf8": NOT_UTF8, "none": b""})
    put(s, "secrets", "creds", secret={"tls.key": NOT_UTF8 + ALL_BYTES, "blank": b"", "token": b"t0k3n"})
    s.ctl.create("deployments", "default", "web")
    out = s.path("out")
    kr = s.kreflect("--dir", out, resources=res)
    kr.wait_synced(3)
    want = lambda: want_files(s, srv_res)  # noqa: E731
    wait_files(out, want, timeout=5)
    t = tree(out)
    check(t["all"].data == ALL_BYTES and t["notutf8"].data == NOT_UTF8 and t["none"].data == b"",
          "binaryData not byte-exact")
    check(t["app.conf"].data == TEXT.encode(), "data not written as UTF-8 text: %r" % t["app.conf"].data)
    modes = {k: oct(e.mode) for k, e in t.items() if k != MANIFEST}
    want_modes = {k: "0o600" if k in ("tls.key", "blank", "token") else "0o644" for k in modes}
    check(modes == want_modes, "modes %s, expected %s" % (modes, want_modes))
    check("default_web.json" in t, "no default_web.json: %s" % sorted(t))
    check_manifest(out)

    # One key changed, one added, one removed; "empty" and every other object untouched.
    before = tree(out)
    s.ctl.update("configmaps", "default", "text", data={"app.conf": "v2\n", "new": "n", "multi": None})
    wait_files(out, want)
    keep = {k: e for k, e in before.items() if k not in ("app.conf", "multi", MANIFEST)}
    check_untouched(keep, out, "an update of ConfigMap text")
    check(not tree(out)["app.conf"].same_inode(before["app.conf"]), "app.conf was not replaced")

    # A Secret key changes, a ConfigMap and the Deployment go.
    before = tree(out)
    s.ctl.update("secrets", "default", "creds", data={"token": b64(b"rotated")})
    s.ctl.delete("configmaps", "default", "bin")
    s.ctl.delete("deployments", "default", "web")
    wait_files(out, want)
    check(not any(k in tree(out) for k in ("all", "notutf8", "none", "plain", "default_web.json")),
          "files of deleted objects remain")
    keep = {k: e for k, e in before.items() if k in ("app.conf", "new", "empty", "tls.key", "blank")}
    check_untouched(keep, out, "an update of Secret creds and two deletions")
    check(tree(out)["token"].mode == 0o600, "the rewritten Secret file is not 0600")
    check_manifest(out)

    # A relist of every resource, then a restart: nothing is rewritten.
    put(s, "configmaps", "bin", binary={"all": ALL_BYTES})
    wait_files(out, want)
    before = {k: e for k, e in tree(out).items() if k != MANIFEST}
    watch_relist(s, kr, 3)
    check_untouched(before, out, "a relist")
    check(kr.stop() == 0, "kreflect did not stop cleanly")
    kr2 = s.kreflect("--dir", out, resources=res)
    kr2.wait_synced(3)
    wait_files(out, want)
    check_untouched(before, out, "a restart")
    check_manifest(out)
    check(not errors(kr) and not errors(kr2), "errors logged: %s" % (errors(kr) + errors(kr2))[:3])



def layout_case(s, layout):
    s.server()
    put(s, "configmaps", "a", data={"k": "a"})
    put(s, "configmaps", "b", data={"bk": "b", "bk2": "b2"}, annotations={ANN: "sub/dir/"})
    put(s, "secrets", "sa", secret={"sk": b"\x00secret-a"})
    s.ctl.create("deployments", "default", "web", annotations={ANN: "./deploy"})
    put(s, "configmaps", "c", ns="other", data={"kc": "other ns"})
    res, srv_res = ("configmaps", "secrets", "deployments.apps"), ("configmaps", "secrets", "deployments")
    out = s.path("out")
    kr = s.kreflect("-A", "--dir", out, "--dir-layout", layout, resources=res)
    kr.wait_synced(3)
    want = lambda: want_files(s, srv_res, ns=None, layout=layout)  # noqa: E731
    wait_files(out, want, timeout=5)
    if layout == "object":
        expect = {"default/a/k", "sub/dir/default/b/bk", "sub/dir/default/b/bk2", "default/sa/sk",
                  "deploy/default_web.json", "other/c/kc"}
    else:
        expect = {"k", "sub/dir/bk", "sub/dir/bk2", "sk", "deploy/default_web.json", "kc"}
    check(set(tree(out)) - {MANIFEST} == expect, "files %s, expected %s" % (sorted(tree(out)), sorted(expect)))
    check_manifest(out)
    # The annotation moves b elsewhere, then away: its files follow.
    s.ctl.update("configmaps", "default", "b", annotations={ANN: "elsewhere"})
    wait_files(out, want)
    check(any(k.startswith("elsewhere/") for k in tree(out)), "nothing moved to elsewhere/")
    s.ctl.update("configmaps", "default", "b", annotations={ANN: None})
    wait_files(out, want)
    s.ctl.delete("configmaps", "default", "a")
    s.ctl.delete("configmaps", "other", "c")
    wait_files(out, want)
    check_manifest(out)
    left = dirs(out)
    if layout == "object":
        gone = ("default/a", "other", "sub/dir/default", "elsewhere/default")
        check(not any(d in left for d in gone), "object layout directories outlived their objects: %s" % left)
        check("default" in left and "default/b" in left, "default/ went although b and sa live in it: %s" % left)
    check({"sub", "sub/dir", "elsewhere", "deploy"} <= set(left),
          "directories of the annotation were removed: %s" % left)
    check(not errors(kr), "errors logged: %s" % errors(kr)[:3])


@scenario("ObjectLayoutAndTargetDir", 4)
def t_layout_object(s):
    """--dir-layout object: ConfigMap and Secret keys in [<target>/]<ns>/<name>/,
    other kinds <ns>_<name>.json; the annotation moves the files; the
    object's directories go with it, the annotation's stay."""
    layout_case(s, "object")


@scenario("FlatLayoutTargetDir", 4)
def t_layout_flat(s):
    """The flat layout (the default): keys in the root or the annotation's subdirectory."""
    layout_case(s, "flat")



SECRET = b"p4ss-\xff\x00-w0rd-Zq9unique"
SECRET_TEXT = "hunter2-never-logged-Kx7"


def secret_forms(raw):
    """The ways a secret value could leak: itself, its base64, and slices of both."""
    text = raw.decode("latin-1")
    enc = b64(raw)
    forms = {text, enc, enc[:12], enc[4:16]}
    forms |= {text[i:i + 10] for i in range(0, max(1, len(text) - 10), 5)}
    return {f for f in forms if len(f) >= 8}


@scenario("FileModesAndSecretsNeverLogged", 5)
def t_modes_secrets(s):
    """Secret files 0600 and other files 0644 by default, --file-mode and
    --secret-file-mode honoured (a restart with other modes rewrites the
    same bytes for the mode); at -v 3 no secret value appears on stderr or
    stdout, also when a Secret key is refused or a value is not base64."""
    s.server()
    put(s, "configmaps", "cm", data={"setting": "on"})
    put(s, "secrets", "creds", secret={"password": SECRET, "api": SECRET_TEXT.encode()})
    s.ctl.create("secrets", "default", "bad", data={"broken": "!" + b64(SECRET)[1:], "../up": b64(SECRET),
                                                    "ok": b64(SECRET_TEXT.encode())})
    out = s.path("out")
    kr = s.kreflect("--dir", out, "-o", "none", resources=("configmaps", "secrets"), verbosity="3")
    want = {"setting": b"on", "password": SECRET, "api": SECRET_TEXT.encode(), "ok": SECRET_TEXT.encode()}
    wait_files(out, lambda: want, timeout=10)
    # Change a secret too: the write path logs as well as the list.
    s.ctl.update("secrets", "default", "creds", data={"api": b64(b"second-" + SECRET)})
    want["api"] = b"second-" + SECRET
    wait_files(out, lambda: want)
    modes = {k: e.mode for k, e in tree(out).items() if k != MANIFEST}
    check(modes == {"setting": 0o644, "password": 0o600, "api": 0o600, "ok": 0o600}, "modes %s" % modes)
    wait_until(lambda: kr.stderr().count(" synced ") >= 2, 5, "both resources synced")
    check(kr.stop() == 0, "kreflect did not stop cleanly")
    err = kr.stderr()
    check("unable to write key \"../up\" of secrets default/bad" in err, "the refused key is not named")
    check("broken for secrets default/bad: the value is not valid base64" in err,
          "the bad base64 value is not reported")
    with open(kr.out_path, "rb") as f:
        stdout = f.read()
    check(stdout == b"", "-o none printed %r" % stdout[:80])
    leaked = [f for raw in (SECRET, SECRET_TEXT.encode(), b"second-" + SECRET) for f in secret_forms(raw)
              if f in err]
    check(not leaked, "secret values in stderr: %r" % leaked[:3])
    check(len(err.splitlines()) > 10, "stderr at -v 3 is suspiciously short")

    # Other modes, asked for: the same bytes are rewritten for the mode, nothing else.
    kr2 = s.kreflect("--dir", out, "-o", "none", "--file-mode", "0640", "--secret-file-mode", "0440",
                     resources=("configmaps", "secrets"))
    wait_until(lambda: {k: e.mode for k, e in tree(out).items() if k != MANIFEST} ==
               {"setting": 0o640, "password": 0o440, "api": 0o440, "ok": 0o440}, 10,
               "the modes 0640 and 0440")
    check(diff_files(out, want) == {}, "contents changed with the modes")
    other = [e for e in errors(kr2) if "secrets default/bad" not in e]
    check(not other, "errors logged: %s" % other[:3])




# System calls, from strace -f -y: [(name, [arguments as text], result)].
SYSCALLS = "open,openat,write,writev,fsync,fdatasync,syncfs,close,rename,renameat,renameat2,unlink,unlinkat"


def strace_calls(path):
    line_re = re.compile(r'^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)')
    out = []
    with open(path, errors="replace") as f:
        for ln in f:
            m = line_re.match(ln.strip())
            if m:
                out.append((m.group(1), m.group(2), int(m.group(3))))
    return out


def quoted(args):
    """The quoted strings of a call's arguments (paths), in order."""
    return re.findall(r'"((?:[^"\\]|\\.)*)"', args)


def traced(pid):
    with open("/proc/%d/status" % pid) as f:
        return "TracerPid:\t0\n" not in f.read()


def fd_path(args):
    """The path strace -y shows for the first argument's descriptor."""
    m = re.match(r'\d+<(.*?)>', args)
    return m.group(1) if m else None


def at_paths(args):
    """The paths a call names: quoted ones as they are, a name after a
    descriptor (strace -y: 5</dir>, "name") joined to that directory."""
    out = []
    for m in re.finditer(r'(?:(\d+)<([^>]*)>|AT_FDCWD), "((?:[^"\\]|\\.)*)"|^"((?:[^"\\]|\\.)*)"|, "((?:[^"\\]|\\.)*)"', args):
        if m.group(3) is not None:
            out.append(os.path.join(m.group(2), m.group(3)) if m.group(2) else m.group(3))
        else:
            out.append(m.group(4) if m.group(4) is not None else m.group(5))
    return out


def traced_updates(s, mode):
    """kreflect --dir-sync mode under strace while a ConfigMap gains a key,
    changes one, keeps one, then loses one; returns (calls, object dir, manifest)."""
    s.server()
    put(s, "configmaps", "a", data={"one": "1", "two": "2"})
    out = s.path("out")
    trace = s.path("strace.txt")
    os.makedirs(out)
    kr = s.kreflect("--dir", out, "--dir-layout", "object", "--dir-sync", mode)
    kr.wait_synced()
    wait_files(out, lambda: {"default/a/one": b"1", "default/a/two": b"2"})
    tracer = s.spawn(["strace", "-f", "-y", "-qq", "-s", "512", "-e", "trace=" + SYSCALLS, "-e", "signal=none",
                      "-o", trace, "-p", str(kr.proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_until(lambda: traced(kr.proc.pid), 10, "strace to attach")
    s.ctl.update("configmaps", "default", "a", data={"one": "1", "two": "2b", "three": "3"})
    wait_files(out, lambda: {"default/a/one": b"1", "default/a/two": b"2b", "default/a/three": b"3"})
    s.ctl.update("configmaps", "default", "a", data={"one": None})
    wait_files(out, lambda: {"default/a/two": b"2b", "default/a/three": b"3"})
    check_manifest(out)
    time.sleep(0.3)
    os.kill(tracer.pid, signal.SIGINT)
    tracer.wait(5)
    calls = strace_calls(trace)
    check(calls, "strace saw nothing: %s" % tracer.stderr.read()[:200])
    return calls, os.path.realpath(os.path.join(out, "default", "a")), os.path.realpath(os.path.join(out, MANIFEST))


def check_traced(calls, obj_dir, manifest_path, batch):
    def idx(pred, start=0):
        for i in range(start, len(calls)):
            if pred(calls[i]):
                return i
        return -1

    def is_rename_to(name):
        return lambda c: c[0].startswith("rename") and c[2] == 0 and at_paths(c[1])[-1:] == [os.path.join(obj_dir, name)]

    def syncfs(i):
        return calls[i][0] == "syncfs" and calls[i][2] == 0

    for name, new in (("two", False), ("three", True)):
        r = idx(is_rename_to(name))
        check(r >= 0, "no rename to %s in the trace" % name)
        tmp = at_paths(calls[r][1])[0]
        check(os.path.basename(tmp).startswith(".kreflect-tmp-") and os.path.dirname(tmp) == obj_dir,
              "%s was renamed from %s" % (name, tmp))
        o = idx(lambda c: c[0] in ("open", "openat") and tmp in at_paths(c[1]) and "O_EXCL" in c[1])
        check(0 <= o < r, "the temporary file of %s was not created with O_EXCL before the rename" % name)
        between = calls[o + 1:r]
        check(any(c[0] in ("write", "writev") and fd_path(c[1]) == tmp for c in between),
              "%s: no write to the temporary file" % name)
        if batch:
            sync = [i for i in range(o + 1, r) if syncfs(i)]
            check(sync, "%s: no file system sync between the temporary file and its rename" % name)
            check(any(c[0] == "close" and fd_path(c[1]) == tmp for c in calls[o + 1:sync[-1]]),
                  "%s: the temporary file was not closed before the sync" % name)
            d = [i for i in range(r + 1, len(calls)) if syncfs(i)]
            check(d, "%s: no file system sync after the rename" % name)
        else:
            sync = [i for i, c in enumerate(between) if c[0] == "fsync" and fd_path(c[1]) == tmp and c[2] == 0]
            check(sync, "%s: the temporary file was not synced before the rename" % name)
            check(any(c[0] == "close" and fd_path(c[1]) == tmp for c in between[sync[-1]:]),
                  "%s: the temporary file was not closed after its sync" % name)
            d = idx(lambda c: c[0] == "fsync" and fd_path(c[1]) == obj_dir and c[2] == 0, r)
            check(d > r, "%s: its directory was not synced after the rename" % name)
        if new:
            w = [i for i in range(r) if calls[i][0] in ("write", "writev") and fd_path(calls[i][1]) == manifest_path
                 and "default/a/three" in calls[i][1]]
            check(w, "%s: no manifest line before the rename" % name)
            if batch:
                m = [i for i in range(w[-1], r) if syncfs(i)]
                check(m, "%s: the manifest line was not made durable before its file appeared" % name)
            else:
                m = [i for i in range(o) if calls[i][0] == "fsync" and fd_path(calls[i][1]) == manifest_path]
                check(m, "%s: the manifest was not synced before its file was created" % name)
                check(w[-1] < m[-1], "%s: the manifest line was not written before that sync" % name)
    written = [at_paths(c[1])[0] for c in calls if c[0] in ("open", "openat") and "O_EXCL" in c[1] and at_paths(c[1])]
    check(not any("-one-" in os.path.basename(w) for w in written),
          "the unchanged key was rewritten: %s" % written)
    u = idx(lambda c: c[0].startswith("unlink") and at_paths(c[1])[-1:] == [os.path.join(obj_dir, "one")] and c[2] == 0)
    check(u >= 0, "no unlink of the removed key")
    if batch:
        m = idx(lambda c: c[0] in ("write", "writev") and fd_path(c[1]) == manifest_path, u)
        d = idx(lambda c: c[0] == "syncfs" and c[2] == 0, max(m, u))
        check(m > u and d > m, "after the unlink: manifest line %s, then a file system sync %s" % (m > u, d > m))
    else:
        m = idx(lambda c: c[0] == "fsync" and fd_path(c[1]) == manifest_path, u)
        d = idx(lambda c: c[0] == "fsync" and fd_path(c[1]) == obj_dir, u)
        check(m > u and d > u, "after the unlink: manifest synced %s, directory synced %s" % (m > u, d > u))
    # Every create, rename and removal is relative to a directory descriptor, one name each.
    for c in calls:
        if c[0] in ("renameat", "renameat2", "unlinkat") or (c[0] == "openat" and "O_CREAT" in c[1]):
            check(not c[1].startswith("AT_FDCWD") and all("/" not in n for n in quoted(c[1])),
                  "a path-based call: %s(%s)" % (c[0], c[1][:160]))


@scenario("WritesAreSyncedThenRenamed", 5)
def t_syscalls(s):
    """--dir-sync each, seen by strace: each new file is recorded in the
    manifest (appended and synced) before its temporary file is created; the
    temporary file is written and synced, then renamed over the name, then
    its directory is synced; an update that leaves a key's bytes alone writes
    nothing for it; a removal is followed by the manifest's line and a sync of
    the directory. Every call names one entry of an open directory."""
    calls, obj_dir, manifest_path = traced_updates(s, "each")
    check_traced(calls, obj_dir, manifest_path, batch=False)


@scenario("BatchSyncedOnceThenRenamed", 5)
def t_syscalls_batch(s):
    """--dir-sync batch (the default), seen by strace: the new file's
    manifest line and the temporary files are written, one file system sync
    makes them durable, then the renames, then one more sync; no fsync per
    file. The unchanged key is not rewritten; a removal's manifest line is
    followed by a sync."""
    calls, obj_dir, manifest_path = traced_updates(s, "batch")
    check_traced(calls, obj_dir, manifest_path, batch=True)
    check(not any(c[0] == "fsync" for c in calls), "an fsync in batch mode: %s" %
          [c for c in calls if c[0] == "fsync"][:3])


# =========================================================================== 2. a reader never sees a partial file

CYCLE = {"t": bytes(0x21 + j for j in range(90)), "b": bytes(range(251))}


def content(kind, version, length):
    """The self-checking content tests/files/reader.c verifies."""
    cyc = CYCLE[kind]
    start = (version * 7) % len(cyc)
    body = (cyc[start:] + cyc[:start]) * (length // len(cyc) + 1)
    return b"KRT%s %010d %010d\n" % (kind.encode(), version, length) + body[:length]


LENGTHS = (0, 1, 70000, 17, 4095, 4096, 4097, 250000, 300, 65537, 120000, 9, 180000, 2)


@scenario("ReaderNeverSeesAPartialFile", 20)
def t_reader(s):
    """A C reader opens and reads three files in a tight loop while kreflect
    rewrites them many times with contents of other lengths (0 to 250 kB):
    every read holds one whole version (length and every byte checked), and
    a file never goes missing between versions. (One ConfigMap: a Secret's
    files are written by the same code, and two resources streaming large
    objects at once are the e2e suite's subject.)"""
    s.server()
    out = s.path("out")
    files = {"text": "t", "bin": "b", "bin2": "b"}

    def write(v):
        n, m, o = (LENGTHS[(v + i) % len(LENGTHS)] for i in (0, 5, 9))
        put(s, "configmaps", "r", data={"text": content("t", v, n).decode()},
            binary={"bin": content("b", v, m), "bin2": content("b", v, o)})

    write(0)
    kr = s.kreflect("--dir", out, "-o", "none")
    wait_files(out, lambda: want_files(s), timeout=10)
    stop = s.path("reader.stop")
    rd = s.spawn([READER, "60", stop] + [os.path.join(out, f) for f in files], stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT)
    time.sleep(0.2)
    versions = 80
    t0 = time.monotonic()
    for v in range(1, versions + 1):
        write(v)
    took = time.monotonic() - t0
    wait_files(out, lambda: want_files(s), timeout=20)
    with open(stop, "w"):
        pass
    try:
        text = rd.communicate(timeout=10)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        raise Fail("the reader did not stop") from None
    with open(s.path("reader.out"), "w") as f:
        f.write(text)
    first = text.splitlines()[0] if text else ""
    fields = dict(kv.split("=", 1) for kv in first.split())
    check(rd.returncode == 0 and fields.get("bad") == "0" and fields.get("missing") == "0",
          "the reader saw a partial or missing file (%.1f s of writes): %s" % (took, text.strip()))
    check(fields["last"] == ",".join([str(versions)] * 3), "the reader ended on versions %s, expected %d"
          % (fields["last"], versions))
    # It must have overlapped the rewrites, or it proved nothing.
    check(int(fields["changes"]) >= versions, "the reader saw only %s changes of %d x 3 versions: %s"
          % (fields["changes"], versions, first))
    check(int(fields["reads"]) > 10 * int(fields["changes"]), "too few reads to mean anything: %s" % first)
    check(not errors(kr), "errors logged: %s" % errors(kr)[:3])



@scenario("ReaderCatchesInPlaceWrites", 3)
def t_reader_control(s):
    """The control for the test above: the same reader, against a file
    rewritten in place (truncate, then write in two parts, as a naive writer
    does), reports partial files. Otherwise its silence would prove nothing."""
    path = s.path("inplace")
    with open(path, "wb") as f:
        f.write(content("b", 0, 1000))
    stop = s.path("reader.stop")
    rd = s.spawn([READER, "20", stop, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1.5
    v = 0
    while time.monotonic() < deadline:
        v += 1
        data = content("b", v, LENGTHS[v % len(LENGTHS)])
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(data[:len(data) // 2])
            f.flush()
            f.write(data[len(data) // 2:])
    with open(stop, "w"):
        pass
    text = rd.communicate(timeout=10)[0].decode("utf-8", "replace")
    first = text.splitlines()[0] if text else ""
    fields = dict(kv.split("=", 1) for kv in first.split())
    check(rd.returncode == 1 and int(fields.get("bad", 0)) > 0,
          "the reader did not notice in-place writes (%d versions): %s" % (v, text.strip()[:300]))



# =========================================================================== 3. ownership across a restart

FOREIGN = {"foreign.txt": b"not kreflect's\n", "sub/foreign2.txt": b"nor this\n", ".hidden": b"h"}


def put_foreign(out):
    for rel, data in FOREIGN.items():
        os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
        with open(os.path.join(out, rel), "wb") as f:
            f.write(data)
    return {rel: Entry(os.path.join(out, rel)) for rel in FOREIGN}


def check_foreign(out, before):
    t = tree(out)
    for rel, e in before.items():
        check(rel in t and t[rel].data == e.data and t[rel].same_inode(e), "foreign file %s was touched" % rel)


@scenario("RestartRemovesExactlyWhatWentAway", 6)
def t_restart(s):
    """kreflect stopped; on the server objects are deleted, a key removed, an
    object relabelled out of the selector, one created; restarted, kreflect
    has removed exactly those files when it prints SYNCED; files of the
    unchanged objects are not rewritten, foreign files (one in a
    subdirectory) untouched, the manifest consistent. A relabel while
    running removes the files at once."""
    s.server()
    gw = {"app": "gw"}
    put(s, "configmaps", "keep", data={"k1": "1", "k2": "2"}, labels=gw)
    put(s, "configmaps", "gone", data={"g1": "g"}, labels=gw)
    put(s, "configmaps", "keyrm", data={"x": "x", "y": "y"}, labels=gw)
    put(s, "configmaps", "relabel", data={"r1": "r"}, labels=gw)
    put(s, "configmaps", "relabel-live", data={"rl": "r"}, labels=gw)
    put(s, "configmaps", "other", data={"u": "u"}, labels={"app": "other"})
    put(s, "secrets", "sgone", secret={"p": b"p"}, labels=gw)
    put(s, "secrets", "skeep", secret={"q": b"q"}, labels=gw)
    out = s.path("out")
    foreign = put_foreign(out)
    args = ("--dir", out, "-l", "app=gw")
    res = ("configmaps", "secrets")
    want = lambda: want_files(s, res, selector=gw)  # noqa: E731
    kr = s.kreflect(*args, resources=res)
    kr.wait_synced(2)
    wait_files(out, want, ignore=FOREIGN)
    check("u" not in tree(out), "a ConfigMap outside the selector was written")
    s.ctl.update("configmaps", "default", "relabel-live", labels={"app": "other"})
    wait_files(out, want, ignore=FOREIGN, what="the relabelled object's file to go")
    check(kr.stop() == 0, "kreflect did not stop cleanly")
    check_manifest(out, ignore=FOREIGN)
    before = tree(out)

    s.ctl.delete("configmaps", "default", "gone")
    s.ctl.delete("secrets", "default", "sgone")
    s.ctl.update("configmaps", "default", "keyrm", data={"y": None})
    s.ctl.update("configmaps", "default", "relabel", labels={"app": "other"})
    put(s, "configmaps", "new", data={"n": "n"}, labels=gw)
    kr2 = s.kreflect(*args, resources=res)
    kr2.wait_synced(2)
    # At the first SYNCED of both, no waiting: the files are already right.
    d = diff_files(out, want(), ignore=FOREIGN)
    check(not d, "at the first sync: %s" % d)
    now = tree(out)
    check(set(before) - set(now) == {"g1", "p", "y", "r1"}, "removed %s, expected g1 p y r1"
          % sorted(set(before) - set(now)))
    check(set(now) - set(before) == {"n"}, "added %s, expected n" % sorted(set(now) - set(before)))
    check_untouched({k: before[k] for k in ("k1", "k2", "x", "q")}, out, "the restart")
    check_foreign(out, foreign)
    owned = check_manifest(out, ignore=FOREIGN)
    check(owned == {"k1": ("configmaps", "default/keep"), "k2": ("configmaps", "default/keep"),
                    "x": ("configmaps", "default/keyrm"), "n": ("configmaps", "default/new"),
                    "q": ("secrets", "default/skeep")}, "the manifest says %s" % owned)
    err = kr2.stderr()
    check("configmaps: removed 2 files of objects deleted while kreflect was not running" in err and
          "secrets: removed 1 files of objects deleted while kreflect was not running" in err,
          "the removals at the first sync are not logged")
    check(not errors(kr) and not errors(kr2), "errors logged: %s" % (errors(kr) + errors(kr2))[:3])


@scenario("ConflictFirstOwnerKeeps", 5)
def t_conflict(s):
    """Two objects writing the same file: the conflict is logged naming both
    and the first owner keeps the file, also across a restart (where the
    other lists first); a file kreflect does not own is never written; once
    the owner goes, the other's next change takes the file."""
    s.server()
    out = s.path("out")
    os.makedirs(out)
    with open(os.path.join(out, "mine.txt"), "wb") as f:
        f.write(b"foreign")
    foreign = {"mine.txt": Entry(os.path.join(out, "mine.txt"))}
    put(s, "configmaps", "b", data={"shared": "from b", "bonly": "b"})
    kr = s.kreflect("--dir", out)
    kr.wait_synced()
    wait_files(out, lambda: {"shared": b"from b", "bonly": b"b"}, ignore=foreign)
    first = tree(out)["shared"]
    put(s, "configmaps", "a", data={"shared": "from a", "aonly": "a", "mine.txt": "a's"})
    kr.wait_event("ADDED", "a")
    wait_files(out, lambda: {"shared": b"from b", "bonly": b"b", "aonly": b"a"}, ignore=foreign)
    check(tree(out)["shared"].same_inode(first), "the owner's file was rewritten by the conflict")
    check_foreign(out, foreign)
    err = kr.stderr()
    check("unable to write shared for configmaps default/a: conflict: configmaps default/b writes it" in err,
          "the conflict is not logged naming both objects")
    check("unable to write mine.txt for configmaps default/a: conflict: the file exists and is not kreflect's"
          in err, "the foreign file's conflict is not logged")
    s.ctl.update("configmaps", "default", "b", data={"shared": "from b v2"})
    s.ctl.update("configmaps", "default", "a", data={"shared": "from a v2"})
    kr.wait(lambda ls: sum(1 for e in ls if e.get("type") == "MODIFIED") >= 2, 10, "two MODIFIED")
    wait_files(out, lambda: {"shared": b"from b v2", "bonly": b"b", "aonly": b"a"}, ignore=foreign)
    check(kr.stop() == 0, "kreflect did not stop cleanly")

    kr2 = s.kreflect("--dir", out)
    kr2.wait_synced()
    check(diff_files(out, {"shared": b"from b v2", "bonly": b"b", "aonly": b"a"}, ignore=foreign) == {},
          "after the restart: %s" % diff_files(out, {"shared": b"from b v2", "bonly": b"b", "aonly": b"a"},
                                                ignore=foreign))
    check("unable to write shared for configmaps default/a: conflict: configmaps default/b writes it"
          in kr2.stderr(), "the conflict is not logged after the restart")
    check_manifest(out, ignore=foreign)
    s.ctl.delete("configmaps", "default", "b")
    wait_files(out, lambda: {"aonly": b"a"}, ignore=foreign)
    s.ctl.update("configmaps", "default", "a", data={"aonly": "a2"})
    wait_files(out, lambda: {"shared": b"from a v2", "aonly": b"a2"}, ignore=foreign,
               what="a to take the file b let go")
    check_foreign(out, foreign)
    owned = check_manifest(out, ignore=foreign)
    check(owned == {"shared": ("configmaps", "default/a"), "aonly": ("configmaps", "default/a")},
          "the manifest says %s" % owned)



# =========================================================================== 4. hostile paths and names

ESCAPES = {
    "abs": ("/tmp/kreflect-escape", "is an absolute path"),
    "dotdot": ("..", "contains a '..' component"),
    "dotdot-x": ("../escape", "contains a '..' component"),
    "deep": ("a/../../escape", "contains a '..' component"),
    "inside-dotdot": ("a/..", "contains a '..' component"),
    "nul": ("a\x00b", "contains a NUL byte"),
    "newline": ("a\nb", "contains a control character"),
    "longcomp": ("x" * 256, "has a component longer than 255 bytes"),
    "toolong": ("d/" * 600, "is not a string of at most 1023 bytes"),
}


def outside_state(outside):
    return {k: (e.data, e.ino, e.mtime) for k, e in tree(outside).items()}, dirs(outside)


@scenario("PathEscapesRefused", 5)
def t_path_escapes(s):
    """The annotation cannot lead out of PATH: absolute paths, '..' anywhere,
    control bytes, overlong names are refused with an error naming the
    object; a symbolic link inside PATH is never followed (to a directory on
    the way, at a file's place, or put there after kreflect made the
    directory); the other objects are written all the same."""
    s.server()
    out, outside = s.path("out"), s.path("outside")
    os.makedirs(out)
    os.makedirs(outside)
    with open(os.path.join(outside, "victim"), "wb") as f:
        f.write(b"must stay")
    os.symlink(outside, os.path.join(out, "link"))
    os.symlink(os.path.join(outside, "victim"), os.path.join(out, "evil"))
    before_outside = outside_state(outside)
    for name, (ann, _) in ESCAPES.items():
        put(s, "configmaps", name, data={"escaped-" + name: "x"}, annotations={ANN: ann})
    put(s, "configmaps", "vialink", data={"vialink": "x"}, annotations={ANN: "link"})
    put(s, "configmaps", "vialink-sub", data={"vialinksub": "x"}, annotations={ANN: "link/sub"})
    put(s, "configmaps", "keyed", data={"evil": "overwrite", "plain": "f"})
    put(s, "configmaps", "longpath", data={"k": "x"}, annotations={ANN: "d/" * 500})
    put(s, "configmaps", "ok", data={"good": "g"}, annotations={ANN: "fine/dir"})
    put(s, "configmaps", "swap", data={"swapped": "s"})
    kr = s.kreflect("--dir", out)
    kr.wait_synced()
    links = {"link": Entry(os.path.join(out, "link")), "evil": Entry(os.path.join(out, "evil"))}
    wait_files(out, lambda: {"plain": b"f", "fine/dir/good": b"g", "swapped": b"s"}, ignore=links)
    err = kr.stderr()
    for name, (ann, why) in ESCAPES.items():
        line = [ln for ln in err.splitlines() if "unable to write configmaps default/%s: annotation" % name in ln]
        check(line and line[0].endswith("refused: " + why), "annotation %r of %s: %s" % (ann[:20], name, line))
    for name in ("vialink", "vialink-sub"):
        check("for configmaps default/%s: something other than a directory is there" % name in err,
              "the link on the way of %s is not reported" % name)
    check(any("for configmaps default/longpath: the path is longer than 1023 bytes" in ln
              for ln in err.splitlines()), "the overlong path of longpath is not reported")
    check("unable to write evil for configmaps default/keyed: conflict: the file exists and is not "
          "kreflect's" in err, "the link at a key's place is not reported")

    # Owned places turned into links while it runs: neither is followed.
    os.unlink(os.path.join(out, "swapped"))
    os.symlink(os.path.join(outside, "victim"), os.path.join(out, "swapped"))
    os.rename(os.path.join(out, "fine"), os.path.join(out, "fine.moved"))
    os.symlink(outside, os.path.join(out, "fine"))
    s.ctl.update("configmaps", "default", "swap", data={"swapped": "through the link"})
    s.ctl.update("configmaps", "default", "ok", data={"good": "through the link"})
    kr.wait(lambda ls: sum(1 for e in ls if e.get("type") == "MODIFIED") >= 2, 10, "two MODIFIED")
    wait_until(lambda: "unable to write swapped for configmaps default/swap: it is not a regular file"
               in kr.stderr() and "for configmaps default/ok: something other than a directory" in kr.stderr(),
               5, "both refusals logged")
    # Deleting the objects removes their links (kreflect's paths), never what they point to.
    s.ctl.delete("configmaps", "default", "swap")
    s.ctl.delete("configmaps", "default", "ok")
    wait_until(lambda: not os.path.lexists(os.path.join(out, "swapped")), 5, "swap's link to go")
    check(os.path.islink(os.path.join(out, "fine")), "the directory link fine/ was removed")
    check(outside_state(outside) == before_outside, "something changed outside PATH: %s" % (outside_state(outside),))
    check(not os.path.exists("/tmp/kreflect-escape"), "an absolute annotation was written")
    check(os.path.islink(os.path.join(out, "evil")) and os.path.islink(os.path.join(out, "link")),
          "the foreign links were touched")
    check(tree(out)["fine.moved/dir/good"].data == b"g", "the moved directory's file changed")
    check(kr.running(), "kreflect died")

    # The object layout: <namespace> is a link out of PATH.
    out2 = s.path("out2")
    os.makedirs(out2)
    os.symlink(outside, os.path.join(out2, "default"))
    kr2 = s.kreflect("--dir", out2, "--dir-layout", "object")
    kr2.wait_synced()
    wait_until(lambda: "for configmaps default/keyed: something other than a directory is there" in kr2.stderr(),
               5, "the namespace link to be refused")
    check(outside_state(outside) == before_outside, "the object layout wrote through a link")


class SwapLeftovers:
    """What the swapping leaves (the moved-away directory or file, a
    temporary file stranded in it): not kreflect's to put right."""
    def __contains__(self, rel):
        return ".real" in rel or ".kreflect-tmp-" in rel


def swap_churn(out, outside, stop, counts):
    """Until stop is set: the object's directory out/default/race swapped for
    a link to outside and back, and its file k0 for a link to the victim.
    (kreflect may make the directory again meanwhile: the moved one stays.)"""
    d = os.path.join(out, "default", "race")
    n = 0
    while not stop.is_set():
        n += 1
        moved, f = "%s.real-%d" % (d, n), os.path.join(d, "k0")
        try:
            os.rename(d, moved)
        except OSError:
            moved = None
        try:
            os.symlink(outside, d)
            counts["dir"] += 1
            time.sleep(0.003)
            os.unlink(d)
        except OSError:
            pass
        try:
            if moved:
                os.rename(moved, d)
        except OSError:
            pass
        try:
            os.rename(f, f + ".real")
            os.symlink(os.path.join(outside, "victim"), f)
            counts["file"] += 1
            time.sleep(0.003)
            if os.path.islink(f):
                os.unlink(f)
                os.rename(f + ".real", f)
        except OSError:
            pass
        time.sleep(0.002)


@scenario("SwapsWhileWritingNeverEscape", 8)
def t_swaps_while_writing(s):
    """A directory of kreflect's swapped for a link out of PATH, and one of
    its files for a link to a file outside, again and again while kreflect
    writes (fsync slowed by the port's test hook, widening every window),
    in both --dir-sync modes: nothing outside changes, kreflect keeps
    running and says what it refused, and once the swapping stops the next
    change puts the files right."""
    s.server()
    out_root, outside = s.path("out"), s.path("outside")
    os.makedirs(outside)
    with open(os.path.join(outside, "victim"), "wb") as f:
        f.write(b"must stay")
    before_outside = outside_state(outside)
    put(s, "configmaps", "race", data={"k%d" % k: "0" for k in range(4)})
    start = b"0"
    for mode in ("batch", "each"):
        out = os.path.join(out_root, mode)
        os.makedirs(out)
        kr = s.kreflect("--dir", out, "--dir-layout", "object", "--dir-sync", mode,
                        extra_env={"KREFLECT_FAULT_FSYNC_MS": "20"}, name="kreflect-" + mode)
        kr.wait_synced()
        wait_files(out, lambda: {"default/race/k%d" % k: start for k in range(4)})
        stop, counts = threading.Event(), {"dir": 0, "file": 0}
        th = threading.Thread(target=swap_churn, args=(out, outside, stop, counts), daemon=True)
        th.start()
        try:
            for v in range(1, 25):
                s.ctl.update("configmaps", "default", "race", data={"k%d" % k: "%s-%d" % (mode, v) for k in range(4)})
                time.sleep(0.03)
        finally:
            stop.set()
            th.join(5)
        check(counts["dir"] > 0 and counts["file"] > 0, "the swaps did not run: %s" % counts)
        check(outside_state(outside) == before_outside,
              "%s: something changed outside PATH: %s" % (mode, outside_state(outside)))
        check(kr.running(), "%s: kreflect died: %s" % (mode, kr.stderr()[-300:]))
        s.ctl.update("configmaps", "default", "race", data={"k%d" % k: "final-" + mode for k in range(4)})
        wait_files(out, lambda: {"default/race/k%d" % k: ("final-" + mode).encode() for k in range(4)},
                   ignore=SwapLeftovers())
        check(outside_state(outside) == before_outside, "%s: something changed outside PATH" % mode)
        start = ("final-" + mode).encode()
        err = kr.stderr()
        refused = [ln for ln in err.splitlines() if "unable to" in ln]
        check(all(ln.startswith("kreflect: ") for ln in refused), "%s: a malformed error line: %s" % (mode, refused[:2]))


@scenario("SyncModeFlagsChecked", 2)
def t_sync_flags(s):
    """--dir-sync and --state-sync take their two words only: anything else
    is a usage error (exit 2) naming the flag, before anything is written."""
    out = s.path("out")
    bad = []
    for args, flag in ((["--dir", out, "--dir-sync", "sometimes"], "--dir-sync"),
                       (["--dir", out, "--dir-sync", ""], "--dir-sync"),
                       (["--state-dir", s.path("state"), "--state-sync", "thread"], "--state-sync")):
        p = subprocess.run([e2e.BIN, "--server", "https://127.0.0.1:1"] + args + ["configmaps"],
                           capture_output=True, timeout=10, env=e2e.hermetic_env(s.dir))
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode != 2 or flag not in err or p.stdout:
            bad.append("%s -> exit %s, %r" % (" ".join(args[-2:]), p.returncode, err.strip()[:160]))
    check(not bad, "\n".join(bad))
    check(not os.path.exists(out) and not os.path.exists(s.path("state")), "a bad flag still created a directory")


HOSTILE_KEYS = {
    ".": "is '.' or '..'",
    "..": "is '.' or '..'",
    "a/b": "contains '/'",
    "/abs": "contains '/'",
    "": "empty",
    "k" * 256: "longer than 255 bytes",
    ".kreflect-manifest": "starts with the reserved '.kreflect'",
    ".kreflect-tmp-x": "starts with the reserved '.kreflect'",
    "new\nline": "contains a control character",
    "nul\x00byte": "contains a NUL byte",
}


@scenario("HostileKeyNamesRefused", 4)
def t_hostile_keys(s):
    """Keys that cannot be file names ('.', '..', with '/', empty, over
    NAME_MAX, the reserved prefix, control bytes, NUL) are refused in data,
    binaryData and Secrets with an error naming the key and the object; the
    object's other keys, one of exactly 255 bytes among them, are written."""
    s.server()
    good = {"ok": b"fine", "y" * 255: b"max", "caf\u00e9 \u2713.conf": b"utf8 name"}
    put(s, "configmaps", "cm", data=dict({k: "bad" for k in HOSTILE_KEYS}, ok="fine"))
    put(s, "configmaps", "bin", binary=dict({k: b"\xffbad" for k in HOSTILE_KEYS},
                                            **{"y" * 255: b"max"}))
    put(s, "secrets", "sec", secret=dict({k: b"bad-secret" for k in HOSTILE_KEYS},
                                         **{"caf\u00e9 \u2713.conf": b"utf8 name"}))
    out = s.path("out")
    kr = s.kreflect("--dir", out, resources=("configmaps", "secrets"))
    kr.wait_synced(2)
    wait_files(out, lambda: good)
    err = kr.stderr()
    for obj in ("configmaps default/cm", "configmaps default/bin", "secrets default/sec"):
        for k, why in HOSTILE_KEYS.items():
            shown = json.dumps(k)[1:-1]   # the key as the object's JSON spells it
            shown = shown[:64] + "..." if len(shown) > 64 else shown
            want = "unable to write key \"%s\" of %s: refused: %s" % (shown, obj, why)
            check(want in err, "not logged: %s" % want)
    check(kr.running(), "kreflect died")
    check_manifest(out)
    check("bad-secret" not in err, "a Secret value was logged")


@scenario("OnceCountsRefusedFiles", 4)
def t_once_refused_count(s):
    """--once whose --dir refused files (keys that cannot be file names, a
    Secret value that is not base64) still exits 0 with the other files in
    place, and its last line says how many were refused, the same number as
    the error lines naming them; a run with nothing refused has no such line,
    and one refusal is counted in the singular."""
    s.server()
    put(s, "configmaps", "cm", data={"ok": "fine", "../up": "x", "a/b": "x"})
    s.ctl.create("secrets", "default", "sec", data={"broken": "!" + b64(b"value")[1:], "good": b64(b"v")})
    out = s.path("out")
    kr = s.kreflect("--once", "--dir", out, "-o", "none", resources=("configmaps", "secrets"))
    check(kr.wait_exit(30) == 0, "--once exited %s: %s" % (kr.rc, kr.stderr_tail()))
    check(diff_files(out, {"ok": b"fine", "good": b"v"}) == {}, "files: %s" % diff_files(out, {"ok": b"fine", "good": b"v"}))
    lines = kr.stderr().strip().splitlines()
    named = [ln for ln in lines if "unable to write" in ln]
    check(len(named) == 3, "3 refusals named, got %d: %s" % (len(named), named))
    want = "--once: --dir refused or could not write 3 files or objects (each named above)"
    check(want in lines[-1], "the last line does not count them: %r" % lines[-1])

    # One refusal: the singular.
    s.ctl.delete("configmaps", "default", "cm")
    kr2 = s.kreflect("--once", "--dir", out, "-o", "none", resources=("configmaps", "secrets"))
    check(kr2.wait_exit(30) == 0, "the second run exited %s: %s" % (kr2.rc, kr2.stderr_tail()))
    last = kr2.stderr().strip().splitlines()[-1]
    check("--dir refused or could not write 1 file or object (each named above)" in last,
          "one refusal: %r" % last)

    # Nothing refused: no count at all.
    s.ctl.delete("secrets", "default", "sec")
    kr3 = s.kreflect("--once", "--dir", out, "-o", "none", resources=("configmaps", "secrets"))
    check(kr3.wait_exit(30) == 0, "the clean run exited %s: %s" % (kr3.rc, kr3.stderr_tail()))
    check("refused or could not write" not in kr3.stderr(), "a clean run counts refusals: %s" % kr3.stderr_tail())



# =========================================================================== 5. notifications

def wait_runs(log, n, timeout, what=None):
    return wait_until(lambda: runs(log) if len(runs(log)) >= n else None, timeout,
                      what or "%d run(s) of the hook" % n)


def quiet(log, n, seconds):
    """No run beyond the nth for that long."""
    time.sleep(seconds)
    got = runs(log)
    check(len(got) == n, "%d runs of the hook, expected %d: %s" % (len(got), n, [
        (r["events"], len(r["keys"])) for r in got]))
    return got


@scenario("HundredChangesOneRun", 8)
def t_hundred_changes(s):
    """100 changes spread over most of one second make exactly one --exec run
    (--debounce 1000), a debounce after the first of them; its stdin lists
    the 100 changed keys and KREFLECT_EVENTS says 100; the files were there
    before it ran."""
    s.server()
    for b in range(10):
        s.ctl.bulk("configmaps", "default", 10, size=10, name_pattern="n{i:03d}", start=10 * b,
                   labels={"batch": str(b)})
    log = s.path("hook.log")
    out = s.path("out")
    kr = s.kreflect("--dir", out, "--exec", hook_cmd(log), "--debounce", "1000")
    kr.wait_synced()
    first = wait_runs(log, 1, 10, "the run after the first sync")[0]
    check(first["start"] >= synced_at(kr) - 0.2, "the first run started before the sync")
    time.sleep(0.3)
    # The 100 changes must fall in one window; a machine too busy to make them within
    # 0.9 s makes the attempt prove nothing, so it is made again (at most 3 times).
    n = len(runs(log))
    for attempt in range(3):
        if attempt:
            time.sleep(2.5)     # the runs of the attempt that proved nothing are over
            n = len(runs(log))
        t0 = time.time()
        for i in range(10):
            s.ctl.touch("configmaps", "default", selector="batch=%d" % i)
            time.sleep(0.03)
        took = time.time() - t0
        if took < 0.9:
            break
    check(took < 0.9, "3 times the 100 changes took more than 0.9 s (last %.2f s): the test proves nothing" % took)
    wait_runs(log, n + 1, 10)
    got = quiet(log, n + 1, 2.0)
    r = got[n]
    want = {"configmaps/default/n%03d" % i for i in range(100)}
    check(r["events"] == "100", "KREFLECT_EVENTS=%s, expected 100" % r["events"])
    check(len(r["keys"]) == 100 and set(r["keys"]) == want, "stdin listed %d keys (%d distinct), %d missing"
          % (len(r["keys"]), len(set(r["keys"])), len(want - set(r["keys"]))))
    check(0.9 <= r["start"] - t0 <= 3, "the run started %.2f s after the first change, expected about 1 s"
          % (r["start"] - t0))
    check("sh exited with 0" in kr.stderr(), "the exit status is not logged")


def no_run_before_sync(s, relist):
    s.server()
    put(s, "configmaps", "a", data={"k": "1"})
    put(s, "secrets", "s", secret={"p": b"1"})
    s.ctl.fault(kind="stall", seconds=4, match="secrets", count=-1)
    if relist:
        # The ConfigMaps' watch-list ends in 410 after its two events: a relist, a second SYNCED.
        s.ctl.fault(kind="watch_error", code=410, match="configmaps", watch=True, after_events=2, count=1)
    log = s.path("hook.log")
    t0 = time.time()
    kr = s.kreflect("--exec", hook_cmd(log), "--debounce", "300", resources=("configmaps", "secrets"))
    kr.wait(lambda ls: sum(1 for e in ls if e.get("type") == "SYNCED" and e["resource"] == "configmaps")
            >= (2 if relist else 1), 10, "configmaps to sync")
    s.ctl.update("configmaps", "default", "a", data={"k": "2"})
    kr.wait(lambda ls: any(e.get("type") == "SYNCED" and e["resource"] == "secrets" for e in ls), 15,
            "secrets to sync")
    s.ctl.clear_faults()
    with kr.lock:
        t_sec = [t for ev, t in zip(kr.lines, kr.times) if ev.get("type") == "SYNCED" and
                 ev["resource"] == "secrets"][0]
    check(t_sec - t0 >= 3.5, "the Secrets synced %.1f s after the start: the stall did not hold" % (t_sec - t0))
    got = wait_runs(log, 1, 10)
    early = [r for r in got if r["start"] < t_sec - 0.05]
    check(not early, "the hook ran %.2f s before the Secrets' sync" % (t_sec - early[0]["start"]) if early else "")
    check(got[0]["start"] - t_sec < 2, "the first run came %.1f s after the sync" % (got[0]["start"] - t_sec))
    got = quiet(log, 1, 1.0)
    check(got[0]["events"] != "<unset>" and int(got[0]["events"]) >= 3,
          "the first run had KREFLECT_EVENTS=%s: the changes before the sync are not counted" % got[0]["events"])


@scenario("NoRunBeforeFirstSync", 8)
def t_no_run_before_sync(s):
    """Nothing runs before every resource has synced once: the Secrets'
    list stalls for 4 s while the ConfigMaps sync and change; the first run
    comes after the Secrets' SYNCED, one debounce later, carrying the
    changes made before it."""
    no_run_before_sync(s, relist=False)


@scenario("NoRunBeforeEveryResourceSynced", 10)
def t_no_run_before_every_sync(s):
    """As above, and the ConfigMaps relist meanwhile: their second SYNCED
    is not the Secrets' first, so still nothing runs before the Secrets sync."""
    no_run_before_sync(s, relist=True)


@scenario("ChangesDuringARunMakeOneMore", 12)
def t_changes_during_run(s):
    """A run still going (the command sleeps 2 s) when changes come: exactly
    one more run after it, carrying all of them; never two at once; the exit
    status of each run is logged."""
    s.server()
    put(s, "configmaps", "a", data={"k": "0"})
    log = s.path("hook.log")
    kr = s.kreflect("--exec", hook_cmd(log, pause=2, code=3), "--debounce", "200")
    kr.wait_synced()
    wait_until(lambda: "running sh" in kr.stderr(), 10, "the first run to start")
    for v in range(1, 4):
        time.sleep(0.3)
        s.ctl.update("configmaps", "default", "a", data={"k": str(v)})
    put(s, "configmaps", "b", data={"k": "new"})
    check(not runs(log), "the first run ended before the changes: the test proves nothing")
    got = wait_runs(log, 2, 15)
    got = quiet(log, 2, 3.0)
    check(got[1]["start"] >= got[0]["end"], "two runs at once: %s" % got)
    check(got[1]["events"] == "4" and set(got[1]["keys"]) == {"configmaps/default/a", "configmaps/default/b"},
          "the second run had KREFLECT_EVENTS=%s and keys %s" % (got[1]["events"], got[1]["keys"]))
    err = kr.stderr()
    check(err.count("sh exited with 3") == 2, "the exit statuses are not logged: %s" % kr.stderr_tail())


@scenario("SignalPidfileReReadEachTime", 8)
def t_signal_pidfile(s):
    """--signal HUP:@PIDFILE reads the file at each notification: the
    signal follows a new pid written there; a file without a pid is an
    error and kreflect goes on."""
    s.server()
    put(s, "configmaps", "a", data={"k": "0"})
    pidfile, out = s.path("app.pid"), s.path("out")
    logs = {n: s.path("app-%s.log" % n) for n in "AB"}
    apps = {}

    def start(n):
        apps[n] = s.spawn(["sh", APP, pidfile + "." + n, logs[n], os.path.join(out, "k")])
        wait_until(lambda: os.path.exists(pidfile + "." + n), 10, "app %s to start" % n)
        time.sleep(0.2)

    def point_at(n):
        with open(pidfile + ".w", "w") as f:
            f.write("%d\n" % apps[n].pid)
        os.replace(pidfile + ".w", pidfile)

    start("A")
    start("B")
    point_at("A")
    kr = s.kreflect("--dir", out, "--signal", "HUP:@" + pidfile, "--debounce", "300")
    kr.wait_synced()
    wait_until(lambda: len(hups(logs["A"])) == 1, 10, "A's SIGHUP after the sync")
    point_at("B")
    s.ctl.update("configmaps", "default", "a", data={"k": "1"})
    wait_until(lambda: len(hups(logs["B"])) == 1, 10, "B's SIGHUP after the pid file changed")
    point_at("A")
    s.ctl.update("configmaps", "default", "a", data={"k": "2"})
    wait_until(lambda: len(hups(logs["A"])) == 2, 10, "A's second SIGHUP")
    time.sleep(0.6)
    check(len(hups(logs["A"])) == 2 and len(hups(logs["B"])) == 1, "SIGHUPs: A %d, B %d; expected 2 and 1"
          % (len(hups(logs["A"])), len(hups(logs["B"]))))
    check([c for _, c in hups(logs["A"])] == ["0", "2"] and hups(logs["B"])[0][1] == "1",
          "the apps did not read the new files on SIGHUP: %s %s" % (hups(logs["A"]), hups(logs["B"])))
    with open(pidfile, "w") as f:
        f.write("not a pid\n")
    s.ctl.update("configmaps", "default", "a", data={"k": "3"})
    wait_until(lambda: "pid file %s does not hold a pid" % pidfile in kr.stderr(), 10, "the bad pid file error")
    point_at("B")
    s.ctl.update("configmaps", "default", "a", data={"k": "4"})
    wait_until(lambda: len(hups(logs["B"])) == 2, 10, "B's SIGHUP after the bad pid file")
    check("sent signal 1 to pid %d" % apps["B"].pid in kr.stderr(), "the signal sent is not logged")
    check(kr.running(), "kreflect died")


@scenario("FilesWrittenBeforeTheHookRuns", 8)
def t_files_before_hook(s):
    """With --debounce 0 the hook and the signal follow each change at once,
    and both see the file already holding the new content."""
    s.server()
    put(s, "configmaps", "a", data={"conf": "v0"})
    log, pidfile, applog, out = s.path("hook.log"), s.path("app.pid"), s.path("app.log"), s.path("out")
    conf = os.path.join(out, "conf")
    app = s.spawn(["sh", APP, pidfile, applog, conf])
    wait_until(lambda: os.path.exists(pidfile), 10, "the app to start")
    kr = s.kreflect("--dir", out, "--exec", hook_cmd(log, file=conf), "--signal", "HUP:@" + pidfile,
                    "--debounce", "0")
    kr.wait_synced()
    got = wait_runs(log, 1, 10)
    check(got[0]["file"] == "v0", "the first run saw %r, expected v0" % got[0]["file"])
    wait_until(lambda: hups(applog), 10, "the app's first SIGHUP")
    for v in range(1, 6):
        s.ctl.update("configmaps", "default", "a", data={"conf": "v%d" % v})
        got = wait_runs(log, v + 1, 10)
        check(got[v]["file"] == "v%d" % v, "run %d saw %r, expected v%d" % (v + 1, got[v]["file"], v))
        wait_until(lambda: len(hups(applog)) >= v + 1, 10, "SIGHUP %d" % (v + 1))
        check(hups(applog)[v][1] == "v%d" % v, "the app read %r on SIGHUP %d, expected v%d"
              % (hups(applog)[v][1], v + 1, v))
    check(app.poll() is None, "the app died")



# =========================================================================== 6. the README's recipes

def gateway_objects(s):
    """What the recipes mirror: namespace edge, label app=gateway; and what they must not."""
    gw = {"app": "gateway"}
    put(s, "configmaps", "gateway-config", ns="edge", data={"gateway.conf": "listen 8443\n"}, labels=gw)
    put(s, "secrets", "gateway-tls", ns="edge", secret={"tls.key": b"-----BEGIN KEY-----\x00\xff"}, labels=gw)
    put(s, "configmaps", "unrelated", ns="edge", data={"unrelated.conf": "no"}, labels={"app": "other"})
    put(s, "configmaps", "gateway-config", ns="default", data={"wrong-namespace.conf": "no"}, labels=gw)


def recipe_files(s):
    return want_files(s, ("configmaps", "secrets"), ns="edge", selector={"app": "gateway"})


@scenario("Recipe1FilesForAnAppWithSighup", 8)
def t_recipe1(s):
    """README "On the device", recipe 1, with its command line: the files of
    the ConfigMaps and Secrets labelled app=gateway in edge, and one SIGHUP
    to the application (pid from its pid file) after the first sync and
    then per batch of changes, the files in place when it reloads."""
    s.server()
    gateway_objects(s)
    pidfile, applog, conf = s.path("gateway.pid"), s.path("gateway.log"), s.path("config")
    s.spawn(["sh", APP, pidfile, applog, os.path.join(conf, "gateway.conf")])
    wait_until(lambda: os.path.exists(pidfile), 10, "the application to start")
    kr = s.kreflect_plain("--kubeconfig", s.srv.ready["kubeconfig"], "-n", "edge", "-l", "app=gateway",
                          "--dir", conf, "-o", "none",
                          "--signal", "HUP:@" + pidfile, "--debounce", "1000", "configmaps", "secrets")
    wait_files(conf, lambda: recipe_files(s), timeout=10)
    check(set(tree(conf)) == {MANIFEST, "gateway.conf", "tls.key"}, "files %s" % sorted(tree(conf)))
    check(tree(conf)["tls.key"].mode == 0o600 and tree(conf)["gateway.conf"].mode == 0o644, "modes")
    wait_until(lambda: hups(applog), 10, "the SIGHUP after the first sync")
    time.sleep(1.5)
    got = hups(applog)
    check(len(got) == 1 and got[0][1] == "listen 8443", "after the first sync the application got %s" % got)
    s.ctl.update("configmaps", "edge", "gateway-config", data={"gateway.conf": "listen 9443\n"})
    s.ctl.update("secrets", "edge", "gateway-tls", data={"tls.key": b64(b"rotated")})
    s.ctl.update("configmaps", "edge", "unrelated", data={"unrelated.conf": "still no"})
    wait_until(lambda: len(hups(applog)) >= 2, 10, "the SIGHUP after the changes")
    time.sleep(1.5)
    got = hups(applog)
    check(len(got) == 2 and got[1][1] == "listen 9443", "after two changes the application got %s" % got)
    check(tree(conf)["tls.key"].data == b"rotated", "tls.key was not rewritten")
    check("sent signal 1 to pid" in kr.stderr(), "the signal is not logged")
    check(not errors(kr), "errors logged: %s" % errors(kr)[:3])


def service_account(s):
    """The in-cluster environment of a pod in namespace edge, pointing at the test server."""
    sa = s.path("serviceaccount")
    os.makedirs(sa, exist_ok=True)
    with open(s.srv.ready["token_file"]) as f, open(os.path.join(sa, "token"), "w") as g:
        g.write(f.read())
    with open(s.srv.ready["ca"]) as f, open(os.path.join(sa, "ca.crt"), "w") as g:
        g.write(f.read())
    with open(os.path.join(sa, "namespace"), "w") as g:
        g.write("edge")
    env = e2e.hermetic_env(s.dir)
    env.update(KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(s.srv.ready["port"]),
               KREFLECT_SERVICEACCOUNT_DIR=sa)
    return env


def run_once(s, args, env, timeout=30):
    t0 = time.monotonic()
    p = subprocess.run([e2e.BIN] + list(args), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=timeout)
    took = time.monotonic() - t0
    with open(s.path("once-%d.err" % int(t0 * 1000)), "wb") as f:
        f.write(p.stderr)
    for mark in e2e.SANITIZER_MARKS:
        check(mark.encode() not in p.stderr, "sanitizer report: %s" % p.stderr[-400:])
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), took


@scenario("Recipe2InitContainerOnce", 10)
def t_recipe2(s):
    """README "On the device", recipe 2: the init container's arguments
    (in-cluster, namespace from the service account) and the same as a
    command with a kubeconfig: list, write the files, exit 0; run again
    after a deletion (the pod restarted), exactly that file goes; a server
    that is down is exit 1 within the timeout, naming the resource."""
    s.server()
    gateway_objects(s)
    conf = s.path("config")
    args = ["--once", "--timeout", "60", "-l", "app=gateway", "--dir", conf, "-o", "none",
            "configmaps", "secrets"]
    rc, out, err, took = run_once(s, args, service_account(s))
    check(rc == 0, "the init container exited %d: %s" % (rc, err.strip().splitlines()[-3:]))
    check("in-cluster" in err, "it did not connect in-cluster: %s" % err.splitlines()[:2])
    check(diff_files(conf, recipe_files(s)) == {}, "files: %s" % diff_files(conf, recipe_files(s)))
    check(tree(conf)["tls.key"].mode == 0o600, "tls.key is not 0600")
    check(out == "", "-o none printed %r" % out[:80])
    before = tree(conf)

    s.ctl.delete("secrets", "edge", "gateway-tls")
    rc, _, err, _ = run_once(s, args, service_account(s))
    check(rc == 0, "the second run exited %d: %s" % (rc, err.strip().splitlines()[-3:]))
    check(set(tree(conf)) == {MANIFEST, "gateway.conf"}, "after the Secret's deletion: %s" % sorted(tree(conf)))
    check_untouched({"gateway.conf": before["gateway.conf"]}, conf, "the second run")

    # The shell form of the recipe, with a kubeconfig.
    conf2 = s.path("config2")
    shell = ["--kubeconfig", s.srv.ready["kubeconfig"], "-n", "edge", "-l", "app=gateway", "--once",
             "--timeout", "60", "--dir", conf2, "-o", "none", "configmaps", "secrets"]
    rc, _, err, _ = run_once(s, shell, e2e.hermetic_env(s.dir))
    check(rc == 0 and diff_files(conf2, recipe_files(s)) == {},
          "the command form: exit %d, files %s" % (rc, diff_files(conf2, recipe_files(s))))

    # Nothing listening: exit 1 within --timeout, naming the resource.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    env = service_account(s)
    env["KUBERNETES_SERVICE_PORT"] = str(port)
    down = list(args)
    down[2] = "3"
    rc, _, err, took = run_once(s, down, env)
    check(rc == 1, "against a server that is down: exit %d" % rc)
    check(2.5 <= took <= 8, "exited after %.1f s with --timeout 3" % took)
    check("unable to sync configmaps within the --timeout" in err, "no message naming the resource: %s"
          % err.strip().splitlines()[-3:])


# =========================================================================== runner

if __name__ == "__main__":
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, e2e.on_signal)
    signal.signal(signal.SIGINT, e2e.on_signal)
    sys.exit(e2e.main(sys.argv[1:]))
