/*
 * The unit-test runner's contract. A test is a function returning 0 on
 * success or the __LINE__ of the first failed check(). KR_TEST(suite, name)
 * defines and registers one; tests/unit/runner.c runs them all (or those whose
 * "suite.name" contains an argument) and ends with "N passed, N failed".
 */
#ifndef KR_TEST_H
#define KR_TEST_H

#include <stddef.h>

struct kr_test {
	const char *suite;
	const char *name;
	int (*fn)(void);
	const char *file;
};

void kr_test_register(const struct kr_test *t);
void kr_test_failed(const char *file, int line, const char *what);

#define KR_TEST(suite, name)                                                  \
	static int kr_test_fn_##suite##_##name(void);                            \
	static const struct kr_test kr_test_##suite##_##name = {                 \
		#suite, #name, kr_test_fn_##suite##_##name, __FILE__ };          \
	__attribute__((constructor)) static void kr_test_reg_##suite##_##name(void) \
	{                                                                         \
		kr_test_register(&kr_test_##suite##_##name);                     \
	}                                                                         \
	static int kr_test_fn_##suite##_##name(void)

#define check(cond)                                                           \
	do {                                                                      \
		if (!(cond)) {                                                    \
			kr_test_failed(__FILE__, __LINE__, #cond);                \
			return __LINE__;                                          \
		}                                                                 \
	} while (0)

/* Path of the directory holding test data (tests/), from $KR_TEST_DIR or "tests". */
const char *kr_test_dir(void);

#endif /* KR_TEST_H */
