/*
 * jsonio.h - reading client input strictly: request bodies, query numbers,
 * percent-encoded paths; and writing the lock API's fixed-shape answers
 * without building a JSON tree (fg_jw). Private to the gateway.
 *
 * Numbers are JSON integers only (not 1.5, 1e3, "1000" or true); a field
 * that is present must have the right type (null is not "absent"); a
 * field the call does not know is refused, not ignored, so that a typo
 * never passes for a default.
 */
#ifndef FENCEGATE_JSONIO_H
#define FENCEGATE_JSONIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/**
 * Parses body[0..len) as one JSON object. An empty body is an empty object
 * when allow_empty. NULL with msg set otherwise. Caller owns the result
 * (json_decref).
 */
json_t *fg_json_body(const char *body, size_t len, bool allow_empty,
		     char *msg, size_t msglen);

/** How many bytes of one unknown field's name a message shows. */
#define FG_JSON_NAME_SHOWN 64

/**
 * Every field of obj must be one of known[] (NULL-terminated; { NULL }
 * for a call that takes none). 0 when they are; -1 with msg naming every
 * unknown field in body order, then what `call` takes:
 *
 *     unknown field "wiat_ms": acquire takes ttl_ms, wait_ms, mode
 *     unknown fields "ttl", "wiat_ms": acquire takes ...
 *     unknown field "lease": release takes no body fields
 *
 * A name is shown JSON-quoted and cut to FG_JSON_NAME_SHOWN bytes (at a
 * UTF-8 boundary); names that do not fit msg end in "...", so msg is
 * always valid UTF-8 whatever its size.
 */
int fg_json_known(json_t *obj, const char *call, const char *const known[],
		  char *msg, size_t msglen);

/** Optional integer field in [lo, hi]: 0 (absent leaves *out), -1 bad. */
int fg_json_uint(json_t *obj, const char *key, uint32_t lo, uint32_t hi,
		 uint32_t *out, char *msg, size_t msglen);

/** Optional string field of at most maxlen bytes: 0 (absent leaves *out
 *  NULL), -1 bad. *out points into obj. */
int fg_json_string(json_t *obj, const char *key, size_t maxlen,
		   const char **out, size_t *len, char *msg, size_t msglen);

/**
 * Percent-decodes raw[0..len) into out[cap] (NUL-terminated) and sets
 * *outlen. -1 on a malformed escape, a decoded NUL, or when it does not
 * fit. Used for every path the gateway interprets (lock names, guarded
 * paths), so both read a URL the same way.
 */
int fg_pct_decode(const char *raw, size_t len, char *out, size_t cap,
		  size_t *outlen);

/** Strict unsigned decimal (query parameters): 0 or -1. */
int fg_parse_u64(const char *s, uint64_t max, uint64_t *out);

/**
 * A JSON object of string and unsigned integer fields written straight
 * into a caller's buffer, in the order of the calls: byte for byte what
 * json_dumps(JSON_COMPACT) writes for the same object built with jansson,
 * at a tenth of the cost (the grant's answer, once per lock cycle). A
 * string that jansson would escape or check (a quote, a backslash, a
 * control byte, any byte above 0x7e) or a text that does not fit makes
 * it fail, and the caller builds that answer with jansson instead.
 */
struct fg_jw {
	char *buf;   /* the caller's */
	size_t cap, len;
	bool failed;
};

void fg_jw_init(struct fg_jw *w, char *buf, size_t cap);
void fg_jw_str(struct fg_jw *w, const char *key, const char *s);
void fg_jw_uint(struct fg_jw *w, const char *key, uint64_t v);
/** Closes the object: its length (not counting the NUL written after
 *  it), or 0 when it failed. */
size_t fg_jw_end(struct fg_jw *w);

#endif
