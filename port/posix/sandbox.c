/*
 * The posix port: least privilege once start-up is over (kr_port_sandbox).
 *
 * Four layers, each applied only where the kernel has it:
 *   - the new user and group (--user/--group), after every file and the
 *     listening socket are open;
 *   - PR_SET_NO_NEW_PRIVS: no exec'd program gains privileges (set-id bits,
 *     file capabilities), and the two below need it;
 *   - Landlock: files only read, trees written and programs run that the
 *     caller named; TCP connect and bind only to the ports it named (ABI 4+);
 *   - seccomp: only the system calls the port makes after start-up; socket()
 *     only for TCP (and UDP when names are looked up), a fork only as fork.
 * The children (name lookups, state commits, hooks) inherit all of them: the
 * filter permits execve only when the caller named programs, and Landlock's
 * execute right is what limits which programs those are.
 *
 * musl has neither header: the structures and constants below are the
 * kernel's ABI (include/uapi/linux/landlock.h, seccomp.h, filter.h, audit.h).
 */
#define _GNU_SOURCE
#include "fmt.h"
#include "kreflect.h"
#include "port.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* --- Landlock (kernel ABI) ------------------------------------------------------ */

#define LL_CREATE_RULESET_VERSION 1u
#define LL_RULE_PATH_BENEATH 1
#define LL_RULE_NET_PORT 2

#define LL_FS_EXECUTE (1ull << 0)
#define LL_FS_WRITE_FILE (1ull << 1)
#define LL_FS_READ_FILE (1ull << 2)
#define LL_FS_READ_DIR (1ull << 3)
#define LL_FS_REMOVE_DIR (1ull << 4)
#define LL_FS_REMOVE_FILE (1ull << 5)
#define LL_FS_MAKE_CHAR (1ull << 6)
#define LL_FS_MAKE_DIR (1ull << 7)
#define LL_FS_MAKE_REG (1ull << 8)
#define LL_FS_MAKE_SOCK (1ull << 9)
#define LL_FS_MAKE_FIFO (1ull << 10)
#define LL_FS_MAKE_BLOCK (1ull << 11)
#define LL_FS_MAKE_SYM (1ull << 12)
#define LL_FS_REFER (1ull << 13)       /* ABI 2 */
#define LL_FS_TRUNCATE (1ull << 14)    /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ull << 15)   /* ABI 5 */
#define LL_NET_BIND_TCP (1ull << 0)    /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ull << 1) /* ABI 4 */
#define LL_SCOPE_ABSTRACT_UNIX (1ull << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ull << 1)        /* ABI 6 */

/* The rights a rule on a file (not a directory) may carry. */
#define LL_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | \
			LL_FS_IOCTL_DEV)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;   /* ABI 4 */
	uint64_t scoped;               /* ABI 6 */
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct ll_net_port_attr {
	uint64_t allowed_access;
	uint64_t port;
};

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444  /* the same number on every architecture */
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* --- seccomp and classic BPF (kernel ABI) ------------------------------------------ */

#define SECCOMP_RET_KILL_PROCESS_ 0x80000000u
#define SECCOMP_RET_ERRNO_ 0x00050000u
#define SECCOMP_RET_ALLOW_ 0x7fff0000u

struct bpf_insn {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};

struct bpf_prog {
	unsigned short len;
	struct bpf_insn *insns;
};

#define BPF_LD_W_ABS 0x20    /* BPF_LD | BPF_W | BPF_ABS */
#define BPF_JEQ_K 0x15       /* BPF_JMP | BPF_JEQ | BPF_K */
#define BPF_JGE_K 0x35       /* BPF_JMP | BPF_JGE | BPF_K */
#define BPF_AND_K 0x54       /* BPF_ALU | BPF_AND | BPF_K */
#define BPF_RET_K 0x06       /* BPF_RET | BPF_K */

/* struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]. Low words: little-endian. */
#define SD_NR 0
#define SD_ARCH 4
#define SD_ARG_LO(i) (16 + 8 * (i))

#if defined(__x86_64__)
#define AUDIT_ARCH_ 0xc000003eu
#elif defined(__aarch64__)
#define AUDIT_ARCH_ 0xc00000b7u
#elif defined(__arm__)
#define AUDIT_ARCH_ 0x40000028u
#endif

#define SIGCHLD_ 17

