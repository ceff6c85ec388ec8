/*
 * duration.h - durations on the command line, such as 30s, 500ms, 1m30s.
 *
 * A duration is one or more terms NUMBER UNIT, with UNIT one of ms, s, m,
 * h and NUMBER decimal digits with an optional fraction ("1.5s"); or one
 * plain NUMBER, which counts seconds, as in sleep(1) and timeout(1). The
 * total must be a whole number of milliseconds. Nothing else is accepted:
 * no sign, no blank, no exponent, no unit twice in a row without a number.
 */
#ifndef FENCECTL_DURATION_H
#define FENCECTL_DURATION_H

#include <stddef.h>
#include <stdint.h>

/** The largest duration accepted: 2^53 - 1 ms (about 285,000 years). */
#define FG_DURATION_MAX_MS ((uint64_t)9007199254740991)

/**
 * Parses s into *ms. 0 on success; -1 with a reason in msg[msglen] (and
 * *ms untouched) otherwise.
 */
int fg_duration_parse(const char *s, uint64_t *ms, char *msg, size_t msglen);

/**
 * Writes ms as a short human duration ("250ms", "1.5s", "2m", "1h30m")
 * into buf[len] and returns buf.
 */
const char *fg_duration_format(uint64_t ms, char *buf, size_t len);

#endif
