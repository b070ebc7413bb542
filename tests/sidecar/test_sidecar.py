#!/usr/bin/env python3
"""kreflect --k8s-sidecar end to end: k8s-sidecar's environment variables,
its file layout and its request after a change.

    python3 tests/sidecar/test_sidecar.py BINARY [-j N] [NAME ...]

The real binary runs against tests/apiserver over verified TLS, connected
through KUBECONFIG (the server's own kubeconfig), as k8s-sidecar would be in a
pod, with labelled ConfigMaps and Secrets in several namespaces. Each scenario
checks the tree of files (paths, bytes, modes) and what a local HTTP receiver
got (method, body, basic auth). The harness is tests/e2e/test_e2e.py's.
BINARY may be a wrapper (run.sh writes one for ARM under qemu-user) that
passes the name it was run under on as argv[0].

Standard library only. Every wait has a timeout.
"""

import atexit
import base64
import http.server
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
import test_e2e as e2e  # noqa: E402
from test_e2e import Fail, check, wait_until, scenario  # noqa: E402

e2e.SCENARIOS.clear()        # the e2e suite's own scenarios run in tests/e2e
LABEL = "grafana_dashboard"
PASSWORD = "s3cr3t-Pa55"     # must never show in a log


# =========================================================================== the sidecar process

class Sidecar:
    """kreflect in k8s-sidecar mode; env is k8s-sidecar's variables."""

    def __init__(self, s, env, name="sidecar", argv0=None, args=()):
        self.s, self.name = s, name
        self.err_path = os.path.join(s.dir, name + ".err")
        binary = e2e.BIN
        if argv0:
            # The image's way: the binary installed under the name k8s-sidecar.
            binary = os.path.join(s.dir, argv0)
            if not os.path.exists(binary):
                os.symlink(e2e.BIN, binary)
        cmd = [binary] + ([] if argv0 else ["--k8s-sidecar"]) + list(args)
        full = e2e.hermetic_env(s.dir)
        for k in list(full):
            if k in ALL_VARS:
                del full[k]
        full["KUBECONFIG"] = s.srv.ready["kubeconfig"]
        # k8s-sidecar's health server takes 0.0.0.0:8080 unless told otherwise: the
        # scenarios run side by side, so only the health scenario opens one.
        full["HEALTH_PORT"] = "0"
        full.update(env)
        for k in [k for k, v in full.items() if v is None]:
            del full[k]
        with open(os.path.join(s.dir, name + ".cmd"), "w") as f:
            f.write(" ".join("%s=%s" % kv for kv in sorted(env.items()) if kv[1] is not None) + " " +
                    " ".join(cmd) + "\n")
        self.err_f = open(self.err_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.err_f, stderr=self.err_f,
                                     env=full)
        e2e.remember(self.proc)
        s.krs.append(self)

    def stderr(self):
        if not self.err_f.closed:
            self.err_f.flush()
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr_tail(self, n=6):
        return " | ".join(self.stderr().splitlines()[-n:])

    def running(self):
        return self.proc.poll() is None

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=e2e.late(timeout))
        except subprocess.TimeoutExpired:
            raise Fail("kreflect still running after %s s: %s" % (timeout, self.stderr_tail()))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait_exit(5)
        e2e.forget(self.proc)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        e2e.forget(self.proc)
        self.err_f.close()


ALL_VARS = ("LABEL", "LABEL_VALUE", "FOLDER", "FOLDER_ANNOTATION", "NAMESPACE", "RESOURCE", "RESOURCE_NAME",
            "METHOD", "SLEEP_TIME", "REQ_URL", "REQ_METHOD", "REQ_PAYLOAD", "REQ_USERNAME", "REQ_PASSWORD",
            "REQ_USERNAME_FILE", "REQ_PASSWORD_FILE", "REQ_BASIC_AUTH_ENCODING", "REQ_RETRY_TOTAL",
            "REQ_RETRY_CONNECT", "REQ_RETRY_READ", "REQ_RETRY_BACKOFF_FACTOR", "REQ_TIMEOUT", "REQ_SKIP_INIT",
            "REQ_SKIP_TLS_VERIFY", "SCRIPT", "ERROR_THROTTLE_SLEEP", "SKIP_TLS_VERIFY",
            "DISABLE_X509_STRICT_VERIFICATION", "UNIQUE_FILENAMES", "DEFAULT_FILE_MODE", "ENABLE_5XX",
            "WATCH_SERVER_TIMEOUT", "WATCH_CLIENT_TIMEOUT", "IGNORE_ALREADY_PROCESSED", "LOG_LEVEL",
            "LOG_FORMAT", "LOG_TZ", "LOG_CONFIG", "HEALTH_PORT", "HEALTH_HOST")


