/*
 * jsonio.c - strict reading of request bodies, query numbers and
 * percent-encoded paths; the writer of fixed-shape answers (fg_jw).
 * Invariant: nothing here accepts a value outside the range it was given,
 * nor a field outside the list it was given; every message it writes fits
 * its buffer and is valid UTF-8 (it becomes a JSON string); fg_jw writes
 * what jansson would have written, or fails.
 */
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "base/jsonio.h"

json_t *fg_json_body(const char *body, size_t len, bool allow_empty,
		     char *msg, size_t n)
{
	size_t i = 0;
	while (i < len && (body[i] == ' ' || body[i] == '\t' ||
			   body[i] == '\r' || body[i] == '\n'))
		i++;
	if (i == len) {
		if (allow_empty)
			return json_object();
		snprintf(msg, n, "a JSON object body is required");
		return NULL;
	}
	json_error_t e;
	json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (!o) {
		snprintf(msg, n, "body is not valid JSON: %s", e.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		snprintf(msg, n, "body must be a JSON object");
		return NULL;
	}
	return o;
}

/* A message built piece by piece: a piece goes in whole or not at all,
 * and room for "..." is always kept, so a cut message says it was cut and
 * never ends inside a UTF-8 sequence. */
struct msgbuf {
	char *p;
	size_t cap;
	size_t len;
	bool cut;
};

static void mb_init(struct msgbuf *mb, char *p, size_t cap)
{
	mb->p = p;
	mb->cap = cap;
	mb->len = 0;
	mb->cut = cap < 5; /* no room for any piece and the "..." */
	if (cap)
		p[0] = '\0';
}

static void mb_put(struct msgbuf *mb, const char *s, size_t n)
{
	if (mb->cut)
		return;
	if (mb->len + n + sizeof("...") > mb->cap) {
		memcpy(mb->p + mb->len, "...", sizeof("..."));
		mb->len += 3;
		mb->cut = true;
		return;
	}
	memcpy(mb->p + mb->len, s, n);
	mb->len += n;
	mb->p[mb->len] = '\0';
}

static void mb_puts(struct msgbuf *mb, const char *s)
{
	mb_put(mb, s, strlen(s));
}

/* key, JSON-quoted into out, its first FG_JSON_NAME_SHOWN bytes at most
 * (cut before a UTF-8 continuation byte; jansson gave valid UTF-8).
 * Returns the length. */
static size_t quote_name(const char *key, char out[8 * FG_JSON_NAME_SHOWN])
{
	size_t klen = strlen(key), show = klen, o = 0;
	if (show > FG_JSON_NAME_SHOWN) {
		show = FG_JSON_NAME_SHOWN;
		while (show > 0 && ((unsigned char)key[show] & 0xC0) == 0x80)
			show--;
	}
	out[o++] = '"';
	for (size_t i = 0; i < show; i++) {
		unsigned char ch = (unsigned char)key[i];
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, 7, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	if (show < klen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
	return o;
}

static bool is_known(const char *key, const char *const known[])
{
	for (size_t i = 0; known[i]; i++)
		if (strcmp(key, known[i]) == 0)
			return true;
	return false;
}

int fg_json_known(json_t *obj, const char *call, const char *const known[],
		  char *msg, size_t n)
{
	const char *key;
	json_t *v;
	size_t unknown = 0;
	json_object_foreach(obj, key, v) {
		if (!is_known(key, known))
			unknown++;
	}
	if (unknown == 0)
		return 0;

	struct msgbuf mb;
	char quoted[8 * FG_JSON_NAME_SHOWN];
	bool first = true;
	mb_init(&mb, msg, n);
	mb_puts(&mb, unknown == 1 ? "unknown field " : "unknown fields ");
	json_object_foreach(obj, key, v) {
		if (is_known(key, known))
			continue;
		if (!first)
			mb_puts(&mb, ", ");
		first = false;
		mb_put(&mb, quoted, quote_name(key, quoted));
	}
	mb_puts(&mb, ": ");
	mb_puts(&mb, call);
	if (!known[0]) {
		mb_puts(&mb, " takes no body fields");
		return -1;
	}
	mb_puts(&mb, " takes ");
	for (size_t i = 0; known[i]; i++) {
		if (i > 0)
			mb_puts(&mb, ", ");
		mb_puts(&mb, known[i]);
	}
	return -1;
}

int fg_json_uint(json_t *obj, const char *key, uint32_t lo, uint32_t hi,
		 uint32_t *out, char *msg, size_t n)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return 0;
	if (!json_is_integer(v)) {
		snprintf(msg, n, "%s must be an integer", key);
		return -1;
	}
	json_int_t x = json_integer_value(v);
	if (x < (json_int_t)lo || x > (json_int_t)hi) {
		snprintf(msg, n, "%s must be in %u..%u", key, lo, hi);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

int fg_json_string(json_t *obj, const char *key, size_t maxlen,
		   const char **out, size_t *len, char *msg, size_t n)
{
	json_t *v = json_object_get(obj, key);
	*out = NULL;
	*len = 0;
	if (!v)
		return 0;
	if (!json_is_string(v)) {
		snprintf(msg, n, "%s must be a string", key);
		return -1;
	}
	size_t l = json_string_length(v);
	if (l > maxlen) {
		snprintf(msg, n, "%s is longer than %zu bytes", key, maxlen);
		return -1;
	}
	*out = json_string_value(v);
	*len = l;
	return 0;
}

int fg_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!s || !*s || strlen(s) > 20)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		uint64_t d = (uint64_t)(*p - '0');
		if (d > max || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int fg_pct_decode(const char *raw, size_t len, char *out, size_t cap,
		  size_t *outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char ch = raw[i];
		if (ch == '%') {
			if (i + 2 >= len)
				return -1;
			int hi = fg_hexval((unsigned char)raw[i + 1]), lo = fg_hexval((unsigned char)raw[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			ch = (char)(hi * 16 + lo);
			i += 2;
		}
		if (ch == '\0' || o + 1 >= cap)
			return -1;
		out[o++] = ch;
	}
	out[o] = '\0';
	*outlen = o;
	return 0;
}

/* ---- fixed-shape answers ---------------------------------------------- */

void fg_jw_init(struct fg_jw *w, char *buf, size_t cap)
{
	w->buf = buf;
	w->cap = cap;
	w->len = 0;
	w->failed = cap < 3; /* room for "{}" and the NUL at least */
}

static void jw_put(struct fg_jw *w, const char *s, size_t n)
{
	if (w->failed || w->cap - w->len < n + 2) { /* keep room for "}\0" */
		w->failed = true;
		return;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

/* "key": the opening brace or the comma first. The keys are the
 * caller's literals. */
static void jw_key(struct fg_jw *w, const char *key)
{
	jw_put(w, w->len == 0 ? "{\"" : ",\"", 2);
	jw_put(w, key, strlen(key));
	jw_put(w, "\":", 2);
}

void fg_jw_str(struct fg_jw *w, const char *key, const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if ((unsigned char)s[n] < 0x20 || (unsigned char)s[n] > 0x7e ||
		    s[n] == '"' || s[n] == '\\') {
			w->failed = true; /* jansson's, then */
			return;
		}
	jw_key(w, key);
	jw_put(w, "\"", 1);
	jw_put(w, s, n);
	jw_put(w, "\"", 1);
}

void fg_jw_uint(struct fg_jw *w, const char *key, uint64_t v)
{
	char tmp[20];
	size_t n = 0;

	/* jansson writes a json_int_t, a signed 64-bit integer */
	if (v > INT64_MAX) {
		w->failed = true;
		return;
	}
	do {
		tmp[sizeof(tmp) - ++n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	jw_key(w, key);
	jw_put(w, tmp + sizeof(tmp) - n, n);
}

size_t fg_jw_end(struct fg_jw *w)
{
	if (w->failed)
		return 0;
	if (w->len == 0)
		w->buf[w->len++] = '{';
	w->buf[w->len++] = '}'; /* jw_put left room for it and the NUL */
	w->buf[w->len] = '\0';
	return w->len;
}
