/*
 * fuzz_sigv4 - AWS Signature Version 4 (gateway/base/sigv4.c): the
 * Authorization header and presigned query readers, the canonical URI and
 * canonical request, and sign-then-verify. The input is lines: an
 * Authorization value, a query, a raw path, then headers `name:value`.
 *
 * Properties:
 *  - fg_sigv4_parse_header() answers OK, SIGV2 or MALFORMED; after OK the
 *    key id is 1..128 bytes, the date 8 digits, the signature 64 lower-case
 *    hex digits, the signed list names host and 1..64 headers, and the
 *    value rebuilt from what was parsed parses to the same;
 *  - fg_sigv4_parse_query() answers OK, NO_SIGNATURE, SIGV2,
 *    QUERY_MALFORMED or EXPIRES_TOO_LONG; after OK the expiry is
 *    1..604800 and the payload hash UNSIGNED-PAYLOAD;
 *  - a canonical path holds only unreserved bytes, '/' and upper-case %XX,
 *    starts with '/' when the path does (or is empty),
 *    is its own canonical path, and fits a buffer of exactly its size and
 *    no smaller;
 *  - the canonical request is the same twice and the same whatever the
 *    buffer, when it fits;
 *  - a request signed with fg_sigv4_sign() (its headers those of the
 *    input with valid names) verifies OK with fg_sigv4_verify() under the
 *    raw path and under the canonical one, and not with one signature
 *    digit changed;
 *  - nothing leaks (LeakSanitizer) and nothing reads out of bounds.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "base/sigv4.h"
#include "fuzz.h"

#define FZ_ID "FUZZAKID000000000000"
#define FZ_SECRET "fuzz-secret-0123456789/+abcdefghijklmnop"
#define FZ_NOW 1369353600
#define MAX_HEADERS 40

static const char the_key[] = FZ_ID; /* the lookup's answer */

static struct fg_sigv4_cache *cache;
static struct fg_sigv4_auth a, b;
static char out1[64 * 1024], out2[64 * 1024];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	cache = fg_sigv4_cache_create();
	PROPERTY(cache != NULL);
	return 0;
}

static const void *lookup(void *arg, const char *key_id, const char **secret,
			  size_t *secret_len)
{
	(void)arg;
	if (strcmp(key_id, FZ_ID) != 0)
		return NULL;
	*secret = FZ_SECRET;
	*secret_len = sizeof(FZ_SECRET) - 1;
	return the_key;
}

static bool is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool upper_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static void check_header(const char *v, size_t n)
{
	enum fg_sigv4_result r = fg_sigv4_parse_header(v, n, &a);
	PROPERTY(r == FG_SIGV4_OK || r == FG_SIGV4_SIGV2 || r == FG_SIGV4_MALFORMED);
	if (r != FG_SIGV4_OK)
		return;
	size_t idl = strlen(a.key_id);
	PROPERTY(idl >= 1 && idl <= FG_SIGV4_KEY_ID_MAX);
	PROPERTY(strlen(a.date) == 8);
	PROPERTY(strlen(a.signature) == 64 && is_lower_hex(a.signature, 64));
	PROPERTY(a.nsigned >= 1 && a.nsigned <= FG_SIGV4_SIGNED_MAX);
	static char again[FG_SIGV4_AUTH_VALUE_MAX + 64];
	int w = snprintf(again, sizeof(again),
			 "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
			 "SignedHeaders=%s, Signature=%s",
			 a.key_id, a.date, a.region, a.service, a.signed_headers, a.signature);
	PROPERTY(w > 0 && (size_t)w < sizeof(again));
	PROPERTY(fg_sigv4_parse_header(again, (size_t)w, &b) == FG_SIGV4_OK);
	PROPERTY(strcmp(a.key_id, b.key_id) == 0 && strcmp(a.date, b.date) == 0 &&
		 strcmp(a.region, b.region) == 0 && strcmp(a.service, b.service) == 0 &&
		 strcmp(a.signed_headers, b.signed_headers) == 0 &&
		 strcmp(a.signature, b.signature) == 0 && a.nsigned == b.nsigned);
}

