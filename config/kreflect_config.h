/*
 * kreflect compile-time capacities: the one place where sizes are chosen.
 *
 * Every value is a default that a build may override, either with -DNAME=value
 * or with a header of its own named by -DKR_USER_CONFIG='"path/to/my_config.h"',
 * which is read first. Runtime flags may lower some of these, never raise them.
 * `kreflect --print-budget` prints the static memory these values imply.
 */
#ifndef KR_CONFIG_H
#define KR_CONFIG_H

#ifdef KR_USER_CONFIG
#include KR_USER_CONFIG
#endif

/* --- resources and the store ------------------------------------------------ */

/* Resources watched at once; each has its own watch connection. */
/*
 * JSON-lines output is gathered here and written once per loop pass (before
 * the loop may sleep) or when full: one write for a whole TLS record of
 * events instead of one per event, the largest CPU cost of a busy stream
 * (make bench). An event larger than this is written on its own.
 */
#ifndef KR_JSONL_BUFFER_BYTES
#define KR_JSONL_BUFFER_BYTES 32768
#endif

#ifndef KR_MAX_RESOURCES
#define KR_MAX_RESOURCES 8
#endif

/* A label or field selector's text, and a namespace, group, plural or kind (--namespace). */
#ifndef KR_SELECTOR_MAX
#define KR_SELECTOR_MAX 512
#endif
#define KR_NAME_MAX 64

/*
 * Objects the store indexes (held or present-but-not-held), over all
 * resources, and the bytes of object JSON the arena holds: the defaults of
 * --max-objects and --arena-bytes (kr_config's max_objects, arena_bytes).
 * Both are reserved once at start-up, never after; untouched pages cost no
 * RSS. The ceilings bound what a run-time value may ask for: a firmware
 * build lowers them to make a bad value fail at start-up.
 *
 * The two agree: 2 KiB of arena per index slot (--print-budget's
 * "per-object"), so the index and the arena fill together for objects of
 * 2 KiB on average as stored (a ConfigMap with 1 KiB of data is about
 * 1.3 KiB with its record), and 10,000 such ConfigMaps fit with room.
 */
#ifndef KR_MAX_OBJECTS
#define KR_MAX_OBJECTS 16384
#endif
#ifndef KR_MAX_OBJECTS_CEILING
#define KR_MAX_OBJECTS_CEILING (1u << 20)
#endif

#ifndef KR_ARENA_BYTES
#define KR_ARENA_BYTES (32u * 1024u * 1024u)
#endif
#ifndef KR_ARENA_BYTES_CEILING
#define KR_ARENA_BYTES_CEILING (2048ull * 1024u * 1024u)
#endif
/* The smallest arena: the reserve below, twice. */
#ifndef KR_ARENA_MIN
#define KR_ARENA_MIN (128u * 1024u)
#endif

/* Longest --resync period (resync_s), so that its milliseconds fit an int. */
#ifndef KR_RESYNC_MAX_S
#define KR_RESYNC_MAX_S 2000000
#endif

/* --memory: one index slot per this many bytes of the budget, the rest arena. */
#ifndef KR_MEMORY_PER_OBJECT
#define KR_MEMORY_PER_OBJECT 512u
#endif

/* Largest single object: etcd's default request limit is 1.5 MiB, plus envelope. */
#ifndef KR_MAX_OBJECT_BYTES
#define KR_MAX_OBJECT_BYTES (1536u * 1024u + 64u * 1024u)
#endif

/* JSON tokens for one object (a busy Pod is ~1,500; a ConfigMap a handful). */
#ifndef KR_JSON_TOKENS
#define KR_JSON_TOKENS 8192
#endif

/* Longest namespace/name key: 253 (name) + 1 + 63 (namespace), rounded up. */
#ifndef KR_KEY_MAX
#define KR_KEY_MAX 320
#endif

/* Longest resourceVersion or uid we keep (opaque strings; etcd's are ~20 bytes). */
#ifndef KR_RV_MAX
#define KR_RV_MAX 64
#endif

/* Index buckets: a power of two at least KR_MAX_OBJECTS (chains stay short). */
#ifndef KR_STORE_BUCKETS
#define KR_STORE_BUCKETS                                                           \
	(KR_MAX_OBJECTS <= 256 ? 256u : KR_MAX_OBJECTS <= 1024 ? 1024u :           \
	 KR_MAX_OBJECTS <= 4096 ? 4096u : KR_MAX_OBJECTS <= 16384 ? 16384u :         \
	 KR_MAX_OBJECTS <= 65536 ? 65536u : KR_MAX_OBJECTS <= 262144 ? 262144u : 1048576u)
