/*
 * The reflector: client-go's list/watch state machine (src/README.md "The reflector")
 * for every configured resource at once, on the one loop, feeding the store
 * and the sinks.
 *
 * Per resource: watch-list first (sendInitialEvents, ended by the annotated
 * bookmark), else a paginated LIST; then a watch with bookmarks and a random
 * timeoutSeconds in [300, 600); 410 -> relist at the last RV, then at "";
 * 429/503 with Retry-After -> wait and retry; clean end -> re-watch at once;
 * very short watch -> backoff and relist; client-go's jittered backoff.
 * Deliberate improvements: a deadline for the initial-events-end bookmark
 * (then LIST), watch-list refusals remembered for the server, re-watch (not
 * relist) after a connection failure, an adaptive read-idle deadline.
 */
#ifndef KR_REFLECTOR_H
#define KR_REFLECTOR_H

#include <stdint.h>

#include "auth.h"
#include "backoff.h"
#include "cadence.h"
#include "conn.h"
#include "inflate.h"
#include "json.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "loop.h"
#include "resource.h"
#include "sink.h"
#include "store.h"

#ifndef KR_MAX_SINKS
/* Bytes to frame one bookmark, or the first bytes of an object to name it, with no arena left. */
#define KR_SPARE_BYTES 2048
#define KR_MAX_SINKS 7             /* main's six outputs, and one for a library caller */
#endif

struct kr_reflect;

struct kr_reflector_opts {
	enum kr_watch_list_mode watch_list;
	int page_size;                 /* client-go's 500 when not forced */
	int page_size_forced;          /* --page-size given: every list uses it */
	int resync_ms;                 /* 0: off */
	int keep_managed_fields;
	int initial_events_timeout_ms; /* quiet time allowed before the end bookmark */
	int idle_default_ms;           /* read-idle deadline before the bookmark cadence is
					  known, and its ceiling (cadence.h) */
	int min_watch_timeout_s;       /* timeoutSeconds in [min, 2*min) */
	int once;                      /* stop the loop after every resource synced once */
	int gzip;                      /* ask for gzip LIST bodies (default 1; watches never) */
};

/* Why a watch ended and was started again, counted per resource for /metrics. */
enum kr_restart {
	KR_RS_CLOSED,                  /* a clean end (timeoutSeconds) or a dropped stream */
	KR_RS_EXPIRED,                 /* ERROR 410: relist */
	KR_RS_ERROR_EVENT,             /* another ERROR event */
	KR_RS_HTTP_ERROR,              /* the watch request was refused (4xx/5xx) */
	KR_RS_THROTTLED,               /* 429, Retry-After, 401/403 */
	KR_RS_STREAM_ERROR,            /* broken framing, chunking or JSON */
	KR_RS_CONNECTION,              /* no answer: refused, unreachable, TLS */
	KR_RS_VERY_SHORT,              /* under a second with no events */
	KR_RS_NOT_HELD,                /* an event could not be held, or room came while
					  partial (the room timer): relist */
	KR_RS_N
};

enum kr_phase {
	KR_PH_IDLE,                    /* waiting (backoff, Retry-After) or not started */
	KR_PH_WATCHLIST,               /* watch-list: initial events streaming */
	KR_PH_LIST,                    /* paginated LIST */
	KR_PH_WATCH,                   /* watching */
};

/*
 * The name of an object too large to hold, read from its first bytes while
 * they were in the tail (so that the tail is free for others before its end).
 */
struct kr_skipped_name {
	int state;                     /* 0: not read yet, 1: named, -1: could not be named */
	int deleted;                   /* a DELETED event */
	size_t have;                   /* bytes it was read from */
	size_t keylen;
	char key[KR_KEY_MAX];
	char rv[KR_RV_MAX];
	char uid[KR_RV_MAX];
};

/* One resource's reflector. */
struct kr_reflector {
	struct kr_reflect *top;
	int index;
	struct kr_resource res;
	char path[512];
	struct kr_conn conn;
	struct kr_timer wait;          /* backoff / Retry-After before the next request */
	struct kr_timer deadline;      /* initial-events-end bookmark deadline */
	struct kr_timer resync;
	struct kr_backoff backoff;
	enum kr_phase phase;
	void (*after_wait)(struct kr_reflector *r);

	/* client-go's state */
	char last_rv[KR_RV_MAX];
	int rv_unavailable;
	int applied;                   /* objects this sync attempt put out before it completed: a
					  list's items (its pages, its full retry), a watch-list's
					  events before its end bookmark */
	int paginated_result;

