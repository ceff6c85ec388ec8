/*
 * route.c - route rules compiled into templates (route.h, contract v1.4
 * "Route templates").
 *
 * Invariant: a rule's parts are checked once, here, when the config is
 * read: every capture of a prefix is a whole segment, every capture a
 * lock uses is one of its prefix's, and the lock with "x" for each
 * capture is a valid lock name. Matching then only compares bytes: a
 * literal part byte for byte, a capture up to the next '/'; no path is
 * decoded, resolved or copied, and nothing is allocated per request.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/path.h"
#include "base/route.h"

/* Where each capture of a match lies in the path. */
struct span {
	size_t off, len;
};

static void say(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	if (!n)
		return;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

static bool name_byte(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '_';
}

static size_t count_braces(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += s[i] == '{' || s[i] == '}';
	return k;
}

/* A capture's name at s[0..] (just after '{'): its length when it is one
 * and a '}' closes it, else 0. */
static size_t cap_name(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && i <= FG_ROUTE_CAPNAME_MAX && name_byte(s[i]))
		i++;
	if (i == 0 || i > FG_ROUTE_CAPNAME_MAX || i >= n || s[i] != '}')
		return 0;
	return i;
}

static bool add_part(struct fg_route_part *parts, unsigned *np, size_t off,
		     size_t len, int cap)
{
	if (*np >= FG_ROUTE_PARTS_MAX)
		return false;
	parts[*np] = (struct fg_route_part){ .off = (uint16_t)off,
					     .len = (uint16_t)len,
					     .cap = (int8_t)cap };
	(*np)++;
	return true;
}

/* The resolved prefix into parts: literal runs and whole-segment
 * captures, their names distinct. */
static int compile_prefix(struct fg_route *r, const char *shown, char *err,
			  size_t n)
{
	const char *p = r->prefix;
	size_t len = strlen(p), lit = 0, i = 0;
	r->literal = 0;
	while (i < len) {
		if (p[i] == '}') {
			say(err, n, "route: prefix '%s' has a '}' that closes no capture",
			    shown);
			return -1;
		}
		if (p[i] != '{') {
			i++;
			continue;
		}
		size_t nl = cap_name(p + i + 1, len - i - 1);
		if (nl == 0) {
			say(err, n, "route: prefix '%s': a capture is `{name}`, "
			    "name 1..%d of A-Z a-z 0-9 _", shown, FG_ROUTE_CAPNAME_MAX);
			return -1;
		}
		size_t end = i + nl + 2;
		if (i == 0 || p[i - 1] != '/' || (end < len && p[end] != '/')) {
			say(err, n, "route: prefix '%s': capture {%.*s} is not a "
			    "whole path segment", shown, (int)nl, p + i + 1);
			return -1;
		}
		if (r->ncaps >= FG_ROUTE_CAPS_MAX) {
			say(err, n, "route: prefix '%s' has more than %d captures",
			    shown, FG_ROUTE_CAPS_MAX);
			return -1;
		}
		for (unsigned k = 0; k < r->nprefix; k++) {
			const struct fg_route_part *q = &r->pp[k];
			if (q->cap >= 0 && q->len == nl &&
			    memcmp(p + q->off, p + i + 1, nl) == 0) {
				say(err, n, "route: prefix '%s' has capture {%.*s} twice",
				    shown, (int)nl, p + i + 1);
				return -1;
			}
		}
		if (i > lit)
			add_part(r->pp, &r->nprefix, lit, i - lit, -1);
		r->literal += i - lit;
		add_part(r->pp, &r->nprefix, i + 1, nl, (int)r->ncaps++);
		i = lit = end;
	}
	if (len > lit)
		add_part(r->pp, &r->nprefix, lit, len - lit, -1);
	r->literal += len - lit;
	return 0;
}

/* The prefix capture named s[0..nl), or -1. */
static int find_cap(const struct fg_route *r, const char *s, size_t nl)
{
	for (unsigned k = 0; k < r->nprefix; k++) {
		const struct fg_route_part *q = &r->pp[k];
		if (q->cap >= 0 && q->len == nl && memcmp(r->prefix + q->off, s, nl) == 0)
			return q->cap;
	}
	return -1;
}

