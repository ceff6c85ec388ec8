/*
 * s3ops.c - the write set of an S3 request and the locks that guard it
 * (contract v1.4, "The write set of an S3 request", "Every key has a
 * lock").
 *
 * Invariant: a key is the bytes S3 acts on (percent-decoded once, never
 * resolved), and the lock chosen for it is a function of BUCKET and those
 * bytes alone; the one place that asks the route rules is route_lock().
 * Whatever is not recognised here widens the write set to the whole
 * bucket, never narrows it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <openssl/sha.h>

#include "fencegate/sequencer.h"
#include "base/text.h"
#include "base/s3ops.h"
#include "base/writeset.h"

#define S3_NS "http://s3.amazonaws.com/doc/2006-03-01/"
#define HASH_PREFIX "~s3/"

/* "/" BUCKET "/" KEY, NUL */
#define ROUTE_PATH_MAX (1 + FG_S3_BUCKET_MAX + 1 + FG_S3_KEY_MAX + 1)

static const char *const op_names[FG_S3_OP_COUNT] = {
	[FG_S3_OP_READ] = "Read",
	[FG_S3_OP_SELECT] = "SelectObjectContent",
	[FG_S3_OP_PUT_OBJECT] = "PutObject",
	[FG_S3_OP_COPY_OBJECT] = "CopyObject",
	[FG_S3_OP_DELETE_OBJECT] = "DeleteObject",
	[FG_S3_OP_PUT_TAGGING] = "PutObjectTagging",
	[FG_S3_OP_DELETE_TAGGING] = "DeleteObjectTagging",
	[FG_S3_OP_PUT_ACL] = "PutObjectAcl",
	[FG_S3_OP_PUT_RETENTION] = "PutObjectRetention",
	[FG_S3_OP_PUT_LEGAL_HOLD] = "PutObjectLegalHold",
	[FG_S3_OP_RESTORE] = "RestoreObject",
	[FG_S3_OP_CREATE_MPU] = "CreateMultipartUpload",
	[FG_S3_OP_UPLOAD_PART] = "UploadPart",
	[FG_S3_OP_UPLOAD_PART_COPY] = "UploadPartCopy",
	[FG_S3_OP_COMPLETE_MPU] = "CompleteMultipartUpload",
	[FG_S3_OP_ABORT_MPU] = "AbortMultipartUpload",
	[FG_S3_OP_DELETE_OBJECTS] = "DeleteObjects",
	[FG_S3_OP_BUCKET_WRITE] = "BucketWrite",
	[FG_S3_OP_POST_UPLOAD] = "PostUpload",
	[FG_S3_OP_UNKNOWN] = "Unknown",
};

const char *fg_s3_op_name(enum fg_s3_op op)
{
	if ((unsigned)op >= FG_S3_OP_COUNT)
		return "Unknown";
	return op_names[op];
}

struct fg_s3_errdef fg_s3_refusal_answer(enum fg_s3_refusal r)
{
	struct fg_s3_errdef d;
	switch (r) {
	case FG_S3_BAD_TARGET:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "the request target is not one S3 can take: a path with valid percent-escapes and no NUL";
		return d;
	case FG_S3_BAD_BUCKET:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "bucket names are 1-255 bytes of [A-Za-z0-9._-], not '.' or '..'";
		return d;
	case FG_S3_KEY_TOO_LONG:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "object keys are 1-1024 bytes";
		return d;
	case FG_S3_NO_BUCKET:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "a write must name a bucket";
		return d;
	case FG_S3_BAD_COPY_SOURCE:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "x-amz-copy-source must be [/]BUCKET/KEY[?versionId=ID], percent-encoded";
		return d;
	case FG_S3_BAD_LOCK_NAME:
		d = fg_s3_fence_error(FG_E_BAD_LOCK_NAME);
		d.message = "the route rule covering this key gives no valid lock name";
		return d;
	case FG_S3_TOO_MANY_LOCKS:
		d = fg_s3_fence_error(FG_E_BAD_REQUEST);
		d.message = "this request changes objects under more than 16 locks: use a route rule that groups its keys under one lock";
		return d;
	case FG_S3_SUBTREE_UNGUARDED:
		d = fg_s3_fence_error(FG_E_SUBTREE_UNGUARDED);
		d.message = "this request changes the whole bucket: only a route lock that guards the whole bucket can fence it";
		return d;
	case FG_S3_MALFORMED_XML:
		return fg_s3_native_error(FG_S3N_MALFORMED_XML);
	case FG_S3_OK:
	case FG_S3_NO_MEMORY:
	case FG_S3_REFUSAL_COUNT:
		break;
	}
	return fg_s3_fence_error(FG_E_INTERNAL);
}

