#!/usr/bin/env python3
"""End-to-end tests: the real kreflect binary against the test API server over TLS.

    python3 tests/e2e/test_e2e.py [BINARY] [-j N] [NAME ...]

BINARY defaults to build/kreflect (build/asan/kreflect for the sanitizer build).
NAME selects scenarios by name or substring. Every scenario starts its own
tests/apiserver server, runs kreflect against it, and checks two things:

  - the request sequence the server logged (path, query parameters, status);
  - the mirror: kreflect's stdout JSON lines folded into a map
    (namespace/name -> resourceVersion) equal to the server's state at the end.

Scenarios run a few at a time (most of their time is waiting). Each prints
"ok NAME" or "FAIL NAME: reason" (details indented below); the last line is
"N passed, N failed", and the exit status is 0 only if nothing failed. What a
scenario saw (kreflect's stdout and stderr, the server's log and request log)
is kept in build/test/e2e-<target>/<NAME>/.

Standard library only. Every wait has a timeout.
"""

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess  # noqa: E402

NS_PATH = "/api/v1/namespaces/default/configmaps"
CERT_FILES = ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key", "certs.json")
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")

BIN = None          # the kreflect binary under test
CAPACITY = {}       # from --version: objects, max-object, ...
ART = None          # artifacts directory
CERTS = None        # a work dir holding certificates to copy
SCENARIOS = []      # (name, function, expected seconds)
# Deadlines and "at once" bounds are multiplied by this for a slow kreflect
# (tests/e2e/run.sh valgrind sets it); lower bounds (backoffs) stay as they are.
SLOW = float(os.environ.get("KR_E2E_SLOW", "1"))


LIVE = set()        # every process started, until it is known to be gone
LIVE_LOCK = threading.Lock()


def remember(proc):
    with LIVE_LOCK:
        LIVE.add(proc)


def forget(proc):
    with LIVE_LOCK:
        LIVE.discard(proc)


def kill_all():
    """At exit, however it comes: nothing started here outlives the run."""
    with LIVE_LOCK:
        procs = list(LIVE)
    for p in procs:
        try:
            if p.poll() is None:
                p.kill()
                p.wait(5)
        except Exception:
            pass


class Fail(Exception):
    pass


def hermetic_env(home):
    """kreflect's environment: no kubeconfig, $KUBECONFIG or in-cluster
    variables of whoever runs the tests, only the flags a scenario gives."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["HOME"] = home
    return env


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def late(seconds):
    """An upper bound on kreflect's timing, scaled by SLOW."""
    return seconds * SLOW


def wait_until(pred, timeout, what, interval=0.05):
    """pred() until it returns something truthy (returned), or Fail."""
    timeout = late(timeout)
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise Fail("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def scenario(name, seconds=5):
    def deco(fn):
        SCENARIOS.append((name, fn, seconds))
        return fn
    return deco


# =========================================================================== kreflect

def obj_key(obj):
    md = obj.get("metadata") or {}
    return "%s/%s" % (md.get("namespace", ""), md.get("name", "")) if md.get("namespace") else md.get("name", "")


def fold(lines):
    """kreflect's output folded into {key: object}; plus anomalies: events that
    do not fit the mirror they are applied to."""
    mirror, anomalies = {}, []
    for i, ev in enumerate(lines):
        t = ev.get("type")
        if t == "SYNCED":
            continue
        obj = ev.get("object") or {}
        k = obj_key(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if t == "ADDED":
            if k in mirror:
                anomalies.append("line %d: ADDED %s, already mirrored" % (i + 1, k))
            mirror[k] = obj
        elif t == "MODIFIED":
            if k not in mirror:
                anomalies.append("line %d: MODIFIED %s, not mirrored" % (i + 1, k))
            elif rv and rv.isdigit() and int(rv) <= int(mirror[k]["metadata"]["resourceVersion"] or 0):
                anomalies.append("line %d: MODIFIED %s to resourceVersion %s, not newer than %s"
                                 % (i + 1, k, rv, mirror[k]["metadata"]["resourceVersion"]))
            mirror[k] = obj
        elif t == "DELETED":
            if k not in mirror:
                anomalies.append("line %d: DELETED %s, not mirrored" % (i + 1, k))
            mirror.pop(k, None)
        elif t == "RESYNC":
            pass
        else:
            anomalies.append("line %d: unknown type %r" % (i + 1, t))
    return mirror, anomalies


class Kreflect:
    def __init__(self, s, args, name, token_file=None, server_url=None, resources=("configmaps",),
                 verbosity="2", auth=True, extra_env=None, binary=None):
        self.s, self.name = s, name
        srv = s.srv
        self.out_path = os.path.join(s.dir, name + ".out")
        self.err_path = os.path.join(s.dir, name + ".err")
        cmd = [binary or BIN]      # or a peer that takes kreflect's flags and prints its lines
        if srv is not None or server_url:
            cmd += ["--server", server_url or srv.ready["server"]]
        if srv is not None:
            cmd += ["--certificate-authority", srv.ready["ca"]]
            if auth:
                cmd += ["--token-file", token_file or srv.ready["token_file"]]
        cmd += ["-v", verbosity] + list(args) + list(resources)
        self.cmd = cmd
        with open(os.path.join(s.dir, name + ".cmd"), "w") as f:
            f.write(" ".join(cmd) + "\n")
        self.err_f = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err_f,
                                     env=dict(hermetic_env(s.dir), **(extra_env or {})))
        remember(self.proc)
        self.lock = threading.Lock()
        self.lines = []
        self.times = []
        self.bad = []
        self.eof = False
        self.rc = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.out_path, "wb") as f:
            for raw in iter(self.proc.stdout.readline, b""):
                f.write(raw)
                try:
                    ev = json.loads(raw)
                except ValueError:
                    with self.lock:
                        self.bad.append(raw[:200])
                    continue
                with self.lock:
                    self.lines.append(ev)
                    self.times.append(time.time())      # wall clock, like the server's log
        with self.lock:
            self.eof = True

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def wait(self, pred, timeout, what):
        def p():
            lines = self.snapshot()
            if pred(lines):
                return True
            if self.proc.poll() is not None and self.eof:
                raise Fail("kreflect exited (%s) while waiting for %s; stderr: %s"
                           % (self.proc.returncode, what, self.stderr_tail()))
            return False
        return wait_until(p, timeout, what)

    def synced(self):
        return [ev for ev in self.snapshot() if ev.get("type") == "SYNCED"]

    def wait_synced(self, n=1, timeout=10):
        self.wait(lambda ls: sum(1 for e in ls if e.get("type") == "SYNCED") >= n, timeout,
                  "%d SYNCED line(s)" % n)
        return self.synced()

    def wait_sync_logged(self, timeout=5):
        """The first sync's line on stderr, which kreflect writes just after its SYNCED line on stdout."""
        self.wait(lambda _lines: ": synced " in self.stderr(), late(timeout), "the sync's log line")

    def wait_event(self, etype, name, timeout=10):
        self.wait(lambda ls: any(e.get("type") == etype and
                                 (e.get("object") or {}).get("metadata", {}).get("name") == name for e in ls),
                  timeout, "%s %s on stdout" % (etype, name))

    def time_of(self, etype, name):
        """Wall-clock time kreflect printed etype for name (None if it did not)."""
        with self.lock:
            for ev, t in zip(self.lines, self.times):
                if ev.get("type") == etype and (ev.get("object") or {}).get("metadata", {}).get("name") == name:
                    return t
        return None

    def events_for(self, name):
        return [e for e in self.snapshot() if (e.get("object") or {}).get("metadata", {}).get("name") == name]

    def mirror(self):
        return fold(self.snapshot())

    def stderr(self):
        if not self.err_f.closed:
            self.err_f.flush()
        try:
            with open(self.err_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stderr_tail(self, n=6):
        return " | ".join(self.stderr().strip().splitlines()[-n:])

    def running(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout):
        try:
            self.rc = self.proc.wait(late(timeout))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("kreflect did not exit within %.1f s" % late(timeout)) from None
        self.reader.join(5)
        return self.rc

    def stop(self, sig=signal.SIGTERM, timeout=5):
        """Signal it and wait; returns the exit code (Fail if it does not exit)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(late(timeout))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.reader.join(5)
                raise Fail("kreflect did not exit within %.1f s of signal %d" % (late(timeout), sig)) from None
        self.reader.join(5)
        self.rc = self.proc.returncode
        return self.rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        forget(self.proc)
        self.reader.join(5)
        self.err_f.close()


# =========================================================================== request log

def is_timeout(v):
    return v.isdigit() and 300 <= int(v) < 600


def nonempty(v):
    return bool(v)


ANY = nonempty


def WL(rv=None, status=200):
    """A watch-list request (sendInitialEvents)."""
    q = {"allowWatchBookmarks": "true", "resourceVersionMatch": "NotOlderThan", "sendInitialEvents": "true",
         "timeoutSeconds": is_timeout, "watch": "true"}
    if rv is not None:
        q["resourceVersion"] = rv
    return ("WL", q, status)


def W(rv, status=200):
    """A plain watch from rv."""
    return ("W", {"allowWatchBookmarks": "true", "resourceVersion": rv, "timeoutSeconds": is_timeout,
                  "watch": "true"}, status)


def L(rv=None, limit=None, cont=False, status=200):
    """A LIST page."""
    q = {}
    if rv is not None:
        q["resourceVersion"] = rv
    if limit is not None:
        q["limit"] = str(limit)
    if cont:
        q["continue"] = nonempty
    return ("L", q, status)


def req_kind(e):
    q = e["query"]
    if e.get("watch"):
        return "WL" if q.get("sendInitialEvents") == "true" else "W"
    return "L"


def describe(e, t0=None):
    q = dict(e["query"])
    if "continue" in q:
        q["continue"] = "<%d chars>" % len(q["continue"])
    status = e["status"] if e.get("done") else "open"
    extra = ""
    if e.get("faults"):
        extra += " faults=%s" % ",".join(e["faults"])
    if e.get("watch"):
        extra += " events=%s" % e.get("events")
    at = " +%.2fs" % (e["time"] - t0) if t0 is not None else ""
    return "%-2s %s -> %s%s%s" % (req_kind(e), "&".join("%s=%s" % kv for kv in sorted(q.items())) or "(no query)",
                                  status, extra, at)


def value_ok(want, got):
    if got is None:
        return False
    if callable(want):
        return bool(want(got))
    return str(want) == got


def match_request(spec, e):
    """'' if e matches spec, else why not."""
    kind, q, status = spec
    why = []
    if req_kind(e) != kind:
        why.append("a %s request" % req_kind(e))
    got = e["query"]
    for k in sorted(set(q) | set(got)):
        if k not in q:
            why.append("unexpected %s=%s" % (k, got[k]))
        elif k not in got:
            why.append("no %s" % k)
        elif not value_ok(q[k], got[k]):
            why.append("%s=%s" % (k, got[k]))
    done = e.get("done")
    if status == "open":
        if done:
            why.append("ended with %s, expected still open" % e["status"])
    elif not done:
        if not (e.get("watch") and status == 200):
            why.append("still open, expected %s" % status)
    elif e["status"] != status:
        why.append("status %s, expected %s" % (e["status"], status))
    return ", ".join(why)


def spec_text(spec):
    kind, q, status = spec
    parts = []
    for k in sorted(q):
        v = q[k]
        parts.append("%s=%s" % (k, "*" if callable(v) else v))
    return "%-2s %s -> %s" % (kind, "&".join(parts) or "(no query)", status)


def expect_requests(reqs, specs, what="request sequence"):
    t0 = reqs[0]["time"] if reqs else None
    problems = []
    if len(reqs) != len(specs):
        problems.append("%d requests, expected %d" % (len(reqs), len(specs)))
    for i, (spec, e) in enumerate(zip(specs, reqs)):
        why = match_request(spec, e)
        if why:
            problems.append("#%d: expected %s; got %s" % (i + 1, spec_text(spec), why))
            break
    if problems:
        lines = ["%s: %s" % (what, "; ".join(problems)), "server saw:"]
        lines += ["  %d. %s" % (i + 1, describe(e, t0)) for i, e in enumerate(reqs)]
        lines += ["expected:"] + ["  %d. %s" % (i + 1, spec_text(s)) for i, s in enumerate(specs)]
        raise Fail("\n".join(lines))


def gap(a, b):
    """Seconds from the end of request a to the start of request b."""
    return b["time"] - (a["time"] + (a.get("duration") or 0))


# =========================================================================== scenario context

class Scenario:
    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(ART, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.servers, self.krs = [], []
        self.srv = self.ctl = None
        self.nkr = 0

    # ---- servers
    def server(self, *args, **settings):
        wd = os.path.join(self.dir, "server%d" % (len(self.servers) + 1))
        os.makedirs(wd)
        for n in CERT_FILES:
            shutil.copy(os.path.join(CERTS, n), wd)
        srv = ServerProcess(["--seed", "1"] + [str(a) for a in args], workdir=wd, timeout=30)
        remember(srv.proc)
        self.servers.append(srv)
        self.srv, self.ctl = srv, srv.control
        if settings:
            self.ctl.settings(**settings)
        return srv

    def create(self, name, data=None, **kw):
        return self.ctl.create("configmaps", "default", name, data=data if data is not None else {"k": name}, **kw)

    def update(self, name, data, **kw):
        return self.ctl.update("configmaps", "default", name, data=data, **kw)

    def delete(self, name):
        return self.ctl.delete("configmaps", "default", name)

    def rv(self):
        return str(self.ctl.rv())

    def server_objects(self):
        st = self.ctl.state(resource="configmaps", namespace="default")
        return {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st["objects"].items()}

    # ---- kreflect
    def kreflect(self, *args, **kw):
        self.nkr += 1
        kr = Kreflect(self, args, kw.pop("name", "kreflect%d" % self.nkr), **kw)
        self.krs.append(kr)
        return kr

    # ---- request log
    def reqs(self):
        return [e for e in self.ctl.log() if e["path"] == NS_PATH]

    def wait_reqs(self, n, timeout=10, what=None, done=False):
        """At least n requests logged (the nth finished, if done)."""
        def p():
            r = self.reqs()
            if len(r) >= n and (not done or r[n - 1].get("done")):
                return r
            return None
        try:
            return wait_until(p, timeout, what or "%d requests" % n, 0.05)
        except Fail as e:
            raise Fail("%s; server saw:\n%s" % (e, "\n".join("  " + describe(x) for x in self.reqs()))) from None

    def settle(self, seconds=0.3):
        time.sleep(seconds)

    # ---- mirror
    def mirror_rvs(self, kr):
        m, _ = kr.mirror()
        return {k: o["metadata"].get("resourceVersion") for k, o in m.items()}

    def check_mirror(self, kr, timeout=10):
        """The mirror converges to the server's state; no anomalies on the way."""
        last = {}

        def p():
            want = self.server_objects()
            got = self.mirror_rvs(kr)
            last["want"], last["got"] = want, got
            return got == want
        try:
            wait_until(p, timeout, "the mirror to match the server", 0.1)
        except Fail:
            want, got = last["want"], last["got"]
            missing = sorted(set(want) - set(got))
            extra = sorted(set(got) - set(want))
            stale = sorted(k for k in set(want) & set(got) if want[k] != got[k])
            raise Fail("mirror differs from the server after %d s: %d missing %s, %d extra %s, %d stale %s"
                       % (timeout, len(missing), missing[:5], len(extra), extra[:5], len(stale),
                          ["%s %s!=%s" % (k, got[k], want[k]) for k in stale[:5]])) from None
        _, anomalies = kr.mirror()
        check(not anomalies, "kreflect's event stream does not fold cleanly: %s" % "; ".join(anomalies[:5]))
        check(not kr.bad, "kreflect printed lines that are not JSON: %r" % kr.bad[:2])

    # ---- end
    def cleanup(self):
        """Stops everything this scenario started (each step on its own, so
        one failure does not leave processes behind)."""
        problems = []
        for kr in self.krs:
            try:
                kr.kill()
                err = kr.stderr()
            except Exception as e:
                problems.append("%s: cleanup: %s" % (kr.name, e))
                continue
            for mark in SANITIZER_MARKS:
                if mark in err:
                    i = err.index(mark)
                    problems.append("%s: sanitizer report in stderr: %s" % (kr.name, err[max(0, i - 80):i + 300]))
                    break
        for srv in self.servers:
            try:
                with open(os.path.join(self.dir, "requests-%s.json" % os.path.basename(srv.workdir)), "w") as f:
                    json.dump(srv.control.call("/log", {"since": 0}, timeout=10)["entries"], f, indent=1)
            except Exception:    # the server may be gone
                pass
            try:
                srv.stop()
            except Exception as e:
                problems.append("stopping the server: %s" % e)
            forget(srv.proc)
        return problems


# =========================================================================== scenarios: client-go's tests

@scenario("TestReflectorListAndWatch/watch-list", 4)
def t_list_and_watch_watchlist(s):
    s.server()
    s.create("foo")
    s.create("bar")
    rv0 = s.rv()
    kr = s.kreflect()
    syn = kr.wait_synced()[0]
    check(syn["resourceVersion"] == rv0 and syn["count"] == 2,
          "SYNCED %s, expected resourceVersion %s count 2" % (syn, rv0))
    before = kr.snapshot()
    before = before[:before.index(syn)]
    check(sorted((e["type"], e["object"]["metadata"]["name"]) for e in before) ==
          [("ADDED", "bar"), ("ADDED", "foo")], "before SYNCED: %s" % [(e["type"], obj_key(e["object"])) for e in before])
    s.update("foo", {"k": "foo2"})
    s.create("baz")
    s.create("qux")
    s.delete("bar")
    s.update("baz", {"k": "baz2"})
    s.create("zoo")
    kr.wait_event("ADDED", "zoo")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status="open")])


