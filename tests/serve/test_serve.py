#!/usr/bin/env python3
"""The local endpoint (--listen) end to end: the real kreflect binary against the
test API server, and local clients against kreflect.

    python3 tests/serve/test_serve.py [BINARY] [-j N] [NAME ...]

Built on tests/e2e/test_e2e.py (its Scenario, Kreflect and runner); scenarios are
named Serve*, and their artifacts go to build/test/e2e-<target>/Serve*/. What is
checked: health and readiness (and the reasons readiness names), /metrics through
`promtool check metrics` and against the server's state, lists, gets, selectors
and paging against the server, watches (resume from a resourceVersion, bookmarks,
410 for a forgotten one, a slow reader dropped while upstream keeps flowing), every
error status, the unix socket's mode, the bearer token, the connection bound, and
kubectl (build/deps/trixie/usr/bin/kubectl, or $KR_KUBECTL). Over TLS: a downstream
kreflect, client-go (build/peers), python3-kubernetes and @kubernetes/client-node
(tests/serve/kube_python.py and kube_node.mjs, from a kubeconfig; make test-deps installs
both), by token and by client certificate; identities and the access file, and both
files changing under open watches.

The last line is "N passed, N failed".
"""

import http.client
import json
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until  # noqa: E402
from control import free_port  # noqa: E402
from clients import Peer  # noqa: E402

e2e.SCENARIOS = []
scenario = e2e.scenario
NS = "/api/v1/namespaces/default/configmaps"
CLIENT_GO = os.path.join(ROOT, "build", "peers", "client-go-peer")
KUBECTL = os.environ.get("KR_KUBECTL") or os.path.join(ROOT, "build", "deps", "trixie", "usr", "bin", "kubectl")


