#include <stdio.h>
#include <string.h>

#include "kreflect.h"
#include "log.h"
#include "port.h"
#include "sink.h"

const char *kr_event_name(enum kr_event_type t)
{
	switch (t) {
	case KR_EV_ADDED: return "ADDED";
	case KR_EV_MODIFIED: return "MODIFIED";
	case KR_EV_DELETED: return "DELETED";
	case KR_EV_RESYNC: return "RESYNC";
	case KR_EV_SYNCED: return "SYNCED";
	}
	return "UNKNOWN";
}

void kr_jsonl_init(struct kr_jsonl *j, int fd)
{
	memset(j, 0, sizeof(*j));
	j->fd = fd;
}

/* Writes s as a JSON string body (escaping what JSON requires). */
static size_t json_escape(char *out, size_t size, const char *s)
{
	size_t n = 0;

	for (; *s && n + 7 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
		} else {
			out[n++] = (char)c;
		}
	}
	out[n] = '\0';
	return n;
}

void kr_jsonl_event(void *arg, const struct kr_event *ev)
{
	struct kr_jsonl *j = arg;
	struct kr_iov iov[3];
	char head[64], line[1024], res[300], rv[200];
	int n, r;

	if (j->failed)
		return;
	if (ev->type == KR_EV_SYNCED) {
		json_escape(res, sizeof(res), ev->resource ? ev->resource : "");
		json_escape(rv, sizeof(rv), ev->rv ? ev->rv : "");
		n = snprintf(line, sizeof(line),
			     "{\"type\":\"SYNCED\",\"resource\":\"%s\",\"resourceVersion\":\"%s\",\"count\":%zu%s}\n",
			     res, rv, ev->count, ev->partial ? ",\"partial\":true" : "");
		iov[0].base = line;
		iov[0].len = (size_t)n;
		r = kr_port_writev_all(j->fd, iov, 1);
	} else {
		n = snprintf(head, sizeof(head), "{\"type\":\"%s\",\"object\":", kr_event_name(ev->type));
		iov[0].base = head;
		iov[0].len = (size_t)n;
		iov[1].base = ev->obj;
		iov[1].len = ev->objlen;
		iov[2].base = "}\n";
		iov[2].len = 2;
		r = kr_port_writev_all(j->fd, iov, 3);
	}
	if (r < 0) {
		j->failed = 1;
		kr_log(KR_LOG_ERROR, "unable to write events to the output: %s", kr_port_last_error());
		return;
	}
	j->lines++;
}
