/*
 * tests/unit/lockcore/test_evread_cluster.c - the event streams of a
 * Redis Cluster (lockcore/evread.c): one stream per hash slot, spread
 * over three real masters (redisproc.h; slots given by hand, no
 * replicas). The history merges them by (ms, slot, seq) and resumes from
 * any id it gave without a repeat or a miss, whatever its scan; a trimmed
 * slot is a gap; the follower gives what any master's streams receive
 * after it started, once; the trim reaches every master.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "fencegate/error.h"
#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "redisproc.h"
#include "../../../lockcore/lockcore-private.h"

#define MASTERS 3

struct env {
	struct redisproc rp[MASTERS];
	redisContext *rc[MASTERS];
	fg_topo *topo;
	struct fg_store_opts opts;
	fg_store *st;
};

static const unsigned lo[MASTERS] = { 0, 5461, 10923 };
static const unsigned hi[MASTERS] = { 5460, 10922, 16383 };

static int owner(unsigned slot)
{
	for (int i = MASTERS - 1; i >= 0; i--)
		if (slot >= lo[i])
			return i;
	return 0;
}

static bool cluster_ok(struct env *e)
{
	for (int i = 0; i < MASTERS; i++) {
		redisReply *r = redisCommand(e->rc[i], "CLUSTER INFO");
		bool ok = r && r->type == REDIS_REPLY_STRING &&
			  strstr(r->str, "cluster_state:ok") &&
			  strstr(r->str, "cluster_known_nodes:3");
		if (r)
			freeReplyObject(r);
		if (!ok)
			return false;
	}
	return true;
}

static int env_down(void **state);

static int env_up(void **state)
{
	static const char *const args[] = { "--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
		"2000", NULL };
	struct env *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	*state = e;
	for (int i = 0; i < MASTERS; i++) {
		e->rp[i].port = rp_free_cluster_port();
		if (rp_start(&e->rp[i], args) || !(e->rc[i] = rp_connect(&e->rp[i])))
			goto fail;
		redisReply *r = redisCommand(e->rc[i], "CLUSTER ADDSLOTSRANGE %u %u",
					     lo[i], hi[i]);
		if (!r || r->type == REDIS_REPLY_ERROR)
			goto fail;
		freeReplyObject(r);
	}
	for (int i = 1; i < MASTERS; i++) {
		redisReply *r = redisCommand(e->rc[0], "CLUSTER MEET 127.0.0.1 %d",
					     e->rp[i].port);
		if (!r || r->type == REDIS_REPLY_ERROR)
			goto fail;
		freeReplyObject(r);
	}
	/* the nodes agree within a few gossip rounds: 20 s at most */
	int i;
	for (i = 0; i < 2000 && !cluster_ok(e); i++)
		rp_sleep_ms(10);
	if (i == 2000)
		goto fail;

	char url[128], err[128];
	struct fg_redis_addr addr;
	snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d",
		 e->rp[0].port, e->rp[1].port);
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
	env_down(state); /* cmocka tears down no group whose setup failed */
	*state = NULL;
	return -1;
}

static int env_down(void **state)
{
	struct env *e = *state;
	if (!e)
		return 0;
	fg_store_destroy(e->st);
	fg_topo_destroy(e->topo);
	for (int i = 0; i < MASTERS; i++) {
		if (e->rc[i])
			redisFree(e->rc[i]);
		rp_stop(&e->rp[i]);
	}
	free(e);
	return 0;
}

/* The stream of slot s, on its master: XADD with id (NULL: "*"); the id
 * Redis gave into out. */
