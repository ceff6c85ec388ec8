/*
 * tests/unit/base/test_config.c - the gateway's settings
 * (gateway/base/config.c).
 *
 * Pins config.h's contract: defaults, every flag form (--name value,
 * --name=value, '-' and '_' alike), strict numbers inside the ranges that
 * --help documents (the test keeps its own copy of them), addresses and
 * URLs, the `name value` config file with its line numbers, and that flags
 * override the file wherever --config stands. A refused value leaves the
 * setting as it was. Config files are mkstemp() files under $TMPDIR (or
 * /tmp), removed by the test. cmocka's asserts do not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/config.h"
#include "base/log.h"

#define ERR_MAX 1024

/* ---- helpers ------------------------------------------------------- */

/* fg_config_load on "fencegate" plus the NULL-terminated arguments. */
static enum fg_config_result load(struct fg_config *c, char *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = "fencegate";
	va_start(ap, err);
	for (char *a = va_arg(ap, char *); a; a = va_arg(ap, char *)) {
		assert_true(argc < 31);
		argv[argc++] = a;
	}
	va_end(ap);
	argv[argc] = NULL;
	err[0] = '\0';
	return fg_config_load(c, argc, argv, err, ERR_MAX);
}

/* A fresh config, loaded from the arguments; the result must be OK. */
#define LOAD_OK(c, err, ...)                                                 \
	do {                                                                 \
		fg_config_init(c);                                           \
		enum fg_config_result r_ = load(c, err, __VA_ARGS__, NULL);  \
		if (r_ != FG_CONFIG_OK)                                      \
			fail_msg("%s:%d: expected OK, got %d: %s", __FILE__, \
				 __LINE__, (int)r_, err);                    \
	} while (0)

/* A fresh config, loaded from the arguments; the result must be ERROR with
 * a message containing `want`. The config is finished afterwards. */
#define LOAD_ERR(want, ...)                                                  \
	do {                                                                 \
		struct fg_config c_;                                         \
		char e_[ERR_MAX];                                            \
		fg_config_init(&c_);                                         \
		enum fg_config_result r_ = load(&c_, e_, __VA_ARGS__, NULL); \
		if (r_ != FG_CONFIG_ERROR)                                   \
			fail_msg("%s:%d: expected ERROR, got %d", __FILE__,  \
				 __LINE__, (int)r_);                         \
		if (!strstr(e_, want))                                       \
			fail_msg("%s:%d: message \"%s\" lacks \"%s\"",       \
				 __FILE__, __LINE__, e_, want);              \
		fg_config_finish(&c_);                                       \
	} while (0)

static const char *tmpdir(void)
{
	const char *d = getenv("TMPDIR");
	return d && *d ? d : "/tmp";
}

/* Writes `text` to a new temporary file; returns its malloc'ed path. */
static char *write_file(const char *text)
{
	char *path;
	size_t len = strlen(text);
	int fd;

	assert_true(asprintf(&path, "%s/fg-test-config-XXXXXX", tmpdir()) > 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
	return path;
}

static void remove_file(char *path)
{
	assert_int_equal(unlink(path), 0);
	free(path);
}

/* Reads `text` as a config file into a fresh config: fg_config_read_file's
 * result; err holds its message. */
static int read_text(struct fg_config *c, const char *text, char *err,
		     char **path_out)
{
	char *path = write_file(text);
	int rc;

	fg_config_init(c);
	err[0] = '\0';
	rc = fg_config_read_file(c, path, err, ERR_MAX);
	if (path_out)
		*path_out = path;
	else
		remove_file(path);
	return rc;
}

/* ---- the numeric settings, the test's own copy of their ranges ------ */

struct uint_setting {
	const char *name; /* with dashes, as in --help */
	size_t off;
	unsigned min, max, def;
};

#define UINT_SETTING(n, f, lo, hi, d) \
	{ n, offsetof(struct fg_config, f), lo, hi, d }

static const struct uint_setting uints[] = {
	UINT_SETTING("threads", threads, 0, 256, 0),
	UINT_SETTING("max-connections", max_connections, 16, 1000000, 16384),
	UINT_SETTING("max-waiters", max_waiters, 1, 1000000, 20000),
	UINT_SETTING("idle-forget-ms", idle_forget_ms, 0, 86400000, 600000),
	UINT_SETTING("lock-delay-ms", lock_delay_ms, 0, 3600000, 0),
	UINT_SETTING("redis-timeout-ms", redis_timeout_ms, 10, 60000, 2000),
	UINT_SETTING("waiter-liveness-ms", waiter_liveness_ms, 1000, 600000, 10000),
	UINT_SETTING("max-header-bytes", max_header_bytes, 2048, 1048576, 16384),
	UINT_SETTING("client-timeout-s", client_timeout_s, 1, 3600, 30),
	UINT_SETTING("drain-delay-ms", drain_delay_ms, 0, 3600000, 0),
	UINT_SETTING("drain-timeout-ms", drain_timeout_ms, 0, 3600000, 30000),
	UINT_SETTING("upstream-connect-timeout-ms", upstream_connect_timeout_ms, 10, 600000, 2000),
	UINT_SETTING("upstream-timeout-ms", upstream_timeout_ms, 10, 3600000, 30000),
	UINT_SETTING("fence-margin-ms", fence_margin_ms, 0, 600000, 250),
	UINT_SETTING("write-max-ms", write_max_ms, 100, 86400000, 3600000),
};

#define NUINTS (sizeof(uints) / sizeof(uints[0]))

static unsigned uint_at(const struct fg_config *c, const struct uint_setting *u)
{
	return *(const unsigned *)((const char *)c + u->off);
}

/* name with '-' turned into '_'. */
static void underscored(const char *name, char *out, size_t cap)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < cap; i++)
		out[i] = name[i] == '-' ? '_' : name[i];
	out[i] = '\0';
}

/* ---- defaults ------------------------------------------------------ */

static void check_defaults(const struct fg_config *c)
{
	assert_string_equal(c->listen_host, "127.0.0.1");
	assert_int_equal(c->listen_port, 8080);
	assert_null(c->upstream);
	assert_string_equal(c->redis_host, "127.0.0.1");
	assert_int_equal(c->redis_port, 6379);
	assert_null(c->key_file);
	assert_int_equal(c->log_level, FG_LOG_INFO);
	assert_int_equal(c->forward_token, 0);
	assert_null(c->write_methods);
	assert_null(c->routes);
	assert_int_equal(c->nroutes, 0);
	assert_int_equal(c->readyz_requires, 0);
	for (size_t i = 0; i < NUINTS; i++) {
		if (uint_at(c, &uints[i]) != uints[i].def)
			fail_msg("default of %s: %u, expected %u", uints[i].name,
				 uint_at(c, &uints[i]), uints[i].def);
	}
}

