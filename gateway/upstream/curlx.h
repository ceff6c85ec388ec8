/*
 * curlx.h - libcurl as a backend of the upstream engine (backend.h): the
 * loop's multi handle driven on its libevent base, for every request the
 * gateway's own client does not carry (https, a named host, a chunked or
 * large body, the gateway's own question). One per loop; no lock. See
 * curlx.c for its invariants.
 */
#ifndef FG_UPSTREAM_CURLX_H
#define FG_UPSTREAM_CURLX_H

#include "upstream/backend.h"

struct event_base;
struct fg_config;
struct fg_curlx;

/** The loop's multi handle. NULL on failure. */
struct fg_curlx *fg_curlx_create(struct event_base *base,
				 const struct fg_config *cfg);

/** Frees the multi handle and every connection. Every exchange has ended
 *  or been cancelled before. Accepts NULL. */
void fg_curlx_destroy(struct fg_curlx *c);

/* Its self is the struct fg_curlx; it carries every request it is
 * offered; settle() reports what ended while the engine's commands ran. */
extern const struct fg_up_backend fg_curlx_backend;

#endif
