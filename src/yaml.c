/*
 * The YAML subset of kubeconfig files, read into a tree (yaml.h). Owns the
 * syntax only: what a node is and where it ends. What the nodes mean, and
 * the decoding of their text, are kubeconfig.c's.
 */
#include "yaml.h"

#include <stdarg.h>
#include <string.h>

#include "codec.h"
#include "fmt.h"
#include "kreflect.h"
#include "kubeconfig.h"

#define IND_END (-1)   /* next_content: end of the text */
#define IND_DOC (-2)   /* next_content: a --- or ... document marker */

struct yaml {
	struct kr_yaml_error *err;
	const char *s;
	size_t n;
	size_t pos;            /* the cursor */
	size_t bol;            /* start of the cursor's line */
	unsigned line;         /* the cursor's line */
	int depth;             /* open mappings and sequences */
	struct kr_yaml_node *nodes;
	int count;
};

__attribute__((format(printf, 4, 5)))
static int yfail(struct yaml *y, int code, unsigned line, const char *fmt, ...)
{
	va_list ap;

	y->err->line = line;
	va_start(ap, fmt);
	kr_vsnprintf(y->err->what, sizeof(y->err->what), fmt, ap);
	va_end(ap);
	return code;
}

static int ch(const struct yaml *y, size_t i)
{
	return i < y->n ? (unsigned char)y->s[i] : -1;
}

static int is_eol(const struct yaml *y, size_t i)
{
	return i >= y->n || y->s[i] == '\n' || y->s[i] == '\r';
}

static int is_blank(int c)
{
	return c == ' ' || c == '\t';
}

/* Whitespace or the end of the line: what must follow an indicator. */
static int is_sep(const struct yaml *y, size_t i)
{
	return is_eol(y, i) || is_blank(ch(y, i));
}

/* Moves the cursor to the start of the next line. */
static void next_line(struct yaml *y)
{
	size_t i = y->pos;

	while (!is_eol(y, i))
		i++;
	if (i < y->n) {
		if (y->s[i] == '\r')
			i++;
		if (i < y->n && y->s[i] == '\n')
			i++;
		y->line++;
	}
	y->pos = y->bol = i;
}

static int doc_marker(const struct yaml *y, size_t i)
{
	return i == y->bol && y->n - i >= 3 &&
	       (memcmp(y->s + i, "---", 3) == 0 || memcmp(y->s + i, "...", 3) == 0) &&
	       is_sep(y, i + 3);
}

static int new_node(struct yaml *y, int type, unsigned line)
{
	struct kr_yaml_node *nd;

	if (y->count >= KR_KUBECONFIG_NODES)
		return yfail(y, KR_ETOOBIG, line, "more than %d values (KR_KUBECONFIG_NODES)",
			    KR_KUBECONFIG_NODES);
	nd = &y->nodes[y->count];
	memset(nd, 0, sizeof(*nd));
	nd->type = (unsigned char)type;
	nd->line = line;
	nd->child = nd->next = -1;
	return y->count++;
}

/*
 * From the start of a line, skips blank and comment lines. *ind is then the
 * indentation of the next line with content (the cursor stays at its start),
 * IND_END or IND_DOC.
 */
static int next_content(struct yaml *y, int *ind)
{
	for (;;) {
		size_t i = y->pos;
		int sp = 0, tab = 0;

		if (i >= y->n) {
			*ind = IND_END;
			return 0;
		}
		for (; is_blank(ch(y, i)); i++) {
			if (y->s[i] == '\t')
				tab = 1;
			else if (!tab)
				sp++;
		}
		if (is_eol(y, i) || y->s[i] == '#') {
			y->pos = i;
			next_line(y);
			continue;
		}
		if (tab)
			return yfail(y, KR_EINVAL, y->line, "tab in indentation (YAML indents with spaces)");
		*ind = sp == 0 && doc_marker(y, i) ? IND_DOC : sp;
		return 0;
	}
}

