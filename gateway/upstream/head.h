/*
 * head.h - the request upstream as data (backend.h), from the client's
 * request: its headers as the policy passes them (headers.h), then the
 * gateway's own (X-Forwarded-For, -Proto, -Host, Via, ...), then the
 * owner's lines. Private to upstream/.
 */
#ifndef FG_UPSTREAM_HEAD_H
#define FG_UPSTREAM_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "upstream/backend.h"
#include "base/sigv4.h"

struct fg_config;

/* S3 mode: how the request upstream is signed again (head.c). Lent by the
 * request's owner for one fg_head_build(). */
struct fg_head_s3 {
	const char *signed_headers;   /* the client's SignedHeaders: which of
					 its headers pass */
	const char *payload_hash;     /* its x-amz-content-sha256 (or
					 UNSIGNED-PAYLOAD), sent and signed */
	const char *path;             /* the path and query as sent (in the
					 URL too); the path canonical */
	size_t path_len;
	const char *query;
	size_t query_len;
	const char *authority;        /* the upstream's Host, as sent */
	const char *content_length;   /* the client signed its Content-Length:
					 this value (the body's, unchanged);
					 NULL: it did not */
	const struct fg_sigv4_creds *creds; /* the gateway's at the store */
	const char *session_token;    /* theirs, or NULL */
	int64_t now;                  /* seconds since the epoch */
	struct fg_sigv4_cache *cache; /* the loop's */
	char *seed;                   /* out, 65 bytes: the signature (the
					 seed of a streaming-signed body) */
};

/* A loop's block for the request being made, reused (a list node and a
 * copy per line were a tenth of a GET's instructions): its header lines,
 * each NUL-ended, then the headers as data, pointing into them. Zeroed to
 * begin. */
struct fg_head {
	char *rh;
	size_t rh_len, rh_cap;
	struct fg_up_header *rqh;
	size_t caprqh;
};

/* What a request is made of. */
struct fg_head_in {
	struct MHD_Connection *conn;  /* the client's request */
	const struct fg_config *cfg;
	const char *method;           /* exactly what is sent */
	const char *url;
	unsigned hdr_flags;           /* FG_HDR_* (headers.h) */
	bool tls;                     /* the client came over https */
	const char *host;             /* X-Forwarded-Host; NULL: its Host */
	const char *const *extra;     /* lines after the gateway's own,
					 NULL-terminated; NULL for none */
	enum fg_up_body body;
	uint64_t length;              /* FG_UP_BODY_LENGTH */
	const char *fixed_body;       /* the gateway's own question's */
	size_t fixed_len;
	const struct fg_head_s3 *s3;  /* S3 mode: signed again; else NULL */
};

/** The request as data in *rq, its headers in b (valid until b is built
 *  again or freed). false when a header could not be added (bounded like
 *  every header) or without memory. */
bool fg_head_build(struct fg_head *b, const struct fg_head_in *in,
		   struct fg_up_request *rq);

/** Frees what b holds. */
void fg_head_free(struct fg_head *b);

#endif