static enum fg_sigv4_result check_query(const char *q, size_t n)
{
	enum fg_sigv4_result r = fg_sigv4_parse_query(q, n, &b);
	PROPERTY(r == FG_SIGV4_OK || r == FG_SIGV4_NO_SIGNATURE || r == FG_SIGV4_SIGV2 ||
		 r == FG_SIGV4_QUERY_MALFORMED || r == FG_SIGV4_EXPIRES_TOO_LONG);
	if (r == FG_SIGV4_OK) {
		PROPERTY(b.presigned);
		PROPERTY(b.expires >= 1 && b.expires <= FG_SIGV4_EXPIRES_MAX);
		PROPERTY(strcmp(b.payload_hash, "UNSIGNED-PAYLOAD") == 0);
		PROPERTY(b.token_len <= FG_SIGV4_TOKEN_MAX);
	}
	return r;
}

/* The canonical path of p into out1; its length or < 0. */
static long check_path(const char *p, size_t n)
{
	long l = fg_sigv4_canonical_path(p, n, out1, sizeof(out1));
	PROPERTY(l >= -2);
	if (l < 0)
		return l;
	PROPERTY(l >= 1 && (size_t)l == strlen(out1));
	PROPERTY((out1[0] == '/') == (n == 0 || p[0] == '/' || memcmp(p, "%2F", n < 3 ? n : 3) == 0 ||
				       memcmp(p, "%2f", n < 3 ? n : 3) == 0));
	for (long i = 0; i < l; i++) {
		unsigned char c = (unsigned char)out1[i];
		if (c == '%') {
			PROPERTY(i + 2 < l && upper_hex(out1[i + 1]) && upper_hex(out1[i + 2]));
			i += 2;
		} else {
			PROPERTY(unreserved(c) || c == '/');
		}
	}
	PROPERTY(fg_sigv4_canonical_path(out1, (size_t)l, out2, sizeof(out2)) == l);
	PROPERTY(memcmp(out1, out2, (size_t)l) == 0);
	PROPERTY(fg_sigv4_canonical_path(p, n, out2, (size_t)l + 1) == l);
	PROPERTY(fg_sigv4_canonical_path(p, n, out2, (size_t)l) == -1);
	return l;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	const char *line[3] = { "", "", "" };
	size_t len[3] = { 0, 0, 0 }, at = 0;
	for (int k = 0; k < 3 && at <= size; k++) {
		const char *nl = memchr(s + at, '\n', size - at);
		size_t e = nl ? (size_t)(nl - s) : size;
		line[k] = s + at;
		len[k] = e - at;
		at = e + 1;
	}
	struct fg_sigv4_header h[MAX_HEADERS + 4];
	size_t nh = 0;
	while (at < size && nh < MAX_HEADERS) {
		const char *nl = memchr(s + at, '\n', size - at);
		size_t e = nl ? (size_t)(nl - s) : size;
		const char *colon = memchr(s + at, ':', e - at);
		if (colon)
			h[nh++] = (struct fg_sigv4_header){ s + at, (size_t)(colon - (s + at)),
							    colon + 1, (size_t)(s + e - colon - 1) };
		at = e + 1;
	}

	check_header(line[0], len[0]);
	enum fg_sigv4_result qr = check_query(line[1], len[1]);
	long pl = check_path(line[2], len[2]);

	/* the canonical request, with the parsed list or just host */
	struct fg_sigv4_request req = {
		.method = "PUT", .path = line[2], .path_len = len[2],
		.query = line[1], .query_len = len[1], .headers = h, .nheaders = nh,
	};
	if (fg_sigv4_parse_header(line[0], len[0], &a) != FG_SIGV4_OK) {
		memset(&a, 0, sizeof(a));
		memcpy(a.signed_headers, "host", 5);
	}
	memcpy(a.payload_hash, "UNSIGNED-PAYLOAD", 17);
	long c1 = fg_sigv4_canonical_request(&req, &a, cache, out1, sizeof(out1));
	long c2 = fg_sigv4_canonical_request(&req, &a, cache, out2, sizeof(out2));
	PROPERTY(c1 == c2 && c1 >= -3);
	if (c1 >= 0) {
		PROPERTY(memcmp(out1, out2, (size_t)c1) == 0);
		PROPERTY(fg_sigv4_canonical_request(&req, &a, cache, out2, (size_t)c1 + 1) == c1);
		PROPERTY(fg_sigv4_canonical_request(&req, &a, cache, out2, (size_t)c1) == -1);
	}

	/* sign then verify: the input's headers, less those verify reads */
	if (pl < 0 || len[2] > FG_SIGV4_PATH_MAX ||
	    (qr != FG_SIGV4_NO_SIGNATURE && qr != FG_SIGV4_SIGV2))
		return 0;
	static char canon[64 * 1024];
	pl = fg_sigv4_canonical_path(line[2], len[2], canon, sizeof(canon));
	PROPERTY(pl > 0);
	struct fg_sigv4_header sh[MAX_HEADERS + 4];
	size_t ns = 0;
	for (size_t i = 0; i < nh; i++) {
		static const char *const own[] = { "authorization", "x-amz-date", "date",
						   "x-amz-content-sha256",
						   "x-amz-security-token", "host" };
		bool skip = false;
		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++)
			skip |= h[i].name_len == strlen(own[k]) &&
				strncasecmp(h[i].name, own[k], h[i].name_len) == 0;
		if (!skip)
			sh[ns++] = h[i];
	}
	char amz[17];
	fg_sigv4_amz_date(FZ_NOW, amz);
	sh[ns++] = (struct fg_sigv4_header){ "Host", 4, "bucket.example", 14 };
	sh[ns++] = (struct fg_sigv4_header){ "x-amz-date", 10, amz, 16 };
	sh[ns++] = (struct fg_sigv4_header){ "x-amz-content-sha256", 20, "UNSIGNED-PAYLOAD", 16 };
	struct fg_sigv4_creds cr = { FZ_ID, FZ_SECRET, "us-east-1", "s3" };
	static char value[FG_SIGV4_AUTH_VALUE_MAX];
	char seed[65];
	if (fg_sigv4_sign("PUT", canon, (size_t)pl, line[1], len[1], sh, ns, "UNSIGNED-PAYLOAD",
			  amz, &cr, cache, value, sizeof(value), seed) != 0)
		return 0;
	sh[ns++] = (struct fg_sigv4_header){ "Authorization", 13, value, strlen(value) };
	req.headers = sh;
	req.nheaders = ns;
	PROPERTY(fg_sigv4_verify(&req, FZ_NOW, "us-east-1", lookup, NULL, cache, &a) ==
		 FG_SIGV4_OK);
	PROPERTY(strcmp(a.signature, seed) == 0 && a.key == (const void *)the_key);
	req.path = canon;
	req.path_len = (size_t)pl;
	if ((size_t)pl <= FG_SIGV4_PATH_MAX)
		PROPERTY(fg_sigv4_verify(&req, FZ_NOW, "us-east-1", lookup, NULL, cache, &a) ==
			 FG_SIGV4_OK);
	size_t vl = strlen(value);
	value[vl - 1] = value[vl - 1] == '0' ? '1' : '0';
	PROPERTY(fg_sigv4_verify(&req, FZ_NOW, "us-east-1", lookup, NULL, cache, &a) ==
		 ((size_t)pl <= FG_SIGV4_PATH_MAX ? FG_SIGV4_BAD_SIGNATURE : FG_SIGV4_BAD_REQUEST));
	return 0;
}
