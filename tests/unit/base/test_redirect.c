/*
 * tests/unit/base/test_redirect.c - the upstream's own address in what crosses
 * the gateway (gateway/base/redirect.c).
 *
 * Pins redirect.h: a Destination is the upstream's absolute URI without
 * userinfo; a Location naming the upstream's base URL (scheme and
 * authority without case, base path exact, at a path boundary) or, with a
 * base path, a path under it, names the client's address; everything else
 * is left alone (NULL). cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/redirect.h"

static struct fg_upstream up_of(const char *url)
{
	struct fg_upstream up;
	assert_int_equal(fg_upstream_parse(url, &up), 0);
	return up;
}

static void dest_is(const char *url, const char *path, const char *want)
{
	struct fg_upstream up = up_of(url);
	char out[256];
	assert_int_equal(fg_redirect_destination(up.base, up.base_path, path, strlen(path), out,
						 sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void test_destination_is_the_upstreams_absolute_uri(void **s)
{
	(void)s;
	dest_is("http://127.0.0.1:9000", "/a/b.txt", "http://127.0.0.1:9000/a/b.txt");
	dest_is("http://store:9000/data", "/a/", "http://store:9000/data/a/");
	dest_is("https://store/data/x", "/y", "https://store/data/x/y");
	dest_is("http://[::1]:9000/d", "/y", "http://[::1]:9000/d/y");
	/* the upstream's credentials never go into a header */
	dest_is("http://user:pw@store:9000/data", "/y", "http://store:9000/data/y");
}

static void test_destination_that_does_not_fit_is_refused(void **s)
{
	(void)s;
	struct fg_upstream up = up_of("http://store:9000/data");
	char out[16];
	assert_int_equal(fg_redirect_destination(up.base, up.base_path, "/a/b.txt", 8, out,
						 sizeof(out)), -1);
}

static void answer_is(const char *url, const char *v, const char *host,
		      const char *want)
{
	struct fg_upstream up = up_of(url);
	bool drop = true;
	char *got = fg_redirect_answer(up.base, up.base_path, v, "http", host,
				       &drop);
	if (!want) {
		assert_null(got);
		assert_false(drop);
		return;
	}
	assert_false(drop);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_location_naming_the_upstream_names_the_gateway(void **s)
{
	(void)s;
	const char *u = "http://store:9000/data";
	answer_is(u, "http://store:9000/data/a/b.txt", "gw:8080", "http://gw:8080/a/b.txt");
	answer_is(u, "http://store:9000/data", "gw", "http://gw/");
	answer_is(u, "http://store:9000/data?x", "gw", "http://gw/?x");
	answer_is(u, "HTTP://STORE:9000/data/c", "gw", "http://gw/c");
	answer_is(u, "http://store:9000/data/c", NULL, "/c");
	answer_is(u, "/data/a", "gw", "/a");
	answer_is(u, "/data", "gw", "/");
	answer_is("http://user@store:9000/data", "http://store:9000/data/c", "gw",
		  "http://gw/c");
	answer_is("http://store:9000", "http://store:9000/c", "gw", "http://gw/c");
}

static void dropped(const char *url, const char *v)
{
	struct fg_upstream up = up_of(url);
	bool drop = false;
	char *got = fg_redirect_answer(up.base, up.base_path, v, "http", "gw",
				       &drop);
	assert_null(got);
	assert_true(drop);
}

static void test_location_naming_the_upstream_outside_its_base_is_dropped(void **s)
{
	(void)s;
	const char *u = "http://store:9000/data";
	dropped(u, "http://store:9000/database");
	dropped(u, "http://store:9000/Data/x");
	dropped(u, "http://store:9000/other/x");
	dropped(u, "http://store:9000/");
	dropped(u, "http://store:9000");
	dropped(u, "HTTP://Store:9000/x?y");
	dropped(u, "//store:9000/elsewhere");
}

static void test_network_path_naming_the_upstream_names_the_gateway(void **s)
{
	(void)s;
	answer_is("http://store:9000/data", "//store:9000/data/x", "gw", "//gw/x");
	answer_is("http://store:9000", "//STORE:9000/x", "gw", "//gw/x");
}

static void test_location_naming_anything_else_is_left_alone(void **s)
{
	(void)s;
	const char *u = "http://store:9000/data";
	answer_is(u, "http://store:9001/data/x", "gw", NULL);
	answer_is(u, "https://store:9000/data/x", "gw", NULL);
	answer_is(u, "http://store:90000/data/x", "gw", NULL);
	answer_is(u, "http://store:9000.evil/data/x", "gw", NULL);
	answer_is(u, "http://other/data/x", "gw", NULL);
	answer_is(u, "//store:9001/data/x", "gw", NULL);
	answer_is(u, "/database", "gw", NULL);
	answer_is(u, "data/x", "gw", NULL);
	answer_is(u, "", "gw", NULL);
	/* without a base path, a path is the same through the gateway */
	answer_is("http://store:9000", "/x", "gw", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_destination_is_the_upstreams_absolute_uri),
		cmocka_unit_test(test_destination_that_does_not_fit_is_refused),
		cmocka_unit_test(test_location_naming_the_upstream_names_the_gateway),
		cmocka_unit_test(test_location_naming_the_upstream_outside_its_base_is_dropped),
		cmocka_unit_test(test_network_path_naming_the_upstream_names_the_gateway),
		cmocka_unit_test(test_location_naming_anything_else_is_left_alone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
