/*
 * tests/unit/base/test_jsonio.c - strict request bodies and query numbers
 * (gateway/base/jsonio.c).
 *
 * Pins jsonio.h: a body is one JSON object (empty only when allowed, no
 * duplicate keys, nothing after it); a number field is a JSON integer in
 * its range and nothing else (not 1.5, 1e3, "1000", true or null); a query
 * number is plain decimal within its maximum. A refusal leaves the output
 * alone and says why. A field a call does not know is refused by name,
 * with a message that is always valid UTF-8 and within its buffer.
 * cmocka's asserts do not depend on NDEBUG.
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

#include "fencegate/lock.h"
#include "fencegate/sequencer.h"
#include "base/jsonio.h"

#define MSG_MAX 256

/* ---- helpers ------------------------------------------------------- */

static json_t *body_str(const char *s, bool allow_empty, char *msg)
{
	msg[0] = '\0';
	return fg_json_body(s, strlen(s), allow_empty, msg, MSG_MAX);
}

/* Parses `s`, which must be an object. */
static json_t *obj(const char *s)
{
	char msg[MSG_MAX];
	json_t *o = body_str(s, false, msg);

	if (!o)
		fail_msg("not accepted: %s: %s", s, msg);
	return o;
}

/* fg_json_uint on the body `s`: its result; *out starts at 4242. */
static int uint_of(const char *s, uint32_t lo, uint32_t hi, uint32_t *out,
		   char *msg)
{
	json_t *o = obj(s);
	int rc;

	*out = 4242;
	msg[0] = '\0';
	rc = fg_json_uint(o, "n", lo, hi, out, msg, MSG_MAX);
	json_decref(o);
	return rc;
}

/* ---- fg_json_body -------------------------------------------------- */

static void test_body_objects(void **state)
{
	static const char *const ok[] = {
		"{}",
		" {} ",
		"\r\n\t {}\r\n\t ",
		"{\"a\":1}",
		"{\"a\":{\"b\":[1,2,{\"c\":null}]},\"b\":\"x\"}",
		"{\"\":0}",
		"{\"a\":\"\\u00e9\\n\"}",
		"{\"a\":\"caf\xc3\xa9\"}",
	};
	char msg[MSG_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		for (int allow = 0; allow < 2; allow++) {
			json_t *o = body_str(ok[i], allow, msg);

			if (!o)
				fail_msg("refused: %s: %s", ok[i], msg);
			assert_true(json_is_object(o));
			json_decref(o);
		}
	}
}

static void test_body_empty(void **state)
{
	static const char *const empty[] = { "", " ", "\r\n", "\t \r\n  " };
	char msg[MSG_MAX];
	json_t *o;

	(void)state;
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		o = body_str(empty[i], true, msg);
		assert_non_null(o);
		assert_true(json_is_object(o));
		assert_int_equal(json_object_size(o), 0);
		json_decref(o);

		o = body_str(empty[i], false, msg);
		assert_null(o);
		assert_string_equal(msg, "a JSON object body is required");
	}

	/* len 0 never reads body: NULL is fine. */
	o = fg_json_body(NULL, 0, true, msg, sizeof(msg));
	assert_non_null(o);
	json_decref(o);
	assert_null(fg_json_body(NULL, 0, false, msg, sizeof(msg)));
}

static void test_body_not_json(void **state)
{
	static const char *const bad[] = {
		"{", "}", "{\"a\":}", "{a:1}", "{'a':1}", "{\"a\":1,}",
		"{\"a\" 1}", "{} {}", "{}x", "{}]", "{\"a\":01}", "{\"a\":+1}",
		"{\"a\":.5}", "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":0x10}",
		"{\"a\":tru}", "{\"a\":\"\\u0000\"}", "{\"a\":\"\\x\"}",
		"{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xc3\"}",
		"\xef\xbb\xbf{}", "\v{}", "{}\f", "// c\n{}", "{\"a\":1 /*c*/}",
		/* Numbers beyond 64 bits, and reals that overflow. */
		"{\"a\":99999999999999999999}",
		"{\"a\":-99999999999999999999}",
		"{\"a\":9223372036854775808}",
		"{\"a\":1e400}",
	};
	char msg[MSG_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = body_str(bad[i], true, msg);

		if (o) {
			json_decref(o);
			fail_msg("accepted: %s", bad[i]);
		}
		if (strncmp(msg, "body is not valid JSON: ", 24) != 0 ||
		    strlen(msg) <= 24)
			fail_msg("%s: message \"%s\"", bad[i], msg);
	}
}

