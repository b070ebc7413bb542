#!/usr/bin/env python3
"""A tiny HTTP CONNECT proxy for kreflect's transport tests (stdlib only).

Listens on 127.0.0.1 (port 0), prints "PORT <n>" on stdout, and for every
CONNECT logs one line "CONNECT <target> -> <status>" to --log. Then it
relays bytes both ways until either side closes.

  --user U --password P   require "Proxy-Authorization: Basic base64(U:P)"
                          (else 407 with Proxy-Authenticate)
  --refuse                answer every CONNECT with 403 Forbidden
  --junk                  answer 200, then send bytes before the client spoke
  --silent                read the CONNECT, never answer
  --lifetime S            exit after S seconds (default 300)
"""
import argparse
import base64
import select
import socket
import sys
import threading
import time

log_lock = threading.Lock()


def log(path, line):
    with log_lock:
        with open(path, "a") as f:
            f.write(line + "\n")


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None, b""
        data += chunk
        if len(data) > 65536:
            return None, b""
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def relay(a, b):
    socks = [a, b]
    try:
        while True:
            r, _, _ = select.select(socks, [], [], 600)
            if not r:
                return
            for s in r:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        return
    finally:
        for s in socks:
            try:
                s.close()
            except OSError:
                pass


def handle(conn, args):
    try:
        head, rest = read_head(conn)
        if head is None:
            conn.close()
            return
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if len(parts) != 3 or parts[0] != "CONNECT":
            status = "405 Method Not Allowed"
        elif args.refuse:
            status = "403 Forbidden"
        elif args.user is not None:
            want = "Basic " + base64.b64encode(
                ("%s:%s" % (args.user, args.password or "")).encode()).decode()
            status = "200 Connection established" if headers.get(
                "proxy-authorization") == want else "407 Proxy Authentication Required"
        else:
            status = "200 Connection established"
        target = parts[1] if len(parts) > 1 else "?"
        if args.silent:
            status = "000 silent"
        log(args.log, "CONNECT %s -> %s ua=%s" % (target, status.split(" ")[0],
                                                   headers.get("user-agent", "")))
        if args.silent:
            time.sleep(30)
            conn.close()
            return
        if args.junk and status.startswith("200"):
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\nJUNK")
            time.sleep(2)
            conn.close()
            return
        if not status.startswith("200"):
            body = b"proxy says no\n"
            extra = "Proxy-Authenticate: Basic realm=\"test\"\r\n" if status.startswith("407") else ""
            conn.sendall(("HTTP/1.1 %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n"
                          % (status, extra, len(body))).encode() + body)
            conn.close()
            return
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        try:
            up = socket.create_connection((host, int(port)), timeout=10)
        except OSError:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        up.settimeout(None)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            up.sendall(rest)
        relay(conn, up)
    except OSError:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--refuse", action="store_true")
    ap.add_argument("--junk", action="store_true")
    ap.add_argument("--silent", action="store_true")
    ap.add_argument("--lifetime", type=float, default=300)
    args = ap.parse_args()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print("PORT %d" % srv.getsockname()[1], flush=True)
    deadline = time.time() + args.lifetime
    srv.settimeout(1)
    while time.time() < deadline:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        threading.Thread(target=handle, args=(conn, args), daemon=True).start()
    sys.exit(0)


if __name__ == "__main__":
    main()
