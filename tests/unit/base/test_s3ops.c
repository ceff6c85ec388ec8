/*
 * test_s3ops.c - unit tests of gateway/base/s3ops.c: every row of the S3
 * write-set table (path-style and virtual-host), keys as S3 takes them,
 * the lock of a key (route rule, BUCKET/KEY, the hashed fallback computed
 * here on its own), copy sources, the query parameters that are and are
 * not subresources, whole-bucket writes, and DeleteObjects bodies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "base/config.h"
#include "routes.h"
#include "base/s3ops.h"

#define DOMAIN "s3.example.com"

static struct fg_s3_req req;

static enum fg_s3_refusal classify(const struct fg_config *cfg, const char *method,
				   const char *target, const char *host,
				   const char *copy, const char *ctype)
{
	struct fg_s3_head h = { method, target, host, copy, ctype };
	return fg_s3_classify(cfg, &h, &req);
}

/* "~s3/" + base64url(SHA-256(s)), written here without the gateway's
 * encoder */
static void hashed(const char *s, size_t n, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char md[32];
	unsigned mdlen = 0;
	assert_true(EVP_Digest(s, n, md, &mdlen, EVP_sha256(), NULL));
	assert_int_equal(mdlen, 32);
	char *o = out + sprintf(out, "~s3/");
	uint32_t acc = 0;
	int bits = 0;
	for (int i = 0; i < 32; i++) {
		acc = (acc << 8) | md[i];
		bits += 8;
		while (bits >= 6) {
			*o++ = abc[(acc >> (bits - 6)) & 63];
			bits -= 6;
		}
	}
	if (bits)
		*o++ = abc[(acc << (6 - bits)) & 63];
	*o = '\0';
	assert_int_equal(strlen(out), 4 + 43);
}

static const struct fg_s3_lock *find(const struct fg_s3_locks *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->m[i].name, name) == 0)
			return &l->m[i];
	return NULL;
}

/* ---- the write-set table ---------------------------------------------- */

struct row {
	const char *method, *target; /* target: path-style, "/b/..." */
	const char *copy, *ctype;
	enum fg_s3_op op;
	bool read, whole, body;
	const char *key;
};

