#include "cadence.h"
#include "kreflect.h"
#include "test.h"

KR_TEST(cadence, unknown_gives_the_ceiling)
{
	struct kr_cadence c;

	kr_cadence_init(&c, 65000);
	check(kr_cadence_get(&c) == 0);
	check(kr_cadence_idle_ms(&c) == 65000);
	return 0;
}

KR_TEST(cadence, twice_the_longest_gap_plus_margin_within_floor_and_ceiling)
{
	struct kr_cadence c;

	kr_cadence_init(&c, 65000);
	/* 1 s bookmarks: 7 s, raised to the 30 s floor. */
	check(kr_cadence_saw_gap(&c, 1000) == 1);
	check(kr_cadence_get(&c) == 1000 && kr_cadence_idle_ms(&c) == 30000);
	/* A shorter gap later does not shorten it: the longest counts. */
	check(kr_cadence_saw_gap(&c, 500) == 0 && kr_cadence_get(&c) == 1000);
	/* 20 s: 45 s, between floor and ceiling. */
	check(kr_cadence_saw_gap(&c, 20000) == 1 && kr_cadence_idle_ms(&c) == 45000);
	/* 60 s (kube-apiserver): 125 s, held at the 65 s ceiling. */
	check(kr_cadence_saw_gap(&c, 60000) == 1 && kr_cadence_idle_ms(&c) == 65000);
	/* Longer still: the gap is kept, the deadline stays the ceiling, "no change". */
	check(kr_cadence_saw_gap(&c, 90000) == 0 && kr_cadence_get(&c) == 90000);
	check(kr_cadence_idle_ms(&c) == 65000);
	return 0;
}

KR_TEST(cadence, ceiling_below_the_floor_is_both)
{
	struct kr_cadence c;

	kr_cadence_init(&c, 7000);
	check(kr_cadence_idle_ms(&c) == 7000);
	check(kr_cadence_saw_gap(&c, 1000) == 0);      /* 7 s either way */
	check(kr_cadence_idle_ms(&c) == 7000);
	kr_cadence_init(&c, 20000);
	check(kr_cadence_saw_gap(&c, 100) == 0 && kr_cadence_idle_ms(&c) == 20000);
	check(kr_cadence_saw_gap(&c, 9000) == 0 && kr_cadence_idle_ms(&c) == 20000);
	kr_cadence_init(&c, 0);                         /* never 0: a deadline that fires at once */
	check(kr_cadence_idle_ms(&c) == 1);
	return 0;
}

KR_TEST(cadence, bad_gaps_are_ignored)
{
	struct kr_cadence c;

	kr_cadence_init(&c, 65000);
	check(kr_cadence_saw_gap(&c, 0) == 0 && kr_cadence_saw_gap(&c, -5) == 0);
	check(kr_cadence_saw_gap(&c, KR_CADENCE_MAX_MS + 1) == 0);
	check(kr_cadence_get(&c) == 0 && kr_cadence_idle_ms(&c) == 65000);
	check(kr_cadence_saw_gap(&c, KR_CADENCE_MAX_MS) == 0 && kr_cadence_get(&c) == KR_CADENCE_MAX_MS);
	return 0;
}

KR_TEST(cadence, set_and_get_round_trip_for_a_restart)
{
	struct kr_cadence a, b;

	kr_cadence_init(&a, 65000);
	kr_cadence_saw_gap(&a, 2000);
	kr_cadence_init(&b, 65000);
	check(kr_cadence_set(&b, kr_cadence_get(&a)) == 0);
	check(kr_cadence_get(&b) == 2000 && kr_cadence_idle_ms(&b) == kr_cadence_idle_ms(&a));
	check(kr_cadence_set(&b, -1) == KR_EINVAL && kr_cadence_get(&b) == 2000);
	check(kr_cadence_set(&b, KR_CADENCE_MAX_MS + 1) == KR_EINVAL && kr_cadence_get(&b) == 2000);
	check(kr_cadence_set(&b, 0) == 0 && kr_cadence_idle_ms(&b) == 65000);
	return 0;
}
