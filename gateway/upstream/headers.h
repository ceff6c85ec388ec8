/*
 * headers.h - the header policy of a proxied request: which of the
 * client's headers go upstream, which of the upstream's come back, and
 * what the gateway adds. Pure functions (no libmicrohttpd, no curl).
 * Private to the gateway.
 *
 * Invariant: a header that describes one hop (RFC 9110 7.6.1), one named
 * in that hop's Connection header, or one the gateway speaks for itself
 * (credentials for the gateway, forwarding, framing, the Destination)
 * never crosses the gateway as the client or the upstream sent it.
 */
#ifndef FENCEGATE_UPSTREAM_HEADERS_H
#define FENCEGATE_UPSTREAM_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

/* How a request is forwarded (fg_hdr_pass(), fg_hdr_add()). */
enum {
	FG_HDR_SHALLOW = 1, /* the client's Depth gives way to "Depth: 0" */
	FG_HDR_PROBE = 2,   /* the gateway's own question: no header that
			       describes a body, and "Depth: 0" */
	FG_HDR_S3 = 4,      /* S3 mode: only what the client signed passes
			       (fg_hdr_s3_pass()), and the gateway signs
			       again (head.c) */
};

/** Room for every X-Forwarded-For value of a request, joined. */
#define FG_HDR_XFF_MAX 4096
/** The longest header line the gateway adds. */
#define FG_HDR_LINE_MAX 8192

/** Does header `name` (`len` bytes, no NUL needed) describe one hop, or
 *  is it framing the gateway sets itself (Content-Length)? Either way it
 *  is never passed on, in either direction. */
bool fg_hdr_hop_by_hop(const char *name, size_t len);

/** Does the Connection header value `connection` (NULL: none) name
 *  header `name`? Such a header describes the hop too. */
bool fg_hdr_in_connection(const char *connection, const char *name);

/** Is `name` a request header the gateway keeps for itself: its own
 *  credentials (sequencers, leases, Fence-Authorization), the forwarding
 *  headers it sets, and the framing and Destination it writes? */
bool fg_hdr_gateway_owned(const char *name);

/** Is `name` X-Forwarded-For (its values are joined, then extended with
 *  the client's address by fg_hdr_add())? */
bool fg_hdr_is_xff(const char *name);

/** Is the client's request header `name` passed on upstream as it came?
 *  `connection` is the request's Connection header (NULL: none), `flags`
 *  FG_HDR_*. X-Forwarded-For is not: see fg_hdr_xff_join(). */
bool fg_hdr_pass(const char *name, const char *connection, unsigned flags);

/**
 * S3 mode: is the client's header `name` passed on? Only one it signed
 * (`signed_list`, its SignedHeaders: lower-case names joined by ';') that
 * the policy passes (fg_hdr_pass()) and that is not the client's own
 * credential or signature material (Authorization, x-amz-date,
 * x-amz-security-token, x-amz-content-sha256: the gateway writes its own).
 */
bool fg_hdr_s3_pass(const char *name, const char *connection,
		    const char *signed_list);

/** Is `name` (len bytes) one of the lower-case names of `list` (joined by
 *  ';'), case ignored? */
bool fg_hdr_in_signed(const char *list, const char *name, size_t len);

/** Joins one more X-Forwarded-For value onto buf (`*len` bytes used of
 *  `cap`, NUL-terminated). 0, or -1 when it would not fit (the request
 *  cannot be forwarded: its headers are bounded like every header). */
int fg_hdr_xff_join(char *buf, size_t cap, size_t *len, const char *value);

/* What the headers the gateway adds are made of. */
struct fg_hdr_forward {
	const char *xff;       /* the client's X-Forwarded-For values joined,
				  or NULL / "" */
	const char *client_ip; /* the client's address */
	bool tls;              /* the client came over https */
	const char *host;      /* the client's Host header, or NULL */
	bool has_accept;       /* the client sent Accept (else curl would add
				  one: "Accept:" removes it) */
	unsigned flags;        /* FG_HDR_* */
};

/** Calls emit() with each header line the gateway adds to a request, in
 *  order: X-Forwarded-For, -Proto, -Host, Via, an empty Expect (curl
 *  would add one), "Depth: 0" for a shallow request or a probe, and an
 *  empty Accept when the client sent none. false when a line would pass
 *  FG_HDR_LINE_MAX or emit() returned false (nothing more is emitted). */
bool fg_hdr_add(const struct fg_hdr_forward *f,
		bool (*emit)(void *arg, const char *line), void *arg);

#endif
