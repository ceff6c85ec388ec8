/*
 * tests/unit/base/test_route.c - route templates (gateway/base/route.c)
 * and the decisions built on them (fg_route_lock, fg_route_decide,
 * fg_subtree_guarded in gateway/base/writeset.c).
 *
 * Pins contract v1.4 "Route templates": a capture `{name}` matches exactly
 * one non-empty segment; of the matching rules the one with the most
 * literal bytes wins, then the first in the file; a lock built from
 * captures must be a valid lock name (-1, the caller's 400
 * bad_lock_name); a lock using a capture its prefix lacks, a capture that
 * is not a whole segment, or a malformed brace is a bad setting. Paths in
 * the S3 style ("/BUCKET/KEY", the key not resolved) are matched
 * literally, segment by segment. A collection is guarded by a lock when
 * no rule that could win inside it gives another. Routes are added
 * through fg_config_set, as the config file does.
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
#include "base/route.h"
#include "base/writeset.h"

/* ---- helpers ------------------------------------------------------- */

struct lock_case {
	const char *path;
	const char *lock; /* NULL: -1 */
	const char *rule; /* the winning line; NULL: the default */
};

static void check_locks(const struct fg_config *c, const struct lock_case *t,
			size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char out[FG_NAME_MAX + 1] = "";
		const struct fg_route *rule = (const void *)1;
		int rc = fg_route_lock(c, t[i].path, strlen(t[i].path), out, &rule);
		if ((rc == 0) != (t[i].lock != NULL))
			fail_msg("%s: rc %d, expected %s", t[i].path, rc,
				 t[i].lock ? t[i].lock : "-1");
		if (t[i].lock && strcmp(out, t[i].lock) != 0)
			fail_msg("%s: lock %s, expected %s", t[i].path, out, t[i].lock);
		if ((rule != NULL) != (t[i].rule != NULL) ||
		    (rule && strcmp(rule->line, t[i].rule) != 0))
			fail_msg("%s: rule '%s', expected '%s'", t[i].path,
				 rule ? rule->line : "(default)",
				 t[i].rule ? t[i].rule : "(default)");
	}
}

/* The reason a route line is refused, or NULL when it is taken. */
static const char *refused(const char *line, char *err, size_t n)
{
	struct fg_config c;
	fg_config_init(&c);
	err[0] = '\0';
	int rc = fg_config_set(&c, "route", line, err, n);
	fg_config_finish(&c);
	return rc ? err : NULL;
}

/* ---- captures ---------------------------------------------------------- */

static void test_capture_whole_segment(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/orders/{id}/ orders/{id}", "/{bucket}/ {bucket}", NULL);
	const struct lock_case t[] = {
		{ "/orders/42/items/7", "orders/42", "/orders/{id}/ orders/{id}" },
		{ "/orders/42/", "orders/42", "/orders/{id}/ orders/{id}" },
		/* "/p/" covers "/p", templates too */
		{ "/orders/42", "orders/42", "/orders/{id}/ orders/{id}" },
		/* an empty segment is no capture: only /{bucket}/ matches */
		{ "/orders/", "orders", "/{bucket}/ {bucket}" },
		{ "/orders", "orders", "/{bucket}/ {bucket}" },
		{ "/b/k", "b", "/{bucket}/ {bucket}" },
		{ "/b", "b", "/{bucket}/ {bucket}" },
		/* the root: no segment, no rule, no valid default */
		{ "/", NULL, NULL },
		/* a capture never crosses a '/' */
		{ "/orders/4/2/x", "orders/4", "/orders/{id}/ orders/{id}" },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);
}

static void test_capture_last_without_slash(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/u/{name} users/{name}", "/lit/ab lit", NULL);
	const struct lock_case t[] = {
		/* the capture is the whole segment, however far it goes */
		{ "/u/alice", "users/alice", "/u/{name} users/{name}" },
		{ "/u/alice/x", "users/alice", "/u/{name} users/{name}" },
		{ "/u/", "u", NULL },
		/* a literal without '/' still covers what starts with it */
		{ "/lit/abc", "lit", "/lit/ab lit" },
		{ "/lit/a", "lit/a", NULL },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);
}

static void test_several_captures(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/t/{team}/p/{proj}/ {proj}.{team}", NULL);
	const struct lock_case t[] = {
		{ "/t/a/p/b/c", "b.a", "/t/{team}/p/{proj}/ {proj}.{team}" },
		{ "/t/a/q/b/c", "t/a/q/b/c", NULL },
		{ "/t/a/p/", "t/a/p", NULL },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);
}