#endif

/*
 * Arena bytes kept free: a full arena still frames the next event (and its
 * metadata) and records the keys of objects it cannot hold.
 */
#ifndef KR_STORE_RESERVE
#define KR_STORE_RESERVE (64u * 1024u)
#endif

/* --- transport ---------------------------------------------------------------- */

/* Connections open at once: one watch per resource, plus one for lists/discovery. */
#ifndef KR_MAX_CONNS
#define KR_MAX_CONNS (KR_MAX_RESOURCES + 1)
#endif

/* Longest HTTP status or header line we accept from the server. */
#ifndef KR_HTTP_LINE_MAX
#define KR_HTTP_LINE_MAX 8192
#endif

/* Most header lines in one response (kube-apiserver sends about ten). */
#ifndef KR_HTTP_MAX_HEADERS
#define KR_HTTP_MAX_HEADERS 100
#endif

/* Longest request we write (path, query, headers, bearer token). */
#ifndef KR_HTTP_REQUEST_MAX
#define KR_HTTP_REQUEST_MAX 8192
#endif

/* Bytes read from TLS per call: one full TLS record. */
#ifndef KR_IO_CHUNK
#define KR_IO_CHUNK 16384
#endif

/*
 * mbedTLS heap (MBEDTLS_MEMORY_BUFFER_ALLOC_C). Per connection: a 16 KiB input
 * record buffer, a 4 KiB output buffer, and the handshake's certificates and
 * bignums (an RSA-4096 chain needs the most), so about 48 KiB each.
 */
#ifndef KR_TLS_HEAP_PER_CONN
#define KR_TLS_HEAP_PER_CONN (48u * 1024u)
#endif
/*
 * TLS on --listen (--listen-cert-file): the server side of mbedTLS, in the
 * same heap. Each local TLS session holds a 16 KiB input record buffer, a
 * 4 KiB output one and its keys, and briefly its handshake: KR_SERVE_TLS_PER_CONN
 * each, for at most KR_SERVE_TLS_CONNS sessions at once (--listen-tls-sessions
 * lowers it at start-up), and one more that answers a 503 Status; more are
 * closed with a log line, so the upstream connections keep their part of the
 * heap. An open session keeps about 15 KB resident on top of its connection
 * slot's (its records as they fill, its keys; the handshake's part goes back
 * to the heap). The heap is zeroed by writing only pages that are not zero
 * already (kr_tls_heap_memset), so its part for sessions never used costs no
 * RAM, not even at start-up: by default one session per connection slot.
 * Off with the endpoint (WITHOUT=listen) or alone (WITHOUT=listen_tls).
 */
#ifndef KR_WITH_LISTEN_TLS
#if defined(KR_WITH_LISTEN) && !KR_WITH_LISTEN
#define KR_WITH_LISTEN_TLS 0
#else
#define KR_WITH_LISTEN_TLS 1
#endif
#endif
#ifndef KR_SERVE_TLS_CONNS
#define KR_SERVE_TLS_CONNS KR_SERVE_MAX_CONNS
#endif
#ifndef KR_SERVE_TLS_PER_CONN
#define KR_SERVE_TLS_PER_CONN 40960     /* 40 KiB */
#endif
#ifndef KR_TLS_HEAP_SIZE
#define KR_TLS_HEAP_SIZE (KR_TLS_HEAP_PER_CONN * KR_MAX_CONNS + 64u * 1024u + \
			  (KR_WITH_LISTEN_TLS ? (KR_SERVE_TLS_CONNS + 1) * KR_SERVE_TLS_PER_CONN : 0u))
#endif

/* Largest PEM file (CA bundle, client certificate or key) we read. */
#ifndef KR_PEM_MAX
#define KR_PEM_MAX (256u * 1024u)
#endif

/* Longest bearer token (service-account tokens are ~1 KiB, OIDC ones a few). */
#ifndef KR_TOKEN_MAX
#define KR_TOKEN_MAX 16384
#endif

/* --- outputs on the device ---------------------------------------------------------- */

