/*
 * framing.h - strict request framing on top of libmicrohttpd. Private to
 * the gateway.
 *
 * libmicrohttpd 0.9.75 is lenient: it cuts a request target at a NUL,
 * keeps a bare CR inside a header value, takes chunked over a
 * Content-Length it was also given. Every request passes this check before
 * anything else looks at it, so what the gateway checks and forwards is
 * one unambiguous message.
 */
#ifndef FENCEGATE_FRAMING_H
#define FENCEGATE_FRAMING_H

#include <stdbool.h>
#include <microhttpd.h>

struct fg_req;

/** Called from the URI callback: remembers where the target lies. */
void fg_framing_note_target(struct fg_req *req, const char *uri);

/**
 * Checks the request line and head: no NUL, CR, LF, space or control byte
 * in the target; no CR, LF or NUL in a header value and only token
 * characters in a header name; at most one Host; at most one
 * Content-Length, all digits;
 * Transfer-Encoding only "chunked", and never with Content-Length. Sets
 * req->body_chunked / req->body_length. true when the request may go on;
 * false when the 400 answer is queued (*ret is its result).
 */
bool fg_framing_ok_or_respond(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *version,
			      enum MHD_Result *ret);

/** How many times header `name` came (names without case), and the last
 *  one's value in *last (NULL when none; it lives as long as the
 *  request). For the headers whose repetition is refused. */
unsigned fg_header_count(struct MHD_Connection *c, const char *name,
			 const char **last);

#endif
