/*
 * s3part.h - S3 mode's part of a proxied request (docs/s3.md): what the
 * flow (proxy/flow.c) keeps of it between its states, and the pieces it
 * builds from the request: the write set of its locks, the target and the
 * signing inputs of the request upstream, the DeleteObjects body read
 * before the checks. Private to proxy/.
 *
 * Invariant: the request upstream goes to the path and query this module
 * built, and only with them: the path canonical-encoded exactly as it is
 * signed (so the store's canonical URI is the gateway's), the query the
 * client's less its own signature's parameters, and the body the checked
 * one (DeleteObjects: the bytes whose keys were checked, byte for byte).
 * The store's credentials copied here are wiped when the part is freed.
 */
#ifndef FENCEGATE_PROXY_S3PART_H
#define FENCEGATE_PROXY_S3PART_H

#include <stdbool.h>
#include <stddef.h>

#include "access/access.h"
#include "base/awschunk.h"
#include "base/config.h"
#include "base/s3ops.h"
#include "base/sigv4.h"
#include "base/writeset.h"
#include "upstream/head.h"

struct fg_s3part {
	struct fg_s3_req r;              /* what the request is */
	struct fg_s3_locks locks;        /* and which locks it touches */
	struct fg_sigv4_auth auth;       /* the client's signature, verified */
	struct fg_s3_store_creds up;     /* the store's credentials its request
					    is signed with (a copy, wiped) */
	struct fg_sigv4_creds creds;     /* pointing into up */
	char *body;                      /* DeleteObjects: read whole first */
	size_t body_len, body_cap;
	bool body_over;                  /* it passed FG_S3_DELETE_BODY_MAX */
	/* the request upstream */
	char path[3 * FG_SIGV4_PATH_MAX + 3 * FG_S3_BUCKET_MAX + 16];
	size_t path_len;
	char query[FG_SIGV4_QUERY_MAX + 1];
	size_t query_len;
	char authority[FG_HOST_MAX + 16];
	char clen[24];                   /* the Content-Length it signed */
	struct fg_head_s3 sign;
	char seed[65];                   /* the gateway's seed signature */
	/* a streaming-signed body: checked and signed again chunk by chunk
	 * (base/awschunk.c); what it emitted that the transfer has not taken
	 * yet waits in out (at most a chunk and its framing) */
	struct fg_awschunk *chunk;
	char *out;
	size_t out_len, out_cap;
	bool chunk_ended;               /* fg_awschunk_end() was called */
	/* a chunk failed: the transfer upstream is ended, the rest of the
	 * client's body is read and dropped, then the refusal is answered */
	bool chunk_failed;
	bool chunk_bad_signature;       /* (that refusal's kind) */
};

/** A part for one request (caller owns: fg_s3part_free()). NULL without
 *  memory. */
struct fg_s3part *fg_s3part_new(void);

/** Wipes the credentials it holds and frees it. Accepts NULL. */
void fg_s3part_free(struct fg_s3part *p);

/** Takes one more piece of a DeleteObjects body (bounded: past
 *  FG_S3_DELETE_BODY_MAX it only notes body_over). false without
 *  memory. */
bool fg_s3part_body(struct fg_s3part *p, const char *data, size_t len);

/**
 * The write set of the request's locks, for the fence: each lock it
 * changes a write member checked against the request's sequencers
 * (FG_WS_SESSION_TOKEN); a read's lock a fenced-read member only when the
 * read carries a Fencing-Token header (`fenced_read`). A copy source is
 * read, never fenced: its right is the access step's.
 */
void fg_s3part_writeset(const struct fg_s3part *p, bool fenced_read,
			struct fg_writeset *ws);

/**
 * Builds the request upstream: its path (the upstream's base path, the
 * bucket, the key, canonical-encoded), its query (the client's, less the
 * presigned signature's parameters), the Host it goes with, and the
 * signing inputs (p->sign, pointing into p) for `cfg`'s region, at `now`
 * (seconds since the epoch), with the loop's signing-key cache. The
 * Content-Length the client signed is signed again with the body length
 * (`length`, unchanged on the way). false when a bound is passed.
 */
bool fg_s3part_upstream(struct fg_s3part *p, const struct fg_config *cfg,
			bool length_given, uint64_t length, int64_t now,
			struct fg_sigv4_cache *cache);

/** Is the body streaming-signed (its chunks checked and signed again)? */
bool fg_s3part_streaming(const struct fg_s3part *p);

/**
 * A streaming-signed body, once the request upstream was signed (p->seed):
 * the chunk checker, on the client's chain and the gateway's, for
 * `decoded` bytes of data (x-amz-decoded-content-length). 0, or -1 (bad
 * settings, no memory).
 */
int fg_s3part_chunk_start(struct fg_s3part *p, const struct fg_config *cfg,
			  uint64_t decoded, struct fg_sigv4_cache *cache);

/** The URL of the request upstream (base, then p's path and query) into
 *  out[cap]; false when it does not fit. */
bool fg_s3part_url(const struct fg_s3part *p, const struct fg_config *cfg,
		   char *out, size_t cap);

#endif