/* ---- precedence ------------------------------------------------------ */

static void test_precedence_literal_bytes(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c,
		    "/{bucket}/ {bucket}",             /* 2 literal bytes */
		    "/orders/{id}/ orders/{id}",       /* 9 */
		    "/orders/ all-orders",             /* 8 */
		    "/orders/special/ special",        /* 16 */
		    "/{a}/{b}/items/ items-{a}-{b}",   /* 9, after /orders/{id}/ */
		    NULL);
	const struct lock_case t[] = {
		/* 9 literal bytes beat 8, though "/orders/" is as long */
		{ "/orders/42/x", "orders/42", "/orders/{id}/ orders/{id}" },
		{ "/orders/special/x", "special", "/orders/special/ special" },
		/* only /orders/ (8) and /{bucket}/ (2) match the collection */
		{ "/orders/", "all-orders", "/orders/ all-orders" },
		/* a tie (9, 9): the first in the file */
		{ "/orders/42/items/1", "orders/42", "/orders/{id}/ orders/{id}" },
		{ "/x/y/items/1", "items-x-y", "/{a}/{b}/items/ items-{a}-{b}" },
		{ "/x/y", "x", "/{bucket}/ {bucket}" },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);
}

static void test_precedence_file_order(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/{a}/x/ first-{a}", "/y/{b}/ second-{b}", NULL);
	const struct lock_case t[] = {
		{ "/y/x/z", "first-y", "/{a}/x/ first-{a}" },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);
	with_routes(&c, "/y/{b}/ second-{b}", "/{a}/x/ first-{a}", NULL);
	const struct lock_case u[] = {
		{ "/y/x/z", "second-x", "/y/{b}/ second-{b}" },
	};
	check_locks(&c, u, sizeof(u) / sizeof(u[0]));
	fg_config_finish(&c);
}

/* ---- names built from captures ------------------------------------- */

static void test_captures_make_invalid_names(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/{bucket}/ {bucket}", "/o/{id}/ o/{id}", NULL);
	const struct lock_case t[] = {
		/* a decoded space, '*', a non-ASCII byte: no lock name; the
		 * rule still decided */
		{ "/a b/k", NULL, "/{bucket}/ {bucket}" },
		{ "/o/4*2/x", NULL, "/o/{id}/ o/{id}" },
		{ "/o/\xc3\xa9/x", NULL, "/o/{id}/ o/{id}" },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));
	fg_config_finish(&c);

	/* a capture as long as a name, and one byte longer than fits */
	char path[FG_NAME_MAX + 16], lock[FG_NAME_MAX + 1];
	const struct fg_route *rule;
	with_routes(&c, "/{b}/ {b}", "/p/{x}/ pp{x}", NULL);
	path[0] = '/';
	memset(path + 1, 'a', FG_NAME_MAX);
	assert_int_equal(fg_route_lock(&c, path, FG_NAME_MAX + 1, lock, &rule), 0);
	assert_int_equal(strlen(lock), FG_NAME_MAX);
	memcpy(path, "/p/", 3);
	memset(path + 3, 'a', FG_NAME_MAX - 1);
	/* "pp" + 253 bytes fits; + 254 does not */
	assert_int_equal(fg_route_lock(&c, path, 3 + FG_NAME_MAX - 2, lock, &rule), 0);
	assert_int_equal(strlen(lock), FG_NAME_MAX);
	assert_int_equal(fg_route_lock(&c, path, 3 + FG_NAME_MAX - 1, lock, &rule), -1);
	assert_non_null(rule);
	assert_string_equal(rule->line, "/p/{x}/ pp{x}");
	fg_config_finish(&c);
}

/* ---- S3 style: "/BUCKET/KEY", the key decoded, not resolved ---------- */

