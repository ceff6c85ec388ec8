/*
 * awschunk.h - an S3 `aws-chunked` body sent with `x-amz-content-sha256:
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD`, verified against the client's chain
 * of chunk signatures and signed again, chunk by chunk, for the upstream.
 * Private to the gateway; pure (no I/O), so that it is unit-tested and
 * fuzzed.
 *
 * The body is `<hex-size>;chunk-signature=<64 hex>\r\n<data>\r\n`,
 * repeated, ending with `0;chunk-signature=<64 hex>\r\n\r\n`, and nothing
 * after it: the size 1 to 16 hex digits of either case, no leading zero,
 * the signature 64 lowercase hex digits, no other extension. Each chunk's
 * signature is the hex HMAC-SHA256, under the signing key, of
 *
 *   "AWS4-HMAC-SHA256-PAYLOAD\n" <amz-date> "\n" <scope> "\n"
 *   <previous signature> "\n" <hex SHA-256 of ""> "\n"
 *   <hex SHA-256 of the chunk's data>
 *
 * where the previous signature of the first chunk is the seed: the
 * request's own (Authorization) signature.
 *
 * Invariants: a chunk is emitted, with the upstream's signature in place of
 * the client's, only once the client's signature of it verified; the last
 * data chunk (the one that completes x-amz-decoded-content-length) is
 * emitted only by fg_awschunk_end(), together with the final zero-length
 * chunk, once that one verified and no byte followed it: the upstream
 * never gets every declared byte of a body that fails in any way. The hex
 * size is emitted as the client wrote it and a
 * signature is always 64 hex digits: the emitted body is exactly as long
 * as the client's. At most one chunk is held, and no chunk over the
 * caller's maximum is held: memory is bounded by that maximum.
 */
#ifndef FENCEGATE_AWSCHUNK_H
#define FENCEGATE_AWSCHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FG_AWSCHUNK_KEY_LEN 32            /* a SigV4 signing key (kSigning) */
#define FG_AWSCHUNK_SIG_LEN 64            /* hex digits of a signature */
#define FG_AWSCHUNK_MAX_DEFAULT (16u << 20) /* max_chunk when 0 is given */
#define FG_AWSCHUNK_DATE_MAX 32           /* bytes of an amz-date, at most */
#define FG_AWSCHUNK_SCOPE_MAX 256         /* bytes of a credential scope */

enum fg_awschunk_err {
	FG_AWSCHUNK_OK = 0,
	FG_AWSCHUNK_FRAMING,       /* not the aws-chunked grammar, or bytes
				      after the final chunk */
	FG_AWSCHUNK_BAD_SIGNATURE, /* a chunk's signature does not verify */
	FG_AWSCHUNK_TOO_BIG,       /* a chunk over the maximum */
	FG_AWSCHUNK_LENGTH,        /* the chunks' data is not
				      x-amz-decoded-content-length bytes */
	FG_AWSCHUNK_TRUNCATED,     /* end() before the final chunk */
	FG_AWSCHUNK_EMIT,          /* the emit callback refused bytes */
	FG_AWSCHUNK_NO_MEMORY,
	FG_AWSCHUNK_CRYPTO,        /* OpenSSL failed */
	FG_AWSCHUNK_INVALID,       /* fg_awschunk_create() given bad settings */
};

/**
 * Takes n (> 0) bytes of the re-signed body, in order; p is valid only
 * during the call. Returns false to stop: the feed then fails with
 * FG_AWSCHUNK_EMIT and nothing more is emitted.
 */
typedef bool (*fg_awschunk_emit_fn)(void *arg, const char *p, size_t n);

/** One side's chain: what its chunk signatures are made of. */
struct fg_awschunk_side {
	const unsigned char *key; /* FG_AWSCHUNK_KEY_LEN bytes: the derived
				     signing key, not the secret key */
	const char *amz_date;     /* x-amz-date, as in the Authorization's
				     string to sign: "20130524T000000Z" */
	const char *scope;        /* "20130524/us-east-1/s3/aws4_request" */
	const char *seed;         /* the request's signature: 64 lowercase
				     hex digits */
};

struct fg_awschunk_config {
	struct fg_awschunk_side client;   /* the chain the body is checked on */
	struct fg_awschunk_side upstream; /* the chain it is signed on again */
	uint64_t decoded_length;          /* x-amz-decoded-content-length */
	size_t max_chunk;                 /* the largest chunk taken (its data
					     bytes); 0: FG_AWSCHUNK_MAX_DEFAULT */
	fg_awschunk_emit_fn emit;
	void *emit_arg;
};

struct fg_awschunk;

/**
 * Makes the state of one body. Every string and key of cfg is copied
 * (cfg need not outlive the call). Returns FG_AWSCHUNK_OK and sets *out,
 * which the caller owns and frees with fg_awschunk_destroy(); else
 * FG_AWSCHUNK_INVALID (a NULL key, string or callback, a date or scope
 * too long or holding a control character, a seed that is not 64
 * lowercase hex) or FG_AWSCHUNK_NO_MEMORY, and *out is NULL.
 */
enum fg_awschunk_err fg_awschunk_create(const struct fg_awschunk_config *cfg,
					struct fg_awschunk **out);

/**
 * Takes the next n bytes of the client's body, split anywhere. Emits what
 * may be forwarded so far through cfg->emit, possibly nothing; never the
 * last data chunk nor the final chunk (see fg_awschunk_end()). Returns
 * FG_AWSCHUNK_OK, or the error that ends the body: the first error is
 * kept, and every later feed() and end() returns it without emitting.
 */
enum fg_awschunk_err fg_awschunk_feed(struct fg_awschunk *c, const void *p,
				      size_t n);

/**
 * The client's body ended (its Content-Length, or its HTTP chunked framing,
 * is all read). When its final chunk verified and nothing followed, emits
 * the last data chunk and the final chunk and returns FG_AWSCHUNK_OK (or
 * FG_AWSCHUNK_EMIT); else the error that ended the body, or
 * FG_AWSCHUNK_TRUNCATED when it stopped short. Calling it again returns
 * the same.
 */
enum fg_awschunk_err fg_awschunk_end(struct fg_awschunk *c);

/** Whether fg_awschunk_end() emitted the verified final chunk. */
bool fg_awschunk_done(const struct fg_awschunk *c);

/** Bytes emitted so far (the re-signed body's length once done). */
uint64_t fg_awschunk_emitted(const struct fg_awschunk *c);

/** A fixed text for an error code (never NULL). */
const char *fg_awschunk_strerror(enum fg_awschunk_err e);

/**
 * What exactly ended the body ("chunk size over 16 hex digits", ...), a
 * static text holding nothing of the body or the keys; "" while it did
 * not end in an error.
 */
const char *fg_awschunk_message(const struct fg_awschunk *c);

/** Frees c and cleanses the keys it held; NULL is accepted. */
void fg_awschunk_destroy(struct fg_awschunk *c);

#endif
