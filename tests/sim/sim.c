/*
 * The convergence property test: kreflect's reflector, store, connection,
 * HTTP and JSON code, unmodified, run against the simulated port (port/sim/)
 * for one seed after another. Each seed builds a world (server settings,
 * initial objects, which resources kreflect mirrors and how), runs a random
 * schedule of writes and faults for simulated hours, then a quiet period, and
 * checks:
 *
 *   (1) the mirror equals the model after 8 quiet minutes and at the end:
 *       keys, resourceVersions, object bytes
 *       (an object may be present but not held only when the seed chose an
 *       arena too small for everything);
 *   (2) the event stream, folded from empty, equals the same state, and every
 *       event carries the exact bytes of the server's version it names;
 *   (3) no DELETED without a prior ADDED, no ADDED for a key already held,
 *       no event for an unchanged object (after a relist or otherwise), and
 *       every SYNCED counts what the stream holds;
 *   (4) after a failure client-go backs off from, the next attempt waits at
 *       least what client-go's backoff would (0.8 s doubling to 30 s, reset
 *       only after 2 minutes; below), and during an outage no reflector makes
 *       more than N attempts in any minute (N from the same backoff);
 *   (5) the arena's live bytes return to the value the final state implies
 *       and stay there; compaction leaves exactly that; the store checks out;
 *   (6) with a state directory on the simulated flash (half the seeds), the
 *       client is killed (a power cut, at a random file system call or
 *       between them) or stopped cleanly 1-3 times and a fresh one started
 *       in the same memory over the same flash and server; at each start
 *       the restored mirror is exactly the server's state at its saved
 *       resourceVersion (never half a snapshot, never one written for
 *       another configuration), restored events come only then, and every
 *       later event, folded onto the restored mirror, obeys (2) and (3)
 *       (no ADDED for a restored object, no version older than the one
 *       held); in calm weather a restart whose saved resourceVersion is
 *       still served sends no LIST or watch-list, and with no write to its
 *       selection since that resourceVersion no change event; with the server unreachable at restart
 *       and max_stale_s on, a young enough mirror is reported synced,
 *       restored, and no other mirror is; (1)-(5) hold after the last one;
 *
 * and liveness: every resource synced and watching again, no descriptor
 * leaked, no connect to an address no lookup returned, no request the server
 * rejects as malformed, the loop never spinning or waiting forever.
 *
 *   sim [--seeds N] [--first S] [--no-regress]
 *                               the directed regressions (regress.c), then
 *                               seeds S .. S+N-1 (default 1000 from 1)
 *   sim --seed S -v             one seed with a full trace on stderr
 *   sim --regress NAME -v       one regression scenario, traced
 *
 * A failing seed prints the property, what differed, and the command that
 * reproduces it (with this binary: another build runs another schedule for
 * the same seed). The last line is "N passed, N failed", one per seed or
 * scenario.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "kreflect.h"
#include "kreflect_config.h"
#include "log.h"
#include "loop.h"
#include "reflector.h"
#include "resource.h"
#include "driver.h"
#include "sim/sim.h"
#include "sink.h"
#include "state.h"
#include "store.h"
#include "tls.h"

/*
 * client-go's reflector backoff (src/README.md "Constants"), written out here rather
 * than taken from src/backoff.h, so that a wrong constant there fails
 * property (4) instead of moving its bounds: the k-th step after a reset
 * waits min(0.8 s * 2^(k-1), 30 s) times a jitter factor in [1, 2), and a
 * step resets to 0.8 s only when more than 2 minutes passed since the last
 * reset (or since the start).
 */
#define CG_BACKOFF_INITIAL_MS 800
#define CG_BACKOFF_CAP_MS 30000
#define CG_BACKOFF_RESET_MS 120000
/* How long after the failure the sim saw kreflect may take its step: the
 * doubling is checked only this much inside the 2 minutes. */
#define STEP_SLACK_MS 10000

#define MAX_RES SIM_MAX_RES
#define MINUTE_MS 60000
#define OUTAGE_RING 256

/*
 * kreflect runs through its public API (kreflect.h), as a library user's
 * program would: a client in this memory, driven by kr_client_fds and
 * kr_client_process from the loop below. The checks read its insides
 * through client.h.
 */
#define SIM_MEMORY (KR_ARENA_BYTES + 2u * 1024u * 1024u)
static char mem[SIM_MEMORY] __attribute__((aligned(16)));
static struct kr_client *client;
static struct kr_resource resources[KR_MAX_RESOURCES];
static struct kr_reflect *top;
static struct kr_store *store;
static char expect_buf[KR_SIM_OBJECT_MAX];

/* The stream's view of one object, folded from the events. */
struct folded {
	int present;
	int restored;                  /* as the state directory restored it (not changed since) */
	char rv[KR_RV_MAX];
	uint64_t hash;
	size_t len;
};

struct attempt_log {
	kr_ms_t failed_at;             /* the last failure that requires a wait; -1 none */
	int asked;                     /* it carried Retry-After */
	char failure[96];
	kr_ms_t reset_at;              /* the backoff's last reset known for certain; -1 none */
	int steps;                     /* steps seen since it */
	kr_ms_t outage_t[OUTAGE_RING]; /* attempts during the current storm */
	unsigned long outage_storm[OUTAGE_RING];
	int n_outage;
};

static struct {
	uint64_t seed;
	int verbose;
	struct scenario sc;
	struct folded fold[MAX_RES][KR_SIM_SLOTS];
	struct attempt_log att[MAX_RES];
	int failed;
	int property;
	char why[600];
	kr_ms_t last_now, start_at;
	unsigned long same_time;
	unsigned long events, attempts, outage_attempts, compactions;
	unsigned long waits, waits_doubled, waits_capped;
	int max_per_minute;
	/* restarts (property 6) */
	struct kr_config cfg;
	int incarnation;               /* 0: the first start; n: after the n-th restart */
	const struct restart *rs;      /* the last restart, NULL before any */
	int starting;                  /* inside kr_client_start: restored ADDED events come now */
	int watch_power;               /* run_until stops when the flash loses power */
	kr_ms_t window_end;            /* the restart's calm or outage window ends then (0: none) */
	int expect_watch[MAX_RES];     /* calm and the saved RV still served: no LIST or watch-list */
	int expect_silent[MAX_RES];    /* and nothing changed while down: no change event either */
	int expect_offline[MAX_RES];   /* outage: 1 must sync restored (max-stale), 0 must not sync, -1 no check */
	int synced_restored[MAX_RES];
	char restored_rv[MAX_RES][KR_RV_MAX];
	struct sim_restarts run;       /* this run's, for the regressions' checks */
	unsigned configs_ran;          /* bit 1 << keep_managed_fields: configurations started so far */
	int config_ran_before;         /* this start's configuration ran before (its snapshot may be there) */
} t;

const struct sim_restarts *sim_restarts(void)
{
	return &t.run;
}

/* Totals over all seeds. */
/* This binary, for the reproduce lines: another build runs another schedule for a seed. */
static const char *self = "build/sim/sim";

static struct {
	unsigned long seeds, regressions, passed, failed, writes, storms, events, attempts, compactions, not_held;
	unsigned long tail_waits, tail_yields, tail_cuts, tail_rereads;
	unsigned long waits, waits_doubled, waits_capped;
	unsigned long state_seeds, restarts, by_how[4], restored_resources, restored_objects, cold_after_restart,
		      warm_checked, silent_checked, offline_synced, other_config, compacted;
	unsigned long fs_failures, fs_slow;
	double sim_hours;
	int shown;
} total;

static const char *const property_names[] = {
	"liveness", "(1) mirror == model", "(2) folded event stream == model",
	"(3) event sanity", "(4) backoff and request rate", "(5) memory returns to its steady value",
	"(6) restarts from the state directory",
};

static const char *const how_names[] = { "crash (power cut)", "kill", "power cut mid-write", "clean stop" };

__attribute__((format(printf, 2, 3)))
static void violation(int property, const char *fmt, ...)
{
	va_list ap;

	if (t.failed)
		return;
	t.failed = 1;
	t.property = property;
	va_start(ap, fmt);
	vsnprintf(t.why, sizeof(t.why), fmt, ap);
	va_end(ap);
	kr_sim_trace("PROPERTY FAILED: %s: %s", property_names[property], t.why);
}

static uint64_t fnv(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ull;
	return h;
}