static void xadd(struct env *e, unsigned slot, const char *id, char out[48],
		 const char *kind, const char *lock)
{
	char key[FG__EV_KEY_MAX];
	fg__ev_slot_key(slot, key, sizeof(key));
	assert_int_equal(fg_keyslot(key, strlen(key)), slot);
	redisReply *r = redisCommand(e->rc[owner(slot)], "XADD %s %s k %s l %s",
				     key, id ? id : "*", kind, lock);
	assert_non_null(r);
	if (r->type != REDIS_REPLY_STRING)
		fail_msg("XADD: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
	if (out)
		snprintf(out, 48, "%s", r->str);
	freeReplyObject(r);
}

/* Returns once every master's clock is past the millisecond of entry id
 * `id`: a follower starting then counts the entry as before it. (Within
 * the one millisecond of its start, the order of (ms, slot, seq) decides,
 * as for every cursor.) A clock tick: bounded by a second. */
static void clock_past(struct env *e, const char *id)
{
	unsigned long long ms = strtoull(id, NULL, 10);
	for (int i = 0; i < MASTERS; i++) {
		for (int k = 0;; k++) {
			redisReply *r = redisCommand(e->rc[i], "TIME");
			assert_non_null(r);
			assert_int_equal(r->type, REDIS_REPLY_ARRAY);
			unsigned long long now =
				strtoull(r->element[0]->str, NULL, 10) * 1000 +
				strtoull(r->element[1]->str, NULL, 10) / 1000;
			freeReplyObject(r);
			if (now > ms)
				break;
			assert_true(k < 1000);
			usleep(1000);
		}
	}
}

static void del_all(struct env *e)
{
	for (int i = 0; i < MASTERS; i++) {
		redisReply *r = redisCommand(e->rc[i], "FLUSHALL");
		assert_non_null(r);
		freeReplyObject(r);
	}
}

#define MAXSEEN 512
struct seen {
	size_t n;
	char id[MAXSEEN][48];
	char lock[MAXSEEN][24];
};

static int see(void *arg, const struct fg_event *ev)
{
	struct seen *s = arg;
	if (s->n < MAXSEEN) {
		snprintf(s->id[s->n], 48, "%s", ev->id);
		snprintf(s->lock[s->n], 24, "%s", ev->lock);
	}
	s->n++;
	return 0;
}

struct want {
	uint64_t ms, seq;
	unsigned slot;
	char id[48];
};

static int want_cmp(const void *a, const void *b)
{
	const struct want *x = a, *y = b;
	if (x->ms != y->ms)
		return x->ms < y->ms ? -1 : 1;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Entries over slots of every master, with ids chosen so that the merge
 * has work: equal ms in different slots, one slot with far more entries
 * than the first COUNT, slots whose streams interleave.
 */
static size_t fill(struct env *e, struct want *w)
{
	static const unsigned slots[] = { 3, 100, 5460, 5461, 6000, 10922,
					  10923, 16383 };
	size_t n = 0;
	del_all(e);
	for (size_t k = 0; k < sizeof(slots) / sizeof(slots[0]); k++) {
		unsigned s = slots[k];
		/* slot 6000 is the busy one: 60 entries; others 5 */
		unsigned count = s == 6000 ? 60 : 5;
		for (unsigned j = 0; j < count; j++) {
			uint64_t ms = 1000 + (s == 6000 ? j : j * 7 + k % 3);
			uint64_t seq = (s == 100) ? j : 0;
			if (s == 100)
				ms = 1000 + j / 2; /* two per ms */
			char id[40], lock[24];
			snprintf(id, sizeof(id), "%llu-%llu",
				 (unsigned long long)ms, (unsigned long long)seq);
			snprintf(lock, sizeof(lock), "s%u-%u", s, j);
			xadd(e, s, id, NULL, "granted", lock);
			w[n] = (struct want){ .ms = ms, .seq = seq, .slot = s };
			snprintf(w[n].id, 48, "%s.%u", id, s);
			n++;
		}
	}
	qsort(w, n, sizeof(*w), want_cmp);
	return n;
}

static void test_range_merges(void **state)
{
	struct env *e = *state;
	struct want w[200];
	size_t n = fill(e, w);
	struct seen *s = calloc(1, sizeof(*s));
	struct fg_ev_cursor next = { 0 };
	bool gap = true;

	assert_int_equal(fg_events_range(e->st, NULL, 1000, 0, see, s, &next,
					 &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s->n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(s->id[i], w[i].id);
	char nid[48];
	fg_event_id_format(&next, nid, sizeof(nid));
	assert_string_equal(nid, w[n - 1].id);

	/* paged with scans below, at, and above the first COUNT (8): the
	 * same sequence, no repeat, no miss, each page resumed from the last
	 * `next` (a call costs one XRANGE and one XINFO per slot: a few) */
	static const unsigned scans[] = { 5, 8, 9, 40 };
	for (size_t sc = 0; sc < sizeof(scans) / sizeof(scans[0]); sc++) {
		unsigned scan = scans[sc];
		struct fg_ev_cursor after = { 0 };
		size_t at = 0;
		for (int pages = 0; pages < 400; pages++) {
			memset(s, 0, sizeof(*s));
			assert_int_equal(fg_events_range(e->st, &after, scan, 0, see,
							 s, &next, &gap), FG_OK);
			assert_false(gap);
			assert_true(s->n <= scan);
			for (size_t i = 0; i < s->n; i++)
				assert_string_equal(s->id[i], w[at + i].id);
			at += s->n;
			if (s->n < scan)
				break;
			after = next;
		}
		assert_int_equal(at, n);
	}

	/* after any id given: exactly the rest */
	for (size_t k = 0; k < n; k += 23) {
		struct fg_ev_cursor after;
		assert_int_equal(fg_event_id_parse(w[k].id, &after), 0);
		memset(s, 0, sizeof(*s));
		assert_int_equal(fg_events_range(e->st, &after, 1000, 0, see, s,
						 &next, &gap), FG_OK);
		assert_int_equal(s->n, n - k - 1);
		for (size_t i = 0; i < s->n; i++)
			assert_string_equal(s->id[i], w[k + 1 + i].id);
	}

	/* min_ms: from 1010 on only, in order */
	memset(s, 0, sizeof(*s));
	assert_int_equal(fg_events_range(e->st, NULL, 1000, 1010, see, s,
					 &next, &gap), FG_OK);
	size_t first = 0;
	while (w[first].ms < 1010)
		first++;
	assert_int_equal(s->n, n - first);
	for (size_t i = 0; i < s->n; i++)
		assert_string_equal(s->id[i], w[first + i].id);
	free(s);
}

static void test_range_gap(void **state)
{
	struct env *e = *state;
	struct want w[200];
	size_t n = fill(e, w);
	struct seen *s = calloc(1, sizeof(*s));
	struct fg_ev_cursor next = { 0 }, after;
	bool gap = false;

	/* slot 16383's first three entries trimmed (ms 1002..1016 there) */
	char key[FG__EV_KEY_MAX];
	fg__ev_slot_key(16383, key, sizeof(key));
	redisReply *r = redisCommand(e->rc[2], "XTRIM %s MINID 1020", key);
	assert_non_null(r);
	assert_int_equal(r->integer, 3);
	freeReplyObject(r);
	/* from the start: no after, no gap; three of slot 16383 fewer */
	assert_int_equal(fg_events_range(e->st, NULL, 1000, 0, see, s, &next,
					 &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s->n, n - 3);
	/* after an id older than what slot 16383 keeps: a gap */
	assert_int_equal(fg_event_id_parse("1001-0.0", &after), 0);
	memset(s, 0, sizeof(*s));
	assert_int_equal(fg_events_range(e->st, &after, 1000, 0, see, s, &next,
					 &gap), FG_OK);
	assert_true(gap);
	/* after the newest: none */
	memset(s, 0, sizeof(*s));
	assert_int_equal(fg_event_id_parse(w[n - 1].id, &after), 0);
	assert_int_equal(fg_events_range(e->st, &after, 1000, 0, see, s, &next,
					 &gap), FG_OK);
	assert_false(gap);
	assert_int_equal(s->n, 0);
	free(s);
}

static void test_trim(void **state)
{
	struct env *e = *state;
	struct want w[200];
	(void)fill(e, w); /* every entry from 1970: all older than a minute */
	xadd(e, 7000, NULL, NULL, "granted", "fresh");
	assert_int_equal(fg_events_trim(e->st, 60000), FG_OK);
	struct seen *s = calloc(1, sizeof(*s));
	struct fg_ev_cursor next = { 0 };
	bool gap;
	assert_int_equal(fg_events_range(e->st, NULL, 1000, 0, see, s, &next,
					 &gap), FG_OK);
	assert_int_equal(s->n, 1);
	assert_string_equal(s->lock[0], "fresh");
	free(s);
}

static void test_tail(void **state)
{
	struct env *e = *state;
	char id[6][48];
	del_all(e);
	xadd(e, 5, NULL, id[0], "granted", "before");
	clock_past(e, id[0]);

	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct fg_ev_cursor pos;
	fg_evtail_position(t, &pos);
	assert_true(pos.set && pos.cluster);

	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(fg_evtail_next(t, 100, see, s), 0);
	assert_int_equal(s->n, 0); /* what was there before it is not new */

	/* one entry on every master, and two in one slot */
	xadd(e, 200, NULL, id[1], "granted", "m0");
	xadd(e, 8000, NULL, id[2], "granted", "m1");
	xadd(e, 13000, NULL, id[3], "granted", "m2");
	xadd(e, 13000, NULL, id[4], "released", "m2");
	/* each master's entries come when its subscriber hears of them:
	 * within 5 s of calls, all four, each once */
	for (int i = 0; i < 50 && s->n < 4; i++)
		assert_true(fg_evtail_next(t, 100, see, s) >= 0);
	assert_int_equal(s->n, 4);
	assert_int_equal(fg_evtail_next(t, 200, see, s), 0);
	assert_int_equal(s->n, 4);
	bool got[5] = { false };
	for (size_t i = 0; i < 4; i++) {
		for (int k = 1; k <= 4; k++) {
			char full[64];
			unsigned slot = k == 1 ? 200 : k == 2 ? 8000 : 13000;
			snprintf(full, sizeof(full), "%s.%u", id[k], slot);
			if (strcmp(s->id[i], full) == 0) {
				assert_false(got[k]);
				got[k] = true;
			}
		}
	}
	for (int k = 1; k <= 4; k++)
		assert_true(got[k]);
	/* a lock's events in its order */
	size_t a = 0, b = 0;
	for (size_t i = 0; i < 4; i++) {
		if (strstr(s->id[i], id[3]))
			a = i;
		if (strstr(s->id[i], id[4]))
			b = i;
	}
	assert_true(a < b);

	/* a busy slot: more than one read's COUNT (256), all of it, in
	 * order, once */
	memset(s, 0, sizeof(*s));
	char key[FG__EV_KEY_MAX];
	fg__ev_slot_key(9000, key, sizeof(key));
	for (int i = 0; i < 300; i++)
		redisAppendCommand(e->rc[owner(9000)], "XADD %s * k granted l b%d",
				   key, i);
	for (int i = 0; i < 300; i++) {
		redisReply *r;
		assert_int_equal(redisGetReply(e->rc[owner(9000)], (void **)&r),
				 REDIS_OK);
		assert_int_equal(r->type, REDIS_REPLY_STRING);
		freeReplyObject(r);
	}
	for (int i = 0; i < 50 && s->n < 300; i++)
		assert_true(fg_evtail_next(t, 100, see, s) >= 0);
	assert_int_equal(s->n, 300);
	assert_int_equal(fg_evtail_next(t, 100, see, s), 0);
	for (int i = 0; i < 300; i++) {
		char l[24];
		snprintf(l, sizeof(l), "b%d", i);
		assert_string_equal(s->lock[i], l);
	}
	fg_evtail_position(t, &pos);
	char pid[48];
	fg_event_id_format(&pos, pid, sizeof(pid));
	assert_string_equal(pid, s->id[299]);
	fg_evtail_destroy(t);
	free(s);
}

/* The id of master i (CLUSTER MYID) into out[41]. */
static void myid(struct env *e, int i, char out[64])
{
	redisReply *r = redisCommand(e->rc[i], "CLUSTER MYID");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	snprintf(out, 64, "%s", r->str);
	freeReplyObject(r);
}

static void ok(redisReply *r)
{
	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("%s", r->str);
	freeReplyObject(r);
}

/* Does every master say that slot is served by master `to`? */
static bool all_agree(struct env *e, unsigned slot, int to)
{
	for (int i = 0; i < MASTERS; i++) {
		redisReply *r = redisCommand(e->rc[i], "CLUSTER SLOTS");
		bool found = false;
		for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
			redisReply *row = r->element[k];
			if (row->elements >= 3 &&
			    (unsigned)row->element[0]->integer <= slot &&
			    (unsigned)row->element[1]->integer >= slot)
				found = row->element[2]->element[1]->integer ==
					e->rp[to].port;
		}
		if (r)
			freeReplyObject(r);
		if (!found)
			return false;
	}
	return true;
}

/* Moves slot (with its keys) from master `from` to master `to`, as
 * redis-cli --cluster reshard does, and waits until every master agrees. */
static void move_slot(struct env *e, unsigned slot, int from, int to)
{
	char src[64], dst[64];
	myid(e, from, src);
	myid(e, to, dst);
	ok(redisCommand(e->rc[to], "CLUSTER SETSLOT %u IMPORTING %s", slot, src));
	ok(redisCommand(e->rc[from], "CLUSTER SETSLOT %u MIGRATING %s", slot, dst));
	redisReply *keys = redisCommand(e->rc[from], "CLUSTER GETKEYSINSLOT %u 100",
					slot);
	assert_non_null(keys);
	for (size_t k = 0; k < keys->elements; k++)
		ok(redisCommand(e->rc[from], "MIGRATE 127.0.0.1 %d %s 0 5000",
				e->rp[to].port, keys->element[k]->str));
	freeReplyObject(keys);
	for (int i = 0; i < MASTERS; i++)
		ok(redisCommand(e->rc[i], "CLUSTER SETSLOT %u NODE %s", slot, dst));
	int i;
	for (i = 0; i < 1000 && !all_agree(e, slot, to); i++)
		rp_sleep_ms(10);
	assert_true(i < 1000);
}

/* The slot map moves under the follower and the history: they follow it
 * (told by the topology's generation), and the slot's stream, moved with
 * it, goes on from where it was. */
static void test_slot_moves(void **state)
{
	struct env *e = *state;
	char id[4][48];
	del_all(e);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct seen *s = calloc(1, sizeof(*s));

	xadd(e, 9000, NULL, id[0], "granted", "mv");
	for (int i = 0; i < 50 && s->n < 1; i++)
		assert_true(fg_evtail_next(t, 100, see, s) >= 0);
	assert_int_equal(s->n, 1);

	uint64_t gen = fg_topo_gen(e->topo);
	move_slot(e, 9000, owner(9000), 2);
	/* before the map is looked at again, the history asks the old
	 * master, which answers MOVED: not all there, the map suspect */
	{
		struct fg_ev_cursor next = { 0 };
		bool gap;
		struct seen *h = calloc(1, sizeof(*h));
		assert_int_equal(fg_events_range(e->st, NULL, 100, 0, see, h,
						 &next, &gap), FG_EUNAVAIL);
		assert_true(fg_topo_suspected(e->topo));
		free(h);
	}
	assert_int_equal(fg_topo_refresh(e->topo), FG_OK);
	assert_true(fg_topo_gen(e->topo) > gen);

	/* written on its new master: given once, the old one not again */
	char key[FG__EV_KEY_MAX];
	fg__ev_slot_key(9000, key, sizeof(key));
	redisReply *r = redisCommand(e->rc[2], "XADD %s * k released l mv", key);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	snprintf(id[1], 48, "%s", r->str);
	freeReplyObject(r);
	for (int i = 0; i < 50 && s->n < 2; i++)
		fg_evtail_next(t, 100, see, s);
	assert_int_equal(s->n, 2);
	assert_int_equal(fg_evtail_next(t, 200, see, s), 0);
	char full[64];
	snprintf(full, sizeof(full), "%s.9000", id[1]);
	assert_string_equal(s->id[1], full);
	fg_evtail_destroy(t);

	/* the history reads both from the new master */
	memset(s, 0, sizeof(*s));
	struct fg_ev_cursor next = { 0 };
	bool gap;
	int err = FG_EUNAVAIL;
	/* the store's connection to the old master may answer MOVED once
	 * (then the store looks at the map again): bounded, twice at most */
	for (int i = 0; i < 2 && err; i++) {
		memset(s, 0, sizeof(*s));
		err = fg_events_range(e->st, NULL, 100, 0, see, s, &next, &gap);
	}
	assert_int_equal(err, FG_OK);
	assert_int_equal(s->n, 2);
	free(s);
	/* put it back for the other tests */
	move_slot(e, 9000, 2, 1);
	assert_int_equal(fg_topo_refresh(e->topo), FG_OK);
}

/* A master goes and comes back (empty: nothing saved) under the
 * follower: an error while it is gone, the other masters' events still
 * given, then what its streams got since it came back, once. */
static void test_master_restart(void **state)
{
	static const char *const args[] = { "--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
		"2000", NULL };
	struct env *e = *state;
	char id[4][48];
	del_all(e);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct seen *s = calloc(1, sizeof(*s));

	rp_kill(&e->rp[1]);
	redisFree(e->rc[1]);
	e->rc[1] = NULL;
	/* its subscriber's end is seen: an error */
	assert_true(fg_evtail_next(t, 100, see, s) < 0);
	/* another master's event: given all the same */
	xadd(e, 200, NULL, id[0], "granted", "m0");
	int got = 0;
	for (int i = 0; i < 50 && got == 0; i++) {
		int r = fg_evtail_next(t, 100, see, s);
		if (r > 0)
			got += r;
	}
	assert_int_equal(got, 1);
	assert_int_equal(s->n, 1);

	/* back on its port with its node id (nodes.conf), empty */
	assert_int_equal(rp_start(&e->rp[1], args), 0);
	assert_non_null(e->rc[1] = rp_connect(&e->rp[1]));
	int i;
	for (i = 0; i < 2000 && !cluster_ok(e); i++)
		rp_sleep_ms(10);
	assert_true(i < 2000);
	/* written before the follower is back on it: caught up */
	xadd(e, 8000, NULL, id[1], "granted", "m1a");
	xadd(e, 9000, NULL, id[2], "granted", "m1b");
	for (i = 0; i < 100 && s->n < 3; i++)
		fg_evtail_next(t, 100, see, s);
	assert_int_equal(s->n, 3);
	/* and after, as it comes */
	xadd(e, 8000, NULL, id[3], "released", "m1a");
	for (i = 0; i < 50 && s->n < 4; i++)
		fg_evtail_next(t, 100, see, s);
	assert_int_equal(s->n, 4);
	assert_int_equal(fg_evtail_next(t, 200, see, s), 0);
	assert_int_equal(s->n, 4);
	assert_string_equal(s->lock[3], "m1a");
	char full[64];
	snprintf(full, sizeof(full), "%s.8000", id[3]);
	assert_string_equal(s->id[3], full);
	fg_evtail_destroy(t);
	free(s);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A master that stops answering without closing anything (SIGSTOP): the
 * follower's subscriber there goes silent; after 15 s it is asked for a
 * PONG and, none within the command timeout (2 s), it counts as gone:
 * an error; once the master runs again, its streams are read again. */
static void test_master_silent(void **state)
{
	struct env *e = *state;
	char id[48];
	del_all(e);
	fg_evtail *t = fg_evtail_create(&e->opts);
	assert_non_null(t);
	struct seen *s = calloc(1, sizeof(*s));
	assert_int_equal(fg_evtail_next(t, 50, see, s), 0);

	uint64_t t0 = now_ms();
	kill(e->rp[2].pid, SIGSTOP);
	int r = 0;
	while (r >= 0 && now_ms() - t0 < 30000)
		r = fg_evtail_next(t, 500, see, s);
	uint64_t took = now_ms() - t0;
	kill(e->rp[2].pid, SIGCONT);
	assert_true(r < 0);
	assert_true(took >= 15000 && took < 15000 + 2000 + 5000);

	int i;
	for (i = 0; i < 2000 && !cluster_ok(e); i++)
		rp_sleep_ms(10);
	assert_true(i < 2000);
	xadd(e, 13000, NULL, id, "granted", "back");
	for (i = 0; i < 50 && s->n < 1; i++)
		fg_evtail_next(t, 100, see, s);
	assert_int_equal(s->n, 1);
	assert_string_equal(s->lock[0], "back");
	fg_evtail_destroy(t);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_merges),
		cmocka_unit_test(test_range_gap),
		cmocka_unit_test(test_trim),
		cmocka_unit_test(test_tail),
		cmocka_unit_test(test_slot_moves),
		cmocka_unit_test(test_master_restart),
		cmocka_unit_test(test_master_silent),
	};
	return cmocka_run_group_tests(tests, env_up, env_down);
}
