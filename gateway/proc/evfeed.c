/*
 * evfeed.c - the follower and the history thread of the lock event
 * stream (evfeed.h).
 *
 * The follower reads what is appended with fg_evtail_next(), a second at
 * most per call so that a stop is seen within it; it makes each event's
 * item (its JSON, once) outside the mutex, pushes the batch into the ring
 * under it, then tells every loop. Redis down: it waits RETRY_MIN_MS,
 * doubling to RETRY_MAX_MS, and asks again from where it was.
 *
 * History (what the ring does not hold: a reader from the oldest
 * retained, or after an id older than the ring's start) is a blocking
 * XRANGE (fg_events_range()), so it never runs on a loop: the loops hand
 * jobs to one history thread with its own store connection, through a
 * queue of at most FG_EVFEED_JOBS_MAX jobs; a job done goes on its loop's
 * list and the loop is told. One read is FG_EVFEED_SCAN entries at most;
 * a job that found nothing under its prefix reads on, page after page,
 * up to FG_EVFEED_SCAN_MAX entries or FG_EVFEED_SCAN_MS, so a job's time
 * and memory are bounded, and a reader that wants more asks again.
 *
 * Nobody reading, nobody read: the follower reads only while some reader
 * is listed (fg_evfeed_reader()) or one left less than LINGER_MS ago.
 * Then it lets its connection go and the ring is emptied; the first
 * reader to come wakes it, and it starts again from the stream's end. A
 * gateway nobody watches thus spends neither its own CPU nor Redis' on
 * every event of every lock. A history read waits (WAIT_LIVE_MS at most,
 * a Redis that does not answer) until the follower has its place, so
 * that what a reader reads from Redis meets what the ring holds: nothing
 * falls between the end of its history and the ring's start.
 *
 * Invariants: the ring, the queue and the done lists are touched only
 * under `mu`; an item in the ring is read only under it (readers copy
 * out); a job is the history thread's from its submit to its place on a
 * done list, and the loop's before and after; the threads are joined
 * before any loop is freed, as they tell the loops.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/evring.h"
#include "base/log.h"
#include "proc/evfeed.h"

#define BLOCK_MS 1000
#define LINGER_MS 10000   /* the follower reads on after the last reader */
#define WAIT_LIVE_MS 2000 /* a history read waits for the follower */
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000
/* Items one call of the follower made before they go into the ring: a
 * batch is pushed under one lock. */
#define BATCH 256

struct fg_evfeed {
	const struct fg_store_opts *opts;
	unsigned nloops;
	uint64_t retain_ms;
	fg_evfeed_tell *tell;
	void *arg;

	pthread_mutex_t mu;
	pthread_cond_t cond;            /* a job came, or the stop */
	bool stopping;
	struct fg_evring ring;
	struct fg_evjob *queue, **queue_tail;
	unsigned queued;
	struct fg_evjob **done;         /* per loop */

	pthread_t follower, history;
	bool follower_on, history_on;

	unsigned readers;               /* listed now (fg_evfeed_reader()) */
	uint64_t want_until;            /* fg_clock_ms(): the last one left */
	bool live;                      /* the follower has its place */
};

void fg_evjob_free(struct fg_evjob *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++)
		free(j->items[i]);
	free(j->items);
	free(j);
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t fg_evfeed_min_ms(const struct fg_evfeed *f)
{
	uint64_t now = wall_ms();
	return now > f->retain_ms ? now - f->retain_ms : 0;
}

/* Sleeps ms, or until the stop. False once stopping. */
static bool nap(struct fg_evfeed *f, unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->mu);
	while (!f->stopping &&
	       pthread_cond_timedwait(&f->cond, &f->mu, &until) != ETIMEDOUT)
		;
	bool go_on = !f->stopping;
	pthread_mutex_unlock(&f->mu);
	return go_on;
}

static bool stopping(struct fg_evfeed *f)
{
	pthread_mutex_lock(&f->mu);
	bool s = f->stopping;
	pthread_mutex_unlock(&f->mu);
	return s;
}

/* Is anyone reading, or did one leave a moment ago? Under mu. */
static bool wanted(const struct fg_evfeed *f)
{
	return f->readers > 0 || fg_clock_ms() < f->want_until;
}

