/*
 * Cuts the power at every step of a state snapshot and checks that the next
 * start finds the old snapshot or the new one, whole, never a mix and never
 * nothing when there was an old one.
 *
 * The input describes two mirrors: the one in the old snapshot (which may
 * not exist) and the one being written (objects kept, changed, deleted,
 * replaced with another uid, added; some larger than the snapshot's I/O
 * buffer; some present but not held). For every k, the new snapshot is
 * written with the power going off just before the k-th changing file
 * system call (create, write, fsync, close, rename, unlink, directory
 * fsync; tests/fuzz/memfs.h), until one k lets it finish. After each cut,
 * for each thing the disk may have kept (only what was made durable; every
 * name; everything; torn data), a fresh start loads the directory.
 *
 * With byte 0's bit 1, the same for the journal: the old snapshot is
 * loaded, half of the changes are appended as one journal group (the
 * journal is created), then the other half as a second group with the
 * power cut at every step; every start must find the state after the first
 * group or after the second.
 *
 * Each write also saves the relay's ring of changes (state_fixture.h): 3
 * records with the old mirror, 5 after the first journal group, 8 with the
 * new one. A start that loads a mirror must get back the ring written with
 * that same mirror, as a run from the first record.
 *
 * Input: byte 0: bit 0 an old snapshot exists, bit 1 the journal, bit 2 the
 * commits inline (else the way of the child process that kreflect uses by
 * default: the same steps, played by tests/fuzz/memfs.h); the rest, three
 * bytes per object: what happens to it, and two for its size.
 */
#include "state_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OBJS 24

struct obj {
	int res;
	char name[32];
	char uid[16];
	char rv[16];
	size_t len;                    /* 0 with held 0: present but not held */
	int held;
	int fill;
};

static struct obj old_m[MAX_OBJS], new_m[MAX_OBJS], mid_m[MAX_OBJS];
static int n_old, n_new, n_mid;
static unsigned char body[60000];

/* The image the cut starts from, copied back for every k and every mode. */
static struct memfs_inode saved_ino[MEMFS_INODES];
static unsigned char *saved_v[MEMFS_INODES], *saved_d[MEMFS_INODES];
static struct memfs_name saved_vdir[MEMFS_NAMES], saved_ddir[MEMFS_NAMES];

static void disk_save(void)
{
	int i;

	for (i = 0; i < MEMFS_INODES; i++) {
		if (!saved_v[i] && (!(saved_v[i] = malloc(MEMFS_BYTES)) || !(saved_d[i] = malloc(MEMFS_BYTES))))
			abort();
		saved_ino[i] = memfs.ino[i];
		memcpy(saved_v[i], memfs.ino[i].v, memfs.ino[i].vlen);
		memcpy(saved_d[i], memfs.ino[i].d, memfs.ino[i].dlen);
	}
	memcpy(saved_vdir, memfs.vdir, sizeof(saved_vdir));
	memcpy(saved_ddir, memfs.ddir, sizeof(saved_ddir));
}

static void disk_restore(void)
{
	int i;

	for (i = 0; i < MEMFS_INODES; i++) {
		unsigned char *v = memfs.ino[i].v, *d = memfs.ino[i].d;

		memfs.ino[i] = saved_ino[i];
		memfs.ino[i].v = v;
		memfs.ino[i].d = d;
		memcpy(v, saved_v[i], saved_ino[i].vlen);
		memcpy(d, saved_d[i], saved_ino[i].dlen);
	}
	memcpy(memfs.vdir, saved_vdir, sizeof(saved_vdir));
	memcpy(memfs.ddir, saved_ddir, sizeof(saved_ddir));
	for (i = 0; i < MEMFS_FDS; i++)
		memfs.fd[i].ino = -1;
	memfs.cut = -1;
	memfs.ops = 0;
}

static void fill_store(const struct obj *m, int n, const char *rv0, const char *rv1)
{
	int i;

	for (i = 0; i < n; i++) {
		char key[48];
		size_t j;

		snprintf(key, sizeof(key), "%s/%s", m[i].res ? "edge" : "default", m[i].name);
		for (j = 0; j < m[i].len; j++)
			body[j] = (unsigned char)(m[i].fill + j * 7);
		if (kr_store_put(&fx_store, m[i].res, key, strlen(key), m[i].rv, m[i].uid,
				 m[i].held ? (const char *)body : NULL, m[i].held ? m[i].len : 0, 0, NULL) < 0)
			abort();
	}
	fx_synced(rv0, rv1);
}

static const struct obj *find(const struct obj *m, int n, const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(m[i].name, name) == 0)
			return &m[i];
	return NULL;
}