	/*
	 * The sync attempt in progress: a list's items add up over its pages, so
	 * these outlive one request; start_list, the pager's full list and each
	 * watch or watch-list request reset them (new_attempt); gen moves on with
	 * each list and watch-list.
	 */
	int skipped;                   /* items/events that could not be parsed or held */
	int skipped_known;             /* of them, named but not indexed (no room) */
	int skipped_arena;             /* of those, for want of arena bytes (the index had a slot) */
	uint32_t gen;                  /* seen mark of the current (re)list */
	/* The list in progress, across its pages and retries: reset as a whole by start_list. */
	struct kr_list_state {
		char req_rv[KR_RV_MAX];        /* the RV asked for on its first page */
		int has_rv;                    /* resourceVersion sent ("" is not the same as absent) */
		int limit;                     /* 0: no limit */
		int full_retry;                /* the pager's one full list after an expired continue */
		int expired_retried;           /* the RV="" retry after 410/TooLarge was made */
		int pages;
		char rv[KR_RV_MAX];            /* RV of the first page */
		char continue_token[KR_JSON_CONTINUE_MAX];
	} list;
	/*
	 * Across lists: the resource that holds the shared inflater keeps it while
	 * it is listing (list_gzip); a relist after a broken gzip list
	 * compares what it left, until a list completes.
	 */
	int gzip_list;                 /* the last list request asked for gzip */
	int list_verify;               /* relist after a broken gzip list: compare unchanged items */

	/*
	 * Across the requests of one cycle: the 401 retry is one request more, the
	 * Retry-After count is the same request's (reset by each new list, watch
	 * and cycle).
	 */
	int auth_retried;              /* a 401 was already retried with a new token */
	int retry_after_count;
	/* Across requests: when the last body bytes came, for the health report and the deadlines. */
	kr_ms_t body_at;
	int tail_waiting;              /* holding its bytes back until the tail is free */
	struct kr_timer tail_wait;     /* when to look at the tail again */
	struct kr_timer room;          /* relist after a partial sync that left room, or a
					  delete while partial (on_room) */

	/*
	 * The request and response in progress: reset as a whole (zeroed) by
	 * request() before each request goes out; nothing here outlives it.
	 */
	struct kr_req_state {
		int status;
		unsigned long auth_gen;        /* token reloads when the request was sent */
		long retry_after_s;
		int stream_error;              /* the body broke framing or JSON */
		int tail_lost;                 /* ended: another resource took the tail mid-object */
		int error_event;               /* an ERROR event arrived: its Status below */
		int err_code;
		char err_reason[64];
		char err_message[256];
		int err_too_large;             /* a cause of type ResourceVersionTooLarge */
		int list_complete;             /* the items framer saw the end of the list object */
		int bookmark_seen;             /* the initial-events-end bookmark (watch-list) */
		kr_ms_t watch_start;           /* when a watch or watch-list request went out */
		unsigned long events;          /* events in this watch, items in this list page */
		int propagate;                 /* ADDED events move last_rv */
		kr_ms_t last_bookmark;         /* the last bookmark of this stream, 0: none yet */
		struct kr_json_framer framer;
		struct kr_json_items items;
		char *scratch;
		size_t scratch_cap;
		size_t scratch_used;           /* the store's tail (used, compactions) when named */
		unsigned long scratch_compactions;
		int scratch_moved;             /* renamed mid-object: the object in progress is lost */
		struct kr_skipped_name skip;   /* the object in progress, once it outgrew its space */
	} req;

	/* progress and counters */
	int synced;                    /* a complete (re)list has happened */
	int partial;                   /* the mirror lacks objects the server has (see
					  kr_reflector_held): the last sync could not read or
					  index some, or some are present but not held */
	int unindexed;                 /* objects the last sync named but could not index */
	int unread;                    /* objects the last sync could not even name */
	int synced_partial;            /* the last SYNCED said partial: a delete relists (on_room)
					  until one says whole */
	enum kr_health told_state;      /* the last state given to top->on_state */
	int listing;                   /* a (re)list is under way: the store is a mix of two lists */
	int restored;                  /* started from a state snapshot, not yet confirmed live */
	int restored_synced;           /* the restored mirror counts as synced if the server
					  does not answer (--max-stale) */
	unsigned long lists, watch_lists, watches, relists, errors;
	unsigned long restarts[KR_RS_N]; /* watches ended, by reason */
	unsigned long expired;         /* 410 Gone/Expired: answers and ERROR events */
	/* the shared tail: bytes held back for another's object, turns given at
	 * an object boundary, stalled objects cut, own objects read again */
	unsigned long tail_waits, tail_yields, tail_cuts, tail_rereads;
	kr_ms_t cycle_start;
	struct {                       /* the last failure, as data (kr_status, kr_state_change) */
		enum kr_failure cls;
		int http_status;
		char status_reason[64];
	} failure;
	unsigned long failures[KR_FAIL_N]; /* backoffs by class, for /metrics */
};

