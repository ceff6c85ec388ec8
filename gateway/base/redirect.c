/*
 * redirect.c - the upstream's own address in what crosses the gateway.
 * A Destination goes upstream as the upstream's absolute URI (RFC 4918
 * section 10.3; Apache mod_dav takes no other form), and a Location or
 * Content-Location that names the upstream comes back naming the gateway,
 * as nginx's `proxy_redirect default` does, so that no client is pointed
 * past the fence.
 *
 * Invariant: only a value that starts with the upstream's base URL (scheme
 * and authority compared without case, the base path exactly) at a path
 * boundary, or with a base path a path under it, is rewritten; one that
 * names the upstream's authority anywhere else (outside its base path)
 * is dropped, since no address of the gateway reaches it; every other
 * value passes byte for byte. The upstream's userinfo never leaves.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/redirect.h"

/* The end of "scheme://[userinfo@]authority" in base, and where its
 * authority starts (after any userinfo). */
static size_t authority(const char *base, size_t *auth_start)
{
	const char *p = strstr(base, "://");
	size_t s = p ? (size_t)(p - base) + 3 : 0;
	size_t e = s + strcspn(base + s, "/?#");
	const char *at = memchr(base + s, '@', e - s);
	*auth_start = at ? (size_t)(at - base) + 1 : s;
	return e;
}

int fg_redirect_destination(const char *base, const char *base_path,
			    const char *path, size_t len, char *out, size_t cap)
{
	size_t as, ae = authority(base, &as);
	size_t sl = (size_t)(strstr(base, "://") - base) + 3;
	int n = snprintf(out, cap, "%.*s%.*s%s%.*s", (int)sl, base,
			 (int)(ae - as), base + as, base_path,
			 (int)len, path);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int boundary(char c)
{
	return c == '\0' || c == '/' || c == '?' || c == '#';
}

char *fg_redirect_answer(const char *base, const char *base_path,
			 const char *v, const char *client_scheme,
			 const char *client_host, bool *drop)
{
	const char *rest = NULL;
	size_t bp = strlen(base_path);
	size_t as, ae = authority(base, &as);
	size_t sl = (size_t)(strstr(base, "://") - base) + 3;
	const char *scheme = client_scheme;
	*drop = false;
	/* scheme:// (or a network-path reference's //) and the authority,
	 * without case; userinfo left out */
	const char *after = NULL;
	if (strncasecmp(v, base, sl) == 0)
		after = v + sl;
	else if (v[0] == '/' && v[1] == '/')
		after = v + 2, scheme = NULL;
	if (after && strncasecmp(after, base + as, ae - as) == 0 &&
	    boundary(after[ae - as])) {
		const char *p = after + (ae - as);
		if (strncmp(p, base_path, bp) == 0 && boundary(p[bp])) {
			rest = p + bp;
		} else {
			/* the storage's own address, outside what the
			 * gateway forwards to: nowhere to point instead */
			*drop = true;
			return NULL;
		}
	} else if (bp && v[0] == '/' && v[1] != '/' &&
		   strncmp(v, base_path, bp) == 0 && boundary(v[bp])) {
		/* a path on the upstream, under its base: the same path seen
		 * through the gateway, which has no base */
		rest = v + bp;
		client_host = NULL;
	}
	if (!rest)
		return NULL;
	const char *sep = *rest == '/' ? "" : "/";
	size_t n = strlen(rest) + 16 + (client_host ? strlen(client_host) +
					 strlen(client_scheme) : 0);
	char *out = malloc(n);
	if (!out)
		return NULL;
	if (client_host && scheme)
		snprintf(out, n, "%s://%s%s%s", scheme, client_host, sep, rest);
	else if (client_host)
		snprintf(out, n, "//%s%s%s", client_host, sep, rest);
	else
		snprintf(out, n, "%s%s", sep, rest);
	return out;
}
