/*
 * The state directory's test bench: two resources (configmaps, secrets), a
 * store, the reflectors (never started: no network) and a kr_state over
 * tests/fuzz/memfs.h, rebuilt from nothing for every load, as after a
 * reboot. For fuzz_state_load and fuzz_state_crash.
 */
#ifndef KR_TEST_STATE_FIXTURE_H
#define KR_TEST_STATE_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreflect.h"
#include "log.h"
#include "loop.h"
#include "memfs.h"
#include "reflector.h"
#include "resource.h"
#include "state.h"
#include "store.h"

#define FX_ARENA (2u << 20)
#define FX_OBJECTS 256u
#define FX_DIR "/s"

static char fx_arena[FX_ARENA] __attribute__((aligned(16)));
static struct kr_entry fx_entries[FX_OBJECTS];
static int32_t fx_buckets[FX_OBJECTS];
static struct kr_store fx_store;
static struct kr_loop fx_loop;
static struct kr_reflect fx_top;
static struct kr_reflector fx_refl[2];
static struct kr_resource fx_res[2];
static struct kr_state fx_st;
static int fx_commit_inline;    /* 1: the state's fsync and rename inline, 0: the child's way */

int64_t __wrap_kr_port_wall_seconds(void);
void __wrap_kr_port_log_write(const char *line, size_t len);

/* A fixed clock: a snapshot's age and bytes do not depend on when the test runs. */
int64_t __wrap_kr_port_wall_seconds(void)
{
	return 1800000000;
}

/* Every line is one of kreflect's, and none is printed (the fuzzer would drown in them). */
void __wrap_kr_port_log_write(const char *line, size_t len)
{
	if (len < 11 || memcmp(line, "kreflect: ", 10) != 0 || line[len - 1] != '\n') {
		fprintf(stderr, "a log line not in kreflect's form: %.*s", (int)len, line);
		abort();
	}
	/* KR_STATE_FUZZ_LOG=1 shows them, to see what a seed does. */
	if (getenv("KR_STATE_FUZZ_LOG"))
		fprintf(stderr, "%.*s", (int)len, line);
}

/*
 * The relay's ring of changes, as the state sees it: records 0 .. fx_hist_n - 1,
 * record i a MODIFIED of default/h at resourceVersion i. What a load gives back
 * must be a run of them from 0, in order (each at most twice: a journal group
 * may repeat what its snapshot holds).
 */
static uint64_t fx_hist_n;
static uint64_t fx_hist_got;       /* the next record expected back */
static int fx_hist_bad;

static uint64_t fx_hist_walk(void *arg, uint64_t from,
			     void (*fn)(void *ctx, uint64_t seq, int res, int type, const char *key,
					size_t keylen, const char *rv, size_t rvlen),
			     void *ctx)
{
	char rv[24];
	uint64_t q;

	(void)arg;
	for (q = from; q < fx_hist_n; q++)
		fn(ctx, q, 0, 1, "default/h", 9, rv, (size_t)snprintf(rv, sizeof(rv), "%llu",
								      (unsigned long long)q));
	return fx_hist_n;
}

static void fx_hist_add(void *arg, uint64_t seq, int res, int type, const char *key, const char *rv)
{
	char want[24];

	(void)arg;
	if (seq < fx_hist_got)
		return;
	snprintf(want, sizeof(want), "%llu", (unsigned long long)seq);
	if (seq != fx_hist_got || res != 0 || type != 1 || strcmp(key, "default/h") != 0 ||
	    strcmp(rv, want) != 0)
		fx_hist_bad = 1;
	fx_hist_got = seq + 1;
}

static const struct kr_state_history fx_hist = { NULL, fx_hist_walk, fx_hist_add };

/* After a load: the ring saved with it, read back; returns how many records it holds. */
static inline uint64_t fx_history_back(void)
{
	fx_hist_got = 0;
	fx_hist_bad = 0;
	if (kr_state_history(&fx_st, &fx_hist) != 0 || fx_hist_bad) {
		fprintf(stderr, "the ring of changes saved with a loaded mirror is not a run from 0\n");
		abort();
	}
	return fx_hist_got;
}