/*
 * The system calls the posix port (and musl under it) makes once start-up
 * is over, in the loop and in the children it forks; the number each target
 * uses comes from its own <sys/syscall.h>, so aarch64 and armv7 (mmap2,
 * _llseek, clock_gettime64, ppoll_time64, no fork or open) get theirs.
 * tests/sandbox lists what the suites really call under strace and checks it
 * against this list (`kreflect --sandbox-calls` prints it). socket and clone
 * are checked apart, with their arguments.
 */
#define CALL(name) { SYS_##name, #name, 0 }
#define CALL_NOEXEC(name) { SYS_##name, #name, 1 }
static const struct call {
	int nr;
	const char *name;
	int noexec;                    /* allowed only without PROT_EXEC (its third argument) */
} calls[] = {
	/* the loop: sockets, poll, signals, time, the log */
	CALL(read), CALL(write), CALL(writev), CALL(close), CALL(connect), CALL(accept4),
	CALL(sendto), CALL(recvfrom), CALL(setsockopt), CALL(getsockopt), CALL(ppoll),
	CALL(fcntl), CALL(rt_sigprocmask), CALL(rt_sigaction), CALL(rt_sigreturn),
	CALL(getrandom), CALL(kill), CALL(madvise), CALL(nanosleep), CALL(gettid),
	CALL(exit_group), CALL(exit), CALL(restart_syscall), CALL(wait4),
#ifdef SYS_poll
	CALL(poll),
#endif
#ifdef SYS_clock_gettime
	CALL(clock_gettime),
#endif
#ifdef SYS_clock_nanosleep_time64
	CALL(clock_nanosleep_time64),
#endif
#ifdef SYS_clock_gettime64
	CALL(clock_gettime64),
#endif
#ifdef SYS_ppoll_time64
	CALL(ppoll_time64),
#endif
#ifdef SYS_fcntl64
	CALL(fcntl64),
#endif
	/* files: --dir, --state-dir, the token file, the --signal pid file */
	CALL(openat), CALL(mkdirat), CALL(unlinkat), CALL(fsync), CALL(syncfs), CALL(pipe2),
	CALL(renameat2), CALL(fchmod), CALL(fchmodat),
#ifdef SYS_open
	/* musl calls the old path calls where the target has them (x86_64, armv7) */
	CALL(open), CALL(stat), CALL(lstat), CALL(mkdir), CALL(rename), CALL(unlink), CALL(rmdir),
	CALL(chmod),
#endif
#ifdef SYS_stat64
	CALL(stat64), CALL(lstat64),
#endif
#ifdef SYS_renameat
	CALL(renameat),
#endif
#ifdef SYS_newfstatat
	CALL(newfstatat),
#endif
#ifdef SYS_fstatat64
	CALL(fstatat64),
#endif
#ifdef SYS_fstat64
	CALL(fstat64),
#else
	CALL(fstat),
#endif
#ifdef SYS_statx
	CALL(statx),
#endif
	/* a child between fork and exec (hooks, the supervised program), and a
	 * static program's start: its thread pointer and thread id (the filter
	 * holds these only when programs are named) */
	CALL(execve), CALL(set_tid_address),
#ifdef SYS_arch_prctl
	CALL(arch_prctl),
#endif
#ifdef __ARM_NR_set_tls
	{ __ARM_NR_set_tls, "set_tls", 0 },
#endif
#ifdef SYS_dup2
	CALL(dup2),
#else
	CALL(dup3),
#endif
	/* musl's resolver in the lookup child: /etc/hosts, resolv.conf, UDP to the name server */
	CALL(bind), CALL(recvmsg), CALL(sendmsg), CALL(sendmmsg),
	/* musl's getaddrinfo allocates its answer in the lookup child; never executable memory */
	CALL(brk), CALL(munmap), CALL_NOEXEC(mprotect),
#ifdef SYS_mmap2
	CALL_NOEXEC(mmap2),
#else
	CALL_NOEXEC(mmap),
#endif
};

#define NCALLS (sizeof(calls) / sizeof(calls[0]))

/* The calls only a program being started needs: in the filter only when programs are named. */
static int exec_only(int nr)
{
	return nr == SYS_execve || nr == SYS_set_tid_address
#ifdef SYS_arch_prctl
	       || nr == SYS_arch_prctl
#endif
#ifdef __ARM_NR_set_tls
	       || nr == __ARM_NR_set_tls
#endif
	       ;
}

