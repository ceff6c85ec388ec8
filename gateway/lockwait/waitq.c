/*
 * waitq.c - a loop's lock waiters: blocked acquires and observers, parked
 * on the loop (rt/park.h) with asynchronous Redis and no thread of their
 * own; the grant messages on the loop's channel; the give-back of grants
 * whose answer was lost. The Redis connections are the loop's (loop.c),
 * lent at creation.
 *
 * Invariants:
 * - A waiter is completed exactly once (finish()), and its connection,
 *   when parked, is resumed then and only then.
 * - A waiter is freed when its last holder lets go (refs): the request
 *   (until fg_waiter_drop(), at request completion), the loop while the
 *   waiter is parked and not complete, and each Redis call of its in
 *   flight.
 * - Everything here runs on the loop's thread.
 * - Per lock, this gateway runs at most one tick and one inspect at a time,
 *   however many of its requests wait on that lock.
 * - A waiter whose client is not answered with its grant leaves nothing in
 *   Redis: its place in the queue, or the grant it was handed, is given
 *   back (fg_alock_give_back()); so is a grant addressed to a waiter this
 *   loop does not know, unless the waiter already took it by asking
 *   (`took`, kept until the message that says so could still come).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <uthash.h>
#include <utlist.h>

#include "base/clock.h"
#include "base/log.h"
#include "rt/rt.h"
#include "proc/gateway.h"
#include "proc/metrics.h"
#include "rt/park.h"
#include "lockwait/waitq.h"

enum kind { ACQ, OBS };

struct watch;

struct fg_waiter {
	struct fg_waitq *wq;
	enum kind kind;
	char id[FG_WAITER_ID_MAX];
	char name[FG_NAME_MAX + 1];
	char lease[FG_LEASE_LEN + 1];
	enum fg_mode mode;
	uint32_t ttl_ms;
	uint32_t wait_ms;
	bool held0, has_tok0;    /* observe: answer when these differ */
	uint64_t tok0;

	enum fg_wait_result result;
	struct fg_grant grant;
	struct fg_lock_info info;
	int refs;                /* the request's, the loop's while parked,
				    one per call in flight (ops) */
	uint64_t born_ms;        /* fg_clock_ms() at its start: the long
				    poll's duration, at its end */
	bool registered;         /* in wq->byid: a grant message finds it */
	bool parked;             /* the loop holds it until it completes */
	UT_hash_handle hh;

	struct fg_park park;
	int64_t wake_in;
	int ops;                 /* Redis calls in flight: at most one */
	bool deadline_hit;
	bool repoll;             /* a dequeue wanted while a call was in flight */
	bool peek_again;         /* a resync's peek wanted meanwhile: the call
				    in flight may have asked a Redis that
				    then lost the queue */
	bool peeking;            /* the call in flight is a dequeue's peek */
	bool repeek;             /* its peek met no Redis: asked again on
				    the watch's repeek timer */
	struct watch *watch;
	struct fg_waiter *prev, *next;
};

struct watch {
	struct fg_waitq *wq;
	char name[FG_NAME_MAX + 1];
	char chan[FG_NAME_MAX + 16];
	struct fg_waiter *acq, *obs;
	struct event *tick;
	struct event *otick;     /* keeps the lock's change events coming */
	struct event *recheck;
	struct event *repeek;    /* its waiters' peeks that met no Redis */
	uint64_t tick_at;
	int busy;                /* > 0 while its lists are walked: not freed */
	bool ticking, oticking, inspecting, reinspect, subscribed, confirmed;
	UT_hash_handle hh;
};

/* A waiter granted through its dequeue or peek call rather than through
 * the grant message: that message, should it still come, is not a grant
 * for nobody. */
struct took {
	char id[FG_WAITER_ID_MAX];
	uint64_t at;             /* fg_clock_ms() */
	UT_hash_handle hh;
	struct took *prev, *next;
};
/* A resync's peek that met no Redis is asked again this much later. */
#define REPEEK_MS 200
#define TOOK_KEEP_MS 60000      /* a message is never this late on a live
				   subscription; a new one starts afresh */

