#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "kreflect.h"
#include "serve.h"
#include "test.h"

static kr_json_tok toks[256];

static int match(const char *sel, const char *obj)
{
	return kr_serve_labels_match(sel, obj, strlen(obj), toks, 256);
}

KR_TEST(serve, label_selectors)
{
	const char *o = "{\"metadata\":{\"name\":\"a\",\"labels\":{\"app\":\"web\",\"tier\":\"front\","
			"\"example.com/x\":\"1\"}}}";
	const char *none = "{\"metadata\":{\"name\":\"b\"}}";

	check(match("", o) == 1);
	check(match("app=web", o) == 1);
	check(match("app==web", o) == 1);
	check(match("app = web", o) == 1);
	check(match("app=db", o) == 0);
	check(match("app!=db", o) == 1);
	check(match("app!=web", o) == 0);
	check(match("app!=web", none) == 1);
	check(match("app", o) == 1);
	check(match("app", none) == 0);
	check(match("!app", none) == 1);
	check(match("!app", o) == 0);
	check(match("app=web,tier=front", o) == 1);
	check(match("app=web,tier=back", o) == 0);
	check(match("app in (db,web)", o) == 1);
	check(match("app in (db, cache)", o) == 0);
	check(match("app notin (db,cache)", o) == 1);
	check(match("app notin (web)", o) == 0);
	check(match("app notin (web)", none) == 1);
	check(match("tier in (front),app=web", o) == 1);
	check(match("example.com/x=1", o) == 1);
	/* What it cannot read is an error, not a silent match. */
	check(match("app=", o) == 0);           /* empty value: only an object with app="" */
	check(match("=web", o) == KR_EINVAL);
	check(match("app>1", o) == KR_EINVAL);
	check(match("app in db", o) == KR_EINVAL);
	check(match("app in (db", o) == KR_EINVAL);
	check(match("app,,tier", o) == KR_EINVAL);
	check(match("!app=web", o) == KR_EINVAL);
	check(match("app=we b", o) == KR_EINVAL);
	return 0;
}

