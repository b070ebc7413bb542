/*
 * The memory budget: every large buffer kreflect uses, computed from
 * config/kreflect_config.h, the structures that hold them and the
 * capacities chosen at start-up. `kreflect --print-budget` prints it; a test
 * checks the static part against the binary's .data + .bss.
 */
#ifndef KR_BUDGET_H
#define KR_BUDGET_H

#include <stddef.h>

struct kr_budget_item {
	const char *name;
	size_t bytes;
	int reserved;                  /* 1: reserved once at start-up; 0: static (.data + .bss) */
	const char *why;
};

/*
 * Fills items[0..max) for a client of these capacities. Returns how many
 * items there are (more than max: the rest were not written).
 */
#define KR_BUDGET_ITEMS 16
size_t kr_budget_items(struct kr_budget_item *items, size_t max, size_t objects, size_t arena);

#endif /* KR_BUDGET_H */
