/*
 * tests/unit/proc/test_gateway.c - the loops' heartbeats and the stop's
 * counts in gateway/proc/gateway.c, the parts readiness and main.c's
 * drain read.
 *
 * Pins gateway.h: a loop that has not turned for more than the bound
 * makes fg_gateway_loops_turning() false, a loop that never ran does
 * not, and only the first nloops count; the drained count follows each
 * loop's idle and busy again; the other counts add up. cmocka's asserts
 * do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proc/gateway.h"

/* The struct is large (a heartbeat per possible loop): not on the stack. */
static struct fg_gateway gw;

static int setup(void **state)
{
	(void)state;
	memset(&gw, 0, sizeof(gw));
	return 0;
}

static void test_heartbeats(void **state)
{
	(void)state;
	gw.nloops = 3;
	/* nothing ran yet: no loop is stuck */
	assert_true(fg_gateway_loops_turning(&gw, 100000, 5000));
	fg_gateway_loop_turned(&gw, 0, 10000);
	fg_gateway_loop_turned(&gw, 1, 10000);
	fg_gateway_loop_turned(&gw, 2, 10000);
	assert_true(fg_gateway_loops_turning(&gw, 15000, 5000)); /* at the bound */
	assert_false(fg_gateway_loops_turning(&gw, 15001, 5000));
	fg_gateway_loop_turned(&gw, 0, 15001);
	fg_gateway_loop_turned(&gw, 2, 15001);
	assert_false(fg_gateway_loops_turning(&gw, 15001, 5000)); /* loop 1 */
	fg_gateway_loop_turned(&gw, 1, 15001);
	assert_true(fg_gateway_loops_turning(&gw, 15001, 5000));
	/* a clock read before the turn was stored is no age */
	assert_true(fg_gateway_loops_turning(&gw, 15000, 0));
	/* a loop past nloops, or past the table, is not looked at */
	fg_gateway_loop_turned(&gw, 3, 1);
	fg_gateway_loop_turned(&gw, FG_LOOPS_MAX, 1);
	assert_true(fg_gateway_loops_turning(&gw, 15001, 5000));
	gw.nloops = FG_LOOPS_MAX + 10;
	assert_false(fg_gateway_loops_turning(&gw, 15001, 5000)); /* loop 3 */
}

static void test_stop_counts(void **state)
{
	(void)state;
	gw.nloops = 2;
	assert_int_equal(fg_gateway_quiesced(&gw), 0);
	fg_gateway_note_quiesced(&gw);
	fg_gateway_note_quiesced(&gw);
	assert_int_equal(fg_gateway_quiesced(&gw), 2);

	fg_gateway_note_drained(&gw, true);
	fg_gateway_note_drained(&gw, true);
	assert_int_equal(fg_gateway_drained(&gw), 2);
	/* a request on a connection opened before: busy again */
	fg_gateway_note_drained(&gw, false);
	assert_int_equal(fg_gateway_drained(&gw), 1);
	fg_gateway_note_drained(&gw, true);
	assert_int_equal(fg_gateway_drained(&gw), 2);

	assert_int_equal(fg_gateway_ended(&gw), 0);
	fg_gateway_note_ended(&gw, 3);
	fg_gateway_note_ended(&gw, 1);
	assert_int_equal(fg_gateway_ended(&gw), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_heartbeats, setup),
		cmocka_unit_test_setup(test_stop_counts, setup),
	};

	return cmocka_run_group_tests_name("proc/gateway", tests, NULL, NULL);
}
