/*
 * store.c - the blocking Redis connections of the gateway's maintenance
 * thread: probes of every master, the HMAC key's agreement, the check of
 * leases due, the sweep of the listing's index and the events it appends
 * (fg_events_add()). (The lock calls of the request path are the
 * asynchronous front's, astore.c and its parts.)
 *
 * Invariant: every call is bounded by connect_timeout_ms + 2 round trips of
 * command_timeout_ms; a connection that failed or timed out is dropped at
 * once (a late reply must never be read as the answer to a later command),
 * and reconnecting is tried at most once per connect_timeout_ms, so a down
 * Redis answers FG_EUNAVAIL fast instead of stacking waits. A connection
 * is used only once it logged in (topo-private.h): one whose AUTH was
 * refused counts as down, and is retried at the same pace.
 */
#include <poll.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <openssl/rand.h>

#include "fencegate/topo.h"
#include "lockcore-private.h"
#include "store-private.h"
#include "topo-private.h"

#define STORE_CONNS 8

/* A connection to one server, made when first needed. */
struct sconn {
	struct fg_redis_node node;
	redisContext *rc;
	uint64_t next_try_ms;
};

struct fg_store {
	fg_topo *topo;
	unsigned connect_timeout_ms;
	unsigned command_timeout_ms;
	unsigned idle_forget_ms;
	unsigned write_margin_ms;
	bool events;                /* opts.events: lock calls and
				       fg_events_add() append events */
	unsigned events_retain;
	char gateway_id[FG_GATEWAY_ID_LEN + 1]; /* "" when none given */
	struct fg_topo_view view;   /* refreshed when the topology moves */
	struct sconn conns[STORE_CONNS];
	size_t nconns;
	char why[FG_STORE_WHY_MAX]; /* the last failure: "HOST:PORT: reason" */
};

/* Notes why a call failed, for fg_store_why(): the server and hiredis'
 * text (errno's, a timeout) or Redis' error reply. No argument of a
 * command is ever part of it. */
static void note_why(fg_store *st, const struct fg_redis_node *node,
		     const char *why)
{
	if (node)
		snprintf(st->why, sizeof(st->why), "%.64s:%d: %.100s", node->host,
			 node->port, why && why[0] ? why : "no answer");
	else
		snprintf(st->why, sizeof(st->why), "%.100s", why);
}

static struct timeval tv_ms(unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	return tv;
}

fg_store *fg_store_create(const struct fg_store_opts *o)
{
	fg_store *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->topo = o->topo;
	st->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 500;
	st->command_timeout_ms = o->command_timeout_ms ? o->command_timeout_ms : 2000;
	st->idle_forget_ms = o->idle_forget_ms;
	st->write_margin_ms = o->write_margin_ms;
	st->events = o->events;
	st->events_retain = o->events_retain;
	if (o->gateway_id)
		snprintf(st->gateway_id, sizeof(st->gateway_id), "%s",
			 o->gateway_id);
	return st;
}

static void drop(struct sconn *sc)
{
	if (sc->rc) {
		redisFree(sc->rc);
		sc->rc = NULL;
	}
}

void fg_store_destroy(fg_store *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->nconns; i++)
		drop(&st->conns[i]);
	fg_topo_view_finish(&st->view);
	free(st);
}

/* Redis never speaks unasked, so an idle connection that is readable has
 * been closed (a restart, a failover, an idle timeout). Finding that out
 * before sending means a script is never sent on a dead connection, and is
 * never sent twice. */
static bool dead(const redisContext *rc)
{
	struct pollfd pfd = { .fd = rc->fd, .events = POLLIN };
	return poll(&pfd, 1, 0) != 0;
}

/* The connection to `node`, made (and logged in) or reused; NULL when it
 * cannot be had now. The oldest of STORE_CONNS goes when a new server is
 * needed. */
