#include <string.h>

#include "access.h"
#include "fmt.h"
#include "kreflect.h"
#include "test.h"

static char err[200];

KR_TEST(access, tokens_find_their_users)
{
	static struct kr_tokens t;
	const char *text = "# c\r\n\n tok-a,device-a,1001\r\ntok-b,device-b\ntok-r,relay-2,3,\"g1,g2\"\n";

	check(kr_tokens_parse(&t, text, strlen(text), err, sizeof(err)) == 0);
	check(t.n == 3 && !t.shared);
	check(strcmp(kr_tokens_user(&t, "tok-a", 5), "device-a") == 0);
	check(strcmp(kr_tokens_user(&t, "tok-r", 5), "relay-2") == 0);
	check(kr_tokens_user(&t, "tok-", 4) == NULL && kr_tokens_user(&t, "tok-ab", 6) == NULL);
	check(kr_tokens_user(&t, "", 0) == NULL);
	check(kr_tokens_have_user(&t, "device-b") && kr_tokens_have_user(&t, "relay-2"));
	check(!kr_tokens_have_user(&t, "device") && !kr_tokens_have_user(&t, "") &&
	      !kr_tokens_have_user(&t, "device-bb"));
	/* The old format: one bare token, a user without a name. */
	check(kr_tokens_parse(&t, "shared\n", 7, err, sizeof(err)) == 0);
	check(t.shared && strcmp(kr_tokens_user(&t, "shared", 6), "") == 0);
	check(kr_tokens_have_user(&t, "") && !kr_tokens_have_user(&t, "device-a"));
	return 0;
}

KR_TEST(access, bad_token_files_name_the_line)
{
	static struct kr_tokens t;
	static const struct { const char *text, *want; } cases[] = {
		{ "a,u\nbare\n", "line 2: not token,user" },
		{ "bare\na,u\n", "line 2: token,user after a bare token" },
		{ "a,u\na,v\n", "line 2: the same token" },
		{ ",u\n", "line 1: the token is empty" },
		{ "\"a\",u\n", "line 1: the token is empty, quoted" },
		{ "a,\n", "line 1: the user is empty" },
		{ "a,u v\n", "line 1: the user is empty, quoted, longer than 63 bytes, or has a space" },
		{ "a,0123456789012345678901234567890123456789012345678901234567890123\n", "line 1: the user" },
		{ "# none\n\n", "no token in the file" },
		{ "", "no token in the file" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check(kr_tokens_parse(&t, cases[i].text, strlen(cases[i].text), err, sizeof(err)) == KR_EINVAL);
		check(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0);
	}
	/* A 63-byte user is the longest kept. */
	check(kr_tokens_parse(&t, "a,012345678901234567890123456789012345678901234567890123456789012\n", 66,
			      err, sizeof(err)) == 0);
	return 0;
}

KR_TEST(access, token_file_bounds)
{
	static struct kr_tokens t;
	static char text[KR_SERVE_ACCESS_BYTES * 2];
	size_t len = 0;
	int i;

	/* KR_SERVE_IDENTITIES lines fit; one more is refused. */
	for (i = 0; i <= KR_SERVE_IDENTITIES; i++)
		len += (size_t)kr_snprintf(text + len, sizeof(text) - len, "t%d,u\n", i);
	check(kr_tokens_parse(&t, text, len, err, sizeof(err)) == KR_EINVAL);
	check(strstr(err, "more identities than KR_SERVE_IDENTITIES") != NULL);
	check(kr_tokens_parse(&t, text, len - strlen("t256,u\n"), err, sizeof(err)) == 0);
	check(t.n == KR_SERVE_IDENTITIES);
	/* Tokens that together pass KR_SERVE_ACCESS_BYTES. */
	len = 0;
	for (i = 0; i < 3; i++) {
		memset(text + len, 'a' + i, KR_SERVE_ACCESS_BYTES / 3);
		len += KR_SERVE_ACCESS_BYTES / 3;
		memcpy(text + len, ",u\n", 3);
		len += 3;
	}
	check(kr_tokens_parse(&t, text, len, err, sizeof(err)) == KR_ETOOBIG);
	check(strncmp(err, "line 3: the file is larger than KR_SERVE_ACCESS_BYTES", 53) == 0);
	return 0;
}

KR_TEST(access, rules_allow_namespaces_and_resources)
{
	static struct kr_rules r;
	const char *text = "# user ns res\ndevice-a default,site-a configmaps\n"
			   "device-a\tlab\tdeployments.apps\nrelay * configmaps,secrets\nall * *\n";

	check(kr_rules_parse(&r, text, strlen(text), err, sizeof(err)) == 0 && r.n == 4);
	check(kr_rules_allow(&r, "device-a", "default", "configmaps", "configmaps", 0));
	check(kr_rules_allow(&r, "device-a", "site-a", "configmaps", "configmaps", 0));
	check(!kr_rules_allow(&r, "device-a", "site", "configmaps", "configmaps", 0));
	check(!kr_rules_allow(&r, "device-a", NULL, "configmaps", "configmaps", 0));
	check(!kr_rules_allow(&r, "device-a", "", "configmaps", "configmaps", 0));
	check(kr_rules_allow(&r, "device-a", "lab", "deployments", "deployments.apps", 0));
	check(!kr_rules_allow(&r, "device-a", "default", "secrets", "secrets", 1));
	check(kr_rules_allow(&r, "relay", NULL, "secrets", "secrets", 1));
	check(kr_rules_allow(&r, "all", NULL, "anything", "anything.example.com", 0));
	check(!kr_rules_allow(&r, "all", "default", "secrets", "secrets", 1));  /* "*" is not secrets */
	check(!kr_rules_allow(&r, "nobody", "default", "configmaps", "configmaps", 0));
	check(!kr_rules_allow(&r, "", "default", "configmaps", "configmaps", 0));
	return 0;
}

KR_TEST(access, bad_access_files_name_the_line)
{
	static struct kr_rules r;
	static const struct { const char *text, *want; } cases[] = {
		{ "u default\n", "line 1: not: user namespaces resources" },
		{ "u a b c\n", "line 1: not: user namespaces resources" },
		{ "\nu Default x\n", "line 2: namespaces" },
		{ "u a, x\n", "line 1: namespaces" },
		{ "u a x,\n", "line 1: resources" },
		{ "u a **\n", "line 1: resources" },
		{ "u\"q a x\n", "line 1: the user" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check(kr_rules_parse(&r, cases[i].text, strlen(cases[i].text), err, sizeof(err)) == KR_EINVAL);
		check(strncmp(err, cases[i].want, strlen(cases[i].want)) == 0);
	}
	check(kr_rules_parse(&r, "", 0, err, sizeof(err)) == 0 && r.n == 0);
	return 0;
}
