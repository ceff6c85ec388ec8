/*
 * calls.c - building script calls and reading their replies (and the
 * XADD of an event the gateway appends itself).
 *
 * Invariant: this is the only place that knows the scripts' argument order
 * and reply shapes (the .lua files of lockcore/lua); both the blocking and the async
 * front go through it, so they cannot drift apart.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "fencegate/topo.h"
#include "lockcore-private.h"

extern const char fg__lua_library[];
extern const char fg__fn_acquire[], fg__fn_renew[], fg__fn_release[],
	fg__fn_inspect[], fg__fn_check[], fg__fn_tick[], fg__fn_dequeue[],
	fg__fn_admit[], fg__fn_extend[], fg__fn_finish[], fg__fn_giveback[],
	fg__fn_break[], fg__fn_describe[], fg__fn_index_add[],
	fg__fn_index_page[], fg__fn_index_drop[];

static const char *const fn_name[FG__LUA_COUNT] = {
	[FG__LUA_ACQUIRE] = fg__fn_acquire,
	[FG__LUA_RENEW] = fg__fn_renew,
	[FG__LUA_RELEASE] = fg__fn_release,
	[FG__LUA_INSPECT] = fg__fn_inspect,
	[FG__LUA_CHECK] = fg__fn_check,
	[FG__LUA_TICK] = fg__fn_tick,
	[FG__LUA_DEQUEUE] = fg__fn_dequeue,
	[FG__LUA_ADMIT] = fg__fn_admit,
	[FG__LUA_EXTEND] = fg__fn_extend,
	[FG__LUA_FINISH] = fg__fn_finish,
	[FG__LUA_GIVEBACK] = fg__fn_giveback,
	[FG__LUA_BREAK] = fg__fn_break,
	[FG__LUA_DESCRIBE] = fg__fn_describe,
	[FG__LUA_INDEX_ADD] = fg__fn_index_add,
	[FG__LUA_INDEX_PAGE] = fg__fn_index_page,
	[FG__LUA_INDEX_DROP] = fg__fn_index_drop,
};

_Static_assert(FG__LUA_COUNT == FG_SCRIPT_COUNT,
	       "fencegate/lock.h counts the scripts");

const char *fg_script_name(unsigned script)
{
	static const char *const names[FG__LUA_COUNT] = {
		[FG__LUA_ACQUIRE] = "acquire", [FG__LUA_RENEW] = "renew",
		[FG__LUA_RELEASE] = "release", [FG__LUA_INSPECT] = "inspect",
		[FG__LUA_CHECK] = "check", [FG__LUA_TICK] = "tick",
		[FG__LUA_DEQUEUE] = "dequeue", [FG__LUA_ADMIT] = "admit",
		[FG__LUA_EXTEND] = "extend", [FG__LUA_FINISH] = "finish",
		[FG__LUA_GIVEBACK] = "giveback", [FG__LUA_BREAK] = "break",
		[FG__LUA_DESCRIBE] = "describe",
		[FG__LUA_INDEX_ADD] = "index_add",
		[FG__LUA_INDEX_PAGE] = "index_page",
		[FG__LUA_INDEX_DROP] = "index_drop",
	};
	return script < FG__LUA_COUNT ? names[script] : "unknown";
}

const char *fg_giveback_reason_name(unsigned reason)
{
	static const char *const names[FG_GIVEBACK_COUNT] = {
		[FG_GIVEBACK_TIMEOUT] = "timeout",
		[FG_GIVEBACK_CONNECTION] = "connection",
		[FG_GIVEBACK_REPLICAS] = "replicas",
		[FG_GIVEBACK_ERROR] = "error",
		[FG_GIVEBACK_UNKNOWN_WAITER] = "unknown_waiter",
		[FG_GIVEBACK_UNDELIVERED] = "undelivered",
	};
	return reason < FG_GIVEBACK_COUNT ? names[reason] : "unknown";
}

static void push(struct fg__call *c, const char *s, size_t len)
{
	/* The builders below push a fixed number of arguments each; this
	 * only fires if one of them grows past FG__MAXARGS. */
	if (c->argc >= FG__MAXARGS)
		abort();
	c->argv[c->argc] = s;
	c->argvlen[c->argc] = len;
	c->argc++;
}

