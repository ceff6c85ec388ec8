/*
 * recycle.h - a loop's stack of freed blocks of one size, handed out again
 * zeroed, for the per-request state that every request makes and frees.
 * Private to the gateway.
 *
 * calloc() never takes glibc's per-thread cache, and a block of 1 KiB or
 * more makes malloc() merge its free lists first: a request's two larger
 * blocks cost more there than their own work. A loop's blocks are made
 * and freed on its own thread, so a plain list needs no lock.
 *
 * Invariants: the stack holds at most FG_RECYCLE_MAX blocks, each made by
 * calloc(1, size) of its size; fg_recycle_get() returns a block as calloc()
 * would (all zero) or NULL; fg_recycle_drain() leaves it empty. Built with
 * AddressSanitizer, nothing is kept, so that a use after free is still
 * found.
 */
#ifndef FENCEGATE_RECYCLE_H
#define FENCEGATE_RECYCLE_H

#include <stdlib.h>
#include <string.h>

#define FG_RECYCLE_MAX 64

#if defined(__SANITIZE_ADDRESS__)
#define FG_RECYCLE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FG_RECYCLE_ASAN 1
#endif
#endif

struct fg_recycle {
	void *top;       /* a kept block; its first bytes point to the next */
	unsigned n;      /* blocks kept */
};

/* A zeroed block of `size` bytes (always the same size for one stack),
 * or NULL. The caller owns it until fg_recycle_put(). */
static inline void *fg_recycle_get(struct fg_recycle *r, size_t size)
{
	void *p = r->top;
	if (!p)
		return calloc(1, size);
	memcpy(&r->top, p, sizeof(void *));
	r->n--;
	memset(p, 0, size);
	return p;
}

/* Gives back a block of the stack's size (NULL: nothing). */
static inline void fg_recycle_put(struct fg_recycle *r, void *p)
{
	if (!p)
		return;
#ifdef FG_RECYCLE_ASAN
	(void)r;
	free(p);
#else
	if (r->n >= FG_RECYCLE_MAX) {
		free(p);
		return;
	}
	memcpy(p, &r->top, sizeof(void *));
	r->top = p;
	r->n++;
#endif
}

/* Frees every kept block. */
static inline void fg_recycle_drain(struct fg_recycle *r)
{
	while (r->top) {
		void *p = r->top;
		memcpy(&r->top, p, sizeof(void *));
		free(p);
	}
	r->n = 0;
}

#endif
