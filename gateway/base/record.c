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

static _Thread_local struct fg_rec *cur;

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

/* Which endpoint a request went to: a proxied one by its method and what
 * it became, a lock API call by its route, which the front made from its
 * method and target alone, so that a request refused before its handler
 * ran is counted too. */
static enum fg_endpoint classify(const struct fg_rec *r)
{
	const char *m = r->method;
	if (r->proxied) {
		bool read = is(m, "GET") || is(m, "HEAD") || is(m, "OPTIONS") ||
			    is(m, "PROPFIND");
		return read && !r->write && r->decision != FG_DEC_ADMITTED
			       ? FG_EP_PROXY_READ : FG_EP_PROXY_WRITE;
	}
	if (!r->route || !r->route->matched)
		return FG_EP_OTHER;
	if (r->route->endpoint == FG_EP_RELEASE && r->brk)
		return FG_EP_BREAK;
	return r->route->endpoint;
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
