#!/usr/bin/env python3
"""Soak: the real kreflect binary against the test API server for N minutes.

    python3 tests/soak/soak.py [--minutes N] [--bin build/kreflect] [--out build/soak]
                               [--fault-every S] [--seed N] [--faults NAME,...]
    python3 tests/soak/soak.py --replot DIR      (soak.svg again from DIR's CSV)
    make soak MINUTES=N

kreflect mirrors ConfigMaps and Secrets of namespace `default` over verified
TLS, printing JSON lines to a file, writing the objects as files (--dir, object
layout), running a command after each batch of changes (--exec), logging at -v 2
(each line prefixed here with the elapsed seconds). Meanwhile:

  changes   one every 0.25 s: update (data keys changed, added or removed,
            labels, binaryData), add, delete, delete-then-recreate (a new uid),
            over up to 40 ConfigMaps and 20 Secrets with text (some non-ASCII
            and escapes) and binary values of 16 B to 8 KiB;
  warm-up   right after the first sync, the changes wait and the ConfigMaps are
            updated in bulk until the store's arena has compacted once (read
            from the process), at most until 100 s: every arena page that
            steady state uses is then touched before the baseline (see below);
  faults    after the warm-up, one every --fault-every seconds (default 60),
            rotating through the server's faults, aimed at one resource and at
            the other on the next round: dropped watches, 410 after a
            compaction (kreflect SIGSTOPped meanwhile), a watch stalled until kreflect gives up, 503 and 429
            with Retry-After, a connection closed mid-TLS-record, an ERROR 410
            event mid-stream, a garbage line, a TCP reset, an invalid chunk, a
            token rotation, clean ends with random chunking, a watch-list that
            never sends its end bookmark, a server restart (state kept, new
            uids, resourceVersions moved on). The next fault waits until the
            last one took effect, or for 240 s (a backoff and a stalled
            watch's 120 s idle deadline can come before it).
            None starts in the last 90 s.

Every 10 s it samples into OUT/soak.csv: elapsed seconds, VmRSS and how much of
it is the arena (its pages present in /proc/PID/pagemap; the arena's address
from the unstripped binary's symbols), open descriptors (sockets and others),
the store's arena figures (tests/bench/store_stats.py reads them from the live
process), change events and SYNCED lines printed, relists, notifications run,
faults injected.

At the end the changes stop, every fault is cleared, and it waits (up to 180 s)
for the mirror to equal the server's state; then it checks:

  alive      kreflect ran the whole time and exited 0 on SIGTERM;
  rss        VmRSS outside the arena did not grow after the baseline (120 s):
             the largest later sample is at most 64 kB above the baseline's;
  arena      the arena's resident pages stayed under the ceiling the warm-up
             reached (its bump tail's high water at the baseline) + 64 kB, and
             the high water itself moved by at most 64 kB;
  fds        descriptors other than sockets did not grow: never above the
             largest count of the minute before the baseline in two samples in
             a row, nor at the end; sockets at most one per resource;
  jsonl      the JSON lines folded from empty equal the server's objects
             (every field but managedFields), with no event that does not fit
             (ADDED of a mirrored key, MODIFIED or DELETED of an absent one,
             a resourceVersion going backwards);
  dir        the files under --dir are exactly the server's data keys, with
             their decoded bytes and modes, and the manifest lists exactly them;
  secrets    no Secret value, in clear or base64, and no token is in
             kreflect's log;
  faults     every fault took effect (the server applied it, and kreflect
             watched, relisted or fell back after it as that fault demands).

Growth. kreflect has no heap: its RSS grows only by touching static pages. The
arena is a bump allocator that compacts when its tail runs short or its dead
bytes reach the held ones, and gives the pages above twice the held bytes back
(madvise), so its resident pages follow the bump tail: a sawtooth up to a fixed
high water, not growth. VmRSS is therefore
split: the arena is judged against the ceiling the warm-up reached, everything
else (TLS heap, buffers, stack, index) must stay flat. 64 kB (16 pages) is the
tolerance of both: the arena's high water can still move by about one of the
largest soak objects (three 8 KiB values, ~33 kB encoded) when one lands at the
compaction edge, and a rare path can run a few stack pages deeper. Descriptors
get no slack: each sample is the least of five reads 0.1 s apart (a temporary
file of the directory sink or the pipe to the --exec command lives for
milliseconds), sockets are counted apart (none while a connection is backing
off), and one sample above the baseline alone is reported, not failed: a leak
stays.

The summary also gives the share of the time each resource had a watch open
(from the servers' request logs) and counts of what kreflect's log says.
It prints, last, "N passed, N failed"; the exit status is 0 only if every
check passed. OUT also gets soak.svg (RSS, descriptors and arena over time,
faults marked, the baseline dashed), kreflect's output (kreflect.jsonl) and log,
the servers' logs and request logs (apiserver/), the fault list (faults.txt),
the notification runs and the directory mirror.
"""

import argparse
import base64
import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from control import Control, ControlError, ServerProcess  # noqa: E402
from store_stats import static_objects  # noqa: E402

NS = "default"
RESOURCES = ("configmaps", "secrets")
KIND = {"configmaps": "ConfigMap", "secrets": "Secret"}
SHORT = {"configmaps": "cm", "secrets": "sec"}
POPULATION = {"configmaps": (20, 40), "secrets": (10, 20)}   # (start, most)
KEYS = ("a.txt", "b.conf", "config.yaml", "k3", "k4", "bin.dat")
SAMPLE_EVERY = 10.0
CHANGE_EVERY = 0.25
BASELINE_S = 120.0
RSS_TOLERANCE_KB = 64
NO_FAULT_BEFORE_END_S = 90.0
INITIAL_EVENTS_TIMEOUT_S = 20   # kreflect gives up on a watch-list after 10 x this at most
FAULT_PATIENCE_S = 240.0       # a backoff (up to 30 s x [1, 2)) and then a stall (65 s idle deadline at most)
CONVERGE_TIMEOUT_S = 180.0
BOOKMARK_INTERVAL_S = 10


# What the summary counts in kreflect's log (label, substring).
LOG_NOTES = (("watches closed and resumed", ": watch closed: "),
             ("watches ended by the server", ": watch ended by the server: "),
             ("objects lost to another resource's framing, re-read", "took the buffer of one in progress"),
             ("very short watches", ": very short watch"),
             ("Retry-After honoured", "retrying in "),
             ("malformed streams", "unable to read the watch stream"),
             ("unparsable events", "unable to parse a watch event"),
             ("401 retried with a new token", "401 Unauthorized; retrying"),
             ("syncs by watch-list", "by watch-list in"),
             ("syncs by LIST", " list in "),
             ("watch-list fallbacks", "watch-list stream ended before"))


class Fail(Exception):
    pass


def log(msg):
    print("soak: " + msg, flush=True)


# =========================================================================== the process

def proc_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise Fail("no VmRSS for pid %d" % pid)


def proc_fds(pid, reads=5, gap=0.1):
    """(descriptors, sockets, others, targets): the least of each count over a
    few reads 0.1 s apart, so that a transient descriptor (a temporary file of
    the directory sink, the pipe to a notification command) is not counted;
    and what the descriptors were at the read with the fewest."""
    best, targets = None, []
    d = "/proc/%d/fd" % pid
    for i in range(reads):
        names = sorted(os.listdir(d), key=int)
        links = []
        for n in names:
            try:
                links.append("%s -> %s" % (n, os.readlink(os.path.join(d, n))))
            except OSError:
                pass
        socks = sum(1 for l in links if " -> socket:" in l)
        cur = (len(names), socks, len(names) - socks)
        if best is None or cur[0] < best[0]:
            targets = links
        best = cur if best is None else tuple(min(a, b) for a, b in zip(best, cur))
        if i + 1 < reads:
            time.sleep(gap)
    return best + (targets,)


