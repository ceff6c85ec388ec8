/*
 * tests/unit/base/test_s3keys.c - the S3 mode's credential files
 * (gateway/base/s3keys.c).
 *
 * Pins s3keys.h: an s3-credentials file's lines, comments and fourth
 * field; every error names its line (and the file) and never a secret;
 * a file that group or others may read or write is refused, naming it;
 * the upstream-s3-credentials format; lookups by access key id; a fresh
 * key's alphabet and length. Files are made in a fresh temporary folder
 * with chmod. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "base/s3keys.h"

#define SECRET_A "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define SECRET_B "secretsecretsecret+/B"

static char dir[64];

static int setup(void **s)
{
	(void)s;
	snprintf(dir, sizeof(dir), "/tmp/fg-s3keys-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s)
{
	(void)s;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Writes text to dir/name with mode; returns the path (static). */
static const char *file(const char *name, const char *text, mode_t mode)
{
	static char path[4][160];
	static int next;
	char *p = path[next++ % 4];
	snprintf(p, 160, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(p, mode), 0);
	return p;
}

static void parse_fails(const char *text, const char *want)
{
	struct fg_s3keys *t = (struct fg_s3keys *)0x1;
	char err[512] = "";
	assert_int_equal(fg_s3keys_parse(text, strlen(text), &t, err, sizeof(err)), -1);
	assert_ptr_equal(t, (struct fg_s3keys *)0x1);
	if (!strstr(err, want))
		fail_msg("error '%s' does not say '%s'", err, want);
	assert_null(strstr(err, SECRET_A));
	assert_null(strstr(err, SECRET_B));
	assert_null(strstr(err, "shortsecret"));
}

static void test_lines_comments_and_lookups(void **s)
{
	(void)s;
	const char *text = "# the keys\n"
			   "\n"
			   "AKIAIOSFODNN7EXAMPLE " SECRET_A " alice   # a comment\n"
			   "   \t\n"
			   "\tKEY.two_3-x\t" SECRET_B "\tbob@ci.example\r\n"
			   "KEYTHREE " SECRET_B " alice";
	struct fg_s3keys *t = NULL;
	char err[256];
	assert_int_equal(fg_s3keys_parse(text, strlen(text), &t, err, sizeof(err)), 0);
	assert_int_equal(fg_s3keys_count(t), 3);

	const struct fg_s3key *k = fg_s3keys_find(t, "AKIAIOSFODNN7EXAMPLE", 20);
	assert_non_null(k);
	size_t n = 0;
	assert_string_equal(fg_s3key_secret(k, &n), SECRET_A);
	assert_int_equal(n, strlen(SECRET_A));
	assert_string_equal(fg_s3key_principal(k), "alice");
	assert_string_equal(fg_s3key_id(k), "AKIAIOSFODNN7EXAMPLE");
	assert_null(fg_s3key_upstream(k));
	k = fg_s3keys_find(t, "KEY.two_3-x", 11);
	assert_non_null(k);
	assert_string_equal(fg_s3key_principal(k), "bob@ci.example");
	assert_string_equal(fg_s3key_secret(k, NULL), SECRET_B);
	assert_non_null(fg_s3keys_find(t, "KEYTHREE", 8));
	assert_null(fg_s3keys_find(t, "KEYTHRE", 7));
	assert_null(fg_s3keys_find(t, "KEYTHREEE", 9));
	assert_null(fg_s3keys_find(t, "keythree", 8));
	assert_null(fg_s3keys_find(NULL, "KEYTHREE", 8));

	/* shaped for fg_sigv4_verify() */
	const char *sec = NULL;
	size_t sl = 0;
	assert_ptr_equal(fg_s3keys_lookup(t, "KEYTHREE", &sec, &sl), fg_s3keys_find(t, "KEYTHREE", 8));
	assert_string_equal(sec, SECRET_B);
	assert_int_equal(sl, strlen(SECRET_B));
	assert_null(fg_s3keys_lookup(t, "NOPE", &sec, &sl));

	/* reference counted */
	assert_ptr_equal(fg_s3keys_ref(t), t);
	fg_s3keys_unref(t);
	assert_int_equal(fg_s3keys_count(t), 3);
	fg_s3keys_unref(t);
	fg_s3keys_unref(NULL);

	/* an empty file is an empty table */
	assert_int_equal(fg_s3keys_parse("", 0, &t, err, sizeof(err)), 0);
	assert_int_equal(fg_s3keys_count(t), 0);
	assert_null(fg_s3keys_find(t, "A", 1));
	fg_s3keys_unref(t);
}

