/*
 * record.h - what the gateway remembers of one request for its access
 * line and its metrics. Private to the gateway.
 *
 * Invariants: a record is filled on the request's loop thread only, while
 * the request lives, closed once when it completes (fg_rec_close()) and
 * then reported once (proc/report.c);
 * it holds names, numbers and codes, never a lease, a sequencer, a key or
 * a query string, so neither the access log nor the metrics can leak one.
 */
#ifndef FENCEGATE_RECORD_H
#define FENCEGATE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "base/apiroute.h" /* enum fg_endpoint, struct fg_apiroute */

enum fg_decision {
	FG_DEC_NONE,      /* not a proxied request, or never decided */
	FG_DEC_PASS,      /* an unfenced read */
	FG_DEC_CHECKED,   /* a fenced read whose sequencers checked */
	FG_DEC_ADMITTED,  /* a write admitted and forwarded */
	FG_DEC_REFUSED,   /* refused before the upstream: rec.refusal says why */
};

struct fg_rec {
	uint64_t t0_ns;            /* monotonic, at the request line */
	struct timespec wall;      /* realtime, at the request line */
	enum fg_endpoint endpoint;
	bool proxied;
	bool s3;                   /* a proxied request in S3 mode: the
				      gateway's own answers are S3's XML
				      errors (http/respond.c) */
	char method[16];           /* "OTHER" when longer */
	char client[48];           /* the peer's address (access log only) */
	unsigned status;           /* of the answer queued; 0: none was */
	bool aborted;              /* the connection ended before the
				      answer was sent whole */
	int error;                 /* enum fg_error of the answer, or -1 */
	uint64_t bytes_in;         /* request body bytes read */
	uint64_t bytes_out;        /* response body bytes queued or sent */

	enum fg_decision decision;
	int refusal;               /* REFUSED: its enum fg_error */
	bool fenced;               /* a Fencing-Token check ran */
	uint64_t fence_t0_ns;      /* when the checks began */
	int64_t admit_ns;          /* checks to decision; -1 if none */
	/* the lock a lock call or a refusal names (a proxied request that
	 * was admitted names its write set in locks[] instead) */
	char lock[FG_NAME_MAX + 1];
	bool has_token, has_current;
	uint64_t token, current;

	bool granted;              /* a grant was answered (acquire) */
	bool brk;                  /* a DELETE that carried Fence-Break */
	enum fg_mode mode;

	int upstream_status;       /* 0: the upstream never answered */
	int64_t upstream_ns;       /* -1: no upstream transfer */

	/* Borrowed from the request, valid until it is freed (after the
	 * record was reported): the raw request-target, and who the access
	 * step found the caller to be ("" when none), and the route of a
	 * request under /_fence/ (http/front.c routes it once). */
	const char *uri;
	const char *principal;
	const struct fg_apiroute *route;
	/* A proxied request's write set once decided (the proxy notes it at
	 * completion): whether a lock of it was admitted as a write, and
	 * each lock with its token (copies: the proxy's state is freed
	 * before the record is reported). */
	bool write;
	int nlocks;
	char locks[2][FG_NAME_MAX + 1];
	uint64_t tokens[2];
};

/** Starts the record of a request whose line (`uri`, borrowed until the
 *  record is reported) was just read. */
void fg_rec_begin(struct fg_rec *r, const char *uri);

/** The record of the request whose handler runs on this thread (so that
 *  the answer writers in http/respond.c can note what they queue); NULL
 *  outside. */
void fg_rec_enter(struct fg_rec *r, const char *method);
void fg_rec_leave(void);
struct fg_rec *fg_rec_current(void);

/** An answer was queued: status, error code (-1 for none), body bytes. */
void fg_rec_answered(unsigned status, int error, size_t body_len);

/** A refusal of the fence (fence.c), with what it names. */
void fg_rec_refused(int error, const char *lock, uint64_t token,
		    bool has_current, uint64_t current);

/** The request completed (whole, or the connection ended first): what
 *  the record derives is settled — whether it was aborted, its endpoint,
 *  the body bytes of a lock call (api_body_len). Then it is reported
 *  once (proc/report.h). */
void fg_rec_close(struct fg_rec *r, bool completed_ok, size_t api_body_len);

/** Monotonic nanoseconds (durations only). */
uint64_t fg_rec_now_ns(void);

#endif
