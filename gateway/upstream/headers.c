/*
 * headers.c - the header policy of a proxied request (headers.h): pure
 * functions over names and values, so that what crosses the gateway is
 * decided in one place and tested without a connection.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "upstream/headers.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

bool fg_hdr_hop_by_hop(const char *name, size_t len)
{
	static const char *const names[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
		"Proxy-Authorization", "Content-Length",
	};
	for (size_t i = 0; i < NELEM(names); i++)
		if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0)
			return true;
	return false;
}

bool fg_hdr_in_connection(const char *connection, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = connection; p && *p;) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		size_t n = strcspn(p, ", \t");
		if (n == nl && strncasecmp(p, name, n) == 0)
			return true;
		p += n;
	}
	return false;
}

bool fg_hdr_gateway_owned(const char *name)
{
	static const char *const names[] = {
		"Host", "Expect", "Fencing-Token", "Destination-Fencing-Token",
		"Fence-Lease", "X-Forwarded-Proto", "X-Forwarded-Host",
		"Forwarded", "Destination", "Fence-Authorization",
	};
	for (size_t i = 0; i < NELEM(names); i++)
		if (strcasecmp(name, names[i]) == 0)
			return true;
	return false;
}

bool fg_hdr_is_xff(const char *name)
{
	return strcasecmp(name, "X-Forwarded-For") == 0;
}

bool fg_hdr_pass(const char *name, const char *connection, unsigned flags)
{
	bool probe = flags & FG_HDR_PROBE;
	if (fg_hdr_is_xff(name) || fg_hdr_hop_by_hop(name, strlen(name)) ||
	    fg_hdr_gateway_owned(name) || fg_hdr_in_connection(connection, name))
		return false;
	/* the gateway's own "Depth: 0" replaces the client's */
	if ((flags & (FG_HDR_SHALLOW | FG_HDR_PROBE)) && strcasecmp(name, "Depth") == 0)
		return false;
	/* a probe has a body of its own, writes nothing, and its answer is
	 * read as sent: no coding, no charset the client chose (the gateway
	 * asks for identity itself) */
	if (probe && (strncasecmp(name, "Content-", 8) == 0 ||
		      strcasecmp(name, "Overwrite") == 0 ||
		      strcasecmp(name, "Accept-Encoding") == 0 ||
		      strcasecmp(name, "Accept-Charset") == 0))
		return false;
	return true;
}

bool fg_hdr_in_signed(const char *list, const char *name, size_t len)
{
	for (const char *p = list; p && *p;) {
		size_t n = strcspn(p, ";");
		if (n == len && strncasecmp(p, name, n) == 0)
			return true;
		p += n;
		if (*p == ';')
			p++;
	}
	return false;
}

bool fg_hdr_s3_pass(const char *name, const char *connection,
		    const char *signed_list)
{
	static const char *const own[] = {
		"Authorization", "X-Amz-Date", "X-Amz-Security-Token",
		"X-Amz-Content-Sha256",
	};
	for (size_t i = 0; i < NELEM(own); i++)
		if (strcasecmp(name, own[i]) == 0)
			return false;
	return fg_hdr_in_signed(signed_list, name, strlen(name)) &&
	       fg_hdr_pass(name, connection, 0);
}

int fg_hdr_xff_join(char *buf, size_t cap, size_t *len, const char *value)
{
	if (*len >= cap)
		return -1;
	int n = snprintf(buf + *len, cap - *len, "%s%s", *len ? ", " : "", value);
	if (n < 0 || (size_t)n >= cap - *len) {
		buf[*len] = '\0';
		return -1;
	}
	*len += (size_t)n;
	return 0;
}

/* Emits the line A B C D (C and D may be ""), when it fits the bound:
 * put together with copies, as printf() costs more than the rest of a
 * header's way. */
static bool line(bool (*emit)(void *, const char *), void *arg,
		 const char *a, const char *b, const char *c, const char *d)
{
	char buf[FG_HDR_LINE_MAX];
	const char *part[4] = { a, b, c, d };
	size_t n = 0;
	for (int i = 0; i < 4; i++) {
		size_t l = strlen(part[i]);
		if (l >= sizeof(buf) - n)
			return false;
		memcpy(buf + n, part[i], l);
		n += l;
	}
	buf[n] = '\0';
	return emit(arg, buf);
}

bool fg_hdr_add(const struct fg_hdr_forward *f,
		bool (*emit)(void *arg, const char *line), void *arg)
{
	bool xff = f->xff && f->xff[0];
	/* the fixed lines go as they are: no formatting on every request */
	return (xff ? line(emit, arg, "X-Forwarded-For: ", f->xff, ", ", f->client_ip)
		    : line(emit, arg, "X-Forwarded-For: ", f->client_ip, "", "")) &&
	       emit(arg, f->tls ? "X-Forwarded-Proto: https" : "X-Forwarded-Proto: http") &&
	       (!f->host || line(emit, arg, "X-Forwarded-Host: ", f->host, "", "")) &&
	       emit(arg, "Via: 1.1 fencegate") &&
	       emit(arg, "Expect:") &&
	       (!(f->flags & (FG_HDR_SHALLOW | FG_HDR_PROBE)) ||
		emit(arg, "Depth: 0")) &&
	       (f->has_accept || emit(arg, "Accept:"));
}
