/*
 * tests/unit/base/test_errors.c - the table of error answers
 * (gateway/base/errors.c).
 *
 * Pins errors.h: in fg_errors[] every answer has an error status, a
 * unique snake_case code and a one-line message, and each enum keeps the
 * status and code of the wire contract. cmocka's asserts do not depend on
 * NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/errors.h"

/* ---- errors.c: the table ------------------------------------------- */

static bool snake_case(const char *s)
{
	/* [a-z][a-z0-9]*(_[a-z0-9]+)* */
	if (!s || !(*s >= 'a' && *s <= 'z'))
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '_') {
			if (p[1] == '\0' || p[1] == '_')
				return false;
		} else if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) {
			return false;
		}
	}
	return true;
}

static void test_snake_case_helper(void **state)
{
	(void)state;
	assert_true(snake_case("a"));
	assert_true(snake_case("lock_held"));
	assert_true(snake_case("e2e_x1"));
	assert_false(snake_case(""));
	assert_false(snake_case(NULL));
	assert_false(snake_case("Lock_held"));
	assert_false(snake_case("lock-held"));
	assert_false(snake_case("_lock"));
	assert_false(snake_case("lock_"));
	assert_false(snake_case("lock__held"));
	assert_false(snake_case("1lock"));
	assert_false(snake_case("lock held"));
}

static void test_error_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < FG_E_COUNT; i++) {
		const struct fg_errdef *d = &fg_errors[i];

		if (d->status < 400 || d->status > 599)
			fail_msg("fg_errors[%zu]: status %u is not an error", i,
				 d->status);
		if (!snake_case(d->code))
			fail_msg("fg_errors[%zu]: code \"%s\" is not snake_case", i,
				 d->code ? d->code : "(null)");
		if (!d->message || !d->message[0])
			fail_msg("fg_errors[%zu] (%s): no message", i, d->code);
		if (strchr(d->message, '\n') || d->message[strlen(d->message) - 1] == ' ')
			fail_msg("fg_errors[%zu] (%s): message is not one line", i,
				 d->code);
		for (size_t j = 0; j < i; j++) {
			if (strcmp(fg_errors[j].code, d->code) == 0)
				fail_msg("fg_errors[%zu] and [%zu] share code \"%s\"",
					 j, i, d->code);
		}
	}
}

/* The test's own copy of the wire contract: each enum's status and code. */
static void test_error_codes_pinned(void **state)
{
	static const struct {
		enum fg_error e;
		unsigned status;
		const char *code;
	} want[] = {
		{ FG_E_BAD_LOCK_NAME, 400, "bad_lock_name" },
		{ FG_E_BAD_REQUEST, 400, "bad_request" },
		{ FG_E_PAYLOAD_TOO_LARGE, 413, "payload_too_large" },
		{ FG_E_NOT_FOUND, 404, "not_found" },
		{ FG_E_METHOD_NOT_ALLOWED, 405, "method_not_allowed" },
		{ FG_E_LOCK_HELD, 409, "lock_held" },
		{ FG_E_LEASE_EXPIRED, 410, "lease_expired" },
		{ FG_E_TOO_MANY_WAITERS, 429, "too_many_waiters" },
		{ FG_E_TOKEN_REQUIRED, 428, "token_required" },
		{ FG_E_MALFORMED_TOKEN, 400, "malformed_token" },
		{ FG_E_FORGED_TOKEN, 403, "forged_token" },
		{ FG_E_WRONG_LOCK, 403, "wrong_lock" },
		{ FG_E_WRONG_MODE, 403, "wrong_mode" },
		{ FG_E_STALE_TOKEN, 409, "stale_token" },
		{ FG_E_LOCK_STORE_UNAVAILABLE, 503, "lock_store_unavailable" },
		{ FG_E_UPSTREAM_UNAVAILABLE, 502, "upstream_unavailable" },
		{ FG_E_UPSTREAM_TIMEOUT, 504, "upstream_timeout" },
		{ FG_E_INTERNAL, 500, "internal" },
		{ FG_E_SHUTTING_DOWN, 503, "shutting_down" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct fg_errdef *d = &fg_errors[want[i].e];

		assert_true(want[i].e < FG_E_COUNT);
		if (d->status != want[i].status || !d->code ||
		    strcmp(d->code, want[i].code) != 0)
			fail_msg("error %d: %u %s, expected %u %s", (int)want[i].e,
				 d->status, d->code ? d->code : "(null)",
				 want[i].status, want[i].code);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snake_case_helper),
		cmocka_unit_test(test_error_table),
		cmocka_unit_test(test_error_codes_pinned),
	};

	return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
