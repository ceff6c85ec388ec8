/*
 * lockcore/sequencer.c - signed sequencers, leases and base64url.
 *
 * Invariant: fg_seq_decode() returns FG_SEQ_VALID only for a string that
 * fg_seq_encode() could have written under the same key, byte for byte.
 * Every field has exactly one accepted spelling (canonical base64url, a
 * decimal token without sign or leading zero, one mode letter), the MAC
 * covers an unambiguous encoding of (name, mode, token), and it is compared
 * in constant time before any decoded field leaves this file. Nothing here
 * reads past the length it was given or writes to a caller's buffer on
 * failure.
 *
 * MAC input: "fg1" NUL name NUL mode-letter NUL token-decimal. A valid name
 * never contains NUL, so the fields cannot be shifted into each other.
 *
 * The HMAC is computed from SHA-256 states keyed once per thread and key
 * (struct mac_keyed): a grant's answer and a fenced write's check each
 * sign or verify one sequencer, and a one-shot HMAC() looks the digest up
 * and hashes the key's pads again every time, five times the work of the
 * message itself. The result is RFC 2104's HMAC, byte for byte.
 */
#include "fencegate/sequencer.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define SEQ_PREFIX "fg1"
#define SEQ_PREFIX_LEN (sizeof(SEQ_PREFIX) - 1)
#define SEQ_FIELDS 5
#define MAC_LEN 32          /* HMAC-SHA256 */
#define LEASE_BYTES 16      /* 128 random bits */
#define TOKEN_DIGITS_MAX 16 /* FG_TOKEN_MAX - 1 = 9007199254740991 */

/* Unpadded base64url length of n bytes. */
#define B64_LEN(n) ((n) / 3 * 4 + ((n) % 3 ? (n) % 3 + 1 : 0))

#define MAC_B64_LEN B64_LEN(MAC_LEN)
#define SEQ_LEN_MAX                                                       \
	(SEQ_PREFIX_LEN + 1 + B64_LEN(FG_NAME_MAX) + 1 + 1 + 1 +         \
	 TOKEN_DIGITS_MAX + 1 + MAC_B64_LEN)

_Static_assert(SEQ_LEN_MAX < FG_SEQ_MAX,
	       "the longest sequencer must fit FG_SEQ_MAX with its NUL");
_Static_assert(B64_LEN(LEASE_BYTES) == FG_LEASE_LEN,
	       "a lease is the base64url of LEASE_BYTES bytes");
_Static_assert(FG_TOKEN_MAX - 1 == UINT64_C(9007199254740991),
	       "TOKEN_DIGITS_MAX assumes a 53-bit token");

static const char b64_alphabet[64] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* ---- base64url ----------------------------------------------------- */

/* Value of a base64url character, or -1. Locale independent. */
static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

int fg_b64url_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
	size_t olen, i, o = 0;

	if (n / 3 > (size_t)(INT_MAX - 4) / 4)
		return -1;
	olen = B64_LEN(n);
	if (out == NULL || cap < olen + 1 || (n > 0 && in == NULL))
		return -1;

	for (i = 0; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
			     in[i + 2];

		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = b64_alphabet[v >> 6 & 63];
		out[o++] = b64_alphabet[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;

		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;

		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = b64_alphabet[v >> 6 & 63];
	}
	out[o] = '\0';
	return (int)o;
}

int fg_b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
	size_t olen, i, o = 0;
	int last;

	if (n % 4 == 1 || n > INT_MAX)
		return -1;
	olen = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
	if (olen > cap || (n > 0 && (in == NULL || out == NULL)))
		return -1;

	/* Validate everything first so that out is untouched on failure. */
	for (i = 0; i < n; i++)
		if (b64_value((unsigned char)in[i]) < 0)
			return -1;
	/* The unused low bits of the last character must be zero. */
	if (n % 4 == 2 || n % 4 == 3) {
		last = b64_value((unsigned char)in[n - 1]);
		if ((n % 4 == 2 && (last & 0x0f) != 0) ||
		    (n % 4 == 3 && (last & 0x03) != 0))
			return -1;
	}

	for (i = 0; i + 4 <= n; i += 4) {
		uint32_t v = (uint32_t)b64_value((unsigned char)in[i]) << 18 |
			     (uint32_t)b64_value((unsigned char)in[i + 1]) << 12 |
			     (uint32_t)b64_value((unsigned char)in[i + 2]) << 6 |
			     (uint32_t)b64_value((unsigned char)in[i + 3]);

		out[o++] = (uint8_t)(v >> 16);
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)v;
	}
	if (n - i >= 2) {
		uint32_t v = (uint32_t)b64_value((unsigned char)in[i]) << 18 |
			     (uint32_t)b64_value((unsigned char)in[i + 1]) << 12;

		if (n - i == 3)
			v |= (uint32_t)b64_value((unsigned char)in[i + 2]) << 6;
		out[o++] = (uint8_t)(v >> 16);
		if (n - i == 3)
			out[o++] = (uint8_t)(v >> 8);
	}
	return (int)o;
}

