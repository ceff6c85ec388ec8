/*
 * tests/unit/base/test_evring.c - the ring of the newest events
 * (gateway/base/evring.h): numbered in arrival order, the oldest pushed
 * out (and freed: ASan sees a leak otherwise) when full; what it covers
 * (every event after its base) and where a reader after a cursor goes on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/evring.h"

static struct fg_evitem *item(uint64_t ms, uint64_t seq)
{
	struct fg_event e = { .at_ms = ms, .kind = "granted", .lock = "l",
			      .principal = "", .owner = "", .client = "",
			      .gateway = "", .detail = "" };
	snprintf(e.id, sizeof(e.id), "%llu-%llu", (unsigned long long)ms,
		 (unsigned long long)seq);
	struct fg_evitem *it = fg_evitem_make(&e);
	assert_non_null(it);
	return it;
}

static struct fg_ev_cursor cur(uint64_t ms, uint64_t seq)
{
	return (struct fg_ev_cursor){ .ms = ms, .seq = seq, .set = true };
}

static void test_numbered_in_order_and_bounded(void **state)
{
	(void)state;
	struct fg_evring r;
	assert_int_equal(fg_evring_init(&r, 4), 0);
	assert_null(fg_evring_get(&r, 1));
	for (uint64_t i = 1; i <= 10; i++)
		fg_evring_push(&r, item(100 + i, 0));
	assert_int_equal(r.first, 7);
	assert_int_equal(r.next, 11);
	assert_null(fg_evring_get(&r, 6));
	assert_null(fg_evring_get(&r, 11));
	for (uint64_t n = 7; n <= 10; n++)
		assert_int_equal(fg_evring_get(&r, n)->cur.ms, 100 + n);
	fg_evring_finish(&r);
}

static void test_what_it_covers(void **state)
{
	(void)state;
	struct fg_evring r;
	assert_int_equal(fg_evring_init(&r, 3), 0);
	struct fg_ev_cursor c5 = cur(5, 0), none = { 0 };
	assert_false(fg_evring_covers(&r, &c5)); /* nothing known yet */
	/* the follower started after 5-0 */
	fg_evring_start(&r, &c5);
	assert_true(fg_evring_covers(&r, &c5));
	struct fg_ev_cursor c4 = cur(4, 9);
	assert_false(fg_evring_covers(&r, &c4));
	assert_false(fg_evring_covers(&r, &none)); /* from the oldest: history */
	fg_evring_push(&r, item(6, 0));
	fg_evring_push(&r, item(7, 0));
	fg_evring_push(&r, item(8, 0));
	assert_true(fg_evring_covers(&r, &c5));
	fg_evring_push(&r, item(9, 0)); /* 6-0 goes */
	assert_false(fg_evring_covers(&r, &c5));
	struct fg_ev_cursor c6 = cur(6, 0), c7 = cur(7, 0);
	assert_true(fg_evring_covers(&r, &c6));
	assert_true(fg_evring_covers(&r, &c7));
	/* a start after events came says nothing more */
	fg_evring_start(&r, &c4);
	assert_true(fg_evring_covers(&r, &c6));
	fg_evring_finish(&r);
}

static void test_without_a_start_the_first_event_is_the_base(void **state)
{
	(void)state;
	struct fg_evring r;
	assert_int_equal(fg_evring_init(&r, 8), 0);
	fg_evring_push(&r, item(10, 0));
	struct fg_ev_cursor c9 = cur(9, 0), c10 = cur(10, 0);
	assert_false(fg_evring_covers(&r, &c9));
	assert_true(fg_evring_covers(&r, &c10));
	fg_evring_finish(&r);
}

static void test_seek(void **state)
{
	(void)state;
	struct fg_evring r;
	assert_int_equal(fg_evring_init(&r, 8), 0);
	struct fg_ev_cursor c = cur(1, 0);
	assert_int_equal(fg_evring_seek(&r, &c), 1);
	fg_evring_push(&r, item(10, 0));
	fg_evring_push(&r, item(10, 1));
	fg_evring_push(&r, item(12, 0));
	c = cur(10, 0);
	assert_int_equal(fg_evring_seek(&r, &c), 2);
	c = cur(9, 0);
	assert_int_equal(fg_evring_seek(&r, &c), 1);
	c = cur(12, 0);
	assert_int_equal(fg_evring_seek(&r, &c), 4);
	c = cur(11, 5);
	assert_int_equal(fg_evring_seek(&r, &c), 3);
	fg_evring_finish(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbered_in_order_and_bounded),
		cmocka_unit_test(test_what_it_covers),
		cmocka_unit_test(test_without_a_start_the_first_event_is_the_base),
		cmocka_unit_test(test_seek),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