@scenario("TestReflectorListAndWatch/list", 4)
def t_list_and_watch_list(s):
    s.server()
    s.create("foo")
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    syn = kr.wait_synced()[0]
    check(syn["resourceVersion"] == rv0 and syn["count"] == 1, "SYNCED %s, expected RV %s count 1" % (syn, rv0))
    s.update("foo", {"k": "foo2"})
    for n in ("bar", "baz", "qux"):
        s.create(n)
    s.delete("baz")
    s.create("zoo")
    kr.wait_event("ADDED", "zoo")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0, status="open")])


@scenario("TestReflectorListAndWatchWithErrors", 8)
def t_list_and_watch_with_errors(s):
    s.server()
    s.create("foo")
    s.create("bar")
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=500, watch=False, count=1)       # the first LIST
    s.ctl.fault(kind="status", code=500, watch=True, count=1)        # the first WATCH
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(1, timeout=10)
    s.delete("foo")
    s.create("qux")
    kr.wait_synced(2, timeout=15)
    s.create("baz")
    kr.wait_event("ADDED", "baz")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500, status=500), L(rv="0", limit=500), W(rv0, status=500),
                        L(rv=rv0), W(ANY, status="open")])
    check(gap(r[0], r[1]) >= 0.75, "LIST retried %.2f s after the 500, expected a backoff >= 0.8 s" % gap(r[0], r[1]))
    check(gap(r[2], r[3]) >= 0.75, "relist %.2f s after the watch 500, expected a backoff" % gap(r[2], r[3]))
    check(r[4]["query"]["resourceVersion"] == kr.synced()[-1]["resourceVersion"],
          "watch at %s, last SYNCED at %s" % (r[4]["query"]["resourceVersion"], kr.synced()[-1]["resourceVersion"]))
    check(" 500 " in kr.stderr() or "500" in kr.stderr(), "stderr does not mention the 500")


@scenario("TestReflectorWatchHandler", 4)
def t_watch_handler(s):
    s.server()
    s.create("foo")
    s.create("bar")
    rv0 = s.rv()
    svc = {"type": "ADDED", "object": {"kind": "Service", "apiVersion": "v1",
                                       "metadata": {"name": "rejected", "namespace": "default",
                                                    "resourceVersion": "99999", "uid": "x"}}}
    s.ctl.fault(kind="garbage", line=json.dumps(svc) + "\n", after_events=0, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    s.delete("foo")
    s.update("bar", {"k": "bar55"})
    s.create("baz")
    kr.wait_event("ADDED", "baz")
    s.check_mirror(kr)
    check(not kr.events_for("rejected"), "the Service event was mirrored: %s" % kr.events_for("rejected"))
    check("another kind" in kr.stderr(), "stderr does not say the wrong-kind event was skipped")
    last = s.rv()
    s.ctl.drop_watches()       # the re-watch shows the RV kreflect kept: the last event's, not 99999
    s.wait_reqs(3)
    s.create("after")
    kr.wait_event("ADDED", "after")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0), W(last, status="open")])


@scenario("TestReflectorExpiredExactResourceVersion", 5)
def t_expired_exact_rv(s):
    s.server("--initial", 4)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    s.ctl.fault(kind="expired", match="configmaps?resourceVersion=", watch=False, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(1)
    s.create("late")
    s.delete("cm-00001")
    kr.wait_synced(2, timeout=10)
    s.create("later")
    kr.wait_event("ADDED", "later")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    rv1 = kr.synced()[1]["resourceVersion"]
    expect_requests(r, [L(rv="0", limit=500), W(rv0), L(rv=rv0, status=410), L(), W(rv1, status="open")])
    check(gap(r[1], r[2]) >= 0.75, "relist %.2f s after the watch 410, expected a backoff" % gap(r[1], r[2]))
    check(gap(r[2], r[3]) < late(0.7), "the RV=\"\" list came %.2f s after the 410, expected at once" % gap(r[2], r[3]))
    check(kr.synced()[1]["count"] == 4, "SYNCED after the relist: %s" % kr.synced()[1])


@scenario("TestReflectorFullListIfExpired", 5)
def t_full_list_if_expired(s):
    s.server("--initial", 8, "--initial-size", 64, rv0_ignores_limit=False)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off", "--page-size", "4")
    kr.wait_synced(1)
    # The watch has its 410 by now; the relist comes after a backoff of >= 0.8 s.
    s.ctl.fault(kind="expired", match="continue=", watch=False, count=1)
    kr.wait_synced(2, timeout=10)
    check(kr.synced()[1]["count"] == 8, "SYNCED after the full list: %s" % kr.synced()[1])
    s.create("late")
    kr.wait_event("ADDED", "late")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=4), L(limit=4, cont=True), W(rv0),
                               L(rv=rv0, limit=4), L(limit=4, cont=True, status=410), L(rv=rv0),
                               W(rv0, status="open")])


@scenario("TestReflectorFullListIfTooLarge", 14)
def t_full_list_if_too_large(s):
    s.server("--initial", 3)
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=3)
    kr = s.kreflect("--watch-list", "off")
    specs = [L(rv="0", limit=500)]
    nreq = 1
    for variant in ("cause", "cause_message", "message"):
        # Without Retry-After, as the reflector sees it once client-go's REST layer
        # has used up its retries (TooLargeListRetryAfter has the header).
        s.ctl.fault(kind="status", code=504, too_large=variant, retry_after=0,
                    match="configmaps?resourceVersion=", count=1)
        nreq += 3       # W (ERROR 410), L 504, L "" (then the next relist after a backoff)
        r = s.wait_reqs(nreq, timeout=15, what="the relist after a 504 (%s)" % variant, done=True)
        specs += [W(ANY), L(rv=ANY, status=504), L()]
        s.create("after-" + variant.replace("_", "-"))
    kr.wait_synced(4, timeout=10)
    s.create("end")
    kr.wait_event("ADDED", "end")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, specs + [W(ANY, status="open")])
    syn = kr.synced()
    for i in range(3):
        # W at the last SYNCED RV; its relist asks for that RV; the retry has none.
        w, lst = r[1 + 3 * i], r[2 + 3 * i]
        check(w["query"]["resourceVersion"] == syn[i]["resourceVersion"] == lst["query"]["resourceVersion"],
              "relist %d: watch at %s, list at %s, SYNCED %s" % (i + 1, w["query"]["resourceVersion"],
                                                               lst["query"]["resourceVersion"], syn[i]))
        check(gap(r[2 + 3 * i], r[3 + 3 * i]) < late(0.7), "the RV=\"\" list came %.2f s after the 504 (relist %d)"
              % (gap(r[2 + 3 * i], r[3 + 3 * i]), i + 1))


@scenario("TooLargeListRetryAfter", 8)
def t_too_large_retry_after(s):
    """The API server's 504 TooLarge carries Retry-After: 1 (its watch cache
    is behind the RV asked for): client-go's REST layer repeats the same list
    after it, before the reflector would fall back to a consistent read."""
    s.server("--initial", 3)
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    s.ctl.fault(kind="status", code=504, too_large="cause", match="configmaps?resourceVersion=", count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(2, timeout=15)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(ANY), L(rv=ANY, status=504), L(rv=ANY), W(ANY, status="open")])
    check(r[2]["query"]["resourceVersion"] == r[3]["query"]["resourceVersion"] != "",
          "the list after the 504 asked for RV %r, the 504's for %r" % (r[3]["query"].get("resourceVersion"),
                                                                       r[2]["query"].get("resourceVersion")))
    check(gap(r[2], r[3]) >= 0.95, "the list was repeated %.2f s after Retry-After: 1" % gap(r[2], r[3]))


@scenario("TestNoRelistOnTooManyRequests", 9)
def t_no_relist_on_429(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=429, watch=True, count=2)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.wait_reqs(3, done=True, timeout=10)
    # A third 429, with Retry-After: waited for as asked.
    s.ctl.fault(kind="status", code=429, retry_after=1, watch=True, count=1)
    s.wait_reqs(5, timeout=15)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0, status=429), W(rv0, status=429), W(rv0, status=429),
                        W(rv0, status="open")])
    check(gap(r[1], r[2]) >= 0.75, "re-watch %.2f s after a 429, expected a backoff >= 0.8 s" % gap(r[1], r[2]))
    check(gap(r[2], r[3]) >= 1.5, "re-watch %.2f s after the second 429, expected >= 1.6 s" % gap(r[2], r[3]))
    check(gap(r[3], r[4]) >= 0.95, "re-watch %.2f s after a 429 with Retry-After: 1" % gap(r[3], r[4]))
    check(len(kr.synced()) == 1, "%d SYNCED lines: a relist happened" % len(kr.synced()))


@scenario("TestBackoffOnTooManyRequests", 4)
def t_backoff_on_429_event(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=429, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.wait_reqs(3, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check(r[1]["events"] == 1, "the first watch sent %s events, expected the ERROR only" % r[1]["events"])
    check(gap(r[1], r[2]) >= 0.75, "re-watch %.2f s after the ERROR 429, expected >= 0.8 s" % gap(r[1], r[2]))


@scenario("TestReflectorWatchListPageSize", 5)
def t_watch_list_page_size(s):
    s.server("--initial", 10, "--initial-size", 64, rv0_ignores_limit=False)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off", "--page-size", "4")
    kr.wait_synced(2, timeout=10)
    check([x["count"] for x in kr.synced()] == [10, 10], "SYNCED counts %s" % kr.synced())
    s.check_mirror(kr)
    s.settle()
    pages = [L(rv="0", limit=4), L(limit=4, cont=True), L(limit=4, cont=True)]
    expect_requests(s.reqs(), pages + [W(rv0), L(rv=rv0, limit=4), L(limit=4, cont=True),
                                       L(limit=4, cont=True), W(rv0, status="open")])


def local_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def kreflect_metrics(port):
    """kreflect's --listen /metrics: {family name: its samples summed over labels}."""
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        name = name.split("{")[0]
        try:
            out[name] = out.get(name, 0) + float(value)
        except ValueError:
            pass
    return out


@scenario("metrics-lists-count-pages", 4)
def t_metrics_lists_count_pages(s):
    # kreflect_lists_total is "LIST requests sent (pages included)": it once
    # counted list cycles, so a paginated list of 3 pages showed 1.
    s.server("--initial", 10, "--initial-size", 64, rv0_ignores_limit=False)
    port = local_port()
    kr = s.kreflect("--watch-list", "off", "--page-size", "4", "--listen", "127.0.0.1:%d" % port)
    kr.wait_synced(1, timeout=10)
    s.settle()
    lists = [e for e in s.reqs() if req_kind(e) == "L"]
    check(len(lists) == 3, "want 3 pages of 4 for 10 objects, the server saw %d" % len(lists))
    got = kreflect_metrics(port).get("kreflect_lists_total")
    check(got == 3, "kreflect_lists_total after 3 LIST pages: %s" % got)
    # The debug line of each page counts its items (it once said "0 events").
    ends = re.findall(r"configmaps: list request ended: status 200, (\d+) items, complete", kr.stderr())
    check(ends == ["4", "4", "2"], "the pages' debug lines counted %s items, expected 4, 4, 2" % ends)


@scenario("metrics-expired-continue", 4)
def t_metrics_expired_continue(s):
    # An expired continue token is a 410 answer: kreflect_expired_total counts
    # it (it once did not; a compaction on the real server found it).
    s.server("--initial", 10, "--initial-size", 64, rv0_ignores_limit=False)
    s.ctl.fault(kind="expired", match="continue=", watch=False, count=1)
    port = local_port()
    kr = s.kreflect("--watch-list", "off", "--page-size", "4", "--listen", "127.0.0.1:%d" % port)
    kr.wait_synced(1, timeout=10)
    s.check_mirror(kr)
    got = kreflect_metrics(port).get("kreflect_expired_total")
    check(got == 1, "kreflect_expired_total after one expired continue token: %s" % got)


@scenario("TestReflectorNotPaginatingNotConsistentReads", 4)
def t_not_paginating(s):
    s.server("--initial", 10, "--initial-size", 64)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(2, timeout=10)
    check(kr.synced()[1]["count"] == 10, "SYNCED %s" % kr.synced()[1])
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])


# ---- TestWatchList sub-cases

@scenario("TestWatchList/a-no-bookmark-falls-back-to-list-remembered", 6)
def t_watchlist_a(s):
    s.server("--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="initial_events_end", value=None, count=1)
    s.ctl.fault(kind="watch_error", code=410, match="&resourceVersion=", watch=True, count=1)
    kr = s.kreflect("--initial-events-timeout", "1")
    kr.wait_synced(1, timeout=10)
    waited = time.monotonic() - kr.t0       # kr.t0 is before the exec: the timer cannot start earlier
    check(waited >= 0.9, "synced after %.2f s, before the 1 s initial-events timeout" % waited)
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])
    check("watch-list" in kr.stderr(), "stderr does not explain the watch-list fallback")


