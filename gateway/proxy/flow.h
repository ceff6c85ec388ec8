/*
 * flow.h - the fencing proxy: every request outside /_fence/, checked,
 * admitted and forwarded (the transfer itself is upstream/xfer.h, the
 * running writes proxy/writes.h). Private to the gateway.
 */
#ifndef FENCEGATE_PROXY_FLOW_H
#define FENCEGATE_PROXY_FLOW_H

#include <microhttpd.h>

#include "fencegate/lock.h"

struct event_base;
struct fg_admitq;
struct fg_gateway;
struct fg_loop;
struct fg_req;
struct fg_proxy;

/** The loop's proxy: its transfers (a libcurl multi handle on `base`)
 *  and its running writes. Its Redis calls go on the loop's connections
 *  `as`, its waiting writes to the loop's queue `aq` (both lent by the
 *  loop); `loop` resumes its connections and gives its write ids. NULL
 *  on failure. */
struct fg_proxy *fg_proxy_create(struct fg_loop *loop, struct event_base *base,
				 struct fg_gateway *gw, fg_astore *as,
				 struct fg_admitq *aq);

/** The gateway stops with fenced writes still running: each is ended as
 *  at its grant's end (fg_writes_end_all()), so nothing partial lands.
 *  Returns how many. */
unsigned fg_proxy_end_writes(struct fg_proxy *px);

/** Ends every transfer (their connections are resumed and answered). */
void fg_proxy_shutdown(struct fg_proxy *px);

/** The loop closed its Redis connections: nothing more is sent. */
void fg_proxy_store_closed(struct fg_proxy *px);

/** Ends every transfer and frees. Call after HTTP has stopped. Accepts
 *  NULL. */
void fg_proxy_destroy(struct fg_proxy *px);

/** The access handler for every request outside /_fence/. */
enum MHD_Result fg_proxy_handle(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *upload,
				size_t *upload_size);

/** The grant of a fenced write was released: its transfer is aborted
 *  upstream at once, or never started if it was not begun yet. */
void fg_proxy_abort_write(struct fg_proxy *px, const char *write_id);
/** The running write's grant now ends in ends_in_ms (its lease got
 *  shorter): its deadline is moved to that less the margin at once, and
 *  asked for again (from the loop's message handler). */
void fg_proxy_reask_write(struct fg_proxy *px, const char *write_id,
			  long long ends_in_ms);

/** Asks Redis again, now, whether every running write's grant still
 *  holds (the subscriber reconnected: an abort message may be lost); a
 *  write whose grant ended is aborted. */
void fg_proxy_recheck_writes(struct fg_proxy *px);

/** The request ended (completed, or the client went away): its record
 *  takes what the fence decided and what the transfer knows (upstream
 *  status, duration, bytes sent); an upstream request still running is
 *  aborted, an admission wait let go. */
void fg_proxy_finish(struct fg_req *req);

#endif