/* Everything the reflectors share: loop, store, sinks, connection template. */
struct kr_reflect {
	struct kr_loop *loop;
	struct kr_store *store;
	struct kr_sink sinks[KR_MAX_SINKS];
	int nsinks;
	struct kr_reflector_opts opts;
	struct kr_conn_cfg conn_cfg;
	struct kr_auth *auth;          /* bearer token (re-read from its file), or NULL */
	int watch_list_unsupported;    /* remembered for this server */
	int gzip_broken;               /* a gzip list failed to inflate: no more gzip (remembered) */
	struct kr_reflector *gzip_user; /* the reflector whose list uses gz */
	/* One inflater for all: one gzip list at a time, the others list plain. */
#if KR_WITH_GZIP
	struct kr_inflate gz;
#endif
	struct kr_cadence cadence;     /* this server's bookmark cadence: kr_cadence_get/set */
	struct kr_reflector *tail_user; /* the last to name the store's free tail */
	struct kr_rand rand;
	struct kr_reflector *refl;     /* caller-owned array */
	int nrefl;
	int synced_count;              /* resources synced at least once */
	/* State changes (kreflect.h's kr_state_change), for the library's callback. */
	void (*on_state)(void *arg, const struct kr_state_change *st);
	void *state_arg;
	kr_json_tok toks[KR_JSON_TOKENS];
	/*
	 * Where events and items are framed when the store's free tail is smaller:
	 * a bookmark, or the name of an object that will not be held, never needs
	 * arena bytes to be read.
	 */
	char spare[KR_SPARE_BYTES];
};

/* Defaults: watch-list auto, pages of 500, 30 s bookmark quiet deadline, ... */
void kr_reflector_opts_default(struct kr_reflector_opts *o);

/*
 * Sets up top over caller-owned storage: refl[0..n) get resources res[0..n).
 * Returns 0 or a negative KR_E code (path too long, loop full).
 */
int kr_reflect_init(struct kr_reflect *top, struct kr_loop *loop, struct kr_store *store,
		    const struct kr_conn_cfg *conn_cfg, const struct kr_reflector_opts *opts,
		    struct kr_reflector *refl, const struct kr_resource *res, int n);

/* Adds a sink (events in order to every sink). Returns 0 or KR_ENOSPC. */
int kr_reflect_add_sink(struct kr_reflect *top, const struct kr_sink *sink);

/*
 * Resource i starts from a restored mirror (already in the store) valid at
 * rv: kr_reflect_start replays it to the sinks as restored ADDED events and
 * watches from rv, with no list unless the server answers 410 (with
 * opts.once it lists, reconciling against the restored mirror). With
 * counts_as_synced the restored mirror is announced as synced when the
 * server cannot be reached (offline start); else only when it answers.
 */
void kr_reflect_restore(struct kr_reflect *top, int i, const char *rv, int64_t bookmark_gap_ms,
			int counts_as_synced);

/* Starts every reflector; the loop does the rest. */
void kr_reflect_start(struct kr_reflect *top);

/* Stops every reflector and closes their connections (no more events). */
void kr_reflect_stop(struct kr_reflect *top);

/*
 * Nonzero when every resource has completed a sync; 2 if also nothing is
 * degraded (no mirror partial, no put refused).
 */
int kr_reflect_ready(const struct kr_reflect *top);

/*
 * Objects of r's resource the mirror holds; *present (may be NULL) gets
 * those the server has as far as the last sync and the events since showed:
 * the held ones, those present but not held (arena full, the resource's
 * share used, larger than the space for one) and those the sync named but
 * could not index. The mirror is partial when the two differ, or when some
 * objects could not even be named (r->unread).
 */
size_t kr_reflector_held(const struct kr_reflector *r, size_t *present);

/*
 * How a list, a watch-list or a watch request ended, read once
 * (kr_reflector_outcome) in this order: the first that holds. The step that
 * follows is in the decision table kr_reflect_rules (reflector.c;
 * src/README.md "How a request ends").
 */
