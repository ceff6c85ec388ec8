/*
 * list.h - one page of the listing, GET /_fence/v1/locks (contract v1.3).
 * Private to the lock API (locks.c parses and answers the request).
 */
#ifndef FENCEGATE_API_LIST_H
#define FENCEGATE_API_LIST_H

#include <jansson.h>

#include "fencegate/lock.h"

#define FG_LIST_LIMIT_DEFAULT 100u
#define FG_LIST_LIMIT_MAX 1000u

struct fg_list;

/** Told once, on the loop's thread, when the page is read (err FG_OK) or
 *  cannot be (a lockcore error). */
typedef void fg_list_done_cb(int err, void *arg);

/**
 * Starts reading a page: the index's names starting with prefix after
 * `after` (NULL: from the first), at most limit, then each one's lock.
 * NULL when out of memory or Redis could not be asked (*err says which);
 * else done is called exactly once, later. Freed by fg_list_free(), which
 * may come before done (the client left): what is still in flight then
 * answers into nothing.
 */
struct fg_list *fg_list_start(fg_astore *as, const char *prefix,
			      const char *after, unsigned limit,
			      fg_list_done_cb *done, void *arg, int *err);

/**
 * The page's answer, {"locks":[...],"cursor":C|null} (new reference, NULL
 * when out of memory). Locks found idle are dropped from the index on the
 * way.
 */
json_t *fg_list_answer(struct fg_list *l, fg_astore *as);

void fg_list_free(struct fg_list *l);

/** The cursor's text for a name (out: at least FG_LIST_CURSOR_MAX bytes),
 *  and back: 0, or -1 for a cursor that is not one. */
#define FG_LIST_CURSOR_MAX (4 * (FG_NAME_MAX + 3) / 3 + 4)
int fg_list_cursor(const char *name, char *out, size_t cap);
int fg_list_uncursor(const char *cursor, char name[FG_NAME_MAX + 1]);

#endif
