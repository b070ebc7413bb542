#!/usr/bin/env python3
"""Supervisor mode, --http-post and --once with hooks, end to end.

    python3 tests/supervise/test_supervise.py WRAPPER [-j N] [NAME ...]

WRAPPER is the script tests/supervise/run.sh writes: it runs kreflect, and with
the argument --test-pid1 runs it as PID 1 of a new PID namespace. The harness
(scenario registry, Kreflect process wrapper, test API server, runner) is
tests/e2e/test_e2e.py's; only the scenarios are here. The supervised program
is tests/supervise/app.sh, which logs what it sees to CONFIG_DIR.log.

Standard library only. Every wait has a timeout.
"""

import atexit
import http.server
import json
import os
import signal
import socket
import stat
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until, scenario  # noqa: E402

e2e.SCENARIOS.clear()        # the e2e suite's own scenarios run in tests/e2e
APP = os.path.join(HERE, "app.sh")


# =========================================================================== the supervised app

def app_log(path):
    """app.sh's log as a list of (word, fields) lines."""
    try:
        with open(path) as f:
            return [(ln.split()[0], ln.split()[1:]) for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return []


def app_files(fields):
    """The NAME=CONTENT fields of a start or hup line, as a dict."""
    return dict(f.split("=", 1) for f in fields if "=" in f)


def wait_app(path, word, count=1, timeout=10):
    """The fields of every `word` line, once there are at least count of them."""
    def p():
        got = [f for w, f in app_log(path) if w == word]
        return got if len(got) >= count else None
    return wait_until(p, timeout, "%d '%s' line(s) in %s" % (count, word, os.path.basename(path)))


def inner_pid(kr, timeout=10):
    """kreflect's own pid when --test-pid1 made unshare its parent."""
    def p():
        try:
            with open("/proc/%d/task/%d/children" % (kr.proc.pid, kr.proc.pid)) as f:
                kids = f.read().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None
    return wait_until(p, timeout, "kreflect to start in its PID namespace")


def zombies_in_ns(pid):
    """Zombie children of pid, the init of its PID namespace: what it failed to reap.
    Not the application's own: its shell's `sleep 0.1` is a zombie for a moment
    after each tick, until the shell waits for it (seen once in a clean-clone run)."""
    try:
        ns = os.readlink("/proc/%d/ns/pid" % pid)
    except OSError:
        return []
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % d) != ns:
                continue
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            found.append(int(d))
    return found


def recipe(s, *flags, mode=None, pid1=True, labels=True):
    """kreflect in the README's FROM scratch recipe shape:
    kreflect -l app=gateway --dir /config -o none configmaps -- /gateway --config-dir /config
    Returns (kr, config dir, app log path)."""
    cfg = os.path.join(s.dir, "config")
    os.makedirs(cfg, exist_ok=True)
    args = (["--test-pid1"] if pid1 else []) + (["-l", "app=gateway"] if labels else []) + \
        ["--dir", cfg, "-o", "none"] + list(flags)
    prog = ["--", APP, "--config-dir", cfg] + (["--mode", mode] if mode else [])
    kr = s.kreflect(*args, resources=["configmaps"] + prog)
    return kr, cfg, cfg + ".log"


def gateway_objects(s):
    s.ctl.create("configmaps", "default", "gw", data={"listen": "8080", "mode": "fast"},
                 labels={"app": "gateway"})
    s.ctl.create("configmaps", "default", "other", data={"unrelated": "x"}, labels={"app": "other"})


# =========================================================================== supervisor mode

