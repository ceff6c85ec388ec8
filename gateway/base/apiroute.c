/*
 * apiroute.c - the lock API's route table (apiroute.h).
 *
 * Invariant (apiroute.h): one answer per request, from its method and
 * target alone; the lock name in it is percent-decoded (base/jsonio.c)
 * and valid (fencegate/name.h), or empty.
 */
#include <string.h>

#include "base/apiroute.h"
#include "base/jsonio.h"

#define LOCKS_PREFIX "/_fence/v1/locks/"

const char *fg_endpoint_name(enum fg_endpoint r)
{
	static const char *const names[FG_EP_COUNT] = {
		[FG_EP_OTHER] = "other",
		[FG_EP_ACQUIRE] = "acquire",
		[FG_EP_RENEW] = "renew",
		[FG_EP_RELEASE] = "release",
		[FG_EP_BREAK] = "break",
		[FG_EP_INSPECT] = "inspect",
		[FG_EP_OBSERVE] = "observe",
		[FG_EP_CHECK] = "check",
		[FG_EP_HEALTH] = "health",
		[FG_EP_LIVEZ] = "livez",
		[FG_EP_READYZ] = "readyz",
		[FG_EP_METRICS] = "metrics",
		[FG_EP_PROXY_READ] = "proxy_read",
		[FG_EP_PROXY_WRITE] = "proxy_write",
	};
	return (unsigned)r < FG_EP_COUNT ? names[r] : "other";
}

static bool is(const char *m, const char *lit)
{
	return strcmp(m, lit) == 0;
}

/* The paths with no name in them. For each: what it is counted as (the
 * path alone decides), what its methods (GET and HEAD, or POST) do and
 * need, and what any other method needs (its answer is a 405). */
static const struct fixed {
	const char *path;
	enum fg_endpoint endpoint;
	enum fg_apiop op;
	bool post;                 /* POST, not GET and HEAD */
	enum fg_apineed need, other_need;
	enum fg_right right;
} fixed[] = {
	{ "/_fence/v1/locks", FG_EP_OTHER, FG_APIOP_LIST, false,
	  FG_APINEED_PREFIX, FG_APINEED_PRINCIPAL, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/check", FG_EP_CHECK, FG_APIOP_CHECK, true,
	  FG_APINEED_SEQUENCER, FG_APINEED_PRINCIPAL, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/route", FG_EP_OTHER, FG_APIOP_ROUTE, false,
	  FG_APINEED_PRINCIPAL, FG_APINEED_PRINCIPAL, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/health", FG_EP_HEALTH, FG_APIOP_HEALTH, false,
	  FG_APINEED_NOTHING, FG_APINEED_NOTHING, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/livez", FG_EP_LIVEZ, FG_APIOP_LIVEZ, false,
	  FG_APINEED_NOTHING, FG_APINEED_NOTHING, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/readyz", FG_EP_READYZ, FG_APIOP_READYZ, false,
	  FG_APINEED_NOTHING, FG_APINEED_NOTHING, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/metrics", FG_EP_METRICS, FG_APIOP_METRICS, false,
	  FG_APINEED_RIGHT, FG_APINEED_RIGHT, FG_RIGHT_METRICS },
	/* open, as the probes are: it describes the interface, which is no
	 * secret (the same file is docs/openapi.json), and a client or a
	 * generator reads it before it has a key */
	{ "/_fence/v1/openapi.json", FG_EP_OTHER, FG_APIOP_OPENAPI, false,
	  FG_APINEED_NOTHING, FG_APINEED_NOTHING, FG_RIGHT_OBSERVE },
	{ "/_fence/v1/events", FG_EP_OTHER, FG_APIOP_EVENTS, false,
	  FG_APINEED_PREFIX, FG_APINEED_PRINCIPAL, FG_RIGHT_OBSERVE },
};

/* A lock: /_fence/v1/locks/{name}, raw[0..len) the name as sent. */
static void route_lock(struct fg_apiroute *r, const char *method,
		       const char *raw, size_t len, const char *query)
{
	/* counted by the method, whether or not the name is one */
	if (len == 0)
		r->endpoint = FG_EP_OTHER;
	else if (is(method, "POST"))
		r->endpoint = FG_EP_ACQUIRE;
	else if (is(method, "PATCH"))
		r->endpoint = FG_EP_RENEW;
	else if (is(method, "DELETE"))
		r->endpoint = FG_EP_RELEASE;
	else if (is(method, "GET") || is(method, "HEAD"))
		r->endpoint = strstr(query, "wait_ms=") ? FG_EP_OBSERVE
							: FG_EP_INSPECT;
	else
		r->endpoint = FG_EP_OTHER;

	size_t n;
	if (fg_pct_decode(raw, len, r->name, sizeof(r->name), &n) ||
	    !fg_name_valid(r->name, n)) {
		r->name[0] = '\0';
		r->op = FG_APIOP_BAD_NAME;
		return;
	}
	r->need = FG_APINEED_RIGHT;
	if (is(method, "POST")) {
		r->op = FG_APIOP_ACQUIRE;
		r->right = FG_RIGHT_LOCK;
	} else if (is(method, "PATCH")) {
		r->op = FG_APIOP_RENEW;
		r->right = FG_RIGHT_LOCK;
	} else if (is(method, "DELETE")) {
		r->op = FG_APIOP_DELETE;
		r->right = FG_RIGHT_LOCK; /* admin: with Fence-Break */
	} else if (is(method, "GET") || is(method, "HEAD")) {
		r->op = FG_APIOP_INSPECT;
		r->right = FG_RIGHT_OBSERVE;
	} else {
		r->op = FG_APIOP_NOT_ALLOWED;
		r->allow = "GET, POST, PATCH, DELETE";
		r->need = FG_APINEED_PRINCIPAL;
	}
}

void fg_apiroute_match(struct fg_apiroute *r, const char *method,
		       const char *target)
{
	size_t len = strcspn(target, "?");
	const char *query = target + len;
	*r = (struct fg_apiroute){
		.matched = true,
		.endpoint = FG_EP_OTHER,
		.op = FG_APIOP_NOT_FOUND,
		.need = FG_APINEED_PRINCIPAL,
		.right = FG_RIGHT_OBSERVE,
	};
	size_t pl = sizeof(LOCKS_PREFIX) - 1;
	if (len >= pl && memcmp(target, LOCKS_PREFIX, pl) == 0) {
		route_lock(r, method, target + pl, len - pl, query);
		return;
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		const struct fixed *f = &fixed[i];
		if (strlen(f->path) != len || memcmp(target, f->path, len) != 0)
			continue;
		r->endpoint = f->endpoint;
		r->right = f->right;
		bool allowed = f->post ? is(method, "POST")
				       : is(method, "GET") || is(method, "HEAD");
		if (allowed) {
			r->op = f->op;
			r->need = f->need;
		} else {
			r->op = FG_APIOP_NOT_ALLOWED;
			r->allow = f->post ? "POST" : "GET";
			r->need = f->other_need;
		}
		return;
	}
}
