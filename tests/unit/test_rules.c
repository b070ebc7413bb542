/*
 * The decision table (kr_reflect_rules) and the classifier of how a
 * watch-list or a watch ended (kr_reflector_outcome): one row per phase and
 * outcome, none twice, every row reached by a response the classifier sees.
 * tests/rules/check_rules.py checks that the test each row names exists.
 */
#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "reflector.h"
#include "test.h"

#define NOW 100000

static const int phases[] = { KR_PH_WATCHLIST, KR_PH_WATCH };

/* A watch-list can never end NOT_HELD or ROOM: its objects not held make the sync partial. */
static int possible(int phase, int o)
{
	return phase == KR_PH_WATCH || (o != KR_OC_NOT_HELD && o != KR_OC_ROOM);
}

/* A response in r, in phase, that ended as outcome o; returns on_end's err. */
static int end_as(struct kr_reflector *r, int phase, int o)
{
	int err = 0;

	memset(r, 0, sizeof(*r));
	r->phase = (enum kr_phase)phase;
	r->status = 200;
	r->retry_after_s = -1;
	r->watch_start = NOW - 5000;
	r->events = 3;
	switch (o) {
	case KR_OC_MOVED:
		r->tail_lost = 1;
		r->stream_error = 1;  /* what ended the body does not matter */
		break;
	case KR_OC_NO_ANSWER:
		r->status = 0;
		r->events = 0;
		err = KR_ETLS;
		break;
	case KR_OC_BAD_HEAD:
		r->status = 0;
		r->events = 0;
		err = KR_EPROTO;
		break;
	case KR_OC_RETRY_AFTER:
		r->status = 503;
		r->retry_after_s = 2;
		r->retry_after_count = 3;
		break;
	case KR_OC_THROTTLED:
		r->status = 429;
		r->retry_after_s = 2;
		r->retry_after_count = 10;  /* retries used up: a plain 429 */
		break;
	case KR_OC_REFUSED:
		r->status = 403;
		break;
	case KR_OC_GONE:
		r->status = 410;
		r->err_code = 410;
		kr_snprintf(r->err_reason, sizeof(r->err_reason), "%s", "Gone");
		break;
	case KR_OC_TOO_LARGE:
		r->status = 504;
		r->err_code = 504;
		kr_snprintf(r->err_reason, sizeof(r->err_reason), "%s", "Timeout");
		r->err_too_large = 1;
		break;
	case KR_OC_REJECTED:
		r->status = 422;
		break;
	case KR_OC_HTTP_ERROR:
		r->status = 500;
		break;
	case KR_OC_ERROR_429:
		r->error_event = 1;
		r->err_code = 429;
		break;
	case KR_OC_ERROR_GONE:
		r->error_event = 1;
		r->err_code = 410;
		kr_snprintf(r->err_reason, sizeof(r->err_reason), "%s", "Expired");
		break;
	case KR_OC_ERROR_TOO_LARGE:
		r->error_event = 1;
		r->err_code = 504;
		r->err_too_large = 1;
		break;
	case KR_OC_ERROR_NO_PROGRESS:
		r->error_event = 1;
		r->err_code = 500;
		kr_snprintf(r->err_message, sizeof(r->err_message), "%s", "the server does not support RequestWatchProgress");
		break;
	case KR_OC_ERROR_EVENT:
		r->error_event = 1;
		r->err_code = 500;
		kr_snprintf(r->err_reason, sizeof(r->err_reason), "%s", "InternalError");
		break;
	case KR_OC_STREAM_ERROR:
		err = KR_EPROTO;  /* broken chunking after the head */
		break;
	case KR_OC_NOT_HELD:
		r->skipped = 1;
		break;
	case KR_OC_ROOM:
		r->room_relist = 1;
		break;
	case KR_OC_VERY_SHORT:
		r->watch_start = NOW - 10;
		r->events = 0;
		break;
	default:
		err = KR_ECLOSED;  /* a dropped stream ends as a clean end does */
		break;
	}
	return err;
}

