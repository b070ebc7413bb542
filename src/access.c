#include "access.h"

#include <string.h>

#include "fmt.h"
#include "http_server.h"
#include "kreflect.h"

/* One line of text: [p, end), without its newline and trailing blanks. */
struct line {
	const char *p, *end;
	int no;
};

/* The next line of text[*pos..len) that is neither empty nor a comment. 0 at the end. */
static int next_line(const char *text, size_t len, size_t *pos, int *no, struct line *l)
{
	while (*pos < len) {
		const char *p = text + *pos, *nl = memchr(p, '\n', len - *pos), *end = nl ? nl : text + len;

		*pos = (size_t)(end - text) + (nl ? 1 : 0);
		++*no;
		while (end > p && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
			end--;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end || *p == '#')
			continue;
		l->p = p;
		l->end = end;
		l->no = *no;
		return 1;
	}
	return 0;
}

static int bad(char *err, size_t errlen, int no, const char *why)
{
	kr_snprintf(err, errlen, "line %d: %s", no, why);
	return KR_EINVAL;
}

/* Appends p[0..n) and a NUL to buf at *used. Returns its offset, or -1 when full. */
static long keep(char *buf, size_t size, size_t *used, const char *p, size_t n)
{
	size_t at = *used;

	if (n + 1 > size - at)
		return -1;
	memcpy(buf + at, p, n);
	buf[at + n] = '\0';
	*used = at + n + 1;
	return (long)at;
}

/* Visible ASCII but for the separators: tokens and user names. */
static int plain(const char *p, size_t n, int space_ok)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (ch < 0x21 || ch > 0x7e || ch == ',' || ch == '"')
			if (!(space_ok && ch == ' '))
				return 0;
	}
	return 1;
}

int kr_tokens_parse(struct kr_tokens *t, const char *text, size_t len, char *err, size_t errlen)
{
	size_t pos = 0, used = 0;
	int no = 0, lines = 0;
	struct line l;

	t->n = 0;
	t->shared = 0;
	while (next_line(text, len, &pos, &no, &l)) {
		const char *comma = memchr(l.p, ',', (size_t)(l.end - l.p)), *u, *ue;
		size_t tl = (size_t)((comma ? comma : l.end) - l.p);
		long at, uat;
		int i;

		lines++;
		if (!comma && lines > 1)
			return bad(err, errlen, l.no, "not token,user (only a file of one line may hold a bare token)");
		if (comma && t->shared)
			return bad(err, errlen, l.no, "token,user after a bare token on the first line");
		if (tl == 0 || !plain(l.p, tl, 0))
			return bad(err, errlen, l.no, "the token is empty, quoted, or has a space or control character");
		if (t->n == KR_SERVE_IDENTITIES)
			return bad(err, errlen, l.no, "more identities than KR_SERVE_IDENTITIES");
		u = comma ? comma + 1 : l.end;
		ue = comma ? memchr(u, ',', (size_t)(l.end - u)) : NULL;
		if (!ue)
			ue = l.end;
		if (comma && (ue == u || (size_t)(ue - u) >= KR_ACCESS_USER_MAX || !plain(u, (size_t)(ue - u), 0)))
			return bad(err, errlen, l.no, "the user is empty, quoted, longer than 63 bytes, or has a "
				   "space or control character");
		for (i = 0; i < t->n; i++)
			if (t->toklen[i] == tl && memcmp(t->buf + t->tok[i], l.p, tl) == 0)
				return bad(err, errlen, l.no, "the same token as an earlier line");
		at = keep(t->buf, sizeof(t->buf), &used, l.p, tl);
		uat = at < 0 ? -1 : keep(t->buf, sizeof(t->buf), &used, u, (size_t)(ue - u));
		if (uat < 0) {
			kr_snprintf(err, errlen, "line %d: the file is larger than KR_SERVE_ACCESS_BYTES", l.no);
			return KR_ETOOBIG;
		}
		t->tok[t->n] = (uint32_t)at;
		t->toklen[t->n] = (uint32_t)tl;
		t->user[t->n] = (uint32_t)uat;
		t->n++;
		t->shared = !comma;
	}
	if (t->n == 0) {
		kr_snprintf(err, errlen, "no token in the file");
		return KR_EINVAL;
	}
	return 0;
}

