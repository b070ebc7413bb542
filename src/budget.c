#include "budget.h"

#include "client.h"
#include "http_post.h"
#include "json.h"
#include "kreflect_config.h"
#include "notify.h"
#include "sidecar_env.h"
#include "sink.h"
#include "sink_dir.h"
#include "store.h"
#include "supervise.h"

/* Index bytes for objects: the entries and a power-of-two bucket array at least as large. */
static size_t index_bytes(size_t objects)
{
	size_t b = 256;

	while (b < objects)
		b <<= 1;
	return objects * sizeof(struct kr_entry) + b * sizeof(int32_t);
}

#define STR_(x) #x
#define STR(x) STR_(x)
/* The TLS heap's part for sessions on --listen (config/kreflect_config.h). */
#define LISTEN_TLS_BYTES (KR_WITH_LISTEN_TLS ? ((size_t)KR_SERVE_TLS_CONNS + 1) * KR_SERVE_TLS_PER_CONN : 0u)

/* An item's words, or only that it is not built in (the tiny build keeps no more). */
#define BUILT(with, text) ((with) ? (text) : "not built into this kreflect")

size_t kr_budget_items(struct kr_budget_item *items, size_t max, size_t objects, size_t arena)
{
	const struct kr_budget_item all[] = {
		{ "arena", arena, 1,
		  "object bytes (--arena-bytes); also start-up scratch; RAM only as it fills" },
		{ "index", index_bytes(objects), 1,
		  "--max-objects entries and their hash buckets; RAM only as they fill" },
		{ "client", kr_client_struct_size(), 1,
		  "per resource: connection, read buffer, HTTP and JSON state; tokens, loop, TLS, the gzip\n"
		  "                           inflater, the --state-dir buffer" },
		{ "tls-heap", KR_TLS_HEAP_SIZE - LISTEN_TLS_BYTES, 0,
		  "mbedTLS heap: record buffers and handshakes of KR_MAX_CONNS connections" },
		{ "listen-tls", LISTEN_TLS_BYTES ? LISTEN_TLS_BYTES + KR_PEM_MAX : 0, 0,
		  BUILT(LISTEN_TLS_BYTES, "TLS on --listen: the mbedTLS heap's part, " STR(KR_SERVE_TLS_CONNS)
			" sessions at most and one that\n"
			"                           answers 503, of " STR(KR_SERVE_TLS_PER_CONN)
			" bytes each (records 16+4 KiB, keys, a handshake),\n"
			"                           and the buffer the certificate files are read into (KR_PEM_MAX);\n"
			"                           RAM only if used") },
		{ "jsonl", sizeof(struct kr_jsonl), 1, "JSON-lines output buffer" },
		{ "notify", (KR_WITH_HOOKS ? sizeof(struct kr_notify) : 0), 1,
		  BUILT(KR_WITH_HOOKS, "--exec/--signal: command words, changed keys") },
		{ "http-post", (KR_WITH_HOOKS ? sizeof(struct kr_http_post) : 0), 1,
		  BUILT(KR_WITH_HOOKS, "--http-post: its connection, two KR_HTTP_POST_BATCH_BYTES batches; "
				       "RAM only if used") },
		{ "supervise", (KR_WITH_HOOKS ? sizeof(struct kr_supervise) : 0), 1,
		  BUILT(KR_WITH_HOOKS, "-- PROGRAM: KR_SUPERVISE_ARGS words, state") },
		{ "dir-sink", (KR_WITH_DIR ? sizeof(struct kr_dirsink) : 0), 1,
		  BUILT(KR_WITH_DIR, "--dir: manifest of KR_DIRSINK_MAX_FILES files, one decoded value; "
				     "RAM only if used") },
		{ "k8s-sidecar", (KR_WITH_SIDECAR ? sizeof(struct kr_sidecar) +
				  KR_SIDECAR_PAYLOAD_TOKENS * sizeof(kr_json_tok) : 0), 0,
		  BUILT(KR_WITH_SIDECAR, "--k8s-sidecar: resources, request payload and header read from "
					 "the environment") },
		{ "listen", KR_WITH_LISTEN ? KR_ENDPOINT_MEMORY(KR_SERVE_MAX_CONNS) : 0, 1,
		  BUILT(KR_WITH_LISTEN, "--listen: change history, KR_SERVE_MAX_CONNS connections (fewer with\n"
					"                           --listen-max-conns); reserved only with --listen, "
					"RAM only if used") },
	};
	size_t i, n = sizeof(all) / sizeof(all[0]);

	for (i = 0; i < n && i < max; i++)
		items[i] = all[i];
	return n;
}

int kr_client_budget(const struct kr_config *cfg, size_t *objects, size_t *arena, kr_budget_fn fn,
		     void *arg)
{
	struct kr_budget_item it[KR_BUDGET_ITEMS];
	size_t n, i, o, a;

	if (!fn || kr_client_capacities_for(cfg, &o, &a) != 0)
		return KR_EINVAL;
	n = kr_budget_items(it, KR_BUDGET_ITEMS, o, a);
	for (i = 0; i < n && i < KR_BUDGET_ITEMS; i++)
		fn(arg, it[i].name, it[i].bytes, it[i].reserved, it[i].why);
	if (objects)
		*objects = o;
	if (arena)
		*arena = a;
	return (int)i;
}
