/*
 * flow.c - the life of one proxied request, start to finish: the one
 * owner of it, as nginx's upstream module and h2o's proxy generator are
 * of theirs. Its states (enum flow_state), in order:
 *
 *   NEW        the head is classified: target, method, single-valued
 *              headers, the write set (base/writeset.c), the access step;
 *              in S3 mode (docs/s3.md) the access step comes first (the
 *              client's SigV4, access/access.c) and the write set is the
 *              S3 operation's (base/s3ops.c, proxy/s3part.c)
 *   S3BODY     S3 mode, DeleteObjects: its body is read whole (bounded),
 *              for the keys it names are its write set
 *   CHECKING   the fence's check table (fence/fence.c, pure) asked for a
 *              Redis call: the connection is parked (rt/park.c) until
 *              its answer; the table is stepped again
 *   WAITING    a write waits until older writes of its lock are over
 *              (proxy/admitq.c), then the other members are admitted
 *   PROBING    the upstream is asked whether a path is a collection
 *   STREAMING  the transfer (upstream/xfer.c) runs: the body goes up
 *              through a send gate; a fenced write's deadline, extension
 *              and abort are kept by the running-writes table
 *              (proxy/writes.c); the answer comes back
 *   ANSWERED   the gateway answered itself; nothing more is done
 *
 * and, whatever the state, fg_proxy_finish(): the record takes what the
 * fence decided and what the transfer knows (base/record.c), a transfer
 * still running is aborted, a wait let go. Every service called here
 * returns here; none calls back into this file but through the hooks it
 * registered (the transfer's gate, done and freed; the writes table's
 * stage, abort and extend; Redis answers). Everything runs on the loop
 * that accepted the request.
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
 * - Every Redis call of the checks parks the connection once, and its
 *   answer resumes it once. Whatever the table decides other than PASS or
 *   ADMITTED, the request leaves holding no admission.
 * - An admitted write's admissions are given back (give_back()) once:
 *   when its transfer was answered or never began, or when it is not
 *   forwarded at all. A write cut off after it began keeps its record
 *   until its recorded end: its last byte may have left.
 * - A refusal's log line names the lock and the token numbers, never a
 *   sequencer or a lease.
 * - The Redis callbacks here (on_checked, on_admitted, on_current) take
 *   the request itself: a parked request is never completed before its
 *   park is resumed, and at stop a loop closes its Redis connections
 *   (every call answered) before it stops its daemon (loop.c).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "base/text.h"
#include "access/access.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/record.h"
#include "base/redirect.h"
#include "fence/fence.h"
#include "http/framing.h"
#include "http/front.h"
#include "http/req.h"
#include "http/respond.h"
#include "proc/gateway.h"
#include "proc/metrics.h"
#include "proc/tls.h"
#include "proxy/admitq.h"
#include "proxy/flow.h"
#include "proxy/s3part.h"
#include "proxy/writes.h"
#include "rt/evrec.h"
#include "rt/park.h"
#include "rt/rt.h"
#include "upstream/headers.h"
#include "upstream/xfer.h"

#define PROXY_ALLOW "GET, HEAD, OPTIONS, PROPFIND, PUT, POST, PATCH, DELETE, MKCOL, COPY, MOVE, PROPPATCH"
#define URL_MAX 8192

_Static_assert(FG_WRITE_MEMBERS == FG_WS_MAX,
	       "a running write tracks every member of its write set");

struct fg_proxy {
	struct fg_gateway *gw;
	struct fg_loop *loop;
	fg_astore *as;                /* the loop's, lent; NULL once closed */
	struct fg_admitq *aq;         /* the loop's waiting writes */
	struct fg_xfers *xfers;       /* the loop's transfers */
	struct fg_writes *writes;     /* its running fenced writes */
	const char *base;             /* upstream URL without a trailing '/' */
	struct fg_sigv4_cache *sigs;  /* S3 mode: the signing keys the loop's
					 requests upstream are signed with */
};

enum flow_state {
	FLOW_NEW,
	FLOW_S3BODY,
	FLOW_CHECKING,
	FLOW_WAITING,
	FLOW_PROBING,
	FLOW_STREAMING,
	FLOW_ANSWERED,
};

/* A proxied request's part of struct fg_req: allocated at its first call
 * and freed by fg_proxy_finish(), with the request. */
struct fg_flow {
	enum flow_state state;
	struct fg_fence fence;          /* the checks and their admissions */
	struct fg_park park;            /* CHECKING: while Redis answers;
					   STREAMING: while the current token
					   of a late write is asked */
	struct fg_admission *admission; /* WAITING */
	struct fg_xfer *xfer;           /* PROBING, STREAMING (and a transfer
					   never begun, until the request
					   ends): the request's reference */
	const char *dest_raw;           /* COPY/MOVE: the Destination path
					   forwarded (in the request's header) */
	size_t dest_raw_len;
	bool shallow;                   /* forwarded with "Depth: 0" */
	bool probe_path, probe_dest;    /* ask whether the request path, the
					   Destination is a collection first
					   (writeset.h); cleared once asked */
	struct fg_s3part *s3;           /* S3 mode: allocated by s3_head(),
					   freed by fg_proxy_finish() */
	uint64_t decoded;               /* its streaming-signed body's
					   x-amz-decoded-content-length */
};

/* A fenced write in flight: what its transfer's hooks reach. Allocated in
 * start(); owned by its transfer once started (freed by its freed
 * hook, when the transfer is freed), so a call in flight about it holds
 * the transfer (fg_xfer_hold()). */
struct pwrite {
	struct fg_write w;            /* registered in px->writes */
	struct fg_proxy *px;
	struct fg_xfer *x;
	struct fg_fence fence;        /* a copy: the request may end first */
	uint64_t longest_end;         /* monotonic ms */
	bool cur_asked, cur_known;    /* the "current" token of a late write */
	uint64_t cur;
	bool cut_said;                /* say_cut() logged it */
};

#define now_ms fg_clock_ms

static struct pwrite *pwrite_of(struct fg_write *w)
{
	return (struct pwrite *)((char *)w - offsetof(struct pwrite, w));
}

/* ---- the fencing checks (fence/fence.c's table, driven) ---------------- */

/* Where a request's fencing stands once a call returns. */
enum fg_fencing {
	FG_FENCING_PASS,     /* an unfenced read, or a fenced read that checked */
	FG_FENCING_ADMITTED, /* a write admitted: forward it before
				fence.deadline_at */
	FG_FENCING_WAIT,     /* a write that waits for older writes to end:
				member fence.waiting, within fence.ms; it
				holds no admission meanwhile */
	FG_FENCING_ANSWERED, /* refused, or the lock store failed: the error
			        answer is queued and nothing is held */
	FG_FENCING_PENDING,  /* a Redis call is in flight; the connection is
				suspended until its answer resumes it: call
				fencing_resume() then */
};