def arena_stats(pid, unstripped):
    """{'used','garbage','high_water','entries','objects','compactions'} or None."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "store_stats.py"), str(pid),
                        unstripped], capture_output=True, text=True, timeout=30)
    f = r.stdout.split()
    if len(f) != 6:
        return None
    return dict(zip(("used", "garbage", "high_water", "entries", "objects", "compactions"), map(int, f)))


def big_symbols(unstripped, least=64 * 1024):
    """{name: (address, size)} of the static objects of at least `least` bytes."""
    return {n: r[0] for n, r in static_objects(unstripped).items() if len(r) == 1 and r[0][1] >= least}


def symbol_range(unstripped, name):
    """(address, size) of a static symbol of the (static, non-PIE) binary, or None."""
    hits = static_objects(unstripped).get(name, [])
    return hits[0] if len(hits) == 1 else None


PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_kb(pid, addr, size):
    """kB of [addr, addr + size) resident in pid, from /proc/PID/pagemap (bit 63: present)."""
    first, last = addr // PAGE, (addr + size - 1) // PAGE
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first + 1) * 8)
    n = sum(1 for i in range(0, len(raw), 8) if raw[i + 7] & 0x80)
    return n * PAGE // 1024


def rss_split(pid, arena):
    """(VmRSS kB, kB of it in the arena); the arena read on both sides of VmRSS
    until the two agree within 4 pages (a compaction can discard pages between)."""
    for _ in range(10):
        a1 = resident_kb(pid, *arena)
        rss = proc_rss_kb(pid)
        a2 = resident_kb(pid, *arena)
        if abs(a1 - a2) <= 4 * PAGE // 1024:
            return rss, (a1 + a2) // 2
        time.sleep(0.01)
    return rss, a2


def resident_by_symbol(pid, symbols):
    """{name: resident kB} of each static object, from /proc/PID/pagemap."""
    return {n: resident_kb(pid, a, size) for n, (a, size) in sorted(symbols.items())}


# =========================================================================== kreflect's output

def obj_id(obj):
    md = obj.get("metadata") or {}
    return (obj.get("kind"), md.get("namespace", ""), md.get("name", ""))


class Output:
    """kreflect's stdout file, read as it grows and folded from empty."""

    def __init__(self, path):
        self.path, self.off, self.partial = path, 0, b""
        self.mirror, self.anomalies = {}, []
        self.events, self.synced, self.lines = 0, {}, 0
        self.by_type = {}

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return
        self.off += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        for raw in lines:
            if raw:
                self._apply(raw)

    def _apply(self, raw):
        self.lines += 1
        try:
            ev = json.loads(raw)
        except ValueError:
            self.anomalies.append("line %d: not JSON: %r" % (self.lines, raw[:80]))
            return
        t = ev.get("type")
        self.by_type[t] = self.by_type.get(t, 0) + 1
        if t == "SYNCED":
            res = ev.get("resource")
            self.synced[res] = self.synced.get(res, 0) + 1
            return
        obj = ev.get("object") or {}
        k = obj_id(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
        if t in ("ADDED", "MODIFIED", "DELETED"):
            self.events += 1
        if t == "ADDED":
            if k in self.mirror:
                self.anomalies.append("line %d: ADDED %s, already mirrored" % (self.lines, "/".join(k)))
            self.mirror[k] = obj
        elif t == "MODIFIED":
            old = self.mirror.get(k)
            if old is None:
                self.anomalies.append("line %d: MODIFIED %s, not mirrored" % (self.lines, "/".join(k)))
            else:
                orv = old["metadata"].get("resourceVersion") or ""
                if rv.isdigit() and orv.isdigit() and int(rv) <= int(orv):
                    self.anomalies.append("line %d: MODIFIED %s to resourceVersion %s, not newer than %s"
                                          % (self.lines, "/".join(k), rv, orv))
            self.mirror[k] = obj
        elif t == "DELETED":
            if k not in self.mirror:
                self.anomalies.append("line %d: DELETED %s, not mirrored" % (self.lines, "/".join(k)))
            self.mirror.pop(k, None)
        elif t != "RESYNC":
            self.anomalies.append("line %d: unknown type %r" % (self.lines, t))

    def relists(self):
        return sum(max(0, n - 1) for n in self.synced.values())


# =========================================================================== expected state

def normalize(obj, kind):
    o = json.loads(json.dumps(obj))
    o.setdefault("kind", kind)
    o.setdefault("apiVersion", "v1")
    (o.get("metadata") or {}).pop("managedFields", None)
    return o


def server_objects(ctl):
    """{(kind, ns, name): object} of every ConfigMap and Secret in NS."""
    out = {}
    for res in RESOURCES:
        st = ctl.state(resource=res, namespace=NS, objects=True)
        for entry in st["objects"].values():
            o = entry["object"]
            md = o["metadata"]
            out[(KIND[res], md.get("namespace", ""), md["name"])] = normalize(o, KIND[res])
    return out


def expected_files(objs):
    """{relative path: (bytes, mode)} the object layout of --dir makes of objs."""
    files = {}
    for (kind, ns, name), o in objs.items():
        base = "%s/%s/" % (ns, name)
        if kind == "ConfigMap":
            for k, v in (o.get("data") or {}).items():
                files[base + k] = (v.encode("utf-8"), 0o644)
            for k, v in (o.get("binaryData") or {}).items():
                files[base + k] = (base64.b64decode(v), 0o644)
        else:
            for k, v in (o.get("data") or {}).items():
                files[base + k] = (base64.b64decode(v), 0o600)
    return files


def actual_files(root):
    files, empty_dirs = {}, []
    for d, dirs, names in os.walk(root):
        rel_d = os.path.relpath(d, root)
        if not dirs and not names and rel_d != ".":
            empty_dirs.append(rel_d)
        for n in names:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if rel == ".kreflect-manifest":
                continue
            with open(p, "rb") as f:
                files[rel] = (f.read(), os.stat(p).st_mode & 0o777)
    return files, empty_dirs


def manifest_paths(root):
    """The live paths of the directory sink's manifest journal."""
    live = set()
    with open(os.path.join(root, ".kreflect-manifest"), "rb") as f:
        lines = f.read().decode("utf-8", "replace").split("\n")
    for line in lines[1:]:
        if not line:
            continue
        f = line.split("\t")
        if f[0] == "+" and len(f) >= 4:
            live.add(f[-1])
        elif f[0] == "-" and len(f) >= 2:
            live.discard(f[-1])
    return live


def diff_mirror(mirror, want, limit=8):
    out = []
    for k in sorted(set(mirror) | set(want)):
        a, b = mirror.get(k), want.get(k)
        if a is None:
            out.append("missing from the mirror: %s rv %s" % ("/".join(k), b["metadata"]["resourceVersion"]))
        elif b is None:
            out.append("in the mirror, not on the server: %s rv %s" % ("/".join(k),
                                                                        a["metadata"].get("resourceVersion")))
        elif normalize(a, k[0]) != b:
            out.append("differs: %s mirror rv %s, server rv %s" % ("/".join(k), a["metadata"].get("resourceVersion"),
                                                                  b["metadata"]["resourceVersion"]))
        if len(out) >= limit:
            out.append("...")
            break
    return out


def diff_files(have, want, limit=8):
    out = []
    for p in sorted(set(have) | set(want)):
        if p not in have:
            out.append("missing file %s" % p)
        elif p not in want:
            out.append("extra file %s" % p)
        elif have[p][0] != want[p][0]:
            out.append("content of %s differs (%d bytes, want %d)" % (p, len(have[p][0]), len(want[p][0])))
        elif have[p][1] != want[p][1]:
            out.append("mode of %s is %o, want %o" % (p, have[p][1], want[p][1]))
        if len(out) >= limit:
            out.append("...")
            break
    return out


# =========================================================================== the changes

TEXT = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-=:,.\n"
        "\t\"\\/é→€✓𝄞")


