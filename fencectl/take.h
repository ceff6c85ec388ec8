/*
 * take.h - taking a lock, waiting as long as asked.
 *
 * The gateway waits at most FG_WAIT_MAX_MS in one call; a longer wait is
 * a series of calls, each for what remains (the place in the lock's queue
 * is taken again by each). While waiting, a gateway that does not answer,
 * or answers 5xx or 429, is asked again after a back-off (250 ms, doubling
 * up to 5 s) until the wait runs out. A wait of 0 is one try.
 */
#ifndef FENCECTL_TAKE_H
#define FENCECTL_TAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "cli.h"
#include "req.h"

#define FG_WAIT_FOREVER UINT64_MAX

struct fg_take {
	const char *name;
	struct fg_acquire_args args;
	uint64_t wait_ms;	/* FG_WAIT_FOREVER: as long as it takes */
	bool confirm;		/* see fg_take() */
	bool quiet;		/* no "still trying" notes while waiting */
};

/* The options of a subcommand that takes a lock; its own follow. */
enum {
	FG_TAKE_OPT_TTL = FG_OPT_FIRST_OWN,
	FG_TAKE_OPT_WAIT,
	FG_TAKE_OPT_SHARED,
	FG_TAKE_OPT_OWNER,
	FG_TAKE_OPT_VALUE,
	FG_TAKE_OPT_LOCK_DELAY,
	FG_TAKE_OPT_END,	/* a subcommand's own options from here */
};

/* The table rows of all of them, for a subcommand that takes them all. */
#define FG_TAKE_OPTS \
	{ "ttl", 0, true, FG_TAKE_OPT_TTL }, \
	{ "wait", 0, true, FG_TAKE_OPT_WAIT }, \
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
 * Takes lock t->name. With t->confirm, a grant whose answer took longer
 * than a third of its lease is renewed at once, so that the lease's start
 * (g->valid_from_ms) is known closely; a grant lost meanwhile is asked for
 * again. Returns FG_EXIT_OK with *g filled (caller: fg_grant_finish()), or
 * the exit status after a message on stderr. A signal that ends fencectl
 * arriving on sigfd (-1: none) stops it: *sig is set and 128 + *sig is
 * returned, with no grant held.
 */
int fg_take(const struct fg_client *cl, const struct fg_take *t, int sigfd,
	    struct fg_grant *g, int *sig);

/**
 * Gives a lease back, once, bounded by the client's timeout. 0, or the
 * outcome's exit status; *why (buf) says what went wrong.
 */
int fg_give_back(const struct fg_client *cl, const char *name,
		 const char *lease, char *why, size_t whylen);

#endif