/* Turns the store from mirror a into mirror b, telling the state module each change. */
static void apply_diff(const struct obj *a, int na, const struct obj *b, int nb)
{
	struct kr_event ev;
	char key[48];
	int i;
	size_t j;

	memset(&ev, 0, sizeof(ev));
	for (i = 0; i < na; i++) {
		if (find(b, nb, a[i].name))
			continue;
		snprintf(key, sizeof(key), "%s/%s", a[i].res ? "edge" : "default", a[i].name);
		if (kr_store_delete(&fx_store, a[i].res, key, strlen(key), NULL) != 1)
			abort();
		ev.type = KR_EV_DELETED;
		ev.res = a[i].res;
		ev.key = key;
		kr_state_event(&fx_st, &ev);
	}
	for (i = 0; i < nb; i++) {
		const struct obj *o = find(a, na, b[i].name);

		if (o && memcmp(o, &b[i], sizeof(*o)) == 0)
			continue;
		snprintf(key, sizeof(key), "%s/%s", b[i].res ? "edge" : "default", b[i].name);
		for (j = 0; j < b[i].len; j++)
			body[j] = (unsigned char)(b[i].fill + j * 7);
		if (o && o->res != b[i].res) {
			char okey[48];

			snprintf(okey, sizeof(okey), "%s/%s", o->res ? "edge" : "default", o->name);
			kr_store_delete(&fx_store, o->res, okey, strlen(okey), NULL);
			ev.type = KR_EV_DELETED;
			ev.res = o->res;
			ev.key = okey;
			kr_state_event(&fx_st, &ev);
		}
		if (kr_store_put(&fx_store, b[i].res, key, strlen(key), b[i].rv, b[i].uid,
				 b[i].held ? (const char *)body : NULL, b[i].held ? b[i].len : 0, 0, NULL) < 0)
			abort();
		ev.type = KR_EV_MODIFIED;
		ev.res = b[i].res;
		ev.key = key;
		kr_state_event(&fx_st, &ev);
	}
}

static void describe(const uint8_t *data, size_t size)
{
	size_t i;
	int k;

	n_old = n_new = 0;
	for (i = 1, k = 0; i + 3 <= size && k < MAX_OBJS; i += 3, k++) {
		struct obj o;
		int what = data[i] % 6;

		memset(&o, 0, sizeof(o));
		o.res = data[i] >> 7;
		snprintf(o.name, sizeof(o.name), "o%d", k);
		snprintf(o.uid, sizeof(o.uid), "u%d", k);
		snprintf(o.rv, sizeof(o.rv), "%d", 100 + k);
		o.len = ((size_t)data[i + 1] << 8 | data[i + 2]) % sizeof(body);
		o.held = (data[i] & 0x40) == 0 || o.len == 0;
		if (!o.held)
			o.len = 0;
		o.fill = k;
		/* 0 kept, 1 changed, 2 deleted, 3 another uid, 4 added, 5 kept */
		if (what != 4)
			old_m[n_old++] = o;
		if (what == 2)
			continue;
		if (what == 1 || what == 3 || what == 4) {
			snprintf(o.rv, sizeof(o.rv), "%d", 500 + k);
			o.len = o.held ? (o.len * 3 + 1) % sizeof(body) : 0;
			o.fill = k + 50;
		}
		if (what == 3)
			snprintf(o.uid, sizeof(o.uid), "v%d", k);
		new_m[n_new++] = o;
	}
	/* Halfway: the even objects as in the new mirror, the odd ones as in the old. */
	n_mid = 0;
	for (k = 0; k < MAX_OBJS; k++) {
		char name[32];
		const struct obj *o;

		snprintf(name, sizeof(name), "o%d", k);
		o = k % 2 ? find(old_m, n_old, name) : find(new_m, n_new, name);
		if (o)
			mid_m[n_mid++] = *o;
	}
}

static uint64_t h_old, h_new;     /* the ring's records with the old and the new mirror */

