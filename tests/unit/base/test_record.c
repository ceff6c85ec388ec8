/*
 * tests/unit/base/test_record.c - the request record (gateway/base/record.c).
 *
 * Pins record.h: fg_rec_begin starts a record with its "none yet" values
 * and tells a proxied request from an API call by the "/_fence/" prefix;
 * only the request whose handler runs (fg_rec_enter .. fg_rec_leave) has
 * its answers and refusals noted, and its method is kept once ("OTHER"
 * when too long); fg_rec_close derives the endpoint from the route of a
 * lock API call (base/apiroute.c: the request is routed here as the front
 * routes it) or the method of a proxied one, and what the request became
 * (a write, a break, an admission), and whether the connection ended
 * early, and does nothing for a request whose record never began.
 * record.c is pure: what a closed record is handed on to is
 * tests/unit/proc/test_report.c's. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/record.h"
#include "base/errors.h"

/* ---- helpers ------------------------------------------------------- */

static struct fg_rec rec;
static struct fg_apiroute route;
static size_t body_len;        /* an API body's length, read whole */
static char uri_buf[512];

/* A request whose line was just read, its handler running: one under
 * /_fence/ routed, as the front routes it. */
static struct fg_rec *start(const char *method, const char *uri)
{
	memset(&rec, 0, sizeof(rec));
	body_len = 0;
	snprintf(uri_buf, sizeof(uri_buf), "%s", uri);
	fg_rec_begin(&rec, uri_buf);
	fg_rec_enter(&rec, method);
	memset(&route, 0, sizeof(route));
	if (!rec.proxied)
		fg_apiroute_match(&route, method, uri_buf);
	rec.route = &route;
	return &rec;
}

/* Ends the handler and completes the request; returns its endpoint. */
static enum fg_endpoint finish(struct fg_rec *r, bool completed_ok)
{
	fg_rec_leave();
	fg_rec_close(r, completed_ok, body_len);
	return r->endpoint;
}

static enum fg_endpoint endpoint_of(const char *method, const char *uri)
{
	return finish(start(method, uri), true);
}

/* ---- begin, enter, leave ------------------------------------------- */

static void test_begin_starts_with_nothing_known(void **state)
{
	struct fg_rec *r = start("GET", "/_fence/v1/health");

	(void)state;
	assert_true(r->t0_ns > 0);
	assert_true(r->wall.tv_sec > 0);
	assert_false(r->proxied);
	assert_int_equal(r->status, 0);
	assert_int_equal(r->error, -1);
	assert_int_equal(r->refusal, -1);
	assert_int_equal(r->decision, FG_DEC_NONE);
	assert_true(r->admit_ns == -1);
	assert_true(r->upstream_ns == -1);
	assert_string_equal(r->client, "");
	fg_rec_leave();
}

static void test_api_prefix_decides_proxied(void **state)
{
	static const struct {
		const char *uri;
		bool proxied;
	} t[] = {
		{ "/_fence/v1/locks/a", false },
		{ "/_fence/", false },
		{ "/_fence/anything", false },
		{ "/_fence", true },
		{ "/_fencex/a", true },
		{ "/_FENCE/v1/health", true },
		{ "/bucket/a.txt", true },
		{ "/", true },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_rec *r = start("GET", t[i].uri);
		if (r->proxied != t[i].proxied)
			fail_msg("\"%s\": proxied %d, expected %d", t[i].uri,
				 r->proxied, t[i].proxied);
		fg_rec_leave();
	}
}

static void test_method_is_kept_once(void **state)
{
	struct fg_rec *r = start("PROPPATCH", "/a");

	(void)state;
	assert_string_equal(r->method, "PROPPATCH");
	/* a handler that runs again (a body, a resume) keeps the first */
	fg_rec_leave();
	fg_rec_enter(r, "GET");
	assert_string_equal(r->method, "PROPPATCH");
	fg_rec_leave();

	/* 15 bytes fit, 16 do not */
	r = start("ABCDEFGHIJKLMNO", "/a");
	assert_string_equal(r->method, "ABCDEFGHIJKLMNO");
	fg_rec_leave();
	r = start("ABCDEFGHIJKLMNOP", "/a");
	assert_string_equal(r->method, "OTHER");
	fg_rec_leave();
}

