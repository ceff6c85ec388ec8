/*
 * test_writeset.c - unit tests of gateway/base/writeset.c: how paths resolve,
 * which Destination is accepted, and the write set (v1.1) of every method:
 * which locks a request must carry sequencers for, through which header,
 * and which requests are refused before any token is looked at.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/config.h"
#include "routes.h"
#include "base/writeset.h"


/* ---- fg_path_resolve ------------------------------------------------ */

static void test_resolve_like_the_storage(void **state)
{
	static const struct {
		const char *raw, *out; /* out NULL: refused */
		enum fg_path_status st;
	} t[] = {
		{ "/a/b.txt", "/a/b.txt", FG_PATH_OK },
		{ "//a///b/", "/a/b/", FG_PATH_OK },
		{ "/a/./b", "/a/b", FG_PATH_OK },
		{ "/a/x/../b", "/a/b", FG_PATH_OK },
		{ "/a/%2e%2E/b", "/b", FG_PATH_OK },
		{ "/a%2Fb", "/a/b", FG_PATH_OK },
		{ "/dir/.", "/dir/", FG_PATH_OK },
		{ "/", "/", FG_PATH_OK },
		{ "/..", NULL, FG_PATH_CLIMBS },
		{ "/../secret.txt", NULL, FG_PATH_CLIMBS },
		{ "/%2e%2e/secret.txt", NULL, FG_PATH_CLIMBS },
		{ "/a/../../secret.txt", NULL, FG_PATH_CLIMBS },
		{ "/a%00b", NULL, FG_PATH_BAD },
		{ "/a%0d%0aX: y", NULL, FG_PATH_BAD },
		{ "/a%7f", NULL, FG_PATH_BAD },
		{ "/a%2", NULL, FG_PATH_BAD },
		{ "", NULL, FG_PATH_BAD },
	};
	char out[FG_PATH_MAX];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		enum fg_path_status st = fg_path_resolve(t[i].raw, strlen(t[i].raw),
							 out, sizeof(out), &n);
		if (st != t[i].st)
			fail_msg("%s: status %d, want %d", t[i].raw, st, t[i].st);
		if (t[i].out && (strcmp(out, t[i].out) != 0 || n != strlen(t[i].out)))
			fail_msg("%s: resolved to %s, want %s", t[i].raw, out, t[i].out);
	}
}

/* ---- fg_dest_raw_path ----------------------------------------------- */

static void test_destination_forms(void **state)
{
	static const struct {
		const char *dest, *host, *path; /* path NULL: refused */
	} t[] = {
		{ "/b.txt", "gw:8080", "/b.txt" },
		{ "/b.txt", NULL, "/b.txt" },
		{ "http://gw:8080/b.txt", "gw:8080", "/b.txt" },
		{ "HTTP://GW:8080/b.txt", "gw:8080", "/b.txt" },
		{ "https://gw:8080/d/b.txt", "gw:8080", "/d/b.txt" },
		{ "http://other:8080/b.txt", "gw:8080", NULL },
		{ "http://gw:8080.evil/b.txt", "gw:8080", NULL },
		{ "http://gw:8080/b.txt", NULL, NULL },
		{ "http://gw:8080", "gw:8080", NULL },
		{ "//gw:8080/b.txt", "gw:8080", NULL },
		{ "ftp://gw:8080/b.txt", "gw:8080", NULL },
		{ "b.txt", "gw:8080", NULL },
		{ "/b.txt?x=1", "gw:8080", NULL },
		{ "/b.txt#f", "gw:8080", NULL },
		{ "/b c.txt", "gw:8080", NULL },
		{ "", "gw:8080", NULL },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const char *p = NULL;
		size_t n = 0;
		int rc = fg_dest_raw_path(t[i].dest, t[i].host, &p, &n);
		if (!t[i].path) {
			if (rc == 0)
				fail_msg("%s (host %s) was accepted", t[i].dest,
					 t[i].host ? t[i].host : "-");
			continue;
		}
		if (rc != 0 || n != strlen(t[i].path) || memcmp(p, t[i].path, n) != 0)
			fail_msg("%s: got rc %d '%.*s'", t[i].dest, rc, (int)n, p ? p : "");
	}
	assert_int_equal(fg_dest_raw_path(NULL, "gw", (const char **)&(const char *){ 0 },
					  &(size_t){ 0 }), -1);
}

/* ---- fg_writeset_build ---------------------------------------------- */

