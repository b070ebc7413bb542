"""The `sidecar` part of make bench (tests/bench/bench.py --only sidecar):
kreflect --k8s-sidecar beside a k8s-sidecar-like peer on Debian's
python3-kubernetes (tests/bench/peer_sidecar.py; k8s-sidecar itself is not
packaged in Debian), with the same labelled ConfigMaps, both writing files.

One test API server holds N = 1,000 ConfigMaps of 1 KiB labelled bench=yes and
1,000 unlabelled ones in namespace default. Each client, started alone, gets
LABEL=bench, LABEL_VALUE=yes, UNIQUE_FILENAMES=true (the bench's objects all
have the key "payload") and an empty folder. Measured from /proc while it
runs: the time from exec until the folder holds the N files whole, the CPU
(user + sys) and peak RSS (VmHWM) at that moment, then the CPU used in --idle
seconds of watching and VmHWM after it. Each figure is the median of --reps
runs.
"""

import os
import shutil
import signal
import subprocess
import time

N = 1000
PAYLOAD = 1024
LABEL = "bench"


def files_complete(folder, n):
    """Nonzero once folder holds n files of PAYLOAD bytes (kreflect's manifest aside)."""
    try:
        sizes = [e.stat().st_size for e in os.scandir(folder) if not e.name.startswith(".kreflect")]
    except OSError:
        return False
    return len(sizes) == n and all(s == PAYLOAD for s in sizes)


def one_run(b, bench, argv, folder, tag):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    t0 = time.monotonic()
    p = b.spawn(argv, tag, stdout=subprocess.DEVNULL)
    try:
        deadline = t0 + 300
        while not files_complete(folder, N):
            if p.poll() is not None:
                raise bench.BenchError("%s exited (%s) before writing its files" % (p.tag, p.returncode))
            if time.monotonic() > deadline:
                raise bench.BenchError("%s: the %d files not there after 300 s" % (p.tag, N))
            time.sleep(0.005)
        t = time.monotonic() - t0
        st, cpu = bench.proc_status(p.pid), bench.proc_cpu(p.pid)
        time.sleep(b.a.idle)
        st2, cpu2 = bench.proc_status(p.pid), bench.proc_cpu(p.pid)
    finally:
        bench.reap(p, 10, signal.SIGTERM)
    return {"seconds": t, "cpu": cpu, "peak_rss": st["VmHWM"], "cpu_idle": cpu2 - cpu,
            "peak_rss_idle": st2["VmHWM"]}


def run(b, bench):
    """Runs the part on Bench b (module bench for its helpers); returns the results."""
    srv = b.server("sidecar", ["--bookmark-interval", "%g" % b.bookmark_interval()])
    srv.control.bulk("configmaps", "default", N, size=PAYLOAD, pattern="dash-{i:05d}", labels={LABEL: "yes"})
    srv.control.bulk("configmaps", "default", N, size=PAYLOAD, pattern="other-{i:05d}")
    r = srv.ready
    env = ["env", "-i", "KUBECONFIG=" + r["kubeconfig"], "LABEL=" + LABEL, "LABEL_VALUE=yes",
           "NAMESPACE=default", "RESOURCE=configmap", "UNIQUE_FILENAMES=true", "LOG_LEVEL=INFO"]
    clients = {
        "kreflect": lambda folder: env + ["FOLDER=" + folder, b.a.kreflect, "--k8s-sidecar"],
        "python": lambda folder: [bench.PEER_PYTHON, os.path.join(bench.ROOT, "tests", "bench", "peer_sidecar.py"),
                                  "--server", r["server"], "--certificate-authority", r["ca"],
                                  "--token-file", r["token_file"], "--label", LABEL + "=yes",
                                  "--folder", folder, "-n", "default", "--unique"],
    }
    runs = {name: [] for name in clients}
    for rep in range(b.a.reps):
        for name, argv in clients.items():
            folder = os.path.join(b.out, "sidecar-files", name)
            x = one_run(b, bench, argv(folder), folder, "sidecar-%s-rep%d" % (name, rep + 1))
            runs[name].append(x)
            bench.log("sidecar %-8s rep %d: %d files in %.3f s, cpu %.2f s, peak RSS %.1f MB; %g s idle: "
                      "cpu %.2f s, peak RSS %.1f MB" % (name, rep + 1, N, x["seconds"], x["cpu"],
                                                         x["peak_rss"] / bench.MB, b.a.idle, x["cpu_idle"],
                                                         x["peak_rss_idle"] / bench.MB))
    srv.stop()
    shutil.rmtree(os.path.join(b.out, "sidecar-files"), ignore_errors=True)
    return {name: {"runs": rs, **{k: bench.median([x[k] for x in rs]) for k in rs[0]}}
            for name, rs in runs.items()}


def markdown(res, idle, bench):
    """The part's own table: kreflect --k8s-sidecar beside the peer, with ratios."""
    k, p = res.get("kreflect"), res.get("python")
    if not k or not p:
        return ""
    rows = [("time until the %s files are written (%s labelled ConfigMaps of 1 KiB, as many unlabelled)"
             % ("{:,}".format(N), "{:,}".format(N)), "seconds", bench.f_s),
            ("CPU until then (user + sys)", "cpu", bench.f_s),
            ("peak RSS until then (VmHWM)", "peak_rss", bench.f_mb),
            ("CPU in %g s of idle watch" % idle, "cpu_idle", bench.f_s),
            ("peak RSS after it (VmHWM)", "peak_rss_idle", bench.f_mb)]
    out = ["| k8s-sidecar mode | kreflect --k8s-sidecar | python3-kubernetes, as k8s-sidecar | kreflect : python |",
           "|---|---:|---:|---:|"]
    for what, key, fmt in rows:
        out.append("| %s | %s | %s | %s |" % (what, fmt(k[key]), fmt(p[key]), bench.ratio(k[key], p[key])))
    return "\n".join(out) + "\n"
