/*
 * The fault injector: per seed, the server's settings and a schedule of
 * writes (creates, updates, deletes, delete-then-recreate with a new uid,
 * label moves, bursts, compactions) interleaved with weather: clear spells,
 * flaky spells (random per-request faults) and storms (refused connects, a
 * black hole, a server answering 5xx, no DNS, throttling). Everything is
 * drawn from the world's one PRNG at the moment it happens.
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

static const char *const weather_names[KR_SIM_NWEATHER] = {
	[KR_SIM_CLEAR] = "clear", [KR_SIM_FLAKY] = "flaky", [KR_SIM_REFUSE] = "connections refused",
	[KR_SIM_BLACKHOLE] = "black hole", [KR_SIM_DOWN] = "server answers 5xx",
	[KR_SIM_NODNS] = "no DNS", [KR_SIM_THROTTLE] = "throttled (429)",
	[KR_SIM_MANGLE] = "every body mangled",
};

#define SCRIPTS 8

static struct kr_sim_script scripts[SCRIPTS];
static int nscripts;

static struct {
	kr_ms_t t;
	void (*fn)(void);
} timetable[SCRIPTS];
static int ntimed;

int kr_sim_at(kr_ms_t t, void (*fn)(void))
{
	if (ntimed == SCRIPTS)
		return -1;
	timetable[ntimed].t = t;
	timetable[ntimed].fn = fn;
	ntimed++;
	return 0;
}

/* Timed writes due now; they happen whatever the weather. */
static int timed_due(kr_ms_t now)
{
	int i, did = 0;

	for (i = 0; i < ntimed; i++)
		if (timetable[i].fn && timetable[i].t <= now) {
			void (*fn)(void) = timetable[i].fn;

			timetable[i].fn = NULL;
			kr_sim_trace("timed write %d", i);
			fn();
			did = 1;
		}
	return did;
}

/*
 * Tokens: the file kreflect re-reads and the ones the server accepts. A
 * rotation is graceful (the file changes, the old token stays valid for a
 * while), or the server switches first (the file follows after a delay), or
 * the file changes first (the server follows).
 */
#define TOKEN_LEN 40

static struct {
	int on;
	unsigned serial;
	char file[TOKEN_LEN];
	char accepted[2][TOKEN_LEN];
	kr_ms_t step_at;               /* the rotation's second half */
	int step;                      /* 1: drop the old token, 2: the file follows, 3: the server follows */
	char pending[TOKEN_LEN];
} tok;

static struct {
	int running, quiet;
	kr_ms_t until;
	kr_ms_t calm_until;            /* kr_sim_chaos_calm: nothing happens before this */
	kr_ms_t forced_until;          /* kr_sim_chaos_outage: clear again at this time (0: none) */
	kr_ms_t next_write, next_weather, next_compact, next_zap, next_rotate;
	int weather;
	unsigned flaky_permille;       /* requests that get a fault in flaky weather */
	int write_ms;                  /* mean time between writes */
	int clear_ms, storm_ms;        /* mean length of clear spells and storms */
	int zap_ms;                    /* flaky weather: mean time between faults on open connections */
	unsigned storm_weights[KR_SIM_NWEATHER];
	unsigned focus;                /* types the client watches (bit mask) */
	unsigned long writes, storms;
} ch;

const char *kr_sim_weather_name(int w)
{
	return w >= 0 && w < KR_SIM_NWEATHER ? weather_names[w] : "?";
}

int kr_sim_weather(void)
{
	return ch.weather;
}

int kr_sim_outage(void)
{
	return ch.weather == KR_SIM_REFUSE || ch.weather == KR_SIM_BLACKHOLE || ch.weather == KR_SIM_DOWN ||
	       ch.weather == KR_SIM_MANGLE;
}

unsigned long kr_sim_chaos_writes(void)
{
	return ch.writes;
}

unsigned long kr_sim_chaos_storms(void)
{
	return ch.storms;
}

void kr_sim_chaos_focus(unsigned type_mask)
{
	ch.focus = type_mask;
}

/* A random duration around mean: often short, sometimes several times as long (bursty). */
static kr_ms_t around(int mean)
{
	uint64_t r = kr_sim_below(1000);

	if (r < 500)
		return (kr_ms_t)kr_sim_range(1, mean);
	if (r < 850)
		return (kr_ms_t)kr_sim_range(mean, 2 * (int64_t)mean);
	return (kr_ms_t)kr_sim_range(2 * (int64_t)mean, 5 * (int64_t)mean);
}

