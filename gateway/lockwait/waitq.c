/*
 * waitq.c - a loop's waiters: every request that waits (blocked
 * acquires, observers, writes waiting for admission) parks here, on its
 * loop, with asynchronous Redis and no thread of its own.
 *
 * Invariants:
 * - A waiter is completed exactly once, under wq->mu, and its connection
 *   is resumed exactly when it was suspended.
 * - A waiter is freed when its last reference goes: the worker's (dropped
 *   in the request-completed callback) and the loop's (taken at park,
 *   dropped once the waiter is complete and no Redis call of its is in
 *   flight).
 * - Everything here runs on the loop's thread; waiters are parked
 *   through a FIFO list that the loop takes over on its next turn.
 * - Per lock, this gateway runs at most one tick and one inspect at a time,
 *   however many of its requests wait on that lock.
 * - A waiter whose client is not answered with its grant leaves nothing in
 *   Redis: its place in the queue, or the grant it was handed, is given
 *   back (fg_alock_give_back()); so is a grant addressed to a waiter this
 *   loop does not know, unless the waiter already took it by asking
 *   (`took`, kept until the message that says so could still come).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <uthash.h>
#include <utlist.h>

#include "base/clock.h"
#include "proc/gateway.h"
#include "base/log.h"
#include "rt/rt.h"
#include "proc/metrics.h"
#include "lockwait/waitq.h"

enum kind { ACQ, OBS, ADM };

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
	bool held0, has_tok0; /* observe: answer when these differ */
	uint64_t tok0;
	char write_id[FG_WAITER_ID_MAX]; /* admit */
	uint32_t margin_ms, longest_ms;
	struct fg_admit admit;
	uint64_t asked_ms;       /* when the last admit call was sent */

	/* under wq->mu */
	enum fg_wait_result result;
	struct fg_grant grant;
	struct fg_lock_info info;
	struct MHD_Connection *conn;
	bool suspended;
	bool registered;
	bool loop_ref;
	bool incoming;
	int refs;
	UT_hash_handle hh;
	struct fg_waiter *inext;

	/* loop thread only */
	int64_t wake_in;
	int fd;
	int ops;
	bool deadline_hit;
	bool repoll;             /* asked again while a call was in flight */
	struct event *timer;
	struct event *fdev;
	struct watch *watch;
	struct fg_waiter *prev, *next;
};

struct watch {
	struct fg_waitq *wq;
	char name[FG_NAME_MAX + 1];
	char chan[FG_NAME_MAX + 16];
	struct fg_waiter *acq, *obs, *adm;
	struct event *tick;
	struct event *otick;     /* keeps the lock's change events coming */
	struct event *recheck;
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
#define TOOK_KEEP_MS 60000      /* a message is never this late on a live
				   subscription; a new one starts afresh */

struct fg_waitq {
	struct fg_gateway *gw;
	struct fg_loop *loop;
	struct event_base *base;
	fg_astore *as;
	char chan[64];
	struct event *kick;

	pthread_mutex_t mu;
	struct fg_waiter *byid;
	struct fg_waiter *incoming, **incoming_tail; /* FIFO */
	bool stopping;

