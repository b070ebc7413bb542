#include "http.h"

#include <limits.h>
#include <string.h>

#include "codec.h"
#include "fmt.h"
#include "kreflect.h"

/*
 * Parser states. Head lines, chunk-size lines and trailer lines are collected
 * whole in r->line (bounded) and parsed at their LF; body and chunk data are
 * handed on as spans without looking at the bytes.
 */
enum state {
	S_STATUS,                      /* the status line */
	S_HEADER,                      /* header lines up to the blank line */
	S_BODY_LENGTH,                 /* r->remaining bytes of body (0: no body) */
	S_BODY_CLOSE,                  /* body until the connection closes */
	S_CHUNK_SIZE,                  /* chunk-size [ chunk-ext ] CRLF */
	S_CHUNK_DATA,                  /* r->remaining bytes of the current chunk */
	S_CHUNK_CR,                    /* the CRLF that must follow chunk data */
	S_CHUNK_LF,
	S_TRAILER,                     /* trailer lines up to the blank line */
	S_DONE,
	S_FAILED,
};

/* Bodies and chunks stay below 2^62 bytes: no sum or count can overflow. */
#define BODY_MAX (1ULL << 62)

/* Retry-After delays are capped where a 32-bit long still holds them. */
#define RETRY_MAX 2147483647L

/* --- characters ------------------------------------------------------------------ */

