#include "sidecar_env.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "codec.h"
#include "fmt.h"
#include "json.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"
#include "resource.h"
#include "serve.h"

#define MAX_SECONDS 86400

/* REQ_PAYLOAD's tokens while it is checked: scratch of one parse, not kept. */
static kr_json_tok payload_toks[KR_SIDECAR_PAYLOAD_TOKENS];

/* Variables k8s-sidecar documents that kreflect cannot honour, and why. */
static const struct {
	const char *name;
	const char *why;
} refused[] = {
	{ "LOG_FORMAT", "kreflect writes plain log lines on stderr only; remove it" },
	{ "LOG_CONFIG", "kreflect has no logging configuration file; use LOG_LEVEL" },
	{ "LOG_TZ", "kreflect's log lines carry no time of day (the container runtime adds it)" },
};

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kr_vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return KR_EINVAL;
}

static const char *env(kr_sidecar_getenv_fn get, void *arg, const char *name)
{
	const char *v = get(arg, name);

	return v && *v ? v : NULL;
}

__attribute__((format(printf, 2, 3)))
static void note(struct kr_sidecar *c, const char *fmt, ...)
{
	va_list ap;

	if (c->nnotes >= KR_SIDECAR_NOTES)
		return;
	va_start(ap, fmt);
	kr_vsnprintf(c->notes[c->nnotes++], sizeof(c->notes[0]), fmt, ap);
	va_end(ap);
}

/* A boolean as k8s-sidecar reads most: "true" or "false", any case. -1 if neither. */
static int boolean(const char *v)
{
	if (!v)
		return 0;
	if (strcasecmp(v, "true") == 0)
		return 1;
	if (strcasecmp(v, "false") == 0)
		return 0;
	return -1;
}

/* A whole decimal number in [lo, hi], or -1. */
static long number(const char *v, long lo, long hi)
{
	long n = 0;

	if (!v || !*v)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > hi)
			return -1;
		n = n * 10 + (*v - '0');
	}
	return n < lo || n > hi ? -1 : n;
}

/* Seconds with an optional fraction ("1.1", "10", ".5") as milliseconds in [0, hi_s]; -1 if not. */
static long seconds_ms(const char *v, long hi_s)
{
	long ms = 0, scale = 100;
	int digits = 0;

	if (!v || !*v)
		return -1;
	for (; *v >= '0' && *v <= '9'; v++, digits++) {
		ms = ms * 10 + (*v - '0') * 1000;
		if (ms > hi_s * 1000)
			return -1;
	}
	if (*v == '.') {
		for (v++; *v >= '0' && *v <= '9'; v++, digits++) {
			ms += (*v - '0') * scale;
			scale /= 10;
		}
	}
	return *v || !digits || ms > hi_s * 1000 ? -1 : ms;
}

/* A DNS label (namespace, RFC 1123), the only names the API server accepts. */
static int dns_label(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* An object name (RFC 1123 subdomain): lower case, digits, '-', '.'. */
static int object_name(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > 253)
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '.'))
			return 0;
	return 1;
}

/* A label key ([prefix/]name) or value: letters, digits, '-', '_', '.', and '/' in a key. */
static int label_text(const char *s, int key)
{
	size_t len = strlen(s), i;

	if (len > (key ? 317u : 63u))
		return 0;
	for (i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.' ||
		      (key && s[i] == '/')))
			return 0;
	return 1;
}

/*
 * s (UTF-8, as the environment holds it) as Latin-1 in place, as Python
 * encodes it for requests' basic auth by default. -1 if a character is not
 * Latin-1 or s is not UTF-8.
 */
static int to_latin1(char *s)
{
	unsigned char *r = (unsigned char *)s, *w = r;

	while (*r) {
		if (*r < 0x80) {
			*w++ = *r++;
		} else if ((*r == 0xc2 || *r == 0xc3) && (r[1] & 0xc0) == 0x80) {
			*w++ = (unsigned char)((r[0] & 0x03) << 6 | (r[1] & 0x3f));
			r += 2;
		} else {
			return -1;
		}
	}
	*w = '\0';
	return 0;
}

