/*
 * The simulated port: a deterministic world for kreflect, chosen with PORT=sim.
 *
 * port.h is implemented over a virtual monotonic clock that never sleeps
 * (kr_port_poll advances it to the next deadline or world event), an
 * in-process network (simulated descriptors: name lookups, connects, byte
 * streams with latency, resets, end of file, stalls and random read sizes)
 * and a model of a Kubernetes API server that answers kreflect's HTTP/1.1
 * requests byte by byte with the semantics of tests/apiserver (objects with
 * uid and resourceVersion, history and compaction, LIST with limit and
 * continue, WATCH with bookmarks and watch-list). A fault injector (chaos.c)
 * changes the server's state and the network's weather over time.
 *
 * Everything comes from one PRNG seeded by kr_sim_reset: the same seed gives
 * the same run, byte for byte, kreflect's own jitter included (its entropy
 * comes from the same PRNG). The world is static storage, one per process;
 * kr_sim_reset starts it over for the next seed.
 *
 * The driver (tests/sim/) configures the world, runs kreflect's loop over it
 * and checks properties with the queries below.
 */
#ifndef KR_SIM_H
#define KR_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "port.h"

#define KR_SIM_NEVER INT64_MAX         /* a time that never comes */

/* --- the world ----------------------------------------------------------------------- */

/* Starts the world over: time 0, no sockets, empty model, PRNG seeded with seed. */
void kr_sim_reset(uint64_t seed);

/* Trace every world event and kreflect's log lines (all levels) on stderr. */
void kr_sim_set_trace(int on);
int kr_sim_tracing(void);

/* Writes one trace line "[   12.345] sim: ..." when tracing; costs nothing otherwise. */
void kr_sim_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Called at the start of every kr_port_poll, before time moves: the driver
 * tags new descriptors with their owner (kr_sim_tag) and drains observations.
 */
void kr_sim_set_poll_hook(void (*fn)(void *arg), void *arg);

/* The next 64 bits of the one PRNG; a uniform value in [0, n) (0 when n is 0). */
uint64_t kr_sim_rand(void);
uint64_t kr_sim_below(uint64_t n);
/* A uniform value in [lo, hi] (inclusive); lo when hi <= lo. */
int64_t kr_sim_range(int64_t lo, int64_t hi);
/* 1 with probability permille/1000. */
int kr_sim_chance(unsigned permille);

/* Polls made; instants at which the world kept changing after 1000 rounds (must stay 0). */
unsigned long kr_sim_polls(void);
unsigned long kr_sim_unsettled(void);

/* --- the model: resource types, objects, history ------------------------------------ */

enum kr_sim_type {
	KR_SIM_CONFIGMAPS,
	KR_SIM_SECRETS,
	KR_SIM_DEPLOYMENTS,
	KR_SIM_NAMESPACES,             /* cluster-scoped */
	KR_SIM_NTYPES
};

#define KR_SIM_SLOTS 40                /* possible objects (names) per type */
#define KR_SIM_NAMESPACES_USED 3       /* "default", "kube-system", "edge" */
#define KR_SIM_TIERS 3                 /* label tier: "edge", "core", "batch" */
#define KR_SIM_ARCHIVE_MAX 32768       /* writes per run (every event ever, by rv) */

enum kr_sim_etype { KR_SIM_ADDED = 1, KR_SIM_MODIFIED, KR_SIM_DELETED };

/* One version of one object; everything else (its JSON) is derived from it. */
struct kr_sim_ver {
	uint64_t rv;                   /* its resourceVersion */
	uint32_t uid;                  /* creation number: a new one on every create */
	uint32_t content;              /* seed of its data */
	uint32_t size;                 /* bytes of payload */
	uint8_t tier;                  /* label tier=... */
	uint8_t present;
};

/* One write: the rv-th event of the run. */
struct kr_sim_event {
	uint8_t etype;                 /* enum kr_sim_etype */
	uint8_t type;                  /* enum kr_sim_type */
	uint16_t slot;
	struct kr_sim_ver cur;         /* new state; DELETED: the last state with the delete's rv */
	struct kr_sim_ver prev;        /* the state before (present 0 for ADDED) */
};

/* What one list or watch selects: a type, a namespace (or all) and a label selector. */
enum kr_sim_selop { KR_SIM_SEL_NONE, KR_SIM_SEL_EQ, KR_SIM_SEL_NE };

struct kr_sim_filter {
	int type;
	int ns;                        /* namespace index, -1 = all, -2 = one we do not have */
	int selop;                     /* label selector tier=x or tier!=x */
	int tier;
};

