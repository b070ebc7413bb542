#!/usr/bin/python3
"""A peer for `make bench`: the reflector a Python user would write with the
official client (Debian's python3-kubernetes), printing the same JSON lines as
kreflect.

    /usr/bin/python3 tests/bench/peer_python.py --server URL --certificate-authority CA
        --token-file PATH [-n NS] [--once]

It lists the ConfigMaps of one namespace, keeps them (typed, as the client
returns them) in a dict keyed by namespace/name, prints
{"type":"SYNCED","resource":"configmaps","resourceVersion":"...","count":N}, then
follows watch.Watch().stream from the list's resourceVersion (with bookmarks;
the stream re-watches by itself after a clean end) and prints every change as
{"type":"ADDED|MODIFIED|DELETED","object":{...}}. A 410 relists. --once exits 0
right after the SYNCED line.

As kreflect does, objects are kept and printed without metadata.managedFields,
and list items get the kind and apiVersion that typed lists leave out.
"""
import argparse
import json
import sys
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def main():
    ap = argparse.ArgumentParser(prog="peer_python")
    ap.add_argument("--server", required=True)
    ap.add_argument("--certificate-authority", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("-n", "--namespace", default="default")
    ap.add_argument("--once", action="store_true")
    a = ap.parse_args()

    cfg = client.Configuration()
    cfg.host = a.server
    cfg.ssl_ca_cert = a.certificate_authority
    with open(a.token_file) as f:
        cfg.api_key = {"authorization": f.read().strip()}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api_client = client.ApiClient(cfg)
    api = client.CoreV1Api(api_client)
    # One write per event, as kreflect and the Node.js peer do.
    sys.stdout.reconfigure(line_buffering=True)
    out = sys.stdout
    mirror = {}

    def emit(kind, raw):
        out.write('{"type":"%s","object":%s}\n' % (kind, DUMPS(raw)))

    def relist():
        lst = api.list_namespaced_config_map(a.namespace)
        seen = set()
        for item in lst.items:
            item.metadata.managed_fields = None
            item.kind, item.api_version = "ConfigMap", "v1"
            key = item.metadata.namespace + "/" + item.metadata.name
            seen.add(key)
            old = mirror.get(key)
            mirror[key] = item
            if old is None:
                emit("ADDED", api_client.sanitize_for_serialization(item))
            elif old.metadata.resource_version != item.metadata.resource_version:
                emit("MODIFIED", api_client.sanitize_for_serialization(item))
        for key in [k for k in mirror if k not in seen]:
            emit("DELETED", api_client.sanitize_for_serialization(mirror.pop(key)))
        rv = lst.metadata.resource_version
        out.write('{"type":"SYNCED","resource":"configmaps","resourceVersion":"%s","count":%d}\n'
                  % (rv, len(mirror)))
        out.flush()
        return rv

    rv = relist()
    if a.once:
        return 0
    while True:
        try:
            for ev in watch.Watch().stream(api.list_namespaced_config_map, a.namespace,
                                           resource_version=rv, allow_watch_bookmarks=True):
                kind, raw = ev["type"], ev["raw_object"]
                if kind == "BOOKMARK":
                    rv = raw["metadata"]["resourceVersion"]
                    continue
                obj = ev["object"]
                obj.metadata.managed_fields = None
                raw["metadata"].pop("managedFields", None)
                key = obj.metadata.namespace + "/" + obj.metadata.name
                rv = obj.metadata.resource_version
                if kind == "DELETED":
                    mirror.pop(key, None)
                else:
                    mirror[key] = obj
                emit(kind, raw)
        except ApiException as e:
            print("peer_python: watch: %s" % e.status, file=sys.stderr)
            if e.status == 410:
                rv = relist()
            else:
                time.sleep(1)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(1)
