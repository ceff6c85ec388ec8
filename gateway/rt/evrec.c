/*
 * evrec.c - a loop's event recorder (evrec.h): the turn's buffer sent
 * from an event made active when its first event came (it runs after the
 * callbacks of the turn that are already active, so one turn's events go
 * out together, and the connection writes them with the turn's other
 * commands), and the folds ended by one timer, armed for the earliest
 * fold's second.
 *
 * Invariant: an event leaves this file only through fg_aevents_add() on
 * the loop's own connection; one that cannot is counted dropped here.
 */
#include <stdlib.h>
#include <sys/time.h>

#include <event2/event.h>

#include "base/clock.h"
#include "base/text.h"
#include "proc/metrics.h"
#include "rt/evrec.h"

struct fg_evrec {
	struct fg_loop *loop;
	struct event *turn_end;   /* active while buf holds events */
	struct event *fold_timer; /* the earliest fold's second ends */
	uint64_t fold_at;         /* what fold_timer is armed for; 0: not */
	uint64_t failed_seen;     /* fg_aevents_failed() counted so far */
	struct fg_evbuf buf;
	struct fg_evfold fold;
};

static void send_item(void *arg, const struct fg_evnote *e)
{
	struct fg_evrec *r = arg;
	struct fg_event_rec rec = {
		.kind = e->kind,
		.lock = e->lock,
		.principal = e->principal,
		.owner = e->owner,
		.client = e->client,
		.detail = e->detail,
		.token = e->token,
		.has_token = e->has_token,
	};
	if (!r->loop->as || fg_aevents_add(r->loop->as, &rec) != FG_OK)
		fg_metrics_events_dropped(1);
}

/* The appends Redis did not take since the last look. */
static void count_failed(struct fg_evrec *r)
{
	if (!r->loop->as)
		return;
	uint64_t failed = fg_aevents_failed(r->loop->as);
	if (failed > r->failed_seen)
		fg_metrics_events_dropped(failed - r->failed_seen);
	r->failed_seen = failed;
}

static void send_turn(struct fg_evrec *r)
{
	for (unsigned i = 0; i < r->buf.n; i++)
		send_item(r, &r->buf.item[i]);
	fg_evbuf_clear(&r->buf);
	count_failed(r);
}

static void on_turn_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_turn(arg);
}

static void arm_folds(struct fg_evrec *r)
{
	uint64_t next = fg_evfold_next_ms(&r->fold);
	if (!next || (r->fold_at && r->fold_at <= next))
		return;
	uint64_t now = fg_clock_ms();
	uint64_t in = next > now ? next - now : 0;
	struct timeval tv = { (time_t)(in / 1000), (suseconds_t)((in % 1000) * 1000) };
	r->fold_at = next;
	evtimer_add(r->fold_timer, &tv);
}

static void on_fold_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_evrec *r = arg;
	(void)fd;
	(void)what;
	r->fold_at = 0;
	fg_evfold_expire(&r->fold, fg_clock_ms(), send_item, r);
	count_failed(r);
	arm_folds(r);
}

/* A place in the turn's buffer, the turn's end asked for; NULL (the
 * event dropped, counted) when it is full. */
static struct fg_evnote *turn_item(struct fg_evrec *r)
{
	struct fg_evnote *e = fg_evbuf_add(&r->buf);
	if (!e) {
		fg_metrics_events_dropped(1);
		return NULL;
	}
	if (r->buf.n == 1)
		event_active(r->turn_end, EV_READ, 0);
	return e;
}

struct fg_evrec *fg_evrec_create(struct fg_loop *loop)
{
	/* owned by the loop: fg_evrec_destroy() frees it */
	struct fg_evrec *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->loop = loop;
	r->turn_end = event_new(loop->base, -1, 0, on_turn_end, r);
	if (!r->turn_end)
		goto error_turn;
	r->fold_timer = evtimer_new(loop->base, on_fold_timer, r);
	if (!r->fold_timer)
		goto error_timer;
	fg_evfold_init(&r->fold);
	return r;

error_timer:
	event_free(r->turn_end);
error_turn:
	free(r);
	return NULL;
}

void fg_evrec_destroy(struct fg_evrec *r)
{
	if (!r)
		return;
	event_free(r->turn_end);
	event_free(r->fold_timer);
	free(r);
}

void fg_evrec_lease_lost(struct fg_evrec *r, const char *lock,
			 const char *principal, const char *client)
{
	if (!r)
		return;
	struct fg_evnote *e = turn_item(r);
	if (!e)
		return;
	e->kind = "lease_lost";
	fg_copy(e->lock, sizeof(e->lock), lock ? lock : "");
	fg_copy(e->principal, sizeof(e->principal), principal ? principal : "");
	fg_copy(e->client, sizeof(e->client), client ? client : "");
}

void fg_evrec_refused(struct fg_evrec *r, const struct fg_evrefusal *x)
{
	if (!r)
		return;
	struct fg_evnote first;
	switch (fg_evfold_refused(&r->fold, fg_clock_ms(), x, &first)) {
	case FG_EVFOLD_FIRST: {
		struct fg_evnote *e = turn_item(r);
		if (e)
			*e = first;
		break;
	}
	case FG_EVFOLD_FOLDED:
		break;
	case FG_EVFOLD_FULL:
	default:
		fg_metrics_events_dropped(1);
		break;
	}
	arm_folds(r);
}

void fg_evrec_flush(struct fg_evrec *r)
{
	if (!r)
		return;
	event_del(r->turn_end);
	send_turn(r);
	evtimer_del(r->fold_timer);
	r->fold_at = 0;
	fg_evfold_expire(&r->fold, UINT64_MAX, send_item, r);
	count_failed(r);
}
