/*
 * fuzz_awschunk - an aws-chunked body with signed chunks, checked on the
 * client's chain and signed again on the upstream's
 * (gateway/base/awschunk.c), fed in fuzz-chosen pieces.
 *
 * The input: a flags byte, a count of split bytes (low 4 bits of the
 * second byte) and that many split bytes (the sizes of the feeds, 1..256,
 * cycled). Then, when flag bit 0 is clear, two bytes of declared length,
 * a byte of maximum chunk (times 16; 0: the default) and the body's bytes
 * as they are. When it is set, the harness builds a valid body itself
 * with its own signer: a count of chunks (0..5), two bytes per chunk's
 * size (1..700), a mutation (two bytes of position, a byte to xor, used
 * when flag bit 1 is set), and the rest as the data's bytes; flag bit 2
 * declares a byte more than the chunks hold, bit 3 a byte less, bit 4
 * sets the maximum one below the largest chunk.
 *
 * Properties:
 *  - fed in pieces, the body gives what it gives fed whole: the same
 *    result and the same bytes out;
 *  - never more bytes out than in; what came out is whole chunks; feed()
 *    alone never lets out the final chunk nor every declared byte;
 *  - on success the output is exactly as long as the input, ends with the
 *    final chunk, and its chunks hold the declared length;
 *  - on any error the output's chunks hold fewer bytes than declared (or
 *    nothing at all): the store never has the whole object;
 *  - a valid body built here verifies, and its output is what the
 *    harness's signer writes on the upstream's chain; one that breaks a
 *    rule fails; a mutated one, where it still succeeds, keeps its length,
 *    and where it fails, what came out before the mutation is the
 *    reference's.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/awschunk.h"
#include "fuzz.h"

#define MAX_CHUNKS 5
#define MAX_SIZE 700

struct chain {
	const unsigned char *key;
	const char *date, *scope, *seed;
};

static const struct chain client_chain = {
	(const unsigned char *)FUZZ_KEY, "20130524T000000Z",
	"20130524/us-east-1/s3/aws4_request",
	"4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
};
static const struct chain upstream_chain = {
	(const unsigned char *)FUZZ_OTHER_KEY, "20260101T000000Z",
	"20260101/eu-west-3/s3/aws4_request",
	"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
};

static void hexs(const unsigned char *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static void ref_sign(const struct chain *ch, const char *prev,
		     const unsigned char *data, size_t n, char out[65])
{
	unsigned char d[32], mac[32];
	unsigned int dl = 0, ml = 0;
	char dh[65], sts[512];
	PROPERTY(EVP_Digest(data, n, d, &dl, EVP_sha256(), NULL));
	hexs(d, 32, dh);
	int len = snprintf(sts, sizeof(sts),
			   "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n"
			   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n%s",
			   ch->date, ch->scope, prev, dh);
	PROPERTY(len > 0 && (size_t)len < sizeof(sts));
	PROPERTY(HMAC(EVP_sha256(), ch->key, 32, (unsigned char *)sts,
		      (size_t)len, mac, &ml));
	hexs(mac, 32, out);
}

/* The body of the given chunks signed on ch; returns its length. */
static size_t ref_build(const struct chain *ch, const size_t *sizes, size_t n,
			const unsigned char *data, char *out)
{
	size_t len = 0, off = 0;
	char prev[65];
	memcpy(prev, ch->seed, 65);
	for (size_t i = 0; i <= n; i++) {
		size_t sz = i < n ? sizes[i] : 0;
		char sig[65];
		ref_sign(ch, prev, data + off, sz, sig);
		len += (size_t)sprintf(out + len, "%zx;chunk-signature=%s\r\n",
				       sz, sig);
		memcpy(out + len, data + off, sz);
		len += sz;
		memcpy(out + len, "\r\n", 2);
		len += 2;
		off += sz;
		memcpy(prev, sig, 65);
	}
	return len;
}

