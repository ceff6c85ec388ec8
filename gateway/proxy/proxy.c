/*
 * proxy.c - the fencing flow of a proxied request: check its write set,
 * admit it or park it, start its transfer (upstream/xfer.c) with a send
 * gate, keep the deadline of a fenced write (proxy/writes.c), extend it,
 * abort it, finish it, and answer.
 *
 * Everything here runs on the loop that accepted the request.
 *
 * Invariants:
 * - A fenced write hands the upstream no byte at or after its deadline (a
 *   release moves the deadline to now): its transfer's send gate is its
 *   write's fg_write_may_send(), asked inside curl's read callback, and a
 *   write whose request is still being sent then is aborted (its
 *   connection closed), so an upstream never completes it late. One whose
 *   last byte left in time is awaited for the margin more (its record
 *   covers it) before it is cut off, so a quick storage's answer is passed
 *   on rather than "aborted" for a write it applied.
 * - An admitted write's admissions are given back (fg_fencing_finish())
 *   once: when its transfer was answered or never began, or when it is
 *   not forwarded at all. A write cut off after it began keeps its record
 *   until its recorded end: its last byte may have left.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access/access.h"
#include "base/clock.h"
#include "http/respond.h"
#include "fence/fence.h"
#include "proxy/fencing.h"
#include "proc/gateway.h"
#include "base/log.h"
#include "proc/metrics.h"
#include "rt/rt.h"
#include "proxy/admitq.h"
#include "proxy/proxy.h"
#include "proxy/writes.h"
#include "base/redirect.h"
#include "proc/tls.h"
#include "upstream/headers.h"
#include "upstream/xfer.h"

#define PROXY_ALLOW "GET, HEAD, OPTIONS, PROPFIND, PUT, POST, PATCH, DELETE, MKCOL, COPY, MOVE, PROPPATCH"
#define URL_MAX 8192

struct fg_proxy {
	struct fg_gateway *gw;
	struct fg_loop *loop;
	struct fg_xfers *xfers;       /* the loop's transfers */
	struct fg_writes *writes;     /* its running fenced writes */
	const char *base;             /* upstream URL without a trailing '/' */
};

/* A fenced write in flight: what its transfer's hooks reach. Allocated in
 * start(); owned by its transfer once started (freed by the release
 * hook, when the transfer is freed), so a call in flight about it holds
 * the transfer (fg_xfer_hold()). */
struct pwrite {
	struct fg_write w;            /* registered in px->writes */
	struct fg_proxy *px;
	struct fg_xfer *x;
	struct MHD_Connection *conn;
	struct fg_fence fence;        /* a copy: the request may end first */
	uint64_t longest_end;         /* monotonic ms */
	bool cur_asked, cur_known;    /* the "current" token of a late write */
	uint64_t cur;
};

#define now_ms fg_clock_ms

static struct pwrite *pwrite_of(struct fg_write *w)
{
	return (struct pwrite *)((char *)w - offsetof(struct pwrite, w));
}

/* ---- a fenced write's transfer ------------------------------------------- */

/* Marks an admitted write over, off the answer's path. */
static void fence_finish(struct pwrite *pw)
{
	fg_fencing_finish(pw->px->loop, &pw->fence);
}

static bool gate(void *arg)
{
	struct pwrite *pw = arg;
	return fg_write_may_send(&pw->w, now_ms());
}

/* A write cut off after it began may still be applied by the storage (its
 * last byte may have left): its record stays until its recorded end, so
 * no newer write overtakes it. Only an answered write, or one never
 * begun, lets newer writes go at once. */
static void on_xfer_done(void *arg, bool answered, bool began)
{
	struct pwrite *pw = arg;
	if (answered || !began)
		fence_finish(pw);
}

static void on_xfer_release(void *arg)
{
	struct pwrite *pw = arg;
	fg_writes_remove(pw->px->writes, &pw->w);
	free(pw);
}

static enum fg_write_stage write_stage(struct fg_write *w)
{
	switch (fg_xfer_stage(pwrite_of(w)->x)) {
	case FG_XFER_QUEUED:
		return FG_WRITE_QUEUED;
	case FG_XFER_SENDING:
		return FG_WRITE_SENDING;
	case FG_XFER_SENT:
		return FG_WRITE_SENT;
	default:
		return FG_WRITE_OVER;
	}
}

