/*
 * fuzz_destination - the write set of a proxied request
 * (fg_writeset_build) and the Destination header of COPY/MOVE
 * (fg_dest_raw_path), in gateway/base/writeset.c.
 *
 * Input: '\n'-separated fields "METHOD\nTARGET\nDESTINATION\nHOST\nFLAGS";
 * a missing DESTINATION or HOST is an absent header (NULL); FLAGS holds
 * 't' (a Fencing-Token header came) and 'r' (use the route rules below).
 *
 * Properties of fg_dest_raw_path(): it accepts exactly what a reference
 * written here accepts (printable ASCII without '?' and '#'; a path not
 * starting with "//", or an http(s) URL whose authority is the Host, case
 * aside, followed by a path) and then points at that path inside the
 * header.
 *
 * Properties of an accepted write set (FG_E_COUNT):
 *  - at most 2 members, distinct, each a valid lock name; a member is
 *    optional exactly when it is a read;
 *  - ws->path starts with '/', is fg_path_resolve() of the target
 *    without its query and is not the lock API's ("/_fence", "/_fence/...");
 *    write is fg_method_is_write(), or the method is COPY or MOVE (their
 *    Destination is always written);
 *  - a read names no lock, or with a token the path's lock, as a read;
 *  - a write other than COPY names the path's lock as a write, read from
 *    Fencing-Token;
 *  - a COPY that carries a token has a lock for its source;
 *  - COPY/MOVE: has_dest, the Destination's raw path points into the
 *    header, ws->dest is its resolution (and what nginx resolves it to
 *    when nginx would take it), never "/_fence" or under "/_fence/"; the
 *    destination's lock is a write member, read from
 *    Destination-Fencing-Token unless it is the path's lock too;
 *  - COPY/MOVE/DELETE of a collection: the whole subtree is guarded by
 *    the member lock for it (fg_subtree_guarded), on both sides.
 * Refusals: a target not starting with '/' is FG_E_BAD_PATH; a COPY/MOVE
 * whose Destination fg_dest_raw_path() refuses is FG_E_BAD_DESTINATION.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "base/config.h"
#include "base/errors.h"
#include "fencegate/name.h"
#include "fuzz.h"
#include "nginx_uri.h"
#include "base/writeset.h"

static struct fg_config plain, routed;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const routes[] = {
		"/orders/42/ orders/42", "/orders/ orders", "/x/ x", "/x/y/ xy",
		"/same/ s", "/same/in/ s", "/dav/ dav",
	};
	char err[256];
	(void)argc;
	(void)argv;
	fg_config_init(&plain);
	fg_config_init(&routed);
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		PROPERTY(fg_config_set(&routed, "route", routes[i], err, sizeof(err)) == 0);
	return 0;
}

/* Reference for fg_dest_raw_path(): the offset of the path in dest, or -1. */
static long ref_dest(const char *dest, const char *host)
{
	if (!dest)
		return -1;
	for (const char *p = dest; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x21 || c > 0x7e || c == '?' || c == '#')
			return -1;
	}
	if (dest[0] == '/')
		return dest[1] == '/' ? -1 : 0;
	size_t skip;
	if (strncasecmp(dest, "http://", 7) == 0)
		skip = 7;
	else if (strncasecmp(dest, "https://", 8) == 0)
		skip = 8;
	else
		return -1;
	const char *auth = dest + skip, *slash = strchr(auth, '/');
	if (!host || !slash || slash == auth)
		return -1;
	size_t alen = (size_t)(slash - auth);
	if (strlen(host) != alen || strncasecmp(auth, host, alen) != 0)
		return -1;
	return (long)(slash - dest);
}

static void check_dest(const char *dest, const char *host)
{
	const char *p = (const char *)1;
	size_t len = 0;
	int r = fg_dest_raw_path(dest, host, &p, &len);
	long want = ref_dest(dest, host);
	PROPERTY((r == 0) == (want >= 0));
	if (r != 0)
		return;
	PROPERTY(p == dest + want && len == strlen(p) && len >= 1 && p[0] == '/');
}

static int member(const struct fg_writeset *ws, const char *lock)
{
	for (int i = 0; i < ws->n; i++)
		if (strcmp(ws->m[i].lock, lock) == 0)
			return i;
	return -1;
}

