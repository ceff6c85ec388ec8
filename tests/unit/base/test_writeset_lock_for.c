/*
 * tests/unit/base/test_writeset_lock_for.c - which lock guards a path,
 * and which methods are writes (gateway/base/writeset.c).
 *
 * Pins writeset.h: fg_fence_lock_for percent-decodes the raw path, picks the
 * longest matching route prefix (a prefix "/a/b/" also covers "/a/b"),
 * else takes the decoded path without its leading and trailing '/'; the
 * result must be a valid lock name (fencegate/name.h) or it is -1. Only
 * raw_path[0..len) is read. fg_method_is_write matches whole, case-exact
 * method names against the configured list or the default one. Routes are
 * added through fg_config_set, as the config file does. cmocka's asserts
 * do not depend on NDEBUG.
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

#include "base/config.h"
#include "routes.h"
#include "base/writeset.h"

/* ---- helpers ------------------------------------------------------- */


struct path_case {
	const char *path;
	const char *lock; /* NULL: -1 */
};

/* Runs every case through fg_fence_lock_for; `what` names the table. */
static void check_paths(const struct fg_config *c, const struct path_case *t,
			size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		char out[FG_NAME_MAX + 1];
		int rc;

		strcpy(out, "untouched");
		rc = fg_fence_lock_for(c, t[i].path, strlen(t[i].path), out);
		if (t[i].lock) {
			if (rc != 0)
				fail_msg("%s: \"%s\" refused, expected \"%s\"", what,
					 t[i].path, t[i].lock);
			if (strcmp(out, t[i].lock) != 0)
				fail_msg("%s: \"%s\" -> \"%s\", expected \"%s\"", what,
					 t[i].path, out, t[i].lock);
		} else if (rc != -1) {
			fail_msg("%s: \"%s\" -> \"%s\", expected -1", what,
				 t[i].path, out);
		}
	}
}

#define CHECK_PATHS(c, t) check_paths(c, t, sizeof(t) / sizeof(t[0]), #t)

/* ---- no routes: the path is the lock ------------------------------- */

static void test_path_is_lock(void **state)
{
	static const struct path_case paths[] = {
		{ "/a", "a" },
		{ "a", "a" },
		{ "/a/", "a" },
		{ "//a//", "a" },
		{ "/a/b", "a/b" },
		{ "/a/b/", "a/b" },
		{ "/orders/2024/eu-west-1.json", "orders/2024/eu-west-1.json" },
		{ "/svc.db~primary_lock", "svc.db~primary_lock" },
		{ "/...", "..." },
		{ "/a/.hidden", "a/.hidden" },
	};
	/* refused, or resolved the way the storage resolves them */
	static const struct path_case invalid[] = {
		{ "", NULL },
		{ "/", NULL },
		{ "//", NULL },
		{ "///", NULL },
		{ "/a//b", "a/b" },    /* repeated slashes merge, as in the storage */
		{ "/a/./b", "a/b" },   /* dot segments resolve, as in the storage */
		{ "/a/../b", "b" },
		{ "/.", NULL },
		{ "/..", NULL },
		{ "/../a", NULL },
		{ "/a/..", NULL },
		{ "/a b", NULL },
		{ "/a?b=1", NULL },
		{ "/a#f", NULL },
		{ "/a+b", NULL },
		{ "/a:b", NULL },
		{ "/a@b", NULL },
		{ "/caf\xc3\xa9", NULL },
		{ "/a\\b", NULL },
	};
	struct fg_config c;

	(void)state;
	fg_config_init(&c);
	CHECK_PATHS(&c, paths);
	CHECK_PATHS(&c, invalid);
	fg_config_finish(&c);
}