/* Static facts about a type. */
const char *kr_sim_type_plural(int type);
const char *kr_sim_type_kind(int type);
const char *kr_sim_type_api_version(int type);     /* "v1", "apps/v1" */
int kr_sim_type_namespaced(int type);
const char *kr_sim_namespace(int ns);
const char *kr_sim_tier(int tier);

/* The key ("ns/name" or "name") of a slot, and the slot of a key (-1 if none). */
const char *kr_sim_key(int type, int slot);
size_t kr_sim_key_len(int type, int slot);
int kr_sim_slot_of(int type, const char *key, size_t len);
/* The namespace index of a slot (-1 for cluster-scoped types). */
int kr_sim_slot_ns(int type, int slot);

/* Does version v of (type, slot) match f? */
int kr_sim_match(const struct kr_sim_filter *f, int type, int slot, const struct kr_sim_ver *v);

/* The current state of (type, slot): its version (present 0 when absent). */
const struct kr_sim_ver *kr_sim_current(int type, int slot);

/* The current resourceVersion, the compaction point, the first rv of the run. */
uint64_t kr_sim_rv(void);
uint64_t kr_sim_compacted_rv(void);
uint64_t kr_sim_start_rv(void);

/* The write that produced rv (start_rv < rv <= current), or NULL. */
const struct kr_sim_event *kr_sim_event_at(uint64_t rv);

/* Writes; each is one event and bumps the resourceVersion. 0, or -1 if not possible. */
int kr_sim_create(int type, int slot);
int kr_sim_update(int type, int slot);
int kr_sim_delete(int type, int slot);
/* A label change that moves the object into or out of selections. */
int kr_sim_relabel(int type, int slot);
/* Payload bytes of the following creates and updates (0: drawn at random again). */
void kr_sim_force_size(uint32_t size);
/* Forgets the history up to rv (clamped to the current rv). */
void kr_sim_compact(uint64_t rv);
/* History kept: older events are compacted after every write. */
void kr_sim_set_history_cap(uint64_t cap);

/* Internal to the port: the model's reset, key order, size mix and snapshots. */
void kr_sim_model_reset(uint64_t start_rv);
const int *kr_sim_sorted(int type);               /* slots in key order (LIST order) */
void kr_sim_set_large_permille(unsigned p);       /* share of large payloads, per mille */
void kr_sim_snapshot(int type, uint64_t at, struct kr_sim_ver out[KR_SIM_SLOTS]);

/* Object JSON forms. */
enum kr_sim_form {
	KR_SIM_FULL,                   /* on the wire in watch events: kind, apiVersion, managedFields */
	KR_SIM_ITEM,                   /* in a typed list: no kind, no apiVersion */
	KR_SIM_CANON,                  /* as kreflect stores it: kind, apiVersion, no managedFields */
};

/*
 * Writes the JSON of version v of (type, slot) in form into buf (cap bytes).
 * Returns its length, or 0 if it does not fit.
 */
size_t kr_sim_object_json(char *buf, size_t cap, int type, int slot, const struct kr_sim_ver *v,
			  int form);

/* The uid string of creation number uid (36 characters and a NUL). */
void kr_sim_uid_string(uint32_t uid, char out[40]);

/* Largest object JSON the model writes (payload included). */
#define KR_SIM_OBJECT_MAX 49152

/* --- the server's settings (chosen per seed by kr_sim_chaos_setup) -------------------------- */

struct kr_sim_server_settings {
	int watch_list;                /* the WatchList feature gate (else 422 on sendInitialEvents) */
	int bookmark_ms;               /* periodic BOOKMARK interval; 0 = never */
	int pretimeout_bookmark;       /* one more 2 s before the watch deadline */
	int rv0_ignores_limit;         /* LIST resourceVersion=0 served whole */
	int list_chunked;              /* LIST bodies chunked (else Content-Length) */
	int keepalive_close_ms;        /* idle kept-alive connections closed after this; 0 = never */
	int latency_min_ms, latency_max_ms;  /* one way, per connection */
	int require_auth;              /* requests need a bearer token the server accepts (else 401) */
};

const struct kr_sim_server_settings *kr_sim_server(void);

/* --- bearer tokens: a file kreflect reads, tokens the server accepts -------------------------- */

#define KR_SIM_TOKEN_FILE "/var/run/secrets/kubernetes.io/serviceaccount/token"

