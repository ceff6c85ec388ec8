/*
 * tests/unit/lockcore/test_sequencer.c - sequencers, leases and base64url
 * (lockcore/sequencer.c).
 *
 * Pins the wire format of fencegate/sequencer.h: the test computes the
 * HMAC itself over "fg1" NUL name NUL mode NUL token, so a change of the
 * MAC input shows up here, and it signs malformed fields correctly to show
 * that a good MAC never makes a non-canonical field acceptable.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "fencegate/sequencer.h"

#define TOKEN_TOP (FG_TOKEN_MAX - 1) /* 9007199254740991 */

static const uint8_t key[32] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};

static const uint8_t other_key[32] = { 0x42 };

static const char url_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* ---- helpers ------------------------------------------------------- */

static void fill_name(char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = "abcXYZ019._~-"[i % 13];
	buf[n] = '\0';
}

static int encode_str(const char *name, enum fg_mode mode, uint64_t token,
		      char out[FG_SEQ_MAX])
{
	return fg_seq_encode(key, sizeof(key), name, strlen(name), mode, token,
			     out, FG_SEQ_MAX);
}

static enum fg_seq_status decode_str(const char *s, struct fg_seq *out)
{
	return fg_seq_decode(key, sizeof(key), s, strlen(s), out);
}

/* The test's own MAC: HMAC-SHA256("fg1" 0 name 0 mode 0 token-text). */
static void test_mac_b64(const char *name, size_t name_len, char mode_c,
			 const char *tok, char out[64])
{
	uint8_t msg[512], mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	size_t p = 0, tok_len = strlen(tok);

	assert_true(4 + name_len + 3 + tok_len <= sizeof(msg));
	memcpy(msg, "fg1", 4);
	p = 4;
	memcpy(msg + p, name, name_len);
	p += name_len;
	msg[p++] = 0;
	msg[p++] = (uint8_t)mode_c;
	msg[p++] = 0;
	memcpy(msg + p, tok, tok_len);
	p += tok_len;
	assert_non_null(HMAC(EVP_sha256(), key, sizeof(key), msg, p, mac,
			     &mac_len));
	assert_int_equal(mac_len, 32);
	assert_int_equal(fg_b64url_encode(mac, mac_len, out, 64), 43);
}

/*
 * A sequencer with the given raw fields, correctly signed over them (the
 * name bytes, the mode field's first char, the token text).
 */
static void build_signed(const char *name, size_t name_len, const char *mode,
			 const char *tok, char *out, size_t cap)
{
	char name64[512], mac64[64];

	assert_true(fg_b64url_encode((const uint8_t *)name, name_len, name64,
				     sizeof(name64)) >= 0);
	test_mac_b64(name, name_len, mode[0], tok, mac64);
	assert_true((size_t)snprintf(out, cap, "fg1.%s.%s.%s.%s", name64, mode,
				     tok, mac64) < cap);
}

static void split_last_dot(const char *s, char *head, char *mac)
{
	const char *dot = strrchr(s, '.');

	assert_non_null(dot);
	memcpy(head, s, (size_t)(dot - s));
	head[dot - s] = '\0';
	strcpy(mac, dot + 1);
}

/* ---- base64url ----------------------------------------------------- */

static void test_b64_vectors(void **state)
{
	/* RFC 4648 section 10, without padding. */
	static const struct {
		const char *in;
		const char *out;
	} v[] = {
		{ "", "" },
		{ "f", "Zg" },
		{ "fo", "Zm8" },
		{ "foo", "Zm9v" },
		{ "foob", "Zm9vYg" },
		{ "fooba", "Zm9vYmE" },
		{ "foobar", "Zm9vYmFy" },
	};
	char enc[32];
	uint8_t dec[32];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].in);

		assert_int_equal(fg_b64url_encode((const uint8_t *)v[i].in, n,
						  enc, sizeof(enc)),
				 strlen(v[i].out));
		assert_string_equal(enc, v[i].out);
		assert_int_equal(fg_b64url_decode(v[i].out, strlen(v[i].out),
						  dec, sizeof(dec)),
				 n);
		assert_memory_equal(dec, v[i].in, n);
	}
}

static void test_b64_url_alphabet(void **state)
{
	static const uint8_t hi[] = { 0xfb, 0xff, 0xbf };
	char enc[8];
	uint8_t dec[8];

	(void)state;
	assert_int_equal(fg_b64url_encode(hi, 3, enc, sizeof(enc)), 4);
	assert_string_equal(enc, "-_-_");
	assert_int_equal(fg_b64url_encode(hi, 2, enc, sizeof(enc)), 3);
	assert_string_equal(enc, "-_8");
	assert_int_equal(fg_b64url_decode("-_-_", 4, dec, sizeof(dec)), 3);
	assert_memory_equal(dec, hi, 3);
	/* The standard alphabet's '+' and '/' and padding are not accepted. */
	assert_int_equal(fg_b64url_decode("+/+/", 4, dec, sizeof(dec)), -1);
	assert_int_equal(fg_b64url_decode("Zg==", 4, dec, sizeof(dec)), -1);
	assert_int_equal(fg_b64url_decode("Zm8=", 4, dec, sizeof(dec)), -1);
}

