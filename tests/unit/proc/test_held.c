/*
 * tests/unit/proc/test_held.c - the grants made through this gateway
 * (gateway/proc/held.c).
 *
 * Pins held.h: a new holder moves the locks-held gauge up, a re-entry
 * does not, a release to zero holds or a break moves it down; a grant is
 * asked about only once its lease ended; one found gone is counted as
 * expired once, with each of its holders, and leaves; one still live is
 * kept; a round ends at Redis' first failure. held.c is compiled alone
 * with stand-ins for the metrics and for fg_lock_check(), which answer
 * what the test says and note what they were handed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "proc/held.h"
#include "proc/metrics.h"

/* ---- stand-ins ------------------------------------------------------ */

static long gauge;
static unsigned expired, checks;
static int check_err;
static enum fg_check_status check_says;

void fg_metrics_gauge_add(enum fg_gauge g, int delta)
{
	if (g == FG_GAUGE_HELD)
		gauge += delta;
}

void fg_metrics_lock_expired(unsigned n)
{
	expired += n;
}

int fg_lock_check(fg_store *st, const char *name, uint64_t token,
		  struct fg_check *out)
{
	(void)st;
	(void)name;
	(void)token;
	checks++;
	memset(out, 0, sizeof(*out));
	out->status = check_says;
	return check_err;
}

static int reset(void **state)
{
	(void)state;
	fg_held_finish();
	gauge = 0;
	expired = checks = 0;
	check_err = 0;
	check_says = FG_CHECK_EXPIRED;
	return 0;
}

/* Lets a lease's end pass: the table reads the monotonic clock. */
static void pass_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- tests ---------------------------------------------------------- */

static void test_holders_move_the_gauge(void **state)
{
	(void)state;
	fg_held_granted("a", 7, true, 60000);
	assert_int_equal(gauge, 1);
	fg_held_granted("a", 7, false, 60000);   /* re-entry */
	assert_int_equal(gauge, 1);
	fg_held_granted("b", 3, true, 60000);
	fg_held_granted("b", 3, true, 60000);    /* a shared join */
	assert_int_equal(gauge, 3);
	fg_held_left("b", 3);
	assert_int_equal(gauge, 2);
	fg_held_ended("a", 7);                   /* a break */
	assert_int_equal(gauge, 1);
	fg_held_left("b", 3);
	assert_int_equal(gauge, 0);
	fg_held_left("b", 3);                    /* unknown: nothing */
	fg_held_ended("zz", 1);
	assert_int_equal(gauge, 0);
}

static void test_a_grant_not_due_is_not_asked_about(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 60000);
	fg_held_check_due(NULL);
	assert_int_equal(checks, 0);
	assert_int_equal(gauge, 1);
}

static void test_expired_at_its_end_is_counted_once(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 100);
	fg_held_granted("a", 1, true, 100);    /* two shared holders */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 2);
	assert_int_equal(gauge, 0);
	fg_held_check_due(NULL);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 2);
}

static void test_still_live_is_kept_and_a_renewal_moves_the_end(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 100);
	fg_held_renewed("a", 1, 60000);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL);
	assert_int_equal(checks, 0);

	fg_held_granted("b", 2, true, 100);
	check_says = FG_CHECK_VALID;           /* renewed elsewhere */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 2);
	fg_held_check_due(NULL);               /* asked again a ttl later */
	assert_int_equal(checks, 1);
}

static void test_a_failure_ends_the_round_and_nothing_is_counted(void **state)
{
	(void)state;
	for (uint64_t t = 1; t <= 5; t++)
		fg_held_granted("a", t, true, 100);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	check_err = -1;
	fg_held_check_due(NULL);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 5);
}

static void test_forged_leaves_without_an_expiry(void **state)
{
	(void)state;
	fg_held_granted("a", 9, true, 100);
	check_says = FG_CHECK_FORGED;          /* Redis lost the lock */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_holders_move_the_gauge, reset),
		cmocka_unit_test_setup(test_a_grant_not_due_is_not_asked_about, reset),
		cmocka_unit_test_setup(test_expired_at_its_end_is_counted_once, reset),
		cmocka_unit_test_setup(test_still_live_is_kept_and_a_renewal_moves_the_end, reset),
		cmocka_unit_test_setup(test_a_failure_ends_the_round_and_nothing_is_counted, reset),
		cmocka_unit_test_setup(test_forged_leaves_without_an_expiry, reset),
	};

	return cmocka_run_group_tests_name("held", tests, NULL, NULL);
}
