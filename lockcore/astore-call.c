/*
 * astore-call.c - the asynchronous front's call pipeline: one script call
 * (struct fg__aop) from its send to its one answer. It is routed to the
 * master of its lock's slot (or the one master), follows MOVED, ASK and
 * TRYAGAIN, loads the function library on a connection that lacks it, and,
 * with replicas set, asks WAIT about a grant before it answers.
 *
 * Invariants: every accepted call gets its callback exactly once — with
 * the reply, or with FG_EUNAVAIL when the connection drops or the reply
 * takes longer than command_timeout_ms (hiredis 0.14 async has no timeouts
 * of its own; a Redis that stops answering must not strand a waiter). A
 * late reply after a timeout is discarded, and the connection that was
 * late is dropped, so later replies cannot be misattributed. A call is
 * sent again only after a reply that says it did not run (MOVED, ASK,
 * TRYAGAIN, a missing function library), never after a lost connection.
 * With replicas set, a grant reaches its callback only after WAIT counted
 * them; a grant WAIT falls short of is released before FG_EUNAVAIL is
 * answered. Whether a failed call may have run (maybe_ran) is kept to its
 * answer, where astore-giveback.c takes back what it may have left.
 *
 * A call belongs to hiredis' callback list while it is in flight (conn
 * set), to its TRYAGAIN timer between two sends, and is freed by whoever
 * holds it when it is over.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "astore-private.h"

#define MAX_HOPS 16        /* redirections and TRYAGAINs of one call */
#define TRYAGAIN_MS 10     /* a slot in migration: ask again after this */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fg__aop_free(struct fg__aop *op)
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

/* index_page's reply: an array of names, handed on as C strings (hiredis
 * ends every string with a NUL). */
static void names_answer(struct fg__aop *op, int err, const redisReply *r)
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

/* The name of the lock a script call is about: FCALL fn N S Q W F
 * [index] [stream] idle NAME ..., argv[3 + N + 1]. False for a name that
 * cannot be one. */
static bool call_name(const struct fg__aop *op, char name[FG_NAME_MAX + 1])
{
	int at = 3 + (op->call.argv[2][0] - '0') + 1;
	if (op->call.argc <= at)
		return false;
	size_t n = op->call.argvlen[at];
	if (n > FG_NAME_MAX)
		return false;
	memcpy(name, op->call.argv[at], n);
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
	struct fg__aop *op = calloc(1, sizeof(*op)); /* the pipeline's, submitted */
	if (!op)
		return FG_ENOMEM;
	op->kind = cb ? FG__AOP_INDEXED : FG__AOP_NOBODY;
	if (cb) {
		op->g = *g;
		op->gcb = cb;
		op->arg = arg;
	}
	fg__build_index_add(&op->call, name, token);
	return fg__submit(as, op);
}

/* A release that left its lock idle says so (release.lua): the listing's
 * index forgets the lock, unless it learned of a newer grant since. */
static void release_idled(struct fg__aop *op, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 7 ||
	    r->element[5]->type != REDIS_REPLY_INTEGER ||
	    r->element[5]->integer != 1 ||
	    r->element[6]->type != REDIS_REPLY_STRING)
		return;
	char name[FG_NAME_MAX + 1];
	if (call_name(op, name))
		(void)fg_alock_index_drop(op->as, name,
					  strtoull(r->element[6]->str, NULL, 10));
}