/* ---- sequencers ---------------------------------------------------- */

const char *fg_mode_name(enum fg_mode mode)
{
	switch (mode) {
	case FG_MODE_EXCLUSIVE:
		return "exclusive";
	case FG_MODE_SHARED:
		return "shared";
	}
	return "invalid";
}

static bool key_ok(const uint8_t *key, size_t keylen)
{
	return key != NULL && keylen >= FG_KEY_MIN && keylen <= FG_KEY_MAX;
}

/* Writes the canonical decimal of token (1 <= token < FG_TOKEN_MAX). */
static size_t token_format(uint64_t token, char out[TOKEN_DIGITS_MAX + 1])
{
	int n = snprintf(out, TOKEN_DIGITS_MAX + 1, "%" PRIu64, token);

	return n > 0 && n <= TOKEN_DIGITS_MAX ? (size_t)n : 0;
}

/* Decimal digits only, no sign, no leading zero, 1 <= value < FG_TOKEN_MAX. */
static bool token_parse(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > TOKEN_DIGITS_MAX || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= FG_TOKEN_MAX)
		return false;
	*out = v;
	return true;
}

/* ---- keyed HMAC-SHA256 ----------------------------------------------- */

#define SHA256_BLOCK 64

_Static_assert(FG_KEY_MAX <= SHA256_BLOCK,
	       "a key longer than SHA-256's block would be hashed first");

/*
 * One thread's SHA-256 states with the key's inner and outer pads already
 * hashed in, for the last key it used. Owned by the thread: created on its
 * first MAC, rebuilt when the key changes (a rotation), freed at the
 * thread's exit by mac_key's destructor.
 */
struct mac_keyed {
	EVP_MD_CTX *inner, *outer, *work;
	size_t keylen;
	uint8_t key[FG_KEY_MAX];
};

static pthread_key_t mac_key;
static pthread_once_t mac_once = PTHREAD_ONCE_INIT;
static bool mac_key_ok;

static void mac_keyed_free(void *p)
{
	struct mac_keyed *m = p;

	if (!m)
		return;
	EVP_MD_CTX_free(m->inner);
	EVP_MD_CTX_free(m->outer);
	EVP_MD_CTX_free(m->work);
	OPENSSL_cleanse(m, sizeof(*m));
	free(m);
}

static void mac_key_create(void)
{
	mac_key_ok = pthread_key_create(&mac_key, mac_keyed_free) == 0;
}

/* Hashes (key XOR pad) into ctx as the first block. */
static bool pad_into(EVP_MD_CTX *ctx, const uint8_t *key, size_t keylen,
		     uint8_t pad)
{
	uint8_t block[SHA256_BLOCK];
	bool ok;

	memset(block, pad, sizeof(block));
	for (size_t i = 0; i < keylen; i++)
		block[i] ^= key[i];
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, block, sizeof(block)) == 1;
	OPENSSL_cleanse(block, sizeof(block));
	return ok;
}

/* The calling thread's states for key, or NULL when out of memory. */
static struct mac_keyed *mac_keyed_for(const uint8_t *key, size_t keylen)
{
	struct mac_keyed *m;

	if (pthread_once(&mac_once, mac_key_create) != 0 || !mac_key_ok)
		return NULL;
	m = pthread_getspecific(mac_key);
	if (m && m->keylen == keylen && CRYPTO_memcmp(m->key, key, keylen) == 0)
		return m;
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m)
			return NULL;
		m->inner = EVP_MD_CTX_new();
		m->outer = EVP_MD_CTX_new();
		m->work = EVP_MD_CTX_new();
		if (!m->inner || !m->outer || !m->work ||
		    pthread_setspecific(mac_key, m) != 0) {
			mac_keyed_free(m);
			return NULL;
		}
	}
	m->keylen = 0; /* unusable until both pads are in */
	if (!pad_into(m->inner, key, keylen, 0x36) ||
	    !pad_into(m->outer, key, keylen, 0x5c))
		return NULL;
	memcpy(m->key, key, keylen);
	m->keylen = keylen;
	return m;
}

