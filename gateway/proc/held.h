/*
 * held.h - the grants made through this gateway that it has not seen
 * end, and their lease ends (the locks-held gauge and the expiries
 * counted when they happen). Private to the gateway.
 *
 * A grant is known by its lock and token, never by its lease, so the
 * table holds no secret. Invariants: the table holds at most
 * FG_HELD_MAX grants (one more is not tracked, and not counted); a grant
 * is counted as expired at most once, by the first check at or after its
 * lease's end that finds it gone; checking costs Redis at most
 * FG_HELD_CHECKS calls per maintenance period (and, with events, one
 * append per grant found gone).
 */
#ifndef FENCEGATE_HELD_H
#define FENCEGATE_HELD_H

#include <stdbool.h>
#include <stdint.h>

#include "fencegate/lock.h"

#define FG_HELD_MAX 100000
#define FG_HELD_CHECKS 256
#define FG_HELD_BUDGET_MS 250  /* of a period, for the checks */
#define FG_HELD_GRACE_MS 100   /* past the lease's end, as this gateway
				  counts it, before Redis is asked */

/* Who a grant was answered to, as its expired event shows it (NULL:
 * not known). Never a lease. */
struct fg_held_who {
	const char *principal, *owner, *client;
};

/** A grant was answered on lock `name` under `token` (any thread):
 *  new_holder when a lease joined it (a new grant, a shared join, a
 *  waiter's grant), false for a re-entry. The lease ends ttl_ms from now.
 *  who (may be NULL) is kept for a grant the table did not know: its
 *  first holder through this gateway is the one its expiry names. */
void fg_held_granted(const char *name, uint64_t token, bool new_holder,
		     uint32_t ttl_ms, const struct fg_held_who *who);
/** A renewal answered: the lease ends ttl_ms from now. */
void fg_held_renewed(const char *name, uint64_t token, uint32_t ttl_ms);
/** A holder left: a release to zero holds, or a grant given back. */
void fg_held_left(const char *name, uint64_t token);
/** The grant ended whole (a break). */
void fg_held_ended(const char *name, uint64_t token);

/** The maintenance thread: asks Redis (fg_lock_check) about the grants
 *  whose lease ended, at most FG_HELD_CHECKS of them; one found gone is
 *  counted as expired and leaves the table, one still live (renewed
 *  through another gateway, or other shared holders) is asked again a
 *  ttl later, and one Redis did not answer about, a second later. The
 *  first failure, or FG_HELD_BUDGET_MS spent, ends the round. With
 *  events, each one found gone is also recorded as an `expired` event
 *  (fg_events_add(): its lock, token and first holder's who); one Redis
 *  did not take is counted in fencegate_events_dropped_total. A grant
 *  released or broken through another gateway is found gone alike: its
 *  expired event follows that gateway's released or broken one. */
void fg_held_check_due(fg_store *st, bool events);

/** Frees the table (at the end of the process). */
void fg_held_finish(void);

#endif
