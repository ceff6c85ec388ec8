/*
 * sigv4.c - AWS Signature Version 4: the client's signature read and
 * checked, and the upstream's written (see sigv4.h for the S3 rules).
 *
 * Invariant: the canonical request is produced by one routine, canon(),
 * whether it is hashed (verify, sign) or written out (tests, the fuzzer),
 * so what is checked and what is shown cannot disagree; nothing is
 * allocated per call (the cache holds the working memory), every input is
 * bounded before it is copied, signatures are compared with CRYPTO_memcmp,
 * and every byte derived from a secret is wiped with OPENSSL_cleanse once
 * it is no longer needed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/text.h"
#include "base/sigv4.h"

#define ALGORITHM "AWS4-HMAC-SHA256"
#define ALGORITHM_LEN (sizeof(ALGORITHM) - 1)
#define TERMINATOR "aws4_request"
#define UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SIGN_HEADERS_IN_MAX (4u * FG_SIGV4_SIGNED_MAX) /* entries to sign */

/* ---- the cache and its working memory -------------------------------- */

struct slot {
	uint64_t used; /* 0: empty */
	char key_id[FG_SIGV4_KEY_ID_MAX + 1];
	char date[9];
	char region[FG_SIGV4_REGION_MAX + 1];
	char service[FG_SIGV4_SERVICE_MAX + 1];
	size_t secret_len;
	unsigned char secret[FG_SIGV4_SECRET_MAX];
	unsigned char key[32];
};

/* One query parameter, canonical: name and value UriEncoded, in arena. */
struct qparam {
	const char *name, *value;
	size_t name_len, value_len;
};

struct href {
	const struct fg_sigv4_header *h;
	size_t i;
};

struct fg_sigv4_cache {
	struct slot slot[FG_SIGV4_CACHE_SLOTS];
	uint64_t tick;
	EVP_MD *sha256;
	EVP_MD_CTX *md; /* the one SHA-256 context of every hash and HMAC */
	struct qparam params[FG_SIGV4_PARAMS_MAX];
	/* a query byte decodes to at most one byte and encodes to at most 3 */
	char arena[3u * FG_SIGV4_QUERY_MAX + 16u];
	struct href sorted[SIGN_HEADERS_IN_MAX];
	char list[FG_SIGV4_SIGNED_LIST_MAX + 1];
};

struct fg_sigv4_cache *fg_sigv4_cache_create(void)
{
	struct fg_sigv4_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	/* fetched once: an implicit fetch on every init is a lookup */
	c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	c->md = EVP_MD_CTX_new();
	if (!c->sha256 || !c->md)
		goto error_cache;
	return c;
error_cache:
	fg_sigv4_cache_destroy(c);
	return NULL;
}

void fg_sigv4_cache_destroy(struct fg_sigv4_cache *c)
{
	if (!c)
		return;
	EVP_MD_CTX_free(c->md); /* OpenSSL wipes the digest state it held */
	EVP_MD_free(c->sha256);
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

/*
 * HMAC-SHA256 (RFC 2104) of msg under key, into out[32]. 0 or -1.
 * Written over the cache's one SHA-256 context rather than through
 * EVP_MAC: OpenSSL 3's EVP_MAC_init() sets up three digest contexts per
 * key, which cost more than the two hashes of a string to sign, and a
 * request makes two of them.
 */
static int hmac(struct fg_sigv4_cache *c, const void *key, size_t klen,
		const void *msg, size_t mlen, unsigned char out[32])
{
	unsigned char k[64] = { 0 }, pad[64], inner[32];
	unsigned int n = 0;
	int rc = -1;
	if (klen > sizeof(k)) {
		if (!EVP_DigestInit_ex(c->md, c->sha256, NULL) ||
		    !EVP_DigestUpdate(c->md, key, klen) || !EVP_DigestFinal_ex(c->md, k, &n))
			goto done;
	} else {
		memcpy(k, key, klen);
	}
	for (size_t i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	if (!EVP_DigestInit_ex(c->md, c->sha256, NULL) || !EVP_DigestUpdate(c->md, pad, 64) ||
	    !EVP_DigestUpdate(c->md, msg, mlen) || !EVP_DigestFinal_ex(c->md, inner, &n))
		goto done;
	for (size_t i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	if (!EVP_DigestInit_ex(c->md, c->sha256, NULL) || !EVP_DigestUpdate(c->md, pad, 64) ||
	    !EVP_DigestUpdate(c->md, inner, 32) || !EVP_DigestFinal_ex(c->md, out, &n) ||
	    n != 32)
		goto done;
	rc = 0;
done:
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(pad, sizeof(pad));
	OPENSSL_cleanse(inner, sizeof(inner));
	return rc;
}

static const char hexdig[] = "0123456789abcdef";

static void to_hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdig[b[i] >> 4];
		out[2 * i + 1] = hexdig[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static bool bounded_cstr(const char *s, size_t max, size_t *len)
{
	if (!s)
		return false;
	size_t n = strnlen(s, max + 1);
	if (n == 0 || n > max)
		return false;
	*len = n;
	return true;
}

int fg_sigv4_signing_key(struct fg_sigv4_cache *c, const char *key_id,
			 const char *secret, size_t secret_len,
			 const char *date, const char *region,
			 const char *service, unsigned char key[32])
{
	size_t idl, rl, sl, dl;
	if (!c || !secret || secret_len == 0 || secret_len > FG_SIGV4_SECRET_MAX ||
	    !bounded_cstr(key_id, FG_SIGV4_KEY_ID_MAX, &idl) ||
	    !bounded_cstr(date, 8, &dl) || dl != 8 ||
	    !bounded_cstr(region, FG_SIGV4_REGION_MAX, &rl) ||
	    !bounded_cstr(service, FG_SIGV4_SERVICE_MAX, &sl))
		return -1;

	struct slot *victim = &c->slot[0];
	for (size_t i = 0; i < FG_SIGV4_CACHE_SLOTS; i++) {
		struct slot *s = &c->slot[i];
		if (s->used < victim->used)
			victim = s;
		if (!s->used || strcmp(s->key_id, key_id) != 0 ||
		    memcmp(s->date, date, 9) != 0 || strcmp(s->region, region) != 0 ||
		    strcmp(s->service, service) != 0 || s->secret_len != secret_len ||
		    CRYPTO_memcmp(s->secret, secret, secret_len) != 0)
			continue;
		s->used = ++c->tick;
		memcpy(key, s->key, 32);
		return 0;
	}

	/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region),
	 * service), "aws4_request") */
	unsigned char k0[4 + FG_SIGV4_SECRET_MAX];
	unsigned char a[32], b[32];
	int rc = -1;
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, secret, secret_len);
	if (hmac(c, k0, 4 + secret_len, date, 8, a) ||
	    hmac(c, a, 32, region, rl, b) || hmac(c, b, 32, service, sl, a) ||
	    hmac(c, a, 32, TERMINATOR, sizeof(TERMINATOR) - 1, b))
		goto done;

	OPENSSL_cleanse(victim, sizeof(*victim));
	memcpy(victim->key_id, key_id, idl + 1);
	memcpy(victim->date, date, 9);
	memcpy(victim->region, region, rl + 1);
	memcpy(victim->service, service, sl + 1);
	memcpy(victim->secret, secret, secret_len);
	victim->secret_len = secret_len;
	memcpy(victim->key, b, 32);
	victim->used = ++c->tick;
	memcpy(key, b, 32);
	rc = 0;
done:
	OPENSSL_cleanse(k0, sizeof(k0));
	OPENSSL_cleanse(a, sizeof(a));
	OPENSSL_cleanse(b, sizeof(b));
	return rc;
}

