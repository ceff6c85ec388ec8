/*
 * waitq.h - a loop's lock waiters: blocked acquires and observers, with
 * no thread each. Private to the gateway.
 *
 * A waiter is created by a request, registered under its id *before* the
 * acquire script can hand it the lock (so the grant message always finds
 * it), and then either dropped (answered at once) or parked (its
 * connection suspended, rt/park.h). The loop completes a parked waiter
 * exactly once — granted, timed out, store unavailable, client gone, or
 * observed — and resumes its connection; the request answers from the
 * result. Everything runs on the loop's thread.
 */
#ifndef FENCEGATE_WAITQ_H
#define FENCEGATE_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"

struct event_base;
struct fg_gateway;
struct fg_loop;
struct fg_waitq;
struct fg_waiter;

enum fg_wait_result {
	FG_WAIT_PENDING = 0,
	FG_WAIT_GRANTED,   /* acquire: the grant is in the waiter */
	FG_WAIT_TIMEOUT,   /* acquire: wait_ms passed */
	FG_WAIT_UNAVAIL,   /* Redis could not be asked */
	FG_WAIT_STOPPING,  /* the gateway is shutting down (fg_waitq_stop()) */
	FG_WAIT_GONE,      /* the client went away */
	FG_WAIT_OBSERVED,  /* observe: the lock's state is in the waiter */
	FG_WAIT_LOST,      /* acquire: Redis no longer knows the waiter
			      (a restart or failover lost its place) */
};

/** The loop's waiters, calling Redis on the loop's connections `as`
 *  (the loop's, lent: it subscribes to the loop's channel and hands its
 *  messages on, some to fg_waitq_message()). `loop` gives the waiters
 *  their ids and parks their connections. NULL on failure. Caller owns
 *  the result. */
struct fg_waitq *fg_waitq_create(struct fg_loop *loop, struct event_base *base,
				 struct fg_gateway *gw, fg_astore *as);

/** Completes every parked waiter with FG_WAIT_STOPPING (resuming its
 *  connection); a blocked acquire leaves the lock's queue in Redis (a
 *  grant that came meanwhile goes back). Later parks complete
 *  FG_WAIT_STOPPING at once. The memory stays valid for requests still
 *  finishing. */
void fg_waitq_stop(struct fg_waitq *wq);

/** The loop closed its Redis connections (after fg_waitq_stop(); the
 *  calls in flight were answered FG_EUNAVAIL): nothing more is sent. */
void fg_waitq_store_closed(struct fg_waitq *wq);

/** Frees; call once no request can touch the queue (HTTP stopped).
 *  Accepts NULL. */
void fg_waitq_destroy(struct fg_waitq *wq);

/** A blocked acquire of `name`; the request holds it until
 *  fg_waiter_drop(). NULL when out of memory. */
struct fg_waiter *fg_waiter_acquire(struct fg_waitq *wq, const char *name,
				    const char *lease, enum fg_mode mode,
				    uint32_t ttl_ms, uint32_t wait_ms);

/** An observer of `name` that answers when (held, token) differs from
 *  what is given, or after wait_ms. */
struct fg_waiter *fg_waiter_observe(struct fg_waitq *wq, const char *name,
				    uint32_t wait_ms, bool held,
				    bool has_token, uint64_t token);

/** A message on the loop's channel (a grant, "t <ms> <lock>") or on a
 *  lock's event channel (msg NULL: the subscription was confirmed). */
void fg_waitq_message(struct fg_waitq *wq, const char *chan, const char *msg,
		      size_t len);

/** The subscriber reconnected: grant and wake messages may have been
 *  lost; every waiter asks Redis again. */
void fg_waitq_resync(struct fg_waitq *wq);

/** Gives back a grant whose answer never reached its client, from the
 *  loop: a fresh lease (and its waiter) wholly, until Redis answers
 *  (fg_alock_give_back()); a re-entry by its undo id (fg_alock_undo():
 *  its hold, expiry, value and owner), or without one its one hold, by a
 *  release. */
void fg_waitq_give_back(struct fg_waitq *wq, const char *name,
			const char *lease, const char *waiter_id,
			bool reentry, const char *undo_id);

const char *fg_waiter_id(const struct fg_waiter *w);

/**
 * Parks the connection (rt/park.h) and hands the waiter to the loop until
 * it completes. Returns false, and does not suspend, when the waiter is
 * complete already (granted before it parked) or cannot park (the queue
 * stops: FG_WAIT_STOPPING; out of memory: FG_WAIT_UNAVAIL); the caller
 * answers at once.
 * wake_in_ms: when the lock may change hands by itself (-1: not by
 * itself).
 */
bool fg_waiter_park(struct fg_waitq *wq, struct fg_waiter *w,
		    struct MHD_Connection *c, int64_t wake_in_ms);

/** The result; for GRANTED *g, for OBSERVED *info (owned by the waiter). */
enum fg_wait_result fg_waiter_result(struct fg_waiter *w, struct fg_grant *g,
				     const struct fg_lock_info **info);

/** A blocked acquire that Redis queued but which never parked (its
 *  client left before the answer "queued" was acted on): its place in
 *  the queue, or a grant it was handed meanwhile, goes back now rather
 *  than when its liveness runs out. Nothing for a waiter that parked,
 *  completed, or is an observer. */
void fg_waiter_leave(struct fg_waitq *wq, struct fg_waiter *w);

/** The request lets go of the waiter (request completed). Accepts NULL. */
void fg_waiter_drop(struct fg_waitq *wq, struct fg_waiter *w);

#endif
