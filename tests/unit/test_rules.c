/*
 * The decision table (kr_reflect_rules) and the classifier of how a list, a
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

static const int phases[] = { KR_PH_LIST, KR_PH_WATCHLIST, KR_PH_WATCH };
#define NPHASES 3

/* Where phase is in phases[]. */
static int phase_index(int phase)
{
	return phase == KR_PH_LIST ? 0 : phase == KR_PH_WATCHLIST ? 1 : 2;
}

/* The list's own outcomes: the pager's. */
static int list_only(int o)
{
	return o == KR_OC_PAGE || o == KR_OC_COMPLETE || o == KR_OC_ENDED_EARLY || o == KR_OC_TOKEN_EXPIRED;
}

/*
 * A list has no events: no ERROR event, nothing not held,
 * no very short or clean end (a 200 body is whole, ended early or broken).
 * A watch-list can never end NOT_HELD: its objects not held make the
 * sync partial.
 */
static int possible(int phase, int o)
{
	if (phase == KR_PH_LIST)
		return list_only(o) || o <= KR_OC_HTTP_ERROR || o == KR_OC_STREAM_ERROR;
	if (list_only(o))
		return 0;
	return phase == KR_PH_WATCH || o != KR_OC_NOT_HELD;
}

/* A response in r, in phase, that ended as outcome o; returns on_end's err. */
static int end_as(struct kr_reflector *r, int phase, int o)
{
	int err = 0;

	memset(r, 0, sizeof(*r));
	r->phase = (enum kr_phase)phase;
	r->req.status = 200;
	r->req.retry_after_s = -1;
	r->req.watch_start = NOW - 5000;
	r->req.events = 3;
	switch (o) {
	case KR_OC_MOVED:
		r->req.tail_lost = 1;
		r->req.stream_error = 1;  /* what ended the body does not matter */
		break;
	case KR_OC_NO_ANSWER:
		r->req.status = 0;
		r->req.events = 0;
		err = KR_ETLS;
		break;
	case KR_OC_BAD_HEAD:
		r->req.status = 0;
		r->req.events = 0;
		err = KR_EPROTO;
		break;
	case KR_OC_PAGE:
		r->req.list_complete = 1;
		kr_snprintf(r->req.items.continue_token, sizeof(r->req.items.continue_token), "%s", "next");
		break;
	case KR_OC_COMPLETE:
		r->req.list_complete = 1;
		break;
	case KR_OC_ENDED_EARLY:
		break;  /* a 200 whose list object did not close */
	case KR_OC_TOKEN_EXPIRED:
		r->req.status = 410;
		r->req.err_code = 410;
		kr_snprintf(r->req.err_reason, sizeof(r->req.err_reason), "%s", "Expired");
		kr_snprintf(r->list.continue_token, sizeof(r->list.continue_token), "%s", "page2");
		break;
	case KR_OC_RETRY_AFTER:
		r->req.status = 503;
		r->req.retry_after_s = 2;
		r->retry_after_count = 3;
		break;
	case KR_OC_THROTTLED:
		r->req.status = 429;
		r->req.retry_after_s = 2;
		r->retry_after_count = 10;  /* retries used up: a plain 429 */
		break;
	case KR_OC_REFUSED:
		r->req.status = 403;
		break;
	case KR_OC_GONE:
		r->req.status = 410;
		r->req.err_code = 410;
		kr_snprintf(r->req.err_reason, sizeof(r->req.err_reason), "%s", "Gone");
		break;
	case KR_OC_TOO_LARGE:
		r->req.status = 504;
		r->req.err_code = 504;
		kr_snprintf(r->req.err_reason, sizeof(r->req.err_reason), "%s", "Timeout");
		r->req.err_too_large = 1;
		break;
	case KR_OC_REJECTED:
		r->req.status = 422;
		break;
	case KR_OC_HTTP_ERROR:
		r->req.status = 500;
		break;
	case KR_OC_ERROR_429:
		r->req.error_event = 1;
		r->req.err_code = 429;
		break;
	case KR_OC_ERROR_GONE:
		r->req.error_event = 1;
		r->req.err_code = 410;
		kr_snprintf(r->req.err_reason, sizeof(r->req.err_reason), "%s", "Expired");
		break;
	case KR_OC_ERROR_TOO_LARGE:
		r->req.error_event = 1;
		r->req.err_code = 504;
		r->req.err_too_large = 1;
		break;
	case KR_OC_ERROR_NO_PROGRESS:
		r->req.error_event = 1;
		r->req.err_code = 500;
		kr_snprintf(r->req.err_message, sizeof(r->req.err_message), "%s", "the server does not support RequestWatchProgress");
		break;
	case KR_OC_ERROR_EVENT:
		r->req.error_event = 1;
		r->req.err_code = 500;
		kr_snprintf(r->req.err_reason, sizeof(r->req.err_reason), "%s", "InternalError");
		break;
	case KR_OC_STREAM_ERROR:
		err = KR_EPROTO;  /* broken chunking after the head */
		r->req.list_complete = 1;  /* a list: what came is not whole however it looked */
		break;
	case KR_OC_NOT_HELD:
		r->skipped = 1;
		break;
	case KR_OC_VERY_SHORT:
		r->req.watch_start = NOW - 10;
		r->req.events = 0;
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

		check(a->phase == KR_PH_LIST || a->phase == KR_PH_WATCHLIST || a->phase == KR_PH_WATCH);
		check(a->outcome < KR_OC_N && a->step < KR_STEP_N && a->restart < KR_RS_N);
		check(possible(a->phase, a->outcome));
		/* Only a watch-list falls back to a LIST; a watch has no RV "" request of its own. */
		check(a->phase == KR_PH_WATCHLIST ||
		      (a->step != KR_STEP_FALLBACK && a->step != KR_STEP_FALLBACK_FOR_GOOD));
		check(a->phase != KR_PH_WATCH || a->step != KR_STEP_LATEST);
		/* The pager's steps are a list's; a list never re-watches. */
		check((a->phase == KR_PH_LIST) >= (a->step == KR_STEP_NEXT_PAGE || a->step == KR_STEP_SYNCED ||
						  a->step == KR_STEP_FULL_LIST));
		check(a->phase != KR_PH_LIST || a->step != KR_STEP_AGAIN);
		/* A failed list says so ("list failed: ..."); no other row does. */
		check((a->phase == KR_PH_LIST && a->step == KR_STEP_BACKOFF_RELIST) ==
		      !!(a->flags & KR_RULE_LIST_FAILED));
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
	int reached[KR_OC_N * NPHASES];
	int p, o, i, n = 0;

	memset(reached, 0, sizeof(reached));
	for (p = 0; p < NPHASES; p++)
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
		check(reached[phase_index(kr_reflect_rules[i].phase) * KR_OC_N + kr_reflect_rules[i].outcome]);
	check(n == kr_reflect_nrules);
	return 0;
}

/* A watch-list's objects not held, then its stream ends: as any stream that ends, no relist. */
KR_TEST(rules, watch_list_with_objects_not_held_is_not_a_relist)
{
	static struct kr_reflector r;
	int err = end_as(&r, KR_PH_WATCHLIST, KR_OC_CLOSED);

	r.skipped = 5;
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
	r.req.tail_lost = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_MOVED);
	/* An ERROR event with Expired and TooLarge is expired (client-go's isExpiredError first). */
	err = end_as(&r, KR_PH_WATCH, KR_OC_ERROR_GONE);
	r.req.err_too_large = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_ERROR_GONE);
	/* A very short watch that carried an event is a clean end. */
	err = end_as(&r, KR_PH_WATCH, KR_OC_VERY_SHORT);
	r.req.events = 1;
	check(kr_reflector_outcome(&r, err, NOW) == KR_OC_CLOSED);
	return 0;
}