static void test_percent_decoding(void **state)
{
	static const struct path_case paths[] = {
		{ "/%61", "a" },
		{ "/%61%62%63", "abc" },
		{ "/a%2Fb", "a/b" },
		{ "/a%2fb", "a/b" },
		{ "%2Fa%2F", "a" },
		{ "/%7Euser", "~user" },
		{ "/%7euser", "~user" },
		{ "/a%2D1", "a-1" },
		{ "/%2e%2e%2e", "..." },
	};
	static const struct path_case invalid[] = {
		{ "/a%", NULL },       /* truncated escapes */
		{ "/a%6", NULL },
		{ "/%", NULL },
		{ "%", NULL },
		{ "%4", NULL },
		{ "/a%zz", NULL },     /* not hex */
		{ "/a%g1", NULL },
		{ "/a%1g", NULL },
		{ "/a%+1", NULL },
		{ "/a% 1", NULL },
		{ "/a%00b", NULL },    /* NUL */
		{ "/a%00", NULL },
		{ "/a%20b", NULL },    /* decodes to a character names lack */
		{ "/a%3Fb", NULL },
		{ "/a%25", NULL },     /* "%": decoded once, then not a name char */
		{ "/a%252F", NULL },
		{ "/a/%2e%2e/b", "b" },  /* ".." hidden by escapes still resolves */
		{ "/a/%2E/b", "a/b" },
		{ "/%2e%2e", NULL },
		{ "/a%2F%2Fb", "a/b" },
		{ "/caf%C3%A9", NULL },
		{ "/a%FF", NULL },
	};
	struct fg_config c;

	(void)state;
	fg_config_init(&c);
	CHECK_PATHS(&c, paths);
	CHECK_PATHS(&c, invalid);
	fg_config_finish(&c);
}

static void test_path_lengths(void **state)
{
	struct fg_config c;
	char raw[3 * 300 + 8], out[FG_NAME_MAX + 1];
	size_t n;

	(void)state;
	fg_config_init(&c);

	/* FG_NAME_MAX bytes of name, with and without slashes around. */
	raw[0] = '/';
	memset(raw + 1, 'a', FG_NAME_MAX);
	raw[1 + FG_NAME_MAX] = '/';
	assert_int_equal(fg_fence_lock_for(&c, raw, FG_NAME_MAX + 2, out), 0);
	assert_int_equal(strlen(out), FG_NAME_MAX);
	assert_int_equal(fg_fence_lock_for(&c, raw, FG_NAME_MAX + 1, out), 0);
	assert_int_equal(strlen(out), FG_NAME_MAX);
	/* One more byte is too long. */
	raw[1 + FG_NAME_MAX] = 'a';
	assert_int_equal(fg_fence_lock_for(&c, raw, FG_NAME_MAX + 2, out), -1);

	/* The bound is on the decoded name: 255 escapes are 255 bytes. */
	n = 0;
	raw[n++] = '/';
	for (int i = 0; i < FG_NAME_MAX; i++) {
		memcpy(raw + n, "%62", 3);
		n += 3;
	}
	assert_int_equal(fg_fence_lock_for(&c, raw, n, out), 0);
	assert_int_equal(strlen(out), FG_NAME_MAX);
	assert_true(out[0] == 'b' && out[FG_NAME_MAX - 1] == 'b');
	memcpy(raw + n, "%62", 3);
	assert_int_equal(fg_fence_lock_for(&c, raw, n + 3, out), -1);
	fg_config_finish(&c);
}

/* A raw path far longer than any name (and than the decode buffer). */
static void test_path_huge(void **state)
{
	const size_t sizes[] = { 4094, 4095, 4096, 4097, 10000, 100000 };
	struct fg_config c;
	char out[FG_NAME_MAX + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *raw = malloc(sizes[i]);

		assert_non_null(raw);
		memset(raw, 'a', sizes[i]);
		raw[0] = '/';
		fg_config_init(&c);
		assert_int_equal(fg_fence_lock_for(&c, raw, sizes[i], out), -1);
		fg_config_finish(&c);

		/* Under a catch-all route: still refused, not truncated. */
		with_routes(&c, "/ all", NULL);
		assert_int_equal(fg_fence_lock_for(&c, raw, sizes[i], out),
				 sizes[i] < 4095 ? 0 : -1);
		fg_config_finish(&c);
		free(raw);
	}
}

/* Only raw_path[0..len) is read: a query string after it is not seen. */
static void test_reads_only_len(void **state)
{
	static const char target[] = "/orders/42?x=%zz&y=../..";
	struct fg_config c;
	char out[FG_NAME_MAX + 1], *heap;
	size_t plen = strcspn(target, "?");

	(void)state;
	fg_config_init(&c);
	assert_int_equal(fg_fence_lock_for(&c, target, plen, out), 0);
	assert_string_equal(out, "orders/42");
	assert_int_equal(fg_fence_lock_for(&c, "/a/bc", 4, out), 0);
	assert_string_equal(out, "a/b");
	assert_int_equal(fg_fence_lock_for(&c, "/a%2Fb", 3, out), -1); /* "/a%" */
	assert_int_equal(fg_fence_lock_for(&c, "/ab", 0, out), -1);

	/* An exact-size heap block without NUL: ASan reports any over-read. */
	heap = malloc(7);
	assert_non_null(heap);
	memcpy(heap, "/x/y%41", 7);
	assert_int_equal(fg_fence_lock_for(&c, heap, 7, out), 0);
	assert_string_equal(out, "x/yA");
	memcpy(heap, "/x/yy%4", 7);
	assert_int_equal(fg_fence_lock_for(&c, heap, 7, out), -1);
	free(heap);
	fg_config_finish(&c);
}