/* Writes the first token to KR_SIM_TOKEN_FILE and makes the server require it. */
void kr_sim_auth_setup(void);
/* Rotates now: 0 graceful, 1 server first, 2 file first, 3 both at once (the old token refused). */
void kr_sim_auth_rotate(int how);
/* Does the server accept this token now? */
int kr_sim_auth_ok(const char *token, size_t len);
/* Is token still what the file holds (so kreflect's re-read after a 401 finds nothing new)? */
int kr_sim_auth_file_is(const char *token);

/* --- faults ----------------------------------------------------------------------------------- */

enum kr_sim_weather {
	KR_SIM_CLEAR,                  /* no faults */
	KR_SIM_FLAKY,                  /* random per-request and per-connection faults */
	KR_SIM_REFUSE,                 /* outage: connects refused, open connections reset */
	KR_SIM_BLACKHOLE,              /* outage: connects hang, open connections deliver nothing */
	KR_SIM_DOWN,                   /* outage: every request answered 500 or 503, watches cut */
	KR_SIM_NODNS,                  /* outage: name lookups fail */
	KR_SIM_THROTTLE,               /* every request 429 with Retry-After */
	KR_SIM_MANGLE,                 /* outage: every body broken (bad chunk, not JSON, cut short) */
	KR_SIM_NWEATHER
};

const char *kr_sim_weather_name(int w);

/* What happens to one request; chosen by kr_sim_chaos_request. */
enum kr_sim_evfault {
	KR_SIM_EV_NONE,
	KR_SIM_EV_ERROR,               /* an ERROR event (code in ev_code) and a clean end */
	KR_SIM_EV_END,                 /* a clean end (terminating chunk) */
	KR_SIM_EV_GARBAGE,             /* a line that is not JSON */
	KR_SIM_EV_BAD_CHUNK,           /* a chunk header that is not hex, then silence */
	KR_SIM_EV_RESET,               /* the connection is reset */
	KR_SIM_EV_CUT,                 /* watch: the next line cut short, its newline, then whole lines */
};

struct kr_sim_fault {
	int status;                    /* answer with this status (0: serve normally) */
	int retry_after;               /* Retry-After seconds (-1: none) */
	int retry_after_date;          /* sent as an HTTP date instead of seconds */
	int too_large;                 /* status 504 with the TooLarge cause */
	int compact_first;             /* compact the history before serving */
	int64_t reset_after;           /* response bytes, then a TCP reset (-1: none) */
	int64_t eof_after;             /* response bytes, then the server closes (-1: none) */
	int64_t stall_after;           /* response bytes, then the server pauses stall_ms */
	int stall_ms;
	int64_t freeze_after;          /* response bytes read, then the link delivers nothing for
					  freeze_ms (cut there exactly: mid-object, mid-record) */
	int freeze_ms;
	int freeze_step;               /* then a trickle: freeze_step bytes between freezes of */
	int freeze_times;              /* freeze_ms, freeze_times more times (0: one freeze) */
	int ev_after;                  /* watch: events (bookmarks included), list: items, before ev_fault */
	int ev_fault;                  /* enum kr_sim_evfault */
	int ev_code;                   /* ERROR event code: 410, 500, 429, 504 */
	int no_initial_end;            /* watch-list: never send the initial-events-end bookmark */
	int initial_end_delay_ms;      /* watch-list: live events first, the bookmark after */
	int reject_watch_list;         /* 422 as a server without the WatchList gate */
	int close_after;               /* Connection: close after this response */
	int chunk_max;                 /* HTTP chunk size limit for this body (0: whole pieces) */
	int merge_bytes;               /* pieces gathered into one chunk up to this many bytes */
};

/* A fault plan that does nothing. */
void kr_sim_fault_none(struct kr_sim_fault *f);

/*
 * A scripted fault, as tests/apiserver's control API adds one: the next
 * `count` requests whose target contains `match` (and that are watches or
 * lists, as `watch` says: -1 either) get fault `f`, and `before` (may be
 * NULL) runs just before each is served (a write, a compaction). Scripts
 * come before the weather. At most 8; cleared by kr_sim_reset.
 */
struct kr_sim_script {
	const char *match;
	int watch;
	int count;
	struct kr_sim_fault f;
	void (*before)(void);
};

int kr_sim_script_add(const struct kr_sim_script *sc);

/* Runs fn at virtual time t (writes on a timetable). At most 8; cleared by kr_sim_reset. */
int kr_sim_at(kr_ms_t t, void (*fn)(void));

/* Chooses the server settings and the fault mix of this seed (after kr_sim_reset). */
void kr_sim_chaos_setup(void);

/*
 * Runs the schedule: random writes and weather until `until` (virtual ms),
 * the first ones from `from`. Events happen inside kr_port_poll as time passes.
 */
void kr_sim_chaos_start(kr_ms_t from, kr_ms_t until);