@scenario("WatchListNoBookmarkBusyResourceFallsBack", 8)
def t_watchlist_no_bookmark_busy(s):
    """A watch-list that never sends its end bookmark on a resource that
    changes faster than the quiet time: the events keep it from being quiet,
    so the deadline is also capped at 10 quiet times from the start (found
    by make soak)."""
    s.server("--initial", 3)
    s.ctl.fault(kind="initial_events_end", value=None, count=1)
    kr = s.kreflect("--initial-events-timeout", "1")
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            s.create("busy-%d" % i)
            i += 1
            stop.wait(0.3)

    th = threading.Thread(target=churn, daemon=True)
    th.start()
    try:
        kr.wait_synced(1, timeout=20)
    finally:
        stop.set()
        th.join(5)
    waited = time.monotonic() - kr.t0
    check(waited >= 9, "synced after %.1f s, before the 10 s cap" % waited)
    check("within" in kr.stderr(), "stderr does not say the bookmark did not come in time")
    s.settle()
    s.check_mirror(kr)


@scenario("TestWatchList/c-error-falls-back-not-remembered", 4)
def t_watchlist_c(s):
    s.server("--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=500, match="sendInitialEvents=true", count=1)
    s.ctl.fault(kind="watch_error", code=410, match="&resourceVersion=", watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status=500), L(rv="0", limit=500), W(rv0), WL(rv=rv0, status="open")])


@scenario("TestWatchList/d-422-falls-back-remembered", 4)
def t_watchlist_d(s):
    s.server("--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=422, match="sendInitialEvents=true", count=1)
    s.ctl.fault(kind="watch_error", code=410, match="&resourceVersion=", watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status=422), L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])


@scenario("TestWatchList/f-updates-and-deletes-while-streaming", 5)
def t_watchlist_f(s):
    s.server()
    for n in ("p1", "p2", "p3"):
        s.create(n)
    s.ctl.fault(kind="initial_events_end", delay=2.0, count=1)
    kr = s.kreflect()
    kr.wait(lambda ls: sum(1 for e in ls if e["type"] == "ADDED") >= 3, 10, "3 ADDED")
    check(not kr.synced(), "SYNCED before the initial-events-end bookmark")
    s.update("p1", {"k": "p1-v2"})
    s.delete("p3")
    s.create("p4")
    rv1 = s.rv()
    syn = kr.wait_synced(1, timeout=10)[0]
    check(syn["resourceVersion"] == rv1 and syn["count"] == 3, "SYNCED %s, expected RV %s count 3" % (syn, rv1))
    lines = kr.snapshot()
    types = [(e["type"], obj_key(e["object"]) if "object" in e else "") for e in lines]
    check(types[:7] == [("ADDED", "default/p1"), ("ADDED", "default/p2"), ("ADDED", "default/p3"),
                        ("MODIFIED", "default/p1"), ("DELETED", "default/p3"), ("ADDED", "default/p4"),
                        ("SYNCED", "")], "output %s" % types)
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status="open")])


@scenario("TestWatchList/g-429-retried", 6)
def t_watchlist_g(s):
    s.server("--initial", 2)
    s.ctl.fault(kind="status", code=429, match="sendInitialEvents=true", count=2)
    kr = s.kreflect()
    kr.wait_synced(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(status=429), WL(status=429), WL(status="open")])
    check(gap(r[0], r[1]) >= 0.75 and gap(r[1], r[2]) >= 1.5,
          "watch-list retried after %.2f s and %.2f s, expected backoffs >= 0.8 s, >= 1.6 s"
          % (gap(r[0], r[1]), gap(r[1], r[2])))


@scenario("TestWatchList/h-closed-before-bookmark", 3)
def t_watchlist_h(s):
    s.server()
    s.create("p1")
    s.create("p2")
    s.ctl.fault(kind="initial_events_end", value=None, count=1)
    kr = s.kreflect()
    kr.wait(lambda ls: sum(1 for e in ls if e["type"] == "ADDED") >= 2, 10, "2 ADDED")
    s.ctl.drop_watches()
    kr.wait_synced(1, timeout=10)
    check(kr.synced()[0]["count"] == 2, "SYNCED %s" % kr.synced()[0])
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(), WL(status="open")])
    check(gap(r[0], r[1]) < late(0.7), "second watch-list %.2f s after the close, expected at once" % gap(r[0], r[1]))


@scenario("TestWatchList/i-closed-after-bookmark", 3)
def t_watchlist_i(s):
    s.server()
    s.create("p1")
    s.create("p2")
    kr = s.kreflect()
    kr.wait_synced()
    s.create("p3")
    rv3 = s.rv()
    kr.wait_event("ADDED", "p3")
    s.ctl.drop_watches()
    s.wait_reqs(2)
    s.create("p4")
    kr.wait_event("ADDED", "p4")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), W(rv3, status="open")])


@scenario("TestWatchList/j-expired-on-rewatch", 5)
def t_watchlist_j(s):
    s.server()
    s.create("p1")
    s.create("p2")
    kr = s.kreflect()
    kr.wait_synced()
    s.create("p3")
    rv3 = s.rv()
    kr.wait_event("ADDED", "p3")
    s.ctl.fault(kind="stall", seconds=1.5, watch=True, count=1)
    s.ctl.drop_watches()
    s.wait_reqs(2)
    s.create("p4")          # while kreflect is away: its re-watch at p3 is now too old
    s.delete("p1")
    s.ctl.compact()
    kr.wait_synced(2, timeout=10)
    kr.wait_event("DELETED", "p1")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(), W(rv3), WL(rv=rv3, status="open")])
    check(r[1]["events"] == 1, "the re-watch sent %s events, expected one ERROR" % r[1]["events"])


@scenario("TestWatchList/k-bookmark-value-false", 5)
def t_watchlist_k(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="initial_events_end", value="false", count=1)
    kr = s.kreflect("--initial-events-timeout", "2")
    kr.wait_synced(1, timeout=10)
    waited = time.monotonic() - kr.t0       # kr.t0 is before the exec: the timer cannot start earlier
    check(waited >= 1.9, "synced after %.2f s: the \"false\" bookmark ended the initial events" % waited)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), L(rv="0", limit=500), W(rv0, status="open")])


# =========================================================================== scenarios: beyond client-go's tests

@scenario("Paged5000Objects", 12)
def t_paged_5000(s):
    s.server("--initial", 5000, "--initial-size", 16, rv0_ignores_limit=False)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off", "-v", "1")
    kr.wait_synced(2, timeout=40)
    held = min(5000, CAPACITY["objects"])
    check([x["count"] for x in kr.synced()] == [held, held], "SYNCED counts %s, expected %d (capacity %d)"
          % ([x["count"] for x in kr.synced()], held, CAPACITY["objects"]))
    if held == 5000:
        s.check_mirror(kr, timeout=10)
    else:
        # More objects than KR_MAX_OBJECTS: the first ones in list order are
        # mirrored exactly, each of the others is reported once per list, and
        # nothing is deleted or made up.
        want = s.server_objects()
        got = s.mirror_rvs(kr)
        check(len(got) == held and all(want.get(k) == v for k, v in got.items()),
              "%d mirrored, %d of them not as on the server" % (len(got), sum(want.get(k) != v for k, v in got.items())))
        _, anomalies = kr.mirror()
        check(not anomalies, "event stream: %s" % anomalies[:3])
        # The first three per list are logged, the rest counted; each SYNCED says partial.
        n = kr.stderr().count("capacity exhausted")
        check(n == 2 * 3, "%d 'capacity exhausted' errors, expected %d" % (n, 2 * 3))
        syncs = kr.synced()
        check(syncs and all(e.get("partial") is True for e in syncs), "SYNCED lines not partial: %s" % syncs[:2])
        check("%d objects could not be read or held" % (5000 - held) in kr.stderr(),
              "no count of the objects not held at the sync")
    s.settle()
    pages = [L(limit=500, cont=True)] * 9
    # The relist keeps pages of 500: RV "0" was answered in pages (no watch cache).
    expect_requests(s.reqs(), [L(rv="0", limit=500)] + pages + [W(rv0), L(rv=rv0, limit=500)] + pages +
                    [W(rv0, status="open")])


@scenario("RandomChunkBoundaries", 5)
def t_random_chunks(s):
    s.server()
    for i in range(20):
        s.create("c%02d" % i, {"k": "v" * (i * 37), "esc": "quote\" backslash\\ <tag> & \u00e9\u65e5"})
    s.ctl.fault(kind="random_chunks", seed=5, min=1, max=64, count=-1)
    kr1 = s.kreflect("--watch-list", "off")
    kr1.wait_synced()
    s.update("c01", {"k": "changed"})
    s.delete("c02")
    s.create("n1", {"k": "x" * 3000})
    kr1.wait_event("ADDED", "n1")
    s.check_mirror(kr1)
    check(kr1.stop() == 0, "kreflect exited %s on SIGTERM" % kr1.rc)
    kr2 = s.kreflect()
    kr2.wait_synced()
    s.update("c03", {"k": "changed"})
    s.delete("c04")
    s.create("n2", {"k": "y" * 5000})
    kr2.wait_event("ADDED", "n2")
    s.check_mirror(kr2)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(ANY), WL(status="open")])
    check(all("random_chunks" in e["faults"] for e in r), "a request was not randomly chunked")


@scenario("ConnectionClosedMidEvent", 4)
def t_close_mid_event(s):
    s.server()
    s.create("seed")
    rv0 = s.rv()
    s.ctl.fault(kind="close_after", bytes=12000, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    ra = s.create("a", {"payload": "a" * 8000})["resourceVersion"]
    s.create("b", {"payload": "b" * 8000})
    s.create("c", {"payload": "c"})
    kr.wait_event("ADDED", "c")
    s.check_mirror(kr)
    check(len(kr.events_for("b")) == 1, "b printed %d times" % len(kr.events_for("b")))
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(ra, status="open")])
    check(r[1]["faults"] == ["close_after"], "the first watch was not cut: %s" % r[1]["faults"])


@scenario("DeletionsWhileDisconnected", 5)
def t_deletions_while_disconnected(s):
    s.server()
    for i in range(5):
        s.create("d%d" % i)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.create("x1")
    rv1 = s.rv()
    kr.wait_event("ADDED", "x1")
    s.ctl.fault(kind="stall", seconds=1.5, watch=True, count=1)
    s.ctl.drop_watches()
    s.wait_reqs(3)
    s.delete("d1")
    s.delete("d2")
    s.update("d3", {"k": "changed"})
    s.create("x2")
    s.ctl.compact()
    kr.wait_synced(2, timeout=10)
    for n in ("d1", "d2"):
        kr.wait_event("DELETED", n)
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    rv2 = kr.synced()[1]["resourceVersion"]
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv1), L(rv=rv1), W(rv2, status="open")])
    check(r[2]["events"] == 1, "the re-watch sent %s events, expected one ERROR 410" % r[2]["events"])


@scenario("ConfigMap1MiBByteExact", 6)
def t_big_configmap(s):
    s.server()
    piece = "line \"quoted\" back\\slash\ttab <html> & \u00e9\u65e5\u672c \U0001F600 \u0001\n"
    big1 = (piece * (1048576 // len(piece.encode()) + 1))
    big1 = big1.encode()[:1048576].decode("utf-8", "ignore")
    s.create("big1", {"big": big1, "small": "s"})
    kr = s.kreflect()
    kr.wait_synced()
    big2 = ("0123456789abcdef" * 65536)
    s.create("big2", {"big": big2})
    s.update("big1", {"big": big1[::-1]})
    kr.wait_event("ADDED", "big2")
    kr.wait_event("MODIFIED", "big1")
    s.check_mirror(kr)
    m, _ = kr.mirror()
    for n in ("big1", "big2"):
        want = s.ctl.get("configmaps", "default", n)["data"]
        got = m["default/" + n].get("data")
        check(got == want, "%s: data differs (%d vs %d chars)" % (n, len(json.dumps(got)), len(json.dumps(want))))
    check(len(m["default/big2"]["data"]["big"]) == 1048576, "big2 is not 1 MiB")
    # The LIST path too.
    kr2 = s.kreflect("--watch-list", "off", "--once")
    check(kr2.wait_exit(20) == 0, "--once exited %s: %s" % (kr2.rc, kr2.stderr_tail()))
    m2, _ = kr2.mirror()
    for n in ("big1", "big2"):
        check(m2.get("default/" + n, {}).get("data") == m["default/" + n]["data"], "%s differs in the LIST path" % n)
    s.settle()
    # --once stops after the list: no watch.
    expect_requests(s.reqs(), [WL(status="open"), L(rv="0", limit=500)])


@scenario("ObjectsTooLargeToHold", 6)
def t_too_large_to_hold(s):
    """Objects kreflect cannot hold (larger than max-object, or more JSON
    tokens in their metadata than it can parse) are "present but not held":
    never printed, and a held object that grows past the limit leaves the
    output with a DELETED (the store dropped it), so its later deletion or
    return stays consistent. As many keys in data (checked, not tokenized)
    are held."""
    s.server()
    big = "x" * (CAPACITY["max-object"] + 1000)
    many = {"k%05d" % i: "v" for i in range(CAPACITY["json-tokens"])}
    s.create("a")
    s.create("b")
    s.create("huge", {"big": big})
    s.create("many", {"k": "many"}, annotations=many)
    s.create("wide", many)
    kr = s.kreflect("--watch-list", "off")
    syn = kr.wait_synced()[0]
    check(syn["count"] == 5 and syn.get("partial") is True, "SYNCED %s: expected 5 objects (2 not held)" % syn)
    check("partial: 3 of 5 held" in kr.stderr(), "the synced line: %s" % kr.stderr_tail(2))
    m, _ = kr.mirror()
    check(sorted(m) == ["default/a", "default/b", "default/wide"], "mirrored %s" % sorted(m))
    s.update("a", {"big": big})                   # grows too large: leaves the output
    s.update("b", {"k": "b"}, annotations=many)   # too many tokens: leaves the output
    kr.wait_event("DELETED", "a")
    kr.wait_event("DELETED", "b")
    s.delete("b")                                 # already gone from the output: nothing
    s.update("huge", {"big": "small now"}, mode="replace")      # held now: ADDED
    s.delete("many")                              # never shown: nothing
    s.create("c")
    kr.wait_event("ADDED", "c")
    kr.wait_event("ADDED", "huge")
    time.sleep(0.3)
    m, anomalies = kr.mirror()
    want = {k: v for k, v in s.server_objects().items() if k != "default/a"}
    got = s.mirror_rvs(kr)
    check(got == want, "mirror %s, expected %s" % (got, want))
    check(not anomalies, "event stream: %s" % anomalies[:4])
    err = kr.stderr()
    for n in ("default/a", "default/b", "default/huge", "default/many"):
        check("%s (" % n in err and "present but not held" in err, "stderr does not report %s as not held" % n)
    # A fresh list agrees: 4 objects, "a" not held, so the mirror is partial.
    kr2 = s.kreflect("--watch-list", "off", "--once")
    check(kr2.wait_exit(15) == 1 and "mirror of configmaps is partial" in kr2.stderr(),
          "--once exited %s: %s" % (kr2.rc, kr2.stderr_tail(2)))
    check(kr2.synced()[0]["count"] == 4 and kr2.synced()[0].get("partial") is True and
          s.mirror_rvs(kr2) == want,
          "--once: SYNCED %s, mirror %s" % (kr2.synced(), s.mirror_rvs(kr2)))
    # By watch-list too: the object too large is named from its event's first bytes.
    kr3 = s.kreflect("--watch-list", "on", "--once")
    check(kr3.wait_exit(15) == 1 and kr3.synced()[0].get("partial") is True and
          "partial: 3 of 4 held" in kr3.stderr() and s.mirror_rvs(kr3) == want,
          "--once by watch-list: exit %s, SYNCED %s, %s" % (kr3.rc, kr3.synced(), kr3.stderr_tail(2)))
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(ANY, status="open"), L(rv="0", limit=500),
                               WL()])


