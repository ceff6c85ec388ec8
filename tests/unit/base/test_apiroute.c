/*
 * tests/unit/base/test_apiroute.c - the lock API's route table
 * (gateway/base/apiroute.c).
 *
 * Pins apiroute.h: for a method and a target under /_fence/, the one
 * answer the metrics, the access step and the lock API read: the endpoint
 * a request is counted as (by its path, and for a lock by its method, with
 * wait_ms in the query an observe), what the lock API does (the call, 400
 * bad_lock_name for a name that does not decode or is not valid whatever
 * the method, 405 with its Allow, 404), what the access step asks (nothing
 * for health, livez, readyz, openapi.json and the status page whatever the method; a right on the lock
 * named; the listing's prefix; the check's sequencer; else a known
 * principal), and the lock name decoded. Endpoint names are the metrics'
 * label values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/apiroute.h"

#define L "/_fence/v1/locks/"

struct want {
	const char *method, *target;
	enum fg_endpoint ep;
	enum fg_apiop op;
	enum fg_apineed need;
	enum fg_right right;  /* when need is RIGHT, PREFIX or SEQUENCER */
	const char *name;     /* "" when it names no lock */
	const char *allow;    /* op NOT_ALLOWED */
};

static const char *op_name(enum fg_apiop op)
{
	static const char *const n[] = {
		"not_found", "not_allowed", "bad_name", "acquire", "renew",
		"delete", "inspect", "list", "check", "route", "health", "livez",
		"readyz", "metrics", "openapi", "ui", "events",
	};
	return (unsigned)op < sizeof(n) / sizeof(n[0]) ? n[op] : "?";
}

static void check(const struct want *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct fg_apiroute r;
		memset(&r, 0x5a, sizeof(r)); /* filled whole, whatever it held */
		fg_apiroute_match(&r, t[i].method, t[i].target);
		const char *what = t[i].target;
		if (!r.matched)
			fail_msg("%s %s: not matched", t[i].method, what);
		if (r.endpoint != t[i].ep)
			fail_msg("%s %s: endpoint %s, expected %s", t[i].method, what,
				 fg_endpoint_name(r.endpoint), fg_endpoint_name(t[i].ep));
		if (r.op != t[i].op)
			fail_msg("%s %s: op %s, expected %s", t[i].method, what,
				 op_name(r.op), op_name(t[i].op));
		if (r.need != t[i].need)
			fail_msg("%s %s: need %d, expected %d", t[i].method, what,
				 r.need, t[i].need);
		if ((t[i].need == FG_APINEED_RIGHT || t[i].need == FG_APINEED_PREFIX ||
		     t[i].need == FG_APINEED_SEQUENCER) && r.right != t[i].right)
			fail_msg("%s %s: right %s, expected %s", t[i].method, what,
				 fg_right_name(r.right), fg_right_name(t[i].right));
		if (strcmp(r.name, t[i].name) != 0)
			fail_msg("%s %s: name \"%s\", expected \"%s\"", t[i].method,
				 what, r.name, t[i].name);
		if (t[i].op == FG_APIOP_NOT_ALLOWED &&
		    (!r.allow || strcmp(r.allow, t[i].allow) != 0))
			fail_msg("%s %s: Allow \"%s\", expected \"%s\"", t[i].method,
				 what, r.allow ? r.allow : "(null)", t[i].allow);
	}
}

#define N(t) (sizeof(t) / sizeof(t[0]))

#define RIGHT FG_APINEED_RIGHT
#define WHO FG_APINEED_PRINCIPAL
#define OPEN FG_APINEED_NOTHING
#define ANY FG_RIGHT_OBSERVE /* not looked at */

static void test_endpoint_names(void **state)
{
	static const char *const want[FG_EP_COUNT] = {
		[FG_EP_OTHER] = "other",
		[FG_EP_ACQUIRE] = "acquire",
		[FG_EP_RENEW] = "renew",
		[FG_EP_RELEASE] = "release",
		[FG_EP_BREAK] = "break",
		[FG_EP_INSPECT] = "inspect",
		[FG_EP_OBSERVE] = "observe",
		[FG_EP_CHECK] = "check",
		[FG_EP_HEALTH] = "health",
		[FG_EP_LIVEZ] = "livez",
		[FG_EP_READYZ] = "readyz",
		[FG_EP_METRICS] = "metrics",
		[FG_EP_PROXY_READ] = "proxy_read",
		[FG_EP_PROXY_WRITE] = "proxy_write",
	};

	(void)state;
	for (int i = 0; i < FG_EP_COUNT; i++)
		assert_string_equal(fg_endpoint_name((enum fg_endpoint)i), want[i]);
	assert_string_equal(fg_endpoint_name(FG_EP_COUNT), "other");
	assert_string_equal(fg_endpoint_name((enum fg_endpoint)-1), "other");
}

