/*
 * tests/unit/fencectl/test_gateways.c - the gateway list
 * (fencectl/gateways.c).
 *
 * Pins gateways.h: comma lists append in order, repeated sources add up,
 * an empty element or a 17th gateway is refused with a message naming its
 * source and leaves the list as it was, and a URL is shown without the
 * user and password it may carry. cmocka's asserts do not depend on
 * NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateways.h"

static void test_lists_append_in_order(void **state)
{
	(void)state;
	struct fg_gateways gw = { 0 };
	char msg[256];

	assert_int_equal(fg_gateways_add(&gw, "--gateway", "http://a:1",
					 msg, sizeof(msg)), 0);
	assert_int_equal(fg_gateways_add(&gw, "--gateway",
					 "http://b:2/p,https://c:3", msg,
					 sizeof(msg)), 0);
	assert_int_equal(gw.n, 3);
	assert_string_equal(gw.url[0], "http://a:1");
	assert_string_equal(gw.url[1], "http://b:2/p");
	assert_string_equal(gw.url[2], "https://c:3");
	assert_int_equal(gw.current, 0);
	fg_gateways_clear(&gw);
	assert_int_equal(gw.n, 0);
}

static void refused(const char *list, const char *want)
{
	struct fg_gateways gw = { 0 };
	char msg[256];

	assert_int_equal(fg_gateways_add(&gw, "X", "http://first", msg,
					 sizeof(msg)), 0);
	assert_int_equal(fg_gateways_add(&gw, "FENCEGATE_URL", list, msg,
					 sizeof(msg)), -1);
	assert_non_null(strstr(msg, want));
	/* the list is as it was */
	assert_int_equal(gw.n, 1);
	assert_string_equal(gw.url[0], "http://first");
	fg_gateways_clear(&gw);
}

static void test_empty_elements_and_too_many_are_refused(void **state)
{
	(void)state;
	char many[1024] = "";

	refused("", "FENCEGATE_URL: an empty gateway URL in ''");
	refused("http://a,,http://b", "an empty gateway URL");
	refused("http://a,", "an empty gateway URL");
	refused(",http://a", "an empty gateway URL");
	for (int i = 0; i < 16; i++)
		strcat(many, i ? ",http://h" : "http://h");
	refused(many, "FENCEGATE_URL: more than 16 gateways");
}

static void test_sixteen_fit(void **state)
{
	(void)state;
	struct fg_gateways gw = { 0 };
	char many[1024] = "", msg[256];

	for (int i = 0; i < 16; i++)
		strcat(many, i ? ",http://h" : "http://h");
	assert_int_equal(fg_gateways_add(&gw, "X", many, msg, sizeof(msg)),
			 0);
	assert_int_equal(gw.n, 16);
	fg_gateways_clear(&gw);
}

static void test_shown_without_user_and_password(void **state)
{
	(void)state;
	char buf[256];

	assert_string_equal(fg_gateways_shown("http://u:secret@h:1/x", buf,
					      sizeof(buf)), "http://h:1/x");
	assert_string_equal(fg_gateways_shown("https://a@b:pw@h", buf,
					      sizeof(buf)), "https://h");
	assert_string_equal(fg_gateways_shown("http://h:1/x@y", buf,
					      sizeof(buf)), "http://h:1/x@y");
	assert_string_equal(fg_gateways_shown("http://h?q=a@b", buf,
					      sizeof(buf)), "http://h?q=a@b");
	assert_string_equal(fg_gateways_shown("no-scheme", buf, sizeof(buf)),
			    "no-scheme");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists_append_in_order),
		cmocka_unit_test(test_empty_elements_and_too_many_are_refused),
		cmocka_unit_test(test_sixteen_fit),
		cmocka_unit_test(test_shown_without_user_and_password),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