static int pick_type(void)
{
	int t;

	if (ch.focus && kr_sim_chance(850)) {
		for (;;) {
			t = (int)kr_sim_below(KR_SIM_NTYPES);
			if (ch.focus & (1u << t))
				return t;
		}
	}
	return (int)kr_sim_below(KR_SIM_NTYPES);
}

/* A slot of type that is (want 1) or is not (want 0) present; -1 if none. */
static int pick_slot(int type, int want)
{
	int start = (int)kr_sim_below(KR_SIM_SLOTS), i;

	for (i = 0; i < KR_SIM_SLOTS; i++) {
		int s = (start + i) % KR_SIM_SLOTS;

		if (!!kr_sim_current(type, s)->present == want)
			return s;
	}
	return -1;
}

static void one_write(void)
{
	int type = pick_type(), slot;
	uint64_t r = kr_sim_below(100);

	if (r < 30) {
		slot = pick_slot(type, 0);
		if (slot >= 0)
			kr_sim_create(type, slot);
		return;
	}
	slot = pick_slot(type, 1);
	if (slot < 0) {
		slot = pick_slot(type, 0);
		if (slot >= 0)
			kr_sim_create(type, slot);
		return;
	}
	if (r < 65)
		kr_sim_update(type, slot);
	else if (r < 80)
		kr_sim_delete(type, slot);
	else if (r < 92) {
		/* Deleted and created again under the same name: a new uid. */
		kr_sim_delete(type, slot);
		kr_sim_create(type, slot);
	} else {
		kr_sim_relabel(type, slot);
	}
}

void kr_sim_fault_none(struct kr_sim_fault *f)
{
	memset(f, 0, sizeof(*f));
	f->retry_after = -1;
	f->reset_after = f->eof_after = f->stall_after = f->freeze_after = -1;
}

int kr_sim_script_add(const struct kr_sim_script *sc)
{
	if (nscripts == SCRIPTS)
		return -1;
	scripts[nscripts++] = *sc;
	return 0;
}

static void new_token(char *out)
{
	snprintf(out, TOKEN_LEN, "sim-token-%u-%08x", ++tok.serial, (unsigned)kr_sim_rand());
}

static void write_file(const char *token)
{
	snprintf(tok.file, sizeof(tok.file), "%s", token);
	kr_sim_file_set(KR_SIM_TOKEN_FILE, tok.file, strlen(tok.file));
}

void kr_sim_auth_setup(void)
{
	struct kr_sim_server_settings st = *kr_sim_server();

	tok.on = 1;
	new_token(tok.accepted[0]);
	tok.accepted[1][0] = '\0';
	write_file(tok.accepted[0]);
	st.require_auth = 1;
	kr_sim_server_settings_set(&st);
}

int kr_sim_auth_ok(const char *token, size_t len)
{
	int i;

	for (i = 0; i < 2; i++)
		if (tok.accepted[i][0] && strlen(tok.accepted[i]) == len && memcmp(tok.accepted[i], token, len) == 0)
			return 1;
	return 0;
}

int kr_sim_auth_file_is(const char *token)
{
	return strcmp(tok.file, token) == 0;
}

static void rotate_how(kr_ms_t now, int how)
{
	char fresh[TOKEN_LEN];

	new_token(fresh);
	tok.step_at = now + (kr_ms_t)kr_sim_range(500, 90000);
	if (how == 3) {
		kr_sim_trace("token rotation: the file and the server at once");
		write_file(fresh);
		snprintf(tok.accepted[0], TOKEN_LEN, "%s", fresh);
		tok.accepted[1][0] = '\0';
		tok.step = 0;
	} else if (how == 0) {
		kr_sim_trace("token rotation: graceful");
		write_file(fresh);
		snprintf(tok.accepted[1], TOKEN_LEN, "%s", tok.accepted[0]);
		snprintf(tok.accepted[0], TOKEN_LEN, "%s", fresh);
		tok.step = 1;
	} else if (how == 1) {
		kr_sim_trace("token rotation: the server first, the file %lld ms later",
			     (long long)(tok.step_at - now));
		snprintf(tok.accepted[0], TOKEN_LEN, "%s", fresh);
		tok.accepted[1][0] = '\0';
		snprintf(tok.pending, TOKEN_LEN, "%s", fresh);
		tok.step = 2;
	} else {
		kr_sim_trace("token rotation: the file first, the server %lld ms later",
			     (long long)(tok.step_at - now));
		write_file(fresh);
		snprintf(tok.pending, TOKEN_LEN, "%s", fresh);
		tok.step = 3;
	}
}

