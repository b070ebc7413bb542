#!/usr/bin/env python3
"""make bench, the real-server part: kreflect beside client-go, client-node and
python3-kubernetes against the real API server of tests/realapi/ (the
k8s.io/apiserver library, its watch cache, etcd).

    python3 tests/realapi/bench.py [--counts 1000,10000,100000] [--events N]
                                   [--clients kreflect,client-go,node,python] [--out DIR]

One etcd and two API servers, A (the clients') and B, for the whole run.

  sync    for each N: N ConfigMaps of 1 KiB written into a namespace of their
          own, then each client in turn syncs them from A's watch cache, from
          exec to its SYNCED line: seconds, peak RSS (VmHWM of the client
          process itself, /proc/PID/status, read at the SYNCED line) and CPU
          seconds (user + system of the client process, all its threads, from
          wait4() when it is killed right after that line). kreflect
          runs with its defaults (watch-list) up to 10,000 objects and with
          --memory 256M for more (the defaults index 16,384 objects); the
          peers with their libraries' defaults (client-go's Reflector: a
          LIST at resourceVersion 0, then a watch). Before the clients start,
          a fence waits until A's watch cache holds every object written.
  stream  the four clients together, synced on --stream-objects ConfigMaps,
          then --events updates of them written as fast as the store takes
          them: for each client the MODIFIED lines per second from the first
          write to its last line, and its CPU seconds per event (CPU after the
          last line minus CPU at the sync). The writer's own rate is printed as
          the ceiling: no client can see events faster than they are written.

The objects are written by the server program itself (--bench-fill and
--bench-modify: through its registry store into etcd from --writers
goroutines, default 128, no HTTP), so 100,000 take seconds, not minutes.
Each client's SYNCED count is checked against N (and kreflect's is not
partial). Prints a Markdown table with the ratio of each figure from the
smallest to the largest N and writes DIR/realapi.md and DIR/realapi.json
(default DIR build/bench), each client's stderr in DIR/realapi-logs/. Exit
status: 0 when every measurement ran, 1 when a client failed or missed
events, 2 on a missing prerequisite. Needs make realapi, build/kreflect,
make peers and make bench-packages.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402
sys.path.insert(0, os.path.join(run.ROOT, "tests", "bench"))
import bench as B  # noqa: E402

e2e = run.e2e
KREFLECT = os.path.join(run.ROOT, "build", "kreflect")
BIG = 10000                      # above this, kreflect gets --memory 256M
BIG_FLAGS = ["--memory", "256M"]
SYNC_TIMEOUT = 900
CLIENTS = ("kreflect", "client-go", "node", "python")


def in_namespace(argv, ns):
    """A peer's command line (tests/bench/bench.py builds it for "default") for ns."""
    argv = list(argv)
    i = argv.index("-n")
    argv[i + 1] = ns
    return argv


