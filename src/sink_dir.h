/*
 * The directory sink: the reflected objects as files under one root
 * directory, for programs that read files rather than speak to the API.
 *
 * ConfigMaps and Secrets become one file per data key (`data` as text,
 * `binaryData` and Secret `data` base64-decoded), named by the key, in the
 * target directory, or in <target>/<namespace>/<name>/ with the object
 * layout; every other resource becomes one file <namespace>_<name>.json (or
 * <name>.json when cluster-scoped) holding the object JSON as the event gives
 * it. The target is the root, or the subdirectory of the root that the
 * object's annotation names (confined to the root: no absolute path, no `..`).
 *
 * Files are replaced atomically (temporary file, fsync, rename, fsync of the
 * directory; in batch mode one file system sync for a batch of files before
 * their renames and one after) and only when their bytes or mode differ, to
 * spare flash. The root is opened once and every call is made relative to it
 * one component at a time, never following a symbolic link, so a directory
 * or file swapped for a link never sends a write outside the root. The
 * files kreflect owns are listed in a manifest in the root, so that it removes
 * exactly its own files (a deleted object, a removed key, objects deleted while
 * it was not running) and never writes over a file it does not own. The
 * manifest is a journal: an entry is appended (and synced) before its file is
 * created, a removal after the file is gone, and it is rewritten atomically
 * when it has grown to twice its live entries.
 */
#ifndef KR_SINK_DIR_H
#define KR_SINK_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "kreflect_config.h"
#include "resource.h"
#include "sink.h"

/* Files the manifest can own at once; a write beyond it is an error. */
#ifndef KR_DIRSINK_MAX_FILES
#define KR_DIRSINK_MAX_FILES 4096
#endif

/* Bytes for the manifest's names (resource, object key, path of each file). */
#ifndef KR_DIRSINK_NAMES_BYTES
#define KR_DIRSINK_NAMES_BYTES (KR_DIRSINK_MAX_FILES * 128u)
#endif

/* Longest path built, root included, with its NUL; longer ones are refused. */
#ifndef KR_DIRSINK_PATH_MAX
#define KR_DIRSINK_PATH_MAX 1024
#endif

/* Bytes that list the files changed since kr_dirsink_take_changes. */
#ifndef KR_DIRSINK_CHANGES_BYTES
#define KR_DIRSINK_CHANGES_BYTES 8192
#endif

/* Manifest lines gathered before one append and sync. */
#ifndef KR_DIRSINK_JOURNAL_BYTES
#define KR_DIRSINK_JOURNAL_BYTES 8192
#endif

/* Files written and waiting for one flush together (batch mode); one more flushes them first. */
#ifndef KR_DIRSINK_BATCH_FILES
#define KR_DIRSINK_BATCH_FILES 64
#endif

/* Longest file name component (the file system's NAME_MAX). */
#define KR_DIRSINK_NAME_MAX 255
/* Longest resource name kept in the manifest, with its NUL. */
#define KR_DIRSINK_RES_MAX 256
/* Longest manifest line: "+\t" resource "\t" key "\t" path "\n". */
#define KR_DIRSINK_LINE_MAX (2 + KR_DIRSINK_RES_MAX + KR_KEY_MAX + KR_DIRSINK_PATH_MAX)
/* Bytes read at a time when comparing a file or loading the manifest. */
#define KR_DIRSINK_CHUNK 4096

#define KR_DIRSINK_ANNOTATION "kreflect.io/target-dir"
#define KR_DIRSINK_MANIFEST ".kreflect-manifest"
/* The manifest's first line (without its newline); a file without it is not one. */
#define KR_DIRSINK_MANIFEST_HEADER "kreflect-manifest 1"
#define KR_DIRSINK_FILE_MODE 0644u
#define KR_DIRSINK_SECRET_MODE 0600u
#define KR_DIRSINK_DIR_MODE 0755u
#define KR_DIRSINK_MANIFEST_MODE 0600u