/* Writes n in decimal at p; returns the digits written (at most 20). */
static size_t put_u64(char *p, uint64_t n)
{
	char tmp[20];
	size_t len = 0;

	do {
		tmp[len++] = (char)('0' + n % 10);
		n /= 10;
	} while (n);
	for (size_t i = 0; i < len; i++)
		p[i] = tmp[len - 1 - i];
	return len;
}

size_t fg__call_format(const struct fg__call *c, char *buf, size_t cap)
{
	/* "*<argc>\r\n" then "$<len>\r\n<arg>\r\n" per argument: what
	 * redisFormatCommandArgv() writes, without its format-string
	 * machinery, which cost more than the call's own script in a lock
	 * cycle's profile */
	size_t need = 1 + 20 + 2;
	for (int i = 0; i < c->argc; i++)
		need += 1 + 20 + 2 + c->argvlen[i] + 2;
	if (need > cap)
		return need;

	char *p = buf;
	*p++ = '*';
	p += put_u64(p, (uint64_t)c->argc);
	*p++ = '\r';
	*p++ = '\n';
	for (int i = 0; i < c->argc; i++) {
		*p++ = '$';
		p += put_u64(p, c->argvlen[i]);
		*p++ = '\r';
		*p++ = '\n';
		if (c->argvlen[i])
			memcpy(p, c->argv[i], c->argvlen[i]);
		p += c->argvlen[i];
		*p++ = '\r';
		*p++ = '\n';
	}
	return (size_t)(p - buf);
}

#define INDEX_N "fg:{!index}:n"
#define INDEX_V "fg:{!index}:v"

/* The lock's four keys, then (index) the listing index's set of names
 * (its token scores are the gateway's, on a Cluster only): a script may
 * keep the index itself only where every key is on one Redis, never on a
 * Cluster (index_add.lua); then (ev) the lock's event stream, in the
 * lock's slot on a Cluster (evkeys.c). A call given ev ends with
 * ev_tail(). */
static void call_init_ev(struct fg__call *c, enum fg__lua lua,
			 const char *name, unsigned idle, bool index,
			 const struct fg__ev *ev)
{
	static const char suffix[FG__NKEYS] = { 's', 'q', 'w', 'f' };
	static const char *const nkeys[4] = { "4", "5", "5", "6" };

	c->lua = lua;
	c->argc = 0;
	c->nnums = 0;
	push(c, "FCALL", 5);
	push(c, fn_name[lua], strlen(fn_name[lua]));
	push(c, nkeys[(index ? 1 : 0) | (ev ? 2 : 0)], 1);
	/* "fg:{<name>}:<suffix>", without snprintf: four of these per call
	 * were a tenth of a lock call's CPU in the gateway */
	size_t nl = strlen(name);
	if (nl > FG__KEY_MAX - sizeof("fg:{}:s"))
		nl = FG__KEY_MAX - sizeof("fg:{}:s"); /* never for a valid name */
	for (int i = 0; i < FG__NKEYS; i++) {
		char *k = c->keys[i];
		memcpy(k, "fg:{", 4);
		memcpy(k + 4, name, nl);
		memcpy(k + 4 + nl, "}:", 2);
		k[4 + nl + 2] = suffix[i];
		k[4 + nl + 3] = '\0';
		push(c, k, 4 + nl + 3);
	}
	if (index)
		push(c, INDEX_N, sizeof(INDEX_N) - 1);
	if (ev && ev->cluster) {
		/* the slot of the lock's own key, built above */
		size_t n = fg__ev_slot_key(fg_keyslot(c->keys[0], 4 + nl + 3),
					   c->evkey, sizeof(c->evkey));
		push(c, c->evkey, n);
	} else if (ev) {
		push(c, FG__EV_ONE, sizeof(FG__EV_ONE) - 1);
	}
	fg__call_num(c, idle);
	fg__call_str(c, name, strlen(name));
}