class RealBench:
    def __init__(self, a):
        self.a = a
        self.logs = os.path.join(a.out, "realapi-logs")
        shutil.rmtree(self.logs, ignore_errors=True)
        os.makedirs(self.logs)
        self.results = {"config": {"counts": a.counts, "events": a.events, "stream_objects": a.stream_objects,
                                   "writers": a.writers,
                                   "payload_bytes": 1024, "nproc": os.cpu_count(),
                                   "loadavg_at_start": os.getloadavg(),
                                   "started": time.strftime("%Y-%m-%d %H:%M:%S")},
                        "sync": [], "stream": [], "fill": []}

    def prerequisites(self):
        missing = [p for p in (run.SERVER, run.ETCD, KREFLECT, B.PEER_GO) if not os.access(p, os.X_OK)]
        if missing:
            B.fail_setup("realapi bench: missing %s (make realapi build/kreflect peers)" % ", ".join(missing))
        # tests/bench/bench.py checks the peers and installs client-node with npm
        ba = argparse.Namespace(reps=1, idle=0, events=0, quick=True, out=os.path.join(self.a.out, "realapi-peers"),
                                kreflect=os.path.join(run.ROOT, "build", "x86_64", "kreflect"),
                                kreflect_10k=KREFLECT, syscalls=False)
        peers = B.Bench(ba)
        peers.prerequisites(parts=("sync",))
        self.peers = peers
        peers.logs = self.logs            # each client's stderr
        self.results["versions"] = dict(peers.results["versions"], client_go="0.32 (make peers)")
        with open(os.path.join(run.RA, "versions.txt")) as f:
            self.results["versions"]["realapi"] = [" ".join(ln.split()[1:]) for ln in f
                                                   if ln.split()[1:2] in (["golang-k8s-apiserver-dev"], ["etcd-server"])]

    def argv(self, name, s, n):
        ready = s.srv.ready
        if name == "kreflect":
            return ([KREFLECT, "--server", ready["server"], "--certificate-authority", ready["ca"],
                     "--token-file", ready["token_file"], "-n", s.ns, "-v", "1"]
                    + (BIG_FLAGS if n > BIG else []) + ["configmaps"])
        return in_namespace(self.peers.clients[name].argv(ready, False, []), s.ns)

    def spawn(self, argv, tag):
        return self.peers.spawn(argv, tag)

    def write(self, ns, fill=0, modify=0, objects=0):
        """The server program writing through its own store: seconds it took."""
        cl = self.cl
        cmd = [run.SERVER, "--etcd-servers", cl.etcd_url, "--secure-port", str(e2e.local_port()),
               "--tls-cert-file", cl.d + "/server.crt", "--tls-private-key-file", cl.d + "/server.key",
               "--token-auth-file", cl.d + "/tokens.csv", "--bench-namespace", ns,
               "--bench-writers", str(self.a.writers)]
        if fill:
            cmd += ["--bench-fill", str(fill)]
        if modify:
            cmd += ["--bench-modify", str(modify), "--bench-objects", str(objects)]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - t0
        if r.returncode != 0:
            raise B.BenchError("bench writer: exit %d: %s" % (r.returncode, r.stderr[-1000:]))
        B.log("%s (%.1f s with the writer's start-up)" % (r.stdout.strip().replace("\n", "; "), took))
        return took

    def fence(self):
        """Waits until A's watch cache holds every write made so far. A LIST at
        resourceVersion 0 (client-go's Reflector) is served from the cache as
        it is: right after 100,000 writes it lagged, and client-go synced 963 of
        1,000. The cache applies etcd's changes in order: once it has an object
        written after the rest, it has the rest."""
        self.fences += 1
        name = "fence-%d" % self.fences
        self.cl.create("bench-fence", name)
        path = "%s?resourceVersion=0" % self.cl.cm_path("bench-fence", name)
        run.wait_until(lambda: json.loads(self.cl.call("GET", path, n="A", raw=True, ok=(200, 404)))
                       .get("kind") == "ConfigMap", 120, "API server A's watch cache to hold " + name, 0.1)

    def fill(self, n, name=None):
        s = run.Case(self.cl, name or "bench-%d" % n)
        took = self.write(s.ns, fill=n)
        self.fence()
        self.results["fill"].append({"objects": n, "seconds": took, "per_second": n / took})
        return s

    def sync_once(self, s, name, n):
        p = self.spawn(self.argv(name, s, n), "sync%d-%s" % (n, name))
        t0 = time.monotonic()
        try:
            pipe = B.SyncPipe(p)
            pipe.read_until(lambda x: x.synced is not None, SYNC_TIMEOUT, "SYNCED line")
            st = B.proc_status(p.pid)
        finally:
            # killed at once: wait4's CPU (to the microsecond, where /proc/PID/stat
            # counts 10 ms ticks) is the sync's and the few milliseconds after it
            _, ru = B.reap(p, 10, signal.SIGKILL)
        cpu = ru.ru_utime + ru.ru_stime
        got = pipe.synced
        if got.get("count") != n or got.get("partial"):
            raise B.BenchError("%s: SYNCED %s, expected a whole mirror of %d" % (p.tag, json.dumps(got), n))
        return {"objects": n, "client": name, "seconds": pipe.t_synced - t0, "cpu_seconds": cpu,
                "peak_rss_bytes": st["VmHWM"]}

    def sync(self):
        for n in self.a.counts:
            s = self.fill(n)
            for name in self.a.clients:
                r = self.sync_once(s, name, n)
                self.results["sync"].append(r)
                B.log("sync %7d %-10s %7.2f s  cpu %7.2f s  peak RSS %7.1f MB"
                      % (n, name, r["seconds"], r["cpu_seconds"], r["peak_rss_bytes"] / B.MB))

    def stream(self):
        n, m = self.a.stream_objects, self.a.events
        s = self.fill(n, "stream-%d" % n)
        procs, pipes = {}, {}
        try:
            for name in self.a.clients:
                procs[name] = self.spawn(self.argv(name, s, n), "stream-%s" % name)
            cpu0 = {}
            for name, p in procs.items():
                sp = B.SyncPipe(p)
                sp.read_until(lambda x: x.synced is not None, SYNC_TIMEOUT, "SYNCED line")
                if sp.synced.get("count") != n:
                    raise B.BenchError("%s: SYNCED %s, expected %d" % (p.tag, json.dumps(sp.synced), n))
                pipes[name] = B.CountPipe(p)
                pipes[name].goal = m
            # every client is synced: read their streams while the writer runs
            errors = {}

            def follow(name):
                try:
                    pipes[name].read_until(lambda x: x.count >= m, self.a.stream_timeout, "%d MODIFIED lines" % m)
                except B.BenchError as e:
                    errors[name] = str(e)
            for name, p in procs.items():
                cpu0[name] = B.proc_cpu(p.pid)
            threads = [threading.Thread(target=follow, args=(name,)) for name in procs]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            wrote = self.write(s.ns, modify=m, objects=n)
            t_wrote = time.monotonic()
            for t in threads:
                t.join()
            self.results["stream_writer"] = {"events": m, "seconds": wrote, "events_per_s": m / wrote}
            for name, p in procs.items():
                pp = pipes[name]
                cpu = B.proc_cpu(p.pid) - cpu0[name]
                r = {"client": name, "events": m, "received": pp.count, "cpu_seconds": cpu,
                     "peak_rss_bytes": B.proc_status(p.pid)["VmHWM"]}
                if pp.t_goal is not None:
                    r.update(seconds=pp.t_goal - t0, events_per_s=m / (pp.t_goal - t0),
                             behind_writer_s=max(0.0, pp.t_goal - t_wrote),
                             cpu_us_per_event=cpu / m * 1e6)
                else:
                    r["error"] = errors.get(name, "fewer lines than events")
                self.results["stream"].append(r)
                B.log("stream %-10s %s" % (name, json.dumps(r)))
        finally:
            for p in procs.values():
                B.reap(p, 10, signal.SIGKILL)

    def run(self):
        e2e.ART = os.path.join(self.a.out, "realapi-cluster")
        shutil.rmtree(e2e.ART, ignore_errors=True)
        os.makedirs(e2e.ART)
        self.cl = run.Cluster(os.path.join(e2e.ART, "cluster"))
        self.cl.namespace("bench-fence")
        self.fences = 0
        try:
            self.sync()
            if self.a.events:
                self.stream()
        finally:
            self.cl.stop()
            e2e.kill_all()


