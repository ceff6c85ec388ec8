/*
 * fuzz_authfile - the auth-file reader (gateway/base/auth.c, fg_authtab_parse).
 *
 * Properties:
 *  - it returns 0 and a table, or -1 with *out untouched and a message
 *    "line N: ..." of printable ASCII (it goes into a log line as is);
 *  - the message never depends on a credential: the same input with the
 *    hex digits after every "sha256:" replaced one for one (a nibble
 *    permutation, so equal digests stay equal) gives the same result and
 *    the same message, byte for byte;
 *  - after 0: at most 10000 principals, valid names in strictly increasing
 *    order (so unique), fg_authtab_at() ends at the count, by_cert finds
 *    every principal by its name (a certificate names key principals
 *    too), and by_key never finds a cert principal;
 *  - after 0, rights agree with a reference written here from the
 *    contract: for every principal line of the input, fg_principal_may()
 *    on each right and on names made from the line's prefixes (the prefix,
 *    longer, shorter, "", "*") is true exactly when a RIGHT:P of the line
 *    includes that right (lock includes observe and read, admin includes
 *    lock) and P is * or starts the name; metrics exactly when the line
 *    says it; fg_principal_may_prefix() is the same check on the prefix;
 *  - after 0, the input with one more principal line for a known key
 *    parses (unless that name or key is already there) and by_key finds
 *    that principal with that key;
 *  - every table is freed by its last unref (LeakSanitizer).
 */
#include <stdbool.h>
#include <string.h>

#include <openssl/sha.h>

#include "base/auth.h"
#include "base/text.h"
#include "fuzz.h"

#define KNOWN_NAME "fuzz.known"
#define KNOWN_KEY "fuzz-known-key"

static char known_line[128];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	(void)argc;
	(void)argv;
	SHA256((const unsigned char *)KNOWN_KEY, strlen(KNOWN_KEY), d);
	int n = snprintf(known_line, sizeof(known_line), "\n" KNOWN_NAME " sha256:");
	for (size_t i = 0; i < sizeof(d); i++)
		n += snprintf(known_line + n, sizeof(known_line) - (size_t)n, "%02X", d[i]);
	snprintf(known_line + n, sizeof(known_line) - (size_t)n, " lock:k/\n");
	return 0;
}

static bool blank(uint8_t c)
{
	return c == ' ' || c == '\t';
}

/* The input with every hex digit after each "sha256:" (up to a blank or
 * the line's end) replaced by another, v -> 7v+3 mod 16, its case kept
 * where it has one. */
static void permute_digests(const uint8_t *in, uint8_t *out, size_t n)
{
	static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
	memcpy(out, in, n);
	/* the tags are looked for in the text as it was */
	for (size_t i = 0; i + 7 <= n; i++) {
		if (memcmp(in + i, "sha256:", 7) != 0)
			continue;
		for (size_t k = i + 7; k < n && !blank(in[k]) && in[k] != '\n'; k++) {
			int v = fg_hexval(in[k]);
			if (v < 0)
				continue;
			bool up = in[k] >= 'A' && in[k] <= 'F';
			out[k] = (uint8_t)(up ? upper : lower)[(7 * v + 3) & 15];
		}
	}
}

static void check_message(const char *err)
{
	PROPERTY(strncmp(err, "line ", 5) == 0);
	for (const char *p = err; *p; p++)
		PROPERTY(*p >= 0x20 && *p <= 0x7e);
}

/* ---- the reference of rights ---------------------------------------- */

struct tok {
	const uint8_t *s;
	size_t n;
};

/* The fields of a line (a valid one: the table parsed). */
static size_t fields(const uint8_t *s, size_t n, struct tok *f, size_t cap)
{
	size_t nf = 0, i = 0;
	if (n > 0 && s[n - 1] == '\r')
		n--;
	for (;;) {
		while (i < n && blank(s[i]))
			i++;
		if (i == n || s[i] == '#')
			return nf;
		size_t b = i;
		while (i < n && !blank(s[i]))
			i++;
		PROPERTY(nf < cap);
		f[nf++] = (struct tok){ s + b, i - b };
	}
}

