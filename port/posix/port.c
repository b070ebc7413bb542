/*
 * The posix port: Linux with musl (or glibc for sanitizer builds).
 */
#define _GNU_SOURCE
#include "fmt.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"
#include "worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int last_errno;

kr_ms_t kr_port_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (kr_ms_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kr_port_wall_seconds(void)
{
	return (int64_t)time(NULL);
}

int kr_port_entropy(void *ctx, unsigned char *out, size_t len, size_t *olen)
{
	size_t done = 0;

	(void)ctx;
	*olen = 0;
	while (done < len) {
		ssize_t n = getrandom(out + done, len - done, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)n;
	}
	*olen = done;
	return 0;
}

void kr_port_log_write(const char *line, size_t len)
{
	while (len > 0) {
		ssize_t n = write(2, line, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		line += n;
		len -= (size_t)n;
	}
}

const char *kr_port_last_error(void)
{
	return strerror(last_errno);
}

static socklen_t to_sockaddr(const struct kr_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(a->port);
		memcpy(&s6->sin6_addr, a->ip, 16);
		return sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(a->port);
		memcpy(&s4->sin_addr, a->ip, 4);
		return sizeof(*s4);
	}
}

/* --- name resolution in a child ----------------------------------------------------- */

/*
 * getaddrinfo() blocks for as long as the resolver likes (musl: attempts x
 * timeout from resolv.conf, up to minutes). It runs in a forked child that
 * writes the addresses into a pipe; the loop polls the pipe against its own
 * deadline and kills the child if the deadline passes. The child never returns
 * into kreflect's code: it _exit()s.
 */
#define RESOLVE_MAX 8

static struct kr_worker resolving[4] = { KR_WORKER_FREE, KR_WORKER_FREE, KR_WORKER_FREE, KR_WORKER_FREE };

int kr_port_resolve_start(const char *host)
{
	int rfd, wfd = -1;

	rfd = kr_worker_start(resolving, sizeof(resolving) / sizeof(resolving[0]), &wfd);
	if (rfd == -1) {
		last_errno = errno;
		return -1;
	}
	if (rfd == -2) {
		struct addrinfo hints, *res = NULL, *ai;
		struct kr_addr out[RESOLVE_MAX];
		int n = 0;

		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		/* Not even named without DNS: the reference alone links musl's stdio exit code. */
		if (KR_WITH_DNS && getaddrinfo(host, NULL, &hints, &res) == 0) {
			for (ai = res; ai && n < RESOLVE_MAX; ai = ai->ai_next) {
				memset(&out[n], 0, sizeof(out[n]));
				if (ai->ai_family == AF_INET) {
					out[n].family = 4;
					memcpy(out[n].ip, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
					n++;
				} else if (ai->ai_family == AF_INET6) {
					out[n].family = 6;
					memcpy(out[n].ip, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
					n++;
				}
			}
		}
		/* One write of at most 8 * 24 bytes: atomic on a pipe. */
		if (n > 0 && write(wfd, out, (size_t)n * sizeof(out[0])) < 0)
			_exit(1);
		_exit(0);
	}
	return rfd;
}

int kr_port_resolve_finish(int fd, uint16_t port, struct kr_addr *out, int max,
			   int abandon)
{
	struct kr_worker *w = kr_worker_find(resolving, sizeof(resolving) / sizeof(resolving[0]), fd);
	struct kr_addr got[RESOLVE_MAX];
	ssize_t n;
	int count = 0, i;

	if (!w)
		return 0;
	if (!abandon) {
		n = read(fd, got, sizeof(got));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return KR_IO_WAIT;
		if (n > 0)
			count = (int)((size_t)n / sizeof(got[0]));
	}
	kr_worker_end(w, abandon);
	if (count > max)
		count = max;
	for (i = 0; i < count; i++) {
		out[i] = got[i];
		out[i].port = port;
	}
	return count;
}

/* --- TCP ------------------------------------------------------------------------------ */

int kr_port_tcp_connect(const struct kr_addr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = to_sockaddr(addr, &ss);
	int one = 1, fd;

	fd = socket(addr->family == 6 ? AF_INET6 : AF_INET,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		last_errno = errno;
		return KR_IO_ERR;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A dead peer behind a silent link is found even between watch events. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
#ifdef TCP_KEEPIDLE
	{
		int idle = KR_PORT_KEEPALIVE_IDLE_S, intvl = KR_PORT_KEEPALIVE_INTERVAL_S;
		int cnt = KR_PORT_KEEPALIVE_COUNT;

		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
#endif
#ifdef TCP_USER_TIMEOUT
	{
		/* A request sent into a dead link is not retransmitted for 15 minutes. */
		unsigned int ut = KR_PORT_USER_TIMEOUT_MS;

		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
	}
#endif
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		last_errno = errno;
		close(fd);
		return KR_IO_ERR;
	}
	return fd;
}

int kr_port_connect_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	last_errno = err;
	return err ? -err : 0;
}

long kr_port_send(int fd, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = send(fd, buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return (long)n;
	last_errno = errno;
	return (errno == EAGAIN || errno == EWOULDBLOCK) ? KR_IO_WAIT : KR_IO_ERR;
}

long kr_port_recv(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = recv(fd, buf, len, 0);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return (long)n;
	last_errno = errno;
	return (errno == EAGAIN || errno == EWOULDBLOCK) ? KR_IO_WAIT : KR_IO_ERR;
}

void kr_port_close(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* --- listening ------------------------------------------------------------------------- */

int kr_port_tcp_listen(const struct kr_addr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = to_sockaddr(addr, &ss);
	int one = 1, fd;

	fd = socket(addr->family == 6 ? AF_INET6 : AF_INET,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		last_errno = errno;
		return KR_IO_ERR;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->family == 6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
		last_errno = errno;
		close(fd);
		return KR_IO_ERR;
	}
	return fd;
}

int kr_port_unix_listen(const char *path, unsigned mode)
{
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int fd, r;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (!*path || strlen(path) >= sizeof(sun.sun_path))
		return KR_EINVAL;
	memcpy(sun.sun_path, path, strlen(path));
	if (lstat(path, &st) == 0) {
		/* Only a socket left by an earlier run is ours to replace. */
		if (!S_ISSOCK(st.st_mode))
			return KR_EINVAL;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		last_errno = errno;
		return KR_IO_ERR;
	}
	/* bind() creates the file with the umask applied: no wider than mode from the start. */
	old = umask((mode_t)(~mode & 0777));
	r = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (r < 0 || chmod(path, (mode_t)mode) < 0 || listen(fd, 64) < 0) {
		last_errno = errno;
		close(fd);
		return KR_IO_ERR;
	}
	return fd;
}

int kr_port_accept(int fd)
{
	int c;

	do
		c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	while (c < 0 && errno == EINTR);
	if (c >= 0) {
		/* A local reader's backlog is bounded in the kernel too (it doubles this),
		 * not grown towards tcp_wmem's megabytes by autotuning. */
		int sndbuf = 65536;

		setsockopt(c, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		return c;
	}
	last_errno = errno;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EMFILE ||
	    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM || errno == EPROTO)
		return KR_IO_WAIT;
	return KR_IO_ERR;
}

/* --- poll ------------------------------------------------------------------------------ */

int kr_port_poll(struct kr_pollfd *fds, int n, int timeout_ms)
{
	struct pollfd p[KR_PORT_POLL_MAX];
	int i, r;

	if (n > (int)(sizeof(p) / sizeof(p[0])))
		return KR_IO_ERR;
	for (i = 0; i < n; i++) {
		p[i].fd = fds[i].fd;
		p[i].events = (short)(((fds[i].want & KR_POLL_IN) ? POLLIN : 0) |
				      ((fds[i].want & KR_POLL_OUT) ? POLLOUT : 0));
		p[i].revents = 0;
	}
	r = poll(p, (nfds_t)n, timeout_ms);
	if (r < 0) {
		last_errno = errno;
		return errno == EINTR ? 0 : KR_IO_ERR;
	}
	for (i = 0; i < n; i++)
		fds[i].got = (short)(((p[i].revents & POLLIN) ? KR_POLL_IN : 0) |
				     ((p[i].revents & POLLOUT) ? KR_POLL_OUT : 0) |
				     ((p[i].revents & (POLLERR | POLLHUP | POLLNVAL)) ? KR_POLL_ERR : 0));
	return r;
}

/* --- signals ---------------------------------------------------------------------------- */

int kr_port_signals_open(void)
{
	sigset_t set;
	struct sigaction sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		last_errno = errno;
	return fd;
}

int kr_port_wakeup_open(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (fd < 0)
		last_errno = errno;
	return fd;
}

void kr_port_wakeup_signal(int fd)
{
	uint64_t one = 1;
	int saved = errno;                 /* a signal handler leaves errno as it found it */

	/* A failure can only be EAGAIN (the counter is full): the loop wakes anyway. */
	if (write(fd, &one, sizeof(one)) < 0)
		one = 0;
	errno = saved;
}

void kr_port_wakeup_drain(int fd)
{
	uint64_t n;

	if (read(fd, &n, sizeof(n)) < 0)
		return;                    /* EAGAIN: nothing was pending */
}

int kr_port_signal_read(int fd)
{
	struct signalfd_siginfo si;
	ssize_t n;

	do
		n = read(fd, &si, sizeof(si));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(si))
		return 0;
	return (int)si.ssi_signo;
}

/* --- memory ------------------------------------------------------------------------ */

void kr_port_discard(void *p, size_t len)
{
	uintptr_t page = 4096, a = (uintptr_t)p, lo = (a + page - 1) & ~(page - 1);
	uintptr_t hi = (a + len) & ~(page - 1);

	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void *kr_port_reserve(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED) {
		last_errno = errno;
		return NULL;
	}
	return p;
}

/* --- output ------------------------------------------------------------------------- */

int kr_port_writev_all(int fd, struct kr_iov *iov, int n)
{
	struct iovec v[8];
	int i;

	if (n > (int)(sizeof(v) / sizeof(v[0])))
		return KR_IO_ERR;
	while (n > 0) {
		ssize_t w;

		for (i = 0; i < n; i++) {
			v[i].iov_base = (void *)iov[i].base;
			v[i].iov_len = iov[i].len;
		}
		w = writev(fd, v, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { fd, POLLOUT, 0 };

				poll(&p, 1, 1000);
				continue;
			}
			last_errno = errno;
			return KR_IO_ERR;
		}
		while (n > 0 && (size_t)w >= iov[0].len) {
			w -= (ssize_t)iov[0].len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov[0].base = (const char *)iov[0].base + w;
			iov[0].len -= (size_t)w;
		}
	}
	return 0;
}

/* --- files -------------------------------------------------------------------------------- */

long kr_port_read_file(const char *path, void *buf, size_t size)
{
	size_t got = 0;
	int fd;
	char extra;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		last_errno = errno;
		return errno == ENOENT ? KR_ENOENT : KR_EIO;
	}
	for (;;) {
		ssize_t n = got < size ? read(fd, (char *)buf + got, size - got)
				       : read(fd, &extra, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			last_errno = errno;
			close(fd);
			return KR_EIO;
		}
		if (n == 0)
			break;
		if (got >= size) {
			close(fd);
			return KR_ETOOBIG;
		}
		got += (size_t)n;
	}
	close(fd);
	return (long)got;
}
