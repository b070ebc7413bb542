/*
 * Where changes go. The reflector hands every change to each sink as a
 * kr_event; the object bytes are a view (into the store's arena or the
 * event being processed) valid only during the call. Sinks implement one
 * small interface; the library user's callbacks are a sink too.
 */
#ifndef KR_SINK_H
#define KR_SINK_H

#include <stddef.h>

#include "kreflect_config.h"

enum kr_event_type {
	KR_EV_ADDED,
	KR_EV_MODIFIED,
	KR_EV_DELETED,
	KR_EV_RESYNC,                  /* periodic re-delivery of a held object (--resync) */
	KR_EV_SYNCED,                  /* a (re)list of one resource completed */
};

struct kr_event {
	enum kr_event_type type;
	int res;                       /* resource index */
	const char *resource;          /* "configmaps", "deployments.apps" */
	const char *key;               /* "namespace/name"; NULL for SYNCED */
	const char *rv;                /* resourceVersion of the object or of the list */
	const char *obj;               /* object JSON; NULL for SYNCED */
	size_t objlen;
	size_t count;                  /* SYNCED: objects of the resource now held */
	int partial;                   /* SYNCED: some objects could not be read; the
					  mirror kept their old state, so nothing may be
					  concluded from their absence */
	int restored;                  /* ADDED: replayed from the state directory at start
					  (the sinks had it before the restart); SYNCED: the
					  mirror is the restored one, not yet confirmed by
					  the server ("state":"restored" rather than "live") */
	int warm;                      /* SYNCED: no list preceded it, the sinks already hold
					  every object (restored, or resumed by a watch from
					  the saved resourceVersion): nothing to notify */
};

struct kr_sink {
	/* Called for every event, in order. Must not call back into the reflector. */
	void (*event)(void *arg, const struct kr_event *ev);
	void *arg;
};

/* The name of an event type as printed ("ADDED"). */
const char *kr_event_name(enum kr_event_type t);

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
