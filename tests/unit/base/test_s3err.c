/*
 * test_s3err.c - unit tests of gateway/base/s3err.c: the S3 code and
 * status of every fencegate error and of S3's own codes, the XML error
 * body (escaping, the stale token's elements) and its bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/errors.h"
#include "base/s3err.h"

/* "Fence" + the CamelCase of a snake_case code, computed here on its own */
static void camel(const char *snake, char *out, size_t cap)
{
	size_t o = (size_t)snprintf(out, cap, "Fence");
	bool up = true;
	for (const char *p = snake; *p && o + 1 < cap; p++) {
		if (*p == '_') {
			up = true;
			continue;
		}
		out[o++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
		up = false;
	}
	out[o] = '\0';
}

static void test_every_fence_error(void **state)
{
	(void)state;
	for (int e = 0; e < FG_E_COUNT; e++) {
		struct fg_s3_errdef d = fg_s3_fence_error((enum fg_error)e);
		char want[64];
		if (e == FG_E_LOCK_STORE_UNAVAILABLE)
			snprintf(want, sizeof(want), "FenceStoreUnavailable");
		else
			camel(fg_errors[e].code, want, sizeof(want));
		assert_non_null(d.code);
		if (strcmp(d.code, want) != 0)
			fail_msg("error %s: S3 code %s, want %s", fg_errors[e].code, d.code, want);
		assert_int_equal(d.status, fg_errors[e].status);
		assert_ptr_equal(d.message, fg_errors[e].message);
		assert_int_equal(d.retry_after, fg_errors[e].status == 503 ||
						e == FG_E_TOO_MANY_FAILURES);
	}
	/* out of range: never an answer without a code */
	struct fg_s3_errdef d = fg_s3_fence_error(FG_E_COUNT);
	assert_string_equal(d.code, "FenceInternal");
	assert_int_equal(d.status, 500);
}

/* the contract's list, spelled out */
static void test_contract_codes(void **state)
{
	static const struct {
		enum fg_error e;
		unsigned status;
		const char *code;
	} t[] = {
		{ FG_E_TOKEN_REQUIRED, 428, "FenceTokenRequired" },
		{ FG_E_MALFORMED_TOKEN, 400, "FenceMalformedToken" },
		{ FG_E_BAD_LOCK_NAME, 400, "FenceBadLockName" },
		{ FG_E_BAD_REQUEST, 400, "FenceBadRequest" },
		{ FG_E_FORGED_TOKEN, 403, "FenceForgedToken" },
		{ FG_E_WRONG_LOCK, 403, "FenceWrongLock" },
		{ FG_E_WRONG_MODE, 403, "FenceWrongMode" },
		{ FG_E_SUBTREE_UNGUARDED, 403, "FenceSubtreeUnguarded" },
		{ FG_E_STALE_TOKEN, 409, "FenceStaleToken" },
		{ FG_E_LOCK_STORE_UNAVAILABLE, 503, "FenceStoreUnavailable" },
		{ FG_E_UPSTREAM_UNAVAILABLE, 502, "FenceUpstreamUnavailable" },
		{ FG_E_UPSTREAM_TIMEOUT, 504, "FenceUpstreamTimeout" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_s3_errdef d = fg_s3_fence_error(t[i].e);
		assert_string_equal(d.code, t[i].code);
		assert_int_equal(d.status, t[i].status);
	}
	assert_true(fg_s3_fence_error(FG_E_LOCK_STORE_UNAVAILABLE).retry_after);
	assert_false(fg_s3_fence_error(FG_E_UPSTREAM_UNAVAILABLE).retry_after);
}

static void test_native_codes(void **state)
{
	static const struct {
		enum fg_s3_native n;
		unsigned status;
		const char *code;
	} t[] = {
		{ FG_S3N_ACCESS_DENIED, 403, "AccessDenied" },
		{ FG_S3N_INVALID_ACCESS_KEY_ID, 403, "InvalidAccessKeyId" },
		{ FG_S3N_SIGNATURE_DOES_NOT_MATCH, 403, "SignatureDoesNotMatch" },
		{ FG_S3N_REQUEST_TIME_TOO_SKEWED, 403, "RequestTimeTooSkewed" },
		{ FG_S3N_AUTH_QUERY_PARAMETERS_ERROR, 400, "AuthorizationQueryParametersError" },
		{ FG_S3N_AUTH_HEADER_MALFORMED, 400, "AuthorizationHeaderMalformed" },
		{ FG_S3N_INVALID_REQUEST, 400, "InvalidRequest" },
		{ FG_S3N_MALFORMED_XML, 400, "MalformedXML" },
	};
	(void)state;
	assert_int_equal(sizeof(t) / sizeof(t[0]), FG_S3N_COUNT);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_s3_errdef d = fg_s3_native_error(t[i].n);
		assert_string_equal(d.code, t[i].code);
		assert_int_equal(d.status, t[i].status);
		assert_non_null(d.message);
		assert_false(d.retry_after);
	}
	assert_string_equal(fg_s3_native_error(FG_S3N_COUNT).code, "FenceInternal");
}

static void test_body_shape(void **state)
{
	char out[FG_S3_ERROR_BODY_MAX];
	(void)state;
	int n = fg_s3_error_body(out, sizeof(out), "FenceWrongLock", "no", "/b/k",
				 "req-1", NULL);
	const char *want = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>"
			   "<Code>FenceWrongLock</Code><Message>no</Message>"
			   "<Resource>/b/k</Resource><RequestId>req-1</RequestId></Error>";
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));

	/* absent resource and request id: empty elements */
	n = fg_s3_error_body(out, sizeof(out), "AccessDenied", "m", NULL, NULL, NULL);
	assert_true(n > 0);
	assert_non_null(strstr(out, "<Resource></Resource><RequestId></RequestId></Error>"));
}