static struct fg_writeset ws;

static enum fg_error build(const struct fg_config *c, const char *method,
			   const char *target, const char *dest, bool token)
{
	return fg_writeset_build(c, method, target, dest, "gw:1", token, &ws);
}

static void member(int i, const char *lock, bool write, enum fg_ws_header h)
{
	assert_true(i < ws.n);
	assert_string_equal(ws.m[i].lock, lock);
	assert_int_equal(ws.m[i].write, write);
	assert_int_equal(ws.m[i].header, h);
}

static void test_reads(void **state)
{
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	assert_int_equal(build(&c, "GET", "/a/b.txt?x=1", NULL, false), FG_E_COUNT);
	assert_int_equal(ws.n, 0);
	assert_false(ws.write);
	/* a read that carries a token is a fenced read of its path */
	assert_int_equal(build(&c, "GET", "/a/b.txt", NULL, true), FG_E_COUNT);
	assert_int_equal(ws.n, 1);
	member(0, "a/b.txt", false, FG_WS_FENCING_TOKEN);
	/* reads stay inside the upstream too */
	assert_int_equal(build(&c, "GET", "/../secret.txt", NULL, false), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "HEAD", "/%2e%2e/x", NULL, false), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "GET", "*", NULL, false), FG_E_BAD_PATH);
	/* the lock API's paths, however spelled, are never the storage's */
	assert_int_equal(build(&c, "GET", "//_fence/v1/health", NULL, false), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "PUT", "/x/../_fence/v1/a", NULL, true), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "GET", "/%5Ffence/v1/health", NULL, false), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "GET", "/_fence", NULL, false), FG_E_BAD_PATH);
	assert_int_equal(build(&c, "GET", "/_fencex/a", NULL, false), FG_E_COUNT);
	/* the storage stops a path at '#' */
	assert_int_equal(build(&c, "GET", "/a#/../b", NULL, false), FG_E_BAD_PATH);
	fg_config_finish(&c);
}

static void test_plain_writes_guard_their_path(void **state)
{
	static const char *const methods[] = { "PUT", "POST", "PATCH", "DELETE",
					       "MKCOL", "PROPPATCH", "LOCK" };
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		assert_int_equal(build(&c, methods[i], "/o/x/../a.txt", NULL, false),
				 FG_E_COUNT);
		assert_true(ws.write);
		assert_int_equal(ws.n, 1);
		member(0, "o/a.txt", true, FG_WS_FENCING_TOKEN);
		assert_false(ws.has_dest);
	}
	/* a path that names no lock cannot be fenced */
	assert_int_equal(build(&c, "PUT", "/a%20b.txt", NULL, true), FG_E_BAD_LOCK_NAME);
	fg_config_finish(&c);
}

static void test_copy_writes_its_destination(void **state)
{
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	assert_int_equal(build(&c, "COPY", "/src.txt", "/dst.txt", false), FG_E_COUNT);
	assert_int_equal(ws.n, 1);
	member(0, "dst.txt", true, FG_WS_DESTINATION_FENCING_TOKEN);
	assert_true(ws.has_dest);
	assert_string_equal(ws.dest, "/dst.txt");
	/* with a token, the source is a fenced read */
	assert_int_equal(build(&c, "COPY", "/src.txt", "http://gw:1/dst.txt", true),
			 FG_E_COUNT);
	assert_int_equal(ws.n, 2);
	member(0, "src.txt", false, FG_WS_FENCING_TOKEN);
	member(1, "dst.txt", true, FG_WS_DESTINATION_FENCING_TOKEN);
	/* a token sent for a source that names no lock is not ignored */
	assert_int_equal(build(&c, "COPY", "/a%20b.txt", "/dst.txt", true),
			 FG_E_BAD_LOCK_NAME);
	assert_int_equal(build(&c, "COPY", "/a%20b.txt", "/dst.txt", false), FG_E_COUNT);
	fg_config_finish(&c);

	/* one route lock guards both: Fencing-Token suffices */
	with_routes(&c, "/r/ r", NULL);
	assert_int_equal(build(&c, "COPY", "/r/a", "/r/b", true), FG_E_COUNT);
	assert_int_equal(ws.n, 1);
	member(0, "r", true, FG_WS_FENCING_TOKEN);
	fg_config_finish(&c);
}