static const struct row rows[] = {
	/* reads */
	{ "GET", "/b/k", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "HEAD", "/b/k", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "OPTIONS", "/b/k", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "GET", "/b/k?tagging", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "GET", "/b/k?uploadId=1&weird=2", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "GET", "/b/k?response-content-type=x&X-Amz-Signature=s", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "GET", "/b?list-type=2&prefix=a", NULL, NULL, FG_S3_OP_READ, true, false, false, "" },
	{ "GET", "/b/k?select&select-type=2", NULL, NULL, FG_S3_OP_READ, true, false, false, "k" },
	{ "POST", "/b/k?select&select-type=2", NULL, NULL, FG_S3_OP_SELECT, true, false, false, "k" },
	/* objects */
	{ "PUT", "/b/k", NULL, NULL, FG_S3_OP_PUT_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k?x-id=PutObject", NULL, NULL, FG_S3_OP_PUT_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k", "/src/s", NULL, FG_S3_OP_COPY_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k?x-id=CopyObject", "src/s", NULL, FG_S3_OP_COPY_OBJECT, false, false, false, "k" },
	{ "DELETE", "/b/k", NULL, NULL, FG_S3_OP_DELETE_OBJECT, false, false, false, "k" },
	{ "DELETE", "/b/k?versionId=v1", NULL, NULL, FG_S3_OP_DELETE_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k?tagging", NULL, NULL, FG_S3_OP_PUT_TAGGING, false, false, false, "k" },
	{ "PUT", "/b/k?tagging&versionId=v1", NULL, NULL, FG_S3_OP_PUT_TAGGING, false, false, false, "k" },
	{ "DELETE", "/b/k?tagging", NULL, NULL, FG_S3_OP_DELETE_TAGGING, false, false, false, "k" },
	{ "PUT", "/b/k?acl", NULL, NULL, FG_S3_OP_PUT_ACL, false, false, false, "k" },
	{ "PUT", "/b/k?retention", NULL, NULL, FG_S3_OP_PUT_RETENTION, false, false, false, "k" },
	{ "PUT", "/b/k?legal-hold", NULL, NULL, FG_S3_OP_PUT_LEGAL_HOLD, false, false, false, "k" },
	{ "POST", "/b/k?restore", NULL, NULL, FG_S3_OP_RESTORE, false, false, false, "k" },
	{ "POST", "/b/k?restore&versionId=v", NULL, NULL, FG_S3_OP_RESTORE, false, false, false, "k" },
	/* multipart */
	{ "POST", "/b/k?uploads", NULL, NULL, FG_S3_OP_CREATE_MPU, false, false, false, "k" },
	{ "POST", "/b/k?uploads=&x-id=CreateMultipartUpload", NULL, NULL, FG_S3_OP_CREATE_MPU, false, false, false, "k" },
	{ "PUT", "/b/k?partNumber=1&uploadId=U", NULL, NULL, FG_S3_OP_UPLOAD_PART, false, false, false, "k" },
	{ "PUT", "/b/k?uploadId=U&partNumber=2", "/src/s", NULL, FG_S3_OP_UPLOAD_PART_COPY, false, false, false, "k" },
	{ "POST", "/b/k?uploadId=U", NULL, NULL, FG_S3_OP_COMPLETE_MPU, false, false, false, "k" },
	{ "DELETE", "/b/k?uploadId=U", NULL, NULL, FG_S3_OP_ABORT_MPU, false, false, false, "k" },
	/* DeleteObjects */
	{ "POST", "/b?delete", NULL, NULL, FG_S3_OP_DELETE_OBJECTS, false, false, true, "" },
	{ "POST", "/b/?delete=&x-id=DeleteObjects", NULL, NULL, FG_S3_OP_DELETE_OBJECTS, false, false, true, "" },
	/* browser POST upload, bucket writes */
	{ "POST", "/b", NULL, "multipart/form-data; boundary=x", FG_S3_OP_POST_UPLOAD, false, true, false, "" },
	{ "POST", "/b/", NULL, "Multipart/Form-Data", FG_S3_OP_POST_UPLOAD, false, true, false, "" },
	{ "POST", "/b", NULL, "application/xml", FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b/", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "DELETE", "/b", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b?versioning", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b?lifecycle", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b?policy", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "DELETE", "/b?cors", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PUT", "/b?tagging", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "DELETE", "/b?delete", NULL, NULL, FG_S3_OP_BUCKET_WRITE, false, true, false, "" },
	{ "PATCH", "/b", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "" },
	/* unknown subresources and combinations: the whole bucket */
	{ "PUT", "/b/k?torrent", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?renameObject", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?UPLOADS", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?tagging&acl", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?partNumber=1", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?uploadId=U", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?uploads", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?uploads&uploadId=U", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select&select-type=1", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select&select-type=2&foo", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select&select-type=1&select-type=2", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select&select-type", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "POST", "/b/k?select&select-type=%32", NULL, NULL, FG_S3_OP_SELECT, true, false, false, "k" },
	{ "POST", "/b/k?delete", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "DELETE", "/b/k?acl", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?x-amz-copy-source=src/s", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "PUT", "/b/k?response-content-type=a", NULL, NULL, FG_S3_OP_PUT_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2Fb&X-Amz-Date=d&X-Amz-Expires=60"
		 "&X-Amz-SignedHeaders=host&X-Amz-Signature=s&X-Amz-Security-Token=t",
	  NULL, NULL, FG_S3_OP_PUT_OBJECT, false, false, false, "k" },
	{ "PUT", "/b/k?%74agging", NULL, NULL, FG_S3_OP_PUT_TAGGING, false, false, false, "k" },
	{ "PUT", "/b/k?&&", NULL, NULL, FG_S3_OP_PUT_OBJECT, false, false, false, "k" },
	{ "put", "/b/k", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
	{ "MKCOL", "/b/k", NULL, NULL, FG_S3_OP_UNKNOWN, false, true, false, "k" },
};

static void check_row(const struct row *r, const char *host, const char *target,
		      const struct fg_config *cfg)
{
	enum fg_s3_refusal e = classify(cfg, r->method, target, host, r->copy, r->ctype);
	if (e != FG_S3_OK)
		fail_msg("%s %s (Host %s): refused %d", r->method, target, host ? host : "-", e);
	if (req.op != r->op || req.read != r->read || req.whole_bucket != r->whole ||
	    req.needs_body != r->body)
		fail_msg("%s %s (Host %s): %s read %d whole %d body %d, want %s %d %d %d",
			 r->method, target, host ? host : "-", fg_s3_op_name(req.op),
			 req.read, req.whole_bucket, req.needs_body,
			 fg_s3_op_name(r->op), r->read, r->whole, r->body);
	assert_string_equal(req.bucket, "b");
	assert_int_equal(req.bucket_len, 1);
	assert_string_equal(req.key, r->key);
	assert_int_equal(req.key_len, strlen(r->key));
	assert_int_equal(req.virtual_host, host != NULL);
	assert_int_equal(req.has_copy_source, r->copy != NULL && strcmp(r->method, "PUT") == 0);
	if (req.has_copy_source) {
		assert_string_equal(req.src_bucket, "src");
		assert_string_equal(req.src_key, "s");
	}
	assert_ptr_equal(req.raw_path, target);
	assert_int_equal(req.raw_path_len, strcspn(target, "?"));
}

static void test_table_path_style(void **state)
{
	struct fg_config cfg;
	(void)state;
	fg_config_init(&cfg);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check_row(&rows[i], NULL, rows[i].target, &cfg);
	/* with s3-domain set, a Host outside it is still path-style */
	cfg.s3_domain = DOMAIN;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct fg_s3_head h = { rows[i].method, rows[i].target, "gw.local:8080",
					rows[i].copy, rows[i].ctype };
		assert_int_equal(fg_s3_classify(&cfg, &h, &req), FG_S3_OK);
		assert_false(req.virtual_host);
		assert_int_equal(req.op, rows[i].op);
	}
	cfg.s3_domain = NULL;
	fg_config_finish(&cfg);
}

static void test_table_virtual_host(void **state)
{
	struct fg_config cfg;
	char target[1024];
	(void)state;
	fg_config_init(&cfg);
	cfg.s3_domain = DOMAIN;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		/* "/b/k?q" -> "/k?q", "/b?q" -> "/?q", "/b/?q" -> "/?q" */
		const char *t = rows[i].target + 2;
		snprintf(target, sizeof(target), "/%s", t[0] == '/' ? t + 1 : t);
		check_row(&rows[i], "b." DOMAIN, target, &cfg);
		check_row(&rows[i], "B.S3.Example.COM:9000", target, &cfg);
	}
	cfg.s3_domain = NULL;
	fg_config_finish(&cfg);
}

static void test_virtual_host_forms(void **state)
{
	struct fg_config cfg;
	(void)state;
	fg_config_init(&cfg);
	cfg.s3_domain = DOMAIN;
	/* dotted buckets, an absolute name, a port */
	assert_int_equal(classify(&cfg, "PUT", "/k", "my.dotted.b." DOMAIN ".", NULL, NULL), FG_S3_OK);
	assert_string_equal(req.bucket, "my.dotted.b");
	assert_string_equal(req.key, "k");
	/* the domain itself: path-style */
	assert_int_equal(classify(&cfg, "PUT", "/b/k", DOMAIN ":443", NULL, NULL), FG_S3_OK);
	assert_false(req.virtual_host);
	assert_string_equal(req.bucket, "b");
	/* a look-alike is not under the domain */
	assert_int_equal(classify(&cfg, "PUT", "/b/k", "b.evils3.example.com", NULL, NULL), FG_S3_OK);
	assert_false(req.virtual_host);
	assert_string_equal(req.bucket, "b");
	/* a port that is no port: not a virtual host */
	assert_int_equal(classify(&cfg, "PUT", "/b/k", "x." DOMAIN ":a", NULL, NULL), FG_S3_OK);
	assert_false(req.virtual_host);
	/* IPv6 literal */
	assert_int_equal(classify(&cfg, "PUT", "/b/k", "[::1]:8080", NULL, NULL), FG_S3_OK);
	assert_string_equal(req.bucket, "b");
	/* the whole path is the key: "/b/k" on a virtual host is key "b/k" */
	assert_int_equal(classify(&cfg, "PUT", "/b/k", "v." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_string_equal(req.bucket, "v");
	assert_string_equal(req.key, "b/k");
	assert_int_equal(classify(&cfg, "PUT", "//k", "v." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_string_equal(req.key, "/k");
	/* a bucket with a byte no bucket has */
	assert_int_equal(classify(&cfg, "PUT", "/k", "a_b!." DOMAIN, NULL, NULL), FG_S3_BAD_BUCKET);
	/* ListObjects on the virtual host */
	assert_int_equal(classify(&cfg, "GET", "/?list-type=2", "v." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_string_equal(req.bucket, "v");
	assert_int_equal(req.key_len, 0);
	/* without s3-domain, Host never names a bucket */
	cfg.s3_domain = NULL;
	assert_int_equal(classify(&cfg, "PUT", "/b/k", "v." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_string_equal(req.bucket, "b");
	fg_config_finish(&cfg);
}

static void test_no_bucket(void **state)
{
	struct fg_config cfg;
	struct fg_s3_locks locks;
	(void)state;
	fg_config_init(&cfg);
	/* ListBuckets */
	assert_int_equal(classify(&cfg, "GET", "/", "gw", NULL, NULL), FG_S3_OK);
	assert_true(req.read);
	assert_int_equal(req.bucket_len, 0);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 0);
	assert_int_equal(classify(&cfg, "GET", "/?x-id=ListBuckets", NULL, NULL, NULL), FG_S3_OK);
	/* a write naming no bucket */
	assert_int_equal(classify(&cfg, "PUT", "/", NULL, NULL, NULL), FG_S3_NO_BUCKET);
	assert_int_equal(classify(&cfg, "POST", "/?delete", NULL, NULL, NULL), FG_S3_NO_BUCKET);
	assert_int_equal(classify(&cfg, "DELETE", "/", NULL, NULL, NULL), FG_S3_NO_BUCKET);
	struct fg_s3_errdef d = fg_s3_refusal_answer(FG_S3_NO_BUCKET);
	assert_string_equal(d.code, "FenceBadRequest");
	assert_int_equal(d.status, 400);
	/* an empty bucket segment */
	assert_int_equal(classify(&cfg, "PUT", "//k", NULL, NULL, NULL), FG_S3_BAD_BUCKET);
	fg_config_finish(&cfg);
}

/* ---- keys and targets ------------------------------------------------- */

static void test_odd_keys(void **state)
{
	static const struct {
		const char *target, *key;
	} t[] = {
		{ "/b/a//b", "a//b" },
		{ "/b/..", ".." },
		{ "/b/a/../c", "a/../c" },
		{ "/b/./x", "./x" },
		{ "/b/a%20b", "a b" },
		{ "/b/a+b", "a+b" },
		{ "/b/a%2Fb", "a/b" },
		{ "/b/a%2fb%2F", "a/b/" },
		{ "/b/%2E%2E", ".." },
		{ "/b/caf%C3%A9/%E2%82%AC", "caf\xc3\xa9/\xe2\x82\xac" },
		{ "/b/%FF%01", "\xff\x01" },
		{ "/b//", "/" },
		{ "/b/%3F%23", "?#" },
	};
	struct fg_config cfg;
	(void)state;
	fg_config_init(&cfg);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (classify(&cfg, "PUT", t[i].target, NULL, NULL, NULL) != FG_S3_OK)
			fail_msg("%s refused", t[i].target);
		assert_string_equal(req.key, t[i].key);
		assert_int_equal(req.key_len, strlen(t[i].key));
		assert_int_equal(req.op, FG_S3_OP_PUT_OBJECT);
	}
	/* bad targets */
	static const char *const bad[] = {
		"b/k", "", "*", "http://h/b/k", "/b/k#frag", "/b/a%2", "/b/a%zz",
		"/b/a%00b", "/b/a b", "/b/a\tb", "/b/\x80", "/b/k?%zz=1", "/b/k?a%",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (classify(&cfg, "PUT", bad[i], NULL, NULL, NULL) != FG_S3_BAD_TARGET)
			fail_msg("%s not refused as a bad target", bad[i]);
	/* a value's escapes are not looked at, but select-type's */
	assert_int_equal(classify(&cfg, "PUT", "/b/k?x-id=%zz", NULL, NULL, NULL), FG_S3_OK);
	/* bad buckets */
	static const char *const badb[] = { "/./k", "/../k", "/%2E/k", "/a%2Fb/k", "/a!/k", "/a%00/k" };
	for (size_t i = 0; i < sizeof(badb) / sizeof(badb[0]); i++) {
		enum fg_s3_refusal e = classify(&cfg, "GET", badb[i], NULL, NULL, NULL);
		if (e != FG_S3_BAD_BUCKET && e != FG_S3_BAD_TARGET)
			fail_msg("%s: %d", badb[i], e);
	}
	/* a 1024-byte key, and one byte more */
	char target[4096];
	memset(target, 0, sizeof(target));
	strcpy(target, "/b/");
	memset(target + 3, 'k', 1024);
	assert_int_equal(classify(&cfg, "PUT", target, NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(req.key_len, 1024);
	target[3 + 1024] = 'k';
	assert_int_equal(classify(&cfg, "PUT", target, NULL, NULL, NULL), FG_S3_KEY_TOO_LONG);
	/* 1024 bytes decoded from 3072 sent */
	strcpy(target, "/b/");
	for (int i = 0; i < 1024; i++)
		memcpy(target + 3 + 3 * i, "%41", 3);
	target[3 + 3072] = '\0';
	assert_int_equal(classify(&cfg, "PUT", target, NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(req.key_len, 1024);
	assert_int_equal(req.key[1023], 'A');
	/* a 255-byte bucket, and one more */
	memset(target, 0, sizeof(target));
	target[0] = '/';
	memset(target + 1, 'b', 255);
	strcat(target, "/k");
	assert_int_equal(classify(&cfg, "PUT", target, NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(req.bucket_len, 255);
	memset(target + 1, 'b', 256);
	strcpy(target + 257, "/k");
	assert_int_equal(classify(&cfg, "PUT", target, NULL, NULL, NULL), FG_S3_BAD_BUCKET);
	fg_config_finish(&cfg);
}

/* ---- the lock of a key ------------------------------------------------ */

static void expect_lock(const struct fg_config *cfg, const char *target, const char *want)
{
	struct fg_s3_locks locks;
	char h[64];
	if (classify(cfg, "PUT", target, NULL, NULL, NULL) != FG_S3_OK)
		fail_msg("%s refused", target);
	assert_int_equal(fg_s3_locks_build(cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_true(locks.m[0].write);
	if (!want) {
		/* the hashed name of BUCKET/KEY */
		char bk[2048];
		int n = snprintf(bk, sizeof(bk), "%s/", req.bucket);
		memcpy(bk + n, req.key, req.key_len);
		hashed(bk, (size_t)n + req.key_len, h);
		want = h;
	}
	if (strcmp(locks.m[0].name, want) != 0)
		fail_msg("%s: lock %s, want %s", target, locks.m[0].name, want);
	assert_true(fg_name_valid(locks.m[0].name, strlen(locks.m[0].name)));
}

static void test_default_and_hashed_locks(void **state)
{
	struct fg_config cfg;
	char target[2048], h[64];
	(void)state;
	fg_config_init(&cfg);
	expect_lock(&cfg, "/b/k", "b/k");
	expect_lock(&cfg, "/b/dir/file.txt", "b/dir/file.txt");
	expect_lock(&cfg, "/b/a~b_c-d.e", "b/a~b_c-d.e");
	expect_lock(&cfg, "/b/a%2Fb", "b/a/b");
	/* not lock names: hashed */
	expect_lock(&cfg, "/b/a//b", NULL);
	expect_lock(&cfg, "/b/..", NULL);
	expect_lock(&cfg, "/b/./x", NULL);
	expect_lock(&cfg, "/b/dir/", NULL);
	expect_lock(&cfg, "/b/a%20b", NULL);
	expect_lock(&cfg, "/b/caf%C3%A9", NULL);
	expect_lock(&cfg, "/b/a+b", NULL);
	expect_lock(&cfg, "/b/%FF", NULL);
	/* the hash is of BUCKET/KEY: one known value, computed once by hand
	 * with `printf 'b/a b' | openssl sha256 -binary | basenc --base64url` */
	expect_lock(&cfg, "/b/a%20b", "~s3/arn_V-6ha4MGaZBaambMxb2m9gaN_zCxnjmxu84rnvY");
	/* the bucket is part of it */
	hashed("b/a b", 5, h);
	expect_lock(&cfg, "/c/a%20b", NULL);
	struct fg_s3_locks locks;
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_string_not_equal(locks.m[0].name, h);
	/* 255 bytes is a name, 256 is not */
	strcpy(target, "/b/");
	memset(target + 3, 'k', 253);
	target[3 + 253] = '\0';
	char want[2100];
	snprintf(want, sizeof(want), "b/%s", target + 3);
	expect_lock(&cfg, target, want);
	strcat(target, "k");
	expect_lock(&cfg, target, NULL);
	/* a 1024-byte key */
	memset(target + 3, 'z', 1024);
	target[3 + 1024] = '\0';
	expect_lock(&cfg, target, NULL);
	fg_config_finish(&cfg);
}

static void test_route_locks(void **state)
{
	struct fg_config cfg;
	char lock[FG_NAME_MAX + 1];
	(void)state;
	with_routes(&cfg, "/b/private/ priv", "/b/odd/ odd", "/other/ whole-other", NULL);
	/* a rule covers the key, whatever its bytes */
	expect_lock(&cfg, "/b/private/x", "priv");
	expect_lock(&cfg, "/b/private/a%20b//c", "priv");
	expect_lock(&cfg, "/b/private", "priv");
	expect_lock(&cfg, "/b/odd/%FF", "odd");
	expect_lock(&cfg, "/other/..", "whole-other");
	/* KEY is not resolved: "x/../private/k" is not under /b/private/ */
	expect_lock(&cfg, "/b/x/../private/k", NULL);
	expect_lock(&cfg, "/b/./private/k", NULL);
	/* %2F is a '/' of the key: covered */
	expect_lock(&cfg, "/b/private%2Fk", "priv");
	/* no rule: the default */
	expect_lock(&cfg, "/b/public/k", "b/public/k");
	/* the direct call */
	assert_int_equal(fg_s3_object_lock(&cfg, "b", 1, "private/z", 9, lock), FG_S3_OK);
	assert_string_equal(lock, "priv");
	assert_int_equal(fg_s3_object_lock(&cfg, "b", 1, "", 0, lock), FG_S3_KEY_TOO_LONG);
	fg_config_finish(&cfg);

	/* virtual-host requests match "/BUCKET/KEY" too */
	with_routes(&cfg, "/v/k/ vk", NULL);
	cfg.s3_domain = strdup(DOMAIN);
	struct fg_s3_locks locks;
	assert_int_equal(classify(&cfg, "PUT", "/k/x%20y", "v." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "vk");
	fg_config_finish(&cfg);
}

/* A rule that decides and gives no valid name (as a template's capture
 * may): FenceBadLockName; route rules from the file never do, so the
 * config is made by hand. */
static void test_route_with_bad_lock(void **state)
{
	struct fg_config cfg;
	struct fg_route r = { .prefix = "/b/", .lock = "bad name", .line = "/b/ bad name",
			      .literal = 3, .nprefix = 1, .nlock = 1,
			      .pp = { { 0, 3, -1 } }, .lp = { { 0, 8, -1 } } };
	struct fg_s3_locks locks;
	char lock[FG_NAME_MAX + 1];
	(void)state;
	fg_config_init(&cfg);
	cfg.routes = &r;
	cfg.nroutes = 1;
	assert_int_equal(fg_s3_object_lock(&cfg, "b", 1, "k", 1, lock), FG_S3_BAD_LOCK_NAME);
	assert_int_equal(classify(&cfg, "PUT", "/b/k", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_BAD_LOCK_NAME);
	assert_int_equal(classify(&cfg, "PUT", "/b?acl", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_BAD_LOCK_NAME);
	/* a read of it too: its read: right cannot be named */
	assert_int_equal(classify(&cfg, "GET", "/b/k", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_BAD_LOCK_NAME);
	/* another bucket: the default */
	assert_int_equal(fg_s3_object_lock(&cfg, "c", 1, "k", 1, lock), FG_S3_OK);
	assert_string_equal(lock, "c/k");
	struct fg_s3_errdef d = fg_s3_refusal_answer(FG_S3_BAD_LOCK_NAME);
	assert_string_equal(d.code, "FenceBadLockName");
	assert_int_equal(d.status, 400);
	cfg.routes = NULL;
	cfg.nroutes = 0;
	fg_config_finish(&cfg);
}

/* fg_s3_route_decide(), what the route endpoint and --route-test answer:
 * the lock the proxy checks, the hashed default included. */
static void test_route_decide(void **state)
{
	struct fg_config cfg;
	char lock[FG_NAME_MAX + 1], h[64];
	const struct fg_route *rule;
	(void)state;
	with_routes(&cfg, "/b/private/ priv", NULL);
	assert_int_equal(fg_s3_route_decide(&cfg, "/b/k", 4, lock, &rule), FG_E_COUNT);
	assert_string_equal(lock, "b/k");
	assert_null(rule);
	/* no valid BUCKET/KEY name: its hashed lock, as the proxy's */
	static const char *const odd[] = { "/b/a//b", "/b/a%20b", "/b/x/../y", "/b/%FF" };
	static const char *const keys[] = { "b/a//b", "b/a b", "b/x/../y", "b/\xff" };
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		assert_int_equal(fg_s3_route_decide(&cfg, odd[i], strlen(odd[i]), lock, &rule),
				 FG_E_COUNT);
		hashed(keys[i], strlen(keys[i]), h);
		assert_string_equal(lock, h);
		assert_null(rule);
	}
	/* a rule covers the key whatever its bytes */
	assert_int_equal(fg_s3_route_decide(&cfg, "/b/private/a%20b", 16, lock, &rule),
			 FG_E_COUNT);
	assert_string_equal(lock, "priv");
	assert_non_null(rule);
	fg_config_finish(&cfg);

	/* a rule that gives no valid name stays bad_lock_name */
	struct fg_route r = { .prefix = "/b/", .lock = "bad name", .line = "/b/ bad name",
			      .literal = 3, .nprefix = 1, .nlock = 1,
			      .pp = { { 0, 3, -1 } }, .lp = { { 0, 8, -1 } } };
	fg_config_init(&cfg);
	cfg.routes = &r;
	cfg.nroutes = 1;
	assert_int_equal(fg_s3_route_decide(&cfg, "/b/k", 4, lock, &rule), FG_E_BAD_LOCK_NAME);
	cfg.routes = NULL;
	cfg.nroutes = 0;
	fg_config_finish(&cfg);
}

/* ---- reads, copies, multipart ----------------------------------------- */

static void test_read_locks(void **state)
{
	struct fg_config cfg;
	struct fg_s3_locks locks;
	(void)state;
	fg_config_init(&cfg);
	assert_int_equal(classify(&cfg, "GET", "/b/k", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "b/k");
	assert_false(locks.m[0].write);
	/* a bucket listing names no lock */
	assert_int_equal(classify(&cfg, "GET", "/b?list-type=2", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 0);
	/* Select reads its key */
	assert_int_equal(classify(&cfg, "POST", "/b/k?select&select-type=2", NULL, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_false(locks.m[0].write);
	/* a GET's copy source header is not read */
	assert_int_equal(classify(&cfg, "GET", "/b/k", NULL, "garbage", NULL), FG_S3_OK);
	assert_false(req.has_copy_source);
	fg_config_finish(&cfg);
}

static void test_copy_sources(void **state)
{
	static const struct {
		const char *src, *bucket, *key; /* bucket NULL: refused */
	} t[] = {
		{ "/src/k", "src", "k" },
		{ "src/k", "src", "k" },
		{ "/src/a%20b%2Fc", "src", "a b/c" },
		{ "/src/a/b//c", "src", "a/b//c" },
		{ "src/..", "src", ".." },
		{ "/src/k?versionId=abc", "src", "k" },
		{ "/src/k%3FversionId=x", "src", "k?versionId=x" },
		{ "/s%72c/k", "src", "k" },
		{ "src", NULL, NULL },
		{ "/src", NULL, NULL },
		{ "/src/", NULL, NULL },
		{ "/", NULL, NULL },
		{ "", NULL, NULL },
		{ "//k", NULL, NULL },
		{ "/src/k?foo=1", NULL, NULL },
		{ "/src/k?versionId=1&x=2", NULL, NULL },
		{ "/src/k?", NULL, NULL },
		{ "/src/a%2", NULL, NULL },
		{ "/src/a%00", NULL, NULL },
		{ "/src/a b", NULL, NULL },
		{ "/s!c/k", NULL, NULL },
		{ "arn:aws:s3:us-east-1:1:accesspoint/ap/object/k", NULL, NULL },
	};
	struct fg_config cfg;
	(void)state;
	fg_config_init(&cfg);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		enum fg_s3_refusal e = classify(&cfg, "PUT", "/b/k", NULL, t[i].src, NULL);
		if (!t[i].bucket) {
			if (e != FG_S3_BAD_COPY_SOURCE)
				fail_msg("copy source '%s': %d, want refused", t[i].src, e);
			continue;
		}
		if (e != FG_S3_OK)
			fail_msg("copy source '%s' refused: %d", t[i].src, e);
		assert_int_equal(req.op, FG_S3_OP_COPY_OBJECT);
		assert_true(req.has_copy_source);
		assert_string_equal(req.src_bucket, t[i].bucket);
		assert_string_equal(req.src_key, t[i].key);
		assert_int_equal(req.src_key_len, strlen(t[i].key));
	}
	/* a 1025-byte source key */
	char src[2048] = "/src/";
	memset(src + 5, 'k', 1025);
	assert_int_equal(classify(&cfg, "PUT", "/b/k", NULL, src, NULL), FG_S3_BAD_COPY_SOURCE);
	fg_config_finish(&cfg);
}

static void test_copy_locks(void **state)
{
	struct fg_config cfg;
	struct fg_s3_locks locks;
	const struct fg_s3_lock *l;
	char h[64];
	(void)state;
	with_routes(&cfg, "/src/grouped/ g", "/b/ bucket-b", "/c/ bucket-c", "/c/part/ part-c", NULL);
	/* CopyObject: the destination written, the source read */
	assert_int_equal(classify(&cfg, "PUT", "/d/k", NULL, "/src/s", NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 2);
	assert_non_null(l = find(&locks, "d/k"));
	assert_true(l->write);
	assert_non_null(l = find(&locks, "src/s"));
	assert_false(l->write);
	/* the source's lock: route, hash */
	assert_int_equal(classify(&cfg, "PUT", "/d/k", NULL, "src/grouped/a%20b", NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_non_null(l = find(&locks, "g"));
	assert_false(l->write);
	assert_int_equal(classify(&cfg, "PUT", "/d/k", NULL, "src/a%20b", NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	hashed("src/a b", 7, h);
	assert_non_null(l = find(&locks, h));
	assert_false(l->write);
	/* a copy onto itself, or under the same lock: one write member */
	assert_int_equal(classify(&cfg, "PUT", "/d/k", NULL, "/d/k", NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "d/k");
	assert_true(locks.m[0].write);
	assert_int_equal(classify(&cfg, "PUT", "/b/x", NULL, "/b/y", NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "bucket-b");
	assert_true(locks.m[0].write);
	/* UploadPartCopy: the same */
	assert_int_equal(classify(&cfg, "PUT", "/d/k?partNumber=3&uploadId=U", NULL,
				  "/src/s?versionId=7", NULL), FG_S3_OK);
	assert_int_equal(req.op, FG_S3_OP_UPLOAD_PART_COPY);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 2);
	assert_true(find(&locks, "d/k")->write);
	assert_false(find(&locks, "src/s")->write);
	/* an unknown PUT that carries a copy source: the bucket written, the
	 * source still read */
	assert_int_equal(classify(&cfg, "PUT", "/b/k?foo", NULL, "/src/s", NULL), FG_S3_OK);
	assert_int_equal(req.op, FG_S3_OP_UNKNOWN);
	assert_true(req.has_copy_source);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 2);
	assert_true(find(&locks, "bucket-b")->write);
	assert_false(find(&locks, "src/s")->write);
	/* a tagging PUT with a copy source: the source is read too */
	assert_int_equal(classify(&cfg, "PUT", "/d/k?tagging", NULL, "/src/s", NULL), FG_S3_OK);
	assert_int_equal(req.op, FG_S3_OP_PUT_TAGGING);
	assert_true(req.has_copy_source);
	/* a POST's copy source header is no copy */
	assert_int_equal(classify(&cfg, "POST", "/d/k?uploads", NULL, "bad", NULL), FG_S3_OK);
	assert_false(req.has_copy_source);
	fg_config_finish(&cfg);
}

static void test_multipart_locks(void **state)
{
	static const char *const steps[][2] = {
		{ "POST", "/b/big.bin?uploads" },
		{ "PUT", "/b/big.bin?partNumber=1&uploadId=U" },
		{ "PUT", "/b/big.bin?partNumber=2&uploadId=U" },
		{ "POST", "/b/big.bin?uploadId=U" },
		{ "DELETE", "/b/big.bin?uploadId=U" },
	};
	struct fg_config cfg;
	struct fg_s3_locks locks;
	(void)state;
	fg_config_init(&cfg);
	/* one lock from create to complete */
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		assert_int_equal(classify(&cfg, steps[i][0], steps[i][1], NULL, NULL, NULL), FG_S3_OK);
		assert_false(req.read);
		assert_false(req.whole_bucket);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
		assert_int_equal(locks.n, 1);
		assert_string_equal(locks.m[0].name, "b/big.bin");
		assert_true(locks.m[0].write);
	}
	fg_config_finish(&cfg);
}

/* ---- whole-bucket writes ---------------------------------------------- */

static void test_bucket_writes(void **state)
{
	static const char *const writes[][3] = {
		{ "PUT", "/b", NULL },
		{ "DELETE", "/b", NULL },
		{ "PUT", "/b?lifecycle", NULL },
		{ "POST", "/b", "multipart/form-data; boundary=z" },
		{ "PUT", "/b/k?unknown-subresource", NULL },
	};
	struct fg_config cfg;
	struct fg_s3_locks locks;
	char lock[FG_NAME_MAX + 1];
	(void)state;
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		const char *m = writes[i][0], *t = writes[i][1], *ct = writes[i][2];
		/* no route: refused */
		fg_config_init(&cfg);
		assert_int_equal(classify(&cfg, m, t, NULL, NULL, ct), FG_S3_OK);
		assert_true(req.whole_bucket);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks),
				 FG_S3_SUBTREE_UNGUARDED);
		fg_config_finish(&cfg);
		/* a route for the bucket */
		with_routes(&cfg, "/b/ bucket-b", NULL);
		assert_int_equal(classify(&cfg, m, t, NULL, NULL, ct), FG_S3_OK);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
		assert_int_equal(locks.n, 1);
		assert_string_equal(locks.m[0].name, "bucket-b");
		assert_true(locks.m[0].write);
		fg_config_finish(&cfg);
		/* a rule whose prefix is a prefix of /b/ */
		with_routes(&cfg, "/ everything", NULL);
		assert_int_equal(classify(&cfg, m, t, NULL, NULL, ct), FG_S3_OK);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
		assert_string_equal(locks.m[0].name, "everything");
		fg_config_finish(&cfg);
		/* a rule that gives part of the bucket to another lock */
		with_routes(&cfg, "/b/ bucket-b", "/b/logs/ logs", NULL);
		assert_int_equal(classify(&cfg, m, t, NULL, NULL, ct), FG_S3_OK);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks),
				 FG_S3_SUBTREE_UNGUARDED);
		fg_config_finish(&cfg);
		/* a rule for part of the bucket only */
		with_routes(&cfg, "/b/logs/ logs", "/other/ o", NULL);
		assert_int_equal(classify(&cfg, m, t, NULL, NULL, ct), FG_S3_OK);
		assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks),
				 FG_S3_SUBTREE_UNGUARDED);
		fg_config_finish(&cfg);
	}
	/* the direct call, and the virtual host */
	with_routes(&cfg, "/b/ bucket-b", NULL);
	assert_int_equal(fg_s3_bucket_lock(&cfg, "b", 1, lock), FG_S3_OK);
	assert_string_equal(lock, "bucket-b");
	assert_int_equal(fg_s3_bucket_lock(&cfg, "bb", 2, lock), FG_S3_SUBTREE_UNGUARDED);
	cfg.s3_domain = strdup(DOMAIN);
	assert_int_equal(classify(&cfg, "PUT", "/?versioning", "b." DOMAIN, NULL, NULL), FG_S3_OK);
	assert_int_equal(fg_s3_locks_build(&cfg, &req, NULL, 0, &locks), FG_S3_OK);
	assert_string_equal(locks.m[0].name, "bucket-b");
	fg_config_finish(&cfg);

	struct fg_s3_errdef d = fg_s3_refusal_answer(FG_S3_SUBTREE_UNGUARDED);
	assert_string_equal(d.code, "FenceSubtreeUnguarded");
	assert_int_equal(d.status, 403);
}

/* ---- DeleteObjects ------------------------------------------------------ */

static enum fg_s3_refusal delete_locks(const struct fg_config *cfg, const char *body,
				       size_t len, struct fg_s3_locks *locks)
{
	assert_int_equal(classify(cfg, "POST", "/b?delete", NULL, NULL, NULL), FG_S3_OK);
	assert_true(req.needs_body);
	return fg_s3_locks_build(cfg, &req, body, len, locks);
}

struct keys {
	int n;
	char k[8][64];
};

static int collect(void *arg, const char *key, size_t len)
{
	struct keys *ks = arg;
	assert_int_equal(strlen(key), len);
	if (ks->n < 8)
		snprintf(ks->k[ks->n], sizeof(ks->k[0]), "%s", key);
	ks->n++;
	return 0;
}

static void test_delete_bodies_good(void **state)
{
	struct fg_config cfg;
	struct fg_s3_locks locks;
	struct keys ks = { 0 };
	(void)state;
	fg_config_init(&cfg);
	const char *body =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
		"  <!-- boto3 sends it this way -->\n"
		"  <Quiet>true</Quiet>\n"
		"  <Object><Key>a/b.txt</Key></Object>\n"
		"  <Object><Key>x &amp; y&lt;&#x41;&#66;</Key><VersionId>v1</VersionId></Object>\n"
		"  <Object><Key><![CDATA[<raw>&]]></Key></Object>\n"
		"  <Object><Key> sp </Key></Object>\n"
		"  <Object><Key>caf\xc3\xa9</Key></Object>\n"
		"</Delete>\n";
	assert_int_equal(fg_s3_delete_parse(body, strlen(body), collect, &ks), 0);
	assert_int_equal(ks.n, 5);
	assert_string_equal(ks.k[0], "a/b.txt");
	assert_string_equal(ks.k[1], "x & y<AB");
	assert_string_equal(ks.k[2], "<raw>&");
	assert_string_equal(ks.k[3], " sp ");
	assert_string_equal(ks.k[4], "caf\xc3\xa9");

	assert_int_equal(delete_locks(&cfg, body, strlen(body), &locks), FG_S3_OK);
	assert_int_equal(locks.n, 5);
	assert_non_null(find(&locks, "b/a/b.txt"));
	for (int i = 0; i < locks.n; i++)
		assert_true(locks.m[i].write);
	char h[64];
	hashed("b/x & y<AB", 10, h);
	assert_non_null(find(&locks, h));

	/* without a namespace, without a declaration, Quiet false */
	const char *plain = "<Delete><Object><Key>k</Key></Object><Quiet>false</Quiet></Delete>";
	assert_int_equal(delete_locks(&cfg, plain, strlen(plain), &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "b/k");
	/* the same key twice: one lock */
	const char *twice = "<Delete><Object><Key>k</Key></Object><Object><Key>k</Key>"
			    "<VersionId>2</VersionId></Object></Delete>";
	assert_int_equal(delete_locks(&cfg, twice, strlen(twice), &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	fg_config_finish(&cfg);
}

static void test_delete_bodies_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"not xml",
		"<Delete>",
		"<Delete></Delete>",
		"<Delete><Quiet>true</Quiet></Delete>",
		"<Delete><Object></Object></Delete>",
		"<Delete><Object><Key></Key></Object></Delete>",
		"<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>",
		"<Delete><Object><Key>a</Key><VersionId>1</VersionId><VersionId>2</VersionId></Object></Delete>",
		"<Delete><Object><Key>a</Key><ETag>x</ETag></Object></Delete>",
		"<Delete><Object><Key>a<b/></Key></Object></Delete>",
		"<Delete><Object><Key>a<!--c--></Key></Object></Delete>",
		"<Delete><Object><Key>a</Key>text</Object></Delete>",
		"<Delete>text<Object><Key>a</Key></Object></Delete>",
		"<Delete><Object><Key id=\"1\">a</Key></Object></Delete>",
		"<Delete><Other/><Object><Key>a</Key></Object></Delete>",
		"<Delete><Quiet>yes</Quiet><Object><Key>a</Key></Object></Delete>",
		"<Delete><Quiet>true</Quiet><Quiet>true</Quiet><Object><Key>a</Key></Object></Delete>",
		"<Remove><Object><Key>a</Key></Object></Remove>",
		"<x:Delete xmlns:x=\"urn:other\"><x:Object><x:Key>a</x:Key></x:Object></x:Delete>",
		"<Delete><Object><Key>a</Key></Object></Delete><Delete/>",
		"<Delete><Object><Key>a</Key></Object></Delete>trailing",
		"<?pi x?><Delete><Object><Key>a</Key></Object></Delete>",
		"<Delete><Object><Key>&bogus;</Key></Object></Delete>",
		"<Delete><Object><Key>a\x01</Key></Object></Delete>",
		"<Delete><Object><Key>a</Object></Key></Delete>",
		"<Delete><Object><Key>\xff</Key></Object></Delete>",
		/* UTF-8 and XML 1.0 only */
		"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><Delete><Object><Key>\xe9</Key></Object></Delete>",
		"<?xml version=\"1.0\" encoding=\"US-ASCII\"?><Delete><Object><Key>a</Key></Object></Delete>",
		"<?xml version=\"1.0\" encoding=\"UTF-16\"?><Delete><Object><Key>a</Key></Object></Delete>",
		"<?xml version=\"1.1\"?><Delete><Object><Key>a</Key></Object></Delete>",
		"\xff\xfe<\x01",
	};
	struct fg_config cfg;
	struct fg_s3_locks locks;
	(void)state;
	fg_config_init(&cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum fg_s3_refusal e = delete_locks(&cfg, bad[i], strlen(bad[i]), &locks);
		if (e != FG_S3_MALFORMED_XML)
			fail_msg("body %zu (%s): %d, want MalformedXML", i, bad[i], e);
	}
	/* UTF-16 (NUL bytes): refused; the length is what counts */
	static const char u16[] = "<\0D\0e\0l\0e\0t\0e\0/\0>\0";
	assert_int_equal(delete_locks(&cfg, u16, sizeof(u16) - 1, &locks), FG_S3_MALFORMED_XML);
	/* an explicit UTF-8 declaration, any case, is fine */
	const char *decl = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Delete><Object><Key>a</Key></Object></Delete>";
	assert_int_equal(delete_locks(&cfg, decl, strlen(decl), &locks), FG_S3_OK);
	/* a NULL body is an empty one */
	assert_int_equal(delete_locks(&cfg, NULL, 0, &locks), FG_S3_MALFORMED_XML);
	struct fg_s3_errdef d = fg_s3_refusal_answer(FG_S3_MALFORMED_XML);
	assert_string_equal(d.code, "MalformedXML");
	assert_int_equal(d.status, 400);
	fg_config_finish(&cfg);
}

static void test_delete_bodies_attacks(void **state)
{
	static const char *const attacks[] = {
		/* a DOCTYPE of any kind */
		"<!DOCTYPE Delete><Delete><Object><Key>a</Key></Object></Delete>",
		/* billion laughs */
		"<?xml version=\"1.0\"?><!DOCTYPE Delete [<!ENTITY a \"aaaaaaaaaa\">"
		"<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
		"<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\"><!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">]>"
		"<Delete><Object><Key>&e;</Key></Object></Delete>",
		/* an external entity: a file, the network */
		"<!DOCTYPE Delete [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
		"<Delete><Object><Key>&x;</Key></Object></Delete>",
		"<!DOCTYPE Delete SYSTEM \"http://127.0.0.1:1/dtd\"><Delete><Object><Key>a</Key></Object></Delete>",
		"<!DOCTYPE Delete [<!ENTITY % p SYSTEM \"http://127.0.0.1:1/x\"> %p;]>"
		"<Delete><Object><Key>a</Key></Object></Delete>",
		/* an internal entity that would name another key */
		"<!DOCTYPE Delete [<!ENTITY k \"other\">]><Delete><Object><Key>&k;</Key></Object></Delete>",
		/* XInclude is not processed, and its element is no S3 element */
		"<Delete xmlns:xi=\"http://www.w3.org/2001/XInclude\"><Object><Key>a</Key></Object>"
		"<xi:include href=\"file:///etc/passwd\"/></Delete>",
	};
	struct fg_config cfg;
	struct fg_s3_locks locks;
	struct keys ks = { 0 };
	(void)state;
	fg_config_init(&cfg);
	for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		ks.n = 0;
		if (fg_s3_delete_parse(attacks[i], strlen(attacks[i]), collect, &ks) !=
		    FG_S3_MALFORMED_XML)
			fail_msg("attack %zu accepted", i);
		assert_int_equal(ks.n, 0); /* no key handed on */
		assert_int_equal(delete_locks(&cfg, attacks[i], strlen(attacks[i]), &locks),
				 FG_S3_MALFORMED_XML);
	}
	fg_config_finish(&cfg);
}

/* n objects with keys fmt % i, in a buffer the caller frees */
static char *many(int n, const char *fmt, size_t *len)
{
	size_t cap = 64 + (size_t)n * (40 + strlen(fmt) + 12);
	char *b = malloc(cap);
	assert_non_null(b);
	size_t o = (size_t)snprintf(b, cap, "<Delete>");
	for (int i = 0; i < n; i++) {
		o += (size_t)snprintf(b + o, cap - o, "<Object><Key>");
		o += (size_t)snprintf(b + o, cap - o, fmt, i);
		o += (size_t)snprintf(b + o, cap - o, "</Key></Object>");
	}
	o += (size_t)snprintf(b + o, cap - o, "</Delete>");
	*len = o;
	return b;
}

static void test_delete_bounds(void **state)
{
	struct fg_config cfg;
	struct fg_s3_locks locks;
	size_t len;
	char *b;
	(void)state;
	with_routes(&cfg, "/b/batch/ batch", NULL);

	/* 1000 keys under one route lock */
	b = many(1000, "batch/%d", &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_string_equal(locks.m[0].name, "batch");
	assert_true(locks.m[0].write);
	free(b);
	/* 1001: refused */
	b = many(1001, "batch/%d", &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_MALFORMED_XML);
	free(b);
	/* keys spanning locks: 16 is the most */
	b = many(16, "k%d", &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 16);
	assert_non_null(find(&locks, "b/k0"));
	assert_non_null(find(&locks, "b/k15"));
	free(b);
	b = many(17, "k%d", &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_TOO_MANY_LOCKS);
	free(b);
	struct fg_s3_errdef d = fg_s3_refusal_answer(FG_S3_TOO_MANY_LOCKS);
	assert_string_equal(d.code, "FenceBadRequest");
	assert_int_equal(d.status, 400);
	assert_non_null(strstr(d.message, "route rule"));
	/* a malformed body with too many locks is MalformedXML: the body is
	 * checked whole first */
	b = many(17, "k%d", &len);
	b[len - 2] = 'X';
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_MALFORMED_XML);
	free(b);

	/* a 1024-byte key, and a 1025-byte one */
	char fmt[1100];
	memset(fmt, 'k', 1024);
	fmt[1024] = '\0';
	b = many(1, fmt, &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_OK);
	assert_int_equal(locks.n, 1);
	assert_int_equal(strncmp(locks.m[0].name, "~s3/", 4), 0);
	free(b);
	strcat(fmt, "k");
	b = many(1, fmt, &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_MALFORMED_XML);
	free(b);
	/* 1024 bytes written as entities are 1024 bytes */
	char ent[5200] = "";
	for (int i = 0; i < 1024; i++)
		strcat(ent, "&amp;");
	b = many(1, ent, &len);
	assert_int_equal(delete_locks(&cfg, b, len, &locks), FG_S3_OK);
	free(b);

	/* a body over 2 MiB: refused before it is parsed, even if it is
	 * well-formed */
	size_t big = FG_S3_DELETE_BODY_MAX + 1;
	b = malloc(big + 1);
	assert_non_null(b);
	const char *head = "<Delete><Object><Key>k</Key></Object><!--";
	size_t hl = strlen(head);
	memcpy(b, head, hl);
	memset(b + hl, 'x', big - hl - 12);
	memcpy(b + big - 12, "--></Delete>", 12);
	assert_int_equal(delete_locks(&cfg, b, big, &locks), FG_S3_MALFORMED_XML);
	/* exactly 2 MiB is taken */
	memcpy(b, head, hl);
	memset(b + hl, 'x', big - 1 - hl - 12);
	memcpy(b + big - 1 - 12, "--></Delete>", 12);
	assert_int_equal(delete_locks(&cfg, b, big - 1, &locks), FG_S3_OK);
	free(b);
	fg_config_finish(&cfg);
}

/* libxml2 says nothing on stderr, whatever the body */
static void test_delete_quiet(void **state)
{
	static const char *const noisy[] = {
		"<?xml version=\"1.0\" encoding=\"UTF-16\"?><Delete/>",
		"<?xml version=\"1.0\" encoding=\"nonesuch\"?><Delete/>",
		"<?xml version=\"1.0\" encoding=\"SHIFT_JIS\"?><Delete>\x81\xff\xff</Delete>",
		"<?xml version=\"1.0\" encoding=\"EUC-JP\"?><Delete>\x8e\xff</Delete>",
		"\x4c\x6f\xa7\x94<Delete/>", /* EBCDIC's "<?xm" */
		"<Delete><Object><Key>\xc3</Key></Object></Delete>",
		"<Delete><Object><Key>&undefined;</Key></Object>",
		"<!DOCTYPE x [<!ENTITY a SYSTEM \"file:///nonexistent\">]><x>&a;</x>",
	};
	(void)state;
	fflush(stderr);
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	int saved = dup(2);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 2) >= 0);
	for (size_t i = 0; i < sizeof(noisy) / sizeof(noisy[0]); i++)
		(void)fg_s3_delete_parse(noisy[i], strlen(noisy[i]), NULL, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_true(fseek(tmp, 0, SEEK_END) == 0);
	long size = ftell(tmp);
	fclose(tmp);
	assert_int_equal(size, 0);
}

static int stop_at_two(void *arg, const char *key, size_t len)
{
	int *n = arg;
	(void)key;
	(void)len;
	return ++*n == 2 ? 77 : 0;
}

static void test_delete_callback_stops(void **state)
{
	const char *body = "<Delete><Object><Key>a</Key></Object><Object><Key>b</Key></Object>"
			   "<Object><Key>c</Key></Object></Delete>";
	int n = 0;
	(void)state;
	assert_int_equal(fg_s3_delete_parse(body, strlen(body), stop_at_two, &n), 77);
	assert_int_equal(n, 2);
	assert_int_equal(fg_s3_delete_parse(body, strlen(body), NULL, NULL), 0);
}

/* ---- answers, names, the setting -------------------------------------- */

static void test_refusal_answers(void **state)
{
	(void)state;
	for (int r = FG_S3_OK + 1; r < FG_S3_REFUSAL_COUNT; r++) {
		struct fg_s3_errdef d = fg_s3_refusal_answer((enum fg_s3_refusal)r);
		assert_non_null(d.code);
		assert_non_null(d.message);
		assert_true(d.status >= 400);
	}
	static const struct {
		enum fg_s3_refusal r;
		unsigned status;
		const char *code;
	} t[] = {
		{ FG_S3_BAD_TARGET, 400, "FenceBadRequest" },
		{ FG_S3_BAD_BUCKET, 400, "FenceBadRequest" },
		{ FG_S3_KEY_TOO_LONG, 400, "FenceBadRequest" },
		{ FG_S3_BAD_COPY_SOURCE, 400, "FenceBadRequest" },
		{ FG_S3_NO_MEMORY, 500, "FenceInternal" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct fg_s3_errdef d = fg_s3_refusal_answer(t[i].r);
		assert_string_equal(d.code, t[i].code);
		assert_int_equal(d.status, t[i].status);
	}
}

static void test_op_names(void **state)
{
	(void)state;
	for (int op = 0; op < FG_S3_OP_COUNT; op++)
		assert_non_null(fg_s3_op_name((enum fg_s3_op)op));
	assert_string_equal(fg_s3_op_name(FG_S3_OP_PUT_OBJECT), "PutObject");
	assert_string_equal(fg_s3_op_name(FG_S3_OP_DELETE_OBJECTS), "DeleteObjects");
	assert_string_equal(fg_s3_op_name(FG_S3_OP_COUNT), "Unknown");
}

static void test_s3_domain_setting(void **state)
{
	struct fg_config cfg;
	char err[256];
	(void)state;
	fg_config_init(&cfg);
	assert_null(cfg.s3_domain);
	assert_int_equal(fg_config_set(&cfg, "s3-domain", "s3.example.com", err, sizeof(err)), 0);
	assert_string_equal(cfg.s3_domain, "s3.example.com");
	static const char *const bad[] = { "", ".s3.example.com", "s3.example.com.", "a..b",
					   "a b", "a/b", "a:80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (fg_config_set(&cfg, "s3-domain", bad[i], err, sizeof(err)) == 0)
			fail_msg("s3-domain '%s' accepted", bad[i]);
	assert_string_equal(cfg.s3_domain, "s3.example.com");
	fg_config_finish(&cfg);
	assert_null(cfg.s3_domain);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_path_style),
		cmocka_unit_test(test_table_virtual_host),
		cmocka_unit_test(test_virtual_host_forms),
		cmocka_unit_test(test_no_bucket),
		cmocka_unit_test(test_odd_keys),
		cmocka_unit_test(test_default_and_hashed_locks),
		cmocka_unit_test(test_route_decide),
		cmocka_unit_test(test_route_locks),
		cmocka_unit_test(test_route_with_bad_lock),
		cmocka_unit_test(test_read_locks),
		cmocka_unit_test(test_copy_sources),
		cmocka_unit_test(test_copy_locks),
		cmocka_unit_test(test_multipart_locks),
		cmocka_unit_test(test_bucket_writes),
		cmocka_unit_test(test_delete_bodies_good),
		cmocka_unit_test(test_delete_bodies_malformed),
		cmocka_unit_test(test_delete_bodies_attacks),
		cmocka_unit_test(test_delete_bounds),
		cmocka_unit_test(test_delete_callback_stops),
		cmocka_unit_test(test_delete_quiet),
		cmocka_unit_test(test_refusal_answers),
		cmocka_unit_test(test_op_names),
		cmocka_unit_test(test_s3_domain_setting),
	};

	fg_s3ops_init();
	return cmocka_run_group_tests_name("s3ops", tests, NULL, NULL);
}