/* Everything the filter can hold: the calls, socket's and clone's checks, the frame. */
#define FILTER_MAX (NCALLS + 32)

/* Jump targets, resolved once the program is complete: the next instruction or a label. */
enum { NEXT, SKIP1, L_CLONE, L_DOMAIN, L_NOEXEC, L_DENY, L_ALLOW, NLABELS };

static struct bpf_insn filter[FILTER_MAX];
static uint8_t jt_to[FILTER_MAX], jf_to[FILTER_MAX];
static size_t nfilter, label_at[NLABELS];

static void emit(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
	filter[nfilter].code = code;
	filter[nfilter].k = k;
	filter[nfilter].jt = filter[nfilter].jf = 0;
	jt_to[nfilter] = jt;
	jf_to[nfilter] = jf;
	nfilter++;
}

static void label(int l)
{
	label_at[l] = nfilter;
}

#define AF_INET_ 2
#define AF_INET6_ 10
#define SOCK_TYPE_MASK_ 0xf
#define SOCK_STREAM_ 1
#define SOCK_DGRAM_ 2
#define PROT_EXEC_ 4

/*
 * The filter: a call made for another architecture (x32 on x86_64 too)
 * kills the process; a listed call is allowed; socket() only for AF_INET and
 * AF_INET6 streams (and datagrams with udp: the resolver's); clone only as a
 * plain fork (no thread, no namespace); mmap and mprotect never for
 * executable memory; execve only with exec; anything else
 * fails with EPERM, which the port reports as an error in words.
 */
static void build_filter(int udp, int exec)
{
	size_t i;

	nfilter = 0;
	emit(BPF_LD_W_ABS, SD_ARCH, NEXT, NEXT);
	emit(BPF_JEQ_K, AUDIT_ARCH_, SKIP1, NEXT);
	emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS_, NEXT, NEXT);
	emit(BPF_LD_W_ABS, SD_NR, NEXT, NEXT);
#if defined(__x86_64__)
	emit(BPF_JGE_K, 0x40000000u, NEXT, SKIP1);   /* the x32 ABI */
	emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS_, NEXT, NEXT);
#endif
	for (i = 0; i < NCALLS; i++)
		if (exec || !exec_only(calls[i].nr))
			emit(BPF_JEQ_K, (uint32_t)calls[i].nr, calls[i].noexec ? L_NOEXEC : L_ALLOW, NEXT);
	emit(BPF_JEQ_K, SYS_socket, NEXT, L_CLONE);
	emit(BPF_LD_W_ABS, SD_ARG_LO(1), NEXT, NEXT);
	emit(BPF_AND_K, SOCK_TYPE_MASK_, NEXT, NEXT);
	emit(BPF_JEQ_K, SOCK_STREAM_, L_DOMAIN, NEXT);
	emit(BPF_JEQ_K, SOCK_DGRAM_, udp ? L_DOMAIN : L_DENY, L_DENY);
	label(L_CLONE);
#ifdef SYS_fork
	emit(BPF_JEQ_K, SYS_fork, L_ALLOW, NEXT);
#endif
	emit(BPF_JEQ_K, SYS_clone, NEXT, L_DENY);
	emit(BPF_LD_W_ABS, SD_ARG_LO(0), NEXT, NEXT);
	emit(BPF_JEQ_K, SIGCHLD_, L_ALLOW, L_DENY);
	label(L_DOMAIN);
	emit(BPF_LD_W_ABS, SD_ARG_LO(0), NEXT, NEXT);
	emit(BPF_JEQ_K, AF_INET_, L_ALLOW, NEXT);
	emit(BPF_JEQ_K, AF_INET6_, L_ALLOW, L_DENY);
	label(L_NOEXEC);
	emit(BPF_LD_W_ABS, SD_ARG_LO(2), NEXT, NEXT);
	emit(BPF_AND_K, PROT_EXEC_, NEXT, NEXT);
	emit(BPF_JEQ_K, 0, L_ALLOW, L_DENY);
	label(L_DENY);
	emit(BPF_RET_K, SECCOMP_RET_ERRNO_ | EPERM, NEXT, NEXT);
	label(L_ALLOW);
	emit(BPF_RET_K, SECCOMP_RET_ALLOW_, NEXT, NEXT);
	/* Labels become offsets (at most 255 ahead: FILTER_MAX keeps them so). */
	for (i = 0; i < nfilter; i++) {
		if (filter[i].code != BPF_JEQ_K && filter[i].code != BPF_JGE_K)
			continue;
		filter[i].jt = jt_to[i] >= L_CLONE ? (uint8_t)(label_at[jt_to[i]] - i - 1) : jt_to[i];
		filter[i].jf = jf_to[i] >= L_CLONE ? (uint8_t)(label_at[jf_to[i]] - i - 1) : jf_to[i];
	}
}