/* Everything as at start-up, over the disk memfs holds now. */
static void fx_setup(void)
{
	struct kr_conn_cfg cfg;
	struct kr_reflector_opts ro;
	struct kr_state_opts so;
	char err[200];

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.host, sizeof(cfg.host), "k8s.example");
	cfg.port = 6443;
	if (kr_resource_lookup("configmaps", &fx_res[0], err, sizeof(err)) != 0 ||
	    kr_resource_lookup("secrets", &fx_res[1], err, sizeof(err)) != 0)
		abort();
	snprintf(fx_res[0].ns, sizeof(fx_res[0].ns), "default");
	snprintf(fx_res[1].ns, sizeof(fx_res[1].ns), "edge");
	kr_loop_init(&fx_loop);
	kr_store_init(&fx_store, fx_arena, sizeof(fx_arena), fx_entries, FX_OBJECTS, fx_buckets,
		      FX_OBJECTS, 4096);
	kr_reflector_opts_default(&ro);
	if (kr_reflect_init(&fx_top, &fx_loop, &fx_store, &cfg, &ro, fx_refl, fx_res, 2) != 0)
		abort();
	kr_state_opts_default(&so);
	so.dir = FX_DIR;
	so.commit_inline = fx_commit_inline;
	if (kr_state_init(&fx_st, &fx_top, &fx_loop, &so, err, sizeof(err)) != 0)
		abort();
	kr_state_history(&fx_st, &fx_hist);   /* nothing loaded yet: only the hook */
}

/* An order-free digest of the store and each resource's resourceVersion. */
static void fx_digest_fn(void *arg, const struct kr_store_view *v)
{
	uint64_t h = 0xcbf29ce484222325ull, *sum = arg;
	size_t i;

#define FX_MIX(p, n) for (i = 0; i < (n); i++) h = (h ^ ((const unsigned char *)(p))[i]) * 0x100000001b3ull
	FX_MIX(&v->res, sizeof(v->res));
	FX_MIX(v->key, v->keylen + 1);
	FX_MIX(v->rv, strlen(v->rv) + 1);
	FX_MIX(v->uid, strlen(v->uid) + 1);
	FX_MIX(&v->held, sizeof(v->held));
	if (v->held)
		FX_MIX(v->obj, v->objlen);
#undef FX_MIX
	*sum += h * 2 + 1;
}

static uint64_t fx_digest(void)
{
	uint64_t sum = kr_store_count(&fx_store, -1);
	int i;
	size_t j;

	kr_store_foreach(&fx_store, -1, fx_digest_fn, &sum);
	for (i = 0; i < 2; i++)
		for (j = 0; fx_refl[i].last_rv[j]; j++)
			sum = sum * 31 + (unsigned char)fx_refl[i].last_rv[j];
	return sum;
}

/* Marks both resources synced at rv, as after a watch: a snapshot may be taken. */
static void fx_synced(const char *rv0, const char *rv1)
{
	char a[KR_RV_MAX], b[KR_RV_MAX];

	/* rv0 and rv1 may be the reflectors' own (a restored mirror saved again). */
	snprintf(a, sizeof(a), "%s", rv0);
	snprintf(b, sizeof(b), "%s", rv1);
	fx_refl[0].synced = fx_refl[1].synced = 1;
	memcpy(fx_refl[0].last_rv, a, sizeof(a));
	memcpy(fx_refl[1].last_rv, b, sizeof(b));
}

static void fx_check_store(void)
{
	const char *why = NULL;

	if (kr_store_check(&fx_store, &why) != 0) {
		fprintf(stderr, "the store is broken after a load: %s\n", why);
		abort();
	}
}

#endif /* KR_TEST_STATE_FIXTURE_H */
