/*
 * fencegate/lock.h - lock semantics over Redis (lockcore).
 *
 * Every state change of a lock is one Lua function run atomically by Redis
 * 7 (FCALL into the fencegate function library, loaded again when Redis
 * lacks it). Every key of lock N shares
 * the hash tag {N}, so a Redis Cluster keeps a lock in one slot. Time is
 * Redis' clock (TIME inside the scripts, PEXPIRE on the keys): a gateway's
 * clock never decides whether a lease is alive.
 *
 * Two front ends run the same scripts: fg_store is a blocking connection
 * (the gateway's maintenance thread), fg_astore an asynchronous one on a
 * libevent base (one per gateway event loop: the request path). Neither
 * is thread-safe; each belongs to the thread that created it.
 */
#ifndef FENCEGATE_LOCK_H
#define FENCEGATE_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/error.h"
#include "fencegate/name.h"
#include "fencegate/sequencer.h"

struct event_base;

#define FG_TTL_MIN 100u
#define FG_TTL_MAX 3600000u
#define FG_TTL_DEFAULT 30000u
#define FG_WAIT_MAX 300000u
#define FG_VALUE_MAX 4096u
#define FG_OWNER_MAX 256u
#define FG_PRINCIPAL_MAX 64 /* a principal's name: [A-Za-z0-9._@-], as an
			       X.509 CN (ub-common-name) */
#define FG_GATEWAY_ID_LEN 16 /* hex characters */
#define FG_WAITER_ID_MAX 40

struct fg_topo;

/* The lock scripts, for per-script measurements (fg_script_name()). */
#define FG_SCRIPT_COUNT 16

/**
 * Told of every lock script call the asynchronous front answered: which
 * script (0..FG_SCRIPT_COUNT-1), its lockcore error (FG_OK when Redis
 * answered), and the nanoseconds from its send to its answer (WAIT for
 * replicas included). Called on the loop's thread; must not block.
 */
typedef void fg_script_observer(void *arg, unsigned script, int err,
				uint64_t ns);

/** The script's name ("acquire", "renew", ...), or "unknown". Static. */
const char *fg_script_name(unsigned script);

/* Why a grant or a waiter was given back (fg_alock_give_back()). */
enum fg_giveback_reason {
	FG_GIVEBACK_TIMEOUT,     /* the call's answer did not come in time */
	FG_GIVEBACK_CONNECTION,  /* the connection dropped after it was sent */
	FG_GIVEBACK_REPLICAS,    /* WAIT counted too few replicas */
	FG_GIVEBACK_ERROR,       /* Redis answered an error: it may have run */
	FG_GIVEBACK_UNKNOWN_WAITER, /* a grant for a waiter no longer known */
	FG_GIVEBACK_UNDELIVERED, /* its client left before it was answered */
	FG_GIVEBACK_COUNT,
};

/** "timeout", "connection", ... Static. */
const char *fg_giveback_reason_name(unsigned reason);

/**
 * Told of every give-back Redis answered: why, and whether a grant or a
 * waiter was there to undo. Loop thread; must not block.
 */
typedef void fg_giveback_observer(void *arg, unsigned reason, bool undone);

struct fg_store_opts {
	struct fg_topo *topo;        /* where Redis is (fencegate/topo.h); not
					owned, outlives every store */
	unsigned connect_timeout_ms; /* bound on connect() */
	unsigned command_timeout_ms; /* bound on one command's round trip */
	unsigned idle_forget_ms;     /* a lock free this long leaves no keys */
	unsigned write_margin_ms;    /* how long a storage may still apply a
					write whose last byte was sent: a
					released grant's writes keep their
					place in the order this long */
	unsigned replicas;           /* a grant is answered only once WAIT
					says this many replicas have it */
	unsigned replicas_timeout_ms; /* WAIT's bound */
	fg_script_observer *observe; /* optional (asynchronous front only) */
	void *observe_arg;
	fg_giveback_observer *gave_back; /* optional (asynchronous front) */
	bool events;                 /* record the event stream (contract
					v1.5): the lock calls that change a
					lock append to it */
	unsigned events_retain;      /* entries a stream keeps, about */
	const char *gateway_id;      /* the "gateway" of the events this
					store records; not owned */
};