enum kr_outcome {
	KR_OC_MOVED,                   /* another resource took the tail mid-object */
	KR_OC_NO_ANSWER,               /* no response head: refused, unreachable, TLS, DNS */
	KR_OC_BAD_HEAD,                /* no response head: a malformed one (KR_EPROTO) */
	KR_OC_PAGE,                    /* list: a whole page whose continue token asks for more */
	KR_OC_COMPLETE,                /* list: its last page, whole */
	KR_OC_ENDED_EARLY,             /* list: a 200 body that ended before the list object closed */
	/* (list: an error after the head, or a 200 body that broke, is STREAM_ERROR here) */
	KR_OC_RETRY_AFTER,             /* 429 or 5xx with Retry-After, retries left */
	KR_OC_TOKEN_EXPIRED,           /* list: 410 Expired on a continue token, the full list not yet made */
	KR_OC_THROTTLED,               /* HTTP 429 */
	KR_OC_REFUSED,                 /* HTTP 401 (the token re-read did not help) or 403 */
	KR_OC_GONE,                    /* another 4xx/5xx whose Status says Expired/Gone (list:
					  checked before 429/401/403, on the first page, once) */
	KR_OC_TOO_LARGE,               /* another 4xx/5xx: ResourceVersionTooLarge (the same) */
	KR_OC_REJECTED,                /* HTTP 400, 405 or 422: the server cannot do this */
	KR_OC_HTTP_ERROR,              /* any other HTTP status */
	KR_OC_ERROR_429,               /* an ERROR event, code 429 */
	KR_OC_ERROR_GONE,              /* an ERROR event, Expired/Gone/410 */
	KR_OC_ERROR_TOO_LARGE,         /* an ERROR event, ResourceVersionTooLarge */
	KR_OC_ERROR_NO_PROGRESS,       /* an ERROR event naming RequestWatchProgress */
	KR_OC_ERROR_EVENT,             /* any other ERROR event */
	KR_OC_STREAM_ERROR,            /* broken framing, chunking or JSON in the body */
	KR_OC_NOT_HELD,                /* watch: an event could not be held (r->skipped) */
	KR_OC_VERY_SHORT,              /* under a second and no event */
	KR_OC_CLOSED,                  /* a clean end (timeoutSeconds) or a dropped stream */
	KR_OC_N
};

/* What follows an outcome. */
enum kr_step {
	KR_STEP_AGAIN,                 /* the same request at once (re-watch, or watch-list again) */
	KR_STEP_BACKOFF_AGAIN,         /* a backoff step, then the same request (same RV) */
	KR_STEP_RETRY_AFTER,           /* the same request after the server's Retry-After */
	KR_STEP_LATEST,                /* the same request again at once at RV "" (the latest):
					  watch-list, or a list's first page (once a list) */
	KR_STEP_BACKOFF_RELIST,        /* a backoff step, then a new ListAndWatch at the last RV */
	KR_STEP_FALLBACK,              /* a LIST instead, watch-list tried again next time */
	KR_STEP_FALLBACK_FOR_GOOD,     /* a LIST instead, and paginated lists from now on */
	KR_STEP_NEXT_PAGE,             /* the list's next page, with its continue token */
	KR_STEP_SYNCED,                /* the list is complete: synced, then a watch from its RV */
	KR_STEP_FULL_LIST,             /* the pager's full list at the original RV, no limit */
	KR_STEP_N
};

/* One row of the decision table: in phase, after outcome, do step. */
struct kr_rule {
	unsigned char phase;           /* KR_PH_LIST, KR_PH_WATCHLIST or KR_PH_WATCH */
	unsigned char outcome;         /* enum kr_outcome */
	unsigned char step;            /* enum kr_step */
	signed char restart;           /* enum kr_restart counted, or -1 */
	unsigned char flags;           /* KR_RULE_... */
	unsigned char why;             /* the backoff's reason, a text of reflector.c's
					  rule_texts (0: the status, in words) */
	unsigned char warn;            /* a text logged as a warning first, or 0 (with
					  KR_RULE_LIST_FAILED: what failed, when no reason) */
};

#define KR_RULE_ERRORS 1u              /* counts in r->errors */
#define KR_RULE_NO_ANSWER 2u           /* logs the connection's reason, unreachable() */
#define KR_RULE_EXPIRED 4u             /* counts in r->expired if the Status says expired */
#define KR_RULE_EXPIRED_410 8u         /* counts in r->expired if the HTTP status is 410 */
#define KR_RULE_WARN_WHY 16u           /* logs the why as a warning */
#define KR_RULE_LIST_FAILED 32u        /* logs "list failed: " and what failed (the connection's
					  reason, the warn text, or the Status); unreachable() with
					  no answer; the next list is the latest if this one put
					  objects out */

extern const struct kr_rule kr_reflect_rules[];
extern const int kr_reflect_nrules;

/* How r's request ended (err and reason as on_end got them), at now. */
enum kr_outcome kr_reflector_outcome(const struct kr_reflector *r, int err, kr_ms_t now);

/* The row for phase and outcome, or NULL if there is none. */
const struct kr_rule *kr_reflect_rule(int phase, enum kr_outcome o);

/* Classifies the response or connection that just failed into r->failure (src/failure.c). */
void kr_reflector_classify_failure(struct kr_reflector *r);

#endif /* KR_REFLECTOR_H */
