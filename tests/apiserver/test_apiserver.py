#!/usr/bin/env python3
"""Self-test of the kreflect test API server, over real TLS (standard library only).

    python3 tests/apiserver/test_apiserver.py [-v] [TestName ...]

Starts apiserver.py in temporary directories and checks the behaviours kreflect's
end-to-end tests rely on. The last line printed is "N passed, N failed"; the exit
status is 0 only if nothing failed.
"""

import base64
import faulthandler
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control import ControlError, ProtocolError, ServerProcess  # noqa: E402

NS = "/api/v1/namespaces/%s/configmaps"
TIMINGS = {}
SRV = None


def workdir_with_certs(tmp):
    """A fresh work dir holding copies of the main server's (EC) certificates,
    so another server starts without generating new ones."""
    import shutil
    for n in ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key", "certs.json"):
        shutil.copy(os.path.join(SRV.workdir, n), tmp)
    return tmp


def setUpModule():
    global SRV
    SRV = ServerProcess(["--seed", "7", "--too-large-wait", "0.5"])
    TIMINGS["startup (first start, generates EC certificates)"] = SRV.startup_seconds


def tearDownModule():
    if SRV:
        TIMINGS["shutdown after SIGTERM"] = SRV.stop()


class Base(unittest.TestCase):
    ns = "default"

    def setUp(self):
        self.srv = SRV
        self.ctl = SRV.control
        self.ctl.clear_faults()
        self.c = SRV.client()
        self.clients = [self.c]

    def tearDown(self):
        self.ctl.clear_faults()
        self.ctl.settings(bookmark_interval=60.0, watch_list=True, rv0_ignores_limit=True,
                          list_chunked=False, too_large_wait=0.5)
        for c in self.clients:
            c.close()

    def client(self, **kw):
        c = self.srv.client(**kw)
        self.clients.append(c)
        return c

    def get(self, path, client=None, **kw):
        return (client or self.c).request(path, **kw)

    def get_json(self, path, status=200, client=None):
        r = self.get(path, client)
        self.assertEqual(r.status, status, r.body[:300])
        return r.json()

    def rv(self):
        return self.ctl.rv()

    def make(self, ns, *names, **kw):
        return [self.ctl.create("configmaps", ns, n, **kw) for n in names]

    def names(self, lst):
        return [i["metadata"]["name"] for i in lst["items"]]


# =========================================================================== discovery, GET, LIST

class TestDiscoveryAndGet(Base):
    def test_discovery(self):
        d = self.get_json("/api")
        self.assertEqual((d["kind"], d["versions"]), ("APIVersions", ["v1"]))
        d = self.get_json("/api/v1")
        self.assertEqual((d["kind"], d["groupVersion"]), ("APIResourceList", "v1"))
        cm = [r for r in d["resources"] if r["name"] == "configmaps"][0]
        self.assertEqual((cm["singularName"], cm["namespaced"], cm["kind"]), ("configmap", True, "ConfigMap"))
        self.assertIn("watch", cm["verbs"])
        self.assertEqual({r["name"] for r in d["resources"]}, {"configmaps", "secrets", "pods"})
        d = self.get_json("/apis")
        self.assertEqual(d["kind"], "APIGroupList")
        apps = [g for g in d["groups"] if g["name"] == "apps"][0]
        self.assertEqual(apps["preferredVersion"], {"groupVersion": "apps/v1", "version": "v1"})
        self.assertEqual(self.get_json("/apis/apps")["kind"], "APIGroup")
        d = self.get_json("/apis/apps/v1")
        self.assertEqual(d["groupVersion"], "apps/v1")
        self.assertEqual([r["kind"] for r in d["resources"]], ["Deployment"])
        self.assertEqual(self.get("/apis/nope").status, 404)
        self.assertEqual(self.get("/api/v2").status, 404)

    def test_custom_resource(self):
        self.ctl.register(group="example.com", version="v1", plural="widgets", kind="Widget")
        d = self.get_json("/apis")
        self.assertIn("example.com", [g["name"] for g in d["groups"]])
        d = self.get_json("/apis/example.com/v1")
        self.assertEqual(d["resources"][0]["kind"], "Widget")
        self.ctl.create("widgets", "crd", "w1", spec={"size": 3})
        lst = self.get_json("/apis/example.com/v1/namespaces/crd/widgets")
        self.assertEqual(lst["kind"], "WidgetList")
        item = lst["items"][0]
        self.assertEqual((item["kind"], item["apiVersion"]), ("Widget", "example.com/v1"))  # CR lists keep them
        self.assertEqual(item["spec"], {"size": 3})
        self.assertEqual(item["metadata"]["generation"], 1)
        self.assertEqual(self.get_json("/apis/example.com/v1/widgets")["items"][0]["metadata"]["name"], "w1")

    def test_get_single_and_404(self):
        self.make("get", "one", data={"k": "v"})
        obj = self.get_json(NS % "get" + "/one")
        self.assertEqual((obj["kind"], obj["apiVersion"], obj["data"]), ("ConfigMap", "v1", {"k": "v"}))
        st = self.get_json(NS % "get" + "/missing", status=404)
        self.assertEqual((st["kind"], st["reason"], st["code"]), ("Status", "NotFound", 404))
        self.assertEqual(st["message"], 'configmaps "missing" not found')
        self.assertEqual(self.get("/api/v1/configmaps/one").status, 404)   # namespaced needs a namespace
        self.assertEqual(self.get(NS % "get", method="DELETE").status, 405)

    def test_secrets_pods_deployments(self):
        self.ctl.create("secrets", "kinds", "s", stringData={"password": "hunter2"})
        s = self.get_json("/api/v1/namespaces/kinds/secrets/s")
        self.assertEqual((s["type"], base64.b64decode(s["data"]["password"])), ("Opaque", b"hunter2"))
        self.assertNotIn("generation", s["metadata"])
        self.ctl.create("pods", "kinds", "p1")
        self.ctl.create("pods", "kinds", "p2", spec={"nodeName": "edge-2"})
        lst = self.get_json("/api/v1/namespaces/kinds/pods?fieldSelector=spec.nodeName%3Dedge-2")
        self.assertEqual(self.names(lst), ["p2"])
        self.ctl.create("deployments", "kinds", "d")
        lst = self.get_json("/apis/apps/v1/namespaces/kinds/deployments")
        self.assertEqual((lst["kind"], lst["apiVersion"]), ("DeploymentList", "apps/v1"))
        self.assertEqual(lst["items"][0]["metadata"]["generation"], 1)
        self.ctl.update("deployments", "kinds", "d", spec={"replicas": 3})
        d = self.get_json("/apis/apps/v1/namespaces/kinds/deployments/d")
        self.assertEqual((d["spec"]["replicas"], d["metadata"]["generation"]), (3, 2))
        self.assertIn("d", self.names(self.get_json("/apis/apps/v1/deployments")))