/* Builds the lock name from the lock's parts: a capture's text is
 * caps[i] of path (or "x" when path is NULL). Its length, or -1 when it
 * does not fit a lock name. */
static int build(const struct fg_route *r, const char *path,
		 const struct span *caps, char out[FG_NAME_MAX + 1])
{
	size_t w = 0;
	for (unsigned k = 0; k < r->nlock; k++) {
		const struct fg_route_part *q = &r->lp[k];
		const char *s = q->cap < 0 ? r->lock + q->off
			      : path ? path + caps[q->cap].off : "x";
		size_t l = q->cap < 0 ? q->len : path ? caps[q->cap].len : 1;
		if (l > FG_NAME_MAX - w)
			return -1;
		memcpy(out + w, s, l);
		w += l;
	}
	out[w] = '\0';
	return (int)w;
}

static int compile_lock(struct fg_route *r, char *err, size_t n)
{
	const char *p = r->lock;
	size_t len = strlen(p), lit = 0, i = 0;
	while (i < len) {
		if (p[i] == '}') {
			say(err, n, "route: lock '%s' has a '}' that closes no capture", p);
			return -1;
		}
		if (p[i] != '{') {
			i++;
			continue;
		}
		size_t nl = cap_name(p + i + 1, len - i - 1);
		if (nl == 0) {
			say(err, n, "route: lock '%s': a capture is `{name}`", p);
			return -1;
		}
		int cap = find_cap(r, p + i + 1, nl);
		if (cap < 0) {
			say(err, n, "route: lock '%s' uses capture {%.*s}, which "
			    "prefix '%s' does not have", p, (int)nl, p + i + 1,
			    r->prefix);
			return -1;
		}
		if ((i > lit && !add_part(r->lp, &r->nlock, lit, i - lit, -1)) ||
		    !add_part(r->lp, &r->nlock, 0, 0, cap)) {
			say(err, n, "route: lock '%s' has too many captures", p);
			return -1;
		}
		i = lit = i + nl + 2;
	}
	if (len > lit && !add_part(r->lp, &r->nlock, lit, len - lit, -1)) {
		say(err, n, "route: lock '%s' has too many captures", p);
		return -1;
	}
	char sample[FG_NAME_MAX + 1];
	int sl = build(r, NULL, NULL, sample);
	if (sl < 0 || !fg_name_valid(sample, (size_t)sl)) {
		if (r->nlock == 1 && r->lp[0].cap < 0)
			say(err, n, "route: '%s' is not a valid lock name", p);
		else
			say(err, n, "route: lock '%s' is not a valid lock name "
			    "whatever its captures hold", p);
		return -1;
	}
	return 0;
}

int fg_route_compile(struct fg_route *r, const char *prefix, size_t plen,
		     const char *lock, size_t llen, char *err, size_t n)
{
	char resolved[FG_PATH_MAX], shown[FG_ROUTE_PREFIX_MAX + 1];
	size_t rlen;

	memset(r, 0, sizeof(*r));
	if (plen == 0 || prefix[0] != '/' || plen > FG_ROUTE_PREFIX_MAX ||
	    llen == 0 || llen > 4 * FG_NAME_MAX) {
		say(err, n, "route: expected `route /PREFIX LOCK`, got '%.*s %.*s'",
		    (int)(plen > FG_ROUTE_PREFIX_MAX ? 64 : plen), prefix,
		    (int)(llen > FG_NAME_MAX ? 64 : llen), lock);
		return -1;
	}
	memcpy(shown, prefix, plen);
	shown[plen] = '\0';
	/* Paths are matched resolved (decoded, slashes merged, dot segments
	 * gone): so is the prefix, or it would never match. A decoded brace
	 * would read as a capture nobody wrote. */
	if (fg_path_resolve(prefix, plen, resolved, sizeof(resolved), &rlen)) {
		say(err, n, "route: prefix '%s' is not a path inside the upstream", shown);
		return -1;
	}
	if (count_braces(resolved, rlen) != count_braces(prefix, plen)) {
		say(err, n, "route: prefix '%s': a brace is a capture's and "
		    "cannot be percent-encoded", shown);
		return -1;
	}
	r->prefix = strndup(resolved, rlen);
	r->lock = strndup(lock, llen);
	r->line = malloc(plen + llen + 2);
	if (!r->prefix || !r->lock || !r->line) {
		say(err, n, "out of memory");
		goto error_rule;
	}
	snprintf(r->line, plen + llen + 2, "%s %s", shown, r->lock);
	if (compile_prefix(r, shown, err, n) || compile_lock(r, err, n))
		goto error_rule;
	return 0;

error_rule:
	fg_route_finish(r);
	return -1;
}

