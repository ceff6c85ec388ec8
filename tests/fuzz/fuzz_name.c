/*
 * fuzz_name - lock names (lockcore/name.c), the percent-decoder every
 * path the gateway interprets goes through (fg_pct_decode, gateway/base/jsonio.c),
 * and the lock API's route of a lock's path (fg_apiroute_match,
 * gateway/base/apiroute.c).
 *
 * Properties:
 *  - fg_name_valid() agrees with a reference written here from the
 *    definition in fencegate/name.h: 1..255 bytes of [A-Za-z0-9._~/-], no
 *    "", "." or ".." segment; it reads only name[0..len) (the input buffer
 *    has no NUL after it), and every prefix is judged the same way;
 *  - fg_pct_decode() agrees with a reference decoder (every '%' followed by
 *    two hex digits, a decoded NUL refused) in result, bytes and length;
 *    its output is NUL-terminated and holds no NUL; with a buffer of
 *    exactly length + 1 it succeeds, one byte smaller it fails without
 *    writing past the buffer;
 *  - a decoded name that is valid encodes back (every byte as itself) and
 *    decodes to itself again;
 *  - the input after /_fence/v1/locks/ (up to a NUL) is routed, for each
 *    method, to the lock the reference decodes from it up to its '?' when
 *    that is a valid name, and then to the call of its method (405 for
 *    another) with the right it needs; to 400 bad_lock_name with no name
 *    and a known principal only otherwise; it is counted as its method's
 *    endpoint (observe for GET and HEAD with "wait_ms=" in the query), or
 *    other with no name at all.
 */
#include <stdbool.h>
#include <string.h>

#include "fencegate/name.h"
#include "fuzz.h"
#include "base/apiroute.h"
#include "base/jsonio.h"
#include "nginx_uri.h"

static bool ref_char(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
	       c == '-' || c == '/';
}

static bool ref_name_valid(const uint8_t *s, size_t n)
{
	if (n < 1 || n > 255)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!ref_char(s[i]))
			return false;
	/* split on '/', inspect each segment */
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '/')
			continue;
		size_t len = i - start;
		const uint8_t *seg = s + start;
		if (len == 0 || (len == 1 && seg[0] == '.') ||
		    (len == 2 && seg[0] == '.' && seg[1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}


/* Reference percent-decoder: decoded length, or -1. */
static long ref_pct_decode(const uint8_t *s, size_t n, uint8_t *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c == '%') {
			if (n - i < 3 || ngx_ref_hex(s[i + 1]) < 0 || ngx_ref_hex(s[i + 2]) < 0)
				return -1;
			c = (uint8_t)(ngx_ref_hex(s[i + 1]) << 4 | ngx_ref_hex(s[i + 2]));
			i += 2;
		}
		if (c == 0)
			return -1;
		out[o++] = c;
	}
	return (long)o;
}

static void check_name(const uint8_t *data, size_t size)
{
	PROPERTY(fg_name_valid((const char *)data, size) == ref_name_valid(data, size));
	PROPERTY(!fg_name_valid(NULL, size));
	/* the prefixes the fuzzer would otherwise need separate inputs for */
	size_t lim = size < 300 ? size : 300;
	for (size_t k = 0; k < lim; k++)
		PROPERTY(fg_name_valid((const char *)data, k) == ref_name_valid(data, k));
}

