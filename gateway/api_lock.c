/*
 * api_lock.c - the lock API under /_fence/v1/: routing, request parsing,
 * answers. The semantics live in lockcore; this file only translates.
 *
 * Invariant: a request that fails validation is answered before anything
 * is sent to Redis, so bad input never changes lock state.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "errors.h"
#include "gateway.h"
#include "jsonio.h"
#include "waitq.h"

#define LOCKS_PREFIX "/_fence/v1/locks/"
#define LEASE_MAX 64

/* Percent-decodes the raw name into out and validates it. 0 or -1. */
static int decode_name(const char *raw, size_t len, char out[FG_NAME_MAX + 1])
{
	size_t n;
	if (fg_pct_decode(raw, len, out, FG_NAME_MAX + 1, &n))
		return -1;
	return fg_name_valid(out, n) ? 0 : -1;
}

static enum MHD_Result bad(struct MHD_Connection *c, const char *msg)
{
	return fg_respond_error(c, FG_E_BAD_REQUEST, msg, NULL);
}

static enum MHD_Result not_allowed(struct MHD_Connection *c, const char *allow)
{
	return fg_respond_not_allowed(c, allow);
}

static fg_store *store_or_fail(struct fg_req *req)
{
	return fg_gateway_store(req->gw);
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
	 * (http.c, when the request completes) */
	if (req->name != name)
		snprintf(req->name, sizeof(req->name), "%s", name);
	if (req->lease != lease)
		snprintf(req->lease, sizeof(req->lease), "%s", lease);
	req->granted = true;
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
	json_t *o = json_pack("{s:s, s:b, s:o, s:o, s:I, s:I, s:I}",
			      "name", name, "held", in->held,
			      "mode", in->held ? json_string(fg_mode_name(in->mode)) : json_null(),
			      "token", in->has_token ? json_integer((json_int_t)in->token) : json_null(),
			      "holders", (json_int_t)in->holders,
			      "waiters", (json_int_t)in->waiters,
			      "ttl_ms", (json_int_t)in->ttl_ms);
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
	json_t *o = fg_json_body(req->body, req->body_len, true, msg, sizeof(msg));
	if (!o)
		return bad(c, msg);

	struct fg_acquire q = {
		.name = name,
		.mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = FG_TTL_DEFAULT,
		.lock_delay_ms = gw->cfg->lock_delay_ms,
		.gateway_id = gw->id,
		.liveness_ms = gw->cfg->waiter_liveness_ms,
		.max_waiters = gw->cfg->max_waiters,
	};
	const char *mode = NULL, *reenter = NULL;
	size_t mode_len, reenter_len;
	enum MHD_Result ret;
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
	} else if (fg_lease_new(req->lease) != 0) {
		ret = fg_respond_error(c, FG_E_INTERNAL, "no randomness", NULL);
		goto done;
	}
	q.lease = reenter ? reenter : req->lease;
	snprintf(req->name, sizeof(req->name), "%s", name);
	fg_store *st = store_or_fail(req);
	if (!st) {
		ret = fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		goto done;
	}
	if (q.wait_ms > 0) {
		req->waiter = fg_waiter_acquire(gw->wq, name, req->lease, q.mode,
						q.ttl_ms, q.wait_ms);
		if (!req->waiter) {
			ret = fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
			goto done;
		}
		q.waiter_id = fg_waiter_id(req->waiter);
	}

	struct fg_grant g;
	int err = fg_lock_acquire(st, &q, &g);
	if (err) {
		ret = fg_respond_store_error(c, err);
		goto done;
	}
	switch (g.status) {
	case FG_GRANTED:
		ret = respond_grant(req, c, name, q.lease, &g);
		break;
	case FG_QUEUED:
		if (fg_waiter_park(gw->wq, req->waiter, c, g.wake_in_ms))
			ret = MHD_YES;
		else
			ret = fg_api_resume(req, c);
		break;
	case FG_EXPIRED:
		ret = fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
		break;
	case FG_TOO_MANY:
		ret = fg_respond_error(c, FG_E_TOO_MANY_WAITERS, NULL, NULL);
		break;
	default:
		ret = fg_respond_error(c, FG_E_LOCK_HELD, NULL, NULL);
		break;
	}
