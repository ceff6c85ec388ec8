/*
 * tests/unit/lockcore/test_calls.c - script calls as sent
 * (lockcore/calls.c).
 *
 * Pins fg__call_format() to hiredis' own formatting: a call written by
 * hand must be the very bytes redisFormatCommandArgv() makes of the same
 * arguments, empty ones, binary ones, a long value and the largest
 * numbers included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "fencegate/topo.h"
#include "../../../lockcore/lockcore-private.h"

/* The call formatted both ways, compared byte for byte; also checks
 * that a buffer one byte short asks for enough. */
static void same_as_hiredis(const struct fg__call *c)
{
	char *want = NULL;
	int wlen = redisFormatCommandArgv(&want, c->argc,
					  (const char **)c->argv, c->argvlen);
	assert_true(wlen > 0);

	size_t need = fg__call_format(c, NULL, 0);
	assert_true(need >= (size_t)wlen);
	char *buf = malloc(need);
	assert_non_null(buf);
	size_t len = fg__call_format(c, buf, need);
	assert_int_equal(len, (size_t)wlen);
	assert_memory_equal(buf, want, len);
	/* a buffer short of it is not written to past its end: the size
	 * asked for comes back instead */
	assert_true(fg__call_format(c, buf, len - 1) > len - 1);
	free(buf);
	redisFreeCommand(want);
}

static void test_acquire_call(void **state)
{
	(void)state;
	static char value[FG_VALUE_MAX];
	memset(value, 'v', sizeof(value));
	value[7] = '\0'; /* binary safe */
	struct fg_acquire q = {
		.name = "a/b.c~d-e_f",
		.lease = "AAAAAAAAAAAAAAAAAAAAAA",
		.mode = FG_MODE_SHARED,
		.ttl_ms = 30000,
		.lock_delay_ms = 0,
		.wait_ms = 300000,
		.waiter_id = "w1",
		.gateway_id = "g",
		.liveness_ms = 4294967295u,
		.max_waiters = 1,
		.value = value,
		.value_len = sizeof(value),
		.principal = "ops@example",
	};
	struct fg__call c;
	fg__build_acquire(&c, &q, NULL, 0, false, NULL);
	same_as_hiredis(&c);
	fg__build_acquire(&c, &q, NULL, 86400000, true, NULL);
	same_as_hiredis(&c);
	q.value = NULL;
	q.value_len = 0;
	q.principal = NULL;
	fg__build_acquire(&c, &q, NULL, 1, true, NULL);
	same_as_hiredis(&c);
}

/* An argument of the call, as a string (argv is not NUL-terminated). */
static void assert_arg(const struct fg__call *c, int i, const char *want)
{
	assert_true(i < c->argc);
	assert_int_equal(c->argvlen[i], strlen(want));
	assert_memory_equal(c->argv[i], want, strlen(want));
}

/* acquire.lua's layout: lease, mode, ttl, client, then the letters of
 * the optional arguments that follow and only those, in the order
 * d w r v o p. */
static void test_acquire_carries_only_the_optional_arguments_given(void **state)
{
	(void)state;
	struct fg_acquire q = {
		.name = "n", .lease = "L", .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 30000, .client = "127.0.0.1:5",
		.waiter_id = "g-w1", .gateway_id = "g",
		.liveness_ms = 30000, .max_waiters = 100,
	};
	struct fg__call c;
	/* FCALL fn numkeys, four keys and the index's, idle, name */
	const int head = 3 + 4 + 1 + 2;
	fg__build_acquire(&c, &q, NULL, 600000, true, NULL);
	assert_arg(&c, 2, "5");
	assert_int_equal(c.argc, head + 5);
	assert_arg(&c, head, "L");
	assert_arg(&c, head + 1, "x");
	assert_arg(&c, head + 2, "30000");
	assert_arg(&c, head + 3, "127.0.0.1:5");
	assert_arg(&c, head + 4, "");
	same_as_hiredis(&c);

	q.lock_delay_ms = 1500;
	q.wait_ms = 2000;
	q.reenter = "R";
	q.value = "val";
	q.value_len = 3;
	q.owner = "own";
	q.owner_len = 3;
	q.principal = "pr";
	fg__build_acquire(&c, &q, NULL, 600000, false, NULL);
	assert_arg(&c, 2, "4");
	const char *rest[] = { "dwrvop", "1500", "2000", "g-w1", "g", "30000",
			       "100", "R", "val", "own", "pr" };
	const int at = head - 1 + 4;
	assert_int_equal(c.argc, at + (int)(sizeof(rest) / sizeof(rest[0])));
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
		assert_arg(&c, at + (int)i, rest[i]);
	same_as_hiredis(&c);

	/* an empty re-entry lease is none */
	q.lock_delay_ms = 0;
	q.reenter = "";
	q.value = NULL;
	q.owner = NULL;
	fg__build_acquire(&c, &q, NULL, 600000, false, NULL);
	assert_arg(&c, at, "wp");
	assert_int_equal(c.argc, at + 1 + 5 + 1);
	assert_arg(&c, c.argc - 1, "pr");
}

