/*
 * test_headers.c - unit tests of gateway/upstream/headers.c: which of a
 * client's headers go upstream, which of the upstream's come back, and the
 * lines the gateway adds, in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "upstream/headers.h"

static bool hop(const char *name)
{
	return fg_hdr_hop_by_hop(name, strlen(name));
}

static void test_hop_by_hop(void **state)
{
	(void)state;
	assert_true(hop("Connection"));
	assert_true(hop("keep-alive"));
	assert_true(hop("TRANSFER-ENCODING"));
	assert_true(hop("TE"));
	assert_true(hop("Upgrade"));
	assert_true(hop("Proxy-Authorization"));
	assert_true(hop("Content-Length")); /* the gateway frames the body */
	assert_false(hop("Content-Type"));
	assert_false(hop("Tea"));
	assert_false(hop("T"));
	/* a name given by length, not NUL-terminated */
	assert_true(fg_hdr_hop_by_hop("TE: trailers", 2));
	assert_false(fg_hdr_hop_by_hop("TE: trailers", 3));
}

static void test_named_in_connection(void **state)
{
	(void)state;
	assert_true(fg_hdr_in_connection("close, X-Secret", "x-secret"));
	assert_true(fg_hdr_in_connection(" X-A ,\tX-B", "X-B"));
	assert_false(fg_hdr_in_connection("X-Secrets", "X-Secret"));
	assert_false(fg_hdr_in_connection("X-Secret", "X-Secrets"));
	assert_false(fg_hdr_in_connection("", "X-A"));
	assert_false(fg_hdr_in_connection(NULL, "X-A"));
}

static void test_gateway_owned_never_pass(void **state)
{
	(void)state;
	static const char *const owned[] = {
		"Host", "Expect", "Fencing-Token", "Destination-Fencing-Token",
		"Fence-Lease", "X-Forwarded-Proto", "X-Forwarded-Host",
		"Forwarded", "Destination", "fence-authorization",
	};
	for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
		assert_true(fg_hdr_gateway_owned(owned[i]));
		assert_false(fg_hdr_pass(owned[i], NULL, 0));
	}
	assert_false(fg_hdr_gateway_owned("Authorization"));
	assert_true(fg_hdr_pass("Authorization", NULL, 0));
	/* joined and extended by the gateway, never passed as it came */
	assert_true(fg_hdr_is_xff("x-forwarded-for"));
	assert_false(fg_hdr_pass("X-Forwarded-For", NULL, 0));
}

static void test_pass_policy(void **state)
{
	(void)state;
	assert_true(fg_hdr_pass("User-Agent", NULL, 0));
	assert_true(fg_hdr_pass("Depth", NULL, 0));
	assert_true(fg_hdr_pass("Content-Type", NULL, 0));
	assert_true(fg_hdr_pass("Overwrite", NULL, 0));
	assert_false(fg_hdr_pass("Keep-Alive", NULL, 0));
	assert_false(fg_hdr_pass("X-Hop", "close, x-hop", 0));
	assert_true(fg_hdr_pass("X-Hop", "close", 0));
	/* a shallow request: the client's Depth gives way to "Depth: 0" */
	assert_false(fg_hdr_pass("depth", NULL, FG_HDR_SHALLOW));
	assert_true(fg_hdr_pass("Content-Type", NULL, FG_HDR_SHALLOW));
	assert_true(fg_hdr_pass("Overwrite", NULL, FG_HDR_SHALLOW));
	/* a probe: its own body, nothing written */
	assert_false(fg_hdr_pass("Depth", NULL, FG_HDR_PROBE));
	assert_false(fg_hdr_pass("Content-Type", NULL, FG_HDR_PROBE));
	assert_false(fg_hdr_pass("content-md5", NULL, FG_HDR_PROBE));
	assert_false(fg_hdr_pass("Overwrite", NULL, FG_HDR_PROBE));
	/* its answer is read as sent */
	assert_false(fg_hdr_pass("Accept-Encoding", NULL, FG_HDR_PROBE));
	assert_false(fg_hdr_pass("accept-charset", NULL, FG_HDR_PROBE));
	assert_true(fg_hdr_pass("Accept-Encoding", NULL, 0));
	assert_true(fg_hdr_pass("Authorization", NULL, FG_HDR_PROBE));
	assert_true(fg_hdr_pass("User-Agent", NULL, FG_HDR_PROBE));
}

