/*
 * The directory sink through the library's door (kreflect.h "the directory
 * sink"): the sized configuration checked and turned into the sink's options,
 * the sink set up in the caller's memory as one of the client's event
 * callbacks, its flush on the client's loop, its close in kr_client_stop.
 * Apart from client.c so that a program that never writes files links none
 * of sink_dir.c.
 */
#include "client.h"
#include "kreflect_config.h"

#include <stdint.h>
#include <string.h>

#include "fmt.h"
#include "sink_dir.h"

/* struct kr_dir_config as 1.1 released it: a struct_size below this is not one of ours. */
#define DIR_CONFIG_SIZE_1_1 (offsetof(struct kr_dir_config, sweep_by_scope) + sizeof(int))

void kr_dir_config_init_size(struct kr_dir_config *dc, size_t size)
{
	kr_client_sized_init(dc, size, DIR_CONFIG_SIZE_1_1);
}

/* The caller's configuration as this library's: 0, KR_EINVAL, KR_ENOTSUP. */
static int dir_config_in(const struct kr_dir_config *dc, struct kr_dir_config *in)
{
	kr_dir_config_init(in);
	return kr_client_sized_in(dc, DIR_CONFIG_SIZE_1_1, in, sizeof(*in));
}

size_t kr_dir_memory(const struct kr_dir_config *dc)
{
	struct kr_dir_config in;

	if (!KR_WITH_DIR || dir_config_in(dc, &in) != 0 || in.max_files > KR_DIRSINK_MAX_FILES)
		return 0;
	return ALIGN16(sizeof(struct kr_dirsink));
}

static int fail(char *err, size_t errlen, int code, const char *text)
{
	if (err && errlen)
		kr_snprintf(err, errlen, "%s", text);
	return code;
}

static void close_dir(void *d)
{
	kr_dirsink_close(d);
}

int kr_client_dir(struct kr_client *c, void *mem, size_t len, const struct kr_dir_config *dc,
		  char *err, size_t errlen)
{
	struct kr_dir_config in;
	struct kr_dirsink_opts o;
	struct kr_dirsink *d = mem;
	struct kr_loop *loop = kr_client_loop(c);
	int r;

	if (err && errlen)
		err[0] = '\0';
	if (!loop || !mem || ((uintptr_t)mem & 15u))
		return fail(err, errlen, KR_EINVAL, "the directory sink needs a client and 16-byte aligned "
			    "memory");
	if (!KR_WITH_DIR)
		return fail(err, errlen, KR_ENOTSUP, "unable to write files: the directory sink is not "
			    "built into this kreflect");
	r = dir_config_in(dc, &in);
	if (r == KR_ENOTSUP)
		return fail(err, errlen, r, "the directory sink's configuration sets a field this "
			    "kreflect does not have");
	if (r != 0)
		return fail(err, errlen, r, "the directory sink's configuration was not made by "
			    "kr_dir_config_init");
	if ((unsigned)in.layout > KR_DIR_LAYOUT_OBJECT || (unsigned)in.sync > KR_DIR_SYNC_EACH)
		return fail(err, errlen, KR_EINVAL, "the directory sink's layout or sync is not one of "
			    "KR_DIR_LAYOUT_... or KR_DIR_SYNC_...");
	r = kr_client_set_output(c, KR_CLIENT_OUT_DIR, NULL, NULL);
	if (r == KR_ESTATE)
		return fail(err, errlen, r, "the directory sink is set up once, before kr_client_start");
	if (r != 0)
		return fail(err, errlen, r, "no event callback left for the directory sink");
	if (len < kr_dir_memory(&in)) {
		kr_snprintf(err, errlen, "the directory sink needs %zu bytes of memory, given %zu",
			    kr_dir_memory(&in), len);
		return KR_ENOSPC;
	}
	memset(&o, 0, sizeof(o));
	o.path = in.path;
	o.layout_object = in.layout == KR_DIR_LAYOUT_OBJECT;
	o.annotation = in.annotation;
	o.file_mode = in.file_mode;
	o.secret_mode = in.secret_mode;
	o.max_files = in.max_files;
	o.unique_names = in.unique_names != 0;
	o.annotation_absolute = in.annotation_absolute != 0;
	o.url_keys_refused = in.url_keys_refused != 0;
	if (in.sweep_by_scope) {
		o.scopes = kr_client_resource(c, 0);
		o.nscopes = kr_client_resources(c);
	}
	o.batch = in.sync == KR_DIR_SYNC_BATCH;
	r = kr_dirsink_init(d, &o, err, errlen);
	if (r != 0)
		return r;
	kr_client_on_event(c, kr_dirsink_event, d);   /* room checked above */
	/* The batch's files in place before the loop sleeps and before any timer (a hook). */
	kr_loop_before_poll(loop, kr_dirsink_flush, d);
	kr_loop_before_timers(loop, kr_dirsink_flush, d);
	kr_client_set_output(c, KR_CLIENT_OUT_DIR, d, close_dir);
	return 0;
}

int kr_client_dir_stats(struct kr_client *c, struct kr_dir_stats *st)
{
	const struct kr_dirsink *d = kr_client_output(c, KR_CLIENT_OUT_DIR);

	if (!st || !kr_client_loop(c))
		return KR_EINVAL;
	memset(st, 0, sizeof(*st));
	if (!KR_WITH_DIR || !d)
		return KR_ESTATE;
	st->written = d->stats.written;
	st->unchanged = d->stats.unchanged;
	st->removed = d->stats.removed;
	st->conflicts = d->stats.conflicts;
	st->errors = d->stats.errors;
	st->files = kr_dirsink_files(d);
	return 0;
}
