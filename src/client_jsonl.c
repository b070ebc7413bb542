/*
 * kreflect's own output through the library's door (kreflect.h "JSON
 * lines"): the JSON-lines sink (sink_jsonl.c) in the caller's memory as one of
 * the client's event callbacks, its flush before the client's loop sleeps
 * (ahead of the directory sink's batch) and in kr_client_stop.
 */
#include "client.h"

#include <stdint.h>

#include "loop.h"
#include "sink.h"

/* kr_client_stop's: the last lines; a failed output has said so once. */
static void last_lines(void *j)
{
	(void)kr_jsonl_flush(j);
}

size_t kr_jsonl_memory(void)
{
	return ALIGN16(sizeof(struct kr_jsonl));
}

int kr_client_jsonl(struct kr_client *c, void *mem, size_t len, int fd)
{
	struct kr_loop *loop = kr_client_loop(c);
	struct kr_jsonl *j = mem;
	int r;

	if (!loop || !mem || ((uintptr_t)mem & 15u) || fd < 0)
		return KR_EINVAL;
	r = kr_client_set_output(c, KR_CLIENT_OUT_JSONL, NULL, NULL);
	if (r != 0)
		return r;
	if (len < kr_jsonl_memory())
		return KR_ENOSPC;
	if (kr_loop_before_poll_first(loop, kr_jsonl_flush, j) != 0)
		return KR_ENOSPC;
	kr_jsonl_init(j, fd);
	kr_client_on_event(c, kr_jsonl_event, j);      /* room checked above */
	kr_client_set_output(c, KR_CLIENT_OUT_JSONL, j, last_lines);
	return 0;
}