static void test_defaults(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	fg_config_init(&c);
	check_defaults(&c);
	fg_config_finish(&c);

	/* No arguments at all: the defaults, unchanged. */
	fg_config_init(&c);
	assert_int_equal(fg_config_load(&c, 1, (char *[]){ "fencegate", NULL },
					err, sizeof(err)),
			 FG_CONFIG_OK);
	check_defaults(&c);
	fg_config_finish(&c);

	/* argc 0 (no program name) is no argument either. */
	fg_config_init(&c);
	assert_int_equal(fg_config_load(&c, 0, (char *[]){ NULL }, err,
					sizeof(err)),
			 FG_CONFIG_OK);
	check_defaults(&c);
	fg_config_finish(&c);
}

static void test_finish(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	fg_config_finish(NULL);

	LOAD_OK(&c, err, "--upstream", "http://h/", "--key-file", "k",
		"--write-methods", "PUT");
	assert_int_equal(fg_config_set(&c, "route", "/a/ a", err, sizeof(err)), 0);
	fg_config_finish(&c);
	assert_null(c.upstream);
	assert_null(c.key_file);
	assert_null(c.write_methods);
	assert_null(c.routes);
	assert_int_equal(c.nroutes, 0);
	/* A second finish is harmless. */
	fg_config_finish(&c);
}

/* ---- numbers ------------------------------------------------------- */

/* Every numeric setting through every flag form, at its bounds. */
static void test_uint_flag_forms(void **state)
{
	(void)state;
	for (size_t i = 0; i < NUINTS; i++) {
		const struct uint_setting *u = &uints[i];
		char dash[64], under[80], bare[64], lo[16], hi[16], mid[16];
		char eq_dash[96], eq_under[96], eq_hi[96];
		struct fg_config c;
		char err[ERR_MAX];

		snprintf(dash, sizeof(dash), "--%s", u->name);
		underscored(u->name, bare, sizeof(bare));
		snprintf(under, sizeof(under), "--%s", bare);
		snprintf(lo, sizeof(lo), "%u", u->min);
		snprintf(hi, sizeof(hi), "%u", u->max);
		snprintf(mid, sizeof(mid), "%u", u->min + (u->max - u->min) / 3);
		snprintf(eq_dash, sizeof(eq_dash), "%s=%s", dash, lo);
		snprintf(eq_under, sizeof(eq_under), "%s=%s", under, mid);
		snprintf(eq_hi, sizeof(eq_hi), "%s=%s", under, hi);

		LOAD_OK(&c, err, dash, lo);
		assert_int_equal(uint_at(&c, u), u->min);
		fg_config_finish(&c);

		LOAD_OK(&c, err, dash, hi);
		assert_int_equal(uint_at(&c, u), u->max);
		fg_config_finish(&c);

		LOAD_OK(&c, err, under, mid);
		assert_int_equal(uint_at(&c, u), u->min + (u->max - u->min) / 3);
		fg_config_finish(&c);

		LOAD_OK(&c, err, eq_dash);
		assert_int_equal(uint_at(&c, u), u->min);
		fg_config_finish(&c);

		LOAD_OK(&c, err, eq_under);
		assert_int_equal(uint_at(&c, u), u->min + (u->max - u->min) / 3);
		fg_config_finish(&c);

		LOAD_OK(&c, err, eq_hi);
		assert_int_equal(uint_at(&c, u), u->max);
		fg_config_finish(&c);

		/* The last of two wins. */
		LOAD_OK(&c, err, dash, hi, eq_dash);
		assert_int_equal(uint_at(&c, u), u->min);
		fg_config_finish(&c);

		/* fg_config_set takes the bare name in either spelling. */
		fg_config_init(&c);
		assert_int_equal(fg_config_set(&c, u->name, hi, err, sizeof(err)), 0);
		assert_int_equal(uint_at(&c, u), u->max);
		assert_int_equal(fg_config_set(&c, bare, lo, err, sizeof(err)), 0);
		assert_int_equal(uint_at(&c, u), u->min);
		fg_config_finish(&c);
	}
}

/* One below the minimum and one above the maximum are refused, with the
 * range in the message, and the setting keeps its value. */
static void test_uint_out_of_range(void **state)
{
	(void)state;
	for (size_t i = 0; i < NUINTS; i++) {
		const struct uint_setting *u = &uints[i];
		char below[16], above[16], range[48];
		struct fg_config c;
		char err[ERR_MAX];

		snprintf(below, sizeof(below), "%u", u->min - 1);
		snprintf(above, sizeof(above), "%u", u->max + 1);
		snprintf(range, sizeof(range), "%u..%u", u->min, u->max);

		fg_config_init(&c);
		if (u->min > 0) {
			assert_int_equal(fg_config_set(&c, u->name, below, err,
						       sizeof(err)), -1);
			assert_non_null(strstr(err, u->name));
			assert_non_null(strstr(err, range));
			assert_int_equal(uint_at(&c, u), u->def);
			assert_int_equal(fg_config_set(&c, u->name, "0", err,
						       sizeof(err)), -1);
			assert_int_equal(uint_at(&c, u), u->def);
		}
		assert_int_equal(fg_config_set(&c, u->name, above, err, sizeof(err)),
				 -1);
		assert_non_null(strstr(err, range));
		assert_int_equal(uint_at(&c, u), u->def);
		fg_config_finish(&c);
	}
}

