/*
 * redirect.h - the upstream's own address in what crosses the gateway: the
 * Destination it is sent, and the Location and Content-Location it
 * answers. Private to the gateway.
 */
#ifndef FENCEGATE_REDIRECT_H
#define FENCEGATE_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>

/**
 * The upstream is named by `base`, its URL without a trailing '/'
 * ("scheme://[userinfo@]authority[/path]"), and `base_path`, that path
 * ("" or "/..."), as the config holds them.
 *
 * Writes the Destination the upstream is sent for a checked destination
 * path (`path`, `len` bytes, starting with '/'): the upstream's absolute
 * URI, scheme://host[:port]/base/path, never its userinfo. 0, or -1 when
 * it does not fit in cap.
 */
int fg_redirect_destination(const char *base, const char *base_path,
			    const char *path, size_t len, char *out, size_t cap);

/**
 * A Location or Content-Location value from the upstream, as the client
 * gets it: one that names the upstream (its base URL, the base path
 * included, at a path boundary; or, with a base path, a path under it)
 * names the gateway instead, at client_scheme://client_host (the address
 * the client used; a path alone when client_host is NULL). One that names
 * the upstream's authority outside its base path sets *drop: the header
 * is not relayed, so that no client is pointed past the fence. Returns a
 * new string the caller frees, or NULL when the value passes unchanged
 * (or is dropped, or memory ran out: then it passes unchanged too).
 */
char *fg_redirect_answer(const char *base, const char *base_path,
			 const char *value,
			 const char *client_scheme, const char *client_host,
			 bool *drop);

#endif
