/*
 * astore.c - the asynchronous front's facade: one gateway event loop's
 * store, made and freed, its lock calls (fg_alock_*()), and the appends
 * of the events the loop sees (fg_aevents_add(): never awaited, a
 * failure only counted).
 *
 * Each call is built here (the scripts' arguments are calls.c's) and
 * handed to the pipeline (astore-call.c), with what a lost answer would
 * need (astore-giveback.c): a fresh lease is marked to be given back, a
 * renewal or a re-entry gets an undo id, and with replicas set a grant is
 * held back until WAIT counted them. The connections it runs on are
 * astore-conn.c's.
 *
 * Invariant: a call that fails at once returns negative, calls nobody
 * back and leaves nothing allocated; one accepted (FG_OK) is the
 * pipeline's, which calls back exactly once. The store and every
 * connection belong to the loop's thread.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "astore-private.h"

fg_astore *fg_astore_create(struct event_base *base,
			    const struct fg_store_opts *o,
			    fg_message_cb *on_message, fg_resync_cb *on_resync,
			    void *arg)
{
	fg_astore *as = calloc(1, sizeof(*as)); /* the caller's */
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
	as->events = o->events;
	as->events_retain = o->events_retain;
	if (o->gateway_id)
		snprintf(as->gateway_id, sizeof(as->gateway_id), "%s",
			 o->gateway_id);
	as->on_message = on_message;
	as->on_resync = on_resync;
	as->arg = arg;
	if (fg__giveback_init(as) || fg__conns_init(as))
		goto error;
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
	/* the connections first: the calls in flight on them answer
	 * FG_EUNAVAIL (a give-back job's too, whose answer still finds its
	 * job), and a give-back they would start is refused while closing */
	fg__conns_finish(as);
	fg__giveback_finish(as);
	free(as);
}

/* ---- the calls -------------------------------------------------------- */

