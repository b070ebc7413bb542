/*
 * kr_json_parse_sel against kr_json_parse (jsmn plus its checks): the same
 * verdict on every text, the same tokens when everything is asked for, and
 * with paths a subset of them in which every object or array off the paths
 * is one KR_JSON_T_SKIPPED token. Golden texts, then seeded random mutations
 * of a real watch event (bytes replaced, inserted, deleted, cut).
 */
#include <string.h>

#include "json.h"
#include "kreflect.h"
#include "test.h"

#define TOKS 4096

static kr_json_tok full[TOKS], sel[TOKS];

/* A MODIFIED event as the test API server's bench writes it (managedFields, escapes). */
static const char event[] =
	"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","
	"\"metadata\":{\"name\":\"bench\",\"namespace\":\"default\",\"uid\":\"0b8f6c1e-1\","
	"\"resourceVersion\":\"1001\",\"creationTimestamp\":\"2026-12-04T09:00:00Z\","
	"\"labels\":{\"app\":\"x\",\"tier\":\"a\\\"b\"},\"annotations\":{\"k8s.io/initial-events-end\":"
	"\"true\",\"n\":\"caf\\u00e9\"},\"managedFields\":[{\"manager\":\"kubectl\",\"operation\":"
	"\"Update\",\"apiVersion\":\"v1\",\"time\":\"2026-12-04T09:00:00Z\",\"fieldsType\":"
	"\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\".\":{},\"f:payload\":{}}}}]},"
	"\"data\":{\"payload\":\"0123456789abcdef0123456789abcdef\\n\\t\\\\\\/\",\"e\":\"\"},"
	"\"binaryData\":{},\"immutable\":false,\"n\":[-1.5e+3,0,1E2,null,true,[],{}]}}";

static const char *const paths[] = { "object.metadata.annotations", "object.metadata" };

/* Token index in full[0..n) that starts at start (the starts are unique), or -1. */
static int by_start(int n, int start)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (full[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && full[lo].start == start ? lo : -1;
}

/*
 * 0 if sel[0..ns) is full[0..nf) with the tokens inside each SKIPPED one
 * left out: same types (SKIPPED for a container), spans, sizes and parents.
 */
static int subset(int nf, int ns)
{
	int i, prev = -1;

	for (i = 0; i < ns; i++) {
		int f = by_start(nf, sel[i].start), p;

		if (f <= prev || sel[i].end != full[f].end)
			return __LINE__;
		if (sel[i].type == KR_JSON_T_SKIPPED) {
			if ((full[f].type != KR_JSON_T_OBJECT && full[f].type != KR_JSON_T_ARRAY) ||
			    sel[i].size != 0 || (i + 1 < ns && sel[i + 1].start < sel[i].end))
				return __LINE__;
		} else if (sel[i].type != full[f].type || sel[i].size != full[f].size) {
			return __LINE__;
		}
		p = sel[i].parent;
		if (p < -1 || p >= i || (p < 0 ? full[f].parent != -1
					       : by_start(nf, sel[p].start) != full[f].parent))
			return __LINE__;
		prev = f;
	}
	return 0;
}

/* Compares the three parses of s[0..len); 0 if they agree. *valid: the verdict. */
static int agree(const char *s, size_t len, int *valid)
{
	int nf = kr_json_parse(s, len, full, TOKS);
	int na = kr_json_parse_sel(s, len, sel, TOKS, NULL, -1);
	int ns;

	*valid = nf > 0;
	if (nf == KR_ENOSPC)
		return 0;
	if (nf != na)
		return __LINE__;
	if (nf > 0 && memcmp(full, sel, (size_t)nf * sizeof(full[0])) != 0)
		return __LINE__;
	ns = kr_json_parse_sel(s, len, sel, TOKS, paths, 2);
	if ((ns > 0) != (nf > 0) || (nf < 0 && ns != nf))
		return __LINE__;
	return nf > 0 ? subset(nf, ns) : 0;
}

KR_TEST(json_sel, golden_texts_agree_with_jsmn)
{
	static const char *const texts[] = {
		event, "{}", " {\n} ", "{\"a\":[]}", "{\"a\":{}}", "{\"a\":[1,[2,[3]],{\"b\":{}}]}",
		"{\"a\":\"\\u00e9\\ud83d\\ude00\"}", "{\"a\":-0.0e-0}", "{\"\":\"\"}", "{\"a\":1,\"a\":2}",
		/* invalid */
		"", " ", "[]", "\"a\"", "1", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,\"a\":1}",
		"{\"a\":1 \"b\":2}", "{\"a\"::1}", "{\"a\":[1,]}", "{\"a\":[,1]}", "{\"a\":[1 2]}",
		"{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}", "{\"a\":tru}",
		"{\"a\":truee}", "{\"a\":nul}", "{\"a\":-}", "{\"a\":1:2}", "{\"a\":\"\\x\"}",
		"{\"a\":\"\\u12g4\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"x}",
		"{\"a\":{]}", "{\"a\":[}", "{\"a\":{\"b\":1]}", "{\"a\":[1}]", "{}{}", "{} x", "{1:2}",
		"{\"a\":'x'}", "{\"a\":\"x\"\x01}", "{\"a\":\x7f}", "{\"a\":\"\x80\"}",
	};
	size_t i;
	int valid, nvalid = 0;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		int r = agree(texts[i], strlen(texts[i]), &valid);

		if (r)
			kr_test_failed(__FILE__, r, texts[i]);
		check(r == 0);
		nvalid += valid;
	}
	check(nvalid == 11);  /* the valid ones above, plus the last (bytes >= 0x80 in a string) */
	/* A NUL byte ends nothing: it is invalid wherever it is. */
	check(agree("{\"a\":1}\0", 8, &valid) == 0 && !valid);
	check(agree("{\"a\":\"\0\"}", 9, &valid) == 0 && !valid);
	return 0;
}