static void answer(struct fg__aop *op, int err, const redisReply *r)
{
	if (op->answered)
		return;
	op->answered = 1;
	evtimer_del(op->timer);
	fg__gb_failed(op, err);
	if (op->kind == FG__AOP_EVENT) {
		/* not a script: the observer does not hear of it */
		if (err && op->as)
			op->as->ev_failed++;
		return;
	}
	if (op->as && op->as->observe)
		op->as->observe(op->as->observe_arg, op->call.lua, err,
				mono_ns() - op->t0_ns);
	if (op->kind == FG__AOP_GRANT) {
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
	} else if (op->kind == FG__AOP_INFO) {
		struct fg_lock_info info;
		if (!err)
			err = fg__parse_info(r, &info);
		op->icb(err, err ? NULL : &info, op->arg);
		if (!err)
			fg_lock_info_finish(&info);
	} else if (op->kind == FG__AOP_ADMIT) {
		struct fg_admit a;
		if (!err)
			err = fg__parse_admit(r, &a);
		op->acb(err, err ? NULL : &a, op->arg);
	} else if (op->kind == FG__AOP_CHECK) {
		struct fg_check c;
		if (!err)
			err = fg__parse_check(r, &c);
		op->ccb(err, err ? NULL : &c, op->arg);
	} else if (op->kind == FG__AOP_DETAIL) {
		struct fg_lock_detail d;
		if (!err)
			err = fg__parse_detail(r, &d);
		op->dcb(err, err ? NULL : &d, op->arg);
		if (!err)
			fg__detail_finish(&d);
	} else if (op->kind == FG__AOP_NAMES) {
		names_answer(op, err, r);
	} else if (op->kind == FG__AOP_INDEXED) {
		/* the grant stands whatever the index answered */
		op->gcb(FG_OK, &op->g, op->arg);
	}
}

static int send_op(struct fg__aop *op);
static int send_load(struct fg__conn *cn);

/* Where the call goes: a redirection's target, the owner of its slot, or
 * the master. NULL when no server is known for it. */
static struct fg__conn *route(struct fg__aop *op)
{
	fg_astore *as = op->as;
	fg__follow(as);
	if (op->has_to)
		return fg__conn_for(as, &op->to);
	if (!as->view.slots)
		return as->conns;
	uint16_t idx = as->view.slots[op->slot];
	if (idx == FG_SLOT_NONE || idx >= as->view.nnodes)
		return NULL;
	return fg__conn_for(as, &as->view.nodes[idx]);
}

/* MOVED: the slot lives on `to` from now on, for this loop at once (the
 * refresh the topology is asked for brings the rest of the map). */
static void moved(fg_astore *as, unsigned slot, const struct fg_redis_node *to)
{
	if (!as->view.slots)
		return;
	size_t i = 0;
	while (i < as->view.nnodes && !fg__same_node(&as->view.nodes[i], to))
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
	struct fg__aop *op = arg;
	(void)fd;
	(void)what;
	if (send_op(op) != FG_OK) {
		answer(op, FG_EUNAVAIL, NULL);
		fg__aop_free(op);
	}
}

static int errorish(const redisReply *r, const char *prefix)
{
	return strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* A reply that says the call did not run and where or when to send it
 * again. 1 when it was sent again (or will be), 0 to answer now. */
static int redirected(struct fg__aop *op, struct fg__conn *cn,
		      const redisReply *r)
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
			fg__conn_drop(cn);
			fg__conn_retry(cn);
		}
	}
	return 0;
}

/* The grant WAIT fell short of is released: only now is the caller told,
 * so nobody sees it held after the refusal. */
static void on_undone(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fg__aop *op = priv;
	(void)ac;
	op->conn = NULL;
	/* an error (BUSY, READONLY, OOM) released nothing */
	op->undone = reply && ((redisReply *)reply)->type != REDIS_REPLY_ERROR;
	op->why = reply ? FG_GIVEBACK_REPLICAS : FG_GIVEBACK_CONNECTION;
	answer(op, reply ? FG_EREPLICAS : FG_EUNAVAIL, NULL);
	fg__aop_free(op);
}

/* WAIT's answer about the grant of op: enough replicas have it, or it is
 * released and the caller told Redis is unavailable. */