static void test_xff_join_bounded(void **state)
{
	(void)state;
	char buf[FG_HDR_XFF_MAX];
	size_t len = 0;
	buf[0] = '\0';
	assert_int_equal(fg_hdr_xff_join(buf, sizeof(buf), &len, "10.0.0.1"), 0);
	assert_int_equal(fg_hdr_xff_join(buf, sizeof(buf), &len, "10.0.0.2, 10.0.0.3"), 0);
	assert_string_equal(buf, "10.0.0.1, 10.0.0.2, 10.0.0.3");
	assert_int_equal(len, strlen(buf));

	char small[16];
	len = 0;
	small[0] = '\0';
	assert_int_equal(fg_hdr_xff_join(small, sizeof(small), &len, "1.2.3.4"), 0);
	assert_int_equal(fg_hdr_xff_join(small, sizeof(small), &len, "5.6.7.8"), -1);
	assert_string_equal(small, "1.2.3.4"); /* left as it was */
	assert_int_equal(len, 7);
}

struct lines {
	char line[16][256];
	int n;
	int fail_at; /* emit() refuses this line (-1: none) */
};

static bool emit(void *arg, const char *line)
{
	struct lines *l = arg;
	if (l->n == l->fail_at)
		return false;
	snprintf(l->line[l->n++], sizeof(l->line[0]), "%s", line);
	return true;
}

static void test_added_lines(void **state)
{
	(void)state;
	struct lines l = { .fail_at = -1 };
	struct fg_hdr_forward f = {
		.xff = "", .client_ip = "127.0.0.1", .tls = false,
		.host = "gw.example:8080", .has_accept = true, .flags = 0,
	};
	assert_true(fg_hdr_add(&f, emit, &l));
	assert_int_equal(l.n, 5);
	assert_string_equal(l.line[0], "X-Forwarded-For: 127.0.0.1");
	assert_string_equal(l.line[1], "X-Forwarded-Proto: http");
	assert_string_equal(l.line[2], "X-Forwarded-Host: gw.example:8080");
	assert_string_equal(l.line[3], "Via: 1.1 fencegate");
	assert_string_equal(l.line[4], "Expect:");

	/* a chain, https, no Host, no Accept, shallow */
	memset(&l, 0, sizeof(l));
	l.fail_at = -1;
	f = (struct fg_hdr_forward){
		.xff = "10.0.0.1, 10.0.0.2", .client_ip = "::1", .tls = true,
		.host = NULL, .has_accept = false, .flags = FG_HDR_SHALLOW,
	};
	assert_true(fg_hdr_add(&f, emit, &l));
	assert_int_equal(l.n, 6);
	assert_string_equal(l.line[0], "X-Forwarded-For: 10.0.0.1, 10.0.0.2, ::1");
	assert_string_equal(l.line[1], "X-Forwarded-Proto: https");
	assert_string_equal(l.line[2], "Via: 1.1 fencegate");
	assert_string_equal(l.line[3], "Expect:");
	assert_string_equal(l.line[4], "Depth: 0");
	assert_string_equal(l.line[5], "Accept:");

	/* a probe asks Depth 0 too */
	memset(&l, 0, sizeof(l));
	l.fail_at = -1;
	f.flags = FG_HDR_PROBE;
	f.has_accept = true;
	assert_true(fg_hdr_add(&f, emit, &l));
	assert_string_equal(l.line[l.n - 1], "Depth: 0");
}

static void test_added_lines_fail(void **state)
{
	(void)state;
	struct lines l = { .fail_at = 2 };
	struct fg_hdr_forward f = {
		.client_ip = "127.0.0.1", .host = "h", .has_accept = false,
	};
	assert_false(fg_hdr_add(&f, emit, &l));
	assert_int_equal(l.n, 2); /* nothing after the refused line */

	/* a Host too long for one line */
	static char host[FG_HDR_LINE_MAX];
	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	memset(&l, 0, sizeof(l));
	l.fail_at = -1;
	f.host = host;
	assert_false(fg_hdr_add(&f, emit, &l));
	assert_int_equal(l.n, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hop_by_hop),
		cmocka_unit_test(test_named_in_connection),
		cmocka_unit_test(test_gateway_owned_never_pass),
		cmocka_unit_test(test_pass_policy),
		cmocka_unit_test(test_xff_join_bounded),
		cmocka_unit_test(test_added_lines),
		cmocka_unit_test(test_added_lines_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
