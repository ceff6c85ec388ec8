/*
 * backend.h - what the upstream engine (xfer.c) and the clients that
 * carry its requests (libcurl's, curlx.c; the gateway's own, h1client.c)
 * say to each other. Private to upstream/.
 *
 * A client's vocabulary stays its own: whatever ends an exchange is said
 * here as one of a few neutral outcomes, with a text that says more when
 * there is more to say.
 */
#ifndef FG_UPSTREAM_BACKEND_H
#define FG_UPSTREAM_BACKEND_H

#include <stddef.h>

/* One header of a head: its name and value as they came (the value's
 * leading blanks gone, nothing else), not NUL-ended. */
struct fg_up_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/* The most headers a client hands on of one head; a head with more is
 * handed on cut, and refused. */
#define FG_UP_HEADERS_MAX 1024

/* How an exchange with the upstream ended. */
enum fg_up_end {
	FG_UP_OK,            /* the whole answer came */
	FG_UP_UNREACHABLE,   /* no connection (refused, unresolved) */
	FG_UP_TLS,           /* the upstream's TLS failed */
	FG_UP_TIMEOUT,       /* a bound ran out, or the send gate closed */
	FG_UP_SEND_FAILED,   /* the request could not be sent */
	FG_UP_NO_ANSWER,     /* the connection closed before any answer */
	FG_UP_CUT_SHORT,     /* it closed, or failed, in the middle of it */
	FG_UP_MALFORMED,     /* the answer broke HTTP/1.1 */
	FG_UP_ABORTED,       /* the body was refused, or the client left */
	FG_UP_NOT_SENT_AGAIN, /* it would have had to go out a second time */
	FG_UP_NO_MEMORY,     /* it could not begin */
};

struct fg_up_outcome {
	enum fg_up_end end;
	/* what the client had to say of it when that says more than the
	 * end does (static text), else NULL */
	const char *why;
};

#endif
