/*
 * evring.c - the ring of the newest events read (evring.h).
 */
#include <stdlib.h>

#include "base/evring.h"

int fg_evring_init(struct fg_evring *r, size_t cap)
{
	*r = (struct fg_evring){ .cap = cap ? cap : 1, .first = 1, .next = 1 };
	r->slot = calloc(r->cap, sizeof(*r->slot));
	return r->slot ? 0 : -1;
}

void fg_evring_finish(struct fg_evring *r)
{
	if (!r->slot)
		return;
	for (uint64_t n = r->first; n < r->next; n++)
		free(r->slot[n % r->cap]);
	free(r->slot);
	r->slot = NULL;
}

void fg_evring_start(struct fg_evring *r, const struct fg_ev_cursor *from)
{
	if (r->first == r->next && !r->base.set && from->set)
		r->base = *from;
}

void fg_evring_reset(struct fg_evring *r)
{
	for (uint64_t n = r->first; n < r->next; n++) {
		free(r->slot[n % r->cap]);
		r->slot[n % r->cap] = NULL;
	}
	r->first = r->next;
	r->base = (struct fg_ev_cursor){ 0 };
}

void fg_evring_push(struct fg_evring *r, struct fg_evitem *it)
{
	if (r->next - r->first == r->cap) {
		struct fg_evitem **old = &r->slot[r->first % r->cap];
		/* what is after it is still held */
		r->base = (*old)->cur;
		free(*old);
		*old = NULL;
		r->first++;
	} else if (!r->base.set) {
		/* the first event read: everything after it is held */
		r->base = it->cur;
	}
	r->slot[r->next % r->cap] = it;
	r->next++;
}

const struct fg_evitem *fg_evring_get(const struct fg_evring *r, uint64_t n)
{
	if (n < r->first || n >= r->next)
		return NULL;
	return r->slot[n % r->cap];
}

bool fg_evring_covers(const struct fg_evring *r, const struct fg_ev_cursor *after)
{
	return r->base.set && !r->base.cluster && after->set &&
	       fg_ev_cursor_cmp(after, &r->base) >= 0;
}

uint64_t fg_evring_seek(const struct fg_evring *r, const struct fg_ev_cursor *after)
{
	uint64_t n = r->next;
	while (n > r->first &&
	       fg_ev_cursor_cmp(&r->slot[(n - 1) % r->cap]->cur, after) > 0)
		n--;
	return n;
}
