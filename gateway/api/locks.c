/*
 * locks.c - the lock API under /_fence/v1/: the call a request's route
 * names (base/apiroute.h), request parsing, answers. The semantics live
 * in lockcore; this file only translates. A call's life is its states
 * (enum call_state, below).
 *
 * Invariants: a request that fails validation is answered before anything
 * is sent to Redis, so bad input never changes lock state. A lock call is
 * sent asynchronously on the request's loop, with the connection parked
 * (rt/park.h); its callback only stores the answer and resumes the
 * connection, and the answer is written from libmicrohttpd's handler
 * (take_answer()), the one place a response may be queued.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "access/access.h"
#include "api/api.h"
#include "api/events.h"
#include "api/list.h"
#include "api/ui.h"
#include "http/framing.h"
#include "http/respond.h"
#include "http/req.h"
#include "proc/gateway.h"
#include "base/s3ops.h"
#include "base/clock.h"
#include "proc/held.h"
#include "base/jsonio.h"
#include "base/log.h"
#include "base/openapi.h"
#include "base/writeset.h"
#include "rt/evrec.h"
#include "rt/rt.h"
#include "proc/metrics.h"
#include "rt/park.h"
#include "lockwait/waitq.h"

#define LEASE_MAX 64

/* A bounded copy, as snprintf(dst, cap, "%s", src) makes it, at a
 * fraction of its cost on the lock cycle's path. */
static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static enum MHD_Result bad(struct MHD_Connection *c, const char *msg)
{
	return fg_respond_error(c, FG_E_BAD_REQUEST, msg, NULL);
}

/* What each call's body may hold: a field outside its list is a typo
 * and refused (fg_json_known()), never ignored for a default. */
static const char *const ACQUIRE_FIELDS[] = {
	"ttl_ms", "wait_ms", "mode", "owner", "value", "lock_delay_ms",
	"lease", NULL
};
static const char *const RENEW_FIELDS[] = { "lease", "ttl_ms", "value", NULL };
static const char *const CHECK_FIELDS[] = { "sequencer", NULL };
static const char *const NO_FIELDS[] = { NULL };

/*
 * The request's body as a JSON object whose fields are all in known[]
 * (an empty body is {} when allow_empty), or NULL once the 400 is sent
 * (*ret). hint, when given, follows the message of an unknown field: it
 * says where what was sent belongs. Caller owns the result.
 */
static json_t *body_or_respond(struct fg_req *req, struct MHD_Connection *c,
			       bool allow_empty, const char *call,
			       const char *const known[], const char *hint,
			       enum MHD_Result *ret)
{
	char msg[512];
	json_t *o = fg_json_body(req->body, req->body_len, allow_empty, msg,
				 sizeof(msg));
	if (o && fg_json_known(o, call, known, msg, sizeof(msg)) != 0) {
		size_t len = strlen(msg);
		if (hint && len + strlen(hint) < sizeof(msg))
			memcpy(msg + len, hint, strlen(hint) + 1);
		json_decref(o);
		o = NULL;
	}
	if (!o)
		*ret = fg_respond_error(c, FG_E_BAD_REQUEST, msg, NULL);
	return o;
}

/* A call whose input is its URL and headers: its body must be empty or
 * {}. false once the 400 is sent (*ret). */
static bool no_fields_or_respond(struct fg_req *req, struct MHD_Connection *c,
				 const char *call, const char *hint,
				 enum MHD_Result *ret)
{
	json_t *o = body_or_respond(req, c, true, call, NO_FIELDS, hint, ret);
	json_decref(o);
	return o != NULL;
}

static enum MHD_Result not_allowed(struct MHD_Connection *c, const char *allow)
{
	return fg_respond_not_allowed(c, allow);
}

/* Who the call is checked against in lockcore: the principal the access
 * step found, or NULL in open mode (nothing stored, nothing checked). */
static const char *principal_of(const struct fg_req *req)
{
	return req->principal[0] ? req->principal : NULL;
}

static enum MHD_Result forbidden(struct MHD_Connection *c)
{
	return fg_respond_error(c, FG_E_FORBIDDEN,
				"this lease was granted to another principal",
				NULL);
}

/* ---- a lock API call's life ---------------------------------------- */

/* The states of a lock API call (struct fg_api_call), in order:
 *
 *   NEW        routed (req->route): at its first handler call, with its
 *              body read, the access step, then the call's own checks
 *   SENT       a lock call is in Redis (`kind`): the connection is parked
 *              (rt/park.h) with no watch and no timer until its answer
 *   REPLIED    Redis answered: the callback stored the answer and resumed
 *              the connection; the next handler call acts on it
 *   WAITING    a blocked acquire or an observer is parked in lockwait/
 *              (req->waiter) until its grant, its change, its wait_ms or
 *              the client's leaving
 *   EVENTS     the events' reader (api/events.c) owns the request:
 *              every handler call goes to it
 *   ANSWERED   an answer was queued, or the client let go (MHD_NO):
 *              nothing more is done
 *
 * A step that starts in NEW, REPLIED or WAITING ends in ANSWERED unless it
 * sends a call (SENT: a waiter's grant is confirmed so) or parks a waiter
 * (WAITING); only the Redis callback moves SENT to REPLIED. Whatever the
 * state, fg_api_finish() gives back a grant whose answer was not
 * delivered. */
enum call_state {
	API_NEW,
	API_SENT,
	API_REPLIED,
	API_WAITING,
	API_EVENTS,
	API_ANSWERED,
};

/* The lock call a request sent (CALL_NONE: none yet, or one that could
 * not be sent). */
enum call_kind { CALL_NONE, CALL_ACQUIRE, CALL_CONFIRM, CALL_RENEW,
		 CALL_RELEASE, CALL_INSPECT, CALL_CHECK, CALL_BREAK, CALL_LIST };

