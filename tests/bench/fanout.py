#!/usr/bin/env python3
"""One relay before many watchers (make bench-fanout).

    python3 tests/bench/fanout.py [--kreflect build/kreflect] [--relay build/kreflect]
                                  [--sizes 1,10,100,500] [--real 100] [--changes 30] [--burst 0]
                                  [--scheme http] [--ca FILE] [--token-file FILE] [--tls]

Upstream is the test API server (tests/apiserver/, plain HTTP, no auth, 100 ConfigMaps of
256 bytes). For each number of downstream watchers W, two runs:

- direct: the W watchers watch the upstream themselves;
- relay:  one kreflect (--listen) mirrors the upstream, and the W watchers watch it.

Watchers are real downstream kreflect processes (`kreflect --server URL configmaps`,
output on a pipe) up to --real of them; beyond that, raw HTTP/1.1 watch connections
from the current resourceVersion, read by one selector loop in this process (as
serve_load.py does). With the defaults: 1, 10 and 100 are all kreflects; 500 is 100
kreflects and 400 raw watches.

Once every watcher is synced, one ConfigMap is changed --changes times, one change at a
time: the next waits until every watcher has the previous one. Reported per run:

- the requests and response bytes the upstream logged (headers included; an open watch's
  bytes so far) from the first watcher's start to the last change;
- the relay's CPU for the changes (/proc/PID/schedstat, ns), per event per watcher;
- the relay's RssAnon once it has synced, before any watcher (idle), and its VmHWM and
  RssAnon after the changes (/proc/PID/status);
- from an upstream change (the control call's return) to the last watcher holding it:
  median and max over the changes.

With --burst M, M more changes then go back to back, none waited for: the relay's CPU per
event per watcher for them and the time from the upstream accepting the last to the last
watcher holding it. Paced, each change is one wake-up of the relay; in a burst one wake-up
carries many, so what the relay spends per wake-up is shared among them.

--scheme/--ca/--token-file are passed to the relay's downstreams, for a relay that
serves TLS or wants a token (the relay itself always reaches the upstream over plain
HTTP); --tls makes the relay serve TLS with the test server's certificate and token and
sets the three. The table goes to stdout (Markdown) and build/bench/fanout.{md,json}
(fanout-callgrind.{md,json} with --callgrind, whose CPU and memory columns are valgrind's). Every wait
is bounded; a run whose watchers do not all sync or see a change is reported as such.
"""

import argparse
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess, free_port  # noqa: E402

NS = "/api/v1/namespaces/default/configmaps"
PROBE = "fanout-probe"


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def user_sys_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]), int(parts[12])


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise RuntimeError("timed out after %ss waiting for %s" % (timeout, what))


class Watchers:
    """Readers of every watcher, one thread: kreflect stdout pipes and raw sockets.
    Each watcher's stream is searched for the marker of the change being waited for
    (its resourceVersion); seen[i] is when watcher i had it."""

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.procs = []
        self.socks = []
        self.tails = []
        self.synced = []
        self.ended = []
        self.marker = None
        self.seen = []
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def _add(self, fileobj, ready):
        with self.lock:
            i = len(self.tails)
            self.tails.append(b"")
            self.synced.append(ready)
            self.ended.append(False)
            self.seen.append(None)
        self.sel.register(fileobj, selectors.EVENT_READ, i)
        return i

    def add_kreflect(self, cmd, log):
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        os.set_blocking(p.stdout.fileno(), False)
        self.procs.append(p)
        self._add(p.stdout, False)

    def add_raw(self, port, rv, headers=""):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(("GET %s?watch=1&resourceVersion=%s&allowWatchBookmarks=true HTTP/1.1\r\nHost: x\r\n%s\r\n"
                   % (NS, rv, headers)).encode())
        s.setblocking(False)
        self.socks.append(s)
        self._add(s, False)

    def expect(self, rv):
        with self.lock:
            self.marker = ('"resourceVersion":"%s"' % rv).encode()
            self.seen = [None] * len(self.seen)

    def run(self):
        while not self.stop:
            try:
                ready = self.sel.select(0.2)
            except (OSError, ValueError):
                continue
            for key, _ in ready:
                i = key.data
                try:
                    b = key.fileobj.read(1 << 20) if hasattr(key.fileobj, "read") else key.fileobj.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    b = b""
                if b is None:
                    continue
                if not b:
                    self.ended[i] = True
                    self.sel.unregister(key.fileobj)
                    continue
                now = time.monotonic()
                data = self.tails[i] + b
                with self.lock:
                    if not self.synced[i] and (b'"type":"SYNCED"' in data or b" 200 OK\r\n" in data):
                        self.synced[i] = True
                    if self.marker and self.seen[i] is None and self.marker in data:
                        self.seen[i] = now
                self.tails[i] = data[-96:]

    def all_synced(self):
        with self.lock:
            return all(self.synced)

    def all_seen(self):
        with self.lock:
            return all(t is not None for t in self.seen)

    def close(self):
        self.stop = True
        self.t.join(2)
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        for s in self.socks:
            s.close()


