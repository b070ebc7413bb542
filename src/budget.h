/*
 * The static memory budget: every large buffer kreflect reserves at build
 * time, computed from config/kreflect_config.h and the structures that hold
 * them. `kreflect --print-budget` prints it; a test checks it against the
 * binary's .data + .bss.
 */
#ifndef KR_BUDGET_H
#define KR_BUDGET_H

#include <stddef.h>

struct kr_budget_item {
	const char *name;
	size_t bytes;
	const char *why;
};

/* The items, in a static table; *count is set to their number. */
const struct kr_budget_item *kr_budget_items(size_t *count);

/* The sum of all items, in bytes. */
size_t kr_budget_total(void);

#endif /* KR_BUDGET_H */