KR_TEST(json_sel, paths_tokenize_only_what_they_name)
{
	int n = kr_json_parse_sel(event, sizeof(event) - 1, sel, TOKS, paths, 2), nf, o, md, v;

	check(n > 0);
	nf = kr_json_parse(event, sizeof(event) - 1, full, TOKS);
	check(nf > 3 * n / 2);
	check(subset(nf, n) == 0);
	o = kr_json_find(event, sel, n, 0, "object");
	md = kr_json_find(event, sel, n, o, "metadata");
	check(o > 0 && sel[o].type == KR_JSON_T_OBJECT && md > 0 && sel[md].type == KR_JSON_T_OBJECT);
	check((v = kr_json_find(event, sel, n, md, "name")) > 0 && kr_json_str_eq(event, &sel[v], "bench"));
	check((v = kr_json_find(event, sel, n, md, "annotations.n")) > 0 &&
	      kr_json_str_eq(event, &sel[v], "caf\xc3\xa9"));
	/* Off the paths: one token each, whole, and nothing under them. */
	check((v = kr_json_find(event, sel, n, md, "labels")) > 0 && sel[v].type == KR_JSON_T_SKIPPED);
	check(event[sel[v].start] == '{' && event[sel[v].end - 1] == '}');
	check(kr_json_find(event, sel, n, md, "labels.app") < 0);
	check((v = kr_json_find(event, sel, n, md, "managedFields")) > 0 &&
	      sel[v].type == KR_JSON_T_SKIPPED && event[sel[v].start] == '[');
	check((v = kr_json_find(event, sel, n, o, "data")) > 0 && sel[v].type == KR_JSON_T_SKIPPED);
	check((v = kr_json_find(event, sel, n, o, "immutable")) > 0 && sel[v].type == KR_JSON_T_PRIMITIVE);
	/* A key written with escapes is followed as its text. */
	{
		static const char esc[] = "{\"ob\\u006aect\":{\"m\":{\"a\":1}}}";
		static const char *const p1[] = { "object.m" };

		n = kr_json_parse_sel(esc, sizeof(esc) - 1, sel, TOKS, p1, 1);
		check(n == 7 && sel[1].type == KR_JSON_T_STRING && sel[2].type == KR_JSON_T_OBJECT &&
		      sel[4].type == KR_JSON_T_OBJECT);
		/* Nothing asked for: the root's members only. */
		n = kr_json_parse_sel(esc, sizeof(esc) - 1, sel, TOKS, NULL, 0);
		check(n == 3 && sel[2].type == KR_JSON_T_SKIPPED && sel[2].end == (int)sizeof(esc) - 2);
	}
	return 0;
}