/* The answer of each row of the table. */
static const enum fg_error row_error[] = {
	[FG_FENCE_TOKEN_REQUIRED] = FG_E_TOKEN_REQUIRED,
	[FG_FENCE_TOKEN_REPEATED] = FG_E_MALFORMED_TOKEN,
	[FG_FENCE_NOT_SEQUENCER] = FG_E_MALFORMED_TOKEN,
	[FG_FENCE_BAD_MAC] = FG_E_FORGED_TOKEN,
	[FG_FENCE_BEYOND_ISSUED] = FG_E_FORGED_TOKEN,
	[FG_FENCE_WRONG_LOCK] = FG_E_WRONG_LOCK,
	[FG_FENCE_WRONG_MODE] = FG_E_WRONG_MODE,
	[FG_FENCE_STALE] = FG_E_STALE_TOKEN,
	[FG_FENCE_EXPIRING] = FG_E_STALE_TOKEN,
};

struct tokens {
	unsigned n[2];
	const char *value[2];
};

static enum MHD_Result count_tokens(void *cls, enum MHD_ValueKind kind,
				    const char *key, const char *value)
{
	struct tokens *t = cls;
	(void)kind;
	int i = strcasecmp(key, FG_FENCE_TOKEN_HEADER) == 0 ? FG_WS_FENCING_TOKEN
		: strcasecmp(key, FG_FENCE_DEST_TOKEN_HEADER) == 0
			? FG_WS_DESTINATION_FENCING_TOKEN
			: -1;
	if (i >= 0) {
		t->n[i]++;
		t->value[i] = value;
	}
	return MHD_YES;
}

static json_t *token_fields(uint64_t token, bool has_current, uint64_t current)
{
	return json_pack("{s:I, s:o}", "token", (json_int_t)token, "current",
			 has_current ? json_integer((json_int_t)current) : json_null());
}

/* A fenced write's refusal, as an event of its lock (rt/evrec.h): the
 * request's path only (never its query), who sent it, the token refused
 * (0: none was read). A refusal no lock could be found for (the write
 * set's or S3's own, before the fence) is no event: an event is a
 * lock's, and shown to who may observe that lock. */
static void record_refusal(struct fg_req *req, const char *method,
			   const char *lock, enum fg_error e, uint64_t token)
{
	struct fg_evrefusal x = {
		.lock = lock,
		.code = fg_errors[e].code,
		.method = method,
		.path = req->uri,
		.principal = req->principal,
		.client = fg_req_client(req),
		.token = token,
	};
	fg_evrec_refused(req->loop->evrec, &x);
}

/* Answers, logs and records the fence's refusal. */
static enum MHD_Result refuse(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *path,
			      const struct fg_fence *f)
{
	const struct fg_fence_refusal *r = &f->refusal;
	enum fg_error e = row_error[r->row];
	char msg[FG_NAME_MAX + 160];
	const char *message = fg_fence_message(f, msg, sizeof(msg));
	char cur[24] = "none";
	if (r->has_current)
		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)r->current);
	fg_log_info("refused %s %s: %s (lock %s, token %llu, current %s)",
		    method, path, fg_errors[e].code, r->lock[0] ? r->lock : "-",
		    (unsigned long long)r->token, cur);
	json_t *extra = r->token ? token_fields(r->token, r->has_current, r->current)
				 : NULL;
	fg_rec_refused((int)e, r->lock, r->token, r->has_current, r->current);
	if (r->lock[0])
		record_refusal(req, method, r->lock, e, r->token);
	return fg_respond_error(c, e, message, extra);
}

static void log_path(const char *uri, char out[128])
{
	size_t plen = strcspn(uri, "?");
	if (plen > 100)
		plen = 100;
	memcpy(out, uri, plen);
	out[plen] = '\0';
}

/* base then uri into url (cap bytes); false when they do not fit. (Every
 * proxied request makes one: copies, not printf().) */
static bool join_url(char *url, size_t cap, const char *base, const char *uri)
{
	size_t bl = strlen(base), ul = strlen(uri);
	if (bl + ul >= cap)
		return false;
	memcpy(url, base, bl);
	memcpy(url + bl, uri, ul + 1);
	return true;
}

static void give_back(struct fg_loop *loop, struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		/* without Redis, the record goes at its recorded end */
		if (fg_fence_give_back(f, i) && loop->px->as)
			fg_alock_finish(loop->px->as, f->m[i].lock, f->write_id,
					NULL, NULL);
}

/* ---- Redis calls: one at a time, the request suspended meanwhile ------- */

static void on_checked(int err, const struct fg_check *chk, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	fg_fence_check_answer(&req->flow->fence, err, chk);
	fg_park_resume(&req->flow->park);
}

static void on_admitted(int err, const struct fg_admit *a, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	fg_fence_admit_answer(&req->flow->fence, err, a);
	fg_park_resume(&req->flow->park);
}

/* A verdict: what it leaves to do here (give back, answer) is done. */
static enum fg_fencing settle(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *path,
			      enum fg_fence_step s)
{
	struct fg_fence *f = &req->flow->fence;
	switch (s) {
	case FG_FENCE_PENDING:
		return FG_FENCING_PENDING; /* resumed for another reason */
	case FG_FENCE_PASS:
		return FG_FENCING_PASS;
	case FG_FENCE_ADMITTED:
		return FG_FENCING_ADMITTED;
	case FG_FENCE_WAIT:
		give_back(req->loop, f);
		return FG_FENCING_WAIT;
	case FG_FENCE_REFUSED:
		give_back(req->loop, f);
		refuse(req, c, method, path, f);
		return FG_FENCING_ANSWERED;
	case FG_FENCE_FAILED:
	default:
		give_back(req->loop, f);
		fg_respond_store_error(c, f->err);
		return FG_FENCING_ANSWERED;
	}
}

/* Steps the table until it is decided or waits for Redis. The key and the
 * clock are read only for a request the table checks. */
