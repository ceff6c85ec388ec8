/*
 * writeset.h - what a proxied request may change, and which lock guards
 * each part of it. Private to the gateway.
 *
 * Invariant: a request is forwarded only after fg_writeset_build() accepted
 * it, and then every object the storage may change when it applies the
 * request (its write set: the request path, the Destination, a whole
 * collection) is guarded by one of the locks the write set names. The
 * functions here are pure (no I/O, no globals): the proxy, the unit tests
 * and the fuzz harnesses call the same code.
 */
#ifndef FENCEGATE_WRITESET_H
#define FENCEGATE_WRITESET_H

#include <stdbool.h>
#include <stddef.h>

#include "fencegate/name.h"
#include "base/config.h"
#include "base/errors.h"
#include "base/path.h"

/**
 * The lock guarding a path, under cfg's route rules (base/route.c).
 *
 * path: a resolved path (fg_path_resolve) in the default mode; in S3 mode
 * "/BUCKET/KEY" with KEY percent-decoded but not resolved (any byte but
 * NUL, "//", "." and ".." segments: matched segment-wise and literally,
 * never normalised). Of the rules that match it, the one with the most
 * literal (non-capture) bytes wins, then the first in the file.
 *
 * 0 with the lock name in out and *rule the winning rule (NULL when no
 * rule matched: then the default, the path without its leading and
 * trailing '/'); -1 when the resulting name is not a valid lock name
 * (*rule still says whether a rule decided). Allocates nothing.
 */
int fg_route_lock(const struct fg_config *cfg, const char *path, size_t len,
		  char out[FG_NAME_MAX + 1], const struct fg_route **rule);

/**
 * The lock guarding a resolved path: fg_route_lock() (base/route.h: the
 * matching rule with the most literal bytes, then the first; a prefix
 * "/p/" covers "/p/..." and "/p" itself), else the path without its
 * leading and trailing '/'. 0, or -1 when that is no valid lock name.
 * *route (may be NULL) tells whether a route rule decided.
 */
int fg_lock_for_path(const struct fg_config *cfg, const char *path, size_t len,
		     char out[FG_NAME_MAX + 1], bool *route);

/** fg_path_resolve() then fg_lock_for_path() of a raw path: 0, or -1. */
int fg_fence_lock_for(const struct fg_config *cfg, const char *raw_path,
		      size_t len, char out[FG_NAME_MAX + 1]);

/**
 * Which lock guards a request path as a client sends it (percent-encoded,
 * no query), as the proxy decides it: the one decision the lock API's
 * GET /_fence/v1/route and `--check-config --route-test` both answer
 * from. FG_E_COUNT with the lock in out and *rule the winning rule (NULL:
 * the default); FG_E_BAD_PATH when the proxy takes no such path (it does
 * not start with '/', does not resolve, or is the lock API's);
 * FG_E_BAD_LOCK_NAME when it maps to no valid lock name (*rule says
 * whether a rule decided).
 */
enum fg_error fg_route_decide(const struct fg_config *cfg, const char *raw,
			      size_t len, char out[FG_NAME_MAX + 1],
			      const struct fg_route **rule);

/**
 * Is the whole subtree under the resolved collection path `path` (it ends
 * in '/') guarded by the one lock `lock`? fg_route_subtree_guarded(): the
 * rule that wins for the path gives `lock`, and no other rule that could
 * win for a path inside it gives another.
 */
bool fg_subtree_guarded(const struct fg_config *cfg, const char *path,
			size_t len, const char *lock);

/**
 * The raw path of a Destination header: the header itself when it is a
 * path ("/..."), or the path of an absolute http(s) URL whose authority is
 * `host` (the request's Host, compared case-insensitively). 0 with the
 * path and its length pointing into `dest`, or -1 (another authority, no
 * Host, a query or fragment, a byte that is not printable ASCII). Whether
 * the path is under the lock API is decided by the caller, resolved.
 */
int fg_dest_raw_path(const char *dest, const char *host, const char **path,
		     size_t *len);