static void test_only_the_running_request_is_noted(void **state)
{
	struct fg_rec *r = start("GET", "/_fence/v1/locks/a");

	(void)state;
	assert_ptr_equal(fg_rec_current(), r);
	fg_rec_answered(200, -1, 10);
	fg_rec_answered(200, -1, 5);
	assert_int_equal(r->status, 200);
	assert_int_equal(r->error, -1);
	assert_int_equal(r->bytes_out, 15);
	fg_rec_answered(409, FG_E_LOCK_HELD, 7);
	assert_int_equal(r->status, 409);
	assert_int_equal(r->error, FG_E_LOCK_HELD);
	assert_int_equal(r->bytes_out, 22);

	fg_rec_leave();
	assert_null(fg_rec_current());
	fg_rec_answered(500, FG_E_INTERNAL, 99);
	fg_rec_refused(FG_E_STALE_TOKEN, "x", 1, false, 0);
	assert_int_equal(r->status, 409);
	assert_int_equal(r->error, FG_E_LOCK_HELD);
	assert_int_equal(r->bytes_out, 22);
	assert_int_equal(r->decision, FG_DEC_NONE);
	assert_int_equal(r->refusal, -1);
}

static void test_refusal_names_its_lock_and_tokens(void **state)
{
	struct fg_rec *r = start("PUT", "/a/b");

	(void)state;
	fg_rec_refused(FG_E_STALE_TOKEN, "a/b", 41, true, 42);
	assert_int_equal(r->decision, FG_DEC_REFUSED);
	assert_int_equal(r->refusal, FG_E_STALE_TOKEN);
	assert_string_equal(r->lock, "a/b");
	assert_true(r->has_token);
	assert_true(r->token == 41);
	assert_true(r->has_current);
	assert_true(r->current == 42);
	fg_rec_leave();

	/* no token (token_required), no lock named, no current token */
	r = start("PUT", "/a/b");
	fg_rec_refused(FG_E_TOKEN_REQUIRED, NULL, 0, false, 0);
	assert_int_equal(r->decision, FG_DEC_REFUSED);
	assert_int_equal(r->refusal, FG_E_TOKEN_REQUIRED);
	assert_string_equal(r->lock, "");
	assert_false(r->has_token);
	assert_false(r->has_current);
	fg_rec_leave();
}

/* ---- the endpoint --------------------------------------------------- */

struct ep_case {
	const char *method, *uri;
	enum fg_endpoint ep;
};

static void check_endpoints(const struct ep_case *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		enum fg_endpoint ep = endpoint_of(t[i].method, t[i].uri);
		if (ep != t[i].ep)
			fail_msg("%s %s: %s, expected %s", t[i].method, t[i].uri,
				 fg_endpoint_name(ep), fg_endpoint_name(t[i].ep));
	}
}

