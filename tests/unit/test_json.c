#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "json.h"
#include "kreflect.h"
#include "test.h"

/* --- golden inputs ------------------------------------------------------------------ */

/* Events as kube-apiserver writes them, plus the shapes that break naive framers. */
#define EV_ADDED                                                                         \
	"{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","       \
	"\"metadata\":{\"name\":\"cm-1\",\"namespace\":\"default\",\"uid\":\"6c1b\","         \
	"\"resourceVersion\":\"123457\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\"},"     \
	"\"data\":{\"k\":\"v\"}}}"
#define EV_BRACES                                                                        \
	"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"braces\"},"              \
	"\"data\":{\"a\":\"}}}{{{\",\"b\":\"]]][[\",\"c\":\"say \\\"hi\\\" {\"}}}"
#define EV_BACKSLASH                                                                     \
	"{\"type\":\"MODIFIED\",\"object\":{\"data\":{\"path\":\"C:\\\\dir\\\\\","           \
	"\"x\":\"\\\\\\\"}\",\"y\":\"\\\\\"}}}"
#define EV_UNICODE                                                                       \
	"{\"type\":\"ADDED\",\"object\":{\"data\":{\"u\":\"caf\\u00e9 \\ud83d\\ude00 "       \
	"\\u007d\\u0022{\",\"raw\":\"caf\xc3\xa9\"}}}"
#define EV_NESTED                                                                        \
	"{\"type\":\"ADDED\",\"object\":{\"spec\":{\"containers\":[{\"name\":\"a\","          \
	"\"ports\":[1,2,[3,{\"x\":[]}]],\"env\":null},{}],\"n\":-1.5e3,\"t\":true}}}"
#define EV_SPACES                                                                        \
	"{ \"type\" : \"BOOKMARK\" ,\n \"object\" : { \"metadata\" : {\r\n"                   \
	"\t\"resourceVersion\" : \"124001\" , \"annotations\" : "                           \
	"{ \"k8s.io/initial-events-end\" : \"true\" } } } }"
#define EV_EMPTY "{}"

static const char *const watch_objects[] = {
	EV_ADDED, EV_BRACES, EV_BACKSLASH, EV_UNICODE, EV_NESTED, EV_SPACES, EV_EMPTY, EV_ADDED,
};

/* Newlines, no newlines, CRLF and runs of whitespace between the same objects. */
static const char watch_stream[] =
	EV_ADDED "\n" EV_BRACES EV_BACKSLASH "\r\n" EV_UNICODE "  \n\t" EV_NESTED "\n\n"
	EV_SPACES EV_EMPTY " " EV_ADDED "\n";

#define LIST_ITEM_1                                                                      \
	"{\"metadata\":{\"name\":\"cm-1\",\"namespace\":\"default\",\"resourceVersion\":\"1001\"}," \
	"\"data\":{\"k\":\"v\",\"brace\":\"}]\"}}"
#define LIST_ITEM_2                                                                      \
	"{\"metadata\":{\"name\":\"cm-2\",\"annotations\":{\"a\":\"\\\"items\\\":[{\"}},"     \
	"\"data\":{\"list\":[{\"items\":[1]},[]]}}"
#define LIST_ITEM_3 "{}"

static const char *const list_items[] = { LIST_ITEM_1, LIST_ITEM_2, LIST_ITEM_3 };

static const char list_meta_first[] =
	"{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
	"\"metadata\":{\"resourceVersion\":\"123456\",\"selfLink\":{\"x\":[1,\"}\"]},"
	"\"continue\":\"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDU2fQ\",\"remainingItemCount\":1500},"
	"\"items\":[" LIST_ITEM_1 "," LIST_ITEM_2 " , " LIST_ITEM_3 "]}\n";

static const char list_meta_after[] =
	"{ \"apiVersion\" : \"v1\" , \"items\" : [ " LIST_ITEM_1 ",\n" LIST_ITEM_2 ","
	LIST_ITEM_3 "\n] , \"other\":{\"items\":[{\"no\":1}]}, \"n\":12, \"b\":false,"
	"\"metadata\" : { \"remainingItemCount\" : 1500 , \"continue\" : "
	"\"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDU2fQ\", \"resourceVersion\":\"12345\\u0036\" },"
	"\"kind\":\"ConfigMapList\"}";

/* --- transcripts: what a framer produced, as text, so runs can be compared ---------- */

#define TRANSCRIPT_MAX 16384
#define OUT_MAX 4096
#define CANARY 64

struct transcript {
	char text[TRANSCRIPT_MAX];
	size_t n;
};

static void tr_add(struct transcript *t, const char *s, size_t n)
{
	if (n > sizeof(t->text) - 1 - t->n)
		n = sizeof(t->text) - 1 - t->n;
	memcpy(t->text + t->n, s, n);
	t->n += n;
	t->text[t->n] = '\0';
}

static void tr_fmt(struct transcript *t, const char *what, long long a, long long b)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "%s %lld %lld\n", what, a, b);

	tr_add(t, line, (size_t)n);
}

static char out[OUT_MAX + CANARY];
static kr_json_tok toks_small[16];

static void canary_set(size_t cap)
{
	memset(out + cap, 0xA5, CANARY);
}

static int canary_ok(size_t cap)
{
	size_t i;

	for (i = cap; i < cap + CANARY; i++)
		if ((unsigned char)out[i] != 0xA5)
			return 0;
	return 1;
}

/* Where the piece starting at at ends: one byte, or the cut at split, or the end. */
static size_t piece_end(size_t at, size_t len, size_t split, int bytewise)
{
	if (bytewise)
		return at + 1;
	return at < split ? split : len;
}

/* Line mode for run_framer's framers (a watch stream: one object per line). */
static int framer_lines;

/*
 * Feeds in[0..len) to a fresh object framer with output capacity cap: whole
 * (split == len, bytewise 0), as two pieces cut at split, or one byte at a
 * time, and writes every outcome to t. Overrunning cap, leaving bytes unused
 * without a reason, or an error that does not stick are written as BUG.
 */
static void run_framer(const char *in, size_t len, size_t cap, size_t split, int bytewise,
		       struct transcript *t)
{
	struct kr_json_framer f;
	size_t at = 0;
	int r;

	t->n = 0;
	t->text[0] = '\0';
	kr_json_framer_init(&f);
	kr_json_framer_set_lines(&f, framer_lines);
	canary_set(cap);
	kr_json_framer_set_output(&f, out, cap);
	while (at < len) {
		size_t end = piece_end(at, len, split, bytewise);

		do {
			size_t used = 0;

			r = kr_json_framer_feed(&f, in + at, end - at, &used);
			if (used > end - at || !canary_ok(cap))
				tr_add(t, "BUG overrun\n", 12);
			at += used;
			if (r == KR_JSON_OBJECT) {
				tr_fmt(t, "OBJECT", (long long)f.len, 0);
				tr_add(t, out, f.len);
				tr_add(t, "\n", 1);
				kr_json_framer_set_output(&f, out, cap);
			} else if (r == KR_JSON_SKIPPED) {
				tr_fmt(t, "SKIPPED", (long long)f.skipped_bytes, (long long)f.len);
				if (f.len != cap || memcmp(out, in + at - f.skipped_bytes, f.len) != 0)
					tr_add(t, "BUG prefix\n", 11);
				kr_json_framer_set_output(&f, out, cap);
			} else if (r < 0) {
				size_t again;

				tr_fmt(t, "ERROR", r, (long long)at);
				if (kr_json_framer_feed(&f, in + at, len - at, &again) != r || again != 0 ||
				    f.error == NULL)
					tr_add(t, "BUG not sticky\n", 15);
				return;
			} else if (at != end) {
				tr_add(t, "BUG stopped early\n", 18);
				return;
			}
		} while (at < end);
	}
	tr_fmt(t, "EOF", kr_json_framer_eof(&f), 0);
}

