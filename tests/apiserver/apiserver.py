#!/usr/bin/env python3
"""A simulated kube-apiserver for kreflect's end-to-end tests (standard library only).

It speaks the wire format of src/README.md "The wire format": HTTPS (TLS 1.2
and 1.3) with bearer-token and client-certificate auth, HTTP/1.1 keep-alive,
discovery, LIST with limit/continue/resourceVersion(Match)/selectors, WATCH with
replay, bookmarks, watch-list (sendInitialEvents) and timeoutSeconds, 410/504
semantics, and fault injection. A plain-HTTP control API on 127.0.0.1 changes
state, injects faults and reads the request log (see README.md).

    python3 tests/apiserver/apiserver.py --workdir DIR [--port 0] [--control-port 0]
        [--ready-file PATH] [--bookmark-interval S] [--seed N] [--plain-http]
        [--key-type ec|rsa] [--no-watch-list] [--initial N]

Layout: certificates, transport (TLS through ssl.MemoryBIO so faults can cut
the byte stream anywhere, even inside a TLS record), HTTP connection handling
and routing, watch streams, control API, main. The object store, history,
selectors and Status objects live in kstore.py.
"""

import argparse
import email.utils
import gzip
import http
import http.server
import json
import os
import random
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kstore  # noqa: E402
from kstore import (ApiError, Filter, GO_BOOL, bookmark_line, canned_status, dumps,  # noqa: E402
                    err_bad_request, err_invalid_list_options, error_line, status, status_unauthorized)

WRITE_TIMEOUT = 60.0       # a client that reads nothing for this long loses its connection
HANDSHAKE_TIMEOUT = 10.0
HEADER_TIMEOUT = 30.0
POLL = 0.2                 # watch loops look at the socket / stop flags this often
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
GZIP_MIN = 128 * 1024      # like the apiserver's APIResponseCompression threshold
GO_CHUNKING_MIN = 2048     # net/http: a body without Content-Length longer than this goes chunked


def accepts_gzip(value):
    """The apiserver's negotiateContentEncoding: one comma-separated token exactly "gzip"."""
    return any(token.strip() == "gzip" for token in (value or "").split(","))


def gzip_like_go(body):
    """gzip.NewWriterLevel(w, 1) as the apiserver uses it: the header Go writes (no name,
    MTIME 0, XFL 4, OS 255), and the stream ending as Go's Close ends it: a flush, then an
    empty final stored block."""
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    raw = c.compress(body) + c.flush(zlib.Z_SYNC_FLUSH) + b"\x01\x00\x00\xff\xff"
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\xff" + raw
            + struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF))


