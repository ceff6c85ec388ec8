/*
 * tests/unit/base/test_sigv4.c - AWS Signature Version 4 (gateway/base/sigv4.c).
 *
 * Pins sigv4.h: the documented S3 examples (GET Object, PUT Object, GET
 * Bucket lifecycle, list objects, the presigned GET) verify and sign to
 * their published signatures; every result class and the S3 answer it
 * maps to; the skew and expiry bounds to the second; the canonical URI of
 * odd keys (spaces, UTF-8, '+', '~', `//`, `..`); the canonical query's
 * order and encoding; a header sent several times; sign-then-verify round
 * trips; a changed secret never meets a cached key. cmocka's asserts do
 * not depend on NDEBUG.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "base/sigv4.h"

#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define HOST "examplebucket.s3.amazonaws.com"
#define T0 1369353600 /* 2013-05-24T00:00:00Z */
#define SCOPE AKID "/20130524/us-east-1/s3/aws4_request"

#define H(n, v) { n, sizeof(n) - 1, v, sizeof(v) - 1 }

static struct fg_sigv4_cache *cache;
static const char *secret_now = SECRET;
static int lookups;
static const int the_key = 1;

static const void *lookup(void *arg, const char *key_id, const char **secret,
			  size_t *secret_len)
{
	(void)arg;
	lookups++;
	if (strcmp(key_id, AKID) != 0)
		return NULL;
	*secret = secret_now;
	*secret_len = strlen(secret_now);
	return &the_key;
}

static int setup(void **s)
{
	(void)s;
	cache = fg_sigv4_cache_create();
	secret_now = SECRET;
	return cache ? 0 : -1;
}

static int teardown(void **s)
{
	(void)s;
	fg_sigv4_cache_destroy(cache);
	cache = NULL;
	return 0;
}

static struct fg_sigv4_request req_of(const char *method, const char *target,
				      const struct fg_sigv4_header *h, size_t n)
{
	const char *q = strchr(target, '?');
	struct fg_sigv4_request r = {
		.method = method,
		.path = target,
		.path_len = q ? (size_t)(q - target) : strlen(target),
		.query = q ? q + 1 : "",
		.query_len = q ? strlen(q + 1) : 0,
		.headers = h,
		.nheaders = n,
	};
	return r;
}

static struct fg_sigv4_auth auth;

static enum fg_sigv4_result verify_at(const char *method, const char *target,
				      const struct fg_sigv4_header *h, size_t n,
				      int64_t now)
{
	struct fg_sigv4_request r = req_of(method, target, h, n);
	return fg_sigv4_verify(&r, now, "us-east-1", lookup, NULL, cache, &auth);
}

#define VERIFY(m, t, h, now) verify_at(m, t, h, sizeof(h) / sizeof(h[0]), now)

/* ---- the documented examples ------------------------------------------ */

#define GET_SIG "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"

static void test_get_object_example_verifies(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("Host", HOST),
		H("Range", "bytes=0-9"),
		H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" GET_SIG),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0), FG_SIGV4_OK);
	assert_ptr_equal(auth.key, &the_key);
	assert_string_equal(auth.key_id, AKID);
	assert_string_equal(auth.region, "us-east-1");
	assert_string_equal(auth.amz_date, "20130524T000000Z");
	assert_false(auth.presigned);
	assert_false(auth.has_token);
	assert_int_equal(auth.nsigned, 4);
	assert_true(fg_sigv4_signed(&auth, "Range", 5));
	assert_true(fg_sigv4_signed(&auth, "HOST", 4));
	assert_true(fg_sigv4_signed(&auth, "x-amz-date", 10));
	assert_false(fg_sigv4_signed(&auth, "x-amz-dat", 9));
	assert_false(fg_sigv4_signed(&auth, "user-agent", 10));
	assert_false(fg_sigv4_signed(&auth, "authorization", 13));

	char out[1024];
	struct fg_sigv4_request r = req_of("GET", "/test.txt", h, 5);
	long n = fg_sigv4_canonical_request(&r, &auth, cache, out, sizeof(out));
	assert_true(n > 0);
	assert_string_equal(out, "GET\n/test.txt\n\n"
				 "host:" HOST "\nrange:bytes=0-9\n"
				 "x-amz-content-sha256:" EMPTY_SHA "\n"
				 "x-amz-date:20130524T000000Z\n\n"
				 "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY_SHA);
	/* too small a buffer is refused, not cut */
	assert_int_equal(fg_sigv4_canonical_request(&r, &auth, cache, out, (size_t)n), -1);
}

static void test_get_object_example_signs(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("x-amz-date", "20130524T000000Z"),
		H("Range", "bytes=0-9"),
		H("Host", HOST),
		H("X-Amz-Content-Sha256", EMPTY_SHA),
	};
	struct fg_sigv4_creds c = { AKID, SECRET, "us-east-1", "s3" };
	char out[FG_SIGV4_AUTH_VALUE_MAX], seed[65];
	assert_int_equal(fg_sigv4_sign("GET", "/test.txt", 9, "", 0, h, 4, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, out, sizeof(out), seed),
			 0);
	assert_string_equal(out, "AWS4-HMAC-SHA256 Credential=" SCOPE
				 ", SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"
				 ", Signature=" GET_SIG);
	assert_string_equal(seed, GET_SIG);
	/* too small an output is refused */
	assert_int_equal(fg_sigv4_sign("GET", "/test.txt", 9, "", 0, h, 4, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, out, 100, NULL),
			 -1);
}

