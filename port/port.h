/*
 * The platform contract: everything kreflect needs from the operating system.
 *
 * src/ calls only these functions for time, randomness, sockets, signals, files
 * and the log sink; it never includes an OS header for them. Each port (posix/
 * for Linux with musl, sim/ for deterministic tests) implements all of them.
 * I/O calls return a byte count, KR_IO_WAIT (would block; poll and retry) or
 * KR_IO_ERR (the descriptor is dead; close it).
 */
#ifndef KR_PORT_H
#define KR_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"

#define KR_IO_ERR (-1)
#define KR_IO_WAIT (-2)

/* Milliseconds on a monotonic clock; never goes back, unrelated to wall time. */
typedef int64_t kr_ms_t;

/* Now on the monotonic clock. */
kr_ms_t kr_port_now_ms(void);

/* Seconds since the epoch on the wall clock (for Retry-After dates and logs). */
int64_t kr_port_wall_seconds(void);

/*
 * Fills out[0..len) with bytes from the kernel's CSPRNG, in the shape of
 * mbedtls_hardware_poll: returns 0 and sets *olen, or -1 if no entropy is
 * available (then *olen is 0). ctx is unused.
 */
int kr_port_entropy(void *ctx, unsigned char *out, size_t len, size_t *olen);

/* Writes one complete log line (with its newline) to the log sink, in one write. */
void kr_port_log_write(const char *line, size_t len);

/* --- sockets ---------------------------------------------------------------- */

/* A resolved TCP endpoint: IPv4 or IPv6 address and port, in network order. */
struct kr_addr {
	int family;                    /* 4 or 6 */
	uint16_t port;                 /* host order */
	uint8_t ip[16];                /* 4 or 16 bytes used */
};

/*
 * Parses an IPv4 or IPv6 literal (without brackets) into *out with the given
 * port. Returns 0, or -1 if host is not an IP literal.
 */
int kr_port_parse_ip(const char *host, uint16_t port, struct kr_addr *out);

/* Formats addr as "1.2.3.4:443" or "[::1]:443" into buf (always terminated). */
void kr_port_addr_format(const struct kr_addr *addr, char *buf, size_t size);

/*
 * Starts a name lookup for host in a child process, so that a resolver that
 * stalls cannot stall the loop. Returns a descriptor that becomes readable when
 * the answer is ready, or -1 (errno-free: the log says why). The caller polls it
 * against its own deadline and then calls kr_port_resolve_finish exactly once.
 */
int kr_port_resolve_start(const char *host);

/*
 * Collects the lookup started on fd: up to max addresses into out (port set to
 * port). Returns the number found (> 0), 0 if the name does not exist or the
 * lookup failed, and KR_IO_WAIT if the answer is not complete yet. With
 * abandon != 0 the lookup is cancelled (child killed) and 0 is returned. The
 * descriptor is closed unless KR_IO_WAIT is returned.
 */
int kr_port_resolve_finish(int fd, uint16_t port, struct kr_addr *out, int max,
			   int abandon);

/*
 * TCP keepalive on every socket, so that the kernel finds a dead peer or a
 * dead link by itself: the first probe after 30 s without a byte either way,
 * then one every 10 s, and the connection fails when 3 go unanswered (60 s
 * after the last byte). Data sent and not acknowledged for 60 s fails it too
 * (TCP_USER_TIMEOUT), where the platform has these options.
 */
#define KR_PORT_KEEPALIVE_IDLE_S 30
#define KR_PORT_KEEPALIVE_INTERVAL_S 10
#define KR_PORT_KEEPALIVE_COUNT 3
#define KR_PORT_USER_TIMEOUT_MS 60000

/*
 * Opens a non-blocking TCP socket (TCP_NODELAY, keepalive as above) and starts a
 * connect to addr. Returns the descriptor (>= 0) or KR_IO_ERR. Completion is
 * signalled by writability; kr_port_connect_result then tells the outcome.
 */
int kr_port_tcp_connect(const struct kr_addr *addr);

/* 0 if the connect started on fd succeeded, else a negative errno-like value. */
int kr_port_connect_result(int fd);