/* Every way of cutting in[] into pieces gives the same transcript as feeding it whole. */
static int framer_same_every_way(const char *in, size_t len, size_t cap, struct transcript *whole)
{
	static struct transcript t;
	size_t k;

	run_framer(in, len, cap, len, 0, whole);
	if (strstr(whole->text, "BUG"))
		return 0;
	for (k = 0; k <= len; k++) {
		run_framer(in, len, cap, k, 0, &t);
		if (strcmp(t.text, whole->text) != 0)
			return 0;
	}
	run_framer(in, len, cap, len, 1, &t);
	return strcmp(t.text, whole->text) == 0;
}

static void expect_objects(struct transcript *t, const char *const *objs, size_t n)
{
	size_t i;

	t->n = 0;
	t->text[0] = '\0';
	for (i = 0; i < n; i++) {
		tr_fmt(t, "OBJECT", (long long)strlen(objs[i]), 0);
		tr_add(t, objs[i], strlen(objs[i]));
		tr_add(t, "\n", 1);
	}
}

/* --- object framer -------------------------------------------------------------------- */

KR_TEST(json, framer_golden_stream_whole)
{
	static struct transcript got, want;

	run_framer(watch_stream, sizeof(watch_stream) - 1, OUT_MAX, sizeof(watch_stream) - 1, 0, &got);
	expect_objects(&want, watch_objects, sizeof(watch_objects) / sizeof(watch_objects[0]));
	tr_fmt(&want, "EOF", 0, 0);
	check(strcmp(got.text, want.text) == 0);
	return 0;
}

KR_TEST(json, framer_golden_stream_every_split_and_bytewise)
{
	static struct transcript whole, want;

	check(framer_same_every_way(watch_stream, sizeof(watch_stream) - 1, OUT_MAX, &whole));
	expect_objects(&want, watch_objects, sizeof(watch_objects) / sizeof(watch_objects[0]));
	tr_fmt(&want, "EOF", 0, 0);
	check(strcmp(whole.text, want.text) == 0);
	return 0;
}

KR_TEST(json, framer_stops_right_after_each_object)
{
	struct kr_json_framer f;
	char buf[512];
	size_t used;
	const char in[] = "{\"a\":1}{\"b\":\"}\"}\n  {}";

	kr_json_framer_init(&f);
	kr_json_framer_set_output(&f, buf, sizeof(buf));
	check(kr_json_framer_feed(&f, in, sizeof(in) - 1, &used) == KR_JSON_OBJECT);
	check(used == 7 && f.len == 7 && memcmp(buf, "{\"a\":1}", 7) == 0);
	check(kr_json_framer_feed(&f, in + 7, sizeof(in) - 8, &used) == KR_JSON_OBJECT);
	check(used == 9 && f.len == 9 && memcmp(buf, "{\"b\":\"}\"}", 9) == 0);
	check(kr_json_framer_feed(&f, in + 16, sizeof(in) - 17, &used) == KR_JSON_OBJECT);
	check(used == 5 && f.len == 2 && memcmp(buf, "{}", 2) == 0);
	check(kr_json_framer_feed(&f, "", 0, &used) == 0 && used == 0);
	check(kr_json_framer_feed(&f, " \r\n\t", 4, &used) == 0 && used == 4);
	check(kr_json_framer_eof(&f) == 0);
	return 0;
}

KR_TEST(json, framer_escaped_quotes_at_every_alignment)
{
	static struct transcript t;
	static char in[2048], obj[128];
	size_t k, n = 0, len;

	/* The string scanner looks at words; put \" and \\ at every offset in one. */
	for (k = 0; k < 20; k++) {
		len = (size_t)snprintf(obj, sizeof(obj), "{\"k\":\"%.*s\\\"}{\\\\\",\"v\":\"]\"}",
				       (int)k, "abcdefghijklmnopqrstuvwxyz");
		memcpy(in + n, obj, len);
		n += len;
	}
	check(framer_same_every_way(in, n, OUT_MAX, &t));
	for (k = 0; k < 20; k++) {
		char line[64];

		len = (size_t)snprintf(obj, sizeof(obj), "{\"k\":\"%.*s\\\"}{\\\\\",\"v\":\"]\"}",
				       (int)k, "abcdefghijklmnopqrstuvwxyz");
		snprintf(line, sizeof(line), "OBJECT %zu 0\n", len);
		check(strstr(t.text, line) != NULL);
		check(kr_json_parse(obj, len, toks_small, 16) == 5);
	}
	check(strstr(t.text, "SKIPPED") == NULL && strstr(t.text, "ERROR") == NULL);
	check(strcmp(t.text + t.n - 8, "EOF 0 0\n") == 0);
	return 0;
}

KR_TEST(json, framer_object_at_cap_fits_one_more_is_skipped)
{
	static struct transcript t;
	static char in[256];
	const char big[] = "{\"name\":\"big\",\"x\":\"}}}\"}";
	const char next[] = "{\"name\":\"next\"}";
	size_t n = sizeof(big) - 1;
	char line[64];

	snprintf(in, sizeof(in), "%s\n%s\n", big, next);
	/* Exactly at cap: framed. */
	check(framer_same_every_way(in, strlen(in), n, &t));
	snprintf(line, sizeof(line), "OBJECT %zu 0\n%s\n", n, big);
	check(strncmp(t.text, line, strlen(line)) == 0);
	check(strstr(t.text, next) != NULL);
	/* One byte short: skipped with its full size, prefix kept, next one whole. */
	check(framer_same_every_way(in, strlen(in), n - 1, &t));
	snprintf(line, sizeof(line), "SKIPPED %zu %zu\nOBJECT %zu 0\n%s\nEOF 0 0\n",
		 n, n - 1, sizeof(next) - 1, next);
	check(strcmp(t.text, line) == 0);
	/* No output at all: everything is skipped, sizes still right. */
	check(framer_same_every_way(in, strlen(in), 0, &t));
	snprintf(line, sizeof(line), "SKIPPED %zu 0\nSKIPPED %zu 0\nEOF 0 0\n", n, sizeof(next) - 1);
	check(strcmp(t.text, line) == 0);
	return 0;
}