/* Decimal digits only: no sign, exponent, fraction, spaces, hex, suffix. */
static void test_uint_malformed(void **state)
{
	static const char *const bad[] = {
		"", "-1", "-0", "+1", " 5", "5 ", "\t5", "5\n", "1e3", "1E3",
		"1.0", "1.5", "0x10", "12abc", "abc", "1_000", "1,000",
		"99999999999", "4294967295", "4294967296", "18446744073709551616",
		"184467440737095516161", "00000000001",
	};

	(void)state;
	for (size_t i = 0; i < NUINTS; i++) {
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			struct fg_config c;
			char err[ERR_MAX] = "";

			fg_config_init(&c);
			if (fg_config_set(&c, uints[i].name, bad[j], err,
					  sizeof(err)) != -1)
				fail_msg("%s accepted \"%s\"", uints[i].name, bad[j]);
			assert_int_equal(uint_at(&c, &uints[i]), uints[i].def);
			assert_non_null(strstr(err, "is not a whole number"));
			fg_config_finish(&c);
		}
	}
	LOAD_ERR("threads: '1e3' is not a whole number in 0..256",
		 "--threads", "1e3");
	LOAD_ERR("'12abc'", "--max-waiters=12abc");
	LOAD_ERR("'99999999999'", "--idle_forget_ms", "99999999999");
	LOAD_ERR("'-1'", "--lock-delay-ms=-1");
}

static void test_uint_leading_zeros(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	/* Still decimal (not octal), and within the 10-digit bound. */
	LOAD_OK(&c, err, "--threads", "010", "--max-waiters", "0000000009");
	assert_int_equal(c.threads, 10);
	assert_int_equal(c.max_waiters, 9);
	fg_config_finish(&c);
}

/* ---- flags --------------------------------------------------------- */

static void test_unknown_flags(void **state)
{
	char longname[200];

	(void)state;
	LOAD_ERR("unknown setting 'nope'", "--nope", "1");
	LOAD_ERR("unknown setting 'nope'", "--nope=1");
	LOAD_ERR("unknown setting 'Threads'", "--Threads", "4");
	LOAD_ERR("unknown setting 'thread'", "--thread", "4");
	LOAD_ERR("unknown setting 'threadsx'", "--threadsx", "4");
	LOAD_ERR("unknown setting 'max--waiters'", "--max--waiters", "4");
	LOAD_ERR("unknown setting ''", "--=4");
	LOAD_ERR("unknown setting 'help'", "--help=yes");
	LOAD_ERR("unknown setting 'version'", "--version=1");
	LOAD_ERR("unexpected argument 'positional'", "positional");
	LOAD_ERR("unexpected argument '-t'", "-t", "4");
	LOAD_ERR("unexpected argument '--'", "--");
	LOAD_ERR("unexpected argument '-'", "-");
	/* A flag's value is consumed; what follows it must be a flag again. */
	LOAD_ERR("unexpected argument '5'", "--threads", "4", "5");
	/* Names longer than any setting, with and without '='. */
	memset(longname, 'x', sizeof(longname));
	memcpy(longname, "--", 2);
	longname[sizeof(longname) - 1] = '\0';
	LOAD_ERR("unknown flag", longname, "1");
	longname[150] = '=';
	LOAD_ERR("unknown flag", longname);

	/* fg_config_set directly, with and without a value. */
	{
		struct fg_config c;
		char err[ERR_MAX];

		fg_config_init(&c);
		assert_int_equal(fg_config_set(&c, "nope", "1", err, sizeof(err)), -1);
		assert_non_null(strstr(err, "unknown setting 'nope'"));
		assert_int_equal(fg_config_set(&c, "nope", NULL, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "unknown setting 'nope'"));
		assert_int_equal(fg_config_set(&c, "", "1", err, sizeof(err)), -1);
		assert_int_equal(fg_config_set(&c, "config", "x", err, sizeof(err)), -1);
		check_defaults(&c);
		fg_config_finish(&c);
	}
}

static void test_missing_value(void **state)
{
	(void)state;
	LOAD_ERR("--threads needs a value", "--threads");
	LOAD_ERR("--upstream needs a value", "--upstream");
	LOAD_ERR("--forward-token needs a value", "--forward-token");
	LOAD_ERR("--listen needs a value", "--threads", "3", "--listen");
	LOAD_ERR("--log_level needs a value", "--log_level");
	/* "--name=" is an empty value, refused by the setting's own check. */
	LOAD_ERR("threads: '' is not a whole number", "--threads=");
	LOAD_ERR("upstream: ''", "--upstream=");
	LOAD_ERR("log-level: ''", "--log-level=");
	LOAD_ERR("forward-token: ''", "--forward-token=");
	/* A flag right after a flag is taken as its value, and judged so. */
	LOAD_ERR("threads: '--max-waiters'", "--threads", "--max-waiters", "3");

	{
		struct fg_config c;
		char err[ERR_MAX];

		fg_config_init(&c);
		assert_int_equal(fg_config_set(&c, "threads", NULL, err, sizeof(err)),
				 -1);
		assert_non_null(strstr(err, "needs a value"));
		assert_int_equal(c.threads, 0);
		fg_config_finish(&c);
	}
}

static void test_route_flag_refused(void **state)
{
	(void)state;
	LOAD_ERR("route is a config file setting", "--route", "/a/ lock");
	LOAD_ERR("route is a config file setting", "--route=/a/ lock");
}

/* ---- addresses ----------------------------------------------------- */

static void test_parse_hostport(void **state)
{
	static const struct {
		const char *in;
		const char *host;
		int port;
	} ok[] = {
		{ "127.0.0.1:8080", "127.0.0.1", 8080 },
		{ "[::1]:9", "::1", 9 },
		{ "localhost:1", "localhost", 1 },
		{ "h:65535", "h", 65535 },
		{ "h:080", "h", 80 },
		{ "redis.internal.example:6379", "redis.internal.example", 6379 },
		{ "[fe80::1%eth0]:6379", "fe80::1%eth0", 6379 },
		{ "999.0.0.1:80", "999.0.0.1", 80 }, /* well-formed, no such host */
	};
	static const char *const bad[] = {
		"", "nohostport", ":80", "host:", "host:0", "host:65536",
		"host:99999", "host:100000", "host:000080", "host:-1", "host:+80",
		"host: 80", "host:80 ", "host:8o", "host:0x50", "[::1", "[::1]",
		"[::1]80", "[::1]:", "[]:80", "[::1]:0", "::1:80", "a:b:80",
		"ho st:80", " host:80", "ho\tst:80", "user@host:80", "a/b:80",
		"h\x7f:80", "caf\xc3\xa9:80", "h:80:",
		/* found by fuzz_config: a bracket is never part of a host */
		"[[vv5]:5", "h]:6379", "[h[]:1", "[a]b]:1",
	};
	char host[FG_HOST_MAX];
	int port;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		port = -1;
		if (fg_parse_hostport(ok[i].in, host, sizeof(host), &port) != 0)
			fail_msg("should parse: \"%s\"", ok[i].in);
		assert_string_equal(host, ok[i].host);
		assert_int_equal(port, ok[i].port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(host, "untouched");
		port = 4242;
		if (fg_parse_hostport(bad[i], host, sizeof(host), &port) == 0)
			fail_msg("should be refused: \"%s\"", bad[i]);
		/* A refusal leaves both outputs alone. */
		assert_string_equal(host, "untouched");
		assert_int_equal(port, 4242);
	}
}

