/*
 * evring.h - the newest events a process read, in the order it read
 * them: a ring of a fixed count of items (base/evtext.h), numbered by
 * arrival. Private to the gateway; pure (no lock: proc/evfeed.c holds it
 * under its mutex), so that it is unit-tested.
 *
 * Invariants: the items held are those numbered [first, next), each
 * owned by the ring until it is pushed out; `base` is the cursor after
 * which every event the follower read is held (not set until the first
 * one came), so a reader whose position is at or after it misses
 * nothing by reading the ring alone.
 */
#ifndef FENCEGATE_EVRING_H
#define FENCEGATE_EVRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/evtext.h"

struct fg_evring {
	struct fg_evitem **slot;
	size_t cap;
	uint64_t first, next;     /* numbers held: [first, next); 1 is the first */
	struct fg_ev_cursor base;
};

/** Caller memory; cap items at most (>= 1). 0, or -1 out of memory. */
int fg_evring_init(struct fg_evring *r, size_t cap);

/** Frees every item held and the slots. */
void fg_evring_finish(struct fg_evring *r);

/** The follower starts reading after `from` (its position when it first
 *  reached Redis): every event after it will be held. Only while none
 *  came since the ring was made or reset; a cursor not set says nothing. */
void fg_evring_start(struct fg_evring *r, const struct fg_ev_cursor *from);

/** Forgets every item and where the follower was (it stopped reading):
 *  nothing is covered until it starts again. Numbers go on growing, so a
 *  number a reader or a job kept is never taken for a later item. */
void fg_evring_reset(struct fg_evring *r);

/** Adds `it` (taken), pushing the oldest out (freed) when full. */
void fg_evring_push(struct fg_evring *r, struct fg_evitem *it);

/** The item numbered n, or NULL when it is not held (pushed out, or
 *  not come yet). Valid until the next push. */
const struct fg_evitem *fg_evring_get(const struct fg_evring *r, uint64_t n);

/**
 * Does the ring hold every event after `after` that was read? On a
 * Cluster never (its streams' ids are not in the order they are read).
 */
bool fg_evring_covers(const struct fg_evring *r, const struct fg_ev_cursor *after);

/** The number of the first item of the newest run held whose cursors
 *  are all after `after` (r->next when the newest is not). */
uint64_t fg_evring_seek(const struct fg_evring *r, const struct fg_ev_cursor *after);

#endif
