#include "kubeconfig.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "codec.h"
#include "fmt.h"
#include "kreflect.h"
#include "port.h"
#include "yaml.h"

/*
 * Reading a kubeconfig is three steps over a parse tree of one file at a time:
 * check every file and find current-context; find the context; find its
 * cluster and user. A KUBECONFIG list is read again for the later steps (the
 * tree of one file is all the work area holds); a single file is parsed once.
 *
 * YAML files are read into the tree by yaml.c; JSON files by kr_json_parse,
 * whose tokens become the same nodes. Scalars are spans of the text, decoded
 * (escapes, folding, base64) here, only when a field is read.
 */

/* One load in progress. */
struct ctx {
	struct kr_kubeconfig *out;
	struct kr_kubeconfig_work *w;
	char *err;
	size_t errlen;
	/* where the documents come from: a path array, a ':' list or a buffer */
	const char *const *paths;
	int npaths;
	const char *list;
	const char *buf;
	size_t buflen;
	/* the current document */
	const char *text;
	size_t len;
	const char *name;
	unsigned key_line;     /* line of the key get() found last */
	char desc[KR_KUBECONFIG_PATH_MAX + 32];   /* names the whole set in messages */
};

/* --- errors ------------------------------------------------------------------------ */

__attribute__((format(printf, 4, 5)))
static int fail(struct ctx *c, int code, unsigned line, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	int r;

	if (!c->err || c->errlen == 0)
		return code;
	if (!c->name || !c->name[0])
		r = kr_snprintf(c->err, c->errlen, "kubeconfig: ");
	else if (line)
		r = kr_snprintf(c->err, c->errlen, "kubeconfig %s:%u: ", c->name, line);
	else
		r = kr_snprintf(c->err, c->errlen, "kubeconfig %s: ", c->name);
	n = r < 0 ? 0 : (size_t)r;
	if (n < c->errlen) {
		va_start(ap, fmt);
		kr_vsnprintf(c->err + n, c->errlen - n, fmt, ap);
		va_end(ap);
	}
	/* Names come from the file: keep the message on one line. */
	for (n = 0; c->err[n]; n++)
		if ((unsigned char)c->err[n] < 0x20 || c->err[n] == 0x7f)
			c->err[n] = '?';
	return code;
}

/* --- checks on the raw text --------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0], cp, min;
	size_t len, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Binary data, control bytes, bad UTF-8 and lone CRs are refused up front. */
static int check_text(struct ctx *c, const char *s, size_t n)
{
	unsigned line = 1;
	size_t i = 0, k;

	while (i < n) {
		unsigned char b = (unsigned char)s[i];

		if (b == '\n') {
			line++;
		} else if (b == '\r') {
			if (i + 1 >= n || s[i + 1] != '\n')
				return fail(c, KR_EINVAL, line, "carriage return without a line feed");
		} else if ((b < 0x20 && b != '\t') || b == 0x7f) {
			return fail(c, KR_EINVAL, line, "control character 0x%02x (not a text file?)", b);
		} else if (b >= 0x80) {
			k = utf8_len((const unsigned char *)s + i, n - i);
			if (!k)
				return fail(c, KR_EINVAL, line, "invalid UTF-8 (not a text file?)");
			i += k;
			continue;
		}
		i++;
	}
	return 0;
}

/* --- JSON ------------------------------------------------------------------------------ */

static unsigned line_at(const char *s, size_t off)
{
	unsigned line = 1;
	size_t i;

	for (i = 0; i < off; i++)
		if (s[i] == '\n')
			line++;
	return line;
}

static int parse_json(struct ctx *c, const char *s, size_t n)
{
	struct kr_kubeconfig_work *w = c->w;
	struct {
		int node, last;
	} stack[KR_KUBECONFIG_DEPTH];
	int ntok, i, sp = 0;
	unsigned line = 1;
	size_t off = 0;

	ntok = kr_json_parse(s, n, w->toks, KR_KUBECONFIG_NODES);
	if (ntok == KR_ENOSPC) {
		int at = w->toks[KR_KUBECONFIG_NODES - 1].start;

		return fail(c, KR_ETOOBIG, at > 0 && (size_t)at < n ? line_at(s, (size_t)at) : 0,
			    "more than %d JSON values (KR_KUBECONFIG_NODES)", KR_KUBECONFIG_NODES);
	}
	if (ntok <= 0) {
		const char *why;
		size_t at = kr_json_error_at(s, n, &why);

		return fail(c, KR_EINVAL, line_at(s, at), "%s", why ? why : "invalid JSON");
	}
	for (i = 0; i < ntok; i++) {
		const kr_json_tok *t = &w->toks[i];
		struct kr_yaml_node *nd = &w->nodes[i];
		int p = t->parent, holder;

		for (; off < (size_t)t->start; off++)
			if (s[off] == '\n')
				line++;
		memset(nd, 0, sizeof(*nd));
		nd->start = (unsigned)t->start;
		nd->end = (unsigned)t->end;
		nd->line = line;
		nd->child = nd->next = -1;
		switch (t->type) {
		case KR_JSON_T_OBJECT: nd->type = KR_YAML_MAP; break;
		case KR_JSON_T_ARRAY: nd->type = KR_YAML_SEQ; break;
		case KR_JSON_T_STRING: nd->type = KR_YAML_SCALAR; nd->style = KR_YAML_JSON; break;
		default:
			nd->type = t->end - t->start == 4 && memcmp(s + t->start, "null", 4) == 0 ? KR_YAML_NULL : KR_YAML_SCALAR;
			nd->style = KR_YAML_JPRIM;
			break;
		}
		if (i > 0) {
			if (p < 0 || p >= i)
				return fail(c, KR_EINVAL, line, "invalid JSON");
			/* A value's parent is its key; the key's is the object. */
			holder = w->toks[p].type == KR_JSON_T_STRING ? w->toks[p].parent : p;
			while (sp > 0 && stack[sp - 1].node != holder)
				sp--;
			if (sp == 0)
				return fail(c, KR_EINVAL, line, "invalid JSON");
			if (holder != p) {
				w->nodes[p].child = i;
			} else {
				if (stack[sp - 1].last < 0)
					w->nodes[p].child = i;
				else
					w->nodes[stack[sp - 1].last].next = i;
				stack[sp - 1].last = i;
			}
		}
		if (nd->type == KR_YAML_MAP || nd->type == KR_YAML_SEQ) {
			if (sp >= KR_KUBECONFIG_DEPTH)
				return fail(c, KR_EINVAL, line, "nested deeper than %d levels (KR_KUBECONFIG_DEPTH)",
					    KR_KUBECONFIG_DEPTH);
			stack[sp].node = i;
			stack[sp].last = -1;
			sp++;
		}
	}
	w->nnodes = ntok;
	w->root = 0;
	return 0;
}

