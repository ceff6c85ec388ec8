/*
 * astore-conn.c - the asynchronous front's connections: the command
 * connections (one to the master, or one per cluster master) that run the
 * lock scripts, and `sub`, which holds the subscriptions.
 *
 * All reconnect by themselves, to wherever the topology (fencegate/topo.h)
 * says the masters are now: a loop follows a failover or a slot move at
 * its next call, or when told (fg_astore_follow()). Following a view drops
 * every connection to a server that is no longer a master, so nothing keeps
 * writing to a demoted one. Each session begins with AUTH when there are
 * credentials (topo-private.h), queued ahead of anything else; it counts as
 * up, and subscribes, only once AUTH said OK, and a refused AUTH ends it
 * and is retried like a failed connect.
 *
 * Invariant: when the topology moves, the loop is told through on_resync,
 * as when the subscription reconnects — once Redis confirmed the first
 * channel again, so that nothing the loop asks then can be answered
 * before a change whose message went to nobody: what a failed master held
 * may be gone. The channels are kept here (as->chans) across reconnects, and
 * subscribed again on every session of `sub`.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "astore-private.h"
#include "topo-private.h"

#define RETRY_MS 200

int fg__same_node(const struct fg_redis_node *a, const struct fg_redis_node *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

void fg__conn_retry(struct fg__conn *cn)
{
	struct timeval tv = { 0, RETRY_MS * 1000 };
	if (!cn->as->closing && !cn->retired)
		evtimer_add(cn->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fg__conn *cn = arg;
	fg__follow(cn->as);
	if (!cn->ac)
		fg__conn_start(cn);
}

static void subscribe_one(struct fg__conn *cn, const char *chan);

/* The session is connected and logged in: it may serve. */
static void session_up(struct fg__conn *cn)
{
	cn->up = 1;
	if (cn->is_sub) {
		/* ready once Redis took one: a user without the channel
		 * right is answered NOPERM, and hiredis ends the session */
		cn->subscribed = cn->as->nchans == 0;
		for (size_t i = 0; i < cn->as->nchans; i++)
			subscribe_one(cn, cn->as->chans[i]);
		/* with no channel there is nothing a message could have said;
		 * otherwise the loop asks again once Redis took its own
		 * channel (on_sub_reply): a question asked before that could
		 * be answered before a change whose message then went to
		 * nobody */
		if (cn->as->nchans == 0 && cn->as->on_resync)
			cn->as->on_resync(cn->as->arg);
	}
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct fg__conn *cn = ac->data;
	if (cn->ac != ac)
		return; /* a context this connection already let go of */
	if (status != REDIS_OK) {
		cn->ac = NULL; /* hiredis frees it after this callback */
		if (cn->is_sub)
			cn->as->spread++; /* another master next time */
		fg_topo_suspect(cn->as->topo);
		fg__conn_retry(cn);
		return;
	}
	if (!cn->logging_in) /* else AUTH's answer brings the session up */
		session_up(cn);
}

/* AUTH's answer, the first reply of every session with credentials. */
static void on_login(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fg__conn *cn = ac->data;
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
	fg__conn_drop(cn);
	fg__conn_retry(cn);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct fg__conn *cn = ac->data;
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
	fg__conn_retry(cn);
}

/* Where an unpinned connection goes now: the master, or for `sub` in a
 * cluster one of the masters. 0, or -1 while nobody knows. */
static int pick(struct fg__conn *cn)
{
	const struct fg_topo_view *v = &cn->as->view;
	if (!v->nnodes)
		return -1;
	size_t i = v->slots ? cn->as->spread % v->nnodes : 0;
	cn->node = v->nodes[i];
	return 0;
}