@scenario("StalledServerIdleDeadline", 40)
def t_idle_deadline(s):
    s.server("--bookmark-interval", 1)
    s.create("p1")
    s.create("p2")
    # 2 ADDED + the initial-events-end bookmark + 3 periodic bookmarks, then silence.
    s.ctl.fault(kind="stall_watch", after_events=6, watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced()
    time.sleep(5)
    s.create("during-stall")
    r = s.wait_reqs(2, timeout=45, what="the re-watch after the idle deadline")
    kr.wait_event("ADDED", "during-stall", timeout=10)
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(), W(ANY, status="open")])
    took = r[1]["time"] - r[0]["time"]
    check(30 <= took <= late(45), "re-watch %.1f s after the watch-list started; expected the 30 s idle deadline "
          "after the last bookmark (~3 s in)" % took)
    check(r[1]["query"]["resourceVersion"] == kr.synced()[0]["resourceVersion"],
          "re-watch at %s, expected the last bookmark's %s" % (r[1]["query"]["resourceVersion"],
                                                              kr.synced()[0]["resourceVersion"]))


# ---- a stalled stream (issue 16, defect 2): no bytes, no bookmarks, connection open. kreflect
# must notice within 70 s on the very first watch (65 s default deadline: kube-apiserver
# bookmarks about every 60 s), and within 30 s (the floor) once the server has shown a short
# cadence, also on a re-watch (the cadence is the server's, not the stream's). Measured from
# the moment the server fell silent (its request log's stalled_at) to the re-watch request.

def stall_detected(s, kr, n_before, low, high, what):
    r = s.wait_reqs(n_before + 1, timeout=high + 15, what="the re-watch after the stall (%s)" % what)
    stalled = r[n_before - 1]
    check("stalled_at" in stalled, "the server did not stall request %d: %s" % (n_before, describe(stalled)))
    took = r[n_before]["time"] - stalled["stalled_at"]
    with open(os.path.join(s.dir, "stall-detected.txt"), "a") as f:
        f.write("%s: re-watch %.2f s after the server fell silent (bounds %.0f to %.0f s)\n" % (what, took, low, high))
    check(low <= took <= high, "%s: re-watch %.1f s after the server fell silent, expected %.0f to %.0f s"
          % (what, took, low, high))
    check(r[n_before]["query"].get("resourceVersion") == kr.synced()[-1]["resourceVersion"] or
          req_kind(r[n_before]) == "W", "not a re-watch: %s" % describe(r[n_before]))
    check("read-idle deadline" in kr.stderr(), "stderr does not say why the watch was dropped")
    return r, took


@scenario("StallAtSyncNoticedWithin70s", 72)
def t_stall_at_sync(s):
    """The server falls silent right after the watch-list's initial events
    and end bookmark, on the very first watch: nothing is known about its
    bookmarks yet, so the 65 s default deadline applies (was 120 s)."""
    s.server("--initial", 2)                       # bookmarks every 60 s: none come before the stall
    s.ctl.fault(kind="stall_watch", after_events=3, watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced()
    s.create("during-stall")
    r, took = stall_detected(s, kr, 1, 64, 65 + late(5), "first watch, cadence unknown")
    kr.wait_event("ADDED", "during-stall", timeout=10)
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), W(ANY, status="open")])
    check(r[1]["query"]["resourceVersion"] == kr.synced()[0]["resourceVersion"],
          "re-watch at %s, expected the sync's %s" % (r[1]["query"]["resourceVersion"],
                                                      kr.synced()[0]["resourceVersion"]))


@scenario("StallMidStreamLearnedCadence", 45)
def t_stall_mid_stream(s):
    """Bookmarks every 2 s, live events, then silence in the middle of the
    stream: the learnt cadence (2 x 2 s + 5 s, raised to the 30 s floor)
    notices it in 30 s, not the 65 s default."""
    s.server("--initial", 2, "--bookmark-interval", 2)
    # 2 ADDED + end bookmark + 2 live events + 3 periodic bookmarks, then silence.
    s.ctl.fault(kind="stall_watch", after_events=8, watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced()
    s.create("live1")
    s.create("live2")
    kr.wait_event("ADDED", "live2")
    r = s.wait_reqs(1)
    wait_until(lambda: "stalled_at" in s.reqs()[0], 15, "the stall")
    s.create("during-stall")
    r, took = stall_detected(s, kr, 1, 29, 30 + late(5), "mid-stream, cadence 2 s")
    kr.wait_event("ADDED", "during-stall", timeout=10)
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), W(ANY, status="open")])


@scenario("StallAfterRewatchKeepsCadence", 45)
def t_stall_after_rewatch(s):
    """The cadence learnt on the first stream (bookmarks every 2 s) holds for
    the next one: a re-watch that gets no byte at all is dropped after 30 s,
    not after the default (it was reset with every request before)."""
    s.server("--initial", 2, "--bookmark-interval", 2)
    kr = s.kreflect()
    kr.wait_synced()
    time.sleep(5)                                  # two gaps between periodic bookmarks seen
    s.ctl.fault(kind="stall_watch", after_events=0, watch=True, count=1)
    s.ctl.drop_watches()
    r = s.wait_reqs(2)
    s.create("during-stall")
    r, took = stall_detected(s, kr, 2, 29, 30 + late(5), "re-watch, cadence learnt before")
    kr.wait_event("ADDED", "during-stall", timeout=10)
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), W(ANY), W(ANY, status="open")])


@scenario("WatchListUnsupportedServer", 4)
def t_watchlist_unsupported(s):
    s.server("--no-watch-list", "--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, match="&resourceVersion=", watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status=422), L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])
    check("does not support watch-list" in kr.stderr(), "stderr does not say watch-list is unsupported")


@scenario("OnceExitsAfterSync", 3)
def t_once(s):
    s.server("--initial", 20)
    for mode in ("auto", "off"):
        kr = s.kreflect("--once", "--watch-list", mode)
        rc = kr.wait_exit(15)
        check(rc == 0, "--once (watch-list %s) exited %s: %s" % (mode, rc, kr.stderr_tail()))
        lines = kr.snapshot()
        check([e["type"] for e in lines] == ["ADDED"] * 20 + ["SYNCED"] and lines[-1]["count"] == 20,
              "--once (watch-list %s) printed %s" % (mode, [e["type"] for e in lines][-3:]))
        s.check_mirror(kr, timeout=1)
    s.settle()
    expect_requests(s.reqs(), [WL(), L(rv="0", limit=500)])


@scenario("OnceNothingListening", 3)
def t_once_nothing_listening(s):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    kr = s.kreflect("--once", "--timeout", "2", "--insecure-skip-tls-verify",
                    server_url="https://127.0.0.1:%d" % port)
    t0 = time.monotonic()
    rc = kr.wait_exit(10)
    took = time.monotonic() - t0
    err = kr.stderr()
    check(rc == 1, "exit code %s, expected 1: %s" % (rc, kr.stderr_tail()))
    check(1.8 <= took <= late(4), "exited after %.1f s with --timeout 2" % took)
    check("--timeout" in err and "configmaps" in err, "no clear message: %s" % kr.stderr_tail())
    check("refused" in err.lower(), "the message does not say the connection was refused: %s" % kr.stderr_tail())
    check(not kr.snapshot(), "printed %s" % kr.snapshot()[:2])


@scenario("BadToken401", 7)
def t_bad_token(s):
    s.server()
    s.create("a")
    bad = os.path.join(s.dir, "bad-token")
    with open(bad, "w") as f:
        f.write("not-the-token\n")
    kr = s.kreflect(token_file=bad)
    time.sleep(late(5))
    check(kr.running(), "kreflect exited %s: %s" % (kr.proc.poll(), kr.stderr_tail()))
    r = s.reqs()
    check(len(r) >= 3 and all(e["status"] == 401 for e in r if e.get("done")),
          "requests: %s" % [describe(e) for e in r])
    check(len(r) <= 12, "%d requests in 5 s: no backoff? %s" % (len(r), [describe(e) for e in r]))
    starts = [e for e in r if req_kind(e) == "WL"]
    check(len(starts) >= 2, "%d watch-list attempts in 5 s" % len(starts))
    gaps = [b["time"] - a["time"] for a, b in zip(starts, starts[1:])]
    growing = all(g2 >= g1 * 0.9 for g1, g2 in zip(gaps, gaps[1:]))
    check(gaps[0] >= 0.75 and growing, "attempts %s s apart: expected a growing backoff"
          % ["%.2f" % g for g in gaps])
    check("401" in kr.stderr(), "stderr does not mention 401: %s" % kr.stderr_tail())
    check(not kr.snapshot(), "printed %s" % kr.snapshot()[:2])
    check(kr.stop() == 0, "exit code %s after SIGTERM" % kr.rc)


@scenario("TokenRotation", 4)
def t_token_rotation(s):
    """The server rotates the token (the old one stops working at once) and
    rewrites the token file: kreflect's next request uses the new one, at
    most one 401 on the way, no relist."""
    s.server("--initial", 2)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)
    s.ctl.rotate_token()
    s.ctl.drop_watches()
    s.create("x")
    kr.wait_event("ADDED", "x", timeout=10)
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    unauthorized = [e for e in r if e["status"] == 401]
    check(len(unauthorized) <= 1, "%d requests got 401" % len(unauthorized))
    expect_requests([e for e in r if e["status"] != 401], [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check(len(kr.synced()) == 1, "relisted after the rotation")


@scenario("TokenChangesDuringA401", 4)
def t_token_changes_during_401(s):
    """The token file is replaced while a request waits at the server, which
    then answers 401 (the old token was revoked): kreflect re-reads the file
    at once and sends the same request again, sooner than any backoff, and
    does not relist."""
    s.server("--initial", 2)
    rv0 = s.rv()
    tok = os.path.join(s.dir, "token-copy")
    shutil.copy(s.srv.ready["token_file"], tok)
    kr = s.kreflect("--watch-list", "off", token_file=tok)
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)    # not a "very short watch" when it is dropped
    s.ctl.rotate_token()
    s.ctl.fault(kind="stall", seconds=1.5, count=1, match="watch=true")
    s.ctl.drop_watches()
    time.sleep(0.7)
    shutil.copy(s.srv.ready["token_file"], tok)
    s.create("x")
    kr.wait_event("ADDED", "x", timeout=10)
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    bad = [i for i, e in enumerate(r) if e["status"] == 401]
    check(len(bad) == 1, "%d requests got 401, expected exactly 1" % len(bad))
    after = r[bad[0] + 1] if bad and bad[0] + 1 < len(r) else None
    check(after is not None and after["status"] in (200, None), "no successful request after the 401")
    check(after is not None and gap(r[bad[0]], after) < late(0.6),
          "the retry came %.2f s after the 401: a backoff, not the immediate retry" % gap(r[bad[0]], after))
    expect_requests([e for e in r if e["status"] != 401], [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check(len(kr.synced()) == 1, "relisted after the 401")
    check("retrying with the new token" in kr.stderr(), "no log line about the retry")


@scenario("SigtermExits0", 4)
def t_sigterm(s):
    s.server("--initial", 3)
    kr = s.kreflect()
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    t0 = time.monotonic()
    check(kr.stop(signal.SIGTERM) == 0, "exit code %s after SIGTERM while watching" % kr.rc)
    check(time.monotonic() - t0 < late(2), "took %.1f s to stop" % (time.monotonic() - t0))
    kr = s.kreflect()
    kr.wait_synced()
    check(kr.stop(signal.SIGINT) == 0, "exit code %s after SIGINT" % kr.rc)
    # While backing off (bad token): still a clean stop.
    bad = os.path.join(s.dir, "bad-token")
    with open(bad, "w") as f:
        f.write("nope\n")
    kr = s.kreflect(token_file=bad)
    time.sleep(late(1.2))
    check(kr.stop(signal.SIGTERM) == 0, "exit code %s after SIGTERM during a backoff" % kr.rc)


@scenario("UsageErrors", 2)
def t_usage(s):
    srv = ["--server", "https://127.0.0.1:1"]
    cases = [
        ([], "--server"),
        (["--server", "ftp://example"], "--server"),
        (srv + ["--page-size", "0"], "--page-size"),
        (srv + ["--page-size", "x"], "--page-size"),
        (srv + ["--watch-list", "maybe"], "--watch-list"),
        (srv + ["--bogus"], "--bogus"),
        (srv + ["--timeout", "abc"], "--timeout"),
        (srv + ["--initial-events-timeout", "0"], "--initial-events-timeout"),
        (srv + ["--output", "yaml"], "--output"),
        (srv + ["-v", "9"], "--verbosity"),
        (srv + ["--resync", "-1"], "--resync"),
        # Unreadable files: the message names the flag, or what the file is and its path.
        (srv + ["--token-file", os.path.join(s.dir, "missing")], ("--token-file", "token file")),
        (srv + ["--certificate-authority", os.path.join(s.dir, "missing")], ("certificate-authority",)),
        (srv + ["--client-key", os.path.join(s.dir, "missing")], ("client-key", "client key")),
        (srv + ["--namespace"], "--namespace"),
        # The run-time capacities: each bound of each flag.
        (srv + ["--max-objects", "0"], "--max-objects"),
        (srv + ["--max-objects", "1048577"], "--max-objects"),
        (srv + ["--arena-bytes", "127K"], "--arena-bytes"),
        (srv + ["--arena-bytes", "3G"], "--arena-bytes"),
        (srv + ["--arena-bytes", "10x"], "--arena-bytes"),
        (srv + ["--memory", "255K"], "--memory"),
        (srv + ["--memory", "1KB"], "--memory"),
        (srv + ["--memory", "512K"], "--memory"),    # less than the client itself needs
    ]
    bad = []
    for args, flag in cases:
        p = subprocess.run([BIN] + args, capture_output=True, timeout=late(10), env=hermetic_env(s.dir))
        err = p.stderr.decode("utf-8", "replace")
        names = (flag,) if isinstance(flag, str) else flag
        if p.returncode != 2 or not any(n in err for n in names) or p.stdout:
            bad.append("%s -> exit %s, stderr %r" % (" ".join(args) or "(no flags)", p.returncode, err.strip()[:160]))
    check(not bad, "\n".join(bad))


@scenario("CustomResourceDiscovery", 3)
def t_custom_resource(s):
    """A resource not built in is looked up in discovery: a custom resource is
    mirrored like any other; an unknown name is a usage error naming it."""
    s.server("--crd", "widgets.example.com/v1=Widget")
    kr = s.kreflect("--once", resources=("nosuchthings",))
    check(kr.wait_exit(10) == 2 and "nosuchthings" in kr.stderr(),
          "unknown resource: exit %s, %s" % (kr.rc, kr.stderr_tail(2)))
    s.ctl.create("widgets", "default", "w1", spec={"size": 1})
    s.ctl.create("widgets", "default", "w2", spec={"size": 2})
    kr = s.kreflect(resources=("widgets.example.com",))
    kr.wait_synced()
    s.ctl.update("widgets", "default", "w1", spec={"size": 10})
    s.ctl.delete("widgets", "default", "w2")
    s.ctl.create("widgets", "default", "w3", spec={"size": 3})
    kr.wait_event("ADDED", "w3")
    time.sleep(0.3)
    st = s.ctl.state(resource="widgets", namespace="default")["objects"]
    want = {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st.items()}
    check(fold_by_kind(kr.snapshot(), ("Widget",))["Widget"] == want, "mirror %s, server %s"
          % (fold_by_kind(kr.snapshot(), ("Widget",)), want))
    paths = [e["path"] for e in s.ctl.log() if e.get("watch")]
    check(paths == ["/apis/example.com/v1/namespaces/default/widgets"], "watched %s" % paths)


@scenario("ListRetryAfter", 4)
def t_list_retry_after(s):
    s.server("--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=503, retry_after=1, watch=False, count=1)
    kr = s.kreflect("--watch-list", "off")
    syn = kr.wait_synced(1, timeout=10)[0]
    check(syn["resourceVersion"] == rv0 and syn["count"] == 3, "SYNCED %s, expected RV %s count 3" % (syn, rv0))
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500, status=503), L(rv="0", limit=500), W(rv0, status="open")])
    check(gap(r[0], r[1]) >= 0.95, "LIST repeated %.2f s after Retry-After: 1" % gap(r[0], r[1]))


@scenario("ServerErrorRetryAfter", 6)
def t_server_error_retry_after(s):
    """client-go's REST layer honours Retry-After on a 429 and on any 5xx,
    not only 503: a 500 asking for 3 s is repeated after 3 s (a backoff step
    would be 0.8-1.6 s), a 502 on the watch likewise, each the same request."""
    s.server("--initial", 3)
    rv0 = s.rv()
    s.ctl.fault(kind="status", code=500, retry_after=3, watch=False, count=1)
    s.ctl.fault(kind="status", code=502, retry_after=2, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x", timeout=10)
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500, status=500), L(rv="0", limit=500),
                        W(rv0, status=502), W(rv0, status="open")])
    check(gap(r[0], r[1]) >= 2.95, "LIST repeated %.2f s after a 500 with Retry-After: 3" % gap(r[0], r[1]))
    check(gap(r[2], r[3]) >= 1.95, "watch repeated %.2f s after a 502 with Retry-After: 2" % gap(r[2], r[3]))
    check("retrying in 3 s as it asked" in kr.stderr(), "no log line for the wait: %s" % kr.stderr_tail())


