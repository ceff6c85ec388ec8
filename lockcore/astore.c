/*
 * astore.c - the asynchronous Redis connections of one gateway event loop.
 *
 * Command connections (one to the master, or one per cluster master) run
 * the lock scripts; `sub` holds the subscriptions. All reconnect by
 * themselves, to wherever the topology (fencegate/topo.h) says the
 * masters are now: a loop follows a failover or a slot move at its next
 * call, or when told (fg_astore_follow()). Each session begins with AUTH
 * when there are credentials (topo-private.h), queued ahead of anything
 * else; it counts as up, and subscribes, only once AUTH said OK, and a
 * refused AUTH ends it and is retried like a failed connect.
 *
 * Invariants: every accepted call gets its callback exactly once — with
 * the reply, or with FG_EUNAVAIL when the connection drops or the reply
 * takes longer than command_timeout_ms (hiredis 0.14 async has no timeouts
 * of its own; a Redis that stops answering must not strand a waiter). A
 * late reply after a timeout is discarded, and the connection that was
 * late is dropped, so later replies cannot be misattributed. A call is
 * sent again only after a reply that says it did not run (MOVED, ASK,
 * TRYAGAIN, a missing function library), never after a lost connection.
 * When the topology moves, the loop is told through on_resync, as when
 * the subscription reconnects: what a failed master held may be gone.
 * With replicas set, a grant reaches its callback only after WAIT counted
 * them; a grant WAIT falls short of is released before FG_EUNAVAIL is
 * answered.
 *
 * An answer that was lost leaves nothing behind: an acquire with a fresh
 * lease (or a waiter's confirmation) that may have run but whose caller
 * is told it failed becomes a give-back job, sent until Redis answers it
 * (giveback.lua: idempotent, and it makes the call itself a no-op should
 * it reach Redis later). A renewal or a re-entry is sent with an undo id
 * (undo_id()) for the same end: one that fails once sent becomes a job
 * that puts back what it did (its lease stays the client's). The happy
 * path pays nothing for this but the id: no call is added to one that
 * succeeds.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <openssl/rand.h>
#include <hiredis/hiredis.h>

#include "fencegate/topo.h"
#include "lockcore-private.h"
#include "topo-private.h"

#define RETRY_MS 200
#define GIVEBACK_EVERY_MS 200    /* a give-back Redis has not answered */
/* How long a given-back lease stays a no-op: past any delay a call can
 * still meet on its way into Redis (a stalled or paused server reads a
 * dropped connection's last bytes when it wakes, within milliseconds of a
 * give-back sent then; this is a wide bound, and costs one hash field). */
#define GIVEBACK_REMEMBER_MS 60000
#define GIVEBACK_MAX 100000      /* jobs kept per loop; beyond, leases expire */
#define MAX_HOPS 16        /* redirections and TRYAGAINs of one call */
#define TRYAGAIN_MS 10     /* a slot in migration: ask again after this */

struct conn {
	struct fg_astore *as;
	redisAsyncContext *ac;
	struct fg_redis_node node;
	int up;
	int is_sub;
	int pinned;         /* a cluster master's: keeps its node */
	int retired;        /* its node left the topology: not restarted */
	int logging_in;     /* this session waits for AUTH's answer */
	int subscribed;     /* sub: Redis took a SUBSCRIBE of this session
			       (or it had none to send) */
	struct event *retry;
	uint64_t epoch;     /* grows with every connect: one Redis session */
	uint64_t sent;      /* commands sent, across reconnects */
	uint64_t load_at;   /* `sent` when the library was last sent to load */
	struct conn *next;
};

/* A lease to give back, until Redis answers (fg_alock_give_back()). */
struct giveback {
	struct giveback *next, *prev;
	enum fg_giveback_reason why;
	int inflight;
	int ran;       /* an undo of a re-entry known to have run */
	const char *lease, *wid, *uid; /* into name's allocation */
	char name[];   /* "<name>\0<lease>\0<waiter id>\0<undo id>\0" */
};

#define UNDO_ID_MAX 40

struct fg_astore {
	struct event_base *base;
	fg_topo *topo;
	unsigned command_timeout_ms;
	unsigned idle;
	unsigned margin;     /* write_margin_ms */
	fg_script_observer *observe;
	void *observe_arg;
	fg_giveback_observer *gave_back;
	struct giveback *gbs;    /* not yet answered */
	size_t ngbs;
	struct event *gb_timer;
	char uid_pfx[17];        /* random: undo ids of gateways never meet */
	uint64_t uid_seq;
	unsigned replicas, replicas_timeout_ms;
	struct fg_topo_view view;
	struct conn *conns;  /* command connections */
	struct conn sub;
	unsigned spread;     /* which cluster node `sub` prefers */
	struct event *moved_ev; /* the view moved: on_resync, from the loop */
	char **chans;
	size_t nchans, capchans;
	fg_message_cb *on_message;
	fg_resync_cb *on_resync;
	void *arg;
	int closing;
};

/* One call in flight: owns copies of its arguments. */
struct aop {
	fg_astore *as;
	struct fg__call call;
	char *buf;
	int kind; /* 0 grant, 1 info, 2 admit, 3 check, 4 detail, 5 names,
		     6 nobody waits, 7 an index update that then hands on
		     the grant `g` it carries */
	fg_grant_cb *gcb;
	fg_detail_cb *dcb;
	fg_names_cb *ncb;
	fg_info_cb *icb;
	fg_admit_cb *acb;
	fg_check_cb *ccb;
	void *arg;
	struct event *timer;
	struct event *again;   /* TRYAGAIN's pause */
	int answered;
	int retried;           /* the library was loaded for it */
	int hops;
	unsigned slot;
	struct conn *conn;     /* where it is in flight, or NULL */
	uint64_t sent_at;      /* conn->sent when it was (last) sent */
	uint64_t epoch;        /* conn->epoch then */
	int has_to, ask;       /* a redirection to `to` (ASK: once) */
	struct fg_redis_node to;
	char *undo_lease;      /* acked: "<lease>\0<name>", released if WAIT
				  falls short */
	char *gb;              /* a fresh lease's call, or a renewal's or a
				  re-entry's: "<name>\0<lease>\0<waiter
				  id>\0<undo id>", given back (undone) if it
				  fails once sent */
	char uid[UNDO_ID_MAX]; /* the undo id the call carries ("": none) */
	int maybe_ran;         /* sent, and no reply said it did not run */
	int why;               /* enum fg_giveback_reason of a failure */
	int undone;            /* WAIT fell short and the grant was released */
	struct fg_grant g;     /* acked: the grant WAIT is asked about */
	uint64_t t0_ns;        /* monotonic, when it was submitted */
};