static int right_of(struct tok t)
{
	static const char *words[] = { "observe", "lock", "admin", "read" };
	const uint8_t *c = memchr(t.s, ':', t.n);
	if (!c)
		return -1;
	for (int r = 0; r < 4; r++)
		if ((size_t)(c - t.s) == strlen(words[r]) && memcmp(t.s, words[r], strlen(words[r])) == 0)
			return r;
	PROPERTY(false); /* the table parsed, so every right is known */
	return -1;
}

static bool ref_includes(int held, int want)
{
	return held == want ||
	       (held == FG_RIGHT_ADMIN && want != FG_RIGHT_METRICS) ||
	       (held == FG_RIGHT_LOCK && (want == FG_RIGHT_OBSERVE || want == FG_RIGHT_READ));
}

static bool ref_may(const struct tok *f, size_t nf, int r, const char *name)
{
	for (size_t i = 2; i < nf; i++) {
		if (f[i].n == 7 && memcmp(f[i].s, "metrics", 7) == 0) {
			if (r == FG_RIGHT_METRICS)
				return true;
			continue;
		}
		int held = right_of(f[i]);
		const uint8_t *p = memchr(f[i].s, ':', f[i].n) + 1;
		size_t pl = f[i].n - (size_t)(p - f[i].s);
		if (r == FG_RIGHT_METRICS || !ref_includes(held, r))
			continue;
		if ((pl == 1 && p[0] == '*') ||
		    (strlen(name) >= pl && memcmp(name, p, pl) == 0))
			return true;
	}
	return false;
}

static const struct fg_principal *find(const struct fg_authtab *t, const uint8_t *s, size_t n)
{
	size_t lo = 0, hi = fg_authtab_count(t);
	char name[FG_PRINCIPAL_MAX + 1];
	PROPERTY(n <= FG_PRINCIPAL_MAX);
	memcpy(name, s, n);
	name[n] = '\0';
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(fg_principal_name(fg_authtab_at(t, mid)), name);
		if (c == 0)
			return fg_authtab_at(t, mid);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	PROPERTY(false); /* every line's principal is in the table */
	return NULL;
}

static void check_name(const struct fg_principal *p, const struct tok *f, size_t nf,
		       const char *name)
{
	for (int r = 0; r < FG_RIGHT_COUNT; r++) {
		bool want = ref_may(f, nf, r, name);
		PROPERTY(fg_principal_may(p, (enum fg_right)r, name) == want);
		PROPERTY(fg_principal_may_prefix(p, (enum fg_right)r, name) == want);
	}
}

static void check_rights(const struct fg_authtab *t, const uint8_t *data, size_t size)
{
	struct tok f[2 + FG_AUTH_RIGHTS_MAX];
	char name[FG_AUTH_PREFIX_MAX + 2];
	size_t lines = 0;

	for (size_t i = 0; i < size;) {
		const uint8_t *nl = memchr(data + i, '\n', size - i);
		size_t end = nl ? (size_t)(nl - data) : size;
		size_t nf = fields(data + i, end - i, f, 2 + FG_AUTH_RIGHTS_MAX);
		i = end + 1;
		if (nf == 0)
			continue;
		lines++;
		const struct fg_principal *p = find(t, f[0].s, f[0].n);
		PROPERTY(fg_principal_is_cert(p) == (f[1].n == 4));
		check_name(p, f, nf, "");
		check_name(p, f, nf, "*");
		check_name(p, f, nf, "a");
		for (size_t k = 2; k < nf; k++) {
			const uint8_t *c = memchr(f[k].s, ':', f[k].n);
			if (!c)
				continue;
			size_t pl = f[k].n - (size_t)(c + 1 - f[k].s);
			memcpy(name, c + 1, pl);
			name[pl] = '\0';
			check_name(p, f, nf, name);
			name[pl] = 'x';
			name[pl + 1] = '\0';
			check_name(p, f, nf, name);
			name[pl - 1] = '\0';
			check_name(p, f, nf, name);
		}
	}
	PROPERTY(lines == fg_authtab_count(t));
}