/* After a value: optional blanks and comment, then the end of the line. */
static int end_line(struct yaml *y)
{
	size_t i = y->pos;
	int white = 0;

	for (; is_blank(ch(y, i)); i++)
		white = 1;
	if (ch(y, i) == '#' && (white || i == y->bol))
		while (!is_eol(y, i))
			i++;
	if (!is_eol(y, i))
		return yfail(y, KR_EINVAL, y->line, "unexpected text after a value");
	y->pos = i;
	next_line(y);
	return 0;
}

long kr_yaml_escape(const char *s, size_t *i, size_t n)
{
	int nhex = 0, k, h;
	long v;

	if (*i >= n)
		return -1;
	switch (s[*i]) {
	case '0': v = 0; break;
	case 'a': v = 7; break;
	case 'b': v = 8; break;
	case 't': case '\t': v = 9; break;
	case 'n': v = 10; break;
	case 'v': v = 11; break;
	case 'f': v = 12; break;
	case 'r': v = 13; break;
	case 'e': v = 27; break;
	case ' ': v = ' '; break;
	case '"': v = '"'; break;
	case '/': v = '/'; break;
	case '\\': v = '\\'; break;
	case 'N': v = 0x85; break;
	case '_': v = 0xa0; break;
	case 'L': v = 0x2028; break;
	case 'P': v = 0x2029; break;
	case 'x': nhex = 2; v = 0; break;
	case 'u': nhex = 4; v = 0; break;
	case 'U': nhex = 8; v = 0; break;
	default: return -1;
	}
	(*i)++;
	for (k = 0; k < nhex; k++, (*i)++) {
		if (*i >= n || (h = kr_hex_value((unsigned char)s[*i])) < 0)
			return -1;
		v = v * 16 + h;
		if (v > 0x10ffff)
			return -1;
	}
	return v;
}

/*
 * Scans the quoted scalar whose quote is at the cursor: escapes must be
 * valid, and a line it continues on must be indented more than pi (so that a
 * missing closing quote is reported where it opened, not at the next quote).
 * Leaves the cursor after the closing quote; [*start, *end) is the inside.
 */
static int scan_quoted(struct yaml *y, int pi, size_t *start, size_t *end)
{
	int q = y->s[y->pos];
	unsigned line0 = y->line;
	const char *what = q == '"' ? "double" : "single";
	size_t i = y->pos + 1;

	*start = i;
	for (;;) {
		int c = ch(y, i);

		if (c < 0)
			return yfail(y, KR_EINVAL, line0, "unterminated %s-quoted string", what);
		if (c == q) {
			if (q == '\'' && ch(y, i + 1) == '\'') {
				i += 2;
				continue;
			}
			break;
		}
		if (c == '\\' && q == '"' && !is_eol(y, i + 1)) {
			size_t j = i + 1;
			long cp = kr_yaml_escape(y->s, &j, y->n);

			if (cp < 0 || (cp >= 0xd800 && cp <= 0xdfff))
				return yfail(y, KR_EINVAL, y->line, "invalid escape sequence in a double-quoted string");
			i = j;
			continue;
		}
		if (c == '\\') {
			i++;
			continue;
		}
		if (c == '\n' || c == '\r') {
			size_t k;
			int sp = 0;

			y->pos = i;
			next_line(y);
			i = y->pos;
			while (ch(y, i + (size_t)sp) == ' ')
				sp++;
			for (k = i + (size_t)sp; is_blank(ch(y, k)); k++)
				;
			if (is_eol(y, k)) {
				if (k >= y->n)
					return yfail(y, KR_EINVAL, line0, "unterminated %s-quoted string", what);
				i = k;
				continue;
			}
			if (doc_marker(y, i) || sp <= pi)
				return yfail(y, KR_EINVAL, line0,
					    "unterminated %s-quoted string (or its next line is not indented)", what);
			i = k;
			continue;
		}
		i++;
	}
	*end = i;
	y->pos = i + 1;
	return 0;
}

/* Nonzero if a plain scalar may start at s[i]. */
static int plain_start(const struct yaml *y, size_t i)
{
	int c = ch(y, i);

	if (c <= 0 || is_eol(y, i) || is_blank(c))
		return 0;
	if (c == '-' || c == '?' || c == ':')
		return !is_sep(y, i + 1);
	return !strchr(",[]{}#&*!|>'\"%@`", c);
}

