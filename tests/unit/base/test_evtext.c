/*
 * tests/unit/base/test_evtext.c - an event as the gateway shows it
 * (gateway/base/evtext.h): its JSON (every field of contract v1.5, null
 * for what is absent, detail an object, at in RFC 3339 with ms), its
 * Server-Sent Events frame, the order of ids, the prefix filter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/evtext.h"

static struct fg_event event(const char *id, const char *kind, const char *lock)
{
	struct fg_event e = { .at_ms = 1796221501123ull, .kind = kind,
			      .lock = lock, .principal = "", .owner = "",
			      .client = "", .gateway = "", .detail = "" };
	strcpy(e.id, id);
	return e;
}

static json_t *parsed(const struct fg_evitem *it)
{
	json_error_t err;
	json_t *o = json_loads(it->json, 0, &err);
	assert_non_null(o);
	assert_int_equal(strlen(it->json), it->json_len);
	return o;
}

static void test_every_field_with_nulls_for_what_is_absent(void **state)
{
	(void)state;
	struct fg_event e = event("1796221501123-0", "released", "a/b");
	struct fg_evitem *it = fg_evitem_make(&e);
	assert_non_null(it);
	json_t *o = parsed(it);
	assert_int_equal(json_object_size(o), 10);
	assert_string_equal(json_string_value(json_object_get(o, "id")), "1796221501123-0");
	assert_string_equal(json_string_value(json_object_get(o, "at")), "2026-12-02T14:25:01.123Z");
	assert_string_equal(json_string_value(json_object_get(o, "kind")), "released");
	assert_string_equal(json_string_value(json_object_get(o, "lock")), "a/b");
	const char *nulls[] = { "token", "principal", "owner", "client", "gateway" };
	for (size_t i = 0; i < 5; i++)
		assert_true(json_is_null(json_object_get(o, nulls[i])));
	assert_true(json_is_object(json_object_get(o, "detail")));
	assert_int_equal(json_object_size(json_object_get(o, "detail")), 0);
	assert_string_equal(it->lock, "a/b");
	assert_string_equal(it->kind, "released");
	assert_string_equal(it->id, "1796221501123-0");
	assert_true(it->cur.set);
	assert_int_equal(it->cur.ms, 1796221501123ull);
	json_decref(o);
	free(it);
}

static void test_fields_given_are_shown_and_detail_is_the_object(void **state)
{
	(void)state;
	struct fg_event e = event("5-7.300", "granted", "x");
	e.principal = "alice";
	e.owner = "job \"1\"\n";
	e.client = "127.0.0.1";
	e.gateway = "0123456789abcdef";
	e.token = 1ull << 52;
	e.has_token = true;
	e.detail = "{\"mode\":\"shared\",\"ttl_ms\":1000,\"waited\":true}";
	struct fg_evitem *it = fg_evitem_make(&e);
	assert_non_null(it);
	assert_null(strchr(it->json, '\n')); /* one line: one SSE data line */
	json_t *o = parsed(it);
	assert_int_equal(json_integer_value(json_object_get(o, "token")), 1ll << 52);
	assert_string_equal(json_string_value(json_object_get(o, "principal")), "alice");
	assert_string_equal(json_string_value(json_object_get(o, "owner")), "job \"1\"\n");
	assert_string_equal(json_string_value(json_object_get(o, "client")), "127.0.0.1");
	assert_string_equal(json_string_value(json_object_get(o, "gateway")), "0123456789abcdef");
	json_t *d = json_object_get(o, "detail");
	assert_string_equal(json_string_value(json_object_get(d, "mode")), "shared");
	assert_true(json_is_true(json_object_get(d, "waited")));
	assert_true(it->cur.cluster);
	assert_int_equal(it->cur.slot, 300);
	json_decref(o);
	free(it);
}

