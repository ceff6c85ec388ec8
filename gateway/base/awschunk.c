/*
 * awschunk.c - an aws-chunked body with signed chunks, checked on the
 * client's chain and signed again on the upstream's (awschunk.h).
 *
 * Invariant: c->held holds the data of at most one chunk, either the one
 * being read (not yet verified) or the verified last data chunk waiting
 * for the final chunk; nothing reaches emit() before the client's
 * signature of it compared equal, and the bytes that complete the decoded
 * length reach it only at end(), together with the final chunk, once the
 * final chunk verified and nothing came after it. Per chunk the
 * data is hashed once, as it arrives (the one hash serves both chains),
 * plus one HMAC per chain over a short string.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/text.h"
#include "base/awschunk.h"

#define SIZE_DIGITS_MAX 16
#define HELD_MIN (64u << 10)  /* the first allocation of the held chunk */

static const char algorithm[] = "AWS4-HMAC-SHA256-PAYLOAD\n";
static const char ext[] = "chunk-signature=";
/* hex SHA-256 of "": the string to sign's empty "previous headers" */
static const char empty_sha256[] =
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

enum state {
	S_SIZE,     /* hex digits of the size, up to ';' */
	S_EXT,      /* "chunk-signature=" */
	S_SIG,      /* 64 lowercase hex digits */
	S_SIG_CR,
	S_SIG_LF,
	S_DATA,     /* the size's bytes of data */
	S_DATA_CR,
	S_DATA_LF,
	S_FINAL,    /* the final chunk verified; emitted at end() */
	S_DONE,     /* ... and emitted */
	S_FAILED,
};

struct side {
	unsigned char key[FG_AWSCHUNK_KEY_LEN];
	/* "AWS4-HMAC-SHA256-PAYLOAD\n<date>\n<scope>\n": the part of the
	 * string to sign that every chunk shares */
	char prefix[sizeof(algorithm) + FG_AWSCHUNK_DATE_MAX +
		    FG_AWSCHUNK_SCOPE_MAX + 2];
	size_t prefix_len;
	char prev[FG_AWSCHUNK_SIG_LEN]; /* the chain so far */
};

struct fg_awschunk {
	struct side client, upstream;
	uint64_t decoded_length;
	uint64_t decoded;        /* data bytes of the chunks read so far */
	size_t max_chunk;
	fg_awschunk_emit_fn emit;
	void *emit_arg;
	uint64_t emitted;

	enum state state;
	enum fg_awschunk_err err;
	const char *why;

	/* the chunk being read */
	char size_text[SIZE_DIGITS_MAX];
	size_t size_len;          /* digits in size_text */
	uint64_t size;
	size_t ext_at;            /* bytes of ext matched */
	char sig[FG_AWSCHUNK_SIG_LEN];
	size_t sig_len;
	EVP_MD_CTX *md;           /* SHA-256 of the chunk's data so far */

	/* the data held: owned here, at most max_chunk bytes */
	char *held;
	size_t held_len, held_cap;

	/* the verified last data chunk, waiting for the final chunk */
	bool pending;
	char pending_size_text[SIZE_DIGITS_MAX];
	size_t pending_size_len;
	char pending_sig[FG_AWSCHUNK_SIG_LEN]; /* the upstream's */
	char final_sig[FG_AWSCHUNK_SIG_LEN];   /* the upstream's */
};

const char *fg_awschunk_strerror(enum fg_awschunk_err e)
{
	switch (e) {
	case FG_AWSCHUNK_OK: return "ok";
	case FG_AWSCHUNK_FRAMING: return "malformed aws-chunked body";
	case FG_AWSCHUNK_BAD_SIGNATURE: return "chunk signature does not match";
	case FG_AWSCHUNK_TOO_BIG: return "chunk too large";
	case FG_AWSCHUNK_LENGTH:
		return "chunk data differs from x-amz-decoded-content-length";
	case FG_AWSCHUNK_TRUNCATED: return "body ended before its final chunk";
	case FG_AWSCHUNK_EMIT: return "the receiver refused the body";
	case FG_AWSCHUNK_NO_MEMORY: return "out of memory";
	case FG_AWSCHUNK_CRYPTO: return "hash computation failed";
	case FG_AWSCHUNK_INVALID: return "invalid chunk signing settings";
	}
	return "unknown error";
}

static bool is_lower_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

static void to_hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
}

/* A date or scope goes into the string to sign between newlines: it must
 * be non-empty, bounded and free of control characters. */
static bool plain_text(const char *s, size_t max, size_t *len)
{
	if (!s)
		return false;
	size_t n = strnlen(s, max + 1);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	*len = n;
	return true;
}

