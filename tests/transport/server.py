#!/usr/bin/env python3
"""A scripted HTTPS/1.1 server for kreflect's transport tests (stdlib only).

The path chooses the behaviour; every request is logged as one line
"conn=<id> path=<path>" to --log, so tests can see keep-alive reuse.

  /hello             200, Content-Length body "hello world\\n"
  /chunked/N/S       200, chunked: N chunks of S bytes (byte i is i % 251)
  /tiny/N            the same body as /chunked/1/N, but the whole response is
                     written one byte per TLS record
  /stall/N           head and N body bytes, then silence (connection kept open)
  /cut/N             chunked: a chunk of 2N bytes announced, N sent, then close
  /close/N           HTTP/1.1, Connection: close, body of N bytes delimited by close
  /hello-then-close  like /hello, then the server closes the kept-alive connection

Prints "PORT <n>" on stdout once listening.
"""
import argparse
import socket
import ssl
import sys
import threading
import time

log_lock = threading.Lock()


def body(n):
    return bytes(i % 251 for i in range(n))


def chunk(data):
    return b"%x\r\n" % len(data) + data + b"\r\n"


HEAD_CHUNKED = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")


def read_request(f):
    line = f.readline(65536)
    if not line:
        return None
    while True:
        h = f.readline(65536)
        if not h or h in (b"\r\n", b"\n"):
            break
    return line.split()[1].decode()


def serve(conn, cid, logf):
    f = conn.makefile("rb")
    try:
        while True:
            path = read_request(f)
            if path is None:
                return
            with log_lock:
                logf.write("conn=%d path=%s\n" % (cid, path))
                logf.flush()
            parts = path.strip("/").split("/")
            name = parts[0]
            if name in ("hello", "hello-then-close"):
                b = b"hello world\n"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
                if name == "hello-then-close":
                    time.sleep(0.2)
                    return
            elif name == "chunked":
                n, s = int(parts[1]), int(parts[2])
                out = HEAD_CHUNKED + b"".join(chunk(body(s)) for _ in range(n)) + b"0\r\n\r\n"
                conn.sendall(out)
            elif name == "tiny":
                out = HEAD_CHUNKED + chunk(body(int(parts[1]))) + b"0\r\n\r\n"
                for i in range(len(out)):
                    conn.sendall(out[i:i + 1])
            elif name == "stall":
                conn.sendall(HEAD_CHUNKED + chunk(body(int(parts[1]))))
                # Silence until the client gives up (it must, by its deadline).
                conn.settimeout(60)
                try:
                    conn.recv(1)
                except (OSError, ssl.SSLError):
                    pass
                return
            elif name == "cut":
                n = int(parts[1])
                conn.sendall(HEAD_CHUNKED + b"%x\r\n" % (2 * n) + body(n))
                return
            elif name == "close":
                n = int(parts[1])
                conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body(n))
                return
            else:
                b = b"not found\n"
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
    except (OSError, ssl.SSLError):
        return
    finally:
        try:
            conn.close()
        except OSError:
            pass


def handshake_and_serve(ctx, raw, cid, logf):
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        raw.close()
        return
    serve(conn, cid, logf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=120, help="exit after this many seconds")
    a = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.5)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    logf = open(a.log, "w")
    end = time.time() + a.lifetime
    cid = 0
    while time.time() < end:
        try:
            raw, _ = ls.accept()
        except socket.timeout:
            continue
        cid += 1
        raw.settimeout(30)
        threading.Thread(target=handshake_and_serve, args=(ctx, raw, cid, logf), daemon=True).start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
