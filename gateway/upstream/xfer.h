/*
 * xfer.h - a loop's transfers to the upstream, one streaming transfer per
 * proxied request, carried by the gateway's own HTTP/1.1 client or by
 * libcurl (upstream/backend.h), both driven on the loop's libevent base.
 * Private to the gateway.
 *
 * It knows nothing of fencing: an owner that must bound what is sent
 * hands it a send gate, asked before every byte goes, and a done hook
 * (struct fg_xfer_hooks), and learns the rest through fg_xfer_stage()
 * and fg_xfer_end_now(). See xfer.c for its invariants.
 */
#ifndef FENCEGATE_UPSTREAM_XFER_H
#define FENCEGATE_UPSTREAM_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

struct event_base;
struct fg_config;
struct fg_head_s3;
struct fg_xfers;
struct fg_xfer;

/* What the loop lends its transfers. */
struct fg_xfers_host {
	struct event_base *base;
	const struct fg_config *cfg;
	/** Resumes a suspended connection and has the daemon run on the
	 *  loop's next turn (libmicrohttpd 0.9.75 does not wake itself). */
	void (*resume)(void *ctx, struct MHD_Connection *c);
	/** Has the daemon read a running connection again on the loop's
	 *  next turn (a hang-up it would miss). */
	void (*reread)(void *ctx, struct MHD_Connection *c);
	void *ctx;
};

/** The loop's multi handle. NULL on failure. Caller owns it. */
struct fg_xfers *fg_xfers_create(const struct fg_xfers_host *host);

/** Ends every transfer (their connections are resumed, and answered by
 *  their owners). */
void fg_xfers_shutdown(struct fg_xfers *xs);

/** Ends every transfer and frees the multi handle. Call after HTTP has
 *  stopped (no request holds a transfer). Accepts NULL. */
void fg_xfers_destroy(struct fg_xfers *xs);

/** A transfer for connection c, not begun: one reference, the caller's
 *  (the request's, given back by fg_xfer_close()). NULL without memory. */
struct fg_xfer *fg_xfer_create(struct fg_xfers *xs, struct MHD_Connection *c);

/* What an owner that bounds the sending needs of its transfer; all called
 * on the loop's thread. */
struct fg_xfer_hooks {
	/** The send gate: may bytes go upstream now? Asked inside the
	 *  client's read side (its fill()) before each piece of the body,
	 *  and before the transfer is handed to its client. false aborts
	 *  a transfer still sending (its connection closed) and never
	 *  begins one that was not begun; the transfer then ends timed
	 *  out. */
	bool (*may_send)(void *arg);
	/** The transfer ended: `answered` (its client finished it) or not,
	 *  and whether it had been handed to its client (`began`; if so its
	 *  request may have reached the upstream). Once. */
	void (*done)(void *arg, bool answered, bool began);
	/** The transfer is freed: arg is not used again. */
	void (*freed)(void *arg);
	void *arg;
};

/* One upstream request. */
struct fg_xfer_spec {
	const char *url;           /* copied */
	const char *method;        /* copied; exactly what is sent */
	unsigned hdr_flags;        /* FG_HDR_* (upstream/headers.h) */
	bool tls;                  /* the client came over https */
	const char *host;          /* the authority the client asked for
				      (X-Forwarded-Host); NULL: its Host */
	const char *const *extra;  /* header lines after the gateway's own,
				      NULL-terminated; NULL for none */
	/* the client's body (fg_xfer_feed()), as framed: */
	bool chunked;              /* chunked, else length bytes */
	uint64_t length;
	bool length_given;         /* a Content-Length came */
	/* or, for the gateway's own question, a body of its own (copied by
	 * curl: no), whose answer is kept for the gateway, never sent on:
	 * fg_xfer_kept() */
	const char *kept_body;     /* lives as long as the transfer */
	size_t kept_body_len;
	/* or a body the gateway read whole before its checks (S3's
	 * DeleteObjects), sent as it came and answered as any other */
	const char *whole_body;    /* lives as long as the transfer */
	size_t whole_body_len;
	/* S3 mode: signed again on the way (upstream/head.h) */
	const struct fg_head_s3 *s3;
};

/** Starts the upstream request of transfer x on the loop's next turn,
 *  with the client's headers as policy allows (headers.h), then the
 *  spec's. With hooks (NULL: none), which x calls from then on. A kept
 *  transfer suspends its connection until it ends. 0, or -1 (x stays not
 *  begun, hooks not taken). */
