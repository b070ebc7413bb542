/*
 * Kubeconfig: reads kubeconfig files as kubectl and client-go do and resolves
 * them to one answer: where to connect, how to verify the server, and which
 * credentials to present.
 *
 * YAML is read in the subset kubectl writes: block mappings and sequences
 * (also "- name: x" at the parent key's indentation), plain, single- and
 * double-quoted scalars, comments, | and > block scalars, one document with an
 * optional "---", and the empty flow collections {} and []. Anchors, aliases,
 * tags and non-empty flow collections are refused with an error. A file whose
 * first non-space character is '{' is JSON (kubectl config view --raw -o json).
 *
 * Several files merge as KUBECONFIG=a:b does: for each named cluster, user and
 * context the first file that defines the name wins, and the first file that
 * sets current-context wins; missing files are skipped. Relative paths resolve
 * against the directory of the file that names them. Every file is checked
 * whole (shape and *-data), as kubectl decodes every file whole; the limits
 * on string lengths apply only to what the answer uses. Users that need an
 * exec plugin, an auth-provider or impersonation are refused with an error
 * naming the user.
 *
 * Nothing is allocated: the caller passes a kr_kubeconfig_work that holds the
 * file being read, its parse tree and the decoded *-data; the answer's data
 * pointers point into it. Errors come back as a KR_E... code and one line,
 * "kubeconfig PATH:LINE: what", that never contains a token, password or key.
 */
#ifndef KR_KUBECONFIG_H
#define KR_KUBECONFIG_H

#include <stddef.h>

#include "json.h"
#include "kreflect_config.h"
#include "yaml.h"

/* Largest kubeconfig file read (each file of a KUBECONFIG list). */
#ifndef KR_KUBECONFIG_MAX
#define KR_KUBECONFIG_MAX (256u * 1024u)
#endif

/* YAML nodes (scalars, keys, mappings, sequences) or JSON tokens in one file. */
#ifndef KR_KUBECONFIG_NODES
#define KR_KUBECONFIG_NODES 4096
#endif

/* Mappings and sequences nested in each other (kubectl's own go 7 deep). */
#ifndef KR_KUBECONFIG_DEPTH
#define KR_KUBECONFIG_DEPTH 32
#endif

/* Decoded *-data of the answer (CA, client certificate, key), each with its NUL. */
#ifndef KR_KUBECONFIG_DATA_MAX
#define KR_KUBECONFIG_DATA_MAX (KR_KUBECONFIG_MAX / 4u * 3u + 3u)
#endif

/* Context, cluster, user and namespace names; tls-server-name; username. */
#ifndef KR_KUBECONFIG_NAME_MAX
#define KR_KUBECONFIG_NAME_MAX 256
#endif

/* server and proxy-url. */
#ifndef KR_KUBECONFIG_URL_MAX
#define KR_KUBECONFIG_URL_MAX 1024
#endif

/* A file path after resolution against the kubeconfig's directory. */
#ifndef KR_KUBECONFIG_PATH_MAX
#define KR_KUBECONFIG_PATH_MAX 1024
#endif

/* A basic-auth password. */
#ifndef KR_KUBECONFIG_SECRET_MAX
#define KR_KUBECONFIG_SECRET_MAX 1024
#endif

#if KR_KUBECONFIG_NODES < 16 || KR_KUBECONFIG_DEPTH < 8
#error "KR_KUBECONFIG_NODES below 16 or KR_KUBECONFIG_DEPTH below 8 cannot hold a kubeconfig"
#endif
#if KR_KUBECONFIG_MAX > 0x40000000u
#error "KR_KUBECONFIG_MAX above 1 GiB is not supported"
#endif
#if KR_KUBECONFIG_NAME_MAX < 64 || KR_KUBECONFIG_PATH_MAX < 64 || KR_KUBECONFIG_URL_MAX < 64
#error "kubeconfig name, path and URL buffers must hold at least 64 bytes"
#endif

