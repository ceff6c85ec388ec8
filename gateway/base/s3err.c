/*
 * s3err.c - S3's XML error body and the S3 code of every refusal
 * (contract v1.4, "Refusals speak S3").
 *
 * Invariant: the S3 table has one entry for every enum fg_error, whose
 * status and message are fg_errors[]'s own (read from it, never copied),
 * so the two answers of one refusal never disagree; a body is written into
 * the caller's buffer or not at all.
 */
#include <stdio.h>
#include <string.h>

#include "base/s3err.h"

/* The S3 code of each fencegate error: "Fence" + CamelCase of its JSON
 * code, but for lock_store_unavailable (the contract's name). */
static const char *const fence_codes[FG_E_COUNT] = {
	[FG_E_BAD_LOCK_NAME] = "FenceBadLockName",
	[FG_E_BAD_REQUEST] = "FenceBadRequest",
	[FG_E_PAYLOAD_TOO_LARGE] = "FencePayloadTooLarge",
	[FG_E_NOT_FOUND] = "FenceNotFound",
	[FG_E_METHOD_NOT_ALLOWED] = "FenceMethodNotAllowed",
	[FG_E_LOCK_HELD] = "FenceLockHeld",
	[FG_E_LEASE_EXPIRED] = "FenceLeaseExpired",
	[FG_E_TOO_MANY_WAITERS] = "FenceTooManyWaiters",
	[FG_E_TOKEN_REQUIRED] = "FenceTokenRequired",
	[FG_E_MALFORMED_TOKEN] = "FenceMalformedToken",
	[FG_E_FORGED_TOKEN] = "FenceForgedToken",
	[FG_E_WRONG_LOCK] = "FenceWrongLock",
	[FG_E_WRONG_MODE] = "FenceWrongMode",
	[FG_E_STALE_TOKEN] = "FenceStaleToken",
	[FG_E_BAD_PATH] = "FenceBadPath",
	[FG_E_BAD_DESTINATION] = "FenceBadDestination",
	[FG_E_SUBTREE_UNGUARDED] = "FenceSubtreeUnguarded",
	[FG_E_LOCK_STORE_UNAVAILABLE] = "FenceStoreUnavailable",
	[FG_E_UPSTREAM_UNAVAILABLE] = "FenceUpstreamUnavailable",
	[FG_E_UPSTREAM_TIMEOUT] = "FenceUpstreamTimeout",
	[FG_E_INTERNAL] = "FenceInternal",
	[FG_E_UNAUTHENTICATED] = "FenceUnauthenticated",
	[FG_E_FORBIDDEN] = "FenceForbidden",
	[FG_E_TOO_MANY_FAILURES] = "FenceTooManyFailures",
	[FG_E_SHUTTING_DOWN] = "FenceShuttingDown",
	[FG_E_NOT_READY] = "FenceNotReady",
};

static const struct fg_s3_errdef native_defs[FG_S3N_COUNT] = {
	[FG_S3N_ACCESS_DENIED] = { 403, "AccessDenied", "Access Denied", false },
	[FG_S3N_INVALID_ACCESS_KEY_ID] = { 403, "InvalidAccessKeyId",
		"The AWS Access Key Id you provided does not exist in our records.", false },
	[FG_S3N_SIGNATURE_DOES_NOT_MATCH] = { 403, "SignatureDoesNotMatch",
		"The request signature we calculated does not match the signature you provided.", false },
	[FG_S3N_REQUEST_TIME_TOO_SKEWED] = { 403, "RequestTimeTooSkewed",
		"The difference between the request time and the current time is too large.", false },
	[FG_S3N_AUTH_QUERY_PARAMETERS_ERROR] = { 400, "AuthorizationQueryParametersError",
		"The presigned query parameters are not valid.", false },
	[FG_S3N_AUTH_HEADER_MALFORMED] = { 400, "AuthorizationHeaderMalformed",
		"The authorization header is malformed.", false },
	[FG_S3N_INVALID_REQUEST] = { 400, "InvalidRequest",
		"Please use AWS4-HMAC-SHA256.", false },
	[FG_S3N_MALFORMED_XML] = { 400, "MalformedXML",
		"The XML you provided was not well-formed or did not validate against our published schema.", false },
};

