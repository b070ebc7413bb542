#!/usr/bin/env python3
"""The local endpoint under load: the reflector's events/s with and without 50
local watchers (make bench-serve).

    python3 tests/bench/serve_load.py [--kreflect build/kreflect] [--events N] [--reps R]
                                      [--watchers W]

The test API server pre-serialises N MODIFIED events of one 1 KiB ConfigMap and
sends them down kreflect's open watch as fast as TLS allows (its bench mode, as
`make bench` uses for throughput). kreflect runs with --listen and -o jsonl into
a pipe this script drains; its rate is N / (time of the Nth MODIFIED line -
time the server started the stream). Runs alternate between 0 local watchers and
W local watchers (raw HTTP/1.1 watches on kreflect from the stream's starting
resourceVersion, read by one selector loop in this process), R runs each, and
the medians are compared in one run, side by side. Also reported: kreflect's
CPU for the stream, what the local watchers received, and how many kreflect
dropped for falling behind its history ring.

First, a steady stream: every 0.1 s each of 100 labelled ConfigMaps changes once
(1,000 changes/s) for --seconds, with 0 and with W local watchers; reported are
kreflect's CPU over it, how long after the last change kreflect printed it, and
how many watchers received every change.
"""

import argparse
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess, free_port  # noqa: E402

NS = "/api/v1/namespaces/default/configmaps"
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / CLK


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def http_get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        out = b""
        while True:
            b = c.recv(65536)
            if not b:
                return out
            out += b


def metric(port, name):
    body = http_get(port, "/metrics").split(b"\r\n\r\n", 1)[1].decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


class Watchers:
    """W raw watches on kreflect, read by one thread; counts MODIFIED events per watch."""

    def __init__(self, port, n, rv):
        self.sel = selectors.DefaultSelector()
        self.counts = [0] * n
        self.tails = [b""] * n
        self.ended = [False] * n
        self.stop = False
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(("GET %s?watch=1&resourceVersion=%s HTTP/1.1\r\nHost: x\r\n\r\n" % (NS, rv)).encode())
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ, i)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        mark = b'"type":"MODIFIED"'
        while not self.stop:
            for key, _ in self.sel.select(0.2):
                i = key.data
                try:
                    b = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                except OSError:
                    b = b""
                if not b:
                    self.ended[i] = True
                    self.sel.unregister(key.fileobj)
                    key.fileobj.close()
                    continue
                data = self.tails[i] + b
                self.counts[i] += data.count(mark)
                self.tails[i] = data[-(len(mark) - 1):]

    def close(self):
        self.stop = True
        self.t.join(5)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def one_run(srv, a, nwatch, rep, work):
    ctl = srv.control
    port = free_port()
    err = open(os.path.join(work, "kreflect-%d-%d.err" % (nwatch, rep)), "wb")
    kr = subprocess.Popen([a.kreflect, "--server", srv.ready["server"], "--certificate-authority",
                           srv.ready["ca"], "--token-file", srv.ready["token_file"], "-v", "0",
                           "--listen", "127.0.0.1:%d" % port, "configmaps"],
                          stdout=subprocess.PIPE, stderr=err, bufsize=0)
    w = None
    try:
        buf = b""
        while b'"SYNCED"' not in buf:
            b = kr.stdout.read(65536)
            if not b:
                raise RuntimeError("kreflect exited before SYNCED")
            buf += b
        ctl.wait_watches(1, timeout=30, match="configmaps")
        time.sleep(0.5)
        rv = str(ctl.rv())
        rss0 = rss_kb(kr.pid)
        if nwatch:
            w = Watchers(port, nwatch, rv)
            deadline = time.monotonic() + 10
            while metric(port, "kreflect_serve_watchers") != nwatch:
                if time.monotonic() > deadline:
                    raise RuntimeError("local watchers did not open")
                time.sleep(0.05)
        rss1 = rss_kb(kr.pid)
        mark = max([e["id"] for e in ctl.log()] or [0])
        box = {}

        def bench():
            box["r"] = ctl.bench(count=a.events, size=1024, end="open", match="watch=")
        t = threading.Thread(target=bench, daemon=True)
        t.start()
        c0 = cpu_seconds(kr.pid)
        seen, tail, key = 0, b"", b'"type":"MODIFIED"'
        while seen < a.events:
            b = kr.stdout.read(1 << 20)
            if not b:
                raise RuntimeError("kreflect exited during the stream")
            data = tail + b
            seen += data.count(key)
            tail = data[-(len(key) - 1):]
        t_end = time.time()
        cpu = cpu_seconds(kr.pid) - c0
        t.join(60)
        start = None
        for e in ctl.log(since=mark):
            if e.get("bench"):
                start = e["time"]
        if start is None:
            raise RuntimeError("no watch took the bench stream")
        secs = t_end - start
        res = {"events_per_s": a.events / secs, "seconds": secs, "cpu": cpu, "rss_before_kb": rss0,
               "rss_watchers_open_kb": rss1, "rss_after_stream_kb": rss_kb(kr.pid)}
        if w:
            time.sleep(1.0)    # let the readers finish what was sent
            res["dropped"] = metric(port, "kreflect_serve_watchers_dropped_total")
            res["watcher_events_median"] = statistics.median(w.counts)
            res["watcher_events_min"] = min(w.counts)
            res["watchers_complete"] = sum(1 for c in w.counts if c >= a.events)
        return res
    finally:
        if w:
            w.close()
        kr.send_signal(signal.SIGTERM)
        try:
            kr.wait(10)
        except subprocess.TimeoutExpired:
            kr.kill()
            kr.wait()