static enum fg_fencing run(struct fg_req *req, struct MHD_Connection *c,
			   const char *method)
{
	struct fg_fence *f = &req->flow->fence;
	const struct fg_config *cfg = req->gw->cfg;
	fg_astore *as = req->loop->px->as;
	char path[128];
	log_path(req->uri, path);
	for (;;) {
		uint8_t key[FG_KEY_MAX];
		struct fg_fence_in in = { key, 0, 0 };
		if (f->nws > 0) {
			fg_gateway_key(req->gw, key, &in.key_len);
			in.now = fg_clock_ms();
		}
		struct fg_fence_call call;
		enum fg_fence_step s = fg_fence_step(f, &in, &call);
		int err;
		switch (s) {
		case FG_FENCE_NAME_WRITE: {
			char id[FG_WAITER_ID_MAX];
			fg_loop_next_id(req->loop, true, id, sizeof(id));
			fg_fence_name_write(f, id);
			continue;
		}
		case FG_FENCE_CHECK:
			err = as ? fg_alock_check(as, call.lock, call.token,
						  on_checked, req)
				 : FG_EUNAVAIL;
			break;
		case FG_FENCE_ADMIT:
			err = as ? fg_alock_admit(as, call.lock, call.token,
						  f->write_id, cfg->fence_margin_ms,
						  cfg->write_max_ms, on_admitted, req)
				 : FG_EUNAVAIL;
			break;
		default:
			return settle(req, c, method, path, s);
		}
		if (err) {
			fg_fence_unsent(f, err);
			continue;
		}
		fg_park_suspend(&req->flow->park, req->loop, c, NULL, NULL, NULL);
		return FG_FENCING_PENDING;
	}
}

static enum fg_fencing fencing_start(struct fg_req *req, struct MHD_Connection *c,
				 const char *method, const struct fg_writeset *ws)
{
	struct tokens t = { { 0, 0 }, { NULL, NULL } };
	struct fg_fence *f = &req->flow->fence;
	/* the header values live as long as the request */
	if (ws->n > 0)
		MHD_get_connection_values(c, MHD_HEADER_KIND, count_tokens, &t);
	fg_fence_start(f, ws, t.value, t.n);
	/* S3 mode: a write's sequencers are its session token's (the part
	 * lives as long as the request), and a Fencing-Token header's */
	const struct fg_s3part *s3 = req->flow->s3;
	if (s3 && ws->n > 0) {
		if (s3->auth.has_token && s3->auth.token_len > 0)
			fg_fence_sequencers(f, s3->auth.token, s3->auth.token_len);
		if (t.n[FG_WS_FENCING_TOKEN] == 1)
			fg_fence_sequencers(f, t.value[FG_WS_FENCING_TOKEN],
					    strlen(t.value[FG_WS_FENCING_TOKEN]));
		else if (t.n[FG_WS_FENCING_TOKEN] > 1)
			fg_fence_sequencers(f, "", 0); /* repeated: malformed */
	}
	return run(req, c, method);
}

static enum fg_fencing fencing_resume(struct fg_req *req, struct MHD_Connection *c,
				  const char *method)
{
	return run(req, c, method);
}

static enum fg_fencing fencing_wait_admitted(struct fg_req *req,
					 struct MHD_Connection *c,
					 const char *method,
					 uint64_t deadline_at)
{
	fg_fence_wait_admitted(&req->flow->fence, deadline_at);
	return run(req, c, method);
}

static enum MHD_Result fencing_wait_refused(struct fg_req *req,
					struct MHD_Connection *c,
					const char *method,
					const struct fg_admit *a)
{
	/* nothing is held: what the other members were admitted under was
	 * given back when the wait began */
	fg_fence_wait_refused(&req->flow->fence, a);
	return refuse(req, c, method, "-", &req->flow->fence);
}

/* ---- a fenced write's transfer ------------------------------------------- */

/* Marks an admitted write over, off the answer's path. */
static void fence_finish(struct pwrite *pw)
{
	give_back(pw->px->loop, &pw->fence);
}

static bool gate(void *arg)
{
	struct pwrite *pw = arg;
	return fg_write_may_send(&pw->w, now_ms());
}

/* Logs once that a write's transfer was cut off, and why. Two ways cut
 * one: write_abort(), from the writes' check, and the send gate, which
 * refuses the next byte of a write whose grant ended (its release heard)
 * or whose deadline passed, and so may end the transfer first. */
static void say_cut(struct pwrite *pw)
{
	struct fg_write *w = &pw->w;
	if (pw->cut_said)
		return;
	pw->cut_said = true;
	fg_log_warn("write to lock %s %s: aborted upstream",
		    fg_fence_first_write(&pw->fence)->lock,
		    w->stopped ? "still running when the gateway stopped"
		    : w->released ? "ended by a release" : "passed its deadline");
}

/* A write cut off after it began may still be applied by the storage (its
 * last byte may have left): its record stays until its recorded end, so
 * no newer write overtakes it. Only an answered write, or one never
 * begun, lets newer writes go at once. */
static void on_xfer_done(void *arg, bool answered, bool began)
{
	struct pwrite *pw = arg;
	/* ended unanswered after the gate closed on it: the gate cut it (a
	 * write sent whole and awaiting its answer has no gate left to
	 * close; only write_abort() cuts it) */
	if (!answered && began && !pw->w.grace &&
	    (pw->w.released || pw->w.deadline_hit || pw->w.stopped))
		say_cut(pw);
	if (answered || !began)
		fence_finish(pw);
}

static void on_xfer_freed(void *arg)
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
	say_cut(pw);
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
	fg_astore *as = px->as;
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

struct fg_proxy *fg_proxy_create(struct fg_loop *loop, struct event_base *base,
				 struct fg_gateway *gw, fg_astore *as,
				 struct fg_admitq *aq)
{
	struct fg_proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return NULL;
	px->gw = gw;
	px->loop = loop;
	px->as = as;
	px->aq = aq;
	/* "" without an upstream: requests are answered 502 */
	px->base = gw->cfg->up.base;
	struct fg_xfers_host host = {
		.base = base,
		.cfg = gw->cfg,
		.resume = loop_resume,
		.reread = loop_reread,
		.ctx = loop,
	};
	px->xfers = fg_xfers_create(&host);
	if (!px->xfers)
		goto error_xfers;
	px->writes = fg_writes_create(base, gw->cfg->fence_margin_ms, &write_ops);
	if (!px->writes)
		goto error_writes;
	if (gw->cfg->upstream_api_s3 && !(px->sigs = fg_sigv4_cache_create()))
		goto error_sigs;
	return px;

error_sigs:
	fg_writes_destroy(px->writes);
error_writes:
	fg_xfers_destroy(px->xfers);
error_xfers:
	free(px);
	return NULL;
}

unsigned fg_proxy_end_writes(struct fg_proxy *px)
{
	return px ? fg_writes_end_all(px->writes) : 0;
}

void fg_proxy_shutdown(struct fg_proxy *px)
{
	if (!px)
		return;
	fg_xfers_shutdown(px->xfers);
}