static struct sconn *conn_to(fg_store *st, const struct fg_redis_node *node)
{
	struct sconn *sc = NULL;
	for (size_t i = 0; i < st->nconns && !sc; i++)
		if (st->conns[i].node.port == node->port &&
		    strcmp(st->conns[i].node.host, node->host) == 0)
			sc = &st->conns[i];
	if (!sc) {
		if (st->nconns == STORE_CONNS) {
			drop(&st->conns[0]);
			memmove(&st->conns[0], &st->conns[1],
				(STORE_CONNS - 1) * sizeof(st->conns[0]));
			st->nconns--;
		}
		sc = &st->conns[st->nconns++];
		memset(sc, 0, sizeof(*sc));
		sc->node = *node;
	}
	if (sc->rc && dead(sc->rc))
		drop(sc);
	if (sc->rc)
		return sc;
	uint64_t now = fg__mono_ms();
	if (now < sc->next_try_ms)
		return NULL;
	char why[FG_STORE_WHY_MAX];
	sc->rc = fg__store_connect(st->topo, node, st->connect_timeout_ms,
				   st->command_timeout_ms, why, sizeof(why));
	if (!sc->rc) {
		note_why(st, node, why);
		sc->next_try_ms = now + st->connect_timeout_ms;
		return NULL;
	}
	return sc;
}

redisContext *fg__store_connect(fg_topo *topo, const struct fg_redis_node *node,
				unsigned connect_ms, unsigned command_ms,
				char *why, size_t whylen)
{
	redisContext *rc = redisConnectWithTimeout(node->host, node->port,
						   tv_ms(connect_ms));
	if (!rc || rc->err ||
	    redisSetTimeout(rc, tv_ms(command_ms)) != REDIS_OK ||
	    fg__login(topo, node, rc) != FG_OK) {
		snprintf(why, whylen, "%s", !rc ? "out of memory" :
			 rc->err ? rc->errstr : "login refused");
		if (rc)
			redisFree(rc);
		fg_topo_suspect(topo);
		return NULL;
	}
	return rc;
}

/* Takes the topology's current view if it moved. */
static int follow(fg_store *st)
{
	if (st->view.gen != fg_topo_gen(st->topo)) {
		fg_topo_view_finish(&st->view);
		if (fg_topo_view(st->topo, &st->view))
			return FG_ENOMEM;
	}
	return FG_OK;
}

/* The master that holds `key` (any master for NULL), by the current view. */
static int node_for(fg_store *st, const char *key, size_t keylen,
		    struct fg_redis_node *out)
{
	if (follow(st))
		return FG_ENOMEM;
	size_t idx = 0;
	if (st->view.slots && key) {
		idx = st->view.slots[fg_keyslot(key, keylen)];
		if (idx == FG_SLOT_NONE)
			return FG_EUNAVAIL;
	}
	if (idx >= st->view.nnodes) {
		fg_topo_suspect(st->topo); /* nobody known yet: look again */
		return FG_EUNAVAIL;
	}
	*out = st->view.nodes[idx];
	return FG_OK;
}

/* "MOVED <slot> <host>:<port>" or "ASK ...": the server named. */
static int redirect_of(const redisReply *r, struct fg_redis_node *to, int *ask)
{
	if (r->type != REDIS_REPLY_ERROR)
		return 0;
	if (strncmp(r->str, "MOVED ", 6) == 0)
		*ask = 0;
	else if (strncmp(r->str, "ASK ", 4) == 0)
		*ask = 1;
	else
		return 0;
	const char *sp = strrchr(r->str, ' ');
	const char *colon = sp ? strrchr(sp, ':') : NULL;
	if (!colon || (size_t)(colon - sp - 1) >= sizeof(to->host))
		return 0;
	memcpy(to->host, sp + 1, (size_t)(colon - sp - 1));
	to->host[colon - sp - 1] = '\0';
	to->port = atoi(colon + 1);
	return to->port > 0;
}