static void call_init(struct fg__call *c, enum fg__lua lua, const char *name,
		      unsigned idle, bool index)
{
	call_init_ev(c, lua, name, idle, index, NULL);
}

/* The last argument of a call that records events: "<retain> <gateway
 * id>" (one argument, not two: an acquire's ninth would double ARGV's
 * table, prelude/call.lua). */
static void ev_tail(struct fg__call *c, const struct fg__ev *ev)
{
	if (!ev)
		return;
	int n = snprintf(c->evarg, sizeof(c->evarg), "%u %.*s",
			 ev->retain ? ev->retain : FG__EV_RETAIN_DEFAULT,
			 FG_GATEWAY_ID_LEN,
			 ev->gateway_id ? ev->gateway_id : "");
	push(c, c->evarg, n > 0 && (size_t)n < sizeof(c->evarg) ? (size_t)n
								  : 0);
}

void fg__call_init(struct fg__call *c, enum fg__lua lua, const char *name,
		   unsigned idle)
{
	call_init(c, lua, name, idle, false);
}

void fg__call_str(struct fg__call *c, const char *s, size_t len)
{
	push(c, s, len);
}

void fg__call_num(struct fg__call *c, uint64_t n)
{
	if (c->nnums >= (int)(sizeof(c->nums) / sizeof(c->nums[0])))
		abort();
	char *buf = c->nums[c->nnums++];
	size_t len = put_u64(buf, n);
	buf[len] = '\0';
	push(c, buf, len);
}

void fg__load_argv(const char *argv[FG__LOAD_ARGC],
		   size_t argvlen[FG__LOAD_ARGC])
{
	argv[0] = "FUNCTION";
	argv[1] = "LOAD";
	argv[2] = "REPLACE";
	argv[3] = fg__lua_library;
	for (int i = 0; i < FG__LOAD_ARGC; i++)
		argvlen[i] = strlen(argv[i]);
}

int fg__reply_nofunction(const redisReply *r)
{
	static const char msg[] = "ERR Function not found";
	return r && r->type == REDIS_REPLY_ERROR &&
	       strncmp(r->str, msg, sizeof(msg) - 1) == 0;
}

uint64_t fg__mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- builders -------------------------------------------------------- */

static void str0(struct fg__call *c, const char *s)
{
	fg__call_str(c, s ? s : "", s ? strlen(s) : 0);
}

void fg__build_acquire(struct fg__call *c, const struct fg_acquire *q,
		       const char *undo_id, unsigned idle, bool index,
		       const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_ACQUIRE, q->name, idle, index, ev);
	str0(c, q->lease);
	fg__call_str(c, q->mode == FG_MODE_SHARED ? "s" : "x", 1);
	fg__call_num(c, q->ttl_ms);
	str0(c, q->client);
	/* Then the letters of the optional arguments that follow, in this
	 * order, and those only: every argument costs Redis a string and a
	 * slot of ARGV, and a ninth one a table twice as large. A common
	 * grant (no lock-delay, no wait) is seven. */
	bool re = q->reenter && *q->reenter;
	if (c->nnums >= (int)(sizeof(c->nums) / sizeof(c->nums[0])))
		abort();
	char *l = c->nums[c->nnums++];
	size_t n = 0;
	if (q->lock_delay_ms)
		l[n++] = 'd';
	if (q->wait_ms)
		l[n++] = 'w';
	if (re)
		l[n++] = 'r';
	if (q->value)
		l[n++] = 'v';
	if (q->owner)
		l[n++] = 'o';
	if (q->principal)
		l[n++] = 'p';
	if (re && undo_id)
		l[n++] = 'u';
	l[n] = '\0';
	push(c, l, n);
	if (q->lock_delay_ms)
		fg__call_num(c, q->lock_delay_ms);
	if (q->wait_ms) {
		fg__call_num(c, q->wait_ms);
		str0(c, q->waiter_id);
		str0(c, q->gateway_id);
		fg__call_num(c, q->liveness_ms);
		fg__call_num(c, q->max_waiters);
	}
	if (re)
		str0(c, q->reenter);
	if (q->value)
		fg__call_str(c, q->value, q->value_len);
	if (q->owner)
		fg__call_str(c, q->owner, q->owner_len);
	if (q->principal)
		fg__call_str(c, q->principal, strlen(q->principal));
	if (re && undo_id) /* the last argument, wherever the rest ends */
		str0(c, undo_id);
	ev_tail(c, ev); /* but for this one, which start() takes first */
}

