/*
 * tests/unit/base/test_evquery.c - the events' query read strictly
 * (gateway/base/evquery.h): defaults, each parameter's bounds, the id
 * shapes `after` takes, an unknown or repeated parameter refused, and
 * Last-Event-ID standing for `after`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/evquery.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int parse(const struct fg_evq_arg *a, size_t n, const char *lei,
		 struct fg_evq *q, char *msg)
{
	return fg_evq_parse(a, n, lei, q, msg, 256);
}

static void test_defaults(void **state)
{
	(void)state;
	struct fg_evq q;
	char msg[256];
	assert_int_equal(parse(NULL, 0, NULL, &q, msg), 0);
	assert_string_equal(q.prefix, "");
	assert_int_equal(q.prefix_len, 0);
	assert_false(q.after.set);
	assert_int_equal(q.wait_ms, 0);
	assert_int_equal(q.limit, FG_EV_LIMIT_DEFAULT);
}

static void test_every_parameter(void **state)
{
	(void)state;
	struct fg_evq q;
	char msg[256];
	const struct fg_evq_arg a[] = { { "prefix", "a/b-" }, { "after", "17-3" },
					{ "wait_ms", "60000" }, { "limit", "1000" } };
	assert_int_equal(parse(a, N(a), NULL, &q, msg), 0);
	assert_string_equal(q.prefix, "a/b-");
	assert_int_equal(q.prefix_len, 4);
	assert_true(q.after.set);
	assert_int_equal(q.after.ms, 17);
	assert_int_equal(q.after.seq, 3);
	assert_false(q.after.cluster);
	assert_int_equal(q.wait_ms, 60000);
	assert_int_equal(q.limit, 1000);

	const struct fg_evq_arg c[] = { { "after", "17-3.16383" }, { "limit", "1" },
					{ "wait_ms", "0" }, { "prefix", NULL } };
	assert_int_equal(parse(c, N(c), NULL, &q, msg), 0);
	assert_true(q.after.cluster);
	assert_int_equal(q.after.slot, 16383);
	assert_int_equal(q.limit, 1);
	assert_string_equal(q.prefix, "");
}

static void refused(const struct fg_evq_arg *a, size_t n, const char *lei,
		    const char *says)
{
	struct fg_evq q;
	char msg[256] = "";
	assert_int_equal(parse(a, n, lei, &q, msg), -1);
	if (!strstr(msg, says))
		fail_msg("message \"%s\" does not say \"%s\"", msg, says);
}

static void test_bounds_and_shapes(void **state)
{
	(void)state;
	const char *limits[] = { "0", "1001", "-1", "", "1e3", " 5", "5 ", "abc" };
	for (size_t i = 0; i < N(limits); i++) {
		struct fg_evq_arg a[] = { { "limit", limits[i] } };
		refused(a, 1, NULL, "limit");
	}
	struct fg_evq_arg nolimit[] = { { "limit", NULL } };
	refused(nolimit, 1, NULL, "limit");
	const char *waits[] = { "60001", "-1", "", "1.5", "999999999999999999999" };
	for (size_t i = 0; i < N(waits); i++) {
		struct fg_evq_arg a[] = { { "wait_ms", waits[i] } };
		refused(a, 1, NULL, "wait_ms");
	}
	const char *afters[] = { "", "5", "5-", "-5", "a-1", "1-1.16384",
				 "1234567890123456-1", "1-12345678901234567890",
				 "1-1.", "1-1.123456", "1-1 ", "1--1" };
	for (size_t i = 0; i < N(afters); i++) {
		struct fg_evq_arg a[] = { { "after", afters[i] } };
		refused(a, 1, NULL, "after");
	}
	struct fg_evq_arg noafter[] = { { "after", NULL } };
	refused(noafter, 1, NULL, "after");
	const char *prefixes[] = { "a b", "a?", "{x}", "a\\b", "\xc3\xa9" };
	for (size_t i = 0; i < N(prefixes); i++) {
		struct fg_evq_arg a[] = { { "prefix", prefixes[i] } };
		refused(a, 1, NULL, "prefix");
	}
	char longp[300];
	memset(longp, 'a', 256);
	longp[256] = '\0';
	struct fg_evq_arg lp[] = { { "prefix", longp } };
	refused(lp, 1, NULL, "prefix");
}

static void test_unknown_and_repeated(void **state)
{
	(void)state;
	struct fg_evq_arg u[] = { { "prefix", "a" }, { "cursor", "x" } };
	refused(u, N(u), NULL, "unknown parameter 'cursor'");
	struct fg_evq_arg cs[] = { { "Limit", "5" } };
	refused(cs, N(cs), NULL, "unknown parameter 'Limit'");
	const char *names[] = { "prefix", "after", "wait_ms", "limit" };
	const char *vals[] = { "a", "1-1", "5", "5" };
	for (size_t i = 0; i < 4; i++) {
		struct fg_evq_arg r[] = { { names[i], vals[i] }, { names[i], vals[i] } };
		refused(r, N(r), NULL, "more than once");
	}
}

static void test_last_event_id_stands_for_after(void **state)
{
	(void)state;
	struct fg_evq q;
	char msg[256];
	struct fg_evq_arg a[] = { { "after", "5-5" } };
	assert_int_equal(parse(a, 1, "9-2", &q, msg), 0);
	assert_int_equal(q.after.ms, 9);
	assert_int_equal(q.after.seq, 2);
	assert_int_equal(parse(NULL, 0, "9-2.7", &q, msg), 0);
	assert_true(q.after.set);
	assert_int_equal(q.after.slot, 7);
	refused(NULL, 0, "garbage", "Last-Event-ID");
	/* a bad after is refused even when Last-Event-ID stands for it */
	struct fg_evq_arg bad[] = { { "after", "garbage" } };
	refused(bad, 1, "9-2", "after must be");
	struct fg_evq_arg empty[] = { { "after", NULL } };
	refused(empty, 1, "9-2", "after must be");
	/* and a good after does not cover a bad Last-Event-ID */
	refused(a, 1, "garbage", "Last-Event-ID");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_parameter),
		cmocka_unit_test(test_bounds_and_shapes),
		cmocka_unit_test(test_unknown_and_repeated),
		cmocka_unit_test(test_last_event_id_stands_for_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