/* Nobody wants the events: the follower lets Redis go, the ring is
 * emptied, and it sleeps until a reader comes. False once stopping. */
static bool rest(struct fg_evfeed *f, fg_evtail **t)
{
	pthread_mutex_lock(&f->mu);
	bool idle = !f->stopping && !wanted(f);
	if (idle) {
		f->live = false;
		fg_evring_reset(&f->ring);
	}
	pthread_mutex_unlock(&f->mu);
	if (!idle)
		return !stopping(f);
	fg_evtail_destroy(*t);
	*t = NULL;
	pthread_mutex_lock(&f->mu);
	while (!f->stopping && !wanted(f))
		pthread_cond_wait(&f->cond, &f->mu);
	bool go_on = !f->stopping;
	pthread_mutex_unlock(&f->mu);
	return go_on;
}

void fg_evfeed_reader(struct fg_evfeed *f, bool comes)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	if (comes) {
		f->readers++;
		pthread_cond_broadcast(&f->cond);
	} else if (f->readers > 0 && --f->readers == 0) {
		f->want_until = fg_clock_ms() + LINGER_MS;
	}
	pthread_mutex_unlock(&f->mu);
}

/* ---- the follower ------------------------------------------------------ */

struct batch {
	struct fg_evitem *it[BATCH];
	size_t n;
	struct fg_evfeed *f;
	bool pushed;
};

static void push_batch(struct batch *b)
{
	if (b->n == 0)
		return;
	pthread_mutex_lock(&b->f->mu);
	for (size_t i = 0; i < b->n; i++)
		fg_evring_push(&b->f->ring, b->it[i]);
	pthread_mutex_unlock(&b->f->mu);
	b->n = 0;
	b->pushed = true;
}

static int on_tail(void *arg, const struct fg_event *e)
{
	struct batch *b = arg;
	struct fg_evitem *it = fg_evitem_make(e);
	if (!it) {
		fg_log_warn("events: event %s could not be kept (out of memory, "
			    "or an id that is not one); readers will not see it",
			    e->id);
		return 0;
	}
	b->it[b->n++] = it;
	if (b->n == BATCH)
		push_batch(b);
	return 0;
}

/* Where the follower started, once it reached Redis: a reader after it
 * finds all it needs in the ring (the first event read says so too, if
 * it came first); from then on the follower has its place. */
static void start_at(struct fg_evfeed *f, const fg_evtail *t)
{
	struct fg_ev_cursor from;
	fg_evtail_position(t, &from);
	pthread_mutex_lock(&f->mu);
	fg_evring_start(&f->ring, &from);
	if (f->ring.base.set && !f->live) {
		f->live = true;
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&f->mu);
}

static void *follower_main(void *arg)
{
	struct fg_evfeed *f = arg;
	fg_evtail *t = NULL;
	bool fresh = true;
	unsigned retry = RETRY_MIN_MS;
	bool said = false;

	while (rest(f, &t)) {
		if (!t)
			fresh = true;
		if (!t && !(t = fg_evtail_create(f->opts))) {
			if (!nap(f, retry))
				break;
			continue;
		}
		struct batch b = { .f = f };
		/* a new tail's first read does not block: it takes its place
		 * at once, and the history reads waiting for it go on */
		int n = fg_evtail_next(t, fresh ? 0 : BLOCK_MS, on_tail, &b);
		if (n >= 0)
			fresh = false;
		push_batch(&b);
		if (n >= 0)
			start_at(f, t);
		if (b.pushed)
			f->tell(f->arg, -1);
		if (n >= 0) {
			if (said)
				fg_log_info("events: reading the event stream again");
			said = false;
			retry = RETRY_MIN_MS;
			continue;
		}
		if (!said)
			fg_log_warn("events: cannot read the event stream (%s); "
				    "asking again", fg_strerror(n));
		said = true;
		if (!nap(f, retry))
			break;
		retry = retry * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry * 2;
	}
	fg_evtail_destroy(t);
	return NULL;
}

/* ---- the history thread ------------------------------------------------ */

struct range {
	struct fg_evjob *j;
	size_t cap;
	int err;
	bool stopped;
};

