/*
 * s3part.c - S3 mode's part of a proxied request (s3part.h): its write set,
 * its DeleteObjects body, and the target and signing inputs of the
 * request upstream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/text.h"
#include "proxy/s3part.h"
#include "upstream/headers.h"

struct fg_s3part *fg_s3part_new(void)
{
	return calloc(1, sizeof(struct fg_s3part));
}

void fg_s3part_free(struct fg_s3part *p)
{
	if (!p)
		return;
	OPENSSL_cleanse(&p->up, sizeof(p->up));
	fg_awschunk_destroy(p->chunk);
	free(p->out);
	free(p->body);
	free(p);
}

bool fg_s3part_body(struct fg_s3part *p, const char *data, size_t len)
{
	if (p->body_over || len > FG_S3_DELETE_BODY_MAX - p->body_len) {
		p->body_over = true;
		return true;
	}
	if (p->body_len + len > p->body_cap) {
		size_t cap = p->body_cap ? p->body_cap : 4096;
		while (cap < p->body_len + len)
			cap *= 2;
		if (cap > FG_S3_DELETE_BODY_MAX)
			cap = FG_S3_DELETE_BODY_MAX;
		char *b = realloc(p->body, cap);
		if (!b)
			return false;
		p->body = b;
		p->body_cap = cap;
	}
	memcpy(p->body + p->body_len, data, len);
	p->body_len += len;
	return true;
}

void fg_s3part_writeset(const struct fg_s3part *p, bool fenced_read,
			struct fg_writeset *ws)
{
	ws->write = !p->r.read;
	ws->n = 0;
	ws->has_dest = ws->shallow = ws->probe_path = ws->probe_dest = false;
	ws->path_len = 0;
	ws->path[0] = '\0';
	/* (the lock set holds at most FG_S3_LOCKS_MAX == FG_WS_MAX) */
	for (int i = 0; i < p->locks.n; i++) {
		const struct fg_s3_lock *l = &p->locks.m[i];
		if (l->write)
			(void)fg_ws_add_member(ws, l->name, true, FG_WS_SESSION_TOKEN);
		else if (p->r.read && fenced_read)
			(void)fg_ws_add_member(ws, l->name, false, FG_WS_FENCING_TOKEN);
	}
}

/* The presigned signature's own parameters, which the store never sees:
 * the request upstream is signed in its headers. */
static bool presign_param(const char *name, size_t len)
{
	static const char *const names[] = {
		"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
		"X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature",
		"X-Amz-Security-Token",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0)
			return true;
	return false;
}

/* The client's query less the presigned parameters, as it came. */
static bool upstream_query(struct fg_s3part *p, const char *q)
{
	p->query_len = 0;
	p->query[0] = '\0';
	if (!q)
		return true;
	size_t qlen = strlen(q);
	if (qlen > FG_SIGV4_QUERY_MAX)
		return false;
	for (size_t at = 0; at < qlen;) {
		size_t n = strcspn(q + at, "&");
		size_t nl = strcspn(q + at, "=&");
		if (n > 0 && !(p->auth.presigned && presign_param(q + at, nl))) {
			if (p->query_len)
				p->query[p->query_len++] = '&';
			memcpy(p->query + p->query_len, q + at, n);
			p->query_len += n;
		}
		at += n + 1;
	}
	p->query[p->query_len] = '\0';
	return true;
}