def spoil_gzip(gz, mode):
    """The bad_gzip fault: a body that fails to inflate in the way `mode` names."""
    if mode == "truncate":          # the last 8 bytes (CRC-32, ISIZE) never come
        return gz[:-8]
    if mode == "crc":               # the CRC-32 of the trailer off by one bit
        return gz[:-8] + bytes([gz[-8] ^ 1]) + gz[-7:]
    if mode == "bomb":              # a valid list start, then 64 MiB of blanks
        return gzip.compress(b'{"kind":"ConfigMapList","items":[' + b" " * (64 << 20), 9, mtime=0)
    if mode == "data":              # valid deflate, valid JSON, one changed value: only the CRC says so
        body = gzip.decompress(gz)
        at = body.find(b'"payload":"', len(body) // 2) + len(b'"payload":"')
        bad = body[:at] + (b"Z" if body[at:at + 1] != b"Z" else b"Y") + body[at + 1:]
        raw = b"".join(bytes([i + 65535 >= len(bad)]) + struct.pack("<HH", len(bad[i:i + 65535]),
                                                                   0xFFFF ^ len(bad[i:i + 65535]))
                       + bad[i:i + 65535] for i in range(0, len(bad), 65535))
        return gz[:10] + raw + gz[-8:]
    mid = 10 + (len(gz) - 18) // 2  # "corrupt": one flipped byte in the deflate data
    return gz[:mid] + bytes([gz[mid] ^ 0x55]) + gz[mid + 1:]


def log(msg):
    sys.stderr.write("apiserver: %s\n" % msg)
    sys.stderr.flush()


# =========================================================================== certificates

CNF = """[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,{ku}
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[v3_client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,{ku}
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
"""


def ensure_certs(workdir, key_type):
    """CA, server and client certificates in workdir, made once with openssl."""
    names = ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key")
    paths = {n.replace(".", "_"): os.path.join(workdir, n) for n in names}
    stamp = os.path.join(workdir, "certs.json")
    try:
        with open(stamp) as f:
            if json.load(f).get("key_type") == key_type and all(os.path.exists(p) for p in paths.values()):
                return paths
    except (OSError, ValueError):
        pass

    def run(*cmd):
        r = subprocess.run(["openssl", *cmd], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (cmd[0], r.stderr.strip()))

    cnf = os.path.join(workdir, "openssl.cnf")
    with open(cnf, "w") as f:
        f.write(CNF.format(ku="digitalSignature,keyEncipherment" if key_type == "rsa" else "digitalSignature"))
    alg = (["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"] if key_type == "rsa"
           else ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
    procs = [subprocess.Popen(["openssl", "genpkey", *alg, "-out", paths[k]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for k in ("ca_key", "server_key", "client_key")]
    for p in procs:
        _, err = p.communicate(timeout=60)
        if p.returncode != 0:
            raise RuntimeError("openssl genpkey failed: %s" % err.decode().strip())
    for k in ("ca_key", "server_key", "client_key"):
        os.chmod(paths[k], 0o600)
    run("req", "-x509", "-new", "-key", paths["ca_key"], "-subj", "/CN=kreflect-test-ca", "-days", "3650",
        "-sha256", "-config", cnf, "-extensions", "v3_ca", "-out", paths["ca_crt"])
    for who, subj, ext in (("server", "/CN=kube-apiserver", "v3_server"),
                           ("client", "/O=system:masters/CN=kreflect-test", "v3_client")):
        csr = os.path.join(workdir, who + ".csr")
        run("req", "-new", "-key", paths[who + "_key"], "-subj", subj, "-config", cnf, "-out", csr)
        run("x509", "-req", "-in", csr, "-CA", paths["ca_crt"], "-CAkey", paths["ca_key"],
            "-set_serial", "0x%016x" % random.getrandbits(63), "-days", "3650", "-sha256",
            "-extfile", cnf, "-extensions", ext, "-out", paths[who + "_crt"])
        os.unlink(csr)
    with open(stamp, "w") as f:
        json.dump({"key_type": key_type}, f)
    return paths


def make_tls_context(certs, tls_version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3 if tls_version == "1.3" else ssl.TLSVersion.TLSv1_2
    if tls_version == "1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certs["server_crt"], certs["server_key"])
    ctx.load_verify_locations(certs["ca_crt"])
    ctx.verify_mode = ssl.CERT_OPTIONAL       # a client certificate authenticates, a token also does
    ctx.set_alpn_protocols(["http/1.1"])
    # As Go's crypto/tls (kube-apiserver): the server's own AEAD order, unless the
    # client lists ChaCha20-Poly1305 first (OpenSSL's SSL_OP_PRIORITIZE_CHACHA;
    # Python's ssl module has no name for it).
    ctx.options |= getattr(ssl, "OP_PRIORITIZE_CHACHA", 0x00200000)
    return ctx


def write_atomic(path, text, mode=0o644):
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


# =========================================================================== transport

class Cut(Exception):
    """The connection is gone: closed by a fault, by the peer, or dropped."""


class Transport:
    """A connected socket, TLS done by hand through MemoryBIOs. This lets a fault
    send exactly K plaintext bytes and then half of the next TLS record, and
    lets a watch notice that the peer closed without consuming its data."""

    def __init__(self, sock, ctx):
        self.sock = sock
        self.rbuf = bytearray()
        self.tls = ctx is not None
        self.peer_cn = None
        self.version = None
        if self.tls:
            self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
            self.obj = ctx.wrap_bio(self.inc, self.out, server_side=True)

    def handshake(self):
        if not self.tls:
            return
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill(deadline - time.monotonic()):
                    raise Cut("EOF during TLS handshake")
        self._flush()
        self.version = self.obj.version()
        cert = self.obj.getpeercert()
        if cert:
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        self.peer_cn = v
            self.peer_cn = self.peer_cn or "unknown"

    def _flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def _fill(self, timeout):
        """Read raw bytes (TLS: into the incoming BIO). False on EOF."""
        if timeout <= 0:
            raise socket.timeout("timed out")
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        if self.tls:
            if data:
                self.inc.write(data)
            else:
                self.inc.write_eof()
        elif data:
            self.rbuf += data
        return bool(data)

    def recv_more(self, timeout):
        """Append more plaintext to rbuf; False on EOF. Raises socket.timeout."""
        if not self.tls:
            return self._fill(timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                data = self.obj.read(65536)
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill(deadline - time.monotonic()):
                    continue          # the next read reports the EOF
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return False
            if not data:
                return False
            self.rbuf += data
            return True

    def peer_closed(self):
        """Non-blocking: has the peer closed (or reset) the connection?"""
        try:
            r, _, _ = select.select([self.sock], [], [], 0)
            if not r:
                return False
            self.sock.settimeout(0)
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return False
        except (OSError, ValueError):
            return True
        if not data:
            return True
        if not self.tls:
            self.rbuf += data
            return False
        self.inc.write(data)
        try:
            self.rbuf += self.obj.read(65536)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            return True               # close_notify or garbage
        return False

    def sendall(self, data):
        self.sock.settimeout(WRITE_TIMEOUT)
        if not self.tls:
            self.sock.sendall(data)
            return
        mv = memoryview(data)
        while mv:
            n = self.obj.write(mv[:262144])
            mv = mv[n:]
            self._flush()

    def cut(self, next_bytes=b"", mid_record=True, reset=False):
        """Close on purpose. With TLS and mid_record, first send half of one
        more TLS record (made of next_bytes), so the peer sees a truncated record."""
        try:
            if self.tls and mid_record:
                self.obj.write(next_bytes or b"\0" * 64)
                rec = self.out.read()
                self.sock.settimeout(5)
                self.sock.sendall(rec[:max(1, len(rec) // 2)])
        except (OSError, ssl.SSLError):
            pass
        self.close(reset)

    def shutdown(self):
        """Abort from any thread: the owner's next read or write fails."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self, reset=False, notify=False):
        """Close; notify=True first sends a TLS close_notify (an orderly close,
        as Go's server does), reset=True makes it a TCP RST."""
        if notify and self.tls and not reset:
            try:
                self.obj.unwrap()
            except (ssl.SSLError, ValueError):
                pass                  # wants the peer's close_notify; ours is in the BIO
            try:
                self.sock.settimeout(1)
                self._flush()
            except OSError:
                pass
        try:
            if reset:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class RandomChunker:
    """Splits bytes into pieces of random size (seeded), across event boundaries."""

    def __init__(self, seed, lo=1, hi=64):
        self.rng = random.Random(seed)
        self.lo, self.hi = max(1, int(lo)), max(int(lo), int(hi))

    def split(self, data):
        out, i = [], 0
        while i < len(data):
            n = self.rng.randint(self.lo, self.hi)
            out.append(data[i:i + n])
            i += n
        return out


# =========================================================================== HTTP

class Request:
    def __init__(self, method, target, version, headers):
        self.method, self.target, self.version, self.headers = method, target, version, headers
        path, _, self.raw_query = target.partition("?")
        self.path = urllib.parse.unquote(path)
        self.query = {k: v[0] for k, v in urllib.parse.parse_qs(self.raw_query, keep_blank_values=True).items()}
        conn = headers.get("connection", "").lower()
        self.keep_alive = ("close" not in conn) if version == "HTTP/1.1" else ("keep-alive" in conn)


class Options:
    """Parsed and validated ListOptions (like the apiserver's, incl. defaulting)."""

    def __init__(self, q, is_watch, watch_list_gate, rtype):
        def pbool(name):
            v = q.get(name)
            if v is None:
                return None
            if v not in GO_BOOL:
                raise err_bad_request('%s: invalid value "%s": strconv.ParseBool: parsing "%s": invalid syntax'
                                      % (name, v, v))
            return GO_BOOL[v]

        def pint(name):
            v = q.get(name)
            if v in (None, ""):
                return None
            try:
                return int(v)
            except ValueError:
                raise err_bad_request('%s: invalid value "%s": strconv.ParseInt: parsing "%s": invalid syntax'
                                      % (name, v, v)) from None

        self.watch = is_watch
        self.rv = q.get("resourceVersion", "")
        self.rvm = q.get("resourceVersionMatch", "")
        self.limit = max(0, pint("limit") or 0)
        self.cont = q.get("continue", "")
        self.sie = pbool("sendInitialEvents")
        self.bookmarks = bool(pbool("allowWatchBookmarks"))
        self.timeout = pint("timeoutSeconds")
        self.defaulted = False
        try:
            self.filter = Filter(rtype, None, None, q.get("labelSelector", ""), q.get("fieldSelector", ""))
        except ValueError as e:
            raise err_bad_request(str(e)) from None
        # SetListOptionsDefaults (only with the WatchList gate on)
        if is_watch and watch_list_gate and self.sie is None and not self.rvm and self.rv in ("", "0"):
            self.sie, self.rvm, self.defaulted = True, "NotOlderThan", True
        errs = self._validate(watch_list_gate)
        if errs:
            raise err_invalid_list_options(errs)

    def _validate(self, gate):
        errs = []
        if not self.watch:
            if self.rvm:
                if not self.rv:
                    errs.append(("resourceVersionMatch", "Forbidden",
                                 "resourceVersionMatch is forbidden unless resourceVersion is provided"))
                if self.cont:
                    errs.append(("resourceVersionMatch", "Forbidden",
                                 "resourceVersionMatch is forbidden when continue is provided"))
                if self.rvm not in ("Exact", "NotOlderThan"):
                    errs.append(("resourceVersionMatch", "NotSupported",
                                 (self.rvm, ["Exact", "NotOlderThan", ""])))
                if self.rvm == "Exact" and self.rv == "0":
                    errs.append(("resourceVersionMatch", "Forbidden",
                                 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
            if self.sie:
                errs.append(("sendInitialEvents", "Forbidden", "sendInitialEvents is forbidden for list"))
            return errs
        if self.sie is not None:
            if self.rvm != "NotOlderThan":
                errs.append(("resourceVersionMatch", "Forbidden",
                             "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
            if not gate:
                errs.append(("sendInitialEvents", "Forbidden",
                             "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
        if self.rvm:
            if self.sie is None:
                errs.append(("resourceVersionMatch", "Forbidden",
                             "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
            if self.rvm != "NotOlderThan":
                errs.append(("resourceVersionMatch", "NotSupported", (self.rvm, ["NotOlderThan"])))
            if self.cont:
                errs.append(("resourceVersionMatch", "Forbidden",
                             "resourceVersionMatch is forbidden when continue is provided"))
        return errs


class ApiConnection:
    """One client connection, served by its own thread: requests in sequence
    (keep-alive), each answered in full before the next is read."""

    def __init__(self, server, sock, addr, cid):
        self.server, self.state, self.cid, self.addr = server, server.state, cid, addr
        self.t = Transport(sock, server.tls_ctx)
        self.nreq = 0
        self.watching = False
        self.abrupt = False           # end without close_notify (faults, dropped watches, stop)
        self._reset_response()

    def _reset_response(self):
        self.sent = 0
        self.code = None
        self.budget = None
        self.pause_at = None            # pause_after: (bytes, seconds)
        self.slow = None                # slow: (from byte, bytes per second, bytes per write)
        self.cut_mid_record = True
        self.cut_reset = False
        self.chunker = None
        self.bad_gzip = None            # bad_gzip: how to spoil a gzip body
        self.short_body = None          # short_body: bytes of the body sent, framed as whole
        self.gzipped = False            # the body went out gzip-encoded
        self.force_coding = None        # content_encoding: this coding, asked for or not

    # ------------------------------------------------------------ main loop

    def run(self):
        try:
            self.t.handshake()
            while not self.server.stopping.is_set():
                req = self.read_request(timeout=self.server.idle_timeout if self.nreq else HEADER_TIMEOUT)
                if req is None:
                    break
                if not self.handle(req):
                    break
        except (Cut, OSError, ssl.SSLError, ValueError):
            self.abrupt = True
        except Exception as e:  # a bug: say so, never hang the client
            self.abrupt = True
            log("connection %d: internal error: %r" % (self.cid, e))
            import traceback
            traceback.print_exc()
        finally:
            self.t.close(notify=not self.abrupt and not self.server.stopping.is_set())
            self.server.forget(self)

    def read_request(self, timeout):
        t = self.t
        while True:
            idx = t.rbuf.find(b"\r\n\r\n")
            if idx >= 0:
                break
            if len(t.rbuf) > 65536:
                self._raw_error(431, "Request Header Fields Too Large")
                return None
            try:
                if not t.recv_more(timeout if not t.rbuf else HEADER_TIMEOUT):
                    return None
            except socket.timeout:
                return None
        head = bytes(t.rbuf[:idx]).decode("latin-1")
        del t.rbuf[:idx + 4]
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._raw_error(400, "Bad Request")
            return None
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._raw_error(411, "Length Required")
            return None
        n = int(headers.get("content-length", "0") or 0)
        while len(t.rbuf) < n:
            if not t.recv_more(HEADER_TIMEOUT):
                return None
        del t.rbuf[:n]
        return Request(parts[0], parts[1], parts[2], headers)

    def _raw_error(self, code, text):
        body = (text + "\n").encode()
        try:
            self.t.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                           b"Connection: close\r\n\r\n%s" % (code, text.encode(), len(body), body))
        except (OSError, ssl.SSLError):
            pass

    # ------------------------------------------------------------ writing

    def _write(self, data):
        """Send response bytes, honouring pause_after, slow and close_after faults."""
        if not data:
            return
        if self.pause_at is not None and self.sent + len(data) > self.pause_at[0]:
            n = max(0, self.pause_at[0] - self.sent)
            seconds = self.pause_at[1]
            self.pause_at = None
            self._write(data[:n])
            if not self.sleep(seconds):
                raise Cut("server stopping")
            data = data[n:]
        if self.slow is not None and self.sent + len(data) > self.slow[0]:
            start, rate, piece = self.slow
            n = max(0, start - self.sent)
            self._send(data[:n])
            for i in range(n, len(data), piece):
                self._send(data[i:i + piece])
                if not self.sleep(len(data[i:i + piece]) / rate):
                    raise Cut("server stopping")
            return
        self._send(data)

    def _send(self, data):
        """Send now, honouring a close_after fault's byte budget."""
        if not data:
            return
        if self.budget is not None and self.sent + len(data) >= self.budget:
            n = self.budget - self.sent
            if n > 0:
                self.t.sendall(data[:n])
                self.sent += n
            self.t.cut(data[n:n + 64], self.cut_mid_record and self.t.tls, self.cut_reset)
            raise Cut("close_after %d bytes" % self.budget)
        self.t.sendall(data)
        self.sent += len(data)

    def _frame(self, payload):
        if self.chunker:
            return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in self.chunker.split(payload))
        return b"%x\r\n%s\r\n" % (len(payload), payload)

    def write_chunk(self, payload):
        if payload:
            self._write(self._frame(payload))

    def end_chunks(self):
        self._write(b"0\r\n\r\n")

    def base_headers(self, ctype="application/json"):
        return [("Audit-Id", str(uuid.uuid4())), ("Cache-Control", "no-cache, private"),
                ("Content-Type", ctype),
                ("X-Kubernetes-Pf-Flowschema-Uid", self.server.pf_uids[0]),
                ("X-Kubernetes-Pf-Prioritylevel-Uid", self.server.pf_uids[1]),
                ("Date", email.utils.formatdate(usegmt=True))]

    def _head(self, code, headers, keep_alive):
        try:
            phrase = http.HTTPStatus(code).phrase
        except ValueError:
            phrase = "Unknown"
        if not keep_alive:
            headers = headers + [("Connection", "close")]
        self.code = code
        return ("HTTP/1.1 %d %s\r\n" % (code, phrase) + "".join("%s: %s\r\n" % kv for kv in headers)
                + "\r\n").encode("latin-1")

    def send_body(self, req, code, body, extra=(), ctype="application/json", is_list=False):
        headers = self.base_headers(ctype) + list(extra)
        settings = self.state.settings
        gzipped = False
        if self.short_body is not None:
            body = body[:self.short_body]    # cut before any coding: the framing says it is whole
        if settings["gzip"] and len(body) > GZIP_MIN and accepts_gzip(req.headers.get("accept-encoding")):
            body = gzip_like_go(body)
            if self.bad_gzip:
                body = spoil_gzip(body, self.bad_gzip)
            headers += [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
            self.gzipped = True
            # The apiserver sets no Content-Length on a gzip body: net/http chunks it.
            gzipped = len(body) > GO_CHUNKING_MIN
        elif self.force_coding:
            if self.force_coding == "gzip":
                body = gzip_like_go(body)
                self.gzipped = True
            headers.append(("Content-Encoding", self.force_coding))
        if self.chunker or (is_list and settings["list_chunked"]) or gzipped:
            headers.append(("Transfer-Encoding", "chunked"))
            self._write(self._head(code, headers, req.keep_alive))
            if self.chunker:
                self.write_chunk(body)
            else:
                step = max(1, settings["list_chunk_size"])
                self._write(b"".join(self._frame(body[i:i + step]) for i in range(0, len(body), step)))
            self.end_chunks()
        else:
            headers.append(("Content-Length", str(len(body))))
            self._write(self._head(code, headers, req.keep_alive) + body)

    def send_json(self, req, code, obj, extra=()):
        self.send_body(req, code, dumps(obj) + b"\n", extra)

    def send_status(self, req, st, extra=()):
        extra = list(extra)
        ra = (st.get("details") or {}).get("retryAfterSeconds")
        if ra and not any(k == "Retry-After" for k, _ in extra):
            extra.append(("Retry-After", str(ra)))
        self.send_json(req, st["code"], st, extra)

    def start_stream(self, req):
        headers = self.base_headers() + [("Transfer-Encoding", "chunked")]
        if self.force_coding:
            # content_encoding on a watch: the header only, for a client to refuse at the head.
            headers.append(("Content-Encoding", self.force_coding))
        self._write(self._head(200, headers, req.keep_alive))

    # ------------------------------------------------------------ one request

    def handle(self, req):
        """Serve one request; True to keep the connection for the next one."""
        self._reset_response()
        self.nreq += 1
        st = self.state
        is_watch = GO_BOOL.get(req.query.get("watch", ""), False)
        entry = st.log_request({
            "time": time.time(), "method": req.method, "path": req.path, "query": req.query,
            "raw_query": req.raw_query, "status": None, "bytes": 0, "watch": is_watch,
            "conn": self.cid, "conn_request": self.nreq, "tls": self.t.version,
            "user_agent": req.headers.get("user-agent"), "auth": None, "faults": [],
            "accept_encoding": req.headers.get("accept-encoding"), "gzip": False,
            "events": 0, "duration": None, "done": False})
        faults = st.take_faults(req.target, is_watch, req.headers.get("user-agent"))
        entry["faults"] = [f["kind"] for f in faults]
        for f in faults:
            if f["kind"] == "close_after":
                self.budget = f["bytes"]
                self.cut_mid_record = f.get("mid_record", True)
                self.cut_reset = bool(f.get("reset", False))
            elif f["kind"] == "pause_after":
                self.pause_at = (f["bytes"], f["seconds"])
            elif f["kind"] == "slow":
                self.slow = (f["bytes"], f["rate"], f["piece"])
            elif f["kind"] == "content_encoding":
                self.force_coding = f.get("value", "gzip")
            elif f["kind"] == "bad_gzip":
                self.bad_gzip = f.get("mode", "corrupt")
            elif f["kind"] == "short_body":
                self.short_body = f["bytes"]
            elif f["kind"] == "random_chunks":
                self.chunker = RandomChunker(f.get("seed", self.server.seed), f.get("min", 1), f.get("max", 64))
        t0 = time.monotonic()
        keep = req.keep_alive
        try:
            keep = self.dispatch(req, entry, faults, is_watch) and keep
        except Cut:
            keep = False
            self.abrupt = True
        except (OSError, ssl.SSLError):
            keep = False
            raise
        finally:
            st.log_done(entry, status=self.code, bytes=self.sent, done=True, gzip=self.gzipped,
                        duration=round(time.monotonic() - t0, 6))
            if self.server.verbose:
                log("conn %d #%d %s %s -> %s (%d bytes)" % (self.cid, self.nreq, req.method, req.target,
                                                            self.code, self.sent))
        if self.budget is not None:       # close_after larger than the response: close after it
            self.abrupt = True
            return False
        return keep

    def dispatch(self, req, entry, faults, is_watch):
        st = self.state
        for f in faults:
            if f["kind"] == "stall":
                if not self.sleep(f["seconds"]):
                    return False
        for f in faults:
            if f["kind"] == "status":
                code = f["code"]
                stt = canned_status(code, None, f.get("retry_after"), f.get("message"), f.get("reason"))
                if f.get("too_large"):
                    try:
                        want = int(req.query.get("resourceVersion", ""))
                    except ValueError:
                        want = st.rv + 1000
                    stt = kstore.status_too_large_variant(f["too_large"], want, st.rv)
                    stt["code"] = code
                    if f.get("retry_after") is not None:
                        # 0: no retryAfterSeconds and no Retry-After header.
                        stt.setdefault("details", {})["retryAfterSeconds"] = f["retry_after"]
                if code == 410 and "continue" in req.query and not f.get("message"):
                    stt["message"] = kstore.MSG_CONTINUE_EXPIRED
                self.send_status(req, stt)
                return True
        if req.path not in PUBLIC_PATHS and st.settings["require_auth"]:
            user = self.authenticate(req)
            if user is None:
                self.send_status(req, status_unauthorized())
                return True
            entry["auth"] = user
        if req.method != "GET":
            self.send_status(req, status(405, "MethodNotAllowed",
                                         "the server does not allow this method on the requested resource",
                                         {}))
            return True
        accept = req.headers.get("accept", "")
        if accept and "json" not in accept and "*/*" not in accept:
            self.send_status(req, status(406, "NotAcceptable",
                                         "the server was unable to respond with a content type that the "
                                         "client supports"))
            return True
        try:
            return self.route(req, entry, faults, is_watch)
        except ApiError as e:
            if self.code is not None:
                raise Cut("error after the response started") from e
            self.send_status(req, e.status, list(e.headers.items()))
            return True

    def authenticate(self, req):
        if self.t.peer_cn:
            return "cert:" + self.t.peer_cn
        auth = req.headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and self.state.check_token(auth[7:].strip()):
            return "token"
        return None

    def sleep(self, seconds):
        """Sleep, waking early if the server stops. False if it did."""
        return not self.server.stopping.wait(seconds)

    # ------------------------------------------------------------ routing

    def not_found(self, req):
        self.send_status(req, status(404, "NotFound", "the server could not find the requested resource", {}))
        return True

    def route(self, req, entry, faults, is_watch):
        st = self.state
        parts = [p for p in req.path.split("/") if p]
        if req.path in ("/healthz", "/livez", "/readyz"):
            self.send_body(req, 200, b"ok", ctype="text/plain; charset=utf-8")
            return True
        if req.path == "/version":
            self.send_json(req, 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0-kreflect-test",
                                      "gitCommit": "0" * 40, "gitTreeState": "clean",
                                      "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
                                      "compiler": "gc", "platform": "linux/amd64"})
            return True
        if not parts:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
            for g, vs in st.groups().items():
                paths += ["/apis/" + g] + ["/apis/%s/%s" % (g, v) for v in vs]
            self.send_json(req, 200, {"paths": sorted(paths)})
            return True
        if parts[0] == "api":
            if len(parts) == 1:
                self.send_json(req, 200, {"kind": "APIVersions", "versions": ["v1"],
                                          "serverAddressByClientCIDRs": [
                                              {"clientCIDR": "0.0.0.0/0",
                                               "serverAddress": "127.0.0.1:%d" % self.server.port}]})
                return True
            if parts[1] != "v1":
                return self.not_found(req)
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis":
            groups = st.groups()
            if len(parts) == 1:
                self.send_json(req, 200, {"kind": "APIGroupList", "apiVersion": "v1",
                                          "groups": [self._group(g, vs) for g, vs in groups.items()]})
                return True
            if parts[1] not in groups:
                return self.not_found(req)
            if len(parts) == 2:
                self.send_json(req, 200, {"kind": "APIGroup", "apiVersion": "v1",
                                          **self._group(parts[1], groups[parts[1]])})
                return True
            if parts[2] not in groups[parts[1]]:
                return self.not_found(req)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return self.not_found(req)
        if not rest:
            res = [t.discovery() for t in st.types.values() if t.group == group and t.version == version]
            body = {"kind": "APIResourceList"}
            if group:
                body["apiVersion"] = "v1"
            body.update(groupVersion="%s/%s" % (group, version) if group else version, resources=res)
            self.send_json(req, 200, body)
            return True
        ns = name = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            if len(rest) > 4:
                return self.not_found(req)
            ns, plural = rest[1], rest[2]
            name = rest[3] if len(rest) == 4 else None
        elif len(rest) <= 2:
            plural = rest[0]
            name = rest[1] if len(rest) == 2 else None
        else:
            return self.not_found(req)
        rtype = st.type_for(group, version, plural)
        if rtype is None or (ns is not None and not rtype.namespaced) or (
                rtype.namespaced and name is not None and ns is None):
            return self.not_found(req)
        if name is not None and not is_watch:
            rec = st.get(rtype, ns, name)
            self.send_body(req, 200, rec.full + b"\n")
            return True
        opts = Options(req.query, is_watch, st.settings["watch_list"], rtype)
        opts.filter.ns = ns
        opts.filter.name = name
        if is_watch:
            return WatchSession(self, req, entry, rtype, opts, faults).run()
        rv, items, token, remaining = st.list(rtype, opts.filter, opts.rv, opts.rvm, opts.limit, opts.cont)
        meta = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        body = b"".join((b'{"kind":"', rtype.list_kind.encode(), b'","apiVersion":"', rtype.api_version.encode(),
                         b'","metadata":', dumps(meta), b',"items":[', b",".join(items), b"]}\n"))
        if items and any(f["kind"] == "duplicate_item" for f in faults):
            # The first item again at the end: what a corrupt body can decode to.
            items = items + items[:1]
        body = b"".join((b'{"kind":"', rtype.list_kind.encode(), b'","apiVersion":"', rtype.api_version.encode(),
                         b'","metadata":', dumps(meta), b',"items":[', b",".join(items), b"]}\n"))
        entry["items"] = len(items)
        self.send_body(req, 200, body, is_list=True)
        return True

    @staticmethod
    def _group(g, versions):
        vs = [{"groupVersion": "%s/%s" % (g, v), "version": v} for v in versions]
        return {"name": g, "versions": vs, "preferredVersion": vs[0]}


# =========================================================================== watch

class _EndClean(Exception):
    """End the stream with the terminating chunk; the connection stays usable."""


class _Abort(Exception):
    """End the stream without the terminating chunk and close the connection."""


def cut_line(line, at):
    """An event line broken the way a truncating proxy or a buggy server breaks
    one, still ended by its newline: cut inside a string ("string": in the
    object's resourceVersion), inside a number ("number": the first one with
    two digits or more, else after the first digit; the line must have one),
    just before the newline ("newline": the last '}' missing), or whole with a
    raw control byte inside a string ("control": in the object's name)."""
    body = line[:-1] if line.endswith(b"\n") else line
    if at == "newline":
        return body[:-1] + b"\n"
    if at == "string":
        i = body.find(b'"resourceVersion":"')
        i = i + len(b'"resourceVersion":"') + 1 if i >= 0 else len(body) // 2
        return body[:i] + b"\n"
    if at == "control":
        i = body.find(b'"name":"') + len(b'"name":"')
        return body[:i + 1] + b"\x01" + body[i + 1:] + b"\n"
    # number: outside strings, the first run of digits
    in_str = esc = False
    first = None
    for i, ch in enumerate(body):
        c = chr(ch)
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c.isdigit():
            j = i
            while j < len(body) and chr(body[j]).isdigit():
                j += 1
            if j - i >= 2:
                return body[:i + (j - i) // 2] + b"\n"
            if first is None:
                first = i + 1
    if first is None:
        raise ValueError("cut_event at number: the event has no number")
    return body[:first] + b"\n"


class WatchSession:
    """One watch stream, run on its connection's thread."""

    BATCH = 256

    def __init__(self, conn, req, entry, rtype, opts, faults):
        self.c, self.req, self.entry, self.rtype, self.opts = conn, req, entry, rtype, opts
        self.st = conn.state
        self.flt = opts.filter
        self.wfaults = sorted((f for f in faults if f["kind"] in ("stall_watch", "garbage", "bad_chunk",
                                                                  "watch_error", "end_watch", "cut_event")),
                              key=lambda f: f["after_events"])
        self.iee = next((f for f in faults if f["kind"] == "initial_events_end"), None)
        self.batch = []
        self.events = 0
        self.cursor = 0
        self.cut, self.cut_left = None, 0     # a cut_event fault in force
        self.drop_gen = self.st.drop_gen

    def run(self):
        st, c = self.st, self.c
        now = time.monotonic()
        timeout = self.opts.timeout
        if timeout is None or timeout <= 0:
            m = st.settings["min_request_timeout"]
            timeout = st.rng.uniform(m, 2 * m)
        self.start, self.deadline = now, now + timeout
        self.last_bookmark = now
        self.pre_sent = False
        bench = st.take_bench(self.req.target, self.rtype)
        if bench is None:
            begin = st.watch_begin(self.rtype, self.flt, self.opts.rv, self.opts.sie,
                                   annotate=bool(self.opts.sie) and self.opts.bookmarks)
        wid = st.add_watch({"conn": c.cid, "path": self.req.path, "query": self.req.query,
                            "started": time.time()})
        c.watching = True
        try:
            c.start_stream(self.req)
            if bench is not None:
                self.entry["bench"] = bench["count"]
                self._fire_faults()
                buf = memoryview(bench["buffer"])
                for i in range(0, len(buf), 1 << 20):
                    c._write(buf[i:i + (1 << 20)])
                self.events += bench["count"]
                self.entry["events"] = self.events
                self.entry["bytes"] = c.sent
                if bench["end"] == "close":
                    raise _EndClean()
                self.cursor = bench["last_rv"]
            elif begin.error is not None:
                self._fire_faults()
                self.emit(error_line(begin.error))
                raise _EndClean()
            else:
                self.cursor = begin.cursor
                self._fire_faults()
                for rec in begin.initial:
                    self.emit(rec.added_line())
                if begin.annotate:
                    self.initial_events_end()
                self.flush()
            self.loop()
        except _EndClean:
            self._flush_batch()
            c.end_chunks()
            return True
        except _Abort:
            c.abrupt = True
            return False
        finally:
            c.watching = False
            st.remove_watch(wid)
            self.entry["events"] = self.events
        return True

    def initial_events_end(self):
        """The annotated bookmark after the initial events; an initial_events_end
        fault can delay it (live events first), change its value, or drop it."""
        value = True
        if self.iee is not None:
            delay = float(self.iee.get("delay", 0) or 0)
            if delay > 0:
                self.flush()
                self.loop(until=time.monotonic() + delay, bookmarks=False)
            value = self.iee.get("value", "true") if "value" in self.iee else True
            if value is None:
                return
        self.emit(bookmark_line(self.rtype, self.cursor, initial_events_end=value))
        self.last_bookmark = time.monotonic()

    # ------------------------------------------------------------ loop

    def loop(self, until=None, bookmarks=True):
        """Live events (and bookmarks) until the deadline, or until `until`."""
        st = self.st
        while True:
            self.check_abort()
            now = time.monotonic()
            if now >= self.deadline:
                raise _EndClean()
            if until is not None and now >= until:
                return
            due = self.next_bookmark() if bookmarks else None
            if due is not None and now >= due:
                if now >= self.deadline - 2:
                    self.pre_sent = True
                self.last_bookmark = now
                if self.cursor <= st.rv:
                    self.emit(bookmark_line(self.rtype, self.cursor))
                    self.flush()
                continue
            with st.cond:
                evs = st.events_after(self.cursor)
                if evs == []:
                    wake = min(self.deadline, due if due is not None else self.deadline, now + POLL,
                               until if until is not None else self.deadline)
                    st.cond.wait(max(0.0, wake - now))
                    evs = st.events_after(self.cursor)
            if evs is None:
                # The history was compacted past this watcher (it fell behind):
                # end it, like the cacher ends an unresponsive watcher.
                raise _EndClean()
            for ev in evs:
                self.cursor = ev.rv
                line = self.flt.convert(ev)
                if line is not None:
                    self.emit(line)
            self.flush()

    def next_bookmark(self):
        if not self.opts.bookmarks:
            return None
        interval = self.st.settings["bookmark_interval"]
        if interval <= 0:
            return None
        due = self.last_bookmark + interval
        if self.st.settings["pretimeout_bookmark"] and not self.pre_sent:
            pre = self.deadline - 2
            if pre > self.start:
                due = min(due, pre)
        return due

    def check_abort(self):
        if self.c.server.stopping.is_set() or self.st.drop_gen != self.drop_gen or self.c.t.peer_closed():
            raise _Abort()

    # ------------------------------------------------------------ output

    def emit(self, line):
        self._fire_faults()
        if self.cut is not None and not line.startswith(b'{"type":"BOOKMARK"'):
            line = cut_line(line, self.cut["at"])
            self.cut_left -= 1
            if self.cut_left <= 0:
                self.cut = None
        self.batch.append(line)
        self.events += 1
        if len(self.batch) >= self.BATCH:
            self.flush()

    def flush(self):
        self._flush_batch()
        self._fire_faults()

    def _flush_batch(self):
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        if self.c.chunker:
            self.c.write_chunk(b"".join(batch))
        else:
            self.c._write(b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in batch))
        self.entry["events"] = self.events
        self.entry["bytes"] = self.c.sent       # an open watch's bytes so far

    def _fire_faults(self):
        while self.wfaults and self.wfaults[0]["after_events"] <= self.events:
            f = self.wfaults.pop(0)
            self._flush_batch()
            self.apply_fault(f)

    def apply_fault(self, f):
        c, kind = self.c, f["kind"]
        if kind == "garbage":
            line = f.get("line", "this is not JSON {\n")
            c.write_chunk(line.encode() if isinstance(line, str) else line)
        elif kind == "bad_chunk":
            text = f.get("text", "zz")
            c._write(b"%s\r\n{\"type\":\"MODIFIED\"" % text.encode())
            self.stall(None)
        elif kind == "stall_watch":
            self.stall(f.get("seconds"))
        elif kind == "end_watch":
            raise _EndClean()
        elif kind == "cut_event":
            self.cut, self.cut_left = f, f["events"]
        elif kind == "watch_error":
            if "object" in f:
                obj = f["object"]
            else:
                obj = canned_status(f.get("code", 410), self.rtype, f.get("retry_after"), f.get("message"),
                                    f.get("reason"))
                if obj["code"] == 410 and not f.get("message"):
                    obj["message"] = "too old resource version: %d (%d)" % (self.cursor, self.st.compacted_rv)
                if obj["code"] == 504 and not f.get("message"):
                    obj = kstore.status_too_large(self.cursor + 1000, self.st.rv)
            c.write_chunk(b'{"type":"ERROR","object":' + dumps(obj) + b"}\n")
            self.events += 1
            if f.get("close", True):
                raise _EndClean()

    def stall(self, seconds):
        """Send nothing for `seconds` (None: until the client goes away)."""
        self.entry.setdefault("stalled_at", time.time())   # when the silence began (the log shows it)
        end = None if seconds is None else time.monotonic() + float(seconds)
        while end is None or time.monotonic() < end:
            self.check_abort()
            with self.st.cond:
                self.st.cond.wait(min(POLL, end - time.monotonic()) if end else POLL)
        self.check_abort()


# =========================================================================== the API server

class ApiServer:
    def __init__(self, state, tls_ctx, seed=None, idle_timeout=90.0, verbose=False):
        self.state, self.tls_ctx, self.seed = state, tls_ctx, seed
        self.idle_timeout, self.verbose = idle_timeout, verbose
        self.stopping = threading.Event()
        self.conns = {}
        self.conns_lock = threading.Lock()
        self.next_cid = 0
        self.listeners = []
        self.port = None
        self.ipv6 = False
        self.pf_uids = (str(uuid.uuid4()), str(uuid.uuid4()))

    def listen(self, port):
        s4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s4.bind(("127.0.0.1", port))
        s4.listen(256)
        self.port = s4.getsockname()[1]
        self.listeners = [s4]
        try:
            s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s6.bind(("::1", self.port))
            s6.listen(256)
            self.listeners.append(s6)
            self.ipv6 = True
        except OSError:
            pass
        threading.Thread(target=self._accept_loop, name="accept", daemon=True).start()
        return self.port

    def _accept_loop(self):
        while not self.stopping.is_set():
            try:
                ready, _, _ = select.select(self.listeners, [], [], POLL)
            except (OSError, ValueError):
                return
            for ls in ready:
                try:
                    sock, addr = ls.accept()
                except OSError:
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with self.conns_lock:
                    self.next_cid += 1
                    conn = ApiConnection(self, sock, addr, self.next_cid)
                    self.conns[conn.cid] = conn
                threading.Thread(target=conn.run, name="conn-%d" % conn.cid, daemon=True).start()

    def forget(self, conn):
        with self.conns_lock:
            self.conns.pop(conn.cid, None)

    def connections(self):
        with self.conns_lock:
            return [{"id": c.cid, "peer": "%s:%d" % c.addr[:2], "requests": c.nreq, "watching": c.watching,
                     "tls": c.t.version, "client_cert": c.t.peer_cn} for c in self.conns.values()]

    def drop_watches(self):
        """Abruptly end every open watch stream (no terminating chunk)."""
        with self.state.lock:
            self.state.drop_gen += 1
            self.state.cond.notify_all()
        with self.conns_lock:
            victims = [c for c in self.conns.values() if c.watching]
        for c in victims:
            c.t.shutdown()
        return len(victims)

    def stop(self):
        self.stopping.set()
        for ls in self.listeners:
            try:
                ls.close()
            except OSError:
                pass
        with self.state.lock:
            self.state.cond.notify_all()
        with self.conns_lock:
            conns = list(self.conns.values())
        for c in conns:
            c.t.shutdown()


# =========================================================================== control API

class Control:
    """The control API's operations; each takes a dict of parameters."""

    def __init__(self, app):
        self.app = app
        self.state = app.state

    def _rtype(self, p):
        if "resource" not in p:
            raise ValueError('"resource" is required')
        return self.state.find_type(p["resource"])

    def state_(self, p):
        rtype = self.state.find_type(p["resource"]) if p.get("resource") else None
        def flag(name):
            return str(p.get(name, "")).lower() in ("1", "true", "yes")
        return self.state.snapshot_state(rtype, p.get("namespace"), flag("objects") or flag("full"),
                                         flag("summary"))

    def object_(self, p):
        rec = self.state.get(self._rtype(p), p.get("namespace", "default"), p["name"])
        return json.loads(rec.full)

    def create(self, p):
        rtype = self._rtype(p)
        body = p.get("object") or {}
        md = body.get("metadata") or {}
        name = p.get("name") or md.get("name")
        ns = p.get("namespace") or md.get("namespace")
        rec = self.state.create(rtype, ns, name, p, manager=p.get("manager", "kubectl-create"),
                                upsert=bool(p.get("upsert")))
        return {"resourceVersion": str(rec.rv), "uid": rec.uid, "object": json.loads(rec.full)}

    def update(self, p):
        rtype = self._rtype(p)
        rec, changed = self.state.update(rtype, p.get("namespace"), p["name"], p,
                                         manager=p.get("manager", "kubectl-edit"))
        return {"resourceVersion": str(rec.rv), "uid": rec.uid, "changed": changed,
                "object": json.loads(rec.full)}

    def delete(self, p):
        if "names" in p:
            # A burst: every name, one write each, in one call (no round trip between them).
            rv = None
            for name in p["names"]:
                rv = self.state.delete(self._rtype(p), p.get("namespace"), name).rv
            return {"deleted": len(p["names"]), "resourceVersion": str(rv) if rv is not None else None}
        rec = self.state.delete(self._rtype(p), p.get("namespace"), p["name"])
        return {"resourceVersion": str(rec.rv), "uid": rec.uid}

    def bulk(self, p):
        t0 = time.monotonic()
        r = self.state.bulk_create(self._rtype(p), p.get("namespace"), int(p.get("count", 1)),
                                   int(p.get("size", 1024)), p.get("name_pattern") or p.get("pattern"),
                                   int(p.get("start", 0)), p.get("labels"), p.get("annotations"))
        r["seconds"] = round(time.monotonic() - t0, 3)
        return r

    def touch(self, p):
        return self.state.touch(self._rtype(p), p.get("namespace"), p.get("selector", ""),
                                int(p.get("count", 1)))

    def compact(self, p):
        return self.state.compact(p.get("rv"))

    def rotate_token(self, p):
        tok = self.state.rotate_token()
        write_atomic(self.app.token_file, tok + "\n", 0o600)
        return {"token": tok, "token_file": self.app.token_file}

    def settings(self, p):
        upd = {k: v for k, v in p.items() if k in kstore.DEFAULT_SETTINGS}
        unknown = [k for k in p if k not in kstore.DEFAULT_SETTINGS]
        if unknown:
            raise ValueError("unknown setting(s): %s (known: %s)" % (", ".join(unknown),
                                                                    ", ".join(sorted(kstore.DEFAULT_SETTINGS))))
        if upd:
            self.state.set_settings(upd)
        return dict(self.state.settings)

    def fault(self, p):
        if p.get("kind") == "drop_watches":
            return {"dropped": self.app.api.drop_watches()}
        return self.state.add_fault(p)

    def faults(self, p):
        with self.state.lock:
            return {"faults": [dict(f) for f in self.state.faults],
                    "bench_pending": self.state.bench is not None}

    def clear_faults(self, p):
        return {"cleared": self.state.clear_faults()}

    def drop_watches(self, p):
        return {"dropped": self.app.api.drop_watches()}

    def bench(self, p):
        rtype = self.state.find_type(p.get("resource", "configmaps"))
        return self.state.bench_prepare(rtype, p.get("namespace", "default"), p.get("name", "bench"),
                                        int(p.get("count", 1000)), int(p.get("size", 1024)),
                                        int(p.get("chunk_bytes", 65536)), bool(p.get("per_event_chunks")),
                                        p.get("end", "close"), p.get("match"))

    def register(self, p):
        t = self.state.register(p.get("group"), p.get("version"), p.get("plural"), p.get("kind"),
                                p.get("singular"), bool(p.get("namespaced", True)), p.get("shortNames", ()))
        return {"id": t.id, "apiVersion": t.api_version, "kind": t.kind, "namespaced": t.namespaced}

    def log_(self, p):
        return {"entries": self.state.get_log(int(p.get("since", 0)))}

    def clear_log(self, p):
        return {"cleared": self.state.clear_log()}

    def wait_watches(self, p):
        n, match = int(p.get("count", 1)), p.get("match")
        st = self.state
        ok = st.wait_meta(lambda: sum(1 for w in st.watches.values()
                                      if not match or match in w["path"] + "?" + urllib.parse.urlencode(w["query"]))
                          >= n, float(p.get("timeout", 10)))
        if not ok:
            raise TimeoutError("fewer than %d open watches" % n)
        with st.lock:
            return {"watches": list(st.watches.values())}

    def wait_log(self, p):
        match, n, since = p.get("match", ""), int(p.get("count", 1)), int(p.get("since", 0))
        done = bool(p.get("done", False))
        st = self.state

        def hits():
            h = [e for e in st.log if e["id"] > since and match in e["path"] + "?" + e["raw_query"]
                 and (e["done"] or not done)]
            return h if len(h) >= n else None
        h = st.wait_meta(hits, float(p.get("timeout", 10)))
        if h is None:
            raise TimeoutError("fewer than %d requests matching %r" % (n, match))
        return {"entries": json.loads(json.dumps(h))}

    def connections(self, p):
        return {"connections": self.app.api.connections()}

    ROUTES = {
        "/healthz": lambda self, p: {"ok": True},
        "/state": state_, "/object": object_, "/create": create, "/update": update, "/delete": delete,
        "/bulk": bulk, "/touch": touch, "/compact": compact, "/token/rotate": rotate_token,
        "/settings": settings, "/fault": fault, "/faults": faults, "/faults/clear": clear_faults,
        "/drop-watches": drop_watches, "/bench": bench, "/register": register, "/log": log_,
        "/log/clear": clear_log, "/wait-watches": wait_watches, "/wait-log": wait_log,
        "/connections": connections,
    }


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kreflect-test-apiserver-control"

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            log("control: " + fmt % args)

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def _dispatch(self):
        path, _, rawq = self.path.partition("?")
        params = {k: v[0] for k, v in urllib.parse.parse_qs(rawq, keep_blank_values=True).items()}
        code, result = 200, None
        try:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
                params.update(body)
            fn = Control.ROUTES.get(path.rstrip("/") or "/")
            if fn is None:
                code, result = 404, {"error": "no such control endpoint %s" % path,
                                     "endpoints": sorted(Control.ROUTES)}
            else:
                result = fn(self.server.control, params)
        except ApiError as e:
            code, result = e.code, {"error": e.status.get("message"), "status": e.status}
        except KeyError as e:
            code, result = 404, {"error": str(e.args[0]) if e.args else "not found"}
        except FileExistsError as e:
            code, result = 409, {"error": str(e)}
        except TimeoutError as e:
            code, result = 408, {"error": str(e)}
        except (ValueError, TypeError) as e:
            code, result = 400, {"error": str(e)}
        data = json.dumps(result, indent=None).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ControlServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port, app):
        self.app = app
        self.control = Control(app)
        super().__init__(("127.0.0.1", port), ControlHandler)


# =========================================================================== main

class App:
    pass


def kubeconfig_text(server, ca, token_file, client_crt, client_key):
    cluster = "    server: %s\n" % server + ("    certificate-authority: %s\n" % ca if ca else "")
    users = "- name: token\n  user:\n    tokenFile: %s\n" % token_file
    contexts = "- name: token\n  context:\n    cluster: kreflect-test\n    user: token\n    namespace: default\n"
    if client_crt:
        users += "- name: cert\n  user:\n    client-certificate: %s\n    client-key: %s\n" % (client_crt, client_key)
        contexts += "- name: cert\n  context:\n    cluster: kreflect-test\n    user: cert\n    namespace: default\n"
    return ("apiVersion: v1\nkind: Config\nclusters:\n- name: kreflect-test\n  cluster:\n" + cluster
            + "users:\n" + users + "contexts:\n" + contexts + "current-context: token\n")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, help="certificates, token, kubeconfig go here")
    ap.add_argument("--port", type=int, default=0, help="API port on 127.0.0.1 (and ::1); 0 = pick one")
    ap.add_argument("--control-port", type=int, default=0, help="control API port on 127.0.0.1; 0 = pick one")
    ap.add_argument("--ready-file", help="JSON written once both ports listen")
    ap.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds; 0 = never")
    ap.add_argument("--seed", type=int, default=None, help="seeds uids, tokens, timeouts, random chunking")
    ap.add_argument("--plain-http", action="store_true", help="no TLS (tokens still required)")
    ap.add_argument("--key-type", choices=("ec", "rsa"), default="ec")
    ap.add_argument("--tls-version", choices=("any", "1.2", "1.3"), default="any")
    ap.add_argument("--no-watch-list", action="store_true", help="behave as if the WatchList gate were off")
    ap.add_argument("--initial", type=int, default=0, metavar="N",
                    help="create N configmaps cm-00000.. in namespace default at start")
    ap.add_argument("--initial-size", type=int, default=256, help="data bytes of each --initial configmap")
    ap.add_argument("--history", type=int, default=10000, help="events kept before compaction")
    ap.add_argument("--too-large-wait", type=float, default=3.0,
                    help="seconds a too-new resourceVersion is waited for before 504")
    ap.add_argument("--start-rv", type=int, default=100, help="the first resourceVersion")
    ap.add_argument("--idle-timeout", type=float, default=90.0, help="keep-alive idle timeout, seconds")
    ap.add_argument("--crd", action="append", default=[], metavar="PLURAL.GROUP/VERSION=Kind",
                    help="register a namespaced custom resource, e.g. widgets.example.com/v1=Widget")
    ap.add_argument("--no-auth", action="store_true", help="accept unauthenticated requests")
    ap.add_argument("--verbose", "-v", action="store_true", help="log every request to stderr")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    t_start = time.monotonic()
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    state = kstore.Store(seed=args.seed, history_cap=args.history, start_rv=args.start_rv,
                         settings={"bookmark_interval": float(args.bookmark_interval),
                                   "watch_list": not args.no_watch_list,
                                   "too_large_wait": float(args.too_large_wait),
                                   "require_auth": not args.no_auth})
    app = App()
    app.state, app.verbose = state, args.verbose
    certs = ensure_certs(workdir, args.key_type)
    tls_ctx = None if args.plain_http else make_tls_context(certs, args.tls_version)
    app.token_file = os.path.join(workdir, "token")
    write_atomic(app.token_file, state.token + "\n", 0o600)
    for spec in args.crd:
        try:
            left, kind = spec.split("=", 1)
            pg, version = left.split("/", 1)
            plural, group = pg.split(".", 1)
        except ValueError:
            sys.exit("--crd wants PLURAL.GROUP/VERSION=Kind, got %r" % spec)
        state.register(group, version, plural, kind)
    if args.initial:
        state.bulk_create(state.find_type("configmaps"), "default", args.initial, args.initial_size)

    app.api = ApiServer(state, tls_ctx, seed=args.seed, idle_timeout=args.idle_timeout, verbose=args.verbose)
    port = app.api.listen(args.port)
    ctl = ControlServer(args.control_port, app)
    threading.Thread(target=ctl.serve_forever, kwargs={"poll_interval": 0.1}, name="control",
                     daemon=True).start()
    scheme = "http" if args.plain_http else "https"
    server_url = "%s://127.0.0.1:%d" % (scheme, port)
    kubeconfig = os.path.join(workdir, "kubeconfig")
    write_atomic(kubeconfig, kubeconfig_text(server_url, None if args.plain_http else certs["ca_crt"],
                                             app.token_file, certs["client_crt"], certs["client_key"]))
    ready = {"port": port, "control_port": ctl.server_address[1], "ca": certs["ca_crt"],
             "token_file": app.token_file, "client_cert": certs["client_crt"], "client_key": certs["client_key"],
             "server": server_url, "pid": os.getpid(), "workdir": workdir, "kubeconfig": kubeconfig,
             "control": "http://127.0.0.1:%d" % ctl.server_address[1], "plain_http": args.plain_http,
             "key_type": args.key_type}
    if app.api.ipv6:
        ready["server6"] = "%s://[::1]:%d" % (scheme, port)
    if args.ready_file:
        write_atomic(args.ready_file, json.dumps(ready, indent=1) + "\n")
    log("listening on %s, control on %s (ready in %.2fs)" % (server_url, ready["control"],
                                                              time.monotonic() - t_start))

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    app.api.stop()
    threading.Thread(target=ctl.shutdown, daemon=True).start()
    ctl.server_close()
    if args.ready_file:
        try:
            os.unlink(args.ready_file)
        except OSError:
            pass
    log("stopped")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
