#!/usr/bin/env python3
"""Differential tests: kreflect beside client-go's own Reflector, on every fault.

    python3 tests/peers/test_peers.py [-j N] [--seed S] [NAME ...]

Every scenario runs twice, in two modes, each on a test API server of its own
(tests/apiserver/) shared by the two clients of that mode, started together:

  wl    kreflect (default: watch-list, then fallback)   client-go, KUBE_FEATURE_WatchListClient=true
  list  kreflect --watch-list off (paginated LIST)      client-go, gate off (client-go 0.32's default)

client-go is build/peers/client-go-peer (`make peers`, tests/peers/client-go/):
cache.NewReflector with the library's defaults, printing kreflect's JSON lines.
A fault is given to each client on its own (the server's `user_agent` fault
field), so both meet the same faults. After the faults stop, both folded
outputs must equal the server's objects, and kreflect must not have taken
more requests, or more response bytes, than client-go (the server's request
log, per User-Agent, from the first request to the stop of both).

Where client-go is known to fail (src/README.md "One ListAndWatch": a watch-list whose
initial-events-end bookmark never comes hangs it until the server's
timeoutSeconds, 5 to 10 minutes), the scenario says so: client-go must still
be unsynced at the end (so the claim stays true) and kreflect must converge.
Scenarios left out of the default run are in SKIPPED with their reason.

It prints a table (scenario x client: converged after how long, requests,
bytes) and ends with "N passed, N failed". Artifacts: build/test/peers/.
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True      # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until, fold  # noqa: E402

PEER = os.path.join(ROOT, "build", "peers", "client-go-peer")
KR_UA = "kreflect/"
CG_UA = "client-go-peer"
CONVERGE = 20           # seconds for both mirrors to reach the server's state
# Response bytes kreflect may take over client-go's: none, but a periodic
# bookmark (bookmarks every 60 s here, so at most one in a scenario) can land
# on one watch and not the other just before the stop.
BYTES_SLACK = 400


class GoPeer(e2e.Kreflect):
    """client-go's Reflector, read and folded exactly as kreflect is."""

    def __init__(self, s, name, watch_list):
        self.s, self.name = s, name
        srv = s.srv
        self.out_path = os.path.join(s.dir, name + ".out")
        self.err_path = os.path.join(s.dir, name + ".err")
        self.cmd = [PEER, "--server", srv.ready["server"], "--certificate-authority", srv.ready["ca"],
                    "--token-file", srv.ready["token_file"], "-v", "2", "configmaps"]
        env = e2e.hermetic_env(s.dir)
        env["KUBE_FEATURE_WatchListClient"] = "true" if watch_list else "false"
        with open(os.path.join(s.dir, name + ".cmd"), "w") as f:
            f.write("KUBE_FEATURE_WatchListClient=%s %s\n" % (env["KUBE_FEATURE_WatchListClient"],
                                                              " ".join(self.cmd)))
        self.err_f = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.err_f, env=env)
        e2e.remember(self.proc)
        self.lock = threading.Lock()
        self.lines, self.times, self.bad = [], [], []
        self.eof = False
        self.rc = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()


# =========================================================================== one run

