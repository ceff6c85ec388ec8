/*
 * astore-giveback.c - give-back jobs: an answer that was lost leaves
 * nothing behind.
 *
 * An acquire with a fresh lease (or a waiter's confirmation) that may have
 * run but whose caller is told it failed becomes a give-back job, sent
 * until Redis answers it (giveback.lua: idempotent, and it makes the call
 * itself a no-op should it reach Redis later). A renewal or a re-entry is
 * sent with an undo id (fg__gb_undo_id()) for the same end: one that fails
 * once sent becomes a job that puts back what it did (its lease stays the
 * client's). The gateway adds jobs of its own for what it knows nobody
 * received (fg_alock_give_back(), fg_alock_undo()).
 *
 * Invariants: a job stays in as->gbs until Redis answered its call, and
 * is sent again every GIVEBACK_EVERY_MS until then, one call in flight at
 * a time; the observer hears of each job once, when it is answered. The
 * happy path pays nothing for this but the id and the copy of the call's
 * names: no call is added to one that succeeds. Jobs a store still holds
 * when it is destroyed are dropped: their leases run out by themselves.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/rand.h>

#include "astore-private.h"

#define GIVEBACK_EVERY_MS 200    /* a give-back Redis has not answered */
/* How long a given-back lease stays a no-op: past any delay a call can
 * still meet on its way into Redis (a stalled or paused server reads a
 * dropped connection's last bytes when it wakes, within milliseconds of a
 * give-back sent then; this is a wide bound, and costs one hash field). */
#define GIVEBACK_REMEMBER_MS 60000
#define GIVEBACK_MAX 100000      /* jobs kept per loop; beyond, leases expire */

/* A lease to give back, until Redis answers (fg_alock_give_back()): one
 * allocation, as->gbs', freed once Redis answered it or with the store. */
struct fg__giveback {
	struct fg__giveback *next, *prev;
	enum fg_giveback_reason why;
	int inflight;
	int ran;       /* an undo of a re-entry known to have run */
	const char *lease, *wid, *uid; /* into name's allocation */
	char name[];   /* "<name>\0<lease>\0<waiter id>\0<undo id>\0" */
};

static void on_gb_timer(evutil_socket_t fd, short what, void *arg);

int fg__giveback_init(fg_astore *as)
{
	unsigned char rb[8];
	if (RAND_bytes(rb, sizeof(rb)) != 1)
		return FG_EINVAL;
	for (size_t i = 0; i < sizeof(rb); i++)
		snprintf(as->uid_pfx + 2 * i, 3, "%02x", rb[i]);
	as->gb_timer = evtimer_new(as->base, on_gb_timer, as);
	return as->gb_timer ? FG_OK : FG_ENOMEM;
}

void fg__giveback_finish(fg_astore *as)
{
	/* what is not given back by now runs out with its lease */
	if (as->gb_timer)
		event_free(as->gb_timer);
	while (as->gbs) {
		struct fg__giveback *gb = as->gbs;
		as->gbs = gb->next;
		free(gb);
	}
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
			 (extra ? sizeof(struct fg__giveback) : 0));
	if (!p)
		return NULL;
	*off = extra;
	memcpy(p + extra, name, nl);
	memcpy(p + extra + nl, lease, ll);
	memcpy(p + extra + nl + ll, wid ? wid : "", wl);
	memcpy(p + extra + nl + ll + wl, uid ? uid : "", ul);
	return p;
}

int fg__gb_fresh(struct fg__aop *op, const char *name, const char *lease,
		 const char *wid)
{
	size_t off;
	/* freed with op */
	op->gb = four(name, lease, wid, NULL, 0, &off);
	return op->gb ? FG_OK : FG_ENOMEM;
}

int fg__gb_undo_id(fg_astore *as, struct fg__aop *op, const char *name,
		   const char *lease)
{
	snprintf(op->uid, sizeof(op->uid), "%s.%llu", as->uid_pfx,
		 (unsigned long long)++as->uid_seq);
	size_t off;
	op->gb = four(name, lease, NULL, op->uid, 0, &off); /* freed with op */
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
	/* as->gbs', freed once Redis answered it (on_given_back()) or
	 * with the store */
	char *p = four(name, lease, waiter_id, uid,
		       offsetof(struct fg__giveback, name), &off);
	if (!p)
		return FG_ENOMEM;
	struct fg__giveback *gb = (struct fg__giveback *)(void *)p;
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

/* A job's call: the job it sends, freed by its answer (or at once when it
 * could not be sent). */
struct gbcall {
	fg_astore *as;
	struct fg__giveback *gb;
};

static void on_given_back(int err, const struct fg_grant *g, void *arg)
{
	struct gbcall *c = arg;
	fg_astore *as = c->as;
	struct fg__giveback *gb = c->gb;
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
	for (struct fg__giveback *gb = as->gbs; gb && !as->closing; gb = gb->next) {
		if (gb->inflight)
			continue;
		struct gbcall *c = malloc(sizeof(*c));
		struct fg__aop *op = c ? fg__aop_grant(on_given_back, c) : NULL;
		if (!op) {
			free(c);
			break;
		}
		c->as = as;
		c->gb = gb;
		struct fg__ev ev;
		fg__build_giveback(&op->call, gb->name, gb->lease, gb->wid,
				   *gb->uid ? gb->uid : NULL, gb->ran,
				   GIVEBACK_REMEMBER_MS,
				   fg_giveback_reason_name(gb->why), as->idle,
				   fg__ev_of(as, &ev));
		if (fg__submit(as, op) == FG_OK)
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
	for (struct fg__giveback *gb = as->gbs; gb && !waiting; gb = gb->next)
		waiting = !gb->inflight;
	if (waiting) {
		struct timeval tv = { 0, GIVEBACK_EVERY_MS * 1000 };
		evtimer_add(as->gb_timer, &tv);
	}
}

/* A call that failed after it was sent may have granted or queued its
 * fresh lease: undo that (a WAIT that fell short already released it). */
void fg__gb_failed(struct fg__aop *op, int err)
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