static void test_parse_hostport_capacity(void **state)
{
	char in[FG_HOST_MAX + 16], host[FG_HOST_MAX];
	int port = 0;

	(void)state;
	/* FG_HOST_MAX - 1 bytes of host fit, FG_HOST_MAX do not. */
	memset(in, 'h', FG_HOST_MAX - 1);
	strcpy(in + FG_HOST_MAX - 1, ":80");
	assert_int_equal(fg_parse_hostport(in, host, sizeof(host), &port), 0);
	assert_int_equal(strlen(host), FG_HOST_MAX - 1);
	assert_int_equal(port, 80);

	memset(in, 'h', FG_HOST_MAX);
	strcpy(in + FG_HOST_MAX, ":80");
	assert_int_equal(fg_parse_hostport(in, host, sizeof(host), &port), -1);

	/* A small buffer: the bound is the caller's cap. */
	assert_int_equal(fg_parse_hostport("abcd:1", host, 5, &port), 0);
	assert_string_equal(host, "abcd");
	assert_int_equal(fg_parse_hostport("abcde:1", host, 5, &port), -1);
	assert_int_equal(fg_parse_hostport("[::1]:1", host, 4, &port), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(fg_parse_hostport("[::12]:1", host, 4, &port), -1);
}

static void test_listen(void **state)
{
	static const char *const bad[] = {
		"999.0.0.1:80", "nohostport", "[::1", ":80", "host:0",
		"host:65536", "127.0.0.1", "127.0.0.1:", "[::1]", "",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	LOAD_OK(&c, err, "--listen", "127.0.0.1:8080");
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 8080);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--listen=[::1]:9");
	assert_string_equal(c.listen_host, "::1");
	assert_int_equal(c.listen_port, 9);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--listen", "localhost:1");
	assert_string_equal(c.listen_host, "localhost");
	assert_int_equal(c.listen_port, 1);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--listen", "0.0.0.0:65535", "--allow-open", "yes");
	assert_string_equal(c.listen_host, "0.0.0.0");
	assert_int_equal(c.listen_port, 65535);
	fg_config_finish(&c);

	/* open mode off loopback only on purpose (Redis' protected mode) */
	LOAD_ERR("'allow-open yes'", "--listen", "0.0.0.0:8080");
	LOAD_ERR("without auth-file", "--listen", "10.0.0.41:8080");
	LOAD_ERR("'allow-open yes'", "--listen", "[::]:8080");
	LOAD_OK(&c, err, "--listen", "127.8.9.10:1");
	fg_config_finish(&c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "listen", bad[i], err, sizeof(err)) != -1)
			fail_msg("--listen accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "listen: '"));
		assert_non_null(strstr(err, "is not HOST:PORT"));
		fg_config_finish(&c);
	}
	LOAD_ERR("listen: 'nohostport' is not HOST:PORT", "--listen", "nohostport");
	LOAD_ERR("listen: 'host:65536'", "--listen=host:65536");
}

static void test_redis(void **state)
{
	static const char *const bad[] = {
		"nohostport", "[::1", ":6379", "h:0", "h:65536", "h:99999999999",
		"redis", "h:port", "", "[::1]", "a:b:6379",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	/* Not resolved now: Redis may come up later. */
	LOAD_OK(&c, err, "--redis", "redis.invalid:6380");
	assert_string_equal(c.redis_host, "redis.invalid");
	assert_int_equal(c.redis_port, 6380);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--redis=[::1]:7000");
	assert_string_equal(c.redis_host, "::1");
	assert_int_equal(c.redis_port, 7000);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--redis", "10.1.2.3:1");
	assert_string_equal(c.redis_host, "10.1.2.3");
	assert_int_equal(c.redis_port, 1);
	fg_config_finish(&c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "redis", bad[i], err, sizeof(err)) != -1)
			fail_msg("--redis accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "redis: '"));
		assert_string_equal(c.redis_host, "127.0.0.1");
		assert_int_equal(c.redis_port, 6379);
		fg_config_finish(&c);
	}
	LOAD_ERR("redis: 'h:0' is not HOST:PORT", "--redis", "h:0");
}

static void test_upstream(void **state)
{
	static const char *const ok[] = {
		"http://h",
		"http://h/",
		"https://store.example/base/",
		"http://127.0.0.1:9000",
		"http://127.0.0.1:9000/dav/",
		"http://[::1]:8080/x",
		"http://[::1]/x",
		"https://user@h:1/p?q=1#frag",
		"http://user:pw@h:443/",
		"http://h:65535",
		"http://h?x",
		"http://h/p:99999", /* a colon in the path is no port */
	};
	static const char *const bad[] = {
		"", "h", "h:80", "ftp://h", "file:///etc", "http:/h", "http:h",
		"http://", "https://", "http:///path", "http://h:99999",
		"http://h:65536", "http://h:0", "http://h:", "http://h:/x",
		"http://h:8o", "http://h:-1", "http://h:123456", "http://[::1",
		"http://[::1]:0", "http://h x", " http://h", "http://h ",
		"http://h/a b", "http://h/\t", "http://h\n", "http://h/\x7f",
		"http://h/caf\xc3\xa9",
	};
	struct fg_config c;
	char err[ERR_MAX], *longurl;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "upstream", ok[i], err, sizeof(err)) != 0)
			fail_msg("--upstream refused \"%s\": %s", ok[i], err);
		assert_string_equal(c.upstream, ok[i]);
		fg_config_finish(&c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "upstream", bad[i], err, sizeof(err)) != -1)
			fail_msg("--upstream accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "is not an http:// or https:// URL"));
		assert_null(c.upstream);
		fg_config_finish(&c);
	}

	/* A second value replaces the first; a refused one keeps it. */
	LOAD_OK(&c, err, "--upstream", "http://a/", "--upstream=https://b/");
	assert_string_equal(c.upstream, "https://b/");
	assert_int_equal(fg_config_set(&c, "upstream", "ftp://c/", err,
				       sizeof(err)), -1);
	assert_string_equal(c.upstream, "https://b/");
	fg_config_finish(&c);

	/* 2048 bytes is the longest URL. */
	longurl = malloc(2050);
	assert_non_null(longurl);
	memcpy(longurl, "http://h/", 9);
	memset(longurl + 9, 'p', 2048 - 9);
	longurl[2048] = '\0';
	fg_config_init(&c);
	assert_int_equal(fg_config_set(&c, "upstream", longurl, err, sizeof(err)), 0);
	longurl[2048] = 'p';
	longurl[2049] = '\0';
	assert_int_equal(fg_config_set(&c, "upstream", longurl, err, sizeof(err)), -1);
	fg_config_finish(&c);
	free(longurl);

	LOAD_ERR("upstream: 'ftp://x' is not an http:// or https:// URL",
		 "--upstream", "ftp://x");
	LOAD_ERR("upstream: 'http://h:99999'", "--upstream=http://h:99999");
}

