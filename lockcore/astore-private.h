/*
 * astore-private.h - what the files of the asynchronous front share: one
 * loop's store (struct fg_astore), its connections (struct fg__conn) and
 * its calls in flight (struct fg__aop), and what each file lends the
 * others. This file is private to lockcore.
 *
 *   astore-conn.c      the connections, the topology they follow, the
 *                      subscriptions
 *   astore-call.c      the call pipeline: one script call from its send
 *                      to its one answer (routes, redirections, timeouts,
 *                      the library loaded, WAIT for replicas)
 *   astore-giveback.c  give-back jobs: what a call whose answer was lost
 *                      may have left in Redis, taken back
 *   astore.c           the facade: the store made and freed, and the
 *                      fg_alock_*() calls, each built and handed to the
 *                      pipeline
 *
 * Each file changes only its own fields of struct fg_astore (a comment
 * there names whose they are); all of it runs on the loop's thread.
 */
#ifndef FENCEGATE_ASTORE_PRIVATE_H
#define FENCEGATE_ASTORE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "lockcore-private.h"

struct event;
struct event_base;
struct redisAsyncContext;
struct fg__giveback;

/* One connection: to the master (one Redis, Sentinel), to one cluster
 * master (pinned), or the subscriber (as->sub). Owned by its store:
 * as->conns holds the command connections, freed in fg__conns_finish(). */
struct fg__conn {
	struct fg_astore *as;
	struct redisAsyncContext *ac;
	struct fg_redis_node node;
	int up;
	int is_sub;
	int pinned;         /* a cluster master's: keeps its node */
	int retired;        /* its node left the topology: not restarted */
	int logging_in;     /* this session waits for AUTH's answer */
	int subscribed;     /* sub: Redis took a SUBSCRIBE of this session
			       (or it had none to send) */
	struct event *retry;
	uint64_t epoch;     /* grows with every connect: one Redis session */
	uint64_t sent;      /* commands sent, across reconnects */
	uint64_t load_at;   /* `sent` when the library was last sent to load */
	struct fg__conn *next;
};

#define FG__UNDO_ID_MAX 40

struct fg_astore {
	/* the facade's: set at creation, read by all */
	struct event_base *base;
	fg_topo *topo;
	unsigned command_timeout_ms;
	unsigned idle;
	unsigned margin;     /* write_margin_ms */
	fg_script_observer *observe;
	void *observe_arg;
	fg_giveback_observer *gave_back;
	unsigned replicas, replicas_timeout_ms;
	fg_message_cb *on_message;
	fg_resync_cb *on_resync;
	void *arg;
	int closing;         /* being destroyed: nothing new starts */
	bool events;         /* opts.events: the lock calls record events */
	unsigned events_retain;
	char gateway_id[FG_GATEWAY_ID_LEN + 1]; /* opts.gateway_id, or "" */
	/* astore-call.c's */
	uint64_t ev_failed;  /* appends (FG__AOP_EVENT) Redis did not take */
	/* astore-giveback.c's */
	struct fg__giveback *gbs;    /* not yet answered */
	size_t ngbs;
	struct event *gb_timer;
	char uid_pfx[17];        /* random: undo ids of gateways never meet */
	uint64_t uid_seq;
	/* astore-conn.c's (but for the slot map a MOVED changes at once,
	 * moved() in astore-call.c) */
	struct fg_topo_view view;
	struct fg__conn *conns;  /* command connections */
	struct fg__conn sub;
	unsigned spread;     /* which cluster node `sub` prefers */
	struct event *moved_ev; /* the view moved: on_resync, from the loop */
	char **chans;
	size_t nchans, capchans;
};

/* What a call's reply is read as, and which callback it goes to. */
enum fg__aop_kind {
	FG__AOP_GRANT,   /* gcb */
	FG__AOP_INFO,    /* icb */
	FG__AOP_ADMIT,   /* acb */
	FG__AOP_CHECK,   /* ccb */
	FG__AOP_DETAIL,  /* dcb */
	FG__AOP_NAMES,   /* ncb */
	FG__AOP_NOBODY,  /* nobody waits for it */
	FG__AOP_INDEXED, /* an index update that then hands on the grant `g`
			    it carries (gcb) */
	FG__AOP_EVENT,   /* an event's append (fg_aevents_add()): nobody
			    waits for it, a failure is counted */
};

/* One call in flight: owns copies of its arguments (buf), and everything
 * it points to; freed with fg__aop_free() once answered. */