static enum MHD_Result take_answer(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result waited(struct fg_req *req, struct MHD_Connection *c);

/* A lock API call: the lock API's part of struct fg_req, made at the
 * request's first handler call and freed with the request
 * (call_free()), and the lock call it sent last with its answer. */
struct fg_api_call {
	enum call_state state;
	/* the lock call: reset by call_begin() */
	enum call_kind kind;
	int err;
	struct fg_grant g;
	struct fg_lock_info info;  /* owns value and owner */
	struct fg_check chk;
	struct fg_seq seq;         /* check: the sequencer checked */
	uint64_t tok0;             /* inspect: `after`, or UINT64_MAX without it;
				      break: the token named */
	uint32_t wait_ms;
	struct fg_list *list;      /* list: the page being read */
	char *owner;               /* an acquire's owner (malloc'd, or NULL),
				      kept across its calls for the held
				      table (proc/held.h); call_free() frees */
	struct fg_park park;       /* SENT: the connection */
};

static void call_free(struct fg_req *req)
{
	if (!req->call)
		return;
	fg_lock_info_finish(&req->call->info);
	fg_list_free(req->call->list);
	free(req->call->owner);
	free(req->call);
	req->call = NULL;
}

/* Did Redis answer the lock call the request sent last? */
static bool call_answered(const struct fg_api_call *call)
{
	return call && call->kind != CALL_NONE && call->state != API_SENT;
}

static bool holds_grant(struct fg_req *req)
{
	if (req->granted)
		return true; /* answered, maybe not delivered */
	if (req->waiter &&
	    fg_waiter_result(req->waiter, NULL, NULL) == FG_WAIT_GRANTED)
		return true;
	const struct fg_api_call *call = req->call;
	return call_answered(call) && call->kind == CALL_ACQUIRE &&
	       !call->err && call->g.status == FG_GRANTED;
}

static void replied(struct fg_req *req, int err)
{
	if (err == FG_EUNAVAIL)
		fg_maint_redis_failed(req->gw);
	req->call->err = err;
	req->call->state = API_REPLIED;
	fg_park_resume(&req->call->park);
}

static void on_grant(int err, const struct fg_grant *g, void *arg)
{
	struct fg_req *req = arg;
	if (!err)
		req->call->g = *g;
	replied(req, err);
}

static void on_info(int err, const struct fg_lock_info *info, void *arg)
{
	struct fg_req *req = arg;
	struct fg_lock_info *in = &req->call->info;
	if (!err) {
		*in = *info;
		in->value = info->value ? malloc(info->value_len + 1) : NULL;
		in->owner = info->owner ? strdup(info->owner) : NULL;
		if (in->value) {
			memcpy(in->value, info->value, info->value_len);
			in->value[info->value_len] = '\0';
		}
		if ((info->value && !in->value) || (info->owner && !in->owner))
			err = FG_ENOMEM;
	}
	replied(req, err);
}

static void on_check(int err, const struct fg_check *chk, void *arg)
{
	struct fg_req *req = arg;
	if (!err)
		req->call->chk = *chk;
	replied(req, err);
}

/* The request's next lock call, to be filled and sent: what the last one
 * left is let go. Never NULL (the call exists from the first handler
 * call on). */
static struct fg_api_call *call_begin(struct fg_req *req)
{
	struct fg_api_call *call = req->call;
	enum call_state state = call->state;
	char *owner = call->owner;
	fg_lock_info_finish(&call->info);
	fg_list_free(call->list);
	memset(call, 0, sizeof(*call));
	call->state = state;
	call->owner = owner;
	return call;
}

/* The call of `kind` was sent (err == 0): the request waits for its
 * answer, parked with no watch and no timer (Redis answers every call, at
 * worst FG_EUNAVAIL when the loop's connection closes). */
static enum MHD_Result sent_or_respond(struct fg_req *req,
				       struct MHD_Connection *c,
				       enum call_kind kind, int err)
{
	if (err)
		return fg_respond_store_error(c, err);
	req->call->kind = kind;
	req->call->state = API_SENT;
	fg_park_suspend(&req->call->park, req->loop, c, NULL, NULL, NULL);
	return MHD_YES;
}

/* The waiter the request made (a blocked acquire, an observer) waits,
 * parked; one complete already, or that cannot park, is answered now. */
static enum MHD_Result park_waiter(struct fg_req *req, struct MHD_Connection *c,
				   int64_t wake_in_ms)
{
	req->call->state = API_WAITING;
	if (fg_waiter_park(req->loop->wq, req->waiter, c, wake_in_ms))
		return MHD_YES;
	return waited(req, c);
}

static enum MHD_Result respond_grant(struct fg_req *req,
				     struct MHD_Connection *c,
				     const char *name, const char *lease,
				     const struct fg_grant *g)
{
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	char seq[FG_SEQ_MAX];
	if (fg_gateway_key(req->gw, key, &keylen) != FG_OK)
		return fg_respond_store_error(c, FG_ENOKEY);
	if (fg_seq_encode(key, keylen, name, strlen(name), g->mode, g->token,
			  seq, sizeof(seq)) < 0)
		return fg_respond_error(c, FG_E_INTERNAL, "cannot sign the sequencer", NULL);
	/* if this answer never reaches the client, the grant goes back
	 * (fg_api_finish(), when the request completes) */
	if (req->name != name)
		copy_str(req->name, sizeof(req->name), name);
	if (req->lease != lease)
		copy_str(req->lease, sizeof(req->lease), lease);
	req->granted = true;
	req->rec.granted = true;
	req->rec.mode = g->mode;
	req->rec.has_token = true;
	req->rec.token = g->token;
	struct fg_held_who who = { principal_of(req), req->call->owner,
				   req->rec.client };
	fg_held_granted(name, g->token, g->holds <= 1, g->ttl_ms, &who);
	/* A client that closed while the call was in Redis is gone: its
	 * kernel would take the answer and reset, so the answer would count
	 * as delivered. Not answered, the grant goes back at once. */
	if (fg_loop_client_gone(c))
		return MHD_NO;
	/* the answer of every lock cycle: written straight into the
	 * response's buffer (fg_jw, what jansson would write), jansson only
	 * for a string it would escape */
	/* the strings and the fields' room; small enough for malloc's
	 * per-thread cache with a usual name */
	size_t cap = 160 + strlen(name) + strlen(lease) + strlen(seq);
	char *text = malloc(cap); /* the response's, freed by libmicrohttpd */
	if (text) {
		struct fg_jw w;
		fg_jw_init(&w, text, cap);
		fg_jw_str(&w, "name", name);
		fg_jw_str(&w, "lease", lease);
		fg_jw_uint(&w, "token", g->token);
		fg_jw_str(&w, "mode", fg_mode_name(g->mode));
		fg_jw_uint(&w, "ttl_ms", g->ttl_ms);
		fg_jw_str(&w, "sequencer", seq);
		fg_jw_uint(&w, "holds", g->holds);
		size_t len = fg_jw_end(&w);
		if (len)
			return fg_respond_text(c, MHD_HTTP_OK,
					       "application/json", text, len);
		free(text);
	}
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:I, s:s, s:I}",
			      "name", name, "lease", lease,
			      "token", (json_int_t)g->token,
			      "mode", fg_mode_name(g->mode),
			      "ttl_ms", (json_int_t)g->ttl_ms,
			      "sequencer", seq,
			      "holds", (json_int_t)g->holds);
	return fg_respond_json(c, MHD_HTTP_OK, o);
}

