/*
 * metrics.h - the gateway's Prometheus metrics: process-wide counters,
 * histograms and gauges, rendered in the text exposition format at
 * GET /_fence/v1/metrics. Private to the gateway.
 *
 * Invariants: every label set is bounded and fixed in code (routes,
 * status codes, refusal codes, script names, status classes), never a
 * lock name, a path or anything else a client chose; updates are relaxed
 * atomic adds from any thread, and never block.
 */
#ifndef FENCEGATE_METRICS_H
#define FENCEGATE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "base/record.h"

struct fg_gateway;

enum fg_gauge {
	FG_GAUGE_WAIT_ACQUIRE,   /* blocking acquires parked */
	FG_GAUGE_WAIT_OBSERVE,   /* observes (inspect long polls) parked */
	FG_GAUGE_WAIT_ADMIT,     /* writes waiting for older writes to end */
	FG_GAUGE_TRANSFERS,      /* upstream transfers in flight */
	FG_GAUGE_HELD,           /* holders granted here, not seen to end */
	FG_GAUGE_EVENT_READERS,  /* readers of the events: streams, long polls */
	FG_GAUGE_COUNT,
};

/** Marks the start of the process (fencegate_start_time_seconds). */
void fg_metrics_init(void);

/** A request completed: its route, its status (0: none was sent) and
 *  how long it took; the bytes of its bodies. */
void fg_metrics_request(enum fg_endpoint r, unsigned status, uint64_t ns,
			uint64_t bytes_in, uint64_t bytes_out);

void fg_metrics_grant(enum fg_mode mode);
void fg_metrics_renewal(void);
void fg_metrics_release(void);
/** A holder came back (renew, release) to a lease that had run out. */
void fg_metrics_expiry(void);
/** n holders of a grant made here were found, at their lease's end, to
 *  have run out (proc/held.c). */
void fg_metrics_lock_expired(unsigned n);
/** n events this gateway saw were not recorded (a full buffer or fold
 *  table, an append Redis did not take). */
void fg_metrics_events_dropped(uint64_t n);

/** A fenced request was decided: admitted (a write, or a fenced read
 *  that checked) or refused for `refusal` (enum fg_error), after `ns`
 *  of checks and waiting for older writes. */
void fg_metrics_fence(bool admitted, bool write, int refusal, uint64_t ns);

/** An upstream transfer ended: the upstream's status (0: no answer) and
 *  its duration. */
void fg_metrics_upstream(int status, uint64_t ns);

/** fg_giveback_observer of every loop (arg unused): counts each one. */
void fg_metrics_given_back(void *arg, unsigned reason, bool undone);
/** fg_script_observer for the Redis calls of every loop (arg unused). */
void fg_metrics_script(void *arg, unsigned script, int err, uint64_t ns);

enum fg_auth_refusal {
	FG_AUTH_UNAUTHENTICATED,  /* 401 */
	FG_AUTH_FORBIDDEN,        /* 403 */
	FG_AUTH_THROTTLED,        /* 429: too many unknown keys */
	FG_AUTH_REFUSAL_COUNT,
};
/** A request the access step (or a lease's owner check) refused. */
void fg_metrics_auth_refused(enum fg_auth_refusal why);

void fg_metrics_gauge_add(enum fg_gauge g, int delta);

/** An events stream was cut off: its unsent bytes passed the bound. */
void fg_metrics_event_reader_cut(void);

/** A long poll of the lock API ended after ns: a blocking acquire, or an
 *  observe when observe_call. */
void fg_metrics_wait_done(bool observe_call, uint64_t ns);

/**
 * Renders every metric in the text exposition format (version 0.0.4).
 * Caller owns the result (free()); NULL when out of memory.
 */
char *fg_metrics_render(struct fg_gateway *gw, size_t *len);

#endif
