/*
 * JSON: the framer that cuts a byte stream into whole objects, and the jsmn
 * wrapper that reads one object held in memory.
 *
 * The framers are resumable state machines fed whatever bytes arrived. They
 * find object boundaries by structure (depth of {} and [], strings, backslash
 * escapes), not by newlines (in line mode a newline inside an object is an
 * error, never a boundary), and copy each object into an output buffer the
 * caller names with its capacity (in kreflect, the arena's free tail), so an
 * object is copied once and a list of 10,000 items costs one item of memory.
 * An object larger than the capacity is skipped to its end and reported with
 * its size: the stream stays in sync. The framers do not validate JSON beyond
 * structure; kr_json_parse and kr_json_parse_sel do, on the framed object.
 *
 * kr_json_parse tokenizes a complete object with jsmn (strict mode, parent
 * links) and then checks the grammar jsmn lets through (separators, literals,
 * numbers, control bytes in strings), so a token array it returns describes
 * valid JSON and the helpers below may trust it. kr_json_parse_sel accepts the
 * same texts in one pass of its own and tokenizes only the parts asked for:
 * the reflector's path, where most of an object is never read.
 */
#ifndef KR_JSON_H
#define KR_JSON_H

#include <stddef.h>

#include "kreflect_config.h"

/* Longest continue token kept (with its NUL); the API server's are ~100-300 bytes. */
#ifndef KR_JSON_CONTINUE_MAX
#define KR_JSON_CONTINUE_MAX 4096
#endif

#if KR_RV_MAX < 2
#error "KR_RV_MAX must hold at least one character and a NUL"
#endif
#if KR_JSON_CONTINUE_MAX < 2
#error "KR_JSON_CONTINUE_MAX must hold at least one character and a NUL"
#endif

/* What the framers found (errors are negative KR_E... codes; 0 is "need more"). */
#define KR_JSON_OBJECT 1   /* a complete object is in the output buffer */
#define KR_JSON_SKIPPED 2  /* an object larger than the output buffer was skipped */
#define KR_JSON_END 3      /* the list object is complete (items framer only) */

/* --- object framer ---------------------------------------------------------- */

/*
 * Cuts a stream of concatenated top-level objects (a watch stream) into single
 * objects. Whitespace between objects is allowed, nothing else is. The fields
 * marked "out" are for the caller to read; the others are private.
 */
struct kr_json_framer {
	size_t len;            /* out: after KR_JSON_OBJECT, the object is dst[0..len);
				  after KR_JSON_SKIPPED, dst[0..len) holds its first
				  len (up to cap) bytes, which usually include metadata */
	size_t skipped_bytes;  /* out: after KR_JSON_SKIPPED, the object's full size */
	const char *error;     /* out: after an error, why (static text); else NULL */
	char *dst;
	size_t cap;
	size_t size;           /* bytes of the current object seen so far */
	size_t depth;          /* open { and [ of the current object */
	int err;               /* the sticky error code once failed */
	unsigned char state;
	unsigned char overflow; /* the current object no longer fits in dst */
	unsigned char lines;    /* line mode: see kr_json_framer_set_lines */
};

/* Prepares f for a new stream, with no output buffer (every object is skipped). */
void kr_json_framer_init(struct kr_json_framer *f);

/*
 * Line mode (on != 0), for a watch stream, where the apiserver writes one
 * object per line: a newline inside an unfinished object, or a control byte
 * (below 0x20) inside a string, is KR_EPROTO. Structure alone would read an
 * event cut short as the start of a longer one and swallow every event after
 * it; this stops at the cut. Off (the default) allows any JSON whitespace.
 */
void kr_json_framer_set_lines(struct kr_json_framer *f, int on);

/*
 * Names the caller's buffer dst[0..cap) that the next object is copied into
 * (only kr_json_framer_feed writes it). Call it between objects; called in the
 * middle of one, that object comes out as KR_JSON_SKIPPED.
 */
void kr_json_framer_set_output(struct kr_json_framer *f, char *dst, size_t cap);

/*
 * Nonzero while an object is half framed into the output buffer and still
 * fits it: naming another one now would lose it, and writing over this one
 * would corrupt it. (One that outgrew it comes out SKIPPED whatever happens.)
 */
int kr_json_framer_busy(const struct kr_json_framer *f);

/*
 * Nonzero while an object is half framed and has outgrown the output
 * buffer: its first len bytes are there, the rest will not be (it comes out
 * SKIPPED); until a new output is named.
 */
int kr_json_framer_outgrown(const struct kr_json_framer *f);

/*
 * Feeds buf[0..len); *consumed stops right after each object, so feed the rest
 * again. Returns KR_JSON_OBJECT (dst[0..f->len)), KR_JSON_SKIPPED (larger than
 * cap; f->skipped_bytes), 0 (all used, need more) or KR_EPROTO, sticky, f->error.
 */
int kr_json_framer_feed(struct kr_json_framer *f, const char *buf, size_t len,
			size_t *consumed);