/* Parses text[0..len) into the work area's tree: JSON if it starts with '{'. */
static int parse_text(struct ctx *c, const char *s, size_t n)
{
	struct kr_yaml_error yerr;
	size_t skip = 0, i;
	int r;

	c->w->nnodes = 0;
	c->w->root = -1;
	if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
		skip = 3;
	r = check_text(c, s + skip, n - skip);
	if (r < 0)
		return r;
	for (i = skip; i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'); i++)
		;
	if (i < n && s[i] == '{') {
		/* Token offsets count from the text jsmn is given: the tree's text starts there. */
		c->text = s + skip;
		c->len = n - skip;
		return parse_json(c, c->text, c->len);
	}
	r = kr_yaml_parse(s, n, skip, c->w->nodes, &c->w->nnodes, &c->w->root, &yerr);
	return r < 0 ? fail(c, r, yerr.line, "%s", yerr.what) : 0;
}

/* --- scalars ---------------------------------------------------------------------------- */

/*
 * Where decoded scalar text goes: a bounded buffer (or nowhere, to count and
 * check), optionally through a base64 decoder. len counts every byte, also
 * those past cap.
 */
struct sink {
	unsigned char *buf;
	size_t cap, len;
	unsigned acc;
	unsigned char b64, nacc, npad, bad, nul;
};

static void put_byte(struct sink *k, unsigned char b)
{
	if (b == 0)
		k->nul = 1;
	if (k->len < k->cap)
		k->buf[k->len] = b;
	k->len++;
}

static void put(struct sink *k, unsigned char b)
{
	int v;

	if (!k->b64) {
		put_byte(k, b);
		return;
	}
	if (b == ' ' || b == '\t' || b == '\n' || b == '\r')
		return;
	if (b == '=') {
		if (k->nacc < 2 || k->nacc + ++k->npad > 4)
			k->bad = 1;
		return;
	}
	v = kr_base64_value(b);
	if (v < 0 || k->npad) {
		k->bad = 1;
		return;
	}
	k->acc = k->acc << 6 | (unsigned)v;
	if (++k->nacc == 4) {
		put_byte(k, (unsigned char)(k->acc >> 16));
		put_byte(k, (unsigned char)(k->acc >> 8));
		put_byte(k, (unsigned char)k->acc);
		k->nacc = 0;
		k->acc = 0;
	}
}

static void b64_finish(struct sink *k)
{
	if (k->npad) {
		if (k->nacc + k->npad != 4) {
			k->bad = 1;
		} else if (k->nacc == 2) {
			put_byte(k, (unsigned char)(k->acc >> 4));
		} else {
			put_byte(k, (unsigned char)(k->acc >> 10));
			put_byte(k, (unsigned char)(k->acc >> 2));
		}
	} else if (k->nacc) {
		k->bad = 1;
	}
}

static void put_cp(struct sink *k, unsigned long cp)
{
	if (cp < 0x80) {
		put(k, (unsigned char)cp);
	} else if (cp < 0x800) {
		put(k, (unsigned char)(0xc0 | cp >> 6));
		put(k, (unsigned char)(0x80 | (cp & 0x3f)));
	} else if (cp < 0x10000) {
		put(k, (unsigned char)(0xe0 | cp >> 12));
		put(k, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
		put(k, (unsigned char)(0x80 | (cp & 0x3f)));
	} else {
		put(k, (unsigned char)(0xf0 | cp >> 18));
		put(k, (unsigned char)(0x80 | ((cp >> 12) & 0x3f)));
		put(k, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
		put(k, (unsigned char)(0x80 | (cp & 0x3f)));
	}
}

static int is_blank(int c)
{
	return c == ' ' || c == '\t';
}

static int is_break(char b)
{
	return b == '\n' || b == '\r';
}

/* Past the line break at s[i]. */
static size_t skip_break(const char *s, size_t b, size_t i)
{
	if (i < b && s[i] == '\r')
		i++;
	if (i < b && s[i] == '\n')
		i++;
	return i;
}

/* Plain: each line trimmed; one break folds to a space, n + 1 breaks to n newlines. */
static void decode_plain(const char *s, size_t a, size_t b, struct sink *k)
{
	size_t i = a, ls, le, j;
	unsigned breaks = 0, t;
	int first = 1;

	while (i < b) {
		while (i < b && is_blank(s[i]))
			i++;
		for (ls = i; i < b && !is_break(s[i]); i++)
			;
		for (le = i; le > ls && is_blank(s[le - 1]); le--)
			;
		if (le > ls) {
			if (!first) {
				if (breaks <= 1)
					put(k, ' ');
				for (t = 1; t < breaks; t++)
					put(k, '\n');
			}
			for (j = ls; j < le; j++)
				put(k, (unsigned char)s[j]);
			first = 0;
			breaks = 0;
		}
		if (i < b) {
			i = skip_break(s, b, i);
			breaks++;
		}
	}
}

/*
 * Quoted (and JSON strings): escapes, '' in single quotes, and line folding,
 * where blanks around a break go and one break is a space, n + 1 are n
 * newlines. Returns 0, or KR_EINVAL for a lone surrogate.
 */
static int decode_quoted(const char *s, size_t a, size_t b, int style, struct sink *k)
{
	size_t i = a, run = 0, j;
	int pending = 0;
	unsigned breaks, t;

	while (i < b) {
		unsigned char c = (unsigned char)s[i];

		if (is_break((char)c)) {
			pending = 0;   /* blanks before a break go */
			for (breaks = 0;;) {
				i = skip_break(s, b, i);
				breaks++;
				while (i < b && is_blank(s[i]))
					i++;
				if (!(i < b && is_break(s[i])))
					break;
			}
			if (breaks == 1)
				put(k, ' ');
			for (t = 1; t < breaks; t++)
				put(k, '\n');
			continue;
		}
		if (is_blank((char)c)) {
			if (!pending) {
				pending = 1;
				run = i;
			}
			i++;
			continue;
		}
		if (pending) {
			for (j = run; j < i; j++)
				put(k, (unsigned char)s[j]);
			pending = 0;
		}
		if (style == KR_YAML_SINGLE && c == '\'') {
			put(k, '\'');
			i += 2;
			continue;
		}
		if (style != KR_YAML_SINGLE && c == '\\') {
			long cp;

			i++;
			if (i < b && is_break(s[i])) {
				/* An escaped break joins the lines; empty lines after it stay. */
				i = skip_break(s, b, i);
				for (;;) {
					while (i < b && is_blank(s[i]))
						i++;
					if (!(i < b && is_break(s[i])))
						break;
					put(k, '\n');
					i = skip_break(s, b, i);
				}
				continue;
			}
			cp = kr_yaml_escape(s, &i, b);
			if (cp >= 0xd800 && cp <= 0xdbff && style == KR_YAML_JSON && b - i >= 6 && s[i] == '\\' &&
			    s[i + 1] == 'u') {
				size_t i2 = i + 1;
				long lo = kr_yaml_escape(s, &i2, b);

				if (lo >= 0xdc00 && lo <= 0xdfff) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					i = i2;
				}
			}
			if (cp < 0 || (cp >= 0xd800 && cp <= 0xdfff))
				return KR_EINVAL;
			put_cp(k, (unsigned long)cp);
			continue;
		}
		put(k, c);
		i++;
	}
	if (pending)
		for (j = run; j < b; j++)
			put(k, (unsigned char)s[j]);
	return 0;
}

/* Literal (|) and folded (>) block scalars, with their chomping. */
static void decode_block(const char *s, size_t a, size_t b, const struct kr_yaml_node *nd,
			 struct sink *k)
{
	int folded = KR_YAML_STYLE(nd->style) == KR_YAML_FOLDED, chomp = KR_YAML_CHOMP(nd->style);
	int prev = 0;   /* 0 no text yet, 1 a normal line, 2 a more-indented line */
	unsigned empty = 0, t;
	size_t i = a, ls, le, sp;

	while (i < b) {
		for (sp = 0; sp < nd->indent && i < b && s[i] == ' '; sp++)
			i++;
		for (ls = i; i < b && !is_break(s[i]); i++)
			;
		le = i;
		i = skip_break(s, b, i);
		if (sp < nd->indent || le == ls) {
			empty++;   /* less indented lines here are blank */
			continue;
		}
		{
			int cur = is_blank(s[ls]) ? 2 : 1;

			if (!prev) {
				for (t = 0; t < empty; t++)
					put(k, '\n');
			} else if (folded && prev == 1 && cur == 1) {
				if (!empty)
					put(k, ' ');
				for (t = 0; t < empty; t++)
					put(k, '\n');
			} else {
				for (t = 0; t <= empty; t++)
					put(k, '\n');
			}
			for (; ls < le; ls++)
				put(k, (unsigned char)s[ls]);
			prev = cur;
			empty = 0;
		}
	}
	if (chomp == KR_YAML_STRIP)
		return;
	if (prev && (chomp == KR_YAML_KEEP || (b > a && s[b - 1] == '\n')))
		put(k, '\n');
	if (chomp == KR_YAML_KEEP)
		for (t = 0; t < empty; t++)
			put(k, '\n');
}

/* Decodes scalar node v into k. Returns 0 or KR_EINVAL (bad JSON \u escape). */
static int decode(const struct ctx *c, int v, struct sink *k)
{
	const struct kr_yaml_node *nd = &c->w->nodes[v];
	size_t a = nd->start, b = nd->end, i;

	switch (KR_YAML_STYLE(nd->style)) {
	case KR_YAML_PLAIN:
		decode_plain(c->text, a, b, k);
		return 0;
	case KR_YAML_SINGLE:
	case KR_YAML_DOUBLE:
	case KR_YAML_JSON:
		return decode_quoted(c->text, a, b, KR_YAML_STYLE(nd->style), k);
	case KR_YAML_LITERAL:
	case KR_YAML_FOLDED:
		decode_block(c->text, a, b, nd, k);
		return 0;
	default:
		for (i = a; i < b; i++)
			put(k, (unsigned char)c->text[i]);
		return 0;
	}
}

/* Nonzero if key node k's text is key. */
static int key_is(const struct ctx *c, int k, const char *key)
{
	unsigned char buf[48];
	struct sink s;
	size_t n = strlen(key);

	memset(&s, 0, sizeof(s));
	s.buf = buf;
	s.cap = sizeof(buf);
	if (c->w->nodes[k].type != KR_YAML_SCALAR || decode(c, k, &s) < 0)
		return 0;
	return s.len == n && memcmp(buf, key, n) == 0;
}

/* --- reading the tree ------------------------------------------------------------------------ */

/* What a field is for messages: `cluster "x": server`. */
struct owner {
	const char *kind;      /* "cluster", "user", "context" or NULL (top level) */
	const char *name;
};

static unsigned line_of(const struct ctx *c, int v)
{
	return c->w->nodes[v].line;
}

/* Formats `<kind> "<name>": ` (or "") into buf for messages. */
static const char *who(const struct owner *o, char *buf, size_t size)
{
	if (!o || !o->kind)
		return "";
	kr_snprintf(buf, size, "%s \"%.80s\": ", o->kind, o->name ? o->name : "");
	return buf;
}

/*
 * The value of key in mapping node m (-1 if m is not a mapping or has no such
 * key) in *v. Returns 0, or KR_EINVAL if the key appears twice.
 */
static int get(struct ctx *c, int m, const char *key, int *v)
{
	int k, seen = -1;

	*v = -1;
	if (m < 0 || c->w->nodes[m].type != KR_YAML_MAP)
		return 0;
	for (k = c->w->nodes[m].child; k >= 0; k = c->w->nodes[k].next) {
		if (!key_is(c, k, key))
			continue;
		if (seen >= 0)
			return fail(c, KR_EINVAL, line_of(c, k), "duplicate key \"%s\" (first on line %u)", key,
				    line_of(c, seen));
		seen = k;
		c->key_line = line_of(c, k);
		*v = c->w->nodes[k].child;
	}
	return 0;
}

/* Nonzero if v is absent or null (YAML: empty, ~, null; JSON: null). */
static int is_null(const struct ctx *c, int v)
{
	const struct kr_yaml_node *nd;
	size_t n;
	const char *s;

	if (v < 0)
		return 1;
	nd = &c->w->nodes[v];
	if (nd->type == KR_YAML_NULL)
		return 1;
	if (nd->type != KR_YAML_SCALAR || KR_YAML_STYLE(nd->style) != KR_YAML_PLAIN)
		return 0;
	s = c->text + nd->start;
	n = nd->end - nd->start;
	return (n == 1 && s[0] == '~') ||
	       (n == 4 && (memcmp(s, "null", 4) == 0 || memcmp(s, "Null", 4) == 0 || memcmp(s, "NULL", 4) == 0));
}

/* Checks that v is a mapping (or absent/null). */
static int want_type(struct ctx *c, int v, int type, const struct owner *o, const char *field)
{
	char wb[128];

	if (is_null(c, v) || c->w->nodes[v].type == type)
		return 0;
	return fail(c, KR_EINVAL, c->key_line, "%s%s must be a %s", who(o, wb, sizeof(wb)), field,
		    type == KR_YAML_MAP ? "mapping" : "list");
}

/* Field key of mapping m, which must be of the given type (or absent/null). */
static int get_typed(struct ctx *c, int m, const char *key, int type, const struct owner *o)
{
	int v, r = get(c, m, key, &v);

	return r ? r : want_type(c, v, type, o, key);
}

/*
 * Reads string field `field` of mapping m into out[0..size) ("" when absent
 * or null); out NULL only checks it. Returns 0, KR_EINVAL (not a string, a NUL
 * inside, a bad escape) or KR_ETOOBIG (longer than size - 1).
 */
static int get_str(struct ctx *c, int m, const char *field, char *out, size_t size,
		   const struct owner *o, int *node)
{
	const struct kr_yaml_node *nd;
	struct sink k;
	char wb[128];
	int v, r;

	if (out)
		out[0] = '\0';
	r = get(c, m, field, &v);
	if (node)
		*node = v;
	if (r < 0 || is_null(c, v))
		return r;
	nd = &c->w->nodes[v];
	if (nd->type != KR_YAML_SCALAR || KR_YAML_STYLE(nd->style) == KR_YAML_JPRIM)
		return fail(c, KR_EINVAL, c->key_line, "%s%s must be a string", who(o, wb, sizeof(wb)), field);
	memset(&k, 0, sizeof(k));
	if (out) {
		k.buf = (unsigned char *)out;
		k.cap = size - 1;
	}
	if (decode(c, v, &k) < 0)
		return fail(c, KR_EINVAL, nd->line, "%s%s has an invalid \\u escape", who(o, wb, sizeof(wb)), field);
	if (k.nul)
		return fail(c, KR_EINVAL, nd->line, "%s%s contains a NUL character", who(o, wb, sizeof(wb)), field);
	if (out) {
		if (k.len > k.cap) {
			out[0] = '\0';
			return fail(c, KR_ETOOBIG, nd->line, "%s%s is longer than %zu bytes",
				    who(o, wb, sizeof(wb)), field, size - 1);
		}
		out[k.len] = '\0';
	}
	return 0;
}

/* A boolean field: YAML 1.1 words as go-yaml reads them, JSON true/false. */
static int get_bool(struct ctx *c, int m, const char *field, int *out, const struct owner *o)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES",
					   "on", "On", "ON", "y", "Y" };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO",
					  "off", "Off", "OFF", "n", "N" };
	const struct kr_yaml_node *nd;
	char wb[128];
	size_t n, i;
	int v, r;

	*out = 0;
	r = get(c, m, field, &v);
	if (r < 0 || is_null(c, v))
		return r;
	nd = &c->w->nodes[v];
	n = nd->end - nd->start;
	if (nd->type == KR_YAML_SCALAR && (KR_YAML_STYLE(nd->style) == KR_YAML_PLAIN || KR_YAML_STYLE(nd->style) == KR_YAML_JPRIM)) {
		for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
			if (strlen(yes[i]) == n && memcmp(c->text + nd->start, yes[i], n) == 0 &&
			    (KR_YAML_STYLE(nd->style) == KR_YAML_PLAIN || i == 0)) {
				*out = 1;
				return 0;
			}
			if (strlen(no[i]) == n && memcmp(c->text + nd->start, no[i], n) == 0 &&
			    (KR_YAML_STYLE(nd->style) == KR_YAML_PLAIN || i == 0))
				return 0;
		}
	}
	return fail(c, KR_EINVAL, c->key_line, "%s%s must be true or false", who(o, wb, sizeof(wb)), field);
}