static void conn_start(struct conn *cn);
static void on_gb_timer(evutil_socket_t fd, short what, void *arg);

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static void follow(fg_astore *as);

static int same_node(const struct fg_redis_node *a, const struct fg_redis_node *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static void schedule_retry(struct conn *cn)
{
	struct timeval tv = { 0, RETRY_MS * 1000 };
	if (!cn->as->closing && !cn->retired)
		evtimer_add(cn->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *cn = arg;
	follow(cn->as);
	if (!cn->ac)
		conn_start(cn);
}

static void subscribe_one(struct conn *cn, const char *chan);
static void conn_drop(struct conn *cn);

/* The session is connected and logged in: it may serve. */
static void session_up(struct conn *cn)
{
	cn->up = 1;
	if (cn->is_sub) {
		/* ready once Redis took one: a user without the channel
		 * right is answered NOPERM, and hiredis ends the session */
		cn->subscribed = cn->as->nchans == 0;
		for (size_t i = 0; i < cn->as->nchans; i++)
			subscribe_one(cn, cn->as->chans[i]);
		if (cn->as->on_resync)
			cn->as->on_resync(cn->as->arg);
	}
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct conn *cn = ac->data;
	if (cn->ac != ac)
		return; /* a context this connection already let go of */
	if (status != REDIS_OK) {
		cn->ac = NULL; /* hiredis frees it after this callback */
		if (cn->is_sub)
			cn->as->spread++; /* another master next time */
		fg_topo_suspect(cn->as->topo);
		schedule_retry(cn);
		return;
	}
	if (!cn->logging_in) /* else AUTH's answer brings the session up */
		session_up(cn);
}

/* AUTH's answer, the first reply of every session with credentials. */
static void on_login(redisAsyncContext *ac, void *reply, void *priv)
{
	struct conn *cn = ac->data;
	(void)priv;
	if (cn->ac != ac || !reply)
		return; /* dropped already: on_disconnect or conn_drop saw to it */
	cn->logging_in = 0;
	if (fg__login_reply(cn->as->topo, &cn->node, reply) == FG_OK) {
		session_up(cn);
		return;
	}
	/* refused: down, like a connect that failed; what was queued
	 * behind AUTH is answered FG_EUNAVAIL as the session is freed */
	if (cn->is_sub)
		cn->as->spread++;
	conn_drop(cn);
	schedule_retry(cn);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct conn *cn = ac->data;
	if (cn->ac != ac)
		return;
	/* hiredis ends a session on an error reply it has no caller for: a
	 * SUBSCRIBE refused for want of a channel right */
	if (status != REDIS_OK && ac->errstr)
		fg__login_refused(cn->as->topo, &cn->node, ac->errstr);
	cn->up = 0;
	cn->ac = NULL;
	if (cn->is_sub)
		cn->as->spread++;
	fg_topo_suspect(cn->as->topo);
	schedule_retry(cn);
}

/* Where an unpinned connection goes now: the master, or for `sub` in a
 * cluster one of the masters. 0, or -1 while nobody knows. */
static int pick(struct conn *cn)
{
	const struct fg_topo_view *v = &cn->as->view;
	if (!v->nnodes)
		return -1;
	size_t i = v->slots ? cn->as->spread % v->nnodes : 0;
	cn->node = v->nodes[i];
	return 0;
}

static void conn_start(struct conn *cn)
{
	fg_astore *as = cn->as;
	if (cn->retired || as->closing)
		return;
	evtimer_del(cn->retry);
	if (!cn->pinned && pick(cn)) {
		schedule_retry(cn);
		return;
	}
	redisAsyncContext *ac = redisAsyncConnect(cn->node.host, cn->node.port);
	if (!ac || ac->err) {
		if (ac)
			redisAsyncFree(ac);
		schedule_retry(cn);
		return;
	}
	ac->data = cn;
	cn->ac = ac;
	cn->epoch++;
	/* AUTH goes first in the output buffer, ahead of any call queued
	 * while the connect is under way */
	const char *argv[FG__LOGIN_ARGC_MAX];
	size_t len[FG__LOGIN_ARGC_MAX];
	int argc = fg__login_argv(as->topo, argv, len);
	cn->logging_in = argc > 0;
	if (fg__redis_attach(ac, as->base) != REDIS_OK ||
	    (argc && redisAsyncCommandArgv(ac, on_login, NULL, argc, argv,
					   len) != REDIS_OK)) {
		cn->ac = NULL;
		redisAsyncFree(ac);
		schedule_retry(cn);
		return;
	}
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

/* Drops the session (calls in flight on it answer FG_EUNAVAIL). Safe
 * inside one of its own callbacks: hiredis then frees it on return. */
static void conn_drop(struct conn *cn)
{
	redisAsyncContext *ac = cn->ac;
	cn->ac = NULL;
	cn->up = 0;
	if (ac)
		redisAsyncFree(ac);
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
	conn_drop(cn);
	if (cn->retry)
		event_free(cn->retry);
}

/* The command connection to a cluster master, made when first needed. */
static struct conn *conn_for(fg_astore *as, const struct fg_redis_node *node)
{
	struct conn *cn;
	for (cn = as->conns; cn; cn = cn->next)
		if (cn->pinned && same_node(&cn->node, node))
			break;
	if (!cn) {
		cn = calloc(1, sizeof(*cn));
		if (!cn || conn_init(cn, as, 0)) {
			free(cn);
			return NULL;
		}
		cn->pinned = 1;
		cn->node = *node;
		cn->next = as->conns;
		as->conns = cn;
	}
	if (cn->retired) {
		cn->retired = 0;
		conn_start(cn);
	} else if (!cn->ac && !evtimer_pending(cn->retry, NULL)) {
		conn_start(cn);
	}
	return cn;
}

static int in_view(const fg_astore *as, const struct fg_redis_node *n)
{
	for (size_t i = 0; i < as->view.nnodes; i++)
		if (same_node(&as->view.nodes[i], n))
			return 1;
	return 0;
}

/* Takes the topology's current view if it moved: connections to servers
 * that are no longer masters are dropped, so nothing keeps writing to a
 * demoted master. */
static void follow(fg_astore *as)
{
	if (fg_topo_gen(as->topo) == as->view.gen)
		return;
	struct fg_topo_view v;
	if (fg_topo_view(as->topo, &v))
		return;
	/* A master that failed may have taken with it the records of the
	 * writes this loop runs and the places of its waiters (docs/safety.md
	 * section 9): the loop asks about all of them again, on the new
	 * masters, as when its subscription reconnects. */
	if (as->view.nnodes)
		event_active(as->moved_ev, EV_READ, 0);
	fg_topo_view_finish(&as->view);
	as->view = v;
	for (struct conn *cn = as->conns; cn; cn = cn->next) {
		if (cn->pinned ? in_view(as, &cn->node)
			       : (cn->ac && v.nnodes && same_node(&cn->node, &v.nodes[0])))
			continue;
		if (cn->pinned)
			cn->retired = 1;
		conn_drop(cn);
		conn_start(cn);
	}
	if (v.slots)
		for (size_t i = 0; i < v.nnodes; i++)
			conn_for(as, &v.nodes[i]);
	if (!as->sub.ac || !in_view(as, &as->sub.node)) {
		conn_drop(&as->sub);
		conn_start(&as->sub);
	}
}

static void on_moved(evutil_socket_t fd, short what, void *arg)
{
	fg_astore *as = arg;
	(void)fd;
	(void)what;
	if (as->on_resync)
		as->on_resync(as->arg);
}

void fg_astore_follow(fg_astore *as)
{
	if (as)
		follow(as);
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
	as->topo = o->topo;
	as->command_timeout_ms = o->command_timeout_ms ? o->command_timeout_ms : 2000;
	as->idle = o->idle_forget_ms;
	as->margin = o->write_margin_ms;
	as->replicas = o->replicas;
	as->replicas_timeout_ms = o->replicas_timeout_ms;
	as->observe = o->observe;
	as->observe_arg = o->observe_arg;
	as->gave_back = o->gave_back;
	as->on_message = on_message;
	as->on_resync = on_resync;
	as->arg = arg;
	as->spread = (unsigned)rand();
	unsigned char rb[8];
	if (RAND_bytes(rb, sizeof(rb)) != 1)
		goto error;
	for (size_t i = 0; i < sizeof(rb); i++)
		snprintf(as->uid_pfx + 2 * i, 3, "%02x", rb[i]);
	as->moved_ev = event_new(base, -1, 0, on_moved, as);
	as->gb_timer = evtimer_new(base, on_gb_timer, as);
	if (!as->moved_ev || !as->gb_timer || conn_init(&as->sub, as, 1))
		goto error;
	if (fg_topo_mode(as->topo) != FG_REDIS_CLUSTER) {
		as->conns = calloc(1, sizeof(*as->conns));
		if (!as->conns || conn_init(as->conns, as, 0))
			goto error;
	}
	if (fg_topo_view(as->topo, &as->view))
		goto error;
	if (as->view.slots)
		for (size_t i = 0; i < as->view.nnodes; i++)
			conn_for(as, &as->view.nodes[i]);
	else if (as->conns)
		conn_start(as->conns);
	conn_start(&as->sub);
	return as;
error:
	fg_astore_destroy(as);
	return NULL;
}

void fg_astore_destroy(fg_astore *as)
{
	if (!as)
		return;
	as->closing = 1;
	while (as->conns) {
		struct conn *cn = as->conns;
		as->conns = cn->next;
		conn_finish(cn);
		free(cn);
	}
	conn_finish(&as->sub);
	if (as->moved_ev)
		event_free(as->moved_ev);
	/* what is not given back by now runs out with its lease */
	if (as->gb_timer)
		event_free(as->gb_timer);
	while (as->gbs) {
		struct giveback *gb = as->gbs;
		as->gbs = gb->next;
		free(gb);
	}
	for (size_t i = 0; i < as->nchans; i++)
		free(as->chans[i]);
	free(as->chans);
	fg_topo_view_finish(&as->view);
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
	else if (strcmp(kind, "subscribe") == 0) {
		cn->subscribed = 1;
		cn->as->on_message(chan, NULL, 0, cn->as->arg);
	}
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
	if (as->nchans == 0) /* the loop's own channel: spreads the loops */
		as->spread = fg_keyslot(channel, strlen(channel));
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
	if (!as || !as->sub.up || !as->sub.subscribed || !as->view.nnodes)
		return 0;
	if (as->view.slots) {
		for (size_t i = 0; i < as->view.nnodes; i++) {
			const struct conn *cn;
			for (cn = as->conns; cn; cn = cn->next)
				if (cn->pinned && same_node(&cn->node, &as->view.nodes[i]))
					break;
			if (!cn || !cn->up)
				return 0;
		}
		return 1;
	}
	return as->conns && as->conns->up;
}

/* ---- script calls ---------------------------------------------------- */

static void aop_free(struct aop *op)
{
	if (op->timer)
		event_free(op->timer);
	if (op->again)
		event_free(op->again);
	free(op->undo_lease);
	free(op->gb);
	free(op->buf);
	free(op);
}

static void give_back_op(struct aop *op, int err);

/* index_page's reply: an array of names, handed on as C strings (hiredis
 * ends every string with a NUL). */
static void names_answer(struct aop *op, int err, const redisReply *r)
{
	const char **names = NULL;
	size_t n = 0;
	if (!err && (!r || r->type != REDIS_REPLY_ARRAY))
		err = FG_EPROTO;
	if (!err && r->elements) {
		names = calloc(r->elements, sizeof(*names));
		if (!names)
			err = FG_ENOMEM;
		for (size_t i = 0; !err && i < r->elements; i++) {
			if (r->element[i]->type != REDIS_REPLY_STRING)
				err = FG_EPROTO;
			else
				names[n++] = r->element[i]->str;
		}
	}
	op->ncb(err, err ? NULL : names, err ? 0 : n, op->arg);
	free(names);
}

static void index_drop(fg_astore *as, const char *name, uint64_t seen);
static int submit(fg_astore *as, struct aop *op);

/* The name of the lock a script call is about: FCALL fn 4 S Q W F idle
 * NAME ..., argv[8]. False for a name that cannot be one. */
static bool call_name(const struct aop *op, char name[FG_NAME_MAX + 1])
{
	size_t n = op->call.argvlen[8];
	if (n > FG_NAME_MAX)
		return false;
	memcpy(name, op->call.argv[8], n);
	name[n] = '\0';
	return true;
}

/* The listing's index learns of a lock (a Cluster's: the gateway keeps
 * it) that a call granted (with its token) or queued a waiter on (0: no
 * new grant). Sent once Redis answered, so that the token is known. With
 * cb, the grant g is handed on once the index answered (whatever it
 * answered), so that a caller who lists right after its acquire sees its
 * lock; without, nobody waits for it. One that fails costs only a lock
 * missing from listings until its holder's next renewal. FG_OK when sent
 * (cb will be called). */
static int index_add(fg_astore *as, const char *name, uint64_t token,
		     const struct fg_grant *g, fg_grant_cb *cb, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (!op)
		return FG_ENOMEM;
	op->kind = cb ? 7 : 6;
	if (cb) {
		op->g = *g;
		op->gcb = cb;
		op->arg = arg;
	}
	fg__build_index_add(&op->call, name, token);
	return submit(as, op);
}

/* A release that left its lock idle says so (release.lua): the listing's
 * index forgets the lock, unless it learned of a newer grant since. */
static void release_idled(struct aop *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 7 ||
	    r->element[5]->type != REDIS_REPLY_INTEGER ||
	    r->element[5]->integer != 1 ||
	    r->element[6]->type != REDIS_REPLY_STRING)
		return;
	char name[FG_NAME_MAX + 1];
	if (call_name(op, name))
		index_drop(op->as, name, strtoull(r->element[6]->str, NULL, 10));
}

static void answer(struct aop *op, int err, const redisReply *r)
{
	if (op->answered)
		return;
	op->answered = 1;
	evtimer_del(op->timer);
	give_back_op(op, err);
	if (op->as && op->as->observe)
		op->as->observe(op->as->observe_arg, op->call.lua, err,
				mono_ns() - op->t0_ns);
	if (op->kind == 0) {
		struct fg_grant g;
		if (!err && r && op->call.lua == FG__LUA_RELEASE)
			release_idled(op, r);
		if (!err && r)
			err = fg__parse_grant(r, &g);
		else if (!err)
			g = op->g;
		if (!err)
			memcpy(g.undo_id, op->uid, sizeof(g.undo_id));
		char name[FG_NAME_MAX + 1];
		/* a call given the index's keys kept it itself; on a Cluster
		 * an acquire's answer waits for the index, a renewal's not */
		bool acq = op->call.lua == FG__LUA_ACQUIRE &&
			   (g.status == FG_GRANTED || g.status == FG_QUEUED);
		bool ren = op->call.lua == FG__LUA_RENEW && g.status == FG_GRANTED;
		if (!err && op->as->view.slots && (acq || ren) &&
		    call_name(op, name) &&
		    index_add(op->as, name, g.status == FG_GRANTED ? g.token : 0,
			      &g, acq ? op->gcb : NULL, op->arg) == FG_OK &&
		    acq && op->gcb)
			return; /* handed on by the index update's answer */
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
	} else if (op->kind == 3) {
		struct fg_check c;
		if (!err)
			err = fg__parse_check(r, &c);
		op->ccb(err, err ? NULL : &c, op->arg);
	} else if (op->kind == 4) {
		struct fg_lock_detail d;
		if (!err)
			err = fg__parse_detail(r, &d);
		op->dcb(err, err ? NULL : &d, op->arg);
		if (!err)
			fg__detail_finish(&d);
	} else if (op->kind == 5) {
		names_answer(op, err, r);
	} else if (op->kind == 7) {
		/* the grant stands whatever the index answered */
		op->gcb(FG_OK, &op->g, op->arg);
	}
}

static int send_op(struct aop *op);
static int send_load(struct conn *cn);

/* Where the call goes: a redirection's target, the owner of its slot, or
 * the master. NULL when no server is known for it. */
static struct conn *route(struct aop *op)
{
	fg_astore *as = op->as;
	follow(as);
	if (op->has_to)
		return conn_for(as, &op->to);
	if (!as->view.slots)
		return as->conns;
	uint16_t idx = as->view.slots[op->slot];
	if (idx == FG_SLOT_NONE || idx >= as->view.nnodes)
		return NULL;
	return conn_for(as, &as->view.nodes[idx]);
}

/* MOVED: the slot lives on `to` from now on, for this loop at once (the
 * refresh the topology is asked for brings the rest of the map). */
static void moved(fg_astore *as, unsigned slot, const struct fg_redis_node *to)
{
	if (!as->view.slots)
		return;
	size_t i = 0;
	while (i < as->view.nnodes && !same_node(&as->view.nodes[i], to))
		i++;
	if (i == as->view.nnodes) {
		if (i >= FG_SLOT_NONE)
			return;
		struct fg_redis_node *n = realloc(as->view.nodes, (i + 1) * sizeof(*n));
		if (!n)
			return;
		as->view.nodes = n;
		n[i] = *to;
		as->view.nnodes++;
	}
	as->view.slots[slot] = (uint16_t)i;
}

/* Parses "MOVED <slot> <host>:<port>" and "ASK <slot> <host>:<port>". */
static int redirection(const redisReply *r, int *ask, unsigned *slot,
		       struct fg_redis_node *to)
{
	char host[FG_REDIS_HOST_MAX];
	int port;
	if (strncmp(r->str, "MOVED ", 6) == 0)
		*ask = 0;
	else if (strncmp(r->str, "ASK ", 4) == 0)
		*ask = 1;
	else
		return 0;
	const char *p = strchr(r->str, ' ') + 1;
	char *end;
	unsigned long s = strtoul(p, &end, 10);
	const char *colon = strrchr(end, ':');
	if (*end != ' ' || s >= FG_SLOTS || !colon)
		return 0;
	size_t hl = (size_t)(colon - end - 1);
	if (hl == 0 || hl >= sizeof(host))
		return 0;
	memcpy(host, end + 1, hl);
	host[hl] = '\0';
	port = atoi(colon + 1);
	if (port <= 0 || port > 65535)
		return 0;
	*slot = (unsigned)s;
	memcpy(to->host, host, hl + 1);
	to->port = port;
	return 1;
}

static void on_again(evutil_socket_t fd, short what, void *arg)
{
	struct aop *op = arg;
	(void)fd;
	(void)what;
	if (send_op(op) != FG_OK) {
		answer(op, FG_EUNAVAIL, NULL);
		aop_free(op);
	}
}

static int errorish(const redisReply *r, const char *prefix)
{
	return strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* A reply that says the call did not run and where or when to send it
 * again. 1 when it was sent again (or will be), 0 to answer now. */
static int redirected(struct aop *op, struct conn *cn, const redisReply *r)
{
	fg_astore *as = op->as;
	int ask;
	unsigned slot;
	struct fg_redis_node to;
	if (op->hops >= MAX_HOPS)
		return 0;
	if (redirection(r, &ask, &slot, &to)) {
		op->maybe_ran = 0; /* until it is sent again */
		op->hops++;
		if (!ask) {
			moved(as, slot, &to);
			fg_topo_suspect(as->topo);
		}
		op->to = to;
		op->has_to = 1;
		op->ask = ask;
		return send_op(op) == FG_OK;
	}
	if (errorish(r, "TRYAGAIN")) {
		op->maybe_ran = 0;
		/* the lock's keys are part on one node, part on another
		 * while its slot moves: the move finishes in milliseconds,
		 * and the call's own timeout bounds the asking */
		if (!op->again)
			op->again = evtimer_new(as->base, on_again, op);
		struct timeval tv = { 0, TRYAGAIN_MS * 1000 };
		return op->again && evtimer_add(op->again, &tv) == 0;
	}
	if (errorish(r, "BUSY") || errorish(r, "OOM") || errorish(r, "NOPERM"))
		op->maybe_ran = 0; /* refused: the script never started */
	if (errorish(r, "READONLY") || errorish(r, "MASTERDOWN") ||
	    errorish(r, "CLUSTERDOWN") || errorish(r, "LOADING")) {
		op->maybe_ran = 0; /* refused before it ran */
		/* a demoted master, or a node that cannot serve: find the
		 * master again; a replica is never written to */
		fg_topo_suspect(as->topo);
		if (errorish(r, "READONLY")) {
			conn_drop(cn);
			schedule_retry(cn);
		}
	}
	return 0;
}

/* The grant WAIT fell short of is released: only now is the caller told,
 * so nobody sees it held after the refusal. */
static void on_undone(redisAsyncContext *ac, void *reply, void *priv)
{
	struct aop *op = priv;
	(void)ac;
	op->conn = NULL;
	/* an error (BUSY, READONLY, OOM) released nothing */
	op->undone = reply && ((redisReply *)reply)->type != REDIS_REPLY_ERROR;
	op->why = reply ? FG_GIVEBACK_REPLICAS : FG_GIVEBACK_CONNECTION;
	answer(op, reply ? FG_EREPLICAS : FG_EUNAVAIL, NULL);
	aop_free(op);
}

/* WAIT's answer about the grant of op: enough replicas have it, or it is
 * released and the caller told Redis is unavailable. */
static void on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
	struct aop *op = priv;
	redisReply *r = reply;
	op->conn = NULL;
	if (op->answered) {
		aop_free(op);
		return;
	}
	if (r && r->type == REDIS_REPLY_INTEGER &&
	    r->integer >= (long long)op->as->replicas) {
		answer(op, FG_OK, NULL);
		aop_free(op);
		return;
	}
	if (r && op->undo_lease) {
		/* undo_lease holds "<lease>\0<name>" */
		struct fg__call c;
		fg__build_release(&c, op->undo_lease + strlen(op->undo_lease) + 1,
				  op->undo_lease, NULL, op->as->margin,
				  op->as->idle, !op->as->view.slots);
		if (redisAsyncCommandArgv(ac, on_undone, op, c.argc, c.argv,
					  c.argvlen) == REDIS_OK) {
			op->conn = ac->data;
			return;
		}
	}
	/* the session is gone: the grant is given back once Redis answers
	 * again (answer()) */
	op->why = FG_GIVEBACK_CONNECTION;
	answer(op, FG_EUNAVAIL, NULL);
	aop_free(op);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct aop *op = priv;
	redisReply *r = reply;
	struct conn *cn = ac->data;
	op->conn = NULL;
	if (op->answered) { /* timed out earlier; this reply is discarded */
		aop_free(op);
		return;
	}
	if (r && fg__reply_nofunction(r) && !op->retried) {
		/* Every call in flight when the library went missing comes
		 * back like this; the first one loads it, and every retry is
		 * sent after that load on the same connection. */
		op->retried = 1;
		if ((cn->load_at >= op->sent_at || send_load(cn) == FG_OK) &&
		    send_op(op) == FG_OK)
			return;
		r = NULL;
	}
	if (r && r->type == REDIS_REPLY_ERROR && redirected(op, cn, r))
		return;
	if (op->ask || op->has_to) {
		/* ASK holds for one call; a MOVED is in the map by now */
		op->has_to = op->ask = 0;
	}
	int err = (!r || r->type == REDIS_REPLY_ERROR) ? FG_EUNAVAIL : FG_OK;
	if (!r)
		fg_topo_suspect(op->as->topo);
	op->why = r ? FG_GIVEBACK_ERROR : FG_GIVEBACK_CONNECTION;
	if (!err && op->undo_lease && op->as->replicas) {
		if (fg__parse_grant(r, &op->g) == FG_OK &&
		    op->g.status == FG_GRANTED) {
			/* WAIT counts the replicas that have this session's
			 * writes so far, the grant included */
			char n[16], ms[16];
			snprintf(n, sizeof(n), "%u", op->as->replicas);
			snprintf(ms, sizeof(ms), "%u", op->as->replicas_timeout_ms);
			const char *argv[] = { "WAIT", n, ms };
			size_t len[] = { 4, strlen(n), strlen(ms) };
			if (cn->ac == ac && cn->epoch == op->epoch &&
			    redisAsyncCommandArgv(ac, on_wait, op, 3, argv, len) == REDIS_OK) {
				op->conn = cn;
				return;
			}
			err = FG_EUNAVAIL;
			op->why = FG_GIVEBACK_CONNECTION;
		}
	}
	answer(op, err, r);
	aop_free(op);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct aop *op = arg;
	(void)fd;
	(void)what;
	op->why = FG_GIVEBACK_TIMEOUT;
	answer(op, FG_EUNAVAIL, NULL);
	if (!op->conn) { /* between two sends (TRYAGAIN): ours to free */
		aop_free(op);
		return;
	}
	if (op->kind == 6 || op->kind == 7) {
		/* nobody waits for it (the listing's index): its reply, when
		 * it comes, is discarded by on_reply(); the calls behind it on
		 * the connection keep their own deadlines */
		return;
	}
	/* The op stays owned by hiredis' callback list: freeing the
	 * connection (not a graceful disconnect, which would wait for the
	 * very reply that is late) calls on_reply(NULL) for every pending
	 * call, which frees them, this one included; then it reconnects. */
	struct conn *cn = op->conn;
	conn_drop(cn);
	conn_start(cn);
}

static int send_op(struct aop *op)
{
	struct conn *cn = route(op);
	if (!cn || !cn->ac)
		return FG_EUNAVAIL;
	/* a lock call fits the stack buffer; a long value takes the heap */
	char stackbuf[1024], *cmd = stackbuf;
	size_t len = fg__call_format(&op->call, stackbuf, sizeof(stackbuf));
	if (len > sizeof(stackbuf)) {
		cmd = malloc(len); /* freed below, hiredis copies it */
		if (!cmd)
			return FG_ENOMEM;
		len = fg__call_format(&op->call, cmd, len);
	}
	/* ASKING only with its call behind it: a lone one would send the
	 * connection's next command to a slot this node does not own */
	int rc = op->ask ? redisAsyncCommand(cn->ac, NULL, NULL, "ASKING")
			 : REDIS_OK;
	if (rc == REDIS_OK)
		rc = redisAsyncFormattedCommand(cn->ac, on_reply, op, cmd, len);
	if (cmd != stackbuf)
		free(cmd);
	if (rc != REDIS_OK)
		return FG_EUNAVAIL;
	op->maybe_ran = 1;
	op->conn = cn;
	op->sent_at = ++cn->sent;
	op->epoch = cn->epoch;
	return FG_OK;
}

/* Sends FUNCTION LOAD REPLACE; its reply is not waited for: the calls sent
 * after it on the connection find the library (or fail, if Redis refused
 * it). */
static int send_load(struct conn *cn)
{
	const char *argv[FG__LOAD_ARGC];
	size_t len[FG__LOAD_ARGC];
	if (!cn->ac)
		return FG_EUNAVAIL;
	fg__load_argv(argv, len);
	if (redisAsyncCommandArgv(cn->ac, NULL, NULL, FG__LOAD_ARGC, argv,
				  len) != REDIS_OK)
		return FG_EUNAVAIL;
	cn->load_at = ++cn->sent;
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
	op->t0_ns = mono_ns();
	struct timeval tv = { as->command_timeout_ms / 1000,
			      (as->command_timeout_ms % 1000) * 1000 };
	op->as = as;
	/* argv[3] is the lock's first key: every key of it shares the slot */
	op->slot = fg_keyslot(op->call.argv[3], op->call.argvlen[3]);
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

/* The grant op will answer only once WAIT counted the replicas, and
 * release lease on lock name if they fall short. */
static int acked(struct aop *op, const char *name, const char *lease)
{
	size_t nl = strlen(name), ll = strlen(lease);
	op->undo_lease = malloc(ll + 1 + nl + 1);
	if (!op->undo_lease)
		return FG_ENOMEM;
	memcpy(op->undo_lease, lease, ll + 1);
	memcpy(op->undo_lease + ll + 1, name, nl + 1);
	return FG_OK;
}

/* A call of `kind` (not a grant: grant_op()) whose answer goes to arg's
 * callback, set by the caller. NULL when out of memory. */
static struct aop *plain_op(int kind, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (op) {
		op->kind = kind;
		op->arg = arg;
	}
	return op;
}

static struct aop *grant_op(fg_grant_cb *cb, void *arg)
{
	struct aop *op = calloc(1, sizeof(*op));
	if (op) {
		op->kind = 0;
		op->gcb = cb;
		op->arg = arg;
		op->why = FG_GIVEBACK_CONNECTION;
	}
	return op;
}

/* "<name>\0<lease>\0<waiter id>\0<undo id>\0" in one allocation (caller
 * frees). */
static char *four(const char *name, const char *lease, const char *wid,
		  const char *uid, size_t extra, size_t *off)
{
	size_t nl = strlen(name) + 1, ll = strlen(lease) + 1;
	size_t wl = (wid ? strlen(wid) : 0) + 1;
	size_t ul = (uid ? strlen(uid) : 0) + 1;
	/* a struct in front is given at least its whole size */
	char *p = malloc(extra + nl + ll + wl + ul +
			 (extra ? sizeof(struct giveback) : 0));
	if (!p)
		return NULL;
	*off = extra;
	memcpy(p + extra, name, nl);
	memcpy(p + extra + nl, lease, ll);
	memcpy(p + extra + nl + ll, wid ? wid : "", wl);
	memcpy(p + extra + nl + ll + wl, uid ? uid : "", ul);
	return p;
}

/* The call's lease is fresh (nobody but this gateway knows it): if it
 * fails once sent, it is given back. */
static int fresh(struct aop *op, const char *name, const char *lease,
		 const char *wid)
{
	size_t off;
	op->gb = four(name, lease, wid, NULL, 0, &off);
	return op->gb ? FG_OK : FG_ENOMEM;
}

/* The call renews or re-enters the client's lease: it carries a new undo
 * id (op->uid), and if it fails once sent, what it did is put back. */
static int undo_id(fg_astore *as, struct aop *op, const char *name,
		   const char *lease)
{
	snprintf(op->uid, sizeof(op->uid), "%s.%llu", as->uid_pfx,
		 (unsigned long long)++as->uid_seq);
	size_t off;
	op->gb = four(name, lease, NULL, op->uid, 0, &off);
	return op->gb ? FG_OK : FG_ENOMEM;
}

static void gb_schedule(fg_astore *as, int now);

static int give_back(fg_astore *as, const char *name, const char *lease,
		     const char *waiter_id, const char *uid,
		     enum fg_giveback_reason why)
{
	if (!as || as->closing)
		return FG_EUNAVAIL;
	if (as->ngbs >= GIVEBACK_MAX)
		return FG_ENOMEM; /* its lease runs out by itself */
	size_t off;
	char *p = four(name, lease, waiter_id, uid,
		       offsetof(struct giveback, name), &off);
	if (!p)
		return FG_ENOMEM;
	struct giveback *gb = (struct giveback *)(void *)p;
	gb->inflight = 0;
	gb->why = why;
	gb->ran = uid && why == FG_GIVEBACK_UNDELIVERED;
	gb->lease = gb->name + strlen(gb->name) + 1;
	gb->wid = gb->lease + strlen(gb->lease) + 1;
	gb->uid = gb->wid + strlen(gb->wid) + 1;
	gb->prev = NULL;
	gb->next = as->gbs;
	if (as->gbs)
		as->gbs->prev = gb;
	as->gbs = gb;
	as->ngbs++;
	gb_schedule(as, 1);
	return FG_OK;
}

int fg_alock_give_back(fg_astore *as, const char *name, const char *lease,
		       const char *waiter_id, enum fg_giveback_reason why)
{
	return give_back(as, name, lease, waiter_id, NULL, why);
}

int fg_alock_undo(fg_astore *as, const char *name, const char *lease,
		  const char *undo_id, enum fg_giveback_reason why)
{
	if (!undo_id || !*undo_id)
		return FG_EINVAL;
	return give_back(as, name, lease, NULL, undo_id, why);
}

struct gbcall {
	fg_astore *as;
	struct giveback *gb;
};

static void on_given_back(int err, const struct fg_grant *g, void *arg)
{
	struct gbcall *c = arg;
	fg_astore *as = c->as;
	struct giveback *gb = c->gb;
	free(c);
	gb->inflight = 0;
	if (err) {
		gb_schedule(as, 0); /* again, until Redis answers */
		return;
	}
	if (as->gave_back)
		as->gave_back(as->observe_arg, gb->why, g->status == FG_REMOVED);
	if (gb->prev)
		gb->prev->next = gb->next;
	else
		as->gbs = gb->next;
	if (gb->next)
		gb->next->prev = gb->prev;
	as->ngbs--;
	free(gb);
}

static void on_gb_timer(evutil_socket_t fd, short what, void *arg)
{
	fg_astore *as = arg;
	(void)fd;
	(void)what;
	for (struct giveback *gb = as->gbs; gb && !as->closing; gb = gb->next) {
		if (gb->inflight)
			continue;
		struct gbcall *c = malloc(sizeof(*c));
		struct aop *op = c ? grant_op(on_given_back, c) : NULL;
		if (!op) {
			free(c);
			break;
		}
		c->as = as;
		c->gb = gb;
		fg__build_giveback(&op->call, gb->name, gb->lease, gb->wid,
				   *gb->uid ? gb->uid : NULL, gb->ran,
				   GIVEBACK_REMEMBER_MS, as->idle);
		if (submit(as, op) == FG_OK)
			gb->inflight = 1;
		else
			free(c);
	}
	gb_schedule(as, 0);
}

/* now: on the loop's next turn (a new job; after the failing call's own
 * connection was dropped and restarted); else in GIVEBACK_EVERY_MS while
 * any job waits to be sent. */
static void gb_schedule(fg_astore *as, int now)
{
	if (as->closing || !as->gb_timer)
		return;
	if (now) {
		event_active(as->gb_timer, EV_TIMEOUT, 1);
		return;
	}
	if (evtimer_pending(as->gb_timer, NULL))
		return;
	int waiting = 0;
	for (struct giveback *gb = as->gbs; gb && !waiting; gb = gb->next)
		waiting = !gb->inflight;
	if (waiting) {
		struct timeval tv = { 0, GIVEBACK_EVERY_MS * 1000 };
		evtimer_add(as->gb_timer, &tv);
	}
}

/* A call that failed after it was sent may have granted or queued its
 * fresh lease: undo that (a WAIT that fell short already released it). */
static void give_back_op(struct aop *op, int err)
{
	if (!op->gb || !op->as)
		return;
	if (op->undone) {
		if (op->as->gave_back)
			op->as->gave_back(op->as->observe_arg,
					  FG_GIVEBACK_REPLICAS, true);
		return;
	}
	if (!err || !op->maybe_ran)
		return;
	const char *name = op->gb, *lease = name + strlen(name) + 1;
	const char *wid = lease + strlen(lease) + 1;
	const char *uid = wid + strlen(wid) + 1;
	give_back(op->as, name, lease, *wid ? wid : NULL, *uid ? uid : NULL,
		  (enum fg_giveback_reason)op->why);
}

int fg_alock_acquire(fg_astore *as, const struct fg_acquire *req,
		     fg_grant_cb *cb, void *arg)
{
	if (req->wait_ms > 0 && (!req->waiter_id || !req->gateway_id))
		return FG_EINVAL;
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	if ((as->replicas && acked(op, req->name,
				   req->reenter ? req->reenter : req->lease)) ||
	    (!req->reenter && fresh(op, req->name, req->lease, req->waiter_id)) ||
	    (req->reenter && undo_id(as, op, req->name, req->reenter))) {
		aop_free(op);
		return FG_ENOMEM;
	}
	fg__build_acquire(&op->call, req, op->uid[0] ? op->uid : NULL, as->idle,
			  !as->view.slots);
	return submit(as, op);
}

int fg_alock_confirm(fg_astore *as, const char *name, const char *lease,
		     fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	/* a waiter's lease: its client has not been answered yet */
	if ((as->replicas && acked(op, name, lease)) ||
	    fresh(op, name, lease, NULL)) {
		aop_free(op);
		return FG_ENOMEM;
	}
	fg__build_renew(&op->call, name, lease, NULL, 0, NULL, 0, NULL, as->idle,
			!as->view.slots);
	return submit(as, op);
}

int fg_alock_renew(fg_astore *as, const char *name, const char *lease,
		   const char *principal, uint32_t ttl_ms, const char *value,
		   size_t value_len, fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	if (undo_id(as, op, name, lease)) {
		aop_free(op);
		return FG_ENOMEM;
	}
	fg__build_renew(&op->call, name, lease, principal, ttl_ms, value,
			value_len, op->uid, as->idle, !as->view.slots);
	return submit(as, op);
}

int fg_alock_check(fg_astore *as, const char *name, uint64_t token,
		   fg_check_cb *cb, void *arg)
{
	struct aop *op = plain_op(3, arg);
	if (!op)
		return FG_ENOMEM;
	op->ccb = cb;
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
		     const char *principal, fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_release(&op->call, name, lease, principal, as->margin,
			  as->idle, !as->view.slots);
	return submit(as, op);
}

int fg_alock_break(fg_astore *as, const char *name, uint64_t token,
		   fg_grant_cb *cb, void *arg)
{
	struct aop *op = grant_op(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_break(&op->call, name, token, as->margin, as->idle);
	return submit(as, op);
}

int fg_alock_inspect(fg_astore *as, const char *name, fg_info_cb *cb,
		     void *arg)
{
	struct aop *op = plain_op(1, arg);
	if (!op)
		return FG_ENOMEM;
	op->icb = cb;
	fg__build_inspect(&op->call, name, as->idle);
	return submit(as, op);
}

static int admit_op(fg_astore *as, enum fg__lua lua, const char *name,
		    uint64_t token, const char *write_id, uint32_t margin_ms,
		    uint32_t limit_ms, fg_admit_cb *cb, void *arg)
{
	struct aop *op = plain_op(2, arg);
	if (!op)
		return FG_ENOMEM;
	op->acb = cb;
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

int fg_alock_describe(fg_astore *as, const char *name, unsigned max_parties,
		      fg_detail_cb *cb, void *arg)
{
	struct aop *op = plain_op(4, arg);
	if (!op)
		return FG_ENOMEM;
	op->dcb = cb;
	fg__build_describe(&op->call, name, max_parties, as->idle);
	return submit(as, op);
}

int fg_alock_index_page(fg_astore *as, const char *prefix, const char *after,
			unsigned count, fg_names_cb *cb, void *arg)
{
	struct aop *op = plain_op(5, arg);
	if (!op)
		return FG_ENOMEM;
	op->ncb = cb;
	fg__build_index_page(&op->call, prefix, after, count);
	return submit(as, op);
}

int fg_alock_index_drop(fg_astore *as, const char *name, uint64_t seen)
{
	struct aop *op = plain_op(6, NULL);
	if (!op)
		return FG_ENOMEM;
	fg__build_index_drop(&op->call, name, seen, !as->view.slots);
	return submit(as, op);
}

static void index_drop(fg_astore *as, const char *name, uint64_t seen)
{
	(void)fg_alock_index_drop(as, name, seen);
}
