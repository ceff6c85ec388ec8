/*
 * admitq.c - fenced writes waiting for older writes to end (admitq.h).
 *
 * Invariants:
 * - A waiting write is completed exactly once (finish()), and its
 *   connection, when parked, is resumed then and only then.
 * - It asks Redis one call at a time; a wake that comes meanwhile asks
 *   again once that call answered. No polling in between: it asks when a
 *   write of its lock ended ("w <lock>") or when the record it waits
 *   behind reaches its recorded end (its timer).
 * - It is freed when its last holder lets go (refs): the request (until
 *   fg_admitq_drop()), the loop while it is parked and not complete, and
 *   its admit call in flight.
 * - A write admitted for a client that left is finished at once in
 *   Redis, so the writes behind it need not wait for its record's end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "base/clock.h"
#include "proc/metrics.h"
#include "rt/rt.h"
#include "rt/park.h"
#include "proxy/admitq.h"

struct fg_admission {
	struct fg_admitq *aq;
	char name[FG_NAME_MAX + 1];
	uint64_t token;
	char write_id[FG_WAITER_ID_MAX];
	uint32_t margin_ms, longest_ms;

	enum fg_admission_result result;
	struct fg_admit admit;   /* the last admit reply */
	uint64_t asked_ms;       /* when the last admit call was sent */
	int refs;                /* the request's, the loop's while parked,
				    its admit call's while in flight */
	bool parked;             /* the loop holds it until it completes */
	bool asking;             /* an admit call is in flight */
	bool repoll;             /* woken while a call was in flight */
	struct fg_park park;
	struct fg_admission *prev, *next; /* aq->waiting */
};

struct fg_admitq {
	struct fg_loop *loop;
	fg_astore *as;           /* the loop's, lent; NULL once closed */
	struct fg_admission *waiting; /* parked, not complete; in park order */
	bool stopping;
};

/* One holder lets go; the last one frees. */
static void put(struct fg_admission *ad)
{
	if (--ad->refs > 0)
		return;
	fg_metrics_gauge_add(FG_GAUGE_WAIT_ADMIT, -1);
	free(ad);
}

/* Completes the write. Returns false if it was complete. */
static bool finish(struct fg_admission *ad, enum fg_admission_result res)
{
	if (ad->result != FG_ADMISSION_PENDING)
		return false;
	ad->result = res;
	/* off its socket and timer before the connection resumes */
	fg_park_resume(&ad->park);
	if (ad->parked) {
		ad->parked = false;
		DL_DELETE(ad->aq->waiting, ad);
		put(ad);
	}
	return true;
}

static void on_admit_reply(int err, const struct fg_admit *a, void *arg)
{
	struct fg_admission *ad = arg;
	/* the call holds the write until put() below, past finish() */
	if (err) {
		finish(ad, FG_ADMISSION_UNAVAIL);
	} else if (ad->result == FG_ADMISSION_PENDING) {
		ad->admit = *a;
		if (a->status == FG_ADMITTED)
			finish(ad, FG_ADMISSION_ADMITTED);
		else if (a->status != FG_ADMIT_WAIT)
			finish(ad, FG_ADMISSION_REFUSED);
		else /* a wake came meanwhile: at once */
			fg_park_arm(&ad->park, ad->repoll ? 0 : a->ms + 1);
		ad->repoll = false;
	} else if (a->status == FG_ADMITTED && ad->aq->as) {
		/* admitted for a client that left: let others go at once */
		fg_alock_finish(ad->aq->as, ad->name, ad->write_id, NULL, NULL);
	}
	ad->asking = false;
	put(ad);
}

