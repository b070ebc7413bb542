#include <string.h>

#include "kreflect.h"
#include "reflector.h"
#include "test.h"

static void no_event(void *arg, const struct kr_event *ev)
{
	(void)arg;
	(void)ev;
}

/* The sink table holds KR_MAX_SINKS, then says so (main treats that as fatal). */
KR_TEST(reflector, sink_table_is_bounded)
{
	static struct kr_reflect top;
	struct kr_sink s = { no_event, NULL };
	int i;

	memset(&top, 0, sizeof(top));
	for (i = 0; i < KR_MAX_SINKS; i++)
		check(kr_reflect_add_sink(&top, &s) == 0);
	check(kr_reflect_add_sink(&top, &s) == KR_ENOSPC);
	check(top.nsinks == KR_MAX_SINKS);
	return 0;
}
