/*
 * admitq.h - a loop's fenced writes waiting for the writes admitted under
 * older tokens to end (the contract's admission wait). Private to the
 * proxy; separate from the lock API's waiters (lockwait/).
 *
 * A waiting write is created by the request whose admit call answered
 * "wait", parked (its connection suspended, rt/park.h), and asks Redis
 * again only when what it waits on changes: a write of its lock ended
 * ("w <lock>" on the loop's channel, fg_admitq_wake()), or the record it
 * waits behind reached its recorded end (its timer). It completes exactly
 * once — admitted, refused, store unavailable, client gone — and its
 * connection resumes; the request goes on from the result. Everything
 * runs on the loop's thread.
 */
#ifndef FENCEGATE_ADMITQ_H
#define FENCEGATE_ADMITQ_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"

struct fg_loop;
struct fg_admitq;
struct fg_admission;

enum fg_admission_result {
	FG_ADMISSION_PENDING = 0,
	FG_ADMISSION_ADMITTED, /* the write may go (deadline in the result) */
	FG_ADMISSION_REFUSED,  /* stale, expiring or forged (in the result) */
	FG_ADMISSION_UNAVAIL,  /* Redis could not be asked */
	FG_ADMISSION_STOPPING, /* the gateway is shutting down */
	FG_ADMISSION_GONE,     /* the client went away */
};

/** The loop's waiting writes; they call Redis on the loop's connections
 *  `as` (lent by the loop) and park on `loop`. NULL when out of memory.
 *  Caller owns the result. */
struct fg_admitq *fg_admitq_create(struct fg_loop *loop, fg_astore *as);

/** Completes every parked write with FG_ADMISSION_STOPPING (resuming its
 *  connection); later parks complete so at once. Before the loop's Redis
 *  connection closes. */
void fg_admitq_stop(struct fg_admitq *aq);

/** The loop closed its Redis connections (after fg_admitq_stop()):
 *  nothing more is sent. */
void fg_admitq_store_closed(struct fg_admitq *aq);

/** Frees; after the loop's Redis connection closed (its calls answered)
 *  and HTTP stopped. Accepts NULL. */
void fg_admitq_destroy(struct fg_admitq *aq);

/** A fenced write under `token` of lock `name`, waiting until the writes
 *  admitted under older tokens are over; the request holds it until
 *  fg_admitq_drop(). NULL when out of memory. */
struct fg_admission *fg_admitq_new(struct fg_admitq *aq, const char *name,
				   uint64_t token, const char *write_id,
				   uint32_t margin_ms, uint32_t longest_ms);

/**
 * Parks the connection until the write is admitted or refused. wake_in_ms:
 * when the record it waits behind ends (the admit reply's time). Returns
 * false, and does not suspend, when it cannot park (the queue stops:
 * FG_ADMISSION_STOPPING; out of memory: FG_ADMISSION_UNAVAIL); the caller
 * answers at once.
 */
bool fg_admitq_park(struct fg_admission *ad, struct MHD_Connection *c,
		    int64_t wake_in_ms);

/** The result; *out is the last admit reply, and when admitted
 *  *deadline_at is the write's send deadline (monotonic ms, counted from
 *  when the admitting call was sent). */
enum fg_admission_result fg_admitq_result(const struct fg_admission *ad,
					  struct fg_admit *out,
					  uint64_t *deadline_at);

/** The request lets go of the write (answered, or request completed).
 *  Accepts NULL. */
void fg_admitq_drop(struct fg_admission *ad);

/** "w <lock>" on the loop's channel: a write of the lock ended; its
 *  waiting writes ask again. */
void fg_admitq_wake(struct fg_admitq *aq, const char *name);

/** The subscriber reconnected: wake messages may have been lost; every
 *  waiting write asks again. */
void fg_admitq_resync(struct fg_admitq *aq);

#endif
