/*
 * Fuzzes kr_kubeconfig_load_buffer: the input is a kubeconfig (YAML or
 * JSON), resolved once with its current-context and once with the context
 * "x". Besides never crashing, hanging or reading outside the input (it is
 * copied to a buffer of exactly its size), the result must hold together: a
 * known error code with a one-line message that names the file, and an empty
 * answer; or a success whose strings are terminated inside their arrays,
 * whose data point into the work area with a NUL after them, with a server,
 * and with never both a file and data for the same credential.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kr_kubeconfig kc;
static struct kr_kubeconfig_work work;
static char err[300];

#define TERMINATED(field) (memchr((field), '\0', sizeof(field)) != NULL)

static int data_ok(const unsigned char *p, size_t len)
{
	if (!p)
		return len == 0;
	return len > 0 && p >= work.data && p + len < work.data + sizeof(work.data) && p[len] == '\0';
}

static void check_answer(int r)
{
	if (!TERMINATED(err) || strchr(err, '\n'))
		abort();
	if (r != 0) {
		if (r != KR_EINVAL && r != KR_ENOENT && r != KR_ETOOBIG)
			abort();
		if (strncmp(err, "kubeconfig dir/fuzz.yaml", 24) != 0)
			abort();
		if (kc.server[0] || kc.token[0] || kc.password[0] || kc.key_data || kc.ca_data)
			abort();   /* no half answer after an error */
		return;
	}
	if (err[0] || !kc.server[0] || !kc.context[0] || !kc.cluster[0] || !kc.user[0])
		abort();
	if (!TERMINATED(kc.context) || !TERMINATED(kc.cluster) || !TERMINATED(kc.user) ||
	    !TERMINATED(kc.ns) || !TERMINATED(kc.server) || !TERMINATED(kc.tls_server_name) ||
	    !TERMINATED(kc.proxy_url) || !TERMINATED(kc.ca_file) || !TERMINATED(kc.cert_file) ||
	    !TERMINATED(kc.key_file) || !TERMINATED(kc.token) || !TERMINATED(kc.token_file) ||
	    !TERMINATED(kc.username) || !TERMINATED(kc.password))
		abort();
	if (!data_ok(kc.ca_data, kc.ca_data_len) || !data_ok(kc.cert_data, kc.cert_data_len) ||
	    !data_ok(kc.key_data, kc.key_data_len))
		abort();
	if ((kc.ca_file[0] && kc.ca_data) || (kc.cert_file[0] && kc.cert_data) ||
	    (kc.key_file[0] && kc.key_data))
		abort();
	if (!(kc.cert_file[0] || kc.cert_data) != !(kc.key_file[0] || kc.key_data))
		abort();
	if (kc.insecure_skip_tls_verify && (kc.ca_file[0] || kc.ca_data))
		abort();
	/* Relative paths hang off the file's directory. */
	if ((kc.ca_file[0] && kc.ca_file[0] != '/' && strncmp(kc.ca_file, "dir/", 4) != 0) ||
	    (kc.token_file[0] && kc.token_file[0] != '/' && strncmp(kc.token_file, "dir/", 4) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const contexts[2] = { NULL, "x" };
	char *copy = malloc(size ? size : 1);
	int i;

	if (!copy)
		return 0;
	if (size)
		memcpy(copy, data, size);
	for (i = 0; i < 2; i++) {
		memset(err, 'E', sizeof(err));
		check_answer(kr_kubeconfig_load_buffer(&kc, &work, copy, size, "dir/fuzz.yaml", contexts[i],
						       err, sizeof(err)));
	}
	free(copy);
	return 0;
}
