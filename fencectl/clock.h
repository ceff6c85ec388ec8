/*
 * clock.h - fencectl's one clock: monotonic milliseconds.
 *
 * Invariant: every deadline fencectl keeps (lease expiry, waits, kill-after)
 * is measured on this clock, never on the wall clock, so that setting the
 * system time neither shortens nor lengthens a lease as fencectl sees it.
 */
#ifndef FENCECTL_CLOCK_H
#define FENCECTL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t fg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
