#!/usr/bin/env python3
"""Where the relay's instructions go before many watchers (tests/bench/README.md "Fan-out").

    python3 tests/bench/fanout_profile.py [--watchers 500] [--changes 50]
                                          [--relay build/x86_64/kreflect.unstripped]

The fan-out bench's set-up once (tests/bench/fanout.py): the test API server over plain
HTTP with 100 ConfigMaps, the relay kreflect under callgrind, min(W, 100) downstream
kreflects and the rest raw watches; then the changes, one at a time, each waited for at
every watcher. The relay is stopped with SIGTERM and its whole run (start-up, the
watchers' sync, the changes) annotated with `callgrind_annotate --inclusive=no`; the
costliest functions are printed. (A dump taken while it runs names no functions with the
static binary, so the whole run it is.)
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fanout  # noqa: E402
from control import ServerProcess, free_port  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watchers", type=int, default=500)
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--relay", default=os.path.join(ROOT, "build", "x86_64", "kreflect.unstripped"))
    ap.add_argument("--kreflect", default=os.path.join(ROOT, "build", "kreflect"))
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    real = min(a.watchers, 100)
    with tempfile.TemporaryDirectory(prefix="kreflect-fanout-profile-") as wd:
        os.makedirs(os.path.join(wd, "up"))
        with ServerProcess(["--plain-http", "--no-auth", "--initial", "100"], workdir=os.path.join(wd, "up")) as srv:
            ctl = srv.control
            ctl.create("configmaps", "default", fanout.PROBE, data={"seq": "-"})
            port = free_port()
            out = os.path.join(wd, "callgrind.out")
            relay = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, a.relay,
                                      "--server", srv.ready["server"], "-o", "none", "--listen",
                                      "127.0.0.1:%d" % port, "configmaps"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            w = fanout.Watchers()
            try:
                fanout.wait_for(lambda: fanout.port_ready(port), 120, "the relay to be ready")
                for _ in range(real):
                    w.add_kreflect([a.kreflect, "--server", "http://127.0.0.1:%d" % port, "configmaps"],
                                   subprocess.DEVNULL)
                rv = ctl.rv()
                for _ in range(a.watchers - real):
                    w.add_raw(port, rv)
                fanout.wait_for(w.all_synced, 300, "the watchers to sync")
                for k in range(a.changes):
                    w.expect(str(int(ctl.rv()) + 1))
                    ctl.update("configmaps", "default", fanout.PROBE, data={"seq": str(k)})
                    fanout.wait_for(w.all_seen, 60, "every watcher to see change %d" % k)
            finally:
                w.close()
                relay.send_signal(signal.SIGTERM)
                relay.wait(120)
            ann = subprocess.run(["callgrind_annotate", "--inclusive=no", out], capture_output=True,
                                 text=True).stdout
    lines = [x for x in ann.split("file:function", 1)[-1].splitlines() if x.strip()[:1].isdigit()]
    print("relay, %d watchers (%d kreflects + %d raw), %d changes, whole run:" % (
        a.watchers, real, a.watchers - real, a.changes))
    total = [x for x in ann.splitlines() if "PROGRAM TOTALS" in x]
    print(total[0].strip() if total else "no totals")
    for x in lines[:a.top]:
        m = re.match(r"\s*([\d,]+)\s+\(\s*([\d.]+%)\)\s+(\S+)", x)
        if m:
            print("%16s %7s  %s" % (m.group(1), m.group(2), m.group(3).split(":", 1)[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
