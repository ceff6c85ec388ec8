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
#include <time.h>

#include "fencegate/sequencer.h"
#include "errors.h"
#include "fence.h"
#include "gateway.h"
#include "jsonio.h"
#include "log.h"
#include "waitq.h"

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
	return fg_respond_error(c, e, message, extra);
}

/* A well-signed sequencer that fails a local check may still carry a token
 * beyond any issued for its lock, which the table ranks first. */
static bool forged_token(struct fg_req *req, const struct fg_seq *seq,
			 struct fg_check *chk)
{
	fg_store *st = fg_gateway_store(req->gw);
	return st && fg_lock_check(st, seq->name, seq->token, chk) == FG_OK &&
	       chk->status == FG_CHECK_FORGED;
}

static void log_path(const char *uri, char out[128])
{
	size_t plen = strcspn(uri, "?");
	snprintf(out, 128, "%.*s", (int)(plen > 100 ? 100 : plen), uri);
}

/* The local rows of the table (no Redis unless a sequencer that fails
 * them might be forged) for one member. true when it passed. */
static bool check_local(struct fg_req *req, struct MHD_Connection *c,
			const char *method, const char *path,
			const struct fg_ws_member *m, const struct tokens *t,
			const uint8_t *key, size_t keylen,
			struct fg_fence_lock *out)
{
	unsigned n = t->n[m->header];
	const char *value = t->value[m->header];
	const char *hname = m->header == FG_WS_FENCING_TOKEN ? FT_HEADER : DFT_HEADER;
	char msg[FG_NAME_MAX + 160];
	if (n == 0) {
		snprintf(msg, sizeof(msg), "this write changes what lock %s guards: "
			 "it needs a %s header", m->lock, hname);
		refuse(c, FG_E_TOKEN_REQUIRED, method, path, m->lock, 0, false, 0, msg);
		return false;
	}
	if (n > 1) {
		snprintf(msg, sizeof(msg), "more than one %s header", hname);
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, "", 0, false, 0, msg);
		return false;
	}
	struct fg_seq seq;
	switch (fg_seq_decode(key, keylen, value, strlen(value), &seq)) {
	case FG_SEQ_MALFORMED:
		snprintf(msg, sizeof(msg), "the %s is not a sequencer", hname);
		refuse(c, FG_E_MALFORMED_TOKEN, method, path, "", 0, false, 0, msg);
		return false;
	case FG_SEQ_FORGED:
		refuse(c, FG_E_FORGED_TOKEN, method, path, "", 0, false, 0, NULL);
		return false;
	case FG_SEQ_VALID:
		break;
	}
	bool wrong_lock = strcmp(seq.name, m->lock) != 0;
	bool wrong_mode = m->write && seq.mode == FG_MODE_SHARED;
	if (wrong_lock || wrong_mode) {
		struct fg_check chk;
		if (forged_token(req, &seq, &chk)) {
			refuse(c, FG_E_FORGED_TOKEN, method, path, seq.name, seq.token,
			       chk.has_current, chk.current, NULL);
		} else if (wrong_lock) {
			snprintf(msg, sizeof(msg), "the %s is for another lock than %s, "
				 "which guards this path", hname, m->lock);
			refuse(c, FG_E_WRONG_LOCK, method, path, m->lock, seq.token,
			       false, 0, msg);
		} else {
			refuse(c, FG_E_WRONG_MODE, method, path, m->lock, seq.token,
			       false, 0, NULL);
		}
		return false;
	}
	snprintf(out->lock, sizeof(out->lock), "%s", m->lock);
	out->token = seq.token;
	out->write = m->write;
	return true;
}

/* Sends the finish of one admission from the wait loop. */
struct finish_arg {
	char lock[FG_NAME_MAX + 1];
	char write_id[FG_WAITER_ID_MAX];
};

static void do_finish(fg_astore *as, void *arg)
{
	struct finish_arg *f = arg;
	fg_alock_finish(as, f->lock, f->write_id, NULL, NULL);
	free(f);
}

static void give_back(struct fg_gateway *gw, struct fg_fence *f, int i)
{
	if (!f->m[i].admitted)
		return;
	f->m[i].admitted = false;
	struct finish_arg *a = malloc(sizeof(*a));
	if (!a)
		return; /* the record goes at its deadline */
	memcpy(a->lock, f->m[i].lock, sizeof(a->lock));
	memcpy(a->write_id, f->write_id, sizeof(a->write_id));
	if (fg_waitq_call(gw->wq, do_finish, a))
		free(a);
}

const struct fg_fence_lock *fg_fence_first_write(const struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->m[i].write)
			return &f->m[i];
	return NULL;
}

void fg_fence_finish(struct fg_gateway *gw, struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		give_back(gw, f, i);
}