int kr_port_sandbox_calls(char *buf, size_t size)
{
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < NCALLS; i++) {
		int n = kr_snprintf(buf + used, size - used, "%s %d\n", calls[i].name, calls[i].nr);

		if (n < 0 || (size_t)n >= size - used)
			break;
		used += (size_t)n;
	}
	return (int)i;
}

/* --- applying it ------------------------------------------------------------------- */

struct apply {
	int mode;
	char *done;                    /* what was applied, for the one log line */
	size_t size, used;
	char *why;                     /* a failure's reason */
	size_t why_size;
};

static void said(struct apply *a, const char *first, const char *second)
{
	int n = kr_snprintf(a->done + a->used, a->size - a->used, "%s%s", first, second);

	if (n > 0 && (size_t)n < a->size - a->used)
		a->used += (size_t)n;
}

/* Where the kernel lacks a layer: under ON a failure, under AUTO a note. */
static int lacking(struct apply *a, const char *what, int err)
{
	if (a->mode == KR_SANDBOX_ON) {
		kr_snprintf(a->why, a->why_size, "--sandbox on: %s is not available here (%s)", what,
			    strerror(err));
		return KR_ENOTSUP;
	}
	said(a, ", no ", what);
	return 0;
}

static long ll_add_path(int ruleset, const char *path, uint64_t access, uint64_t handled,
			char *why, size_t size)
{
	struct ll_path_beneath_attr pb;
	struct stat st;
	long r;
	int fd;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		kr_snprintf(why, size, "sandbox: %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	memset(&pb, 0, sizeof(pb));
	pb.allowed_access = (S_ISDIR(st.st_mode) ? access : access & LL_FILE_RIGHTS) & handled;
	pb.parent_fd = fd;
	r = syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0);
	if (r != 0)
		kr_snprintf(why, size, "sandbox: Landlock refused a rule for %s: %s", path, strerror(errno));
	close(fd);
	return r;
}

static long ll_add_port(int ruleset, uint16_t port, uint64_t access)
{
	struct ll_net_port_attr np;

	np.allowed_access = access;
	np.port = port;
	return syscall(SYS_landlock_add_rule, ruleset, LL_RULE_NET_PORT, &np, 0);
}

#define LL_WRITE_TREE (LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_REMOVE_DIR | \
		       LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_REFER | \
		       LL_FS_TRUNCATE)

static const char *const resolver_files[] = { "/etc/resolv.conf", "/etc/hosts" };

/* A sanitizer build (tests only): LeakSanitizer reads /proc/PID/task at exit. */
#if defined(__SANITIZE_ADDRESS__)
#define KR_SANDBOX_PROC_READ 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KR_SANDBOX_PROC_READ 1
#endif
#endif
#ifndef KR_SANDBOX_PROC_READ
#define KR_SANDBOX_PROC_READ 0
#endif

