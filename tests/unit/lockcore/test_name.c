/*
 * tests/unit/lockcore/test_name.c - fg_name_valid (lockcore/name.c).
 *
 * Pins the lock-name grammar of fencegate/name.h: 1..FG_NAME_MAX bytes of
 * [A-Za-z0-9._~/-], no "", "." or ".." segment, judged on name[0..len)
 * only. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fencegate/name.h"

/* The test's own copy of the alphabet, independent of name.c. */
static const char allowed[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	"._~/-";

static bool valid_str(const char *s)
{
	return fg_name_valid(s, strlen(s));
}

static void test_valid_names(void **state)
{
	static const char *const ok[] = {
		"a",
		"Z",
		"0",
		"-",
		"_",
		"~",
		"a/b",
		"a/b/c",
		"orders/2024/eu-west-1",
		"svc.db~primary_lock",
		"...",
		".a",
		"a.",
		"..a",
		"a..",
		"a..b",
		"x/.../y",
		"x/.hidden/y",
		"x/..z/y",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (!valid_str(ok[i]))
			fail_msg("should be valid: \"%s\"", ok[i]);
	}
}

static void test_bad_segments(void **state)
{
	static const char *const bad[] = {
		"/",
		"//",
		"/a",
		"a/",
		"a//b",
		"a/b/",
		"/a/b",
		".",
		"..",
		"./a",
		"../a",
		"a/.",
		"a/..",
		"a/./b",
		"a/../b",
		"./..",
		"a/b//c",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (valid_str(bad[i]))
			fail_msg("should be invalid: \"%s\"", bad[i]);
	}
}

static void test_bad_chars(void **state)
{
	static const char *const bad[] = {
		"a%2e", "a{b", "a}b", "{a}", "a b", " a", "a ", "a\tb",
		"a\nb", "a+b", "a:b", "a*b", "a?b", "a#b", "a\\b", "a\"b",
		"a'b", "a,b", "a;b", "a=b", "a@b", "a!b", "a$b", "a&b",
		"a(b", "a|b", "a<b", "a\177b", "caf\xc3\xa9",
		"\xe2\x98\x83", "a\x80", "\xff",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (valid_str(bad[i]))
			fail_msg("should be invalid: \"%s\"", bad[i]);
	}
}

/* Every byte value in the middle of "a?a": valid iff it is in the alphabet. */
static void test_every_byte(void **state)
{
	(void)state;
	for (int c = 0; c < 256; c++) {
		char s[3] = { 'a', (char)c, 'a' };
		bool want = c != 0 && strchr(allowed, c) != NULL;

		if (fg_name_valid(s, sizeof(s)) != want)
			fail_msg("byte 0x%02x: expected %d", c, want);
	}
}

static void test_nul_inside_length(void **state)
{
	(void)state;
	assert_false(fg_name_valid("a\0b", 3));
	assert_false(fg_name_valid("ab\0", 3));
	assert_false(fg_name_valid("\0", 1));
	/* The same bytes are fine when the NUL is outside the length. */
	assert_true(fg_name_valid("a\0b", 1));
}

static void test_lengths(void **state)
{
	char buf[FG_NAME_MAX + 2];

	(void)state;
	assert_false(fg_name_valid("", 0));
	assert_false(fg_name_valid("abc", 0));
	assert_false(fg_name_valid(NULL, 0));
	assert_false(fg_name_valid(NULL, 3));

	memset(buf, 'a', sizeof(buf));
	assert_true(fg_name_valid(buf, 1));
	assert_true(fg_name_valid(buf, FG_NAME_MAX - 1));
	assert_true(fg_name_valid(buf, FG_NAME_MAX));
	assert_false(fg_name_valid(buf, FG_NAME_MAX + 1));
	assert_false(fg_name_valid(buf, FG_NAME_MAX + 2));
	assert_false(fg_name_valid(buf, (size_t)-1));

	/* 255 bytes whose last segment is "..", and one ending in '/'. */
	buf[FG_NAME_MAX - 3] = '/';
	buf[FG_NAME_MAX - 2] = '.';
	buf[FG_NAME_MAX - 1] = '.';
	assert_false(fg_name_valid(buf, FG_NAME_MAX));
	assert_false(fg_name_valid(buf, FG_NAME_MAX - 1)); /* ends in "/." */
	assert_false(fg_name_valid(buf, FG_NAME_MAX - 2)); /* ends in "/" */
	buf[FG_NAME_MAX - 1] = 'b';
	assert_true(fg_name_valid(buf, FG_NAME_MAX)); /* ends in "/.b" */
}

/* Only name[0..len) counts: what follows is never looked at. */
static void test_reads_only_len(void **state)
{
	char *heap;

	(void)state;
	assert_true(fg_name_valid("ab{}", 2));
	assert_true(fg_name_valid("a/..", 1));
	assert_true(fg_name_valid("a/", 1));
	assert_false(fg_name_valid("a/", 2));

	/* An exact-size heap block without NUL: ASan reports any over-read. */
	heap = malloc(FG_NAME_MAX);
	assert_non_null(heap);
	memset(heap, 'q', FG_NAME_MAX);
	assert_true(fg_name_valid(heap, FG_NAME_MAX));
	free(heap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_names),
		cmocka_unit_test(test_bad_segments),
		cmocka_unit_test(test_bad_chars),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_nul_inside_length),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_reads_only_len),
	};

	return cmocka_run_group_tests_name("name", tests, NULL, NULL);
}