static void test_body_not_object(void **state)
{
	static const char *const bad[] = {
		"[]", "[{}]", "1", "-1", "1.5", "\"{}\"", "\"\"", "null", "true",
		"false", " [1, 2] ",
	};
	char msg[MSG_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = body_str(bad[i], true, msg);

		if (o) {
			json_decref(o);
			fail_msg("accepted: %s", bad[i]);
		}
		/* Either wording is a refusal; scalars may fail to parse. */
		if (!strstr(msg, "body must be a JSON object") &&
		    !strstr(msg, "body is not valid JSON"))
			fail_msg("%s: message \"%s\"", bad[i], msg);
	}
	/* An array is valid JSON: its refusal is about its type. */
	assert_null(body_str("[]", false, msg));
	assert_string_equal(msg, "body must be a JSON object");
}

static void test_body_duplicate_keys(void **state)
{
	static const char *const bad[] = {
		"{\"a\":1,\"a\":1}",
		"{\"a\":1,\"b\":2,\"a\":\"x\"}",
		"{\"ttl_ms\":1000,\"ttl_ms\":5}",
		"{\"o\":{\"k\":1,\"k\":2}}",
		"{\"a\":1,\"\\u0061\":2}", /* the same key, escaped */
	};
	char msg[MSG_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *o = body_str(bad[i], false, msg);

		if (o) {
			json_decref(o);
			fail_msg("accepted: %s", bad[i]);
		}
		assert_non_null(strstr(msg, "body is not valid JSON"));
	}
	/* Keys that differ only in case are different keys. */
	json_decref(obj("{\"a\":1,\"A\":2}"));
}

/* Only body[0..len) is parsed: no NUL is needed, and one inside is refused. */
static void test_body_len(void **state)
{
	static const char text[] = "{\"n\":5}";
	char msg[MSG_MAX], *heap;
	json_t *o;
	uint32_t n = 0;

	(void)state;
	/* An exact-size heap copy without NUL: ASan reports any over-read. */
	heap = malloc(sizeof(text) - 1);
	assert_non_null(heap);
	memcpy(heap, text, sizeof(text) - 1);
	o = fg_json_body(heap, sizeof(text) - 1, false, msg, sizeof(msg));
	assert_non_null(o);
	assert_int_equal(fg_json_uint(o, "n", 0, 10, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 5);
	json_decref(o);

	/* A prefix is judged alone. */
	assert_null(fg_json_body(heap, sizeof(text) - 2, true, msg, sizeof(msg)));
	free(heap);

	/* Whitespace-only within len, text after it: not empty. */
	o = fg_json_body("  {}", 2, true, msg, sizeof(msg));
	assert_non_null(o);
	assert_int_equal(json_object_size(o), 0);
	json_decref(o);
	assert_null(fg_json_body("  {}", 2, false, msg, sizeof(msg)));

	/* A NUL byte inside the body, after or before the object. */
	assert_null(fg_json_body("{}\0", 3, true, msg, sizeof(msg)));
	assert_null(fg_json_body("{\"a\":\"x\0y\"}", 11, true, msg, sizeof(msg)));
	assert_null(fg_json_body("\0{}", 3, true, msg, sizeof(msg)));
}

/* The message is cut to its buffer, always NUL-terminated. */
static void test_body_small_msg(void **state)
{
	char msg[8];

	(void)state;
	memset(msg, 'z', sizeof(msg));
	assert_null(fg_json_body("", 0, false, msg, sizeof(msg)));
	assert_string_equal(msg, "a JSON ");
	memset(msg, 'z', sizeof(msg));
	assert_null(fg_json_body("{", 1, false, msg, sizeof(msg)));
	assert_int_equal(strlen(msg), sizeof(msg) - 1);
}

/* ---- fg_json_uint -------------------------------------------------- */

static void test_uint_accepts(void **state)
{
	static const struct {
		const char *body;
		uint32_t lo, hi, want;
	} ok[] = {
		{ "{\"n\":0}", 0, 10, 0 },
		{ "{\"n\":-0}", 0, 10, 0 },
		{ "{\"n\":10}", 0, 10, 10 },
		{ "{\"n\":1}", 1, 1, 1 },
		{ "{\"n\":1000}", 1, 3600000, 1000 },
		{ "{\"n\":3600000}", 1, 3600000, 3600000 },
		{ "{\"n\":4294967295}", 0, UINT32_MAX, UINT32_MAX },
		{ "{\"n\" : 7 , \"m\":\"x\"}", 0, 10, 7 },
	};
	char msg[MSG_MAX];
	uint32_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (uint_of(ok[i].body, ok[i].lo, ok[i].hi, &out, msg) != 0)
			fail_msg("refused: %s: %s", ok[i].body, msg);
		assert_int_equal(out, ok[i].want);
	}
}