#define PUT_SHA "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
#define PUT_SIG "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"

static void test_put_object_example_verifies(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("Host", HOST),
		H("Date", "Fri, 24 May 2013 00:00:00 GMT"),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class"
		  ",Signature=" PUT_SIG),
		H("x-amz-date", "20130524T000000Z"),
		H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
		H("x-amz-content-sha256", PUT_SHA),
	};
	/* '$' raw or encoded: the canonical URI is /test%24file.text either way */
	assert_int_equal(VERIFY("PUT", "/test$file.text", h, T0), FG_SIGV4_OK);
	assert_int_equal(VERIFY("PUT", "/test%24file.text", h, T0), FG_SIGV4_OK);
	assert_string_equal(auth.payload_hash, PUT_SHA);
	assert_int_equal(VERIFY("PUT", "/test$file.txt", h, T0), FG_SIGV4_BAD_SIGNATURE);
	assert_int_equal(VERIFY("POST", "/test$file.text", h, T0), FG_SIGV4_BAD_SIGNATURE);
}

static void test_bucket_examples_with_a_query_verify(void **s)
{
	(void)s;
	struct fg_sigv4_header lc[] = {
		H("Host", HOST),
		H("x-amz-date", "20130524T000000Z"),
		H("x-amz-content-sha256", EMPTY_SHA),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
		  "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
	};
	assert_int_equal(VERIFY("GET", "/?lifecycle", lc, T0), FG_SIGV4_OK);
	struct fg_sigv4_header ls[] = {
		H("Host", HOST),
		H("x-amz-date", "20130524T000000Z"),
		H("x-amz-content-sha256", EMPTY_SHA),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
		  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
	};
	assert_int_equal(VERIFY("GET", "/?max-keys=2&prefix=J", ls, T0), FG_SIGV4_OK);
	/* the order of the parameters as sent does not matter */
	assert_int_equal(VERIFY("GET", "/?prefix=J&max-keys=2", ls, T0), FG_SIGV4_OK);
	assert_int_equal(VERIFY("GET", "/?prefix=K&max-keys=2", ls, T0),
			 FG_SIGV4_BAD_SIGNATURE);
}

#define PRESIGNED                                                               \
	"/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"                            \
	"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" \
	"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
#define PRESIGNED_SIG "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static void test_presigned_example_verifies(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = { H("Host", HOST) };
	assert_int_equal(VERIFY("GET", PRESIGNED "&X-Amz-Signature=" PRESIGNED_SIG, h, T0),
			 FG_SIGV4_OK);
	assert_true(auth.presigned);
	assert_int_equal(auth.expires, 86400);
	assert_string_equal(auth.payload_hash, "UNSIGNED-PAYLOAD");
	/* the signature anywhere in the query; '/' in the credential unencoded */
	assert_int_equal(VERIFY("GET", "/test.txt?X-Amz-Signature=" PRESIGNED_SIG
				"&X-Amz-Algorithm=AWS4-HMAC-SHA256"
				"&X-Amz-Credential=" SCOPE
				"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
				"&X-Amz-SignedHeaders=host", h, T0 + 100),
			 FG_SIGV4_OK);
	/* every byte of the query is signed */
	assert_int_equal(VERIFY("GET", PRESIGNED "&X-Amz-Signature=" PRESIGNED_SIG "&x=1",
				h, T0),
			 FG_SIGV4_BAD_SIGNATURE);
}

/* A presigned URL with a session token, signed here step by step (the
 * canonical request from the module, the rest from OpenSSL), verifies and
 * hands the token back decoded. */
static void test_presigned_with_a_session_token(void **s)
{
	(void)s;
	const char *q = "X-Amz-Algorithm=AWS4-HMAC-SHA256"
			"&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
			"&X-Amz-Date=20130524T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
			"&X-Amz-Security-Token=fg1.AAA%2Cfg1.BBB"
			"&X-Amz-Signature=0000000000000000000000000000000000000000000000000000000000000000";
	struct fg_sigv4_header h[] = { H("Host", HOST) };
	char target[1024];
	snprintf(target, sizeof(target), "/b/k?%s", q);
	struct fg_sigv4_auth a;
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_OK);
	struct fg_sigv4_request r = req_of("GET", target, h, 1);
	char creq[2048];
	long n = fg_sigv4_canonical_request(&r, &a, cache, creq, sizeof(creq));
	assert_true(n > 0);
	assert_null(strstr(creq, "X-Amz-Signature"));
	unsigned char d[32], key[32], mac[32];
	SHA256((const unsigned char *)creq, (size_t)n, d);
	char sts[512], hex[65];
	int w = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n20130524T000000Z\n"
			 "20130524/us-east-1/s3/aws4_request\n");
	for (int i = 0; i < 32; i++)
		w += snprintf(sts + w, sizeof(sts) - (size_t)w, "%02x", d[i]);
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "20130524",
					      "us-east-1", "s3", key), 0);
	unsigned int ml = 0;
	HMAC(EVP_sha256(), key, 32, (const unsigned char *)sts, (size_t)w, mac, &ml);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	char *z = strstr(target, "X-Amz-Signature=") + 16;
	memcpy(z, hex, 64);
	assert_int_equal(VERIFY("GET", target, h, T0 + 10), FG_SIGV4_OK);
	assert_true(auth.has_token);
	assert_string_equal(auth.token, "fg1.AAA,fg1.BBB");
	/* the token is signed: another one fails */
	z = strstr(target, "fg1.BBB");
	z[6] = 'C';
	assert_int_equal(VERIFY("GET", target, h, T0 + 10), FG_SIGV4_BAD_SIGNATURE);
}