int fg_xfer_start(struct fg_xfer *x, const struct fg_xfer_spec *spec,
		  const struct fg_xfer_hooks *hooks);

/** Another reference (a call in flight that will need x). */
void fg_xfer_hold(struct fg_xfer *x);
/** Gives one back; the last frees x. */
void fg_xfer_put(struct fg_xfer *x);

/** The request ended (completed, or the client went away): a transfer
 *  still running is aborted; gives back the request's reference. */
void fg_xfer_close(struct fg_xfer *x);

/** The hooks' arg, or NULL without hooks. */
void *fg_xfer_owner(const struct fg_xfer *x);

/** Is x a kept transfer (the gateway's own question)? */
bool fg_xfer_is_kept(const struct fg_xfer *x);

/* Where a transfer is. */
enum fg_xfer_stage {
	FG_XFER_QUEUED,  /* not handed to its client yet */
	FG_XFER_SENDING, /* its request is going out */
	FG_XFER_SENT,    /* the request's last byte left */
	FG_XFER_ENDED,
};
enum fg_xfer_stage fg_xfer_stage(const struct fg_xfer *x);

/** Ends a transfer now, timed out (its connection to the upstream closed,
 *  its client's connection resumed); one started but not handed to its
 *  client yet never is. Not from inside curl's callbacks. */
void fg_xfer_end_now(struct fg_xfer *x);

/** Hands part of the request body over: takes what fits in the
 *  transfer's buffer (*size is left with the rest) and suspends the
 *  connection while the rest waits. A transfer that ended, or has no
 *  body, takes it all and drops it. Returns the bytes kept. */
size_t fg_xfer_feed(struct fg_xfer *x, const char *data, size_t *size);

/** The request body is complete. true: the answer's head is in or the
 *  transfer ended: answer now; false: the connection is suspended until
 *  one of them. */
bool fg_xfer_body_end(struct fg_xfer *x);

/* Why a transfer ended without an answer. */
enum fg_xfer_failure {
	FG_XFER_UNAVAILABLE, /* unreachable, refused, broken */
	FG_XFER_TIMEOUT,
};

/* What the client is to be answered, once the body is in and the answer's
 * head came or the transfer ended. */
enum fg_xfer_answer_kind {
	/* the upstream's answer: its status, its head and its streamed
	 * body in `response` (NULL without memory) */
	FG_XFER_ANSWERED,
	/* its head had more headers than the gateway forwards */
	FG_XFER_TOO_MANY_HEADERS,
	/* its head came (`status`), then it failed before any of its body
	 * was in hand (nothing of it went to the client: it is answered as
	 * a failure, never with a head whose body cannot follow) */
	FG_XFER_BROKE_AFTER_HEAD,
	/* it ended without a head: `failure`; the transfer's owner (the
	 * hooks' arg, NULL without hooks) may have cut it */
	FG_XFER_FAILED,
};

struct fg_xfer_answer {
	enum fg_xfer_answer_kind kind;
	unsigned status;                /* ANSWERED, BROKE_AFTER_HEAD */
	struct MHD_Response *response;  /* ANSWERED; the caller's */
	enum fg_xfer_failure failure;   /* FAILED, BROKE_AFTER_HEAD */
	const char *why;                /* the failure said more, else NULL */
	void *owner;
};

/** The answer to the client of a transfer whose head is in or that
 *  ended. An answered one's headers are the upstream's, Location and
 *  Content-Location rewritten as the settings say (for `scheme` and the
 *  client's `host`); its body streams from the transfer (the response
 *  holds a reference). */
struct fg_xfer_answer fg_xfer_answer(struct fg_xfer *x, const char *scheme,
				     const char *host);

/** A header of the answer of a kept transfer that ended: the first value
 *  of the header `name` (case ignored), or NULL; *count says how many
 *  came. Lives as long as the transfer. */
const char *fg_xfer_kept_header(const struct fg_xfer *x, const char *name,
				unsigned *count);

/** The answer of a kept transfer. false while it runs (the connection is
 *  then suspended until it ends); else true, with *status 0 when nothing
 *  was answered, and the answer's first bytes. */
bool fg_xfer_kept(struct fg_xfer *x, int *status, const char **body,
		  size_t *len);

/** What the transfer leaves in the request's record: the upstream's
 *  status (0: none), its duration (-1: not begun or not ended), the body
 *  bytes handed to the client. */
void fg_xfer_note(const struct fg_xfer *x, int *status, int64_t *ns,
		  uint64_t *sent);

#endif