class Local:
    """kreflect with --listen on a free loopback port, synced."""

    def __init__(self, s, *args, resources=("configmaps",), wait=True, **kw):
        self.port = free_port()
        self.kr = s.kreflect("--listen", "127.0.0.1:%d" % self.port, *args, resources=resources, **kw)
        if wait:
            self.kr.wait_synced(len(resources), timeout=10)

    def req(self, path, method="GET", headers=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, headers=headers or {})
            r = c.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, path, want=200, **kw):
        st, _, body = self.req(path, **kw)
        check(st == want, "%s: status %d, not %d: %s" % (path, st, want, body[:300]))
        return json.loads(body)

    def raw(self, data, timeout=5):
        """Sends raw bytes; returns everything read until the server closes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as c:
            c.sendall(data)
            out = b""
            while True:
                try:
                    b = c.recv(65536)
                except socket.timeout:
                    break
                if not b:
                    break
                out += b
            return out

    def watch(self, query, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.request("GET", NS + "?watch=1&" + query)
        r = c.getresponse()
        check(r.status == 200, "watch %s: status %d" % (query, r.status))
        return c, r


def next_event(r):
    line = r.readline()
    check(line, "the watch ended")
    return json.loads(line)


def selector_events(r, n):
    """The next n events of a watch other than bookmarks, as (type, name)."""
    out = []
    while len(out) < n:
        e = next_event(r)
        if e["type"] != "BOOKMARK":
            out.append((e["type"], e["object"]["metadata"]["name"]))
    return out


def status_of(body):
    st = json.loads(body)
    check(st.get("kind") == "Status" and st.get("apiVersion") == "v1" and st.get("status") == "Failure",
          "not a Status: %s" % body[:200])
    return st


def names_rvs(items):
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in items}


def keys_rvs(items):
    """As Scenario.server_objects: namespace/name -> resourceVersion."""
    return {"%s/%s" % (o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for o in items}


# =========================================================================== health and metrics

@scenario("ServeHealthAndReadiness", 8)
def t_health(s):
    s.server("--bookmark-interval", "1")
    for i in range(3):
        s.create("cm-%d" % i)
    lo = Local(s, "--readyz-max-silence", "3")
    st, _, body = lo.req("/healthz")
    check(st == 200 and body == b"ok", "/healthz: %d %r" % (st, body))
    st, _, body = lo.req("/healthz?verbose")
    check(st == 200 and b"healthz check passed" in body, "/healthz?verbose: %r" % body)
    st, _, body = lo.req("/livez")
    check(st == 200, "/livez: %d" % st)
    st, _, body = lo.req("/readyz")
    check(st == 200 and body == b"ok", "/readyz while synced: %d %r" % (st, body))
    st, _, body = lo.req("/readyz?verbose")
    check(st == 200 and b"[+]synced:configmaps ok" in body and b"[+]upstream:configmaps ok" in body
          and body.endswith(b"readyz check passed\n"), "/readyz?verbose: %r" % body)
    st, _, body = lo.req("/readyz", method="HEAD")
    check(st == 200 and body == b"", "HEAD /readyz: %d %r" % (st, body))
    # The API server goes silent (stopped): after the threshold, not ready, with the reason.
    s.srv.stop()
    wait_until(lambda: lo.req("/readyz")[0] == 503, 8, "/readyz to fail after the server stopped")
    st, _, body = lo.req("/readyz")
    lines = body.decode().splitlines()
    check(lines[-1] == "readyz check failed", "last line: %r" % lines)
    check(any(ln.startswith("[-]upstream:configmaps failed: no byte from the API server for ") for ln in lines),
          "no upstream line: %r" % lines)
    check("[+]synced:configmaps ok" in lines, "the resource stays synced: %r" % lines)
    # Alive all the same, and still serving the mirror.
    check(lo.req("/healthz")[0] == 200, "/healthz after the server stopped")
    check(len(lo.json(NS)["items"]) == 3, "the mirror is served without the server")


@scenario("ServeHealthOnly", 6)
def t_health_only(s):
    """--listen-health-only: probes on any address without a token, and no data on it."""
    s.server()
    s.create("cm-0")
    lo = Local.__new__(Local)
    lo.port = free_port()
    lo.kr = s.kreflect("--listen", "0.0.0.0:%d" % lo.port, "--listen-health-only", "-v", "1")
    lo.kr.wait_synced(1, timeout=10)
    for path in ("/healthz", "/livez", "/readyz"):
        st, _, body = lo.req(path)
        check(st == 200 and body == b"ok", "%s: %d %r" % (path, st, body))
    for path in (NS, NS + "/cm-0", "/metrics", "/version", "/api"):
        st, _, body = lo.req(path)
        check(st == 404 and status_of(body)["code"] == 404, "%s on a health-only endpoint: %d %r" % (path, st, body))
        check(b"cm-0" not in body, "%s: the mirror leaked: %r" % (path, body))
    check("serving health checks on 0.0.0.0:%d" % lo.port in lo.kr.stderr(), "log: %s" % lo.kr.stderr_tail())
    # The port taken: a clear error and exit 1 (not a usage error about a socket path).
    other = s.kreflect("--listen", "127.0.0.1:%d" % lo.port)
    rc = other.wait_exit(10)
    check(rc == 1 and "unable to listen on 127.0.0.1:%d: " % lo.port in other.stderr()
          and "socket is at that path" not in other.stderr(), "a taken port: exit %d, %s" % (rc, other.stderr_tail()))
    # Off loopback without it (and without a token): refused, naming both ways out.
    other = s.kreflect("--listen", "0.0.0.0:%d" % free_port())
    rc = other.wait_exit(10)
    check(rc == 2 and "--listen-token-file or --listen-client-ca-file (or --listen-health-only) is required"
          in other.stderr(), "0.0.0.0 without a token: exit %d, %s" % (rc, other.stderr_tail()))
    other = s.kreflect("--listen-health-only")
    rc = other.wait_exit(10)
    check(rc == 2 and "need --listen" in other.stderr(), "--listen-health-only alone: exit %d, %s"
          % (rc, other.stderr_tail()))


@scenario("ServeNotReadyBeforeSync", 4)
def t_not_ready(s):
    s.server()
    port = free_port()
    # Nothing listens at the API server address: never synced.
    kr = s.kreflect("--listen", "127.0.0.1:%d" % port, server_url="https://127.0.0.1:%d" % free_port())
    lo = Local.__new__(Local)
    lo.port, lo.kr = port, kr
    wait_until(lambda: _up(lo), 5, "the listener")
    st, _, body = lo.req("/readyz")
    check(st == 503, "/readyz before sync: %d" % st)
    check(b"[-]synced:configmaps failed: not synced yet" in body, "reason: %r" % body)
    st, _, body = lo.req(NS)
    check(st == 503 and status_of(body)["code"] == 503, "a list before sync: %d %r" % (st, body))


def _up(lo):
    try:
        return lo.req("/healthz", timeout=1)[0] == 200
    except OSError:
        return False


def promtool_check(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=30)
    check(p.returncode == 0, "promtool check metrics failed (%d): %s %s"
          % (p.returncode, p.stdout.decode()[-500:], p.stderr.decode()[-500:]))


def metric(text, name, labels=None):
    for line in text.decode().splitlines():
        if line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        n, _, lab = key.partition("{")
        if n != name:
            continue
        if labels and any('%s="%s"' % (k, v) not in lab for k, v in labels.items()):
            continue
        return float(val)
    raise Fail("no metric %s %s" % (name, labels or ""))


@scenario("ServeMetrics", 6)
def t_metrics(s):
    if not shutil.which("promtool"):
        raise Fail("promtool is not installed (Debian package prometheus: make test-deps)")
    s.server("--bookmark-interval", "1")
    for i in range(4):
        s.create("cm-%d" % i)
    lo = Local(s, "--exec", "true", "--debounce", "100")
    s.update("cm-1", {"k": "changed"})
    s.delete("cm-2")
    lo.kr.wait_event("DELETED", "cm-2")
    s.ctl.drop_watches()
    time.sleep(1.0)
    st, hdr, text = lo.req("/metrics")
    check(st == 200 and hdr.get("content-type", "").startswith("text/plain; version=0.0.4"),
          "/metrics: %d %s" % (st, hdr))
    promtool_check(text)
    res = {"resource": "configmaps"}
    check(metric(text, "kreflect_objects", res) == 3, "objects")
    check(metric(text, "kreflect_events_total", dict(res, type="ADDED")) == 4, "ADDED")
    check(metric(text, "kreflect_events_total", dict(res, type="MODIFIED")) == 1, "MODIFIED")
    check(metric(text, "kreflect_events_total", dict(res, type="DELETED")) == 1, "DELETED")
    check(metric(text, "kreflect_watch_lists_total", res) == 1, "watch-lists")
    check(metric(text, "kreflect_synced", res) == 1, "synced")
    check(metric(text, "kreflect_watch_restarts_total", dict(res, reason="closed")) >= 1,
          "the dropped watch counted as a restart")
    check(abs(metric(text, "kreflect_last_sync_timestamp_seconds", res) - time.time()) < 30, "last sync time")
    check(0 <= metric(text, "kreflect_upstream_silence_seconds", res) < 5, "silence")
    check(metric(text, "kreflect_received_bytes_total") > 1000, "bytes received")
    check(metric(text, "kreflect_tls_handshakes_total", {"kind": "full"}) >= 1, "TLS handshakes")
    check(metric(text, "kreflect_arena_capacity_bytes") > 0, "arena capacity")
    check(metric(text, "kreflect_arena_bytes", {"state": "live"}) > 0, "arena live")
    check(metric(text, "kreflect_hook_runs_total", {"hook": "exec"}) >= 1, "hook runs")
    check(metric(text, "kreflect_hook_failures_total", {"hook": "exec"}) == 0, "hook failures")
    version = re.search(r'#define KR_VERSION "([^"]+)"', open(os.path.join(ROOT, "src", "kreflect.h")).read()).group(1)
    check(metric(text, "kreflect_build_info", {"version": version}) == 1, "build info (version %s)" % version)
    check(metric(text, "kreflect_serve_requests_total") >= 1, "requests")


@scenario("ServePartialMirror", 10)
def t_partial(s):
    """A mirror that lacks objects (the arena full, at the list and by watch
    events) fails /readyz naming the resource and the counts, and shows in
    /metrics (kreflect_partial, kreflect_objects_held); once deletes on the
    server make room and the relist holds every object, both say whole."""
    s.server("--initial", 300, "--initial-size", 1024)
    lo = Local(s, "--arena-bytes", "256K", "--watch-list", "off")
    res = {"resource": "configmaps"}

    def state():
        st, _, body = lo.req("/readyz?verbose")
        text = lo.req("/metrics")[2]
        return st, body.decode(), text

    st, body, text = state()
    held = metric(text, "kreflect_objects_held", res)
    check(st == 503 and "[+]synced:configmaps ok" in body and
          "[-]complete:configmaps failed: the mirror is partial: %d of 300 objects held" % held in body,
          "/readyz of a partial mirror: %d %r" % (st, body))
    check(metric(text, "kreflect_partial", res) == 1 and metric(text, "kreflect_objects", res) == 300
          and 100 < held < 300, "metrics of a partial mirror: partial %s, held %s"
          % (metric(text, "kreflect_partial", res), held))
    promtool_check(text)
    for i in range(200):
        s.delete("cm-%05d" % (299 - i))
    # The relist that makes it whole may come before the last deletes reach
    # the mirror (the room timer starts at the first delete that frees room),
    # so wait for both: ready, and the 100 objects the server has left.
    wait_until(lambda: lo.req("/readyz")[0] == 200 and
               metric(lo.req("/metrics")[2], "kreflect_objects_held", res) == 100,
               e2e.late(30), "/readyz to pass and 100 objects held once room came back")
    st, body, text = state()
    check("[+]complete:configmaps ok" in body and metric(text, "kreflect_partial", res) == 0
          and metric(text, "kreflect_objects_held", res) == 100, "whole again: partial %s, held %s, %r"
          % (metric(text, "kreflect_partial", res), metric(text, "kreflect_objects_held", res), body))
    # By watch events: the arena fills again; the next object not held makes it partial.
    s.ctl.bulk("configmaps", "default", 250, size=1024, start=300)
    wait_until(lambda: lo.req("/readyz")[0] == 503, e2e.late(20), "/readyz to fail when an event is not held")
    st, body, text = state()
    check("[-]complete:configmaps failed: the mirror is partial" in body and
          metric(text, "kreflect_partial", res) == 1, "partial by watch: %r" % body)
    check("the mirror is partial: " in lo.kr.stderr(), "no log line says the mirror became partial: %s"
          % lo.kr.stderr_tail(2))


# =========================================================================== the API

@scenario("ServeListGetSelectors", 6)
def t_list_get(s):
    s.server()
    for i in range(12):
        s.create("cm-%02d" % i, labels={"app": "web" if i % 2 else "db", "n": str(i)})
    lo = Local(s)
    want = s.server_objects()
    lst = lo.json(NS)
    check(lst["kind"] == "ConfigMapList" and lst["apiVersion"] == "v1", "list kind: %s" % lst.get("kind"))
    check(keys_rvs(lst["items"]) == want, "the list differs from the server")
    check(lst["metadata"]["resourceVersion"], "a list resourceVersion")
    one = lo.json(NS + "/cm-03")
    check(one["metadata"]["name"] == "cm-03" and one["metadata"]["resourceVersion"] == want["default/cm-03"], "get")
    check("managedFields" not in one["metadata"], "managedFields stripped as in the mirror")
    st, _, body = lo.req(NS + "/cm-03", method="HEAD")
    check(st == 200 and body == b"", "HEAD of one object")
    got = names_rvs(lo.json(NS + "?labelSelector=app%3Dweb")["items"])
    check(sorted(got) == ["cm-%02d" % i for i in range(1, 12, 2)], "labelSelector app=web: %s" % sorted(got))
    got = names_rvs(lo.json(NS + "?labelSelector=app+in+(db),n+notin+(0,2)")["items"])
    check(sorted(got) == ["cm-04", "cm-06", "cm-08", "cm-10"], "set selector: %s" % sorted(got))
    got = names_rvs(lo.json(NS + "?fieldSelector=metadata.name%3Dcm-07")["items"])
    check(list(got) == ["cm-07"], "fieldSelector: %s" % got)
    got = names_rvs(lo.json(NS + "?fieldSelector=metadata.name!%3Dcm-07")["items"])
    check(len(got) == 11 and "cm-07" not in got, "fieldSelector !=")
    # Paging: limit/continue gathers every object exactly once.
    seen, token, pages = {}, None, 0
    while True:
        q = NS + "?limit=5" + ("&continue=" + token if token else "")
        page = lo.json(q)
        pages += 1
        check(len(page["items"]) <= 5, "page over the limit")
        for o in page["items"]:
            check(o["metadata"]["name"] not in seen, "paged twice: %s" % o["metadata"]["name"])
            seen[o["metadata"]["name"]] = o["metadata"]["resourceVersion"]
        token = page["metadata"].get("continue")
        if not token:
            break
    check({"default/" + k: v for k, v in seen.items()} == want and pages == 3, "paging: %d pages, %d objects" % (pages, len(seen)))
    # A continue token from before a change is too old: 410, as the API server says.
    first = lo.json(NS + "?limit=5")
    s.update("cm-00", {"k": "new"})
    lo.kr.wait_event("MODIFIED", "cm-00")
    st, _, body = lo.req(NS + "?limit=5&continue=" + first["metadata"]["continue"])
    check(st == 410 and status_of(body)["reason"] == "Expired", "old continue: %d %r" % (st, body[:200]))


@scenario("ServeDiscoveryAndKubectl", 12)
def t_kubectl(s):
    s.server()
    s.ctl.register(group="example.com", version="v1", plural="widgets", kind="Widget")
    s.ctl.create("widgets", "default", "w1", object={"spec": {"size": 3}})
    for i in range(3):
        s.create("cm-%d" % i)
    lo = Local(s, resources=("configmaps", "widgets.example.com"))
    check(lo.json("/api")["versions"] == ["v1"], "/api")
    res = lo.json("/api/v1")["resources"]
    check([r["name"] for r in res] == ["configmaps"], "/api/v1: %s" % res)
    groups = lo.json("/apis")["groups"]
    check([g["name"] for g in groups] == ["example.com"], "/apis: %s" % groups)
    check([r["name"] for r in lo.json("/apis/example.com/v1")["resources"]] == ["widgets"], "group resources")
    check(lo.json("/version")["gitVersion"].startswith("v1."), "/version")
    check(lo.json("/apis/example.com/v1/namespaces/default/widgets/w1")["spec"]["size"] == 3, "custom resource")
    if not os.access(KUBECTL, os.X_OK):
        raise Fail("kubectl not found at %s (make test-deps fetches it; or set KR_KUBECTL)" % KUBECTL)
    kc = [KUBECTL, "--server", "http://127.0.0.1:%d" % lo.port, "-n", "default"]

    def kubectl(*a, timeout=20):
        p = subprocess.run(kc + list(a), capture_output=True, timeout=timeout,
                           env=dict(os.environ, HOME=s.dir, KUBECONFIG="/dev/null"))
        with open(os.path.join(s.dir, "kubectl.log"), "ab") as f:
            f.write(b"$ kubectl %s\n%s%s" % (" ".join(a).encode(), p.stdout, p.stderr))
        return p
    p = kubectl("get", "configmaps", "-o", "json")
    check(p.returncode == 0, "kubectl get: %s" % p.stderr.decode()[-300:])
    check(keys_rvs(json.loads(p.stdout)["items"]) == s.server_objects(), "kubectl get -o json differs")
    p = kubectl("get", "cm", "cm-1", "-o", "yaml")
    check(p.returncode == 0 and b"name: cm-1" in p.stdout, "kubectl get -o yaml: %s" % p.stderr[-300:])
    p = kubectl("get", "widgets", "-o", "name")
    check(p.returncode == 0 and p.stdout.strip() == b"widget.example.com/w1",
          "kubectl get widgets: %r %r" % (p.stdout, p.stderr[-300:]))
    # kubectl get -w: the list, then the changes as they come upstream.
    w = subprocess.Popen(kc + ["get", "cm", "-w", "-o", "json", "--output-watch-events"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, HOME=s.dir, KUBECONFIG="/dev/null"))
    e2e.remember(w)
    try:
        time.sleep(1.5)
        s.create("cm-new")
        s.delete("cm-0")
        time.sleep(1.5)
    finally:
        w.terminate()
        out, err = w.communicate(timeout=10)
        e2e.forget(w)
    seen, dec, text, i = [], json.JSONDecoder(), out.decode(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        ev, i = dec.raw_decode(text, i)
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
    check(seen[:3] == [("ADDED", "cm-0"), ("ADDED", "cm-1"), ("ADDED", "cm-2")] and
          ("ADDED", "cm-new") in seen[3:] and ("DELETED", "cm-0") in seen[3:],
          "kubectl get -w saw: %r %r" % (seen, err[-300:]))
    # --watch-only: the changes only, none of the objects already there.
    w = subprocess.Popen(kc + ["get", "cm", "--watch-only", "-o", "json", "--output-watch-events"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, HOME=s.dir, KUBECONFIG="/dev/null"))
    e2e.remember(w)
    try:
        time.sleep(1.5)
        s.update("cm-1", {"k": "watched"})
        time.sleep(1.5)
    finally:
        w.terminate()
        out, err = w.communicate(timeout=10)
        e2e.forget(w)
    seen, text, i = [], out.decode(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        ev, i = dec.raw_decode(text, i)
        seen.append((ev["type"], ev["object"]["metadata"]["name"], ev["object"].get("data", {}).get("k")))
    check(seen == [("MODIFIED", "cm-1", "watched")], "kubectl get --watch-only saw: %r %r" % (seen, err[-300:]))
    p = kubectl("get", "secrets")
    check(p.returncode != 0 and (b"NotFound" in p.stderr or b"not find" in p.stderr or
                                 b"doesn't have a resource type" in p.stderr),
          "secrets are not served here: %r" % p.stderr[-300:])


@scenario("ServeWatch", 8)
def t_watch(s):
    s.server()
    for i in range(3):
        s.create("cm-%d" % i)
    lo = Local(s, "--listen-bookmark-interval", "1")
    lst = lo.json(NS)
    rv0 = lst["metadata"]["resourceVersion"]
    c, r = lo.watch("resourceVersion=%s&allowWatchBookmarks=true" % rv0)
    s.update("cm-1", {"k": "v2"})
    s.create("cm-9")
    s.delete("cm-0")
    got = []
    while len([e for e in got if e["type"] != "BOOKMARK"]) < 3:
        got.append(next_event(r))
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in got if e["type"] != "BOOKMARK"]
    check(changes == [("MODIFIED", "cm-1"), ("ADDED", "cm-9"), ("DELETED", "cm-0")], "watch saw %s" % changes)
    mid_rv = [e for e in got if e["type"] == "MODIFIED"][0]["object"]["metadata"]["resourceVersion"]
    # Bookmarks come at the asked interval, with the mirror's resourceVersion.
    t0 = time.monotonic()
    bm = next_event(r)
    check(bm["type"] == "BOOKMARK" and time.monotonic() - t0 < 3, "a bookmark within the interval: %s" % bm)
    check(bm["object"]["metadata"]["resourceVersion"] == s.rv(), "bookmark rv %s != %s"
          % (bm["object"]["metadata"]["resourceVersion"], s.rv()))
    c.close()
    # Resume from the middle: the rest is replayed from the history.
    c, r = lo.watch("resourceVersion=%s" % mid_rv)
    ev = [next_event(r), next_event(r)]
    check([(e["type"], e["object"]["metadata"]["name"]) for e in ev] == [("ADDED", "cm-9"), ("DELETED", "cm-0")],
          "resume saw %s" % ev)
    c.close()
    # No resourceVersion: the current objects as ADDED, then live.
    c, r = lo.watch("sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan")
    ev = [next_event(r) for _ in range(3)]
    check(sorted(e["object"]["metadata"]["name"] for e in ev) == ["cm-1", "cm-2", "cm-9"] and
          all(e["type"] == "ADDED" for e in ev), "initial events %s" % ev)
    end = next_event(r)
    check(end["type"] == "BOOKMARK" and
          end["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true",
          "initial-events-end bookmark: %s" % end)
    c.close()
    # A forgotten resourceVersion: the kube-apiserver's 410 as the stream's one event.
    c, r = lo.watch("resourceVersion=1")
    ev = next_event(r)
    check(ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired",
          "old rv: %s" % ev)
    check(r.readline() == b"", "the stream ends after the 410")
    c.close()
    # timeoutSeconds ends the stream cleanly.
    c, r = lo.watch("resourceVersion=%s&timeoutSeconds=1" % s.rv())
    t0 = time.monotonic()
    check(r.read() == b"" and 0.8 < time.monotonic() - t0 < 4, "timeoutSeconds")
    c.close()


def selector_scene(s):
    """a (app=x) and b (app=y) mirrored; a watch of app=x that has had its ADDED a.
    Returns the endpoint, a relabeller, and the watch's connection and response."""
    s.server()
    lab = lambda n, app, d="v": s.ctl.update("configmaps", "default", n, data={"k": d}, labels={"app": app})  # noqa: E731
    s.ctl.create("configmaps", "default", "a", data={"k": "v"}, labels={"app": "x"})
    s.ctl.create("configmaps", "default", "b", data={"k": "v"}, labels={"app": "y"})
    lo = Local(s)
    wait_until(lambda: lo.json(NS)["metadata"]["resourceVersion"] == s.rv(), 5, "the mirror")
    c, r = lo.watch("labelSelector=app%3Dx")
    check(selector_events(r, 1) == [("ADDED", "a")], "initial events")
    return lo, lab, c, r