static void write_abort(struct fg_write *w)
{
	struct pwrite *pw = pwrite_of(w);
	fg_log_warn("write to lock %s %s: aborted upstream",
		    fg_fence_first_write(&pw->fence)->lock,
		    w->released ? "ended by a release" : "passed its deadline");
	fg_xfer_end_now(pw->x);
}

struct extend_arg {
	struct pwrite *pw;
	int i;
};

static void on_extended(int err, const struct fg_admit *a, void *arg)
{
	struct extend_arg *e = arg;
	struct pwrite *pw = e->pw;
	enum fg_write_extension how = err ? FG_WRITE_EXT_FAILED
				      : a->status == FG_ADMITTED ? FG_WRITE_EXT_GRANTED
								 : FG_WRITE_EXT_ENDED;
	fg_write_extended(pw->px->writes, &pw->w, e->i, how,
			  how == FG_WRITE_EXT_GRANTED ? (uint64_t)a->ms : 0);
	free(e);
	fg_xfer_put(pw->x);
}

/* One extension per admitted member; each holds the transfer. */
static void write_extend(struct fg_write *w, uint64_t now)
{
	struct pwrite *pw = pwrite_of(w);
	struct fg_proxy *px = pw->px;
	fg_astore *as = px->loop->as;
	fg_xfer_hold(pw->x); /* the call's own: an answer may come at once */
	fg_write_extend_begin(w, now);
	uint32_t left = pw->longest_end > now ? (uint32_t)(pw->longest_end - now) : 0;
	for (int i = 0; i < pw->fence.n; i++) {
		if (!pw->fence.m[i].admitted)
			continue;
		struct extend_arg *e = malloc(sizeof(*e));
		if (!e)
			continue; /* the deadline stands */
		fg_write_extend_sent(w);
		fg_xfer_hold(pw->x);
		e->pw = pw;
		e->i = i;
		if (!as || fg_alock_extend(as, pw->fence.m[i].lock, pw->fence.m[i].token,
					   pw->fence.write_id, px->gw->cfg->fence_margin_ms,
					   left, on_extended, e) != FG_OK)
			on_extended(FG_EUNAVAIL, NULL, e);
	}
	fg_write_extend_end(w);
	fg_xfer_put(pw->x);
}

static const struct fg_writes_ops write_ops = {
	.stage = write_stage,
	.abort = write_abort,
	.extend = write_extend,
};

/* ---- starting a transfer ------------------------------------------------ */

static void loop_resume(void *ctx, struct MHD_Connection *c)
{
	fg_loop_resume(ctx, c);
}

static void loop_reread(void *ctx, struct MHD_Connection *c)
{
	fg_loop_reread(ctx, c);
}

struct fg_proxy *fg_proxy_create(struct fg_loop *loop)
{
	struct fg_gateway *gw = loop->gw;
	struct fg_proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return NULL;
	px->gw = gw;
	px->loop = loop;
	/* "" without an upstream: requests are answered 502 */
	px->base = gw->cfg->up.base;
	struct fg_xfers_host host = {
		.base = loop->base,
		.cfg = gw->cfg,
		.resume = loop_resume,
		.reread = loop_reread,
		.ctx = loop,
	};
	px->xfers = fg_xfers_create(&host);
	if (!px->xfers)
		goto error_xfers;
	px->writes = fg_writes_create(loop->base, gw->cfg->fence_margin_ms, &write_ops);
	if (!px->writes)
		goto error_writes;
	return px;

error_writes:
	fg_xfers_destroy(px->xfers);
error_xfers:
	free(px);
	return NULL;
}

void fg_proxy_shutdown(struct fg_proxy *px)
{
	if (!px)
		return;
	fg_xfers_shutdown(px->xfers);
}

void fg_proxy_destroy(struct fg_proxy *px)
{
	if (!px)
		return;
	/* the transfers first: a transfer freed takes its write out of the
	 * table */
	fg_xfers_destroy(px->xfers);
	fg_writes_destroy(px->writes);
	free(px);
}

static enum MHD_Result respond_released(struct MHD_Connection *c,
					const struct fg_fence *f)
{
	return fg_respond_error(c, FG_E_STALE_TOKEN,
		"the grant was released or broken; its write was not forwarded",
		json_pack("{s:I, s:n}", "token",
			  (json_int_t)fg_fence_first_write(f)->token, "current"));
}

