#!/usr/bin/python3
"""A peer for `make bench`: what k8s-sidecar does, on the same library it is
built on (Debian's python3-kubernetes; k8s-sidecar itself is not packaged in
Debian), so that kreflect --k8s-sidecar can be measured beside it.

    /usr/bin/python3 tests/bench/peer_sidecar.py --server URL --certificate-authority CA
        --token-file PATH --label KEY=VALUE --folder DIR [-n NS] [--unique]

As k8s-sidecar's WATCH method: a list of the labelled ConfigMaps in pages of 5
(its page size), each data key written to DIR/KEY unless the file already
holds the same bytes (SHA-256 compared), a deep copy of every object kept to
find removed keys; then a watch with the label selector, timeoutSeconds 60
and a 66 s client timeout, writing and removing files per event, and watching
again when the server ends it. Files are written in place, as k8s-sidecar
writes them. It prints "SYNCED N" on stdout after the list.
"""
import argparse
import copy
import hashlib
import os
import sys

from kubernetes import client, watch


def main():
    ap = argparse.ArgumentParser(prog="peer_sidecar")
    ap.add_argument("--server", required=True)
    ap.add_argument("--certificate-authority", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--folder", required=True)
    ap.add_argument("-n", "--namespace", default="default")
    ap.add_argument("--unique", action="store_true", help="UNIQUE_FILENAMES=true's names")
    a = ap.parse_args()

    cfg = client.Configuration()
    cfg.host = a.server
    cfg.ssl_ca_cert = a.certificate_authority
    with open(a.token_file) as f:
        cfg.api_key = {"authorization": f.read().strip()}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api = client.CoreV1Api(client.ApiClient(cfg))
    os.makedirs(a.folder, exist_ok=True)
    kept = {}

    def write(name, text):
        path = os.path.join(a.folder, name)
        data = text.encode()
        if os.path.exists(path):
            with open(path, "rb") as f:
                if hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest():
                    return
        with open(path, "wb") as f:
            f.write(data)

    def remove(name):
        path = os.path.join(a.folder, name)
        if os.path.isfile(path):
            os.remove(path)

    def fname(cm, k):
        if not a.unique:
            return k
        return "namespace_%s.configmap_%s.%s" % (cm.metadata.namespace, cm.metadata.name, k)

    def apply(cm, removed=False):
        key = cm.metadata.namespace + "/" + cm.metadata.name
        old = kept.pop(key, None) if removed else kept.get(key)
        if removed:
            for k in (cm.data or {}):
                remove(fname(cm, k))
            return
        kept[key] = copy.deepcopy(cm)
        for k, v in (cm.data or {}).items():
            write(fname(cm, k), v)
        for k in set((old.data or {}) if old else ()) - set(cm.data or {}):
            remove(fname(cm, k))

    count, cont = 0, None
    while True:
        page = api.list_namespaced_config_map(a.namespace, label_selector=a.label, limit=5, _continue=cont)
        for cm in page.items:
            apply(cm)
            count += 1
        cont = page.metadata._continue
        if not cont:
            break
    sys.stdout.write("SYNCED %d\n" % count)
    sys.stdout.flush()
    while True:
        for ev in watch.Watch().stream(api.list_namespaced_config_map, a.namespace, label_selector=a.label,
                                       timeout_seconds=60, _request_timeout=66):
            apply(ev["object"], ev["type"] == "DELETED")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