/* Nonzero if the text at the cursor is "key:" (on this line). */
static int is_key(const struct yaml *y)
{
	size_t i = y->pos;
	int q = ch(y, i);

	if (q == '"' || q == '\'') {
		for (i++; !is_eol(y, i); i++) {
			if (y->s[i] == '\\' && q == '"') {
				i++;
				if (is_eol(y, i))
					return 0;
				continue;
			}
			if (y->s[i] == q) {
				if (q == '\'' && ch(y, i + 1) == '\'') {
					i++;
					continue;
				}
				break;
			}
		}
		if (is_eol(y, i))
			return 0;
		for (i++; is_blank(ch(y, i)); i++)
			;
		return ch(y, i) == ':' && is_sep(y, i + 1);
	}
	if (!plain_start(y, i))
		return 0;
	for (; !is_eol(y, i); i++) {
		if (y->s[i] == ':' && is_sep(y, i + 1))
			return 1;
		if (is_blank(y->s[i]) && ch(y, i + 1) == '#')
			return 0;
	}
	return 0;
}

/* A key at the cursor (is_key said so); leaves the cursor after its ':'. */
static int parse_key(struct yaml *y)
{
	int k = new_node(y, KR_YAML_SCALAR, y->line), q = ch(y, y->pos), r;
	size_t a, b;

	if (k < 0)
		return k;
	if (q == '"' || q == '\'') {
		r = scan_quoted(y, -1, &a, &b);
		if (r < 0)
			return r;
		y->nodes[k].style = q == '"' ? KR_YAML_DOUBLE : KR_YAML_SINGLE;
		while (is_blank(ch(y, y->pos)))
			y->pos++;
	} else {
		a = y->pos;
		while (!(y->s[y->pos] == ':' && is_sep(y, y->pos + 1)))
			y->pos++;
		b = y->pos;
		while (b > a && is_blank(y->s[b - 1]))
			b--;
		y->nodes[k].style = KR_YAML_PLAIN;
	}
	y->nodes[k].start = (unsigned)a;
	y->nodes[k].end = (unsigned)b;
	y->pos++;   /* the ':' */
	return k;
}

/* A plain scalar, continued on lines indented more than pi. */
static int parse_plain(struct yaml *y, int pi)
{
	int k = new_node(y, KR_YAML_SCALAR, y->line), ind, r;
	size_t i = y->pos, last = y->pos;

	if (k < 0)
		return k;
	y->nodes[k].start = (unsigned)i;
	for (;;) {
		int comment = 0;

		for (; !is_eol(y, i); i++) {
			if (y->s[i] == ':' && is_sep(y, i + 1))
				return yfail(y, KR_EINVAL, y->line,
					    "\": \" inside a value (quote the value, or check the indentation)");
			if (is_blank(y->s[i]) && ch(y, i + 1) == '#') {
				comment = 1;
				break;
			}
			if (!is_blank(y->s[i]))
				last = i + 1;
		}
		y->pos = i;
		next_line(y);
		if (comment)
			break;
		/* The next line with content continues the scalar if indented more. */
		r = next_content(y, &ind);
		if (r < 0)
			return r;
		if (ind <= pi || ind < 0)
			break;
		i = y->pos + (size_t)ind;
		if (y->s[i] == '#')
			break;
	}
	y->nodes[k].end = (unsigned)last;
	y->nodes[k].style = KR_YAML_PLAIN;
	return k;
}

