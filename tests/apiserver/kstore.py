"""State of the simulated kube-apiserver (standard library only).

Everything here is transport-free: resource types, objects, the global
resourceVersion counter, the bounded event history with compaction, MVCC-style
snapshots for paginated and Exact lists, label/field selectors, continue tokens,
Status objects, fault rules, the request log and the settings.

One lock (`Store.lock`) guards all of it; `Store.cond` is signalled on every new
event (and on settings changes and dropped watches), `Store.meta_cond` (same lock)
on request-log and watch-registry changes.

Semantics follow kube-apiserver with the watch cache (see src/README.md
"The wire format"): every write bumps the single global
resourceVersion by one and records exactly one event, so the history is a list
whose i-th entry has resourceVersion `compacted_rv + 1 + i`.
"""

import base64
import binascii
import bisect
import copy
import hashlib
import json
import random
import threading
import time
import uuid

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


# --------------------------------------------------------------------------- JSON

def dumps(obj):
    """Compact JSON as Go's encoding/json writes it (HTML-escaped, UTF-8)."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
             .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s.encode("utf-8")


def rfc3339(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


# --------------------------------------------------------------------------- Status

def status(code, reason, message, details=None, metadata=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": metadata or {},
          "status": "Failure", "message": message, "reason": reason}
    if details:
        st["details"] = details
    st["code"] = code
    return st


class ApiError(Exception):
    """An error answered with a Status object (HTTP code = status code)."""

    def __init__(self, st, headers=None):
        super().__init__(st.get("message", ""))
        self.status = st
        self.code = st["code"]
        self.headers = dict(headers or {})


MSG_LIST_EXPIRED = "The resourceVersion for the provided list is too old."
MSG_CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter.")
MSG_CONTINUE_INCONSISTENT = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list.")


def status_unauthorized():
    return status(401, "Unauthorized", "Unauthorized")


def status_too_large(rv, current):
    return status(504, "Timeout", "Timeout: Too large resource version: %d, current: %d" % (rv, current),
                  {"causes": [{"reason": "ResourceVersionTooLarge",
                               "message": "Too large resource version"}],
                   "retryAfterSeconds": 1})


def status_too_large_variant(variant, rv, current):
    """The "Too large resource version" Status as servers of different ages
    sent it: "cause" (1.18.6+: a cause of type ResourceVersionTooLarge),
    "cause_message" (1.17-1.18.5: only a cause message), "message" (before
    1.17: only the message)."""
    if variant in (True, "cause"):
        return status_too_large(rv, current)
    if variant == "cause_message":
        return status(504, "Timeout", "Timeout: request did not complete within the allowed timeout",
                      {"causes": [{"message": "Too large resource version"}], "retryAfterSeconds": 1})
    if variant == "message":
        return status(504, "Timeout", "Too large resource version: %d, current: %d" % (rv, current),
                      {"retryAfterSeconds": 1})
    raise ValueError("too_large must be true, \"cause\", \"cause_message\" or \"message\"")


def status_watch_too_old(rv, oldest):
    return status(410, "Expired", "too old resource version: %d (%d)" % (rv, oldest))


def err_bad_request(msg):
    return ApiError(status(400, "BadRequest", msg))


def err_not_found(rtype, name):
    details = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    return ApiError(status(404, "NotFound", '%s "%s" not found' % (rtype.resource_name, name), details))


def err_too_large(rv, current):
    return ApiError(status_too_large(rv, current), {"Retry-After": "1"})


def err_invalid_list_options(errors):
    """errors: list of (field, kind, detail); kind "Forbidden" or "NotSupported"
    (then detail = (value, [supported...]))."""
    msgs, causes = [], []
    for field, kind, detail in errors:
        if kind == "Forbidden":
            text = "Forbidden: " + detail
            causes.append({"reason": "FieldValueForbidden", "message": text, "field": field})
        else:
            value, supported = detail
            text = 'Unsupported value: "%s": supported values: %s' % (
                value, ", ".join('"%s"' % s for s in supported))
            causes.append({"reason": "FieldValueNotSupported", "message": text, "field": field})
        msgs.append("%s: %s" % (field, text))
    agg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    return ApiError(status(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: ' + agg,
                           {"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes}))


def canned_status(code, rtype=None, retry_after=None, message=None, reason=None):
    """A realistic Status for an injected HTTP error."""
    what = rtype.resource_name if rtype else "configmaps"
    table = {
        400: ("BadRequest", "the server rejected our request for an unknown reason"),
        401: ("Unauthorized", "Unauthorized"),
        403: ("Forbidden", '%s is forbidden: User "system:anonymous" cannot list resource "%s" '
                           'in API group "%s" at the cluster scope'
              % (what, rtype.plural if rtype else "configmaps", rtype.group if rtype else "")),
        404: ("NotFound", "the server could not find the requested resource"),
        409: ("Conflict", "the object has been modified; please apply your changes to the latest "
                          "version and try again"),
        410: ("Expired", MSG_LIST_EXPIRED),
        422: ("Invalid", 'ListOptions.meta.k8s.io "" is invalid: injected'),
        429: ("TooManyRequests", "Too many requests, please try again later."),
        500: ("InternalError", "Internal error occurred: injected fault"),
        503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
        504: ("Timeout", "Timeout: request did not complete within the allowed timeout"),
    }
    default_reason, default_msg = table.get(code, ("Unknown", "injected error"))
    details = {}
    if code == 500:
        details["causes"] = [{"message": "injected fault"}]
    if code == 403 and rtype:
        details = {"group": rtype.group, "kind": rtype.plural} if rtype.group else {"kind": rtype.plural}
    if retry_after is not None:
        details["retryAfterSeconds"] = int(retry_after)
    return status(code, reason or default_reason, message or default_msg, details or None)


# --------------------------------------------------------------------------- resource types

GO_BOOL = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
           "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


class ResourceType:
    """One served resource, e.g. core/v1 configmaps or example.com/v1 widgets."""

    def __init__(self, group, version, plural, singular, kind, namespaced=True,
                 short_names=(), custom=False, field_labels=(), generation=True):
        self.group, self.version, self.plural = group, version, plural
        self.singular, self.kind, self.namespaced = singular, kind, namespaced
        self.short_names = list(short_names)
        self.custom = custom
        self.api_version = "%s/%s" % (group, version) if group else version
        self.list_kind = kind + "List"
        self.id = "%s.%s" % (plural, group) if custom else plural
        self.resource_name = "%s.%s" % (plural, group) if group else plural
        self.kind_prefix = b'{"kind":"' + kind.encode() + b'","apiVersion":"' + self.api_version.encode() + b'",'
        self.field_labels = ["metadata.name"] + (["metadata.namespace"] if namespaced else []) + list(field_labels)
        self.has_generation = generation
        self.verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

    def discovery(self):
        d = {"name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
             "kind": self.kind, "verbs": self.verbs}
        if self.short_names:
            d["shortNames"] = self.short_names
        digest = hashlib.sha256(("%s/%s" % (self.api_version, self.kind)).encode()).digest()
        d["storageVersionHash"] = base64.b64encode(digest[:8]).decode()
        return d


def builtin_types():
    return [
        ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", short_names=["cm"], generation=False),
        ResourceType("", "v1", "secrets", "secret", "Secret", field_labels=["type"], generation=False),
        ResourceType("", "v1", "pods", "pod", "Pod", short_names=["po"],
                     field_labels=["spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                   "spec.serviceAccountName", "status.phase", "status.podIP"]),
        ResourceType("apps", "v1", "deployments", "deployment", "Deployment", short_names=["deploy"]),
    ]


# --------------------------------------------------------------------------- objects and events

class ObjRec:
    """One immutable stored version of an object, serialised once."""
    __slots__ = ("rtype", "key", "ns", "name", "rv", "uid", "obj", "item", "full", "_added")

    def __init__(self, rtype, key, obj):
        md = obj["metadata"]
        self.rtype, self.key, self.obj = rtype, key, obj
        self.ns = md.get("namespace", "")
        self.name = md["name"]
        self.rv = int(md["resourceVersion"])
        self.uid = md["uid"]
        raw = dumps(obj)                      # {"metadata":...,"data":...}
        self.full = rtype.kind_prefix + raw[1:]
        self.item = self.full if rtype.custom else raw   # typed lists carry no kind/apiVersion
        self._added = None

    @property
    def labels(self):
        return self.obj["metadata"].get("labels") or {}

    def field(self, path):
        if path == "metadata.name":
            return self.name
        if path == "metadata.namespace":
            return self.ns
        cur = self.obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    def added_line(self):
        if self._added is None:
            self._added = b'{"type":"ADDED","object":' + self.full + b'}\n'
        return self._added


def event_line(etype, full):
    return b'{"type":"' + etype.encode() + b'","object":' + full + b'}\n'


class Event:
    """A history entry. rec = new state (for DELETED: last state with the delete's
    RV); prev = the state before (None for ADDED)."""
    __slots__ = ("rv", "type", "rec", "prev", "_line")

    def __init__(self, etype, rec, prev):
        self.rv, self.type, self.rec, self.prev, self._line = rec.rv, etype, rec, prev, None

    def line(self):
        if self._line is None:
            self._line = event_line(self.type, self.rec.full)
        return self._line


def with_rv(rec, rv):
    """A copy of rec's object carrying another resourceVersion."""
    obj = dict(rec.obj)
    obj["metadata"] = dict(obj["metadata"], resourceVersion=str(rv))
    return ObjRec(rec.rtype, rec.key, obj)