struct sink {
	char *p;
	size_t len, cap;
};

static bool take(void *arg, const char *p, size_t n)
{
	struct sink *s = arg;
	PROPERTY(n > 0);
	PROPERTY(s->len + n <= s->cap); /* never more out than in */
	memcpy(s->p + s->len, p, n);
	s->len += n;
	return true;
}

/* The data bytes the whole chunks of out hold; whether it ends with the
 * final chunk. Every chunk must be whole and well-formed. */
static uint64_t out_decoded(const char *p, size_t n, bool *final)
{
	uint64_t total = 0;
	size_t at = 0;
	*final = false;
	while (at < n) {
		PROPERTY(!*final);
		uint64_t v = 0;
		size_t digits = 0;
		while (at < n && p[at] != ';') {
			char ch = p[at++];
			int h = ch >= '0' && ch <= '9' ? ch - '0'
				: ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
				: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
			PROPERTY(h >= 0 && digits < 16);
			v = v << 4 | (uint64_t)h;
			digits++;
		}
		PROPERTY(digits > 0);
		PROPERTY(n - at >= 1 + 16 + 64 + 2);
		PROPERTY(memcmp(p + at, ";chunk-signature=", 17) == 0);
		at += 17 + 64;
		PROPERTY(memcmp(p + at, "\r\n", 2) == 0);
		at += 2;
		PROPERTY(n - at >= v + 2);
		at += (size_t)v;
		PROPERTY(memcmp(p + at, "\r\n", 2) == 0);
		at += 2;
		total += v;
		if (v == 0)
			*final = true;
	}
	return total;
}

struct run {
	enum fg_awschunk_err err;
	size_t out_len;
};

static struct run feed(const char *body, size_t len, uint64_t declared,
		       size_t max_chunk, const uint8_t *splits, size_t nsplits,
		       struct sink *s)
{
	struct fg_awschunk_config cfg = { 0 };
	cfg.client.key = client_chain.key;
	cfg.client.amz_date = client_chain.date;
	cfg.client.scope = client_chain.scope;
	cfg.client.seed = client_chain.seed;
	cfg.upstream.key = upstream_chain.key;
	cfg.upstream.amz_date = upstream_chain.date;
	cfg.upstream.scope = upstream_chain.scope;
	cfg.upstream.seed = upstream_chain.seed;
	cfg.decoded_length = declared;
	cfg.max_chunk = max_chunk;
	cfg.emit = take;
	cfg.emit_arg = s;
	s->len = 0;
	struct fg_awschunk *c = NULL;
	struct run r = { FG_AWSCHUNK_OK, 0 };
	r.err = fg_awschunk_create(&cfg, &c);
	PROPERTY(r.err == FG_AWSCHUNK_OK);
	size_t at = 0, i = 0;
	while (at < len && r.err == FG_AWSCHUNK_OK) {
		size_t k = nsplits ? (size_t)splits[i++ % nsplits] + 1 : len;
		if (k > len - at)
			k = len - at;
		r.err = fg_awschunk_feed(c, body + at, k);
		PROPERTY(fg_awschunk_emitted(c) == s->len);
		at += k;
	}
	bool final;
	uint64_t dec = out_decoded(s->p, s->len, &final);
	/* feed() alone never completes the body upstream */
	PROPERTY(!final && (s->len == 0 || dec < declared));
	if (r.err == FG_AWSCHUNK_OK)
		r.err = fg_awschunk_end(c);
	PROPERTY(fg_awschunk_end(c) == r.err);  /* the result stays */
	PROPERTY((r.err == FG_AWSCHUNK_OK) == fg_awschunk_done(c));
	PROPERTY((r.err == FG_AWSCHUNK_OK) == (fg_awschunk_message(c)[0] == '\0'));
	fg_awschunk_destroy(c);