def selector_transitions(s, lab, r):
    """b starts matching, a stops, a changes outside, b changes inside, b is deleted:
    the watch cache's four events."""
    lab("b", "x")
    lab("a", "z")
    lab("a", "z", "again")
    lab("b", "x", "changed")
    s.ctl.delete("configmaps", "default", "b")
    got = selector_events(r, 4)
    check(got == [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b"), ("DELETED", "b")], "transitions: %s" % got)


@scenario("ServeSelectorWatchBatchedTransitions", 8)
def t_selector_watch_batched(s):
    """Changes that reach kreflect in one read still go out one by one: each with its
    own object, so a label-selector watch sees every transition, not their sum."""
    lo, lab, c, r = selector_scene(s)
    # The next upstream watch sends nothing for 2 s: the five changes then leave
    # the test API server in one write, and kreflect applies them in one read.
    s.ctl.fault(kind="stall_watch", seconds=2, watch=True, count=1)
    s.ctl.drop_watches()
    wait_until(lambda: any("stalled_at" in e for e in s.reqs()), 10, "the stalled re-watch")
    selector_transitions(s, lab, r)
    # An object that no longer matched is deleted: the watch was told it left, so nothing.
    s.ctl.delete("configmaps", "default", "a")
    s.ctl.create("configmaps", "default", "e", data={"k": "v"}, labels={"app": "x"})
    got = selector_events(r, 1)
    check(got == [("ADDED", "e")], "after a delete of what left the selector: %s" % got)
    c.close()


@scenario("ServeSelectorWatchTransitions", 8)
def t_selector_watch(s):
    """A label-selector watch gets ADDED when an object starts matching, DELETED when it stops (the watch cache's way)."""
    lo, lab, c, r = selector_scene(s)
    selector_transitions(s, lab, r)
    c.close()
    # A resumed watch: what left the selector in the gap is DELETED, what came in is sent.
    s.ctl.create("configmaps", "default", "c", data={"k": "v"}, labels={"app": "x"})
    s.ctl.create("configmaps", "default", "d", data={"k": "v"}, labels={"app": "y"})
    lst = None
    wait_until(lambda: lo.json(NS)["metadata"]["resourceVersion"] == s.rv(), 5, "the mirror")
    lst = lo.json(NS + "?labelSelector=app%3Dx")
    check([o["metadata"]["name"] for o in lst["items"]] == ["c"], "list %s" % lst["items"])
    lab("c", "y")
    lab("d", "x")
    wait_until(lambda: lo.json(NS)["metadata"]["resourceVersion"] == s.rv(), 5, "the mirror")
    c, r = lo.watch("labelSelector=app%3Dx&resourceVersion=" + lst["metadata"]["resourceVersion"])
    got = selector_events(r, 2)
    check(got == [("DELETED", "c"), ("MODIFIED", "d")] or got == [("DELETED", "c"), ("ADDED", "d")],
          "resumed: %s" % got)
    lab("c", "x")                      # back in, after the gap: ADDED
    check(selector_events(r, 1) == [("ADDED", "c")], "back in the selector")
    c.close()


@scenario("ServeSlowWatcherDropped", 15)
def t_slow(s):
    s.server("--bookmark-interval", "0")
    s.create("big-0")
    lo = Local(s, "--listen-max-conns", "4")
    # A watcher that never reads: a tiny receive buffer, so its socket fills fast.
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", lo.port))
    slow.sendall(("GET %s?watch=1&resourceVersion=%s HTTP/1.1\r\nHost: x\r\n\r\n" % (NS, s.rv())).encode())
    time.sleep(0.3)
    # More changes than the history ring holds (3,000 records of ~40 bytes > 64 KiB),
    # about 3.5 MB of events: more than the socket buffers and the connection's own.
    s.ctl.bulk("configmaps", "default", 3000, size=1000)
    # Upstream kept flowing: the mirror followed every change.
    s.check_mirror(lo.kr, timeout=20)
    text = lo.req("/metrics")[2]
    check(metric(text, "kreflect_serve_watchers_dropped_total") == 1, "one watcher dropped")
    check(metric(text, "kreflect_events_total", {"resource": "configmaps", "type": "ADDED"}) == 3001, "events")
    # The dropped watcher gets the 410 Status at the end of what it had not read.
    slow.settimeout(10)
    data = b""
    while True:
        try:
            b = slow.recv(1 << 20)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    slow.close()
    check(b'"type":"ERROR"' in data and b'"code":410' in data, "no 410 at the end: %r" % data[-300:])
    check(data.endswith(b"0\r\n\r\n"), "the chunked stream is ended: %r" % data[-40:])


# =========================================================================== errors and bounds

@scenario("ServeErrorStatuses", 8)
def t_errors(s):
    s.server()
    s.create("cm-1")
    s.ctl.create("secrets", "default", "s1", data={"k": "dg=="})
    lo = Local(s, resources=("configmaps", "secrets"))

    def expect(path, code, reason, method="GET"):
        st, hdr, body = lo.req(path, method=method)
        check(st == code, "%s %s: %d, not %d: %r" % (method, path, st, code, body[:200]))
        if method != "HEAD":
            stt = status_of(body)
            check(stt["code"] == code and stt["reason"] == reason, "%s: %s" % (path, stt))
    expect("/nothing/here", 404, "NotFound")
    expect("/api/v2", 404, "NotFound")
    expect("/apis/apps/v1", 404, "NotFound")
    expect("/api/v1/namespaces/default/pods", 404, "NotFound")
    expect(NS + "/missing", 404, "NotFound")
    expect(NS + "/cm-1/status", 404, "NotFound")
    expect(NS + "/cm-1", 405, "MethodNotAllowed", method="DELETE")
    expect(NS, 405, "MethodNotAllowed", method="POST")
    expect("/api/v1/namespaces/default/secrets", 403, "Forbidden")
    expect("/api/v1/namespaces/default/secrets/s1", 403, "Forbidden")
    expect("/api/v1/namespaces/other/configmaps", 403, "Forbidden")
    expect("/api/v1/configmaps", 403, "Forbidden")
    expect(NS + "?labelSelector=a%3E1", 400, "BadRequest")
    expect(NS + "?fieldSelector=spec.x%3D1", 400, "BadRequest")
    expect(NS + "?limit=x", 400, "BadRequest")
    expect(NS + "?continue=garbage", 400, "BadRequest")
    expect("/api/v1/namespaces/default/config%2Fmaps", 400, "BadRequest")
    # Each bound of a request's parameters, hit: a selector of KR_SELECTOR_MAX (512)
    # bytes or more, a field selector value past its 256, a field selector past 320.
    sel511 = ",".join(["a%3Db"] * 128)                      # 128 x "a=b": 511 bytes decoded
    st, _, body = lo.req(NS + "?labelSelector=" + sel511)
    check(st == 200 and json.loads(body)["items"] == [], "a 511-byte selector is read: %d" % st)
    expect(NS + "?labelSelector=" + ",".join(["a%3Db"] * 127 + ["ab%3Db"]), 400, "BadRequest")
    expect(NS + "?fieldSelector=metadata.name%3D" + "n" * 256, 400, "BadRequest")
    expect(NS + "?fieldSelector=metadata.name%3D" + "n" * 400, 400, "BadRequest")
    # Broken requests: the status a server sends, then the connection closes.
    out = lo.raw(b"GET / HTTP/2.0\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 505 "), "HTTP/2.0: %r" % out[:60])
    out = lo.raw(b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 414 "), "long target: %r" % out[:60])
    out = lo.raw(b"GET / HTTP/1.1\r\nX: " + b"v" * 5000 + b"\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 431 "), "long head: %r" % out[:60])
    out = lo.raw(b"GET / HTTP/1.1\r\n folded\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in out, "folded: %r" % out[:80])
    out = lo.raw(b"\x00\x01\x02garbage\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 400 "), "garbage: %r" % out[:60])
    # Keep-alive: two requests on one connection.
    out = lo.raw(b"GET /healthz HTTP/1.1\r\n\r\n" + b"", timeout=1)
    check(out.startswith(b"HTTP/1.1 200 ") and b"Connection: close" not in out, "keep-alive answer")
    # kreflect itself is untouched.
    s.update("cm-1", {"k": "after"})
    lo.kr.wait_event("MODIFIED", "cm-1")
    check(keys_rvs(lo.json(NS)["items"]) == s.server_objects(), "the mirror after the errors")


@scenario("ServeLargeObjects", 6)
def t_large(s):
    """Objects larger than a connection's output buffer (KR_SERVE_OUT_BYTES, 32 KiB)
    go out straight from the arena: in a list, a get and a watch, intact."""
    s.server()
    big = "".join("%08d" % i for i in range(25000))          # 200,000 bytes
    s.create("small-1")
    s.create("big-1", data={"v": big})
    s.create("small-2")
    lo = Local(s)
    lst = lo.json(NS)
    check(keys_rvs(lst["items"]) == s.server_objects(), "list with a large object")
    check([o["data"].get("v") for o in lst["items"] if o["metadata"]["name"] == "big-1"] == [big],
          "the large object in the list is intact")
    check(lo.json(NS + "/big-1")["data"]["v"] == big, "get of the large object")
    c, r = lo.watch("resourceVersion=%s" % lst["metadata"]["resourceVersion"])
    s.update("big-1", {"v": big[::-1]})
    s.update("small-1", {"k": "after"})
    ev = [next_event(r), next_event(r)]
    check(ev[0]["type"] == "MODIFIED" and ev[0]["object"]["data"]["v"] == big[::-1],
          "the large object in a watch: %s" % str(ev[0])[:200])
    check(ev[1]["object"]["metadata"]["name"] == "small-1", "the next event after it")
    c.close()
    c, r = lo.watch("sendInitialEvents=true&allowWatchBookmarks=true")
    names = sorted(next_event(r)["object"]["metadata"]["name"] for _ in range(3))
    check(names == ["big-1", "small-1", "small-2"], "initial events with a large object: %s" % names)
    c.close()


@scenario("ServeRandomRequests", 8)
def t_random(s):
    """2,000 requests built from random pieces of paths, parameters, selectors and
    escapes (a fixed seed): each gets a whole HTTP answer with a status kreflect
    can send, and the mirror is untouched (run under ASan it checks the routing too)."""
    import random
    rnd = random.Random(19)
    s.server()
    for i in range(5):
        s.create("cm-%d" % i, labels={"app": "a%d" % (i % 2)})
    lo = Local(s, "--listen-bookmark-interval", "1")
    segs = ["api", "apis", "v1", "v2", "namespaces", "default", "other", "configmaps", "cm-1", "cm-9",
            "example.com", "status", "", "..", "%2e", "%41", "%zz", "%00", "x" * 300]
    keys = ["watch", "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
            "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents", "verbose", "%6cimit", ""]
    vals = ["1", "true", "True", "0", "-1", "99999999999999999999", "app%3Da1", "app+in+(a0,a1)",
            "!app", "app!%3D", "metadata.name%3Dcm-1", "metadata.namespace%3Ddefault", "a%2Cb",
            "%", "%4", "1.", "4294967295.1", "0." + "9" * 40, "x" * 700, "", "(", ")"]
    codes = {200, 400, 401, 403, 404, 405, 410, 414, 431, 503, 505}
    seen = {}
    for n in range(2000):
        path = "/" + "/".join(rnd.choice(segs) for _ in range(rnd.randint(0, 7)))
        q = "&".join("%s=%s" % (rnd.choice(keys), rnd.choice(vals)) for _ in range(rnd.randint(0, 4)))
        target = path + ("?" + q if q else "")
        if "watch" in q and rnd.random() < 0.7:
            q += "&timeoutSeconds=1"       # a watch that is answered ends soon
            target = path + "?" + q
        method = rnd.choice(["GET", "GET", "GET", "HEAD", "POST", "PUT"])
        out = lo.raw(("%s %s HTTP/1.1\r\nConnection: close\r\n\r\n" % (method, target)).encode(), timeout=3)
        check(out.startswith(b"HTTP/1.1 ") and int(out[9:12]) in codes,
              "request %d %s %s: %r" % (n, method, target[:200], out[:80]))
        seen[int(out[9:12])] = seen.get(int(out[9:12]), 0) + 1
    with open(os.path.join(s.dir, "statuses.json"), "w") as f:
        json.dump(seen, f)
    check(all(seen.get(c) for c in (200, 400, 404, 405)), "statuses seen: %s" % seen)
    check(lo.req("/healthz")[0] == 200, "alive after the random requests")
    s.update("cm-1", {"k": "after"})
    lo.kr.wait_event("MODIFIED", "cm-1")
    check(keys_rvs(lo.json(NS)["items"]) == s.server_objects(), "the mirror after the random requests")


@scenario("ServeIdleDeadlines", 8)
def t_idle(s):
    """--listen-idle-timeout 1: a head that does not complete within 1 s, and a list
    not read within 2 s, lose their connection; a watch is not timed out by it."""
    s.server()
    s.ctl.bulk("configmaps", "default", 2000, size=1000)
    lo = Local(s, "--listen-idle-timeout", "1")

    def conns():
        st, _, text = lo.req("/metrics")
        return metric(text, "kreflect_serve_connections") if st == 200 else -1
    slow_head = socket.create_connection(("127.0.0.1", lo.port))
    slow_head.sendall(b"GET /heal")
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.connect(("127.0.0.1", lo.port))
    reader.sendall(("GET %s HTTP/1.1\r\n\r\n" % NS).encode())   # about 2 MB, never read
    c, r = lo.watch("resourceVersion=%s" % s.rv())
    time.sleep(0.3)
    check(conns() == 4, "four connections open at first: %s" % conns())
    t0 = time.monotonic()
    wait_until(lambda: conns() == 2, 6, "the stalled head and the unread list to be closed")
    took = time.monotonic() - t0
    check(0.5 < took + 0.3 < 4.5, "closed after %.1f s" % (took + 0.3))
    s.update("cm-00001", {"k": "still watched"})
    ev = next_event(r)
    check(ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "cm-00001", "the watch lives on")
    c.close()
    slow_head.close()
    reader.close()


@scenario("ServeSecretsWhenAsked", 4)
def t_secrets(s):
    s.server()
    s.ctl.create("secrets", "default", "s1", data={"k": "dg=="})
    lo = Local(s, "--serve-secrets", resources=("secrets",))
    check([o["metadata"]["name"] for o in lo.json("/api/v1/namespaces/default/secrets")["items"]] == ["s1"],
          "secrets with --serve-secrets")
    check([r["name"] for r in lo.json("/api/v1")["resources"]] == ["secrets"], "discovery lists secrets")


@scenario("ServeConnectionBound", 6)
def t_conn_bound(s):
    s.server()
    s.create("cm-1")
    lo = Local(s, "--listen-max-conns", "2")
    held = []
    for _ in range(2):
        c = socket.create_connection(("127.0.0.1", lo.port))
        held.append(c)
    time.sleep(0.2)
    out = lo.raw(b"")       # the answer comes before any request: read it first
    check(out.startswith(b"HTTP/1.1 503 ") and b'"code":503' in out, "third connection: %r" % out[:120])
    text_before = None
    held.pop().close()
    time.sleep(0.2)
    st, _, text_before = lo.req("/metrics")
    check(st == 200 and metric(text_before, "kreflect_serve_refused_total") == 1, "refused counted")
    check(metric(text_before, "kreflect_serve_connections_max") == 2, "max reported")
    for c in held:
        c.close()
    def one_left():
        st, _, text = lo.req("/metrics")
        return st == 200 and metric(text, "kreflect_serve_connections") == 1
    wait_until(one_left, 5, "the closed connections to be noticed")
    # An idle connection that never sends its head is closed (after 30 s): not waited for here;
    # a partial head is held until then, and others are served meanwhile.
    c = socket.create_connection(("127.0.0.1", lo.port))
    c.sendall(b"GET /hea")
    # (The client's close of the last /metrics connection may reach the relay just after
    # this connection: kept alive, it holds its slot until then.)
    wait_until(lambda: lo.req("/healthz")[0] == 200, 5, "served beside a partial head")
    c.close()


def rss_anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return -1


@scenario("ServeDefaultConnections", 15)
def t_default_conns(s):
    """The stock build serves KR_SERVE_MAX_CONNS (512) connections at once and the next gets
    the 503 Status; slots never taken cost no RAM: idle, the relay holds no more than with one
    slot (the bound was 64 when start-up wrote a page of every slot)."""
    out = subprocess.run([e2e.BIN, "--help"], capture_output=True, text=True).stdout
    m = re.search(r"--listen-max-conns N +local connections at once \(default and most: (\d+)\)", out)
    check(m, "--help names the connection bound")
    most = int(m.group(1))
    check(most >= 512, "the stock build serves at least 512 connections, not %d" % most)
    s.server()
    s.create("cm-1")
    lo = Local(s)
    one = Local(s, "--listen-max-conns", "1")
    time.sleep(0.3)
    idle, idle_one = rss_anon_kb(lo.kr.proc.pid), rss_anon_kb(one.kr.proc.pid)
    # Against the same binary with one slot (so a sanitizer's own memory cancels out): one
    # page per slot would be 2 MB more.
    check(idle > 0 and idle_one > 0 and idle - idle_one < 256,
          "idle RssAnon %d kB with %d slots, %d kB with 1: idle slots cost RAM" % (idle, most, idle_one))
    held = []
    try:
        for _ in range(most):
            held.append(socket.create_connection(("127.0.0.1", lo.port), timeout=10))
        for c in held:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for i, c in enumerate(held):
            got = b""
            while b"\r\n\r\nok" not in got:
                b = c.recv(4096)
                check(b, "connection %d closed before its answer: %r" % (i, got[:100]))
                got += b
            check(got.startswith(b"HTTP/1.1 200 "), "connection %d: %r" % (i, got[:100]))
        out = lo.raw(b"")
        check(out.startswith(b"HTTP/1.1 503 ") and b"too many local connections" in out,
              "connection %d: %r" % (most + 1, out[:160]))
        # HTTP/1.1 keeps the connection: a second request on one is answered too.
        held[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        check(held[0].recv(4096).startswith(b"HTTP/1.1 200 "), "a second request on a kept connection")
    finally:
        for c in held:
            c.close()
    wait_until(lambda: lo.req("/healthz")[0] == 200, 5, "a connection once the others closed")


@scenario("ServeUnixSocketAndToken", 8)
def t_unix_token(s):
    s.server()
    s.create("cm-1")
    path = os.path.join(s.dir, "kr.sock")
    kr = s.kreflect("--listen", "unix:" + path)
    kr.wait_synced(1)
    st = os.lstat(path)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, "socket mode %o" % st.st_mode)
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(path)
        c.sendall(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
        out = c.recv(4096)
    check(out.startswith(b"HTTP/1.1 200 "), "over the unix socket: %r" % out[:60])
    kr.stop()
    check(not os.path.exists(path), "the socket file is removed on exit")
    # Not loopback: refused without a token file...
    bad = s.kreflect("--listen", "0.0.0.0:%d" % free_port(), name="nottoken")
    check(bad.wait_exit(10) == 2 and "--listen-token-file or --listen-client-ca-file (or --listen-health-only) "
          "is required" in bad.stderr(), "0.0.0.0 without a token: %s" % bad.stderr_tail())
    # ...and with one, every request needs it; the file is re-read when it changes.
    tok = os.path.join(s.dir, "listen-token")
    with open(tok, "w") as f:
        f.write("first-token\n")
    # ...and, with a token, refused without TLS unless --listen-insecure says so (logged)...
    bad = s.kreflect("--listen", "0.0.0.0:%d" % free_port(), "--listen-token-file", tok, name="notls")
    check(bad.wait_exit(10) == 2 and "so TLS (--listen-cert-file, --listen-key-file) or an explicit "
          "--listen-insecure is required" in bad.stderr(), "0.0.0.0 without TLS: %s" % bad.stderr_tail())
    port = free_port()
    kr = s.kreflect("--listen", "0.0.0.0:%d" % port, "--listen-token-file", tok, "--listen-insecure",
                    name="withtoken")
    kr.wait_synced(1)
    check("--listen-insecure: 0.0.0.0:%d is served without TLS" % port in kr.stderr(),
          "no warning for --listen-insecure: %s" % kr.stderr_tail())
    lo = Local.__new__(Local)
    lo.port = port
    st, hdr, body = lo.req("/healthz")
    check(st == 401 and status_of(body)["reason"] == "Unauthorized", "no token: %d" % st)
    check(lo.req("/healthz", headers={"Authorization": "Bearer wrong"})[0] == 401, "wrong token")
    check(lo.req("/healthz", headers={"Authorization": "Bearer first-token"})[0] == 200, "right token")
    with open(tok + ".new", "w") as f:
        f.write("second-token\n")
    os.rename(tok + ".new", tok)
    # The file is looked at every 10 s (at a request, an accept, or the tick while watches are open).
    wait_until(lambda: lo.req("/healthz", headers={"Authorization": "Bearer second-token"})[0] == 200, 15,
               "the new token in use")
    check(lo.req("/healthz", headers={"Authorization": "Bearer first-token"})[0] == 401, "rotated out")
    check("second-token" not in kr.stderr() and "first-token" not in kr.stderr(), "a token in the log")


@scenario("ServeListResourceVersions", 12)
def t_list_rvs(s):
    """resourceVersion and resourceVersionMatch on lists, as the kube-apiserver answers them."""
    s.server()
    s.create("cm-1")
    old = s.rv()
    s.create("cm-2")
    lo = Local(s)
    cur = s.rv()
    wait_until(lambda: lo.json(NS)["metadata"]["resourceVersion"] == cur, 5, "the mirror at the server's version")

    def expect(query, code, reason=None, msg=None):
        st, _, body = lo.req(NS + query)
        check(st == code, "%s: %d, not %d: %s" % (query, st, code, body[:200]))
        if code == 200:
            lst = json.loads(body)
            check(lst["metadata"]["resourceVersion"] == cur and len(lst["items"]) == 2, "%s: %s" % (query, lst))
        else:
            stt = status_of(body)
            check(stt["reason"] == reason and stt["code"] == code, "%s: %s" % (query, stt))
            check(msg is None or msg in stt["message"], "%s: %s" % (query, stt["message"]))

    for q in ("", "?resourceVersion=", "?resourceVersion=0", "?resourceVersion=0&resourceVersionMatch=NotOlderThan",
              "?resourceVersion=%s" % cur, "?resourceVersion=%s&resourceVersionMatch=Exact" % cur,
              "?resourceVersion=%s&resourceVersionMatch=NotOlderThan" % old, "?resourceVersion=%s" % old):
        expect(q, 200)
    expect("?resourceVersion=%s&resourceVersionMatch=Exact" % old, 410, "Expired", "too old resource version")
    newer = str(int(cur) + 1000)
    for q in ("?resourceVersion=%s" % newer, "?resourceVersion=%s&resourceVersionMatch=NotOlderThan" % newer,
              "?resourceVersion=%s&resourceVersionMatch=Exact" % newer):
        expect(q, 504, "Timeout", "Too large resource version: %s, current: %s" % (newer, cur))
    expect("?resourceVersion=0&resourceVersionMatch=Exact", 422, "Invalid", "forbidden for resourceVersion \"0\"")
    expect("?resourceVersionMatch=NotOlderThan", 422, "Invalid", "forbidden unless resourceVersion is provided")
    expect("?resourceVersion=1&resourceVersionMatch=Newest", 422, "Invalid", "Unsupported value: \"Newest\"")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def too_large(stt, rv, cur):
    """The kube-apiserver's 504 for a resourceVersion its cache did not reach in 3 s."""
    check(stt["code"] == 504 and stt["reason"] == "Timeout" and
          stt["message"] == "Timeout: Too large resource version: %s, current: %s" % (rv, cur), "504: %s" % stt)
    d = stt.get("details") or {}
    check(d.get("retryAfterSeconds") == 1 and
          d.get("causes") == [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
          "504 details: %s" % stt)


@scenario("ServeFutureResourceVersion", 16)
def t_future_rv(s):
    """A list (NotOlderThan) or a watch from a resourceVersion newer than the mirror's waits
    up to 3 s for the mirror to reach it, then is the kube-apiserver's 504, with no busy loop."""
    s.server()
    s.create("cm-a")
    s.create("cm-b")
    lo = Local(s)
    cur = s.rv()
    wait_until(lambda: lo.json(NS)["metadata"]["resourceVersion"] == cur, 5, "the mirror at the server's version")

    # Reached while waiting: the list answers at once, at the new version.
    nxt = str(int(cur) + 1)
    c = http.client.HTTPConnection("127.0.0.1", lo.port, timeout=10)
    t0 = time.monotonic()
    c.request("GET", NS + "?resourceVersion=%s&resourceVersionMatch=NotOlderThan" % nxt)
    time.sleep(0.5)
    s.update("cm-a", {"k": "1"})
    r = c.getresponse()
    body = r.read()
    took = time.monotonic() - t0
    c.close()
    check(r.status == 200, "list of the next version: %d %s" % (r.status, body[:200]))
    lst = json.loads(body)
    check(lst["metadata"]["resourceVersion"] == nxt and names_rvs(lst["items"])["cm-a"] == nxt,
          "list at %s: %s" % (nxt, lst["metadata"]))
    check(0.4 < took < 2.5, "the list waited for the change, not for the deadline: %.2f s" % took)

    # Not reached: 504 after 3 s, and the relay slept meanwhile.
    newer = str(int(nxt) + 1000)
    cpu0 = cpu_seconds(lo.kr.proc.pid)
    t0 = time.monotonic()
    st, _, body = lo.req(NS + "?resourceVersion=%s&resourceVersionMatch=NotOlderThan" % newer)
    took = time.monotonic() - t0
    check(st == 504, "list of a version never reached: %d %s" % (st, body[:200]))
    too_large(status_of(body), newer, nxt)
    check(2.8 < took < 5, "the 504 after 3 s: %.2f s" % took)
    check(cpu_seconds(lo.kr.proc.pid) - cpu0 < 0.3, "the wait costs no CPU (no busy loop)")
    # Exact of a newer version cannot wait for anything: 504 at once.
    t0 = time.monotonic()
    st, _, body = lo.req(NS + "?resourceVersion=%s&resourceVersionMatch=Exact" % newer)
    check(st == 504 and time.monotonic() - t0 < 1, "Exact of a newer version: %d" % st)
    too_large(status_of(body), newer, nxt)

    # A watch from the next version, reached while it waits: the events after it, not it.
    base = s.rv()
    want = str(int(base) + 1)
    c = http.client.HTTPConnection("127.0.0.1", lo.port, timeout=10)
    c.request("GET", NS + "?watch=1&resourceVersion=%s" % want)
    time.sleep(0.5)
    s.update("cm-a", {"k": "2"})     # at `want`: not sent
    s.update("cm-b", {"k": "2"})     # after it: sent
    r = c.getresponse()
    check(r.status == 200, "watch from the next version: %d" % r.status)
    ev = next_event(r)
    check(ev["type"] == "MODIFIED" and ev["object"]["metadata"]["name"] == "cm-b" and
          ev["object"]["metadata"]["resourceVersion"] == str(int(want) + 1), "watch from %s saw %s" % (want, ev))
    c.close()

    # A watch from a version never reached: a 200 stream whose one event is the 504, after 3 s.
    cur = s.rv()
    newer = str(int(cur) + 1000)
    t0 = time.monotonic()
    c, r = lo.watch("resourceVersion=%s&allowWatchBookmarks=true" % newer)
    ev = next_event(r)
    took = time.monotonic() - t0
    check(ev["type"] == "ERROR", "watch of a version never reached: %s" % ev)
    too_large(ev["object"], newer, cur)
    check(2.8 < took < 5, "the watch's 504 after 3 s: %.2f s" % took)
    check(r.readline() == b"", "the stream ends after the 504")
    c.close()
    # The slot was given back: the endpoint still answers.
    lo.json(NS)


# ---------------------------------------------------------------------------- TLS on --listen

def tls_ctx(ca, cert=None, key=None, version=None):
    ctx = ssl.create_default_context(cafile=ca)
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def tls_get(port, ctx, path, token=None, timeout=10):
    """(status, body, TLS version) of one GET over TLS."""
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
        version = c.sock.version()
        r = c.getresponse()
        return r.status, r.read(), version
    finally:
        c.close()


def tls_relay(s, *extra, name="relay"):
    """kreflect serving over TLS with the test API server's certificate, its token and CA for clients."""
    wd = s.srv.workdir
    port = free_port()
    kr = s.kreflect("--listen", "127.0.0.1:%d" % port, "--listen-cert-file", os.path.join(wd, "server.crt"),
                    "--listen-key-file", os.path.join(wd, "server.key"),
                    "--listen-token-file", s.srv.ready["token_file"], *extra, name=name)
    kr.wait_synced(1)
    return kr, port


def token_of(s):
    with open(s.srv.ready["token_file"]) as f:
        return f.read().strip()


def tls_setup(s):
    """The test API server with 5 ConfigMaps, a relay over TLS that takes client certificates of its CA."""
    s.server()
    for i in range(5):
        s.create("cm-%d" % i, {"k": "v%d" % i})
    kr, port = tls_relay(s, "--listen-client-ca-file", os.path.join(s.srv.workdir, "ca.crt"))
    return s.srv.workdir, kr, port


@scenario("ServeTLSClients", 12)
def t_tls_clients(s):
    wd, kr, port = tls_setup(s)
    ca = os.path.join(wd, "ca.crt")
    check("over TLS (bearer token required)" in kr.stderr(), "start line: %s" % kr.stderr_tail())
    tok = token_of(s)
    want = s.server_objects()
    # TLS 1.2 and 1.3, by token; the list equals the server's.
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        st, body, got = tls_get(port, tls_ctx(ca, version=v), NS, tok)
        check(st == 200 and got == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v],
              "%s: %d %s" % (v, st, got))
        check(keys_rvs(json.loads(body)["items"]) == want, "the list over %s differs from the server" % got)
    # No token: the apiserver's 401 Status; a wrong one too.
    st, body, _ = tls_get(port, tls_ctx(ca), NS)
    check(st == 401 and status_of(body)["reason"] == "Unauthorized", "no token: %d %s" % (st, body[:100]))
    check(tls_get(port, tls_ctx(ca), NS, "wrong")[0] == 401, "a wrong token was let in")
    # A client certificate signed by the client CA stands for the token.
    st, body, _ = tls_get(port, tls_ctx(ca, os.path.join(wd, "client.crt"), os.path.join(wd, "client.key")), NS)
    check(st == 200 and keys_rvs(json.loads(body)["items"]) == want, "by client certificate: %d" % st)
    # A certificate from another CA is refused in the handshake, with a line saying why.
    other = os.path.join(s.dir, "other")
    os.makedirs(other)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/CN=intruder", "-days", "1", "-keyout", other + "/k.pem",
                    "-out", other + "/c.pem"], check=True, capture_output=True)
    try:
        tls_get(port, tls_ctx(ca, other + "/c.pem", other + "/k.pem", ssl.TLSVersion.TLSv1_2), NS)
        check(False, "a client certificate from another CA was let in")
    except (ssl.SSLError, ConnectionError, http.client.HTTPException):
        pass
    wait_until(lambda: "client certificate refused: not signed by --listen-client-ca-file" in kr.stderr(), 5,
               "the refusal's log line")
    # A client that does not trust the relay's certificate: the handshake fails, the relay goes on.
    try:
        tls_get(port, tls_ctx(other + "/c.pem"), NS, tok)
        check(False, "a client with another CA accepted the relay's certificate")
    except ssl.SSLCertVerificationError:
        pass
    # Plain HTTP to the TLS port is no request: closed, and the relay goes on.
    lo = Local.__new__(Local)
    lo.port = port
    out = lo.raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    check(not out.startswith(b"HTTP/1.1 200"), "plain HTTP answered on the TLS port: %r" % out[:40])
    check(tls_get(port, tls_ctx(ca), "/healthz", tok)[0] == 200, "the relay stopped serving after bad clients")
    # kubectl with the relay's CA and the token.
    if os.path.exists(KUBECTL):
        r = subprocess.run([KUBECTL, "--server", "https://127.0.0.1:%d" % port, "--certificate-authority", ca,
                            "--token", tok, "get", "configmaps", "-n", "default", "-o", "json"],
                           capture_output=True, timeout=30, env={"HOME": s.dir, "PATH": "/usr/bin:/bin"})
        check(r.returncode == 0 and keys_rvs(json.loads(r.stdout)["items"]) == want,
              "kubectl over TLS: %s" % r.stderr[-300:])
    else:
        check(False, "no kubectl at %s (make deps)" % KUBECTL)
    check(tok not in kr.stderr(), "the token in the log")