/* One command about `key` (NULL: not about a key); NULL means the server
 * could not be reached or the connection is gone (and was dropped). A
 * redirection is followed once; a connection failure, a redirection and
 * -READONLY each ask for a refresh of the topology. */
static redisReply *command_on(fg_store *st, const char *key, size_t keylen,
			      int argc, const char **argv, const size_t *argvlen,
			      struct sconn **used)
{
	struct fg_redis_node node;
	if (node_for(st, key, keylen, &node))
		return NULL;
	for (int hop = 0; hop < 2; hop++) {
		struct sconn *sc = conn_to(st, &node);
		if (!sc)
			return NULL;
		redisReply *r = redisCommandArgv(sc->rc, argc, argv, argvlen);
		if (!r) {
			drop(sc);
			fg_topo_suspect(st->topo);
			return NULL;
		}
		*used = sc;
		int ask = 0;
		if (hop == 0 && redirect_of(r, &node, &ask)) {
			freeReplyObject(r);
			fg_topo_suspect(st->topo);
			if (ask) {
				struct sconn *to = conn_to(st, &node);
				redisReply *a = to ? redisCommand(to->rc, "ASKING") : NULL;
				if (!a)
					return NULL;
				freeReplyObject(a);
			}
			continue;
		}
		if (r->type == REDIS_REPLY_ERROR &&
		    (strncmp(r->str, "READONLY", 8) == 0 ||
		     strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
		     strncmp(r->str, "MASTERDOWN", 10) == 0)) {
			drop(sc);
			fg_topo_suspect(st->topo);
		}
		return r;
	}
	return NULL;
}

static redisReply *command(fg_store *st, const char *key, size_t keylen,
			   int argc, const char **argv, const size_t *argvlen)
{
	struct sconn *used;
	return command_on(st, key, keylen, argc, argv, argvlen, &used);
}

/* Loads the function library and sends the call again, in one round trip
 * (pipelined), on the connection that lacked it. NULL means the
 * connection is gone (and was dropped); a refused load shows as the
 * call's error. */
static redisReply *load_and_run(struct sconn *sc, struct fg__call *c)
{
	const char *argv[FG__LOAD_ARGC];
	size_t len[FG__LOAD_ARGC];
	redisReply *loaded = NULL, *r = NULL;

	if (!sc->rc)
		return NULL;
	fg__load_argv(argv, len);
	if (redisAppendCommandArgv(sc->rc, FG__LOAD_ARGC, argv, len) != REDIS_OK ||
	    redisAppendCommandArgv(sc->rc, c->argc, c->argv, c->argvlen) != REDIS_OK ||
	    redisGetReply(sc->rc, (void **)&loaded) != REDIS_OK ||
	    redisGetReply(sc->rc, (void **)&r) != REDIS_OK) {
		if (loaded)
			freeReplyObject(loaded);
		drop(sc);
		return NULL;
	}
	freeReplyObject(loaded);
	return r;
}

/* Runs a script call, loading the library when Redis does not have it.
 * Caller frees. */
static int run(fg_store *st, struct fg__call *c, redisReply **out)
{
	struct sconn *sc = NULL;
	redisReply *r = command_on(st, c->argv[3], c->argvlen[3], c->argc,
				   c->argv, c->argvlen, &sc);
	if (r && fg__reply_nofunction(r)) {
		freeReplyObject(r);
		r = load_and_run(sc, c);
	}
	if (!r)
		return FG_EUNAVAIL;
	if (r->type == REDIS_REPLY_ERROR) {
		/* LOADING, MASTERDOWN, READONLY after a failover, OOM: Redis
		 * cannot take the change now; nothing was written. */
		freeReplyObject(r);
		return FG_EUNAVAIL;
	}
	*out = r;
	return FG_OK;
}