/* ---- enumerations and strings -------------------------------------- */

static void test_log_level(void **state)
{
	static const struct {
		const char *in;
		int level;
	} ok[] = {
		{ "error", FG_LOG_ERROR },
		{ "warn", FG_LOG_WARN },
		{ "info", FG_LOG_INFO },
		{ "debug", FG_LOG_DEBUG },
	};
	static const char *const bad[] = {
		"", "INFO", "Info", "warning", "err", "trace", "0", "2", "info ",
		" info", "debugx",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		LOAD_OK(&c, err, "--log-level", ok[i].in);
		assert_int_equal(c.log_level, ok[i].level);
		fg_config_finish(&c);
	}
	LOAD_OK(&c, err, "--log_level=debug");
	assert_int_equal(c.log_level, FG_LOG_DEBUG);
	fg_config_finish(&c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "log-level", bad[i], err, sizeof(err)) != -1)
			fail_msg("log-level accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "is not error, warn, info or debug"));
		assert_int_equal(c.log_level, FG_LOG_INFO);
		fg_config_finish(&c);
	}
}

static void test_forward_token(void **state)
{
	static const struct {
		const char *in;
		unsigned want;
	} ok[] = {
		{ "yes", 1 }, { "true", 1 }, { "1", 1 },
		{ "no", 0 }, { "false", 0 }, { "0", 0 },
	};
	static const char *const bad[] = {
		"", "YES", "Yes", "on", "off", "2", "y", "n", "bogus", "yes ",
		"01",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		fg_config_init(&c);
		c.forward_token = !ok[i].want;
		assert_int_equal(fg_config_set(&c, "forward-token", ok[i].in, err,
					       sizeof(err)), 0);
		assert_int_equal(c.forward_token, ok[i].want);
		fg_config_finish(&c);
	}
	LOAD_OK(&c, err, "--forward_token=yes");
	assert_int_equal(c.forward_token, 1);
	fg_config_finish(&c);
	LOAD_OK(&c, err, "--forward-token", "yes", "--forward-token", "no");
	assert_int_equal(c.forward_token, 0);
	fg_config_finish(&c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "forward-token", bad[i], err, sizeof(err)) != -1)
			fail_msg("forward-token accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "is not yes or no"));
		assert_int_equal(c.forward_token, 0);
		fg_config_finish(&c);
	}
	LOAD_ERR("forward-token: 'bogus' is not yes or no",
		 "--forward-token", "bogus");
}

static void test_readyz_requires(void **state)
{
	static const struct {
		const char *in;
		unsigned want;
	} ok[] = {
		{ "redis", FG_READYZ_REDIS },
		{ "upstream", FG_READYZ_UPSTREAM },
		{ "redis,upstream", FG_READYZ_REDIS | FG_READYZ_UPSTREAM },
		{ "upstream,redis", FG_READYZ_REDIS | FG_READYZ_UPSTREAM },
		{ "redis,redis", FG_READYZ_REDIS },
		{ "none", 0 },
		{ "", 0 },
	};
	static const char *const bad[] = {
		"Redis", "redis,", ",redis", "redis upstream", "redis,,upstream",
		"sentinel", "redis,none", "all",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		fg_config_init(&c);
		c.readyz_requires = 99;
		if (fg_config_set(&c, "readyz-requires", ok[i].in, err,
				  sizeof(err)) != 0)
			fail_msg("readyz-requires refused \"%s\": %s", ok[i].in, err);
		assert_int_equal(c.readyz_requires, ok[i].want);
		fg_config_finish(&c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		c.readyz_requires = FG_READYZ_UPSTREAM;
		if (fg_config_set(&c, "readyz-requires", bad[i], err,
				  sizeof(err)) != -1)
			fail_msg("readyz-requires accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "readyz-requires: '"));
		/* a bad value changes nothing */
		assert_int_equal(c.readyz_requires, FG_READYZ_UPSTREAM);
		fg_config_finish(&c);
	}
	LOAD_OK(&c, err, "--readyz-requires", "redis");
	assert_int_equal(c.readyz_requires, FG_READYZ_REDIS);
	fg_config_finish(&c);
	LOAD_OK(&c, err, "--readyz-requires=redis", "--readyz-requires=none");
	assert_int_equal(c.readyz_requires, 0);
	fg_config_finish(&c);
	LOAD_ERR("readyz-requires: 'bogus' is not a comma list of redis and "
		 "upstream, or none", "--readyz-requires", "bogus");
}

static void test_write_methods(void **state)
{
	static const char *const ok[] = {
		"PUT",
		"PUT DELETE",
		FG_DEFAULT_WRITE_METHODS,
		"  PUT   POST ",
		"VERSION-CONTROL BASELINE_CONTROL",
	};
	static const char *const bad[] = {
		"put", "Put", "PUT,DELETE", "PUT;DELETE", "PUT\tDELETE",
		"PUT\nDELETE", "PUT1", "PUT/DELETE", "*",
	};
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "write-methods", ok[i], err, sizeof(err)) != 0)
			fail_msg("write-methods refused \"%s\": %s", ok[i], err);
		assert_string_equal(c.write_methods, ok[i]);
		fg_config_finish(&c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fg_config_init(&c);
		if (fg_config_set(&c, "write-methods", bad[i], err, sizeof(err)) != -1)
			fail_msg("write-methods accepted \"%s\"", bad[i]);
		assert_non_null(strstr(err, "is not a list of methods"));
		assert_null(c.write_methods);
		fg_config_finish(&c);
	}

	/* Replaced by a second value, kept after a refused one. */
	LOAD_OK(&c, err, "--write-methods", "PUT", "--write_methods=DELETE MOVE");
	assert_string_equal(c.write_methods, "DELETE MOVE");
	assert_int_equal(fg_config_set(&c, "write-methods", "get", err,
				       sizeof(err)), -1);
	assert_string_equal(c.write_methods, "DELETE MOVE");
	fg_config_finish(&c);
}