static int is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* RFC 9110 tchar: what header names and methods are made of. */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Control bytes other than tab: never allowed in a line we parse or write. */
static int is_ctl(unsigned char c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

static int is_ws(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Case-insensitive comparison of s[0..n) with the lower-case literal lit. */
static int ieq(const char *s, size_t n, const char *lit)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (lit[i] == '\0' || lower((unsigned char)s[i]) != (unsigned char)lit[i])
			return 0;
	return lit[n] == '\0';
}

/* --- HTTP-date (RFC 9110 5.6.7): IMF-fixdate, RFC 850 and asctime ----------------------- */

static const char *const month_names[12] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
static const char *const day_names[7] = {
	"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun",
};
static const char *const day_names_long[7] = {
	"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
};

static int number(const char *s, int n, int *out)
{
	int i, v = 0;

	for (i = 0; i < n; i++) {
		if (!is_digit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int month_of(const char *s)
{
	int m;

	for (m = 0; m < 12; m++)
		if (memcmp(s, month_names[m], 3) == 0)
			return m + 1;
	return -1;
}

static int is_day_name(const char *s, size_t n, const char *const *names)
{
	int d;

	for (d = 0; d < 7; d++)
		if (strlen(names[d]) == n && memcmp(s, names[d], n) == 0)
			return 1;
	return 0;
}

/* "08:49:37" */
static int clock_of(const char *s, int *h, int *m, int *sec)
{
	if (s[2] != ':' || s[5] != ':')
		return -1;
	if (number(s, 2, h) < 0 || number(s + 3, 2, m) < 0 || number(s + 6, 2, sec) < 0)
		return -1;
	return *h < 24 && *m < 60 && *sec <= 60 ? 0 : -1;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant). */
static int64_t days_from_civil(int y, int m, int d)
{
	int64_t era, yoe, doy;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/*
 * Parses one of the three HTTP-date forms into seconds since the epoch.
 * RFC 850's two-digit year is read as 1970-2069. Returns 0 or -1.
 */
static int parse_http_date(const char *s, size_t n, int64_t *out)
{
	int y, mon, d, hh, mm, ss;
	const char *comma = memchr(s, ',', n);

	if (n == 29 && comma == s + 3) {
		/* Sun, 06 Nov 1994 08:49:37 GMT */
		if (!is_day_name(s, 3, day_names) || s[4] != ' ' || number(s + 5, 2, &d) < 0 ||
		    s[7] != ' ' || (mon = month_of(s + 8)) < 0 || s[11] != ' ' ||
		    number(s + 12, 4, &y) < 0 || s[16] != ' ' ||
		    clock_of(s + 17, &hh, &mm, &ss) < 0 || memcmp(s + 25, " GMT", 4) != 0)
			return -1;
	} else if (n == 24 && !comma) {
		/* Sun Nov  6 08:49:37 1994 */
		if (!is_day_name(s, 3, day_names) || s[3] != ' ' || (mon = month_of(s + 4)) < 0 ||
		    s[7] != ' ' ||
		    (s[8] == ' ' ? number(s + 9, 1, &d) : number(s + 8, 2, &d)) < 0 ||
		    s[10] != ' ' || clock_of(s + 11, &hh, &mm, &ss) < 0 || s[19] != ' ' ||
		    number(s + 20, 4, &y) < 0)
			return -1;
	} else if (comma && n == (size_t)(comma - s) + 24) {
		/* Sunday, 06-Nov-94 08:49:37 GMT */
		const char *p = comma + 1;

		if (!is_day_name(s, (size_t)(comma - s), day_names_long) || p[0] != ' ' ||
		    number(p + 1, 2, &d) < 0 || p[3] != '-' || (mon = month_of(p + 4)) < 0 ||
		    p[7] != '-' || number(p + 8, 2, &y) < 0 || p[10] != ' ' ||
		    clock_of(p + 11, &hh, &mm, &ss) < 0 || memcmp(p + 19, " GMT", 4) != 0)
			return -1;
		y += y < 70 ? 2000 : 1900;
	} else {
		return -1;
	}
	if (d < 1 || d > 31)
		return -1;
	*out = days_from_civil(y, mon, d) * 86400 + hh * 3600 + mm * 60 + ss;
	return 0;
}

/* --- response parser ---------------------------------------------------------------- */

static int fail(struct kr_http_resp *r, int err, const char *why)
{
	r->state = S_FAILED;
	r->err = err;
	r->error = why;
	return err;
}

/* Forgets what one head said: before a response and after each 1xx. */
static void head_reset(struct kr_http_resp *r)
{
	r->status = 0;
	r->minor_version = 1;
	r->content_length = -1;
	r->chunked = 0;
	r->keep_alive = 0;
	r->retry_after_seconds = -1;
	r->retry_after_epoch = 0;
	r->content_type[0] = '\0';
	r->content_encoding = KR_HTTP_CE_IDENTITY;
	r->nheaders = 0;
	r->have_te = 0;
	r->conn_close = 0;
	r->conn_keep_alive = 0;
	r->remaining = 0;
	r->line_len = 0;
}

void kr_http_resp_init(struct kr_http_resp *r)
{
	head_reset(r);
	r->error = NULL;
	r->state = S_STATUS;
	r->err = 0;
	r->started = 0;
	r->interim = 0;
}

/*
 * Collects one CRLF-terminated line into r->line from buf[*pos..len).
 * Returns 1 with the line (CR dropped) in r->line[0..line_len), 0 if buf ran
 * out first (all of it taken), or an error. The line, not counting CRLF, may
 * be KR_HTTP_LINE_MAX bytes long.
 */
static int take_line(struct kr_http_resp *r, const char *buf, size_t len, size_t *pos)
{
	const char *start = buf + *pos;
	size_t avail = len - *pos;
	const char *lf = memchr(start, '\n', avail);
	size_t n = lf ? (size_t)(lf - start) : avail;
	size_t i;

	if (n > sizeof(r->line) - r->line_len)
		return fail(r, KR_ETOOBIG, "line longer than KR_HTTP_LINE_MAX");
	memcpy(r->line + r->line_len, start, n);
	r->line_len += n;
	if (!lf) {
		*pos = len;
		return 0;
	}
	*pos += n + 1;
	if (r->line_len == 0 || r->line[r->line_len - 1] != '\r')
		return fail(r, KR_EPROTO, "line ends in a bare LF, not CRLF");
	r->line_len--;
	for (i = 0; i < r->line_len; i++)
		if (is_ctl((unsigned char)r->line[i]))
			return fail(r, KR_EPROTO, "control character (or bare CR) in a line");
	return 1;
}

static int parse_status(struct kr_http_resp *r)
{
	const char *l = r->line;
	size_t n = r->line_len;

	/* HTTP/1.1 200[ reason] */
	if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || !is_digit((unsigned char)l[7]) ||
	    l[8] != ' ' || !is_digit((unsigned char)l[9]) || !is_digit((unsigned char)l[10]) ||
	    !is_digit((unsigned char)l[11]) || (n > 12 && l[12] != ' '))
		return fail(r, KR_EPROTO, "malformed status line");
	r->minor_version = l[7] - '0';
	r->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
	if (r->status < 100 || r->status > 599)
		return fail(r, KR_EPROTO, "status code outside 100-599");
	if (r->status == 101)
		return fail(r, KR_EPROTO, "unrequested 101 Switching Protocols");
	r->state = S_HEADER;
	return 0;
}

static int parse_content_length(struct kr_http_resp *r, const char *v, size_t n)
{
	unsigned long long x = 0;
	size_t i;

	if (n == 0)
		return fail(r, KR_EPROTO, "empty Content-Length");
	for (i = 0; i < n; i++) {
		if (!is_digit((unsigned char)v[i]))
			return fail(r, KR_EPROTO, "Content-Length is not a decimal number");
		x = x * 10 + (unsigned)(v[i] - '0');
		if (x >= BODY_MAX)
			return fail(r, KR_ETOOBIG, "Content-Length of 2^62 or more");
	}
	if (r->content_length >= 0 && (unsigned long long)r->content_length != x)
		return fail(r, KR_EPROTO, "conflicting Content-Length headers");
	r->content_length = (long long)x;
	return 0;
}

/*
 * The next element of a comma-separated header list from v[*i..n), blanks
 * trimmed: 1 with [*start, *end) set (possibly empty), 0 at the end.
 */
static int list_next(const char *v, size_t n, size_t *i, size_t *start, size_t *end)
{
	while (*i < n && (is_ws((unsigned char)v[*i]) || v[*i] == ','))
		(*i)++;
	if (*i >= n)
		return 0;
	*start = *i;
	while (*i < n && v[*i] != ',')
		(*i)++;
	*end = *i;
	while (*end > *start && is_ws((unsigned char)v[*end - 1]))
		(*end)--;
	return 1;
}

/* Connection: a comma-separated list of tokens. */
static void parse_connection(struct kr_http_resp *r, const char *v, size_t n)
{
	size_t i = 0, start, end;

	while (list_next(v, n, &i, &start, &end)) {
		if (ieq(v + start, end - start, "close"))
			r->conn_close = 1;
		else if (ieq(v + start, end - start, "keep-alive"))
			r->conn_keep_alive = 1;
	}
}

/*
 * Content-Encoding: a comma-separated list of codings, applied in order (and
 * possibly over several header lines). "identity" changes nothing; one gzip
 * is what we can undo; gzip twice or any other coding is KR_HTTP_CE_OTHER.
 */
static void parse_content_encoding(struct kr_http_resp *r, const char *v, size_t n)
{
	size_t i = 0, start, end;

	while (list_next(v, n, &i, &start, &end)) {
		if (end == start || ieq(v + start, end - start, "identity"))
			continue;
		if ((ieq(v + start, end - start, "gzip") || ieq(v + start, end - start, "x-gzip")) &&
		    r->content_encoding == KR_HTTP_CE_IDENTITY)
			r->content_encoding = KR_HTTP_CE_GZIP;
		else
			r->content_encoding = KR_HTTP_CE_OTHER;
	}
}

/* Retry-After: delay-seconds or an HTTP-date; the last one counts, junk is ignored. */
static void parse_retry_after(struct kr_http_resp *r, const char *v, size_t n)
{
	long secs = 0;
	int64_t when;
	size_t i;

	r->retry_after_seconds = -1;
	r->retry_after_epoch = 0;
	for (i = 0; i < n && is_digit((unsigned char)v[i]); i++)
		secs = secs > (RETRY_MAX - 9) / 10 ? RETRY_MAX : secs * 10 + (v[i] - '0');
	if (n > 0 && i == n)
		r->retry_after_seconds = secs;
	else if (parse_http_date(v, n, &when) == 0)
		r->retry_after_epoch = when >= 1 ? when : 1;
}

static int parse_header(struct kr_http_resp *r)
{
	const char *l = r->line, *v, *colon;
	size_t n = r->line_len, name_len, vn, i;

	if (is_ws((unsigned char)l[0]))
		return fail(r, KR_EPROTO, "obs-fold (header line starting with whitespace)");
	if (++r->nheaders > KR_HTTP_MAX_HEADERS)
		return fail(r, KR_ETOOBIG, "more than KR_HTTP_MAX_HEADERS header lines");
	colon = memchr(l, ':', n);
	if (!colon || colon == l)
		return fail(r, KR_EPROTO, "header line without a name and a colon");
	name_len = (size_t)(colon - l);
	for (i = 0; i < name_len; i++)
		if (!is_tchar((unsigned char)l[i]))
			return fail(r, KR_EPROTO, "invalid character in a header name");
	v = colon + 1;
	vn = n - name_len - 1;
	while (vn > 0 && is_ws((unsigned char)v[0])) {
		v++;
		vn--;
	}
	while (vn > 0 && is_ws((unsigned char)v[vn - 1]))
		vn--;

	if (ieq(l, name_len, "content-length"))
		return parse_content_length(r, v, vn);
	if (ieq(l, name_len, "transfer-encoding")) {
		/* Anything but one "chunked" would need a decoder we lack, or is a smuggling attempt. */
		if (r->have_te || !ieq(v, vn, "chunked"))
			return fail(r, KR_EPROTO, "Transfer-Encoding other than a single chunked");
		r->have_te = 1;
	} else if (ieq(l, name_len, "connection")) {
		parse_connection(r, v, vn);
	} else if (ieq(l, name_len, "content-encoding")) {
		parse_content_encoding(r, v, vn);
	} else if (ieq(l, name_len, "retry-after")) {
		parse_retry_after(r, v, vn);
	} else if (ieq(l, name_len, "content-type")) {
		if (vn > sizeof(r->content_type) - 1)
			vn = sizeof(r->content_type) - 1;
		memcpy(r->content_type, v, vn);
		r->content_type[vn] = '\0';
	}
	return 0;
}

/* The blank line after the headers: decides how the body is framed. */
static int end_of_head(struct kr_http_resp *r)
{
	if (r->status < 200) {
		if (++r->interim > KR_HTTP_MAX_INTERIM)
			return fail(r, KR_ETOOBIG, "more than KR_HTTP_MAX_INTERIM 1xx responses");
		head_reset(r);
		r->state = S_STATUS;
		return 0;
	}
	if (r->have_te && r->content_length >= 0)
		return fail(r, KR_EPROTO, "both Content-Length and Transfer-Encoding");
	if (r->have_te && r->minor_version == 0)
		return fail(r, KR_EPROTO, "Transfer-Encoding in an HTTP/1.0 response");
	if (r->minor_version == 0)
		r->keep_alive = r->conn_keep_alive && !r->conn_close;
	else
		r->keep_alive = !r->conn_close;
	if (r->status == 204 || r->status == 304) {
		r->state = S_BODY_LENGTH;
		r->remaining = 0;
	} else if (r->have_te) {
		r->chunked = 1;
		r->state = S_CHUNK_SIZE;
	} else if (r->content_length >= 0) {
		r->state = S_BODY_LENGTH;
		r->remaining = (unsigned long long)r->content_length;
	} else {
		r->state = S_BODY_CLOSE;
		r->keep_alive = 0;
	}
	return KR_HTTP_HEAD;
}

/* chunk-size = 1*16HEXDIG, then optional BWS ";" extensions, which are skipped. */
static int parse_chunk_size(struct kr_http_resp *r)
{
	const char *l = r->line;
	size_t n = r->line_len, i = 0;
	unsigned long long size = 0;
	int h;

	while (i < n && (h = kr_hex_value((unsigned char)l[i])) >= 0) {
		if (i == 16)
			return fail(r, KR_ETOOBIG, "chunk size longer than 16 hex digits");
		size = size << 4 | (unsigned)h;
		if (size >= BODY_MAX)
			return fail(r, KR_ETOOBIG, "chunk size of 2^62 or more");
		i++;
	}
	if (i == 0)
		return fail(r, KR_EPROTO, "chunk size is not hexadecimal");
	if (i < n) {
		while (i < n && is_ws((unsigned char)l[i]))
			i++;
		if (i == n || l[i] != ';')
			return fail(r, KR_EPROTO, "garbage after the chunk size");
	}
	if (size == 0) {
		r->nheaders = 0;
		r->state = S_TRAILER;
	} else {
		r->remaining = size;
		r->state = S_CHUNK_DATA;
	}
	return 0;
}

/* A complete line arrived in the current state: 0 to go on, or what to report. */
static int line_done(struct kr_http_resp *r)
{
	switch (r->state) {
	case S_STATUS:
		return parse_status(r);
	case S_HEADER:
		return r->line_len == 0 ? end_of_head(r) : parse_header(r);
	case S_CHUNK_SIZE:
		return parse_chunk_size(r);
	case S_TRAILER:
		if (r->line_len == 0) {
			r->state = S_DONE;
			return KR_HTTP_DONE;
		}
		if (++r->nheaders > KR_HTTP_MAX_HEADERS)
			return fail(r, KR_ETOOBIG, "more than KR_HTTP_MAX_HEADERS trailer lines");
		return 0;
	default:
		return fail(r, KR_ESTATE, "line in a state without lines");
	}
}

int kr_http_resp_feed(struct kr_http_resp *r, const char *buf, size_t len, size_t *consumed,
		      const char **body, size_t *body_len)
{
	size_t i = 0, n;
	int rc;

	*consumed = 0;
	*body = NULL;
	*body_len = 0;
	if (r->state == S_FAILED)
		return r->err;
	if (r->state == S_DONE)
		return KR_ESTATE;
	if (r->state == S_BODY_LENGTH && r->remaining == 0) {
		r->state = S_DONE;
		return KR_HTTP_DONE;
	}
	if (len > 0)
		r->started = 1;
	while (i < len) {
		switch (r->state) {
		case S_STATUS:
		case S_HEADER:
		case S_CHUNK_SIZE:
		case S_TRAILER:
			rc = take_line(r, buf, len, &i);
			if (rc == 1) {
				rc = line_done(r);
				r->line_len = 0;
			}
			if (rc != 0) {
				*consumed = i;
				return rc;
			}
			break;
		case S_BODY_LENGTH:
		case S_CHUNK_DATA:
		case S_BODY_CLOSE:
			/* The hot path: one span, as long as the input and the chunk allow. */
			n = len - i;
			if (r->state != S_BODY_CLOSE) {
				if (n > r->remaining)
					n = (size_t)r->remaining;
				r->remaining -= n;
				if (r->remaining == 0 && r->state == S_CHUNK_DATA)
					r->state = S_CHUNK_CR;
			}
			*body = buf + i;
			*body_len = n;
			*consumed = i + n;
			return KR_HTTP_BODY;
		case S_CHUNK_CR:
		case S_CHUNK_LF:
			if (buf[i] != (r->state == S_CHUNK_CR ? '\r' : '\n')) {
				*consumed = i;
				return fail(r, KR_EPROTO, "chunk data not followed by CRLF");
			}
			i++;
			r->state = r->state == S_CHUNK_CR ? S_CHUNK_LF : S_CHUNK_SIZE;
			break;
		default:
			*consumed = i;
			return fail(r, KR_ESTATE, "feed in an unknown state");
		}
	}
	*consumed = i;
	return 0;
}

int kr_http_resp_eof(struct kr_http_resp *r)
{
	switch (r->state) {
	case S_FAILED:
		return r->err;
	case S_DONE:
		return KR_HTTP_DONE;
	case S_STATUS:
		if (!r->started)
			return fail(r, KR_ECLOSED, "connection closed before a response");
		return fail(r, KR_EPROTO, "connection closed in the response head");
	case S_HEADER:
		return fail(r, KR_EPROTO, "connection closed in the response head");
	case S_BODY_LENGTH:
		if (r->remaining > 0)
			return fail(r, KR_EPROTO, "connection closed short of Content-Length");
		r->state = S_DONE;
		return KR_HTTP_DONE;
	case S_BODY_CLOSE:
		r->state = S_DONE;
		return KR_HTTP_DONE;
	default:
		return fail(r, KR_EPROTO, "connection closed inside the chunked body");
	}
}

long kr_http_retry_after_delay(const struct kr_http_resp *r, int64_t now_epoch)
{
	int64_t d;

	if (r->retry_after_seconds >= 0)
		return r->retry_after_seconds;
	if (r->retry_after_epoch == 0)
		return -1;
	d = r->retry_after_epoch - now_epoch;
	if (d < 0)
		return 0;
	return d > RETRY_MAX ? RETRY_MAX : (long)d;
}

/* --- request writer ----------------------------------------------------------------- */

/* RFC 3986 2.3: unreserved characters pass, every other byte becomes %XX. */
static void put_encoded(struct kr_out *o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *run = s;

	for (;; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[3];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
		    c == '-' || c == '.' || c == '_' || c == '~')
			continue;
		kr_out_put(o, run, (size_t)(s - run));
		if (c == '\0')
			return;
		esc[0] = '%';
		esc[1] = hex[c >> 4];
		esc[2] = hex[c & 15];
		kr_out_put(o, esc, 3);
		run = s + 1;
	}
}

/* Nonzero if s is non-empty and every byte passes ok. */
static int all(const char *s, int (*ok)(unsigned char))
{
	if (s == NULL || *s == '\0')
		return 0;
	for (; *s; s++)
		if (!ok((unsigned char)*s))
			return 0;
	return 1;
}

/* Header values we write: anything but control bytes (tab is fine). */
static int value_byte(unsigned char c)
{
	return !is_ctl(c);
}

/* Host and path bytes: visible ASCII only; a path must be percent-encoded already. */
static int target_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

int kr_http_write_request_ex(char *buf, size_t size, const char *method,
			     const char *host_header, const char *path,
			     const struct kr_http_param *params, size_t nparams,
			     const char *bearer_token, const char *arch,
			     const struct kr_http_header *headers, size_t nheaders)
{
	struct kr_out o = { buf, size, 0, 0 };
	int sep;
	size_t i;

	if (!all(method, is_tchar) || !all(host_header, target_byte) ||
	    !all(path, target_byte) || path[0] != '/' || (params == NULL && nparams > 0) ||
	    (headers == NULL && nheaders > 0))
		return KR_EINVAL;
	if (bearer_token && *bearer_token && !all(bearer_token, value_byte))
		return KR_EINVAL;
	if (arch == NULL || *arch == '\0')
		arch = "unknown";
	if (!all(arch, value_byte))
		return KR_EINVAL;
	for (i = 0; i < nparams; i++)
		if (params[i].key == NULL || params[i].key[0] == '\0')
			return KR_EINVAL;
	for (i = 0; i < nheaders; i++)
		if (!all(headers[i].name, is_tchar) || headers[i].value == NULL ||
		    (headers[i].value[0] && !all(headers[i].value, value_byte)))
			return KR_EINVAL;

	kr_out_str(&o, method);
	kr_out_put(&o, " ", 1);
	kr_out_str(&o, path);
	sep = strchr(path, '?') ? '&' : '?';
	for (i = 0; i < nparams; i++) {
		char c = (char)sep;

		if (params[i].value == NULL)
			continue;
		kr_out_put(&o, &c, 1);
		put_encoded(&o, params[i].key);
		kr_out_put(&o, "=", 1);
		put_encoded(&o, params[i].value);
		sep = '&';
	}
	kr_out_str(&o, " HTTP/1.1\r\nHost: ");
	kr_out_str(&o, host_header);
	kr_out_str(&o, "\r\nUser-Agent: kreflect/" KR_VERSION " (linux/");
	kr_out_str(&o, arch);
	kr_out_str(&o, ")\r\nAccept: application/json\r\n");
	if (bearer_token && *bearer_token) {
		kr_out_str(&o, "Authorization: Bearer ");
		kr_out_str(&o, bearer_token);
		kr_out_put(&o, "\r\n", 2);
	}
	for (i = 0; i < nheaders; i++) {
		kr_out_str(&o, headers[i].name);
		kr_out_put(&o, ": ", 2);
		kr_out_str(&o, headers[i].value);
		kr_out_put(&o, "\r\n", 2);
	}
	kr_out_put(&o, "\r\n", 2);
	if (o.overflow || o.len > INT_MAX)
		return KR_ETOOBIG;
	return (int)o.len;
}

int kr_http_write_request(char *buf, size_t size, const char *method, const char *host_header,
			  const char *path, const struct kr_http_param *params, size_t nparams,
			  const char *bearer_token, const char *arch)
{
	return kr_http_write_request_ex(buf, size, method, host_header, path, params, nparams,
					bearer_token, arch, NULL, 0);
}
