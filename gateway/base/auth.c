/*
 * auth.c - the auth-file's principals, their credentials and their
 * rights, and the Bearer credential of a request.
 *
 * Invariant: a table is one allocation (its header, its principals in name
 * order, their RIGHT:PREFIX rights, and the bytes of their names and
 * prefixes), made only once the whole text was found valid, never written
 * after fg_authtab_parse() returns it, and freed by the fg_authtab_unref()
 * that takes its count to 0. A key is held only as its SHA-256 and
 * compared in constant time; no error message carries a credential or a
 * byte that failed validation.
 *
 * The text is walked twice by the same code: once to check it and size
 * the table, once to fill it, so that what is counted and what is written
 * cannot disagree.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "base/text.h"
#include "base/auth.h"
#include "fencegate/sequencer.h" /* fg_b64url_encode */

#define DIGEST_LEN SHA256_DIGEST_LENGTH
#define SHA256_TAG "sha256:"
#define SHA256_TAG_LEN (sizeof(SHA256_TAG) - 1)
#define KEY_RAW_BYTES 32

/* One RIGHT:PREFIX. `metrics` is a flag of its principal instead. */
struct fg_authright {
	const char *prefix; /* NUL-terminated, inside the table; NULL for `*` */
	size_t len;         /* bytes of prefix */
	enum fg_right right;
};

struct fg_principal {
	const char *name;              /* NUL-terminated, inside the table */
	const struct fg_authright *grants; /* ngrants of them, inside the table */
	size_t ngrants;
	unsigned line;                 /* where it stands, for error messages */
	bool cert;                     /* known by certificate; digest all 0 */
	bool metrics;
	unsigned char digest[DIGEST_LEN]; /* SHA-256 of its bearer key */
};

struct fg_authtab {
	atomic_uint refs;
	size_t n;
	struct fg_principal *p; /* n of them, sorted by name */
	/* then the grants and the name and prefix bytes */
};

static const char *const right_names[FG_RIGHT_COUNT] = {
	[FG_RIGHT_OBSERVE] = "observe",
	[FG_RIGHT_LOCK] = "lock",
	[FG_RIGHT_ADMIN] = "admin",
	[FG_RIGHT_READ] = "read",
	[FG_RIGHT_METRICS] = "metrics",
};

#define BIT(r) (1u << (r))
/* What holding a right allows (the contract's inclusions). */
static const unsigned includes[FG_RIGHT_COUNT] = {
	[FG_RIGHT_OBSERVE] = BIT(FG_RIGHT_OBSERVE),
	[FG_RIGHT_LOCK] = BIT(FG_RIGHT_LOCK) | BIT(FG_RIGHT_OBSERVE) | BIT(FG_RIGHT_READ),
	[FG_RIGHT_ADMIN] = BIT(FG_RIGHT_ADMIN) | BIT(FG_RIGHT_LOCK) |
			   BIT(FG_RIGHT_OBSERVE) | BIT(FG_RIGHT_READ),
	[FG_RIGHT_READ] = BIT(FG_RIGHT_READ),
	[FG_RIGHT_METRICS] = BIT(FG_RIGHT_METRICS),
};

const char *fg_right_name(enum fg_right r)
{
	return (unsigned)r < FG_RIGHT_COUNT ? right_names[r] : "unknown";
}