/* The header lines the flow adds to a request: the Destination, as the
 * upstream's absolute URI (its base URL, then the raw path that was
 * resolved and checked, redirect.c), and the number of the (first) lock
 * the request writes, never a read's. Each is bounded like every header
 * line; false when one does not fit. */
static bool flow_headers(struct fg_proxy *px, struct fg_req *req,
			 const struct fg_fence *f,
			 char dest[FG_HDR_LINE_MAX], char token[64],
			 const char *extra[3])
{
	const struct fg_config *cfg = px->gw->cfg;
	int n = 0;
	if (req->dest_raw) {
		char url[URL_MAX];
		if (fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					    req->dest_raw, req->dest_raw_len,
					    url, sizeof(url)) != 0)
			return false;
		int len = snprintf(dest, FG_HDR_LINE_MAX, "Destination: %s", url);
		if (len < 0 || len >= FG_HDR_LINE_MAX)
			return false;
		extra[n++] = dest;
	}
	if (f && cfg->forward_token) {
		snprintf(token, 64, "Fencing-Token: %" PRIu64,
			 fg_fence_first_write(f)->token);
		extra[n++] = token;
	}
	extra[n] = NULL;
	return true;
}

/* Starts the upstream request of an admitted (or unfenced) request. */
static enum MHD_Result start(struct fg_req *req, struct MHD_Connection *c,
			     const char *method, const struct fg_fence *f,
			     bool fenced)
{
	struct fg_proxy *px = req->loop->px;
	if (!px->base[0]) {
		if (fenced)
			fg_fencing_finish(req->loop, &req->fence);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"no upstream is configured", NULL);
	}
	struct fg_xfer *x = fg_xfer_create(px->xfers, c);
	if (!x) {
		if (fenced)
			fg_fencing_finish(req->loop, &req->fence);
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	/* the request's reference: a transfer not begun stays, answered,
	 * until the request completes */
	req->xfer = x;
	struct pwrite *pw = NULL;
	if (fenced) {
		pw = calloc(1, sizeof(*pw));
		if (!pw)
			goto error_build;
		pw->px = px;
		pw->x = x;
		pw->conn = c;
		pw->fence = *f;
		pw->longest_end = now_ms() + px->gw->cfg->write_max_ms;
		bool admitted[FG_WRITE_MEMBERS] = { false };
		uint64_t mdeadline[FG_WRITE_MEMBERS] = { 0 };
		for (int i = 0; i < f->n && i < FG_WRITE_MEMBERS; i++) {
			admitted[i] = f->m[i].admitted;
			mdeadline[i] = f->m[i].deadline_at;
		}
		fg_write_init(&pw->w, f->write_id, f->n, admitted, mdeadline,
			      f->deadline_at);
		if (!fg_writes_add(px->writes, &pw->w)) {
			/* its grant ended before it registered */
			fence_finish(pw);
			free(pw);
			return respond_released(c, f);
		}
	}
	char url[URL_MAX], dest[FG_HDR_LINE_MAX], token[64];
	const char *extra[3];
	if (snprintf(url, sizeof(url), "%s%s", px->base, req->uri) >= (int)sizeof(url) ||
	    !flow_headers(px, req, fenced ? f : NULL, dest, token, extra))
		goto error_write;
	struct fg_xfer_spec spec = {
		.url = url,
		.method = method,
		.hdr_flags = req->shallow ? FG_HDR_SHALLOW : 0,
		.tls = fg_tls_on(),
		.extra = extra,
		.chunked = req->body_chunked,
		.length = req->body_length,
		.length_given = req->body_length_given,
	};
	struct fg_xfer_hooks hooks = {
		.may_send = gate,
		.done = on_xfer_done,
		.release = on_xfer_release,
		.arg = pw,
	};
	if (fg_xfer_start(x, &spec, pw ? &hooks : NULL) != 0)
		goto error_write;
	if (pw)
		fg_writes_kick(px->writes); /* its deadline is looked at */
	return MHD_YES;

error_write:
	if (pw) {
		fg_writes_remove(px->writes, &pw->w);
		fence_finish(pw);
		free(pw);
		return fg_respond_error(c, FG_E_INTERNAL, "cannot build the upstream request", NULL);
	}
error_build:
	if (fenced)
		fg_fencing_finish(req->loop, &req->fence);
	return fg_respond_error(c, FG_E_INTERNAL, "cannot build the upstream request", NULL);
}

/* ---- is it a collection? ---------------------------------------------- */

