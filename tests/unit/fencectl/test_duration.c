/*
 * tests/unit/fencectl/test_duration.c - durations on fencectl's command
 * line (fencectl/duration.c).
 *
 * Pins duration.h: terms NUMBER UNIT (ms, s, m, h), or one plain number of
 * seconds; fractions exact to the millisecond; everything else refused with
 * a reason and the output left alone. And the short form fencectl prints.
 * cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "duration.h"

#define UNTOUCHED 4242u

static uint64_t ok(const char *s)
{
	char msg[128] = "";
	uint64_t v = UNTOUCHED;

	if (fg_duration_parse(s, &v, msg, sizeof(msg)) != 0)
		fail_msg("'%s' refused: %s", s, msg);
	return v;
}

static void refused(const char *s)
{
	char msg[128] = "";
	uint64_t v = UNTOUCHED;

	if (fg_duration_parse(s, &v, msg, sizeof(msg)) == 0)
		fail_msg("'%s' accepted as %llu ms", s, (unsigned long long)v);
	assert_int_equal(v, UNTOUCHED);
	assert_true(msg[0] != '\0');
}

static void test_units(void **state)
{
	(void)state;
	assert_int_equal(ok("500ms"), 500);
	assert_int_equal(ok("30s"), 30000);
	assert_int_equal(ok("2m"), 120000);
	assert_int_equal(ok("1h"), 3600000);
	assert_int_equal(ok("0ms"), 0);
	assert_int_equal(ok("0s"), 0);
}

static void test_plain_number_is_seconds(void **state)
{
	(void)state;
	assert_int_equal(ok("0"), 0);
	assert_int_equal(ok("5"), 5000);
	assert_int_equal(ok("1.5"), 1500);
	assert_int_equal(ok("0.001"), 1);
}

static void test_compound_and_fractions(void **state)
{
	(void)state;
	assert_int_equal(ok("1m30s"), 90000);
	assert_int_equal(ok("1h2m3s4ms"), 3723004);
	assert_int_equal(ok("1.5s"), 1500);
	assert_int_equal(ok("0.25m"), 15000);
	assert_int_equal(ok(".5s"), 500);
	assert_int_equal(ok("2.5h"), 9000000);
	assert_int_equal(ok("007s"), 7000);
}

static void test_garbage_is_refused(void **state)
{
	(void)state;
	const char *bad[] = {
		"", "s", "ms", "abc", "-1s", "+1s", " 1s", "1s ", "1 s",
		"1x", "1min", "1sec", "1S", "1e3", "1e3ms", "1.", "1.s", ".",
		"1m30", "1s2", "1..5s", "0x10", "1,5s", "1ms5", "5mss",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i]);
}

static void test_below_a_millisecond_is_refused(void **state)
{
	(void)state;
	refused("1.5ms");
	refused("0.0001s");
	refused("0.0001");
	refused("1.0000000001s");
}

static void test_overflow_is_refused(void **state)
{
	(void)state;
	assert_int_equal(ok("9007199254740991ms"), FG_DURATION_MAX_MS);
	refused("9007199254740992ms");
	refused("99999999999999999999999s");
	assert_int_equal(ok("9007199254740s"), 9007199254740000u);
	refused("9007199254741s");
	refused("9007199254740991ms1ms");
	refused("5000000000000h");
}

static void test_format(void **state)
{
	(void)state;
	char b[32];

	assert_string_equal(fg_duration_format(0, b, sizeof(b)), "0ms");
	assert_string_equal(fg_duration_format(250, b, sizeof(b)), "250ms");
	assert_string_equal(fg_duration_format(1000, b, sizeof(b)), "1s");
	assert_string_equal(fg_duration_format(1500, b, sizeof(b)), "1.5s");
	assert_string_equal(fg_duration_format(1005, b, sizeof(b)), "1.005s");
	assert_string_equal(fg_duration_format(90000, b, sizeof(b)), "1m30s");
	assert_string_equal(fg_duration_format(3600000, b, sizeof(b)), "1h");
	assert_string_equal(fg_duration_format(3723000, b, sizeof(b)),
			    "1h2m3s");
}

static void test_format_reads_back(void **state)
{
	(void)state;
	const uint64_t v[] = { 0, 1, 999, 1000, 1001, 59999, 60000, 61500,
			       3599999, 3600000, 86400000, 123456789 };
	char b[32];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(ok(fg_duration_format(v[i], b, sizeof(b))),
				 v[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_plain_number_is_seconds),
		cmocka_unit_test(test_compound_and_fractions),
		cmocka_unit_test(test_garbage_is_refused),
		cmocka_unit_test(test_below_a_millisecond_is_refused),
		cmocka_unit_test(test_overflow_is_refused),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_reads_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