static int on_range(void *arg, const struct fg_event *e)
{
	struct range *r = arg;
	struct fg_evjob *j = r->j;
	struct fg_ev_cursor cur;
	if (fg_event_id_parse(e->id, &cur) != 0)
		return 0; /* not one of ours: looked past */
	j->seen++;
	j->next = cur;
	j->next.set = true;
	if (strncmp(e->lock ? e->lock : "", j->prefix, j->prefix_len) != 0)
		return 0;
	if (j->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct fg_evitem **items = realloc(j->items, cap * sizeof(*items));
		if (!items) {
			r->err = FG_ENOMEM;
			return 1;
		}
		j->items = items;
		r->cap = cap;
	}
	struct fg_evitem *it = fg_evitem_make(e);
	if (!it) {
		r->err = FG_ENOMEM;
		return 1;
	}
	j->items[j->n++] = it;
	if (j->n >= j->limit) {
		r->stopped = true;
		return 1;
	}
	return 0;
}

static void run_job(struct fg_evfeed *f, fg_store *st, struct fg_evjob *j)
{
	j->next = j->after;
	if (atomic_load(&j->cancelled))
		return;
	if (!st) {
		j->err = FG_EUNAVAIL;
		return;
	}
	struct range r = { .j = j };
	uint64_t t0 = fg_clock_ms();
	/* Page after page until something under the prefix is found, the
	 * stream's end, or the budget: a prefix whose events come after a
	 * long run of other locks' is answered with them, not with an empty
	 * page and a `next` to follow. */
	for (;;) {
		struct fg_ev_cursor from = j->next, next = j->next;
		unsigned seen = j->seen;
		bool gap = false;
		int err = fg_events_range(st, from.set ? &from : NULL, j->scan,
					  fg_evfeed_min_ms(f), on_range, &r,
					  &next, &gap);
		j->err = err ? err : r.err;
		j->gap |= gap;
		/* nothing looked at: where the store says it is (entries too
		 * old to show were passed) */
		if (j->seen == seen && next.set)
			j->next = next;
		j->caught_up = !r.stopped && j->seen - seen < j->scan;
		if (j->err || j->caught_up || r.stopped || j->n > 0 ||
		    j->seen >= FG_EVFEED_SCAN_MAX ||
		    fg_clock_ms() - t0 >= FG_EVFEED_SCAN_MS ||
		    atomic_load(&j->cancelled))
			break;
	}
}

static void *history_main(void *arg)
{
	struct fg_evfeed *f = arg;
	fg_store *st = fg_store_create(f->opts);

	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->stopping && !f->queue)
			pthread_cond_wait(&f->cond, &f->mu);
		if (f->stopping)
			break;
		struct fg_evjob *j = f->queue;
		f->queue = j->link;
		if (!f->queue)
			f->queue_tail = &f->queue;
		f->queued--;
		/* the follower first has its place (bounded: a Redis that
		 * does not answer leaves it without one) */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += WAIT_LIVE_MS / 1000;
		while (!f->stopping && !f->live &&
		       pthread_cond_timedwait(&f->cond, &f->mu, &until) != ETIMEDOUT)
			;
		bool live = f->live;
		pthread_mutex_unlock(&f->mu);

		/* without the follower's place, what the reader reads could
		 * not be joined to what it reads next: it asks again */
		if (live) {
			run_job(f, st, j);
		} else {
			j->next = j->after;
			j->err = FG_EUNAVAIL;
		}

		pthread_mutex_lock(&f->mu);
		j->link = f->done[j->loop];
		f->done[j->loop] = j;
		unsigned loop = j->loop;
		pthread_mutex_unlock(&f->mu);
		f->tell(f->arg, (int)loop);
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	fg_store_destroy(st);
	return NULL;
}

/* ---- life cycle -------------------------------------------------------- */

