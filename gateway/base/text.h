/*
 * text.h - the string helpers of the request path: a bounded copy, an
 * unsigned number's digits, a hex digit's value, a header value's number,
 * and room in a
 * growing block of text. Private to the gateway.
 *
 * Every request used to make several of these with snprintf(), which
 * costs more than the rest of their work; these are copies.
 *
 * Invariant: fg_copy() always leaves dst NUL-ended within cap bytes
 * (cap >= 1), cut short as snprintf("%s") would cut it.
 */
#ifndef FENCEGATE_TEXT_H
#define FENCEGATE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The value of a hex digit of either case, or -1. */
static inline int fg_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Copies src into dst (cap >= 1 bytes), cut short to fit; returns the
 * length written. */
static inline size_t fg_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
	return n;
}

/* Writes v in decimal at out (room for 20 bytes; no NUL); returns how
 * many digits. */
static inline size_t fg_digits(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

/* Makes room for n more bytes in a block (*buf, *cap bytes of which len
 * are used), doubling from `first`. False without memory (the block is
 * as it was). The header blocks of the upstream side grow this way, so
 * that a request's headers cost one allocation, not one each. */
static inline bool fg_block_room(char **buf, size_t *cap, size_t len, size_t n,
				 size_t first)
{
	if (n <= *cap - len)
		return true;
	size_t c = *cap ? *cap : first;
	while (c - len < n)
		c *= 2;
	char *b = realloc(*buf, c);
	if (!b)
		return false;
	*buf = b;
	*cap = c;
	return true;
}

/* A header value's number, as strtoll() reads it from a NUL-ended copy
 * (a value handed on as bytes and a length is not NUL-ended); -1 without
 * memory. */
static inline int64_t fg_value_number(const char *v, size_t vl)
{
	char small[64];
	char *b = vl < sizeof(small) ? small : malloc(vl + 1);
	if (!b)
		return -1;
	memcpy(b, v, vl);
	b[vl] = '\0';
	int64_t n = strtoll(b, NULL, 10);
	if (b != small)
		free(b);
	return n;
}

#endif
