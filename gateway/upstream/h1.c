/*
 * h1.c - one HTTP/1.1 answer read from the upstream's bytes (h1.h).
 *
 * Invariants:
 * - Every head is handed on whole, once it ended, exactly once: its
 *   status and its headers in order (at most FG_UP_HEADERS_MAX, the
 *   head marked cut when more came).
 * - A chunked body's trailer is read and dropped: the head it would
 *   belong to has gone on already.
 * - An interim (1xx) answer's head is handed on and the final answer's
 *   follows it, as curl does; it has no body. Neither have a HEAD's,
 *   a 204's and a 304's answers, whatever their Content-Length says.
 * - Such an answer never leaves its connection reusable when the body it
 *   does not carry could still come: an answer to HEAD, and a 1xx, 204
 *   or 304 that announces one (a Content-Length above 0, or chunked). A
 *   store that sends that body anyway would otherwise hand its bytes to
 *   the next request on the connection as that request's answer.
 * - Anything http_parser refuses, a version other than 1.x, an upgrade
 *   nobody asked for, a header past FG_H1_LINE_MAX, and bytes that
 *   end before the answer does make the answer an error: the caller
 *   drops the connection and never forwards a guess.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "upstream/h1.h"

static struct fg_h1 *of(http_parser *p)
{
	return p->data;
}

/* Appends a piece of the header being read to the head's block (`keep`:
 * else it only counts against the bound); the block grows as it needs. */
