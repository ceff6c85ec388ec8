/*
 * tests/unit/fencectl/test_keyfile.c - fencectl's bearer key file
 * (fencectl/keyfile.c).
 *
 * Pins keyfile.h: one trailing newline or CR LF is not part of the key,
 * and nothing else is taken off; an empty file, a key over 1024 bytes, a
 * byte outside RFC 6750's b64token, and a file that cannot be read are
 * refused, each with its own result and a message that names the file and
 * never holds a byte of the key; a refused key leaves nothing behind in
 * the caller's buffer. The files are written in a fresh directory under
 * the test's working directory. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "keyfile.h"

static char dir[64];
static char path[128];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "fencectl-keyfile-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "%s/key", dir);
	unlink(path);
	return rmdir(dir);
}

/* Writes len bytes of data to the test's key file; returns its path. */
static const char *key_file(const void *data, size_t len)
{
	snprintf(path, sizeof(path), "%s/key", dir);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return path;
}

struct read {
	enum fg_keyfile_result res;
	char key[FG_KEY_MAX + 1];
	char msg[512];
};

static void read_bytes(const void *data, size_t len, struct read *r)
{
	memset(r, 0x55, sizeof(*r));	/* so that a buffer left alone shows */
	r->res = fg_keyfile_read(key_file(data, len), "--key-file", r->key,
				 r->msg, sizeof(r->msg));
}

static void read_str(const char *s, struct read *r)
{
	read_bytes(s, strlen(s), r);
}

static void assert_zeroed(const char *key)
{
	for (size_t i = 0; i < FG_KEY_MAX + 1; i++)
		assert_int_equal(key[i], 0);
}

/* A refusal: its result, a message naming the option and the file and
 * saying why, and no key left behind. */
static void assert_refused(const struct read *r, enum fg_keyfile_result res,
			   const char *why)
{
	assert_int_equal(r->res, res);
	assert_non_null(strstr(r->msg, "--key-file"));
	assert_non_null(strstr(r->msg, path));
	assert_non_null(strstr(r->msg, why));
	assert_zeroed(r->key);
}

static void test_key_without_line_end(void **state)
{
	(void)state;
	struct read r;

	read_str("tok3n.-_~+/AZaz09==", &r);
	assert_int_equal(r.res, FG_KEYFILE_OK);
	assert_string_equal(r.key, "tok3n.-_~+/AZaz09==");
}

static void test_one_trailing_newline_is_not_part_of_the_key(void **state)
{
	(void)state;
	struct read r;

	read_str("abc123\n", &r);
	assert_int_equal(r.res, FG_KEYFILE_OK);
	assert_string_equal(r.key, "abc123");
}

static void test_one_trailing_crlf_is_not_part_of_the_key(void **state)
{
	(void)state;
	struct read r;

	read_str("abc123\r\n", &r);
	assert_int_equal(r.res, FG_KEYFILE_OK);
	assert_string_equal(r.key, "abc123");
}

static void test_only_one_line_end_is_taken_off(void **state)
{
	(void)state;
	struct read r;

	/* a second newline, a CR alone, a CR before CR LF: part of the key,
	 * and not bytes a key may hold */
	read_str("abc123\n\n", &r);
	assert_refused(&r, FG_KEYFILE_BAD_BYTE, "cannot contain");
	read_str("abc123\r", &r);
	assert_refused(&r, FG_KEYFILE_BAD_BYTE, "cannot contain");
	read_str("abc123\r\r\n", &r);
	assert_refused(&r, FG_KEYFILE_BAD_BYTE, "cannot contain");
	read_str("abc\n123\n", &r);
	assert_refused(&r, FG_KEYFILE_BAD_BYTE, "cannot contain");
}

static void test_empty_is_refused(void **state)
{
	(void)state;
	struct read r;

	read_str("", &r);
	assert_refused(&r, FG_KEYFILE_EMPTY, "is empty");
	read_str("\n", &r);
	assert_refused(&r, FG_KEYFILE_EMPTY, "is empty");
	read_str("\r\n", &r);
	assert_refused(&r, FG_KEYFILE_EMPTY, "is empty");
}

static void test_1024_bytes_is_the_longest_key(void **state)
{
	(void)state;
	struct read r;
	char buf[FG_KEY_MAX + 8];

	memset(buf, 'k', sizeof(buf));
	read_bytes(buf, FG_KEY_MAX, &r);
	assert_int_equal(r.res, FG_KEYFILE_OK);
	assert_int_equal(strlen(r.key), FG_KEY_MAX);

	memcpy(buf + FG_KEY_MAX, "\r\n", 2);
	read_bytes(buf, FG_KEY_MAX + 2, &r);
	assert_int_equal(r.res, FG_KEYFILE_OK);
	assert_int_equal(strlen(r.key), FG_KEY_MAX);
}

