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
#include "base/s3ops.h"
#include "base/sigv4.h"

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
 * For a call that shows many locks' changes long after its access step
 * (the events' long poll and stream): the principal it was let in as,
 * under the table in force now, in *p (NULL in open mode: every lock is
 * shown). False when that principal was removed or given another
 * credential meanwhile; the caller then shows nothing more. Whether p
 * may observe a lock is fg_principal_may(p, FG_RIGHT_OBSERVE, name).
 */
bool fg_access_now(struct fg_req *req, const struct fg_principal **p);

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

/* The store's credentials a request is signed with upstream: the
 * principal's own (the fourth field of its s3-credentials line), else the
 * gateway's (upstream-s3-credentials). Copies, wiped with the part. */
#define FG_S3_STREAMING_PAYLOAD "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define FG_S3_HEADERS_MAX 128 /* headers of an S3 request the gateway reads */

struct fg_s3_store_creds {
	char key_id[FG_SIGV4_KEY_ID_MAX + 1];
	char secret[FG_SIGV4_SECRET_MAX + 1];
	char token[FG_SIGV4_TOKEN_MAX + 1];
	bool has_token;
	/* a streaming-signed body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): the
	 * client's signing key its chunks are checked with */
	bool has_client_key;
	unsigned char client_key[32];
};

/**
 * S3 mode's access step for a proxied request, before its write set is
 * known: its AWS Signature Version 4 (Authorization header or presigned
 * query) verified against s3-credentials, with S3's own errors (403
 * AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch,
 * RequestTimeTooSkewed; 400 InvalidRequest, AuthorizationHeaderMalformed,
 * AuthorizationQueryParametersError); unknown keys and bad signatures
 * spend the address' budget as unknown bearer keys do. Then the key's
 * principal under auth-file (one it does not name: 403 AccessDenied);
 * with no auth-file a verified key may read and write. True with *auth
 * (its session token included) and the store's credentials to sign with
 * in *up; false with the answer queued and *ret set.
 */
bool fg_access_s3(struct fg_req *req, struct MHD_Connection *c,
		  struct fg_sigv4_auth *auth, struct fg_s3_store_creds *up,
		  enum MHD_Result *ret);

/**
 * S3 mode: may the principal fg_access_s3() found do what the request
 * does: lock: on each lock it changes, read: on each it reads (a copy
 * source), read: on the object's lock for a read of one, and for a
 * listing of a bucket read: on the bucket (its route lock, else every
 * lock whose name starts with "BUCKET/"). True in open mode. False: 403
 * AccessDenied naming the missing right was queued, *ret set.
 */
bool fg_access_s3_may(struct fg_req *req, struct MHD_Connection *c,
		      const struct fg_s3_req *r, const struct fg_s3_locks *locks,
		      enum MHD_Result *ret);

#endif