static int put(struct fg_h1 *r, const char *p, size_t n, bool keep)
{
	if (n > FG_H1_LINE_MAX - r->line) {
		r->stopped = true;
		return -1;
	}
	r->line += n;
	if (!keep || r->cut)
		return 0;
	if (r->len + n > r->cap) {
		size_t cap = r->cap;
		while (cap < r->len + n)
			cap *= 2;
		char *b = realloc(r->buf, cap);
		if (!b) {
			r->stopped = true;
			return -1;
		}
		r->buf = b;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	return 0;
}

/* The head must be HTTP/1.x; http_parser knows its version once the
 * status line is read, which is before the head's first name or its
 * end. */
static int version(struct fg_h1 *r)
{
	if (r->version_ok)
		return 0;
	if (r->p.http_major != 1) {
		r->stopped = true; /* HTTP/1.1 was asked for */
		return -1;
	}
	r->version_ok = true;
	return 0;
}

/* The header read so far is one of the head's. */
static int flush(struct fg_h1 *r)
{
	if (!r->in_value)
		return 0;
	r->in_value = false;
	r->line = 0;
	if (r->cut)
		return 0;
	union fg_h1_hdr *h = &r->hdrs[r->nhdrs - 1];
	h->at.value_len = r->len - h->at.value;
	return 0;
}

/* A new header begins (its name's first piece). */
static int begin_header(struct fg_h1 *r)
{
	if (r->cut)
		return 0;
	if (r->nhdrs == FG_UP_HEADERS_MAX) {
		r->cut = true;
		return 0;
	}
	if (r->nhdrs == r->caphdrs) {
		size_t cap = r->caphdrs ? r->caphdrs * 2 : 16;
		union fg_h1_hdr *h = realloc(r->hdrs, cap * sizeof(*h));
		if (!h) {
			r->stopped = true;
			return -1;
		}
		r->hdrs = h;
		r->caphdrs = cap;
	}
	union fg_h1_hdr *h = &r->hdrs[r->nhdrs++];
	h->at.name = r->len;
	h->at.name_len = 0;
	h->at.value = r->len;
	h->at.value_len = SIZE_MAX; /* (no value yet: flush()) */
	return 0;
}

static int on_begin(http_parser *p)
{
	struct fg_h1 *r = of(p);
	r->len = 0;
	r->line = 0;
	r->nhdrs = 0;
	r->cut = false;
	r->in_value = false;
	r->version_ok = false;
	r->in_trailer = false;
	r->any_field = false;
	return 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
	struct fg_h1 *r = of(p);
	if (r->in_trailer)
		return 0;
	if (version(r) != 0)
		return -1;
	if (r->in_value || !r->any_field) {
		if (flush(r) != 0 || begin_header(r) != 0)
			return -1;
		r->any_field = true;
	}
	if (put(r, at, n, true) != 0)
		return -1;
	if (!r->cut)
		r->hdrs[r->nhdrs - 1].at.name_len += n;
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
	struct fg_h1 *r = of(p);
	if (r->in_trailer)
		return 0;
	if (!r->in_value) {
		r->in_value = true;
		if (put(r, ": ", 2, false) != 0)
			return -1;
		if (!r->cut)
			r->hdrs[r->nhdrs - 1].at.value = r->len;
	}
	return put(r, at, n, true);
}

/* The head ended: handed on whole. */
static int hand(struct fg_h1 *r)
{
	/* a name without a value is no header */
	if (r->nhdrs > 0 && r->hdrs[r->nhdrs - 1].at.value_len == SIZE_MAX)
		r->nhdrs--;
	/* (the block moves no more: offsets become pointers, in place) */
	for (size_t i = 0; i < r->nhdrs; i++) {
		union fg_h1_hdr *h = &r->hdrs[i];
		size_t name = h->at.name, value = h->at.value;
		h->h.name = r->buf + name;
		h->h.value = r->buf + value;
	}
	bool ok = r->hooks.head(r->arg, (int)r->p.status_code,
				r->nhdrs ? &r->hdrs[0].h : NULL, r->nhdrs, r->cut);
	r->nhdrs = 0;
	r->len = 0;
	r->cut = false;
	if (!ok) {
		r->stopped = true;
		return -1;
	}
	return 0;
}

/* 1: no body follows this head (http_parser's F_SKIPBODY). */
static int on_head_end(http_parser *p)
{
	struct fg_h1 *r = of(p);
	if (version(r) != 0 || flush(r) != 0 || hand(r) != 0)
		return -1;
	r->in_trailer = true;
	unsigned s = p->status_code;
	bool bodiless = r->head || s / 100 == 1 || s == 204 || s == 304;
	if (r->head || (bodiless && ((p->flags & F_CHUNKED) ||
				     (p->content_length != ULLONG_MAX &&
				      p->content_length > 0))))
		r->unframed = true;
	return bodiless;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct fg_h1 *r = of(p);
	if (!r->hooks.body(r->arg, at, n)) {
		r->stopped = true;
		return -1;
	}
	return 0;
}

static int on_complete(http_parser *p)
{
	struct fg_h1 *r = of(p);
	if (p->status_code < 200)
		return 0; /* an interim answer: the final one follows */
	r->done = true;
	/* stop at the answer's last byte: what follows is not this
	 * request's (fg_h1_feed() notes it) */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_begin,
	.on_header_field = on_field,
	.on_header_value = on_value,
	.on_headers_complete = on_head_end,
	.on_body = on_body,
	.on_message_complete = on_complete,
};

int fg_h1_init(struct fg_h1 *r, bool head, const struct fg_h1_hooks *hooks,
	       void *arg)
{
	memset(r, 0, sizeof(*r));
	r->cap = 512; /* most heads fit; put() grows it */
	r->buf = malloc(r->cap);
	if (!r->buf)
		return -1;
	http_parser_init(&r->p, HTTP_RESPONSE);
	r->p.data = r;
	r->hooks = *hooks;
	r->arg = arg;
	r->head = head;
	return 0;
}

void fg_h1_free(struct fg_h1 *r)
{
	free(r->buf);
	r->buf = NULL;
	free(r->hdrs);
	r->hdrs = NULL;
}

enum fg_h1_state fg_h1_feed(struct fg_h1 *r, const char *p, size_t n)
{
	if (r->stopped)
		return FG_H1_ERROR;
	if (r->done) {
		r->excess = r->excess || n > 0;
		return FG_H1_DONE;
	}
	if (n == 0)
		return FG_H1_MORE;
	r->any = true;
	size_t used = http_parser_execute(&r->p, &settings, p, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&r->p);
	if (r->stopped || (e != HPE_OK && e != HPE_PAUSED) || r->p.upgrade)
		goto error;
	if (r->done) {
		r->excess = used < n;
		return FG_H1_DONE;
	}
	if (used != n)
		goto error;
	return FG_H1_MORE;
error:
	r->stopped = true;
	return FG_H1_ERROR;
}

enum fg_h1_state fg_h1_eof(struct fg_h1 *r)
{
	if (r->done)
		return FG_H1_DONE;
	if (r->stopped || !r->any)
		goto error;
	/* a body read to the close ends here; anything else is cut short */
	http_parser_execute(&r->p, &settings, NULL, 0);
	if (r->done && !r->stopped) {
		r->excess = true; /* (the connection is gone: never reused) */
		return FG_H1_DONE;
	}
error:
	r->stopped = true;
	return FG_H1_ERROR;
}

bool fg_h1_any(const struct fg_h1 *r)
{
	return r->any;
}

bool fg_h1_reusable(const struct fg_h1 *r)
{
	return r->done && !r->excess && !r->stopped && !r->unframed &&
	       http_should_keep_alive(&r->p);
}