def bookmark_line(rtype, rv, initial_events_end=False):
    """initial_events_end: False (a plain bookmark), True (annotated "true") or
    the annotation's value as a string (e.g. "false", for broken servers)."""
    md = {"resourceVersion": str(rv)}
    if initial_events_end is True:
        md["annotations"] = {INITIAL_EVENTS_END: "true"}
    elif isinstance(initial_events_end, str):
        md["annotations"] = {INITIAL_EVENTS_END: initial_events_end}
    obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": md}
    return b'{"type":"BOOKMARK","object":' + dumps(obj) + b'}\n'


def error_line(st):
    return b'{"type":"ERROR","object":' + dumps(st) + b'}\n'


# --------------------------------------------------------------------------- selectors

class LabelSelector:
    """k8s.io/apimachinery/pkg/labels syntax: a=b, a==b, a!=b, a in (x,y),
    a notin (x,y), a, !a, a>1, a<1; comma = AND."""

    def __init__(self, text):
        self.text = text or ""
        self.reqs = self._parse(self._lex(self.text)) if self.text.strip() else []

    @staticmethod
    def _lex(s):
        toks, i = [], 0
        while i < len(s):
            c = s[i]
            if c.isspace():
                i += 1
            elif s.startswith("==", i) or s.startswith("!=", i):
                toks.append(("op", s[i:i + 2]))
                i += 2
            elif c in "=<>":
                toks.append(("op", c))
                i += 1
            elif c == "!":
                toks.append(("!", c))
                i += 1
            elif c in "(),":
                toks.append((c, c))
                i += 1
            else:
                j = i
                while j < len(s) and not s[j].isspace() and s[j] not in "=!<>(),":
                    j += 1
                toks.append(("id", s[i:j]))
                i = j
        return toks

    @staticmethod
    def _parse(toks):
        reqs, pos = [], 0

        def peek():
            return toks[pos] if pos < len(toks) else ("end", "")

        while True:
            t = peek()
            if t[0] == "!":
                pos += 1
                k = peek()
                if k[0] != "id":
                    raise ValueError("unable to parse requirement: found '%s', expected: identifier" % k[1])
                pos += 1
                reqs.append((k[1], "!", None))
            elif t[0] == "id":
                key = t[1]
                pos += 1
                op = peek()
                if op[0] in (",", "end"):
                    reqs.append((key, "exists", None))
                elif op[0] == "op":
                    pos += 1
                    v = peek()
                    value = ""
                    if v[0] == "id":
                        value = v[1]
                        pos += 1
                    elif op[1] in "<>":
                        raise ValueError("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                         "exactly one value is required")
                    if op[1] in "<>":
                        try:
                            int(value)
                        except ValueError:
                            raise ValueError("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                             "the value must be an integer") from None
                    reqs.append((key, {"=": "=", "==": "=", "!=": "!="}.get(op[1], op[1]), value))
                elif op[0] == "id" and op[1] in ("in", "notin"):
                    pos += 1
                    if peek()[0] != "(":
                        raise ValueError("unable to parse requirement: found '%s', expected: '('" % peek()[1])
                    pos += 1
                    values = []
                    while True:
                        v = peek()
                        if v[0] == "id":
                            values.append(v[1])
                            pos += 1
                            v = peek()
                        elif v[0] in (",", ")"):
                            values.append("")
                        if v[0] == ",":
                            pos += 1
                            continue
                        if v[0] == ")":
                            pos += 1
                            break
                        raise ValueError("unable to parse requirement: found '%s', expected: ',', ')' "
                                         "or identifier" % v[1])
                    if values == [""]:
                        raise ValueError("unable to parse requirement: for 'in', 'notin' operators, "
                                         "values set can't be empty")
                    reqs.append((key, op[1], set(values)))
                else:
                    raise ValueError("unable to parse requirement: found '%s', expected: in, notin, =, "
                                     "==, !=, gt, lt" % op[1])
            else:
                raise ValueError("unable to parse requirement: found '%s', expected: !, identifier" % t[1])
            t = peek()
            if t[0] == "end":
                return reqs
            if t[0] != ",":
                raise ValueError("found '%s', expected: ',' or 'end of string'" % t[1])
            pos += 1

    def matches(self, labels):
        for key, op, val in self.reqs:
            present = key in labels
            v = labels.get(key)
            if op == "exists":
                ok = present
            elif op == "!":
                ok = not present
            elif op == "=":
                ok = present and v == val
            elif op == "!=":
                ok = not present or v != val
            elif op == "in":
                ok = present and v in val
            elif op == "notin":
                ok = not present or v not in val
            else:  # < >
                try:
                    n = int(v)
                except (TypeError, ValueError):
                    return False
                ok = n > int(val) if op == ">" else n < int(val)
            if not ok:
                return False
        return True


class FieldSelector:
    """metadata.name / metadata.namespace (and a few per-type fields) with = == !=."""

    def __init__(self, text, rtype):
        self.reqs = []
        for part in (text or "").split(","):
            part = part.strip()
            if not part:
                continue
            if "!=" in part:
                k, v, op = *part.split("!=", 1), "!="
            elif "==" in part:
                k, v, op = *part.split("==", 1), "="
            elif "=" in part:
                k, v, op = *part.split("=", 1), "="
            else:
                raise ValueError("invalid selector: '%s'; can't understand '%s'" % (text, part))
            k = k.strip()
            if k not in rtype.field_labels:
                raise ValueError('field label not supported: %s' % k)
            self.reqs.append((k, op, v.strip()))

    def matches(self, rec):
        for k, op, v in self.reqs:
            if (rec.field(k) == v) != (op == "="):
                return False
        return True


class Filter:
    """What a list or watch wants: namespace, single name, label and field selectors."""

    def __init__(self, rtype, ns=None, name=None, label_selector="", field_selector=""):
        self.rtype, self.ns, self.name = rtype, ns, name
        self.labels = LabelSelector(label_selector) if label_selector else None
        self.fields = FieldSelector(field_selector, rtype) if field_selector else None
        self.has_selectors = bool((self.labels and self.labels.reqs) or (self.fields and self.fields.reqs))

    def __call__(self, rec):
        if rec.rtype is not self.rtype:
            return False
        if self.ns is not None and rec.ns != self.ns:
            return False
        if self.name is not None and rec.name != self.name:
            return False
        if self.labels and not self.labels.matches(rec.labels):
            return False
        if self.fields and not self.fields.matches(rec):
            return False
        return True

    def convert(self, ev):
        """The watch event this watcher gets for a history event, like the
        cacher's convertToWatchEvent: objects entering the selection become
        ADDED, objects leaving it DELETED (previous state, the event's RV)."""
        cur = ev.type != DELETED and self(ev.rec)
        old = ev.prev is not None and self(ev.prev)
        if cur and old:
            return ev.line()                       # MODIFIED
        if cur:
            return ev.line() if ev.type == ADDED else ev.rec.added_line()
        if old:
            if ev.type == DELETED:
                return ev.line()
            return event_line(DELETED, with_rv(ev.prev, ev.rv).full)
        return None


# --------------------------------------------------------------------------- continue tokens

def encode_continue(rv, start):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_continue(token):
    try:
        pad = "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(token + pad))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise err_bad_request("invalid continue token: continue key is not valid: incorrect encoded start "
                              "resourceVersion (version meta.k8s.io/v1)") from None
    if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
        raise err_bad_request("invalid continue token: continue key is not valid: server does not "
                              "recognize this encoded key")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or rv == 0 or not isinstance(start, str) or not start:
        raise err_bad_request("invalid continue token: continue key is not valid: incorrect encoded start "
                              "resourceVersion (version meta.k8s.io/v1)")
    return rv, start


# --------------------------------------------------------------------------- object bodies

def _merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def _default_body(rtype, name):
    if rtype.kind == "Pod":
        return {"spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                         "restartPolicy": "Always", "schedulerName": "default-scheduler",
                         "serviceAccountName": "default", "nodeName": "edge-1"},
                "status": {"phase": "Pending"}}
    if rtype.kind == "Deployment":
        return {"spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "app",
                                                               "image": "registry.k8s.io/pause:3.10"}]}},
                         "strategy": {"type": "RollingUpdate"}},
                "status": {}}
    if rtype.kind == "Secret":
        return {"type": "Opaque"}
    if rtype.custom:
        return {"spec": {}}
    return {}