/* A credential into out: the file's content without surrounding blanks, else the variable. */
static int credential(const char *var, const char *value, const char *file_var, const char *file,
		      char *out, size_t size, char *err, size_t errlen)
{
	long n;
	size_t a = 0;

	out[0] = '\0';
	if (file) {
		n = kr_port_read_file(file, out, size - 1);
		if (n < 0)
			return fail(err, errlen, "%s %s: unable to read: %s", file_var, file,
				    n == KR_ETOOBIG ? "longer than 256 bytes" : kr_port_last_error());
		out[n] = '\0';
		while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' ||
				 out[n - 1] == '\t'))
			out[--n] = '\0';
		while (out[a] == ' ' || out[a] == '\t' || out[a] == '\n' || out[a] == '\r')
			a++;
		memmove(out, out + a, (size_t)n - a + 1);
		if (strlen(out) != (size_t)n - a)
			return fail(err, errlen, "%s %s: contains a NUL byte", file_var, file);
		return 0;
	}
	if (value) {
		if (strlen(value) >= size)
			return fail(err, errlen, "%s is longer than %d bytes", var, KR_SIDECAR_CRED_MAX);
		memcpy(out, value, strlen(value) + 1);
	}
	return 0;
}

/* "Authorization: Basic ..." from the REQ_USERNAME/REQ_PASSWORD family and the flags. */
static int basic_auth(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg,
		      const char *user_flag, const char *pass_flag, char *err, size_t errlen)
{
	const char *enc = env(get, arg, "REQ_BASIC_AUTH_ENCODING");
	int latin1 = 1, r;
	size_t i;

	if (enc && (strcasecmp(enc, "utf-8") == 0 || strcasecmp(enc, "utf8") == 0))
		latin1 = 0;
	else if (enc && strcasecmp(enc, "latin1") != 0 && strcasecmp(enc, "latin-1") != 0 &&
		 strcasecmp(enc, "iso-8859-1") != 0)
		return fail(err, errlen, "REQ_BASIC_AUTH_ENCODING must be latin1 or utf-8, not '%.32s'",
			    enc);
	r = credential("REQ_USERNAME", env(get, arg, "REQ_USERNAME"),
		       user_flag ? "--req-username-file" : "REQ_USERNAME_FILE",
		       user_flag ? user_flag : env(get, arg, "REQ_USERNAME_FILE"), c->user,
		       sizeof(c->user), err, errlen);
	if (r == 0)
		r = credential("REQ_PASSWORD", env(get, arg, "REQ_PASSWORD"),
			       pass_flag ? "--req-password-file" : "REQ_PASSWORD_FILE",
			       pass_flag ? pass_flag : env(get, arg, "REQ_PASSWORD_FILE"), c->pass,
			       sizeof(c->pass), err, errlen);
	if (r != 0)
		goto out;
	if (!c->user[0] && !c->pass[0])
		goto out;
	if (!c->user[0] || !c->pass[0]) {
		r = fail(err, errlen, "%s is set without %s: basic auth needs both",
			 c->user[0] ? "REQ_USERNAME" : "REQ_PASSWORD",
			 c->user[0] ? "REQ_PASSWORD" : "REQ_USERNAME");
		goto out;
	}
	if (latin1 && (to_latin1(c->user) < 0 || to_latin1(c->pass) < 0)) {
		r = fail(err, errlen, "REQ_USERNAME or REQ_PASSWORD has a character that is not "
			 "Latin-1: set REQ_BASIC_AUTH_ENCODING=utf-8");
		goto out;
	}
	for (i = 0; c->user[i]; i++)
		if (c->user[i] == ':') {
			r = fail(err, errlen, "REQ_USERNAME contains ':', which basic auth cannot carry");
			goto out;
		}
	/* user ":" pass, encoded straight from the two buffers' bytes. */
	kr_snprintf(c->authorization, sizeof(c->authorization), "Basic ");
	{
		unsigned char joined[2 * KR_SIDECAR_CRED_MAX + 2];
		size_t ul = strlen(c->user), pl = strlen(c->pass);

		memcpy(joined, c->user, ul);
		joined[ul] = ':';
		memcpy(joined + ul + 1, c->pass, pl);
		size_t at = strlen(c->authorization);

		r = kr_base64_encode(c->authorization + at, sizeof(c->authorization) - at, joined,
				     ul + 1 + pl) < 0 ? -1 : 0;
		memset(joined, 0, sizeof(joined));
	}
	if (r != 0) {
		r = fail(err, errlen, "REQ_USERNAME and REQ_PASSWORD are too long together");
		goto out;
	}
	c->hooks.authorization = c->authorization;
out:
	/* Only the header is kept. */
	memset(c->user, 0, sizeof(c->user));
	memset(c->pass, 0, sizeof(c->pass));
	return r;
}