/* ---- blocking connection ------------------------------------------- */

typedef struct fg_store fg_store;

/**
 * Allocates a store; connects lazily on first use, and again after any
 * failure (at most once per connect_timeout_ms, so a down Redis costs a
 * caller one bounded wait, not a pile of them). Caller owns the result and
 * frees it with fg_store_destroy(). NULL only on allocation failure.
 */
fg_store *fg_store_create(const struct fg_store_opts *opts);

/** Closes and frees. Accepts NULL. */
void fg_store_destroy(fg_store *st);

/** PING. FG_OK or FG_EUNAVAIL. */
int fg_store_ping(fg_store *st);

#define FG_STORE_WHY_MAX 192
/** Why the last call that could not reach Redis failed: "HOST:PORT: "
 *  and the connection's error (errno's text, a timeout) or Redis' error
 *  reply; "" before any failure. Never holds a command's argument. The
 *  text is the store's, valid until its next call. */
const char *fg_store_why(const fg_store *st);

/**
 * Agrees on the gateways' HMAC key through Redis: SET key NX with `ours`
 * (or, when ours is NULL, 32 fresh RAND_bytes), then GET. Writes the key
 * in force into key_out (FG_KEY_MAX bytes) and its length into *len.
 * Run again after Redis lost its data, it puts the gateway's key back.
 */
int fg_store_sync_key(fg_store *st, const uint8_t *ours, size_t ours_len,
		      uint8_t key_out[FG_KEY_MAX], size_t *len);

/* ---- lock operations ----------------------------------------------- */

struct fg_acquire {
	const char *name;        /* valid lock name */
	const char *lease;       /* fresh lease for a new grant (fg_lease_new) */
	const char *reenter;     /* lease of a grant to re-enter, or NULL */
	enum fg_mode mode;
	uint32_t ttl_ms;         /* FG_TTL_MIN..FG_TTL_MAX */
	uint32_t lock_delay_ms;  /* 0..FG_TTL_MAX */
	uint32_t wait_ms;        /* 0 = try once; else queue as waiter_id */
	const char *waiter_id;   /* required when wait_ms > 0 */
	const char *gateway_id;  /* the queueing gateway (its channel) */
	uint32_t liveness_ms;    /* a queued waiter outlives its gateway's last tick by this */
	uint32_t max_waiters;    /* queue bound for this lock */
	const char *value;       /* NULL: leave the lock's value alone */
	size_t value_len;
	const char *owner;       /* NULL or free text, for inspect */
	size_t owner_len;
	const char *client;      /* the caller's address, for the listing
				    (NULL: unknown) */
	const char *principal;   /* who asks (at most FG_PRINCIPAL_MAX of
				    [A-Za-z0-9._@-]): a grant, and a waiter's
				    grant, is stored with it, and a re-entry
				    by anyone else is FG_FORBIDDEN. NULL: open
				    mode, nothing stored or checked */
};

enum fg_grant_status {
	FG_GRANTED = 0,  /* token/mode/holds/ttl_ms are set */
	FG_QUEUED = 1,   /* waiting; wake_in_ms says when to tick */
	FG_BUSY = 2,     /* held, queued for or in lock-delay, and wait_ms
			    was 0; delay_ms says whether lock-delay alone
			    refused it */
	FG_EXPIRED = 3,  /* the lease given holds nothing */
	FG_TOO_MANY = 4, /* the lock's queue is full */
	FG_REMOVED = 5,  /* dequeue: the waiter left the queue; break: the
			    grant ended */
	FG_FORBIDDEN = 6, /* the lease holds the lock, but was granted to
			     another principal: nothing changed */
};

struct fg_grant {
	enum fg_grant_status status;
	uint64_t token;      /* break sets it too: the grant's token
				(FG_REMOVED) or the newest the lock knows
				of (FG_EXPIRED; 0: none) */
	enum fg_mode mode;
	uint32_t holds;      /* holds of this lease after the call */
	uint32_t ttl_ms;     /* the lease's ttl */
	int64_t wake_in_ms;  /* ms until the lock can change hands by itself
				(expiry, end of lock-delay); -1 when nothing
				is pending */
	uint32_t delay_ms;   /* FG_BUSY: what remains of the lock-delay
				when it alone refused the call (the lock is
				free and nobody is queued); 0 otherwise */
	char undo_id[40];    /* a re-entry's or renewal's undo id, which
				fg_alock_undo() takes it back by ("": none) */
};

