/*
 * ui.c - the status page under /_fence/v1/ui/: index.html, ui.css, ui.js
 * and icon.svg as built in (base/uiassets.h); the page names its icon so
 * that no browser asks the upstream for /favicon.ico. The page holds no
 * data: every call it makes goes to the lock API with the user's own
 * key, which is where what a principal may see is decided; so the files
 * are open, as openapi.json is (base/apiroute.c).
 *
 * Invariant: every file goes out with the one Content-Security-Policy
 * below, which lets the page load and call nothing but this gateway and
 * run no script or style but its own files; and with an ETag of its
 * bytes, so that a browser revalidates (Cache-Control: no-cache) and a
 * new build's page is taken at once.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/ui.h"
#include "base/uiassets.h"
#include "http/req.h"
#include "http/respond.h"

#define UI_ROOT "/_fence/v1/ui"

static const char CSP[] =
	"default-src 'none'; script-src 'self'; style-src 'self'; "
	"connect-src 'self'; img-src 'self'; base-uri 'none'; "
	"form-action 'none'; frame-ancestors 'none'";

static struct asset {
	const char *path;          /* after UI_ROOT */
	const char *ctype;
	const unsigned char *data;
	const size_t *len;
	char etag[20];             /* "<16 hex>", set once (etags_once) */
} assets[] = {
	{ "/", "text/html; charset=utf-8", fg_ui_html, &fg_ui_html_len, "" },
	{ "/ui.css", "text/css; charset=utf-8", fg_ui_css, &fg_ui_css_len, "" },
	{ "/ui.js", "text/javascript; charset=utf-8", fg_ui_js, &fg_ui_js_len, "" },
	{ "/icon.svg", "image/svg+xml", fg_ui_icon, &fg_ui_icon_len, "" },
};

static pthread_once_t etags_once = PTHREAD_ONCE_INIT;

/* FNV-1a of each file: a validator, not a secret; computed once, by
 * whichever loop serves the page first. */
static void etags_init(void)
{
	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++) {
		uint64_t h = 0xcbf29ce484222325ULL;
		for (size_t j = 0; j < *assets[i].len; j++) {
			h ^= assets[i].data[j];
			h *= 0x100000001b3ULL;
		}
		snprintf(assets[i].etag, sizeof(assets[i].etag), "\"%016" PRIx64 "\"", h);
	}
}

/* If-None-Match names this ETag (or is "*"): the browser has the bytes. */
static bool not_modified(struct MHD_Connection *c, const char *etag)
{
	const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_IF_NONE_MATCH);
	return inm && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL);
}

enum MHD_Result fg_ui_serve(struct fg_req *req, struct MHD_Connection *c)
{
	size_t plen = strcspn(req->uri, "?");
	size_t rlen = sizeof(UI_ROOT) - 1;
	const char *tail = req->uri + rlen;
	size_t tlen = plen - rlen; /* the route table matched UI_ROOT... */
	if (tlen == 0) {
		/* relative, so that the page works under a path prefix of a
		 * reverse proxy too; the query (a prefix to show) is kept */
		char loc[64 + 1024];
		const char *query = req->uri + plen;
		if (strlen(query) > 1024)
			query = "";
		snprintf(loc, sizeof(loc), "ui/%s", query);
		const char *const hdrs[] = {
			MHD_HTTP_HEADER_LOCATION, loc,
			MHD_HTTP_HEADER_CACHE_CONTROL, "no-store", NULL
		};
		return fg_respond_static_with(c, MHD_HTTP_PERMANENT_REDIRECT,
					      NULL, "", 0, hdrs);
	}
	pthread_once(&etags_once, etags_init);
	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++) {
		const struct asset *a = &assets[i];
		if (strlen(a->path) != tlen || memcmp(a->path, tail, tlen) != 0)
			continue;
		const char *const hdrs[] = {
			"Content-Security-Policy", CSP,
			"X-Content-Type-Options", "nosniff",
			"Referrer-Policy", "no-referrer",
			MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache",
			MHD_HTTP_HEADER_ETAG, a->etag, NULL
		};
		if (not_modified(c, a->etag))
			return fg_respond_static_with(c, MHD_HTTP_NOT_MODIFIED,
						      NULL, "", 0, hdrs);
		return fg_respond_static_with(c, MHD_HTTP_OK, a->ctype, a->data,
					      *a->len, hdrs);
	}
	/* ...and one of the paths above: never reached */
	return fg_respond_error(c, FG_E_NOT_FOUND, NULL, NULL);
}