static void test_presigned_expiry_bounds(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = { H("Host", HOST) };
	const char *t = PRESIGNED "&X-Amz-Signature=" PRESIGNED_SIG;
	assert_int_equal(VERIFY("GET", t, h, T0 + 86400), FG_SIGV4_OK);
	assert_int_equal(VERIFY("GET", t, h, T0 + 86401), FG_SIGV4_EXPIRED);
	assert_int_equal(VERIFY("GET", t, h, T0 - 900), FG_SIGV4_OK);
	assert_int_equal(VERIFY("GET", t, h, T0 - 901), FG_SIGV4_NOT_YET_VALID);

	struct fg_sigv4_auth a;
	const char *base = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" SCOPE
			   "&X-Amz-Date=20130524T000000Z&X-Amz-SignedHeaders=host"
			   "&X-Amz-Signature=" PRESIGNED_SIG "&X-Amz-Expires=";
	char q[512];
	snprintf(q, sizeof(q), "%s604800", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_OK);
	assert_int_equal(a.expires, 604800);
	snprintf(q, sizeof(q), "%s604801", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_EXPIRES_TOO_LONG);
	snprintf(q, sizeof(q), "%s99999999999999999999", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_EXPIRES_TOO_LONG);
	snprintf(q, sizeof(q), "%s0", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	snprintf(q, sizeof(q), "%s-5", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	snprintf(q, sizeof(q), "%s", base);
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	/* through verify, too long is the 400 before any time check */
	struct fg_sigv4_header hh[] = { H("Host", HOST) };
	snprintf(q, sizeof(q), "/k?%s700000", base);
	assert_int_equal(VERIFY("GET", q, hh, T0), FG_SIGV4_EXPIRES_TOO_LONG);
}

static void test_presigned_query_shapes(void **s)
{
	(void)s;
	struct fg_sigv4_auth a;
	const char *q = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889120"
			"&Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4%3D";
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_SIGV2);
	q = "versionId=3&acl";
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_NO_SIGNATURE);
	assert_int_equal(fg_sigv4_parse_query("", 0, &a), FG_SIGV4_NO_SIGNATURE);
	/* one of the three, not all of them */
	q = "X-Amz-Signature=" PRESIGNED_SIG;
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	/* a parameter given twice */
	q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" SCOPE
	    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host"
	    "&X-Amz-Signature=" PRESIGNED_SIG "&X-Amz-Date=20130524T000000Z";
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	/* another algorithm */
	q = "X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256&X-Amz-Credential=" SCOPE
	    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host"
	    "&X-Amz-Signature=" PRESIGNED_SIG;
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_QUERY_MALFORMED);
	/* the session token comes back decoded */
	q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" SCOPE
	    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host"
	    "&X-Amz-Signature=" PRESIGNED_SIG
	    "&X-Amz-Security-Token=fg1.abc%2Cfg1.def%2B";
	assert_int_equal(fg_sigv4_parse_query(q, strlen(q), &a), FG_SIGV4_OK);
	assert_true(a.has_token);
	assert_string_equal(a.token, "fg1.abc,fg1.def+");
	assert_int_equal(a.token_len, 16);
	/* the scope date must be X-Amz-Date's */
	struct fg_sigv4_header h[] = { H("Host", HOST) };
	assert_int_equal(VERIFY("GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
				"&X-Amz-Credential=" SCOPE "&X-Amz-Date=20130525T000000Z"
				"&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature="
				PRESIGNED_SIG, h, T0 + 86400),
			 FG_SIGV4_QUERY_MALFORMED);
}

/* ---- the Authorization header ----------------------------------------- */

