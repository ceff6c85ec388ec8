/*
 * writes.c - this loop's running fenced writes by write id (writes.h):
 * their deadlines, the messages about their grants, the ring of ids told
 * before they registered, and the timer that looks at the deadlines.
 *
 * Everything here runs on the loop's thread: no lock. Writes are found by
 * id from the loop's messages; the timer walks them all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/text.h"
#include "base/clock.h"
#include "proxy/writes.h"

struct fg_writes {
	struct fg_write *table;       /* by id */
	const struct fg_writes_ops *ops;
	uint64_t margin_ms;
	bool recheck;                 /* ask every running write's grant again */
	uint64_t walk;                /* the number of fg_writes_check()'s walk */
	struct event *kick_ev;        /* look at the deadlines on the next turn */
	struct event *timer;          /* the next deadline (or extension) due */
	/* ids told before they registered: 'x' their grant ended, 'e' their
	 * lease got shorter (at the latest `dl`) */
	char ring[FG_WRITES_RING][FG_WAITER_ID_MAX];
	char ring_kind[FG_WRITES_RING];
	uint64_t ring_dl[FG_WRITES_RING];
	unsigned nring;
};

static void arm(struct fg_writes *ws)
{
	if (!ws->timer)
		return;
	long ms = fg_writes_check(ws, fg_clock_ms());
	if (!ws->table) {
		evtimer_del(ws->timer);
		return;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(ws->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	arm(arg);
}

struct fg_writes *fg_writes_create(struct event_base *base, uint64_t margin_ms,
				   const struct fg_writes_ops *ops)
{
	struct fg_writes *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->ops = ops;
	ws->margin_ms = margin_ms;
	ws->kick_ev = event_new(base, -1, 0, on_timer, ws);
	ws->timer = evtimer_new(base, on_timer, ws);
	if (!ws->kick_ev || !ws->timer)
		goto error_events;
	return ws;

error_events:
	if (ws->kick_ev)
		event_free(ws->kick_ev);
	if (ws->timer)
		event_free(ws->timer);
	free(ws);
	return NULL;
}

void fg_writes_destroy(struct fg_writes *ws)
{
	if (!ws)
		return;
	struct fg_write *w, *tmp;
	HASH_ITER(hh, ws->table, w, tmp) {
		HASH_DEL(ws->table, w);
		w->registered = false;
	}
	event_free(ws->kick_ev);
	event_free(ws->timer);
	free(ws);
}

void fg_write_init(struct fg_write *w, const char *id, int n,
		   const bool *admitted, const uint64_t *mdeadline,
		   uint64_t deadline)
{
	memset(w, 0, sizeof(*w));
	fg_copy(w->id, sizeof(w->id), id);
	w->n = n < FG_WRITE_MEMBERS ? n : FG_WRITE_MEMBERS;
	for (int i = 0; i < w->n; i++) {
		w->admitted[i] = admitted[i];
		w->mdeadline[i] = mdeadline[i];
	}
	w->deadline = deadline;
}

static uint64_t least_deadline(const struct fg_write *w)
{
	uint64_t dl = 0;
	for (int i = 0; i < w->n; i++)
		if (w->admitted[i] && (!dl || w->mdeadline[i] < dl))
			dl = w->mdeadline[i];
	return dl;
}

/* The write's grant ends sooner. Its deadline (each member's: the message
 * does not say which lock) moves to `dl` at the latest, at once, whether
 * or not the extension asked for next gets through; one already awaiting
 * its answer after its last byte keeps its grace. */
static void clamp_deadline(struct fg_write *w, uint64_t dl)
{
	if (!w->deadline || w->grace)
		return;
	if (dl < 1)
		dl = 1;
	if (w->deadline > dl)
		w->deadline = dl;
	for (int i = 0; i < w->n; i++)
		if (w->mdeadline[i] > dl)
			w->mdeadline[i] = dl;
}

/* Was this write's grant ended ('x'), or its lease shortened ('e', with
 * the earliest deadline said in *dl), before it registered? 0 if
 * neither; an end wins. */
static char told_before(const struct fg_writes *ws, const char *id, uint64_t *dl)
{
	unsigned n = ws->nring < FG_WRITES_RING ? ws->nring : FG_WRITES_RING;
	char kind = 0;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(ws->ring[i], id) != 0)
			continue;
		if (ws->ring_kind[i] == 'e' && (!*dl || ws->ring_dl[i] < *dl))
			*dl = ws->ring_dl[i];
		if (!kind || ws->ring_kind[i] == 'x')
			kind = ws->ring_kind[i];
	}
	return kind;
}

bool fg_writes_add(struct fg_writes *ws, struct fg_write *w)
{
	uint64_t dl = 0;
	char early = told_before(ws, w->id, &dl);
	if (early == 'x')
		return false;
	if (early == 'e') {
		w->reask = true;
		clamp_deadline(w, dl);
	}
	HASH_ADD_STR(ws->table, id, w);
	w->registered = true;
	return true;
}

void fg_writes_remove(struct fg_writes *ws, struct fg_write *w)
{
	if (!w->registered)
		return;
	HASH_DEL(ws->table, w);
	w->registered = false;
}

struct fg_write *fg_writes_find(struct fg_writes *ws, const char *id)
{
	struct fg_write *w;
	HASH_FIND_STR(ws->table, id, w);
	return w;
}

/* 'x': the write's grant ended; 'e': its lease ends sooner than its
 * deadline was set for, by `dl` (monotonic ms) at the latest. */