int fg_store_ping(fg_store *st)
{
	/* every master of the view answers, or Redis is not all there */
	struct fg_redis_node node;
	if (node_for(st, NULL, 0, &node) || !st->view.nnodes) {
		note_why(st, NULL, "no master known");
		return FG_EUNAVAIL;
	}
	if (st->view.slots)
		for (size_t s = 0; s < FG_SLOTS; s++)
			if (st->view.slots[s] == FG_SLOT_NONE) {
				note_why(st, NULL, "a hash slot has no master");
				return FG_EUNAVAIL;
			}
	for (size_t i = 0; i < st->view.nnodes; i++) {
		struct sconn *sc = conn_to(st, &st->view.nodes[i]);
		redisReply *r = sc ? redisCommand(sc->rc, "PING") : NULL;
		int ok = r && r->type == REDIS_REPLY_STATUS;
		if (r && !ok)
			note_why(st, &sc->node, r->type == REDIS_REPLY_ERROR
				 ? r->str : "an answer that is not PONG");
		else if (!r && sc)
			note_why(st, &sc->node, sc->rc->errstr);
		if (r)
			freeReplyObject(r);
		else if (sc)
			drop(sc);
		if (!ok)
			return FG_EUNAVAIL;
	}
	return FG_OK;
}

const char *fg_store_why(const fg_store *st)
{
	return st->why;
}

int fg_store_sync_key(fg_store *st, const uint8_t *ours, size_t ours_len,
		      uint8_t key_out[FG_KEY_MAX], size_t *len)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t fresh[32];
	char enc[FG_KEY_MAX * 2];

	if (!ours) {
		if (RAND_bytes(fresh, sizeof(fresh)) != 1)
			return FG_EINVAL;
		ours = fresh;
		ours_len = sizeof(fresh);
	}
	if (ours_len < FG_KEY_MIN || ours_len > FG_KEY_MAX)
		return FG_EINVAL;
	for (size_t i = 0; i < ours_len; i++) {
		enc[2 * i] = hex[ours[i] >> 4];
		enc[2 * i + 1] = hex[ours[i] & 15];
	}
	const char *set[] = { "SET", "fg:hmac-key", enc, "NX" };
	size_t setlen[] = { 3, 11, ours_len * 2, 2 };
	redisReply *r = command(st, set[1], setlen[1], 4, set, setlen);
	if (!r)
		return FG_EUNAVAIL;
	freeReplyObject(r);
	const char *get[] = { "GET", "fg:hmac-key" };
	size_t getlen[] = { 3, 11 };
	r = command(st, get[1], getlen[1], 2, get, getlen);
	if (!r)
		return FG_EUNAVAIL;
	int err = FG_EPROTO;
	if (r->type == REDIS_REPLY_STRING && r->len % 2 == 0 &&
	    r->len / 2 >= FG_KEY_MIN && r->len / 2 <= FG_KEY_MAX) {
		err = FG_OK;
		for (size_t i = 0; i < r->len / 2 && err == FG_OK; i++) {
			char b[3] = { r->str[2 * i], r->str[2 * i + 1], 0 };
			char *end;
			key_out[i] = (uint8_t)strtoul(b, &end, 16);
			if (*end)
				err = FG_EPROTO;
		}
		*len = r->len / 2;
	}
	freeReplyObject(r);
	return err;
}

int fg_lock_check(fg_store *st, const char *name, uint64_t token,
		  struct fg_check *out)
{
	struct fg__call c;
	redisReply *r;
	struct fg__ev ev = {
		.cluster = fg_topo_mode(st->topo) == FG_REDIS_CLUSTER,
		.retain = st->events_retain, .gateway_id = st->gateway_id,
	};
	fg__build_check(&c, name, token, st->idle_forget_ms,
			st->events ? &ev : NULL);
	int err = run(st, &c, &r);
	if (err)
		return err;
	err = fg__parse_check(r, out);
	freeReplyObject(r);
	return err;
}

/* ---- the listing's index ------------------------------------------- */