void kr_sim_auth_rotate(int how)
{
	rotate_how(kr_port_now_ms(), how);
}

static void rotate(kr_ms_t now)
{
	uint64_t r = kr_sim_below(100);

	rotate_how(now, r < 50 ? 0 : r < 75 ? 1 : 2);
}

/* The second half of a rotation, or a new one. Nonzero if something happened. */
static int tokens_due(kr_ms_t now)
{
	int did = 0;

	if (!tok.on)
		return 0;
	if (tok.step && now >= tok.step_at) {
		if (tok.step == 1)
			tok.accepted[1][0] = '\0';
		else if (tok.step == 2)
			write_file(tok.pending);
		else
			snprintf(tok.accepted[0], TOKEN_LEN, "%s", tok.pending);
		kr_sim_trace("token rotation completed");
		tok.step = 0;
		did = 1;
	}
	if (ch.running && !ch.quiet && now >= ch.next_rotate) {
		if (!tok.step)
			rotate(now);
		ch.next_rotate = now + around(1800000);
		did = 1;
	}
	return did;
}

void kr_sim_chaos_reset(void)
{
	memset(&tok, 0, sizeof(tok));
	memset(&ch, 0, sizeof(ch));
	memset(scripts, 0, sizeof(scripts));
	nscripts = 0;
	memset(timetable, 0, sizeof(timetable));
	ntimed = 0;
}

/* The first script that matches this request, used up by one. 1 if one did. */
static int scripted(const char *target, int watch, struct kr_sim_fault *f)
{
	int i;

	for (i = 0; i < nscripts; i++) {
		struct kr_sim_script *sc = &scripts[i];

		if (sc->count <= 0 || (sc->watch >= 0 && sc->watch != watch) ||
		    (sc->match && !strstr(target, sc->match)))
			continue;
		sc->count--;
		f->status = sc->f.status;
		f->retry_after = sc->f.retry_after;
		f->retry_after_date = sc->f.retry_after_date;
		f->too_large = sc->f.too_large;
		f->compact_first = sc->f.compact_first;
		f->reset_after = sc->f.reset_after;
		f->eof_after = sc->f.eof_after;
		f->stall_after = sc->f.stall_after;
		f->stall_ms = sc->f.stall_ms;
		f->freeze_after = sc->f.freeze_after;
		f->freeze_ms = sc->f.freeze_ms;
		f->freeze_step = sc->f.freeze_step;
		f->freeze_times = sc->f.freeze_times;
		f->ev_after = sc->f.ev_after;
		f->ev_fault = sc->f.ev_fault;
		f->ev_code = sc->f.ev_code;
		f->no_initial_end = sc->f.no_initial_end;
		f->initial_end_delay_ms = sc->f.initial_end_delay_ms;
		f->reject_watch_list = sc->f.reject_watch_list;
		f->close_after |= sc->f.close_after;
		kr_sim_trace("scripted fault %d for %s", i, target);
		if (sc->before)
			sc->before();
		return 1;
	}
	return 0;
}