static void test_errors_name_the_line_never_the_secret(void **s)
{
	(void)s;
	parse_fails("KEY " SECRET_A "\n", "line 1: expected ACCESS_KEY_ID SECRET PRINCIPAL");
	parse_fails("# c\nKEY " SECRET_A " alice up extra\n", "line 2: expected");
	parse_fails("\n\nK/EY " SECRET_A " alice\n", "line 3: an access key id");
	parse_fails("KEY shortsecret alice\n", "line 1: a secret is 16..128");
	parse_fails("KEY " SECRET_A "\x01 alice\n", "line 1: a secret");
	parse_fails("KEY " SECRET_A " al!ce\n", "line 1: a principal's name");
	parse_fails("KEY " SECRET_A " "
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
		    "line 1: a principal's name");
	parse_fails("KEY " SECRET_A " alice\nB " SECRET_B " bob\nKEY " SECRET_B " carol\n",
		    "line 3: this access key id is already on line 1");
	parse_fails("KEY " SECRET_A " alice /nonexistent/upstream\n",
		    "line 1: cannot read upstream-s3-credentials '/nonexistent/upstream'");
	struct fg_s3keys *t = NULL;
	char err[128];
	assert_int_equal(fg_s3keys_parse("KEY\0" SECRET_A " alice", 46, &t, err, sizeof(err)), -1);
	assert_string_equal(err, "holds a NUL byte");
}

