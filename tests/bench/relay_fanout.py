#!/usr/bin/env python3
"""Fan-out of one kreflect relay: N watchers on its --listen, M changes upstream.

    python3 tests/bench/relay_fanout.py BINARY N M

BINARY mirrors configmaps from the test API server (tests/apiserver) and serves
them on a loopback --listen; N plain HTTP watches on it resume from the
server's resourceVersion; then M updates go to the server, one after the other.
Prints one line: the relay's CPU time (user + system, /proc, 10 ms ticks) per
event per watcher, its resident memory before the watchers and with them, and
the time from the server accepting the last update to the last watcher
reading it. More than 60 watchers need a build with room for them:

    make O=build/x86_64-conns512 \
      EXTRA_CPPFLAGS="-DKR_SERVE_MAX_CONNS=512 -DKR_PORT_POLL_MAX=1024" target-bin
"""
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apiserver"))
from control import ServerProcess
binary, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
wd = tempfile.mkdtemp()
srv = ServerProcess(["--seed", "1"], workdir=wd, timeout=60)   # makes its certificates
ctl = srv.control
r = srv.ready
for i in range(10):
    ctl.create("configmaps", "default", "cm-%d" % i, data={"k": "v"})
s = socket.socket(); s.bind(("127.0.0.1",0)); port = s.getsockname()[1]; s.close()
kr = subprocess.Popen([binary,"--server",r["server"],"--certificate-authority",r["ca"],"--token-file",r["token_file"],
    "--listen","127.0.0.1:%d"%port,"--listen-max-conns",str(min(512, n + 4)),"configmaps"],
    stdout=subprocess.DEVNULL, stderr=open(wd + "/kr.err", "w"))
time.sleep(1.5)
def cpu():
    f = open("/proc/%d/stat" % kr.pid).read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def rss():
    for l in open("/proc/%d/status"%kr.pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
rss0 = rss()
socks = []
for i in range(n):
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" + ctl.rv().__str__().encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    socks.append(c)
time.sleep(1)
for c in socks:
    c.setblocking(False)
    try:
        while c.recv(65536): pass
    except BlockingIOError:
        pass
rss1 = rss()
want = b"v%d\"" % (m - 1)
seen = {c.fileno(): b"" for c in socks}
done = set()
c0 = cpu()

for j in range(m):
    ctl.update("configmaps", "default", "cm-%d" % (j % 10), data={"k": "v%d" % j})
last_update = time.monotonic()
poller = select.poll()
for c in socks:
    poller.register(c, select.POLLIN)
fds = {c.fileno(): c for c in socks}
while len(done) < n and time.monotonic() - last_update < 30:
    for fd, ev in poller.poll(1000):
        try:
            b = fds[fd].recv(1 << 20)
        except BlockingIOError:
            continue
        seen[fd] = (seen[fd] + b)[-4096:]
        if want in seen[fd] and fd not in done:
            done.add(fd)
t_last = time.monotonic() - last_update
c1 = cpu()
print("watchers %4d events %d: relay CPU %.3f s = %.1f us per event per watcher; RSS %d KiB idle, %d KiB with watchers (%.1f KiB each); last watcher saw the last change %.0f ms after the upstream accepted it; %d/%d complete" % (
    n, m, c1 - c0, (c1 - c0) * 1e6 / (m * n), rss0, rss1, (rss1 - rss0) / max(n, 1), t_last * 1000, len(done), n))
for c in socks:
    c.close()
kr.terminate()
kr.wait()
srv.stop()
shutil.rmtree(wd, ignore_errors=True)