class Run:
    """One scenario in one mode: a server, kreflect and client-go."""

    def __init__(self, name, mode, initial=20, server_args=()):
        self.s = e2e.Scenario(name)
        self.mode = mode
        self.s.server("--bookmark-interval", "60", *server_args)
        # Both clients ask for gzip on LISTs; bytes are compared uncompressed,
        # so no LIST is gzipped here.
        self.s.ctl.settings(gzip=False)
        for i in range(initial):
            self.s.create("cm-%02d" % i, {"k": "v%d" % i})
        self.kr = self.cg = None
        self.t_faults_end = None
        self.converged = {}

    def start(self, kr_args=()):
        wl = self.mode == "wl"
        args = list(kr_args) + ([] if wl else ["--watch-list", "off"])
        self.kr = self.s.kreflect(*args, name="kreflect")
        self.cg = GoPeer(self.s, "client-go", wl)
        self.s.krs.append(self.cg)      # stopped by the scenario's cleanup too

    def fault(self, **f):
        """The same fault once for each client."""
        for ua in (KR_UA, CG_UA):
            self.s.ctl.fault(user_agent=ua, **f)

    def synced(self, timeout=15):
        for c in (self.kr, self.cg):
            c.wait_synced(1, timeout)

    def writes(self, n, gap=0.1, tag="w"):
        """n changes: creates, updates and deletes in turn."""
        for i in range(n):
            k = i % 3
            if k == 0:
                self.s.create("%s-%d-%d" % (tag, int(time.time() * 1000) % 100000, i), {"x": str(i)})
            elif k == 1:
                names = sorted(k.split("/", 1)[1] for k in self.s.server_objects())
                self.s.update(names[i % len(names)], {"x": "u%d" % i})
            else:
                names = sorted(k.split("/", 1)[1] for k in self.s.server_objects())
                self.s.delete(names[(i * 7) % len(names)])
            time.sleep(gap)

    def converge(self, expect_cg_fail=None):
        """Faults off; both mirrors must reach the server's state (client-go's
        only if it is not expected to fail); then one more change must reach
        them: each is watching again."""
        if not expect_cg_fail:
            self.wait_faults_taken()
        self.s.ctl.call("/faults/clear")
        self.t_faults_end = time.monotonic()
        # A client known to fail gets a few seconds to prove it wrong.
        t = time.monotonic()
        deadline = {"kreflect": t + CONVERGE, "client-go": t + (5 if expect_cg_fail else CONVERGE)}
        for final in (False, True):
            if final:
                self.s.create("final", {"k": "end"})
            want = self.s.server_objects()
            pending = {n: c for n, c in (("kreflect", self.kr), ("client-go", self.cg))
                       if not final or n in self.converged}
            while pending:
                now = time.monotonic()
                for n, c in list(pending.items()):
                    if self.s.mirror_rvs(c) == want:
                        if not final:
                            self.converged[n] = now - self.t_faults_end
                        del pending[n]
                    elif now > deadline[n]:
                        self.converged.pop(n, None)
                        del pending[n]
                time.sleep(0.05)
        for n, c in (("kreflect", self.kr), ("client-go", self.cg)):
            _, anomalies = c.mirror()
            check(not anomalies, "%s's events do not fold cleanly: %s" % (n, "; ".join(anomalies[:3])))
            check(not c.bad, "%s printed lines that are not JSON: %r" % (n, c.bad[:2]))
        if "kreflect" not in self.converged:
            got = self.s.mirror_rvs(self.kr)
            raise Fail("kreflect did not reach the server's state in %d s: %d objects, %d differ"
                       % (CONVERGE, len(got), sum(1 for k in set(got) | set(want) if got.get(k) != want.get(k))))
        if expect_cg_fail:
            check("client-go" not in self.converged,
                  "client-go converged although it is known to fail here (%s): update the scenario"
                  % expect_cg_fail)
        else:
            check("client-go" in self.converged, "client-go did not reach the server's state in %d s" % CONVERGE)

    def wait_faults_taken(self, timeout=15):
        """Every fault given for a number of requests has met them, whichever
        client it was for: otherwise one client (slower to come back) would
        see fewer faults than the other."""
        def left():
            return [f for f in self.s.ctl.call("/faults")["faults"] if f.get("count", 1) > 0]
        try:
            wait_until(lambda: not left(), timeout, "every fault to be taken", 0.1)
        except Fail:
            raise Fail("faults never taken: %s" % ["%s for %s" % (f["kind"], f.get("user_agent"))
                                                   for f in left()]) from None

    def stop(self):
        for c in (self.kr, self.cg):
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        for c in (self.kr, self.cg):
            try:
                c.proc.wait(10)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
        # Open watches end on the server's side at its next write to them.
        self.s.ctl.call("/drop-watches")
        time.sleep(0.2)

    def usage(self):
        out = {}
        log = self.s.ctl.log()
        for n, ua in (("kreflect", KR_UA), ("client-go", CG_UA)):
            es = [e for e in log if (e.get("user_agent") or "").startswith(ua)]
            out[n] = (len(es), sum(e.get("bytes") or 0 for e in es))
        return out