def f_mb(b):
    return "%.1f" % (b / B.MB)


def table(res, counts, clients):
    v = res.get("versions", {})
    out = ["## Real API server (%s; tests/realapi/bench.py)" %
           ", ".join(v.get("realapi", [])), "",
           "ConfigMaps of 1 KiB, synced from the watch cache; kreflect %s for N > %d. "
           "Machine: %d cores, load %.1f at the start." %
           (" ".join(BIG_FLAGS), BIG, res["config"]["nproc"], res["config"]["loadavg_at_start"][0]), ""]
    sync = {(r["objects"], r["client"]): r for r in res["sync"]}
    head = "| figure | N | " + " | ".join(clients) + " |"
    out += [head, "|---|---:|" + "---:|" * len(clients)]
    lo, hi = min(counts), max(counts)
    for key, label, fmt in (("seconds", "sync, seconds", lambda x: "%.2f" % x),
                            ("cpu_seconds", "sync, CPU seconds", lambda x: "%.3f" % x),
                            ("peak_rss_bytes", "sync, peak RSS MB (VmHWM)", f_mb)):
        for n in counts:
            cells = [fmt(sync[(n, c)][key]) if (n, c) in sync else "-" for c in clients]
            out.append("| %s | %s | %s |" % (label, "{:,}".format(n), " | ".join(cells)))
        if lo != hi:
            cells = []
            for c in clients:
                a, b = sync.get((lo, c)), sync.get((hi, c))
                cells.append("×%.1f" % (b[key] / a[key]) if a and b and a[key] else "-")
            out.append("| … grows %s→%s | | %s |" % ("{:,}".format(lo), "{:,}".format(hi), " | ".join(cells)))
        if lo != hi and key == "peak_rss_bytes":
            cells = []
            for c in clients:
                a, b = sync.get((lo, c)), sync.get((hi, c))
                cells.append("%.2f" % ((b[key] - a[key]) / (hi - lo) / 1e3) if a and b else "-")
            out.append("| … KB per object added | | %s |" % " | ".join(cells))
    st = {r["client"]: r for r in res["stream"]}
    if st:
        w = res.get("stream_writer", {})
        ev = "{:,}".format(res["config"]["events"])
        out.append("| stream: %s updates, events/s | %s | %s |" % (
            ev, "{:,}".format(res["config"]["stream_objects"]),
            " | ".join("%.0f" % st[c]["events_per_s"] if "events_per_s" in st.get(c, {}) else "missed"
                       for c in clients)))
        out.append("| stream: CPU µs per event | | %s |" % " | ".join(
            "%.0f" % st[c]["cpu_us_per_event"] if "cpu_us_per_event" in st.get(c, {}) else "-" for c in clients))
        out.append("| stream: last line after the last write, s | | %s |" % " | ".join(
            "%.2f" % st[c]["behind_writer_s"] if "behind_writer_s" in st.get(c, {}) else "-" for c in clients))
        out.append("| stream: peak RSS MB | | %s |" % " | ".join(
            f_mb(st[c]["peak_rss_bytes"]) if c in st else "-" for c in clients))
        if w:
            out += ["", "The writer (the server program, %d goroutines through the store) made the %s updates "
                        "at %.0f/s: the ceiling of every client's events/s." % (res["config"]["writers"], ev, w["events_per_s"])]
    fill = res.get("fill", [])
    if fill:
        out += ["", "Filled: " + ", ".join("%s objects in %.1f s" % ("{:,}".format(f["objects"]), f["seconds"])
                                          for f in fill) + "."]
    return "\n".join(out) + "\n"


