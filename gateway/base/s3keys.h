/*
 * s3keys.h - the S3 mode's credentials: the access keys fencegate issues
 * to clients (`s3-credentials FILE`), the principal each one names, and
 * the store's own credentials requests are signed again with
 * (`upstream-s3-credentials FILE`, and the optional fourth field of an
 * s3-credentials line). Private to the gateway; pure (no I/O but reading
 * the files it is handed, no logging, no globals).
 *
 * A table is immutable once loaded and shared between threads by
 * reference counting, as the auth-file's: a table replaced on SIGHUP lives
 * until its last request lets go. Its secrets are wiped
 * (OPENSSL_cleanse) when it is freed; no error message holds a secret.
 */
#ifndef FENCEGATE_S3KEYS_H
#define FENCEGATE_S3KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/sigv4.h"

#define FG_S3KEYS_FILE_MAX (1u << 20) /* bytes of an s3-credentials file */
#define FG_S3KEYS_LINE_MAX 8192u      /* bytes of one of its lines */
#define FG_S3KEYS_MAX 10000u          /* keys of one table */
#define FG_S3KEYS_SECRET_MIN 16u      /* bytes of a secret, at least */
#define FG_S3KEYS_NEW_ID_LEN 20u      /* fg_s3key_new(): [A-Z0-9] */
#define FG_S3KEYS_NEW_SECRET_LEN 40u  /* fg_s3key_new(): [A-Za-z0-9/+] */
/* fg_s3key_new()'s line: id, secret, principal, two spaces, a NUL. */
#define FG_S3KEYS_NEW_LINE_MAX (FG_S3KEYS_NEW_ID_LEN + FG_S3KEYS_NEW_SECRET_LEN + 64u + 3u)

/**
 * Credentials to sign with: an `upstream-s3-credentials` file (the access
 * key id on its first line, the secret on the second, an optional session
 * token on the third; readable by its owner only). Every string ends in
 * NUL; secret and token are wiped by fg_s3upstream_free().
 */
struct fg_s3upstream {
	char key_id[FG_SIGV4_KEY_ID_MAX + 1];
	char secret[FG_SIGV4_SECRET_MAX + 1];
	size_t secret_len;
	bool has_token;
	size_t token_len;
	char token[FG_SIGV4_TOKEN_MAX + 1];
};

/**
 * Reads the upstream-s3-credentials file at path into *out, a new
 * allocation the caller frees with fg_s3upstream_free(). Returns 0, or -1
 * with *out untouched and err naming the file (and the line) and what is
 * wrong: not a regular file, readable or writable by group or others
 * (mode & 077), a bad or missing key id or secret, a fourth line, more
 * than a bound. Never a byte of the secret or the token.
 */
int fg_s3upstream_load(const char *path, struct fg_s3upstream **out,
		       char *err, size_t errlen);

/** Wipes and frees u. Accepts NULL. */
void fg_s3upstream_free(struct fg_s3upstream *u);

/** One key of a table. Lives as long as its table. */
struct fg_s3key;

/** A loaded s3-credentials file. Immutable; reference counted. */
struct fg_s3keys;

/**
 * Parses s3-credentials text[0..len) (NUL bytes refused): one key a line,
 * `ACCESS_KEY_ID SECRET PRINCIPAL [UPSTREAM_CREDENTIALS_FILE]` separated
 * by spaces or tabs, `#` starting a comment at a line's start or after a
 * space or tab, blank lines ignored. An access key id is 1..128 bytes of
 * [A-Za-z0-9._-], once in the file; a secret 16..128 bytes of printable
 * ASCII (0x21..0x7e; not starting with '#', which starts a comment); a
 * principal a principal's name as
 * in the auth-file (fg_auth_name_valid); the fourth field a path, read
 * here with fg_s3upstream_load() (a path named on several lines is read
 * once).
 *
 * Returns 0 and *out (one reference, the caller's: fg_s3keys_unref()), or
 * -1 with *out untouched and err saying "line N: what is wrong" (never a
 * secret, nor any byte of a field that failed validation).
 */
int fg_s3keys_parse(const char *text, size_t len, struct fg_s3keys **out,
		    char *err, size_t errlen);

/**
 * Reads the s3-credentials file at path (a regular file, at most
 * FG_S3KEYS_FILE_MAX bytes, mode & 077 == 0) and parses it. As
 * fg_s3keys_parse(); err starts with the path. For a reload, the caller
 * loads a new table and swaps it for the old one, which it unrefs.
 */
int fg_s3keys_load(const char *path, struct fg_s3keys **out, char *err,
		   size_t errlen);

/** One more reference to t (any thread); returns t. NULL: NULL. */
struct fg_s3keys *fg_s3keys_ref(struct fg_s3keys *t);

/** Lets go of one reference (any thread); the last one wipes the secrets
 *  and frees the table, its keys and their upstream credentials. Accepts
 *  NULL. */
void fg_s3keys_unref(struct fg_s3keys *t);

/** How many keys t holds (0 for NULL). */
size_t fg_s3keys_count(const struct fg_s3keys *t);

/** The key of t whose access key id is id[0..len) exactly, or NULL
 *  (binary search: the id is not secret). */
const struct fg_s3key *fg_s3keys_find(const struct fg_s3keys *t,
				      const char *id, size_t len);

/**
 * fg_s3keys_find() shaped as a fg_sigv4_lookup_fn: arg is the struct
 * fg_s3keys *, the answer the struct fg_s3key * (or NULL), *secret its
 * secret.
 */
const void *fg_s3keys_lookup(void *arg, const char *key_id,
			     const char **secret, size_t *secret_len);

/** k's access key id (a C string). */
const char *fg_s3key_id(const struct fg_s3key *k);

/** k's secret (a C string of *len bytes; never log it). */
const char *fg_s3key_secret(const struct fg_s3key *k, size_t *len);

/** The principal k names (a C string, a valid principal name). */
const char *fg_s3key_principal(const struct fg_s3key *k);

/** The upstream credentials k's requests are signed with, or NULL for
 *  the gateway's own. Lives as long as the table. */
const struct fg_s3upstream *fg_s3key_upstream(const struct fg_s3key *k);

/**
 * A fresh s3-credentials line for principal (a C string) into
 * out[0..cap): `KEYID SECRET PRINCIPAL` with a NUL and no newline, the key
 * id FG_S3KEYS_NEW_ID_LEN characters of [A-Z0-9], the secret
 * FG_S3KEYS_NEW_SECRET_LEN of [A-Za-z0-9/+], drawn from RAND_bytes()
 * with rejection sampling (each character uniform). Returns 0; -1 for a
 * principal that is not a principal's name or a cap under
 * FG_S3KEYS_NEW_LINE_MAX (out untouched); -2 when no random bytes could
 * be had. The line holds a secret: the caller wipes out after use.
 */
int fg_s3key_new(const char *principal, char *out, size_t cap);

#endif