KR_TEST(json, framer_set_output_mid_object_skips_that_object)
{
	struct kr_json_framer f;
	char a[64], b[64];
	size_t used;

	kr_json_framer_init(&f);
	kr_json_framer_set_output(&f, a, sizeof(a));
	check(kr_json_framer_feed(&f, "{\"x\":", 5, &used) == 0 && used == 5);
	kr_json_framer_set_output(&f, b, sizeof(b));
	check(kr_json_framer_feed(&f, "1}{}", 4, &used) == KR_JSON_SKIPPED);
	check(used == 2 && f.skipped_bytes == 7 && f.len == 0);
	check(kr_json_framer_feed(&f, "{}", 2, &used) == KR_JSON_OBJECT);
	check(f.len == 2 && memcmp(b, "{}", 2) == 0);
	return 0;
}

KR_TEST(json, framer_eof_inside_object_or_string_is_an_error)
{
	static struct transcript t;
	const char unterminated_string[] = "{\"a\":1}\n{\"b\":\"never ends}";
	const char unterminated_object[] = "{\"a\":{\"b\":[1,2]}";
	const char escape_at_end[] = "{\"a\":\"x\\";

	check(framer_same_every_way(unterminated_string, sizeof(unterminated_string) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "OBJECT 7 0\n{\"a\":1}\nEOF -5 0\n") == 0);
	check(framer_same_every_way(unterminated_object, sizeof(unterminated_object) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "EOF -5 0\n") == 0);
	check(framer_same_every_way(escape_at_end, sizeof(escape_at_end) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "EOF -5 0\n") == 0);
	return 0;
}

KR_TEST(json, framer_garbage_between_objects_is_a_sticky_error)
{
	static struct transcript t;
	struct kr_json_framer f;
	size_t used;
	const char garbage[] = "{\"a\":1}\n x{\"b\":2}";
	const char close_first[] = " }{}";
	const char array[] = "[{}]";
	const char wrong_close[] = "{\"a\":[1}]}";

	check(framer_same_every_way(garbage, sizeof(garbage) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "OBJECT 7 0\n{\"a\":1}\nERROR -5 9\n") == 0);
	check(framer_same_every_way(close_first, sizeof(close_first) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "ERROR -5 1\n") == 0);
	check(framer_same_every_way(array, sizeof(array) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "ERROR -5 0\n") == 0);
	/* Inner mismatches are kr_json_parse's to find; the outermost close must be '}'. */
	check(framer_same_every_way(wrong_close, sizeof(wrong_close) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "ERROR -5 8\n") == 0);

	kr_json_framer_init(&f);
	check(kr_json_framer_feed(&f, "}", 1, &used) == KR_EPROTO && used == 0);
	check(f.error && strstr(f.error, "closing bracket"));
	check(kr_json_framer_feed(&f, "{}", 2, &used) == KR_EPROTO && used == 0);
	check(kr_json_framer_eof(&f) == KR_EPROTO);
	return 0;
}

/* --- line mode: a watch event cut short ------------------------------------------------ */

/* The golden stream less EV_SPACES, whose object spans lines (kube-apiserver never does). */
static const char line_stream[] =
	EV_ADDED "\n" EV_BRACES EV_BACKSLASH "\r\n" EV_UNICODE "  \n\t" EV_NESTED "\n\n"
	EV_EMPTY " " EV_ADDED "\n";
static const char *const line_objects[] = {
	EV_ADDED, EV_BRACES, EV_BACKSLASH, EV_UNICODE, EV_NESTED, EV_EMPTY, EV_ADDED,
};

KR_TEST(json, framer_lines_whole_events_every_split_and_bytewise)
{
	static struct transcript whole, want;
	const char spaced[] = "{ \"a\" :\t1 ,\r\"b\":[ 2 ]}\n";

	framer_lines = 1;
	check(framer_same_every_way(line_stream, sizeof(line_stream) - 1, OUT_MAX, &whole));
	expect_objects(&want, line_objects, sizeof(line_objects) / sizeof(line_objects[0]));
	tr_fmt(&want, "EOF", 0, 0);
	check(strcmp(whole.text, want.text) == 0);
	/* Blanks other than a newline stay allowed inside an object. */
	check(framer_same_every_way(spaced, sizeof(spaced) - 1, OUT_MAX, &whole));
	check(strncmp(whole.text, "OBJECT 22 0\n", 12) == 0 && strstr(whole.text, "EOF 0 0\n"));
	framer_lines = 0;
	return 0;
}

/*
 * A whole event, one cut at `cut` bytes and ended by its newline, then whole
 * events again: in line mode the first comes out, then KR_EPROTO at the
 * newline, however the bytes are split. Without it, the cut event swallows
 * the ones after it (the defect this mode fixes).
 */
static int cut_event_fails_at_newline(const char *ev, size_t cut, const char *why)
{
	static char in[4 * OUT_MAX];
	static struct transcript t;
	char want[OUT_MAX + 64];
	size_t len = strlen(ev), n = 0, nl;
	struct kr_json_framer f;

	memcpy(in + n, EV_ADDED "\n", sizeof(EV_ADDED));
	n += sizeof(EV_ADDED);
	memcpy(in + n, ev, cut);
	n += cut;
	nl = n;
	in[n++] = '\n';
	memcpy(in + n, EV_ADDED "\n" EV_ADDED "\n", 2 * sizeof(EV_ADDED));
	n += 2 * sizeof(EV_ADDED);
	(void)len;
	framer_lines = 1;
	if (!framer_same_every_way(in, n, OUT_MAX, &t))
		return 0;
	framer_lines = 0;
	snprintf(want, sizeof(want), "OBJECT %zu 0\n%s\nERROR %d %zu\n", sizeof(EV_ADDED) - 1, EV_ADDED,
		 KR_EPROTO, nl);
	if (strcmp(t.text, want) != 0)
		return 0;
	/* The reason names the cut. */
	kr_json_framer_init(&f);
	kr_json_framer_set_lines(&f, 1);
	kr_json_framer_set_output(&f, out, OUT_MAX);
	{
		size_t used, at = 0;

		while (kr_json_framer_feed(&f, in + at, n - at, &used) > 0)
			at += used;
	}
	return f.error && strstr(f.error, why) != NULL;
}

KR_TEST(json, framer_lines_cut_event_is_an_error_at_the_newline)
{
	const char *rv = strstr(EV_ADDED, "\"resourceVersion\":\"") + 20;
	const char *num = strstr(EV_NESTED, "-1.5e3");

	/* Inside a string (the resourceVersion), inside a key, inside a number. */
	check(cut_event_fails_at_newline(EV_ADDED, (size_t)(rv + 2 - EV_ADDED), "newline inside a string"));
	check(cut_event_fails_at_newline(EV_ADDED, 3, "newline inside a string"));
	check(cut_event_fails_at_newline(EV_NESTED, (size_t)(num + 3 - EV_NESTED), "newline inside an object"));
	/* Just before the newline: only the last '}' missing; between members; after '{'. */
	check(cut_event_fails_at_newline(EV_ADDED, sizeof(EV_ADDED) - 2, "newline inside an object"));
	check(cut_event_fails_at_newline(EV_NESTED, (size_t)(strchr(EV_NESTED, ',') + 1 - EV_NESTED),
					 "newline inside an object"));
	check(cut_event_fails_at_newline(EV_ADDED, 1, "newline inside an object"));
	/* Right after a backslash, and inside an escape. */
	check(cut_event_fails_at_newline(EV_BACKSLASH, (size_t)(strchr(EV_BACKSLASH, '\\') + 1 - EV_BACKSLASH),
					 "newline inside a string"));
	check(cut_event_fails_at_newline(EV_UNICODE, (size_t)(strstr(EV_UNICODE, "\\u00") + 3 - EV_UNICODE),
					 "newline inside a string"));
	return 0;
}