@scenario("WatchListRetryAfter", 4)
def t_watchlist_retry_after(s):
    s.server("--initial", 3)
    s.ctl.fault(kind="status", code=503, retry_after=1, match="sendInitialEvents=true", count=1)
    kr = s.kreflect()
    kr.wait_synced(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(status=503), WL(status="open")])
    check(gap(r[0], r[1]) >= 0.95, "watch-list repeated %.2f s after Retry-After: 1" % gap(r[0], r[1]))


@scenario("SlowWatchListAnswerNotRemembered", 4)
def t_slow_watchlist_answer(s):
    """The initial-events deadline is quiet time in a stream the server has
    accepted: a watch-list answered late (APF queueing, a slow link) is waited
    for, not cut and remembered as unsupported."""
    s.server("--initial", 3)
    s.ctl.fault(kind="stall", seconds=2, match="sendInitialEvents=true", count=1)
    kr = s.kreflect("--initial-events-timeout", "1")
    kr.wait_synced(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(status="open")])


@scenario("CleanEndRewatches", 3)
def t_clean_end(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)                 # not a "very short watch" when dropped
    s.ctl.fault(kind="end_watch", after_events=1, watch=True, count=1)
    s.ctl.drop_watches()            # the next watch gets the fault
    s.wait_reqs(3)
    rv1 = s.create("x")["resourceVersion"]
    s.wait_reqs(4)
    s.create("y")
    kr.wait_event("ADDED", "y")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    # The clean end (after one event) re-watches at once from that event.
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0), W(rv1, status="open")])
    check(gap(r[2], r[3]) < late(0.7), "re-watch %.2f s after a clean end, expected at once" % gap(r[2], r[3]))


@scenario("QuietCleanEndRewatches", 4)
def t_quiet_clean_end(s):
    """A watch that ends cleanly with no events after more than a second is
    not a "very short watch": re-watch at once from the same RV, no relist."""
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="stall_watch", seconds=1.3, watch=True, count=1)
    s.ctl.fault(kind="end_watch", watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.wait_reqs(3, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check(gap(r[1], r[2]) < late(0.7), "re-watch %.2f s after a quiet clean end, expected at once" % gap(r[1], r[2]))


@scenario("StaleKeepAliveConnection", 4)
def t_stale_keepalive(s):
    """The server closes idle kept-alive connections (here after 0.3 s); the
    re-watch after a backoff finds its connection closed and resends on a new
    one, without an error or a relist."""
    s.server("--initial", 2, "--idle-timeout", 0.3)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=429, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.wait_reqs(3, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check(r[0]["conn"] == r[1]["conn"] != r[2]["conn"], "connections %s" % [e["conn"] for e in r])
    bad = [ln for ln in kr.stderr().splitlines() if (": warn: " in ln or ": error: " in ln) and "429" not in ln]
    check(not bad, "warnings besides the 429: %s" % bad[:3])


@scenario("IPv6AndFieldSelector", 3)
def t_ipv6_field_selector(s):
    srv = s.server()
    s.create("a")
    s.create("b")
    if "server6" in srv.ready:
        kr = s.kreflect("--once", server_url=srv.ready["server6"])
        check(kr.wait_exit(10) == 0, "--once over IPv6 exited %s: %s" % (kr.rc, kr.stderr_tail()))
        check(sorted(fold(kr.snapshot())[0]) == ["default/a", "default/b"], "IPv6 mirror %s" % kr.snapshot())
    kr = s.kreflect("--field-selector", "metadata.name=b", "--watch-list", "off")
    kr.wait_synced()
    s.update("a", {"k": "a2"})
    s.update("b", {"k": "b2"})
    kr.wait_event("MODIFIED", "b")
    s.settle()
    m, anomalies = kr.mirror()
    check(sorted(m) == ["default/b"] and not anomalies, "field-selected mirror %s %s" % (sorted(m), anomalies))
    r = [e for e in s.reqs() if e["query"].get("fieldSelector")]
    check(len(r) == 2 and all(e["query"]["fieldSelector"] == "metadata.name=b" for e in r),
          "requests %s" % [describe(e) for e in s.reqs()])


@scenario("VeryShortWatchRelists", 4)
def t_very_short_watch(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="end_watch", after_events=0, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])
    check(gap(r[1], r[2]) >= 0.75, "relist %.2f s after a very short watch, expected a backoff" % gap(r[1], r[2]))


@scenario("WatchErrorEventsRelist", 6)
def t_watch_error_events(s):
    """ERROR 500 InternalError, and an ERROR whose object is not a Status
    (TestCloseWatchChannelOnError): both end the watch; relist after a backoff."""
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=500, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(2, timeout=10)
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}}
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)                 # not a "very short watch" when dropped
    s.ctl.fault(kind="watch_error", object=pod, watch=True, count=1)
    s.ctl.drop_watches()
    kr.wait_synced(3, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    check(not kr.events_for("p"), "the Pod in the ERROR event was mirrored")
    s.settle()
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0), W(rv0), L(rv=rv0),
                               W(rv0, status="open")])


@scenario("MalformedStreamRewatches", 4)
def t_malformed_stream(s):
    """A line that is not JSON: kreflect re-watches from the last event applied
    after a backoff (client-go would relist)."""
    s.server()
    s.create("a")
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)                 # not a "very short watch" when dropped
    s.ctl.fault(kind="garbage", after_events=1, watch=True, count=1)
    s.ctl.drop_watches()
    s.wait_reqs(3)
    rv1 = s.create("b")["resourceVersion"]
    s.wait_reqs(4, timeout=10)
    s.create("c")
    kr.wait_event("ADDED", "c")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0), W(rv1, status="open")])
    # The garbage line came right after b (the server notices the close later).
    after = r[3]["time"] - kr.time_of("ADDED", "b")
    check(after >= 0.75, "re-watch %.2f s after a malformed stream, expected a backoff" % after)


# ---- a watch event cut short (issue 16, defect 1): half a line, its newline, then whole events.
# kreflect must drop the stream with a clear error, re-watch from the last event it applied
# (no relist), get the cut event whole, and go on with the events after it.

def cut_event_rewatches(s, at, resource="configmaps", watch_list="off", row=1):
    path = NS_PATH if resource == "configmaps" else "/apis/apps/v1/namespaces/default/deployments"

    def make(name):
        if resource == "deployments":
            # A number with several digits to cut inside (ConfigMaps carry none).
            return s.ctl.create(resource, "default", name, spec={"replicas": 12345})["resourceVersion"]
        return s.ctl.create(resource, "default", name)["resourceVersion"]

    def want():
        st = s.ctl.state(resource=resource, namespace="default")["objects"]
        return {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st.items()}

    def reqs():
        return [e for e in s.ctl.log() if e["path"] == path]

    s.server("--bookmark-interval", 0)
    make("a")
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", watch_list,
                    resources=("deployments.apps",) if resource == "deployments" else ("configmaps",))
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)                 # not a "very short watch" when dropped
    # The next event whole, the one after it cut (on `row` watches in a row), then whole ones.
    s.ctl.fault(kind="cut_event", at=at, after_events=1, watch=True, count=1, match=path)
    s.ctl.drop_watches()
    wait_until(lambda: len(reqs()) >= (3 if watch_list == "off" else 2), 10, "the re-watch")
    rv_b = make("b")
    kr.wait_event("ADDED", "b")
    if row > 1:
        # The next watches' first event cut too (that is, the same event again).
        s.ctl.fault(kind="cut_event", at=at, after_events=0, watch=True, count=row - 1, match=path)
    t_cut = time.monotonic()
    make("c")                       # cut
    make("d")                       # whole, on the same stream
    kr.wait_event("ADDED", "c", timeout=5 + 8 * row)
    kr.wait_event("ADDED", "d", timeout=5)
    took = time.monotonic() - t_cut
    make("e")                       # after the re-watch
    kr.wait_event("ADDED", "e", timeout=10)
    last = {}

    def converged():
        m, _ = kr.mirror()
        last["got"] = {k: o["metadata"].get("resourceVersion") for k, o in m.items()}
        last["want"] = want()
        return last["got"] == last["want"]
    try:
        wait_until(converged, 10, "the mirror to match the server")
    except Fail:
        raise Fail("mirror %s, server %s" % (last.get("got"), last.get("want"))) from None
    _, anomalies = kr.mirror()
    check(not anomalies, "event stream: %s" % anomalies[:4])
    check(not kr.bad, "kreflect printed lines that are not JSON: %r" % kr.bad[:2])
    for n in ("c", "d", "e"):
        evs = [e["type"] for e in kr.events_for(n)]
        check(evs == ["ADDED"], "%s: events %s, expected one ADDED" % (n, evs))
    names = [e["object"]["metadata"]["name"] for e in kr.snapshot() if e.get("type") == "ADDED"]
    check(names.index("c") < names.index("d") < names.index("e"), "order of the events: %s" % names)
    err = kr.stderr()
    check(err.count("unable to read the watch stream") == row,
          "expected %d 'unable to read the watch stream' error(s): %s" % (row, kr.stderr_tail()))
    check(took < late(4 + 7 * row), "the cut event arrived %.1f s after it was made" % took)
    s.settle()
    r = reqs()
    first = [L(rv="0", limit=500), W(rv0)] if watch_list == "off" else [WL()]
    # Every re-watch starts at b, the last event applied: nothing skipped, no relist.
    expect_requests(r, first + [W(rv0)] + [W(rv_b)] * (row - 1) + [W(rv_b, status="open")])


@scenario("CutEventRewatches/string", 6)
def t_cut_event_string(s):
    cut_event_rewatches(s, "string")


@scenario("CutEventRewatches/number", 6)
def t_cut_event_number(s):
    cut_event_rewatches(s, "number", resource="deployments")


@scenario("CutEventRewatches/before-newline", 6)
def t_cut_event_newline(s):
    cut_event_rewatches(s, "newline")


@scenario("CutEventRewatches/control-byte", 6)
def t_cut_event_control(s):
    cut_event_rewatches(s, "control")


@scenario("CutEventRewatches/watch-list", 6)
def t_cut_event_watch_list(s):
    cut_event_rewatches(s, "string", watch_list="on")


@scenario("CutEventRewatches/three-in-a-row", 16)
def t_cut_event_row(s):
    cut_event_rewatches(s, "newline", row=3)


@scenario("CutEventDuringWatchListFallsBack", 6)
def t_cut_event_initial(s):
    """A cut event among a watch-list's initial events: the stream is dropped
    and the resource listed instead (watch-list not remembered as unsupported);
    the mirror is exact and later events arrive."""
    s.server("--initial", 5)
    s.ctl.fault(kind="cut_event", at="string", after_events=2, watch=True, count=1)
    kr = s.kreflect()
    kr.wait_synced(timeout=10)
    check(kr.synced()[0]["count"] == 5, "SYNCED %s" % kr.synced()[0])
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    expect_requests(s.reqs(), [WL(), L(rv="0", limit=500), W(ANY, status="open")])
    check("unable to read the watch stream" in kr.stderr(), "no error line: %s" % kr.stderr_tail())
    check("does not support watch-list" not in kr.stderr(), "watch-list remembered as unsupported")


@scenario("ListCutMidBody", 4)
def t_list_cut(s):
    s.server("--initial", 30, "--initial-size", 500)
    rv0 = s.rv()
    s.ctl.fault(kind="close_after", bytes=6000, watch=False, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(1, timeout=10)
    check(kr.synced()[0]["count"] == 30, "SYNCED %s" % kr.synced()[0])
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500), L(rv="0", limit=500), W(rv0, status="open")])
    check(gap(r[0], r[1]) >= 0.75, "LIST repeated %.2f s after the cut, expected a backoff" % gap(r[0], r[1]))


@scenario("LabelSelector", 3)
def t_label_selector(s):
    s.server()
    s.create("in1", labels={"app": "x"})
    s.create("out1", labels={"app": "y"})
    rv0 = s.rv()
    for mode in ("off", "on"):
        kr = s.kreflect("-l", "app=x", "--watch-list", mode)
        kr.wait_synced()
        m, _ = kr.mirror()
        check(sorted(m) == ["default/in1"], "mirror %s" % sorted(m))
        if mode == "off":
            # The watch follows the list; a slow kreflect (valgrind) may not have sent it yet.
            wait_until(lambda: len(s.reqs()) >= 2, 5, "the watch after the list")
        check(kr.stop() == 0, "exit %s" % kr.rc)
    kr = s.kreflect("-l", "app=x")
    kr.wait_synced()
    s.create("in2", labels={"app": "x"})
    s.update("in1", None, labels={"app": "z"})          # stops matching: DELETED
    s.update("out1", None, labels={"app": "x"})         # starts matching: ADDED
    kr.wait_event("ADDED", "out1")
    kr.wait_event("DELETED", "in1")
    m, anomalies = kr.mirror()
    want = {k: v for k, v in s.server_objects().items() if k != "default/in1"}
    check({k: o["metadata"]["resourceVersion"] for k, o in m.items()} == want and not anomalies,
          "mirror %s, expected %s; %s" % (sorted(m), sorted(want), anomalies[:3]))
    s.settle()
    sel = {"labelSelector": "app=x"}
    specs = [L(rv="0", limit=500), W(rv0), WL(), WL(status="open")]
    specs = [(k, dict(q, **sel), st) for k, q, st in specs]
    expect_requests(s.reqs(), specs)


@scenario("Resync", 4)
def t_resync(s):
    s.server("--initial", 3)
    kr = s.kreflect("--resync", "1")
    kr.wait_synced()
    kr.wait(lambda ls: sum(1 for e in ls if e["type"] == "RESYNC") >= 6, 5, "two rounds of RESYNC")
    res = [e for e in kr.snapshot() if e["type"] == "RESYNC"]
    check(sorted(obj_key(e["object"]) for e in res[:3]) == ["default/cm-00000", "default/cm-00001",
                                                           "default/cm-00002"], "RESYNC %s" % res[:3])
    s.check_mirror(kr)