done:
	json_decref(o);
	return ret;
}

enum MHD_Result fg_api_resume(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_grant g;
	const struct fg_lock_info *info;
	switch (fg_waiter_result(req->waiter, &g, &info)) {
	case FG_WAIT_PENDING:
		return MHD_YES;
	case FG_WAIT_GRANTED:
		return respond_grant(req, c, req->name, req->lease, &g);
	case FG_WAIT_TIMEOUT:
		return fg_respond_error(c, FG_E_LOCK_HELD,
					"the lock was not granted within wait_ms", NULL);
	case FG_WAIT_OBSERVED:
		return respond_info(c, req->name, info);
	case FG_WAIT_GONE:
		return MHD_NO;
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
	json_t *o = fg_json_body(req->body, req->body_len, false, msg, sizeof(msg));
	if (!o)
		return bad(c, msg);
	uint32_t ttl = 0;
	const char *lease, *value;
	size_t lease_len, value_len;
	enum MHD_Result ret;
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
	fg_store *st = store_or_fail(req);
	struct fg_grant g;
	int err = st ? fg_lock_renew(st, name, lease, ttl, value, value_len, &g)
		     : FG_ENOMEM;
	if (err)
		ret = fg_respond_store_error(c, err);
	else if (g.status != FG_GRANTED)
		ret = fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
	else
		ret = fg_respond_json(c, MHD_HTTP_OK,
			json_pack("{s:s, s:I, s:I}", "name", name,
				  "token", (json_int_t)g.token,
				  "ttl_ms", (json_int_t)g.ttl_ms));
done:
	json_decref(o);
	return ret;
}

static enum MHD_Result release(struct fg_req *req, struct MHD_Connection *c,
			       const char *name)
{
	const char *lease = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							"Fence-Lease");
	if (!lease || !*lease)
		return bad(c, "the Fence-Lease header is required");
	if (strlen(lease) > LEASE_MAX)
		return bad(c, "Fence-Lease is too long to be a lease");
	fg_store *st = store_or_fail(req);
	struct fg_grant g;
	int err = st ? fg_lock_release(st, name, lease, &g) : FG_ENOMEM;
	if (err)
		return fg_respond_store_error(c, err);
	if (g.status != FG_GRANTED)
		return fg_respond_error(c, FG_E_LEASE_EXPIRED, NULL, NULL);
	return fg_respond_empty(c, MHD_HTTP_NO_CONTENT);
}

