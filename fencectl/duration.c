/*
 * duration.c - reading and writing durations (see duration.h).
 * Invariant: a string is either read exactly, to the millisecond, or
 * refused with the reason; nothing is rounded and nothing overflows.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"

struct unit {
	const char *name;
	uint64_t ms;
};

/* "ms" before "m", so that the longest unit name wins. */
static const struct unit units[] = {
	{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * One NUMBER at *p: the whole part and the fraction as numerator over a
 * power of ten. Fractions are kept exact so that "0.001s" is 1 ms and
 * "1.0005s" is refused rather than rounded.
 */
static int read_number(const char **p, uint64_t *whole, uint64_t *frac,
		       uint64_t *scale, char *msg, size_t msglen)
{
	const char *s = *p;
	int digits = 0;

	*whole = 0;
	*frac = 0;
	*scale = 1;
	while (is_digit(*s)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (*whole > (FG_DURATION_MAX_MS - d) / 10) {
			snprintf(msg, msglen, "the number is too large");
			return -1;
		}
		*whole = *whole * 10 + d;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		int fdigits = 0;
		while (is_digit(*s)) {
			/* past 1e-9 no unit can make a whole millisecond */
			if (fdigits == 9) {
				snprintf(msg, msglen, "too many digits after "
					 "the decimal point");
				return -1;
			}
			*frac = *frac * 10 + (uint64_t)(*s - '0');
			*scale *= 10;
			s++;
			fdigits++;
		}
		if (fdigits == 0) {
			snprintf(msg, msglen, "a digit must follow the "
				 "decimal point");
			return -1;
		}
		digits += fdigits;
	}
	if (digits == 0) {
		snprintf(msg, msglen, "expected a number");
		return -1;
	}
	*p = s;
	return 0;
}

/* whole.frac (frac/scale) times unit_ms, exactly, added to *total. */
static int add_term(uint64_t *total, uint64_t whole, uint64_t frac,
		    uint64_t scale, uint64_t unit_ms, char *msg, size_t msglen)
{
	if (whole > FG_DURATION_MAX_MS / unit_ms)
		goto too_long;
	uint64_t v = whole * unit_ms;
	/* frac < scale <= 1e9 and unit_ms <= 3.6e6: the product fits */
	uint64_t f = frac * unit_ms;
	if (f % scale != 0) {
		snprintf(msg, msglen, "finer than a millisecond");
		return -1;
	}
	v += f / scale;
	if (v > FG_DURATION_MAX_MS - *total)
		goto too_long;
	*total += v;
	return 0;
too_long:
	snprintf(msg, msglen, "too long");
	return -1;
}

int fg_duration_parse(const char *s, uint64_t *ms, char *msg, size_t msglen)
{
	const char *p = s;
	uint64_t total = 0;
	int terms = 0;

	if (!s || !*s) {
		snprintf(msg, msglen, "empty duration");
		return -1;
	}
	while (*p) {
		uint64_t whole, frac, scale;
		if (read_number(&p, &whole, &frac, &scale, msg, msglen) < 0)
			return -1;
		const struct unit *u = NULL;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t n = strlen(units[i].name);
			if (strncmp(p, units[i].name, n) == 0 &&
			    !(p[n] >= 'a' && p[n] <= 'z')) {
				u = &units[i];
				p += n;
				break;
			}
		}
		if (!u) {
			if (*p == '\0' && terms == 0) {
				/* one plain number: seconds */
				if (add_term(&total, whole, frac, scale, 1000,
					     msg, msglen) < 0)
					return -1;
				terms++;
				break;
			}
			if (*p == '\0')
				snprintf(msg, msglen, "the last number has no "
					 "unit (ms, s, m or h)");
			else
				snprintf(msg, msglen, "unknown unit at '%s' "
					 "(use ms, s, m or h)", p);
			return -1;
		}
		if (add_term(&total, whole, frac, scale, u->ms, msg,
			     msglen) < 0)
			return -1;
		terms++;
	}
	*ms = total;
	return 0;
}

const char *fg_duration_format(uint64_t ms, char *buf, size_t len)
{
	if (ms < 1000) {
		snprintf(buf, len, "%llums", (unsigned long long)ms);
	} else if (ms % 1000 != 0) {
		/* seconds with the fraction's trailing zeros dropped */
		char frac[8];
		snprintf(frac, sizeof(frac), "%03llu",
			 (unsigned long long)(ms % 1000));
		for (int i = 2; i > 0 && frac[i] == '0'; i--)
			frac[i] = '\0';
		snprintf(buf, len, "%llu.%ss",
			 (unsigned long long)(ms / 1000), frac);
	} else {
		unsigned long long s = ms / 1000;
		unsigned long long h = s / 3600, m = (s / 60) % 60;
		char *p = buf;
		size_t left = len;
		int n;

		buf[0] = '\0';
#define PART(v, u) \
	if ((v) && left > 1) { \
		n = snprintf(p, left, "%llu%s", (v), (u)); \
		if (n < 0 || (size_t)n >= left) \
			return buf; \
		p += n; \
		left -= (size_t)n; \
	}
		PART(h, "h")
		PART(m, "m")
		PART(s % 60, "s")
#undef PART
	}
	return buf;
}
