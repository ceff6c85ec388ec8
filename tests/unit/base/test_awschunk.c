/*
 * tests/unit/base/test_awschunk.c - aws-chunked bodies with signed chunks,
 * checked on the client's chain and signed again (gateway/base/awschunk.c).
 *
 * Pins awschunk.h: AWS's documented example verifies, and signed again on
 * the same chain it comes out byte for byte; a body signed on the
 * gateway's chain verifies on that chain and is as long as the client's;
 * any split of the input gives the same output; the last data chunk goes
 * on only at end(), with the final chunk; a bad signature in any chunk
 * stops the body before that chunk, and before the last data chunk;
 * the grammar is strict; the decoded length, the maximum chunk and the
 * empty body.
 *
 * The bodies are built here by a signer of the test's own (one-shot
 * OpenSSL calls), not by the module.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/awschunk.h"

/* AWS's example: "Signature Calculations for the Authorization Header:
 * Transferring Payload in Multiple Chunks", PUT Object */
#define EX_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EX_DATE "20130524T000000Z"
#define EX_SCOPE "20130524/us-east-1/s3/aws4_request"
#define EX_SEED "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define EX_SIG1 "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
#define EX_SIG2 "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
#define EX_SIG3 "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
#define EX_DECODED 66560
#define EX_CONTENT_LENGTH 66824

#define GW_SEED "1111111111111111222222222222222233333333333333334444444444444444"

struct chain {
	unsigned char key[32];
	const char *date, *scope, *seed;
};

static void hmac(const void *key, size_t klen, const void *msg, size_t n,
		 unsigned char out[32])
{
	unsigned int len = 0;
	assert_non_null(HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len));
	assert_int_equal(len, 32);
}

static void hexs(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* kSigning, as SigV4 derives it from a secret key */
static void derive(const char *secret, const char *day, const char *region,
		   unsigned char out[32])
{
	char k0[128];
	unsigned char k[32];
	snprintf(k0, sizeof(k0), "AWS4%s", secret);
	hmac(k0, strlen(k0), day, strlen(day), k);
	hmac(k, 32, region, strlen(region), k);
	hmac(k, 32, "s3", 2, k);
	hmac(k, 32, "aws4_request", 12, out);
}

static void example_chain(struct chain *ch)
{
	derive(EX_SECRET, "20130524", "us-east-1", ch->key);
	ch->date = EX_DATE;
	ch->scope = EX_SCOPE;
	ch->seed = EX_SEED;
}

static void gateway_chain(struct chain *ch)
{
	derive("gateway-secret-key-for-the-tests", "20260101", "eu-west-3",
	       ch->key);
	ch->date = "20260101T101010Z";
	ch->scope = "20260101/eu-west-3/s3/aws4_request";
	ch->seed = GW_SEED;
}

/* The signature of one chunk of data on ch, chained from prev. */
static void sign(const struct chain *ch, const char *prev, const char *data,
		 size_t n, char out[65])
{
	unsigned char d[32];
	char dh[65], sts[512];
	unsigned int dl = 0;
	assert_true(EVP_Digest(data, n, d, &dl, EVP_sha256(), NULL));
	hexs(d, 32, dh);
	int len = snprintf(sts, sizeof(sts),
			   "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n"
			   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n%s",
			   ch->date, ch->scope, prev, dh);
	unsigned char mac[32];
	hmac(ch->key, 32, sts, (size_t)len, mac);
	hexs(mac, 32, out);
}

struct body {
	char *p;
	size_t len;
	size_t at[16];  /* where chunk i starts; at[n] is the final chunk */
	size_t n;       /* data chunks */
};

/* A body of the given chunk sizes (then the final chunk), signed on ch.
 * The data is a pattern of the chunk's index and offset. */
static void build(struct body *b, const struct chain *ch, const size_t *sizes,
		  size_t n, bool upper)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += sizes[i];
	b->p = malloc(total + (n + 1) * 100);
	assert_non_null(b->p);
	b->len = 0;
	b->n = n;
	char prev[65];
	memcpy(prev, ch->seed, 65);
	for (size_t i = 0; i <= n; i++) {
		size_t sz = i < n ? sizes[i] : 0;
		char *data = malloc(sz + 1);
		assert_non_null(data);
		for (size_t j = 0; j < sz; j++)
			data[j] = (char)('a' + (i * 7 + j) % 26);
		char sig[65];
		sign(ch, prev, data, sz, sig);
		b->at[i] = b->len;
		b->len += (size_t)sprintf(b->p + b->len,
					  upper ? "%zX;chunk-signature=%s\r\n"
						: "%zx;chunk-signature=%s\r\n",
					  sz, sig);
		memcpy(b->p + b->len, data, sz);
		b->len += sz;
		memcpy(b->p + b->len, "\r\n", 2);
		b->len += 2;
		memcpy(prev, sig, 65);
		free(data);
	}
}

