#!/usr/bin/env python3
"""Initial sync from the real API server (tests/realapi/): kreflect beside
client-go's Reflector, N ConfigMaps of 1 KiB each.

    python3 tests/realapi/bench.py [N ...]      (default: 1000 10000)

For each N: the objects are written through API server B, then each client
syncs them from API server A (watch cache on) on its own, one after the
other; a client runs until its SYNCED line and is then stopped. Printed per
client: seconds to SYNCED, CPU seconds (user + system, from wait4) and peak
RSS (VmHWM just before it is stopped: wait4's would include the Python
process it was forked from). kreflect runs with --arena-bytes of 2 KiB per object (64 MiB at
least) and --max-objects 131072 (the default 8 MiB arena holds fewer than
10,000 such objects). Not part of make
test: a measurement, with no pass or fail. Needs make realapi, make, make peers.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

e2e = run.e2e


def measure(cmd, env, out_path):
    """Runs cmd until it prints a SYNCED line: (seconds, cpu seconds, peak RSS KiB)."""
    t0 = time.monotonic()
    with open(out_path, "wb") as out:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out, env=env)
        e2e.remember(p)
        took = None
        for line in iter(p.stdout.readline, b""):
            if b'"SYNCED"' in line:
                took = time.monotonic() - t0
                break
        with open("/proc/%d/status" % p.pid) as f:
            hwm = int([ln.split()[1] for ln in f if ln.startswith("VmHWM:")][0])
        p.send_signal(signal.SIGKILL)
        p.stdout.close()
        _, _, ru = os.wait4(p.pid, 0)
        e2e.forget(p)
    return took, ru.ru_utime + ru.ru_stime, hwm


def main():
    counts = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    e2e.ART = os.path.join(run.ROOT, "build", "test", "realapi-bench")
    shutil.rmtree(e2e.ART, ignore_errors=True)
    os.makedirs(e2e.ART)
    e2e.BIN = os.path.join(run.ROOT, "build", "kreflect")
    cl = run.Cluster(os.path.join(e2e.ART, "cluster"))
    rows = []
    try:
        for n in counts:
            s = run.Case(cl, "bench-%d" % n)
            value = "x" * 1024
            t0 = time.monotonic()
            with ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda i: cl.create(s.ns, "cm-%06d" % i, {"k": value}), range(n)))
            print("N=%d: written in %.1f s" % (n, time.monotonic() - t0), flush=True)
            env = e2e.hermetic_env(s.dir)
            common = ["--server", cl.url("A"), "--certificate-authority", cl.d + "/ca.crt",
                      "--token-file", s.token_file, "-n", s.ns]
            arena = "%dM" % max(64, n * 2 // 1024)       # 2 KiB per object, at least 64 MiB
            kr = [e2e.BIN] + common + ["--arena-bytes", arena, "--max-objects", "131072", "-v", "0",
                                       "configmaps"]
            cg = [run.PEER] + common + ["configmaps"]
            for name, cmd, extra in (("kreflect", kr, {}),
                                     ("client-go", cg, {"KUBE_FEATURE_WatchListClient": "true"})):
                took, cpu, rss = measure(cmd, dict(env, **extra), os.path.join(s.dir, name + ".err"))
                rows.append((n, name, took, cpu, rss))
                print("  %-10s %s s to SYNCED, %.2f CPU s, %d KiB peak RSS"
                      % (name, "%.2f" % took if took else "never", cpu, rss), flush=True)
    finally:
        cl.stop()
        e2e.kill_all()
    with open(os.path.join(e2e.ART, "bench.json"), "w") as f:
        json.dump([dict(zip(("objects", "client", "seconds", "cpu_seconds", "peak_rss_kib"), r)) for r in rows], f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
