/*
 * record.c - the per-request record, and what happens to it when the
 * request completes: one access line, and the metrics.
 *
 * Invariants: see record.h. The "current" request is a thread-local set
 * only while libmicrohttpd runs the request's handler on its loop, which
 * is the one place an answer may be queued, so an answer is always noted
 * in the record of the request it answers.
 */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "proc/accesslog.h"
#include "base/errors.h"
#include "proc/gateway.h"
#include "proc/metrics.h"
#include "base/record.h"

#define API_PREFIX "/_fence/"
#define LOCKS_PREFIX "/_fence/v1/locks/"

static _Thread_local struct fg_req *cur;

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

uint64_t fg_rec_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void client_addr(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	out[0] = '\0';
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
			  out, (socklen_t)cap);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			  out, (socklen_t)cap);
}

void fg_rec_begin(struct fg_req *req, const char *uri)
{
	struct fg_rec *r = &req->rec;
	r->t0_ns = fg_rec_now_ns();
	clock_gettime(CLOCK_REALTIME, &r->wall);
	r->error = -1;
	r->refusal = -1;
	r->admit_ns = -1;
	r->upstream_ns = -1;
	r->proxied = strncmp(uri, API_PREFIX, sizeof(API_PREFIX) - 1) != 0;
	if (fg_accesslog_on())
		client_addr(req->conn, r->client, sizeof(r->client));
}

void fg_rec_enter(struct fg_req *req, const char *method)
{
	cur = req;
	if (!req->rec.method[0]) {
		size_t n = strlen(method);
		snprintf(req->rec.method, sizeof(req->rec.method), "%s",
			 n < sizeof(req->rec.method) ? method : "OTHER");
	}
}

void fg_rec_leave(void)
{
	cur = NULL;
}

struct fg_rec *fg_rec_current(void)
{
	return cur ? &cur->rec : NULL;
}

void fg_rec_answered(unsigned status, int error, size_t body_len)
{
	if (!cur)
		return;
	cur->rec.status = status;
	cur->rec.error = error;
	cur->rec.bytes_out += body_len;
}

void fg_rec_refused(int error, const char *lock, uint64_t token,
		    bool has_current, uint64_t current)
{
	if (!cur)
		return;
	struct fg_rec *r = &cur->rec;
	r->decision = FG_DEC_REFUSED;
	r->refusal = error;
	snprintf(r->lock, sizeof(r->lock), "%s", lock ? lock : "");
	r->has_token = token != 0;
	r->token = token;
	r->has_current = has_current;
	r->current = current;
}

static bool is(const char *m, const char *lit)
{
	return strcmp(m, lit) == 0;
}

/* Which endpoint a request went to, from its method and path alone, so
 * that a request refused before its handler ran is counted too. */
static enum fg_endpoint classify(const struct fg_req *req)
{
	const struct fg_rec *r = &req->rec;
	const char *m = r->method, *uri = req->uri ? req->uri : "";
	if (r->proxied) {
		bool read = is(m, "GET") || is(m, "HEAD") || is(m, "OPTIONS") ||
			    is(m, "PROPFIND");
		return read && !req->fence.write && r->decision != FG_DEC_ADMITTED
			       ? FG_EP_PROXY_READ : FG_EP_PROXY_WRITE;
	}
	size_t len = strcspn(uri, "?");
	size_t pl = sizeof(LOCKS_PREFIX) - 1;
	if (len > pl && strncmp(uri, LOCKS_PREFIX, pl) == 0) {
		if (is(m, "POST"))
			return FG_EP_ACQUIRE;
		if (is(m, "PATCH"))
			return FG_EP_RENEW;
		if (is(m, "DELETE"))
			return r->brk ? FG_EP_BREAK : FG_EP_RELEASE;
		if (is(m, "GET") || is(m, "HEAD"))
			return strstr(uri + len, "wait_ms=") ? FG_EP_OBSERVE
							     : FG_EP_INSPECT;
		return FG_EP_OTHER;
	}
	static const struct { const char *path; enum fg_endpoint ep; } fixed[] = {
		{ "/_fence/v1/check", FG_EP_CHECK },
		{ "/_fence/v1/health", FG_EP_HEALTH },
		{ "/_fence/v1/livez", FG_EP_LIVEZ },
		{ "/_fence/v1/readyz", FG_EP_READYZ },
		{ "/_fence/v1/metrics", FG_EP_METRICS },
	};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strlen(fixed[i].path) == len &&
		    memcmp(uri, fixed[i].path, len) == 0)
			return fixed[i].ep;
	return FG_EP_OTHER;
}

static void count_lock_call(const struct fg_rec *r)
{
	switch (r->endpoint) {
	case FG_EP_ACQUIRE:
		if (r->granted && r->status == 200)
			fg_metrics_grant(r->mode);
		break;
	case FG_EP_RENEW:
		if (r->status == 200)
			fg_metrics_renewal();
		else if (r->error == FG_E_LEASE_EXPIRED)
			fg_metrics_expiry();
		break;
	case FG_EP_RELEASE:
		if (r->status == 204)
			fg_metrics_release();
		else if (r->error == FG_E_LEASE_EXPIRED)
			fg_metrics_expiry();
		break;
	default:
		break;
	}
}

void fg_rec_finish(struct fg_req *req, bool completed_ok)
{
	struct fg_rec *r = &req->rec;
	if (!r->t0_ns)
		return;
	r->aborted = !completed_ok;
	r->endpoint = classify(req);
	if (!r->proxied)
		r->bytes_in = req->body_len;
	uint64_t ns = fg_rec_now_ns() - r->t0_ns;
	fg_metrics_request(r->endpoint, r->status, ns, r->bytes_in, r->bytes_out);
	count_lock_call(r);
	if (r->error == FG_E_UNAUTHENTICATED)
		fg_metrics_auth_refused(FG_AUTH_UNAUTHENTICATED);
	else if (r->error == FG_E_FORBIDDEN)
		fg_metrics_auth_refused(FG_AUTH_FORBIDDEN);
	else if (r->error == FG_E_TOO_MANY_FAILURES)
		fg_metrics_auth_refused(FG_AUTH_THROTTLED);
	if (r->fenced && r->decision != FG_DEC_NONE && r->decision != FG_DEC_PASS)
		fg_metrics_fence(r->decision != FG_DEC_REFUSED,
				 r->decision == FG_DEC_ADMITTED, r->refusal,
				 r->admit_ns >= 0 ? (uint64_t)r->admit_ns : 0);
	fg_accesslog_write(req);
}
