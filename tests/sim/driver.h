/*
 * Between the property driver (sim.c) and the directed regression
 * scenarios (regress.c): what one run of the world mirrors and for how long.
 */
#ifndef SIM_DRIVER_H
#define SIM_DRIVER_H

#include <stddef.h>

#include "port.h"
#include "reflector.h"
#include "sim/sim.h"

#define SIM_MAX_RES 3

/* What kreflect mirrors in one run, and how the run goes. */
struct scenario {
	int nres;
	struct kr_sim_filter flt[SIM_MAX_RES];
	struct kr_reflector_opts opts;
	size_t arena_bytes;            /* small ones force compaction and objects not held */
	int auth;                      /* a rotating bearer token from a file */
	kr_ms_t chaos_ms;              /* random writes and faults (0: none, a script instead) */
	kr_ms_t quiet1_ms, quiet2_ms;  /* then quiet; memory is compared after each */
};

/*
 * Resource i of sc mirrors type in namespace ns (-1 all, -2 one without
 * objects) with label selector tier=<tier> or tier!=<tier> (selop).
 */
void sim_mirror(struct scenario *sc, int i, int type, int ns, int selop, int tier);

/* A directed scenario: the world and the script that once exposed a bug. */
struct regression {
	const char *name;
	const char *guards;            /* the bug, in one line */
	void (*setup)(struct scenario *sc);
	/* After the run, when the properties held: NULL, or what else went wrong (may be NULL). */
	const char *(*check)(const struct kr_reflect *top);
};

const struct regression *sim_regressions(size_t *n);

#endif