struct sink {
	char *p;
	size_t len, cap;
	size_t refuse_at;  /* refuse a call that would pass this many bytes */
};

static bool take(void *arg, const char *p, size_t n)
{
	struct sink *s = arg;
	assert_true(n > 0);
	if (s->len + n > s->refuse_at)
		return false;
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
	return true;
}

static void side_of(struct fg_awschunk_side *s, const struct chain *ch)
{
	s->key = ch->key;
	s->amz_date = ch->date;
	s->scope = ch->scope;
	s->seed = ch->seed;
}

static struct fg_awschunk *make(const struct chain *from,
				const struct chain *to, uint64_t decoded,
				size_t max_chunk, struct sink *s)
{
	struct fg_awschunk_config cfg = { 0 };
	side_of(&cfg.client, from);
	side_of(&cfg.upstream, to);
	cfg.decoded_length = decoded;
	cfg.max_chunk = max_chunk;
	cfg.emit = take;
	cfg.emit_arg = s;
	memset(s, 0, sizeof(*s));
	s->refuse_at = SIZE_MAX;
	struct fg_awschunk *c = NULL;
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_OK);
	assert_non_null(c);
	return c;
}

/* Feeds p whole, or in pieces of step bytes; then end(). */
static enum fg_awschunk_err run(struct fg_awschunk *c, const char *p,
				size_t n, size_t step)
{
	enum fg_awschunk_err e = FG_AWSCHUNK_OK;
	if (!step)
		step = n ? n : 1;
	for (size_t at = 0; at < n && e == FG_AWSCHUNK_OK; at += step)
		e = fg_awschunk_feed(c, p + at, n - at < step ? n - at : step);
	if (e != FG_AWSCHUNK_OK)
		return e;
	return fg_awschunk_end(c);
}

static uint64_t decoded_of(const size_t *sizes, size_t n)
{
	uint64_t t = 0;
	for (size_t i = 0; i < n; i++)
		t += sizes[i];
	return t;
}

/* The documented body, written out from AWS's numbers. */
static char *example_body(size_t *len)
{
	char *p = malloc(EX_CONTENT_LENGTH + 1);
	assert_non_null(p);
	size_t n = 0;
	n += (size_t)sprintf(p + n, "10000;chunk-signature=" EX_SIG1 "\r\n");
	memset(p + n, 'a', 65536);
	n += 65536;
	n += (size_t)sprintf(p + n, "\r\n400;chunk-signature=" EX_SIG2 "\r\n");
	memset(p + n, 'a', 1024);
	n += 1024;
	n += (size_t)sprintf(p + n, "\r\n0;chunk-signature=" EX_SIG3 "\r\n\r\n");
	*len = n;
	return p;
}

