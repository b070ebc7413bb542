/*
 * Fuzzes the server side of TLS on --listen (kr_tls_accept, kr_tls_handshake,
 * kr_tls_peer_verified, kr_tls_read): the input is what a client sends, put
 * into one end of a socket pair that is then shut for writing; the server
 * reads it from the other end, non-blocking, and its answers are drained.
 * The certificate is a fixed self-signed P-256 one that is also the client
 * CA, so the client certificate path is reachable. Besides never crashing
 * or hanging, every session must end (an error, or EOF) within the input,
 * its failure must describe itself in one line, and its memory must go back
 * to the static TLS heap: a fresh session always starts afterwards.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kreflect.h"
#include "kreflect_config.h"
#include "port.h"
#include "tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Test-only credentials (no secret: they sign nothing but this fuzzer's sessions). */
static const char cert_pem[] =
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBhjCCASygAwIBAgIUFD8iDOh7Lqb3aL9pKbmjb5dDnlIwCgYIKoZIzj0EAwIw\n"
	"DzENMAsGA1UEAwwEZnV6ejAgFw0yNjEyMDQyMjA5MDJaGA8yMTI2MTExMDIyMDkw\n"
	"MlowDzENMAsGA1UEAwwEZnV6ejBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGv6\n"
	"PzvX9858askOGxQRRhF3vSfp7i9xVFGaVYPP92HyjXl3KNy0y4/7bcYITjiryvrE\n"
	"F4hv4s1fzMYwRDmHEl2jZDBiMB0GA1UdDgQWBBTP0Z2+HgrJW3oEIwqIU3V9wcq6\n"
	"kjAfBgNVHSMEGDAWgBTP0Z2+HgrJW3oEIwqIU3V9wcq6kjAPBgNVHRMBAf8EBTAD\n"
	"AQH/MA8GA1UdEQQIMAaHBH8AAAEwCgYIKoZIzj0EAwIDSAAwRQIhAJDSSuZnMSMt\n"
	"LdnCtFTqww6O7rWAbxWyosb8E+8w7zkIAiBBR+lLFMUhrBMC6khCsvPNgmeRGh8+\n"
	"CzEwDHxyK7NzAQ==\n"
	"-----END CERTIFICATE-----\n";
static const char key_pem[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgjcDq3VGvDJ+QXGQM\n"
	"JuLNkB92BPUZ7Mc8aPRN0z0H6imhRANCAARr+j871/fOfGrJDhsUEUYRd70n6e4v\n"
	"cVRRmlWDz/dh8o15dyjctMuP+23GCE44q8r6xBeIb+LNX8zGMEQ5hxJd\n"
	"-----END PRIVATE KEY-----\n";

static struct kr_tls_ctx ctx;
static struct kr_tls t;

static void setup(void)
{
	static int done;
	struct kr_tls_opts o;
	char err[256];

	if (done)
		return;
	if (kr_tls_global_init() != 0)
		abort();
	memset(&o, 0, sizeof(o));
	o.cert = (const unsigned char *)cert_pem;
	o.cert_len = sizeof(cert_pem) - 1;
	o.key = (const unsigned char *)key_pem;
	o.key_len = sizeof(key_pem) - 1;
	o.ca = o.cert;
	o.ca_len = o.cert_len;
	kr_tls_ctx_init(&ctx);
	if (kr_tls_ctx_setup_server(&ctx, &o, err, sizeof(err)) != 0)
		abort();
	done = 1;
}

static void drain(int fd)
{
	char sink[16384];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2], step, r = 0;
	char buf[4096], why[256], cn[64];

	if (!KR_WITH_LISTEN_TLS || size > 65536)
		return 0;              /* a build without the server side has nothing to fuzz here */
	setup();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 0;
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (size && send(sv[1], data, size, 0) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	shutdown(sv[1], SHUT_WR);
	if (kr_tls_accept(&t, &ctx, sv[0]) != 0)
		abort();               /* the heap is free between inputs: a leak shows here */
	for (step = 0; step < 1000; step++) {
		r = kr_tls_handshake(&t);
		drain(sv[1]);
		if (r != 0)
			break;
	}
	if (step == 1000)
		abort();               /* the input ended, so the session must have too */
	if (r < 0) {
		kr_tls_describe(&t, why, sizeof(why));
		if (!why[0] || strchr(why, '\n'))
			abort();
	} else {
		if (kr_tls_peer_verified(&t, cn, sizeof(cn)) == 1 && !memchr(cn, '\0', sizeof(cn)))
			abort();
		for (step = 0; step < 1000; step++) {
			long n = kr_tls_read(&t, buf, sizeof(buf));

			drain(sv[1]);
			if (n == 0 || n == KR_IO_ERR)
				break;
		}
		if (step == 1000)
			abort();
	}
	kr_tls_free(&t);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