void fg_proxy_store_closed(struct fg_proxy *px)
{
	px->as = NULL;
}

void fg_proxy_destroy(struct fg_proxy *px)
{
	if (!px)
		return;
	/* the transfers first: a transfer freed takes its write out of the
	 * table */
	fg_xfers_destroy(px->xfers);
	fg_writes_destroy(px->writes);
	fg_sigv4_cache_destroy(px->sigs);
	free(px);
}

static enum MHD_Result respond_released(struct fg_req *req,
					struct MHD_Connection *c,
					const char *method,
					const struct fg_fence *f)
{
	const struct fg_fence_lock *m = fg_fence_first_write(f);
	record_refusal(req, method, m->lock, FG_E_STALE_TOKEN, m->token);
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
	if (req->flow->dest_raw) {
		char url[URL_MAX];
		if (fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					    req->flow->dest_raw, req->flow->dest_raw_len,
					    url, sizeof(url)) != 0)
			return false;
		int len = snprintf(dest, FG_HDR_LINE_MAX, "Destination: %s", url);
		if (len < 0 || len >= FG_HDR_LINE_MAX)
			return false;
		extra[n++] = dest;
	}
	if (f && cfg->forward_token) {
		/* (64 bytes: the name and at most 20 digits) */
		memcpy(token, "Fencing-Token: ", 15);
		size_t tl = 15 + fg_digits(token + 15, fg_fence_first_write(f)->token);
		token[tl] = '\0';
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
	req->flow->state = FLOW_ANSWERED; /* unless it starts */
	if (!px->base[0]) {
		if (fenced)
			give_back(req->loop, &req->flow->fence);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"no upstream is configured", NULL);
	}
	struct fg_xfer *x = fg_xfer_create(px->xfers, c);
	if (!x) {
		if (fenced)
			give_back(req->loop, &req->flow->fence);
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	/* the request's reference: a transfer not begun stays, answered,
	 * until the request completes */
	req->flow->xfer = x;
	struct pwrite *pw = NULL;
	if (fenced) {
		pw = calloc(1, sizeof(*pw));
		if (!pw)
			goto error_build;
		pw->px = px;
		pw->x = x;
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
			return respond_released(req, c, method, f);
		}
	}
	char url[URL_MAX], dest[FG_HDR_LINE_MAX], token[64];
	const char *extra[3];
	struct fg_s3part *s3 = req->flow->s3;
	if (s3 ? !fg_s3part_upstream(s3, px->gw->cfg, req->body_length_given,
				     req->body_length, (int64_t)time(NULL), px->sigs) ||
		 !fg_s3part_url(s3, px->gw->cfg, url, sizeof(url))
	       : !join_url(url, sizeof(url), px->base, req->uri))
		goto error_write;
	if (!flow_headers(px, req, fenced ? f : NULL, dest, token, extra))
		goto error_write;
	struct fg_xfer_spec spec = {
		.url = url,
		.method = method,
		.hdr_flags = req->flow->shallow ? FG_HDR_SHALLOW : 0,
		.tls = fg_tls_on(),
		.host = req->target_host,
		.extra = extra,
		.chunked = req->body_chunked,
		.length = req->body_length,
		.length_given = req->body_length_given,
	};
	if (s3) {
		spec.hdr_flags |= FG_HDR_S3;
		spec.s3 = &s3->sign;
		if (s3->r.needs_body) {
			/* read whole for its checks: sent as it came */
			spec.whole_body = s3->body ? s3->body : "";
			spec.whole_body_len = s3->body_len;
		}
	}
	struct fg_xfer_hooks hooks = {
		.may_send = gate,
		.done = on_xfer_done,
		.freed = on_xfer_freed,
		.arg = pw,
	};
	if (fg_xfer_start(x, &spec, pw ? &hooks : NULL) != 0)
		goto error_write;
	/* a streaming-signed body's chunks are signed again on the chain
	 * the head's signature (just made) seeds; nothing went yet */
	if (s3 && fg_s3part_streaming(s3) &&
	    fg_s3part_chunk_start(s3, px->gw->cfg, req->flow->decoded, px->sigs) != 0) {
		fg_xfer_end_now(x);
		return fg_respond_error(c, FG_E_INTERNAL, "cannot sign the body's "
					"chunks again", NULL);
	}
	if (pw)
		fg_writes_kick(px->writes); /* its deadline is looked at */
	req->flow->state = FLOW_STREAMING;
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
		give_back(req->loop, &req->flow->fence);
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
	if (req->flow->probe_path)
		return true;
	if (!req->flow->probe_dest)
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
	req->flow->state = FLOW_ANSWERED; /* unless the question is asked */
	/* the request path first (a MOVE's), then the Destination */
	bool path = req->flow->probe_path;
	if (path)
		req->flow->probe_path = false;
	else
		req->flow->probe_dest = false;
	if (!px->base[0] ||
	    (path ? !join_url(url, sizeof(url), px->base, req->uri)
		  : fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					    req->flow->dest_raw, req->flow->dest_raw_len,
					    url, sizeof(url)) != 0))
		goto error;
	x = fg_xfer_create(px->xfers, c);
	if (!x)
		goto error;
	/* the client's own headers (its credentials for the storage, its
	 * User-Agent): the storage answers the probe as it will the write */
	static const char *const extra[] = { "Content-Type: application/xml",
					     "Accept-Encoding: identity", NULL };
	struct fg_xfer_spec spec = {
		.url = url,
		.method = "PROPFIND",
		.hdr_flags = FG_HDR_PROBE,
		.tls = fg_tls_on(),
		.host = req->target_host,
		.extra = extra,
		.kept_body = PROBE_BODY,
		.kept_body_len = sizeof(PROBE_BODY) - 1,
	};
	if (fg_xfer_start(x, &spec, NULL) != 0)
		goto error_xfer;
	req->flow->xfer = x; /* its connection waits for the answer */
	req->flow->state = FLOW_PROBING;
	return MHD_YES;

error_xfer:
	fg_xfer_put(x);
error:
	give_back(req->loop, &req->flow->fence);
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

/* Is the probe's answer XML as the gateway reads it: bytes as sent (no
 * Content-Encoding but identity: a gzipped answer names no collection
 * the gateway could see), an XML type if a type is given, in a charset
 * where "collection" is its ASCII bytes? The client's Accept-Encoding and
 * Accept-Charset do not reach the probe (headers.c), but a storage may
 * encode on its own. */