static void test_s3_raw_keys(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/{bucket}/{dir}/ {bucket}/{dir}", "/logs/ logs", NULL);
	const struct lock_case t[] = {
		{ "/b/d/k", "b/d", "/{bucket}/{dir}/ {bucket}/{dir}" },
		/* "//": an empty segment is no capture; no merging of it */
		{ "/b//d/k", NULL, NULL },
		/* "." and ".." are literal segments: captured as they are,
		 * and no lock name */
		{ "/b/../k", NULL, "/{bucket}/{dir}/ {bucket}/{dir}" },
		{ "/b/./k", NULL, "/{bucket}/{dir}/ {bucket}/{dir}" },
		/* bytes a resolved path never has */
		{ "/b/%2F/k", NULL, "/{bucket}/{dir}/ {bucket}/{dir}" },
		{ "/b/\x01\x7f\xff/k", NULL, "/{bucket}/{dir}/ {bucket}/{dir}" },
		{ "/b/{dir}/k", NULL, "/{bucket}/{dir}/ {bucket}/{dir}" },
		{ "/logs/../../etc", "logs", "/logs/ logs" },
		{ "/logs//x", "logs", "/logs/ logs" },
	};
	check_locks(&c, t, sizeof(t) / sizeof(t[0]));

	/* the length is the path's, NUL or not after it */
	char lock[FG_NAME_MAX + 1];
	const struct fg_route *rule;
	assert_int_equal(fg_route_lock(&c, "/b/d/k-and-more", 6, lock, &rule), 0);
	assert_string_equal(lock, "b/d");
	fg_config_finish(&c);
}

/* ---- bad settings ------------------------------------------------- */

static void test_bad_settings(void **state)
{
	char err[512];
	(void)state;
	static const char *const bad[] = {
		"/a{id}/ x",           /* not a whole segment */
		"/a/{id}x/ x",
		"/a/x{id}/ x",
		"/a/{id/ x",           /* malformed braces */
		"/a/id}/ x",
		"/a/{}/ x",
		"/a/{i-d}/ x",
		"/a/{{id}}/ x",
		"/a/%7Bid%7D/ x",      /* an encoded brace */
		"/a/{id}/{id}/ x",     /* twice */
		"/a/{id}/ {other}",    /* a capture the prefix lacks */
		"/a/ {id}",
		"/a/{id}/ a{id",
		"/a/{id}/ a/{id}}",
		"/a/{id}/ {id}/",      /* never a valid name */
		"/a/{id}/ a//{id}",
		"/a/{id}/ a*{id}",
		"/a/{id}/ a/../{id}",
		"a/{id}/ a",           /* no leading '/' */
		"/a/{id}/",            /* one word */
		"/a/{id}/ x y",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!refused(bad[i], err, sizeof(err)))
			fail_msg("route '%s' was taken", bad[i]);
	assert_non_null(refused("/a/{id}/ {other}", err, sizeof(err)));
	assert_non_null(strstr(err, "{other}"));
	assert_non_null(refused("/a{id}/ x", err, sizeof(err)));
	assert_non_null(strstr(err, "whole path segment"));

	static const char *const good[] = {
		"/{b}/ {b}", "/a/{id}/ a/{id}", "/a/{id} a-{id}", "/a/{x}/{y}/ {y}{x}",
		"/a/{id}/ fixed", "/a/{id}/b/ b.{id}.~", "/a/{A_1}/ {A_1}",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (refused(good[i], err, sizeof(err)))
			fail_msg("route '%s' refused: %s", good[i], err);

	/* 16 captures are taken, 17 are not */
	char line[512];
	size_t w = 0;
	for (int k = 0; k < 17; k++)
		w += (size_t)snprintf(line + w, sizeof(line) - w, "/{c%d}", k);
	snprintf(line + w, sizeof(line) - w, "/ x");
	assert_non_null(refused(line, err, sizeof(err)));
	w = 0;
	for (int k = 0; k < 16; k++)
		w += (size_t)snprintf(line + w, sizeof(line) - w, "/{c%d}", k);
	snprintf(line + w, sizeof(line) - w, "/ x{c15}{c0}");
	assert_null(refused(line, err, sizeof(err)));
}

static void test_line_as_written(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "  /orders//{id}/   orders/{id}", "/a%2Fb/ ab", NULL);
	assert_string_equal(c.routes[0].line, "/orders//{id}/ orders/{id}");
	assert_string_equal(c.routes[0].prefix, "/orders/{id}/");
	assert_string_equal(c.routes[0].lock, "orders/{id}");
	assert_int_equal(c.routes[0].literal, 9);
	assert_string_equal(c.routes[1].line, "/a%2Fb/ ab");
	assert_string_equal(c.routes[1].prefix, "/a/b/");
	fg_config_finish(&c);
}

/* ---- one rule, alone ---------------------------------------------- */