struct fg_lock_info {
	bool held;
	enum fg_mode mode;   /* meaningful when held */
	bool has_token;      /* false once the lock is forgotten */
	uint64_t token;
	uint32_t holders;
	uint32_t waiters;
	uint64_t ttl_ms;     /* what remains of the grant, 0 when free */
	uint64_t delay_ms;   /* what remains of a lock-delay, 0 when none
				(always 0 while held) */
	char *value;         /* malloc'd, NUL-terminated, or NULL */
	size_t value_len;
	char *owner;         /* malloc'd, NUL-terminated, or NULL */
};

/** Frees value and owner inside *info. Accepts NULL. */
void fg_lock_info_finish(struct fg_lock_info *info);

enum fg_check_status {
	FG_CHECK_VALID = 0,   /* the grant behind the token holds the lock */
	FG_CHECK_STALE = 1,   /* a newer token was issued for the lock */
	FG_CHECK_EXPIRED = 2, /* no newer token, but the grant is gone */
	FG_CHECK_FORGED = 3,  /* greater than any token ever issued */
};

struct fg_check {
	enum fg_check_status status;
	enum fg_mode mode;   /* the grant's mode, when VALID */
	bool has_current;
	uint64_t current;    /* the newest token the lock knows of */
};

/** Is `token` the live grant of lock `name`? (CheckSequencer.) */
int fg_lock_check(fg_store *st, const char *name, uint64_t token,
		  struct fg_check *out);

/* ---- fenced writes -------------------------------------------------- */

enum fg_admit_status {
	FG_ADMITTED = 0,       /* go: ms is the write's deadline from now */
	FG_ADMIT_WAIT = 1,     /* writes under an older token are still in
				  flight: ask again within ms */
	FG_ADMIT_STALE = 2,    /* not the live grant's token */
	FG_ADMIT_EXPIRING = 3, /* the live grant ends before a write could */
	FG_ADMIT_FORGED = 4,   /* greater than any token ever issued */
};

struct fg_admit {
	enum fg_admit_status status;
	int64_t ms;
	uint64_t token;        /* ADMITTED: the grant's token */
	bool has_current;
	uint64_t current;      /* the newest token the lock knows of */
};

/* ---- asynchronous connection (the gateway's wait loop) -------------- */

typedef struct fg_astore fg_astore;

/** Reply of an asynchronous lock call; err is FG_OK or negative. */
typedef void fg_grant_cb(int err, const struct fg_grant *g, void *arg);
typedef void fg_info_cb(int err, const struct fg_lock_info *info, void *arg);

/*
 * The listing (contract v1.3): which locks are held, waited for or in
 * lock-delay, and by whom. Locks are found through an index of names that
 * every acquire that granted or queued adds to, with the grant's token,
 * once Redis answered it; releases that leave a lock idle, listings and
 * the maintenance thread's sweep prune it: a name is dropped only when a
 * look found its lock idle and the index knows of no grant newer than
 * that look (tokens only grow, so no clocks of different nodes are
 * compared). A page of n names costs Redis O(n) work, however many
 * exist.
 */

/** A holder or a waiter. Strings point into the reply: valid during the
 *  callback only. */
struct fg_party {
	const char *owner;     /* NULL: none given */
	const char *principal; /* NULL: open mode */
	const char *client;    /* the address the call came from ("" unknown) */
	uint64_t ms;           /* held or waited so far */
};

struct fg_lock_detail {
	bool active;          /* held, waited for, or in lock-delay */
	bool held;
	enum fg_mode mode;    /* meaningful when held */
	bool has_token;
	uint64_t token;       /* the live grant's, or the last one's */
	uint64_t ttl_ms;      /* what remains of the grant, 0 when free */
	uint64_t delay_ms;    /* what remains of a lock-delay */
	uint64_t seen;        /* above every token the lock issued by the
				 look, below every one it issues later */
	size_t nholders, nwaiters;
	struct fg_party *holders; /* longest held first */
	struct fg_party *waiters; /* queue order */
};