/*
 * A *-data field: base64, decoded into the work area's data buffer when
 * fill (NUL after it), only checked otherwise.
 */
static int get_data(struct ctx *c, int m, const char *field, int fill, unsigned char **data,
		    size_t *len, const struct owner *o)
{
	struct kr_kubeconfig_work *w = c->w;
	const struct kr_yaml_node *nd;
	unsigned char probe[16];
	struct sink k;
	char wb[128];
	int v, r;

	if (fill) {
		*data = NULL;
		*len = 0;
	}
	r = get(c, m, field, &v);
	if (r < 0 || is_null(c, v))
		return r;
	nd = &w->nodes[v];
	if (nd->type != KR_YAML_SCALAR || KR_YAML_STYLE(nd->style) == KR_YAML_JPRIM)
		return fail(c, KR_EINVAL, c->key_line, "%s%s must be a base64 string", who(o, wb, sizeof(wb)), field);
	/* kubectl config view without --raw writes placeholders, valid base64 by chance. */
	memset(&k, 0, sizeof(k));
	k.buf = probe;
	k.cap = sizeof(probe);
	if (decode(c, v, &k) < 0)
		return fail(c, KR_EINVAL, nd->line, "%s%s has an invalid \\u escape", who(o, wb, sizeof(wb)), field);
	if ((k.len == 12 && memcmp(probe, "DATA+OMITTED", 12) == 0) ||
	    (k.len == 8 && memcmp(probe, "REDACTED", 8) == 0))
		return fail(c, KR_EINVAL, nd->line,
			    "%s%s is a placeholder (%.*s): write the file with kubectl config view --raw",
			    who(o, wb, sizeof(wb)), field, (int)k.len, (const char *)probe);
	memset(&k, 0, sizeof(k));
	k.b64 = 1;
	if (fill && w->data_used < KR_KUBECONFIG_DATA_MAX) {
		k.buf = w->data + w->data_used;
		k.cap = KR_KUBECONFIG_DATA_MAX - w->data_used - 1;
	}
	decode(c, v, &k);
	b64_finish(&k);
	if (k.bad)
		return fail(c, KR_EINVAL, nd->line, "%s%s is not valid base64", who(o, wb, sizeof(wb)), field);
	if (!fill || k.len == 0)
		return 0;
	if (k.len > k.cap)
		return fail(c, KR_ETOOBIG, nd->line,
			    "%s%s: the embedded data outgrow KR_KUBECONFIG_DATA_MAX (%u bytes)",
			    who(o, wb, sizeof(wb)), field, (unsigned)KR_KUBECONFIG_DATA_MAX);
	k.buf[k.len] = '\0';
	*data = k.buf;
	*len = k.len;
	w->data_used += k.len + 1;
	return 0;
}