/* Which header carries the sequencer a member is checked against. */
enum fg_ws_header {
	FG_WS_FENCING_TOKEN,             /* Fencing-Token */
	FG_WS_DESTINATION_FENCING_TOKEN, /* Destination-Fencing-Token */
	FG_WS_SESSION_TOKEN,             /* S3 mode: the one of the request's
					    sequencers (its session token's,
					    its Fencing-Token's) that names
					    the member's lock */
};
#define FG_WS_HEADERS 3

/* The most locks one request may change: a WebDAV COPY or MOVE names two,
 * an S3 DeleteObjects as many as its keys' locks. Each costs a Redis round
 * trip or two before the request goes on, so more is refused (a route
 * rule that groups the keys under one lock is the way). */
#define FG_WS_MAX 16

/* One lock of the write set, and how it is checked. */
struct fg_ws_member {
	char lock[FG_NAME_MAX + 1];
	bool write;                /* admitted as a write; else a fenced read */
	enum fg_ws_header header;  /* where its sequencer comes from */
	bool header_optional;      /* a read: checked only if its header came */
};

struct fg_writeset {
	bool write;                /* the method changes something */
	char path[FG_PATH_MAX];    /* the resolved request path */
	size_t path_len;
	bool has_dest;             /* COPY/MOVE: the Destination is forwarded */
	char dest[FG_PATH_MAX];    /* the resolved Destination path */
	size_t dest_len;
	const char *dest_raw;      /* the Destination's raw path (into the
				      header given), as forwarded */
	size_t dest_raw_len;
	int n;                     /* members: 0 (an unfenced read) to
				      FG_WS_MAX */
	struct fg_ws_member m[FG_WS_MAX]; /* distinct locks */
	/* A storage may take a path without its '/' for the collection of
	 * that name (Apache's mod_dav does; nginx's refuses it). */
	bool shallow;              /* DELETE, COPY: forward "Depth: 0": a
				      DELETE of a collection fails, a COPY
				      copies it alone (RFC 4918 9.6.1,
				      9.8.3) */
	bool probe_path;           /* MOVE: ask the storage whether the
				      request path is a collection first
				      (nginx refuses a MOVE of Depth 0) */
	bool probe_dest;           /* COPY, MOVE: ask the storage whether the
				      Destination is a collection first (one
				      that is, a COPY or MOVE with Overwrite
				      deletes whole, 9.8.4) */
};

/**
 * Decides the write set of a request, before any token is looked at:
 * method (as sent), raw request target (origin-form, may carry a query),
 * the Destination and Host headers (NULL when absent), and whether a
 * Fencing-Token header came (a read that carries one is a fenced read).
 *
 * A DELETE, COPY or MOVE path without its trailing '/' under no lock that
 * guards a subtree there is marked `shallow` or `probe_path` (the request
 * path) or `probe_dest` (the Destination).
 *
 * Returns FG_E_COUNT when the request may go on to the token checks, or the
 * error to answer: FG_E_BAD_PATH (the path climbs above the root or is not
 * a path), FG_E_BAD_DESTINATION, FG_E_SUBTREE_UNGUARDED, FG_E_BAD_LOCK_NAME
 * (a path that needs a lock maps to no valid lock name).
 */
enum fg_error fg_writeset_build(const struct fg_config *cfg, const char *method,
				const char *target, const char *destination,
				const char *host, bool has_token,
				struct fg_writeset *ws);

/**
 * Adds a member for `lock` to ws, or merges it into the member that has it
 * (a write wins over a read; Fencing-Token serves both). false when ws
 * holds FG_WS_MAX members already and `lock` is not one of them.
 */
bool fg_ws_add_member(struct fg_writeset *ws, const char *lock, bool write,
		      enum fg_ws_header header);

/** Must the method be fenced? The configured writes, and every method
 *  that is not a configured read. */
bool fg_method_is_write(const struct fg_config *cfg, const char *method);

#endif