/* A MOVE of a collection takes its members along, and a COPY or MOVE with
 * Overwrite deletes an existing Destination whole before it writes (RFC
 * 4918 9.8.4): when a MOVE's path or a Destination is named without its
 * '/' and no one lock guards what it would hold (writeset.h), the storage
 * is asked first, with a PROPFIND of Depth 0. The write is admitted
 * already (its record covers the question); the connection waits for the
 * answer. Only the asked path's lock holder can change what kind of object
 * it is meanwhile (safety.md 8.4). */
static const char PROBE_BODY[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>"
	"<D:propfind xmlns:D=\"DAV:\"><D:prop><D:resourcetype/></D:prop></D:propfind>";

static bool wants_probe(struct fg_req *req, struct MHD_Connection *c)
{
	if (req->probe_path)
		return true;
	if (!req->probe_dest)
		return false;
	const char *ow = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Overwrite");
	/* "F": an existing Destination is left alone (412) */
	return !(ow && strcasecmp(ow, "F") == 0);
}

static enum MHD_Result probe_start(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_proxy *px = req->loop->px;
	const struct fg_config *cfg = px->gw->cfg;
	char url[URL_MAX];
	struct fg_xfer *x = NULL;
	/* the request path first (a MOVE's), then the Destination */
	bool path = req->probe_path;
	if (path)
		req->probe_path = false;
	else
		req->probe_dest = false;
	if (!px->base[0] ||
	    (path ? snprintf(url, sizeof(url), "%s%s", px->base, req->uri) >=
			    (int)sizeof(url)
		  : fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					    req->dest_raw, req->dest_raw_len,
					    url, sizeof(url)) != 0))
		goto error;
	x = fg_xfer_create(px->xfers, c);
	if (!x)
		goto error;
	/* the client's own headers (its credentials for the storage, its
	 * User-Agent): the storage answers the probe as it will the write */
	static const char *const extra[] = { "Content-Type: application/xml", NULL };
	struct fg_xfer_spec spec = {
		.url = url,
		.method = "PROPFIND",
		.hdr_flags = FG_HDR_PROBE,
		.tls = fg_tls_on(),
		.extra = extra,
		.kept_body = PROBE_BODY,
		.kept_body_len = sizeof(PROBE_BODY) - 1,
	};
	if (fg_xfer_start(x, &spec, NULL) != 0)
		goto error_xfer;
	req->xfer = x; /* its connection waits for the answer */
	return MHD_YES;

error_xfer:
	fg_xfer_put(x);
error:
	fg_fencing_finish(req->loop, &req->fence);
	return fg_respond_error(c, FG_E_INTERNAL, "cannot build the upstream request", NULL);
}

/* Does a 207 answer to the probe name a collection: an element named
 * "collection", with or without a prefix (only resourcetype was asked)? */
static bool names_collection(const char *body, size_t len)
{
	static const char word[] = "collection";
	const size_t wl = sizeof(word) - 1;
	for (size_t i = 0; i + wl < len; i++) {
		if (body[i] != '<')
			continue;
		size_t j = i + 1, k = j;
		while (k < len && body[k] != ':' && body[k] != '>' &&
		       body[k] != '/' && body[k] != ' ' && k - j <= 64)
			k++;
		if (k < len && body[k] == ':')
			j = k + 1;
		if (j + wl < len && memcmp(body + j, word, wl) == 0 &&
		    (body[j + wl] == '/' || body[j + wl] == '>' ||
		     body[j + wl] == ' ' || body[j + wl] == '\t' ||
		     body[j + wl] == '\r' || body[j + wl] == '\n'))
			return true;
	}
	return false;
}

/* The probe ended (the request's first call, resumed): answers the
 * request, asks the next question, or starts its transfer; the body, if
 * any, comes in the calls that follow. */
