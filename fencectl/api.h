/*
 * api.h - the lock API's request bodies and the grant it answers with.
 *
 * The one place that knows the field names of the JSON the gateway reads
 * and writes (docs/api.md); subcommands and the supervisor go through it.
 */
#ifndef FENCECTL_API_H
#define FENCECTL_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "req.h"

struct fg_hold;

/* The contract's bounds (docs/api.md, Limits). */
#define FG_TTL_MIN_MS 100
#define FG_TTL_MAX_MS 3600000
#define FG_WAIT_MAX_MS 300000	/* one call; fencectl waits longer by asking again */
#define FG_LOCK_DELAY_MAX_MS 3600000

struct fg_acquire_args {
	uint64_t ttl_ms;		/* 0: the gateway's default */
	bool shared;
	const char *owner;		/* NULL: none */
	const char *value;		/* NULL: none */
	const char *lease;		/* re-entry; NULL: a new grant */
	int64_t lock_delay_ms;		/* -1: the gateway's default */
};

/** A grant, read from an acquire's 200 answer. */
struct fg_grant {
	json_t *answer;		/* the whole answer (owned) */
	const char *name;	/* these point into answer */
	const char *lease;
	const char *sequencer;
	const char *mode;
	uint64_t token;
	uint64_t ttl_ms;
	struct fg_hold *hold;	/* the lease as the client library holds it
				 * (take.h; owned); NULL: none */
};

/** Acquire body asking to wait wait_ms. NULL when out of memory; caller
 *  owns it (json_decref). */
json_t *fg_api_acquire_body(const struct fg_acquire_args *a, uint64_t wait_ms);

/** Renew body; ttl_ms 0 and value NULL leave those out. NULL when out of
 *  memory; caller owns it. */
json_t *fg_api_renew_body(const char *lease, uint64_t ttl_ms,
			  const char *value);

/** Frees what g holds (its lease forgotten, not released); accepts a
 *  zeroed g. */
void fg_grant_finish(struct fg_grant *g);

#endif
