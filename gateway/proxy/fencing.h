/*
 * fencing.h - runs the fence's check table (fence/fence.h) for a proxied
 * request: its headers in, its Redis calls out, its refusals answered and
 * logged. Private to the gateway.
 */
#ifndef FENCEGATE_PROXY_FENCING_H
#define FENCEGATE_PROXY_FENCING_H

#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "base/writeset.h"
#include "fence/fence.h"

struct fg_req;
struct fg_loop;

/* Where a request's fencing stands once a call returns. */
enum fg_fencing {
	FG_FENCING_PASS,     /* an unfenced read, or a fenced read that checked */
	FG_FENCING_ADMITTED, /* a write admitted: forward it before
				req->fence.deadline_at */
	FG_FENCING_WAIT,     /* a write that waits for older writes to end:
				member fence.waiting, within fence.ms; it
				holds no admission meanwhile */
	FG_FENCING_ANSWERED, /* refused, or the lock store failed: the error
			        answer is queued and nothing is held */
	FG_FENCING_PENDING,  /* a Redis call is in flight; the connection is
				suspended until its answer resumes it: call
				fg_fencing_resume() then */
};

/**
 * Reads the request's Fencing-Token and Destination-Fencing-Token headers
 * and runs the table on the write set `ws` into req->fence (which it
 * resets), as far as it goes without waiting for Redis.
 */
enum fg_fencing fg_fencing_start(struct fg_req *req, struct MHD_Connection *c,
				 const char *method, const struct fg_writeset *ws);

/** The request was resumed while fg_fence_calling(&req->fence): goes on
 *  with the call's answer (PENDING again if it is not in: resumed for
 *  another reason). */
enum fg_fencing fg_fencing_resume(struct fg_req *req, struct MHD_Connection *c,
				  const char *method);

/** After WAIT: the wait loop admitted member fence.waiting, with this
 *  deadline (monotonic ms); admits the other write members again. */
enum fg_fencing fg_fencing_wait_admitted(struct fg_req *req,
					 struct MHD_Connection *c,
					 const char *method,
					 uint64_t deadline_at);

/** After WAIT: the wait loop's admission was refused (a); answers and
 *  logs the refusal. Returns the answer's result. */
enum MHD_Result fg_fencing_wait_refused(struct fg_req *req,
					struct MHD_Connection *c,
					const char *method,
					const struct fg_admit *a);

/** Gives back every admission the fence holds (the write is over, or it
 *  was never started). */
void fg_fencing_finish(struct fg_loop *loop, struct fg_fence *f);

#endif
