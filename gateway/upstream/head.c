/*
 * head.c - the request upstream as data (head.h): the client's headers as
 * the policy passes them (headers.h), then the gateway's own
 * (X-Forwarded-*, Via, ...), then the owner's, each a line in one block
 * reused by the loop, then split into names and values for the client
 * that carries the request (backend.h). No I/O.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/config.h"
#include "base/text.h"
#include "base/writeset.h"
#include "upstream/head.h"
#include "upstream/headers.h"

struct hdr_ctx {
	struct fg_head *hd;
	unsigned flags;         /* FG_HDR_* */
	const char *signed_list; /* S3 mode: the client's SignedHeaders */
	const char *connection; /* the Connection header: names more hop headers */
	char xff[FG_HDR_XFF_MAX]; /* every X-Forwarded-For value, in order */
	size_t xff_len;
	bool failed;
};

/* Appends the pieces of one header line, then its NUL, to hd->rh. */
static bool rh_put(struct fg_head *hd, const char *a, size_t an,
		   const char *b, size_t bn, const char *c, size_t cn)
{
	size_t n = an + bn + cn + 1;
	if (!fg_block_room(&hd->rh, &hd->rh_cap, hd->rh_len, n, 1024))
		return false;
	char *o = hd->rh + hd->rh_len;
	memcpy(o, a, an);
	memcpy(o + an, b, bn);
	memcpy(o + an + bn, c, cn);
	o[an + bn + cn] = '\0';
	hd->rh_len += n;
	return true;
}

static bool append_line(void *arg, const char *line)
{
	return rh_put(arg, line, strlen(line), "", 0, "", 0);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind,
				  const char *key, const char *value)
{
	struct hdr_ctx *h = cls;
	(void)kind;
	if (fg_hdr_is_xff(key)) {
		if (fg_hdr_xff_join(h->xff, sizeof(h->xff), &h->xff_len, value) != 0) {
			h->failed = true; /* bounded like every header */
			return MHD_NO;
		}
		return MHD_YES;
	}
	if (h->signed_list ? !fg_hdr_s3_pass(key, h->connection, h->signed_list)
			   : !fg_hdr_pass(key, h->connection, h->flags))
		return MHD_YES;
	if (!rh_put(h->hd, key, strlen(key), ": ", 2, value, strlen(value))) {
		h->failed = true;
		return MHD_NO;
	}
	return MHD_YES;
}

static void client_ip(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	memcpy(out, "unknown", sizeof("unknown")); /* (cap >= INET6_ADDRSTRLEN) */
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET) {
		/* inet_ntop() formats an IPv4 address with sprintf(), once
		 * per request: the four numbers are written here */
		const uint8_t *b = (const uint8_t *)
			&((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		size_t n = 0;
		for (int i = 0; i < 4; i++) {
			n += fg_digits(out + n, b[i]);
			out[n++] = i < 3 ? '.' : '\0';
		}
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)cap);
	}
}

/* S3 mode: the headers the gateway signs with, after the client's signed
 * ones (the first lines of hd->rh): the time, the payload hash carried
 * over, the gateway's own session token. *nsigned counts the lines
 * signed. */
static bool s3_lines(struct fg_head *hd, const struct fg_head_s3 *s3,
		     size_t *nsigned)
{
	char date[17];
	if (fg_sigv4_amz_date(s3->now, date) != 0)
		return false;
	if (!rh_put(hd, "x-amz-date: ", 12, date, 16, "", 0) ||
	    !rh_put(hd, "x-amz-content-sha256: ", 22, s3->payload_hash,
		    strlen(s3->payload_hash), "", 0))
		return false;
	if (s3->session_token &&
	    !rh_put(hd, "x-amz-security-token: ", 22, s3->session_token,
		    strlen(s3->session_token), "", 0))
		return false;
	*nsigned = 0;
	for (size_t o = 0; o < hd->rh_len; o += strlen(hd->rh + o) + 1)
		(*nsigned)++;
	return true;
}

/* S3 mode: the Authorization line over the first nsigned lines of hd->rh,
 * the Host the request goes with and the Content-Length the client
 * signed, appended to hd->rh; the signature in s3->seed. */