static int form(void)
{
	return t.sc.opts.keep_managed_fields ? KR_SIM_FULL : KR_SIM_CANON;
}

/* The bytes kreflect should hold for version v of (type, slot), in expect_buf. */
static size_t expected(int type, int slot, const struct kr_sim_ver *v)
{
	return kr_sim_object_json(expect_buf, sizeof(expect_buf), type, slot, v, form());
}

static int same_bytes(int type, int slot, const struct kr_sim_ver *v, const char *obj, size_t len)
{
	size_t n = expected(type, slot, v);

	return n == len && memcmp(expect_buf, obj, n) == 0;
}

/* --- the sink: property (2) and (3) as events arrive ------------------------------------------- */

/* Which version of the server an event's object must be (by its resourceVersion). */
static int check_object(int i, int slot, const struct kr_event *ev)
{
	int type = t.sc.flt[i].type;
	const struct kr_sim_event *e;
	struct kr_sim_ver v;
	char *end;
	unsigned long long rv = strtoull(ev->rv, &end, 10);

	if (*end || !(e = kr_sim_event_at(rv)) || e->type != type || e->slot != slot) {
		violation(3, "%s %s %s: resourceVersion %s is not a write of this object (%zu bytes: %.300s)",
			  kr_event_name(ev->type), kr_sim_type_plural(type), ev->key, ev->rv, ev->objlen,
			  ev->obj ? ev->obj : "");
		return -1;
	}
	if (ev->type != KR_EV_DELETED || e->etype != KR_SIM_DELETED) {
		if (e->etype != KR_SIM_DELETED && same_bytes(type, slot, &e->cur, ev->obj, ev->objlen))
			return 0;
		/* A DELETED for an object that left the selection: its last state, the write's rv. */
		v = e->prev;
		v.rv = rv;
		if (ev->type == KR_EV_DELETED && e->prev.present && same_bytes(type, slot, &v, ev->obj, ev->objlen))
			return 0;
	} else if (same_bytes(type, slot, &e->cur, ev->obj, ev->objlen)) {
		return 0;
	}
	violation(2, "%s %s %s rv %s: the object's bytes are not the server's (%zu bytes: %.120s)",
		  kr_event_name(ev->type), kr_sim_type_plural(type), ev->key, ev->rv, ev->objlen, ev->obj);
	return -1;
}

static void on_event(void *arg, const struct kr_event *ev)
{
	int i = ev->res, type, slot, n, nh, k;
	struct folded *f;

	(void)arg;
	t.events++;
	if (i < 0 || i >= t.sc.nres) {
		violation(3, "an event for resource %d, which is not configured", i);
		return;
	}
	type = t.sc.flt[i].type;
	if (ev->type == KR_EV_SYNCED) {
		for (n = 0, nh = 0, k = 0; k < KR_SIM_SLOTS; k++) {
			struct kr_store_view v;
			const char *key = kr_sim_key(type, k);
			int not_held = kr_store_get(store, i, key, kr_sim_key_len(type, k), &v) && !v.held;

			/* Present but not held: counted, though the stream was told it is gone. */
			n += t.fold[i][k].present || not_held;
			nh += not_held;
		}
		if ((size_t)n != ev->count)
			violation(3, "SYNCED %s at %s counts %zu objects, the stream holds %d", ev->resource, ev->rv,
				  ev->count, n);
		/* Every object is read and the index never fills here: partial is exactly "some not held". */
		if (ev->partial != (nh > 0))
			violation(3, "SYNCED %s at %s %s partial, with %d objects present but not held",
				  ev->resource, ev->rv, ev->partial ? "is" : "is not", nh);
		if (t.window_end && kr_port_now_ms() < t.window_end && (t.rs->variant & RV_UNREACHABLE)) {
			if (!ev->restored)
				violation(6, "SYNCED %s at %s reported live while the server could not be reached "
					  "(%s since restart %d)", ev->resource, ev->rv, kr_sim_weather_name(t.rs->outage),
					  t.incarnation);
			else if (t.expect_offline[i] != 1)
				violation(6, "SYNCED %s at %s reported restored offline after restart %d, though %s",
					  ev->resource, ev->rv, t.incarnation, t.sc.max_stale_s < 0 ?
					  "max_stale_s is off" : "the snapshot is older than max_stale_s");
		}
		if (ev->restored) {
			t.synced_restored[i] = 1;
			t.run.offline_synced++;
			total.offline_synced++;
		}
		return;
	}
	slot = ev->key ? kr_sim_slot_of(type, ev->key, strlen(ev->key)) : -1;
	if (slot < 0) {
		violation(3, "%s for %s '%s', a key the server never had", kr_event_name(ev->type),
			  kr_sim_type_plural(type), ev->key ? ev->key : "(null)");
		return;
	}
	if (!ev->obj || check_object(i, slot, ev) != 0) {
		if (!ev->obj)
			violation(3, "%s %s without an object", kr_event_name(ev->type), ev->key);
		return;
	}
	f = &t.fold[i][slot];
	if (ev->restored && (ev->type != KR_EV_ADDED || !t.starting)) {
		violation(6, "%s %s %s rv %s marked restored %s", kr_event_name(ev->type), kr_sim_type_plural(type),
			  ev->key, ev->rv, ev->type != KR_EV_ADDED ? "(only ADDED at start may be)"
			  : "after the start (only the state directory's replay at start may be)");
		return;
	}
	if (!ev->restored && ev->type != KR_EV_RESYNC && t.window_end && kr_port_now_ms() < t.window_end &&
	    t.expect_silent[i]) {
		violation(6, "%s %s %s rv %s after restart %d in calm weather, though nothing changed while it "
			  "was down and its saved resourceVersion %s is still served: no change may be reported",
			  kr_event_name(ev->type), kr_sim_type_plural(type), ev->key, ev->rv, t.incarnation,
			  t.restored_rv[i]);
		return;
	}
	switch (ev->type) {
	case KR_EV_ADDED:
		if (f->present && f->restored)
			violation(6, "ADDED %s %s rv %s after restart %d: the restored mirror has it already at rv %s "
				  "(a duplicate ADDED)", kr_sim_type_plural(type), ev->key, ev->rv, t.incarnation, f->rv);
		else if (f->present)
			violation(3, "ADDED %s %s rv %s while the stream holds it at rv %s (no DELETED between)",
				  kr_sim_type_plural(type), ev->key, ev->rv, f->rv);
		else if (f->rv[0] && strtoull(ev->rv, NULL, 10) < strtoull(f->rv, NULL, 10))
			violation(3, "ADDED %s %s rv %s, older than rv %s the stream had before (an old version "
				  "delivered again)", kr_sim_type_plural(type), ev->key, ev->rv, f->rv);
		break;
	case KR_EV_MODIFIED:
		if (!f->present)
			violation(3, "MODIFIED %s %s rv %s, never ADDED", kr_sim_type_plural(type), ev->key, ev->rv);
		else if (strcmp(f->rv, ev->rv) == 0)
			violation(f->restored ? 6 : 3, "MODIFIED %s %s rv %s: an event for an unchanged object%s",
				  kr_sim_type_plural(type), ev->key, ev->rv, f->restored ? " (as restored)" : "");
		else if (strtoull(ev->rv, NULL, 10) < strtoull(f->rv, NULL, 10))
			violation(f->restored ? 6 : 3, "MODIFIED %s %s rv %s, older than rv %s the stream holds%s "
				  "(a change delivered twice, or out of order)", kr_sim_type_plural(type), ev->key, ev->rv,
				  f->rv, f->restored ? " as restored" : "");
		break;
	case KR_EV_DELETED:
		if (!f->present)
			violation(3, "DELETED %s %s rv %s without a prior ADDED", kr_sim_type_plural(type), ev->key, ev->rv);
		f->present = 0;
		f->restored = 0;
		return;
	case KR_EV_RESYNC:
		if (!f->present || strcmp(f->rv, ev->rv) != 0 || f->hash != fnv(ev->obj, ev->objlen))
			violation(3, "RESYNC %s %s rv %s is not the object the stream holds (%s)",
				  kr_sim_type_plural(type), ev->key, ev->rv, f->present ? f->rv : "absent");
		return;
	default:
		violation(3, "an event of unknown type %d", (int)ev->type);
		return;
	}
	f->present = 1;
	f->restored = ev->restored;
	snprintf(f->rv, sizeof(f->rv), "%s", ev->rv);
	f->hash = fnv(ev->obj, ev->objlen);
	f->len = ev->objlen;
}

