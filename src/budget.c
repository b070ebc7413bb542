#include "budget.h"

#include "auth.h"
#include "kreflect_config.h"
#include "kubeconfig.h"
#include "reflector.h"
#include "resource.h"
#include "sink.h"
#include "http_post.h"
#include "notify.h"
#include "sidecar_env.h"
#include "sink_dir.h"
#include "store.h"
#include "supervise.h"
#include "tls.h"

/* Mirrors the static objects main.c reserves, sized from config/. */
static const struct kr_budget_item items[] = {
	{ "arena", KR_ARENA_BYTES, "object bytes (KR_ARENA_BYTES); RAM only as it fills" },
	{ "index", KR_MAX_OBJECTS * sizeof(struct kr_entry) + KR_STORE_BUCKETS * sizeof(int32_t),
	  "KR_MAX_OBJECTS entries and their hash buckets" },
	{ "reflectors", KR_MAX_RESOURCES * sizeof(struct kr_reflector),
	  "per resource: connection, read buffer, HTTP and JSON state" },
	{ "shared", sizeof(struct kr_reflect) + sizeof(struct kr_store) + sizeof(struct kr_loop),
	  "KR_JSON_TOKENS tokens for one object, loop, store header" },
	{ "tls-heap", KR_TLS_HEAP_SIZE,
	  "mbedTLS heap: record buffers and handshakes of KR_MAX_CONNS connections" },
	{ "tls-config", sizeof(struct kr_tls_ctx) + KR_PEM_MAX + 3 + sizeof(struct kr_auth),
	  "CA and client credentials while loading, bearer token" },
	{ "kubeconfig", sizeof(struct kr_kubeconfig) + sizeof(struct kr_kubeconfig_work),
	  "kubeconfig files while loading; handed back to the kernel after" },
	{ "resources", KR_MAX_RESOURCES * sizeof(struct kr_resource) + sizeof(struct kr_jsonl),
	  "what to mirror, output state" },
	{ "notify", sizeof(struct kr_notify), "--exec/--signal: command words, changed keys" },
	{ "http-post", sizeof(struct kr_http_post),
	  "--http-post: its connection, two KR_HTTP_POST_BATCH_BYTES batches; RAM only if used" },
	{ "supervise", sizeof(struct kr_supervise), "-- PROGRAM: KR_SUPERVISE_ARGS words, state" },
	{ "k8s-sidecar", sizeof(struct kr_sidecar),
	  "--k8s-sidecar: resources, request payload and header read from the environment" },
	{ "dir-sink", sizeof(struct kr_dirsink),
	  "--dir: manifest of KR_DIRSINK_MAX_FILES files, one decoded value; RAM only if used" },
};

const struct kr_budget_item *kr_budget_items(size_t *count)
{
	*count = sizeof(items) / sizeof(items[0]);
	return items;
}

size_t kr_budget_total(void)
{
	size_t i, total = 0;

	for (i = 0; i < sizeof(items) / sizeof(items[0]); i++)
		total += items[i].bytes;
	return total;
}
