/*
 * backend.h - what the upstream engine (xfer.c) and the clients that
 * carry its requests (libcurl's, curlx.c; the gateway's own, h1client.c)
 * say to each other. Private to upstream/.
 *
 * The engine hands a client the request as data (struct fg_up_request)
 * and a sink (struct fg_up_sink) it reports to; the client carries the
 * exchange through the operations of struct fg_up_backend. A client's
 * vocabulary stays its own: the answer's head comes as data, and whatever
 * ends an exchange is said as one of a few neutral outcomes, with a text
 * that says more when there is more to say. Everything runs on the
 * loop's thread.
 */
#ifndef FG_UPSTREAM_BACKEND_H
#define FG_UPSTREAM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The request's body. */
enum fg_up_body {
	FG_UP_BODY_NONE,
	FG_UP_BODY_LENGTH,   /* `length` bytes, from fill() */
	FG_UP_BODY_CHUNKED,  /* of a length not known, from fill(); sent
				chunked */
};

/* One request, as data. Lives only while the backend prepares it: what
 * the backend needs later, it copies (but fixed_body). */
struct fg_up_request {
	const char *method;        /* exactly what is sent */
	const char *url;           /* the upstream's URL, the path as given */
	const struct fg_up_header *headers; /* after the backend's own Host:
					       in order; an empty value stops
					       a header the client would add
					       of its own, and is not sent */
	size_t nheaders;
	enum fg_up_body body;
	uint64_t length;
	/* or the gateway's own question (its PROPFIND probe), with a body of
	 * its own: lives as long as the exchange */
	const char *fixed_body;
	size_t fixed_len;
	bool is_head;              /* a HEAD: its answer has no body */
	bool retryable;            /* may go out twice, the second time on a
				      new connection (a safe method, no
				      body); a write never does */
};

/* What fill() returns instead of a count: nothing now (the engine resumes
 * the sending when it has more), or never (the request is cut off with
 * its connection, so the upstream never completes it). */
#define FG_UP_FILL_PAUSE ((size_t)-1)
#define FG_UP_FILL_ABORT ((size_t)-2)

/* What the engine hands a backend for one exchange; every hook gets the
 * sink's arg. Never called after the exchange ended or was cancelled. */
struct fg_up_sink {
	/* the final head (an interim one is passed over): its status and
	 * headers (at most FG_UP_HEADERS_MAX; `cut`: more came) */
	void (*on_head)(void *arg, int status, const struct fg_up_header *h,
			size_t n, bool cut);
	/* how many body bytes on_body() may be handed now; when fewer than
	 * `want`, the receiving stops until resume_recv() */
	size_t (*room)(void *arg, size_t want);
	/* body bytes, never more than room() said; false: abort */
	bool (*on_body)(void *arg, const char *p, size_t n);
	/* up to max bytes of the request body into buf, asked right before
	 * they are sent (the engine's send gate is asked here): how many,
	 * 0 at its end, or FG_UP_FILL_PAUSE or FG_UP_FILL_ABORT */
	size_t (*fill)(void *arg, char *buf, size_t max);
	/* the request's last byte went */
	void (*on_sent)(void *arg);
	/* the exchange ended (once; it is gone when this is called) */
	void (*on_end)(void *arg, struct fg_up_outcome out);
};

/* A client of the upstream; `self` is the client, `ex` one exchange of
 * it (both the client's own types). */
struct fg_up_backend {
	/* An exchange for the request, made ready but not begun. NULL: the
	 * client does not carry this request, or no memory. */
	void *(*prepare)(void *self, const struct fg_up_request *rq,
			 const struct fg_up_sink *sink, void *arg);
	/* Begins it: false when nothing began (ex is still the caller's to
	 * cancel). */
	bool (*begin)(void *ex);
	/* room() said too little before and has room again */
	void (*resume_recv)(void *ex);
	/* fill() said FG_UP_FILL_PAUSE before and has more now */
	void (*resume_send)(void *ex);
	/* Has the last byte of a request whose sending the client does not
	 * report through on_sent() gone? NULL: it always reports. */
	bool (*sent)(const void *ex);
	/* Ends the exchange now, begun or not, without on_end(): its
	 * connection is closed when it was sending or reading. */
	void (*cancel)(void *ex);
	/* The exchanges that ended during the engine's turn are reported
	 * (on_end()); NULL: they always are at once. */
	void (*settle)(void *self);
};

#endif