struct fg_waitq {
	struct fg_gateway *gw;
	struct fg_loop *loop;
	struct event_base *base;
	fg_astore *as;
	char chan[64];

	struct fg_waiter *byid;  /* waiters a grant message may be for */
	struct watch *watches;
	bool stopping;           /* answering everyone: no new parks, and
				    watches stay until destroyed */
	struct took *took, *took_order; /* hash, oldest first */
};


static struct timeval tv_of(int64_t ms)
{
	if (ms < 0)
		ms = 0;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	return tv;
}

/* ---- holders --------------------------------------------------------- */

static const enum fg_gauge gauge_of[] = {
	[ACQ] = FG_GAUGE_WAIT_ACQUIRE, [OBS] = FG_GAUGE_WAIT_OBSERVE,
};

static void unregister(struct fg_waitq *wq, struct fg_waiter *w)
{
	if (w->registered) {
		HASH_DEL(wq->byid, w);
		w->registered = false;
	}
}

/* One holder lets go; the last one frees. */
static void put(struct fg_waiter *w)
{
	if (--w->refs > 0)
		return;
	unregister(w->wq, w);
	fg_metrics_gauge_add(gauge_of[w->kind], -1);
	fg_metrics_wait_done(w->kind == OBS, (fg_clock_ms() - w->born_ms) * 1000000u);
	fg_lock_info_finish(&w->info);
	free(w);
}

/* A Redis call of the waiter is sent; it holds the waiter until
 * call_ended(), at the end of its reply. */
static void call_started(struct fg_waiter *w)
{
	w->ops++;
	w->refs++;
}

static void call_ended(struct fg_waiter *w)
{
	w->ops--;
	put(w);
}

/* ---- request side ---------------------------------------------------- */

static struct fg_waiter *waiter_new(struct fg_waitq *wq, enum kind kind,
				    const char *name, uint32_t wait_ms)
{
	struct fg_waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->wq = wq;
	w->kind = kind;
	fg_metrics_gauge_add(gauge_of[kind], 1);
	w->born_ms = fg_clock_ms();
	w->wait_ms = wait_ms;
	w->refs = 1;
	snprintf(w->name, sizeof(w->name), "%s", name);
	fg_loop_next_id(wq->loop, false, w->id, sizeof(w->id));
	HASH_ADD_STR(wq->byid, id, w);
	w->registered = true;
	return w;
}

struct fg_waiter *fg_waiter_acquire(struct fg_waitq *wq, const char *name,
				    const char *lease, enum fg_mode mode,
				    uint32_t ttl_ms, uint32_t wait_ms)
{
	struct fg_waiter *w = waiter_new(wq, ACQ, name, wait_ms);
	if (w) {
		snprintf(w->lease, sizeof(w->lease), "%s", lease);
		w->mode = mode;
		w->ttl_ms = ttl_ms;
	}
	return w;
}

struct fg_waiter *fg_waiter_observe(struct fg_waitq *wq, const char *name,
				    uint32_t wait_ms, bool held,
				    bool has_token, uint64_t token)
{
	struct fg_waiter *w = waiter_new(wq, OBS, name, wait_ms);
	if (w) {
		w->held0 = held;
		w->has_tok0 = has_token;
		w->tok0 = token;
	}
	return w;
}

const char *fg_waiter_id(const struct fg_waiter *w)
{
	return w->id;
}

enum fg_wait_result fg_waiter_result(struct fg_waiter *w, struct fg_grant *g,
				     const struct fg_lock_info **info)
{
	if (g)
		*g = w->grant;
	if (info)
		*info = &w->info;
	return w->result;
}

void fg_waiter_drop(struct fg_waitq *wq, struct fg_waiter *w)
{
	(void)wq;
	if (w)
		put(w);
}

/* ---- per-lock watches ------------------------------------------------ */

static void on_tick_timer(evutil_socket_t fd, short what, void *arg);
static void on_otick_timer(evutil_socket_t fd, short what, void *arg);
static void on_recheck(evutil_socket_t fd, short what, void *arg);
static void on_repeek(evutil_socket_t fd, short what, void *arg);