void fg__build_renew(struct fg__call *c, const char *name, const char *lease,
		     const char *principal, uint32_t ttl_ms, const char *value,
		     size_t value_len, const char *undo_id, unsigned idle,
		     bool index, const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_RENEW, name, idle, index, ev);
	str0(c, lease);
	fg__call_num(c, ttl_ms);
	/* which of value, principal and undo id follow, then those only */
	static const char *const extra[8] = { "", "v", "p", "vp",
					      "u", "vu", "pu", "vpu" };
	const char *e = extra[(value ? 1 : 0) | (principal ? 2 : 0) |
			      (undo_id ? 4 : 0)];
	fg__call_str(c, e, strlen(e));
	if (value)
		fg__call_str(c, value, value_len);
	if (principal)
		fg__call_str(c, principal, strlen(principal));
	if (undo_id)
		str0(c, undo_id);
	ev_tail(c, ev);
}

void fg__build_release(struct fg__call *c, const char *name,
		       const char *lease, const char *principal,
		       unsigned margin_ms, unsigned idle, bool index,
		       const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_RELEASE, name, idle, index, ev);
	str0(c, lease);
	fg__call_num(c, margin_ms);
	if (principal) /* absent: not asked */
		fg__call_str(c, principal, strlen(principal));
	ev_tail(c, ev);
}

void fg__build_break(struct fg__call *c, const char *name, uint64_t token,
		     unsigned margin_ms, const char *by, unsigned idle,
		     const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_BREAK, name, idle, false, ev);
	fg__call_num(c, token);
	fg__call_num(c, margin_ms);
	if (by && ev) /* only the event says who broke it */
		fg__call_str(c, by, strlen(by));
	ev_tail(c, ev);
}

void fg__build_inspect(struct fg__call *c, const char *name, unsigned idle)
{
	fg__call_init(c, FG__LUA_INSPECT, name, idle);
}

void fg__build_describe(struct fg__call *c, const char *name,
			unsigned max_parties, unsigned idle)
{
	fg__call_init(c, FG__LUA_DESCRIBE, name, idle);
	fg__call_num(c, max_parties);
}

/* FCALL fn 2 fg:{!index}:n fg:{!index}:v: keys[2] and keys[3] hold the
 * arguments that are built here. With LOCK (index_drop on one Redis), the
 * four keys of that lock follow the index's: FCALL fn 6 N V S Q W F. */
static void index_init_keys(struct fg__call *c, enum fg__lua lua,
			    const char *lock)
{
	static const char suffix[FG__NKEYS] = { 's', 'q', 'w', 'f' };

	c->lua = lua;
	c->argc = 0;
	c->nnums = 0;
	push(c, "FCALL", 5);
	push(c, fn_name[lua], strlen(fn_name[lua]));
	push(c, lock ? "6" : "2", 1);
	push(c, INDEX_N, sizeof(INDEX_N) - 1);
	push(c, INDEX_V, sizeof(INDEX_V) - 1);
	for (int i = 0; lock && i < FG__NKEYS; i++) {
		int n = snprintf(c->keys[i], sizeof(c->keys[i]), "fg:{%s}:%c",
				 lock, suffix[i]);
		push(c, c->keys[i], (size_t)n);
	}
}

static void index_init(struct fg__call *c, enum fg__lua lua)
{
	index_init_keys(c, lua, NULL);
}

