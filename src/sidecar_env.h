/*
 * kreflect --k8s-sidecar (or run under the name k8s-sidecar): the
 * configuration of kiwigrid's k8s-sidecar, read from its environment
 * variables, mapped onto kreflect's own options, so that a pod configured for
 * k8s-sidecar runs kreflect unchanged.
 *
 * Each variable k8s-sidecar documents is either mapped (LABEL, FOLDER,
 * NAMESPACE lists, REQ_* ...), accepted because kreflect already behaves so
 * (IGNORE_ALREADY_PROCESSED), or refused with an error naming it when
 * kreflect cannot honour it (HEALTH_PORT, LOG_FORMAT, ...). A bad value is an
 * error naming the variable; a secret's value (REQ_PASSWORD) is never shown.
 *
 * The CLI's own part, like its --help: what it reads goes straight into the
 * library's public structs (kreflect.h's resource specs, kr_dir_config,
 * kr_hooks_config), the ones the flags fill, so main.c hands them to the
 * library as they are.
 */
#ifndef KR_SIDECAR_ENV_H
#define KR_SIDECAR_ENV_H

#include <stddef.h>

#include "kreflect.h"
#include "kreflect_config.h"

#define KR_SIDECAR_PAYLOAD_MAX 4096    /* REQ_PAYLOAD bytes, as sent */
#define KR_SIDECAR_PAYLOAD_TOKENS 256  /* JSON tokens of a REQ_PAYLOAD object */
#define KR_SIDECAR_CRED_MAX 256        /* REQ_USERNAME, REQ_PASSWORD bytes each */
#define KR_SIDECAR_NAMESPACES 16       /* NAMESPACE entries */
#define KR_SIDECAR_NOTES 6             /* start-up notes logged by the caller */
#define KR_SIDECAR_DEFAULT_ANNOTATION "k8s-sidecar-target-directory"

enum kr_sidecar_method {
	KR_SIDECAR_WATCH,              /* WATCH (or unset) */
	KR_SIDECAR_LIST,               /* list once, write, request, exit */
	KR_SIDECAR_SLEEP,              /* k8s-sidecar polls; kreflect watches */
};

/* The configuration read; the caller owns it (about 12 KiB: declare it static). */
struct kr_sidecar {
	struct kr_resource_spec res[KR_MAX_RESOURCES];  /* one per type, namespace and name */
	int nres;
	enum kr_sidecar_method method;
	struct kr_dir_config dir;      /* FOLDER and the rest: path, annotation, modes, naming */
	struct kr_hooks_config hooks;  /* SCRIPT as the command ("'path'" or "sh 'path'"),
					  REQ_URL and its request, the debounce left at 1000 */
	int insecure;                  /* SKIP_TLS_VERIFY=true */
	int log_level;                 /* KR_LOG_... from LOG_LEVEL */
	int idle_ms;                   /* WATCH_CLIENT_TIMEOUT, 0 if unset */
	int watch_timeout_s;           /* WATCH_SERVER_TIMEOUT, 0 if unset */
	char health_listen[64];        /* HEALTH_HOST:HEALTH_PORT (0.0.0.0:8080), "" for HEALTH_PORT=0 */
	char notes[KR_SIDECAR_NOTES][200]; /* what the caller should log (info) at start */
	int nnotes;
	/* storage behind the pointers above */
	char ns[KR_MAX_RESOURCES][KR_NAME_MAX];
	char field_selector[KR_MAX_RESOURCES][KR_SELECTOR_MAX];
	char label_selector[KR_SELECTOR_MAX];
	char exec[1024];
	char payload[KR_SIDECAR_PAYLOAD_MAX];
	char authorization[16 + (2 * KR_SIDECAR_CRED_MAX + 3) / 3 * 4 + 4];
	char user[KR_SIDECAR_CRED_MAX + 1];
	char pass[KR_SIDECAR_CRED_MAX + 1];
};

/* Looks a variable up: NULL when unset. */
typedef const char *(*kr_sidecar_getenv_fn)(void *arg, const char *name);

/*
 * Nonzero if argv asks for k8s-sidecar mode: --k8s-sidecar among the
 * arguments before any "--", or argv[0]'s last path component is "k8s-sidecar".
 */
int kr_sidecar_wanted(int argc, char **argv);

/*
 * Reads k8s-sidecar's variables through get into c, and the arguments
 * k8s-sidecar takes (--req-username-file, --req-password-file; also
 * --k8s-sidecar itself). Returns 0, or KR_EINVAL with err saying which
 * variable or argument and why (never a secret's value). Files named by
 * REQ_*_FILE are read now. Strings of c point into get's results, which
 * must outlive c.
 */
int kr_sidecar_parse(struct kr_sidecar *c, kr_sidecar_getenv_fn get, void *arg, int argc,
		     char **argv, char *err, size_t errlen);

#endif /* KR_SIDECAR_ENV_H */