void kr_sim_chaos_setup(void)
{
	struct kr_sim_server_settings st;
	uint64_t r;
	int t, i;

	memset(&st, 0, sizeof(st));
	st.watch_list = kr_sim_chance(850);
	r = kr_sim_below(100);
	st.bookmark_ms = r < 20 ? 0 : r < 45 ? (int)kr_sim_range(1000, 10000) : r < 75 ? (int)kr_sim_range(10000, 60000) : 60000;
	st.pretimeout_bookmark = kr_sim_chance(800);
	st.rv0_ignores_limit = kr_sim_chance(700);
	st.list_chunked = kr_sim_chance(500);
	st.keepalive_close_ms = kr_sim_chance(500) ? 0 : (int)kr_sim_range(5000, 120000);
	st.latency_min_ms = (int)kr_sim_range(0, 5);
	st.latency_max_ms = st.latency_min_ms + (kr_sim_chance(800) ? (int)kr_sim_range(0, 40) : (int)kr_sim_range(40, 400));
	kr_sim_server_settings_set(&st);

	r = kr_sim_below(100);
	kr_sim_set_history_cap(r < 30 ? (uint64_t)kr_sim_range(2, 20) : r < 70 ? (uint64_t)kr_sim_range(20, 200)
			       : (uint64_t)kr_sim_range(200, 5000));
	kr_sim_set_large_permille((unsigned)kr_sim_range(0, 60));

	ch.write_ms = (int)kr_sim_range(2000, 90000);
	ch.clear_ms = (int)kr_sim_range(60000, 900000);
	ch.storm_ms = (int)kr_sim_range(10000, 240000);
	ch.flaky_permille = (unsigned)kr_sim_range(20, 400);
	ch.zap_ms = (int)kr_sim_range(5000, 120000);
	/* Each seed has its own mix of storms; some have only flaky spells. */
	ch.storm_weights[KR_SIM_FLAKY] = 40;
	if (kr_sim_chance(800)) {
		for (i = KR_SIM_REFUSE; i < KR_SIM_NWEATHER; i++)
			ch.storm_weights[i] = (unsigned)kr_sim_range(0, 20);
	}
	ch.weather = KR_SIM_CLEAR;

	/* The state before kreflect starts: some objects of every type. */
	for (t = 0; t < KR_SIM_NTYPES; t++) {
		int n = (int)kr_sim_range(0, KR_SIM_SLOTS * 3 / 4);

		for (i = 0; i < n; i++) {
			int slot = pick_slot(t, 0);

			if (slot >= 0)
				kr_sim_create(t, slot);
		}
	}
	if (kr_sim_chance(300))
		kr_sim_compact(kr_sim_rv());
}

void kr_sim_chaos_start(kr_ms_t from, kr_ms_t until)
{
	ch.running = 1;
	ch.quiet = 0;
	ch.until = until;
	ch.next_write = from + around(ch.write_ms);
	ch.next_weather = from + around(ch.clear_ms);
	ch.next_compact = from + around(600000);
	ch.next_zap = KR_SIM_NEVER;
	ch.next_rotate = tok.on ? from + around(1800000) : KR_SIM_NEVER;
}

/*
 * A fault on one open connection (flaky weather): the stream is reset or
 * closed, the link stalls, or the server ends the watch with an ERROR, a
 * clean end, garbage or a bad chunk.
 */
static void zap(kr_ms_t now)
{
	static const int codes[] = { 410, 410, 500, 429, 504 };
	int open[KR_SIM_SOCKETS], n = 0, s;
	uint64_t r;

	for (s = 0; s < KR_SIM_SOCKETS; s++)
		if (kr_sim_sock_is_open(s))
			open[n++] = s;
	if (!n)
		return;
	s = open[kr_sim_below((uint64_t)n)];
	r = kr_sim_below(100);
	if (r < 25)
		kr_sim_server_zap(s, KR_SIM_EV_RESET, 0);
	else if (r < 35)
		kr_sim_server_zap(s, KR_SIM_EV_END, 0);
	else if (r < 55) {
		kr_ms_t ms = kr_sim_chance(700) ? kr_sim_range(100, 30000) : kr_sim_range(30000, 300000);

		kr_sim_trace("fd %d: zap: the link stalls for %lld ms", 100 + s, (long long)ms);
		kr_sim_sock_freeze(s, now + ms);
	} else if (r < 85)
		kr_sim_server_zap(s, KR_SIM_EV_ERROR, codes[kr_sim_below(sizeof(codes) / sizeof(codes[0]))]);
	else if (r < 89)
		kr_sim_server_zap(s, KR_SIM_EV_GARBAGE, 0);
	else if (r < 93)
		kr_sim_server_zap(s, KR_SIM_EV_CUT, 0);
	else
		kr_sim_server_zap(s, KR_SIM_EV_BAD_CHUNK, 0);
}