#if KR_DIRSINK_MAX_FILES < 1
#error "KR_DIRSINK_MAX_FILES must be at least 1"
#endif
#if KR_DIRSINK_PATH_MAX < 2 * KR_DIRSINK_NAME_MAX + 2
#error "KR_DIRSINK_PATH_MAX must hold a root and a file name of KR_DIRSINK_NAME_MAX"
#endif
#if KR_DIRSINK_BATCH_FILES < 1
#error "KR_DIRSINK_BATCH_FILES must be at least 1"
#endif
#if KR_DIRSINK_CHANGES_BYTES < KR_DIRSINK_PATH_MAX
#error "KR_DIRSINK_CHANGES_BYTES must hold at least one path"
#endif
#if KR_DIRSINK_JOURNAL_BYTES < KR_DIRSINK_LINE_MAX
#error "KR_DIRSINK_JOURNAL_BYTES must hold at least one manifest line"
#endif
#if KR_MAX_OBJECT_BYTES < KR_DIRSINK_LINE_MAX
#error "KR_MAX_OBJECT_BYTES must hold a manifest line (the buffer is shared)"
#endif

struct kr_dirsink_opts {
	const char *path;        /* the root directory; created (0755) if missing */
	int layout_object;       /* ConfigMap and Secret keys in <target>/<ns>/<name>/ */
	const char *annotation;  /* choosing the target subdirectory: NULL for
				    KR_DIRSINK_ANNOTATION, "" for none */
	unsigned file_mode;      /* 0 for KR_DIRSINK_FILE_MODE; at most 0777 */
	unsigned secret_mode;    /* Secret data files; 0 for KR_DIRSINK_SECRET_MODE.
				    One mode for all files: set both. */
	size_t max_files;        /* 0 for KR_DIRSINK_MAX_FILES, which it cannot exceed */
	/* k8s-sidecar's layout (kreflect --k8s-sidecar); all off by default: */
	int unique_names;        /* ConfigMap and Secret files named
				    namespace_<ns>.<configmap|secret>_<name>.<key> */
	int annotation_absolute; /* an absolute annotation inside the root names the
				    same directory relative to it (others: refused) */
	int url_keys_refused;    /* keys ending in ".url" (k8s-sidecar downloads them)
				    are refused with an error, not written as is */
	/* What each resource index covers (namespace, metadata.name= selector), so
	   that a SYNCED sweep removes only files the resource could have listed:
	   several resources of one type (other namespaces or names) share its name;
	   files that none of them covers go with the first sweep. NULL: a resource
	   covers every file recorded under its name. */
	const struct kr_resource *scopes;
	int nscopes;
	/* 0: each file is fsynced before its rename and its directory after, inside
	   the event (an fsync or two per file, each a stall of the caller's loop on
	   slow flash). 1: files are written to temporary files and renamed into
	   place by kr_dirsink_flush, which makes the whole batch durable with one
	   file system sync before the renames and one after; the caller runs it
	   before its loop sleeps and before timers fire (kr_loop_before_poll,
	   kr_loop_before_timers). A SYNCED event, kr_dirsink_take_changes and
	   kr_dirsink_close flush too, as does a batch of KR_DIRSINK_BATCH_FILES. */
	int batch;
};

/* What the sink did, counted per file, since init. */
struct kr_dirsink_stats {
	unsigned long long written;    /* files created or replaced */
	unsigned long long unchanged;  /* files already holding the bytes and mode */
	unsigned long long removed;    /* files removed */
	unsigned long long conflicts;  /* files not written: another owner, or not kreflect's */
	unsigned long long errors;     /* refused names, bad values, failed system calls */
};

/* A file written to a temporary file, renamed by the next flush; private. */
struct kr_dirsink_pending {
	char rel[KR_DIRSINK_PATH_MAX];       /* its path, relative to the root */
	char tmp[KR_DIRSINK_NAME_MAX + 1];   /* the temporary file, in the same directory */
};

/* One manifest entry; private. */
struct kr_dirsink_entry {
	uint32_t off;                  /* "resource\0key\0path\0" at names[off] */
	uint32_t len;
	uint32_t owner_hash;           /* of resource and key */
	uint32_t path_hash;
	uint32_t stamp;                /* the event that last wanted it */
	uint32_t flags;
};

/*
 * The sink's state, about 2.5 MiB with the defaults: declare it static. The
 * fields marked "out" are for the caller to read; the others are private. The
 * arrays at the end are never cleared, so pages they do not use cost no RSS.
 */