/* ---- routes -------------------------------------------------------- */

static void test_route_basic(void **state)
{
	static const struct path_case paths[] = {
		{ "/orders/", "orders-lock" },
		{ "/orders/42", "orders-lock" },
		{ "/orders/42/items/7.json", "orders-lock" },
		{ "/orders", "orders-lock" },       /* "/orders/" covers "/orders" */
		{ "/orders%2F42", "orders-lock" },  /* matched after decoding */
		{ "//orders/42", "orders-lock" },   /* no way around a route */
		{ "///orders/42", "orders-lock" },
		{ "/%2Forders/42", "orders-lock" },
		{ "/%6Frders/1", "orders-lock" },
		{ "/ordersX", "ordersX" },          /* not under "/orders/" */
		{ "/orders-archive/1", "orders-archive/1" },
		{ "/order", "order" },
		{ "/Orders/1", "Orders/1" },        /* case-exact */
		{ "orders/42", "orders-lock" },     /* resolved as if rooted */
		{ "/other/x", "other/x" },
	};
	struct fg_config c;

	(void)state;
	with_routes(&c, "/orders/ orders-lock", NULL);
	CHECK_PATHS(&c, paths);
	fg_config_finish(&c);
}

/* The longest matching prefix wins, in whatever order the routes came. */
static void test_route_longest_prefix(void **state)
{
	static const struct path_case paths[] = {
		{ "/a/x", "L1" },
		{ "/a", "L1" },
		{ "/a/", "L1" },
		{ "/a/bx", "L1" },     /* "/a/b/" does not cover "/a/bx" */
		{ "/a/b", "L2" },
		{ "/a/b/", "L2" },
		{ "/a/b/x", "L2" },
		{ "/a/b/c", "L3" },
		{ "/a/b/c/", "L3" },
		{ "/a/b/c/d/e", "L3" },
		{ "/a%2Fb%2Fc%2Fd", "L3" },
		{ "/b/c", "b/c" },
	};
	struct fg_config c;

	(void)state;
	with_routes(&c, "/a/ L1", "/a/b/ L2", "/a/b/c/ L3", NULL);
	CHECK_PATHS(&c, paths);
	fg_config_finish(&c);

	with_routes(&c, "/a/b/c/ L3", "/a/b/ L2", "/a/ L1", NULL);
	CHECK_PATHS(&c, paths);
	fg_config_finish(&c);

	with_routes(&c, "/a/b/ L2", "/a/b/c/ L3", "/a/ L1", NULL);
	CHECK_PATHS(&c, paths);
	fg_config_finish(&c);
}

/* "/" is a catch-all; a longer route still wins over it. */
static void test_route_catch_all(void **state)
{
	static const struct path_case paths[] = {
		{ "/", "everything" },
		{ "/x", "everything" },
		{ "/x/y/z", "everything" },
		{ "/a//b", "everything" },  /* the route decides, not the path */
		{ "/..", NULL },            /* above the root: refused, route or not */
		{ "/special/1", "special" },
		{ "/special", "special" },
		{ "", NULL },               /* nothing matches an empty path */
		{ "x", "everything" },       /* resolved as if rooted */
		{ "/a%zz", NULL },          /* a bad escape is refused first */
		{ "/a%00", NULL },
	};
	struct fg_config c;

	(void)state;
	with_routes(&c, "/ everything", "/special/ special", NULL);
	CHECK_PATHS(&c, paths);
	fg_config_finish(&c);
}

/* The route's lock must itself be a valid name. */
static void test_route_bad_lock(void **state)
{
	static const char *const bad[] = { "/bad/ a//b", "/dots/ ..", "/x/ a{b}",
					   "/x/ lock extra", "/x/", "x/ lock" };
	struct fg_config c;
	char err[256];

	(void)state;
	/* A route to no valid lock is refused when the config is read, not
	 * at every request under it. */
	fg_config_init(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fg_config_set(&c, "route", bad[i], err, sizeof(err)), -1);
	assert_int_equal(c.nroutes, 0);
	fg_config_finish(&c);
}