/* ---- characters ------------------------------------------------------ */

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* RFC 9110 tchar, in lower case (a signed header's name). */
static bool lower_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')
		return true;
	return c != 0 && strchr("!#$%&'*+.^_`|~", c) != NULL;
}

/* Does the header name n[0..nl) equal the lower-case word w[0..wl)? */
static bool name_is(const char *n, size_t nl, const char *w, size_t wl)
{
	if (nl != wl)
		return false;
	for (size_t i = 0; i < nl; i++)
		if (lower(n[i]) != w[i])
			return false;
	return true;
}

#define NAME_IS(h, word) name_is((h)->name, (h)->name_len, word, sizeof(word) - 1)

static bool span_is(const char *s, size_t n, const char *w)
{
	size_t wl = strlen(w);
	return n == wl && memcmp(s, w, n) == 0;
}

/* Percent-decodes s[0..n) into out[0..cap) with a NUL. The length, -1
 * when it does not fit, -2 for a bad escape. */
static long pct_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%') {
			int h, l;
			if (n - i < 3 || (h = fg_hexval((unsigned char)s[i + 1])) < 0 ||
			    (l = fg_hexval((unsigned char)s[i + 2])) < 0)
				return -2;
			c = (unsigned char)(h << 4 | l);
			i += 2;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	if (cap == 0)
		return -1;
	out[o] = '\0';
	return (long)o;
}

long fg_sigv4_uri_encode(const char *in, size_t len, bool keep_slash,
			 char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (unreserved(c) || (keep_slash && c == '/')) {
			if (o + 1 >= cap)
				return -1;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= cap)
				return -1;
			out[o++] = '%';
			out[o++] = "0123456789ABCDEF"[c >> 4];
			out[o++] = "0123456789ABCDEF"[c & 15];
		}
	}
	if (cap == 0)
		return -1;
	out[o] = '\0';
	return (long)o;
}

/* ---- the sink: the canonical request hashed or written ---------------- */

struct sink {
	EVP_MD_CTX *md; /* NULL: written into buf */
	char *buf;
	size_t cap, len; /* text: cap keeps room for the NUL */
	bool over;
	char block[2048]; /* hashing: bytes not yet handed to the digest */
};

static void flush(struct sink *s)
{
	if (s->md && s->len) {
		if (!EVP_DigestUpdate(s->md, s->block, s->len))
			s->over = true;
		s->len = 0;
	}
}

static void put(struct sink *s, const char *p, size_t n)
{
	if (!s->md) {
		if (n > s->cap - s->len) {
			s->over = true;
			return;
		}
		memcpy(s->buf + s->len, p, n);
		s->len += n;
		return;
	}
	if (n > sizeof(s->block) - s->len) {
		flush(s);
		if (n > sizeof(s->block)) {
			if (!EVP_DigestUpdate(s->md, p, n))
				s->over = true;
			return;
		}
	}
	memcpy(s->block + s->len, p, n);
	s->len += n;
}

static void putc1(struct sink *s, char c)
{
	if (s->md && s->len < sizeof(s->block)) {
		s->block[s->len++] = c;
		return;
	}
	put(s, &c, 1);
}

static void put_encoded_byte(struct sink *s, unsigned char c, bool keep_slash)
{
	if (unreserved(c) || (keep_slash && c == '/')) {
		putc1(s, (char)c);
		return;
	}
	char e[3] = { '%', "0123456789ABCDEF"[c >> 4], "0123456789ABCDEF"[c & 15] };
	put(s, e, 3);
}

/* The canonical URI of a raw path. 0, or -2 for a bad escape. */
static int put_path(struct sink *s, const char *p, size_t n)
{
	if (n == 0) {
		putc1(s, '/');
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '%') {
			int h, l;
			if (n - i < 3 || (h = fg_hexval((unsigned char)p[i + 1])) < 0 ||
			    (l = fg_hexval((unsigned char)p[i + 2])) < 0)
				return -2;
			c = (unsigned char)(h << 4 | l);
			i += 2;
		}
		put_encoded_byte(s, c, true);
	}
	return 0;
}

long fg_sigv4_canonical_path(const char *raw, size_t len, char *out, size_t cap)
{
	if (!out || cap == 0)
		return -1;
	struct sink s = { .buf = out, .cap = cap - 1 };
	if (put_path(&s, raw, len))
		return -2;
	if (s.over)
		return -1;
	out[s.len] = '\0';
	return (long)s.len;
}

/* Decodes then encodes raw[0..n) into the arena at *at. 0, -1 full, -2 bad
 * escape. */
static int arena_canon(struct fg_sigv4_cache *c, size_t *at, const char *raw,
		       size_t n, const char **out, size_t *len)
{
	size_t from = *at;
	*out = c->arena + from;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)raw[i];
		if (ch == '%') {
			int h, l;
			if (n - i < 3 || (h = fg_hexval((unsigned char)raw[i + 1])) < 0 ||
			    (l = fg_hexval((unsigned char)raw[i + 2])) < 0)
				return -2;
			ch = (unsigned char)(h << 4 | l);
			i += 2;
		}
		if (sizeof(c->arena) - *at < 3)
			return -1;
		if (unreserved(ch)) {
			c->arena[(*at)++] = (char)ch;
		} else {
			c->arena[(*at)++] = '%';
			c->arena[(*at)++] = "0123456789ABCDEF"[ch >> 4];
			c->arena[(*at)++] = "0123456789ABCDEF"[ch & 15];
		}
	}
	*len = *at - from;
	return 0;
}

static int span_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);
	if (r)
		return r;
	return al < bl ? -1 : al > bl;
}

static int qparam_cmp(const void *x, const void *y)
{
	const struct qparam *a = x, *b = y;
	int r = span_cmp(a->name, a->name_len, b->name, b->name_len);
	if (r)
		return r;
	return span_cmp(a->value, a->value_len, b->value, b->value_len);
}