typedef void fg_detail_cb(int err, const struct fg_lock_detail *d, void *arg);
/** The lock as the listing shows it, with at most max_parties holders and
 *  as many waiters. */
int fg_alock_describe(fg_astore *as, const char *name, unsigned max_parties,
		      fg_detail_cb *cb, void *arg);

/** Names (valid during the callback only) of the index in name order:
 *  those starting with prefix ("" for all) and after `after` (NULL: from
 *  the first), at most count. */
typedef void fg_names_cb(int err, const char *const *names, size_t n,
			 void *arg);
int fg_alock_index_page(fg_astore *as, const char *prefix, const char *after,
			unsigned count, fg_names_cb *cb, void *arg);

/**
 * One step of the index's sweep (the maintenance thread's): reads up to n
 * names after `after` ("" from the first) and drops those whose locks are
 * idle, as a listing does; `after` becomes the last name read, or "" once
 * the index was read to its end (it stays where it was when Redis could not
 * be asked). *dropped: how many went. Releases that
 * leave a lock idle drop it themselves; the sweep catches the locks that
 * fell idle by expiry, give-back or break, and that nobody lists.
 */
int fg_lock_index_sweep(fg_store *st, char after[FG_NAME_MAX + 1],
			unsigned n, unsigned *dropped);

/** Drops name from the index unless it learned of a grant newer than
 *  `seen` (fg_lock_detail.seen of a look that found the lock idle).
 *  Nobody waits for it. */
int fg_alock_index_drop(fg_astore *as, const char *name, uint64_t seen);
/** A message on a subscribed channel. */
typedef void fg_message_cb(const char *channel, const char *msg, size_t len,
			   void *arg);
/** The subscriber (re)connected and holds the first channel subscribed
 *  again (every message from then on reaches it), or the masters moved:
 *  messages, or what a failed master held, may have been lost before. */
typedef void fg_resync_cb(void *arg);

/**
 * Two connections on `base`: one for commands, one subscribed to channels.
 * Both reconnect by themselves. Caller owns the result.
 */
fg_astore *fg_astore_create(struct event_base *base,
			    const struct fg_store_opts *opts,
			    fg_message_cb *on_message, fg_resync_cb *on_resync,
			    void *arg);

/** Closes both connections; pending callbacks get FG_EUNAVAIL. Accepts NULL. */
void fg_astore_destroy(fg_astore *as);

/** 1 while both connections are up, else 0 (a call would fail at once). */
int fg_astore_ready(const fg_astore *as);

/** Subscribe/unsubscribe (kept across reconnects). 0 or FG_ENOMEM. */
int fg_astore_subscribe(fg_astore *as, const char *channel);
int fg_astore_unsubscribe(fg_astore *as, const char *channel);

/** The topology moved (fg_topo_gen()): follow it now rather than at the
 *  next call. Loop thread. */
void fg_astore_follow(fg_astore *as);

/** The lock calls of the request path of a gateway event loop: each
 *  fg_alock_*() that fails at once returns negative and never calls cb;
 *  the arguments are copied.
 *
 *  Acquire tries, re-enters, or queues: g->status tells which happened.
 *  With replicas set (fg_store_opts), an acquire's grant is answered only once
 *  WAIT counted them; otherwise it is released and cb gets FG_EREPLICAS.
 *  An acquire with a fresh lease (not a re-entry) that fails after it was
 *  sent (timeout, lost connection, an error from Redis, WAIT short) is
 *  given back by itself (fg_alock_give_back()): its caller answers an
 *  error, and no grant or waiter it may have made outlives that. */
int fg_alock_acquire(fg_astore *as, const struct fg_acquire *req,
		     fg_grant_cb *cb, void *arg);
/** Takes back what the re-entry or renewal with undo_id (its grant's
 *  undo_id) did to lease, until Redis answers (a give-back job): for a
 *  re-entry whose answer never reached its client. */
int fg_alock_undo(fg_astore *as, const char *name, const char *lease,
		  const char *undo_id, enum fg_giveback_reason why);