static void check_pct(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return;
	static uint8_t want[8192];
	long wlen = ref_pct_decode(data, size, want);

	char *out = malloc(size + 1);
	size_t olen = 12345;
	int r = fg_pct_decode((const char *)data, size, out, size + 1, &olen);
	PROPERTY((r == 0) == (wlen >= 0));
	if (r == 0) {
		PROPERTY(olen == (size_t)wlen);
		PROPERTY(memcmp(out, want, olen) == 0);
		PROPERTY(out[olen] == '\0');
		PROPERTY(memchr(out, '\0', olen) == NULL);
	}
	free(out);
	if (r != 0)
		return;

	/* exactly fitting, then one byte short (heap-exact, so ASan sees any
	 * write past the end) */
	char *exact = malloc((size_t)wlen + 1);
	PROPERTY(fg_pct_decode((const char *)data, size, exact, (size_t)wlen + 1, &olen) == 0);
	PROPERTY(olen == (size_t)wlen && memcmp(exact, want, olen) == 0);
	free(exact);
	if (wlen > 0) {
		char *shorter = malloc((size_t)wlen);
		PROPERTY(fg_pct_decode((const char *)data, size, shorter, (size_t)wlen, &olen) == -1);
		free(shorter);
	}

	/* a valid decoded name: plain bytes decode to themselves */
	if (fg_name_valid((const char *)want, (size_t)wlen)) {
		char again[FG_NAME_MAX + 1];
		PROPERTY(fg_pct_decode((const char *)want, (size_t)wlen, again,
				       sizeof(again), &olen) == 0);
		PROPERTY(olen == (size_t)wlen && memcmp(again, want, olen) == 0);
	}
}

#define LOCKS "/_fence/v1/locks/"

static void check_route(const uint8_t *data, size_t size)
{
	static char target[sizeof(LOCKS) + 4096];
	static uint8_t want[4096];
	static const struct {
		const char *method;
		enum fg_apiop op;
		enum fg_endpoint ep;
		enum fg_right right;
	} methods[] = {
		{ "POST", FG_APIOP_ACQUIRE, FG_EP_ACQUIRE, FG_RIGHT_LOCK },
		{ "PATCH", FG_APIOP_RENEW, FG_EP_RENEW, FG_RIGHT_LOCK },
		{ "DELETE", FG_APIOP_DELETE, FG_EP_RELEASE, FG_RIGHT_LOCK },
		{ "GET", FG_APIOP_INSPECT, FG_EP_INSPECT, FG_RIGHT_OBSERVE },
		{ "HEAD", FG_APIOP_INSPECT, FG_EP_INSPECT, FG_RIGHT_OBSERVE },
		{ "PUT", FG_APIOP_NOT_ALLOWED, FG_EP_OTHER, FG_RIGHT_OBSERVE },
	};
	size_t pl = sizeof(LOCKS) - 1;
	size_t n = size < 4096 ? size : 4096;
	const uint8_t *nul = memchr(data, 0, n);
	if (nul)
		n = (size_t)(nul - data);
	memcpy(target, LOCKS, pl);
	memcpy(target + pl, data, n);
	target[pl + n] = '\0';
	const uint8_t *q = memchr(data, '?', n);
	size_t raw = q ? (size_t)(q - data) : n;
	long wlen = ref_pct_decode(data, raw, want);
	bool valid = wlen >= 0 && ref_name_valid(want, (size_t)wlen);
	bool observe = q && memmem(q, n - raw, "wait_ms=", 8) != NULL;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		struct fg_apiroute r;
		memset(&r, 0xa5, sizeof(r));
		fg_apiroute_match(&r, methods[i].method, target);
		PROPERTY(r.matched);
		enum fg_endpoint ep = methods[i].ep;
		if (ep == FG_EP_INSPECT && observe)
			ep = FG_EP_OBSERVE;
		PROPERTY(r.endpoint == (raw == 0 ? FG_EP_OTHER : ep));
		size_t len = strnlen(r.name, sizeof(r.name));
		PROPERTY(len < sizeof(r.name));
		if (!valid) {
			PROPERTY(r.op == FG_APIOP_BAD_NAME);
			PROPERTY(len == 0);
			PROPERTY(r.need == FG_APINEED_PRINCIPAL);
			continue;
		}
		PROPERTY(len == (size_t)wlen && memcmp(r.name, want, len) == 0);
		PROPERTY(fg_name_valid(r.name, len));
		PROPERTY(r.op == methods[i].op);
		if (r.op == FG_APIOP_NOT_ALLOWED) {
			PROPERTY(r.need == FG_APINEED_PRINCIPAL);
			PROPERTY(strcmp(r.allow, "GET, POST, PATCH, DELETE") == 0);
		} else {
			PROPERTY(r.need == FG_APINEED_RIGHT);
			PROPERTY(r.right == methods[i].right);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_name(data, size);
	check_pct(data, size);
	check_route(data, size);
	return 0;
}