/* The raw name of one parameter decodes to exactly w? */
static bool raw_name_is(const char *s, size_t n, const char *w)
{
	char buf[64];
	long l = pct_decode(s, n, buf, sizeof(buf));
	return l >= 0 && span_is(buf, (size_t)l, w);
}

/* The canonical query. 0, -1 a bound, -2 a bad escape. */
static int put_query(struct sink *s, struct fg_sigv4_cache *c, const char *q,
		     size_t n, bool presigned)
{
	size_t np = 0, at = 0;
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && q[j] != '&')
			j++;
		if (j > i) {
			const char *eq = memchr(q + i, '=', j - i);
			size_t nl = eq ? (size_t)(eq - (q + i)) : j - i;
			if (!(presigned && raw_name_is(q + i, nl, "X-Amz-Signature"))) {
				if (np == FG_SIGV4_PARAMS_MAX)
					return -1;
				struct qparam *p = &c->params[np++];
				int r = arena_canon(c, &at, q + i, nl, &p->name, &p->name_len);
				if (!r)
					r = eq ? arena_canon(c, &at, eq + 1, (size_t)(q + j - eq - 1),
							     &p->value, &p->value_len)
					       : (p->value = c->arena + at, p->value_len = 0, 0);
				if (r)
					return r;
			}
		}
		i = j + 1;
	}
	/* insertion sort: a handful of parameters is the rule, and it is stable
	 * and allocates nothing; at most FG_SIGV4_PARAMS_MAX of them */
	for (size_t k = 1; k < np; k++) {
		struct qparam x = c->params[k];
		size_t m = k;
		while (m > 0 && qparam_cmp(&c->params[m - 1], &x) > 0) {
			c->params[m] = c->params[m - 1];
			m--;
		}
		c->params[m] = x;
	}
	for (size_t k = 0; k < np; k++) {
		const struct qparam *p = &c->params[k];
		if (k)
			putc1(s, '&');
		put(s, p->name, p->name_len);
		putc1(s, '=');
		put(s, p->value, p->value_len);
	}
	return 0;
}

/* One value trimmed, inner runs of blanks folded into one space. */
static void put_value(struct sink *s, const char *v, size_t n)
{
	size_t i = 0, e = n;
	while (i < e && blank(v[i]))
		i++;
	while (e > i && blank(v[e - 1]))
		e--;
	while (i < e) {
		size_t j = i;
		while (j < e && !blank(v[j]))
			j++;
		put(s, v + i, j - i);
		if (j == e)
			break;
		putc1(s, ' ');
		while (blank(v[j]))
			j++;
		i = j;
	}
}

/* The canonical headers of list[0..ll) ("a;b"). 0, -1 a bound, -3 absent. */
static int put_headers(struct sink *s, const struct fg_sigv4_header *h,
		       size_t nh, const char *list, size_t ll)
{
	size_t i = 0;
	while (i < ll) {
		size_t j = i;
		while (j < ll && list[j] != ';')
			j++;
		put(s, list + i, j - i);
		putc1(s, ':');
		bool found = false;
		for (size_t k = 0; k < nh; k++) {
			if (!name_is(h[k].name, h[k].name_len, list + i, j - i))
				continue;
			if (h[k].value_len > FG_SIGV4_VALUE_MAX)
				return -1;
			if (found)
				putc1(s, ',');
			found = true;
			put_value(s, h[k].value, h[k].value_len);
		}
		if (!found)
			return -3;
		putc1(s, '\n');
		i = j + 1;
	}
	return 0;
}

struct canon_in {
	const char *method;
	const char *path;
	size_t path_len;
	bool path_raw; /* decode then encode; else as it is */
	const char *query;
	size_t query_len;
	bool presigned;
	const struct fg_sigv4_header *headers;
	size_t nheaders;
	const char *list;
	size_t list_len;
	const char *payload_hash;
};

/* The canonical request into s. 0, -1 a bound, -2 does not decode, -3 a
 * signed header absent. */
static int canon(struct sink *s, struct fg_sigv4_cache *c, const struct canon_in *in)
{
	if (in->path_len > 3 * FG_SIGV4_PATH_MAX || in->query_len > FG_SIGV4_QUERY_MAX)
		return -1;
	put(s, in->method, strlen(in->method));
	putc1(s, '\n');
	int r;
	if (in->path_raw) {
		if (in->path_len > FG_SIGV4_PATH_MAX)
			return -1;
		if ((r = put_path(s, in->path, in->path_len)))
			return r;
	} else {
		if (in->path_len == 0)
			putc1(s, '/');
		else
			put(s, in->path, in->path_len);
	}
	putc1(s, '\n');
	if ((r = put_query(s, c, in->query, in->query_len, in->presigned)))
		return r;
	putc1(s, '\n');
	if ((r = put_headers(s, in->headers, in->nheaders, in->list, in->list_len)))
		return r;
	putc1(s, '\n');
	put(s, in->list, in->list_len);
	putc1(s, '\n');
	put(s, in->payload_hash, strlen(in->payload_hash));
	return s->over ? -1 : 0;
}

/* SHA-256 of the canonical request, in hex. As canon(). */
static int canon_hash(struct fg_sigv4_cache *c, const struct canon_in *in, char hex[65])
{
	struct sink s = { .md = c->md };
	unsigned char d[32];
	unsigned int dl = 0;
	if (!EVP_DigestInit_ex(c->md, c->sha256, NULL))
		return -1;
	int r = canon(&s, c, in);
	flush(&s);
	if (r)
		return r;
	if (s.over || !EVP_DigestFinal_ex(c->md, d, &dl) || dl != 32)
		return -1;
	to_hex(d, 32, hex);
	return 0;
}

/* The signature (hex) of a canonical request's hash. 0 or -1. */
static int signature(struct fg_sigv4_cache *c, const unsigned char key[32],
		     const char *amz_date, const char *date, const char *region,
		     const char *service, const char creq_hex[65], char out[65])
{
	char sts[ALGORITHM_LEN + 1 + 16 + 1 + 8 + 1 + FG_SIGV4_REGION_MAX + 1 +
		 FG_SIGV4_SERVICE_MAX + 1 + sizeof(TERMINATOR) + 1 + 64 + 1];
	size_t rl = strnlen(region, FG_SIGV4_REGION_MAX + 1);
	size_t sl = strnlen(service, FG_SIGV4_SERVICE_MAX + 1);
	if (rl > FG_SIGV4_REGION_MAX || sl > FG_SIGV4_SERVICE_MAX)
		return -1;
	/* memcpy, not snprintf: this runs twice a request */
	char *o = sts;
	memcpy(o, ALGORITHM "\n", ALGORITHM_LEN + 1), o += ALGORITHM_LEN + 1;
	memcpy(o, amz_date, 16), o += 16;
	*o++ = '\n';
	memcpy(o, date, 8), o += 8;
	*o++ = '/';
	memcpy(o, region, rl), o += rl;
	*o++ = '/';
	memcpy(o, service, sl), o += sl;
	memcpy(o, "/" TERMINATOR "\n", sizeof(TERMINATOR) + 1), o += sizeof(TERMINATOR) + 1;
	memcpy(o, creq_hex, 64), o += 64;
	unsigned char mac[32];
	if (hmac(c, key, 32, sts, (size_t)(o - sts), mac))
		return -1;
	to_hex(mac, 32, out);
	return 0;
}

