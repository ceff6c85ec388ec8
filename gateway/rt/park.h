/*
 * park.h - a parked connection: a request that waits on its loop (for a
 * grant, a lock's change, older writes, a Redis answer) with its
 * libmicrohttpd connection suspended. Private to the gateway.
 *
 * Invariant: a connection parked here is resumed exactly once, by
 * fg_park_resume(), and every resume has the daemon run on the loop's
 * next turn (libmicrohttpd 0.9.75 driven from outside does not wake
 * itself). The socket watch and the timer are gone before the resume:
 * once libmicrohttpd closes the connection, its descriptor may be
 * reused. Everything runs on the loop's thread.
 */
#ifndef FENCEGATE_PARK_H
#define FENCEGATE_PARK_H

#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

struct event;
struct fg_loop;

typedef void fg_park_cb(void *arg);

/* Caller memory (a waiter's, a lock call's); zeroed before first use. */
struct fg_park {
	struct fg_loop *loop;
	struct MHD_Connection *conn;
	struct event *timer;      /* with on_timer: the one timer */
	struct event *hangup;     /* with on_gone: the client's socket */
	fg_park_cb *on_timer;
	fg_park_cb *on_gone;
	void *arg;
	bool parked;              /* suspended, not yet resumed */
};

/**
 * Suspends c on the loop. With on_gone, watches the client's socket:
 * on_gone(arg) runs when the client closed or reset it, even with bytes
 * left unread (libmicrohttpd reads no suspended connection). With
 * on_timer, one timer, armed by fg_park_arm(). The owner answers both by
 * completing its wait and calling fg_park_resume(). Returns 0, or -1 when
 * the watch or the timer could not be made: then nothing is suspended.
 * Without on_gone and on_timer (a wait for one Redis answer) it cannot
 * fail.
 */
int fg_park_suspend(struct fg_park *p, struct fg_loop *loop,
		    struct MHD_Connection *c, fg_park_cb *on_gone,
		    fg_park_cb *on_timer, void *arg);

/** (Re)arms the timer of a parked connection: on_timer(arg) runs once,
 *  in ms (negative: on the loop's next turn). */
void fg_park_arm(struct fg_park *p, int64_t ms);

/** Drops the watch and the timer, resumes the connection and has the
 *  daemon run on the loop's next turn. Only the first call after
 *  fg_park_suspend() does anything; returns whether this one did. */
bool fg_park_resume(struct fg_park *p);

#endif