/* The Landlock domain: 0 (applied or noted as lacking), else a KR_E code with a->why. */
static int landlock(struct apply *a, const struct kr_sandbox *sb)
{
	struct ll_ruleset_attr attr;
	uint64_t fs = (LL_FS_MAKE_SYM << 1) - 1;  /* ABI 1: bits 0 to 12 */
	size_t attr_size = sizeof(attr.handled_access_fs), i;
	long abi, ruleset;
	int err = 0;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 0)
		return lacking(a, "Landlock", errno);
	memset(&attr, 0, sizeof(attr));
	if (abi >= 2)
		fs |= LL_FS_REFER;
	if (abi >= 3)
		fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LL_FS_IOCTL_DEV;
	attr.handled_access_fs = fs;
	if (abi >= 4) {
		attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
		attr_size = offsetof(struct ll_ruleset_attr, scoped);
	}
	if (abi >= 6) {
		/* Signals only to processes started inside the domain (hooks, workers), unless --signal. */
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | (sb->signal_others ? 0 : LL_SCOPE_SIGNAL);
		attr_size = sizeof(attr);
	}
	ruleset = syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0)
		return lacking(a, "Landlock", errno);
	for (i = 0; !err && i < KR_SANDBOX_PATHS && sb->read[i] && *sb->read[i]; i++)
		err = ll_add_path((int)ruleset, sb->read[i], LL_FS_READ_FILE, fs, a->why, a->why_size) != 0;
	for (i = 0; !err && i < KR_SANDBOX_PATHS && sb->read_dir[i] && *sb->read_dir[i]; i++)
		err = ll_add_path((int)ruleset, sb->read_dir[i], LL_FS_READ_FILE | LL_FS_READ_DIR, fs,
				  a->why, a->why_size) != 0;
	for (i = 0; !err && i < KR_SANDBOX_PATHS && sb->write_dir[i] && *sb->write_dir[i]; i++)
		err = ll_add_path((int)ruleset, sb->write_dir[i], LL_WRITE_TREE, fs, a->why, a->why_size) != 0;
	for (i = 0; !err && i < KR_SANDBOX_PATHS && sb->remove_in[i] && *sb->remove_in[i]; i++)
		err = ll_add_path((int)ruleset, sb->remove_in[i], LL_FS_REMOVE_FILE, fs, a->why,
				  a->why_size) != 0;
	for (i = 0; !err && i < KR_SANDBOX_PATHS && sb->exec[i] && *sb->exec[i]; i++)
		err = ll_add_path((int)ruleset, sb->exec[i], LL_FS_EXECUTE | LL_FS_READ_FILE, fs, a->why,
				  a->why_size) != 0;
	/* The resolver's files where they exist (a gateway may have no /etc/hosts). */
	for (i = 0; !err && sb->lookups && i < sizeof(resolver_files) / sizeof(resolver_files[0]); i++)
		if (access(resolver_files[i], F_OK) == 0)
			err = ll_add_path((int)ruleset, resolver_files[i], LL_FS_READ_FILE, fs, a->why,
					  a->why_size) != 0;
	if (!err && KR_SANDBOX_PROC_READ)
		err = ll_add_path((int)ruleset, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, fs, a->why,
				  a->why_size) != 0;
	for (i = 0; !err && abi >= 4 && i < KR_SANDBOX_PORTS && sb->connect[i]; i++)
		if (ll_add_port((int)ruleset, sb->connect[i], LL_NET_CONNECT_TCP) != 0) {
			kr_snprintf(a->why, a->why_size, "sandbox: Landlock refused port %u: %s",
				    sb->connect[i], strerror(errno));
			err = 1;
		}
	for (i = 0; !err && abi >= 4 && i < KR_SANDBOX_PORTS && sb->bind[i]; i++)
		if (ll_add_port((int)ruleset, sb->bind[i], LL_NET_BIND_TCP) != 0) {
			kr_snprintf(a->why, a->why_size, "sandbox: Landlock refused port %u: %s",
				    sb->bind[i], strerror(errno));
			err = 1;
		}
	if (!err && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
		kr_snprintf(a->why, a->why_size, "sandbox: unable to enter the Landlock domain: %s",
			    strerror(errno));
		err = 1;
	}
	close((int)ruleset);
	if (err)
		return KR_EIO;
	said(a, ", Landlock ABI ", abi >= 7 ? "7+" : abi >= 4 ? "4-6" : "1-3");
	said(a, abi >= 6 ? (sb->signal_others ? " (files, TCP ports, abstract sockets)"
			    : " (files, TCP ports, signals, abstract sockets)")
		 : abi >= 4 ? " (files, TCP ports)" : " (files only)", "");
	return 0;
}

static int seccomp(struct apply *a, const struct kr_sandbox *sb)
{
	struct bpf_prog prog;
	char n[16];

#ifdef __GLIBC__
	/* The list is musl's calls (glibc forks with other clone flags, opens with
	 * openat, ...): a glibc build (the sanitizer tests) goes without it. */
	return lacking(a, "seccomp (its allow list is musl's; this is a glibc build)", ENOTSUP);
#endif
	build_filter(sb->lookups, sb->exec[0] && *sb->exec[0]);
	prog.len = (unsigned short)nfilter;
	prog.insns = filter;
	/* seccomp() itself, no prctl fallback: an emulator that answers ENOSYS (valgrind,
	 * qemu-user) would otherwise get a filter over its own calls through prctl. */
	if (syscall(SYS_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, &prog) != 0) {
		if (errno == EINVAL || errno == ENOSYS)
			return lacking(a, "seccomp", errno);
		kr_snprintf(a->why, a->why_size, "sandbox: unable to set the system-call filter: %s",
			    strerror(errno));
		return KR_EIO;
	}
	kr_snprintf(n, sizeof(n), "%zu", nfilter);
	said(a, ", seccomp: instructions ", n);
	said(a, sb->lookups ? " (TCP and UDP for name lookups)" : " (TCP only)", "");
	return 0;
}