/* ---- time -------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool leap(unsigned y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static bool digits(const char *s, size_t n, unsigned *v)
{
	unsigned x = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (unsigned)(s[i] - '0');
	}
	*v = x;
	return true;
}

static bool civil_ok(unsigned y, unsigned mo, unsigned d, unsigned h,
		     unsigned mi, unsigned s)
{
	static const unsigned mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 60)
		return false;
	unsigned md = mdays[mo - 1] + (mo == 2 && leap(y));
	return d <= md;
}

/* `YYYYMMDDTHHMMSSZ` -> seconds since the epoch. */
static bool parse_amz_date(const char *v, size_t n, int64_t *t)
{
	unsigned y, mo, d, h, mi, s;
	if (n != 16 || v[8] != 'T' || v[15] != 'Z' || !digits(v, 4, &y) ||
	    !digits(v + 4, 2, &mo) || !digits(v + 6, 2, &d) || !digits(v + 9, 2, &h) ||
	    !digits(v + 11, 2, &mi) || !digits(v + 13, 2, &s) ||
	    !civil_ok(y, mo, d, h, mi, s))
		return false;
	*t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
	return true;
}

/* IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`. */
static bool parse_http_date(const char *v, size_t n, int64_t *t)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	unsigned y, mo = 0, d, h, mi, s;
	if (n != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' ||
	    v[16] != ' ' || v[19] != ':' || v[22] != ':' || v[25] != ' ' ||
	    memcmp(v + 26, "GMT", 3) != 0)
		return false;
	for (unsigned i = 0; i < 12; i++)
		if (memcmp(v + 8, months + 3 * i, 3) == 0)
			mo = i + 1;
	if (!mo || !digits(v + 5, 2, &d) || !digits(v + 12, 4, &y) ||
	    !digits(v + 17, 2, &h) || !digits(v + 20, 2, &mi) || !digits(v + 23, 2, &s) ||
	    !civil_ok(y, mo, d, h, mi, s))
		return false;
	*t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
	return true;
}

int fg_sigv4_amz_date(int64_t now, char out[17])
{
	if (now < 0 || now > 253402300799)
		return -1;
	int64_t days = now / 86400, secs = now % 86400;
	/* civil_from_days (H. Hinnant) */
	int64_t z = days + 719468;
	int64_t era = z / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t y = (int64_t)yoe + era * 400;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	unsigned d = doy - (153 * mp + 2) / 5 + 1;
	unsigned m = mp < 10 ? mp + 3 : mp - 9;
	y += m <= 2;
	unsigned v[6] = { (unsigned)y, m, d, (unsigned)(secs / 3600),
			  (unsigned)(secs / 60 % 60), (unsigned)(secs % 60) };
	char *o = out;
	for (int i = 0; i < 6; i++) {
		unsigned x = v[i];
		if (i == 0) {
			*o++ = (char)('0' + x / 1000);
			*o++ = (char)('0' + x / 100 % 10);
		}
		if (i == 3)
			*o++ = 'T';
		*o++ = (char)('0' + x / 10 % 10);
		*o++ = (char)('0' + x % 10);
	}
	*o++ = 'Z';
	*o = '\0';
	return 0;
}

/* ---- parsing ----------------------------------------------------------- */

static void auth_clear(struct fg_sigv4_auth *a)
{
	/* not a memset of the whole struct: the token buffer alone is 8 KiB */
	a->presigned = false;
	a->key_id[0] = a->date[0] = a->region[0] = a->service[0] = '\0';
	a->signed_headers[0] = a->signature[0] = a->amz_date[0] = '\0';
	a->nsigned = 0;
	a->time = a->expires = 0;
	a->has_token = false;
	a->token_len = 0;
	a->token[0] = a->payload_hash[0] = '\0';
	a->key = NULL;
}

static bool scope_word(const char *s, size_t n, size_t max)
{
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

static bool key_id_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '/' && c != ',' && c != ';' && c != '=';
}

/* AKID/YYYYMMDD/REGION/SERVICE/aws4_request */
static bool parse_credential(const char *s, size_t n, struct fg_sigv4_auth *a)
{
	const char *part[5];
	size_t len[5], k = 0, i = 0;
	while (k < 5) {
		size_t j = i;
		while (j < n && s[j] != '/')
			j++;
		part[k] = s + i;
		len[k++] = j - i;
		if (j == n)
			break;
		i = j + 1;
	}
	if (k != 5 || part[4] + len[4] != s + n)
		return false;
	if (len[0] == 0 || len[0] > FG_SIGV4_KEY_ID_MAX)
		return false;
	for (size_t x = 0; x < len[0]; x++)
		if (!key_id_char((unsigned char)part[0][x]))
			return false;
	unsigned d;
	if (len[1] != 8 || !digits(part[1], 8, &d) ||
	    !scope_word(part[2], len[2], FG_SIGV4_REGION_MAX) ||
	    !scope_word(part[3], len[3], FG_SIGV4_SERVICE_MAX) ||
	    !span_is(part[4], len[4], TERMINATOR))
		return false;
	memcpy(a->key_id, part[0], len[0]);
	a->key_id[len[0]] = '\0';
	memcpy(a->date, part[1], 8);
	a->date[8] = '\0';
	memcpy(a->region, part[2], len[2]);
	a->region[len[2]] = '\0';
	memcpy(a->service, part[3], len[3]);
	a->service[len[3]] = '\0';
	return true;
}

/* h1;h2: lower case, strictly increasing, <= FG_SIGV4_SIGNED_MAX, host. */
static bool parse_signed(const char *s, size_t n, struct fg_sigv4_auth *a)
{
	if (n == 0 || n > FG_SIGV4_SIGNED_LIST_MAX)
		return false;
	const char *prev = NULL;
	size_t prevl = 0, count = 0, i = 0;
	bool host = false;
	while (i <= n) {
		size_t j = i;
		while (j < n && s[j] != ';')
			j++;
		if (j == i || j - i > FG_SIGV4_NAME_MAX || ++count > FG_SIGV4_SIGNED_MAX)
			return false;
		for (size_t x = i; x < j; x++)
			if (!lower_tchar((unsigned char)s[x]))
				return false;
		if (prev && span_cmp(prev, prevl, s + i, j - i) >= 0)
			return false;
		host |= span_is(s + i, j - i, "host");
		prev = s + i;
		prevl = j - i;
		i = j + 1;
	}
	if (!host)
		return false;
	memcpy(a->signed_headers, s, n);
	a->signed_headers[n] = '\0';
	a->nsigned = count;
	return true;
}

