/*
 * The local endpoint (--listen): /healthz, /readyz, Prometheus /metrics and a
 * read-only Kubernetes API answered from the mirror, on the reflector's own
 * loop, in caller-owned fixed storage.
 *
 * It is a sink (kr_serve_event) and reads the store for lists. Watches do
 * not get copies of events: every change is appended, as (resource, type,
 * key, resourceVersion), to one bounded history ring, and each watcher
 * reads the ring at its own pace, taking each object from the store when
 * its socket can take it. So the reflector's cost per change is the same
 * with 0 or 50 watchers, and a watcher that stops reading is passed by the
 * ring and dropped with a 410 Status (as the kube-apiserver's watch cache
 * drops one); it never holds the reflector back.
 */
#ifndef KR_SERVE_H
#define KR_SERVE_H

#include <stdint.h>

#include "access.h"
#include "http_server.h"
#include "kreflect_config.h"
#include "loop.h"
#include "reflector.h"
#include "sink.h"
#include "store.h"
#include "tls.h"

struct kr_notify;
struct kr_out;
struct kr_http_post;

/* Bytes of the change history ring (records of about 40 bytes + key). */
#define KR_SERVE_HISTORY_BYTES ((size_t)KR_SERVE_HISTORY * 64u)

struct kr_serve_opts {
	const char *listen;            /* 127.0.0.1:PORT, [::1]:PORT, unix:/PATH, or another IP:PORT */
	const char *token_file;        /* bearer token clients must send, or token,user lines (src/access.h) */
	const char *access_file;       /* what each identity may read (src/access.h); NULL = everything */
	const char *cert_file;         /* TLS: the server's certificate (chain), PEM; NULL = plain HTTP */
	const char *key_file;          /* TLS: its key */
	const char *client_ca_file;    /* TLS: clients may authenticate by a certificate it signed */
	int insecure;                  /* a non-loopback address without TLS (--listen-insecure) */
	int max_conns;                 /* 1..KR_SERVE_MAX_CONNS; 0 = KR_SERVE_MAX_CONNS */
	int tls_sessions;              /* 1..KR_SERVE_TLS_CONNS; 0 = KR_SERVE_TLS_CONNS */
	int serve_secrets;             /* secrets are 403 unless set */
	int health_only;               /* only /healthz, /livez and /readyz (404 for the rest), so
					  any address without a token: a kubelet's probes */
	int healthz_ready;             /* /healthz answers as /readyz does (k8s-sidecar's probe) */
	int ready_silence_ms;          /* /readyz: a resource silent longer is not ready; 0 = 180 s */
	int bookmark_ms;               /* local watches that ask: a BOOKMARK this often; 0 = 60 s */
	int idle_ms;                   /* a request head within this, a list or answer read within
					  twice this, or the connection is closed; 0 = 30 s */
	const struct kr_notify *notify;      /* for hook metrics (may be NULL) */
	const struct kr_http_post *post;     /* likewise */
};

enum kr_serve_conn_state {
	KR_SC_FREE,
	KR_SC_HANDSHAKE,               /* TLS: the handshake, before the first request */
	KR_SC_READING,                 /* a request head */
	KR_SC_WRITING,                 /* a response; then back to READING or closed */
	KR_SC_LISTING,                 /* a list response, item by item */
	KR_SC_WATCHING,                /* a watch stream */
	KR_SC_WAITING,                 /* a list or watch for a resourceVersion the mirror has
					  not reached yet, for at most 3 s */
};

