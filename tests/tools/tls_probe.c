/*
 * tls_probe: the TLS proof. Linked exactly like kreflect (same objects, same
 * mbedTLS build, same static heap), it connects to HOST:PORT, completes a
 * verified handshake, sends one HTTP request and checks for a 200 answer.
 *
 *   tls_probe [--ca F] [--cert F --key F] [--name N] [--insecure]
 *             [--connections N] HOST PORT
 *
 * --name is the name the certificate must match (default HOST). With
 * --connections N it reconnects N-1 more times, resuming the saved session.
 * Prints one "result:" line; exits 0 when every connection completed a
 * request, 1 on a TLS or HTTP failure, 2 on usage errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"
#include "tls.h"

static unsigned char ca_buf[KR_PEM_MAX + 1], cert_buf[KR_PEM_MAX + 1], key_buf[KR_PEM_MAX + 1];
static struct kr_tls_ctx ctx;
static struct kr_tls tls;

static long load(const char *path, unsigned char *buf)
{
	long n = kr_port_read_file(path, buf, KR_PEM_MAX);

	if (n < 0) {
		fprintf(stderr, "tls_probe: unable to read %s: %s\n", path, kr_strerror((int)n));
		exit(2);
	}
	buf[n] = '\0';
	return n;
}

/* Waits until fd is ready for what t wants, or 10 s pass. */
static int wait_for(int fd, int want)
{
	struct kr_pollfd p = { fd, (short)want, 0 };

	return kr_port_poll(&p, 1, 10000) > 0 ? 0 : -1;
}

static int one_connection(const struct kr_addr *addr, const char *name, char *why, size_t whylen)
{
	static const char request[] = "GET / HTTP/1.0\r\n\r\n";
	char resp[4096];
	size_t got = 0, sent = 0;
	int fd, r, ok = -1;
	kr_ms_t deadline = kr_port_now_ms() + 5000;

	/* openssl s_server may still be starting: retry a refused connect briefly. */
	for (;;) {
		fd = kr_port_tcp_connect(addr);
		if (fd < 0 || wait_for(fd, KR_POLL_OUT) < 0) {
			snprintf(why, whylen, "connect failed: %s", kr_port_last_error());
			kr_port_close(fd);
			return -1;
		}
		if (kr_port_connect_result(fd) == 0)
			break;
		kr_port_close(fd);
		if (kr_port_now_ms() > deadline) {
			snprintf(why, whylen, "connect failed: %s", kr_port_last_error());
			return -1;
		}
		kr_port_poll(NULL, 0, 50);
	}
	if (kr_tls_open(&tls, &ctx, fd, name) != 0) {
		kr_tls_describe(&tls, why, whylen);
		goto out;
	}
	while ((r = kr_tls_handshake(&tls)) == 0)
		if (wait_for(fd, tls.want) < 0) {
			snprintf(why, whylen, "handshake timed out");
			goto out;
		}
	if (r < 0) {
		kr_tls_describe(&tls, why, whylen);
		goto out;
	}
	while (sent < sizeof(request) - 1) {
		long n = kr_tls_write(&tls, request + sent, sizeof(request) - 1 - sent);

		if (n == KR_IO_WAIT && wait_for(fd, tls.want) == 0)
			continue;
		if (n < 0) {
			kr_tls_describe(&tls, why, whylen);
			goto out;
		}
		sent += (size_t)n;
	}
	for (;;) {
		long n = kr_tls_read(&tls, resp + got, sizeof(resp) - 1 - got);

		if (n == KR_IO_WAIT) {
			if (wait_for(fd, tls.want) < 0) {
				snprintf(why, whylen, "read timed out");
				goto out;
			}
			continue;
		}
		if (n < 0) {
			kr_tls_describe(&tls, why, whylen);
			goto out;
		}
		if (n == 0 || got + (size_t)n >= sizeof(resp) - 1) {
			got += (size_t)n;
			break;
		}
		got += (size_t)n;
	}
	resp[got] = '\0';
	if (strncmp(resp, "HTTP/1.0 200", 12) != 0 && strncmp(resp, "HTTP/1.1 200", 12) != 0) {
		snprintf(why, whylen, "unexpected HTTP answer: %.40s", resp);
		goto out;
	}
	snprintf(why, whylen, "%s %s", kr_tls_version(&tls), kr_tls_cipher(&tls));
	ok = 0;
out:
	kr_tls_close(&tls);
	kr_port_close(fd);
	return ok;
}

int main(int argc, char **argv)
{
	struct kr_tls_opts opts;
	struct kr_addr addr;
	const char *host = NULL, *port = NULL, *name = NULL;
	char err[256], why[256];
	int i, conns = 1, failures = 0;

	memset(&opts, 0, sizeof(opts));
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--ca") == 0 && i + 1 < argc) {
			opts.ca_len = (size_t)load(argv[++i], ca_buf);
			opts.ca = ca_buf;
		} else if (strcmp(argv[i], "--cert") == 0 && i + 1 < argc) {
			opts.cert_len = (size_t)load(argv[++i], cert_buf);
			opts.cert = cert_buf;
		} else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
			opts.key_len = (size_t)load(argv[++i], key_buf);
			opts.key = key_buf;
		} else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
			name = argv[++i];
		} else if (strcmp(argv[i], "--connections") == 0 && i + 1 < argc) {
			conns = (int)strtol(argv[++i], NULL, 10);
		} else if (strcmp(argv[i], "--insecure") == 0) {
			opts.insecure_skip_verify = 1;
		} else if (!host) {
			host = argv[i];
		} else if (!port) {
			port = argv[i];
		} else {
			fprintf(stderr, "tls_probe: unexpected argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!host || !port || conns < 1) {
		fprintf(stderr, "usage: tls_probe [--ca F] [--cert F --key F] [--name N] [--connections N] HOST PORT\n");
		return 2;
	}
	if (kr_port_parse_ip(host, (uint16_t)strtol(port, NULL, 10), &addr) != 0) {
		fprintf(stderr, "tls_probe: HOST must be an IP literal\n");
		return 2;
	}
	if (kr_tls_global_init() != 0) {
		fprintf(stderr, "tls_probe: unable to start TLS\n");
		return 1;
	}
	kr_tls_ctx_init(&ctx);
	if (kr_tls_ctx_setup(&ctx, &opts, err, sizeof(err)) != 0) {
		printf("result: setup-failed: %s\n", err);
		return 1;
	}
	kr_tls_init(&tls);
	for (i = 0; i < conns; i++) {
		if (one_connection(&addr, name ? name : host, why, sizeof(why)) != 0) {
			printf("result: failed: %s\n", why);
			failures++;
			break;
		}
		printf("connection %d: ok %s\n", i + 1, why);
	}
	if (!failures)
		printf("result: ok full=%u resumed=%u\n", tls.full_handshakes, tls.resumed_handshakes);
	kr_tls_free(&tls);
	kr_tls_ctx_free(&ctx);
	return failures ? 1 : 0;
}