struct fg__aop {
	fg_astore *as;
	struct fg__call call;
	char *buf;
	enum fg__aop_kind kind;
	fg_grant_cb *gcb;
	fg_detail_cb *dcb;
	fg_names_cb *ncb;
	fg_info_cb *icb;
	fg_admit_cb *acb;
	fg_check_cb *ccb;
	void *arg;
	struct event *timer;
	struct event *again;   /* TRYAGAIN's pause */
	int answered;
	int retried;           /* the library was loaded for it */
	int hops;
	unsigned slot;
	struct fg__conn *conn; /* where it is in flight, or NULL */
	uint64_t sent_at;      /* conn->sent when it was (last) sent */
	uint64_t epoch;        /* conn->epoch then */
	int has_to, ask;       /* a redirection to `to` (ASK: once) */
	struct fg_redis_node to;
	char *undo_lease;      /* acked: "<lease>\0<name>", released if WAIT
				  falls short */
	char *gb;              /* a fresh lease's call, or a renewal's or a
				  re-entry's: "<name>\0<lease>\0<waiter
				  id>\0<undo id>", given back (undone) if it
				  fails once sent */
	char uid[FG__UNDO_ID_MAX]; /* the undo id the call carries ("": none) */
	int maybe_ran;         /* sent, and no reply said it did not run */
	int why;               /* enum fg_giveback_reason of a failure */
	int undone;            /* WAIT fell short and the grant was released */
	struct fg_grant g;     /* acked: the grant WAIT is asked about */
	uint64_t t0_ns;        /* monotonic, when it was submitted */
};

/* ---- astore-conn.c ---------------------------------------------------- */

/** Makes the subscriber and, but on a Cluster (made as the view names
 *  its masters), the command connection, and starts them. FG_OK, or
 *  FG_ENOMEM with what was made left for fg__conns_finish(). */
int fg__conns_init(fg_astore *as);
/** Frees every connection (calls in flight on them answer FG_EUNAVAIL),
 *  the subscriptions and the view. */
void fg__conns_finish(fg_astore *as);

int fg__same_node(const struct fg_redis_node *a, const struct fg_redis_node *b);
/** Starts a session to wherever the connection goes now, or schedules a
 *  try. */
void fg__conn_start(struct fg__conn *cn);
/** Drops the session (calls in flight on it answer FG_EUNAVAIL). Safe
 *  inside one of its own callbacks: hiredis then frees it on return. */
void fg__conn_drop(struct fg__conn *cn);
/** Tries to connect again in a while (not while closing or retired). */
void fg__conn_retry(struct fg__conn *cn);
/** The command connection to a cluster master, made when first needed
 *  (NULL: out of memory). */
struct fg__conn *fg__conn_for(fg_astore *as, const struct fg_redis_node *node);
/** Takes the topology's current view if it moved. */
void fg__follow(fg_astore *as);

/* ---- astore.c ---------------------------------------------------------- */

/** The events a lock call of this store records, in *ev, or NULL when
 *  opts.events is off (calls.c's builders take either). */
const struct fg__ev *fg__ev_of(fg_astore *as, struct fg__ev *ev);

/* ---- astore-call.c ---------------------------------------------------- */

/** A call of `kind` (not a grant: fg__aop_grant()) whose answer goes to
 *  arg's callback, set by the caller. NULL when out of memory; the caller
 *  owns it until fg__submit(). */
struct fg__aop *fg__aop_new(enum fg__aop_kind kind, void *arg);
struct fg__aop *fg__aop_grant(fg_grant_cb *cb, void *arg);
/** The grant op will answer only once WAIT counted the replicas, and
 *  release lease on lock name if they fall short. */
int fg__aop_acked(struct fg__aop *op, const char *name, const char *lease);
/** Sends op; from then on the pipeline owns it and calls its callback
 *  exactly once. On failure (negative) op is freed, no callback. */
int fg__submit(fg_astore *as, struct fg__aop *op);
void fg__aop_free(struct fg__aop *op);

/* ---- astore-giveback.c ------------------------------------------------ */

/** The give-back timer and the undo ids' random prefix. FG_OK, or
 *  FG_ENOMEM (FG_EINVAL: no random bytes). */
int fg__giveback_init(fg_astore *as);
/** Frees the jobs not given back yet: their leases run out by themselves. */
void fg__giveback_finish(fg_astore *as);
/** The call's lease is fresh (nobody but this gateway knows it): if it
 *  fails once sent, it is given back. */
int fg__gb_fresh(struct fg__aop *op, const char *name, const char *lease,
		 const char *wid);
/** The call renews or re-enters the client's lease: it carries a new undo
 *  id (op->uid), and if it fails once sent, what it did is put back. */
int fg__gb_undo_id(fg_astore *as, struct fg__aop *op, const char *name,
		   const char *lease);
/** The call is answered with err: one that may have run makes a job. */
void fg__gb_failed(struct fg__aop *op, int err);

#endif