/* ---- bytes ----------------------------------------------------------- */

/* Percent-decodes s[0..n) into out[cap] (NUL-terminated): 0, -1 for a
 * bad escape or a NUL, -2 when it needs more than cap - 1 bytes. '+' is
 * not a space: S3 keeps it in a path. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap,
		      size_t *outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '%') {
			int hi = i + 2 < n ? fg_hexval((unsigned char)s[i + 1]) : -1;
			int lo = i + 2 < n ? fg_hexval((unsigned char)s[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0')
			return -1;
		if (o + 1 >= cap)
			return -2;
		out[o++] = c;
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}

static bool valid_bucket(const char *b, size_t n)
{
	if (n == 0 || n > FG_S3_BUCKET_MAX)
		return false;
	if ((n == 1 && b[0] == '.') || (n == 2 && b[0] == '.' && b[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Bytes a request line may carry as sent: printable ASCII. */
static bool printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* ---- the bucket of a virtual-host request ---------------------------- */

/* The BUCKET of Host "BUCKET.<domain>[:port]" (lower-cased), or false. */
static bool host_bucket(const char *host, const char *domain, char *out,
			size_t *outlen)
{
	if (!host || !domain || !*domain || host[0] == '[')
		return false;
	size_t hl = strlen(host);
	const char *colon = memchr(host, ':', hl);
	if (colon) {
		/* only a port may follow */
		for (const char *p = colon + 1; p < host + hl; p++)
			if (*p < '0' || *p > '9')
				return false;
		hl = (size_t)(colon - host);
	}
	if (hl > 0 && host[hl - 1] == '.')
		hl--; /* an absolute DNS name */
	size_t dl = strlen(domain);
	if (hl <= dl + 1 || host[hl - dl - 1] != '.' ||
	    strncasecmp(host + hl - dl, domain, dl) != 0)
		return false;
	size_t bl = hl - dl - 1;
	if (bl > FG_S3_BUCKET_MAX) {
		/* too long a bucket: let valid_bucket() refuse it */
		bl = FG_S3_BUCKET_MAX + 1;
	}
	for (size_t i = 0; i < bl && i < FG_S3_BUCKET_MAX + 1; i++) {
		char c = host[i];
		out[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	*outlen = bl;
	return true;
}

/* ---- the query ------------------------------------------------------- */

enum {
	Q_UPLOADS = 1u << 0,
	Q_UPLOAD_ID = 1u << 1,
	Q_PART_NUMBER = 1u << 2,
	Q_TAGGING = 1u << 3,
	Q_ACL = 1u << 4,
	Q_RETENTION = 1u << 5,
	Q_LEGAL_HOLD = 1u << 6,
	Q_RESTORE = 1u << 7,
	Q_VERSION_ID = 1u << 8,
	Q_SELECT = 1u << 9,
	Q_SELECT_TYPE = 1u << 10,
	Q_DELETE = 1u << 11,
	Q_UNKNOWN = 1u << 12,
};

/* The subresources the gateway knows (contract v1.4's table). */
static const struct {
	const char *name;
	unsigned bit;
} subresources[] = {
	{ "uploads", Q_UPLOADS },
	{ "uploadId", Q_UPLOAD_ID },
	{ "partNumber", Q_PART_NUMBER },
	{ "tagging", Q_TAGGING },
	{ "acl", Q_ACL },
	{ "retention", Q_RETENTION },
	{ "legal-hold", Q_LEGAL_HOLD },
	{ "restore", Q_RESTORE },
	{ "versionId", Q_VERSION_ID },
	{ "select", Q_SELECT },
	{ "select-type", Q_SELECT_TYPE },
	{ "delete", Q_DELETE },
};

/* Parameters that change nothing S3 does to an object. */
static bool ignored_param(const char *name)
{
	if (name[0] == '\0' || strcmp(name, "x-id") == 0)
		return true;
	/* presign parameters; a hoisted x-amz-copy-source would add a read
	 * this file does not see: unknown */
	if (strncasecmp(name, "x-amz-", 6) == 0)
		return strcasecmp(name, "x-amz-copy-source") != 0;
	return strncmp(name, "response-", 9) == 0;
}

/* The Q_* bits of query q[0..n); *select2 when select-type=2. -1 on a
 * name whose percent-escapes are bad. */
static int parse_query(const char *q, size_t n, unsigned *bits, bool *select2)
{
	*bits = 0;
	*select2 = false;
	size_t i = 0;
	while (i <= n) {
		size_t end = i;
		while (end < n && q[end] != '&')
			end++;
		const char *param = q + i;
		size_t plen = end - i;
		const char *eq = memchr(param, '=', plen);
		size_t nlen = eq ? (size_t)(eq - param) : plen;
		char name[64], value[8];
		size_t len;
		int r = pct_decode(param, nlen, name, sizeof(name), &len);
		if (r == -1)
			return -1;
		if (r == -2) {
			*bits |= Q_UNKNOWN; /* no name this long is known */
		} else if (!ignored_param(name)) {
			unsigned bit = Q_UNKNOWN;
			for (size_t k = 0; k < sizeof(subresources) / sizeof(subresources[0]); k++)
				if (strcmp(name, subresources[k].name) == 0)
					bit = subresources[k].bit;
			*bits |= bit;
			if (bit == Q_SELECT_TYPE) {
				/* a Select names type 2, once or always */
				if (eq && pct_decode(eq + 1, plen - nlen - 1, value,
						     sizeof(value), &len) == 0 &&
				    strcmp(value, "2") == 0)
					*select2 = true;
				else
					*bits |= Q_UNKNOWN;
			}
		}
		i = end + 1;
	}
	return 0;
}

/* ---- the copy source ------------------------------------------------- */

static enum fg_s3_refusal parse_copy_source(const char *v, struct fg_s3_req *out)
{
	size_t n = strlen(v);
	if (!printable(v, n))
		return FG_S3_BAD_COPY_SOURCE;
	if (n > 0 && v[0] == '/') {
		v++;
		n--;
	}
	const char *q = memchr(v, '?', n);
	size_t plen = q ? (size_t)(q - v) : n;
	if (q) {
		/* only a version may follow: "?versionId=ID" */
		const char *rest = q + 1;
		size_t rlen = n - plen - 1;
		if (rlen < 10 || memcmp(rest, "versionId=", 10) != 0 ||
		    memchr(rest, '&', rlen))
			return FG_S3_BAD_COPY_SOURCE;
	}
	const char *slash = memchr(v, '/', plen);
	if (!slash)
		return FG_S3_BAD_COPY_SOURCE;
	size_t blen = (size_t)(slash - v);
	if (pct_decode(v, blen, out->src_bucket, sizeof(out->src_bucket),
		       &out->src_bucket_len) != 0 ||
	    !valid_bucket(out->src_bucket, out->src_bucket_len))
		return FG_S3_BAD_COPY_SOURCE;
	if (pct_decode(slash + 1, plen - blen - 1, out->src_key,
		       sizeof(out->src_key), &out->src_key_len) != 0 ||
	    out->src_key_len == 0)
		return FG_S3_BAD_COPY_SOURCE;
	out->has_copy_source = true;
	return FG_S3_OK;
}

static bool is_form_upload(const char *ct)
{
	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	static const char form[] = "multipart/form-data";
	if (strncasecmp(ct, form, sizeof(form) - 1) != 0)
		return false;
	char c = ct[sizeof(form) - 1];
	return c == '\0' || c == ';' || c == ' ' || c == '\t';
}

/* ---- classification -------------------------------------------------- */

/* The operation of a write on a key, from its method and subresources. */
static enum fg_s3_op key_write(const char *method, unsigned bits)
{
	if (bits & Q_UNKNOWN)
		return FG_S3_OP_UNKNOWN;
	unsigned m = bits & ~(unsigned)Q_VERSION_ID;
	if (strcmp(method, "PUT") == 0) {
		switch (m) {
		case 0: return FG_S3_OP_PUT_OBJECT;
		case Q_TAGGING: return FG_S3_OP_PUT_TAGGING;
		case Q_ACL: return FG_S3_OP_PUT_ACL;
		case Q_RETENTION: return FG_S3_OP_PUT_RETENTION;
		case Q_LEGAL_HOLD: return FG_S3_OP_PUT_LEGAL_HOLD;
		case Q_PART_NUMBER | Q_UPLOAD_ID: return FG_S3_OP_UPLOAD_PART;
		default: return FG_S3_OP_UNKNOWN;
		}
	}
	if (strcmp(method, "DELETE") == 0) {
		switch (m) {
		case 0: return FG_S3_OP_DELETE_OBJECT;
		case Q_TAGGING: return FG_S3_OP_DELETE_TAGGING;
		case Q_UPLOAD_ID: return FG_S3_OP_ABORT_MPU;
		default: return FG_S3_OP_UNKNOWN;
		}
	}
	if (strcmp(method, "POST") == 0) {
		switch (m) {
		case Q_UPLOADS: return FG_S3_OP_CREATE_MPU;
		case Q_UPLOAD_ID: return FG_S3_OP_COMPLETE_MPU;
		case Q_RESTORE: return FG_S3_OP_RESTORE;
		default: return FG_S3_OP_UNKNOWN;
		}
	}
	return FG_S3_OP_UNKNOWN;
}

enum fg_s3_refusal fg_s3_classify(const struct fg_config *cfg,
				  const struct fg_s3_head *head,
				  struct fg_s3_req *out)
{
	memset(out, 0, sizeof(*out));

	const char *t = head->target;
	if (!t || !head->method || t[0] != '/')
		return FG_S3_BAD_TARGET;
	size_t tlen = strlen(t);
	/* a fragment never reaches S3; what it would see is not what was
	 * classified */
	if (!printable(t, tlen) || memchr(t, '#', tlen))
		return FG_S3_BAD_TARGET;
	size_t plen = strcspn(t, "?");
	out->raw_path = t;
	out->raw_path_len = plen;
	out->raw_query = plen < tlen ? t + plen + 1 : NULL;

	/* the bucket and the key, as sent */
	const char *rkey;
	size_t rklen;
	if (host_bucket(head->host, cfg->s3_domain, out->bucket, &out->bucket_len)) {
		out->virtual_host = true;
		if (!valid_bucket(out->bucket, out->bucket_len))
			return FG_S3_BAD_BUCKET;
		out->bucket[out->bucket_len] = '\0';
		rkey = t + 1;
		rklen = plen - 1;
	} else {
		const char *seg = t + 1;
		size_t slen = 0;
		while (1 + slen < plen && seg[slen] != '/')
			slen++;
		if (slen == 0 && plen > 1)
			return FG_S3_BAD_BUCKET; /* "//...": an empty bucket */
		if (slen > 0) {
			int r = pct_decode(seg, slen, out->bucket, sizeof(out->bucket),
					   &out->bucket_len);
			if (r == -1)
				return FG_S3_BAD_TARGET;
			if (r == -2 || !valid_bucket(out->bucket, out->bucket_len))
				return FG_S3_BAD_BUCKET;
		}
		rkey = seg + slen + (1 + slen < plen ? 1 : 0);
		rklen = plen - (size_t)(rkey - t);
	}
	int r = pct_decode(rkey, rklen, out->key, sizeof(out->key), &out->key_len);
	if (r == -1)
		return FG_S3_BAD_TARGET;
	if (r == -2)
		return FG_S3_KEY_TOO_LONG;

	unsigned bits = 0;
	bool select2 = false;
	if (out->raw_query &&
	    parse_query(out->raw_query, tlen - plen - 1, &bits, &select2) != 0)
		return FG_S3_BAD_TARGET;

	const char *m = head->method;
	if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 ||
	    strcmp(m, "OPTIONS") == 0) {
		out->op = FG_S3_OP_READ;
		out->read = true;
		return FG_S3_OK;
	}
	if (out->bucket_len == 0)
		return FG_S3_NO_BUCKET;
	bool post = strcmp(m, "POST") == 0;
	if (out->key_len > 0) {
		if (post && bits == (Q_SELECT | Q_SELECT_TYPE) && select2) {
			out->op = FG_S3_OP_SELECT;
			out->read = true;
			return FG_S3_OK;
		}
		out->op = key_write(m, bits);
	} else if (post && bits == Q_DELETE) {
		out->op = FG_S3_OP_DELETE_OBJECTS;
		out->needs_body = true;
	} else if (post && bits == 0 && is_form_upload(head->content_type)) {
		out->op = FG_S3_OP_POST_UPLOAD;
	} else if (post || strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0) {
		out->op = FG_S3_OP_BUCKET_WRITE;
	} else {
		out->op = FG_S3_OP_UNKNOWN;
	}
	out->whole_bucket = out->op == FG_S3_OP_BUCKET_WRITE ||
			    out->op == FG_S3_OP_POST_UPLOAD ||
			    out->op == FG_S3_OP_UNKNOWN;

	/* a PUT's copy source is read, whatever S3 makes of the rest */
	if (strcmp(m, "PUT") == 0 && head->copy_source) {
		enum fg_s3_refusal cr = parse_copy_source(head->copy_source, out);
		if (cr != FG_S3_OK)
			return cr;
		if (out->op == FG_S3_OP_PUT_OBJECT)
			out->op = FG_S3_OP_COPY_OBJECT;
		else if (out->op == FG_S3_OP_UPLOAD_PART)
			out->op = FG_S3_OP_UPLOAD_PART_COPY;
	}
	return FG_S3_OK;
}

/* ---- locks ----------------------------------------------------------- */

/*
 * The one question asked of the route rules: the lock of the rule that
 * covers path[0..len) (*rule not NULL: a rule decided; the return is 0, or
 * -1 when its lock is no valid name), or *rule NULL when none does. The
 * path is "/BUCKET/KEY" with KEY decoded and not resolved: route templates
 * match it segment-wise and literally (base/route.h).
 */
static int route_lock(const struct fg_config *cfg, const char *path,
		      size_t len, char out[FG_NAME_MAX + 1],
		      const struct fg_route **rule)
{
	return fg_route_lock(cfg, path, len, out, rule);
}

static size_t route_path(char *buf, const char *bucket, size_t blen,
			 const char *key, size_t klen)
{
	buf[0] = '/';
	memcpy(buf + 1, bucket, blen);
	buf[1 + blen] = '/';
	memcpy(buf + 2 + blen, key, klen);
	buf[2 + blen + klen] = '\0';
	return 2 + blen + klen;
}

enum fg_s3_refusal fg_s3_object_lock(const struct fg_config *cfg,
				     const char *bucket, size_t bucket_len,
				     const char *key, size_t key_len,
				     char out[FG_NAME_MAX + 1])
{
	if (bucket_len == 0 || bucket_len > FG_S3_BUCKET_MAX)
		return FG_S3_BAD_BUCKET;
	if (key_len == 0 || key_len > FG_S3_KEY_MAX)
		return FG_S3_KEY_TOO_LONG;
	char path[ROUTE_PATH_MAX];
	size_t plen = route_path(path, bucket, bucket_len, key, key_len);
	const struct fg_route *rule = NULL;
	int r = route_lock(cfg, path, plen, out, &rule);
	if (rule)
		return r == 0 ? FG_S3_OK : FG_S3_BAD_LOCK_NAME;
	/* the default: BUCKET/KEY itself when it is a name */
	const char *name = path + 1;
	size_t nlen = plen - 1;
	if (nlen <= FG_NAME_MAX && fg_name_valid(name, nlen)) {
		memcpy(out, name, nlen + 1);
		return FG_S3_OK;
	}
	/* else a name that any bytes map to, and no other key does */
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)name, nlen, md);
	memcpy(out, HASH_PREFIX, sizeof(HASH_PREFIX) - 1);
	if (fg_b64url_encode(md, sizeof(md), out + sizeof(HASH_PREFIX) - 1,
			     FG_NAME_MAX + 1 - (sizeof(HASH_PREFIX) - 1)) < 0)
		return FG_S3_NO_MEMORY; /* cannot happen: 47 bytes fit */
	return FG_S3_OK;
}

