#!/usr/bin/env python3
"""make bench: kreflect side by side with the clients a user would pick instead.

    python3 tests/bench/bench.py [--quick] [--reps N] [--idle S] [--events N]
                                 [--only PART,...] [--out DIR]

Runs, in one process and against the same test API server (tests/apiserver)
with the same data, kreflect and two peers that print the same JSON lines:

  node    @kubernetes/client-node 1.4.0's informer (tests/bench/peer_node.js),
          installed with npm into build/bench/ (never committed);
  python  Debian's python3-kubernetes: list, then watch.Watch().stream
          (tests/bench/peer_python.py, run by /usr/bin/python3);
  client-go  client-go 0.32's own Reflector (cache.NewReflector, the library's
          defaults: WatchListClient off, paginated LIST then watch) on the dynamic
          client, build/peers/client-go-peer from tests/peers/client-go/ (make
          peers, Go 1.24 and client-go from Debian trixie); its sync is also
          timed with KUBE_FEATURE_WatchListClient=true.

Every client talks TLS to the server and every figure comes from the kernel's
own accounting: /proc/PID/status (VmRSS, VmHWM: the kernel's peak RSS of the
process since its exec) and /proc/PID/stat (utime + stime, every thread),
read while the client runs, wait4()'s rusage for openssl s_client, and the
server's request log for the bytes it sent (HTTP bytes before TLS). Each
figure is the median of --reps runs (default 3). The parts:

  sync        time to the first complete sync of N = 1,000 and 10,000 ConfigMaps
              of 1 KiB (from exec to the SYNCED line on the client's stdout), and
              at that moment its CPU, peak RSS and the bytes sent to it. kreflect
              runs twice: watch-list (its default) and --watch-list off against a
              server that pages by 500. For 10,000 kreflect is the 32 MiB-arena build
              (make relist-variant); the default build holds 4,096 objects.
  idle        the three clients started together against 1,000 ConfigMaps, RSS and
              VmHWM at sync and after --idle seconds of idle watch (default 60),
              CPU used and wake-ups while idle (voluntary context switches of all
              threads, /proc/PID/task/*/status) next to the bookmarks the server
              sent each watch (one every 15 s; idle / 4 when --idle < 60).
  wakeups     the same, with strace -f -C attached to each client for --idle
              seconds: poll/epoll_wait/select calls that could sleep and returned,
              how many of them returned with nothing ready (timer wake-ups).
  throughput  --events MODIFIED events of 1 KiB (default 100,000) pre-serialised by
              the server's bench mode and pushed to each client's watch as fast as
              it reads; events/s and MB/s until the last line is on its stdout.
              The ceiling: openssl s_client reading the same stream to /dev/null.
  callgrind   instructions per event on kreflect's path (socket bytes to store and
              jsonl output) from valgrind --tool=callgrind: the same run with N and
              2N events (N = 5,000), (I(2N) - I(N)) / N, so start-up and shutdown
              cancel out; over TLS and plain HTTP, with the functions that cost
              the most per event. Counts user-space instructions only.
  gzip        the cost of gzip LIST bodies: kreflect --watch-list off --once syncing
              1,000 and 10,000 ConfigMaps of 1 KiB in one LIST (RV "0" answered whole),
              with and without --gzip, under valgrind --tool=callgrind: bytes on the
              wire, instructions of the whole run and of the inflater (inflate.c).
              Watch-lists are never compressed (the apiserver gzips only a response
              whose first write is over 128 KiB, and a watch writes event by event),
              so gzip matters only with --watch-list off or a server without it.
  sidecar     kreflect --k8s-sidecar beside a k8s-sidecar-like peer on python3-kubernetes
              (tests/bench/peer_sidecar.py), 1,000 labelled ConfigMaps written as
              files: time, CPU and peak RSS, then --idle seconds of watching
              (tests/bench/sidecar_bench.py).
  sizes       stripped kreflect for x86_64/aarch64/armv7, the installed bytes of
              node + node_modules and python3 + python3-kubernetes with the python3
              packages it depends on, the stripped static client-go-peer binary;
              kreflect --print-budget.

It prints one table (Markdown) with the ratios and the targets of issue #8
marked met or missed, and writes DIR/results.json, DIR/table.md and
DIR/bench.svg (default DIR build/bench), with every client's stderr and the
strace and callgrind files in DIR/logs. --quick (or BENCH_QUICK=1): one
repetition, 10 s idle, 20,000 events, N = 1,000 for callgrind. BENCH_REPS,
BENCH_IDLE, BENCH_EVENTS and BENCH_CALLGRIND_EVENTS override the defaults too. Exit status: 0 when every measurement ran (targets
met or not: the table says), 1 when a client failed or gave wrong output, 2 on
bad arguments or a missing prerequisite.
"""

import argparse
import fcntl
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess  # noqa: E402

NODE_CLIENT = "@kubernetes/client-node"
NODE_CLIENT_VERSION = "1.4.0"
PEER_PYTHON = "/usr/bin/python3"
PEER_GO = os.path.join(ROOT, "build", "peers", "client-go-peer")
# The parse+store path of one watch event, from its framed bytes to the store
# (src/reflector.c keeps these out of line; none calls another): their
# inclusive instructions per event, beside the whole socket-to-jsonl path.
PARSE_STORE = ("tokenize_event", "parse_event", "wrong_kind", "read_meta", "settle_object", "kr_store_put")
PARTS = ("sizes", "sync", "idle", "wakeups", "throughput", "callgrind", "gzip", "sidecar")
IDLE_BOOKMARK_S = 15
PAYLOAD = 1024
MB = 1e6
CLK_TCK = os.sysconf("SC_CLK_TCK")
F_SETPIPE_SZ = 1031
WAIT_CALLS = ("poll", "ppoll", "epoll_wait", "epoll_pwait", "epoll_pwait2", "select", "pselect6")


class BenchError(Exception):
    """A client failed or printed something else than expected."""


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def fail_setup(msg):
    """A prerequisite is missing: say which, exit 2."""
    sys.stderr.write(msg.rstrip() + "\n")
    sys.exit(2)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# =========================================================================== processes

