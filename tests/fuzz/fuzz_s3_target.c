/*
 * fuzz_s3_target - the classification of an S3 request (fg_s3_classify),
 * the locks it names (fg_s3_locks_build, fg_s3_object_lock,
 * fg_s3_bucket_lock) in gateway/base/s3ops.c, and S3's error body
 * (fg_s3_error_body, gateway/base/s3err.c) with the target as its
 * Resource.
 *
 * Input: '\n'-separated fields "METHOD\nTARGET\nHOST\nCOPY_SOURCE\nFLAGS";
 * a missing HOST or COPY_SOURCE is an absent header; FLAGS holds 'd'
 * (s3-domain s3.test is set), 'r' (the route rules below), 'f' (the
 * Content-Type is multipart/form-data).
 *
 * Properties of an accepted classification:
 *  - the bucket is 0-255 bytes of [A-Za-z0-9._-] (0 only for a read),
 *    lower-case when it came from Host; the key holds key_len bytes, no
 *    NUL, at most 1024, and is the percent-decoding of the target's path
 *    after the bucket (a reference decoder here);
 *  - read is exactly GET/HEAD/OPTIONS or SELECT; whole_bucket exactly
 *    BUCKET_WRITE, POST_UPLOAD and UNKNOWN; needs_body exactly
 *    DELETE_OBJECTS; a write on a key without a subresource is PutObject,
 *    CopyObject or DeleteObject (so x-id and presign parameters never
 *    widen a write);
 *  - raw_path and raw_query point into the target.
 * Properties of an accepted lock set (DeleteObjects is left to
 * fuzz_s3_delete): at most 16 distinct valid names; a write has a write
 * member for what it changes (the key's lock, or the bucket's, which
 * fg_subtree_guarded() says guards all of "/BUCKET/"); a copy source's
 * lock is a member; without route rules a key's lock is "BUCKET/KEY" when
 * that is a valid name, else "~s3/" + 43 base64url characters.
 * The error body parses as XML with libxml2 and is at most
 * FG_S3_ERROR_BODY_MAX bytes.
 */
#include <stdbool.h>
#include <string.h>

#include <libxml/parser.h>

#include "base/config.h"
#include "base/s3err.h"
#include "base/s3ops.h"
#include "base/writeset.h"
#include "fencegate/name.h"
#include "fuzz.h"

static struct fg_config plain, domain, routed;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const routes[] = {
		"/b/ bucket-b", "/b/logs/ logs", "/c/dir/ c-dir", "/d/ d", "/ all-else",
	};
	char err[256];
	(void)argc;
	(void)argv;
	fg_s3ops_init();
	fg_config_init(&plain);
	fg_config_init(&domain);
	fg_config_init(&routed);
	PROPERTY(fg_config_set(&domain, "s3-domain", "s3.test", err, sizeof(err)) == 0);
	PROPERTY(fg_config_set(&routed, "s3-domain", "s3.test", err, sizeof(err)) == 0);
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		PROPERTY(fg_config_set(&routed, "route", routes[i], err, sizeof(err)) == 0);
	return 0;
}

static int hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reference: s[0..n) percent-decoded into out, or -1. */
static long ref_decode(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '%') {
			if (n - i < 3 || hexv(s[i + 1]) < 0 || hexv(s[i + 2]) < 0)
				return -1;
			c = hexv(s[i + 1]) * 16 + hexv(s[i + 2]);
			i += 2;
		}
		if (c == 0 || o >= cap)
			return -1;
		out[o++] = (char)c;
	}
	return (long)o;
}

static bool bucket_ok(const char *b, size_t n)
{
	if (n == 0 || n > 255 || strlen(b) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", b[i]))
			return false;
	return true;
}

static int member(const struct fg_s3_locks *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->m[i].name, name) == 0)
			return i;
	return -1;
}