# =========================================================================== scenarios

SCENARIOS = []      # (name, modes, function, note)
# Left out of the default run, with the reason (run them by name).
SKIPPED = {}


def scenario(name, modes=("wl", "list"), note=""):
    def deco(fn):
        SCENARIOS.append((name, modes, fn, note))
        return fn
    return deco


def after_sync(*faults, writes=6, drop=True):
    """The common shape: sync, changes on the open watches, then give each
    client the faults, cut the watches so that the next requests meet them,
    and once both have, three changes. Those land on both streams at once, so
    the fault meets both at the same event; a relist a moment earlier or later
    sees another set of objects, which is the cost of relisting."""
    def body(r):
        r.start()
        r.synced()
        # Past client-go's "very short watch" second: a watch cut sooner, with
        # no event, makes client-go relist, which is not this scenario's fault.
        time.sleep(1.2)
        r.writes(writes)
        for f in faults:
            r.fault(**f)
        if drop:
            r.s.ctl.call("/drop-watches")
        # Changes on the streams that met the fault: a fault "after N events"
        # needs events, and recovering must bring the ones it cut off.
        r.wait_faults_taken()
        r.writes(3, tag="f")
        time.sleep(0.5)
        r.converge()
    return body


def at_start(*faults, writes=4):
    """Faults on the first requests (the initial list or watch-list)."""
    def body(r):
        for f in faults:
            r.fault(**f)
        r.start()
        r.synced(20)
        time.sleep(1.2)
        r.writes(writes)
        r.converge()
    return body



PLAIN = [
    ("drop-watches", after_sync()),
    ("close-mid-record", after_sync({"kind": "close_after", "bytes": 500, "watch": True})),
    ("tcp-reset", after_sync({"kind": "close_after", "bytes": 400, "reset": True, "watch": True})),
    ("close-before-answer-watch", after_sync({"kind": "close_after", "bytes": 0, "watch": True})),
    ("stall-before-answer", after_sync({"kind": "stall", "seconds": 2, "watch": True})),
    ("stall-watch-3s", after_sync({"kind": "stall_watch", "after_events": 1, "seconds": 3})),
    ("garbage-line", after_sync({"kind": "garbage", "after_events": 1})),
    ("bad-chunk", after_sync({"kind": "bad_chunk", "after_events": 1})),
    ("end-watch", after_sync({"kind": "end_watch", "after_events": 2})),
    ("end-watch-at-once", after_sync({"kind": "end_watch", "after_events": 0})),
    ("watch-error-410", after_sync({"kind": "watch_error", "after_events": 1, "code": 410})),
    ("watch-error-500", after_sync({"kind": "watch_error", "after_events": 1, "code": 500})),
    ("watch-error-504-too-large", after_sync({"kind": "watch_error", "after_events": 1, "code": 504})),
    ("watch-error-429", after_sync({"kind": "watch_error", "after_events": 1, "code": 429, "retry_after": 1})),
    ("watch-503-retry-after", after_sync({"kind": "status", "code": 503, "retry_after": 1, "watch": True})),
    ("watch-500", after_sync({"kind": "status", "code": 500, "watch": True})),
    ("watch-401", after_sync({"kind": "unauthorized", "watch": True})),
    ("random-chunks", after_sync({"kind": "random_chunks", "seed": 7, "min": 1, "max": 40, "count": -1})),
    ("pause-mid-stream", after_sync({"kind": "pause_after", "bytes": 600, "seconds": 2, "watch": True})),
    ("slow-link", after_sync({"kind": "slow", "bytes": 300, "rate": 8000, "watch": True})),
    ("first-request-closed", at_start({"kind": "close_after", "bytes": 0})),
    ("first-request-cut", at_start({"kind": "close_after", "bytes": 900})),
    ("first-request-429", at_start({"kind": "status", "code": 429, "retry_after": 1})),
    ("first-request-500", at_start({"kind": "status", "code": 500})),
    ("first-request-503", at_start({"kind": "status", "code": 503, "retry_after": 1})),
    ("first-request-random-chunks", at_start({"kind": "random_chunks", "seed": 3, "min": 1, "max": 50})),
]