void fg_route_finish(struct fg_route *r)
{
	free(r->prefix);
	free(r->lock);
	free(r->line);
	memset(r, 0, sizeof(*r));
}

/* Does r match path[0..len)? Fills caps (r->ncaps of them) when it does. */
static bool match(const struct fg_route *r, const char *path, size_t len,
		  struct span *caps)
{
	size_t i = 0;
	for (unsigned k = 0; k < r->nprefix; k++) {
		const struct fg_route_part *q = &r->pp[k];
		if (q->cap >= 0) {
			/* callers' '/' precedes it: one whole, non-empty
			 * segment */
			size_t e = i;
			while (e < len && path[e] != '/')
				e++;
			if (e == i)
				return false;
			caps[q->cap] = (struct span){ i, e - i };
			i = e;
			continue;
		}
		const char *lit = r->prefix + q->off;
		size_t n = q->len;
		if (len - i >= n && memcmp(path + i, lit, n) == 0) {
			i += n;
			continue;
		}
		/* "/p/" covers "/p" itself (the collection without its '/') */
		return k + 1 == r->nprefix && lit[n - 1] == '/' &&
		       len - i == n - 1 && memcmp(path + i, lit, n - 1) == 0 &&
		       strlen(r->prefix) > 1;
	}
	return true;
}

/* The name built for a match: its length, or -1 when no valid name. */
static int name_of(const struct fg_route *r, const char *path,
		   const struct span *caps, char out[FG_NAME_MAX + 1])
{
	int l = build(r, path, caps, out);
	if (l < 0 || !fg_name_valid(out, (size_t)l))
		return -1;
	return l;
}

int fg_route_apply(const struct fg_route *r, const char *path, size_t len,
		   char out[FG_NAME_MAX + 1])
{
	struct span caps[FG_ROUTE_CAPS_MAX];
	if (!match(r, path, len, caps))
		return 0;
	return name_of(r, path, caps, out) < 0 ? -1 : 1;
}

/* The rule that wins for a path, its captures in caps; NULL for none. */
static const struct fg_route *winner(const struct fg_route *routes,
				     size_t nroutes, const char *path, size_t len,
				     struct span caps[FG_ROUTE_CAPS_MAX])
{
	const struct fg_route *best = NULL;
	struct span tmp[FG_ROUTE_CAPS_MAX];
	for (size_t i = 0; i < nroutes; i++) {
		const struct fg_route *r = &routes[i];
		/* strictly more: on a tie the first in the file stays */
		if (best && r->literal <= best->literal)
			continue;
		if (match(r, path, len, tmp)) {
			best = r;
			memcpy(caps, tmp, r->ncaps * sizeof(*tmp));
		}
	}
	return best;
}

int fg_routes_lock(const struct fg_route *routes, size_t nroutes,
		   const char *path, size_t len, char out[FG_NAME_MAX + 1],
		   const struct fg_route **rule)
{
	struct span caps[FG_ROUTE_CAPS_MAX];
	const struct fg_route *best = winner(routes, nroutes, path, len, caps);
	*rule = best;
	if (best)
		return name_of(best, path, caps, out) < 0 ? -1 : 0;
	const char *name = path;
	size_t nlen = len;
	while (nlen > 0 && name[0] == '/') {
		name++;
		nlen--;
	}
	while (nlen > 0 && name[nlen - 1] == '/')
		nlen--;
	if (nlen > FG_NAME_MAX || !fg_name_valid(name, nlen))
		return -1;
	memcpy(out, name, nlen);
	out[nlen] = '\0';
	return 0;
}

