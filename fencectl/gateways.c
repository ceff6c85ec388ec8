/*
 * gateways.c - the gateway list (see gateways.h).
 * Invariant: a list that fails to grow is left as it was, and a URL is
 * never shown with the user or password it may carry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateways.h"

int fg_gateways_add(struct fg_gateways *gw, const char *what,
		    const char *list, char *msg, size_t msglen)
{
	size_t n0 = gw->n;
	const char *p = list;

	for (;;) {
		size_t len = strcspn(p, ",");
		if (len == 0) {
			snprintf(msg, msglen, "%s: an empty gateway URL in "
				 "'%s'", what, list);
			goto error;
		}
		if (gw->n == FG_GATEWAYS_MAX) {
			snprintf(msg, msglen, "%s: more than %d gateways", what,
				 FG_GATEWAYS_MAX);
			goto error;
		}
		char *u = strndup(p, len);
		if (!u) {
			snprintf(msg, msglen, "out of memory");
			goto error;
		}
		gw->url[gw->n++] = u;
		if (!p[len])
			return 0;
		p += len + 1;
	}
error:
	while (gw->n > n0)
		free(gw->url[--gw->n]);
	return -1;
}

void fg_gateways_clear(struct fg_gateways *gw)
{
	for (size_t i = 0; i < gw->n; i++)
		free(gw->url[i]);
	memset(gw, 0, sizeof(*gw));
}

const char *fg_gateways_shown(const char *url, char *buf, size_t len)
{
	const char *auth = strstr(url, "://");
	const char *end, *at;

	if (!auth) {
		snprintf(buf, len, "%s", url);
		return buf;
	}
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	/* the last '@' of the authority ends the userinfo */
	at = NULL;
	for (const char *q = auth; q < end; q++)
		if (*q == '@')
			at = q;
	if (!at)
		snprintf(buf, len, "%s", url);
	else
		snprintf(buf, len, "%.*s%s", (int)(auth - url), url, at + 1);
	return buf;
}