for _n, _fn in PLAIN:
    scenario(_n)(_fn)


@scenario("compaction-410")
def t_compaction(r):
    """Writes while disconnected, history compacted: the re-watch gets 410 and
    both relist."""
    r.start()
    r.synced()
    time.sleep(1.2)
    r.fault(kind="close_after", bytes=0, watch=True, count=2)   # stay away a little
    r.s.ctl.call("/drop-watches")
    r.writes(6)
    r.s.ctl.call("/compact")
    time.sleep(0.5)
    r.converge()


@scenario("paged-continue-expired", modes=("list",))
def t_paged_expired(r):
    """A paginated first list (600 objects, 500 a page, a server that pages at
    resourceVersion 0 as etcd does) whose continue token has expired: both
    list again in full (client-go's pager: FullListIfExpired)."""
    r.s.ctl.bulk("configmaps", "default", 600, size=100)
    r.s.ctl.settings(rv0_ignores_limit=False)
    r.fault(kind="expired", match="continue=")
    r.start()
    r.synced(20)
    time.sleep(1.2)
    r.writes(3)
    r.converge()


CG_TOKEN_MINUTE = ("client-go re-reads a --token-file only once a minute (cachingTokenSource "
                   "period) and not after a 401, for a file given as BearerTokenFile")


@scenario("token-rotation", note="client-go: token re-read once a minute")
def t_token(r):
    """The token is rotated and the watches cut: kreflect reads the new one at
    its first 401; client-go keeps the old one for up to a minute."""
    r.start()
    r.synced()
    time.sleep(1.2)
    r.s.ctl.call("/token/rotate")
    r.s.ctl.call("/drop-watches")
    r.writes(4)
    r.converge(expect_cg_fail=CG_TOKEN_MINUTE)


@scenario("deletions-while-away")
def t_deleted_away(r):
    r.start()
    r.synced()
    time.sleep(1.2)
    r.fault(kind="stall", seconds=2, watch=True)
    r.s.ctl.call("/drop-watches")
    for n in sorted(k.split("/", 1)[1] for k in r.s.server_objects())[:5]:
        r.s.delete(n)
    time.sleep(2.5)
    r.converge()


CG_WL_HANG = ("client-go's watch-list waits for the initial-events-end bookmark until the "
              "server's timeoutSeconds (300-600 s) ends the watch (src/README.md \"One ListAndWatch\")")


def wl_hang(value):
    """kreflect with its defaults gives up on the bookmark after its
    --initial-events-timeout (30 s) and lists; client-go keeps waiting."""
    def body(r):
        r.fault(kind="initial_events_end", value=value, count=-1)
        r.start()
        r.writes(3)
        r.kr.wait_synced(1, 45)
        r.converge(expect_cg_fail=CG_WL_HANG)
    return body


scenario("wl-bookmark-never-sent", modes=("wl",), note="client-go known to hang")(wl_hang(None))
scenario("wl-bookmark-false", modes=("wl",), note="client-go known to hang")(wl_hang("false"))


# ------------------------------------------------------------------ random schedule

