/*
 * fencegate/sequencer.h - signed sequencers and leases.
 *
 * A sequencer names a lock, the grant's mode and its fencing token, and
 * carries an HMAC-SHA256 over exactly those three under the gateways'
 * shared key:
 *
 *     fg1.<base64url(name)>.<x|s>.<token decimal>.<base64url(mac)>
 *
 * It is at most FG_SEQ_MAX - 1 bytes, URL-safe and header-safe. Decoding
 * verifies the MAC in constant time before it trusts any field.
 * A lease is FG_LEASE_LEN base64url characters from 128 random bits.
 */
#ifndef FENCEGATE_SEQUENCER_H
#define FENCEGATE_SEQUENCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/name.h"

#define FG_SEQ_MAX 448    /* buffer size for an encoded sequencer, NUL included */
#define FG_KEY_MIN 16     /* shortest HMAC key accepted (bytes) */
#define FG_KEY_MAX 64     /* longest HMAC key accepted (bytes) */
#define FG_LEASE_LEN 22   /* characters in a lease (16 bytes, base64url) */
#define FG_TOKEN_MAX ((uint64_t)1 << 53) /* tokens stay below this */

enum fg_mode {
	FG_MODE_EXCLUSIVE = 0,
	FG_MODE_SHARED = 1,
};

/** "exclusive" or "shared". */
const char *fg_mode_name(enum fg_mode mode);

/** A decoded sequencer. name is NUL-terminated. */
struct fg_seq {
	char name[FG_NAME_MAX + 1];
	size_t name_len;
	enum fg_mode mode;
	uint64_t token;
};

enum fg_seq_status {
	FG_SEQ_VALID = 0,     /* parsed and the MAC verifies */
	FG_SEQ_MALFORMED = 1, /* not a sequencer at all */
	FG_SEQ_FORGED = 2,    /* well-formed, but the MAC does not verify */
};

/**
 * Writes the sequencer for (name, mode, token) into out[cap] as a
 * NUL-terminated string. Returns its length, or -1 when cap is too small,
 * the name is invalid, token >= FG_TOKEN_MAX or the key length is out of
 * [FG_KEY_MIN, FG_KEY_MAX].
 */
int fg_seq_encode(const uint8_t *key, size_t keylen, const char *name,
		  size_t name_len, enum fg_mode mode, uint64_t token,
		  char *out, size_t cap);

/**
 * Parses s[0..len) and verifies its MAC. On FG_SEQ_VALID fills *out; on any
 * other result *out is unspecified. Never reads past s + len.
 */
enum fg_seq_status fg_seq_decode(const uint8_t *key, size_t keylen,
				 const char *s, size_t len, struct fg_seq *out);

/**
 * Writes a fresh lease (FG_LEASE_LEN chars + NUL) from RAND_bytes into
 * out (drawn a few hundred bytes ahead per thread; do not call it in a
 * process forked from one that did). Returns 0, or -1 when the CSPRNG
 * fails.
 */
int fg_lease_new(char out[FG_LEASE_LEN + 1]);

/** True when s[0..len) has the shape of a lease (no Redis look-up). */
bool fg_lease_wellformed(const char *s, size_t len);

/**
 * base64url without padding. Encode writes 4*ceil(n/3) or fewer chars plus
 * a NUL and returns the length, or -1 if cap is too small. Decode returns
 * the decoded length or -1 on a character outside the alphabet, a length
 * that is not a possible encoding, or a too small cap.
 */
int fg_b64url_encode(const uint8_t *in, size_t n, char *out, size_t cap);
int fg_b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap);

#endif
