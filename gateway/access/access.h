/*
 * access.h - the access step: who a request is, and whether it may.
 * Private to the gateway.
 *
 * Like nginx's ACCESS phase, one step between reading a request and acting
 * on it: the lock API (api/locks.c, once the body is read) and the proxy (once
 * it knows every lock a request touches) both call it before any Redis
 * call, and handlers never check a right themselves. With no auth-file the
 * gateway is open and every request passes as nobody.
 */
#ifndef FENCEGATE_ACCESS_H
#define FENCEGATE_ACCESS_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "base/auth.h" /* enum fg_right */

struct fg_gateway;
struct fg_loop;
struct fg_req;
struct fg_writeset;

/** A loop's part: the table it last took, and its count of unknown keys
 *  per client address. Caller owns the result. NULL on allocation
 *  failure. */
struct fg_access *fg_access_create(struct fg_gateway *gw);
void fg_access_destroy(struct fg_access *a);

/**
 * The lock API's access step, for a call whose body has been read: what
 * it asks of the caller is its route's (req->route, base/apiroute.h).
 * True: the call goes on (req->principal names who asks, "" when open).
 * False: a 401, 403 or 429 was queued and *ret holds what to return to
 * libmicrohttpd.
 */
bool fg_access_api(struct fg_req *req, struct MHD_Connection *c,
		   enum MHD_Result *ret);

/**
 * For a call answered long after its access step (a blocked acquire's
 * grant, a long poll's answer): does the principal it was let in as
 * still hold right r on lock `name` under the table in force now? True
 * in open mode. False: a principal removed or given another credential
 * (401), or a right withdrawn (403), was answered on c, and *ret holds
 * what to return to libmicrohttpd.
 */
bool fg_access_still(struct fg_req *req, struct MHD_Connection *c,
		     enum fg_right r, const char *name, enum MHD_Result *ret);

/**
 * The proxy's, with proxy-auth required: a principal named by
 * Fence-Authorization or the client certificate, with read: (reads) or
 * lock: (writes) on the lock guarding every object the request touches
 * (ws: its write set, as fg_writeset_build() decided it). Else true at
 * once. With ws NULL (a request refused for its write set) it only
 * finds who asks, so that nobody learns the routes before a 401.
 */
bool fg_access_proxy(struct fg_req *req, struct MHD_Connection *c,
		     const char *method, const struct fg_writeset *ws,
		     enum MHD_Result *ret);

#endif
