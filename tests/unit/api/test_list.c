/*
 * tests/unit/api/test_list.c - one page of the listing (gateway/api/list.c).
 *
 * list.c is compiled alone here with stand-ins for the three lockcore
 * calls it makes (index_page, describe, index_drop), which record what
 * they were asked and keep the callbacks for the test to answer, in any
 * order. Pins: done is told exactly once, after every lock was described
 * (or at the first error); the answer keeps the index's name order and
 * leaves idle locks out, dropping each with the Redis time of its look;
 * the cursor is the last name read when the index gave a full page and
 * null otherwise; a page freed before Redis answered is freed by its last
 * answer; a cursor round-trips and a foreign one is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/list.h"

/* ---- stand-ins for lockcore ------------------------------------------ */

static struct {
	char prefix[64], after[64];
	bool has_after;
	unsigned count;
	fg_names_cb *ncb;
	void *narg;
	size_t ndesc;
	char desc[16][64];
	fg_detail_cb *dcb[16];
	void *darg[16];
	size_t ndrop;
	char drop[16][64];
	uint64_t drop_us[16];
	int fail_describe_at; /* -1: none */
} st;

static int told, told_err;

int fg_alock_index_page(fg_astore *as, const char *prefix, const char *after,
			unsigned count, fg_names_cb *cb, void *arg)
{
	(void)as;
	snprintf(st.prefix, sizeof(st.prefix), "%s", prefix);
	st.has_after = after != NULL;
	snprintf(st.after, sizeof(st.after), "%s", after ? after : "");
	st.count = count;
	st.ncb = cb;
	st.narg = arg;
	return FG_OK;
}

int fg_alock_describe(fg_astore *as, const char *name, unsigned max_parties,
		      fg_detail_cb *cb, void *arg)
{
	(void)as;
	(void)max_parties;
	if ((int)st.ndesc == st.fail_describe_at)
		return FG_EUNAVAIL;
	snprintf(st.desc[st.ndesc], sizeof(st.desc[0]), "%s", name);
	st.dcb[st.ndesc] = cb;
	st.darg[st.ndesc] = arg;
	st.ndesc++;
	return FG_OK;
}

int fg_alock_index_drop(fg_astore *as, const char *name, uint64_t seen_us)
{
	(void)as;
	snprintf(st.drop[st.ndrop], sizeof(st.drop[0]), "%s", name);
	st.drop_us[st.ndrop++] = seen_us;
	return FG_OK;
}

static void on_done(int err, void *arg)
{
	(void)arg;
	told++;
	told_err = err;
}

static int setup(void **state)
{
	(void)state;
	memset(&st, 0, sizeof(st));
	st.fail_describe_at = -1;
	told = told_err = 0;
	return 0;
}

/* Describes lock i: active (held by one holder) or idle, at Redis time us. */
static void describe(size_t i, bool active, uint64_t us)
{
	struct fg_party h = { "own", NULL, "127.0.0.1", 5 };
	struct fg_lock_detail d = {
		.active = active, .held = active, .mode = FG_MODE_EXCLUSIVE,
		.has_token = true, .token = 100 + i, .ttl_ms = active ? 900 : 0,
		.seen = us, .nholders = active ? 1 : 0,
		.holders = active ? &h : NULL,
	};
	st.dcb[i](FG_OK, &d, st.darg[i]);
}

static void test_page_keeps_order_and_drops_idle_locks(void **state)
{
	(void)state;
	int err;
	struct fg_list *l = fg_list_start(NULL, "jobs/", NULL, 3, on_done, NULL, &err);
	assert_non_null(l);
	assert_string_equal(st.prefix, "jobs/");
	assert_false(st.has_after);
	assert_int_equal(st.count, 4); /* one more: is there a next page? */
	const char *names[] = { "jobs/a", "jobs/b", "jobs/c", "jobs/d" };
	st.ncb(FG_OK, names, 4, st.narg);
	assert_int_equal(st.ndesc, 3);
	assert_int_equal(told, 0);
	/* answers come back in any order; done waits for all of them */
	describe(2, true, 30);
	describe(0, true, 10);
	assert_int_equal(told, 0);
	describe(1, false, 20);
	assert_int_equal(told, 1);
	assert_int_equal(told_err, FG_OK);

	json_t *o = fg_list_answer(l, NULL);
	assert_non_null(o);
	json_t *locks = json_object_get(o, "locks");
	assert_int_equal(json_array_size(locks), 2);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(locks, 0), "name")), "jobs/a");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(locks, 1), "name")), "jobs/c");
	json_t *h = json_array_get(json_object_get(json_array_get(locks, 0),
						   "holders"), 0);
	assert_string_equal(json_string_value(json_object_get(h, "owner")), "own");
	assert_true(json_is_null(json_object_get(h, "principal")));
	assert_int_equal(json_integer_value(json_object_get(h, "held_ms")), 5);
	/* the idle one is dropped with the time of the look that saw it */
	assert_int_equal(st.ndrop, 1);
	assert_string_equal(st.drop[0], "jobs/b");
	assert_int_equal(st.drop_us[0], 20);
	/* more than a page: the cursor is the last name of this one */
	const char *cur = json_string_value(json_object_get(o, "cursor"));
	assert_non_null(cur);
	char back[FG_NAME_MAX + 1];
	assert_int_equal(fg_list_uncursor(cur, back), 0);
	assert_string_equal(back, "jobs/c");
	json_decref(o);
	fg_list_free(l);
}