static void test_b64_round_trip(void **state)
{
	uint8_t in[300], dec[300];
	char enc[410];

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + 3);
	for (size_t n = 0; n <= sizeof(in); n++) {
		int e = fg_b64url_encode(in, n, enc, sizeof(enc));

		assert_int_equal(e, (4 * n + 2) / 3);
		assert_true((size_t)e <= 4 * ((n + 2) / 3));
		assert_int_equal(strlen(enc), (size_t)e);
		assert_int_equal(strspn(enc, url_alphabet), (size_t)e);
		assert_int_equal(fg_b64url_decode(enc, (size_t)e, dec, n), n);
		assert_memory_equal(dec, in, n);
	}
}

static void test_b64_rejects(void **state)
{
	static const char *const bad[] = {
		"A",        /* length 1 mod 4 is no encoding */
		"AAAAA",
		"Zm9vY",
		"Zh",       /* non-canonical: unused bits set ("f" is "Zg") */
		"Zm9",      /* "fo" is "Zm8" */
		"Zm9vYh",
		"Zm9vYmF",  /* "fooba" is "Zm9vYmE" */
		"Zm 9",
		"Zm9v\n",
		"Zm.v",
		"Zm9*",
		"Zm9\x80",
		"Zm9\xff",
	};
	uint8_t dec[16];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fg_b64url_decode(bad[i], strlen(bad[i]), dec, sizeof(dec)) !=
		    -1)
			fail_msg("should be rejected: \"%s\"", bad[i]);
	}
	/* A NUL inside the length is outside the alphabet. */
	assert_int_equal(fg_b64url_decode("Zm\0v", 4, dec, sizeof(dec)), -1);

	/* Every byte outside the alphabet, in each position of a quad. */
	for (int c = 0; c < 256; c++) {
		char s[4] = { 'Q', 'U', 'J', 'D' };

		if (c != 0 && strchr(url_alphabet, c) != NULL)
			continue;
		for (int pos = 0; pos < 4; pos++) {
			s[pos] = (char)c;
			assert_int_equal(fg_b64url_decode(s, 4, dec, sizeof(dec)),
					 -1);
			s[pos] = "QUJD"[pos];
		}
	}
}

static void test_b64_caps(void **state)
{
	static const uint8_t in[] = "foobar";
	char enc[16];
	uint8_t dec[16];

	(void)state;
	/* Encode needs room for the NUL. */
	assert_int_equal(fg_b64url_encode(in, 6, enc, 9), 8);
	assert_int_equal(fg_b64url_encode(in, 6, enc, 8), -1);
	assert_int_equal(fg_b64url_encode(in, 0, enc, 1), 0);
	assert_string_equal(enc, "");
	assert_int_equal(fg_b64url_encode(in, 0, enc, 0), -1);
	assert_int_equal(fg_b64url_encode(in, 1, NULL, 8), -1);

	/* Decode needs exactly the decoded length, and leaves out alone on
	 * failure. */
	memset(dec, 0xaa, sizeof(dec));
	assert_int_equal(fg_b64url_decode("Zm9vYmFy", 8, dec, 5), -1);
	assert_int_equal(dec[0], 0xaa);
	assert_int_equal(fg_b64url_decode("Zm9vYmFy", 8, dec, 6), 6);
	assert_int_equal(fg_b64url_decode("", 0, dec, 0), 0);
	assert_int_equal(fg_b64url_decode("", 0, NULL, 0), 0);
	memset(dec, 0xaa, sizeof(dec));
	assert_int_equal(fg_b64url_decode("Zm9vYh", 6, dec, sizeof(dec)), -1);
	assert_int_equal(dec[0], 0xaa);
}

static void test_b64_reads_only_n(void **state)
{
	char *heap = malloc(6);
	uint8_t dec[8];

	(void)state;
	assert_non_null(heap);
	memcpy(heap, "Zm9vYg", 6); /* no NUL */
	assert_int_equal(fg_b64url_decode(heap, 6, dec, sizeof(dec)), 4);
	assert_memory_equal(dec, "foob", 4);
	free(heap);
	/* Only the first n characters count. */
	assert_int_equal(fg_b64url_decode("Zm9v!!", 4, dec, sizeof(dec)), 3);
}