static void test_aws_example(void **state)
{
	(void)state;
	struct chain ex;
	example_chain(&ex);
	size_t len;
	char *body = example_body(&len);
	assert_int_equal(len, EX_CONTENT_LENGTH);

	/* the test's signer agrees with AWS's numbers */
	char sig[65], a[65536];
	memset(a, 'a', sizeof(a));
	sign(&ex, EX_SEED, a, 65536, sig);
	assert_string_equal(sig, EX_SIG1);
	sign(&ex, EX_SIG1, a, 1024, sig);
	assert_string_equal(sig, EX_SIG2);
	sign(&ex, EX_SIG2, "", 0, sig);
	assert_string_equal(sig, EX_SIG3);

	/* verified, and signed again on the same chain: the same bytes */
	size_t steps[] = { 0, 1, 7, 4096, 65535, 65600 };
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct sink s;
		struct fg_awschunk *c = make(&ex, &ex, EX_DECODED, 0, &s);
		assert_int_equal(run(c, body, len, steps[i]), FG_AWSCHUNK_OK);
		assert_true(fg_awschunk_done(c));
		assert_int_equal(fg_awschunk_emitted(c), EX_CONTENT_LENGTH);
		assert_int_equal(s.len, len);
		assert_memory_equal(s.p, body, len);
		assert_string_equal(fg_awschunk_message(c), "");
		fg_awschunk_destroy(c);
		free(s.p);
	}
	free(body);
}

static void test_round_trip(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	size_t len;
	char *body = example_body(&len);

	struct sink s;
	struct fg_awschunk *c = make(&ex, &gw, EX_DECODED, 0, &s);
	assert_int_equal(run(c, body, len, 1000), FG_AWSCHUNK_OK);
	fg_awschunk_destroy(c);
	/* the same Content-Length, the same framing and data, new signatures */
	assert_int_equal(s.len, EX_CONTENT_LENGTH);
	assert_memory_equal(s.p, "10000;chunk-signature=", 22);
	assert_memory_not_equal(s.p + 22, EX_SIG1, 64);
	assert_memory_equal(s.p + 88, body + 88, 65536);

	/* what the test's signer writes on the gateway's chain */
	size_t sizes[] = { 65536, 1024 };
	char pre[65], sig[65], a[65536];
	memset(a, 'a', sizeof(a));
	sign(&gw, GW_SEED, a, 65536, sig);
	assert_memory_equal(s.p + 22, sig, 64);
	memcpy(pre, sig, 65);
	sign(&gw, pre, a, 1024, sig);
	assert_memory_equal(s.p + 88 + 65536 + 2 + 20, sig, 64);
	memcpy(pre, sig, 65);
	sign(&gw, pre, "", 0, sig);
	assert_memory_equal(s.p + s.len - 68, sig, 64);

	/* and the store, with the gateway's key, verifies it */
	struct sink s2;
	struct fg_awschunk *v = make(&gw, &ex, decoded_of(sizes, 2), 0, &s2);
	assert_int_equal(run(v, s.p, s.len, 0), FG_AWSCHUNK_OK);
	/* back on the client's chain: the client's body again */
	assert_int_equal(s2.len, len);
	assert_memory_equal(s2.p, body, len);
	fg_awschunk_destroy(v);
	free(s.p);
	free(s2.p);
	free(body);
}

/* Every split of a small body in two and in three pieces, and one byte at
 * a time: the output is always the whole-fed one. */
static void test_every_split(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	size_t sizes[] = { 17, 3, 40 };
	struct body b;
	build(&b, &ex, sizes, 3, false);
	uint64_t dec = decoded_of(sizes, 3);

	struct sink ref;
	struct fg_awschunk *c = make(&ex, &gw, dec, 0, &ref);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_OK);
	fg_awschunk_destroy(c);
	assert_int_equal(ref.len, b.len);

	for (size_t i = 0; i <= b.len; i++) {
		for (size_t j = i; j <= b.len; j++) {
			struct sink s;
			c = make(&ex, &gw, dec, 0, &s);
			assert_int_equal(fg_awschunk_feed(c, b.p, i), FG_AWSCHUNK_OK);
			assert_int_equal(fg_awschunk_feed(c, b.p + i, j - i),
					 FG_AWSCHUNK_OK);
			assert_int_equal(fg_awschunk_feed(c, b.p + j, b.len - j),
					 FG_AWSCHUNK_OK);
			assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_OK);
			assert_int_equal(s.len, ref.len);
			assert_memory_equal(s.p, ref.p, ref.len);
			fg_awschunk_destroy(c);
			free(s.p);
		}
	}
	struct sink s;
	c = make(&ex, &gw, dec, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 1), FG_AWSCHUNK_OK);
	assert_memory_equal(s.p, ref.p, ref.len);
	fg_awschunk_destroy(c);
	free(s.p);
	free(ref.p);
	free(b.p);
}

