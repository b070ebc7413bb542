#!/usr/bin/env python3
"""The state directory end to end: warm restarts, offline starts, ignored snapshots.

    python3 tests/state/test_state.py [BINARY] [-j N] [NAME ...]

The real kreflect binary against tests/apiserver, with the helpers of
tests/e2e/test_e2e.py (its scenarios are not run here). Each scenario runs
kreflect with --state-dir, stops it, changes the server (or not), starts it
again and checks what the second run asked the server (its request log),
printed, wrote to --dir and ran as a hook. Last line: "N passed, N failed".
"""

import http.server
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import test_e2e as e  # noqa: E402
from control import free_port  # noqa: E402
from test_e2e import NS_PATH, W, check, expect_requests, fold, late, wait_until  # noqa: E402

e.SCENARIOS.clear()
scenario = e.scenario


class Receiver:
    """A local --http-post receiver: every POST body's JSON lines, one list per POST."""

    def __init__(self):
        posts = self.posts = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                posts.append([json.loads(x) for x in body.splitlines() if x.strip()])
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/hook" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def state_args(s, *extra):
    return ["--state-dir", os.path.join(s.dir, "state"), "--dir", os.path.join(s.dir, "files"),
            "--exec", "sh -c 'echo run >> %s'" % os.path.join(s.dir, "hook.log"),
            "--debounce", "100"] + list(extra)


def files(s):
    """{name: (inode, mtime_ns, content)} of the --dir files (not the manifest)."""
    out = {}
    root = os.path.join(s.dir, "files")
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.startswith(".kreflect"):
                continue
            p = os.path.join(dirpath, n)
            st = os.stat(p)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = (st.st_ino, st.st_mtime_ns, f.read())
    return out


def hook_runs(s):
    try:
        with open(os.path.join(s.dir, "hook.log")) as f:
            return len(f.read().split())
    except OSError:
        return 0


def objects(kr):
    return [ev for ev in kr.snapshot() if ev.get("type") != "SYNCED"]


def names(evs):
    return [(ev["type"], ev["object"]["metadata"]["name"]) for ev in evs]


def first_run(s, n=10, *extra):
    """Creates n objects, mirrors them, stops cleanly (the last snapshot). Returns the folded mirror."""
    for i in range(n):
        s.create("o%d" % i, {"o%d" % i: "v%d" % i})
    kr = s.kreflect(*state_args(s, *extra), name="first")
    kr.wait_synced()
    s.check_mirror(kr)
    wait_until(lambda: hook_runs(s) == 1, 5, "the first sync's hook run")
    check(kr.stop() == 0, "the first run did not stop cleanly")
    check("state: snapshot of %d objects" % n in kr.stderr(), "no snapshot at the clean stop: %s"
          % kr.stderr_tail())
    mirror, _ = kr.mirror()
    return mirror


def second_run(s, *extra, **kw):
    before = len(s.reqs())
    kr = s.kreflect(*state_args(s, *extra), name=kw.pop("name", "second"), **kw)
    return kr, before


def resumed(s, rv, *extra):
    """A second run that must resume by one watch from rv: no list, nothing printed."""
    kr, before = second_run(s, *extra)
    kr.wait_synced()
    s.settle(0.5)
    expect_requests(s.reqs()[before:], [W(rv, status="open")], "the restart's requests (no LIST or watch-list)")
    check(not objects(kr), "the restart printed %s" % names(objects(kr)))
    return kr


