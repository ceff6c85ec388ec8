/*
 * evfeed.h - the process's view of the lock event stream (contract
 * v1.5): one follower thread that reads what is appended and keeps the
 * newest events in a ring, and one history thread that reads older ones
 * for the loops. Private to the gateway.
 *
 * The loops never call Redis for events themselves: a reader that is
 * live reads the ring, under the feed's mutex; a reader that needs what
 * the ring does not hold hands a job (struct fg_evjob) to the history
 * thread and is told, through its loop, when it is done. Idle readers
 * cost no Redis call.
 */
#ifndef FENCEGATE_EVFEED_H
#define FENCEGATE_EVFEED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "base/evtext.h"

/* Events the ring holds: about 2 MB at 500 bytes an event. */
#define FG_EVFEED_RING 4096
/* History reads waiting for the history thread, all loops together; one
 * more is refused (503) rather than queued. */
#define FG_EVFEED_JOBS_MAX 64
/* Entries one page of a history read looks at, at most. */
#define FG_EVFEED_SCAN 1000
/* One history read goes on page after page while it has found nothing
 * under its prefix: at most this many entries, and this long (the
 * history thread serves every reader in turn). */
#define FG_EVFEED_SCAN_MAX 100000
#define FG_EVFEED_SCAN_MS 500

struct fg_evfeed;

/** Tells loop `loop` (-1: every loop) that the ring grew or a job of its
 *  is done. Called on the feed's threads; must not block. */
typedef void fg_evfeed_tell(void *arg, int loop);

/* A history read: filled by the loop that asks (the "in" part), read by
 * it again once the feed handed it back (fg_evfeed_done()). Between
 * fg_evfeed_submit() and then, only the history thread touches it, but
 * for `cancelled` and `owner`. */
struct fg_evjob {
	/* in */
	struct fg_ev_cursor after;   /* not set: from the oldest retained */
	char prefix[FG_NAME_MAX + 1];
	size_t prefix_len;
	unsigned scan;               /* entries a page looks at, at most */
	unsigned limit;              /* events under prefix to keep, at most */
	unsigned loop;               /* whose it is */
	void *owner;                 /* the loop's; never read by the feed */
	atomic_bool cancelled;       /* its reader left: nothing is read */
	uint64_t first;              /* the ring's first number when asked */
	/* out */
	int err;                     /* FG_OK or lockcore's error */
	bool gap;                    /* `after` was older than retained */
	bool caught_up;              /* it read up to the stream's end */
	unsigned seen;               /* entries looked at */
	struct fg_ev_cursor next;    /* the last entry looked at (`after`
					when none) */
	struct fg_evitem **items;    /* the events kept, oldest first; owned */
	size_t n;
	struct fg_evjob *link;       /* the feed's lists */
};

/** Frees a job and its items. Accepts NULL. */
void fg_evjob_free(struct fg_evjob *j);

/**
 * A feed for the store `opts` names (outliving it), whose loops 0..nloops
 * are told through tell(arg, ...); retain_ms: no event older than this is
 * shown. Its threads are not started. NULL when out of memory.
 */
struct fg_evfeed *fg_evfeed_create(const struct fg_store_opts *opts,
				   unsigned nloops, uint64_t retain_ms,
				   fg_evfeed_tell *tell, void *arg);

/** Starts the follower and the history thread. 0 or -1. */
int fg_evfeed_start(struct fg_evfeed *f);

/** From any thread: the threads end soon (the follower within its
 *  block, about a second); returns at once. */
void fg_evfeed_ask_stop(struct fg_evfeed *f);

/** At an exit that does not wait (a second stop signal): the threads
 *  are asked to end and are not waited for. Accepts NULL. */
void fg_evfeed_let_go(struct fg_evfeed *f);

/** Stops the threads and joins them. After every loop stopped, before
 *  any is freed (the threads tell the loops). Accepts NULL. */
void fg_evfeed_stop(struct fg_evfeed *f);

/** Frees the feed, its ring and every job it still holds (their owners
 *  are never told). After fg_evfeed_stop(). Accepts NULL. */
void fg_evfeed_destroy(struct fg_evfeed *f);

/** The oldest an event shown may be, ms since the epoch (Redis' clock
 *  and this host's are taken to agree within the retention). */
uint64_t fg_evfeed_min_ms(const struct fg_evfeed *f);

/** A reader is listed (comes) or leaves, on any loop: the follower
 *  reads while one is, and LINGER_MS after the last left. Accepts NULL. */
void fg_evfeed_reader(struct fg_evfeed *f, bool comes);

/** Hands a job to the history thread. 0, or -1 when FG_EVFEED_JOBS_MAX
 *  wait already or the feed stops (the caller keeps the job). Any loop. */
int fg_evfeed_submit(struct fg_evfeed *f, struct fg_evjob *j);

/** The jobs of `loop` done since its last call (linked by `link`), now
 *  the caller's. */
struct fg_evjob *fg_evfeed_done(struct fg_evfeed *f, unsigned loop);

/**
 * Where a reader that has read up to `after` goes on in the ring: *pos
 * the number of the first item after it. With must_cover, false when
 * the ring may not hold all of what follows `after` (the reader then
 * reads history first); without, false only when items were pushed out
 * since number `first` (a history read's fg_evjob.first) was the ring's
 * first and the ring does not cover `after`.
 */
bool fg_evfeed_seek(struct fg_evfeed *f, const struct fg_ev_cursor *after,
		    bool must_cover, uint64_t first, uint64_t *pos);

/** Called for each item read, under the feed's mutex: copy what is kept
 *  of it, quickly. False: read no more. */
typedef bool fg_evfeed_visit(void *arg, const struct fg_evitem *it);

/**
 * Hands the items numbered from *pos on to visit(arg, ...) in order, and
 * moves *pos past those read. False when *pos was pushed out of the ring
 * already (nothing is read: the reader lost its place); true otherwise.
 */
bool fg_evfeed_read(struct fg_evfeed *f, uint64_t *pos, fg_evfeed_visit *visit,
		    void *arg);

#endif
