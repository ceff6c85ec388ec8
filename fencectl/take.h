/*
 * take.h - taking a lock, waiting as long as asked, and holding its lease.
 *
 * The lease loop is the client library's (libfencegate-client,
 * fencegate/client.h), here given fencectl's words: the gateway waits at
 * most FG_WAIT_MAX_MS in one call, so a longer wait is a series of calls,
 * each for what remains (the place in the lock's queue is taken again by
 * each), each first finding a gateway that answers (livez). While
 * waiting, a gateway that does not answer, or answers 5xx or 429, is
 * asked again after a back-off (250 ms, doubling up to 5 s) until the
 * wait runs out. When no gateway answers at all (every one tried: no
 * connection, a timeout), the wait says so at once and keeps trying,
 * every gateway in turn, for at most --unreachable (default 30 s, counted
 * from the first call no gateway answered; an answer starts it again),
 * then gives up as unavailable. A wait of 0 is one try. A grant whose
 * answer took longer than a third of its lease is renewed at once, so
 * that its end is known closely. The grant's lease is then renewed by
 * the library's renewer thread (fg_hold_start()).
 */
#ifndef FENCECTL_TAKE_H
#define FENCECTL_TAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "cli.h"
#include "req.h"

#define FG_WAIT_FOREVER UINT64_MAX
#define FG_UNREACHABLE_DEFAULT_MS 30000

struct fg_take {
	const char *name;
	struct fg_acquire_args args;
	uint64_t wait_ms;	/* FG_WAIT_FOREVER: as long as it takes */
	uint64_t unreachable_ms; /* --unreachable; 0: the default */
	bool quiet;		/* no "still trying" notes while waiting */
	bool conflict_exit_set;	/* -E given */
	int conflict_exit;	/* -E: the status when not granted */
	char owner_buf[256];	/* the default owner, user@host:pid */
};

/* The options of a subcommand that takes a lock; its own follow. */
enum {
	FG_TAKE_OPT_TTL = FG_OPT_FIRST_OWN,
	FG_TAKE_OPT_WAIT,
	FG_TAKE_OPT_SHARED,
	FG_TAKE_OPT_OWNER,
	FG_TAKE_OPT_VALUE,
	FG_TAKE_OPT_LOCK_DELAY,
	FG_TAKE_OPT_NO_WAIT,
	FG_TAKE_OPT_CONFLICT_EXIT,
	FG_TAKE_OPT_UNREACHABLE,
	FG_TAKE_OPT_END,	/* a subcommand's own options from here */
};

/* How long to wait and what to exit with when not granted, as flock(1):
 * -w DUR, -n, -E CODE (flock's --conflict-exit-code). */
#define FG_TAKE_WAIT_OPTS \
	{ "wait", 'w', true, FG_TAKE_OPT_WAIT }, \
	{ "no-wait", 'n', false, FG_TAKE_OPT_NO_WAIT }, \
	{ "conflict-exit-code", 'E', true, FG_TAKE_OPT_CONFLICT_EXIT }, \
	{ "unreachable", 0, true, FG_TAKE_OPT_UNREACHABLE }

/* The table rows of all of them, for a subcommand that takes them all. */
#define FG_TAKE_OPTS \
	{ "ttl", 0, true, FG_TAKE_OPT_TTL }, \
	FG_TAKE_WAIT_OPTS, \
	{ "shared", 0, false, FG_TAKE_OPT_SHARED }, \
	{ "owner", 0, true, FG_TAKE_OPT_OWNER }, \
	{ "value", 0, true, FG_TAKE_OPT_VALUE }, \
	{ "lock-delay", 0, true, FG_TAKE_OPT_LOCK_DELAY }

/**
 * Handles an option of the table above into t: 0 done, -1 bad value (msg
 * set), 1 when id is not one of them.
 */
int fg_take_option(struct fg_take *t, int id, const char *name,
		   const char *value, char *msg, size_t msglen);

/**
 * Gives t the default owner, "user@host:pid" (this process's), unless an
 * owner was given or the take re-enters a grant (whose owner stays).
 */
void fg_take_default_owner(struct fg_take *t);

/**
 * Takes lock t->name. Returns FG_EXIT_OK with *g filled, its lease held by
 * g->hold (caller: fg_grant_finish(), after fg_take_give_back() unless the
 * lease is handed on), or
 * the exit status after a message on stderr (FG_EXIT_NOT_OBTAINED when
 * not granted within the wait; see fg_take_status()). A signal that ends fencectl
 * arriving on sigfd (-1: none) stops it: *sig is set and 128 + *sig is
 * returned, with no grant held.
 */
int fg_take(const struct fg_conn *cl, const struct fg_take *t, int sigfd,
	    struct fg_grant *g, int *sig);

/**
 * The status to exit with after fg_take() failed with rc: -E's code in
 * place of FG_EXIT_NOT_OBTAINED when given. (fg_take() itself never
 * returns that code, which may be 0, for a lock it did not get.)
 */
int fg_take_status(const struct fg_take *t, int rc);

/**
 * Gives g's lease back, once, bounded by the client's timeout (the
 * renewer stopped first); a lease already lost is not an error. 0, or
 * the outcome's exit status; *why (buf) says what went wrong.
 */
int fg_take_give_back(struct fg_grant *g, char *why, size_t whylen);

/* The lease of a grant, held by the client library (take.c): its renewer
 * thread renews it at a third of its TTL and finds its loss. */

/** Starts the renewer thread. 0, or -1 (out of memory). */
int fg_hold_start(struct fg_hold *h);

/** Stops it (a renewal in flight ends first). */
void fg_hold_stop(struct fg_hold *h);

/** Readable when the lease may have been lost: then fg_hold_lost(). */
int fg_hold_event_fd(const struct fg_hold *h);

/** Drains the event fd; the loss in words into buf when the lease was
 *  lost (buf returned), else NULL. */
const char *fg_hold_lost(struct fg_hold *h, char *buf, size_t len);

/** Frees h, forgetting its lease (not releasing it). Accepts NULL. */
void fg_hold_free(struct fg_hold *h);

#endif
