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
 * Opens a non-blocking TCP socket (TCP_NODELAY, keepalive on) and starts a
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

/* Text of the last socket error seen on this thread (strerror of errno). */
const char *kr_port_last_error(void);

/* --- waiting ------------------------------------------------------------------ */

#define KR_POLL_IN 1
#define KR_POLL_OUT 2
#define KR_POLL_ERR 4  /* error or hang-up: the descriptor should be read to learn more */

struct kr_pollfd {
	int fd;
	short want;                    /* KR_POLL_IN | KR_POLL_OUT */
	short got;                     /* set by kr_port_poll */
};

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

#endif /* KR_PORT_H */
