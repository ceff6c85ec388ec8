/*
 * tests/unit/lockcore/test_topo.c - lockcore/topo.c without a Redis: the
 * `redis` setting's forms, hash slots as Redis Cluster computes them, and the slot
 * map read from a CLUSTER SLOTS reply (built here by hand).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "fencegate/error.h"
#include "fencegate/topo.h"

static unsigned slot(const char *k)
{
	return fg_keyslot(k, strlen(k));
}

/* Values from Redis' own CLUSTER KEYSLOT. */
static void test_keyslot_matches_redis(void **state)
{
	(void)state;
	assert_int_equal(slot("foo"), 12182);
	assert_int_equal(slot("hello"), 866);
	assert_int_equal(slot("123456789"), 12739); /* CRC16/XMODEM 0x31C3 */
	/* the hash tag decides: every key of one lock shares a slot */
	assert_int_equal(slot("fg:{orders/42}:s"), slot("orders/42"));
	assert_int_equal(slot("fg:{orders/42}:q"), slot("fg:{orders/42}:f"));
	/* an empty tag is no tag; only the first '{' ... '}' counts */
	assert_int_equal(slot("foo{}{bar}"), fg_keyslot("foo{}{bar}", 10));
	assert_int_not_equal(slot("foo{}{bar}"), slot("bar"));
	assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
	assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
	assert_int_equal(slot("{"), fg_keyslot("{", 1));
	for (int i = 0; i < 1000; i++) {
		char k[32];
		snprintf(k, sizeof(k), "key:%d", i);
		assert_true(slot(k) < FG_SLOTS);
	}
}

static void test_addr_forms(void **state)
{
	(void)state;
	struct fg_redis_addr a;
	char err[256];

	assert_int_equal(fg_redis_addr_parse("redis://10.0.0.1:6380", &a, err, sizeof(err)), 0);
	assert_int_equal(a.mode, FG_REDIS_DIRECT);
	assert_int_equal(a.nseeds, 1);
	assert_string_equal(a.seeds[0].host, "10.0.0.1");
	assert_int_equal(a.seeds[0].port, 6380);

	assert_int_equal(fg_redis_addr_parse(
		"redis-sentinel://h1:26379,h2:26380,[::1]:26381/mymaster", &a, err,
		sizeof(err)), 0);
	assert_int_equal(a.mode, FG_REDIS_SENTINEL);
	assert_int_equal(a.nseeds, 3);
	assert_string_equal(a.seeds[1].host, "h2");
	assert_int_equal(a.seeds[1].port, 26380);
	assert_string_equal(a.seeds[2].host, "::1");
	assert_string_equal(a.master, "mymaster");

	assert_int_equal(fg_redis_addr_parse("sentinel://h1:26379/m", &a, err, sizeof(err)), 0);
	assert_int_equal(a.mode, FG_REDIS_SENTINEL);

	assert_int_equal(fg_redis_addr_parse("redis-cluster://a:7000,b:7001", &a, err, sizeof(err)), 0);
	assert_int_equal(a.mode, FG_REDIS_CLUSTER);
	assert_int_equal(a.nseeds, 2);
	assert_int_equal(fg_redis_addr_parse("cluster://a:7000", &a, err, sizeof(err)), 0);
	assert_int_equal(a.mode, FG_REDIS_CLUSTER);
}

