/*
 * sigv4.h - AWS Signature Version 4 for the S3 mode: reading a client's
 * signature (the Authorization header or a presigned query), checking it
 * against the secret of the access key it names, and signing a request
 * again with other credentials. Private to the gateway; pure (no I/O, no
 * logging, no globals), so the proxy decides and answers, and this only
 * computes.
 *
 * Everything is bounded: a path and a query are at most FG_SIGV4_PATH_MAX
 * and FG_SIGV4_QUERY_MAX bytes as received, a request signs at most
 * FG_SIGV4_SIGNED_MAX headers, a header value is at most
 * FG_SIGV4_VALUE_MAX bytes. Nothing is allocated per call: the working
 * memory of a call is in the struct fg_sigv4_cache the caller hands in.
 *
 * The S3 rules followed:
 *  - the canonical URI is the path as received, percent-decoded once and
 *    then UriEncoded once (A-Z a-z 0-9 - . _ ~ and '/' kept, every other
 *    byte %XX in upper case); `//`, `.` and `..` are kept as they are,
 *    since S3 does not fold them either; '+' in a path is a plus;
 *  - the canonical query is every parameter decoded and encoded the same
 *    way ('/' encoded too), sorted by name then value, `X-Amz-Signature`
 *    left out in a presigned query, a parameter without '=' as `name=`;
 *    '+' in a query is a plus as well, as RFC 3986 has it (SDKs send a
 *    space as %20);
 *  - the canonical headers are the signed ones, names in lower case,
 *    each occurrence's value trimmed and its inner runs of spaces and tabs
 *    folded into one space, the occurrences of one name joined with ','
 *    in the order they came;
 *  - the payload hash is the x-amz-content-sha256 header (required with
 *    an Authorization header), `UNSIGNED-PAYLOAD` for a presigned query.
 *
 * A request through the S3 mode, in order: fg_sigv4_verify() with the
 * loop's cache and the s3keys lookup (fg_s3keys_lookup in s3keys.h); a
 * result other than OK answered with fg_sigv4_result_s3(); the principal
 * from auth.key, the sequencers from auth.token; the client's headers
 * forwarded only when fg_sigv4_signed(), less Authorization,
 * x-amz-security-token, and host, x-amz-date and x-amz-content-sha256
 * (given again below, so never twice); the path forwarded as fg_sigv4_canonical_path()
 * gives it; fg_sigv4_amz_date() of now; fg_sigv4_sign() over the headers
 * forwarded plus host, x-amz-date, x-amz-content-sha256 (the client's
 * value, auth.payload_hash) and the upstream's session token, if any.
 */
#ifndef FENCEGATE_SIGV4_H
#define FENCEGATE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FG_SIGV4_PATH_MAX 8192u      /* bytes of a path as received */
#define FG_SIGV4_QUERY_MAX 8192u     /* bytes of a query as received */
#define FG_SIGV4_PARAMS_MAX 256u     /* parameters of one query */
#define FG_SIGV4_SIGNED_MAX 64u      /* headers one request signs */
#define FG_SIGV4_NAME_MAX 128u       /* bytes of a signed header's name */
#define FG_SIGV4_VALUE_MAX 8192u     /* bytes of one header value */
#define FG_SIGV4_KEY_ID_MAX 128u     /* bytes of an access key id */
#define FG_SIGV4_SECRET_MAX 128u     /* bytes of a secret access key */
#define FG_SIGV4_REGION_MAX 32u      /* bytes of a region */
#define FG_SIGV4_SERVICE_MAX 16u     /* bytes of a service */
#define FG_SIGV4_TOKEN_MAX 8192u     /* bytes of a session token (decoded) */
#define FG_SIGV4_HASH_MAX 64u        /* bytes of an x-amz-content-sha256 */
#define FG_SIGV4_SIGNED_LIST_MAX 4096u /* bytes of a SignedHeaders list */
#define FG_SIGV4_SKEW_MAX 900        /* seconds a clock may be off */
#define FG_SIGV4_EXPIRES_MAX 604800  /* seconds a presigned URL may last */
#define FG_SIGV4_CACHE_SLOTS 32u     /* signing keys one cache holds */
/* An Authorization value fg_sigv4_sign() writes, with its NUL. */
#define FG_SIGV4_AUTH_VALUE_MAX                                              \
	(80u + FG_SIGV4_KEY_ID_MAX + FG_SIGV4_REGION_MAX + FG_SIGV4_SERVICE_MAX + \
	 FG_SIGV4_SIGNED_LIST_MAX + 64u)