/* The load after a cut: old or new, whole; never nothing when there was an old. */
static void check_load(long k, int finished, int mode, int had_old, uint64_t d_old, uint64_t d_new)
{
	enum kr_state_load got;
	uint64_t d, h;

	fx_setup();
	got = kr_state_load(&fx_st);
	fx_check_store();
	d = got == KR_STATE_LOADED ? fx_digest() : 0;
	if (got == KR_STATE_LOADED ? d != d_old && d != d_new : had_old || (finished && mode == MEMFS_DURABLE)) {
		fprintf(stderr, "cut before change %ld (of a write %s), disk mode %d: loaded %d, %s\n", k,
			finished ? "finished" : "cut short", mode, got,
			got == KR_STATE_LOADED ? "a mirror that is neither the old nor the new"
					       : "the old state is lost");
		abort();
	}
	if (finished && mode == MEMFS_DURABLE && d != d_new) {
		fprintf(stderr, "a finished write is not the state loaded after a power cut\n");
		abort();
	}
	if (got != KR_STATE_LOADED)
		return;
	h = fx_history_back();
	if (!((d == d_old && h == h_old) || (d == d_new && h == h_new))) {
		fprintf(stderr, "cut before change %ld, disk mode %d: %llu records of the ring came back "
			"with the mirror (old %llu, new %llu)\n", k, mode, (unsigned long long)h,
			(unsigned long long)h_old, (unsigned long long)h_new);
		abort();
	}
}

/* Reboots the cut disk in every mode, checking each, and leaves it as it was. */
static void reboot_all(long k, int finished, int had_old, uint64_t d_old, uint64_t d_new)
{
	int mode, i;

	for (mode = 0; mode < MEMFS_MODES; mode++) {
		struct memfs_inode keep[MEMFS_INODES];
		struct memfs_name kv[MEMFS_NAMES], kd[MEMFS_NAMES];

		memcpy(keep, memfs.ino, sizeof(keep));
		memcpy(kv, memfs.vdir, sizeof(kv));
		memcpy(kd, memfs.ddir, sizeof(kd));
		memfs_reboot(mode);
		check_load(k, finished, mode, had_old, d_old, d_new);
		/* Lengths are all reboot changed (memfs.h: durable bytes are a prefix). */
		for (i = 0; i < MEMFS_INODES; i++) {
			unsigned char *v = memfs.ino[i].v, *dd = memfs.ino[i].d;

			memfs.ino[i] = keep[i];
			memfs.ino[i].v = v;
			memfs.ino[i].d = dd;
		}
		memcpy(memfs.vdir, kv, sizeof(kv));
		memcpy(memfs.ddir, kd, sizeof(kd));
	}
}

/* The journal: an old snapshot, one group appended, the second cut at step k. */
static void journal_run(void)
{
	uint64_t d_mid, d_new;
	long k;

	fx_setup();
	fill_store(mid_m, n_mid, "700", "701");
	d_mid = fx_digest();
	fx_setup();
	fill_store(new_m, n_new, "900", "901");
	d_new = fx_digest();
	for (k = 0;; k++) {
		int finished, r;

		disk_restore();
		fx_setup();
		if (kr_state_load(&fx_st) != KR_STATE_LOADED || fx_history_back() != 3)
			abort();
		apply_diff(old_m, n_old, mid_m, n_mid);
		fx_synced("700", "701");
		fx_hist_n = 5;
		if (kr_state_save(&fx_st, 1) != 1 || fx_digest() != d_mid)
			abort();
		apply_diff(mid_m, n_mid, new_m, n_new);
		fx_synced("900", "901");
		if (fx_digest() != d_new)
			abort();
		fx_hist_n = 8;
		h_old = 5;
		h_new = 8;
		memfs_cut(k);
		r = kr_state_save(&fx_st, 1);
		finished = memfs.ops < k;
		if (finished && r != 1)
			abort();
		reboot_all(k, finished, 1, d_mid, d_new);
		if (finished)
			break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t d_old = 0, d_new;
	int had_old;
	long k;

	if (size < 1)
		return 0;
	had_old = (data[0] & 3) != 0;
	fx_commit_inline = (data[0] & 4) != 0;
	describe(data, size);
	memfs_init();
	fx_hist_n = 3;
	h_old = 3;
	h_new = 8;
	/* The new mirror's digest, from a store that holds it. */
	fx_setup();
	fill_store(new_m, n_new, "900", "901");
	d_new = fx_digest();
	if (had_old) {
		fx_setup();
		fill_store(old_m, n_old, "400", "401");
		d_old = fx_digest();
		if (kr_state_save(&fx_st, 1) != 1)
			abort();
	}
	disk_save();
	if (data[0] & 2) {
		journal_run();
		return 0;
	}
	for (k = 0;; k++) {
		int finished, r;

		disk_restore();
		fx_setup();
		fill_store(new_m, n_new, "900", "901");
		fx_hist_n = 8;
		memfs_cut(k);
		r = kr_state_save(&fx_st, 1);
		finished = memfs.ops < k;
		if (finished && r != 1) {
			fprintf(stderr, "the snapshot failed with the power on: %d\n", r);
			abort();
		}
		reboot_all(k, finished, had_old, d_old, d_new);
		if (finished)
			break;
	}
	return 0;
}