/* --- observations: property (4) --------------------------------------------------------------- */

/*
 * N, the most attempts a reflector may make in any minute of one outage.
 *
 * In an outage every attempt fails, and every failure is followed by one
 * step of client-go's backoff, whose k-th wait after a reset is at least
 * min(0.8 s * 2^(k-1), 30 s) (jitter only lengthens it). A step resets to
 * 0.8 s only when more than 2 minutes passed since the last reset, so a
 * minute holds at most one reset: at most steps(R) + steps(60 s - R) waits
 * end in it, where steps(T) counts the attempts the lower bounds allow in T
 * starting from a reset. After each wait a reflector makes at most 2
 * attempts before the next wait: a watch-list and, when the server refuses
 * it with a 5xx, the LIST it falls back to (a refused or hanging connect is
 * one attempt). Plus 2 for the start of the outage: a watch that the outage
 * cut is re-watched at once (a dropped stream is not a failure) and that
 * attempt may fall back to a LIST.
 */
/* client-go's un-jittered delay at step k after a reset (k = 0: 0.8 s), doubling to the cap. */
static int64_t cg_delay(int k)
{
	int64_t d = CG_BACKOFF_INITIAL_MS;

	while (k-- > 0 && d < CG_BACKOFF_CAP_MS)
		d *= 2;
	return d < CG_BACKOFF_CAP_MS ? d : CG_BACKOFF_CAP_MS;
}

static int steps_in(int64_t span)
{
	int64_t sum = 0;
	int n = 0;

	while ((sum += cg_delay(n)) <= span)
		n++;
	return n + 1;
}

static int max_attempts_per_minute(void)
{
	int64_t r;
	int best = 0;

	for (r = 0; r <= MINUTE_MS; r += 100) {
		int n = steps_in(r) + steps_in(MINUTE_MS - r);

		if (n > best)
			best = n;
	}
	return 2 * best + 2;
}

/*
 * The least wait client-go's backoff allows after a's last failure.
 *
 * Between two resets every step doubles the delay (to the cap), and a reset
 * comes only more than 2 minutes after the one before. So within 2 minutes
 * of a reset known for certain (the start, or a step whose wait proved it
 * the first after a reset: shorter than 1.6 s), each step the sim sees must
 * wait at least twice the last; steps it cannot see (a stalled object cut, a
 * very short watch) only lengthen what follows. Past those 2 minutes a reset
 * may come at any step, and only the floor holds until a short wait shows
 * one. A failure that asked for a wait with Retry-After may be waited out as
 * asked instead of stepping (client-go's REST layer retries it): it counts
 * as no step and owes the floor (Retry-After is at least 1 s in the sim).
 */
static int in_reset_window(const struct attempt_log *a)
{
	return a->reset_at >= 0 && a->failed_at - a->reset_at <= CG_BACKOFF_RESET_MS - STEP_SLACK_MS;
}

static int64_t least_wait(const struct attempt_log *a)
{
	return a->asked || !in_reset_window(a) ? CG_BACKOFF_INITIAL_MS : cg_delay(a->steps);
}

static void attempt(int owner, const struct kr_sim_obs *o)
{
	struct attempt_log *a = &t.att[owner];
	int64_t least, waited;

	t.attempts++;
	if (a->failed_at < 0)
		return;
	least = least_wait(a);
	waited = o->t - a->failed_at;
	t.waits++;
	t.waits_doubled += least > CG_BACKOFF_INITIAL_MS;
	t.waits_capped += least == CG_BACKOFF_CAP_MS;
	if (waited < least) {
		char step[80] = "its first step";

		if (least > CG_BACKOFF_INITIAL_MS)
			snprintf(step, sizeof(step), "step %d since the reset at %.3f s", a->steps + 1,
				 (double)a->reset_at / 1000.0);
		violation(4, "%s: the next attempt (%s) came %lld ms after '%s' (at %.3f s); client-go waits at "
			  "least %lld ms (%s)", kr_sim_type_plural(t.sc.flt[owner].type), o->what, (long long)waited,
			  a->failure, (double)a->failed_at / 1000.0, (long long)least, step);
	}
	if (!a->asked) {
		if (in_reset_window(a)) {
			a->steps++;
		} else if (waited < 2 * CG_BACKOFF_INITIAL_MS && a->failed_at - t.start_at > CG_BACKOFF_RESET_MS) {
			a->reset_at = a->failed_at;
			a->steps = 1;
		} else {
			a->reset_at = -1;
		}
	}
	a->failed_at = -1;
}

static void failure(int owner, const struct kr_sim_obs *o)
{
	struct attempt_log *a = &t.att[owner];

	a->failed_at = o->t;
	a->asked = o->asked;
	snprintf(a->failure, sizeof(a->failure), "%s", o->what);
}

/*
 * The backoff model of property (4) on made-up histories, so that a checker
 * which can no longer fail is caught: each is a list of waits (ms) after
 * failures a second apart; asked marks a failure with Retry-After. Returns
 * 0 if the model judged every history as client-go would.
 */
static int backoff_model_check(void)
{
	static const struct {
		const char *what;
		int violates;
		int64_t start;            /* first failure, ms after the start */
		int asked_at;             /* index of a Retry-After failure, -1 none */
		int64_t waits[9];         /* 0 ends */
	} h[] = {
		{ "client-go's own steps", 0, 1000, -1, { 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000 } },
		{ "no doubling", 1, 1000, -1, { 800, 1000 } },
		{ "capped at 10 s", 1, 1000, -1, { 800, 1600, 3200, 6400, 10000 } },
		{ "reset after 30 s (its 1.2 s wait)", 1, 1000, -1, { 800, 1600, 3200, 6400, 12800, 25600, 1200 } },
		{ "Retry-After: 1 waited as asked, no step", 0, 1000, 2, { 800, 1600, 1000, 3200, 6400 } },
		{ "a reset seen at 130 s, then no doubling", 1, 130000, -1, { 900, 1000 } },
		{ "no reset known: a 0.9 s wait may be a reset", 0, 200000, -1, { 25600, 900 } },
	};
	size_t i;
	int wrong = 0;

	for (i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		struct kr_sim_obs o;
		int k;

		memset(&t.att[0], 0, sizeof(t.att[0]));
		memset(&o, 0, sizeof(o));
		t.failed = 0;
		t.start_at = 0;
		t.att[0].reset_at = 0;
		t.att[0].failed_at = -1;
		o.t = h[i].start;
		for (k = 0; k < 9 && h[i].waits[k]; k++) {
			o.asked = k == h[i].asked_at;
			snprintf(o.what, sizeof(o.what), "made-up failure %d", k);
			failure(0, &o);
			o.t += h[i].waits[k];
			attempt(0, &o);
			o.t += 1000;
		}
		if (t.failed != h[i].violates) {
			printf("FAIL the backoff model of property (4): history '%s' %s\n", h[i].what,
			       h[i].violates ? "passed" : t.why);
			wrong++;
		}
	}
	t.failed = 0;
	memset(t.att, 0, sizeof(t.att));
	return wrong;
}

static void outage_attempt(int owner, const struct kr_sim_obs *o)
{
	struct attempt_log *a = &t.att[owner];
	unsigned long storm = kr_sim_chaos_storms();
	int i, n = 1;

	t.outage_attempts++;
	for (i = 0; i < a->n_outage; i++)
		n += a->outage_storm[i] == storm && o->t - a->outage_t[i] < MINUTE_MS;
	if (n > t.max_per_minute)
		violation(4, "%s: %d attempts within a minute of an outage (%s), more than %d",
			  kr_sim_type_plural(t.sc.flt[owner].type), n, kr_sim_weather_name(kr_sim_weather()),
			  t.max_per_minute);
	if (a->n_outage == OUTAGE_RING) {
		memmove(a->outage_t, a->outage_t + 1, (OUTAGE_RING - 1) * sizeof(a->outage_t[0]));
		memmove(a->outage_storm, a->outage_storm + 1, (OUTAGE_RING - 1) * sizeof(a->outage_storm[0]));
		a->n_outage--;
	}
	a->outage_t[a->n_outage] = o->t;
	a->outage_storm[a->n_outage] = storm;
	a->n_outage++;
}

