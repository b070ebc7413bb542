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
                                                       "--namespace", "edge", "--name", "gw", "--socket", sock],
                              stdout=out, stderr=err)

        def answer():
            return ask(sock)

        first = wait_for(lambda: answer().startswith("log-level=warn interval=30 enabled=true"), 20 * slow)
        (ok if first is True else bad)("the first sync applies the ConfigMap (%s)" % first)

        # Changes through faults: a dropped watch, a 410, a stalled stream.
        ctl.update("configmaps", "edge", "gw", data={"log-level": "warn", "interval": "10", "enabled": "true"})
        ctl.drop_watches()
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "10", "enabled": "true"})
        ctl.fault(kind="watch_error", code=410, watch=True, count=1)
        ctl.drop_watches()
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "10", "enabled": "false"})
        ctl.fault(kind="stall_watch", seconds=2, watch=True, count=1)
        ctl.drop_watches()
        ctl.fault(kind="status", code=403, watch=True, count=1)
        ctl.drop_watches()
        ctl.update("configmaps", "edge", "gw", data={"log-level": "loud", "interval": "5", "enabled": "false"})
        time.sleep(0.5)
        ctl.update("configmaps", "edge", "gw", data={"log-level": "debug", "interval": "5", "enabled": "false"})
        ctl.update("configmaps", "edge", "gw-other", data={"log-level": "info", "interval": "2", "enabled": "true"})
        final_rv = ctl.get("configmaps", "edge", "gw")["metadata"]["resourceVersion"]
        want = "log-level=debug interval=5 enabled=false rv=%s" % final_rv
        got = wait_for(lambda: answer() == want, 30 * slow)
        (ok if got is True else bad)("after the faults the socket answers the final values: %r (want %r)"
                                     % (answer(), want))
        out.flush()
        out.seek(0)
        lines = out.read().splitlines()
        applied = [ln for ln in lines if ln.startswith("applied ")]
        if applied and applied[-1] == "applied " + want:
            ok("the last settings applied are the final ones (%d applications)" % len(applied))
        else:
            bad("applied lines end with %r, want %r" % (applied[-1:] or None, "applied " + want))
        if not any("interval=1 " in ln or "interval=2 " in ln or "log-level=loud" in ln for ln in applied):
            ok("the look-alike ConfigMap and the invalid log level were never applied")
        else:
            bad("applied a value it must not have: %s" % applied)
        syncs = [ln for ln in lines if ln.startswith("synced ")]
        if len(syncs) >= 2 and all(ln.startswith("synced 1 ") for ln in syncs):
            ok("%d syncs (first and after the 410), each of exactly 1 object" % len(syncs))
        else:
            bad("sync lines %s: expected at least 2 of exactly 1 object" % syncs)
        # Failures as data (kr_state_change.failure, http_status, status_reason).
        err.flush()
        err.seek(0)
        classes = [ln for ln in err.read().splitlines() if ln.startswith("gateway: ") and " [" in ln]
        for want in ("[expired 410 ", "[forbidden 403 Forbidden]"):
            (ok if any(want in ln for ln in classes) else bad)(
                "a backoff says %s as data (%d backoff lines)" % (want.strip(), len(classes)))
        gw.send_signal(signal.SIGTERM)
        try:
            rc = gw.wait(10 * slow)
        except subprocess.TimeoutExpired:
            rc = None
        (ok if rc == 0 else bad)("SIGTERM: the gateway exits 0 (%s)" % rc)
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