/* Sends or receives without blocking: n > 0, KR_IO_WAIT, KR_IO_ERR; recv 0 = EOF. */
long kr_port_send(int fd, const void *buf, size_t len);
long kr_port_recv(int fd, void *buf, size_t len);

/* Closes fd; ignores errors (nothing useful can be done about them). */
void kr_port_close(int fd);

/* Text of the last socket or kr_port_reserve error seen on this thread (strerror of errno). */
const char *kr_port_last_error(void);

/* --- listening (the local endpoint, --listen) ------------------------------------ */

/*
 * Opens a non-blocking TCP socket listening on addr (SO_REUSEADDR, backlog
 * 64). Returns the descriptor, or KR_IO_ERR (kr_port_last_error says why).
 */
int kr_port_tcp_listen(const struct kr_addr *addr);

/*
 * Opens a non-blocking UNIX stream socket listening at path, created with
 * exactly mode (never wider, not even for a moment). A stale socket at path
 * is replaced; anything else there is left alone and KR_EINVAL returned.
 * Returns the descriptor, KR_EINVAL (path too long, not a socket) or KR_IO_ERR.
 */
int kr_port_unix_listen(const char *path, unsigned mode);

/*
 * Takes one waiting connection from the listening fd, non-blocking and
 * close-on-exec. Returns its descriptor, KR_IO_WAIT (none waiting, or a
 * transient failure such as too many open files) or KR_IO_ERR.
 */
int kr_port_accept(int fd);

/* --- waiting ------------------------------------------------------------------ */

#define KR_POLL_IN 1
#define KR_POLL_OUT 2
#define KR_POLL_ERR 4  /* error or hang-up: the descriptor should be read to learn more */

struct kr_pollfd {
	int fd;
	short want;                    /* KR_POLL_IN | KR_POLL_OUT */
	short got;                     /* set by kr_port_poll */
};

/* Most descriptors one kr_port_poll call takes: KR_PORT_POLL_MAX, which
 * config/kreflect_config.h sizes for KR_SERVE_MAX_CONNS (loop.h checks the two). */

/*
 * Waits until a descriptor is ready or timeout_ms passes (-1 = forever).
 * Returns the number of ready descriptors, 0 on timeout or interruption,
 * KR_IO_ERR on failure.
 */
int kr_port_poll(struct kr_pollfd *fds, int n, int timeout_ms);

/* --- signals -------------------------------------------------------------------- */

/*
 * Blocks SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGUSR1 and SIGUSR2 and returns a
 * descriptor that becomes readable when one arrives (signalfd); SIGPIPE is
 * ignored. Returns -1 on failure.
 */
int kr_port_signals_open(void);

/* Reads one pending signal number from fd; 0 if none is pending. */
int kr_port_signal_read(int fd);

/*
 * A descriptor that another thread or a signal handler makes readable
 * (kr_client_wakeup): an eventfd, or a self-pipe where there is none.
 * Open returns it or -1; signal is async-signal-safe and never blocks; drain
 * makes it unreadable again. Closed with kr_port_close.
 */
int kr_port_wakeup_open(void);
void kr_port_wakeup_signal(int fd);
void kr_port_wakeup_drain(int fd);

/* --- memory ------------------------------------------------------------------- */

/*
 * Tells the kernel that p[0..len) holds nothing worth keeping: its whole
 * pages go back to the system (and read as zeros when touched again). Used
 * on the arena's tail after compaction, so RSS follows the bytes held.
 */
void kr_port_discard(void *p, size_t len);

/*
 * Start-up only: len bytes of zeroed, 16-byte aligned memory for the whole
 * run, reserved once before the loop starts (the capacities chosen by
 * flags). Untouched pages cost no RAM. NULL if the system refuses
 * (kr_port_last_error says why). Never
 * given back; never called after start-up (`make test-malloc` checks).
 */
void *kr_port_reserve(size_t len);

/* --- output ------------------------------------------------------------------- */

struct kr_iov {
	const void *base;
	size_t len;
};