static void take_observations(void)
{
	struct kr_sim_obs o;

	while (kr_sim_obs_take(&o)) {
		int owner = o.owner >= 0 ? o.owner : kr_sim_owner(o.fd);

		if (owner < 0 || owner >= t.sc.nres)
			continue;
		switch (o.kind) {
		case KR_SIM_OBS_FAILURE:
			failure(owner, &o);
			/* A connect that failed was an attempt of its own. */
			if (o.outage && o.req_kind < 0 && strstr(o.what, "connect"))
				outage_attempt(owner, &o);
			break;
		case KR_SIM_OBS_BAD_ADDRESS:
			violation(0, "%s: connect to %s, an address no name lookup returned (the server is %s)",
				  kr_sim_type_plural(t.sc.flt[owner].type), o.what, "kube.sim = 10.96.0.1:6443");
			attempt(owner, &o);
			break;
		case KR_SIM_OBS_PROTOCOL:
			violation(0, "%s: kreflect sent a request the server rejects as malformed: %s",
				  kr_sim_type_plural(t.sc.flt[owner].type), o.what);
			break;
		case KR_SIM_OBS_REQUEST:
			if (o.req_kind != 1 && t.window_end && o.t < t.window_end && t.expect_watch[owner])
				violation(6, "%s: a %s request after restart %d in calm weather, though its saved "
					  "resourceVersion %s is still served: a warm restart sends no LIST or "
					  "watch-list (%s)", kr_sim_type_plural(t.sc.flt[owner].type),
					  o.req_kind == 2 ? "watch-list" : "LIST", t.incarnation, t.restored_rv[owner], o.what);
			attempt(owner, &o);
			/* A list's later pages belong to the attempt its first page began. */
			if (o.outage && o.req_kind != 3)
				outage_attempt(owner, &o);
			break;
		default:
			attempt(owner, &o);
			break;
		}
	}
}

static void poll_hook(void *arg)
{
	kr_ms_t now = kr_port_now_ms();
	int i;

	(void)arg;
	if (!top)
		return;
	for (i = 0; i < top->nrefl; i++) {
		if (top->refl[i].conn.src.fd >= 0)
			kr_sim_tag(top->refl[i].conn.src.fd, i);
		if (top->refl[i].conn.resolve_fd >= 0)
			kr_sim_tag(top->refl[i].conn.resolve_fd, i);
	}
	take_observations();
	if (now == t.last_now) {
		if (++t.same_time > 200000)
			violation(0, "the loop spins: 200000 polls without time passing at %.3f s", (double)now / 1000.0);
	} else {
		t.last_now = now;
		t.same_time = 0;
	}
}

/* --- one seed ------------------------------------------------------------------------------------ */

void sim_mirror(struct scenario *sc, int i, int type, int ns, int selop, int tier)
{
	struct kr_sim_filter *f = &sc->flt[i];
	struct kr_resource *res = &resources[i];
	char err[128];

	f->type = type;
	f->ns = kr_sim_type_namespaced(type) ? ns : -1;
	f->selop = selop;
	f->tier = tier;
	if (kr_resource_lookup(kr_sim_type_plural(type), res, err, sizeof(err)) != 0) {
		fprintf(stderr, "sim: %s\n", err);
		exit(2);
	}
	res->all_namespaces = f->ns == -1;
	snprintf(res->ns, sizeof(res->ns), "%s", f->ns == -2 ? "nowhere" : f->ns >= 0 ? kr_sim_namespace(f->ns) : "default");
	res->label_selector[0] = '\0';
	if (selop != KR_SIM_SEL_NONE)
		snprintf(res->label_selector, sizeof(res->label_selector), "tier%s%s",
			 selop == KR_SIM_SEL_EQ ? (tier & 1 ? "=" : "==") : "!=", kr_sim_tier(tier));
	if (sc->nres <= i)
		sc->nres = i + 1;
}

/* The defaults of a run: the build's arena, no chaos, ten quiet minutes. */
static void scenario_defaults(struct scenario *sc)
{
	memset(sc, 0, sizeof(*sc));
	kr_reflector_opts_default(&sc->opts);
	sc->arena_bytes = KR_ARENA_BYTES;
	sc->quiet1_ms = 8 * MINUTE_MS;
	sc->quiet2_ms = 2 * MINUTE_MS;
	sc->max_stale_s = -1;
}

/* Draws for the restart plan: the flash's generator, so the seed's world is chosen as without restarts. */
static int64_t plan_range(int64_t lo, int64_t hi)
{
	return hi <= lo ? lo : lo + (int64_t)(kr_sim_fs_rand() % (uint64_t)(hi - lo + 1));
}

/*
 * Half the seeds keep a state directory on the simulated flash and restart
 * the client 1-3 times during the chaos: killed (a power cut that keeps only
 * what was durable, or some of the rest; or the process killed with the page
 * cache kept), the power cut at a random file system call from then on
 * (mid-snapshot, mid-journal), or stopped cleanly; down for up to 10
 * minutes, sometimes in calm weather (then the warm restart's promises are
 * checked exactly), with the history compacted meanwhile, with the server
 * unreachable at restart (an offline start), or with another configuration.
 */
static void plan_restarts(struct scenario *sc)
{
	int k, j;

	sc->max_stale_s = -1;
	if (plan_range(0, 99) >= 50)
		return;
	sc->state = 1;
	sc->state_interval_s = plan_range(0, 99) < 70 ? 60 : (int)plan_range(2, 120);
	sc->max_stale_s = plan_range(0, 99) < 50 ? -1 : (long)plan_range(60, 7200);
	if (plan_range(0, 99) < 30) {
		sc->fs_faults.fail_permille = (unsigned)plan_range(1, 30);
		sc->fs_faults.slow_sync_permille = (unsigned)plan_range(0, 200);
		sc->fs_faults.slow_sync_max_ms = (int)plan_range(1, 1500);
	}
	sc->nrestarts = (int)plan_range(1, SIM_MAX_RESTARTS - 1);
	for (k = 0; k < sc->nrestarts; k++) {
		struct restart *rs = &sc->restarts[k];
		int64_t r = plan_range(0, 99);

		rs->at = plan_range(MINUTE_MS, sc->chaos_ms - MINUTE_MS);
		rs->how = r < 35 ? RS_CRASH : r < 50 ? RS_KILL : r < 70 ? RS_CUT_MIDWRITE : RS_STOP;
		rs->reboot = (int)plan_range(0, KR_SIM_FS_NMODES - 1);
		rs->cut_after = (long)plan_range(0, 40);
		rs->down_ms = plan_range(0, 99) < 30 ? plan_range(0, 5000) : plan_range(0, 10 * MINUTE_MS);
		r = plan_range(0, 99);
		if (r < 35) {
			rs->variant = RV_CALM;
			rs->window_ms = 3 * MINUTE_MS;
		} else if (r < 55) {
			rs->variant = RV_UNREACHABLE;
			rs->outage = plan_range(0, 99) < 70 ? KR_SIM_REFUSE : KR_SIM_BLACKHOLE;
			rs->window_ms = plan_range(20000, 240000);
		}
		if (plan_range(0, 99) < 20)
			rs->variant |= RV_COMPACT;
		if (plan_range(0, 99) < 8)
			rs->variant |= RV_OTHER_CONFIG;
	}
	/* In time order. */
	for (k = 1; k < sc->nrestarts; k++)
		for (j = k; j > 0 && sc->restarts[j].at < sc->restarts[j - 1].at; j--) {
			struct restart tmp = sc->restarts[j];

			sc->restarts[j] = sc->restarts[j - 1];
			sc->restarts[j - 1] = tmp;
		}
}

