#!/usr/bin/env python3
"""A relay tree under faults: the test API server -> relay kreflect -> second-level relay
kreflect -> N downstream kreflects, kubectl -w, client-go's Reflector, python3-kubernetes
(tests/bench/peer_python.py: a list, then watch.Watch().stream) and client-node's informer
(tests/bench/peer_node.js).

    python3 tests/relay/test_relay.py [--kreflect build/kreflect] [--downstreams 50] [--tls]

With --tls both relays serve TLS (the test server's certificate and token) and every
link below relay1 is TLS with that CA and token; a relay holds KR_SERVE_TLS_CONNS (512)
TLS sessions in a default build, so --tls takes at most 508 downstreams.

Links between levels go through small TCP proxies this script can cut. Faults, one after
the other, each followed by changes at the upstream: a link cut at each level, the
upstream's history compacted while the relay is away (410), the upstream restarted, each
relay SIGKILLed and restarted with its state directory, a downstream SIGKILLed and
restarted with its own. After each, every watcher must converge to the upstream's objects
(name, resourceVersion and data), and the requests that start a sync (LIST or watch-list:
a SYNCED line from a kreflect, client-go or python3-kubernetes, client-node's "listed" line, a list in
the upstream's log) are counted per
level and compared with what the reflector's rules allow (src/README.md "The reflector":
a cut link resumes the watch; a 410 relists). tests/relay/README.md says what each step
expects and why. The last line is "N passed, N failed".
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess, free_port  # noqa: E402

KUBECTL = os.environ.get("KR_KUBECTL") or os.path.join(ROOT, "build", "deps", "trixie", "usr", "bin", "kubectl")
CLIENT_GO = os.path.join(ROOT, "build", "peers", "client-go-peer")
PEER_PYTHON = os.path.join(ROOT, "tests", "bench", "peer_python.py")
PEER_NODE = os.path.join(ROOT, "tests", "bench", "peer_node.js")
# Where `make test-deps` installs @kubernetes/client-node.
NODE_MODULES = os.environ.get("KR_NODE_MODULES") or os.path.join(ROOT, "build", "bench", "npm")
NS = "default"
SYNCED_BY = re.compile(r": synced \d+ objects at resourceVersion \S+ by ")

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % what, flush=True)
    else:
        failed += 1
        print("FAIL %s" % what, flush=True)
    return ok


def wait_until(pred, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)


class Proxy:
    """127.0.0.1:port -> 127.0.0.1:target, one pair of threads per connection.
    cut(): every open connection is reset and new ones are refused until heal()."""

    def __init__(self, target):
        self.target = target
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(128)
        self.port = self.ls.getsockname()[1]
        self.down = False
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            if self.down:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self.lock:
                self.conns.append((c, u))
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.down = True
        with self.lock:
            conns, self.conns = self.conns, []
        for pair in conns:
            for s in pair:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.close()
                except OSError:
                    pass

    def heal(self):
        self.down = False


class Proc:
    """A watcher whose stdout is kreflect's JSON lines (kreflect, client-go's peer) or
    kubectl's stream of JSON documents; folded into {name: (rv, data)}."""

    def __init__(self, name, cmd, workdir, multiline=False, keeps_state=False, list_line=None):
        self.name, self.cmd, self.workdir, self.multiline = name, cmd, workdir, multiline
        self.keeps_state, self.list_line = keeps_state, list_line
        self.lock = threading.Lock()
        self.starts = 0
        self.mirror = {}
        self.synced = 0
        self.start()

    def start(self):
        """(Re)starts it. A kreflect with a state directory prints only what changed
        since its snapshot, so its mirror so far is kept; any other starts empty."""
        self.starts += 1
        if not self.keeps_state:
            self.mirror = {}
        self.err = open(os.path.join(self.workdir, "%s.%d.err" % (self.name, self.starts)), "wb")
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err)
        threading.Thread(target=self._read, args=(self.p,), daemon=True).start()

    def _apply(self, ev):
        t = ev.get("type")
        with self.lock:
            if t == "SYNCED":
                self.synced += 1
                return
            o = ev.get("object") or {}
            md = o.get("metadata") or {}
            if t in ("ADDED", "MODIFIED", "RESTORED"):
                self.mirror[md.get("name")] = (md.get("resourceVersion"), o.get("data") or {})
            elif t == "DELETED":
                self.mirror.pop(md.get("name"), None)

    def _read(self, p):
        out = open(os.path.join(self.workdir, "%s.%d.out" % (self.name, self.starts)), "wb")
        dec = json.JSONDecoder()
        buf = ""
        for raw in iter(p.stdout.readline, b""):
            out.write(raw)
            if not self.multiline:
                try:
                    self._apply(json.loads(raw))
                except ValueError:
                    pass
                continue
            buf += raw.decode()
            while True:
                s = buf.lstrip()
                try:
                    ev, end = dec.raw_decode(s)
                except ValueError:
                    break
                self._apply(ev)
                buf = s[end:]
        out.close()

    def lists(self):
        """kreflect: the syncs that listed (a LIST or a watch-list), from its log lines;
        a sync by a watch from the restored state is not one. A peer with list_line:
        its stderr lines that match it (client-node's informer relists without a new
        SYNCED). Others: SYNCED lines."""
        if not self.keeps_state and not self.list_line:
            return self.synced
        n = 0
        for i in range(1, self.starts + 1):
            with open(os.path.join(self.workdir, "%s.%d.err" % (self.name, i)), errors="replace") as f:
                if self.list_line:
                    n += sum(1 for line in f if self.list_line.search(line))
                else:
                    n += sum(1 for line in f if SYNCED_BY.search(line) and "from the restored state" not in line)
        return n

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        """SIGTERM (a kreflect writes its last snapshot), SIGKILL after 5 s."""
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()

    def view(self):
        with self.lock:
            return dict(self.mirror)