/* Longest state directory path (kr_config.state_dir, --state-dir), its NUL included. */
#ifndef KR_STATE_PATH_MAX
#define KR_STATE_PATH_MAX 512u
#endif

/* Words of a supervised PROGRAM ARGS... (after --): a command line, not a script. */
#ifndef KR_SUPERVISE_ARGS
#define KR_SUPERVISE_ARGS 64
#endif

/*
 * Bytes of one --http-post batch, as JSON lines of about 100 bytes (type,
 * resource, key, resourceVersion): some 150 changes; more in one window are
 * counted in a DROPPED line. Two are held: one collecting, one in delivery.
 */
#ifndef KR_HTTP_POST_BATCH_BYTES
#define KR_HTTP_POST_BATCH_BYTES 16384
#endif

/* Attempts to deliver one --http-post batch (the first and the retries) before dropping it. */
#ifndef KR_HTTP_POST_ATTEMPTS
#define KR_HTTP_POST_ATTEMPTS 5
#endif

/* --- the local listener (--listen): health, metrics, a read-only API ------------ */

/*
 * Local connections served at once (--listen-max-conns lowers it): a site's
 * few hundred watchers on one relay. Each costs KR_SERVE_OUT_BYTES of buffer
 * plus its state (about 42 KB in all), reserved statically and counted by
 * --print-budget, but a slot is first touched when a connection takes it, so
 * slots never used cost no RAM: the endpoint idles at the same resident size
 * with 8 or 512 of them.
 */
#ifndef KR_SERVE_MAX_CONNS
#define KR_SERVE_MAX_CONNS 512
#endif

/* A request's head (request line and headers) must fit here; else 431. */
#ifndef KR_SERVE_IN_BYTES
#define KR_SERVE_IN_BYTES 4096
#endif

/*
 * Response bytes waiting for a slow reader. A local watcher whose unread
 * events pass this is dropped with a Status, so upstream never waits.
 */
#ifndef KR_SERVE_OUT_BYTES
#define KR_SERVE_OUT_BYTES 32768
#endif

/* Longest request target (path and query) accepted; longer gets 414. */
#ifndef KR_SERVE_TARGET_MAX
#define KR_SERVE_TARGET_MAX 2048
#endif

/*
 * Identities and rules of the endpoint (src/access.h): the token file's and
 * the access file's parsed copies, KR_SERVE_ACCESS_BYTES each, of at most
 * KR_SERVE_IDENTITIES lines each.
 */
#ifndef KR_SERVE_ACCESS_BYTES
#define KR_SERVE_ACCESS_BYTES 16384
#endif
#ifndef KR_SERVE_IDENTITIES
#define KR_SERVE_IDENTITIES 256
#endif

/*
 * Objects a label-selector watch keeps one bit for (whether it was told the
 * object matches): KR_SERVE_TRACK_OBJECTS / 8 bytes per connection. Objects
 * in index slots past it are sent as without tracking (MODIFIED while they
 * match, never a DELETED for leaving the selector).
 */
#ifndef KR_SERVE_TRACK_OBJECTS
#define KR_SERVE_TRACK_OBJECTS (KR_MAX_OBJECTS < 8 ? 8 : KR_MAX_OBJECTS)
#endif

/* Changes remembered for watches that resume from a resourceVersion. */
#ifndef KR_SERVE_HISTORY
#define KR_SERVE_HISTORY 1024
#endif

/*
 * The endpoint's memory (kr_endpoint_memory) for N connections, from the
 * capacities above, for a caller that sizes its buffer at compile time:
 *   static char mem[KR_ENDPOINT_MEMORY(4)] __attribute__((aligned(16)));
 * An upper bound of kr_endpoint_memory (by less than 1 KB per connection);
 * the library does not build if its structures outgrow it. The fixed parts
 * hold the scalars, names, request fields and TLS session of each.
 */
#define KR_ENDPOINT_ROUND16(n) (((n) + 15u) & ~15u)
#define KR_ENDPOINT_CONN_BYTES KR_ENDPOINT_ROUND16(KR_SERVE_OUT_BYTES + KR_SERVE_TRACK_OBJECTS / 8u + \
						   KR_SERVE_TARGET_MAX + KR_KEY_MAX + 3584u)