static void test_header_spacing_variants_parse(void **s)
{
	(void)s;
	static const char *ok[] = {
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host;x-amz-date,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ", SignedHeaders=host;x-amz-date, Signature=" GET_SIG,
		"  AWS4-HMAC-SHA256   Credential=" SCOPE " ,  SignedHeaders=host;x-amz-date ,\tSignature=" GET_SIG "  ",
		"AWS4-HMAC-SHA256\tSignature=" GET_SIG ",Credential=" SCOPE ",SignedHeaders=host;x-amz-date",
		"AWS4-HMAC-SHA256 Credential=" SCOPE " SignedHeaders=host;x-amz-date Signature=" GET_SIG,
	};
	struct fg_sigv4_auth a;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(fg_sigv4_parse_header(ok[i], strlen(ok[i]), &a), FG_SIGV4_OK);
		assert_string_equal(a.key_id, AKID);
		assert_string_equal(a.date, "20130524");
		assert_string_equal(a.service, "s3");
		assert_string_equal(a.signed_headers, "host;x-amz-date");
		assert_string_equal(a.signature, GET_SIG);
	}
	/* upper-case hex is taken and kept lower-case */
	const char *up = "AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature="
			 "F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41";
	assert_int_equal(fg_sigv4_parse_header(up, strlen(up), &a), FG_SIGV4_OK);
	assert_string_equal(a.signature, GET_SIG);
}

static void test_header_malformed_and_sigv2(void **s)
{
	(void)s;
	struct fg_sigv4_auth a;
	const char *v2 = "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=";
	assert_int_equal(fg_sigv4_parse_header(v2, strlen(v2), &a), FG_SIGV4_SIGV2);
	static const char *bad[] = {
		"",
		"Bearer abc",
		"AWS4-HMAC-SHA256",
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host",
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/s3/aws5_request,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" AKID "/2013052/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" AKID "/20130524/us-east-1/aws4_request,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" AKID "/20130524/US-EAST-1/s3/aws4_request,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE "/x,SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=x-amz-date;host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=range;x-amz-date,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=Host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host;host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host;;x,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature=" GET_SIG "0",
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature=g0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature=" GET_SIG ",Signature=" GET_SIG,
		"AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature=" GET_SIG ",Extra=1",
		"AWS4-HMAC-SHA256 Credential =" SCOPE ",SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-HMAC-SHA256Credential=" SCOPE ",SignedHeaders=host,Signature=" GET_SIG,
		"AWS4-ECDSA-P256-SHA256 Credential=" SCOPE ",SignedHeaders=host,Signature=" GET_SIG,
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fg_sigv4_parse_header(bad[i], strlen(bad[i]), &a),
				 FG_SIGV4_MALFORMED);

	/* 64 signed headers at most */
	char list[2048] = "host", v[4096];
	for (int i = 0; i < 63; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), ";x-h%02d", i);
	snprintf(v, sizeof(v), "AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=%s,Signature=" GET_SIG, list);
	assert_int_equal(fg_sigv4_parse_header(v, strlen(v), &a), FG_SIGV4_OK);
	assert_int_equal(a.nsigned, 64);
	snprintf(list + strlen(list), sizeof(list) - strlen(list), ";x-h99");
	snprintf(v, sizeof(v), "AWS4-HMAC-SHA256 Credential=" SCOPE ",SignedHeaders=%s,Signature=" GET_SIG, list);
	assert_int_equal(fg_sigv4_parse_header(v, strlen(v), &a), FG_SIGV4_MALFORMED);
}

#define GET_AUTH                                                              \
	"AWS4-HMAC-SHA256 Credential=" SCOPE                                  \
	",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" GET_SIG

