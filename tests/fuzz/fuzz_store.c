/*
 * Fuzzes the store: the first bytes of the input choose the arena size and
 * alignment, the index and bucket sizes, a hash mask (to force full-hash
 * collisions) and the reserve; the rest is a sequence of operations (puts
 * copied in, committed from the scratch in place or moved down, key-only puts,
 * puts of objects that live in the arena, deletes, scratch calls that may
 * compact, marks, sweeps, explicit compactions) run on the store and on the
 * reference model in store_model.h. After every operation the model checks
 * the exact return code and the entry touched; every VERIFY_EVERY operations
 * and at the end, the tail, garbage, counters and every view byte for byte,
 * and kr_store_check walks the arena. abort() on any disagreement.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "store_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STEPS 4000
/* Full verification (every view, counters, kr_store_check) every few steps and at
 * the end: each step still checks its own return code and entry. Comparison
 * tracing makes the full check dominate otherwise. */
#define VERIFY_EVERY 8

static struct sm model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sm_rd rd = { data, size, 0 };
	struct sm_params p;
	int line;

	sm_params_from(&rd, &p);
	sm_init(&model, &p);
	model.verify_every = VERIFY_EVERY;
	while (rd.n && model.steps < MAX_STEPS) {
		line = sm_step(&model, &rd);
		if (line) {
			fprintf(stderr, "fuzz_store: step %lu: store_model.h:%d: %s\n", model.steps,
				line, model.fail_what ? model.fail_what : "?");
			abort();
		}
	}
	line = sm_verify(&model);
	if (line) {
		fprintf(stderr, "fuzz_store: at the end: store_model.h:%d: %s\n", line,
			model.fail_what ? model.fail_what : "?");
		abort();
	}
	return 0;
}