@scenario("ReconnectWithoutAnswer", 5)
def t_reconnect_without_answer(s):
    """Connections closed before any answer: re-watch at the same RV after a
    backoff, never a relist (kreflect's documented improvement)."""
    s.server("--initial", 2)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)
    s.ctl.fault(kind="close_after", bytes=0, watch=True, count=2)
    s.ctl.drop_watches()
    s.wait_reqs(5, timeout=15)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    # (The server logs 200 for a request it closed without answering.)
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0), W(rv0), W(rv0, status="open")])
    check(r[2]["faults"] == r[3]["faults"] == ["close_after"] and r[2]["bytes"] == r[3]["bytes"] == 0,
          "the re-watches were answered")
    check(gap(r[2], r[3]) >= 0.75 and gap(r[3], r[4]) >= 1.5,
          "re-watches %.2f s and %.2f s after unanswered requests: expected a growing backoff"
          % (gap(r[2], r[3]), gap(r[3], r[4])))
    check(len(kr.synced()) == 1, "relisted")


@scenario("WatchListRelistTooLargeRV", 5)
def t_watchlist_relist_too_large(s):
    """A watch-list relist at a known RV answered by ERROR 504 TooLarge (the
    cacher's answer to an RV ahead of it): at once again without an RV."""
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, match="&resourceVersion=%s&timeoutSeconds" % rv0, count=1)
    s.ctl.fault(kind="watch_error", code=504, match="resourceVersion=%s&resourceVersionMatch" % rv0, count=1)
    kr = s.kreflect()
    kr.wait_synced(1, timeout=10)
    s.ctl.drop_watches()           # the watch-list stream ends; the re-watch gets 410
    kr.wait_synced(2, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(), W(rv0), WL(rv=rv0), WL(status="open")])
    check(gap(r[2], r[3]) < late(0.7), "watch-list without RV %.2f s after the TooLarge ERROR, expected at once"
          % gap(r[2], r[3]))


@scenario("ClientCertificateAuth", 2)
def t_client_cert(s):
    srv = s.server("--initial", 2)
    kr = s.kreflect("--client-certificate", srv.ready["client_cert"], "--client-key", srv.ready["client_key"],
                    auth=False)
    kr.wait_synced()
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [WL(status="open")])
    check(r[0]["auth"] == "cert:kreflect-test", "authenticated as %s" % r[0]["auth"])


@scenario("EventBurst20000", 6)
def t_event_burst(s):
    s.server("--initial", 2)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off", "-v", "1")
    kr.wait_synced()
    s.ctl.wait_watches(1, timeout=10)
    time.sleep(1.1)
    b = s.ctl.bench(count=20000, size=200, name="burst", end="open")
    kr.wait(lambda ls: ls and ls[-1].get("object", {}).get("metadata", {}).get("resourceVersion") ==
            str(b["last_rv"]), 30, "the burst's last event")
    check(len(kr.events_for("burst")) == 20000, "%d lines for the burst" % len(kr.events_for("burst")))
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    # The open watch falls behind the compaction and is ended; the re-watch gets the burst.
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])


@scenario("MultipleResources", 3)
def t_multiple_resources(s):
    s.server()
    s.ctl.create("configmaps", "default", "same", data={"k": "v"})
    s.ctl.create("secrets", "default", "same", stringData={"k": "v"})
    s.ctl.create("deployments", "default", "web", spec={"replicas": 1})
    s.ctl.create("configmaps", "other", "elsewhere", data={"k": "v"})
    kr = s.kreflect(resources=("configmaps", "secrets", "deployments.apps"))
    kr.wait_synced(3, timeout=10)
    s.ctl.update("deployments", "default", "web", spec={"replicas": 3})
    s.ctl.delete("secrets", "default", "same")
    s.ctl.create("secrets", "default", "s2", stringData={"k": "v"})
    kr.wait_event("ADDED", "s2")
    time.sleep(0.3)

    got = fold_by_kind(kr.snapshot(), ("ConfigMap", "Secret", "Deployment"))
    for kind, res in (("ConfigMap", "configmaps"), ("Secret", "secrets"), ("Deployment", "deployments")):
        st = s.ctl.state(resource=res, namespace="default")["objects"]
        want = {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st.items()}
        check(got[kind] == want, "%s: mirror %s, server %s" % (kind, got[kind], want))
    check(sorted(x["resource"] for x in kr.synced()) == ["configmaps", "deployments.apps", "secrets"],
          "SYNCED %s" % kr.synced())
    paths = sorted(set(e["path"] for e in s.ctl.log()))
    check(paths == ["/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/secrets",
                    "/apis/apps/v1/namespaces/default/deployments"], "paths %s" % paths)
    # All namespaces.
    kr2 = s.kreflect("-A", "--once")
    check(kr2.wait_exit(10) == 0, "-A --once exited %s" % kr2.rc)
    keys = sorted(fold(kr2.snapshot())[0])
    check(keys == ["default/same", "other/elsewhere"], "-A mirrored %s" % keys)
    check(any(e["path"] == "/api/v1/configmaps" for e in s.ctl.log()), "-A did not list /api/v1/configmaps")


def check_turns_in_tail(kr):
    """Resources take turns in the store's shared tail object by object: none
    had an object cut by another (which is only done to a stream silent for
    2 s mid-object; under valgrind the server may be starved that long)."""
    cut = [l for l in kr.stderr().splitlines() if "reading it again" in l or "sent nothing for" in l]
    check(SLOW > 1 or not cut, "objects were cut in the shared tail: %s" % cut[:2])


def fold_by_kind(lines, kinds):
    """{kind: {key: rv}} of several resources' output; Fail on anomalies."""
    out = {}
    for kind in kinds:
        m, anomalies = fold([e for e in lines if e.get("type") not in ("SYNCED", "RESYNC") and
                             e["object"].get("kind") == kind])
        check(not anomalies, "%s: %s" % (kind, anomalies[:3]))
        out[kind] = {k: o["metadata"]["resourceVersion"] for k, o in m.items()}
    return out


@scenario("MultipleResourcesShareTheArena", 6)
def t_multiple_resources_arena(s):
    """Two resources stream into one store at once, with objects large enough
    to span many reads, interleaved: each mirror stays exact, and what the store
    holds (printed by --resync) is intact."""
    s.server()
    for i in range(12):
        s.ctl.create("configmaps", "default", "o%02d" % i, data={"v": "c" * 3000})
        s.ctl.create("secrets", "default", "o%02d" % i, stringData={"v": "s" * 3000})
    kr = s.kreflect("--resync", "2", resources=("configmaps", "secrets"))
    kr.wait_synced(2, timeout=10)
    for rnd in range(3):
        for i in range(12):
            size = 200000 if i % 4 == 0 else 2000 + rnd
            s.ctl.update("configmaps", "default", "o%02d" % i, data={"v": "%d" % rnd * size})
            s.ctl.update("secrets", "default", "o%02d" % i, stringData={"v": "%d" % rnd * size})
    s.ctl.delete("configmaps", "default", "o01")
    s.ctl.delete("secrets", "default", "o02")
    s.ctl.create("configmaps", "default", "last", data={"k": "v"})
    s.ctl.create("secrets", "default", "last", stringData={"k": "v"})
    want = {}
    for kind, res in (("ConfigMap", "configmaps"), ("Secret", "secrets")):
        st = s.ctl.state(resource=res, namespace="default")["objects"]
        want[kind] = {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st.items()}
    last = {"got": None}

    def converged():
        last["got"] = fold_by_kind(kr.snapshot(), want)
        return last["got"] == want
    try:
        wait_until(converged, 20, "both mirrors to match the server", 0.2)
    except Fail:
        if last["got"] is None:
            raise
        raise Fail("mirrors differ: %s" % "; ".join(
            "%s: missing %s, extra %s, stale %s" % (
                kind, sorted(set(want[kind]) - set(last["got"][kind]))[:4],
                sorted(set(last["got"][kind]) - set(want[kind]))[:4],
                sorted(k for k in want[kind] if k in last["got"][kind] and last["got"][kind][k] != want[kind][k])[:4])
            for kind in want)) from None
    # Contents too, not only resourceVersions: no bytes of one stream in another's objects.
    lines = kr.snapshot()
    for kind, res in (("ConfigMap", "configmaps"), ("Secret", "secrets")):
        m, _ = fold([e for e in lines if e.get("type") not in ("SYNCED", "RESYNC") and e["object"].get("kind") == kind])
        for k in want[kind]:
            srv_data = s.ctl.get(res, "default", k.split("/", 1)[1])["data"]
            check(m[k].get("data") == srv_data, "%s %s: data differs from the server's" % (kind, k))
    # The next resync round prints every held object from the store: all intact.
    n = len(kr.snapshot())
    kr.wait(lambda ls: sum(1 for e in ls[n:] if e["type"] == "RESYNC") >= 24, 10, "a RESYNC round")
    res = [e for e in kr.snapshot()[n:] if e["type"] == "RESYNC"][:24]
    got = {}
    for e in res:
        got.setdefault(e["object"]["kind"], {})[obj_key(e["object"])] = e["object"]["metadata"]["resourceVersion"]
    check(got == want, "RESYNC printed %s, expected %s" % (got, want))
    check(not kr.bad, "kreflect printed lines that are not JSON: %r" % kr.bad[:2])
    check_turns_in_tail(kr)


@scenario("OversizedObjectTakesNoTurn", 8)
def t_oversized_no_turn(s):
    """An object too large to hold gives up the store's shared tail as soon as
    it outgrows it (its name read from its first bytes): while the rest of it
    is still arriving (the server pauses 3 s past the limit), another
    resource's events go on at once, and the big one is not cut or re-read."""
    s.server()
    s.create("huge", {"big": "x" * (CAPACITY["max-object"] + 1000)})
    s.ctl.create("secrets", "default", "before", stringData={"k": "v"})
    # The configmaps' LIST pauses 3 s some 600 bytes past kreflect's object limit.
    s.ctl.fault(kind="pause_after", bytes=CAPACITY["max-object"] + 600, seconds=3,
                match="configmaps?", watch=False, count=1)
    # Plain lists: the pause is placed by the bytes of the body as it is on the wire.
    kr = s.kreflect("--watch-list", "off", "--gzip", "off", resources=("configmaps", "secrets"))
    kr.wait(lambda ls: any(e.get("type") == "SYNCED" and e.get("resource") == "secrets" for e in ls),
            10, "the secrets' SYNCED")
    t0 = time.monotonic()
    s.ctl.create("secrets", "default", "during", stringData={"k": "v"})
    kr.wait_event("ADDED", "during", timeout=10)
    took = time.monotonic() - t0
    kr.wait_synced(2, timeout=15)
    lines = kr.snapshot()
    i_during = next(i for i, e in enumerate(lines) if e.get("type") == "ADDED" and
                    e["object"]["metadata"]["name"] == "during")
    i_cm = next(i for i, e in enumerate(lines) if e.get("type") == "SYNCED" and e["resource"] == "configmaps")
    check(i_during < i_cm, "the secret's ADDED came after the configmaps' SYNCED: it waited for the big object")
    check(took < late(1.5), "the secret's ADDED took %.2f s: it waited for the big object" % took)
    check("huge" in kr.stderr() and "not held" in kr.stderr(), "no 'not held' error for huge: %s" % kr.stderr_tail())
    check_turns_in_tail(kr)
    lists = [e for e in s.ctl.log() if e["path"].endswith("/configmaps") and not e.get("watch")]
    check(len(lists) == 1, "the configmaps were listed %d times" % len(lists))


@scenario("HeldBackWatchKeepsItsIdleDeadline", 25)
def t_held_back_idle(s):
    """A watch whose bytes wait while another resource's object crawls in over
    a slow link (1,000 bytes a second, never 2 s silent, so never cut) keeps
    its connection: the wait is kreflect's, not the server's silence, so its
    read-idle deadline (7 s here) stops meanwhile. It timed out and re-watched
    before; the event that waited is printed once the big object is whole."""
    s.server("--bookmark-interval", 1)
    s.create("big", {"v": "small"})
    s.ctl.create("secrets", "default", "s0", stringData={"k": "v"})
    s.ctl.fault(kind="slow", rate=1000, piece=250, match="configmaps?", watch=True, count=1)
    kr = s.kreflect("--watch-list", "off", "--watch-idle-timeout", "7", resources=("configmaps", "secrets"))
    kr.wait_synced(2, timeout=10)
    s.ctl.wait_watches(2, timeout=10)
    time.sleep(2)                    # bookmarks learnt: the deadline is 7 s (2 x 1 s + 5 s, and the floor)
    t0 = time.monotonic()
    s.update("big", {"v": "x" * 12000})
    time.sleep(2)                    # the big MODIFIED is on its way, 250 bytes every 0.25 s
    s.ctl.create("secrets", "default", "during", stringData={"k": "v"})
    kr.wait_event("ADDED", "during", timeout=late(30))
    waited = time.monotonic() - t0
    lines = kr.snapshot()
    i_big = next(i for i, e in enumerate(lines) if e.get("type") == "MODIFIED" and
                 e["object"]["metadata"]["name"] == "big")
    i_during = next(i for i, e in enumerate(lines) if e.get("type") == "ADDED" and
                    e["object"]["metadata"]["name"] == "during")
    check(i_big < i_during and waited >= 9, "the secret's ADDED did not wait for the big object (%.1f s): "
          "the scenario tests nothing" % waited)
    check(lines[i_big]["object"]["data"]["v"] == "x" * 12000, "the big object arrived damaged")
    err = kr.stderr()
    check("read-idle deadline" not in err, "a watch timed out while its bytes waited: %s" %
          [l for l in err.splitlines() if "read-idle deadline" in l][:2])
    watches = [e for e in s.ctl.log() if e["path"].endswith("/secrets") and e.get("watch")]
    check(len(watches) == 1, "the secrets were watched %d times" % len(watches))
    check_turns_in_tail(kr)


@scenario("ThreeResourcesSyncAtOnce", 8)
def t_three_resources_sync(s):
    """Three resources' initial lists stream at the same time, objects cut
    across reads: all three sync, exactly, in reasonable time."""
    s.server()
    for res in ("configmaps", "secrets"):
        s.ctl.bulk(res, "default", 300, size=5000, name_pattern="o{i:04d}")
    s.ctl.bulk("deployments", "default", 300, size=5000, name_pattern="o{i:04d}")
    t0 = time.monotonic()
    kr = s.kreflect(resources=("configmaps", "secrets", "deployments.apps"))
    kr.wait_synced(3, timeout=40)
    took = time.monotonic() - t0
    want = {}
    for kind, res in (("ConfigMap", "configmaps"), ("Secret", "secrets"), ("Deployment", "deployments")):
        st = s.ctl.state(resource=res, namespace="default")["objects"]
        want[kind] = {k.split("/", 1)[1]: v["resourceVersion"] for k, v in st.items()}
    got = fold_by_kind(kr.snapshot(), want)
    check(got == want, "mirrors differ: %s" % {k: (len(got[k]), len(want[k])) for k in want})
    check(took < late(20), "the three resources took %.1f s to sync" % took)
    check_turns_in_tail(kr)


# =========================================================================== gzip lists

def list_reqs(s):
    return [e for e in s.reqs() if not e["watch"]]


