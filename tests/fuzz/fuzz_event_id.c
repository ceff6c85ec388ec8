/*
 * fuzz_event_id - the events' ids (contract v1.5: the `after` parameter,
 * the SSE Last-Event-ID header), read by fg_event_id_parse() and written
 * by fg_event_id_format() (lockcore/evread.c).
 *
 * Properties:
 *  - the input (up to its first NUL) is accepted exactly when a reference
 *    written here, the grammar of ^[0-9]{1,15}-[0-9]{1,19}(\.[0-9]{1,5})?$
 *    with a slot below 16384, accepts it, with the same numbers;
 *  - a refused input leaves the cursor untouched;
 *  - an accepted one written again reads back as the same cursor, and is
 *    the input itself when that had no leading zeros;
 *  - the writer fits any cursor in 48 bytes, refuses (0, "") a buffer
 *    one byte short, and writes nothing for a cursor not set;
 *  - the input's first 26 bytes read as a cursor: written and read back,
 *    the same cursor (any ms below 10^15, any seq below 10^19).
 */
#include <stdbool.h>
#include <string.h>

#include "fencegate/lock.h"
#include "fuzz.h"

/* Reference: n digits at s[*i..], 1..max of them, value into *v. */
static bool ref_num(const char *s, size_t *i, unsigned max, uint64_t *v)
{
	size_t start = *i;
	*v = 0;
	while (s[*i] >= '0' && s[*i] <= '9') {
		if (*i - start == max)
			return false;
		*v = *v * 10 + (uint64_t)(s[*i] - '0');
		(*i)++;
	}
	return *i > start;
}

static bool ref_parse(const char *s, struct fg_ev_cursor *c)
{
	size_t i = 0;
	uint64_t slot = 0;
	memset(c, 0, sizeof(*c));
	if (!ref_num(s, &i, 15, &c->ms) || s[i++] != '-' ||
	    !ref_num(s, &i, 19, &c->seq))
		return false;
	if (s[i] == '.') {
		i++;
		if (!ref_num(s, &i, 5, &slot) || slot >= 16384)
			return false;
		c->cluster = true;
		c->slot = (unsigned)slot;
	}
	c->set = true;
	return s[i] == '\0';
}

static bool has_leading_zero(const char *s)
{
	for (size_t i = 0; s[i]; i++)
		if (s[i] == '0' && (i == 0 || s[i - 1] == '-' || s[i - 1] == '.') &&
		    s[i + 1] >= '0' && s[i + 1] <= '9')
			return true;
	return false;
}

static bool same(const struct fg_ev_cursor *a, const struct fg_ev_cursor *b)
{
	return a->set == b->set && a->cluster == b->cluster && a->ms == b->ms &&
	       a->seq == b->seq && (!a->cluster || a->slot == b->slot);
}

static void check_format(const struct fg_ev_cursor *c)
{
	char buf[48], small[48];
	size_t n = fg_event_id_format(c, buf, sizeof(buf));
	PROPERTY(n > 0 && n < sizeof(buf) && strlen(buf) == n);
	struct fg_ev_cursor back;
	PROPERTY(fg_event_id_parse(buf, &back) == 0);
	PROPERTY(same(c, &back));
	memset(small, 'x', sizeof(small));
	PROPERTY(fg_event_id_format(c, small, n) == 0);
	PROPERTY(small[0] == '\0');
	PROPERTY(fg_event_id_format(c, small, n + 1) == n);
	PROPERTY(memcmp(small, buf, n + 1) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char s[4096 + 1];
	if (size > 4096)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	struct fg_ev_cursor got, ref, before = { .ms = 1, .seq = 2, .slot = 3,
						 .cluster = true, .set = true };
	got = before;
	int r = fg_event_id_parse(s, &got);
	bool want = ref_parse(s, &ref);
	PROPERTY((r == 0) == want);
	PROPERTY(r == 0 || r == -1);
	if (!want) {
		PROPERTY(memcmp(&got, &before, sizeof(got)) == 0);
	} else {
		PROPERTY(same(&got, &ref));
		check_format(&got);
		if (!has_leading_zero(s)) {
			char buf[48];
			fg_event_id_format(&got, buf, sizeof(buf));
			PROPERTY(strcmp(buf, s) == 0);
		}
	}

	/* any cursor in range, from the raw bytes */
	if (size >= 26) {
		struct fg_ev_cursor c = { .set = true };
		for (int i = 0; i < 8; i++) {
			c.ms = c.ms << 8 | data[i];
			c.seq = c.seq << 8 | data[8 + i];
		}
		c.ms %= 1000000000000000ull;
		c.seq %= 10000000000000000000ull;
		c.slot = (unsigned)(data[16] << 8 | data[17]) % 16384;
		c.cluster = data[18] & 1;
		check_format(&c);
		c.set = false;
		char buf[48] = "x";
		PROPERTY(fg_event_id_format(&c, buf, sizeof(buf)) == 0 && !buf[0]);
	}
	return 0;
}