/**
 * Extends the lease to ttl_ms from now (0: the ttl it was granted with);
 * when value is non-NULL also sets the lock's value. g->status is
 * FG_GRANTED, FG_EXPIRED (the lease holds nothing, whoever asks) or
 * FG_FORBIDDEN (it holds, but principal is not the one it was granted
 * to; nothing changed). principal NULL: open mode, not checked.
 */
int fg_alock_renew(fg_astore *as, const char *name, const char *lease,
		   const char *principal, uint32_t ttl_ms, const char *value,
		   size_t value_len, fg_grant_cb *cb, void *arg);
/** A waiter's grant (heard of by message) made good: with replicas set, a
 *  renewal of the lease (to the ttl it was granted with) followed by WAIT,
 *  as for an acquire; without, just the renewal. g->status is FG_GRANTED
 *  or FG_EXPIRED (the grant is gone). The lease is this gateway's own:
 *  no principal is checked. */
int fg_alock_confirm(fg_astore *as, const char *name, const char *lease,
		     fg_grant_cb *cb, void *arg);
typedef void fg_check_cb(int err, const struct fg_check *c, void *arg);
/** fg_lock_check(), asynchronously. */
int fg_alock_check(fg_astore *as, const char *name, uint64_t token,
		   fg_check_cb *cb, void *arg);

/**
 * Refreshes this gateway's waiters on the lock (or, with observe, asks for
 * the lock's change events for liveness_ms) and grants the lock to the
 * next waiter(s) if it is free; g->wake_in_ms says when to tick again.
 * A call that fails at once returns negative and never calls cb.
 */
int fg_alock_tick(fg_astore *as, const char *name, const char *gateway_id,
		  uint32_t liveness_ms, bool observe, fg_grant_cb *cb,
		  void *arg);

/**
 * Takes waiter_id out of the queue (or, with peek, only asks). g->status:
 * FG_REMOVED (it was queued), FG_QUEUED (peek, still queued), FG_GRANTED
 * (lease holds the lock: token/mode/ttl_ms set), FG_EXPIRED (neither).
 */
int fg_alock_dequeue(fg_astore *as, const char *name, const char *waiter_id,
		     const char *lease, bool peek, fg_grant_cb *cb, void *arg);

/**
 * Undoes one hold of the lease; at zero holds the lease leaves, and when
 * no holder is left the next waiter(s) are granted in the same script.
 * g->status is FG_GRANTED (holds = holds left), FG_EXPIRED or
 * FG_FORBIDDEN, with principal as for fg_alock_renew().
 */
int fg_alock_release(fg_astore *as, const char *name, const char *lease,
		     const char *principal, fg_grant_cb *cb, void *arg);

/**
 * Breaks the grant whose token is `token`: it ends as if it had expired
 * now. Every holder leaves, its admitted writes are aborted on every
 * gateway (as at a release), its lock-delay counts from now, and without
 * one the next waiter(s) are granted in the same script. g->status is
 * FG_REMOVED (g->token: the grant's), or FG_EXPIRED when token is not
 * the live grant's (the lock is free, in lock-delay, or held under
 * another token; g->token: the newest token the lock knows of, 0 for
 * none): nothing changed. Nobody's rights are checked here.
 */
int fg_alock_break(fg_astore *as, const char *name, uint64_t token,
		   fg_grant_cb *cb, void *arg);
/** fg_alock_break(), the breaker's principal `by` (NULL: not known) named
 *  in the event it records ("broken", detail {"by": ...}). */
int fg_alock_break_by(fg_astore *as, const char *name, uint64_t token,
		      const char *by, fg_grant_cb *cb, void *arg);

/** The lock's state; info and its strings are valid during the callback
 *  only. */
int fg_alock_inspect(fg_astore *as, const char *name, fg_info_cb *cb,
		     void *arg);

typedef void fg_admit_cb(int err, const struct fg_admit *a, void *arg);

/**
 * Admits a write fenced by `token` to the lock's upstream. Its send
 * deadline (a->ms from when the call was *sent*, so a caller that counts
 * from then never runs past it) is the grant's expiry minus margin_ms, and
 * at most longest_ms from now. The write is recorded under write_id until
 * fg_alock_finish() or its deadline plus margin_ms; writes under a newer
 * token wait for it (FG_ADMIT_WAIT) until then.
 */