@scenario("StateRestartNothingChanged", 5)
def t_nothing_changed(s):
    s.server()
    first_run(s, 10)
    rv = s.rv()
    before_files = files(s)
    check(len(before_files) == 10, "expected 10 files, found %d" % len(before_files))
    mode = os.stat(os.path.join(s.dir, "state", "state")).st_mode & 0o777
    check(mode == 0o600, "the snapshot has mode %o, expected 600" % mode)
    rcv = Receiver()
    try:
        kr, before = second_run(s, "--http-post", rcv.url)
        kr.wait_synced()
        s.settle(0.5)
        check(not rcv.posts, "--http-post sent %s after a restart with nothing changed" % rcv.posts)
    finally:
        rcv.close()
    syn = kr.wait_synced()
    check(syn[0].get("state") == "live" and syn[0]["count"] == 10 and syn[0]["resourceVersion"] == rv,
          "SYNCED line %s, expected live, 10 objects at %s" % (syn[0], rv))
    s.settle(0.5)
    reqs = s.reqs()[before:]
    expect_requests(reqs, [W(rv, status="open")], "the restart's requests")
    check(not objects(kr), "the restart printed %s" % names(objects(kr))[:5])
    check(files(s) == before_files, "the restart rewrote files")
    check(hook_runs(s) == 1, "the hook ran %d times, expected only the first run's" % hook_runs(s))
    check("restored 10 objects" in kr.stderr(), "no restore line: %s" % kr.stderr_tail())
    # A clean stop with nothing changed writes no new snapshot.
    st = os.stat(os.path.join(s.dir, "state", "state"))
    check(kr.stop() == 0, "the restart did not stop cleanly")
    st2 = os.stat(os.path.join(s.dir, "state", "state"))
    check((st.st_ino, st.st_mtime_ns) == (st2.st_ino, st2.st_mtime_ns), "a snapshot was written with nothing changed")


@scenario("StatePartialMirrorListsOnRestart", 6)
def t_partial_restart(s):
    """A mirror that was partial (--max-objects smaller than the list) is not
    resumed by a watch after a restart, which would leave out for good the
    objects it could not hold: the restart lists, and once room has come back
    the mirror is whole, its SYNCED not partial."""
    s.server()
    for i in range(12):
        s.create("p%02d" % i, {"p%02d" % i: str(i)})
    kr = s.kreflect(*state_args(s, "--max-objects", "8"), name="first")
    syn = kr.wait_synced()[0]
    check(syn.get("partial") is True and syn["count"] == 8, "first SYNCED %s: expected partial, 8" % syn)
    check(kr.stop() == 0, "the first run did not stop cleanly")
    for i in range(6):
        s.delete("p%02d" % i)
    before = len(s.reqs())
    kr2 = s.kreflect(*state_args(s, "--max-objects", "8"), name="second")
    # The first list may still be partial (the deleted objects hold their slots until its
    # sweep); the sweep leaves room, and the relist that follows is whole.
    kr2.wait(lambda _l: any(x.get("state") == "live" and not x.get("partial") and x["count"] == 6
                            for x in kr2.synced()), late(20), "a live, whole SYNCED of 6 objects")
    reqs = s.reqs()[before:]
    check(any(e.req_kind(r) in ("L", "WL") for r in reqs),
          "the restart only watched (no list): %s" % [e.describe(r) for r in reqs][:4])
    want = ["p%02d" % i for i in range(6, 12)]
    wait_until(lambda: sorted(files(s)) == want, late(10), "the files of the 6 objects left")
    check(kr2.stop() == 0, "the restart did not stop cleanly")


@scenario("StateChangesWhileDown", 5)
def t_changes_while_down(s):
    s.server()
    mirror = first_run(s, 10)
    rv = s.rv()
    s.create("new", {"new": "new"})
    s.update("o1", {"o1": "changed"})
    s.delete("o2")
    s.delete("o3")
    s.create("o3", {"o3": "again"})
    rcv = Receiver()
    kr, before = second_run(s, "--http-post", rcv.url)
    kr.wait_synced()
    want = [("ADDED", "new"), ("MODIFIED", "o1"), ("DELETED", "o2"), ("DELETED", "o3"), ("ADDED", "o3")]
    kr.wait(lambda ls: len([x for x in ls if x.get("type") != "SYNCED"]) >= len(want), 10, "5 events")
    s.settle(0.5)
    check(names(objects(kr)) == want, "events %s, expected %s" % (names(objects(kr)), want))
    reqs = s.reqs()[before:]
    expect_requests(reqs, [W(rv, status="open")], "the restart's requests")
    # The restored mirror plus the events is the server's state.
    for ev in objects(kr):
        n = ev["object"]["metadata"]["name"]
        if ev["type"] == "DELETED":
            mirror.pop("default/" + n, None)
        else:
            mirror["default/" + n] = ev["object"]
    got = {k: o["metadata"]["resourceVersion"] for k, o in mirror.items()}
    check(got == s.server_objects(), "mirror %s differs from the server %s" % (got, s.server_objects()))
    f = files(s)
    check(f.get("o1", (0, 0, b""))[2] == b"changed" and "o2" not in f and f.get("new", (0, 0, b""))[2] == b"new" and
          f.get("o3", (0, 0, b""))[2] == b"again",
          "files not in step: %s" % sorted(f))
    wait_until(lambda: hook_runs(s) == 2, 5, "one hook run for the changes")
    s.settle(0.3)
    check(hook_runs(s) == 2, "the hook ran %d times, expected 2 (first sync, the changes)" % hook_runs(s))
    rcv.close()
    posted = [(x["type"], x["key"].split("/", 1)[1]) for p in rcv.posts for x in p]
    check(posted == want, "--http-post sent %s, expected exactly the changes %s" % (rcv.posts, want))