int fg_lock_index_sweep(fg_store *st, char after[FG_NAME_MAX + 1],
			unsigned n, unsigned *dropped)
{
	struct fg__call c;
	redisReply *r;
	*dropped = 0;
	fg__build_index_page(&c, "", after[0] ? after : NULL, n);
	int err = run(st, &c, &r);
	if (err)
		return err;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return FG_EPROTO;
	}
	size_t got = r->elements;
	for (size_t i = 0; !err && i < got; i++) {
		const redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_STRING || e->len > FG_NAME_MAX) {
			err = FG_EPROTO;
			break;
		}
		redisReply *d;
		fg__build_describe(&c, e->str, 0, st->idle_forget_ms);
		err = run(st, &c, &d);
		if (err)
			break;
		struct fg_lock_detail det;
		int perr = fg__parse_detail(d, &det);
		freeReplyObject(d);
		if (perr) {
			/* a lock this gateway cannot read (another version's
			 * state?) is passed over, not a wall for the rest */
			memcpy(after, e->str, e->len + 1);
			continue;
		}
		fg__detail_finish(&det);
		if (!det.active) {
			redisReply *x;
			fg__build_index_drop(&c, e->str, det.seen,
					     !st->view.slots);
			err = run(st, &c, &x);
			if (!err) {
				if (x->type == REDIS_REPLY_INTEGER && x->integer == 1)
					(*dropped)++;
				freeReplyObject(x);
			}
		}
		if (!err)
			memcpy(after, e->str, e->len + 1);
	}
	if (!err && got < n)
		after[0] = '\0'; /* read to the end: the next sweep starts over */
	/* Redis unavailable: `after` stays, the next step asks again there */
	freeReplyObject(r);
	return err;
}

/* ---- events ---------------------------------------------------------- */

int fg_events_add(fg_store *st, const struct fg_event_rec *e)
{
	if (!e->kind || !*e->kind)
		return FG_EINVAL;
	if (!st->events)
		return FG_OK;
	char key[FG__EV_KEY_MAX];
	size_t kl = fg__ev_key(e->lock ? e->lock : "",
			       fg_topo_mode(st->topo) == FG_REDIS_CLUSTER, key,
			       sizeof(key));
	if (!kl || kl >= sizeof(key))
		return FG_EINVAL;
	struct fg__call c;
	int err = fg__build_event(&c, key, kl, st->events_retain,
				  st->gateway_id, e);
	if (err)
		return err;
	redisReply *r = command(st, key, kl, c.argc, c.argv, c.argvlen);
	if (!r)
		return FG_EUNAVAIL;
	err = r->type == REDIS_REPLY_ERROR ? FG_EUNAVAIL : FG_OK;
	if (r->type == REDIS_REPLY_ERROR)
		note_why(st, NULL, r->str);
	freeReplyObject(r);
	return err;
}

/* ---- what the event readers share (store-private.h) ------------------ */

fg_topo *fg__store_topo(const fg_store *st)
{
	return st->topo;
}

const struct fg_topo_view *fg__store_view(fg_store *st)
{
	struct fg_redis_node node;
	int err = node_for(st, NULL, 0, &node);
	return err == FG_ENOMEM ? NULL : &st->view;
}

redisReply *fg__store_command(fg_store *st, const char *key, size_t keylen,
			      int argc, const char **argv, const size_t *argvlen)
{
	return command(st, key, keylen, argc, argv, argvlen);
}

redisContext *fg__store_conn(fg_store *st, const struct fg_redis_node *node)
{
	struct sconn *sc = conn_to(st, node);
	return sc ? sc->rc : NULL;
}

void fg__store_lost(fg_store *st, const struct fg_redis_node *node,
		    const char *why)
{
	for (size_t i = 0; i < st->nconns; i++)
		if (st->conns[i].node.port == node->port &&
		    strcmp(st->conns[i].node.host, node->host) == 0) {
			note_why(st, node, why ? why : (st->conns[i].rc ?
				 st->conns[i].rc->errstr : NULL));
			drop(&st->conns[i]);
		}
	fg_topo_suspect(st->topo);
}