class Changes:
    """A steady mix of writes through the control API; remembers what exists."""

    def __init__(self, ctl, rng):
        self.ctl, self.rng = ctl, rng
        self.names = {r: ["%s-%03d" % (SHORT[r], i) for i in range(POPULATION[r][1])] for r in RESOURCES}
        self.live = {r: set() for r in RESOURCES}
        self.counts = {"add": 0, "update": 0, "delete": 0, "recreate": 0, "failed": 0}
        self.secret_values = set()     # every Secret value written, to look for in kreflect's log

    def value(self, res):
        """A random value: mostly text (some non-ASCII); Secrets and `bin.dat` binary."""
        n = int(self.rng.choice((32, 200, 1024, 3000, 8192)) * (0.5 + self.rng.random()))
        n = max(16, min(n, 8192))
        if res == "secrets":
            raw = bytes(self.rng.getrandbits(8) for _ in range(n))
            self.secret_values.add(raw)
            return base64.b64encode(raw).decode()
        return "".join(self.rng.choice(TEXT) for _ in range(n))

    def content(self, res, nkeys=None):
        keys = self.rng.sample(KEYS[:5], nkeys or self.rng.randint(1, 3))
        body = {"data": {k: self.value(res) for k in keys}}
        if res == "configmaps" and self.rng.random() < 0.3:
            raw = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(16, 2048)))
            body["binaryData"] = {"bin.dat": base64.b64encode(raw).decode()}
        return body

    def create(self, res, name):
        body = self.content(res)
        self.ctl.create(res, NS, name, labels={"soak": "yes", "gen": str(self.rng.randint(0, 9))}, **body)
        self.live[res].add(name)

    def populate(self):
        for res in RESOURCES:
            for name in self.names[res][:POPULATION[res][0]]:
                self.create(res, name)

    def adopt(self, objs):
        """After a server restart: what exists is what was recreated."""
        for res in RESOURCES:
            self.live[res] = {n for (k, _ns, n) in objs if k == KIND[res]}

    def step(self):
        res = self.rng.choice(RESOURCES)
        live, free = self.live[res], [n for n in self.names[res] if n not in self.live[res]]
        lo = POPULATION[res][0] // 2
        op = self.rng.choices(("update", "add", "delete", "recreate"), (55, 15, 15, 15))[0]
        if op == "add" and not free:
            op = "update"
        if op == "delete" and len(live) <= lo:
            op = "add" if free else "update"
        if not live:
            op = "add"
        try:
            if op == "add":
                self.create(res, self.rng.choice(free))
            else:
                name = self.rng.choice(sorted(live))
                if op == "update":
                    self.update(res, name)
                elif op == "delete":
                    self.ctl.delete(res, NS, name)
                    live.discard(name)
                else:
                    self.ctl.delete(res, NS, name)
                    live.discard(name)
                    self.create(res, name)
            self.counts[op] += 1
        except (ControlError, OSError) as e:
            self.counts["failed"] += 1
            return "%s %s: %s" % (op, res, e)
        return None

    def update(self, res, name):
        cur = self.ctl.get(res, NS, name)
        have = sorted((cur.get("data") or {}).keys())
        r = self.rng.random()
        if r < 0.15:
            self.ctl.update(res, NS, name, labels={"gen": str(self.rng.randint(0, 9))})
            return
        data = {self.rng.choice(have or list(KEYS[:5])): self.value(res)}
        if r < 0.4 and len(have) < 4:
            data[self.rng.choice([k for k in KEYS[:5] if k not in have])] = self.value(res)
        elif r < 0.6 and len(have) > 1:
            data[self.rng.choice([k for k in have if k not in data])] = None
        body = {"data": data}
        if res == "configmaps" and r > 0.9:
            raw = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(16, 512)))
            body["binaryData"] = None if cur.get("binaryData") else {"bin.dat": base64.b64encode(raw).decode()}
        self.ctl.update(res, NS, name, **body)


# =========================================================================== faults
#
# Each fault is judged by the server's request log from the moment it was
# injected to the next fault (or the end).

def watch_of(res, e):
    return bool(e.get("watch")) and "/" + res in e["path"]


def applied(kind, res):
    """The server applied `kind` to a request of res, and kreflect watched res again after it."""
    def check(entries):
        hit = [e["id"] for e in entries if kind in (e.get("faults") or []) and "/" + res in e["path"]]
        if not hit:
            return "the server never applied it"
        if not any(e["id"] > hit[0] and watch_of(res, e) for e in entries):
            return "applied, but kreflect did not watch %s again" % res
        return None
    return check


def slowed(res):
    """The server slowed a watch of res down (its link stays slow until the next fault)."""
    def check(entries):
        if not any("slow" in (e.get("faults") or []) and watch_of(res, e) for e in entries):
            return "the server never slowed a watch of %s" % res
        return None
    return check


def rewatched(res):
    def check(entries):
        return None if any(watch_of(res, e) for e in entries) else "kreflect did not watch %s again" % res
    return check


def relisted(res):
    """A watch-list (sendInitialEvents) or a LIST of res."""
    def check(entries):
        for e in entries:
            if watch_of(res, e) and "sendInitialEvents=true" in (e.get("raw_query") or ""):
                return None
            if not e.get("watch") and e["path"].endswith("/" + res):
                return None
        return "kreflect did not relist %s" % res
    return check