const char *kr_tokens_user(const struct kr_tokens *t, const char *token, size_t len)
{
	const char *who = NULL;
	int i;

	for (i = 0; i < t->n; i++) {
		size_t tl = t->toklen[i];
		/* Each compare takes the same time wherever the bytes differ; all are made. */
		int same = (tl == len) & kr_http_server_same(token, t->buf + t->tok[i], tl < len ? tl : len);

		if (same && !who)
			who = t->buf + t->user[i];
	}
	return who;
}

int kr_tokens_have_user(const struct kr_tokens *t, const char *user)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->buf + t->user[i], user) == 0)
			return 1;
	return 0;
}

/* A comma list of names (chars: lower-case letters, digits, '-', '.'), or "*". */
static int name_list(const char *p, size_t n)
{
	size_t i, item = 0;

	if (n == 1 && *p == '*')
		return 1;
	for (i = 0; i < n; i++) {
		char ch = p[i];

		if (ch == ',') {
			if (item == 0)
				return 0;
			item = 0;
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.') {
			if (++item > 253)
				return 0;
		} else {
			return 0;
		}
	}
	return item > 0;
}

/* The next field of [*p, end) separated by blanks. */
static int field(const char **p, const char *end, const char **f, size_t *n)
{
	const char *q = *p;

	while (q < end && (*q == ' ' || *q == '\t'))
		q++;
	*f = q;
	while (q < end && *q != ' ' && *q != '\t')
		q++;
	*n = (size_t)(q - *f);
	*p = q;
	return *n > 0;
}

int kr_rules_parse(struct kr_rules *r, const char *text, size_t len, char *err, size_t errlen)
{
	size_t pos = 0, used = 0;
	int no = 0;
	struct line l;

	r->n = 0;
	while (next_line(text, len, &pos, &no, &l)) {
		const char *p = l.p, *f[4];
		size_t n[4];
		long at[3];
		int i;

		for (i = 0; i < 4; i++)
			if (!field(&p, l.end, &f[i], &n[i]))
				break;
		if (i != 3)
			return bad(err, errlen, l.no, "not: user namespaces resources");
		if (n[0] >= KR_ACCESS_USER_MAX || !plain(f[0], n[0], 0))
			return bad(err, errlen, l.no, "the user is longer than 63 bytes or has a quote, comma or "
				   "control character");
		if (!name_list(f[1], n[1]))
			return bad(err, errlen, l.no, "namespaces: not \"*\" or a comma list of names");
		if (!name_list(f[2], n[2]))
			return bad(err, errlen, l.no, "resources: not \"*\" or a comma list of names");
		if (r->n == KR_SERVE_IDENTITIES)
			return bad(err, errlen, l.no, "more rules than KR_SERVE_IDENTITIES");
		for (i = 0; i < 3; i++)
			if ((at[i] = keep(r->buf, sizeof(r->buf), &used, f[i], n[i])) < 0) {
				kr_snprintf(err, errlen, "line %d: the file is larger than KR_SERVE_ACCESS_BYTES", l.no);
				return KR_ETOOBIG;
			}
		r->user[r->n] = (uint32_t)at[0];
		r->ns[r->n] = (uint32_t)at[1];
		r->res[r->n] = (uint32_t)at[2];
		r->n++;
	}
	return 0;
}

/* Nonzero if the comma list names item. */
static int listed(const char *list, const char *item)
{
	size_t n = strlen(item);

	while (*list) {
		const char *c = strchr(list, ','), *e = c ? c : list + strlen(list);

		if ((size_t)(e - list) == n && memcmp(list, item, n) == 0)
			return 1;
		list = c ? c + 1 : e;
	}
	return 0;
}

int kr_rules_allow(const struct kr_rules *r, const char *user, const char *ns, const char *plural,
		   const char *name, int secret)
{
	int i;

	for (i = 0; i < r->n; i++) {
		const char *nsl = r->buf + r->ns[i], *rl = r->buf + r->res[i];
		int all_ns = strcmp(nsl, "*") == 0;

		if (strcmp(r->buf + r->user[i], user) != 0)
			continue;
		if (!(all_ns || (ns && *ns && listed(nsl, ns))))
			continue;
		if (secret ? listed(rl, plural) : (strcmp(rl, "*") == 0 || listed(rl, plural) || listed(rl, name)))
			return 1;
	}
	return 0;
}