static void test_move_writes_both_paths(void **state)
{
	struct fg_config c;
	char err[256];
	(void)state;
	/* listing COPY and MOVE as reads cannot unfence their Destination */
	fg_config_init(&c);
	assert_int_equal(fg_config_set(&c, "read-methods", "GET HEAD COPY MOVE",
				       err, sizeof(err)), 0);
	assert_int_equal(build(&c, "COPY", "/a.txt", "/b.txt", false), FG_E_COUNT);
	assert_true(ws.write);
	member(0, "b.txt", true, FG_WS_DESTINATION_FENCING_TOKEN);
	assert_int_equal(build(&c, "MOVE", "/a.txt", "/b.txt", false), FG_E_COUNT);
	assert_int_equal(ws.n, 2);
	fg_config_finish(&c);

	fg_config_init(&c);
	assert_int_equal(build(&c, "MOVE", "/a.txt", "/b.txt", false), FG_E_COUNT);
	assert_int_equal(ws.n, 2);
	member(0, "a.txt", true, FG_WS_FENCING_TOKEN);
	member(1, "b.txt", true, FG_WS_DESTINATION_FENCING_TOKEN);
	/* the same object (after resolving) is one lock, one header */
	assert_int_equal(build(&c, "MOVE", "/a.txt", "/x/../a.txt", false), FG_E_COUNT);
	assert_int_equal(ws.n, 1);
	member(0, "a.txt", true, FG_WS_FENCING_TOKEN);
	fg_config_finish(&c);
}

static void test_bad_destinations(void **state)
{
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	static const char *const bad[] = {
		NULL, "", "http://elsewhere:1/b", "/_fence/v1/locks/x",
		"/_fence", "/x/../_fence/v1/health",
		"/%5ffence/v1/x", /* "%5f" is '_': resolved, under /_fence/ */
		"/../b", "/b?x", "//gw:1/b",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum fg_error e = build(&c, "MOVE", "/a.txt", bad[i], true);
		if (e != FG_E_BAD_DESTINATION)
			fail_msg("Destination %s: error %d", bad[i] ? bad[i] : "(none)", e);
		assert_int_equal(build(&c, "COPY", "/a.txt", bad[i], true),
				 FG_E_BAD_DESTINATION);
	}
	fg_config_finish(&c);
}

