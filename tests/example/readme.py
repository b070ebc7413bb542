#!/usr/bin/env python3
"""The README's library example can never rot: the first C block of its
"Use kreflect as a library" section is extracted, built with the README's
pkg-config line exactly as written, and run against the test API server.

    python3 tests/example/readme.py

The last line is "N passed, N failed".
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
from control import ServerProcess  # noqa: E402

passed = failed = 0


def result(good, what):
    global passed, failed
    if good:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what)


def main():
    readme = open(os.path.join(ROOT, "README.md")).read()
    sec = readme.split("## Use kreflect as a library", 1)
    blocks = re.findall(r"```c\n(.*?)```", sec[1] if len(sec) == 2 else "", re.S)
    cmds = re.findall(r"^(x86_64-linux-musl-gcc .*app\.c.*)$", sec[1] if len(sec) == 2 else "", re.M)
    result(bool(blocks) and bool(cmds), "README has the section, its C program and its build line")
    if not blocks or not cmds:
        print("%d passed, %d failed" % (passed, failed))
        return 1
    art = os.path.join(ROOT, "build", "test", "readme")
    os.makedirs(os.path.join(art, "server"), exist_ok=True)
    with open(os.path.join(art, "app.c"), "w") as f:
        f.write(blocks[0])
    # The line as written, with the output named: run by the shell in build/test/readme,
    # with PKG_CONFIG_PATH=build meaning the repository's build/.
    line = cmds[0].replace("PKG_CONFIG_PATH=build", "PKG_CONFIG_PATH=" + shlex.quote(os.path.join(ROOT, "build")))
    p = subprocess.run(line + " -o app", shell=True, cwd=art, capture_output=True, text=True, timeout=300)
    result(p.returncode == 0, "it builds with the README's line (%s)" % (p.stderr.strip()[-300:] or "no output"))
    if p.returncode != 0:
        print("%d passed, %d failed" % (passed, failed))
        return 1
    # make install puts the same things where a user's build finds them.
    dest = os.path.join(art, "dest")
    shutil.rmtree(dest, ignore_errors=True)
    p = subprocess.run(["make", "--no-print-directory", "install", "PREFIX=/usr", "DESTDIR=" + dest],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    pc = os.path.join(dest, "usr", "lib", "pkgconfig")
    installed = [os.path.join(dest, "usr", f) for f in ("include/kreflect.h", "lib/libkreflect.a",
                                                          "lib/libkreflect-mbedtls.a", "lib/pkgconfig/kreflect.pc")]
    result(p.returncode == 0 and all(os.path.isfile(f) for f in installed),
           "make install PREFIX=/usr DESTDIR=... installs the header, both archives and the .pc (%s)"
           % (p.stderr.strip()[-200:] or "ok"))
    line2 = cmds[0].replace("PKG_CONFIG_PATH=build", "PKG_CONFIG_PATH=%s PKG_CONFIG_SYSROOT_DIR=%s"
                            % (shlex.quote(pc), shlex.quote(dest)))
    p = subprocess.run(line2 + " -o app-installed", shell=True, cwd=art, capture_output=True, text=True,
                       timeout=300)
    result(p.returncode == 0, "it builds against the installed copy too (%s)" % (p.stderr.strip()[-300:] or "ok"))
    srv = ServerProcess(workdir=os.path.join(art, "server"))
    try:
        for i in range(3):
            srv.control.create("configmaps", "default", "readme-%d" % i, data={"k": str(i)})
        env = dict(os.environ, KUBECONFIG=srv.ready["kubeconfig"], HOME=art)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        r = subprocess.run([os.path.join(art, "app")], env=env, capture_output=True, text=True, timeout=60)
        lines = r.stdout.splitlines()
        added = sorted(ln.split()[2] for ln in lines if ln.startswith("ADDED configmaps "))
        result(r.returncode == 0, "it runs to the first sync and exits 0 (%s)" % r.returncode)
        result(added == ["default/readme-0", "default/readme-1", "default/readme-2"],
               "it printed every object: %s" % added)
        result(any(ln.startswith("SYNCED configmaps ") for ln in lines), "it printed the sync")
    finally:
        srv.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