static void say(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	if (!err || n == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

/* ---- characters ----------------------------------------------------- */

static bool is_alnum(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9');
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool name_char(unsigned char c)
{
	return is_alnum(c) || c == '.' || c == '_' || c == '@' || c == '-';
}

/* The bytes of a lock name (fencegate/name.h). */
static bool prefix_char(unsigned char c)
{
	return is_alnum(c) || c == '.' || c == '_' || c == '~' || c == '/' ||
	       c == '-';
}

/* RFC 6750 b64token, less its trailing '='s. */
static bool b64token_char(unsigned char c)
{
	return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
	       c == '+' || c == '/';
}

bool fg_auth_name_valid(const char *name, size_t len)
{
	if (!name || len == 0 || len > FG_PRINCIPAL_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!name_char((unsigned char)name[i]))
			return false;
	return true;
}

static bool span_is(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* ---- one line ------------------------------------------------------- */

struct right_tok {
	enum fg_right right;
	const char *prefix; /* NULL for `*` and for metrics */
	size_t len;
};

/* A principal's line, as spans into the text. */
struct line {
	const char *name;
	size_t namelen;
	bool cert;
	unsigned char digest[DIGEST_LEN];
	size_t nrights;
	struct right_tok rights[FG_AUTH_RIGHTS_MAX];
};

#define RIGHTS_HELP "observe:P lock:P admin:P read:P metrics, P a prefix or *"

/* Reads right token s[0..len), the ith of principal `who` on line no. */
static int parse_right(const char *s, size_t len, unsigned no, size_t i,
		       const char *who, struct right_tok *out, char *err,
		       size_t errlen)
{
	const char *colon = memchr(s, ':', len);
	size_t wl = colon ? (size_t)(colon - s) : len;
	int r = -1;

	for (int k = 0; k < FG_RIGHT_COUNT; k++)
		if (span_is(s, wl, right_names[k]))
			r = k;
	if (r < 0) {
		/* A typo of a right word is echoed to help; anything else
		 * might be a key pasted in the wrong column. */
		bool plain = wl > 0 && wl <= 12;
		for (size_t k = 0; plain && k < wl; k++)
			plain = s[k] >= 'a' && s[k] <= 'z';
		if (plain)
			say(err, errlen, "line %u: unknown right '%.*s' for '%s' (rights: "
			    RIGHTS_HELP ")", no, (int)wl, s, who);
		else
			say(err, errlen, "line %u: right %zu of '%s' is not a right (rights: "
			    RIGHTS_HELP ")", no, i + 1, who);
		return -1;
	}
	if (r == FG_RIGHT_METRICS) {
		if (colon) {
			say(err, errlen, "line %u: right %zu of '%s': metrics takes no prefix",
			    no, i + 1, who);
			return -1;
		}
		*out = (struct right_tok){ .right = FG_RIGHT_METRICS };
		return 0;
	}
	if (!colon) {
		say(err, errlen, "line %u: right %zu of '%s': %s needs a prefix (%s:PREFIX, or %s:* "
		    "for every lock)", no, i + 1, who, right_names[r], right_names[r],
		    right_names[r]);
		return -1;
	}
	const char *p = colon + 1;
	size_t pl = len - wl - 1;
	*out = (struct right_tok){ .right = (enum fg_right)r };
	if (pl == 1 && p[0] == '*')
		return 0;
	bool ok = pl >= 1 && pl <= FG_AUTH_PREFIX_MAX;
	for (size_t k = 0; ok && k < pl; k++)
		ok = prefix_char((unsigned char)p[k]);
	if (!ok) {
		say(err, errlen, "line %u: right %zu of '%s' (%s): the prefix is neither * nor "
		    "1..%u bytes of A-Z a-z 0-9 . _ ~ / -", no, i + 1, who, right_names[r],
		    FG_AUTH_PREFIX_MAX);
		return -1;
	}
	out->prefix = p;
	out->len = pl;
	return 0;
}

/* Reads the credential s[0..len) of principal `who`. Never echoes it. */
static int parse_credential(const char *s, size_t len, unsigned no,
			    const char *who, struct line *l, char *err,
			    size_t errlen)
{
	if (span_is(s, len, "cert")) {
		l->cert = true;
		return 0;
	}
	if (len < SHA256_TAG_LEN || memcmp(s, SHA256_TAG, SHA256_TAG_LEN) != 0) {
		say(err, errlen, "line %u: the credential of '%s' is neither "
		    "sha256:<64 hex digits> nor cert", no, who);
		return -1;
	}
	s += SHA256_TAG_LEN;
	len -= SHA256_TAG_LEN;
	if (len != 2 * DIGEST_LEN) {
		say(err, errlen, "line %u: the credential of '%s' has %zu characters after "
		    "sha256:, not 64 hex digits", no, who, len);
		return -1;
	}
	for (size_t k = 0; k < DIGEST_LEN; k++) {
		int hi = fg_hexval((unsigned char)s[2 * k]);
		int lo = fg_hexval((unsigned char)s[2 * k + 1]);
		if (hi < 0 || lo < 0) {
			say(err, errlen, "line %u: the credential of '%s' has a character "
			    "after sha256: that is not a hex digit", no, who);
			return -1;
		}
		l->digest[k] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/*
 * Reads line no, s[0..len) without its '\n'. 1 and *l for a principal, 0
 * for a blank or comment line, -1 and err.
 */
static int parse_line(const char *s, size_t len, unsigned no, struct line *l,
		      char *err, size_t errlen)
{
	const char *f[2 + FG_AUTH_RIGHTS_MAX];
	size_t fl[2 + FG_AUTH_RIGHTS_MAX], nf = 0;

	if (len > 0 && s[len - 1] == '\r') /* a file written on Windows */
		len--;
	for (size_t i = 0;;) {
		while (i < len && is_blank(s[i]))
			i++;
		/* every field starts a line or follows a blank, so a '#'
		 * here starts a comment; one inside a field does not */
		if (i == len || s[i] == '#')
			break;
		size_t start = i;
		while (i < len && !is_blank(s[i]))
			i++;
		if (nf == 2 + FG_AUTH_RIGHTS_MAX) {
			say(err, errlen, "line %u: more than %u rights", no,
			    FG_AUTH_RIGHTS_MAX);
			return -1;
		}
		f[nf] = s + start;
		fl[nf++] = i - start;
	}
	if (nf == 0)
		return 0;

	memset(l, 0, sizeof(*l));
	if (!fg_auth_name_valid(f[0], fl[0])) {
		if (fl[0] > FG_PRINCIPAL_MAX)
			say(err, errlen, "line %u: the name is longer than %d bytes", no,
			    FG_PRINCIPAL_MAX);
		else
			say(err, errlen, "line %u: the name is not 1..%d bytes of "
			    "A-Z a-z 0-9 . _ @ -", no, FG_PRINCIPAL_MAX);
		return -1;
	}
	char who[FG_PRINCIPAL_MAX + 1];
	memcpy(who, f[0], fl[0]);
	who[fl[0]] = '\0';
	l->name = f[0];
	l->namelen = fl[0];
	if (nf < 2) {
		say(err, errlen, "line %u: '%s' has no credential (sha256:<64 hex digits> "
		    "or cert)", no, who);
		return -1;
	}
	if (parse_credential(f[1], fl[1], no, who, l, err, errlen))
		return -1;
	for (size_t i = 2; i < nf; i++)
		if (parse_right(f[i], fl[i], no, i - 2, who, &l->rights[l->nrights++],
				err, errlen))
			return -1;
	return 1;
}

/* ---- the table ------------------------------------------------------ */

/* Where the table's parts go: the counts so far, or in all. */
struct extent {
	size_t n;      /* principals */
	size_t ngrants;
	size_t nbytes; /* names and prefixes, with their NULs */
};

struct layout {
	size_t grants_at, bytes_at, size;
};

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static struct layout layout_of(const struct extent *e)
{
	struct layout lo;
	size_t p_at = align_up(sizeof(struct fg_authtab), alignof(struct fg_principal));
	lo.grants_at = align_up(p_at + e->n * sizeof(struct fg_principal),
				alignof(struct fg_authright));
	lo.bytes_at = lo.grants_at + e->ngrants * sizeof(struct fg_authright);
	lo.size = lo.bytes_at + e->nbytes;
	return lo;
}

static struct fg_principal *principals_of(struct fg_authtab *t)
{
	return (struct fg_principal *)((char *)t + align_up(sizeof(*t),
							    alignof(struct fg_principal)));
}

static char *copy_out(char *dst, const char *s, size_t len)
{
	memcpy(dst, s, len);
	dst[len] = '\0';
	return dst;
}

/* Counts what principal l takes into *at and, with t, writes it there. */
static void place(const struct line *l, unsigned no, struct fg_authtab *t,
		  const struct layout *lo, struct extent *at)
{
	struct fg_principal *p = NULL;
	struct fg_authright *g = NULL;
	char *b = NULL;
	if (t) {
		p = &t->p[at->n];
		g = (struct fg_authright *)((char *)t + lo->grants_at) + at->ngrants;
		b = (char *)t + lo->bytes_at + at->nbytes;
		p->name = copy_out(b, l->name, l->namelen);
		b += l->namelen + 1;
		p->grants = g;
		p->line = no;
		p->cert = l->cert;
		memcpy(p->digest, l->digest, DIGEST_LEN);
	}
	at->n++;
	at->nbytes += l->namelen + 1;
	for (size_t i = 0; i < l->nrights; i++) {
		const struct right_tok *r = &l->rights[i];
		if (r->right == FG_RIGHT_METRICS) {
			if (p)
				p->metrics = true;
			continue;
		}
		if (g) {
			g->right = r->right;
			g->len = r->len;
			g->prefix = r->prefix ? copy_out(b, r->prefix, r->len) : NULL;
			b += r->prefix ? r->len + 1 : 0;
			g++;
			p->ngrants++;
		}
		at->ngrants++;
		at->nbytes += r->prefix ? r->len + 1 : 0;
	}
}

/*
 * Walks the lines of text. Without t: checks every line and counts what
 * the table takes into *at. With t (allocated from such a count): fills
 * it, and cannot fail.
 */
static int walk(const char *text, size_t len, struct fg_authtab *t,
		const struct layout *lo, struct extent *at, char *err,
		size_t errlen)
{
	unsigned no = 0;
	struct line l;

	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		no++;
		if (end - i > FG_AUTH_LINE_MAX) {
			say(err, errlen, "line %u: longer than %u bytes", no, FG_AUTH_LINE_MAX);
			return -1;
		}
		if (memchr(text + i, '\0', end - i)) {
			say(err, errlen, "line %u: a NUL byte", no);
			return -1;
		}
		int r = parse_line(text + i, end - i, no, &l, err, errlen);
		if (r < 0)
			return -1;
		if (r > 0) {
			if (at->n == FG_AUTH_PRINCIPALS_MAX) {
				say(err, errlen, "line %u: more than %u principals", no,
				    FG_AUTH_PRINCIPALS_MAX);
				return -1;
			}
			place(&l, no, t, lo, at);
		}
		i = end + 1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct fg_principal *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Digests are compared with memcmp here: this orders the table's own
 * entries at load time, no presented key is involved. */
static int by_digest(const void *a, const void *b)
{
	const struct fg_principal *x = *(const struct fg_principal *const *)a;
	const struct fg_principal *y = *(const struct fg_principal *const *)b;
	int c = memcmp(x->digest, y->digest, DIGEST_LEN);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Sorts t->p by name and refuses a name or a key given twice, naming the
 * earliest line that repeats one. */
static int check_unique(struct fg_authtab *t, char *err, size_t errlen)
{
	const struct fg_principal *dup = NULL, *first = NULL;
	bool same_key = false;

	qsort(t->p, t->n, sizeof(*t->p), by_name);
	for (size_t i = 1; i < t->n; i++)
		if (strcmp(t->p[i - 1].name, t->p[i].name) == 0 &&
		    (!dup || t->p[i].line < dup->line)) {
			dup = &t->p[i];
			first = &t->p[i - 1];
		}

	const struct fg_principal **keyed = malloc((t->n ? t->n : 1) * sizeof(*keyed));
	if (!keyed) {
		say(err, errlen, "out of memory");
		return -1;
	}
	size_t nk = 0;
	for (size_t i = 0; i < t->n; i++)
		if (!t->p[i].cert)
			keyed[nk++] = &t->p[i];
	qsort(keyed, nk, sizeof(*keyed), by_digest);
	for (size_t i = 1; i < nk; i++)
		if (memcmp(keyed[i - 1]->digest, keyed[i]->digest, DIGEST_LEN) == 0 &&
		    (!dup || keyed[i]->line < dup->line)) {
			dup = keyed[i];
			first = keyed[i - 1];
			same_key = true;
		}
	free(keyed);

	if (!dup)
		return 0;
	if (same_key)
		say(err, errlen, "line %u: '%s' has the same key as '%s' on line %u",
		    dup->line, dup->name, first->name, first->line);
	else
		say(err, errlen, "line %u: the name '%s' is already on line %u",
		    dup->line, dup->name, first->line);
	return -1;
}

int fg_authtab_parse(const char *text, size_t len, struct fg_authtab **out,
		     char *err, size_t errlen)
{
	struct extent need = { 0 }, at = { 0 };

	if (len > FG_AUTH_FILE_MAX) {
		say(err, errlen, "larger than %u bytes", FG_AUTH_FILE_MAX);
		return -1;
	}
	if (len > 0 && !text) {
		say(err, errlen, "no text");
		return -1;
	}
	if (walk(text, len, NULL, NULL, &need, err, errlen))
		return -1;

	/* Owned by the references: the last fg_authtab_unref() frees it. */
	struct layout lo = layout_of(&need);
	struct fg_authtab *t = calloc(1, lo.size);
	if (!t) {
		say(err, errlen, "out of memory");
		return -1;
	}
	t->p = principals_of(t);
	if (walk(text, len, t, &lo, &at, err, errlen) || at.n != need.n ||
	    at.ngrants != need.ngrants || at.nbytes != need.nbytes) {
		say(err, errlen, "the two readings of the text disagree");
		goto error_table;
	}
	t->n = at.n;
	if (check_unique(t, err, errlen))
		goto error_table;
	atomic_init(&t->refs, 1);
	*out = t;
	return 0;

error_table:
	free(t);
	return -1;
}

int fg_authtab_load(const char *path, struct fg_authtab **out, char *err,
		    size_t errlen)
{
	struct stat st;
	char msg[256];
	int rc = -1;

	/* O_NONBLOCK: a FIFO put in its place must not hang a reload */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		say(err, errlen, "cannot read auth-file '%s': %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		say(err, errlen, "auth-file '%s' is not a regular file", path);
		goto error_fd;
	}
	/* One byte more than allowed, to see a file that is too long. */
	char *buf = malloc(FG_AUTH_FILE_MAX + 1);
	if (!buf) {
		say(err, errlen, "auth-file '%s': out of memory", path);
		goto error_fd;
	}
	size_t got = 0;
	while (got < FG_AUTH_FILE_MAX + 1) {
		ssize_t r = read(fd, buf + got, FG_AUTH_FILE_MAX + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			say(err, errlen, "cannot read auth-file '%s': %s", path,
			    strerror(errno));
			goto error_buf;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (fg_authtab_parse(buf, got, out, msg, sizeof(msg)) == 0)
		rc = 0;
	else
		say(err, errlen, "auth-file '%s': %s", path, msg);
error_buf:
	free(buf);
error_fd:
	close(fd);
	return rc;
}

struct fg_authtab *fg_authtab_ref(struct fg_authtab *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	return t;
}

void fg_authtab_unref(struct fg_authtab *t)
{
	/* acq_rel: every reader's last use happens before the free */
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		free(t);
}

size_t fg_authtab_count(const struct fg_authtab *t)
{
	return t ? t->n : 0;
}

const struct fg_principal *fg_authtab_at(const struct fg_authtab *t, size_t i)
{
	return t && i < t->n ? &t->p[i] : NULL;
}

/* ---- lookups -------------------------------------------------------- */

static uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

const struct fg_principal *fg_authtab_by_key(const struct fg_authtab *t,
					     const char *key, size_t len)
{
	unsigned char d[DIGEST_LEN];
	size_t hit = SIZE_MAX;

	if (!t || (!key && len > 0))
		return NULL;
	SHA256((const unsigned char *)(key ? key : ""), len, d);
	uint64_t w0 = load64(d), w1 = load64(d + 8), w2 = load64(d + 16),
		 w3 = load64(d + 24);
	/* Every digest is compared whole, a word at a time, and the match is
	 * kept by masking, not by a branch or an early return: the time does
	 * not depend on which principal matched or how much of a digest did.
	 * (Word-wide, it costs a few ns a principal where CRYPTO_memcmp's
	 * byte loop cost tens: an auth-file of hundreds stays cheap.) */
	for (size_t i = 0; i < t->n; i++) {
		const unsigned char *q = t->p[i].digest;
		uint64_t diff = (w0 ^ load64(q)) | (w1 ^ load64(q + 8)) |
				(w2 ^ load64(q + 16)) | (w3 ^ load64(q + 24));
		/* the top bit of (diff - 1) & ~diff is set exactly when diff is 0 */
		size_t eq = (size_t)((((diff - 1) & ~diff) >> 63) & 1);
		size_t mask = (size_t)0 - (eq & (size_t)!t->p[i].cert);
		hit = (hit & ~mask) | (i & mask);
	}
	w0 = w1 = w2 = w3 = 0;
	OPENSSL_cleanse(d, sizeof(d));
	return hit < t->n ? &t->p[hit] : NULL;
}

static int name_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct fg_principal *)elem)->name);
}

const struct fg_principal *fg_authtab_by_cert(const struct fg_authtab *t,
					      const char *cn)
{
	if (!t || !cn || t->n == 0)
		return NULL;
	const struct fg_principal *p = bsearch(cn, t->p, t->n, sizeof(*t->p), name_cmp);
	return p;
}

_Static_assert(sizeof(((struct fg_principal_id *)0)->digest) == DIGEST_LEN,
	       "a principal id holds a digest");

void fg_principal_id_of(const struct fg_principal *p, struct fg_principal_id *id)
{
	snprintf(id->name, sizeof(id->name), "%s", p->name);
	id->cert = p->cert;
	memcpy(id->digest, p->digest, DIGEST_LEN);
}

const struct fg_principal *fg_authtab_by_id(const struct fg_authtab *t,
					    const struct fg_principal_id *id)
{
	if (!t || t->n == 0)
		return NULL;
	const struct fg_principal *p =
		bsearch(id->name, t->p, t->n, sizeof(*t->p), name_cmp);
	if (!p || p->cert != id->cert ||
	    CRYPTO_memcmp(p->digest, id->digest, DIGEST_LEN) != 0)
		return NULL;
	return p;
}

const char *fg_principal_name(const struct fg_principal *p)
{
	return p ? p->name : NULL;
}

bool fg_principal_is_cert(const struct fg_principal *p)
{
	return p && p->cert;
}

bool fg_principal_may(const struct fg_principal *p, enum fg_right r,
		      const char *name)
{
	if (!p || (unsigned)r >= FG_RIGHT_COUNT)
		return false;
	if (r == FG_RIGHT_METRICS)
		return p->metrics;
	if (!name)
		return false;
	for (size_t i = 0; i < p->ngrants; i++) {
		const struct fg_authright *g = &p->grants[i];
		if (!(includes[g->right] & BIT(r)))
			continue;
		if (!g->prefix || strncmp(name, g->prefix, g->len) == 0)
			return true;
	}
	return false;
}

bool fg_principal_may_prefix(const struct fg_principal *p, enum fg_right r,
			     const char *prefix)
{
	/* Every name under `prefix` starts with a granted P exactly when
	 * prefix itself does (P is never empty), so this is the check of a
	 * name, made on the prefix. */
	return fg_principal_may(p, r, prefix);
}

/* ---- credentials ---------------------------------------------------- */

/* Compared without case and without the locale. */
static bool is_bearer(const char *s, size_t len)
{
	static const char want[] = "bearer";
	if (len != sizeof(want) - 1)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != want[i])
			return false;
	}
	return true;
}

enum fg_cred fg_auth_bearer(const char *header, const char **key, size_t *len)
{
	*key = NULL;
	*len = 0;
	if (!header)
		return FG_CRED_NONE;
	const char *s = header;
	while (is_blank(*s))
		s++;
	size_t sl = strcspn(s, " \t");
	if (!is_bearer(s, sl))
		return FG_CRED_NONE;
	s += sl;
	if (*s != ' ')
		return FG_CRED_MALFORMED;
	while (*s == ' ')
		s++;
	const char *tok = s;
	while (b64token_char((unsigned char)*s))
		s++;
	if (s == tok)
		return FG_CRED_MALFORMED;
	while (*s == '=')
		s++;
	const char *end = s;
	while (is_blank(*s))
		s++;
	if (*s != '\0')
		return FG_CRED_MALFORMED;
	*key = tok;
	*len = (size_t)(end - tok);
	return FG_CRED_BEARER;
}

int fg_auth_new_key(const char *name, char *key_out, size_t keycap,
		    char *line_out, size_t linecap)
{
	unsigned char raw[KEY_RAW_BYTES], d[DIGEST_LEN];
	char hex[2 * DIGEST_LEN + 1];
	int rc = -1;

	if (keycap > 0)
		key_out[0] = '\0';
	if (linecap > 0)
		line_out[0] = '\0';
	if (!name || !fg_auth_name_valid(name, strlen(name)) ||
	    keycap < FG_AUTH_KEY_LEN + 1 ||
	    linecap < strlen(name) + 1 + SHA256_TAG_LEN + sizeof(hex))
		return -1;
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		goto done;
	if (fg_b64url_encode(raw, sizeof(raw), key_out, keycap) != FG_AUTH_KEY_LEN) {
		key_out[0] = '\0';
		goto done;
	}
	/* the digest is of the key as it is sent, its base64url text */
	SHA256((const unsigned char *)key_out, FG_AUTH_KEY_LEN, d);
	for (size_t i = 0; i < DIGEST_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	snprintf(line_out, linecap, "%s " SHA256_TAG "%s", name, hex);
	rc = 0;
done:
	OPENSSL_cleanse(raw, sizeof(raw));
	return rc;
}