/* feed() stops before the last data chunk, whole as the body may be;
 * end() sends it with the final chunk, once. */
static void test_last_chunk_waits_for_end(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	size_t sizes[] = { 10, 20, 30 };
	struct body b;
	build(&b, &ex, sizes, 3, false);
	struct sink s;
	struct fg_awschunk *c = make(&ex, &gw, 60, 0, &s);
	assert_int_equal(fg_awschunk_feed(c, b.p, b.len), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, b.at[2]);
	assert_false(fg_awschunk_done(c));
	assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_OK);
	assert_true(fg_awschunk_done(c));
	assert_int_equal(s.len, b.len);
	assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, b.len);
	/* and nothing more is taken */
	assert_int_equal(fg_awschunk_feed(c, "0", 1), FG_AWSCHUNK_FRAMING);
	assert_int_equal(s.len, b.len);
	fg_awschunk_destroy(c);
	free(s.p);

	/* a single data chunk: nothing goes on before end() */
	size_t one[] = { 60 };
	struct body o;
	build(&o, &ex, one, 1, false);
	c = make(&ex, &gw, 60, 0, &s);
	assert_int_equal(fg_awschunk_feed(c, o.p, o.len), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, 0);
	assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, o.len);
	fg_awschunk_destroy(c);
	free(s.p);
	free(o.p);
	free(b.p);
}

/* A wrong signature in chunk k: the body fails there, and what was
 * emitted is the chunks before k, but never the last data chunk. */
static void test_bad_signature(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	size_t sizes[] = { 10, 20, 30 };
	struct body b;
	build(&b, &ex, sizes, 3, false);
	uint64_t dec = decoded_of(sizes, 3);

	for (size_t k = 0; k <= 3; k++) {
		for (size_t step = 0; step <= 3; step += 3) {
			char *bad = malloc(b.len);
			memcpy(bad, b.p, b.len);
			/* a digit of the signature, still lowercase hex */
			char *d = (char *)memchr(bad + b.at[k], '=', 20) + 1 + 10;
			*d = *d == '0' ? '1' : '0';
			struct sink s;
			struct fg_awschunk *c = make(&ex, &gw, dec, 0, &s);
			assert_int_equal(run(c, bad, b.len, step),
					 FG_AWSCHUNK_BAD_SIGNATURE);
			size_t want = k < 3 ? b.at[k] : b.at[2];
			assert_int_equal(s.len, want);
			assert_int_equal(fg_awschunk_emitted(c), want);
			assert_false(fg_awschunk_done(c));
			/* the error stays */
			assert_int_equal(fg_awschunk_feed(c, "x", 1),
					 FG_AWSCHUNK_BAD_SIGNATURE);
			assert_int_equal(fg_awschunk_end(c),
					 FG_AWSCHUNK_BAD_SIGNATURE);
			assert_int_equal(s.len, want);
			assert_string_equal(fg_awschunk_message(c),
					    k < 3 ? "data chunk signature does not match"
						  : "final chunk signature does not match");
			fg_awschunk_destroy(c);
			free(s.p);
			free(bad);
		}
	}

	/* a changed data byte, with its signature left */
	for (size_t k = 0; k < 3; k++) {
		char *bad = malloc(b.len);
		memcpy(bad, b.p, b.len);
		char *d = (char *)memchr(bad + b.at[k], '\n', 100) + 1 + 5;
		*d ^= 1;
		struct sink s;
		struct fg_awschunk *c = make(&ex, &gw, dec, 0, &s);
		assert_int_equal(run(c, bad, b.len, 1), FG_AWSCHUNK_BAD_SIGNATURE);
		assert_int_equal(s.len, k < 2 ? b.at[k] : b.at[2]);
		fg_awschunk_destroy(c);
		free(s.p);
		free(bad);
	}

	/* signed on another chain (the gateway's body sent back as is) */
	struct body o;
	build(&o, &gw, sizes, 3, false);
	struct sink s;
	struct fg_awschunk *c = make(&ex, &gw, dec, 0, &s);
	assert_int_equal(run(c, o.p, o.len, 0), FG_AWSCHUNK_BAD_SIGNATURE);
	assert_int_equal(s.len, 0);
	fg_awschunk_destroy(c);
	free(s.p);
	free(o.p);
	free(b.p);
}