# =========================================================================== a receiver for REQ_URL

class Receiver:
    """Records GET and POST requests; answers with statuses in turn, then 200."""

    def __init__(self, statuses=(), delay=0.0):
        self.reqs = []
        self.statuses = list(statuses)
        self.delay = delay                  # seconds before each answer
        self.lock = threading.Lock()
        rx = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def handle_one(self, method):
                n = int(self.headers.get("Content-Length", "0") or 0)
                body = self.rfile.read(n) if n else b""
                with rx.lock:
                    code = rx.statuses.pop(0) if rx.statuses else 200
                    rx.reqs.append({"time": time.monotonic(), "method": method, "path": self.path,
                                    "status": code, "body": body,
                                    "headers": {k.lower(): v for k, v in self.headers.items()}})
                time.sleep(rx.delay)
                try:
                    self.send_response(code)
                except OSError:          # kreflect gave up waiting
                    return
                try:
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass

            def do_GET(self):
                self.handle_one("GET")

            def do_POST(self):
                self.handle_one("POST")

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def got(self):
        with self.lock:
            return list(self.reqs)

    def wait(self, n, timeout=10):
        return wait_until(lambda: len(self.got()) >= n and self.got(), timeout, "%d requests" % n)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()


# =========================================================================== the tree of files

def tree(root):
    """{relative path: (bytes, mode)} of every file under root but kreflect's manifest."""
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            if n.startswith(".kreflect"):
                continue
            p = os.path.join(d, n)
            try:
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = (f.read(), stat.S_IMODE(os.lstat(p).st_mode))
            except FileNotFoundError:
                continue        # removed since the listing: the next look has it right
    return out


def wait_tree(root, want, timeout=10):
    last = {}

    def p():
        last["t"] = tree(root)
        return last["t"] == want
    try:
        wait_until(p, timeout, "the files under %s" % root, 0.05)
    except Fail:
        got = last.get("t", {})
        diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        raise Fail("files differ from k8s-sidecar's layout at %s: %s" % (
            diff[:6], ["%s: got %r want %r" % (k, got.get(k), want.get(k)) for k in diff[:3]])) from None


def dashboards(s, namespaces=("mon", "apps"), folder=None):
    """The labelled objects (and some that must not be written) in several namespaces."""
    c = s.ctl
    for ns in namespaces:
        c.create("configmaps", ns, "dash-" + ns, data={"%s.json" % ns: '{"title": "%s"}' % ns},
                 labels={LABEL: "1"})
    c.create("configmaps", "other", "dash-other", data={"other.json": "{}"}, labels={LABEL: "1"})
    c.create("configmaps", "mon", "unlabelled", data={"no.json": "{}"})
    c.create("configmaps", "mon", "wrong-value", data={"wrong.json": "{}"}, labels={LABEL: "0"})
    c.create("configmaps", "mon", "bin", binaryData={"logo.png": base64.b64encode(b"\x89PNG\x00\xff").decode()},
             data={"text.txt": "t"}, labels={LABEL: "1"})
    c.create("configmaps", "mon", "in-sub", data={"sub.json": "s"}, labels={LABEL: "1"},
             annotations={"k8s-sidecar-target-directory": "team-a/x"})
    if folder:
        c.create("configmaps", "apps", "in-abs", data={"abs.json": "a"}, labels={LABEL: "1"},
                 annotations={"k8s-sidecar-target-directory": folder + "/team-b"})
        c.create("configmaps", "apps", "escape", data={"escape.json": "e"}, labels={LABEL: "1"},
                 annotations={"k8s-sidecar-target-directory": "/etc"})
    c.create("secrets", "mon", "datasource", stringData={"ds.yaml": "password: x\n"}, labels={LABEL: "1"})
    # k8s-sidecar downloads a .url key's content; kreflect refuses the key, naming it.
    c.create("configmaps", "mon", "remote", data={"remote.json.url": "http://example.invalid/x"},
             labels={LABEL: "1"})
    # Its unique file name (UNIQUE_FILENAMES) would pass 255 bytes: refused, naming it.
    c.create("configmaps", "mon", "l" * 240, data={"long.json": "x"}, labels={LABEL: "1"})


def base_env(s, folder, **kw):
    env = {"LABEL": LABEL, "LABEL_VALUE": "1", "FOLDER": folder, "NAMESPACE": "mon,apps",
           "RESOURCE": "both", "LOG_LEVEL": "DEBUG"}
    env.update({k: None if v is None else str(v) for k, v in kw.items()})  # None: unset
    return env


# =========================================================================== scenarios