static bool parse_signature(const char *s, size_t n, struct fg_sigv4_auth *a)
{
	if (n != 64)
		return false;
	for (size_t i = 0; i < 64; i++) {
		if (fg_hexval((unsigned char)s[i]) < 0)
			return false;
		a->signature[i] = lower(s[i]);
	}
	a->signature[64] = '\0';
	return true;
}

enum fg_sigv4_result fg_sigv4_parse_header(const char *v, size_t len,
					   struct fg_sigv4_auth *out)
{
	auth_clear(out);
	if (!v || len > FG_SIGV4_VALUE_MAX)
		return FG_SIGV4_MALFORMED;
	size_t i = 0;
	while (i < len && blank(v[i]))
		i++;
	if (len - i > 4 && memcmp(v + i, "AWS ", 4) == 0)
		return FG_SIGV4_SIGV2;
	if (len - i <= ALGORITHM_LEN || memcmp(v + i, ALGORITHM, ALGORITHM_LEN) != 0 ||
	    !blank(v[i + ALGORITHM_LEN]))
		return FG_SIGV4_MALFORMED;
	i += ALGORITHM_LEN;
	bool cred = false, sh = false, sig = false;
	for (;;) {
		while (i < len && (blank(v[i]) || v[i] == ','))
			i++;
		if (i == len)
			break;
		size_t k = i;
		while (k < len && v[k] != '=' && v[k] != ',' && !blank(v[k]))
			k++;
		if (k == len || v[k] != '=')
			return FG_SIGV4_MALFORMED;
		size_t e = k + 1;
		while (e < len && v[e] != ',' && !blank(v[e]))
			e++;
		const char *val = v + k + 1;
		size_t vl = e - k - 1;
		if (span_is(v + i, k - i, "Credential") && !cred) {
			if (!parse_credential(val, vl, out))
				return FG_SIGV4_MALFORMED;
			cred = true;
		} else if (span_is(v + i, k - i, "SignedHeaders") && !sh) {
			if (!parse_signed(val, vl, out))
				return FG_SIGV4_MALFORMED;
			sh = true;
		} else if (span_is(v + i, k - i, "Signature") && !sig) {
			if (!parse_signature(val, vl, out))
				return FG_SIGV4_MALFORMED;
			sig = true;
		} else {
			return FG_SIGV4_MALFORMED;
		}
		i = e;
	}
	return cred && sh && sig ? FG_SIGV4_OK : FG_SIGV4_MALFORMED;
}

enum qkey {
	Q_ALGORITHM,
	Q_CREDENTIAL,
	Q_DATE,
	Q_EXPIRES,
	Q_SIGNED,
	Q_SIGNATURE,
	Q_TOKEN,
	Q_COUNT
};

static const char *const qnames[Q_COUNT] = {
	"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
	"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token",
};

enum fg_sigv4_result fg_sigv4_parse_query(const char *q, size_t len,
					  struct fg_sigv4_auth *out)
{
	const char *val[Q_COUNT] = { 0 };
	size_t vlen[Q_COUNT] = { 0 };
	bool dup = false, v2_key = false, v2_sig = false;

	auth_clear(out);
	if (!q || len > FG_SIGV4_QUERY_MAX)
		return len > FG_SIGV4_QUERY_MAX ? FG_SIGV4_QUERY_MALFORMED
						: FG_SIGV4_NO_SIGNATURE;
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && q[j] != '&')
			j++;
		const char *eq = memchr(q + i, '=', j - i);
		size_t nl = eq ? (size_t)(eq - (q + i)) : j - i;
		char name[64];
		long l = pct_decode(q + i, nl, name, sizeof(name));
		if (l > 0) {
			for (int k = 0; k < Q_COUNT; k++) {
				if (!span_is(name, (size_t)l, qnames[k]))
					continue;
				dup |= val[k] != NULL;
				val[k] = eq ? eq + 1 : q + j;
				vlen[k] = eq ? (size_t)(q + j - eq - 1) : 0;
			}
			v2_key |= span_is(name, (size_t)l, "AWSAccessKeyId");
			v2_sig |= span_is(name, (size_t)l, "Signature");
		}
		i = j + 1;
	}
	if (!val[Q_ALGORITHM] && !val[Q_CREDENTIAL] && !val[Q_SIGNATURE])
		return v2_key && v2_sig ? FG_SIGV4_SIGV2 : FG_SIGV4_NO_SIGNATURE;
	for (int k = 0; k < Q_TOKEN; k++)
		if (!val[k])
			return FG_SIGV4_QUERY_MALFORMED;
	if (dup)
		return FG_SIGV4_QUERY_MALFORMED;

	out->presigned = true;
	char buf[FG_SIGV4_KEY_ID_MAX + 128];
	long l;
	if ((l = pct_decode(val[Q_ALGORITHM], vlen[Q_ALGORITHM], buf, sizeof(buf))) < 0 ||
	    !span_is(buf, (size_t)l, ALGORITHM))
		return FG_SIGV4_QUERY_MALFORMED;
	if ((l = pct_decode(val[Q_CREDENTIAL], vlen[Q_CREDENTIAL], buf, sizeof(buf))) < 0 ||
	    !parse_credential(buf, (size_t)l, out))
		return FG_SIGV4_QUERY_MALFORMED;
	if ((l = pct_decode(val[Q_DATE], vlen[Q_DATE], buf, sizeof(buf))) < 0 ||
	    !parse_amz_date(buf, (size_t)l, &out->time))
		return FG_SIGV4_QUERY_MALFORMED;
	memcpy(out->amz_date, buf, 17);
	if ((l = pct_decode(val[Q_SIGNATURE], vlen[Q_SIGNATURE], buf, sizeof(buf))) < 0 ||
	    !parse_signature(buf, (size_t)l, out))
		return FG_SIGV4_QUERY_MALFORMED;
	/* signed_headers is the scratch of its own decoding */
	char sh[FG_SIGV4_SIGNED_LIST_MAX + 1];
	if ((l = pct_decode(val[Q_SIGNED], vlen[Q_SIGNED], sh, sizeof(sh))) < 0 ||
	    !parse_signed(sh, (size_t)l, out))
		return FG_SIGV4_QUERY_MALFORMED;
	if (val[Q_TOKEN]) {
		if ((l = pct_decode(val[Q_TOKEN], vlen[Q_TOKEN], out->token,
				    sizeof(out->token))) < 0)
			return FG_SIGV4_QUERY_MALFORMED;
		out->has_token = true;
		out->token_len = (size_t)l;
	}
	memcpy(out->payload_hash, UNSIGNED_PAYLOAD, sizeof(UNSIGNED_PAYLOAD));
	/* digits only; more than 9 of them (no leading zeros folded) is too
	 * long whatever they say, and cannot overflow */
	unsigned ex = 0;
	if ((l = pct_decode(val[Q_EXPIRES], vlen[Q_EXPIRES], buf, sizeof(buf))) <= 0)
		return FG_SIGV4_QUERY_MALFORMED;
	for (long k = 0; k < l; k++)
		if (buf[k] < '0' || buf[k] > '9')
			return FG_SIGV4_QUERY_MALFORMED;
	if (l > 9)
		return FG_SIGV4_EXPIRES_TOO_LONG;
	digits(buf, (size_t)l, &ex);
	if (ex == 0)
		return FG_SIGV4_QUERY_MALFORMED;
	out->expires = ex;
	if (ex > FG_SIGV4_EXPIRES_MAX)
		return FG_SIGV4_EXPIRES_TOO_LONG;
	return FG_SIGV4_OK;
}