int fg_alock_admit(fg_astore *as, const char *name, uint64_t token,
		   const char *write_id, uint32_t margin_ms,
		   uint32_t longest_ms, fg_admit_cb *cb, void *arg);

/** Moves a running write's deadline with its lease (after a renewal);
 *  a->status is FG_ADMITTED with the new deadline, or FG_ADMIT_STALE. */
int fg_alock_extend(fg_astore *as, const char *name, uint64_t token,
		    const char *write_id, uint32_t margin_ms, uint32_t left_ms,
		    fg_admit_cb *cb, void *arg);

/**
 * Undoes whatever a lock call with this fresh lease (and waiter id, or
 * NULL) did or will do: the waiter leaves the queue, the lease's grant is
 * released, and a call with that lease reaching Redis later does nothing.
 * Sent again every 200 ms until Redis answers, so it happens within about
 * that of Redis answering again; then the observer is told. For a lease
 * whose answer never reached its client. 0 or FG_ENOMEM.
 */
int fg_alock_give_back(fg_astore *as, const char *name, const char *lease,
		       const char *waiter_id, enum fg_giveback_reason why);


/** The write is over; g->status is FG_REMOVED. cb may be NULL. */
int fg_alock_finish(fg_astore *as, const char *name, const char *write_id,
		    fg_grant_cb *cb, void *arg);

/* ---- events (contract v1.5) ---------------------------------------- */

/*
 * What happened to locks is kept in Redis streams (one on one Redis, one
 * per hash slot on a Cluster: the lock's own). The lock functions append
 * what they do themselves (granted, released, broken, given_back) when
 * the store's opts.events is set; the calls below append what only the
 * gateway sees (expired, lease_lost, refused). Every append is
 * XADD <stream> MAXLEN ~ <events_retain> * with the fields that are not
 * empty: k kind, l lock, t token, p principal, o owner, c client, g the
 * store's opts.gateway_id, d detail (a JSON object's text). Never a
 * lease, a key or a sequencer.
 */

/** An event the gateway saw, to append. Strings may be NULL (or "": the
 *  field is left out); kind is required; the gateway id is the store's
 *  (fg_store_opts.gateway_id). */
struct fg_event_rec {
	const char *kind, *lock, *principal, *owner, *client, *detail;
	uint64_t token;
	bool has_token;
};

/**
 * Appends e asynchronously: queued on the loop's connection to the
 * master of the lock's slot (the one master off a Cluster), and never
 * awaited: nobody is called back. 0 when queued, or when opts.events is
 * off (nothing is sent); FG_EINVAL without a kind or with a name too long
 * for a lock; FG_ENOMEM or FG_EUNAVAIL when it could not be queued. An
 * append that was queued and then failed (Redis answered an error, the
 * connection dropped, its answer was late) is counted in
 * fg_aevents_failed().
 */
int fg_aevents_add(fg_astore *as, const struct fg_event_rec *e);
/** Appends queued by fg_aevents_add() that Redis did not take (so far,
 *  since the store was made). Loop thread. */
uint64_t fg_aevents_failed(const fg_astore *as);
/** Appends e, blocking (the maintenance thread): FG_OK once Redis took
 *  it, FG_OK at once when opts.events is off, FG_EINVAL as above, or
 *  FG_EUNAVAIL. */
int fg_events_add(fg_store *st, const struct fg_event_rec *e);

/* ---- channels ------------------------------------------------------ */

/** "fg:gw:<id>": where a gateway hears that one of its waiters was granted
 *  ("<waiter id> <token> <x|s> <lease> <name>"), that a running write's
 *  grant ended ("x <write id>") or ends sooner ("e <write id>"), and that
 *  a write it waits behind ended ("w <name>"), and that a lock its
 *  waiters wait on can change hands in ms, sooner than it was told
 *  ("t <ms> <name>": a break's lock-delay ends). */
int fg_chan_gateway(const char *gateway_id, char *out, size_t cap);
/** "fg:ev:<name>": published on every grant and end of a grant while an
 *  observer's tick asked for it. */
int fg_chan_events(const char *name, char *out, size_t cap);

