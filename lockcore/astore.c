/*
 * astore.c - the asynchronous Redis connections of the gateway's wait loop.
 *
 * Two connections on one libevent base: `cmd` runs the lock scripts, `sub`
 * holds the subscriptions. Both reconnect by themselves.
 *
 * Invariant: every accepted call gets its callback exactly once — with the
 * reply, or with FG_EUNAVAIL when the connection drops or the reply takes
 * longer than command_timeout_ms (hiredis 0.14 async has no timeouts of its
 * own; a Redis that stops answering must not strand a waiter). A late reply
 * after a timeout is discarded, and the connection that was late is
 * dropped, so later replies cannot be misattributed.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/adapters/libevent.h>

#include "lockcore-private.h"

#define RETRY_MS 200

struct conn {
	struct fg_astore *as;
	redisAsyncContext *ac;
	int up;
	int is_sub;
	struct event *retry;
};

struct fg_astore {
	struct event_base *base;
	char *host;
	int port;
	unsigned command_timeout_ms;
	unsigned idle;
	unsigned margin;     /* write_margin_ms */
	struct conn cmd, sub;
	char **chans;
	size_t nchans, capchans;
	fg_message_cb *on_message;
	fg_resync_cb *on_resync;
	void *arg;
	int closing;
	uint64_t sent;      /* commands sent on `cmd`, across reconnects */
	uint64_t load_at;   /* `sent` when the library was last sent to load */
};

/* One call in flight: owns copies of its arguments. */
struct aop {
	fg_astore *as;
	struct fg__call call;
	char *buf;
	int kind; /* 0 grant, 1 info, 2 admit, 3 check */
	fg_grant_cb *gcb;
	fg_info_cb *icb;
	fg_admit_cb *acb;
	fg_check_cb *ccb;
	void *arg;
	struct event *timer;
	int answered;
	int retried;
	uint64_t sent_at;   /* as->sent when the call was (last) sent */
};

static void conn_start(struct conn *cn);

static void schedule_retry(struct conn *cn)
{
	struct timeval tv = { 0, RETRY_MS * 1000 };
	if (!cn->as->closing)
		evtimer_add(cn->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_start(arg);
}

static void subscribe_one(struct conn *cn, const char *chan);

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct conn *cn = ac->data;
	if (status != REDIS_OK) {
		cn->ac = NULL; /* hiredis frees it after this callback */
		schedule_retry(cn);
		return;
	}
	cn->up = 1;
	if (cn->is_sub) {
		for (size_t i = 0; i < cn->as->nchans; i++)
			subscribe_one(cn, cn->as->chans[i]);
		if (cn->as->on_resync)
			cn->as->on_resync(cn->as->arg);
	}
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct conn *cn = ac->data;
	(void)status;
	cn->up = 0;
	cn->ac = NULL;
	schedule_retry(cn);
}