static enum MHD_Result probe_settle(struct fg_req *req, struct MHD_Connection *c,
				    const char *method)
{
	struct fg_xfer *x = req->xfer;
	int status;
	const char *body;
	size_t len;
	if (!fg_xfer_kept(x, &status, &body, &len))
		return MHD_YES; /* suspended until it ends */
	bool answered = status != 0;
	bool coll = answered && status == 207 && names_collection(body, len);
	req->xfer = NULL;
	fg_xfer_put(x); /* the request's: the probe ended */
	if (fg_loop_client_gone(c)) {
		fg_fencing_finish(req->loop, &req->fence);
		return MHD_NO;
	}
	/* Only a 207 that names no collection, or a 404 (nothing there),
	 * says it is not one; a redirect, a refusal or a failure says
	 * nothing, and the write is not risked on it. */
	if (!answered || !((status == 207 && !coll) || status == 404)) {
		char msg[128];
		if (answered)
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection (it answered %d)", status);
		else
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection");
		fg_fencing_finish(req->loop, &req->fence);
		if (coll)
			return fg_respond_error(c, FG_E_SUBTREE_UNGUARDED,
				"the upstream holds a collection there, and one lock "
				"does not guard all of it", NULL);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE, msg, NULL);
	}
	if (wants_probe(req, c))
		return probe_start(req, c);
	return start(req, c, method, &req->fence, true);
}

/* ---- messages about this loop's writes ------------------------------------ */

void fg_proxy_recheck_writes(struct fg_proxy *px)
{
	fg_writes_recheck(px->writes);
}

void fg_proxy_abort_write(struct fg_proxy *px, const char *write_id)
{
	fg_writes_abort(px->writes, write_id);
}

void fg_proxy_reask_write(struct fg_proxy *px, const char *write_id,
			  long long ends_in_ms)
{
	/* counted from now, later than Redis' moment by the message's trip:
	 * the record keeps the margin for that (docs/safety.md 10.1) */
	long long left = ends_in_ms - (long long)px->gw->cfg->fence_margin_ms;
	uint64_t now = now_ms();
	fg_writes_reask(px->writes, write_id, left > 0 ? now + (uint64_t)left : 1);
}

/* ---- the answer ------------------------------------------------------------ */

/* The newest token of a write's lock, for the answer to a late write. */
static void on_current(int err, const struct fg_check *chk, void *arg)
{
	struct fg_xfer *x = arg;
	struct pwrite *pw = fg_xfer_owner(x);
	if (!err && chk->has_current) {
		pw->cur_known = true;
		pw->cur = chk->current;
	}
	fg_loop_resume(pw->px->loop, pw->conn);
	fg_xfer_put(x);
}

/* The request body is in and the response head is known, or the transfer
 * ended: answer. */
static enum MHD_Result respond(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_xfer *x = req->xfer;
	if (fg_xfer_too_many_headers(x))
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"the upstream sent more headers than the gateway forwards",
					NULL);
	if (!fg_xfer_head_in(x)) {
		struct pwrite *pw = fg_xfer_owner(x);
		if (pw && pw->w.deadline_hit) {
			bool released = pw->w.released;
			/* cut off after its whole request had left: the
			 * upstream may have applied it, and the answer says so */
			bool sent = pw->w.grace;
			/* a rare answer: worth one more round trip for "current" */
			const struct fg_fence_lock *m = fg_fence_first_write(&pw->fence);
			if (!pw->cur_asked) {
				pw->cur_asked = true;
				fg_xfer_hold(x);
				if (req->loop->as &&
				    fg_alock_check(req->loop->as, m->lock, m->token,
						   on_current, x) == FG_OK) {
					MHD_suspend_connection(c);
					return MHD_YES;
				}
				fg_xfer_put(x);
			}
			bool known = pw->cur_known;
			const char *msg =
				sent ? (released ? "the grant was released or broken before "
						   "the upstream answered the write; the gateway hung up, and "
						   "the upstream may have applied it"
						 : "the lease ran out before the upstream answered "
						   "the write; the gateway hung up, and the "
						   "upstream may have applied it")
				     : (released ? "the grant was released or broken before "
						   "the write finished; it was aborted upstream"
						 : "the lease ran out before the write finished; "
						   "it was aborted upstream");
			return fg_respond_error(c, FG_E_STALE_TOKEN, msg,
				json_pack("{s:I, s:o}", "token", (json_int_t)m->token,
					  "current", known ? json_integer((json_int_t)pw->cur)
							   : json_null()));
		}
		const char *why;
		enum fg_error e = fg_xfer_failure(x, &why) == FG_XFER_TIMEOUT
					  ? FG_E_UPSTREAM_TIMEOUT
					  : FG_E_UPSTREAM_UNAVAILABLE;
		return fg_respond_error(c, e, why, NULL);
	}
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);
	unsigned status;
	struct MHD_Response *r = fg_xfer_response(x, fg_tls_on() ? "https" : "http",
						  host, &status);
	if (!r)
		return MHD_NO;
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	fg_rec_answered(status, -1, 0); /* the body is counted as sent */
	return ret;
}