static void test_uint_absent(void **state)
{
	char msg[MSG_MAX];
	uint32_t out;

	(void)state;
	/* Absent leaves *out as it was; so does another key's presence. */
	assert_int_equal(uint_of("{}", 0, 10, &out, msg), 0);
	assert_int_equal(out, 4242);
	assert_int_equal(uint_of("{\"N\":1,\"nn\":2,\"o\":{\"n\":3}}", 0, 10,
				 &out, msg), 0);
	assert_int_equal(out, 4242);
}

static void test_uint_wrong_type(void **state)
{
	static const char *const bad[] = {
		"{\"n\":1.5}", "{\"n\":1.0}", "{\"n\":0.0}", "{\"n\":1e3}",
		"{\"n\":1E3}", "{\"n\":1e0}", "{\"n\":-0.0}", "{\"n\":\"1000\"}",
		"{\"n\":\"\"}", "{\"n\":true}", "{\"n\":false}", "{\"n\":null}",
		"{\"n\":[]}", "{\"n\":[1]}", "{\"n\":{}}", "{\"n\":1e300}",
	};
	char msg[MSG_MAX];
	uint32_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (uint_of(bad[i], 0, UINT32_MAX, &out, msg) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_string_equal(msg, "n must be an integer");
		assert_int_equal(out, 4242);
	}
}

static void test_uint_range(void **state)
{
	static const struct {
		const char *body;
		uint32_t lo, hi;
		const char *msg;
	} bad[] = {
		{ "{\"n\":-1}", 0, 10, "n must be in 0..10" },
		{ "{\"n\":11}", 0, 10, "n must be in 0..10" },
		{ "{\"n\":0}", 1, 10, "n must be in 1..10" },
		{ "{\"n\":2}", 1, 1, "n must be in 1..1" },
		{ "{\"n\":3600001}", 1, 3600000, "n must be in 1..3600000" },
		{ "{\"n\":4294967296}", 0, UINT32_MAX, "n must be in 0..4294967295" },
		{ "{\"n\":-4294967295}", 0, UINT32_MAX, "n must be in 0..4294967295" },
		{ "{\"n\":8589934592}", 0, 10, "n must be in 0..10" },
		{ "{\"n\":9223372036854775807}", 0, UINT32_MAX,
		  "n must be in 0..4294967295" },
		{ "{\"n\":-9223372036854775808}", 0, UINT32_MAX,
		  "n must be in 0..4294967295" },
		/* 2^32 + 5 must not wrap to 5. */
		{ "{\"n\":4294967301}", 0, 10, "n must be in 0..10" },
	};
	char msg[MSG_MAX];
	uint32_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (uint_of(bad[i].body, bad[i].lo, bad[i].hi, &out, msg) != -1)
			fail_msg("accepted: %s in %u..%u", bad[i].body, bad[i].lo,
				 bad[i].hi);
		assert_string_equal(msg, bad[i].msg);
		assert_int_equal(out, 4242);
	}
}

/* ---- fg_json_string ------------------------------------------------ */