static void test_a_detail_that_is_no_object_shows_as_empty(void **state)
{
	(void)state;
	const char *bad[] = { "[1,2]", "{\"a\":", "42", "\"s\"" };
	for (size_t i = 0; i < 4; i++) {
		struct fg_event e = event("1-1", "refused", "l");
		e.detail = bad[i];
		struct fg_evitem *it = fg_evitem_make(&e);
		assert_non_null(it);
		json_t *o = parsed(it);
		json_t *d = json_object_get(o, "detail");
		assert_true(json_is_object(d));
		assert_int_equal(json_object_size(d), 0);
		json_decref(o);
		free(it);
	}
}

static void test_an_id_that_is_none_makes_no_item(void **state)
{
	(void)state;
	struct fg_event e = event("not-an-id", "granted", "l");
	assert_null(fg_evitem_make(&e));
}

static void test_the_sse_frame(void **state)
{
	(void)state;
	struct fg_event e = event("12-3", "broken", "a/b");
	e.detail = "{\"by\":\"bob\"}";
	struct fg_evitem *it = fg_evitem_make(&e);
	assert_non_null(it);
	size_t n = fg_sse_frame_len(it);
	char *out = malloc(n + 1);
	assert_int_equal(fg_sse_frame(it, out), n);
	out[n] = '\0';
	char want[1024];
	snprintf(want, sizeof(want), "id: 12-3\ndata: %s\n\n", it->json);
	assert_string_equal(out, want);
	free(out);
	free(it);
}

static void test_time_is_rfc3339_utc_with_ms(void **state)
{
	(void)state;
	char b[32];
	assert_int_equal(fg_ev_time(0, b, sizeof(b)), 24);
	assert_string_equal(b, "1970-01-01T00:00:00.000Z");
	fg_ev_time(1796221501009ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-02T14:25:01.009Z");
}

static void test_cursor_order(void **state)
{
	(void)state;
	struct fg_ev_cursor none = { 0 };
	struct fg_ev_cursor a = { .ms = 5, .seq = 9, .set = true };
	struct fg_ev_cursor b = { .ms = 6, .seq = 0, .set = true };
	struct fg_ev_cursor c = { .ms = 6, .seq = 1, .set = true };
	assert_true(fg_ev_cursor_cmp(&none, &a) < 0);
	assert_true(fg_ev_cursor_cmp(&a, &none) > 0);
	assert_true(fg_ev_cursor_cmp(&none, &none) == 0);
	assert_true(fg_ev_cursor_cmp(&a, &b) < 0);
	assert_true(fg_ev_cursor_cmp(&b, &c) < 0);
	assert_true(fg_ev_cursor_cmp(&c, &c) == 0);
	/* a Cluster: (ms, slot, seq) */
	struct fg_ev_cursor s1 = { .ms = 6, .seq = 9, .slot = 1, .cluster = true, .set = true };
	struct fg_ev_cursor s2 = { .ms = 6, .seq = 0, .slot = 2, .cluster = true, .set = true };
	struct fg_ev_cursor s3 = { .ms = 7, .seq = 0, .slot = 0, .cluster = true, .set = true };
	assert_true(fg_ev_cursor_cmp(&s1, &s2) < 0);
	assert_true(fg_ev_cursor_cmp(&s2, &s3) < 0);
}

static void test_prefix(void **state)
{
	(void)state;
	struct fg_event e = event("1-1", "granted", "a/b/c");
	struct fg_evitem *it = fg_evitem_make(&e);
	assert_true(fg_ev_under(it, "", 0));
	assert_true(fg_ev_under(it, "a/", 2));
	assert_true(fg_ev_under(it, "a/b/c", 5));
	assert_false(fg_ev_under(it, "a/b/c/", 6));
	assert_false(fg_ev_under(it, "b", 1));
	free(it);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_field_with_nulls_for_what_is_absent),
		cmocka_unit_test(test_fields_given_are_shown_and_detail_is_the_object),
		cmocka_unit_test(test_a_detail_that_is_no_object_shows_as_empty),
		cmocka_unit_test(test_an_id_that_is_none_makes_no_item),
		cmocka_unit_test(test_the_sse_frame),
		cmocka_unit_test(test_time_is_rfc3339_utc_with_ms),
		cmocka_unit_test(test_cursor_order),
		cmocka_unit_test(test_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
