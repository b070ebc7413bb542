#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "sink.h"
#include "test.h"

static int capture(const struct kr_event *ev, char *out, size_t size)
{
	struct kr_jsonl j;
	int p[2];
	ssize_t n;

	if (pipe(p) != 0)
		return -1;
	kr_jsonl_init(&j, p[1]);
	kr_jsonl_event(&j, ev);
	close(p[1]);
	n = read(p[0], out, size - 1);
	close(p[0]);
	if (n < 0)
		return -1;
	out[n] = '\0';
	return (int)j.lines;
}

KR_TEST(sink, jsonl_object_line)
{
	struct kr_event ev = { KR_EV_MODIFIED, 0, "configmaps", "default/a", "7",
			       "{\"metadata\":{\"name\":\"a\"}}", 25, 0, 0 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n") == 0);
	return 0;
}

KR_TEST(sink, jsonl_synced_line_escapes)
{
	struct kr_event ev = { KR_EV_SYNCED, 0, "we\"ird", NULL, "12\\3", NULL, 0, 42, 0 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"SYNCED\",\"resource\":\"we\\\"ird\",\"resourceVersion\":\"12\\\\3\",\"count\":42}\n") == 0);
	return 0;
}

KR_TEST(sink, jsonl_write_failure_is_reported_once)
{
	struct kr_event ev = { KR_EV_ADDED, 0, "configmaps", "k", "1", "{}", 2, 0, 0 };
	struct kr_jsonl j;
	int p[2];

	check(pipe(p) == 0);
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	kr_jsonl_init(&j, p[1]);
	kr_jsonl_event(&j, &ev);
	check(j.failed == 1 && j.lines == 0);
	kr_jsonl_event(&j, &ev);
	check(j.failed == 1 && j.lines == 0);
	close(p[1]);
	return 0;
}

KR_TEST(sink, jsonl_partial_sync_is_marked)
{
	struct kr_event ev = { KR_EV_SYNCED, 0, "configmaps", NULL, "9", NULL, 0, 3, 1 };
	char out[256];

	check(capture(&ev, out, sizeof(out)) == 1);
	check(strcmp(out, "{\"type\":\"SYNCED\",\"resource\":\"configmaps\",\"resourceVersion\":\"9\",\"count\":3,\"partial\":true}\n") == 0);
	return 0;
}