static bool probe_readable(const struct fg_xfer *x)
{
	unsigned n;
	const char *ce = fg_xfer_kept_header(x, "Content-Encoding", &n);
	if (n > 1 || (ce && strcasecmp(ce, "identity") != 0))
		return false;
	const char *ct = fg_xfer_kept_header(x, "Content-Type", &n);
	if (n > 1)
		return false;
	if (!ct)
		return true;
	if (!strcasestr(ct, "xml"))
		return false;
	const char *cs = strcasestr(ct, "charset=");
	if (!cs)
		return true;
	cs += 8;
	if (*cs == '"')
		cs++;
	static const char *const ascii[] = { "utf-8", "us-ascii", "iso-8859-1" };
	for (size_t i = 0; i < sizeof(ascii) / sizeof(ascii[0]); i++) {
		size_t l = strlen(ascii[i]);
		if (strncasecmp(cs, ascii[i], l) == 0 &&
		    (cs[l] == '\0' || cs[l] == '"' || cs[l] == ';' ||
		     cs[l] == ' ' || cs[l] == '\t'))
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
	struct fg_xfer *x = req->flow->xfer;
	int status;
	const char *body;
	size_t len;
	if (!fg_xfer_kept(x, &status, &body, &len))
		return MHD_YES; /* suspended until it ends */
	bool answered = status != 0;
	bool readable = answered && status == 207 && probe_readable(x);
	bool coll = readable && names_collection(body, len);
	req->flow->xfer = NULL;
	fg_xfer_put(x); /* the request's: the probe ended */
	req->flow->state = FLOW_ANSWERED; /* unless asked again or started */
	if (fg_loop_client_gone(c)) {
		give_back(req->loop, &req->flow->fence);
		return MHD_NO;
	}
	/* Only a 207 that names no collection, or a 404 (nothing there),
	 * says it is not one; a redirect, a refusal or a failure says
	 * nothing, and the write is not risked on it. */
	if (!answered || !((status == 207 && readable && !coll) || status == 404)) {
		char msg[128];
		if (answered && status == 207 && !readable)
			snprintf(msg, sizeof(msg), "the upstream's answer to whether "
				 "the path is a collection came encoded (it must be XML "
				 "as sent)");
		else if (answered)
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection (it answered %d)", status);
		else
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection");
		give_back(req->loop, &req->flow->fence);
		if (coll)
			return fg_respond_error(c, FG_E_SUBTREE_UNGUARDED,
				"the upstream holds a collection there, and one lock "
				"does not guard all of it", NULL);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE, msg, NULL);
	}
	if (wants_probe(req, c))
		return probe_start(req, c);
	return start(req, c, method, &req->flow->fence, true);
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
	struct fg_req *req = arg;
	struct fg_xfer *x = req->flow->xfer;
	struct pwrite *pw = fg_xfer_owner(x);
	if (!err && chk->has_current) {
		pw->cur_known = true;
		pw->cur = chk->current;
	}
	fg_park_resume(&req->flow->park);
	fg_xfer_put(x);
}

/* The request body is in and the response head is known, or the transfer
 * ended: answer. */
/* A write its owner cut (its lease ran out, its grant went, the gateway
 * stopped) before the upstream answered. */
static enum MHD_Result respond_cut(struct fg_req *req, struct MHD_Connection *c,
				   struct pwrite *pw)
{
	struct fg_xfer *x = req->flow->xfer;
	if (pw->w.stopped)
		/* the gateway's own stop, not the lease, ended it */
		return fg_respond_error(c, FG_E_SHUTTING_DOWN, pw->w.grace
			? "the gateway stopped (drain-timeout-ms) before the "
			  "upstream answered the write; it hung up, and the "
			  "upstream may have applied it"
			: "the gateway stopped (drain-timeout-ms) before the "
			  "write finished; it was aborted upstream", NULL);
	bool released = pw->w.released;
	/* cut off after its whole request had left: the
	 * upstream may have applied it, and the answer says so */
	bool sent = pw->w.grace;
	/* a rare answer: worth one more round trip for "current" */
	const struct fg_fence_lock *m = fg_fence_first_write(&pw->fence);
	if (!pw->cur_asked) {
		pw->cur_asked = true;
		fg_xfer_hold(x);
		if (pw->px->as &&
		    fg_alock_check(pw->px->as, m->lock, m->token,
				   on_current, req) == FG_OK) {
			fg_park_suspend(&req->flow->park, req->loop,
					c, NULL, NULL, NULL);
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

static enum MHD_Result respond(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_xfer *x = req->flow->xfer;
	struct fg_xfer_answer a = fg_xfer_answer(x, fg_tls_on() ? "https" : "http",
						 fg_req_host(req, c));
	switch (a.kind) {
	case FG_XFER_TOO_MANY_HEADERS:
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"the upstream sent more headers than the gateway forwards",
					NULL);
	case FG_XFER_FAILED: {
		struct pwrite *pw = a.owner;
		if (pw && pw->w.deadline_hit)
			return respond_cut(req, c, pw);
		enum fg_error e = a.failure == FG_XFER_TIMEOUT ? FG_E_UPSTREAM_TIMEOUT
							       : FG_E_UPSTREAM_UNAVAILABLE;
		return fg_respond_error(c, e, a.why, NULL);
	}
	case FG_XFER_BROKE_AFTER_HEAD: {
		/* The head came, then the answer broke before a byte of its
		 * body: a head sent now would promise a body that never
		 * follows (and libmicrohttpd 0.9.75 leaves such a connection
		 * hanging), so the client is told what happened instead. */
		int up_status = (int)a.status;
		char msg[256];
		snprintf(msg, sizeof(msg), "the upstream's answer (%d) broke off after "
			 "its head (%s); a write may have been applied", up_status,
			 a.why ? a.why : "timeout");
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE, msg,
					json_pack("{s:i}", "upstream_status", up_status));
	}
	case FG_XFER_ANSWERED:
		break;
	}
	if (!a.response)
		return MHD_NO;
	enum MHD_Result ret = MHD_queue_response(c, a.status, a.response);
	MHD_destroy_response(a.response);
	fg_rec_answered(a.status, -1, 0); /* the body is counted as sent */
	return ret;
}

/* ---- the fencing flow --------------------------------------------------- */

static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method);

/* Notes a verdict that decides the request in its record. */
static void note_verdict(struct fg_req *req, enum fg_fencing v)
{
	struct fg_rec *r = &req->rec;
	if (v == FG_FENCING_PENDING || v == FG_FENCING_WAIT)
		return;
	r->fenced = req->flow->fence.n > 0 || v != FG_FENCING_PASS;
	if (r->fenced)
		r->admit_ns = (int64_t)(fg_rec_now_ns() - r->fence_t0_ns);
	if (v == FG_FENCING_PASS)
		r->decision = req->flow->fence.n > 0 ? FG_DEC_CHECKED : FG_DEC_PASS;
	else if (v == FG_FENCING_ADMITTED)
		r->decision = FG_DEC_ADMITTED;
	else if (r->decision == FG_DEC_NONE) {
		/* answered without a refusal of its own: Redis down and the
		 * like; its error is the reason */
		r->decision = FG_DEC_REFUSED;
		r->refusal = r->error;
	}
}