/*
 * The answer. Strings are NUL-terminated and "" when unset. Of a file and its
 * *-data at most one is set. Data buffers point into the work area, have a
 * NUL after their length (as mbedTLS's PEM parser wants) and are NULL/0 when
 * unset. No credentials at all means the user entry has none (anonymous).
 */
struct kr_kubeconfig {
	char context[KR_KUBECONFIG_NAME_MAX];     /* the context used */
	char cluster[KR_KUBECONFIG_NAME_MAX];     /* its cluster's name */
	char user[KR_KUBECONFIG_NAME_MAX];        /* its user's name */
	char ns[KR_KUBECONFIG_NAME_MAX];          /* its namespace ("" = the caller's default) */
	char server[KR_KUBECONFIG_URL_MAX];       /* https://host:port, never "" on success */
	char tls_server_name[KR_KUBECONFIG_NAME_MAX];
	char proxy_url[KR_KUBECONFIG_URL_MAX];
	int insecure_skip_tls_verify;             /* never set together with a CA */
	char ca_file[KR_KUBECONFIG_PATH_MAX];
	unsigned char *ca_data;
	size_t ca_data_len;
	char cert_file[KR_KUBECONFIG_PATH_MAX];   /* client certificate: always with a key */
	unsigned char *cert_data;
	size_t cert_data_len;
	char key_file[KR_KUBECONFIG_PATH_MAX];
	unsigned char *key_data;                  /* secret: never log */
	size_t key_data_len;
	char token[KR_TOKEN_MAX + 1];             /* secret; used first when set */
	char token_file[KR_KUBECONFIG_PATH_MAX];  /* re-read it for rotated tokens */
	char username[KR_KUBECONFIG_NAME_MAX];    /* basic auth; never with a token */
	char password[KR_KUBECONFIG_SECRET_MAX];  /* secret */
};

/*
 * The caller's work area: large (about 650 KiB with the defaults), usually
 * static. It must outlive every use of the answer's data pointers. The fields
 * are private.
 */
struct kr_kubeconfig_work {
	char file[KR_KUBECONFIG_MAX];             /* the file being read */
	struct kr_yaml_node nodes[KR_KUBECONFIG_NODES];   /* the tree (yaml.h) */
	kr_json_tok toks[KR_KUBECONFIG_NODES];
	unsigned char data[KR_KUBECONFIG_DATA_MAX];
	char path[KR_KUBECONFIG_PATH_MAX];        /* the KUBECONFIG list entry being read */
	size_t data_used;
	int nnodes;
	int root;                                 /* the document's top node, or -1 */
	int doc;                                  /* which document the tree is of, or -1 */
};

/*
 * Loads and merges the files paths[0..npaths) (missing ones are skipped, as
 * in a KUBECONFIG list) and resolves the context named context (NULL or "":
 * current-context) into *out. Returns 0, or KR_ENOENT (no file exists; no such
 * context, cluster or user), KR_ETOOBIG (a file over KR_KUBECONFIG_MAX, a
 * value over its buffer), KR_EIO (unreadable file) or KR_EINVAL (malformed or
 * unsupported), with one line in err ("kubeconfig PATH:LINE: what").
 */
int kr_kubeconfig_load(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
		       const char *const *paths, int npaths, const char *context,
		       char *err, size_t errlen);

/*
 * As kr_kubeconfig_load, for a list of paths separated by ':' as in
 * $KUBECONFIG (empty entries are ignored).
 */
int kr_kubeconfig_load_list(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
			    const char *list, const char *context, char *err, size_t errlen);

/*
 * As kr_kubeconfig_load, for one kubeconfig held in buf[0..len) (no NUL
 * needed; not modified, not kept). name stands for the file in messages and
 * relative paths resolve against its directory, as if it had been read.
 */
int kr_kubeconfig_load_buffer(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w,
			      const char *buf, size_t len, const char *name,
			      const char *context, char *err, size_t errlen);

/* Zeroes the answer and the work area's copies of the file and the *-data. */
void kr_kubeconfig_wipe(struct kr_kubeconfig *out, struct kr_kubeconfig_work *w);

#endif /* KR_KUBECONFIG_H */