#define KR_ENDPOINT_BASE_BYTES KR_ENDPOINT_ROUND16(KR_SERVE_HISTORY * 64u + 4u * KR_SERVE_ACCESS_BYTES + \
						   36u * KR_SERVE_IDENTITIES + 128u * KR_MAX_RESOURCES + 4608u)
#define KR_ENDPOINT_MEMORY(max_conns) ((size_t)KR_ENDPOINT_BASE_BYTES + \
				       (size_t)(max_conns) * KR_ENDPOINT_CONN_BYTES)

#if KR_WITH_LISTEN_TLS && (KR_SERVE_TLS_CONNS < 1 || KR_SERVE_TLS_CONNS > KR_SERVE_MAX_CONNS)
#error "KR_SERVE_TLS_CONNS must be 1 to KR_SERVE_MAX_CONNS"
#endif
#if KR_SERVE_MAX_CONNS < 1
#error "KR_SERVE_MAX_CONNS must be at least 1"
#endif
#if KR_SERVE_IN_BYTES < 512 || KR_SERVE_OUT_BYTES < 4096
#error "KR_SERVE_IN_BYTES must be at least 512 and KR_SERVE_OUT_BYTES at least 4096"
#endif
#if KR_SERVE_TARGET_MAX < 256 || KR_SERVE_TARGET_MAX > KR_SERVE_IN_BYTES
#error "KR_SERVE_TARGET_MAX must be 256 to KR_SERVE_IN_BYTES"
#endif

/* --- features built in (config/README.md "Leaving features out") -------- */

/*
 * Each optional feature can be left out of a build to make the binary smaller
 * (make WITHOUT="listen sidecar ...", or make PROFILE=tiny). Its flag then
 * fails with "not built in" and its kr_client_* call returns KR_ENOTSUP; the
 * module itself still compiles, so the default build keeps testing it.
 */
#ifndef KR_WITH_LISTEN
#define KR_WITH_LISTEN 1       /* --listen, kr_client_listen: the local endpoint */
#endif
/* KR_WITH_LISTEN_TLS (TLS on --listen, the mbedTLS server side) is set with the TLS heap above. */
/* Descriptors one poll() takes (port/port.h): the reflector's own (32), the
 * listener and KR_SERVE_MAX_CONNS connections (src/loop.h checks the sum). */
#ifndef KR_PORT_POLL_MAX
#if KR_WITH_LISTEN
#define KR_PORT_POLL_MAX (64 + KR_SERVE_MAX_CONNS)
#else
#define KR_PORT_POLL_MAX 64
#endif
#endif
#ifndef KR_WITH_SIDECAR
#define KR_WITH_SIDECAR 1      /* --k8s-sidecar: configuration from k8s-sidecar's environment */
#endif
#ifndef KR_WITH_STATE
#define KR_WITH_STATE 1        /* --state-dir: the mirror kept on disk across restarts */
#endif
#ifndef KR_WITH_PROXY
#define KR_WITH_PROXY 1        /* proxy-url and HTTPS_PROXY: CONNECT through an HTTP proxy */
#endif
#ifndef KR_WITH_DISCOVERY
#define KR_WITH_DISCOVERY 1    /* resources not in config/resources.def, asked of the server */
#endif
#ifndef KR_WITH_HOOKS
#define KR_WITH_HOOKS 1        /* --exec, --signal, --http-post and -- PROGRAM (supervisor mode) */
#endif
#ifndef KR_WITH_DIR
#define KR_WITH_DIR 1          /* --dir: objects as files */
#endif
#ifndef KR_WITH_KUBECONFIG
#define KR_WITH_KUBECONFIG 1   /* kubeconfig files; without: --server and credentials, or in-cluster */
#endif
#ifndef KR_WITH_DNS
#define KR_WITH_DNS 1          /* host names (musl's resolver, 20 KB); without: IP addresses only */
#endif
#ifndef KR_WITH_WAKEUP
#define KR_WITH_WAKEUP 1       /* kr_client_wakeup's eventfd; without (the tiny CLI has no
				  host to wake it): KR_ENOTSUP, and no descriptor */