/*
 * Writes all of iov[0..n) to fd (retrying partial writes; waiting when fd is
 * non-blocking and full). Returns 0 or KR_IO_ERR. The iov array is modified.
 */
int kr_port_writev_all(int fd, struct kr_iov *iov, int n);

/* --- files ---------------------------------------------------------------------- */

/*
 * Reads the whole file at path into buf (at most size bytes). Returns the
 * length, or a negative KR_E code: KR_ENOENT, KR_ETOOBIG (the file is larger
 * than size), KR_EIO.
 */
long kr_port_read_file(const char *path, void *buf, size_t size);

/* --- file system ---------------------------------------------------------------- */

/*
 * Path-based calls for the directory sink. None follows a symbolic link in
 * the last component except kr_port_fs_is_dir; modes are applied exactly (the
 * umask does not apply). Failures return a negative KR_E code and leave the
 * reason for kr_port_fs_error().
 */

#define KR_FS_NONE 0   /* nothing at the path */
#define KR_FS_FILE 1   /* a regular file */
#define KR_FS_DIR 2    /* a directory */
#define KR_FS_OTHER 3  /* a symbolic link, device, fifo or socket */

struct kr_fs_stat {
	int type;                      /* KR_FS_... */
	unsigned mode;                 /* permission bits, 07777 */
	uint64_t size;
	uint64_t dev;
	uint64_t ino;
	int64_t mtime_ns;              /* modification time, ns since the epoch */
};

/*
 * Describes path itself (lstat). Returns 0 with st->type KR_FS_NONE when
 * nothing is there, 0 with st filled otherwise, or KR_EIO.
 */
int kr_port_fs_stat(const char *path, struct kr_fs_stat *st);

/*
 * Returns 0 if path, following symbolic links, is a directory; KR_ENOENT if
 * nothing is there, KR_EINVAL if it is something else, KR_EIO.
 */
int kr_port_fs_is_dir(const char *path);

/*
 * Creates directory path with exactly mode. Returns 0 if it was created, 1 if
 * something (of any type: check it) was already there, KR_ENOENT if the parent
 * is missing, KR_EIO.
 */
int kr_port_fs_mkdir(const char *path, unsigned mode);

/*
 * Opens the regular file path for reading. Returns the descriptor, KR_ENOENT,
 * KR_EINVAL (a symbolic link, directory or other non-regular file), KR_EIO.
 */
int kr_port_fs_open_read(const char *path);

/* Reads up to len bytes from fd: the count (> 0), 0 at the end, KR_EIO. */
long kr_port_fs_read(int fd, void *buf, size_t len);

/*
 * Creates path as a new regular file with exactly mode, open for writing.
 * Returns the descriptor, KR_EINVAL if something is already at path (never
 * opened or followed), KR_ENOENT (no parent directory), KR_EIO.
 */
int kr_port_fs_create(const char *path, unsigned mode);

/*
 * Opens the existing regular file path for appending. Returns the descriptor,
 * KR_ENOENT, KR_EINVAL (not a regular file), KR_EIO.
 */
int kr_port_fs_open_append(const char *path);

/* Writes all of buf[0..len) to fd (retrying partial writes). Returns 0 or KR_EIO. */
int kr_port_fs_write(int fd, const void *buf, size_t len);

/* Flushes fd's data and metadata to the device (fsync). Returns 0 or KR_EIO. */
int kr_port_fs_sync(int fd);

/* Closes fd. Returns 0, or KR_EIO when close reports a delayed write error. */
int kr_port_fs_close(int fd);

/* Renames from over to (atomically replacing a file there). Returns 0 or KR_EIO. */
int kr_port_fs_rename(const char *from, const char *to);

/* Removes the file (or link) path. Returns 0, KR_ENOENT, KR_EIO. */
int kr_port_fs_unlink(const char *path);

/* Removes the directory path if it is empty. Returns 0, KR_ENOENT, KR_EIO (also not empty). */
int kr_port_fs_rmdir(const char *path);

/* Flushes directory path (its entries: renames, removals) to the device. Returns 0 or KR_EIO. */
int kr_port_fs_sync_dir(const char *path);