static bool seq_mac(const uint8_t *key, size_t keylen, const char *name,
		    size_t name_len, char mode_c, const char *tok,
		    size_t tok_len, uint8_t mac[MAC_LEN])
{
	uint8_t msg[sizeof(SEQ_PREFIX) + FG_NAME_MAX + 1 + 1 + 1 +
		    TOKEN_DIGITS_MAX];
	uint8_t in[MAC_LEN];
	unsigned int in_len = 0, mac_len = 0;
	struct mac_keyed *m;
	size_t p = 0;
	bool ok;

	memcpy(msg + p, SEQ_PREFIX, sizeof(SEQ_PREFIX)); /* with its NUL */
	p += sizeof(SEQ_PREFIX);
	memcpy(msg + p, name, name_len);
	p += name_len;
	msg[p++] = 0;
	msg[p++] = (uint8_t)mode_c;
	msg[p++] = 0;
	memcpy(msg + p, tok, tok_len);
	p += tok_len;

	m = mac_keyed_for(key, keylen);
	if (!m)
		return false;
	/* H((K ^ opad) || H((K ^ ipad) || msg)) */
	ok = EVP_MD_CTX_copy_ex(m->work, m->inner) == 1 &&
	     EVP_DigestUpdate(m->work, msg, p) == 1 &&
	     EVP_DigestFinal_ex(m->work, in, &in_len) == 1 &&
	     in_len == MAC_LEN &&
	     EVP_MD_CTX_copy_ex(m->work, m->outer) == 1 &&
	     EVP_DigestUpdate(m->work, in, in_len) == 1 &&
	     EVP_DigestFinal_ex(m->work, mac, &mac_len) == 1;
	OPENSSL_cleanse(in, sizeof(in));
	return ok && mac_len == MAC_LEN;
}

int fg_seq_encode(const uint8_t *key, size_t keylen, const char *name,
		  size_t name_len, enum fg_mode mode, uint64_t token,
		  char *out, size_t cap)
{
	char buf[FG_SEQ_MAX];
	char tok[TOKEN_DIGITS_MAX + 1];
	uint8_t mac[MAC_LEN];
	size_t tok_len, p = 0;
	char mode_c;
	int r;

	if (!key_ok(key, keylen) || !fg_name_valid(name, name_len) ||
	    token == 0 || token >= FG_TOKEN_MAX || out == NULL)
		return -1;
	switch (mode) {
	case FG_MODE_EXCLUSIVE:
		mode_c = 'x';
		break;
	case FG_MODE_SHARED:
		mode_c = 's';
		break;
	default:
		return -1;
	}
	tok_len = token_format(token, tok);
	if (tok_len == 0)
		return -1;
	if (!seq_mac(key, keylen, name, name_len, mode_c, tok, tok_len, mac))
		return -1;

	memcpy(buf + p, SEQ_PREFIX ".", SEQ_PREFIX_LEN + 1);
	p += SEQ_PREFIX_LEN + 1;
	r = fg_b64url_encode((const uint8_t *)name, name_len, buf + p,
			     sizeof(buf) - p);
	if (r < 0)
		return -1;
	p += (size_t)r;
	buf[p++] = '.';
	buf[p++] = mode_c;
	buf[p++] = '.';
	memcpy(buf + p, tok, tok_len);
	p += tok_len;
	buf[p++] = '.';
	r = fg_b64url_encode(mac, MAC_LEN, buf + p, sizeof(buf) - p);
	if (r < 0)
		return -1;
	p += (size_t)r;

	if (cap < p + 1)
		return -1;
	memcpy(out, buf, p);
	out[p] = '\0';
	return (int)p;
}

