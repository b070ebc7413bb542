#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "kreflect.h"
#include "test.h"

static int write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	fwrite(text, 1, len, f);
	return fclose(f);
}

KR_TEST(auth, token_file_is_trimmed_and_reloaded_on_change)
{
	static struct kr_auth a;
	char path[] = "/tmp/kr-auth-XXXXXX";
	int fd = mkstemp(path);

	check(fd >= 0);
	close(fd);
	kr_auth_init(&a);
	check(kr_auth_token(&a) == NULL);
	check(write_file(path, "tok-1\n", 6) == 0);
	check(kr_auth_set_file(&a, path) == 0);
	check(strcmp(kr_auth_token(&a), "tok-1") == 0);
	check(kr_auth_refresh(&a) == 0);
	check(write_file(path, "tok-2\r\n", 7) == 0);
	check(kr_auth_refresh(&a) == 1);
	check(strcmp(kr_auth_token(&a), "tok-2") == 0 && a.reloads == 1);
	/* Mid-rotation (file gone or empty): the old token stays. */
	check(write_file(path, "", 0) == 0);
	check(kr_auth_refresh(&a) == KR_EINVAL);
	check(strcmp(kr_auth_token(&a), "tok-2") == 0);
	unlink(path);
	check(kr_auth_refresh(&a) == KR_ENOENT);
	check(strcmp(kr_auth_token(&a), "tok-2") == 0);
	return 0;
}

KR_TEST(auth, bad_token_files_are_refused)
{
	static struct kr_auth a;
	static char big[KR_TOKEN_MAX + 10];
	char path[] = "/tmp/kr-auth-XXXXXX";
	int fd = mkstemp(path);

	check(fd >= 0);
	close(fd);
	kr_auth_init(&a);
	check(write_file(path, "two\nlines\n", 10) == 0);
	check(kr_auth_set_file(&a, path) == KR_EINVAL);
	check(write_file(path, "nul\0inside", 10) == 0);
	check(kr_auth_set_file(&a, path) == KR_EINVAL);
	memset(big, 'a', sizeof(big));
	check(write_file(path, big, KR_TOKEN_MAX) == 0);
	check(kr_auth_set_file(&a, path) == 0);
	check(write_file(path, big, KR_TOKEN_MAX + 1) == 0);
	check(kr_auth_set_file(&a, path) == KR_ETOOBIG);
	check(kr_auth_set_file(&a, "/nonexistent/kr-token") == KR_ENOENT);
	unlink(path);
	return 0;
}