/* The weather changes to w (until `end`, for a black hole's frozen links). */
static void set_weather(int w, kr_ms_t end)
{
	int old = ch.weather;

	ch.weather = w;
	kr_sim_trace("weather: %s%s", weather_names[w], w == KR_SIM_CLEAR ? "" : " begins");
	if (old == KR_SIM_BLACKHOLE)
		kr_sim_net_thaw_all();
	switch (w) {
	case KR_SIM_REFUSE:
		kr_sim_net_reset_all();
		break;
	case KR_SIM_BLACKHOLE:
		kr_sim_net_freeze_all(end);
		break;
	case KR_SIM_DOWN:
		kr_sim_server_cut_all();
		break;
	default:
		break;
	}
}

static int pick_storm(void)
{
	unsigned total = 0, r;
	int i;

	for (i = 0; i < KR_SIM_NWEATHER; i++)
		total += ch.storm_weights[i];
	r = (unsigned)kr_sim_below(total);
	for (i = 0; i < KR_SIM_NWEATHER; i++) {
		if (r < ch.storm_weights[i])
			return i;
		r -= ch.storm_weights[i];
	}
	return KR_SIM_FLAKY;
}

int kr_sim_chaos_due(kr_ms_t now)
{
	int did = timed_due(now) | tokens_due(now);

	if (ch.forced_until && now >= ch.forced_until) {
		ch.forced_until = 0;
		if (ch.weather != KR_SIM_CLEAR)
			set_weather(KR_SIM_CLEAR, 0);
		did = 1;
	}
	if (!ch.running || ch.quiet || now < ch.calm_until || ch.forced_until)
		return did;
	if (now >= ch.until) {
		kr_sim_chaos_quiet();
		return 1;
	}
	while (now >= ch.next_weather) {
		if (ch.weather == KR_SIM_CLEAR) {
			int w = pick_storm();
			kr_ms_t len = around(w == KR_SIM_FLAKY ? 4 * ch.storm_ms : ch.storm_ms);

			ch.storms++;
			ch.next_weather = now + len;
			set_weather(w, ch.next_weather);
			ch.next_zap = w == KR_SIM_FLAKY ? now + around(ch.zap_ms) : KR_SIM_NEVER;
		} else {
			ch.next_weather = now + around(ch.clear_ms);
			ch.next_zap = KR_SIM_NEVER;
			set_weather(KR_SIM_CLEAR, 0);
		}
		did = 1;
	}
	while (now >= ch.next_write) {
		if (kr_sim_chance(40)) {
			int n = (int)kr_sim_range(5, 30);

			kr_sim_trace("a burst of %d writes", n);
			while (n--)
				one_write();
		} else {
			one_write();
		}
		ch.writes++;
		ch.next_write = now + around(ch.write_ms);
		did = 1;
	}
	if (now >= ch.next_zap) {
		zap(now);
		ch.next_zap = now + around(ch.zap_ms);
		did = 1;
	}
	if (now >= ch.next_compact) {
		kr_sim_compact(kr_sim_rv() - (kr_sim_chance(500) ? 0 : kr_sim_below(3)));
		ch.next_compact = now + around(600000);
		did = 1;
	}
	return did;
}

kr_ms_t kr_sim_chaos_next(void)
{
	kr_ms_t t = ch.running && !ch.quiet ? ch.until : KR_SIM_NEVER;
	int i;

	if (ch.forced_until && ch.forced_until < t)
		t = ch.forced_until;
	if (tok.step && tok.step_at < t)
		t = tok.step_at;
	for (i = 0; i < ntimed; i++)
		if (timetable[i].fn && timetable[i].t < t)
			t = timetable[i].t;
	if (!ch.running || ch.quiet)
		return t;
	if (ch.next_write < t)
		t = ch.next_write;
	if (ch.next_weather < t)
		t = ch.next_weather;
	if (ch.next_compact < t)
		t = ch.next_compact;
	if (ch.next_zap < t)
		t = ch.next_zap;
	if (ch.next_rotate < t)
		t = ch.next_rotate;
	return t;
}

void kr_sim_chaos_quiet(void)
{
	if (ch.quiet)
		return;
	ch.quiet = 1;
	if (ch.weather != KR_SIM_CLEAR)
		set_weather(KR_SIM_CLEAR, 0);
	kr_sim_net_thaw_all();
	kr_sim_trace("quiet: no more writes or faults");
}

