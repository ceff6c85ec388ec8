/*
 * h1.h - one HTTP/1.1 answer read from the upstream's bytes, for the
 * gateway's own upstream client (xfer.c); the parsing is http_parser's.
 *
 * The reader does no I/O: the caller feeds it what it read, and it hands
 * the answer on as a libcurl transfer would have: the status line and
 * every header line one by one, each with its CRLF and a NUL after it
 * ("HTTP/1.1 200\r\n", "Name: value\r\n", then "\r\n" at the end of
 * each head, an interim 1xx head included), then the body's
 * bytes, chunked framing undone (a trailer is dropped). A body is never handed more bytes than
 * were fed, so a caller that feeds at most the room it has never
 * overflows it.
 */
#ifndef FG_UPSTREAM_H1_H
#define FG_UPSTREAM_H1_H

#include <stdbool.h>
#include <stddef.h>

#include <http_parser.h>

/* The longest head line handed on; a longer one is a malformed answer
 * (curl's own bound is 100 KiB; http_parser bounds a whole head at
 * 80 KiB). */
#define FG_H1_LINE_MAX (16 * 1024)

struct fg_h1_hooks {
	/* a head line, with its CRLF; false: stop, the answer is refused */
	bool (*line)(void *arg, const char *line, size_t len);
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
	bool status_out;    /* this head's status line was handed on */
	bool in_value;      /* the last piece of the head was a value's */
	bool in_trailer;    /* the head has ended: names and values are a
			       trailer's */
	bool stopped;       /* a hook said stop, or a line was too long */
	bool done;          /* the final answer is complete */
	bool excess;        /* bytes came after it */
	bool unframed;      /* a body it does not carry could still come: a
			       HEAD's answer, or a 1xx, 204 or 304 that
			       announced one */
	bool any;           /* a byte of the answer came */
	char *buf;          /* the line being put together (owned; cap
			       bytes, at most FG_H1_LINE_MAX + 3) */
	size_t len, cap;
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