	struct watch *watches;
	bool stopping_loop;      /* the loop is answering everyone: keep watches */
	struct took *took, *took_order; /* loop thread: hash, oldest first */
};


static struct timeval tv_of(int64_t ms)
{
	if (ms < 0)
		ms = 0;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	return tv;
}

/* ---- references ------------------------------------------------------ */

static const enum fg_gauge gauge_of[] = {
	[ACQ] = FG_GAUGE_WAIT_ACQUIRE, [OBS] = FG_GAUGE_WAIT_OBSERVE,
	[ADM] = FG_GAUGE_WAIT_ADMIT,
};

static void waiter_free(struct fg_waiter *w)
{
	fg_metrics_gauge_add(gauge_of[w->kind], -1);
	fg_lock_info_finish(&w->info);
	free(w);
}

/* Drops one reference; the caller must not hold wq->mu. */
static void put(struct fg_waitq *wq, struct fg_waiter *w)
{
	pthread_mutex_lock(&wq->mu);
	int left = --w->refs;
	if (left == 0 && w->registered) {
		HASH_DEL(wq->byid, w);
		w->registered = false;
	}
	pthread_mutex_unlock(&wq->mu);
	if (left == 0)
		waiter_free(w);
}

static void maybe_release(struct fg_waitq *wq, struct fg_waiter *w)
{
	if (w->loop_ref && w->result != FG_WAIT_PENDING && w->ops == 0 &&
	    !w->incoming) {
		w->loop_ref = false;
		put(wq, w);
	}
}

/* ---- worker side ----------------------------------------------------- */

static struct fg_waiter *waiter_new(struct fg_waitq *wq, enum kind kind,
				    const char *name, uint32_t wait_ms)
{
	struct fg_waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->wq = wq;
	w->kind = kind;
	fg_metrics_gauge_add(gauge_of[kind], 1);
	w->wait_ms = wait_ms;
	w->refs = 1;
	w->fd = -1;
	snprintf(w->name, sizeof(w->name), "%s", name);
	fg_loop_next_id(wq->loop, false, w->id, sizeof(w->id));
	pthread_mutex_lock(&wq->mu);
	HASH_ADD_STR(wq->byid, id, w);
	w->registered = true;
	pthread_mutex_unlock(&wq->mu);
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

struct fg_waiter *fg_waiter_admit(struct fg_waitq *wq, const char *name,
				  uint64_t token, const char *write_id,
				  uint32_t margin_ms, uint32_t longest_ms)
{
	struct fg_waiter *w = waiter_new(wq, ADM, name, 0);
	if (w) {
		w->tok0 = token;
		snprintf(w->write_id, sizeof(w->write_id), "%s", write_id);
		w->margin_ms = margin_ms;
		w->longest_ms = longest_ms;
	}
	return w;
}

void fg_waiter_admission(const struct fg_waiter *w, struct fg_admit *out,
			 uint64_t *deadline_at)
{
	*out = w->admit;
	*deadline_at = w->asked_ms + (uint64_t)(w->admit.ms > 0 ? w->admit.ms : 0);
}

const char *fg_waiter_id(const struct fg_waiter *w)
{
	return w->id;
}

bool fg_waiter_park(struct fg_waitq *wq, struct fg_waiter *w,
		    struct MHD_Connection *c, int64_t wake_in_ms)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	pthread_mutex_lock(&wq->mu);
	if (w->result == FG_WAIT_PENDING && wq->stopping) {
		w->result = FG_WAIT_UNAVAIL;
		if (w->registered) {
			HASH_DEL(wq->byid, w);
			w->registered = false;
		}
	}
	if (w->result != FG_WAIT_PENDING) {
		pthread_mutex_unlock(&wq->mu);
		return false;
	}
	MHD_suspend_connection(c);
	w->conn = c;
	w->fd = ci ? ci->connect_fd : -1;
	w->suspended = true;
	w->loop_ref = true;
	w->refs++;
	w->wake_in = wake_in_ms;
	w->incoming = true;
	w->inext = NULL;
	*wq->incoming_tail = w;
	wq->incoming_tail = &w->inext;
	pthread_mutex_unlock(&wq->mu);
	event_active(wq->kick, EV_READ, 0);
	return true;
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
	if (w)
		put(wq, w);
}

/* ---- per-lock watches (loop thread) ---------------------------------- */

static void on_tick_timer(evutil_socket_t fd, short what, void *arg);
static void on_otick_timer(evutil_socket_t fd, short what, void *arg);
static void on_recheck(evutil_socket_t fd, short what, void *arg);

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
	if (!wt->tick || !wt->otick || !wt->recheck) {
		if (wt->tick)
			event_free(wt->tick);
		if (wt->otick)
			event_free(wt->otick);
		if (wt->recheck)
			event_free(wt->recheck);
		free(wt);
		return NULL;
	}
	HASH_ADD_STR(wq->watches, name, wt);
	return wt;
}

static void watch_maybe_free(struct fg_waitq *wq, struct watch *wt)
{
	if (wt->obs == NULL && wt->subscribed) {
		fg_astore_unsubscribe(wq->as, wt->chan);
		wt->subscribed = wt->confirmed = false;
		evtimer_del(wt->recheck);
		evtimer_del(wt->otick);
	}
	if (wt->acq || wt->obs || wt->adm || wt->ticking || wt->oticking ||
	    wt->inspecting || wt->busy || wq->stopping_loop)
		return;
	HASH_DEL(wq->watches, wt);
	event_free(wt->tick);
	event_free(wt->otick);
	event_free(wt->recheck);
	free(wt);
}