/*
 * The same calls relative to an open directory, for the directory sink: a
 * tree someone else can change (a subdirectory swapped for a symbolic link
 * between a check and a write) can never redirect them outside it. name is
 * always one component: "", ".", ".." and any name with a '/' are refused
 * with KR_EINVAL, and no call follows a symbolic link at name. Descriptors
 * are closed with kr_port_fs_close.
 */

/* Opens directory path (following links: the caller's own root). fd, KR_ENOENT, KR_EINVAL (not a directory), KR_EIO. */
int kr_port_fs_open_dir(const char *path);

/* Opens the subdirectory name of dirfd. fd, KR_ENOENT, KR_EINVAL (a link, not a directory), KR_EIO. */
int kr_port_fs_open_dir_at(int dirfd, const char *name);

/* Describes name in dirfd (never followed). 0 (st->type KR_FS_NONE if absent) or KR_EINVAL, KR_EIO. */
int kr_port_fs_stat_at(int dirfd, const char *name, struct kr_fs_stat *st);

/* Creates directory name in dirfd with exactly mode. 0, 1 (something is there), KR_ENOENT, KR_EINVAL, KR_EIO. */
int kr_port_fs_mkdir_at(int dirfd, const char *name, unsigned mode);

/* As kr_port_fs_open_read, kr_port_fs_create and kr_port_fs_open_append, for name in dirfd. */
int kr_port_fs_open_read_at(int dirfd, const char *name);
int kr_port_fs_create_at(int dirfd, const char *name, unsigned mode);
int kr_port_fs_open_append_at(int dirfd, const char *name);

/* Renames from in fromfd over to in tofd. Returns 0, KR_EINVAL, KR_EIO. */
int kr_port_fs_rename_at(int fromfd, const char *from, int tofd, const char *to);

/* Removes the file (or link) name in dirfd. Returns 0, KR_ENOENT, KR_EINVAL, KR_EIO. */
int kr_port_fs_unlink_at(int dirfd, const char *name);

/* Removes the empty directory name in dirfd. Returns 0, KR_ENOENT, KR_EINVAL, KR_EIO (also not empty). */
int kr_port_fs_rmdir_at(int dirfd, const char *name);

/*
 * Flushes everything written to the file system that holds fd (syncfs): one
 * call for a batch of files and directories instead of an fsync each.
 * Returns 0 or KR_EIO.
 */
int kr_port_fs_sync_all(int fd);

/*
 * Finishes a written file in a child process, so that a slow device stalls
 * the child and not the loop: fsync(fd); then, with tmp, rename(tmp, path);
 * then, with dir, an fsync of directory dir; stopping at the first failure
 * (the order the caller would follow inline). fd stays the caller's to close
 * (the child holds its own). Returns a descriptor that becomes readable when
 * the child is done, for kr_port_fs_commit_finish, or KR_EIO (no child: do
 * the steps inline).
 */
int kr_port_fs_commit_start(int fd, const char *tmp, const char *path, const char *dir);

/*
 * The outcome of the commit started on cfd: KR_IO_WAIT (still running;
 * never with wait, which blocks until the child is done), 0 (every step
 * done), or KR_EIO with *step the step that failed (1 the fsync, 2 the
 * rename, 3 the directory's fsync; kr_port_fs_error() says why). Unless
 * KR_IO_WAIT, cfd is closed and the child collected.
 */
int kr_port_fs_commit_finish(int cfd, int wait, int *step);

/* Text of the last failed kr_port_fs_ call (strerror of errno); static storage. */
const char *kr_port_fs_error(void);

/* --- processes ------------------------------------------------------------------ */

/*
 * Starts a program: argv[0] (a name without '/' is looked up on PATH, as
 * execvp does) with argv, no shell, signals unblocked and at their defaults,
 * the environment plus the "NAME=value" strings in env (NULL-terminated; may
 * be NULL). With stdin_data, stdin_data[0..len) (at most 64 KiB) is its
 * standard input, then end of file; with NULL it shares kreflect's. Waits
 * only until the exec succeeded or failed, never for the program. Returns
 * its pid (> 0), or KR_ENOENT (no such program) or KR_EIO (not executable,
 * fork failed, ...) with the reason in why[0..size).
 */
