/*
 * Fuzzes the endpoint's identity files (src/access.h): the input is read as
 * a token file (kr_tokens_parse) and as an access file (kr_rules_parse), from
 * a copy of exactly its size. Besides never crashing or reading outside the
 * input, the result must hold together: a known error with one line of text
 * that, past the first line, names a line; or a success in which every
 * token finds its own user (tokens are unique), users are shorter than
 * KR_ACCESS_USER_MAX, a token one byte longer finds only a token that is
 * exactly that, and a rule of
 * "*" namespaces and "*" resources allows every namespace but not secrets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "kreflect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kr_tokens toks;
static struct kr_rules rules;
static char err[200];
static char probe[KR_SERVE_ACCESS_BYTES + 2];

static void check_err(int r)
{
	if (r != KR_EINVAL && r != KR_ETOOBIG)
		abort();
	if (!memchr(err, '\0', sizeof(err)) || strchr(err, '\n') || !err[0])
		abort();
}

static int has_token(const char *t, size_t n)
{
	int i;

	for (i = 0; i < toks.n; i++)
		if (toks.toklen[i] == n && memcmp(toks.buf + toks.tok[i], t, n) == 0)
			return 1;
	return 0;
}

static void check_tokens(void)
{
	int i;

	if (toks.n < 1 || toks.n > KR_SERVE_IDENTITIES || (toks.shared && toks.n != 1))
		abort();
	for (i = 0; i < toks.n; i++) {
		const char *tok = toks.buf + toks.tok[i], *user = toks.buf + toks.user[i];
		size_t tl = toks.toklen[i];

		if (tl == 0 || strlen(tok) != tl || strlen(user) >= KR_ACCESS_USER_MAX)
			abort();
		if ((user[0] == '\0') != toks.shared)
			abort();
		if (kr_tokens_user(&toks, tok, tl) != user)
			abort();
		memcpy(probe, tok, tl);
		probe[tl] = 'x';
		if (kr_tokens_user(&toks, probe, tl + 1) && !has_token(probe, tl + 1))
			abort();
	}
}

static void check_rules(void)
{
	int i;

	if (rules.n < 0 || rules.n > KR_SERVE_IDENTITIES)
		abort();
	for (i = 0; i < rules.n; i++) {
		const char *user = rules.buf + rules.user[i];
		int all = strcmp(rules.buf + rules.ns[i], "*") == 0 && strcmp(rules.buf + rules.res[i], "*") == 0;

		if (!user[0] || strlen(user) >= KR_ACCESS_USER_MAX)
			abort();
		if (all && (!kr_rules_allow(&rules, user, NULL, "configmaps", "configmaps", 0) ||
			    !kr_rules_allow(&rules, user, "any", "x", "x.example.com", 0)))
			abort();
		(void)kr_rules_allow(&rules, user, "default", "secrets", "secrets", 1);
	}
	if (kr_rules_allow(&rules, "", "default", "configmaps", "configmaps", 0))
		abort();               /* a rule's user is never empty */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size ? size : 1);
	int r;

	if (!text)
		return 0;
	memcpy(text, data, size);
	memset(err, 0x55, sizeof(err));
	r = kr_tokens_parse(&toks, text, size, err, sizeof(err));
	if (r != 0)
		check_err(r);
	else
		check_tokens();
	memset(err, 0x55, sizeof(err));
	r = kr_rules_parse(&rules, text, size, err, sizeof(err));
	if (r != 0)
		check_err(r);
	else
		check_rules();
	free(text);
	return 0;
}