static void choose_scenario(struct scenario *sc)
{
	uint64_t r = kr_sim_below(100);
	unsigned focus = 0;
	int i, n = r < 50 ? 1 : r < 80 ? 2 : 3;

	scenario_defaults(sc);
	for (i = 0; i < n; i++) {
		int type = (int)kr_sim_below(KR_SIM_NTYPES), ns = -1, selop;

		if (kr_sim_type_namespaced(type) && kr_sim_chance(600))
			ns = kr_sim_chance(30) ? -2 : (int)kr_sim_below(KR_SIM_NAMESPACES_USED);
		r = kr_sim_below(100);
		selop = r < 60 ? KR_SIM_SEL_NONE : r < 85 ? KR_SIM_SEL_EQ : KR_SIM_SEL_NE;
		sim_mirror(sc, i, type, ns, selop, (int)kr_sim_below(KR_SIM_TIERS));
		focus |= 1u << type;
	}
	kr_sim_chaos_focus(focus);
	r = kr_sim_below(100);
	sc->opts.watch_list = r < 30 ? KR_WL_ON : r < 50 ? KR_WL_OFF : KR_WL_AUTO;
	if (kr_sim_chance(500)) {
		sc->opts.page_size = (int)kr_sim_range(1, 12);
		sc->opts.page_size_forced = kr_sim_chance(500);
	}
	if (kr_sim_chance(300))
		sc->opts.min_watch_timeout_s = (int)kr_sim_range(20, 300);
	if (kr_sim_chance(300))
		sc->opts.initial_events_timeout_ms = (int)kr_sim_range(3000, 30000);
	if (kr_sim_chance(300))
		sc->opts.idle_default_ms = (int)kr_sim_range(20000, 120000);
	if (kr_sim_chance(100))
		sc->opts.resync_ms = (int)kr_sim_range(30000, 600000);
	sc->opts.keep_managed_fields = kr_sim_chance(100);
	sc->auth = kr_sim_chance(400);
	if (sc->auth)
		kr_sim_auth_setup();
	/* The arena: the build's, or one that compacts often, or one too small for everything. */
	r = kr_sim_below(100);
	sc->arena_bytes = r < 55 ? KR_ARENA_BYTES : r < 80 ? (size_t)kr_sim_range(512 * 1024, 2048 * 1024)
			  : (size_t)kr_sim_range(128 * 1024, 512 * 1024);
	sc->chaos_ms = kr_sim_range(20 * MINUTE_MS, 150 * MINUTE_MS);
	plan_restarts(sc);
}

/* One pass of a host's loop around the client: its descriptors out, readiness back in. */
static int host_pass(int max_wait_ms)
{
	struct kr_client_fd fds[KR_CLIENT_MAX_FDS];
	struct kr_pollfd pf[KR_CLIENT_MAX_FDS];
	int i, n, wait;

	n = kr_client_fds(client, fds, KR_CLIENT_MAX_FDS, &wait);
	if (n < 0)
		return n;
	if (wait < 0 || wait > max_wait_ms)
		wait = max_wait_ms;
	for (i = 0; i < n; i++) {
		pf[i].fd = fds[i].fd;
		pf[i].want = (short)((fds[i].events & KR_POLLIN ? KR_POLL_IN : 0) |
				     (fds[i].events & KR_POLLOUT ? KR_POLL_OUT : 0));
		pf[i].got = 0;
	}
	if (kr_port_poll(pf, n, wait) < 0)
		return KR_EIO;
	for (i = 0; i < n; i++)
		fds[i].revents = (short)((pf[i].got & KR_POLL_IN ? KR_POLLIN : 0) |
					 (pf[i].got & KR_POLL_OUT ? KR_POLLOUT : 0) |
					 (pf[i].got & KR_POLL_ERR ? KR_POLLERR : 0));
	return kr_client_process(client, fds, n);
}

/*
 * Runs the loop until virtual time `until`. 0, or -1 when a property failed,
 * or 1 when the flash lost power first (t.watch_power: a cut mid-write).
 */
static int run_until(kr_ms_t until)
{
	while (!t.failed && kr_port_now_ms() < until) {
		kr_ms_t left = until - kr_port_now_ms();

		if (host_pass(left > INT_MAX ? INT_MAX : (int)left) < 0)
			violation(0, "the loop failed at %.3f s: %s", (double)kr_port_now_ms() / 1000.0,
				  kr_port_last_error());
		if (t.watch_power && kr_sim_fs_power_off())
			return t.failed ? -1 : 1;
	}
	return t.failed ? -1 : 0;
}

static size_t steady_bytes(void)
{
	size_t sum = 0;
	int i, slot;

	for (i = 0; i < t.sc.nres; i++) {
		int type = t.sc.flt[i].type;

		for (slot = 0; slot < KR_SIM_SLOTS; slot++) {
			const struct kr_sim_ver *v = kr_sim_current(type, slot);
			char rv[32];

			struct kr_store_view view;
			const char *key = kr_sim_key(type, slot);

			if (!kr_sim_match(&t.sc.flt[i], type, slot, v))
				continue;
			snprintf(rv, sizeof(rv), "%llu", (unsigned long long)v->rv);
			/* Objects present but not held (a small arena) have a record without bytes. */
			sum += KR_STORE_RECORD_SIZE(kr_store_get(store, i, key, strlen(key), &view) && !view.held
						    ? 0 : expected(type, slot, v), strlen(key), strlen(rv), 36);
		}
	}
	return sum;
}

/* Liveness, (1) and (2): checked after 8 quiet minutes (the convergence bound) and at the end. */
static void check_mirror(void)
{
	int i, slot;

	/* Liveness: every resource synced and watching again. */
	for (i = 0; i < t.sc.nres && !t.failed; i++)
		if (!top->refl[i].synced || top->refl[i].phase != KR_PH_WATCH)
			violation(0, "%s has not recovered after the quiet period: %s, phase %d, last failure '%s'",
				  top->refl[i].res.name, top->refl[i].synced ? "synced" : "never synced",
				  (int)top->refl[i].phase, top->refl[i].conn.reason);
	if (!t.failed && kr_sim_open_descriptors() > t.sc.nres)
		violation(0, "%d descriptors open for %d connections", kr_sim_open_descriptors(), t.sc.nres);
	if (!t.failed && kr_sim_obs_lost())
		violation(4, "%lu observations lost", kr_sim_obs_lost());
	if (!t.failed && kr_sim_unsettled())
		violation(0, "the simulated world did not settle at %lu instants (a server loop)", kr_sim_unsettled());
	/* (1) and (2) */
	for (i = 0; i < t.sc.nres && !t.failed; i++) {
		int type = t.sc.flt[i].type;
		size_t count = 0;

		for (slot = 0; slot < KR_SIM_SLOTS && !t.failed; slot++) {
			const struct kr_sim_ver *v = kr_sim_current(type, slot);
			const char *key = kr_sim_key(type, slot);
			int want_present = kr_sim_match(&t.sc.flt[i], type, slot, v);
			struct kr_store_view view;
			struct folded *f = &t.fold[i][slot];
			char rv[32];
			int have = kr_store_get(store, i, key, strlen(key), &view);
			size_t n;

			snprintf(rv, sizeof(rv), "%llu", (unsigned long long)v->rv);
			count += (size_t)want_present;
			if (have != want_present) {
				violation(1, "%s %s: the mirror %s it, the server %s", top->refl[i].res.name, key,
					  have ? "holds" : "lacks", want_present ? "has it at rv " : "does not have it");
				if (want_present)
					snprintf(t.why + strlen(t.why), sizeof(t.why) - strlen(t.why), "%s", rv);
				break;
			}
			if (want_present && strcmp(view.rv, rv) != 0) {
				violation(1, "%s %s: the mirror holds rv %s, the server rv %s", top->refl[i].res.name, key,
					  view.rv, rv);
				break;
			}
			if (want_present && !view.held) {
				/* Allowed only when the seed chose an arena too small for everything; the
				 * stream was told it is gone (DELETED) until it can be held again. */
				if (t.sc.arena_bytes == KR_ARENA_BYTES) {
					violation(1, "%s %s rv %s is present but not held in a %zu-byte arena",
						  top->refl[i].res.name, key, rv, t.sc.arena_bytes);
					break;
				}
				if (f->present)
					violation(2, "%s %s is not held, yet the stream was not told it is gone",
						  top->refl[i].res.name, key);
				continue;
			}
			if (f->present != want_present) {
				violation(2, "%s %s: the folded stream %s it, the server %s", top->refl[i].res.name, key,
					  f->present ? "holds" : "lacks", want_present ? "has it" : "does not");
				break;
			}
			if (!want_present)
				continue;
			if (!same_bytes(type, slot, v, view.obj, view.objlen)) {
				violation(1, "%s %s rv %s: the mirror's bytes differ from the server's (%s)",
					  top->refl[i].res.name, key, rv, view.held ? "held" : "not held");
				break;
			}
			n = expected(type, slot, v);
			if (strcmp(f->rv, rv) != 0 || f->len != n || f->hash != fnv(expect_buf, n))
				violation(2, "%s %s: the folded stream holds rv %s (%zu bytes), the server rv %s (%zu bytes)",
					  top->refl[i].res.name, key, f->rv, f->len, rv, n);
		}
		if (!t.failed && kr_store_count(store, i) != count)
			violation(1, "%s: the mirror holds %zu objects, the server %zu", top->refl[i].res.name,
				  kr_store_count(store, i), count);
	}
}

