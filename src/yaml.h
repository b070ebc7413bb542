/*
 * YAML: the subset kubectl writes kubeconfig files in, read into a tree of
 * nodes held in the caller's array (no allocation). Block mappings and
 * sequences (also "- name: x" at the parent key's indentation), plain,
 * single- and double-quoted scalars, comments, | and > block scalars, one
 * document with an optional "---", and the empty flow collections {} and [].
 * Anchors, aliases, tags, directives and non-empty flow collections are
 * refused with an error in words and the line it is on.
 *
 * The reader is recursive descent over lines: a node is a mapping, a
 * sequence or a scalar, recognised by its first line; its column, and the
 * column of the collection around it, decide which later lines belong to it.
 * Recursion is bounded by KR_KUBECONFIG_DEPTH and the tree by
 * KR_KUBECONFIG_NODES. Scalars are kept as spans of the text: decoding them
 * (escapes, folding, chomping) is the reader of the tree's business
 * (kubeconfig.c), which also converts JSON files into the same tree.
 */
#ifndef KR_YAML_H
#define KR_YAML_H

#include <stddef.h>

enum kr_yaml_type { KR_YAML_NULL, KR_YAML_SCALAR, KR_YAML_MAP, KR_YAML_SEQ };
/* A scalar's style: YAML's five, and JSON's string and other value (a converted tree). */
enum kr_yaml_style {
	KR_YAML_PLAIN, KR_YAML_SINGLE, KR_YAML_DOUBLE, KR_YAML_LITERAL, KR_YAML_FOLDED,
	KR_YAML_JSON, KR_YAML_JPRIM
};
/* A block scalar's chomping indicator: none, '-' or '+'. */
enum kr_yaml_chomp { KR_YAML_CLIP, KR_YAML_STRIP, KR_YAML_KEEP };
#define KR_YAML_STYLE(st) ((st) & 15)
#define KR_YAML_CHOMP(st) ((st) >> 4)

/* One node: a scalar, a key, a mapping or a sequence. */
struct kr_yaml_node {
	unsigned start, end;   /* scalar: its text (inside quotes; a block scalar's lines) */
	unsigned line;         /* 1-based line where it starts */
	unsigned indent;       /* block scalar: the indentation of its content */
	int child;             /* mapping: first key; key: its value; sequence: first item */
	int next;              /* next key or item of the same parent; -1 after the last */
	unsigned char type;    /* enum kr_yaml_type */
	unsigned char style;   /* scalar style, and a block scalar's chomping */
};

/* Why a text is not read: the line and the words (static, no text from the file). */
struct kr_yaml_error {
	unsigned line;
	char what[128];
};

/*
 * Reads the document s[skip..n) (skip: a byte order mark before it) into
 * nodes[0..KR_KUBECONFIG_NODES). Returns 0 with *count nodes and *root the
 * top node (-1 for an empty document), or KR_EINVAL (not in the subset) or
 * KR_ETOOBIG (more nodes than the array holds) with *err filled in.
 */
int kr_yaml_parse(const char *s, size_t n, size_t skip, struct kr_yaml_node *nodes,
		  int *count, int *root, struct kr_yaml_error *err);

/*
 * Reads the escape whose letter is at s[*i] (after a backslash), within
 * s[..n). Returns its code point and moves *i past it, or -1 if invalid.
 */
long kr_yaml_escape(const char *s, size_t *i, size_t n);

#endif /* KR_YAML_H */