/* REQ_URL and the rest of the request made after a change. */
static int request(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg,
		   const char *user_flag, const char *pass_flag, char *err, size_t errlen)
{
	const char *url = env(get, arg, "REQ_URL"), *m = env(get, arg, "REQ_METHOD");
	const char *payload = env(get, arg, "REQ_PAYLOAD");
	static const char *const counts[3] = { "REQ_RETRY_TOTAL", "REQ_RETRY_CONNECT",
					       "REQ_RETRY_READ" };
	int defaults[3] = { 5, 10, 5 }, *dest[3], i, r;
	long v;

	c->hooks.urllib3 = 1;
	c->hooks.retry_5xx = 1;
	c->hooks.backoff_factor_ms = 1100;
	c->hooks.timeout_ms = 10000;
	c->hooks.method = "GET";
	dest[0] = &c->hooks.retries;
	dest[1] = &c->hooks.connect_retries;
	dest[2] = &c->hooks.read_retries;
	for (i = 0; i < 3; i++) {
		const char *s = env(get, arg, counts[i]);

		v = s ? number(s, 0, 100) : defaults[i];
		if (v < 0)
			return fail(err, errlen, "%s must be a number from 0 to 100, not '%.32s'",
				    counts[i], s);
		*dest[i] = (int)v;
	}
	if (env(get, arg, "REQ_RETRY_BACKOFF_FACTOR")) {
		v = seconds_ms(env(get, arg, "REQ_RETRY_BACKOFF_FACTOR"), 120);
		if (v < 0)
			return fail(err, errlen, "REQ_RETRY_BACKOFF_FACTOR must be seconds from 0 to 120 "
				    "(like 1.1), not '%.32s'", env(get, arg, "REQ_RETRY_BACKOFF_FACTOR"));
		c->hooks.backoff_factor_ms = (int)v;
	}
	if (env(get, arg, "REQ_TIMEOUT")) {
		v = seconds_ms(env(get, arg, "REQ_TIMEOUT"), 3600);
		if (v <= 0)
			return fail(err, errlen, "REQ_TIMEOUT must be seconds above 0, at most 3600 "
				    "(like 10 or 2.5), not '%.32s'", env(get, arg, "REQ_TIMEOUT"));
		c->hooks.timeout_ms = (int)v;
	}
	r = boolean(env(get, arg, "ENABLE_5XX"));
	if (r < 0)
		return fail(err, errlen, "ENABLE_5XX must be true or false, not '%.32s'",
			    env(get, arg, "ENABLE_5XX"));
	/* k8s-sidecar retries 500, 502, 503 and 504 unless ENABLE_5XX takes them as answers. */
	c->hooks.retry_5xx = !r;
	r = boolean(env(get, arg, "REQ_SKIP_INIT"));
	if (r < 0)
		return fail(err, errlen, "REQ_SKIP_INIT must be true or false, not '%.32s'",
			    env(get, arg, "REQ_SKIP_INIT"));
	c->hooks.skip_first = r && c->method != KR_SIDECAR_LIST;
	r = boolean(env(get, arg, "REQ_SKIP_TLS_VERIFY"));
	if (r < 0)
		return fail(err, errlen, "REQ_SKIP_TLS_VERIFY must be true or false, not '%.32s'",
			    env(get, arg, "REQ_SKIP_TLS_VERIFY"));
	if (m && strcmp(m, "GET") != 0 && strcmp(m, "POST") != 0)
		return fail(err, errlen, "REQ_METHOD must be GET or POST, not '%.32s'", m);
	if (m)
		c->hooks.method = m;
	if (payload && strcmp(c->hooks.method, "POST") != 0)
		return fail(err, errlen, "REQ_PAYLOAD is only sent with REQ_METHOD=POST");
	if (!url) {
		if (m || payload)
			return fail(err, errlen, "%s is set without REQ_URL", m ? "REQ_METHOD" : "REQ_PAYLOAD");
		return basic_auth(c, get, arg, user_flag, pass_flag, err, errlen);
	}
	if (strncmp(url, "https://", 8) == 0)
		return fail(err, errlen, "REQ_URL: https:// is not supported (kreflect has no TLS for "
			    "the request after a change); give http://HOST[:PORT][/PATH]");
	c->hooks.http_post = url;
	if (strcmp(c->hooks.method, "POST") == 0) {
		/* A JSON payload as it is; other text as a JSON string, as k8s-sidecar posts it. */
		size_t len = payload ? strlen(payload) : 0;
		struct kr_out o = { c->payload, sizeof(c->payload), 0, 0 };

		const char *first = payload ? payload + strspn(payload, " \t\r\n") : "";
		int n = payload ? kr_json_parse(payload, len, payload_toks, KR_SIDECAR_PAYLOAD_TOKENS) : 0;

		if (n == KR_ENOSPC)
			return fail(err, errlen, "REQ_PAYLOAD has more than %d JSON tokens",
				    KR_SIDECAR_PAYLOAD_TOKENS);
		/* Python would send other JSON (an array, a number) as that JSON: not
		 * supported, rather than sent as a string. */
		if (n < 0 && (strchr("[\"-0123456789", *first) || strncmp(first, "true", 4) == 0 ||
			      strncmp(first, "false", 5) == 0 || strncmp(first, "null", 4) == 0) && *first)
			return fail(err, errlen, "REQ_PAYLOAD must be a JSON object or text that is not "
				    "JSON (an array, string, number, true, false or null is not supported)");
		if (!payload)
			kr_out_str(&o, "");
		else if (n > 0)
			kr_out_put(&o, payload, len);
		else {
			kr_out_str(&o, "\"");
			kr_json_escape(&o, payload);
			kr_out_str(&o, "\"");
		}
		if (o.overflow || o.len >= sizeof(c->payload))
			return fail(err, errlen, "REQ_PAYLOAD is longer than %d bytes", KR_SIDECAR_PAYLOAD_MAX - 1);
		c->payload[o.len] = '\0';
		c->hooks.body = c->payload;
		c->hooks.body_len = o.len;
		c->hooks.content_type = "application/json";
	}
	return basic_auth(c, get, arg, user_flag, pass_flag, err, errlen);
}