static struct watch *watch_get(struct fg_waitq *wq, const char *name)
{
	struct watch *wt;
	HASH_FIND_STR(wq->watches, name, wt);
	if (wt)
		return wt;
	wt = calloc(1, sizeof(*wt));
	if (!wt)
		return NULL;
	wt->wq = wq;
	snprintf(wt->name, sizeof(wt->name), "%s", name);
	fg_chan_events(name, wt->chan, sizeof(wt->chan));
	wt->tick = evtimer_new(wq->base, on_tick_timer, wt);
	wt->otick = evtimer_new(wq->base, on_otick_timer, wt);
	wt->recheck = evtimer_new(wq->base, on_recheck, wt);
	wt->repeek = evtimer_new(wq->base, on_repeek, wt);
	if (!wt->tick || !wt->otick || !wt->recheck || !wt->repeek) {
		if (wt->tick)
			event_free(wt->tick);
		if (wt->otick)
			event_free(wt->otick);
		if (wt->recheck)
			event_free(wt->recheck);
		if (wt->repeek)
			event_free(wt->repeek);
		free(wt);
		return NULL;
	}
	HASH_ADD_STR(wq->watches, name, wt);
	return wt;
}

static void watch_free(struct fg_waitq *wq, struct watch *wt)
{
	HASH_DEL(wq->watches, wt);
	event_free(wt->tick);
	event_free(wt->otick);
	event_free(wt->recheck);
	event_free(wt->repeek);
	free(wt);
}

static void watch_maybe_free(struct fg_waitq *wq, struct watch *wt)
{
	if (wt->obs == NULL && wt->subscribed) {
		fg_astore_unsubscribe(wq->as, wt->chan);
		wt->subscribed = wt->confirmed = false;
		evtimer_del(wt->recheck);
		evtimer_del(wt->otick);
	}
	if (wt->acq || wt->obs || wt->ticking || wt->oticking ||
	    wt->inspecting || wt->busy || wq->stopping)
		return;
	watch_free(wq, wt);
}

/* Takes the waiter off its lock's watch. */
static void detach(struct fg_waitq *wq, struct fg_waiter *w)
{
	struct watch *wt = w->watch;
	if (!wt)
		return;
	if (w->kind == ACQ)
		DL_DELETE(wt->acq, w);
	else
		DL_DELETE(wt->obs, w);
	w->watch = NULL;
	watch_maybe_free(wq, wt);
}

/* Completes a waiter. Returns false if it was complete. */
static bool finish(struct fg_waitq *wq, struct fg_waiter *w,
		   enum fg_wait_result res, const struct fg_grant *g,
		   const struct fg_lock_info *info)
{
	if (w->result != FG_WAIT_PENDING)
		return false;
	detach(wq, w);
	if (g)
		w->grant = *g;
	if (info) {
		w->info = *info;
		w->info.value = info->value ? strndup(info->value, info->value_len) : NULL;
		w->info.owner = info->owner ? strdup(info->owner) : NULL;
		if ((info->value && !w->info.value) || (info->owner && !w->info.owner))
			res = FG_WAIT_UNAVAIL;
	}
	w->result = res;
	unregister(wq, w);
	/* off its socket and timer before the connection resumes */
	fg_park_resume(&w->park);
	if (w->parked) {
		w->parked = false;
		put(w);
	}
	return true;
}

/* ---- acquire waiters -------------------------------------------------- */

static void on_released(int err, const struct fg_grant *g, void *arg)
{
	(void)g;
	free(arg);
	if (err)
		fg_log_warn("could not release a re-entry whose client left: %s",
			    fg_strerror(err));
}

/* A grant or a place in the queue nobody will receive goes back now, not
 * at its expiry; astore sends it until Redis answers. */
static void give_back(struct fg_waitq *wq, const char *name, const char *lease,
		      const char *waiter_id, enum fg_giveback_reason why)
{
	if (!wq->as || fg_alock_give_back(wq->as, name, lease, waiter_id, why) != FG_OK)
		fg_log_warn("could not give back a grant of lock %s: it ends "
			    "with its lease", name);
}

static void give_back_waiter(struct fg_waitq *wq, struct fg_waiter *w,
			     enum fg_giveback_reason why)
{
	give_back(wq, w->name, w->lease, w->id, why);
}