/* A file path field, resolved against the directory of the current file. */
static int get_path(struct ctx *c, int m, const char *field, char *out, size_t size,
		    const struct owner *o)
{
	const char *slash;
	char wb[128];
	size_t dlen, plen;
	int r, v;

	r = get_str(c, m, field, out, size, o, &v);
	if (r < 0 || !out || !out[0] || out[0] == '/')
		return r;
	slash = strrchr(c->name, '/');
	if (!slash)
		return 0;   /* the file is in the working directory */
	dlen = (size_t)(slash - c->name) + 1;
	plen = strlen(out);
	if (dlen + plen >= size)
		return fail(c, KR_ETOOBIG, line_of(c, v), "%s%s is longer than %zu bytes with its directory",
			    who(o, wb, sizeof(wb)), field, size - 1);
	memmove(out + dlen, out, plen + 1);
	memcpy(out, c->name, dlen);
	return 0;
}

/* Each entry of a list: a mapping. */
static int entry_ok(struct ctx *c, int item, const char *list)
{
	if (c->w->nodes[item].type == KR_YAML_MAP)
		return 0;
	return fail(c, KR_EINVAL, line_of(c, item), "an entry of %s is not a mapping with name and %.*s",
		    list, (int)strlen(list) - 1, list);
}

/* A cluster entry's body: checked, and copied into the answer when fill. */
static int read_cluster(struct ctx *c, int body, const struct owner *o, int fill)
{
	struct kr_kubeconfig *out = c->out;
	int r, b = 0;

	r = want_type(c, body, KR_YAML_MAP, o, "cluster");
	if (r == 0)
		r = get_str(c, body, "server", fill ? out->server : NULL, sizeof(out->server), o, NULL);
	if (r == 0)
		r = get_path(c, body, "certificate-authority", fill ? out->ca_file : NULL, sizeof(out->ca_file), o);
	if (r == 0)
		r = get_data(c, body, "certificate-authority-data", fill, &out->ca_data, &out->ca_data_len, o);
	if (r == 0)
		r = get_bool(c, body, "insecure-skip-tls-verify", fill ? &out->insecure_skip_tls_verify : &b, o);
	if (r == 0)
		r = get_str(c, body, "tls-server-name", fill ? out->tls_server_name : NULL,
			    sizeof(out->tls_server_name), o, NULL);
	if (r == 0)
		r = get_str(c, body, "proxy-url", fill ? out->proxy_url : NULL, sizeof(out->proxy_url), o, NULL);
	if (r == 0)
		r = get_bool(c, body, "disable-compression", &b, o);
	if (r == 0)
		r = get_typed(c, body, "extensions", KR_YAML_SEQ, o);
	return r;
}