/*
 * The next resource: type plural in namespace ns (nslen bytes; none: the pod's
 * or context's), no selector yet. The caller checked there is room.
 */
static struct kr_resource_spec *add(struct kr_sidecar *c, const char *plural, const char *ns,
				    size_t nslen)
{
	struct kr_resource_spec *r = &c->res[c->nres];

	kr_snprintf(c->ns[c->nres], sizeof(c->ns[0]), "%.*s", (int)nslen, ns);
	r->name = plural;
	r->ns = nslen ? c->ns[c->nres] : NULL;
	r->label_selector = "";
	c->nres++;
	return r;
}

/* The resources entries: RESOURCE x NAMESPACE x RESOURCE_NAME. */
static int resources(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg, char *err,
		     size_t errlen)
{
	const char *rv = env(get, arg, "RESOURCE"), *nsv = env(get, arg, "NAMESPACE");
	const char *names = env(get, arg, "RESOURCE_NAME");
	const char *types[2] = { "configmap", NULL };
	static const char *const plural[2] = { "configmaps", "secrets" };
	const char *nss[KR_SIDECAR_NAMESPACES];
	size_t nslen[KR_SIDECAR_NAMESPACES];
	int nns = 0, t, n, all = 0;

	if (!rv || strcmp(rv, "configmap") == 0)
		types[0] = "configmap";
	else if (strcmp(rv, "secret") == 0)
		types[0] = "secret";
	else if (strcmp(rv, "both") == 0)
		types[0] = "secret", types[1] = "configmap";
	else
		return fail(err, errlen, "RESOURCE must be configmap, secret or both, not '%.32s'", rv);

	if (nsv && strcmp(nsv, "ALL") == 0) {
		all = 1;
		nss[nns] = "";
		nslen[nns++] = 0;
	} else if (nsv) {
		const char *p = nsv;

		for (;;) {
			size_t l = strcspn(p, ",");

			if (!dns_label(p, l))
				return fail(err, errlen, "NAMESPACE must be ALL or namespace names separated "
					    "by commas (lower case, digits, '-'), not '%.64s'", nsv);
			if (nns == KR_SIDECAR_NAMESPACES)
				return fail(err, errlen, "NAMESPACE names more than %d namespaces",
					    KR_SIDECAR_NAMESPACES);
			nss[nns] = p;
			nslen[nns++] = l;
			if (!p[l])
				break;
			p += l + 1;
		}
	} else {
		nss[nns] = "";             /* the service account's or context's namespace */
		nslen[nns++] = 0;
	}
	if (names && all)
		return fail(err, errlen, "RESOURCE_NAME cannot be used with NAMESPACE=ALL "
			    "(k8s-sidecar ignores it there): name the namespaces");

	for (t = 0; t < 2 && types[t]; t++) {
		for (n = 0; n < nns; n++) {
			const char *p = names;
			int found = 0;

			while (p) {
				/* [namespace/][type/]name, as k8s-sidecar reads it from the right. */
				size_t l = strcspn(p, ","), parts = 1, i;
				const char *seg[3] = { p, NULL, NULL };
				size_t sl[3] = { l, 0, 0 };

				for (i = 0; i < l; i++)
					if (p[i] == '/') {
						if (parts == 3)
							return fail(err, errlen, "RESOURCE_NAME entry '%.*s' has "
								    "more than namespace/type/name", (int)l, p);
						seg[parts] = p + i + 1;
						parts++;
					}
				for (i = 0; i < parts; i++)
					sl[i] = (size_t)((i + 1 < parts ? seg[i + 1] - 1 : p + l) - seg[i]);
				{
					const char *name = seg[parts - 1], *type = parts >= 2 ? seg[parts - 2] : NULL;
					const char *ns = parts == 3 ? seg[0] : NULL;
					size_t nl = sl[parts - 1], tl = parts >= 2 ? sl[parts - 2] : 0;

					if (!object_name(name, nl) ||
					    (type && !((tl == 6 && strncmp(type, "secret", 6) == 0) ||
						       (tl == 9 && strncmp(type, "configmap", 9) == 0))) ||
					    (ns && !dns_label(ns, sl[0])))
						return fail(err, errlen, "RESOURCE_NAME entry '%.*s' must be "
							    "[namespace/][configmap|secret/]name", (int)l, p);
					if (ns && !nsv)
						return fail(err, errlen, "RESOURCE_NAME entry '%.*s' names a "
							    "namespace: set NAMESPACE too", (int)l, p);
					if (!(type && (tl != strlen(types[t]) || strncmp(type, types[t], tl))) &&
					    !(ns && nslen[n] && (sl[0] != nslen[n] || strncmp(ns, nss[n], sl[0])))) {
						char *f;

						if (c->nres == KR_MAX_RESOURCES)
							return fail(err, errlen, "RESOURCE, NAMESPACE and RESOURCE_NAME "
								    "make more than %d watches (KR_MAX_RESOURCES)",
								    KR_MAX_RESOURCES);
						f = c->field_selector[c->nres];
						kr_snprintf(f, sizeof(c->field_selector[0]), "metadata.name=%.*s",
							    (int)nl, name);
						add(c, plural[types[t][0] == 's'], nss[n], nslen[n])->field_selector = f;
						found = 1;
					}
				}
				p = p[l] ? p + l + 1 : NULL;
			}
			if (!found) {
				/* No name for this type and namespace: by label, as k8s-sidecar falls back. */
				struct kr_resource_spec *r;

				if (c->nres == KR_MAX_RESOURCES)
					return fail(err, errlen, "RESOURCE and NAMESPACE make more than %d "
						    "watches (KR_MAX_RESOURCES)", KR_MAX_RESOURCES);
				r = add(c, plural[types[t][0] == 's'], nss[n], nslen[n]);
				r->label_selector = c->label_selector;
				r->all_namespaces = all;
			}
		}
	}
	return 0;
}