/**
 * What fg_sigv4_verify() (and the parsers) found. fg_sigv4_result_s3()
 * gives the S3 status and error code the caller answers with.
 */
enum fg_sigv4_result {
	FG_SIGV4_OK,               /* verified */
	FG_SIGV4_NO_SIGNATURE,     /* 403 AccessDenied: no Authorization, no presigned query */
	FG_SIGV4_SIGV2,            /* 400 InvalidRequest: `AWS AKID:sig`, or AWSAccessKeyId+Signature */
	FG_SIGV4_MALFORMED,        /* 400 AuthorizationHeaderMalformed */
	FG_SIGV4_QUERY_MALFORMED,  /* 400 AuthorizationQueryParametersError: a presigned query that does not parse */
	FG_SIGV4_BAD_REQUEST,      /* 400 InvalidRequest: no x-amz-content-sha256, or a path or query that does not decode */
	FG_SIGV4_UNSIGNED_HEADER,  /* 403 AccessDenied: x-amz-security-token, x-amz-content-sha256 or the date header sent but not signed */
	FG_SIGV4_UNKNOWN_KEY,      /* 403 InvalidAccessKeyId: the lookup knows no such key */
	FG_SIGV4_BAD_SIGNATURE,    /* 403 SignatureDoesNotMatch (also: a signed header that is absent) */
	FG_SIGV4_SKEWED,           /* 403 RequestTimeTooSkewed: more than 15 minutes off */
	FG_SIGV4_EXPIRES_TOO_LONG, /* 400 AuthorizationQueryParametersError: X-Amz-Expires > 604800 */
	FG_SIGV4_EXPIRED,          /* 403 AccessDenied: a presigned URL past its expiry */
	FG_SIGV4_NOT_YET_VALID,    /* 403 AccessDenied: a presigned URL dated more than 15 minutes ahead */
	FG_SIGV4_RESULT_COUNT
};

/** The S3 answer to r: *status (400 or 403; 200 for OK) and the error code
 *  ("AccessDenied", ...; "" for OK), a static string. An r out of range
 *  answers as BAD_SIGNATURE. Returns a short static message for the
 *  <Message> element (no byte of the request in it). */
const char *fg_sigv4_result_s3(enum fg_sigv4_result r, int *status,
			       const char **code);

/** One header as the client sent it (each occurrence of a name is its own
 *  entry, in the order they came). name and value need not end in NUL. */
struct fg_sigv4_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

/** A request as received. path is the request target before '?', still
 *  percent-encoded; query what follows '?' ("" and 0 when there is none). */
struct fg_sigv4_request {
	const char *method; /* a C string: "GET", "PUT", ... */
	const char *path;
	size_t path_len;
	const char *query;
	size_t query_len;
	const struct fg_sigv4_header *headers;
	size_t nheaders;
};

/**
 * What a client's signature says: filled by fg_sigv4_parse_header() or
 * fg_sigv4_parse_query(), completed by fg_sigv4_verify(). Caller memory;
 * holds no secret (the signature is public). Every string ends in NUL.
 */
struct fg_sigv4_auth {
	bool presigned;
	char key_id[FG_SIGV4_KEY_ID_MAX + 1];
	char date[9];                       /* the credential scope's YYYYMMDD */
	char region[FG_SIGV4_REGION_MAX + 1];
	char service[FG_SIGV4_SERVICE_MAX + 1];
	char signed_headers[FG_SIGV4_SIGNED_LIST_MAX + 1]; /* "h1;h2", as sent */
	size_t nsigned;
	char signature[65];                 /* 64 lower-case hex digits */
	char amz_date[17];                  /* YYYYMMDDTHHMMSSZ: when it was signed */
	int64_t time;                       /* the same, seconds since the epoch */
	int64_t expires;                    /* presigned: X-Amz-Expires; else 0 */
	bool has_token;
	size_t token_len;
	char token[FG_SIGV4_TOKEN_MAX + 1]; /* the session token, decoded */
	char payload_hash[FG_SIGV4_HASH_MAX + 1]; /* as signed */
	const void *key;                    /* the lookup's answer, after OK */
};

/**
 * A cache of signing keys (kSigning, the four HMACs of a secret, a date, a
 * region and a service), keyed by (access key id, date, region, service,
 * secret), plus the working memory of verify and sign. One per event loop:
 * it has no lock and a call uses it whole, so it is never shared between
 * threads nor used by two calls at once. The caller owns it
 * (fg_sigv4_cache_create / fg_sigv4_cache_destroy).
 *
 * It holds secret-derived bytes and copies of secrets: an evicted slot,
 * and the whole cache on destroy, is wiped with OPENSSL_cleanse(). The
 * secret is part of the key so that a secret changed by a reload never
 * meets a key derived from the old one.
 */