/* One local connection; all of it is fixed-size. */
struct kr_serve_conn {
	struct kr_source src;
	struct kr_serve *srv;
	enum kr_serve_conn_state state;
	int keep_alive;
	int chunked;                   /* the response is chunked (HTTP/1.1) */
	int head_only;                 /* HEAD: no body */
	struct kr_http_server_req req;
#if KR_WITH_LISTEN_TLS
	struct kr_tls tls;             /* its TLS session when the endpoint has TLS */
	int tls_slot;                  /* the configuration it was accepted with (kr_serve.tls[]) */
	int tls_over;                  /* the one session past tls_max: answered 503 */
#endif
	char user[KR_ACCESS_USER_MAX]; /* the verified client certificate's CN, "" = none */
	char who[KR_ACCESS_USER_MAX];  /* the request's identity: that CN or the token's user */
	/* the list or watch in progress */
	int res;                       /* reflector index */
	char ns[64];                   /* "" = every namespace held */
	char name[256];                /* fieldSelector metadata.name=, "" = any */
	int name_neg;                  /* metadata.name!= */
	char labels[KR_SELECTOR_MAX];  /* labelSelector, "" = every object */
	uint32_t cursor;               /* list: next entry index */
	long limit, sent;              /* list: page size (0 = all), items written */
	int first;                     /* list: no item written yet */
	uint64_t seq;                  /* watch: next history record */
	size_t pos;                    /* watch: its byte offset in the ring */
	kr_ms_t deadline;              /* reading: the head's; a dropped watcher's last words */
	int bookmarks;                 /* watch: allowWatchBookmarks */
	kr_ms_t watch_end;             /* watch: timeoutSeconds, 0 = none */
	kr_ms_t bookmark_at;           /* watch: next bookmark */
	int initial;                   /* watch: synthetic ADDED of the current objects first */
	char wait_rv[KR_RV_MAX];       /* waiting: the resourceVersion asked for */
	int wait_list;                 /* waiting: a list (else a watch) */
	/* watch with a label selector: which objects (store index slots) the
	 * watcher was last told match, so a change in or out of the selector is
	 * ADDED or DELETED, as the kube-apiserver's watch cache sends it */
	int track;
	uint64_t gap_seq;              /* records before this predate the watch (a resume) */
	unsigned char matched[(KR_SERVE_TRACK_OBJECTS + 7) / 8];
	/* an object larger than the buffer, sent straight from the arena */
	char big_key[KR_KEY_MAX];
	char big_rv[KR_RV_MAX];
	size_t big_off, big_len;
	int big;                       /* 1 while big_* is being sent */
	size_t out_len, out_off;
	char out[KR_SERVE_OUT_BYTES];
};

/* Per resource, what the sink saw. */
struct kr_serve_res {
	unsigned long long events[4];  /* ADDED, MODIFIED, DELETED, RESYNC */
	unsigned long syncs;
	int64_t last_sync_wall;        /* seconds since the epoch, 0 = never */
	char rv[KR_RV_MAX];            /* the newest resourceVersion the mirror is at */
};

struct kr_serve {
	struct kr_loop *loop;
	struct kr_reflect *top;
	struct kr_store *store;
	struct kr_serve_opts opts;
	int unix_socket;
	char where[128];               /* the address, for logs and metrics */
	struct kr_source listener;
	struct kr_timer tick;          /* bookmarks, watch timeouts */
	struct kr_tokens tokens;       /* --listen-token-file's identities */
	struct kr_rules rules;         /* --listen-access-file */
	union {                        /* a changed file, parsed before it replaces the one in use */
		struct kr_tokens tokens;
		struct kr_rules rules;
	} next;
	uint32_t tokens_sum, rules_sum; /* of the files' bytes, to see a change */
	int have_rules;
	char file_raw[KR_SERVE_ACCESS_BYTES];  /* either file as read */
	kr_ms_t files_checked;         /* when the TLS, token and access files were last looked at */
	int need_token;
	int need_auth;                 /* a token or a client certificate */
#if KR_WITH_LISTEN_TLS
	/* TLS: the configuration in use and the one before the last reload,
	 * kept while sessions accepted with it are open */
	struct kr_tls_ctx tls[2];
	int tls_on, tls_cur, tls_users[2];
	uint32_t tls_sum;              /* of the files' contents, to see a rotation */
	int tls_sessions;              /* open, at most tls_max (and the one answered 503) */
	int tls_max;                   /* opts.tls_sessions */
	unsigned long long tls_handshakes, tls_failed, tls_refused, tls_reloads;
#endif
	struct kr_serve_conn *conns;
	int nconns;                    /* slots in use allowed: opts.max_conns */
	int used_hi;                   /* conns[0..used_hi) were ever taken; the rest are
					  neither read nor written, so cost no memory */
	kr_ms_t started;
	kr_ms_t last_pass;             /* the loop ran its hooks (for /healthz) */
	struct kr_serve_res res[KR_MAX_RESOURCES];
	/* the change history ring */
	unsigned char ring[KR_SERVE_HISTORY_BYTES];
	size_t ring_head, ring_tail;   /* byte offsets: next write, oldest record */
	uint64_t seq_head, seq_tail;   /* next record's number, oldest record's number */
	/* While watchers render a DELETED record as it is added: the object it removed. */
	const char *gone_obj;          /* NULL: not held, or not that moment */
	size_t gone_len;
	uint64_t gone_seq;             /* the record's number */
	/* counters */
	unsigned long long accepted, refused, requests, watchers_dropped, watches_started, forbidden;
	unsigned long long responses[6]; /* by first digit of the status, 1xx..5xx */
	unsigned long long bytes_out;
};