/*
 * The framing a watch stream rarely needs: in line mode, between objects, if
 * buf[0..len) holds (after whitespace) a whole line that starts with '{',
 * ends with '}' before its trailing whitespace and fits the output, copies
 * it there (dst[0..f->len)) and returns KR_JSON_OBJECT, *consumed right
 * after the '}'; else 0. Tentative, without a scan: the caller checks that
 * the copy is exactly one valid object (kr_json_parse_sel > 0), and when it
 * is not, feeds the same bytes to kr_json_framer_feed, which frames them as
 * ever (this leaves the framer's state alone). One pass over the event.
 */
int kr_json_framer_line(struct kr_json_framer *f, const char *buf, size_t len, size_t *consumed);

/*
 * Tells the framer the stream ended. Returns 0 if it ended between objects,
 * KR_EPROTO if it ended inside one (f->error says so) or the framer had failed.
 */
int kr_json_framer_eof(struct kr_json_framer *f);

/* --- list items framer ---------------------------------------------------------- */

/*
 * Reads a LIST response body, {"kind":..., "metadata":{...}, "items":[...]},
 * yielding each element of the top-level "items" array (each must be an
 * object) into the output buffer, and capturing the list's metadata wherever
 * it appears. Other top-level and metadata members are skipped. Keys are
 * compared as sent: a key written with escapes matches nothing.
 */
struct kr_json_items {
	size_t len;            /* out: as kr_json_framer.len, for the last item */
	size_t skipped_bytes;  /* out: as kr_json_framer.skipped_bytes */
	const char *error;     /* out: after an error, why (static text); else NULL */
	char resource_version[KR_RV_MAX];           /* out: metadata.resourceVersion, or "" */
	char continue_token[KR_JSON_CONTINUE_MAX];  /* out: metadata.continue, or "" */
	long long remaining_item_count;             /* out: metadata.remainingItemCount, or -1 */
	struct kr_json_framer f;  /* the item copier, also used to skip other values */
	char *field;           /* the metadata string being read, and its size */
	size_t field_size;
	size_t field_len;
	long long num;
	int err;
	unsigned char state;
	unsigned char level;   /* 1 in the list object, 2 in its metadata */
	unsigned char key;     /* which known key the value belongs to */
	unsigned char klen;
	char kbuf[24];         /* the key being read, cut short: only short keys matter */
};

/* Prepares it for a new list body, with no output buffer and empty metadata. */
void kr_json_items_init(struct kr_json_items *it);

/*
 * Names the caller's buffer dst[0..cap) that the next item is copied into, as
 * kr_json_framer_set_output does: call it between items.
 */
void kr_json_items_set_output(struct kr_json_items *it, char *dst, size_t cap);

/* Nonzero while an item is half copied into the output (as kr_json_framer_busy). */
int kr_json_items_busy(const struct kr_json_items *it);
/* Nonzero while an item has outgrown the output buffer (as kr_json_framer_outgrown). */
int kr_json_items_outgrown(const struct kr_json_items *it);

/*
 * Feeds buf[0..len) of the body; *consumed stops after each item. Returns
 * KR_JSON_OBJECT, KR_JSON_SKIPPED (as the framer), KR_JSON_END (metadata final;
 * later bytes may only be whitespace), 0, or sticky KR_EPROTO / KR_ETOOBIG (a
 * metadata string longer than its buffer as sent), with it->error.
 */
int kr_json_items_feed(struct kr_json_items *it, const char *buf, size_t len,
		       size_t *consumed);

/*
 * Tells the items framer the body ended. Returns 0 if the list object was
 * complete, else KR_EPROTO (or the earlier error), with it->error set.
 */
int kr_json_items_eof(struct kr_json_items *it);

/* --- tokens of one object ---------------------------------------------------------- */

/* Token types, equal to jsmn's. */
enum kr_json_type {
	KR_JSON_T_UNDEFINED = 0,
	KR_JSON_T_OBJECT = 1,
	KR_JSON_T_ARRAY = 2,
	KR_JSON_T_STRING = 3,
	KR_JSON_T_PRIMITIVE = 4,
	KR_JSON_T_SKIPPED = 5,   /* kr_json_parse_sel: a valid object or array, not tokenized */
};

/*
 * One token, laid out as jsmn's jsmntok_t with parent links. Positions are
 * byte offsets into the text: a string's [start, end) excludes its quotes, a
 * container's includes its brackets. An object's size counts its keys; a
 * key's size is 1 (its value); an array's size counts its elements. Tokens
 * are in document order, so their starts increase. may_alias: jsmn writes
 * these through its own type, and the compiler must not assume otherwise.
 */
typedef struct __attribute__((may_alias)) kr_json_tok {
	int type;    /* enum kr_json_type */
	int start;
	int end;
	int size;
	int parent;  /* index of the enclosing token (the key, for a value), -1 for the root */
} kr_json_tok;

/*
 * Tokenizes json[0..len), exactly one JSON object with optional whitespace
 * around, into the caller's toks[0..ntoks). Returns the count (toks[0] is the
 * object), KR_ENOSPC (too many tokens), KR_EPROTO (not valid JSON, or not an
 * object; bad UTF-8 and duplicate keys pass), KR_ETOOBIG (len > INT_MAX).
 */