class Soak:
    def __init__(self, a):
        self.a = a
        self.out = os.path.abspath(a.out)
        self.rng = random.Random(a.seed)
        self.warm_compacted = False
        self.faults = []                   # dicts: t, name, res, detail, effect
        self.fault_i = 0
        self.restarts = 0
        self.tokens = set()
        self.srv = None
        self.kr = None

    # ------------------------------------------------------------------ setup

    def start_server(self, extra=()):
        args = ["--bookmark-interval", str(BOOKMARK_INTERVAL_S), "--seed", str(self.a.seed + self.restarts)]
        if self.srv is not None:
            args += ["--port", str(self.srv.ready["port"]), "--control-port", str(self.srv.ready["control_port"])]
        self.srv = ServerProcess(args + list(extra), workdir=os.path.join(self.out, "apiserver"))
        self.ctl = self.srv.control
        self.tokens.add(self.ctl.token())
        self.log_mark = 0

    def start_kreflect(self):
        exec_cmd = "sh -c 'cat >/dev/null; echo $KREFLECT_EVENTS >>%s'" % self.exec_log
        ready = self.srv.ready
        cmd = [self.bin, "--server", ready["server"], "--certificate-authority", ready["ca"],
               "--token-file", ready["token_file"], "-n", NS, "--dir", self.dir, "--dir-layout", "object",
               "--exec", exec_cmd, "--debounce", "1000", "-v", "2",
               # A watch-list without its end bookmark on a busy resource is given
               # up 10 quiet times after the request: 200 s, inside FAULT_PATIENCE_S.
               "--initial-events-timeout", str(INITIAL_EVENTS_TIMEOUT_S)] + list(RESOURCES)
        with open(os.path.join(self.out, "kreflect.cmd"), "w") as f:
            f.write(" ".join(cmd) + "\n")
        env = {k: v for k, v in os.environ.items()
               if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                            "HTTPS_PROXY", "https_proxy")}
        env["HOME"] = self.out
        self.kr_out = open(os.path.join(self.out, "kreflect.jsonl"), "wb")
        self.kr_err = open(os.path.join(self.out, "kreflect.log"), "wb")
        self.t0 = time.monotonic()
        self.t0_wall = time.time()
        self.kr = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.kr_out, stderr=subprocess.PIPE,
                                   env=env)
        self.err_reader = threading.Thread(target=self.read_stderr, daemon=True)
        self.err_reader.start()

    def read_stderr(self):
        """kreflect's log lines, each prefixed with the soak's elapsed seconds."""
        for line in iter(self.kr.stderr.readline, b""):
            self.kr_err.write(b"%9.3f %s" % (time.monotonic() - self.t0, line))
            self.kr_err.flush()

    def elapsed(self):
        return time.monotonic() - self.t0

    def alive(self):
        if self.kr.poll() is not None:
            raise Fail("kreflect exited with %s at %.0f s; last log lines:\n%s"
                       % (self.kr.returncode, self.elapsed(), self.log_tail()))

    def log_tail(self, n=12):
        try:
            with open(os.path.join(self.out, "kreflect.log"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + l for l in lines[-n:])

    # ------------------------------------------------------------------ faults

    def server_log(self):
        try:
            return self.ctl.log(since=self.log_mark)
        except (ControlError, OSError):
            return []

    def fault_list(self):
        """(name, function of the resource it aims at, returning (check, detail))."""
        def put(kind, detail, **spec):
            return lambda r: self.put([dict(spec, kind=kind, match="/" + r)], applied(kind, r), detail % r)
        return [
            ("drop_watches", self.drop_all),
            ("expired_410", self.expire),
            ("stall_watch", put("stall_watch", "the next %s watch sends nothing until kreflect gives up",
                                after_events=0, watch=True)),
            ("status_503_retry_after", put("status", "%s: 503 with Retry-After: 3", code=503, retry_after=3)),
            ("close_mid_record", put("close_after", "%s watch closed after 1500 bytes, half a TLS record",
                                     bytes=1500, mid_record=True, watch=True)),
            ("watch_error_410", put("watch_error", "%s watch: ERROR 410 after one event", code=410,
                                    after_events=1, watch=True)),
            ("status_429_retry_after", put("status", "%s: 429 with Retry-After: 2", code=429, retry_after=2)),
            ("garbage_line", put("garbage", "%s watch: a non-JSON line after one event", after_events=1,
                                 watch=True)),
            ("tcp_reset", put("close_after", "%s watch: TCP RST after 700 bytes", bytes=700, reset=True,
                              watch=True)),
            ("bad_chunk", put("bad_chunk", "%s watch: an invalid chunk-size line after one event",
                              after_events=1, watch=True)),
            ("token_rotation", self.rotate),
            ("clean_end_random_chunks", lambda r: self.put(
                [dict(kind="random_chunks", seed=self.rng.randint(1, 10**6), min=1, max=64, match="/" + r,
                      watch=True, count=2),
                 dict(kind="end_watch", after_events=3, match="/" + r, watch=True)],
                applied("end_watch", r), "%s watch: random chunk sizes, clean end after 3 events" % r)),
            ("watch_list_without_end", self.no_end_bookmark),
            ("slow_link", lambda r: self.put(
                [dict(kind="slow", rate=16000, piece=2000, match="/" + r, watch=True)], slowed(r),
                "%s watch: a slow link (16,000 bytes a second, 2,000 at a time) until the next fault: "
                "objects arrive in parts, the other resource waits for each" % r)),
            ("server_restart", lambda r: self.restart()),
        ]

    def drop_all(self, res):
        n = self.drop()
        return (lambda es: None if all(rewatched(r)(es) is None for r in RESOURCES) else
                "kreflect did not watch every resource again"), "every watch cut (%d), no terminating chunk" % n

    def expire(self, res):
        # kreflect is stopped while its watches are cut and the history is
        # compacted past a change of the other resource: whatever it read
        # before, its last resourceVersion is older than the compaction, so
        # the re-watch gets 410 (a bookmark sent just before could otherwise
        # have moved it to the newest one).
        other = RESOURCES[1 - RESOURCES.index(res)]
        self.kr.send_signal(signal.SIGSTOP)
        try:
            self.drop()
            self.ctl.touch(other, NS, count=1)
            self.ctl.compact()
        finally:
            self.kr.send_signal(signal.SIGCONT)
        return relisted(res), ("kreflect stopped, watches cut, %s touched, history compacted, kreflect "
                               "continued: the %s re-watch gets 410 and relists" % (other, res))

    def drop(self):
        return self.ctl.drop_watches()

    def put(self, specs, check, detail):
        for spec in specs:
            self.ctl.fault(**spec)
        self.drop()
        return check, detail

    def rotate(self, res):
        self.tokens.add(self.ctl.rotate_token())
        self.drop()

        def check(entries):
            # kreflect re-reads the token file before each request: a 401 is allowed, not needed.
            if not any(e.get("watch") and e.get("status") in (200, None) and "/" + res in e["path"] for e in entries):
                return "kreflect did not watch %s again with the new token" % res
            return None
        return check, "token rotated (the old one refused at once), watches cut"

    def no_end_bookmark(self, res):
        # res's re-watch gets ERROR 410, so its relist is a watch-list; the
        # fault matches only watch-lists (a plain watch would use it up).
        self.ctl.fault(kind="watch_error", code=410, after_events=0, match="/" + res, watch=True)
        self.ctl.fault(kind="initial_events_end", value=None, match="sendInitialEvents=true")
        self.drop()

        def check(entries):
            took = [e for e in entries if "initial_events_end" in (e.get("faults") or [])]
            if not took:
                return "no watch-list request took the fault"
            e0 = took[0]
            r = e0["path"].rsplit("/", 1)[-1]
            if not any(e["id"] > e0["id"] and not e.get("watch") and e["path"].endswith("/" + r) and
                       e.get("status") in (200, None) for e in entries):
                return ("kreflect did not fall back to a LIST of %s: the watch-list that never sends its end "
                        "bookmark stayed open (request %d)" % (r, e0["id"]))
            return None
        return check, ("the %s re-watch gets ERROR 410; its relist is a watch-list that never sends the end "
                       "bookmark; kreflect should fall back to LIST within %d s" % (res, 10 * INITIAL_EVENTS_TIMEOUT_S))

    def save_requests(self):
        """The server's request log, one JSON object a line, before it stops."""
        path = os.path.join(self.out, "apiserver", "requests-%d.jsonl" % self.restarts)
        with open(path, "w") as f:
            for e in self.ctl.log(since=0):
                f.write(json.dumps(e, separators=(",", ":")) + "\n")

    def restart(self):
        snap = server_objects(self.ctl)
        rv = self.ctl.rv()
        self.save_requests()
        self.srv.stop()
        self.restarts += 1
        logf = os.path.join(self.out, "apiserver", "apiserver.log")
        os.replace(logf, "%s.%d" % (logf, self.restarts))
        time.sleep(1.0)      # down for a moment: kreflect meets connection refused
        self.start_server(["--start-rv", str(rv + 1000)])
        for (kind, ns, name), o in sorted(snap.items()):
            res = "configmaps" if kind == "ConfigMap" else "secrets"
            obj = {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
            self.ctl.create(res, ns, name, object=obj)
        self.changes.ctl = self.ctl
        self.changes.adopt(snap)

        def check(entries):
            missing = [r for r in RESOURCES if not any(e.get("watch") and "/" + r in e["path"] and
                                                       e.get("status") in (200, None) for e in entries)]
            return "kreflect did not watch %s on the new server" % ", ".join(missing) if missing else None
        return check, ("server stopped (connections cut, no close_notify), down 1 s, started again "
                       "with a new token and resourceVersions 1000 on, the %d objects recreated (new uids)"
                       % len(snap))

    def watch_list_abandoned(self, res):
        try:
            with open(os.path.join(self.out, "kreflect.log"), "rb") as f:
                # kreflect remembers that for the server, not per resource.
                return b": the server does not support watch-list" in f.read()
        except OSError:
            return False

    def fault_pending(self):
        """The last fault has not taken effect yet, and may still."""
        if not self.faults or self.faults[-1]["check"] is None:
            return False
        f = self.faults[-1]
        if self.elapsed() - f["t"] >= FAULT_PATIENCE_S:
            return False
        return f["check"](self.server_log()) is not None

    def inject_fault(self):
        kinds = [k for k in self.fault_list() if not self.a.faults or k[0] in self.a.faults]
        for _ in range(len(kinds)):
            name, fn = kinds[self.fault_i % len(kinds)]
            res = RESOURCES[(self.fault_i // len(kinds)) % 2]     # the other resource on the next round
            self.fault_i += 1
            if name != "watch_list_without_end" or not self.watch_list_abandoned(res):
                break
            log("%5.0f s  fault %-24s skipped: kreflect uses LIST for %s since an earlier one"
                % (self.elapsed(), name, res))
        else:
            return                  # every kind chosen is skipped: nothing to inject
        self.finish_fault()
        self.ctl.clear_faults()
        t = self.elapsed()
        self.log_mark = max([e["id"] for e in self.server_log()] or [self.log_mark])
        check, detail = fn(res)
        f = {"t": t, "name": name, "res": res, "detail": detail, "check": check, "effect": None}
        self.faults.append(f)
        log("%5.0f s  fault %-24s %s" % (t, name, detail))

    def finish_fault(self):
        """Judges the last fault by the server's log since it was injected."""
        if not self.faults or self.faults[-1]["check"] is None:
            return
        f = self.faults[-1]
        f["effect"] = f["check"](self.server_log()) or "ok"
        f["check"] = None
        if f["effect"] != "ok":
            log("       fault %s at %.0f s: %s" % (f["name"], f["t"], f["effect"]))

    # ------------------------------------------------------------------ sampling

    def sample(self):
        t = self.elapsed()
        self.output.poll()
        pid = self.kr.pid
        if self.arena_range:
            rss, arena_kb = rss_split(pid, self.arena_range)
        else:
            rss, arena_kb = proc_rss_kb(pid), ""
        by_sym = resident_by_symbol(pid, self.symbols) if self.symbols else {}
        fds = proc_fds(pid)
        st = arena_stats(pid, self.unstripped) if self.unstripped else None
        runs = 0
        try:
            with open(self.exec_log) as f:
                runs = sum(1 for _ in f)
        except OSError:
            pass
        row = {"elapsed_s": round(t, 1), "rss_kb": rss, "arena_rss_kb": arena_kb,
               "other_rss_kb": rss - arena_kb if arena_kb != "" else "", "fds": fds[0],
               "fd_sockets": fds[1], "fd_other": fds[2],
               "arena_used": st["used"] if st else "", "arena_live": st["used"] - st["garbage"] if st else "",
               "arena_high_water": st["high_water"] if st else "", "arena_compactions": st["compactions"] if st else "",
               "objects": st["objects"] if st else "", "events": self.output.events,
               "synced": sum(self.output.synced.values()), "relists": self.output.relists(),
               "exec_runs": runs, "faults": len(self.faults)}
        for n, kb in by_sym.items():
            row["kb_" + n] = kb
        self.samples.append(row)
        if len(self.samples) == 1:
            self.csv.write(",".join(row) + "\n")
        self.csv.write(",".join(str(v) for v in row.values()) + "\n")
        self.csv.flush()
        if abs(t - BASELINE_S) < SAMPLE_EVERY / 2 + 0.01 and self.fd_targets_base is None:
            self.fd_targets_base = fds[3]
        if t > BASELINE_S and fds[2] > self.fd_top:
            self.fd_top, self.fd_targets_top = fds[2], (t, fds[3])
        return row

    # ------------------------------------------------------------------ run

    def run(self):
        a = self.a
        if os.path.exists(self.out):
            shutil.rmtree(self.out)
        os.makedirs(os.path.join(self.out, "apiserver"))
        self.dir = os.path.join(self.out, "mirror")
        self.exec_log = os.path.join(self.out, "exec-runs.txt")
        if any(c in self.out for c in " '\"\\"):
            raise Fail("the output path %r has a blank, quote or backslash: --exec could not name it" % self.out)
        # Copies of the binary: a rebuild during the soak must not change what
        # runs, nor the symbols the arena figures are read through.
        self.bin = os.path.join(self.out, "kreflect")
        shutil.copy2(a.bin, self.bin)
        self.unstripped = None
        src_unstripped = os.path.join(os.path.dirname(os.path.abspath(a.bin)), "x86_64", "kreflect.unstripped") \
            if os.path.basename(a.bin) == "kreflect" and os.path.dirname(os.path.abspath(a.bin)).endswith("build") \
            else os.path.abspath(a.bin) + ".unstripped"
        if os.path.exists(src_unstripped):
            self.unstripped = os.path.join(self.out, "kreflect.unstripped")
            shutil.copy2(src_unstripped, self.unstripped)
        self.arena_range = symbol_range(self.unstripped, "arena") if self.unstripped else None
        # The other large static objects: where RSS outside the arena lives.
        self.symbols = {n: r for n, r in (big_symbols(self.unstripped) if self.unstripped else {}).items()
                        if n != "arena"}
        budget = subprocess.run([self.bin, "--print-budget"], capture_output=True, text=True).stdout
        self.arena_bytes = next((int(l.split()[1]) for l in budget.splitlines() if l.startswith("arena ")), 0)
        self.budget_total = next((int(l.split()[1]) for l in budget.splitlines() if l.startswith("total ")), 0)

        self.start_server()
        self.changes = Changes(self.ctl, self.rng)
        self.changes.populate()
        self.start_kreflect()
        self.output = Output(os.path.join(self.out, "kreflect.jsonl"))
        self.samples, self.fd_targets_base, self.fd_top, self.fd_targets_top = [], None, 0, None
        self.csv = open(os.path.join(self.out, "soak.csv"), "w")
        end = a.minutes * 60.0
        log("kreflect pid %d for %g min against %s; %d ConfigMaps and %d Secrets to start; a fault every %g s; "
            "output in %s" % (self.kr.pid, a.minutes, self.srv.ready["server"], POPULATION["configmaps"][0],
                              POPULATION["secrets"][0], a.fault_every, os.path.relpath(self.out, ROOT)))
        if not self.unstripped:
            log("no unstripped binary next to %s: arena figures unavailable" % a.bin)

        next_sample, next_change, next_fault = 0.0, 0.0, a.fault_every / 2
        warm, next_warm, warm_passes, warm_end = "waiting", 0.0, 0, None
        change_errors = 0
        while True:
            self.alive()
            now = self.elapsed()
            if now >= next_sample:
                self.sample()
                next_sample += SAMPLE_EVERY
                if now >= end:
                    break
            if warm == "waiting":
                self.output.poll()
            if warm == "waiting" and len(self.output.synced) == len(RESOURCES):
                warm = "running"
                log("%5.0f s  first sync of both resources; warm-up: bulk updates until the arena compacts"
                    % now)
            if warm == "running" and now >= next_warm:
                st = arena_stats(self.kr.pid, self.unstripped) if self.unstripped else None
                if (st and st["compactions"] >= 1) or now > BASELINE_S - 20 or \
                        (not st and warm_passes * 0.5e6 >= self.arena_bytes):
                    warm, warm_end = "done", now
                    self.warm_compacted = bool(st and st["compactions"] >= 1)
                    next_fault = now + a.fault_every / 2
                    log("%5.0f s  warm-up done after %d bulk passes: %s" % (
                        now, warm_passes, "arena compacted %d time(s), high water %d B" % (
                            st["compactions"], st["high_water"]) if st else "no arena figures"))
                else:
                    try:
                        self.ctl.touch("configmaps", NS, count=5)
                    except (ControlError, OSError):
                        pass
                    warm_passes += 1
                    next_warm = now + 2.0
            if now >= next_change:
                err = self.changes.step() if warm != "running" else None   # the warm-up has the stream
                if err and change_errors < 5:
                    log("%5.0f s  change failed: %s" % (now, err))
                change_errors += bool(err)
                next_change += CHANGE_EVERY
                if next_change < now:       # fell behind (a restart): do not catch up in a burst
                    next_change = now + CHANGE_EVERY
            if now >= next_fault and now < end - NO_FAULT_BEFORE_END_S and warm != "running":
                if self.fault_pending():
                    next_fault = now + 5.0      # kreflect may be backing off: give it time
                else:
                    self.inject_fault()
                    next_fault = max(next_fault + a.fault_every, now + a.fault_every / 2)
            wake = [next_sample, next_change] + ([next_warm] if warm == "running" else [next_fault])
            time.sleep(min(0.5, max(0.01, min(wake) - self.elapsed())))
        self.run_end = self.elapsed()
        self.warm_end = warm_end
        return self.finish()

    # ------------------------------------------------------------------ the end

    def converge(self):
        """Waits for the mirror to equal the server; returns (mirror diffs, file diffs, empty dirs)."""
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        next_sample = self.samples[-1]["elapsed_s"] + SAMPLE_EVERY
        while True:
            self.alive()
            if self.elapsed() >= next_sample:
                self.sample()
                next_sample += SAMPLE_EVERY
            self.output.poll()
            want = server_objects(self.ctl)
            md = diff_mirror(self.output.mirror, want)
            fd, empty = [], []
            if not md:
                have, empty = actual_files(self.dir)
                fd = diff_files(have, expected_files(want))
                man = manifest_paths(self.dir)
                if man != set(have):
                    fd += ["manifest lists %d files that are not there, misses %d that are"
                           % (len(man - set(have)), len(set(have) - man))]
            if (not md and not fd) or time.monotonic() > deadline:
                return md, fd, empty, want
            time.sleep(1.0)

    def finish(self):
        self.ctl.clear_faults()
        log("%5.0f s  changes stopped, faults cleared; waiting for the mirror to converge" % self.elapsed())
        t_quiet = self.elapsed()
        md, fdiff, empty, want = self.converge()
        t_conv = self.elapsed() - t_quiet
        self.finish_fault()
        self.sample()
        end_fds, _socks, end_other, end_targets = proc_fds(self.kr.pid)
        self.kr.send_signal(signal.SIGTERM)
        try:
            rc = self.kr.wait(15)
        except subprocess.TimeoutExpired:
            self.kr.kill()
            rc = "killed after 15 s"
        self.err_reader.join(10)
        self.kr_out.close()
        self.kr_err.close()
        self.output.poll()
        with open(os.path.join(self.out, "kreflect.log"), "rb") as f:
            klog = f.read()
        self.save_requests()
        self.srv.stop()
        self.csv.close()

        checks = []

        def check(name, ok, detail):
            checks.append((name, ok, detail))

        # alive
        check("alive", rc == 0, "kreflect ran %.0f s and exited %s on SIGTERM" % (self.elapsed(), rc))

        # growth
        s = self.samples
        base_i = min(range(len(s)), key=lambda i: abs(s[i]["elapsed_s"] - BASELINE_S))
        base = s[base_i]
        later = s[base_i + 1:]
        if base["elapsed_s"] < BASELINE_S - SAMPLE_EVERY or not later:
            check("rss", False, "the run is too short for a baseline at %.0f s" % BASELINE_S)
            check("fds", False, "the run is too short for a baseline at %.0f s" % BASELINE_S)
        else:
            if base["other_rss_kb"] != "":
                # The arena follows its bump tail (compaction gives pages back):
                # judged apart, against the ceiling the warm-up reached.
                top = max(later, key=lambda r: r["other_rss_kb"])
                grow = top["other_rss_kb"] - base["other_rss_kb"]
                where = sorted(((top[k] - base[k], k[3:]) for k in top if k.startswith("kb_")
                                and top[k] != base[k]), reverse=True)
                known = sum(d for d, _n in where)
                check("rss", grow <= RSS_TOLERANCE_KB,
                      "VmRSS outside the arena %d kB at %.0f s (baseline), largest after it %d kB at %.0f s: "
                      "%+d kB (tolerance %d kB)%s" % (
                          base["other_rss_kb"], base["elapsed_s"], top["other_rss_kb"], top["elapsed_s"], grow,
                          RSS_TOLERANCE_KB, "" if not where and grow <= 0 else
                          "; by static object: %s; elsewhere (stack, text, small objects) %+d kB" % (
                              ", ".join("%s %+d kB" % (n, d) for d, n in where) or "none", grow - known)))
                # The ceiling: the bump tail's high water at the baseline (the
                # warm-up made it compact once), or more if a sample saw more.
                ceil = max(r["arena_rss_kb"] for r in s[:base_i + 1])
                hw0 = base["arena_high_water"]
                if hw0 != "":
                    ceil = max(ceil, -(-hw0 // PAGE) * PAGE // 1024)
                atop = max(later, key=lambda r: r["arena_rss_kb"])
                hw1 = max([r["arena_high_water"] for r in later if r["arena_high_water"] != ""] or [hw0])
                # The store's figures come through the same symbols as the arena's
                # pages: missing, the reader broke (a renamed symbol), not the store.
                ok = atop["arena_rss_kb"] <= ceil + RSS_TOLERANCE_KB and hw0 != "" and \
                    (hw1 - hw0) <= RSS_TOLERANCE_KB * 1024
                check("arena", ok,
                      ("" if hw0 != "" else "(no store figures: tests/bench/store_stats.py cannot read them) ") +
                      ("" if self.warm_compacted else "(the warm-up ended before the arena compacted) ") +
                      "arena pages resident: ceiling %d kB at the baseline (bump tail high water %s B), largest "
                      "after it %d kB at %.0f s: %+d kB; high water after it %s B (tolerance %d kB)"
                      % (ceil, hw0, atop["arena_rss_kb"], atop["elapsed_s"], atop["arena_rss_kb"] - ceil,
                         hw1, RSS_TOLERANCE_KB))
            else:
                top = max(later, key=lambda r: r["rss_kb"])
                grow = top["rss_kb"] - base["rss_kb"]
                check("rss", grow <= RSS_TOLERANCE_KB,
                      "VmRSS (the arena not told apart: no unstripped binary) %d kB at %.0f s (baseline), "
                      "largest after it %d kB at %.0f s: %+d kB (tolerance %d kB)"
                      % (base["rss_kb"], base["elapsed_s"], top["rss_kb"], top["elapsed_s"], grow,
                         RSS_TOLERANCE_KB))
            # Sockets come and go with the connections (none during a backoff):
            # at most one per resource. Every other descriptor must stay put: a
            # count above the baseline in two samples in a row (10 s apart) or at
            # the end is growth; in one sample alone it is a descriptor that
            # lived long by chance (an fsync on a busy disk), reported only.
            window = [r["fd_other"] for r in s if BASELINE_S - 60 <= r["elapsed_s"] <= base["elapsed_s"]]
            fbase = max(window)
            over = [i for i, r in enumerate(later) if r["fd_other"] > fbase]
            twice = [later[i] for i in over if i + 1 in over]
            stop = max(later, key=lambda r: r["fd_sockets"])
            ok = not twice and end_other <= fbase and stop["fd_sockets"] <= len(RESOURCES)
            detail = ("descriptors other than sockets: baseline %d (largest of %.0f-%.0f s); above it after the "
                      "baseline in %d sample(s)%s, %d at the end; sockets after the baseline at most %d at %.0f s "
                      "(limit %d, one per resource)"
                      % (fbase, BASELINE_S - 60, base["elapsed_s"], len(over),
                         ", in two in a row at %.0f s" % twice[0]["elapsed_s"] if twice else
                         " (never two in a row)" if over else "", end_other, stop["fd_sockets"],
                         stop["elapsed_s"], len(RESOURCES)))
            if over and self.fd_targets_top:
                detail += "\n      the most, at %.0f s: %s" % (self.fd_targets_top[0],
                                                               "; ".join(self.fd_targets_top[1]))
            if not ok:
                detail += "\n      at the baseline: %s\n      at the end: %s" % (
                    "; ".join(self.fd_targets_base or []), "; ".join(end_targets))
            check("fds", ok, detail)

        # mirror
        anomalies = self.output.anomalies
        check("jsonl", not md and not anomalies,
              "%d objects on the server; folded JSON lines %s after %.0f s of quiet%s" % (
                  len(want), "equal them" if not md else "differ:\n      " + "\n      ".join(md), t_conv,
                  "" if not anomalies else "; %d events that do not fit:\n      %s" % (
                      len(anomalies), "\n      ".join(anomalies[:8]))))
        nfiles = len(expected_files(want))
        check("dir", not md and not fdiff,
              "%d files expected; %s%s" % (nfiles, "not compared (the mirror differs)" if md else
                                           "the directory and its manifest hold exactly them" if not fdiff else
                                           "differences:\n      " + "\n      ".join(fdiff),
                                           "; %d empty directories left behind" % len(empty) if empty else ""))

        # secrets
        leaks = []
        for v in self.changes.secret_values:
            if len(v) >= 16 and (v in klog or base64.b64encode(v) in klog):
                leaks.append("a Secret value")
                break
        for tok in self.tokens:
            if tok and tok.encode() in klog:
                leaks.append("a token")
        check("secrets", not leaks, "kreflect's log (%d lines) holds %s" % (
            klog.count(b"\n"), " and ".join(leaks) if leaks else "no Secret value and no token"))

        # faults
        bad = [f for f in self.faults if f["effect"] != "ok"]
        check("faults", not bad and len(self.faults) > 0,
              "%d faults injected, %d took effect%s" % (
                  len(self.faults), len(self.faults) - len(bad),
                  "" if not bad else ":\n      " + "\n      ".join(
                      "%.0f s %s: %s" % (f["t"], f["name"], f["effect"]) for f in bad)))

        self.write_faults()
        svg = os.path.join(self.out, "soak.svg")
        with open(svg, "w") as f:
            f.write(plot_svg(self.samples, self.faults, BASELINE_S))
        self.summary(base if later else None, t_conv, end_fds, klog)
        for name, ok, detail in checks:
            print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))
        npass = sum(1 for c in checks if c[1])
        print("%d passed, %d failed" % (npass, len(checks) - npass))
        return 0 if npass == len(checks) else 1

    def write_faults(self):
        with open(os.path.join(self.out, "faults.txt"), "w") as f:
            for x in self.faults:
                f.write("%7.1f s  %-24s %-10s %s  [%s]\n" % (x["t"], x["name"], x["res"], x["detail"], x["effect"]))

    def summary(self, base, t_conv, end_fds, klog):
        s = self.samples
        first_sync = next((r for r in s if r["synced"] >= len(RESOURCES)), s[0])
        with_arena = [r for r in s if r["arena_used"] != ""]
        o = self.output
        kinds = {}
        for f in self.faults:
            kinds[f["name"]] = kinds.get(f["name"], 0) + 1
        levels = {}
        for line in klog.decode("utf-8", "replace").splitlines():
            m = re.search(r"kreflect: (error|warn|info|debug|trace): ", line)
            lv = m.group(1) if m else "other"
            levels[lv] = levels.get(lv, 0) + 1
        print()
        print("soak summary (%s, %g min of changes and faults, then %.0f s to converge)" % (
            os.path.relpath(self.out, ROOT), self.a.minutes, t_conv))
        print("  VmRSS: %d kB after the first sync (%.0f s), %s, %d kB at the end; largest %d kB" % (
            first_sync["rss_kb"], first_sync["elapsed_s"],
            "%d kB at the baseline (%.0f s)" % (base["rss_kb"], base["elapsed_s"]) if base else "no baseline",
            s[-1]["rss_kb"], max(r["rss_kb"] for r in s)))
        if base and base["other_rss_kb"] != "":
            after = [r for r in s if r["elapsed_s"] > base["elapsed_s"]]
            print("  VmRSS outside the arena: %d kB at the baseline, %d-%d kB after it, %d kB at the end" % (
                base["other_rss_kb"], min(r["other_rss_kb"] for r in after),
                max(r["other_rss_kb"] for r in after), s[-1]["other_rss_kb"]))
            print("  arena pages resident: largest %d kB up to the baseline, %d-%d kB after it, %d kB at the end" % (
                max(r["arena_rss_kb"] for r in s if r["elapsed_s"] <= base["elapsed_s"]),
                min(r["arena_rss_kb"] for r in after), max(r["arena_rss_kb"] for r in after),
                s[-1]["arena_rss_kb"]))
        if base and any(k.startswith("kb_") for k in base):
            print("  resident kB of the large static objects, baseline -> end: %s" % ", ".join(
                "%s %d -> %d" % (k[3:], base[k], s[-1][k]) for k in base if k.startswith("kb_")))
        if base:
            after = [r for r in s if r["elapsed_s"] > base["elapsed_s"]]
            print("  descriptors: %d at the baseline (%d sockets), %d-%d after it (sockets %d-%d), %d at the end"
                  % (base["fds"], base["fd_sockets"], min(r["fds"] for r in after), max(r["fds"] for r in after),
                     min(r["fd_sockets"] for r in after), max(r["fd_sockets"] for r in after), end_fds))
        if with_arena:
            print("  arena (%d B): largest bump tail (high water) %d B, largest live %d B, %d objects held at "
                  "the end, %d compactions" % (
                      self.arena_bytes, max(r["arena_high_water"] for r in with_arena),
                      max(r["arena_live"] for r in with_arena), with_arena[-1]["objects"],
                      with_arena[-1]["arena_compactions"]))
            if base and base["arena_high_water"] != "":
                print("  arena high water: %d B at the baseline, %d B at the end" % (
                    base["arena_high_water"], with_arena[-1]["arena_high_water"]))
        print("  static budget (--print-budget total): %d B" % self.budget_total)
        print("  events printed: %d (%s); SYNCED %d, relists %d; notifications run: %d" % (
            o.events, ", ".join("%s %d" % (k, v) for k, v in sorted(o.by_type.items()) if k != "SYNCED"),
            sum(o.synced.values()), o.relists(), s[-1]["exec_runs"]))
        c = self.changes.counts
        print("  changes made: %d updates, %d adds, %d deletes, %d delete-then-recreate (%d refused while the "
              "server was down); warm-up until %s" % (
                  c["update"], c["add"], c["delete"], c["recreate"], c["failed"],
                  "%.0f s" % self.warm_end if self.warm_end is not None else "never (no first sync?)"))
        cov = watch_coverage(self.out, self.t0_wall + (self.warm_end or 0), self.t0_wall + self.run_end)
        print("  watch open (from the end of the warm-up to the end of the changes): %s" % ", ".join(
            "%s %.1f%% (longest gap %.0f s)" % (r, 100 * f, g) for r, (f, g) in cov.items()))
        print("  faults injected: %d (%s); server restarts: %d" % (
            len(self.faults), ", ".join("%s %d" % kv for kv in sorted(kinds.items())), self.restarts))
        print("  kreflect log: %s" % ", ".join("%s %d" % kv for kv in sorted(levels.items())))
        text = klog.decode("utf-8", "replace")
        notes = [(label, text.count(pat)) for label, pat in LOG_NOTES]
        print("  of which: %s" % ", ".join("%s %d" % (label, n) for label, n in notes if n))
        print("  samples: %s, plot: %s" % (os.path.relpath(os.path.join(self.out, "soak.csv"), ROOT),
                                          os.path.relpath(os.path.join(self.out, "soak.svg"), ROOT)))


def watch_coverage(out, t_start, t_end):
    """{resource: (fraction of [t_start, t_end] with a watch open, longest gap s)},
    from the servers' request logs (wall-clock seconds)."""
    spans = {r: [] for r in RESOURCES}
    d = os.path.join(out, "apiserver")
    for name in sorted(os.listdir(d)):
        if not (name.startswith("requests-") and name.endswith(".jsonl")):
            continue
        path = os.path.join(d, name)
        dumped = os.stat(path).st_mtime
        with open(path) as f:
            for line in f:
                e = json.loads(line)
                if not e.get("watch") or e.get("status") not in (200, None):
                    continue
                for r in RESOURCES:
                    if e["path"].endswith("/" + r):
                        spans[r].append((e["time"], e["time"] + e["duration"] if e.get("duration") is not None
                                         else dumped))
    res = {}
    for r, iv in spans.items():
        iv.sort()
        covered, gap, cur_end = 0.0, 0.0, t_start
        for a, b in iv:
            a, b = max(a, t_start), min(b, t_end)
            if b <= cur_end or b <= a:
                continue
            if a > cur_end:
                gap = max(gap, a - cur_end)
                a_eff = a
            else:
                a_eff = cur_end
            covered += b - a_eff
            cur_end = b
        gap = max(gap, t_end - cur_end)
        res[r] = (covered / max(1e-9, t_end - t_start), gap)
    return res


# =========================================================================== the plot

def plot_svg(samples, faults, baseline_s):
    """Four panels over elapsed minutes: VmRSS, VmRSS outside the arena (with
    its limit), descriptors, the arena's bump tail and live bytes."""
    W, H, L, R, T, GAP = 760, 130, 70, 20, 50, 40
    samples = [r for r in samples if r["elapsed_s"] > 0] or samples   # not the one before kreflect ran
    base = min(samples, key=lambda r: abs(r["elapsed_s"] - baseline_s))
    limit = base["other_rss_kb"] + RSS_TOLERANCE_KB if base.get("other_rss_kb", "") != "" else None
    panels = [("VmRSS (kB)", [("rss_kb", "#1f77b4", 1.0, "total"),
                              ("arena_rss_kb", "#17becf", 1.0, "of it the arena")], None),
              ("VmRSS outside the arena (kB)", [("other_rss_kb", "#ff7f0e", 1.0, "dotted: baseline + %d kB"
                                                 % RSS_TOLERANCE_KB)], limit),
              ("open descriptors (least of 5 reads)", [("fds", "#d62728", 1.0, "all"),
                                                       ("fd_sockets", "#8c564b", 1.0, "sockets")], None),
              ("arena (kB)", [("arena_used", "#2ca02c", 1 / 1024, "bump tail"),
                              ("arena_live", "#9467bd", 1 / 1024, "live objects")], None)]
    total_h = T + len(panels) * (H + GAP) + 10
    tmax = max([r["elapsed_s"] for r in samples] + [1.0])
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (W, total_h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="13">kreflect soak: %.0f min, %d faults (grey lines), baseline '
           'at %.0f s (dashed)</text>' % (L, tmax / 60, len(faults), baseline_s)]

    def x_of(t):
        return L + (W - L - R) * t / tmax

    for pi, (title, series, hline) in enumerate(panels):
        y0 = T + pi * (H + GAP)
        vals = [r[k] * s for r in samples for k, _c, s, _n in series if r.get(k, "") != ""]
        if hline is not None:
            vals.append(hline)
        if not vals:
            out.append('<text x="%d" y="%d">%s: no data</text>' % (L, y0 + 20, title))
            continue
        lo, hi = min(vals), max(vals)
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.08
        lo, hi = lo - pad, hi + pad

        def y_of(v):
            return y0 + H - H * (v - lo) / (hi - lo)
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (L, y0, W - L - R, H))
        out.append('<text x="%d" y="%d">%s</text>' % (L, y0 - 5, title))
        lx = L + 7 * len(title) + 20
        for _k, color, _s, label in series:
            out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (lx, y0 - 5, color, label))
            lx += 7 * len(label) + 16
        for v in (lo + pad, hi - pad):
            out.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (L - 4, y_of(v) + 4, v))
        for f in faults:
            x = x_of(f["t"])
            out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#bbb"><title>%.0f s %s</title></line>'
                       % (x, y0, x, y0 + H, f["t"], f["name"]))
        xb = x_of(baseline_s)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555" stroke-dasharray="4,3"/>'
                   % (xb, y0, xb, y0 + H))
        if hline is not None:
            out.append('<line x1="%.1f" y1="%.1f" x2="%d" y2="%.1f" stroke="#ff7f0e" stroke-dasharray="1,3"/>'
                       % (xb, y_of(hline), W - R, y_of(hline)))
        for k, color, scale, _n in series:
            pts = " ".join("%.1f,%.1f" % (x_of(r["elapsed_s"]), y_of(r[k] * scale)) for r in samples
                           if r.get(k, "") != "")
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (color, pts))
        for m in range(0, int(tmax // 60) + 1, max(1, int(tmax // 60) // 10 or 1)):
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x_of(m * 60), y0 + H + 13, m))
    out.append('<text x="%d" y="%d" text-anchor="end">minutes</text>' % (W - R, total_h - 4))
    out.append("</svg>\n")
    return "\n".join(out)


