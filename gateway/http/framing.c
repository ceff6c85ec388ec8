/*
 * framing.c - strict request framing on top of libmicrohttpd (framing.h).
 *
 * Invariant: a request reaches the lock API or the proxy only when its
 * target and head have exactly one reading: the bytes libmicrohttpd hands
 * over are all the bytes that were sent, and the body's length is given
 * one way only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/respond.h"
#include "http/framing.h"
#include "http/req.h"
#include "proc/gateway.h"

#define CL_DIGITS_MAX 15 /* below 2^53: no overflow anywhere downstream */

void fg_framing_note_target(struct fg_req *req, const char *uri)
{
	req->uri_at = uri;
	req->uri_len = strlen(uri);
}

/* RFC 9110 5.6.2 tchar. */
static bool tchar(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

#define HEADERS_MAX 256

struct head {
	const char *why;
	unsigned cl, te, host;
	const char *cl_value, *te_value;
	unsigned n;
	const char *key[HEADERS_MAX], *value[HEADERS_MAX];
};

static enum MHD_Result look(void *cls, enum MHD_ValueKind kind, const char *key,
			    size_t key_size, const char *value, size_t value_size)
{
	struct head *h = cls;
	(void)kind;
	if (key_size == 0 || strlen(key) != key_size) {
		h->why = "a header name holds a NUL";
		return MHD_NO;
	}
	for (size_t i = 0; i < key_size; i++) {
		if (!tchar((unsigned char)key[i])) {
			h->why = "a header name holds a byte that is not a token character";
			return MHD_NO;
		}
	}
	if (!value || strlen(value) != value_size) {
		h->why = "a header value holds a NUL";
		return MHD_NO;
	}
	if (memchr(value, '\r', value_size) || memchr(value, '\n', value_size)) {
		h->why = "a header value holds a CR or LF";
		return MHD_NO;
	}
	if (h->n == HEADERS_MAX) {
		h->why = "too many header fields";
		return MHD_NO;
	}
	h->key[h->n] = key;
	h->value[h->n] = value;
	h->n++;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		h->cl++;
		h->cl_value = value;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
		h->host++; /* a Destination's authority is compared with it */
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		h->te++;
		h->te_value = value;
	}
	return MHD_YES;
}

/*
 * libmicrohttpd hands over C strings cut out of its read buffer in place:
 * each line's CR LF and each ':' become NULs, and the strings follow each
 * other in the order they were sent. A NUL sent inside a name or value
 * would hide the rest of it; then the gap between one string's end and the
 * next string holds bytes other than NUL, space or tab. The head is
 * `size` bytes from the start of the request line.
 */
static bool gap_clean(const char *from, const char *to)
{
	if (to < from || to - from > 64)
		return false;
	for (const char *p = from; p < to; p++)
		if (*p != '\0' && *p != ' ' && *p != '\t')
			return false;
	return true;
}

static const char *hidden_bytes(const struct head *h, const char *version,
				const char *end)
{
	const char *at = version + strlen(version);
	for (unsigned i = 0; i < h->n; i++) {
		/* a line that starts with a space or tab continues the one
		 * before (obs-fold, RFC 9112 5.2): libmicrohttpd joins the two
		 * into a string of its own, outside the head */
		if (h->key[i] < version || h->key[i] >= end ||
		    h->value[i] < version || h->value[i] >= end)
			return "a header line folded onto the next (obs-fold)";
		if (!gap_clean(at, h->key[i]))
			return "a NUL inside the request head";
		at = h->key[i] + strlen(h->key[i]);
		if (!gap_clean(at, h->value[i]))
			return "a NUL inside a header name";
		at = h->value[i] + strlen(h->value[i]);
	}
	if (!gap_clean(at, end))
		return "a NUL inside a header value";
	return NULL;
}

static bool refuse(struct MHD_Connection *c, const char *why,
		   enum MHD_Result *ret)
{
	*ret = fg_respond_error_close(c, FG_E_BAD_REQUEST, why);
	return false;
}

bool fg_framing_ok_or_respond(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *version,
			      enum MHD_Result *ret)
{
	/* libmicrohttpd ends the target with a NUL where the space before
	 * the version was: a NUL sent inside the target leaves a gap between
	 * what it hands over and the version. */
	if (!req->uri_at || !version || version != req->uri_at + req->uri_len + 1)
		return refuse(c, "the request target holds a NUL or is not followed by a version", ret);
	for (size_t i = 0; i < req->uri_len; i++) {
		unsigned char ch = (unsigned char)req->uri[i];
		if (ch <= 0x20 || ch == 0x7f)
			return refuse(c, "the request target holds a space or a control byte", ret);
	}
	/* the request line as sent: METHOD SP target SP version */
	if (method + strlen(method) + 1 != req->uri_at)
		return refuse(c, "the request line is not METHOD SP target SP version", ret);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (!ci) {
		*ret = MHD_NO;
		return false;
	}
	struct head hd; /* the pointer arrays are filled before they are read */
	struct head *h = &hd;
	h->why = NULL;
	h->cl = h->te = h->host = h->n = 0;
	h->cl_value = h->te_value = NULL;
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, look, h);
	const char *why = h->why ? h->why : hidden_bytes(h, version, method + ci->header_size);
	if (!why && h->cl && h->te)
		why = "Content-Length together with Transfer-Encoding";
	if (!why && (h->te > 1 || (h->te && strcasecmp(h->te_value, "chunked") != 0)))
		why = "the only Transfer-Encoding accepted is chunked";
	/* RFC 9112 6.1: an HTTP/1.0 sender knows no chunked coding, so the
	 * body's end would be read one way here and another way by a 1.0
	 * hop before the gateway */
	if (!why && h->te && strcmp(version, MHD_HTTP_VERSION_1_0) == 0)
		why = "Transfer-Encoding in an HTTP/1.0 request";
	if (!why && h->cl > 1)
		why = "more than one Content-Length";
	if (!why && h->host > 1)
		why = "more than one Host";
	if (!why && h->cl) {
		size_t n = strlen(h->cl_value);
		if (n == 0 || n > CL_DIGITS_MAX || strspn(h->cl_value, "0123456789") != n)
			why = "Content-Length is not a decimal number";
		else
			req->body_length = strtoull(h->cl_value, NULL, 10);
		req->body_length_given = true;
	}
	req->body_chunked = h->te > 0;
	if (why)
		return refuse(c, why, ret);
	req->framed = true;
	return true;
}


struct header_count {
	const char *name;
	unsigned n;
	const char *value;
};

static enum MHD_Result count_one(void *cls, enum MHD_ValueKind kind,
				 const char *key, const char *value)
{
	struct header_count *h = cls;
	(void)kind;
	if (strcasecmp(key, h->name) == 0) {
		h->n++;
		h->value = value;
	}
	return MHD_YES;
}

unsigned fg_header_count(struct MHD_Connection *c, const char *name,
			 const char **last)
{
	struct header_count h = { name, 0, NULL };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_one, &h);
	if (last)
		*last = h.value;
	return h.n;
}
