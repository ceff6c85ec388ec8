/*
 * clock.h - the gateway's one clock: monotonic milliseconds. Private to
 * the gateway.
 *
 * It measures durations only (timeouts, write deadlines counted from when
 * an admission was asked for); whether a lease is alive is always Redis'
 * clock.
 */
#ifndef FENCEGATE_CLOCK_H
#define FENCEGATE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t fg_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