struct fg_s3_errdef fg_s3_fence_error(enum fg_error e)
{
	if ((unsigned)e >= FG_E_COUNT)
		e = FG_E_INTERNAL;
	return (struct fg_s3_errdef){
		.status = fg_errors[e].status,
		.code = fence_codes[e],
		.message = fg_errors[e].message,
		.retry_after = fg_errors[e].status == 503 ||
			       e == FG_E_TOO_MANY_FAILURES,
	};
}

struct fg_s3_errdef fg_s3_native_error(enum fg_s3_native n)
{
	if ((unsigned)n >= FG_S3N_COUNT)
		return fg_s3_fence_error(FG_E_INTERNAL);
	return native_defs[n];
}

/* ---- the body -------------------------------------------------------- */

struct out {
	char *buf;
	size_t cap, len;
	bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->full || n >= o->cap - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s[0..n) that XML can carry
 * (RFC 3629: no overlong form, no surrogate, at most U+10FFFF; XML 1.0:
 * not U+FFFE or U+FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp, min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2; cp = c & 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3; cp = c & 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4; cp = c & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp == 0xfffe || cp == 0xffff)
		return 0;
	return len;
}

/* s escaped as XML text, cut at max bytes (never inside a character). */
static void put_text(struct out *o, const char *s, size_t max)
{
	if (!s)
		return;
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;
	size_t limit = n < max ? n : max;
	while (i < limit) {
		unsigned char c = p[i];
		switch (c) {
		case '&': puts_(o, "&amp;"); i++; continue;
		case '<': puts_(o, "&lt;"); i++; continue;
		case '>': puts_(o, "&gt;"); i++; continue;
		case '"': puts_(o, "&quot;"); i++; continue;
		case '\'': puts_(o, "&apos;"); i++; continue;
		case '\r': puts_(o, "&#13;"); i++; continue;
		case '\t': case '\n': put(o, (const char *)&p[i], 1); i++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			/* XML 1.0 cannot carry it, not even as a reference
			 * (DEL can, but nobody wants it in a message) */
			puts_(o, "\xef\xbf\xbd");
			i++;
			continue;
		}
		size_t len = utf8_len(p + i, n - i);
		if (len == 0) {
			puts_(o, "\xef\xbf\xbd");
			i++;
			continue;
		}
		if (i + len > limit)
			break; /* the cut falls inside this character */
		put(o, (const char *)p + i, len);
		i += len;
	}
}

static void put_element(struct out *o, const char *name, const char *text,
			size_t max)
{
	char tag[32];
	snprintf(tag, sizeof(tag), "<%s>", name);
	puts_(o, tag);
	put_text(o, text, max);
	snprintf(tag, sizeof(tag), "</%s>", name);
	puts_(o, tag);
}

int fg_s3_error_body(char *out, size_t cap, const char *code,
		     const char *message, const char *resource,
		     const char *request_id, const struct fg_s3_stale *stale)
{
	if (!out || cap == 0)
		return -1;
	struct out o = { out, cap, 0, false };
	puts_(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>");
	put_element(&o, "Code", code, FG_S3_CODE_MAX);
	put_element(&o, "Message", message, FG_S3_MESSAGE_MAX);
	put_element(&o, "Resource", resource, FG_S3_RESOURCE_MAX);
	put_element(&o, "RequestId", request_id, FG_S3_REQUEST_ID_MAX);
	if (stale) {
		char num[64];
		snprintf(num, sizeof(num), "<Token>%llu</Token>",
			 (unsigned long long)stale->token);
		puts_(&o, num);
		if (stale->has_current) {
			snprintf(num, sizeof(num), "<CurrentToken>%llu</CurrentToken>",
				 (unsigned long long)stale->current);
			puts_(&o, num);
		} else {
			puts_(&o, "<CurrentToken/>");
		}
	}
	puts_(&o, "</Error>");
	if (o.full) {
		out[0] = '\0';
		return -1;
	}
	out[o.len] = '\0';
	return (int)o.len;
}
