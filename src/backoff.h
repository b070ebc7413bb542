/*
 * client-go's reflector backoff, exactly (src/README.md "Constants"): 0.8 s
 * doubling to a 30 s cap, jitter x[1, 2), 38 steps, reset to 0.8 s when more
 * than 2 minutes passed since the last reset. And the small PRNG behind the
 * jitter and the random watch timeouts, seeded from the port's entropy.
 */
#ifndef KR_BACKOFF_H
#define KR_BACKOFF_H

#include <stdint.h>

#include "port.h"

#define KR_BACKOFF_INITIAL_MS 800
#define KR_BACKOFF_CAP_MS 30000
#define KR_BACKOFF_RESET_MS 120000
#define KR_BACKOFF_STEPS 38            /* ceil(30 s / 0.8 s) */

struct kr_rand {
	uint64_t s;
};

/* Seeds r from kr_port_entropy (or from seed when nonzero, for tests). */
void kr_rand_seed(struct kr_rand *r, uint64_t seed);

/* The next 64 random bits (xorshift64*). */
uint64_t kr_rand_next(struct kr_rand *r);

/* A uniform value in [lo, hi) (lo when hi <= lo). */
int64_t kr_rand_range(struct kr_rand *r, int64_t lo, int64_t hi);

struct kr_backoff {
	int64_t duration_ms;           /* the next un-jittered delay */
	int steps;
	kr_ms_t last_reset;
	struct kr_rand *rand;
};

/* Starts at 0.8 s; `now` is the construction time that the 2-minute reset counts from. */
void kr_backoff_init(struct kr_backoff *b, struct kr_rand *rand, kr_ms_t now);

/* The next delay in ms (client-go's Step with DelayWithReset). */
int64_t kr_backoff_next(struct kr_backoff *b, kr_ms_t now);

#endif /* KR_BACKOFF_H */