@scenario("ServeTLSDownstreamKreflect", 12)
def t_tls_downstream(s):
    """A downstream kreflect mirrors the relay over TLS (by token, then by client certificate) and follows it."""
    wd, kr, port = tls_setup(s)
    url = "https://127.0.0.1:%d" % port
    down = s.kreflect(server_url=url, name="down-token")       # the CA and token of the test setup
    down.wait_synced(1)
    s.check_mirror(down)
    bycert = s.kreflect("--client-certificate", os.path.join(wd, "client.crt"),
                        "--client-key", os.path.join(wd, "client.key"), server_url=url, auth=False,
                        name="down-cert")
    bycert.wait_synced(1)
    s.check_mirror(bycert)
    s.update("cm-1", {"k": "changed"})
    s.delete("cm-2")
    s.create("new", {"k": "new"})
    s.check_mirror(down)
    s.check_mirror(bycert)
    lo = [x for x in s.ctl.log() if x["path"] == NS]
    check(all("127.0.0.1:%d" % port not in json.dumps(x) for x in lo), "the downstream reached the API server")


@scenario("ServeTLSClientGo", 15)
def t_tls_client_go(s):
    """client-go's Reflector (build/peers/client-go-peer) mirrors the relay over TLS with the
    relay's CA, by token and by client certificate, and follows its changes."""
    check(os.access(CLIENT_GO, os.X_OK), "no client-go peer at %s (make peers)" % CLIENT_GO)
    wd, kr, port = tls_setup(s)
    url = "https://127.0.0.1:%d" % port
    bytok = s.kreflect(server_url=url, name="client-go-token", binary=CLIENT_GO)
    bycert = s.kreflect("--client-certificate", os.path.join(wd, "client.crt"),
                        "--client-key", os.path.join(wd, "client.key"), server_url=url, auth=False,
                        name="client-go-cert", binary=CLIENT_GO)
    for p in (bytok, bycert):
        p.wait_synced(1)
        s.check_mirror(p)
    s.update("cm-1", {"k": "changed"})
    s.delete("cm-2")
    s.create("new", {"k": "new"})
    for p in (bytok, bycert):
        s.check_mirror(p)
    # Given another certificate as its CA (the last --certificate-authority counts), client-go
    # does not trust the relay: no sync, and the relay goes on.
    other = s.kreflect("--certificate-authority", os.path.join(wd, "client.crt"), server_url=url,
                       name="client-go-other-ca", binary=CLIENT_GO)
    time.sleep(e2e.late(2))
    check(not [x for x in other.snapshot() if x.get("type") == "SYNCED"],
          "client-go synced from a relay whose certificate it was not given the CA of")
    check(tls_get(port, tls_ctx(os.path.join(wd, "ca.crt")), "/healthz", token_of(s))[0] == 200,
          "the relay stopped serving")