static enum MHD_Result respond_info(struct MHD_Connection *c, const char *name,
				    const struct fg_lock_info *in)
{
	json_t *o = json_pack("{s:s, s:b, s:o, s:o, s:I, s:I, s:I, s:I}",
			      "name", name, "held", in->held,
			      "mode", in->held ? json_string(fg_mode_name(in->mode)) : json_null(),
			      "token", in->has_token ? json_integer((json_int_t)in->token) : json_null(),
			      "holders", (json_int_t)in->holders,
			      "waiters", (json_int_t)in->waiters,
			      "ttl_ms", (json_int_t)in->ttl_ms,
			      "delay_ms", (json_int_t)in->delay_ms);
	if (o && in->value)
		json_object_set_new(o, "value",
				    json_stringn(in->value, in->value_len));
	if (o && in->owner)
		json_object_set_new(o, "owner", json_string(in->owner));
	return fg_respond_json(c, MHD_HTTP_OK, o);
}

/* ---- acquire --------------------------------------------------------- */

static enum MHD_Result acquire(struct fg_req *req, struct MHD_Connection *c,
			       const char *name)
{
	struct fg_gateway *gw = req->gw;
	char msg[256];
	enum MHD_Result ret;
	json_t *o = body_or_respond(req, c, true, "acquire", ACQUIRE_FIELDS,
				    NULL, &ret);
	if (!o)
		return ret;

	struct fg_acquire q = {
		.name = name,
		.mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = FG_TTL_DEFAULT,
		.lock_delay_ms = gw->cfg->lock_delay_ms,
		.liveness_ms = gw->cfg->waiter_liveness_ms,
		.max_waiters = gw->cfg->max_waiters,
		.principal = principal_of(req),
	};
	const char *mode = NULL, *reenter = NULL;
	size_t mode_len, reenter_len;
	if (fg_json_uint(o, "ttl_ms", FG_TTL_MIN, FG_TTL_MAX, &q.ttl_ms, msg, sizeof(msg)) ||
	    fg_json_uint(o, "wait_ms", 0, FG_WAIT_MAX, &q.wait_ms, msg, sizeof(msg)) ||
	    fg_json_uint(o, "lock_delay_ms", 0, FG_TTL_MAX, &q.lock_delay_ms, msg, sizeof(msg)) ||
	    fg_json_string(o, "mode", 16, &mode, &mode_len, msg, sizeof(msg)) ||
	    fg_json_string(o, "owner", FG_OWNER_MAX, &q.owner, &q.owner_len, msg, sizeof(msg)) ||
	    fg_json_string(o, "value", FG_VALUE_MAX, &q.value, &q.value_len, msg, sizeof(msg)) ||
	    fg_json_string(o, "lease", LEASE_MAX, &reenter, &reenter_len, msg, sizeof(msg))) {
		ret = bad(c, msg);
		goto done;
	}
	if (mode && strcmp(mode, "shared") == 0) {
		q.mode = FG_MODE_SHARED;
	} else if (mode && strcmp(mode, "exclusive") != 0) {
		ret = bad(c, "mode must be \"exclusive\" or \"shared\"");
		goto done;
	}
	if (reenter && reenter_len == 0) {
		ret = bad(c, "lease must not be empty");
		goto done;
	}
	/* The sequencer is signed after the grant; without the key there is
	 * no grant, so nothing is taken that could not be handed out. */
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	if (fg_gateway_key(gw, key, &keylen) != FG_OK) {
		ret = fg_respond_store_error(c, FG_ENOKEY);
		goto done;
	}
	if (reenter) {
		snprintf(req->lease, sizeof(req->lease), "%.*s",
			 (int)FG_LEASE_LEN, reenter);
		q.reenter = reenter;
		q.wait_ms = 0;
		req->reentry = true;
	} else if (fg_lease_new(req->lease) != 0) {
		ret = fg_respond_error(c, FG_E_INTERNAL, "no randomness", NULL);
		goto done;
	}
	/* the call copies its arguments when it is sent */
	q.lease = reenter ? reenter : req->lease;
	copy_str(req->name, sizeof(req->name), name);
	call_begin(req);
	/* what the grant's expired event names (free text, kept by the
	 * table only while the grant is) */
	free(req->call->owner);
	req->call->owner = q.owner && q.owner_len ? strndup(q.owner, q.owner_len)
						  : NULL;
	if (q.wait_ms > 0) {
		/* registered before the script can hand it the lock */
		req->waiter = fg_waiter_acquire(req->loop->wq, name, req->lease,
						q.mode, q.ttl_ms, q.wait_ms);
		if (!req->waiter) {
			ret = fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
			goto done;
		}
		q.waiter_id = fg_waiter_id(req->waiter);
	}
	q.gateway_id = req->loop->id;
	q.client = req->rec.client;
	ret = sent_or_respond(req, c, CALL_ACQUIRE, req->loop->as
		? fg_alock_acquire(req->loop->as, &q, on_grant, req) : FG_EUNAVAIL);
done:
	json_decref(o);
	return ret;
}

