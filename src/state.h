/*
 * The state directory: snapshots of the mirror on flash, so that a restart
 * resumes the watch where it stopped instead of listing everything again.
 *
 * DIR/state, replaced whole: written as DIR/state.tmp, fsynced, renamed
 * over the old one, the directory fsynced. Between snapshots, the objects
 * that changed are appended to DIR/journal in groups, each fsynced and
 * ended by a commit record: a flash write costs the changes, not the whole
 * mirror. A power cut at any point leaves the old state or the new one,
 * never a mix: a snapshot is whole or not there, a group counts only with
 * its commit record, and a journal counts only for the snapshot (generation)
 * it follows. Once the journal outgrows the snapshot, the next write is a
 * snapshot again (which starts a new journal).
 *
 * Format (version 1, integers little-endian, every record with a CRC-32 of
 * its bytes, the CRC last):
 *
 *     header   "KRSTATE\n" u32 version  u32 nres  u64 config  i64 written_s
 *              u64 generation  u32 crc                           (44 bytes)
 *     resource 'R' u8 rvlen u16 res u32 count i64 bookmark_gap_ms rv[rvlen]
 *              u32 crc                                 (one per resource; rvlen 0:
 *                                                      the mirror was partial, list on restart)
 *     object   'O' u8 rvlen u8 uidlen u8 held u16 res u16 keylen u32 objlen
 *              key rv uid obj[objlen] u32 crc       (count of each resource)
 *     history  'H' u8 type u8 rvlen u8 0 u16 res u16 keylen u64 seq key rv u32 crc
 *              (version 2, any number, oldest first: the --listen relay's ring
 *              of changes, so that its watchers resume across its restart)
 *     end      'E' 0 0 0 u32 objects u32 crc
 *
 * Journal: "KRJOURN\n" u32 version u64 config u64 generation u32 crc, then
 * groups of object records (as above: the object now), delete records
 * 'D' 0 u16 res u16 keylen key u32 crc, history records (version 2: the
 * ring's records since the last write), resource records (as above: the
 * resourceVersion now) and a commit 'C' 0 0 0 u32 records u32 crc.
 *
 * Version 1 (no history records) still loads; version 2 is written. A
 * history record's seq numbers the ring's records: one that does not follow
 * the record before it (the ring passed records between two writes) starts
 * the history afresh, so what is restored never has a hole.
 *
 * `config` is a hash of what the mirror depends on: the server, each
 * resource (group, version, plural, namespace, selectors) and whether
 * managedFields are kept. A snapshot with another hash, another version, a
 * bad CRC, a count that does not add up, or a record that does not fit is
 * ignored as a whole (the store is emptied again): never half-used.
 *
 * No heap: objects stream out of the store and back into its free tail
 * through the one buffer in struct kr_state. Snapshots are coalesced for
 * flash: at most one per interval, none while no object changed (a
 * bookmark alone is not worth a write), one more at a clean stop.
 */
#ifndef KR_STATE_H
#define KR_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "kreflect_config.h"
#include "loop.h"
#include "port.h"
#include "sink.h"

/* The I/O buffer a snapshot streams through. */
#ifndef KR_STATE_BUFFER_BYTES
#define KR_STATE_BUFFER_BYTES 16384u
#endif
/* Firmware builds may persist by default: -DKR_STATE_DIR_DEFAULT='"/data/kreflect"'. */
#ifndef KR_STATE_DIR_DEFAULT
#define KR_STATE_DIR_DEFAULT ""
#endif

/* Changed keys remembered for the journal; more changes than fit: a snapshot. */
#ifndef KR_STATE_JOURNAL_KEY_BYTES
#define KR_STATE_JOURNAL_KEY_BYTES 16384u
#endif

#define KR_STATE_VERSION 2u            /* written; 1 (no history records) still loads */
#define KR_STATE_HEADER_BYTES 44u
#define KR_STATE_JOURNAL_HEADER_BYTES 32u

struct kr_reflect;

/* The relay's ring of changes, saved with the mirror (src/serve.c has it). */
struct kr_state_history {
	void *arg;
	/* Gives fn each record numbered from `from` on, oldest first; returns the next number. */
	uint64_t (*walk)(void *arg, uint64_t from,
			 void (*fn)(void *ctx, uint64_t seq, int res, int type, const char *key,
				    size_t keylen, const char *rv, size_t rvlen),
			 void *ctx);
	/* One record read back (key "" for a mark), in the order written. */
	void (*add)(void *arg, uint64_t seq, int res, int type, const char *key, const char *rv);
};

struct kr_state_opts {
	const char *dir;               /* NULL or "": no state directory */
	int interval_ms;               /* at most one snapshot per interval (default 60000) */
	long max_stale_s;              /* a restored mirror this young counts as synced offline; < 0 off */
	int commit_inline;             /* 1: fsync, rename and directory fsync inside the loop;
					  0: in a child process (kr_port_fs_commit_start) while
					  the loop goes on, inline where the port has none */
};

/* What the last load found. */
enum kr_state_load {
	KR_STATE_NONE,                 /* no snapshot (first start) */
	KR_STATE_LOADED,               /* the mirror was restored */
	KR_STATE_OTHER_CONFIG,         /* written for another configuration: ignored */
	KR_STATE_INVALID,              /* corrupt, truncated, another version: ignored */
	KR_STATE_UNREADABLE,           /* the file system failed: ignored */
};