/* From now on: no writes, no faults, clear weather; stalled links deliver again. */
void kr_sim_chaos_quiet(void);

/* Until `until`: no writes, no faults, no compaction, clear weather; then the schedule goes on. */
void kr_sim_chaos_calm(kr_ms_t until);

/* Weather w (an outage: KR_SIM_REFUSE, KR_SIM_BLACKHOLE) from now until `until`, then clear. */
void kr_sim_chaos_outage(int w, kr_ms_t until);

/* Writes go mostly (85 %) to these types (bit 1 << type): the ones the client watches. */
void kr_sim_chaos_focus(unsigned type_mask);

/* The weather now, and whether it is an outage (requests cannot succeed). */
int kr_sim_weather(void);
int kr_sim_outage(void);

/* Writes and weather changes the schedule made (for the summary line). */
unsigned long kr_sim_chaos_writes(void);
unsigned long kr_sim_chaos_storms(void);

/* Internal to the port: hooks between the network, the server and the schedule. */
void kr_sim_chaos_request(const char *target, int watch, int watch_list, int reused,
			  struct kr_sim_fault *f);
void kr_sim_chaos_reset(void);
int kr_sim_chaos_connect(kr_ms_t *delay_ms);        /* 0 ok, 1 refused, 2 hang */
int kr_sim_chaos_resolve(kr_ms_t *delay_ms);        /* 0 ok, 1 no such name, 2 hang */
int kr_sim_chaos_due(kr_ms_t now);
kr_ms_t kr_sim_chaos_next(void);

/* --- files: kr_port_read_file reads these (a token file, say); nothing else exists ------------ */

/* Sets the content of path (replacing it). 0, KR_ETOOBIG or KR_ENOSPC. */
int kr_sim_file_set(const char *path, const void *data, size_t len);
void kr_sim_files_clear(void);

/* --- the flash: the state directory's file system (fs.c over tests/fuzz/memfs.h) ------------ */

/* What the disk holds after a power cut (memfs.h's modes, in its order). */
enum kr_sim_fs_reboot {
	KR_SIM_FS_DURABLE,             /* only what was fsynced, names only if the directory was */
	KR_SIM_FS_NAMES,               /* every name, the bytes only as far as fsynced */
	KR_SIM_FS_ALL,                 /* everything (the process died; the kernel kept its cache) */
	KR_SIM_FS_TORN,                /* durable names, half of the bytes written after the last fsync */
	KR_SIM_FS_NMODES
};

struct kr_sim_fs_faults {
	unsigned fail_permille;        /* changing calls that fail (I/O error, or a full disk) */
	unsigned slow_sync_permille;   /* fsyncs that block kreflect's thread */
	int slow_sync_max_ms;          /* for up to this long (the world's clock runs on) */
};

struct kr_sim_fs_stats {
	unsigned long ops, syncs, failures, slow_syncs;
	uint64_t slow_ms;
};

/* Empty flash, power on, no faults (kr_sim_reset calls it). */
void kr_sim_fs_reset(uint64_t seed);
void kr_sim_fs_set_faults(const struct kr_sim_fs_faults *f);
/* The flash's own generator (for the driver's plans: they draw nothing from the world's). */
uint64_t kr_sim_fs_rand(void);
/* The process is gone: its open files close, nothing more is written. */
void kr_sim_fs_exit(void);
/* The power goes off just before the k-th changing call from now (0: the next). */
void kr_sim_fs_cut_after(long k);
int kr_sim_fs_power_off(void);
/* Power on again after a cut or a crash: the disk holds what mode says. */
void kr_sim_fs_reboot(int mode);
const struct kr_sim_fs_stats *kr_sim_fs_stats(void);
/* Bytes of the file at path (its durable bytes if durable), 0 if there is none. */
size_t kr_sim_fs_size(const char *path, int durable);

/* kreflect's thread is blocked (a slow fsync): the clock moves ms on; the world catches up at the next poll. */
void kr_sim_block(kr_ms_t ms);

/*
 * The process is gone (killed, or stopped and exited): every descriptor it
 * held closes as the kernel would close it (the server sees its connections
 * end), its pending observations are dropped, its files close.
 */
void kr_sim_process_exit(void);

/* --- observations: what kreflect did, for the properties -------------------------------------- */

