/*
 * writeset.c - what a proxied request may change, and which lock guards
 * each part of it (contract v1.1, "the write set").
 *
 * Invariant: every path the gateway interprets (the request path, the
 * Destination; a route prefix when the config is read, base/route.c) is
 * resolved once, the way the storage resolves it before acting on it; the
 * lock chosen for a path (by the route rules, base/route.c) is the lock of
 * the object the storage will touch. A request whose write set cannot be
 * covered by the locks it names is refused here, before any token is read.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
#include "base/jsonio.h"
#include "base/route.h"
#include "base/writeset.h"

#define API_PREFIX "/_fence/"

/* The lock API's paths are never the storage's, however they are spelled
 * ("//_fence/", "/x/../_fence/", "/%5Ffence/"). */
static bool under_api(const char *resolved)
{
	return strncmp(resolved, API_PREFIX, sizeof(API_PREFIX) - 1) == 0 ||
	       strcmp(resolved, "/_fence") == 0;
}

int fg_route_lock(const struct fg_config *cfg, const char *path, size_t len,
		  char out[FG_NAME_MAX + 1], const struct fg_route **rule)
{
	return fg_routes_lock(cfg->routes, cfg->nroutes, path, len, out, rule);
}

/* The route rules decide (base/route.c); this is the proxy's view. */
int fg_lock_for_path(const struct fg_config *cfg, const char *path, size_t len,
		     char out[FG_NAME_MAX + 1], bool *route)
{
	const struct fg_route *rule;
	int rc = fg_route_lock(cfg, path, len, out, &rule);
	if (route)
		*route = rule != NULL;
	return rc;
}

enum fg_error fg_route_decide(const struct fg_config *cfg, const char *raw,
			      size_t len, char out[FG_NAME_MAX + 1],
			      const struct fg_route **rule)
{
	char path[FG_PATH_MAX];
	size_t plen;
	*rule = NULL;
	/* (S3 mode: fg_s3_route_decide(), base/s3ops.c, decides instead) */
	if (len == 0 || raw[0] != '/' || memchr(raw, '?', len) ||
	    memchr(raw, '#', len) ||
	    fg_path_resolve(raw, len, path, sizeof(path), &plen) ||
	    under_api(path))
		return FG_E_BAD_PATH;
	if (fg_route_lock(cfg, path, plen, out, rule))
		return FG_E_BAD_LOCK_NAME;
	return FG_E_COUNT;
}

int fg_fence_lock_for(const struct fg_config *cfg, const char *raw_path,
		      size_t len, char out[FG_NAME_MAX + 1])
{
	char path[FG_PATH_MAX];
	size_t plen;
	if (fg_path_resolve(raw_path, len, path, sizeof(path), &plen))
		return -1;
	return fg_lock_for_path(cfg, path, plen, out, NULL);
}

bool fg_subtree_guarded(const struct fg_config *cfg, const char *path,
			size_t len, const char *lock)
{
	return fg_routes_subtree_guarded(cfg->routes, cfg->nroutes, path, len, lock);
}

int fg_dest_raw_path(const char *dest, const char *host, const char **path,
		     size_t *len)
{
	if (!dest)
		return -1;
	for (const char *p = dest; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f ||
		    *p == '?' || *p == '#')
			return -1;
	const char *p = dest;
	if (p[0] != '/') {
		if (strncasecmp(p, "http://", 7) == 0)
			p += 7;
		else if (strncasecmp(p, "https://", 8) == 0)
			p += 8;
		else
			return -1;
		size_t alen = strcspn(p, "/");
		/* the authority must be this gateway, as the client named it */
		if (!host || alen == 0 || strlen(host) != alen ||
		    strncasecmp(p, host, alen) != 0 || p[alen] != '/')
			return -1;
		p += alen;
	} else if (p[1] == '/') {
		return -1; /* "//host/..." is a network-path reference */
	}
	*path = p;
	*len = strlen(p);
	return 0;
}

static bool listed(const char *list, const char *method)
{
	size_t m = strlen(method);
	for (const char *p = list; *p;) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (n == m && n > 0 && memcmp(p, method, n) == 0)
			return true;
		p += n;
	}
	return false;
}

/* Fail safe: a method that is neither a configured write nor a configured
 * read (LOCK, a lowercase "put", anything new) is fenced like a write. */
bool fg_method_is_write(const struct fg_config *cfg, const char *method)
{
	if (listed(cfg->write_methods ? cfg->write_methods : FG_DEFAULT_WRITE_METHODS,
		   method))
		return true;
	return !listed(cfg->read_methods ? cfg->read_methods : FG_DEFAULT_READ_METHODS,
		       method);
}

static bool is_collection(const char *path, size_t len)
{
	return len > 0 && path[len - 1] == '/';
}

bool fg_ws_add_member(struct fg_writeset *ws, const char *lock, bool write,
		      enum fg_ws_header header)
{
	for (int i = 0; i < ws->n; i++) {
		if (strcmp(ws->m[i].lock, lock) == 0) {
			/* one lock, one sequencer: a write wins over a read,
			 * and Fencing-Token serves both paths */
			ws->m[i].write = ws->m[i].write || write;
			ws->m[i].header_optional = !ws->m[i].write;
			if (header == FG_WS_FENCING_TOKEN)
				ws->m[i].header = header;
			return true;
		}
	}
	if (ws->n == FG_WS_MAX)
		return false;
	struct fg_ws_member *m = &ws->m[ws->n++];
	fg_copy(m->lock, sizeof(m->lock), lock);
	m->write = write;
	m->header = header;
	m->header_optional = !write;
	return true;
}

