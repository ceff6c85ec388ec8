/*
 * h1client.h - the gateway's own HTTP/1.1 client, for the requests that
 * need nothing of libcurl: over plain http, to an upstream given by its
 * IP address, with no body or a small one of known length (xfer.c offers
 * them; the rest go through libcurl, curlx.c). One per loop, on the
 * loop's libevent base; no lock.
 *
 * It writes the request's head (the request as data, backend.h) byte for
 * byte as curl would send it, then the body, taken piece by piece from
 * the owner's fill() (which may hold it back, or
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
struct fg_config;
struct fg_h1c;

/** The loop's client, for the upstream the settings name. NULL without
 *  memory. */
struct fg_h1c *fg_h1c_create(struct event_base *base, const struct fg_config *cfg);

/** Closes every idle connection and frees c. Every exchange has ended
 *  or been cancelled before. Accepts NULL. */
void fg_h1c_destroy(struct fg_h1c *c);

/* The client as a backend of the engine (backend.h); its self is the
 * struct fg_h1c. prepare() declines what it does not carry (see above);
 * its exchanges end with neither FG_UP_TLS, FG_UP_NOT_SENT_AGAIN nor
 * FG_UP_NO_MEMORY (no memory for a connection is no connection); it
 * reports its sending through on_sent(). */
extern const struct fg_up_backend fg_h1c_backend;

#endif
