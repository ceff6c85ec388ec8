/*
 * fence.c - the fencing checks of the proxy (the contract's table), for
 * every lock of a request's write set.
 *
 * Invariant: nothing is forwarded unless fg_fence_check_or_respond()
 * returned PASS or ADMITTED (or a WAIT that was later admitted) for every
 * member of the write set; every refusal is decided before the request
 * body is read, so a refused write leaves nothing upstream. A write holds
 * admissions either for all its write members or for none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fencegate/sequencer.h"
#include "http/respond.h"
#include "fence/fence.h"
#include "proc/gateway.h"
#include "base/jsonio.h"
#include "base/clock.h"
#include "base/log.h"
#include "rt/rt.h"

#define FT_HEADER "Fencing-Token"
#define DFT_HEADER "Destination-Fencing-Token"

struct tokens {
	unsigned n[2];
	const char *value[2];
};

static enum MHD_Result count_tokens(void *cls, enum MHD_ValueKind kind,
				    const char *key, const char *value)
{
	struct tokens *t = cls;
	(void)kind;
	int i = strcasecmp(key, FT_HEADER) == 0    ? FG_WS_FENCING_TOKEN
		: strcasecmp(key, DFT_HEADER) == 0 ? FG_WS_DESTINATION_FENCING_TOKEN
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

/* Answers and logs a refusal; the log names the lock and the token numbers,
 * never a sequencer or a lease. */
static enum MHD_Result refuse(struct MHD_Connection *c, enum fg_error e,
			      const char *method, const char *path,
			      const char *lock, uint64_t token, bool has_current,
			      uint64_t current, const char *message)
{
	char cur[24] = "none";
	if (has_current)
		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)current);
	fg_log_info("refused %s %s: %s (lock %s, token %llu, current %s)",
		    method, path, fg_errors[e].code, lock[0] ? lock : "-",
		    (unsigned long long)token, cur);
	json_t *extra = token ? token_fields(token, has_current, current) : NULL;
	fg_rec_refused((int)e, lock, token, has_current, current);
	return fg_respond_error(c, e, message, extra);
}

static void log_path(const char *uri, char out[128])
{
	size_t plen = strcspn(uri, "?");
	snprintf(out, 128, "%.*s", (int)(plen > 100 ? 100 : plen), uri);
}

/* ---- Redis calls: one at a time, the request suspended meanwhile ------- */

static void on_checked(int err, const struct fg_check *chk, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	req->fence.err = err;
	if (!err)
		req->fence.chk = *chk;
	req->fence.replied = true;
	fg_loop_resume(req->loop, req->conn);
}

static void on_admitted(int err, const struct fg_admit *a, void *arg)
{
	struct fg_req *req = arg;
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	req->fence.err = err;
	if (!err)
		req->fence.adm = *a;
	req->fence.replied = true;
	fg_loop_resume(req->loop, req->conn);
}

/* A call was sent (err == 0): the request waits for its answer. */
static enum fg_fence_verdict sent_or_respond(struct fg_req *req,
					     struct MHD_Connection *c, int err)
{
	struct fg_fence *f = &req->fence;
	if (err) {
		fg_fence_finish(req->loop, f);
		fg_respond_store_error(c, err);
		return FG_FENCE_ANSWERED;
	}
	f->busy = true;
	f->replied = false;
	MHD_suspend_connection(c);
	return FG_FENCE_PENDING;
}

static enum fg_fence_verdict send_check(struct fg_req *req,
					struct MHD_Connection *c,
					const char *lock, uint64_t token)
{
	if (!req->loop->as)
		return sent_or_respond(req, c, FG_EUNAVAIL);
	return sent_or_respond(req, c, fg_alock_check(req->loop->as, lock, token,
						      on_checked, req));
}

/* ---- the table, member by member ---------------------------------------- */

enum stage {
	ST_LOCAL,      /* member i: the rows decided without Redis */
	ST_FORGED,     /* member i failed a local row: is its token forged? */
	ST_CHECK,      /* member i: CheckSequencer answered */
	ST_ADMIT,      /* admit the next write member from i */
	ST_ADMITTED,   /* member i: the admit call answered */
};

/* The local rows for member i. FG_FENCE_PASS when they passed (the member
 * is in f->m[i]); PENDING when a Redis call decides; ANSWERED. */