static void check_default_lock(const char *bucket, size_t blen, const char *key,
			       size_t klen)
{
	char lock[FG_NAME_MAX + 1], bk[2 + 255 + 1024];
	PROPERTY(fg_s3_object_lock(&plain, bucket, blen, key, klen, lock) == FG_S3_OK);
	memcpy(bk, bucket, blen);
	bk[blen] = '/';
	memcpy(bk + blen + 1, key, klen);
	size_t n = blen + 1 + klen;
	if (n <= FG_NAME_MAX && fg_name_valid(bk, n))
		PROPERTY(strlen(lock) == n && memcmp(lock, bk, n) == 0);
	else
		PROPERTY(strncmp(lock, "~s3/", 4) == 0 && strlen(lock) == 47 &&
			 strspn(lock + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == 43);
}

static void check(const struct fg_config *cfg, const struct fg_s3_head *h)
{
	static struct fg_s3_req q;
	static char ref[4096];
	enum fg_s3_refusal e = fg_s3_classify(cfg, h, &q);
	PROPERTY(e >= FG_S3_OK && e <= FG_S3_BAD_COPY_SOURCE);
	if (e != FG_S3_OK)
		return;
	const char *m = h->method, *t = h->target;
	bool rmethod = !strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "OPTIONS");

	/* bucket and key */
	PROPERTY(q.bucket_len <= 255 && strlen(q.bucket) == q.bucket_len);
	if (q.bucket_len)
		PROPERTY(bucket_ok(q.bucket, q.bucket_len));
	if (q.virtual_host) {
		PROPERTY(cfg->s3_domain && q.bucket_len > 0);
		for (size_t i = 0; i < q.bucket_len; i++)
			PROPERTY(q.bucket[i] < 'A' || q.bucket[i] > 'Z');
	}
	PROPERTY(q.key_len <= FG_S3_KEY_MAX && strlen(q.key) == q.key_len);
	PROPERTY(q.raw_path == t && q.raw_path_len == strcspn(t, "?"));
	if (q.raw_query)
		PROPERTY(q.raw_query == t + q.raw_path_len + 1 && t[q.raw_path_len] == '?');
	const char *rk = t + 1;
	if (!q.virtual_host && q.bucket_len) {
		const char *slash = memchr(t + 1, '/', q.raw_path_len - 1);
		rk = slash ? slash + 1 : t + q.raw_path_len;
	}
	long rl = ref_decode(rk, q.raw_path_len - (size_t)(rk - t), ref, sizeof(ref));
	PROPERTY(rl == (long)q.key_len && memcmp(ref, q.key, q.key_len) == 0);

	/* the operation */
	PROPERTY(q.read == (rmethod || q.op == FG_S3_OP_SELECT));
	if (rmethod)
		PROPERTY(q.op == FG_S3_OP_READ);
	PROPERTY(q.whole_bucket == (q.op == FG_S3_OP_BUCKET_WRITE ||
				    q.op == FG_S3_OP_POST_UPLOAD || q.op == FG_S3_OP_UNKNOWN));
	PROPERTY(q.needs_body == (q.op == FG_S3_OP_DELETE_OBJECTS));
	if (!q.read)
		PROPERTY(q.bucket_len > 0);
	if (q.key_len == 0 && !q.read)
		PROPERTY(q.whole_bucket || q.needs_body);
	if (q.key_len > 0 && !q.read && !q.raw_query &&
	    (!strcmp(m, "PUT") || !strcmp(m, "DELETE")))
		PROPERTY(q.op == FG_S3_OP_PUT_OBJECT || q.op == FG_S3_OP_COPY_OBJECT ||
			 q.op == FG_S3_OP_DELETE_OBJECT);
	if (q.has_copy_source) {
		PROPERTY(!strcmp(m, "PUT") && h->copy_source);
		PROPERTY(bucket_ok(q.src_bucket, q.src_bucket_len));
		PROPERTY(q.src_key_len >= 1 && q.src_key_len <= 1024 &&
			 strlen(q.src_key) == q.src_key_len);
	} else {
		PROPERTY(strcmp(m, "PUT") != 0 || !h->copy_source);
	}

	/* the locks */
	if (q.needs_body)
		return;
	static struct fg_s3_locks l;
	enum fg_s3_refusal le = fg_s3_locks_build(cfg, &q, NULL, 0, &l);
	PROPERTY(le == FG_S3_OK || le == FG_S3_SUBTREE_UNGUARDED ||
		 le == FG_S3_BAD_LOCK_NAME);
	if (le == FG_S3_SUBTREE_UNGUARDED)
		PROPERTY(q.whole_bucket);
	PROPERTY(le != FG_S3_BAD_LOCK_NAME); /* file rules have valid locks */
	if (le != FG_S3_OK)
		return;
	PROPERTY(l.n >= 0 && l.n <= FG_S3_LOCKS_MAX);
	for (int i = 0; i < l.n; i++) {
		PROPERTY(fg_name_valid(l.m[i].name, strlen(l.m[i].name)));
		for (int j = 0; j < i; j++)
			PROPERTY(strcmp(l.m[i].name, l.m[j].name) != 0);
	}
	char lock[FG_NAME_MAX + 1];
	if (q.read) {
		PROPERTY(l.n == (q.key_len ? 1 : 0));
		if (l.n)
			PROPERTY(!l.m[0].write);
		if (q.key_len && cfg->nroutes == 0)
			check_default_lock(q.bucket, q.bucket_len, q.key, q.key_len);
		return;
	}
	int w;
	if (q.whole_bucket) {
		PROPERTY(fg_s3_bucket_lock(cfg, q.bucket, q.bucket_len, lock) == FG_S3_OK);
		char path[300];
		int n = snprintf(path, sizeof(path), "/%s/", q.bucket);
		PROPERTY(fg_subtree_guarded(cfg, path, (size_t)n, lock));
	} else {
		PROPERTY(fg_s3_object_lock(cfg, q.bucket, q.bucket_len, q.key,
					   q.key_len, lock) == FG_S3_OK);
		if (cfg->nroutes == 0)
			check_default_lock(q.bucket, q.bucket_len, q.key, q.key_len);
	}
	w = member(&l, lock);
	PROPERTY(w >= 0 && l.m[w].write);
	if (q.has_copy_source) {
		PROPERTY(fg_s3_object_lock(cfg, q.src_bucket, q.src_bucket_len, q.src_key,
					   q.src_key_len, lock) == FG_S3_OK);
		int s = member(&l, lock);
		PROPERTY(s >= 0);
		PROPERTY(l.n == (s == w ? 1 : 2));
		if (s != w)
			PROPERTY(!l.m[s].write);
	} else {
		PROPERTY(l.n == 1);
	}
}

