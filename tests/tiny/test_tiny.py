#!/usr/bin/env python3
"""The PROFILE=tiny build (config/README.md "The tiny profile") end to end, on tests/e2e's harness.

    python3 tests/tiny/test_tiny.py BINARY [-j N] [NAME ...]

The tiny build speaks TLS 1.3 with ECDSA P-256, X25519 and one AEAD only
(AES-128-GCM; ChaCha20-Poly1305 on armv7), watches the compile-time resource
table only and leaves the endpoint, the k8s-sidecar mode, the proxy, the state
directory, the hooks, --dir, the kubeconfig reader, name lookups and the long
--help out. Scenarios: it mirrors 100 ConfigMaps from a server with an ECDSA
P-256 certificate and follows changes (with KR_TINY_NATIVE=1 its peak RSS,
VmHWM, is read from /proc and checked against KR_TINY_MAX_RSS_KB); a server
with an RSA-signed CA is refused at start-up and a TLS 1.2-only one in the
handshake (then retried), each with a clear error, never a crash; each
left-out flag is refused by name, and --version names them.
"""

import atexit
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import check, wait_until, scenario  # noqa: E402

e2e.SCENARIOS.clear()        # the e2e suite's own scenarios run in tests/e2e
NATIVE = os.environ.get("KR_TINY_NATIVE") == "1"
# Peak resident memory allowed for 100 objects (tests/build/README.md "Sizes" has
# the measured figure).
MAX_RSS_KB = int(os.environ.get("KR_TINY_MAX_RSS_KB", "560"))


def status_kb(pid):
    """VmHWM, VmRSS, RssAnon and RssFile of pid, in kB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    return out


@scenario("Tiny/Sync100ConfigMapsECDSA", 6)
def t_sync_100(s):
    s.server("--tls-version", "1.3", "--initial", "100")
    kr = s.kreflect()
    syn = kr.wait_synced(timeout=e2e.late(20))[0]
    check(syn["count"] == 100, "SYNCED %s, expected count 100" % syn)
    for i in range(5):
        s.update("cm-%05d" % i, {"k": "v%d" % i})
    s.delete("cm-00050")
    s.create("tiny-new")
    kr.wait_event("ADDED", "tiny-new")
    s.check_mirror(kr)
    if NATIVE:
        st = status_kb(kr.proc.pid)
        with open(os.path.join(s.dir, "memory.txt"), "w") as f:
            f.write(" ".join("%s=%d" % kv for kv in sorted(st.items())) + " kB\n")
        print("# tiny, 100 ConfigMaps: VmHWM %d kB (RssAnon %d kB, RssFile %d kB)"
              % (st["VmHWM"], st["RssAnon"], st["RssFile"]), flush=True)
        check(st["VmHWM"] <= MAX_RSS_KB, "peak RSS %d kB over %d kB" % (st["VmHWM"], MAX_RSS_KB))
        # Issue #20's 256 KB of RAM: the process's own pages (the binary's file pages are
        # shared page cache, counted apart in RssFile).
        check(st["RssAnon"] <= 256, "anonymous memory %d kB over 256 kB" % st["RssAnon"])
    err = kr.stderr()
    check("TLSv1.3" in err or "TLS 1.3" in err or "tls" not in err.lower(),
          "no TLS 1.3 in the log: %s" % kr.stderr_tail())


def refused(s, srv_args, what):
    s.server(*srv_args)
    kr = s.kreflect()
    try:
        wait_until(lambda: what in kr.stderr(), e2e.late(10), "the handshake error in stderr")
    except e2e.Fail:
        raise e2e.Fail("stderr: %s" % kr.stderr_tail()) from None
    time.sleep(0.5)
    check(kr.running(), "kreflect exited (rc %s): %s" % (kr.proc.poll(), kr.stderr_tail()))
    check(not kr.synced(), "synced with a server it cannot verify")


@scenario("Tiny/RsaServerRefused", 4)
def t_rsa(s):
    # Without RSA the server's RSA-signed CA cannot even be read: a clear error at start-up.
    s.server("--key-type", "rsa")
    kr = s.kreflect()
    rc = kr.wait_exit(e2e.late(10))
    err = kr.stderr()
    check(rc is not None and rc > 0, "exit %s: %s" % (rc, kr.stderr_tail()))
    check("unable to parse CA certificate: certificate: unsupported signature algorithm" in err,
          "stderr: %s" % kr.stderr_tail())


@scenario("Tiny/Tls12ServerRefused", 4)
def t_tls12(s):
    refused(s, ("--tls-version", "1.2"), "handshake")


@scenario("Tiny/LeftOutFlagsRefused", 3)
def t_left_out(s):
    token = os.path.join(s.dir, "token")
    with open(token, "w") as f:
        f.write("not-a-real-token\n")
    base = [e2e.BIN, "--server", "https://127.0.0.1:1", "--token-file", token, "--insecure-skip-tls-verify"]
    cases = [
        (["--listen", "127.0.0.1:0"], "unable to use --listen: it is not built into"),
        (["--state-dir", s.dir], "unable to use --state-dir: it is not built into"),
        (["--exec", "true"], "unable to use --exec: it is not built into"),
        (["--http-post", "http://127.0.0.1:1/"], "unable to use --http-post: it is not built into"),
        (["--dir", s.dir], "unable to use --dir: it is not built into"),
        (["--", "true"], "unable to use -- PROGRAM: it is not built into"),
        (["--k8s-sidecar"], "unable to use --k8s-sidecar (or the name k8s-sidecar): it is not built into"),
        (["widgets.example.com"], "discovery is not built into"),
        (["--kubeconfig", token], "unable to read a kubeconfig: the reader is not built into"),
        (["--server", "https://kubernetes.default.svc:443"], "name lookups are not built into"),
        (["--gzip", "on"], "unable to use --gzip on: it is not built into"),
    ]
    problems = []
    for args, want in cases:
        p = subprocess.run(base + args, capture_output=True, timeout=e2e.late(20), stdin=subprocess.DEVNULL,
                           env=e2e.hermetic_env(s.dir))
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode != 2 or want not in err:
            problems.append("%s: exit %d, %r" % (" ".join(args), p.returncode, err.strip()[-200:]))
    v = subprocess.run([e2e.BIN, "--version"], capture_output=True, timeout=e2e.late(20)).stdout.decode()
    if "left out (WITHOUT): listen sidecar state proxy discovery hooks dir kubeconfig dns full_help gzip" not in v:
        problems.append("--version does not name what is left out: %r" % v)
    check(not problems, "%d left-out flags not refused right:\n%s" % (len(problems), "\n".join(problems)))


if __name__ == "__main__":
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, e2e.on_signal)
    signal.signal(signal.SIGINT, e2e.on_signal)
    sys.exit(e2e.main(sys.argv[1:]))
