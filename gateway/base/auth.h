/*
 * auth.h - who may: the principals of the auth-file, their credentials and
 * their rights, and the Bearer credential of a request. Private to the
 * gateway; pure (no I/O but fg_authtab_load(), no logging, no globals), so
 * the access step (access.c) decides and answers, and this only knows.
 *
 * A table is immutable once parsed and shared between threads by
 * reference counting: the access step takes a reference for a request, and
 * a table replaced on SIGHUP lives until its last request lets go.
 */
#ifndef FENCEGATE_AUTH_H
#define FENCEGATE_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "fencegate/lock.h" /* FG_PRINCIPAL_MAX */

#define FG_AUTH_FILE_MAX (1u << 20)  /* bytes in an auth-file */
#define FG_AUTH_LINE_MAX 4096u       /* bytes in one of its lines */
#define FG_AUTH_PRINCIPALS_MAX 10000u
#define FG_AUTH_RIGHTS_MAX 64u       /* rights of one principal */
#define FG_AUTH_PREFIX_MAX 255u      /* bytes of a RIGHT:PREFIX prefix */
#define FG_AUTH_KEY_LEN 43u          /* a new key: 32 bytes, base64url */

enum fg_right {
	FG_RIGHT_OBSERVE, /* inspect, observe, check a sequencer */
	FG_RIGHT_LOCK,    /* acquire, renew, release, re-enter, elect */
	FG_RIGHT_ADMIN,   /* break another principal's grant */
	FG_RIGHT_READ,    /* proxied reads, with proxy-auth required */
	FG_RIGHT_METRICS, /* GET /_fence/v1/metrics; not per lock */
	FG_RIGHT_COUNT
};

/** The right's word in the auth-file ("observe", "lock", "admin", "read",
 *  "metrics"), or "unknown". Static. */
const char *fg_right_name(enum fg_right r);

/** One principal of a table: its name, its credential (the SHA-256 of a
 *  bearer key, or a client certificate whose CN is its name) and its
 *  rights. Lives as long as its table. */
struct fg_principal;

/** A parsed auth-file. Immutable; reference counted. */
struct fg_authtab;

/**
 * Parses auth-file text (text[0..len), NUL bytes refused): one principal a
 * line, `NAME CREDENTIAL RIGHTS...` separated by spaces or tabs, `#`
 * starting a comment at a line's start or after a space or tab, blank
 * lines ignored (docs/security.md).
 *
 * Returns 0 and *out, a table with one reference that the caller owns
 * (let go with fg_authtab_unref()), or -1 with *out untouched and err
 * saying "line N: what is wrong". The message never holds a credential,
 * nor any byte of a line that is not a valid name or right word, so it
 * can be logged as is.
 */
int fg_authtab_parse(const char *text, size_t len, struct fg_authtab **out,
		     char *err, size_t errlen);

/**
 * Reads the file at path (at most FG_AUTH_FILE_MAX bytes) and parses it.
 * As fg_authtab_parse(); err starts with the path.
 */
int fg_authtab_load(const char *path, struct fg_authtab **out, char *err,
		    size_t errlen);

/** Takes one more reference to t (any thread); returns t. NULL: NULL. */
struct fg_authtab *fg_authtab_ref(struct fg_authtab *t);

/** Lets go of one reference (any thread); the last one frees the table
 *  and every principal in it. Accepts NULL. */
void fg_authtab_unref(struct fg_authtab *t);

/** How many principals t holds (0 for NULL). */
size_t fg_authtab_count(const struct fg_authtab *t);

/** The i-th principal of t in name order, or NULL when i >= count. */
const struct fg_principal *fg_authtab_at(const struct fg_authtab *t, size_t i);

/**
 * The principal whose bearer key is key[0..len), or NULL. The SHA-256 of
 * the key is compared with the digest of every principal of the table
 * with CRYPTO_memcmp and without an early exit, so the time taken depends
 * on the number of principals only, not on which one matched or whether
 * one did. A `cert` principal never matches a key.
 */
const struct fg_principal *fg_authtab_by_key(const struct fg_authtab *t,
					     const char *key, size_t len);