static bool side_init(struct side *s, const struct fg_awschunk_side *in)
{
	size_t date_len, scope_len;
	if (!in->key || !in->seed ||
	    !plain_text(in->amz_date, FG_AWSCHUNK_DATE_MAX, &date_len) ||
	    !plain_text(in->scope, FG_AWSCHUNK_SCOPE_MAX, &scope_len))
		return false;
	if (strnlen(in->seed, FG_AWSCHUNK_SIG_LEN + 1) != FG_AWSCHUNK_SIG_LEN)
		return false;
	for (size_t i = 0; i < FG_AWSCHUNK_SIG_LEN; i++)
		if (!is_lower_hex(in->seed[i]))
			return false;
	memcpy(s->key, in->key, FG_AWSCHUNK_KEY_LEN);
	char *p = s->prefix;
	memcpy(p, algorithm, sizeof(algorithm) - 1);
	p += sizeof(algorithm) - 1;
	memcpy(p, in->amz_date, date_len);
	p += date_len;
	*p++ = '\n';
	memcpy(p, in->scope, scope_len);
	p += scope_len;
	*p++ = '\n';
	s->prefix_len = (size_t)(p - s->prefix);
	memcpy(s->prev, in->seed, FG_AWSCHUNK_SIG_LEN);
	return true;
}

/* The chunk signature on side s of data whose hex SHA-256 is data_hex,
 * chained from s->prev. */