static void test_every_error_class_of_verify(void **s)
{
	(void)s;
	struct fg_sigv4_header none[] = { H("Host", HOST) };
	assert_int_equal(VERIFY("GET", "/test.txt", none, T0), FG_SIGV4_NO_SIGNATURE);

	struct fg_sigv4_header v2[] = { H("Host", HOST), H("Authorization", "AWS " AKID ":abc=") };
	assert_int_equal(VERIFY("GET", "/test.txt", v2, T0), FG_SIGV4_SIGV2);
	assert_int_equal(VERIFY("GET", "/test.txt?AWSAccessKeyId=" AKID "&Signature=x%3D&Expires=1",
				none, T0),
			 FG_SIGV4_SIGV2);

	struct fg_sigv4_header twice[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
		H("authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", twice, T0), FG_SIGV4_MALFORMED);

	struct fg_sigv4_header good[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	/* both mechanisms */
	assert_int_equal(VERIFY("GET", "/test.txt?X-Amz-Signature=" GET_SIG, good, T0),
			 FG_SIGV4_MALFORMED);
	/* another region than the gateway's */
	struct fg_sigv4_request r = req_of("GET", "/test.txt", good, 5);
	assert_int_equal(fg_sigv4_verify(&r, T0, "eu-west-1", lookup, NULL, cache, &auth),
			 FG_SIGV4_MALFORMED);
	assert_int_equal(fg_sigv4_verify(&r, T0, NULL, lookup, NULL, cache, &auth), FG_SIGV4_OK);

	/* the scope's date is not x-amz-date's */
	struct fg_sigv4_header otherday[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130525T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", otherday, T0 + 86400), FG_SIGV4_MALFORMED);
	/* no date at all, or one that does not parse */
	struct fg_sigv4_header nodate[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", nodate, T0), FG_SIGV4_MALFORMED);
	struct fg_sigv4_header baddate[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130230T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", baddate, T0), FG_SIGV4_MALFORMED);

	/* no x-amz-content-sha256 */
	struct fg_sigv4_header nosha[] = {
		H("Host", HOST), H("Range", "bytes=0-9"),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", nosha, T0), FG_SIGV4_BAD_REQUEST);
	/* a path that does not decode */
	assert_int_equal(VERIFY("GET", "/test%2.txt", good, T0), FG_SIGV4_BAD_REQUEST);

	/* a session token sent but not signed */
	struct fg_sigv4_header tok[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
		H("x-amz-security-token", "fg1.x"),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", tok, T0), FG_SIGV4_UNSIGNED_HEADER);

	/* a key the table does not know */
	struct fg_sigv4_header unknown[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDOTHER/20130524/us-east-1/s3/aws4_request"
		  ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" GET_SIG),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", unknown, T0), FG_SIGV4_UNKNOWN_KEY);
	assert_string_equal(auth.key_id, "AKIDOTHER");
	assert_null(auth.key);

	/* a wrong signature, a changed value, a signed header taken away */
	struct fg_sigv4_header wrong[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
		  "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb42"),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", wrong, T0), FG_SIGV4_BAD_SIGNATURE);
	assert_null(auth.key);
	struct fg_sigv4_header changed[] = {
		H("Host", HOST), H("Range", "bytes=0-10"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", changed, T0), FG_SIGV4_BAD_SIGNATURE);
	struct fg_sigv4_header gone[] = {
		H("Host", HOST), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", gone, T0), FG_SIGV4_BAD_SIGNATURE);
	/* the secret changed under the same key id: the cached key is not used */
	secret_now = "another-secret-of-some-length";
	assert_int_equal(VERIFY("GET", "/test.txt", good, T0), FG_SIGV4_BAD_SIGNATURE);
	secret_now = SECRET;
	assert_int_equal(VERIFY("GET", "/test.txt", good, T0), FG_SIGV4_OK);
}

static void test_clock_skew_bounds(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0 + 900), FG_SIGV4_OK);
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0 - 900), FG_SIGV4_OK);
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0 + 901), FG_SIGV4_SKEWED);
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0 - 901), FG_SIGV4_SKEWED);
	/* skew is told before the key is looked up */
	lookups = 0;
	assert_int_equal(VERIFY("GET", "/test.txt", h, T0 + 86400), FG_SIGV4_SKEWED);
	assert_int_equal(lookups, 0);
}