static void test_string(void **state)
{
	char msg[MSG_MAX];
	const char *s = NULL;
	size_t len = 99;
	json_t *o;

	(void)state;
	o = obj("{\"s\":\"hello\",\"e\":\"\",\"u\":\"caf\\u00e9\",\"n\":1,"
		"\"z\":null,\"b\":false,\"a\":[\"x\"],\"o\":{}}");

	assert_int_equal(fg_json_string(o, "s", 5, &s, &len, msg, sizeof(msg)), 0);
	assert_string_equal(s, "hello");
	assert_int_equal(len, 5);

	/* The bound is in bytes: "café" is 5. */
	assert_int_equal(fg_json_string(o, "u", 5, &s, &len, msg, sizeof(msg)), 0);
	assert_string_equal(s, "caf\xc3\xa9");
	assert_int_equal(len, 5);
	assert_int_equal(fg_json_string(o, "u", 4, &s, &len, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "u is longer than 4 bytes");
	assert_null(s);
	assert_int_equal(len, 0);

	assert_int_equal(fg_json_string(o, "s", 4, &s, &len, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "s is longer than 4 bytes");

	assert_int_equal(fg_json_string(o, "e", 0, &s, &len, msg, sizeof(msg)), 0);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(len, 0);

	/* Absent: 0 with *out NULL, *len 0. */
	s = "stale";
	len = 99;
	assert_int_equal(fg_json_string(o, "missing", 10, &s, &len, msg,
					sizeof(msg)), 0);
	assert_null(s);
	assert_int_equal(len, 0);

	/* Present with another type, null included. */
	static const char *const wrong[] = { "n", "z", "b", "a", "o" };
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		char want[64];

		s = "stale";
		assert_int_equal(fg_json_string(o, wrong[i], 100, &s, &len, msg,
						sizeof(msg)), -1);
		snprintf(want, sizeof(want), "%s must be a string", wrong[i]);
		assert_string_equal(msg, want);
		assert_null(s);
	}
	json_decref(o);
}

/* ---- fg_json_known ------------------------------------------------- */

static const char *const ACQ[] = { "ttl_ms", "wait_ms", "mode", NULL };
static const char *const NONE[] = { NULL };

/* fg_json_known on the body `s`: its result; msg starts as "unset". */
static int known_of(const char *s, const char *call,
		    const char *const known[], char *msg, size_t cap)
{
	json_t *o = obj(s);
	int rc;

	snprintf(msg, cap, "unset");
	rc = fg_json_known(o, call, known, msg, cap);
	json_decref(o);
	return rc;
}

static void test_known_accepts(void **state)
{
	static const char *const ok[] = {
		"{}",
		"{\"ttl_ms\":1000}",
		"{\"wait_ms\":0,\"ttl_ms\":100,\"mode\":\"shared\"}",
		/* only names are checked here; values are the fields' own */
		"{\"mode\":null,\"wait_ms\":\"x\"}",
	};
	char msg[MSG_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(known_of(ok[i], "acquire", ACQ, msg, sizeof(msg)), 0);
		assert_string_equal(msg, "unset"); /* untouched */
	}
	assert_int_equal(known_of("{}", "release", NONE, msg, sizeof(msg)), 0);
}

static void test_known_names_the_typo(void **state)
{
	char msg[MSG_MAX];

	(void)state;
	assert_int_equal(known_of("{\"ttl_ms\":1000,\"wiat_ms\":100}", "acquire",
				  ACQ, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"wiat_ms\": acquire takes "
			    "ttl_ms, wait_ms, mode");

	/* every unknown field, in body order */
	assert_int_equal(known_of("{\"ttl\":1000,\"mode\":\"shared\",\"wiat_ms\":1}",
				  "acquire", ACQ, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "unknown fields \"ttl\", \"wiat_ms\": acquire "
			    "takes ttl_ms, wait_ms, mode");

	/* names are exact: case and blanks count */
	assert_int_equal(known_of("{\"TTL_MS\":1}", "acquire", ACQ, msg,
				  sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"TTL_MS\": acquire takes "
			    "ttl_ms, wait_ms, mode");
	assert_int_equal(known_of("{\"ttl_ms \":1}", "acquire", ACQ, msg,
				  sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"ttl_ms \": acquire takes "
			    "ttl_ms, wait_ms, mode");
	assert_int_equal(known_of("{\"\":1}", "acquire", ACQ, msg,
				  sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"\": acquire takes "
			    "ttl_ms, wait_ms, mode");

	/* a call that takes none */
	assert_int_equal(known_of("{\"lease\":\"x\"}", "release", NONE, msg,
				  sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"lease\": release takes no "
			    "body fields");
}

static void test_known_quotes_names(void **state)
{
	char msg[MSG_MAX];

	(void)state;
	/* quotes, backslashes and control bytes are escaped; UTF-8 stays */
	assert_int_equal(known_of("{\"a\\\"b\\\\c\\n\\u007f\":1}", "release",
				  NONE, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"a\\\"b\\\\c\\u000a\\u007f\": "
			    "release takes no body fields");
	assert_int_equal(known_of("{\"d\\u00e9lai\":1}", "release", NONE, msg,
				  sizeof(msg)), -1);
	assert_string_equal(msg, "unknown field \"d\xc3\xa9lai\": release "
			    "takes no body fields");
}

/* A long name is cut to FG_JSON_NAME_SHOWN bytes, never inside a UTF-8
 * sequence. */
static void test_known_long_names(void **state)
{
	char body[512], want[512], msg[MSG_MAX];
	char name[FG_JSON_NAME_SHOWN + 40];

	(void)state;
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	snprintf(body, sizeof(body), "{\"%s\":1}", name);
	assert_int_equal(known_of(body, "release", NONE, msg, sizeof(msg)), -1);
	snprintf(want, sizeof(want), "unknown field \"%.*s...\": release takes "
		 "no body fields", FG_JSON_NAME_SHOWN, name);
	assert_string_equal(msg, want);

	/* "é" (2 bytes) across the cut: the whole character goes */
	memset(name, 'x', sizeof(name) - 1);
	name[FG_JSON_NAME_SHOWN - 1] = '\xc3';
	name[FG_JSON_NAME_SHOWN] = '\xa9';
	snprintf(body, sizeof(body), "{\"%s\":1}", name);
	assert_int_equal(known_of(body, "release", NONE, msg, sizeof(msg)), -1);
	snprintf(want, sizeof(want), "unknown field \"%.*s...\": release takes "
		 "no body fields", FG_JSON_NAME_SHOWN - 1, name);
	assert_string_equal(msg, want);

	/* exactly FG_JSON_NAME_SHOWN bytes: shown whole */
	name[FG_JSON_NAME_SHOWN - 1] = 'x';
	name[FG_JSON_NAME_SHOWN] = '\0';
	snprintf(body, sizeof(body), "{\"%s\":1}", name);
	assert_int_equal(known_of(body, "release", NONE, msg, sizeof(msg)), -1);
	snprintf(want, sizeof(want), "unknown field \"%s\": release takes "
		 "no body fields", name);
	assert_string_equal(msg, want);
}

/* A message that does not fit ends in "..." at a piece's end, within
 * the buffer, whatever its size. */
static void test_known_small_msg(void **state)
{
	const char *body = "{\"aaaa\":1,\"bbbb\":2,\"cccc\":3}";
	char full[MSG_MAX];

	(void)state;
	assert_int_equal(known_of(body, "acquire", ACQ, full, sizeof(full)), -1);
	assert_string_equal(full, "unknown fields \"aaaa\", \"bbbb\", \"cccc\": "
			    "acquire takes ttl_ms, wait_ms, mode");
	for (size_t cap = 0; cap <= strlen(full); cap++) {
		char canary[MSG_MAX + 1];
		memset(canary, '#', sizeof(canary));
		json_t *o = obj(body);
		assert_int_equal(fg_json_known(o, "acquire", ACQ, canary, cap), -1);
		json_decref(o);
		assert_true(canary[cap] == '#');       /* nothing past cap */
		if (cap == 0)
			continue;
		size_t len = strlen(canary);
		assert_true(len < cap);
		if (cap < 5) {
			assert_int_equal(len, 0);
			continue;
		}
		/* a prefix of the full message made of whole pieces, then "..." */
		assert_true(len >= 3);
		assert_memory_equal(canary + len - 3, "...", 3);
		assert_memory_equal(canary, full, len - 3);
	}
}

/* ---- fg_parse_u64 -------------------------------------------------- */

static void test_parse_u64_accepts(void **state)
{
	static const struct {
		const char *s;
		uint64_t max, want;
	} ok[] = {
		{ "0", 10, 0 },
		{ "9", 9, 9 },
		{ "10", 10, 10 },
		{ "123", 1000, 123 },
		{ "007", 10, 7 },
		{ "00000000000000000001", 10, 1 }, /* 20 chars */
		{ "300000", FG_WAIT_MAX, FG_WAIT_MAX },
		{ "9007199254740991", FG_TOKEN_MAX - 1, FG_TOKEN_MAX - 1 },
		{ "18446744073709551615", UINT64_MAX, UINT64_MAX },
		{ "18446744073709551614", UINT64_MAX - 1, UINT64_MAX - 1 },
		{ "1844674407370955161", UINT64_MAX, 1844674407370955161u },
	};
	uint64_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		out = 4242;
		if (fg_parse_u64(ok[i].s, ok[i].max, &out) != 0)
			fail_msg("refused: \"%s\" with max %llu", ok[i].s,
				 (unsigned long long)ok[i].max);
		assert_int_equal(out, ok[i].want);
	}
}

static void test_parse_u64_refuses(void **state)
{
	static const struct {
		const char *s;
		uint64_t max;
	} bad[] = {
		{ "", UINT64_MAX },
		{ "-1", UINT64_MAX },
		{ "-0", UINT64_MAX },
		{ "+1", UINT64_MAX },
		{ " 1", UINT64_MAX },
		{ "1 ", UINT64_MAX },
		{ "1\n", UINT64_MAX },
		{ "1.5", UINT64_MAX },
		{ "1.0", UINT64_MAX },
		{ "1e3", UINT64_MAX },
		{ "0x10", UINT64_MAX },
		{ "12abc", UINT64_MAX },
		{ "abc", UINT64_MAX },
		{ "1_000", UINT64_MAX },
		{ "000000000000000000001", UINT64_MAX }, /* 21 chars */
		{ "18446744073709551616", UINT64_MAX },
		{ "18446744073709551620", UINT64_MAX },
		{ "99999999999999999999", UINT64_MAX },
		{ "36893488147419103232", UINT64_MAX }, /* 2^65 */
		{ "11", 10 },
		{ "100", 99 },
		{ "1001", 1000 },
		{ "300001", FG_WAIT_MAX },
		{ "9007199254740992", FG_TOKEN_MAX - 1 },
		{ "18446744073709551615", UINT64_MAX - 1 },
	};
	uint64_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out = 4242;
		if (fg_parse_u64(bad[i].s, bad[i].max, &out) != -1)
			fail_msg("accepted: \"%s\" with max %llu -> %llu",
				 bad[i].s, (unsigned long long)bad[i].max,
				 (unsigned long long)out);
		assert_int_equal(out, 4242);
	}
	out = 4242;
	assert_int_equal(fg_parse_u64(NULL, UINT64_MAX, &out), -1);
	assert_int_equal(out, 4242);
}

/* Every value around the maximum, for maxima of 10 and up. */
static void test_parse_u64_boundary(void **state)
{
	static const uint64_t maxima[] = {
		10, 11, 19, 99, 100, 101, 255, 1000, FG_WAIT_MAX,
		FG_TOKEN_MAX - 1, UINT64_MAX / 10, UINT64_MAX / 10 + 1,
		UINT64_MAX - 1,
	};
	char s[32];
	uint64_t out;

	(void)state;
	for (size_t i = 0; i < sizeof(maxima) / sizeof(maxima[0]); i++) {
		uint64_t max = maxima[i];

		for (uint64_t v = max - 10; v <= max; v++) {
			snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
			if (fg_parse_u64(s, max, &out) != 0 || out != v)
				fail_msg("\"%s\" with max %llu refused", s,
					 (unsigned long long)max);
		}
		for (uint64_t v = max + 1; v <= max + 10 && v > max; v++) {
			snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
			if (fg_parse_u64(s, max, &out) == 0)
				fail_msg("\"%s\" with max %llu accepted", s,
					 (unsigned long long)max);
		}
		/* Ten times the maximum, and the maximum with a digit added. */
		if (max <= UINT64_MAX / 10) {
			snprintf(s, sizeof(s), "%llu0", (unsigned long long)max);
			assert_int_equal(fg_parse_u64(s, max, &out), -1);
		}
	}
}

/* ---- fg_jw ------------------------------------------------------------ */

/* jansson's compact text of the object, as send_json() writes it. */
static char *dumped(json_t *o)
{
	char *t = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	assert_non_null(t);
	return t;
}

static void test_jw_as_jansson(void **state)
{
	(void)state;
	char buf[1024];
	struct fg_jw w;
	const char *names[] = { "a", "a/b.c~d-e_f", "x y", "{}[]:,", "/",
				"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ" };
	const uint64_t nums[] = { 0, 1, 9, 10, 30000, 4294967295u,
				  9007199254740991u, INT64_MAX };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		for (size_t j = 0; j < sizeof(nums) / sizeof(nums[0]); j++) {
			fg_jw_init(&w, buf, sizeof(buf));
			fg_jw_str(&w, "name", names[i]);
			fg_jw_uint(&w, "token", nums[j]);
			fg_jw_str(&w, "mode", "exclusive");
			fg_jw_str(&w, "empty", "");
			size_t len = fg_jw_end(&w);
			char *want = dumped(json_pack("{s:s, s:I, s:s, s:s}",
				"name", names[i], "token", (json_int_t)nums[j],
				"mode", "exclusive", "empty", ""));
			assert_int_equal(len, strlen(want));
			assert_string_equal(buf, want);
			free(want);
		}
	fg_jw_init(&w, buf, sizeof(buf));
	assert_int_equal(fg_jw_end(&w), 2);
	assert_string_equal(buf, "{}");
}

static void test_jw_fails_where_jansson_escapes(void **state)
{
	(void)state;
	char buf[256];
	struct fg_jw w;
	const char *odd[] = { "a\"b", "a\\b", "a\nb", "\x01", "\x7f",
			      "caf\xc3\xa9" };
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		fg_jw_init(&w, buf, sizeof(buf));
		fg_jw_str(&w, "a", "ok");
		fg_jw_str(&w, "b", odd[i]);
		fg_jw_uint(&w, "c", 1);
		assert_int_equal(fg_jw_end(&w), 0);
	}
	fg_jw_init(&w, buf, sizeof(buf));
	fg_jw_uint(&w, "n", (uint64_t)INT64_MAX + 1);
	assert_int_equal(fg_jw_end(&w), 0);
}

static void test_jw_fits_or_fails(void **state)
{
	(void)state;
	char buf[32];
	struct fg_jw w;
	/* {"k":"<n x's>"} is n + 8 bytes and its NUL */
	for (size_t n = 0; n < 40; n++) {
		char s[41];
		memset(s, 'x', n);
		s[n] = '\0';
		memset(buf, '#', sizeof(buf));
		fg_jw_init(&w, buf, sizeof(buf));
		fg_jw_str(&w, "k", s);
		size_t len = fg_jw_end(&w);
		if (n + 8 + 1 <= sizeof(buf)) {
			assert_int_equal(len, n + 8);
			assert_int_equal(buf[len], '\0');
		} else {
			assert_int_equal(len, 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body_objects),
		cmocka_unit_test(test_body_empty),
		cmocka_unit_test(test_body_not_json),
		cmocka_unit_test(test_body_not_object),
		cmocka_unit_test(test_body_duplicate_keys),
		cmocka_unit_test(test_body_len),
		cmocka_unit_test(test_body_small_msg),
		cmocka_unit_test(test_uint_accepts),
		cmocka_unit_test(test_uint_absent),
		cmocka_unit_test(test_uint_wrong_type),
		cmocka_unit_test(test_uint_range),
		cmocka_unit_test(test_string),
		cmocka_unit_test(test_known_accepts),
		cmocka_unit_test(test_known_names_the_typo),
		cmocka_unit_test(test_known_quotes_names),
		cmocka_unit_test(test_known_long_names),
		cmocka_unit_test(test_known_small_msg),
		cmocka_unit_test(test_parse_u64_accepts),
		cmocka_unit_test(test_parse_u64_refuses),
		cmocka_unit_test(test_parse_u64_boundary),
		cmocka_unit_test(test_jw_as_jansson),
		cmocka_unit_test(test_jw_fails_where_jansson_escapes),
		cmocka_unit_test(test_jw_fits_or_fails),
	};

	return cmocka_run_group_tests_name("jsonio", tests, NULL, NULL);
}