/* ---- the fencing flow --------------------------------------------------- */

/* Parks a write until the wait loop admits its waiting member. */
static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method);

/* Notes a verdict that decides the request in its record. */
static void note_verdict(struct fg_req *req, enum fg_fencing v)
{
	struct fg_rec *r = &req->rec;
	if (v == FG_FENCING_PENDING || v == FG_FENCING_WAIT)
		return;
	r->fenced = req->fence.n > 0 || v != FG_FENCING_PASS;
	if (r->fenced)
		r->admit_ns = (int64_t)(fg_rec_now_ns() - r->fence_t0_ns);
	if (v == FG_FENCING_PASS)
		r->decision = req->fence.n > 0 ? FG_DEC_CHECKED : FG_DEC_PASS;
	else if (v == FG_FENCING_ADMITTED)
		r->decision = FG_DEC_ADMITTED;
	else if (r->decision == FG_DEC_NONE) {
		/* answered without a refusal of its own: Redis down and the
		 * like; its error is the reason */
		r->decision = FG_DEC_REFUSED;
		r->refusal = r->error;
	}
}

static enum MHD_Result admitted_or_wait(struct fg_req *req, struct MHD_Connection *c,
					const char *method, enum fg_fencing v)
{
	note_verdict(req, v);
	switch (v) {
	case FG_FENCING_PENDING:
		return MHD_YES; /* suspended until Redis answers */
	case FG_FENCING_PASS:
		return start(req, c, method, NULL, false);
	case FG_FENCING_ADMITTED:
		if (wants_probe(req, c))
			return probe_start(req, c);
		return start(req, c, method, &req->fence, true);
	case FG_FENCING_WAIT:
		return wait_admission(req, c, method);
	case FG_FENCING_ANSWERED:
	default:
		return MHD_YES;
	}
}

static enum MHD_Result after_admission(struct fg_req *req, struct MHD_Connection *c,
				       const char *method)
{
	struct fg_admit a;
	uint64_t deadline_at;
	enum fg_admission_result res = fg_admitq_result(req->admission, &a, &deadline_at);
	fg_admitq_drop(req->admission);
	req->admission = NULL;
	switch (res) {
	case FG_ADMISSION_ADMITTED:
		return admitted_or_wait(req, c, method,
					fg_fencing_wait_admitted(req, c, method,
								 deadline_at));
	case FG_ADMISSION_REFUSED:
		return fg_fencing_wait_refused(req, c, method, &a);
	case FG_ADMISSION_GONE:
		return MHD_NO;
	default:
		return fg_respond_store_error(c, FG_EUNAVAIL);
	}
}

static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method)
{
	const struct fg_fence_lock *m = &req->fence.m[req->fence.waiting];
	req->admission = fg_admitq_new(req->loop->aq, m->lock, m->token,
				      req->fence.write_id,
				      req->gw->cfg->fence_margin_ms,
				      req->gw->cfg->write_max_ms);
	if (!req->admission)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	if (fg_admitq_park(req->admission, c, req->fence.ms))
		return MHD_YES;
	return after_admission(req, c, method);
}

static bool bodyless_read(const char *method)
{
	return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	       strcmp(method, "OPTIONS") == 0;
}

/* The WebDAV headers the gateway decides by (which objects a request
 * touches, whether it replaces a collection) each have one value: sent
 * twice, the gateway would check one and a storage might act on the
 * other. */
static const char *const single_headers[] = { "Depth", "Overwrite", "Destination" };
#define NSINGLE (sizeof(single_headers) / sizeof(single_headers[0]))

static enum MHD_Result count_single(void *cls, enum MHD_ValueKind kind,
				    const char *key, const char *value)
{
	unsigned *n = cls;
	(void)kind;
	(void)value;
	for (size_t i = 0; i < NSINGLE; i++)
		if (strcasecmp(key, single_headers[i]) == 0)
			n[i]++;
	return MHD_YES;
}

/* The first single-valued header that came twice, or NULL. */
static const char *repeated_header(struct MHD_Connection *c)
{
	unsigned n[NSINGLE] = { 0 };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_single, n);
	for (size_t i = 0; i < NSINGLE; i++)
		if (n[i] > 1)
			return single_headers[i];
	return NULL;
}