static void conn_start(struct conn *cn)
{
	fg_astore *as = cn->as;
	redisAsyncContext *ac = redisAsyncConnect(as->host, as->port);
	if (!ac || ac->err) {
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(cn);
		return;
	}
	ac->data = cn;
	cn->ac = ac;
	if (redisLibeventAttach(ac, as->base) != REDIS_OK) {
		redisAsyncFree(ac);
		cn->ac = NULL;
		schedule_retry(cn);
		return;
	}
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static int conn_init(struct conn *cn, fg_astore *as, int is_sub)
{
	cn->as = as;
	cn->is_sub = is_sub;
	cn->retry = evtimer_new(as->base, on_retry, cn);
	return cn->retry ? 0 : -1;
}

static void conn_finish(struct conn *cn)
{
	if (cn->ac) {
		redisAsyncContext *ac = cn->ac;
		cn->ac = NULL;
		redisAsyncFree(ac);
	}
	if (cn->retry)
		event_free(cn->retry);
}

fg_astore *fg_astore_create(struct event_base *base,
			    const struct fg_store_opts *o,
			    fg_message_cb *on_message, fg_resync_cb *on_resync,
			    void *arg)
{
	fg_astore *as = calloc(1, sizeof(*as));
	if (!as)
		return NULL;
	as->base = base;
	as->host = strdup(o->host);
	as->port = o->port;
	as->command_timeout_ms = o->command_timeout_ms ? o->command_timeout_ms : 2000;
	as->idle = o->idle_forget_ms;
	as->margin = o->write_margin_ms;
	as->on_message = on_message;
	as->on_resync = on_resync;
	as->arg = arg;
	if (!as->host || conn_init(&as->cmd, as, 0) || conn_init(&as->sub, as, 1)) {
		fg_astore_destroy(as);
		return NULL;
	}
	conn_start(&as->cmd);
	conn_start(&as->sub);
	return as;
}

void fg_astore_destroy(fg_astore *as)
{
	if (!as)
		return;
	as->closing = 1;
	conn_finish(&as->cmd);
	conn_finish(&as->sub);
	for (size_t i = 0; i < as->nchans; i++)
		free(as->chans[i]);
	free(as->chans);
	free(as->host);
	free(as);
}

/* ---- subscriptions --------------------------------------------------- */

static void on_sub_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct conn *cn = ac->data;
	redisReply *r = reply;
	(void)priv;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    r->element[1]->type != REDIS_REPLY_STRING)
		return;
	const char *kind = r->element[0]->str;
	const char *chan = r->element[1]->str;
	if (strcmp(kind, "message") == 0 &&
	    r->element[2]->type == REDIS_REPLY_STRING)
		cn->as->on_message(chan, r->element[2]->str,
				   r->element[2]->len, cn->as->arg);
	else if (strcmp(kind, "subscribe") == 0)
		cn->as->on_message(chan, NULL, 0, cn->as->arg);
}

static void subscribe_one(struct conn *cn, const char *chan)
{
	const char *argv[] = { "SUBSCRIBE", chan };
	size_t len[] = { 9, strlen(chan) };
	redisAsyncCommandArgv(cn->ac, on_sub_reply, NULL, 2, argv, len);
}

int fg_astore_subscribe(fg_astore *as, const char *channel)
{
	if (as->nchans == as->capchans) {
		size_t cap = as->capchans ? as->capchans * 2 : 8;
		char **n = realloc(as->chans, cap * sizeof(*n));
		if (!n)
			return FG_ENOMEM;
		as->chans = n;
		as->capchans = cap;
	}
	char *copy = strdup(channel);
	if (!copy)
		return FG_ENOMEM;
	as->chans[as->nchans++] = copy;
	if (as->sub.up)
		subscribe_one(&as->sub, channel);
	return FG_OK;
}

int fg_astore_unsubscribe(fg_astore *as, const char *channel)
{
	for (size_t i = 0; i < as->nchans; i++) {
		if (strcmp(as->chans[i], channel) != 0)
			continue;
		free(as->chans[i]);
		as->chans[i] = as->chans[--as->nchans];
		if (as->sub.up) {
			const char *argv[] = { "UNSUBSCRIBE", channel };
			size_t len[] = { 11, strlen(channel) };
			redisAsyncCommandArgv(as->sub.ac, NULL, NULL, 2, argv, len);
		}
		return FG_OK;
	}
	return FG_OK;
}

int fg_astore_ready(const fg_astore *as)
{
	return as && as->cmd.up && as->sub.up;
}

/* ---- script calls ---------------------------------------------------- */

static void aop_free(struct aop *op)
{
	if (op->timer)
		event_free(op->timer);
	free(op->buf);
	free(op);
}

