#!/usr/bin/env python3
"""The firmware-style example (tests/example/gateway.c) against the test API server.

    python3 tests/example/run.py TARGET        # x86_64, asan, aarch64, armv7

The gateway mirrors one ConfigMap through libkreflect.a from its own poll()
loop and answers on a UNIX socket with the settings in force. The ConfigMap
changes while the watch is dropped, answered with 410 and stalled, with an
invalid value in between and a look-alike ConfigMap changing beside it; the
gateway must end with exactly the final values, and say so on its socket.
The last line is "N passed, N failed".
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess  # noqa: E402

QEMU = {"aarch64": ["qemu-aarch64"], "armv7": ["qemu-arm"]}
passed = failed = 0


def ok(what):
    global passed
    passed += 1
    print("ok   " + what)


def bad(what):
    global failed
    failed += 1
    print("FAIL " + what)


def ask(path, timeout=2.0):
    """The gateway's answer on its own socket (its poll loop serves it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        return s.recv(256).decode().strip()
    finally:
        s.close()


def wait_for(fn, timeout):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            last = fn()
            if last is True or (last and last is not False):
                return last
        except OSError:
            pass
        time.sleep(0.1)
    return last


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "x86_64"
    binary = os.path.join(ROOT, "build", target, "tests", "gateway")
    if not os.access(binary, os.X_OK):
        bad("setup: %s is not built (make TARGET=%s target-tests)" % (binary, target))
        print("%d passed, %d failed" % (passed, failed))
        return 1
    slow = 3 if target in QEMU or target == "asan" else 1
    art = os.path.join(ROOT, "build", "test", "example-" + target)
    os.makedirs(art, exist_ok=True)
    sock = os.path.join(art, "gateway.sock")
    files = os.path.join(art, "files")
    shutil.rmtree(files, ignore_errors=True)
    os.makedirs(os.path.join(art, "server"), exist_ok=True)
    srv = ServerProcess(args=["--bookmark-interval", "2"], workdir=os.path.join(art, "server"))
    ctl = srv.control
    out = open(os.path.join(art, "gateway.out"), "w+")
    err = open(os.path.join(art, "gateway.err"), "w+")
    gw = None
    try:
        ctl.create("configmaps", "edge", "gw", data={"log-level": "warn", "interval": "30", "enabled": "true"})
        ctl.create("configmaps", "edge", "gw-other", data={"log-level": "error", "interval": "1", "enabled": "false"})
        gw = subprocess.Popen(QEMU.get(target, []) + [binary, "--kubeconfig", srv.ready["kubeconfig"],
                                                       "--namespace", "edge", "--name", "gw", "--socket", sock,
                                                       # Every port slot of kr_sandbox_opts taken: the
                                                       # API server's must still be allowed (rewatch).
                                                       "--host-port", "1883", "--host-port", "8883",
                                                       "--host-port", "6514", "--host-port", "9091",
                                                       "--files", files],
                              stdout=out, stderr=err)

        def answer():
            return ask(sock)

        first = wait_for(lambda: answer().startswith("log-level=warn interval=30 enabled=true"), 20 * slow)
        (ok if first is True else bad)("the first sync applies the ConfigMap (%s)" % first)

        def rewatch(fault=None, then=None):
            """Drops the gateway's open watch, the fault (if any) armed for its
            next one, and waits for that watch to take it. All the faults that
            match a request apply to it at once (a 403 hides a 410 armed
            beside it), so each must wait for a request of its own."""
            open_watch = wait_for(lambda: ctl.state(summary=True)["watches"] > 0, 20 * slow)
            (ok if open_watch else bad)("the gateway has a watch open to drop")
            # A watch dropped within a second of its start is a "very short watch": the
            # gateway then relists, and a fault armed for its watch would meet the relist.
            started = max([e["time"] for e in ctl.log() if e["watch"]] or [0])
            time.sleep(max(0.0, started + 1.2 - time.time()))
            since = max([e["id"] for e in ctl.log()] or [0])
            if fault:
                ctl.fault(watch=True, count=1, **fault)
            ctl.drop_watches()
            hit = wait_for(lambda: [e for e in ctl.log(since) if e["watch"] and
                                    (not fault or fault["kind"] in e["faults"])], 20 * slow)
            (ok if hit else bad)("the gateway watches again after the drop%s"
                                 % (" and takes the %s fault" % fault["kind"] if fault else ""))
            if then:
                (ok if wait_for(then, 20 * slow) else bad)("then %s" % then.__doc__)

        def lines_of(f, prefix):
            f.flush()
            f.seek(0)
            return [ln for ln in f.read().splitlines() if ln.startswith(prefix)]

        def resynced():
            """the 410's relist syncs again"""
            return len(lines_of(out, "synced ")) >= 2

        def refused():
            """the 403 reaches the gateway's backoff"""
            return any("[forbidden 403 " in ln for ln in lines_of(err, "gateway: "))

        # Changes through faults: a dropped watch, a 410, a stalled stream, a 403.
        ctl.update("configmaps", "edge", "gw", data={"log-level": "warn", "interval": "10", "enabled": "true"})
        rewatch()
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "10", "enabled": "true"})
        rewatch({"kind": "watch_error", "code": 410}, resynced)
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "10", "enabled": "false"})
        rewatch({"kind": "stall_watch", "seconds": 2})
        rewatch({"kind": "status", "code": 403}, refused)
        # While the gateway backs off: a bad level (ignored) beside the final interval and enabled.
        ctl.update("configmaps", "edge", "gw", data={"log-level": "loud", "interval": "5", "enabled": "false"})
        loud_rv = ctl.get("configmaps", "edge", "gw")["metadata"]["resourceVersion"]
        time.sleep(0.5)
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "5", "enabled": "false"})
        ctl.update("configmaps", "edge", "gw-other", data={"log-level": "info", "interval": "2", "enabled": "true"})
        final_rv = ctl.get("configmaps", "edge", "gw")["metadata"]["resourceVersion"]
        want = "log-level=debug interval=5 enabled=false rv=%s" % final_rv
        got = wait_for(lambda: answer() == want, 30 * slow)
        (ok if got is True else bad)("after the faults the socket answers the final values: %r (want %r)"
                                     % (answer(), want))
        # The same values as files (kr_client_dir), the look-alike's never.
        want_files = {"log-level": "debug", "interval": "5", "enabled": "false"}

        def read_files():
            try:
                return {k: open(os.path.join(files, k)).read() for k in sorted(os.listdir(files))
                        if not k.startswith(".")}
            except OSError:
                return None
        got = wait_for(lambda: read_files() == want_files, 10 * slow)
        (ok if got is True else bad)("the files hold the final values: %r" % read_files())
        applied = lines_of(out, "applied ")
        # The gateway prints a line only when the settings change. The update
        # with the bad level already carries the final interval and enabled
        # (its level is ignored, debug stays), so if the gateway saw that
        # version the final values took effect there and the last update
        # printed nothing; the 403 ends in a relist after the backoff, which
        # usually sees only the last update. Either is right; nothing else is.
        want_applied = ["applied log-level=debug interval=5 enabled=false rv=%s" % v for v in (loud_rv, final_rv)]
        if applied and applied[-1] in want_applied:
            ok("the last settings applied are the final ones (%d applications)" % len(applied))
        else:
            bad("applied lines end with %r, want one of %r" % (applied[-1:] or None, want_applied))
        if not any("interval=1 " in ln or "interval=2 " in ln or "log-level=loud" in ln for ln in applied):
            ok("the look-alike ConfigMap and the invalid log level were never applied")
        else:
            bad("applied a value it must not have: %s" % applied)
        syncs = lines_of(out, "synced ")
        if len(syncs) >= 2 and all(ln.startswith("synced 1 ") for ln in syncs):
            ok("%d syncs (first and after the 410), each of exactly 1 object" % len(syncs))
        else:
            bad("sync lines %s: expected at least 2 of exactly 1 object" % syncs)
        # Failures as data (kr_state_change.failure, http_status, status_reason).
        classes = [ln for ln in lines_of(err, "gateway: ") if " [" in ln]
        for want in ("[expired 410 ", "[forbidden 403 Forbidden]"):
            (ok if any(want in ln for ln in classes) else bad)(
                "a backoff says %s as data (%d backoff lines)" % (want.strip(), len(classes)))
        gw.send_signal(signal.SIGTERM)
        try:
            rc = gw.wait(10 * slow)
        except subprocess.TimeoutExpired:
            rc = None
        (ok if rc == 0 else bad)("SIGTERM: the gateway exits 0 (%s)" % rc)
        counts = lines_of(out, "files ")
        if counts and counts[-1].startswith("files 3 ") and counts[-1].endswith(" errors 0"):
            ok("kr_client_dir_stats after the stop: %s" % counts[-1])
        else:
            bad("kr_client_dir_stats line %r, want 'files 3 ... errors 0'" % counts)
    finally:
        if gw and gw.poll() is None:
            gw.kill()
            gw.wait()
        srv.stop()
        out.close()
        err.close()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
