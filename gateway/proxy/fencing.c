/*
 * fencing.c - the driver of the fence's check table for a proxied request:
 * reads its fencing headers, hands the table the key and the time, makes
 * the Redis calls it asks for (one at a time, the connection suspended
 * meanwhile), gives back admissions, and answers and logs a refusal.
 *
 * Invariants: every Redis call sent here suspends the connection once,
 * and its answer resumes it once (fg_loop_resume(), which also wakes the
 * daemon). Whatever the table decides other than PASS or ADMITTED, the
 * request leaves holding no admission. A refusal's log line names the
 * lock and the token numbers, never a sequencer or a lease.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/record.h"
#include "http/respond.h"
#include "proc/gateway.h"
#include "rt/rt.h"
#include "proxy/fencing.h"

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

/* Answers and logs the fence's refusal. */
static enum MHD_Result refuse(struct MHD_Connection *c, const char *method,
			      const char *path, const struct fg_fence *f)
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
	return fg_respond_error(c, e, message, extra);
}

static void log_path(const char *uri, char out[128])
{
	size_t plen = strcspn(uri, "?");
	snprintf(out, 128, "%.*s", (int)(plen > 100 ? 100 : plen), uri);
}

void fg_fencing_finish(struct fg_loop *loop, struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		/* without Redis, the record goes at its recorded end */
		if (fg_fence_give_back(f, i) && loop->as)
			fg_alock_finish(loop->as, f->m[i].lock, f->write_id,
					NULL, NULL);
}

/* ---- Redis calls: one at a time, the request suspended meanwhile ------- */

static void on_checked(int err, const struct fg_check *chk, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	fg_fence_check_answer(&req->fence, err, chk);
	fg_loop_resume(req->loop, req->conn);
}

static void on_admitted(int err, const struct fg_admit *a, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	fg_fence_admit_answer(&req->fence, err, a);
	fg_loop_resume(req->loop, req->conn);
}

/* A verdict: what it leaves to do here (give back, answer) is done. */
static enum fg_fencing settle(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *path,
			      enum fg_fence_step s)
{
	struct fg_fence *f = &req->fence;
	switch (s) {
	case FG_FENCE_PENDING:
		return FG_FENCING_PENDING; /* resumed for another reason */
	case FG_FENCE_PASS:
		return FG_FENCING_PASS;
	case FG_FENCE_ADMITTED:
		return FG_FENCING_ADMITTED;
	case FG_FENCE_WAIT:
		fg_fencing_finish(req->loop, f);
		return FG_FENCING_WAIT;
	case FG_FENCE_REFUSED:
		fg_fencing_finish(req->loop, f);
		refuse(c, method, path, f);
		return FG_FENCING_ANSWERED;
	case FG_FENCE_FAILED:
	default:
		fg_fencing_finish(req->loop, f);
		fg_respond_store_error(c, f->err);
		return FG_FENCING_ANSWERED;
	}
}

/* Steps the table until it is decided or waits for Redis. The key and the
 * clock are read only for a request the table checks. */
static enum fg_fencing run(struct fg_req *req, struct MHD_Connection *c,
			   const char *method)
{
	struct fg_fence *f = &req->fence;
	const struct fg_config *cfg = req->gw->cfg;
	fg_astore *as = req->loop->as;
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
		MHD_suspend_connection(c);
		return FG_FENCING_PENDING;
	}
}

enum fg_fencing fg_fencing_start(struct fg_req *req, struct MHD_Connection *c,
				 const char *method, const struct fg_writeset *ws)
{
	struct tokens t = { { 0, 0 }, { NULL, NULL } };
	/* the header values live as long as the request */
	if (ws->n > 0)
		MHD_get_connection_values(c, MHD_HEADER_KIND, count_tokens, &t);
	fg_fence_start(&req->fence, ws, t.value, t.n);
	return run(req, c, method);
}

enum fg_fencing fg_fencing_resume(struct fg_req *req, struct MHD_Connection *c,
				  const char *method)
{
	return run(req, c, method);
}

enum fg_fencing fg_fencing_wait_admitted(struct fg_req *req,
					 struct MHD_Connection *c,
					 const char *method,
					 uint64_t deadline_at)
{
	fg_fence_wait_admitted(&req->fence, deadline_at);
	return run(req, c, method);
}

enum MHD_Result fg_fencing_wait_refused(struct fg_req *req,
					struct MHD_Connection *c,
					const char *method,
					const struct fg_admit *a)
{
	/* nothing is held: what the other members were admitted under was
	 * given back when the wait began */
	fg_fence_wait_refused(&req->fence, a);
	return refuse(c, method, "-", &req->fence);
}