/* A try-once acquire that was refused. When lock-delay alone refused it
 * (the lock is free and nobody queued), the answer says so and when it
 * ends by Redis' clock, so that a client retries then, not in a loop. */
static enum MHD_Result busy(struct MHD_Connection *c, const struct fg_grant *g)
{
	if (g->delay_ms == 0)
		return fg_respond_error(c, FG_E_LOCK_HELD, NULL, NULL);
	char msg[128];
	snprintf(msg, sizeof(msg), "the lock is in lock-delay after its last "
		 "grant ended by expiry or a break; it can be granted in %" PRIu32
		 " ms", g->delay_ms);
	return fg_respond_error(c, FG_E_LOCK_HELD, msg,
		json_pack("{s:I}", "retry_after_ms", (json_int_t)g->delay_ms));
}

static enum MHD_Result acquired(struct fg_req *req, struct MHD_Connection *c)
{
	const struct fg_grant *g = &req->call->g;
	switch (g->status) {
	case FG_GRANTED:
		return respond_grant(req, c, req->name, req->lease, g);
	case FG_QUEUED:
		return park_waiter(req, c, g->wake_in_ms);
	case FG_EXPIRED:
		return fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
	case FG_FORBIDDEN:
		return forbidden(c);
	case FG_TOO_MANY:
		return fg_respond_error(c, FG_E_TOO_MANY_WAITERS, NULL, NULL);
	case FG_BUSY:
		return busy(c, g);
	default:
		return fg_respond_error(c, FG_E_LOCK_HELD, NULL, NULL);
	}
}

