/*
 * fuzz_path - the request path the fencing proxy resolves and the lock it
 * picks for it (fg_path_resolve, fg_lock_for_path, fg_subtree_guarded,
 * fg_fence_lock_for in gateway/base/writeset.c). The input is a raw request
 * path; like the proxy, the harness cuts it at the first '?'.
 *
 * Properties:
 *  - a resolved path starts with '/', holds no "//", no "." or ".."
 *    segment and no control byte, fits the buffer it was given (also a
 *    small, heap-exact one) and is the same whatever that buffer's size;
 *    resolving it again (its '%', '?' and '#' re-encoded) gives it back;
 *  - it is the URI nginx acts on for that request line (nginx_uri.h, a
 *    reference model checked against nginx 1.22): when the gateway
 *    resolves a path, nginx resolves it to the same bytes; a ".." above
 *    the root is refused by both; the gateway refuses nothing nginx
 *    accepts except a decoded control byte or a path too long for it;
 *  - with no route rules, fg_lock_for_path() succeeds exactly when the
 *    resolved path without its leading and trailing '/' is a valid lock
 *    name, and then gives that name;
 *  - with route rules (the config below), the longest covering prefix
 *    decides the lock ("/p/" covers "/p/..." and "/p"), else the rule
 *    above; fg_subtree_guarded() of a collection agrees with a reference
 *    (its route's lock, and no rule with another lock starts inside it);
 *  - fg_fence_lock_for() of the raw path is resolve + lock_for_path.
 */
#include <stdbool.h>
#include <string.h>

#include "base/config.h"
#include "fencegate/name.h"
#include "fuzz.h"
#include "nginx_uri.h"
#include "base/writeset.h"

static struct fg_config plain, routed;

static const char *const routes[][2] = {
	{ "/orders/42/", "orders/42" },
	{ "/orders/", "orders" },
	{ "/x/", "x" },
	{ "/x/y/", "xy" },
	{ "/same/", "s" },
	{ "/same/in/", "s" },
	{ "/deep/a/b/c/", "deep" },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256], line[128];
	(void)argc;
	(void)argv;
	fg_config_init(&plain);
	fg_config_init(&routed);
	for (size_t i = 0; i < NROUTES; i++) {
		snprintf(line, sizeof(line), "%s %s", routes[i][0], routes[i][1]);
		PROPERTY(fg_config_set(&routed, "route", line, err, sizeof(err)) == 0);
	}
	return 0;
}

static bool is_ctl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* The structural properties of a resolved path. */
static void check_shape(const char *p, size_t n)
{
	PROPERTY(n >= 1 && p[0] == '/' && p[n] == '\0' && strlen(p) == n);
	for (size_t i = 0; i < n; i++) {
		PROPERTY(!is_ctl((unsigned char)p[i]));
		if (p[i] != '/')
			continue;
		PROPERTY(i + 1 >= n || p[i + 1] != '/'); /* no "//" */
		/* the segment after this '/' is neither "." nor ".." */
		size_t e = i + 1;
		while (e < n && p[e] != '/')
			e++;
		size_t l = e - (i + 1);
		PROPERTY(!(l == 1 && p[i + 1] == '.'));
		PROPERTY(!(l == 2 && p[i + 1] == '.' && p[i + 2] == '.'));
	}
}

/* Reference: does route prefix pre cover the resolved path p? */
static bool ref_covers(const char *pre, const char *p, size_t n)
{
	size_t l = strlen(pre);
	if (n >= l && memcmp(p, pre, l) == 0)
		return true;
	return l > 1 && pre[l - 1] == '/' && n == l - 1 && memcmp(p, pre, n) == 0;
}

static int ref_route(const char *p, size_t n)
{
	int best = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < NROUTES; i++)
		if (ref_covers(routes[i][0], p, n) && strlen(routes[i][0]) > best_len) {
			best = (int)i;
			best_len = strlen(routes[i][0]);
		}
	return best;
}

static void check_lock(const char *p, size_t n)
{
	/* the path without its leading and trailing '/' */
	const char *s = p;
	size_t sl = n;
	while (sl > 0 && s[0] == '/') {
		s++;
		sl--;
	}
	while (sl > 0 && s[sl - 1] == '/')
		sl--;
	bool valid = fg_name_valid(s, sl);

	char lock[FG_NAME_MAX + 1];
	bool route = true;
	int r = fg_lock_for_path(&plain, p, n, lock, &route);
	PROPERTY(!route);
	PROPERTY((r == 0) == valid);
	if (r == 0) {
		PROPERTY(strlen(lock) == sl && memcmp(lock, s, sl) == 0);
		PROPERTY(fg_name_valid(lock, strlen(lock)));
	}

	int best = ref_route(p, n);
	route = false;
	r = fg_lock_for_path(&routed, p, n, lock, &route);
	PROPERTY(route == (best >= 0));
	if (best >= 0) {
		PROPERTY(r == 0 && strcmp(lock, routes[best][1]) == 0);
	} else {
		PROPERTY((r == 0) == valid);
		if (r == 0)
			PROPERTY(strlen(lock) == sl && memcmp(lock, s, sl) == 0);
	}

	if (p[n - 1] != '/' || r != 0)
		return;
	/* a collection: is all of it under this one lock? */
	bool want = best >= 0 && strcmp(routes[best][1], lock) == 0;
	for (size_t i = 0; want && i < NROUTES; i++)
		if (strlen(routes[i][0]) > n && memcmp(routes[i][0], p, n) == 0 &&
		    strcmp(routes[i][1], lock) != 0)
			want = false;
	PROPERTY(fg_subtree_guarded(&routed, p, n, lock) == want);
	PROPERTY(!fg_subtree_guarded(&plain, p, n, lock));
}

