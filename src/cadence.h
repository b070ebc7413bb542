/*
 * The bookmark cadence of one API server, and the read-idle deadline of its
 * watches that follows from it. HTTP/1.1 has no ping: a watch that brings no
 * byte for longer than the server's bookmarks allow is dead (a stalled
 * server, a half-open link) and is dropped and re-watched from its last
 * resourceVersion.
 *
 * The cadence is the longest gap seen between two bookmarks on one stream of
 * this server, whatever the resource: kube-apiserver bookmarks every watcher
 * that asks about once a minute, the same for all. It is kept across
 * re-watches, so a fresh watch of a server already seen gets the short
 * deadline at once, and can be read and restored (kr_cadence_get/set) to keep
 * it across restarts.
 *
 * Deadline: while the cadence is unknown, the ceiling (--watch-idle-timeout,
 * 65 s by default: a 60 s cadence plus a margin); once known, twice the gap
 * plus 5 s (one bookmark may be late or lost), never below 30 s (or the
 * ceiling, if lower) and never above the ceiling.
 */
#ifndef KR_CADENCE_H
#define KR_CADENCE_H

#include <stdint.h>

#define KR_CADENCE_FLOOR_MS 30000      /* the learnt deadline never drops below this */
#define KR_CADENCE_MARGIN_MS 5000      /* added to twice the gap */
#define KR_CADENCE_MAX_MS 86400000     /* a gap longer than a day is not a cadence */

struct kr_cadence {
	int64_t gap_ms;                /* longest gap seen; 0 = unknown */
	int ceiling_ms;                /* the deadline while unknown, and its upper bound */
};

/* Starts unknown, with the deadline ceiling_ms (> 0) until a gap is seen. */
void kr_cadence_init(struct kr_cadence *c, int ceiling_ms);

/*
 * Records a gap of gap_ms between two bookmarks of one stream. Returns 1 if
 * the deadline changed (watches in progress should take it), else 0; a gap
 * <= 0 or above KR_CADENCE_MAX_MS is ignored.
 */
int kr_cadence_saw_gap(struct kr_cadence *c, int64_t gap_ms);

/* The read-idle deadline in ms for a watch of this server, per the rules above. */
int kr_cadence_idle_ms(const struct kr_cadence *c);

/* The cadence learnt so far in ms (0 = unknown), e.g. to save it. */
int64_t kr_cadence_get(const struct kr_cadence *c);

/*
 * Restores a cadence saved earlier (0 forgets it). Returns 0, or KR_EINVAL
 * (nothing changed) if gap_ms is negative or above KR_CADENCE_MAX_MS.
 * Watches already open keep their deadline until their next bookmark.
 */
int kr_cadence_set(struct kr_cadence *c, int64_t gap_ms);

#endif /* KR_CADENCE_H */