static void test_key_file(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	LOAD_OK(&c, err, "--key-file", "secrets/fg.key");
	assert_string_equal(c.key_file, "secrets/fg.key");
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--key_file=a", "--key-file", "b");
	assert_string_equal(c.key_file, "b");
	fg_config_finish(&c);
}

/* The v1.2 settings that only make sense together, and the Redis
 * password read from its file (one trailing newline is not part of it). */
static void test_who_may(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	LOAD_ERR("tls-cert and tls-key go together", "--tls-cert", "a.crt");
	LOAD_ERR("tls-cert and tls-key go together", "--tls-key", "a.key");
	LOAD_ERR("tls-client-ca needs tls-cert", "--tls-client-ca", "ca.crt");
	LOAD_ERR("upstream-cert and upstream-key go together", "--upstream-cert", "c");
	LOAD_ERR("redis-user needs redis-password-file", "--redis-user", "fg");
	LOAD_ERR("proxy-auth required needs auth-file", "--proxy-auth", "required");
	LOAD_ERR("proxy-auth: 'yes' is not off or required", "--proxy-auth", "yes");
	LOAD_ERR("redis-password-file: cannot read", "--redis-password-file",
		 "/nonexistent/pw");

	LOAD_OK(&c, err, "--proxy-auth", "required", "--auth-file", "auth");
	assert_int_equal(c.proxy_auth, 1);
	assert_string_equal(c.auth_file, "auth");
	fg_config_finish(&c);

	char *pw = write_file("s3cret pass\n");
	LOAD_OK(&c, err, "--redis-user", "fg", "--redis-password-file", pw);
	assert_string_equal(c.redis_user, "fg");
	assert_string_equal(c.redis_password, "s3cret pass");
	fg_config_finish(&c);
	assert_null(c.redis_password);
	unlink(pw);
	free(pw);

	pw = write_file("crlf\r\n");
	LOAD_OK(&c, err, "--redis-password-file", pw);
	assert_string_equal(c.redis_password, "crlf");
	assert_null(c.redis_user);
	fg_config_finish(&c);
	unlink(pw);
	free(pw);

	pw = write_file("\n");
	LOAD_ERR("is empty", "--redis-password-file", pw);
	unlink(pw);
	free(pw);
}

/* ---- the config file ----------------------------------------------- */

static void test_file_settings(void **state)
{
	static const char text[] =
		"# fencegate test configuration\n"
		"\n"
		"   \t  \n"
		"   # an indented comment\n"
		"threads 3\n"
		"  max_waiters\t 77   # trailing comment\n"
		"max-connections\t\t100\n"
		"log-level debug\r\n"
		"upstream   http://127.0.0.1:9/base/\n"
		"forward-token yes\n"
		"write-methods PUT  DELETE\n"
		"redis 10.0.0.1:6380\n"
		"listen 127.0.0.1:9999\n"
		"key-file keys/fg key\n"
		"route /orders/ orders\n"
		"route\t/a/b/\tab-lock   \n"
		"fence_margin_ms 0"; /* no final newline */
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	if (read_text(&c, text, err, NULL) != 0)
		fail_msg("read failed: %s", err);
	assert_int_equal(c.threads, 3);
	assert_int_equal(c.max_waiters, 77);
	assert_int_equal(c.max_connections, 100);
	assert_int_equal(c.log_level, FG_LOG_DEBUG);
	assert_string_equal(c.upstream, "http://127.0.0.1:9/base/");
	assert_int_equal(c.forward_token, 1);
	assert_string_equal(c.write_methods, "PUT  DELETE");
	assert_string_equal(c.redis_host, "10.0.0.1");
	assert_int_equal(c.redis_port, 6380);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 9999);
	assert_string_equal(c.key_file, "keys/fg key");
	assert_int_equal(c.fence_margin_ms, 0);
	assert_int_equal(c.nroutes, 2);
	assert_string_equal(c.routes[0].prefix, "/orders/");
	assert_string_equal(c.routes[0].lock, "orders");
	assert_string_equal(c.routes[1].prefix, "/a/b/");
	assert_string_equal(c.routes[1].lock, "ab-lock");
	/* Untouched settings keep their defaults. */
	assert_int_equal(c.idle_forget_ms, 600000);
	assert_int_equal(c.client_timeout_s, 30);
	fg_config_finish(&c);
}

static void test_file_empty(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	assert_int_equal(read_text(&c, "", err, NULL), 0);
	check_defaults(&c);
	fg_config_finish(&c);

	assert_int_equal(read_text(&c, "# only\n\n#comments\n", err, NULL), 0);
	check_defaults(&c);
	fg_config_finish(&c);
}

/* A file error names the file and the line. */
static void expect_file_error(const char *text, const char *line_tag,
			      const char *want)
{
	struct fg_config c;
	char err[ERR_MAX], *path, *prefix;

	if (read_text(&c, text, err, &path) != -1)
		fail_msg("accepted: \"%s\"", text);
	assert_true(asprintf(&prefix, "%s:%s: ", path, line_tag) > 0);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("message \"%s\" does not start with \"%s\"", err, prefix);
	if (!strstr(err, want))
		fail_msg("message \"%s\" lacks \"%s\"", err, want);
	free(prefix);
	remove_file(path);
	fg_config_finish(&c);
}