static void test_result_table_speaks_s3(void **s)
{
	(void)s;
	static const struct {
		enum fg_sigv4_result r;
		int status;
		const char *code;
	} want[] = {
		{ FG_SIGV4_NO_SIGNATURE, 403, "AccessDenied" },
		{ FG_SIGV4_SIGV2, 400, "InvalidRequest" },
		{ FG_SIGV4_MALFORMED, 400, "AuthorizationHeaderMalformed" },
		{ FG_SIGV4_QUERY_MALFORMED, 400, "AuthorizationQueryParametersError" },
		{ FG_SIGV4_BAD_REQUEST, 400, "InvalidRequest" },
		{ FG_SIGV4_UNSIGNED_HEADER, 403, "AccessDenied" },
		{ FG_SIGV4_UNKNOWN_KEY, 403, "InvalidAccessKeyId" },
		{ FG_SIGV4_BAD_SIGNATURE, 403, "SignatureDoesNotMatch" },
		{ FG_SIGV4_SKEWED, 403, "RequestTimeTooSkewed" },
		{ FG_SIGV4_EXPIRES_TOO_LONG, 400, "AuthorizationQueryParametersError" },
		{ FG_SIGV4_EXPIRED, 403, "AccessDenied" },
		{ FG_SIGV4_NOT_YET_VALID, 403, "AccessDenied" },
		{ FG_SIGV4_RESULT_COUNT, 403, "SignatureDoesNotMatch" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int st = 0;
		const char *code = NULL;
		const char *msg = fg_sigv4_result_s3(want[i].r, &st, &code);
		assert_int_equal(st, want[i].status);
		assert_string_equal(code, want[i].code);
		assert_true(msg && *msg);
	}
}

/* ---- canonical forms --------------------------------------------------- */

static void path_is(const char *raw, const char *want)
{
	char out[256];
	long n = fg_sigv4_canonical_path(raw, strlen(raw), out, sizeof(out));
	assert_true(n >= 0);
	assert_string_equal(out, want);
	assert_int_equal((size_t)n, strlen(want));
}

static void test_canonical_path_of_odd_keys(void **s)
{
	(void)s;
	path_is("", "/");
	path_is("/", "/");
	path_is("/b/a%20b", "/b/a%20b");
	path_is("/b/a b", "/b/a%20b");
	path_is("/b/a+b", "/b/a%2Bb");
	path_is("/b/a%2Bb", "/b/a%2Bb");
	path_is("/b/~x", "/b/~x");
	path_is("/b/%7Ex", "/b/~x");
	path_is("/b//a/../c/./d", "/b//a/../c/./d");
	path_is("/b/%2e%2e/x", "/b/../x");
	path_is("/b/caf\xc3\xa9", "/b/caf%C3%A9");
	path_is("/b/caf%c3%a9", "/b/caf%C3%A9");
	path_is("/b/a%2Fb", "/b/a/b");
	path_is("/b/x!'()*$&,;=:@", "/b/x%21%27%28%29%2A%24%26%2C%3B%3D%3A%40");
	path_is("/b/%00", "/b/%00");
	char out[16];
	assert_int_equal(fg_sigv4_canonical_path("/a%zz", 5, out, sizeof(out)), -2);
	assert_int_equal(fg_sigv4_canonical_path("/a%4", 4, out, sizeof(out)), -2);
	assert_int_equal(fg_sigv4_canonical_path("/a%", 3, out, sizeof(out)), -2);
	assert_int_equal(fg_sigv4_canonical_path("/aaaa bbbb cccc", 15, out, sizeof(out)), -1);

	assert_int_equal(fg_sigv4_uri_encode("a/b c~", 6, false, out, sizeof(out)), 10);
	assert_string_equal(out, "a%2Fb%20c~");
	assert_int_equal(fg_sigv4_uri_encode("a/b c~", 6, true, out, sizeof(out)), 8);
	assert_string_equal(out, "a/b%20c~");
	assert_int_equal(fg_sigv4_uri_encode("a/b c~", 6, true, out, 8), -1);
}

/* The canonical request of target with headers h, signed list `list`. */
static void creq_of(const char *method, const char *target, const struct fg_sigv4_header *h,
		    size_t n, const char *list, bool presigned, char *out, size_t cap)
{
	struct fg_sigv4_auth a;
	memset(&a, 0, sizeof(a));
	a.presigned = presigned;
	snprintf(a.signed_headers, sizeof(a.signed_headers), "%s", list);
	snprintf(a.payload_hash, sizeof(a.payload_hash), "UNSIGNED-PAYLOAD");
	struct fg_sigv4_request r = req_of(method, target, h, n);
	assert_true(fg_sigv4_canonical_request(&r, &a, cache, out, cap) > 0);
}

static void query_is(const char *target, bool presigned, const char *want)
{
	struct fg_sigv4_header h[] = { H("host", "h") };
	char out[1024], line[512];
	creq_of("GET", target, h, 1, "host", presigned, out, sizeof(out));
	/* the third line */
	const char *a = strchr(strchr(out, '\n') + 1, '\n') + 1;
	const char *b = strchr(a, '\n');
	snprintf(line, sizeof(line), "%.*s", (int)(b - a), a);
	assert_string_equal(line, want);
}

static void test_canonical_query(void **s)
{
	(void)s;
	query_is("/", false, "");
	query_is("/?acl", false, "acl=");
	query_is("/?b=2&a=1&a=0", false, "a=0&a=1&b=2");
	query_is("/?x=a+b", false, "x=a%2Bb");
	query_is("/?x=a%20b&y=%7e&z=a/b", false, "x=a%20b&y=~&z=a%2Fb");
	query_is("/?uploads&prefix=", false, "prefix=&uploads=");
	query_is("/?a=1&&b=2&", false, "a=1&b=2");
	query_is("/?%41=1", false, "A=1");
	/* by encoded name: "a-" (0x2D) before "a=" never compares with '=' */
	query_is("/?a-b=1&a=2", false, "a=2&a-b=1");
	query_is("/?X-Amz-Signature=abc&X-Amz-Date=1", true, "X-Amz-Date=1");
	query_is("/?X-Amz-Signature=abc&X-Amz-Date=1", false, "X-Amz-Date=1&X-Amz-Signature=abc");
}

static void test_header_sent_several_times_is_joined(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("Host", "h"),
		H("X-Foo", "a"),
		H("x-bar", "  one   two \t three  "),
		H("x-foo", "  b   c  "),
		H("X-FOO", ""),
	};
	char out[1024];
	creq_of("PUT", "/k", h, 5, "host;x-bar;x-foo", false, out, sizeof(out));
	assert_string_equal(out, "PUT\n/k\n\nhost:h\nx-bar:one two three\nx-foo:a,b c,\n\n"
				 "host;x-bar;x-foo\nUNSIGNED-PAYLOAD");
}

/* ---- round trips ------------------------------------------------------- */

