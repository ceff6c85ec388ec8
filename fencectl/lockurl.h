/*
 * lockurl.h - the URLs of the lock API, built from a gateway URL and a
 * lock name.
 *
 * A lock name may contain '/', which separates segments and is written as
 * is; every byte of a segment other than the unreserved characters of RFC
 * 3986 (A-Z a-z 0-9 - . _ ~) is percent-encoded. A name the gateway would
 * refuse (a space, '?', '#', '%') therefore reaches it as that name, in the
 * path, and is refused by the gateway as a bad lock name, instead of
 * silently becoming a query, a fragment or another name.
 */
#ifndef FENCECTL_LOCKURL_H
#define FENCECTL_LOCKURL_H

#include <stddef.h>

#define FG_LOCKS_PREFIX "/_fence/v1/locks/"

/**
 * Percent-encodes name segment by segment into out[cap] (NUL-terminated).
 * Returns the length written, or -1 when it does not fit.
 */
int fg_lockurl_escape(const char *name, char *out, size_t cap);

/**
 * The gateway URL with any trailing '/' dropped, followed by path (which
 * starts with '/'). NULL when out of memory. Caller frees.
 */
char *fg_lockurl_join(const char *base, const char *path);

/**
 * base + FG_LOCKS_PREFIX + the escaped name, and "?query" when query is
 * not NULL. NULL when out of memory. Caller frees.
 */
char *fg_lockurl_lock(const char *base, const char *name, const char *query);

#endif