static void test_collections_need_one_lock_for_the_subtree(void **state)
{
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	/* per-object locks: "dir" does not guard "dir/file.txt" */
	assert_int_equal(build(&c, "DELETE", "/dir/", NULL, true), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(build(&c, "MOVE", "/dir/", "/dir2/", true), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(build(&c, "COPY", "/dir/", "/dir2/", true), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(build(&c, "COPY", "/a.txt", "/dir2/", true), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(build(&c, "DELETE", "/dir/x/..", NULL, true), FG_E_SUBTREE_UNGUARDED);
	/* a LOCK of a collection locks its members too (Depth infinity) */
	assert_int_equal(build(&c, "LOCK", "/dir/", NULL, true), FG_E_SUBTREE_UNGUARDED);
	/* MKCOL and PUT change one object, even with a trailing '/' */
	assert_int_equal(build(&c, "MKCOL", "/dir/", NULL, true), FG_E_COUNT);
	fg_config_finish(&c);

	with_routes(&c, "/coll/ coll", "/coll2/ coll2", "/coll/inner/ other", NULL);
	assert_int_equal(build(&c, "DELETE", "/coll2/", NULL, true), FG_E_COUNT);
	member(0, "coll2", true, FG_WS_FENCING_TOKEN);
	assert_int_equal(build(&c, "DELETE", "/coll2/sub/", NULL, true), FG_E_COUNT);
	assert_int_equal(build(&c, "LOCK", "/coll2/sub/", NULL, true), FG_E_COUNT);
	member(0, "coll2", true, FG_WS_FENCING_TOKEN);
	/* a rule inside the subtree gives part of it to another lock */
	assert_int_equal(build(&c, "DELETE", "/coll/", NULL, true), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(build(&c, "DELETE", "/coll/inner/", NULL, true), FG_E_COUNT);
	assert_int_equal(build(&c, "MOVE", "/coll2/a/", "/coll/inner/b/", true), FG_E_COUNT);
	assert_int_equal(ws.n, 2);
	member(0, "coll2", true, FG_WS_FENCING_TOKEN);
	member(1, "other", true, FG_WS_DESTINATION_FENCING_TOKEN);
	assert_int_equal(build(&c, "MOVE", "/coll2/a/", "/elsewhere/", true),
			 FG_E_SUBTREE_UNGUARDED);
	fg_config_finish(&c);
}

/* A storage may take "/dir" for the collection "/dir/" (Apache's mod_dav
 * does): such paths go "Depth: 0" (the request path) or are asked about
 * first (the Destination), unless one lock guards the subtree anyway. */
static void test_paths_without_a_slash_are_kept_to_one_object(void **state)
{
	struct fg_config c;
	(void)state;
	fg_config_init(&c);
	assert_int_equal(build(&c, "DELETE", "/dir", NULL, true), FG_E_COUNT);
	assert_true(ws.shallow);
	assert_false(ws.probe_dest);
	assert_int_equal(build(&c, "LOCK", "/dir", NULL, true), FG_E_COUNT);
	assert_true(ws.shallow);
	assert_int_equal(build(&c, "MOVE", "/a", "/b", true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_true(ws.probe_path);
	assert_true(ws.probe_dest);
	assert_int_equal(build(&c, "COPY", "/a", "/b", true), FG_E_COUNT);
	assert_true(ws.shallow);
	assert_false(ws.probe_path);
	assert_true(ws.probe_dest);
	/* other writes change one object whatever it is; reads change none */
	assert_int_equal(build(&c, "PUT", "/dir", NULL, true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_int_equal(build(&c, "PROPPATCH", "/dir", NULL, true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_int_equal(build(&c, "GET", "/dir", NULL, true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_int_equal(build(&c, "PROPFIND", "/dir", NULL, false), FG_E_COUNT);
	assert_false(ws.shallow);
	fg_config_finish(&c);

	with_routes(&c, "/coll/ coll", "/coll/inner/ other", NULL);
	/* the route's lock guards what "/coll/sub" would hold */
	assert_int_equal(build(&c, "DELETE", "/coll/sub", NULL, true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_int_equal(build(&c, "MOVE", "/coll/a", "/coll/b", true), FG_E_COUNT);
	assert_false(ws.probe_path);
	assert_false(ws.probe_dest);
	/* ... but not "/coll" itself: a rule inside gives part to another */
	assert_int_equal(build(&c, "DELETE", "/coll", NULL, true), FG_E_COUNT);
	assert_true(ws.shallow);
	assert_int_equal(build(&c, "COPY", "/coll/a", "/elsewhere", true), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_true(ws.probe_dest);
	fg_config_finish(&c);
}

/* ---- route rules are resolved when read ------------------------------ */

static void test_routes_resolve_or_are_refused(void **state)
{
	struct fg_config c;
	char err[256];
	(void)state;
	with_routes(&c, "/orders%2F42/ orders/42", "/a//b/ x", "/c/./d/ y", NULL);
	assert_string_equal(c.routes[0].prefix, "/orders/42/");
	assert_string_equal(c.routes[1].prefix, "/a/b/");
	assert_string_equal(c.routes[2].prefix, "/c/d/");
	char lock[FG_NAME_MAX + 1];
	assert_int_equal(fg_fence_lock_for(&c, "/orders/42/item", 15, lock), 0);
	assert_string_equal(lock, "orders/42");
	assert_int_equal(fg_fence_lock_for(&c, "/a/b/obj", 8, lock), 0);
	assert_string_equal(lock, "x");
	fg_config_finish(&c);

	fg_config_init(&c);
	assert_int_not_equal(fg_config_set(&c, "route", "/../x/ z", err, sizeof(err)), 0);
	assert_non_null(strstr(err, "route"));
	assert_int_not_equal(fg_config_set(&c, "route", "/a%00/ z", err, sizeof(err)), 0);
	assert_int_not_equal(fg_config_set(&c, "route", "/a%2/ z", err, sizeof(err)), 0);
	fg_config_finish(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve_like_the_storage),
		cmocka_unit_test(test_destination_forms),
		cmocka_unit_test(test_reads),
		cmocka_unit_test(test_plain_writes_guard_their_path),
		cmocka_unit_test(test_copy_writes_its_destination),
		cmocka_unit_test(test_move_writes_both_paths),
		cmocka_unit_test(test_bad_destinations),
		cmocka_unit_test(test_collections_need_one_lock_for_the_subtree),
		cmocka_unit_test(test_paths_without_a_slash_are_kept_to_one_object),
		cmocka_unit_test(test_routes_resolve_or_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