struct kr_dirsink {
	struct kr_dirsink_stats stats; /* out */
	int ready;
	int layout_object;
	int unique_names;
	int annotation_absolute;
	int url_keys_refused;
	const struct kr_resource *scopes;
	int nscopes;
	unsigned file_mode;
	unsigned secret_mode;
	size_t max_files;
	char root[KR_DIRSINK_PATH_MAX];
	int rootfd;                    /* the root, opened once: every call is relative to it */
	int batch;
	int unsynced;                  /* batch: entries changed since the last flush */
	int rootdev_known;
	uint64_t rootdev;              /* the root's file system: files on another are not batched */
	size_t npending;
	char annotation[KR_DIRSINK_NAME_MAX + 64];
	int syncdir_set;
	char syncdir[KR_DIRSINK_PATH_MAX];  /* a directory (relative) whose fsync is pending */
	uint32_t stamp;                /* events that wrote, counted */
	unsigned long tmp_seq;         /* numbers temporary file names */
	size_t nentries;               /* entries[0..nentries), dead ones included */
	size_t nlive;
	size_t names_used;
	size_t names_garbage;
	size_t manifest_lines;         /* entry lines in the manifest file */
	int rewrite;                   /* the manifest must be rewritten whole */
	size_t jlen;                   /* journal[0..jlen) not yet appended */
	size_t jlines;
	size_t changes_len;            /* changes[0..changes_len): NUL-terminated paths */
	int nchanges;
	int changes_lost;
	char journal[KR_DIRSINK_JOURNAL_BYTES];
	char changes[KR_DIRSINK_CHANGES_BYTES];
	char chunk[KR_DIRSINK_CHUNK];
	/* never cleared: */
	struct kr_dirsink_entry entries[KR_DIRSINK_MAX_FILES];
	char names[KR_DIRSINK_NAMES_BYTES];
	kr_json_tok toks[KR_JSON_TOKENS];
	char buf[KR_MAX_OBJECT_BYTES + 1];  /* a decoded value; a manifest line at load */
	struct kr_dirsink_pending pending[KR_DIRSINK_BATCH_FILES];
};

/*
 * Prepares d over the directory o->path: creates it if missing, loads the
 * manifest (rewriting it if it holds removed or unreadable lines) and checks
 * that files can be created there. Returns 0, or KR_EINVAL (bad options, not
 * a directory), KR_EPROTO (the manifest is not one), KR_EIO (not writable,
 * unreadable) with err[0..errlen) saying why; then events are ignored.
 */
int kr_dirsink_init(struct kr_dirsink *d, const struct kr_dirsink_opts *o, char *err,
		    size_t errlen);

/*
 * The sink callback (arg is the struct kr_dirsink). ADDED, MODIFIED and RESYNC
 * write the object's files that differ and remove those it no longer has;
 * DELETED removes its files; SYNCED removes the files of the resource that no
 * event has wanted since init (objects deleted while kreflect was not
 * running). Failures are logged, naming the object, and counted in d->stats;
 * they never stop the other files. Secret values are never logged.
 */
void kr_dirsink_event(void *arg, const struct kr_event *ev);

/*
 * Batch mode: makes the files written since the last flush durable and
 * renames them into place (one file system sync before the renames, one
 * after, whatever their number), with the manifest lines and removals since.
 * Returns 0 (also with nothing to do, and in the other mode); failures are
 * logged and counted, the files concerned keep their old content. The shape
 * of a kr_loop_before_poll hook (arg is the struct kr_dirsink).
 */
int kr_dirsink_flush(void *arg);

/* Flushes and closes the root descriptor; d may be initialised again after. */
void kr_dirsink_close(struct kr_dirsink *d);

/* Nonzero if a file was written or removed since the last kr_dirsink_take_changes. */
int kr_dirsink_changed(const struct kr_dirsink *d);

/*
 * Flushes (batch mode), then hands the paths (relative to the root) of the
 * files written or removed since the last call to fn, each once, then fn(arg, NULL) once if some did not fit
 * in KR_DIRSINK_CHANGES_BYTES; fn may be NULL. Clears the list. Returns how
 * many files changed (0: none): each listed one once, and those that did not
 * fit once per change.
 */
int kr_dirsink_take_changes(struct kr_dirsink *d, void (*fn)(void *arg, const char *path),
			    void *arg);

/* Files the manifest owns now. */
size_t kr_dirsink_files(const struct kr_dirsink *d);

#endif /* KR_SINK_DIR_H */
