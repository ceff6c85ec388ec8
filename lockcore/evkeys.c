/*
 * evkeys.c - where a lock's events are kept (contract v1.5): the name of
 * the Redis stream an event of lock N goes to.
 *
 * One Redis (direct or behind Sentinel) keeps every event in one stream,
 * fg:{!ev}:s, so that a reader's order is the order Redis recorded them
 * in. A Cluster keeps them per hash slot: the events of N go to
 * fg:{!evT}:s, T being the first number whose tag "!evT" hashes to N's
 * own slot. A lock's functions may only touch keys of its slot, and this
 * stream is one of them, so the function that changes a lock appends its
 * event with no extra round trip; the streams spread over the masters as
 * the slots do, so no node takes every lock's events; a slot that moves
 * takes its stream with it, and its ids keep growing.
 *
 * Invariants: the table is the same in every process (it depends on
 * CRC16 alone), so every gateway names the same stream for a lock;
 * fg__ev_key() is pure once fg__ev_tags() was built (it builds it on
 * first use, under a once).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fencegate/name.h"
#include "fencegate/topo.h"
#include "lockcore-private.h"

static unsigned tag_of_slot[FG_SLOTS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* About 170,000 CRC16s of a few bytes (every slot is hit by then): well
 * under a millisecond, once per process. */
static void build(void)
{
	char tag[24];
	unsigned left = FG_SLOTS;
	static unsigned char seen[FG_SLOTS];

	for (unsigned t = 0; left; t++) {
		int n = snprintf(tag, sizeof(tag), "!ev%u", t);
		unsigned s = fg_keyslot(tag, (size_t)n);
		if (!seen[s]) {
			seen[s] = 1;
			tag_of_slot[s] = t;
			left--;
		}
	}
}

unsigned fg__ev_tag(unsigned slot)
{
	pthread_once(&once, build);
	return tag_of_slot[slot & (FG_SLOTS - 1)];
}

size_t fg__ev_slot_key(unsigned slot, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "fg:{!ev%u}:s", fg__ev_tag(slot));
	return n < 0 ? 0 : (size_t)n;
}

size_t fg__ev_key(const char *name, bool cluster, char *buf, size_t cap)
{
	if (!cluster) {
		int n = snprintf(buf, cap, "%s", FG__EV_ONE);
		return n < 0 ? 0 : (size_t)n;
	}
	/* the slot of the lock's own key, as Redis reads its tag (a name
	 * with a brace in it included) */
	char key[FG_NAME_MAX + 16];
	int n = snprintf(key, sizeof(key), "fg:{%s}:s", name);
	if (n < 0 || (size_t)n >= sizeof(key))
		return 0;
	return fg__ev_slot_key(fg_keyslot(key, (size_t)n), buf, cap);
}