	dec = out_decoded(s->p, s->len, &final);
	if (r.err == FG_AWSCHUNK_OK) {
		PROPERTY(s->len == len);
		PROPERTY(final && dec == declared);
	} else {
		PROPERTY(!final);
		PROPERTY(s->len == 0 || dec < declared);
	}
	r.out_len = s->len;
	return r;
}

static char built[MAX_CHUNKS * (MAX_SIZE + 100) + 100];
static char upstream_ref[sizeof(built)];
static unsigned char databuf[MAX_CHUNKS * MAX_SIZE];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint8_t flags = data[0];
	size_t nsplits = data[1] & 15;
	if (size < 2 + nsplits)
		return 0;
	const uint8_t *splits = data + 2;
	const uint8_t *p = data + 2 + nsplits;
	size_t n = size - 2 - nsplits;

	const char *body;
	size_t len;
	uint64_t declared;
	size_t max_chunk = 0;
	bool valid = false, mutated = false;
	size_t mut_pos = 0;

	if (!(flags & 1)) {
		if (n < 3)
			return 0;
		declared = (uint64_t)p[0] | (uint64_t)p[1] << 8;
		max_chunk = (size_t)p[2] * 16;
		body = (const char *)p + 3;
		len = n - 3;
	} else {
		if (n < 1)
			return 0;
		size_t nchunks = p[0] % (MAX_CHUNKS + 1);
		p++, n--;
		if (n < 2 * nchunks + 3)
			return 0;
		size_t sizes[MAX_CHUNKS], total = 0, largest = 0;
		for (size_t i = 0; i < nchunks; i++) {
			sizes[i] = ((size_t)p[2 * i] | (size_t)p[2 * i + 1] << 8) %
				   MAX_SIZE + 1;
			total += sizes[i];
			if (sizes[i] > largest)
				largest = sizes[i];
		}
		p += 2 * nchunks, n -= 2 * nchunks;
		size_t pos = (size_t)p[0] | (size_t)p[1] << 8;
		uint8_t x = p[2] ? p[2] : 1;
		p += 3, n -= 3;
		for (size_t i = 0; i < total; i++)
			databuf[i] = n ? p[i % n] : (unsigned char)('a' + i % 26);
		len = ref_build(&client_chain, sizes, nchunks, databuf, built);
		size_t ref_len = ref_build(&upstream_chain, sizes, nchunks,
					   databuf, upstream_ref);
		PROPERTY(ref_len == len);
		declared = total;
		valid = true;
		if (flags & 4) {
			declared = total + 1;
			valid = false;
		} else if ((flags & 8) && total > 0) {
			declared = total - 1;
			valid = false;
		}
		if ((flags & 16) && largest > 1) {
			max_chunk = largest - 1;
			valid = false;
		}
		if (flags & 2) {
			mut_pos = pos % len;
			built[mut_pos] ^= (char)x;
			mutated = true;
		}
		body = built;
	}

	struct sink whole = { malloc(len + 1), 0, len };
	struct sink stepped = { malloc(len + 1), 0, len };
	PROPERTY(whole.p && stepped.p);
	struct run a = feed(body, len, declared, max_chunk, NULL, 0, &whole);
	struct run b = feed(body, len, declared, max_chunk, splits, nsplits,
			    &stepped);
	PROPERTY(a.err == b.err);
	PROPERTY(a.out_len == b.out_len);
	PROPERTY(memcmp(whole.p, stepped.p, a.out_len) == 0);

	if (flags & 1) {
		if (!mutated) {
			PROPERTY((a.err == FG_AWSCHUNK_OK) == valid);
			if (valid)
				PROPERTY(memcmp(whole.p, upstream_ref, len) == 0);
			else
				PROPERTY(a.out_len < len);
		} else if (a.err != FG_AWSCHUNK_OK && mut_pos >= a.out_len) {
			/* the chunks before the change are the reference's */
			PROPERTY(memcmp(whole.p, upstream_ref, a.out_len) == 0);
		}
	}
	free(whole.p);
	free(stepped.p);
	return 0;
}