/* ---- the event streams: reading (contract v1.5) --------------------- */

/*
 * What happened to locks, as the lock functions and the gateways recorded
 * it (lockcore/evkeys.c says where). One Redis keeps one stream, whose
 * ids ("<ms>-<seq>") are the events' ids and order; a Cluster keeps one
 * per hash slot, and an event's id is "<ms>-<seq>.<slot>", ordered by
 * (ms, slot, seq): a lock's events are always in its order, those of
 * locks on masters whose clocks differ may not be in the order they
 * happened.
 */

/* one event as read; strings NUL-terminated, "" when absent, valid only
 * during the callback */
struct fg_event {
	char id[48];           /* the API's id (fg_event_id_format()) */
	uint64_t at_ms;        /* Redis' clock at the append (the id's ms) */
	const char *kind, *lock, *principal, *owner, *client, *gateway;
	const char *detail;    /* JSON object text, "" for none */
	uint64_t token;
	bool has_token;        /* false too when the entry's token was not
				  decimal digits */
};

/* A place in the event streams: (ms, seq) of one Redis' stream, or (ms,
 * slot, seq) of a Cluster's (cluster set). set false: nowhere (from the
 * oldest retained). */
struct fg_ev_cursor { uint64_t ms, seq; unsigned slot; bool cluster, set; };

/** Reads an event id: "<ms>-<seq>" (1..15 and 1..19 decimal digits) or
 *  "<ms>-<seq>.<slot>" (1..5 digits, slot < 16384), nothing else. 0 with
 *  *out set (cluster when it had a slot), or -1 with *out untouched. */
int fg_event_id_parse(const char *s, struct fg_ev_cursor *out);

/** Writes c's id into buf[cap], NUL-terminated; its length, or 0 (buf
 *  "" when cap > 0) when c is not set or cap is too small. 48 is always
 *  enough. */
size_t fg_event_id_format(const struct fg_ev_cursor *c, char *buf, size_t cap);

/** Told of one event; returns 0 to go on, anything else to stop after
 *  it. */
typedef int fg_event_cb(void *arg, const struct fg_event *e);

/**
 * History, blocking, on fg_store: entries after `after` (NULL or !set:
 * from the oldest retained), oldest first; reads at most `scan` entries;
 * skips entries older than min_ms; *next = the cursor of the last entry
 * read (shown or not; unchanged when none); *gap = true when `after` was
 * set and entries after it are gone (trimmed, or older than min_ms). An
 * entry Redis holds that is no event (fields missing or malformed) is
 * passed with what it has. FG_OK or an error (then cb may have been told
 * of some entries, and *next follows them).
 */
int fg_events_range(fg_store *st, const struct fg_ev_cursor *after,
		    unsigned scan, uint64_t min_ms, fg_event_cb *cb, void *arg,
		    struct fg_ev_cursor *next, bool *gap);

/** Drops the entries older than retain_ms by Redis' clock (XTRIM MINID
 *  ~): for the maintenance thread, about once a minute. */
int fg_events_trim(fg_store *st, uint64_t retain_ms);

/* The follower: its own blocking connection(s) (one per master on a
 * Cluster), reading from where it is (created: "now"). Not thread-safe:
 * one thread uses it. */
typedef struct fg_evtail fg_evtail;
/** Caller owns the result (fg_evtail_destroy()); NULL only on allocation
 *  failure. Connects at once when it can, so that "now" is its creation
 *  (else at its first call that reaches Redis). */
fg_evtail *fg_evtail_create(const struct fg_store_opts *opts);
/** Closes and frees. Accepts NULL. */
void fg_evtail_destroy(fg_evtail *t);
/** Waits at most block_ms for entries after its position, calls cb for
 *  each in order; returns how many (>= 0) or a negative error (Redis down:
 *  the caller waits a little and calls again; the position is kept). */
int fg_evtail_next(fg_evtail *t, unsigned block_ms, fg_event_cb *cb,
		   void *arg);
/** Its position (the last entry it read, or where it started), for a
 *  reader to know where the live part begins; !set before it reached
 *  Redis once. */
void fg_evtail_position(const fg_evtail *t, struct fg_ev_cursor *out);

#endif