void fg__conn_start(struct fg__conn *cn)
{
	fg_astore *as = cn->as;
	if (cn->retired || as->closing)
		return;
	evtimer_del(cn->retry);
	if (!cn->pinned && pick(cn)) {
		fg__conn_retry(cn);
		return;
	}
	redisAsyncContext *ac = redisAsyncConnect(cn->node.host, cn->node.port);
	if (!ac || ac->err) {
		if (ac)
			redisAsyncFree(ac);
		fg__conn_retry(cn);
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
		fg__conn_retry(cn);
		return;
	}
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

void fg__conn_drop(struct fg__conn *cn)
{
	redisAsyncContext *ac = cn->ac;
	cn->ac = NULL;
	cn->up = 0;
	if (ac)
		redisAsyncFree(ac);
}

static int conn_init(struct fg__conn *cn, fg_astore *as, int is_sub)
{
	cn->as = as;
	cn->is_sub = is_sub;
	cn->retry = evtimer_new(as->base, on_retry, cn);
	return cn->retry ? 0 : -1;
}

static void conn_finish(struct fg__conn *cn)
{
	fg__conn_drop(cn);
	if (cn->retry)
		event_free(cn->retry);
}

/* A connection it makes joins as->conns, freed with the store. */
struct fg__conn *fg__conn_for(fg_astore *as, const struct fg_redis_node *node)
{
	struct fg__conn *cn;
	for (cn = as->conns; cn; cn = cn->next)
		if (cn->pinned && fg__same_node(&cn->node, node))
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
		fg__conn_start(cn);
	} else if (!cn->ac && !evtimer_pending(cn->retry, NULL)) {
		fg__conn_start(cn);
	}
	return cn;
}

static int in_view(const fg_astore *as, const struct fg_redis_node *n)
{
	for (size_t i = 0; i < as->view.nnodes; i++)
		if (fg__same_node(&as->view.nodes[i], n))
			return 1;
	return 0;
}

/* Takes the topology's current view if it moved: connections to servers
 * that are no longer masters are dropped, so nothing keeps writing to a
 * demoted master. */
void fg__follow(fg_astore *as)
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
	for (struct fg__conn *cn = as->conns; cn; cn = cn->next) {
		if (cn->pinned ? in_view(as, &cn->node)
			       : (cn->ac && v.nnodes && fg__same_node(&cn->node, &v.nodes[0])))
			continue;
		if (cn->pinned)
			cn->retired = 1;
		fg__conn_drop(cn);
		fg__conn_start(cn);
	}
	if (v.slots)
		for (size_t i = 0; i < v.nnodes; i++)
			fg__conn_for(as, &v.nodes[i]);
	if (!as->sub.ac || !in_view(as, &as->sub.node)) {
		fg__conn_drop(&as->sub);
		fg__conn_start(&as->sub);
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
		fg__follow(as);
}

/* ---- the store's connections, made and freed ------------------------- */

int fg__conns_init(fg_astore *as)
{
	as->spread = (unsigned)rand();
	as->moved_ev = event_new(as->base, -1, 0, on_moved, as);
	if (!as->moved_ev || conn_init(&as->sub, as, 1))
		return FG_ENOMEM;
	if (fg_topo_mode(as->topo) != FG_REDIS_CLUSTER) {
		/* the one command connection, as->conns' */
		as->conns = calloc(1, sizeof(*as->conns));
		if (!as->conns || conn_init(as->conns, as, 0))
			return FG_ENOMEM;
	}
	if (fg_topo_view(as->topo, &as->view))
		return FG_ENOMEM;
	if (as->view.slots)
		for (size_t i = 0; i < as->view.nnodes; i++)
			fg__conn_for(as, &as->view.nodes[i]);
	else if (as->conns)
		fg__conn_start(as->conns);
	fg__conn_start(&as->sub);
	return FG_OK;
}

void fg__conns_finish(fg_astore *as)
{
	while (as->conns) {
		struct fg__conn *cn = as->conns;
		as->conns = cn->next;
		conn_finish(cn);
		free(cn);
	}
	conn_finish(&as->sub);
	if (as->moved_ev)
		event_free(as->moved_ev);
	for (size_t i = 0; i < as->nchans; i++)
		free(as->chans[i]);
	free(as->chans);
	fg_topo_view_finish(&as->view);
}

/* ---- subscriptions --------------------------------------------------- */

static void on_sub_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct fg__conn *cn = ac->data;
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
		/* the loop's own channel is taken again (a new session): what
		 * a message may have said while it was not is asked again
		 * now, when every later message is sure to come */
		if (cn->as->nchans && strcmp(chan, cn->as->chans[0]) == 0 &&
		    cn->as->on_resync)
			cn->as->on_resync(cn->as->arg);
	}
}

static void subscribe_one(struct fg__conn *cn, const char *chan)
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
	char *copy = strdup(channel); /* as->chans', freed with the store */
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
			const struct fg__conn *cn;
			for (cn = as->conns; cn; cn = cn->next)
				if (cn->pinned && fg__same_node(&cn->node, &as->view.nodes[i]))
					break;
			if (!cn || !cn->up)
				return 0;
		}
		return 1;
	}
	return as->conns && as->conns->up;
}
