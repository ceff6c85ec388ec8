/*
 * path.c - resolving a raw request path the way the storage does before it
 * acts on it (RFC 3986 5.2.4 after percent-decoding), with no I/O.
 */
#include <string.h>

#include "base/jsonio.h"
#include "base/path.h"

/*
 * One path, one object: repeated slashes merge (nginx's merge_slashes) and
 * "." and ".." segments go (RFC 3986 5.2.4), so "//orders/42" and
 * "/orders/x/../42" meet the same route and lock as "/orders/42". The
 * buffer has room for one more byte than n (a missing leading '/').
 */
static enum fg_path_status normalize(char *path, size_t *len)
{
	size_t n = *len, w = 0, r = 0;
	if (n == 0)
		return FG_PATH_BAD;
	if (path[0] != '/') {
		memmove(path + 1, path, n + 1);
		path[0] = '/';
		n++;
	}
	while (r < n) {
		/* path[r] == '/': take one segment */
		size_t s = r + 1;
		while (s < n && path[s] == '/')
			s++;
		size_t e = s;
		while (e < n && path[e] != '/')
			e++;
		size_t seg = e - s;
		bool last = e >= n;
		if (seg == 1 && path[s] == '.') {
			if (last)
				path[w++] = '/';
		} else if (seg == 2 && path[s] == '.' && path[s + 1] == '.') {
			if (w == 0)
				return FG_PATH_CLIMBS;
			while (w > 0 && path[w - 1] != '/')
				w--;
			if (w > 0)
				w--; /* drop the '/' too */
			if (last)
				path[w++] = '/';
		} else {
			path[w++] = '/';
			memmove(path + w, path + s, seg);
			w += seg;
		}
		r = e;
	}
	if (w == 0)
		path[w++] = '/';
	path[w] = '\0';
	*len = w;
	return FG_PATH_OK;
}

enum fg_path_status fg_path_resolve(const char *raw, size_t len, char *out,
				    size_t cap, size_t *out_len)
{
	size_t n;
	if (cap < 3 || fg_pct_decode(raw, len, out, cap - 1, &n))
		return FG_PATH_BAD;
	/* The storage acts on bytes; a control byte (decoded or not) is no
	 * part of a name any storage agrees on. */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			return FG_PATH_BAD;
	enum fg_path_status s = normalize(out, &n);
	if (s == FG_PATH_OK)
		*out_len = n;
	return s;
}