static int read_user(struct ctx *c, int body, const struct owner *o, int fill)
{
	struct kr_kubeconfig *out = c->out;
	static const char *const strs[] = { "as", "as-uid" };
	int r, i;

	r = want_type(c, body, KR_YAML_MAP, o, "user");
	if (r == 0)
		r = get_str(c, body, "token", fill ? out->token : NULL, sizeof(out->token), o, NULL);
	if (r == 0)
		r = get_path(c, body, "tokenFile", fill ? out->token_file : NULL, sizeof(out->token_file), o);
	if (r == 0)
		r = get_path(c, body, "client-certificate", fill ? out->cert_file : NULL, sizeof(out->cert_file), o);
	if (r == 0)
		r = get_data(c, body, "client-certificate-data", fill, &out->cert_data, &out->cert_data_len, o);
	if (r == 0)
		r = get_path(c, body, "client-key", fill ? out->key_file : NULL, sizeof(out->key_file), o);
	if (r == 0)
		r = get_data(c, body, "client-key-data", fill, &out->key_data, &out->key_data_len, o);
	if (r == 0)
		r = get_str(c, body, "username", fill ? out->username : NULL, sizeof(out->username), o, NULL);
	if (r == 0)
		r = get_str(c, body, "password", fill ? out->password : NULL, sizeof(out->password), o, NULL);
	for (i = 0; r == 0 && i < 2; i++)
		r = get_str(c, body, strs[i], NULL, 0, o, NULL);
	if (r == 0)
		r = get_typed(c, body, "exec", KR_YAML_MAP, o);
	if (r == 0)
		r = get_typed(c, body, "auth-provider", KR_YAML_MAP, o);
	if (r == 0)
		r = get_typed(c, body, "as-groups", KR_YAML_SEQ, o);
	if (r == 0)
		r = get_typed(c, body, "as-user-extra", KR_YAML_MAP, o);
	if (r == 0)
		r = get_typed(c, body, "extensions", KR_YAML_SEQ, o);
	return r;
}