/* Does query q name parameter w (decoded)? */
static bool query_has(const char *q, size_t len, const char *w)
{
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && q[j] != '&')
			j++;
		const char *eq = memchr(q + i, '=', j - i);
		if (raw_name_is(q + i, eq ? (size_t)(eq - (q + i)) : j - i, w))
			return true;
		i = j + 1;
	}
	return false;
}

bool fg_sigv4_signed(const struct fg_sigv4_auth *a, const char *name, size_t len)
{
	if (!a || !name)
		return false;
	size_t i = 0, n = strnlen(a->signed_headers, sizeof(a->signed_headers));
	const char *s = a->signed_headers;
	while (i < n) {
		size_t j = i;
		while (j < n && s[j] != ';')
			j++;
		if (name_is(name, len, s + i, j - i))
			return true;
		i = j + 1;
	}
	return false;
}

static bool is_signed(const struct fg_sigv4_auth *a, const char *w)
{
	return fg_sigv4_signed(a, w, strlen(w));
}

/* A header value trimmed of blanks at both ends. */
static void trimmed(const struct fg_sigv4_header *h, const char **v, size_t *n)
{
	const char *s = h->value;
	size_t e = h->value_len, i = 0;
	while (i < e && blank(s[i]))
		i++;
	while (e > i && blank(s[e - 1]))
		e--;
	*v = s + i;
	*n = e - i;
}

static int64_t absdiff(int64_t a, int64_t b)
{
	return a > b ? a - b : b - a;
}

enum fg_sigv4_result fg_sigv4_verify(const struct fg_sigv4_request *req,
				     int64_t now, const char *region,
				     fg_sigv4_lookup_fn lookup, void *arg,
				     struct fg_sigv4_cache *cache,
				     struct fg_sigv4_auth *out)
{
	const struct fg_sigv4_header *authz = NULL, *xdate = NULL, *date = NULL,
				     *sha = NULL, *token = NULL;
	bool twice = false;
	enum fg_sigv4_result r;

	auth_clear(out);
	if (!req || !req->method || !cache || !lookup)
		return FG_SIGV4_BAD_REQUEST;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct fg_sigv4_header *h = &req->headers[i];
		const struct fg_sigv4_header **slot =
			NAME_IS(h, "authorization") ? &authz :
			NAME_IS(h, "x-amz-date") ? &xdate :
			NAME_IS(h, "date") ? &date :
			NAME_IS(h, "x-amz-content-sha256") ? &sha :
			NAME_IS(h, "x-amz-security-token") ? &token : NULL;
		if (!slot)
			continue;
		twice |= *slot != NULL;
		*slot = h;
	}
	if (req->path_len > FG_SIGV4_PATH_MAX || req->query_len > FG_SIGV4_QUERY_MAX)
		return FG_SIGV4_BAD_REQUEST;

	if (authz) {
		if (twice)
			return FG_SIGV4_MALFORMED;
		if (query_has(req->query, req->query_len, "X-Amz-Algorithm") ||
		    query_has(req->query, req->query_len, "X-Amz-Credential") ||
		    query_has(req->query, req->query_len, "X-Amz-Signature"))
			return FG_SIGV4_MALFORMED; /* one mechanism only */
		if ((r = fg_sigv4_parse_header(authz->value, authz->value_len, out)) != FG_SIGV4_OK)
			return r;
		const struct fg_sigv4_header *when = xdate ? xdate : date;
		const char *v;
		size_t n;
		if (!when)
			return FG_SIGV4_MALFORMED;
		trimmed(when, &v, &n);
		if (xdate ? !parse_amz_date(v, n, &out->time) : !parse_http_date(v, n, &out->time))
			return FG_SIGV4_MALFORMED;
		if (fg_sigv4_amz_date(out->time, out->amz_date))
			return FG_SIGV4_MALFORMED;
		if (!sha)
			return FG_SIGV4_BAD_REQUEST;
		trimmed(sha, &v, &n);
		if (n == 0 || n > FG_SIGV4_HASH_MAX)
			return FG_SIGV4_BAD_REQUEST;
		memcpy(out->payload_hash, v, n);
		out->payload_hash[n] = '\0';
		if (token) {
			trimmed(token, &v, &n);
			if (n > FG_SIGV4_TOKEN_MAX)
				return FG_SIGV4_MALFORMED;
			memcpy(out->token, v, n);
			out->token[n] = '\0';
			out->token_len = n;
			out->has_token = true;
		}
		if (memcmp(out->amz_date, out->date, 8) != 0)
			return FG_SIGV4_MALFORMED;
		if (strcmp(out->service, "s3") != 0 || (region && strcmp(out->region, region) != 0))
			return FG_SIGV4_MALFORMED;
		if (absdiff(now, out->time) > FG_SIGV4_SKEW_MAX)
			return FG_SIGV4_SKEWED;
		if (!is_signed(out, xdate ? "x-amz-date" : "date") ||
		    !is_signed(out, "x-amz-content-sha256") ||
		    (token && !is_signed(out, "x-amz-security-token")))
			return FG_SIGV4_UNSIGNED_HEADER;
	} else {
		if ((r = fg_sigv4_parse_query(req->query, req->query_len, out)) != FG_SIGV4_OK)
			return r;
		if (memcmp(out->amz_date, out->date, 8) != 0)
			return FG_SIGV4_QUERY_MALFORMED;
		if (strcmp(out->service, "s3") != 0 || (region && strcmp(out->region, region) != 0))
			return FG_SIGV4_QUERY_MALFORMED;
		if (out->time - now > FG_SIGV4_SKEW_MAX)
			return FG_SIGV4_NOT_YET_VALID;
		if (now > out->time + out->expires)
			return FG_SIGV4_EXPIRED;
	}

	const char *secret = NULL;
	size_t secret_len = 0;
	const void *key = lookup(arg, out->key_id, &secret, &secret_len);
	if (!key || !secret || secret_len == 0 || secret_len > FG_SIGV4_SECRET_MAX)
		return FG_SIGV4_UNKNOWN_KEY;

	struct canon_in in = {
		.method = req->method,
		.path = req->path ? req->path : "",
		.path_len = req->path ? req->path_len : 0,
		.path_raw = true,
		.query = req->query ? req->query : "",
		.query_len = req->query ? req->query_len : 0,
		.presigned = out->presigned,
		.headers = req->headers,
		.nheaders = req->nheaders,
		.list = out->signed_headers,
		.list_len = strlen(out->signed_headers),
		.payload_hash = out->payload_hash,
	};
	char creq[65], sig[65];
	int c = canon_hash(cache, &in, creq);
	if (c == -2 || c == -1)
		return FG_SIGV4_BAD_REQUEST;
	if (c == -3)
		return FG_SIGV4_BAD_SIGNATURE;
	unsigned char skey[32];
	if (fg_sigv4_signing_key(cache, out->key_id, secret, secret_len, out->date,
				 out->region, out->service, skey))
		return FG_SIGV4_BAD_SIGNATURE;
	c = signature(cache, skey, out->amz_date, out->date, out->region, out->service,
		      creq, sig);
	OPENSSL_cleanse(skey, sizeof(skey));
	if (c || CRYPTO_memcmp(sig, out->signature, 64) != 0)
		return FG_SIGV4_BAD_SIGNATURE;
	out->key = key;
	return FG_SIGV4_OK;
}