struct framing_case {
	const char *name;
	const char *body;
	enum fg_awschunk_err err;
};

#define SIG64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_framing(void **state)
{
	(void)state;
	static const struct framing_case cases[] = {
		{ "leading space", " a;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "leading plus", "+a;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "leading zero", "0a;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "no digits", ";chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "17 digits", "10000000000000000;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "17 digits of f", "fffffffffffffffff;", FG_AWSCHUNK_FRAMING },
		{ "size then CRLF", "a\r\n", FG_AWSCHUNK_FRAMING },
		{ "space before ;", "a ;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "other extension", "a;foo=bar;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "misspelt", "a;chunk-signatur=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "upper-case name", "a;Chunk-Signature=" SIG64 "\r\n", FG_AWSCHUNK_FRAMING },
		{ "upper-case hex", "a;chunk-signature=0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\r\n", FG_AWSCHUNK_FRAMING },
		{ "63 hex", "a;chunk-signature=123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\r\n", FG_AWSCHUNK_FRAMING },
		{ "65 hex", "a;chunk-signature=" SIG64 "0\r\n", FG_AWSCHUNK_FRAMING },
		{ "LF alone", "a;chunk-signature=" SIG64 "\n", FG_AWSCHUNK_FRAMING },
		{ "CR alone", "a;chunk-signature=" SIG64 "\rx", FG_AWSCHUNK_FRAMING },
		{ "a later extension", "a;chunk-signature=" SIG64 ";x\r\n", FG_AWSCHUNK_FRAMING },
		{ "data without CRLF", "a;chunk-signature=" SIG64 "\r\n0123456789X\r\n", FG_AWSCHUNK_FRAMING },
		{ "data with LF only", "a;chunk-signature=" SIG64 "\r\n0123456789\n", FG_AWSCHUNK_FRAMING },
		{ "over the maximum", "1000001;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_TOO_BIG },
		{ "16 digits", "ffffffffffffffff;chunk-signature=" SIG64 "\r\n", FG_AWSCHUNK_TOO_BIG },
	};
	struct chain ex;
	example_chain(&ex);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t step = 0; step <= 1; step++) {
			struct sink s;
			struct fg_awschunk *c = make(&ex, &ex, UINT64_MAX, 0, &s);
			enum fg_awschunk_err e =
				run(c, cases[i].body, strlen(cases[i].body), step);
			if (e != cases[i].err)
				fail_msg("%s: %s", cases[i].name,
					 fg_awschunk_strerror(e));
			assert_int_equal(s.len, 0);
			assert_true(fg_awschunk_message(c)[0] != '\0');
			fg_awschunk_destroy(c);
			free(s.p);
		}
	}

	/* bytes after the final chunk: the body fails, and the last data
	 * chunk and the final chunk, held until end(), never went on */
	size_t sizes[] = { 5 };
	struct body b;
	build(&b, &ex, sizes, 1, false);
	const char *tails[] = { "x", "\r\n", "0;chunk-signature=" };
	for (size_t i = 0; i < 3; i++) {
		struct sink s;
		struct fg_awschunk *c = make(&ex, &ex, 5, 0, &s);
		char *p = malloc(b.len + 32);
		memcpy(p, b.p, b.len);
		memcpy(p + b.len, tails[i], strlen(tails[i]));
		assert_int_equal(run(c, p, b.len + strlen(tails[i]), 0),
				 FG_AWSCHUNK_FRAMING);
		assert_string_equal(fg_awschunk_message(c),
				    "bytes after the final chunk");
		assert_int_equal(s.len, 0);  /* the only chunk stayed back */
		fg_awschunk_destroy(c);
		free(s.p);
		free(p);
	}

	/* cut short anywhere: end() says so, and the last chunk stays back */
	for (size_t cut = 0; cut < b.len; cut++) {
		struct sink s;
		struct fg_awschunk *c = make(&ex, &ex, 5, 0, &s);
		assert_int_equal(fg_awschunk_feed(c, b.p, cut), FG_AWSCHUNK_OK);
		assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_TRUNCATED);
		assert_int_equal(s.len, 0);
		fg_awschunk_destroy(c);
		free(s.p);
	}
	free(b.p);

	/* an upper-case size is taken, and passed on as written */
	size_t sizes2[] = { 26, 1 };
	build(&b, &ex, sizes2, 2, true);
	assert_memory_equal(b.p, "1A;", 3);
	struct sink s;
	struct fg_awschunk *c = make(&ex, &ex, 27, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, b.len);
	assert_memory_equal(s.p, b.p, b.len);
	fg_awschunk_destroy(c);
	free(s.p);
	free(b.p);
}