bool fg_s3part_upstream(struct fg_s3part *p, const struct fg_config *cfg,
			bool length_given, uint64_t length, int64_t now,
			struct fg_sigv4_cache *cache)
{
	const struct fg_s3_req *r = &p->r;
	size_t bl = strlen(cfg->up.base_path);
	size_t cap = sizeof(p->path);
	if (bl + 1 + r->bucket_len + 1 >= cap)
		return false;
	/* path-style: the base path, then /BUCKET (a virtual-host request's
	 * path is its key alone), then the path as the client sent it,
	 * canonical-encoded: the bytes the store decodes are the client's */
	memcpy(p->path, cfg->up.base_path, bl);
	size_t n = bl;
	const char *raw = r->raw_path;
	size_t rl = r->raw_path_len;
	if (r->virtual_host) {
		p->path[n++] = '/';
		memcpy(p->path + n, r->bucket, r->bucket_len);
		n += r->bucket_len;
		if (rl == 1 && raw[0] == '/')
			rl = 0; /* the bucket itself: "/b", as path-style sends it */
	}
	if (rl > 0) {
		long w = fg_sigv4_canonical_path(raw, rl, p->path + n, cap - n);
		if (w < 0)
			return false;
		n += (size_t)w;
	} else if (n == 0) {
		p->path[n++] = '/';
	}
	p->path[n] = '\0';
	p->path_len = n;
	if (!upstream_query(p, r->raw_query))
		return false;
	/* the Host the request goes with, as the upstream clients write it
	 * (the port unless it is the scheme's own) */
	const char *port = cfg->up.port;
	bool https = strncasecmp(cfg->up.base, "https://", 8) == 0;
	bool dflt = strcmp(port, https ? "443" : "80") == 0;
	bool six = strchr(cfg->up.host, ':') != NULL;
	int al = snprintf(p->authority, sizeof(p->authority), "%s%s%s%s%s",
			  six ? "[" : "", cfg->up.host, six ? "]" : "",
			  dflt ? "" : ":", dflt ? "" : port);
	if (al < 0 || (size_t)al >= sizeof(p->authority))
		return false;
	bool clen = fg_hdr_in_signed(p->auth.signed_headers, "content-length", 14);
	if (clen) {
		if (!length_given && !(r->needs_body))
			return false; /* a signed length the body does not have */
		snprintf(p->clen, sizeof(p->clen), "%llu",
			 (unsigned long long)(r->needs_body ? p->body_len : length));
	}
	p->creds = (struct fg_sigv4_creds){
		.key_id = p->up.key_id,
		.secret = p->up.secret,
		.region = cfg->s3_region ? cfg->s3_region : "us-east-1",
		.service = "s3",
	};
	p->sign = (struct fg_head_s3){
		.signed_headers = p->auth.signed_headers,
		.payload_hash = p->auth.payload_hash,
		.path = p->path,
		.path_len = p->path_len,
		.query = p->query,
		.query_len = p->query_len,
		.authority = p->authority,
		.content_length = clen ? p->clen : NULL,
		.creds = &p->creds,
		.session_token = p->up.has_token ? p->up.token : NULL,
		.now = now,
		.cache = cache,
		.seed = p->seed,
	};
	return true;
}

bool fg_s3part_streaming(const struct fg_s3part *p)
{
	return !p->auth.presigned &&
	       strcmp(p->auth.payload_hash, FG_S3_STREAMING_PAYLOAD) == 0;
}

/* The re-signed bytes, kept until the transfer takes them. */
static bool emit(void *arg, const char *data, size_t n)
{
	struct fg_s3part *p = arg;
	if (p->out_len + n > p->out_cap) {
		size_t cap = p->out_cap ? p->out_cap : 65536;
		while (cap < p->out_len + n)
			cap *= 2;
		char *o = realloc(p->out, cap);
		if (!o)
			return false;
		p->out = o;
		p->out_cap = cap;
	}
	memcpy(p->out + p->out_len, data, n);
	p->out_len += n;
	return true;
}

int fg_s3part_chunk_start(struct fg_s3part *p, const struct fg_config *cfg,
			  uint64_t decoded, struct fg_sigv4_cache *cache)
{
	const char *region = cfg->s3_region ? cfg->s3_region : "us-east-1";
	char up_date[17], up_scope[FG_AWSCHUNK_SCOPE_MAX], cl_scope[FG_AWSCHUNK_SCOPE_MAX];
	unsigned char up_key[32];
	int rc = -1;
	if (!p->up.has_client_key || fg_sigv4_amz_date(p->sign.now, up_date) != 0)
		return -1;
	snprintf(up_scope, sizeof(up_scope), "%.8s/%s/s3/aws4_request", up_date, region);
	snprintf(cl_scope, sizeof(cl_scope), "%s/%s/%s/aws4_request", p->auth.date,
		 p->auth.region, p->auth.service);
	char day[9];
	memcpy(day, up_date, 8);
	day[8] = '\0';
	if (fg_sigv4_signing_key(cache, p->up.key_id, p->up.secret,
				 strlen(p->up.secret), day, region, "s3", up_key) != 0)
		goto out;
	struct fg_awschunk_config cc = {
		.client = { p->up.client_key, p->auth.amz_date, cl_scope, p->auth.signature },
		.upstream = { up_key, up_date, up_scope, p->seed },
		.decoded_length = decoded,
		.emit = emit,
		.emit_arg = p,
	};
	rc = fg_awschunk_create(&cc, &p->chunk) == FG_AWSCHUNK_OK ? 0 : -1;
out:
	OPENSSL_cleanse(up_key, sizeof(up_key));
	return rc;
}

bool fg_s3part_url(const struct fg_s3part *p, const struct fg_config *cfg,
		   char *out, size_t cap)
{
	/* the base URL without its path, then the path built above */
	size_t bl = strlen(cfg->up.base) - strlen(cfg->up.base_path);
	int n = snprintf(out, cap, "%.*s%s%s%s", (int)bl, cfg->up.base, p->path,
			 p->query_len ? "?" : "", p->query);
	return n >= 0 && (size_t)n < cap;
}
