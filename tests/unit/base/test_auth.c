/*
 * tests/unit/base/test_auth.c - principals, keys and rights
 * (gateway/base/auth.c).
 *
 * Pins auth.h: what an auth-file may say and every way it can be wrong
 * (each refused with its line number and without echoing a hash); which
 * principal a key or a certificate CN names; what a right includes; how
 * an Authorization value is read; that a new key's line parses and finds
 * its key; and that a table lives exactly as long as its references. The
 * digests below are SHA-256 of the keys named beside them, computed apart
 * from this code (`printf %s KEY | sha256sum`). cmocka's asserts do not
 * depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "base/auth.h"

#define H_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define H_CI "21974faad09c41084fe7e836c08fe39d0a0f09ad32a03d21de2ea760ad72715f"
#define H_READER "ec4408df15da46b328f6f3246fa723d0aa6cb0f0a0dd9c4626080ab1b02aa3b2"
#define H_CI_UPPER "21974FAAD09C41084FE7E836C08FE39D0A0F09AD32A03D21DE2EA760AD72715F"

/* The contract's example, with what a hand-written file has: comments at
 * a line's start and after fields, blank lines, tabs, CRLF, an uppercase
 * digest, a principal without rights. */
static const char example[] =
	"# NAME     CREDENTIAL          RIGHTS...\n"
	"ci         sha256:" H_CI "     lock:jobs/ observe:*   # the CI runners\n"
	"\n"
	"ops\tcert\tadmin:* metrics\r\n"
	"   \t \n"
	"reader     sha256:" H_READER "     read:docs/ observe:docs/\n"
	"abc sha256:" H_ABC "\n"
	"team.lead@example cert admin:team/\n"
	"x-y_z.1@2 cert lock:a~b/c.d_e-f\n"
	"  # indented comment";

static struct fg_authtab *parse_ok(const char *text)
{
	struct fg_authtab *t = NULL;
	char err[256] = "";
	int rc = fg_authtab_parse(text, strlen(text), &t, err, sizeof(err));
	if (rc != 0)
		fail_msg("unexpected parse error: %s", err);
	assert_non_null(t);
	return t;
}

static const struct fg_principal *named(const struct fg_authtab *t, const char *name)
{
	for (size_t i = 0; i < fg_authtab_count(t); i++)
		if (strcmp(fg_principal_name(fg_authtab_at(t, i)), name) == 0)
			return fg_authtab_at(t, i);
	fail_msg("no principal '%s'", name);
	return NULL;
}

/* No run of 16 hex digits or more: no digest, not even its half. */
static void no_hash_in(const char *err)
{
	size_t run = 0;
	for (const char *p = err; *p; p++) {
		bool hex = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
			   (*p >= 'A' && *p <= 'F');
		run = hex ? run + 1 : 0;
		if (run >= 16)
			fail_msg("the message shows hex digits: %s", err);
	}
}

static void parse_fails(const char *text, size_t len, unsigned line, const char *what)
{
	struct fg_authtab *t = (struct fg_authtab *)(uintptr_t)1; /* untouched */
	char err[256] = "", want[32];
	assert_int_equal(fg_authtab_parse(text, len, &t, err, sizeof(err)), -1);
	assert_ptr_equal(t, (struct fg_authtab *)(uintptr_t)1);
	if (line) {
		snprintf(want, sizeof(want), "line %u: ", line);
		if (strncmp(err, want, strlen(want)) != 0)
			fail_msg("'%s' does not start with '%s'", err, want);
	}
	if (!strstr(err, what))
		fail_msg("'%s' does not say '%s'", err, what);
	no_hash_in(err);
}

static void fails(const char *text, unsigned line, const char *what)
{
	parse_fails(text, strlen(text), line, what);
}

static void test_valid_file_parses(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	assert_int_equal(fg_authtab_count(t), 6);
	/* in name order */
	const char *order[] = { "abc", "ci", "ops", "reader", "team.lead@example", "x-y_z.1@2" };
	for (size_t i = 0; i < 6; i++)
		assert_string_equal(fg_principal_name(fg_authtab_at(t, i)), order[i]);
	assert_null(fg_authtab_at(t, 6));
	assert_true(fg_principal_is_cert(named(t, "ops")));
	assert_false(fg_principal_is_cert(named(t, "ci")));
	assert_true(fg_principal_may(named(t, "x-y_z.1@2"), FG_RIGHT_LOCK, "a~b/c.d_e-f/1"));
	fg_authtab_unref(t);
}