class Tree:
    def __init__(self, a, workdir):
        self.a, self.dir = a, workdir
        self.seq = 0
        self.lists_before = 0
        self.updir = os.path.join(workdir, "upstream")
        os.makedirs(self.updir)
        self.up_port = free_port()
        self.srv = ServerProcess(["--port", str(self.up_port), "--initial", "20", "--bookmark-interval", "1"],
                                 workdir=self.updir)
        self.ctl = self.srv.control
        self.p1 = Proxy(self.up_port)
        self.r1_port = free_port()
        scheme = "https" if a.tls else "http"
        serve = []
        if a.tls:
            serve = ["--listen-cert-file", os.path.join(self.updir, "server.crt"),
                     "--listen-key-file", os.path.join(self.updir, "server.key"),
                     "--listen-token-file", self.srv.ready["token_file"]]
        self.relay1 = self.kreflect("relay1", "https://127.0.0.1:%d" % self.p1.port, tls=True,
                                    extra=["--listen", "127.0.0.1:%d" % self.r1_port,
                                           "--listen-bookmark-interval", "1"] + serve)
        self.wait_ready(self.r1_port)
        self.p2 = Proxy(self.r1_port)
        self.r2_port = free_port()
        self.relay2 = self.kreflect("relay2", "%s://127.0.0.1:%d" % (scheme, self.p2.port), tls=a.tls,
                                    extra=["--listen", "127.0.0.1:%d" % self.r2_port,
                                           "--listen-bookmark-interval", "1"] + serve)
        self.wait_ready(self.r2_port)
        leaf = "%s://127.0.0.1:%d" % (scheme, self.r2_port)
        self.downs = [self.kreflect("down%02d" % i, leaf, tls=a.tls) for i in range(a.downstreams)]
        self.others = []
        with open(self.srv.ready["token_file"]) as f:
            tok = f.read().strip()
        kauth = ["--certificate-authority", self.srv.ready["ca"], "--token", tok] if a.tls else []
        gauth = ["--certificate-authority", self.srv.ready["ca"], "--token-file",
                 self.srv.ready["token_file"]] if a.tls else []
        if os.access(KUBECTL, os.X_OK):
            self.others.append(Proc("kubectl", [KUBECTL, "--server", leaf] + kauth + ["-n", NS, "get", "configmaps",
                                                "-w", "-o", "json", "--output-watch-events"], workdir,
                                    multiline=True))
        if os.access(CLIENT_GO, os.X_OK):
            self.others.append(Proc("client-go", [CLIENT_GO, "--server", leaf] + gauth + ["-n", NS, "configmaps"],
                                    workdir))
        # Its flags are required; over plain HTTP the CA is not used and relay2 asks for no token.
        self.others.append(Proc("python3-kubernetes", ["/usr/bin/python3", PEER_PYTHON, "--server", leaf,
                                                       "--certificate-authority", self.srv.ready["ca"],
                                                       "--token-file", self.srv.ready["token_file"], "-n", NS],
                                workdir))
        # client-node's informer: a list, then watches from the last resourceVersion it saw
        # (a clean end or a broken connection re-watches from there; a 410 relists).
        self.others.append(Proc("client-node", ["node", PEER_NODE, "--modules", NODE_MODULES, "--server", leaf,
                                                "--certificate-authority", self.srv.ready["ca"],
                                                "--token-file", self.srv.ready["token_file"], "-n", NS],
                                workdir, list_line=re.compile(r"^peer_node: listed ")))

    def kreflect(self, name, server, tls=False, extra=()):
        state = os.path.join(self.dir, name + ".state")
        cmd = [self.a.kreflect, "--server", server, "-n", NS, "--state-dir", state, "--state-interval", "1", "-v", "1"]
        if tls:
            cmd += ["--certificate-authority", self.srv.ready["ca"], "--token-file", self.srv.ready["token_file"]]
        return Proc(name, cmd + list(extra) + ["configmaps"], self.dir, keeps_state=True)

    def wait_ready(self, port, timeout=20):
        auth = b""
        if self.a.tls:
            with open(self.srv.ready["token_file"], "rb") as f:
                auth = b"Authorization: Bearer " + f.read().strip() + b"\r\n"

        def ready():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                    if self.a.tls:
                        c = ssl.create_default_context(cafile=self.srv.ready["ca"]).wrap_socket(
                            c, server_hostname="127.0.0.1")
                    c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + auth + b"\r\n")
                    return c.recv(64).startswith(b"HTTP/1.1 200")
            except OSError:
                return False
        return wait_until(ready, timeout)

    def watchers(self):
        return [self.relay1, self.relay2] + self.downs + self.others

    def truth(self):
        st = self.ctl.state(resource="configmaps", namespace=NS, objects=True)
        out = {}
        for k, o in st["objects"].items():
            obj = o.get("object") or o
            md = obj.get("metadata") or {}
            out[k.rsplit("/", 1)[1]] = (md.get("resourceVersion") or o.get("resourceVersion"), obj.get("data") or {})
        return out

    def converge(self, what, timeout=30):
        want = self.truth()
        bad = []

        def all_match():
            self.keep_clients()
            bad[:] = [w.name for w in self.watchers() if w.view() != want]
            return not bad
        ok = wait_until(all_match, timeout, 0.2)
        if not ok:
            w = next(x for x in self.watchers() if x.name == bad[0])
            got = w.view()
            diff = sorted(set(k for k in set(got) | set(want) if got.get(k) != want.get(k)))[:3]
            print("  %d watchers differ, e.g. %s: %s" % (len(bad), bad[0],
                  ["%s: %s vs upstream %s" % (k, got.get(k, ("-",))[0], want.get(k, ("-",))[0]) for k in diff]))
        return check(ok, "%s: all %d watchers hold the upstream's %d objects" % (what, len(self.watchers()), len(want)))

    def upstream_lists(self):
        """LIST and watch-list requests in the upstream's log (this server process's)."""
        return sum(1 for e in self.ctl.log() if "/configmaps" in e["path"] and
                   (not e.get("watch") or (e.get("query") or {}).get("sendInitialEvents") == "true"))

    def counts(self):
        """Lists so far at each level: the upstream's log, each kreflect's syncs that
        listed, client-go's Replace calls, kubectl's starts (each one lists)."""
        c = {"upstream lists": self.lists_before + self.upstream_lists(), "relay1 lists": self.relay1.lists(),
             "relay2 lists": self.relay2.lists(), "downstream lists": sum(d.lists() for d in self.downs)}
        for o in self.others:
            c[o.name + " lists"] = o.starts if o.name == "kubectl" else o.lists()
        return c

    def keep_clients(self):
        """kubectl get -w ends when its watch ends (as with any server), and python3-kubernetes'
        watch raises (the peer exits) when its connection breaks: start them again (each
        start lists: kubectl's counted by its starts, python3-kubernetes' by its SYNCED lines).
        client-node's peer re-watches by itself; should it exit, its new start's list counts."""
        for o in self.others:
            if o.name in ("kubectl", "python3-kubernetes", "client-node") and not o.alive():
                o.start()

    def change(self, tag, n=3):
        """n updates, one create and one delete (of the previous create)."""
        self.seq += 1
        for i in range(n):
            self.ctl.update("configmaps", NS, "cm-%05d" % i, data={"step": tag, "seq": str(self.seq)})
        self.ctl.create("configmaps", NS, "obj-%03d" % self.seq, data={"step": tag})
        if self.seq > 1:
            self.ctl.delete("configmaps", NS, "obj-%03d" % (self.seq - 1))

    def close(self):
        for w in self.watchers():
            w.stop()
        self.srv.stop()