/* ---- sequencers ---------------------------------------------------- */

static void test_mode_name(void **state)
{
	(void)state;
	assert_string_equal(fg_mode_name(FG_MODE_EXCLUSIVE), "exclusive");
	assert_string_equal(fg_mode_name(FG_MODE_SHARED), "shared");
	assert_non_null(fg_mode_name((enum fg_mode)7));
}

static void test_seq_round_trip(void **state)
{
	static const char *const names[] = {
		"a", "orders/42", "x.y~z_w-v", "a/.../b", "A/Z/0/9",
	};
	static const uint64_t tokens[] = {
		1, 2, 9, 10, 99, 1000000, UINT64_C(4294967296), TOKEN_TOP,
	};
	static const enum fg_mode modes[] = { FG_MODE_EXCLUSIVE,
					      FG_MODE_SHARED };
	char s[FG_SEQ_MAX];
	struct fg_seq d;

	(void)state;
	for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
		for (size_t t = 0; t < sizeof(tokens) / sizeof(tokens[0]); t++) {
			for (size_t m = 0; m < 2; m++) {
				int len = encode_str(names[n], modes[m],
						     tokens[t], s);

				assert_true(len > 0);
				assert_int_equal(strlen(s), (size_t)len);
				memset(&d, 0x55, sizeof(d));
				assert_int_equal(fg_seq_decode(key, sizeof(key),
							       s, (size_t)len,
							       &d),
						 FG_SEQ_VALID);
				assert_string_equal(d.name, names[n]);
				assert_int_equal(d.name_len, strlen(names[n]));
				assert_int_equal(d.mode, modes[m]);
				assert_int_equal(d.token, tokens[t]);
			}
		}
	}
}

static void test_seq_format(void **state)
{
	char s[FG_SEQ_MAX], again[FG_SEQ_MAX], want[FG_SEQ_MAX];

	(void)state;
	/* Exactly the documented shape, with the MAC computed independently. */
	assert_true(encode_str("orders/42", FG_MODE_EXCLUSIVE, 17, s) > 0);
	build_signed("orders/42", 9, "x", "17", want, sizeof(want));
	assert_string_equal(s, want);
	assert_memory_equal(s, "fg1.b3JkZXJzLzQy.x.17.", 22);

	assert_true(encode_str("orders/42", FG_MODE_SHARED, TOKEN_TOP, s) > 0);
	build_signed("orders/42", 9, "s", "9007199254740991", want,
		     sizeof(want));
	assert_string_equal(s, want);

	/* Deterministic. */
	assert_true(encode_str("orders/42", FG_MODE_SHARED, TOKEN_TOP, again) >
		    0);
	assert_string_equal(s, again);
}

static void test_seq_longest(void **state)
{
	char name[FG_NAME_MAX + 1], s[FG_SEQ_MAX];
	struct fg_seq d;
	int len;

	(void)state;
	fill_name(name, FG_NAME_MAX);
	for (int m = 0; m < 2; m++) {
		len = encode_str(name, (enum fg_mode)m, TOKEN_TOP, s);
		assert_true(len > 0);
		assert_true(len < FG_SEQ_MAX);
		assert_memory_equal(s, "fg1.", 4);
		for (int i = 0; i < len; i++) {
			if (s[i] != '.' && strchr(url_alphabet, s[i]) == NULL)
				fail_msg("not URL-safe at %d: 0x%02x", i,
					 (unsigned char)s[i]);
		}
		assert_int_equal(decode_str(s, &d), FG_SEQ_VALID);
		assert_int_equal(d.name_len, FG_NAME_MAX);
		assert_string_equal(d.name, name);
	}
}