static void tell(struct fg_writes *ws, const char *id, char kind, uint64_t dl)
{
	struct fg_write *w = fg_writes_find(ws, id);
	if (!w) {
		unsigned i = ws->nring % FG_WRITES_RING;
		fg_copy(ws->ring[i], sizeof(ws->ring[0]), id);
		ws->ring_kind[i] = kind;
		ws->ring_dl[i] = dl;
		ws->nring++;
		return;
	}
	if (kind == 'x') {
		w->released = true;
		/* not one more byte: the send gate and fg_writes_check() see
		 * a deadline in the past */
		w->deadline = 1;
	} else {
		clamp_deadline(w, dl);
		w->reask = true; /* fg_writes_check() asks at once */
	}
	fg_writes_kick(ws);
}

void fg_writes_abort(struct fg_writes *ws, const char *id)
{
	tell(ws, id, 'x', 1);
}

unsigned fg_writes_end_all(struct fg_writes *ws)
{
	unsigned n = 0;
	struct fg_write *w, *tmp;
	HASH_ITER(hh, ws->table, w, tmp) {
		w->stopped = true;
		tell(ws, w->id, 'x', 1);
		n++;
	}
	return n;
}

void fg_writes_reask(struct fg_writes *ws, const char *id, uint64_t dl)
{
	tell(ws, id, 'e', dl);
}

void fg_writes_recheck(struct fg_writes *ws)
{
	ws->recheck = true;
	fg_writes_kick(ws);
}

void fg_writes_kick(struct fg_writes *ws)
{
	if (ws->kick_ev)
		event_active(ws->kick_ev, EV_READ, 0);
}

bool fg_write_may_send(struct fg_write *w, uint64_t now)
{
	if (w->deadline && now >= w->deadline) {
		w->deadline_hit = true;
		return false;
	}
	return true;
}

long fg_writes_check(struct fg_writes *ws, uint64_t now)
{
	bool recheck = ws->recheck;
	ws->recheck = false;
	long next = 1000;
	struct fg_write *w, *tmp;
	/* An op may free any write, not only its own: a Redis call it sends
	 * may answer other calls at once (a connection dropped when the
	 * topology moved), and their callbacks may free the last reference
	 * of another write's transfer. So no cursor is kept across an op:
	 * after one, the walk starts again, skipping what it has seen. */
	uint64_t walk = ++ws->walk;
again:
	HASH_ITER(hh, ws->table, w, tmp) {
		if (w->walked == walk)
			continue;
		w->walked = walk;
		enum fg_write_stage st = ws->ops->stage(w);
		if (st == FG_WRITE_OVER)
			continue;
		/* A write not begun yet, or whose extension is in flight (it
		 * may have been answered before the change whose message was
		 * lost), is asked once it can be: when it begins, or when
		 * that extension is back. */
		if (recheck && (st == FG_WRITE_QUEUED || w->extending))
			w->reask = true;
		if (st == FG_WRITE_QUEUED) {
			/* curl takes it on this turn: look again right after */
			if (w->deadline)
				next = 1;
			continue;
		}
		if (w->deadline && now >= w->deadline && st == FG_WRITE_SENT &&
		    !w->grace) {
			/* Its last byte left before the deadline: the storage
			 * may be applying it now, and hanging up would answer
			 * "aborted" for a write that was applied. Its answer is
			 * awaited for the margin its record still covers; only
			 * then is it cut off. */
			w->grace = true;
			w->deadline = (w->released ? now : w->deadline) + ws->margin_ms;
		}
		uint64_t dl = w->deadline;
		bool ask = dl && !w->extending && !w->released && !w->grace &&
			   (recheck || w->reask ||
			    now + FG_WRITE_EXTEND_AHEAD_MS >= dl);
		if (ask) {
			w->extending = 1; /* pending: the extend op takes it over */
			w->reask = false;
		}
		if (dl && now >= dl) {
			w->deadline_hit = true;
			ws->ops->abort(w);
			goto again;
		}
		if (dl) {
			long in = (long)(dl - now);
			if (in > FG_WRITE_EXTEND_AHEAD_MS &&
			    in - FG_WRITE_EXTEND_AHEAD_MS < next)
				next = in - FG_WRITE_EXTEND_AHEAD_MS;
			else if (in < next)
				next = in;
		}
		if (ask) {
			ws->ops->extend(w, now);
			goto again;
		}
	}
	return next < 1 ? 1 : next;
}

void fg_write_extend_begin(struct fg_write *w, uint64_t now)
{
	w->extend_asked = now;
}

void fg_write_extend_sent(struct fg_write *w)
{
	w->extending++;
}

void fg_write_extend_end(struct fg_write *w)
{
	w->extending--; /* the pending mark fg_writes_check() set */
}

void fg_write_extended(struct fg_writes *ws, struct fg_write *w, int i,
		       enum fg_write_extension how, uint64_t ms)
{
	w->extending--;
	/* counted from when the call was sent, like the first deadline */
	if (how == FG_WRITE_EXT_GRANTED && w->deadline && !w->released) {
		w->mdeadline[i] = w->extend_asked + ms;
		w->deadline = least_deadline(w);
	} else if (how == FG_WRITE_EXT_ENDED && w->deadline) {
		/* the grant is over (a release whose message was lost, or an
		 * expiry), or its deadline passed while this call was on its
		 * way: not one more byte. A write whose last byte left before
		 * its deadline keeps the grace fg_writes_check() gave it: the
		 * storage may be applying it, and its record covers that. */
		if (!w->grace) {
			w->released = true;
			w->deadline = 1;
		}
	}
	fg_writes_kick(ws);
}
