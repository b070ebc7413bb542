#include "backoff.h"
#include "test.h"

KR_TEST(backoff, sequence_matches_client_go_bounds)
{
	/* [0.8,1.6) [1.6,3.2) [3.2,6.4) [6.4,12.8) [12.8,25.6) [25.6,51.2) then [30,60) */
	static const int64_t lo[] = { 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000 };
	struct kr_rand r;
	struct kr_backoff b;
	int round, i;

	for (round = 0; round < 200; round++) {
		kr_rand_seed(&r, (uint64_t)round + 1);
		kr_backoff_init(&b, &r, 0);
		for (i = 0; i < 9; i++) {
			int64_t d = kr_backoff_next(&b, 1000 * i);

			check(d >= lo[i]);
			check(d < 2 * lo[i]);
		}
	}
	return 0;
}

KR_TEST(backoff, resets_two_minutes_after_the_last_reset)
{
	struct kr_rand r;
	struct kr_backoff b;
	int i;

	kr_rand_seed(&r, 7);
	kr_backoff_init(&b, &r, 0);
	for (i = 0; i < 10; i++)
		kr_backoff_next(&b, 1000);
	check(kr_backoff_next(&b, 120000) >= 30000);    /* exactly 2 min: no reset yet */
	check(kr_backoff_next(&b, 120001) < 1600);      /* past 2 min: back to [0.8, 1.6) */
	check(kr_backoff_next(&b, 120002) >= 1600);     /* and doubling again */
	return 0;
}

KR_TEST(backoff, rand_range_is_bounded_and_covers)
{
	struct kr_rand r;
	int seen[10] = { 0 }, i;

	kr_rand_seed(&r, 99);
	for (i = 0; i < 10000; i++) {
		int64_t v = kr_rand_range(&r, 300, 310);

		check(v >= 300 && v < 310);
		seen[v - 300]++;
	}
	for (i = 0; i < 10; i++)
		check(seen[i] > 800);
	check(kr_rand_range(&r, 5, 5) == 5);
	return 0;
}
