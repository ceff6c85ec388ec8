/*
 * lockcore-private.h - what store.c (blocking) and the astore*.c files
 * (async) share: the script table, the one way to build a script call, and
 * the one way to read each reply. This file is private to lockcore.
 */
#ifndef FENCEGATE_LOCKCORE_PRIVATE_H
#define FENCEGATE_LOCKCORE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"

struct redisReply;

enum fg__lua {
	FG__LUA_ACQUIRE,
	FG__LUA_RENEW,
	FG__LUA_RELEASE,
	FG__LUA_INSPECT,
	FG__LUA_CHECK,
	FG__LUA_TICK,
	FG__LUA_DEQUEUE,
	FG__LUA_ADMIT,
	FG__LUA_EXTEND,
	FG__LUA_FINISH,
	FG__LUA_GIVEBACK,
	FG__LUA_BREAK,
	FG__LUA_DESCRIBE,
	FG__LUA_INDEX_ADD,
	FG__LUA_INDEX_PAGE,
	FG__LUA_INDEX_DROP,
	FG__LUA_COUNT,
};

#define FG__NKEYS 4
#define FG__MAXARGS 32
#define FG__KEY_MAX (FG_NAME_MAX + 12)
#define FG__EV_ONE "fg:{!ev}:s"  /* one Redis: every lock's events */
#define FG__EV_KEY_MAX 32        /* fits any stream name (evkeys.c), NUL */
#define FG__EV_ARG_MAX 40        /* "<retain> <gateway id>" and NUL */

/*
 * The events a lock call records (contract v1.5), for a store whose
 * opts.events is set; a builder given NULL records none. The call then
 * carries the lock's stream as its last key (after the index's, when it
 * has that one) and "<retain> <gateway id>" as its last argument
 * (prelude/call.lua's start() takes both).
 */
struct fg__ev {
	bool cluster;            /* the stream is the lock's slot's */
	unsigned retain;         /* MAXLEN ~ of every append */
	const char *gateway_id;  /* the "g" of what the call records */
};

/*
 * One script call, built on the caller's stack: argv points into the
 * caller's strings and into the buffers below, so a call lives exactly as
 * long as the strings it was built from.
 */
struct fg__call {
	enum fg__lua lua;
	int argc;
	const char *argv[FG__MAXARGS];
	size_t argvlen[FG__MAXARGS];
	char keys[FG__NKEYS][FG__KEY_MAX];
	char nums[8][24];
	int nnums;
	char evkey[FG__EV_KEY_MAX];  /* the stream, when the call records */
	char evarg[FG__EV_ARG_MAX];
};

/*
 * The scripts are one Redis function library (FUNCTION LOAD), named after
 * its content: fencegate_<version>, with one function fg_<script>_<version>
 * per script. A reply "Function not found" (Redis restarted empty, lost
 * its functions, or never had this version) is answered by loading the
 * library on that connection and sending the call once more; loading is
 * idempotent.
 */

/** Starts a call: FCALL fg_<script>_<version> 4 <keys of name> idle name. */
void fg__call_init(struct fg__call *call, enum fg__lua lua, const char *name,
		   unsigned idle_forget_ms);
void fg__call_str(struct fg__call *call, const char *s, size_t len);
void fg__call_num(struct fg__call *call, uint64_t n);

/**
 * The call as one Redis protocol command (what redisFormatCommandArgv()
 * makes of its arguments) in buf[cap]. Returns its length, or, when cap is
 * too small, a size that is enough (buf then unspecified): a result > cap
 * means "again with that much".
 */
size_t fg__call_format(const struct fg__call *call, char *buf, size_t cap);

#define FG__LOAD_ARGC 4
/** The command that loads the library: FUNCTION LOAD REPLACE <text>. */
void fg__load_argv(const char *argv[FG__LOAD_ARGC],
		   size_t argvlen[FG__LOAD_ARGC]);
/** True when the reply is Redis' "Function not found" error. */
int fg__reply_nofunction(const struct redisReply *r);

/* Replies -> results. FG_OK, or FG_EPROTO for an unexpected shape. */
int fg__parse_grant(const struct redisReply *r, struct fg_grant *out);
int fg__parse_info(const struct redisReply *r, struct fg_lock_info *out);
int fg__parse_check(const struct redisReply *r, struct fg_check *out);
int fg__parse_admit(const struct redisReply *r, struct fg_admit *out);

/* Builders shared by both fronts. */
/* index: the script keeps the listing's index itself (one Redis, not a
 * Cluster: its keys join the call's, index_add.lua) */
/* undo_id: a re-entry's or a renewal's undo id (giveback.lua puts back
 * what the call did when its answer is lost), or NULL for none */
/* ev: the events the call records (struct fg__ev), NULL for none */
void fg__build_acquire(struct fg__call *c, const struct fg_acquire *req,
		       const char *undo_id, unsigned idle, bool index,
		       const struct fg__ev *ev);