long fg_sigv4_canonical_request(const struct fg_sigv4_request *req,
				const struct fg_sigv4_auth *auth,
				struct fg_sigv4_cache *cache, char *out,
				size_t cap)
{
	if (!req || !req->method || !auth || !cache || !out || cap == 0)
		return -1;
	struct canon_in in = {
		.method = req->method,
		.path = req->path ? req->path : "",
		.path_len = req->path ? req->path_len : 0,
		.path_raw = true,
		.query = req->query ? req->query : "",
		.query_len = req->query ? req->query_len : 0,
		.presigned = auth->presigned,
		.headers = req->headers,
		.nheaders = req->nheaders,
		.list = auth->signed_headers,
		.list_len = strnlen(auth->signed_headers, sizeof(auth->signed_headers)),
		.payload_hash = auth->payload_hash,
	};
	if (in.list_len == sizeof(auth->signed_headers) ||
	    !memchr(auth->payload_hash, '\0', sizeof(auth->payload_hash)))
		return -1;
	struct sink s = { .buf = out, .cap = cap - 1 };
	int r = canon(&s, cache, &in);
	if (r)
		return r;
	out[s.len] = '\0';
	return (long)s.len;
}

/* ---- signing ----------------------------------------------------------- */

static int href_cmp(const void *x, const void *y)
{
	const struct href *a = x, *b = y;
	size_t n = a->h->name_len < b->h->name_len ? a->h->name_len : b->h->name_len;
	for (size_t i = 0; i < n; i++) {
		unsigned char p = (unsigned char)lower(a->h->name[i]);
		unsigned char q = (unsigned char)lower(b->h->name[i]);
		if (p != q)
			return p < q ? -1 : 1;
	}
	if (a->h->name_len != b->h->name_len)
		return a->h->name_len < b->h->name_len ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

int fg_sigv4_sign(const char *method, const char *path, size_t path_len,
		  const char *query, size_t query_len,
		  const struct fg_sigv4_header *headers, size_t nheaders,
		  const char *payload_hash, const char *amz_date,
		  const struct fg_sigv4_creds *creds,
		  struct fg_sigv4_cache *cache, char *auth_out, size_t cap,
		  char seed_hex[65])
{
	size_t n;
	int64_t t;
	if (!method || !cache || !creds || !auth_out || !payload_hash || !amz_date ||
	    (nheaders && !headers) || nheaders > SIGN_HEADERS_IN_MAX ||
	    path_len > 3 * FG_SIGV4_PATH_MAX || query_len > FG_SIGV4_QUERY_MAX ||
	    !bounded_cstr(payload_hash, FG_SIGV4_HASH_MAX, &n) ||
	    !bounded_cstr(amz_date, 16, &n) || !parse_amz_date(amz_date, n, &t) ||
	    !bounded_cstr(creds->secret, FG_SIGV4_SECRET_MAX, &n))
		return -1;
	size_t secret_len = n;

	/* The signed list: the names in lower case, sorted, each once. */
	for (size_t i = 0; i < nheaders; i++) {
		const struct fg_sigv4_header *h = &headers[i];
		if (h->name_len == 0 || h->name_len > FG_SIGV4_NAME_MAX ||
		    h->value_len > FG_SIGV4_VALUE_MAX)
			return -1;
		for (size_t k = 0; k < h->name_len; k++)
			if (!lower_tchar((unsigned char)lower(h->name[k])))
				return -1;
		cache->sorted[i] = (struct href){ h, i };
	}
	for (size_t k = 1; k < nheaders; k++) { /* insertion sort, as put_query */
		struct href x = cache->sorted[k];
		size_t m = k;
		while (m > 0 && href_cmp(&cache->sorted[m - 1], &x) > 0) {
			cache->sorted[m] = cache->sorted[m - 1];
			m--;
		}
		cache->sorted[m] = x;
	}
	size_t ll = 0, distinct = 0;
	for (size_t i = 0; i < nheaders; i++) {
		const struct fg_sigv4_header *h = cache->sorted[i].h;
		/* sorted: a name given twice follows itself */
		if (i && ll >= h->name_len &&
		    name_is(h->name, h->name_len, cache->list + ll - h->name_len, h->name_len) &&
		    (ll == h->name_len || cache->list[ll - h->name_len - 1] == ';'))
			continue;
		if (++distinct > FG_SIGV4_SIGNED_MAX ||
		    ll + (ll ? 1 : 0) + h->name_len > FG_SIGV4_SIGNED_LIST_MAX)
			return -1;
		if (ll)
			cache->list[ll++] = ';';
		for (size_t k = 0; k < h->name_len; k++)
			cache->list[ll++] = lower(h->name[k]);
	}
	cache->list[ll] = '\0';
	/* SigV4 always signs host: a store refuses a request without it */
	bool host = false;
	for (size_t i = 0; i < nheaders; i++)
		host |= NAME_IS(&headers[i], "host");
	if (!host)
		return -1;

	struct canon_in in = {
		.method = method,
		.path = path ? path : "",
		.path_len = path ? path_len : 0,
		.path_raw = false,
		.query = query ? query : "",
		.query_len = query ? query_len : 0,
		.headers = headers,
		.nheaders = nheaders,
		.list = cache->list,
		.list_len = ll,
		.payload_hash = payload_hash,
	};
	char creq[65], sig[65], date[9];
	unsigned char skey[32];
	if (canon_hash(cache, &in, creq))
		return -1;
	memcpy(date, amz_date, 8);
	date[8] = '\0';
	if (fg_sigv4_signing_key(cache, creds->key_id, creds->secret, secret_len, date,
				 creds->region, creds->service, skey))
		return -1;
	int rc = signature(cache, skey, amz_date, date, creds->region, creds->service,
			   creq, sig);
	OPENSSL_cleanse(skey, sizeof(skey));
	if (rc)
		return -1;
	/* ALGORITHM Credential=ID/DATE/REGION/SERVICE/aws4_request,
	 * SignedHeaders=LIST, Signature=SIG */
	struct {
		const char *s;
		size_t n;
	} part[] = {
		{ ALGORITHM " Credential=", ALGORITHM_LEN + 12 },
		{ creds->key_id, strlen(creds->key_id) },
		{ "/", 1 },
		{ date, 8 },
		{ "/", 1 },
		{ creds->region, strlen(creds->region) },
		{ "/", 1 },
		{ creds->service, strlen(creds->service) },
		{ "/" TERMINATOR ", SignedHeaders=", sizeof(TERMINATOR) + 16 },
		{ cache->list, ll },
		{ ", Signature=", 12 },
		{ sig, 64 },
	};
	size_t w = 0;
	for (size_t k = 0; k < sizeof(part) / sizeof(part[0]); k++) {
		if (part[k].n >= cap - w)
			return -1;
		memcpy(auth_out + w, part[k].s, part[k].n);
		w += part[k].n;
	}
	auth_out[w] = '\0';
	if (seed_hex)
		memcpy(seed_hex, sig, 65);
	return 0;
}

#define EMPTY_SHA256_HEX "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

int fg_sigv4_chunk_signature(struct fg_sigv4_cache *c, const unsigned char key[32],
			     const char *amz_date, const char *region,
			     const char *service, const char *prev,
			     const unsigned char chunk_sha256[32], char out[65])
{
	size_t n, rl, sl;
	int64_t t;
	if (!c || !key || !chunk_sha256 || !out || !bounded_cstr(amz_date, 16, &n) ||
	    !parse_amz_date(amz_date, n, &t) ||
	    !bounded_cstr(region, FG_SIGV4_REGION_MAX, &rl) ||
	    !bounded_cstr(service, FG_SIGV4_SERVICE_MAX, &sl) ||
	    !bounded_cstr(prev, 64, &n) || n != 64)
		return -1;
	char sts[sizeof(ALGORITHM "-PAYLOAD\n") + 17 + 9 + FG_SIGV4_REGION_MAX + 1 +
		 FG_SIGV4_SERVICE_MAX + sizeof(TERMINATOR) + 3 * 65 + 8];
	char *o = sts;
	memcpy(o, ALGORITHM "-PAYLOAD\n", ALGORITHM_LEN + 9), o += ALGORITHM_LEN + 9;
	memcpy(o, amz_date, 16), o += 16;
	*o++ = '\n';
	memcpy(o, amz_date, 8), o += 8;
	*o++ = '/';
	memcpy(o, region, rl), o += rl;
	*o++ = '/';
	memcpy(o, service, sl), o += sl;
	memcpy(o, "/" TERMINATOR "\n", sizeof(TERMINATOR) + 1), o += sizeof(TERMINATOR) + 1;
	memcpy(o, prev, 64), o += 64;
	*o++ = '\n';
	memcpy(o, EMPTY_SHA256_HEX "\n", 65), o += 65;
	to_hex(chunk_sha256, 32, o);
	o += 64;
	unsigned char mac[32];
	if (hmac(c, key, 32, sts, (size_t)(o - sts), mac))
		return -1;
	to_hex(mac, 32, out);
	return 0;
}

/* ---- results ----------------------------------------------------------- */

static const struct {
	int status;
	const char *code;
	const char *message;
} results[FG_SIGV4_RESULT_COUNT] = {
	[FG_SIGV4_OK] = { 200, "", "" },
	[FG_SIGV4_NO_SIGNATURE] = { 403, "AccessDenied",
				    "Access Denied: the request is not signed" },
	[FG_SIGV4_SIGV2] = { 400, "InvalidRequest",
			     "The authorization mechanism you have provided is not "
			     "supported. Please use AWS4-HMAC-SHA256." },
	[FG_SIGV4_MALFORMED] = { 400, "AuthorizationHeaderMalformed",
				 "The authorization header is malformed." },
	[FG_SIGV4_QUERY_MALFORMED] = { 400, "AuthorizationQueryParametersError",
				       "The presigned query parameters are malformed." },
	[FG_SIGV4_BAD_REQUEST] = { 400, "InvalidRequest",
				   "Missing x-amz-content-sha256, or a path or query that "
				   "does not decode." },
	[FG_SIGV4_UNSIGNED_HEADER] = { 403, "AccessDenied",
				       "There were headers present in the request which "
				       "were not signed" },
	[FG_SIGV4_UNKNOWN_KEY] = { 403, "InvalidAccessKeyId",
				   "The AWS Access Key Id you provided does not exist in "
				   "our records." },
	[FG_SIGV4_BAD_SIGNATURE] = { 403, "SignatureDoesNotMatch",
				     "The request signature we calculated does not match "
				     "the signature you provided." },
	[FG_SIGV4_SKEWED] = { 403, "RequestTimeTooSkewed",
			      "The difference between the request time and the current "
			      "time is too large." },
	[FG_SIGV4_EXPIRES_TOO_LONG] = { 400, "AuthorizationQueryParametersError",
					"X-Amz-Expires must be less than a week (in "
					"seconds) that is 604800" },
	[FG_SIGV4_EXPIRED] = { 403, "AccessDenied", "Request has expired" },
	[FG_SIGV4_NOT_YET_VALID] = { 403, "AccessDenied", "Request is not valid yet" },
};

const char *fg_sigv4_result_s3(enum fg_sigv4_result r, int *status,
			       const char **code)
{
	if ((unsigned)r >= FG_SIGV4_RESULT_COUNT)
		r = FG_SIGV4_BAD_SIGNATURE;
	if (status)
		*status = results[r].status;
	if (code)
		*code = results[r].code;
	return results[r].message;
}
