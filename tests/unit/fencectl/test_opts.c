/*
 * tests/unit/fencectl/test_opts.c - fencectl's command line reader
 * (fencectl/opts.c).
 *
 * Pins opts.h: options before, between and after positional arguments, in
 * the forms --name value, --name=value, -x value, -xvalue and clusters of
 * one-letter flags (-nE 3), as getopt(3) reads them; `--` ends the
 * options; with a command, the first argument past the positionals starts
 * it and everything after belongs to it; unknown options, missing values,
 * a value given to a flag and extra arguments are refused with a message
 * that names them. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "opts.h"

enum { TTL = 1, JSON, HELP, BAD, WAIT, NOWAIT, CODE, CMD };

static const struct fg_opt table[] = {
	{ "ttl", 0, true, TTL },
	{ "json", 0, false, JSON },
	{ "help", 'h', false, HELP },
	{ "bad", 0, true, BAD },
	{ "wait", 'w', true, WAIT },
	{ "no-wait", 'n', false, NOWAIT },
	{ "conflict-exit-code", 'E', true, CODE },
	{ "command", 'c', true, CMD },
	{ NULL, 0, false, 0 },
};

struct seen {
	char log[512];
};

static int on_opt(void *ctx, int id, const char *name, const char *value,
		  char *msg, size_t msglen)
{
	struct seen *s = ctx;
	size_t n = strlen(s->log);

	if (id == BAD) {
		snprintf(msg, msglen, "%s: no", name);
		return -1;
	}
	snprintf(s->log + n, sizeof(s->log) - n, "[%d %s %s]", id, name,
		 value ? value : "-");
	return 0;
}

static int parse(char **argv, size_t npos, bool with_cmd, struct seen *s,
		 struct fg_args *a, char *msg)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	memset(s, 0, sizeof(*s));
	msg[0] = '\0';
	return fg_opts_parse(table, argc, argv, npos, with_cmd, on_opt, s, a,
			     msg, 256);
}

static void test_options_anywhere(void **state)
{
	(void)state;
	char *argv[] = { "--json", "name", "--ttl", "5s", "--ttl=7s", "-h",
			 NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, false, &s, &a, msg), 0);
	assert_int_equal(a.npos, 1);
	assert_string_equal(a.pos[0], "name");
	assert_null(a.cmd);
	assert_string_equal(s.log, "[2 --json -][1 --ttl 5s][1 --ttl 7s]"
				   "[3 -h -]");
}

static void test_command_after_positionals(void **state)
{
	(void)state;
	char *argv[] = { "name", "--ttl", "5s", "sh", "-c", "--ttl x", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, true, &s, &a, msg), 0);
	assert_string_equal(a.pos[0], "name");
	assert_int_equal(a.ncmd, 3);
	assert_string_equal(a.cmd[0], "sh");
	assert_string_equal(a.cmd[2], "--ttl x");
	assert_string_equal(s.log, "[1 --ttl 5s]");
}

static void test_double_dash_starts_the_command(void **state)
{
	(void)state;
	char *argv[] = { "--ttl", "1s", "name", "--", "--json", "x", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, true, &s, &a, msg), 0);
	assert_int_equal(a.ncmd, 2);
	assert_string_equal(a.cmd[0], "--json");
	assert_string_equal(s.log, "[1 --ttl 1s]");
}

static void test_double_dash_before_positionals(void **state)
{
	(void)state;
	char *argv[] = { "--", "-odd-name", "value", "cmd", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 2, true, &s, &a, msg), 0);
	assert_int_equal(a.npos, 2);
	assert_string_equal(a.pos[0], "-odd-name");
	assert_string_equal(a.pos[1], "value");
	assert_int_equal(a.ncmd, 1);
	assert_string_equal(a.cmd[0], "cmd");
}

static void test_no_command_when_none_given(void **state)
{
	(void)state;
	char *argv[] = { "name", "--", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, true, &s, &a, msg), 0);
	assert_null(a.cmd);
	assert_int_equal(a.ncmd, 0);
}

static void refused(char **argv, size_t npos, bool with_cmd,
		    const char *want)
{
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, npos, with_cmd, &s, &a, msg), -1);
	assert_non_null(strstr(msg, want));
}

static void test_refusals(void **state)
{
	(void)state;
	char *unknown[] = { "--nope", NULL };
	char *unknown_short[] = { "-x", NULL };
	char *clustered[] = { "-hx", NULL };
	char *short_missing[] = { "name", "-nw", NULL };
	char *missing[] = { "name", "--ttl", NULL };
	char *flag_value[] = { "--json=1", NULL };
	char *extra[] = { "a", "b", NULL };
	char *bad_value[] = { "--bad", "v", NULL };

	refused(unknown, 1, false, "unknown option '--nope'");
	refused(unknown_short, 1, false, "unknown option '-x'");
	refused(clustered, 1, false, "unknown option '-x' (in '-hx')");
	refused(short_missing, 1, false, "option '-w' needs a value");
	refused(missing, 1, false, "option '--ttl' needs a value");
	refused(flag_value, 1, false, "option '--json' takes no value");
	refused(extra, 1, false, "unexpected argument 'b'");
	refused(bad_value, 1, false, "--bad: no");
}

static void test_short_options_as_getopt_reads_them(void **state)
{
	(void)state;
	char *argv[] = { "-w", "5s", "name", "-w2", "-nE", "3", "-nE7", "-hn",
			 "-c", "echo -n x", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, true, &s, &a, msg), 0);
	assert_int_equal(a.npos, 1);
	assert_string_equal(a.pos[0], "name");
	assert_null(a.cmd);
	assert_string_equal(s.log, "[5 -w 5s][5 -w 2][6 -n -][7 -E 3]"
				   "[6 -n -][7 -E 7][3 -h -][6 -n -]"
				   "[8 -c echo -n x]");
}

static void test_short_option_value_may_start_with_a_dash(void **state)
{
	(void)state;
	char *argv[] = { "name", "-c", "-x", "--wait", "-1", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	/* a value is taken whatever it looks like, as getopt(3) does; the
	 * option's own reader judges it */
	assert_int_equal(parse(argv, 1, true, &s, &a, msg), 0);
	assert_string_equal(s.log, "[8 -c -x][5 --wait -1]");
	assert_null(a.cmd);
}

static void test_a_failing_flag_stops_the_cluster(void **state)
{
	(void)state;
	char *argv[] = { "-hbn", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, false, &s, &a, msg), -1);
	assert_string_equal(msg, "unknown option '-b' (in '-hbn')");
	/* -h before it was handled; nothing after it was */
	assert_string_equal(s.log, "[3 -h -]");
}

static void test_lone_dash_is_positional(void **state)
{
	(void)state;
	char *argv[] = { "-", NULL };
	struct seen s;
	struct fg_args a;
	char msg[256];

	assert_int_equal(parse(argv, 1, false, &s, &a, msg), 0);
	assert_string_equal(a.pos[0], "-");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options_anywhere),
		cmocka_unit_test(test_command_after_positionals),
		cmocka_unit_test(test_double_dash_starts_the_command),
		cmocka_unit_test(test_double_dash_before_positionals),
		cmocka_unit_test(test_no_command_when_none_given),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_lone_dash_is_positional),
		cmocka_unit_test(test_short_options_as_getopt_reads_them),
		cmocka_unit_test(test_short_option_value_may_start_with_a_dash),
		cmocka_unit_test(test_a_failing_flag_stops_the_cluster),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