static void test_addr_refusals(void **state)
{
	(void)state;
	static const char *bad[] = {
		"redis-sentinel://h1:26379",          /* no master name */
		"redis-sentinel://h1:26379/",
		"redis-sentinel:///m",
		"redis-sentinel://h1:26379/a b",
		"redis-cluster://",
		"redis-cluster://a:7000,",
		"redis-cluster://a:7000,,b:7001",
		"redis-cluster://a:7000/x",
		"redis-cluster://a:0",
		"redis-cluster://a:65536",
		"redis-cluster://a:70x0",
		"redis-cluster://a:b:7000",
		"redis-cluster://a@b:7000",
		"redis://a:1,b:2",                    /* a list needs a mode */
		"rediss://a:6379",
		"http://a:6379",
		"redis://:6379",
		"redis://[::1:6379",
		/* 17 seeds, one more than allowed (one literal, split) */
		("redis-cluster://1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9,10:10,"
		 "11:11,12:12,13:13,14:14,15:15,16:16,17:17"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fg_redis_addr a;
		char err[256] = "";
		if (fg_redis_addr_parse(bad[i], &a, err, sizeof(err)) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_true(err[0] != '\0');
	}
}

/* ---- a CLUSTER SLOTS reply, by hand ------------------------------------ */

static redisReply *str(const char *s)
{
	redisReply *r = calloc(1, sizeof(*r));
	r->type = REDIS_REPLY_STRING;
	r->str = strdup(s);
	r->len = strlen(s);
	return r;
}

static redisReply *num(long long v)
{
	redisReply *r = calloc(1, sizeof(*r));
	r->type = REDIS_REPLY_INTEGER;
	r->integer = v;
	return r;
}

static redisReply *arr(size_t n, ...)
{
	redisReply *r = calloc(1, sizeof(*r));
	r->type = REDIS_REPLY_ARRAY;
	r->elements = n;
	r->element = calloc(n ? n : 1, sizeof(*r->element));
	va_list ap;
	va_start(ap, n);
	for (size_t i = 0; i < n; i++)
		r->element[i] = va_arg(ap, redisReply *);
	va_end(ap);
	return r;
}

static redisReply *range(long long lo, long long hi, const char *host, int port)
{
	return arr(4, num(lo), num(hi), arr(3, str(host), num(port), str("id")),
		   arr(3, str("127.0.0.1"), num(port + 100), str("replica-id")));
}

static void test_slots_reply_makes_the_map(void **state)
{
	(void)state;
	struct fg_redis_node from = { "10.0.0.9", 7009 };
	redisReply *r = arr(4,
		range(0, 5460, "10.0.0.1", 7000),
		range(5461, 10922, "10.0.0.2", 7001),
		range(10923, 16000, "", 7002),        /* "": the node asked */
		range(16001, 16383, "10.0.0.1", 7000)); /* a master twice */
	struct fg_topo_view v;
	assert_int_equal(fg_topo_parse_slots(r, &from, &v), FG_OK);
	assert_int_equal(v.nnodes, 3);
	assert_string_equal(v.nodes[v.slots[0]].host, "10.0.0.1");
	assert_int_equal(v.nodes[v.slots[5460]].port, 7000);
	assert_int_equal(v.nodes[v.slots[5461]].port, 7001);
	assert_string_equal(v.nodes[v.slots[10923]].host, "10.0.0.9");
	assert_int_equal(v.nodes[v.slots[10923]].port, 7002);
	assert_int_equal(v.slots[16383], v.slots[0]);
	fg_topo_view_finish(&v);
	freeReplyObject(r);

	/* a hole is FG_SLOT_NONE: no server takes those calls */
	r = arr(1, range(0, 99, "h", 1));
	assert_int_equal(fg_topo_parse_slots(r, &from, &v), FG_OK);
	assert_int_equal(v.slots[99], 0);
	assert_int_equal(v.slots[100], FG_SLOT_NONE);
	fg_topo_view_finish(&v);
	freeReplyObject(r);
}

static void test_slots_reply_refused_when_malformed(void **state)
{
	(void)state;
	struct fg_redis_node from = { "h", 1 };
	struct fg_topo_view v;
	redisReply *bad[] = {
		str("nope"),
		arr(0),                                        /* no master */
		arr(1, arr(2, num(0), num(1))),                /* no node */
		arr(1, arr(3, num(5), num(1), arr(2, str("h"), num(1)))), /* hi < lo */
		arr(1, arr(3, num(0), num(16384), arr(2, str("h"), num(1)))),
		arr(1, arr(3, num(0), num(1), arr(2, str("h"), num(0)))),
		arr(1, arr(3, num(0), num(1), arr(2, num(1), num(1)))),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(fg_topo_parse_slots(bad[i], &from, &v), FG_EPROTO);
		assert_null(v.slots);
		assert_null(v.nodes);
		freeReplyObject(bad[i]);
	}
}

static void test_direct_topology_is_complete_at_once(void **state)
{
	(void)state;
	struct fg_redis_addr a;
	char err[128];
	assert_int_equal(fg_redis_addr_parse("redis://127.0.0.1:6399", &a, err, sizeof(err)), 0);
	fg_topo *t = fg_topo_create(&a, 100, 100, NULL);
	assert_non_null(t);
	assert_int_equal(fg_topo_gen(t), 1);
	assert_int_equal(fg_topo_refresh(t), FG_OK); /* nothing to find */
	assert_int_equal(fg_topo_gen(t), 1);
	struct fg_topo_view v;
	assert_int_equal(fg_topo_view(t, &v), FG_OK);
	assert_int_equal(v.nnodes, 1);
	assert_int_equal(v.gen, fg_topo_gen(t)); /* a copy is current */
	assert_null(v.slots);
	assert_int_equal(v.nodes[0].port, 6399);
	fg_topo_view_finish(&v);
	assert_int_equal(fg_topo_watch_fd(t), -1);
	fg_topo_destroy(t);
}

static void test_unreachable_sentinels_leave_no_master(void **state)
{
	(void)state;
	struct fg_redis_addr a;
	char err[128];
	/* port 1 on loopback: nothing listens, the refusal is immediate */
	assert_int_equal(fg_redis_addr_parse("redis-sentinel://127.0.0.1:1/m", &a,
					     err, sizeof(err)), 0);
	fg_topo *t = fg_topo_create(&a, 100, 100, NULL);
	assert_int_equal(fg_topo_refresh(t), FG_EUNAVAIL);
	struct fg_topo_view v;
	assert_int_equal(fg_topo_view(t, &v), FG_OK);
	assert_int_equal(v.nnodes, 0);
	fg_topo_view_finish(&v);
	fg_topo_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyslot_matches_redis),
		cmocka_unit_test(test_addr_forms),
		cmocka_unit_test(test_addr_refusals),
		cmocka_unit_test(test_slots_reply_makes_the_map),
		cmocka_unit_test(test_slots_reply_refused_when_malformed),
		cmocka_unit_test(test_direct_topology_is_complete_at_once),
		cmocka_unit_test(test_unreachable_sentinels_leave_no_master),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