def proc_status(pid):
    """VmRSS and VmHWM of a live process, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    return out


def proc_cpu_split(pid):
    """(user, system) CPU seconds of a live process (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


class SyscallCounter:
    """perf stat counting system-call tracepoints of a live process (all its
    threads at the start) from now until stop(): the same for every client.
    Opt-in (--syscalls): the counting costs a little on each call."""

    EVENTS = ("raw_syscalls:sys_enter", "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_read",
              "syscalls:sys_enter_poll", "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_write",
              "syscalls:sys_enter_writev", "syscalls:sys_enter_clock_gettime")

    def __init__(self, pid, path):
        self.path, self.result = path, None
        self.p = subprocess.Popen(["perf", "stat", "-x", ",", "-o", path, "-p", str(pid)] +
                                  [a for e in self.EVENTS for a in ("-e", e)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)           # attached before the stream starts

    def stop(self):
        if self.result is None:
            self.p.send_signal(signal.SIGINT)
            self.p.wait(30)
            self.result = {}
            with open(self.path) as f:
                for line in f:
                    parts = line.strip().split(",")
                    if len(parts) > 2 and parts[2] in self.EVENTS and parts[0].isdigit():
                        self.result[parts[2]] = int(parts[0])
        return self.result


def proc_cpu(pid):
    """User + system CPU seconds of a live process (all its threads)."""
    return sum(proc_cpu_split(pid))


def proc_wakeups(pid):
    """Times the process's threads went to sleep and were woken: the sum of
    voluntary_ctxt_switches over /proc/PID/task/*/status (threads alive now)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except OSError:
            pass                      # a thread that has just ended
    return total


def reap(p, timeout=30, sig=None):
    """Waits for Popen p with wait4(); returns (exit code, rusage). With sig,
    sends it first; a process still there after `timeout` is killed."""
    if sig is not None and p.returncode is None:
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        except ChildProcessError:       # already reaped by Popen
            return p.returncode, None
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return p.returncode, ru
        if time.monotonic() > deadline:
            p.kill()
            timeout, deadline = 5, time.monotonic() + 5
        time.sleep(0.005)


class Pipe:
    """A client's stdout read as fast as it comes: counts a pattern (across read
    boundaries), notes when the count reaches a goal, optionally keeps the bytes."""

    def __init__(self, p, keep=False):
        self.p, self.fd, self.keep = p, p.stdout.fileno(), keep
        self.buf = bytearray()
        self.tail = b""
        self.total = 0

    def read_until(self, pred, timeout, what):
        """Reads until pred(self) is true; BenchError after `timeout` or at EOF."""
        deadline = time.monotonic() + timeout
        while not pred(self):
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError("%s: no %s after %.0f s" % (self.p.tag, what, timeout))
            r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if not r:
                continue
            # 64 KiB, the default pipe size: a read of 1 MiB held the pipe's lock
            # so long that the writer (every client alike) spun on it in the
            # kernel, a third of kreflect's CPU (perf, 2026-12-04)
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise BenchError("%s closed its output before %s" % (self.p.tag, what))
            self.total += len(chunk)
            if self.keep:
                self.buf += chunk
            self.on_chunk(chunk)

    def on_chunk(self, chunk):
        pass


class SyncPipe(Pipe):
    """Keeps the output and finds the first complete SYNCED line."""

    def __init__(self, p):
        super().__init__(p, keep=True)
        self.synced = None
        self.t_synced = None
        self.scan = 0

    def on_chunk(self, chunk):
        if self.synced is not None:
            return
        i = self.buf.find(b'"type":"SYNCED"', self.scan)
        j = self.buf.find(b"\n", i) if i >= 0 else -1
        if j < 0:
            # rescan from the start of the last (incomplete) line next time
            self.scan = self.buf.rfind(b"\n") + 1
            return
        start = self.buf.rfind(b"\n", 0, i) + 1
        self.synced = json.loads(bytes(self.buf[start:j]))
        self.t_synced = time.monotonic()


class CountPipe(Pipe):
    """Counts MODIFIED event lines, keeping nothing."""

    PAT = b'{"type":"MODIFIED"'

    def __init__(self, p):
        super().__init__(p)
        self.count = 0
        self.goal = None
        self.t_goal = None

    def on_chunk(self, chunk):
        data = self.tail + chunk
        self.count += data.count(self.PAT)
        self.tail = data[-(len(self.PAT) - 1):]
        if self.goal is not None and self.t_goal is None and self.count >= self.goal:
            self.t_goal = time.monotonic()


# =========================================================================== clients

class Client:
    """How to start one client against a server."""

    def __init__(self, name, label, argv_fn):
        self.name, self.label, self.argv_fn = name, label, argv_fn

    def argv(self, ready, once=False, extra=()):
        return self.argv_fn(ready, once, list(extra))


def kreflect_client(name, label, binary, watch_list="auto", args=()):
    def argv(ready, once, extra):
        a = [binary, "--server", ready["server"], "--token-file", ready["token_file"],
             "-n", "default", "--watch-list", watch_list, "-v", "1"] + list(args)
        if ready.get("ca"):
            a += ["--certificate-authority", ready["ca"]]
        if once:
            a += ["--once", "--timeout", "300"]
        return a + extra + ["configmaps"]
    return Client(name, label, argv)


def node_client(modules):
    def argv(ready, once, extra):
        return (["node", os.path.join(ROOT, "tests", "bench", "peer_node.js"), "--modules", modules,
                 "--server", ready["server"], "--certificate-authority", ready["ca"],
                 "--token-file", ready["token_file"], "-n", "default"] + (["--once"] if once else []))
    return Client("node", "client-node %s informer" % NODE_CLIENT_VERSION, argv)


def python_client(version):
    def argv(ready, once, extra):
        return ([PEER_PYTHON, os.path.join(ROOT, "tests", "bench", "peer_python.py"),
                 "--server", ready["server"], "--certificate-authority", ready["ca"],
                 "--token-file", ready["token_file"], "-n", "default"] + (["--once"] if once else []))
    return Client("python", "python3-kubernetes %s list+watch" % version, argv)


def go_client(watch_list=False):
    def argv(ready, once, extra):
        # env execs the peer: the same process, so /proc/PID is the peer's
        pre = ["env", "KUBE_FEATURE_WatchListClient=%s" % ("true" if watch_list else "false")]
        return pre + [PEER_GO, "--server", ready["server"], "--certificate-authority", ready["ca"],
                      "--token-file", ready["token_file"], "-n", "default", "configmaps"]
    if watch_list:
        return Client("client-go-wl", "client-go 0.32 Reflector, WatchListClient on", argv)
    return Client("client-go", "client-go 0.32 Reflector", argv)


class Bench:
    def __init__(self, a):
        self.a = a
        self.out = a.out
        self.logs = os.path.join(self.out, "logs")
        shutil.rmtree(self.logs, ignore_errors=True)
        os.makedirs(self.logs)
        self.modules = os.path.join(ROOT, "build", "bench", "npm")
        self.results = {"config": {"reps": a.reps, "idle_seconds": a.idle, "events": a.events,
                                   "payload_bytes": PAYLOAD, "quick": a.quick,
                                   "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                                   "nproc": os.cpu_count(),
                                   "loadavg_at_start": os.getloadavg()}}
        self.servers = []
        self.nlog = 0

    # ------------------------------------------------------------ set-up

    def prerequisites(self, parts=PARTS):
        """Checks what the bench runs and installs the Node.js client (npm)."""
        missing = []
        for path in (self.a.kreflect, self.a.kreflect_10k, self.a.kreflect + ".unstripped"):
            if not os.access(path, os.X_OK) and (path != self.a.kreflect_10k or "gzip" in parts
                                                 or set(parts) - {"callgrind"}):
                missing.append("%s (make build/kreflect relist-variant)" % path)
        if self.a.syscalls and "throughput" in parts and shutil.which("perf") is None:
            missing.append("perf (Debian package linux-perf, for --syscalls)")
        if set(parts) <= {"callgrind"}:
            # kreflect alone under valgrind: no peer is run
            for tool in ("valgrind", "callgrind_annotate"):
                if shutil.which(tool) is None:
                    missing.append(tool)
            if missing:
                fail_setup("bench: missing: %s" % ", ".join(missing))
            self.clients = {"kreflect": kreflect_client("kreflect", "kreflect", self.a.kreflect)}
            self.results["versions"] = {}
            return
        for tool in ("node", "npm", "openssl", "strace", "valgrind", "callgrind_annotate"):
            if shutil.which(tool) is None:
                missing.append(tool)
        if not os.access(PEER_PYTHON, os.X_OK):
            missing.append(PEER_PYTHON)
        if not os.access(PEER_GO, os.X_OK):
            missing.append("%s (make peers)" % PEER_GO)
        if missing:
            fail_setup("bench: missing: %s (make bench installs the Debian packages as root)"
                             % ", ".join(missing))
        r = subprocess.run([PEER_PYTHON, "-c", "import kubernetes; print(kubernetes.__version__)"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail_setup("bench: %s cannot import kubernetes: install python3-kubernetes (%s)"
                             % (PEER_PYTHON, r.stderr.strip().splitlines()[-1:]))
        self.py_version = r.stdout.strip()
        self.node_version = subprocess.run(["node", "--version"], capture_output=True,
                                           text=True).stdout.strip()
        pkg = os.path.join(self.modules, "node_modules", NODE_CLIENT, "package.json")
        have = None
        if os.path.exists(pkg):
            with open(pkg) as f:
                have = json.load(f).get("version")
        if have != NODE_CLIENT_VERSION:
            log("npm install %s@%s into %s" % (NODE_CLIENT, NODE_CLIENT_VERSION, self.modules))
            os.makedirs(self.modules, exist_ok=True)
            r = subprocess.run(["npm", "install", "--prefix", self.modules, "--no-audit", "--no-fund",
                                "--no-package-lock", "--save-exact", "--loglevel=error",
                                "%s@%s" % (NODE_CLIENT, NODE_CLIENT_VERSION)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                fail_setup("bench: npm install failed:\n%s" % r.stderr[-2000:])
        self.clients = {
            "kreflect": kreflect_client("kreflect", "kreflect", self.a.kreflect),
            "node": node_client(self.modules),
            "python": python_client(self.py_version),
            "client-go": go_client(),
        }
        self.go_wl = go_client(watch_list=True)
        self.kreflect_list = kreflect_client("kreflect-list", "kreflect --watch-list off", self.a.kreflect,
                                             watch_list="off")
        self.kreflect_10k = kreflect_client("kreflect", "kreflect (32 MiB arena)", self.a.kreflect_10k)
        self.kreflect_10k_list = kreflect_client("kreflect-list", "kreflect (32 MiB arena) --watch-list off",
                                                 self.a.kreflect_10k, watch_list="off")
        self.kreflect_list_plain = kreflect_client("kreflect-list-plain", "kreflect --watch-list off --gzip off",
                                                   self.a.kreflect, watch_list="off", args=("--gzip", "off"))
        self.kreflect_10k_list_plain = kreflect_client("kreflect-list-plain",
                                                       "kreflect (32 MiB arena) --watch-list off --gzip off",
                                                       self.a.kreflect_10k, watch_list="off",
                                                       args=("--gzip", "off"))
        self.results["versions"] = {"node": self.node_version, "client_node": NODE_CLIENT_VERSION,
                                    "python_kubernetes": self.py_version,
                                    "python": subprocess.run([PEER_PYTHON, "--version"], capture_output=True,
                                                             text=True).stdout.strip(),
                                    "kreflect": subprocess.run([self.a.kreflect, "--version"],
                                                               capture_output=True, text=True).stdout.strip()}

    def server(self, name, args):
        wd = os.path.join(self.out, "server-" + name)
        shutil.rmtree(wd, ignore_errors=True)
        os.makedirs(wd)
        log("starting the test API server (%s: %s)" % (name, " ".join(args)))
        srv = ServerProcess(["--seed", "1", *args], workdir=wd, timeout=300)
        self.servers.append(srv)
        return srv

    def spawn(self, argv, tag, stdout=subprocess.PIPE):
        self.nlog += 1
        err = open(os.path.join(self.logs, "%03d-%s.stderr" % (self.nlog, tag)), "wb")
        try:
            p = subprocess.Popen(argv, stdout=stdout, stderr=err, stdin=subprocess.DEVNULL)
        finally:
            err.close()
        if stdout == subprocess.PIPE:
            # 1 MiB of pipe (the default limit): a client is not held up by a
            # bench that is a moment late to read on a busy machine
            try:
                fcntl.fcntl(p.stdout.fileno(), F_SETPIPE_SZ, 1 << 20)
            except OSError:
                pass
        p.tag = "%s (log %s)" % (tag, err.name)
        return p

    def stop(self):
        for s in self.servers:
            s.stop()

    # ------------------------------------------------------------ sync

    def sync_once(self, srv, client, n):
        """One sync: seconds from exec to the SYNCED line, then, read from /proc at
        that moment, CPU and peak RSS (VmHWM); the bytes the server sent until then."""
        ctl = srv.control
        mark = max([e["id"] for e in ctl.log()] or [0])
        t0 = time.monotonic()
        p = self.spawn(client.argv(srv.ready), "sync%d-%s" % (n, client.name))
        try:
            pipe = SyncPipe(p)
            pipe.read_until(lambda s: s.synced is not None, 300, "SYNCED line")
            cpu, st = proc_cpu(p.pid), proc_status(p.pid)
        finally:
            reap(p, 10, signal.SIGTERM)
        out = bytes(pipe.buf[:pipe.buf.find(b"\n", pipe.buf.find(b'"type":"SYNCED"')) + 1])
        self.check_mirror(client.name, out, n, pipe.synced)
        entries = self.wait_done(ctl, mark)
        return {"seconds": pipe.t_synced - t0, "cpu": cpu, "peak_rss": st["VmHWM"],
                "bytes": sum(e["bytes"] or 0 for e in entries), "requests": len(entries)}

    @staticmethod
    def wait_done(ctl, mark, timeout=10):
        """The log entries after `mark`, once every one of them is finished."""
        deadline = time.monotonic() + timeout
        while True:
            es = [e for e in ctl.log(since=mark) if e["id"] > mark]
            if all(e["done"] for e in es) or time.monotonic() > deadline:
                return es
            time.sleep(0.05)

    @staticmethod
    def check_mirror(name, out, n, synced):
        """The output must be n ADDED ConfigMaps cm-00000.. with 1 KiB payloads, then SYNCED n."""
        names = set()
        lines = out.splitlines()
        for line in lines[:-1]:
            ev = json.loads(line)
            obj = ev["object"]
            if ev["type"] != "ADDED" or len(obj["data"]["payload"]) != PAYLOAD:
                raise BenchError("%s: unexpected line %.120r" % (name, line))
            if "managedFields" in obj["metadata"] or obj.get("kind") != "ConfigMap":
                raise BenchError("%s: object not printed as kreflect prints it: %.200r" % (name, line))
            names.add(obj["metadata"]["name"])
        want = {"cm-%05d" % i for i in range(n)}
        if names != want or json.loads(lines[-1]) != synced or synced.get("count") != n:
            raise BenchError("%s: mirrored %d objects (%d expected), last line %.200r"
                             % (name, len(names), n, lines[-1] if lines else b""))

    def part_sync(self):
        res = self.results.setdefault("sync", {})
        for n in self.a.sync_sizes:
            srv = self.server("sync%d" % n, ["--initial", str(n), "--initial-size", str(PAYLOAD),
                                             "--bookmark-interval", "0"])
            peers = [self.clients["node"], self.clients["python"], self.clients["client-go"], self.go_wl]
            if n > 4000:
                clients = [self.kreflect_10k, self.kreflect_10k_list, self.kreflect_10k_list_plain] + peers
            else:
                clients = [self.clients["kreflect"], self.kreflect_list, self.kreflect_list_plain] + peers
            runs = {c.name: [] for c in clients}
            for rep in range(self.a.reps):
                for c in clients:
                    # --watch-list off against a server that pages as etcd does (limit honoured
                    # at resourceVersion=0): the paginated list, 500 a page
                    srv.control.settings(rv0_ignores_limit=c.name not in ("kreflect-list", "kreflect-list-plain",
                                                                          "client-go"))
                    r = self.sync_once(srv, c, n)
                    runs[c.name].append(r)
                    log("sync %5d %-13s rep %d: %.3f s, cpu %.2f s, peak RSS %.1f MB, %d bytes in %d requests"
                        % (n, c.name, rep + 1, r["seconds"], r["cpu"], r["peak_rss"] / MB, r["bytes"],
                           r["requests"]))
            srv.control.settings(rv0_ignores_limit=True)
            res[str(n)] = {name: {"runs": rs, **{k: median([r[k] for r in rs])
                                                for k in ("seconds", "cpu", "peak_rss", "bytes", "requests")}}
                           for name, rs in runs.items()}
            res[str(n)]["labels"] = {c.name: c.label for c in clients}
            srv.stop()

    # ------------------------------------------------------------ idle and wake-ups

    def start_together(self, srv, tag):
        """Starts the three clients at once, stdout to files; waits for every SYNCED."""
        procs = {}
        for name, c in self.clients.items():
            path = os.path.join(self.logs, "%s-%s.out" % (tag, name))
            with open(path, "wb") as f:
                procs[name] = (self.spawn(c.argv(srv.ready), "%s-%s" % (tag, name), stdout=f), path)
        synced = {}
        seen = {name: b"" for name in procs}       # the last, unfinished line of each output
        offset = {name: 0 for name in procs}
        deadline = time.monotonic() + 300
        while len(synced) < len(procs):
            for name, (p, path) in procs.items():
                if name in synced:
                    continue
                if p.poll() is not None:
                    self.kill_all(procs)
                    raise BenchError("%s exited (%s) before its sync in %s" % (name, p.returncode, tag))
                with open(path, "rb") as f:
                    f.seek(offset[name])
                    data = seen[name] + f.read()
                offset[name] += len(data) - len(seen[name])
                cut = data.rfind(b"\n") + 1
                seen[name] = data[cut:]
                if b'"type":"SYNCED"' in data[:cut]:
                    synced[name] = {"status": proc_status(p.pid), "cpu": proc_cpu(p.pid),
                                    "t": time.monotonic()}
            if time.monotonic() > deadline:
                self.kill_all(procs)
                raise BenchError("not every client synced in %s" % tag)
            time.sleep(0.02)
        return procs, synced

    @staticmethod
    def kill_all(procs):
        for p, _ in procs.values():
            if p.returncode is None:
                reap(p, 10, signal.SIGTERM)

    def watch_entries(self, ctl):
        """Open watches by client: {name: log entry}, told apart by user agent."""
        out = {}
        for e in ctl.log():
            if e["watch"] and not e["done"]:
                ua = (e.get("user_agent") or "").lower()
                name = ("kreflect" if "kreflect" in ua else "client-go" if "client-go-peer" in ua
                        else "python" if "python" in ua
                        else "node" if ("node" in ua or "javascript" in ua or ua == "") else None)
                if name:
                    out[name] = e
        return out

    def bookmark_interval(self):
        """Bookmarks every 15 s, or four per idle window when it is shorter than a minute."""
        return max(1.0, min(IDLE_BOOKMARK_S, self.a.idle / 4))

    def idle_snapshot(self, procs, ctl):
        """Per client: CPU seconds, wake-ups so far, and the events (bookmarks) of its open watch."""
        watches = self.watch_entries(ctl)
        return {name: {"cpu": proc_cpu(p.pid), "wakeups": proc_wakeups(p.pid),
                       "watch": watches.get(name)} for name, (p, _) in procs.items()}

    @staticmethod
    def bookmarks_between(a, b):
        """Events the server sent on one watch between two snapshots (idle: bookmarks only)."""
        wa, wb = a["watch"], b["watch"]
        if wa is None or wb is None or wa["id"] != wb["id"]:
            return None
        return wb["events"] - wa["events"]

    def part_idle(self):
        srv = self.server("idle", ["--initial", "1000", "--initial-size", str(PAYLOAD),
                                   "--bookmark-interval", "%g" % self.bookmark_interval()])
        runs = {name: [] for name in self.clients}
        for rep in range(self.a.reps):
            procs, synced = self.start_together(srv, "idle-rep%d" % (rep + 1))
            time.sleep(1.0)           # the idle window starts 1 s after the last sync
            s0 = self.idle_snapshot(procs, srv.control)
            time.sleep(self.a.idle)
            s1 = self.idle_snapshot(procs, srv.control)
            for name, (p, _) in procs.items():
                st = proc_status(p.pid)
                r = {"rss_sync": synced[name]["status"]["VmRSS"], "hwm_sync": synced[name]["status"]["VmHWM"],
                     "rss_idle": st["VmRSS"], "hwm_idle": st["VmHWM"],
                     "cpu_idle": s1[name]["cpu"] - s0[name]["cpu"],
                     "wakeups_idle": s1[name]["wakeups"] - s0[name]["wakeups"],
                     "bookmarks_idle": self.bookmarks_between(s0[name], s1[name])}
                runs[name].append(r)
                log("idle %-8s rep %d: RSS at sync %.2f MB (peak %.2f), after %g s %.2f MB (peak %.2f), "
                    "cpu while idle %.2f s, %d wake-ups, %s bookmarks"
                    % (name, rep + 1, r["rss_sync"] / MB, r["hwm_sync"] / MB, self.a.idle, r["rss_idle"] / MB,
                       r["hwm_idle"] / MB, r["cpu_idle"], r["wakeups_idle"], r["bookmarks_idle"]))
            self.kill_all(procs)
        srv.stop()
        self.results["idle"] = {name: {"runs": rs, **{k: median([r[k] for r in rs]) for k in rs[0]}}
                                for name, rs in runs.items()}
        self.results["idle"]["bookmark_interval"] = self.bookmark_interval()

    def part_wakeups(self):
        srv = self.server("wakeups", ["--initial", "1000", "--initial-size", str(PAYLOAD),
                                      "--bookmark-interval", "%g" % self.bookmark_interval()])
        procs, _ = self.start_together(srv, "wakeups")
        time.sleep(1)
        ctl = srv.control
        before = self.watch_entries(ctl)
        traces = {}
        for name, (p, _) in procs.items():
            path = os.path.join(self.logs, "wakeups-%s.strace" % name)
            traces[name] = (subprocess.Popen(["strace", "-f", "-C", "-tt", "-qq", "-o", path,
                                              "-e", "trace=" + ",".join(WAIT_CALLS), "-p", str(p.pid)],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), path)
        time.sleep(self.a.idle)
        for name, (s, _) in traces.items():
            reap(s, 10, signal.SIGINT)
        after = self.watch_entries(ctl)
        self.kill_all(procs)
        srv.stop()
        res = {}
        for name, (_, path) in traces.items():
            r = self.parse_strace(path)
            b, a = before.get(name), after.get(name)
            r["bookmarks"] = (a["events"] - b["events"]) if a and b and a["id"] == b["id"] else None
            r["asked_bookmarks"] = bool(a and str(a["query"].get("allowWatchBookmarks", "")).lower()
                                        in ("true", "1", "t"))
            res[name] = r
            log("wakeups %-8s: %d wake-ups in %d s (%d timer wake-ups, %d zero-timeout calls), %s bookmarks received"
                % (name, r["wakeups"], self.a.idle, r["timeouts"], r["zero_timeout_calls"], r["bookmarks"]))
        self.results["wakeups"] = res

    @staticmethod
    def parse_strace(path):
        """Reads an strace -f -C -tt log of the wait calls: a wake-up is a call that
        may sleep (its timeout is not 0) and returned; it is a timer wake-up when
        it returned 0 (nothing ready). Calls with a zero timeout only look."""
        wakeups = timeouts = looks = 0
        calls = {}
        summary = []
        pending = {}
        head = re.compile(r"^(\d+)\s+\S+\s+(%s)\((.*)$" % "|".join(WAIT_CALLS))
        resumed = re.compile(r"^(\d+)\s+\S+\s+<\.\.\. (%s) resumed>(.*)$" % "|".join(WAIT_CALLS))
        done = re.compile(r"^(.*)\)\s+=\s+(-?\d+)")
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                m = head.match(line)
                if m:
                    pid, name, rest = m.groups()
                    if rest.endswith("<unfinished ...>"):
                        pending[pid] = (name, rest[:-len("<unfinished ...>")])
                        continue
                else:
                    m = resumed.match(line)
                    if not m:
                        if re.match(r"^\s*(\d+\.\d+\s|% time|---)", line):
                            summary.append(line)
                        continue
                    pid, name, rest = m.groups()
                    first = pending.pop(pid, (name, ""))[1]
                    rest = first + rest
                d = done.match(rest)
                if not d:
                    continue            # detached or interrupted: it did not return
                args, ret = split_args(d.group(1)), int(d.group(2))
                calls[name] = calls.get(name, 0) + 1
                if wait_timeout(name, args) == 0:
                    looks += 1
                    continue
                wakeups += 1
                if ret == 0:
                    timeouts += 1
        return {"wakeups": wakeups, "timeouts": timeouts, "zero_timeout_calls": looks, "calls": calls,
                "strace_c": summary}

    # ------------------------------------------------------------ throughput

    def part_throughput(self):
        srv = self.server("throughput", ["--bookmark-interval", "0", "--history", "1000"])
        ctl = srv.control
        ctl.create("configmaps", "default", "bench", data={"payload": "x" * PAYLOAD})
        runs = {name: [] for name in self.clients}
        ceiling = []
        for rep in range(self.a.reps):
            for name, c in self.clients.items():
                r = self.stream_once(srv, c, rep)
                runs[name].append(r)
                log("throughput %-8s rep %d: %d events in %.2f s: %.0f events/s, %.1f MB/s, cpu %.2f s, peak RSS %.1f MB"
                    % (name, rep + 1, self.a.events, r["seconds"], r["events_per_s"], r["mb_per_s"], r["cpu"],
                       r["peak_rss"] / MB))
            r = self.ceiling_once(srv, rep)
            ceiling.append(r)
            log("throughput openssl s_client rep %d: %.2f s: %.0f events/s, %.1f MB/s"
                % (rep + 1, r["seconds"], r["events_per_s"], r["mb_per_s"]))
        srv.stop()
        res = {name: {"runs": rs, **{k: median([r[k] for r in rs]) for k in rs[0]}}
               for name, rs in runs.items()}
        res["ceiling"] = {"runs": ceiling, **{k: median([r[k] for r in ceiling]) for k in ceiling[0]}}
        self.results["throughput"] = res

    def bench_stream(self, ctl, end):
        """Asks the server to pre-serialise the stream; the call returns once it is built."""
        box = {}

        def run():
            try:
                box["r"] = ctl.bench(count=self.a.events, size=PAYLOAD, end=end, match="watch=")
            except Exception as e:  # noqa: BLE001 (reported in the main thread)
                box["e"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, box

    def find_bench_watch(self, ctl, mark, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in ctl.log(since=mark):
                if e["id"] > mark and e.get("bench") and e["events"] >= e["bench"]:
                    return e
            time.sleep(0.05)
        raise BenchError("no watch took the bench stream")

    def stream_once(self, srv, c, rep):
        ctl = srv.control
        p = self.spawn(c.argv(srv.ready), "stream-rep%d-%s" % (rep + 1, c.name))
        counter = None
        try:
            sp = SyncPipe(p)
            sp.read_until(lambda s: s.synced is not None, 120, "SYNCED line")
            ctl.wait_watches(1, timeout=30, match="configmaps")
            time.sleep(1.0)       # a settled watch, not one just opened
            pipe = CountPipe(p)
            pipe.goal = self.a.events
            mark = max([e["id"] for e in ctl.log()] or [0])
            counter = SyscallCounter(p.pid, os.path.join(self.logs, "stream-rep%d-%s.syscalls" % (rep + 1, c.name))) \
                if self.a.syscalls else None
            u0, s0 = proc_cpu_split(p.pid)
            me0 = os.times()
            t, box = self.bench_stream(ctl, "open")
            pipe.read_until(lambda s: s.t_goal is not None, 600, "%d MODIFIED lines" % self.a.events)
            t_end = pipe.t_goal
            wall_end = time.time() - (time.monotonic() - t_end)
            u1, s1 = proc_cpu_split(p.pid)
            me1 = os.times()
            syscalls = counter.stop() if counter else None
            cpu, sys_cpu = (u1 - u0) + (s1 - s0), s1 - s0
            hwm = proc_status(p.pid)["VmHWM"]
            t.join(60)
            if "e" in box:
                raise BenchError("bench mode: %s" % box["e"])
            e = self.find_bench_watch(ctl, mark)
            secs = wall_end - e["time"]
            if pipe.count != self.a.events:
                raise BenchError("%s printed %d MODIFIED lines for %d events" % (c.name, pipe.count, self.a.events))
        finally:
            if counter:
                counter.stop()
            reap(p, 10, signal.SIGTERM)
        nbytes = box["r"]["bytes"]
        if syscalls:
            log("throughput %-8s rep %d: system calls per event: %s" % (c.name, rep + 1, ", ".join(
                "%s %.3f" % (k.split(":")[-1], v / self.a.events) for k, v in syscalls.items())))
            # The bench's own reader (and its server threads) share the cores with the client.
            log("throughput %-8s rep %d: bench process CPU during the stream: %.2f s (user %.2f, sys %.2f)"
                % (c.name, rep + 1, (me1.user - me0.user) + (me1.system - me0.system), me1.user - me0.user,
                   me1.system - me0.system))
        return {"seconds": secs, "events_per_s": self.a.events / secs, "mb_per_s": nbytes / secs / MB,
                "cpu": cpu, "cpu_us_per_event": cpu / self.a.events * 1e6,
                "sys_us_per_event": sys_cpu / self.a.events * 1e6, "peak_rss": hwm, "stream_bytes": nbytes}

    def ceiling_once(self, srv, rep):
        """openssl s_client reading the same stream to /dev/null."""
        ctl = srv.control
        rv = ctl.state(summary=True)["rv"]
        mark = max([e["id"] for e in ctl.log()] or [0])
        t, box = self.bench_stream(ctl, "close")
        t.join(120)
        if "e" in box or "r" not in box:
            raise BenchError("bench mode: %s" % box.get("e"))
        with open(srv.ready["token_file"]) as f:
            token = f.read().strip()
        req = ("GET /api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s HTTP/1.1\r\n"
               "Host: 127.0.0.1\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\n"
               "Connection: close\r\n\r\n" % (rv, token))
        path = os.path.join(self.logs, "ceiling.req")
        with open(path, "w") as f:
            f.write(req)
        host = "127.0.0.1:%d" % srv.ready["port"]
        errlog = os.path.join(self.logs, "ceiling-rep%d.stderr" % (rep + 1))
        with open(path, "rb") as stdin, open(os.devnull, "wb") as null, open(errlog, "wb") as err:
            p = subprocess.Popen(["openssl", "s_client", "-quiet", "-connect", host, "-CAfile", srv.ready["ca"],
                                  "-verify_return_error"], stdin=stdin, stdout=null, stderr=err)
            code, ru = reap(p, 300)
        wall_end = time.time()
        e = self.find_bench_watch(ctl, mark)
        if e["status"] != 200:
            raise BenchError("openssl s_client: status %s" % e["status"])
        secs = wall_end - e["time"]
        nbytes = box["r"]["bytes"]
        return {"seconds": secs, "events_per_s": self.a.events / secs, "mb_per_s": nbytes / secs / MB,
                "cpu": ru.ru_utime + ru.ru_stime, "stream_bytes": nbytes}

    # ------------------------------------------------------------ callgrind

    def part_callgrind(self):
        n = self.a.callgrind_events
        binary = self.a.kreflect + ".unstripped"
        res = {"events": [n, 2 * n], "binary": binary}
        for mode in ("tls", "plain"):
            srv = self.server("callgrind-" + mode, ["--bookmark-interval", "0"] +
                              (["--plain-http"] if mode == "plain" else []))
            srv.control.create("configmaps", "default", "bench", data={"payload": "x" * PAYLOAD})
            totals = {}
            for count in (n, 2 * n):
                totals[count] = self.callgrind_once(srv, binary, mode, count)
            srv.stop()
            per = (totals[2 * n]["Ir"] - totals[n]["Ir"]) / n
            ps = {fn: (totals[2 * n]["parse_store"].get(fn, 0) - totals[n]["parse_store"].get(fn, 0)) / n
                  for fn in PARSE_STORE}
            res[mode] = {"Ir": {str(k): v["Ir"] for k, v in totals.items()}, "per_event": per,
                         "parse_store": sum(ps.values()), "parse_store_functions": ps,
                         "profile": self.profile_diff(totals[n]["functions"], totals[2 * n]["functions"], n)}
            log("callgrind %-5s: %d instructions with %d events, %d with %d: %.0f per event, "
                "%.0f of them parse+store (%s)"
                % (mode, totals[n]["Ir"], n, totals[2 * n]["Ir"], 2 * n, per, sum(ps.values()),
                   ", ".join("%s %.0f" % kv for kv in ps.items())))
        self.results["callgrind"] = res

    def callgrind_once(self, srv, binary, mode, count):
        ctl = srv.control
        outfile = os.path.join(self.logs, "callgrind-%s-%d.out" % (mode, count))
        argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + outfile] + \
            self.kreflect_client_for(binary).argv(srv.ready)
        p = self.spawn(argv, "callgrind-%s-%d" % (mode, count))
        try:
            sp = SyncPipe(p)
            sp.read_until(lambda s: s.synced is not None, 300, "SYNCED line")
            ctl.wait_watches(1, timeout=60, match="configmaps")
            time.sleep(1.0)
            pipe = CountPipe(p)
            pipe.goal = count
            ctl.bench(count=count, size=PAYLOAD, end="open", match="watch=")
            pipe.read_until(lambda s: s.t_goal is not None, 900, "%d MODIFIED lines" % count)
            if pipe.count != count:
                raise BenchError("kreflect printed %d MODIFIED lines for %d events" % (pipe.count, count))
        finally:
            code, _ = reap(p, 120, signal.SIGTERM)
        if code != 0:
            raise BenchError("kreflect under callgrind exited %d" % code)
        return self.read_callgrind(outfile)

    def kreflect_client_for(self, binary):
        return kreflect_client("kreflect", "kreflect", binary)

    @staticmethod
    def read_callgrind(path):
        total = None
        with open(path) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
        r = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", path],
                           capture_output=True, text=True)
        funcs = {}
        for line in r.stdout.splitlines():
            # "  46,100,175 (38.90%)  build/include/jsmn.h:kr_json_parse [/path/binary]"
            m = re.match(r"\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S+?):(\S+)(?: \[.*\])?$", line)
            if m and m.group(3) != "PROGRAM":
                fn = m.group(3) if m.group(2) == "???" else "%s (%s)" % (m.group(3), os.path.basename(m.group(2)))
                funcs[fn] = funcs.get(fn, 0) + int(m.group(1).replace(",", ""))
        if total is None:
            raise BenchError("no totals in %s" % path)
        # Inclusive costs of the parse+store steps (PARSE_STORE), whatever suffix LTO gave them.
        r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", path],
                           capture_output=True, text=True)
        ps = {}
        for line in r.stdout.splitlines():
            m = re.match(r"\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S+?):(\S+)(?: \[.*\])?$", line)
            if m and m.group(3).split(".")[0] in PARSE_STORE:
                fn = m.group(3).split(".")[0]
                ps[fn] = ps.get(fn, 0) + int(m.group(1).replace(",", ""))
        return {"Ir": total, "functions": funcs, "parse_store": ps}

    @staticmethod
    def profile_diff(f1, f2, n, top=12):
        """Per-event instructions by function: (2N run - N run) / N."""
        d = {fn: (f2.get(fn, 0) - f1.get(fn, 0)) / n for fn in set(f1) | set(f2)}
        return sorted(([fn, round(v, 1)] for fn, v in d.items() if v > 0), key=lambda x: -x[1])[:top]

    # ------------------------------------------------------------ gzip

    def part_gzip(self):
        """One LIST of n ConfigMaps, gzip and plain, each the whole run under callgrind."""
        res = {}
        for n in self.a.sync_sizes:
            binary = (self.a.kreflect_10k if n > 4000 else self.a.kreflect) + ".unstripped"
            srv = self.server("gzip%d" % n, ["--initial", str(n), "--initial-size", str(PAYLOAD),
                                             "--bookmark-interval", "0"])
            res[str(n)] = {"binary": binary}
            for mode in ("gzip", "plain"):
                ctl = srv.control
                mark = max([e["id"] for e in ctl.log()] or [0])
                outfile = os.path.join(self.logs, "callgrind-sync%d-%s.out" % (n, mode))
                c = kreflect_client("kreflect", "kreflect", binary, watch_list="off",
                                    args=("--gzip", "on" if mode == "gzip" else "off"))
                p = self.spawn(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + outfile] +
                               c.argv(srv.ready, once=True), "callgrind-sync%d-%s" % (n, mode))
                out, _ = p.communicate(timeout=900)
                if p.returncode != 0:
                    raise BenchError("kreflect --once under callgrind exited %d" % p.returncode)
                lines = out.splitlines()
                self.check_mirror("kreflect --gzip " + mode, out, n, json.loads(lines[-1]))
                es = [e for e in self.wait_done(ctl, mark) if not e["watch"]]
                if len(es) != 1 or es[0]["gzip"] != (mode == "gzip"):
                    raise BenchError("expected one %s LIST, the server saw %s" % (
                        mode, [(e["query"], e["gzip"]) for e in es]))
                cg = self.read_callgrind(outfile)
                res[str(n)][mode] = {"bytes": es[0]["bytes"], "Ir": cg["Ir"], "functions": cg["functions"],
                                     "top": sorted(cg["functions"].items(), key=lambda x: -x[1])[:8]}
                log("gzip %5d %-5s: %d bytes on the wire, %d instructions"
                    % (n, mode, es[0]["bytes"], cg["Ir"]))
            # LTO inlines the inflater into its caller (conn's give()), so it is measured
            # as what the gzip run spent more, function by function, than the plain one
            # (inflating, and CRC-32), and what it spent less (decrypting 30 x fewer bytes).
            fg, fp = res[str(n)]["gzip"].pop("functions"), res[str(n)]["plain"].pop("functions")
            delta = {fn: fg.get(fn, 0) - fp.get(fn, 0) for fn in set(fg) | set(fp)}
            res[str(n)]["added"] = sum(v for v in delta.values() if v > 0)
            res[str(n)]["saved"] = -sum(v for v in delta.values() if v < 0)
            res[str(n)]["added_by_function"] = sorted(([fn, v] for fn, v in delta.items() if v > 0),
                                                      key=lambda x: -x[1])[:8]
            res[str(n)]["saved_by_function"] = sorted(([fn, -v] for fn, v in delta.items() if v < 0),
                                                      key=lambda x: -x[1])[:8]
            log("gzip %5d: %d instructions added (%s), %d saved (%s)"
                % (n, res[str(n)]["added"], res[str(n)]["added_by_function"][:4], res[str(n)]["saved"],
                   res[str(n)]["saved_by_function"][:4]))
            srv.stop()
        self.results["gzip"] = res

    # ------------------------------------------------------------ sizes

    def part_sidecar(self):
        import sidecar_bench
        self.results["sidecar"] = sidecar_bench.run(self, sys.modules[__name__])

    def part_sizes(self):
        res = {"kreflect": {}}
        for t in ("x86_64", "aarch64", "armv7"):
            path = os.path.join(ROOT, "build", t, "kreflect")
            res["kreflect"][t] = os.path.getsize(path) if os.path.exists(path) else None
        node = os.path.realpath(shutil.which("node"))
        nm = os.path.join(self.modules, "node_modules")
        res["node"] = {"node_binary": os.path.getsize(node), "node_modules": tree_bytes(nm),
                       "node_modules_packages": sum(1 for _ in os.scandir(nm)) if os.path.isdir(nm) else 0}
        res["node"]["total"] = res["node"]["node_binary"] + res["node"]["node_modules"]
        pkgs = deb_closure("python3-kubernetes", lambda p: p.startswith(("python3", "libpython3")))
        res["python"] = {"packages": sorted(pkgs), "total": deb_bytes(pkgs),
                         "python3_kubernetes": deb_bytes(["python3-kubernetes"])}
        res["client-go"] = {"total": os.path.getsize(PEER_GO)}
        res["budget"] = {"default": print_budget(self.a.kreflect), "10k": print_budget(self.a.kreflect_10k)}
        self.results["sizes"] = res
        log("sizes: kreflect %s; node + modules %d bytes; python3 + packages %d bytes (%d packages)"
            % (res["kreflect"], res["node"]["total"], res["python"]["total"], len(pkgs)))


def split_args(text):
    """Top-level arguments of a syscall as strace prints them ([..], {..} and ".." kept whole)."""
    out, depth, cur, quoted = [], 0, [], False
    for ch in text:
        if quoted:
            cur.append(ch)
            if ch == '"':
                quoted = False
            continue
        if ch == '"':
            quoted = True
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return out


def wait_timeout(name, args):
    """The timeout a wait call was given: 0 (only looks), None (no limit) or a positive number."""
    pos = {"poll": 2, "epoll_wait": 3, "epoll_pwait": 3, "epoll_pwait2": 3, "ppoll": 2, "select": 4,
           "pselect6": 4}[name]
    if len(args) <= pos:
        return None
    t = args[pos]
    if t == "NULL":
        return None
    nums = [int(x) for x in re.findall(r"-?\d+", t)]
    if not nums or all(x == 0 for x in nums):
        return 0
    return -1 if nums[0] < 0 else sum(nums)


def tree_bytes(top):
    """Bytes of the regular files under top (du --apparent-size -b, files counted once)."""
    total, seen = 0, set()
    for dirpath, _, files in os.walk(top):
        for fn in files:
            st = os.lstat(os.path.join(dirpath, fn))
            if (st.st_dev, st.st_ino) not in seen and not os.path.islink(os.path.join(dirpath, fn)):
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def deb_closure(root, keep):
    """Installed Debian packages reachable from root through Depends/Pre-Depends, filtered by keep."""
    todo, seen = [root], set()
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Depends}, ${Pre-Depends}", pkg],
                           capture_output=True, text=True)
        if r.returncode != 0 or "install ok installed" not in r.stdout:
            continue
        seen.add(pkg)
        for alt in r.stdout.split("\t", 1)[1].split(","):
            for choice in alt.split("|"):
                name = choice.strip().split(" ")[0].split(":")[0]
                if name and keep(name):
                    todo.append(name)
                    break
    return seen


def deb_bytes(pkgs):
    """Bytes of the regular files the packages installed (each file once)."""
    files = set()
    for pkg in pkgs:
        r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
        files.update(line for line in r.stdout.splitlines() if line.startswith("/"))
    total = 0
    for path in files:
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                total += os.path.getsize(path)
        except OSError:
            pass
    return total


def print_budget(binary):
    r = subprocess.run([binary, "--print-budget"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == "total":
            return int(f[1])
    return None


# =========================================================================== report

def f_s(x):
    return "—" if x is None else ("%.3f s" % x if x < 1 else "%.2f s" % x if x < 10 else "%.1f s" % x)


def f_mb(x):
    return "—" if x is None else ("%.2f MB" % (x / MB) if x < 10 * MB else "%.1f MB" % (x / MB))


def f_n(x):
    return "—" if x is None else "{:,}".format(int(round(x)))


def ratio(k, p, higher_better=False):
    """kreflect : peer, the smaller side as 1 (1 : 25 = the peer's figure is 25 times kreflect's)."""
    if k is None or p is None or k <= 0 or p <= 0:
        return "—"
    return "1 : %s" % fmt_x(p / k) if p >= k else "%s : 1" % fmt_x(k / p)


def fmt_x(v):
    return "%.0f" % v if v >= 100 else "%.1f" % v if v >= 10 else "%.2f" % v


class Report:
    def __init__(self, res):
        self.r = res
        self.rows = []
        self.targets = []

    def get(self, *path):
        d = self.r
        for p in path:
            if not isinstance(d, dict) or p not in d:
                return None
            d = d[p]
        return d

    def row(self, what, k, n, p, rn="", rp="", g="", rg=""):
        self.rows.append((what, k, n, p, g, rn, rp, rg))

    def cmp_row(self, what, key, fmt, part, higher_better=False):
        k, n, p, g = (self.get(*part, c, key) for c in ("kreflect", "node", "python", "client-go"))
        self.row(what, fmt(k), fmt(n), fmt(p), ratio(k, n, higher_better), ratio(k, p, higher_better),
                 fmt(g), ratio(k, g, higher_better))

    def target(self, ok, text):
        self.targets.append(("met" if ok else "MISSED", text))

    def build(self):
        idle_s = self.get("config", "idle_seconds")
        for n in ("1000", "10000"):
            if self.get("sync", n) is None:
                continue
            nn = "{:,}".format(int(n))
            arena = " (kreflect: 32 MiB-arena build)" if n == "10000" else ""
            self.cmp_row("time to first sync, %s ConfigMaps of 1 KiB%s" % (nn, arena), "seconds", f_s, ("sync", n))
            self.cmp_row("CPU for that sync (user + sys)", "cpu", f_s, ("sync", n))
            self.cmp_row("peak RSS at sync (%s)" % nn, "peak_rss", f_mb, ("sync", n))
            label = "bytes from the server for the sync (kreflect: watch-list)"
            nb = self.get("sync", n, "node", "bytes")
            if nb is not None and nb < int(n) * PAYLOAD:
                label += "; node asks for gzip and gets the LIST compressed"
            self.cmp_row(label, "bytes", f_n, ("sync", n))
            kl = self.get("sync", n, "kreflect-list")
            kp = self.get("sync", n, "kreflect-list-plain")
            if kp:
                self.row("… kreflect --watch-list off --gzip off: paginated LIST, 500 a page, plain",
                         "%s B in %d requests, %s" % (f_n(kp["bytes"]), kp["requests"], f_s(kp["seconds"])),
                         "", "", ratio(kp["bytes"], self.get("sync", n, "node", "bytes")),
                         ratio(kp["bytes"], self.get("sync", n, "python", "bytes")))
            if kl:
                self.row("… kreflect --watch-list off: paginated LIST, 500 a page, gzip (client-go: its "
                         "default, the same pages)",
                         "%s B in %d requests, %s" % (f_n(kl["bytes"]), kl["requests"], f_s(kl["seconds"])),
                         "", "", ratio(kl["bytes"], self.get("sync", n, "node", "bytes")),
                         ratio(kl["bytes"], self.get("sync", n, "python", "bytes")),
                         "", ratio(kl["bytes"], self.get("sync", n, "client-go", "bytes")))
            gw = self.get("sync", n, "client-go-wl")
            if gw:
                k = self.get("sync", n, "kreflect")
                self.row("… client-go with WatchListClient on (as kreflect's default): time, CPU, peak RSS, bytes",
                         "", "", "", "", "",
                         "%s, %s CPU, %s, %s B in %d requests" % (f_s(gw["seconds"]), f_s(gw["cpu"]),
                                                                 f_mb(gw["peak_rss"]), f_n(gw["bytes"]),
                                                                 gw["requests"]),
                         "time %s, RSS %s" % (ratio(k and k["seconds"], gw["seconds"]),
                                              ratio(k and k["peak_rss"], gw["peak_rss"])))
        if self.get("idle"):
            self.cmp_row("RSS at sync, three clients side by side (1,000)", "rss_sync", f_mb, ("idle",))
            self.cmp_row("RSS after %s s of idle watch (VmRSS)" % idle_s, "rss_idle", f_mb, ("idle",))
            self.cmp_row("peak RSS over sync and idle watch (VmHWM)", "hwm_idle", f_mb, ("idle",))
            self.cmp_row("CPU used in %s s of idle watch" % idle_s, "cpu_idle", f_s, ("idle",))

            def wk(c):
                x = self.get("idle", c)
                if not x:
                    return "—"
                return "%d (bookmarks: %s)" % (x["wakeups_idle"], "—" if x["bookmarks_idle"] is None
                                               else "%d" % x["bookmarks_idle"])
            self.row("wake-ups in %s s of idle watch (voluntary context switches, all threads; bookmark every %g s "
                     "to those that ask)" % (idle_s, self.get("idle", "bookmark_interval") or 0),
                     wk("kreflect"), wk("node"), wk("python"), g=wk("client-go"))
        w = self.get("wakeups")
        if w:
            def wk(c):
                x = w.get(c)
                if not x:
                    return "—"
                b = x["bookmarks"] if x["asked_bookmarks"] else "not asked"
                return "%d, %d of them timers (bookmarks: %s)" % (x["wakeups"], x["timeouts"], b)
            self.row("poll/epoll/select calls that slept and returned in %s s idle (strace -f -C; python "
                     "blocks in recv() instead)" % idle_s, wk("kreflect"), wk("node"), wk("python"),
                     g=wk("client-go"))
        t = self.get("throughput")
        if t:
            ev = self.get("config", "events")
            self.cmp_row("throughput, %s MODIFIED events of 1 KiB: events/s" % f_n(ev), "events_per_s", f_n,
                         ("throughput",), higher_better=True)
            self.cmp_row("… MB/s (HTTP body bytes)", "mb_per_s", lambda x: "—" if x is None else "%.1f" % x,
                         ("throughput",), higher_better=True)
            self.cmp_row("… CPU for the stream", "cpu", f_s, ("throughput",))
            self.cmp_row("… CPU per event (user + sys)", "cpu_us_per_event",
                         lambda x: "—" if x is None else "%.1f µs" % x, ("throughput",))
            self.cmp_row("… of which in the kernel (sys)", "sys_us_per_event",
                         lambda x: "—" if x is None else "%.1f µs" % x, ("throughput",))
            self.cmp_row("… peak RSS", "peak_rss", f_mb, ("throughput",))
            c = t.get("ceiling")
            if c:
                k = self.get("throughput", "kreflect", "events_per_s")
                self.row("ceiling: openssl s_client reading the same stream to /dev/null",
                         "%s events/s, %.1f MB/s" % (f_n(c["events_per_s"]), c["mb_per_s"]), "", "",
                         "kreflect: %.0f %% of it" % (100 * k / c["events_per_s"]) if k else "", "")
        s = self.get("sizes")
        if s:
            k = s["kreflect"]
            g = (s.get("client-go") or {}).get("total")
            self.row("installed size: x86_64 binary; node + node_modules; python3 + packages; client-go-peer "
                     "(static, stripped)",
                     f_n(k.get("x86_64")) + " B", f_n(s["node"]["total"]) + " B", f_n(s["python"]["total"]) + " B",
                     ratio(k.get("x86_64"), s["node"]["total"]), ratio(k.get("x86_64"), s["python"]["total"]),
                     f_n(g) + " B" if g else "—", ratio(k.get("x86_64"), g))
            self.row("kreflect stripped, aarch64 / armv7", "%s B / %s B" % (f_n(k.get("aarch64")),
                                                                            f_n(k.get("armv7"))), "", "")
            b = s.get("budget", {})
            rss1 = self.get("idle", "kreflect", "hwm_idle")
            rss10 = self.get("sync", "10000", "kreflect", "peak_rss")
            self.row("static budget (--print-budget) vs peak RSS",
                     "%s reserved, %s resident (1,000); %s reserved, %s resident (10,000)"
                     % (f_mb(b.get("default")), f_mb(rss1), f_mb(b.get("10k")), f_mb(rss10)), "", "")
        gz = self.get("gzip")
        for n in ("1000", "10000"):
            g = gz and gz.get(n)
            if not g:
                continue
            self.row("one LIST of %s ConfigMaps (--watch-list off --once, callgrind): bytes on the wire, "
                     "gzip / plain" % "{:,}".format(int(n)),
                     "%s B / %s B (%.1f x fewer)" % (f_n(g["gzip"]["bytes"]), f_n(g["plain"]["bytes"]),
                                                      g["plain"]["bytes"] / g["gzip"]["bytes"]), "", "")
            self.row("… instructions of the whole run, gzip / plain; added by gzip (inflating, CRC-32) / saved "
                     "(decrypting fewer bytes)",
                     "%s / %s (%+.1f %%); +%s (%.1f per decoded byte) / -%s"
                     % (f_n(g["gzip"]["Ir"]), f_n(g["plain"]["Ir"]),
                        100.0 * (g["gzip"]["Ir"] - g["plain"]["Ir"]) / g["plain"]["Ir"],
                        f_n(g["added"]), g["added"] / max(1, g["plain"]["bytes"]), f_n(g["saved"])),
                     "", "")
        cg = self.get("callgrind")
        if cg:
            self.row("instructions per 1 KiB MODIFIED event, socket to store and jsonl (callgrind)",
                     "%s over TLS, %s plain" % (f_n(cg["tls"]["per_event"]), f_n(cg["plain"]["per_event"])), "", "")
            if "parse_store" in cg["plain"]:
                self.row("… of them parse+store: framed event bytes to the store (inclusive: %s)"
                         % ", ".join(PARSE_STORE), "%s over TLS, %s plain"
                         % (f_n(cg["tls"]["parse_store"]), f_n(cg["plain"]["parse_store"])), "", "")
        self.check_targets()

    def check_targets(self):
        hwm = self.get("idle", "kreflect", "hwm_idle")
        if hwm is not None:
            lim = 3 * MB
            self.target(hwm <= lim, "peak RSS mirroring 1,000 ConfigMaps over TLS <= 3 MB: %s (%s)"
                        % (f_mb(hwm), margin(hwm, lim, "MB")))
            # issue #8's targets name the two peers it was filed against; client-go came later
            peers = [x for x in (self.get("idle", "node", "hwm_idle"), self.get("idle", "python", "hwm_idle")) if x]
            if peers:
                x = min(peers) / hwm
                self.target(x >= 15, "... at least 15x lower than the lower of node and python (%s): %.1fx"
                            % (f_mb(min(peers)), x))
        p10 = self.get("sync", "10000", "kreflect", "peak_rss")
        if p10 is not None:
            self.target(p10 <= 16 * MB, "peak RSS mirroring 10,000 (32 MiB-arena build) <= 16 MB: %s (%s)"
                        % (f_mb(p10), margin(p10, 16 * MB, "MB")))
        k = self.get("throughput", "kreflect", "events_per_s")
        if k is not None:
            best = max(self.get("throughput", "node", "events_per_s") or 0,
                       self.get("throughput", "python", "events_per_s") or 0)
            if best:
                self.target(k >= 5 * best, "throughput >= 5x the faster of node and python (%s/s): %.1fx"
                            % (f_n(best), k / best))
            c = self.get("throughput", "ceiling", "events_per_s")
            if c:
                self.target(k >= c / 2, "throughput >= 1/2 of the bare TLS reader (%s/s): %.0f %%"
                            % (f_n(c), 100 * k / c))
            g = self.get("throughput", "client-go", "events_per_s")
            if g:
                self.target(k > g, "throughput ahead of client-go's Reflector (%s/s): %.1fx" % (f_n(g), k / g))
        size = self.get("sizes", "kreflect", "x86_64")
        if size is not None:
            self.target(size <= 300000, "binary <= 300 KB (300,000 bytes) stripped, x86_64: %s bytes (%s)"
                        % (f_n(size), margin(size, 300000, "bytes")))
        runs = self.get("idle", "kreflect", "runs")
        w = self.get("wakeups", "kreflect")
        if runs and w:
            extra = [r["wakeups_idle"] - r["bookmarks_idle"] for r in runs if r["bookmarks_idle"] is not None]
            ok = w["timeouts"] == 0 and len(extra) == len(runs) and max(extra) <= 0
            self.target(ok, "idle watch: no wake-up between bookmarks: %s wake-ups for %s bookmarks in %s s (per "
                        "run); strace: %d poll wake-ups, %d of them timers, for %s bookmarks"
                        % ("/".join(str(r["wakeups_idle"]) for r in runs),
                           "/".join(str(r["bookmarks_idle"]) for r in runs), self.get("config", "idle_seconds"),
                           w["wakeups"], w["timeouts"], w["bookmarks"]))

    def markdown(self):
        v = self.r.get("versions", {})
        head = ("| measured | kreflect | node: client-node %s informer | python: python3-kubernetes %s | "
                "client-go: client-go 0.32 Reflector | kreflect : node | kreflect : python | kreflect : client-go |"
                % (v.get("client_node", "?"), v.get("python_kubernetes", "?")))
        lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in self.rows:
            lines.append("| " + " | ".join(r) + " |")
        lines.append("")
        for status, text in self.targets:
            lines.append("- **%s** %s" % (status, text))
        return "\n".join(lines) + "\n"


def margin(v, lim, unit):
    d = v - lim
    if unit == "MB":
        amount = "%.2f MB" % (abs(d) / MB)
    else:
        amount = "{:,} {}".format(int(abs(d)), unit)
    return "%s %s, %.0f %%" % (amount, "under" if d <= 0 else "over", 100 * abs(d) / lim)


# =========================================================================== picture

COLOURS = {"kreflect": "#2b6cb0", "node": "#c05621", "python": "#2f855a", "client-go": "#6b46c1",
           "ceiling": "#718096"}


def svg(res):
    """Two bar charts: RSS (MB) and throughput (events/s), values written on the bars."""
    charts = []
    rss = []
    for label, path in (("sync 1,000", ("sync", "1000", "%s", "peak_rss")),
                        ("idle 1,000", ("idle", "%s", "hwm_idle")),
                        ("sync 10,000", ("sync", "10000", "%s", "peak_rss"))):
        group = []
        for c in ("kreflect", "node", "python", "client-go"):
            d = res
            for p in path:
                d = d.get(p % c if "%s" in p else p) if isinstance(d, dict) else None
            if d is not None:
                group.append((c, d / MB))
        if group:
            rss.append((label, group))
    if rss:
        charts.append(("Peak RSS (MB, lower is better)", rss, "%.1f"))
    tp = res.get("throughput")
    if tp:
        group = [(c, tp[c]["events_per_s"]) for c in ("kreflect", "node", "python", "client-go", "ceiling")
                 if c in tp]
        charts.append(("Throughput (events/s of 1 KiB, higher is better)", [("", group)], "%.0f"))
    width, height = 460, 300
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (width * max(1, len(charts)), height + 40),
           '<rect width="100%" height="100%" fill="white"/>']
    for ci, (title, groups, fmt) in enumerate(charts):
        x0 = ci * width + 40
        out.append('<text x="%d" y="18" font-size="13" font-weight="bold">%s</text>' % (x0 - 20, title))
        top = max(v for _, g in groups for _, v in g) or 1
        plot_h, base = height - 80, height - 20
        nbars = sum(len(g) for _, g in groups) + len(groups) - 1
        bw = (width - 70) / max(nbars, 1)
        x = x0
        for label, g in groups:
            gx = x
            for c, v in g:
                h = max(1.0, plot_h * v / top)
                out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                           % (x, base - h, bw * 0.9, h, COLOURS[c]))
                out.append('<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>'
                           % (x + bw * 0.45, base - h - 4, fmt % v))
                out.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>'
                           % (x + bw * 0.45, base + 13, c))
                x += bw
            if label:
                out.append('<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>'
                           % ((gx + x) / 2, base + 28, label))
            x += bw
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (x0 - 5, base, x0 + width - 60, base))
    cfg = res.get("config", {})
    out.append('<text x="20" y="%d" font-size="10" fill="#4a5568">make bench, %s: ConfigMaps of 1 KiB over TLS, '
               'median of %s runs; ceiling = openssl s_client reading the same stream</text>'
               % (height + 30, cfg.get("started", "?"), cfg.get("reps", "?")))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# =========================================================================== main

def main():
    env = os.environ
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", default=env.get("BENCH_QUICK", "") not in ("", "0"),
                    help="one repetition, 10 s idle, 20,000 events (BENCH_QUICK=1)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per figure (default 3; BENCH_REPS)")
    ap.add_argument("--idle", type=float, default=None, help="seconds of idle watch (default 60; BENCH_IDLE)")
    ap.add_argument("--events", type=int, default=None, help="events in the stream (default 100000; BENCH_EVENTS)")
    ap.add_argument("--callgrind-events", type=int, default=None, help="N of the N / 2N callgrind runs (5000)")
    ap.add_argument("--syscalls", action="store_true",
                    help="throughput: count each client's system calls per event with perf stat")
    ap.add_argument("--only", default="", help="comma-separated parts: " + ",".join(PARTS))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "x86_64", "kreflect"))
    ap.add_argument("--kreflect-10k", default=os.path.join(ROOT, "build", "x86_64-relist", "kreflect"))
    a = ap.parse_args()

    def pick(val, envname, normal, quick):
        if val is not None:
            return val
        if env.get(envname):
            try:
                return type(normal)(env[envname])
            except ValueError:
                ap.error("%s=%r is not a number" % (envname, env[envname]))
        return quick if a.quick else normal
    a.reps = pick(a.reps, "BENCH_REPS", 3, 1)
    a.idle = pick(a.idle, "BENCH_IDLE", 60.0, 10.0)
    a.events = pick(a.events, "BENCH_EVENTS", 100000, 20000)
    a.callgrind_events = pick(a.callgrind_events, "BENCH_CALLGRIND_EVENTS", 5000, 1000)
    a.sync_sizes = (1000, 10000)
    if a.reps < 1 or a.idle < 1 or a.events < 100 or a.callgrind_events < 100:
        ap.error("--reps >= 1, --idle >= 1, --events >= 100, --callgrind-events >= 100")
    parts = [p for p in a.only.split(",") if p] or list(PARTS)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        ap.error("unknown part(s) %s; the parts: %s" % (", ".join(bad), ", ".join(PARTS)))
    a.out = os.path.abspath(a.out)
    b = Bench(a)
    b.prerequisites(parts)
    t0 = time.monotonic()
    status = 0
    try:
        for part in PARTS:
            if part in parts:
                t = time.monotonic()
                getattr(b, "part_" + part)()
                log("%s done in %.0f s" % (part, time.monotonic() - t))
    except BenchError as e:
        log("FAILED: %s (logs in %s)" % (e, b.logs))
        status = 1
    finally:
        b.stop()
    b.results["config"]["seconds"] = round(time.monotonic() - t0, 1)
    b.results["config"]["loadavg_at_end"] = os.getloadavg()
    rep = Report(b.results)
    rep.build()
    b.results["targets"] = [{"status": s, "target": t} for s, t in rep.targets]
    md = rep.markdown()
    if b.results.get("sidecar"):
        import sidecar_bench
        md += "\n" + sidecar_bench.markdown(b.results["sidecar"], a.idle, sys.modules[__name__])
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(b.results, f, indent=1, default=str)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(md)
    with open(os.path.join(a.out, "bench.svg"), "w") as f:
        f.write(svg(b.results))
    print(md)
    cg = b.results.get("callgrind")
    if cg:
        for mode in ("tls", "plain"):
            print("callgrind, %s: instructions per event by function ((2N run - N run) / N):" % mode)
            for fn, v in cg[mode]["profile"]:
                print("  %10.0f  %s" % (v, fn))
    missed = sum(1 for s, _ in rep.targets if s != "met")
    print("bench: %d targets met, %d missed; %.0f s; build/bench/results.json, table.md, bench.svg"
          % (len(rep.targets) - missed, missed, b.results["config"]["seconds"]))
    return status


if __name__ == "__main__":
    sys.exit(main())
