/*
 * fence.h - the checks a fenced request must pass before any byte of it
 * goes upstream, for every lock of its write set. Private to the gateway.
 */
#ifndef FENCEGATE_FENCE_H
#define FENCEGATE_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "fencegate/sequencer.h"
#include "base/config.h"
#include "base/writeset.h"

struct fg_req;
struct fg_loop;

enum fg_fence_verdict {
	FG_FENCE_PASS,     /* an unfenced read, or a fenced read that checked */
	FG_FENCE_ADMITTED, /* a write admitted: forward it before its deadline */
	FG_FENCE_WAIT,     /* a write that waits for older writes to end */
	FG_FENCE_ANSWERED, /* refused: the error answer is queued */
	FG_FENCE_PENDING,  /* a Redis call is in flight; the connection is
			      suspended until its answer: call
			      fg_fence_resume_or_respond() then */
};

/* One lock of the write set, once its sequencer checked. */
struct fg_fence_lock {
	char lock[FG_NAME_MAX + 1];
	uint64_t token;
	bool write;            /* admitted as a write (else a fenced read) */
	bool admitted;         /* holds an admission record under write_id */
	uint64_t deadline_at;  /* admitted: monotonic ms, counted from when the
				  admission was asked for */
};

struct fg_fence {
	bool write;             /* some lock is admitted as a write */
	int n;
	struct fg_fence_lock m[2];
	/* the checks in progress, one Redis call at a time (fence.c) */
	struct fg_ws_member ws[2];
	int nws;
	const char *value[2];   /* each header's sequencer, when single */
	unsigned count[2];      /* how many of each header came */
	int stage, i;
	bool busy;              /* a call is in flight: the request waits */
	bool replied;           /* its answer is in (err, chk or adm) */
	int err;
	struct fg_check chk;
	struct fg_admit adm;
	uint64_t asked;         /* when the admit call was sent */
	struct fg_seq seq;      /* a sequencer whose token may be forged */
	int refusal;            /* what it is refused for if not forged */
	char write_id[FG_WAITER_ID_MAX]; /* one id for every admission */
	int waiting;            /* WAIT: the member that waits */
	int64_t ms;             /* WAIT: ask again within this many ms */
	uint64_t deadline_at;   /* ADMITTED: the earliest member deadline */
};

/**
 * Runs the contract's checks, in the contract's order, on every member of
 * the write set: token present, parseable and single, HMAC, token not
 * beyond any issued, the member's lock, the mode; then (one Redis round
 * trip per member) the live grant and the ordering of writes. A refusal
 * is answered here and logged with lock, token and current token.
 */
enum fg_fence_verdict fg_fence_check_or_respond(struct fg_req *req,
						struct MHD_Connection *c,
						const char *method,
						const struct fg_writeset *ws,
						struct fg_fence *out);

/** The answer of the call a PENDING verdict waited for is in: go on. */
enum fg_fence_verdict fg_fence_resume_or_respond(struct fg_req *req,
						 struct MHD_Connection *c,
						 const char *method);

/**
 * After member f->waiting was admitted by the wait loop (deadline_at set),
 * admits the other write members again. ADMITTED, WAIT (f->waiting and
 * f->ms name the next wait; what was admitted is given back) or ANSWERED.
 */
enum fg_fence_verdict fg_fence_admit_rest_or_respond(struct fg_req *req,
						     struct MHD_Connection *c,
						     const char *method,
						     struct fg_fence *f);

/** The first member admitted as a write (the one a forwarded token and a
 *  refusal name), or NULL for a fenced read. */
const struct fg_fence_lock *fg_fence_first_write(const struct fg_fence *f);

/** Gives back every admission the fence holds (the write is over). */
void fg_fence_finish(struct fg_loop *loop, struct fg_fence *f);

/** Answers a write whose admission of member i was refused. */
enum MHD_Result fg_fence_refused(struct MHD_Connection *c, const char *method,
				 const char *path, const struct fg_fence *f,
				 int i, const struct fg_admit *a);

#endif
