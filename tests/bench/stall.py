#!/usr/bin/env python3
"""The longest time a slow fsync keeps kreflect's loop from serving the watch stream.

    python3 tests/bench/stall.py [--fsync-ms 100] [--changes 40] [--out DIR]

kreflect runs against the test API server (tests/apiserver, TLS) with its
JSON-lines output on stdout and fsync slowed down by the port's test hook
(KREFLECT_FAULT_FSYNC_MS: every fsync, directory fsync and syncfs takes that
much longer, as on a slow SD card). Once it has synced, the driver changes
ConfigMaps at a steady rate (one every --gap-ms, 50 ms by default), each
change carrying its number; a reader thread stamps every stdout line as it
arrives. The lateness of a change is the time from just before the driver
sent it to the moment its MODIFIED line reached stdout: it includes the
server's own time (the same in every run), and everything kreflect does
between reading the event and writing its line, so a loop stalled in fsync
shows as lateness that grows while the changes queue up.

Scenarios, each run with fsync at 0 ms and at --fsync-ms, side by side:

  dir each     --dir (object layout) over 200 ConfigMaps, one file changing
               per change; --dir-sync each: every file fsynced before its
               rename and every directory after, inside the event (the
               behaviour before batching);
  dir batch    the same with --dir-sync batch (the default);
  state 1k     --state-dir --state-interval 1 over 1,000 ConfigMaps of 1 KiB:
               the first write after the sync is a snapshot, the later ones
               journal groups; their own log lines give the part of each
               write spent in the loop; with --state-sync inline (fsync and
               rename inside the loop, the behaviour before) and child (the
               default: in a short-lived child process);
  state 10k    the same over 10,000 (the build of `make relist-variant`,
               skipped with a note when it is not built).

Prints a Markdown table and writes DIR/stall.json (default build/bench).
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

MARK = re.compile(rb"stall-(\d+)-")


class Kreflect:
    def __init__(self, binary, srv, work, extra, fsync_ms):
        self.err_path = os.path.join(work, "kreflect.err")
        cmd = [binary, "--server", srv.ready["server"], "--certificate-authority", srv.ready["ca"],
               "--token-file", srv.ready["token_file"], "-v", "1"] + list(extra) + ["configmaps"]
        env = dict(os.environ, HOME=work)
        env.pop("KREFLECT_FAULT_FSYNC_MS", None)
        if fsync_ms:
            env["KREFLECT_FAULT_FSYNC_MS"] = str(fsync_ms)
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL,
                                     env=env)
        self.seen = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.monotonic()
            if b'"type":"SYNCED"' in raw:
                self.synced.set()
            m = MARK.search(raw)
            if m:
                with self.lock:
                    self.seen.setdefault(int(m.group(1)), now)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)
        self.err.close()

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def scenario(binary, n, extra, fsync_ms, changes, gap_ms, out, tag, size):
    work = os.path.join(out, "stall-%s-%d" % (tag.replace(" ", "-"), fsync_ms))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "server"))
    srv = ServerProcess(["--seed", "1"], workdir=os.path.join(work, "server"), timeout=60)
    try:
        srv.control.bulk("configmaps", "default", n, size=size)
        names = [k.rsplit("/", 1)[1] for k in sorted(srv.control.state(resource="configmaps",
                                                                        namespace="default")["objects"])]
        extra = [a.replace("@WORK@", work) for a in extra]
        kr = Kreflect(binary, srv, work, extra, fsync_ms)
        if not kr.synced.wait(300):
            raise SystemExit("stall.py: %s did not sync: %s" % (tag, kr.stderr()[-400:]))
        time.sleep(0.5)
        sent = {}
        t0 = time.monotonic()
        for i in range(changes):
            at = t0 + i * gap_ms / 1000.0
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent[i] = time.monotonic()
            srv.control.update("configmaps", "default", names[(i * 7) % len(names)],
                               data={"v": "stall-%d-" % i})
        deadline = time.monotonic() + 120 + changes * (fsync_ms * 4) / 1000.0
        while time.monotonic() < deadline:
            with kr.lock:
                if len(kr.seen) >= changes:
                    break
            time.sleep(0.05)
        log = kr.stderr()
        kr.stop()
    finally:
        srv.stop()
    with kr.lock:
        late = [(kr.seen[i] - sent[i]) * 1000.0 for i in sent if i in kr.seen]
    # Each write's time, and (since the child commits) the part of it the loop spent.
    writes = [(m.group(1), int(m.group(3)) if m.group(3) else int(m.group(2))) for m in
              re.finditer(r"state: (snapshot|journal)\b[^\n]*? bytes in (\d+) ms(?:, (-?\d+) in the loop)?", log)]
    return {
        "changes": changes, "delivered": len(late),
        "max_ms": max(late) if late else None, "median_ms": statistics.median(late) if late else None,
        "snapshot_ms": [ms for k, ms in writes if k == "snapshot"],
        "journal_ms": [ms for k, ms in writes if k == "journal"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsync-ms", type=int, default=100)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--gap-ms", type=int, default=50)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--only", default="", help="comma-separated scenario tags (dir-each, dir-batch, state-1k, state-10k: both modes)")
    ap.add_argument("--baseline", action="store_true",
                    help="for a binary without --dir-sync (before batching): the dir scenario without the flag")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    small = os.path.join(ROOT, "build", "kreflect")
    big = os.path.join(ROOT, "build", "x86_64-relist", "kreflect")
    dir_args = ["--dir", "@WORK@/files", "--dir-layout", "object"]
    state_args = ["--state-dir", "@WORK@/state", "--state-interval", "1"]
    scen = [
        ("dir-each", small, 200, dir_args + ["--dir-sync", "each"], 256),
        ("dir-batch", small, 200, dir_args + ["--dir-sync", "batch"], 256),
        ("state-1k inline", small, 1000, state_args + ["--state-sync", "inline"], 1024),
        ("state-1k child", small, 1000, state_args + ["--state-sync", "child"], 1024),
        ("state-10k inline", big, 10000, state_args + ["--state-sync", "inline"], 1024),
        ("state-10k child", big, 10000, state_args + ["--state-sync", "child"], 1024),
    ]
    if a.baseline:
        scen = [(t.split()[0], b, n, [x for x in e if x not in ("--dir-sync", "each", "batch", "--state-sync",
                                                                "inline", "child")], sz)
                for t, b, n, e, sz in scen if t not in ("dir-batch", "state-1k child", "state-10k child")]
    only = set(filter(None, a.only.split(",")))
    results = {}
    lines = ["fsync slowed by %d ms (KREFLECT_FAULT_FSYNC_MS) against 0 ms; %d changes, one every %d ms; "
             "lateness = change sent -> its line on kreflect's stdout" % (a.fsync_ms, a.changes, a.gap_ms), "",
             "| scenario | fsync +0 ms: max / median lateness | fsync +%d ms: max / median lateness | "
             "state writes at +%d ms: ms of each in the loop |" % (a.fsync_ms, a.fsync_ms),
             "|---|---:|---:|---|"]
    for tag, binary, n, extra, size in scen:
        if only and tag not in only and tag.split()[0] not in only:
            continue
        if not os.access(binary, os.X_OK):
            lines.append("| %s | not run: %s is not built | | |" % (tag, os.path.relpath(binary, ROOT)))
            continue
        r0 = scenario(binary, n, extra, 0, a.changes, a.gap_ms, a.out, tag, size)
        r1 = scenario(binary, n, extra, a.fsync_ms, a.changes, a.gap_ms, a.out, tag, size)
        results[tag] = {"fsync_0": r0, "fsync_slow": r1}

        def cell(r):
            if r["max_ms"] is None:
                return "none delivered"
            miss = "" if r["delivered"] == r["changes"] else " (%d of %d delivered)" % (r["delivered"], r["changes"])
            return "%.0f / %.0f ms%s" % (r["max_ms"], r["median_ms"], miss)
        wr = ""
        if r1["snapshot_ms"] or r1["journal_ms"]:
            wr = "snapshots %s; journal groups %s" % (r1["snapshot_ms"], r1["journal_ms"])
        lines.append("| %s | %s | %s | %s |" % (tag, cell(r0), cell(r1), wr))
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "stall.json"), "w") as f:
        json.dump({"fsync_ms": a.fsync_ms, "changes": a.changes, "gap_ms": a.gap_ms, "results": results}, f, indent=1)
    with open(os.path.join(a.out, "stall.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
