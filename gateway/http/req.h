/*
 * req.h - one HTTP request's state, from its request line to its
 * completion. Private to the gateway.
 *
 * The front (front.c) owns it; the lock API (api/) and the proxy (proxy/)
 * keep their own parts of it, the proxy behind one pointer.
 */
#ifndef FENCEGATE_REQ_H
#define FENCEGATE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "base/apiroute.h"
#include "base/auth.h"
#include "base/record.h"

/* An API request body's bound. */
#define FG_BODY_MAX (64 * 1024)

struct fg_gateway;
struct fg_loop;
struct fg_waiter;
struct fg_api_call;
struct fg_flow;
struct fg_evreader;

/* Per-request state, allocated when the request line is read and freed in
 * the request-completed callback (front.c), never anywhere else. What the
 * lock API and the proxy keep of it hangs off it, each freed by its route's
 * finish (front.h). */
struct fg_req {
	struct fg_gateway *gw;
	struct fg_loop *loop;      /* the loop that accepted it, for its life */
	struct MHD_Connection *conn;
	char *uri;                 /* the request-target as sent, in origin
				      form (an absolute-form target's path
				      and query: front.c) */
	char *target_host;         /* an absolute-form target's authority,
				      which stands for Host (RFC 9112
				      3.2.2), or NULL; freed with req */
	const char *uri_at;        /* where libmicrohttpd holds it (framing.c) */
	size_t uri_len;
	struct fg_apiroute route;  /* under /_fence/: what the request is,
				      routed once (front.c) and read by the
				      record, the access step and the API */
	bool started;
	bool framed;               /* framing.c accepted the request head */
	bool refused;              /* framing.c answered 400: drop the rest */
	bool body_chunked;         /* the body is chunked (else body_length) */
	uint64_t body_length;      /* Content-Length, 0 without a body */
	bool body_length_given;    /* a Content-Length header came */
	bool granted;              /* a grant of name/lease was answered */
	bool reentry;              /* an acquire with the client's own lease */
	bool over;                 /* the body passed FG_BODY_MAX */
	char *body;                /* NUL-terminated when complete */
	size_t body_len;
	struct fg_waiter *waiter;  /* a blocking acquire or observe */
	char name[FG_NAME_MAX + 1];  /* the lock it waits on */
	char lease[FG_LEASE_LEN + 1]; /* the lease it waits to get */
	struct fg_flow *flow;      /* a proxied request's life (proxy/flow.h):
				      owned by the proxy, freed when it
				      finishes the request */
	struct fg_api_call *call;  /* a lock API call's life (api/locks.c):
				      owned by the API, freed when it
				      finishes the request */
	struct fg_evreader *events; /* GET /_fence/v1/events (api/events.c):
				      its reader, let go when the API
				      finishes the request */
	char principal[FG_PRINCIPAL_MAX + 1]; /* who the access step found
				      it to be; "" in open mode or when none
				      was named (a copy: the auth table may
				      be replaced on SIGHUP meanwhile) */
	struct fg_principal_id pid; /* the same with its credential, when */
	bool has_pid;              /* the access step found one */
	struct fg_rec rec;         /* for the access log and the metrics */
};

/* The authority the client asked for: an absolute-form target's, else
 * its Host header (NULL: none). */
static inline const char *fg_req_host(const struct fg_req *req,
				      struct MHD_Connection *c)
{
	return req->target_host ? req->target_host
		: MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					      MHD_HTTP_HEADER_HOST);
}

#endif