int kr_sidecar_wanted(int argc, char **argv)
{
	const char *base;
	int i;

	if (argc > 0 && argv[0]) {
		base = strrchr(argv[0], '/');
		base = base ? base + 1 : argv[0];
		if (strcmp(base, "k8s-sidecar") == 0)
			return 1;
	}
	/* What follows "--" is a supervised program's, never kreflect's. */
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--k8s-sidecar") == 0)
			return 1;
	return 0;
}

/*
 * HEALTH_PORT (default 8080, as k8s-sidecar; 0: none) and HEALTH_HOST (an IP
 * literal, default 0.0.0.0) into c->health_listen. k8s-sidecar always serves
 * its /healthz; probes that point at it must keep working after the swap.
 */
static int health(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg, char *err, size_t errlen)
{
	const char *port = env(get, arg, "HEALTH_PORT"), *host = env(get, arg, "HEALTH_HOST");
	long n = port ? number(port, 0, 65535) : 8080;
	struct kr_addr addr;
	int loopback;
	char path[8];

	if (n < 0)
		return fail(err, errlen, "HEALTH_PORT must be a port from 1 to 65535 (0: no health "
			    "endpoint), not '%.32s'", port);
	c->health_listen[0] = '\0';
	if (n == 0)
		return 0;
	if (!host)
		host = "0.0.0.0";
	kr_snprintf(c->health_listen, sizeof(c->health_listen), strchr(host, ':') ? "[%.46s]:%ld"
		    : "%.46s:%ld", host, n);
	if (strlen(host) > 46 || strchr(host, '[') ||
	    kr_serve_parse_listen(c->health_listen, &addr, &loopback, path, sizeof(path)) != 0)
		return fail(err, errlen, "HEALTH_HOST must be an IPv4 or IPv6 address, not '%.46s'", host);
	return 0;
}

