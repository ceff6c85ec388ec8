/*
 * path.h - a request path resolved as the storage resolves it. Private to
 * the gateway; pure.
 *
 * Invariant: every path the gateway interprets (the request path, the
 * Destination, a route prefix) goes through fg_path_resolve(), once, so
 * the gateway and the storage agree on which object a path names.
 */
#ifndef FENCEGATE_PATH_H
#define FENCEGATE_PATH_H

#include <stddef.h>

/* The longest request path (and Destination path) the gateway proxies. */
#define FG_PATH_MAX 4096

enum fg_path_status {
	FG_PATH_OK = 0,
	FG_PATH_BAD = -1,    /* bad escape, a NUL or control byte, too long */
	FG_PATH_CLIMBS = -2, /* a ".." above the root */
};

/**
 * Resolves a raw request path (percent-encoded, without the query) as the
 * storage will before it acts on it: percent-decoded, repeated slashes
 * merged, "." and ".." segments removed (RFC 3986 5.2.4). A trailing '/'
 * is kept. out (cap bytes, NUL-terminated) gets the resolved path, which
 * always starts with '/'.
 */
enum fg_path_status fg_path_resolve(const char *raw, size_t len, char *out,
				    size_t cap, size_t *out_len);

#endif