/* The schedule's next events, pushed to `from` at the earliest. */
static void push_schedule(kr_ms_t from)
{
	if (ch.next_write < from)
		ch.next_write = from + around(ch.write_ms);
	if (ch.next_weather < from)
		ch.next_weather = from + around(ch.clear_ms);
	if (ch.next_compact < from)
		ch.next_compact = from + around(600000);
	if (ch.next_rotate < from)
		ch.next_rotate = from + around(1800000);
	ch.next_zap = KR_SIM_NEVER;
}

void kr_sim_chaos_calm(kr_ms_t until)
{
	ch.calm_until = until;
	ch.forced_until = 0;
	if (ch.weather != KR_SIM_CLEAR)
		set_weather(KR_SIM_CLEAR, 0);
	kr_sim_net_thaw_all();
	push_schedule(until);
	kr_sim_trace("calm until %.3f s: no writes or faults", (double)until / 1000.0);
}

void kr_sim_chaos_outage(int w, kr_ms_t until)
{
	set_weather(w, until);
	ch.forced_until = until;
	push_schedule(until);
	kr_sim_trace("an outage (%s) until %.3f s", weather_names[w], (double)until / 1000.0);
}

/* --- per connection and per request ---------------------------------------------------------- */

int kr_sim_chaos_resolve(kr_ms_t *delay_ms)
{
	*delay_ms = (kr_ms_t)kr_sim_range(0, 30);
	switch (ch.weather) {
	case KR_SIM_NODNS:
		return kr_sim_chance(300) ? 2 : 1;
	case KR_SIM_FLAKY:
		return kr_sim_chance(20) ? 1 : kr_sim_chance(10) ? 2 : 0;
	default:
		return 0;
	}
}

int kr_sim_chaos_connect(kr_ms_t *delay_ms)
{
	*delay_ms = (kr_ms_t)kr_sim_range(0, 5);
	switch (ch.weather) {
	case KR_SIM_REFUSE:
		return 1;
	case KR_SIM_BLACKHOLE:
		return 2;
	case KR_SIM_FLAKY:
		return kr_sim_chance(30) ? 1 : kr_sim_chance(10) ? 2 : 0;
	default:
		return 0;
	}
}

static int retry_after(struct kr_sim_fault *f)
{
	f->retry_after = (int)kr_sim_range(1, 3);
	f->retry_after_date = kr_sim_chance(200);
	return f->retry_after;
}

/* Response bytes at which a cut lands: in the head, early in the body, or later. */
static int64_t some_bytes(void)
{
	uint64_t r = kr_sim_below(100);

	return r < 20 ? (int64_t)kr_sim_range(0, 300) : r < 70 ? (int64_t)kr_sim_range(300, 5000)
								: (int64_t)kr_sim_range(5000, 200000);
}