SYSTEM_MD = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
             "managedFields", "deletionTimestamp", "selfLink")


def _b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


class Content:
    """The user-controlled part of an object: labels, annotations, other
    metadata, and the body (everything but metadata)."""

    def __init__(self, labels=None, annotations=None, extra_md=None, body=None):
        self.labels = dict(labels or {})
        self.annotations = dict(annotations or {})
        self.extra_md = dict(extra_md or {})
        self.body = dict(body or {})

    @classmethod
    def of(cls, rec):
        md = rec.obj["metadata"]
        extra = {k: v for k, v in md.items() if k not in SYSTEM_MD and k not in ("labels", "annotations")}
        return cls(md.get("labels"), md.get("annotations"), extra,
                   {k: v for k, v in rec.obj.items() if k != "metadata"})

    @classmethod
    def from_object(cls, obj):
        md = obj.get("metadata") or {}
        extra = {k: v for k, v in md.items() if k not in SYSTEM_MD and k not in ("labels", "annotations")}
        return cls(md.get("labels"), md.get("annotations"), extra,
                   {k: v for k, v in obj.items() if k not in ("metadata", "kind", "apiVersion")})

    def key(self):
        return dumps([self.labels, self.annotations, self.extra_md, self.body])

    def spec_key(self):
        return dumps({k: v for k, v in self.body.items() if k != "status"})

    def apply(self, rtype, req, mode="merge"):
        """Apply a control-API update request (data, stringData, labels,
        annotations, spec, status, type, binaryData) to this content."""
        replace = mode == "replace"
        if "stringData" in req:
            data = {k: _b64(v) for k, v in (req["stringData"] or {}).items()}
            req = dict(req, data=dict(req.get("data") or {}, **data))
        for field in ("labels", "annotations"):
            if field in req:
                cur = {} if replace else getattr(self, field)
                setattr(self, field, _apply_map(cur, req[field]))
        for field in ("data", "binaryData", "spec", "status", "type", "immutable"):
            if field in req:
                new = req[field]
                if isinstance(new, dict) and not replace:
                    new = _apply_map(self.body.get(field) or {}, new)
                elif isinstance(new, dict):
                    new = {k: v for k, v in new.items() if v is not None}
                if new is None or (new == {} and field == "binaryData"):
                    self.body.pop(field, None)
                else:
                    self.body[field] = new
        return self