/* Each directory in dirs must be writable by the new user, checked while still root. */
static int writable(struct apply *a, const char *const *dirs, const struct kr_sandbox *sb)
{
	uid_t uid = sb->uid >= 0 ? (uid_t)sb->uid : getuid();
	gid_t gid = sb->gid >= 0 ? (gid_t)sb->gid : getgid();
	struct stat st;
	size_t i;

	for (i = 0; i < KR_SANDBOX_PATHS && dirs[i] && *dirs[i]; i++) {
		if (stat(dirs[i], &st) != 0) {
			kr_snprintf(a->why, a->why_size, "sandbox: %s: %s", dirs[i], strerror(errno));
			return -1;
		}
		if (uid == 0 || (st.st_uid == uid && (st.st_mode & 0300) == 0300) ||
		    (st.st_uid != uid && st.st_gid == gid && (st.st_mode & 0030) == 0030) ||
		    (st.st_uid != uid && st.st_gid != gid && (st.st_mode & 0003) == 0003))
			continue;
		kr_snprintf(a->why, a->why_size, "sandbox: user %ld (group %ld) could not write %s "
			    "(owner %ld:%ld, mode %u%u%u%u): chown it or choose another --user",
			    (long)uid, (long)gid, dirs[i], (long)st.st_uid, (long)st.st_gid,
			    (unsigned)(st.st_mode >> 9) & 7, (unsigned)(st.st_mode >> 6) & 7,
			    (unsigned)(st.st_mode >> 3) & 7, (unsigned)st.st_mode & 7);
		return -1;
	}
	return 0;
}

/* The new group and user: groups dropped first, the user last (it takes the right to change). */
static int become(struct apply *a, const struct kr_sandbox *sb)
{
	char n[48];

	if (sb->uid < 0 && sb->gid < 0)
		return 0;
	if (writable(a, sb->write_dir, sb) || writable(a, sb->remove_in, sb))
		return KR_EINVAL;
	if (sb->gid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)sb->gid) != 0)) {
		kr_snprintf(a->why, a->why_size, "sandbox: unable to become group %ld: %s", sb->gid,
			    strerror(errno));
		return KR_EIO;
	}
	if (sb->uid >= 0 && setuid((uid_t)sb->uid) != 0) {
		kr_snprintf(a->why, a->why_size, "sandbox: unable to become user %ld: %s", sb->uid,
			    strerror(errno));
		return KR_EIO;
	}
	/* Root must be gone for good: setuid(0) has to fail now. */
	if (sb->uid > 0 && setuid(0) == 0) {
		kr_snprintf(a->why, a->why_size, "sandbox: user %ld could become root again", sb->uid);
		return KR_EIO;
	}
	kr_snprintf(n, sizeof(n), "uid %ld gid %ld", (long)getuid(), (long)getgid());
	said(a, ", ", n);
	return 0;
}

int kr_port_sandbox(const struct kr_sandbox *sb, char *done, size_t size)
{
	struct apply a;
	int r;

	memset(&a, 0, sizeof(a));
	a.mode = sb->mode;
	a.done = done;
	a.size = size;
	a.why = done;
	a.why_size = size;
	done[0] = '\0';
	said(&a, "sandbox: ", sb->mode == KR_SANDBOX_OFF ? "off" : "no_new_privs");
	r = become(&a, sb);
	if (r || sb->mode == KR_SANDBOX_OFF)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		kr_snprintf(done, size, "sandbox: unable to set no_new_privs: %s", strerror(errno));
		return KR_EIO;
	}
	r = landlock(&a, sb);
	if (r == 0 && sb->filter)
		r = seccomp(&a, sb);
	else if (r == 0)
		said(&a, ", no system-call filter (the host's own calls)", "");
	return r;
}