KR_TEST(serve, listen_addresses)
{
	struct kr_addr a;
	char path[108];
	int lo = -1;

	check(kr_serve_parse_listen("127.0.0.1:8080", &a, &lo, path, sizeof(path)) == 0 && lo == 1 &&
	      a.family == 4 && a.port == 8080);
	check(kr_serve_parse_listen("127.1.2.3:1", &a, &lo, path, sizeof(path)) == 0 && lo == 1);
	check(kr_serve_parse_listen("[::1]:9000", &a, &lo, path, sizeof(path)) == 0 && lo == 1 &&
	      a.family == 6 && a.port == 9000);
	check(kr_serve_parse_listen("0.0.0.0:80", &a, &lo, path, sizeof(path)) == 0 && lo == 0);
	check(kr_serve_parse_listen("10.0.0.5:80", &a, &lo, path, sizeof(path)) == 0 && lo == 0);
	check(kr_serve_parse_listen("[::]:80", &a, &lo, path, sizeof(path)) == 0 && lo == 0);
	check(kr_serve_parse_listen("unix:/run/kreflect.sock", &a, &lo, path, sizeof(path)) == 1 &&
	      lo == 1 && strcmp(path, "/run/kreflect.sock") == 0);
	check(kr_serve_parse_listen("unix:relative", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("localhost:80", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("127.0.0.1", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("127.0.0.1:", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("127.0.0.1:65536", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("127.0.0.1:8x", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("::1:80", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	check(kr_serve_parse_listen("[::1]80", &a, &lo, path, sizeof(path)) == KR_EINVAL);
	{
		char longp[200];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[sizeof(longp) - 1] = '\0';
		memcpy(longp, "unix:/", 6);
		check(kr_serve_parse_listen(longp, &a, &lo, path, sizeof(path)) == KR_EINVAL);
	}
	return 0;
}

/* A serve with no connections, fed as a sink: the history ring alone. */
static struct kr_serve srv;
static struct kr_reflect top;

static void event(int type, const char *key, const char *rv)
{
	struct kr_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = (enum kr_event_type)type;
	ev.res = 0;
	ev.resource = "configmaps";
	ev.key = key;
	ev.rv = rv;
	kr_serve_event(&srv, &ev);
}

KR_TEST(serve, history_ring_wraps_and_forgets_the_oldest)
{
	char key[400], rv[32];
	uint64_t seq, first_held = 0;
	size_t pos;
	int i, n = 20000;

	memset(&srv, 0, sizeof(srv));
	memset(&top, 0, sizeof(top));
	srv.top = &top;
	for (i = 1; i <= n; i++) {
		/* Keys of every length up to KR_KEY_MAX - 1, so records end at every offset. */
		size_t kl = 1 + (size_t)(i * 7) % (KR_KEY_MAX - 1);

		memset(key, 'k', kl);
		key[kl] = '\0';
		snprintf(rv, sizeof(rv), "%d", i);
		event(i % 3 == 0 ? KR_EV_DELETED : KR_EV_MODIFIED, key, rv);
		check(srv.seq_head == (uint64_t)i);
		check(srv.seq_head - srv.seq_tail >= 1);
		/* The newest is always found, just before the head. */
		check(kr_serve_history_find(&srv, 0, rv, &seq, &pos) == 1 && seq == srv.seq_head &&
		      pos == srv.ring_head);
	}
	/* It forgot: the ring holds a bounded number, and exactly those are found. */
	check(srv.seq_tail > 0);
	check(srv.seq_head - srv.seq_tail < (uint64_t)n);
	for (i = 1; i <= n; i++) {
		int found;

		snprintf(rv, sizeof(rv), "%d", i);
		found = kr_serve_history_find(&srv, 0, rv, &seq, &pos);
		check(found == ((uint64_t)i > srv.seq_tail));
		if (found && !first_held)
			first_held = (uint64_t)i;
		if (found)
			check(seq == (uint64_t)i);
	}
	check(first_held == srv.seq_tail + 1);
	/* Another resource's version is not ours; a list's version (SYNCED) is found. */
	check(kr_serve_history_find(&srv, 1, "20000", &seq, &pos) == 0);
	{
		struct kr_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.type = KR_EV_SYNCED;
		ev.rv = "list-rv";
		kr_serve_event(&srv, &ev);
		check(kr_serve_history_find(&srv, 0, "list-rv", &seq, &pos) == 1 && seq == srv.seq_head);
		check(strcmp(srv.res[0].rv, "list-rv") == 0 && srv.res[0].syncs == 1);
	}
	check(srv.res[0].events[KR_EV_DELETED] == (unsigned long long)n / 3);
	return 0;
}

KR_TEST(serve, metrics_overflow_is_reported)
{
	char small[64];
	struct kr_out o = { small, sizeof(small), 0, 0 };
	struct kr_store st;

	memset(&srv, 0, sizeof(srv));
	memset(&top, 0, sizeof(top));
	memset(&st, 0, sizeof(st));
	srv.top = &top;
	srv.store = &st;
	kr_serve_metrics(&srv, &o);
	check(o.overflow);
	return 0;
}

KR_TEST(serve, store_walk_by_slot)
{
	static char arena[65536];
	static struct kr_entry entries[8];
	static int32_t buckets[8];
	struct kr_store st;
	struct kr_store_view v;
	uint32_t i, found = 0;

	kr_store_init(&st, arena, sizeof(arena), entries, 8, buckets, 8, 0);
	check(kr_store_put(&st, 0, "ns/a", 4, "1", "u1", "{\"a\":1}", 7, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_put(&st, 1, "ns/b", 4, "2", "u2", "{\"b\":2}", 7, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_put(&st, 0, "ns/c", 4, "3", "u3", "{\"c\":3}", 7, 0, NULL) == KR_STORE_ADDED);
	check(kr_store_delete(&st, 0, "ns/a", 4, NULL) == 1);
	for (i = 0; i < 8; i++) {
		if (!kr_store_at(&st, i, &v))
			continue;
		found++;
		check(v.held && v.keylen == 4 && v.obj[0] == '{');
		check(strcmp(v.key, "ns/a") != 0);
	}
	check(found == 2);
	/* Slots past the index are empty, not an error. */
	check(kr_store_at(&st, 8, &v) == 0);
	check(kr_store_at(&st, 0xffffffffu, &v) == 0);
	/* Compaction moves records, not slots: a walk resumed after it sees the same objects. */
	kr_store_compact(&st);
	for (i = 0, found = 0; i < 8; i++)
		found += (uint32_t)kr_store_at(&st, i, &v);
	check(found == 2);
	return 0;
}
