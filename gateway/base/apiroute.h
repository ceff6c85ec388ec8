/*
 * apiroute.h - the lock API's route table: a request's method and target
 * under /_fence/ to the endpoint it is counted as, the lock it names, what
 * the access step asks of its caller and what the lock API does with it.
 * Private to the gateway; pure (it reads only its arguments), so that it
 * is unit-tested.
 *
 * Invariant: a request under /_fence/ is routed once (http/front.c, once
 * its target is in the origin form it is acted on in; struct fg_req's
 * `route`), and the metrics and the access log (base/record.c), the access
 * step (access/access.c) and the lock API (api/locks.c) all read that one
 * answer: none of them decodes the path or the lock name again, so they
 * cannot disagree on which call a request is or which lock it names.
 */
#ifndef FENCEGATE_APIROUTE_H
#define FENCEGATE_APIROUTE_H

#include <stdbool.h>

#include "fencegate/name.h"
#include "base/auth.h" /* enum fg_right */

/* The bounded set of endpoints requests are counted as (the metrics'
 * label, the access log's field): the lock API's come from the route
 * table, the proxy's two from what the request became (base/record.c). */
enum fg_endpoint {
	FG_EP_OTHER,        /* an unknown path under /_fence/, the listing */
	FG_EP_ACQUIRE,
	FG_EP_RENEW,
	FG_EP_RELEASE,
	FG_EP_BREAK,        /* DELETE with Fence-Break */
	FG_EP_INSPECT,
	FG_EP_OBSERVE,      /* inspect with wait_ms: a long poll */
	FG_EP_CHECK,
	FG_EP_HEALTH,
	FG_EP_LIVEZ,
	FG_EP_READYZ,
	FG_EP_METRICS,
	FG_EP_PROXY_READ,
	FG_EP_PROXY_WRITE,
	FG_EP_COUNT,
};

/** The endpoint's label value ("acquire", "proxy_write", ...; "other"
 *  for a value out of range). */
const char *fg_endpoint_name(enum fg_endpoint r);

/* What the lock API does with the request. */
enum fg_apiop {
	FG_APIOP_NOT_FOUND,   /* 404 not_found: no such path */
	FG_APIOP_NOT_ALLOWED, /* 405, its Allow header the route's `allow` */
	FG_APIOP_BAD_NAME,    /* 400 bad_lock_name: under /_fence/v1/locks/,
				 a name that does not decode or is not valid
				 (whatever the method) */
	FG_APIOP_ACQUIRE,     /* POST a lock */
	FG_APIOP_RENEW,       /* PATCH a lock */
	FG_APIOP_DELETE,      /* DELETE a lock: a release, or with
				 Fence-Break a break */
	FG_APIOP_INSPECT,     /* GET or HEAD a lock: inspect, or observe */
	FG_APIOP_LIST,        /* GET or HEAD /_fence/v1/locks */
	FG_APIOP_CHECK,       /* POST /_fence/v1/check */
	FG_APIOP_ROUTE,       /* GET or HEAD /_fence/v1/route?path=P: which
				 lock guards P */
	FG_APIOP_HEALTH,      /* GET or HEAD of the four below */
	FG_APIOP_LIVEZ,
	FG_APIOP_READYZ,
	FG_APIOP_METRICS,
	FG_APIOP_OPENAPI,     /* GET or HEAD /_fence/v1/openapi.json: the
				 API's description (base/openapi.h) */
	FG_APIOP_EVENTS,      /* GET or HEAD /_fence/v1/events: what
				 happened to the locks under a prefix */
};

/* What the access step asks of the caller (with an auth-file). */
enum fg_apineed {
	FG_APINEED_NOTHING,   /* health, livez, readyz, openapi.json, whatever
				 the method */
	FG_APINEED_PRINCIPAL, /* a known principal, no right (the call itself
				 answers 400, 404 or 405) */
	FG_APINEED_RIGHT,     /* `right` on the lock `name` (metrics: on no
				 lock); a DELETE with Fence-Break needs
				 admin: instead of lock: (a header: the access
				 step reads it) */
	FG_APINEED_PREFIX,    /* `right` on every lock whose name starts with
				 the listing's prefix (its query) */
	FG_APINEED_SEQUENCER, /* `right` on the lock the sequencer in the
				 body names, when this gateway signed it; a
				 known principal otherwise */
};

struct fg_apiroute {
	bool matched;              /* fg_apiroute_match() ran */
	enum fg_endpoint endpoint; /* the API's (never PROXY_*); RELEASE is
				      counted as BREAK when the call notes
				      a Fence-Break (record.h) */
	enum fg_apiop op;
	const char *allow;         /* NOT_ALLOWED: the methods allowed;
				      static */
	enum fg_apineed need;
	enum fg_right right;       /* RIGHT, PREFIX, SEQUENCER */
	char name[FG_NAME_MAX + 1]; /* the lock the path names, decoded and
				      valid; "" when it names none */
};

/**
 * Routes a request under /_fence/: method as sent (compared exactly),
 * target its origin-form request-target, the path up to the first '?'
 * and its query after it. Fills *r whole. A target outside /_fence/ is
 * routed as an unknown path (FG_EP_OTHER, FG_APIOP_NOT_FOUND).
 */
void fg_apiroute_match(struct fg_apiroute *r, const char *method,
		       const char *target);

#endif