class TestList(Base):
    def test_list_shape_and_headers(self):
        self.make("shape", "a", "b", "c", data={"k": "v"}, labels={"app": "x"})
        r = self.get(NS % "shape")
        self.assertEqual(r.status, 200)
        self.assertEqual(int(r.headers["content-length"]), len(r.body))
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertEqual(r.headers["cache-control"], "no-cache, private")
        self.assertIn("audit-id", r.headers)
        self.assertIn("date", r.headers)
        lst = r.json()
        self.assertEqual((lst["kind"], lst["apiVersion"]), ("ConfigMapList", "v1"))
        self.assertEqual(lst["metadata"], {"resourceVersion": str(self.rv())})
        self.assertEqual(self.names(lst), ["a", "b", "c"])
        item = lst["items"][0]
        self.assertNotIn("kind", item)            # typed lists: items without kind/apiVersion
        self.assertNotIn("apiVersion", item)
        md = item["metadata"]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels", "managedFields"):
            self.assertIn(k, md)
        self.assertNotIn("generation", md)        # ConfigMaps have none on real servers
        mf = md["managedFields"][0]
        self.assertEqual((mf["operation"], mf["apiVersion"], mf["fieldsType"]), ("Update", "v1", "FieldsV1"))
        self.assertIn("f:data", mf["fieldsV1"])
        self.assertTrue(r.body.endswith(b"}\n"))
        all_ns = self.get_json("/api/v1/configmaps")
        self.assertTrue({"shape"} <= {i["metadata"]["namespace"] for i in all_ns["items"]})

    def test_pagination_is_consistent(self):
        self.ctl.bulk("configmaps", "page", 25, size=64, name_pattern="cm-{i:02d}")
        p1 = self.get_json(NS % "page" + "?limit=10")
        self.assertEqual(len(p1["items"]), 10)
        self.assertEqual(p1["metadata"]["remainingItemCount"], 15)
        tok = p1["metadata"]["continue"]
        token = json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))
        self.assertEqual(token, {"v": "meta.k8s.io/v1", "rv": int(p1["metadata"]["resourceVersion"]),
                                 "start": "cm-09\x00"})
        # Changes after the first page must not show in the later pages.
        self.ctl.update("configmaps", "page", "cm-12", data={"payload": "changed"})
        self.ctl.delete("configmaps", "page", "cm-13")
        self.make("page", "cm-14a")
        p2 = self.get_json(NS % "page" + "?limit=10&continue=" + tok)
        self.assertEqual(p2["metadata"]["resourceVersion"], p1["metadata"]["resourceVersion"])
        self.assertEqual(self.names(p2), ["cm-%02d" % i for i in range(10, 20)])
        self.assertNotEqual(p2["items"][2]["data"]["payload"], "changed")
        self.assertEqual(p2["metadata"]["remainingItemCount"], 5)
        p3 = self.get_json(NS % "page" + "?limit=10&continue=" + p2["metadata"]["continue"])
        self.assertEqual(self.names(p3), ["cm-%02d" % i for i in range(20, 25)])
        self.assertNotIn("continue", p3["metadata"])
        self.assertNotIn("remainingItemCount", p3["metadata"])
        # A fresh list sees the changes.
        now = self.names(self.get_json(NS % "page"))
        self.assertIn("cm-14a", now)
        self.assertNotIn("cm-13", now)
        r = self.get(NS % "page" + "?limit=10&resourceVersion=5&continue=" + tok)
        self.assertEqual(r.status, 400)
        self.assertEqual(self.get(NS % "page" + "?continue=garbage!").status, 400)

    def test_continue_expired_410(self):
        self.ctl.bulk("configmaps", "exp", 6, size=16)
        p1 = self.get_json(NS % "exp" + "?limit=2")
        self.make("exp", "later")
        self.ctl.compact()
        st = self.get_json(NS % "exp" + "?limit=2&continue=" + p1["metadata"]["continue"], status=410)
        self.assertEqual((st["kind"], st["status"], st["reason"], st["code"]), ("Status", "Failure", "Expired", 410))
        self.assertTrue(st["message"].startswith(
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter"), st["message"])
        # The new token continues (inconsistently) at the latest version.
        rest = self.get_json(NS % "exp" + "?continue=" + st["metadata"]["continue"])
        self.assertEqual(self.names(rest), ["cm-00002", "cm-00003", "cm-00004", "cm-00005", "later"])

    def test_rv0_ignores_limit_switch(self):
        self.ctl.bulk("configmaps", "rv0", 5, size=16)
        lst = self.get_json(NS % "rv0" + "?limit=2&resourceVersion=0")
        self.assertEqual(len(lst["items"]), 5)
        self.assertNotIn("continue", lst["metadata"])
        self.ctl.settings(rv0_ignores_limit=False)
        lst = self.get_json(NS % "rv0" + "?limit=2&resourceVersion=0")
        self.assertEqual(len(lst["items"]), 2)
        self.assertIn("continue", lst["metadata"])

    def test_resource_version_match(self):
        self.make("rvm", "x", data={"v": "1"})
        rv1 = self.rv()
        self.ctl.update("configmaps", "rvm", "x", data={"v": "2"})
        old = self.get_json(NS % "rvm" + "?resourceVersion=%d&resourceVersionMatch=Exact" % rv1)
        self.assertEqual((old["items"][0]["data"]["v"], old["metadata"]["resourceVersion"]), ("1", str(rv1)))
        legacy = self.get_json(NS % "rvm" + "?resourceVersion=%d&limit=5" % rv1)        # RV + limit = exact
        self.assertEqual(legacy["items"][0]["data"]["v"], "1")
        new = self.get_json(NS % "rvm" + "?resourceVersion=%d&resourceVersionMatch=NotOlderThan" % rv1)
        self.assertEqual(new["items"][0]["data"]["v"], "2")
        self.assertEqual(self.get_json(NS % "rvm" + "?resourceVersion=%d" % rv1)["items"][0]["data"]["v"], "2")
        self.ctl.compact()
        st = self.get_json(NS % "rvm" + "?resourceVersion=%d&resourceVersionMatch=Exact" % rv1, status=410)
        self.assertEqual((st["reason"], st["message"]),
                         ("Expired", "The resourceVersion for the provided list is too old."))

    def test_too_large_resource_version(self):
        cur = self.rv()
        t0 = time.monotonic()
        r = self.get(NS % "big" + "?resourceVersion=%d&resourceVersionMatch=NotOlderThan" % (cur + 1000))
        waited = time.monotonic() - t0
        self.assertEqual(r.status, 504)
        self.assertGreaterEqual(waited, 0.4)
        st = r.json()
        self.assertEqual((st["reason"], st["code"]), ("Timeout", 504))
        self.assertEqual(st["message"], "Timeout: Too large resource version: %d, current: %d" % (cur + 1000, cur))
        self.assertEqual(st["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")
        self.assertEqual(r.headers.get("retry-after"), "1")
        # A version that appears while waiting is served.
        threading.Timer(0.15, lambda: self.make("big", "soon")).start()
        lst = self.get_json(NS % "big" + "?resourceVersion=%d" % (self.rv() + 1))
        self.assertEqual(self.names(lst), ["soon"])

    def test_list_option_validation(self):
        st = self.get_json(NS % "val" + "?resourceVersionMatch=NotOlderThan", status=422)
        self.assertEqual(st["reason"], "Invalid")
        self.assertEqual(st["message"], 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                                        'resourceVersionMatch is forbidden unless resourceVersion is provided')
        self.get_json(NS % "val" + "?resourceVersion=0&resourceVersionMatch=Exact", status=422)
        self.get_json(NS % "val" + "?watch=1&resourceVersionMatch=NotOlderThan", status=422)
        self.get_json(NS % "val" + "?limit=abc", status=400)

    def test_label_and_field_selectors(self):
        ns = "sel"
        self.make(ns, "a", labels={"app": "web", "tier": "fe"})
        self.make(ns, "b", labels={"app": "db", "tier": "be"})
        self.make(ns, "c", labels={"app": "web"})
        self.make(ns, "d")
        cases = {
            "app=web": "ac", "app==web": "ac", "app!=web": "bd", "app in (web,db)": "abc",
            "app notin (web)": "bd", "tier": "ab", "!tier": "cd", "app=web,tier=fe": "a",
            "app in (web), !tier": "c", "app": "abc",
        }
        from urllib.parse import quote
        for sel, want in cases.items():
            lst = self.get_json(NS % ns + "?labelSelector=" + quote(sel))
            self.assertEqual("".join(self.names(lst)), want, sel)
        self.get_json(NS % ns + "?labelSelector=" + quote("app in web"), status=400)
        lst = self.get_json(NS % ns + "?labelSelector=app%3Dweb&limit=1")
        self.assertIn("continue", lst["metadata"])
        self.assertNotIn("remainingItemCount", lst["metadata"])     # never with selectors
        self.assertEqual(self.names(self.get_json(NS % ns + "?fieldSelector=metadata.name%3Db")), ["b"])
        self.assertEqual(self.names(self.get_json(NS % ns + "?fieldSelector=metadata.name!%3Db")), ["a", "c", "d"])
        lst = self.get_json("/api/v1/configmaps?fieldSelector=metadata.namespace%3D%3Dsel")
        self.assertEqual(self.names(lst), ["a", "b", "c", "d"])
        self.get_json(NS % ns + "?fieldSelector=data.x%3D1", status=400)

    def test_list_chunked_setting_and_gzip(self):
        self.ctl.bulk("configmaps", "chunky", 200, size=1024)
        self.ctl.settings(list_chunked=True)
        r = self.get(NS % "chunky")
        self.assertEqual(r.headers.get("transfer-encoding"), "chunked")
        self.assertGreater(len(r.chunks), 1)
        self.assertEqual(len(r.json()["items"]), 200)
        self.ctl.settings(list_chunked=False)
        r = self.get(NS % "chunky", headers={"Accept-Encoding": "gzip"})
        self.assertEqual(r.headers.get("content-encoding"), "gzip")
        import gzip
        self.assertEqual(len(json.loads(gzip.decompress(r.body))["items"]), 200)

    def test_gzip_as_the_apiserver_negotiates_it(self):
        import gzip
        self.ctl.bulk("configmaps", "gz", 200, size=1024)
        for value in ("x-gzip", "gzip;q=1.0", "GZIP", "deflate", ""):
            r = self.get(NS % "gz", headers={"Accept-Encoding": value} if value else None)
            self.assertIsNone(r.headers.get("content-encoding"), value)
        r = self.get(NS % "gz", headers={"Accept-Encoding": "deflate, gzip"})
        self.assertEqual(r.headers.get("content-encoding"), "gzip")
        self.assertEqual(r.headers.get("vary"), "Accept-Encoding")
        self.assertEqual(r.headers.get("transfer-encoding"), "chunked")   # no Content-Length, as Go
        self.assertIsNone(r.headers.get("content-length"))
        self.assertEqual(r.body[:10], b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff")
        self.assertEqual(len(json.loads(gzip.decompress(r.body))["items"]), 200)
        # Under the threshold: plain.
        r = self.get(NS % "gz" + "?limit=10", headers={"Accept-Encoding": "gzip"})
        self.assertIsNone(r.headers.get("content-encoding"))
        # Watches never.
        w = self.c.watch(NS % "gz" + "?watch=true&timeoutSeconds=1", headers={"Accept-Encoding": "gzip"})
        self.assertIsNone(w.headers.get("content-encoding"))

    def test_bad_gzip_fault(self):
        import gzip
        import zlib
        self.ctl.bulk("configmaps", "gzb", 200, size=1024)
        for mode, err in (("corrupt", (OSError, zlib.error, EOFError)), ("crc", OSError),
                          ("truncate", EOFError)):
            self.ctl.fault(kind="bad_gzip", mode=mode)
            r = self.get(NS % "gzb", headers={"Accept-Encoding": "gzip"})
            self.assertEqual(r.headers.get("content-encoding"), "gzip")
            with self.assertRaises(err, msg=mode):
                gzip.decompress(r.body)
        self.ctl.fault(kind="bad_gzip", mode="data")
        r = self.get(NS % "gzb", headers={"Accept-Encoding": "gzip"})
        raw = zlib.decompressobj(-15).decompress(r.body[10:-8])     # deflate itself is fine
        self.assertEqual(len(json.loads(raw)["items"]), 200)
        with self.assertRaises(OSError):
            gzip.decompress(r.body)
        self.ctl.fault(kind="bad_gzip", mode="bomb")
        r = self.get(NS % "gzb", headers={"Accept-Encoding": "gzip"})
        self.assertLess(len(r.body), 128 << 10)
        self.assertEqual(len(gzip.decompress(r.body)), 33 + (64 << 20))
        r = self.get(NS % "gzb", headers={"Accept-Encoding": "gzip"})   # used up
        self.assertEqual(len(json.loads(gzip.decompress(r.body))["items"]), 200)

    def test_delete_many(self):
        self.make("dm", "a", "b", "c")
        rv0 = self.rv()
        out = self.ctl.delete_many("configmaps", "dm", ["a", "c"])
        self.assertEqual((out["deleted"], out["resourceVersion"]), (2, str(rv0 + 2)))
        self.assertEqual(self.names(self.get_json(NS % "dm")), ["b"])

    def test_short_body_fault(self):
        self.make("sb", "a", "b")
        for chunked in (False, True):
            self.ctl.settings(list_chunked=chunked)
            self.ctl.fault(kind="short_body", bytes=40)
            r = self.get(NS % "sb")                   # framed whole: the client reads a clean end
            self.assertEqual((r.status, len(r.body)), (200, 40), chunked)
            with self.assertRaises(ValueError):
                json.loads(r.body)
            self.assertEqual(self.names(self.get_json(NS % "sb")), ["a", "b"])   # used up
        with self.assertRaises(Exception):
            self.ctl.fault(kind="short_body")


# =========================================================================== watch

class TestWatch(Base):
    def test_replay_from_resource_version(self):
        rv0 = self.rv()
        self.make("w-replay", "x", data={"k": "1"})
        self.make("w-other", "y")
        self.ctl.update("configmaps", "w-replay", "x", data={"k": "2"})
        d = self.ctl.delete("configmaps", "w-replay", "x")
        w = self.c.watch(NS % "w-replay" + "?watch=true&resourceVersion=%d&timeoutSeconds=5" % rv0)
        self.assertEqual(w.headers["transfer-encoding"], "chunked")
        self.assertEqual(w.headers["content-type"], "application/json")
        evs = w.events(3)
        self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "DELETED"])
        self.assertEqual([e["object"]["data"]["k"] for e in evs], ["1", "2", "2"])
        self.assertEqual(evs[2]["object"]["metadata"]["resourceVersion"], d["resourceVersion"])
        self.assertEqual((evs[0]["object"]["kind"], evs[0]["object"]["apiVersion"]), ("ConfigMap", "v1"))
        self.assertEqual(w.chunks, [len(line) for line in w.lines])   # one event per chunk, \n-terminated
        self.make("w-replay", "live")
        ev = w.next_event()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "live"))

    def test_single_object_watch(self):
        rv0 = self.rv()
        self.make("w-one", "a", "b")
        self.ctl.update("configmaps", "w-one", "b", data={"z": "1"})
        w = self.c.watch(NS % "w-one" + "/b?watch=1&resourceVersion=%d&timeoutSeconds=1" % rv0)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in w.drain()],
                         [("ADDED", "b"), ("MODIFIED", "b")])

    def test_too_old_resource_version(self):
        rv0 = self.rv()
        self.make("w-old", "x")
        self.ctl.compact()
        cur = self.rv()
        w = self.c.watch(NS % "w-old" + "?watch=1&resourceVersion=%d" % (rv0 - 1))
        ev = w.next_event()
        self.assertEqual(ev["type"], "ERROR")
        self.assertEqual(ev["object"], {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "too old resource version: %d (%d)" % (rv0 - 1, cur),
                                        "reason": "Expired", "code": 410})
        self.assertIsNone(w.next_event())
        self.assertEqual(w.ended, "clean")
        self.assertEqual(self.get(NS % "w-old").status, 200)      # connection still usable

    def test_legacy_watch_synthetic_added(self):
        self.make("w-legacy", "a", "b")
        self.ctl.settings(watch_list=False, bookmark_interval=0.2)
        streams = [self.client().watch(NS % "w-legacy" + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=1" + rv)
                   for rv in ("", "&resourceVersion=0")]
        self.ctl.settings(watch_list=True, bookmark_interval=60.0)
        # With the WatchList gate on, an RV="" watch is defaulted to a watch-list.
        w = self.c.watch(NS % "w-legacy" + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=1")
        for s in streams:
            evs = s.drain()
            self.assertEqual([(e["type"], e["object"].get("metadata", {}).get("name")) for e in evs[:2]],
                             [("ADDED", "a"), ("ADDED", "b")])
            for e in evs[2:]:     # plain bookmarks only, never the initial-events-end annotation
                self.assertEqual(e["type"], "BOOKMARK")
                self.assertNotIn("annotations", e["object"]["metadata"])
        evs = w.drain()
        self.assertEqual([e["type"] for e in evs], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(evs[2]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})

    def test_watch_list(self):
        self.make("w-list", "b", "a", "c")
        cur = self.rv()
        w = self.c.watch(NS % "w-list" + "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
                                         "&sendInitialEvents=true&timeoutSeconds=10&watch=true")
        evs = w.events(4)
        self.assertEqual([(e["type"], e["object"]["metadata"].get("name")) for e in evs[:3]],
                         [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")])
        self.assertEqual(evs[3], {"type": "BOOKMARK", "object": {
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"resourceVersion": str(cur), "annotations": {"k8s.io/initial-events-end": "true"}}}})
        self.make("w-list", "d")
        ev = w.next_event()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "d"))
        # With a resourceVersion (NotOlderThan) the initial events are the current state too.
        w2 = self.client().watch(NS % "w-list" + "?allowWatchBookmarks=true&resourceVersion=%d"
                                 "&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true" % cur)
        self.assertEqual([e["type"] for e in w2.events(5)], ["ADDED"] * 4 + ["BOOKMARK"])

    def test_watch_list_too_large_rv(self):
        cur = self.rv()
        w = self.c.watch(NS % "w-tl" + "?allowWatchBookmarks=true&resourceVersion=%d"
                                       "&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true"
                         % (cur + 500))
        ev = w.next_event()
        self.assertEqual((ev["type"], ev["object"]["code"], ev["object"]["reason"]), ("ERROR", 504, "Timeout"))
        self.assertEqual(ev["object"]["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")
        self.assertIsNone(w.next_event())

    def test_watch_list_disabled_422(self):
        self.ctl.settings(watch_list=False)
        r = self.c.watch(NS % "w-off" + "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
                                        "&sendInitialEvents=true&watch=true")
        self.assertEqual(r.status, 422)
        st = r.json()
        self.assertEqual((st["reason"], st["code"]), ("Invalid", 422))
        self.assertEqual(st["message"], 'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: '
                                        'sendInitialEvents is forbidden for watch unless the WatchList feature '
                                        'gate is enabled')
        self.assertEqual(st["details"]["causes"][0]["field"], "sendInitialEvents")

    def test_bookmarks(self):
        self.ctl.settings(bookmark_interval=0.3)
        cur = self.rv()
        w = self.c.watch(NS % "w-bm" + "?watch=1&allowWatchBookmarks=true&resourceVersion=%d" % cur)
        ev = w.next_event(timeout=3)
        self.assertEqual(ev, {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                                             "metadata": {"resourceVersion": str(cur)}}})
        self.make("w-bm", "x")
        self.assertEqual(w.next_event()["type"], "ADDED")
        ev = w.next_event(timeout=3)
        self.assertEqual((ev["type"], ev["object"]["metadata"]["resourceVersion"]), ("BOOKMARK", str(cur + 1)))
        # No bookmarks unless asked for; none with interval 0.
        w2 = self.client().watch(NS % "w-bm" + "?watch=1&resourceVersion=%d&timeoutSeconds=1" % self.rv())
        self.ctl.settings(bookmark_interval=0)
        w3 = self.client().watch(NS % "w-bm" + "?watch=1&allowWatchBookmarks=1&resourceVersion=%d"
                                               "&timeoutSeconds=1" % self.rv())
        # Otherwise one more bookmark 2 s before the deadline, like the cacher.
        self.ctl.settings(bookmark_interval=60)
        t0 = time.monotonic()
        w4 = self.client().watch(NS % "w-bm" + "?watch=1&allowWatchBookmarks=1&resourceVersion=%d"
                                               "&timeoutSeconds=3" % self.rv())
        self.assertEqual(w4.next_event(timeout=3)["type"], "BOOKMARK")
        self.assertLess(time.monotonic() - t0, 1.8)
        self.assertEqual(w2.drain(), [])
        self.assertEqual(w3.drain(), [])

    def test_timeout_seconds_and_keep_alive(self):
        self.ctl.bulk("configmaps", "w-ka", 5, size=16)
        since = self.ctl.log()[-1]["id"] if self.ctl.log() else 0
        p1 = self.get_json(NS % "w-ka" + "?limit=3")
        p2 = self.get_json(NS % "w-ka" + "?limit=3&continue=" + p1["metadata"]["continue"])
        t0 = time.monotonic()
        w = self.c.watch(NS % "w-ka" + "?watch=1&timeoutSeconds=1&resourceVersion=" + p1["metadata"]["resourceVersion"])
        self.assertEqual(w.drain(timeout=5), [])
        took = time.monotonic() - t0
        self.assertEqual(w.ended, "clean")
        self.assertTrue(0.9 <= took < 2.5, took)
        self.assertEqual(len(p2["items"]), 2)
        self.get_json(NS % "w-ka")
        self.assertEqual(self.c.connects, 1)
        log = [e for e in self.ctl.log(since) if e["path"] == NS % "w-ka"]
        self.assertEqual(len(log), 4)
        self.assertEqual(len({e["conn"] for e in log}), 1)          # all on one connection
        self.assertEqual([e["conn_request"] for e in log], [1, 2, 3, 4])
        self.assertEqual([e["watch"] for e in log], [False, False, True, False])
        e = log[0]
        self.assertEqual((e["method"], e["status"], e["query"]), ("GET", 200, {"limit": "3"}))
        self.assertGreater(e["bytes"], 0)

    def test_selector_transitions(self):
        rv0 = self.rv()
        w = self.c.watch(NS % "w-tr" + "?watch=1&labelSelector=app%%3Dweb&resourceVersion=%d" % rv0)
        self.make("w-tr", "x", labels={"app": "web"})
        self.make("w-tr", "other", labels={"app": "db"})
        moved = self.ctl.update("configmaps", "w-tr", "x", labels={"app": "db"})
        self.ctl.update("configmaps", "w-tr", "x", labels={"app": "web"})
        self.ctl.delete("configmaps", "w-tr", "x")
        evs = w.events(4)
        self.assertEqual([e["type"] for e in evs], ["ADDED", "DELETED", "ADDED", "DELETED"])
        gone = evs[1]["object"]["metadata"]
        self.assertEqual(gone["labels"], {"app": "web"})             # previous state...
        self.assertEqual(gone["resourceVersion"], moved["resourceVersion"])   # ...with the event's RV

    def test_many_concurrent_watches(self):
        rv0 = self.rv()
        clients = [self.client() for _ in range(24)]
        streams = [c.watch(NS % "w-many" + "?watch=1&resourceVersion=%d" % rv0) for c in clients]
        self.ctl.wait_watches(24, match="w-many")
        self.make("w-many", "ping")
        for s in streams:
            ev = s.next_event(timeout=5)
            self.assertEqual(ev["object"]["metadata"]["name"], "ping")


# =========================================================================== auth and TLS

class TestAuthAndTls(Base):
    def test_token_rotation(self):
        old = self.ctl.token()
        self.assertEqual(self.get("/api/v1/namespaces/auth/configmaps").status, 200)
        new = self.ctl.rotate_token()
        self.assertNotEqual(new, old)
        self.assertEqual(self.ctl.token(), new)
        r = self.client(auth=old).request("/api/v1/namespaces/auth/configmaps")
        self.assertEqual(r.status, 401)
        self.assertEqual(r.json(), {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        self.assertEqual(self.client(auth=None).request("/api").status, 401)
        self.assertEqual(self.client(auth=new).request("/api").status, 200)
        self.assertEqual(self.client(auth=None).request("/healthz").status, 200)

    def test_client_certificate(self):
        c = self.client(auth="cert")
        since = self.ctl.log()[-1]["id"]
        self.assertEqual(c.request("/api/v1/namespaces/auth/configmaps").status, 200)
        self.assertEqual(self.ctl.log(since)[0]["auth"], "cert:kreflect-test")

    def test_tls_versions(self):
        for v, name in (("1.2", "TLSv1.2"), ("1.3", "TLSv1.3")):
            c = self.client(tls_version=v)
            self.assertEqual(c.request("/api").status, 200)
            self.assertEqual(c.tls_version_used(), name)

    def test_certificates(self):
        out = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", self.srv.workdir + "/server.crt"],
                             capture_output=True, text=True).stdout
        self.assertIn("IP Address:127.0.0.1", out)
        self.assertIn("IP Address:0:0:0:0:0:0:0:1", out)
        self.assertIn("DNS:localhost", out)
        self.assertIn("id-ecPublicKey", out)
        out = subprocess.run(["openssl", "x509", "-noout", "-subject", "-in", self.srv.ready["client_cert"]],
                             capture_output=True, text=True).stdout
        self.assertIn("O = system:masters", out)
        self.assertIn("CN = kreflect-test", out)
        if "server6" in self.srv.ready:
            c = self.client(host="::1")
            self.assertEqual(c.request("/api").status, 200)


# =========================================================================== faults

class TestFaults(Base):
    def raw_read_all(self, c):
        """Everything the server sends until it closes (plaintext bytes)."""
        data = b""
        try:
            while True:
                c.sock.settimeout(5)
                d = c.sock.recv(65536)
                if not d:
                    break
                data += d
        except (ssl.SSLError, ConnectionError):
            pass
        return bytes(c.buf) + data

    def test_close_after_bytes(self):
        self.make("f-close", "a", data={"k": "v" * 500})
        for mid_record in (True, False):
            self.ctl.fault(kind="close_after", bytes=100, match="f-close", mid_record=mid_record)
            c = self.client()
            c.send(NS % "f-close")
            got = self.raw_read_all(c)
            self.assertEqual(len(got), 100)
            self.assertTrue(got.startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assertEqual(self.get(NS % "f-close").status, 200)        # used up
        # In a watch: cut in the middle of a chunk.
        rv0 = self.rv()
        self.make("f-close", "b")
        self.ctl.fault(kind="close_after", bytes=400, watch=True)
        c = self.client()
        c.send(NS % "f-close" + "?watch=1&resourceVersion=%d" % rv0)
        got = self.raw_read_all(c)
        self.assertEqual(len(got), 400)
        self.assertIn(b'{"type":"ADDED"', got)

    def test_fault_for_one_user_agent(self):
        self.make("f-ua", "a")
        self.ctl.fault(kind="status", code=503, match="f-ua", user_agent="other-client/")
        # Not this client's User-Agent: the fault waits for the other one.
        self.assertEqual(self.get(NS % "f-ua").status, 200)
        self.assertEqual(self.get(NS % "f-ua", headers={"User-Agent": "other-client/2.0"}).status, 503)
        self.assertEqual(self.get(NS % "f-ua", headers={"User-Agent": "other-client/2.0"}).status, 200)

    def test_slow_after_bytes(self):
        self.make("f-slow", "a", data={"k": "v" * 1000})
        self.ctl.fault(kind="slow", bytes=200, rate=2000, piece=100, match="f-slow")
        t0 = time.monotonic()
        r = self.get(NS % "f-slow")
        took = time.monotonic() - t0
        self.assertEqual(r.status, 200)
        self.assertIn(b'"name":"a"', r.body)
        # Everything past byte 200 (the head is more than that) at 2000 bytes a second.
        self.assertGreater(len(r.body), 1000)
        self.assertGreaterEqual(took, len(r.body) / 2000 * 0.9)
        t0 = time.monotonic()
        self.assertEqual(self.get(NS % "f-slow").status, 200)         # used up
        self.assertLess(time.monotonic() - t0, 0.3)
        with self.assertRaises(ControlError):
            self.ctl.fault(kind="slow", rate=0)

    def test_stall_before_response(self):
        self.ctl.fault(kind="stall", seconds=0.5)
        t0 = time.monotonic()
        self.assertEqual(self.get(NS % "f-stall").status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.45)

    def test_stall_watch_mid_stream(self):
        rv0 = self.rv()
        self.make("f-sw", "a")
        self.ctl.fault(kind="stall_watch", after_events=1, seconds=0.8)
        w = self.c.watch(NS % "f-sw" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertEqual(w.next_event()["object"]["metadata"]["name"], "a")
        t0 = time.monotonic()
        self.make("f-sw", "b")
        self.assertEqual(w.next_event(timeout=3)["object"]["metadata"]["name"], "b")
        self.assertGreaterEqual(time.monotonic() - t0, 0.6)
        # Stall with no end: the connection stays open, silent, until the client leaves.
        self.ctl.fault(kind="stall_watch", after_events=0)
        c = self.client()
        w = c.watch(NS % "f-sw" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertRaises(socket.timeout, w.next_event, 0.5)
        c.close()
        self.ctl.wait_log(match="f-sw", count=1, done=True, since=self.ctl.log()[-2]["id"])

    def test_garbage_line(self):
        rv0 = self.rv()
        self.make("f-garbage", "a", "b")
        self.ctl.fault(kind="garbage", after_events=1)
        w = self.c.watch(NS % "f-garbage" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertEqual(w.next_event()["type"], "ADDED")
        self.assertEqual(w.next_line(), b"this is not JSON {\n")
        self.assertEqual(w.next_event()["object"]["metadata"]["name"], "b")

    def test_cut_event(self):
        rv0 = self.rv()
        self.make("f-cut", "a", "b", "c")
        for at in ("string", "newline", "control"):
            self.ctl.fault(kind="cut_event", after_events=1, at=at, match="f-cut")
            c = self.client()
            w = c.watch(NS % "f-cut" + "?watch=1&resourceVersion=%d" % rv0)
            self.assertEqual(w.next_event()["object"]["metadata"]["name"], "a")
            line = w.next_line()
            self.assertTrue(line.endswith(b"\n") and line.count(b"\n") == 1, (at, line))
            self.assertRaises(ValueError, json.loads, line)
            if at == "control":
                self.assertIn(b'"name":"b\x01"', line)
                self.assertEqual(json.loads(line.replace(b"\x01", b""))["object"]["metadata"]["name"], "b")
            elif at == "newline":
                self.assertEqual(json.loads(line[:-1] + b"}")["object"]["metadata"]["name"], "b")
            else:
                self.assertTrue(line.startswith(b'{"type":"ADDED"') and b'"resourceVersion":"' in line, line)
            # The stream goes on with whole events.
            self.assertEqual(w.next_event()["object"]["metadata"]["name"], "c")
            c.close()
        # Several in a row.
        self.ctl.fault(kind="cut_event", after_events=0, events=2, match="f-cut")
        c = self.client()
        w = c.watch(NS % "f-cut" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertRaises(ValueError, json.loads, w.next_line())
        self.assertRaises(ValueError, json.loads, w.next_line())
        self.assertEqual(w.next_event()["object"]["metadata"]["name"], "c")
        c.close()
        # Inside a number: a Deployment's replicas.
        drv = self.rv()
        self.ctl.create("deployments", "f-cut", "d")
        self.ctl.update("deployments", "f-cut", "d", spec={"replicas": 12345})
        self.ctl.fault(kind="cut_event", after_events=1, at="number", match="deployments")
        c = self.client()
        w = c.watch("/apis/apps/v1/namespaces/f-cut/deployments?watch=1&resourceVersion=%d" % drv)
        self.assertEqual(w.next_event()["type"], "ADDED")
        line = w.next_line()
        self.assertTrue(line.startswith(b'{"type":"MODIFIED"') and line.endswith(b"\n"), line)
        self.assertRaises(ValueError, json.loads, line)
        self.assertRegex(line.decode(), r"[0-9]\n$")
        c.close()
        with self.assertRaises(ControlError):
            self.ctl.fault(kind="cut_event", at="middle")

    def test_invalid_chunk_size(self):
        rv0 = self.rv()
        self.make("f-chunk", "a")
        self.ctl.fault(kind="bad_chunk", after_events=1)
        w = self.c.watch(NS % "f-chunk" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertEqual(w.next_event()["type"], "ADDED")
        self.assertRaises(ProtocolError, w.next_event, 3)

    def test_status_faults(self):
        self.ctl.fault(kind="status", code=429, retry_after=2, match="f-status")
        r = self.get(NS % "f-status")
        self.assertEqual((r.status, r.headers.get("retry-after")), (429, "2"))
        st = r.json()
        self.assertEqual((st["kind"], st["reason"], st["code"], st["details"]["retryAfterSeconds"]),
                         ("Status", "TooManyRequests", 429, 2))
        for code, reason in ((500, "InternalError"), (503, "ServiceUnavailable"), (403, "Forbidden")):
            self.ctl.fault(kind="status", code=code, retry_after=1)
            r = self.get(NS % "f-status")
            self.assertEqual((r.status, r.json()["reason"]), (code, reason))
        self.ctl.fault(kind="unauthorized")
        self.assertEqual(self.get(NS % "f-status").json()["reason"], "Unauthorized")
        self.ctl.fault(kind="expired", match="f-status", watch=False)
        self.assertEqual(self.get("/api").status, 200)                # does not match: untouched
        st = self.get_json(NS % "f-status", status=410)
        self.assertEqual((st["reason"], st["message"]),
                         ("Expired", "The resourceVersion for the provided list is too old."))
        self.assertEqual(self.get(NS % "f-status").status, 200)
        # count and "all"
        self.ctl.fault(kind="status", code=500, count=2)
        self.assertEqual([self.get("/api").status for _ in range(3)], [500, 500, 200])
        self.ctl.fault(kind="status", code=503, count="all", match="only-this")
        self.assertEqual([self.get(NS % "only-this").status for _ in range(3)], [503] * 3)
        self.assertEqual(self.get("/api").status, 200)

    def test_status_too_large_variants(self):
        cur = self.rv()
        self.ctl.fault(kind="status", code=504, too_large=True, match="f-tl/")
        r = self.get(NS % "f-tl" + "?resourceVersion=%d" % (cur + 7))
        st = r.json()
        self.assertEqual((r.status, r.headers.get("retry-after"), st["reason"]), (504, "1", "Timeout"))
        self.assertEqual(st["details"]["causes"], [{"reason": "ResourceVersionTooLarge",
                                                    "message": "Too large resource version"}])
        self.assertEqual(st["message"], "Timeout: Too large resource version: %d, current: %d" % (cur + 7, cur))
        self.ctl.fault(kind="status", code=504, too_large="cause_message", match="f-tl/")
        st = self.get_json(NS % "f-tl", status=504)
        self.assertEqual(st["details"]["causes"], [{"message": "Too large resource version"}])
        self.ctl.fault(kind="status", code=504, too_large="message", match="f-tl/")
        st = self.get_json(NS % "f-tl" + "?resourceVersion=5", status=504)
        self.assertNotIn("causes", st["details"])
        self.assertTrue(st["message"].startswith("Too large resource version: 5, current: "))
        self.assertEqual(self.get(NS % "f-tl").status, 200)
        with self.assertRaises(ControlError):
            self.ctl.fault(kind="status", code=504, too_large="bogus")

    def test_initial_events_end_fault(self):
        self.make("f-iee", "a", "b")
        wl = (NS % "f-iee" + "?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
              "&sendInitialEvents=true&watch=true")
        # value: the annotation says "false"
        self.ctl.fault(kind="initial_events_end", value="false", match="f-iee")
        w = self.client().watch(wl)
        evs = w.events(3)
        self.assertEqual([e["type"] for e in evs], ["ADDED", "ADDED", "BOOKMARK"])
        self.assertEqual(evs[2]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "false"})
        # value null: never sent; the live events follow the initial ones
        self.ctl.fault(kind="initial_events_end", value=None, match="f-iee")
        w = self.client().watch(wl)
        self.assertEqual([e["type"] for e in w.events(2)], ["ADDED", "ADDED"])
        self.make("f-iee", "c")
        ev = w.next_event()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "c"))
        # delay: live events (updates, deletes) before the bookmark, whose RV covers them
        self.ctl.fault(kind="initial_events_end", delay=1.0, match="f-iee")
        w = self.client().watch(wl)
        self.assertEqual([e["type"] for e in w.events(3)], ["ADDED"] * 3)
        self.ctl.update("configmaps", "f-iee", "a", data={"k": "v2"})
        self.ctl.delete("configmaps", "f-iee", "c")
        evs = w.events(3, timeout=5)
        self.assertEqual([e["type"] for e in evs], ["MODIFIED", "DELETED", "BOOKMARK"])
        self.assertEqual(evs[2]["object"]["metadata"]["resourceVersion"], str(self.rv()))
        self.assertEqual(evs[2]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})
        with self.assertRaises(ControlError):
            self.ctl.fault(kind="initial_events_end", value=1)

    def test_watch_error_event(self):
        self.ctl.fault(kind="watch_error", code=500, after_events=0)
        w = self.c.watch(NS % "f-err" + "?watch=1&resourceVersion=%d" % self.rv())
        ev = w.next_event()
        self.assertEqual((ev["type"], ev["object"]["reason"], ev["object"]["code"]), ("ERROR", "InternalError", 500))
        self.assertIsNone(w.next_event())
        self.assertEqual(w.ended, "clean")

    def test_end_watch(self):
        rv0 = self.rv()
        self.make("f-end", "a", "b")
        self.ctl.fault(kind="end_watch", after_events=1, match="f-end")
        w = self.c.watch(NS % "f-end" + "?watch=1&resourceVersion=%d" % rv0)
        self.assertEqual(w.next_event()["object"]["metadata"]["name"], "a")
        self.assertIsNone(w.next_event())
        self.assertEqual(w.ended, "clean")
        self.assertEqual(self.get(NS % "f-end").status, 200)          # the connection is still usable

    def test_drop_watches(self):
        rv0 = self.rv()
        streams = [self.client().watch(NS % "f-drop" + "?watch=1&resourceVersion=%d" % rv0) for _ in range(2)]
        self.ctl.wait_watches(2, match="f-drop")
        self.assertGreaterEqual(self.ctl.drop_watches(), 2)
        for s in streams:
            self.assertIsNone(s.next_event(timeout=3))
            self.assertEqual(s.ended, "eof")                          # no terminating chunk

    def test_random_chunks(self):
        rv0 = self.rv()
        self.ctl.bulk("configmaps", "f-rand", 6, size=100)
        self.ctl.fault(kind="random_chunks", seed=3, min=1, max=40)
        w = self.c.watch(NS % "f-rand" + "?watch=1&timeoutSeconds=1&resourceVersion=%d" % rv0)
        evs = w.drain()
        self.assertEqual([e["object"]["metadata"]["name"] for e in evs], ["cm-%05d" % i for i in range(6)])
        self.assertGreater(len(w.chunks), len(evs))
        self.assertLessEqual(max(w.chunks), 40)
        bounds, pos = set(), 0
        for n in w.chunks:
            pos += n
            bounds.add(pos)
        ends, pos = set(), 0
        for line in w.lines:
            pos += len(line)
            ends.add(pos)
        self.assertTrue(ends - bounds, "some event should end inside a chunk")
        # Also applies to an ordinary response, which then comes chunked.
        self.ctl.fault(kind="random_chunks", seed=4, max=50)
        r = self.get(NS % "f-rand")
        self.assertEqual(r.headers.get("transfer-encoding"), "chunked")
        self.assertEqual(len(r.json()["items"]), 6)


# =========================================================================== control API and state

class TestControl(Base):
    def test_update_semantics(self):
        c = self.ctl.create("configmaps", "ctl", "u", data={"a": "1", "b": "2"}, labels={"x": "1"})
        rv = c["resourceVersion"]
        r = self.ctl.update("configmaps", "ctl", "u", data={"a": "1"})
        self.assertEqual((r["changed"], r["resourceVersion"]), (False, rv))       # no-op writes nothing
        r = self.ctl.update("configmaps", "ctl", "u", data={"b": None, "c": "3"})
        self.assertEqual(r["object"]["data"], {"a": "1", "c": "3"})
        self.assertEqual(int(r["resourceVersion"]), int(rv) + 1)
        self.assertEqual(r["object"]["metadata"]["uid"], c["uid"])
        r = self.ctl.update("configmaps", "ctl", "u", data={"only": "this"}, labels={"y": "2"}, mode="replace")
        self.assertEqual((r["object"]["data"], r["object"]["metadata"]["labels"]), ({"only": "this"}, {"y": "2"}))
        r = self.ctl.update("configmaps", "ctl", "u", patch={"metadata": {"annotations": {"n": "1"}}})
        self.assertEqual(r["object"]["metadata"]["annotations"], {"n": "1"})
        managers = [m["manager"] for m in r["object"]["metadata"]["managedFields"]]
        self.assertEqual(managers, ["kubectl-create", "kubectl-edit"])

    def test_state_and_errors(self):
        c = self.ctl.create("configmaps", "ctl2", "s")
        st = self.ctl.state(resource="configmaps", namespace="ctl2")
        self.assertEqual(st["objects"], {"configmaps/ctl2/s": {"resourceVersion": c["resourceVersion"],
                                                               "uid": c["uid"]}})
        self.assertEqual(st["resourceVersion"], str(st["rv"]))
        with self.assertRaises(ControlError) as e:
            self.ctl.create("configmaps", "ctl2", "s")
        self.assertEqual(e.exception.code, 409)
        with self.assertRaises(ControlError) as e:
            self.ctl.delete("configmaps", "ctl2", "nope")
        self.assertEqual(e.exception.code, 404)
        with self.assertRaises(ControlError) as e:
            self.ctl.fault(kind="nonsense")
        self.assertEqual(e.exception.code, 400)
        with self.assertRaises(ControlError) as e:
            self.ctl.settings(no_such_setting=1)
        self.assertEqual(e.exception.code, 400)

    def test_history_cap_compacts(self):
        self.ctl.settings(history_cap=50)
        try:
            rv0 = self.rv()
            self.ctl.bulk("configmaps", "hist", 60, size=8)
            st = self.ctl.state(summary=True)
            self.assertEqual((st["history_len"], st["compacted_rv"]), (50, st["rv"] - 50))
            w = self.c.watch(NS % "hist" + "?watch=1&resourceVersion=%d" % rv0)
            self.assertEqual(w.next_event()["object"]["code"], 410)
        finally:
            self.ctl.settings(history_cap=10000)

    def test_cli(self):
        py, ctl = sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "control.py")
        base = [py, ctl, "--ready-file", self.srv.ready_file]
        out = subprocess.run(base + ["create", "configmap", "cli", "name", "key=value", "-l", "app=x"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["object"]["data"], {"key": "value"})
        out = subprocess.run(base + ["fault", '{"kind":"close_after","bytes":100,"count":1}'],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(json.loads(out.stdout)["kind"], "close_after")
        out = subprocess.run(base + ["state", "--namespace", "cli"], capture_output=True, text=True, timeout=30)
        self.assertIn("configmaps/cli/name", json.loads(out.stdout)["objects"])
        out = subprocess.run(base + ["delete", "cm", "cli", "name"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0)
        out = subprocess.run(base + ["delete", "cm", "cli", "name"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 1)


# =========================================================================== separate servers

class TestScaleAndModes(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = tempfile.TemporaryDirectory(prefix="kreflect-apiserver-")

    def tearDown(self):
        self.tmp.cleanup()

    def test_bulk_list_and_bench(self):
        with ServerProcess(["--seed", "1"], workdir=workdir_with_certs(self.tmp.name)) as srv:
            ctl = srv.control
            t0 = time.monotonic()
            r = ctl.bulk("configmaps", "default", 10000, size=1024)
            TIMINGS["bulk create 10,000 x 1 KiB (control call)"] = time.monotonic() - t0
            self.assertEqual(r["created"], 10000)
            self.assertLess(time.monotonic() - t0, 5.0)
            c = srv.client(timeout=30)
            t0 = time.monotonic()
            resp = c.request(NS % "default")
            TIMINGS["LIST of 10,000 items, one response (%.1f MB), incl. client read"
                    % (len(resp.body) / 1e6)] = time.monotonic() - t0
            self.assertEqual(len(resp.json()["items"]), 10000)
            t0 = time.monotonic()
            n, cont, pages = 0, "", 0
            while True:
                lst = c.request(NS % "default" + "?limit=500" + ("&continue=" + cont if cont else "")).json()
                n += len(lst["items"])
                pages += 1
                cont = lst["metadata"].get("continue")
                if not cont:
                    break
            TIMINGS["LIST of 10,000 items in 20 pages of 500"] = time.monotonic() - t0
            self.assertEqual((n, pages, c.connects), (10000, 20, 1))
            b = ctl.bench(count=20000, size=1024)
            t0 = time.monotonic()
            w = c.watch(NS % "default" + "?watch=1&resourceVersion=%d" % (b["first_rv"] - 1))
            got = 0
            while w.next_line(timeout=10) is not None:
                got += 1
            dt = time.monotonic() - t0
            TIMINGS["bench watch 20,000 MODIFIED events x 1 KiB (%.0f MB/s incl. client parse)"
                    % (b["bytes"] / dt / 1e6)] = dt
            self.assertEqual((got, w.ended), (20000, "clean"))
            self.assertEqual(ctl.rv(), b["last_rv"])

    def test_plain_http_rsa_no_watch_list(self):
        with ServerProcess(["--plain-http", "--no-watch-list"], workdir=workdir_with_certs(self.tmp.name)) as srv:
            self.assertTrue(srv.ready["server"].startswith("http://"))
            c = srv.client()
            self.assertEqual(c.request("/api").status, 200)
            r = c.watch(NS % "default" + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
            self.assertEqual(r.status, 422)
            self.assertEqual(srv.control.settings()["watch_list"], False)

    def test_rsa_tls_and_sigterm_with_open_watch(self):
        with ServerProcess(["--key-type", "rsa", "--initial", "3"]) as srv:
            TIMINGS["startup with --key-type rsa (generates RSA certificates)"] = srv.startup_seconds
            out = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", srv.ready["ca"]],
                                 capture_output=True, text=True).stdout
            self.assertIn("rsaEncryption", out)
            c = srv.client()
            self.assertEqual(c.request("/api").status, 200)
            lst = c.request(NS % "default").json()
            self.assertEqual(len(lst["items"]), 3)
            w = c.watch(NS % "default" + "?watch=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
            srv.control.wait_watches(1)
            took = srv.stop()
            self.assertLess(took, 1.0)
            self.assertEqual(srv.proc.returncode, 0)
            self.assertIsNone(w.next_event(timeout=3))


# =========================================================================== runner

class Result(unittest.TestResult):
    def __init__(self, verbose):
        super().__init__()
        self.verbose = verbose
        self.passed = 0
        self.failed_names = []

    def startTest(self, test):
        super().startTest(test)
        self._t0 = time.monotonic()

    def _name(self, test):
        return test.id().split(".", 1)[-1]

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1
        print("ok    %-60s %.2fs" % (self._name(test), time.monotonic() - self._t0), flush=True)

    def _fail(self, test, err, what):
        self.failed_names.append(self._name(test))
        print("FAIL: %s (%s, %.2fs)" % (self._name(test), what, time.monotonic() - getattr(self, "_t0", 0)))
        print("".join(traceback.format_exception(*err)).rstrip(), flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err, "failure")

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err, "error")


def main():
    faulthandler.dump_traceback_later(170, exit=True)     # never hang a CI run
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    loader = unittest.TestLoader()
    module = sys.modules[__name__]
    suite = loader.loadTestsFromNames(args, module) if args else loader.loadTestsFromModule(module)
    result = Result("-v" in sys.argv)
    t0 = time.monotonic()
    suite.run(result)
    total = time.monotonic() - t0
    print("timings:")
    for k, v in TIMINGS.items():
        print("  %-75s %.3fs" % (k, v))
    print("total %.1fs" % total)
    failed = len(result.failed_names)
    if failed:
        print("failed: " + ", ".join(result.failed_names))
    print("%d passed, %d failed" % (result.passed, failed))
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