static void check_writeset(const struct fg_config *cfg, const char *method,
			   const char *target, const char *dest,
			   const char *host, bool token)
{
	static struct fg_writeset ws;
	static char rp[FG_PATH_MAX], rd[FG_PATH_MAX], ngx[2 * FG_PATH_MAX + 2];
	enum fg_error e = fg_writeset_build(cfg, method, target, dest, host, token, &ws);
	bool copy = strcmp(method, "COPY") == 0, move = strcmp(method, "MOVE") == 0;

	PROPERTY(e == FG_E_COUNT || e == FG_E_BAD_PATH || e == FG_E_BAD_DESTINATION ||
		 e == FG_E_SUBTREE_UNGUARDED || e == FG_E_BAD_LOCK_NAME);
	if (target[0] != '/')
		PROPERTY(e == FG_E_BAD_PATH);
	size_t tlen = strcspn(target, "?"), rplen = 0;
	bool path_ok = target[0] == '/' &&
		       fg_path_resolve(target, tlen, rp, sizeof(rp), &rplen) == FG_PATH_OK;
	if (path_ok && (strncmp(rp, "/_fence/", 8) == 0 || strcmp(rp, "/_fence") == 0))
		path_ok = false; /* the lock API's path is never proxied */
	if (memchr(target, '#', tlen))
		path_ok = false; /* the storage would stop the path there */
	if (!path_ok)
		PROPERTY(e == FG_E_BAD_PATH);
	if (path_ok && (copy || move) &&
	    ref_dest(dest, host) < 0)
		PROPERTY(e == FG_E_BAD_DESTINATION);
	if (e != FG_E_COUNT)
		return;

	/* members */
	PROPERTY(ws.n >= 0 && ws.n <= 2);
	for (int i = 0; i < ws.n; i++) {
		PROPERTY(fg_name_valid(ws.m[i].lock, strlen(ws.m[i].lock)));
		PROPERTY(ws.m[i].header_optional == !ws.m[i].write);
		PROPERTY(ws.m[i].header == FG_WS_FENCING_TOKEN ||
			 ws.m[i].header == FG_WS_DESTINATION_FENCING_TOKEN);
	}
	if (ws.n == 2)
		PROPERTY(strcmp(ws.m[0].lock, ws.m[1].lock) != 0);

	/* the path: never the lock API's, however it was spelled */
	PROPERTY(path_ok && ws.path[0] == '/' && ws.path_len == strlen(ws.path));
	PROPERTY(ws.path_len == rplen && memcmp(ws.path, rp, rplen) == 0);
	PROPERTY(strncmp(ws.path, "/_fence/", 8) != 0 && strcmp(ws.path, "/_fence") != 0);
	PROPERTY(ws.write == (copy || move || fg_method_is_write(cfg, method)));
	char plock[FG_NAME_MAX + 1], dlock[FG_NAME_MAX + 1];
	bool route;
	bool has_plock = fg_lock_for_path(cfg, ws.path, ws.path_len, plock, &route) == 0;

	if (!ws.write) {
		PROPERTY(!ws.has_dest || copy || move);
		PROPERTY(ws.n == (token ? 1 : 0));
		if (token)
			PROPERTY(has_plock && strcmp(ws.m[0].lock, plock) == 0 &&
				 !ws.m[0].write && ws.m[0].header == FG_WS_FENCING_TOKEN);
		return;
	}
	PROPERTY(ws.n >= 1);
	if (!copy) {
		int i = has_plock ? member(&ws, plock) : -1;
		PROPERTY(i >= 0 && ws.m[i].write && ws.m[i].header == FG_WS_FENCING_TOKEN);
	}
	PROPERTY(ws.has_dest == (copy || move));

	bool collection = ws.path[ws.path_len - 1] == '/';
	bool subtree_op = copy || move || strcmp(method, "DELETE") == 0;
	if (subtree_op && collection)
		PROPERTY(has_plock && fg_subtree_guarded(cfg, ws.path, ws.path_len, plock));
	if (!ws.has_dest)
		return;

	/* the Destination */
	PROPERTY(dest != NULL);
	PROPERTY(ws.dest_raw >= dest && ws.dest_raw + ws.dest_raw_len == dest + strlen(dest));
	PROPERTY(ws.dest[0] == '/' && ws.dest_len == strlen(ws.dest));
	PROPERTY(strncmp(ws.dest, "/_fence/", 8) != 0 && strcmp(ws.dest, "/_fence") != 0);
	size_t rdlen = 0;
	PROPERTY(fg_path_resolve(ws.dest_raw, ws.dest_raw_len, rd, sizeof(rd), &rdlen) == FG_PATH_OK);
	PROPERTY(rdlen == ws.dest_len && memcmp(rd, ws.dest, rdlen) == 0);
	size_t nlen = 0;
	if (ngx_ref_applies(ws.dest_raw, ws.dest_raw_len) &&
	    ngx_ref_uri(ws.dest_raw, ws.dest_raw_len, ngx, sizeof(ngx), &nlen) == NGX_REF_OK)
		PROPERTY(nlen == ws.dest_len && memcmp(ngx, ws.dest, nlen) == 0);

	PROPERTY(fg_lock_for_path(cfg, ws.dest, ws.dest_len, dlock, &route) == 0);
	int d = member(&ws, dlock);
	PROPERTY(d >= 0 && ws.m[d].write);
	bool same = has_plock && strcmp(plock, dlock) == 0;
	PROPERTY(ws.m[d].header == (same ? FG_WS_FENCING_TOKEN : FG_WS_DESTINATION_FENCING_TOKEN));
	/* a token that came for a COPY's source is checked against its lock */
	if (copy && token)
		PROPERTY(has_plock);
	if (copy && !same) {
		/* the source is read: fenced when a token came for it */
		int s = has_plock ? member(&ws, plock) : -1;
		if (s >= 0)
			PROPERTY(!ws.m[s].write && token);
		PROPERTY(ws.n == (s >= 0 ? 2 : 1));
	}
	if (collection || ws.dest[ws.dest_len - 1] == '/')
		PROPERTY(fg_subtree_guarded(cfg, ws.dest, ws.dest_len, dlock));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 20000)
		return 0;
	/* split into at most 5 NUL-terminated fields */
	char *buf = malloc(size + 1), *field[5] = { 0 };
	memcpy(buf, data, size);
	buf[size] = '\0';
	int nf = 0;
	char *p = buf;
	while (nf < 5) {
		field[nf++] = p;
		char *nl = memchr(p, '\n', (size_t)(buf + size - p));
		if (!nl)
			break;
		*nl = '\0';
		p = nl + 1;
	}
	const char *method = field[0], *target = nf > 1 ? field[1] : "/";
	const char *dest = nf > 2 ? field[2] : NULL, *host = nf > 3 ? field[3] : NULL;
	const char *flags = nf > 4 ? field[4] : "";
	bool token = strchr(flags, 't') != NULL;
	const struct fg_config *cfg = strchr(flags, 'r') ? &routed : &plain;

	check_dest(dest, host);
	check_writeset(cfg, method, target, dest, host, token);
	free(buf);
	return 0;
}
