#!/usr/bin/env python3
"""kreflect against a real Kubernetes API server: the k8s.io/apiserver library
on a real etcd (tests/realapi/server/, built by `make realapi`).

    python3 tests/realapi/run.py [TARGET] [--basic] [NAME ...]

TARGET picks the binary as tests/e2e/run.sh does: x86_64 (default) ->
build/kreflect, asan -> build/asan/kreflect, aarch64 and armv7 ->
build/TARGET/kreflect under qemu-user, where only the basic cases run
(--basic chooses them for any target; NAME overrides it). NAME selects
cases by substring.
One etcd and two API server processes on it are shared by every case: A, the
one kreflect talks to (killed, restarted, its tokens changed), and B, through
which the test writes and kubectl reads, so writes go on while A is down; C,
without the watch cache (every LIST from etcd, in pages), starts for the cases
that need it.
Each case works in a namespace of its own and ends by checking that
kreflect's mirror (its stdout folded) equals what kubectl reads from the
server. Prints "ok NAME" or "FAIL NAME: reason"; the last line is
"N passed, N failed". Artifacts: build/test/realapi-<target>/.
"""

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until  # noqa: E402

RA = os.path.join(ROOT, "build", "realapi")
SERVER = os.path.join(RA, "server")
ETCD = os.path.join(RA, "bin", "etcd")
ETCDCTL = os.path.join(RA, "bin", "etcdctl")
KUBECTL = os.path.join(ROOT, "build", "deps", "trixie", "usr", "bin", "kubectl")
PEER = os.path.join(ROOT, "build", "peers", "client-go-peer")
QEMU = {"aarch64": "qemu-aarch64", "armv7": "qemu-arm"}
CASES = []
TARGET = "x86_64"