@scenario("StateResourceVersionTooOld", 6)
def t_rv_too_old(s):
    s.server()
    mirror = first_run(s, 10)
    rv = s.rv()
    s.delete("o4")
    s.update("o5", {"o5": "changed"})
    s.create("new", {"new": "new"})
    s.ctl.compact()
    kr, before = second_run(s)
    kr.wait(lambda ls: any(x.get("type") == "DELETED" for x in ls) and
            sum(1 for x in ls if x.get("type") == "SYNCED") >= 1, 10, "the relist")
    s.settle(0.5)
    reqs = s.reqs()[before:]
    kinds = [e.req_kind(r) for r in reqs]
    check(kinds[0] == "W" and reqs[0]["query"].get("resourceVersion") == rv,
          "first request %s, expected a watch from %s" % (e.describe(reqs[0]), rv))
    relists = [k for k in kinds[1:] if k in ("WL", "L")]
    check(kinds.count("W") + kinds.count("WL") + kinds.count("L") == len(kinds) and 1 <= len(relists) <= 2,
          "requests: %s" % [e.describe(r) for r in reqs])
    check(sorted(names(objects(kr))) == sorted([("ADDED", "new"), ("DELETED", "o4"), ("MODIFIED", "o5")]),
          "events %s" % names(objects(kr)))
    for ev in objects(kr):
        n = ev["object"]["metadata"]["name"]
        if ev["type"] == "DELETED":
            mirror.pop("default/" + n, None)
        else:
            mirror["default/" + n] = ev["object"]
    got = {k: o["metadata"]["resourceVersion"] for k, o in mirror.items()}
    check(got == s.server_objects(), "mirror differs from the server (a cold start's)")
    check("o4" not in files(s), "the file of the object deleted in the gap is still there")


def full_sync_again(s, kr, n, why):
    kr.wait_synced()
    s.settle(0.3)
    check(len([x for x in objects(kr) if x["type"] == "ADDED"]) == n,
          "expected a full sync (%d ADDED), got %s" % (n, names(objects(kr))[:5]))
    check(why in kr.stderr(), "no clear log line (%r): %s" % (why, kr.stderr_tail()))
    check(kr.synced()[0].get("state") == "live", "SYNCED %s" % kr.synced()[0])
    s.check_mirror(kr)


@scenario("StateOtherConfigIgnored", 4)
def t_other_config(s):
    s.server()
    first_run(s, 6)
    kr, before = second_run(s, "--keep-managed-fields")
    full_sync_again(s, kr, 6, "written for another configuration")
    check(any(e.req_kind(r) in ("WL", "L") for r in s.reqs()[before:]), "no list after the ignored snapshot")