def replot(d):
    """Rewrites D/soak.svg from D/soak.csv and D/faults.txt."""
    with open(os.path.join(d, "soak.csv")) as f:
        rows = list(csv.DictReader(f))
    samples = [{k: (float(v) if k == "elapsed_s" else int(v)) if v != "" else "" for k, v in r.items()}
               for r in rows]
    faults = []
    try:
        with open(os.path.join(d, "faults.txt")) as f:
            for line in f:
                w = line.split()
                faults.append({"t": float(w[0]), "name": w[2]})
    except OSError:
        pass
    with open(os.path.join(d, "soak.svg"), "w") as f:
        f.write(plot_svg(samples, faults, BASELINE_S))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "soak"))
    ap.add_argument("--fault-every", type=float, default=60.0, help="seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults", default="", help="comma-separated fault names to rotate through (default: all)")
    ap.add_argument("--replot", metavar="DIR", help="only rewrite DIR/soak.svg from DIR/soak.csv and DIR/faults.txt")
    a = ap.parse_args(argv)
    if a.replot:
        return replot(a.replot)
    names = [n for n, _f in Soak(a).fault_list()]
    a.faults = [f for f in a.faults.split(",") if f]
    unknown = [f for f in a.faults if f not in names]
    if unknown:
        print("soak: unknown fault %s; known: %s" % (", ".join(unknown), ", ".join(names)), file=sys.stderr)
        print("0 passed, 1 failed")
        return 2
    if a.minutes * 60 < BASELINE_S + 2 * SAMPLE_EVERY:
        print("soak: --minutes must be at least %.1f: growth is judged after a baseline at %.0f s"
              % ((BASELINE_S + 2 * SAMPLE_EVERY) / 60, BASELINE_S), file=sys.stderr)
        print("0 passed, 1 failed")
        return 2
    if a.fault_every < 10:
        print("soak: --fault-every must be at least 10 s", file=sys.stderr)
        print("0 passed, 1 failed")
        return 2
    if not os.access(a.bin, os.X_OK):
        print("soak: %s is not built (make)" % a.bin, file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    s = Soak(a)
    try:
        return s.run()
    except (Fail, ControlError, OSError, RuntimeError) as e:
        print("FAIL soak: %s" % e)
        print("0 passed, 1 failed")
        return 1
    except Exception:
        traceback.print_exc(file=sys.stdout)
        print("FAIL soak: the soak script broke (above)")
        print("0 passed, 1 failed")
        return 1
    finally:
        if s.kr is not None and s.kr.poll() is None:
            s.kr.kill()
            s.kr.wait()
        if s.srv is not None and s.srv.proc.poll() is None:
            s.srv.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main(sys.argv[1:]))