static void test_lock_calls(void **state)
{
	static const struct ep_case t[] = {
		{ "POST", "/_fence/v1/locks/a", FG_EP_ACQUIRE },
		{ "POST", "/_fence/v1/locks/a/b/c?x=1", FG_EP_ACQUIRE },
		{ "PATCH", "/_fence/v1/locks/a", FG_EP_RENEW },
		{ "DELETE", "/_fence/v1/locks/a", FG_EP_RELEASE },
		{ "GET", "/_fence/v1/locks/a", FG_EP_INSPECT },
		{ "HEAD", "/_fence/v1/locks/a", FG_EP_INSPECT },
		{ "GET", "/_fence/v1/locks/a?wait_ms=100", FG_EP_OBSERVE },
		{ "GET", "/_fence/v1/locks/a?token=3&wait_ms=0", FG_EP_OBSERVE },
		{ "HEAD", "/_fence/v1/locks/a?wait_ms=5", FG_EP_OBSERVE },
		{ "GET", "/_fence/v1/locks/a?token=3", FG_EP_INSPECT },
		/* wait_ms in the name is not the query's */
		{ "GET", "/_fence/v1/locks/wait_ms=5", FG_EP_INSPECT },
		{ "PUT", "/_fence/v1/locks/a", FG_EP_OTHER },
		{ "OPTIONS", "/_fence/v1/locks/a", FG_EP_OTHER },
		{ "post", "/_fence/v1/locks/a", FG_EP_OTHER },
		/* no name */
		{ "POST", "/_fence/v1/locks/", FG_EP_OTHER },
		{ "POST", "/_fence/v1/locks/?x", FG_EP_OTHER },
		{ "POST", "/_fence/v1/locks", FG_EP_OTHER },
	};

	(void)state;
	check_endpoints(t, sizeof(t) / sizeof(t[0]));
}

static void test_break_is_a_delete_that_carried_fence_break(void **state)
{
	struct fg_rec *r = start("DELETE", "/_fence/v1/locks/a");

	(void)state;
	r->brk = true;
	assert_int_equal(finish(r, true), FG_EP_BREAK);

	/* on anything but DELETE the flag changes nothing */
	r = start("POST", "/_fence/v1/locks/a");
	r->brk = true;
	assert_int_equal(finish(r, true), FG_EP_ACQUIRE);
}

static void test_an_api_call_never_routed_is_other(void **state)
{
	struct fg_rec *r = start("GET", "/_fence/v1/health");

	(void)state;
	r->route = NULL;
	assert_int_equal(finish(r, true), FG_EP_OTHER);
	r = start("GET", "/_fence/v1/health");
	route.matched = false;
	assert_int_equal(finish(r, true), FG_EP_OTHER);
}

static void test_fixed_api_paths(void **state)
{
	static const struct ep_case t[] = {
		{ "POST", "/_fence/v1/check", FG_EP_CHECK },
		{ "GET", "/_fence/v1/health", FG_EP_HEALTH },
		{ "GET", "/_fence/v1/health?verbose=1", FG_EP_HEALTH },
		{ "GET", "/_fence/v1/livez", FG_EP_LIVEZ },
		{ "GET", "/_fence/v1/readyz", FG_EP_READYZ },
		{ "GET", "/_fence/v1/metrics", FG_EP_METRICS },
		/* the path alone decides, whatever the method */
		{ "DELETE", "/_fence/v1/health", FG_EP_HEALTH },
		{ "GET", "/_fence/v1/check", FG_EP_CHECK },
		/* exact paths only */
		{ "GET", "/_fence/v1/health/", FG_EP_OTHER },
		{ "GET", "/_fence/v1/healthz", FG_EP_OTHER },
		{ "GET", "/_fence/v1/metric", FG_EP_OTHER },
		{ "GET", "/_fence/v2/health", FG_EP_OTHER },
		{ "GET", "/_fence/", FG_EP_OTHER },
	};

	(void)state;
	check_endpoints(t, sizeof(t) / sizeof(t[0]));
}