/* Every row is a phase and outcome there is, and a step; no phase and outcome twice. */
KR_TEST(rules, rows_are_well_formed_and_unique)
{
	int i, j;

	check(kr_reflect_nrules > 0);
	for (i = 0; i < kr_reflect_nrules; i++) {
		const struct kr_rule *a = &kr_reflect_rules[i];

		check(a->phase == KR_PH_WATCHLIST || a->phase == KR_PH_WATCH);
		check(a->outcome < KR_OC_N && a->step < KR_STEP_N && a->restart < KR_RS_N);
		check(possible(a->phase, a->outcome));
		/* A watch has no LIST to fall back to, nor an RV "" watch-list of its own. */
		check(a->phase == KR_PH_WATCHLIST ||
		      (a->step != KR_STEP_FALLBACK && a->step != KR_STEP_FALLBACK_FOR_GOOD &&
		       a->step != KR_STEP_LATEST));
		/* Restarts are counted for watches only (/metrics' kreflect_watch_restarts_total). */
		check((a->phase == KR_PH_WATCH) == (a->restart >= 0) || a->outcome == KR_OC_MOVED ||
		      a->outcome == KR_OC_RETRY_AFTER);
		for (j = i + 1; j < kr_reflect_nrules; j++)
			check(a->phase != kr_reflect_rules[j].phase || a->outcome != kr_reflect_rules[j].outcome);
	}
	return 0;
}

/* Every phase x outcome the classifier can give has its row, and it reaches it. */
KR_TEST(rules, every_row_is_reached)
{
	static struct kr_reflector r;
	int reached[KR_OC_N * 2];
	int p, o, i, n = 0;

	memset(reached, 0, sizeof(reached));
	for (p = 0; p < 2; p++)
		for (o = 0; o < KR_OC_N; o++) {
			int err;

			if (!possible(phases[p], o)) {
				check(kr_reflect_rule(phases[p], (enum kr_outcome)o) == NULL);
				continue;
			}
			check(kr_reflect_rule(phases[p], (enum kr_outcome)o) != NULL);
			err = end_as(&r, phases[p], o);
			check(kr_reflector_outcome(&r, err, NOW) == (enum kr_outcome)o);
			reached[p * KR_OC_N + o] = 1;
			n++;
		}
	for (i = 0; i < kr_reflect_nrules; i++)
		check(reached[(kr_reflect_rules[i].phase == KR_PH_WATCH) * KR_OC_N + kr_reflect_rules[i].outcome]);
	check(n == kr_reflect_nrules);
	return 0;
}

/* A watch-list's objects not held, then its stream ends: as any stream that ends, no relist. */
KR_TEST(rules, watch_list_with_objects_not_held_is_not_a_relist)
{
	static struct kr_reflector r;
	int err = end_as(&r, KR_PH_WATCHLIST, KR_OC_CLOSED);

	r.skipped = 5;
	r.room_relist = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_CLOSED);
	r.phase = KR_PH_WATCH;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_NOT_HELD);
	return 0;
}

/* The order: what ended the stream before what the stream was (a 429 with Retry-After used up...). */
KR_TEST(rules, the_first_that_holds)
{
	static struct kr_reflector r;
	int err = end_as(&r, KR_PH_WATCH, KR_OC_RETRY_AFTER);

	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_RETRY_AFTER);
	r.retry_after_count = 10;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_HTTP_ERROR);
	r.tail_lost = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_MOVED);
	/* An ERROR event with Expired and TooLarge is expired (client-go's isExpiredError first). */
	err = end_as(&r, KR_PH_WATCH, KR_OC_ERROR_GONE);
	r.err_too_large = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_ERROR_GONE);
	/* A very short watch that carried an event is a clean end. */
	err = end_as(&r, KR_PH_WATCH, KR_OC_VERY_SHORT);
	r.events = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_CLOSED);
	return 0;
}