static void test_too_long_is_refused(void **state)
{
	(void)state;
	struct read r;
	static char big[100000];

	memset(big, 'Q', sizeof(big));
	read_bytes(big, FG_KEY_MAX + 1, &r);
	assert_refused(&r, FG_KEYFILE_TOO_LONG, "more than 1024 bytes");
	assert_null(strstr(r.msg, "QQQQ"));

	big[FG_KEY_MAX + 1] = '\n';
	read_bytes(big, FG_KEY_MAX + 2, &r);
	assert_refused(&r, FG_KEYFILE_TOO_LONG, "more than 1024 bytes");

	big[FG_KEY_MAX + 1] = 'Q';
	read_bytes(big, sizeof(big), &r);
	assert_refused(&r, FG_KEYFILE_TOO_LONG, "more than 1024 bytes");
}

static void test_bytes_outside_b64token_are_refused(void **state)
{
	(void)state;
	static const struct {
		const char *data;
		size_t len;
	} bad[] = {
		{ "s3cr3t key", 10 },		/* a blank */
		{ " s3cr3t", 7 },
		{ "s3cr3t\tx", 8 },
		{ "s3cr3t\0x", 8 },		/* a NUL */
		{ "s3c=r3t", 7 },		/* '=' only at the end */
		{ "===", 3 },			/* and after a token char */
		{ "s3cr3t\xc3\xa9", 8 },	/* not ASCII */
		{ "s3cr3t:x", 8 },
		{ "Bearer s3cr3t", 13 },
		{ "s3cr3t\x7f", 7 },
	};
	struct read r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		read_bytes(bad[i].data, bad[i].len, &r);
		assert_refused(&r, FG_KEYFILE_BAD_BYTE, "cannot contain");
		assert_null(strstr(r.msg, "s3cr3t"));
		assert_null(strstr(r.msg, "r3t"));
	}
}

static void test_unreadable_is_refused(void **state)
{
	(void)state;
	struct read r;

	snprintf(path, sizeof(path), "%s/no-such-file", dir);
	memset(&r, 0x55, sizeof(r));
	r.res = fg_keyfile_read(path, "FENCEGATE_KEY_FILE", r.key, r.msg,
				sizeof(r.msg));
	assert_int_equal(r.res, FG_KEYFILE_UNREADABLE);
	assert_non_null(strstr(r.msg, "FENCEGATE_KEY_FILE"));
	assert_non_null(strstr(r.msg, path));
	assert_non_null(strstr(r.msg, "cannot read it"));
	assert_zeroed(r.key);

	/* a directory opens, and then cannot be read */
	memset(&r, 0x55, sizeof(r));
	r.res = fg_keyfile_read(dir, "--key-file", r.key, r.msg, sizeof(r.msg));
	assert_int_equal(r.res, FG_KEYFILE_UNREADABLE);
	assert_non_null(strstr(r.msg, "cannot read it"));
	assert_zeroed(r.key);
}

static void test_token_grammar(void **state)
{
	(void)state;
	assert_true(fg_keyfile_token_ok("a", 1));
	assert_true(fg_keyfile_token_ok("a=", 2));
	assert_true(fg_keyfile_token_ok("+/==", 4));
	assert_true(fg_keyfile_token_ok("-._~", 4));
	assert_false(fg_keyfile_token_ok("", 0));
	assert_false(fg_keyfile_token_ok("=", 1));
	assert_false(fg_keyfile_token_ok("a=b", 3));
	assert_false(fg_keyfile_token_ok("a b", 3));
	assert_false(fg_keyfile_token_ok("a\0b", 3));
	assert_false(fg_keyfile_token_ok("a,b", 3));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_without_line_end),
		cmocka_unit_test(test_one_trailing_newline_is_not_part_of_the_key),
		cmocka_unit_test(test_one_trailing_crlf_is_not_part_of_the_key),
		cmocka_unit_test(test_only_one_line_end_is_taken_off),
		cmocka_unit_test(test_empty_is_refused),
		cmocka_unit_test(test_1024_bytes_is_the_longest_key),
		cmocka_unit_test(test_too_long_is_refused),
		cmocka_unit_test(test_bytes_outside_b64token_are_refused),
		cmocka_unit_test(test_unreadable_is_refused),
		cmocka_unit_test(test_token_grammar),
	};
	return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