static void roundtrip(const char *raw_path, const char *query, bool with_token)
{
	char canon_path[512];
	long pl = fg_sigv4_canonical_path(raw_path, strlen(raw_path), canon_path, sizeof(canon_path));
	assert_true(pl > 0);
	char amz[17];
	assert_int_equal(fg_sigv4_amz_date(T0 + 5, amz), 0);
	struct fg_sigv4_header h[8] = {
		H("Host", "store.example:7480"),
		H("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
		{ "X-Amz-Date", 10, amz, 16 },
		H("Content-Type", "text/plain"),
		H("X-Amz-Meta-A", "1"),
		H("x-amz-meta-a", "2"),
	};
	size_t n = 6;
	if (with_token)
		h[n++] = (struct fg_sigv4_header)H("x-amz-security-token", "fg1.AAA,fg1.BBB");
	struct fg_sigv4_creds c = { AKID, SECRET, "us-east-1", "s3" };
	char value[FG_SIGV4_AUTH_VALUE_MAX], seed[65];
	assert_int_equal(fg_sigv4_sign("PUT", canon_path, (size_t)pl, query, strlen(query), h, n,
				       "UNSIGNED-PAYLOAD", amz, &c, cache, value, sizeof(value), seed),
			 0);
	assert_non_null(strstr(value, seed));
	h[n++] = (struct fg_sigv4_header){ "Authorization", 13, value, strlen(value) };
	char target[1024];
	snprintf(target, sizeof(target), "%s%s%s", raw_path, *query ? "?" : "", query);
	struct fg_sigv4_request r = req_of("PUT", target, h, n);
	assert_int_equal(fg_sigv4_verify(&r, T0, "us-east-1", lookup, NULL, cache, &auth),
			 FG_SIGV4_OK);
	assert_string_equal(auth.signature, seed);
	assert_int_equal(auth.has_token, with_token);
	if (with_token)
		assert_string_equal(auth.token, "fg1.AAA,fg1.BBB");
	/* the forwarded, canonical, path verifies too: what the store sees */
	struct fg_sigv4_request fwd = req_of("PUT", target, h, n);
	fwd.path = canon_path;
	fwd.path_len = (size_t)pl;
	assert_int_equal(fg_sigv4_verify(&fwd, T0, "us-east-1", lookup, NULL, cache, &auth),
			 FG_SIGV4_OK);
}

static void test_sign_then_verify_round_trips(void **s)
{
	(void)s;
	roundtrip("/bucket/key", "", false);
	roundtrip("/bucket/key", "", true);
	roundtrip("/bucket/a b+c~d//e/../f", "uploadId=x%2By&partNumber=3", true);
	roundtrip("/bucket/caf%C3%A9%20%2B", "tagging", false);
	roundtrip("/bucket/caf\xc3\xa9", "versionId=abc&acl", false);
}

static void test_date_header_fallback(void **s)
{
	(void)s;
	struct fg_sigv4_header h[4] = {
		H("Host", HOST),
		H("Date", "Fri, 24 May 2013 00:00:00 GMT"),
		H("x-amz-content-sha256", EMPTY_SHA),
	};
	struct fg_sigv4_creds c = { AKID, SECRET, "us-east-1", "s3" };
	char value[FG_SIGV4_AUTH_VALUE_MAX];
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, h, 3, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, value, sizeof(value), NULL),
			 0);
	h[3] = (struct fg_sigv4_header){ "Authorization", 13, value, strlen(value) };
	struct fg_sigv4_request r = req_of("GET", "/k", h, 4);
	assert_int_equal(fg_sigv4_verify(&r, T0, NULL, lookup, NULL, cache, &auth), FG_SIGV4_OK);
	assert_string_equal(auth.amz_date, "20130524T000000Z");
	/* the Date header not signed */
	struct fg_sigv4_header u[] = {
		H("Host", HOST),
		H("Date", "Fri, 24 May 2013 00:00:00 GMT"),
		H("x-amz-content-sha256", EMPTY_SHA),
		H("Authorization", "AWS4-HMAC-SHA256 Credential=" SCOPE
		  ",SignedHeaders=host;x-amz-content-sha256,Signature=" GET_SIG),
	};
	assert_int_equal(VERIFY("GET", "/k", u, T0), FG_SIGV4_UNSIGNED_HEADER);
}

static void test_amz_date(void **s)
{
	(void)s;
	char d[17];
	assert_int_equal(fg_sigv4_amz_date(T0, d), 0);
	assert_string_equal(d, "20130524T000000Z");
	assert_int_equal(fg_sigv4_amz_date(0, d), 0);
	assert_string_equal(d, "19700101T000000Z");
	assert_int_equal(fg_sigv4_amz_date(951825599, d), 0);
	assert_string_equal(d, "20000229T115959Z");
	assert_int_equal(fg_sigv4_amz_date(253402300799, d), 0);
	assert_string_equal(d, "99991231T235959Z");
	assert_int_equal(fg_sigv4_amz_date(-1, d), -1);
	assert_int_equal(fg_sigv4_amz_date(253402300800, d), -1);
}

static void test_sign_refuses_what_passes_a_bound(void **s)
{
	(void)s;
	struct fg_sigv4_creds c = { AKID, SECRET, "us-east-1", "s3" };
	char value[FG_SIGV4_AUTH_VALUE_MAX];
	struct fg_sigv4_header ok[] = { H("host", "h") };
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, ok, 1, EMPTY_SHA,
				       "2013052T000000Z", &c, cache, value, sizeof(value), NULL),
			 -1);
	struct fg_sigv4_header badname[] = { H("host", "h"), H("bad name", "v") };
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, badname, 2, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, value, sizeof(value), NULL),
			 -1);
	static struct fg_sigv4_header many[FG_SIGV4_SIGNED_MAX + 1];
	static char names[FG_SIGV4_SIGNED_MAX + 1][16];
	for (size_t i = 0; i <= FG_SIGV4_SIGNED_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), i ? "x-h%03zu" : "host", i);
		many[i] = (struct fg_sigv4_header){ names[i], strlen(names[i]), "v", 1 };
	}
	/* no host */
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, many + 1, 3, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, value, sizeof(value), NULL),
			 -1);
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, many, FG_SIGV4_SIGNED_MAX, EMPTY_SHA,
				       "20130524T000000Z", &c, cache, value, sizeof(value), NULL),
			 0);
	assert_int_equal(fg_sigv4_sign("GET", "/k", 2, "", 0, many, FG_SIGV4_SIGNED_MAX + 1,
				       EMPTY_SHA, "20130524T000000Z", &c, cache, value,
				       sizeof(value), NULL),
			 -1);
	/* a path longer than the bound is a 400 on the way in */
	static char longpath[FG_SIGV4_PATH_MAX + 2];
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	struct fg_sigv4_header h[] = {
		H("Host", HOST), H("Range", "bytes=0-9"), H("x-amz-content-sha256", EMPTY_SHA),
		H("x-amz-date", "20130524T000000Z"), H("Authorization", GET_AUTH),
	};
	assert_int_equal(VERIFY("GET", longpath, h, T0), FG_SIGV4_BAD_REQUEST);
}

