#include "backoff.h"

void kr_rand_seed(struct kr_rand *r, uint64_t seed)
{
	size_t got = 0;

	if (!seed && kr_port_entropy(NULL, (unsigned char *)&seed, sizeof(seed), &got) != 0)
		seed = (uint64_t)kr_port_now_ms() * 0x9e3779b97f4a7c15ull;
	r->s = seed ? seed : 0x2545f4914f6cdd1dull;
}

uint64_t kr_rand_next(struct kr_rand *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

int64_t kr_rand_range(struct kr_rand *r, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)(kr_rand_next(r) % (uint64_t)(hi - lo));
}

void kr_backoff_init(struct kr_backoff *b, struct kr_rand *rand, kr_ms_t now)
{
	b->duration_ms = KR_BACKOFF_INITIAL_MS;
	b->steps = KR_BACKOFF_STEPS;
	b->last_reset = now;
	b->rand = rand;
}

/* duration + rand[0,1) * duration: jitter factor 1.0. */
static int64_t jitter(struct kr_backoff *b, int64_t d)
{
	return d + kr_rand_range(b->rand, 0, d);
}

int64_t kr_backoff_next(struct kr_backoff *b, kr_ms_t now)
{
	int64_t sleep, next;

	if (now - b->last_reset > KR_BACKOFF_RESET_MS) {
		b->duration_ms = KR_BACKOFF_INITIAL_MS;
		b->steps = KR_BACKOFF_STEPS;
		b->last_reset = now;
	}
	if (b->steps < 1)
		return jitter(b, b->duration_ms);
	b->steps--;
	next = b->duration_ms * 2;
	if (next > KR_BACKOFF_CAP_MS) {
		next = KR_BACKOFF_CAP_MS;
		b->steps = 0;
	}
	sleep = jitter(b, b->duration_ms);
	b->duration_ms = next;
	return sleep;
}
