/*
 * lockcore/name.c - lock name validation.
 *
 * Invariant: fg_name_valid() accepts exactly the names of fencegate/name.h,
 * 1..FG_NAME_MAX bytes of [A-Za-z0-9._~/-] with no "", "." or ".." segment.
 * It looks only at name[0..len), never at a terminating NUL, and does not
 * depend on the locale. Everything that becomes a Redis key, a channel or a
 * sequencer field passes through here first.
 */
#include "fencegate/name.h"

static bool name_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
	       c == '-' || c == '/';
}

/* A segment of seg_len bytes starting at seg is "", "." or "..". */
static bool bad_segment(const char *seg, size_t seg_len)
{
	if (seg_len == 0)
		return true;
	if (seg_len == 1 && seg[0] == '.')
		return true;
	if (seg_len == 2 && seg[0] == '.' && seg[1] == '.')
		return true;
	return false;
}

bool fg_name_valid(const char *name, size_t len)
{
	size_t seg_start = 0;

	if (name == NULL || len == 0 || len > FG_NAME_MAX)
		return false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (!name_char(c))
			return false;
		if (c == '/') {
			if (bad_segment(name + seg_start, i - seg_start))
				return false;
			seg_start = i + 1;
		}
	}
	return !bad_segment(name + seg_start, len - seg_start);
}