static int read_context(struct ctx *c, int body, const struct owner *o, int fill)
{
	struct kr_kubeconfig *out = c->out;
	int r;

	r = want_type(c, body, KR_YAML_MAP, o, "context");
	if (r == 0)
		r = get_str(c, body, "cluster", fill ? out->cluster : NULL, sizeof(out->cluster), o, NULL);
	if (r == 0)
		r = get_str(c, body, "user", fill ? out->user : NULL, sizeof(out->user), o, NULL);
	if (r == 0)
		r = get_str(c, body, "namespace", fill ? out->ns : NULL, sizeof(out->ns), o, NULL);
	if (r == 0)
		r = get_typed(c, body, "extensions", KR_YAML_SEQ, o);
	return r;
}

/* The three lists of a kubeconfig and the key of each entry's body. */
static const char *const lists[3] = { "clusters", "users", "contexts" };
static const char *const bodies[3] = { "cluster", "user", "context" };

static int read_body(struct ctx *c, int which, int body, const struct owner *o, int fill)
{
	if (which == 0)
		return read_cluster(c, body, o, fill);
	if (which == 1)
		return read_user(c, body, o, fill);
	return read_context(c, body, o, fill);
}

/*
 * Checks the whole document as kubectl decodes it: the top level is a
 * mapping, the lists hold mappings, every known field has its type and every
 * *-data is base64. Copies current-context when the answer has none yet.
 */
static int check_doc(struct ctx *c, int want_current)
{
	char name[KR_KUBECONFIG_NAME_MAX];
	int root = c->w->root, r, l, v, item, body;

	if (is_null(c, root))
		return 0;
	if (c->w->nodes[root].type != KR_YAML_MAP)
		return fail(c, KR_EINVAL, line_of(c, root), "the top level is not a mapping (not a kubeconfig?)");
	r = get_str(c, root, "current-context", want_current ? c->out->context : NULL,
		    sizeof(c->out->context), NULL, NULL);
	for (l = 0; r == 0 && l < 3; l++) {
		r = get(c, root, lists[l], &v);
		if (r == 0)
			r = want_type(c, v, KR_YAML_SEQ, NULL, lists[l]);
		if (r < 0 || is_null(c, v))
			continue;
		for (item = c->w->nodes[v].child; r == 0 && item >= 0; item = c->w->nodes[item].next) {
			struct owner o = { bodies[l], name };

			r = entry_ok(c, item, lists[l]);
			if (r == 0) {
				/* A name too long for the answer cannot be asked for: check it only. */
				r = get_str(c, item, "name", name, sizeof(name), NULL, NULL);
				if (r == KR_ETOOBIG)
					r = get_str(c, item, "name", NULL, 0, NULL, NULL);
			}
			if (r == 0)
				r = get(c, item, bodies[l], &body);
			if (r == 0)
				r = read_body(c, l, body, &o, 0);
		}
	}
	return r;
}

/*
 * Finds the entry of list l named name in the current document: *body is its
 * body (-1 if it has none), *line its line, and the return value 1 if found,
 * 0 if not, or an error (the name twice).
 */
static int find_named(struct ctx *c, int l, const char *name, int *body, unsigned *line)
{
	char got[KR_KUBECONFIG_NAME_MAX];
	int v, item, r, found = -1;

	r = get(c, c->w->root, lists[l], &v);
	if (r < 0)
		return r;
	if (v < 0 || c->w->nodes[v].type != KR_YAML_SEQ)
		return 0;
	for (item = c->w->nodes[v].child; item >= 0; item = c->w->nodes[item].next) {
		if (get_str(c, item, "name", got, sizeof(got), NULL, NULL) < 0 || strcmp(got, name) != 0)
			continue;
		if (found >= 0)
			return fail(c, KR_EINVAL, line_of(c, item), "%s \"%.80s\" is defined twice (first on line %u)",
				    bodies[l], name, line_of(c, found));
		found = item;
	}
	if (found < 0)
		return 0;
	r = get(c, found, bodies[l], body);
	*line = line_of(c, found);
	return r < 0 ? r : 1;
}

/* --- documents ----------------------------------------------------------------------------------- */

/* Entry idx of the ':' list into w->path. Returns 1, 0 past the end, or KR_ETOOBIG. */
static int list_entry(struct ctx *c, int idx)
{
	const char *p = c->list;
	int n = 0;

	for (;;) {
		const char *e = strchr(p, ':');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len > 0 && n++ == idx) {
			if (len >= sizeof(c->w->path)) {
				c->name = "";
				return fail(c, KR_ETOOBIG, 0, "a KUBECONFIG entry is longer than %zu bytes",
					    sizeof(c->w->path) - 1);
			}
			memcpy(c->w->path, p, len);
			c->w->path[len] = '\0';
			return 1;
		}
		if (!e)
			return 0;
		p = e + 1;
	}
}

#define DOC_SKIPPED 1   /* open_doc: the file does not exist */
#define DOC_NONE 2      /* open_doc: there is no document idx */

/*
 * Makes document idx current (read, parsed and checked; a single document is
 * parsed once). Returns 0, DOC_SKIPPED, DOC_NONE or an error.
 */
