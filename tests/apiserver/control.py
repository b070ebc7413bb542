#!/usr/bin/env python3
"""Client helpers for the test API server (standard library only).

As a module (tests in Python):

    from control import ServerProcess, Control, ApiClient
    with ServerProcess(["--bookmark-interval", "1"]) as srv:     # starts apiserver.py
        ctl = srv.control
        ctl.create("configmaps", "default", "a", data={"k": "v"})
        ctl.fault(kind="close_after", bytes=100)
        c = srv.client()                                         # raw HTTP/1.1 over TLS
        r = c.request("/api/v1/namespaces/default/configmaps?limit=10")
        rv = r.json()["metadata"]["resourceVersion"]
        w = c.watch("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + rv)
        ev = w.next_event(timeout=5)

From the shell (every command prints JSON; exit status 1 on an error):

    control.py --ready-file F state [--resource R] [--namespace NS] [--objects]
    control.py --ready-file F create RESOURCE NS NAME [key=value ...] [-l k=v] [-a k=v] [--json OBJECT]
    control.py --ready-file F update RESOURCE NS NAME [key=value ...] [-l k=v] [-a k=v] [--replace] [--patch JSON]
    control.py --ready-file F delete RESOURCE NS NAME
    control.py --ready-file F get RESOURCE NS NAME
    control.py --ready-file F bulk RESOURCE NS COUNT [--size B] [--pattern P] [-l k=v]
    control.py --ready-file F touch RESOURCE NS [--selector S] [--count N]
    control.py --ready-file F compact [RV]
    control.py --ready-file F rotate-token
    control.py --ready-file F settings [key=value ...]       (values are JSON: 0.5, false, ...)
    control.py --ready-file F fault '{"kind":"close_after","bytes":100,"count":1}'
    control.py --ready-file F faults | clear-faults | drop-watches | connections
    control.py --ready-file F bench '{"count":100000,"size":1024}'
    control.py --ready-file F register '{"group":"example.com","version":"v1","plural":"widgets","kind":"Widget"}'
    control.py --ready-file F log [--since ID] | clear-log
    control.py --ready-file F wait-watches [N] [--match S] [--timeout S]
    control.py --ready-file F wait-log MATCH [--count N] [--timeout S] [--since ID]
    control.py --ready-file F call PATH [JSON]               (any control endpoint)

The ready file can also come from $KREFLECT_APISERVER_READY.
"""

import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
APISERVER = os.path.join(HERE, "apiserver.py")