def check_gzip_lists(s, want):
    """Each LIST asked for gzip (and got it) as `want` says, one bool per list; no watch asked."""
    lists = list_reqs(s)
    got = [(e["accept_encoding"] == "gzip", e["gzip"]) for e in lists]
    check(got == [(w, w) for w in want], "LISTs (asked gzip, got gzip) %s, expected %s"
          % (got, [(w, w) for w in want]))
    watches = [e for e in s.reqs() if e["watch"]]
    check(watches and all(e["accept_encoding"] is None and not e["gzip"] for e in watches),
          "a watch asked for gzip: %s" % [e["accept_encoding"] for e in watches])


@scenario("GzipListEachResource", 12)
def t_gzip_each_resource(s):
    """The one inflater serves whichever resource lists next: a resource that listed with
    gzip and now watches does not keep it from another's relist."""
    s.server()
    for res in ("configmaps", "secrets"):
        s.ctl.bulk(res, "default", 200, size=1024)   # ~250 KiB: over the server's gzip threshold
    kr = s.kreflect("--watch-list", "off", resources=("configmaps", "secrets"))
    kr.wait_synced(2, timeout=20)
    for res in ("secrets", "configmaps"):
        lists = lambda: [e for e in s.ctl.log() if not e["watch"] and e["path"].endswith("/" + res)  # noqa: E731
                         and e["done"]]
        before = len(lists())
        time.sleep(1.2)                # the watches are not "very short" when dropped
        # Its watch ends with 410: it relists alone while the other one watches.
        s.ctl.fault(kind="watch_error", code=410, watch=True, count=1, match=res)
        s.ctl.drop_watches()
        wait_until(lambda: len(lists()) > before, 20, "the %s relist" % res)
        last = lists()[-1]
        check(last["accept_encoding"] == "gzip" and last["gzip"],
              "the %s relist did not use gzip: %s" % (res, describe(last)))


