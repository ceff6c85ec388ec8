/*
 * events.h - GET /_fence/v1/events (contract v1.5): the lock events as a
 * JSON long poll or a Server-Sent Events stream, served on the loop from
 * the process's feed (proc/evfeed.h). Private to the gateway: locks.c
 * routes the call here, loop.c tells the loop's readers when the feed
 * moved.
 */
#ifndef FENCEGATE_API_EVENTS_H
#define FENCEGATE_API_EVENTS_H

#include <microhttpd.h>

struct fg_evfeed;
struct fg_evreaders;
struct fg_loop;
struct fg_req;

/* A stream whose unsent bytes would pass this is cut off (its stream
 * ends), so that a reader that does not read costs a bounded amount. */
#define FG_SSE_BUFFER_MAX (256 * 1024)
/* An idle stream sends a comment this often. */
#define FG_SSE_KEEPALIVE_MS 15000

/** A loop's readers of the feed. NULL when out of memory. */
struct fg_evreaders *fg_evapi_create(struct fg_loop *loop, struct fg_evfeed *feed);

/** Frees them, after every request of the loop completed. Accepts NULL. */
void fg_evapi_destroy(struct fg_evreaders *rs);

/** The loop was told the feed moved (new events, history read): every
 *  reader that waits looks again. On the loop's thread. */
void fg_evapi_wake(struct fg_evreaders *rs);

/** The loop drains or stops: each long poll is answered now with what it
 *  has, each stream ends; new calls are answered 503 shutting_down.
 *  Every connection parked here is resumed. */
void fg_evapi_stop(struct fg_evreaders *rs);

/** The call (its access step passed), and again at each resume. */
enum MHD_Result fg_evapi_handle(struct fg_req *req, struct MHD_Connection *c);

/** The request completed: its reader lets go of the feed. */
void fg_evapi_finish(struct fg_req *req);

#endif
