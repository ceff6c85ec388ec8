/*
 * fence.h - which lock guards a path, and the checks a fenced request must
 * pass before any byte of it goes upstream. Private to the gateway.
 */
#ifndef FENCEGATE_FENCE_H
#define FENCEGATE_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "config.h"

struct fg_req;

enum fg_fence_verdict {
	FG_FENCE_PASS,     /* an unfenced read, or a fenced read that checked */
	FG_FENCE_ADMITTED, /* a write admitted: forward it before its deadline */
	FG_FENCE_WAIT,     /* a write that waits for older writes to end */
	FG_FENCE_ANSWERED, /* refused: the error answer is queued */
};

struct fg_fence {
	bool write;
	char lock[FG_NAME_MAX + 1];
	uint64_t token;
	char write_id[FG_WAITER_ID_MAX];
	int64_t ms;   /* WAIT: ask again within this many ms */
	uint64_t deadline_at; /* ADMITTED: monotonic ms, counted from when the
				 admission was asked for */
};

/**
 * The lock guarding a raw request path: the path is percent-decoded and
 * resolved as the storage will (repeated slashes merged, "." and ".."
 * removed); then the longest route prefix that matches it, else the path
 * itself without its leading and trailing '/'. 0, or -1 when that is no
 * valid lock name (or ".." climbs above the root).
 */
int fg_fence_lock_for(const struct fg_config *cfg, const char *raw_path,
		      size_t len, char out[FG_NAME_MAX + 1]);

/** Must the method be fenced? The configured writes, and every method
 *  that is not a configured read. */
bool fg_fence_is_write(const struct fg_config *cfg, const char *method);

/**
 * Runs the contract's checks, in the contract's order: token present,
 * parseable and single, HMAC, token not beyond any issued, the path's
 * lock, the mode, then (one Redis round trip) the live grant and the
 * ordering of writes. A refusal is answered here and logged with lock,
 * token and current token.
 */
enum fg_fence_verdict fg_fence_check_or_respond(struct fg_req *req,
						struct MHD_Connection *c,
						const char *method,
						struct fg_fence *out);

/** Answers a write whose admission, after waiting, was refused. */
/** Monotonic milliseconds (the gateway's clock for write deadlines). */
uint64_t fg_fence_now_ms(void);

enum MHD_Result fg_fence_refused(struct MHD_Connection *c, const char *method,
				 const char *path, const struct fg_fence *f,
				 const struct fg_admit *a);

#endif