# Faults a random schedule picks from: each is given to both clients, then the
# watches are cut so that their next requests meet it; changes land all along.
RANDOM_FAULTS = [
    {"kind": "close_after", "bytes": 500, "watch": True},
    {"kind": "close_after", "bytes": 300, "reset": True},
    {"kind": "close_after", "bytes": 0},
    {"kind": "stall", "seconds": 1},
    {"kind": "stall_watch", "after_events": 1, "seconds": 2},
    {"kind": "garbage", "after_events": 1},
    {"kind": "bad_chunk", "after_events": 2},
    {"kind": "end_watch", "after_events": 1},
    {"kind": "watch_error", "after_events": 1, "code": 410},
    {"kind": "watch_error", "after_events": 1, "code": 500},
    {"kind": "status", "code": 503, "retry_after": 1},
    {"kind": "status", "code": 500},
    {"kind": "unauthorized"},
    {"kind": "random_chunks", "min": 1, "max": 30},
    {"kind": "pause_after", "bytes": 500, "seconds": 1},
]
RANDOM_SECONDS = float(os.environ.get("PEERS_RANDOM_SECONDS", "20"))
# Under a random schedule the two clients recover by different paths, and
# bytes follow the path: after a cut chunk or a garbage line kreflect
# re-watches from its last resourceVersion and is sent every change since
# (src/README.md "Watch"), where client-go takes the decode error
# for an InternalError and relists, which sends each object once, in its
# current state. With many changes during the outage the replay is the
# larger of the two: kreflect may take up to this fraction more bytes there.
# Requests stay strict.
RANDOM_BYTES_SLACK = 0.10


def random_schedule(seed):
    def body(r):
        rng = random.Random(seed)
        r.start()
        r.synced()
        t_end = time.monotonic() + RANDOM_SECONDS
        plan = []
        i = 0
        while time.monotonic() < t_end:
            if rng.random() < 0.25:
                f = dict(rng.choice(RANDOM_FAULTS))
                if f["kind"] == "random_chunks":
                    f["seed"] = rng.randrange(1 << 30)
                r.fault(**f)
                plan.append(f["kind"])
                r.s.ctl.call("/drop-watches")     # the next requests meet it
                # One fault at a time, met by both: the next one only once each
                # client took this one and watches again. Otherwise a client in
                # a longer backoff meets several faults in one request where
                # the other meets them one by one, and they are no longer
                # compared on the same faults.
                if f.get("count", 1) > 0:
                    r.wait_faults_taken(20)
                r.s.ctl.call("/wait-watches", {"count": 2, "timeout": 30})
                # ... and past the "very short watch" second of both watches:
                # cut sooner with no event, a watch means a relist, so the cut
                # would be judged on when each client came back, not how.
                time.sleep(1.2)
            elif rng.random() < 0.05:
                r.s.ctl.call("/compact")
                plan.append("compact")
            r.writes(rng.randint(1, 3), gap=0.05, tag="r%d" % i)
            time.sleep(rng.uniform(0.1, 0.6))
            i += 1
        with open(os.path.join(r.s.dir, "schedule.json"), "w") as f:
            json.dump({"seed": seed, "steps": plan}, f)
        r.converge()
    return body


# =========================================================================== runner

RESULTS = []        # (name, mode, converged, usage, err)
RES_LOCK = threading.Lock()