/*
 * Checks opts and opens the listening socket; serves from kr_serve_start on.
 * conns[0..KR_SERVE_MAX_CONNS) is caller-owned. Returns 0, or KR_EINVAL
 * (bad address; a non-loopback one without a token file), KR_EAUTH (token
 * file unreadable), KR_EIO (cannot listen) with a message in err.
 */
int kr_serve_init(struct kr_serve *s, struct kr_loop *loop, struct kr_reflect *top,
		  struct kr_store *store, const struct kr_serve_opts *opts,
		  struct kr_serve_conn *conns, char *err, size_t errlen);

/* The sink: records every change in the history ring and wakes watchers. */
void kr_serve_event(void *arg, const struct kr_event *ev);

/* Closes every connection and the listener (a unix socket's file is removed). */
void kr_serve_close(struct kr_serve *s);

/*
 * Parses a --listen value. Returns 1 for unix:PATH (path copied), 0 for an
 * IP:PORT (*addr set; *loopback says whether it is 127/8 or ::1), or
 * KR_EINVAL.
 */
int kr_serve_parse_listen(const char *spec, struct kr_addr *addr, int *loopback, char *path,
			  size_t pathlen);

/*
 * Whether an object's labels (the object JSON, tokens from toks) match a
 * label selector (=, ==, !=, in, notin, exists, !exists). Returns 1 match,
 * 0 not, KR_EINVAL for a selector it cannot read.
 */
int kr_serve_labels_match(const char *sel, const char *obj, size_t objlen, kr_json_tok *toks,
			  int ntoks);

/*
 * The ring for the state directory (struct kr_state_history, src/state.h):
 * walk gives fn its records numbered from `from` on and returns the next
 * number; add puts one back on a start (a number that does not follow the
 * last starts the ring afresh at it).
 */
uint64_t kr_serve_history_walk(void *arg, uint64_t from,
			       void (*fn)(void *ctx, uint64_t seq, int res, int type, const char *key,
					  size_t keylen, const char *rv, size_t rvlen),
			       void *ctx);
void kr_serve_history_add(void *arg, uint64_t seq, int res, int type, const char *key, const char *rv);

/*
 * The history position just after the newest change of resource res at
 * resourceVersion rv (a change's or a list's). Returns 1 with *seq (the next
 * record's number) and *pos set, or 0 if the ring no longer holds it.
 */
int kr_serve_history_find(const struct kr_serve *s, int res, const char *rv, uint64_t *seq,
			  size_t *pos);

/* Writes the Prometheus text of s into o (for tests; /metrics uses it). */
void kr_serve_metrics(struct kr_serve *s, struct kr_out *o);

#endif /* KR_SERVE_H */
