/*
 * tests/unit/base/test_procstat.c - the process_* figures' parsers
 * (gateway/base/procstat.c): /proc/self/stat with a command name that
 * holds ") " and spaces, /proc/stat's btime, /proc/self/limits' soft
 * limit; and one reading of this process's own /proc.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/procstat.h"

static void test_stat_fields(void **state)
{
	(void)state;
	/* fields 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss */
	const char *text = "4242 (fence gate) x (y) S 1 4242 4242 0 -1 4194560 "
			   "100 0 0 0 1234 567 0 0 20 0 5 0 98765 123456789 "
			   "4321 18446744073709551615 1 1 0 0 0 0 0 0 0\n";
	uint64_t ut, st, start, vsize;
	int64_t rss;
	assert_int_equal(fg_procstat_parse_stat(text, &ut, &st, &start, &vsize, &rss), 0);
	assert_int_equal(ut, 1234);
	assert_int_equal(st, 567);
	assert_int_equal(start, 98765);
	assert_int_equal(vsize, 123456789);
	assert_int_equal(rss, 4321);
}

static void test_stat_refuses_what_is_not_one(void **state)
{
	(void)state;
	uint64_t a, b, c, d;
	int64_t e;
	assert_int_equal(fg_procstat_parse_stat("", &a, &b, &c, &d, &e), -1);
	assert_int_equal(fg_procstat_parse_stat("1 (x", &a, &b, &c, &d, &e), -1);
	assert_int_equal(fg_procstat_parse_stat("1 (x) S 1 2 3\n", &a, &b, &c, &d, &e), -1);
}

static void test_btime(void **state)
{
	(void)state;
	uint64_t bt = 0;
	assert_int_equal(fg_procstat_parse_btime("cpu  1 2 3\nintr 5 6\nbtime 1700000000\n"
						 "processes 9\n", &bt), 0);
	assert_int_equal(bt, 1700000000u);
	assert_int_equal(fg_procstat_parse_btime("cpu 1\nprocesses 9\n", &bt), -1);
}

static void test_max_fds(void **state)
{
	(void)state;
	const char *limits =
		"Limit                     Soft Limit           Hard Limit           Units     \n"
		"Max processes             63432                63432                processes \n"
		"Max open files            1024                 524288               files     \n";
	assert_int_equal(fg_procstat_parse_max_fds(limits), 1024);
	assert_int_equal(fg_procstat_parse_max_fds(
		"Max open files            unlimited            unlimited            files\n"), -1);
	assert_int_equal(fg_procstat_parse_max_fds("Max processes 5 5\n"), -1);
}

static void test_own_proc(void **state)
{
	(void)state;
	struct fg_procstat ps = { .open_fds = -1, .max_fds = -1 };
	assert_int_equal(fg_procstat_read(&ps), 0);
	assert_true(ps.resident_bytes > 0);
	assert_true(ps.virtual_bytes >= ps.resident_bytes);
	assert_true(ps.open_fds >= 3);       /* stdin, stdout, stderr */
	assert_true(ps.max_fds >= ps.open_fds);
	assert_true(ps.start_time > 1.5e9);  /* after 2017 */
	assert_true(ps.cpu_seconds >= 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stat_fields),
		cmocka_unit_test(test_stat_refuses_what_is_not_one),
		cmocka_unit_test(test_btime),
		cmocka_unit_test(test_max_fds),
		cmocka_unit_test(test_own_proc),
	};

	return cmocka_run_group_tests_name("procstat", tests, NULL, NULL);
}