static void test_file_errors(void **state)
{
	(void)state;
	expect_file_error("threads 2\n\nbogus 1\n", "3",
			  "unknown setting 'bogus'");
	expect_file_error("# x\n  frobnicate\n", "2",
			  "unknown setting 'frobnicate'");
	expect_file_error("threads\n", "1", "threads needs a value");
	expect_file_error("threads   # no value\n", "1", "needs a value");
	expect_file_error("\n\nthreads 257\n", "3",
			  "threads: '257' is not a whole number in 0..256");
	expect_file_error("threads 3 4\n", "1", "'3 4'");
	expect_file_error("log-level loud\n", "1", "log-level: 'loud'");
	expect_file_error("listen nohostport\n", "1", "listen: 'nohostport'");
	expect_file_error("upstream ftp://x\n", "1", "upstream: 'ftp://x'");
	expect_file_error("config other.conf\n", "1", "'config' cannot be nested");
	expect_file_error("threads 2\nconfig\n", "2", "'config' cannot be nested");
	/* Routes: a prefix starting with '/', then a lock. */
	expect_file_error("route /orders/\n", "1",
			  "route: expected `route /PREFIX LOCK`, got '/orders/'");
	expect_file_error("route orders/ lock\n", "1",
			  "route: expected `route /PREFIX LOCK`");
	expect_file_error("\nroute\n", "2", "needs a value");
}

/* Reading stops at the first bad line: later lines are not applied. */
/* A bad line does not stop the reading: every bad line is named, one
 * reason a line, and the good ones after it are taken. */
static void test_file_names_every_bad_line(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];
	char *path;

	(void)state;
	assert_int_equal(read_text(&c, "bogus 1\nthreads 3\nmax-waiters x\n",
				   err, &path), -1);
	assert_int_equal(c.threads, 3);
	char want[512];
	snprintf(want, sizeof(want), "%s:1: unknown setting 'bogus' (see --help)\n"
		 "%s:3: max-waiters: 'x' is not a whole number in 1..1000000",
		 path, path);
	assert_string_equal(err, want);
	fg_config_finish(&c);
	remove_file(path);
}

/* fg_config_load goes on past a bad file line, a bad flag and an unknown
 * flag (which takes no flag as its value), and names each. */
static void test_load_names_every_reason(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];
	char *path = write_file("threads nope\n");
	char flag[600];

	(void)state;
	snprintf(flag, sizeof(flag), "--config=%s", path);
	fg_config_init(&c);
	err[0] = '\0';
	char *argv[] = { "fencegate", flag, "--bogus", "--max-waiters", "7",
			 "--lock-delay-ms", "soon", "stray", "--check-config",
			 NULL };
	assert_int_equal(fg_config_load(&c, 9, argv, err, sizeof(err)),
			 FG_CONFIG_ERROR);
	assert_int_equal(c.check_only, 1);
	assert_int_equal(c.max_waiters, 7);
	assert_non_null(strstr(err, ":1: threads: 'nope'"));
	assert_non_null(strstr(err, "\nunknown setting 'bogus'"));
	assert_non_null(strstr(err, "\nlock-delay-ms: 'soon'"));
	assert_non_null(strstr(err, "\nunexpected argument 'stray'"));
	assert_null(strstr(err, "check-config"));
	fg_config_finish(&c);
	remove_file(path);
}

/* A reason never quotes the user information of a URL (a password). */
static void test_reasons_hide_url_passwords(void **state)
{
	(void)state;
	LOAD_ERR("upstream: 'http://***@:99' is not", "--upstream",
		 "http://user:s3cret@:99");
	LOAD_ERR("redis: 'redis://***@h:1' is not an address", "--redis",
		 "redis://user:s3cret@h:1");
	LOAD_ERR("redis: '***@h:1' is not", "--redis", "user:s3cret@h:1");
	struct fg_config c;
	char err[ERR_MAX];
	fg_config_init(&c);
	assert_int_equal(fg_config_set(&c, "upstream", "ftp://u:s3cret@h/", err,
				       sizeof(err)), -1);
	assert_null(strstr(err, "s3cret"));
	assert_int_equal(fg_config_set(&c, "redis", "redis-cluster://u:s3cret@h:1,h:2",
				       err, sizeof(err)), -1);
	assert_null(strstr(err, "s3cret"));
	fg_config_finish(&c);
}

static void test_file_long_line(void **state)
{
	struct fg_config c;
	char err[ERR_MAX], *text;
	const size_t n = 5000;

	(void)state;
	/* A comment longer than the line buffer is still refused: the
	 * reader cannot see where the comment's line ends. */
	text = malloc(n + 16);
	assert_non_null(text);
	text[0] = '#';
	memset(text + 1, 'x', n);
	strcpy(text + 1 + n, "\nthreads 3\n");
	assert_int_equal(read_text(&c, text, err, NULL), -1);
	assert_non_null(strstr(err, ":1: line too long"));
	fg_config_finish(&c);
	free(text);
}