/* A route lock of exactly FG_NAME_MAX bytes fits; one more does not. */
static void test_route_lock_length(void **state)
{
	char route[FG_NAME_MAX + 16], out[FG_NAME_MAX + 1];
	struct fg_config c;

	(void)state;
	strcpy(route, "/p/ ");
	memset(route + 4, 'L', FG_NAME_MAX);
	route[4 + FG_NAME_MAX] = '\0';
	with_routes(&c, route, NULL);
	assert_int_equal(fg_fence_lock_for(&c, "/p/x", 4, out), 0);
	assert_int_equal(strlen(out), FG_NAME_MAX);
	fg_config_finish(&c);

	route[4 + FG_NAME_MAX] = 'L';
	route[5 + FG_NAME_MAX] = '\0';
	char err[256];
	fg_config_init(&c);
	assert_int_equal(fg_config_set(&c, "route", route, err, sizeof(err)), -1);
	fg_config_finish(&c);
	(void)out;
}

/* ---- fg_method_is_write --------------------------------------------- */

static void test_is_write_default(void **state)
{
	static const char *const writes[] = {
		"PUT", "POST", "PATCH", "DELETE", "MKCOL", "COPY", "MOVE",
		"PROPPATCH",
		/* neither a configured write nor a configured read: fenced */
		"LOCK", "UNLOCK", "TRACE", "CONNECT", "", "put", "Put", "PUTX",
		"PU", "PUT ", " PUT", "PROP", "PATCHPROPPATCH", "POST PUT", "get",
	};
	static const char *const reads[] = {
		"GET", "HEAD", "OPTIONS", "PROPFIND",
	};
	struct fg_config c;

	(void)state;
	fg_config_init(&c);
	assert_null(c.write_methods);
	assert_null(c.read_methods);
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		if (!fg_method_is_write(&c, writes[i]))
			fail_msg("\"%s\" should be fenced", writes[i]);
	}
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		if (fg_method_is_write(&c, reads[i]))
			fail_msg("\"%s\" should not be fenced", reads[i]);
	}
	fg_config_finish(&c);
}

static void test_is_write_configured(void **state)
{
	static const struct {
		const char *writes;
		const char *reads;
		const char *method;
		bool write;
	} t[] = {
		{ "PUT DELETE", "GET", "PUT", true },
		{ "PUT DELETE", "GET", "DELETE", true },
		{ "PUT DELETE", "GET", "GET", false },
		{ "PUT DELETE", "GET", "POST", true },    /* unlisted: fenced */
		{ "PUT DELETE", "GET POST", "POST", false },
		{ "PUT DELETE", "GET", "DELETEX", true },
		{ "  PUT   DELETE  ", "  GET  HEAD ", "HEAD", false },
		{ "  PUT   DELETE  ", "  GET  HEAD ", "DELETE", true },
		{ "GET", "GET", "GET", true },            /* a write wins */
		{ "VERSION-CONTROL X_Y", "GET", "X_Y", true },
		{ "PUT", "REPORT SEARCH", "REPORT", false },
		{ "PUT", "REPORT SEARCH", "SEARCHX", true },
		{ "PROPPATCH", "PATCH", "PATCH", false },
		{ "PATCH", "PROPFIND", "PROPPATCH", true },
	};
	struct fg_config c;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		fg_config_init(&c);
		assert_int_equal(fg_config_set(&c, "write-methods", t[i].writes, err,
					       sizeof(err)), 0);
		assert_int_equal(fg_config_set(&c, "read-methods", t[i].reads, err,
					       sizeof(err)), 0);
		if (fg_method_is_write(&c, t[i].method) != t[i].write)
			fail_msg("writes \"%s\", reads \"%s\", method \"%s\": expected %d",
				 t[i].writes, t[i].reads, t[i].method, t[i].write);
		fg_config_finish(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_is_lock),
		cmocka_unit_test(test_percent_decoding),
		cmocka_unit_test(test_path_lengths),
		cmocka_unit_test(test_path_huge),
		cmocka_unit_test(test_reads_only_len),
		cmocka_unit_test(test_route_basic),
		cmocka_unit_test(test_route_longest_prefix),
		cmocka_unit_test(test_route_catch_all),
		cmocka_unit_test(test_route_bad_lock),
		cmocka_unit_test(test_route_lock_length),
		cmocka_unit_test(test_is_write_default),
		cmocka_unit_test(test_is_write_configured),
	};

	return cmocka_run_group_tests_name("writeset_lock_for", tests, NULL, NULL);
}