static enum fg_fence_verdict check_local(struct fg_req *req,
					 struct MHD_Connection *c,
					 const char *method, const char *path)
{
	struct fg_fence *f = &req->fence;
	const struct fg_ws_member *m = &f->ws[f->i];
	unsigned n = f->count[m->header];
	const char *value = f->value[m->header];
	const char *hname = m->header == FG_WS_FENCING_TOKEN ? FT_HEADER : DFT_HEADER;
	char msg[FG_NAME_MAX + 160];
	if (n == 0) {
		snprintf(msg, sizeof(msg), "this write changes what lock %s guards: "
			 "it needs a %s header", m->lock, hname);
		refuse(c, FG_E_TOKEN_REQUIRED, method, path, m->lock, 0, false, 0, msg);
		return FG_FENCE_ANSWERED;
	}
	uint8_t key[FG_KEY_MAX];
	size_t keylen = 0;
	if (fg_gateway_key(req->gw, key, &keylen) != FG_OK) {
		fg_respond_store_error(c, FG_ENOKEY);
		return FG_FENCE_ANSWERED;
	}
	if (n > 1) {
		snprintf(msg, sizeof(msg), "more than one %s header", hname);
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, m->lock, 0, false, 0, msg);
		return FG_FENCE_ANSWERED;
	}
	struct fg_seq *seq = &f->seq;
	switch (fg_seq_decode(key, keylen, value, strlen(value), seq)) {
	case FG_SEQ_MALFORMED:
		snprintf(msg, sizeof(msg), "the %s is not a sequencer", hname);
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, m->lock, 0, false, 0, msg);
		return FG_FENCE_ANSWERED;
	case FG_SEQ_FORGED:
		refuse(c, FG_E_FORGED_TOKEN, method, path, m->lock, 0, false, 0, NULL);
		return FG_FENCE_ANSWERED;
	case FG_SEQ_VALID:
		break;
	}
	bool wrong_lock = strcmp(seq->name, m->lock) != 0;
	bool wrong_mode = m->write && seq->mode == FG_MODE_SHARED;
	if (wrong_lock || wrong_mode) {
		/* A well-signed sequencer that fails a local row may still
		 * carry a token beyond any issued for its lock, which the
		 * table ranks first: one round trip decides. */
		f->refusal = wrong_lock ? FG_E_WRONG_LOCK : FG_E_WRONG_MODE;
		f->stage = ST_FORGED;
		return send_check(req, c, seq->name, seq->token);
	}
	struct fg_fence_lock *out = &f->m[f->i];
	memcpy(out->lock, m->lock, sizeof(out->lock));
	out->token = seq->token;
	out->write = m->write;
	return FG_FENCE_PASS;
}

static void refuse_local(struct fg_req *req, struct MHD_Connection *c,
			 const char *method, const char *path)
{
	struct fg_fence *f = &req->fence;
	const struct fg_ws_member *m = &f->ws[f->i];
	const struct fg_seq *seq = &f->seq;
	if (!f->err && f->chk.status == FG_CHECK_FORGED) {
		refuse(c, FG_E_FORGED_TOKEN, method, path, seq->name, seq->token,
		       f->chk.has_current, f->chk.current, NULL);
	} else if (f->refusal == FG_E_WRONG_LOCK) {
		char msg[FG_NAME_MAX + 160];
		snprintf(msg, sizeof(msg), "the %s is for another lock than %s, "
			 "which guards this path",
			 m->header == FG_WS_FENCING_TOKEN ? FT_HEADER : DFT_HEADER,
			 m->lock);
		refuse(c, FG_E_WRONG_LOCK, method, path, m->lock, seq->token,
		       false, 0, msg);
	} else {
		refuse(c, FG_E_WRONG_MODE, method, path, m->lock, seq->token,
		       false, 0, NULL);
	}
}

const struct fg_fence_lock *fg_fence_first_write(const struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->m[i].write)
			return &f->m[i];
	return NULL;
}

void fg_fence_finish(struct fg_loop *loop, struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++) {
		if (!f->m[i].admitted)
			continue;
		f->m[i].admitted = false;
		/* without Redis, the record goes at its recorded end */
		if (loop->as)
			fg_alock_finish(loop->as, f->m[i].lock, f->write_id,
					NULL, NULL);
	}
}

/* Runs the table from where it stands until it is decided or waits for
 * Redis. Admission is all or none: a write member that must wait or is
 * refused gives back what the others were admitted under. */