static void test_a_lock_by_its_method(void **state)
{
	static const struct want t[] = {
		{ "POST", L "a", FG_EP_ACQUIRE, FG_APIOP_ACQUIRE, RIGHT, FG_RIGHT_LOCK, "a", NULL },
		{ "POST", L "a/b/c?x=1", FG_EP_ACQUIRE, FG_APIOP_ACQUIRE, RIGHT, FG_RIGHT_LOCK, "a/b/c", NULL },
		{ "PATCH", L "a", FG_EP_RENEW, FG_APIOP_RENEW, RIGHT, FG_RIGHT_LOCK, "a", NULL },
		/* admin: with Fence-Break, which the access step reads */
		{ "DELETE", L "a", FG_EP_RELEASE, FG_APIOP_DELETE, RIGHT, FG_RIGHT_LOCK, "a", NULL },
		{ "GET", L "a", FG_EP_INSPECT, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		{ "HEAD", L "a", FG_EP_INSPECT, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		/* observe: wait_ms in the query, not in the name */
		{ "GET", L "a?wait_ms=100", FG_EP_OBSERVE, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		{ "GET", L "a?token=3&wait_ms=0", FG_EP_OBSERVE, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		{ "HEAD", L "a?wait_ms=5", FG_EP_OBSERVE, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		{ "GET", L "a?token=3", FG_EP_INSPECT, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		{ "GET", L "wait_ms=5", FG_EP_INSPECT, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		/* another method: 405, a known principal only */
		{ "PUT", L "a", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "a", "GET, POST, PATCH, DELETE" },
		{ "OPTIONS", L "a", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "a", "GET, POST, PATCH, DELETE" },
		{ "post", L "a", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "a", "GET, POST, PATCH, DELETE" },
		{ "", L "a", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "a", "GET, POST, PATCH, DELETE" },
	};

	(void)state;
	check(t, N(t));
}

static void test_a_lock_name_is_decoded_once_and_must_be_valid(void **state)
{
	static const struct want t[] = {
		{ "POST", L "a%2Fb", FG_EP_ACQUIRE, FG_APIOP_ACQUIRE, RIGHT, FG_RIGHT_LOCK, "a/b", NULL },
		{ "GET", L "%61", FG_EP_INSPECT, FG_APIOP_INSPECT, RIGHT, FG_RIGHT_OBSERVE, "a", NULL },
		/* not a name: 400 bad_lock_name whatever the method, counted by
		 * the method, a known principal only */
		{ "POST", L "..", FG_EP_ACQUIRE, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "POST", L "a//b", FG_EP_ACQUIRE, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "POST", L "a b", FG_EP_ACQUIRE, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "PATCH", L "a%", FG_EP_RENEW, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "DELETE", L "a%zz", FG_EP_RELEASE, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "GET", L "a%00b", FG_EP_INSPECT, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "GET", L "a%20b", FG_EP_INSPECT, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "PUT", L "..", FG_EP_OTHER, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		/* no name */
		{ "POST", L, FG_EP_OTHER, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
		{ "POST", L "?x", FG_EP_OTHER, FG_APIOP_BAD_NAME, WHO, ANY, "", NULL },
	};

	(void)state;
	check(t, N(t));

	/* 255 bytes are a name, 256 are not */
	char target[512], name[300];
	memset(name, 'n', 256);
	name[255] = '\0';
	snprintf(target, sizeof(target), L "%s", name);
	struct fg_apiroute r;
	fg_apiroute_match(&r, "POST", target);
	assert_int_equal(r.op, FG_APIOP_ACQUIRE);
	assert_string_equal(r.name, name);
	name[255] = 'n';
	name[256] = '\0';
	snprintf(target, sizeof(target), L "%s", name);
	fg_apiroute_match(&r, "POST", target);
	assert_int_equal(r.op, FG_APIOP_BAD_NAME);
	assert_string_equal(r.name, "");
}

static void test_the_paths_without_a_name(void **state)
{
	static const struct want t[] = {
		/* the listing: observe: on what the prefix names */
		{ "GET", "/_fence/v1/locks", FG_EP_OTHER, FG_APIOP_LIST, FG_APINEED_PREFIX, FG_RIGHT_OBSERVE, "", NULL },
		{ "HEAD", "/_fence/v1/locks?prefix=a/", FG_EP_OTHER, FG_APIOP_LIST, FG_APINEED_PREFIX, FG_RIGHT_OBSERVE, "", NULL },
		{ "POST", "/_fence/v1/locks", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "", "GET" },
		/* the check: observe: on the sequencer's lock */
		{ "POST", "/_fence/v1/check", FG_EP_CHECK, FG_APIOP_CHECK, FG_APINEED_SEQUENCER, FG_RIGHT_OBSERVE, "", NULL },
		{ "GET", "/_fence/v1/check", FG_EP_CHECK, FG_APIOP_NOT_ALLOWED, WHO, ANY, "", "POST" },
		/* which lock guards a path: any known principal */
		{ "GET", "/_fence/v1/route?path=/a/b", FG_EP_OTHER, FG_APIOP_ROUTE, WHO, FG_RIGHT_OBSERVE, "", NULL },
		{ "HEAD", "/_fence/v1/route", FG_EP_OTHER, FG_APIOP_ROUTE, WHO, FG_RIGHT_OBSERVE, "", NULL },
		{ "POST", "/_fence/v1/route", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "", "GET" },
		/* open, whatever the method; counted by the path alone */
		{ "GET", "/_fence/v1/health", FG_EP_HEALTH, FG_APIOP_HEALTH, OPEN, ANY, "", NULL },
		{ "GET", "/_fence/v1/health?verbose=1", FG_EP_HEALTH, FG_APIOP_HEALTH, OPEN, ANY, "", NULL },
		{ "HEAD", "/_fence/v1/health", FG_EP_HEALTH, FG_APIOP_HEALTH, OPEN, ANY, "", NULL },
		{ "DELETE", "/_fence/v1/health", FG_EP_HEALTH, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		{ "GET", "/_fence/v1/livez", FG_EP_LIVEZ, FG_APIOP_LIVEZ, OPEN, ANY, "", NULL },
		{ "POST", "/_fence/v1/livez", FG_EP_LIVEZ, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		{ "GET", "/_fence/v1/readyz", FG_EP_READYZ, FG_APIOP_READYZ, OPEN, ANY, "", NULL },
		{ "PUT", "/_fence/v1/readyz", FG_EP_READYZ, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		/* metrics: the right, whatever the method */
		{ "GET", "/_fence/v1/metrics", FG_EP_METRICS, FG_APIOP_METRICS, RIGHT, FG_RIGHT_METRICS, "", NULL },
		{ "POST", "/_fence/v1/metrics", FG_EP_METRICS, FG_APIOP_NOT_ALLOWED, RIGHT, FG_RIGHT_METRICS, "", "GET" },
		/* the API's document: open, as the probes, whatever the method */
		{ "GET", "/_fence/v1/openapi.json", FG_EP_OTHER, FG_APIOP_OPENAPI, OPEN, ANY, "", NULL },
		{ "HEAD", "/_fence/v1/openapi.json?x=1", FG_EP_OTHER, FG_APIOP_OPENAPI, OPEN, ANY, "", NULL },
		{ "POST", "/_fence/v1/openapi.json", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		/* the status page: open (it holds no data), whatever the method */
		{ "GET", "/_fence/v1/ui/", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui/?prefix=a/", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "HEAD", "/_fence/v1/ui/ui.css", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui/ui.js", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui/icon.svg", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui", FG_EP_OTHER, FG_APIOP_UI, OPEN, ANY, "", NULL },
		{ "POST", "/_fence/v1/ui/", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		{ "DELETE", "/_fence/v1/ui/ui.js", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, OPEN, ANY, "", "GET" },
		/* the events: observe: on what the prefix names, as the listing */
		{ "GET", "/_fence/v1/events?prefix=a/", FG_EP_OTHER, FG_APIOP_EVENTS, FG_APINEED_PREFIX, FG_RIGHT_OBSERVE, "", NULL },
		{ "HEAD", "/_fence/v1/events", FG_EP_OTHER, FG_APIOP_EVENTS, FG_APINEED_PREFIX, FG_RIGHT_OBSERVE, "", NULL },
		{ "POST", "/_fence/v1/events", FG_EP_OTHER, FG_APIOP_NOT_ALLOWED, WHO, ANY, "", "GET" },
	};

	(void)state;
	check(t, N(t));
}

static void test_anything_else_is_not_found(void **state)
{
	static const struct want t[] = {
		{ "GET", "/_fence/v1/health/", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/healthz", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/metric", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/openapi", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/openapi.json/", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui/index.html", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui/ui.css/", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/ui//", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v2/health", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/Locks/a", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/v1/lock/a", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "GET", "/_fence/", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		{ "POST", "/_fence/v1/locksa", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
		/* outside /_fence/: nothing the lock API knows */
		{ "GET", "/a.txt", FG_EP_OTHER, FG_APIOP_NOT_FOUND, WHO, ANY, "", NULL },
	};

	(void)state;
	check(t, N(t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoint_names),
		cmocka_unit_test(test_a_lock_by_its_method),
		cmocka_unit_test(test_a_lock_name_is_decoded_once_and_must_be_valid),
		cmocka_unit_test(test_the_paths_without_a_name),
		cmocka_unit_test(test_anything_else_is_not_found),
	};

	return cmocka_run_group_tests_name("apiroute", tests, NULL, NULL);
}
