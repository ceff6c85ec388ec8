/*
 * tests/unit/rt/test_evrec.c - a loop's event recorder (gateway/rt/
 * evrec.c) on a real libevent base.
 *
 * Pins evrec.h: nothing is sent while the turn runs; a turn's events are
 * sent when it ends, in order; the first refusal of a second goes out at
 * the end of its turn, the rest of that second as one event with their
 * count once the second ended; the stop's flush sends a second's fold at
 * once; a full turn, an append that cannot be queued, one Redis did not
 * take, and a loop whose connections are closed all count as dropped; a
 * NULL recorder records nothing. evrec.c and base/evfold.c are compiled
 * alone, with stand-ins for the append calls and the metric.
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
#include <event2/event.h>
#include <jansson.h>

#include "base/clock.h"
#include "base/evfold.h"
#include "proc/metrics.h"
#include "rt/evrec.h"

/* ---- stand-ins ------------------------------------------------------ */

#define SENT_MAX 512
static struct {
	char kind[16], lock[64], detail[FG_EVDETAIL_MAX];
	uint64_t token;
	bool has_token;
} sent[SENT_MAX];
static unsigned nsent, dropped;
static int add_err;
static uint64_t failed;
static int the_store; /* what loop.as points at */

int fg_aevents_add(fg_astore *as, const struct fg_event_rec *e)
{
	assert_ptr_equal(as, (fg_astore *)&the_store);
	if (add_err)
		return add_err;
	assert_true(nsent < SENT_MAX);
	snprintf(sent[nsent].kind, sizeof(sent[nsent].kind), "%s", e->kind);
	snprintf(sent[nsent].lock, sizeof(sent[nsent].lock), "%s", e->lock ? e->lock : "");
	snprintf(sent[nsent].detail, sizeof(sent[nsent].detail), "%s",
		 e->detail ? e->detail : "");
	sent[nsent].token = e->token;
	sent[nsent].has_token = e->has_token;
	nsent++;
	return 0;
}

uint64_t fg_aevents_failed(const fg_astore *as)
{
	(void)as;
	return failed;
}

void fg_metrics_events_dropped(uint64_t n)
{
	dropped += (unsigned)n;
}

/* ---- the loop ------------------------------------------------------- */

static struct fg_loop loop;
static struct fg_evrec *rec;

static int setup(void **state)
{
	(void)state;
	memset(&loop, 0, sizeof(loop));
	loop.base = event_base_new();
	assert_non_null(loop.base);
	loop.as = (fg_astore *)&the_store;
	rec = fg_evrec_create(&loop);
	assert_non_null(rec);
	nsent = dropped = 0;
	add_err = 0;
	failed = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fg_evrec_destroy(rec);
	event_base_free(loop.base);
	return 0;
}

/* One turn of the loop: what is active runs, nothing is waited for. */
static void turn(void)
{
	event_base_loop(loop.base, EVLOOP_NONBLOCK);
}

/* Waits for the first half of a second of the recorder's clock: the
 * refusals sent next (microseconds) fall in one second. */
static void early_in_a_second(void)
{
	while (fg_clock_ms() % 1000 >= 500) {
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static struct fg_evrefusal refusal(const char *lock, uint64_t token)
{
	struct fg_evrefusal r = {
		.lock = lock, .code = "stale_token", .method = "PUT",
		.path = "/x?sig=secret", .client = "127.0.0.1", .token = token,
	};
	return r;
}

static long long count_of(unsigned i)
{
	json_error_t err;
	json_t *d = json_loads(sent[i].detail, 0, &err);
	assert_non_null(d);
	long long n = json_integer_value(json_object_get(d, "count"));
	assert_null(strstr(sent[i].detail, "secret"));
	json_decref(d);
	return n;
}

/* ---- tests ---------------------------------------------------------- */

static void test_a_turn_s_events_go_at_its_end_in_order(void **state)
{
	(void)state;
	fg_evrec_lease_lost(rec, "a", "alice", "10.0.0.1");
	fg_evrec_lease_lost(rec, "b", NULL, NULL);
	assert_int_equal(nsent, 0); /* not while the turn runs */
	turn();
	assert_int_equal(nsent, 2);
	assert_string_equal(sent[0].kind, "lease_lost");
	assert_string_equal(sent[0].lock, "a");
	assert_false(sent[0].has_token);
	assert_string_equal(sent[1].lock, "b");
	turn();
	assert_int_equal(nsent, 2); /* nothing twice */
	assert_int_equal(dropped, 0);
}

static void test_refusals_fold_until_their_second_ends(void **state)
{
	(void)state;
	struct fg_evrefusal r = refusal("docs", 7);
	early_in_a_second();
	for (int i = 0; i < 25; i++)
		fg_evrec_refused(rec, &r);
	turn();
	/* the first at the end of its turn, count 1 */
	assert_int_equal(nsent, 1);
	assert_string_equal(sent[0].kind, "refused");
	assert_int_equal(sent[0].token, 7);
	assert_int_equal(count_of(0), 1);
	/* the rest when the second ends (the fold's timer): at most a
	 * second and a bit from now, waited for by the loop itself */
	struct timeval limit = { 1, 200000 };
	event_base_loopexit(loop.base, &limit);
	while (nsent < 2 && !event_base_got_exit(loop.base))
		event_base_loop(loop.base, EVLOOP_ONCE);
	assert_int_equal(nsent, 2);
	assert_int_equal(count_of(1), 24);
	assert_int_equal(dropped, 0);
}

static void test_the_stop_sends_the_fold_at_once(void **state)
{
	(void)state;
	struct fg_evrefusal r = refusal("docs", 7);
	early_in_a_second();
	for (int i = 0; i < 3; i++)
		fg_evrec_refused(rec, &r);
	fg_evrec_flush(rec);
	assert_int_equal(nsent, 2);
	assert_int_equal(count_of(0), 1);
	assert_int_equal(count_of(1), 2);
	turn();
	assert_int_equal(nsent, 2);
}

static void test_what_cannot_go_is_counted_dropped(void **state)
{
	(void)state;
	for (int i = 0; i < FG_EVBUF_MAX + 5; i++)
		fg_evrec_lease_lost(rec, "a", NULL, NULL);
	assert_int_equal(dropped, 5); /* the turn's buffer was full */
	turn();
	assert_int_equal(nsent, FG_EVBUF_MAX);
	add_err = -12;
	fg_evrec_lease_lost(rec, "a", NULL, NULL);
	turn();
	assert_int_equal(dropped, 6); /* could not be queued */
	add_err = 0;
	failed = 3;                   /* Redis did not take three */
	fg_evrec_lease_lost(rec, "a", NULL, NULL);
	turn();
	assert_int_equal(dropped, 9);
	loop.as = NULL;               /* the loop's connections closed */
	fg_evrec_lease_lost(rec, "a", NULL, NULL);
	turn();
	assert_int_equal(dropped, 10);
}

static void test_no_recorder_records_nothing(void **state)
{
	(void)state;
	struct fg_evrefusal r = refusal("docs", 7);
	fg_evrec_lease_lost(NULL, "a", NULL, NULL);
	fg_evrec_refused(NULL, &r);
	fg_evrec_flush(NULL);
	fg_evrec_destroy(NULL);
	turn();
	assert_int_equal(nsent, 0);
	assert_int_equal(dropped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_turn_s_events_go_at_its_end_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals_fold_until_their_second_ends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_stop_sends_the_fold_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_what_cannot_go_is_counted_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_recorder_records_nothing, setup, teardown),
	};

	return cmocka_run_group_tests_name("evrec", tests, NULL, NULL);
}