KR_TEST(json, framer_lines_several_cuts_stop_at_the_first)
{
	static struct transcript t;
	const char in[] = "{\"type\":\"ADDED\",\"object\":{\"a\":\"x\n"
			  "{\"type\":\"ADDED\",\"object\":{\"a\":1\n"
			  "{\"type\":\"ADDED\",\"object\":{}}\n";

	framer_lines = 1;
	check(framer_same_every_way(in, sizeof(in) - 1, OUT_MAX, &t));
	framer_lines = 0;
	check(strcmp(t.text, "ERROR -5 32\n") == 0);
	/* Without line mode the cut string runs on and the events after it are lost in it. */
	check(framer_same_every_way(in, sizeof(in) - 1, OUT_MAX, &t));
	check(strstr(t.text, "OBJECT") == NULL);
	return 0;
}

KR_TEST(json, framer_lines_control_byte_in_a_string_is_an_error)
{
	static struct transcript t;
	const char ctl[] = "{}\n{\"object\":{\"metadata\":{\"name\":\"a\x01" "b\"}}}\n{}\n";
	const char tab[] = "{\"a\":\"tab\there, and more text to pass a word\"}\n";
	const char esc[] = "{\"a\":\"x\\\x1f\"}\n";
	const char del[] = "{\"a\":\"\x7f\x80\xff are not control bytes\"}\n";

	framer_lines = 1;
	check(framer_same_every_way(ctl, sizeof(ctl) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "OBJECT 2 0\n{}\nERROR -5 35\n") == 0);
	check(framer_same_every_way(tab, sizeof(tab) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "ERROR -5 9\n") == 0);
	check(framer_same_every_way(esc, sizeof(esc) - 1, OUT_MAX, &t));
	check(strcmp(t.text, "ERROR -5 8\n") == 0);
	check(framer_same_every_way(del, sizeof(del) - 1, OUT_MAX, &t));
	check(strncmp(t.text, "OBJECT", 6) == 0 && strstr(t.text, "EOF 0 0\n"));
	framer_lines = 0;
	return 0;
}

/* --- items framer --------------------------------------------------------------------- */

static void run_items(const char *in, size_t len, size_t cap, size_t split, int bytewise,
		      struct transcript *t)
{
	static struct kr_json_items it;
	size_t at = 0;
	int r, ended = 0;

	t->n = 0;
	t->text[0] = '\0';
	kr_json_items_init(&it);
	canary_set(cap);
	kr_json_items_set_output(&it, out, cap);
	while (at < len) {
		size_t end = piece_end(at, len, split, bytewise);

		do {
			size_t used = 0;

			r = kr_json_items_feed(&it, in + at, end - at, &used);
			if (used > end - at || !canary_ok(cap))
				tr_add(t, "BUG overrun\n", 12);
			at += used;
			if (r == KR_JSON_OBJECT) {
				tr_fmt(t, "ITEM", (long long)it.len, 0);
				tr_add(t, out, it.len);
				tr_add(t, "\n", 1);
				kr_json_items_set_output(&it, out, cap);
			} else if (r == KR_JSON_SKIPPED) {
				tr_fmt(t, "SKIPPED", (long long)it.skipped_bytes, (long long)it.len);
			} else if (r == KR_JSON_END) {
				if (ended++)
					tr_add(t, "BUG two ends\n", 13);
				tr_fmt(t, "END", it.remaining_item_count, (long long)at);
				tr_add(t, it.resource_version, strlen(it.resource_version));
				tr_add(t, "\n", 1);
				tr_add(t, it.continue_token, strlen(it.continue_token));
				tr_add(t, "\n", 1);
			} else if (r < 0) {
				size_t again;

				tr_fmt(t, "ERROR", r, (long long)at);
				if (kr_json_items_feed(&it, in + at, len - at, &again) != r || again != 0 ||
				    it.error == NULL)
					tr_add(t, "BUG not sticky\n", 15);
				return;
			} else if (at != end) {
				tr_add(t, "BUG stopped early\n", 18);
				return;
			}
		} while (at < end);
	}
	tr_fmt(t, "EOF", kr_json_items_eof(&it), 0);
}

static int items_same_every_way(const char *in, size_t len, size_t cap, struct transcript *whole)
{
	static struct transcript t;
	size_t k;

	run_items(in, len, cap, len, 0, whole);
	if (strstr(whole->text, "BUG"))
		return 0;
	for (k = 0; k <= len; k++) {
		run_items(in, len, cap, k, 0, &t);
		if (strcmp(t.text, whole->text) != 0)
			return 0;
	}
	run_items(in, len, cap, len, 1, &t);
	return strcmp(t.text, whole->text) == 0;
}

static void expect_items(struct transcript *t)
{
	size_t i;

	t->n = 0;
	t->text[0] = '\0';
	for (i = 0; i < sizeof(list_items) / sizeof(list_items[0]); i++) {
		tr_fmt(t, "ITEM", (long long)strlen(list_items[i]), 0);
		tr_add(t, list_items[i], strlen(list_items[i]));
		tr_add(t, "\n", 1);
	}
}

KR_TEST(json, items_golden_metadata_before_items)
{
	static struct transcript got, want;
	char line[64];

	check(items_same_every_way(list_meta_first, sizeof(list_meta_first) - 1, OUT_MAX, &got));
	expect_items(&want);
	snprintf(line, sizeof(line), "END 1500 %zu\n", sizeof(list_meta_first) - 2);
	tr_add(&want, line, strlen(line));
	tr_add(&want, "123456\neyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDU2fQ\nEOF 0 0\n", 62);
	check(strcmp(got.text, want.text) == 0);
	return 0;
}

KR_TEST(json, items_golden_metadata_after_items)
{
	static struct transcript got, want;
	char line[64];

	check(items_same_every_way(list_meta_after, sizeof(list_meta_after) - 1, OUT_MAX, &got));
	expect_items(&want);
	snprintf(line, sizeof(line), "END 1500 %zu\n", sizeof(list_meta_after) - 1);
	tr_add(&want, line, strlen(line));
	tr_add(&want, "123456\neyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDU2fQ\nEOF 0 0\n", 62);
	check(strcmp(got.text, want.text) == 0);
	return 0;
}