@scenario("SidecarWatchTreeAndPost", 10)
def t_watch(s):
    s.server()
    folder = os.path.join(s.dir, "dashboards")
    dashboards(s, folder=folder)
    with Receiver() as rx:
        sc = Sidecar(s, base_env(s, folder, METHOD="WATCH", REQ_URL=rx.url + "/api/reload", REQ_METHOD="POST",
                                 REQ_PAYLOAD='{"reload": true}', REQ_USERNAME="admin", REQ_PASSWORD=PASSWORD))
        want = {"mon.json": (b'{"title": "mon"}', 0o644), "apps.json": (b'{"title": "apps"}', 0o644),
                "logo.png": (b"\x89PNG\x00\xff", 0o644), "text.txt": (b"t", 0o644),
                "team-a/x/sub.json": (b"s", 0o644), "team-b/abs.json": (b"a", 0o644),
                "ds.yaml": (b"password: x\n", 0o600), "long.json": (b"x", 0o644)}
        wait_tree(folder, want)
        first = rx.wait(1)[0]
        check(first["method"] == "POST" and first["path"] == "/api/reload", "request: %r" % first)
        check(json.loads(first["body"]) == {"reload": True}, "payload: %r" % first["body"])
        check(first["headers"].get("content-type") == "application/json", "content type: %r" % first["headers"])
        auth = "Basic " + base64.b64encode(b"admin:" + PASSWORD.encode()).decode()
        check(first["headers"].get("authorization") == auth, "basic auth: %r" % first["headers"].get("authorization"))
        time.sleep(1.5)
        check(len(rx.got()) == 1, "the first sync made %d requests, not one" % len(rx.got()))

        # A change, an annotation moved, a delete: the files follow, one request each batch.
        s.ctl.update("configmaps", "apps", "dash-apps", data={"apps.json": "v2"})
        want["apps.json"] = (b"v2", 0o644)
        wait_tree(folder, want)
        rx.wait(2)
        s.ctl.delete("configmaps", "mon", "bin")
        del want["logo.png"], want["text.txt"]
        s.ctl.update("configmaps", "mon", "in-sub", annotations={"k8s-sidecar-target-directory": "team-c"})
        del want["team-a/x/sub.json"]
        want["team-c/sub.json"] = (b"s", 0o644)
        wait_tree(folder, want)
        rx.wait(3)
        err = sc.stderr()
        check(not os.path.exists("/etc/escape.json"), "an annotation wrote outside FOLDER")
        check(PASSWORD not in err and base64.b64encode(b"admin:" + PASSWORD.encode()).decode() not in err,
              "the password shows in the log")
        check("unable to write configmaps apps/escape: annotation" in err, "the refused annotation is not "
              "named: %s" % sc.stderr_tail())
        check('unable to write key "remote.json.url" of configmaps mon/remote: refused: a .url key' in err,
              "the .url key is not refused by name: %s" % sc.stderr_tail())
        check(sc.running(), "kreflect ended: %s" % sc.stderr_tail())


@scenario("SidecarListUniqueModeScriptGet", 8)
def t_list(s):
    s.server()
    folder = os.path.join(s.dir, "out")
    dashboards(s)
    script = os.path.join(s.dir, "script.sh")
    marker = os.path.join(s.dir, "script.ran")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho ran >> '%s'\n" % marker)
    os.chmod(script, 0o755)
    with Receiver() as rx:
        sc = Sidecar(s, base_env(s, folder, METHOD="LIST", NAMESPACE="ALL", UNIQUE_FILENAMES="true",
                                 DEFAULT_FILE_MODE="440", REQ_URL=rx.url + "/reload", SCRIPT=script))
        rc = sc.wait_exit(15)
        check(rc == 0, "METHOD=LIST exited %s: %s" % (rc, sc.stderr_tail()))
        m = 0o440
        want = {"namespace_mon.configmap_dash-mon.mon.json": (b'{"title": "mon"}', m),
                "namespace_apps.configmap_dash-apps.apps.json": (b'{"title": "apps"}', m),
                "namespace_other.configmap_dash-other.other.json": (b"{}", m),
                "namespace_mon.configmap_bin.logo.png": (b"\x89PNG\x00\xff", m),
                "namespace_mon.configmap_bin.text.txt": (b"t", m),
                "team-a/x/namespace_mon.configmap_in-sub.sub.json": (b"s", m),
                "namespace_mon.secret_datasource.ds.yaml": (b"password: x\n", m)}
        check(tree(folder) == want, "files: %r" % sorted(tree(folder)))
        check("unique file name (UNIQUE_FILENAMES) is longer than 255 bytes" in sc.stderr(),
              "the long unique name is not refused by name: %s" % sc.stderr_tail())
        got = rx.got()
        check(len(got) == 1 and got[0]["method"] == "GET" and got[0]["body"] == b"",
              "LIST made requests %r, not one GET" % [(r["method"], r["body"]) for r in got])
        check("authorization" not in got[0]["headers"], "an Authorization header without credentials")
        with open(marker) as f:
            check(f.read() == "ran\n", "SCRIPT did not run exactly once")