enum reach { R_NONE, R_FULL, R_OPEN };

/*
 * How r meets the paths of the subtree of dir[0..n) (a collection: it
 * ends in '/'): R_NONE, it matches none of them; R_FULL, it matches dir,
 * and so every path under it, with the same captures; R_OPEN, its prefix
 * goes on past dir and may match some of them. *fixed has a bit for each
 * capture dir decides (its span in caps).
 */
static enum reach reach(const struct fg_route *r, const char *dir, size_t n,
			struct span *caps, uint32_t *fixed)
{
	size_t i = 0;
	*fixed = 0;
	for (unsigned k = 0; k < r->nprefix; k++) {
		const struct fg_route_part *q = &r->pp[k];
		if (q->cap >= 0) {
			size_t e = i;
			while (e < n && dir[e] != '/')
				e++;
			if (e == n)
				return R_OPEN; /* the segment is the subtree's */
			if (e == i)
				return R_NONE;
			caps[q->cap] = (struct span){ i, e - i };
			*fixed |= 1u << q->cap;
			i = e;
			continue;
		}
		size_t rest = n - i, l = q->len;
		const char *lit = r->prefix + q->off;
		if (memcmp(dir + i, lit, rest < l ? rest : l) != 0)
			return R_NONE;
		if (rest < l)
			return R_OPEN; /* the rest of it may follow dir */
		i += l;
	}
	return R_FULL;
}

/* The literal start of r's lock up to its first capture dir does not fix:
 * its length; *whole when no such capture is used. */
static size_t known_start(const struct fg_route *r, const char *dir,
			  const struct span *caps, uint32_t fixed,
			  char out[FG_NAME_MAX + 1], bool *whole)
{
	size_t w = 0;
	*whole = true;
	for (unsigned k = 0; k < r->nlock; k++) {
		const struct fg_route_part *q = &r->lp[k];
		if (q->cap >= 0 && !(fixed & (1u << q->cap))) {
			*whole = false;
			break;
		}
		const char *s = q->cap < 0 ? r->lock + q->off : dir + caps[q->cap].off;
		size_t l = q->cap < 0 ? q->len : caps[q->cap].len;
		if (l > FG_NAME_MAX - w)
			l = FG_NAME_MAX - w;
		memcpy(out + w, s, l);
		w += l;
	}
	out[w] = '\0';
	return w;
}

bool fg_routes_subtree_guarded(const struct fg_route *routes, size_t nroutes,
			       const char *path, size_t len, const char *lock)
{
	struct span caps[FG_ROUTE_CAPS_MAX];
	char name[FG_NAME_MAX + 1];
	const struct fg_route *w = winner(routes, nroutes, path, len, caps);
	if (!w || name_of(w, path, caps, name) < 0 || strcmp(name, lock) != 0)
		return false;
	for (size_t i = 0; i < nroutes; i++) {
		const struct fg_route *r = &routes[i];
		/* only a rule that would win over w where both match can
		 * take part of the subtree from it */
		if (r == w || r->literal < w->literal ||
		    (r->literal == w->literal && r > w))
			continue;
		uint32_t fixed;
		/* R_FULL: it matches the path itself, where w won */
		if (reach(r, path, len, caps, &fixed) != R_OPEN)
			continue;
		bool whole;
		size_t l = known_start(r, path, caps, fixed, name, &whole);
		/* a capture of the subtree's may name another lock; a rule
		 * for the same lock is harmless */
		if (!whole || !fg_name_valid(name, l) || strcmp(name, lock) != 0)
			return false;
	}
	return true;
}

bool fg_route_inside(const struct fg_route *r, const char *dir, size_t n,
		     char out[FG_NAME_MAX + 1], bool *exact)
{
	struct span caps[FG_ROUTE_CAPS_MAX];
	uint32_t fixed;
	/* R_FULL: a rule that matches dir itself decides there, where the
	 * caller asks for dir's own lock, or never wins inside it */
	if (reach(r, dir, n, caps, &fixed) != R_OPEN)
		return false;
	known_start(r, dir, caps, fixed, out, exact);
	return true;
}