@scenario("ServeTLSSessionsBound", 12)
def t_tls_bound(s):
    """More TLS sessions than --listen-tls-sessions: the next is answered 503 and the one after
    closed, each with a log line; the others go on. The flag takes 1 to the build's most, which
    --print-budget names."""
    most = CAPACITY_TLS()
    for bad in ("0", str(most + 1), "x"):
        r = subprocess.run([e2e.BIN, "--server", "http://127.0.0.1:1", "--listen", "127.0.0.1:0",
                            "--listen-tls-sessions", bad, "configmaps"], capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and "--listen-tls-sessions must be 1 to %d (KR_SERVE_TLS_CONNS), not '%s'"
              % (most, bad) in r.stderr, "--listen-tls-sessions %s: %d %s" % (bad, r.returncode, r.stderr))
    s.server()
    s.create("cm-1")
    wd = s.srv.workdir
    ca = os.path.join(wd, "ca.crt")
    n = 5
    kr, port = tls_relay(s, "--listen-tls-sessions", str(n))
    tok = token_of(s)
    socks = []
    try:
        for _ in range(n):
            socks.append(tls_ctx(ca).wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                                 server_hostname="127.0.0.1"))
        # The next one is answered with the apiserver's 503 Status over TLS, as a client can read it...
        st, body, _ = tls_get(port, tls_ctx(ca), "/healthz", tok)
        check(st == 503 and status_of(body)["reason"] == "ServiceUnavailable" and
              "--listen-tls-sessions %d" % n in status_of(body)["message"], "session %d: %d %s" % (n + 1, st, body[:200]))
        wait_until(lambda: "TLS connection refused: all %d --listen-tls-sessions sessions are in use (answered 503)"
                   % n in kr.stderr(), 5, "the refusal's log line")
        # ...and while that one is taken (a client that never finishes its handshake), one more is
        # closed (no memory for a Status), with a line.
        held = socket.create_connection(("127.0.0.1", port), timeout=5)
        time.sleep(0.3)
        try:
            got = tls_get(port, tls_ctx(ca), "/healthz", tok, timeout=5)
            check(False, "session %d was answered: %s" % (n + 2, got[:2]))
        except (ssl.SSLError, ConnectionError, http.client.HTTPException):
            pass
        held.close()
        wait_until(lambda: "TLS connection refused: all --listen-tls-sessions sessions are in use\n" in kr.stderr(),
                   5, "the close's log line")
        # The open sessions still work.
        socks[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok.encode() + b"\r\n\r\n")
        check(socks[0].recv(100).startswith(b"HTTP/1.1 200"), "an open session stopped working")
    finally:
        for c in socks:
            c.close()
    wait_until(lambda: tls_ok(port, ca, tok), 5, "a session once the others closed")


