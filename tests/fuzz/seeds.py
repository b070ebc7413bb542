#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the netsim fuzz targets.

    python3 tests/fuzz/seeds.py tests/corpus

watch_path/seed-*: whole server conversations in the format of
fuzz_watch_path.c (setup bytes, then responses separated by "\\n@@\\n", each
with its two netsim.h header bytes). event_apply/seed-*: watch event streams
(the body of one watch response). `make fuzz-merge` keeps only the inputs that
add coverage, so the seeds may disappear into the merged corpus; this script
is how they were made.
"""
import json
import os
import sys

SEP = b"\n@@\n"
KEEP, EOF, RESET, REFUSE = 0, 1, 2, 3


def setup(watch_list=0, keep_mf=False, two=False, pages=False, arena=0, quota=False, seed=7):
    c0 = watch_list | keep_mf << 2 | two << 3 | pages << 4 | arena << 5 | quota << 7
    return bytes([c0, seed])


def header(end=EOF, sizes=0, seed=1):
    return bytes([end | sizes << 2, seed])


def cm(name, rv, ns="default", uid=None, data=None, managed=False, kind=True):
    meta = {"name": name, "namespace": ns, "resourceVersion": str(rv),
            "uid": uid or "uid-" + name}
    if managed:
        meta["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    o = {}
    if kind:
        o["kind"] = "ConfigMap"
        o["apiVersion"] = "v1"
    o["metadata"] = meta
    o["data"] = data or {"k": "v" + str(rv)}
    return o


def ev(kind, obj):
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def bookmark(rv, initial_end=False):
    meta = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return ev("BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta})


def chunked(body, size=40):
    out = b""
    for i in range(0, len(body), size):
        part = body[i:i + size]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def response(status, body=b"", chunk=None, extra=b"", close=False):
    reason = {200: b"OK", 400: b"Bad Request", 410: b"Gone", 429: b"Too Many Requests",
              500: b"Internal Server Error", 503: b"Service Unavailable"}.get(status, b"X")
    head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n" % (status, reason) + extra
    if close:
        head += b"Connection: close\r\n"
    if chunk:
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(body, chunk)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def status(code, reason, message):
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


def cmlist(rv, items, cont=None, kind=False):
    meta = {"resourceVersion": str(rv)}
    if cont:
        meta["continue"] = cont
        meta["remainingItemCount"] = 1
    return json.dumps({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta,
                       "items": [cm(n, r, kind=kind) for n, r in items]}).encode()


def conv(cfg, *responses):
    return cfg + SEP.join(h + b for h, b in responses)


def watch_path_seeds():
    wl_body = ev("ADDED", cm("a", 10)) + ev("ADDED", cm("b", 11, managed=True)) + bookmark(12, True)
    w_body = (ev("MODIFIED", cm("a", 13)) + ev("DELETED", cm("b", 14)) + bookmark(15)
              + ev("ADDED", cm("c", 16, uid="u-c")))
    yield "watchlist", conv(setup(), (header(KEEP, 0), response(200, wl_body, chunk=64)),
                            (header(EOF, 2, 9), response(200, w_body, chunk=30)),
                            (header(EOF), response(200, b"", chunk=8)))
    yield "watchlist-split", conv(setup(watch_list=1), (header(RESET, 1, 3), response(200, wl_body, chunk=17)),
                                  (header(EOF, 3, 5), response(200, wl_body, chunk=100)))
    page1 = cmlist(20, [("a", 18), ("b", 19)], cont="tok1")
    page2 = cmlist(20, [("c", 20)])
    yield "list-pages", conv(setup(watch_list=2, pages=True),
                             (header(KEEP), response(200, page1, chunk=50)),
                             (header(KEEP, 2, 4), response(200, page2)),
                             (header(EOF), response(200, ev("ADDED", cm("d", 21)) + ev("ERROR", json.loads(status(410, "Expired", "too old resource version: 20 (25)"))), chunk=64)),
                             (header(EOF), response(200, cmlist(30, [("a", 18), ("d", 21)]))))
    yield "unsupported", conv(setup(), (header(KEEP), response(400, status(400, "BadRequest", "sendInitialEvents is forbidden"))),
                              (header(KEEP), response(200, cmlist(5, [("x", 5)]), chunk=200)),
                              (header(EOF), response(200, ev("MODIFIED", cm("x", 6)), close=True)))
    yield "retry-after", conv(setup(watch_list=2), (header(KEEP), response(429, status(429, "TooManyRequests", "slow down"), extra=b"Retry-After: 2\r\n")),
                              (header(KEEP), response(503, b"", extra=b"Retry-After: Thu, 01 Jan 2026 00:00:05 GMT\r\n")),
                              (header(KEEP), response(410, status(410, "Expired", "expired"))),
                              (header(EOF), response(200, cmlist(7, [("y", 7)]))))
    yield "refused-reset", conv(setup(watch_list=2), (header(REFUSE), b""),
                                (header(RESET, 1, 8), response(200, cmlist(3, [("z", 3)])[:30])),
                                (header(EOF), response(200, cmlist(3, [("z", 3)]))),
                                (header(KEEP), response(500, status(500, "InternalError", "boom"), chunk=10)))
    big = cm("big", 40, data={"k": "x" * 5000})
    yield "too-big", conv(setup(watch_list=2, arena=3), (header(KEEP), response(200, cmlist(40, [("a", 39)]))),
                          (header(EOF, 3, 2), response(200, ev("ADDED", big) + ev("DELETED", cm("a", 41)) + ev("ADDED", cm("b", 42)), chunk=700)))
    dep = {"kind": "Deployment", "apiVersion": "apps/v1",
           "metadata": {"name": "d", "namespace": "ns", "resourceVersion": "50", "uid": "ud"}, "spec": {}}
    yield "two-resources", conv(setup(two=True, quota=True, arena=1),
                                (header(KEEP), response(200, wl_body, chunk=64)),
                                (header(KEEP), response(200, ev("ADDED", dep) + bookmark(51, True), chunk=64)),
                                (header(EOF, 1, 6), response(200, w_body, chunk=25)),
                                (header(EOF, 2, 7), response(200, ev("MODIFIED", dict(dep, spec={"r": 2})), chunk=25)))


def event_apply_seeds():
    yield "basic", (ev("ADDED", cm("a", 2)) + ev("ADDED", cm("b", 3, ns="kube-system"))
                    + ev("MODIFIED", cm("a", 4, managed=True)) + ev("DELETED", cm("b", 5, ns="kube-system")) + bookmark(6))
    yield "no-kind", ev("ADDED", cm("a", 2, kind=False)) + ev("MODIFIED", cm("a", 3, kind=False, managed=True))
    yield "replace-uid", ev("ADDED", cm("a", 2, uid="one")) + ev("MODIFIED", cm("a", 3, uid="two"))
    yield "escapes", (b'{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a\\u0062",'
                      b'"namespace":"n\\/s","resourceVersion":"7","uid":"\\ud83d\\ude00"},"data":{}}}\n'
                      + b'{"type":"DELETED","object":{"metadata":{"name":"ab","namespace":"n/s","resourceVersion":"8"}}}')
    yield "other-kind", (ev("ADDED", dict(cm("a", 2), kind="Secret")) + ev("UNKNOWN", cm("b", 3))
                         + ev("ADDED", {"metadata": {"namespace": "x"}}) + ev("ADDED", cm("c", 4)))
    yield "error", ev("ADDED", cm("a", 2)) + ev("ERROR", json.loads(status(410, "Expired", "gone"))) + ev("ADDED", cm("b", 3))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/corpus"
    for target, seeds in (("watch_path", watch_path_seeds()), ("event_apply", event_apply_seeds())):
        os.makedirs(os.path.join(root, target), exist_ok=True)
        for name, data in seeds:
            with open(os.path.join(root, target, "seed-" + name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