@scenario("SidecarRestartMissedDeleteAndNamespaces", 12)
def t_restart(s):
    s.server()
    folder = os.path.join(s.dir, "d")
    dashboards(s)
    env = base_env(s, folder, RESOURCE="configmap")
    sc = Sidecar(s, env, name="first")
    wait_tree(folder, {"mon.json": (b'{"title": "mon"}', 0o644), "apps.json": (b'{"title": "apps"}', 0o644),
                       "logo.png": (b"\x89PNG\x00\xff", 0o644), "text.txt": (b"t", 0o644),
                       "team-a/x/sub.json": (b"s", 0o644), "long.json": (b"x", 0o644)})
    ino = os.stat(os.path.join(folder, "apps.json")).st_ino
    check(sc.stop() == 0, "SIGTERM: not a clean stop")
    # While kreflect is down: a delete k8s-sidecar would never see.
    s.ctl.delete("configmaps", "mon", "dash-mon")
    s.ctl.update("configmaps", "mon", "bin", labels={LABEL: None})   # stops matching
    # apps answers late, so mon syncs first: its sweep must leave apps' files alone.
    s.ctl.fault(kind="stall", seconds=1.0, count=1, match="/namespaces/apps/")
    sc = Sidecar(s, env, name="second")
    want = {"apps.json": (b'{"title": "apps"}', 0o644), "team-a/x/sub.json": (b"s", 0o644),
            "long.json": (b"x", 0o644)}
    wait_tree(folder, want)
    time.sleep(0.5)
    try:
        ino2 = os.stat(os.path.join(folder, "apps.json")).st_ino
    except OSError:
        ino2 = None
    check(ino2 == ino, "apps.json was removed or rewritten when the other namespace synced")
    err = sc.stderr()
    check("deleted while kreflect was not running" in err, "no line about the files removed: %s" % sc.stderr_tail())


@scenario("SidecarSleepResourceNameSkipInit", 10)
def t_names(s):
    s.server()
    folder = os.path.join(s.dir, "n")
    dashboards(s)
    with Receiver() as rx:
        sc = Sidecar(s, base_env(s, folder, METHOD="SLEEP", SLEEP_TIME="60", RESOURCE="both",
                                 RESOURCE_NAME="mon/configmap/bin,secret/datasource,apps/configmap/dash-apps",
                                 REQ_URL=rx.url, REQ_SKIP_INIT="true"))
        # mon: configmap bin by name, secret datasource; apps: configmap dash-apps (and
        # a secret named dash-apps, which does not exist).
        want = {"logo.png": (b"\x89PNG\x00\xff", 0o644), "text.txt": (b"t", 0o644),
                "ds.yaml": (b"password: x\n", 0o600), "apps.json": (b'{"title": "apps"}', 0o644)}
        wait_tree(folder, want)
        time.sleep(1.5)
        check(rx.got() == [], "REQ_SKIP_INIT=true, yet the first sync made a request")
        s.ctl.update("configmaps", "mon", "bin", data={"text.txt": "t2"})
        s.ctl.update("configmaps", "mon", "dash-mon", data={"mon.json": "not watched"})
        want["text.txt"] = (b"t2", 0o644)
        wait_tree(folder, want)
        rx.wait(1)
        err = sc.stderr()
        check("METHOD=SLEEP: kreflect watches" in err, "no note about SLEEP: %s" % sc.stderr_tail())