void fg__build_renew(struct fg__call *c, const char *name, const char *lease,
		     const char *principal, uint32_t ttl_ms, const char *value,
		     size_t value_len, const char *undo_id, unsigned idle,
		     bool index, const struct fg__ev *ev);
void fg__build_release(struct fg__call *c, const char *name,
		       const char *lease, const char *principal,
		       unsigned margin_ms, unsigned idle, bool index,
		       const struct fg__ev *ev);
/* by: the breaker's principal (NULL: not known), for the event */
void fg__build_break(struct fg__call *c, const char *name, uint64_t token,
		     unsigned margin_ms, const char *by, unsigned idle,
		     const struct fg__ev *ev);
void fg__build_inspect(struct fg__call *c, const char *name, unsigned idle);
void fg__build_check(struct fg__call *c, const char *name, uint64_t token,
		     unsigned idle, const struct fg__ev *ev);
void fg__build_tick(struct fg__call *c, const char *name,
		    const char *gateway_id, uint32_t liveness_ms, int observe,
		    unsigned idle, const struct fg__ev *ev);
void fg__build_dequeue(struct fg__call *c, const char *name,
		       const char *waiter_id, const char *lease, int peek,
		       unsigned idle, const struct fg__ev *ev);

void fg__build_admit(struct fg__call *c, enum fg__lua lua, const char *name,
		     uint64_t token, const char *write_id, uint32_t margin_ms,
		     uint32_t limit_ms, unsigned idle, const struct fg__ev *ev);
void fg__build_finish(struct fg__call *c, const char *name,
		      const char *write_id, unsigned idle);
void fg__build_describe(struct fg__call *c, const char *name,
			unsigned max_parties, unsigned idle);
/* The listing's index (index_*.lua): its own two keys, fg:{!index}:n and
 * :v, in a slot of their own ('!' is no lock name's). */
void fg__build_index_add(struct fg__call *c, const char *name,
			 uint64_t token);
void fg__build_index_page(struct fg__call *c, const char *prefix,
			  const char *after, unsigned count);
/* LOCK: the lock's keys are given too (one Redis, where the lock scripts
 * keep the index and write no token to :v): index_drop.lua then drops
 * the name only if the lock is idle now. Never on a Cluster. */
void fg__build_index_drop(struct fg__call *c, const char *name,
			  uint64_t seen, bool lock);
int fg__parse_detail(const struct redisReply *r, struct fg_lock_detail *d);
/* Frees what fg__parse_detail() allocated (the party arrays). */
void fg__detail_finish(struct fg_lock_detail *d);
/* undo_id NULL: a fresh lease's give-back; else the undo of the renewal
 * or re-entry of lease sent with that id (ran: the re-entry is known to
 * have run, its answer undelivered); reason: why (the event's detail) */
void fg__build_giveback(struct fg__call *c, const char *name,
			const char *lease, const char *waiter_id,
			const char *undo_id, bool ran, unsigned remember_ms,
			const char *reason, unsigned idle,
			const struct fg__ev *ev);

/** Monotonic milliseconds (for reconnect pacing only, never for leases). */
uint64_t fg__mono_ms(void);

/* ---- the event streams (evkeys.c) ------------------------------------ */

/** The tag number T of slot s's stream fg:{!evT}:s (a Cluster). */
unsigned fg__ev_tag(unsigned slot);
/** Writes the name of slot's stream (a Cluster) into buf; its length. */
size_t fg__ev_slot_key(unsigned slot, char *buf, size_t cap);
/** Writes the name of the stream lock `name`'s events go to: FG__EV_ONE,
 *  or on a Cluster its slot's; its length (0: name too long for a lock). */
size_t fg__ev_key(const char *name, bool cluster, char *buf, size_t cap);

/** EVENTS_RETAIN when the settings give none: the contract's default. */
#define FG__EV_RETAIN_DEFAULT 100000u

/**
 * The append of an event the gateway saw (fg_events_add()): XADD key
 * MAXLEN ~ retain * k <kind> and the fields of e that are not empty, g
 * gateway_id among them. Not a script call: c->lua is FG__LUA_COUNT, and
 * the stream's name is argv[1]; it points into key, e's strings and
 * gateway_id. FG_EINVAL without a kind.
 */
int fg__build_event(struct fg__call *c, const char *key, size_t keylen,
		    unsigned retain, const char *gateway_id,
		    const struct fg_event_rec *e);

struct redisAsyncContext;
struct event_base;
/** Attaches an async context to a libevent base (evredis.c): its replies
 * on a persistent read event, its commands written at the end of the loop
 * turn. REDIS_OK, or REDIS_ERR with nothing attached. */
int fg__redis_attach(struct redisAsyncContext *ac, struct event_base *base);

#endif