enum fg_s3_refusal fg_s3_bucket_lock(const struct fg_config *cfg,
				     const char *bucket, size_t bucket_len,
				     char out[FG_NAME_MAX + 1])
{
	if (bucket_len == 0 || bucket_len > FG_S3_BUCKET_MAX)
		return FG_S3_BAD_BUCKET;
	char path[ROUTE_PATH_MAX];
	size_t plen = route_path(path, bucket, bucket_len, "", 0);
	const struct fg_route *rule = NULL;
	int r = route_lock(cfg, path, plen, out, &rule);
	if (!rule)
		return FG_S3_SUBTREE_UNGUARDED;
	if (r != 0)
		return FG_S3_BAD_LOCK_NAME;
	if (!fg_subtree_guarded(cfg, path, plen, out))
		return FG_S3_SUBTREE_UNGUARDED;
	return FG_S3_OK;
}

/* Adds a lock to the set; a lock both read and written is written. */
static enum fg_s3_refusal add_lock(struct fg_s3_locks *set, const char *name,
				   bool write)
{
	for (int i = 0; i < set->n; i++)
		if (strcmp(set->m[i].name, name) == 0) {
			set->m[i].write |= write;
			return FG_S3_OK;
		}
	if (set->n >= FG_S3_LOCKS_MAX)
		return FG_S3_TOO_MANY_LOCKS;
	strcpy(set->m[set->n].name, name);
	set->m[set->n].write = write;
	set->n++;
	return FG_S3_OK;
}