/* The fencing went as far as it goes now: on to the state it leads to. */
static enum MHD_Result decided(struct fg_req *req, struct MHD_Connection *c,
			       const char *method, enum fg_fencing v)
{
	struct fg_flow *fl = req->flow;
	note_verdict(req, v);
	switch (v) {
	case FG_FENCING_PENDING:
		fl->state = FLOW_CHECKING; /* parked until Redis answers */
		return MHD_YES;
	case FG_FENCING_PASS:
		return start(req, c, method, NULL, false);
	case FG_FENCING_ADMITTED:
		if (wants_probe(req, c))
			return probe_start(req, c);
		return start(req, c, method, &fl->fence, true);
	case FG_FENCING_WAIT:
		return wait_admission(req, c, method);
	case FG_FENCING_ANSWERED:
	default:
		fl->state = FLOW_ANSWERED;
		return MHD_YES;
	}
}

/* WAITING is over (the wait loop admitted the waiting member, refused it,
 * or could not ask). */
static enum MHD_Result waited(struct fg_req *req, struct MHD_Connection *c,
			      const char *method)
{
	struct fg_flow *fl = req->flow;
	struct fg_admit a;
	uint64_t deadline_at;
	enum fg_admission_result res = fg_admitq_result(fl->admission, &a, &deadline_at);
	fg_admitq_drop(fl->admission);
	fl->admission = NULL;
	if (res == FG_ADMISSION_ADMITTED)
		return decided(req, c, method,
			       fencing_wait_admitted(req, c, method, deadline_at));
	fl->state = FLOW_ANSWERED;
	enum MHD_Result ret;
	switch (res) {
	case FG_ADMISSION_REFUSED:
		ret = fencing_wait_refused(req, c, method, &a);
		break;
	case FG_ADMISSION_GONE:
		return MHD_NO; /* nobody is answered: nothing was decided */
	case FG_ADMISSION_STOPPING:
		ret = fg_respond_error(c, FG_E_SHUTTING_DOWN, "this gateway is "
				       "shutting down; the write was not forwarded",
				       NULL);
		break;
	default:
		ret = fg_respond_store_error(c, FG_EUNAVAIL);
		break;
	}
	/* a refusal after waiting is a fence's decision like one before it:
	 * counted by reason, with its time to decide */
	note_verdict(req, FG_FENCING_ANSWERED);
	return ret;
}