static void check_body(const char *resource, const char *message)
{
	static char out[FG_S3_ERROR_BODY_MAX];
	struct fg_s3_stale st = { 7, resource[0] & 1, 9 };
	int n = fg_s3_error_body(out, sizeof(out), "FenceStaleToken", message, resource,
				 "id", resource[0] & 2 ? &st : NULL);
	PROPERTY(n > 0 && (size_t)n < sizeof(out) && strlen(out) == (size_t)n);
	xmlDocPtr doc = xmlReadMemory(out, n, NULL, "UTF-8",
				      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	PROPERTY(doc != NULL);
	xmlFreeDoc(doc);
	/* a short buffer: -1 and nothing half-written */
	size_t small = (size_t)n / 2 + 1;
	int r = fg_s3_error_body(out, small, "C", message, resource, "id", NULL);
	PROPERTY(r == -1 ? out[0] == '\0' : (size_t)r < small && strlen(out) == (size_t)r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *buf = malloc(size + 1), *field[5] = { 0 };
	memcpy(buf, data, size);
	buf[size] = '\0';
	int nf = 0;
	char *p = buf;
	while (nf < 5) {
		field[nf++] = p;
		char *nl = memchr(p, '\n', (size_t)(buf + size - p));
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	const char *flags = nf > 4 ? field[4] : "";
	struct fg_s3_head h = {
		.method = field[0],
		.target = nf > 1 ? field[1] : "/",
		.host = nf > 2 ? field[2] : NULL,
		.copy_source = nf > 3 ? field[3] : NULL,
		.content_type = strchr(flags, 'f') ? "multipart/form-data; boundary=x" : NULL,
	};
	const struct fg_config *cfg = strchr(flags, 'r') ? &routed :
				      strchr(flags, 'd') ? &domain : &plain;
	check(cfg, &h);
	check_body(h.target, field[0]);
	free(buf);
	return 0;
}