static enum fg_s3_refusal add_object(const struct fg_config *cfg,
				     struct fg_s3_locks *set, const char *bucket,
				     size_t blen, const char *key, size_t klen,
				     bool write)
{
	char lock[FG_NAME_MAX + 1];
	enum fg_s3_refusal r = fg_s3_object_lock(cfg, bucket, blen, key, klen, lock);
	return r != FG_S3_OK ? r : add_lock(set, lock, write);
}

struct delete_walk {
	const struct fg_config *cfg;
	const struct fg_s3_req *req;
	struct fg_s3_locks *set;
};

static int on_delete_key(void *arg, const char *key, size_t len)
{
	struct delete_walk *w = arg;
	return (int)add_object(w->cfg, w->set, w->req->bucket, w->req->bucket_len,
			       key, len, true);
}

enum fg_s3_refusal fg_s3_locks_build(const struct fg_config *cfg,
				     const struct fg_s3_req *req,
				     const char *body, size_t body_len,
				     struct fg_s3_locks *out)
{
	out->n = 0;
	if (req->read) {
		if (req->bucket_len == 0 || req->key_len == 0)
			return FG_S3_OK;
		return add_object(cfg, out, req->bucket, req->bucket_len,
				  req->key, req->key_len, false);
	}
	if (req->bucket_len == 0)
		return FG_S3_NO_BUCKET;
	enum fg_s3_refusal r;
	if (req->needs_body) {
		struct delete_walk w = { cfg, req, out };
		r = (enum fg_s3_refusal)fg_s3_delete_parse(body ? body : "",
							   body ? body_len : 0,
							   on_delete_key, &w);
		return r;
	}
	if (req->whole_bucket) {
		char lock[FG_NAME_MAX + 1];
		r = fg_s3_bucket_lock(cfg, req->bucket, req->bucket_len, lock);
		if (r == FG_S3_OK)
			r = add_lock(out, lock, true);
	} else {
		r = add_object(cfg, out, req->bucket, req->bucket_len, req->key,
			       req->key_len, true);
	}
	if (r == FG_S3_OK && req->has_copy_source)
		r = add_object(cfg, out, req->src_bucket, req->src_bucket_len,
			       req->src_key, req->src_key_len, false);
	return r;
}

