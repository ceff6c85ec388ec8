/*
 * h1.h - one HTTP/1.1 answer read from the upstream's bytes, for the
 * gateway's own upstream client (xfer.c); the parsing is http_parser's.
 *
 * The reader does no I/O: the caller feeds it what it read, and it hands
 * the answer on parsed: each head whole once it has ended (its status and
 * its headers, names and values as they came; an interim 1xx head
 * included), then the body's bytes, chunked framing undone (a trailer is
 * dropped). A body is never handed more bytes than were fed, so a caller
 * that feeds at most the room it has never overflows it.
 */
#ifndef FG_UPSTREAM_H1_H
#define FG_UPSTREAM_H1_H

#include <stdbool.h>
#include <stddef.h>

#include <http_parser.h>

#include "upstream/backend.h"

/* The longest header ("Name: value") read; a longer one is a malformed
 * answer (curl's own bound is 100 KiB; http_parser bounds a whole head at
 * 80 KiB). */
#define FG_H1_LINE_MAX (16 * 1024)

/* A header of the head being read: where its name and value are in the
 * head's block (offsets: the block moves as it grows), then, once the
 * head is handed on, the header itself. */
union fg_h1_hdr {
	struct {
		size_t name, name_len, value, value_len;
	} at;
	struct fg_up_header h;
};

struct fg_h1_hooks {
	/* a head, once it ended: its status and its headers (at most
	 * FG_UP_HEADERS_MAX; `cut`: more came); false: stop, the answer is
	 * refused */
	bool (*head)(void *arg, int status, const struct fg_up_header *h,
		     size_t n, bool cut);
	/* body bytes; false: stop */
	bool (*body)(void *arg, const char *p, size_t n);
};

enum fg_h1_state {
	FG_H1_MORE,  /* the answer goes on: feed more */
	FG_H1_DONE,  /* the answer is complete */
	FG_H1_ERROR, /* malformed, or a hook said stop: the connection is lost */
};

struct fg_h1 {
	http_parser p;
	struct fg_h1_hooks hooks;
	void *arg;
	bool head;          /* the request was a HEAD: no body follows */
	bool version_ok;    /* this head's version was found HTTP/1.x */
	bool in_value;      /* the last piece of the head was a value's */
	bool any_field;     /* this head has begun its first header */
	bool in_trailer;    /* the head has ended: names and values are a
			       trailer's */
	bool stopped;       /* a hook said stop, or a line was too long */
	bool done;          /* the final answer is complete */
	bool excess;        /* bytes came after it */
	bool unframed;      /* a body it does not carry could still come: a
			       HEAD's answer, or a 1xx, 204 or 304 that
			       announced one */
	bool any;           /* a byte of the answer came */
	bool cut;           /* this head had more than FG_UP_HEADERS_MAX */
	char *buf;          /* this head's names and values, back to back
			       (owned; cap bytes) */
	size_t len, cap;
	size_t line;        /* the bytes of the header being read, as
			       "Name: value" */
	union fg_h1_hdr *hdrs; /* this head's headers (owned) */
	size_t nhdrs, caphdrs;
};

/** Ready to read the answer to one request (HEAD or not). 0, or -1 (no
 *  memory). */
int fg_h1_init(struct fg_h1 *r, bool head, const struct fg_h1_hooks *hooks,
	       void *arg);

/** Frees what fg_h1_init() took. */
void fg_h1_free(struct fg_h1 *r);

/** Feeds n bytes (n > 0). Once DONE, bytes past the answer make
 *  fg_h1_reusable() false. */
enum fg_h1_state fg_h1_feed(struct fg_h1 *r, const char *p, size_t n);

/** The upstream closed its side: DONE when that ends the answer (a body
 *  read to the close), else ERROR. */
enum fg_h1_state fg_h1_eof(struct fg_h1 *r);

/** Did any byte of the answer come? (None: a reused connection that was
 *  closed under the request.) */
bool fg_h1_any(const struct fg_h1 *r);

/** May the connection carry another request? (The answer is complete,
 *  keep-alive by its version and Connection header, nothing after it,
 *  and not one whose unsent body could still come: no HEAD's answer, no
 *  1xx, 204 or 304 that announced a body.) */
bool fg_h1_reusable(const struct fg_h1 *r);

#endif