static void test_empty_and_comment_only_files_have_no_principal(void **s)
{
	(void)s;
	const char *texts[] = { "", "\n", "# only a comment\n", "  \t\r\n\n#x\n   # y" };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct fg_authtab *t = parse_ok(texts[i]);
		assert_int_equal(fg_authtab_count(t), 0);
		assert_null(fg_authtab_by_key(t, "abc", 3));
		assert_null(fg_authtab_by_cert(t, "ops"));
		fg_authtab_unref(t);
	}
}

static void test_bounds_that_are_allowed(void **s)
{
	(void)s;
	char text[8192];
	/* a 64-byte name, a 255-byte prefix, 64 rights */
	int n = snprintf(text, sizeof(text), "%.64s cert lock:%.255s",
			 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn",
			 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
			 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
			 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
			 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp");
	for (int i = 1; i < 64; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, " observe:r%d/", i);
	struct fg_authtab *t = parse_ok(text);
	const struct fg_principal *p = fg_authtab_at(t, 0);
	assert_int_equal(strlen(fg_principal_name(p)), 64);
	assert_true(fg_principal_may(p, FG_RIGHT_OBSERVE, "r63/x"));
	fg_authtab_unref(t);

	/* a line of exactly 4096 bytes */
	memset(text, ' ', 4096);
	memcpy(text, "# long", 6);
	text[4096] = '\n';
	text[4097] = '\0';
	t = parse_ok(text);
	assert_int_equal(fg_authtab_count(t), 0);
	fg_authtab_unref(t);
}

static void test_every_error_names_its_line(void **s)
{
	(void)s;
	const char *k = "sha256:" H_CI;
	char text[1024];
	/* the name */
	fails("c!i sha256:" H_CI " lock:a\n", 1, "the name is not 1..64 bytes");
	fails("# c\n\nc:i cert\n", 3, "the name is not");
	fails("nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn cert\n", 1,
	      "longer than 64 bytes");
	/* the credential, never echoed */
	fails("ok cert\nci\n", 2, "'ci' has no credential");
	fails("ci   # sha256:" H_CI "\n", 1, "'ci' has no credential");
	fails("ci certificate\n", 1, "credential of 'ci' is neither");
	fails("ci SHA256:" H_CI "\n", 1, "credential of 'ci' is neither");
	fails("ci " H_CI "\n", 1, "credential of 'ci' is neither");
	fails("ci sha256:" H_CI "0\n", 1, "65 characters after sha256:");
	fails("ci sha256:\n", 1, "0 characters after sha256:");
	fails("ci sha256:" "g1974faad09c41084fe7e836c08fe39d0a0f09ad32a03d21de2ea760ad72715f\n",
	      1, "not a hex digit");
	/* names and keys are unique */
	fails("ci cert\nb cert\n\nci sha256:" H_CI "\n", 4, "the name 'ci' is already on line 1");
	fails("a sha256:" H_CI "\nb cert\nc sha256:" H_CI_UPPER " lock:x\n", 3,
	      "'c' has the same key as 'a' on line 1");
	/* the earlier of two repeats is the one told */
	fails("a sha256:" H_CI "\nb sha256:" H_CI "\na cert\n", 2, "same key");
	fails("a cert\na cert\nb sha256:" H_CI "\nc sha256:" H_CI "\n", 2, "already on line 1");
	/* rights */
	snprintf(text, sizeof(text), "ci %s lok:jobs/\n", k);
	fails(text, 1, "unknown right 'lok' for 'ci'");
	snprintf(text, sizeof(text), "x cert\nci %s lock:a metric\n", k);
	fails(text, 2, "unknown right 'metric'");
	snprintf(text, sizeof(text), "ci %s Lock:a\n", k);
	fails(text, 1, "right 1 of 'ci' is not a right");
	/* a credential in the rights column is not echoed either */
	snprintf(text, sizeof(text), "ci cert lock:a sha256:%s\n", H_READER);
	fails(text, 1, "right 2 of 'ci' is not a right");
	snprintf(text, sizeof(text), "ci cert %s\n", H_READER);
	fails(text, 1, "right 1 of 'ci' is not a right");
	fails("ci cert :a\n", 1, "right 1 of 'ci' is not a right");
	fails("ci cert lock\n", 1, "lock needs a prefix");
	fails("ci cert observe:a admin\n", 1, "right 2 of 'ci': admin needs a prefix");
	fails("ci cert lock:\n", 1, "the prefix is neither * nor");
	fails("ci cert read:a#b\n", 1, "(read): the prefix is neither");
	fails("ci cert lock:*x\n", 1, "the prefix is neither");
	fails("ci cert lock:**\n", 1, "the prefix is neither");
	fails("ci cert lock:a{b}\n", 1, "the prefix is neither");
	fails("ci cert metrics:*\n", 1, "metrics takes no prefix");
	fails("ci cert lock:a\r\r\n", 1, "the prefix is neither");
	/* a '#' after a blank is a comment, so this is fine */
	struct fg_authtab *t = parse_ok("ci cert lock:a #b\n");
	fg_authtab_unref(t);
}

static void test_bounds_are_errors(void **s)
{
	(void)s;
	char *big = malloc(FG_AUTH_FILE_MAX + 2);
	assert_non_null(big);

	/* a 256-byte prefix */
	int n = snprintf(big, 1024, "ci cert lock:");
	memset(big + n, 'p', 256);
	big[n + 256] = '\0';
	fails(big, 1, "1..255 bytes");

	/* 65 rights */
	n = snprintf(big, 1024, "ci cert");
	for (int i = 0; i < 65; i++)
		n += snprintf(big + n, 1024, " lock:r%d", i);
	fails(big, 1, "more than 64 rights");

	/* a line of 4097 bytes, the second */
	n = snprintf(big, 1024, "ci cert\n");
	memset(big + n, '#', 4097);
	big[n + 4097] = '\0';
	fails(big, 2, "longer than 4096 bytes");

	/* a NUL byte, even in a comment */
	parse_fails("ci cert\n# a\0b\nx cert\n", 21, 2, "a NUL byte");

	/* 10001 principals; 10000 are fine */
	n = 0;
	for (int i = 1; i <= 10000; i++)
		n += sprintf(big + n, "p%d cert\n", i);
	struct fg_authtab *t = parse_ok(big);
	assert_int_equal(fg_authtab_count(t), 10000);
	fg_authtab_unref(t);
	sprintf(big + n, "# then\np10001 cert\n");
	fails(big, 10002, "more than 10000 principals");

	/* more than 1 MiB, even of comments */
	memset(big, '\n', FG_AUTH_FILE_MAX + 1);
	big[0] = '#';
	parse_fails(big, FG_AUTH_FILE_MAX + 1, 0, "larger than 1048576 bytes");
	t = NULL;
	char err[64];
	assert_int_equal(fg_authtab_parse(big, FG_AUTH_FILE_MAX, &t, err, sizeof(err)), 0);
	fg_authtab_unref(t);
	free(big);
}

static void test_rights_and_what_they_include(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	const struct fg_principal *ci = named(t, "ci"), *ops = named(t, "ops"),
				  *reader = named(t, "reader"), *abc = named(t, "abc"),
				  *lead = named(t, "team.lead@example");

	/* lock:jobs/ observe:* — lock includes observe and read */
	assert_true(fg_principal_may(ci, FG_RIGHT_LOCK, "jobs/1"));
	assert_true(fg_principal_may(ci, FG_RIGHT_LOCK, "jobs/"));
	assert_false(fg_principal_may(ci, FG_RIGHT_LOCK, "jobs"));
	assert_false(fg_principal_may(ci, FG_RIGHT_LOCK, "jobsx/1"));
	assert_false(fg_principal_may(ci, FG_RIGHT_LOCK, "Jobs/1"));
	assert_false(fg_principal_may(ci, FG_RIGHT_LOCK, "a/jobs/1"));
	assert_true(fg_principal_may(ci, FG_RIGHT_READ, "jobs/1"));
	assert_false(fg_principal_may(ci, FG_RIGHT_READ, "docs/a"));
	assert_true(fg_principal_may(ci, FG_RIGHT_OBSERVE, "anything"));
	assert_false(fg_principal_may(ci, FG_RIGHT_ADMIN, "jobs/1"));
	assert_false(fg_principal_may(ci, FG_RIGHT_METRICS, NULL));

	/* admin:* metrics — everything */
	for (int r = 0; r < FG_RIGHT_COUNT; r++)
		assert_true(fg_principal_may(ops, (enum fg_right)r, "any/lock"));
	assert_true(fg_principal_may(ops, FG_RIGHT_METRICS, NULL));

	/* admin:team/ includes lock, observe, read there, and nothing else */
	for (int r = 0; r < FG_RIGHT_METRICS; r++) {
		assert_true(fg_principal_may(lead, (enum fg_right)r, "team/x"));
		assert_false(fg_principal_may(lead, (enum fg_right)r, "teams/x"));
	}
	assert_false(fg_principal_may(lead, FG_RIGHT_METRICS, "team/x"));

	/* read:docs/ observe:docs/ — neither includes lock */
	assert_true(fg_principal_may(reader, FG_RIGHT_READ, "docs/a"));
	assert_true(fg_principal_may(reader, FG_RIGHT_OBSERVE, "docs/a"));
	assert_false(fg_principal_may(reader, FG_RIGHT_LOCK, "docs/a"));
	assert_false(fg_principal_may(reader, FG_RIGHT_READ, "jobs/1"));

	/* no rights at all */
	for (int r = 0; r < FG_RIGHT_COUNT; r++)
		assert_false(fg_principal_may(abc, (enum fg_right)r, "jobs/1"));

	/* a right on one principal is not another's; nonsense is refused */
	assert_false(fg_principal_may(NULL, FG_RIGHT_OBSERVE, "a"));
	assert_false(fg_principal_may(ops, FG_RIGHT_LOCK, NULL));
	assert_false(fg_principal_may(ops, FG_RIGHT_COUNT, "a"));
	assert_false(fg_principal_may(ops, (enum fg_right)-1, "a"));

	/* prefixes: every name under it */
	assert_true(fg_principal_may_prefix(ci, FG_RIGHT_OBSERVE, ""));
	assert_true(fg_principal_may_prefix(ci, FG_RIGHT_LOCK, "jobs/"));
	assert_true(fg_principal_may_prefix(ci, FG_RIGHT_LOCK, "jobs/sub/"));
	assert_false(fg_principal_may_prefix(ci, FG_RIGHT_LOCK, "jobs"));
	assert_false(fg_principal_may_prefix(ci, FG_RIGHT_LOCK, ""));
	assert_true(fg_principal_may_prefix(reader, FG_RIGHT_OBSERVE, "docs/"));
	assert_false(fg_principal_may_prefix(reader, FG_RIGHT_OBSERVE, "do"));
	assert_false(fg_principal_may_prefix(reader, FG_RIGHT_OBSERVE, ""));
	assert_true(fg_principal_may_prefix(lead, FG_RIGHT_OBSERVE, "team/a"));
	assert_true(fg_principal_may_prefix(ops, FG_RIGHT_METRICS, NULL));

	assert_string_equal(fg_right_name(FG_RIGHT_OBSERVE), "observe");
	assert_string_equal(fg_right_name(FG_RIGHT_LOCK), "lock");
	assert_string_equal(fg_right_name(FG_RIGHT_ADMIN), "admin");
	assert_string_equal(fg_right_name(FG_RIGHT_READ), "read");
	assert_string_equal(fg_right_name(FG_RIGHT_METRICS), "metrics");
	assert_string_equal(fg_right_name(FG_RIGHT_COUNT), "unknown");
	fg_authtab_unref(t);
}

static void test_a_key_names_its_principal(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	assert_ptr_equal(fg_authtab_by_key(t, "ci-key", 6), named(t, "ci"));
	assert_ptr_equal(fg_authtab_by_key(t, "reader-key", 10), named(t, "reader"));
	assert_ptr_equal(fg_authtab_by_key(t, "abc", 3), named(t, "abc"));
	/* the length is the key's, not the string's */
	assert_ptr_equal(fg_authtab_by_key(t, "abcdef", 3), named(t, "abc"));
	assert_null(fg_authtab_by_key(t, "ci-key", 5));
	assert_null(fg_authtab_by_key(t, "ci-kez", 6));
	assert_null(fg_authtab_by_key(t, "CI-KEY", 6));
	assert_null(fg_authtab_by_key(t, "other-key", 9));
	assert_null(fg_authtab_by_key(t, "", 0));
	/* the digest is not the key */
	assert_null(fg_authtab_by_key(t, H_CI, strlen(H_CI)));
	/* a cert principal has no key, whatever is sent */
	assert_null(fg_authtab_by_key(t, "ops", 3));
	assert_null(fg_authtab_by_key(NULL, "ci-key", 6));
	fg_authtab_unref(t);

	/* an uppercase digest is the same digest */
	t = parse_ok("ci sha256:" H_CI_UPPER " lock:a\n");
	assert_ptr_equal(fg_authtab_by_key(t, "ci-key", 6), fg_authtab_at(t, 0));
	fg_authtab_unref(t);
}

static void test_a_certificate_names_the_principal_of_its_cn(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	assert_ptr_equal(fg_authtab_by_cert(t, "ops"), named(t, "ops"));
	assert_ptr_equal(fg_authtab_by_cert(t, "team.lead@example"),
			 named(t, "team.lead@example"));
	/* a principal with a key is named by a certificate too */
	assert_ptr_equal(fg_authtab_by_cert(t, "ci"), named(t, "ci"));
	assert_ptr_equal(fg_authtab_by_cert(t, "reader"), named(t, "reader"));
	assert_null(fg_authtab_by_cert(t, "OPS"));
	assert_null(fg_authtab_by_cert(t, "op"));
	assert_null(fg_authtab_by_cert(t, "opsx"));
	assert_null(fg_authtab_by_cert(t, ""));
	assert_null(fg_authtab_by_cert(t, NULL));
	assert_null(fg_authtab_by_cert(NULL, "ops"));
	fg_authtab_unref(t);
}

/* A principal is found again in a reloaded table only with its name and
 * its credential both unchanged. */
static void test_a_principal_is_found_again_by_name_and_credential(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	struct fg_principal_id ci, ops;
	fg_principal_id_of(named(t, "ci"), &ci);
	fg_principal_id_of(named(t, "ops"), &ops);
	assert_string_equal(ci.name, "ci");
	assert_ptr_equal(fg_authtab_by_id(t, &ci), named(t, "ci"));
	assert_ptr_equal(fg_authtab_by_id(t, &ops), named(t, "ops"));
	fg_authtab_unref(t);

	/* the same lines, other rights: found; its rights are the new ones */
	t = parse_ok("ci sha256:" H_CI " observe:x\nops cert lock:y\n");
	assert_ptr_equal(fg_authtab_by_id(t, &ci), fg_authtab_at(t, 0));
	assert_false(fg_principal_may(fg_authtab_by_id(t, &ci), FG_RIGHT_LOCK, "jobs/a"));
	assert_non_null(fg_authtab_by_id(t, &ops));
	fg_authtab_unref(t);

	/* another key, a key turned cert, a cert turned key, gone: not found */
	t = parse_ok("ci sha256:" H_READER " lock:*\nops sha256:" H_ABC " admin:*\n"
		     "other cert admin:*\n");
	assert_null(fg_authtab_by_id(t, &ci));
	assert_null(fg_authtab_by_id(t, &ops));
	fg_authtab_unref(t);
	t = parse_ok("ci cert lock:*\n");
	assert_null(fg_authtab_by_id(t, &ci));
	fg_authtab_unref(t);
	assert_null(fg_authtab_by_id(NULL, &ci));
}

static void bearer_is(const char *h, enum fg_cred want, const char *key)
{
	const char *k = (const char *)(uintptr_t)1;
	size_t len = 99;
	enum fg_cred got = fg_auth_bearer(h, &k, &len);
	if (got != want)
		fail_msg("'%s': %d, not %d", h ? h : "(null)", got, want);
	if (want == FG_CRED_BEARER) {
		assert_true(k >= h && k + len <= h + strlen(h));
		assert_int_equal(len, strlen(key));
		assert_memory_equal(k, key, len);
	} else {
		assert_null(k);
		assert_int_equal(len, 0);
	}
}

static void test_bearer_header(void **s)
{
	(void)s;
	bearer_is(NULL, FG_CRED_NONE, NULL);
	bearer_is("", FG_CRED_NONE, NULL);
	bearer_is("Basic dXNlcjpwYXNz", FG_CRED_NONE, NULL);
	bearer_is("Digest username=\"x\"", FG_CRED_NONE, NULL);
	bearer_is("Bearerx abc", FG_CRED_NONE, NULL);
	bearer_is("Bear abc", FG_CRED_NONE, NULL);
	bearer_is("abc", FG_CRED_NONE, NULL);

	bearer_is("Bearer abc", FG_CRED_BEARER, "abc");
	bearer_is("bearer abc", FG_CRED_BEARER, "abc");
	bearer_is("BEARER abc", FG_CRED_BEARER, "abc");
	bearer_is("bEaReR abc", FG_CRED_BEARER, "abc");
	bearer_is("Bearer    abc", FG_CRED_BEARER, "abc");
	bearer_is("Bearer abc  \t ", FG_CRED_BEARER, "abc");
	bearer_is("Bearer aZ09-._~+/", FG_CRED_BEARER, "aZ09-._~+/");
	bearer_is("Bearer abc==", FG_CRED_BEARER, "abc==");
	bearer_is("Bearer 4g-dcLIfYNkiYA2DtaOj9Z7AC1_HL9B17CHCJkZ1d2U",
		  FG_CRED_BEARER, "4g-dcLIfYNkiYA2DtaOj9Z7AC1_HL9B17CHCJkZ1d2U");

	bearer_is("Bearer", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer ", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer    \t", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer\tabc", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer =", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer ==abc", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer ab=c", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer ab c", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer abc, Basic x", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer a\"bc\"", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer abc\r", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer ab%63", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer \xc3\xa9t\xc3\xa9", FG_CRED_MALFORMED, NULL);
	bearer_is("Bearer realm=\"x\"", FG_CRED_MALFORMED, NULL);
}

static void test_new_key_round_trip(void **s)
{
	(void)s;
	char key[FG_AUTH_KEY_LEN + 1], key2[FG_AUTH_KEY_LEN + 1], line[256], file[512];

	assert_int_equal(fg_auth_new_key("ci.runner@x", key, sizeof(key), line, sizeof(line)), 0);
	assert_int_equal(strlen(key), FG_AUTH_KEY_LEN);
	assert_int_equal(strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				     "0123456789-_"), FG_AUTH_KEY_LEN);
	assert_int_equal(strncmp(line, "ci.runner@x sha256:", 19), 0);
	assert_int_equal(strlen(line), 19 + 64);

	/* the key is a bearer token as it is */
	char header[64];
	snprintf(header, sizeof(header), "Bearer %s", key);
	const char *k;
	size_t klen;
	assert_int_equal(fg_auth_bearer(header, &k, &klen), FG_CRED_BEARER);
	assert_int_equal(klen, FG_AUTH_KEY_LEN);

	/* the printed line (with rights added) parses and finds the key */
	snprintf(file, sizeof(file), "other sha256:" H_CI "\n%s lock:jobs/   # add rights\n", line);
	struct fg_authtab *t = parse_ok(file);
	const struct fg_principal *p = fg_authtab_by_key(t, k, klen);
	assert_non_null(p);
	assert_string_equal(fg_principal_name(p), "ci.runner@x");
	assert_true(fg_principal_may(p, FG_RIGHT_LOCK, "jobs/1"));
	fg_authtab_unref(t);

	/* two keys differ */
	assert_int_equal(fg_auth_new_key("ci.runner@x", key2, sizeof(key2), line, sizeof(line)), 0);
	assert_string_not_equal(key, key2);

	/* a bad name, or buffers too small: nothing */
	const char *bad[] = { "", "c i", "c:i", "c#i",
			      "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(fg_auth_new_key(bad[i], key, sizeof(key), line, sizeof(line)), -1);
		assert_string_equal(key, "");
		assert_string_equal(line, "");
	}
	assert_int_equal(fg_auth_new_key(NULL, key, sizeof(key), line, sizeof(line)), -1);
	assert_int_equal(fg_auth_new_key("ci", key, FG_AUTH_KEY_LEN, line, sizeof(line)), -1);
	assert_int_equal(fg_auth_new_key("ci", key, sizeof(key), line, 2 + 1 + 7 + 64), -1);
	assert_int_equal(fg_auth_new_key("ci", key, sizeof(key), line, 2 + 1 + 7 + 64 + 1), 0);

	assert_true(fg_auth_name_valid("a", 1));
	assert_true(fg_auth_name_valid("A-z_0.9@x", 9));
	assert_false(fg_auth_name_valid("a/b", 3));
	assert_false(fg_auth_name_valid("", 0));
	assert_false(fg_auth_name_valid(NULL, 0));
}

struct churn {
	struct fg_authtab *t;
	int rounds;
	int wrong; /* cmocka's asserts may not fail off the main thread */
};

static void *churn(void *arg)
{
	struct churn *c = arg;
	for (int i = 0; i < c->rounds; i++) {
		struct fg_authtab *r = fg_authtab_ref(c->t);
		if (r != c->t || !fg_authtab_by_cert(r, "ops"))
			c->wrong++;
		fg_authtab_unref(r);
	}
	return NULL;
}

/* The table outlives every reference but the last; LeakSanitizer (the
 * sanitized build) sees that the last one frees it, and a count that
 * lost an update either leaks or frees too early. */
static void test_refcount(void **s)
{
	(void)s;
	struct fg_authtab *t = parse_ok(example);
	assert_ptr_equal(fg_authtab_ref(t), t);
	fg_authtab_unref(t);
	assert_int_equal(fg_authtab_count(t), 6); /* still ours */

	pthread_t th[4];
	struct churn c[4];
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){ t, 20000, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, churn, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(c[i].wrong, 0);
	}
	assert_ptr_equal(fg_authtab_by_key(t, "ci-key", 6), named(t, "ci"));

	/* a table replaced meanwhile stays valid for its holder */
	struct fg_authtab *held = fg_authtab_ref(t);
	fg_authtab_unref(t);
	assert_string_equal(fg_principal_name(fg_authtab_by_key(held, "abc", 3)), "abc");
	fg_authtab_unref(held);

	fg_authtab_unref(NULL);
	assert_null(fg_authtab_ref(NULL));
	assert_int_equal(fg_authtab_count(NULL), 0);
	assert_null(fg_authtab_at(NULL, 0));
}

