/*
 * The simulated device's flash: the state directory's calls (kr_port_fs_*)
 * over the in-memory file system with power cuts of tests/fuzz/memfs.h (one
 * implementation for the fuzz targets and the simulation). Deterministic: a
 * seed's faults come from a generator of its own, so the state directory's
 * calls draw nothing from the world's.
 *
 * What a crash loses is memfs's: bytes not fsynced, names not made durable
 * by a directory fsync (kr_sim_fs_reboot picks how much of it reached the
 * disk). Faults, per seed: a failed write, fsync, create, rename or
 * directory fsync (I/O error or a full disk), and slow fsyncs that block
 * kreflect's thread while the world's clock runs on (kr_sim_block).
 */
#include "sim.h"

#define MEMFS_FN(name) kr_port_fs_##name
#define MEMFS_FD0 200                  /* apart from the sockets (100..) and lookups (150..) */
#include "../../tests/fuzz/memfs.h"

static struct {
	uint64_t rng;
	struct kr_sim_fs_faults f;
	struct kr_sim_fs_stats st;
} fs;

static uint64_t fs_rand(void)
{
	uint64_t z = (fs.rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int fs_chance(unsigned permille)
{
	return fs_rand() % 1000 < permille;
}

static int fault(int op)
{
	fs.st.ops++;
	if (op == MEMFS_OP_SYNC || op == MEMFS_OP_SYNC_DIR) {
		fs.st.syncs++;
		if (fs.f.slow_sync_permille && fs_chance(fs.f.slow_sync_permille)) {
			kr_ms_t ms = 1 + (kr_ms_t)(fs_rand() % (uint64_t)(fs.f.slow_sync_max_ms > 0 ? fs.f.slow_sync_max_ms : 1));

			fs.st.slow_syncs++;
			fs.st.slow_ms += (uint64_t)ms;
			kr_sim_trace("fs: a slow fsync blocks kreflect for %lld ms", (long long)ms);
			kr_sim_block(ms);
		}
	}
	/* A close of a written file is where NFS reports errors; not injected (Linux local fs). */
	if (op == MEMFS_OP_CLOSE || op == MEMFS_OP_UNLINK || !fs.f.fail_permille || !fs_chance(fs.f.fail_permille))
		return 0;
	fs.st.failures++;
	kr_sim_trace("fs: an injected failure of call %d", op);
	return fs_chance(300) ? KR_ENOSPC : KR_EIO;
}

void kr_sim_fs_reset(uint64_t seed)
{
	memfs_init();
	memset(&fs, 0, sizeof(fs));
	fs.rng = seed ^ 0x5eed0f1a5bull;
	memfs.fault = fault;
	/* The directory is created by kreflect's first start (mkdir answers "exists" from then on). */
	memfs.dir_exists = 1;
}

void kr_sim_fs_set_faults(const struct kr_sim_fs_faults *f)
{
	fs.f = *f;
}

uint64_t kr_sim_fs_rand(void)
{
	return fs_rand();
}

void kr_sim_fs_exit(void)
{
	memfs_close_all();
}

void kr_sim_fs_cut_after(long k)
{
	memfs_cut(k);
}

int kr_sim_fs_power_off(void)
{
	return memfs_power_off();
}

void kr_sim_fs_reboot(int mode)
{
	memfs_reboot(mode);
}

const struct kr_sim_fs_stats *kr_sim_fs_stats(void)
{
	return &fs.st;
}

size_t kr_sim_fs_size(const char *path, int durable)
{
	struct memfs_name *e = memfs_find(durable ? memfs.ddir : memfs.vdir, path);

	return e ? (durable ? memfs.ino[e->ino].dlen : memfs.ino[e->ino].vlen) : 0;
}