def tls_ok(port, ca, tok):
    try:
        return tls_get(port, tls_ctx(ca), "/healthz", tok)[0] == 200
    except (ssl.SSLError, ConnectionError):
        return False


def CAPACITY_TLS():
    out = subprocess.run([e2e.BIN, "--print-budget"], capture_output=True, text=True).stdout
    m = re.search(r"listen-tls.*?(\d+) sessions", out)
    check(m, "--print-budget names no TLS sessions: %s" % out[-400:])
    return int(m.group(1))


@scenario("ServeTLSRotation", 20)
def t_tls_rotation(s):
    """New certificate files are used for the connections after (the files are looked at every 10 s)."""
    s.server()
    s.create("cm-1")
    wd = s.srv.workdir
    cert, key = os.path.join(s.dir, "tls.crt"), os.path.join(s.dir, "tls.key")
    shutil.copy(os.path.join(wd, "server.crt"), cert)
    shutil.copy(os.path.join(wd, "server.key"), key)
    port = free_port()
    kr = s.kreflect("--listen", "127.0.0.1:%d" % port, "--listen-cert-file", cert, "--listen-key-file", key,
                    name="relay")
    kr.wait_synced(1)
    ca = os.path.join(wd, "ca.crt")
    check(tls_get(port, tls_ctx(ca), "/healthz")[0] == 200, "before the rotation")
    # A half-written rotation (a key that does not match) keeps the old certificate, and says so.
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/CN=rotated", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", key + ".new", "-out", cert + ".new"], check=True, capture_output=True)
    os.rename(cert + ".new", cert)
    wait_until(lambda: tls_ok(port, ca, "") and "keeping the TLS certificate in use" in kr.stderr(), 15,
               "the mismatched pair refused, the old one kept")
    os.rename(key + ".new", key)

    def rotated():
        try:
            return tls_get(port, tls_ctx(cert), "/healthz")[0] == 200
        except (ssl.SSLError, ConnectionError):
            return False
    wait_until(rotated, 15, "the new certificate in use")
    check("TLS certificate files changed" in kr.stderr(), "no log line for the rotation")