struct kr_state {
	struct kr_state_opts o;
	struct kr_reflect *top;
	char dir[KR_STATE_PATH_MAX];
	char path[KR_STATE_PATH_MAX + 8];
	char tmp[KR_STATE_PATH_MAX + 12];
	char jpath[KR_STATE_PATH_MAX + 12];
	uint64_t config;               /* hash of the configuration the mirror depends on */
	struct kr_timer timer;
	int dirty;                     /* an object changed since the last snapshot */
	kr_ms_t last_write;            /* when the last snapshot was written (0: never) */
	char saved_rv[KR_MAX_RESOURCES][KR_RV_MAX];  /* RVs the last write holds */

	/* the journal */
	uint64_t gen;                  /* generation of the snapshot on disk */
	int journal_ok;                /* changes may be appended after that snapshot */
	int journal_exists;            /* the journal of this generation was created */
	int overflow;                  /* changes not remembered key by key: next, a snapshot */
	uint64_t not_held_sum;         /* of the objects present but not held, as on disk */
	uint64_t journal_bytes;        /* appended since the snapshot */
	size_t jlen;                   /* bytes used in jkeys */
	char jkeys[KR_STATE_JOURNAL_KEY_BYTES]; /* changed keys: res byte, key, NUL */
	unsigned long appends;
	unsigned long replayed_groups; /* journal groups the load applied */

	/* the ring of changes (NULL: none is saved) */
	const struct kr_state_history *hist;
	uint64_t hist_next;            /* the first record the next journal group writes */
	unsigned long hist_restored;   /* records kr_state_history gave back */
	uint32_t version;              /* of the snapshot being read */

	/* what the load found */
	enum kr_state_load load;
	int64_t written_s;             /* wall time the loaded snapshot was written */
	size_t loaded_objects;
	uint64_t loaded_bytes;

	/* figures */
	unsigned long snapshots, failures, postponed;
	uint64_t bytes_written;        /* by every snapshot together */
	uint64_t last_bytes;           /* the last snapshot's size */
	size_t last_objects;

	/* a write whose fsync and rename run in a child */
	struct kr_source commit;       /* its pipe, in the loop while it runs */
	int committing;
	int closing;                   /* kr_state_close: everything inline from here */
	int c_journal;
	uint32_t c_objects;
	kr_ms_t c_t0;
	kr_ms_t c_loop;                /* of its time, the part spent in the loop (writing) */

	/* streaming */
	int fd;
	int err;
	int short_read;                /* the file ended in the middle of a record */
	uint64_t total;                /* bytes through the current file */
	uint32_t crc;                  /* of the record in progress */
	size_t len, pos;               /* buf: bytes held, bytes taken (reading) */
	unsigned char buf[KR_STATE_BUFFER_BYTES];
};

/* Defaults: no directory, 60 s interval, offline start off. */
void kr_state_opts_default(struct kr_state_opts *o);

/*
 * Sets st up for top (after kr_reflect_init, before kr_reflect_start):
 * creates the directory (mode 0700) if missing. Returns 0, or KR_ETOOBIG /
 * KR_EIO with the reason in why[0..size). Does not read anything yet.
 */
int kr_state_init(struct kr_state *st, struct kr_reflect *top, struct kr_loop *loop,
		  const struct kr_state_opts *o, char *why, size_t size);

/*
 * Loads DIR/state into top's store (which must be empty) and hands each
 * resource its resourceVersion (kr_reflect_restore). Anything wrong with the
 * file leaves the store empty, logs why, and returns the kind in st->load;
 * the reflectors then sync as on a first start. Returns st->load.
 */
enum kr_state_load kr_state_load(struct kr_state *st);

/* Age in seconds of the loaded snapshot (wall clock); 0 if none or in the future. */
int64_t kr_state_age_s(const struct kr_state *st);

/*
 * The sink: object changes mark the mirror dirty and arm the coalescing
 * timer. Register it with kr_reflect_add_sink(top, {kr_state_event, st}).
 */
void kr_state_event(void *arg, const struct kr_event *ev);

/*
 * Writes the changes now if every resource is at a consistent point (not in
 * the middle of a relist): a journal group, or a snapshot when there is no
 * journal to append to or it has outgrown the snapshot. Returns 1 if
 * written, 0 if postponed or nothing to write, or a negative KR_E code
 * (logged; the state on disk is intact, the next write is a snapshot).
 * force: write even if nothing changed. Unless commit_inline, the fsync and
 * rename run in a child: 1 then means written and being made durable (the
 * outcome is logged when it is known); meanwhile a write waits (force: for
 * the child).
 */
int kr_state_save(struct kr_state *st, int force);

/*
 * From now on each write saves h's records too, and, if the load restored
 * the mirror, the records saved with it are given to h->add (read again
 * from the snapshot and its journal). Call before the loop runs. Returns 0
 * or a negative KR_E code (the history is then not restored; the mirror is).
 */
int kr_state_history(struct kr_state *st, const struct kr_state_history *h);

/* At a clean stop: one last snapshot if objects or resourceVersions moved since the last one. */
void kr_state_close(struct kr_state *st);

/* Encodes the snapshot header for config into out[KR_STATE_HEADER_BYTES] (tests and seeds). */
void kr_state_header(unsigned char *out, uint32_t version, uint32_t nres, uint64_t config,
		     int64_t written_s, uint64_t gen);

/* Encodes a journal header into out[KR_STATE_JOURNAL_HEADER_BYTES] (tests and seeds). */
void kr_state_journal_header(unsigned char *out, uint32_t version, uint64_t config, uint64_t gen);

/* CRC-32 (IEEE) of p[0..n) continued from crc (start with 0). */
uint32_t kr_state_crc32(uint32_t crc, const void *p, size_t n);

#endif /* KR_STATE_H */
