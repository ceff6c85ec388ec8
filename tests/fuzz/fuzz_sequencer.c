/*
 * fuzz_sequencer - the Fencing-Token header, the /check body's sequencer,
 * leases and base64url (lockcore/sequencer.c).
 *
 * Properties:
 *  - fg_seq_decode() under the harness key: a VALID decode names a valid
 *    lock, a mode and a token in [1, FG_TOKEN_MAX), and fg_seq_encode() of
 *    those fields gives back the input byte for byte (one spelling per
 *    grant); under another key the same input is never VALID, and it is
 *    MALFORMED under one key exactly when it is under the other (the shape
 *    is judged before the key);
 *  - the input read as (mode, token, name): when the name is valid and the
 *    token in range, encode succeeds and its decode is VALID with the same
 *    fields, and FORGED under the other key;
 *  - fg_lease_wellformed() agrees with a reference (22 base64url chars
 *    whose last one has its 4 unused bits clear);
 *  - fg_b64url_decode() accepts exactly the canonical unpadded encodings
 *    (reference written here), encode(decode(x)) == x, decode(encode(x))
 *    == x, a too small buffer is refused, and nothing is written on
 *    failure.
 */
#include <stdbool.h>
#include <string.h>

#include "fencegate/name.h"
#include "fencegate/sequencer.h"
#include "fuzz.h"

static const uint8_t *key = (const uint8_t *)FUZZ_KEY;
static const uint8_t *other = (const uint8_t *)FUZZ_OTHER_KEY;

/* The reference reads the alphabet itself, not ranges as the code does. */
static int b64v(uint8_t c)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *p = c ? memchr(alphabet, c, 64) : NULL;
	return p ? (int)(p - alphabet) : -1;
}

/* Reference: the decoded length of a canonical unpadded base64url string,
 * or -1. */
static long ref_b64_len(const uint8_t *s, size_t n)
{
	if (n % 4 == 1)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (b64v(s[i]) < 0)
			return -1;
	if (n % 4 == 2 && (b64v(s[n - 1]) & 0x0f) != 0)
		return -1;
	if (n % 4 == 3 && (b64v(s[n - 1]) & 0x03) != 0)
		return -1;
	return (long)(n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0));
}

static void check_sequencer(const uint8_t *data, size_t size)
{
	struct fg_seq seq, seq2;
	const char *s = (const char *)data;

	enum fg_seq_status st = fg_seq_decode(key, FUZZ_KEY_LEN, s, size, &seq);
	enum fg_seq_status st2 = fg_seq_decode(other, FUZZ_OTHER_KEY_LEN, s, size, &seq2);
	PROPERTY(st == FG_SEQ_VALID || st == FG_SEQ_MALFORMED || st == FG_SEQ_FORGED);
	PROPERTY(st2 != FG_SEQ_VALID);
	PROPERTY((st == FG_SEQ_MALFORMED) == (st2 == FG_SEQ_MALFORMED));
	/* no key at all: never valid */
	PROPERTY(fg_seq_decode(key, FG_KEY_MIN - 1, s, size, &seq2) != FG_SEQ_VALID);
	if (st != FG_SEQ_VALID)
		return;

	PROPERTY(seq.name_len == strlen(seq.name));
	PROPERTY(fg_name_valid(seq.name, seq.name_len));
	PROPERTY(seq.mode == FG_MODE_EXCLUSIVE || seq.mode == FG_MODE_SHARED);
	PROPERTY(seq.token >= 1 && seq.token < FG_TOKEN_MAX);
	PROPERTY(size < FG_SEQ_MAX);

	char again[FG_SEQ_MAX];
	int n = fg_seq_encode(key, FUZZ_KEY_LEN, seq.name, seq.name_len,
			      seq.mode, seq.token, again, sizeof(again));
	PROPERTY(n > 0);
	PROPERTY((size_t)n == size && memcmp(again, data, size) == 0);
}