void fg__build_index_add(struct fg__call *c, const char *name,
			 uint64_t token)
{
	index_init(c, FG__LUA_INDEX_ADD);
	str0(c, name);
	fg__call_num(c, token);
}

void fg__build_index_page(struct fg__call *c, const char *prefix,
			  const char *after, unsigned count)
{
	index_init(c, FG__LUA_INDEX_PAGE);
	/* names are ASCII: "\xff" sorts after every name starting with
	 * prefix. Both bounds fit: keys hold FG_NAME_MAX + 12 bytes. */
	int lo, hi;
	if (after)
		lo = snprintf(c->keys[2], sizeof(c->keys[2]), "(%s", after);
	else if (prefix && *prefix)
		lo = snprintf(c->keys[2], sizeof(c->keys[2]), "[%s", prefix);
	else
		lo = snprintf(c->keys[2], sizeof(c->keys[2]), "-");
	if (prefix && *prefix)
		hi = snprintf(c->keys[3], sizeof(c->keys[3]), "[%s\xff", prefix);
	else
		hi = snprintf(c->keys[3], sizeof(c->keys[3]), "+");
	push(c, c->keys[2], (size_t)lo);
	push(c, c->keys[3], (size_t)hi);
	fg__call_num(c, count);
}

void fg__build_index_drop(struct fg__call *c, const char *name,
			  uint64_t seen, bool lock)
{
	index_init_keys(c, FG__LUA_INDEX_DROP, lock ? name : NULL);
	str0(c, name);
	fg__call_num(c, seen);
}

void fg__build_check(struct fg__call *c, const char *name, uint64_t token,
		     unsigned idle, const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_CHECK, name, idle, false, ev);
	fg__call_num(c, token);
	ev_tail(c, ev);
}

void fg__build_tick(struct fg__call *c, const char *name,
		    const char *gateway_id, uint32_t liveness_ms, int observe,
		    unsigned idle, const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_TICK, name, idle, false, ev);
	str0(c, gateway_id);
	fg__call_num(c, liveness_ms);
	fg__call_str(c, observe ? "1" : "0", 1);
	ev_tail(c, ev);
}

void fg__build_dequeue(struct fg__call *c, const char *name,
		       const char *waiter_id, const char *lease, int peek,
		       unsigned idle, const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_DEQUEUE, name, idle, false, ev);
	str0(c, waiter_id);
	str0(c, lease);
	fg__call_str(c, peek ? "1" : "0", 1);
	ev_tail(c, ev);
}

void fg__build_admit(struct fg__call *c, enum fg__lua lua, const char *name,
		     uint64_t token, const char *write_id, uint32_t margin_ms,
		     uint32_t limit_ms, unsigned idle, const struct fg__ev *ev)
{
	call_init_ev(c, lua, name, idle, false, ev);
	fg__call_num(c, token);
	str0(c, write_id);
	fg__call_num(c, margin_ms);
	fg__call_num(c, limit_ms);
	ev_tail(c, ev);
}

void fg__build_finish(struct fg__call *c, const char *name,
		      const char *write_id, unsigned idle)
{
	fg__call_init(c, FG__LUA_FINISH, name, idle);
	str0(c, write_id);
}

void fg__build_giveback(struct fg__call *c, const char *name,
			const char *lease, const char *waiter_id,
			const char *undo_id, bool ran, unsigned remember_ms,
			const char *reason, unsigned idle,
			const struct fg__ev *ev)
{
	call_init_ev(c, FG__LUA_GIVEBACK, name, idle, false, ev);
	str0(c, lease);
	str0(c, waiter_id);
	fg__call_num(c, remember_ms);
	if (undo_id) {
		str0(c, undo_id);
		if (ran)
			fg__call_str(c, "1", 1);
	}
	if (ev) /* why, for the event: before the events' own argument */
		str0(c, reason);
	ev_tail(c, ev);
}

/* ---- events ---------------------------------------------------------- */