/*
 * The pager's order: what the Status says before the status code, each
 * retry once; a list's broken answer before what it said.
 */
KR_TEST(rules, a_list_reads_the_pager_state)
{
	static const struct {
		int from;                  /* a list ended as this outcome (end_as), then: */
		int status;                /* this status (0: as it was) */
		const char *reason;        /* this Status reason (NULL: as it was) */
		int retried, full, too_large, stream_error, err, quick;
		int want;
	} cases[] = {
		/* A 429 or 403 whose Status says Expired on the first page: the RV "" retry. */
		{ KR_OC_GONE, 429, NULL, 0, 0, 0, 0, 0, 0, KR_OC_GONE },
		{ KR_OC_GONE, 403, NULL, 0, 0, 0, 0, 0, 0, KR_OC_GONE },
		/* Made once: then a failed list, as any other status. */
		{ KR_OC_GONE, 403, NULL, 1, 0, 0, 0, 0, 0, KR_OC_REFUSED },
		{ KR_OC_GONE, 410, NULL, 1, 0, 0, 0, 0, 0, KR_OC_HTTP_ERROR },
		/* An expired continue token: one full list, then a failed list; Gone is not Expired. */
		{ KR_OC_TOKEN_EXPIRED, 0, NULL, 0, 1, 0, 0, 0, 0, KR_OC_HTTP_ERROR },
		{ KR_OC_TOKEN_EXPIRED, 0, "Gone", 0, 0, 0, 0, 0, 0, KR_OC_HTTP_ERROR },
		/* TooLarge on a later page is a failed list too (the RV "" retry is the first page's). */
		{ KR_OC_TOKEN_EXPIRED, 504, "", 0, 0, 1, 0, 0, 0, KR_OC_HTTP_ERROR },
		/* An error answer cut short: a broken body, not its status, even with Retry-After. */
		{ KR_OC_RETRY_AFTER, 0, NULL, 0, 0, 0, 0, KR_ECLOSED, 0, KR_OC_STREAM_ERROR },
		/* A 200 that ended clean but broke its JSON: malformed, however complete it looked. */
		{ KR_OC_COMPLETE, 0, NULL, 0, 0, 0, 1, 0, 0, KR_OC_STREAM_ERROR },
		/* A list never looks "very short": it has no events. */
		{ KR_OC_COMPLETE, 0, NULL, 0, 0, 0, 0, 0, 1, KR_OC_COMPLETE },
	};
	static struct kr_reflector r;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err = end_as(&r, KR_PH_LIST, cases[i].from);

		if (cases[i].status)
			r.req.status = cases[i].status;
		if (cases[i].reason)
			kr_snprintf(r.req.err_reason, sizeof(r.req.err_reason), "%s", cases[i].reason);
		r.list.expired_retried = cases[i].retried;
		r.list.full_retry = cases[i].full;
		r.req.err_too_large |= cases[i].too_large;
		r.req.stream_error = cases[i].stream_error;
		if (cases[i].err)
			err = cases[i].err;
		if (cases[i].quick) {
			r.req.events = 0;
			r.req.watch_start = NOW - 10;
		}
		if (kr_reflector_outcome(&r, err, NOW) != (enum kr_outcome)cases[i].want) {
			kr_test_failed(__FILE__, (int)i, "another outcome");
			return __LINE__;
		}
	}
	return 0;
}