static int parse_block_scalar(struct yaml *y, int pi)
{
	unsigned line = y->line, lead_line = 0, l;
	size_t i = y->pos + 1, j, last;
	int style = y->s[y->pos] == '|' ? KR_YAML_LITERAL : KR_YAML_FOLDED, chomp = -1, m = 0, k, r, n;
	long ci = -1, maxlead = 0, sp;

	for (n = 0; n < 2; n++, i++) {
		int c = ch(y, i);

		if ((c == '+' || c == '-') && chomp < 0)
			chomp = c == '+' ? KR_YAML_KEEP : KR_YAML_STRIP;
		else if (c >= '1' && c <= '9' && !m)
			m = c - '0';
		else
			break;
	}
	if (chomp < 0)
		chomp = KR_YAML_CLIP;
	if (!is_sep(y, i))
		return yfail(y, KR_EINVAL, line,
			    "invalid block scalar header (| or > with optional +, - and one digit)");
	y->pos = i;
	r = end_line(y);
	if (r < 0)
		return r;
	k = new_node(y, KR_YAML_SCALAR, line);
	if (k < 0)
		return k;
	if (m) {
		ci = (pi < 0 ? 0 : pi) + m;
	} else {
		/* The first line with text sets the indentation. */
		for (j = y->pos, l = y->line; j < y->n;) {
			for (sp = 0; ch(y, j + (size_t)sp) == ' '; sp++)
				;
			if (!is_eol(y, j + (size_t)sp)) {
				ci = sp;
				break;
			}
			if (sp > maxlead) {
				maxlead = sp;
				lead_line = l;
			}
			j += (size_t)sp;
			if (j >= y->n)
				break;
			if (y->s[j] == '\r')
				j++;
			j++;
			l++;
		}
		if (ci <= pi)   /* no text: empty lines at most, as indented as the most indented */
			ci = maxlead > pi + 1 ? maxlead : pi + 1;
		else if (maxlead > ci)
			return yfail(y, KR_EINVAL, lead_line,
				    "a leading empty line of a block scalar is indented more than its text");
	}
	y->nodes[k].start = (unsigned)y->pos;
	last = y->pos;
	while (y->pos < y->n) {
		size_t t;

		for (j = y->pos, sp = 0; sp < ci && ch(y, j) == ' '; sp++)
			j++;
		if (sp < ci) {
			for (t = j; is_blank(ch(y, t)); t++)
				;
			if (is_eol(y, t)) {
				y->pos = t;
				next_line(y);
				continue;
			}
			if (ch(y, j) == '\t')
				return yfail(y, KR_EINVAL, y->line, "tab in indentation (YAML indents with spaces)");
			break;   /* indented less: the scalar ended */
		}
		if (ci == 0 && doc_marker(y, y->pos))
			break;
		y->pos = j;
		next_line(y);
		last = y->pos;
	}
	y->nodes[k].end = (unsigned)(chomp == KR_YAML_KEEP ? y->pos : last);
	y->nodes[k].indent = (unsigned)ci;
	y->nodes[k].style = (unsigned char)(style | chomp << 4);
	return k;
}

/* {} or []: kubectl writes these for empty preferences and extensions. */
static int parse_flow(struct yaml *y)
{
	int open = y->s[y->pos], close = open == '{' ? '}' : ']', k, r;
	size_t i = y->pos + 1;

	while (is_blank(ch(y, i)))
		i++;
	if (ch(y, i) != close)
		return yfail(y, KR_EINVAL, y->line,
			    "a non-empty flow %s (%c...%c) is not supported; write it in block style",
			    open == '{' ? "mapping" : "sequence", open, close);
	k = new_node(y, open == '{' ? KR_YAML_MAP : KR_YAML_SEQ, y->line);
	if (k < 0)
		return k;
	y->pos = i + 1;
	r = end_line(y);
	return r < 0 ? r : k;
}