/* Takes the waiter out of the loop's bookkeeping. */
static void detach(struct fg_waitq *wq, struct fg_waiter *w)
{
	if (w->timer) {
		event_free(w->timer);
		w->timer = NULL;
	}
	if (w->fdev) {
		event_free(w->fdev);
		w->fdev = NULL;
	}
	struct watch *wt = w->watch;
	if (wt) {
		if (w->kind == ACQ)
			DL_DELETE(wt->acq, w);
		else if (w->kind == ADM)
			DL_DELETE(wt->adm, w);
		else
			DL_DELETE(wt->obs, w);
		w->watch = NULL;
		watch_maybe_free(wq, wt);
	}
}

/* Completes a waiter (loop thread). Returns false if it was complete. */
static bool finish(struct fg_waitq *wq, struct fg_waiter *w,
		   enum fg_wait_result res, const struct fg_grant *g,
		   const struct fg_lock_info *info)
{
	if (w->result != FG_WAIT_PENDING)
		return false;
	/* Off our sockets and timers before the connection is resumed:
	 * once MHD closes it, its descriptor may be reused. */
	detach(wq, w);
	pthread_mutex_lock(&wq->mu);
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
	if (w->registered) {
		HASH_DEL(wq->byid, w);
		w->registered = false;
	}
	if (w->suspended) {
		w->suspended = false;
		fg_loop_resume(wq->loop, w->conn);
	}
	pthread_mutex_unlock(&wq->mu);
	maybe_release(wq, w);
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
			const char *lease, const char *waiter_id, bool reentry)
{
	fg_log_info("a grant of lock %s was not delivered: given back", name);
	if (!reentry) {
		give_back(wq, name, lease, waiter_id, FG_GIVEBACK_UNDELIVERED);
		return;
	}
	size_t n = strlen(name);
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
	/* ops stays counted until the end: finish() must not let go of the
	 * waiter while this function still reads it */
	if (err) {
		/* whether it is still queued, or was handed the lock, is not
		 * known: its client is answered 503, so both go back */
		finish(q, w, FG_WAIT_UNAVAIL, NULL, NULL);
		if (w->result != FG_WAIT_GRANTED)
			give_back_waiter(q, w, FG_GIVEBACK_CONNECTION);
	} else if (g->status == FG_GRANTED) {
		struct fg_grant mine = *g;
		mine.holds = 1;
		if (finish(q, w, FG_WAIT_GRANTED, &mine, NULL))
			took_note(q, w->id);
		else if (w->result != FG_WAIT_GRANTED)
			give_back_waiter(q, w, FG_GIVEBACK_UNDELIVERED);
	} else if (g->status == FG_QUEUED) {
		/* a peek: still waiting, nothing to do */
	} else {
		finish(q, w, FG_WAIT_TIMEOUT, NULL, NULL);
	}
	w->ops--;
	/* the wait ran out, or the client left, while this call (a resync's
	 * peek) was in flight: leave the queue now */
	if (w->repoll) {
		w->repoll = false;
		if (w->result == FG_WAIT_PENDING || w->result == FG_WAIT_GONE)
			start_dequeue(q, w, false);
	}
	maybe_release(q, w);
}