/* ---- the DeleteObjects body ------------------------------------------ */

/* libxml2 reports some errors (an encoding it cannot convert) on its
 * generic channel even with XML_PARSE_NOERROR: a client's body must not
 * write to the gateway's stderr. */
static void quiet(void *ctx, const char *fmt, ...)
{
	(void)ctx;
	(void)fmt;
}

static void quiet_structured(void *ctx, xmlErrorPtr err)
{
	(void)ctx;
	(void)err;
}

void fg_s3ops_init(void)
{
	LIBXML_TEST_VERSION
	xmlInitParser();
	/* this thread's handlers, and every later thread's defaults */
	xmlSetGenericErrorFunc(NULL, quiet);
	xmlThrDefSetGenericErrorFunc(NULL, quiet);
	xmlSetStructuredErrorFunc(NULL, quiet_structured);
	xmlThrDefSetStructuredErrorFunc(NULL, quiet_structured);
}

/* A DOCTYPE stops the parse before its subset is read: no entity can be
 * declared, none expanded, no DTD fetched. */
static void refuse_dtd(void *ctx, const xmlChar *name, const xmlChar *ext,
		       const xmlChar *sys)
{
	(void)name;
	(void)ext;
	(void)sys;
	xmlParserCtxtPtr c = ctx;
	c->wellFormed = 0;
	xmlStopParser(c);
}

