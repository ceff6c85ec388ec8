/*
 * fuzz_json - request bodies and query numbers (gateway/base/jsonio.c): the
 * bodies of POST/PATCH /_fence/v1/locks/... and /_fence/v1/check, and the
 * ?wait_ms= / ?after= numbers.
 *
 * Properties:
 *  - fg_json_body(): the result is NULL with a non-empty message, or a JSON
 *    object; an all-whitespace body is {} exactly when empty bodies are
 *    allowed; allowing empty bodies changes nothing else;
 *  - fg_json_uint() on every field the lock API reads, and on every key of
 *    the object, for several ranges: absent leaves *out alone and returns
 *    0; 0 means an integer inside [lo, hi], stored exactly; -1 means not
 *    an integer or out of range, with a message, *out untouched;
 *  - fg_json_string(): absent gives NULL/0; 0 means a string of at most
 *    maxlen bytes, pointing at the object's own value; -1 otherwise;
 *  - fg_json_known() with the acquire fields, with none, and with every
 *    key of the object, at several message sizes: 0 exactly when every
 *    key is known (msg untouched); -1 otherwise, with a message that fits
 *    its buffer and is valid UTF-8 (json_string() takes it), and that
 *    starts "unknown field" when the buffer is large;
 *  - fg_parse_u64() on the input as a C string agrees with a reference
 *    (1..20 decimal digits, value <= max, no overflow) for several maxima.
 */
#include <stdbool.h>
#include <string.h>

#include "fencegate/sequencer.h"
#include "fuzz.h"
#include "base/jsonio.h"

static bool all_space(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (d[i] != ' ' && d[i] != '\t' && d[i] != '\r' && d[i] != '\n')
			return false;
	return true;
}

struct range {
	uint32_t lo, hi;
};

static const struct range ranges[] = {
	{ 1, 3600000 },     /* ttl_ms */
	{ 0, 3600000 },     /* wait_ms, lock_delay_ms */
	{ 0, UINT32_MAX },
	{ 5, 5 },
	{ 0, 0 },
};

static void check_uint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		uint32_t lo = ranges[i].lo, hi = ranges[i].hi;
		uint32_t out = 0xdeadbeef;
		char msg[256] = "";
		int r = fg_json_uint(o, key, lo, hi, &out, msg, sizeof(msg));
		if (!v) {
			PROPERTY(r == 0 && out == 0xdeadbeef);
			continue;
		}
		bool ok = json_is_integer(v) && json_integer_value(v) >= (json_int_t)lo &&
			  json_integer_value(v) <= (json_int_t)hi;
		PROPERTY((r == 0) == ok);
		if (ok) {
			PROPERTY(out == (uint32_t)json_integer_value(v));
			PROPERTY(out >= lo && out <= hi);
		} else {
			PROPERTY(r == -1 && out == 0xdeadbeef && msg[0] != '\0');
		}
	}
}

static void check_string(json_t *o, const char *key)
{
	static const size_t maxes[] = { 0, 16, 22, 256, 65536 };
	json_t *v = json_object_get(o, key);
	for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
		const char *s = (const char *)1;
		size_t len = 777;
		char msg[256] = "";
		int r = fg_json_string(o, key, maxes[i], &s, &len, msg, sizeof(msg));
		if (!v) {
			PROPERTY(r == 0 && s == NULL && len == 0);
			continue;
		}
		bool ok = json_is_string(v) && json_string_length(v) <= maxes[i];
		PROPERTY((r == 0) == ok);
		if (ok) {
			PROPERTY(s == json_string_value(v) && len == json_string_length(v));
			PROPERTY(len <= maxes[i] && s[len] == '\0');
		} else {
			PROPERTY(r == -1 && msg[0] != '\0');
		}
	}
}

static bool in_list(const char *key, const char *const known[])
{
	for (size_t i = 0; known[i]; i++)
		if (strcmp(key, known[i]) == 0)
			return true;
	return false;
}

