#include "budget.h"

#include "kreflect_config.h"

static const struct kr_budget_item items[] = {
	{ "tls-heap", KR_TLS_HEAP_SIZE,
	  "mbedTLS heap: record buffers and handshakes of KR_MAX_CONNS connections" },
};

const struct kr_budget_item *kr_budget_items(size_t *count)
{
	*count = sizeof(items) / sizeof(items[0]);
	return items;
}

size_t kr_budget_total(void)
{
	size_t i, total = 0;

	for (i = 0; i < sizeof(items) / sizeof(items[0]); i++)
		total += items[i].bytes;
	return total;
}
