/*
 * waitq.h - a loop's waiters: blocked acquires, observers and writes
 * waiting for admission, with no thread each. Private to the gateway.
 *
 * A waiter is created by a request, registered under its id *before* the
 * acquire script can hand it the lock (so the grant message always finds
 * it), and then either dropped (answered at once) or parked (its
 * connection suspended). The loop completes a parked waiter exactly once —
 * granted, timed out, store unavailable, client gone, or observed — and
 * resumes its connection; the request answers from the result. Everything
 * runs on the loop's thread.
 */
#ifndef FENCEGATE_WAITQ_H
#define FENCEGATE_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"

struct fg_loop;
struct fg_waitq;
struct fg_waiter;

enum fg_wait_result {
	FG_WAIT_PENDING = 0,
	FG_WAIT_GRANTED,   /* acquire: the grant is in the waiter */
	FG_WAIT_TIMEOUT,   /* acquire: wait_ms passed */
	FG_WAIT_UNAVAIL,   /* Redis could not be asked, or shutting down */
	FG_WAIT_GONE,      /* the client went away */
	FG_WAIT_OBSERVED,  /* observe: the lock's state is in the waiter */
	FG_WAIT_ADMITTED,  /* admit: the write may go (deadline in the waiter) */
	FG_WAIT_REFUSED,   /* admit: stale, expiring or forged (in the waiter) */
};

/** The loop's waiters and its Redis connections (commands, and the
 *  subscription to the loop's channel, whose messages go to on_message:
 *  the loop routes them, some back to fg_waitq_message()). NULL on
 *  failure. Caller owns the result. */
struct fg_waitq *fg_waitq_create(struct fg_loop *loop,
				 fg_message_cb *on_message,
				 fg_resync_cb *on_resync, void *arg);

/** The loop's asynchronous Redis connection (owned by the queue). */
fg_astore *fg_waitq_store(struct fg_waitq *wq);

/** Completes every parked waiter with FG_WAIT_UNAVAIL (resuming its
 *  connection); later parks are refused. The memory stays valid for
 *  requests still finishing. */
void fg_waitq_stop(struct fg_waitq *wq);

/** Stops, then closes the Redis connections: every call in flight is
 *  answered FG_EUNAVAIL now. */
void fg_waitq_close_store(struct fg_waitq *wq);

/** Frees; call once no request can touch the queue (HTTP stopped).
 *  Accepts NULL. */
void fg_waitq_destroy(struct fg_waitq *wq);

/** A blocked acquire of `name`; the worker holds the one reference. */
struct fg_waiter *fg_waiter_acquire(struct fg_waitq *wq, const char *name,
				    const char *lease, enum fg_mode mode,
				    uint32_t ttl_ms, uint32_t wait_ms);

/** An observer of `name` that answers when (held, token) differs from
 *  what is given, or after wait_ms. */
struct fg_waiter *fg_waiter_observe(struct fg_waitq *wq, const char *name,
				    uint32_t wait_ms, bool held,
				    bool has_token, uint64_t token);

/** A fenced write waiting until the writes admitted under older tokens
 *  are over; the loop asks Redis again until it is admitted or refused. */
struct fg_waiter *fg_waiter_admit(struct fg_waitq *wq, const char *name,
				  uint64_t token, const char *write_id,
				  uint32_t margin_ms, uint32_t longest_ms);

/** The admission result of an admit waiter; when admitted, *deadline_at
 *  is the write's send deadline (monotonic ms, counted from when the
 *  admitting call was sent). */
void fg_waiter_admission(const struct fg_waiter *w, struct fg_admit *out,
			 uint64_t *deadline_at);

/** A message on the loop's channel or on a lock's event channel (msg
 *  NULL: the subscription was confirmed). */
void fg_waitq_message(struct fg_waitq *wq, const char *chan, const char *msg,
		      size_t len);

/** The subscriber reconnected: grant and wake messages may have been
 *  lost; every waiter asks Redis again. */
void fg_waitq_resync(struct fg_waitq *wq);

/** Gives back a grant whose answer never reached its client, from the
 *  loop: a fresh lease (and its waiter) wholly, until Redis answers
 *  (fg_alock_give_back()); a re-entry's one hold, by a release. */
void fg_waitq_give_back(struct fg_waitq *wq, const char *name,
			const char *lease, const char *waiter_id,
			bool reentry);

const char *fg_waiter_id(const struct fg_waiter *w);

/**
 * Suspends the connection and hands the waiter to the loop. Returns false
 * (and does not suspend) when the waiter was already completed, so the
 * caller answers at once. wake_in_ms: when the lock may change hands by
 * itself (-1: not by itself).
 */
bool fg_waiter_park(struct fg_waitq *wq, struct fg_waiter *w,
		    struct MHD_Connection *c, int64_t wake_in_ms);

/** The result; for GRANTED *g, for OBSERVED *info (owned by the waiter). */
enum fg_wait_result fg_waiter_result(struct fg_waiter *w, struct fg_grant *g,
				     const struct fg_lock_info **info);

/** The worker lets go of its reference (request completed). */
void fg_waiter_drop(struct fg_waitq *wq, struct fg_waiter *w);

#endif
