/*
 * fuzz_accesslog - the access log's reading of a request target
 * (fg_accesslog_path, gateway/proc/accesslog.c): the one place client bytes go
 * into a log line.
 *
 * Properties, for any bytes:
 *  - text: only printable ASCII other than '"', '\\' and space comes out
 *    (so a target cannot end the quoted field or start a new line), and
 *    reading every \xHH back gives the path before its '?', whole or cut
 *    at 2048 bytes and then followed by "...";
 *  - JSON: the output inside quotes is one JSON string jansson accepts,
 *    with no raw control byte, and never holds the query;
 *  - with any smaller buffer, nothing is written past it and the output
 *    is NUL-terminated.
 */
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "proc/accesslog.h"
#include "fuzz.h"

#define PATH_MAX_LOG 2048
#define OUT_CAP (PATH_MAX_LOG * 6 + 64)

static int unhex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char uri[16384], out[OUT_CAP], back[OUT_CAP], quoted[OUT_CAP + 2];
	if (size >= sizeof(uri))
		return 0;
	memcpy(uri, data, size);
	uri[size] = '\0';
	size_t plen = strcspn(uri, "?");
	bool cut = plen > PATH_MAX_LOG;
	size_t keep = cut ? PATH_MAX_LOG : plen;

	/* text */
	size_t n = fg_accesslog_path(uri, true, out, sizeof(out));
	PROPERTY(n < sizeof(out) && out[n] == '\0' && strlen(out) == n);
	size_t b = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)out[i];
		PROPERTY(c > 0x20 && c < 0x7f && c != '"');
		if (c == '\\') {
			PROPERTY(i + 3 < n && out[i + 1] == 'x');
			int hi = unhex(out[i + 2]), lo = unhex(out[i + 3]);
			PROPERTY(hi >= 0 && lo >= 0);
			back[b++] = (char)(hi * 16 + lo);
			i += 3;
		} else {
			back[b++] = (char)c;
		}
	}
	if (cut) {
		PROPERTY(b == keep + 3 && memcmp(back + keep, "...", 3) == 0);
	} else {
		PROPERTY(b == keep);
	}
	PROPERTY(memcmp(back, uri, keep) == 0);

	/* JSON */
	n = fg_accesslog_path(uri, false, out, sizeof(out));
	PROPERTY(n < sizeof(out) && out[n] == '\0');
	for (size_t i = 0; i < n; i++)
		PROPERTY((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	quoted[0] = '"';
	memcpy(quoted + 1, out, n);
	quoted[n + 1] = '"';
	json_error_t err;
	json_t *j = json_loadb(quoted, n + 2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	PROPERTY(j && json_is_string(j));
	json_decref(j);

	/* small buffers: bounded, terminated */
	size_t caps[] = { 1, 2, 5, 9, 64 };
	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		char small[80];
		memset(small, 'Z', sizeof(small));
		size_t m = fg_accesslog_path(uri, k & 1, small, caps[k]);
		PROPERTY(m < caps[k] && small[m] == '\0');
		for (size_t i = caps[k]; i < sizeof(small); i++)
			PROPERTY(small[i] == 'Z');
	}
	return 0;
}