/* Parks a write until the wait loop admits its waiting member. */
static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method)
{
	struct fg_flow *fl = req->flow;
	const struct fg_fence_lock *m = &fl->fence.m[fl->fence.waiting];
	fl->admission = fg_admitq_new(req->loop->px->aq, m->lock, m->token,
				      fl->fence.write_id,
				      req->gw->cfg->fence_margin_ms,
				      req->gw->cfg->write_max_ms);
	if (!fl->admission) {
		fl->state = FLOW_ANSWERED;
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	fl->state = FLOW_WAITING;
	if (fg_admitq_park(fl->admission, c, fl->fence.ms))
		return MHD_YES;
	return waited(req, c, method);
}

static bool bodyless_read(const char *method)
{
	return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	       strcmp(method, "OPTIONS") == 0;
}

/* The WebDAV headers the gateway decides by (which objects a request
 * touches, whether it replaces a collection) each have one value: sent
 * twice, the gateway would check one and a storage might act on the
 * other. Nor may a Connection header name one: the forwarded request
 * leaves out what Connection names (headers.h), and a storage that misses
 * `Overwrite: F` takes T and replaces a collection the gateway never
 * asked about, one that misses `Depth: 0` walks the whole tree. */
static const char *const single_headers[] = { "Depth", "Overwrite", "Destination" };
#define NSINGLE (sizeof(single_headers) / sizeof(single_headers[0]))


/* Headers by which some storages (and the frameworks in front of them)
 * let a request name another method than its own: a GET that says
 * DELETE would be checked as a read. A request may carry one only to
 * name its own method. */
static const char *const override_headers[] = {
	"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override",
};
#define NOVERRIDE (sizeof(override_headers) / sizeof(override_headers[0]))

/* What one pass over the headers finds of the above. */
struct singles {
	unsigned n[NSINGLE];
	const char *dropped;  /* a single one a Connection header names */
	const char *method;
	const char *override; /* an override header naming another method */
};

static enum MHD_Result look_single(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *value)
{
	struct singles *s = cls;
	(void)kind;
	bool conn = strcasecmp(key, "Connection") == 0;
	for (size_t i = 0; i < NSINGLE; i++) {
		if (strcasecmp(key, single_headers[i]) == 0)
			s->n[i]++;
		else if (conn && !s->dropped &&
			 fg_hdr_in_connection(value, single_headers[i]))
			s->dropped = single_headers[i];
	}
	for (size_t i = 0; i < NOVERRIDE && !s->override; i++)
		if (strcasecmp(key, override_headers[i]) == 0 &&
		    strcasecmp(value ? value : "", s->method) != 0)
			s->override = override_headers[i];
	return MHD_YES;
}

/* Why the headers the gateway decides by cannot be forwarded as checked
 * (a single-valued one came twice, or a Connection header names one; a
 * method-override header names another method), in MSG; false if they
 * can. */
static bool singles_refused(struct MHD_Connection *c, const char *method,
			    char *msg, size_t cap)
{
	struct singles s = { { 0 }, NULL, method, NULL };
	MHD_get_connection_values(c, MHD_HEADER_KIND, look_single, &s);
	for (size_t i = 0; i < NSINGLE; i++) {
		if (s.n[i] > 1) {
			snprintf(msg, cap, "more than one %s header", single_headers[i]);
			return true;
		}
	}
	if (s.dropped) {
		snprintf(msg, cap, "Connection names %s, which the gateway decides by "
			 "and forwards as it checked it", s.dropped);
		return true;
	}
	if (s.override) {
		snprintf(msg, cap, "%s names another method than the request's "
			 "own, which is the one checked", s.override);
		return true;
	}
	return false;
}

/* ---- S3 mode -------------------------------------------------------------- */

/* An S3 request refused before any lock was checked: what it is, or
 * which locks guard it, could not be told. It is no event: an event is
 * a lock's, shown under its name (the refusals of the fence, which has
 * the lock, are recorded by refuse()). */
static enum MHD_Result s3_refuse(struct MHD_Connection *c, enum fg_s3_refusal r)
{
	if (r == FG_S3_MALFORMED_XML)
		return fg_respond_s3(c, FG_S3N_MALFORMED_XML, NULL, false);
	struct fg_s3_errdef d = fg_s3_refusal_answer(r);
	enum fg_error e = r == FG_S3_BAD_LOCK_NAME ? FG_E_BAD_LOCK_NAME
		: r == FG_S3_SUBTREE_UNGUARDED ? FG_E_SUBTREE_UNGUARDED
		: r == FG_S3_NO_MEMORY ? FG_E_INTERNAL
		: FG_E_BAD_REQUEST;
	return fg_respond_error(c, e, d.message, NULL);
}

/* The write set is known (for DeleteObjects, once its body is in): the
 * rights on it, then the checks, as every other write. */
static enum MHD_Result s3_check(struct fg_req *req, struct MHD_Connection *c,
				const char *method)
{
	struct fg_flow *fl = req->flow;
	struct fg_s3part *s3 = fl->s3;
	fl->state = FLOW_ANSWERED; /* unless the checks begin */
	if (s3->body_over)
		return fg_respond_s3(c, FG_S3N_MALFORMED_XML,
				     "the DeleteObjects body is over 2 MiB", false);
	enum fg_s3_refusal r = fg_s3_locks_build(req->gw->cfg, &s3->r, s3->body,
						 s3->body_len, &s3->locks);
	if (r != FG_S3_OK)
		return s3_refuse(c, r);
	enum MHD_Result ret;
	if (!fg_access_s3_may(req, c, &s3->r, &s3->locks, &ret))
		return ret;
	bool fenced_read = s3->r.read &&
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Fencing-Token");
	struct fg_writeset ws;
	fg_s3part_writeset(s3, fenced_read, &ws);
	req->rec.fence_t0_ns = fg_rec_now_ns();
	return decided(req, c, method, fencing_start(req, c, method, &ws));
}

/* NEW in S3 mode: who signed it first (nothing is learnt of the locks
 * before), then what it is. */
static enum MHD_Result s3_head(struct fg_req *req, struct MHD_Connection *c,
			       const char *method)
{
	struct fg_flow *fl = req->flow;
	fl->s3 = fg_s3part_new();
	if (!fl->s3)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	struct fg_s3part *s3 = fl->s3;
	enum MHD_Result ret;
	/* what the checks are decided by, and what proves who signed, each
	 * once: a store might act on the value the gateway did not look at */
	static const char *const once[] = {
		"Authorization", "x-amz-date", "x-amz-security-token",
		"x-amz-content-sha256", "x-amz-copy-source",
		"x-amz-decoded-content-length", "Fencing-Token",
	};
	for (size_t i = 0; i < sizeof(once) / sizeof(once[0]); i++) {
		const char *v;
		if (fg_header_count(c, once[i], &v) > 1) {
			char msg[96];
			snprintf(msg, sizeof(msg), "more than one %s header", once[i]);
			return fg_respond_s3(c, FG_S3N_INVALID_REQUEST, msg, true);
		}
	}
	if (!fg_access_s3(req, c, &s3->auth, &s3->up, &ret))
		return ret;
	struct fg_s3_head h = {
		.method = method,
		.target = req->uri,
		.host = fg_req_host(req, c),
		.copy_source = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							   "x-amz-copy-source"),
		.content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							    MHD_HTTP_HEADER_CONTENT_TYPE),
	};
	enum fg_s3_refusal r = fg_s3_classify(req->gw->cfg, &h, &s3->r);
	if (r != FG_S3_OK)
		return s3_refuse(c, r);
	if (fg_s3part_streaming(s3)) {
		/* its chunks are checked against this many bytes of data */
		const char *d = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							    "x-amz-decoded-content-length");
		char *end = NULL;
		unsigned long long v = d && *d >= '0' && *d <= '9' ? strtoull(d, &end, 10) : 0;
		if (!end || *end || s3->r.needs_body)
			return fg_respond_s3(c, FG_S3N_INVALID_REQUEST,
					     "a streaming-signed body needs "
					     "x-amz-decoded-content-length", true);
		fl->decoded = v;
	}
	if (s3->r.needs_body) {
		if (req->body_length_given && req->body_length > FG_S3_DELETE_BODY_MAX)
			return fg_respond_s3(c, FG_S3N_MALFORMED_XML,
					     "the DeleteObjects body is over 2 MiB", true);
		fl->state = FLOW_S3BODY;
		return MHD_YES;
	}
	return s3_check(req, c, method);
}

/* S3BODY: a DeleteObjects body comes in; once whole, the checks. */
static enum MHD_Result s3_body(struct fg_req *req, struct MHD_Connection *c,
			       const char *method, const char *upload,
			       size_t *upload_size)
{
	struct fg_s3part *s3 = req->flow->s3;
	if (*upload_size) {
		req->rec.bytes_in += *upload_size;
		bool ok = fg_s3part_body(s3, upload, *upload_size);
		*upload_size = 0;
		if (!ok) {
			req->flow->state = FLOW_ANSWERED;
			return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		}
		return MHD_YES;
	}
	return s3_check(req, c, method);
}

/* NEW: the request's head, once: what is refused before any lock is
 * looked at, the write set, the access step, then the checks. */
static enum MHD_Result head(struct fg_req *req, struct MHD_Connection *c,
			    const char *method)
{
	req->flow->state = FLOW_ANSWERED; /* unless the checks begin */
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
	char msg[128];
	if (singles_refused(c, method, msg, sizeof(msg)))
		return fg_respond_error_close(c, FG_E_BAD_REQUEST, msg);
	if (req->gw->cfg->upstream_api_s3)
		return s3_head(req, c, method);
	struct fg_writeset ws;
	bool has_token = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     "Fencing-Token") != NULL;
	enum fg_error e = fg_writeset_build(
		req->gw->cfg, method, req->uri,
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Destination"),
		fg_req_host(req, c), has_token, &ws);
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
	req->flow->shallow = ws.shallow;
	req->flow->probe_path = ws.probe_path;
	req->flow->probe_dest = ws.probe_dest;
	if (ws.has_dest) {
		/* ws.dest_raw points into the Destination header, which
		 * lives as long as the request */
		req->flow->dest_raw = ws.dest_raw;
		req->flow->dest_raw_len = ws.dest_raw_len;
	}
	req->rec.fence_t0_ns = fg_rec_now_ns();
	return decided(req, c, method, fencing_start(req, c, method, &ws));
}

