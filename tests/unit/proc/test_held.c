/*
 * tests/unit/proc/test_held.c - the grants made through this gateway
 * (gateway/proc/held.c).
 *
 * Pins held.h: a new holder moves the locks-held gauge up, a re-entry
 * does not, a release to zero holds or a break moves it down; a grant is
 * asked about only once its lease ended; one found gone is counted as
 * expired once, with each of its holders, and leaves; one still live is
 * kept; a round ends at Redis' first failure; with events, a grant found
 * gone is one `expired` event with its token and its first holder's who
 * (bounded), none for one live or forged, and an append Redis refused is
 * counted dropped. held.c is compiled alone
 * with stand-ins for the metrics and for fg_lock_check(), which answer
 * what the test says and note what they were handed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* the appends of expired events: what the last was handed */
static unsigned appends, dropped;
static int append_err;
static struct {
	char kind[16], lock[64], principal[80], owner[300], client[64];
	uint64_t token;
	bool has_token;
} last;

int fg_events_add(fg_store *st, const struct fg_event_rec *e)
{
	(void)st;
	appends++;
	snprintf(last.kind, sizeof(last.kind), "%s", e->kind ? e->kind : "");
	snprintf(last.lock, sizeof(last.lock), "%s", e->lock ? e->lock : "");
	snprintf(last.principal, sizeof(last.principal), "%s", e->principal ? e->principal : "");
	snprintf(last.owner, sizeof(last.owner), "%s", e->owner ? e->owner : "");
	snprintf(last.client, sizeof(last.client), "%s", e->client ? e->client : "");
	last.token = e->token;
	last.has_token = e->has_token;
	return append_err;
}

void fg_metrics_events_dropped(uint64_t n)
{
	dropped += (unsigned)n;
}

static int reset(void **state)
{
	(void)state;
	fg_held_finish();
	appends = dropped = 0;
	append_err = 0;
	memset(&last, 0, sizeof(last));
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
	fg_held_granted("a", 7, true, 60000, NULL);
	assert_int_equal(gauge, 1);
	fg_held_granted("a", 7, false, 60000, NULL);   /* re-entry */
	assert_int_equal(gauge, 1);
	fg_held_granted("b", 3, true, 60000, NULL);
	fg_held_granted("b", 3, true, 60000, NULL);    /* a shared join */
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
	fg_held_granted("a", 1, true, 60000, NULL);
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 0);
	assert_int_equal(gauge, 1);
}

static void test_expired_at_its_end_is_counted_once(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 100, NULL);
	fg_held_granted("a", 1, true, 100, NULL);    /* two shared holders */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 2);
	assert_int_equal(gauge, 0);
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 2);
}

static void test_still_live_is_kept_and_a_renewal_moves_the_end(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 100, NULL);
	fg_held_renewed("a", 1, 60000);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 0);

	fg_held_granted("b", 2, true, 100, NULL);
	check_says = FG_CHECK_VALID;           /* renewed elsewhere */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 2);
	fg_held_check_due(NULL, false);               /* asked again a ttl later */
	assert_int_equal(checks, 1);
}

static void test_a_failure_ends_the_round_and_nothing_is_counted(void **state)
{
	(void)state;
	for (uint64_t t = 1; t <= 5; t++)
		fg_held_granted("a", t, true, 100, NULL);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	check_err = -1;
	fg_held_check_due(NULL, false);
	assert_int_equal(checks, 1);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 5);
}

static void test_forged_leaves_without_an_expiry(void **state)
{
	(void)state;
	fg_held_granted("a", 9, true, 100, NULL);
	check_says = FG_CHECK_FORGED;          /* Redis lost the lock */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, false);
	assert_int_equal(expired, 0);
	assert_int_equal(gauge, 0);
}

static void test_expired_is_recorded_with_its_first_holder(void **state)
{
	(void)state;
	struct fg_held_who w = { "alice", "job 7", "10.0.0.5" };
	struct fg_held_who w2 = { "bob", NULL, "10.0.0.6" };
	fg_held_granted("docs", 12, true, 100, &w);
	fg_held_granted("docs", 12, true, 100, &w2); /* a shared join */
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, true);
	assert_int_equal(expired, 2);
	assert_int_equal(appends, 1);   /* one event for the grant */
	assert_string_equal(last.kind, "expired");
	assert_string_equal(last.lock, "docs");
	assert_true(last.has_token);
	assert_int_equal(last.token, 12);
	assert_string_equal(last.principal, "alice");
	assert_string_equal(last.owner, "job 7");
	assert_string_equal(last.client, "10.0.0.5");
	assert_int_equal(dropped, 0);
}

static void test_no_event_without_events_or_for_live_or_forged(void **state)
{
	(void)state;
	fg_held_granted("a", 1, true, 100, NULL);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, false);        /* events = no */
	assert_int_equal(expired, 1);
	assert_int_equal(appends, 0);
	fg_held_granted("b", 2, true, 100, NULL);
	check_says = FG_CHECK_VALID;
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, true);         /* still live */
	assert_int_equal(appends, 0);
	fg_held_granted("c", 3, true, 100, NULL);
	fg_held_ended("b", 2);
	check_says = FG_CHECK_FORGED;
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	fg_held_check_due(NULL, true);         /* Redis lost it */
	assert_int_equal(appends, 0);
}

static void test_an_append_refused_is_dropped_and_counted(void **state)
{
	(void)state;
	/* who unknown (NULL) and a principal over its size: both bounded */
	char longp[200];
	memset(longp, 'p', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	struct fg_held_who w = { longp, NULL, NULL };
	fg_held_granted("a", 5, true, 100, &w);
	pass_ms(100 + FG_HELD_GRACE_MS + 20);
	append_err = -1;
	fg_held_check_due(NULL, true);
	assert_int_equal(appends, 1);
	assert_int_equal(dropped, 1);
	assert_int_equal(strlen(last.principal), FG_PRINCIPAL_MAX);
	assert_string_equal(last.owner, "");
	assert_string_equal(last.client, "");
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
		cmocka_unit_test_setup(test_expired_is_recorded_with_its_first_holder, reset),
		cmocka_unit_test_setup(test_no_event_without_events_or_for_live_or_forged, reset),
		cmocka_unit_test_setup(test_an_append_refused_is_dropped_and_counted, reset),
	};

	return cmocka_run_group_tests_name("held", tests, NULL, NULL);
}