/* A file without a name in any directory, reached by its /proc name. */
static int memfile(const char *text, size_t len, char *path, size_t cap)
{
	int fd = memfd_create("auth-file", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

static void test_load(void **s)
{
	(void)s;
	char path[64], err[512];
	struct fg_authtab *t = NULL;

	int fd = memfile(example, strlen(example), path, sizeof(path));
	assert_int_equal(fg_authtab_load(path, &t, err, sizeof(err)), 0);
	assert_int_equal(fg_authtab_count(t), 6);
	fg_authtab_unref(t);
	close(fd);

	/* a parse error says which file */
	const char bad[] = "ci cert\nci cert\n";
	fd = memfile(bad, strlen(bad), path, sizeof(path));
	t = NULL;
	assert_int_equal(fg_authtab_load(path, &t, err, sizeof(err)), -1);
	assert_null(t);
	char want[128];
	snprintf(want, sizeof(want), "auth-file '%s': line 2: the name 'ci' is already on line 1", path);
	assert_string_equal(err, want);
	close(fd);

	/* too long: read no further than the bound */
	char *big = malloc(FG_AUTH_FILE_MAX + 10);
	assert_non_null(big);
	memset(big, '\n', FG_AUTH_FILE_MAX + 10);
	fd = memfile(big, FG_AUTH_FILE_MAX + 10, path, sizeof(path));
	assert_int_equal(fg_authtab_load(path, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "larger than 1048576 bytes"));
	close(fd);
	free(big);

	assert_int_equal(fg_authtab_load("no-such-dir/auth", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read auth-file 'no-such-dir/auth'"));
	assert_int_equal(fg_authtab_load(".", &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
	assert_null(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_file_parses),
		cmocka_unit_test(test_empty_and_comment_only_files_have_no_principal),
		cmocka_unit_test(test_bounds_that_are_allowed),
		cmocka_unit_test(test_every_error_names_its_line),
		cmocka_unit_test(test_bounds_are_errors),
		cmocka_unit_test(test_rights_and_what_they_include),
		cmocka_unit_test(test_a_key_names_its_principal),
		cmocka_unit_test(test_a_certificate_names_the_principal_of_its_cn),
		cmocka_unit_test(test_a_principal_is_found_again_by_name_and_credential),
		cmocka_unit_test(test_bearer_header),
		cmocka_unit_test(test_new_key_round_trip),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