def _apply_map(cur, upd):
    out = dict(cur)
    for k, v in (upd or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _fields_v1(content):
    f = {}
    md = {}
    for field in ("labels", "annotations"):
        m = getattr(content, field)
        if m:
            md["f:" + field] = dict({".": {}}, **{"f:" + k: {} for k in m})
    if md:
        f["f:metadata"] = md
    for k, v in content.body.items():
        if k == "status":
            continue
        if isinstance(v, dict):
            f["f:" + k] = dict({".": {}}, **{"f:" + kk: {} for kk in v}) if v else {}
        else:
            f["f:" + k] = {}
    return f


def _managed_fields(old, rtype, content, manager, ts):
    entry = {"manager": manager, "operation": "Update", "apiVersion": rtype.api_version, "time": ts,
             "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(content)}
    out = [e for e in (old or []) if e.get("manager") != manager]
    out.append(entry)
    return out


# --------------------------------------------------------------------------- faults

FAULT_KINDS = {
    "close_after", "stall", "stall_watch", "garbage", "bad_chunk", "status", "unauthorized",
    "expired", "watch_error", "random_chunks", "initial_events_end", "end_watch", "pause_after",
    "slow", "bad_gzip", "content_encoding", "cut_event", "duplicate_item", "short_body",
}

CUT_AT = ("string", "number", "newline", "control")


def validate_fault(spec):
    if not isinstance(spec, dict) or spec.get("kind") not in FAULT_KINDS:
        raise ValueError("fault kind must be one of %s" % sorted(FAULT_KINDS))
    f = dict(spec)
    count = f.get("count", 1)
    if count in ("all", "*", None, -1):
        count = -1
    if not isinstance(count, int) or count == 0 or count < -1:
        raise ValueError("count must be a positive integer, -1 or \"all\"")
    f["count"] = count
    k = f["kind"]
    if k == "close_after" and (not isinstance(f.get("bytes"), int) or f["bytes"] < 0):
        raise ValueError("close_after needs \"bytes\" >= 0")
    if k == "short_body" and (not isinstance(f.get("bytes"), int) or f["bytes"] < 0):
        raise ValueError("short_body needs \"bytes\" >= 0")
    if k == "stall" and not isinstance(f.get("seconds"), (int, float)):
        raise ValueError("stall needs \"seconds\"")
    if k == "pause_after" and (not isinstance(f.get("bytes"), int) or f["bytes"] < 0 or
                               not isinstance(f.get("seconds"), (int, float))):
        raise ValueError("pause_after needs \"bytes\" >= 0 and \"seconds\"")
    if k == "slow":
        f.setdefault("bytes", 0)
        if not isinstance(f["bytes"], int) or f["bytes"] < 0:
            raise ValueError("slow \"bytes\" must be an integer >= 0")
        if not isinstance(f.get("rate"), int) or f["rate"] < 1:
            raise ValueError("slow needs \"rate\", bytes per second >= 1")
        f.setdefault("piece", max(1, f["rate"] // 4))
        if not isinstance(f["piece"], int) or f["piece"] < 1:
            raise ValueError("slow \"piece\" must be an integer >= 1")
    if k == "bad_gzip" and f.get("mode", "corrupt") not in ("corrupt", "truncate", "crc", "bomb", "data"):
        raise ValueError("bad_gzip \"mode\" must be corrupt, truncate, crc, bomb or data")
    if k == "status" and not isinstance(f.get("code"), int):
        raise ValueError("status needs an integer \"code\"")
    if k == "unauthorized":
        f.update(kind="status", code=401)
    if k == "expired":
        f.update(kind="status", code=410)
    if k == "cut_event":
        f.setdefault("at", "string")
        if f["at"] not in CUT_AT:
            raise ValueError("cut_event \"at\" must be one of %s" % list(CUT_AT))
        f.setdefault("events", 1)
        if not isinstance(f["events"], int) or f["events"] < 1:
            raise ValueError("cut_event \"events\" must be an integer >= 1")
    if k in ("stall_watch", "garbage", "bad_chunk", "watch_error", "end_watch", "cut_event"):
        f.setdefault("after_events", 0)
        if not isinstance(f["after_events"], int) or f["after_events"] < 0:
            raise ValueError("after_events must be an integer >= 0")
    if k == "watch_error":
        f.setdefault("code", 410)
    if k == "status" and f.get("too_large") not in (None, False, True, "cause", "cause_message", "message"):
        raise ValueError("too_large must be true, \"cause\", \"cause_message\" or \"message\"")
    if k == "initial_events_end":
        if "value" in f and f["value"] is not None and not isinstance(f["value"], str):
            raise ValueError("initial_events_end \"value\" must be a string or null (never sent)")
        if not isinstance(f.get("delay", 0), (int, float)) or f.get("delay", 0) < 0:
            raise ValueError("initial_events_end \"delay\" must be a number of seconds >= 0")
    return f


# --------------------------------------------------------------------------- the store

DEFAULT_SETTINGS = {
    "bookmark_interval": 60.0,      # seconds between periodic BOOKMARKs; 0 = never
    "pretimeout_bookmark": True,    # one more BOOKMARK 2 s before the watch deadline (like the cacher)
    "watch_list": True,             # WatchList feature gate (sendInitialEvents)
    "rv0_ignores_limit": True,      # LIST resourceVersion=0 served from "cache": limit ignored
    "too_large_wait": 3.0,          # how long a too-new resourceVersion is waited for (blockTimeout)
    "history_cap": 10000,           # events kept; older ones are compacted
    "list_chunked": False,          # send LIST bodies with Transfer-Encoding: chunked
    "list_chunk_size": 32768,
    "gzip": True,                   # gzip bodies > 128 KiB if the client sends Accept-Encoding: gzip
    "require_auth": True,
    "min_request_timeout": 1800,    # watch without timeoutSeconds lasts [min, 2*min) seconds
}


class WatchStart:
    def __init__(self, cursor, initial=(), annotate=False, error=None):
        self.cursor, self.initial, self.annotate, self.error = cursor, list(initial), annotate, error


class Store:
    LOG_CAP = 100000

    def __init__(self, seed=None, history_cap=10000, start_rv=100, settings=None):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)        # new events, settings, drops
        self.meta_cond = threading.Condition(self.lock)   # request log, watch registry
        self.rng = random.Random(seed)
        self.settings = dict(DEFAULT_SETTINGS)
        self.settings["history_cap"] = history_cap
        self.rv = start_rv
        self.compacted_rv = start_rv
        self.hist = []                    # hist[i].rv == compacted_rv + 1 + i
        self.types = {}
        self.objects = {}                 # type id -> {key: ObjRec}
        self._sorted = {}                 # type id -> sorted keys or None
        for t in builtin_types():
            self._add_type(t)
        self.token = self._new_token()
        self.faults = []
        self._fault_id = 0
        self.log = []
        self._log_id = 0
        self.watches = {}                 # watch id -> info dict
        self._watch_id = 0
        self.drop_gen = 0
        self.bench = None
        if settings:
            self.set_settings(settings)

    # ---------------------------------------------------------------- helpers

    def _new_token(self):
        return "kreflect-%032x" % self.rng.getrandbits(128)

    def new_uid(self):
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _add_type(self, t):
        self.types[t.id] = t
        self.objects.setdefault(t.id, {})
        self._sorted[t.id] = None

    def register(self, group, version, plural, kind, singular=None, namespaced=True, short_names=()):
        if not group or not version or not plural or not kind:
            raise ValueError("register needs group, version, plural and kind")
        t = ResourceType(group, version, plural, singular or kind.lower(), kind, namespaced=namespaced,
                         short_names=short_names, custom=True)
        with self.lock:
            old = self.types.get(t.id)
            if old and (old.version, old.kind, old.namespaced) != (version, kind, namespaced):
                raise ValueError("%s is already registered differently" % t.id)
            if not old:
                self._add_type(t)
            return self.types[t.id]

    def find_type(self, name):
        n = name.lower()
        for t in self.types.values():
            if n in (t.id, t.plural, t.singular, t.kind.lower(), t.resource_name) or n in t.short_names:
                return t
        raise KeyError("unknown resource %r" % name)

    def type_for(self, group, version, plural):
        for t in self.types.values():
            if t.group == group and t.version == version and t.plural == plural:
                return t
        return None

    def groups(self):
        """{group: [versions]} for /apis (core excluded), in registration order."""
        out = {}
        for t in self.types.values():
            if t.group:
                vs = out.setdefault(t.group, [])
                if t.version not in vs:
                    vs.append(t.version)
        return out

    @staticmethod
    def key_of(rtype, ns, name):
        return "%s/%s" % (ns, name) if rtype.namespaced else name

    def _sorted_keys(self, rtype):
        keys = self._sorted.get(rtype.id)
        if keys is None:
            keys = self._sorted[rtype.id] = sorted(self.objects[rtype.id])
        return keys

    def set_settings(self, new):
        for k, v in new.items():
            if k not in DEFAULT_SETTINGS:
                raise ValueError("unknown setting %r (known: %s)" % (k, ", ".join(sorted(DEFAULT_SETTINGS))))
            want = type(DEFAULT_SETTINGS[k])
            if want is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                raise ValueError("setting %s must be %s" % (k, want.__name__))
            if want in (int, float) and v < (1 if k in ("history_cap", "list_chunk_size") else 0):
                raise ValueError("setting %s must be >= %d" % (k, 1 if k in ("history_cap", "list_chunk_size") else 0))
        with self.lock:
            self.settings.update(new)
            self._trim_history()
            self.cond.notify_all()

    # ---------------------------------------------------------------- writes

    def _record(self, etype, rec, prev):
        """Append one event (caller holds the lock and has set rec.rv = self.rv + 1)."""
        assert rec.rv == self.rv + 1
        self.rv = rec.rv
        self.hist.append(Event(etype, rec, prev))
        self._trim_history()

    def _trim_history(self):
        extra = len(self.hist) - int(self.settings["history_cap"])
        if extra > 0:
            self.compacted_rv = self.hist[extra - 1].rv
            del self.hist[:extra]

    def _build(self, rtype, ns, name, content, rv, uid, created, generation, managed):
        md = {"name": name}
        if rtype.namespaced:
            md["namespace"] = ns
        md["uid"] = uid
        md["resourceVersion"] = str(rv)
        if generation is not None:
            md["generation"] = generation
        md["creationTimestamp"] = created
        if content.labels:
            md["labels"] = content.labels
        if content.annotations:
            md["annotations"] = content.annotations
        md.update(content.extra_md)
        md["managedFields"] = managed
        obj = {"metadata": md}
        obj.update(content.body)
        return ObjRec(rtype, self.key_of(rtype, ns, name), obj)

    def _content_for_create(self, rtype, name, req):
        if "object" in req:
            c = Content.from_object(req["object"])
            base = _default_body(rtype, name)
            base.update(c.body)
            c.body = base
            return c
        c = Content(body=_default_body(rtype, name))
        return c.apply(rtype, req, mode="replace")

    def create(self, rtype, ns, name, req, manager="kubectl-create", upsert=False):
        """Create an object from a control-API request. Returns the ObjRec."""
        ns = ns or ("default" if rtype.namespaced else "")
        if not rtype.namespaced:
            ns = ""
        if not name:
            raise ValueError("name is required")
        content = self._content_for_create(rtype, name, req)
        with self.lock:
            key = self.key_of(rtype, ns, name)
            if key in self.objects[rtype.id]:
                if not upsert:
                    raise FileExistsError('%s "%s" already exists' % (rtype.resource_name, name))
                rec, changed = self._update_locked(rtype, key, lambda c: content, manager)
            else:
                rec = self._create_locked(rtype, ns, name, content, manager, rfc3339())
            self.cond.notify_all()
            return rec

    def _create_locked(self, rtype, ns, name, content, manager, ts):
        rv = self.rv + 1
        gen = 1 if rtype.has_generation else None
        rec = self._build(rtype, ns, name, content, rv, self.new_uid(), ts, gen,
                          _managed_fields(None, rtype, content, manager, ts))
        self.objects[rtype.id][rec.key] = rec
        self._sorted[rtype.id] = None
        self._record(ADDED, rec, None)
        return rec

    def update(self, rtype, ns, name, req, manager="kubectl-edit"):
        """Update from a control-API request: data/labels/... with mode
        merge|replace, or "patch" (JSON merge patch), or "object" (replace).
        Returns (ObjRec, changed). A no-op update writes nothing, like etcd."""
        mode = req.get("mode", "merge")
        if mode not in ("merge", "replace"):
            raise ValueError("mode must be merge or replace")

        def mutate(c):
            if "object" in req:
                return Content.from_object(req["object"])
            if "patch" in req:
                md = {"labels": c.labels, "annotations": c.annotations}
                md.update(c.extra_md)
                whole = dict(c.body, metadata=md)
                return Content.from_object(_merge_patch(whole, req["patch"]))
            return c.apply(rtype, req, mode)

        with self.lock:
            key = self.key_of(rtype, ns or ("default" if rtype.namespaced else ""), name)
            if key not in self.objects[rtype.id]:
                raise KeyError('%s "%s" not found' % (rtype.resource_name, name))
            rec, changed = self._update_locked(rtype, key, mutate, manager)
            if changed:
                self.cond.notify_all()
            return rec, changed

    def _update_locked(self, rtype, key, mutate, manager, ts=None):
        old = self.objects[rtype.id][key]
        before = Content.of(old)
        after = mutate(Content.of(old))
        if after.key() == before.key():
            return old, False
        ts = ts or rfc3339()
        md = old.obj["metadata"]
        gen = md.get("generation")
        if gen is not None and after.spec_key() != before.spec_key():
            gen += 1
        rec = self._build(rtype, old.ns, old.name, after, self.rv + 1, old.uid, md["creationTimestamp"],
                          gen, _managed_fields(md.get("managedFields"), rtype, after, manager, ts))
        self.objects[rtype.id][key] = rec
        self._record(MODIFIED, rec, old)
        return rec, True

    def delete(self, rtype, ns, name):
        with self.lock:
            key = self.key_of(rtype, ns or ("default" if rtype.namespaced else ""), name)
            old = self.objects[rtype.id].pop(key, None)
            if old is None:
                raise KeyError('%s "%s" not found' % (rtype.resource_name, name))
            self._sorted[rtype.id] = None
            rec = with_rv(old, self.rv + 1)
            self._record(DELETED, rec, old)
            self.cond.notify_all()
            return rec

    def bulk_create(self, rtype, ns, count, size=1024, pattern=None, start=0, labels=None,
                    annotations=None, key="payload"):
        """Create `count` objects whose data[key] is `size` bytes, names from
        `pattern` (str.format with i). All-or-nothing on name clashes."""
        ns = ns or ("default" if rtype.namespaced else "")
        if not rtype.namespaced:
            ns = ""
        pattern = pattern or (rtype.singular[:2] + "-{i:05d}" if rtype.kind != "ConfigMap" else "cm-{i:05d}")
        names = [pattern.format(i=i) for i in range(start, start + count)]
        if len(set(names)) != len(names):
            raise ValueError("name pattern %r does not give unique names" % pattern)
        filler = ("0123456789abcdefghijklmnopqrstuvwxyz" * (size // 36 + 1))[:size]
        first = None
        with self.lock:
            objs = self.objects[rtype.id]
            clash = [n for n in names if self.key_of(rtype, ns, n) in objs]
            if clash:
                raise FileExistsError('%s "%s" already exists' % (rtype.resource_name, clash[0]))
        for lo in range(0, count, 1000):
            ts = rfc3339()
            with self.lock:
                for name in names[lo:lo + 1000]:
                    content = Content(labels, annotations, body=_default_body(rtype, name))
                    if rtype.kind == "Secret":
                        content.body["data"] = {key: _b64(filler)}
                        content.body["type"] = content.body.pop("type")
                    elif rtype.kind == "ConfigMap":
                        content.body["data"] = {key: filler}
                    else:   # kinds without a data map carry the payload in an annotation
                        content.annotations = dict(content.annotations, payload=filler)
                    key_ = self.key_of(rtype, ns, name)
                    if key_ in objs:
                        raise FileExistsError('%s "%s" already exists' % (rtype.resource_name, name))
                    rec = self._create_locked(rtype, ns, name, content, "kubectl-create", ts)
                    first = first or rec.rv
                self.cond.notify_all()
        with self.lock:
            return {"created": count, "first_rv": first, "last_rv": self.rv}

    def touch(self, rtype, ns=None, selector="", count=1, key="touched"):
        """Update every matching object `count` times (data[key] = a counter),
        to generate MODIFIED events in bulk."""
        flt = Filter(rtype, ns, None, selector)
        n = 0
        with self.lock:
            keys = [k for k, r in self.objects[rtype.id].items() if flt(r)]
            ts = rfc3339()
            for _ in range(count):
                for k in sorted(keys):
                    seq = str(self.rv + 1)

                    def mutate(c, seq=seq):
                        if rtype.kind in ("ConfigMap", "Secret"):
                            value = seq if rtype.kind == "ConfigMap" else _b64(seq)
                            c.body["data"] = dict(c.body.get("data") or {}, **{key: value})
                        else:
                            c.annotations = dict(c.annotations, **{key: seq})
                        return c
                    self._update_locked(rtype, k, mutate, "kubectl-edit", ts)
                    n += 1
            self.cond.notify_all()
            return {"updated": n, "rv": self.rv}

    def compact(self, rv=None):
        """Forget history up to rv (default: everything). Watches and continue
        tokens older than that get 410 from now on."""
        with self.lock:
            target = self.rv if rv is None else int(rv)
            if target > self.rv:
                raise ValueError("cannot compact to %d: current resourceVersion is %d" % (target, self.rv))
            if target > self.compacted_rv:
                del self.hist[:target - self.compacted_rv]
                self.compacted_rv = target
            self.cond.notify_all()
            return {"compacted_rv": self.compacted_rv, "rv": self.rv}

    # ---------------------------------------------------------------- reads

    def _wait_rv(self, want):
        """Wait (lock held) up to too_large_wait for the store to reach `want`."""
        deadline = time.monotonic() + self.settings["too_large_wait"]
        while self.rv < want:
            left = deadline - time.monotonic()
            if left <= 0:
                raise err_too_large(want, self.rv)
            self.cond.wait(left)

    def _objects_at(self, rtype, rv):
        """(objects dict, sorted keys) as they were at rv (lock held)."""
        if rv >= self.rv:
            return self.objects[rtype.id], self._sorted_keys(rtype)
        objs = dict(self.objects[rtype.id])
        for ev in reversed(self.hist[rv - self.compacted_rv:]):
            if ev.rec.rtype is not rtype:
                continue
            if ev.type == ADDED:
                objs.pop(ev.rec.key, None)
            else:
                objs[ev.rec.key] = ev.prev
        return objs, sorted(objs)

    def get(self, rtype, ns, name):
        with self.lock:
            rec = self.objects[rtype.id].get(self.key_of(rtype, ns or "", name))
        if rec is None:
            raise err_not_found(rtype, name)
        return rec

    def list(self, rtype, flt, rv="", rvm="", limit=0, cont=""):
        """Serve a LIST (options already validated). Returns
        (resourceVersion, [item bytes], continue token or "", remainingItemCount or None)."""
        with self.lock:
            if cont:
                if rv not in ("", "0"):
                    raise err_bad_request("specifying resource version is not allowed when using continue")
                tok_rv, start = decode_continue(cont)
                if tok_rv == -1:
                    snap_rv = self.rv
                elif tok_rv < self.compacted_rv:
                    raise ApiError(status(410, "Expired", MSG_CONTINUE_INCONSISTENT,
                                          metadata={"continue": encode_continue(-1, start)}))
                elif tok_rv > self.rv:
                    raise err_bad_request("invalid continue token: resourceVersion is in the future")
                else:
                    snap_rv = tok_rv
            else:
                start = None
                if rv == "":
                    snap_rv = self.rv
                elif rv == "0" and rvm != "Exact":
                    snap_rv = self.rv
                    if self.settings["rv0_ignores_limit"]:
                        limit = 0
                else:
                    try:
                        want = int(rv)
                        if want <= 0:
                            raise ValueError
                    except ValueError:
                        raise err_bad_request('invalid resource version "%s"' % rv) from None
                    if want > self.rv:
                        self._wait_rv(want)
                    exact = rvm == "Exact" or (rvm == "" and limit > 0)
                    if exact:
                        if want < self.compacted_rv:
                            raise ApiError(status(410, "Expired", MSG_LIST_EXPIRED))
                        snap_rv = want
                    else:
                        snap_rv = self.rv
            objs, keys = self._objects_at(rtype, snap_rv)
            prefix = flt.ns + "/" if (rtype.namespaced and flt.ns is not None) else ""
            lo, hi = 0, len(keys)
            if prefix:
                lo = bisect.bisect_left(keys, prefix)
                hi = bisect.bisect_left(keys, prefix[:-1] + "0")   # '0' sorts right after '/'
            pos = lo if start is None else max(lo, bisect.bisect_left(keys, prefix + start))
            items, last = [], None
            while pos < hi:
                rec = objs[keys[pos]]
                pos += 1
                if flt(rec):
                    items.append(rec.item)
                    last = rec
                    if limit and len(items) >= limit:
                        break
            token, remaining = "", None
            if limit and len(items) >= limit and pos < hi:
                rel = last.key[len(prefix):]
                token = encode_continue(snap_rv, rel + "\x00")
                if not flt.has_selectors:
                    remaining = hi - pos
            return snap_rv, items, token, remaining

    def watch_begin(self, rtype, flt, rv, send_initial, annotate):
        """Where a watch starts. send_initial: the (defaulted) sendInitialEvents.
        annotate: end the initial events with the initial-events-end bookmark."""
        with self.lock:
            if send_initial:
                if rv not in ("", "0"):
                    want = self._parse_watch_rv(rv)
                    if want > self.rv:
                        try:
                            self._wait_rv(want)
                        except ApiError as e:
                            return WatchStart(self.rv, error=e.status)
                objs = self.objects[rtype.id]
                initial = [objs[k] for k in self._sorted_keys(rtype) if flt(objs[k])]
                return WatchStart(self.rv, initial, annotate)
            if rv in ("", "0"):
                if send_initial is None:       # legacy: synthetic ADDED for the current state
                    objs = self.objects[rtype.id]
                    initial = [objs[k] for k in self._sorted_keys(rtype) if flt(objs[k])]
                    return WatchStart(self.rv, initial)
                return WatchStart(self.rv)     # sendInitialEvents=false: from now
            want = self._parse_watch_rv(rv)
            if want < self.compacted_rv:
                return WatchStart(want, error=status_watch_too_old(want, self.compacted_rv))
            return WatchStart(want)

    @staticmethod
    def _parse_watch_rv(rv):
        try:
            n = int(rv)
            if n < 0:
                raise ValueError
            return n
        except ValueError:
            raise err_bad_request('invalid resource version "%s"' % rv) from None

    def events_after(self, cursor, max_n=512):
        """History events with rv > cursor (lock held); None if compacted past."""
        if cursor < self.compacted_rv:
            return None
        i = cursor - self.compacted_rv
        return self.hist[i:i + max_n] if i < len(self.hist) else []

    def snapshot_state(self, rtype=None, ns=None, full=False, summary=False):
        with self.lock:
            objects = {}
            for tid, objs in ({} if summary else self.objects).items():
                t = self.types[tid]
                if rtype is not None and t is not rtype:
                    continue
                for key in sorted(objs):
                    rec = objs[key]
                    if ns is not None and rec.ns != ns:
                        continue
                    entry = {"resourceVersion": str(rec.rv), "uid": rec.uid}
                    if full:
                        entry["object"] = json.loads(rec.full)
                    objects["%s/%s" % (tid, key)] = entry
            return {"resourceVersion": str(self.rv), "rv": self.rv, "compacted_rv": self.compacted_rv,
                    "history_len": len(self.hist), "objects": objects,
                    "watches": len(self.watches), "settings": dict(self.settings),
                    "types": [{"id": t.id, "group": t.group, "version": t.version, "plural": t.plural,
                               "kind": t.kind, "namespaced": t.namespaced} for t in self.types.values()]}

    # ---------------------------------------------------------------- auth

    def check_token(self, token):
        import hmac
        return hmac.compare_digest(token.encode(), self.token.encode())

    def rotate_token(self):
        with self.lock:
            self.token = self._new_token()
            return self.token

    # ---------------------------------------------------------------- faults

    def add_fault(self, spec):
        f = validate_fault(spec)
        with self.lock:
            self._fault_id += 1
            f["id"] = self._fault_id
            f["hits"] = 0
            self.faults.append(f)
            return dict(f)

    def take_faults(self, target, is_watch, user_agent=None):
        """The faults that apply to this request (each used up by one). A
        fault's user_agent (a substring) aims it at one of several clients."""
        out = []
        with self.lock:
            for f in list(self.faults):
                m = f.get("match")
                if m and m not in target:
                    continue
                ua = f.get("user_agent")
                if ua and ua not in (user_agent or ""):
                    continue
                if f.get("watch") is not None and bool(f["watch"]) != is_watch:
                    continue
                f["hits"] += 1
                if f["count"] > 0:
                    f["count"] -= 1
                    if f["count"] == 0:
                        self.faults.remove(f)
                out.append(dict(f))
        return out

    def clear_faults(self):
        with self.lock:
            n = len(self.faults)
            self.faults = []
            self.bench = None
            return n

    # ---------------------------------------------------------------- log and watch registry

    def log_request(self, entry):
        with self.lock:
            self._log_id += 1
            entry["id"] = self._log_id
            self.log.append(entry)
            if len(self.log) > self.LOG_CAP:
                del self.log[:len(self.log) - self.LOG_CAP]
            self.meta_cond.notify_all()
            return entry

    def log_done(self, entry, **fields):
        with self.lock:
            entry.update(fields)
            self.meta_cond.notify_all()

    def get_log(self, since=0):
        with self.lock:
            return json.loads(json.dumps([e for e in self.log if e["id"] > since]))

    def clear_log(self):
        with self.lock:
            n = len(self.log)
            self.log = []
            return n

    def add_watch(self, info):
        with self.lock:
            self._watch_id += 1
            info["id"] = self._watch_id
            self.watches[self._watch_id] = info
            self.meta_cond.notify_all()
            return self._watch_id

    def remove_watch(self, wid):
        with self.lock:
            self.watches.pop(wid, None)
            self.meta_cond.notify_all()

    def wait_meta(self, predicate, timeout):
        """Wait until predicate() (called with the lock held) is true."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                v = predicate()
                if v:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.meta_cond.wait(min(left, 0.5))

    # ---------------------------------------------------------------- bench

    def bench_prepare(self, rtype, ns, name, count, size, chunk_bytes=65536, per_event_chunks=False,
                      end="close", match=None):
        """Pre-serialise `count` MODIFIED events of one object (data payload of
        `size` bytes) into one chunk-framed buffer for the next matching watch.
        The store jumps to the final version; the history is compacted (so other
        watchers end and anyone resuming from an older RV gets 410)."""
        if end not in ("close", "open"):
            raise ValueError('end must be "close" or "open"')
        ns = ns or "default"
        payload = ("0123456789abcdef" * (size // 16 + 1))[:size]
        with self.lock:
            key = self.key_of(rtype, ns, name)
            if key not in self.objects[rtype.id]:
                self._create_locked(rtype, ns, name, Content(body=_default_body(rtype, name)),
                                    "kubectl-create", rfc3339())
            old = self.objects[rtype.id][key]
            base = self.rv

            def mutate(c):
                if rtype.kind in ("ConfigMap", "Secret"):
                    c.body["data"] = {"payload": payload if rtype.kind == "ConfigMap" else _b64(payload)}
                else:
                    c.annotations = dict(c.annotations, payload=payload)
                return c
            tmpl = self._build(rtype, old.ns, old.name, mutate(Content.of(old)), 999999999999, old.uid,
                               old.obj["metadata"]["creationTimestamp"], old.obj["metadata"].get("generation"),
                               old.obj["metadata"]["managedFields"])
            head, tail = event_line(MODIFIED, tmpl.full).split(b'"resourceVersion":"999999999999"', 1)
            head += b'"resourceVersion":"'
            tail = b'"' + tail
            events = [head + str(base + i).encode() + tail for i in range(1, count + 1)]
            if per_event_chunks:
                buf = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
            else:
                raw = b"".join(events)
                buf = b"".join(b"%x\r\n%s\r\n" % (len(raw[i:i + chunk_bytes]), raw[i:i + chunk_bytes])
                               for i in range(0, len(raw), chunk_bytes))
            final = with_rv(tmpl, base + count)
            self.objects[rtype.id][key] = final
            self.rv = base + count
            self.hist = []
            self.compacted_rv = self.rv
            self.bench = {"buffer": buf, "end": end, "match": match, "count": count,
                          "first_rv": base + 1, "last_rv": self.rv, "rtype": rtype.id}
            self.cond.notify_all()
            return {"events": count, "bytes": len(buf), "first_rv": base + 1, "last_rv": self.rv}

    def take_bench(self, target, rtype):
        with self.lock:
            b = self.bench
            if b is None or b["rtype"] != rtype.id or (b["match"] and b["match"] not in target):
                return None
            self.bench = None
            return b