/* ---- the table ------------------------------------------------------ */

static void check_table(const struct fg_authtab *t, const uint8_t *data, size_t size)
{
	size_t n = fg_authtab_count(t);
	PROPERTY(n <= FG_AUTH_PRINCIPALS_MAX);
	PROPERTY(fg_authtab_at(t, n) == NULL);
	for (size_t i = 0; i < n; i++) {
		const struct fg_principal *p = fg_authtab_at(t, i);
		const char *name = fg_principal_name(p);
		PROPERTY(fg_auth_name_valid(name, strlen(name)));
		if (i > 0)
			PROPERTY(strcmp(fg_principal_name(fg_authtab_at(t, i - 1)), name) < 0);
		PROPERTY(fg_authtab_by_cert(t, name) == p);
		const struct fg_principal *k = fg_authtab_by_key(t, name, strlen(name));
		PROPERTY(k == NULL || !fg_principal_is_cert(k));
	}
	const struct fg_principal *k = fg_authtab_by_key(t, (const char *)data, size);
	PROPERTY(k == NULL || !fg_principal_is_cert(k));
	check_rights(t, data, size);
}

static void check_known_key(const uint8_t *data, size_t size)
{
	size_t ll = strlen(known_line);
	uint8_t *text = malloc(size + ll);
	PROPERTY(text != NULL);
	memcpy(text, data, size);
	memcpy(text + size, known_line, ll);
	struct fg_authtab *t = NULL;
	char err[512] = "";
	if (fg_authtab_parse((const char *)text, size + ll, &t, err, sizeof(err)) == 0) {
		const struct fg_principal *p = fg_authtab_by_key(t, KNOWN_KEY, strlen(KNOWN_KEY));
		PROPERTY(p != NULL && strcmp(fg_principal_name(p), KNOWN_NAME) == 0);
		PROPERTY(fg_principal_may(p, FG_RIGHT_LOCK, "k/1"));
		PROPERTY(fg_authtab_by_key(t, KNOWN_KEY, strlen(KNOWN_KEY) - 1) != p);
		fg_authtab_unref(t);
	} else {
		/* only a name or key already there */
		PROPERTY(strstr(err, "'" KNOWN_NAME "'") != NULL);
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char untouched;
	struct fg_authtab *t = (struct fg_authtab *)&untouched, *t2 = NULL;
	char err[512] = "", err2[512] = "";

	int r = fg_authtab_parse((const char *)data, size, &t, err, sizeof(err));
	PROPERTY(r == 0 || r == -1);

	uint8_t *copy = malloc(size ? size : 1);
	PROPERTY(copy != NULL);
	permute_digests(data, copy, size);
	int r2 = fg_authtab_parse((const char *)copy, size, &t2, err2, sizeof(err2));
	PROPERTY(r2 == r);
	free(copy);

	if (r != 0) {
		PROPERTY(t == (struct fg_authtab *)&untouched && t2 == NULL);
		check_message(err);
		PROPERTY(strcmp(err, err2) == 0);
		return 0;
	}
	PROPERTY(fg_authtab_count(t) == fg_authtab_count(t2));
	for (size_t i = 0; i < fg_authtab_count(t); i++)
		PROPERTY(strcmp(fg_principal_name(fg_authtab_at(t, i)),
				fg_principal_name(fg_authtab_at(t2, i))) == 0);
	fg_authtab_unref(t2);

	struct fg_authtab *held = fg_authtab_ref(t);
	PROPERTY(held == t);
	fg_authtab_unref(t);
	check_table(held, data, size);
	fg_authtab_unref(held);
	check_known_key(data, size);
	return 0;
}