/* A field of an event, if it has a value (the stream keeps the non-empty
 * ones only: a reader takes an absent field as empty). */
static void ev_field(struct fg__call *c, const char *f, const char *v)
{
	if (v && *v) {
		push(c, f, 1);
		push(c, v, strlen(v));
	}
}

int fg__build_event(struct fg__call *c, const char *key, size_t keylen,
		    unsigned retain, const char *gateway_id,
		    const struct fg_event_rec *e)
{
	if (!e->kind || !*e->kind)
		return FG_EINVAL;
	c->lua = FG__LUA_COUNT;
	c->argc = 0;
	c->nnums = 0;
	push(c, "XADD", 4);
	push(c, key, keylen);
	push(c, "MAXLEN", 6);
	push(c, "~", 1);
	fg__call_num(c, retain ? retain : FG__EV_RETAIN_DEFAULT);
	push(c, "*", 1);
	push(c, "k", 1);
	push(c, e->kind, strlen(e->kind));
	ev_field(c, "l", e->lock);
	if (e->has_token) {
		push(c, "t", 1);
		fg__call_num(c, e->token);
	}
	ev_field(c, "p", e->principal);
	ev_field(c, "o", e->owner);
	ev_field(c, "c", e->client);
	ev_field(c, "g", gateway_id);
	ev_field(c, "d", e->detail);
	return FG_OK;
}

/* ---- replies --------------------------------------------------------- */

static int is_str(const redisReply *e, const char *s)
{
	return e->type == REDIS_REPLY_STRING && strcmp(e->str, s) == 0;
}

static int int_at(const redisReply *r, size_t i, long long *out)
{
	if (i >= r->elements)
		return -1;
	const redisReply *e = r->element[i];
	if (e->type == REDIS_REPLY_INTEGER) {
		*out = e->integer;
		return 0;
	}
	if (e->type == REDIS_REPLY_STRING && e->len > 0) {
		char *end;
		*out = strtoll(e->str, &end, 10);
		return *end == '\0' ? 0 : -1;
	}
	return -1;
}

static int mode_at(const redisReply *r, size_t i, enum fg_mode *out)
{
	if (i >= r->elements || r->element[i]->type != REDIS_REPLY_STRING)
		return -1;
	*out = r->element[i]->str[0] == 's' ? FG_MODE_SHARED : FG_MODE_EXCLUSIVE;
	return 0;
}

int fg__parse_grant(const redisReply *r, struct fg_grant *g)
{
	long long v;

	memset(g, 0, sizeof(*g));
	g->wake_in_ms = -1;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		return FG_EPROTO;
	const redisReply *st = r->element[0];
	if (is_str(st, "granted")) {
		long long tok, holds, ttl;
		if (int_at(r, 1, &tok) || mode_at(r, 2, &g->mode) ||
		    int_at(r, 3, &holds) || int_at(r, 4, &ttl) || tok < 0)
			return FG_EPROTO;
		g->status = FG_GRANTED;
		g->token = (uint64_t)tok;
		g->holds = (uint32_t)holds;
		g->ttl_ms = (uint32_t)ttl;
	} else if (is_str(st, "queued") || is_str(st, "busy")) {
		g->status = is_str(st, "queued") ? FG_QUEUED : FG_BUSY;
		if (r->elements > 1) {
			if (int_at(r, 1, &v))
				return FG_EPROTO;
			g->wake_in_ms = v;
		}
		if (g->status == FG_BUSY && r->elements > 2) {
			if (int_at(r, 2, &v) || v < 0 || v > UINT32_MAX)
				return FG_EPROTO;
			g->delay_ms = (uint32_t)v;
		}
	} else if (is_str(st, "expired") || is_str(st, "removed")) {
		g->status = is_str(st, "expired") ? FG_EXPIRED : FG_REMOVED;
		/* break: the grant's token, or the newest the lock knows of */
		if (r->elements > 1) {
			if (int_at(r, 1, &v) || v < 0)
				return FG_EPROTO;
			g->token = (uint64_t)v;
		}
	} else if (is_str(st, "toomany")) {
		g->status = FG_TOO_MANY;
	} else if (is_str(st, "forbidden")) {
		g->status = FG_FORBIDDEN;
	} else {
		return FG_EPROTO;
	}
	return FG_OK;
}

