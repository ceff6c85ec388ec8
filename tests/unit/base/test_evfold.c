/*
 * tests/unit/base/test_evfold.c - a loop's events until they are sent,
 * and refusals folded per lock, code and second (gateway/base/evfold.c).
 *
 * Pins evfold.h: the first refusal of a (lock, code) in a second is its
 * own event with count 1; the later ones of that second become one event
 * at the second's end, with their count and the first of them shown;
 * another lock or code is another fold; a full table or buffer refuses;
 * a path is the target's path only, never its query, bounded and
 * printable, its escapes never cut in half; a detail is the format's
 * JSON object.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/evfold.h"

static struct fg_evfold fold;

struct emitted {
	unsigned n;
	struct fg_evnote last;
};

static void on_emit(void *arg, const struct fg_evnote *e)
{
	struct emitted *em = arg;
	em->n++;
	em->last = *e;
}

static struct fg_evrefusal refusal(const char *lock, const char *code,
				   const char *path, uint64_t token)
{
	struct fg_evrefusal r = {
		.lock = lock, .code = code, .method = "PUT", .path = path,
		.principal = "writer", .client = "127.0.0.1", .token = token,
	};
	return r;
}

/* The detail as JSON, checked field by field. */
static void assert_detail(const char *detail, const char *code,
			  const char *method, const char *path, long long count)
{
	json_error_t err;
	json_t *o = json_loads(detail, 0, &err);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "code")), code);
	assert_string_equal(json_string_value(json_object_get(o, "method")), method);
	assert_string_equal(json_string_value(json_object_get(o, "path")), path);
	assert_int_equal(json_integer_value(json_object_get(o, "count")), count);
	assert_int_equal(json_object_size(o), 4);
	json_decref(o);
}

static void test_first_of_a_second_is_its_own_event(void **state)
{
	(void)state;
	struct fg_evnote e;
	fg_evfold_init(&fold);
	struct fg_evrefusal r = refusal("docs", "stale_token", "/docs/a.txt", 7);
	assert_int_equal(fg_evfold_refused(&fold, 5000, &r, &e), FG_EVFOLD_FIRST);
	assert_string_equal(e.kind, "refused");
	assert_string_equal(e.lock, "docs");
	assert_string_equal(e.principal, "writer");
	assert_string_equal(e.client, "127.0.0.1");
	assert_true(e.has_token);
	assert_int_equal(e.token, 7);
	assert_detail(e.detail, "stale_token", "PUT", "/docs/a.txt", 1);
	/* nothing more came: the second's end emits nothing */
	struct emitted em = { 0 };
	assert_int_equal(fg_evfold_next_ms(&fold), 6000);
	assert_int_equal(fg_evfold_expire(&fold, 5999, on_emit, &em), 0);
	assert_int_equal(fg_evfold_expire(&fold, 6000, on_emit, &em), 0);
	assert_int_equal(em.n, 0);
	assert_int_equal(fold.n, 0);
	assert_int_equal(fg_evfold_next_ms(&fold), 0);
}

static void test_later_ones_fold_into_one_with_their_count(void **state)
{
	(void)state;
	struct fg_evnote e;
	fg_evfold_init(&fold);
	struct fg_evrefusal r = refusal("docs", "stale_token", "/docs/a.txt", 7);
	assert_int_equal(fg_evfold_refused(&fold, 5100, &r, &e), FG_EVFOLD_FIRST);
	struct fg_evrefusal r2 = refusal("docs", "stale_token", "/docs/b.txt", 8);
	r2.method = "DELETE";
	assert_int_equal(fg_evfold_refused(&fold, 5200, &r2, &e), FG_EVFOLD_FOLDED);
	for (int i = 0; i < 9; i++)
		assert_int_equal(fg_evfold_refused(&fold, 5300 + i, &r, &e),
				 FG_EVFOLD_FOLDED);
	struct emitted em = { 0 };
	/* not before the second ends */
	assert_int_equal(fg_evfold_expire(&fold, 5999, on_emit, &em), 0);
	assert_int_equal(fg_evfold_expire(&fold, 6001, on_emit, &em), 1);
	assert_int_equal(em.n, 1);
	/* the first of the folded ones is shown, with how many they were */
	assert_string_equal(em.last.lock, "docs");
	assert_int_equal(em.last.token, 8);
	assert_detail(em.last.detail, "stale_token", "DELETE", "/docs/b.txt", 10);
	assert_int_equal(fold.n, 0);
	/* the next second starts over: its first is its own event */
	assert_int_equal(fg_evfold_refused(&fold, 6002, &r, &e), FG_EVFOLD_FIRST);
}

static void test_each_lock_and_code_is_its_own_fold(void **state)
{
	(void)state;
	struct fg_evnote e;
	fg_evfold_init(&fold);
	struct fg_evrefusal a = refusal("a", "stale_token", "/a", 1);
	struct fg_evrefusal a2 = refusal("a", "forged_token", "/a", 1);
	struct fg_evrefusal b = refusal("b", "stale_token", "/b", 1);
	assert_int_equal(fg_evfold_refused(&fold, 100, &a, &e), FG_EVFOLD_FIRST);
	assert_int_equal(fg_evfold_refused(&fold, 100, &a2, &e), FG_EVFOLD_FIRST);
	assert_int_equal(fg_evfold_refused(&fold, 100, &b, &e), FG_EVFOLD_FIRST);
	assert_int_equal(fg_evfold_refused(&fold, 200, &b, &e), FG_EVFOLD_FOLDED);
	assert_int_equal(fold.n, 3);
	struct emitted em = { 0 };
	assert_int_equal(fg_evfold_expire(&fold, 1000, on_emit, &em), 1);
	assert_string_equal(em.last.lock, "b");
	assert_detail(em.last.detail, "stale_token", "PUT", "/b", 1);
}