@scenario("GzipList", 6)
def t_gzip_list(s):
    # 1,000 ConfigMaps of 1 KiB: RV "0" is answered whole (the watch cache ignores limit).
    s.server("--initial", 1000, "--initial-size", 1024)
    rv0 = s.rv()
    kr = s.kreflect("--watch-list", "off")
    syn = kr.wait_synced(timeout=15)[0]
    check(syn["count"] == 1000 and syn["resourceVersion"] == rv0, "SYNCED %s" % syn)
    s.update("cm-00007", {"k": "changed"})
    kr.wait_event("MODIFIED", "cm-00007")
    s.check_mirror(kr)
    check_gzip_lists(s, [True])
    lst = list_reqs(s)[0]
    check(lst["bytes"] < 1000 * 1024 // 4, "the gzip list took %d bytes on the wire" % lst["bytes"])
    expect_requests(s.reqs(), [L(rv="0", limit=500), W(rv0, status="open")])


@scenario("GzipListPaginated", 8)
def t_gzip_list_paginated(s):
    # Pages of 500 (no watch cache), each over 128 KiB: every page is gzip; then a
    # relist after 410 gzips again.
    s.server("--initial", 1200, "--initial-size", 1024, rv0_ignores_limit=False)
    rv0 = s.rv()
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(2, timeout=20)
    s.check_mirror(kr)
    pages = [L(limit=500, cont=True)] * 2
    expect_requests(s.reqs(), [L(rv="0", limit=500)] + pages + [W(rv0), L(rv=rv0, limit=500)] + pages +
                    [W(rv0, status="open")])
    check_gzip_lists(s, [True] * 6)


def gzip_fails_then_plain(s, mode, why):
    s.server("--initial", 400, "--initial-size", 1024)
    s.ctl.fault(kind="bad_gzip", mode=mode, count=1)
    s.ctl.fault(kind="watch_error", code=410, watch=True, count=1)
    kr = s.kreflect("--watch-list", "off")
    # The broken gzip list fails; the relist (plain), the 410 and the relist after it (plain).
    kr.wait_synced(2, timeout=20)
    s.check_mirror(kr)
    check_gzip_lists(s, [True, False, False])
    err = kr.stderr()
    check("unable to inflate the gzip list" in err and why in err and
          "listing without gzip from now on" in err, "no clear error for the %s gzip body: %s"
          % (mode, kr.stderr_tail()))
    check(err.count("listing without gzip from now on") == 1, "the fallback was logged more than once")


@scenario("ListNamingAnObjectTwiceFails", 8)
def t_list_duplicate(s):
    """A list that names an object twice is corrupt: it fails in words, the copy is never
    applied as a change, and the next list syncs."""
    s.server("--initial", 5)
    s.ctl.fault(kind="duplicate_item", count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(timeout=20)
    s.check_mirror(kr)
    check("malformed list response: it names default/" in kr.stderr(), "no clear error: %s" % kr.stderr_tail())
    check(not [e for e in kr.snapshot() if e.get("type") == "MODIFIED"], "the second copy was applied as a change")
    r = s.reqs()
    check(len([q for q in r if not q["watch"]]) == 2, "not one failed list and one good: %s" % "; ".join(describe(q) for q in r))


@scenario("GzipCorruptBodyListsPlain", 8)
def t_gzip_corrupt(s):
    # The flipped byte breaks the deflate data or, first, the JSON it decodes to.
    gzip_fails_then_plain(s, "corrupt", "gzip list: ")


@scenario("GzipBadCrcListsPlain", 8)
def t_gzip_bad_crc(s):
    gzip_fails_then_plain(s, "crc", "CRC-32 mismatch")


@scenario("GzipTruncatedListsPlain", 8)
def t_gzip_truncated(s):
    gzip_fails_then_plain(s, "truncate", "truncated")


@scenario("GzipBombHitsItsBound", 10)
def t_gzip_bomb(s):
    gzip_fails_then_plain(s, "bomb", "gzip bomb")


@scenario("GzipCorruptValueRepaired", 8)
def t_gzip_corrupt_value(s):
    # Valid deflate and valid JSON with one value changed: the CRC-32 at the end is the
    # only sign, after the item was applied. The plain relist puts the server's copy back.
    s.server("--initial", 400, "--initial-size", 1024)
    s.ctl.fault(kind="bad_gzip", mode="data", count=1)
    kr = s.kreflect("--watch-list", "off")
    kr.wait_synced(timeout=20)
    s.check_mirror(kr)
    check_gzip_lists(s, [True, False])
    err = kr.stderr()
    check("CRC-32 mismatch" in err, kr.stderr_tail())
    check(err.count("differs from the copy the broken gzip list left") == 1,
          "repairs logged: %d" % err.count("differs from the copy"))
    want = s.ctl.state(resource="configmaps", namespace="default", objects=True)["objects"]
    got, _ = kr.mirror()
    bad = [k for k, o in got.items() if o["data"] != want["configmaps/" + k]["object"]["data"]]
    check(not bad, "data differs from the server's for %s" % bad[:3])


@scenario("ContentEncodingNotAskedFor", 8)
def t_content_encoding_not_asked(s):
    # A gzip body to a client that did not ask (--gzip off), then a coding it cannot
    # decode: each a protocol error, then a normal relist.
    s.server("--initial", 20)
    s.ctl.fault(kind="content_encoding", value="gzip", watch=False, count=1)
    kr = s.kreflect("--watch-list", "off", "--gzip", "off")
    kr.wait_synced(timeout=15)
    check("a gzip body the request did not ask for" in kr.stderr(), kr.stderr_tail())
    check([e["accept_encoding"] for e in list_reqs(s)] == [None, None], "--gzip off sent Accept-Encoding")
    s.ctl.fault(kind="content_encoding", value="br", watch=False, count=1)
    kr2 = s.kreflect("--watch-list", "off")
    kr2.wait_synced(timeout=15)
    check("a Content-Encoding other than gzip" in kr2.stderr(), kr2.stderr_tail())
    s.check_mirror(kr)
    s.check_mirror(kr2)


# =========================================================================== runner

def prepare_certs():
    global CERTS
    CERTS = os.path.join(ART, "_certs")
    if not all(os.path.exists(os.path.join(CERTS, n)) for n in CERT_FILES):
        shutil.rmtree(CERTS, ignore_errors=True)
        os.makedirs(CERTS)
        ServerProcess(["--seed", "1"], workdir=CERTS, timeout=60).stop()


def run_one(name, fn):
    s = None
    t0 = time.monotonic()
    try:
        s = Scenario(name.replace("/", "_"))
        fn(s)
        err = None
    except Fail as e:
        err = str(e)
    except Exception:
        err = "exception: " + traceback.format_exc().strip().replace("\n", "\n  ")
    if s is not None:
        try:
            problems = s.cleanup()
        except Exception:
            problems = ["cleanup: " + traceback.format_exc().strip()]
        if problems and err is None:
            err = "; ".join(problems)
    return name, err, time.monotonic() - t0


def converge_after_room(s, kr, what, timeout=40):
    """After room comes back the mirror equals the server, and the last SYNCED is whole."""
    def done():
        syncs = kr.synced()
        return syncs and not syncs[-1].get("partial") and s.mirror_rvs(kr) == s.server_objects()
    end = time.monotonic() + late(timeout)
    while time.monotonic() < end and not done():
        time.sleep(0.2)
    check(done(), "%s: not converged: %d mirrored, %d on the server, last SYNCED %s"
          % (what, len(s.mirror_rvs(kr)), len(s.server_objects()), (kr.synced() or [None])[-1]))


@scenario("CapacityObjectsAtList", 8)
def t_capacity_objects_at_list(s):
    """--max-objects smaller than the list, by watch-list and by paginated
    LIST: the objects that fit are exact, the rest are named (three) and
    counted, SYNCED says partial, --once fails naming the resource; deleting
    enough on the server lets the mirror become whole by itself."""
    s.server("--initial", 150, "--initial-size", 16)
    for mode in ("on", "off"):
        kr = s.kreflect("--max-objects", "100", "--watch-list", mode, "--page-size", "40")
        syn = kr.wait_synced(timeout=15)[0]
        check(syn["count"] == 100 and syn.get("partial") is True, "%s: SYNCED %s" % (mode, syn))
        want = s.server_objects()
        got = s.mirror_rvs(kr)
        check(len(got) == 100 and all(want.get(k) == v for k, v in got.items()),
              "%s: %d mirrored, %d not as on the server" % (mode, len(got),
                                                           sum(want.get(k) != v for k, v in got.items())))
        err = kr.stderr()
        check(err.count("capacity exhausted") == 3 and "--max-objects is 100" in err,
              "%s: errors %s" % (mode, kr.stderr_tail(4)))
        check("50 objects could not be read or held" in err, "%s: no count at the sync" % mode)
        _, anomalies = kr.mirror()
        check(not anomalies, "%s: event stream: %s" % (mode, anomalies[:3]))
        kr.stop()
    once = s.kreflect("--max-objects", "100", "--once")
    check(once.wait_exit(20) == 1 and "mirror of configmaps is partial" in once.stderr(),
          "--once on a partial mirror: exit %s, %s" % (once.rc, once.stderr_tail(2)))
    kr = s.kreflect("--max-objects", "100", "--watch-list", "off")
    kr.wait_synced(timeout=15)
    for i in range(60):
        s.delete("cm-%05d" % (149 - i))
    converge_after_room(s, kr, "after deletes")


@scenario("CapacityObjectsByWatch", 8)
def t_capacity_objects_by_watch(s):
    """The index fills up through watch events: those that fit arrive, the
    first that does not ends the watch for a relist that says partial, and
    deletes on the server bring the mirror back to whole."""
    s.server("--initial", 80, "--initial-size", 16)
    kr = s.kreflect("--max-objects", "100")
    syn = kr.wait_synced(timeout=15)[0]
    check(syn["count"] == 80 and not syn.get("partial"), "first SYNCED %s" % syn)
    s.ctl.bulk("configmaps", "default", 40, size=16, start=80)
    kr.wait_event("ADDED", "cm-00099")
    kr.wait(lambda _lines: any(x.get("partial") for x in kr.synced()), late(20), "a partial SYNCED")
    got, want = s.mirror_rvs(kr), s.server_objects()
    check(len(got) == 100 and all(want.get(k) == v for k, v in got.items()),
          "%d mirrored, some not as on the server" % len(got))
    check("capacity exhausted" in kr.stderr(), "no error names the objects not held")
    for i in range(30):
        s.delete("cm-%05d" % i)
    converge_after_room(s, kr, "after deletes")
    _, anomalies = kr.mirror()
    check(not anomalies, "event stream: %s" % anomalies[:3])


@scenario("CapacityBytesAtList", 10)
def t_capacity_bytes_at_list(s):
    """--arena-bytes smaller than the list, by watch-list and by paginated
    LIST: objects that do not fit are present but not held (named, counted
    in SYNCED, never printed), the sync is partial (SYNCED, its log line
    with the count held, --once's exit 1); deletes on the server make room
    and the relist they start holds every object again."""
    s.server("--initial", 300, "--initial-size", 1024)
    for mode in ("on", "off"):
        kr = s.kreflect("--arena-bytes", "256K", "--watch-list", mode, "--page-size", "40")
        syn = kr.wait_synced(timeout=15)[0]
        kr.wait_sync_logged()
        got, want = s.mirror_rvs(kr), s.server_objects()
        check(syn["count"] == 300 and syn.get("partial") is True, "%s: SYNCED %s" % (mode, syn))
        check(100 < len(got) < 300 and all(want.get(k) == v for k, v in got.items()),
              "%s: %d held, some not as on the server" % (mode, len(got)))
        err = kr.stderr()
        check("present but not held" in err and "the arena is full" in err,
              "%s: no error says the arena is full: %s" % (mode, kr.stderr_tail(2)))
        check("partial: %d of 300 held" % len(got) in err, "%s: the synced line: %s" % (mode, kr.stderr_tail(3)))
        kr.stop()
    once = s.kreflect("--arena-bytes", "256K", "--once")
    check(once.wait_exit(20) == 1 and "mirror of configmaps is partial" in once.stderr(),
          "--once on a partial mirror: exit %s, %s" % (once.rc, once.stderr_tail(2)))
    check(once.synced()[0].get("partial") is True, "--once: SYNCED %s" % once.synced())
    kr = s.kreflect("--arena-bytes", "256K", "--watch-list", "off")
    kr.wait_synced(timeout=15)
    for i in range(200):
        s.delete("cm-%05d" % (299 - i))
    converge_after_room(s, kr, "after deletes")


@scenario("CapacityBytesByWatch", 8)
def t_capacity_bytes_by_watch(s):
    """The arena fills through watch events: the object that does not fit is
    present but not held; once others are deleted, its next change is held."""
    s.server("--initial", 50, "--initial-size", 1024)
    kr = s.kreflect("--arena-bytes", "256K")
    check(not kr.wait_synced(timeout=15)[0].get("partial"), "the first sync is whole")
    s.ctl.bulk("configmaps", "default", 250, size=1024, start=50)
    kr.wait(lambda _lines: "present but not held" in kr.stderr(), late(15), "an object not held")
    kr.wait(lambda _lines: "configmaps: the mirror is partial: " in kr.stderr(), late(5),
            "a line saying the mirror became partial")
    held = s.mirror_rvs(kr)
    want = s.server_objects()
    check(len(held) < 300 and all(want.get(k) == v for k, v in held.items()),
          "%d held, some not as on the server" % len(held))
    missing = sorted(k for k in want if k not in held)
    for i in range(150):
        s.delete("cm-%05d" % i)
    for k in missing:
        if k in s.server_objects():
            s.update(k.split("/", 1)[1], {"payload": "small now"}, mode="replace")
    converge_after_room(s, kr, "after deletes")
    _, anomalies = kr.mirror()
    check(not anomalies, "event stream: %s" % anomalies[:3])


@scenario("PartialDeleteBurstOneRelist", 10)
def t_partial_delete_burst_one_relist(s):
    """--page-size, the arena full (the mirror partial), then a burst of
    deletes that frees room: the first delete starts the room timer once and
    the watch goes on taking the rest; the timer's one relist fills the
    mirror (and its SYNCED says whole). Not a relist per delete, each at
    that delete's resourceVersion (exact, paginated) and after a longer
    backoff: that took four relists and was not whole after 30 s."""
    s.server("--initial", 300, "--initial-size", 1024, rv0_ignores_limit=False)
    kr = s.kreflect("--arena-bytes", "256K", "--watch-list", "off", "--page-size", "40")
    syn = kr.wait_synced(timeout=15)[0]
    check(syn.get("partial") is True, "SYNCED %s" % syn)
    s.ctl.wait_watches(1, timeout=10)
    before = len(s.reqs())
    t0, wall0 = time.monotonic(), time.time()
    # 200 deletes in one control call: the burst is over well before the room
    # timer (1 s) and its backoff step (0.8 s or more) run out.
    s.ctl.delete_many("configmaps", "default", ["cm-%05d" % (299 - i) for i in range(200)])
    burst = time.monotonic() - t0
    converge_after_room(s, kr, "after the deletes", timeout=30)
    took = time.monotonic() - t0
    s.settle()
    after = s.reqs()[before:]
    relists = [e for e in after if req_kind(e) == "L" and "continue" not in e["query"]]
    check(len(relists) == 1, "%d relists after the deletes (a %.2f s burst; whole after %.1f s), expected one: %s"
          % (len(relists), burst, took, ["+%.2fs" % (e["time"] - wall0) for e in relists]))
    check(took < late(6), "whole %.1f s after the first delete, expected one relist within about 3 s" % took)
    _, anomalies = kr.mirror()
    check(not anomalies, "event stream: %s" % anomalies[:3])


@scenario("ArenaExhaustedWatchList", 8)
def t_arena_exhausted_watch_list(s):
    """The arena used up to its last byte by objects present but not held: the
    watch-list still reads its end bookmark (it needs no arena bytes) and
    syncs at once, partial, instead of waiting out the initial-events
    timeout and falling back to a list."""
    s.server("--initial", 10000, "--initial-size", 1024)
    kr = s.kreflect("--arena-bytes", "8M", "--watch-list", "on", "--initial-events-timeout", "25")
    syn = kr.wait_synced(timeout=20)[0]
    check(syn.get("partial") is True, "SYNCED %s" % syn)
    kr.wait_sync_logged()
    err = kr.stderr()
    check("by watch-list in" in err and "falling back" not in err,
          "not synced by the watch-list's end bookmark: %s" % kr.stderr_tail(3))
    # The index (16,384 slots) has room for the 10,000: the cause named is the
    # arena, whose bytes even the names of objects not held take, and its flag.
    check("objects could not be read or held: the arena is used up, even for their names "
          "(--arena-bytes)" in err and "not even its name fits (--arena-bytes is 8388608)" in err,
          "the arena is not named as the cause: %s" % kr.stderr_tail(3))
    check("no room in the index" not in err and "--max-objects" not in err,
          "the index is blamed though it is not full: %s" % kr.stderr_tail(3))


def after_fault(s, fault, *args, synced=1):
    """Two objects on the server, one fault on its next watch (or watch-list),
    kreflect with args: it syncs `synced` times and a later change arrives
    over an open watch. Returns kreflect, the requests the server saw and its
    resourceVersion before the fault."""
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(watch=True, count=1, **fault)
    kr = s.kreflect(*args)
    kr.wait_synced(synced, timeout=10)
    s.ctl.wait_watches(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    return kr, s.reqs(), rv0


def check_gap(r, i, backoff, what, from_start=False):
    """Request i+1 went out after a backoff step from request i, or at once.
    from_start: measured from request i's start, for an answer kreflect drops
    at its head (sent at once): the server logs such a request's end only when
    it notices the closed connection, up to 0.4 s after kreflect's backoff began."""
    g = r[i + 1]["time"] - r[i]["time"] if from_start else gap(r[i], r[i + 1])
    if backoff:
        check(g >= 0.75, "%s %.2f s after, expected a backoff" % (what, g))
    else:
        check(g < late(0.7), "%s %.2f s after, expected at once" % (what, g))


def watch_refused_relists(s, **fault):
    """A watch refused with an HTTP error (not 429/401/403, no Retry-After):
    relist at the last RV after a backoff step, client-go's rule for any
    failed watch (the decision table's watch x HTTP rows)."""
    kr, r, rv0 = after_fault(s, dict(kind="status", **fault), "--watch-list", "off", synced=2)
    expect_requests(r, [L(rv="0", limit=500), W(rv0, status=fault["code"]), L(rv=rv0), W(rv0, status="open")])
    check_gap(r, 1, True, "relist")
    check("watch got %d" % fault["code"] in kr.stderr(), "no warning: %s" % kr.stderr_tail())


@scenario("WatchRefusedRelists/410-gone", 4)
def t_watch_refused_gone(s):
    watch_refused_relists(s, code=410, reason="Gone")


@scenario("WatchRefusedRelists/504-too-large", 4)
def t_watch_refused_too_large(s):
    watch_refused_relists(s, code=504, too_large=1, retry_after=0)


@scenario("WatchRefusedRelists/422-rejected", 4)
def t_watch_refused_rejected(s):
    watch_refused_relists(s, code=422)


def watch_error_relists(s, **fault):
    """An ERROR event that is not 429 nor expired ends the watch: relist at
    the last RV after a backoff step (client-go's watchHandler)."""
    _, r, rv0 = after_fault(s, dict(kind="watch_error", **fault), "--watch-list", "off", synced=2)
    expect_requests(r, [L(rv="0", limit=500), W(rv0), L(rv=rv0), W(rv0, status="open")])
    check_gap(r, 1, True, "relist")


@scenario("WatchErrorRelists/504-too-large", 4)
def t_watch_error_too_large(s):
    watch_error_relists(s, code=504)


@scenario("WatchErrorRelists/no-watch-progress", 4)
def t_watch_error_no_progress(s):
    watch_error_relists(s, code=500, message="the server does not support RequestWatchProgress")


@scenario("VeryShortWatchListFallsBack", 4)
def t_very_short_watch_list(s):
    """A watch-list that ends at once with no event (not even its initial
    ones): client-go's "very short watch"; a LIST instead, watch-list not
    remembered as unsupported."""
    kr, r, _ = after_fault(s, dict(kind="end_watch", after_events=0))
    expect_requests(r, [WL(), L(rv="0", limit=500), W(ANY, status="open")])
    check("very short watch" in kr.stderr(), "no line says why: %s" % kr.stderr_tail())
    check("does not support watch-list" not in kr.stderr(), "watch-list remembered as unsupported")


@scenario("BadHeadBacksOff/watch", 4)
def t_bad_head_watch(s):
    """A watch answered with a head kreflect cannot take (a Content-Encoding
    it did not ask for): a broken stream, the same watch after a backoff
    step, no relist."""
    kr, r, rv0 = after_fault(s, dict(kind="content_encoding", value="br"), "--watch-list", "off")
    expect_requests(r, [L(rv="0", limit=500), W(rv0), W(rv0, status="open")])
    check_gap(r, 1, True, "re-watch", from_start=True)
    check("a Content-Encoding other than gzip" in kr.stderr(), kr.stderr_tail())


@scenario("BadHeadBacksOff/watch-list", 4)
def t_bad_head_watch_list(s):
    """A watch-list answered with a head kreflect cannot take: as no answer,
    the same watch-list after a backoff step, not a fall back to LIST."""
    kr, r, _ = after_fault(s, dict(kind="content_encoding", value="br"))
    expect_requests(r, [WL(), WL(status="open")])
    check_gap(r, 0, True, "watch-list again", from_start=True)
    check("a Content-Encoding other than gzip" in kr.stderr(), kr.stderr_tail())


def watch_list_ends(s, fault, at_once):
    """A watch-list ended by fault before its end bookmark, answered by the
    same watch-list again: at once (at RV "") or after a backoff step."""
    _, r, _ = after_fault(s, fault)
    expect_requests(r, [WL(status=fault["code"]) if fault["kind"] == "status" else WL(), WL(status="open")])
    check_gap(r, 0, not at_once, "watch-list again")


@scenario("WatchListEnds/410-gone-at-once", 4)
def t_wl_gone(s):
    watch_list_ends(s, dict(kind="status", code=410, reason="Gone"), at_once=True)


@scenario("WatchListEnds/504-too-large-at-once", 4)
def t_wl_too_large(s):
    watch_list_ends(s, dict(kind="status", code=504, too_large=1, retry_after=0), at_once=True)


@scenario("WatchListEnds/error-410-at-once", 4)
def t_wl_error_gone(s):
    watch_list_ends(s, dict(kind="watch_error", code=410), at_once=True)


@scenario("WatchListEnds/error-429-backs-off", 4)
def t_wl_error_429(s):
    watch_list_ends(s, dict(kind="watch_error", code=429), at_once=False)


def watch_list_error_lists(s, remembered, **fault):
    """An ERROR event ends a watch-list: a LIST instead, remembered only when
    the server says it cannot RequestWatchProgress."""
    kr, r, _ = after_fault(s, dict(kind="watch_error", **fault))
    expect_requests(r, [WL(), L(rv="0", limit=500), W(ANY, status="open")])
    check(("does not support watch-list" in kr.stderr()) == remembered,
          "watch-list %sremembered as unsupported" % ("not " if remembered else ""))


@scenario("WatchListEnds/error-no-watch-progress-lists", 4)
def t_wl_error_no_progress(s):
    watch_list_error_lists(s, True, code=500, message="the server does not support RequestWatchProgress")


@scenario("WatchListEnds/error-500-lists", 4)
def t_wl_error_500(s):
    watch_list_error_lists(s, False, code=500)


@scenario("WatchRefusedRewatches/403", 4)
def t_watch_forbidden(s):
    """A watch refused with 403: the RV is still good; the same watch after a
    backoff step, no relist (client-go relists)."""
    _, r, rv0 = after_fault(s, dict(kind="status", code=403), "--watch-list", "off")
    expect_requests(r, [L(rv="0", limit=500), W(rv0, status=403), W(rv0, status="open")])
    check_gap(r, 1, True, "re-watch")


def list_fails(s, fault, status, said, from_start=False):
    """A list that fails in a way client-go's pager does not retry: one
    backoff step, then a new ListAndWatch (the same list: nothing synced yet),
    with "list failed: " and what failed on stderr (the decision table's list
    rows that back off and relist)."""
    s.server("--initial", 2)
    rv0 = s.rv()
    s.ctl.fault(watch=False, count=1, **fault)
    kr = s.kreflect("--watch-list", "off")
    syn = kr.wait_synced(1, timeout=10)[0]
    check(syn["resourceVersion"] == rv0 and syn["count"] == 2, "SYNCED %s, expected RV %s count 2" % (syn, rv0))
    s.ctl.wait_watches(1, timeout=10)
    s.create("x")
    kr.wait_event("ADDED", "x")
    s.check_mirror(kr)
    s.settle()
    r = s.reqs()
    expect_requests(r, [L(rv="0", limit=500, status=status), L(rv="0", limit=500), W(rv0, status="open")])
    check_gap(r, 0, True, "the list again", from_start=from_start)
    check("list failed: " + said in kr.stderr(), "no 'list failed: %s' line: %s" % (said, kr.stderr_tail()))
    return kr


@scenario("ListFails/429", 4)
def t_list_fails_429(s):
    list_fails(s, dict(kind="status", code=429), 429, "429 TooManyRequests")


@scenario("ListFails/403", 4)
def t_list_fails_403(s):
    list_fails(s, dict(kind="status", code=403), 403, "403 Forbidden")


@scenario("ListFails/422", 4)
def t_list_fails_422(s):
    list_fails(s, dict(kind="status", code=422), 422, "422 ")


@scenario("ListFails/no-answer", 4)
def t_list_fails_no_answer(s):
    """The connection closed before any answer (the server logs the 200 it
    was about to send): as a failed list (client-go's ListAndWatch returns
    the error; the reflector backs off)."""
    kr = list_fails(s, dict(kind="close_after", bytes=0), 200, "", from_start=True)
    check("closed the connection before any response" in kr.stderr(), kr.stderr_tail())


@scenario("ListFails/bad-head", 4)
def t_list_fails_bad_head(s):
    """A list answered with a head kreflect cannot take (a coding it did not
    ask for): a failed list, not a retried page."""
    kr = list_fails(s, dict(kind="content_encoding", value="br"), 200, "", from_start=True)
    check("a Content-Encoding other than gzip" in kr.stderr(), kr.stderr_tail())


@scenario("ListFails/ended-early", 4)
def t_list_fails_ended_early(s):
    """A 200 whose body ends cleanly (its framing whole) before the list
    object closes: not a complete list; never synced from half of it."""
    list_fails(s, dict(kind="short_body", bytes=60), 200, "the list response ended early")


def main(argv):
    global BIN, ART
    jobs = 5
    names = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "-j":
            jobs = int(args.pop(0))
        elif BIN is None and os.path.sep in a:
            BIN = os.path.abspath(a)
        else:
            names.append(a)
    BIN = BIN or os.path.join(ROOT, "build", "kreflect")
    tag = os.path.basename(os.path.dirname(BIN))
    tag = "x86_64" if tag == "build" else tag
    ART = os.path.join(ROOT, "build", "test", "e2e-" + tag)
    os.makedirs(ART, exist_ok=True)
    if not os.access(BIN, os.X_OK):
        print("FAIL setup: %s is not an executable" % BIN)
        print("0 passed, 1 failed")
        return 1
    try:
        ver = subprocess.run([BIN, "--version"], capture_output=True, timeout=20).stdout.decode()
        for word in ver.split():
            k, eq, v = word.partition("=")
            if eq and v.isdigit():
                CAPACITY[k] = int(v)
        CAPACITY["objects"]
    except (OSError, subprocess.SubprocessError, KeyError):
        print("FAIL setup: %s --version does not show its capacities" % BIN)
        print("0 passed, 1 failed")
        return 1
    todo = [(n, f, sec) for n, f, sec in SCENARIOS if not names or any(x in n for x in names)]
    todo.sort(key=lambda t: -t[2])         # the long ones first
    t0 = time.monotonic()
    try:
        prepare_certs()
    except Exception as e:
        print("FAIL setup: %s" % e)
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    timings = []
    lock = threading.Lock()

    def report(res):
        nonlocal passed, failed
        name, err, took = res
        with lock:
            timings.append((name, took))
            if err is None:
                passed += 1
                print("ok %s" % name, flush=True)
            else:
                failed += 1
                first, _, rest = err.partition("\n")
                print("FAIL %s: %s" % (name, first), flush=True)
                for line in rest.splitlines():
                    print("    " + line, flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as ex:
        futs = [ex.submit(run_one, n, f) for n, f, _ in todo]
        for fu in futs:
            fu.add_done_callback(lambda f: report(f.result()))
    for name, took in sorted(timings, key=lambda t: -t[1]):
        print("# %6.1f s  %s" % (took, name))
    print("# binary %s; %d scenarios in %.1f s; artifacts in %s"
          % (BIN, len(todo), time.monotonic() - t0, os.path.relpath(ART, ROOT)))
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


def on_signal(sig, frame):
    kill_all()
    os._exit(128 + sig)


if __name__ == "__main__":
    atexit.register(kill_all)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.exit(main(sys.argv[1:]))