@scenario("Pid1RecipeStartsAfterSyncSignalsAndReaps", 8)
def t_recipe(s):
    s.server()
    gateway_objects(s)
    s.ctl.fault(kind="stall", seconds=1.0, count=1)          # the first answer is slow
    t0 = time.time()
    kr, cfg, log = recipe(s, "--debounce", "300")
    start = wait_app(log, "start")[0]
    pid = inner_pid(kr)
    started_at = float(start[1])
    check(started_at >= t0 + 1.0, "the app started %.2f s after kreflect, before the stalled list "
          "could have completed" % (started_at - t0))
    check(app_files(start[2:]) == {"listen": "8080", "mode": "fast"},
          "the app started with files %s, not the synced ones" % start[2:])
    err = kr.stderr()
    check(0 <= err.find("wrote mode") < err.find("started %s" % APP), "not started after the files were "
          "written: %s" % kr.stderr_tail())
    # The orphan the app left: reaped by kreflect as PID 1, no zombie left.
    orphan = wait_app(log, "orphan")[0][0]
    wait_until(lambda: ("reaped pid %s " % orphan) in kr.stderr(), 5, "kreflect to reap orphan %s" % orphan)
    check(not zombies_in_ns(pid), "zombies kreflect (PID 1) left unreaped: %s" % zombies_in_ns(pid))
    # Changes: one SIGHUP per debounce window, after the files are written.
    for i in range(5):
        s.ctl.update("configmaps", "default", "gw", data={"listen": "90%02d" % i, "mode": "fast"})
    hup = wait_app(log, "hup")[0]
    check(app_files(hup[1:]).get("listen") == "9004", "at SIGHUP the app read %s" % hup[1:])
    time.sleep(0.8)
    check(len([w for w, _ in app_log(log) if w == "hup"]) == 1,
          "5 changes in one window made %d SIGHUPs" % len([w for w, _ in app_log(log) if w == "hup"]))
    s.ctl.update("configmaps", "default", "other", data={"unrelated": "y"})   # not selected
    time.sleep(0.8)
    check(len([w for w, _ in app_log(log) if w == "hup"]) == 1, "a change outside the selector signalled the app")
    # Signals to kreflect reach the app.
    os.kill(pid, signal.SIGUSR1)
    wait_app(log, "usr1")
    os.kill(pid, signal.SIGHUP)
    wait_app(log, "hup", 2)
    # SIGTERM: passed on; the app exits 0, so does kreflect, well within the grace period.
    t1 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    rc = kr.wait_exit(10)
    took = time.monotonic() - t1
    check(rc == 0, "exit code %s after SIGTERM, the app exited 0: %s" % (rc, kr.stderr_tail()))
    check(took < 2, "took %.1f s to stop" % took)
    check([w for w, _ in app_log(log)].count("term") == 1, "the app did not log one SIGTERM: %s" % app_log(log))
    check([w for w, _ in app_log(log)].count("start") == 1, "the app started more than once")