void fg_waitq_give_back(struct fg_waitq *wq, const char *name,
			const char *lease, const char *waiter_id, bool reentry,
			const char *undo_id)
{
	fg_log_info("a grant of lock %s was not delivered: given back", name);
	if (!reentry) {
		give_back(wq, name, lease, waiter_id, FG_GIVEBACK_UNDELIVERED);
		return;
	}
	if (undo_id && *undo_id && wq->as &&
	    fg_alock_undo(wq->as, name, lease, undo_id,
			  FG_GIVEBACK_UNDELIVERED) == FG_OK)
		return;
	size_t n = strlen(name);
	/* owned by the release call: freed in on_released() */
	char *buf = malloc(n + 1 + FG_LEASE_LEN + 1);
	if (!buf)
		return;
	memcpy(buf, name, n + 1);
	snprintf(buf + n + 1, FG_LEASE_LEN + 1, "%s", lease);
	/* the hold was this client's: no principal to check */
	if (!wq->as || fg_alock_release(wq->as, buf, buf + n + 1, NULL,
					on_released, buf) != FG_OK)
		free(buf);
}

/* ---- waiters granted by asking ---------------------------------------- */

static void took_forget(struct fg_waitq *wq, struct took *t)
{
	HASH_DEL(wq->took, t);
	DL_DELETE(wq->took_order, t);
	free(t);
}

static void took_note(struct fg_waitq *wq, const char *id)
{
	uint64_t now = fg_clock_ms();
	while (wq->took_order && wq->took_order->at + TOOK_KEEP_MS < now)
		took_forget(wq, wq->took_order);
	struct took *t = calloc(1, sizeof(*t));
	if (!t)
		return;
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->at = now;
	HASH_ADD_STR(wq->took, id, t);
	DL_APPEND(wq->took_order, t);
}

/* True (and forgotten) when the waiter id took its grant by asking. */
static bool took_check(struct fg_waitq *wq, const char *id)
{
	struct took *t;
	HASH_FIND_STR(wq->took, id, t);
	if (!t)
		return false;
	took_forget(wq, t);
	return true;
}

static void start_dequeue(struct fg_waitq *wq, struct fg_waiter *w, bool peek);

static void on_dequeued(int err, const struct fg_grant *g, void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *q = w->wq;
	/* the call holds the waiter until call_ended(), past finish() */
	if (err && w->peeking && !w->deadline_hit && !q->stopping &&
	    w->result == FG_WAIT_PENDING && w->watch) {
		/* a resync's peek met no Redis (the subscription came back
		 * before the command connection did, or Redis went again): a
		 * loss of Redis does not end a wait, so the waiter stays
		 * queued and asks again shortly, until its deadline */
		w->repeek = true;
		struct timeval tv = tv_of(REPEEK_MS);
		evtimer_add(w->watch->repeek, &tv);
	} else if (err) {
		/* whether it is still queued, or was handed the lock, is not
		 * known: its client is answered 503, so both go back (asked
		 * before finish(), which never makes a result GRANTED here
		 * and may drop a reference) */
		if (w->result != FG_WAIT_GRANTED)
			give_back_waiter(q, w, FG_GIVEBACK_CONNECTION);
		/* a stopping gateway never blames Redis for its own stop */
		finish(q, w, q->stopping ? FG_WAIT_STOPPING : FG_WAIT_UNAVAIL,
		       NULL, NULL);
	} else if (g->status == FG_GRANTED) {
		struct fg_grant mine = *g;
		mine.holds = 1;
		if (finish(q, w, FG_WAIT_GRANTED, &mine, NULL))
			took_note(q, w->id);
		else if (w->result != FG_WAIT_GRANTED)
			give_back_waiter(q, w, FG_GIVEBACK_UNDELIVERED);
	} else if (g->status == FG_QUEUED) {
		/* a peek: still waiting, nothing to do */
	} else if (w->peeking && !w->deadline_hit) {
		/* a peek found neither the waiter nor a grant before its
		 * deadline: Redis lost its place, which is not "not granted
		 * within wait_ms" */
		finish(q, w, q->stopping ? FG_WAIT_STOPPING : FG_WAIT_LOST,
		       NULL, NULL);
	} else {
		finish(q, w, FG_WAIT_TIMEOUT, NULL, NULL);
	}
	w->peeking = false;
	w->ops--;
	/* the wait ran out, or the client left, while this call (a resync's
	 * peek) was in flight: leave the queue now */
	if (w->repoll) {
		w->repoll = false;
		if (w->result == FG_WAIT_PENDING || w->result == FG_WAIT_GONE ||
		    w->result == FG_WAIT_STOPPING)
			start_dequeue(q, w, false);
	}
	/* a resync came while this call was in flight: its answer may be
	 * the old Redis', so the waiter asks the one that is there now
	 * (after a dequeue started just above, if it still waits then) */
	if (w->peek_again) {
		w->peek_again = false;
		if (w->result == FG_WAIT_PENDING && !w->deadline_hit)
			start_dequeue(q, w, true);
	}
	put(w);
}