/* A scalar (or {} / []) at the cursor, where a mapping or sequence cannot start. */
static int parse_scalar(struct yaml *y, int pi)
{
	size_t i = y->pos, a, b;
	int c = ch(y, i), k, r;

	switch (c) {
	case '|':
	case '>':
		return parse_block_scalar(y, pi);
	case '"':
	case '\'':
		k = new_node(y, KR_YAML_SCALAR, y->line);
		if (k < 0)
			return k;
		r = scan_quoted(y, pi, &a, &b);
		if (r < 0)
			return r;
		y->nodes[k].start = (unsigned)a;
		y->nodes[k].end = (unsigned)b;
		y->nodes[k].style = c == '"' ? KR_YAML_DOUBLE : KR_YAML_SINGLE;
		for (i = y->pos; is_blank(ch(y, i)); i++)
			;
		if (ch(y, i) == ':' && is_sep(y, i + 1))
			return yfail(y, KR_EINVAL, y->line, "a \"key:\" where a value was expected (check the indentation)");
		r = end_line(y);
		return r < 0 ? r : k;
	case '{':
	case '[':
		return parse_flow(y);
	case '&':
		return yfail(y, KR_EINVAL, y->line, "YAML anchors (&) are not supported");
	case '*':
		return yfail(y, KR_EINVAL, y->line, "YAML aliases (*) are not supported");
	case '!':
		return yfail(y, KR_EINVAL, y->line, "YAML tags (!) are not supported");
	default:
		break;
	}
	if (!plain_start(y, i)) {
		if (c == '-')
			return yfail(y, KR_EINVAL, y->line, "a \"- \" entry where a value was expected (check the indentation)");
		if (c == '?')
			return yfail(y, KR_EINVAL, y->line, "complex keys (\"? \") are not supported");
		if (c == ':')
			return yfail(y, KR_EINVAL, y->line, "a ':' without a key");
		return yfail(y, KR_EINVAL, y->line, "a value cannot start with '%c' (quote it)", c);
	}
	return parse_plain(y, pi);
}

static int block_node(struct yaml *y, int pi, int col);
static int parse_seq(struct yaml *y, int col);

/* Links node n after *last among parent's children (first: parent's child). */
static void append_child(struct yaml *y, int parent, int *last, int n)
{
	if (*last < 0)
		y->nodes[parent].child = n;
	else
		y->nodes[*last].next = n;
	*last = n;
}

/*
 * After an entry of a block in column col: the next content line, whose
 * indentation goes to *ind. 1 when it is in the block's column, 0 when the
 * block has ended (less indented), < 0 an error (more indented, or a read).
 */
static int next_entry(struct yaml *y, int col, int *ind)
{
	int r = next_content(y, ind);

	if (r < 0)
		return r;
	if (*ind < col)
		return 0;
	if (*ind > col)
		return yfail(y, KR_EINVAL, y->line, "bad indentation (%d spaces where %d were expected)",
			    *ind, col);
	return 1;
}

/*
 * The value of an entry in column col ("key:" or "-") that starts on a later
 * line; the cursor is at the end of the entry's line, which is line. The
 * block indented deeper, else (mapping only: seq_at_col) a sequence in the
 * same column, else null.
 */
static int value_below(struct yaml *y, int col, unsigned line, int seq_at_col)
{
	int ind, r = end_line(y);

	if (r < 0)
		return r;
	r = next_content(y, &ind);
	if (r < 0)
		return r;
	if (ind > col) {
		y->pos += (size_t)ind;
		return block_node(y, col, ind);
	}
	if (seq_at_col && ind == col && ch(y, y->pos + (size_t)ind) == '-' &&
	    is_sep(y, y->pos + (size_t)ind + 1)) {
		y->pos += (size_t)ind;
		return parse_seq(y, col);
	}
	return new_node(y, KR_YAML_NULL, line);
}



/* The sequence whose first "-" is at the cursor, in column col. */
static int parse_seq(struct yaml *y, int col)
{
	int s, item, last = -1, ind, r;

	if (++y->depth > KR_KUBECONFIG_DEPTH)
		return yfail(y, KR_EINVAL, y->line, "nested deeper than %d levels (KR_KUBECONFIG_DEPTH)",
			    KR_KUBECONFIG_DEPTH);
	s = new_node(y, KR_YAML_SEQ, y->line);
	if (s < 0)
		return s;
	for (;;) {
		size_t i = y->pos + 1;

		while (ch(y, i) == ' ')
			i++;
		if (ch(y, i) == '\t')
			return yfail(y, KR_EINVAL, y->line, "tab after \"-\" (YAML indents with spaces)");
		if (is_eol(y, i) || ch(y, i) == '#') {
			y->pos = i;
			item = value_below(y, col, y->line, 0);
		} else {
			y->pos = i;
			item = block_node(y, col, (int)(i - y->bol));
		}
		if (item < 0)
			return item;
		append_child(y, s, &last, item);
		r = next_entry(y, col, &ind);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		if (!(ch(y, y->pos + (size_t)ind) == '-' && is_sep(y, y->pos + (size_t)ind + 1)))
			break;   /* the parent mapping's next key, at the same column */
		y->pos += (size_t)ind;
	}
	y->depth--;
	return s;
}