/* Would `lock` guard the subtree under the object path `path`, were the
 * storage to take it for a collection? */
static bool guarded_as_collection(const struct fg_config *cfg,
				  const char *path, size_t len,
				  const char *lock)
{
	char dir[FG_PATH_MAX + 1];
	if (len + 1 >= sizeof(dir))
		return false;
	memcpy(dir, path, len);
	dir[len] = '/';
	dir[len + 1] = '\0';
	return fg_subtree_guarded(cfg, dir, len + 1, lock);
}

enum fg_error fg_writeset_build(const struct fg_config *cfg, const char *method,
				const char *target, const char *destination,
				const char *host, bool has_token,
				struct fg_writeset *ws)
{
	/* every field but the two path buffers (written before they are read) */
	ws->write = ws->has_dest = false;
	ws->path_len = ws->dest_len = ws->dest_raw_len = 0;
	ws->dest_raw = NULL;
	ws->n = 0;
	ws->shallow = ws->probe_path = ws->probe_dest = false;
	size_t plen = strcspn(target, "?");
	/* the storage stops a path at '#': what it would see is not what is
	 * resolved here */
	if (target[0] != '/' || memchr(target, '#', plen) ||
	    fg_path_resolve(target, plen, ws->path, sizeof(ws->path), &ws->path_len) ||
	    under_api(ws->path))
		return FG_E_BAD_PATH;
	bool copy = strcmp(method, "COPY") == 0, move = strcmp(method, "MOVE") == 0;
	/* a Destination is always written, whatever the method lists say */
	ws->write = copy || move || fg_method_is_write(cfg, method);
	/* (a LOCK of a collection locks all of it, RFC 4918 9.10.3: its
	 * members' holders would find their objects locked, 423) */
	bool subtree_op = copy || move || strcmp(method, "DELETE") == 0 ||
			  strcmp(method, "LOCK") == 0;

	if (copy || move) {
		const char *raw;
		size_t rlen;
		if (fg_dest_raw_path(destination, host, &raw, &rlen) ||
		    fg_path_resolve(raw, rlen, ws->dest, sizeof(ws->dest),
				    &ws->dest_len) ||
		    under_api(ws->dest))
			return FG_E_BAD_DESTINATION;
		ws->has_dest = true;
		ws->dest_raw = raw;
		ws->dest_raw_len = rlen;
	}

	char lock[FG_NAME_MAX + 1], dlock[FG_NAME_MAX + 1];
	bool path_lock = fg_lock_for_path(cfg, ws->path, ws->path_len, lock, NULL) == 0;
	bool dest_lock = ws->has_dest &&
			 fg_lock_for_path(cfg, ws->dest, ws->dest_len, dlock, NULL) == 0;

	/* The subtree rule: a collection is changed whole, so one lock must
	 * guard all of it, on both sides. */
	if (ws->write && subtree_op) {
		/* "both sides": COPY only reads its source, but the subtree
		 * it copies must still be one lock's */
		if (is_collection(ws->path, ws->path_len) &&
		    !(path_lock && fg_subtree_guarded(cfg, ws->path, ws->path_len, lock)))
			return FG_E_SUBTREE_UNGUARDED;
		if (ws->has_dest && (is_collection(ws->dest, ws->dest_len) ||
				     is_collection(ws->path, ws->path_len)) &&
		    !(dest_lock && fg_subtree_guarded(cfg, ws->dest, ws->dest_len, dlock)))
			return FG_E_SUBTREE_UNGUARDED;
	}

	/* A path without its '/' is an object here; one lock guarding the
	 * subtree it would be, if the storage takes it for a collection,
	 * makes that safe too (a route rule covering it) */
	ws->shallow = ws->probe_path = ws->probe_dest = false;
	if (ws->write && subtree_op) {
		bool one = !is_collection(ws->path, ws->path_len) &&
			   !(path_lock && guarded_as_collection(cfg, ws->path,
								ws->path_len, lock));
		ws->shallow = one && !move;
		ws->probe_path = one && move;
		ws->probe_dest = ws->has_dest &&
				 !is_collection(ws->dest, ws->dest_len) &&
				 !(dest_lock && guarded_as_collection(cfg, ws->dest,
								      ws->dest_len, dlock));
	}

	if (!ws->write) {
		/* a read: fenced only when it carries a token */
		if (has_token) {
			if (!path_lock)
				return FG_E_BAD_LOCK_NAME;
			(void)fg_ws_add_member(ws, lock, false, FG_WS_FENCING_TOKEN);
		}
		return FG_E_COUNT;
	}
	if (copy) {
		/* a token for the source is checked, or the request refused */
		if (!dest_lock || (has_token && !path_lock))
			return FG_E_BAD_LOCK_NAME;
		/* the source is only read: fenced if a token came for it */
		if (has_token && path_lock && strcmp(lock, dlock) != 0)
			(void)fg_ws_add_member(ws, lock, false, FG_WS_FENCING_TOKEN);
		(void)fg_ws_add_member(ws, dlock, true,
			   path_lock && strcmp(lock, dlock) == 0
				   ? FG_WS_FENCING_TOKEN
				   : FG_WS_DESTINATION_FENCING_TOKEN);
		return FG_E_COUNT;
	}
	if (!path_lock)
		return FG_E_BAD_LOCK_NAME;
	(void)fg_ws_add_member(ws, lock, true, FG_WS_FENCING_TOKEN);
	if (move) {
		if (!dest_lock)
			return FG_E_BAD_LOCK_NAME;
		(void)fg_ws_add_member(ws, dlock, true, FG_WS_DESTINATION_FENCING_TOKEN);
	}
	return FG_E_COUNT;
}
