/*
 * fuzz_s3_delete - the DeleteObjects body parser (fg_s3_delete_parse) and
 * the locks of a DeleteObjects request (fg_s3_locks_build), in
 * gateway/base/s3ops.c.
 *
 * Input: the body. Properties:
 *  - the answer is 0, MalformedXML or out of memory, and the same on a
 *    second parse;
 *  - keys are handed on only when the whole body is accepted: then 1 to
 *    1000 of them, each 1-1024 bytes without NUL, NUL-terminated;
 *  - a body whose document starts (after an optional XML declaration and
 *    whitespace) with "<!DOCTYPE" is refused;
 *  - the lock set of "POST /b?delete" with this body: refused exactly when
 *    the parse was, or with too many locks; else 1-16 distinct valid
 *    names, all written, the lock of every key among them, and without
 *    the route rules exactly the distinct locks of the keys.
 */
#include <stdbool.h>
#include <string.h>

#include "base/config.h"
#include "base/s3ops.h"
#include "fencegate/name.h"
#include "fuzz.h"

static struct fg_config plain, routed;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	(void)argc;
	(void)argv;
	fg_s3ops_init();
	fg_config_init(&plain);
	fg_config_init(&routed);
	PROPERTY(fg_config_set(&routed, "route", "/b/batch/ batch", err, sizeof(err)) == 0);
	PROPERTY(fg_config_set(&routed, "route", "/b/a ab", err, sizeof(err)) == 0);
	return 0;
}

struct seen {
	int n;
	int distinct;
	char locks[FG_S3_LOCKS_MAX + 1][FG_NAME_MAX + 1];
	const struct fg_config *cfg;
	const struct fg_s3_locks *set;  /* the second walk checks membership */
};

static int on_key(void *arg, const char *key, size_t len)
{
	struct seen *s = arg;
	PROPERTY(len >= 1 && len <= FG_S3_KEY_MAX && strlen(key) == len);
	s->n++;
	PROPERTY(s->n <= FG_S3_DELETE_KEYS_MAX);
	char lock[FG_NAME_MAX + 1];
	PROPERTY(fg_s3_object_lock(s->cfg, "b", 1, key, len, lock) == FG_S3_OK);
	if (s->set) {
		bool found = false;
		for (int i = 0; i < s->set->n; i++)
			found |= strcmp(s->set->m[i].name, lock) == 0 && s->set->m[i].write;
		PROPERTY(found);
		return 0;
	}
	for (int i = 0; i < s->distinct && i <= FG_S3_LOCKS_MAX; i++)
		if (strcmp(s->locks[i], lock) == 0)
			return 0;
	if (s->distinct <= FG_S3_LOCKS_MAX)
		strcpy(s->locks[s->distinct], lock);
	s->distinct++;
	return 0;
}

static bool starts_with_doctype(const char *b, size_t n)
{
	size_t i = 0;
	if (n >= 5 && memcmp(b, "<?xml", 5) == 0) {
		const char *end = memmem(b, n, "?>", 2);
		if (!end)
			return false;
		i = (size_t)(end - b) + 2;
	}
	while (i < n && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
		i++;
	return n - i >= 9 && memcmp(b + i, "<!DOCTYPE", 9) == 0;
}

static void check(const struct fg_config *cfg, const char *body, size_t size)
{
	struct seen s = { .cfg = cfg };
	int r = fg_s3_delete_parse(body, size, on_key, &s);
	PROPERTY(r == 0 || r == FG_S3_MALFORMED_XML || r == FG_S3_NO_MEMORY);
	if (r != 0)
		PROPERTY(s.n == 0);
	else
		PROPERTY(s.n >= 1);
	if (starts_with_doctype(body, size))
		PROPERTY(r != 0);
	struct seen again = { .cfg = cfg };
	PROPERTY(fg_s3_delete_parse(body, size, on_key, &again) == r && again.n == s.n);

	static struct fg_s3_req q;
	struct fg_s3_head h = { "POST", "/b?delete", NULL, NULL, NULL };
	PROPERTY(fg_s3_classify(cfg, &h, &q) == FG_S3_OK && q.needs_body);
	static struct fg_s3_locks l;
	enum fg_s3_refusal le = fg_s3_locks_build(cfg, &q, body, size, &l);
	if (r != 0) {
		PROPERTY((int)le == r);
		return;
	}
	if (s.distinct > FG_S3_LOCKS_MAX) {
		PROPERTY(le == FG_S3_TOO_MANY_LOCKS);
		return;
	}
	PROPERTY(le == FG_S3_OK);
	PROPERTY(l.n >= 1 && l.n == s.distinct);
	for (int i = 0; i < l.n; i++) {
		PROPERTY(l.m[i].write);
		PROPERTY(fg_name_valid(l.m[i].name, strlen(l.m[i].name)));
		for (int j = 0; j < i; j++)
			PROPERTY(strcmp(l.m[i].name, l.m[j].name) != 0);
	}
	struct seen walk = { .cfg = cfg, .set = &l };
	PROPERTY(fg_s3_delete_parse(body, size, on_key, &walk) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > FG_S3_DELETE_BODY_MAX + 16)
		return 0;
	/* the parser is handed exactly size bytes: no terminator */
	char *body = malloc(size ? size : 1);
	memcpy(body, data, size);
	check(size & 1 ? &routed : &plain, body, size);
	free(body);
	return 0;
}