/* A party's four strings (describe.lua) at r->element[i..i+3]. */
static int party_at(const redisReply *r, size_t i, struct fg_party *p)
{
	for (size_t k = 0; k < 4; k++)
		if (r->element[i + k]->type != REDIS_REPLY_STRING)
			return FG_EPROTO;
	const char *o = r->element[i]->str;
	p->owner = o[0] == '+' ? o + 1 : NULL;
	p->principal = r->element[i + 1]->len ? r->element[i + 1]->str : NULL;
	p->client = r->element[i + 2]->str;
	long long ms;
	if (int_at(r, i + 3, &ms) || ms < 0)
		return FG_EPROTO;
	p->ms = (uint64_t)ms;
	return FG_OK;
}

static int parties_at(const redisReply *r, size_t i, struct fg_party **out,
		      size_t *n)
{
	const redisReply *l = r->element[i];
	*out = NULL;
	*n = 0;
	if (l->type != REDIS_REPLY_ARRAY || l->elements % 4)
		return FG_EPROTO;
	if (l->elements == 0)
		return FG_OK;
	*out = calloc(l->elements / 4, sizeof(**out));
	if (!*out)
		return FG_ENOMEM;
	for (size_t k = 0; k < l->elements; k += 4)
		if (party_at(l, k, &(*out)[k / 4]))
			return FG_EPROTO;
	*n = l->elements / 4;
	return FG_OK;
}

void fg__detail_finish(struct fg_lock_detail *d)
{
	free(d->holders);
	free(d->waiters);
	d->holders = d->waiters = NULL;
}

int fg__parse_detail(const redisReply *r, struct fg_lock_detail *d)
{
	long long active, tok, ttl, delay, now;

	memset(d, 0, sizeof(*d));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 8)
		return FG_EPROTO;
	if (int_at(r, 0, &active) || int_at(r, 3, &ttl) ||
	    int_at(r, 4, &delay) || int_at(r, 5, &now) || now < 0)
		return FG_EPROTO;
	d->active = active != 0;
	d->ttl_ms = ttl > 0 ? (uint64_t)ttl : 0;
	d->delay_ms = delay > 0 ? (uint64_t)delay : 0;
	d->seen = (uint64_t)now;
	d->mode = FG_MODE_EXCLUSIVE;
	if (r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len) {
		d->held = true;
		if (mode_at(r, 1, &d->mode))
			return FG_EPROTO;
	}
	if (r->element[2]->type == REDIS_REPLY_STRING && r->element[2]->len) {
		if (int_at(r, 2, &tok) || tok < 0)
			return FG_EPROTO;
		d->has_token = true;
		d->token = (uint64_t)tok;
	}
	int err = parties_at(r, 6, &d->holders, &d->nholders);
	if (!err)
		err = parties_at(r, 7, &d->waiters, &d->nwaiters);
	if (err)
		fg__detail_finish(d);
	return err;
}