static void start_dequeue(struct fg_waitq *wq, struct fg_waiter *w, bool peek)
{
	if (w->ops > 0) {
		/* one call per waiter at a time; a dequeue or a peek wanted
		 * meanwhile follows it */
		if (!peek)
			w->repoll = true;
		else
			w->peek_again = true;
		return;
	}
	call_started(w);
	w->peeking = peek;
	if (fg_alock_dequeue(wq->as, w->name, w->id, w->lease, peek,
			     on_dequeued, w) != FG_OK) {
		/* never sent: another holder keeps the waiter */
		w->peeking = false;
		if (peek && w->result == FG_WAIT_PENDING && !w->deadline_hit &&
		    !wq->stopping && w->watch) {
			/* a resync's peek with no Redis to ask yet (the
			 * subscription came back first): as for one that met
			 * no Redis, asked again shortly; else nothing would
			 * ask before the deadline whether Redis lost it */
			w->repeek = true;
			struct timeval tv = tv_of(REPEEK_MS);
			evtimer_add(w->watch->repeek, &tv);
		}
		call_ended(w);
		if (!peek) {
			if (w->result != FG_WAIT_GRANTED)
				give_back_waiter(wq, w, FG_GIVEBACK_CONNECTION);
			finish(wq, w, wq->stopping ? FG_WAIT_STOPPING
						   : FG_WAIT_UNAVAIL, NULL, NULL);
		}
	}
}

static void schedule_tick(struct fg_waitq *wq, struct watch *wt, int64_t in_ms)
{
	int64_t hb = wq->gw->cfg->waiter_liveness_ms / 3;
	if (in_ms < 0 || in_ms > hb)
		in_ms = hb;
	uint64_t at = fg_clock_ms() + (uint64_t)in_ms;
	if (evtimer_pending(wt->tick, NULL) && wt->tick_at <= at)
		return;
	wt->tick_at = at;
	struct timeval tv = tv_of(in_ms);
	evtimer_add(wt->tick, &tv);
}

static void on_ticked(int err, const struct fg_grant *g, void *arg)
{
	struct watch *wt = arg;
	struct fg_waitq *wq = wt->wq;
	wt->ticking = false;
	if (!wt->acq) {
		watch_maybe_free(wq, wt);
		return;
	}
	schedule_tick(wq, wt, err ? 200 : g->wake_in_ms);
}

static void on_tick_timer(evutil_socket_t fd, short what, void *arg)
{
	struct watch *wt = arg;
	struct fg_waitq *wq = wt->wq;
	(void)fd;
	(void)what;
	if (wt->ticking || !wt->acq)
		return;
	wt->ticking = true;
	if (fg_alock_tick(wq->as, wt->name, wq->loop->id,
			  wq->gw->cfg->waiter_liveness_ms, false, on_ticked,
			  wt) != FG_OK) {
		wt->ticking = false;
		schedule_tick(wq, wt, 200);
	}
}

/* ---- observers ------------------------------------------------------- */

/* Scripts publish a lock's changes only while an observer's tick asked for
 * them (S.ob); this keeps that horizon ahead of now while observers wait. */
