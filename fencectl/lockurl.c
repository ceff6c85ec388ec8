/*
 * lockurl.c - lock API URLs (see lockurl.h).
 * Invariant: the path of a lock URL decodes, byte for byte, to the name it
 * was built from; only '/' is left unescaped among the reserved bytes.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockurl.h"

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

int fg_lockurl_escape(const char *name, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		bool keep = *p == '/' || unreserved(*p);
		size_t need = keep ? 1 : 3;
		if (n + need >= cap)
			return -1;
		if (keep) {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	if (n >= cap)
		return -1;
	out[n] = '\0';
	return (int)n;
}

char *fg_lockurl_join(const char *base, const char *path)
{
	size_t blen = strlen(base);

	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	size_t plen = strlen(path);
	char *url = malloc(blen + plen + 1);
	if (!url)
		return NULL;
	memcpy(url, base, blen);
	memcpy(url + blen, path, plen + 1);
	return url;
}

char *fg_lockurl_lock(const char *base, const char *name, const char *query)
{
	size_t cap = strlen(FG_LOCKS_PREFIX) + 3 * strlen(name) +
		     (query ? strlen(query) + 1 : 0) + 1;
	char *path = malloc(cap);
	char *url = NULL;

	if (!path)
		return NULL;
	size_t n = strlen(FG_LOCKS_PREFIX);
	memcpy(path, FG_LOCKS_PREFIX, n);
	/* cap was sized for every byte escaped: this cannot fail */
	int e = fg_lockurl_escape(name, path + n, cap - n);
	if (e < 0)
		goto out;
	n += (size_t)e;
	if (query)
		snprintf(path + n, cap - n, "?%s", query);
	url = fg_lockurl_join(base, path);
out:
	free(path);
	return url;
}
