/*
 * s3ops.h - what an S3 request changes, and which locks guard it
 * (contract v1.4, "S3 mode"). Private to the gateway.
 *
 * Invariant: every object an S3 store may change when it applies a request
 * that fg_s3_classify() and fg_s3_locks_build() accepted is guarded by a
 * write member of the lock set built for it: a key by its own lock (the
 * route rule covering "/BUCKET/KEY", else "BUCKET/KEY", else the hashed
 * "~s3/..." name: a key that can be written is never unguarded), a whole
 * bucket by a route lock that guards all of it. Whatever the gateway does
 * not understand is a write of the whole bucket (fail closed). Keys are
 * bytes exactly as S3 takes them: percent-decoded, never resolved.
 *
 * Pure: no I/O, no globals, except libxml2's, which fg_s3ops_init() sets
 * up once per process before any thread parses a body.
 */
#ifndef FENCEGATE_S3OPS_H
#define FENCEGATE_S3OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "fencegate/name.h"
#include "base/config.h"
#include "base/s3err.h"

#define FG_S3_KEY_MAX 1024        /* S3's bound on a key, in bytes */
#define FG_S3_BUCKET_MAX 255      /* bucket names: 1-255 of [A-Za-z0-9._-] */
#define FG_S3_LOCKS_MAX 16        /* distinct locks one request may name */
#define FG_S3_DELETE_KEYS_MAX 1000
#define FG_S3_DELETE_BODY_MAX (2u * 1024 * 1024)

/* What a request is. */
enum fg_s3_op {
	FG_S3_OP_READ,              /* GET, HEAD, OPTIONS, any target */
	FG_S3_OP_SELECT,            /* POST ?select&select-type=2: a read */
	FG_S3_OP_PUT_OBJECT,        /* PUT /b/k */
	FG_S3_OP_COPY_OBJECT,       /* PUT /b/k + x-amz-copy-source */
	FG_S3_OP_DELETE_OBJECT,     /* DELETE /b/k [?versionId] */
	FG_S3_OP_PUT_TAGGING,       /* PUT /b/k?tagging */
	FG_S3_OP_DELETE_TAGGING,    /* DELETE /b/k?tagging */
	FG_S3_OP_PUT_ACL,           /* PUT /b/k?acl */
	FG_S3_OP_PUT_RETENTION,     /* PUT /b/k?retention */
	FG_S3_OP_PUT_LEGAL_HOLD,    /* PUT /b/k?legal-hold */
	FG_S3_OP_RESTORE,           /* POST /b/k?restore */
	FG_S3_OP_CREATE_MPU,        /* POST /b/k?uploads */
	FG_S3_OP_UPLOAD_PART,       /* PUT /b/k?partNumber&uploadId */
	FG_S3_OP_UPLOAD_PART_COPY,  /* the same + x-amz-copy-source */
	FG_S3_OP_COMPLETE_MPU,      /* POST /b/k?uploadId */
	FG_S3_OP_ABORT_MPU,         /* DELETE /b/k?uploadId */
	FG_S3_OP_DELETE_OBJECTS,    /* POST /b?delete, the keys in the body */
	FG_S3_OP_BUCKET_WRITE,      /* PUT/DELETE/POST on a bucket or its
				       subresources */
	FG_S3_OP_POST_UPLOAD,       /* POST /b, multipart/form-data */
	FG_S3_OP_UNKNOWN,           /* a write the gateway does not know */
	FG_S3_OP_COUNT,
};

/** The operation's S3 name ("PutObject", ...; "Read", "BucketWrite",
 *  "PostUpload", "Unknown"), for logs. */
const char *fg_s3_op_name(enum fg_s3_op op);

/* Why a request is refused before any token is looked at. */
enum fg_s3_refusal {
	FG_S3_OK = 0,
	FG_S3_BAD_TARGET,        /* not "/...", '#', a bad or NUL %-escape in
				    the path or a query name: 400 FenceBadRequest */
	FG_S3_BAD_BUCKET,        /* a bucket outside 1-255 of [A-Za-z0-9._-],
				    or "." or "..": 400 FenceBadRequest */
	FG_S3_KEY_TOO_LONG,      /* a key over 1024 bytes: 400 FenceBadRequest */
	FG_S3_NO_BUCKET,         /* a write that names no bucket:
				    400 FenceBadRequest */
	FG_S3_BAD_COPY_SOURCE,   /* an x-amz-copy-source that is not
				    [/]BUCKET/KEY[?versionId=V]:
				    400 FenceBadRequest */
	FG_S3_BAD_LOCK_NAME,     /* a route rule decided, and its lock is no
				    valid name: 400 FenceBadLockName */
	FG_S3_TOO_MANY_LOCKS,    /* more than FG_S3_LOCKS_MAX distinct locks:
				    400 FenceBadRequest */
	FG_S3_SUBTREE_UNGUARDED, /* a whole-bucket write under no route lock
				    that guards the bucket:
				    403 FenceSubtreeUnguarded */
	FG_S3_MALFORMED_XML,     /* a DeleteObjects body refused:
				    400 MalformedXML */
	FG_S3_NO_MEMORY,         /* 500 FenceInternal */
	FG_S3_REFUSAL_COUNT,
};

