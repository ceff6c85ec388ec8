/*
 * route.h - route rules: `route PREFIX LOCK` lines compiled into templates,
 * and which rule and lock a path gets. Private to the gateway; pure.
 *
 * Invariant: a struct fg_route is compiled once, when the config is read
 * (fg_route_compile()), and never changes after; matching a path against
 * it reads the path and the compiled parts only, allocates nothing and
 * never normalises the path it is handed.
 */
#ifndef FENCEGATE_ROUTE_H
#define FENCEGATE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/name.h"

/* Bounds of one rule: captures in its prefix, parts of its prefix and of
 * its lock (a literal run or a capture each), the prefix as written. */
#define FG_ROUTE_CAPS_MAX 16
#define FG_ROUTE_PARTS_MAX (2 * FG_ROUTE_CAPS_MAX + 1)
#define FG_ROUTE_PREFIX_MAX 1024
#define FG_ROUTE_CAPNAME_MAX 32

/* A literal run of the template text, or a capture. */
struct fg_route_part {
	uint16_t off;  /* literal: where its bytes start in the text; capture:
			  where its name starts (after '{') */
	uint16_t len;  /* bytes of the literal, or of the name */
	int8_t cap;    /* -1: a literal; else the capture's index */
};

struct fg_route {
	char *prefix;    /* the prefix template, resolved (fg_path_resolve)
			    as paths are: starts with '/' */
	char *lock;      /* the lock, or a lock template, as written */
	char *line;      /* "PREFIX LOCK" as written, for reporting */
	size_t literal;  /* the prefix's literal (non-capture) bytes: the
			    rule with the most wins, then the first one */
	unsigned ncaps;  /* captures in the prefix */
	unsigned nprefix, nlock;
	struct fg_route_part pp[FG_ROUTE_PARTS_MAX]; /* the prefix's parts,
							into `prefix` */
	struct fg_route_part lp[FG_ROUTE_PARTS_MAX]; /* the lock's parts:
							literals into `lock`,
							captures by index */
};

/**
 * Compiles the rule `route PREFIX LOCK` (prefix[0..plen) and lock[0..llen)
 * as written) into *r, which then owns its strings (fg_route_finish()).
 * A prefix starts with '/'; `{name}` ([A-Za-z0-9_], 1..32 bytes) is a
 * capture and must be a whole segment ("/a/{id}/", "/{bucket}"); the
 * prefix is resolved as paths are, and a brace cannot be percent-encoded.
 * The lock may use the prefix's captures, and must be a valid lock name
 * whatever they hold (tried with "x" for each). 0, or -1 with the reason
 * in err (a bad setting: exit 2); *r is then left empty.
 */
int fg_route_compile(struct fg_route *r, const char *prefix, size_t plen,
		     const char *lock, size_t llen, char *err, size_t n);

/** Frees what r owns and empties it. Accepts an empty rule. */
void fg_route_finish(struct fg_route *r);

/**
 * One rule against a path (any bytes but NUL, matched segment-wise and
 * literally): 0 when the rule does not match it; 1 with the lock name in
 * out when it does; -1 when it does and the name built from its captures
 * is not a valid lock name. A prefix "/p/" matches "/p/..." and "/p"; a
 * prefix without its trailing '/' whatever starts with it; a capture
 * matches exactly one non-empty segment.
 */
int fg_route_apply(const struct fg_route *r, const char *path, size_t len,
		   char out[FG_NAME_MAX + 1]);

/**
 * The lock guarding a path under the rules routes[0..nroutes) (in file
 * order): of those that match it (fg_route_apply), the one with the most
 * literal bytes, then the first; with none, the path without its leading
 * and trailing '/'. The path is matched as it is handed in (see
 * fg_route_lock() in base/writeset.h). 0 with the name in out and *rule
 * the winning rule (NULL: none matched); -1 when the name is not a valid
 * lock name (*rule still says whether a rule decided).
 */
int fg_routes_lock(const struct fg_route *routes, size_t nroutes,
		   const char *path, size_t len, char out[FG_NAME_MAX + 1],
		   const struct fg_route **rule);

/**
 * Is the whole subtree under the collection path `path` (it ends in '/')
 * guarded by the one lock `lock`? True when the rule that wins for the
 * path gives `lock`, and no other rule that could match a path inside the
 * subtree and win there gives another lock (a rule whose lock uses a
 * capture that the path does not fix could give another).
 */
bool fg_routes_subtree_guarded(const struct fg_route *routes, size_t nroutes,
			       const char *path, size_t len, const char *lock);

/**
 * Could rule r decide a path inside the subtree of the collection path
 * `dir` (it ends in '/') without matching `dir` itself (its prefix goes
 * on past dir)? Then out gets the lock name it gives there (*exact true),
 * or when that name depends on captures dir does not fix, the literal
 * start all of them share (*exact false; may be ""). A rule that matches
 * dir is not one: it either decides dir (the caller's lock of dir) or
 * loses to that rule everywhere under it.
 */
bool fg_route_inside(const struct fg_route *r, const char *dir, size_t n,
		     char out[FG_NAME_MAX + 1], bool *exact);

#endif