@scenario("SidecarRequestRetries", 12)
def t_retries(s):
    s.server()
    dashboards(s, namespaces=("mon",))
    # 503 twice, then 200: three requests, 0 s then 0.2 s apart (urllib3's backoff, factor 0.1).
    with Receiver(statuses=(503, 503)) as rx:
        Sidecar(s, base_env(s, os.path.join(s.dir, "a"), NAMESPACE="mon", REQ_URL=rx.url,
                            REQ_RETRY_BACKOFF_FACTOR="0.1"), name="a")
        got = rx.wait(3)
        time.sleep(1)
        check([r["status"] for r in rx.got()] == [503, 503, 200], "statuses %r" % [r["status"] for r in rx.got()])
        gap = got[2]["time"] - got[1]["time"]
        check(0.15 <= gap <= e2e.late(1.5), "second retry after %.2f s, not about 0.2 s" % gap)
    # A 404 is an answer, not retried; ENABLE_5XX=true makes a 503 one too.
    for name, extra, status in (("b", {}, 404), ("c", {"ENABLE_5XX": "true"}, 503)):
        with Receiver(statuses=(status, status)) as rx:
            sc = Sidecar(s, base_env(s, os.path.join(s.dir, name), NAMESPACE="mon", REQ_URL=rx.url,
                                     REQ_RETRY_BACKOFF_FACTOR="0.1", **extra), name=name)
            rx.wait(1)
            time.sleep(1.2)
            check(len(rx.got()) == 1, "%s: HTTP %d was retried (%d requests)" % (name, status, len(rx.got())))
            check("HTTP %d" % status in sc.stderr(), "%s: HTTP %d not logged" % (name, status))
    # An answer slower than REQ_TIMEOUT is a read failure: REQ_RETRY_READ=1, 2 attempts.
    with Receiver(delay=3) as rx:
        sc = Sidecar(s, base_env(s, os.path.join(s.dir, "e"), NAMESPACE="mon", REQ_URL=rx.url, REQ_TIMEOUT="0.5",
                                 REQ_RETRY_READ="1", REQ_RETRY_BACKOFF_FACTOR="0.1"), name="e")
        wait_until(lambda: "after 2 attempts" in sc.stderr(), 10, "the slow request to be given up after 2")
        got = rx.got()
        check(len(got) == 2 and got[1]["time"] - got[0]["time"] <= e2e.late(1.5),
              "%d requests for a timeout, %.2f s apart" % (len(got), got[-1]["time"] - got[0]["time"]))
    # Nobody listening: REQ_RETRY_CONNECT=1 bounds it to 2 attempts.
    rx = Receiver()
    url = rx.url
    rx.__exit__()
    sc = Sidecar(s, base_env(s, os.path.join(s.dir, "d"), NAMESPACE="mon", REQ_URL=url, REQ_RETRY_CONNECT="1",
                             REQ_RETRY_BACKOFF_FACTOR="0.1"), name="d")
    wait_until(lambda: "after 2 attempts" in sc.stderr(), 10, "the request to be given up after 2 attempts")


@scenario("SidecarArgv0AndPasswordFile", 6)
def t_argv0(s):
    s.server()
    dashboards(s, namespaces=("mon",))
    pwfile = os.path.join(s.dir, "password")
    with open(pwfile, "w") as f:
        f.write("  from-file\n")
    folder = os.path.join(s.dir, "z")
    with Receiver() as rx:
        sc = Sidecar(s, base_env(s, folder, NAMESPACE="mon", RESOURCE="secret", REQ_URL=rx.url,
                                 REQ_USERNAME="u", REQ_PASSWORD="ignored"),
                     argv0="k8s-sidecar", args=["--req-password-file", pwfile])
        wait_tree(folder, {"ds.yaml": (b"password: x\n", 0o600)})
        r = rx.wait(1)[0]
        check(r["headers"].get("authorization") == "Basic " + base64.b64encode(b"u:from-file").decode(),
              "--req-password-file not used: %r" % r["headers"].get("authorization"))
        check("from-file" not in sc.stderr(), "the password from the file shows in the log")


EXAMPLES = os.path.join(e2e.ROOT, "config", "examples", "k8s-sidecar")


