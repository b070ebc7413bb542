/*
 * The client's insides, for kreflect's own outputs (the CLI's directory
 * sink, hooks and supervisor register on the client's loop), the simulator
 * and tests. A library user needs none of this: kreflect.h is the API.
 */
#ifndef KR_CLIENT_H
#define KR_CLIENT_H

#include <stddef.h>

#include "kreflect.h"
#include "loop.h"
#include "reflector.h"
#include "resource.h"
#include "store.h"

/* n rounded up to 16: the parts carved from a caller's block stay aligned. */
#define ALIGN16(n) (((n) + 15u) & ~(size_t)15u)

/* The client's loop: sources and timers of the caller's own outputs go here. NULL if c is not a client. */
struct kr_loop *kr_client_loop(struct kr_client *c);

/* The reflectors and the store once started (NULL before). Read-only for callers. */
struct kr_reflect *kr_client_reflect(struct kr_client *c);
struct kr_store *kr_client_store(struct kr_client *c);

/* The reflector options before start (NULL after): for settings kr_config does not expose. */
struct kr_reflector_opts *kr_client_opts(struct kr_client *c);

/* Resource res as configured (NULL if out of range). */
struct kr_resource *kr_client_resource(struct kr_client *c, int res);

/* The capacities cfg asks for (as kr_client_init resolves them): 0 or KR_EINVAL. */
int kr_client_capacities_for(const struct kr_config *cfg, size_t *objects, size_t *arena);

/* kr_client_listen with all of the endpoint's options (hook metrics of the CLI's outputs too). */
struct kr_serve_opts;
int kr_client_listen_opts(struct kr_client *c, void *mem, size_t len, const struct kr_serve_opts *o,
			  char *err, size_t errlen);

/*
 * The hooks kr_client_hooks and kr_client_program (client_hooks.c) set up in the caller's memory
 * (NULL: none), which kr_client_endpoint's /metrics shows too. The slot is
 * NULL if c is not a client.
 */
struct kr_notify;
struct kr_http_post;
struct kr_supervise;
struct kr_client_hooks {
	struct kr_notify *notify;      /* --exec, --signal */
	struct kr_http_post *post;     /* --http-post */
	struct kr_supervise *program;  /* -- PROGRAM (kr_client_program) */
};
struct kr_client_hooks *kr_client_hooks_slot(struct kr_client *c);

/* Whether an output taking this many event callbacks may be added now: 0,
 * KR_EINVAL (not a client), KR_ESTATE (started, or from a callback), KR_ENOSPC. */
int kr_client_may_add(struct kr_client *c, int callbacks);

/* 1 while a callback of c runs (where only the read-only calls are legal). */
int kr_client_in_callback(struct kr_client *c);

/*
 * The outputs set up through the door in the caller's memory, one of each:
 * the directory sink (client_dir.c) and the JSON lines (client_jsonl.c).
 * kr_client_stop calls end(p) of each, in this order (the last batch of
 * files, then the last lines), every time: end must be safe to repeat. With
 * p NULL, only says whether one may be attached now. Returns 0, KR_EINVAL
 * (not a client), KR_ESTATE (started, from a callback, one attached already),
 * KR_ENOSPC (p NULL and no event callback left). kr_client_output: the one
 * attached, or NULL.
 */
enum kr_client_output { KR_CLIENT_OUT_DIR, KR_CLIENT_OUT_JSONL, KR_CLIENT_OUTS };
int kr_client_set_output(struct kr_client *c, enum kr_client_output o, void *p, void (*end)(void *p));
void *kr_client_output(struct kr_client *c, enum kr_client_output o);

/*
 * A caller's sized configuration (struct_size first) copied into this
 * library's out[0..out_size), whose defaults are already there: 0, KR_EINVAL
 * (NULL, or a struct_size below min: not made by its init), KR_ENOTSUP (a
 * longer struct with a field this library does not have set).
 */
int kr_client_sized_in(const void *given, size_t min, void *out, size_t out_size);

/* A sized configuration's init: zeroes cfg[0..size) and sets its struct_size
 * (its first field) to size. KR_EINVAL, touching nothing, if size < min. */
int kr_client_sized_init(void *cfg, size_t size, size_t min);

/* sizeof(struct kr_client), for the budget. */
size_t kr_client_struct_size(void);

#endif /* KR_CLIENT_H */
