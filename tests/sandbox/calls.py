#!/usr/bin/env python3
"""The seccomp allow list against what kreflect really calls.

    python3 tests/sandbox/calls.py ALLOWLIST TRACE...

ALLOWLIST is `probe --calls` (one "name number" a line: the list compiled
into the port for this target); each TRACE is an `strace -f -o` file of one
kreflect run. Only the calls after the filter is set (seccomp() = 0: start-up is
over then), in kreflect and in every child it forks, up to a child's execve
of a hook (after it, the calls are the hook's own program's). Fails if a call
was made that the list lacks, or if the list holds a call no run made that
is not in EXTRA below with its reason. The last line is "N passed, N failed".
"""
import re
import sys

# Allowed although the runs this suite traces do not make them, each with
# where it is made (a one-off trace of the files, serve and state suites under
# strace saw those marked "seen"; their harnesses do not run under strace).
EXTRA = {
    "accept4": "seen: --listen accepts (serve suite)",
    "fchmod": "seen: files get exactly --file-mode (files suite)",
    "chmod": "a directory under --dir gets exactly its mode",
    "fchmodat": "chmod where the target has no chmod call (aarch64)",
    "fsync": "seen: --dir-sync each, --state-sync inline (files, state suites)",
    "syncfs": "seen: --dir-sync batch (files suite)",
    "mkdirat": "seen: --dir-layout object (files suite)",
    "mkdir": "kr_port_fs_mkdir on a target with the old call",
    "unlinkat": "seen: removed objects under --dir (files suite)",
    "unlink": "the --listen socket removed at the end",
    "rmdir": "kr_port_fs_rmdir on a target with the old call",
    "rename": "kr_port_fs_rename on a target with the old call",
    "renameat": "seen: --dir and --state-dir renames (files, state suites)",
    "renameat2": "renameat where the target has no renameat (a libc that renames with it)",
    "newfstatat": "seen: kr_port_fs_stat_at (files suite)",
    "fstat": "seen: kr_port_fs_open_read checks the file it opened (state suite)",
    "openat": "seen: the *_at calls under --dir (files suite)",
    "stat": "kr_port_fs_is_dir",
    "lstat": "kr_port_fs_stat",
    "statx": "musl's fstatat on a target whose struct stat lacks 64-bit times",
    "kill": "seen: --signal, -- PROGRAM, a worker past its deadline (files suite)",
    "nanosleep": "seen: the port's KREFLECT_FAULT_FSYNC_MS test hook (files suite)",
    "clock_gettime": "musl's fallback where the vDSO is missing",
    "exit": "musl's _exit falls back to it if exit_group returns",
    "restart_syscall": "the kernel restarts an interrupted ppoll or wait with it",
    "rt_sigreturn": "returning from a signal handler",
    "rt_sigaction": "a hook's child resets every signal before exec",
    "execve": "a hook or -- PROGRAM (only in the filter when programs are named)",
    "dup2": "a hook's standard input",
    "dup3": "a hook's standard input (aarch64)",
    "pipe2": "seen: workers and a hook's standard input (name-lookup run)",
    "wait4": "seen: reaping hooks and workers (name-lookup run)",
    "bind": "seen: musl's resolver (name-lookup run)",
    "recvmsg": "musl's resolver over TCP after a truncated answer",
    "sendmsg": "musl's resolver over TCP after a truncated answer",
    "sendmmsg": "musl's resolver sends A and AAAA queries at once",
    "brk": "seen: musl's getaddrinfo allocates its answer (name-lookup run)",
    "mmap": "seen: as brk; never PROT_EXEC",
    "mprotect": "seen: as brk; never PROT_EXEC",
    "munmap": "as brk: freeing the answer",
    "madvise": "seen: kr_port_discard (the arena's tail after a compaction)",
    "gettid": "seen: musl's fork sets the child's thread id (name-lookup run)",
    "fcntl": "seen: non-blocking sockets",
    "set_tid_address": "a static hook's start (only when programs are named; the probe runs one)",
    "arch_prctl": "a static hook's start on x86_64 (its thread pointer)",
    "set_tls": "a static hook's start on armv7 (its thread pointer)",
}

# Another name the same call has on some target (clock_gettime64 on armv7, ...).
ARCH_NAMES = {"_llseek": "lseek", "fstat64": "fstat", "fstatat64": "newfstatat",
              "clock_gettime64": "clock_gettime", "ppoll_time64": "ppoll", "fcntl64": "fcntl",
              "mmap2": "mmap", "stat64": "stat", "lstat64": "lstat", "ppoll": "poll",
              "clock_nanosleep_time64": "nanosleep"}
LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]")


def observed(paths):
    seen = {}
    for path in paths:
        after, execd = False, set()
        for line in open(path, errors="replace"):
            m = LINE.match(line)
            if not m:
                continue
            pid, name = m.group(1), m.group(2)
            if not after:
                after = name == "seccomp" and "= 0" in line
                continue
            if pid in execd:
                continue
            seen.setdefault(name, path)
            if name == "execve":
                execd.add(pid)
    return seen


def main():
    allowed = {}
    for line in open(sys.argv[1]):
        if line.strip():
            name, nr = line.split()
            allowed[name] = int(nr)
    seen = observed(sys.argv[2:])
    passed = failed = 0
    if not seen:
        print("FAIL no trace set the filter: nothing was checked")
        print("0 passed, 1 failed")
        return 1
    for name in sorted(seen):
        if name in ("socket", "clone", "fork", "vfork"):
            continue  # checked apart, with their arguments
        if name in allowed:
            passed += 1
        else:
            print("FAIL %s was called after start-up (%s) and the list lacks it" % (name, seen[name]))
            failed += 1
    for name in sorted(allowed):
        if name in seen:
            continue
        if name in EXTRA or ARCH_NAMES.get(name) in seen:
            print("extra %s: %s" % (name, EXTRA.get(name, "this target's name for a call seen")))
            passed += 1
        else:
            print("FAIL %s is allowed but no run called it and no reason is given" % name)
            failed += 1
    print("calls seen after start-up: %s" % " ".join(sorted(seen)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