#endif
#ifndef KR_WITH_GZIP
#define KR_WITH_GZIP 1         /* gzip LIST bodies (the inflater: a 32 KiB window); without: plain */
#endif
#ifndef KR_WITH_SANDBOX
#define KR_WITH_SANDBOX 1      /* --sandbox, --user, --group, kr_client_sandbox (x86_64: ~8 KB) */
#endif
#ifndef KR_WITH_FULL_HELP
#define KR_WITH_FULL_HELP 1    /* --help's full text (15 KB); without: a short one */
#endif
/*
 * A server's TLS alert named in words ("unknown CA: ...") and the rarer
 * mbedTLS codes too (2 KB); 0: the alert by its number, those codes as hex.
 */
#ifndef KR_TLS_ERROR_TEXTS_FULL
#define KR_TLS_ERROR_TEXTS_FULL 1
#endif
/*
 * A changed object that fits the arena only in its old version's place is
 * held there (a compaction; about 770 bytes of code). 0: it is present but
 * not held, the mirror partial until the relist the next delete makes.
 */
#ifndef KR_HOLD_IN_PLACE
#define KR_HOLD_IN_PLACE 1
#endif

/* --- checks ---------------------------------------------------------------------- */

#if KR_MAX_RESOURCES < 1
#error "KR_MAX_RESOURCES must be at least 1"
#endif
#if KR_MAX_OBJECTS < 1
#error "KR_MAX_OBJECTS must be at least 1"
#endif
#if KR_MAX_CONNS < KR_MAX_RESOURCES
#error "KR_MAX_CONNS must allow one watch connection per resource"
#endif
#if KR_MAX_OBJECT_BYTES > KR_ARENA_BYTES
#error "KR_MAX_OBJECT_BYTES cannot exceed KR_ARENA_BYTES: the largest object lives in the arena"
#endif
#if KR_JSON_TOKENS < 64
#error "KR_JSON_TOKENS below 64 cannot hold a minimal Kubernetes object"
#endif
#if KR_HTTP_LINE_MAX < 256
#error "KR_HTTP_LINE_MAX below 256 cannot hold a status line and common headers"
#endif
#if KR_HTTP_REQUEST_MAX < 2048
#error "KR_HTTP_REQUEST_MAX below 2048 cannot hold a request with a bearer token"
#endif
#if KR_TLS_HEAP_SIZE < 40u * 1024u
#error "KR_TLS_HEAP_SIZE below 40 KiB cannot complete a TLS handshake"
#endif
#if KR_MAX_OBJECTS > 1048576
#error "KR_MAX_OBJECTS above 1048576 is not supported by KR_STORE_BUCKETS"
#endif
#if KR_STORE_RESERVE * 2 > KR_ARENA_BYTES
#error "KR_STORE_RESERVE must be at most half of KR_ARENA_BYTES"
#endif
/* --- TLS cipher-suite order (branch crypto) ----------------------------------- */
/*
 * The AEAD the client lists first; servers that honour a client's choice of AEAD
 * pick it (Go's crypto/tls, so kube-apiserver, when the client puts ChaCha20
 * first; OpenSSL with SSL_OP_PRIORITIZE_CHACHA). mbedTLS's own default puts
 * ChaCha20-Poly1305 first on every CPU.
 * 0: chosen at start-up: AES-GCM where the CPU has AES instructions
 *    (kr_port_cpu_has_aes), ChaCha20-Poly1305 where it has not (armv7);
 * 1: AES-GCM first; 2: ChaCha20-Poly1305 first.
 */
#ifndef KR_TLS_AEAD_FIRST
#define KR_TLS_AEAD_FIRST 0
#endif
#if KR_TLS_AEAD_FIRST < 0 || KR_TLS_AEAD_FIRST > 2
#error "KR_TLS_AEAD_FIRST must be 0 (by CPU), 1 (AES-GCM) or 2 (ChaCha20-Poly1305)"
#endif

#if KR_SUPERVISE_ARGS < 1
#error "KR_SUPERVISE_ARGS must be at least 1: the program itself"
#endif
#if KR_HTTP_POST_BATCH_BYTES < 1024
#error "KR_HTTP_POST_BATCH_BYTES below 1024 cannot hold a line with a full key and the DROPPED line"
#endif
#if KR_HTTP_POST_ATTEMPTS < 1 || KR_HTTP_POST_ATTEMPTS > 38
#error "KR_HTTP_POST_ATTEMPTS must be 1 to 38 (the backoff's steps)"
#endif
#if KR_IO_CHUNK < 512
#error "KR_IO_CHUNK below 512 bytes makes every read a system call"
#endif

#endif /* KR_CONFIG_H */