/* Every bound: tokens (one short, exact) and depth (the limit, one over, in a skipped value). */
KR_TEST(json_sel, bounds)
{
	static char deep[2 * KR_JSON_DEPTH_MAX + 64];
	int n = kr_json_parse_sel(event, sizeof(event) - 1, sel, TOKS, paths, 2), d;
	const char *why;
	size_t len, at;

	check(n > 0);
	check(kr_json_parse_sel(event, sizeof(event) - 1, sel, n, paths, 2) == n);
	check(kr_json_parse_sel(event, sizeof(event) - 1, sel, n - 1, paths, 2) == KR_ENOSPC);
	check(kr_json_parse_sel(event, sizeof(event) - 1, sel, 0, paths, 2) == KR_ENOSPC);
	check(kr_json_parse_sel(event, sizeof(event) - 1, NULL, 4, paths, 2) == KR_EINVAL);
	check(kr_json_parse_sel(event, sizeof(event) - 1, sel, 4, NULL, 2) == KR_EINVAL);
	for (d = KR_JSON_DEPTH_MAX; d <= KR_JSON_DEPTH_MAX + 1; d++) {
		int i;

		/* {"a":[[[ ... ]]]} with d levels in all, the root included */
		len = 0;
		memcpy(deep, "{\"a\":", 5);
		len = 5;
		for (i = 1; i < d; i++)
			deep[len++] = '[';
		for (i = 1; i < d; i++)
			deep[len++] = ']';
		deep[len++] = '}';
		n = kr_json_parse_sel(deep, len, sel, TOKS, NULL, 0);
		check(d == KR_JSON_DEPTH_MAX ? n == 3 && sel[2].type == KR_JSON_T_SKIPPED : n == KR_ENOSPC);
		n = kr_json_parse_sel(deep, len, sel, TOKS, NULL, -1);
		check(d == KR_JSON_DEPTH_MAX ? n == d + 1 : n == KR_ENOSPC);
		/* and cut one byte short: invalid, not too deep */
		check(d != KR_JSON_DEPTH_MAX || kr_json_parse_sel(deep, len - 1, sel, TOKS, NULL, 0) == KR_EPROTO);
		/* kr_json_error_at: the bracket that opens one level too many is the error */
		why = "unset";
		at = kr_json_error_at(deep, len, &why);
		check(d == KR_JSON_DEPTH_MAX ? at == len && why == NULL :
		      at == 5 + (size_t)KR_JSON_DEPTH_MAX - 1 && why && strcmp(why, "nested too deep") == 0);
	}
	return 0;
}