class ControlError(Exception):
    def __init__(self, code, result):
        super().__init__("control API %s: %s" % (code, result.get("error", result)))
        self.code, self.result = code, result


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (for a process to start on)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def load_ready(path, timeout=0):
    """The ready file's JSON, waiting up to `timeout` seconds for it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


# =========================================================================== control API

class Control:
    def __init__(self, ready_file=None, url=None, ready=None):
        if ready is None and ready_file:
            ready = load_ready(ready_file)
        self.ready = ready or {}
        self.url = url or self.ready.get("control") or "http://127.0.0.1:%d" % self.ready["control_port"]

    def call(self, path, body=None, timeout=60, check=True):
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            result = json.loads(e.read() or b"{}")
            if check:
                raise ControlError(e.code, result) from None
            return result

    # objects
    def create(self, resource, namespace, name, data=None, labels=None, annotations=None, **kw):
        body = dict(kw, resource=resource, namespace=namespace, name=name)
        for k, v in (("data", data), ("labels", labels), ("annotations", annotations)):
            if v is not None:
                body[k] = v
        return self.call("/create", body)

    def update(self, resource, namespace, name, data=None, labels=None, annotations=None, **kw):
        body = dict(kw, resource=resource, namespace=namespace, name=name)
        for k, v in (("data", data), ("labels", labels), ("annotations", annotations)):
            if v is not None:
                body[k] = v
        return self.call("/update", body)

    def delete(self, resource, namespace, name):
        return self.call("/delete", {"resource": resource, "namespace": namespace, "name": name})

    def delete_many(self, resource, namespace, names):
        return self.call("/delete", {"resource": resource, "namespace": namespace, "names": list(names)})

    def get(self, resource, namespace, name):
        return self.call("/object", {"resource": resource, "namespace": namespace, "name": name})

    def bulk(self, resource, namespace, count, size=1024, **kw):
        return self.call("/bulk", dict(kw, resource=resource, namespace=namespace, count=count, size=size))

    def touch(self, resource, namespace=None, selector="", count=1):
        return self.call("/touch", {"resource": resource, "namespace": namespace, "selector": selector,
                                    "count": count})

    def state(self, **q):
        return self.call("/state", q)

    def rv(self):
        return self.state(summary=True)["rv"]

    # server behaviour
    def compact(self, rv=None):
        return self.call("/compact", {} if rv is None else {"rv": int(rv)})

    def rotate_token(self):
        return self.call("/token/rotate")["token"]

    def settings(self, **kw):
        return self.call("/settings", kw)

    def register(self, **kw):
        return self.call("/register", kw)

    def fault(self, **spec):
        return self.call("/fault", spec)

    def faults(self):
        return self.call("/faults")

    def clear_faults(self):
        return self.call("/faults/clear")

    def drop_watches(self):
        return self.call("/drop-watches")["dropped"]

    def bench(self, **kw):
        return self.call("/bench", kw)

    # observation
    def log(self, since=0):
        return self.call("/log", {"since": since})["entries"]

    def clear_log(self):
        return self.call("/log/clear")

    def wait_watches(self, count=1, timeout=10, match=None):
        return self.call("/wait-watches", {"count": count, "timeout": timeout, "match": match},
                         timeout=timeout + 10)

    def wait_log(self, match="", count=1, timeout=10, since=0, done=False):
        return self.call("/wait-log", {"match": match, "count": count, "timeout": timeout, "since": since,
                                       "done": done}, timeout=timeout + 10)["entries"]

    def connections(self):
        return self.call("/connections")["connections"]

    def token(self):
        with open(self.ready["token_file"]) as f:
            return f.read().strip()


# =========================================================================== raw API client

class ProtocolError(Exception):
    pass


class Response:
    def __init__(self, status, reason, headers, body, chunks):
        self.status, self.reason, self.headers, self.body, self.chunks = status, reason, headers, body, chunks

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %d %s, %d bytes>" % (self.status, self.reason, len(self.body))


class ApiClient:
    """A small HTTP/1.1 client with keep-alive that exposes the wire (chunk
    sizes, EOF vs terminating chunk) so tests can check what the server sent.

    auth: "token" (read the token file now), a token string, "cert" (client
    certificate), or None."""

    def __init__(self, ready, auth="token", tls_version=None, host="127.0.0.1", timeout=10.0):
        self.ready, self.host, self.timeout = ready, host, timeout
        self.tls = not ready.get("plain_http")
        self.tls_version = tls_version
        self.auth = auth
        self.sock = None
        self.buf = bytearray()
        self.connects = 0

    def _headers(self):
        h = {"Host": "%s:%d" % (self.host, self.ready["port"]), "Accept": "application/json",
             "User-Agent": "kreflect-selftest/1.0"}
        token = None
        if self.auth == "token":
            with open(self.ready["token_file"]) as f:
                token = f.read().strip()
        elif self.auth not in (None, "cert"):
            token = self.auth
        if token:
            h["Authorization"] = "Bearer " + token
        return h

    def connect(self):
        self.close()
        raw = socket.create_connection((self.host, self.ready["port"]), timeout=self.timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.ready["ca"])
            if self.tls_version == "1.2":
                ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            elif self.tls_version == "1.3":
                ctx.minimum_version = ssl.TLSVersion.TLSv1_3
            if self.auth == "cert":
                ctx.load_cert_chain(self.ready["client_cert"], self.ready["client_key"])
            raw = ctx.wrap_socket(raw, server_hostname=self.host)
        self.sock = raw
        self.buf = bytearray()
        self.connects += 1

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def tls_version_used(self):
        return self.sock.version() if self.tls and self.sock else None

    # --------------------------------------------------------------- reading

    def _recv(self, timeout):
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("connection closed by the server")
        self.buf += data

    def _read_until(self, sep, timeout):
        deadline = time.monotonic() + timeout
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[:i + len(sep)]
                return out
            self._recv(max(0.001, deadline - time.monotonic()))

    def _read_n(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            self._recv(max(0.001, deadline - time.monotonic()))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_head(self, timeout):
        head = self._read_until(b"\r\n\r\n", timeout).decode("latin-1").split("\r\n")
        proto, code, *reason = head[0].split(" ", 2)
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return int(code), (reason[0] if reason else ""), headers

    def read_chunk(self, timeout):
        """One chunk's payload (b"" for the terminating chunk, whose final
        CRLF is consumed too; trailers are not supported)."""
        line = self._read_until(b"\r\n", timeout)
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            raise ProtocolError("invalid chunk size line %r" % line[:40]) from None
        if size < 0:
            raise ProtocolError("negative chunk size")
        data = self._read_n(size + 2, timeout)
        if data[-2:] != b"\r\n":
            raise ProtocolError("chunk not followed by CRLF")
        return data[:-2]

    # --------------------------------------------------------------- requests

    def send(self, path, headers=None, method="GET"):
        if self.sock is None:
            self.connect()
        h = self._headers()
        h.update(headers or {})
        req = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
        self.sock.sendall(req.encode("latin-1"))

    def request(self, path, headers=None, method="GET", timeout=None):
        """Send a request and read the whole response (Content-Length or chunked)."""
        timeout = timeout or self.timeout
        self.send(path, headers, method)
        code, reason, hdrs = self._read_head(timeout)
        chunks = None
        if "chunked" in hdrs.get("transfer-encoding", ""):
            chunks, parts = [], []
            while True:
                c = self.read_chunk(timeout)
                if not c:
                    break
                chunks.append(len(c))
                parts.append(c)
            body = b"".join(parts)
        else:
            body = self._read_n(int(hdrs.get("content-length", "0")), timeout)
        if "close" in hdrs.get("connection", "").lower():
            self.close()
        return Response(code, reason, hdrs, body, chunks)

    def watch(self, path, headers=None, timeout=None):
        """Send a watch request; returns a WatchStream (or a Response for a
        non-200 answer)."""
        timeout = timeout or self.timeout
        self.send(path, headers)
        code, reason, hdrs = self._read_head(timeout)
        if code != 200 or "chunked" not in hdrs.get("transfer-encoding", ""):
            body = self._read_n(int(hdrs.get("content-length", "0")), timeout)
            return Response(code, reason, hdrs, body, None)
        return WatchStream(self, hdrs)


class WatchStream:
    """Events of a chunked watch response. ended: None while open, "clean"
    after the terminating chunk, "eof" if the connection just closed."""

    def __init__(self, client, headers):
        self.c, self.headers = client, headers
        self.status = 200
        self.chunks = []        # payload sizes in arrival order
        self.pending = bytearray()
        self.lines = []         # every complete line received (bytes)
        self.ended = None

    def _more(self, timeout):
        try:
            c = self.c.read_chunk(timeout)
        except EOFError:
            self.ended = "eof"
            self.c.close()
            return False
        if not c:
            self.ended = "clean"
            return False
        self.chunks.append(len(c))
        self.pending += c
        return True

    def next_line(self, timeout=5.0):
        """The next newline-terminated line, or None at the end of the stream.
        Raises socket.timeout if nothing arrives in time."""
        deadline = time.monotonic() + timeout
        while True:
            i = self.pending.find(b"\n")
            if i >= 0:
                line = bytes(self.pending[:i + 1])
                del self.pending[:i + 1]
                self.lines.append(line)
                return line
            if self.ended or not self._more(max(0.001, deadline - time.monotonic())):
                return None

    def next_event(self, timeout=5.0):
        line = self.next_line(timeout)
        return None if line is None else json.loads(line)

    def events(self, n, timeout=5.0):
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            ev = self.next_event(max(0.001, deadline - time.monotonic()))
            if ev is None:
                break
            out.append(ev)
        return out

    def drain(self, timeout=5.0):
        """All remaining events until the stream ends."""
        out = []
        while True:
            ev = self.next_event(timeout)
            if ev is None:
                return out
            out.append(ev)


# =========================================================================== launching

class ServerProcess:
    """Start apiserver.py in a temporary (or given) work dir and wait until ready."""

    def __init__(self, args=(), workdir=None, timeout=20, python=sys.executable):
        self._tmp = None
        if workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kreflect-apiserver-")
            workdir = self._tmp.name
        self.workdir = workdir
        self.ready_file = os.path.join(workdir, "ready.json")
        try:
            os.unlink(self.ready_file)
        except OSError:
            pass
        self.stderr = open(os.path.join(workdir, "apiserver.log"), "wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([python, APISERVER, "--workdir", workdir, "--ready-file", self.ready_file,
                                      *args], stdout=subprocess.DEVNULL, stderr=self.stderr)
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.ready_file):
            if self.proc.poll() is not None:
                raise RuntimeError("apiserver exited with %s; see %s" % (self.proc.returncode,
                                                                       self.stderr.name))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("apiserver not ready after %ss" % timeout)
            time.sleep(0.01)
        self.startup_seconds = time.monotonic() - self.t0
        self.ready = load_ready(self.ready_file, 5)
        self.control = Control(ready=self.ready)

    def client(self, **kw):
        return ApiClient(self.ready, **kw)

    def stop(self, timeout=5):
        """SIGTERM and wait; returns the seconds it took to exit."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None
        return time.monotonic() - t0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# =========================================================================== CLI