static void test_signing_key_cache_many_keys(void **s)
{
	(void)s;
	unsigned char k1[32], k2[32], k3[32];
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "20130524",
					      "us-east-1", "s3", k1), 0);
	/* evict it: more keys than slots */
	for (unsigned i = 0; i < 2 * FG_SIGV4_CACHE_SLOTS; i++) {
		char id[32];
		snprintf(id, sizeof(id), "KEY%u", i);
		assert_int_equal(fg_sigv4_signing_key(cache, id, SECRET, strlen(SECRET),
						      "20130524", "us-east-1", "s3", k2), 0);
	}
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "20130524",
					      "us-east-1", "s3", k3), 0);
	assert_memory_equal(k1, k3, 32);
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "20130525",
					      "us-east-1", "s3", k2), 0);
	assert_memory_not_equal(k1, k2, 32);
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "2013052",
					      "us-east-1", "s3", k2), -1);
}

/* The documented chunked upload: its seed signature (a PUT signed by
 * fg_sigv4_sign) and the chain of its three chunk signatures. */
static void test_chunked_upload_example(void **s)
{
	(void)s;
	struct fg_sigv4_header h[] = {
		H("Host", "s3.amazonaws.com"),
		H("x-amz-date", "20130524T000000Z"),
		H("x-amz-storage-class", "REDUCED_REDUNDANCY"),
		H("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
		H("Content-Encoding", "aws-chunked"),
		H("x-amz-decoded-content-length", "66560"),
		H("Content-Length", "66824"),
	};
	struct fg_sigv4_creds c = { AKID, SECRET, "us-east-1", "s3" };
	char out[FG_SIGV4_AUTH_VALUE_MAX], seed[65];
	static const char path[] = "/examplebucket/chunkObject.txt";
	assert_int_equal(fg_sigv4_sign("PUT", path, sizeof(path) - 1, "", 0, h, 7,
				       "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "20130524T000000Z", &c,
				       cache, out, sizeof(out), seed),
			 0);
	assert_string_equal(seed, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
	assert_non_null(strstr(out, "SignedHeaders=content-encoding;content-length;host;"
				    "x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;"
				    "x-amz-storage-class, "));

	unsigned char key[32], d[32];
	assert_int_equal(fg_sigv4_signing_key(cache, AKID, SECRET, strlen(SECRET), "20130524",
					      "us-east-1", "s3", key), 0);
	static unsigned char data[65536];
	memset(data, 'a', sizeof(data));
	char sig1[65], sig2[65], sig3[65];
	SHA256(data, 65536, d);
	assert_int_equal(fg_sigv4_chunk_signature(cache, key, "20130524T000000Z", "us-east-1", "s3",
						  seed, d, sig1), 0);
	assert_string_equal(sig1, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
	SHA256(data, 1024, d);
	assert_int_equal(fg_sigv4_chunk_signature(cache, key, "20130524T000000Z", "us-east-1", "s3",
						  sig1, d, sig2), 0);
	assert_string_equal(sig2, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
	SHA256(data, 0, d);
	assert_int_equal(fg_sigv4_chunk_signature(cache, key, "20130524T000000Z", "us-east-1", "s3",
						  sig2, d, sig3), 0);
	assert_string_equal(sig3, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9");
	/* a previous signature that is not 64 digits */
	assert_int_equal(fg_sigv4_chunk_signature(cache, key, "20130524T000000Z", "us-east-1", "s3",
						  "abc", d, sig3), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_get_object_example_verifies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_object_example_signs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_object_example_verifies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bucket_examples_with_a_query_verify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_presigned_example_verifies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_presigned_with_a_session_token, setup, teardown),
		cmocka_unit_test_setup_teardown(test_presigned_expiry_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_presigned_query_shapes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_header_spacing_variants_parse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_header_malformed_and_sigv2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_error_class_of_verify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clock_skew_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_result_table_speaks_s3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canonical_path_of_odd_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_canonical_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_header_sent_several_times_is_joined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sign_then_verify_round_trips, setup, teardown),
		cmocka_unit_test_setup_teardown(test_date_header_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_amz_date, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sign_refuses_what_passes_a_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signing_key_cache_many_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunked_upload_example, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
