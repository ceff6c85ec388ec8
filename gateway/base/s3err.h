/*
 * s3err.h - the gateway's own answers in S3 mode: S3's XML error body, and
 * which S3 code and status each refusal gets. Private to the gateway.
 *
 * Invariant: a fencegate error answered in S3 mode keeps the status
 * fg_errors[] gives it (errors.c) and gets the code "Fence" + the
 * CamelCase of its JSON code (lock_store_unavailable alone is spelled
 * FenceStoreUnavailable, as the contract names it); S3's own codes the
 * gateway answers (authentication, MalformedXML) have S3's statuses. Every
 * body written here is well-formed XML whatever bytes it was handed, and
 * never longer than the buffer it was given. Pure: no I/O, no globals but
 * the constant tables.
 */
#ifndef FENCEGATE_S3ERR_H
#define FENCEGATE_S3ERR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"

/* One S3 error answer: status, S3 code, default message. */
struct fg_s3_errdef {
	unsigned status;
	const char *code;
	const char *message;
	bool retry_after;   /* the answer carries `Retry-After: 1` (the
			       503s and too_many_failures, as the JSON
			       answers do) */
};

/* S3's own codes the gateway itself answers. */
enum fg_s3_native {
	FG_S3N_ACCESS_DENIED,                /* 403 no signature, a missing right */
	FG_S3N_INVALID_ACCESS_KEY_ID,        /* 403 unknown key id */
	FG_S3N_SIGNATURE_DOES_NOT_MATCH,     /* 403 wrong signature */
	FG_S3N_REQUEST_TIME_TOO_SKEWED,      /* 403 clock skew over 15 min */
	FG_S3N_AUTH_QUERY_PARAMETERS_ERROR,  /* 400 presigned query wrong, expiry over 7 days */
	FG_S3N_AUTH_HEADER_MALFORMED,        /* 400 Authorization header unreadable */
	FG_S3N_INVALID_REQUEST,              /* 400 SigV2, and other refusals S3 calls so */
	FG_S3N_MALFORMED_XML,                /* 400 a DeleteObjects body that does not parse */
	FG_S3N_COUNT,
};

/** The S3 answer of fencegate error e: status fg_errors[e].status,
 *  message fg_errors[e].message. An e out of range (FG_E_COUNT) gets
 *  FG_E_INTERNAL's (500 FenceInternal): never an answer without a code. */
struct fg_s3_errdef fg_s3_fence_error(enum fg_error e);

/** The S3 answer of S3's own code n; out of range: FenceInternal's. */
struct fg_s3_errdef fg_s3_native_error(enum fg_s3_native n);

/* Bounds of the fields of a body: a longer field is cut (at a UTF-8
 * character boundary), so that a buffer of FG_S3_ERROR_BODY_MAX bytes
 * always holds the whole answer. */
#define FG_S3_CODE_MAX 64
#define FG_S3_MESSAGE_MAX 1024
#define FG_S3_RESOURCE_MAX 2048
#define FG_S3_REQUEST_ID_MAX 128
/* every byte kept escapes to at most 6 bytes ("&quot;"); 512 covers the
 * fixed markup and the two token elements */
#define FG_S3_ERROR_BODY_MAX \
	(512 + 6 * (FG_S3_CODE_MAX + FG_S3_MESSAGE_MAX + FG_S3_RESOURCE_MAX + \
		    FG_S3_REQUEST_ID_MAX))

/* The tokens of a FenceStaleToken answer. */
struct fg_s3_stale {
	uint64_t token;       /* the token the request carried */
	bool has_current;     /* the lock's current token is known */
	uint64_t current;
};

/**
 * Writes S3's error body into out[cap], NUL-terminated:
 *
 *   <?xml version="1.0" encoding="UTF-8"?>
 *   <Error><Code>…</Code><Message>…</Message><Resource>…</Resource>
 *   <RequestId>…</RequestId>[<Token>N</Token><CurrentToken>M</CurrentToken>]
 *   </Error>
 *
 * (one line, no whitespace between elements). code and message must not
 * be NULL; resource and request_id may be (an empty element). The token
 * elements are written when stale is not NULL (<CurrentToken/> when the
 * current token is not known). Text is XML-escaped (& < > " '); a byte
 * that XML cannot carry (a control character other than TAB and LF, a CR,
 * which a parser would turn into LF, is written as &#13;; an invalid or
 * non-character UTF-8 sequence) becomes U+FFFD. Each field is cut at its
 * FG_S3_*_MAX bound first.
 *
 * Returns the body's length, or -1 when it does not fit in cap (out is
 * then "" when cap > 0); never when cap >= FG_S3_ERROR_BODY_MAX.
 */
int fg_s3_error_body(char *out, size_t cap, const char *code,
		     const char *message, const char *resource,
		     const char *request_id, const struct fg_s3_stale *stale);

#endif