static void on_oticked(int err, const struct fg_grant *g, void *arg)
{
	struct watch *wt = arg;
	(void)g;
	wt->oticking = false;
	if (!wt->obs) {
		watch_maybe_free(wt->wq, wt);
		return;
	}
	struct timeval tv = tv_of(err ? 200 : wt->wq->gw->cfg->waiter_liveness_ms / 3);
	evtimer_add(wt->otick, &tv);
}

static void on_otick_timer(evutil_socket_t fd, short what, void *arg)
{
	struct watch *wt = arg;
	struct fg_waitq *wq = wt->wq;
	(void)fd;
	(void)what;
	if (wt->oticking || !wt->obs)
		return;
	wt->oticking = true;
	if (fg_alock_tick(wq->as, wt->name, wq->loop->id,
			  wq->gw->cfg->waiter_liveness_ms, true, on_oticked,
			  wt) != FG_OK) {
		wt->oticking = false;
		struct timeval tv = tv_of(200);
		evtimer_add(wt->otick, &tv);
	}
}

static void request_inspect(struct fg_waitq *wq, struct watch *wt);

static void on_inspected(int err, const struct fg_lock_info *info, void *arg)
{
	struct watch *wt = arg;
	struct fg_waitq *wq = wt->wq;
	wt->inspecting = false;
	wt->busy++;
	struct fg_waiter *w, *tmp;
	DL_FOREACH_SAFE(wt->obs, w, tmp) {
		if (err) {
			if (w->deadline_hit)
				finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		} else if (w->deadline_hit || info->held != w->held0 ||
			   info->has_token != w->has_tok0 ||
			   info->token != w->tok0) {
			finish(wq, w, FG_WAIT_OBSERVED, NULL, info);
		}
	}
	wt->busy--;
	if (!wt->obs) {
		watch_maybe_free(wq, wt);
		return;
	}
	if (wt->reinspect) {
		wt->reinspect = false;
		request_inspect(wq, wt);
	} else if (!err && info->held && info->ttl_ms > 0) {
		/* Expiry publishes nothing: look again when it is due. */
		struct timeval tv = tv_of((int64_t)info->ttl_ms + 2);
		evtimer_add(wt->recheck, &tv);
	} else if (err) {
		struct timeval tv = tv_of(200);
		evtimer_add(wt->recheck, &tv);
	}
}

static void request_inspect(struct fg_waitq *wq, struct watch *wt)
{
	if (wt->inspecting) {
		wt->reinspect = true;
		return;
	}
	wt->inspecting = true;
	if (fg_alock_inspect(wq->as, wt->name, on_inspected, wt) != FG_OK) {
		wt->inspecting = false;
		struct timeval tv = tv_of(200);
		evtimer_add(wt->recheck, &tv);
		/* observers at their deadline cannot wait for Redis */
		struct fg_waiter *w, *tmp;
		wt->busy++;
		DL_FOREACH_SAFE(wt->obs, w, tmp)
			if (w->deadline_hit)
				finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		wt->busy--;
		watch_maybe_free(wq, wt);
	}
}

static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct watch *wt = arg;
	request_inspect(wt->wq, wt);
}

/* The peeks that met no Redis, asked again (each waiter's deadline still
 * bounds its wait: on_deadline() dequeues it whatever a peek does). */
static void on_repeek(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct watch *wt = arg;
	struct fg_waiter *w, *tmp;
	wt->busy++;
	DL_FOREACH_SAFE(wt->acq, w, tmp) {
		if (!w->repeek)
			continue;
		w->repeek = false;
		if (w->result == FG_WAIT_PENDING && !w->deadline_hit)
			start_dequeue(wt->wq, w, true);
	}
	wt->busy--;
	watch_maybe_free(wt->wq, wt);
}

/* ---- parked waiters -------------------------------------------------- */

static void on_deadline(void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *wq = w->wq;
	w->deadline_hit = true;
	if (w->kind == ACQ) {
		start_dequeue(wq, w, false);
	} else {
		if (w->watch)
			request_inspect(wq, w->watch);
	}
}