static bool side_sign(const struct side *s, const char *data_hex,
		      char out[FG_AWSCHUNK_SIG_LEN])
{
	char sts[sizeof(((struct side *)0)->prefix) +
		 3 * FG_AWSCHUNK_SIG_LEN + 2];
	size_t n = s->prefix_len;
	memcpy(sts, s->prefix, n);
	memcpy(sts + n, s->prev, FG_AWSCHUNK_SIG_LEN);
	n += FG_AWSCHUNK_SIG_LEN;
	sts[n++] = '\n';
	memcpy(sts + n, empty_sha256, FG_AWSCHUNK_SIG_LEN);
	n += FG_AWSCHUNK_SIG_LEN;
	sts[n++] = '\n';
	memcpy(sts + n, data_hex, FG_AWSCHUNK_SIG_LEN);
	n += FG_AWSCHUNK_SIG_LEN;

	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	if (!HMAC(EVP_sha256(), s->key, FG_AWSCHUNK_KEY_LEN,
		  (const unsigned char *)sts, n, mac, &mac_len) ||
	    mac_len != 32)
		return false;
	to_hex(mac, 32, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	return true;
}

enum fg_awschunk_err fg_awschunk_create(const struct fg_awschunk_config *cfg,
					struct fg_awschunk **out)
{
	*out = NULL;
	if (!cfg || !cfg->emit)
		return FG_AWSCHUNK_INVALID;
	struct fg_awschunk *c = calloc(1, sizeof(*c));
	if (!c)
		return FG_AWSCHUNK_NO_MEMORY;
	if (!side_init(&c->client, &cfg->client) ||
	    !side_init(&c->upstream, &cfg->upstream)) {
		fg_awschunk_destroy(c);
		return FG_AWSCHUNK_INVALID;
	}
	c->md = EVP_MD_CTX_new();
	if (!c->md) {
		fg_awschunk_destroy(c);
		return FG_AWSCHUNK_NO_MEMORY;
	}
	c->decoded_length = cfg->decoded_length;
	c->max_chunk = cfg->max_chunk ? cfg->max_chunk : FG_AWSCHUNK_MAX_DEFAULT;
	c->emit = cfg->emit;
	c->emit_arg = cfg->emit_arg;
	c->state = S_SIZE;
	c->why = "";
	*out = c;
	return FG_AWSCHUNK_OK;
}

void fg_awschunk_destroy(struct fg_awschunk *c)
{
	if (!c)
		return;
	EVP_MD_CTX_free(c->md);
	free(c->held);
	/* the signing keys, and the chains made with them */
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

bool fg_awschunk_done(const struct fg_awschunk *c)
{
	return c->state == S_DONE;
}

uint64_t fg_awschunk_emitted(const struct fg_awschunk *c)
{
	return c->emitted;
}

const char *fg_awschunk_message(const struct fg_awschunk *c)
{
	return c->why;
}

static enum fg_awschunk_err fail(struct fg_awschunk *c,
				 enum fg_awschunk_err e, const char *why)
{
	c->state = S_FAILED;
	c->err = e;
	c->why = why;
	return e;
}

static bool put(struct fg_awschunk *c, const char *p, size_t n)
{
	if (n == 0)
		return true;
	if (!c->emit(c->emit_arg, p, n))
		return false;
	c->emitted += n;
	return true;
}

/* One chunk as the upstream gets it: the client's size digits, the
 * upstream's signature, the data. */
static bool put_chunk(struct fg_awschunk *c, const char *size_text,
		      size_t size_len, const char *sig, const char *data,
		      size_t n)
{
	char head[SIZE_DIGITS_MAX + 1 + sizeof(ext) + FG_AWSCHUNK_SIG_LEN + 2];
	size_t h = 0;
	memcpy(head, size_text, size_len);
	h += size_len;
	head[h++] = ';';
	memcpy(head + h, ext, sizeof(ext) - 1);
	h += sizeof(ext) - 1;
	memcpy(head + h, sig, FG_AWSCHUNK_SIG_LEN);
	h += FG_AWSCHUNK_SIG_LEN;
	head[h++] = '\r';
	head[h++] = '\n';
	return put(c, head, h) && put(c, data, n) && put(c, "\r\n", 2);
}

/* The size's digits ended at ';': its value, checked against the maximum
 * and against what the decoded length leaves. */
static enum fg_awschunk_err size_done(struct fg_awschunk *c)
{
	if (c->size_len == 0)
		return fail(c, FG_AWSCHUNK_FRAMING, "chunk size has no digits");
	if (c->size_len > 1 && c->size_text[0] == '0')
		return fail(c, FG_AWSCHUNK_FRAMING,
			    "chunk size has a leading zero");
	uint64_t v = 0;
	for (size_t i = 0; i < c->size_len; i++)
		v = v << 4 | (uint64_t)fg_hexval((unsigned char)c->size_text[i]);
	/* (16 digits cannot overflow 64 bits; a 17th was refused) */
	if (v > c->max_chunk)
		return fail(c, FG_AWSCHUNK_TOO_BIG, "chunk over the maximum size");
	if (v > c->decoded_length - c->decoded)
		return fail(c, FG_AWSCHUNK_LENGTH,
			    "chunks longer than x-amz-decoded-content-length");
	if (v == 0 && c->decoded != c->decoded_length)
		return fail(c, FG_AWSCHUNK_LENGTH,
			    "final chunk before x-amz-decoded-content-length");
	c->size = v;
	c->ext_at = 0;
	c->state = S_EXT;
	return FG_AWSCHUNK_OK;
}

static bool hold(struct fg_awschunk *c, const char *p, size_t n)
{
	if (c->held_len + n > c->held_cap) {
		/* grow with the bytes that came, not with the size announced:
		 * a header alone never costs the whole maximum */
		size_t cap = c->held_cap ? c->held_cap : HELD_MIN;
		while (cap < c->held_len + n)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		if (cap > c->size)
			cap = (size_t)c->size;  /* size <= max_chunk */
		char *b = realloc(c->held, cap);
		if (!b)
			return false;
		c->held = b;
		c->held_cap = cap;
	}
	memcpy(c->held + c->held_len, p, n);
	c->held_len += n;
	return true;
}

/* The chunk's closing CRLF came: verify, then emit, hold or finish. */
static enum fg_awschunk_err chunk_done(struct fg_awschunk *c)
{
	unsigned char digest[32];
	unsigned int dlen = 0;
	char data_hex[FG_AWSCHUNK_SIG_LEN];
	char want[FG_AWSCHUNK_SIG_LEN];
	char up[FG_AWSCHUNK_SIG_LEN];

	if (!EVP_DigestFinal_ex(c->md, digest, &dlen) || dlen != 32)
		return fail(c, FG_AWSCHUNK_CRYPTO, "SHA-256 failed");
	to_hex(digest, 32, data_hex);
	if (!side_sign(&c->client, data_hex, want))
		return fail(c, FG_AWSCHUNK_CRYPTO, "HMAC-SHA256 failed");
	if (CRYPTO_memcmp(want, c->sig, FG_AWSCHUNK_SIG_LEN) != 0)
		return fail(c, FG_AWSCHUNK_BAD_SIGNATURE,
			    c->size ? "data chunk signature does not match"
				    : "final chunk signature does not match");
	if (!side_sign(&c->upstream, data_hex, up))
		return fail(c, FG_AWSCHUNK_CRYPTO, "HMAC-SHA256 failed");
	memcpy(c->client.prev, c->sig, FG_AWSCHUNK_SIG_LEN);
	memcpy(c->upstream.prev, up, FG_AWSCHUNK_SIG_LEN);

	if (c->size == 0) {
		/* it goes on at end(): a byte after it is still an error
		 * the upstream must not have seen the body complete for */
		memcpy(c->final_sig, up, FG_AWSCHUNK_SIG_LEN);
		c->state = S_FINAL;
		return FG_AWSCHUNK_OK;
	}
	c->decoded += c->size;
	if (c->decoded == c->decoded_length) {
		/* the last data chunk: the store could complete the object
		 * with it, so it waits for the final chunk's signature */
		c->pending = true;
		memcpy(c->pending_size_text, c->size_text, c->size_len);
		c->pending_size_len = c->size_len;
		memcpy(c->pending_sig, up, FG_AWSCHUNK_SIG_LEN);
	} else {
		if (!put_chunk(c, c->size_text, c->size_len, up, c->held,
			       c->held_len))
			return fail(c, FG_AWSCHUNK_EMIT, "receiver refused bytes");
		c->held_len = 0;
	}
	c->size_len = 0;
	c->state = S_SIZE;
	return FG_AWSCHUNK_OK;
}

enum fg_awschunk_err fg_awschunk_feed(struct fg_awschunk *c, const void *data,
				      size_t n)
{
	const char *p = data;
	const char *end = p + n;
	enum fg_awschunk_err e;

	if (c->state == S_FAILED)
		return c->err;
	while (p < end) {
		char ch = *p;
		switch (c->state) {
		case S_SIZE:
			if (ch == ';') {
				if ((e = size_done(c)) != FG_AWSCHUNK_OK)
					return e;
			} else if (fg_hexval((unsigned char)ch) < 0) {
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk size is not hex");
			} else if (c->size_len == SIZE_DIGITS_MAX) {
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk size over 16 hex digits");
			} else {
				c->size_text[c->size_len++] = ch;
			}
			p++;
			break;
		case S_EXT:
			if (ch != ext[c->ext_at])
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "no chunk-signature after the size");
			p++;
			if (++c->ext_at == sizeof(ext) - 1) {
				c->sig_len = 0;
				c->state = S_SIG;
			}
			break;
		case S_SIG:
			if (!is_lower_hex(ch))
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk signature is not 64 lowercase hex");
			c->sig[c->sig_len++] = ch;
			p++;
			if (c->sig_len == FG_AWSCHUNK_SIG_LEN)
				c->state = S_SIG_CR;
			break;
		case S_SIG_CR:
			if (ch != '\r')
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk header does not end in CRLF");
			p++;
			c->state = S_SIG_LF;
			break;
		case S_SIG_LF:
			if (ch != '\n')
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk header does not end in CRLF");
			p++;
			if (!EVP_DigestInit_ex(c->md, EVP_sha256(), NULL))
				return fail(c, FG_AWSCHUNK_CRYPTO,
					    "SHA-256 failed");
			/* the held bytes are the pending last chunk's when
			 * this is the final one (size 0) */
			if (c->size)
				c->held_len = 0;
			c->state = c->size ? S_DATA : S_DATA_CR;
			break;
		case S_DATA: {
			size_t want = (size_t)(c->size - c->held_len);
			size_t k = (size_t)(end - p) < want ? (size_t)(end - p)
							     : want;
			if (!hold(c, p, k))
				return fail(c, FG_AWSCHUNK_NO_MEMORY,
					    "no memory for the chunk");
			if (!EVP_DigestUpdate(c->md, p, k))
				return fail(c, FG_AWSCHUNK_CRYPTO,
					    "SHA-256 failed");
			p += k;
			if (c->held_len == c->size)
				c->state = S_DATA_CR;
			break;
		}
		case S_DATA_CR:
			if (ch != '\r')
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk data does not end in CRLF");
			p++;
			c->state = S_DATA_LF;
			break;
		case S_DATA_LF:
			if (ch != '\n')
				return fail(c, FG_AWSCHUNK_FRAMING,
					    "chunk data does not end in CRLF");
			p++;
			if ((e = chunk_done(c)) != FG_AWSCHUNK_OK)
				return e;
			break;
		case S_FINAL:
		case S_DONE:
			return fail(c, FG_AWSCHUNK_FRAMING,
				    "bytes after the final chunk");
		case S_FAILED:
			return c->err;
		}
	}
	return FG_AWSCHUNK_OK;
}

enum fg_awschunk_err fg_awschunk_end(struct fg_awschunk *c)
{
	if (c->state == S_FAILED)
		return c->err;
	if (c->state == S_DONE)
		return FG_AWSCHUNK_OK;
	if (c->state != S_FINAL)
		return fail(c, FG_AWSCHUNK_TRUNCATED,
			    "body ended before its final chunk");
	if (c->pending &&
	    !put_chunk(c, c->pending_size_text, c->pending_size_len,
		       c->pending_sig, c->held, c->held_len))
		return fail(c, FG_AWSCHUNK_EMIT, "receiver refused bytes");
	c->pending = false;
	c->held_len = 0;
	if (!put_chunk(c, "0", 1, c->final_sig, NULL, 0))
		return fail(c, FG_AWSCHUNK_EMIT, "receiver refused bytes");
	c->state = S_DONE;
	return FG_AWSCHUNK_OK;
}