KR_TEST(json, items_null_empty_or_absent)
{
	static struct transcript t;
	const char *bodies[] = {
		"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":null}",
		"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":[]}",
		"{\"metadata\":{\"resourceVersion\":\"7\",\"continue\":null},\"items\":[ ]}",
		"{\"items\":[],\"metadata\":{\"resourceVersion\":\"7\",\"remainingItemCount\":null}}",
		"{\"metadata\":{\"resourceVersion\":\"7\"}}",
	};
	size_t i;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		char want[64];

		check(items_same_every_way(bodies[i], strlen(bodies[i]), OUT_MAX, &t));
		snprintf(want, sizeof(want), "END -1 %zu\n7\n\nEOF 0 0\n", strlen(bodies[i]));
		check(strcmp(t.text, want) == 0);
	}
	check(items_same_every_way("{}", 2, OUT_MAX, &t));
	check(strcmp(t.text, "END -1 2\n\n\nEOF 0 0\n") == 0);
	return 0;
}

KR_TEST(json, items_larger_than_cap_is_skipped_and_next_is_framed)
{
	static struct transcript t;
	static char want[1024];
	const char body[] = "{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":["
		LIST_ITEM_1 "," LIST_ITEM_3 "," LIST_ITEM_1 "]}";
	size_t n1 = strlen(LIST_ITEM_1);

	check(items_same_every_way(body, sizeof(body) - 1, n1 - 1, &t));
	snprintf(want, sizeof(want), "SKIPPED %zu %zu\nITEM 2 0\n{}\nSKIPPED %zu %zu\nEND -1 %zu\n9\n\nEOF 0 0\n",
		 n1, n1 - 1, n1, n1 - 1, sizeof(body) - 1);
	check(strcmp(t.text, want) == 0);
	check(items_same_every_way(body, sizeof(body) - 1, n1, &t));
	check(strstr(t.text, "SKIPPED") == NULL);
	return 0;
}

KR_TEST(json, items_metadata_strings_are_unescaped)
{
	struct kr_json_items it;
	size_t used;
	const char body[] = "{\"metadata\":{\"resourceVersion\":\"1\\u00322\",\"continue\":\"a\\/b\\\"c\"}}";

	kr_json_items_init(&it);
	check(kr_json_items_feed(&it, body, sizeof(body) - 1, &used) == KR_JSON_END);
	check(used == sizeof(body) - 1);
	check(strcmp(it.resource_version, "122") == 0);
	check(strcmp(it.continue_token, "a/b\"c") == 0);
	check(it.remaining_item_count == -1);
	return 0;
}

KR_TEST(json, items_continue_token_limit)
{
	static char body[KR_JSON_CONTINUE_MAX + 128];
	static struct kr_json_items it;
	size_t used, pre, n;
	int r;

	/* The longest that fits: KR_JSON_CONTINUE_MAX - 1 characters. */
	pre = (size_t)snprintf(body, sizeof(body), "{\"metadata\":{\"continue\":\"");
	memset(body + pre, 'A', KR_JSON_CONTINUE_MAX - 1);
	n = pre + KR_JSON_CONTINUE_MAX - 1;
	memcpy(body + n, "\"}}", 4);
	kr_json_items_init(&it);
	check(kr_json_items_feed(&it, body, n + 3, &used) == KR_JSON_END);
	check(strlen(it.continue_token) == KR_JSON_CONTINUE_MAX - 1);
	/* One more is too big, fed whole or in pieces. */
	body[n] = 'A';
	memcpy(body + n + 1, "\"}}", 4);
	kr_json_items_init(&it);
	check(kr_json_items_feed(&it, body, n + 4, &used) == KR_ETOOBIG);
	check(it.error && strstr(it.error, "continue"));
	check(kr_json_items_eof(&it) == KR_ETOOBIG);
	kr_json_items_init(&it);
	r = 0;
	for (used = 0, n = 0; n < pre + KR_JSON_CONTINUE_MAX + 3 && r == 0; n += used)
		r = kr_json_items_feed(&it, body + n, 100 < pre + KR_JSON_CONTINUE_MAX + 3 - n
				       ? 100 : pre + KR_JSON_CONTINUE_MAX + 3 - n, &used);
	check(r == KR_ETOOBIG);
	return 0;
}

KR_TEST(json, items_errors)
{
	static struct transcript t;
	static const struct {
		const char *body;
		const char *want;
	} cases[] = {
		{ "{\"items\":[1]}", "ERROR -5 10\n" },
		{ "{\"items\":[{},\"x\"]}", "ITEM 2 0\n{}\nERROR -5 13\n" },
		{ "{\"items\":{}}", "ERROR -5 9\n" },
		{ "{\"items\":[{}{}]}", "ITEM 2 0\n{}\nERROR -5 12\n" },
		{ "{\"items\":[{},]}", "ITEM 2 0\n{}\nERROR -5 13\n" },
		{ "{\"items\":[,{}]}", "ERROR -5 10\n" },
		{ "{\"items\":[{\"a\":[}]]}", "ERROR -5 17\n" },
		{ "{\"metadata\":[]}", "ERROR -5 12\n" },
		{ "{\"metadata\":{\"resourceVersion\":5}}", "ERROR -5 31\n" },
		{ "{\"metadata\":{\"remainingItemCount\":1.5}}", "ERROR -5 35\n" },
		{ "{\"metadata\":{\"remainingItemCount\":99999999999999999999}}", "ERROR -5 52\n" },
		{ "{\"metadata\":{\"resourceVersion\":\"1\\x\"}}", "ERROR -5 35\n" },
		{ "{\"metadata\":{\"resourceVersion\":\"\\ud800\"}}", "ERROR -5 38\n" },
		{ "{\"kind\" \"x\"}", "ERROR -5 8\n" },
		{ "{\"kind\":\"x\" \"y\":1}", "ERROR -5 12\n" },
		{ "{,}", "ERROR -5 1\n" },
		{ "[]", "ERROR -5 0\n" },
		{ "{} x", "END -1 2\n\n\nERROR -5 3\n" },
		{ "{\"items\":[{\"a\":1}", "ITEM 7 0\n{\"a\":1}\nEOF -5 0\n" },
		{ "", "EOF -5 0\n" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!items_same_every_way(cases[i].body, strlen(cases[i].body), OUT_MAX, &t)) {
			printf("case %zu differs when split: %s", i, t.text);
			check(0);
		}
		if (strcmp(t.text, cases[i].want) != 0) {
			printf("case %zu: %s", i, t.text);
			check(0);
		}
	}
	return 0;
}

KR_TEST(json, items_resource_version_limit)
{
	static char body[KR_RV_MAX + 64];
	struct kr_json_items it;
	size_t used, pre;

	pre = (size_t)snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"");
	memset(body + pre, '7', KR_RV_MAX);
	memcpy(body + pre + KR_RV_MAX, "\"}}", 4);
	kr_json_items_init(&it);
	check(kr_json_items_feed(&it, body, strlen(body), &used) == KR_ETOOBIG);
	memcpy(body + pre + KR_RV_MAX - 1, "\"}}", 4);
	kr_json_items_init(&it);
	check(kr_json_items_feed(&it, body, strlen(body), &used) == KR_JSON_END);
	check(strlen(it.resource_version) == KR_RV_MAX - 1);
	return 0;
}

/* --- parse, find, unescape ------------------------------------------------------------------ */

