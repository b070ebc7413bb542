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
#define SIM_MAX_RESTARTS 4

/* How the client goes down at a restart. */
enum {
	RS_CRASH,                      /* power cut: the flash keeps what kr_sim_fs_reboot's mode says */
	RS_KILL,                       /* the process is killed: the kernel keeps what was written */
	RS_CUT_MIDWRITE,               /* the power goes off at the k-th file system call from then on */
	RS_STOP,                       /* kr_client_stop (a last snapshot), then the process exits */
};

/* What else happens around a restart (bits). */
#define RV_CALM 1                      /* no writes or faults while down and for a while after */
#define RV_COMPACT 2                   /* a write, then the history compacted while down (410 on the saved RV) */
#define RV_UNREACHABLE 4               /* the server cannot be reached for a while after the restart */
#define RV_OTHER_CONFIG 8              /* restarted with another configuration (managedFields kept or not) */

struct restart {
	kr_ms_t at;                    /* virtual time of the kill or stop (the cut is armed then) */
	int how;                       /* RS_ */
	int reboot;                    /* crash: enum kr_sim_fs_reboot */
	long cut_after;                /* RS_CUT_MIDWRITE: changing calls before the power goes off */
	kr_ms_t down_ms;               /* how long the client is gone */
	int variant;                   /* RV_ bits */
	kr_ms_t window_ms;             /* RV_CALM: calm after the restart; RV_UNREACHABLE: the outage */
	int outage;                    /* RV_UNREACHABLE: KR_SIM_REFUSE or KR_SIM_BLACKHOLE */
};

/* What kreflect mirrors in one run, and how the run goes. */
struct scenario {
	int nres;
	struct kr_sim_filter flt[SIM_MAX_RES];
	struct kr_reflector_opts opts;
	size_t arena_bytes;            /* small ones force compaction and objects not held */
	int auth;                      /* a rotating bearer token from a file */
	kr_ms_t chaos_ms;              /* random writes and faults (0: none, a script instead) */
	kr_ms_t quiet1_ms, quiet2_ms;  /* then quiet; memory is compared after each */
	/* the state directory and restarts (tests/sim/README.md, property 6) */
	int state;                     /* kr_config.state_dir on the simulated flash */
	int state_interval_s;
	long max_stale_s;              /* -1 off */
	struct kr_sim_fs_faults fs_faults;
	int nrestarts;
	struct restart restarts[SIM_MAX_RESTARTS];
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

/* What the restarts of the run now ending did (for the regressions' checks). */
struct sim_restarts {
	int restarts;
	int restored;                  /* resources restored from the flash at a restart */
	int cold;                      /* resources that started without a usable snapshot */
	int warm_checked;              /* held to no LIST/watch-list in a calm window */
	int silent_checked;            /* and to no change event (nothing changed while down) */
	int offline_synced;            /* SYNCED restored while the server could not be reached */
};

const struct sim_restarts *sim_restarts(void);

#endif