/**
 * The S3 answer of a refusal (never FG_S3_OK): its status and code, and a
 * message saying what was wrong (a static string, e.g. for
 * FG_S3_TOO_MANY_LOCKS: use a route rule that groups the keys).
 */
struct fg_s3_errdef fg_s3_refusal_answer(enum fg_s3_refusal r);

/* The parts of a request's head that decide its write set. Every pointer
 * may be NULL (the header is absent) but method and target. */
struct fg_s3_head {
	const char *method;        /* as sent; compared case-sensitively */
	const char *target;        /* origin-form request target, as sent */
	const char *host;          /* Host header */
	const char *copy_source;   /* x-amz-copy-source header */
	const char *content_type;  /* Content-Type header */
};

/* A request classified, in the caller's memory (nothing in it is
 * allocated; the raw_ pointers point into the head's target). Buckets and
 * keys are NUL-terminated; a key's bytes are exactly S3's (it holds no
 * NUL, so the terminator is safe). */
struct fg_s3_req {
	enum fg_s3_op op;
	bool read;                 /* READ or SELECT: changes nothing */
	bool whole_bucket;         /* changes the whole bucket: needs a route
				      lock that guards it */
	bool needs_body;           /* DeleteObjects: read the whole body, then
				      fg_s3_locks_build() with it */
	bool virtual_host;         /* the bucket came from Host */
	char bucket[FG_S3_BUCKET_MAX + 1]; /* "" (ListBuckets) or the bucket */
	size_t bucket_len;
	char key[FG_S3_KEY_MAX + 1];       /* "": the request is on the bucket */
	size_t key_len;
	bool has_copy_source;      /* CopyObject, UploadPartCopy, and any other
				      PUT that carries one (it is read) */
	char src_bucket[FG_S3_BUCKET_MAX + 1];
	size_t src_bucket_len;
	char src_key[FG_S3_KEY_MAX + 1];
	size_t src_key_len;
	const char *raw_path;      /* the target's path as sent (into
				      head->target), for forwarding */
	size_t raw_path_len;
	const char *raw_query;     /* after '?', or NULL; into head->target */
};

/**
 * Classifies an S3 request from its head, before any token is read.
 *
 * The bucket is the lower-cased BUCKET of `Host: BUCKET.<s3-domain>[:port]`
 * when cfg->s3_domain is set and Host is under it (DNS names are
 * case-insensitive), else the first path segment. The key is the rest of
 * the path after the bucket's '/', percent-decoded ('+' stays '+'), never
 * resolved: "a//b", "..", "%2F" are kept as bytes.
 *
 * Query parameters (names percent-decoded, compared case-sensitively, as
 * S3 does) are of three kinds:
 *  - subresources the gateway knows: uploads, uploadId, partNumber,
 *    tagging, acl, retention, legal-hold, restore, versionId, select,
 *    select-type, delete; they decide the operation;
 *  - parameters that change nothing: x-id (SDKs add ?x-id=PutObject), the
 *    presign parameters (any name starting with "X-Amz-", any case, but
 *    x-amz-copy-source), response-* (only reads use them), and empty names;
 *  - anything else: unknown. A write with an unknown parameter, or with a
 *    combination of known ones that is no operation listed in enum
 *    fg_s3_op, is FG_S3_OP_UNKNOWN and changes the whole bucket.
 * A PUT's x-amz-copy-source is parsed whatever the operation (S3 may
 * ignore an unknown parameter and copy): a source that cannot be parsed
 * refuses the request.
 *
 * A read names no bucket when the target is "/" and the Host names none
 * (ListBuckets); a write that names none is FG_S3_NO_BUCKET.
 * Returns FG_S3_OK with *out filled, or the refusal (*out unspecified).
 */
enum fg_s3_refusal fg_s3_classify(const struct fg_config *cfg,
				  const struct fg_s3_head *head,
				  struct fg_s3_req *out);

/**
 * The lock guarding BUCKET/KEY (key_len >= 1): the lock of the route rule
 * covering "/BUCKET/KEY" (KEY decoded, not resolved), else "BUCKET/KEY"
 * when that is a valid lock name, else "~s3/" + base64url(SHA-256(
 * "BUCKET/KEY")) without padding. FG_S3_OK, or FG_S3_BAD_LOCK_NAME when a
 * rule decided and its lock is no valid name; FG_S3_BAD_BUCKET for a
 * bucket_len of 0 or over FG_S3_BUCKET_MAX, FG_S3_KEY_TOO_LONG for a
 * key_len of 0 or over FG_S3_KEY_MAX.
 */