int kr_port_spawn(const char *const *argv, const char *const *env, const void *stdin_data,
		  size_t len, char *why, size_t size);

/*
 * Collects one child that has ended, without waiting: any child, also an
 * orphan that was handed to kreflect as PID 1. Returns its pid and sets
 * *code to its exit status, or to 128 + the signal that killed it; returns
 * 0 if no child has ended.
 */
int kr_port_reap(int *code);

/* Sends signal sig to pid. Returns 0 or KR_IO_ERR. */
int kr_port_kill(int pid, int sig);

/* The number of a signal name ("HUP", "SIGHUP", "1"), or -1. */
int kr_port_signal_number(const char *name);

/* --- least privilege (port/posix/sandbox.c; other ports: nothing to apply) --------- */

#define KR_SANDBOX_AUTO 0              /* apply what the kernel supports */
#define KR_SANDBOX_ON 1                /* all of it, or fail */
#define KR_SANDBOX_OFF 2
/* Room for every source by construction (kr_client_sandbox checks it at compile
 * time): a host's four of each kind, plus the client's five files re-read (its
 * token; --listen's token, certificate, key and client CA) or its state
 * directory, and its one API server or proxy port. */
#define KR_SANDBOX_PATHS 9             /* paths of each kind */
#define KR_SANDBOX_PORTS 5             /* TCP ports of each kind */

/*
 * What the process still needs once start-up is over. Paths are absolute or
 * relative to the working directory; NULL or "" ends each list. A port of 0
 * ends each port list. uid/gid -1 keep the current ones.
 */
struct kr_sandbox {
	int mode;                                /* KR_SANDBOX_... */
	const char *read[KR_SANDBOX_PATHS];      /* files re-read (a token, a pid file) */
	const char *read_dir[KR_SANDBOX_PATHS];  /* directories read (a rotated token's) */
	const char *write_dir[KR_SANDBOX_PATHS]; /* trees written: --dir, --state-dir */
	const char *remove_in[KR_SANDBOX_PATHS]; /* directories a file is removed from (a socket's) */
	const char *exec[KR_SANDBOX_PATHS];      /* programs run (a hook, -- PROGRAM) */
	uint16_t connect[KR_SANDBOX_PORTS];      /* TCP ports connected to */
	uint16_t bind[KR_SANDBOX_PORTS];         /* TCP ports listened on (already bound) */
	int lookups;                             /* names are looked up: UDP, /etc/hosts, resolv.conf */
	int filter;                              /* 1: the system-call allow list too */
	int signal_others;                       /* 1: signals to processes not started here */
	long uid, gid;                           /* the user and group to become; -1 keep */
};

/*
 * Applies sb to this process and every child it starts from now on: the
 * user and group, no new privileges, the file system and TCP limits
 * (Landlock) and the system-call allow list (seccomp). Nothing of it can be
 * undone. Returns 0 with what was applied in done[0..size) (one line, no
 * newline), or KR_ENOTSUP (KR_SANDBOX_ON and a layer the kernel lacks) or
 * KR_EIO / KR_EINVAL (a path or id that cannot be used) with the reason
 * in done.
 */
int kr_port_sandbox(const struct kr_sandbox *sb, char *done, size_t size);

/*
 * The system calls the allow list holds on this target, one "name number"
 * per line, into buf (always terminated). Returns the count.
 */
int kr_port_sandbox_calls(char *buf, size_t size);

/* --- memory (port/common/mem.c) ---------------------------------------------- */

/* Zeroes mem[0..len), writing only the pages that are not zero already: an
 * untouched page of kr_port_reserve's memory or of .bss stays out of RSS. */
void kr_port_zero(void *mem, size_t len);

/* --- CPU (port/common/cpu.c) ------------------------------------------------- */

/* 1 if the CPU has the AES and carry-less multiply instructions that
 * port/crypto/gcm.c's hardware AES-GCM uses (x86_64, aarch64), else 0. */
int kr_port_cpu_has_aes(void);

#endif /* KR_PORT_H */
