/*
 * A program of the user's, linked against libkreflect.so.1 (not the
 * archives): the shared library loads, exports what kreflect.h declares,
 * and a client runs through it. The server is 127.0.0.1 port 1 (refused).
 */
#include <stdio.h>
#include <string.h>

#include "kreflect.h"

static char mem[4u << 20] __attribute__((aligned(16)));

int main(void)
{
	struct kr_config cfg;
	struct kr_client *c = NULL;
	struct kr_status st;
	char err[200];
	int num = 0, r;

	if (strcmp(kr_version(&num), KR_VERSION) != 0 || num != KR_VERSION_NUM) {
		printf("FAIL the library is %s (%d), the header %s\n", kr_version(NULL), num, KR_VERSION);
		return 1;
	}
	kr_config_init(&cfg);
	cfg.server = "http://127.0.0.1:1";
	cfg.no_auto_source = 1;
	cfg.memory_bytes = sizeof(mem) / 2;        /* one budget, split by the library */
	cfg.log_level = -1;
	if (kr_client_memory(&cfg) > sizeof(mem)) {
		printf("FAIL kr_client_memory asks %zu bytes of %zu\n", kr_client_memory(&cfg), sizeof(mem));
		return 1;
	}
	if (kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err)) != 0 ||
	    kr_client_add_resource(c, "configmaps", err, sizeof(err)) != 0 ||
	    kr_client_start(c, err, sizeof(err)) != 0) {
		printf("FAIL the client did not start: %s\n", err);
		return 1;
	}
	if (kr_client_wakeup(c) != 0 || (r = kr_client_run(c)) != KR_RUN_WOKEN) {
		printf("FAIL kr_client_run after kr_client_wakeup\n");
		return 1;
	}
	if (kr_client_status(c, 0, &st) != 0 || strcmp(st.resource, "configmaps") != 0) {
		printf("FAIL kr_client_status\n");
		return 1;
	}
	kr_client_stop(c);
	printf("ok kreflect %s through the shared library\n", kr_version(NULL));
	return 0;
}