int fg_alock_acquire(fg_astore *as, const struct fg_acquire *req,
		     fg_grant_cb *cb, void *arg)
{
	if (req->wait_ms > 0 && (!req->waiter_id || !req->gateway_id))
		return FG_EINVAL;
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	if ((as->replicas && fg__aop_acked(op, req->name,
					   req->reenter ? req->reenter : req->lease)) ||
	    (!req->reenter && fg__gb_fresh(op, req->name, req->lease,
					   req->waiter_id)) ||
	    (req->reenter && fg__gb_undo_id(as, op, req->name, req->reenter))) {
		fg__aop_free(op);
		return FG_ENOMEM;
	}
	struct fg__ev ev;
	fg__build_acquire(&op->call, req, op->uid[0] ? op->uid : NULL, as->idle,
			  !as->view.slots, fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_confirm(fg_astore *as, const char *name, const char *lease,
		     fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	/* a waiter's lease: its client has not been answered yet */
	if ((as->replicas && fg__aop_acked(op, name, lease)) ||
	    fg__gb_fresh(op, name, lease, NULL)) {
		fg__aop_free(op);
		return FG_ENOMEM;
	}
	struct fg__ev ev;
	fg__build_renew(&op->call, name, lease, NULL, 0, NULL, 0, NULL, as->idle,
			!as->view.slots, fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_renew(fg_astore *as, const char *name, const char *lease,
		   const char *principal, uint32_t ttl_ms, const char *value,
		   size_t value_len, fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	if (fg__gb_undo_id(as, op, name, lease)) {
		fg__aop_free(op);
		return FG_ENOMEM;
	}
	struct fg__ev ev;
	fg__build_renew(&op->call, name, lease, principal, ttl_ms, value,
			value_len, op->uid, as->idle, !as->view.slots,
			fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_check(fg_astore *as, const char *name, uint64_t token,
		   fg_check_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_CHECK, arg);
	if (!op)
		return FG_ENOMEM;
	op->ccb = cb;
	struct fg__ev ev;
	fg__build_check(&op->call, name, token, as->idle, fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_tick(fg_astore *as, const char *name, const char *gateway_id,
		  uint32_t liveness_ms, bool observe, fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	struct fg__ev ev;
	fg__build_tick(&op->call, name, gateway_id, liveness_ms, observe, as->idle,
		       fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_dequeue(fg_astore *as, const char *name, const char *waiter_id,
		     const char *lease, bool peek, fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	struct fg__ev ev;
	fg__build_dequeue(&op->call, name, waiter_id, lease, peek, as->idle,
			  fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_release(fg_astore *as, const char *name, const char *lease,
		     const char *principal, fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	struct fg__ev ev;
	fg__build_release(&op->call, name, lease, principal, as->margin,
			  as->idle, !as->view.slots, fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_break(fg_astore *as, const char *name, uint64_t token,
		   fg_grant_cb *cb, void *arg)
{
	return fg_alock_break_by(as, name, token, NULL, cb, arg);
}

int fg_alock_break_by(fg_astore *as, const char *name, uint64_t token,
		      const char *by, fg_grant_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	struct fg__ev ev;
	fg__build_break(&op->call, name, token, as->margin, by, as->idle,
			fg__ev_of(as, &ev));
	return fg__submit(as, op);
}

int fg_alock_inspect(fg_astore *as, const char *name, fg_info_cb *cb,
		     void *arg)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_INFO, arg);
	if (!op)
		return FG_ENOMEM;
	op->icb = cb;
	fg__build_inspect(&op->call, name, as->idle);
	return fg__submit(as, op);
}

static int admit_op(fg_astore *as, enum fg__lua lua, const char *name,
		    uint64_t token, const char *write_id, uint32_t margin_ms,
		    uint32_t limit_ms, fg_admit_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_ADMIT, arg);
	if (!op)
		return FG_ENOMEM;
	op->acb = cb;
	struct fg__ev ev;
	fg__build_admit(&op->call, lua, name, token, write_id, margin_ms,
			limit_ms, as->idle, fg__ev_of(as, &ev));
	return fg__submit(as, op);
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
	struct fg__aop *op = fg__aop_grant(cb, arg);
	if (!op)
		return FG_ENOMEM;
	fg__build_finish(&op->call, name, write_id, as->idle);
	return fg__submit(as, op);
}

int fg_alock_describe(fg_astore *as, const char *name, unsigned max_parties,
		      fg_detail_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_DETAIL, arg);
	if (!op)
		return FG_ENOMEM;
	op->dcb = cb;
	fg__build_describe(&op->call, name, max_parties, as->idle);
	return fg__submit(as, op);
}

int fg_alock_index_page(fg_astore *as, const char *prefix, const char *after,
			unsigned count, fg_names_cb *cb, void *arg)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_NAMES, arg);
	if (!op)
		return FG_ENOMEM;
	op->ncb = cb;
	fg__build_index_page(&op->call, prefix, after, count);
	return fg__submit(as, op);
}

int fg_alock_index_drop(fg_astore *as, const char *name, uint64_t seen)
{
	struct fg__aop *op = fg__aop_new(FG__AOP_NOBODY, NULL);
	if (!op)
		return FG_ENOMEM;
	fg__build_index_drop(&op->call, name, seen, !as->view.slots);
	return fg__submit(as, op);
}

/* ---- events ----------------------------------------------------------- */

const struct fg__ev *fg__ev_of(fg_astore *as, struct fg__ev *ev)
{
	if (!as->events)
		return NULL;
	/* the mode, not the view: a Cluster's view may not be known yet */
	ev->cluster = fg_topo_mode(as->topo) == FG_REDIS_CLUSTER;
	ev->retain = as->events_retain;
	ev->gateway_id = as->gateway_id;
	return ev;
}

int fg_aevents_add(fg_astore *as, const struct fg_event_rec *e)
{
	if (!e->kind || !*e->kind)
		return FG_EINVAL;
	if (!as->events)
		return FG_OK;
	char key[FG__EV_KEY_MAX];
	size_t kl = fg__ev_key(e->lock ? e->lock : "",
			       fg_topo_mode(as->topo) == FG_REDIS_CLUSTER, key,
			       sizeof(key));
	if (!kl || kl >= sizeof(key))
		return FG_EINVAL;
	struct fg__aop *op = fg__aop_new(FG__AOP_EVENT, NULL);
	if (!op)
		return FG_ENOMEM;
	/* the call points into key and e's strings until fg__submit() copies
	 * them (own()) */
	int err = fg__build_event(&op->call, key, kl, as->events_retain,
				  as->gateway_id, e);
	if (err) {
		fg__aop_free(op);
		return err;
	}
	return fg__submit(as, op);
}

uint64_t fg_aevents_failed(const fg_astore *as)
{
	return as->ev_failed;
}
