/*
 * tests/unit/fencectl/test_evline.c - an event of GET /_fence/v1/events
 * as the line `fencectl events` prints (fencectl/evline.c).
 *
 * Pins evline.h on fixed JSON: the time, kind and lock, then token,
 * principal, owner and client ("-" when null or absent), then the kind's
 * detail in its order (a refusal's code, method, path and count) and any
 * other detail field after; every byte a client chose that is not
 * printable ASCII, the space and '\' among them, shows as \xHH, so a line
 * is one line whatever an owner or a path holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "evline.h"

/* The line of the event in text (caller frees). */
static char *line_of(const char *text)
{
	json_error_t err;
	json_t *ev = json_loads(text, 0, &err);
	assert_non_null(ev);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	fg_evline_print(f, ev);
	fclose(f);
	json_decref(ev);
	return buf;
}

static void expect(const char *text, const char *line)
{
	char *got = line_of(text);
	assert_string_equal(got, line);
	free(got);
}

static void test_refused_shows_code_method_path_count(void **state)
{
	(void)state;
	expect("{\"id\":\"1764684301123-0\",\"at\":\"2026-12-02T14:05:01.123Z\","
	       "\"kind\":\"refused\",\"lock\":\"docs/a.txt\",\"token\":41,"
	       "\"principal\":\"ci\",\"owner\":null,\"client\":\"10.0.0.7\","
	       "\"gateway\":\"00112233aabbccdd\",\"detail\":{\"count\":3,"
	       "\"path\":\"/docs/a.txt\",\"method\":\"PUT\",\"code\":\"stale_token\"}}",
	       "2026-12-02T14:05:01.123Z refused docs/a.txt token=41 principal=ci "
	       "owner=- client=10.0.0.7 code=stale_token method=PUT "
	       "path=/docs/a.txt count=3\n");
}

static void test_granted_and_others(void **state)
{
	(void)state;
	expect("{\"id\":\"1-0\",\"at\":\"2026-12-02T14:05:00.000Z\",\"kind\":\"granted\","
	       "\"lock\":\"jobs/x\",\"token\":7,\"principal\":null,\"owner\":\"host-1\","
	       "\"client\":\"127.0.0.1\",\"gateway\":null,"
	       "\"detail\":{\"ttl_ms\":30000,\"mode\":\"shared\",\"waited\":true}}",
	       "2026-12-02T14:05:00.000Z granted jobs/x token=7 principal=- "
	       "owner=host-1 client=127.0.0.1 mode=shared ttl_ms=30000 waited=true\n");
	expect("{\"at\":\"T\",\"kind\":\"lease_lost\",\"lock\":\"a\",\"token\":null,"
	       "\"principal\":\"p\",\"owner\":null,\"client\":\"::1\",\"detail\":{}}",
	       "T lease_lost a token=- principal=p owner=- client=::1\n");
	expect("{\"at\":\"T\",\"kind\":\"broken\",\"lock\":\"a\",\"token\":3,"
	       "\"detail\":{\"by\":\"admin\",\"new\":[1]}}",
	       "T broken a token=3 principal=- owner=- client=- by=admin new=[1]\n");
	expect("{\"at\":\"T\",\"kind\":\"given_back\",\"lock\":\"a\",\"token\":3,"
	       "\"detail\":{\"reason\":\"client_gone\"}}",
	       "T given_back a token=3 principal=- owner=- client=- reason=client_gone\n");
}

static void test_what_a_client_chose_cannot_move_the_terminal(void **state)
{
	(void)state;
	/* an owner with a space, an escape sequence and a newline; a path
	 * with a backslash and a non-ASCII letter */
	expect("{\"at\":\"T\",\"kind\":\"refused\",\"lock\":\"a\",\"token\":1,"
	       "\"owner\":\"x y\\u001b[2J\\nfake line\","
	       "\"detail\":{\"code\":\"stale_token\",\"method\":\"PUT\","
	       "\"path\":\"/a\\\\b\\u00e9\",\"count\":1}}",
	       "T refused a token=1 principal=- owner=x\\x20y\\x1b[2J\\x0afake\\x20line "
	       "client=- code=stale_token method=PUT path=/a\\x5cb\\xc3\\xa9 count=1\n");
}

static void test_a_strange_event_still_makes_one_line(void **state)
{
	(void)state;
	expect("{}", "? ? - token=- principal=- owner=- client=-\n");
	expect("{\"kind\":\"new_kind\",\"lock\":\"a\",\"detail\":{\"k\":\"v\"}}",
	       "? new_kind a token=- principal=- owner=- client=- k=v\n");
	expect("{\"kind\":\"refused\",\"detail\":\"not an object\"}",
	       "? refused - token=- principal=- owner=- client=-\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_shows_code_method_path_count),
		cmocka_unit_test(test_granted_and_others),
		cmocka_unit_test(test_what_a_client_chose_cannot_move_the_terminal),
		cmocka_unit_test(test_a_strange_event_still_makes_one_line),
	};

	return cmocka_run_group_tests_name("evline", tests, NULL, NULL);
}