/* Admits every write member not yet admitted, in order; all or none. */
static enum fg_fence_verdict admit_all(struct fg_req *req, struct MHD_Connection *c,
				       const char *method, const char *path,
				       struct fg_fence *f)
{
	struct fg_gateway *gw = req->gw;
	const struct fg_config *cfg = gw->cfg;
	fg_store *st = fg_gateway_store(gw);
	if (!st) {
		fg_fence_finish(gw, f);
		fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		return FG_FENCE_ANSWERED;
	}
	for (int i = 0; i < f->n; i++) {
		struct fg_fence_lock *m = &f->m[i];
		if (!m->write || m->admitted)
			continue;
		struct fg_admit a;
		uint64_t asked = fg_fence_now_ms();
		int err = fg_lock_admit(st, m->lock, m->token, f->write_id,
					cfg->fence_margin_ms, cfg->write_max_ms, &a);
		if (err) {
			fg_fence_finish(gw, f);
			fg_respond_store_error(c, err);
			return FG_FENCE_ANSWERED;
		}
		if (a.status == FG_ADMITTED) {
			m->admitted = true;
			m->deadline_at = asked + (uint64_t)a.ms;
			continue;
		}
		fg_fence_finish(gw, f);
		if (a.status == FG_ADMIT_WAIT) {
			f->waiting = i;
			f->ms = a.ms;
			return FG_FENCE_WAIT;
		}
		fg_fence_refused(c, method, path, f, i, &a);
		return FG_FENCE_ANSWERED;
	}
	f->deadline_at = 0;
	for (int i = 0; i < f->n; i++)
		if (f->m[i].admitted &&
		    (!f->deadline_at || f->m[i].deadline_at < f->deadline_at))
			f->deadline_at = f->m[i].deadline_at;
	return FG_FENCE_ADMITTED;
}

enum fg_fence_verdict fg_fence_check_or_respond(struct fg_req *req,
						struct MHD_Connection *c,
						const char *method,
						const struct fg_writeset *ws,
						struct fg_fence *out)
{
	struct fg_gateway *gw = req->gw;
	char path[128];
	log_path(req->uri, path);
	memset(out, 0, sizeof(*out));
	if (ws->n == 0)
		return FG_FENCE_PASS;

	struct tokens t = { { 0, 0 }, { NULL, NULL } };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_tokens, &t);
	uint8_t key[FG_KEY_MAX];
	size_t keylen = 0;
	bool have_key = fg_gateway_key(gw, key, &keylen) == FG_OK;
	fg_store *st = fg_gateway_store(gw);
	if (!st) {
		fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		return FG_FENCE_ANSWERED;
	}
	/* The table, member by member, in the write set's order: a member is
	 * judged whole before the next is looked at. A read member is judged
	 * by CheckSequencer; a write member by its admission below, except one
	 * that another member follows, which is checked first (COPY and MOVE
	 * across two locks pay that one round trip). */
	for (int i = 0; i < ws->n; i++) {
		const struct fg_ws_member *m = &ws->m[i];
		if (t.n[m->header] > 0 && !have_key) {
			fg_respond_store_error(c, FG_ENOKEY);
			return FG_FENCE_ANSWERED;
		}
		struct fg_fence_lock *fl = &out->m[i];
		if (!check_local(req, c, method, path, m, &t, key, keylen, fl))
			return FG_FENCE_ANSWERED;
		out->write = out->write || m->write;
		if (m->write && i + 1 == ws->n)
			continue;
		struct fg_check chk;
		int err = fg_lock_check(st, fl->lock, fl->token, &chk);
		if (err) {
			fg_respond_store_error(c, err);
			return FG_FENCE_ANSWERED;
		}
		if (chk.status != FG_CHECK_VALID) {
			refuse(c, chk.status == FG_CHECK_FORGED ? FG_E_FORGED_TOKEN
								: FG_E_STALE_TOKEN,
			       method, path, fl->lock, fl->token, chk.has_current,
			       chk.current, NULL);
			return FG_FENCE_ANSWERED;
		}
	}
	out->n = ws->n;
	if (!out->write)
		return FG_FENCE_PASS;
	unsigned long long seqno = atomic_fetch_add(&gw->waiter_seq, 1) + 1;
	snprintf(out->write_id, sizeof(out->write_id), "%s-w%llu", gw->id, seqno);
	return admit_all(req, c, method, path, out);
}

enum fg_fence_verdict fg_fence_admit_rest_or_respond(struct fg_req *req,
						     struct MHD_Connection *c,
						     const char *method,
						     struct fg_fence *f)
{
	char path[128];
	log_path(req->uri, path);
	f->m[f->waiting].admitted = true;
	return admit_all(req, c, method, path, f);
}

uint64_t fg_fence_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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