int kr_json_parse(const char *json, size_t len, kr_json_tok *toks, int ntoks);

#ifndef KR_JSON_DEPTH_MAX
#define KR_JSON_DEPTH_MAX 512  /* nested objects and arrays kr_json_parse_sel reads */
#endif
#if KR_JSON_DEPTH_MAX < 8
#error "KR_JSON_DEPTH_MAX below 8 cannot hold a Kubernetes object"
#endif

/*
 * As kr_json_parse (the same text is valid, the same tokens where it makes
 * them), in one pass and without jsmn, but tokenizing only what is asked for:
 * the root's members, and the members of each object or array on one of the
 * dotted key paths[0..npaths) from the root ("object.metadata" follows
 * "object" and "object.metadata"; arrays are followed only when named, their
 * elements never). Every other object or array is checked byte for byte and
 * made one KR_JSON_T_SKIPPED token spanning its brackets, size 0. npaths < 0
 * tokenizes everything. Returns the count, KR_ENOSPC (more than ntoks tokens,
 * or nesting deeper than KR_JSON_DEPTH_MAX), KR_EPROTO, KR_ETOOBIG, KR_EINVAL.
 */
int kr_json_parse_sel(const char *json, size_t len, kr_json_tok *toks, int ntoks,
		      const char *const *paths, int npaths);

/*
 * For a message about a text kr_json_parse refused: the byte offset of its
 * first error, with *why saying what is wrong there ("expected ':'", static
 * text). Returns len with *why NULL if the text is valid after all. One pass
 * of kr_json_parse_sel's reader, without tokens.
 */
size_t kr_json_error_at(const char *json, size_t len, const char **why);

/*
 * Index of the value of key[0..keylen) in object token obj, or -1 (no such key,
 * obj not an object). A key sent with escapes matches its unescaped text; the
 * first of duplicate keys wins; each other member costs O(log ntoks).
 */
int kr_json_find_key(const char *json, const kr_json_tok *toks, int ntoks, int obj,
		     const char *key, size_t keylen);

/*
 * Looks up several keys of object token obj in one pass over its members:
 * out[i] receives the index of the value of keys[i] (C strings), as
 * kr_json_find_key would return it, or -1. Returns how many were found.
 */
int kr_json_members(const char *json, const kr_json_tok *toks, int ntoks, int obj,
		    const char *const *keys, int nkeys, int *out);

/*
 * Index of the value at a dotted path of object keys under token root
 * ("object.metadata.name"), or -1 (also for an empty segment). Segments match
 * as in kr_json_find_key; keys containing dots (annotations) need that one.
 */
int kr_json_find(const char *json, const kr_json_tok *toks, int ntoks, int root,
		 const char *path);

/*
 * Nonzero if t is a string token whose unescaped text equals the C string s
 * exactly; 0 otherwise (also for a non-string token or a bad escape).
 */
int kr_json_str_eq(const char *json, const kr_json_tok *t, const char *s);

/*
 * Unescapes string token t into the caller's out[0..size), NUL-terminated,
 * \uXXXX and surrogate pairs as UTF-8. Returns the length (\u0000 puts a NUL
 * inside), KR_ETOOBIG (out too small), KR_EPROTO (lone surrogate), KR_EINVAL
 * (not a string); on failure out is "".
 */
int kr_json_unescape(const char *json, const kr_json_tok *t, char *out, size_t size);

/*
 * The other way: appends s to o as JSON string contents (quotes,
 * backslashes and control bytes escaped; no surrounding quotes). All or
 * nothing: if it does not fit, o->len stays and o overflows.
 */
struct kr_out;
void kr_json_escape(struct kr_out *o, const char *s);

/*
 * Reads primitive token t as a whole number (no fraction, no exponent) into
 * *out. Returns 0, KR_EPROTO if it is not one, KR_ETOOBIG if it overflows.
 */
int kr_json_int(const char *json, const kr_json_tok *t, long long *out);

/*
 * Removes the member whose value is token v (key, value, one comma) from the
 * caller's json[0..len) in place. Returns the new length, or len with json
 * untouched if v is not an object member's value. All tokens are stale after.
 */
size_t kr_json_remove_member(char *json, size_t len, const kr_json_tok *toks, int ntoks, int v);

/* --- metadata of a skipped object --------------------------------------------------- */

#ifndef KR_JSON_PREFIX_VALUE
#define KR_JSON_PREFIX_VALUE 320   /* a namespace/name key, a resourceVersion, a uid */
#endif

/*
 * Scans the first len bytes of an object that was too large to hold (the
 * prefix KR_JSON_SKIPPED leaves) for string values at the given dotted paths
 * from its root ("object.metadata.name"), tolerating that the text is cut.
 * out[i] receives the unescaped value or "". Returns how many were found
 * (also in *found), or KR_ETOOBIG if nesting passes 8 levels first.
 */
int kr_json_prefix_strings(const char *buf, size_t len, const char *const *paths, int npaths,
			   char (*out)[KR_JSON_PREFIX_VALUE], int *found);

#endif /* KR_JSON_H */
