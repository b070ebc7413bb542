#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAX_TESTS 2048

static const struct kr_test *tests[MAX_TESTS];
static int ntests;
static const char *fail_file, *fail_what;
static int fail_line;

void kr_test_register(const struct kr_test *t)
{
	if (ntests < MAX_TESTS)
		tests[ntests++] = t;
}

void kr_test_failed(const char *file, int line, const char *what)
{
	fail_file = file;
	fail_line = line;
	fail_what = what;
}

const char *kr_test_dir(void)
{
	const char *d = getenv("KR_TEST_DIR");

	return d && *d ? d : "tests";
}

static int selected(const struct kr_test *t, int argc, char **argv)
{
	char full[256];
	int i;

	if (argc < 2)
		return 1;
	snprintf(full, sizeof(full), "%s.%s", t->suite, t->name);
	for (i = 1; i < argc; i++)
		if (strstr(full, argv[i]))
			return 1;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct kr_test *x = *(const struct kr_test *const *)a;
	const struct kr_test *y = *(const struct kr_test *const *)b;
	int c = strcmp(x->suite, y->suite);

	return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv)
{
	int i, passed = 0, failed = 0, verbose = getenv("KR_TEST_VERBOSE") != NULL;

	if (ntests == MAX_TESTS)
		fprintf(stderr, "runner: more than %d tests, raise MAX_TESTS\n", MAX_TESTS);
	qsort(tests, (size_t)ntests, sizeof(tests[0]), by_name);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < ntests; i++) {
		int r;

		if (!selected(tests[i], argc, argv))
			continue;
		fail_file = NULL;
		r = tests[i]->fn();
		if (r == 0) {
			passed++;
			if (verbose)
				printf("ok   %s.%s\n", tests[i]->suite, tests[i]->name);
		} else {
			failed++;
			printf("FAIL %s.%s: %s:%d: %s\n", tests[i]->suite, tests[i]->name,
			       fail_file ? fail_file : tests[i]->file,
			       fail_file ? fail_line : r, fail_what ? fail_what : "failed");
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
