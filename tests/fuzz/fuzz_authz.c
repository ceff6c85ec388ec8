/*
 * fuzz_authz - what a request names and may do (gateway/base/auth.c): an
 * Authorization value read by fg_auth_bearer(), its key looked up in a
 * small fixed table, and the input as a lock name or CN against it.
 *
 * Properties:
 *  - fg_auth_bearer() agrees with a reference written here from the
 *    contract (the scheme is the first word, "Bearer" without case, then
 *    one or more spaces, a b64token, trailing spaces or tabs): NONE,
 *    MALFORMED or BEARER, and on BEARER the same token, pointing inside
 *    the header; *key is NULL and *len 0 otherwise;
 *  - a key finds exactly the principal whose key it is (compared here byte
 *    for byte with the keys the table's digests were made from), or none;
 *    never the cert principal;
 *  - by_cert finds a principal by its exact name, whatever its credential;
 *  - the fixed principals' rights on the input as a lock name agree with
 *    their lines (prefix tests written out here).
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <openssl/sha.h>

#include "base/auth.h"
#include "fuzz.h"

static const char *const keys[] = { "ci-key", "reader-key", "abc", "fuzz-known-key" };
static const char *const key_names[] = { "ci", "reader", "abc", "x@y" };
static const char *const key_rights[] = { "lock:jobs/ observe:*",
					  "read:docs/ observe:docs/", "", "admin:a/b" };
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static struct fg_authtab *table;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char text[2048];
	int n = 0;
	(void)argc;
	(void)argv;
	for (size_t i = 0; i < NKEYS; i++) {
		unsigned char d[SHA256_DIGEST_LENGTH];
		SHA256((const unsigned char *)keys[i], strlen(keys[i]), d);
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%s sha256:", key_names[i]);
		for (size_t k = 0; k < sizeof(d); k++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x", d[k]);
		n += snprintf(text + n, sizeof(text) - (size_t)n, " %s\n", key_rights[i]);
	}
	n += snprintf(text + n, sizeof(text) - (size_t)n, "ops cert admin:* metrics\n");
	char err[256];
	PROPERTY(fg_authtab_parse(text, (size_t)n, &table, err, sizeof(err)) == 0);
	PROPERTY(fg_authtab_count(table) == NKEYS + 1);
	return 0;
}

static bool b64tok(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || strchr("-._~+/", c) != NULL;
}

/* Reference: strip, split off the scheme, strip again, match the rest
 * whole. */
static enum fg_cred ref_bearer(const char *h, size_t *off, size_t *len)
{
	size_t n = strlen(h), b = 0;
	while (b < n && (h[b] == ' ' || h[b] == '\t'))
		b++;
	size_t e = b;
	while (e < n && h[e] != ' ' && h[e] != '\t')
		e++;
	if (e - b != 6 || strncasecmp(h + b, "bearer", 6) != 0)
		return FG_CRED_NONE;
	if (e == n || h[e] != ' ')
		return FG_CRED_MALFORMED;
	while (e < n && h[e] == ' ')
		e++;
	while (n > e && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	size_t k = e;
	while (k < n && b64tok(h[k]))
		k++;
	if (k == e)
		return FG_CRED_MALFORMED;
	while (k < n && h[k] == '=')
		k++;
	if (k != n)
		return FG_CRED_MALFORMED;
	*off = e;
	*len = n - e;
	return FG_CRED_BEARER;
}

static bool starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* The principal named exactly s, or NULL, by a plain scan. */
static const struct fg_principal *by_name(const char *s)
{
	for (size_t i = 0; i < fg_authtab_count(table); i++)
		if (strcmp(fg_principal_name(fg_authtab_at(table, i)), s) == 0)
			return fg_authtab_at(table, i);
	return NULL;
}

/* One of the fixed principals, which the table must hold. */
static const struct fg_principal *named(const char *name)
{
	const struct fg_principal *p = by_name(name);
	PROPERTY(p != NULL);
	return p;
}

/* Whose key key[0..len) is, by the keys themselves. */
static const struct fg_principal *owner(const char *key, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strlen(keys[i]) == len && memcmp(keys[i], key, len) == 0)
			return named(key_names[i]);
	return NULL;
}

static void check_rights(const char *s)
{
	const struct fg_principal *ci = named("ci"), *reader = named("reader"),
				  *abc = named("abc"), *xy = named("x@y"), *ops = named("ops");
	bool jobs = starts(s, "jobs/"), docs = starts(s, "docs/"), ab = starts(s, "a/b");

	PROPERTY(fg_principal_may(ci, FG_RIGHT_OBSERVE, s));
	PROPERTY(fg_principal_may(ci, FG_RIGHT_LOCK, s) == jobs);
	PROPERTY(fg_principal_may(ci, FG_RIGHT_READ, s) == jobs);
	PROPERTY(!fg_principal_may(ci, FG_RIGHT_ADMIN, s));
	PROPERTY(!fg_principal_may(ci, FG_RIGHT_METRICS, s));
	PROPERTY(fg_principal_may_prefix(ci, FG_RIGHT_LOCK, s) == jobs);

	PROPERTY(fg_principal_may(reader, FG_RIGHT_OBSERVE, s) == docs);
	PROPERTY(fg_principal_may(reader, FG_RIGHT_READ, s) == docs);
	PROPERTY(!fg_principal_may(reader, FG_RIGHT_LOCK, s));

	for (int r = 0; r < FG_RIGHT_COUNT; r++) {
		PROPERTY(!fg_principal_may(abc, (enum fg_right)r, s));
		PROPERTY(fg_principal_may(ops, (enum fg_right)r, s));
		PROPERTY(fg_principal_may(xy, (enum fg_right)r, s) ==
			 (ab && r != FG_RIGHT_METRICS));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = malloc(size + 1);
	PROPERTY(h != NULL);
	memcpy(h, data, size);
	h[size] = '\0';

	const char *key = h;
	size_t len = 7, off = 0, rlen = 0;
	enum fg_cred c = fg_auth_bearer(h, &key, &len);
	enum fg_cred want = ref_bearer(h, &off, &rlen);
	PROPERTY(c == want);
	if (c != FG_CRED_BEARER) {
		PROPERTY(key == NULL && len == 0);
	} else {
		PROPERTY(key == h + off && len == rlen && len > 0);
		PROPERTY(fg_authtab_by_key(table, key, len) == owner(key, len));
	}
	PROPERTY(fg_auth_bearer(NULL, &key, &len) == FG_CRED_NONE);

	/* the input as a key, a CN and a lock name */
	PROPERTY(fg_authtab_by_key(table, (const char *)data, size) ==
		 owner((const char *)data, size));
	PROPERTY(fg_authtab_by_cert(table, h) == by_name(h));
	check_rights(h);
	free(h);
	return 0;
}