static kr_json_tok toks[256];

KR_TEST(json, parse_and_find_an_event)
{
	const char *ev = EV_ADDED;
	int n = kr_json_parse(ev, strlen(ev), toks, 256), v;
	char buf[64];

	check(n > 0);
	check(toks[0].type == KR_JSON_T_OBJECT && toks[0].start == 0 && toks[0].end == (int)strlen(ev));
	v = kr_json_find(ev, toks, n, 0, "type");
	check(v > 0 && kr_json_str_eq(ev, &toks[v], "ADDED"));
	check(!kr_json_str_eq(ev, &toks[v], "ADDE") && !kr_json_str_eq(ev, &toks[v], "ADDEDX"));
	v = kr_json_find(ev, toks, n, 0, "object.metadata.name");
	check(v > 0 && kr_json_unescape(ev, &toks[v], buf, sizeof(buf)) == 4 && strcmp(buf, "cm-1") == 0);
	v = kr_json_find(ev, toks, n, 0, "object.metadata.resourceVersion");
	check(v > 0 && kr_json_str_eq(ev, &toks[v], "123457"));
	v = kr_json_find(ev, toks, n, 0, "object.data");
	check(v > 0 && toks[v].type == KR_JSON_T_OBJECT && toks[v].size == 1);
	check(kr_json_find(ev, toks, n, 0, "object.metadata.missing") == -1);
	check(kr_json_find(ev, toks, n, 0, "type.x") == -1);           /* through a string */
	check(kr_json_find(ev, toks, n, 0, "object..metadata") == -1);
	check(kr_json_find(ev, toks, n, 0, "") == -1);
	check(kr_json_find(ev, toks, n, 0, "name") == -1);             /* nested keys are not top-level */
	check(kr_json_find(ev, toks, n, 0, "object.metadata.name.") == -1);
	/* An empty key exists in JSON but cannot be named by a path. */
	n = kr_json_parse("{\"\":{\"a\":1}}", 12, toks, 256);
	check(n == 5 && kr_json_find_key("{\"\":{\"a\":1}}", toks, n, 0, "", 0) == 2);
	check(kr_json_find("{\"\":{\"a\":1}}", toks, n, 0, ".a") == -1);
	return 0;
}

KR_TEST(json, find_skips_whole_subtrees_and_keys_with_dots)
{
	const char *ev = EV_SPACES;
	const char doc[] = "{\"a\":{\"name\":\"x\",\"l\":[{\"name\":1}]},\"b\":[\"name\"],\"name\":\"y\"}";
	int n, v;

	n = kr_json_parse(doc, sizeof(doc) - 1, toks, 256);
	check(n > 0);
	v = kr_json_find(doc, toks, n, 0, "name");
	check(v > 0 && kr_json_str_eq(doc, &toks[v], "y"));
	v = kr_json_find(doc, toks, n, 0, "a.name");
	check(v > 0 && kr_json_str_eq(doc, &toks[v], "x"));
	check(kr_json_find(doc, toks, n, 0, "a.l.name") == -1);        /* arrays are not objects */

	n = kr_json_parse(ev, strlen(ev), toks, 256);
	check(n > 0);
	v = kr_json_find(ev, toks, n, 0, "object.metadata.annotations");
	check(v > 0);
	v = kr_json_find_key(ev, toks, n, v, "k8s.io/initial-events-end", 25);
	check(v > 0 && kr_json_str_eq(ev, &toks[v], "true"));
	v = kr_json_find(ev, toks, n, 0, "object.metadata.resourceVersion");
	check(v > 0 && kr_json_str_eq(ev, &toks[v], "124001"));
	return 0;
}

KR_TEST(json, find_matches_escaped_keys_by_their_text)
{
	const char doc[] = "{\"na\\u006de\":\"z\",\"a\\\"b\":1,\"a\\\\\":2}";
	int n = kr_json_parse(doc, sizeof(doc) - 1, toks, 256), v;
	long long x;

	check(n == 7);
	v = kr_json_find(doc, toks, n, 0, "name");
	check(v > 0 && kr_json_str_eq(doc, &toks[v], "z"));
	v = kr_json_find_key(doc, toks, n, 0, "a\"b", 3);
	check(v > 0 && kr_json_int(doc, &toks[v], &x) == 0 && x == 1);
	v = kr_json_find_key(doc, toks, n, 0, "a\\", 2);
	check(v > 0 && kr_json_int(doc, &toks[v], &x) == 0 && x == 2);
	check(kr_json_find_key(doc, toks, n, 0, "na\\u006de", 9) == -1);
	return 0;
}

KR_TEST(json, parse_too_many_tokens)
{
	const char doc[] = "{\"a\":[1,2,3],\"b\":{\"c\":null}}";  /* 10 tokens */

	check(kr_json_parse(doc, sizeof(doc) - 1, toks, 10) == 10);
	check(kr_json_parse(doc, sizeof(doc) - 1, toks, 9) == KR_ENOSPC);
	check(kr_json_parse(doc, sizeof(doc) - 1, toks, 1) == KR_ENOSPC);
	check(kr_json_parse(doc, sizeof(doc) - 1, toks, 0) == KR_ENOSPC);
	check(kr_json_parse(doc, sizeof(doc) - 1, NULL, 10) == KR_EINVAL);
	return 0;
}

KR_TEST(json, parse_rejects_what_jsmn_lets_through)
{
	static const char *const bad[] = {
		"", "   ", "[]", "\"s\"", "1", "{", "{\"a\":1", "{\"a\":\"x}",
		"{\"a\":1,}", "{,\"a\":1}", "{\"a\":1,,\"b\":2}", "{\"a\"}", "{\"a\":}", "{\"a\" 1}",
		"{\"a\"::1}", "{\"a\":1 \"b\":2}", "{\"a\":{}\"b\":2}", "{\"a\":[1 2]}",
		"{\"a\":[1,]}", "{\"a\":[,1]}", "{\"a\":[1,,2]}", "{\"a\":[\"x\":1]}",
		"{\"a\":\"b\":\"c\"}", "{\"a\":1:2}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":-}",
		"{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}", "{\"a\":1.2.3}",
		"{\"a\":\"x\ny\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\u12G4\"}", "{\"a\":[}", "{\"a\":{]}",
		"{}{}", "{} x", "x{}", "{1:2}", "{\"a\":[{]}]}", "{:}", "{\"a\":[:]}",
		"{\"a\":,}", "{\"a\":[1]]}",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (kr_json_parse(bad[i], strlen(bad[i]), toks, 256) != KR_EPROTO) {
			printf("accepted: %s\n", bad[i]);
			check(0);
		}
	}
	/* jsmn stops at a NUL as if the text ended there. */
	check(kr_json_parse("{\"a\":1}\0", 8, toks, 256) == KR_EPROTO);
	check(kr_json_parse("{\"a\":\"x\0y\"}", 11, toks, 256) == KR_EPROTO);
	return 0;
}

/* Strings are checked a word at a time: a control byte is found at every
 * offset and alignment, and the bytes around 0x20 and above 0x7f pass. */
