/*
 * evrec.h - a loop's recorder of the events only the gateway sees on the
 * request path (contract v1.5): a renewal told its lease is lost, a
 * fenced write refused. Private to the gateway.
 *
 * Invariants: recording never delays an answer and never waits for
 * Redis: an event is copied into the loop's buffer (base/evfold.h) and
 * the turn's events are queued on the loop's Redis connection at the end
 * of the turn (fg_aevents_add(), never awaited). Refusals are folded per
 * lock and error code per second (base/evfold.h says how): the first of a
 * second goes out at the end of its turn, the rest as one event with
 * their count when the second ends. What does not fit (the turn's
 * buffer, a second's folds) or what Redis did not take is counted in
 * fencegate_events_dropped_total, never waited for (an append Redis did
 * not take is known from fg_aevents_failed(), looked at whenever the
 * recorder sends). A loop whose events
 * setting is no has no recorder (NULL), and every call here takes NULL
 * and records nothing. On the loop's thread only.
 */
#ifndef FENCEGATE_EVREC_H
#define FENCEGATE_EVREC_H

#include "base/evfold.h"
#include "rt/rt.h"

struct fg_evrec;

/** The recorder of loop (its base, and its Redis connections, loop->as,
 *  read at each send: none once closed). NULL when out of memory. */
struct fg_evrec *fg_evrec_create(struct fg_loop *loop);

/** Frees r; what it still held is dropped (fg_evrec_flush() first).
 *  Accepts NULL. */
void fg_evrec_destroy(struct fg_evrec *r);

/** A renewal of lock `lock` was answered 410: the lease it named holds
 *  no grant. Strings may be NULL. */
void fg_evrec_lease_lost(struct fg_evrec *r, const char *lock,
			 const char *principal, const char *client);

/** A fenced write was refused (its owner answered it already). */
void fg_evrec_refused(struct fg_evrec *r, const struct fg_evrefusal *x);

/** Sends what r holds now: the turn's events and every fold, whatever
 *  its second (the loop is stopping). */
void fg_evrec_flush(struct fg_evrec *r);

#endif