static int open_doc(struct ctx *c, int idx, int want_current)
{
	struct kr_kubeconfig_work *w = c->w;
	long n;
	int r;

	if (c->buf) {
		if (idx > 0)
			return DOC_NONE;
		if (w->doc == idx)
			return 0;   /* c->text may start after a byte order mark */
		c->text = c->buf;
		c->len = c->buflen;
		if (c->len > KR_KUBECONFIG_MAX)
			return fail(c, KR_ETOOBIG, 0, "larger than %u bytes (KR_KUBECONFIG_MAX)",
				    (unsigned)KR_KUBECONFIG_MAX);
	} else {
		if (c->list) {
			r = list_entry(c, idx);
			if (r <= 0)
				return r < 0 ? r : DOC_NONE;
			c->name = w->path;
		} else {
			if (idx >= c->npaths)
				return DOC_NONE;
			c->name = c->paths[idx] ? c->paths[idx] : "";
			if (!c->name[0])
				return DOC_SKIPPED;
		}
		if (w->doc == idx)
			return 0;
		w->doc = -1;
		c->text = w->file;
		n = kr_port_read_file(c->name, w->file, sizeof(w->file));
		if (n == KR_ENOENT)
			return DOC_SKIPPED;
		if (n == KR_ETOOBIG)
			return fail(c, KR_ETOOBIG, 0, "larger than %u bytes (KR_KUBECONFIG_MAX)",
				    (unsigned)KR_KUBECONFIG_MAX);
		if (n < 0)
			return fail(c, KR_EIO, 0, "unable to read: %s", kr_port_last_error());
		c->len = (size_t)n;
	}
	r = parse_text(c, c->text, c->len);
	if (r == 0)
		r = check_doc(c, want_current && !c->out->context[0]);
	if (r < 0)
		return r;
	w->doc = idx;
	return 0;
}

/* For messages about the whole set: the one file, or the first and a count. */
static void set_name(struct ctx *c, int nfiles, int first)
{
	if (c->buf)
		return;
	if (c->list)
		list_entry(c, first);
	c->name = c->list ? c->w->path : c->paths[first];
	if (nfiles > 1) {
		kr_snprintf(c->desc, sizeof(c->desc), "%s (and %d more)", c->name, nfiles - 1);
		c->name = c->desc;
	}
}

/*
 * The chosen user: refused if it needs what kreflect cannot do (an exec
 * plugin, an auth-provider, impersonation), else copied into the answer and
 * checked as kubectl checks it.
 */
static int read_user_answer(struct ctx *c, int body, unsigned line)
{
	static const char *const imp[] = { "as", "as-uid", "as-groups", "as-user-extra" };
	static const char alt[] = "use a token, tokenFile, client certificate and key, or username and "
				  "password instead";
	struct kr_kubeconfig *out = c->out;
	struct owner o = { "user", out->user };
	char what[KR_KUBECONFIG_NAME_MAX];
	const char *base;
	int v, r, i;

	r = get(c, body, "exec", &v);
	if (r < 0)
		return r;
	if (!is_null(c, v)) {
		line = c->key_line;
		if (get_str(c, v, "command", what, sizeof(what), &o, NULL) < 0 || !what[0])
			kr_snprintf(what, sizeof(what), "?");
		base = strrchr(what, '/');
		return fail(c, KR_EINVAL, line,
			    "user \"%.80s\" gets its credentials from an exec plugin (%.80s), which kreflect "
			    "does not run; %s", out->user, base ? base + 1 : what, alt);
	}
	r = get(c, body, "auth-provider", &v);
	if (r < 0)
		return r;
	if (!is_null(c, v)) {
		line = c->key_line;
		if (get_str(c, v, "name", what, sizeof(what), &o, NULL) < 0 || !what[0])
			kr_snprintf(what, sizeof(what), "?");
		return fail(c, KR_EINVAL, line,
			    "user \"%.80s\" uses the auth-provider \"%.80s\", which kreflect does not support; %s",
			    out->user, what, alt);
	}
	for (i = 0; i < 4; i++) {
		r = get(c, body, imp[i], &v);
		if (r < 0)
			return r;
		if (!is_null(c, v))
			return fail(c, KR_EINVAL, c->key_line,
				    "user \"%.80s\" impersonates (%s), which kreflect does not support",
				    out->user, imp[i]);
	}
	r = read_user(c, body, &o, 1);
	if (r < 0)
		return r;
	if (out->cert_file[0] && out->cert_data)
		return fail(c, KR_EINVAL, line, "user \"%.80s\" has both client-certificate and "
			    "client-certificate-data", out->user);
	if (out->key_file[0] && out->key_data)
		return fail(c, KR_EINVAL, line, "user \"%.80s\" has both client-key and client-key-data",
			    out->user);
	if ((out->cert_file[0] || out->cert_data) && !(out->key_file[0] || out->key_data))
		return fail(c, KR_EINVAL, line, "user \"%.80s\" has a client certificate but no client key",
			    out->user);
	if ((out->key_file[0] || out->key_data) && !(out->cert_file[0] || out->cert_data))
		return fail(c, KR_EINVAL, line, "user \"%.80s\" has a client key but no client certificate",
			    out->user);
	if ((out->token[0] || out->token_file[0]) && (out->username[0] || out->password[0]))
		return fail(c, KR_EINVAL, line, "user \"%.80s\" has both a token and a username/password; "
			    "only one authentication method is allowed", out->user);
	return 0;
}