static void test_numbers_and_empties(void **state)
{
	(void)state;
	struct fg__call c;
	fg__call_init(&c, FG__LUA_CHECK, "n", 0);
	fg__call_num(&c, 0);
	fg__call_num(&c, 9);
	fg__call_num(&c, 10);
	fg__call_num(&c, UINT64_MAX);
	fg__call_str(&c, "", 0);
	same_as_hiredis(&c);
	fg__build_release(&c, "x", "lease", NULL, 250, 0, false, NULL);
	same_as_hiredis(&c);
}

/* A call that records events: the stream after the lock's keys and the
 * index's (the one stream on one Redis, the lock's slot's on a Cluster),
 * "<retain> <gateway id>" after every other argument, the undo id's
 * included; a call without them is as it was. */
static void test_events_key_and_argument(void **state)
{
	(void)state;
	struct fg_acquire q = {
		.name = "a/b", .lease = "L", .reenter = "R",
		.mode = FG_MODE_EXCLUSIVE, .ttl_ms = 30000, .client = "c",
	};
	struct fg__ev ev = { .cluster = false, .retain = 500,
			     .gateway_id = "0123456789abcdef" };
	struct fg__call c;
	fg__build_acquire(&c, &q, "U", 600000, true, &ev);
	assert_arg(&c, 2, "6");
	assert_arg(&c, 7, "fg:{!index}:n");
	assert_arg(&c, 8, FG__EV_ONE);
	assert_arg(&c, 10, "a/b");
	assert_arg(&c, c.argc - 2, "U");
	assert_arg(&c, c.argc - 1, "500 0123456789abcdef");
	same_as_hiredis(&c);

	/* a Cluster: no index, the slot's stream, in the lock's own slot */
	ev.cluster = true;
	ev.retain = 0; /* none set: the contract's default */
	ev.gateway_id = NULL;
	fg__build_release(&c, "a/b", "L", NULL, 250, 600000, false, &ev);
	assert_arg(&c, 2, "5");
	char want[FG__EV_KEY_MAX];
	size_t n = fg__ev_key("a/b", true, want, sizeof(want));
	assert_true(n > 0);
	assert_arg(&c, 7, want);
	assert_int_equal(fg_keyslot(c.argv[7], c.argvlen[7]),
			 fg_keyslot(c.argv[3], c.argvlen[3]));
	assert_arg(&c, 9, "a/b");
	assert_arg(&c, c.argc - 1, "100000 ");
	same_as_hiredis(&c);

	/* a give-back's reason before the events' argument; none without */
	fg__build_giveback(&c, "a/b", "L", "", NULL, false, 60000, "timeout",
			   0, &ev);
	assert_arg(&c, c.argc - 2, "timeout");
	fg__build_giveback(&c, "a/b", "L", "", NULL, false, 60000, "timeout",
			   0, NULL);
	assert_arg(&c, 2, "4");
	assert_arg(&c, c.argc - 1, "60000");

	/* the events' stream also for a tick, a dequeue and a break */
	fg__build_tick(&c, "a/b", "g", 1000, 0, 0, &ev);
	assert_arg(&c, 2, "5");
	fg__build_dequeue(&c, "a/b", "w", "L", 0, 0, &ev);
	assert_arg(&c, 2, "5");
	fg__build_break(&c, "a/b", 7, 250, "root", 0, &ev);
	assert_arg(&c, c.argc - 2, "root");
	fg__build_break(&c, "a/b", 7, 250, "root", 0, NULL);
	assert_arg(&c, 2, "4");
	assert_arg(&c, c.argc - 1, "250"); /* who broke it: only for events */
}

/* The gateway's append: XADD with MAXLEN ~ and only the fields given. */
static void test_event_append(void **state)
{
	(void)state;
	struct fg__call c;
	struct fg_event_rec e = { .kind = "expired", .lock = "a", .owner = "",
				  .token = 5, .has_token = true };
	assert_int_equal(fg__build_event(&c, "k", 1, 7, "gw", &e), 0);
	const char *want[] = { "XADD", "k", "MAXLEN", "~", "7", "*", "k",
			       "expired", "l", "a", "t", "5", "g", "gw" };
	assert_int_equal(c.argc, (int)(sizeof(want) / sizeof(want[0])));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_arg(&c, (int)i, want[i]);
	same_as_hiredis(&c);
	e.kind = NULL;
	assert_int_equal(fg__build_event(&c, "k", 1, 7, "gw", &e), FG_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_acquire_call),
		cmocka_unit_test(test_acquire_carries_only_the_optional_arguments_given),
		cmocka_unit_test(test_numbers_and_empties),
		cmocka_unit_test(test_events_key_and_argument),
		cmocka_unit_test(test_event_append),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