def step(tree, name, fault, expect, at_most=()):
    """Runs fault(), changes the upstream, waits for convergence and compares the lists
    per level with expect ({counter: increase}; counters named in at_most may stay
    below it). Counters not named must not move."""
    before = tree.counts()
    fault()
    tree.change(name.split()[0])
    tree.converge(name)
    time.sleep(1.5)
    tree.keep_clients()
    after = tree.counts()
    inc = {k: after[k] - before[k] for k in after}
    print("  %s: %s" % (name, ", ".join("%s +%d" % kv for kv in inc.items())), flush=True)
    for k in inc:
        want = expect.get(k, 0)
        if k in at_most:
            check(inc[k] <= want, "%s: %s +%d (at most +%d)" % (name, k, inc[k], want))
        else:
            check(inc[k] == want, "%s: %s +%d (expected +%d)" % (name, k, inc[k], want))
    return inc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--downstreams", type=int, default=50)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--tls", action="store_true", help="TLS (with the CA and token) below relay1")
    a = ap.parse_args()
    if a.tls and a.downstreams > 508:
        ap.error("--tls takes at most 508 downstreams: a relay holds 512 TLS sessions (KR_SERVE_TLS_CONNS), "
                 "and kubectl, client-go, python3-kubernetes and client-node take four")
    t0 = time.monotonic()
    for need, how in ((a.kreflect, "make build/kreflect"), (KUBECTL, "make peers-deps"), (CLIENT_GO, "make peers")):
        if not check(os.access(need, os.X_OK), "%s is there (%s)" % (os.path.relpath(need, ROOT), how)):
            print("%d passed, %d failed" % (passed, failed))
            return 1
    r = subprocess.run(["/usr/bin/python3", "-c", "import kubernetes"], capture_output=True, text=True)
    if not check(r.returncode == 0, "python3-kubernetes is there (make test-deps)%s" % (
            "" if r.returncode == 0 else ": " + r.stderr.strip().splitlines()[-1])):
        print("%d passed, %d failed" % (passed, failed))
        return 1
    pkg = os.path.join(NODE_MODULES, "node_modules", "@kubernetes", "client-node", "package.json")
    if not check(shutil.which("node") and os.path.exists(pkg),
                 "node and @kubernetes/client-node in %s are there (make test-deps)" % os.path.relpath(NODE_MODULES, ROOT)):
        print("%d passed, %d failed" % (passed, failed))
        return 1
    workdir = tempfile.mkdtemp(prefix="kreflect-relay-")
    tree = Tree(a, workdir)
    try:
        run(tree)
    finally:
        tree.close()
        if a.keep or failed:
            print("work directory kept: %s" % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print("took %.0f s" % (time.monotonic() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def run(tree):
    tree.converge("start", timeout=60)
    c = tree.counts()
    check(all(v == (len(tree.downs) if k == "downstream lists" else 1) for k, v in c.items()),
          "start: one list each (%s)" % c)
    step(tree, "changes", lambda: None, {})
    time.sleep(1.5)     # past --state-interval: every state directory has a snapshot

    def outage(down, up, seconds):
        """down(), changes at the upstream meanwhile, then up() after seconds."""
        def f():
            down()
            tree.change("while-away")
            time.sleep(seconds)
            up()
        return f

    def cut(proxy):
        return outage(proxy.cut, proxy.heal, 2)

    def kill(p, seconds=1.0):
        return outage(p.kill, p.start, seconds)

    # A cut link: the watch resumes from its resourceVersion, which the level above
    # still holds (the upstream's history; the relay's ring): nobody lists.
    step(tree, "cut relay2-relay1", cut(tree.p2), {})
    step(tree, "cut relay1-upstream", cut(tree.p1), {})

    # 410: the upstream forgot relay1's resourceVersion. relay1 lists once; what changed
    # reaches the levels below as events on their watches: nobody else lists.
    def compact_while_away():
        tree.p1.cut()
        tree.change("gone")
        tree.ctl.compact()
        time.sleep(1)
        tree.p1.heal()
    step(tree, "410 at the upstream", compact_while_away, {"upstream lists": 1, "relay1 lists": 1})

    def watch_error():
        tree.ctl.fault(kind="watch_error", code=410, watch=True)
        tree.ctl.drop_watches()
    step(tree, "ERROR 410 event", watch_error, {"upstream lists": 1, "relay1 lists": 1})

    # relay1 restarts from its state and watches the upstream from its snapshot's
    # resourceVersion; relay2 watches relay1 from the same one: no list anywhere.
    step(tree, "relay1 SIGKILL", kill(tree.relay1), {})
    # relay2 restarts from its state; relay1 still holds the gap, so relay2 does not
    # list. Its ring of changes comes back from its state directory, so each watcher
    # below it resumes from the resourceVersion it holds: no list. kubectl's -w ends
    # with the connection and is started again, and a start of kubectl is a list.
    # python3-kubernetes' watch raises if the break comes mid-stream (the peer is started
    # again: a list) and re-watches from its resourceVersion if it reads as a clean end.
    step(tree, "relay2 SIGKILL", kill(tree.relay2), {"kubectl lists": 1, "python3-kubernetes lists": 1},
         at_most=("python3-kubernetes lists",))
    # A downstream restarts from its state; relay2's ring holds the gap: no list.
    step(tree, "downstream SIGKILL", kill(tree.downs[0], 0.5), {})

    # The test server keeps nothing across a restart: it comes back with the same
    # objects created again (new uids) at a higher resourceVersion, like a restore.
    # relay1's resourceVersion is older than its history: 410, one list; the new
    # objects go down as DELETED and ADDED events.
    def restart_upstream():
        objs = tree.truth()
        rv = int(tree.ctl.rv())
        tree.lists_before += tree.upstream_lists()
        tree.srv.stop()
        tree.srv = ServerProcess(["--port", str(tree.up_port), "--start-rv", str(rv + 1000),
                                  "--bookmark-interval", "1"], workdir=tree.updir)
        tree.ctl = tree.srv.control
        for name, (_, data) in sorted(objs.items()):
            tree.ctl.create("configmaps", NS, name, data=data)
    step(tree, "upstream restart", restart_upstream, {"upstream lists": 1, "relay1 lists": 1})


if __name__ == "__main__":
    sys.exit(main())
