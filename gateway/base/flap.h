/*
 * flap.h - what to log about one dependency (a Redis, the upstream) as it
 * goes down and comes back. Private to the gateway; pure (the caller
 * passes the time), so that it is unit-tested.
 *
 * Invariants: at most one line per FG_FLAP_QUIET_MS for one dependency,
 * whatever it does (the first look, said at start, aside: it is no
 * change); a change that was not logged is counted and the count
 * goes with the next line; once the dependency holds still, the log ends
 * by saying the state it is in (at the latest FG_FLAP_QUIET_MS after the
 * last line); an outage that lasts FG_FLAP_LONG_MS is said once more, as
 * an error, whatever the quiet time.
 */
#ifndef FENCEGATE_FLAP_H
#define FENCEGATE_FLAP_H

#include <stdbool.h>
#include <stdint.h>

#define FG_FLAP_QUIET_MS 10000
#define FG_FLAP_LONG_MS 30000

enum fg_flap_line {
	FG_FLAP_NONE,       /* nothing to log now */
	FG_FLAP_FIRST_UP,   /* the first look found it up (info) */
	FG_FLAP_DOWN,       /* down (warn), or the first look found it down */
	FG_FLAP_UP,         /* back up (warn) */
	FG_FLAP_STILL_DOWN, /* down for FG_FLAP_LONG_MS (error, once an outage) */
};

/** One dependency's state; zero-initialised (fg_flap_init) before use. */
struct fg_flap {
	int said;            /* -1: nothing said yet; 0 down; 1 up */
	int is;              /* -1: never looked; 0 down; 1 up */
	uint64_t down_since;  /* when the last outage began */
	uint64_t up_since;    /* when it ended */
	uint64_t said_at;     /* the last change said */
	bool timing;          /* a change was said: the quiet time runs */
	unsigned hidden;      /* changes not logged since the last line */
	bool long_said;       /* this outage's error line is out */
};

/** What a line reports besides its kind. */
struct fg_flap_say {
	unsigned hidden;     /* changes not logged since the line before */
	uint64_t down_ms;    /* FG_FLAP_UP: how long the last outage lasted;
				STILL_DOWN: how long this one has */
};

void fg_flap_init(struct fg_flap *f);

/**
 * One look at the dependency at now_ms (a monotonic clock): up or not.
 * Returns the line to log now, if any, and fills *say for it.
 */
enum fg_flap_line fg_flap_note(struct fg_flap *f, bool up, uint64_t now_ms,
			       struct fg_flap_say *say);

#endif