static void test_file_unreadable(void **state)
{
	struct fg_config c;
	char err[ERR_MAX], *dir, *missing;

	(void)state;
	assert_true(asprintf(&dir, "%s/fg-test-dir-XXXXXX", tmpdir()) > 0);
	assert_non_null(mkdtemp(dir));
	assert_true(asprintf(&missing, "%s/missing.conf", dir) > 0);

	fg_config_init(&c);
	assert_int_equal(fg_config_read_file(&c, missing, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read config file"));
	assert_non_null(strstr(err, missing));
	check_defaults(&c);

	/* A directory opens but does not read. */
	assert_int_equal(fg_config_read_file(&c, dir, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read config file"));
	check_defaults(&c);
	fg_config_finish(&c);

	LOAD_ERR("cannot read config file", "--config", missing);
	LOAD_ERR("cannot read config file", "--config", dir);

	free(missing);
	assert_int_equal(rmdir(dir), 0);
	free(dir);
}

/* ---- --config and the flags ---------------------------------------- */

static void test_flags_override_file(void **state)
{
	char *path = write_file("threads 3\n"
				"max-waiters 5\n"
				"log-level error\n"
				"upstream http://file/\n"
				"route /r/ r-lock\n");
	char *eq;
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	assert_true(asprintf(&eq, "--config=%s", path) > 0);

	/* The file alone. */
	LOAD_OK(&c, err, "--config", path);
	assert_int_equal(c.threads, 3);
	assert_int_equal(c.max_waiters, 5);
	assert_int_equal(c.log_level, FG_LOG_ERROR);
	assert_string_equal(c.upstream, "http://file/");
	assert_int_equal(c.nroutes, 1);
	fg_config_finish(&c);

	/* Flags before, after and around --config all win over the file. */
	LOAD_OK(&c, err, "--threads", "9", "--config", path);
	assert_int_equal(c.threads, 9);
	assert_int_equal(c.max_waiters, 5);
	assert_int_equal(c.log_level, FG_LOG_ERROR);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--config", path, "--threads", "9");
	assert_int_equal(c.threads, 9);
	assert_int_equal(c.max_waiters, 5);
	fg_config_finish(&c);

	LOAD_OK(&c, err, eq, "--threads=9", "--upstream", "https://flag/");
	assert_int_equal(c.threads, 9);
	assert_string_equal(c.upstream, "https://flag/");
	assert_int_equal(c.nroutes, 1);
	assert_string_equal(c.routes[0].prefix, "/r/");
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--threads=9", eq, "--log-level", "debug");
	assert_int_equal(c.threads, 9);
	assert_int_equal(c.max_waiters, 5);
	assert_int_equal(c.log_level, FG_LOG_DEBUG);
	fg_config_finish(&c);

	LOAD_OK(&c, err, "--log-level", "warn", "--config", path,
		"--max_waiters", "6");
	assert_int_equal(c.threads, 3);
	assert_int_equal(c.max_waiters, 6);
	assert_int_equal(c.log_level, FG_LOG_WARN);
	fg_config_finish(&c);

	/* A bad flag is an error even when the file is fine. */
	LOAD_ERR("threads: '257'", "--config", path, "--threads", "257");

	free(eq);
	remove_file(path);
}

static void test_config_flag_errors(void **state)
{
	char *path = write_file("threads 2\nnope 1\n");

	(void)state;
	LOAD_ERR("--config needs a file name", "--config");
	LOAD_ERR("--config needs a file name", "--threads", "4", "--config");
	LOAD_ERR("cannot read config file ''", "--config=");
	/* An error in the file is the load's error, whatever the flags. */
	LOAD_ERR(":2: unknown setting 'nope'", "--config", path);
	LOAD_ERR(":2: unknown setting 'nope'", "--threads", "4", "--config", path);
	remove_file(path);

	path = write_file("config other.conf\n");
	LOAD_ERR(":1: 'config' cannot be nested", "--config", path);
	remove_file(path);
}

static void test_help_version(void **state)
{
	struct fg_config c;
	char err[ERR_MAX];

	(void)state;
	assert_true(strstr(fg_config_usage, "usage: fencegate") == fg_config_usage);

	fg_config_init(&c);
	assert_int_equal(load(&c, err, "--help", NULL), FG_CONFIG_EXIT);
	fg_config_finish(&c);
	fg_config_init(&c);
	assert_int_equal(load(&c, err, "-h", NULL), FG_CONFIG_EXIT);
	fg_config_finish(&c);
	fg_config_init(&c);
	assert_int_equal(load(&c, err, "--version", NULL), FG_CONFIG_EXIT);
	fg_config_finish(&c);

	/* They are looked for before anything is applied. */
	fg_config_init(&c);
	assert_int_equal(load(&c, err, "--threads", "9", "--help", NULL),
			 FG_CONFIG_EXIT);
	assert_int_equal(c.threads, 0);
	fg_config_finish(&c);
	fg_config_init(&c);
	assert_int_equal(load(&c, err, "--threads", "0", "--version", NULL),
			 FG_CONFIG_EXIT);
	fg_config_finish(&c);
	fg_config_init(&c);
	assert_int_equal(load(&c, err, "--config", "no/such/file", "--help",
			      NULL),
			 FG_CONFIG_EXIT);
	fg_config_finish(&c);
}

/* fg_config_changed names each setting whose value differs, as a flag
 * spells it, and nothing when the same settings are read twice. */
static void test_changed_settings_are_named(void **state)
{
	(void)state;
	struct fg_config a, b;
	char err[ERR_MAX], out[256];

	LOAD_OK(&a, err, "--listen", "127.0.0.1:9000", "--max-waiters", "10",
		"--redis", "127.0.0.1:7000", "--auth-file", "/x/auth");
	LOAD_OK(&b, err, "--listen", "127.0.0.1:9000", "--max-waiters", "10",
		"--redis", "127.0.0.1:7000", "--auth-file", "/x/auth");
	assert_int_equal(fg_config_changed(&a, &b, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	fg_config_finish(&b);

	LOAD_OK(&b, err, "--listen", "127.0.0.1:9001", "--max-waiters", "11",
		"--redis", "127.0.0.1:7000", "--log-level", "debug",
		"--forward-token", "yes");
	assert_int_equal(fg_config_changed(&a, &b, out, sizeof(out)), 5);
	assert_string_equal(out, "listen, max-waiters, log-level, forward-token, "
			    "auth-file");
	/* cut at the buffer, still a string */
	assert_int_equal(fg_config_changed(&a, &b, out, 10), 5);
	assert_true(strlen(out) < 10);
	fg_config_finish(&a);
	fg_config_finish(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_finish),
		cmocka_unit_test(test_uint_flag_forms),
		cmocka_unit_test(test_uint_out_of_range),
		cmocka_unit_test(test_uint_malformed),
		cmocka_unit_test(test_uint_leading_zeros),
		cmocka_unit_test(test_unknown_flags),
		cmocka_unit_test(test_missing_value),
		cmocka_unit_test(test_route_flag_refused),
		cmocka_unit_test(test_parse_hostport),
		cmocka_unit_test(test_parse_hostport_capacity),
		cmocka_unit_test(test_listen),
		cmocka_unit_test(test_redis),
		cmocka_unit_test(test_upstream),
		cmocka_unit_test(test_log_level),
		cmocka_unit_test(test_forward_token),
		cmocka_unit_test(test_readyz_requires),
		cmocka_unit_test(test_write_methods),
		cmocka_unit_test(test_key_file),
		cmocka_unit_test(test_who_may),
		cmocka_unit_test(test_file_settings),
		cmocka_unit_test(test_file_empty),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_file_names_every_bad_line),
		cmocka_unit_test(test_load_names_every_reason),
		cmocka_unit_test(test_reasons_hide_url_passwords),
		cmocka_unit_test(test_file_long_line),
		cmocka_unit_test(test_file_unreadable),
		cmocka_unit_test(test_flags_override_file),
		cmocka_unit_test(test_config_flag_errors),
		cmocka_unit_test(test_help_version),
		cmocka_unit_test(test_changed_settings_are_named),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