/* (5): live bytes after 8 quiet minutes (live1) and now equal what the state needs. */
static void check_memory(size_t live1)
{
	size_t live2 = store->used - store->garbage, want = steady_bytes();
	const char *why = NULL;

	if (!t.failed && (live1 != want || live2 != want))
		violation(5, "live arena bytes %zu after 8 quiet minutes and %zu at the end; the final state needs %zu",
			  live1, live2, want);
	if (!t.failed && kr_store_check(store, &why) != 0)
		violation(5, "the store is inconsistent: %s", why);
	t.compactions = store->compactions;    /* kreflect's own, not the one below */
	if (!t.failed) {
		kr_store_compact(store);
		if (store->used != want || store->garbage != 0)
			violation(5, "after compaction the arena uses %zu bytes (%zu garbage); the state needs %zu",
				  store->used, store->garbage, want);
	}
}

/* --- one client's life: start, restart ----------------------------------------------------------- */

#define STATE_DIR "/data/kreflect"

/* The shared tail's figures of the client now running, into the totals. */
static void count_tail(void)
{
	int i;

	for (i = 0; i < t.sc.nres; i++) {
		total.tail_waits += top->refl[i].tail_waits;
		total.tail_yields += top->refl[i].tail_yields;
		total.tail_cuts += top->refl[i].tail_cuts;
		total.tail_rereads += top->refl[i].tail_rereads;
	}
}

/* A client in mem over the world as it is now, started through the public API, as a program would. */
static void start_client(void)
{
	struct kr_config *cfg = &t.cfg;
	char err[256];
	int i, r;

	memset(t.fold, 0, sizeof(t.fold));
	memset(t.att, 0, sizeof(t.att));
	for (i = 0; i < MAX_RES; i++)
		t.att[i].failed_at = -1;
	kr_config_init(cfg);
	cfg->server = "http://kube.sim:6443";
	cfg->no_auto_source = 1;
	cfg->token_file = t.sc.auth ? KR_SIM_TOKEN_FILE : NULL;
	cfg->max_objects = 4096;
	cfg->arena_bytes = t.sc.arena_bytes;
	cfg->log_level = t.verbose ? 3 : -1;
	if (t.sc.state) {
		cfg->state_dir = STATE_DIR;
		cfg->state_interval_s = t.sc.state_interval_s;
		cfg->max_stale_s = t.sc.max_stale_s;
	}
	if (kr_client_memory(cfg) > sizeof(mem) ||
	    kr_client_init(&client, mem, sizeof(mem), cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "sim: unable to set up the client: %s\n", err);
		exit(2);
	}
	/* Settings kr_config does not name (short watch timeouts, forced pages) go in directly. */
	*kr_client_opts(client) = t.sc.opts;
	for (i = 0; i < t.sc.nres; i++) {
		struct kr_resource_spec spec;

		memset(&spec, 0, sizeof(spec));
		spec.name = resources[i].name;
		spec.ns = resources[i].ns;
		spec.all_namespaces = resources[i].all_namespaces;
		spec.label_selector = resources[i].label_selector;
		if (kr_client_add(client, &spec, err, sizeof(err)) != i) {
			fprintf(stderr, "sim: unable to add %s: %s\n", resources[i].name, err);
			exit(2);
		}
	}
	if (kr_loop_signals(kr_client_loop(client), NULL, NULL) != 0 ||
	    kr_client_on_event(client, on_event, NULL) != 0) {
		fprintf(stderr, "sim: unable to set up the signal descriptor or the event callback\n");
		exit(2);
	}
	kr_sim_set_poll_hook(poll_hook, NULL);
	/* Each reflector's backoff starts here, as if just reset. */
	t.start_at = kr_port_now_ms();
	for (i = 0; i < MAX_RES; i++)
		t.att[i].reset_at = t.start_at;
	t.config_ran_before = (t.configs_ran >> (t.sc.opts.keep_managed_fields ? 1 : 0)) & 1;
	t.configs_ran |= 1u << (t.sc.opts.keep_managed_fields ? 1 : 0);
	t.starting = 1;
	r = kr_client_start(client, err, sizeof(err));
	t.starting = 0;
	if (r != 0) {
		fprintf(stderr, "sim: unable to start the client: %s\n", err);
		exit(2);
	}
	top = kr_client_reflect(client);
	store = kr_client_store(client);
}

/*
 * How resource i's mirror differs from the server's versions vers (its
 * state at some resourceVersion): 0 if it holds exactly the objects vers
 * selects, each at its resourceVersion, held ones with its bytes; else 1
 * and the first difference in why.
 */
static int mirror_differs(int i, const struct kr_sim_ver *vers, char *why, size_t size)
{
	int type = t.sc.flt[i].type, slot;
	size_t want = 0;

	for (slot = 0; slot < KR_SIM_SLOTS; slot++) {
		const struct kr_sim_ver *v = &vers[slot];
		const char *key = kr_sim_key(type, slot);
		int sel = kr_sim_match(&t.sc.flt[i], type, slot, v);
		struct kr_store_view view;
		int have = kr_store_get(store, i, key, strlen(key), &view);
		char rv[32];

		snprintf(rv, sizeof(rv), "%llu", (unsigned long long)v->rv);
		want += (size_t)sel;
		if (have != sel) {
			snprintf(why, size, "%s: the mirror %s it%s%s, the server %s", key, have ? "holds" : "lacks",
				 have ? " at rv " : "", have ? view.rv : "", sel ? "has it" : "does not have it");
			return 1;
		}
		if (sel && strcmp(view.rv, rv) != 0) {
			snprintf(why, size, "%s: the mirror holds rv %s, the server rv %s", key, view.rv, rv);
			return 1;
		}
		if (sel && view.held && !same_bytes(type, slot, v, view.obj, view.objlen)) {
			snprintf(why, size, "%s rv %s: other bytes than the server's", key, rv);
			return 1;
		}
	}
	if (kr_store_count(store, i) != want) {
		snprintf(why, size, "the mirror holds %zu objects, the server %zu", kr_store_count(store, i), want);
		return 1;
	}
	return 0;
}