int kr_sidecar_parse(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg, int argc,
		     char **argv, char *err, size_t errlen)
{
	const char *user_flag = NULL, *pass_flag = NULL, *v, *label, *value;
	size_t i;
	long n;
	int r;

	memset(c, 0, sizeof(*c));
	kr_dir_config_init(&c->dir);
	kr_hooks_config_init(&c->hooks);   /* the debounce as --debounce's default */
	c->log_level = KR_LOG_INFO;
	for (r = 1; r < argc; r++) {
		const char *a = argv[r];
		const char **dst = strncmp(a, "--req-username-file", 19) == 0 ? &user_flag
				   : strncmp(a, "--req-password-file", 19) == 0 ? &pass_flag : NULL;

		if (strcmp(a, "--k8s-sidecar") == 0)
			continue;
		if (dst && a[19] == '=')
			*dst = a + 20;
		else if (dst && !a[19] && r + 1 < argc)
			*dst = argv[++r];
		else
			return fail(err, errlen, "in k8s-sidecar mode the configuration comes from the "
				    "environment; the only arguments are --req-username-file and "
				    "--req-password-file, not '%.64s'", a);
		if (!**dst)
			return fail(err, errlen, "%.19s needs a file", a);
	}
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (env(get, arg, refused[i].name))
			return fail(err, errlen, "%s: %s", refused[i].name, refused[i].why);

	label = env(get, arg, "LABEL");
	value = env(get, arg, "LABEL_VALUE");
	if (!label)
		return fail(err, errlen, "LABEL must be set: the label that selects the ConfigMaps and "
			    "Secrets");
	if (!label_text(label, 1) || label[0] == '/')
		return fail(err, errlen, "LABEL must be a label key ([prefix/]name), not '%.64s'", label);
	if (value && !label_text(value, 0))
		return fail(err, errlen, "LABEL_VALUE must be a label value (at most 63 letters, digits, "
			    "'-', '_', '.'), not '%.64s'", value);
	if ((size_t)kr_snprintf(c->label_selector, sizeof(c->label_selector), value ? "%s=%s" : "%s",
				label, value) >= sizeof(c->label_selector))
		return fail(err, errlen, "LABEL and LABEL_VALUE are too long together");

	c->dir.path = env(get, arg, "FOLDER");
	if (!c->dir.path)
		return fail(err, errlen, "FOLDER must be set: the directory the files go to");
	v = get(arg, "FOLDER_ANNOTATION");
	c->dir.annotation = v ? v : KR_SIDECAR_DEFAULT_ANNOTATION;
	c->dir.annotation_absolute = 1;
	c->dir.url_keys_refused = 1;
	/* A sweep removes only the files of what its own resource covers. */
	c->dir.sweep_by_scope = 1;
	r = boolean(env(get, arg, "UNIQUE_FILENAMES"));
	if (r < 0)
		return fail(err, errlen, "UNIQUE_FILENAMES must be true or false, not '%.32s'",
			    env(get, arg, "UNIQUE_FILENAMES"));
	c->dir.unique_names = r;
	v = env(get, arg, "DEFAULT_FILE_MODE");
	if (v) {
		unsigned long mode = 0;
		const char *p = v;

		if (strncmp(p, "0o", 2) == 0)
			p += 2;    /* Python's int(v, 8) takes the prefix too */
		for (i = 0; p[i] >= '0' && p[i] <= '7' && i < 4; i++)
			mode = mode * 8 + (unsigned long)(p[i] - '0');
		if (i == 0 || p[i] || mode > 0777 || mode == 0)
			return fail(err, errlen, "DEFAULT_FILE_MODE must be an octal mode from 1 to 777 "
				    "(like 644 or 440), not '%.32s'", v);
		c->dir.file_mode = c->dir.secret_mode = (unsigned)mode;
	}

	v = env(get, arg, "METHOD");
	if (!v || strcmp(v, "WATCH") == 0) {
		c->method = KR_SIDECAR_WATCH;
	} else if (strcmp(v, "LIST") == 0) {
		c->method = KR_SIDECAR_LIST;
	} else if (strcmp(v, "SLEEP") == 0) {
		c->method = KR_SIDECAR_SLEEP;
		note(c, "METHOD=SLEEP: kreflect watches instead of listing every SLEEP_TIME seconds; "
		     "changes arrive sooner and cost less");
	} else {
		return fail(err, errlen, "METHOD must be WATCH, LIST or SLEEP, not '%.32s'", v);
	}
	v = env(get, arg, "SLEEP_TIME");
	if (v && number(v, 1, MAX_SECONDS) < 0)
		return fail(err, errlen, "SLEEP_TIME must be seconds from 1 to %d, not '%.32s'",
			    MAX_SECONDS, v);
	v = env(get, arg, "ERROR_THROTTLE_SLEEP");
	if (v && number(v, 0, MAX_SECONDS) < 0)
		return fail(err, errlen, "ERROR_THROTTLE_SLEEP must be seconds from 0 to %d, not '%.32s'",
			    MAX_SECONDS, v);
	if (v)
		note(c, "ERROR_THROTTLE_SLEEP: kreflect retries with client-go's backoff (0.8 s doubling "
		     "to 30 s, jitter) instead of a fixed pause");
	if (env(get, arg, "RESOURCE_NAME") && c->method == KR_SIDECAR_WATCH)
		note(c, "RESOURCE_NAME: kreflect watches each named object (k8s-sidecar polls them)");

	r = resources(c, get, arg, err, errlen);
	if (r != 0)
		return r;
	r = request(c, get, arg, user_flag, pass_flag, err, errlen);
	if (r != 0)
		return r;

	v = env(get, arg, "SCRIPT");
	if (v) {
		struct kr_fs_stat st;

		if (strchr(v, '\'') || strchr(v, '"') || strlen(v) > sizeof(c->exec) - 16)
			return fail(err, errlen, "SCRIPT must be a path without quotes, shorter than %d "
				    "bytes", (int)sizeof(c->exec) - 16);
		/* As k8s-sidecar: run it if it is executable, else hand it to sh. */
		if (kr_port_fs_stat(v, &st) == 0 && st.type == KR_FS_FILE && (st.mode & 0111))
			kr_snprintf(c->exec, sizeof(c->exec), "'%s'", v);
		else
			kr_snprintf(c->exec, sizeof(c->exec), "sh '%s'", v);
		c->hooks.exec = c->exec;
	}

	r = boolean(env(get, arg, "IGNORE_ALREADY_PROCESSED"));
	if (r < 0)
		return fail(err, errlen, "IGNORE_ALREADY_PROCESSED must be true or false, not '%.32s'",
			    env(get, arg, "IGNORE_ALREADY_PROCESSED"));
	v = get(arg, "SKIP_TLS_VERIFY");
	/* Only the exact word turns verification off, as in k8s-sidecar; anything
	 * else that is not "false" is a mistake that must not pass for either. */
	if (v && *v && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
		return fail(err, errlen, "SKIP_TLS_VERIFY must be true or false, not '%.32s'", v);
	c->insecure = v && strcmp(v, "true") == 0;
	r = boolean(env(get, arg, "DISABLE_X509_STRICT_VERIFICATION"));
	if (r < 0)
		return fail(err, errlen, "DISABLE_X509_STRICT_VERIFICATION must be true or false, not "
			    "'%.32s'", env(get, arg, "DISABLE_X509_STRICT_VERIFICATION"));
	if (r)
		return fail(err, errlen, "DISABLE_X509_STRICT_VERIFICATION=true: kreflect cannot relax "
			    "its certificate checks; give the cluster's CA a valid certificate");

	v = env(get, arg, "WATCH_SERVER_TIMEOUT");
	if (v) {
		n = number(v, 1, MAX_SECONDS);
		if (n < 0)
			return fail(err, errlen, "WATCH_SERVER_TIMEOUT must be seconds from 1 to %d, not "
				    "'%.32s'", MAX_SECONDS, v);
		c->watch_timeout_s = (int)n;
	}
	v = env(get, arg, "WATCH_CLIENT_TIMEOUT");
	if (v) {
		n = number(v, 1, MAX_SECONDS);
		if (n < 0)
			return fail(err, errlen, "WATCH_CLIENT_TIMEOUT must be seconds from 1 to %d, not "
				    "'%.32s'", MAX_SECONDS, v);
		c->idle_ms = (int)n * 1000;
	}
	if ((n = health(c, get, arg, err, errlen)) != 0)
		return (int)n;
	v = env(get, arg, "LOG_LEVEL");
	if (v) {
		if (strcasecmp(v, "DEBUG") == 0)
			c->log_level = KR_LOG_DEBUG;
		else if (strcasecmp(v, "INFO") == 0)
			c->log_level = KR_LOG_INFO;
		else if (strcasecmp(v, "WARN") == 0 || strcasecmp(v, "WARNING") == 0)
			c->log_level = KR_LOG_WARN;
		else if (strcasecmp(v, "ERROR") == 0 || strcasecmp(v, "CRITICAL") == 0)
			c->log_level = KR_LOG_ERROR;
		else
			return fail(err, errlen, "LOG_LEVEL must be DEBUG, INFO, WARN, ERROR or CRITICAL, "
				    "not '%.32s'", v);
	}
	return 0;
}