/* Re-encodes what fg_path_resolve would decode or a caller would cut. */
static size_t reencode(const char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '%' || p[i] == '?' || p[i] == '#') {
			o += (size_t)sprintf(out + o, "%%%02X", (unsigned char)p[i]);
		} else {
			out[o++] = p[i];
		}
	}
	return o;
}

/* Independent decode, only to tell why a path was refused. */
static bool decoded_has_ctl(const char *raw, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];
		if (c == '%' && i + 2 < len && ngx_ref_hex((unsigned char)raw[i + 1]) >= 0 &&
		    ngx_ref_hex((unsigned char)raw[i + 2]) >= 0) {
			c = (unsigned char)(ngx_ref_hex((unsigned char)raw[i + 1]) << 4 |
					    ngx_ref_hex((unsigned char)raw[i + 2]));
			i += 2;
		}
		if (is_ctl(c))
			return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[FG_PATH_MAX], again[FG_PATH_MAX], enc[3 * FG_PATH_MAX];
	const char *raw = (const char *)data;
	const char *q = memchr(raw, '?', size);
	size_t len = q ? (size_t)(q - raw) : size;
	size_t olen = 0;

	enum fg_path_status st = fg_path_resolve(raw, len, out, sizeof(out), &olen);
	PROPERTY(st == FG_PATH_OK || st == FG_PATH_BAD || st == FG_PATH_CLIMBS);

	/* a small heap-exact buffer: never overrun, same answer if it fits */
	size_t cap = len / 2 + 1;
	char *small = malloc(cap);
	size_t slen = 0;
	enum fg_path_status st2 = fg_path_resolve(raw, len, small, cap, &slen);
	if (st2 == FG_PATH_OK) {
		PROPERTY(st == FG_PATH_OK && slen == olen && slen < cap);
		PROPERTY(memcmp(small, out, olen + 1) == 0);
	} else if (st == FG_PATH_OK) {
		PROPERTY(st2 == FG_PATH_BAD); /* too long for the small one */
	} else {
		PROPERTY(st2 == st || st2 == FG_PATH_BAD);
	}
	free(small);

	if (st == FG_PATH_OK) {
		check_shape(out, olen);
		PROPERTY(olen < sizeof(out));
		size_t elen = reencode(out, olen, enc);
		size_t alen = 0;
		if (elen < sizeof(enc) - 1 &&
		    fg_path_resolve(enc, elen, again, sizeof(again), &alen) == FG_PATH_OK) {
			PROPERTY(alen == olen && memcmp(again, out, olen) == 0);
		} else {
			/* only a path too long for the buffer may fail */
			PROPERTY(olen + 4 >= sizeof(again));
		}
		check_lock(out, olen);

		char lock[FG_NAME_MAX + 1], lock2[FG_NAME_MAX + 1];
		bool route;
		PROPERTY((fg_fence_lock_for(&routed, raw, len, lock) == 0) ==
			 (fg_lock_for_path(&routed, out, olen, lock2, &route) == 0));
	} else {
		char lock[FG_NAME_MAX + 1];
		PROPERTY(fg_fence_lock_for(&routed, raw, len, lock) == -1);
	}

	/* the nginx model: only for request lines nginx and the gateway
	 * both take to this point (see nginx_uri.h) */
	if (!ngx_ref_applies(raw, len) || len > sizeof(out) / 2)
		return 0;
	static char ref[FG_PATH_MAX * 2 + 2];
	size_t rlen = 0;
	enum ngx_ref rr = ngx_ref_uri(raw, len, ref, sizeof(ref), &rlen);
	if (st == FG_PATH_OK)
		PROPERTY(rr == NGX_REF_OK && rlen == olen && memcmp(ref, out, olen) == 0);
	if (st == FG_PATH_CLIMBS)
		PROPERTY(rr == NGX_REF_CLIMBS);
	if (rr == NGX_REF_CLIMBS)
		PROPERTY(st != FG_PATH_OK);
	if (rr == NGX_REF_OK && st != FG_PATH_OK)
		PROPERTY(st == FG_PATH_BAD && decoded_has_ctl(raw, len));
	return 0;
}