static enum MHD_Result renewed(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result released(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result broken(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result inspected(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result checked(struct fg_req *req, struct MHD_Connection *c);
static enum MHD_Result listed(struct fg_req *req, struct MHD_Connection *c);

/* A waiter's grant with redis-replicas set: answered once WAIT counted
 * the replicas (fg_alock_confirm()); a grant they fell short of was given
 * back, and one lost meanwhile (a failover) is not answered as held. */
static enum MHD_Result confirmed(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_grant g = req->call->g;
	if (g.status != FG_GRANTED)
		return fg_respond_store_error(c, FG_EUNAVAIL);
	g.holds = 1;
	return respond_grant(req, c, req->name, req->lease, &g);
}

/* REPLIED: the answer of the lock call, acted on once. */
static enum MHD_Result take_answer(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_api_call *call = req->call;
	call->state = API_ANSWERED; /* unless a waiter parks */
	if (call->err)
		return fg_respond_store_error(c, call->err);
	switch (call->kind) {
	case CALL_ACQUIRE:
		return acquired(req, c);
	case CALL_CONFIRM:
		return confirmed(req, c);
	case CALL_RENEW:
		return renewed(req, c);
	case CALL_RELEASE:
		return released(req, c);
	case CALL_BREAK:
		return broken(req, c);
	case CALL_INSPECT:
		return inspected(req, c);
	case CALL_LIST:
		return listed(req, c);
	case CALL_CHECK:
	default:
		return checked(req, c);
	}
}

/* WAITING: what became of the waiter. */
static enum MHD_Result waited(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_grant g;
	const struct fg_lock_info *info;
	enum MHD_Result ret;
	enum fg_wait_result res = fg_waiter_result(req->waiter, &g, &info);
	if (res == FG_WAIT_PENDING)
		return MHD_YES; /* resumed for another reason */
	req->call->state = API_ANSWERED; /* unless the grant is confirmed */
	switch (res) {
	case FG_WAIT_GRANTED:
		/* A grant and the client's leaving can arrive in the same turn
		 * of the loop (the gateway was held up): a grant for a client
		 * already gone is not answered, and goes back when the request
		 * completes (fg_api_finish()), not at its expiry. */
		if (fg_loop_client_gone(c))
			return MHD_NO;
		/* The rights are those in force now: a grant to a principal
		 * removed or narrowed while it waited is not answered, and
		 * goes back as an undelivered one does (fg_api_finish()). */
		if (!fg_access_still(req, c, FG_RIGHT_LOCK, req->name, &ret))
			return ret;
		/* A waiter's grant is held only while its gateway is known to
		 * be alive until it is confirmed (handoff() in the scripts):
		 * the confirmation, a renewal to its ttl (with replicas, then
		 * WAIT), comes before the answer. */
		call_begin(req);
		return sent_or_respond(req, c, CALL_CONFIRM, req->loop->as
			? fg_alock_confirm(req->loop->as, req->name, req->lease,
					   on_grant, req)
			: FG_EUNAVAIL);
	case FG_WAIT_TIMEOUT:
		return fg_respond_error(c, FG_E_LOCK_HELD,
					"the lock was not granted within wait_ms", NULL);
	case FG_WAIT_OBSERVED:
		if (!fg_access_still(req, c, FG_RIGHT_OBSERVE, req->name, &ret))
			return ret;
		return respond_info(c, req->name, info);
	case FG_WAIT_GONE:
		return MHD_NO;
	case FG_WAIT_STOPPING:
		return fg_respond_error(c, FG_E_SHUTTING_DOWN, NULL, NULL);
	case FG_WAIT_LOST:
		return fg_respond_error(c, FG_E_LOCK_STORE_UNAVAILABLE,
			"Redis lost this request's place in the queue (a restart "
			"or a failover): ask again", NULL);
	case FG_WAIT_UNAVAIL:
	default:
		return fg_respond_store_error(c, FG_EUNAVAIL);
	}
}

/* ---- renew, release, inspect ---------------------------------------- */

static enum MHD_Result renew(struct fg_req *req, struct MHD_Connection *c,
			     const char *name)
{
	char msg[256];
	enum MHD_Result ret;
	json_t *o = body_or_respond(req, c, false, "renew", RENEW_FIELDS, NULL,
				    &ret);
	if (!o)
		return ret;
	uint32_t ttl = 0;
	const char *lease, *value;
	size_t lease_len, value_len;
	if (fg_json_uint(o, "ttl_ms", FG_TTL_MIN, FG_TTL_MAX, &ttl, msg, sizeof(msg)) ||
	    fg_json_string(o, "lease", LEASE_MAX, &lease, &lease_len, msg, sizeof(msg)) ||
	    fg_json_string(o, "value", FG_VALUE_MAX, &value, &value_len, msg, sizeof(msg))) {
		ret = bad(c, msg);
		goto done;
	}
	if (!lease || lease_len == 0) {
		ret = bad(c, "lease is required");
		goto done;
	}
	copy_str(req->name, sizeof(req->name), name);
	call_begin(req);
	ret = sent_or_respond(req, c, CALL_RENEW, req->loop->as
		? fg_alock_renew(req->loop->as, name, lease, principal_of(req),
				 ttl, value, value_len, on_grant, req)
		: FG_EUNAVAIL);
done:
	json_decref(o);
	return ret;
}

static enum MHD_Result renewed(struct fg_req *req, struct MHD_Connection *c)
{
	const struct fg_grant *g = &req->call->g;
	if (g->status == FG_FORBIDDEN)
		return forbidden(c);
	if (g->status != FG_GRANTED) {
		/* the lease named holds nothing: its holder learns it now.
		 * Redis tells no token for a lease it does not know, and the
		 * lease itself is never recorded. */
		fg_evrec_lease_lost(req->loop->evrec, req->name, principal_of(req),
				    req->rec.client);
		return fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
	}
	req->rec.has_token = true;
	req->rec.token = g->token;
	fg_held_renewed(req->name, g->token, g->ttl_ms);
	return fg_respond_json(c, MHD_HTTP_OK,
		json_pack("{s:s, s:I, s:I}", "name", req->name,
			  "token", (json_int_t)g->token,
			  "ttl_ms", (json_int_t)g->ttl_ms));
}

static enum MHD_Result release(struct fg_req *req, struct MHD_Connection *c,
			       const char *name)
{
	/* two leases would leave it to chance which one is released */
	const char *value;
	if (fg_header_count(c, "Fence-Lease", &value) > 1)
		return bad(c, "more than one Fence-Lease header");
	/* without the whitespace after it (RFC 9110 5.5; libmicrohttpd
	 * drops only the leading) */
	size_t n = value ? strlen(value) : 0;
	while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
		n--;
	if (n == 0)
		return bad(c, "the Fence-Lease header is required");
	if (n > LEASE_MAX)
		return bad(c, "Fence-Lease is too long to be a lease");
	char lease[LEASE_MAX + 1]; /* the call copies it */
	memcpy(lease, value, n);
	lease[n] = '\0';
	call_begin(req);
	copy_str(req->name, sizeof(req->name), name);
	return sent_or_respond(req, c, CALL_RELEASE, req->loop->as
		? fg_alock_release(req->loop->as, name, lease, principal_of(req),
				   on_grant, req)
		: FG_EUNAVAIL);
}

static enum MHD_Result released(struct fg_req *req, struct MHD_Connection *c)
{
	if (req->call->g.status == FG_FORBIDDEN)
		return forbidden(c);
	if (req->call->g.status != FG_GRANTED)
		return fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
	if (req->call->g.holds == 0)
		fg_held_left(req->name, req->call->g.token);
	return fg_respond_empty(c, MHD_HTTP_NO_CONTENT);
}

/* ---- break ------------------------------------------------------------ */

/* DELETE with Fence-Break: ends the grant of the token named, whoever
 * holds it (the access step checked the caller's right to). The token,
 * not a lease, names the grant, so a break never ends a newer grant than
 * the one its caller saw. */
static enum MHD_Result break_grant(struct fg_req *req, struct MHD_Connection *c,
				   const char *name, unsigned n, const char *value)
{
	uint64_t token;
	if (n > 1)
		return bad(c, "more than one Fence-Break header");
	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Fence-Lease"))
		return bad(c, "Fence-Break and Fence-Lease do not go together: "
			      "a break names a grant by its token, a release by its lease");
	if (fg_parse_u64(value, FG_TOKEN_MAX - 1, &token))
		return bad(c, "Fence-Break must be a token: a decimal integer below 2^53");
	struct fg_api_call *call = call_begin(req);
	call->tok0 = token;
	copy_str(req->name, sizeof(req->name), name);
	req->rec.has_token = true;
	req->rec.token = token;
	return sent_or_respond(req, c, CALL_BREAK, req->loop->as
		? fg_alock_break(req->loop->as, name, token, on_grant, req)
		: FG_EUNAVAIL);
}

static enum MHD_Result broken(struct fg_req *req, struct MHD_Connection *c)
{
	const struct fg_api_call *call = req->call;
	const char *who = req->principal[0] ? req->principal : "-";
	if (call->g.status == FG_REMOVED) {
		fg_held_ended(req->name, call->tok0);
		fg_log_info("lock %s: the grant of token %" PRIu64 " was broken "
			    "by principal %s", req->name, call->tok0, who);
		return fg_respond_empty(c, MHD_HTTP_NO_CONTENT);
	}
	bool has_current = call->g.token > 0;
	req->rec.has_current = has_current;
	req->rec.current = call->g.token;
	return fg_respond_error(c, FG_E_STALE_TOKEN,
		"this token is not the lock's current grant",
		json_pack("{s:I, s:o}", "token", (json_int_t)call->tok0,
			  "current", has_current
				  ? json_integer((json_int_t)call->g.token)
				  : json_null()));
}

/* DELETE: a release (Fence-Lease) or a break (Fence-Break). */
static enum MHD_Result delete_lock(struct fg_req *req, struct MHD_Connection *c,
				   const char *name)
{
	const char *brk;
	unsigned nbrk = fg_header_count(c, "Fence-Break", &brk);
	req->rec.brk = nbrk > 0;
	enum MHD_Result ret;
	if (nbrk > 0 && !no_fields_or_respond(req, c, "break",
		"; the token goes in the Fence-Break header", &ret))
		return ret;
	if (nbrk == 0 && !no_fields_or_respond(req, c, "release",
		"; the lease goes in the Fence-Lease header", &ret))
		return ret;
	if (nbrk > 0)
		return break_grant(req, c, name, nbrk, brk);
	return release(req, c, name);
}

static enum MHD_Result inspect(struct fg_req *req, struct MHD_Connection *c,
			       const char *name)
{
	enum MHD_Result ret;
	if (!no_fields_or_respond(req, c, "inspect",
		"; wait_ms and after go in the query string", &ret))
		return ret;
	const char *ws = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait_ms");
	const char *as = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
	uint64_t wait = 0, after = 0;
	if (ws && fg_parse_u64(ws, FG_WAIT_MAX, &wait))
		return bad(c, "wait_ms must be an integer in 0..300000");
	if (as && fg_parse_u64(as, FG_TOKEN_MAX - 1, &after))
		return bad(c, "after must be a token (a non-negative integer)");

	struct fg_api_call *call = call_begin(req);
	copy_str(req->name, sizeof(req->name), name);
	call->wait_ms = (uint32_t)wait;
	/* Observe: with `after`, wait while the lock is held under that
	 * token; without it, wait while nothing changes. */
	call->tok0 = as ? after : UINT64_MAX; /* without: from the answer */
	return sent_or_respond(req, c, CALL_INSPECT, req->loop->as
		? fg_alock_inspect(req->loop->as, name, on_info, req) : FG_EUNAVAIL);
}

static enum MHD_Result inspected(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_api_call *call = req->call;
	const struct fg_lock_info *info = &call->info;
	bool after = call->tok0 != UINT64_MAX;
	bool held0 = after ? true : info->held;
	bool has0 = after ? true : info->has_token;
	uint64_t tok0 = after ? call->tok0 : info->token;
	bool changed = info->held != held0 || info->has_token != has0 ||
		       (info->has_token && info->token != tok0);
	if (call->wait_ms == 0 || changed)
		return respond_info(c, req->name, info);
	req->waiter = fg_waiter_observe(req->loop->wq, req->name, call->wait_ms,
					held0, has0, tok0);
	if (!req->waiter)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	return park_waiter(req, c, -1);
}

/* ---- the listing ------------------------------------------------------ */

static void on_listed(int err, void *arg)
{
	replied(arg, err);
}

/* Does s hold only characters a lock name may (a prefix of names)? */
static bool prefix_ok(const char *s)
{
	size_t n = strlen(s);
	if (n > FG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789._~/-", s[i]))
			return false;
	return true;
}

static enum MHD_Result list(struct fg_req *req, struct MHD_Connection *c)
{
	enum MHD_Result ret;
	if (!no_fields_or_respond(req, c, "list",
		"; prefix, limit and cursor go in the query string", &ret))
		return ret;
	const char *prefix = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "prefix");
	const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	const char *cs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
	uint64_t limit = FG_LIST_LIMIT_DEFAULT;
	char after[FG_NAME_MAX + 1];
	if (!prefix)
		prefix = "";
	if (!prefix_ok(prefix))
		return bad(c, "prefix must be the start of a lock name "
			   "(at most 255 of A-Z a-z 0-9 . _ ~ / -)");
	if (ls && (fg_parse_u64(ls, FG_LIST_LIMIT_MAX, &limit) || limit == 0))
		return bad(c, "limit must be an integer in 1..1000");
	if (cs && (fg_list_uncursor(cs, after) ||
		   strncmp(after, prefix, strlen(prefix)) != 0))
		return bad(c, "cursor is not one this listing gave");
	struct fg_api_call *call = call_begin(req);
	int err = FG_EUNAVAIL;
	if (req->loop->as)
		call->list = fg_list_start(req->loop->as, prefix, cs ? after : NULL,
					   (unsigned)limit, on_listed, req, &err);
	return sent_or_respond(req, c, CALL_LIST, call->list ? FG_OK : err);
}

static enum MHD_Result listed(struct fg_req *req, struct MHD_Connection *c)
{
	json_t *o = fg_list_answer(req->call->list, req->loop->as);
	if (!o)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	return fg_respond_json(c, MHD_HTTP_OK, o);
}

/* ---- which lock guards a path ---------------------------------------- */

/* GET /_fence/v1/route?path=P: the lock the proxy would check a request
 * for P against, and the route rule that gives it; answered from
 * fg_route_decide(), the one decision --route-test also shows. */
static enum MHD_Result route_info(struct fg_req *req, struct MHD_Connection *c)
{
	enum MHD_Result ret;
	if (!no_fields_or_respond(req, c, "route",
		"; the path goes in the query string", &ret))
		return ret;
	const char *path = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
	if (!path || !path[0])
		return bad(c, "path is required (?path=/a/request/path)");
	char lock[FG_NAME_MAX + 1];
	const struct fg_route *rule;
	enum fg_error e = (req->gw->cfg->upstream_api_s3 ? fg_s3_route_decide : fg_route_decide)(
		req->gw->cfg, path, strlen(path), lock, &rule);
	if (e != FG_E_COUNT)
		return fg_respond_error(c, e, NULL, NULL);
	json_t *shown = json_string(path);
	if (!shown) /* what a JSON answer cannot quote */
		return bad(c, "path is not UTF-8");
	json_t *o = json_pack("{s:o, s:s, s:o}", "path", shown, "lock", lock,
			      "rule", rule ? json_string(rule->line) : json_null());
	if (!o)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	return fg_respond_json(c, MHD_HTTP_OK, o);
}

/* ---- check, health --------------------------------------------------- */

static enum MHD_Result check_reply(struct MHD_Connection *c, const char *reason)
{
	return fg_respond_json(c, MHD_HTTP_OK,
			       json_pack("{s:b, s:s}", "valid", 0, "reason", reason));
}

static enum MHD_Result check(struct fg_req *req, struct MHD_Connection *c)
{
	char msg[256];
	enum MHD_Result ret;
	json_t *o = body_or_respond(req, c, false, "check", CHECK_FIELDS, NULL,
				    &ret);
	if (!o)
		return ret;
	const char *s;
	size_t len;
	if (fg_json_string(o, "sequencer", 65536, &s, &len, msg, sizeof(msg)) || !s) {
		ret = bad(c, "sequencer (a string) is required");
		goto done;
	}
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	if (fg_gateway_key(req->gw, key, &keylen) != FG_OK) {
		ret = fg_respond_store_error(c, FG_ENOKEY);
		goto done;
	}
	struct fg_seq seq;
	switch (fg_seq_decode(key, keylen, s, len, &seq)) {
	case FG_SEQ_MALFORMED:
		ret = check_reply(c, "malformed");
		goto done;
	case FG_SEQ_FORGED:
		ret = check_reply(c, "forged");
		goto done;
	case FG_SEQ_VALID:
		break;
	}
	struct fg_api_call *call = call_begin(req);
	call->seq = seq;
	ret = sent_or_respond(req, c, CALL_CHECK, req->loop->as
		? fg_alock_check(req->loop->as, seq.name, seq.token, on_check, req)
		: FG_EUNAVAIL);
done:
	json_decref(o);
	return ret;
}

static enum MHD_Result checked(struct fg_req *req, struct MHD_Connection *c)
{
	const struct fg_check *chk = &req->call->chk;
	const struct fg_seq *seq = &req->call->seq;
	if (chk->status == FG_CHECK_VALID)
		return fg_respond_json(c, MHD_HTTP_OK,
			json_pack("{s:b, s:s, s:I, s:s}", "valid", 1,
				  "name", seq->name, "token", (json_int_t)seq->token,
				  "mode", fg_mode_name(seq->mode)));
	return check_reply(c, chk->status == FG_CHECK_STALE ? "stale" :
			      chk->status == FG_CHECK_EXPIRED ? "expired" :
			      "forged");
}

/* Answered from state kept anyway: what the maintenance thread last saw
 * (once a second), whether this loop's Redis connections are up, and
 * whether every loop's were at its last turn (every 250 ms): a gateway
 * just started is healthy only once a lock call succeeds on any loop. A
 * health probe costs neither Redis nor the upstream anything. */
static bool redis_ready(struct fg_req *req)
{
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	return fg_gateway_redis_up(req->gw) && fg_astore_ready(req->loop->as) &&
	       fg_gateway_loops_redis(req->gw) &&
	       fg_gateway_key(req->gw, key, &keylen) == FG_OK;
}

/* "none" when no upstream is configured (the gateway is a lock service). */
static const char *upstream_state(struct fg_req *req, bool *ok)
{
	*ok = true;
	if (!req->gw->cfg->upstream)
		return "none";
	*ok = fg_gateway_upstream_up(req->gw);
	return *ok ? "up" : "down";
}

static enum MHD_Result health(struct fg_req *req, struct MHD_Connection *c)
{
	bool redis = redis_ready(req), upstream_ok;
	const char *up = upstream_state(req, &upstream_ok);
	json_t *o = json_pack("{s:s, s:s}", "redis", redis ? "up" : "down",
			      "upstream", up);
	return fg_respond_json(c, redis && upstream_ok ? MHD_HTTP_OK
						       : MHD_HTTP_SERVICE_UNAVAILABLE, o);
}

/* Readiness (a load balancer's or Kubernetes' readinessProbe): should
 * traffic come to this gateway? Not once it is stopping, nor while one of
 * its loops is stuck. Redis and the upstream are every gateway's, so
 * their outage takes no gateway out of a balancer unless readyz-requires
 * says so; their state is shown, and is health's and the metrics'. */
static enum MHD_Result readyz(struct fg_req *req, struct MHD_Connection *c)
{
	bool redis = redis_ready(req), upstream_ok;
	const char *up = upstream_state(req, &upstream_ok);
	unsigned need = req->gw->cfg->readyz_requires;
	const char *why = NULL;
	if (fg_gateway_draining(req->gw))
		why = "shutting down";
	else if (!fg_gateway_loops_turning(req->gw, fg_clock_ms(), FG_LOOP_STUCK_MS))
		why = "an event loop is stuck";
	else if ((need & FG_READYZ_REDIS) && !redis)
		why = "redis is down (readyz-requires redis)";
	else if ((need & FG_READYZ_UPSTREAM) && !upstream_ok)
		why = "the upstream is down (readyz-requires upstream)";
	json_t *o = json_pack("{s:s, s:s, s:s}",
			      "status", why ? "not_ready" : "ready",
			      "redis", redis ? "up" : "down", "upstream", up);
	if (!why)
		return fg_respond_json(c, MHD_HTTP_OK, o);
	/* a 503 is an error answer like every other, its message the reason
	 * (kept under its older name too) */
	if (o)
		json_object_set_new(o, "reason", json_string(why));
	return fg_respond_error(c, fg_gateway_draining(req->gw)
				? FG_E_SHUTTING_DOWN : FG_E_NOT_READY, why, o);
}

/* Liveness (a livenessProbe, a watchdog): the loop that took the request
 * turns. Never depends on Redis or the upstream, whose outage a restart
 * would not cure. */
static enum MHD_Result livez(struct fg_req *req, struct MHD_Connection *c)
{
	(void)req;
	return fg_respond_json(c, MHD_HTTP_OK, json_pack("{s:s}", "status", "alive"));
}

static enum MHD_Result metrics(struct fg_req *req, struct MHD_Connection *c)
{
	size_t len;
	char *text = fg_metrics_render(req->gw, &len);
	if (!text)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	return fg_respond_text(c, MHD_HTTP_OK,
			       "text/plain; version=0.0.4; charset=utf-8", text, len);
}

/* The document of this API, as built in (base/openapi.h): the same
 * bytes as docs/openapi.json, so what a client reads is what the
 * gateway was built to answer. */
static enum MHD_Result openapi(struct fg_req *req, struct MHD_Connection *c)
{
	(void)req;
	return fg_respond_static(c, MHD_HTTP_OK, "application/json",
				 fg_openapi_json, fg_openapi_json_len);
}

/* ---- routing --------------------------------------------------------- */

/* NEW, past the access step: the call the route names. */
static enum MHD_Result dispatch(struct fg_req *req, struct MHD_Connection *c)
{
	const struct fg_apiroute *r = &req->route;
	if (r->name[0])
		copy_str(req->rec.lock, sizeof(req->rec.lock), r->name);
	switch (r->op) {
	case FG_APIOP_BAD_NAME:
		return fg_respond_error(c, FG_E_BAD_LOCK_NAME, NULL, NULL);
	case FG_APIOP_NOT_ALLOWED:
		return not_allowed(c, r->allow);
	case FG_APIOP_ACQUIRE:
		return acquire(req, c, r->name);
	case FG_APIOP_RENEW:
		return renew(req, c, r->name);
	case FG_APIOP_DELETE:
		return delete_lock(req, c, r->name);
	case FG_APIOP_INSPECT:
		return inspect(req, c, r->name);
	case FG_APIOP_LIST:
		return list(req, c);
	case FG_APIOP_CHECK:
		return check(req, c);
	case FG_APIOP_ROUTE:
		return route_info(req, c);
	case FG_APIOP_HEALTH:
		return health(req, c);
	case FG_APIOP_LIVEZ:
		return livez(req, c);
	case FG_APIOP_READYZ:
		return readyz(req, c);
	case FG_APIOP_METRICS:
		return metrics(req, c);
	case FG_APIOP_OPENAPI:
		return openapi(req, c);
	case FG_APIOP_UI:
		return fg_ui_serve(req, c);
	case FG_APIOP_EVENTS:
		req->call->state = API_EVENTS;
		return fg_evapi_handle(req, c);
	case FG_APIOP_NOT_FOUND:
	default:
		return fg_respond_error(c, FG_E_NOT_FOUND, NULL, NULL);
	}
}

enum MHD_Result fg_api_handle(struct fg_req *req, struct MHD_Connection *c)
{
	if (!req->call) {
		req->call = calloc(1, sizeof(*req->call));
		if (!req->call)
			return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	enum MHD_Result ret;
	switch (req->call->state) {
	case API_NEW:
		req->call->state = API_ANSWERED; /* unless a call is sent */
		if (!fg_access_api(req, c, &ret))
			return ret;
		return dispatch(req, c);
	case API_SENT:
		return MHD_YES; /* resumed for another reason */
	case API_REPLIED:
		return take_answer(req, c);
	case API_WAITING:
		return waited(req, c);
	case API_EVENTS:
		return fg_evapi_handle(req, c);
	case API_ANSWERED:
	default:
		return MHD_YES; /* answered already */
	}
}

void fg_api_finish(struct fg_req *req, bool ok)
{
	fg_evapi_finish(req);
	/* A grant whose answer was not delivered goes back now: the client
	 * may have left before the answer was even written (libmicrohttpd
	 * saw the close first), or was answered an error while the grant
	 * was made (a waiter's confirmation that could not be sent, a
	 * sequencer that could not be signed). */
	bool delivered = ok && req->granted;
	if (!delivered && req->granted && !req->reentry)
		fg_held_left(req->name, req->rec.token);
	if (!delivered && holds_grant(req))
		fg_waitq_give_back(req->loop->wq, req->name, req->lease,
				   req->waiter ? fg_waiter_id(req->waiter) : NULL,
				   req->reentry, req->reentry && req->call
				   ? req->call->g.undo_id : NULL);
	else if (req->waiter && call_answered(req->call) &&
		 req->call->kind == CALL_ACQUIRE && !req->call->err &&
		 req->call->g.status == FG_QUEUED)
		/* Queued, never parked: libmicrohttpd read the client's close
		 * between Redis' answer and the handler's next call, so no
		 * park watched the socket. Its place in the queue goes back. */
		fg_waiter_leave(req->loop->wq, req->waiter);
	fg_waiter_drop(req->loop->wq, req->waiter);
	req->waiter = NULL;
	call_free(req);
}