/* One random fault for a request in flaky weather. */
static void flaky(int watch, int watch_list, struct kr_sim_fault *f)
{
	uint64_t r = kr_sim_below(watch ? 100 : 72);

	if (r < 6) {
		f->status = 500;
	} else if (r < 11) {
		f->status = 503;
		retry_after(f);
	} else if (r < 14) {
		f->status = 503;
	} else if (r < 19) {
		f->status = 429;
		retry_after(f);
	} else if (r < 21) {
		f->status = 429;
	} else if (r < 26) {
		f->status = 410;
	} else if (r < 28) {
		f->status = 504;
		f->too_large = 1;
		f->retry_after = 1;
	} else if (r < 29) {
		f->status = 403;
	} else if (r < 38) {
		f->reset_after = some_bytes();
	} else if (r < 45) {
		f->eof_after = some_bytes();
	} else if (r < 50) {
		f->stall_after = some_bytes();
		f->stall_ms = (int)(kr_sim_chance(700) ? kr_sim_range(100, 20000) : kr_sim_range(20000, 200000));
	} else if (r < 55) {
		f->freeze_after = some_bytes();
		f->freeze_ms = (int)(kr_sim_chance(700) ? kr_sim_range(100, 20000) : kr_sim_range(20000, 200000));
		if (kr_sim_chance(300)) {
			/* A slow link: a few bytes at a time, never silent for 2 s. */
			f->freeze_ms = (int)kr_sim_range(100, 1900);
			f->freeze_step = (int)kr_sim_range(1, 500);
			f->freeze_times = (int)kr_sim_range(1, 150);
		}
	} else if (r < 62) {
		f->compact_first = 1;
	} else if (r < 72 && !watch) {
		static const int broken[] = { KR_SIM_EV_BAD_CHUNK, KR_SIM_EV_GARBAGE, KR_SIM_EV_END, KR_SIM_EV_RESET };

		f->ev_fault = broken[kr_sim_below(4)];
	} else if (r < 72) {
		static const int codes[] = { 410, 410, 410, 500, 500, 429, 504 };

		f->ev_fault = KR_SIM_EV_ERROR;
		f->ev_code = codes[kr_sim_below(sizeof(codes) / sizeof(codes[0]))];
	} else if (r < 78) {
		f->ev_fault = KR_SIM_EV_END;
	} else if (r < 81) {
		/* A line that is not JSON, or (watches) one that is cut short. */
		f->ev_fault = watch && r == 80 ? KR_SIM_EV_CUT : KR_SIM_EV_GARBAGE;
	} else if (r < 84) {
		f->ev_fault = KR_SIM_EV_BAD_CHUNK;
	} else if (r < 88) {
		f->ev_fault = KR_SIM_EV_RESET;
	} else if (r < 92 && watch_list) {
		f->no_initial_end = 1;
	} else if (r < 95 && watch_list) {
		f->initial_end_delay_ms = (int)kr_sim_range(100, 20000);
	} else if (r < 97 && watch_list) {
		f->reject_watch_list = 1;
	} else {
		f->close_after = 1;
	}
	if (f->ev_fault != KR_SIM_EV_NONE)
		f->ev_after = kr_sim_chance(300) ? 0 : (int)kr_sim_range(1, 60);
}

void kr_sim_chaos_request(const char *target, int watch, int watch_list, int reused,
			  struct kr_sim_fault *f)
{
	(void)reused;
	/* How the body is cut into HTTP chunks: not a fault, the server's freedom. */
	f->chunk_max = kr_sim_chance(500) ? 0 : (int)kr_sim_range(16, 4096);
	f->merge_bytes = kr_sim_chance(400) ? 0 : (int)kr_sim_range(1, 32768);
	f->close_after = kr_sim_chance(20);
	if (scripted(target, watch, f) || !ch.running || ch.quiet || kr_port_now_ms() < ch.calm_until)
		return;
	switch (ch.weather) {
	case KR_SIM_FLAKY:
		if (kr_sim_chance(ch.flaky_permille))
			flaky(watch, watch_list, f);
		break;
	case KR_SIM_DOWN:
		f->status = kr_sim_chance(500) ? 500 : 503;
		break;
	case KR_SIM_THROTTLE:
		f->status = 429;
		if (kr_sim_chance(900))
			retry_after(f);
		break;
	case KR_SIM_MANGLE: {
		/* After at least one event or item: a stream that delivered something is not
		 * a "very short watch", so only the handling of the broken body paces retries. */
		static const int broken[] = { KR_SIM_EV_BAD_CHUNK, KR_SIM_EV_GARBAGE, KR_SIM_EV_END };
		static const int broken_watch[] = { KR_SIM_EV_BAD_CHUNK, KR_SIM_EV_GARBAGE, KR_SIM_EV_CUT };

		f->ev_fault = watch ? broken_watch[kr_sim_below(3)] : broken[kr_sim_below(3)];
		f->ev_after = (int)kr_sim_range(1, 4);
		break;
	}
	default:
		break;
	}
	if (f->status || f->ev_fault || f->reset_after >= 0 || f->eof_after >= 0 || f->stall_after >= 0 ||
	    f->freeze_after >= 0 || f->compact_first || f->no_initial_end || f->reject_watch_list ||
	    f->initial_end_delay_ms)
		kr_sim_trace("fault plan: status %d, event fault %d after %d, reset@%lld eof@%lld stall@%lld "
			     "freeze@%lld (%d ms, then %d x %d bytes) compact %d no-end %d reject-wl %d", f->status,
			     f->ev_fault, f->ev_after, (long long)f->reset_after, (long long)f->eof_after,
			     (long long)f->stall_after, (long long)f->freeze_after, f->freeze_ms, f->freeze_times,
			     f->freeze_step, f->compact_first, f->no_initial_end, f->reject_watch_list);
}