static enum fg_fence_verdict step(struct fg_req *req, struct MHD_Connection *c,
				  const char *method)
{
	struct fg_fence *f = &req->fence;
	const struct fg_config *cfg = req->gw->cfg;
	char path[128];
	log_path(req->uri, path);
	for (;;) {
		switch (f->stage) {
		case ST_LOCAL: {
			if (f->i == f->nws) {
				f->n = f->nws;
				if (!f->write)
					return FG_FENCE_PASS;
				fg_loop_next_id(req->loop, true, f->write_id,
						sizeof(f->write_id));
				f->stage = ST_ADMIT;
				f->i = 0;
				continue;
			}
			enum fg_fence_verdict v = check_local(req, c, method, path);
			if (v != FG_FENCE_PASS)
				return v;
			const struct fg_ws_member *m = &f->ws[f->i];
			f->write = f->write || m->write;
			/* A read member is judged by CheckSequencer; a write
			 * member by its admission, except one that another
			 * member follows, which is checked first (COPY and
			 * MOVE across two locks pay that round trip). */
			if (m->write && f->i + 1 == f->nws) {
				f->i++;
				continue;
			}
			f->stage = ST_CHECK;
			return send_check(req, c, f->m[f->i].lock, f->m[f->i].token);
		}
		case ST_FORGED:
			refuse_local(req, c, method, path);
			return FG_FENCE_ANSWERED;
		case ST_CHECK: {
			const struct fg_fence_lock *fl = &f->m[f->i];
			if (f->err) {
				fg_respond_store_error(c, f->err);
				return FG_FENCE_ANSWERED;
			}
			if (f->chk.status != FG_CHECK_VALID) {
				refuse(c, f->chk.status == FG_CHECK_FORGED
					   ? FG_E_FORGED_TOKEN : FG_E_STALE_TOKEN,
				       method, path, fl->lock, fl->token,
				       f->chk.has_current, f->chk.current, NULL);
				return FG_FENCE_ANSWERED;
			}
			f->i++;
			f->stage = ST_LOCAL;
			continue;
		}
		case ST_ADMIT: {
			while (f->i < f->n && (!f->m[f->i].write || f->m[f->i].admitted))
				f->i++;
			if (f->i == f->n) {
				f->deadline_at = 0;
				for (int i = 0; i < f->n; i++)
					if (f->m[i].admitted &&
					    (!f->deadline_at || f->m[i].deadline_at < f->deadline_at))
						f->deadline_at = f->m[i].deadline_at;
				return FG_FENCE_ADMITTED;
			}
			struct fg_fence_lock *m = &f->m[f->i];
			f->stage = ST_ADMITTED;
			f->asked = fg_clock_ms();
			int err = req->loop->as
				? fg_alock_admit(req->loop->as, m->lock, m->token,
						 f->write_id, cfg->fence_margin_ms,
						 cfg->write_max_ms, on_admitted, req)
				: FG_EUNAVAIL;
			return sent_or_respond(req, c, err);
		}
		case ST_ADMITTED: {
			struct fg_fence_lock *m = &f->m[f->i];
			if (f->err) {
				fg_fence_finish(req->loop, f);
				fg_respond_store_error(c, f->err);
				return FG_FENCE_ANSWERED;
			}
			if (f->adm.status == FG_ADMITTED) {
				m->admitted = true;
				m->deadline_at = f->asked + (uint64_t)f->adm.ms;
				f->stage = ST_ADMIT;
				continue;
			}
			fg_fence_finish(req->loop, f);
			if (f->adm.status == FG_ADMIT_WAIT) {
				f->waiting = f->i;
				f->ms = f->adm.ms;
				return FG_FENCE_WAIT;
			}
			fg_fence_refused(c, method, path, f, f->i, &f->adm);
			return FG_FENCE_ANSWERED;
		}
		}
	}
}

enum fg_fence_verdict fg_fence_check_or_respond(struct fg_req *req,
						struct MHD_Connection *c,
						const char *method,
						const struct fg_writeset *ws,
						struct fg_fence *out)
{
	memset(out, 0, sizeof(*out));
	if (ws->n == 0)
		return FG_FENCE_PASS;
	struct tokens t = { { 0, 0 }, { NULL, NULL } };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_tokens, &t);
	/* the header values live as long as the request */
	for (int i = 0; i < 2; i++) {
		out->count[i] = t.n[i];
		out->value[i] = t.value[i];
	}
	out->nws = ws->n;
	memcpy(out->ws, ws->m, sizeof(ws->m[0]) * (size_t)ws->n);
	out->stage = ST_LOCAL;
	return step(req, c, method);
}

enum fg_fence_verdict fg_fence_resume_or_respond(struct fg_req *req,
						 struct MHD_Connection *c,
						 const char *method)
{
	struct fg_fence *f = &req->fence;
	if (!f->replied)
		return FG_FENCE_PENDING; /* resumed for another reason */
	f->busy = false;
	f->replied = false;
	return step(req, c, method);
}

enum fg_fence_verdict fg_fence_admit_rest_or_respond(struct fg_req *req,
						     struct MHD_Connection *c,
						     const char *method,
						     struct fg_fence *f)
{
	(void)f;
	req->fence.m[req->fence.waiting].admitted = true;
	req->fence.stage = ST_ADMIT;
	req->fence.i = 0;
	return step(req, c, method);
}

enum MHD_Result fg_fence_refused(struct MHD_Connection *c, const char *method,
				 const char *path, const struct fg_fence *f,
				 int i, const struct fg_admit *a)
{
	const struct fg_fence_lock *m = &f->m[i];
	if (a->status == FG_ADMIT_FORGED)
		return refuse(c, FG_E_FORGED_TOKEN, method, path, m->lock, m->token,
			      a->has_current, a->current, NULL);
	return refuse(c, FG_E_STALE_TOKEN, method, path, m->lock, m->token,
		      a->has_current, a->current,
		      a->status == FG_ADMIT_EXPIRING
			      ? "the lease ends before a write could finish"
			      : NULL);
}