static void on_client_gone(void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *wq = w->wq;
	if (w->kind == ACQ) {
		/* Leave the queue now; if the lock was handed over meanwhile,
		 * on_dequeued gives it back. The call is started first: it
		 * holds the waiter past finish(). */
		start_dequeue(wq, w, false);
	}
	finish(wq, w, FG_WAIT_GONE, NULL, NULL);
}

void fg_waiter_leave(struct fg_waitq *wq, struct fg_waiter *w)
{
	if (!w || w->kind != ACQ || w->parked || w->result != FG_WAIT_PENDING)
		return;
	/* unregistered by finish(): a grant message that still comes for it
	 * is one for an unknown waiter, and goes back too */
	finish(wq, w, FG_WAIT_GONE, NULL, NULL);
	give_back_waiter(wq, w, FG_GIVEBACK_UNDELIVERED);
}

bool fg_waiter_park(struct fg_waitq *wq, struct fg_waiter *w,
		    struct MHD_Connection *c, int64_t wake_in_ms)
{
	if (w->result != FG_WAIT_PENDING)
		return false; /* granted before it could park */
	if (wq->stopping) {
		if (w->kind == ACQ)
			start_dequeue(wq, w, false); /* it was queued */
		finish(wq, w, FG_WAIT_STOPPING, NULL, NULL);
		return false;
	}
	struct watch *wt = watch_get(wq, w->name);
	if (!wt || fg_park_suspend(&w->park, wq->loop, c, on_client_gone,
				   on_deadline, w) != 0) {
		if (wt)
			watch_maybe_free(wq, wt);
		if (w->kind == ACQ)
			start_dequeue(wq, w, false); /* it was queued */
		finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		return false;
	}
	w->parked = true;
	w->refs++;
	w->wake_in = wake_in_ms;
	w->watch = wt;
	if (w->kind == ACQ)
		DL_APPEND(wt->acq, w);
	else
		DL_APPEND(wt->obs, w);
	fg_park_arm(&w->park, (int64_t)w->wait_ms);
	if (w->kind == ACQ) {
		schedule_tick(wq, wt, w->wake_in);
	} else if (!wt->subscribed) {
		/* Ask for events first: the tick runs before the inspect that
		 * the subscription's confirmation triggers (one connection,
		 * in order), so no change falls between the two. */
		on_otick_timer(-1, 0, wt);
		if (fg_astore_subscribe(wq->as, wt->chan) == FG_OK)
			wt->subscribed = true;
	} else if (wt->confirmed) {
		request_inspect(wq, wt);
	}
	return true;
}

/* ---- Redis messages -------------------------------------------------- */

/* "t <ms> <lock>": the lock can change hands in ms, sooner than this
 * loop's tick is due (a break's lock-delay ends then). */
static void wake_ticks(struct fg_waitq *wq, const char *rest)
{
	char name[FG_NAME_MAX + 1];
	long long ms;
	struct watch *wt;
	if (sscanf(rest, "%lld %255s", &ms, name) != 2 || ms < 0)
		return;
	HASH_FIND_STR(wq->watches, name, wt);
	if (wt && wt->acq)
		schedule_tick(wq, wt, ms);
}

static void on_grant_message(struct fg_waitq *wq, const char *msg, size_t len)
{
	char buf[FG_NAME_MAX + FG_LEASE_LEN + 128], id[FG_WAITER_ID_MAX], mode[2];
	char lease[FG_LEASE_LEN + 1], name[FG_NAME_MAX + 1];
	unsigned long long tok;
	if (len >= sizeof(buf))
		return;
	memcpy(buf, msg, len);
	buf[len] = '\0';
	if (len > 2 && buf[0] == 't' && buf[1] == ' ') {
		wake_ticks(wq, buf + 2);
		return;
	}
	int n = sscanf(buf, "%39s %llu %1s %22s %255s", id, &tok, mode, lease, name);
	if (n != 3 && n != 5)
		return;

	struct fg_grant g = { .status = FG_GRANTED, .token = tok, .holds = 1,
			      .mode = mode[0] == 's' ? FG_MODE_SHARED : FG_MODE_EXCLUSIVE,
			      .wake_in_ms = -1 };
	struct fg_waiter *w;
	HASH_FIND_STR(wq->byid, id, w);
	bool known = w != NULL;
	if (w && w->kind == ACQ && w->result == FG_WAIT_PENDING && !w->parked) {
		/* Granted before its request parked it: the request will see
		 * the result and answer without suspending. */
		g.ttl_ms = w->ttl_ms;
		w->grant = g;
		w->result = FG_WAIT_GRANTED;
		unregister(wq, w);
	} else if (w && w->kind == ACQ && w->parked) {
		g.ttl_ms = w->ttl_ms;
		if (!finish(wq, w, FG_WAIT_GRANTED, &g, NULL) &&
		    w->result != FG_WAIT_GRANTED && w->ops == 0)
			give_back_waiter(wq, w, FG_GIVEBACK_UNDELIVERED);
	} else if (!known && n == 5 && !took_check(wq, id)) {
		/* Its acquire was answered 503, it timed out, its client
		 * left: nobody here will answer it with this grant. */
		fg_log_info("lock %s was granted to a waiter this gateway no "
			    "longer knows: given back", name);
		give_back(wq, name, lease, id, FG_GIVEBACK_UNKNOWN_WAITER);
	}
}

