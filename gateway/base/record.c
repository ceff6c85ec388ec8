/*
 * record.c - the per-request record: filled while the request runs,
 * closed once when it completes. Pure: it writes no log and counts no
 * metric (proc/report.c does, from the closed record).
 *
 * Invariants: see record.h. The "current" request is a thread-local set
 * only while libmicrohttpd runs the request's handler on its loop, which
 * is the one place an answer may be queued, so an answer is always noted
 * in the record of the request it answers.
 */
#include <stdio.h>
#include <string.h>

#include "base/record.h"

#define API_PREFIX "/_fence/"
#define LOCKS_PREFIX "/_fence/v1/locks/"

static _Thread_local struct fg_rec *cur;

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

void fg_rec_begin(struct fg_rec *r, const char *uri)
{
	r->uri = uri;
	r->principal = "";
	r->t0_ns = fg_rec_now_ns();
	clock_gettime(CLOCK_REALTIME, &r->wall);
	r->error = -1;
	r->refusal = -1;
	r->admit_ns = -1;
	r->upstream_ns = -1;
	r->proxied = strncmp(uri, API_PREFIX, sizeof(API_PREFIX) - 1) != 0;
}

void fg_rec_enter(struct fg_rec *r, const char *method)
{
	cur = r;
	if (!r->method[0]) {
		/* once per request: a copy, not snprintf's format pass */
		size_t n = strlen(method);
		if (n >= sizeof(r->method)) {
			method = "OTHER";
			n = 5;
		}
		memcpy(r->method, method, n + 1);
	}
}

void fg_rec_leave(void)
{
	cur = NULL;
}

struct fg_rec *fg_rec_current(void)
{
	return cur;
}

void fg_rec_answered(unsigned status, int error, size_t body_len)
{
	if (!cur)
		return;
	cur->status = status;
	cur->error = error;
	cur->bytes_out += body_len;
}

void fg_rec_refused(int error, const char *lock, uint64_t token,
		    bool has_current, uint64_t current)
{
	if (!cur)
		return;
	struct fg_rec *r = cur;
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
static enum fg_endpoint classify(const struct fg_rec *r)
{
	const char *m = r->method, *uri = r->uri ? r->uri : "";
	if (r->proxied) {
		bool read = is(m, "GET") || is(m, "HEAD") || is(m, "OPTIONS") ||
			    is(m, "PROPFIND");
		return read && !r->write && r->decision != FG_DEC_ADMITTED
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

void fg_rec_close(struct fg_rec *r, bool completed_ok, size_t api_body_len)
{
	if (!r->t0_ns)
		return;
	r->aborted = !completed_ok;
	r->endpoint = classify(r);
	if (!r->proxied)
		r->bytes_in = api_body_len;
}