/* STREAMING: the body goes up as it comes; once it is in, the answer is
 * given from the upstream's head (or from what ended the transfer). */
/* A streaming-signed body's chunks that failed: the transfer ends at once,
 * before the upstream has the whole body; the rest of the body is read
 * and dropped, and the client told why once it is in (an answer queued
 * mid-body would wait behind the body). */
static enum MHD_Result chunk_failed(struct fg_req *req, enum fg_awschunk_err e)
{
	struct fg_s3part *s3 = req->flow->s3;
	fg_xfer_end_now(req->flow->xfer);
	s3->chunk_err = e;
	fg_log_info("refused %s: a chunk of its streaming-signed body: %s",
		    req->rec.method, fg_awschunk_message(s3->chunk));
	return MHD_YES;
}

static enum MHD_Result chunk_answer(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_s3part *s3 = req->flow->s3;
	req->flow->state = FLOW_ANSWERED;
	bool sig = s3->chunk_err == FG_AWSCHUNK_BAD_SIGNATURE;
	return fg_respond_s3(c, sig ? FG_S3N_SIGNATURE_DOES_NOT_MATCH
				    : FG_S3N_INVALID_REQUEST,
			     sig ? "a chunk's signature does not match; the upload "
				   "was ended before the store had all of it"
				 : fg_awschunk_message(s3->chunk), true);
}

/* Hands the transfer what the chunk checker emitted; true when it took
 * all of it (else the connection is suspended until it has room). */
static bool chunk_drain(struct fg_req *req)
{
	struct fg_s3part *s3 = req->flow->s3;
	if (s3->out_len == 0)
		return true;
	size_t left = s3->out_len;
	fg_xfer_feed(req->flow->xfer, s3->out, &left);
	memmove(s3->out, s3->out + (s3->out_len - left), left);
	s3->out_len = left;
	return left == 0;
}

/* STREAMING, a streaming-signed body: the client's bytes go through the
 * chunk checker, and only what it emits goes up. */
static enum MHD_Result stream_chunks(struct fg_req *req, struct MHD_Connection *c,
				     const char *upload, size_t *upload_size)
{
	struct fg_s3part *s3 = req->flow->s3;
	if (s3->chunk_err != FG_AWSCHUNK_OK) {
		/* failed: what still comes is dropped */
		req->rec.bytes_in += *upload_size;
		if (*upload_size) {
			*upload_size = 0;
			return MHD_YES;
		}
		return chunk_answer(req, c);
	}
	if (!chunk_drain(req))
		return MHD_YES; /* the rest of upload waits */
	if (*upload_size) {
		enum fg_awschunk_err e = fg_awschunk_feed(s3->chunk, upload, *upload_size);
		req->rec.bytes_in += *upload_size;
		*upload_size = 0;
		if (e != FG_AWSCHUNK_OK)
			return chunk_failed(req, e);
		chunk_drain(req);
		return MHD_YES;
	}
	if (!s3->chunk_ended) {
		s3->chunk_ended = true;
		enum fg_awschunk_err e = fg_awschunk_end(s3->chunk);
		if (e != FG_AWSCHUNK_OK) {
			chunk_failed(req, e);
			return chunk_answer(req, c);
		}
	}
	if (!chunk_drain(req))
		return MHD_YES; /* called again once the transfer took it */
	if (!fg_xfer_body_end(req->flow->xfer))
		return MHD_YES;
	return respond(req, c);
}

static enum MHD_Result stream(struct fg_req *req, struct MHD_Connection *c,
			      const char *upload, size_t *upload_size)
{
	struct fg_xfer *x = req->flow->xfer;
	if (req->flow->s3 && req->flow->s3->chunk)
		return stream_chunks(req, c, upload, upload_size);
	if (*upload_size) {
		req->rec.bytes_in += fg_xfer_feed(x, upload, upload_size);
		return MHD_YES;
	}
	if (!fg_xfer_body_end(x))
		return MHD_YES; /* suspended until the answer's head */
	return respond(req, c);
}

/* libmicrohttpd's access handler for every request outside /_fence/:
 * called for the head, for each piece of the body, and after each resume;
 * the request's state says what that call is. */
enum MHD_Result fg_proxy_handle(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *upload,
				size_t *upload_size)
{
	struct fg_flow *fl = req->flow;
	if (!fl) {
		if (req->started)
			return MHD_YES; /* answered: out of memory */
		req->started = true;
		fl = req->flow = fg_recycle_get(&req->loop->flow_blocks,
						sizeof(*fl));
		if (!fl)
			return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	switch (fl->state) {
	case FLOW_NEW:
		return head(req, c, method);
	case FLOW_S3BODY:
		return s3_body(req, c, method, upload, upload_size);
	case FLOW_CHECKING:
		return decided(req, c, method, fencing_resume(req, c, method));
	case FLOW_WAITING:
		return waited(req, c, method);
	case FLOW_PROBING:
		return probe_settle(req, c, method);
	case FLOW_STREAMING:
		return stream(req, c, upload, upload_size);
	case FLOW_ANSWERED:
	default:
		return MHD_YES; /* answered already; MHD drains the body */
	}
}

/* What the record keeps of the fence's decision and of the transfer. */
static void note(struct fg_req *req)
{
	const struct fg_fence *f = &req->flow->fence;
	struct fg_rec *r = &req->rec;
	r->write = f->write;
	r->nlocks = f->n;
	for (int i = 0; i < f->n && i < 2; i++) {
		fg_copy(r->locks[i], sizeof(r->locks[i]), f->m[i].lock);
		r->tokens[i] = f->m[i].token;
	}
	struct fg_xfer *x = req->flow->xfer;
	if (!x)
		return;
	int status;
	uint64_t sent;
	fg_xfer_note(x, &status, &req->rec.upstream_ns, &sent);
	req->rec.upstream_status = status;
	req->rec.bytes_out += sent;
}

/* A transfer still running is aborted, a wait let go. */
static void completed(struct fg_req *req)
{
	fg_admitq_drop(req->flow->admission);
	req->flow->admission = NULL;
	struct fg_xfer *x = req->flow->xfer;
	if (!x)
		return;
	req->flow->xfer = NULL;
	if (fg_xfer_is_kept(x)) /* the write it was asked for never starts */
		give_back(req->loop, &req->flow->fence);
	fg_xfer_close(x);
}

void fg_proxy_finish(struct fg_req *req)
{
	if (!req->flow)
		return;
	note(req);
	completed(req);
	fg_s3part_free(req->flow->s3);
	req->flow->s3 = NULL;
	fg_recycle_put(&req->loop->flow_blocks, req->flow);
	req->flow = NULL;
}