static bool s3_element(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && !n->properties &&
	       strcmp((const char *)n->name, name) == 0 &&
	       (!n->ns || !n->ns->href ||
		strcmp((const char *)n->ns->href, S3_NS) == 0);
}

static bool blank(const xmlChar *s)
{
	for (; s && *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			return false;
	return true;
}

/* Between elements: whitespace and comments only. */
static bool filler(const xmlNode *n)
{
	return n->type == XML_COMMENT_NODE ||
	       (n->type == XML_TEXT_NODE && blank(n->content));
}

/* The text of an element that holds only text, into buf[cap] (NUL-
 * terminated): its length, or -1 (other children, or too long). */
static long text_of(const xmlNode *e, char *buf, size_t cap)
{
	size_t len = 0;
	for (const xmlNode *c = e->children; c; c = c->next) {
		if (c->type != XML_TEXT_NODE && c->type != XML_CDATA_SECTION_NODE)
			return -1;
		size_t n = c->content ? strlen((const char *)c->content) : 0;
		if (n >= cap - len)
			return -1;
		memcpy(buf + len, c->content, n);
		len += n;
	}
	buf[len] = '\0';
	return (long)len;
}

/* One <Object>: exactly one non-empty <Key>, at most one <VersionId>. */
static const xmlNode *object_key(const xmlNode *obj)
{
	const xmlNode *key = NULL;
	int versions = 0;
	for (const xmlNode *c = obj->children; c; c = c->next) {
		if (filler(c))
			continue;
		if (s3_element(c, "Key") && !key)
			key = c;
		else if (s3_element(c, "VersionId") && versions++ == 0) {
			for (const xmlNode *v = c->children; v; v = v->next)
				if (v->type != XML_TEXT_NODE &&
				    v->type != XML_CDATA_SECTION_NODE)
					return NULL;
		} else
			return NULL;
	}
	return key;
}

int fg_s3_delete_parse(const char *body, size_t len,
		       int (*on_key)(void *arg, const char *key, size_t len),
		       void *arg)
{
	int ret = FG_S3_MALFORMED_XML;
	xmlParserCtxtPtr ctxt = NULL;
	xmlDocPtr doc = NULL;
	char *key = NULL;

	if (len == 0 || len > FG_S3_DELETE_BODY_MAX)
		return FG_S3_MALFORMED_XML;
	/* UTF-8 only: the store must read the very keys read here, and a
	 * NUL (UTF-16, UTF-32) or a UTF-16 byte order mark says otherwise */
	if (memchr(body, '\0', len) || (unsigned char)body[0] == 0xfe ||
	    (unsigned char)body[0] == 0xff)
		return FG_S3_MALFORMED_XML;
	ctxt = xmlCreateMemoryParserCtxt(body, (int)len);
	if (!ctxt)
		return FG_S3_NO_MEMORY;
	/* no network, no DTD, no entity of its own, and quiet: a refusal
	 * is the caller's to answer */
	xmlCtxtUseOptions(ctxt, XML_PARSE_NONET | XML_PARSE_NOERROR |
				XML_PARSE_NOWARNING | XML_PARSE_NOCDATA);
	ctxt->sax->internalSubset = refuse_dtd;
	ctxt->sax->externalSubset = NULL;
	xmlParseDocument(ctxt);
	doc = ctxt->myDoc;
	ctxt->myDoc = NULL;
	if (!ctxt->wellFormed || !doc || doc->intSubset || doc->extSubset)
		goto error_doc;
	/* a declared encoding other than UTF-8, or XML 1.1 (other line
	 * ends): a store may decode other keys */
	if ((doc->encoding && strcasecmp((const char *)doc->encoding, "UTF-8") != 0) ||
	    !doc->version || strcmp((const char *)doc->version, "1.0") != 0)
		goto error_doc;

	const xmlNode *root = NULL;
	for (const xmlNode *n = doc->children; n; n = n->next) {
		if (n->type == XML_ELEMENT_NODE && !root)
			root = n;
		else if (n->type != XML_COMMENT_NODE)
			goto error_doc;
	}
	if (!root || !s3_element(root, "Delete"))
		goto error_doc;

	key = malloc(FG_S3_KEY_MAX + 1);
	if (!key) {
		ret = FG_S3_NO_MEMORY;
		goto error_doc;
	}
	/* the whole body is checked before any key is handed on */
	int objects = 0, quiet = 0;
	for (const xmlNode *c = root->children; c; c = c->next) {
		if (filler(c))
			continue;
		if (s3_element(c, "Object")) {
			const xmlNode *k = object_key(c);
			if (!k || ++objects > FG_S3_DELETE_KEYS_MAX ||
			    text_of(k, key, FG_S3_KEY_MAX + 1) <= 0)
				goto error_doc;
		} else if (s3_element(c, "Quiet") && quiet++ == 0) {
			char q[8];
			long qn = text_of(c, q, sizeof(q));
			if (qn < 0 || (strcmp(q, "true") != 0 && strcmp(q, "false") != 0))
				goto error_doc;
		} else {
			goto error_doc;
		}
	}
	if (objects == 0)
		goto error_doc;

	ret = 0;
	for (const xmlNode *c = root->children; c && ret == 0; c = c->next) {
		if (!s3_element(c, "Object"))
			continue;
		long n = text_of(object_key(c), key, FG_S3_KEY_MAX + 1);
		ret = on_key ? on_key(arg, key, (size_t)n) : 0;
	}

error_doc:
	free(key);
	xmlFreeDoc(doc);
	xmlFreeParserCtxt(ctxt);
	return ret;
}

enum fg_error fg_s3_route_decide(const struct fg_config *cfg, const char *raw,
				 size_t len, char out[FG_NAME_MAX + 1],
				 const struct fg_route **rule)
{
	*rule = NULL;
	if (len < 2 || raw[0] != '/' || memchr(raw, '?', len) || memchr(raw, '#', len))
		return FG_E_BAD_PATH;
	const char *b = raw + 1;
	const char *slash = memchr(b, '/', len - 1);
	size_t blen = slash ? (size_t)(slash - b) : len - 1;
	if (!valid_bucket(b, blen))
		return FG_E_BAD_PATH;
	char key[FG_S3_KEY_MAX + 1];
	size_t klen = 0;
	if (slash && pct_decode(slash + 1, (size_t)(raw + len - slash - 1), key,
				sizeof(key), &klen) != 0)
		return FG_E_BAD_PATH;
	char path[ROUTE_PATH_MAX];
	size_t plen = route_path(path, b, blen, key, klen);
	if (klen == 0) {
		/* the bucket itself: what its route rules give "/BUCKET/" */
		if (route_lock(cfg, path, plen, out, rule) != 0)
			return FG_E_BAD_LOCK_NAME;
		return FG_E_COUNT;
	}
	/* a rule that decides decides; with none, the S3 default (its hash
	 * when BUCKET/KEY is no name) */
	int r = route_lock(cfg, path, plen, out, rule);
	if (*rule)
		return r == 0 ? FG_E_COUNT : FG_E_BAD_LOCK_NAME;
	return fg_s3_object_lock(cfg, b, blen, key, klen, out) == FG_S3_OK
		? FG_E_COUNT : FG_E_BAD_LOCK_NAME;
}