@scenario("SidecarExampleManifestsRun", 8)
def t_examples(s):
    """config/examples/k8s-sidecar: yamllint passes, the manifests hold what the
    sidecar needs, and the sidecar container's environment, taken from the
    manifest, runs kreflect: the example dashboard lands where Grafana reads it."""
    try:
        import yaml
    except ImportError:
        raise Fail("python3-yaml is not installed (make test-deps installs it)") from None
    files = [os.path.join(EXAMPLES, n) for n in ("grafana-dashboards.yaml", "helm-values.yaml")]
    lint = subprocess.run(["yamllint", "-f", "parsable", "-d", "relaxed"] + files, capture_output=True,
                          timeout=60)
    check(lint.returncode == 0, "yamllint: %s" % (lint.stdout + lint.stderr).decode()[-400:])
    with open(files[0]) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        check(d.get("apiVersion") and d.get("kind") and (d.get("metadata") or {}).get("name"),
              "a manifest without apiVersion, kind or name: %r" % d)
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    rules = by_kind["ClusterRole"][0]["rules"]
    for res in ("configmaps", "secrets"):
        check(any(res in r["resources"] and {"list", "watch"} <= set(r["verbs"]) for r in rules),
              "the ClusterRole does not let the sidecar list and watch %s" % res)
    dep = by_kind["Deployment"][0]["spec"]["template"]["spec"]
    binding = by_kind["ClusterRoleBinding"][0]
    check(binding["subjects"][0]["name"] == dep["serviceAccountName"], "the binding is for another account")
    check(binding["roleRef"]["name"] == by_kind["ClusterRole"][0]["metadata"]["name"], "the binding names "
          "another role")
    sc_spec = next(c for c in dep["containers"] if c["name"].endswith("sc-dashboard"))
    secret = by_kind["Secret"][0]["stringData"]
    folder = os.path.join(s.dir, "tmp-dashboards")
    env = {}
    for e in sc_spec["env"]:
        v = e["value"] if "value" in e else secret[e["valueFrom"]["secretKeyRef"]["key"]]
        env[e["name"]] = str(v).replace("/tmp/dashboards", folder)
    mounts = {m["name"]: m["mountPath"] for m in sc_spec["volumeMounts"]}
    graf = next(c for c in dep["containers"] if c["name"] == "grafana")
    check(mounts["sc-dashboard-volume"] == "/tmp/dashboards" and
          {m["name"]: m["mountPath"] for m in graf["volumeMounts"]}["sc-dashboard-volume"] == "/tmp/dashboards",
          "the sidecar and Grafana do not share /tmp/dashboards")
    with open(files[1]) as f:
        values = yaml.safe_load(f)
    check(values["sidecar"]["image"]["repository"] == "kreflect", "helm-values.yaml does not swap the image")

    s.server()
    board = by_kind["ConfigMap"][-1]
    ann = {k: v.replace("/tmp/dashboards", folder) for k, v in board["metadata"]["annotations"].items()}
    s.ctl.create("configmaps", board["metadata"]["namespace"], board["metadata"]["name"], data=board["data"],
                 labels=board["metadata"]["labels"], annotations=ann)
    with Receiver() as rx:
        path = env["REQ_URL"].split("localhost:3000", 1)[1]
        env["REQ_URL"] = rx.url + path
        sc = Sidecar(s, env)
        wait_tree(folder, {"Infrastructure/node.json": (board["data"]["node.json"].encode(), 0o644)})
        r = rx.wait(1)[0]
        check(r["method"] == "POST" and r["path"] == "/api/admin/provisioning/dashboards/reload",
              "request %s %s" % (r["method"], r["path"]))
        check(r["headers"].get("authorization") == "Basic " + base64.b64encode(
            ("%s:%s" % (secret["admin-user"], secret["admin-password"])).encode()).decode(),
            "the chart's credentials are not sent")
        check(sc.running(), "kreflect ended: %s" % sc.stderr_tail())


