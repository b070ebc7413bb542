/*
 * Failures as data: the class of what made a resource back off
 * (enum kr_failure in kreflect.h), from the HTTP status, the Status of an
 * ERROR event, the stream and the connection, for kr_status, the state
 * callback, the CLI's log lines and /metrics.
 */
#include <string.h>

#include "fmt.h"
#include "reflector.h"

/* The names in enum order, each after its NUL: one string, no table of pointers. */
static const char names[] = "none\0network\0dns\0tls\0unauthorized\0forbidden\0not_found\0"
	"throttled\0server\0expired\0protocol\0capacity\0other";

const char *kr_failure_name(enum kr_failure f)
{
	return kr_str_nth(names, (unsigned)f < KR_FAIL_N ? (unsigned)f : KR_FAIL_OTHER);
}

/* An HTTP status, or an ERROR event's Status code, as a class. */
static enum kr_failure of_status(int code, const char *reason)
{
	if (code == 410 || strcmp(reason, "Expired") == 0 || strcmp(reason, "Gone") == 0)
		return KR_FAIL_EXPIRED;
	switch (code) {
	case 401: return KR_FAIL_UNAUTHORIZED;
	case 403: return KR_FAIL_FORBIDDEN;
	case 404: return KR_FAIL_NOT_FOUND;
	case 429: return KR_FAIL_THROTTLED;
	default: return code >= 500 && code <= 599 ? KR_FAIL_SERVER : KR_FAIL_PROTOCOL;
	}
}

void kr_reflector_classify_failure(struct kr_reflector *r)
{
	int code = 0;
	enum kr_failure f;

	if (r->req.status != 200 && r->req.status != 0) {
		code = r->req.status;
		f = of_status(code, r->req.err_reason);
	} else if (r->req.error_event) {
		code = r->req.err_code;
		f = of_status(code, r->req.err_reason);
	} else if (r->req.stream_error || (r->conn.fail_err == KR_EPROTO && r->conn.fail_state == KR_CONN_RECEIVING)) {
		f = KR_FAIL_PROTOCOL;
	} else if (r->req.status == 0) {
		/* No answer: where the connection broke says which. */
		if (r->conn.fail_state == KR_CONN_RESOLVING)
			f = KR_FAIL_DNS;
		else if (r->conn.fail_err == KR_ETLS || r->conn.fail_state == KR_CONN_HANDSHAKE)
			f = KR_FAIL_TLS;
		else
			f = KR_FAIL_NETWORK;
	} else if (r->skipped || r->partial) {
		f = KR_FAIL_CAPACITY;          /* an object could not be held: relist for room */
	} else {
		f = KR_FAIL_OTHER;             /* a very short watch, a stream that ended early */
	}
	r->failure.cls = f;
	r->failure.http_status = code;
	kr_snprintf(r->failure.status_reason, sizeof(r->failure.status_reason), "%s",
		    code ? r->req.err_reason : "");
}