@scenario("Pid1ExitCodeIsTheAppsOwn", 6)
def t_exit_codes(s):
    s.server()
    gateway_objects(s)
    for mode, want in (("exit3", 3), ("kill9", 137)):
        kr, cfg, log = recipe(s, mode=mode)
        rc = kr.wait_exit(10)
        check(rc == want, "app --mode %s: kreflect exited %s, expected %d: %s" % (mode, rc, want, kr.stderr_tail()))
        check("exited with %d" % want in kr.stderr(), "stderr does not say the app exited with %d" % want)
        os.unlink(log)
    # A program that cannot be started: a clear message, exit 127 (not found) or 126.
    kr = s.kreflect("--test-pid1", "-o", "none", resources=["configmaps", "--", "/nonexistent/app"])
    check(kr.wait_exit(10) == 127, "missing program: exit %s" % kr.rc)
    check("unable to start /nonexistent/app: No such file or directory" in kr.stderr(), kr.stderr_tail())
    plain = os.path.join(s.dir, "not-executable")
    with open(plain, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(plain, 0o644)
    kr = s.kreflect("-o", "none", resources=["configmaps", "--", plain])
    check(kr.wait_exit(10) == 126, "a program without x permission: exit %s" % kr.rc)
    check("unable to start %s: Permission denied" % plain in kr.stderr(), kr.stderr_tail())


@scenario("Pid1SigtermThenGraceThenSigkill", 8)
def t_grace(s):
    s.server()
    gateway_objects(s)
    kr, cfg, log = recipe(s, "--grace", "1", mode="ignore-term")
    wait_app(log, "start")
    pid = inner_pid(kr)
    time.sleep(0.3)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    rc = kr.wait_exit(10)
    took = time.monotonic() - t0
    check(rc == 137, "an app that ignores SIGTERM: exit %s, expected 137 (SIGKILL): %s" % (rc, kr.stderr_tail()))
    check(1.0 <= took < 2.5, "stopped %.2f s after SIGTERM with --grace 1" % took)
    check([w for w, _ in app_log(log)].count("term") == 1, "the app did not get SIGTERM first: %s" % app_log(log))
    check("sending SIGKILL" in kr.stderr(), kr.stderr_tail())


@scenario("OnChangeRestart", 8)
def t_restart(s):
    """--on-change=restart, and supervisor mode without a PID namespace."""
    s.server()
    gateway_objects(s)
    kr, cfg, log = recipe(s, "--on-change", "restart", "--grace", "2", "--debounce", "200", pid1=False)
    first = wait_app(log, "start")[0]
    s.ctl.update("configmaps", "default", "gw", data={"listen": "7000", "mode": "slow"})
    second = wait_app(log, "start", 2)[1]
    words = [w for w, _ in app_log(log)]
    check(words.index("term") < len(words) - 1 - words[::-1].index("start"),
          "not stopped before the restart: %s" % words)
    check(second[0] != first[0], "the same pid after a restart")
    check(app_files(second[2:]) == {"listen": "7000", "mode": "slow"},
          "restarted with files %s" % second[2:])
    check("hup" not in words, "restart mode sent a SIGHUP")
    check(kr.running(), "kreflect ended with the restarted app")
    rc = kr.stop(signal.SIGTERM)
    check(rc == 0, "exit %s after SIGTERM" % rc)


@scenario("EveryOutputAtOnce", 5)
def t_every_output(s):
    """--dir, --exec, --http-post, -- PROGRAM and the JSON lines together: five
    sinks, none dropped (the table once held four and lost the JSON lines)."""
    s.server()
    gateway_objects(s)
    cfg = os.path.join(s.dir, "config")
    os.makedirs(cfg, exist_ok=True)
    kr = s.kreflect("--dir", cfg, "--exec", "true", "--http-post", "http://127.0.0.1:9/unused",
                    resources=["configmaps", "--", APP, "--config-dir", cfg])
    kr.wait_synced(1)
    wait_app(cfg + ".log", "start")
    check(os.path.exists(os.path.join(cfg, "listen")), "--dir wrote nothing")
    check(kr.events_for("gw"), "no JSON line for gw on stdout")
    rc = kr.stop(signal.SIGTERM)
    check(rc == 0, "exit %s after SIGTERM" % rc)


@scenario("SigtermBeforeTheFirstSync", 4)
def t_term_before_sync(s):
    s.server()
    gateway_objects(s)
    s.ctl.fault(kind="stall", seconds=5, count=2)
    kr, cfg, log = recipe(s, pid1=False)
    time.sleep(0.7)
    t0 = time.monotonic()
    rc = kr.stop(signal.SIGTERM)
    check(rc == 0 and time.monotonic() - t0 < 2, "exit %s after %.1f s" % (rc, time.monotonic() - t0))
    check(not app_log(log), "the app was started before the sync: %s" % app_log(log))


@scenario("SupervisorUsageErrors", 2)
def t_sup_usage(s):
    for args, words in ((["--grace", "3"], "--grace is for supervisor mode"),
                        (["--on-change", "restart"], "--on-change is for supervisor mode"),
                        (["--once", "--", "true"], "exclude each other"),
                        (["--"], "must be followed by a PROGRAM"),
                        (["--child-signal", "NOPE", "--", "true"], "unknown signal 'NOPE'"),
                        (["--on-change", "sometimes", "--", "true"], "signal or restart"),
                        (["--", "true"] + ["x"] * 64, "more than 64 words"),
                        (["--http-post", "https://127.0.0.1:1/"], "https:// is not supported"),
                        (["--http-post", "ftp://x/"], "must be http://"),
                        (["--http-post", "http://u:p@127.0.0.1/"], "user:password@"),
                        (["--http-post", "http://127.0.0.1:99999/"], "bad port")):
        kr = s.kreflect(*args, server_url="http://127.0.0.1:1", resources=[])
        rc = kr.wait_exit(5)
        check(rc == 2 and words in kr.stderr(), "%s: exit %s, stderr %s" % (args, rc, kr.stderr_tail()))
    # "--help" after -- is the program's, not kreflect's.
    kr = s.kreflect(server_url="http://127.0.0.1:1", resources=["configmaps", "--", "true", "--help"],
                    verbosity="0")
    time.sleep(0.5)
    check(kr.running() and not kr.bad, "kreflect took the program's --help: %s" % kr.bad[:1])


# =========================================================================== --http-post

class Receiver:
    """A small HTTP server recording POSTs; answers with statuses in turn, then 200."""

    def __init__(self, statuses=(), replies=()):
        self.posts = []
        self.statuses = list(statuses)
        self.replies = list(replies)            # answer bodies in turn, then b"ok"
        self.lock = threading.Lock()
        rx = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with rx.lock:
                    code = rx.statuses.pop(0) if rx.statuses else 200
                    reply = rx.replies.pop(0) if rx.replies else b"ok"
                    rx.posts.append({"time": time.monotonic(), "path": self.path, "status": code,
                                     "headers": {k.lower(): v for k, v in self.headers.items()},
                                     "body": body})
                self.send_response(code)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                try:
                    self.wfile.write(reply)
                except OSError:         # kreflect stopped reading a reply too long
                    pass

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def got(self):
        with self.lock:
            return list(self.posts)

    def wait(self, n, timeout=10):
        return wait_until(lambda: len(self.got()) >= n and self.got(), timeout, "%d POSTs" % n)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()


def lines(post):
    return [json.loads(ln) for ln in post["body"].decode().splitlines()]


@scenario("HttpPostOneBatchPerWindow", 8)
def t_post_batches(s):
    s.server()
    s.create("a")
    s.create("b")
    with Receiver() as rx:
        kr = s.kreflect("--http-post", rx.url + "/hook?via=kreflect", "--debounce", "1000")
        first = rx.wait(1)[0]
        syn = kr.wait_synced()[0]
        check(first["path"] == "/hook?via=kreflect", "posted to %s" % first["path"])
        check(first["headers"].get("content-type") == "application/x-ndjson",
              "Content-Type %s" % first["headers"].get("content-type"))
        got = lines(first)
        rvs = s.server_objects()
        check(sorted((e["type"], e["key"], e["resourceVersion"]) for e in got if e["type"] == "ADDED") ==
              [("ADDED", "default/a", rvs["default/a"]), ("ADDED", "default/b", rvs["default/b"])], "first batch %s" % got)
        check(got[-1] == {"type": "SYNCED", "resource": "configmaps", "resourceVersion": syn["resourceVersion"],
                          "count": 2}, "first batch ends %s" % got[-1])
        check(all(e.get("resource") == "configmaps" for e in got), "resource missing: %s" % got)
        # A burst of 20 changes in well under the window: one POST with every change, in order.
        for i in range(10):
            s.update("a", {"k": "a%d" % i})
            s.update("b", {"k": "b%d" % i})
        second = rx.wait(2)[1]
        time.sleep(1.2)
        check(len(rx.got()) == 2, "20 changes in one window made %d POSTs" % (len(rx.got()) - 1))
        got = lines(second)
        check([e["type"] for e in got] == ["MODIFIED"] * 20, "second batch %s" % [e["type"] for e in got])
        rvs = s.server_objects()
        check(got[-2:] == [{"type": "MODIFIED", "resource": "configmaps", "key": "default/a",
                            "resourceVersion": rvs["default/a"]},
                           {"type": "MODIFIED", "resource": "configmaps", "key": "default/b",
                            "resourceVersion": rvs["default/b"]}], "last lines %s" % got[-2:])
        check(b"\"k\"" not in second["body"], "object content was posted")
        s.delete("a")
        third = rx.wait(3)[2]
        check([(e["type"], e["key"]) for e in lines(third)] == [("DELETED", "default/a")], "third %s" % lines(third))
        check(third["time"] - second["time"] >= 1.0, "windows closer than the debounce")


@scenario("HttpPostRetriesThenDelivers", 10)
def t_post_retry(s):
    s.server()
    s.create("a")
    with Receiver(statuses=[500, 503]) as rx:
        kr = s.kreflect("--http-post", rx.url + "/", "--debounce", "200")
        posts = rx.wait(3, timeout=15)
        check([p["status"] for p in posts[:3]] == [500, 503, 200], "statuses %s" % [p["status"] for p in posts])
        check(posts[0]["body"] == posts[1]["body"] == posts[2]["body"], "a retry changed the batch")
        gaps = [posts[i + 1]["time"] - posts[i]["time"] for i in range(2)]
        check(0.7 <= gaps[0] < 2.5 and 1.5 <= gaps[1] < 4.5, "retry gaps %s, not the backoff" % gaps)
        check("attempt 1 of 5" in kr.stderr() and "HTTP 500" in kr.stderr(), kr.stderr_tail())
        time.sleep(0.6)
        check(len(rx.got()) == 3, "%d POSTs after the delivery" % len(rx.got()))
        # Changes while a batch is retried go in the next batch, not into the retried one.
        with rx.lock:
            rx.statuses[:] = [500]
        s.update("a", {"k": "1"})
        rx.wait(4)
        s.update("a", {"k": "2"})
        posts = rx.wait(6, timeout=15)
        check([p["status"] for p in posts[3:6]] == [500, 200, 200], "statuses %s" % [p["status"] for p in posts])
        check(posts[3]["body"] == posts[4]["body"] and len(lines(posts[4])) == 1, "the retried batch changed")
        check(lines(posts[5])[0]["resourceVersion"] == s.server_objects()["default/a"], "the later change: %s" % lines(posts[5]))


@scenario("HttpPostAnswerTooLongIsAFailure", 6)
def t_post_long_answer(s):
    s.server()
    s.create("a")
    with Receiver(replies=[b"x" * 100000]) as rx:
        kr = s.kreflect("--http-post", rx.url + "/", "--debounce", "100", "-o", "none")
        posts = rx.wait(2)
        check(posts[0]["body"] == posts[1]["body"], "the retry sent another batch")
        check("an answer longer than 65536 bytes" in kr.stderr(), kr.stderr_tail())
        wait_until(lambda: "posted 1 changes" in kr.stderr(), 5, "the second attempt to be delivered")


@scenario("HttpPostReceiverDownIsBounded", 30)
def t_post_down(s):
    s.server()
    s.create("a")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    kr = s.kreflect("--http-post", "http://127.0.0.1:%d/x" % port, "--debounce", "100")
    kr.wait_synced()
    # Meanwhile kreflect mirrors as ever.
    for i in range(5):
        s.create("n%d" % i)
        time.sleep(0.3)
    kr.wait_event("ADDED", "n4")
    s.check_mirror(kr)
    wait_until(lambda: "after 5 attempts" in kr.stderr(), 30, "the batch to be dropped after 5 attempts")
    err = kr.stderr()
    check(err.count("unable to post") >= 5 and "attempt 4 of 5" in err and "attempt 5 of 5" not in err,
          "attempts: %s" % kr.stderr_tail())
    check("refused" in err.lower(), "no reason given: %s" % kr.stderr_tail())
    check(kr.running(), "kreflect stopped")
    s.update("a", {"k": "after"})
    kr.wait_event("MODIFIED", "a")
    s.check_mirror(kr)


@scenario("HttpPostBatchBound", 6)
def t_post_bound(s):
    s.server()
    s.ctl.bulk("configmaps", "default", 400, size=10, name_pattern="object-with-a-long-name-{i:05d}")
    with Receiver() as rx:
        kr = s.kreflect("--http-post", rx.url + "/", "--debounce", "100", "-o", "none")
        first = rx.wait(1)[0]
        got = lines(first)
        check(len(first["body"]) <= 16384, "a batch of %d bytes" % len(first["body"]))
        check(got[-1]["type"] == "DROPPED", "no DROPPED line: %s" % got[-1])
        kept = [e for e in got if e["type"] == "ADDED"]
        check(len(kept) + got[-1]["events"] == 401 and len(kept) > 50,
              "%d lines kept + %d dropped, of 400 ADDED + 1 SYNCED" % (len(kept), got[-1]["events"]))
        check(kr.running(), "kreflect stopped")


# =========================================================================== --once with hooks

@scenario("OnceRunsTheHookOnceWithTheFiles", 6)
def t_once_hook(s):
    s.server()
    gateway_objects(s)
    cfg = os.path.join(s.dir, "config")
    out = os.path.join(s.dir, "hook.out")
    hook = "sh -c 'sleep 0.5; ls %s >> %s; echo \"events=$KREFLECT_EVENTS\" >> %s'" % (cfg, out, out)
    with Receiver() as rx:
        kr = s.kreflect("--once", "--dir", cfg, "-o", "none", "-l", "app=gateway", "--exec", hook,
                        "--http-post", rx.url + "/")
        rc = kr.wait_exit(15)
        check(rc == 0, "exit %s: %s" % (rc, kr.stderr_tail()))
        with open(out) as f:
            text = f.read()
        check(text == "listen\nmode\nevents=1\n", "the hook ran %r" % text)
        check(len(rx.got()) == 1 and lines(rx.got()[0])[-1]["type"] == "SYNCED", "POSTs %s" % rx.got())
    # A failing hook fails the init container.
    kr = s.kreflect("--once", "-o", "none", "--exec", "sh -c 'exit 4'")
    rc = kr.wait_exit(15)
    check(rc == 1 and "exited with 4" in kr.stderr(), "failing hook: exit %s: %s" % (rc, kr.stderr_tail()))
    # A hook that outlives --timeout is stopped, and that is a failure.
    kr = s.kreflect("--once", "--timeout", "2", "-o", "none", "--exec", "sleep 30")
    t0 = time.monotonic()
    rc = kr.wait_exit(10)
    check(rc == 1 and 1.5 < time.monotonic() - t0 < 4, "slow hook: exit %s after %.1f s"
          % (rc, time.monotonic() - t0))
    check("still running at the --timeout" in kr.stderr(), kr.stderr_tail())


@scenario("OnceServerDownNamesTheResource", 5)
def t_once_down(s):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    out = os.path.join(s.dir, "hook.out")
    kr = s.kreflect("--once", "--timeout", "2", "--insecure-skip-tls-verify", "--exec", "touch " + out,
                    server_url="https://127.0.0.1:%d" % port, resources=("configmaps", "secrets"))
    t0 = time.monotonic()
    rc = kr.wait_exit(10)
    took = time.monotonic() - t0
    err = kr.stderr()
    check(rc == 1, "exit %s: %s" % (rc, kr.stderr_tail()))
    check(1.8 <= took <= 4, "exited after %.1f s with --timeout 2" % took)
    for res in ("configmaps", "secrets"):
        check("unable to sync %s within the --timeout" % res in err, "no message naming %s: %s" % (res, kr.stderr_tail()))
    check(not os.path.exists(out), "the hook ran without a sync")


if __name__ == "__main__":
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, e2e.on_signal)
    signal.signal(signal.SIGINT, e2e.on_signal)
    sys.exit(e2e.main(sys.argv[1:]))