# Every variable with a bad value (and those kreflect cannot honour): exit 2, the
# message names the variable. Values are checked before any connection.
BAD = [
    ({"LABEL": None}, "LABEL must be set"),
    ({"LABEL": "a=b"}, "LABEL must be a label key"),
    ({"LABEL_VALUE": "x,y"}, "LABEL_VALUE must be"),
    ({"FOLDER": None}, "FOLDER must be set"),
    ({"NAMESPACE": "Mon"}, "NAMESPACE must be"),
    ({"NAMESPACE": "a,,b"}, "NAMESPACE must be"),
    ({"NAMESPACE": "a,b,c,d,e", "RESOURCE": "both"}, "KR_MAX_RESOURCES"),
    ({"RESOURCE": "configmaps"}, "RESOURCE must be"),
    ({"RESOURCE_NAME": "a/b/c/d"}, "RESOURCE_NAME entry"),
    ({"RESOURCE_NAME": "deployment/x"}, "RESOURCE_NAME entry"),
    ({"RESOURCE_NAME": "x", "NAMESPACE": "ALL"}, "RESOURCE_NAME cannot be used with NAMESPACE=ALL"),
    ({"METHOD": "POLL"}, "METHOD must be"),
    ({"SLEEP_TIME": "1m"}, "SLEEP_TIME must be"),
    ({"REQ_URL": "https://localhost/x"}, "REQ_URL: https://"),
    ({"REQ_URL": "ftp://x"}, "REQ_URL: must be http://"),
    ({"REQ_URL": "http://h/", "REQ_METHOD": "PUT"}, "REQ_METHOD must be"),
    ({"REQ_URL": "http://h/", "REQ_PAYLOAD": "{}"}, "REQ_PAYLOAD is only sent with REQ_METHOD=POST"),
    ({"REQ_METHOD": "POST"}, "REQ_METHOD is set without REQ_URL"),
    ({"REQ_URL": "http://h/", "REQ_METHOD": "POST", "REQ_PAYLOAD": "x" * 5000}, "REQ_PAYLOAD is longer"),
    ({"REQ_USERNAME": "u"}, "REQ_USERNAME is set without REQ_PASSWORD"),
    ({"REQ_PASSWORD": PASSWORD}, "REQ_PASSWORD is set without REQ_USERNAME"),
    ({"REQ_USERNAME": "u", "REQ_PASSWORD": "p\u20acx"}, "not Latin-1"),
    ({"REQ_USERNAME": "a:b", "REQ_PASSWORD": PASSWORD}, "REQ_USERNAME contains ':'"),
    ({"REQ_USERNAME": "u" * 300, "REQ_PASSWORD": PASSWORD}, "REQ_USERNAME is longer than 256"),
    ({"REQ_USERNAME": "u", "REQ_PASSWORD_FILE": "/nonexistent/pw"}, "REQ_PASSWORD_FILE /nonexistent/pw"),
    ({"REQ_BASIC_AUTH_ENCODING": "ascii"}, "REQ_BASIC_AUTH_ENCODING must be"),
    ({"REQ_RETRY_TOTAL": "-1"}, "REQ_RETRY_TOTAL must be"),
    ({"REQ_RETRY_CONNECT": "x"}, "REQ_RETRY_CONNECT must be"),
    ({"REQ_RETRY_READ": "1000"}, "REQ_RETRY_READ must be"),
    ({"REQ_RETRY_BACKOFF_FACTOR": "1,1"}, "REQ_RETRY_BACKOFF_FACTOR must be"),
    ({"REQ_TIMEOUT": "0"}, "REQ_TIMEOUT must be"),
    ({"REQ_SKIP_INIT": "yes"}, "REQ_SKIP_INIT must be"),
    ({"REQ_SKIP_TLS_VERIFY": "1"}, "REQ_SKIP_TLS_VERIFY must be"),
    ({"SCRIPT": "/x/it's.sh"}, "SCRIPT must be a path without quotes"),
    ({"ERROR_THROTTLE_SLEEP": "soon"}, "ERROR_THROTTLE_SLEEP must be"),
    ({"SKIP_TLS_VERIFY": "True"}, "SKIP_TLS_VERIFY must be true or false"),
    ({"DISABLE_X509_STRICT_VERIFICATION": "true"}, "DISABLE_X509_STRICT_VERIFICATION=true"),
    ({"UNIQUE_FILENAMES": "1"}, "UNIQUE_FILENAMES must be"),
    ({"DEFAULT_FILE_MODE": "999"}, "DEFAULT_FILE_MODE must be"),
    ({"DEFAULT_FILE_MODE": "1777"}, "DEFAULT_FILE_MODE must be"),
    ({"ENABLE_5XX": "on"}, "ENABLE_5XX must be"),
    ({"WATCH_SERVER_TIMEOUT": "0"}, "WATCH_SERVER_TIMEOUT must be"),
    ({"WATCH_CLIENT_TIMEOUT": "66s"}, "WATCH_CLIENT_TIMEOUT must be"),
    ({"IGNORE_ALREADY_PROCESSED": "maybe"}, "IGNORE_ALREADY_PROCESSED must be"),
    ({"LOG_LEVEL": "TRACE"}, "LOG_LEVEL must be"),
    ({"LOG_FORMAT": "JSON"}, "LOG_FORMAT:"),
    ({"LOG_TZ": "UTC"}, "LOG_TZ:"),
    ({"LOG_CONFIG": "/x.yaml"}, "LOG_CONFIG:"),
    ({"HEALTH_PORT": "http"}, "HEALTH_PORT must be"),
    ({"HEALTH_PORT": "65536"}, "HEALTH_PORT must be"),
    ({"HEALTH_HOST": "localhost"}, "HEALTH_HOST must be"),
    ({"HEALTH_HOST": "[::1]"}, "HEALTH_HOST must be"),
    ({"KUBECONFIG": "/nonexistent/kubeconfig"}, "/nonexistent/kubeconfig"),
]


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def http_get(port, path, timeout=3):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as so:
        so.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = so.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@scenario("SidecarHealthEndpoint", 10)
