/*
 * fuzz_route - route templates compiled from the input and paths matched
 * against them (gateway/base/route.c, through fg_config_set "route",
 * fg_route_lock and fg_subtree_guarded).
 *
 * Input: lines. The first byte's low two bits say how many of the first
 * lines after it are route lines (`PREFIX LOCK`), added after four fixed
 * templates; every other line is a path, any bytes but NUL (as S3 keys
 * are: nothing is resolved).
 *
 * Properties:
 *  - a route line is taken or refused, never half: a taken one keeps its
 *    words as written in `line`, its prefix starts with '/' and its
 *    captures are whole segments;
 *  - the rule fg_route_lock() picks is the reference's: of the rules a
 *    character-by-character matcher says match, the one with the most
 *    literal bytes, then the first; with none, the default;
 *  - a lock it gives is a valid lock name and what fg_route_apply() of
 *    the winner gives;
 *  - a collection path guarded by lock L (fg_subtree_guarded) gives L to
 *    every path under it: the path followed by any other input line.
 */
#include <stdbool.h>
#include <string.h>

#include "base/config.h"
#include "base/route.h"
#include "base/writeset.h"
#include "fencegate/name.h"
#include "fuzz.h"

static const char *const fixed[] = {
	"/orders/{id}/ orders/{id}",
	"/{bucket}/ {bucket}",
	"/orders/ orders",
	"/t/{a}/x/{b}/ t/{b}",
};
#define NFIXED (sizeof(fixed) / sizeof(fixed[0]))
#define LINES_MAX 16
#define LINE_MAX 600

/* Reference: does the resolved prefix template t match p[0..n)? A
 * capture takes one non-empty segment; "/p/" also matches "/p". */
static bool ref_match(const char *t, const char *p, size_t n)
{
	size_t i = 0, j = 0, tl = strlen(t);
	while (j < tl) {
		if (t[j] == '{') {
			const char *e = strchr(t + j, '}');
			PROPERTY(e != NULL);
			size_t s = i;
			while (i < n && p[i] != '/')
				i++;
			if (i == s)
				return false;
			j = (size_t)(e - t) + 1;
			continue;
		}
		if (i < n && p[i] == t[j]) {
			i++;
			j++;
			continue;
		}
		return i == n && j == tl - 1 && t[j] == '/' && tl > 1;
	}
	return true;
}

static size_t ref_literal(const char *t)
{
	size_t n = 0;
	for (const char *s = t; *s; s++) {
		if (*s == '{') {
			s = strchr(s, '}');
			PROPERTY(s != NULL);
			continue;
		}
		n++;
	}
	return n;
}

static void check_rule_shape(const struct fg_route *r)
{
	PROPERTY(r->prefix[0] == '/');
	PROPERTY(r->literal == ref_literal(r->prefix));
	for (const char *s = r->prefix; *s; s++) {
		if (*s == '{') {
			PROPERTY(s[-1] == '/');
			const char *e = strchr(s, '}');
			PROPERTY(e && (e[1] == '/' || e[1] == '\0'));
		}
	}
}

static void check_path(const struct fg_config *c, const char *p, size_t n,
		       char lines[][LINE_MAX], const size_t *lens, size_t nlines)
{
	char lock[FG_NAME_MAX + 1], again[FG_NAME_MAX + 1];
	const struct fg_route *rule;
	int rc = fg_route_lock(c, p, n, lock, &rule);
	PROPERTY(rc == 0 || rc == -1);

	const struct fg_route *ref = NULL;
	for (size_t i = 0; i < c->nroutes; i++)
		if (ref_match(c->routes[i].prefix, p, n) &&
		    (!ref || c->routes[i].literal > ref->literal))
			ref = &c->routes[i];
	PROPERTY(rule == ref);
	if (rc == 0)
		PROPERTY(fg_name_valid(lock, strlen(lock)));
	if (rule) {
		int a = fg_route_apply(rule, p, n, again);
		PROPERTY(a == (rc == 0 ? 1 : -1));
		if (rc == 0)
			PROPERTY(strcmp(lock, again) == 0);
	}

	if (rc || n == 0 || p[n - 1] != '/' || !fg_subtree_guarded(c, p, n, lock))
		return;
	PROPERTY(rule != NULL);
	char under[2 * LINE_MAX];
	for (size_t k = 0; k < nlines; k++) {
		memcpy(under, p, n);
		memcpy(under + n, lines[k], lens[k]);
		const struct fg_route *r2;
		PROPERTY(fg_route_lock(c, under, n + lens[k], again, &r2) == 0);
		PROPERTY(strcmp(again, lock) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char lines[LINES_MAX][LINE_MAX];
	size_t lens[LINES_MAX], nlines = 0;
	struct fg_config c;
	char err[512];

	if (size < 1)
		return 0;
	unsigned nrules = data[0] & 3u;
	const char *s = (const char *)data + 1, *end = (const char *)data + size;
	while (s < end && nlines < LINES_MAX) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t l = nl ? (size_t)(nl - s) : (size_t)(end - s);
		if (l < LINE_MAX && !memchr(s, '\0', l)) {
			memcpy(lines[nlines], s, l);
			lines[nlines][l] = '\0';
			lens[nlines++] = l;
		}
		s += l + 1;
	}

	fg_config_init(&c);
	for (size_t i = 0; i < NFIXED; i++)
		PROPERTY(fg_config_set(&c, "route", fixed[i], err, sizeof(err)) == 0);
	size_t first = 0;
	for (; first < nlines && first < nrules; first++) {
		size_t before = c.nroutes;
		int rc = fg_config_set(&c, "route", lines[first], err, sizeof(err));
		PROPERTY(rc == 0 ? c.nroutes == before + 1 : c.nroutes == before);
		if (rc == 0) {
			const struct fg_route *r = &c.routes[before];
			check_rule_shape(r);
			/* the words as written, one space between */
			PROPERTY(strstr(lines[first], r->lock) != NULL);
			PROPERTY(strlen(r->line) ==
				 strlen(r->lock) + 1 + strcspn(r->line, " "));
		}
	}
	for (size_t i = 0; i < c.nroutes; i++)
		check_rule_shape(&c.routes[i]);
	for (size_t k = first; k < nlines; k++)
		check_path(&c, lines[k], lens[k], lines + first, lens + first,
			   nlines - first);
	fg_config_finish(&c);
	return 0;
}
