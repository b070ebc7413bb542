#!/usr/bin/env python3
"""Real Kubernetes clients against kreflect's local endpoint (--listen).

    python3 tests/serve/clients.py [--kreflect build/kreflect] [--changes N]

Starts the test API server with 50 ConfigMaps and kreflect with --listen on a
loopback port, then points the two clients `make bench` uses at kreflect instead
of the API server: python3-kubernetes (list, then watch.Watch().stream from the
list's resourceVersion: tests/bench/peer_python.py) and @kubernetes/client-node
1.4.0's informer (tests/bench/peer_node.js, from build/bench/npm, which `make
test-deps` installs). Both print every change as a JSON line; each stream is folded
into a mirror (namespace/name -> resourceVersion).

Checks, each printed as "ok ..." or "FAIL ...":
  1. both clients sync from kreflect and equal the server's state;
  2. after N changes upstream (updates, creates, deletes), both converge on the
     server's new state, through their watches on kreflect;
  3. the API server is stopped: both keep their watches open on kreflect
     (kreflect_serve_watchers stays 2 for 10 s), neither process exits, and
     a fresh list through python3-kubernetes still returns the whole mirror.
The last line is "N passed, N failed".
"""

import argparse
import http.client
import json
import os
import shutil
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


class Peer:
    def __init__(self, name, argv, logdir):
        self.name, self.lines, self.lock = name, [], threading.Lock()
        self.err = open(os.path.join(logdir, name + ".err"), "wb")
        self.out = open(os.path.join(logdir, name + ".out"), "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.out.write(raw)
            self.out.flush()
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            with self.lock:
                self.lines.append(ev)

    def mirror(self):
        m = {}
        with self.lock:
            lines = list(self.lines)
        for ev in lines:
            if ev.get("type") == "SYNCED":
                continue
            md = ev["object"]["metadata"]
            k = "%s/%s" % (md["namespace"], md["name"])
            if ev["type"] == "DELETED":
                m.pop(k, None)
            else:
                m[k] = md["resourceVersion"]
        return m

    def synced(self):
        with self.lock:
            return any(e.get("type") == "SYNCED" for e in self.lines)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def metric(text, name):
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--modules", default=os.path.join(ROOT, "build", "bench", "npm"))
    a = ap.parse_args()
    passed = failed = 0
    work = os.path.join(ROOT, "build", "test", "serve-clients")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    def result(ok, what):
        nonlocal passed, failed
        print(("ok " if ok else "FAIL ") + what, flush=True)
        if ok:
            passed += 1
        else:
            failed += 1
        return ok

    srv = ServerProcess(["--initial", "50", "--initial-size", "64", "--bookmark-interval", "5"],
                        workdir=tempfile.mkdtemp(prefix="serve-clients-", dir=work))
    ctl = srv.control
    port = free_port()
    kerr = open(os.path.join(work, "kreflect.err"), "wb")
    kr = subprocess.Popen([a.kreflect, "--server", srv.ready["server"], "--certificate-authority",
                           srv.ready["ca"], "--token-file", srv.ready["token_file"], "-o", "none",
                           "--listen", "127.0.0.1:%d" % port, "--listen-bookmark-interval", "5",
                           "configmaps"], stderr=kerr, stdout=subprocess.DEVNULL)
    peers = []
    try:
        if not wait_for(lambda: _ok(port, "/readyz"), 15):
            result(False, "kreflect did not become ready")
            return 1
        url = "http://127.0.0.1:%d" % port
        common = ["--server", url, "--certificate-authority", srv.ready["ca"], "--token-file",
                  srv.ready["token_file"]]
        peers.append(Peer("python3-kubernetes", ["/usr/bin/python3", os.path.join(ROOT, "tests", "bench",
                                                                                 "peer_python.py")] + common,
                          work))
        if os.path.isdir(os.path.join(a.modules, "node_modules", "@kubernetes", "client-node")):
            peers.append(Peer("client-node", ["node", os.path.join(ROOT, "tests", "bench", "peer_node.js"),
                                              "--modules", a.modules] + common, work))
        else:
            result(False, "client-node is not installed in %s (make test-deps installs it)" % a.modules)

        def server_state():
            st = ctl.state(resource="configmaps", namespace="default")
            return {k.split("/", 1)[1] if k.count("/") > 1 else k: v["resourceVersion"]
                    for k, v in st["objects"].items()}

        want = server_state()
        for p in peers:
            ok = wait_for(lambda: p.synced() and p.mirror() == want, 30)
            result(ok, "%s synced from kreflect: %d objects, equal to the server" % (p.name, len(p.mirror())))
        # Changes upstream while the clients watch kreflect.
        for i in range(a.changes):
            k = i % 4
            if k == 0:
                ctl.update("configmaps", "default", "cm-%05d" % (i % 50), data={"round": str(i)})
            elif k == 1:
                ctl.create("configmaps", "default", "new-%05d" % i, data={"i": str(i)})
            elif k == 2:
                ctl.delete("configmaps", "default", "new-%05d" % (i - 1))
            else:
                ctl.update("configmaps", "default", "cm-%05d" % ((i * 7) % 50), data={"r": str(i)})
        want = server_state()
        for p in peers:
            ok = wait_for(lambda: p.mirror() == want, 30)
            m = p.mirror()
            result(ok, "%s converged after %d upstream changes: %d objects, %d differ"
                   % (p.name, a.changes, len(m), sum(1 for k in set(m) | set(want) if m.get(k) != want.get(k))))
        # The uplink goes away.
        srv.stop()
        t0 = time.monotonic()
        watchers = []
        while time.monotonic() - t0 < 10:
            st, text = get(port, "/metrics")
            watchers.append(metric(text, "kreflect_serve_watchers"))
            time.sleep(1)
        alive = [p.name for p in peers if p.proc.poll() is None]
        result(all(w == len(peers) for w in watchers) and len(alive) == len(peers),
               "upstream stopped: for 10 s, %s local watchers open (every second: %s), clients running: %s"
               % (len(peers), watchers, alive))
        r = subprocess.run(["/usr/bin/python3", "-c", """
import sys
from kubernetes import client
c = client.Configuration(); c.host = sys.argv[1]
api = client.CoreV1Api(client.ApiClient(c))
lst = api.list_namespaced_config_map("default")
print(len(lst.items))
""", url], capture_output=True, text=True, timeout=60)
        n = int(r.stdout.strip() or -1)
        result(r.returncode == 0 and n == len(want),
               "upstream stopped: python3-kubernetes lists %d objects from kreflect (the mirror holds %d)"
               % (n, len(want)))
        for p in peers:
            result(p.mirror() == want, "%s still holds the server's last state" % p.name)
    finally:
        for p in peers:
            p.stop()
        if kr.poll() is None:
            kr.terminate()
            kr.wait(10)
        try:
            srv.stop()
        except Exception:
            pass
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


def _ok(port, path):
    try:
        return get(port, path)[0] == 200
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