def count_list(text):
    """--counts: object counts, comma-separated."""
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError("not a comma-separated list of counts: %r" % text)


def main():
    ap = argparse.ArgumentParser(prog="realapi-bench")
    ap.add_argument("--counts", type=count_list, default=[1000, 10000, 100000])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--stream-objects", type=int, default=1000)
    ap.add_argument("--stream-timeout", type=float, default=300)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--writers", type=int, default=128, help="the writer's goroutines (fill and stream)")
    ap.add_argument("--out", default=os.path.join(run.ROOT, "build", "bench"))
    a = ap.parse_args()
    a.clients = [c for c in a.clients.split(",") if c]
    bad = [c for c in a.clients if c not in CLIENTS]
    if bad or not a.counts or min(a.counts) <= 0 or a.events < 0 or a.stream_objects <= 0 or a.writers <= 0 \
            or a.stream_timeout <= 0:
        B.fail_setup("realapi bench: the clients are %s; --counts, --stream-objects, --writers and "
                     "--stream-timeout are positive, --events is not negative" % ", ".join(CLIENTS))
    os.makedirs(a.out, exist_ok=True)
    rb = RealBench(a)
    rb.prerequisites()
    status = 0
    t0 = time.monotonic()
    try:
        rb.run()
    except B.BenchError as e:
        B.log("FAILED: %s" % e)
        status = 1
    rb.results["seconds"] = time.monotonic() - t0
    if any("error" in r for r in rb.results["stream"]):
        status = 1
    md = table(rb.results, a.counts, a.clients)
    with open(os.path.join(a.out, "realapi.json"), "w") as f:
        json.dump(rb.results, f, indent=1)
    with open(os.path.join(a.out, "realapi.md"), "w") as f:
        f.write(md)
    print(md)
    B.log("real-server part: %.0f s" % rb.results["seconds"])
    return status


if __name__ == "__main__":
    sys.exit(main())