static void test_apply(void **state)
{
	struct fg_route r;
	char err[256], out[FG_NAME_MAX + 1];
	(void)state;
	assert_int_equal(fg_route_compile(&r, "/o/{id}/", 8, "o-{id}", 6, err,
					  sizeof(err)), 0);
	assert_int_equal(fg_route_apply(&r, "/o/1/x", 6, out), 1);
	assert_string_equal(out, "o-1");
	assert_int_equal(fg_route_apply(&r, "/o//x", 5, out), 0);
	assert_int_equal(fg_route_apply(&r, "/p/1/x", 6, out), 0);
	assert_int_equal(fg_route_apply(&r, "/o/ /x", 6, out), -1);
	fg_route_finish(&r);
	fg_route_finish(&r); /* empty: nothing to free */
	assert_int_equal(fg_route_compile(&r, "/o/{id", 6, "x", 1, err,
					  sizeof(err)), -1);
	assert_null(r.prefix);
}

/* ---- subtrees ------------------------------------------------------ */

static void test_subtree_templates(void **state)
{
	struct fg_config c;
	(void)state;
	with_routes(&c, "/teams/{team}/ teams/{team}",
		    "/teams/{team}/private/ private-{team}",
		    "/teams/{team}/shared/ teams/{team}",
		    "/orders/ orders",
		    "/orders/{id}/ orders/{id}",
		    NULL);
#define G(p, l) fg_subtree_guarded(&c, p, strlen(p), l)
	/* a rule inside with another lock for the same team */
	assert_false(G("/teams/a/", "teams/a"));
	/* the same lock inside is harmless; the private part is its own */
	assert_true(G("/teams/a/shared/", "teams/a"));
	assert_true(G("/teams/a/private/", "private-a"));
	assert_true(G("/teams/a/private/x/", "private-a"));
	assert_false(G("/teams/a/private/", "teams/a"));
	/* a capture the collection does not fix could name any order */
	assert_false(G("/orders/", "orders"));
	assert_true(G("/orders/42/", "orders/42"));
	assert_false(G("/orders/42/", "orders/43"));
	/* no rule: no subtree guard */
	assert_false(G("/other/", "other"));
	fg_config_finish(&c);

	/* a rule that matches inside but loses there takes nothing */
	with_routes(&c, "/teams/{team}/ teams/{team}", "/{bucket}/ {bucket}",
		    "/teams/ teams", NULL);
	assert_true(G("/teams/a/", "teams/a"));
	assert_true(G("/teams/a/b/c/", "teams/a"));
	/* /teams/{team}/ (8 bytes) beats /teams/ (7) inside /teams/ */
	assert_false(G("/teams/", "teams"));
	fg_config_finish(&c);

	/* a capture fixed by the collection: the lock inside is known */
	with_routes(&c, "/t/{team}/ t/{team}", "/t/{team}/x/{y}/ t/{team}", NULL);
	assert_true(G("/t/a/", "t/a"));
	fg_config_finish(&c);
	with_routes(&c, "/t/{team}/ t/{team}", "/t/{team}/x/{y}/ t/{y}", NULL);
	assert_false(G("/t/a/", "t/a"));
	assert_true(G("/t/a/x/b/", "t/b"));
	fg_config_finish(&c);
	/* an invalid name from the winner guards nothing */
	with_routes(&c, "/{b}/ {b}", NULL);
	assert_false(G("/a b/", "a b"));
	assert_true(G("/ab/", "ab"));
	fg_config_finish(&c);
#undef G
}

static void test_subtree_in_writeset(void **state)
{
	struct fg_config c;
	struct fg_writeset ws;
	(void)state;
	with_routes(&c, "/teams/{team}/ teams/{team}", NULL);
	assert_int_equal(fg_writeset_build(&c, "DELETE", "/teams/a/", NULL, NULL,
					   true, &ws), FG_E_COUNT);
	assert_int_equal(ws.n, 1);
	assert_string_equal(ws.m[0].lock, "teams/a");
	/* /teams/a without its '/': the route guards it as a collection */
	assert_int_equal(fg_writeset_build(&c, "DELETE", "/teams/a", NULL, NULL,
					   true, &ws), FG_E_COUNT);
	assert_false(ws.shallow);
	assert_int_equal(fg_writeset_build(&c, "DELETE", "/teams/", NULL, NULL,
					   true, &ws), FG_E_SUBTREE_UNGUARDED);
	assert_int_equal(fg_writeset_build(&c, "MOVE", "/teams/a/", "/teams/b/",
					   "h", true, &ws), FG_E_COUNT);
	assert_int_equal(ws.n, 2);
	assert_int_equal(fg_writeset_build(&c, "PUT", "/teams/a%20b/x", NULL,
					   NULL, true, &ws), FG_E_BAD_LOCK_NAME);
	fg_config_finish(&c);
}

