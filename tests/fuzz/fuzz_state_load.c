/*
 * Fuzzes the state loader: the snapshot and the journal kreflect trusts at
 * start-up to skip the first list. Whatever the bytes (truncated,
 * bit-flipped, another version, counts in the billions, records out of
 * order), the load either restores a whole snapshot (plus the journal's
 * whole groups) or nothing: rejected, the store is empty and no resource
 * starts from a restored resourceVersion (a normal sync follows).
 * Restored, the store passes kr_store_check, and the mirror written again
 * loads back the same.
 *
 * Input: byte 0, bit 0: the rest follows a valid header for the bench's
 * configuration (so the fuzzer works on the records rather than the
 * configuration hash); bit 1: the rest is a journal, after a valid
 * snapshot of two objects; else the rest is the snapshot file; bit 2: that
 * header says version 1 (which has no history records).
 *
 * A restored mirror's history records are read again (kr_state_history,
 * as a relay does): that pass must succeed on what the load took, and give
 * back only records in bounds.
 */
#include "state_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char file[MEMFS_BYTES];

static unsigned long hist_seen;

static uint64_t hist_walk(void *arg, uint64_t from,
			  void (*fn)(void *ctx, uint64_t seq, int res, int type, const char *key,
				     size_t keylen, const char *rv, size_t rvlen),
			  void *ctx)
{
	(void)arg;
	(void)fn;
	(void)ctx;
	return from;
}

static void hist_add(void *arg, uint64_t seq, int res, int type, const char *key, const char *rv)
{
	(void)arg;
	(void)seq;
	if (res < 0 || res > 1 || type < 0 || type > 3 || strlen(key) >= KR_KEY_MAX ||
	    strlen(rv) >= KR_RV_MAX || (type == 3) != (*key == '\0')) {
		fprintf(stderr, "a history record out of bounds was given back\n");
		abort();
	}
	hist_seen++;
}

static const struct kr_state_history hist = { NULL, hist_walk, hist_add };

/* A valid snapshot of generation 7: two objects, written by kreflect's own code. */
static void base_snapshot(void)
{
	static const char cm[] = "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}";

	fx_setup();
	kr_store_put(&fx_store, 0, "default/a", 9, "5", "u1", cm, sizeof(cm) - 1, 0, NULL);
	kr_store_put(&fx_store, 1, "edge/b", 6, "6", "u2", NULL, 0, 0, NULL);
	fx_synced("10", "11");
	fx_st.gen = 6;
	if (kr_state_save(&fx_st, 1) != 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum kr_state_load got;
	size_t n = 0;
	uint64_t d;
	int i, journal;
	uint32_t version;

	if (size < 1 || size > MEMFS_BYTES - KR_STATE_HEADER_BYTES)
		return 0;
	journal = data[0] & 2;
	version = data[0] & 4 ? 1 : KR_STATE_VERSION;
	memfs_init();
	if (journal)
		base_snapshot();
	else
		fx_setup();
	if (data[0] & 1) {
		if (journal)
			kr_state_journal_header(file, version, fx_st.config, 7);
		else
			kr_state_header(file, version, 2, fx_st.config, 1800000000 - 60, 3);
		n = journal ? KR_STATE_JOURNAL_HEADER_BYTES : KR_STATE_HEADER_BYTES;
	}
	memcpy(file + n, data + 1, size - 1);
	memfs_put(journal ? FX_DIR "/journal" : FX_DIR "/state", file, n + size - 1);
	fx_setup();
	got = kr_state_load(&fx_st);
	fx_check_store();
	if (got != KR_STATE_LOADED) {
		if (kr_store_count(&fx_store, -1) != 0 || fx_store.used != 0) {
			fprintf(stderr, "a rejected snapshot left %zu objects in the store\n",
				kr_store_count(&fx_store, -1));
			abort();
		}
		for (i = 0; i < 2; i++)
			if (fx_refl[i].restored || fx_refl[i].last_rv[0]) {
				fprintf(stderr, "a rejected snapshot restored a resourceVersion\n");
				abort();
			}
		return 0;
	}
	for (i = 0; i < 2; i++)
		if (!fx_refl[i].restored || !fx_refl[i].last_rv[0])
			abort();
	hist_seen = 0;
	if (kr_state_history(&fx_st, &hist) != 0 || hist_seen != fx_st.hist_restored) {
		fprintf(stderr, "the history of a snapshot that loaded could not be read again\n");
		abort();
	}
	/* What was restored is written again and reads back the same. */
	d = fx_digest();
	fx_synced(fx_refl[0].last_rv, fx_refl[1].last_rv);
	if (kr_state_save(&fx_st, 1) != 1) {
		fprintf(stderr, "a restored mirror could not be saved again\n");
		abort();
	}
	fx_setup();
	if (kr_state_load(&fx_st) != KR_STATE_LOADED || fx_digest() != d) {
		fprintf(stderr, "a restored mirror saved again does not load to the same mirror\n");
		abort();
	}
	return 0;
}
