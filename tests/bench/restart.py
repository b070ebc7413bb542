#!/usr/bin/env python3
"""Warm restart from --state-dir side by side with a cold start, and the flash it costs.

    python3 tests/bench/restart.py [--quick] [--out DIR]

For N = 1,000 and 10,000 ConfigMaps of 1 KiB (10,000: the build of `make
relist-variant`, the default build holds 4,096 objects) against the test API
server (tests/apiserver, TLS), kreflect runs with --state-dir, --dir and an
--exec hook three times:

  cold     no snapshot: the first start;
  warm     started again after a clean stop, nothing changed on the server;
  changed  started again after 10 of the N objects changed while it was down.

For each: requests (LIST pages, watch-lists, watches, from the server's log),
bytes the server sent (its log, HTTP bytes before TLS), files written or
rewritten under --dir (inode or mtime changed, or new), hook runs, and the
time from exec to the SYNCED line on stdout (the median of --reps runs, 3 by
default, 1 with --quick). Also the size of the snapshot file.

Then the flash cost under a steady change rate: 1,000 objects, one object
changed every 0.5 s for --flash-seconds (default 30; 12 with --quick) with
--state-interval 5; bytes written to the state directory from kreflect's own
log lines (each snapshot and journal group logs its size) and, as a
cross-check, the kernel's write_bytes of the process (/proc/PID/io: bytes
sent to the block layer, --dir files included), per hour as measured.

Prints a Markdown table and writes DIR/restart.json (default build/bench).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess  # noqa: E402

NS_PATH = "/api/v1/namespaces/default/configmaps"


def files_state(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.startswith(".kreflect"):
                continue
            st = os.stat(os.path.join(dirpath, n))
            out[os.path.join(dirpath, n)] = (st.st_ino, st.st_mtime_ns)
    return out


class Run:
    def __init__(self, binary, srv, work, extra=()):
        self.hook = os.path.join(work, "hook.log")
        self.err_path = os.path.join(work, "kreflect-%d.err" % time.monotonic_ns())
        cmd = [binary, "--server", srv.ready["server"], "--certificate-authority", srv.ready["ca"],
               "--token-file", srv.ready["token_file"], "-v", "1",
               "--state-dir", os.path.join(work, "state"), "--dir", os.path.join(work, "files"),
               "--dir-layout", "object", "--exec", "sh -c 'echo run >> %s'" % self.hook, "--debounce", "100"] + list(extra) + ["configmaps"]
        self.err = open(self.err_path, "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, HOME=work))
        self.synced_at = None
        self.lines = 0
        self.ev = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines += 1
            if self.synced_at is None and b'"type":"SYNCED"' in raw:
                self.synced_at = time.monotonic() - self.t0
                self.ev.set()

    def wait_synced(self, timeout=120):
        if not self.ev.wait(timeout):
            raise SystemExit("kreflect did not sync within %d s: %s" % (timeout, self.stderr()[-500:]))

    def io_write_bytes(self):
        try:
            with open("/proc/%d/io" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("write_bytes:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.err.close()

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def hook_runs(path):
    try:
        with open(path) as f:
            return len(f.read().split())
    except OSError:
        return 0


def one(binary, srv, work, since_log, settle=1.0):
    """Starts kreflect, waits for SYNCED and a quiet second, stops it; returns its figures."""
    before_files = files_state(os.path.join(work, "files"))
    hooks0 = hook_runs(os.path.join(work, "hook.log"))
    run = Run(binary, srv, work)
    run.wait_synced()
    time.sleep(settle)
    run.stop()
    after = files_state(os.path.join(work, "files"))
    written = sum(1 for k, v in after.items() if before_files.get(k) != v)
    # The server counts a response's bytes when it ends (the watch: when kreflect closed it).
    deadline = time.monotonic() + 10
    while True:
        reqs = [e for e in srv.control.call("/log", {"since": since_log}, timeout=30)["entries"]
                if e["path"] == NS_PATH]
        if all(e.get("done") for e in reqs) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    kinds = {"list": 0, "watch-list": 0, "watch": 0}
    for e in reqs:
        if not e.get("watch"):
            kinds["list"] += 1
        elif e["query"].get("sendInitialEvents") == "true":
            kinds["watch-list"] += 1
        else:
            kinds["watch"] += 1
    return {
        "synced_s": run.synced_at, "requests": kinds, "bytes": sum(e.get("bytes") or 0 for e in reqs),
        "files_written": written, "hook_runs": hook_runs(os.path.join(work, "hook.log")) - hooks0,
        "stdout_lines": run.lines, "log_restored": "restored" in run.stderr(),
    }


def log_end(srv):
    entries = srv.control.call("/log", {"since": 0}, timeout=30)["entries"]
    return max((e["id"] for e in entries), default=0)


def restart_figures(binary, n, out, reps):
    rows = {"cold": [], "warm": [], "changed": []}
    snap = None
    for rep in range(reps):
        work = os.path.join(out, "restart-%d-%d" % (n, rep))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(os.path.join(work, "server"))
        srv = ServerProcess(["--seed", "1"], workdir=os.path.join(work, "server"), timeout=60)
        try:
            srv.control.bulk("configmaps", "default", n, size=1024)
            rows["cold"].append(one(binary, srv, work, log_end(srv)))
            snap = os.path.getsize(os.path.join(work, "state", "state"))
            rows["warm"].append(one(binary, srv, work, log_end(srv)))
            st = srv.control.state(resource="configmaps", namespace="default")
            for k in sorted(st["objects"])[:10]:
                name = k.rsplit("/", 1)[1]
                srv.control.update("configmaps", "default", name, data={"changed": "x" * 100})
            rows["changed"].append(one(binary, srv, work, log_end(srv)))
        finally:
            srv.stop()
    med = {}
    for k, rs in rows.items():
        med[k] = dict(rs[0])
        med[k]["synced_s"] = statistics.median(r["synced_s"] for r in rs)
    return med, snap


def flash_figures(binary, out, seconds):
    work = os.path.join(out, "restart-flash")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "server"))
    srv = ServerProcess(["--seed", "1"], workdir=os.path.join(work, "server"), timeout=60)
    try:
        srv.control.bulk("configmaps", "default", 1000, size=1024)
        names = [k.rsplit("/", 1)[1] for k in sorted(srv.control.state(resource="configmaps",
                                                                        namespace="default")["objects"])]
        run = Run(binary, srv, work, extra=("--state-interval", "5"))
        run.wait_synced()
        time.sleep(6)          # the first snapshot (after the sync) is not part of the steady state
        log0 = run.stderr()
        io0 = run.io_write_bytes()
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < seconds:
            srv.control.update("configmaps", "default", names[i % len(names)], data={"v": str(i)})
            i += 1
            time.sleep(0.5)
        took = time.monotonic() - t0
        log1 = run.stderr()
        io1 = run.io_write_bytes()
        run.stop()
    finally:
        srv.stop()
    new = log1[len(log0):]
    snaps = [int(b) for b in re.findall(r"state: snapshot of \d+ objects written to \S+: (\d+) bytes", new)]
    groups = [int(b) for b in re.findall(r"state: journal: \d+ changed objects appended to \S+: (\d+) bytes", new)]
    snap_size = [int(b) for b in re.findall(r"state: snapshot of \d+ objects written to \S+: (\d+) bytes", log1)]
    total = sum(snaps) + sum(groups)
    return {
        "seconds": took, "changes": i, "interval_s": 5, "snapshots": len(snaps), "snapshot_bytes_written": sum(snaps),
        "journal_groups": len(groups), "journal_bytes": sum(groups), "state_bytes": total,
        "state_bytes_per_hour": total / took * 3600,
        "kernel_write_bytes": (io1 - io0) if io0 is not None and io1 is not None else None,
        "snapshot_bytes": snap_size[-1] if snap_size else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--flash-seconds", type=float, default=None)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    a = ap.parse_args()
    reps = a.reps or (1 if a.quick else 3)
    flash_s = a.flash_seconds or (12 if a.quick else 30)
    os.makedirs(a.out, exist_ok=True)
    bins = {1000: os.path.join(ROOT, "build", "kreflect"), 10000: os.path.join(ROOT, "build", "x86_64-relist", "kreflect")}
    results = {"restart": {}, "flash": None}
    lines = ["| objects | start | LIST | watch-list | watch | bytes received | files written | hook runs | time to SYNCED |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n, binary in bins.items():
        if not os.access(binary, os.X_OK):
            print("restart.py: %s is not built (make; make relist-variant)" % binary, file=sys.stderr)
            return 2
        med, snap = restart_figures(binary, n, a.out, reps)
        results["restart"][n] = {"runs": med, "snapshot_bytes": snap}
        for k in ("cold", "warm", "changed"):
            r = med[k]
            lines.append("| %d | %s | %d | %d | %d | %d | %d | %d | %.3f s |" % (
                n, k, r["requests"]["list"], r["requests"]["watch-list"], r["requests"]["watch"], r["bytes"],
                r["files_written"], r["hook_runs"], r["synced_s"]))
        lines.append("| %d | snapshot file | | | | | | | %d bytes |" % (n, snap))
    fl = flash_figures(bins[1000], a.out, flash_s)
    results["flash"] = fl
    lines.append("")
    lines.append("flash, 1,000 objects, one change every 0.5 s for %.0f s, --state-interval 5: %d snapshots "
                 "(%d bytes) and %d journal groups (%d bytes) = %d bytes, %.0f bytes/hour; kernel write_bytes "
                 "of the process over the same time (--dir files included): %s. A snapshot is %s bytes; one is "
                 "written each time the journal has grown to that size, so rewrites add at most the journal's "
                 "bytes again."
                 % (fl["seconds"], fl["snapshots"], fl["snapshot_bytes_written"], fl["journal_groups"],
                    fl["journal_bytes"], fl["state_bytes"], fl["state_bytes_per_hour"], fl["kernel_write_bytes"],
                    fl["snapshot_bytes"]))
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "restart.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.out, "restart.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
