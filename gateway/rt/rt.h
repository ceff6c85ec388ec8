/*
 * rt.h - what a loop lends the services it holds: its thread's libevent
 * base, its Redis connections, its ids, and the daemon's wake-up.
 * Private to the gateway.
 *
 * Invariant: every object a loop owns (its libmicrohttpd daemon, its Redis
 * connections, its waiters, its curl multi handle and transfers) is
 * touched only on the loop's thread, once the thread runs. Other threads
 * only ask it to stop or to follow the topology (loop.h).
 */
#ifndef FENCEGATE_RT_H
#define FENCEGATE_RT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "base/recycle.h"

struct event;
struct event_base;
struct fg_gateway;
struct fg_waitq;
struct fg_admitq;
struct fg_proxy;
struct fg_access;
struct fg_routes;
struct fg_evrec;
struct fg_evreaders;

struct fg_loop {
	struct fg_gateway *gw;
	unsigned index;
	/* This loop's identity in Redis: its channel fg:gw:<id>, the prefix
	 * of its waiter and write ids. Messages for what the loop owns reach
	 * it on its own subscription, so none crosses threads. */
	char id[FG_GATEWAY_ID_LEN + 1];
	uint64_t seq;                /* waiter and write ids */
	struct event_base *base;
	struct MHD_Daemon *daemon;
	const struct fg_routes *routes; /* the daemon's handlers (loop.c) */
	unsigned max_connections;    /* the daemon's share of the limit */
	struct event *mhd_io;        /* the daemon's epoll fd is readable */
	struct event *mhd_timer;     /* the daemon's own timeouts */
	struct event *stop_ev;
	struct event *follow_ev;     /* the Redis topology moved */
	struct event *exit_timer;
	struct event *drain_ev;      /* stop accepting, answer the waiters */
	struct event *drain_timer;   /* draining: are all requests over? */
	struct event *turn_timer;    /* the loop's heartbeat (proc/gateway.h) */
	struct event *ready_timer;   /* at start: its Redis connections up yet? */
	struct event *events_ev;     /* the event feed moved (proc/evfeed.h) */
	uint64_t started_ms;
	unsigned inflight;           /* requests whose state exists (front.c) */
	bool draining;               /* stopped accepting */
	bool drained;                /* ...and has no request now */
	bool stop_asked;
	/* the loop's Redis connections (commands, and the subscription to
	 * its channel): made and closed by the loop (loop.c), lent to its
	 * services at their creation; NULL once closed */
	fg_astore *as;
	struct fg_waitq *wq;         /* the lock API's waiters */
	struct fg_admitq *aq;        /* fenced writes waiting for older ones */
	struct fg_proxy *px;
	struct fg_access *access;    /* the loop's part of the access step */
	struct fg_evrec *evrec;      /* the events it saw, until sent
					(rt/evrec.h); NULL: events off */
	struct fg_evreaders *evr;    /* readers of the events (api/events.h) */
	/* freed request states and proxy flows, made again (front.c, flow.c) */
	struct fg_recycle req_blocks, flow_blocks;
	pthread_t thread;
	bool started;
};

/** Resumes a suspended connection of the loop and has the daemon run on
 *  the loop's next turn (libmicrohttpd 0.9.75 driven from outside does
 *  not wake itself for a resume). On the loop's thread. */
void fg_loop_resume(struct fg_loop *loop, struct MHD_Connection *c);

/** Has the daemon read connection `c` again on the loop's next turn.
 *  libmicrohttpd 0.9.75's epoll loop takes a short read for a drained
 *  socket, so a hang-up that came in with a client's last bytes is never
 *  read: the connection (and whatever it feeds) waits for its timeout.
 *  Only for a connection that is not suspended; on the loop's thread,
 *  outside the daemon's callbacks. */
void fg_loop_reread(struct fg_loop *loop, struct MHD_Connection *c);

/** Has the peer of `c` closed or reset? Asked of the kernel, whatever is
 *  left unread: libmicrohttpd does not read a suspended connection. */
bool fg_loop_client_gone(struct MHD_Connection *c);

/** The next id for a waiter ("<loop id>-<n>") or a write ("<loop id>-w<n>"). */
void fg_loop_next_id(struct fg_loop *loop, bool write, char *out, size_t cap);

#endif