static void answer(struct aop *op, int err, const redisReply *r)
{
	if (op->answered)
		return;
	op->answered = 1;
	evtimer_del(op->timer);
	if (op->kind == 0) {
		struct fg_grant g;
		if (!err)
			err = fg__parse_grant(r, &g);
		if (op->gcb)
			op->gcb(err, err ? NULL : &g, op->arg);
	} else if (op->kind == 1) {
		struct fg_lock_info info;
		if (!err)
			err = fg__parse_info(r, &info);
		op->icb(err, err ? NULL : &info, op->arg);
		if (!err)
			fg_lock_info_finish(&info);
	} else if (op->kind == 2) {
		struct fg_admit a;
		if (!err)
			err = fg__parse_admit(r, &a);
		op->acb(err, err ? NULL : &a, op->arg);
	} else {
		struct fg_check c;
		if (!err)
			err = fg__parse_check(r, &c);
		op->ccb(err, err ? NULL : &c, op->arg);
	}
}

static int send_op(struct aop *op);
static int send_load(fg_astore *as);

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct aop *op = priv;
	redisReply *r = reply;
	(void)ac;
	if (op->answered) { /* timed out earlier; this reply is discarded */
		aop_free(op);
		return;
	}
	if (r && fg__reply_nofunction(r) && !op->retried) {
		/* Every call in flight when the library went missing comes
		 * back like this; the first one loads it, and every retry is
		 * sent after that load on the same connection. */
		op->retried = 1;
		if ((op->as->load_at >= op->sent_at || send_load(op->as) == FG_OK) &&
		    send_op(op) == FG_OK)
			return;
		r = NULL;
	}
	int err = (!r || r->type == REDIS_REPLY_ERROR) ? FG_EUNAVAIL : FG_OK;
	answer(op, err, r);
	aop_free(op);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct aop *op = arg;
	fg_astore *as = op->as;
	(void)fd;
	(void)what;
	answer(op, FG_EUNAVAIL, NULL);
	/* The op stays owned by hiredis' callback list: freeing the
	 * connection (not a graceful disconnect, which would wait for the
	 * very reply that is late) calls on_reply(NULL) for every pending
	 * call, which frees them, and on_disconnect, which reconnects. */
	if (as->cmd.ac) {
		redisAsyncContext *ac = as->cmd.ac;
		redisAsyncFree(ac);
	}
}

static int send_op(struct aop *op)
{
	fg_astore *as = op->as;
	if (!as->cmd.up || !as->cmd.ac)
		return FG_EUNAVAIL;
	if (redisAsyncCommandArgv(as->cmd.ac, on_reply, op, op->call.argc,
				  op->call.argv, op->call.argvlen) != REDIS_OK)
		return FG_EUNAVAIL;
	op->sent_at = ++as->sent;
	return FG_OK;
}

/* Sends FUNCTION LOAD REPLACE; its reply is not waited for: the calls sent
 * after it on the connection find the library (or fail, if Redis refused
 * it). */
static int send_load(fg_astore *as)
{
	const char *argv[FG__LOAD_ARGC];
	size_t len[FG__LOAD_ARGC];
	if (!as->cmd.up || !as->cmd.ac)
		return FG_EUNAVAIL;
	fg__load_argv(argv, len);
	if (redisAsyncCommandArgv(as->cmd.ac, NULL, NULL, FG__LOAD_ARGC, argv,
				  len) != REDIS_OK)
		return FG_EUNAVAIL;
	as->load_at = ++as->sent;
	return FG_OK;
}

/* Copies the call's arguments into op->buf so that it outlives the caller. */
static int own(struct aop *op)
{
	size_t total = 0;
	for (int i = 0; i < op->call.argc; i++)
		total += op->call.argvlen[i];
	op->buf = malloc(total + 1);
	if (!op->buf)
		return FG_ENOMEM;
	char *p = op->buf;
	for (int i = 0; i < op->call.argc; i++) {
		memcpy(p, op->call.argv[i], op->call.argvlen[i]);
		op->call.argv[i] = p;
		p += op->call.argvlen[i];
	}
	return FG_OK;
}