static void test_a_full_table_drops(void **state)
{
	(void)state;
	struct fg_evnote e;
	char name[32];
	fg_evfold_init(&fold);
	for (int i = 0; i < FG_EVFOLD_MAX; i++) {
		snprintf(name, sizeof(name), "lock-%d", i);
		struct fg_evrefusal r = refusal(name, "stale_token", "/x", 1);
		assert_int_equal(fg_evfold_refused(&fold, 42000, &r, &e), FG_EVFOLD_FIRST);
	}
	struct fg_evrefusal more = refusal("one-more", "stale_token", "/x", 1);
	assert_int_equal(fg_evfold_refused(&fold, 42500, &more, &e), FG_EVFOLD_FULL);
	/* a lock already folded still counts */
	struct fg_evrefusal again = refusal("lock-3", "stale_token", "/x", 1);
	assert_int_equal(fg_evfold_refused(&fold, 42500, &again, &e), FG_EVFOLD_FOLDED);
	/* the next second has room again */
	struct emitted em = { 0 };
	assert_int_equal(fg_evfold_expire(&fold, 43000, on_emit, &em), 1);
	assert_int_equal(fold.n, 0);
	assert_int_equal(fg_evfold_refused(&fold, 43000, &more, &e), FG_EVFOLD_FIRST);
}

static void test_a_full_buffer_refuses(void **state)
{
	(void)state;
	static struct fg_evbuf b;
	fg_evbuf_clear(&b);
	for (int i = 0; i < FG_EVBUF_MAX; i++)
		assert_non_null(fg_evbuf_add(&b));
	assert_null(fg_evbuf_add(&b));
	assert_int_equal(b.n, FG_EVBUF_MAX);
	fg_evbuf_clear(&b);
	struct fg_evnote *e = fg_evbuf_add(&b);
	assert_non_null(e);
	assert_string_equal(e->lock, ""); /* zeroed */
}

static void test_path_never_has_the_query(void **state)
{
	(void)state;
	char p[FG_EVPATH_MAX + 1];
	fg_evpath("/bucket/key?X-Amz-Credential=AKIA%2F&X-Amz-Signature=abc", p);
	assert_string_equal(p, "/bucket/key");
	assert_null(strstr(p, "Amz"));
	fg_evpath("/a/b", p);
	assert_string_equal(p, "/a/b");
	fg_evpath("?only", p);
	assert_string_equal(p, "");
}

static void test_path_is_printable_and_bounded(void **state)
{
	(void)state;
	char p[FG_EVPATH_MAX + 1];
	fg_evpath("/a b\"c\\d\x1b[2J\xc3\xa9", p);
	assert_string_equal(p, "/a%20b%22c%5Cd%1B[2J%C3%A9");
	char longp[2 * FG_EVPATH_MAX];
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(fg_evpath(longp, p), FG_EVPATH_MAX);
	/* an escape that would not fit is left out whole */
	memset(longp, 'x', sizeof(longp) - 1);
	longp[FG_EVPATH_MAX - 2] = ' ';
	assert_int_equal(fg_evpath(longp, p), FG_EVPATH_MAX - 2);
	assert_int_equal(p[FG_EVPATH_MAX - 3], 'x');
}

static void test_detail_at_its_longest_fits(void **state)
{
	(void)state;
	char path[FG_EVPATH_MAX + 1], d[FG_EVDETAIL_MAX];
	memset(path, 'p', FG_EVPATH_MAX);
	path[FG_EVPATH_MAX] = '\0';
	char code[FG_EVCODE_MAX], method[FG_EVMETHOD_MAX + 1];
	memset(code, 'c', sizeof(code) - 1);
	code[sizeof(code) - 1] = '\0';
	memset(method, 'M', FG_EVMETHOD_MAX);
	method[FG_EVMETHOD_MAX] = '\0';
	size_t n = fg_evdetail_refused(d, code, method, path, UINT32_MAX);
	assert_true(n > 0);
	assert_int_equal(strlen(d), n);
	assert_detail(d, code, method, path, (long long)UINT32_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_of_a_second_is_its_own_event),
		cmocka_unit_test(test_later_ones_fold_into_one_with_their_count),
		cmocka_unit_test(test_each_lock_and_code_is_its_own_fold),
		cmocka_unit_test(test_a_full_table_drops),
		cmocka_unit_test(test_a_full_buffer_refuses),
		cmocka_unit_test(test_path_never_has_the_query),
		cmocka_unit_test(test_path_is_printable_and_bounded),
		cmocka_unit_test(test_detail_at_its_longest_fits),
	};

	return cmocka_run_group_tests_name("evfold", tests, NULL, NULL);
}
