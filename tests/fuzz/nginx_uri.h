/*
 * nginx_uri.h - a reference model, written for the fuzz harnesses, of how
 * nginx (1.22, merge_slashes on, the WebDAV store of deploy/) turns the
 * path of a request line into the URI it maps to a file: percent-decoded
 * (a bad escape or a decoded NUL is a 400), repeated slashes merged, "."
 * and ".." segments removed, a ".." above the root a 400, a trailing '/'
 * (or a final "." / "..") leaving a trailing '/'.
 *
 * Deliberately written apart from gateway/base/writeset.c (segment stack, not
 * an in-place scan) so that the two can be compared.
 *
 * Precondition: raw[0] == '/', and raw holds no byte <= 0x20, no 0x7f, no
 * '?' and no '#' (nginx refuses raw control bytes and spaces, and ends the
 * path at '?' or '#'; the gateway refuses those targets or cuts the query
 * before it resolves a path).
 */
#ifndef FENCEGATE_NGINX_URI_H
#define FENCEGATE_NGINX_URI_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

enum ngx_ref {
	NGX_REF_OK,
	NGX_REF_INVALID, /* a bad escape or a decoded NUL: 400 */
	NGX_REF_CLIMBS,  /* a ".." above the root: 400 */
};

static inline int ngx_ref_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* True when raw[0..len) meets the precondition above. */
static inline bool ngx_ref_applies(const char *raw, size_t len)
{
	if (len == 0 || raw[0] != '/')
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];
		if (c <= 0x20 || c == 0x7f || c == '?' || c == '#')
			return false;
	}
	return true;
}

/*
 * The URI nginx acts on for raw[0..len), written to out (cap >= len + 2,
 * NUL-terminated) with its length in *out_len.
 */
static inline enum ngx_ref ngx_ref_uri(const char *raw, size_t len, char *out,
				       size_t cap, size_t *out_len)
{
	/* 1. percent-decode */
	char dec[8192];
	size_t n = 0;
	if (len >= sizeof(dec) || cap < len + 2)
		return NGX_REF_INVALID;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];
		if (c == '%') {
			if (i + 2 >= len)
				return NGX_REF_INVALID;
			int hi = ngx_ref_hex((unsigned char)raw[i + 1]);
			int lo = ngx_ref_hex((unsigned char)raw[i + 2]);
			if (hi < 0 || lo < 0)
				return NGX_REF_INVALID;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
			if (c == 0)
				return NGX_REF_INVALID;
		}
		dec[n++] = (char)c;
	}

	/* 2. split into segments; empty ones are merged slashes */
	size_t seg_at[4096], seg_len[4096], depth = 0;
	bool trailing = false; /* the URI ends as a collection */
	size_t i = 1;          /* dec[0] == '/' */
	while (i <= n) {
		size_t s = i;
		while (i < n && dec[i] != '/')
			i++;
		size_t l = i - s;
		bool last = i >= n;
		if (l == 0) {
			trailing = true;
		} else if (l == 1 && dec[s] == '.') {
			trailing = true;
		} else if (l == 2 && dec[s] == '.' && dec[s + 1] == '.') {
			if (depth == 0)
				return NGX_REF_CLIMBS;
			depth--;
			trailing = true;
		} else {
			seg_at[depth] = s;
			seg_len[depth] = l;
			depth++;
			trailing = false;
		}
		if (last)
			break;
		i++; /* the '/' */
	}

	/* 3. join */
	size_t o = 0;
	out[o++] = '/';
	for (size_t k = 0; k < depth; k++) {
		memcpy(out + o, dec + seg_at[k], seg_len[k]);
		o += seg_len[k];
		if (k + 1 < depth || trailing)
			out[o++] = '/';
	}
	out[o] = '\0';
	*out_len = o;
	return NGX_REF_OK;
}

#endif
