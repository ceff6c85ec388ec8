/*
 * h1client.h - the gateway's own HTTP/1.1 client, for the requests that
 * need nothing of libcurl: a GET or HEAD without a body, over plain http,
 * to an upstream given by its IP address (xfer.c picks them; the rest go
 * through libcurl). One per loop, on the loop's libevent base; no lock.
 *
 * It sends the request bytes it is given as they are, on a kept-alive
 * connection of its own when one is idle, else on a new one (bounded by
 * a connect timeout), and reads the answer with h1.c. An idle connection
 * stays registered with the loop, so a request on it costs no epoll_ctl;
 * one the upstream closes is dropped when it says so, and one that was
 * closed under a request before any byte of the answer came is replaced
 * once by a new connection, as libcurl does (a GET or HEAD only, so the
 * request is sent again whole or not at all).
 */
#ifndef FG_UPSTREAM_H1CLIENT_H
#define FG_UPSTREAM_H1CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct event_base;
struct fg_h1c;
struct fg_h1x;

/* How an exchange ended. */
enum fg_h1x_end {
	FG_H1X_OK,        /* the whole answer came */
	FG_H1X_CONNECT,   /* no connection */
	FG_H1X_TIMEOUT,   /* the connection took longer than its bound */
	FG_H1X_SEND,      /* the request could not be sent */
	FG_H1X_EMPTY,     /* the connection closed before any answer */
	FG_H1X_PARTIAL,   /* it closed, or failed, in the middle of it */
	FG_H1X_MALFORMED, /* the answer broke HTTP/1.1, or a hook refused it */
};

struct fg_h1x_hooks {
	/* a head line, with its CRLF (h1.h); false refuses the answer */
	bool (*line)(void *arg, const char *line, size_t len);
	/* how many body bytes body() may be handed now; 0 stops reading
	 * until fg_h1x_resume() */
	size_t (*room)(void *arg);
	/* body bytes, never more than room() said; false refuses */
	bool (*body)(void *arg, const char *p, size_t n);
	/* the request's last byte left */
	void (*sent)(void *arg);
	/* the exchange ended (called once, never from fg_h1c_start());
	 * the exchange is gone when it is called */
	void (*end)(void *arg, enum fg_h1x_end how);
};

/** The loop's client. NULL without memory. */
struct fg_h1c *fg_h1c_create(struct event_base *base);

/** Closes every idle connection and frees c. Every exchange has ended
 *  or been cancelled before. Accepts NULL. */
void fg_h1c_destroy(struct fg_h1c *c);

/** Sends req (len bytes, taken: freed by the client) to the address and
 *  reads its answer, a HEAD's when head. NULL when nothing could begin
 *  (no memory): req is freed and no hook is called. */
struct fg_h1x *fg_h1c_start(struct fg_h1c *c, const struct sockaddr *sa,
			    socklen_t salen, unsigned connect_timeout_ms,
			    char *req, size_t len, bool head,
			    const struct fg_h1x_hooks *hooks, void *arg);

/** room() said 0 before and has room again: reading goes on. */
void fg_h1x_resume(struct fg_h1x *x);

/** Ends the exchange now, without its end hook: its connection is
 *  closed, so the upstream never sees a request that goes on. */
void fg_h1x_cancel(struct fg_h1x *x);

/** Has the request's last byte left? */
bool fg_h1x_sent(const struct fg_h1x *x);

#endif
