/*
 * tests/unit/base/test_flap.c - the rate limit of a dependency's down and
 * up lines (gateway/base/flap.c).
 *
 * Pins flap.h: the first look is said at once; a change is said at once
 * after a quiet time, else when the quiet time ends, with the changes
 * between counted; a flapping dependency costs one line per quiet time
 * and its last state is told; a long outage is said once as an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/flap.h"

#define Q FG_FLAP_QUIET_MS

static enum fg_flap_line note(struct fg_flap *f, bool up, uint64_t t,
			      struct fg_flap_say *say)
{
	struct fg_flap_say ignored;
	return fg_flap_note(f, up, t, say ? say : &ignored);
}

static void test_first_look_is_said(void **state)
{
	(void)state;
	struct fg_flap f;
	fg_flap_init(&f);
	assert_int_equal(note(&f, true, 1000, NULL), FG_FLAP_FIRST_UP);
	assert_int_equal(note(&f, true, 2000, NULL), FG_FLAP_NONE);
	fg_flap_init(&f);
	assert_int_equal(note(&f, false, 1000, NULL), FG_FLAP_DOWN);
	assert_int_equal(note(&f, false, 2000, NULL), FG_FLAP_NONE);
}

static void test_first_look_starts_no_quiet_time(void **state)
{
	(void)state;
	struct fg_flap f;
	struct fg_flap_say say;
	fg_flap_init(&f);
	note(&f, true, 1000, NULL);
	assert_int_equal(note(&f, false, 1100, &say), FG_FLAP_DOWN);
	assert_int_equal(say.hidden, 0);
	/* but the change said does */
	assert_int_equal(note(&f, true, 1200, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, true, 1100 + Q, &say), FG_FLAP_UP);
	assert_int_equal(say.down_ms, 100);
}

static void test_down_then_up_after_quiet_time(void **state)
{
	(void)state;
	struct fg_flap f;
	struct fg_flap_say say;
	fg_flap_init(&f);
	note(&f, true, 0, NULL);
	assert_int_equal(note(&f, false, Q, &say), FG_FLAP_DOWN);
	assert_int_equal(say.hidden, 0);
	/* back within the quiet time: said when it ends, with how long */
	assert_int_equal(note(&f, true, Q + 3000, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, true, 2 * Q - 1, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, true, 2 * Q, &say), FG_FLAP_UP);
	assert_int_equal(say.hidden, 0);
	assert_int_equal(say.down_ms, 3000);  /* the outage, not the wait */
	assert_int_equal(note(&f, true, 3 * Q, NULL), FG_FLAP_NONE);
}

static void test_flapping_costs_one_line_per_quiet_time(void **state)
{
	(void)state;
	struct fg_flap f;
	struct fg_flap_say say;
	unsigned lines = 0;
	fg_flap_init(&f);
	note(&f, true, 0, NULL);
	/* a change every 100 ms for 60 s */
	for (uint64_t t = Q; t < Q + 60000; t += 100) {
		enum fg_flap_line l = note(&f, (t / 100) % 2 == 0, t, &say);
		if (l != FG_FLAP_NONE)
			lines++;
	}
	assert_true(lines <= 60000 / Q + 1);
	assert_true(lines >= 60000 / Q - 1);
	/* it settles down: said within a quiet time, changes counted */
	uint64_t t = Q + 60000;
	enum fg_flap_line l = FG_FLAP_NONE;
	for (; t <= Q + 60000 + Q && l == FG_FLAP_NONE; t += 100)
		l = note(&f, false, t, &say);
	assert_int_equal(l, FG_FLAP_DOWN);
	assert_true(say.hidden > 0);
}

static void test_a_blip_unsaid_is_counted_later(void **state)
{
	(void)state;
	struct fg_flap f;
	struct fg_flap_say say;
	fg_flap_init(&f);
	note(&f, true, 0, NULL);
	assert_int_equal(note(&f, false, Q, NULL), FG_FLAP_DOWN);
	assert_int_equal(note(&f, true, Q + 100, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, false, Q + 200, NULL), FG_FLAP_NONE);
	/* down as said, but two changes came and went */
	assert_int_equal(note(&f, false, 2 * Q, &say), FG_FLAP_DOWN);
	assert_int_equal(say.hidden, 2);
	assert_int_equal(note(&f, false, 3 * Q - 1, NULL), FG_FLAP_NONE);
}

static void test_long_outage_said_once_as_error(void **state)
{
	(void)state;
	struct fg_flap f;
	struct fg_flap_say say;
	fg_flap_init(&f);
	note(&f, true, 0, NULL);
	assert_int_equal(note(&f, false, Q, NULL), FG_FLAP_DOWN);
	assert_int_equal(note(&f, false, Q + FG_FLAP_LONG_MS - 1, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, false, Q + FG_FLAP_LONG_MS, &say), FG_FLAP_STILL_DOWN);
	assert_int_equal(say.down_ms, FG_FLAP_LONG_MS);
	for (uint64_t t = Q + FG_FLAP_LONG_MS; t < 10 * FG_FLAP_LONG_MS; t += 500)
		assert_int_equal(note(&f, false, t, NULL), FG_FLAP_NONE);
	assert_int_equal(note(&f, true, 10 * FG_FLAP_LONG_MS, &say), FG_FLAP_UP);
	assert_int_equal(say.down_ms, 10 * FG_FLAP_LONG_MS - Q);
	/* a new outage has its own error line */
	assert_int_equal(note(&f, false, 11 * FG_FLAP_LONG_MS, NULL), FG_FLAP_DOWN);
	assert_int_equal(note(&f, false, 12 * FG_FLAP_LONG_MS, NULL), FG_FLAP_STILL_DOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_look_is_said),
		cmocka_unit_test(test_first_look_starts_no_quiet_time),
		cmocka_unit_test(test_down_then_up_after_quiet_time),
		cmocka_unit_test(test_flapping_costs_one_line_per_quiet_time),
		cmocka_unit_test(test_a_blip_unsaid_is_counted_later),
		cmocka_unit_test(test_long_outage_said_once_as_error),
	};

	return cmocka_run_group_tests_name("flap", tests, NULL, NULL);
}