def t_health(s):
    """k8s-sidecar always serves /healthz on 0.0.0.0:HEALTH_PORT (8080): 503 until the
    first sync, then 200; probes carry no token, and nothing but health is served."""
    s.server()
    folder = os.path.join(s.dir, "dashboards")
    dashboards(s, namespaces=("mon",))
    port = free_port()
    # The API server holds its lists back: /healthz must say not ready meanwhile.
    s.ctl.fault(kind="stall", seconds=3, count=2)
    sc = Sidecar(s, base_env(s, folder, METHOD="WATCH", NAMESPACE="mon", HEALTH_PORT=port))

    def answered():
        try:
            return http_get(port, "/healthz", timeout=1)
        except OSError:
            return None
    first = wait_until(answered, 5, "the health endpoint on HEALTH_PORT")
    check(first[0] == 503, "/healthz before the first sync: %r" % (first,))
    wait_tree(folder, {"mon.json": (b'{"title": "mon"}', 0o644), "ds.yaml": (b"password: x\n", 0o600),
                       "logo.png": (b"\x89PNG\x00\xff", 0o644), "text.txt": (b"t", 0o644),
                       "team-a/x/sub.json": (b"s", 0o644), "long.json": (b"x", 0o644)}, timeout=20)
    st = wait_until(lambda: (lambda r: r if r and r[0] == 200 else None)(answered()), 10,
                    "/healthz 200 after the sync")
    check(st[0] == 200, "/healthz after the sync: %r" % (st,))
    for path in ("/readyz", "/livez"):
        code, body = http_get(port, path)
        check(code == 200, "%s: %d %r" % (path, code, body[:200]))
    # Only health: the mirror and the metrics are not served on this port.
    for path in ("/api/v1/configmaps", "/api/v1/namespaces/mon/secrets/datasource", "/metrics", "/version"):
        code, body = http_get(port, path)
        check(code == 404, "%s on the health port: %d %r" % (path, code, body[:200]))
        check(b"password" not in body, "%s leaked data" % path)
    # A second sidecar in the same pod on the same port goes on without one, saying so.
    folder2 = os.path.join(s.dir, "second")
    sc2 = Sidecar(s, base_env(s, folder2, METHOD="WATCH", NAMESPACE="mon", HEALTH_PORT=port), name="second")
    wait_tree(folder2, {"mon.json": (b'{"title": "mon"}', 0o644), "ds.yaml": (b"password: x\n", 0o600),
                        "logo.png": (b"\x89PNG\x00\xff", 0o644), "text.txt": (b"t", 0o644),
                        "team-a/x/sub.json": (b"s", 0o644), "long.json": (b"x", 0o644)}, timeout=20)
    check("going on without the health endpoint (HEALTH_PORT)" in sc2.stderr(),
          "the taken port is not reported: %s" % sc2.stderr_tail())
    check(sc.running() and sc2.running(), "a sidecar ended: %s / %s" % (sc.stderr_tail(), sc2.stderr_tail()))
    # Unset, it is k8s-sidecar's 0.0.0.0:8080 (served, or reported as taken on this machine).
    sc3 = Sidecar(s, base_env(s, os.path.join(s.dir, "third"), METHOD="WATCH", NAMESPACE="mon",
                              LOG_LEVEL="INFO", HEALTH_PORT=None), name="third")
    wait_until(lambda: "on 0.0.0.0:8080" in sc3.stderr(), 10, "the default health address in the log")
    # METHOD=LIST exits after one sync: no endpoint to probe, and exit 0.
    sc4 = Sidecar(s, base_env(s, os.path.join(s.dir, "fourth"), METHOD="LIST", NAMESPACE="mon",
                              LOG_LEVEL="INFO", HEALTH_PORT=port), name="fourth")
    check(sc4.wait_exit(20) == 0, "METHOD=LIST: %s" % sc4.stderr_tail())
    check("health" not in sc4.stderr(), "METHOD=LIST opened a health endpoint: %s" % sc4.stderr_tail())


@scenario("SidecarBadValuesExit2", 10)
def t_bad(s):
    s.server()
    problems = []
    for i, (over, want) in enumerate(BAD):
        env = e2e.hermetic_env(s.dir)
        for k in list(env):
            if k in ALL_VARS:
                del env[k]
        env.update({"LABEL": LABEL, "FOLDER": os.path.join(s.dir, "bad%d" % i),
                    "KUBECONFIG": s.srv.ready["kubeconfig"]})
        for k, v in over.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        cmd = [e2e.BIN, "--k8s-sidecar"]
        p = subprocess.run(cmd, env=env, capture_output=True, timeout=e2e.late(20), stdin=subprocess.DEVNULL)
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode != 2 or want not in err:
            problems.append("%r: exit %d, %r" % (over, p.returncode, err.strip()[-200:]))
        if PASSWORD in err:
            problems.append("%r: the password shows in the error" % (over,))
    check(not problems, "%d of %d bad settings not refused right:\n%s" % (len(problems), len(BAD),
                                                                          "\n".join(problems)))
    # A flag among k8s-sidecar's variables is a mistake too.
    p = subprocess.run([e2e.BIN, "--k8s-sidecar", "-n", "x"],
                       env=dict(e2e.hermetic_env(s.dir), LABEL="a", FOLDER=s.dir), capture_output=True,
                       timeout=e2e.late(20))
    check(p.returncode == 2 and b"the only arguments are" in p.stderr, "a flag was accepted: %r" % p.stderr[-200:])


if __name__ == "__main__":
    atexit.register(e2e.kill_all)
    signal.signal(signal.SIGTERM, e2e.on_signal)
    signal.signal(signal.SIGINT, e2e.on_signal)
    sys.exit(e2e.main(sys.argv[1:]))