def _kv(pairs, decode=False):
    out = {}
    for p in pairs or ():
        if "=" not in p:
            raise SystemExit("expected key=value, got %r" % p)
        k, v = p.split("=", 1)
        if decode:
            try:
                v = json.loads(v)
            except ValueError:
                pass
        out[k] = v
    return out


def _ns(ns):
    return "" if ns in ("-", "") else ns


def cli(argv=None):
    ap = argparse.ArgumentParser(description="Control the kreflect test API server.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("From the shell", 1)[1])
    ap.add_argument("--ready-file", default=os.environ.get("KREFLECT_APISERVER_READY"))
    ap.add_argument("--url", help="control API URL instead of the ready file")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def obj_cmd(name, extra=True):
        p = sub.add_parser(name)
        p.add_argument("resource")
        p.add_argument("namespace")
        p.add_argument("name")
        if extra:
            p.add_argument("data", nargs="*", metavar="key=value")
            p.add_argument("-l", "--label", action="append", metavar="k=v")
            p.add_argument("-a", "--annotation", action="append", metavar="k=v")
        return p

    p = obj_cmd("create")
    p.add_argument("--json", help="a whole object (metadata.labels, data, spec, ...)")
    p.add_argument("--upsert", action="store_true")
    p = obj_cmd("update")
    p.add_argument("--replace", action="store_true", help="replace data/labels instead of merging")
    p.add_argument("--patch", help="a JSON merge patch")
    p.add_argument("--json", help="a whole replacement object")
    obj_cmd("delete", False)
    obj_cmd("get", False)
    p = sub.add_parser("bulk")
    p.add_argument("resource")
    p.add_argument("namespace")
    p.add_argument("count", type=int)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--pattern")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("-l", "--label", action="append", metavar="k=v")
    p = sub.add_parser("touch")
    p.add_argument("resource")
    p.add_argument("namespace")
    p.add_argument("--selector", default="")
    p.add_argument("--count", type=int, default=1)
    p = sub.add_parser("state")
    p.add_argument("--resource")
    p.add_argument("--namespace")
    p.add_argument("--objects", action="store_true", help="include the objects themselves")
    p = sub.add_parser("compact")
    p.add_argument("rv", nargs="?", type=int)
    sub.add_parser("rotate-token")
    p = sub.add_parser("settings")
    p.add_argument("values", nargs="*", metavar="key=value")
    for name in ("fault", "bench", "register"):
        p = sub.add_parser(name)
        p.add_argument("spec", help="JSON object")
    for name in ("faults", "clear-faults", "drop-watches", "connections", "clear-log"):
        sub.add_parser(name)
    p = sub.add_parser("log")
    p.add_argument("--since", type=int, default=0)
    p = sub.add_parser("wait-watches")
    p.add_argument("count", nargs="?", type=int, default=1)
    p.add_argument("--match")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("wait-log")
    p.add_argument("match")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--since", type=int, default=0)
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("call")
    p.add_argument("path")
    p.add_argument("body", nargs="?", default="{}")
    a = ap.parse_args(argv)

    if not a.ready_file and not a.url:
        ap.error("--ready-file (or $KREFLECT_APISERVER_READY) or --url is required")
    ctl = Control(ready_file=a.ready_file, url=a.url)
    c = a.cmd
    try:
        if c in ("create", "update"):
            body = {"resource": a.resource, "namespace": _ns(a.namespace), "name": a.name}
            data = _kv(a.data)
            if data:
                is_secret = a.resource.lower() in ("secret", "secrets")
                body["stringData" if is_secret else "data"] = data
            if a.label:
                body["labels"] = _kv(a.label)
            if a.annotation:
                body["annotations"] = _kv(a.annotation)
            if a.json:
                body["object"] = json.loads(a.json)
            if c == "create":
                body["upsert"] = a.upsert
                r = ctl.call("/create", body)
            else:
                if a.replace:
                    body["mode"] = "replace"
                if a.patch:
                    body["patch"] = json.loads(a.patch)
                r = ctl.call("/update", body)
        elif c == "delete":
            r = ctl.delete(a.resource, _ns(a.namespace), a.name)
        elif c == "get":
            r = ctl.get(a.resource, _ns(a.namespace), a.name)
        elif c == "bulk":
            r = ctl.bulk(a.resource, _ns(a.namespace), a.count, a.size, name_pattern=a.pattern, start=a.start,
                         labels=_kv(a.label) or None)
        elif c == "touch":
            r = ctl.touch(a.resource, _ns(a.namespace) or None, a.selector, a.count)
        elif c == "state":
            q = {"objects": a.objects}
            if a.resource:
                q["resource"] = a.resource
            if a.namespace is not None:
                q["namespace"] = a.namespace
            r = ctl.state(**q)
        elif c == "compact":
            r = ctl.compact(a.rv)
        elif c == "rotate-token":
            r = ctl.call("/token/rotate")
        elif c == "settings":
            r = ctl.call("/settings", _kv(a.values, decode=True))
        elif c in ("fault", "bench", "register"):
            r = ctl.call("/" + c, json.loads(a.spec))
        elif c == "faults":
            r = ctl.faults()
        elif c == "clear-faults":
            r = ctl.clear_faults()
        elif c == "drop-watches":
            r = ctl.call("/drop-watches")
        elif c == "connections":
            r = ctl.call("/connections")
        elif c == "log":
            r = ctl.call("/log", {"since": a.since})
        elif c == "clear-log":
            r = ctl.clear_log()
        elif c == "wait-watches":
            r = ctl.wait_watches(a.count, a.timeout, a.match)
        elif c == "wait-log":
            r = ctl.call("/wait-log", {"match": a.match, "count": a.count, "since": a.since,
                                       "timeout": a.timeout}, timeout=a.timeout + 10)
        elif c == "call":
            r = ctl.call(a.path if a.path.startswith("/") else "/" + a.path, json.loads(a.body))
        else:
            ap.error("unknown command " + c)
    except ControlError as e:
        print(json.dumps(e.result, indent=1))
        return 1
    except (OSError, ValueError) as e:
        print(json.dumps({"error": str(e)}))
        return 1
    print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
