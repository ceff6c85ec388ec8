/*
 * tests/unit/proc/test_report.c - the LOG phase (gateway/proc/report.c).
 *
 * Pins report.h: a closed record is counted once in the request metrics
 * and written once to the access log; a fenced request's decision goes to
 * the fence counters (a check that passed, an admission, a refusal with
 * its reason), an answer of the access step to the auth refusals, and a
 * record that never began is not reported. The metrics and the access log
 * are stand-ins here (report.c and record.c are compiled alone): nothing
 * is written, and the stand-ins note what they were handed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/errors.h"
#include "base/record.h"
#include "proc/accesslog.h"
#include "proc/metrics.h"
#include "proc/report.h"

/* ---- stand-ins for proc/ ------------------------------------------- */

/* What the stand-ins were handed since the last reset. */
static struct {
	unsigned requests, access_lines, fences, auth_refusals;
	enum fg_endpoint endpoint;
	unsigned status;
	const struct fg_rec *logged;
	bool fence_checked, fence_admitted;
	int fence_refusal;
	enum fg_auth_refusal auth_refusal;
} seen;

bool fg_accesslog_on(void)
{
	return false; /* no peer address is read: the test has no connection */
}

void fg_accesslog_write(const char *gw_id, const struct fg_rec *r)
{
	(void)gw_id;
	seen.access_lines++;
	seen.logged = r;
}

void fg_metrics_request(enum fg_endpoint r, unsigned status, uint64_t ns,
			uint64_t bytes_in, uint64_t bytes_out)
{
	(void)ns;
	(void)bytes_in;
	(void)bytes_out;
	seen.requests++;
	seen.endpoint = r;
	seen.status = status;
}

void fg_metrics_grant(enum fg_mode mode)
{
	(void)mode;
}

void fg_metrics_renewal(void)
{
}

void fg_metrics_release(void)
{
}

void fg_metrics_expiry(void)
{
}

void fg_metrics_auth_refused(enum fg_auth_refusal why)
{
	seen.auth_refusals++;
	seen.auth_refusal = why;
}

void fg_metrics_fence(bool admitted, bool write, int refusal, uint64_t ns)
{
	(void)ns;
	seen.fences++;
	seen.fence_checked = admitted;
	seen.fence_admitted = write;
	seen.fence_refusal = refusal;
}

/* ---- helpers ------------------------------------------------------- */

static struct fg_rec rec;
static struct fg_apiroute route;
static char uri_buf[512];

/* A request whose line was just read, its handler running (routed, as
 * the front routes a request under /_fence/). */
static struct fg_rec *start(const char *method, const char *uri)
{
	memset(&rec, 0, sizeof(rec));
	memset(&seen, 0, sizeof(seen));
	snprintf(uri_buf, sizeof(uri_buf), "%s", uri);
	fg_rec_begin(&rec, uri_buf);
	fg_rec_enter(&rec, method);
	memset(&route, 0, sizeof(route));
	if (!rec.proxied)
		fg_apiroute_match(&route, method, uri_buf);
	rec.route = &route;
	return &rec;
}

/* Ends the handler, closes the record and reports it. */
static void finish(struct fg_rec *r, bool completed_ok)
{
	fg_rec_leave();
	fg_rec_close(r, completed_ok, 0);
	fg_report("0123456789abcdef", r);
}

static void test_a_record_never_begun_is_not_reported(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	memset(&seen, 0, sizeof(seen));
	fg_report("0123456789abcdef", &rec);
	assert_int_equal(seen.requests, 0);
	assert_int_equal(seen.access_lines, 0);
}

/* ---- what a closed record is handed on to ------------------------- */

static void test_a_record_is_reported_once(void **state)
{
	struct fg_rec *r = start("GET", "/_fence/v1/readyz");

	(void)state;
	fg_rec_answered(503, FG_E_LOCK_STORE_UNAVAILABLE, 10);
	finish(r, true);
	assert_int_equal(seen.requests, 1);
	assert_int_equal(seen.endpoint, FG_EP_READYZ);
	assert_int_equal(seen.status, 503);
	assert_int_equal(seen.access_lines, 1);
	assert_ptr_equal(seen.logged, r);
	assert_int_equal(seen.fences, 0);
	assert_int_equal(seen.auth_refusals, 0);
}

static void test_each_decision_of_a_fenced_request(void **state)
{
	static const struct {
		enum fg_decision dec;
		bool counted, checked, admitted;
	} t[] = {
		{ FG_DEC_NONE, false, false, false },
		{ FG_DEC_PASS, false, false, false },
		{ FG_DEC_CHECKED, true, true, false },
		{ FG_DEC_ADMITTED, true, true, true },
		{ FG_DEC_REFUSED, true, false, false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_rec *r = start("PUT", "/a.txt");
		r->fenced = true;
		if (t[i].dec == FG_DEC_REFUSED)
			fg_rec_refused(FG_E_STALE_TOKEN, "a.txt", 3, true, 4);
		else
			r->decision = t[i].dec;
		finish(r, true);
		if (seen.fences != (t[i].counted ? 1u : 0u))
			fail_msg("decision %d: %u fence counts", (int)t[i].dec,
				 seen.fences);
		if (!t[i].counted)
			continue;
		assert_int_equal(seen.fence_checked, t[i].checked);
		assert_int_equal(seen.fence_admitted, t[i].admitted);
		assert_int_equal(seen.fence_refusal,
				 t[i].dec == FG_DEC_REFUSED ? FG_E_STALE_TOKEN : -1);
	}

	/* a decision without a Fencing-Token check is not a fence's */
	struct fg_rec *r = start("PUT", "/a.txt");
	r->decision = FG_DEC_ADMITTED;
	finish(r, true);
	assert_int_equal(seen.fences, 0);
}

static void test_auth_refusals(void **state)
{
	static const struct {
		unsigned status;
		int error;
		bool counted;
		enum fg_auth_refusal why;
	} t[] = {
		{ 401, FG_E_UNAUTHENTICATED, true, FG_AUTH_UNAUTHENTICATED },
		{ 403, FG_E_FORBIDDEN, true, FG_AUTH_FORBIDDEN },
		{ 429, FG_E_TOO_MANY_FAILURES, true, FG_AUTH_THROTTLED },
		{ 409, FG_E_LOCK_HELD, false, 0 },
		{ 200, -1, false, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_rec *r = start("POST", "/_fence/v1/locks/a");
		fg_rec_answered(t[i].status, t[i].error, 0);
		finish(r, true);
		assert_int_equal(seen.auth_refusals, t[i].counted ? 1 : 0);
		if (t[i].counted)
			assert_int_equal(seen.auth_refusal, t[i].why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_record_never_begun_is_not_reported),
		cmocka_unit_test(test_a_record_is_reported_once),
		cmocka_unit_test(test_each_decision_of_a_fenced_request),
		cmocka_unit_test(test_auth_refusals),
	};

	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