def steady_run(srv, a, nwatch, rep, work):
    """A steady upstream stream: every 0.1 s each of 100 ConfigMaps changes once
    (1,000 events/s) for a.seconds; kreflect's CPU over it, how long after the
    last change kreflect printed it, and what the local watchers received."""
    ctl = srv.control
    port = free_port()
    err = open(os.path.join(work, "steady-%d-%d.err" % (nwatch, rep)), "wb")
    kr = subprocess.Popen([a.kreflect, "--server", srv.ready["server"], "--certificate-authority",
                           srv.ready["ca"], "--token-file", srv.ready["token_file"], "-v", "0",
                           "-l", "steady=1", "--listen", "127.0.0.1:%d" % port, "configmaps"],
                          stdout=subprocess.PIPE, stderr=err, bufsize=0)
    w = None
    counter = {"seen": 0, "t_last": None}
    stop = threading.Event()

    def drain():
        tail, key = b"", b'"type":"MODIFIED"'
        while True:
            b = kr.stdout.read(1 << 16)
            if not b:
                return
            data = tail + b
            n = data.count(key)
            if n:
                counter["seen"] += n
                counter["t_last"] = time.monotonic()
            tail = data[-(len(key) - 1):]
    try:
        buf = b""
        while b'"SYNCED"' not in buf:
            b = kr.stdout.read(65536)
            if not b:
                raise RuntimeError("kreflect exited before SYNCED")
            buf += b
        threading.Thread(target=drain, daemon=True).start()
        ctl.wait_watches(1, timeout=30, match="configmaps")
        time.sleep(0.5)
        if nwatch:
            w = Watchers(port, nwatch, str(ctl.rv()))
            deadline = time.monotonic() + 10
            while metric(port, "kreflect_serve_watchers") != nwatch:
                if time.monotonic() > deadline:
                    raise RuntimeError("local watchers did not open")
                time.sleep(0.05)
        c0 = cpu_seconds(kr.pid)
        sent, t0 = 0, time.monotonic()
        ticks = int(a.seconds * 10)
        for i in range(ticks):
            sent += ctl.touch("configmaps", "default", selector="steady=1", count=1)["updated"]
            t_sent = time.monotonic()      # the last change is made once its call returns
            nxt = t0 + (i + 1) * 0.1
            time.sleep(max(0.0, nxt - time.monotonic()))
        deadline = t_sent + 30
        while counter["seen"] < sent and time.monotonic() < deadline:
            time.sleep(0.01)
        lag = (counter["t_last"] or t_sent) - t_sent
        cpu = cpu_seconds(kr.pid) - c0
        res = {"sent": sent, "seen": counter["seen"], "offered_per_s": sent / (ticks * 0.1), "lag": lag,
               "cpu": cpu}
        if w:
            time.sleep(1.0)
            res["dropped"] = metric(port, "kreflect_serve_watchers_dropped_total")
            res["watcher_events_min"] = min(w.counts)
            res["watchers_complete"] = sum(1 for c in w.counts if c >= sent)
        return res
    finally:
        stop.set()
        if w:
            w.close()
        kr.send_signal(signal.SIGTERM)
        try:
            kr.wait(10)
        except subprocess.TimeoutExpired:
            kr.kill()
            kr.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--watchers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the steady stream")
    a = ap.parse_args()
    work = os.path.join(ROOT, "build", "bench", "serve")
    os.makedirs(work, exist_ok=True)
    srv = ServerProcess(["--bookmark-interval", "0", "--history", "1000"],
                        workdir=tempfile.mkdtemp(prefix="serve-load-", dir=work))
    srv.control.create("configmaps", "default", "bench", data={"payload": "x" * 1024})
    srv.control.bulk("configmaps", "default", 100, size=1024, labels={"steady": "1"})
    runs = {0: [], a.watchers: []}
    steady = {0: [], a.watchers: []}
    try:
        for rep in range(a.reps):
            for n in (0, a.watchers):
                r = steady_run(srv, a, n, rep, work)
                steady[n].append(r)
                extra = ""
                if n:
                    extra = ("; local watchers: %d of %d got all %d, fewest %d, %d dropped"
                             % (r["watchers_complete"], n, r["sent"], r["watcher_events_min"], r["dropped"]))
                print("steady rep %d, %2d local watchers: %d changes at %.0f/s; kreflect printed %d, the last "
                      "%.3f s after the last change; kreflect CPU %.2f s%s"
                      % (rep + 1, n, r["sent"], r["offered_per_s"], r["seen"], r["lag"], r["cpu"], extra),
                      flush=True)
        for rep in range(a.reps):
            for n in (0, a.watchers):
                r = one_run(srv, a, n, rep, work)
                runs[n].append(r)
                extra = ""
                if n:
                    extra = ("; local watchers: median %d events, min %d, %d of %d got all %d, %d dropped"
                             % (r["watcher_events_median"], r["watcher_events_min"], r["watchers_complete"], n,
                                a.events, r["dropped"]))
                print("rep %d, %2d local watchers: %d events in %.2f s: %.0f events/s, kreflect CPU %.2f s%s; "
                      "kreflect VmRSS %d kB synced, %d kB with the watches open, %d kB after the stream"
                      % (rep + 1, n, a.events, r["seconds"], r["events_per_s"], r["cpu"], extra,
                         r["rss_before_kb"], r["rss_watchers_open_kb"], r["rss_after_stream_kb"]), flush=True)
    finally:
        srv.stop()
    m0 = statistics.median(r["events_per_s"] for r in runs[0])
    m1 = statistics.median(r["events_per_s"] for r in runs[a.watchers])
    c0 = statistics.median(r["cpu"] for r in runs[0])
    c1 = statistics.median(r["cpu"] for r in runs[a.watchers])
    print("| local watchers | kreflect events/s (median of %d) | kreflect CPU for %d events |" % (a.reps, a.events))
    print("|---:|---:|---:|")
    print("| 0 | %.0f | %.2f s |" % (m0, c0))
    print("| %d | %.0f | %.2f s |" % (a.watchers, m1, c1))
    print("ratio with:without = %.2f (events/s), %.2f (CPU)" % (m1 / m0, c1 / c0))
    s0 = statistics.median(r["cpu"] for r in steady[0])
    s1 = statistics.median(r["cpu"] for r in steady[a.watchers])
    l0 = statistics.median(r["lag"] for r in steady[0])
    l1 = statistics.median(r["lag"] for r in steady[a.watchers])
    print("steady stream of %.0f s at 1,000 changes/s: kreflect CPU %.2f s without, %.2f s with %d local "
          "watchers (%.2fx); last change printed %.3f s / %.3f s after it was made"
          % (a.seconds, s0, s1, a.watchers, s1 / s0 if s0 else float("nan"), l0, l1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