# ---------------------------------------------------------------------------- identities and scope

TOKENS = """# token,user[,uid[,groups]] as the kube-apiserver's --token-auth-file
tok-a,device-a,1001
tok-b,device-b
tok-r,relay-2,3,"site,relays"
"""
ACCESS = """# user          namespaces     resources
device-a        default        configmaps
relay-2         *              configmaps,secrets
kreflect-test   default        *
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


class IdentityRelay:
    """On the scenario's test API server, cm-1 in default and cm-o in other, and a relay over TLS
    with TOKENS, ACCESS and the test CA's client certificates (CN kreflect-test), every namespace."""

    def __init__(self, s, *extra, resources=("configmaps",), access=ACCESS):
        s.create("cm-1")
        s.ctl.create("configmaps", "other", "cm-o", data={"k": "v"})
        wd = s.srv.workdir
        ca = os.path.join(wd, "ca.crt")
        self.tokens = write(os.path.join(s.dir, "tokens.csv"), TOKENS)
        self.access = write(os.path.join(s.dir, "access"), access)
        self.port = free_port()
        self.kr = s.kreflect("--listen", "127.0.0.1:%d" % self.port, "--listen-cert-file",
                             os.path.join(wd, "server.crt"), "--listen-key-file", os.path.join(wd, "server.key"),
                             "--listen-client-ca-file", ca, "--listen-token-file", self.tokens,
                             "--listen-access-file", self.access, "-A", *extra, resources=resources, name="relay")
        self.kr.wait_synced(len(resources))
        self.ctx = tls_ctx(ca)
        self.cert = tls_ctx(ca, os.path.join(wd, "client.crt"), os.path.join(wd, "client.key"))


@scenario("ServeIdentitiesAndScope", 14)
def t_identities(s):
    s.server()
    s.ctl.create("secrets", "default", "s1", data={"k": "dg=="})
    ir = IdentityRelay(s, "--serve-secrets", resources=("configmaps", "secrets"))
    kr, port, ctx, cert, tokens = ir.kr, ir.port, ir.ctx, ir.cert, ir.tokens
    ca = os.path.join(s.srv.workdir, "ca.crt")

    def expect(path, token, code, msg=None, c=ctx):
        st, body, _ = tls_get(port, c, path, token)
        check(st == code, "%s as %s: %d, not %d: %s" % (path, token, st, code, body[:200]))
        if code != 200:
            stt = status_of(body)
            check(stt["code"] == code and stt["reason"] == {401: "Unauthorized", 403: "Forbidden"}[code],
                  "%s: Status %s" % (path, stt))
            if msg:
                check(stt["message"] == msg, "%s as %s: message %r, not %r" % (path, token, stt["message"], msg))
        return body

    cms = "/api/v1/namespaces/default/configmaps"
    items = json.loads(expect(cms, "tok-a", 200))["items"]
    check([o["metadata"]["name"] for o in items] == ["cm-1"], "device-a's list: %s" % items)
    expect(cms + "/cm-1", "tok-a", 200)
    expect(cms + "?watch=1&resourceVersion=0&timeoutSeconds=1", "tok-a", 200)
    expect("/api/v1/configmaps", "tok-a", 403, 'configmaps is forbidden: User "device-a" cannot list resource '
           '"configmaps" in API group "" at the cluster scope')
    expect("/api/v1/namespaces/other/configmaps?watch=true", "tok-a", 403, 'configmaps is forbidden: User '
           '"device-a" cannot watch resource "configmaps" in API group "" in the namespace "other"')
    expect("/api/v1/namespaces/other/configmaps/cm-o", "tok-a", 403, 'configmaps "cm-o" is forbidden: User '
           '"device-a" cannot get resource "configmaps" in API group "" in the namespace "other"')
    expect("/api/v1/namespaces/default/secrets", "tok-a", 403)
    expect(cms, "tok-b", 403)                               # an identity with no rule reads nothing
    expect(cms, "tok-unknown", 401)
    items = json.loads(expect("/api/v1/secrets", "tok-r", 200))["items"]
    check([o["metadata"]["name"] for o in items] == ["s1"], "relay-2's secrets: %s" % items)
    items = json.loads(expect("/api/v1/configmaps", "tok-r", 200))["items"]
    check(sorted(o["metadata"]["name"] for o in items) == ["cm-1", "cm-o"], "relay-2's list: %s" % items)
    # The client certificate's CN is an identity: "*" resources, but not secrets (they must be named).
    expect(cms, None, 200, c=cert)
    expect("/api/v1/namespaces/default/secrets", None, 403, c=cert)
    expect("/api/v1/namespaces/other/configmaps", None, 403, c=cert)
    # Discovery and health are for every identity.
    expect("/api/v1", "tok-b", 200)
    expect("/healthz", "tok-b", 200)
    # kubectl shows the Status's message.
    if os.path.exists(KUBECTL):
        r = subprocess.run([KUBECTL, "--server", "https://127.0.0.1:%d" % port, "--certificate-authority", ca,
                            "--token", "tok-a", "get", "configmaps", "-n", "other"],
                           capture_output=True, text=True, timeout=30, env={"HOME": s.dir, "PATH": "/usr/bin:/bin"})
        check(r.returncode != 0 and 'Error from server (Forbidden): configmaps is forbidden: User "device-a"'
              in r.stderr, "kubectl: %s" % r.stderr[-300:])
    # A new identity in the file works within 10 s (the files are looked at that often); a broken
    # file keeps the ones in use, said in words (ServeIdentityFilesReload: only once).
    write(tokens, TOKENS + "tok-c,device-a\n")
    wait_until(lambda: tls_get(port, ctx, cms, "tok-c")[0] == 200, 15, "the new identity in use")
    write(tokens, TOKENS + "tok-c,\n")
    wait_until(lambda: tls_get(port, ctx, cms, "tok-c")[0] == 200 and "keeping the identities in use" in kr.stderr(),
               15, "the broken token file said")
    expect(cms, "tok-c", 200)
    check(kr.stderr().count("keeping the identities in use") == 1 and "line 5: the user is empty" in kr.stderr(),
          "the broken token file: %s" % kr.stderr_tail())
    for t in ("tok-a", "tok-b", "tok-c", "tok-r"):
        check(t not in kr.stderr(), "a token in the log")


def tls_watch(port, ctx, path, token=None, timeout=20):
    """A watch over TLS: (connection, response) once its 200 head is read."""
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    c.request("GET", path, headers={"Authorization": "Bearer " + token} if token else {})
    r = c.getresponse()
    if r.status != 200:
        raise Fail("watch %s: status %d: %s" % (path, r.status, r.read()[:200]))
    return c, r


def events_until(r, pred, what):
    """Watch events read until pred(event); Fail if the stream ends first or stays silent too long."""
    got = []
    while True:
        try:
            line = r.readline()
        except (socket.timeout, TimeoutError):
            raise Fail("%s: nothing for the socket's timeout; saw %s" % (what, [e.get("type") for e in got]))
        check(line, "%s: the watch ended; saw %s" % (what, got[-3:]))
        ev = json.loads(line)
        got.append(ev)
        if pred(ev):
            return ev


@scenario("ServeIdentityFilesReload", 40)
def t_identity_reload(s):
    """The token and access files are looked at every 10 s, as the TLS files are: a bad new file is said
    once in words and the rules in use stay; a good one is used for the requests after, and the watches
    open whose identity lost access end at once with the ERROR event of the Status that identity's new
    request gets (403, or 401 for a user no longer in the token file); a token replaced by another of
    the same user (a rotation) leaves that user's watch open. No request is made meanwhile: the tick,
    not a client, finds the change."""
    s.server()
    access0 = ACCESS + "device-b        default        configmaps\n"
    ir = IdentityRelay(s, access=access0)
    kr, port, ctx, cert, tokens, access = ir.kr, ir.port, ir.ctx, ir.cert, ir.tokens, ir.access
    cms = "/api/v1/namespaces/default/configmaps"
    w = "?watch=1&resourceVersion=0"
    watches = {"device-a": tls_watch(port, ctx, cms + w, "tok-a"),
               "device-b": tls_watch(port, ctx, cms + w, "tok-b"),
               "relay-2": tls_watch(port, ctx, "/api/v1/configmaps" + w, "tok-r"),
               "kreflect-test": tls_watch(port, cert, cms + w)}
    for who, (_, r) in watches.items():
        events_until(r, lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "cm-1",
                     "%s's initial ADDED" % who)
    # A bad access file: said once in words, the rules in use stay, the watches go on.
    write(access, "device-a default\n")
    wait_until(lambda: "listen: keeping the access rules in use: %s: line 1: not: user namespaces resources"
               % access in kr.stderr(), 15, "the bad access file said")
    s.create("cm-2")
    for who, (_, r) in watches.items():
        events_until(r, lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "cm-2",
                     "%s after the bad access file" % who)
    check(tls_get(port, ctx, cms, "tok-a")[0] == 200, "device-a lost access with a bad access file")
    # device-a keeps only "other"; device-b leaves the token file; relay-2 gets a new token in place of
    # its old one; the certificate's CN keeps "default".
    t0 = time.monotonic()
    write(access, access0.replace("device-a        default ", "device-a        other   "))
    write(tokens, TOKENS.replace("tok-b,device-b\n", "").replace('tok-r,relay-2,3,"site,relays"', "tok-r2,relay-2"))
    ev = events_until(watches["device-a"][1], lambda e: e["type"] == "ERROR", "device-a's watch")
    took = time.monotonic() - t0
    check(ev["object"] == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": 'configmaps is forbidden: User "device-a" cannot watch resource '
                           '"configmaps" in API group "" in the namespace "default"', "reason": "Forbidden",
                           "code": 403}, "device-a's ERROR: %s" % ev)
    check(took < e2e.late(12), "device-a's watch ended %.1f s after the change (the files are looked at every "
          "10 s)" % took)
    check(watches["device-a"][1].readline() == b"", "device-a's watch went on after its ERROR event")
    ev = events_until(watches["device-b"][1], lambda e: e["type"] == "ERROR", "device-b's watch")
    check(ev["object"]["code"] == 401 and ev["object"]["reason"] == "Unauthorized", "device-b's ERROR: %s" % ev)
    check(watches["device-b"][1].readline() == b"", "device-b's watch went on after its ERROR event")
    # The ones still allowed go on, relay-2's across its token's rotation; the new rules answer the
    # requests after.
    s.create("cm-3")
    for who in ("kreflect-test", "relay-2"):
        events_until(watches[who][1], lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "cm-3",
                     "%s's watch after the change" % who)
    st, body, _ = tls_get(port, ctx, cms + w, "tok-a")
    check(st == 403 and status_of(body)["message"].startswith('configmaps is forbidden: User "device-a"'),
          "device-a's new watch: %d %s" % (st, body[:200]))
    check(tls_get(port, ctx, "/api/v1/namespaces/other/configmaps", "tok-a")[0] == 200, "device-a in other")
    check(tls_get(port, ctx, cms, "tok-r")[0] == 401, "relay-2's old token")
    check(tls_get(port, ctx, cms, "tok-b")[0] == 401, "device-b's removed token")
    check(tls_get(port, ctx, "/api/v1/configmaps", "tok-r2")[0] == 200, "relay-2's new token")
    err = kr.stderr()
    check('listen: a watch of configmaps by "device-a" ended (403): the access file no longer allows it' in err
          and 'listen: a watch of configmaps by "device-b" ended (401): its user is no longer in the token file'
          in err and err.count("listen: a watch of") == 2, "the ends' log lines: %s" % kr.stderr_tail())
    check(err.count("keeping the access rules in use") == 1, "the bad access file was said more than once")
    for t in ("tok-a", "tok-b", "tok-r"):
        check(t not in err, "a token in the log")
    for c, _ in watches.values():
        c.close()