/* xorshift32: the same mutations on every target and every run. */
static unsigned rnd(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

KR_TEST(json_sel, random_mutations_agree_with_jsmn)
{
	static const char alphabet[] = "{}[]\":,\\ \n\t0123456789-+.eEtrufalsn\x01\x7f\x80/bu";
	static char buf[sizeof(event) + 16];
	unsigned seed = 0x9e3779b9u;
	int i, valid, nvalid = 0;

	for (i = 0; i < 3000; i++) {
		size_t len = sizeof(event) - 1;
		int k, edits = 1 + (int)(rnd(&seed) % 3), r;

		memcpy(buf, event, len);
		for (k = 0; k < edits; k++) {
			size_t at = rnd(&seed) % len;
			char c = alphabet[rnd(&seed) % (sizeof(alphabet) - 1)];

			switch (rnd(&seed) % 4) {
			case 0:
				buf[at] = c;
				break;
			case 1:
				if (len < sizeof(buf)) {
					memmove(buf + at + 1, buf + at, len - at);
					buf[at] = c;
					len++;
				}
				break;
			case 2:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			default:
				len = at + 1;
				break;
			}
		}
		r = agree(buf, len, &valid);
		if (r)
			kr_test_failed(__FILE__, r, "a mutation of the event (seeded)");
		check(r == 0);
		nvalid += valid;
	}
	/* Both verdicts were exercised. */
	check(nvalid > 100 && nvalid < 2900);
	return 0;
}

/* The tentative whole-line take of a watch stream, and the framer after it. */
KR_TEST(json_sel, framer_line_takes_whole_lines_only)
{
	static const char two[] = "\r\n {\"a\":1} \r\n{\"b\":[2]}\n";
	static char out[64];
	struct kr_json_framer f;
	size_t used = 0;

	kr_json_framer_init(&f);
	kr_json_framer_set_output(&f, out, sizeof(out));
	/* Not in line mode: never. */
	check(kr_json_framer_line(&f, two, sizeof(two) - 1, &used) == 0 && used == 0);
	kr_json_framer_set_lines(&f, 1);
	check(kr_json_framer_line(&f, two, sizeof(two) - 1, &used) == KR_JSON_OBJECT);
	check(f.len == 7 && memcmp(out, "{\"a\":1}", 7) == 0 && used == 10);
	check(kr_json_framer_line(&f, two + used, sizeof(two) - 1 - used, &used) == KR_JSON_OBJECT);
	check(f.len == 9 && memcmp(out, "{\"b\":[2]}", 9) == 0);
	/* No newline yet, not an object's line, longer than the output: 0, nothing taken. */
	check(kr_json_framer_line(&f, "{\"a\":1}", 7, &used) == 0 && used == 0);
	check(kr_json_framer_line(&f, "[1]\n", 4, &used) == 0 && used == 0);
	check(kr_json_framer_line(&f, "{\"a\":\n", 6, &used) == 0 && used == 0);
	check(kr_json_framer_line(&f, "\n\n", 2, &used) == 0 && used == 0);
	kr_json_framer_set_output(&f, out, 8);
	check(kr_json_framer_line(&f, "{\"a\":123}\n", 10, &used) == 0 && used == 0);
	check(kr_json_framer_line(&f, "{\"a\":1}\n", 8, &used) == KR_JSON_OBJECT && f.len == 7);
	/*
	 * Tentative: two objects on one line come out as one text, which the
	 * tokenizer refuses; the framer then takes the same bytes as ever.
	 */
	kr_json_framer_set_output(&f, out, sizeof(out));
	check(kr_json_framer_line(&f, "{}{\"x\":1}\n", 10, &used) == KR_JSON_OBJECT && f.len == 9);
	check(kr_json_parse_sel(out, f.len, sel, TOKS, NULL, 0) == KR_EPROTO);
	check(kr_json_framer_feed(&f, "{}{\"x\":1}\n", 10, &used) == KR_JSON_OBJECT && used == 2 &&
	      f.len == 2);
	kr_json_framer_set_output(&f, out, sizeof(out));
	check(kr_json_framer_feed(&f, "{\"x\":1}\n", 8, &used) == KR_JSON_OBJECT && f.len == 7);
	/* Mid-object (the framer holds half of one): never. */
	kr_json_framer_set_output(&f, out, sizeof(out));
	check(kr_json_framer_feed(&f, "{\"y\":", 5, &used) == 0 && used == 5);
	check(kr_json_framer_line(&f, "{\"a\":1}\n", 8, &used) == 0 && used == 0);
	return 0;
}

/* kr_json_error_at: the offset of the first error, and what it is, for each way a text fails. */
static int error_at(const char *s, size_t want_at, const char *want_why)
{
	const char *why = "unset";
	size_t at = kr_json_error_at(s, strlen(s), &why);

	if (!want_why)
		return at == strlen(s) && why == NULL;
	return at == want_at && why && strcmp(why, want_why) == 0;
}

KR_TEST(json_sel, error_at_names_the_first_error)
{
	check(error_at(" {\"a\": [1, {\"b\": null}], \"c\": \"d\"} \n", 0, NULL));
	check(error_at("{}", 0, NULL));
	check(error_at("", 0, "unexpected end of the JSON text"));
	check(error_at("  [1]", 2, "the top level is not an object"));
	check(error_at("{", 1, "unexpected end of the JSON text"));
	check(error_at("{\"a\"", 4, "unexpected end of the JSON text"));
	check(error_at("{\"a\": ", 6, "unexpected end of the JSON text"));
	check(error_at("{\"a\": 1", 7, "unexpected end of the JSON text"));
	check(error_at("{\"a\": 1,  ", 10, "unexpected end of the JSON text"));
	check(error_at("{\"a\": [", 7, "unexpected end of the JSON text"));
	check(error_at("{\"a\" 1}", 5, "expected ':'"));
	check(error_at("{\"a\": 1,}", 8, "expected a string key"));
	check(error_at("{\"a\": 1, 2: 3}", 9, "expected a string key"));
	check(error_at("{\"a\\q\": 1}", 1, "expected a string key"));
	check(error_at("{\"a\": \"b\\q\"}", 6, "invalid JSON string"));
	check(error_at("{\"a\": \"b\tc\"}", 6, "invalid JSON string"));
	check(error_at("{\"a\": \"b", 6, "invalid JSON string"));
	check(error_at("{\"a\": tru}", 6, "invalid JSON value"));
	check(error_at("{\"a\": [1,]}", 9, "invalid JSON value"));
	check(error_at("{\"a\": }", 6, "invalid JSON value"));
	check(error_at("{\"a\": 1 2}", 8, "expected ',' or a closing bracket"));
	check(error_at("{\"a\": [1}", 8, "expected ',' or a closing bracket"));
	check(error_at("{\"a\": 1}\n\n{}", 10, "text after the JSON object"));
	/* The first error counts, also inside a value kr_json_parse_sel would skip. */
	check(error_at("{\"a\": {\"b\": {\"c\" 1}}, \"d\" 2}", 17, "expected ':'"));
	return 0;
}
