#include "discovery.h"

#include <string.h>
#include <strings.h>

#include "fmt.h"
#include "kreflect.h"
#include "log.h"

/* "v1", "v2beta1", "v1alpha3": Kubernetes' version names. */
static int is_version(const char *s, size_t n)
{
	size_t i = 1;

	if (n < 2 || s[0] != 'v' || s[1] < '1' || s[1] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == n)
		return 1;
	if (n - i > 5 && strncmp(s + i, "alpha", 5) == 0)
		i += 5;
	else if (n - i > 4 && strncmp(s + i, "beta", 4) == 0)
		i += 4;
	else
		return 0;
	if (i == n || s[i] < '1' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i == n;
}

/*
 * Nonzero if s[0..n) is letters and digits, and '-' and '.' too when
 * dotted: DNS labels, dots, versions, kinds; nothing that could bend a path.
 */
static int name_chars(const char *s, size_t n, int dotted)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (dotted && (c == '-' || c == '.'))))
			return 0;
	}
	return 1;
}

static int set_part(char *dst, size_t size, const char *s, size_t n)
{
	if (n == 0 || n >= size || !name_chars(s, n, 1))
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

int kr_discovery_parse_arg(const char *arg, struct kr_resource *r, char *err, size_t errlen)
{
	const char *s1, *s2, *dot, *end = arg + strlen(arg);
	int bad = 0;

	memset(r, 0, sizeof(*r));
	r->arena_share = 100;
	s1 = strchr(arg, '/');
	if (s1) {
		s2 = strchr(s1 + 1, '/');
		if (s2) {          /* group/version/plural */
			bad |= set_part(r->group, sizeof(r->group), arg, (size_t)(s1 - arg));
			bad |= set_part(r->version, sizeof(r->version), s1 + 1, (size_t)(s2 - s1 - 1));
			bad |= set_part(r->plural, sizeof(r->plural), s2 + 1, (size_t)(end - s2 - 1));
		} else {           /* version/plural, core group */
			bad |= set_part(r->version, sizeof(r->version), arg, (size_t)(s1 - arg));
			bad |= set_part(r->plural, sizeof(r->plural), s1 + 1, (size_t)(end - s1 - 1));
		}
		if (!bad && !is_version(r->version, strlen(r->version)))
			bad = -1;
	} else if ((dot = strchr(arg, '.')) != NULL) {
		const char *g = dot + 1, *dot2 = strchr(g, '.');

		bad |= set_part(r->plural, sizeof(r->plural), arg, (size_t)(dot - arg));
		/* plural.version.group, as kubectl accepts it */
		if (dot2 && is_version(g, (size_t)(dot2 - g))) {
			bad |= set_part(r->version, sizeof(r->version), g, (size_t)(dot2 - g));
			g = dot2 + 1;
		}
		bad |= set_part(r->group, sizeof(r->group), g, (size_t)(end - g));
	} else {
		bad |= set_part(r->plural, sizeof(r->plural), arg, (size_t)(end - arg));
	}
	if (bad || strchr(r->plural, '.')) {
		kr_snprintf(err, errlen, "invalid resource name '%.64s': use PLURAL, PLURAL.GROUP, "
			 "PLURAL.VERSION.GROUP or GROUP/VERSION/PLURAL", arg);
		memset(r, 0, sizeof(*r));
		return KR_EINVAL;
	}
	return 0;
}

int kr_discovery_parse_group(const char *json, size_t len, kr_json_tok *toks, int ntoks,
			     char *version, size_t size)
{
	int n, v, i;

	version[0] = '\0';
	n = kr_json_parse(json, len, toks, ntoks);
	if (n < 0)
		return n;
	v = kr_json_find_key(json, toks, n, 0, "kind", 4);
	if (v < 0 || !kr_json_str_eq(json, &toks[v], "APIGroup"))
		return KR_EPROTO;
	v = kr_json_find(json, toks, n, 0, "preferredVersion.version");
	if (v < 0) {
		/* No preference given: the first served version, as kubectl takes it. */
		int arr = kr_json_find_key(json, toks, n, 0, "versions", 8);

		if (arr < 0 || toks[arr].type != KR_JSON_T_ARRAY)
			return KR_ENOENT;
		for (i = arr + 1; i < n; i++) {
			if (toks[i].parent != arr)
				continue;
			if (toks[i].type == KR_JSON_T_OBJECT)
				v = kr_json_find_key(json, toks, n, i, "version", 7);
			break;
		}
		if (v < 0)
			return KR_ENOENT;
	}
	if (toks[v].type != KR_JSON_T_STRING)
		return KR_EPROTO;
	n = kr_json_unescape(json, &toks[v], version, size);
	if (n < 0)
		return n == KR_ETOOBIG ? KR_ETOOBIG : KR_EPROTO;
	if (!is_version(version, (size_t)n)) {
		version[0] = '\0';
		return KR_EPROTO;
	}
	return 0;
}

/* Nonzero if the string array value a holds s. */
static int array_has(const char *json, const kr_json_tok *toks, int n, int a, const char *s)
{
	int i;

	if (a < 0 || toks[a].type != KR_JSON_T_ARRAY)
		return 0;
	for (i = a + 1; i < n && toks[i].start < toks[a].end; i++)
		if (toks[i].parent == a && kr_json_str_eq(json, &toks[i], s))
			return 1;
	return 0;
}

/* How well entry e matches want: 2 by name, 1 by singular/short name/kind, 0 not. */
static int entry_matches(const char *json, const kr_json_tok *toks, int n, int e, const char *want)
{
	char kind[KR_NAME_MAX];
	int v;

	v = kr_json_find_key(json, toks, n, e, "name", 4);
	if (v < 0 || toks[v].type != KR_JSON_T_STRING)
		return 0;
	if (memchr(json + toks[v].start, '/', (size_t)(toks[v].end - toks[v].start)))
		return 0;  /* a subresource: widgets/status, pods/log */
	if (kr_json_str_eq(json, &toks[v], want))
		return 2;
	v = kr_json_find_key(json, toks, n, e, "singularName", 12);
	if (v >= 0 && kr_json_str_eq(json, &toks[v], want))
		return 1;
	if (array_has(json, toks, n, kr_json_find_key(json, toks, n, e, "shortNames", 10), want))
		return 1;
	v = kr_json_find_key(json, toks, n, e, "kind", 4);
	if (v >= 0 && kr_json_unescape(json, &toks[v], kind, sizeof(kind)) > 0 &&
	    strcasecmp(kind, want) == 0)
		return 1;
	return 0;
}

int kr_discovery_parse_resources(const char *json, size_t len, kr_json_tok *toks, int ntoks,
				 struct kr_resource *r)
{
	char gv[sizeof(r->group) + sizeof(r->version)], *slash;
	int n, v, arr, i, best = -1, e, rc;

	n = kr_json_parse(json, len, toks, ntoks);
	if (n < 0)
		return n;
	v = kr_json_find_key(json, toks, n, 0, "kind", 4);
	if (v < 0 || !kr_json_str_eq(json, &toks[v], "APIResourceList"))
		return KR_EPROTO;
	arr = kr_json_find_key(json, toks, n, 0, "resources", 9);
	if (arr < 0 || toks[arr].type != KR_JSON_T_ARRAY)
		return KR_EPROTO;
	for (i = arr + 1; i < n && toks[i].start < toks[arr].end; i++) {
		int m;

		if (toks[i].parent != arr || toks[i].type != KR_JSON_T_OBJECT)
			continue;
		m = entry_matches(json, toks, n, i, r->plural);
		if (m == 2) {
			best = i;
			break;
		}
		if (m == 1 && best < 0)
			best = i;
	}
	if (best < 0)
		return KR_ENOENT;
	e = best;
	/* What the server names goes into request paths: no space, '?', '%' or CR LF. */
	v = kr_json_find_key(json, toks, n, e, "name", 4);
	rc = kr_json_unescape(json, &toks[v], r->plural, sizeof(r->plural));
	if (rc < 0)
		return rc == KR_ETOOBIG ? KR_ETOOBIG : KR_EPROTO;
	if (rc == 0 || !name_chars(r->plural, (size_t)rc, 1) || strchr(r->plural, '.'))
		return KR_EPROTO;
	v = kr_json_find_key(json, toks, n, e, "kind", 4);
	if (v < 0 || toks[v].type != KR_JSON_T_STRING ||
	    (rc = kr_json_unescape(json, &toks[v], r->kind, sizeof(r->kind))) <= 0 ||
	    !name_chars(r->kind, (size_t)rc, 0))
		return KR_EPROTO;
	v = kr_json_find_key(json, toks, n, e, "namespaced", 10);
	if (v < 0 || toks[v].type != KR_JSON_T_PRIMITIVE)
		return KR_EPROTO;
	r->namespaced = json[toks[v].start] == 't';
	v = kr_json_find_key(json, toks, n, e, "verbs", 5);
	if (v >= 0 && (!array_has(json, toks, n, v, "list") || !array_has(json, toks, n, v, "watch")))
		return KR_EPROTO;
	v = kr_json_find_key(json, toks, n, 0, "groupVersion", 12);
	if (v >= 0 && kr_json_unescape(json, &toks[v], gv, sizeof(gv)) > 0) {
		const char *ver = gv;

		slash = strchr(gv, '/');
		if (slash) {
			ver = slash + 1;
			if (set_part(r->group, sizeof(r->group), gv, (size_t)(slash - gv)) < 0)
				return KR_EPROTO;
		} else {
			r->group[0] = '\0';
		}
		if (!is_version(ver, strlen(ver)) ||
		    set_part(r->version, sizeof(r->version), ver, strlen(ver)) < 0)
			return KR_EPROTO;
	}
	kr_resource_set_name(r);
	return 0;
}

/* --- the driver: one GET at a time on the caller's loop ---------------------------- */

struct fetch {
	struct kr_discovery_work *w;
	size_t len;
	int status;
	int done;
	int err;
	int overflow;
	char reason[192];
};

static int on_head(void *arg, const struct kr_http_resp *resp)
{
	struct fetch *f = arg;

	f->status = resp->status;
	return 0;
}

static long on_body(void *arg, const char *data, size_t len)
{
	struct fetch *f = arg;

	if (len > f->w->cap - f->len) {
		f->overflow = 1;
		return KR_ETOOBIG;  /* abandons the request */
	}
	memcpy(f->w->body + f->len, data, len);
	f->len += len;
	return (long)len;
}

static void on_end(void *arg, int err, const char *reason)
{
	struct fetch *f = arg;

	f->done = 1;
	f->err = err;
	kr_snprintf(f->reason, sizeof(f->reason), "%s", reason ? reason : "");
}

/* GETs path into w->body; returns 0 (any HTTP status, in f->status) or a transport error. */
static int fetch(struct kr_loop *loop, struct kr_discovery_work *w, const char *path,
		 const char *token, kr_ms_t deadline, struct fetch *f)
{
	struct kr_request req;
	int r;

	memset(f, 0, sizeof(*f));
	f->w = w;
	memset(&req, 0, sizeof(req));
	req.path = path;
	req.bearer_token = token;
	req.on_head = on_head;
	req.on_body = on_body;
	req.on_end = on_end;
	req.arg = f;
	r = kr_conn_request(w->conn, &req);
	if (r < 0) {
		kr_snprintf(f->reason, sizeof(f->reason), "%s", kr_strerror(r));
		return r;
	}
	while (!f->done) {
		kr_ms_t now = kr_port_now_ms();

		if (now >= deadline) {
			kr_conn_close(w->conn, "discovery deadline");
			kr_snprintf(f->reason, sizeof(f->reason), "no answer within the deadline (%s)",
				 w->conn->reason[0] ? w->conn->reason : kr_conn_state_name(w->conn->state));
			return KR_ETIMEDOUT;
		}
		if (kr_loop_once(loop, (int)(deadline - now)) == KR_EIO) {
			kr_conn_close(w->conn, "poll failed");
			kr_snprintf(f->reason, sizeof(f->reason), "%s", kr_port_last_error());
			return KR_EIO;
		}
	}
	if (f->overflow) {
		kr_snprintf(f->reason, sizeof(f->reason), "response larger than %zu bytes", w->cap);
		return KR_ETOOBIG;
	}
	return f->err;
}

/* Maps a status other than 200 to a result, with err filled. */
static int bad_status(const struct fetch *f, const char *arg, const char *path, char *err,
		      size_t errlen)
{
	if (f->status == 401 || f->status == 403) {
		kr_snprintf(err, errlen, "unable to discover resource '%s': GET %s: the server answered "
			 "%d (%s)", arg, path, f->status,
			 f->status == 401 ? "credentials refused" : "not allowed to read discovery");
		return KR_EAUTH;
	}
	kr_snprintf(err, errlen, "unable to discover resource '%s': GET %s: HTTP status %d", arg, path,
		 f->status);
	return KR_EPROTO;
}

static int resolve(struct kr_loop *loop, const char *token, struct kr_discovery_work *w,
		   const char *arg, struct kr_resource *r, kr_ms_t deadline, char *err, size_t errlen)
{
	char path[KR_NAME_MAX * 2 + 256 + 16];
	struct fetch f;
	int rc;

	if (r->group[0] && !r->version[0]) {
		kr_snprintf(path, sizeof(path), "/apis/%s", r->group);
		rc = fetch(loop, w, path, token, deadline, &f);
		if (rc != 0)
			goto transport;
		if (f.status == 404) {
			kr_snprintf(err, errlen, "no such resource '%s': the server has no API group %s",
				 arg, r->group);
			return KR_ENOENT;
		}
		if (f.status != 200)
			return bad_status(&f, arg, path, err, errlen);
		rc = kr_discovery_parse_group(w->body, f.len, w->toks, w->ntoks, r->version,
					      sizeof(r->version));
		if (rc != 0) {
			kr_snprintf(err, errlen, "unable to discover resource '%s': GET %s: %s", arg, path,
				 rc == KR_ENOENT ? "the group serves no version" : "not an APIGroup");
			return rc == KR_ENOENT ? KR_ENOENT : KR_EPROTO;
		}
	}
	if (!r->version[0])
		kr_snprintf(r->version, sizeof(r->version), "v1");
	if (r->group[0])
		kr_snprintf(path, sizeof(path), "/apis/%s/%s", r->group, r->version);
	else
		kr_snprintf(path, sizeof(path), "/api/%s", r->version);
	rc = fetch(loop, w, path, token, deadline, &f);
	if (rc != 0)
		goto transport;
	if (f.status == 404) {
		kr_snprintf(err, errlen, "no such resource '%s': the server does not serve %s%s%s", arg,
			 r->group, r->group[0] ? "/" : "", r->version);
		return KR_ENOENT;
	}
	if (f.status != 200)
		return bad_status(&f, arg, path, err, errlen);
	rc = kr_discovery_parse_resources(w->body, f.len, w->toks, w->ntoks, r);
	if (rc == KR_ENOENT) {
		kr_snprintf(err, errlen, "no such resource '%s': %s%s%s has no resource %s", arg,
			 r->group, r->group[0] ? "/" : "", r->version, r->plural);
		return KR_ENOENT;
	}
	if (rc != 0) {
		kr_snprintf(err, errlen, "unable to discover resource '%s': GET %s: %s", arg, path,
			 rc == KR_EPROTO ? "not an APIResourceList, or the resource cannot be listed "
			 "and watched, or its names hold characters a request path must not" :
			 kr_strerror(rc));
		return rc;
	}
	kr_log(KR_LOG_INFO, "discovered %s: %s/%s %s, %s", arg, r->group[0] ? r->group : "core",
	       r->version, r->kind, r->namespaced ? "namespaced" : "cluster-scoped");
	return 0;
transport:
	kr_snprintf(err, errlen, "unable to discover resource '%s': GET %s: %s", arg, path, f.reason);
	return rc;
}

int kr_discovery_resolve(struct kr_loop *loop, const struct kr_conn_cfg *cfg, const char *token,
			 struct kr_discovery_work *w, const char *arg, struct kr_resource *r,
			 int timeout_ms, char *err, size_t errlen)
{
	int rc;

	rc = kr_conn_init(w->conn, loop, cfg);
	if (rc != 0) {
		kr_snprintf(err, errlen, "unable to discover resource '%s': %s", arg, kr_strerror(rc));
		return rc;
	}
	rc = resolve(loop, token, w, arg, r, kr_port_now_ms() + (kr_ms_t)timeout_ms, err, errlen);
	kr_conn_free(w->conn);
	return rc;
}