static void test_proxied_reads_and_writes(void **state)
{
	static const struct ep_case t[] = {
		{ "GET", "/a.txt", FG_EP_PROXY_READ },
		{ "HEAD", "/a.txt", FG_EP_PROXY_READ },
		{ "OPTIONS", "/a.txt", FG_EP_PROXY_READ },
		{ "PROPFIND", "/dir/", FG_EP_PROXY_READ },
		{ "GET", "/_fence", FG_EP_PROXY_READ },
		{ "PUT", "/a.txt", FG_EP_PROXY_WRITE },
		{ "DELETE", "/a.txt", FG_EP_PROXY_WRITE },
		{ "POST", "/a.txt", FG_EP_PROXY_WRITE },
		{ "PATCH", "/a.txt", FG_EP_PROXY_WRITE },
		{ "MKCOL", "/dir/", FG_EP_PROXY_WRITE },
		{ "COPY", "/a.txt", FG_EP_PROXY_WRITE },
		{ "MOVE", "/a.txt", FG_EP_PROXY_WRITE },
		{ "PROPPATCH", "/a.txt", FG_EP_PROXY_WRITE },
		{ "LOCK", "/a.txt", FG_EP_PROXY_WRITE },
		/* case-exact: an unknown method counts as a write */
		{ "get", "/a.txt", FG_EP_PROXY_WRITE },
		{ "ABCDEFGHIJKLMNOPQ", "/a.txt", FG_EP_PROXY_WRITE },
	};

	(void)state;
	check_endpoints(t, sizeof(t) / sizeof(t[0]));
}

static void test_a_read_that_became_a_write(void **state)
{
	struct fg_rec *r = start("GET", "/a.txt");

	(void)state;
	/* a read method the write set counts as a write (write-methods) */
	r->write = true;
	assert_int_equal(finish(r, true), FG_EP_PROXY_WRITE);

	/* a read admitted as a write */
	r = start("GET", "/a.txt");
	r->fenced = true;
	r->decision = FG_DEC_ADMITTED;
	assert_int_equal(finish(r, true), FG_EP_PROXY_WRITE);

	/* every other decision leaves a read a read */
	static const enum fg_decision reads[] = { FG_DEC_NONE, FG_DEC_PASS,
						  FG_DEC_CHECKED, FG_DEC_REFUSED };
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		r = start("HEAD", "/a.txt");
		r->decision = reads[i];
		assert_int_equal(finish(r, true), FG_EP_PROXY_READ);
	}
}

/* ---- what finishing derives ------------------------------------------ */

static void test_finish_derives_aborted_and_bytes_in(void **state)
{
	struct fg_rec *r = start("POST", "/_fence/v1/locks/a");

	(void)state;
	body_len = 17;
	fg_rec_answered(200, -1, 100);
	finish(r, true);
	assert_false(r->aborted);
	assert_int_equal(r->bytes_in, 17);  /* an API body read whole */
	assert_int_equal(r->bytes_out, 100);

	r = start("PUT", "/a.txt");
	body_len = 17;              /* a proxied body is streamed ... */
	r->bytes_in = 4096;        /* ... and counted as it passes */
	finish(r, false);
	assert_true(r->aborted);
	assert_int_equal(r->bytes_in, 4096);
}

static void test_finish_of_a_record_never_begun_does_nothing(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	snprintf(uri_buf, sizeof(uri_buf), "/_fence/v1/health");
	rec.uri = uri_buf;
	rec.endpoint = FG_EP_COUNT; /* a value closing would overwrite */
	fg_rec_close(&rec, false, 0);
	assert_int_equal(rec.endpoint, FG_EP_COUNT);
	assert_false(rec.aborted);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_begin_starts_with_nothing_known),
		cmocka_unit_test(test_api_prefix_decides_proxied),
		cmocka_unit_test(test_method_is_kept_once),
		cmocka_unit_test(test_only_the_running_request_is_noted),
		cmocka_unit_test(test_refusal_names_its_lock_and_tokens),
		cmocka_unit_test(test_lock_calls),
		cmocka_unit_test(test_break_is_a_delete_that_carried_fence_break),
		cmocka_unit_test(test_fixed_api_paths),
		cmocka_unit_test(test_an_api_call_never_routed_is_other),
		cmocka_unit_test(test_proxied_reads_and_writes),
		cmocka_unit_test(test_a_read_that_became_a_write),
		cmocka_unit_test(test_finish_derives_aborted_and_bytes_in),
		cmocka_unit_test(test_finish_of_a_record_never_begun_does_nothing),
	};

	return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