static enum MHD_Result inspect(struct fg_req *req, struct MHD_Connection *c,
			       const char *name)
{
	const char *ws = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "wait_ms");
	const char *as = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
	uint64_t wait = 0, after = 0;
	if (ws && fg_parse_u64(ws, FG_WAIT_MAX, &wait))
		return bad(c, "wait_ms must be an integer in 0..300000");
	if (as && fg_parse_u64(as, FG_TOKEN_MAX - 1, &after))
		return bad(c, "after must be a token (a non-negative integer)");

	fg_store *st = store_or_fail(req);
	struct fg_lock_info info;
	int err = st ? fg_lock_inspect(st, name, &info) : FG_ENOMEM;
	if (err)
		return fg_respond_store_error(c, err);
	/* Observe: with `after`, wait while the lock is held under that
	 * token; without it, wait while nothing changes. */
	bool held0 = as ? true : info.held;
	bool has0 = as ? true : info.has_token;
	uint64_t tok0 = as ? after : info.token;
	bool changed = info.held != held0 || info.has_token != has0 ||
		       (info.has_token && info.token != tok0);
	enum MHD_Result ret;
	if (wait == 0 || changed) {
		ret = respond_info(c, name, &info);
	} else {
		snprintf(req->name, sizeof(req->name), "%s", name);
		req->waiter = fg_waiter_observe(req->gw->wq, name, (uint32_t)wait,
						held0, has0, tok0);
		if (!req->waiter)
			ret = fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
		else if (fg_waiter_park(req->gw->wq, req->waiter, c, -1))
			ret = MHD_YES;
		else
			ret = fg_api_resume(req, c);
	}
	fg_lock_info_finish(&info);
	return ret;
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
	json_t *o = fg_json_body(req->body, req->body_len, false, msg, sizeof(msg));
	if (!o)
		return bad(c, msg);
	const char *s;
	size_t len;
	enum MHD_Result ret;
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
	fg_store *st = store_or_fail(req);
	struct fg_check chk;
	int err = st ? fg_lock_check(st, seq.name, seq.token, &chk) : FG_ENOMEM;
	if (err)
		ret = fg_respond_store_error(c, err);
	else if (chk.status == FG_CHECK_VALID)
		ret = fg_respond_json(c, MHD_HTTP_OK,
			json_pack("{s:b, s:s, s:I, s:s}", "valid", 1,
				  "name", seq.name, "token", (json_int_t)seq.token,
				  "mode", fg_mode_name(seq.mode)));
	else
		ret = check_reply(c, chk.status == FG_CHECK_STALE ? "stale" :
				     chk.status == FG_CHECK_EXPIRED ? "expired" :
				     "forged");
done:
	json_decref(o);
	return ret;
}

static enum MHD_Result health(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_gateway *gw = req->gw;
	fg_store *st = store_or_fail(req);
	uint8_t key[FG_KEY_MAX];
	size_t keylen;
	bool redis = st && fg_store_ping(st) == FG_OK &&
		     fg_gateway_key(gw, key, &keylen) == FG_OK;
	const char *up = "none";
	bool upstream_ok = true;
	if (gw->cfg->upstream) {
		upstream_ok = fg_probe_upstream(gw);
		up = upstream_ok ? "up" : "down";
	}
	json_t *o = json_pack("{s:s, s:s}", "redis", redis ? "up" : "down",
			      "upstream", up);
	return fg_respond_json(c, redis && upstream_ok ? MHD_HTTP_OK
						       : MHD_HTTP_SERVICE_UNAVAILABLE, o);
}

/* ---- routing --------------------------------------------------------- */

static bool path_is(const char *path, size_t len, const char *lit)
{
	return strlen(lit) == len && memcmp(path, lit, len) == 0;
}

static bool method_is(const char *m, const char *lit)
{
	return strcmp(m, lit) == 0;
}

enum MHD_Result fg_api_dispatch(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *path,
				size_t len)
{
	size_t pl = sizeof(LOCKS_PREFIX) - 1;
	if (len >= pl && memcmp(path, LOCKS_PREFIX, pl) == 0) {
		char name[FG_NAME_MAX + 1];
		if (decode_name(path + pl, len - pl, name))
			return fg_respond_error(c, FG_E_BAD_LOCK_NAME, NULL, NULL);
		if (method_is(method, "POST"))
			return acquire(req, c, name);
		if (method_is(method, "PATCH"))
			return renew(req, c, name);
		if (method_is(method, "DELETE"))
			return release(req, c, name);
		if (method_is(method, "GET") || method_is(method, "HEAD"))
			return inspect(req, c, name);
		return not_allowed(c, "GET, POST, PATCH, DELETE");
	}
	if (path_is(path, len, "/_fence/v1/locks"))
		return fg_respond_error(c, FG_E_BAD_LOCK_NAME, NULL, NULL);
	if (path_is(path, len, "/_fence/v1/check")) {
		if (!method_is(method, "POST"))
			return not_allowed(c, "POST");
		return check(req, c);
	}
	if (path_is(path, len, "/_fence/v1/health")) {
		if (!method_is(method, "GET") && !method_is(method, "HEAD"))
			return not_allowed(c, "GET");
		return health(req, c);
	}
	return fg_respond_error(c, FG_E_NOT_FOUND, NULL, NULL);
}