static int resolve(struct ctx *c, const char *context)
{
	struct kr_kubeconfig *out = c->out;
	unsigned line = 0;
	int i, r, nfiles = 0, first = -1, body = -1, found;
	int cluster_doc = -1, user_doc = -1;
	int want_current = !context || !context[0];

	/* 1: every file parses and has the kubeconfig shape; the first current-context wins. */
	for (i = 0;; i++) {
		r = open_doc(c, i, want_current);
		if (r == DOC_NONE)
			break;
		if (r == DOC_SKIPPED)
			continue;
		if (r < 0)
			return r;
		if (first < 0)
			first = i;
		nfiles++;
	}
	if (nfiles == 0) {
		c->name = NULL;
		if (c->list && c->list[strspn(c->list, ":")])
			return fail(c, KR_ENOENT, 0, "none of the files in \"%.200s\" exists", c->list);
		if (c->npaths > 1)
			return fail(c, KR_ENOENT, 0, "none of the %d files exists (the first is %.200s)",
				    c->npaths, c->paths[0] ? c->paths[0] : "");
		if (c->npaths == 1 && c->paths[0] && c->paths[0][0]) {
			c->name = c->paths[0];
			return fail(c, KR_ENOENT, 0, "no such file");
		}
		return fail(c, KR_ENOENT, 0, "no file named");
	}
	if (!want_current) {
		if (strlen(context) >= sizeof(out->context)) {
			set_name(c, nfiles, first);
			return fail(c, KR_ENOENT, 0, "no context has a name that long");
		}
		kr_snprintf(out->context, sizeof(out->context), "%s", context);
	}
	if (!out->context[0]) {
		set_name(c, nfiles, first);
		return fail(c, KR_EINVAL, 0, "no current-context is set; name a context to use");
	}

	/* 2: the first file that defines the context. */
	for (i = first, found = 0; !found; i++) {
		r = open_doc(c, i, 0);
		if (r == DOC_NONE)
			break;
		if (r == DOC_SKIPPED)
			continue;
		if (r < 0)
			return r;
		found = find_named(c, 2, out->context, &body, &line);
		if (found < 0)
			return found;
	}
	if (!found) {
		set_name(c, nfiles, first);
		return fail(c, KR_ENOENT, 0, "context \"%.80s\" not found", out->context);
	}
	{
		struct owner o = { "context", out->context };

		r = read_context(c, body, &o, 1);
		if (r < 0)
			return r;
		if (!out->cluster[0])
			return fail(c, KR_EINVAL, line, "context \"%.80s\" names no cluster", out->context);
		if (!out->user[0])
			return fail(c, KR_EINVAL, line, "context \"%.80s\" names no user", out->context);
	}

	/* 3: the first file that defines its cluster, and the first that defines its user. */
	for (i = first; cluster_doc < 0 || user_doc < 0; i++) {
		r = open_doc(c, i, 0);
		if (r == DOC_NONE)
			break;
		if (r == DOC_SKIPPED)
			continue;
		if (r < 0)
			return r;
		if (cluster_doc < 0) {
			struct owner o = { "cluster", out->cluster };

			found = find_named(c, 0, out->cluster, &body, &line);
			if (found < 0)
				return found;
			if (found) {
				cluster_doc = i;
				r = read_cluster(c, body, &o, 1);
				if (r < 0)
					return r;
				if (!out->server[0])
					return fail(c, KR_EINVAL, line, "cluster \"%.80s\" has no server", out->cluster);
				if (out->ca_file[0] && out->ca_data)
					return fail(c, KR_EINVAL, line,
						    "cluster \"%.80s\" has both certificate-authority and "
						    "certificate-authority-data", out->cluster);
				if (out->insecure_skip_tls_verify && (out->ca_file[0] || out->ca_data))
					return fail(c, KR_EINVAL, line,
						    "cluster \"%.80s\" has both a certificate authority and "
						    "insecure-skip-tls-verify", out->cluster);
			}
		}
		if (user_doc < 0) {
			found = find_named(c, 1, out->user, &body, &line);
			if (found < 0)
				return found;
			if (found) {
				user_doc = i;
				r = read_user_answer(c, body, line);
				if (r < 0)
					return r;
			}
		}
	}
	if (cluster_doc < 0 || user_doc < 0) {
		set_name(c, nfiles, first);
		if (cluster_doc < 0)
			return fail(c, KR_ENOENT, 0, "cluster \"%.80s\" of context \"%.80s\" not found",
				    out->cluster, out->context);
		return fail(c, KR_ENOENT, 0, "user \"%.80s\" of context \"%.80s\" not found", out->user,
			    out->context);
	}
	return 0;
}

/* --- the API ------------------------------------------------------------------------------------------- */

static int run(struct ctx *c, const char *context)
{
	int r;

	memset(c->out, 0, sizeof(*c->out));
	c->w->data_used = 0;
	c->w->nnodes = 0;
	c->w->root = -1;
	c->w->doc = -1;
	if (c->err && c->errlen)
		c->err[0] = '\0';
	r = resolve(c, context);
	c->w->doc = -1;   /* a later call reads the files again */
	if (r == 0 && c->err && c->errlen)
		c->err[0] = '\0';   /* messages of names skipped on the way */
	if (r < 0) {
		/* No half answers: secrets copied so far go too. */
		memset(c->out, 0, sizeof(*c->out));
		memset(c->w->data, 0, c->w->data_used);
		c->w->data_used = 0;
	}
	return r;
}

int kr_kubeconfig_load(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
		       const char *const *paths, int npaths, const char *context,
		       char *err, size_t errlen)
{
	struct ctx c;

	memset(&c, 0, sizeof(c));
	c.out = out;
	c.w = w;
	c.err = err;
	c.errlen = errlen;
	c.paths = paths;
	c.npaths = paths ? npaths : 0;
	return run(&c, context);
}

int kr_kubeconfig_load_list(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
			    const char *list, const char *context, char *err, size_t errlen)
{
	struct ctx c;

	memset(&c, 0, sizeof(c));
	c.out = out;
	c.w = w;
	c.err = err;
	c.errlen = errlen;
	c.list = list ? list : "";
	return run(&c, context);
}

int kr_kubeconfig_load_buffer(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
			      const char *buf, size_t len, const char *name,
			      const char *context, char *err, size_t errlen)
{
	struct ctx c;

	memset(&c, 0, sizeof(c));
	c.out = out;
	c.w = w;
	c.err = err;
	c.errlen = errlen;
	c.buf = buf ? buf : "";
	c.buflen = buf ? len : 0;
	c.name = name ? name : "<buffer>";
	return run(&c, context);
}

/*
 * Zeroes p[0..n): the whole pages in the middle are handed back to the
 * kernel (they read as zeros again, and stop costing RAM); only the partial
 * pages at the ends are written.
 */
static void wipe_region(void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p, lo = (a + 4095u) & ~(uintptr_t)4095u;
	uintptr_t hi = (a + n) & ~(uintptr_t)4095u;

	if (hi <= lo) {
		memset(p, 0, n);
		return;
	}
	memset(p, 0, lo - a);
	memset((void *)hi, 0, a + n - hi);
	kr_port_discard((void *)lo, hi - lo);
}

void kr_kubeconfig_wipe(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w)
{
	if (out)
		memset(out, 0, sizeof(*out));
	if (w) {
		wipe_region(w->file, sizeof(w->file));
		wipe_region(w->data, sizeof(w->data));
		w->data_used = 0;
		w->doc = -1;
	}
	/* The stores must happen although nothing reads the memory again. */
	__asm__ __volatile__("" : : "r"(out), "r"(w) : "memory");
}
