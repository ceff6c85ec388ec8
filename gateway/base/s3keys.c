/*
 * s3keys.c - the S3 mode's access keys and the store's credentials.
 *
 * Invariant: a table's keys are one allocation, sized once from the text
 * before any key is copied into it (never grown, so no copy of a secret is
 * left behind by a realloc) and sorted through an array of pointers (so
 * qsort moves no secret either); every buffer that held a secret (the
 * file's bytes, a table, an upstream's credentials) is wiped with
 * OPENSSL_cleanse before it is freed; no message carries a byte of a
 * secret, a token, or a field that failed validation.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "base/auth.h" /* fg_auth_name_valid, the principal-name rule */
#include "base/s3keys.h"

#define PATH_MAX_LEN 4096u

struct fg_s3key {
	char id[FG_SIGV4_KEY_ID_MAX + 1];
	size_t id_len;
	char secret[FG_SIGV4_SECRET_MAX + 1];
	size_t secret_len;
	char principal[FG_PRINCIPAL_MAX + 1];
	const struct fg_s3upstream *up;
	unsigned line;
};

struct fg_s3keys {
	atomic_uint refs;
	size_t n, cap;
	struct fg_s3key *keys;     /* cap of them, n used, in file order */
	struct fg_s3key **by_id;   /* n, sorted by id */
	size_t nup;
	struct fg_s3upstream **up; /* nup, each its own allocation */
};

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

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool printable(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

static bool id_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* An upstream's key id: what a SigV4 credential can carry. */
static bool upstream_id_char(unsigned char c)
{
	return printable(c) && c != '/' && c != ',' && c != ';' && c != '=';
}

static bool all(const char *s, size_t n, bool (*ok)(unsigned char))
{
	for (size_t i = 0; i < n; i++)
		if (!ok((unsigned char)s[i]))
			return false;
	return true;
}

/*
 * Reads the regular file at path, owner-only, at most max bytes, into a
 * new buffer *buf (max + 1 bytes; the caller wipes and frees it). 0, or -1
 * with err "WHAT 'PATH' ...".
 */
static int read_private(const char *what, const char *path, size_t max,
			char **buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	/* O_NONBLOCK: a FIFO put in its place must not hang a reload */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		say(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
		return -1;
	}
	int rc = -1;
	char *b = NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		say(err, errlen, "%s '%s' is not a regular file", what, path);
		goto error_fd;
	}
	if (st.st_mode & 077) {
		say(err, errlen,
		    "%s '%s' may be read or written by others than its owner "
		    "(mode %04o): chmod 600 it",
		    what, path, (unsigned)(st.st_mode & 07777));
		goto error_fd;
	}
	b = malloc(max + 1);
	if (!b) {
		say(err, errlen, "%s '%s': out of memory", what, path);
		goto error_fd;
	}
	size_t got = 0;
	while (got < max + 1) {
		ssize_t r = read(fd, b + got, max + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			say(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
			goto error_buf;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got > max) {
		say(err, errlen, "%s '%s' is longer than %zu bytes", what, path, max);
		goto error_buf;
	}
	*buf = b;
	*len = got;
	b = NULL;
	rc = 0;
error_buf:
	if (b) {
		OPENSSL_cleanse(b, max + 1);
		free(b);
	}
error_fd:
	close(fd);
	return rc;
}

/* ---- upstream-s3-credentials --------------------------------------- */

#define UPSTREAM_FILE_MAX (FG_SIGV4_KEY_ID_MAX + FG_SIGV4_SECRET_MAX + FG_SIGV4_TOKEN_MAX + 64u)

/* The next line of s[*at..n), without its '\n' and a '\r' before it. */
static bool next_line(const char *s, size_t n, size_t *at, const char **l, size_t *ll)
{
	if (*at >= n)
		return false;
	const char *nl = memchr(s + *at, '\n', n - *at);
	size_t e = nl ? (size_t)(nl - s) : n;
	*l = s + *at;
	*ll = e - *at;
	if (*ll && (*l)[*ll - 1] == '\r')
		(*ll)--;
	*at = e + 1;
	return true;
}

static int upstream_parse(const char *s, size_t n, struct fg_s3upstream *u,
			  char *err, size_t errlen)
{
	const char *l = NULL;
	size_t ll = 0, at = 0;
	unsigned no = 0;
	if (memchr(s, '\0', n)) {
		say(err, errlen, "holds a NUL byte");
		return -1;
	}
	while (next_line(s, n, &at, &l, &ll)) {
		no++;
		if (no == 1) {
			if (ll == 0 || ll > FG_SIGV4_KEY_ID_MAX || !all(l, ll, upstream_id_char)) {
				say(err, errlen, "line 1: the access key id is 1..%u bytes of "
				    "printable ASCII but / , ; =", FG_SIGV4_KEY_ID_MAX);
				return -1;
			}
			memcpy(u->key_id, l, ll);
			u->key_id[ll] = '\0';
		} else if (no == 2) {
			if (ll == 0 || ll > FG_SIGV4_SECRET_MAX || !all(l, ll, printable)) {
				say(err, errlen, "line 2: the secret is 1..%u bytes of printable "
				    "ASCII", FG_SIGV4_SECRET_MAX);
				return -1;
			}
			memcpy(u->secret, l, ll);
			u->secret[ll] = '\0';
			u->secret_len = ll;
		} else if (no == 3 && ll) {
			if (ll > FG_SIGV4_TOKEN_MAX || !all(l, ll, printable)) {
				say(err, errlen, "line 3: the session token is 1..%u bytes of "
				    "printable ASCII", FG_SIGV4_TOKEN_MAX);
				return -1;
			}
			memcpy(u->token, l, ll);
			u->token[ll] = '\0';
			u->token_len = ll;
			u->has_token = true;
		} else if (ll) {
			say(err, errlen, "line %u: only an access key id, a secret and a "
			    "session token, one a line", no);
			return -1;
		}
	}
	if (no < 2 || u->secret_len == 0) {
		say(err, errlen, "needs an access key id on line 1 and a secret on line 2");
		return -1;
	}
	return 0;
}

int fg_s3upstream_load(const char *path, struct fg_s3upstream **out,
		       char *err, size_t errlen)
{
	char *buf = NULL, msg[160];
	size_t len = 0;
	if (read_private("upstream-s3-credentials", path, UPSTREAM_FILE_MAX, &buf,
			 &len, err, errlen))
		return -1;
	int rc = -1;
	struct fg_s3upstream *u = calloc(1, sizeof(*u));
	if (!u) {
		say(err, errlen, "upstream-s3-credentials '%s': out of memory", path);
		goto done;
	}
	if (upstream_parse(buf, len, u, msg, sizeof(msg))) {
		say(err, errlen, "upstream-s3-credentials '%s': %s", path, msg);
		fg_s3upstream_free(u);
		goto done;
	}
	*out = u;
	rc = 0;
done:
	OPENSSL_cleanse(buf, UPSTREAM_FILE_MAX + 1);
	free(buf);
	return rc;
}

void fg_s3upstream_free(struct fg_s3upstream *u)
{
	if (!u)
		return;
	OPENSSL_cleanse(u, sizeof(*u));
	free(u);
}

/* ---- s3-credentials ------------------------------------------------- */

static void table_free(struct fg_s3keys *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nup; i++)
		fg_s3upstream_free(t->up[i]);
	free(t->up);
	if (t->keys)
		OPENSSL_cleanse(t->keys, t->cap * sizeof(*t->keys));
	free(t->keys);
	free(t->by_id);
	free(t);
}

static int id_cmp(const void *a, const void *b)
{
	const struct fg_s3key *x = *(const struct fg_s3key *const *)a;
	const struct fg_s3key *y = *(const struct fg_s3key *const *)b;
	int r = strcmp(x->id, y->id);
	if (r)
		return r;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* The upstream credentials of path p[0..pl), read once per table. The
 * paths already read are kept in paths[0..t->nup). */
static const struct fg_s3upstream *upstream_of(struct fg_s3keys *t, char **paths,
					       const char *p, size_t pl, unsigned no,
					       char *err, size_t errlen)
{
	for (size_t i = 0; i < t->nup; i++)
		if (strlen(paths[i]) == pl && memcmp(paths[i], p, pl) == 0)
			return t->up[i];
	char *path = malloc(pl + 1), msg[512];
	if (!path) {
		say(err, errlen, "line %u: out of memory", no);
		return NULL;
	}
	memcpy(path, p, pl);
	path[pl] = '\0';
	struct fg_s3upstream *u = NULL;
	if (fg_s3upstream_load(path, &u, msg, sizeof(msg))) {
		say(err, errlen, "line %u: %s", no, msg);
		free(path);
		return NULL;
	}
	paths[t->nup] = path;
	t->up[t->nup++] = u;
	return u;
}

/* One line s[0..n), number no. 0 (a key or nothing), -1. */
static int parse_line(struct fg_s3keys *t, char **paths, const char *s, size_t n,
		      unsigned no, char *err, size_t errlen)
{
	const char *f[5];
	size_t fl[5], nf = 0, i = 0;
	while (i < n) {
		while (i < n && blank(s[i]))
			i++;
		if (i == n || s[i] == '#')
			break;
		size_t j = i;
		while (j < n && !blank(s[j]))
			j++;
		if (nf == 5) {
			nf++;
			break;
		}
		f[nf] = s + i;
		fl[nf++] = j - i;
		i = j;
	}
	if (nf == 0)
		return 0;
	if (nf < 3 || nf > 4) {
		say(err, errlen, "line %u: expected ACCESS_KEY_ID SECRET PRINCIPAL "
		    "[UPSTREAM_CREDENTIALS_FILE]", no);
		return -1;
	}
	if (fl[0] > FG_SIGV4_KEY_ID_MAX || !all(f[0], fl[0], id_char)) {
		say(err, errlen, "line %u: an access key id is 1..%u bytes of "
		    "A-Z a-z 0-9 . _ -", no, FG_SIGV4_KEY_ID_MAX);
		return -1;
	}
	if (fl[1] < FG_S3KEYS_SECRET_MIN || fl[1] > FG_SIGV4_SECRET_MAX ||
	    !all(f[1], fl[1], printable)) {
		say(err, errlen, "line %u: a secret is %u..%u bytes of printable ASCII",
		    no, FG_S3KEYS_SECRET_MIN, FG_SIGV4_SECRET_MAX);
		return -1;
	}
	if (!fg_auth_name_valid(f[2], fl[2])) {
		say(err, errlen, "line %u: a principal's name is 1..%d bytes of "
		    "A-Z a-z 0-9 . _ @ -", no, FG_PRINCIPAL_MAX);
		return -1;
	}
	if (nf == 4 && fl[3] > PATH_MAX_LEN) {
		say(err, errlen, "line %u: the upstream credentials file's name is "
		    "longer than %u bytes", no, PATH_MAX_LEN);
		return -1;
	}
	if (t->n == FG_S3KEYS_MAX) {
		say(err, errlen, "line %u: more than %u keys", no, FG_S3KEYS_MAX);
		return -1;
	}
	struct fg_s3key *k = &t->keys[t->n];
	if (nf == 4 && !(k->up = upstream_of(t, paths, f[3], fl[3], no, err, errlen)))
		return -1;
	memcpy(k->id, f[0], fl[0]);
	k->id[fl[0]] = '\0';
	k->id_len = fl[0];
	memcpy(k->secret, f[1], fl[1]);
	k->secret[fl[1]] = '\0';
	k->secret_len = fl[1];
	memcpy(k->principal, f[2], fl[2]);
	k->principal[fl[2]] = '\0';
	k->line = no;
	t->n++;
	return 0;
}

int fg_s3keys_parse(const char *text, size_t len, struct fg_s3keys **out,
		    char *err, size_t errlen)
{
	if (!text && len)
		return say(err, errlen, "no text"), -1;
	if (len && memchr(text, '\0', len)) {
		say(err, errlen, "holds a NUL byte");
		return -1;
	}
	/* Lines bound the keys: size the table once. */
	size_t lines = 1;
	for (const char *p = text; p && (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
		lines++;
	size_t cap = lines < FG_S3KEYS_MAX ? lines : FG_S3KEYS_MAX;
	char **paths = NULL;
	struct fg_s3keys *t = calloc(1, sizeof(*t));
	if (!t || !(t->keys = calloc(cap, sizeof(*t->keys))) ||
	    !(t->up = calloc(cap, sizeof(*t->up))) ||
	    !(paths = calloc(cap, sizeof(*paths)))) {
		say(err, errlen, "out of memory");
		goto error_table;
	}
	t->cap = cap;
	atomic_init(&t->refs, 1);

	size_t at = 0;
	unsigned no = 0;
	const char *l;
	size_t ll;
	while (next_line(text, len, &at, &l, &ll)) {
		no++;
		if (ll > FG_S3KEYS_LINE_MAX) {
			say(err, errlen, "line %u: longer than %u bytes", no, FG_S3KEYS_LINE_MAX);
			goto error_table;
		}
		if (parse_line(t, paths, l, ll, no, err, errlen))
			goto error_table;
	}
	if (!(t->by_id = malloc((t->n ? t->n : 1) * sizeof(*t->by_id)))) {
		say(err, errlen, "out of memory");
		goto error_table;
	}
	for (size_t i = 0; i < t->n; i++)
		t->by_id[i] = &t->keys[i];
	qsort(t->by_id, t->n, sizeof(*t->by_id), id_cmp);
	for (size_t i = 1; i < t->n; i++) {
		if (strcmp(t->by_id[i - 1]->id, t->by_id[i]->id) == 0) {
			say(err, errlen, "line %u: this access key id is already on line %u",
			    t->by_id[i]->line, t->by_id[i - 1]->line);
			goto error_table;
		}
	}
	for (size_t i = 0; i < t->nup; i++)
		free(paths[i]);
	free(paths);
	*out = t;
	return 0;
error_table:
	for (size_t i = 0; t && paths && i < t->nup; i++)
		free(paths[i]);
	free(paths);
	table_free(t);
	return -1;
}

int fg_s3keys_load(const char *path, struct fg_s3keys **out, char *err,
		   size_t errlen)
{
	char *buf = NULL, msg[768];
	size_t len = 0;
	if (read_private("s3-credentials", path, FG_S3KEYS_FILE_MAX, &buf, &len, err,
			 errlen))
		return -1;
	int rc = fg_s3keys_parse(buf, len, out, msg, sizeof(msg));
	if (rc)
		say(err, errlen, "s3-credentials '%s': %s", path, msg);
	OPENSSL_cleanse(buf, FG_S3KEYS_FILE_MAX + 1);
	free(buf);
	return rc;
}

struct fg_s3keys *fg_s3keys_ref(struct fg_s3keys *t)
{
	if (t)
		atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	return t;
}

void fg_s3keys_unref(struct fg_s3keys *t)
{
	/* acq_rel: every reader's last use happens before the free */
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		table_free(t);
}

size_t fg_s3keys_count(const struct fg_s3keys *t)
{
	return t ? t->n : 0;
}

const struct fg_s3key *fg_s3keys_find(const struct fg_s3keys *t, const char *id,
				      size_t len)
{
	if (!t || !id)
		return NULL;
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct fg_s3key *k = t->by_id[mid];
		size_t m = len < k->id_len ? len : k->id_len;
		int r = memcmp(id, k->id, m);
		if (r == 0)
			r = len < k->id_len ? -1 : len > k->id_len;
		if (r == 0)
			return k;
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const void *fg_s3keys_lookup(void *arg, const char *key_id, const char **secret,
			     size_t *secret_len)
{
	const struct fg_s3key *k =
		key_id ? fg_s3keys_find(arg, key_id, strlen(key_id)) : NULL;
	if (k) {
		*secret = k->secret;
		*secret_len = k->secret_len;
	}
	return k;
}

const char *fg_s3key_id(const struct fg_s3key *k)
{
	return k->id;
}

const char *fg_s3key_secret(const struct fg_s3key *k, size_t *len)
{
	if (len)
		*len = k->secret_len;
	return k->secret;
}

const char *fg_s3key_principal(const struct fg_s3key *k)
{
	return k->principal;
}

const struct fg_s3upstream *fg_s3key_upstream(const struct fg_s3key *k)
{
	return k->up;
}

/* n characters of alphabet a (size m), each uniform: a byte is taken only
 * below the largest multiple of m that fits in 256. 0 or -1. */
static int draw(char *out, size_t n, const char *a, unsigned m)
{
	unsigned char rnd[64];
	unsigned limit = 256u - 256u % m;
	size_t got = 0, at = sizeof(rnd);
	int rc = 0;
	while (got < n) {
		if (at == sizeof(rnd)) {
			if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
				rc = -1;
				break;
			}
			at = 0;
		}
		unsigned b = rnd[at++];
		if (b < limit)
			out[got++] = a[b % m];
	}
	OPENSSL_cleanse(rnd, sizeof(rnd));
	return rc;
}

int fg_s3key_new(const char *principal, char *out, size_t cap)
{
	static const char id_alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static const char secret_alpha[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+";
	char id[FG_S3KEYS_NEW_ID_LEN], secret[FG_S3KEYS_NEW_SECRET_LEN];
	if (!principal || !out || cap < FG_S3KEYS_NEW_LINE_MAX ||
	    !fg_auth_name_valid(principal, strnlen(principal, FG_PRINCIPAL_MAX + 1)))
		return -1;
	int rc = -2;
	if (draw(id, sizeof(id), id_alpha, sizeof(id_alpha) - 1) ||
	    draw(secret, sizeof(secret), secret_alpha, sizeof(secret_alpha) - 1))
		goto done;
	snprintf(out, cap, "%.*s %.*s %s", (int)sizeof(id), id, (int)sizeof(secret),
		 secret, principal);
	rc = 0;
done:
	OPENSSL_cleanse(secret, sizeof(secret));
	return rc;
}