static void test_seq_encode_rejects(void **state)
{
	static const uint8_t long_key[FG_KEY_MAX + 1] = { 1 };
	char s[FG_SEQ_MAX], name[FG_NAME_MAX + 2];
	int len;

	(void)state;
	/* Tokens: 0 and FG_TOKEN_MAX and above. */
	assert_int_equal(encode_str("a", FG_MODE_EXCLUSIVE, 0, s), -1);
	assert_int_equal(encode_str("a", FG_MODE_EXCLUSIVE, FG_TOKEN_MAX, s),
			 -1);
	assert_int_equal(encode_str("a", FG_MODE_EXCLUSIVE, FG_TOKEN_MAX + 1,
				    s),
			 -1);
	assert_int_equal(encode_str("a", FG_MODE_EXCLUSIVE, UINT64_MAX, s), -1);

	/* Names. */
	assert_int_equal(encode_str("", FG_MODE_EXCLUSIVE, 1, s), -1);
	assert_int_equal(encode_str("a/../b", FG_MODE_EXCLUSIVE, 1, s), -1);
	assert_int_equal(encode_str("{a}", FG_MODE_EXCLUSIVE, 1, s), -1);
	fill_name(name, FG_NAME_MAX + 1);
	assert_int_equal(encode_str(name, FG_MODE_EXCLUSIVE, 1, s), -1);
	assert_int_equal(fg_seq_encode(key, sizeof(key), NULL, 1,
				       FG_MODE_EXCLUSIVE, 1, s, sizeof(s)),
			 -1);

	/* Mode. */
	assert_int_equal(encode_str("a", (enum fg_mode)2, 1, s), -1);

	/* Key lengths: FG_KEY_MIN and FG_KEY_MAX are the bounds. */
	assert_int_equal(fg_seq_encode(key, FG_KEY_MIN - 1, "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s, sizeof(s)),
			 -1);
	assert_true(fg_seq_encode(key, FG_KEY_MIN, "a", 1, FG_MODE_EXCLUSIVE,
				  1, s, sizeof(s)) > 0);
	assert_true(fg_seq_encode(long_key, FG_KEY_MAX, "a", 1,
				  FG_MODE_EXCLUSIVE, 1, s, sizeof(s)) > 0);
	assert_int_equal(fg_seq_encode(long_key, FG_KEY_MAX + 1, "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s, sizeof(s)),
			 -1);
	assert_int_equal(fg_seq_encode(key, 0, "a", 1, FG_MODE_EXCLUSIVE, 1, s,
				       sizeof(s)),
			 -1);
	assert_int_equal(fg_seq_encode(NULL, sizeof(key), "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s, sizeof(s)),
			 -1);

	/* cap: the string plus its NUL, and out untouched when it is short. */
	len = encode_str("a", FG_MODE_EXCLUSIVE, 1, s);
	assert_true(len > 0);
	memset(s, '#', sizeof(s));
	assert_int_equal(fg_seq_encode(key, sizeof(key), "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s, (size_t)len),
			 -1);
	assert_int_equal(s[0], '#');
	assert_int_equal(fg_seq_encode(key, sizeof(key), "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s, 0),
			 -1);
	assert_int_equal(fg_seq_encode(key, sizeof(key), "a", 1,
				       FG_MODE_EXCLUSIVE, 1, s,
				       (size_t)len + 1),
			 len);
}

/* Changing any one byte of a sequencer to any other value never verifies. */
static void test_seq_flip_every_char(void **state)
{
	char s[FG_SEQ_MAX], t[FG_SEQ_MAX];
	struct fg_seq d;
	int len;

	(void)state;
	len = encode_str("locks/flip.me", FG_MODE_SHARED, 123456789, s);
	assert_true(len > 0);
	for (int i = 0; i < len; i++) {
		for (int c = 0; c < 256; c++) {
			if (c == (unsigned char)s[i])
				continue;
			memcpy(t, s, (size_t)len);
			t[i] = (char)c;
			if (fg_seq_decode(key, sizeof(key), t, (size_t)len, &d) ==
			    FG_SEQ_VALID)
				fail_msg("valid after s[%d] = 0x%02x", i, c);
		}
	}
}

/* Well-formed fields with another sequencer's MAC are forgeries. */
static void test_seq_swap_fields(void **state)
{
	char s[FG_SEQ_MAX], head[FG_SEQ_MAX], mac[64], t[FG_SEQ_MAX * 2];
	char name64[64];
	struct fg_seq d;

	(void)state;
	assert_true(encode_str("bank/acct", FG_MODE_EXCLUSIVE, 500, s) > 0);
	split_last_dot(s, head, mac);
	assert_int_equal(fg_b64url_encode((const uint8_t *)"bank/acct", 9,
					  name64, sizeof(name64)),
			 12);

	snprintf(t, sizeof(t), "fg1.%s.x.500.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_VALID);

	/* Another name. */
	assert_int_equal(fg_b64url_encode((const uint8_t *)"bank/acce", 9,
					  name64, sizeof(name64)),
			 12);
	snprintf(t, sizeof(t), "fg1.%s.x.500.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
	assert_int_equal(fg_b64url_encode((const uint8_t *)"bank/acct/x", 11,
					  name64, sizeof(name64)),
			 15);
	snprintf(t, sizeof(t), "fg1.%s.x.500.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);

	assert_int_equal(fg_b64url_encode((const uint8_t *)"bank/acct", 9,
					  name64, sizeof(name64)),
			 12);
	/* Another mode. */
	snprintf(t, sizeof(t), "fg1.%s.s.500.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
	/* Other tokens. */
	snprintf(t, sizeof(t), "fg1.%s.x.501.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
	snprintf(t, sizeof(t), "fg1.%s.x.50.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
	snprintf(t, sizeof(t), "fg1.%s.x.5000.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
	snprintf(t, sizeof(t), "fg1.%s.x.9007199254740991.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);

	/* A well-formed MAC of all zero bits. */
	snprintf(t, sizeof(t), "%s.%s", head,
		 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
	assert_int_equal(decode_str(t, &d), FG_SEQ_FORGED);
}

static void test_seq_wrong_key(void **state)
{
	static const uint8_t long_key[FG_KEY_MAX + 1] = { 0 };
	char s[FG_SEQ_MAX];
	struct fg_seq d;
	int len;

	(void)state;
	len = encode_str("k/1", FG_MODE_EXCLUSIVE, 7, s);
	assert_true(len > 0);
	assert_int_equal(fg_seq_decode(other_key, sizeof(other_key), s,
				       (size_t)len, &d),
			 FG_SEQ_FORGED);
	/* A prefix of the right key is another key. */
	assert_int_equal(fg_seq_decode(key, FG_KEY_MIN, s, (size_t)len, &d),
			 FG_SEQ_FORGED);
	/* Key length out of range: FORGED, never VALID. */
	assert_int_equal(fg_seq_decode(key, FG_KEY_MIN - 1, s, (size_t)len, &d),
			 FG_SEQ_FORGED);
	assert_int_equal(fg_seq_decode(key, 0, s, (size_t)len, &d),
			 FG_SEQ_FORGED);
	assert_int_equal(fg_seq_decode(NULL, sizeof(key), s, (size_t)len, &d),
			 FG_SEQ_FORGED);
	assert_int_equal(fg_seq_decode(long_key, FG_KEY_MAX + 1, s,
				       (size_t)len, &d),
			 FG_SEQ_FORGED);

	/* Sequencers signed with a 16- and a 64-byte key verify under them. */
	assert_true(fg_seq_encode(key, FG_KEY_MIN, "k/1", 3, FG_MODE_SHARED, 7,
				  s, sizeof(s)) > 0);
	assert_int_equal(fg_seq_decode(key, FG_KEY_MIN, s, strlen(s), &d),
			 FG_SEQ_VALID);
	assert_int_equal(decode_str(s, &d), FG_SEQ_FORGED);
	assert_true(fg_seq_encode(long_key, FG_KEY_MAX, "k/1", 3,
				  FG_MODE_SHARED, 7, s, sizeof(s)) > 0);
	assert_int_equal(fg_seq_decode(long_key, FG_KEY_MAX, s, strlen(s), &d),
			 FG_SEQ_VALID);
}

static void test_seq_truncated(void **state)
{
	char s[FG_SEQ_MAX];
	struct fg_seq d;
	int len;

	(void)state;
	len = encode_str("trunc/me", FG_MODE_EXCLUSIVE, 31337, s);
	assert_true(len > 0);
	for (int n = 0; n < len; n++) {
		/* An exact-size heap copy: any read past n is an ASan error. */
		char *heap = malloc(n > 0 ? (size_t)n : 1);

		assert_non_null(heap);
		memcpy(heap, s, (size_t)n);
		if (fg_seq_decode(key, sizeof(key), heap, (size_t)n, &d) !=
		    FG_SEQ_MALFORMED)
			fail_msg("prefix of %d bytes not MALFORMED", n);
		free(heap);
	}
	assert_int_equal(fg_seq_decode(key, sizeof(key), NULL, 0, &d),
			 FG_SEQ_MALFORMED);
	assert_int_equal(fg_seq_decode(key, sizeof(key), s, (size_t)len, NULL),
			 FG_SEQ_MALFORMED);
}

static void test_seq_not_nul_terminated(void **state)
{
	char s[FG_SEQ_MAX], longer[FG_SEQ_MAX + 16];
	struct fg_seq d;
	char *heap;
	int len;

	(void)state;
	len = encode_str("no/nul", FG_MODE_SHARED, 99, s);
	assert_true(len > 0);

	heap = malloc((size_t)len);
	assert_non_null(heap);
	memcpy(heap, s, (size_t)len);
	assert_int_equal(fg_seq_decode(key, sizeof(key), heap, (size_t)len,
				       &d),
			 FG_SEQ_VALID);
	assert_string_equal(d.name, "no/nul");
	assert_int_equal(d.token, 99);
	/* Malformed content in an unterminated buffer. */
	heap[len - 1] = '=';
	assert_int_equal(fg_seq_decode(key, sizeof(key), heap, (size_t)len,
				       &d),
			 FG_SEQ_MALFORMED);
	free(heap);

	/* What follows s + len is not looked at... */
	snprintf(longer, sizeof(longer), "%s.extra", s);
	assert_int_equal(fg_seq_decode(key, sizeof(key), longer, (size_t)len,
				       &d),
			 FG_SEQ_VALID);
	/* ...but inside the length it is. */
	assert_int_equal(decode_str(longer, &d), FG_SEQ_MALFORMED);
}

static void test_seq_structure(void **state)
{
	char s[FG_SEQ_MAX], head[FG_SEQ_MAX], mac[64], t[FG_SEQ_MAX * 2];
	char name64[64];
	struct fg_seq d;
	int len;

	(void)state;
	len = encode_str("st/ruct", FG_MODE_EXCLUSIVE, 12, s);
	assert_true(len > 0);
	split_last_dot(s, head, mac);
	assert_true(fg_b64url_encode((const uint8_t *)"st/ruct", 7, name64,
				     sizeof(name64)) > 0);

	/* Extra or missing fields, empty fields. */
	snprintf(t, sizeof(t), "%s.x", s);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.", s);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), ".%s", s);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.%s.x.12.12.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.%s.x.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1..x.12.%s", mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.%s..12.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.%s.x..%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.%s.x.12.", name64);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), ".%s.x.12.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	assert_int_equal(decode_str("....", &d), FG_SEQ_MALFORMED);
	assert_int_equal(decode_str("", &d), FG_SEQ_MALFORMED);
	assert_int_equal(decode_str("fg1", &d), FG_SEQ_MALFORMED);

	/* Wrong prefix. */
	static const char *const prefixes[] = { "fg2", "FG1", "fg", "fg10",
						"gf1", "fg1 " };
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		snprintf(t, sizeof(t), "%s.%s.x.12.%s", prefixes[i], name64,
			 mac);
		assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	}

	/* Mode field. */
	static const char *const modes[] = { "X", "S", "e", "xx", "xs", "0" };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(t, sizeof(t), "fg1.%s.%s.12.%s", name64, modes[i],
			 mac);
		assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	}

	/* MAC field: wrong lengths, padding, non-canonical last char. */
	snprintf(t, sizeof(t), "%s.%.42s", head, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%sA", head, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%sAA", head, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%sAAAA", head, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%s=", head, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%.40s", head, mac); /* 30 bytes */
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "%s.%.42sB", head, mac); /* bits 0..1 set */
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);

	/* Name field: standard base64 alphabet, padding. */
	snprintf(t, sizeof(t), "fg1.%s=.x.12.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	snprintf(t, sizeof(t), "fg1.c3Qvcn+jdA.x.12.%s", mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);

	snprintf(t, sizeof(t), "fg1.%s.x.12.%s", name64, mac);
	assert_int_equal(decode_str(t, &d), FG_SEQ_VALID);
}

/* Non-canonical or out-of-range fields stay MALFORMED even when signed. */
static void test_seq_signed_but_malformed(void **state)
{
	static const char *const tokens[] = {
		"0",
		"00",
		"01",
		"007",
		"+1",
		"-1",
		" 1",
		"1 ",
		"1a",
		"0x1",
		"1e3",
		"9007199254740992",     /* FG_TOKEN_MAX */
		"9007199254740993",
		"18446744073709551615", /* UINT64_MAX */
		"18446744073709551617", /* wraps to 1 in 64 bits */
		"99999999999999999999999999",
		"00000000000000001",
		"\xd9\xa1", /* ARABIC-INDIC DIGIT ONE */
	};
	static const char *const names[] = {
		"a/../b", "/a", "a/", ".", "..", "a//b", "a b", "{a}", "a%2f",
	};
	char t[FG_SEQ_MAX * 2], big[FG_NAME_MAX + 2];
	struct fg_seq d;

	(void)state;
	build_signed("ok", 2, "x", "12", t, sizeof(t));
	assert_int_equal(decode_str(t, &d), FG_SEQ_VALID);

	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		build_signed("ok", 2, "x", tokens[i], t, sizeof(t));
		if (decode_str(t, &d) != FG_SEQ_MALFORMED)
			fail_msg("token \"%s\" not MALFORMED", tokens[i]);
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		build_signed(names[i], strlen(names[i]), "x", "12", t,
			     sizeof(t));
		if (decode_str(t, &d) != FG_SEQ_MALFORMED)
			fail_msg("name \"%s\" not MALFORMED", names[i]);
	}
	/* A NUL inside the name would make the MAC input ambiguous. */
	build_signed("a\0b", 3, "x", "12", t, sizeof(t));
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	/* A name one byte too long. */
	fill_name(big, FG_NAME_MAX + 1);
	build_signed(big, FG_NAME_MAX + 1, "x", "12", t, sizeof(t));
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
	/* The longest name and token still verify. */
	fill_name(big, FG_NAME_MAX);
	build_signed(big, FG_NAME_MAX, "s", "9007199254740991", t, sizeof(t));
	assert_int_equal(decode_str(t, &d), FG_SEQ_VALID);
	assert_int_equal(d.mode, FG_MODE_SHARED);
	assert_int_equal(d.token, TOKEN_TOP);
	/* Mode letters other than x and s. */
	build_signed("ok", 2, "e", "12", t, sizeof(t));
	assert_int_equal(decode_str(t, &d), FG_SEQ_MALFORMED);
}

static void test_seq_huge_input(void **state)
{
	size_t n = (size_t)1 << 20;
	char *huge = malloc(n);
	char s[FG_SEQ_MAX];
	struct fg_seq d;
	int len;

	(void)state;
	assert_non_null(huge);
	len = encode_str("huge", FG_MODE_EXCLUSIVE, 5, s);
	assert_true(len > 0);
	memset(huge, 'A', n);
	memcpy(huge, s, (size_t)len);
	assert_int_equal(fg_seq_decode(key, sizeof(key), huge, (size_t)len,
				       &d),
			 FG_SEQ_VALID);
	assert_int_equal(fg_seq_decode(key, sizeof(key), huge, FG_SEQ_MAX - 1,
				       &d),
			 FG_SEQ_MALFORMED);
	assert_int_equal(fg_seq_decode(key, sizeof(key), huge, FG_SEQ_MAX, &d),
			 FG_SEQ_MALFORMED);
	assert_int_equal(fg_seq_decode(key, sizeof(key), huge, n, &d),
			 FG_SEQ_MALFORMED);
	/* A length far beyond the buffer is refused before anything is read. */
	assert_int_equal(fg_seq_decode(key, sizeof(key), s, SIZE_MAX, &d),
			 FG_SEQ_MALFORMED);
	free(huge);
}

/* ---- leases -------------------------------------------------------- */

static int cmp_lease(const void *a, const void *b)
{
	return strcmp(a, b);
}

/*
 * The MAC under keys that change between calls (a rotation, a gateway that
 * checks a token signed before it), of the shortest and longest lengths,
 * from more than one thread: always HMAC-SHA256 as OpenSSL's HMAC()
 * computes it, never the previous key's.
 */
static void mac_of(const uint8_t *k, size_t klen, const char *name,
		   char out[64])
{
	uint8_t msg[64], mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	size_t n = strlen(name), p = 0;

	memcpy(msg, "fg1", 4);
	p = 4;
	memcpy(msg + p, name, n);
	p += n;
	memcpy(msg + p, "\0x\0" "7", 4);
	p += 4;
	assert_non_null(HMAC(EVP_sha256(), k, (int)klen, msg, p, mac, &mac_len));
	assert_int_equal(fg_b64url_encode(mac, mac_len, out, 64), 43);
}

static void *keys_round(void *arg)
{
	uint8_t k64[FG_KEY_MAX];
	const struct { const uint8_t *k; size_t len; } keys[] = {
		{ key, sizeof(key) }, { other_key, sizeof(other_key) },
		{ key, FG_KEY_MIN }, { k64, sizeof(k64) }, { key, sizeof(key) },
	};
	char s[FG_SEQ_MAX], want[64];
	struct fg_seq d;

	for (size_t i = 0; i < sizeof(k64); i++)
		k64[i] = (uint8_t)(0xa0 + i);
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			int len = fg_seq_encode(keys[i].k, keys[i].len, "a/b", 3,
						FG_MODE_EXCLUSIVE, 7, s, sizeof(s));
			assert_true(len > 0);
			mac_of(keys[i].k, keys[i].len, "a/b", want);
			assert_string_equal(strrchr(s, '.') + 1, want);
			assert_int_equal(fg_seq_decode(keys[i].k, keys[i].len, s,
						       (size_t)len, &d),
					 FG_SEQ_VALID);
			/* the next key that differs (the last is the first again) */
			size_t j = (i + 1) % (sizeof(keys) / sizeof(keys[0]) - 1);
			assert_int_equal(fg_seq_decode(keys[j].k, keys[j].len, s,
						       (size_t)len, &d),
					 FG_SEQ_FORGED);
		}
	}
	(void)arg;
	return NULL;
}

static void test_seq_keys_change(void **state)
{
	pthread_t t[3];

	(void)state;
	keys_round(NULL);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, keys_round, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
}

static void test_lease_new(void **state)
{
	enum { N = 1000 };
	char (*leases)[FG_LEASE_LEN + 1] = calloc(N, FG_LEASE_LEN + 1);

	(void)state;
	assert_non_null(leases);
	for (int i = 0; i < N; i++) {
		assert_int_equal(fg_lease_new(leases[i]), 0);
		assert_int_equal(strlen(leases[i]), FG_LEASE_LEN);
		assert_int_equal(strspn(leases[i], url_alphabet), FG_LEASE_LEN);
		assert_true(fg_lease_wellformed(leases[i], FG_LEASE_LEN));
	}
	qsort(leases, N, FG_LEASE_LEN + 1, cmp_lease);
	for (int i = 1; i < N; i++) {
		if (strcmp(leases[i - 1], leases[i]) == 0)
			fail_msg("duplicate lease %s", leases[i]);
	}
	free(leases);
}

/* A fork hands the child no lease the parent will also hand out: both
 * draw their next leases after the fork, and they differ. */
static void test_lease_new_after_fork(void **state)
{
	enum { N = 8 };
	char first[FG_LEASE_LEN + 1];
	char mine[N][FG_LEASE_LEN + 1], theirs[N][FG_LEASE_LEN + 1];
	int fds[2];
	pid_t pid;
	int status;

	(void)state;
	/* the pool holds unused leases from here on */
	assert_int_equal(fg_lease_new(first), 0);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char l[N][FG_LEASE_LEN + 1];
		int ok = 1;
		for (int i = 0; i < N; i++)
			ok &= fg_lease_new(l[i]) == 0;
		ok &= write(fds[1], l, sizeof(l)) == (ssize_t)sizeof(l);
		_exit(ok ? 0 : 1);
	}
	close(fds[1]);
	for (int i = 0; i < N; i++)
		assert_int_equal(fg_lease_new(mine[i]), 0);
	size_t got = 0;
	while (got < sizeof(theirs)) {
		ssize_t n = read(fds[0], (char *)theirs + got, sizeof(theirs) - got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < N; j++) {
			if (strcmp(mine[i], theirs[j]) == 0)
				fail_msg("parent and child both made lease %s", mine[i]);
		}
	}
}

static void test_lease_wellformed(void **state)
{
	char l[FG_LEASE_LEN + 2];

	(void)state;
	assert_true(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAAA", 22));
	assert_true(fg_lease_wellformed("_____________________w", 22));
	assert_true(fg_lease_wellformed("-_-_-_-_-_-_-_-_-_-_-Q", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAA", 21));
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAAAA", 23));
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAAAAA", 24));
	assert_false(fg_lease_wellformed("", 0));
	assert_false(fg_lease_wellformed(NULL, 22));
	/* Outside the alphabet. */
	assert_false(fg_lease_wellformed("AAAAAAAAAA+AAAAAAAAAAA", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAA/AAAAAAAAAAA", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAA==", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAA.AAAAAAAAAAA", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAA\0AAAAAAAAAAA", 22));
	/* The last character carries 2 bits: only A, Q, g, w are canonical. */
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAAB", 22));
	assert_false(fg_lease_wellformed("AAAAAAAAAAAAAAAAAAAAA_", 22));
	/* Only s[0..len) counts. */
	assert_int_equal(fg_lease_new(l), 0);
	l[FG_LEASE_LEN] = '+';
	l[FG_LEASE_LEN + 1] = '\0';
	assert_true(fg_lease_wellformed(l, FG_LEASE_LEN));
	assert_false(fg_lease_wellformed(l, FG_LEASE_LEN + 1));
	assert_false(fg_lease_wellformed(l, FG_LEASE_LEN - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_b64_vectors),
		cmocka_unit_test(test_b64_url_alphabet),
		cmocka_unit_test(test_b64_round_trip),
		cmocka_unit_test(test_b64_rejects),
		cmocka_unit_test(test_b64_caps),
		cmocka_unit_test(test_b64_reads_only_n),
		cmocka_unit_test(test_mode_name),
		cmocka_unit_test(test_seq_round_trip),
		cmocka_unit_test(test_seq_format),
		cmocka_unit_test(test_seq_longest),
		cmocka_unit_test(test_seq_encode_rejects),
		cmocka_unit_test(test_seq_flip_every_char),
		cmocka_unit_test(test_seq_swap_fields),
		cmocka_unit_test(test_seq_wrong_key),
		cmocka_unit_test(test_seq_truncated),
		cmocka_unit_test(test_seq_not_nul_terminated),
		cmocka_unit_test(test_seq_structure),
		cmocka_unit_test(test_seq_signed_but_malformed),
		cmocka_unit_test(test_seq_huge_input),
		cmocka_unit_test(test_seq_keys_change),
		cmocka_unit_test(test_lease_new),
		cmocka_unit_test(test_lease_new_after_fork),
		cmocka_unit_test(test_lease_wellformed),
	};

	return cmocka_run_group_tests_name("sequencer", tests, NULL, NULL);
}