struct fg_sigv4_cache;

/** A new empty cache (about 55 KiB, one allocation), or NULL. */
struct fg_sigv4_cache *fg_sigv4_cache_create(void);

/** Wipes and frees c. Accepts NULL. */
void fg_sigv4_cache_destroy(struct fg_sigv4_cache *c);

/**
 * The secret of an access key, as the caller's key table knows it.
 * Returns an opaque non-NULL handle (fg_sigv4_verify() stores it in
 * auth->key, e.g. the s3keys entry, so the caller learns the principal)
 * and sets *secret and *secret_len (a secret of 1..FG_SIGV4_SECRET_MAX
 * bytes that lives at least until the verify returns), or NULL for an
 * unknown key. key_id is a NUL-terminated C string.
 */
typedef const void *(*fg_sigv4_lookup_fn)(void *arg, const char *key_id,
					  const char **secret,
					  size_t *secret_len);

/**
 * Reads an Authorization header value v[0..len):
 * `AWS4-HMAC-SHA256 Credential=AKID/YYYYMMDD/REGION/SERVICE/aws4_request,
 * SignedHeaders=h1;h2, Signature=HEX` with the three in any order, each
 * once, separated by ',' and any spaces or tabs. SignedHeaders must be
 * lower case, in strictly increasing order, at most FG_SIGV4_SIGNED_MAX
 * names, and name `host`.
 * Returns OK (out's credential, signed headers and signature filled, the
 * rest zeroed), SIGV2 for `AWS AKID:SIG`, or MALFORMED for anything else.
 */
enum fg_sigv4_result fg_sigv4_parse_header(const char *v, size_t len,
					   struct fg_sigv4_auth *out);

/**
 * Reads a presigned query q[0..len) (what follows '?'): X-Amz-Algorithm,
 * X-Amz-Credential (its '/' percent-encoded or not), X-Amz-Date,
 * X-Amz-Expires, X-Amz-SignedHeaders, X-Amz-Signature and the optional
 * X-Amz-Security-Token, each at most once. Returns OK (out filled, the
 * token decoded, payload_hash "UNSIGNED-PAYLOAD"), NO_SIGNATURE when none
 * of X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature is there (SIGV2
 * instead when AWSAccessKeyId and Signature are), EXPIRES_TOO_LONG for an
 * X-Amz-Expires over 604800, and QUERY_MALFORMED for anything else
 * (a missing or repeated parameter, a bad date, expires or scope).
 * Whether it expired needs the time: fg_sigv4_verify().
 */
enum fg_sigv4_result fg_sigv4_parse_query(const char *q, size_t len,
					  struct fg_sigv4_auth *out);

/**
 * Checks req's signature. Finds the Authorization header or the presigned
 * query (both: MALFORMED), parses it as above, takes the time from
 * x-amz-date (`YYYYMMDDTHHMMSSZ`, else the Date header in IMF-fixdate
 * form) whose date the credential scope must be, the session token from
 * x-amz-security-token (header form), checks the clock against now
 * (seconds since the epoch): off by more than FG_SIGV4_SKEW_MAX is SKEWED
 * (a presigned URL: EXPIRED after its expiry, NOT_YET_VALID when dated
 * ahead by more than the skew), asks lookup(arg) for the key's secret,
 * then compares the signature in constant time (CRYPTO_memcmp).
 *
 * region, when not NULL, is the only region accepted (another one is
 * MALFORMED, as S3 answers); the service must be "s3".
 *
 * out is filled as far as the checks went (key_id for a log line, the
 * token after OK). The result is OK or the first check that failed, in
 * the order: parse, time and scope, unsigned headers, key, signature.
 * cache: the caller's (see above), never NULL.
 */
enum fg_sigv4_result fg_sigv4_verify(const struct fg_sigv4_request *req,
				     int64_t now, const char *region,
				     fg_sigv4_lookup_fn lookup, void *arg,
				     struct fg_sigv4_cache *cache,
				     struct fg_sigv4_auth *out);

/**
 * Is the header name[0..len) (any case) among those a's signature covers?
 * The proxy forwards a client's header only when it is (contract v1.4:
 * headers the client did not sign are not forwarded).
 */
bool fg_sigv4_signed(const struct fg_sigv4_auth *a, const char *name,
		     size_t len);

/**
 * UriEncode(in[0..len)) into out[0..cap): unreserved bytes kept, '/' kept
 * when keep_slash, every other byte %XX (upper case). Returns the length
 * written (out ends in NUL), or -1 when it does not fit in cap.
 * The proxy forwards a key's path in exactly this encoding
 * (fg_sigv4_canonical_path), so the store's canonical URI equals the one
 * the gateway signed.
 */