def port_ready(port):
    """/readyz of a kreflect --listen answers 200."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def tls_ready(port):
    """The relay's TLS port accepts a connection (its /readyz needs the token)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def start_relay(binary, upstream_url, port, workdir, max_conns, callgrind=False, extra=()):
    err = open(os.path.join(workdir, "relay.err"), "wb")
    pre = ["valgrind", "--tool=callgrind", "--callgrind-out-file=%s/callgrind.%%p" % workdir] if callgrind else []
    p = subprocess.Popen(pre + [binary, "--server", upstream_url, "-o", "none", "--listen", "127.0.0.1:%d" % port,
                          "--listen-max-conns", str(max_conns),
                          "-v", "1"] + list(extra) + ["configmaps"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    wait_for(lambda: port_ready(port) if not extra else p.poll() is None and tls_ready(port),
             120 if callgrind else 20, "the relay to be ready")
    return p


def callgrind_counts(pid, workdir, events):
    """Instructions the relay ran in user space for the changes (poll()'s work in the
    kernel is not in them: that is the system CPU column), per event per watcher."""
    subprocess.run(["callgrind_control", "--dump", str(pid)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    dumps = sorted((f for f in os.listdir(workdir) if f.startswith("callgrind.%d." % pid)),
                   key=lambda f: os.path.getmtime(os.path.join(workdir, f)))
    total = 0
    path = os.path.join(workdir, dumps[-1])
    with open(path) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    return {"relay_instructions": total, "relay_instructions_per_event_watcher": round(total / events) if events else None}


def one_run(a, srv, workdir, mode, n):
    up_url = srv.ready["server"]
    ctl = srv.control
    relay = None
    before = ctl.log()
    since = before[-1]["id"] if before else 0
    target_port = srv.ready["port"]
    target_url = up_url
    if mode == "relay":
        rport = free_port()
        relay = start_relay(a.relay, up_url, rport, workdir, a.relay_max_conns, a.callgrind, a.relay_tls)
        target_port = rport
        target_url = "%s://127.0.0.1:%d" % (a.scheme, rport)
    w = Watchers()
    row = {"mode": mode, "watchers": n}
    if relay:
        time.sleep(0.3)
        row["relay_idle_rssanon_kb"] = status_kb(relay.pid, "RssAnon")
    try:
        real = min(n, a.real)
        errlog = open(os.path.join(workdir, "downstream-%s-%d.err" % (mode, n)), "wb")
        down = [a.kreflect, "--server", target_url, "-v", "0"]
        if mode == "relay" and a.ca:
            down += ["--certificate-authority", a.ca]
        if mode == "relay" and a.token_file:
            down += ["--token-file", a.token_file]
        t0 = time.monotonic()
        for _ in range(real):
            w.add_kreflect(down + ["configmaps"], errlog)
        rv = ctl.rv() if n > real else None
        for _ in range(n - real):
            w.add_raw(target_port, rv)
        wait_for(w.all_synced, 60 + n * 0.2, "%d watchers to sync" % n)
        row["sync_seconds"] = round(time.monotonic() - t0, 2)
        time.sleep(0.3)
        if relay and a.callgrind:
            subprocess.run(["callgrind_control", "--zero", str(relay.pid)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
        cpu0 = cpu_ns(relay.pid) if relay else 0
        us0 = user_sys_ticks(relay.pid) if relay else (0, 0)
        lat = []
        missed = 0
        for k in range(a.changes):
            # One writer: the change's resourceVersion is the next one. The readers look
            # for it before it exists, so no watcher can have it unnoticed.
            want = str(int(ctl.rv()) + 1)
            w.expect(want)
            t = time.monotonic()
            r = ctl.update("configmaps", "default", PROBE, data={"seq": str(k)})
            if r["resourceVersion"] != want:
                raise RuntimeError("change %d got resourceVersion %s, not %s" % (k, r["resourceVersion"], want))
            try:
                wait_for(w.all_seen, 10, "every watcher to see change %d" % k)
            except RuntimeError:
                missed += 1
                continue
            with w.lock:
                lat.append(max(w.seen) - t)
        cpu1 = cpu_ns(relay.pid) if relay else 0
        us1 = user_sys_ticks(relay.pid) if relay else (0, 0)
        if relay and a.callgrind:
            row.update(callgrind_counts(relay.pid, workdir, a.changes * n))
        if a.burst:
            # The same ConfigMap changed --burst times back to back, nobody waited for:
            # the relay reads many events per wake-up (a steady busy stream).
            first = int(ctl.rv()) + 1
            want = str(first + a.burst - 1)
            w.expect(want)
            bc0 = cpu_ns(relay.pid) if relay else 0
            for k in range(a.burst):
                r = ctl.update("configmaps", "default", PROBE, data={"burst": str(k)})
            if r["resourceVersion"] != want:
                raise RuntimeError("burst ended at resourceVersion %s, not %s" % (r["resourceVersion"], want))
            t = time.monotonic()
            try:
                wait_for(w.all_seen, 30 + n * 0.1, "every watcher to see the burst's last change")
                with w.lock:
                    row["burst_last_ms"] = round((max(w.seen) - t) * 1000, 1)
            except RuntimeError:
                row["burst_missed"] = True
            if relay:
                row["burst_cpu_us_per_event_watcher"] = round((cpu_ns(relay.pid) - bc0) / 1e3 / (a.burst * n), 2)
            row["burst"] = a.burst
        entries = ctl.log(since=since)
        row.update({
            "real_kreflects": real, "raw_watches": n - real, "changes": a.changes, "missed_changes": missed,
            "upstream_requests": len(entries),
            "upstream_lists": sum(1 for e in entries if not e.get("watch")),
            "upstream_watches": sum(1 for e in entries if e.get("watch")),
            "upstream_bytes": sum(e.get("bytes") or 0 for e in entries),
            "latency_median_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
            "latency_max_ms": round(max(lat) * 1000, 1) if lat else None,
        })
        if relay:
            row["relay_cpu_ms"] = round((cpu1 - cpu0) / 1e6, 1)
            clk = os.sysconf("SC_CLK_TCK")
            row["relay_user_ms"] = round((us1[0] - us0[0]) * 1000 / clk)
            row["relay_sys_ms"] = round((us1[1] - us0[1]) * 1000 / clk)
            row["relay_cpu_us_per_event_watcher"] = round((cpu1 - cpu0) / 1e3 / (a.changes * n), 2)
            row["relay_vmhwm_kb"] = status_kb(relay.pid, "VmHWM")
            row["relay_rssanon_kb"] = status_kb(relay.pid, "RssAnon")
        return row
    finally:
        w.close()
        if relay:
            relay.kill()
            relay.wait()


def table(rows):
    out = ["| watchers | kreflects + raw | upstream requests direct / relay | upstream bytes direct / relay "
           "| relay CPU µs per event per watcher (user / system ms) | relay VmHWM / RssAnon kB (idle RssAnon) "
           "| change to last watcher, "
           "median / max ms, direct | same, relay |",
           "|---:|---|---|---|---:|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault(r["watchers"], {})[r["mode"]] = r
    for n in sorted(by):
        d, r = by[n].get("direct", {}), by[n].get("relay", {})

        def g(x, k):
            v = x.get(k)
            return "-" if v is None else ("{:,}".format(v) if isinstance(v, int) else str(v))
        out.append("| %d | %s + %s | %s / %s | %s / %s | %s | %s / %s (%s) | %s / %s | %s / %s |" % (
            n, g(r or d, "real_kreflects"), g(r or d, "raw_watches"),
            g(d, "upstream_requests"), g(r, "upstream_requests"), g(d, "upstream_bytes"), g(r, "upstream_bytes"),
            "%s (%s / %s)" % (g(r, "relay_cpu_us_per_event_watcher"), g(r, "relay_user_ms"), g(r, "relay_sys_ms")),
            g(r, "relay_vmhwm_kb"), g(r, "relay_rssanon_kb"), g(r, "relay_idle_rssanon_kb"),
            g(d, "latency_median_ms"), g(d, "latency_max_ms"), g(r, "latency_median_ms"), g(r, "latency_max_ms")))
    bu = [r for r in rows if r.get("burst")]
    if bu:
        out += ["", "A burst (%d changes back to back, not waited for; the relay's CPU per event per watcher, and "
                "the time from the upstream accepting the last change to the last watcher holding it):"
                % bu[0]["burst"], "",
                "| watchers | mode | relay CPU µs per event per watcher | last change to last watcher ms |",
                "|---:|---|---:|---:|"]
        out += ["| %d | %s | %s | %s |" % (r["watchers"], r["mode"], r.get("burst_cpu_us_per_event_watcher", "-"),
                                          "missed" if r.get("burst_missed") else r.get("burst_last_ms"))
                for r in bu]
    cg = [r for r in rows if r.get("relay_instructions")]
    if cg:
        out += ["", "Under callgrind (user-space instructions of the relay for the changes; poll() in the kernel "
                "is not in them):", "",
                "| watchers | instructions per event per watcher |", "|---:|---:|"]
        out += ["| %d | {:,} |".format(r["relay_instructions_per_event_watcher"]) % r["watchers"] for r in cg]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--relay", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--relay-max-conns", type=int, default=512, help="the relay build's KR_SERVE_MAX_CONNS")
    ap.add_argument("--sizes", default="1,10,100,500")
    ap.add_argument("--real", type=int, default=100, help="real kreflect watchers at most (the rest raw)")
    ap.add_argument("--changes", type=int, default=30)
    ap.add_argument("--burst", type=int, default=0,
                    help="after the paced changes, this many more back to back (many events per wake-up)")
    ap.add_argument("--modes", default="direct,relay")
    ap.add_argument("--callgrind", action="store_true",
                    help="run the relay under callgrind: instructions per event per watcher, poll()'s share")
    ap.add_argument("--scheme", default="http")
    ap.add_argument("--ca")
    ap.add_argument("--token-file")
    ap.add_argument("--tls", action="store_true",
                    help="the relay serves TLS (the test server's certificate, its token); its kreflect "
                         "watchers connect with its CA and token; raw watchers are plain HTTP only, so "
                         "--tls takes at most --real watchers")
    a = ap.parse_args()
    a.relay_tls = ()
    if a.tls and any(int(x) > a.real for x in a.sizes.split(",")):
        sys.exit("fanout: --tls takes at most --real (%d) watchers, all kreflects" % a.real)
    for b in (a.kreflect, a.relay):
        if not os.access(b, os.X_OK):
            sys.exit("fanout: %s is missing: make bench-fanout builds it" % b)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kreflect-fanout-") as workdir:
        updir = os.path.join(workdir, "up")
        os.makedirs(updir)
        with ServerProcess(["--plain-http", "--no-auth", "--initial", "100", "--initial-size", "256"],
                           workdir=updir) as srv:
            srv.control.create("configmaps", "default", PROBE, data={"seq": "-"})
            if a.tls:
                a.scheme, a.ca, a.token_file = "https", os.path.join(updir, "ca.crt"), srv.ready["token_file"]
                a.relay_tls = ("--listen-cert-file", os.path.join(updir, "server.crt"),
                               "--listen-key-file", os.path.join(updir, "server.key"),
                               "--listen-token-file", srv.ready["token_file"])
            for n in [int(x) for x in a.sizes.split(",")]:
                for mode in a.modes.split(","):
                    t0 = time.monotonic()
                    try:
                        row = one_run(a, srv, workdir, mode, n)
                    except RuntimeError as e:
                        row = {"mode": mode, "watchers": n, "error": str(e)}
                    row["run_seconds"] = round(time.monotonic() - t0, 1)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
    md = table(rows)
    print(md)
    out = os.path.join(ROOT, "build", "bench")
    os.makedirs(out, exist_ok=True)
    name = "fanout-callgrind" if a.callgrind else "fanout"
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if any("error" in r or r.get("missed_changes") or r.get("burst_missed") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