@scenario("StateCorruptIgnored", 6)
def t_corrupt(s):
    s.server()
    first_run(s, 6)
    path = os.path.join(s.dir, "state", "state")
    with open(path, "rb") as f:
        good = f.read()
    # A flipped bit in the middle of an object, then a file cut short.
    for i, bad in enumerate((good[:len(good) // 2] + bytes([good[len(good) // 2] ^ 4]) + good[len(good) // 2 + 1:],
                             good[:len(good) - 3])):
        with open(path, "wb") as f:
            f.write(bad)
        kr, before = second_run(s, name="bad%d" % i)
        full_sync_again(s, kr, 6, "ignoring the snapshot")
        check(kr.stop() == 0, "did not stop cleanly")
        with open(path, "rb") as f:
            check(f.read()[:8] == b"KRSTATE\n", "no new snapshot after the full sync")


@scenario("StateOfflineStartMaxStale", 6)
def t_offline(s):
    srv = s.server()
    first_run(s, 5)
    before_files = files(s)
    srv.stop()
    # Without --max-stale, an unreachable server is a failure of --once.
    kr = s.kreflect(*state_args(s, "--once", "--timeout", "2"), name="nostale")
    check(kr.wait_exit(10) == 1, "exit %s without --max-stale, expected 1" % kr.rc)
    kr = s.kreflect(*state_args(s, "--once", "--timeout", "5", "--max-stale", "3600"), name="offline")
    t0 = time.monotonic()
    rc = kr.wait_exit(10)
    check(rc == 0, "exit %s with --max-stale, expected 0: %s" % (rc, kr.stderr_tail()))
    check(time.monotonic() - t0 < late(3), "--once took %.1f s" % (time.monotonic() - t0))
    syn = kr.synced()
    check(len(syn) == 1 and syn[0].get("state") == "restored" and syn[0]["count"] == 5, "SYNCED %s" % syn)
    err = kr.stderr()
    check("restored" in err and "s old" in err, "no message saying restored and how old: %s" % kr.stderr_tail())
    check(files(s) == before_files, "the files changed")
    check(hook_runs(s) == 1, "the hook ran for a restored mirror")
    # Too old: not counted as synced.
    kr = s.kreflect(*state_args(s, "--once", "--timeout", "2", "--max-stale", "0"), name="tooold")
    time.sleep(1.1)
    check(kr.wait_exit(10) == 1, "exit %s with a mirror older than --max-stale, expected 1" % kr.rc)


@scenario("StateOnceFromRestoredMirror", 5)
def t_once_warm(s):
    s.server()
    first_run(s, 6)
    s.update("o1", {"o1": "changed"})
    s.delete("o2")
    kr, before = second_run(s, "--once")
    check(kr.wait_exit(10) == 0, "--once exited %s: %s" % (kr.rc, kr.stderr_tail()))
    check(sorted(names(objects(kr))) == [("DELETED", "o2"), ("MODIFIED", "o1")], "events %s" % names(objects(kr)))
    check(kr.synced()[0].get("state") == "live", "SYNCED %s" % kr.synced())
    f = files(s)
    check(f["o1"][2] == b"changed" and "o2" not in f and len(f) == 5, "files %s" % sorted(f))
    check(hook_runs(s) == 2, "the hook ran %d times, expected once more for --once" % hook_runs(s))


@scenario("StateTwoResources", 5)
def t_two_resources(s):
    s.server()
    s.create("c1", {"c1": "v"})
    s.ctl.create("secrets", "default", "s1", stringData={"s1": "secret-value"})
    res = ("configmaps", "secrets")
    kr = s.kreflect(*state_args(s), name="first", resources=res)
    kr.wait_synced(2)
    check(kr.stop() == 0, "the first run did not stop cleanly")
    rv = s.rv()
    s.ctl.update("secrets", "default", "s1", stringData={"s1": "changed"})
    log0 = len(s.ctl.log())
    kr2 = s.kreflect(*state_args(s), name="second", resources=res)
    kr2.wait_synced(2)
    kr2.wait(lambda ls: any(x.get("type") == "MODIFIED" for x in ls), 10, "the secret's change")
    s.settle(0.5)
    reqs = [e for e in s.ctl.log()[log0:] if e["path"].endswith(("/configmaps", "/secrets"))]
    check(sorted((e["path"].rsplit("/", 1)[1], e["query"].get("resourceVersion"), e.get("watch"),
                  e["query"].get("sendInitialEvents")) for e in reqs) ==
          [("configmaps", rv, True, None), ("secrets", rv, True, None)],
          "requests %s" % [e["path"] + "?" + e["raw_query"] for e in reqs])
    check(names(objects(kr2)) == [("MODIFIED", "s1")], "events %s" % names(objects(kr2)))
    check(files(s)["s1"][2] == b"changed", "the secret's file was not updated")
    mode = os.stat(os.path.join(s.dir, "state", "state")).st_mode & 0o777
    check(mode == 0o600, "the snapshot holding a Secret has mode %o" % mode)
    for k in (kr, kr2):
        check("secret-value" not in k.stderr() and "changed" not in k.stderr(), "a Secret value in the log")


@scenario("StateUsageErrors", 2)
def t_usage(s):
    s.server()
    path = os.path.join(s.dir, "afile")
    with open(path, "w") as f:
        f.write("x")
    for args, want in ((["--state-dir", path], "not a directory"),
                       (["--max-stale", "10"], "--max-stale needs --state-dir"),
                       (["--state-dir", s.dir, "--state-interval", "0"], "--state-interval"),
                       (["--state-dir", s.dir, "--max-stale", "x"], "--max-stale")):
        kr = s.kreflect(*args, name="usage%d" % len(s.krs))
        check(kr.wait_exit(5) == 2, "%s: exit %s, expected 2" % (args, kr.rc))
        check(want in kr.stderr(), "%s: no clear message (%r): %s" % (args, want, kr.stderr_tail()))
    # A snapshot that cannot be written (a directory where its temp file goes, which
    # not even root can replace): the error is logged, kreflect keeps mirroring.
    bad = os.path.join(s.dir, "bad")
    os.makedirs(os.path.join(bad, "state.tmp"))
    s.create("a")
    kr = s.kreflect("--state-dir", bad, "--state-interval", "1", name="unwritable")
    kr.wait_synced()
    s.create("b")
    kr.wait_event("ADDED", "b")
    wait_until(lambda: kr.stderr().count("unable to create the state snapshot") >= 2, 5,
               "the write error, logged and tried again")
    check(kr.running(), "kreflect stopped on a state write error")
    s.check_mirror(kr)


@scenario("StateSupervisedProgramStartsOffline", 5)
def t_supervised_offline(s):
    srv = s.server()
    first_run(s, 3)
    srv.stop()
    marker = os.path.join(s.dir, "started")
    prog = "cat %s > %s; exec sleep 30" % (os.path.join(s.dir, "files", "o1"), marker)
    # The resource before "--": everything after it is the program's.
    kr = s.kreflect(*state_args(s, "--max-stale", "3600", "configmaps", "--", "sh", "-c", prog),
                    name="supervised", resources=())
    t0 = time.monotonic()
    wait_until(lambda: os.path.exists(marker) and open(marker).read() == "v1", 5,
               "the program started with the restored files")
    check(time.monotonic() - t0 < late(3), "the program started %.1f s after kreflect" % (time.monotonic() - t0))
    check(kr.running(), "kreflect is not running")
    kr.stop()


@scenario("StateOfflineKeepsTrying", 6)
def t_offline_keeps_trying(s):
    srv = s.server()
    first_run(s, 4)
    srv.stop()
    kr = s.kreflect(*state_args(s, "--max-stale", "3600"), name="offline")
    kr.wait_synced()
    check(kr.synced()[0].get("state") == "restored", "SYNCED %s" % kr.synced()[0])
    n0 = kr.stderr().lower().count("refused")
    time.sleep(3)
    n1 = kr.stderr().lower().count("refused")
    check(kr.running(), "kreflect gave up while offline")
    check(n1 > n0 >= 1, "no retries in the background (%d, then %d refused connections logged)" % (n0, n1))
    check(not objects(kr), "printed objects while offline: %s" % names(objects(kr)))


@scenario("StateSnapshotsCoalesced", 8)
def t_coalesced(s):
    s.server()
    for i in range(5):
        s.create("o%d" % i)
    kr = s.kreflect(*state_args(s, "--state-interval", "2"), name="busy")
    kr.wait_synced()
    writes = lambda: kr.stderr().count("state: snapshot of") + kr.stderr().count("state: journal:")  # noqa: E731
    wait_until(lambda: writes() >= 1, 5, "the first snapshot")
    n0 = writes()
    t0 = time.monotonic()
    for i in range(20):
        s.update("o%d" % (i % 5), {"o%d" % (i % 5): "v%d" % i})
        time.sleep(0.05)
    kr.wait(lambda ls: sum(1 for x in ls if x.get("type") == "MODIFIED") >= 20, 10, "20 changes")
    time.sleep(2.2)                     # one interval more: the last changes are written
    took = time.monotonic() - t0
    n1 = writes()
    # At most one write per 2 s interval (plus the one the interval started with).
    check(1 <= n1 - n0 <= int(took / 2) + 1, "%d writes for 20 changes in %.1f s with --state-interval 2"
          % (n1 - n0, took))
    check("state: journal: 5 changed objects" in kr.stderr(), "the changes were not a journal group of 5 objects: %s"
          % kr.stderr_tail())
    time.sleep(late(2.5))
    n2 = writes()
    check(n2 == n1, "%d writes while nothing changed" % (n2 - n1))
    check(kr.stop() == 0, "did not stop")
    check(writes() == n2, "a write at the stop with nothing changed since the last")


@scenario("StateJournalAfterKill", 6)
def t_journal_after_kill(s):
    s.server()
    for i in range(6):
        s.create("o%d" % i, {"o%d" % i: "v"})
    kr = s.kreflect(*state_args(s, "--state-interval", "1"), name="first")
    kr.wait_synced()
    wait_until(lambda: "state: snapshot of 6 objects" in kr.stderr(), 5, "the first snapshot")
    s.update("o1", {"o1": "changed"})
    s.delete("o2")
    s.create("n", {"n": "new"})
    wait_until(lambda: "state: journal: 2 changed objects" in kr.stderr(), 5, "a journal group")
    rv = s.rv()
    kr.kill()                                   # no clean stop: no last snapshot
    kr2 = resumed(s, rv)
    check("with 1 journal groups" in kr2.stderr(), "the journal was not replayed: %s" % kr2.stderr_tail())
    f = files(s)
    check(f["o1"][2] == b"changed" and "o2" not in f and f["n"][2] == b"new", "files %s" % sorted(f))


@scenario("StateFirstSnapshotAtSync", 6)
def t_first_snapshot_at_sync(s):
    """Killed one second after its first sync (default 60 s interval): the restart resumes."""
    s.server()
    for i in range(4):
        s.create("o%d" % i, {"o%d" % i: "v"})
    kr = s.kreflect(*state_args(s), name="first")
    kr.wait_synced()
    time.sleep(1)
    rv = s.rv()
    check("state: snapshot of 4 objects" in kr.stderr(), "no snapshot within 1 s of the first sync: %s"
          % kr.stderr_tail())
    kr.kill()                                   # SIGKILL: no snapshot at the stop
    kr2, before = second_run(s)
    kr2.wait_synced()
    s.settle(0.5)
    expect_requests(s.reqs()[before:], [W(rv, status="open")], "the restart's requests (no LIST or watch-list)")
    check(not objects(kr2), "the restart printed %s" % names(objects(kr2)))


def watch_events(port, rv, want, timeout=10):
    """A raw watch on the --listen endpoint from rv: its events until want of them (or an ERROR)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.sendall(("GET %s?watch=1&resourceVersion=%s HTTP/1.1\r\nHost: x\r\n\r\n" % (NS_PATH, rv)).encode())
    buf, evs, end = b"", [], time.monotonic() + late(timeout)
    try:
        while time.monotonic() < end and len(evs) < want:
            b = c.recv(65536)
            if not b:
                break
            buf += b
            evs = [json.loads(x) for x in buf.split(b"\r\n\r\n", 1)[-1].split(b"\n")
                   if x.strip().startswith(b"{")]
            if any(ev.get("type") == "ERROR" for ev in evs):
                break
    except OSError:
        pass
    finally:
        c.close()
    return evs


@scenario("StateVersion1StillLoads", 5)
def t_version1(s):
    """A state directory written before the format had history records (version 1) restores."""
    s.server()
    first_run(s, 5)
    rv = s.rv()
    path = os.path.join(s.dir, "state", "state")
    with open(path, "rb") as f:
        b = bytearray(f.read())
    check(b[:8] == b"KRSTATE\n" and struct.unpack_from("<I", b, 8)[0] == 2, "the snapshot is not version 2")
    struct.pack_into("<I", b, 8, 1)
    struct.pack_into("<I", b, 40, zlib.crc32(bytes(b[:40])))
    with open(path, "wb") as f:
        f.write(b)
    kr = resumed(s, rv)
    check("restored 5 objects" in kr.stderr(), "the version-1 snapshot was not restored: %s" % kr.stderr_tail())


@scenario("StateRelayHistoryAcrossKill", 6)
def t_relay_history(s):
    """A relay (--listen) SIGKILLed and restarted with its state: a watcher resumes from a
    resourceVersion its ring held before the kill and gets the changes after it, not a 410."""
    s.server()
    for i in range(4):
        s.create("o%d" % i, {"o%d" % i: "v"})
    port = free_port()
    args = ("--listen", "127.0.0.1:%d" % port, "--state-interval", "1")
    kr = s.kreflect(*state_args(s, *args), name="first")
    kr.wait_synced()
    wait_until(lambda: "state: snapshot of 4 objects" in kr.stderr(), 5, "the first snapshot")
    s.update("o1", {"o1": "a"})
    mid = s.rv()
    s.update("o2", {"o2": "b"})
    s.delete("o3")
    wait_until(lambda: "state: journal:" in kr.stderr(), 5, "a journal group")
    kr.kill()                                   # no clean stop: the snapshot and its journal
    # Restarted while its upstream is away: not live, yet a watch from its saved ring is
    # served (a list still waits for the sync: 503).
    s.srv.stop()
    kr2 = s.kreflect(*state_args(s, *args), name="second")
    wait_until(lambda: "records of the relay's change history" in kr2.stderr(), 5,
               "the history restored: %s" % kr2.stderr_tail())
    wait_until(lambda: "serving the mirror" in kr2.stderr(), 5, "the endpoint")
    r = socket.create_connection(("127.0.0.1", port), timeout=5)
    r.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % NS_PATH).encode())
    head = r.recv(64)
    r.close()
    check(head.startswith(b"HTTP/1.1 503"), "a list before the sync: %r" % head[:40])
    evs = watch_events(port, mid, 2)
    got = [(ev["type"], ev["object"]["metadata"].get("name")) for ev in evs]
    check(got[:2] == [("MODIFIED", "o2"), ("DELETED", "o3")],
          "a watch from %s after the restart got %s, expected o2 MODIFIED and o3 DELETED" % (mid, got))
    # One the ring does not hold waits for the sync like a list: 503 (after it, a 410).
    evs = watch_events(port, "1", 1)
    check(evs and evs[0].get("code") == 503, "a watch from resourceVersion 1 before the sync got %s, expected "
          "a 503" % evs[:1])

@scenario("StateArenaPartialRestart", 10)
def t_arena_partial_restart(s):
    """A mirror partial because the arena is full (objects present but not
    held), snapshotted at its first sync: the snapshot has no resourceVersion,
    so the restart lists; it holds the same objects again and prints none of
    them (none changed); once deletes make room, the relist holds all that
    is left and the sync is whole, and only the held objects deleted are
    printed (as DELETED)."""
    s.server("--initial", 300, "--initial-size", 1024)
    args = ("--arena-bytes", "256K", "--watch-list", "off")
    kr = s.kreflect(*state_args(s, *args), name="first")
    syn = kr.wait_synced(timeout=15)[0]
    held = len(objects(kr))
    check(syn.get("partial") is True and syn["count"] == 300 and 100 < held < 300,
          "first SYNCED %s with %d objects printed" % (syn, held))
    wait_until(lambda: "state: snapshot of 300 objects" in kr.stderr(), late(5), "the snapshot at the first sync")
    check(kr.stop() == 0, "the first run did not stop cleanly")
    kr2, before = second_run(s, *args)
    syn2 = kr2.wait_synced(timeout=15)[0]
    kr2.wait_sync_logged()
    check(syn2.get("partial") is True and syn2["count"] == 300, "the restart's SYNCED %s" % syn2)
    check("restored 300 objects" in kr2.stderr(), "no restore line: %s" % kr2.stderr_tail())
    check("partial: %d of 300 held" % held in kr2.stderr(), "the restart's synced line: %s" % kr2.stderr_tail(2))
    reqs = s.reqs()[before:]
    check(any(e.req_kind(r) == "L" for r in reqs),
          "the restart did not list: %s" % [e.describe(r) for r in reqs][:4])
    s.settle(0.5)
    check(not objects(kr2), "the restart printed %d objects, none changed" % len(objects(kr2)))
    for i in range(200):
        s.delete("cm-%05d" % (299 - i))
    wait_until(lambda: any(not x.get("partial") and x["count"] == 100 for x in kr2.synced()), late(40),
               "a whole SYNCED of the 100 objects left")
    deleted = sorted(ev["object"]["metadata"]["name"] for ev in objects(kr2) if ev["type"] == "DELETED")
    check(deleted == ["cm-%05d" % i for i in range(100, held)] and len(objects(kr2)) == len(deleted),
          "printed %d events, %d DELETED (%s...), expected DELETED for the %d held and deleted"
          % (len(objects(kr2)), len(deleted), deleted[:2], held - 100))
    check(kr2.stop() == 0, "the restart did not stop cleanly")


if __name__ == "__main__":
    import atexit
    atexit.register(e.kill_all)
    signal.signal(signal.SIGTERM, e.on_signal)
    signal.signal(signal.SIGINT, e.on_signal)
    sys.exit(e.main(sys.argv[1:]))
