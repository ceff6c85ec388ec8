/*
 * evquery.h - the query of GET /_fence/v1/events (contract v1.5) read
 * strictly: prefix, after, wait_ms and limit, each at most once, and
 * nothing else; the Last-Event-ID header of a stream that resumes.
 * Private to the gateway; pure, so that it is unit-tested.
 *
 * Invariant: a query is either read whole into struct fg_evq or refused
 * with the reason a 400 bad_request names; nothing is defaulted for a
 * parameter sent wrong.
 */
#ifndef FENCEGATE_EVQUERY_H
#define FENCEGATE_EVQUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"

#define FG_EV_LIMIT_DEFAULT 100u
#define FG_EV_LIMIT_MAX 1000u
#define FG_EV_WAIT_MAX 60000u

/* One parameter of the query as libmicrohttpd decoded it (value NULL:
 * the key came without '='). */
struct fg_evq_arg {
	const char *key;
	const char *value;
};

struct fg_evq {
	char prefix[FG_NAME_MAX + 1];  /* "" : every lock */
	size_t prefix_len;
	struct fg_ev_cursor after;     /* .set: after this id; else from the
					  oldest retained */
	uint32_t wait_ms;              /* 0: answer at once */
	unsigned limit;                /* 1..FG_EV_LIMIT_MAX */
};

/**
 * Reads the query's parameters (args[0..n)) and, for a stream, its
 * Last-Event-ID header (NULL: none; it stands for `after` and wins over
 * it, as a client that reconnects sends both). 0 with *q filled, or -1
 * with msg[cap] saying what is wrong.
 */
int fg_evq_parse(const struct fg_evq_arg *args, size_t n,
		 const char *last_event_id, struct fg_evq *q, char *msg,
		 size_t cap);

#endif