static void test_file_modes(void **s)
{
	(void)s;
	const char *text = "KEY " SECRET_A " alice\n";
	struct fg_s3keys *t = NULL;
	char err[512];
	const char *p = file("creds", text, 0600);
	assert_int_equal(fg_s3keys_load(p, &t, err, sizeof(err)), 0);
	assert_int_equal(fg_s3keys_count(t), 1);
	fg_s3keys_unref(t);
	p = file("creds-ro", text, 0400);
	assert_int_equal(fg_s3keys_load(p, &t, err, sizeof(err)), 0);
	fg_s3keys_unref(t);

	static const mode_t bad[] = { 0640, 0604, 0660, 0606, 0610, 0601, 0644 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = NULL;
		p = file("creds-open", text, bad[i]);
		assert_int_equal(fg_s3keys_load(p, &t, err, sizeof(err)), -1);
		assert_null(t);
		assert_non_null(strstr(err, p));
		assert_non_null(strstr(err, "s3-credentials"));
		assert_non_null(strstr(err, "others than its owner"));
		assert_null(strstr(err, SECRET_A));
	}
	assert_int_equal(fg_s3keys_load(dir, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
	char missing[200];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	assert_int_equal(fg_s3keys_load(missing, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read s3-credentials"));

	/* a line's error through load names the file and the line */
	p = file("creds-bad", "# x\nKEY short alice\n", 0600);
	assert_int_equal(fg_s3keys_load(p, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, p));
	assert_non_null(strstr(err, "line 2:"));
}

static void test_upstream_credentials(void **s)
{
	(void)s;
	struct fg_s3upstream *u = NULL;
	char err[512];
	const char *p = file("up2", "UPKEY\nupsecret/+=\n", 0600);
	assert_int_equal(fg_s3upstream_load(p, &u, err, sizeof(err)), 0);
	assert_string_equal(u->key_id, "UPKEY");
	assert_string_equal(u->secret, "upsecret/+=");
	assert_int_equal(u->secret_len, 11);
	assert_false(u->has_token);
	fg_s3upstream_free(u);

	p = file("up3", "UPKEY\r\nupsecret\r\nFwoGZXIvYXdzE+/token=\r\n\n", 0600);
	assert_int_equal(fg_s3upstream_load(p, &u, err, sizeof(err)), 0);
	assert_string_equal(u->secret, "upsecret");
	assert_true(u->has_token);
	assert_string_equal(u->token, "FwoGZXIvYXdzE+/token=");
	assert_int_equal(u->token_len, 21);
	fg_s3upstream_free(u);
	fg_s3upstream_free(NULL);

	p = file("up-nonl", "UPKEY\nupsecret", 0600);
	assert_int_equal(fg_s3upstream_load(p, &u, err, sizeof(err)), 0);
	assert_string_equal(u->secret, "upsecret");
	fg_s3upstream_free(u);

	static const struct {
		const char *text;
		const char *want;
	} bad[] = {
		{ "", "needs an access key id on line 1" },
		{ "UPKEY\n", "needs an access key id on line 1" },
		{ "UPKEY\n\n", "line 2: the secret" },
		{ "UP KEY\nupsecret\n", "line 1: the access key id" },
		{ "UP/KEY\nupsecret\n", "line 1: the access key id" },
		{ "UPKEY\nup secret\n", "line 2: the secret" },
		{ "UPKEY\nupsecret\ntok en\n", "line 3: the session token" },
		{ "UPKEY\nupsecret\ntoken\nmore\n", "line 4: only" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		u = NULL;
		p = file("up-bad", bad[i].text, 0600);
		assert_int_equal(fg_s3upstream_load(p, &u, err, sizeof(err)), -1);
		assert_null(u);
		if (!strstr(err, bad[i].want) || !strstr(err, p))
			fail_msg("'%s': error '%s'", bad[i].text, err);
		assert_null(strstr(err, "upsecret"));
		assert_null(strstr(err, "token\n"));
	}
	p = file("up-open", "UPKEY\nupsecret\n", 0644);
	assert_int_equal(fg_s3upstream_load(p, &u, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "upstream-s3-credentials"));
	assert_non_null(strstr(err, "others than its owner"));
}

static void test_fourth_field_loads_the_principals_upstream(void **s)
{
	(void)s;
	const char *up = file("store-alice", "ALICESTORE\nalicestoresecret\nsess\n", 0600);
	char text[1024], err[768];
	snprintf(text, sizeof(text),
		 "K1 " SECRET_A " alice %s\nK2 " SECRET_B " bob\nK3 " SECRET_B " alice %s\n",
		 up, up);
	struct fg_s3keys *t = NULL;
	assert_int_equal(fg_s3keys_parse(text, strlen(text), &t, err, sizeof(err)), 0);
	const struct fg_s3upstream *u1 = fg_s3key_upstream(fg_s3keys_find(t, "K1", 2));
	const struct fg_s3upstream *u3 = fg_s3key_upstream(fg_s3keys_find(t, "K3", 2));
	assert_non_null(u1);
	assert_ptr_equal(u1, u3); /* read once */
	assert_string_equal(u1->key_id, "ALICESTORE");
	assert_string_equal(u1->secret, "alicestoresecret");
	assert_string_equal(u1->token, "sess");
	assert_null(fg_s3key_upstream(fg_s3keys_find(t, "K2", 2)));
	fg_s3keys_unref(t);

	/* an upstream file others may read: the line and the file are named */
	const char *open_up = file("store-open", "K\nsecretsecret\n", 0640);
	snprintf(text, sizeof(text), "# c\nK1 " SECRET_A " alice %s\n", open_up);
	t = NULL;
	assert_int_equal(fg_s3keys_parse(text, strlen(text), &t, err, sizeof(err)), -1);
	assert_null(t);
	assert_non_null(strstr(err, "line 2: upstream-s3-credentials"));
	assert_non_null(strstr(err, open_up));
}

static bool all_in(const char *s, size_t n, const char *alpha)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(alpha, s[i]))
			return false;
	return true;
}

static void test_new_key(void **s)
{
	(void)s;
	static const char id_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static const char secret_alpha[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+";
	char line[FG_S3KEYS_NEW_LINE_MAX], prev[FG_S3KEYS_NEW_LINE_MAX] = "";
	unsigned seen_id[256] = { 0 }, seen_secret[256] = { 0 };
	for (int i = 0; i < 500; i++) {
		assert_int_equal(fg_s3key_new("alice@ci", line, sizeof(line)), 0);
		assert_int_equal(strlen(line), 20 + 1 + 40 + 1 + 8);
		assert_true(all_in(line, 20, id_alpha));
		assert_int_equal(line[20], ' ');
		assert_true(all_in(line + 21, 40, secret_alpha));
		assert_string_equal(line + 61, " alice@ci");
		assert_string_not_equal(line, prev);
		for (int k = 0; k < 20; k++)
			seen_id[(unsigned char)line[k]]++;
		for (int k = 21; k < 61; k++)
			seen_secret[(unsigned char)line[k]]++;
		memcpy(prev, line, sizeof(line));
	}
	/* every character of each alphabet turns up (10000 draws of 36, 20000 of 64) */
	for (const char *c = id_alpha; *c; c++)
		assert_true(seen_id[(unsigned char)*c] > 150);
	for (const char *c = secret_alpha; *c; c++)
		assert_true(seen_secret[(unsigned char)*c] > 150);

	/* the line it prints is a line of the file */
	struct fg_s3keys *t = NULL;
	char err[256];
	assert_int_equal(fg_s3keys_parse(line, strlen(line), &t, err, sizeof(err)), 0);
	assert_non_null(fg_s3keys_find(t, line, 20));
	fg_s3keys_unref(t);

	memcpy(prev, line, sizeof(line));
	assert_int_equal(fg_s3key_new("not a name", line, sizeof(line)), -1);
	assert_int_equal(fg_s3key_new("", line, sizeof(line)), -1);
	assert_int_equal(fg_s3key_new(NULL, line, sizeof(line)), -1);
	assert_int_equal(fg_s3key_new("alice", line, 40), -1);
	assert_string_equal(line, prev); /* untouched */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_comments_and_lookups),
		cmocka_unit_test(test_errors_name_the_line_never_the_secret),
		cmocka_unit_test_setup_teardown(test_file_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upstream_credentials, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fourth_field_loads_the_principals_upstream,
						setup, teardown),
		cmocka_unit_test(test_new_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
