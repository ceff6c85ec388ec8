/*
 * loop.h - assembling one event loop: its thread, its services, the
 * routes of its daemon, and where Redis' channel messages go. Private to
 * the gateway; only main.c includes it. What a loop lends the services it
 * holds (struct fg_loop) is rt/rt.h.
 */
#ifndef FENCEGATE_LOOP_H
#define FENCEGATE_LOOP_H

#include <stddef.h>

#include "rt/rt.h"

struct fg_gateway;

/** Builds loop `index` (base, Redis, waiters, upstream, daemon), not yet
 *  running. NULL on failure. Caller owns the result. */
struct fg_loop *fg_loop_create(struct fg_gateway *gw, unsigned index);

/** From any thread: the Redis topology moved; the loop's connections
 *  follow it. */
void fg_loop_follow(struct fg_loop *loop);

/** From any thread: the event feed moved (new events, a history read
 *  done); the loop's readers of the events look again. */
void fg_loop_events(struct fg_loop *loop);

/** Starts the loop's thread. 0 or -1. */
int fg_loop_start(struct fg_loop *loop);

/** From any thread: the loop stops accepting, answers its parked
 *  waiters and admission waits 503 shutting_down, and lets what is in
 *  flight run; once its last request ended it says so
 *  (fg_gateway_note_drained()). Returns at once. */
void fg_loop_drain(struct fg_loop *loop);

/** From any thread: has the loop stop (fg_loop_stop()) without waiting
 *  for it, so that several loops stop side by side. */
void fg_loop_ask_stop(struct fg_loop *loop);

/** From any thread: drains the loop if it was not, ends what still runs
 *  as at a lease's end (counted by fg_gateway_note_ended()), closes its
 *  connections and ends its thread; returns once it ended. */
void fg_loop_stop(struct fg_loop *loop);

/** Frees a loop that is not running. Accepts NULL. */
void fg_loop_destroy(struct fg_loop *loop);

/** The Redis subscriber's callbacks (arg: the loop): messages for the
 *  loop's running writes go to its proxy, those for its waiting writes
 *  to its admission queue, the rest to its lock waiters. */
void fg_loop_on_message(const char *chan, const char *msg, size_t len,
			void *arg);
void fg_loop_on_resync(void *arg);

#endif
