/*
 * h1client.h - the gateway's own HTTP/1.1 client, for the requests that
 * need nothing of libcurl: over plain http, to an upstream given by its
 * IP address, with no body or a small one of known length (xfer.c picks
 * them; the rest go through libcurl). One per loop, on the loop's
 * libevent base; no lock.
 *
 * It sends the request head it is given as it is, then the body, taken
 * piece by piece from the owner's fill() (which may hold it back, or
 * refuse it: then the connection is closed and the request never
 * completes), on a kept-alive connection of its own when one is idle,
 * else on a new one (bounded by a connect timeout), and reads the answer
 * with h1.c. An idle connection stays registered with the loop, so a
 * request on it costs no epoll_ctl; one the upstream closes is dropped
 * when it says so. A request the owner calls retryable (a safe method
 * without a body) whose reused connection closed before any byte of the answer came is
 * sent again, whole, once, on a new connection, as libcurl does; any
 * other request is never sent twice. Before any request goes out on a
 * reused connection, that connection is asked whether it has said
 * anything since its last answer (its close, or bytes nobody asked for);
 * one that has is closed, never used.
 */
#ifndef FG_UPSTREAM_H1CLIENT_H
#define FG_UPSTREAM_H1CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "upstream/backend.h"

struct event_base;
struct fg_h1c;
struct fg_h1x;

/* What fill() returns instead of a count: nothing now (it calls
 * fg_h1x_resume_send() when it has more), or never (the request is
 * cut off with its connection). */
#define FG_H1X_FILL_PAUSE ((size_t)-1)
#define FG_H1X_FILL_ABORT ((size_t)-2)

struct fg_h1x_hooks {
	/* the final head (an interim one is passed over): its status and
	 * headers (h1.h); false refuses the answer */
	bool (*head)(void *arg, int status, const struct fg_up_header *h,
		     size_t n, bool cut);
	/* how many body bytes body() may be handed now; 0 stops reading
	 * until fg_h1x_resume() */
	size_t (*room)(void *arg);
	/* body bytes, never more than room() said; false refuses */
	bool (*body)(void *arg, const char *p, size_t n);
	/* up to max bytes of the body into buf: how many (at least 1), or
	 * FG_H1X_FILL_PAUSE or FG_H1X_FILL_ABORT; asked right before the
	 * bytes are sent, never for more than the body's length */
	size_t (*fill)(void *arg, char *buf, size_t max);
	/* the request's last byte left */
	void (*sent)(void *arg);
	/* the exchange ended (called once, never from fg_h1c_start());
	 * the exchange is gone when it is called. Never FG_UP_TLS,
	 * FG_UP_NOT_SENT_AGAIN or FG_UP_NO_MEMORY (no memory is no
	 * connection) */
	void (*end)(void *arg, struct fg_up_outcome how);
};

/** The loop's client. NULL without memory. */
struct fg_h1c *fg_h1c_create(struct event_base *base);

/** Closes every idle connection and frees c. Every exchange has ended
 *  or been cancelled before. Accepts NULL. */
void fg_h1c_destroy(struct fg_h1c *c);

/* What to send, and how. */
struct fg_h1x_req {
	char *head;          /* the request head (taken: freed by the client) */
	size_t len;          /* its bytes */
	size_t body;         /* the body's length (fill()), 0: none */
	bool is_head;        /* a HEAD: its answer has no body */
	bool retryable;      /* may be sent twice (a safe method, no body) */
};

/** Sends the request to the address and reads its answer. NULL when
 *  nothing could begin (no memory): the head is freed and no hook is
 *  called. */
struct fg_h1x *fg_h1c_start(struct fg_h1c *c, const struct sockaddr *sa,
			    socklen_t salen, unsigned connect_timeout_ms,
			    const struct fg_h1x_req *req,
			    const struct fg_h1x_hooks *hooks, void *arg);

/** room() said 0 before and has room again: reading goes on. */
void fg_h1x_resume(struct fg_h1x *x);

/** fill() said FG_H1X_FILL_PAUSE before and has more now: sending goes
 *  on. */
void fg_h1x_resume_send(struct fg_h1x *x);

/** Ends the exchange now, without its end hook: its connection is
 *  closed, so the upstream never sees a request that goes on. */
void fg_h1x_cancel(struct fg_h1x *x);

#endif