struct fg_evfeed *fg_evfeed_create(const struct fg_store_opts *opts,
				   unsigned nloops, uint64_t retain_ms,
				   fg_evfeed_tell *tell, void *arg)
{
	struct fg_evfeed *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->opts = opts;
	f->nloops = nloops;
	f->retain_ms = retain_ms;
	f->tell = tell;
	f->arg = arg;
	f->queue_tail = &f->queue;
	f->done = calloc(nloops ? nloops : 1, sizeof(*f->done));
	if (!f->done || fg_evring_init(&f->ring, FG_EVFEED_RING) != 0)
		goto error_feed;
	if (pthread_mutex_init(&f->mu, NULL) != 0)
		goto error_ring;
	if (pthread_cond_init(&f->cond, NULL) != 0)
		goto error_mutex;
	return f;

error_mutex:
	pthread_mutex_destroy(&f->mu);
error_ring:
	fg_evring_finish(&f->ring);
error_feed:
	free(f->done);
	free(f);
	return NULL;
}

int fg_evfeed_start(struct fg_evfeed *f)
{
	if (pthread_create(&f->follower, NULL, follower_main, f) != 0)
		return -1;
	f->follower_on = true;
	if (pthread_create(&f->history, NULL, history_main, f) != 0)
		return -1; /* fg_evfeed_stop() joins the follower */
	f->history_on = true;
	return 0;
}

void fg_evfeed_ask_stop(struct fg_evfeed *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
}

void fg_evfeed_let_go(struct fg_evfeed *f)
{
	if (!f)
		return;
	fg_evfeed_ask_stop(f);
	if (f->follower_on)
		pthread_detach(f->follower);
	if (f->history_on)
		pthread_detach(f->history);
	f->follower_on = f->history_on = false;
}

void fg_evfeed_stop(struct fg_evfeed *f)
{
	if (!f)
		return;
	fg_evfeed_ask_stop(f);
	if (f->follower_on)
		pthread_join(f->follower, NULL);
	if (f->history_on)
		pthread_join(f->history, NULL);
	f->follower_on = f->history_on = false;
}

static void free_list(struct fg_evjob *j)
{
	while (j) {
		struct fg_evjob *next = j->link;
		fg_evjob_free(j);
		j = next;
	}
}

void fg_evfeed_destroy(struct fg_evfeed *f)
{
	if (!f)
		return;
	free_list(f->queue);
	for (unsigned i = 0; i < f->nloops; i++)
		free_list(f->done[i]);
	free(f->done);
	fg_evring_finish(&f->ring);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* ---- what the loops call ------------------------------------------------ */

int fg_evfeed_submit(struct fg_evfeed *f, struct fg_evjob *j)
{
	int rc = -1;
	pthread_mutex_lock(&f->mu);
	if (!f->stopping && f->queued < FG_EVFEED_JOBS_MAX && j->loop < f->nloops) {
		j->first = f->ring.first;
		j->link = NULL;
		*f->queue_tail = j;
		f->queue_tail = &j->link;
		f->queued++;
		pthread_cond_broadcast(&f->cond);
		rc = 0;
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}

struct fg_evjob *fg_evfeed_done(struct fg_evfeed *f, unsigned loop)
{
	if (loop >= f->nloops)
		return NULL;
	pthread_mutex_lock(&f->mu);
	struct fg_evjob *j = f->done[loop];
	f->done[loop] = NULL;
	pthread_mutex_unlock(&f->mu);
	return j;
}

bool fg_evfeed_seek(struct fg_evfeed *f, const struct fg_ev_cursor *after,
		    bool must_cover, uint64_t first, uint64_t *pos)
{
	pthread_mutex_lock(&f->mu);
	bool covers = fg_evring_covers(&f->ring, after);
	bool ok = covers || (!must_cover && f->ring.first == first);
	if (ok)
		*pos = fg_evring_seek(&f->ring, after);
	pthread_mutex_unlock(&f->mu);
	return ok;
}

bool fg_evfeed_read(struct fg_evfeed *f, uint64_t *pos, fg_evfeed_visit *visit,
		    void *arg)
{
	pthread_mutex_lock(&f->mu);
	bool held = *pos >= f->ring.first;
	if (held) {
		while (*pos < f->ring.next) {
			const struct fg_evitem *it = fg_evring_get(&f->ring, *pos);
			(*pos)++;
			if (!visit(arg, it))
				break;
		}
	}
	pthread_mutex_unlock(&f->mu);
	return held;
}
