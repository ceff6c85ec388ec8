/*
 * tests/unit/lockcore/test_evread.c - the reading side of the event
 * streams on one Redis (lockcore/evread.c): event ids read and written,
 * the history after a cursor (scan, min_ms, a gap), entries that are no
 * events, and the follower: it gives what is appended after it started,
 * once, and goes on after its Redis restarted.
 *
 * One real redis-server per test group (redisproc.h); the entries are
 * written with XADD here, as the lock functions and the gateways write
 * them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "fencegate/error.h"
#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "redisproc.h"

#define EV "fg:{!ev}:s"

/* ---- ids -------------------------------------------------------------- */

static void test_id_valid(void **state)
{
	(void)state;
	struct fg_ev_cursor c;
	char buf[48];

	assert_int_equal(fg_event_id_parse("1700000000000-0", &c), 0);
	assert_true(c.set && !c.cluster);
	assert_true(c.ms == 1700000000000ull && c.seq == 0);
	assert_int_equal(fg_event_id_format(&c, buf, sizeof(buf)), 15);
	assert_string_equal(buf, "1700000000000-0");

	assert_int_equal(fg_event_id_parse("5-7.16383", &c), 0);
	assert_true(c.set && c.cluster && c.ms == 5 && c.seq == 7 &&
		    c.slot == 16383);
	assert_int_equal(fg_event_id_format(&c, buf, sizeof(buf)), 9);
	assert_string_equal(buf, "5-7.16383");

	/* the bounds: 15, 19 and 5 digits */
	assert_int_equal(fg_event_id_parse("999999999999999-9999999999999999999.00000",
					   &c), 0);
	assert_true(c.ms == 999999999999999ull && c.seq == 9999999999999999999ull &&
		    c.slot == 0 && c.cluster);
	size_t n = fg_event_id_format(&c, buf, sizeof(buf));
	assert_string_equal(buf, "999999999999999-9999999999999999999.0");
	assert_int_equal(n, strlen(buf));
	/* leading zeros are digits too; the id written is the number's */
	assert_int_equal(fg_event_id_parse("007-01", &c), 0);
	assert_true(c.ms == 7 && c.seq == 1);
	assert_int_equal(fg_event_id_parse("0-0", &c), 0);
	assert_true(c.ms == 0 && c.seq == 0 && c.set);

	/* too small a buffer, or no cursor: 0 and "" */
	c = (struct fg_ev_cursor){ .ms = 12, .seq = 3, .slot = 9, .cluster = true,
				   .set = true };
	assert_int_equal(fg_event_id_format(&c, buf, 6), 0);
	assert_string_equal(buf, "");
	assert_int_equal(fg_event_id_format(&c, buf, 7), 6);
	assert_string_equal(buf, "12-3.9");
	c.set = false;
	assert_int_equal(fg_event_id_format(&c, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_id_invalid(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "-", "1", "1-", "-1", "a-1", "1-a", "1-1.", "1-1.a",
		"1-1.16384", "1-1.99999", "1-1.123456", "1-1.-1", "1-1.+1",
		"+1-1", " 1-1", "1-1 ", "1 -1", "1- 1", "1-1\n", "1--1", "1-1-1",
		"1-1.1.1", "1.1-1", "1-1..1", "1_1", "1:1",
		"1000000000000000-0",            /* 16 digits of ms */
		"1-10000000000000000000",        /* 20 digits of seq */
		"1-18446744073709551615",        /* UINT64_MAX: 20 digits */
		"0x1-1", "1e3-1", "١-1", "1-1.١",
		"1-1.1a", "$-1", "1-*", "*", "-", "+",
	};
	struct fg_ev_cursor c, before = { .ms = 42, .seq = 43, .slot = 44,
					  .cluster = true, .set = true };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c = before;
		if (fg_event_id_parse(bad[i], &c) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_memory_equal(&c, &before, sizeof(c)); /* untouched */
	}
	assert_int_equal(fg_event_id_parse(NULL, &c), -1);
	/* a NUL ends the id: what follows it is not read */
	assert_int_equal(fg_event_id_parse("1-1\0garbage", &c), 0);
}

/* ---- a Redis ---------------------------------------------------------- */

struct env {
	struct redisproc rp;
	fg_topo *topo;
	struct fg_store_opts opts;
	fg_store *st;
	redisContext *rc; /* the writer: XADD as the functions do */
};

static int env_down(void **state);

static int env_up(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	*state = e;
	if (rp_start(&e->rp, NULL))
		goto fail;
	char url[64], err[128];
	struct fg_redis_addr addr;
	snprintf(url, sizeof(url), "127.0.0.1:%d", e->rp.port);
	if (fg_redis_addr_parse(url, &addr, err, sizeof(err)))
		goto fail;
	e->topo = fg_topo_create(&addr, 200, 2000, NULL);
	e->opts = (struct fg_store_opts){ .topo = e->topo,
		.connect_timeout_ms = 200, .command_timeout_ms = 2000 };
	e->st = fg_store_create(&e->opts);
	e->rc = rp_connect(&e->rp);
	if (e->topo && e->st && e->rc)
		return 0;
fail:
	env_down(state); /* cmocka tears down no group whose setup failed */
	*state = NULL;
	return -1;
}

static int env_down(void **state)
{
	struct env *e = *state;
	if (!e)
		return 0;
	if (e->rc)
		redisFree(e->rc);
	fg_store_destroy(e->st);
	fg_topo_destroy(e->topo);
	rp_stop(&e->rp);
	free(e);
	return 0;
}

static redisContext *writer(struct env *e)
{
	if (e->rc && e->rc->err) {
		redisFree(e->rc);
		e->rc = NULL;
	}
	if (!e->rc)
		e->rc = rp_connect(&e->rp);
	assert_non_null(e->rc);
	return e->rc;
}

/* XADD key * fields...; the new id into out (may be NULL). */
static void xadd(struct env *e, const char *key, char out[48], ...)
{
	const char *argv[24] = { "XADD", key, "*" };
	int argc = 3;
	va_list ap;
	va_start(ap, out);
	for (const char *s; (s = va_arg(ap, const char *)) && argc < 24;)
		argv[argc++] = s;
	va_end(ap);
	redisReply *r = redisCommandArgv(writer(e), argc, argv, NULL);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	if (out)
		snprintf(out, 48, "%s", r->str);
	freeReplyObject(r);
}

static void redis_do(struct env *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(writer(e), fmt, ap);
	va_end(ap);
	assert_non_null(r);
	assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
	freeReplyObject(r);
}

/* What a callback saw: ids, kinds, locks, tokens. */
struct seen {
	size_t n, stop_at;
	char id[64][48];
	char kind[64][24];
	char lock[64][32];
	char detail[64][96];
	char principal[64][16];
	uint64_t at[64];
	uint64_t token[64];
	bool has_token[64];
};

static int see(void *arg, const struct fg_event *ev)
{
	struct seen *s = arg;
	if (s->n < 64) {
		snprintf(s->id[s->n], 48, "%s", ev->id);
		snprintf(s->kind[s->n], 24, "%s", ev->kind);
		snprintf(s->lock[s->n], 32, "%s", ev->lock);
		snprintf(s->detail[s->n], 96, "%s", ev->detail);
		snprintf(s->principal[s->n], 16, "%s", ev->principal);
		s->at[s->n] = ev->at_ms;
		s->token[s->n] = ev->token;
		s->has_token[s->n] = ev->has_token;
	}
	s->n++;
	return s->stop_at && s->n >= s->stop_at;
}

static void cursor_of(const char *id, struct fg_ev_cursor *c)
{
	assert_int_equal(fg_event_id_parse(id, c), 0);
}

/* ---- the history ------------------------------------------------------ */

static void test_range(void **state)
{
	struct env *e = *state;
	char id[6][48];
	struct seen s = { 0 };
	struct fg_ev_cursor next = { 0 }, after;
	bool gap = true;

	redis_do(e, "DEL %s", EV);
	/* nothing there: nothing read, next untouched, no gap */
	assert_int_equal(fg_events_range(e->st, NULL, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 0);
	assert_false(next.set);
	assert_false(gap);

	xadd(e, EV, id[0], "k", "granted", "l", "a/1", "t", "7", "p", "alice",
	     "o", "job 1", "c", "10.0.0.1", "g", "0123456789abcdef",
	     "d", "{\"mode\":\"exclusive\",\"ttl_ms\":30000}", NULL);
	xadd(e, EV, id[1], "k", "released", "l", "a/1", "t", "7", NULL);
	xadd(e, EV, id[2], "k", "granted", "l", "b/2", "t", "8", NULL);
	xadd(e, EV, id[3], "k", "refused", "l", "b/2", "d",
	     "{\"code\":\"stale_token\",\"count\":3}", NULL);
	xadd(e, EV, id[4], "k", "expired", "l", "c/3", "t", "9", NULL);

	/* from the oldest */
	assert_int_equal(fg_events_range(e->st, NULL, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 5);
	assert_false(gap);
	for (int i = 0; i < 5; i++)
		assert_string_equal(s.id[i], id[i]);
	assert_string_equal(s.kind[0], "granted");
	assert_string_equal(s.lock[0], "a/1");
	assert_string_equal(s.principal[0], "alice");
	assert_true(s.has_token[0] && s.token[0] == 7);
	assert_string_equal(s.detail[0], "{\"mode\":\"exclusive\",\"ttl_ms\":30000}");
	assert_false(s.has_token[3]); /* refused: no token field */
	assert_string_equal(s.detail[1], "");
	assert_true(s.at[0] == strtoull(id[0], NULL, 10));
	char nid[48];
	fg_event_id_format(&next, nid, sizeof(nid));
	assert_string_equal(nid, id[4]);

	/* after a cursor, at most scan read: next is the last read */
	memset(&s, 0, sizeof(s));
	cursor_of(id[1], &after);
	assert_int_equal(fg_events_range(e->st, &after, 2, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.id[0], id[2]);
	assert_string_equal(s.id[1], id[3]);
	assert_false(gap);
	fg_event_id_format(&next, nid, sizeof(nid));
	assert_string_equal(nid, id[3]);
	/* resumed from next: the rest, none twice */
	memset(&s, 0, sizeof(s));
	after = next;
	assert_int_equal(fg_events_range(e->st, &after, 2, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.id[0], id[4]);
	/* after the newest: nothing, next unchanged */
	memset(&s, 0, sizeof(s));
	struct fg_ev_cursor keep = next;
	assert_int_equal(fg_events_range(e->st, &next, 10, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 0);
	assert_memory_equal(&keep, &next, sizeof(keep));
	assert_false(gap);

	/* the callback stops it: next is the entry it stopped on */
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	assert_int_equal(fg_events_range(e->st, NULL, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 2);
	fg_event_id_format(&next, nid, sizeof(nid));
	assert_string_equal(nid, id[1]);

	/* trimmed past `after`: a gap, and the rest from the oldest left */
	redisReply *r = redisCommand(writer(e), "XTRIM %s MINID %s", EV, id[3]);
	assert_non_null(r);
	assert_int_equal(r->integer, 3);
	freeReplyObject(r);
	memset(&s, 0, sizeof(s));
	cursor_of(id[0], &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_true(gap);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.id[0], id[3]);
	/* after the last one trimmed: older than what is retained, a gap
	 * too (nothing says whether others went after it) */
	memset(&s, 0, sizeof(s));
	cursor_of(id[2], &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_true(gap);
	assert_int_equal(s.n, 2);
	/* after an entry that is still there: no gap */
	cursor_of(id[3], &after);
	memset(&s, 0, sizeof(s));
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 1);
	/* everything trimmed: after the last one, no gap; before it, one */
	r = redisCommand(writer(e), "XTRIM %s MAXLEN 0", EV);
	assert_non_null(r);
	freeReplyObject(r);
	memset(&s, 0, sizeof(s));
	cursor_of(id[4], &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 0);
	cursor_of(id[3], &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_true(gap);
	assert_int_equal(s.n, 0);
	(void)id[5];
}

/* min_ms: entries older are not shown; one after `after` that is older
 * is one the reader missed: a gap. Ids given, one second apart. */
static void test_range_min_ms(void **state)
{
	struct env *e = *state;
	struct seen s = { 0 };
	struct fg_ev_cursor next = { 0 }, after;
	bool gap;
	redis_do(e, "DEL %s", EV);
	for (int i = 1; i <= 5; i++)
		redis_do(e, "XADD %s %d000-0 k granted l m%d", EV, i, i);

	cursor_of("1000-0", &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 3000, see, &s,
					 &next, &gap), FG_OK);
	assert_true(gap); /* 2000-0 passed by */
	assert_int_equal(s.n, 3);
	assert_string_equal(s.id[0], "3000-0");
	assert_string_equal(s.id[2], "5000-0");
	assert_true(s.at[0] == 3000);
	char nid[48];
	fg_event_id_format(&next, nid, sizeof(nid));
	assert_string_equal(nid, "5000-0");

	/* nothing passed by: no gap */
	memset(&s, 0, sizeof(s));
	cursor_of("2000-0", &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 3000, see, &s,
					 &next, &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 3);
	/* an older one than both still there, none in between: no gap */
	memset(&s, 0, sizeof(s));
	cursor_of("2000-0", &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 2500, see, &s,
					 &next, &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 3);
	/* no after: no gap, only the recent */
	memset(&s, 0, sizeof(s));
	assert_int_equal(fg_events_range(e->st, NULL, 100, 4000, see, &s,
					 &next, &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.id[0], "4000-0");
	/* after is newer than min_ms: min_ms changes nothing */
	memset(&s, 0, sizeof(s));
	cursor_of("4000-0", &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 2000, see, &s,
					 &next, &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s.n, 1);
	/* a scan of 1 where the first is older than min_ms: it is not
	 * read at all (read from min_ms on) */
	memset(&s, 0, sizeof(s));
	assert_int_equal(fg_events_range(e->st, NULL, 1, 3000, see, &s,
					 &next, &gap), FG_OK);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.id[0], "3000-0");
	redis_do(e, "DEL %s", EV);
}

/* Many entries: read in pieces, in order, each once. */
static void test_range_long(void **state)
{
	struct env *e = *state;
	redis_do(e, "DEL %s", EV);
	for (int i = 0; i < 1300; i++) {
		char t[16];
		snprintf(t, sizeof(t), "%d", i + 1);
		redisAppendCommand(writer(e), "XADD %s * k granted l x t %s", EV, t);
	}
	for (int i = 0; i < 1300; i++) {
		redisReply *r;
		assert_int_equal(redisGetReply(writer(e), (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
	struct fg_ev_cursor after = { 0 }, next = { 0 };
	bool gap;
	uint64_t want = 1;
	for (int round = 0; round < 3; round++) {
		struct seen s = { 0 };
		/* tokens checked as they come: at most 64 are kept */
		assert_int_equal(fg_events_range(e->st, &after, 600, 0, see, &s,
						 &next, &gap), FG_OK);
		assert_int_equal(s.n, round < 2 ? 600 : 100);
		for (size_t i = 0; i < 64 && i < s.n; i++)
			assert_true(s.token[i] == want + i);
		want += s.n;
		after = next;
	}
	assert_true(want == 1301);
}

/* What anybody may XADD there is read without harm. */
static void test_range_not_events(void **state)
{
	struct env *e = *state;
	char id[5][48];
	redis_do(e, "DEL %s", EV);
	xadd(e, EV, id[0], "t", "12abc", "k", "granted", NULL);
	xadd(e, EV, id[1], "t", "99999999999999999999999", NULL); /* too long */
	xadd(e, EV, id[2], "x", "y", "kind", "granted", "t", "", NULL);
	xadd(e, EV, id[3], "k", "", "k", "second", "t", "-1", "l", "z", NULL);
	xadd(e, EV, id[4], "t", "5", "t", "6", NULL);
	struct seen s = { 0 };
	struct fg_ev_cursor next = { 0 };
	bool gap;
	assert_int_equal(fg_events_range(e->st, NULL, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 5);
	assert_false(s.has_token[0]);
	assert_string_equal(s.kind[0], "granted");
	assert_false(s.has_token[1]);
	assert_false(s.has_token[2]);
	assert_string_equal(s.kind[2], "");
	assert_string_equal(s.lock[2], "");
	assert_string_equal(s.kind[3], "second"); /* an empty one is absent */
	assert_false(s.has_token[3]);
	assert_true(s.has_token[4] && s.token[4] == 5);

	/* another type under the key: empty, not an error, not a crash */
	redis_do(e, "DEL %s", EV);
	redis_do(e, "SET %s x", EV);
	memset(&s, 0, sizeof(s));
	struct fg_ev_cursor after;
	cursor_of(id[0], &after);
	assert_int_equal(fg_events_range(e->st, &after, 100, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 0);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	assert_int_equal(fg_evtail_next(t, 50, see, &s), 0);
	fg_evtail_destroy(t);
	redis_do(e, "DEL %s", EV);
}

/* Ids the API cannot name (XADD takes any id that grows): read past,
 * never given, and no reader goes round in circles on them. */
static void test_hostile_ids(void **state)
{
	struct env *e = *state;
	struct seen s = { 0 };
	struct fg_ev_cursor next = { 0 };
	bool gap;
	redis_do(e, "DEL %s", EV);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	redis_do(e, "XADD %s 1000-0 k granted l ok1", EV);
	for (int i = 0; i < 600; i++)
		redis_do(e, "XADD %s 1000-%llu k granted l bad", EV,
			 10000000000000000000ull + (unsigned long long)i);
	char last[48];
	xadd(e, EV, last, "k", "granted", "l", "ok2", NULL);
	for (unsigned scan = 3; scan <= 1000; scan += 997) {
		memset(&s, 0, sizeof(s));
		struct fg_ev_cursor after = { 0 };
		/* a small scan reads every entry once: in a few calls */
		for (int i = 0; i < 10 && s.n < 2; i++) {
			assert_int_equal(fg_events_range(e->st, &after, scan, 0, see,
							 &s, &next, &gap), FG_OK);
			after = next;
		}
		assert_int_equal(s.n, 2);
		assert_string_equal(s.lock[0], "ok1");
		assert_string_equal(s.lock[1], "ok2");
		assert_string_equal(s.id[1], last);
	}
	/* the follower too: 601 entries to read, two to give */
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 4; i++)
		assert_true(fg_evtail_next(t, 50, see, &s) >= 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.id[1], last);
	fg_evtail_destroy(t);

	/* the largest id there is: nothing after it, and nobody loops */
	redis_do(e, "DEL %s", EV);
	t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	redis_do(e, "XADD %s 1-0 k granted l ok", EV);
	redis_do(e, "XADD %s 18446744073709551615-18446744073709551615 k x", EV);
	memset(&s, 0, sizeof(s));
	assert_int_equal(fg_events_range(e->st, NULL, 1, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(fg_events_range(e->st, &next, 1, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 1);
	assert_int_equal(fg_evtail_next(t, 50, see, &s), 1);
	assert_int_equal(fg_evtail_next(t, 50, see, &s), 0);
	assert_int_equal(fg_evtail_next(t, 50, see, &s), 0);
	fg_evtail_destroy(t);
	redis_do(e, "DEL %s", EV);
}

static void test_trim(void **state)
{
	struct env *e = *state;
	redis_do(e, "DEL %s", EV);
	/* an entry written 10 minutes ago by Redis' clock, and one now */
	redisReply *r = redisCommand(writer(e), "TIME");
	assert_non_null(r);
	unsigned long long now = strtoull(r->element[0]->str, NULL, 10) * 1000;
	freeReplyObject(r);
	redis_do(e, "XADD %s %llu-0 k granted", EV, now - 600000);
	xadd(e, EV, NULL, "k", "released", NULL);
	/* MINID ~ trims whole nodes only: the old entry is in the same node
	 * as the new one, so ~ may keep it; the reader's min_ms hides it.
	 * With both gone but the newer: exact */
	assert_int_equal(fg_events_trim(e->st, 60000), FG_OK);
	assert_int_equal(fg_events_trim(e->st, 60000), FG_OK);
	struct seen s = { 0 };
	struct fg_ev_cursor next = { 0 };
	bool gap;
	assert_int_equal(fg_events_range(e->st, NULL, 100, now - 60000, see,
					 &s, &next, &gap), FG_OK);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.kind[0], "released");
	/* a retention longer than Redis' clock: nothing to do */
	assert_int_equal(fg_events_trim(e->st, UINT64_MAX / 2), FG_OK);
}

/* ---- the follower ----------------------------------------------------- */

static void test_tail(void **state)
{
	struct env *e = *state;
	char id[8][48];
	redis_do(e, "DEL %s", EV);
	xadd(e, EV, id[0], "k", "granted", "l", "old", NULL);

	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct fg_ev_cursor pos;
	fg_evtail_position(t, &pos);
	char pid[48];
	fg_event_id_format(&pos, pid, sizeof(pid));
	assert_string_equal(pid, id[0]); /* "now": the newest one there */

	struct seen s = { 0 };
	/* nothing new: it waits, then 0 */
	assert_int_equal(fg_evtail_next(t, 100, see, &s), 0);
	assert_int_equal(s.n, 0);

	/* appended between two calls: nothing lost */
	xadd(e, EV, id[1], "k", "granted", "l", "n1", "t", "1", NULL);
	xadd(e, EV, id[2], "k", "released", "l", "n1", "t", "1", NULL);
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 2);
	assert_string_equal(s.id[0], id[1]);
	assert_string_equal(s.id[1], id[2]);
	fg_evtail_position(t, &pos);
	fg_event_id_format(&pos, pid, sizeof(pid));
	assert_string_equal(pid, id[2]);
	/* none twice */
	assert_int_equal(fg_evtail_next(t, 50, see, &s), 0);
	assert_int_equal(s.n, 2);

	/* the callback stops it: the rest comes at the next call */
	xadd(e, EV, id[3], "k", "granted", "l", "n2", NULL);
	xadd(e, EV, id[4], "k", "granted", "l", "n3", NULL);
	s.stop_at = 3;
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 1);
	s.stop_at = 0;
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 1);
	assert_string_equal(s.id[2], id[3]);
	assert_string_equal(s.id[3], id[4]);
	fg_evtail_destroy(t);

	fg_evtail_destroy(NULL);
}

/* Appended while it waits: it wakes for it (the writer is a thread). */
#include <pthread.h>
struct late { struct env *e; char id[48]; };
static void *append_later(void *arg)
{
	struct late *l = arg;
	rp_sleep_ms(150);
	redisContext *rc = rp_connect(&l->e->rp);
	redisReply *r = redisCommand(rc, "XADD %s * k granted l late", EV);
	snprintf(l->id, sizeof(l->id), "%s", r && r->type == REDIS_REPLY_STRING
		 ? r->str : "");
	if (r)
		freeReplyObject(r);
	redisFree(rc);
	return NULL;
}

static void test_tail_wakes(void **state)
{
	struct env *e = *state;
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct late l = { .e = e };
	pthread_t th;
	struct seen s = { 0 };
	assert_int_equal(pthread_create(&th, NULL, append_later, &l), 0);
	/* blocks far longer than the append takes: wakes at the append */
	int n = fg_evtail_next(t, 5000, see, &s);
	pthread_join(th, NULL);
	assert_int_equal(n, 1);
	assert_string_equal(s.id[0], l.id);
	fg_evtail_destroy(t);
}

static void test_tail_restart(void **state)
{
	struct env *e = *state;
	char id[4][48];
	redis_do(e, "DEL %s", EV);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct seen s = { 0 };
	xadd(e, EV, id[0], "k", "granted", "l", "r1", NULL);
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 1);

	/* Redis goes: an error, the position kept */
	rp_kill(&e->rp);
	assert_true(fg_evtail_next(t, 100, see, &s) < 0);
	assert_true(fg_evtail_next(t, 100, see, &s) < 0);
	struct fg_ev_cursor pos;
	fg_evtail_position(t, &pos);
	char pid[48];
	fg_event_id_format(&pos, pid, sizeof(pid));
	assert_string_equal(pid, id[0]);

	/* back (empty: no save): past the reconnect pace, the next call
	 * reaches it and gives what was appended since */
	assert_int_equal(rp_start(&e->rp, NULL), 0);
	redisFree(e->rc);
	e->rc = NULL;
	xadd(e, EV, id[1], "k", "granted", "l", "r2", NULL);
	rp_sleep_ms(250); /* > connect_timeout_ms: the tail may try again */
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 1);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.id[1], id[1]);
	fg_evtail_destroy(t);
}

static int refusals;
static char refused_why[128];

static void on_refused(void *arg, const char *user,
		       const struct fg_redis_node *node, const char *why)
{
	(void)arg;
	(void)user;
	(void)node;
	refusals++;
	snprintf(refused_why, sizeof(refused_why), "%s", why);
}

/* A Redis user without the rights the readers need: an error, and the
 * refusal told to the topology's hook (the gateway logs it), never a
 * silent nothing. */
static void test_refused(void **state)
{
	struct env *e = *state;
	redis_do(e, "ACL SETUSER evr on >pw ~fg:* +xrevrange +ping");
	struct fg_redis_auth auth = { .user = "evr", .password = "pw",
				      .refused = on_refused };
	char url[64], err[128];
	struct fg_redis_addr addr;
	snprintf(url, sizeof(url), "127.0.0.1:%d", e->rp.port);
	assert_int_equal(fg_redis_addr_parse(url, &addr, err, sizeof(err)), 0);
	fg_topo *topo = fg_topo_create(&addr, 200, 2000, &auth);
	assert_non_null(topo);
	struct fg_store_opts o = { .topo = topo, .connect_timeout_ms = 200,
				   .command_timeout_ms = 2000 };
	fg_evtail *t = fg_evtail_create(&o);
	fg_store *st = fg_store_create(&o);
	assert_non_null(t);
	assert_non_null(st);
	struct seen s = { 0 };
	refusals = 0;
	assert_true(fg_evtail_next(t, 50, see, &s) < 0);
	assert_int_equal(refusals, 1);
	assert_true(strncmp(refused_why, "NOPERM", 6) == 0);
	struct fg_ev_cursor next = { 0 }, after = { .ms = 1, .set = true };
	bool gap;
	assert_int_equal(fg_events_range(st, &after, 10, 0, see, &s, &next,
					 &gap), FG_EUNAVAIL);
	assert_int_equal(refusals, 2);
	assert_int_equal(s.n, 0);
	fg_store_destroy(st);
	fg_evtail_destroy(t);
	fg_topo_destroy(topo);
	redis_do(e, "ACL DELUSER evr");
}

/* ---- behind a Sentinel ------------------------------------------------ */

struct senv {
	struct redisproc rp, sentinel;
	fg_topo *topo;
	struct fg_store_opts opts;
	fg_store *st;
};

static int senv_down(void **state)
{
	struct senv *e = *state;
	if (!e)
		return 0;
	fg_store_destroy(e->st);
	fg_topo_destroy(e->topo);
	rp_stop(&e->sentinel);
	rp_stop(&e->rp);
	free(e);
	return 0;
}

static int senv_up(void **state)
{
	struct senv *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	*state = e;
	char url[96], err[128];
	struct fg_redis_addr addr;
	if (rp_start(&e->rp, NULL) ||
	    rp_start_sentinel(&e->sentinel, "evm", e->rp.port))
		goto fail;
	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d/evm",
		 e->sentinel.port);
	if (fg_redis_addr_parse(url, &addr, err, sizeof(err)))
		goto fail;
	e->topo = fg_topo_create(&addr, 200, 2000, NULL);
	if (!e->topo || fg_topo_refresh(e->topo) != FG_OK)
		goto fail;
	e->opts = (struct fg_store_opts){ .topo = e->topo,
		.connect_timeout_ms = 200, .command_timeout_ms = 2000 };
	e->st = fg_store_create(&e->opts);
	if (e->st)
		return 0;
fail:
	senv_down(state);
	*state = NULL;
	return -1;
}

/* The master the Sentinel names holds the one stream: the history and
 * the follower read it there. */
static void test_sentinel(void **state)
{
	struct senv *e = *state;
	redisContext *rc = rp_connect(&e->rp);
	assert_non_null(rc);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	redisReply *r = redisCommand(rc, "XADD %s * k granted l s1 t 3", EV);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	char id[48];
	snprintf(id, sizeof(id), "%s", r->str);
	freeReplyObject(r);
	redisFree(rc);

	struct seen s = { 0 };
	assert_int_equal(fg_evtail_next(t, 1000, see, &s), 1);
	assert_string_equal(s.id[0], id);
	assert_true(s.has_token[0] && s.token[0] == 3);
	struct fg_ev_cursor next = { 0 };
	bool gap;
	memset(&s, 0, sizeof(s));
	assert_int_equal(fg_events_range(e->st, NULL, 10, 0, see, &s, &next,
					 &gap), FG_OK);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.id[0], id);
	assert_int_equal(fg_events_trim(e->st, 60000), FG_OK);
	fg_evtail_destroy(t);
}

int main(void)
{
	const struct CMUnitTest ids[] = {
		cmocka_unit_test(test_id_valid),
		cmocka_unit_test(test_id_invalid),
	};
	const struct CMUnitTest redis[] = {
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_range_min_ms),
		cmocka_unit_test(test_range_long),
		cmocka_unit_test(test_range_not_events),
		cmocka_unit_test(test_hostile_ids),
		cmocka_unit_test(test_trim),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_tail_wakes),
		cmocka_unit_test(test_tail_restart),
		cmocka_unit_test(test_refused),
	};
	const struct CMUnitTest sentinel[] = {
		cmocka_unit_test(test_sentinel),
	};
	int failed = cmocka_run_group_tests(ids, NULL, NULL);
	failed += cmocka_run_group_tests(redis, env_up, env_down);
	failed += cmocka_run_group_tests(sentinel, senv_up, senv_down);
	return failed;
}
