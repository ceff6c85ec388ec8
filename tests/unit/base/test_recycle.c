/*
 * tests/unit/base/test_recycle.c - a loop's stack of freed blocks
 * (gateway/base/recycle.h).
 *
 * Pins what its callers rely on: a block handed out again is all zero,
 * as calloc() makes it; the stack keeps at most FG_RECYCLE_MAX blocks;
 * draining leaves it empty. Built with AddressSanitizer the stack keeps
 * nothing, and the tests say so rather than pass on what they did not
 * see.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/recycle.h"

#define SIZE 1500

static void test_a_block_comes_back_zeroed(void **state)
{
	(void)state;
	struct fg_recycle r = { 0 };
	unsigned char *p = fg_recycle_get(&r, SIZE);
	assert_non_null(p);
	memset(p, 0xa5, SIZE);
	fg_recycle_put(&r, p);
	unsigned char *q = fg_recycle_get(&r, SIZE);
	assert_non_null(q);
	for (size_t i = 0; i < SIZE; i++)
		assert_int_equal(q[i], 0);
#ifndef FG_RECYCLE_ASAN
	assert_ptr_equal(q, p); /* the same block, made again */
#endif
	assert_int_equal(r.n, 0);
	fg_recycle_put(&r, q);
	fg_recycle_drain(&r);
}

static void test_keeps_at_most_its_bound_and_drains_to_empty(void **state)
{
	(void)state;
	struct fg_recycle r = { 0 };
	void *blocks[FG_RECYCLE_MAX + 8];
	for (size_t i = 0; i < FG_RECYCLE_MAX + 8; i++) {
		blocks[i] = fg_recycle_get(&r, SIZE);
		assert_non_null(blocks[i]);
	}
	for (size_t i = 0; i < FG_RECYCLE_MAX + 8; i++)
		fg_recycle_put(&r, blocks[i]);
#ifdef FG_RECYCLE_ASAN
	assert_int_equal(r.n, 0);
	assert_null(r.top);
#else
	assert_int_equal(r.n, FG_RECYCLE_MAX);
	assert_non_null(r.top);
#endif
	fg_recycle_put(&r, NULL); /* nothing to give back */
	fg_recycle_drain(&r);
	assert_int_equal(r.n, 0);
	assert_null(r.top);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_block_comes_back_zeroed),
		cmocka_unit_test(test_keeps_at_most_its_bound_and_drains_to_empty),
	};

	return cmocka_run_group_tests_name("recycle", tests, NULL, NULL);
}