static void test_length_mismatch(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	size_t sizes[] = { 10, 20, 30 };
	struct body b;
	build(&b, &ex, sizes, 3, false);

	/* declared longer: the final chunk comes early; every data chunk
	 * verified, and all went on but the store never got its final chunk */
	struct sink s;
	struct fg_awschunk *c = make(&ex, &gw, 61, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_LENGTH);
	assert_int_equal(s.len, b.at[3]);
	fg_awschunk_destroy(c);
	free(s.p);

	/* declared shorter: the third chunk would pass it */
	c = make(&ex, &gw, 35, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 1), FG_AWSCHUNK_LENGTH);
	assert_int_equal(s.len, b.at[2]);
	fg_awschunk_destroy(c);
	free(s.p);

	/* declared as two chunks' worth: the third one is one too many,
	 * and the second (the last of the declared bytes) stays back */
	c = make(&ex, &gw, 30, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_LENGTH);
	assert_int_equal(s.len, b.at[1]);
	fg_awschunk_destroy(c);
	free(s.p);
	free(b.p);
}

static void test_max_chunk(void **state)
{
	(void)state;
	struct chain ex;
	example_chain(&ex);
	size_t sizes[] = { 20, 7 };
	struct body b;
	build(&b, &ex, sizes, 2, false);

	struct sink s;
	struct fg_awschunk *c = make(&ex, &ex, 27, 20, &s);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_OK);
	fg_awschunk_destroy(c);
	free(s.p);

	c = make(&ex, &ex, 27, 19, &s);
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_TOO_BIG);
	assert_int_equal(s.len, 0);
	fg_awschunk_destroy(c);
	free(s.p);

	/* the default: 16 MiB is taken, one more byte is not */
	c = make(&ex, &ex, UINT64_MAX, 0, &s);
	assert_int_equal(fg_awschunk_feed(c, "1000000;", 8), FG_AWSCHUNK_OK);
	fg_awschunk_destroy(c);
	c = make(&ex, &ex, UINT64_MAX, 0, &s);
	assert_int_equal(fg_awschunk_feed(c, "1000001;", 8), FG_AWSCHUNK_TOO_BIG);
	fg_awschunk_destroy(c);
	free(b.p);

	/* a whole 16 MiB chunk goes through */
	size_t big[] = { FG_AWSCHUNK_MAX_DEFAULT };
	build(&b, &ex, big, 1, false);
	c = make(&ex, &ex, FG_AWSCHUNK_MAX_DEFAULT, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 100000), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, b.len);
	fg_awschunk_destroy(c);
	free(s.p);
	free(b.p);
}

