/*
 * evline.c - an event as one line for people (evline.h).
 *
 * Invariant: only put_safe() writes a value; what the gateway sent is
 * never written as it came.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "evline.h"

static void put_safe(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p > ' ' && *p < 0x7f && *p != '\\')
			fputc(*p, f);
		else
			fprintf(f, "\\x%02x", *p);
	}
}

/* A JSON value as a field's value: a string as itself, a number or a
 * boolean as JSON writes it, null as "-", anything else as its compact
 * JSON text (escaped like the rest). */
static void put_value(FILE *f, json_t *v)
{
	if (!v || json_is_null(v)) {
		fputc('-', f);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		/* an empty string says nothing either */
		put_safe(f, s[0] ? s : "-");
	} else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		put_safe(f, s ? s : "?");
		free(s);
	}
}

static void put_field(FILE *f, const char *key, json_t *v)
{
	fputc(' ', f);
	put_safe(f, key);
	fputc('=', f);
	put_value(f, v);
}

/* The detail's fields each kind has, in the order they read best. */
static const char *const refused_keys[] = { "code", "method", "path",
					    "count", NULL };
static const char *const granted_keys[] = { "mode", "ttl_ms", "waited", NULL };
static const char *const broken_keys[] = { "by", NULL };
static const char *const given_back_keys[] = { "reason", NULL };

static const char *const *keys_of(const char *kind)
{
	if (strcmp(kind, "refused") == 0)
		return refused_keys;
	if (strcmp(kind, "granted") == 0)
		return granted_keys;
	if (strcmp(kind, "broken") == 0)
		return broken_keys;
	if (strcmp(kind, "given_back") == 0)
		return given_back_keys;
	return NULL;
}

static bool listed(const char *const *keys, const char *k)
{
	for (; keys && *keys; keys++)
		if (strcmp(*keys, k) == 0)
			return true;
	return false;
}

static void put_detail(FILE *f, const char *kind, json_t *d)
{
	if (!json_is_object(d))
		return;
	const char *const *keys = keys_of(kind);
	for (const char *const *k = keys; k && *k; k++) {
		json_t *v = json_object_get(d, *k);
		if (v)
			put_field(f, *k, v);
	}
	const char *k;
	json_t *v;
	json_object_foreach(d, k, v)
		if (!listed(keys, k))
			put_field(f, k, v);
}

static const char *str_or(json_t *o, const char *k, const char *dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) && json_string_value(v)[0]
		? json_string_value(v) : dflt;
}

void fg_evline_print(FILE *f, json_t *ev)
{
	const char *kind = str_or(ev, "kind", "?");
	put_safe(f, str_or(ev, "at", "?"));
	fputc(' ', f);
	put_safe(f, kind);
	fputc(' ', f);
	put_safe(f, str_or(ev, "lock", "-"));
	put_field(f, "token", json_object_get(ev, "token"));
	put_field(f, "principal", json_object_get(ev, "principal"));
	put_field(f, "owner", json_object_get(ev, "owner"));
	put_field(f, "client", json_object_get(ev, "client"));
	put_detail(f, kind, json_object_get(ev, "detail"));
	fputc('\n', f);
}