enum kr_sim_obs_kind {
	KR_SIM_OBS_RESOLVE,            /* a name lookup started */
	KR_SIM_OBS_CONNECT,            /* a TCP connect started */
	KR_SIM_OBS_REQUEST,            /* a request's first byte was sent (req_kind: 0 list, 1 watch,
					  2 watch-list, 3 a list's continuation page) */
	KR_SIM_OBS_FAILURE,            /* kreflect saw a failure after which it must wait: a backoff
					  step, or as long as the answer asked (asked) */
	KR_SIM_OBS_BAD_ADDRESS,        /* a connect to an address no lookup returned */
	KR_SIM_OBS_PROTOCOL,           /* a request the server rejects as malformed (what says why) */
};

struct kr_sim_obs {
	kr_ms_t t;
	int kind;
	int fd;
	int owner;                     /* the tag of fd when recorded, -1 if not tagged yet */
	int req_kind;
	int asked;                     /* FAILURE: the answer carried Retry-After, which kreflect may
					  honour instead of a backoff step */
	int outage;                    /* recorded during an outage */
	char what[96];
};

/* Takes the oldest observation not taken yet. 1, or 0 if none is left. */
int kr_sim_obs_take(struct kr_sim_obs *o);

/* Observations dropped because the driver did not take them in time (must stay 0). */
unsigned long kr_sim_obs_lost(void);

/* Tags the descriptor fd (socket or lookup) with owner: it appears in its observations. */
void kr_sim_tag(int fd, int owner);
/* The tag of fd, -1 if none or not open. */
int kr_sim_owner(int fd);

/* Descriptors (sockets and lookups) kreflect has open. */
int kr_sim_open_descriptors(void);

/* --- internal to the port: the network as the server sees it -------------------------------- */

#define KR_SIM_SOCKETS 16

/* Bytes the server may still write to socket slot s before the link is full. */
size_t kr_sim_sock_space(int s);
/* Writes len bytes to the client of slot s (delivered after the link's latency). */
void kr_sim_sock_write(int s, const void *data, size_t len);
/* Ends the server's side: 0 = FIN after the written bytes, 1 = reset after them. */
void kr_sim_sock_close(int s, int reset);
/* Bytes the client sent that have arrived, and consuming them. */
size_t kr_sim_sock_input(int s, const char **data);
void kr_sim_sock_consume(int s, size_t n);
/* Response bytes the server wrote on slot s so far. */
uint64_t kr_sim_sock_written(int s);
/* The link of slot s delivers nothing until until. */
void kr_sim_sock_freeze(int s, kr_ms_t until);
/*
 * The link of slot s delivers up to stream offset `offset`, then nothing for
 * ms; then, `times` more times, `step` bytes and nothing for ms (a trickle).
 */
void kr_sim_sock_freeze_at(int s, uint64_t offset, int ms, int step, int times);
/*
 * Reports a FAILURE observation once the client has read the failing piece
 * [start, at) of the stream: the network delivers it alone and whole in one
 * read (reads stop right before it), so the client has processed everything
 * before it and fails on it, not on something else in the same read. With a
 * token set, only if the token file still holds it then (a 401 after a
 * rotation is retried at once with the new token).
 */
void kr_sim_sock_verdict(int s, uint64_t start, uint64_t at, int req_kind, int asked, const char *what);
void kr_sim_sock_verdict_token(int s, const char *token);
/* The last verdict of s came with a Retry-After date (epoch s): only if still ahead when read. */
void kr_sim_sock_verdict_date(int s, int64_t epoch);
/* Records a PROTOCOL observation: the request on slot s was malformed. */
void kr_sim_sock_protocol_error(int s, const char *what);
/* Records a REQUEST observation for the request now arriving on slot s. */
void kr_sim_sock_request_seen(int s, int req_kind, const char *what);
/* Sockets whose server side is open, for the weather. */
int kr_sim_sock_is_open(int s);

/* The server (server.c), driven by the network. */
void kr_sim_server_reset(void);
void kr_sim_server_accept(int s);
void kr_sim_server_gone(int s);                    /* the client closed the socket */
int kr_sim_server_pump(int s, kr_ms_t now);        /* nonzero if it did something */
kr_ms_t kr_sim_server_next(int s);
void kr_sim_server_settings_set(const struct kr_sim_server_settings *st);
/* A fault now on the connection of slot s (enum kr_sim_evfault; code for ERROR). */
void kr_sim_server_zap(int s, int what, int code);
/* Outage DOWN: every open response ends with a reset. */
void kr_sim_server_cut_all(void);

/* The network (world.c) for the schedule. */
void kr_sim_net_reset_all(void);                   /* every open connection reset */
void kr_sim_net_freeze_all(kr_ms_t until);         /* every open link stalls */
void kr_sim_net_thaw_all(void);                    /* every link delivers again */

#endif /* KR_SIM_H */