static void start_dequeue(struct fg_waitq *wq, struct fg_waiter *w, bool peek)
{
	if (w->ops > 0) {
		/* one call per waiter at a time; a dequeue wanted meanwhile
		 * follows it */
		if (!peek)
			w->repoll = true;
		return;
	}
	w->ops++;
	if (fg_alock_dequeue(wq->as, w->name, w->id, w->lease, peek,
			     on_dequeued, w) != FG_OK) {
		w->ops--;
		if (!peek) {
			finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
			if (w->result != FG_WAIT_GRANTED)
				give_back_waiter(wq, w, FG_GIVEBACK_CONNECTION);
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

/* ---- admissions -------------------------------------------------------- */

/*
 * A write that waits asks Redis again only when what it waits on changes:
 * a write of the lock ends (finish.lua publishes "w <lock>" to the gateways
 * whose writes wait), or the last record it waits behind reaches its
 * recorded end (the time the admit reply gave). No polling in between.
 */
static void arm(struct fg_waiter *w, int64_t ms)
{
	struct timeval tv = tv_of(ms);
	evtimer_add(w->timer, &tv);
}

static void on_admit_reply(int err, const struct fg_admit *a, void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *wq = w->wq;
	/* ops stays counted until the end (see on_dequeued) */
	if (err) {
		finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
	} else if (w->result == FG_WAIT_PENDING) {
		w->admit = *a;
		if (a->status == FG_ADMITTED)
			finish(wq, w, FG_WAIT_ADMITTED, NULL, NULL);
		else if (a->status != FG_ADMIT_WAIT)
			finish(wq, w, FG_WAIT_REFUSED, NULL, NULL);
		else
			arm(w, w->repoll ? 0 : a->ms + 1); /* a wake came meanwhile */
		w->repoll = false;
	} else if (a->status == FG_ADMITTED) {
		/* admitted for a client that left: let others go at once */
		fg_alock_finish(wq->as, w->name, w->write_id, NULL, NULL);
	}
	w->ops--;
	maybe_release(wq, w);
}

static void poll_admit(struct fg_waitq *wq, struct fg_waiter *w)
{
	if (w->ops > 0) {
		w->repoll = true; /* one call at a time; ask again after it */
		return;
	}
	w->ops++;
	w->asked_ms = fg_clock_ms();
	if (fg_alock_admit(wq->as, w->name, w->tok0, w->write_id, w->margin_ms,
			   w->longest_ms, on_admit_reply, w) != FG_OK) {
		w->ops--;
		finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
	}
}

/* ---- per-waiter events ----------------------------------------------- */

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *wq = w->wq;
	(void)fd;
	(void)what;
	if (w->kind == ACQ) {
		start_dequeue(wq, w, false);
	} else if (w->kind == ADM) {
		poll_admit(wq, w);
	} else {
		w->deadline_hit = true;
		if (w->watch)
			request_inspect(wq, w->watch);
	}
}

/*
 * The client's socket is watched edge-triggered: unread bytes (a body
 * waiting to be read, a pipelined request) wake the loop once per arrival,
 * never in a loop. Whether the client is gone is asked of the kernel
 * (POLLRDHUP): a close or reset counts even with bytes left unread.
 */
static void on_client_readable(evutil_socket_t fd, short what, void *arg)
{
	struct fg_waiter *w = arg;
	struct fg_waitq *wq = w->wq;
	(void)what;
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return;
	if (w->kind == ACQ) {
		/* Leave the queue now; if the lock was handed over meanwhile,
		 * on_dequeued gives it back. The call is started first: it
		 * keeps the loop's reference (ops > 0) past finish(). */
		start_dequeue(wq, w, false);
		finish(wq, w, FG_WAIT_GONE, NULL, NULL);
	} else {
		finish(wq, w, FG_WAIT_GONE, NULL, NULL);
	}
}

static void setup(struct fg_waitq *wq, struct fg_waiter *w)
{
	struct watch *wt = watch_get(wq, w->name);
	if (!wt) {
		finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		return;
	}
	w->watch = wt;
	if (w->kind == ACQ)
		DL_APPEND(wt->acq, w);
	else if (w->kind == ADM)
		DL_APPEND(wt->adm, w);
	else
		DL_APPEND(wt->obs, w);
	w->timer = evtimer_new(wq->base, on_deadline, w);
	if (w->timer)
		arm(w, w->kind == ADM ? w->wake_in + 1 : (int64_t)w->wait_ms);
	if (w->fd >= 0) {
		short ev = EV_READ | EV_ET | EV_PERSIST;
		if (event_base_get_features(wq->base) & EV_FEATURE_EARLY_CLOSE)
			ev |= EV_CLOSED;
		w->fdev = event_new(wq->base, w->fd, ev, on_client_readable, w);
		if (w->fdev)
			event_add(w->fdev, NULL);
	}
	if (!w->timer) {
		finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		return;
	}
	if (w->kind == ACQ) {
		schedule_tick(wq, wt, w->wake_in);
	} else if (w->kind == ADM) {
		/* woken by "w <lock>", or by its timer when the record it
		 * waits behind ends */
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
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct fg_waitq *wq = arg;
	(void)fd;
	(void)what;
	pthread_mutex_lock(&wq->mu);
	struct fg_waiter *list = wq->incoming;
	wq->incoming = NULL;
	wq->incoming_tail = &wq->incoming;
	bool stopping = wq->stopping;
	pthread_mutex_unlock(&wq->mu);

	while (list) {
		struct fg_waiter *w = list;
		list = w->inext;
		w->inext = NULL;
		w->incoming = false;
		if (w->result != FG_WAIT_PENDING)
			maybe_release(wq, w);
		else if (stopping)
			finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		else
			setup(wq, w);
	}
	if (stopping) {
		wq->stopping_loop = true;
		struct watch *wt, *tmp;
		HASH_ITER(hh, wq->watches, wt, tmp) {
			struct fg_waiter *w, *wtmp;
			DL_FOREACH_SAFE(wt->acq, w, wtmp)
				finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
			DL_FOREACH_SAFE(wt->obs, w, wtmp)
				finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
			DL_FOREACH_SAFE(wt->adm, w, wtmp)
				finish(wq, w, FG_WAIT_UNAVAIL, NULL, NULL);
		}
	}
}

/* ---- Redis messages -------------------------------------------------- */

/* "w <lock>": a write of the lock ended; its waiting writes ask again. */
static void wake_admissions(struct fg_waitq *wq, const char *name)
{
	struct watch *wt;
	HASH_FIND_STR(wq->watches, name, wt);
	if (!wt)
		return;
	struct fg_waiter *w, *tmp;
	wt->busy++;
	DL_FOREACH_SAFE(wt->adm, w, tmp)
		poll_admit(wq, w);
	wt->busy--;
	watch_maybe_free(wq, wt);
}

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
	if (len > 2 && buf[0] == 'w' && buf[1] == ' ') {
		wake_admissions(wq, buf + 2);
		return;
	}
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
	pthread_mutex_lock(&wq->mu);
	struct fg_waiter *w;
	HASH_FIND_STR(wq->byid, id, w);
	bool known = w != NULL;
	if (w && w->kind == ACQ && w->result == FG_WAIT_PENDING && !w->loop_ref) {
		/* Granted before its worker parked it: the worker will see
		 * the result and answer without suspending. */
		g.ttl_ms = w->ttl_ms;
		w->grant = g;
		w->result = FG_WAIT_GRANTED;
		HASH_DEL(wq->byid, w);
		w->registered = false;
		w = NULL;
	}
	pthread_mutex_unlock(&wq->mu);
	if (w && w->kind == ACQ && w->loop_ref) {
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
		DL_FOREACH_SAFE(wt->adm, w, wtmp)
			poll_admit(wq, w);
		wt->busy--;
		watch_maybe_free(wq, wt);
	}
}

/* ---- life cycle ------------------------------------------------------ */

struct fg_waitq *fg_waitq_create(struct fg_loop *loop,
				 fg_message_cb *on_message,
				 fg_resync_cb *on_resync, void *arg)
{
	struct fg_waitq *wq = calloc(1, sizeof(*wq));
	if (!wq)
		return NULL;
	wq->gw = loop->gw;
	wq->loop = loop;
	wq->base = loop->base;
	wq->incoming_tail = &wq->incoming;
	pthread_mutex_init(&wq->mu, NULL);
	fg_chan_gateway(loop->id, wq->chan, sizeof(wq->chan));
	wq->kick = event_new(wq->base, -1, 0, on_kick, wq);
	if (!wq->kick)
		goto error_kick;
	wq->as = fg_astore_create(wq->base, &wq->gw->store_opts,
				  on_message, on_resync, arg);
	if (!wq->as || fg_astore_subscribe(wq->as, wq->chan) != FG_OK)
		goto error_astore;
	return wq;

error_astore:
	fg_astore_destroy(wq->as);
	event_free(wq->kick);
error_kick:
	pthread_mutex_destroy(&wq->mu);
	free(wq);
	return NULL;
}

fg_astore *fg_waitq_store(struct fg_waitq *wq)
{
	return wq->as;
}

void fg_waitq_stop(struct fg_waitq *wq)
{
	pthread_mutex_lock(&wq->mu);
	bool was = wq->stopping;
	wq->stopping = true;
	pthread_mutex_unlock(&wq->mu);
	if (!was)
		on_kick(-1, 0, wq);
}

void fg_waitq_close_store(struct fg_waitq *wq)
{
	if (!wq || !wq->as)
		return;
	fg_waitq_stop(wq);
	/* Calls still in flight answer FG_EUNAVAIL here and drop their
	 * references. */
	fg_astore_destroy(wq->as);
	wq->as = NULL;
}

void fg_waitq_destroy(struct fg_waitq *wq)
{
	if (!wq)
		return;
	fg_waitq_close_store(wq);
	struct watch *wt, *tmp;
	HASH_ITER(hh, wq->watches, wt, tmp) {
		HASH_DEL(wq->watches, wt);
		event_free(wt->tick);
		event_free(wt->otick);
		event_free(wt->recheck);
		free(wt);
	}
	while (wq->took_order)
		took_forget(wq, wq->took_order);
	event_free(wq->kick);
	pthread_mutex_destroy(&wq->mu);
	free(wq);
}