enum fg_s3_refusal fg_s3_object_lock(const struct fg_config *cfg,
				     const char *bucket, size_t bucket_len,
				     const char *key, size_t key_len,
				     char out[FG_NAME_MAX + 1]);

/**
 * The lock guarding the whole of BUCKET: the route lock of "/BUCKET/",
 * when a rule decides it and fg_subtree_guarded() says that lock guards
 * all of "/BUCKET/". FG_S3_OK, FG_S3_BAD_LOCK_NAME, or
 * FG_S3_SUBTREE_UNGUARDED.
 */
enum fg_s3_refusal fg_s3_bucket_lock(const struct fg_config *cfg,
				     const char *bucket, size_t bucket_len,
				     char out[FG_NAME_MAX + 1]);

/* One distinct lock of a request. */
struct fg_s3_lock {
	char name[FG_NAME_MAX + 1];
	bool write;    /* changed (needs lock:, and a sequencer); else only
			  read (needs read:) */
};

struct fg_s3_locks {
	int n;         /* 0 to FG_S3_LOCKS_MAX, distinct names */
	struct fg_s3_lock m[FG_S3_LOCKS_MAX];
};

/**
 * The locks of a classified request:
 *  - a read of an object: its lock, as a read (for read: and a fenced
 *    read); a read of a bucket or of the bucket list: none;
 *  - a write of a key: its lock, as a write; a copy source's lock, as a
 *    read (a lock both read and written is a write);
 *  - a whole-bucket write: the bucket's lock (fg_s3_bucket_lock()), as a
 *    write;
 *  - DeleteObjects (req->needs_body): the lock of every key of the body
 *    (body[0..body_len), fg_s3_delete_parse()), as writes.
 * body is read only for DeleteObjects (NULL there is an empty body).
 * Returns FG_S3_OK with *out filled, or the refusal (*out unspecified):
 * FG_S3_BAD_LOCK_NAME, FG_S3_SUBTREE_UNGUARDED, FG_S3_TOO_MANY_LOCKS,
 * FG_S3_MALFORMED_XML, FG_S3_NO_MEMORY.
 */
enum fg_s3_refusal fg_s3_locks_build(const struct fg_config *cfg,
				     const struct fg_s3_req *req,
				     const char *body, size_t body_len,
				     struct fg_s3_locks *out);

/**
 * GET /_fence/v1/route and --route-test in S3 mode: the lock guarding the
 * path-style path raw[0..len) ("/BUCKET/KEY", KEY percent-encoded as a
 * client sends it): a route rule's on "/BUCKET/KEY" (KEY decoded, not
 * resolved), else the default of fg_s3_object_lock(); for "/BUCKET" or
 * "/BUCKET/" what the rules give the bucket. As fg_route_decide():
 * FG_E_COUNT with the lock in out and *rule the winning rule (NULL: the
 * default), FG_E_BAD_PATH (no bucket, a bad escape), FG_E_BAD_LOCK_NAME.
 */
enum fg_error fg_s3_route_decide(const struct fg_config *cfg, const char *raw,
				 size_t len, char out[FG_NAME_MAX + 1],
				 const struct fg_route **rule);

/**
 * Sets up libxml2: xmlInitParser(), and error handlers that drop every
 * message (a client's body never writes to the gateway's stderr), for
 * this thread and as the default of threads created later. main() calls
 * it once, before any thread starts; the unit tests and fuzz harnesses
 * call it first too. Calling it again is harmless.
 */
void fg_s3ops_init(void);

/**
 * Parses a DeleteObjects body: <Delete> [<Quiet>true|false</Quiet>]
 * <Object><Key>K</Key>[<VersionId>V</VersionId>]</Object>... </Delete>,
 * with or without S3's namespace; whitespace and comments between
 * elements. Refused as FG_S3_MALFORMED_XML: over FG_S3_DELETE_BODY_MAX
 * bytes, anything but UTF-8 XML 1.0 (a NUL byte, a UTF-16 byte order
 * mark, another declared encoding or version), any DOCTYPE (so no entity but XML's five and character
 * references), anything that does not parse, any other element or text,
 * no Object or more than FG_S3_DELETE_KEYS_MAX, an empty key or one over
 * FG_S3_KEY_MAX bytes. libxml2 never reaches the network or a file.
 *
 * Only when the whole body is accepted, on_key(arg, key, len) is called
 * for each key in order (decoded: entities and CDATA; NUL-terminated; the
 * bytes are the parser's, valid during the call only; on_key may be NULL);
 * a non-zero return stops the walk and is returned. Returns 0, or
 * FG_S3_MALFORMED_XML, FG_S3_NO_MEMORY, or on_key's value.
 */
int fg_s3_delete_parse(const char *body, size_t len,
		       int (*on_key)(void *arg, const char *key, size_t len),
		       void *arg);

#endif
