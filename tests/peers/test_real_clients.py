#!/usr/bin/env python3
"""The test API server against real clients: kubectl 1.32 and client-go 0.32.

    python3 tests/peers/test_real_clients.py [NAME ...]

kreflect's tests and tests/apiserver/ were written by the same hands; here the
server answers clients it did not grow up with. kubectl is Debian trixie's
(kubernetes-client, unpacked by `make test-deps` into $KR_TRIXIE_DIR, default
build/deps/trixie; never the machine's own), client-go is the reflector of
build/peers/client-go-peer (`make peers`). Each check fails if a client
rejects an answer (an error, a decode warning, a fallback it should not need)
or if what it shows differs from the server's state:

  list          kubectl get -o json: every object, each field as the server has it
  table         kubectl get (human output; the server serves no Table, kubectl prints its own)
  pagination    kubectl get --chunk-size=7: limit/continue pages, every object once
  selectors     kubectl get -l and --field-selector
  watch         kubectl get --watch-only --output-watch-events: ADDED/MODIFIED/DELETED
  list-410      an expired continue token: kubectl reports the Status (reason Expired)
  unauthorized  a wrong token: kubectl takes the 401 Status for "not logged in"
  reflector-list        client-go, gate off: LIST then WATCH, no fallback, mirror equal
  reflector-watch-list  client-go, WatchListClient on: one watch-list request, synced at the
                        initial-events-end bookmark (no fallback to LIST), mirror equal
  reflector-bookmarks   bookmarks every 0.5 s: client-go keeps its one watch (no decode error)
  reflector-410         compaction and cut watches: client-go reads the ERROR 410 event as
                        "too old resource version", relists once, converges
(kubectl get has no --resource-version, so the watch 410 is the reflector's.)

The last line is "N passed, N failed". Artifacts: build/test/real-clients/.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True      # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
sys.path.insert(0, HERE)
from control import ServerProcess  # noqa: E402
import test_peers as peers  # noqa: E402
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until  # noqa: E402

TRIXIE = os.environ.get("KR_TRIXIE_DIR") or os.path.join(ROOT, "build", "deps", "trixie")
KUBECTL = os.path.join(TRIXIE, "usr", "bin", "kubectl")
ART = os.path.join(ROOT, "build", "test", "real-clients")
NS = "/api/v1/namespaces/default/configmaps"
# What a client says when it does not accept an answer.
REJECTS = ("unable to decode", "Unexpected", "couldn't get", "failed to list", "falling back",
           "unable to sync", "Failed to watch", "invalid", "unknown", "Warning:")


class Ctx:
    def __init__(self, name):
        self.dir = os.path.join(ART, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        os.makedirs(os.path.join(self.dir, "server"))
        self.srv = ServerProcess(["--seed", "1"], workdir=os.path.join(self.dir, "server"), timeout=60)
        e2e.remember(self.srv.proc)
        self.ctl = self.srv.control
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.procs = []

    def kubectl(self, *args, timeout=20, check_rc=True):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.home}
        cmd = [KUBECTL, "--kubeconfig", self.srv.ready["kubeconfig"], "--context", "token"] + list(args)
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
        out, err = p.stdout.decode(), p.stderr.decode()
        with open(os.path.join(self.dir, "kubectl.log"), "a") as f:
            f.write("$ %s\n-> %d\n%s\n%s\n" % (" ".join(cmd), p.returncode, out[-2000:], err))
        if check_rc:
            check(p.returncode == 0, "kubectl %s: exit %d: %s" % (" ".join(args), p.returncode, err.strip()[:300]))
            bad = [w for w in REJECTS if w in err]
            check(not bad, "kubectl %s: stderr says %s: %s" % (" ".join(args), bad, err.strip()[:300]))
        return p.returncode, out, err

    def objects(self):
        st = self.ctl.state(resource="configmaps", namespace="default", objects=True)
        return st["objects"]

    def log(self, ua):
        return [e for e in self.ctl.log() if (e.get("user_agent") or "").startswith(ua) and e["path"] == NS]

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            e2e.forget(p)
        try:
            with open(os.path.join(self.dir, "requests.json"), "w") as f:
                json.dump(self.ctl.log(), f, indent=1)
        except Exception:
            pass
        self.srv.stop()
        e2e.forget(self.srv.proc)


def strip(o):
    o = json.loads(json.dumps(o))
    o.pop("kind", None)
    o.pop("apiVersion", None)
    return o


TESTS = []


def test(fn):
    TESTS.append((fn.__name__[2:].replace("_", "-"), fn))
    return fn


# ------------------------------------------------------------------ kubectl

@test
def t_list(c):
    c.ctl.create("configmaps", "default", "a", data={"k": "v", "multi": "line\nline"}, labels={"app": "x"})
    c.ctl.create("configmaps", "default", "b", binaryData={"bin": "AAEC"}, annotations={"note": "é ü"})
    _, out, _ = c.kubectl("get", "configmaps", "-n", "default", "-o", "json")
    got = json.loads(out)
    check(got.get("kind") == "List" and len(got["items"]) == 2, "kubectl list: %s" % out[:300])
    for item in got["items"]:
        name = item["metadata"]["name"]
        want = c.ctl.get("configmaps", "default", name)
        check(item["kind"] == "ConfigMap" and item["apiVersion"] == "v1", "item %s: kind %s" % (name, item.get("kind")))
        # kubectl hides managedFields unless asked (--show-managed-fields).
        want["metadata"].pop("managedFields", None)
        check(strip(item) == strip(want), "item %s differs from the server's object:\n  %s\n  %s"
              % (name, json.dumps(strip(item))[:400], json.dumps(strip(want))[:400]))


@test
def t_table(c):
    for i in range(3):
        c.ctl.create("configmaps", "default", "t%d" % i, data={"k": str(i)})
    _, out, _ = c.kubectl("get", "configmaps", "-n", "default")
    lines = out.strip().splitlines()
    check(lines[0].split()[0] == "NAME" and [ln.split()[0] for ln in lines[1:]] == ["t0", "t1", "t2"],
          "kubectl get: %s" % out)


@test
def t_pagination(c):
    c.ctl.bulk("configmaps", "default", 30, size=100)
    _, out, _ = c.kubectl("get", "configmaps", "-n", "default", "--chunk-size=7", "-o", "json")
    names = [i["metadata"]["name"] for i in json.loads(out)["items"]]
    want = sorted(k.split("/")[-1] for k in c.objects())
    check(names == want, "chunked list: %d names, %d on the server" % (len(names), len(want)))
    pages = c.log("kubectl/")
    check(len(pages) == 5, "%d list requests for 30 objects in pages of 7" % len(pages))
    check(all(p["query"].get("limit") == "7" for p in pages), "a page without limit=7")
    check(all("continue" in p["query"] for p in pages[1:]) and "continue" not in pages[0]["query"],
          "continue tokens: %s" % [sorted(p["query"]) for p in pages])


@test
def t_selectors(c):
    c.ctl.create("configmaps", "default", "s1", data={"k": "1"}, labels={"tier": "a"})
    c.ctl.create("configmaps", "default", "s2", data={"k": "2"}, labels={"tier": "b"})
    _, out, _ = c.kubectl("get", "cm", "-n", "default", "-l", "tier in (a)", "-o", "json")
    check([i["metadata"]["name"] for i in json.loads(out)["items"]] == ["s1"], "label selector: %s" % out[:200])
    _, out, _ = c.kubectl("get", "cm", "-n", "default", "--field-selector", "metadata.name=s2", "-o", "json")
    check([i["metadata"]["name"] for i in json.loads(out)["items"]] == ["s2"], "field selector: %s" % out[:200])


def start_kubectl_watch(c, *extra):
    env = {"PATH": "/usr/bin:/bin", "HOME": c.home}
    cmd = [KUBECTL, "--kubeconfig", c.srv.ready["kubeconfig"], "--context", "token", "get", "configmaps",
           "-n", "default", "--watch-only", "--output-watch-events", "-o", "json"] + list(extra)
    out = open(os.path.join(c.dir, "watch.out"), "wb")
    err = open(os.path.join(c.dir, "watch.err"), "wb")
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
    e2e.remember(p)
    c.procs.append(p)
    return p


def read_json_stream(path):
    """kubectl -o json prints one pretty object after another."""
    text = open(path).read()
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            return out          # the last one may still be being written
        out.append(obj)


@test
def t_watch(c):
    c.ctl.create("configmaps", "default", "w0", data={"k": "0"})
    p = start_kubectl_watch(c)
    c.ctl.call("/wait-watches", {"count": 1, "timeout": 15})
    c.ctl.create("configmaps", "default", "w1", data={"k": "1"})
    c.ctl.update("configmaps", "default", "w1", data={"k": "2"})
    c.ctl.delete("configmaps", "default", "w0")
    path = os.path.join(c.dir, "watch.out")
    got = wait_until(lambda: (lambda evs: evs if len(evs) >= 3 else None)(read_json_stream(path)), 15,
                     "three watch events from kubectl")
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in got]
    check(seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w0")], "kubectl saw %s" % seen)
    check(p.poll() is None, "kubectl's watch ended (exit %s)" % p.poll())
    err = open(os.path.join(c.dir, "watch.err")).read()
    check(not err.strip(), "kubectl watch stderr: %s" % err[:300])


@test
def t_list_410(c):
    c.ctl.bulk("configmaps", "default", 12, size=50)
    c.ctl.fault(kind="expired", match="continue=")
    rc, _, err = c.kubectl("get", "cm", "-n", "default", "--chunk-size=5", check_rc=False)
    check(rc != 0 and "Expired" in err and "continue parameter is too old" in err,
          "kubectl with an expired continue token: exit %d, %s" % (rc, err.strip()[:300]))


@test
def t_unauthorized(c):
    env = {"PATH": "/usr/bin:/bin", "HOME": c.home}
    p = subprocess.run([KUBECTL, "--server", c.srv.ready["server"], "--certificate-authority", c.srv.ready["ca"],
                        "--token", "wrong", "get", "cm", "-n", "default"], capture_output=True, timeout=20, env=env)
    err = p.stderr.decode()
    check(p.returncode != 0 and "You must be logged in to the server" in err, "kubectl with a wrong token: exit %d, %s"
          % (p.returncode, err.strip()[:300]))


# ------------------------------------------------------------------ client-go's reflector

def start_reflector(c, watch_list):
    env = {"PATH": "/usr/bin:/bin", "HOME": c.home,
           "KUBE_FEATURE_WatchListClient": "true" if watch_list else "false"}
    out = open(os.path.join(c.dir, "client-go.out"), "wb")
    err = open(os.path.join(c.dir, "client-go.err"), "wb")
    p = subprocess.Popen([peers.PEER, "--server", c.srv.ready["server"], "--certificate-authority",
                          c.srv.ready["ca"], "--token-file", c.srv.ready["token_file"], "-v", "4", "configmaps"],
                         stdout=out, stderr=err, env=env)
    e2e.remember(p)
    c.procs.append(p)
    return p


def reflector_lines(c):
    lines = []
    with open(os.path.join(c.dir, "client-go.out")) as f:
        for raw in f:
            try:
                lines.append(json.loads(raw))
            except ValueError:
                pass
    return lines


def reflector_converges(c, timeout=15):
    def same():
        m, _ = e2e.fold(reflector_lines(c))
        want = {k.split("/", 1)[1]: v["resourceVersion"] for k, v in c.objects().items()}
        return {k: o["metadata"]["resourceVersion"] for k, o in m.items()} == want
    wait_until(same, timeout, "client-go's mirror to equal the server's objects", 0.1)
    _, anomalies = e2e.fold(reflector_lines(c))
    check(not anomalies, "client-go's lines do not fold: %s" % anomalies[:3])


def reflector_rejects(c):
    err = open(os.path.join(c.dir, "client-go.err")).read()
    return [ln for ln in err.splitlines() if any(w in ln for w in REJECTS) and "Feature gate" not in ln]


@test
def t_reflector_list(c):
    c.ctl.bulk("configmaps", "default", 8, size=100)
    start_reflector(c, False)
    wait_until(lambda: any(e["type"] == "SYNCED" for e in reflector_lines(c)), 15, "client-go's SYNCED")
    c.ctl.update("configmaps", "default", "cm-00003", data={"payload": "new"})
    c.ctl.delete("configmaps", "default", "cm-00004")
    reflector_converges(c)
    kinds = [e2e.req_kind(e) for e in c.log("client-go-peer")]
    check(kinds == ["L", "W"], "client-go's requests: %s" % kinds)
    check(not reflector_rejects(c), "client-go: %s" % reflector_rejects(c)[:3])


@test
def t_reflector_watch_list(c):
    c.ctl.bulk("configmaps", "default", 8, size=100)
    start_reflector(c, True)
    wait_until(lambda: any(e["type"] == "SYNCED" for e in reflector_lines(c)), 15, "client-go's SYNCED")
    syn = [e for e in reflector_lines(c) if e["type"] == "SYNCED"][0]
    check(syn["count"] == 8 and syn["resourceVersion"] == str(c.ctl.rv()), "SYNCED %s" % syn)
    c.ctl.create("configmaps", "default", "late", data={"k": "v"})
    reflector_converges(c)
    kinds = [e2e.req_kind(e) for e in c.log("client-go-peer")]
    check(kinds == ["WL"], "client-go's requests: %s (a LIST means it fell back)" % kinds)
    err = open(os.path.join(c.dir, "client-go.err")).read()
    check("received the bookmark that marks the end of initial events" in err,
          "client-go did not end its initial events at the bookmark")
    check(not reflector_rejects(c), "client-go: %s" % reflector_rejects(c)[:3])


@test
def t_reflector_bookmarks(c):
    c.ctl.settings(bookmark_interval=0.5)
    c.ctl.bulk("configmaps", "default", 3, size=100)
    start_reflector(c, False)
    wait_until(lambda: any(e["type"] == "SYNCED" for e in reflector_lines(c)), 15, "client-go's SYNCED")
    time.sleep(3)
    ws = [e for e in c.log("client-go-peer") if e.get("watch")]
    check(len(ws) == 1 and not ws[0].get("done") and ws[0]["events"] >= 4,
          "client-go's watches over 3 s of bookmarks: %s" % [(w["events"], w["status"]) for w in ws])
    c.ctl.create("configmaps", "default", "after-bookmarks", data={"k": "v"})
    reflector_converges(c)
    check(not reflector_rejects(c), "client-go: %s" % reflector_rejects(c)[:3])


@test
def t_reflector_410(c):
    c.ctl.bulk("configmaps", "default", 5, size=100)
    start_reflector(c, False)
    wait_until(lambda: any(e["type"] == "SYNCED" for e in reflector_lines(c)), 15, "client-go's SYNCED")
    time.sleep(1.2)
    c.ctl.fault(kind="close_after", bytes=0, watch=True)
    c.ctl.call("/drop-watches")
    c.ctl.update("configmaps", "default", "cm-00001", data={"payload": "x"})
    c.ctl.delete("configmaps", "default", "cm-00002")
    c.ctl.call("/compact", {})
    reflector_converges(c, 20)
    err = open(os.path.join(c.dir, "client-go.err")).read()
    check("too old resource version" in err, "client-go did not report the 410")
    kinds = [e2e.req_kind(e) for e in c.log("client-go-peer")]
    check(kinds.count("L") == 2, "client-go's requests: %s (one relist expected)" % kinds)


def main(argv):
    os.makedirs(ART, exist_ok=True)
    for b, how in ((KUBECTL, "make test-deps (KR_TRIXIE_DIR=%s)" % TRIXIE), (peers.PEER, "make peers")):
        if not os.access(b, os.X_OK):
            print("FAIL setup: %s is missing (%s)" % (b, how))
            print("0 passed, 1 failed")
            return 1
    todo = [(n, f) for n, f in TESTS if not argv or any(a in n for a in argv)]
    passed = failed = 0
    for name, fn in todo:
        c = None
        t0 = time.monotonic()
        try:
            c = Ctx(name)
            fn(c)
            err = None
        except Fail as e:
            err = str(e)
        except Exception:
            err = "exception: " + traceback.format_exc().strip().replace("\n", "\n  ")
        if c is not None:
            try:
                c.close()
            except Exception as e:
                err = err or "cleanup: %s" % e
        if err is None:
            passed += 1
            print("ok %s (%.1f s)" % (name, time.monotonic() - t0), flush=True)
        else:
            failed += 1
            print("FAIL %s: %s" % (name, err), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    peers.run_as_script(main)