def case(name, basic=False):
    def deco(fn):
        CASES.append((name, fn, basic))
        return fn
    return deco


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_certs(d):
    """A CA, the servers' certificate for 127.0.0.1 and a client certificate."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", d + "/ca.key", "-out", d + "/ca.crt", "-days", "2",
            "-subj", "/CN=kreflect-realapi-ca")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                      ("client", "extendedKeyUsage=clientAuth\n")):
        with open(d + "/" + name + ".ext", "w") as f:
            f.write(ext)
        openssl("req", *ec, "-keyout", d + "/" + name + ".key", "-out", d + "/" + name + ".csr",
                "-subj", "/CN=kreflect-" + name)
        openssl("x509", "-req", "-in", d + "/" + name + ".csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
                "-CAcreateserial", "-out", d + "/" + name + ".crt", "-days", "2", "-extfile", d + "/" + name + ".ext")


class Cluster:
    """etcd and the API servers A (kreflect's) and B (the test's)."""

    def __init__(self, d):
        self.d = d
        os.makedirs(d)
        make_certs(d)
        self.write_tokens({"test-token": "tester", "kreflect-token": "kreflect"})
        self.etcd_port = e2e.local_port()
        self.etcd_url = "http://127.0.0.1:%d" % self.etcd_port
        peer = "http://127.0.0.1:%d" % e2e.local_port()
        self.etcd = self.spawn("etcd", [ETCD, "--data-dir", d + "/etcd", "--listen-client-urls", self.etcd_url,
                                        "--advertise-client-urls", self.etcd_url, "--listen-peer-urls", peer,
                                        "--initial-advertise-peer-urls", peer, "--initial-cluster", "default=" + peer,
                                        "--log-level", "warn"])
        self.ports = {"A": e2e.local_port(), "B": e2e.local_port(), "C": e2e.local_port(), "D": e2e.local_port()}
        self.procs = {}
        self.ctx = ssl.create_default_context(cafile=d + "/ca.crt")
        for n in ("A", "B"):
            self.start(n)

    def spawn(self, name, cmd):
        log = open(os.path.join(self.d, name + ".log"), "ab")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        e2e.remember(p)
        return p

    def write_tokens(self, tokens):
        """The servers' token file (they re-read it when it changes)."""
        tmp = self.d + "/tokens.csv.tmp"
        with open(tmp, "w") as f:
            for i, (tok, user) in enumerate(sorted(tokens.items())):
                f.write("%s,%s,%d\n" % (tok, user, i + 1))
        os.replace(tmp, self.d + "/tokens.csv")

    def url(self, n="A"):
        return "https://127.0.0.1:%d" % self.ports[n]

    def start(self, n):
        self.procs[n] = self.spawn("apiserver-" + n, [
            SERVER, "--secure-port", str(self.ports[n]), "--etcd-servers", self.etcd_url,
            "--tls-cert-file", self.d + "/server.crt", "--tls-private-key-file", self.d + "/server.key",
            "--token-auth-file", self.d + "/tokens.csv", "--client-ca-file", self.d + "/ca.crt",
            "--watch-cache=%s" % ("false" if n == "C" else "true")])
        wait_until(lambda: self.ready(n), 60, "API server %s's /readyz" % n, 0.2)

    def ready(self, n):
        try:
            return self.call("GET", "/readyz", n=n, raw=True) == b"ok"
        except (OSError, Fail):
            return False

    def kill(self, n):
        """SIGKILL: the server is gone at once (SIGTERM keeps watches open for long)."""
        p = self.procs.pop(n)
        p.kill()
        p.wait()
        e2e.forget(p)

    def call(self, method, path, body=None, n="B", raw=False, ok=(200, 201)):
        c = http.client.HTTPSConnection("127.0.0.1", self.ports[n], context=self.ctx, timeout=30)
        try:
            c.request(method, path, body=json.dumps(body) if body is not None else None,
                      headers={"Authorization": "Bearer test-token", "Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if r.status not in ok:
            raise Fail("%s %s: %d %s" % (method, path, r.status, data[:300]))
        return data if raw else json.loads(data)

    # ---- objects, through B
    def namespace(self, ns):
        self.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})

    def cm_path(self, ns, name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (ns, "/" + name if name else "")

    def create(self, ns, name, data=None, labels=None):
        md = {"name": name}
        if labels:
            md["labels"] = labels
        return self.call("POST", self.cm_path(ns), {"metadata": md, "data": data or {"k": name}})

    def patch(self, ns, name, patch):
        c = http.client.HTTPSConnection("127.0.0.1", self.ports["B"], context=self.ctx, timeout=30)
        c.request("PATCH", self.cm_path(ns, name), body=json.dumps(patch),
                  headers={"Authorization": "Bearer test-token", "Content-Type": "application/merge-patch+json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        check(r.status == 200, "PATCH %s/%s: %d %s" % (ns, name, r.status, data[:200]))

    def delete(self, ns, name):
        self.call("DELETE", self.cm_path(ns, name))

    def kubectl(self, *args, server=None, auth=True):
        cmd = [KUBECTL, "--server", server or self.url("B")]
        if auth:
            cmd += ["--certificate-authority", self.d + "/ca.crt", "--token", "test-token"]
        r = subprocess.run(cmd + list(args), capture_output=True, timeout=60,
                           env=dict(e2e.hermetic_env(self.d)))
        if r.returncode != 0:
            raise Fail("kubectl %s: %s" % (" ".join(args), r.stderr.decode()[-300:]))
        return r.stdout

    def server_state(self, ns, selector=None, server=None, auth=True):
        """namespace/name -> resourceVersion, as kubectl reads them."""
        args = ["get", "configmaps", "-n", ns, "-o", "json"]
        if selector:
            args += ["-l", selector]
        items = json.loads(self.kubectl(*args, server=server, auth=auth))["items"]
        return {"%s/%s" % (ns, o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in items}

    def requests(self, n):
        """LIST and WATCH requests for configmaps server n has answered
        (its apiserver_request_total)."""
        total = 0
        for line in self.call("GET", "/metrics", n=n, raw=True).decode().splitlines():
            if line.startswith("apiserver_request_total{") and 'resource="configmaps"' in line and \
                    ('verb="LIST"' in line or 'verb="WATCH"' in line):
                total += int(float(line.rpartition(" ")[2]))
        return total

    def etcd_rev(self):
        out = subprocess.run([ETCDCTL, "--endpoints", self.etcd_url, "endpoint", "status", "-w", "json"],
                             capture_output=True, check=True).stdout
        return json.loads(out)[0]["Status"]["header"]["revision"]

    def compact(self):
        subprocess.run([ETCDCTL, "--endpoints", self.etcd_url, "compact", str(self.etcd_rev())],
                       capture_output=True, check=True)

    def stop(self):
        for n in list(self.procs):
            self.kill(n)
        self.etcd.kill()
        self.etcd.wait()
        e2e.forget(self.etcd)


class Case:
    """What e2e.Kreflect needs of a scenario, and the mirror check."""

    def __init__(self, cl, name):
        self.cl, self.name, self.ns = cl, name, name
        self.dir = os.path.join(e2e.ART, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.token_file = os.path.join(self.dir, "token")
        with open(self.token_file, "w") as f:
            f.write("kreflect-token\n")
        os.chmod(self.token_file, 0o600)
        self.srv = type("Srv", (), {})()
        self.srv.ready = {"server": cl.url("A"), "ca": cl.d + "/ca.crt", "token_file": self.token_file}
        self.krs = []
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "realapi",
                       "clusters": [{"name": "realapi", "cluster": {"server": cl.url("A"),
                                                                    "certificate-authority": cl.d + "/ca.crt"}}],
                       "users": [{"name": "kreflect", "user": {"tokenFile": self.token_file}}],
                       "contexts": [{"name": "realapi", "context": {"cluster": "realapi", "user": "kreflect",
                                                                    "namespace": self.ns}}]}, f)
        cl.namespace(self.ns)

    def kreflect(self, *args, **kw):
        kr = e2e.Kreflect(self, ["-n", self.ns] + list(args), kw.pop("name", "kreflect%d" % (len(self.krs) + 1)),
                          **kw)
        self.krs.append(kr)
        return kr

    def paginated_on_c(self, page_size):
        """kreflect listing in pages from C (no watch cache), with --listen."""
        self.cl.start("C")
        self.srv.ready["server"] = self.cl.url("C")
        port = e2e.local_port()
        return self.kreflect("--watch-list", "off", "--page-size", str(page_size),
                             "--listen", "127.0.0.1:%d" % port), port

    def fill(self, n, prefix="cm", size=0):
        for i in range(n):
            self.cl.create(self.ns, "%s-%03d" % (prefix, i), {"k": "x" * size if size else "v%d" % i})

    # The e2e suite's check, with kubectl's view as the server's state.
    mirror_rvs = e2e.Scenario.mirror_rvs

    def server_objects(self):
        return self.cl.server_state(self.ns, self.selector)

    def check_mirror(self, kr, selector=None, timeout=20):
        self.selector = selector
        e2e.Scenario.check_mirror(self, kr, timeout)

    def sanitizer_check(self):
        for kr in self.krs:
            err = kr.stderr()
            check(not any(m in err for m in e2e.SANITIZER_MARKS), "sanitizer report in %s" % kr.err_path)

    def cleanup(self):
        for kr in self.krs:
            try:
                kr.kill()
            except Exception:   # noqa: BLE001 (cleanup goes on)
                pass


# =========================================================================== cases

@case("watch-list", basic=True)
def t_watch_list(s):
    s.fill(40)
    port = e2e.local_port()
    kr = s.kreflect("--listen", "127.0.0.1:%d" % port)
    kr.wait_synced(1, 30)
    s.check_mirror(kr)
    m = e2e.kreflect_metrics(port)
    check(m.get("kreflect_watch_lists_total", 0) == 1 and m.get("kreflect_lists_total", 0) == 0,
          "want one watch-list and no LIST: %s" % {k: v for k, v in m.items() if "lists" in k})


@case("rv0-list", basic=True)
def t_rv0_list(s):
    # The first LIST is at resourceVersion 0, as client-go's: the watch cache
    # answers it whole, whatever the limit.
    s.fill(40)
    port = e2e.local_port()
    kr = s.kreflect("--watch-list", "off", "--page-size", "7", "--listen", "127.0.0.1:%d" % port)
    kr.wait_synced(1, 30)
    s.check_mirror(kr)
    m = e2e.kreflect_metrics(port)
    check(m.get("kreflect_lists_total", 0) == 1, "want 1 LIST (RV 0, from the watch cache), got %s"
          % m.get("kreflect_lists_total"))


@case("paginated-list", basic=True)
def t_paginated(s):
    s.fill(40)
    kr, port = s.paginated_on_c(7)
    kr.wait_synced(1, 30)
    s.cl.create(s.ns, "later")
    kr.wait_event("ADDED", "later", 20)
    s.check_mirror(kr)
    m = e2e.kreflect_metrics(port)
    check(m.get("kreflect_lists_total", 0) == 6, "want 6 pages of 7 for 40 objects from etcd, got %s LISTs"
          % m.get("kreflect_lists_total"))


@case("continue-expired")
def t_continue_expired(s):
    # A continue token outlives etcd's compaction of its revision: 410, and
    # the pager's fallback, a full list.
    s.fill(100)
    kr, port = s.paginated_on_c(1)
    kr.wait(lambda ls: len(ls) >= 5, 30, "the first pages")
    kr.proc.send_signal(signal.SIGSTOP)       # between two pages
    try:
        s.cl.patch(s.ns, "cm-099", {"data": {"k": "compacted"}})
        s.cl.compact()
    finally:
        kr.proc.send_signal(signal.SIGCONT)
    kr.wait_synced(1, 60)
    s.check_mirror(kr)
    m = e2e.kreflect_metrics(port)
    check(m.get("kreflect_expired_total", 0) >= 1, "no 410 seen (the list ended before a compaction): %s"
          % {k: v for k, v in m.items() if "list" in k or "expired" in k})


@case("gzip")
def t_gzip(s):
    s.fill(300, size=1024)     # ~400 KB of JSON: the apiserver compresses a LIST over 128 KB
    got = {}
    for g in ("on", "off"):
        port = e2e.local_port()
        kr = s.kreflect("--watch-list", "off", "--gzip", g, "--listen", "127.0.0.1:%d" % port, name="gzip-" + g)
        kr.wait_synced(1, 30)
        s.check_mirror(kr)
        got[g] = e2e.kreflect_metrics(port).get("kreflect_received_bytes_total", 0)
        kr.stop()
    check(0 < got["on"] < got["off"] / 3, "received bytes: gzip on %d, off %d" % (got["on"], got["off"]))
    print("  gzip on %d bytes, off %d bytes" % (got["on"], got["off"]))


@case("live-events", basic=True)
def t_live(s):
    s.fill(5)
    kr = s.kreflect()
    kr.wait_synced(1, 30)
    s.cl.create(s.ns, "new")
    s.cl.patch(s.ns, "cm-001", {"data": {"k": "changed"}})
    s.cl.delete(s.ns, "cm-002")
    s.cl.create(s.ns, "cm-002", {"k": "again"})      # delete and recreate: a new uid
    s.cl.delete(s.ns, "cm-003")
    kr.wait_event("DELETED", "cm-003", 20)
    s.check_mirror(kr)
    ev = [e["type"] for e in kr.events_for("cm-002")]
    check(ev[-2:] == ["DELETED", "ADDED"], "cm-002 deleted and recreated: events %s" % ev)


@case("selector-labels")
def t_selector(s):
    s.fill(4)
    kr = s.kreflect("-l", "app=web")
    kr.wait_synced(1, 30)
    s.cl.patch(s.ns, "cm-000", {"metadata": {"labels": {"app": "web"}}})
    kr.wait_event("ADDED", "cm-000", 20)
    s.cl.patch(s.ns, "cm-000", {"metadata": {"labels": {"app": "db"}}})
    kr.wait_event("DELETED", "cm-000", 20)
    s.cl.create(s.ns, "web-1", labels={"app": "web"})
    s.check_mirror(kr, selector="app=web")


def synced_then_killed(s, n):
    """kreflect mirrors n objects, then A is SIGKILLed."""
    s.fill(n)
    kr = s.kreflect()
    kr.wait_synced(1, 30)
    s.cl.kill("A")
    return kr


@case("apiserver-sigkill-410")
def t_sigkill(s):
    kr = synced_then_killed(s, 10)
    for i in (1, 2, 3):
        s.cl.delete(s.ns, "cm-%03d" % i)
    s.cl.create(s.ns, "during-gap")
    s.cl.start("A")     # a new watch cache: kreflect's resourceVersion is too old (410)
    kr.wait_event("DELETED", "cm-003", 60)
    s.check_mirror(kr)
    check("410" in kr.stderr(), "no 410 from the rebuilt watch cache: %s" % kr.stderr_tail())


@case("port-refused")
def t_refused(s):
    kr = synced_then_killed(s, 5)
    time.sleep(5)       # reconnects refused meanwhile
    s.cl.delete(s.ns, "cm-000")
    s.cl.patch(s.ns, "cm-001", {"data": {"k": "while-down"}})
    s.cl.start("A")
    kr.wait_event("DELETED", "cm-000", 60)
    s.check_mirror(kr)
    check(kr.running(), "kreflect exited: %s" % kr.stderr_tail())


@case("etcd-frozen")
def t_etcd_stop(s):
    s.fill(5)
    kr = s.kreflect()
    kr.wait_synced(1, 30)
    s.cl.etcd.send_signal(signal.SIGSTOP)
    try:
        time.sleep(8)
    finally:
        s.cl.etcd.send_signal(signal.SIGCONT)
    wait_until(lambda: s.cl.ready("B"), 30, "B ready after etcd thawed", 0.3)
    s.cl.create(s.ns, "after-thaw")
    kr.wait_event("ADDED", "after-thaw", 30)
    s.check_mirror(kr)


@case("warm-restart")
def t_warm(s):
    s.fill(10)
    state = os.path.join(s.dir, "state")
    port = e2e.local_port()
    kr = s.kreflect("--state-dir", state, name="first")
    kr.wait_synced(1, 30)
    check(kr.stop() == 0, "first kreflect's exit code")
    s.cl.create(s.ns, "while-down")
    s.cl.patch(s.ns, "cm-001", {"data": {"k": "while-down"}})
    s.cl.delete(s.ns, "cm-002")
    kr2 = s.kreflect("--state-dir", state, "--listen", "127.0.0.1:%d" % port, name="second")
    kr2.wait_synced(1, 30)
    kr2.wait_event("DELETED", "cm-002", 20)
    changes = sorted((e["type"], e["object"]["metadata"]["name"]) for e in kr2.snapshot() if e.get("type") != "SYNCED")
    check(changes == [("ADDED", "while-down"), ("DELETED", "cm-002"), ("MODIFIED", "cm-001")],
          "want exactly the three changes made while down, got %s" % changes)
    m = e2e.kreflect_metrics(port)
    check(m.get("kreflect_lists_total", 0) == 0 and m.get("kreflect_watch_lists_total", 0) == 0,
          "a warm restart lists nothing: %s" % {k: v for k, v in m.items() if "lists" in k})
    # The mirror is the first run's folded with the second's.
    full, _ = e2e.fold(kr.snapshot() + kr2.snapshot())
    got = {k: o["metadata"]["resourceVersion"] for k, o in full.items()}
    check(got == s.cl.server_state(s.ns), "first + second run's events do not fold to kubectl's view")


@case("warm-restart-410")
def t_warm_410(s):
    s.fill(8)
    state = os.path.join(s.dir, "state")
    kr = s.kreflect("--state-dir", state, name="first")
    kr.wait_synced(1, 30)
    check(kr.stop() == 0, "first kreflect's exit code")
    s.cl.kill("A")
    s.cl.delete(s.ns, "cm-004")
    s.cl.create(s.ns, "while-down")
    s.cl.start("A")
    kr2 = s.kreflect("--state-dir", state, name="second")
    kr2.wait_synced(1, 60)
    kr2.wait_event("DELETED", "cm-004", 30)
    check("410" in kr2.stderr(), "no 410 from the rebuilt watch cache: %s" % kr2.stderr_tail())
    full, anomalies = e2e.fold(kr.snapshot() + kr2.snapshot())
    got = {k: o["metadata"]["resourceVersion"] for k, o in full.items()}
    check(got == s.cl.server_state(s.ns), "first + second run's events do not fold to kubectl's view")
    check(not anomalies, "anomalies: %s" % anomalies[:3])


@case("token-revoked")
def t_token(s):
    s.fill(3)
    kr = s.kreflect()
    kr.wait_synced(1, 30)
    # The server stops accepting kreflect's token; a restart ends the open watch.
    s.cl.write_tokens({"test-token": "tester", "kreflect-token-2": "kreflect"})
    s.cl.kill("A")
    s.cl.start("A")
    wait_until(lambda: "401" in kr.stderr(), 60, "kreflect to log the 401")
    s.cl.create(s.ns, "after-new-token")
    with open(s.token_file + ".tmp", "w") as f:
        f.write("kreflect-token-2\n")
    os.replace(s.token_file + ".tmp", s.token_file)
    kr.wait_event("ADDED", "after-new-token", 60)
    s.check_mirror(kr)
    s.cl.write_tokens({"test-token": "tester", "kreflect-token": "kreflect"})


@case("client-certificate", basic=True)
def t_client_cert(s):
    s.fill(3)
    kr = s.kreflect("--client-certificate", s.cl.d + "/client.crt", "--client-key", s.cl.d + "/client.key",
                    auth=False)
    kr.wait_synced(1, 30)
    s.cl.create(s.ns, "later")
    kr.wait_event("ADDED", "later", 20)
    s.check_mirror(kr)


@case("once-dir", basic=True)
def t_once(s):
    for i in range(6):
        s.cl.create(s.ns, "cm-%03d" % i, {"key-%d" % i: "value %d" % i})
    d = os.path.join(s.dir, "out")
    kr = s.kreflect("--once", "--dir", d)
    check(kr.wait_exit(60) == 0, "--once exit code %s: %s" % (kr.rc, kr.stderr_tail()))
    wait_files(d, labelled_data(s), timeout=1)


def wait_files(d, want, timeout=30):
    """The regular files under d (name -> content) become want."""
    def files():
        got = {}
        for f in os.listdir(d) if os.path.isdir(d) else ():
            p = os.path.join(d, f)
            if os.path.isfile(p) and not f.startswith("."):
                with open(p) as fh:
                    got[f] = fh.read()
        return got
    try:
        wait_until(lambda: files() == want, timeout, "the files in %s" % d, 0.2)
    except Fail:
        raise Fail("files in %s: %s, want %s" % (d, sorted(files()), sorted(want))) from None


def labelled_data(s, selector=None):
    """Every data key of the namespace's ConfigMaps (those selector matches)."""
    args = ["get", "configmaps", "-n", s.ns, "-o", "json"] + (["-l", selector] if selector else [])
    items = json.loads(s.cl.kubectl(*args))["items"]
    return {k: v for o in items for k, v in (o.get("data") or {}).items()}


@case("k8s-sidecar")
def t_sidecar(s):
    for i in range(3):
        s.cl.create(s.ns, "dash-%d" % i, {"d%d.json" % i: '{"n": %d}' % i}, labels={"dashboard": "1"})
    s.cl.create(s.ns, "other", {"other.json": "{}"})
    folder = os.path.join(s.dir, "dashboards")
    env = {"LABEL": "dashboard", "LABEL_VALUE": "1", "FOLDER": folder, "NAMESPACE": s.ns,
           "RESOURCE": "configmap", "METHOD": "WATCH", "HEALTH_PORT": "0", "KUBECONFIG": s.kubeconfig}
    err = open(os.path.join(s.dir, "sidecar.err"), "wb")
    sc = subprocess.Popen([e2e.BIN, "--k8s-sidecar"], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                          env=dict(e2e.hermetic_env(s.dir), **env))
    e2e.remember(sc)
    try:
        wait_files(folder, labelled_data(s, "dashboard=1"))
        s.cl.patch(s.ns, "dash-1", {"data": {"d1.json": '{"n": "changed"}'}})
        s.cl.delete(s.ns, "dash-2")
        s.cl.patch(s.ns, "other", {"metadata": {"labels": {"dashboard": "1"}}})
        wait_files(folder, labelled_data(s, "dashboard=1"))
    finally:
        sc.kill()
        sc.wait()
        e2e.forget(sc)


@case("gateway-example", basic=True)
def t_gateway(s):
    binary = os.path.join(ROOT, "build", TARGET, "tests", "gateway")
    check(os.access(binary, os.X_OK), "%s is missing: make TARGET=%s target-tests" % (binary, TARGET))
    s.cl.create(s.ns, "gw", {"log-level": "warn", "interval": "30", "enabled": "true"})
    sock = os.path.join(s.dir, "gateway.sock")
    out = open(os.path.join(s.dir, "gateway.out"), "wb")
    cmd = ([QEMU[TARGET]] if TARGET in QEMU else []) + [
        binary, "--kubeconfig", s.kubeconfig, "--namespace", s.ns, "--name", "gw", "--socket", sock]
    gw = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=e2e.hermetic_env(s.dir))
    e2e.remember(gw)

    def answer():
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(2)
        try:
            c.connect(sock)
            return c.recv(256).decode().strip()
        except OSError:
            return ""
        finally:
            c.close()
    try:
        wait_until(lambda: answer().startswith("log-level=warn interval=30 enabled=true"), 30,
                   "the gateway's first settings", 0.2)
        s.cl.patch(s.ns, "gw", {"data": {"log-level": "debug", "interval": "5", "enabled": "false"}})
        rv = json.loads(s.cl.kubectl("get", "configmap", "gw", "-n", s.ns, "-o", "json"))["metadata"]["resourceVersion"]
        want = "log-level=debug interval=5 enabled=false rv=%s" % rv
        wait_until(lambda: answer() == want, 30, "the gateway to answer %r" % want, 0.2)
    finally:
        gw.kill()
        gw.wait()
        e2e.forget(gw)


@case("secrets-dir")
def t_secrets(s):
    for i in range(3):
        s.cl.call("POST", "/api/v1/namespaces/%s/secrets" % s.ns,
                  {"metadata": {"name": "s-%d" % i}, "stringData": {"pw-%d" % i: "secret %d" % i}})
    d = os.path.join(s.dir, "out")
    kr = s.kreflect("--once", "--dir", d, resources=("secrets",))
    check(kr.wait_exit(60) == 0, "--once exit code %s: %s" % (kr.rc, kr.stderr_tail()))
    items = json.loads(s.cl.kubectl("get", "secrets", "-n", s.ns, "-o", "json"))["items"]
    check(all(o.get("type") == "Opaque" for o in items), "the server's secrets are not all Opaque")
    want = {k: base64.b64decode(v).decode() for o in items for k, v in (o.get("data") or {}).items()}
    wait_files(d, want, timeout=1)
    modes = {f: os.stat(os.path.join(d, f)).st_mode & 0o777 for f in want}
    check(set(modes.values()) == {0o600}, "secret files' modes: %s" % {f: oct(m) for f, m in modes.items()})


@case("namespaces")
def t_namespaces(s):
    # Cluster-scoped: every namespace, as kubectl lists them.
    kr = s.kreflect(resources=("namespaces",))
    kr.wait_synced(1, 30)
    s.cl.namespace(s.ns + "-extra")
    kr.wait_event("ADDED", s.ns + "-extra", 20)
    names = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
             for o in json.loads(s.cl.kubectl("get", "namespaces", "-o", "json"))["items"]}
    m, anomalies = kr.mirror()
    got = {k: o["metadata"]["resourceVersion"] for k, o in m.items()}
    check(got == names, "mirrored namespaces %s, kubectl %s" % (sorted(got), sorted(names)))
    check(not anomalies, "anomalies: %s" % anomalies[:3])


@case("listen-kubectl")
def t_listen(s):
    s.fill(12)
    port = e2e.local_port()
    kr = s.kreflect("--listen", "127.0.0.1:%d" % port)
    kr.wait_synced(1, 30)
    s.cl.patch(s.ns, "cm-005", {"data": {"k": "new"}})
    kr.wait_event("MODIFIED", "cm-005", 20)
    local = s.cl.server_state(s.ns, server="http://127.0.0.1:%d" % port, auth=False)
    check(local == s.cl.server_state(s.ns), "kubectl reads a different set from --listen than from the server")


@case("client-go-side-by-side")
def t_client_go(s):
    # Side by side on the same etcd, each on an API server of its own (A for
    # kreflect, D for client-go) so that each server's request counter is one
    # client's.
    check(os.access(PEER, os.X_OK), "%s is missing: run make peers" % PEER)
    s.fill(30)
    s.cl.start("D")
    base = {n: s.cl.requests(n) for n in ("A", "D")}
    kr = s.kreflect()
    cg_out = open(os.path.join(s.dir, "client-go.out"), "wb")
    cg = subprocess.Popen([PEER, "--server", s.cl.url("D"), "--certificate-authority", s.cl.d + "/ca.crt",
                           "--token-file", s.token_file, "-n", s.ns, "configmaps"],
                          stdout=cg_out, stderr=open(os.path.join(s.dir, "client-go.err"), "wb"),
                          env=dict(e2e.hermetic_env(s.dir), KUBE_FEATURE_WatchListClient="true"))
    e2e.remember(cg)
    try:
        kr.wait_synced(1, 30)
        for i in range(5):
            s.cl.patch(s.ns, "cm-%03d" % i, {"data": {"k": "n%d" % i}})
        s.cl.delete(s.ns, "cm-010")
        s.cl.create(s.ns, "cm-010", {"k": "again"})
        s.check_mirror(kr)
        want = s.cl.server_state(s.ns)

        def cg_state():
            with open(os.path.join(s.dir, "client-go.out"), "rb") as f:
                lines = [json.loads(x) for x in f if x.strip()]
            m, _ = e2e.fold(lines)
            return {k: o["metadata"]["resourceVersion"] for k, o in m.items()}
        wait_until(lambda: cg_state() == want, 30, "client-go's mirror to equal kubectl's view", 0.3)
    finally:
        cg.kill()
        cg.wait()
        e2e.forget(cg)
    kr.stop()
    # A watch is counted when it ends: both clients are gone, their watches end.
    time.sleep(1)
    used = {n: s.cl.requests(n) - base[n] for n in ("A", "D")}
    print("  LIST+WATCH requests: kreflect %d, client-go %d" % (used["A"], used["D"]))
    check(0 < used["A"] <= used["D"], "kreflect took %d requests, client-go %d" % (used["A"], used["D"]))


# =========================================================================== main

def main():
    args = sys.argv[1:]
    basic = "--basic" in args
    args = [a for a in args if a != "--basic"]
    target = "x86_64"
    if args and args[0] in ("x86_64", "asan", "aarch64", "armv7"):
        target = args.pop(0)
    binary = os.path.join(ROOT, "build", "kreflect" if target == "x86_64" else target + "/kreflect")
    e2e.ART = os.path.join(ROOT, "build", "test", "realapi-" + target)
    shutil.rmtree(e2e.ART, ignore_errors=True)
    os.makedirs(e2e.ART)
    e2e.BIN = binary
    global TARGET
    TARGET = target
    if target in ("aarch64", "armv7"):
        basic = basic or not args
        # A wrapper that execs qemu-user: same pid, same signals.
        e2e.BIN = os.path.join(e2e.ART, "kreflect")
        with open(e2e.BIN, "w") as f:
            f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (QEMU[target], binary))
        os.chmod(e2e.BIN, 0o755)
    for p, what in ((SERVER, "make realapi"), (ETCD, "make realapi"), (KUBECTL, "make peers-deps"),
                    (binary, "make")):
        if not os.access(p, os.X_OK):
            print("FAIL setup: %s is missing (%s)" % (p, what))
            print("0 passed, 1 failed")
            return 1
    with open(os.path.join(RA, "versions.txt")) as f:
        vers = [l.split() for l in f]
    print("real API server: " + ", ".join("%s %s" % (v[1], v[2]) for v in vers
                                          if v[1] in ("golang-k8s-apiserver-dev", "golang-etcd-server-dev",
                                                      "golang-1.27-go", "etcd-server")))
    sel = [c for c in CASES if (not basic or c[2]) and (not args or any(a in c[0] for a in args))]
    if not sel:
        print("FAIL setup: no case matches %s" % " ".join(args))
        print("0 passed, 1 failed")
        return 1
    passed = failed = 0
    cl = None
    try:
        cl = Cluster(os.path.join(e2e.ART, "cluster"))
        for name, fn, _ in sel:
            t0 = time.monotonic()
            s = None
            for n in ("C", "D"):
                if n in cl.procs:
                    cl.kill(n)
            try:
                s = Case(cl, name)
                fn(s)
                s.sanitizer_check()
                print("ok %s (%.1f s)" % (name, time.monotonic() - t0))
                passed += 1
            except Exception as e:  # noqa: BLE001 (a case's failure is reported, the next runs)
                print("FAIL %s: %s" % (name, e))
                if not isinstance(e, Fail):
                    traceback.print_exc(file=sys.stdout)
                failed += 1
            finally:
                if s:
                    s.cleanup()
                for n in ("A", "B"):
                    if n not in cl.procs:
                        cl.start(n)
    except Exception as e:  # noqa: BLE001
        print("FAIL setup: %s" % e)
        failed += 1
    finally:
        if cl:
            cl.stop()
        e2e.kill_all()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