/* The wall time the snapshot on the flash was written (its header), -1 if there is none to read. */
static int64_t snapshot_written_s(void)
{
	unsigned char h[KR_STATE_HEADER_BYTES];
	int fd = kr_port_fs_open_read(STATE_DIR "/state");
	size_t got = 0;
	int64_t w = 0;
	int b;

	if (fd < 0)
		return -1;
	while (got < sizeof(h)) {
		long n = kr_port_fs_read(fd, h + got, sizeof(h) - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	kr_port_fs_close(fd);
	if (got < sizeof(h))
		return -1;
	for (b = 7; b >= 0; b--)
		w = (int64_t)((uint64_t)w << 8 | h[24 + b]);
	return w;
}

/* Whether a write after rv touched what resource i selects (the watch from rv would report it). */
static int touched_since(int i, uint64_t rv)
{
	const struct kr_sim_filter *f = &t.sc.flt[i];
	uint64_t at;

	for (at = rv + 1; at <= kr_sim_rv(); at++) {
		const struct kr_sim_event *e = kr_sim_event_at(at);

		if (e && e->type == f->type &&
		    (kr_sim_match(f, e->type, e->slot, &e->prev) || kr_sim_match(f, e->type, e->slot, &e->cur)))
			return 1;
	}
	return 0;
}

/*
 * Right after a restart's start: what was restored is a state the server
 * had (never half a snapshot, never one for another configuration), and
 * what the window after it must show.
 */
static void check_restored(const struct restart *rs)
{
	int64_t written = snapshot_written_s();
	int fresh = t.sc.max_stale_s >= 0 && written >= 0 && kr_port_wall_seconds() - written <= t.sc.max_stale_s;
	int i;

	for (i = 0; i < t.sc.nres && !t.failed; i++) {
		const struct kr_reflector *r = &top->refl[i];
		int type = t.sc.flt[i].type;
		struct kr_sim_ver vers[KR_SIM_SLOTS];
		char why[200];
		uint64_t rv;
		int served;

		t.expect_watch[i] = t.expect_silent[i] = 0;
		t.synced_restored[i] = 0;
		t.expect_offline[i] = rs->variant & RV_UNREACHABLE ? 0 : -1;
		snprintf(t.restored_rv[i], sizeof(t.restored_rv[i]), "%s", r->restored ? r->last_rv : "");
		if ((rs->variant & RV_OTHER_CONFIG) && !t.config_ran_before && (r->restored || kr_store_count(store, i))) {
			violation(6, "%s: restart %d with another configuration (managedFields %s) restored %zu objects "
				  "from the snapshot of the old one, which must be ignored whole", r->res.name,
				  t.incarnation, t.sc.opts.keep_managed_fields ? "kept" : "dropped", kr_store_count(store, i));
			return;
		}
		if (!r->restored) {
			t.run.cold++;
			total.cold_after_restart++;
			if (kr_store_count(store, i))
				violation(6, "%s: not restored, yet its mirror holds %zu objects at start", r->res.name,
					  kr_store_count(store, i));
			continue;
		}
		t.run.restored++;
		total.restored_resources++;
		total.restored_objects += kr_store_count(store, i);
		t.expect_offline[i] = rs->variant & RV_UNREACHABLE ? fresh : -1;
		if (!r->last_rv[0])
			continue;      /* a partial mirror: listed again, reconciled (the events are checked) */
		rv = strtoull(r->last_rv, NULL, 10);
		kr_sim_snapshot(type, rv, vers);
		if (mirror_differs(i, vers, why, sizeof(why))) {
			violation(6, "%s: the mirror restored at restart %d (%s) is not the server's state at its "
				  "resourceVersion %s: %s", r->res.name, t.incarnation, how_names[rs->how], r->last_rv, why);
			return;
		}
		served = rv >= kr_sim_compacted_rv();
		if (!(rs->variant & RV_CALM) || !served)
			continue;
		t.expect_watch[i] = 1;
		t.run.warm_checked++;
		total.warm_checked++;
		t.expect_silent[i] = !touched_since(i, rv);
		total.silent_checked += (unsigned long)t.expect_silent[i];
		t.run.silent_checked += t.expect_silent[i];
	}
}

/* Runs the world without a client until `until` (the client is down). */
static void world_until(kr_ms_t until)
{
	while (kr_port_now_ms() < until)
		if (kr_port_poll(NULL, 0, (int)(until - kr_port_now_ms())) < 0)
			break;
}

/* Some write, so that the saved resourceVersion is older than the history after a compaction. */
static void some_write(void)
{
	int type = t.sc.flt[0].type, slot;

	for (slot = 0; slot < KR_SIM_SLOTS; slot++)
		if (kr_sim_current(type, slot)->present && kr_sim_update(type, slot) == 0)
			return;
	for (slot = 0; slot < KR_SIM_SLOTS; slot++)
		if (kr_sim_create(type, slot) == 0)
			return;
}

/*
 * Restart n: the client goes down as rs says (no kr_client_stop unless a
 * clean stop; the flash keeps what a power cut would leave), its memory is
 * dropped, the world runs on without it, and a fresh client starts in the
 * same memory over the same flash and server. Then property 6 at start and
 * over the window after it.
 */
static void restart(const struct restart *rs, int n)
{
	kr_ms_t down_at = kr_port_now_ms();
	int i;

	if (t.verbose)
		kr_sim_trace("RESTART %d: %s%s, down for %lld ms%s%s%s%s", n, how_names[rs->how],
			     rs->how == RS_STOP || rs->how == RS_KILL ? "" : kr_sim_fs_power_off() ? " (power off)" : "",
			     (long long)rs->down_ms, rs->variant & RV_CALM ? ", calm" : "",
			     rs->variant & RV_COMPACT ? ", history compacted" : "",
			     rs->variant & RV_UNREACHABLE ? ", server unreachable at restart" : "",
			     rs->variant & RV_OTHER_CONFIG ? ", another configuration" : "");
	count_tail();
	if (rs->how == RS_STOP) {
		kr_client_stop(client);
		if (kr_sim_open_descriptors() != 0)
			violation(0, "%d descriptors still open after kr_client_stop", kr_sim_open_descriptors());
	}
	kr_sim_set_poll_hook(NULL, NULL);
	kr_sim_process_exit();
	if (rs->how == RS_CRASH || rs->how == RS_CUT_MIDWRITE)
		kr_sim_fs_reboot(rs->reboot);
	else if (rs->how == RS_KILL)
		kr_sim_fs_reboot(KR_SIM_FS_ALL);
	/* The process's memory is gone: whatever the next one reads of it must be its own. */
	memset(mem, 0xa5, sizeof(mem) < kr_client_memory(&t.cfg) ? sizeof(mem) : kr_client_memory(&t.cfg));
	client = NULL;
	top = NULL;
	store = NULL;
	t.run.restarts++;
	total.restarts++;
	total.by_how[rs->how]++;

	if (rs->variant & RV_CALM)
		kr_sim_chaos_calm(down_at + rs->down_ms + rs->window_ms);
	world_until(down_at + rs->down_ms);
	if (rs->variant & RV_COMPACT) {
		some_write();
		kr_sim_compact(kr_sim_rv());
		total.compacted++;
	}
	if (rs->variant & RV_OTHER_CONFIG) {
		t.sc.opts.keep_managed_fields = !t.sc.opts.keep_managed_fields;
		total.other_config++;
	}
	if (rs->variant & RV_UNREACHABLE)
		kr_sim_chaos_outage(rs->outage, kr_port_now_ms() + rs->window_ms);

	t.incarnation = n;
	t.rs = rs;
	start_client();
	check_restored(rs);
	if (t.failed || !(rs->variant & (RV_CALM | RV_UNREACHABLE)))
		return;
	t.window_end = t.start_at + rs->window_ms;
	if (run_until(t.window_end) == 0) {
		if (rs->variant & RV_CALM)
			check_mirror();
		for (i = 0; i < t.sc.nres && !t.failed; i++)
			if (t.expect_offline[i] == 1 && !t.synced_restored[i])
				violation(6, "%s: the server could not be reached for %lld s after restart %d, yet the restored "
					  "mirror (max_stale_s %ld) was never reported synced (restored)",
					  top->refl[i].res.name, (long long)rs->window_ms / 1000, n, t.sc.max_stale_s);
	}
	t.window_end = 0;
}

/* One run: a random seed (rg NULL) or a directed regression scenario. */
static int run_world(uint64_t seed, const struct regression *rg)
{
	size_t live1;
	kr_ms_t end;
	int i, k, r;

	memset(&t.sc, 0, sizeof(t.sc));
	memset(t.fold, 0, sizeof(t.fold));
	memset(t.att, 0, sizeof(t.att));
	for (i = 0; i < MAX_RES; i++)
		t.att[i].failed_at = -1;
	t.seed = seed;
	t.failed = 0;
	t.why[0] = '\0';
	t.last_now = -1;
	t.same_time = 0;
	t.events = t.attempts = t.outage_attempts = t.compactions = 0;
	t.waits = t.waits_doubled = t.waits_capped = 0;
	t.incarnation = 0;
	t.configs_ran = 0;
	memset(&t.run, 0, sizeof(t.run));
	t.rs = NULL;
	t.window_end = 0;
	t.watch_power = 0;

	kr_sim_reset(seed);
	if (rg) {
		scenario_defaults(&t.sc);
		rg->setup(&t.sc);
	} else {
		kr_sim_chaos_setup();
		choose_scenario(&t.sc);
	}
	if (t.verbose) {
		const struct kr_sim_server_settings *st = kr_sim_server();

		kr_sim_trace("seed %llu: %d resources, %zu-byte arena, watch-list %s, page size %d%s, chaos for %lld s",
			     (unsigned long long)seed, t.sc.nres, t.sc.arena_bytes,
			     t.sc.opts.watch_list == KR_WL_ON ? "on" : t.sc.opts.watch_list == KR_WL_OFF ? "off" : "auto",
			     t.sc.opts.page_size, t.sc.opts.page_size_forced ? " (forced)" : "",
			     (long long)t.sc.chaos_ms / 1000);
		for (i = 0; i < t.sc.nres; i++)
			kr_sim_trace("resource %d: %s ns %s selector '%s'", i, resources[i].name,
				     resources[i].all_namespaces ? "(all)" : resources[i].ns, resources[i].label_selector);
		kr_sim_trace("server: watch-list gate %d, bookmarks every %d ms, rv0 ignores limit %d, chunked lists %d, "
			     "idle close %d ms, latency %d-%d ms, tokens %s", st->watch_list, st->bookmark_ms,
			     st->rv0_ignores_limit, st->list_chunked, st->keepalive_close_ms, st->latency_min_ms,
			     st->latency_max_ms, st->require_auth ? "required, rotating" : "not required");
	}
	/* The client's own struct starts poisoned (the arena's bytes are never read before written). */
	memset(mem, 0xa5, kr_client_struct_size() < sizeof(mem) ? kr_client_struct_size() : sizeof(mem));
	if (t.sc.state) {
		total.state_seeds++;
		kr_sim_fs_set_faults(&t.sc.fs_faults);
	}
	start_client();
	if (t.sc.chaos_ms > 0)
		kr_sim_chaos_start(0, t.sc.chaos_ms);
	for (k = 0; k < t.sc.nrestarts && !t.failed; k++) {
		const struct restart *rs = &t.sc.restarts[k];

		if (run_until(rs->at) < 0)
			break;
		if (rs->how == RS_CUT_MIDWRITE) {
			kr_sim_fs_cut_after(rs->cut_after);
			t.watch_power = 1;
			r = run_until(rs->at + 15 * MINUTE_MS);
			t.watch_power = 0;
			if (r < 0)
				break;
		}
		restart(rs, k + 1);
	}
	/* The quiet periods start when the chaos and the last restart are over. */
	end = kr_port_now_ms() > t.sc.chaos_ms ? kr_port_now_ms() : t.sc.chaos_ms;
	live1 = 0;
	if (!t.failed && run_until(end + t.sc.quiet1_ms) == 0) {
		live1 = store->used - store->garbage;
		check_mirror();
		if (!t.failed && run_until(end + t.sc.quiet1_ms + t.sc.quiet2_ms) == 0) {
			check_mirror();
			check_memory(live1);
		}
	}
	if (!t.failed && rg && rg->check) {
		const char *why = rg->check(top);

		if (why)
			violation(0, "%s", why);
	}
	if (!t.compactions)
		t.compactions = store->compactions;
	count_tail();
	kr_client_stop(client);
	if (!t.failed && kr_sim_open_descriptors() != 0)
		violation(0, "%d descriptors still open after every connection was closed", kr_sim_open_descriptors());
	kr_sim_set_poll_hook(NULL, NULL);

	if (rg)
		total.regressions++;
	else
		total.seeds++;
	total.writes += kr_sim_chaos_writes();
	total.storms += kr_sim_chaos_storms();
	total.events += t.events;
	total.attempts += t.attempts;
	total.waits += t.waits;
	total.waits_doubled += t.waits_doubled;
	total.waits_capped += t.waits_capped;
	total.sim_hours += (double)kr_port_now_ms() / 3600000.0;
	total.compactions += t.compactions;
	total.not_held += store->not_held;
	total.fs_failures += kr_sim_fs_stats()->failures;
	total.fs_slow += kr_sim_fs_stats()->slow_syncs;
	if (t.failed) {
		total.failed++;
		if (rg) {
			printf("FAIL regression %s (%s) at %.3f s: %s: %s\n", rg->name, rg->guards,
			       (double)kr_port_now_ms() / 1000.0, property_names[t.property], t.why);
			printf("  reproduce: %s --regress %s -v\n", self, rg->name);
		} else if (total.shown++ < 20) {
			printf("FAIL seed %llu at %.3f s: %s: %s\n", (unsigned long long)seed,
			       (double)kr_port_now_ms() / 1000.0, property_names[t.property], t.why);
			printf("  reproduce: %s --seed %llu -v\n", self, (unsigned long long)seed);
		}
		fflush(stdout);
		return -1;
	}
	total.passed++;
	if (rg)
		printf("ok regression %s: %s\n", rg->name, rg->guards);
	else if (t.verbose)
		printf("ok seed %llu: %lu events, %lu attempts (%lu in outages), %lu writes, %lu storms, %lu compactions\n",
		       (unsigned long long)seed, t.events, t.attempts, t.outage_attempts, kr_sim_chaos_writes(),
		       kr_sim_chaos_storms(), t.compactions);
	return 0;
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: sim [--seeds N] [--first S] [--no-regress] | --seed S [-v] | --regress NAME [-v]\n");
	exit(2);
}

static uint64_t number(const char *s)
{
	char *end;
	unsigned long long v;

	if (!s || !*s)
		usage();
	v = strtoull(s, &end, 10);
	if (*end)
		usage();
	return v;
}

int main(int argc, char **argv)
{
	uint64_t first = 1, count = 1000, s;
	const struct regression *rg;
	const char *only = NULL;
	size_t nrg, k;
	double t0, dt;
	int i, regress = 1;

	if (argc > 0 && argv[0][0])
		self = argv[0];
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
			count = number(argv[++i]);
		else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc)
			first = number(argv[++i]);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			first = number(argv[++i]);
			count = 1;
			regress = 0;
		} else if (strcmp(argv[i], "--regress") == 0 && i + 1 < argc) {
			only = argv[++i];
			count = 0;
		} else if (strcmp(argv[i], "--no-regress") == 0)
			regress = 0;
		else if (strcmp(argv[i], "-v") == 0)
			t.verbose = 1;
		else
			usage();
	}
	kr_sim_set_trace(t.verbose);
	kr_set_log_level(t.verbose ? KR_LOG_TRACE : -1);
	/*
	 * mbedTLS seeds its generator once per process, from kr_port_entropy:
	 * the world's PRNG. Done here, before any seed, so that no seed's world
	 * depends on whether it ran first (a failing seed replays alone).
	 */
	if (kr_tls_global_init() != 0) {
		fprintf(stderr, "sim: unable to set up mbedTLS\n");
		return 2;
	}
	t.max_per_minute = max_attempts_per_minute();
	if (regress) {
		total.regressions++;
		if (backoff_model_check() == 0) {
			total.passed++;
			printf("ok the backoff model of property (4): client-go's steps pass, no doubling, a low cap and "
			       "an early reset fail\n");
		} else {
			total.failed++;
		}
	}
	rg = sim_regressions(&nrg);
	for (k = 0; k < nrg && (regress || only); k++)
		if (!only || strcmp(only, rg[k].name) == 0)
			run_world(1, &rg[k]);
	if (only && total.regressions == 0) {
		fprintf(stderr, "sim: no regression scenario named '%s'\n", only);
		return 2;
	}
	t0 = seconds();
	for (s = first; s < first + count; s++)
		run_world(s, NULL);
	dt = seconds() - t0;
	printf("sim: %lu regression scenarios; %lu seeds in %.2f s (%.0f seeds/s); %.0f simulated hours, %lu writes, %lu storms, "
	       "%lu events, %lu attempts, %lu compactions, %lu objects not held at the end; "
	       "at most %d attempts per outage minute allowed\n",
	       total.regressions, total.seeds, dt, dt > 0 ? (double)total.seeds / dt : 0.0, total.sim_hours, total.writes,
	       total.storms, total.events, total.attempts, total.compactions, total.not_held, t.max_per_minute);
	printf("sim: backoff: %lu waits after a failure checked, %lu of them against a doubled step, %lu against "
	       "the 30 s cap\n", total.waits, total.waits_doubled, total.waits_capped);
	printf("sim: the shared tail: %lu waits for another's object, %lu turns given, %lu stalled objects cut, "
	       "%lu objects read again\n", total.tail_waits, total.tail_yields, total.tail_cuts, total.tail_rereads);
	printf("sim: restarts: %lu seeds with a state directory, %lu restarts (%lu crashes, %lu kills, %lu power cuts "
	       "mid-write, %lu clean stops); %lu resources restored (%lu objects), %lu started cold; %lu warm "
	       "restarts held to no LIST/watch-list, %lu of them with nothing changed to no event; %lu offline syncs; "
	       "%lu with the history compacted, %lu with another configuration; flash: %lu failed calls, %lu slow "
	       "fsyncs\n", total.state_seeds, total.restarts, total.by_how[RS_CRASH], total.by_how[RS_KILL],
	       total.by_how[RS_CUT_MIDWRITE], total.by_how[RS_STOP], total.restored_resources, total.restored_objects,
	       total.cold_after_restart, total.warm_checked, total.silent_checked, total.offline_synced,
	       total.compacted, total.other_config, total.fs_failures, total.fs_slow);
	printf("%lu passed, %lu failed\n", total.passed, total.failed);
	return total.failed ? 1 : 0;
}
