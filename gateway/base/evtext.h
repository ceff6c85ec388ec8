/*
 * evtext.h - an event of the lock event stream (contract v1.5) as the
 * gateway keeps and shows it: its JSON text, made once when the event is
 * read; its Server-Sent Events frame; the order of event ids. Private to
 * the gateway; pure (it reads only its arguments), so that it is
 * unit-tested.
 *
 * Invariant: an item is immutable once made and is one allocation (its
 * strings live in it), so that a reader anywhere may show it, and the
 * thread that made it may hand it on, without a copy or a lock.
 */
#ifndef FENCEGATE_EVTEXT_H
#define FENCEGATE_EVTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"

/* A comment line an idle stream sends, so that proxies and clients know
 * it is alive (ev-spec: every 15 s). */
#define FG_SSE_KEEPALIVE ": keep-alive\n\n"

/* The comment a stream opens with, so that a client holds the stream's
 * first bytes at once, before any event (an EventSource that waits for
 * them to say it is open, a reader that tells a live stream by them). */
#define FG_SSE_OPENING ": events\n\n"

/* One event as the gateway keeps it: what a reader filters on (the lock,
 * the time), its id as a cursor and as text, and its JSON. */
struct fg_evitem {
	struct fg_ev_cursor cur;
	uint64_t at_ms;          /* Redis' clock at the append */
	const char *id;          /* the API's id (fg_event_id_format) */
	const char *kind;
	const char *lock;
	const char *json;        /* {"id","at","kind",...}: compact, one line */
	size_t json_len;
};

/**
 * The item of event e: its JSON made with jansson (contract v1.5: token a
 * number or null; principal, owner, client and gateway a string or null;
 * detail the object e->detail holds, {} when it holds none or no object;
 * at in RFC 3339 UTC with milliseconds). One malloc()'ed block the caller
 * owns (free()). NULL when out of memory, or when e's id does not parse
 * as one (fg_event_id_parse()).
 */
struct fg_evitem *fg_evitem_make(const struct fg_event *e);

/** Writes ms since the epoch as "2026-12-02T14:05:01.123Z" (out: at
 *  least 32 bytes); returns its length. */
size_t fg_ev_time(uint64_t ms, char *out, size_t cap);

/**
 * The order of two cursors that are set (section 2 of the events'
 * design): one Redis by (ms, seq); a Cluster by (ms, slot, seq). <0, 0
 * or >0. A cursor that is not set comes before every one that is.
 */
int fg_ev_cursor_cmp(const struct fg_ev_cursor *a, const struct fg_ev_cursor *b);

/** The bytes of item `it`'s Server-Sent Events frame, "id: ID\ndata:
 *  JSON\n\n": a plain message, whose type an EventSource names
 *  "message"; the kind is the JSON's. */
size_t fg_sse_frame_len(const struct fg_evitem *it);

/** Writes that frame at out (fg_sse_frame_len() bytes, no NUL); returns
 *  its length. */
size_t fg_sse_frame(const struct fg_evitem *it, char *out);

/**
 * Is a lock shown to a reader of `prefix`? Its name starts with prefix.
 * (Whether the reader's principal may observe it is the caller's
 * question: base/auth.h.)
 */
bool fg_ev_under(const struct fg_evitem *it, const char *prefix, size_t plen);

#endif