enum MHD_Result fg_proxy_handle(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *upload,
				size_t *upload_size)
{
	if (!req->started) {
		req->started = true;
		/* origin-form only; a '#' would let the storage see a shorter
		 * path than the one the guard lock was chosen from */
		if (req->uri[0] != '/' || strchr(req->uri, '#'))
			return fg_respond_error(c, FG_E_BAD_REQUEST,
						"only origin-form request targets without '#' are proxied",
						NULL);
		if (strcmp(method, "CONNECT") == 0 || strcmp(method, "TRACE") == 0)
			return fg_respond_not_allowed(c, PROXY_ALLOW);
		if (strlen(req->loop->px->base) + strlen(req->uri) >= URL_MAX)
			return fg_respond_error(c, FG_E_BAD_REQUEST,
						"the request target is too long", NULL);
		/* a body would make another request of it (curl uploads) */
		if (bodyless_read(method) && (req->body_chunked || req->body_length > 0))
			return fg_respond_error_close(c, FG_E_BAD_REQUEST,
				"GET, HEAD and OPTIONS requests carry no body here");
		const char *twice = repeated_header(c);
		if (twice) {
			char msg[96];
			snprintf(msg, sizeof(msg), "more than one %s header", twice);
			return fg_respond_error_close(c, FG_E_BAD_REQUEST, msg);
		}
		struct fg_writeset ws;
		bool has_token = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     "Fencing-Token") != NULL;
		enum fg_error e = fg_writeset_build(
			req->gw->cfg, method, req->uri,
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Destination"),
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
			has_token, &ws);
		enum MHD_Result ret;
		if (e != FG_E_COUNT && !fg_access_proxy(req, c, method, NULL, &ret))
			return ret;
		if (e != FG_E_COUNT)
			return fg_respond_error(c, e,
				e == FG_E_BAD_LOCK_NAME
					? "this path maps to no valid lock name; add a route rule"
					: NULL,
				NULL);
		if (!fg_access_proxy(req, c, method, &ws, &ret))
			return ret;
		req->shallow = ws.shallow;
		req->probe_path = ws.probe_path;
		req->probe_dest = ws.probe_dest;
		if (ws.has_dest) {
			/* ws.dest_raw points into the Destination header, which
			 * lives as long as the request */
			req->dest_raw = ws.dest_raw;
			req->dest_raw_len = ws.dest_raw_len;
		}
		req->rec.fence_t0_ns = fg_rec_now_ns();
		return admitted_or_wait(req, c, method,
					fg_fencing_start(req, c, method, &ws));
	}
	if (req->admission)
		return after_admission(req, c, method);
	if (fg_fence_calling(&req->fence))
		return admitted_or_wait(req, c, method,
					fg_fencing_resume(req, c, method));

	struct fg_xfer *x = req->xfer;
	if (x && fg_xfer_is_kept(x))
		return probe_settle(req, c, method);
	if (!x)
		return MHD_YES; /* answered already; MHD drains the body */
	if (*upload_size) {
		req->rec.bytes_in += fg_xfer_feed(x, upload, upload_size);
		return MHD_YES;
	}
	if (!fg_xfer_body_end(x))
		return MHD_YES; /* suspended until the answer's head */
	return respond(req, c);
}

static void note(struct fg_req *req)
{
	const struct fg_fence *f = &req->fence;
	struct fg_rec *r = &req->rec;
	r->write = f->write;
	r->nlocks = f->n;
	for (int i = 0; i < f->n && i < 2; i++) {
		r->locks[i] = f->m[i].lock;
		r->tokens[i] = f->m[i].token;
	}
	struct fg_xfer *x = req->xfer;
	if (!x)
		return;
	int status;
	uint64_t sent;
	fg_xfer_note(x, &status, &req->rec.upstream_ns, &sent);
	req->rec.upstream_status = status;
	req->rec.bytes_out += sent;
}

static void completed(struct fg_req *req)
{
	fg_admitq_drop(req->admission);
	req->admission = NULL;
	struct fg_xfer *x = req->xfer;
	if (!x)
		return;
	req->xfer = NULL;
	if (fg_xfer_is_kept(x)) /* the write it was asked for never starts */
		fg_fencing_finish(req->loop, &req->fence);
	fg_xfer_close(x);
}

void fg_proxy_finish(struct fg_req *req)
{
	note(req);
	completed(req);
}
