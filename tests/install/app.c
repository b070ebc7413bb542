/*
 * A user's program built against an installed kreflect (tests/install/run.sh):
 * only the installed header, archives and pkg-config file. It sets a client
 * up (TLS configuration included: mbedTLS is linked and runs), adds a
 * resource and reads a field of an object; no network. argv[1] is a CA
 * certificate (PEM) to verify the (never contacted) server with.
 */
#include <stdio.h>
#include <string.h>

#include <kreflect.h>

static _Alignas(16) unsigned char mem[4 << 20];

int main(int argc, char **argv)
{
	struct kr_config cfg;
	struct kr_client *c;
	char err[256], buf[64];
	const char *obj = "{\"metadata\":{\"name\":\"edge-config\"}}";
	size_t need;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: app CA.pem\n");
		return 2;
	}
	kr_config_init(&cfg);
	cfg.no_auto_source = 1;
	cfg.ca_file = argv[1];
	cfg.server = "https://127.0.0.1:6443";
	cfg.max_objects = 64;
	cfg.arena_bytes = 256 * 1024;
	need = kr_client_memory(&cfg);
	if (need == 0 || need > sizeof(mem)) {
		fprintf(stderr, "app: the client needs %zu bytes, more than %zu\n", need, sizeof(mem));
		return 1;
	}
	r = kr_client_init(&c, mem, sizeof(mem), &cfg, err, sizeof(err));
	if (r != 0) {
		fprintf(stderr, "app: kr_client_init: %s: %s\n", kr_strerror(r), err);
		return 1;
	}
	r = kr_client_add_resource(c, "configmaps", err, sizeof(err));
	if (r != 0) {
		fprintf(stderr, "app: kr_client_add_resource: %s: %s\n", kr_strerror(r), err);
		return 1;
	}
	r = kr_object_field(obj, strlen(obj), "metadata.name", buf, sizeof(buf));
	if (r < 0) {
		fprintf(stderr, "app: kr_object_field: %s\n", kr_strerror(r));
		return 1;
	}
	printf("app: %s %s %d\n", kr_target(), buf, kr_client_resources(c));
	return 0;
}
