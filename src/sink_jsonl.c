#include <string.h>

#include "fmt.h"
#include "json.h"
#include "kreflect.h"
#include "log.h"
#include "port.h"
#include "resource.h"
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

static int write_out(struct kr_jsonl *j, struct kr_iov *iov, int n)
{
	if (kr_port_writev_all(j->fd, iov, n) == 0) {
		j->writes++;
		return 0;
	}
	j->failed = 1;
	j->len = 0;
	kr_log(KR_LOG_ERROR, "unable to write events to the output: %s", kr_port_last_error());
	return KR_EIO;
}

int kr_jsonl_flush(void *arg)
{
	struct kr_jsonl *j = arg;
	struct kr_iov iov;

	if (j->failed)
		return KR_EIO;
	if (j->len == 0)
		return 0;
	iov.base = j->buf;
	iov.len = j->len;
	j->len = 0;
	return write_out(j, &iov, 1);
}

/* Gathers iov[0..n) as one line: copied into buf, or written as it is if it never fits. */
static void emit(struct kr_jsonl *j, struct kr_iov *iov, int n)
{
	size_t total = 0;
	int i;

	for (i = 0; i < n; i++)
		total += iov[i].len;
	if (j->len + total > sizeof(j->buf) && kr_jsonl_flush(j) != 0)
		return;
	if (total > sizeof(j->buf)) {
		if (write_out(j, iov, n) == 0)
			j->lines++;
		return;
	}
	for (i = 0; i < n; i++) {
		memcpy(j->buf + j->len, iov[i].base, iov[i].len);
		j->len += iov[i].len;
	}
	j->lines++;
}

void kr_jsonl_event(void *arg, const struct kr_event *ev)
{
	struct kr_jsonl *j = arg;
	struct kr_iov iov[3];
	/* Fits any SYNCED line: every byte of the name and RV escaped 6 for 1. */
	char head[64], count[96], line[6 * (sizeof(((struct kr_resource *)0)->name) + KR_RV_MAX) + 128];
	int n;

	if (j->failed)
		return;
	if (ev->type == KR_EV_SYNCED) {
		struct kr_out o = { line, sizeof(line), 0, 0 };

		kr_out_str(&o, "{\"type\":\"SYNCED\",\"resource\":\"");
		kr_json_escape(&o, ev->resource ? ev->resource : "");
		kr_out_str(&o, "\",\"resourceVersion\":\"");
		kr_json_escape(&o, ev->rv ? ev->rv : "");
		n = kr_snprintf(count, sizeof(count), "\",\"count\":%zu%s,\"state\":\"%s\"}\n",
				ev->count, ev->partial ? ",\"partial\":true" : "",
				ev->restored ? "restored" : "live");
		kr_out_put(&o, count, (size_t)n);
		if (o.overflow)
			return;            /* not reached: line is sized for the longest */
		iov[0].base = line;
		iov[0].len = o.len;
		emit(j, iov, 1);
		/* A sync is a point readers wait for: out at once, not at the next pass. */
		kr_jsonl_flush(j);
		return;
	}
	/* Restored objects were printed before the restart: only changes are news. */
	if (ev->restored)
		return;
	/* Once per event: the head is put together without the formatter. */
	{
		const char *name = kr_event_name(ev->type);
		size_t nl = strlen(name);

		memcpy(head, "{\"type\":\"", 9);
		memcpy(head + 9, name, nl);
		memcpy(head + 9 + nl, "\",\"object\":", 11);
		n = (int)(9 + nl + 11);
	}
	iov[0].base = head;
	iov[0].len = (size_t)n;
	iov[1].base = ev->obj;
	iov[1].len = ev->objlen;
	iov[2].base = "}\n";
	iov[2].len = 2;
	emit(j, iov, 3);
}