# ------------------------------------------------------------- python3-kubernetes and client-node

PY_CLIENT = os.path.join(HERE, "kube_python.py")
NODE_CLIENT = os.path.join(HERE, "kube_node.mjs")
# Where `make test-deps` installs @kubernetes/client-node (the version tests/bench/bench.py pins too).
NODE_MODULES = os.environ.get("KR_NODE_MODULES") or os.path.join(ROOT, "build", "bench", "npm")
NODE_CLIENT_VERSION = "1.4.0"


class ClientProc(Peer):
    """A client program printing JSON lines ({"op": ...}), read in order by Peer's thread."""

    def __init__(self, s, name, argv):
        super().__init__(name, argv, s.dir)
        e2e.remember(self.proc)
        self.err_path = os.path.join(s.dir, name + ".err")

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def op(self, name, timeout=30):
        def got():
            return next((x for x in self.snapshot() if x["op"] == name), None)
        try:
            return wait_until(got, timeout, "%s: the %s line" % (self.name, name))
        except Fail:
            with open(self.err_path, "rb") as f:
                raise Fail("%s: no %s line; stderr: %s" % (self.name, name, f.read()[-600:]))

    def events(self):
        return [x for x in self.snapshot() if x["op"] == "event"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        e2e.forget(self.proc)


def kubeconfig(path, port, ca, user):
    """A kubeconfig for the relay (JSON is YAML): the relay's CA and user (a token or a certificate)."""
    write(path, json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "relay",
        "clusters": [{"name": "relay", "cluster": {"server": "https://127.0.0.1:%d" % port,
                                                   "certificate-authority": ca}}],
        "users": [{"name": "device", "user": user}],
        "contexts": [{"name": "relay", "context": {"cluster": "relay", "user": "device", "namespace": "default"}}]}))
    return path


def default_objects(s):
    """name -> resourceVersion of the server's ConfigMaps in default."""
    return {k.split("/")[-1]: v for k, v in s.server_objects().items()}


def real_clients(s, argv):
    """python3-kubernetes or client-node (argv(kubeconfig) runs it) against a relay over TLS, from a
    kubeconfig with the relay's CA: once by token (device-a), once by client certificate (kreflect-test).
    Each is refused "other" with the apiserver's 403 Status (list and watch), lists "default" as the
    server has it, sees MODIFIED/ADDED/DELETED with the server's resourceVersions and a BOOKMARK (it
    asks for them); then device-a loses "default" in the access file and its watch ends with the
    403 the client reports, while the certificate's goes on."""
    s.server()
    ir = IdentityRelay(s, "--listen-bookmark-interval", "1")
    wd = s.srv.workdir
    ca = os.path.join(wd, "ca.crt")
    users = {"device-a": {"token": "tok-a"},
             "kreflect-test": {"client-certificate": os.path.join(wd, "client.crt"),
                               "client-key": os.path.join(wd, "client.key")}}
    procs = {who: ClientProc(s, who, argv(kubeconfig(os.path.join(s.dir, who + ".kubeconfig"), ir.port, ca, u)))
             for who, u in users.items()}
    try:
        want = default_objects(s)
        for who, p in procs.items():
            fl = p.op("forbidden-list")
            check(fl["code"] == 403 and fl["status"] == {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
                "code": 403, "message": 'configmaps is forbidden: User "%s" cannot list resource "configmaps" in '
                'API group "" in the namespace "other"' % who}, "%s's forbidden list: %s" % (who, fl))
            fw = p.op("forbidden-watch")
            check(fw["code"] == 403 and ("status" not in fw or 'cannot watch resource "configmaps"'
                                         in fw["status"]["message"]), "%s's forbidden watch: %s" % (who, fw))
            lst = p.op("list")
            check(lst["items"] == want, "%s's list: %s, the server has %s" % (who, lst["items"], want))
        # The delete waits for the ADDED: the relay keeps no old versions, so a watcher that reads an
        # ADDED record after the object's delete gets only the DELETED (src/README.md "The local endpoint").
        s.update("cm-1", {"k": "changed"})
        s.create("new", {"k": "new"})
        rvs = default_objects(s)

        def changes(p, n):
            ev = [e for e in p.events() if e["type"] != "BOOKMARK"]
            return ev if len(ev) >= n else None
        for who, p in procs.items():
            wait_until(lambda: changes(p, 2), 15, "%s's MODIFIED and ADDED" % who)
        s.delete("new")
        for who, p in procs.items():
            ev = wait_until(lambda: changes(p, 3), 15, "%s's three events" % who)
            got = [(e["type"], e.get("name")) for e in ev]
            check(got == [("MODIFIED", "cm-1"), ("ADDED", "new"), ("DELETED", "new")], "%s's events: %s" % (who, got))
            check(ev[0]["resourceVersion"] == rvs["cm-1"] and ev[1]["resourceVersion"] == rvs["new"]
                  and int(ev[2]["resourceVersion"]) > int(rvs["new"]), "%s's resourceVersions: %s, the server's %s"
                  % (who, [e["resourceVersion"] for e in ev], rvs))
            last = int(ev[2]["resourceVersion"])
            wait_until(lambda: [e for e in p.events() if e["type"] == "BOOKMARK"
                                and int(e["resourceVersion"]) >= last], 10, "%s's bookmark after the delete" % who)
        # device-a may no longer read "default": its open watch ends with the 403 (within the 10 s the
        # relay looks at the file in), as the client reports it; the certificate's watch goes on.
        write(ir.access, ACCESS.replace("device-a        default ", "device-a        other   "))
        msg = ('configmaps is forbidden: User "device-a" cannot watch resource "configmaps" in API group "" '
               'in the namespace "default"')
        end = procs["device-a"].op("end", 20)
        errors = [e for e in procs["device-a"].events() if e["type"] == "ERROR"]
        check(end["error"] == "403 Forbidden: " + msg or (end["error"] is None and errors and errors[0]["status"]["code"]
                                                        == 403 and errors[0]["status"]["message"] == msg),
              "device-a's watch after it lost access: %s, ERROR events %s" % (end, errors))
        s.create("after")
        wait_until(lambda: [e for e in procs["kreflect-test"].events() if e.get("name") == "after"], 10,
                   "the certificate's watch going on")
        check(not [x for x in procs["kreflect-test"].snapshot() if x["op"] == "end"], "the certificate's watch ended")
    finally:
        for p in procs.values():
            p.stop()


@scenario("ServeTLSPythonKubernetes", 25)
def t_python_kubernetes(s):
    """Debian's python3-kubernetes (make test-deps) against the relay: see real_clients."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import kubernetes; print(kubernetes.__version__)"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "python3-kubernetes is not installed (make test-deps): %s" % r.stderr[-300:])
    real_clients(s, lambda kc: ["/usr/bin/python3", PY_CLIENT, kc, "default", "other"])


@scenario("ServeTLSClientNode", 25)
def t_client_node(s):
    """@kubernetes/client-node (make test-deps installs it with npm) against the relay: see real_clients."""
    pkg = os.path.join(NODE_MODULES, "node_modules", "@kubernetes", "client-node", "package.json")
    check(os.path.exists(pkg), "@kubernetes/client-node is not installed in %s (make test-deps)" % NODE_MODULES)
    with open(pkg) as f:
        have = json.load(f).get("version")
    check(have == NODE_CLIENT_VERSION, "client-node %s in %s, not %s (make test-deps)"
          % (have, NODE_MODULES, NODE_CLIENT_VERSION))
    check(shutil.which("node"), "no node on PATH (make test-deps)")
    real_clients(s, lambda kc: ["node", NODE_CLIENT, NODE_MODULES, kc, "default", "other"])


@scenario("ServeIdentityFilesRefused", 6)
def t_identity_files_bad(s):
    """Bad token and access files: exit 2 and the line that is wrong."""
    s.server()
    s.create("cm-1")
    cases = [
        ("--listen-token-file", "tok-a,device-a\nbare\n", "line 2: not token,user"),
        ("--listen-token-file", "tok-a,device-a\ntok-a,device-b\n", "line 2: the same token as an earlier line"),
        ("--listen-token-file", "# only a comment\n", "no token in the file"),
        ("--listen-token-file", "tok a,device-a\n", "line 1: the token is empty, quoted, or has a space"),
        ("--listen-access-file", "device-a default\n", "line 1: not: user namespaces resources"),
        ("--listen-access-file", "\n\ndevice-a Default configmaps\n", "line 3: namespaces: not"),
        ("--listen-access-file", "device-a default configmaps,,secrets\n", "line 1: resources: not"),
    ]
    tokens = write(os.path.join(s.dir, "good-tokens"), "tok-a,device-a\n")
    for i, (flag, text, want) in enumerate(cases):
        f = write(os.path.join(s.dir, "file%d" % i), text)
        args = ["--listen", "127.0.0.1:%d" % free_port(), flag, f]
        if flag == "--listen-access-file":
            args += ["--listen-token-file", tokens]
        bad = s.kreflect(*args, name="bad%d" % i)
        check(bad.wait_exit(10) == 2 and want in bad.stderr(), "%r: %s" % (text, bad.stderr_tail()))
    # The examples beside the relay's README are files it takes.
    ex = os.path.join(ROOT, "config", "examples", "relay")
    good = s.kreflect("--listen", "127.0.0.1:%d" % free_port(), "--listen-token-file", os.path.join(ex, "tokens.csv"),
                      "--listen-access-file", os.path.join(ex, "access"), name="examples")
    good.wait_synced(1)
    bad = s.kreflect("--listen", "127.0.0.1:%d" % free_port(), "--listen-access-file",
                     write(os.path.join(s.dir, "acc"), "a * *\n"), name="noidentities")
    check(bad.wait_exit(10) == 2 and "needs --listen-token-file or --listen-client-ca-file" in bad.stderr(),
          bad.stderr_tail())


if __name__ == "__main__":
    import atexit
    import signal
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, e2e.on_signal)
    signal.signal(signal.SIGINT, e2e.on_signal)
    sys.exit(e2e.main(sys.argv[1:]))