enum fg_seq_status fg_seq_decode(const uint8_t *key, size_t keylen,
				 const char *s, size_t len, struct fg_seq *out)
{
	const char *field[SEQ_FIELDS];
	size_t flen[SEQ_FIELDS];
	size_t nf = 0, start = 0;
	char name[FG_NAME_MAX + 1];
	char tok[TOKEN_DIGITS_MAX + 1];
	uint8_t mac[MAC_LEN], want[MAC_LEN];
	size_t name_len, tok_len;
	uint64_t token;
	char mode_c;
	int r, diff;

	if (s == NULL || out == NULL || len == 0 || len > FG_SEQ_MAX - 1)
		return FG_SEQ_MALFORMED;

	/* Structure: exactly five non-empty '.'-separated fields. */
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.')
			continue;
		if (nf == SEQ_FIELDS || i == start)
			return FG_SEQ_MALFORMED;
		field[nf] = s + start;
		flen[nf] = i - start;
		nf++;
		start = i + 1;
	}
	if (nf != SEQ_FIELDS)
		return FG_SEQ_MALFORMED;

	if (flen[0] != SEQ_PREFIX_LEN ||
	    memcmp(field[0], SEQ_PREFIX, SEQ_PREFIX_LEN) != 0)
		return FG_SEQ_MALFORMED;

	r = fg_b64url_decode(field[1], flen[1], (uint8_t *)name, FG_NAME_MAX);
	if (r <= 0 || !fg_name_valid(name, (size_t)r))
		return FG_SEQ_MALFORMED;
	name_len = (size_t)r;
	name[name_len] = '\0';

	if (flen[2] != 1 || (field[2][0] != 'x' && field[2][0] != 's'))
		return FG_SEQ_MALFORMED;
	mode_c = field[2][0];

	if (!token_parse(field[3], flen[3], &token))
		return FG_SEQ_MALFORMED;

	if (flen[4] != MAC_B64_LEN ||
	    fg_b64url_decode(field[4], flen[4], mac, MAC_LEN) != MAC_LEN)
		return FG_SEQ_MALFORMED;

	/* Well-formed. Now the MAC over the parsed fields decides. */
	if (!key_ok(key, keylen))
		return FG_SEQ_FORGED;
	tok_len = token_format(token, tok);
	if (tok_len == 0 ||
	    !seq_mac(key, keylen, name, name_len, mode_c, tok, tok_len, want))
		return FG_SEQ_FORGED;
	diff = CRYPTO_memcmp(mac, want, MAC_LEN);
	OPENSSL_cleanse(want, sizeof(want));
	if (diff != 0)
		return FG_SEQ_FORGED;

	memcpy(out->name, name, name_len + 1);
	out->name_len = name_len;
	out->mode = mode_c == 'x' ? FG_MODE_EXCLUSIVE : FG_MODE_SHARED;
	out->token = token;
	return FG_SEQ_VALID;
}

/* ---- leases -------------------------------------------------------- */

/*
 * Each thread draws its leases' bytes from RAND_bytes() LEASE_POOL at a
 * time: one call per lease cost more than the rest of signing the grant
 * (the DRBG's locking and its fork check, a getpid() each). A byte is
 * wiped from the pool as it is handed out, so the pool only ever holds
 * leases not yet made. A fork would hand the same pool to parent and
 * child (and so the same next leases): the child's copy is wiped and
 * emptied by a pthread_atfork() handler (only the forking thread lives
 * on in the child), so it draws afresh.
 */
#define LEASE_POOL (LEASE_BYTES * 32)

static _Thread_local struct {
	uint8_t b[LEASE_POOL];
	size_t left; /* the unused bytes are the last `left` of b */
} lease_pool;

static pthread_once_t lease_once = PTHREAD_ONCE_INIT;
static bool lease_fork_safe;

static void lease_pool_drop_in_child(void)
{
	OPENSSL_cleanse(lease_pool.b, sizeof(lease_pool.b));
	lease_pool.left = 0;
}

static void lease_atfork(void)
{
	lease_fork_safe =
		pthread_atfork(NULL, NULL, lease_pool_drop_in_child) == 0;
}

int fg_lease_new(char out[FG_LEASE_LEN + 1])
{
	uint8_t *raw;
	int r;

	if (out == NULL)
		return -1;
	/* no pool without the fork guard: a lease is then drawn alone */
	if (pthread_once(&lease_once, lease_atfork) != 0 || !lease_fork_safe) {
		uint8_t one[LEASE_BYTES];
		if (RAND_bytes(one, sizeof(one)) != 1)
			return -1;
		r = fg_b64url_encode(one, LEASE_BYTES, out, FG_LEASE_LEN + 1);
		OPENSSL_cleanse(one, sizeof(one));
		return r == FG_LEASE_LEN ? 0 : -1;
	}
	if (lease_pool.left < LEASE_BYTES) {
		if (RAND_bytes(lease_pool.b, sizeof(lease_pool.b)) != 1)
			return -1;
		lease_pool.left = sizeof(lease_pool.b);
	}
	raw = lease_pool.b + sizeof(lease_pool.b) - lease_pool.left;
	lease_pool.left -= LEASE_BYTES;
	r = fg_b64url_encode(raw, LEASE_BYTES, out, FG_LEASE_LEN + 1);
	OPENSSL_cleanse(raw, LEASE_BYTES);
	return r == FG_LEASE_LEN ? 0 : -1;
}

bool fg_lease_wellformed(const char *s, size_t len)
{
	uint8_t raw[LEASE_BYTES];

	if (s == NULL || len != FG_LEASE_LEN)
		return false;
	return fg_b64url_decode(s, len, raw, sizeof(raw)) == LEASE_BYTES;
}