/* The input as (mode byte, 8 token bytes, name): encode, then decode. */
static void check_encode(const uint8_t *data, size_t size)
{
	if (size < 9)
		return;
	enum fg_mode mode = data[0] & 1 ? FG_MODE_SHARED : FG_MODE_EXCLUSIVE;
	uint64_t token = 0;
	for (int i = 1; i < 9; i++)
		token = token << 8 | data[i];
	if (data[0] & 2)
		token %= 1000000; /* small tokens as often as big ones */
	const char *name = (const char *)data + 9;
	size_t name_len = size - 9;

	char out[FG_SEQ_MAX];
	int n = fg_seq_encode(key, FUZZ_KEY_LEN, name, name_len, mode, token,
			      out, sizeof(out));
	bool ok = fg_name_valid(name, name_len) && token >= 1 && token < FG_TOKEN_MAX;
	PROPERTY((n > 0) == ok);
	if (!ok)
		return;
	PROPERTY((size_t)n == strlen(out) && (size_t)n < FG_SEQ_MAX);

	struct fg_seq seq;
	PROPERTY(fg_seq_decode(key, FUZZ_KEY_LEN, out, (size_t)n, &seq) == FG_SEQ_VALID);
	PROPERTY(seq.name_len == name_len && memcmp(seq.name, name, name_len) == 0);
	PROPERTY(seq.name[name_len] == '\0');
	PROPERTY(seq.mode == mode && seq.token == token);
	PROPERTY(fg_seq_decode(other, FUZZ_OTHER_KEY_LEN, out, (size_t)n, &seq) == FG_SEQ_FORGED);
	/* every proper prefix is refused */
	PROPERTY(fg_seq_decode(key, FUZZ_KEY_LEN, out, (size_t)n - 1, &seq) != FG_SEQ_VALID);
	/* a buffer one byte short is refused and left alone */
	char small[FG_SEQ_MAX];
	memset(small, 0x5a, sizeof(small));
	PROPERTY(fg_seq_encode(key, FUZZ_KEY_LEN, name, name_len, mode, token,
			       small, (size_t)n) == -1);
}

static void check_lease(const uint8_t *data, size_t size)
{
	bool ref = size == FG_LEASE_LEN && ref_b64_len(data, size) == 16;
	PROPERTY(fg_lease_wellformed((const char *)data, size) == ref);
}

static void check_b64(const uint8_t *data, size_t size)
{
	static uint8_t out[4096 + 8];
	static char enc[4096 * 2];
	if (size > 4096)
		return;

	long want = ref_b64_len(data, size);
	memset(out, 0xa5, sizeof(out));
	int r = fg_b64url_decode((const char *)data, size, out, sizeof(out));
	PROPERTY(r == want);
	if (r < 0) {
		for (size_t i = 0; i < sizeof(out); i++)
			PROPERTY(out[i] == 0xa5);
	} else {
		for (size_t i = (size_t)r; i < sizeof(out); i++)
			PROPERTY(out[i] == 0xa5);
		int e = fg_b64url_encode(out, (size_t)r, enc, sizeof(enc));
		PROPERTY(e >= 0 && (size_t)e == size && memcmp(enc, data, size) == 0);
		PROPERTY(enc[e] == '\0');
		if (r > 0) {
			/* one byte too small: refused, untouched */
			uint8_t tiny[4096];
			memset(tiny, 0xa5, sizeof(tiny));
			PROPERTY(fg_b64url_decode((const char *)data, size, tiny,
						  (size_t)r - 1) == -1);
			for (int i = 0; i < r; i++)
				PROPERTY(tiny[i] == 0xa5);
		}
	}

	/* the raw input as bytes: decode(encode(x)) == x */
	int e = fg_b64url_encode(data, size, enc, sizeof(enc));
	PROPERTY(e >= 0 && (size_t)e == (size / 3 * 4 + (size % 3 ? size % 3 + 1 : 0)));
	PROPERTY(fg_b64url_encode(data, size, enc, (size_t)e) == -1);
	e = fg_b64url_encode(data, size, enc, sizeof(enc));
	for (int i = 0; i < e; i++)
		PROPERTY(b64v((uint8_t)enc[i]) >= 0);
	r = fg_b64url_decode(enc, (size_t)e, out, sizeof(out));
	PROPERTY(r >= 0 && (size_t)r == size && memcmp(out, data, size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_sequencer(data, size);
	check_encode(data, size);
	check_lease(data, size);
	check_b64(data, size);
	return 0;
}