int fg__parse_info(const redisReply *r, struct fg_lock_info *info)
{
	long long held, holders, waiters, ttl, tok;

	memset(info, 0, sizeof(*info));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 6)
		return FG_EPROTO;
	if (int_at(r, 0, &held) || int_at(r, 3, &holders) ||
	    int_at(r, 4, &waiters) || int_at(r, 5, &ttl))
		return FG_EPROTO;
	info->held = held != 0;
	info->mode = FG_MODE_EXCLUSIVE;
	if (r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len)
		mode_at(r, 1, &info->mode);
	if (r->element[2]->type == REDIS_REPLY_STRING && r->element[2]->len) {
		if (int_at(r, 2, &tok) || tok < 0)
			return FG_EPROTO;
		info->has_token = true;
		info->token = (uint64_t)tok;
	}
	info->holders = (uint32_t)holders;
	info->waiters = (uint32_t)waiters;
	info->ttl_ms = ttl > 0 ? (uint64_t)ttl : 0;
	/* read before anything is allocated: a refusal frees nothing */
	if (r->elements > 8) {
		long long delay;
		if (int_at(r, 8, &delay))
			return FG_EPROTO;
		info->delay_ms = delay > 0 ? (uint64_t)delay : 0;
	}
	if (r->elements > 6 && r->element[6]->type == REDIS_REPLY_STRING) {
		info->value = strndup(r->element[6]->str, r->element[6]->len);
		if (!info->value)
			return FG_ENOMEM;
		info->value_len = r->element[6]->len;
	}
	if (r->elements > 7 && r->element[7]->type == REDIS_REPLY_STRING) {
		info->owner = strndup(r->element[7]->str, r->element[7]->len);
		if (!info->owner)
			return FG_ENOMEM;
	}
	return FG_OK;
}

void fg_lock_info_finish(struct fg_lock_info *info)
{
	if (!info)
		return;
	free(info->value);
	free(info->owner);
	info->value = NULL;
	info->owner = NULL;
}

int fg__parse_check(const redisReply *r, struct fg_check *out)
{
	long long cur;

	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
		return FG_EPROTO;
	const redisReply *st = r->element[0];
	if (int_at(r, 1, &cur) || cur < 0)
		return FG_EPROTO;
	out->has_current = cur > 0;
	out->current = (uint64_t)cur;
	if (is_str(st, "valid")) {
		out->status = FG_CHECK_VALID;
		if (mode_at(r, 2, &out->mode))
			return FG_EPROTO;
	} else if (is_str(st, "stale")) {
		out->status = FG_CHECK_STALE;
	} else if (is_str(st, "expired")) {
		out->status = FG_CHECK_EXPIRED;
	} else if (is_str(st, "forged")) {
		out->status = FG_CHECK_FORGED;
	} else {
		return FG_EPROTO;
	}
	return FG_OK;
}

int fg__parse_admit(const redisReply *r, struct fg_admit *out)
{
	long long a, b;

	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    int_at(r, 1, &a))
		return FG_EPROTO;
	const redisReply *st = r->element[0];
	if (is_str(st, "admitted") || is_str(st, "wait")) {
		if (int_at(r, 2, &b) || b < 0)
			return FG_EPROTO;
		out->status = is_str(st, "wait") ? FG_ADMIT_WAIT : FG_ADMITTED;
		out->ms = a;
		if (out->status == FG_ADMITTED)
			out->token = (uint64_t)b;
		out->current = (uint64_t)b;
		out->has_current = b > 0;
		return FG_OK;
	}
	if (a < 0)
		return FG_EPROTO;
	out->current = (uint64_t)a;
	out->has_current = a > 0;
	if (is_str(st, "stale"))
		out->status = FG_ADMIT_STALE;
	else if (is_str(st, "expiring"))
		out->status = FG_ADMIT_EXPIRING;
	else if (is_str(st, "forged"))
		out->status = FG_ADMIT_FORGED;
	else
		return FG_EPROTO;
	return FG_OK;
}

int fg_chan_gateway(const char *gateway_id, char *out, size_t cap)
{
	int n = snprintf(out, cap, "fg:gw:%s", gateway_id);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

int fg_chan_events(const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "fg:ev:%s", name);
	return n < 0 || (size_t)n >= cap ? -1 : n;
}

const char *fg_strerror(int err)
{
	switch (err) {
	case FG_OK: return "ok";
	case FG_EUNAVAIL: return "lock store unavailable";
	case FG_ENOMEM: return "out of memory";
	case FG_EPROTO: return "unexpected reply from the lock store";
	case FG_EINVAL: return "invalid argument";
	case FG_ENOKEY: return "sequencer key not loaded";
	case FG_EREPLICAS: return "too few Redis replicas acknowledged the grant";
	}
	return "unknown error";
}