static bool s3_sign(struct fg_head *hd, const struct fg_head_s3 *s3,
		    const char *method, size_t nsigned)
{
	struct fg_sigv4_header hs[FG_SIGV4_SIGNED_MAX + 2];
	size_t n = 0;
	char date[17];
	if (fg_sigv4_amz_date(s3->now, date) != 0)
		return false;
	for (size_t o = 0, i = 0; i < nsigned && o < hd->rh_len; i++) {
		const char *l = hd->rh + o;
		size_t ln = strlen(l);
		o += ln + 1;
		if (n == FG_SIGV4_SIGNED_MAX)
			return false;
		const char *colon = memchr(l, ':', ln);
		if (!colon)
			return false;
		const char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		hs[n++] = (struct fg_sigv4_header){ l, (size_t)(colon - l), v,
						    (size_t)(l + ln - v) };
	}
	hs[n++] = (struct fg_sigv4_header){ "host", 4, s3->authority,
					    strlen(s3->authority) };
	if (s3->content_length)
		hs[n++] = (struct fg_sigv4_header){ "content-length", 14,
						    s3->content_length,
						    strlen(s3->content_length) };
	char auth[FG_SIGV4_AUTH_VALUE_MAX];
	char seed[65];
	if (fg_sigv4_sign(method, s3->path, s3->path_len, s3->query, s3->query_len,
			  hs, n, s3->payload_hash, date, s3->creds, s3->cache,
			  auth, sizeof(auth), seed) != 0)
		return false;
	if (s3->seed)
		memcpy(s3->seed, seed, sizeof(seed));
	return rh_put(hd, "Authorization: ", 15, auth, strlen(auth), "", 0);
}

/* The headers every request upstream carries: the client's as the policy
 * passes them (headers.h), then the gateway's own, appended to hd->rh;
 * false when a header could not be added. */
static bool client_headers(struct fg_head *hd, struct MHD_Connection *c,
			   unsigned flags, bool tls, const char *host,
			   const struct fg_head_s3 *s3, size_t *nsigned)
{
	char ip[64];
	struct hdr_ctx h = { hd, flags, s3 ? s3->signed_headers : NULL,
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION),
		{ 0 }, 0, false };
	MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
	if (s3 && !h.failed && !s3_lines(hd, s3, nsigned))
		return false;
	client_ip(c, ip, sizeof(ip));
	struct fg_hdr_forward f = {
		.xff = h.xff,
		.client_ip = ip,
		.tls = tls,
		.host = host ? host : MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								  MHD_HTTP_HEADER_HOST),
		.has_accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							  MHD_HTTP_HEADER_ACCEPT) != NULL,
		.flags = flags,
	};
	return !h.failed && fg_hdr_add(&f, append_line, hd);
}

/* The lines in hd->rh as the request's headers, in hd->rqh (split at
 * their colon, the value's leading blanks gone); false without memory. */
static bool rh_headers(struct fg_head *hd, size_t *n)
{
	*n = 0;
	for (size_t o = 0, ln; o < hd->rh_len; o += ln + 1) {
		const char *l = hd->rh + o;
		ln = strlen(l);
		if (*n == hd->caprqh) {
			size_t cap = hd->caprqh ? hd->caprqh * 2 : 32;
			struct fg_up_header *a = realloc(hd->rqh, cap * sizeof(*a));
			if (!a)
				return false;
			hd->rqh = a;
			hd->caprqh = cap;
		}
		const char *colon = memchr(l, ':', ln);
		const char *v = colon ? colon + 1 : l + ln;
		while (*v == ' ' || *v == '\t')
			v++;
		struct fg_up_header *h = &hd->rqh[(*n)++];
		h->name = l;
		h->name_len = colon ? (size_t)(colon - l) : ln;
		h->value = v;
		h->value_len = (size_t)(l + ln - v);
	}
	return true;
}

bool fg_head_build(struct fg_head *hd, const struct fg_head_in *in,
		   struct fg_up_request *rq)
{
	hd->rh_len = 0;
	size_t nsigned = 0;
	bool ok = client_headers(hd, in->conn, in->hdr_flags, in->tls, in->host,
				 in->s3, &nsigned);
	for (const char *const *l = in->extra; ok && l && *l; l++)
		ok = append_line(hd, *l);
	if (ok && in->s3)
		ok = s3_sign(hd, in->s3, in->method, nsigned);
	size_t nheaders;
	if (!ok || !rh_headers(hd, &nheaders))
		return false;
	const char *m = in->method;
	bool head = strcmp(m, "HEAD") == 0;
	*rq = (struct fg_up_request){
		.method = m,
		.url = in->url,
		.headers = hd->rqh,
		.nheaders = nheaders,
		.body = in->body,
		.length = in->body == FG_UP_BODY_LENGTH ? in->length : 0,
		.fixed_body = in->fixed_body,
		.fixed_len = in->fixed_len,
		.is_head = head,
		/* the safe methods (RFC 9110, and WebDAV's PROPFIND) may go
		 * out twice, as curl would send them; a write never does */
		.retryable = in->body == FG_UP_BODY_NONE &&
			!fg_method_is_write(in->cfg, m) &&
			(head || strcmp(m, "GET") == 0 || strcmp(m, "OPTIONS") == 0 ||
			 strcmp(m, "PROPFIND") == 0),
	};
	return true;
}

void fg_head_free(struct fg_head *hd)
{
	free(hd->rh);
	free(hd->rqh);
	hd->rh = NULL;
	hd->rqh = NULL;
	hd->rh_len = hd->rh_cap = hd->caprqh = 0;
}
