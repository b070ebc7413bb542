/*
 * kreflect: flags -> configuration -> loop. Exit codes (documented in --help):
 *   0  clean stop (SIGTERM/SIGINT), --once finished, --help/--version
 *   1  fatal error at run time
 *   2  usage or configuration error
 */
#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "mbedtls/build_info.h"
#include "tls.h"

#define EXIT_FATAL 1
#define EXIT_USAGE 2

static const char usage[] =
	"usage: kreflect [flags]\n"
	"\n"
	"Lists and watches Kubernetes resources and mirrors them locally.\n"
	"\n"
	"flags:\n"
	"  --version        print version, target, mbedTLS version and capacities\n"
	"  --print-budget   print the static memory the compiled-in capacities reserve\n"
	"  -h, --help       print this help\n"
	"\n"
	"exit codes:\n"
	"  0  clean stop, or --help/--version/--print-budget\n"
	"  1  fatal error at run time\n"
	"  2  usage or configuration error\n";

static void print_version(void)
{
	printf("kreflect %s\n", KR_VERSION);
	printf("target: %s (linux, static)\n", kr_target());
	printf("mbedTLS: %s\n", MBEDTLS_VERSION_STRING);
	printf("capacities: resources=%u objects=%u arena=%u max-object=%u "
	       "json-tokens=%u connections=%u tls-heap=%u\n",
	       (unsigned)KR_MAX_RESOURCES, (unsigned)KR_MAX_OBJECTS,
	       (unsigned)KR_ARENA_BYTES, (unsigned)KR_MAX_OBJECT_BYTES,
	       (unsigned)KR_JSON_TOKENS, (unsigned)KR_MAX_CONNS,
	       (unsigned)KR_TLS_HEAP_SIZE);
}

static void print_budget(void)
{
	const struct kr_budget_item *it;
	size_t n, i;

	it = kr_budget_items(&n);
	for (i = 0; i < n; i++)
		printf("%-14s %10zu  %s\n", it[i].name, it[i].bytes, it[i].why);
	printf("%-14s %10zu  bytes of static memory (.data + .bss) reserved\n",
	       "total", kr_budget_total());
}

int main(int argc, char **argv)
{
	int i;

	if (kr_tls_global_init() != 0) {
		fprintf(stderr, "kreflect: unable to start TLS: %s\n", kr_strerror(KR_ETLS));
		return EXIT_FATAL;
	}
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			print_version();
			return 0;
		}
		if (strcmp(argv[i], "--print-budget") == 0) {
			print_budget();
			return 0;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		}
		fprintf(stderr, "kreflect: unknown flag '%s' (see --help)\n", argv[i]);
		return EXIT_USAGE;
	}
	fputs(usage, stderr);
	return EXIT_USAGE;
}