static void on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fg__aop *op = priv;
	redisReply *r = reply;
	op->conn = NULL;
	if (op->answered) {
		fg__aop_free(op);
		return;
	}
	if (r && r->type == REDIS_REPLY_INTEGER &&
	    r->integer >= (long long)op->as->replicas) {
		answer(op, FG_OK, NULL);
		fg__aop_free(op);
		return;
	}
	if (r && op->undo_lease) {
		/* undo_lease holds "<lease>\0<name>" */
		struct fg__call c;
		struct fg__ev ev;
		fg__build_release(&c, op->undo_lease + strlen(op->undo_lease) + 1,
				  op->undo_lease, NULL, op->as->margin,
				  op->as->idle, !op->as->view.slots,
				  fg__ev_of(op->as, &ev));
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
	fg__aop_free(op);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fg__aop *op = priv;
	redisReply *r = reply;
	struct fg__conn *cn = ac->data;
	op->conn = NULL;
	if (op->answered) { /* timed out earlier; this reply is discarded */
		fg__aop_free(op);
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
	fg__aop_free(op);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct fg__aop *op = arg;
	(void)fd;
	(void)what;
	op->why = FG_GIVEBACK_TIMEOUT;
	answer(op, FG_EUNAVAIL, NULL);
	if (!op->conn) { /* between two sends (TRYAGAIN): ours to free */
		fg__aop_free(op);
		return;
	}
	if (op->kind == FG__AOP_NOBODY || op->kind == FG__AOP_INDEXED ||
	    op->kind == FG__AOP_EVENT) {
		/* nobody waits for it (the listing's index): its reply, when
		 * it comes, is discarded by on_reply(); the calls behind it on
		 * the connection keep their own deadlines */
		return;
	}
	/* The op stays owned by hiredis' callback list: freeing the
	 * connection (not a graceful disconnect, which would wait for the
	 * very reply that is late) calls on_reply(NULL) for every pending
	 * call, which frees them, this one included; then it reconnects. */
	struct fg__conn *cn = op->conn;
	fg__conn_drop(cn);
	fg__conn_start(cn);
}

static int send_op(struct fg__aop *op)
{
	struct fg__conn *cn = route(op);
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
static int send_load(struct fg__conn *cn)
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
static int own(struct fg__aop *op)
{
	size_t total = 0;
	for (int i = 0; i < op->call.argc; i++)
		total += op->call.argvlen[i];
	op->buf = malloc(total + 1); /* freed with op */
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

int fg__submit(fg_astore *as, struct fg__aop *op)
{
	op->t0_ns = mono_ns();
	struct timeval tv = { as->command_timeout_ms / 1000,
			      (as->command_timeout_ms % 1000) * 1000 };
	op->as = as;
	/* argv[3] is the lock's first key: every key of it shares the slot
	 * (an event's append names its stream first, argv[1]) */
	int k = op->kind == FG__AOP_EVENT ? 1 : 3;
	op->slot = fg_keyslot(op->call.argv[k], op->call.argvlen[k]);
	int err = own(op);
	if (!err) {
		op->timer = evtimer_new(as->base, on_timeout, op);
		err = op->timer ? FG_OK : FG_ENOMEM;
	}
	if (!err)
		err = send_op(op);
	if (err) {
		fg__aop_free(op);
		return err;
	}
	evtimer_add(op->timer, &tv);
	return FG_OK;
}

int fg__aop_acked(struct fg__aop *op, const char *name, const char *lease)
{
	size_t nl = strlen(name), ll = strlen(lease);
	op->undo_lease = malloc(ll + 1 + nl + 1); /* freed with op */
	if (!op->undo_lease)
		return FG_ENOMEM;
	memcpy(op->undo_lease, lease, ll + 1);
	memcpy(op->undo_lease + ll + 1, name, nl + 1);
	return FG_OK;
}

struct fg__aop *fg__aop_new(enum fg__aop_kind kind, void *arg)
{
	struct fg__aop *op = calloc(1, sizeof(*op));
	if (op) {
		op->kind = kind;
		op->arg = arg;
	}
	return op;
}

struct fg__aop *fg__aop_grant(fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = calloc(1, sizeof(*op));
	if (op) {
		op->kind = FG__AOP_GRANT;
		op->gcb = cb;
		op->arg = arg;
		op->why = FG_GIVEBACK_CONNECTION;
	}
	return op;
}
