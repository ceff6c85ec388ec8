/*
 * tests/unit/fencectl/test_lockurl.c - lock API URLs built by fencectl
 * (fencectl/lockurl.c).
 *
 * Pins lockurl.h: '/' separates segments and stays; the unreserved
 * characters stay; every other byte of a segment is percent-encoded, so
 * that the path decodes to exactly the name it came from; the gateway URL
 * loses its trailing '/'s; the query follows a '?'. cmocka's asserts do
 * not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lockurl.h"

static void escaped(const char *name, const char *want)
{
	char out[1024];
	int n = fg_lockurl_escape(name, out, sizeof(out));

	assert_int_equal(n, (int)strlen(want));
	assert_string_equal(out, want);
}

static void test_valid_names_are_unchanged(void **state)
{
	(void)state;
	escaped("orders/42", "orders/42");
	escaped("bucket/a.txt", "bucket/a.txt");
	escaped("A-Z_a-z.0-9~", "A-Z_a-z.0-9~");
	escaped("a/b/c/d", "a/b/c/d");
}

static void test_reserved_bytes_are_escaped_per_segment(void **state)
{
	(void)state;
	escaped("a b", "a%20b");
	escaped("a?b", "a%3Fb");
	escaped("a#b", "a%23b");
	escaped("a%2Fb", "a%252Fb");
	escaped("x/a+b/y", "x/a%2Bb/y");
	escaped("a;b=c&d", "a%3Bb%3Dc%26d");
	escaped("caf\xc3\xa9", "caf%C3%A9");
	escaped("\x01\x7f\xff", "%01%7F%FF");
	escaped("{tag}", "%7Btag%7D");
}

static void test_slashes_and_dots_are_left_to_the_gateway(void **state)
{
	(void)state;
	escaped("/a//b/", "/a//b/");
	escaped("a/../b", "a/../b");
	escaped(".", ".");
}

static void test_escape_decodes_back(void **state)
{
	(void)state;
	char name[256], out[1024], back[256];

	for (int i = 0; i < 255; i++)
		name[i] = (char)(i + 1);
	name[255] = '\0';
	int n = fg_lockurl_escape(name, out, sizeof(out));
	assert_true(n > 0);
	size_t j = 0;
	for (int i = 0; i < n; i++) {
		if (out[i] == '%') {
			char hex[3] = { out[i + 1], out[i + 2], 0 };
			back[j++] = (char)strtol(hex, NULL, 16);
			i += 2;
		} else {
			back[j++] = out[i];
		}
	}
	back[j] = '\0';
	assert_string_equal(back, name);
}

static void test_escape_that_does_not_fit_fails(void **state)
{
	(void)state;
	char out[6];

	assert_int_equal(fg_lockurl_escape("abcde", out, sizeof(out)), 5);
	assert_int_equal(fg_lockurl_escape("abcdef", out, sizeof(out)), -1);
	assert_int_equal(fg_lockurl_escape("a b", out, sizeof(out)), 5);
	assert_int_equal(fg_lockurl_escape("ab c", out, sizeof(out)), -1);
}

static void test_urls(void **state)
{
	(void)state;
	char *u;

	u = fg_lockurl_lock("http://127.0.0.1:8080", "orders/42", NULL);
	assert_string_equal(u, "http://127.0.0.1:8080/_fence/v1/locks/orders/42");
	free(u);
	u = fg_lockurl_lock("http://h:1/", "a b", "wait_ms=5&after=7");
	assert_string_equal(u, "http://h:1/_fence/v1/locks/a%20b?wait_ms=5&after=7");
	free(u);
	u = fg_lockurl_lock("https://h/base//", "x", NULL);
	assert_string_equal(u, "https://h/base/_fence/v1/locks/x");
	free(u);
	u = fg_lockurl_join("http://h:1///", "/_fence/v1/check");
	assert_string_equal(u, "http://h:1/_fence/v1/check");
	free(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_names_are_unchanged),
		cmocka_unit_test(test_reserved_bytes_are_escaped_per_segment),
		cmocka_unit_test(test_slashes_and_dots_are_left_to_the_gateway),
		cmocka_unit_test(test_escape_decodes_back),
		cmocka_unit_test(test_escape_that_does_not_fit_fails),
		cmocka_unit_test(test_urls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