static void check_known_with(json_t *o, const char *const known[])
{
	static const size_t caps[] = { 0, 1, 4, 5, 6, 16, 40, 256, 512 };
	bool all = true;
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (!in_list(key, known))
			all = false;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		char msg[513];
		memset(msg, '#', sizeof(msg));
		int r = fg_json_known(o, "acquire", known, msg, caps[i]);
		PROPERTY((r == 0) == all);
		PROPERTY(msg[caps[i]] == '#');
		if (r == 0) {
			PROPERTY(msg[0] == '#');
			continue;
		}
		if (caps[i] == 0)
			continue;
		size_t len = strnlen(msg, caps[i]);
		PROPERTY(len < caps[i]);
		json_t *j = json_string(msg);
		PROPERTY(j != NULL);
		json_decref(j);
		if (caps[i] >= 256)
			PROPERTY(strncmp(msg, "unknown field", 13) == 0);
	}
}

static void check_known(json_t *o)
{
	static const char *const acquire[] = {
		"ttl_ms", "wait_ms", "mode", "owner", "value", "lock_delay_ms",
		"lease", NULL
	};
	static const char *const none[] = { NULL };
	const char *all[9];
	size_t n = 0;
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		if (n == 8)
			break;
		all[n++] = key;
	}
	all[n] = NULL;
	check_known_with(o, acquire);
	check_known_with(o, none);
	check_known_with(o, all);
}

static void check_body(const uint8_t *data, size_t size)
{
	char msg[256] = "", msg2[256] = "";
	json_t *a = fg_json_body((const char *)data, size, true, msg, sizeof(msg));
	json_t *b = fg_json_body((const char *)data, size, false, msg2, sizeof(msg2));
	bool blank = all_space(data, size);

	PROPERTY(a != NULL || msg[0] != '\0');
	PROPERTY(b != NULL || msg2[0] != '\0');
	PROPERTY(a == NULL || json_is_object(a));
	PROPERTY(b == NULL || json_is_object(b));
	if (blank) {
		PROPERTY(a != NULL && json_object_size(a) == 0);
		PROPERTY(b == NULL);
	} else {
		PROPERTY((a == NULL) == (b == NULL));
		if (a)
			PROPERTY(json_equal(a, b));
	}
	json_decref(b);
	if (!a)
		return;

	static const char *const uints[] = { "ttl_ms", "wait_ms", "lock_delay_ms" };
	static const char *const strings[] = { "mode", "owner", "value", "lease", "sequencer" };
	for (size_t i = 0; i < sizeof(uints) / sizeof(uints[0]); i++)
		check_uint(a, uints[i]);
	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		check_string(a, strings[i]);
	check_known(a);
	const char *key;
	json_t *v;
	int k = 0;
	json_object_foreach(a, key, v) {
		if (k++ == 8)
			break;
		check_uint(a, key);
		check_string(a, key);
	}
	json_decref(a);
}

/* Reference: 1..20 decimal digits whose value is <= max. */
static bool ref_u64(const char *s, uint64_t max, uint64_t *out)
{
	size_t n = strlen(s);
	if (n == 0 || n > 20)
		return false;
	unsigned __int128 v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return false;
	*out = (uint64_t)v;
	return true;
}

static void check_u64(const uint8_t *data, size_t size)
{
	static const uint64_t maxes[] = { UINT64_MAX, FG_TOKEN_MAX - 1, 3600000,
					  9, 0, 10, 18446744073709551609ULL };
	if (size > 64)
		return;
	char s[65];
	memcpy(s, data, size);
	s[size] = '\0';
	for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
		uint64_t got = 42, want = 0;
		bool ok = ref_u64(s, maxes[i], &want);
		int r = fg_parse_u64(s, maxes[i], &got);
		PROPERTY((r == 0) == ok);
		if (ok)
			PROPERTY(got == want);
		else
			PROPERTY(r == -1 && got == 42);
	}
	PROPERTY(fg_parse_u64(NULL, UINT64_MAX, &(uint64_t){ 0 }) == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_body(data, size);
	check_u64(data, size);
	return 0;
}