static void test_stale_tokens(void **state)
{
	char out[FG_S3_ERROR_BODY_MAX];
	struct fg_s3_stale st = { 41, true, 9007199254740991ull };
	(void)state;
	assert_true(fg_s3_error_body(out, sizeof(out), "FenceStaleToken", "m", "/b/k",
				     "r", &st) > 0);
	assert_non_null(strstr(out, "<RequestId>r</RequestId><Token>41</Token>"
				    "<CurrentToken>9007199254740991</CurrentToken></Error>"));
	st.has_current = false;
	assert_true(fg_s3_error_body(out, sizeof(out), "FenceStaleToken", "m", "/b/k",
				     "r", &st) > 0);
	assert_non_null(strstr(out, "<Token>41</Token><CurrentToken/></Error>"));
}

static void test_escaping(void **state)
{
	static const struct {
		const char *in, *out;
	} t[] = {
		{ "a&b", "a&amp;b" },
		{ "<x>", "&lt;x&gt;" },
		{ "\"q\" 'a'", "&quot;q&quot; &apos;a&apos;" },
		{ "]]>", "]]&gt;" },
		{ "tab\there\nnl", "tab\there\nnl" },
		{ "cr\r", "cr&#13;" },
		{ "bell\a", "bell\xef\xbf\xbd" },
		{ "del\x7f", "del\xef\xbf\xbd" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "bad\xff", "bad\xef\xbf\xbd" },
		{ "over\xc0\xaf", "over\xef\xbf\xbd\xef\xbf\xbd" },
		{ "surr\xed\xa0\x80", "surr\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "nonchar\xef\xbf\xbe", "nonchar\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd" },
	};
	char out[FG_S3_ERROR_BODY_MAX], want[512];
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_true(fg_s3_error_body(out, sizeof(out), "C", t[i].in, t[i].in,
					     t[i].in, NULL) > 0);
		snprintf(want, sizeof(want), "<Message>%s</Message><Resource>%s</Resource>"
			 "<RequestId>%s</RequestId>", t[i].out, t[i].out, t[i].out);
		if (!strstr(out, want))
			fail_msg("case %zu: %s", i, out);
	}
	/* the code is escaped too */
	assert_true(fg_s3_error_body(out, sizeof(out), "<&>", "m", NULL, NULL, NULL) > 0);
	assert_non_null(strstr(out, "<Code>&lt;&amp;&gt;</Code>"));
}

static void test_bounds(void **state)
{
	char big[8192];
	char *out = malloc(FG_S3_ERROR_BODY_MAX);
	(void)state;
	assert_non_null(out);

	/* the worst case fits FG_S3_ERROR_BODY_MAX: every field over its
	 * bound, every byte escaping to six */
	memset(big, '"', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	struct fg_s3_stale st = { UINT64_MAX, true, UINT64_MAX };
	int n = fg_s3_error_body(out, FG_S3_ERROR_BODY_MAX, big, big, big, big, &st);
	assert_true(n > 0 && (size_t)n < FG_S3_ERROR_BODY_MAX);
	assert_int_equal(strlen(out), n);
	/* each field was cut at its bound */
	char *m = strstr(out, "<Message>") + 9;
	assert_int_equal(strstr(m, "</Message>") - m, 6 * FG_S3_MESSAGE_MAX);

	/* a buffer one byte short: -1 and "" */
	memset(out, 'x', FG_S3_ERROR_BODY_MAX);
	assert_int_equal(fg_s3_error_body(out, (size_t)n, big, big, big, big, &st), -1);
	assert_string_equal(out, "");
	/* exactly enough */
	assert_int_equal(fg_s3_error_body(out, (size_t)n + 1, big, big, big, big, &st), n);

	/* a cut never splits a character: 1023 ASCII, then a 3-byte one */
	memset(big, 'a', FG_S3_MESSAGE_MAX - 1);
	memcpy(big + FG_S3_MESSAGE_MAX - 1, "\xe2\x82\xac", 4);
	assert_true(fg_s3_error_body(out, FG_S3_ERROR_BODY_MAX, "C", big, NULL, NULL, NULL) > 0);
	m = strstr(out, "<Message>") + 9;
	assert_int_equal(strstr(m, "</Message>") - m, FG_S3_MESSAGE_MAX - 1);

	/* nothing fits in nothing */
	assert_int_equal(fg_s3_error_body(out, 0, "C", "m", NULL, NULL, NULL), -1);
	assert_int_equal(fg_s3_error_body(out, 10, "C", "m", NULL, NULL, NULL), -1);
	assert_string_equal(out, "");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_fence_error),
		cmocka_unit_test(test_contract_codes),
		cmocka_unit_test(test_native_codes),
		cmocka_unit_test(test_body_shape),
		cmocka_unit_test(test_stale_tokens),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests_name("s3err", tests, NULL, NULL);
}