static void ask(struct fg_admission *ad)
{
	if (ad->asking) {
		ad->repoll = true;
		return;
	}
	fg_astore *as = ad->aq->as;
	ad->asked_ms = fg_clock_ms();
	/* the call's reference is taken before it is sent: an answer may
	 * come back before the send returns */
	ad->asking = true;
	ad->refs++;
	if (!as || fg_alock_admit(as, ad->name, ad->token, ad->write_id,
				  ad->margin_ms, ad->longest_ms, on_admit_reply,
				  ad) != FG_OK) {
		ad->asking = false;
		ad->refs--;
		finish(ad, FG_ADMISSION_UNAVAIL);
	}
}

static void on_timer(void *arg)
{
	ask(arg);
}

static void on_client_gone(void *arg)
{
	finish(arg, FG_ADMISSION_GONE);
}

/* ---- the request's side ---------------------------------------------- */

struct fg_admission *fg_admitq_new(struct fg_admitq *aq, const char *name,
				   uint64_t token, const char *write_id,
				   uint32_t margin_ms, uint32_t longest_ms)
{
	/* owned by its holders (refs) */
	struct fg_admission *ad = calloc(1, sizeof(*ad));
	if (!ad)
		return NULL;
	ad->aq = aq;
	snprintf(ad->name, sizeof(ad->name), "%s", name);
	ad->token = token;
	snprintf(ad->write_id, sizeof(ad->write_id), "%s", write_id);
	ad->margin_ms = margin_ms;
	ad->longest_ms = longest_ms;
	ad->refs = 1;
	fg_metrics_gauge_add(FG_GAUGE_WAIT_ADMIT, 1);
	return ad;
}

bool fg_admitq_park(struct fg_admission *ad, struct MHD_Connection *c,
		    int64_t wake_in_ms)
{
	struct fg_admitq *aq = ad->aq;
	if (ad->result != FG_ADMISSION_PENDING)
		return false;
	if (aq->stopping) {
		finish(ad, FG_ADMISSION_STOPPING);
		return false;
	}
	if (fg_park_suspend(&ad->park, aq->loop, c, on_client_gone, on_timer,
			    ad) != 0) {
		finish(ad, FG_ADMISSION_UNAVAIL);
		return false;
	}
	ad->parked = true;
	ad->refs++;
	DL_APPEND(aq->waiting, ad);
	fg_park_arm(&ad->park, wake_in_ms + 1);
	return true;
}

enum fg_admission_result fg_admitq_result(const struct fg_admission *ad,
					  struct fg_admit *out,
					  uint64_t *deadline_at)
{
	*out = ad->admit;
	*deadline_at = ad->asked_ms + (uint64_t)(ad->admit.ms > 0 ? ad->admit.ms : 0);
	return ad->result;
}

void fg_admitq_drop(struct fg_admission *ad)
{
	if (ad)
		put(ad);
}

/* ---- the loop's side ------------------------------------------------- */

void fg_admitq_wake(struct fg_admitq *aq, const char *name)
{
	struct fg_admission *ad, *tmp;
	DL_FOREACH_SAFE(aq->waiting, ad, tmp)
		if (strcmp(ad->name, name) == 0)
			ask(ad);
}

void fg_admitq_resync(struct fg_admitq *aq)
{
	struct fg_admission *ad, *tmp;
	DL_FOREACH_SAFE(aq->waiting, ad, tmp)
		ask(ad);
}

struct fg_admitq *fg_admitq_create(struct fg_loop *loop, fg_astore *as)
{
	struct fg_admitq *aq = calloc(1, sizeof(*aq));
	if (!aq)
		return NULL;
	aq->loop = loop;
	aq->as = as;
	return aq;
}

void fg_admitq_store_closed(struct fg_admitq *aq)
{
	aq->as = NULL;
}

void fg_admitq_stop(struct fg_admitq *aq)
{
	if (!aq)
		return;
	aq->stopping = true;
	struct fg_admission *ad, *tmp;
	DL_FOREACH_SAFE(aq->waiting, ad, tmp)
		finish(ad, FG_ADMISSION_STOPPING);
}

void fg_admitq_destroy(struct fg_admitq *aq)
{
	if (!aq)
		return;
	fg_admitq_stop(aq);
	free(aq);
}
