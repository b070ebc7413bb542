#include "cadence.h"

#include "kreflect.h"

void kr_cadence_init(struct kr_cadence *c, int ceiling_ms)
{
	c->gap_ms = 0;
	c->ceiling_ms = ceiling_ms > 0 ? ceiling_ms : 1;
}

int kr_cadence_saw_gap(struct kr_cadence *c, int64_t gap_ms)
{
	int before = kr_cadence_idle_ms(c);

	/* The longest gap, not the last: one late bookmark must not be followed by a false alarm. */
	if (gap_ms <= 0 || gap_ms > KR_CADENCE_MAX_MS || gap_ms <= c->gap_ms)
		return 0;
	c->gap_ms = gap_ms;
	return kr_cadence_idle_ms(c) != before;
}

int kr_cadence_idle_ms(const struct kr_cadence *c)
{
	int64_t d, floor = c->ceiling_ms < KR_CADENCE_FLOOR_MS ? c->ceiling_ms : KR_CADENCE_FLOOR_MS;

	if (c->gap_ms <= 0)
		return c->ceiling_ms;
	d = 2 * c->gap_ms + KR_CADENCE_MARGIN_MS;
	if (d < floor)
		d = floor;
	if (d > c->ceiling_ms)
		d = c->ceiling_ms;
	return (int)d;
}

int64_t kr_cadence_get(const struct kr_cadence *c)
{
	return c->gap_ms;
}

int kr_cadence_set(struct kr_cadence *c, int64_t gap_ms)
{
	if (gap_ms < 0 || gap_ms > KR_CADENCE_MAX_MS)
		return KR_EINVAL;
	c->gap_ms = gap_ms;
	return 0;
}