/* The value after "key:" of a mapping in column col; the cursor is after the ':'. */
static int map_value(struct yaml *y, int col)
{
	size_t i = y->pos;
	unsigned line = y->line;

	while (is_blank(ch(y, i)))
		i++;
	if (!is_eol(y, i) && y->s[i] != '#') {
		y->pos = i;
		return parse_scalar(y, col);
	}
	y->pos = i;
	return value_below(y, col, line, 1);
}

/* The mapping whose first key is at the cursor, in column col. */
static int parse_map(struct yaml *y, int col)
{
	int m, k, v, last = -1, ind, r;

	if (++y->depth > KR_KUBECONFIG_DEPTH)
		return yfail(y, KR_EINVAL, y->line, "nested deeper than %d levels (KR_KUBECONFIG_DEPTH)",
			    KR_KUBECONFIG_DEPTH);
	m = new_node(y, KR_YAML_MAP, y->line);
	if (m < 0)
		return m;
	for (;;) {
		k = parse_key(y);
		if (k < 0)
			return k;
		append_child(y, m, &last, k);
		v = map_value(y, col);
		if (v < 0)
			return v;
		y->nodes[k].child = v;
		r = next_entry(y, col, &ind);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		y->pos += (size_t)ind;
		if (ch(y, y->pos) == '-' && is_sep(y, y->pos + 1))
			return yfail(y, KR_EINVAL, y->line, "a \"- \" entry where a key was expected (check the indentation)");
		if (!is_key(y))
			return yfail(y, KR_EINVAL, y->line, "expected \"key: value\" (check the indentation)");
	}
	y->depth--;
	return m;
}

/*
 * The node at the cursor, in column col, inside a collection in column pi: a
 * sequence, a mapping or a scalar.
 */
static int block_node(struct yaml *y, int pi, int col)
{
	if (ch(y, y->pos) == '-' && is_sep(y, y->pos + 1))
		return parse_seq(y, col);
	if (is_key(y))
		return parse_map(y, col);
	return parse_scalar(y, pi);
}

int kr_yaml_parse(const char *s, size_t n, size_t skip, struct kr_yaml_node *nodes,
		  int *count, int *root_out, struct kr_yaml_error *err)
{
	struct yaml y;
	int ind, r, root = -1, after = 0;

	memset(&y, 0, sizeof(y));
	y.err = err;
	err->line = 0;
	err->what[0] = '\0';
	y.s = s;
	y.n = n;
	y.pos = y.bol = skip;
	y.line = 1;
	y.nodes = nodes;
	r = next_content(&y, &ind);
	if (r < 0)
		return r;
	if (ind == 0 && y.s[y.pos] == '%')
		return yfail(&y, KR_EINVAL, y.line, "YAML directives (%%) are not supported");
	if (ind == IND_DOC && y.s[y.pos] == '-') {
		size_t i = y.pos + 3;

		while (is_blank(ch(&y, i)))
			i++;
		if (!is_eol(&y, i) && y.s[i] != '#')
			return yfail(&y, KR_EINVAL, y.line, "text after \"---\" (start the document on the next line)");
		y.pos += 3;
		r = end_line(&y);
		if (r == 0)
			r = next_content(&y, &ind);
		if (r < 0)
			return r;
	}
	if (ind >= 0) {
		y.pos += (size_t)ind;
		root = block_node(&y, -1, ind);
		if (root < 0)
			return root;
		r = next_content(&y, &ind);
		if (r < 0)
			return r;
	}
	while (ind == IND_DOC) {
		after = 1;
		y.pos += 3;
		r = end_line(&y);
		if (r == 0)
			r = next_content(&y, &ind);
		if (r < 0)
			return r;
	}
	if (ind >= 0)
		return yfail(&y, KR_EINVAL, y.line, after ? "more than one YAML document"
							: "unexpected text (check the indentation)");
	*count = y.count;
	*root_out = root;
	return 0;
}