static void test_exactly_a_page_at_the_end_has_no_cursor(void **state)
{
	(void)state;
	int err;
	struct fg_list *l = fg_list_start(NULL, "", NULL, 2, on_done, NULL, &err);
	const char *names[] = { "a", "b" };
	st.ncb(FG_OK, names, 2, st.narg);
	describe(0, true, 1);
	describe(1, true, 1);
	json_t *o = fg_list_answer(l, NULL);
	assert_int_equal(json_array_size(json_object_get(o, "locks")), 2);
	assert_true(json_is_null(json_object_get(o, "cursor")));
	json_decref(o);
	fg_list_free(l);
}

static void test_short_page_has_no_cursor_and_empty_is_told_at_once(void **state)
{
	(void)state;
	int err;
	struct fg_list *l = fg_list_start(NULL, "", "x", 5, on_done, NULL, &err);
	assert_true(st.has_after);
	assert_string_equal(st.after, "x");
	st.ncb(FG_OK, NULL, 0, st.narg);
	assert_int_equal(told, 1);
	json_t *o = fg_list_answer(l, NULL);
	assert_int_equal(json_array_size(json_object_get(o, "locks")), 0);
	assert_true(json_is_null(json_object_get(o, "cursor")));
	json_decref(o);
	fg_list_free(l);
}

static void test_errors_are_told_once(void **state)
{
	(void)state;
	int err;
	/* the index cannot be read */
	struct fg_list *l = fg_list_start(NULL, "", NULL, 5, on_done, NULL, &err);
	st.ncb(FG_EUNAVAIL, NULL, 0, st.narg);
	assert_int_equal(told, 1);
	assert_int_equal(told_err, FG_EUNAVAIL);
	fg_list_free(l);

	/* a describe fails once sent, another was sent before it */
	setup(NULL);
	l = fg_list_start(NULL, "", NULL, 5, on_done, NULL, &err);
	const char *names[] = { "a", "b" };
	st.ncb(FG_OK, names, 2, st.narg);
	st.dcb[1](FG_EUNAVAIL, NULL, st.darg[1]);
	assert_int_equal(told, 1);
	assert_int_equal(told_err, FG_EUNAVAIL);
	describe(0, true, 1);
	assert_int_equal(told, 1);
	fg_list_free(l);

	/* a describe cannot be sent: the one already sent answers into
	 * nothing, after the request let go */
	setup(NULL);
	st.fail_describe_at = 1;
	l = fg_list_start(NULL, "", NULL, 5, on_done, NULL, &err);
	st.ncb(FG_OK, names, 2, st.narg);
	assert_int_equal(told, 1);
	assert_int_equal(told_err, FG_EUNAVAIL);
	fg_list_free(l);
	describe(0, true, 1); /* frees the page (ASan: no leak, no reuse) */
	assert_int_equal(told, 1);
}

static void test_freed_before_answers_is_freed_by_the_last(void **state)
{
	(void)state;
	int err;
	struct fg_list *l = fg_list_start(NULL, "", NULL, 5, on_done, NULL, &err);
	fg_list_free(l); /* the client left before Redis answered */
	const char *names[] = { "a", "b" };
	st.ncb(FG_OK, names, 2, st.narg);
	/* nobody to answer: no lock is looked at, and the names' answer
	 * freed the page (ASan: no leak) */
	assert_int_equal(st.ndesc, 0);
	assert_int_equal(told, 0);

	/* the client leaves while the looks are out: the last frees it */
	setup(NULL);
	l = fg_list_start(NULL, "", NULL, 5, on_done, NULL, &err);
	st.ncb(FG_OK, names, 2, st.narg);
	assert_int_equal(st.ndesc, 2);
	fg_list_free(l);
	describe(0, true, 1);
	describe(1, false, 2);
	assert_int_equal(told, 0);
	assert_int_equal(st.ndrop, 0);
}

static void test_cursor_round_trip_and_refusals(void **state)
{
	(void)state;
	char c[FG_LIST_CURSOR_MAX], back[FG_NAME_MAX + 1];
	char longest[FG_NAME_MAX + 1];
	memset(longest, 'n', FG_NAME_MAX);
	longest[FG_NAME_MAX] = '\0';
	assert_true(fg_list_cursor(longest, c, sizeof(c)) > 0);
	assert_int_equal(fg_list_uncursor(c, back), 0);
	assert_string_equal(back, longest);
	assert_int_equal(fg_list_uncursor("", back), -1);
	assert_int_equal(fg_list_uncursor("!!", back), -1);
	/* decodes, but to no lock name ("not a name") */
	assert_int_equal(fg_list_uncursor("bm90IGEgbmFtZQ", back), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_page_keeps_order_and_drops_idle_locks, setup),
		cmocka_unit_test_setup(test_exactly_a_page_at_the_end_has_no_cursor, setup),
		cmocka_unit_test_setup(test_short_page_has_no_cursor_and_empty_is_told_at_once, setup),
		cmocka_unit_test_setup(test_errors_are_told_once, setup),
		cmocka_unit_test_setup(test_freed_before_answers_is_freed_by_the_last, setup),
		cmocka_unit_test_setup(test_cursor_round_trip_and_refusals, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