def run_one(name, mode, fn, note):
    r = None
    err = None
    t0 = time.monotonic()
    try:
        r = Run("%s-%s" % (name, mode), mode)
        fn(r)
        r.stop()
        u = r.usage()
        (kq, kb), (cq, cb) = u["kreflect"], u["client-go"]
        if "client-go" in r.converged:
            check(kq <= cq, "kreflect took %d requests, client-go %d" % (kq, cq))
            slack = BYTES_SLACK
            if name.startswith("random"):
                slack += cb * RANDOM_BYTES_SLACK
            check(kb <= cb + slack, "kreflect took %d bytes, client-go %d (%+.1f %%)"
                  % (kb, cb, 100.0 * (kb - cb) / max(cb, 1)))
    except Fail as e:
        err = str(e)
    except Exception:
        err = "exception: " + traceback.format_exc().strip().replace("\n", "\n  ")
    conv, usage = {}, {}
    if r is not None:
        conv = dict(r.converged)
        try:
            usage = r.usage()
        except Exception:
            pass
        try:
            problems = r.s.cleanup()
        except Exception:
            problems = ["cleanup: " + traceback.format_exc().strip()]
        if problems and err is None:
            err = "; ".join(problems)
    with RES_LOCK:
        RESULTS.append((name, mode, conv, usage, err, note, time.monotonic() - t0))
    return err


def cell(name, conv, usage):
    c = "%.1f s" % conv[name] if name in conv else "no"
    q, b = usage.get(name, (0, 0))
    return "%s | %d | %s" % (c, q, "{:,}".format(b))


def print_table():
    print("\n| scenario | mode | kreflect converged | req | bytes | client-go converged | req | bytes | note |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for name, mode, conv, usage, err, note, _ in sorted(RESULTS):
        print("| %s | %s | %s | %s | %s |" % (name, mode, cell("kreflect", conv, usage),
                                             cell("client-go", conv, usage),
                                             ("FAIL " if err else "") + note))
    print()


def main(argv):
    jobs, names, seeds = 4, [], [1, 2]
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "-j":
            jobs = int(args.pop(0))
        elif a == "--seed":
            seeds = [int(args.pop(0))]
        else:
            names.append(a)
    for sd in seeds:
        scenario("random-seed-%d" % sd, note="%g s of random faults and writes" % RANDOM_SECONDS)(
            random_schedule(sd))
    e2e.BIN = os.path.join(ROOT, "build", "kreflect")
    e2e.ART = os.path.join(ROOT, "build", "test", "peers")
    os.makedirs(e2e.ART, exist_ok=True)
    for b, how in ((e2e.BIN, "make"), (PEER, "make peers")):
        if not os.access(b, os.X_OK):
            print("FAIL setup: %s is not built (%s)" % (b, how))
            print("0 passed, 1 failed")
            return 1
    try:
        e2e.prepare_certs()
    except Exception as e:
        print("FAIL setup: %s" % e)
        print("0 passed, 1 failed")
        return 1
    todo = [(n, m, fn, note) for n, modes, fn, note in SCENARIOS for m in modes
            if (not names and n not in SKIPPED) or any(x in n for x in names)]
    for n, why in SKIPPED.items():
        print("# left out: %s: %s" % (n, why))
    t0 = time.monotonic()
    passed = failed = 0
    lock = threading.Lock()

    def report(fu, name):
        nonlocal passed, failed
        err = fu.result()
        with lock:
            if err is None:
                passed += 1
                print("ok %s" % name, flush=True)
            else:
                failed += 1
                first, _, rest = err.partition("\n")
                print("FAIL %s: %s" % (name, first), flush=True)
                for line in rest.splitlines():
                    print("    " + line, flush=True)

    # The random schedules first: they are the longest.
    todo.sort(key=lambda t: not t[0].startswith("random"))
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for n, m, fn, note in todo:
            fu = ex.submit(run_one, n, m, fn, note)
            fu.add_done_callback(lambda f, nm="%s/%s" % (n, m): report(f, nm))
    print_table()
    print("# %d runs in %.1f s; artifacts in %s" % (len(todo), time.monotonic() - t0,
                                                   os.path.relpath(e2e.ART, ROOT)))
    print("%d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


def run_as_script(main_fn):
    """Runs main_fn(argv) as the program: nothing it started outlives it,
    however it ends."""
    import atexit

    def on_signal(sig, frame):
        e2e.kill_all()
        os._exit(128 + sig)
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.exit(main_fn(sys.argv[1:]))


if __name__ == "__main__":
    run_as_script(main)