/**
 * The principal whose name is cn exactly (case included), or NULL. A
 * verified certificate names the principal of its CN whatever that
 * principal's credential: `cert` only says it has no key. cn is a C
 * string: the caller refuses a certificate CN with a NUL byte inside
 * before asking.
 */
const struct fg_principal *fg_authtab_by_cert(const struct fg_authtab *t,
					      const char *cn);

/**
 * A principal as a request found it, kept past its table: a request that
 * waits (a blocked acquire, a long poll) is answered under the table in
 * force then, which a reload may have replaced.
 */
struct fg_principal_id {
	char name[FG_PRINCIPAL_MAX + 1];
	bool cert;
	unsigned char digest[32]; /* its key's SHA-256; all 0 for cert */
};

/** Fills *id with p's name and credential. */
void fg_principal_id_of(const struct fg_principal *p, struct fg_principal_id *id);

/**
 * The principal of t with id's name and credential, or NULL: one removed,
 * or given another key (or turned from key to cert), is not the one the
 * request was let in as. The digests are compared in constant time.
 */
const struct fg_principal *fg_authtab_by_id(const struct fg_authtab *t,
					    const struct fg_principal_id *id);

/** The principal's name (1..FG_PRINCIPAL_MAX bytes of [A-Za-z0-9._@-],
 *  safe in a log line). Lives as long as its table. */
const char *fg_principal_name(const struct fg_principal *p);

/** True when p is a `cert` principal (known by a client certificate). */
bool fg_principal_is_cert(const struct fg_principal *p);

/**
 * May p do r on the lock `name` (a C string; ignored for METRICS)?
 * A right RIGHT:P covers the names that start with P (`*`: every name);
 * lock:P includes observe:P and read:P, admin:P includes lock:P (and so
 * observe:P and read:P); `metrics` is granted by itself alone. False for
 * a NULL p or name, or an r out of range.
 */
bool fg_principal_may(const struct fg_principal *p, enum fg_right r,
		      const char *name);

/**
 * May p do r on every lock whose name starts with `prefix` (a C string,
 * "" meaning every lock)? True when p holds r, or a right that includes
 * it, on `*` or on some P that prefix starts with (so "" needs `*`).
 * For METRICS as fg_principal_may().
 */
bool fg_principal_may_prefix(const struct fg_principal *p, enum fg_right r,
			     const char *prefix);

/** What an Authorization or Fence-Authorization header value carries. */
enum fg_cred {
	FG_CRED_NONE,      /* no header, or a scheme other than Bearer */
	FG_CRED_BEARER,    /* a well-formed Bearer token */
	FG_CRED_MALFORMED, /* Bearer without a token, or a token with other
			      bytes: answered as an unknown key */
};

/**
 * Reads a header value (NULL: no header). The scheme is the bytes before
 * the first space or tab, compared with "Bearer" without case; another
 * scheme (or none) is FG_CRED_NONE. After Bearer: one or more spaces, the
 * token (RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
 * "+" / "/" ) *"="), then only spaces or tabs; that is FG_CRED_BEARER with
 * *key and *len naming the token inside header. Anything else after
 * Bearer is FG_CRED_MALFORMED. *key is NULL and *len 0 unless BEARER.
 */
enum fg_cred fg_auth_bearer(const char *header, const char **key, size_t *len);

/** True when name[0..len) is a valid principal name: 1..FG_PRINCIPAL_MAX
 *  bytes of [A-Za-z0-9._@-]. */
bool fg_auth_name_valid(const char *name, size_t len);

/**
 * Makes a new bearer key for principal `name`: 32 bytes of RAND_bytes as
 * unpadded base64url (FG_AUTH_KEY_LEN characters and a NUL) into key_out,
 * and the auth-file line that names it, "NAME sha256:<64 hex>" (no rights,
 * no newline), into line_out. Returns 0, or -1 when the name is not valid,
 * a buffer is too small or the RNG failed (both buffers then hold "").
 * The caller cleanses key_out when done with it.
 */
int fg_auth_new_key(const char *name, char *key_out, size_t keycap,
		    char *line_out, size_t linecap);

#endif