KR_TEST(json, parse_finds_control_bytes_anywhere_in_a_string)
{
	static const unsigned char ctl[] = { 0x01, 0x09, 0x0a, 0x1f };
	static const unsigned char ok[] = { 0x20, 0x21, 0x7e, 0x7f, 0x80, 0xc3, 0xa9, 0xff };
	char doc[80];
	size_t pre, len, at, c;

	for (pre = 0; pre < 8; pre++) {
		for (len = 1; len <= 40; len++) {
			/* pre spaces shift the string against word boundaries */
			size_t n, s;

			memset(doc, ' ', pre);
			n = pre;
			memcpy(doc + n, "{\"a\":\"", 6);
			n += 6;
			s = n;
			for (at = 0; at < len; at++)
				doc[n++] = (char)ok[(at + pre) % sizeof(ok)];
			memcpy(doc + n, "\"}", 2);
			n += 2;
			/* 0xc3 0xa9 and lone high bytes are not checked as UTF-8 here */
			check(kr_json_parse(doc, n, toks, 256) == 3);
			for (at = 0; at < len; at++) {
				for (c = 0; c < sizeof(ctl); c++) {
					char keep = doc[s + at];

					doc[s + at] = (char)ctl[c];
					if (kr_json_parse(doc, n, toks, 256) != KR_EPROTO) {
						printf("accepted 0x%02x at %zu of %zu (offset %zu)\n", ctl[c], at, len, pre);
						check(0);
					}
					doc[s + at] = keep;
				}
			}
		}
	}
	return 0;
}

KR_TEST(json, parse_accepts_valid_json)
{
	static const struct {
		const char *doc;
		int ntok;
	} good[] = {
		{ "{}", 1 }, { " \n{ }\r\n", 1 }, { "{\"a\":[]}", 3 }, { "{\"a\":[{},[]]}", 5 },
		{ "{\"a\":0,\"b\":-0.5e+10,\"c\":1E-2,\"d\":true,\"e\":false,\"f\":null}", 13 },
		{ "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}", 3 },
		{ "{ \"a\" : [ 1 , \"x\" , { \"b\" : { } } ] , \"c\" : 2 }", 10 },
		{ EV_NESTED, 0 }, { EV_UNICODE, 0 }, { EV_BRACES, 0 }, { EV_BACKSLASH, 0 },
		{ LIST_ITEM_2, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int n = kr_json_parse(good[i].doc, strlen(good[i].doc), toks, 256);

		if (n <= 0 || (good[i].ntok && n != good[i].ntok)) {
			printf("%d for %s\n", n, good[i].doc);
			check(0);
		}
	}
	check(kr_json_parse(list_meta_first, sizeof(list_meta_first) - 1, toks, 256) > 0);
	check(kr_json_parse(list_meta_after, sizeof(list_meta_after) - 1, toks, 256) > 0);
	return 0;
}

KR_TEST(json, unescape_escapes_and_surrogate_pairs)
{
	const char doc[] = "{\"a\":\"\\ud83d\\ude00x\",\"b\":\"\\u00e9\\u20ac\\u0041\\n\\t\\/\\\\\\\"\","
			   "\"c\":\"\\ud83d\",\"d\":\"\\ude00\",\"e\":\"\\ud83dx\",\"f\":\"\\ud83d\\u0041\","
			   "\"g\":\"a\\u0000b\",\"h\":7}";
	int n = kr_json_parse(doc, sizeof(doc) - 1, toks, 256), v;
	char buf[32];

	check(n > 0);
	v = kr_json_find(doc, toks, n, 0, "a");
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == 5);
	check(memcmp(buf, "\xf0\x9f\x98\x80x", 6) == 0);
	check(kr_json_str_eq(doc, &toks[v], "\xf0\x9f\x98\x80x"));
	v = kr_json_find(doc, toks, n, 0, "b");
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == 11);
	check(strcmp(buf, "\xc3\xa9\xe2\x82\xac" "A\n\t/\\\"") == 0);
	check(kr_json_str_eq(doc, &toks[v], "\xc3\xa9\xe2\x82\xac" "A\n\t/\\\""));
	v = kr_json_find(doc, toks, n, 0, "c");                         /* lone high */
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == KR_EPROTO && buf[0] == '\0');
	v = kr_json_find(doc, toks, n, 0, "d");                         /* lone low */
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == KR_EPROTO);
	v = kr_json_find(doc, toks, n, 0, "e");                         /* high then text */
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == KR_EPROTO);
	check(!kr_json_str_eq(doc, &toks[v], "\xed\xa0\xbd" "x"));
	v = kr_json_find(doc, toks, n, 0, "f");                         /* high then non-low */
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == KR_EPROTO);
	v = kr_json_find(doc, toks, n, 0, "g");                         /* NUL inside */
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == 3 && memcmp(buf, "a\0b", 4) == 0);
	check(!kr_json_str_eq(doc, &toks[v], "a"));
	v = kr_json_find(doc, toks, n, 0, "h");
	check(kr_json_unescape(doc, &toks[v], buf, sizeof(buf)) == KR_EINVAL);
	check(!kr_json_str_eq(doc, &toks[v], "7"));
	return 0;
}

KR_TEST(json, unescape_into_a_small_buffer)
{
	const char doc[] = "{\"a\":\"abc\\u00e9\",\"b\":\"\",\"c\":\"xyz\"}";
	int n = kr_json_parse(doc, sizeof(doc) - 1, toks, 256), v;
	char buf[8];

	check(n > 0);
	v = kr_json_find(doc, toks, n, 0, "a");
	check(kr_json_unescape(doc, &toks[v], buf, 6) == 5 && strcmp(buf, "abc\xc3\xa9") == 0);
	memset(buf, 'x', sizeof(buf));
	check(kr_json_unescape(doc, &toks[v], buf, 5) == KR_ETOOBIG && buf[0] == '\0');
	check(kr_json_unescape(doc, &toks[v], buf, 4) == KR_ETOOBIG && buf[0] == '\0');
	check(kr_json_unescape(doc, &toks[v], buf, 3) == KR_ETOOBIG);
	check(kr_json_unescape(doc, &toks[v], buf, 0) == KR_ETOOBIG);
	v = kr_json_find(doc, toks, n, 0, "c");                         /* plain text, no escape */
	check(kr_json_unescape(doc, &toks[v], buf, 4) == 3 && strcmp(buf, "xyz") == 0);
	memset(buf, 'x', sizeof(buf));
	check(kr_json_unescape(doc, &toks[v], buf, 3) == KR_ETOOBIG && buf[0] == '\0' && buf[3] == 'x');
	v = kr_json_find(doc, toks, n, 0, "b");
	check(kr_json_unescape(doc, &toks[v], buf, 1) == 0 && buf[0] == '\0');
	check(kr_json_str_eq(doc, &toks[v], ""));
	return 0;
}