void fg_waitq_message(struct fg_waitq *wq, const char *chan, const char *msg,
		      size_t len)
{
	if (strcmp(chan, wq->chan) == 0) {
		if (msg)
			on_grant_message(wq, msg, len);
		return;
	}
	if (strncmp(chan, "fg:ev:", 6) != 0)
		return;
	struct watch *wt;
	HASH_FIND_STR(wq->watches, chan + 6, wt);
	if (!wt || !wt->obs)
		return;
	if (!msg)
		wt->confirmed = true;
	request_inspect(wq, wt);
}

void fg_waitq_resync(struct fg_waitq *wq)
{
	struct watch *wt, *tmp;
	HASH_ITER(hh, wq->watches, wt, tmp) {
		wt->confirmed = false;
		struct fg_waiter *w, *wtmp;
		wt->busy++;
		DL_FOREACH_SAFE(wt->acq, w, wtmp)
			start_dequeue(wq, w, true);
		wt->busy--;
		watch_maybe_free(wq, wt);
	}
}

/* ---- life cycle ------------------------------------------------------ */

struct fg_waitq *fg_waitq_create(struct fg_loop *loop, struct event_base *base,
				 struct fg_gateway *gw, fg_astore *as)
{
	struct fg_waitq *wq = calloc(1, sizeof(*wq));
	if (!wq)
		return NULL;
	wq->gw = gw;
	wq->loop = loop;
	wq->base = base;
	wq->as = as;
	fg_chan_gateway(loop->id, wq->chan, sizeof(wq->chan));
	return wq;
}

void fg_waitq_stop(struct fg_waitq *wq)
{
	if (wq->stopping)
		return;
	wq->stopping = true; /* watches stay: the walk below is safe */
	struct watch *wt, *tmp;
	HASH_ITER(hh, wq->watches, wt, tmp) {
		struct fg_waiter *w, *wtmp;
		wt->busy++;
		/* As when its client leaves: the dequeue is sent first (it
		 * holds the waiter past finish()); a grant it finds, or one
		 * that is on its way, goes back (on_dequeued). While Redis
		 * is down it is never sent, and the waiter's entry ends
		 * with this gateway's ticks. */
		DL_FOREACH_SAFE(wt->acq, w, wtmp) {
			start_dequeue(wq, w, false);
			finish(wq, w, FG_WAIT_STOPPING, NULL, NULL);
		}
		DL_FOREACH_SAFE(wt->obs, w, wtmp)
			finish(wq, w, FG_WAIT_STOPPING, NULL, NULL);
		wt->busy--;
		watch_maybe_free(wq, wt);
	}
}

void fg_waitq_store_closed(struct fg_waitq *wq)
{
	wq->as = NULL;
}

void fg_waitq_destroy(struct fg_waitq *wq)
{
	if (!wq)
		return;
	fg_waitq_stop(wq);
	struct watch *wt, *tmp;
	HASH_ITER(hh, wq->watches, wt, tmp)
		watch_free(wq, wt);
	while (wq->took_order)
		took_forget(wq, wq->took_order);
	free(wq);
}
