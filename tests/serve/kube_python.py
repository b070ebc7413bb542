#!/usr/bin/python3
"""python3-kubernetes (Debian's) as a user would point it at kreflect's --listen:
its own kubeconfig loading, a list, then a watch with bookmarks.

    /usr/bin/python3 tests/serve/kube_python.py KUBECONFIG NAMESPACE FORBIDDEN_NAMESPACE

Prints one JSON line per step, for tests/serve/test_serve.py to check:
  {"op":"forbidden-list","code":403,"status":{the Status body}}   list in FORBIDDEN_NAMESPACE
  {"op":"forbidden-watch","code":403,"status":{...}}              watch there
  {"op":"list","resourceVersion":RV,"items":{name: RV}}           list in NAMESPACE
  {"op":"event","type":T,"name":N,"resourceVersion":RV,"annotations":{...}}
                                      each watch event from the list's RV, bookmarks included
  {"op":"end","error":WHY}            the watch ended: "CODE Reason: message" when the client
                                      raised (an ERROR event), null when it ended cleanly
An unexpected answer to a forbidden request prints its code (or "none") instead.
"""
import json
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def say(**kw):
    print(json.dumps(kw), flush=True)


def refused(op, fn):
    try:
        fn()
        say(op=op, code="none")
    except ApiException as e:
        try:
            body = json.loads(e.body)
        except (TypeError, ValueError):
            body = e.body
        say(op=op, code=e.status, status=body)


def main():
    path, ns, forbidden = sys.argv[1:4]
    api_client = config.new_client_from_config(config_file=path)
    api = client.CoreV1Api(api_client)
    refused("forbidden-list", lambda: api.list_namespaced_config_map(forbidden))
    refused("forbidden-watch", lambda: next(iter(watch.Watch().stream(api.list_namespaced_config_map,
                                                                      forbidden, timeout_seconds=5))))
    lst = api.list_namespaced_config_map(ns)
    rv = lst.metadata.resource_version
    say(op="list", resourceVersion=rv,
        items={o.metadata.name: o.metadata.resource_version for o in lst.items})
    try:
        for ev in watch.Watch().stream(api.list_namespaced_config_map, ns, resource_version=rv,
                                       allow_watch_bookmarks=True):
            md = ev["raw_object"].get("metadata", {})
            say(op="event", type=ev["type"], name=md.get("name"), resourceVersion=md.get("resourceVersion"),
                annotations=md.get("annotations") or {})
        say(op="end", error=None)
    except ApiException as e:
        # An ERROR event is raised as an ApiException whose reason is "Reason: message".
        say(op="end", error="%s %s" % (e.status, e.reason))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(1)