static void test_empty_body(void **state)
{
	(void)state;
	struct chain ex, gw;
	example_chain(&ex);
	gateway_chain(&gw);
	struct body b;
	build(&b, &ex, NULL, 0, false);
	struct body want;
	build(&want, &gw, NULL, 0, false);

	struct sink s;
	struct fg_awschunk *c = make(&ex, &gw, 0, 0, &s);
	assert_int_equal(run(c, b.p, b.len, 1), FG_AWSCHUNK_OK);
	assert_int_equal(s.len, want.len);
	assert_memory_equal(s.p, want.p, want.len);
	fg_awschunk_destroy(c);
	free(s.p);

	/* nothing at all is not a body */
	c = make(&ex, &gw, 0, 0, &s);
	assert_int_equal(fg_awschunk_end(c), FG_AWSCHUNK_TRUNCATED);
	fg_awschunk_destroy(c);
	free(s.p);

	/* a data chunk where none was declared */
	size_t sizes[] = { 1 };
	struct body one;
	build(&one, &ex, sizes, 1, false);
	c = make(&ex, &gw, 0, 0, &s);
	assert_int_equal(run(c, one.p, one.len, 0), FG_AWSCHUNK_LENGTH);
	assert_int_equal(s.len, 0);
	fg_awschunk_destroy(c);
	free(s.p);
	free(one.p);
	free(want.p);
	free(b.p);
}

static void test_emit_refused(void **state)
{
	(void)state;
	struct chain ex;
	example_chain(&ex);
	size_t sizes[] = { 10, 20 };
	struct body b;
	build(&b, &ex, sizes, 2, false);
	struct sink s;
	struct fg_awschunk *c = make(&ex, &ex, 30, 0, &s);
	s.refuse_at = 5;
	assert_int_equal(run(c, b.p, b.len, 0), FG_AWSCHUNK_EMIT);
	assert_int_equal(s.len, 0);
	assert_int_equal(fg_awschunk_feed(c, "", 0), FG_AWSCHUNK_EMIT);
	fg_awschunk_destroy(c);
	free(s.p);
	free(b.p);
}

static void test_create_checks(void **state)
{
	(void)state;
	struct chain ex;
	example_chain(&ex);
	struct sink s = { 0 };
	struct fg_awschunk_config cfg = { 0 };
	struct fg_awschunk *c = (struct fg_awschunk *)&cfg;
	side_of(&cfg.client, &ex);
	side_of(&cfg.upstream, &ex);
	cfg.emit_arg = &s;
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	assert_null(c);
	cfg.emit = take;

	cfg.client.seed = "4F232C4386841EF735655705268965C44A0E4690BAA4ADEA153F7DB9FA80A0A9";
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.client.seed = "4f232c";
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.client.seed = EX_SEED "0";
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.client.seed = EX_SEED;
	cfg.upstream.amz_date = "20130524T000000Z\nX";
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.upstream.amz_date = "";
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.upstream.amz_date = EX_DATE;
	char long_scope[FG_AWSCHUNK_SCOPE_MAX + 2];
	memset(long_scope, 'x', sizeof(long_scope) - 1);
	long_scope[sizeof(long_scope) - 1] = '\0';
	cfg.upstream.scope = long_scope;
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	cfg.upstream.scope = EX_SCOPE;
	cfg.upstream.key = NULL;
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_INVALID);
	assert_null(c);
	cfg.upstream.key = ex.key;
	assert_int_equal(fg_awschunk_create(&cfg, &c), FG_AWSCHUNK_OK);
	fg_awschunk_destroy(c);
	fg_awschunk_destroy(NULL);

	for (int e = FG_AWSCHUNK_OK; e <= FG_AWSCHUNK_INVALID; e++)
		assert_true(strlen(fg_awschunk_strerror(e)) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aws_example),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_every_split),
		cmocka_unit_test(test_last_chunk_waits_for_end),
		cmocka_unit_test(test_bad_signature),
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_length_mismatch),
		cmocka_unit_test(test_max_chunk),
		cmocka_unit_test(test_empty_body),
		cmocka_unit_test(test_emit_refused),
		cmocka_unit_test(test_create_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
