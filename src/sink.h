/*
 * Where changes go. The reflector hands every change to each sink as a
 * kr_event; the object bytes are a view (into the store's arena or the
 * event being processed) valid only during the call. Sinks implement one
 * small interface; the library user's callbacks are a sink too.
 */
#ifndef KR_SINK_H
#define KR_SINK_H

#include <stddef.h>

#include "kreflect.h"
#include "kreflect_config.h"

/* enum kr_event_type and struct kr_event are public: kreflect.h. */

struct kr_sink {
	/* Called for every event, in order. Must not call back into the reflector. */
	void (*event)(void *arg, const struct kr_event *ev);
	void *arg;
};

/*
 * The JSON-lines sink: one line per event on fd,
 * {"type":"ADDED","object":{...}} and
 * {"type":"SYNCED","resource":"...","resourceVersion":"...","count":N}.
 * Lines are gathered in buf and written when it is full or at
 * kr_jsonl_flush(), which the owner calls before the loop may sleep (see
 * kr_loop_before_poll) and before exit. A write error is logged once and
 * ends the output.
 */
struct kr_jsonl {
	int fd;
	int failed;
	unsigned long long lines;
	unsigned long long writes;     /* write calls made, for tests and stats */
	size_t len;                    /* bytes gathered in buf */
	char buf[KR_JSONL_BUFFER_BYTES];
};

void kr_jsonl_init(struct kr_jsonl *j, int fd);
void kr_jsonl_event(void *arg, const struct kr_event *ev);
/* Writes what is gathered. Returns 0, or KR_EIO (also once the output has failed). */
int kr_jsonl_flush(void *arg);

#endif /* KR_SINK_H */