/* ---- the locks a collection read reaches (the access step) ---------- */

static void test_inside(void **state)
{
	struct fg_config c;
	char out[FG_NAME_MAX + 1];
	bool exact;
	(void)state;
	with_routes(&c, "/docs/{team}/ team-{team}", "/docs/secret/ sec",
		    "/ all", "/docs/{team}/x/{y}/ {team}.{y}",
		    "/docs/{team}/y/ yy-{team}", NULL);
#define IN(i, d) fg_route_inside(&c.routes[i], d, strlen(d), out, &exact)
	/* a template inside whose capture the collection leaves open: the
	 * start every name it gives shares */
	assert_true(IN(0, "/docs/"));
	assert_false(exact);
	assert_string_equal(out, "team-");
	/* fixed by the collection: the one lock */
	assert_true(IN(4, "/docs/a/"));
	assert_true(exact);
	assert_string_equal(out, "yy-a");
	/* it matches there: dir's own */
	assert_false(IN(0, "/docs/a/"));
	assert_false(IN(0, "/docs/a/b/"));
	assert_false(IN(1, "/docs/secret/")); /* likewise */
	assert_false(IN(0, "/other/"));
	assert_true(IN(1, "/docs/"));
	assert_true(exact);
	assert_string_equal(out, "sec");
	assert_false(IN(2, "/docs/"));      /* "/" is above it */
	assert_true(IN(3, "/docs/a/"));
	assert_false(exact);
	assert_string_equal(out, "a.");
#undef IN
	fg_config_finish(&c);
}

/* ---- the one decision the route endpoint and --route-test show ------ */

static void test_decide(void **state)
{
	struct fg_config c;
	char lock[FG_NAME_MAX + 1];
	const struct fg_route *rule;
	(void)state;
	with_routes(&c, "/orders/{id}/ orders/{id}", NULL);
#define D(p) fg_route_decide(&c, p, strlen(p), lock, &rule)
	assert_int_equal(D("/orders/42/items/7"), FG_E_COUNT);
	assert_string_equal(lock, "orders/42");
	assert_string_equal(rule->line, "/orders/{id}/ orders/{id}");
	/* resolved as the proxy resolves it */
	assert_int_equal(D("//orders/x/../42/./items"), FG_E_COUNT);
	assert_string_equal(lock, "orders/42");
	assert_int_equal(D("/orders%2F43/a"), FG_E_COUNT);
	assert_string_equal(lock, "orders/43");
	assert_int_equal(D("/bucket/a.txt"), FG_E_COUNT);
	assert_string_equal(lock, "bucket/a.txt");
	assert_null(rule);
	assert_int_equal(D("/orders/4%20/x"), FG_E_BAD_LOCK_NAME);
	assert_non_null(rule);
	assert_int_equal(D("/a%20b"), FG_E_BAD_LOCK_NAME);
	assert_null(rule);
	assert_int_equal(D("/../x"), FG_E_BAD_PATH);
	assert_int_equal(D("x"), FG_E_BAD_PATH);
	assert_int_equal(D("/_fence/v1/locks/a"), FG_E_BAD_PATH);
	assert_int_equal(D("/x?y"), FG_E_BAD_PATH);
#undef D
	fg_config_finish(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture_whole_segment),
		cmocka_unit_test(test_capture_last_without_slash),
		cmocka_unit_test(test_several_captures),
		cmocka_unit_test(test_precedence_literal_bytes),
		cmocka_unit_test(test_precedence_file_order),
		cmocka_unit_test(test_captures_make_invalid_names),
		cmocka_unit_test(test_s3_raw_keys),
		cmocka_unit_test(test_bad_settings),
		cmocka_unit_test(test_line_as_written),
		cmocka_unit_test(test_apply),
		cmocka_unit_test(test_subtree_templates),
		cmocka_unit_test(test_subtree_in_writeset),
		cmocka_unit_test(test_inside),
		cmocka_unit_test(test_decide),
	};

	return cmocka_run_group_tests_name("route", tests, NULL, NULL);
}