KR_TEST(json, int_values)
{
	const char doc[] = "{\"a\":410,\"b\":-3,\"c\":1.5,\"d\":9223372036854775807,"
			   "\"e\":9223372036854775808,\"f\":-9223372036854775808,\"g\":\"1\",\"h\":true,"
			   "\"i\":99999999999999999999,\"j\":-9223372036854775809}";
	int n = kr_json_parse(doc, sizeof(doc) - 1, toks, 256);
	long long x = 0;

	check(n > 0);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "a")], &x) == 0 && x == 410);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "b")], &x) == 0 && x == -3);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "c")], &x) == KR_EPROTO);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "d")], &x) == 0 &&
	      x == 9223372036854775807LL);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "e")], &x) == KR_ETOOBIG);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "f")], &x) == 0 &&
	      x == -9223372036854775807LL - 1);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "g")], &x) == KR_EPROTO);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "h")], &x) == KR_EPROTO);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "i")], &x) == KR_ETOOBIG);
	check(kr_json_int(doc, &toks[kr_json_find(doc, toks, n, 0, "j")], &x) == KR_ETOOBIG);
	return 0;
}

/* --- remove_member --------------------------------------------------------------------- */

/* Removes path from doc and checks the text left is want and still valid JSON. */
static int remove_gives(const char *doc, const char *path, const char *want)
{
	char buf[512];
	size_t len = strlen(doc), nl;
	int n, v;

	memcpy(buf, doc, len);
	n = kr_json_parse(buf, len, toks, 256);
	if (n <= 0)
		return 0;
	v = kr_json_find(buf, toks, n, 0, path);
	if (v <= 0)
		return 0;
	nl = kr_json_remove_member(buf, len, toks, n, v);
	if (nl != strlen(want) || memcmp(buf, want, nl) != 0) {
		printf("removing %s left %.*s\n", path, (int)nl, buf);
		return 0;
	}
	return kr_json_parse(buf, nl, toks, 256) > 0 && kr_json_find(buf, toks, n, 0, path) < 0;
}

KR_TEST(json, remove_member_first_middle_last_only)
{
	check(remove_gives("{\"a\":1,\"b\":[2],\"c\":{\"d\":3}}", "a", "{\"b\":[2],\"c\":{\"d\":3}}"));
	check(remove_gives("{\"a\":1,\"b\":[2],\"c\":{\"d\":3}}", "b", "{\"a\":1,\"c\":{\"d\":3}}"));
	check(remove_gives("{\"a\":1,\"b\":[2],\"c\":{\"d\":3}}", "c", "{\"a\":1,\"b\":[2]}"));
	check(remove_gives("{\"a\":1,\"b\":[2],\"c\":{\"d\":3}}", "c.d", "{\"a\":1,\"b\":[2],\"c\":{}}"));
	check(remove_gives("{ \"a\" : \"x\" , \"b\" : 2 }", "a", "{ \"b\" : 2 }"));
	check(remove_gives("{ \"a\" : \"x\" , \"b\" : 2 }", "b", "{ \"a\" : \"x\" }"));
	check(remove_gives("{\n \"a\": \"x\"\n}", "a", "{\n \n}"));
	check(remove_gives("{\"metadata\":{\"name\":\"p\",\"managedFields\":[{\"manager\":\"kubectl\","
			   "\"fieldsV1\":{\"f:data\":{}}}],\"uid\":\"u\"},\"data\":{}}",
			   "metadata.managedFields",
			   "{\"metadata\":{\"name\":\"p\",\"uid\":\"u\"},\"data\":{}}"));
	check(remove_gives("{\"metadata\":{\"name\":\"p\",\"managedFields\":[]}}", "metadata.managedFields",
			   "{\"metadata\":{\"name\":\"p\"}}"));
	return 0;
}

KR_TEST(json, remove_member_leaves_non_members_alone)
{
	char buf[] = "{\"a\":[1,2],\"b\":\"s\"}";
	size_t len = sizeof(buf) - 1;
	int n = kr_json_parse(buf, len, toks, 256);

	check(n == 7);
	check(kr_json_remove_member(buf, len, toks, n, 0) == len);     /* the root */
	check(kr_json_remove_member(buf, len, toks, n, 1) == len);     /* a key */
	check(kr_json_remove_member(buf, len, toks, n, 3) == len);     /* an array element */
	check(kr_json_remove_member(buf, len, toks, n, 7) == len);     /* out of range */
	check(kr_json_remove_member(buf, len, toks, n, -1) == len);
	check(strcmp(buf, "{\"a\":[1,2],\"b\":\"s\"}") == 0);
	return 0;
}

KR_TEST(json, prefix_strings_from_a_cut_object)
{
	static const char ev[] = "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":"
				 "{\"name\":\"big\",\"namespace\":\"edge\",\"labels\":{\"name\":\"decoy\"},"
				 "\"uid\":\"u-1\",\"resourceVersion\":\"4\\u0032\",\"managedFields\":[{\"a\":\"b\"}]},"
				 "\"data\":{\"k\":\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv";
	const char *const paths[] = { "object.metadata.name", "object.metadata.namespace",
				      "object.metadata.resourceVersion", "object.metadata.uid", "type" };
	char val[5][KR_JSON_PREFIX_VALUE];
	int found, cut;

	check(kr_json_prefix_strings(ev, sizeof(ev) - 1, paths, 5, val, &found) == 5);
	check(strcmp(val[0], "big") == 0 && strcmp(val[1], "edge") == 0);
	check(strcmp(val[2], "42") == 0 && strcmp(val[3], "u-1") == 0);
	check(strcmp(val[4], "MODIFIED") == 0);
	/* Cut inside the namespace value: what came before is still found. */
	cut = (int)(strstr(ev, "edge") - ev) + 2;
	check(kr_json_prefix_strings(ev, (size_t)cut, paths, 5, val, &found) == 2);
	check(strcmp(val[0], "big") == 0 && val[1][0] == '\0' && strcmp(val[4], "MODIFIED") == 0);
	check(kr_json_prefix_strings("[[[[[[[[[[", 10, paths, 5, val, &found) == KR_ETOOBIG);
	return 0;
}

/* Escaping appends all or nothing, and its bound is hit to the byte. */
KR_TEST(json, escape_appends_all_or_nothing)
{
	char esc[16];
	struct kr_out o = { esc, sizeof(esc), 0, 0 };

	kr_json_escape(&o, "a\"b\\\x01");
	check(!o.overflow && o.len == 12 && memcmp(esc, "a\\\"b\\\\\\u0001", 12) == 0);
	kr_json_escape(&o, "wxyz");                      /* 12 + 4 = 16: exactly full */
	check(!o.overflow && o.len == 16 && memcmp(esc + 12, "wxyz", 4) == 0);
	o.len = 12;
	kr_json_escape(&o, "vwxyz");                     /* one byte more: nothing of it */
	check(o.overflow && o.len == 12);
	o.overflow = 0;
	kr_json_escape(&o, "\n");                        /* 6 bytes, 4 free */
	check(o.overflow && o.len == 12);
	o.overflow = 0;
	kr_out_str(&o, "1234");
	check(!o.overflow && o.len == 16);
	kr_out_put(&o, "", 0);
	check(!o.overflow);
	kr_out_str(&o, "5");
	check(o.overflow && o.len == 16);
	return 0;
}