long fg_sigv4_uri_encode(const char *in, size_t len, bool keep_slash,
			 char *out, size_t cap);

/**
 * The canonical URI of a path as received: raw[0..len) percent-decoded
 * once, then UriEncoded with '/' kept, into out[0..cap). Returns the
 * length (out ends in NUL), -1 when it does not fit, -2 for a '%' not
 * followed by two hex digits. "" is "/".
 */
long fg_sigv4_canonical_path(const char *raw, size_t len, char *out,
			     size_t cap);

/**
 * The canonical request of req as auth signs it (its signed headers, its
 * payload hash; X-Amz-Signature left out when auth->presigned), written
 * into out[0..cap) with a NUL. Returns its length, -1 when it does not fit
 * or a bound is passed, -2 when the path or query does not decode, -3
 * when a signed header is absent. For tests, the fuzzer and debugging:
 * fg_sigv4_verify() hashes the same bytes without writing them.
 */
long fg_sigv4_canonical_request(const struct fg_sigv4_request *req,
				const struct fg_sigv4_auth *auth,
				struct fg_sigv4_cache *cache, char *out,
				size_t cap);

/** now (seconds since the epoch, 0..253402300799) as `YYYYMMDDTHHMMSSZ`
 *  into out. Returns 0, or -1 out of range. */
int fg_sigv4_amz_date(int64_t now, char out[17]);

/** Credentials to sign with. The secret is the caller's and is only read. */
struct fg_sigv4_creds {
	const char *key_id; /* C strings */
	const char *secret;
	const char *region;
	const char *service; /* "s3" */
};

/**
 * Signs an outgoing request: method, path (already canonical: the output
 * of fg_sigv4_canonical_path, used as it is), query[0..query_len) as it
 * is sent (canonicalised as in verify), the headers to sign (the caller
 * includes host, x-amz-date with amz_date's value, x-amz-content-sha256
 * with payload_hash's, and x-amz-security-token when the credentials
 * have a session token; names in any case and order, at most
 * FG_SIGV4_SIGNED_MAX distinct, a name given twice joined with ','),
 * amz_date (`YYYYMMDDTHHMMSSZ`, see fg_sigv4_amz_date).
 *
 * Writes the Authorization value into auth_out[0..cap) (cap
 * FG_SIGV4_AUTH_VALUE_MAX is always enough) and, when seed_hex is not
 * NULL, the signature alone (64 hex digits and a NUL: the seed of a
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD body). Returns 0, or -1 for input
 * that passes a bound or does not parse, or headers without host (nothing
 * useful written).
 */
int fg_sigv4_sign(const char *method, const char *path, size_t path_len,
		  const char *query, size_t query_len,
		  const struct fg_sigv4_header *headers, size_t nheaders,
		  const char *payload_hash, const char *amz_date,
		  const struct fg_sigv4_creds *creds,
		  struct fg_sigv4_cache *cache, char *auth_out, size_t cap,
		  char seed_hex[65]);

/**
 * The signing key (kSigning) of secret[0..secret_len) for key_id, date
 * (YYYYMMDD), region and service, through the cache, into key (32
 * bytes, secret-derived: the caller wipes it with OPENSSL_cleanse). For
 * the chunk signatures of a streaming body. Returns 0 or -1 (a bound).
 */
int fg_sigv4_signing_key(struct fg_sigv4_cache *cache, const char *key_id,
			 const char *secret, size_t secret_len,
			 const char *date, const char *region,
			 const char *service, unsigned char key[32]);

/**
 * The signature of one chunk of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body:
 * HMAC(key, "AWS4-HMAC-SHA256-PAYLOAD\n" amz_date "\n" date/region/
 * service/aws4_request "\n" prev "\n" SHA-256("") "\n" chunk_sha256 in
 * hex), where key is the request's signing key (fg_sigv4_signing_key),
 * prev the previous chunk's signature (the seed signature for the first
 * chunk; 64 hex digits) and chunk_sha256 the SHA-256 of the chunk's data
 * (of nothing for the final zero-length chunk). Writes 64 hex digits and a
 * NUL into out. Returns 0, or -1 for an argument that passes a bound.
 */
int fg_sigv4_chunk_signature(struct fg_sigv4_cache *cache,
			     const unsigned char key[32], const char *amz_date,
			     const char *region, const char *service,
			     const char *prev, const unsigned char chunk_sha256[32],
			     char out[65]);

#endif