static int submit(fg_astore *as, struct aop *op)
{
	struct timeval tv = { as->command_timeout_ms / 1000,
			      (as->command_timeout_ms % 1000) * 1000 };
	op->as = as;
	int err = own(op);
	if (!err) {
		op->timer = evtimer_new(as->base, on_timeout, op);
		err = op->timer ? FG_OK : FG_ENOMEM;
	}
	if (!err)
		err = send_op(op);
	if (err) {
		aop_free(op);
		return err;
	}
	evtimer_add(op->timer, &tv);
	return FG_OK;
}

static struct aop *grant_op(fg_grant_cb *cb, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (op) {
		op->kind = 0;
		op->gcb = cb;
		op->arg = arg;
	}
	return op;
}

int fg_alock_acquire(fg_astore *as, const struct fg_acquire *req,
		     fg_grant_cb *cb, void *arg)
{
	if (req->wait_ms > 0 && (!req->waiter_id || !req->gateway_id))
		return FG_EINVAL;
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_acquire(&op->call, req, as->idle);
	return submit(as, op);
}

int fg_alock_renew(fg_astore *as, const char *name, const char *lease,
		   uint32_t ttl_ms, const char *value, size_t value_len,
		   fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_renew(&op->call, name, lease, ttl_ms, value, value_len,
			as->idle);
	return submit(as, op);
}

int fg_alock_check(fg_astore *as, const char *name, uint64_t token,
		   fg_check_cb *cb, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (!op)
		return FG_ENOMEM;
	op->kind = 3;
	op->ccb = cb;
	op->arg = arg;
	fg__build_check(&op->call, name, token, as->idle);
	return submit(as, op);
}

int fg_alock_tick(fg_astore *as, const char *name, const char *gateway_id,
		  uint32_t liveness_ms, bool observe, fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_tick(&op->call, name, gateway_id, liveness_ms, observe, as->idle);
	return submit(as, op);
}

int fg_alock_dequeue(fg_astore *as, const char *name, const char *waiter_id,
		     const char *lease, bool peek, fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_dequeue(&op->call, name, waiter_id, lease, peek, as->idle);
	return submit(as, op);
}

int fg_alock_release(fg_astore *as, const char *name, const char *lease,
		     fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_release(&op->call, name, lease, as->margin, as->idle);
	return submit(as, op);
}

int fg_alock_inspect(fg_astore *as, const char *name, fg_info_cb *cb,
		     void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (!op)
		return FG_ENOMEM;
	op->kind = 1;
	op->icb = cb;
	op->arg = arg;
	fg__build_inspect(&op->call, name, as->idle);
	return submit(as, op);
}

static int admit_op(fg_astore *as, enum fg__lua lua, const char *name,
		    uint64_t token, const char *write_id, uint32_t margin_ms,
		    uint32_t limit_ms, fg_admit_cb *cb, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (!op)
		return FG_ENOMEM;
	op->kind = 2;
	op->acb = cb;
	op->arg = arg;
	fg__build_admit(&op->call, lua, name, token, write_id, margin_ms,
			limit_ms, as->idle);
	return submit(as, op);
}

int fg_alock_admit(fg_astore *as, const char *name, uint64_t token,
		   const char *write_id, uint32_t margin_ms,
		   uint32_t longest_ms, fg_admit_cb *cb, void *arg)
{
	return admit_op(as, FG__LUA_ADMIT, name, token, write_id, margin_ms,
			longest_ms, cb, arg);
}

int fg_alock_extend(fg_astore *as, const char *name, uint64_t token,
		    const char *write_id, uint32_t margin_ms, uint32_t left_ms,
		    fg_admit_cb *cb, void *arg)
{
	return admit_op(as, FG__LUA_EXTEND, name, token, write_id, margin_ms,
			left_ms, cb, arg);
}

int fg_alock_finish(fg_astore *as, const char *name, const char *write_id,
		    fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_finish(&op->call, name, write_id, as->idle);
	return submit(as, op);
}
