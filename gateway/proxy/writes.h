/*
 * writes.h - this loop's running fenced writes, by write id: when each
 * must stop sending, and what a message about its grant does to it.
 * Private to the gateway.
 *
 * A write is registered when its transfer is about to start and removed
 * when the transfer is freed. What happens to the transfer itself (is its
 * last byte out, end it now, ask Redis for more time) is done through the
 * operations the owner hands over (struct fg_writes_ops): this module
 * holds no curl handle and makes no Redis call, so its table is tested
 * alone.
 *
 * Invariants:
 * - A write's deadline only moves earlier, except by an extension Redis
 *   granted (fg_write_extended()), counted from when it was asked.
 * - Once its grant ended (an abort, or an extension refused), the
 *   deadline is in the past for good: fg_write_may_send() says no from
 *   then on, so the send gate closes at once.
 * - A write whose last byte left before its deadline is given the margin
 *   more to be answered (its record in Redis covers it), then cut off.
 * - An abort or a shortened lease that comes before its write registered
 *   is kept in a ring of the last FG_WRITES_RING ids; the write finds it
 *   there when it registers. The window is one turn of the loop: the ring
 *   only bounds memory.
 */
#ifndef FENCEGATE_PROXY_WRITES_H
#define FENCEGATE_PROXY_WRITES_H

#include <stdbool.h>
#include <stdint.h>

#include <uthash.h>

#include "fencegate/lock.h"

struct event_base;
struct fg_writes;

#define FG_WRITE_MEMBERS 16 /* FG_WS_MAX (base/writeset.h) */
#define FG_WRITES_RING 1024
/** An extension is asked for this long before the deadline. */
#define FG_WRITE_EXTEND_AHEAD_MS 100

/* Where a write's transfer is (struct fg_writes_ops.stage). */
enum fg_write_stage {
	FG_WRITE_QUEUED,  /* not handed to curl yet: nothing is done to it */
	FG_WRITE_SENDING, /* its request is going out */
	FG_WRITE_SENT,    /* the request's last byte left: awaiting the answer */
	FG_WRITE_OVER,    /* the transfer ended */
};

/* One fenced write. Its owner embeds it (caller memory) and keeps it
 * alive while it is registered. */
struct fg_write {
	char id[FG_WAITER_ID_MAX];
	int n;                           /* members of its write set */
	bool admitted[FG_WRITE_MEMBERS]; /* each holds an admission record */
	uint64_t mdeadline[FG_WRITE_MEMBERS]; /* each admitted member's end */
	uint64_t deadline;    /* monotonic ms: no byte at or after it; 0 none */
	int extending;        /* extensions in flight (one while being asked) */
	uint64_t extend_asked; /* when the extensions in flight were sent */
	bool released;        /* the grant ended: abort */
	bool stopped;         /* ...ended by the gateway's stop, as if so */
	bool reask;           /* its lease got shorter: ask for its deadline now */
	bool grace;           /* sent whole by its deadline: awaiting its answer
				 for the margin */
	bool deadline_hit;    /* stopped by its deadline (or its grant's end) */
	bool registered;
	uint64_t walked;      /* the last deadline walk that looked at it */
	UT_hash_handle hh;
};

/* What the owner does to the transfer of a write. Called from the
 * deadline timer, never from inside curl's callbacks. */
struct fg_writes_ops {
	/** Where the write's transfer is. */
	enum fg_write_stage (*stage)(struct fg_write *w);
	/** Its deadline passed (or its grant ended): end its transfer now,
	 *  connection closed. The write may be removed meanwhile. */
	void (*abort)(struct fg_write *w);
	/** Ask Redis for each admitted member's deadline again; around the
	 *  calls, fg_write_extend_begin(), one fg_write_extend_sent() per
	 *  call sent, fg_write_extend_end(); each answer to
	 *  fg_write_extended(). The write may be removed meanwhile. */
	void (*extend)(struct fg_write *w, uint64_t now);
};

/** The table of a loop, with its deadline timer on `base`; `margin_ms` is
 *  how long a write sent whole is awaited past its deadline. NULL without
 *  memory. Caller owns it (fg_writes_destroy()). */
struct fg_writes *fg_writes_create(struct event_base *base, uint64_t margin_ms,
				   const struct fg_writes_ops *ops);

/** Frees the table (its writes belong to their owners). Accepts NULL. */
void fg_writes_destroy(struct fg_writes *ws);

/** Fills w: its id, its members (admitted, and each one's deadline) and
 *  its deadline, the earliest. */
void fg_write_init(struct fg_write *w, const char *id, int n,
		   const bool *admitted, const uint64_t *mdeadline,
		   uint64_t deadline);

/** Registers w, unless its grant ended before (an abort in the ring):
 *  then false, and w is not registered. A shortened lease in the ring
 *  moves its deadline now and has it asked for again. */
bool fg_writes_add(struct fg_writes *ws, struct fg_write *w);

/** Removes w if registered. */
void fg_writes_remove(struct fg_writes *ws, struct fg_write *w);

/** The registered write with this id, or NULL. */
struct fg_write *fg_writes_find(struct fg_writes *ws, const char *id);

/** The grant of write `id` ended: not one more byte, its transfer is cut
 *  off on the loop's next turn (or never begun). An id not registered
 *  goes into the ring. */
void fg_writes_abort(struct fg_writes *ws, const char *id);

/** The gateway stops: every registered write is ended as when its grant
 *  ends (fg_writes_abort()): not one more byte; one sent whole is
 *  awaited the margin more. Returns how many there were. */
unsigned fg_writes_end_all(struct fg_writes *ws);

/** The grant of write `id` now ends sooner: its deadline moves to `dl`
 *  (monotonic ms) at the latest, at once, and is asked for again. An id
 *  not registered goes into the ring. */
void fg_writes_reask(struct fg_writes *ws, const char *id, uint64_t dl);

/** Every running write asks Redis for its deadline again (a message
 *  about its grant may have been lost). */
void fg_writes_recheck(struct fg_writes *ws);

/** Has the deadlines looked at on the loop's next turn (a write started,
 *  a deadline moved). */
void fg_writes_kick(struct fg_writes *ws);

/** Looks at every write at `now` (monotonic ms): gives one sent whole its
 *  grace, asks for more time ahead of a deadline, aborts one past it.
 *  Returns the ms until it should look again (at least 1). */
long fg_writes_check(struct fg_writes *ws, uint64_t now);

/** The send gate: may the write hand bytes to the upstream at `now`? No
 *  at or after its deadline (and it is then marked stopped by it). */
bool fg_write_may_send(struct fg_write *w, uint64_t now);

/** Around one ask for more time (struct fg_writes_ops.extend). */
void fg_write_extend_begin(struct fg_write *w, uint64_t now);
void fg_write_extend_sent(struct fg_write *w);
void fg_write_extend_end(struct fg_write *w);

/* Redis' answer to one member's extension. */
enum fg_write_extension {
	FG_WRITE_EXT_FAILED,  /* no answer: the deadline stands */
	FG_WRITE_EXT_GRANTED, /* the member's deadline is now `ms` from when
				 it was asked */
	FG_WRITE_EXT_ENDED,   /* the grant is over: not one more byte */
};

/** Member i's extension was answered; the deadlines are looked at again
 *  on the loop's next turn. */
void fg_write_extended(struct fg_writes *ws, struct fg_write *w, int i,
		       enum fg_write_extension how, uint64_t ms);

#endif
