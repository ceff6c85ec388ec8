/*
 * list.c - one page of the listing (contract v1.3): which locks are held,
 * waited for or in lock-delay, by whom, in name order.
 *
 * A page is two rounds to Redis whatever the number of locks: the index
 * gives at most `limit` names after the cursor (lockcore's index_page),
 * then every one of them is described at once (describe, pipelined per
 * node). Idle ones are left out of the answer and dropped from the index
 * (index_drop, which keeps a name an acquire was sent for since the look),
 * so the index shrinks back as locks fall idle. A page may therefore carry
 * fewer than `limit` locks and still a cursor: the cursor is the last name
 * read, not the last one shown. The index is asked for one name more than
 * the page holds, so that the last page says so (a null cursor) rather
 * than leaving it to one more, empty, round trip.
 *
 * Invariants: done is called exactly once per started page. A page outlives
 * its request when Redis has not answered everything yet (refs): the last
 * answer frees it. No lease is ever read, so none can be answered.
 */
#include <stdlib.h>
#include <string.h>

#include "fencegate/name.h"
#include "fencegate/sequencer.h"
#include "api/list.h"

struct entry {
	char *name;
	bool answered;
	bool active;
	uint64_t seen;     /* describe's bound on the lock's tokens */
	json_t *lock;      /* active: the entry, owned */
};

/* A page shows at most PAGE_PARTIES holders and as many waiters in all,
 * spread over its locks (at least PARTIES_MIN, at most PARTIES_MAX each):
 * an answer stays in the megabytes even for 1000 locks with 20000 waiters
 * each. */
#define PAGE_PARTIES 10000u
#define PARTIES_MIN 10u
#define PARTIES_MAX 1000u

struct fg_list {
	fg_list_done_cb *done;
	void *arg;
	unsigned limit;
	size_t n;            /* names of this page (at most limit) */
	bool more;           /* the index had one more after them */
	struct entry *e;     /* n of them */
	size_t pending;      /* describes not answered */
	int refs;            /* the request (until fg_list_free) + calls in flight */
	int err;
	bool told;
	fg_astore *as;
};

static void unref(struct fg_list *l)
{
	if (--l->refs > 0)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->e[i].name);
		json_decref(l->e[i].lock);
	}
	free(l->e);
	free(l);
}

static void tell(struct fg_list *l, int err)
{
	if (l->told)
		return;
	l->told = true;
	l->err = err;
	if (l->done)
		l->done(err, l->arg);
}

static json_t *parties(const struct fg_party *p, size_t n, const char *ms_name)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_pack("{s:o, s:o, s:o, s:I}",
			"owner", p[i].owner ? json_string(p[i].owner) : json_null(),
			"principal", p[i].principal ? json_string(p[i].principal)
						    : json_null(),
			"client", p[i].client && *p[i].client
				? json_string(p[i].client) : json_null(),
			ms_name, (json_int_t)p[i].ms);
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *lock_entry(const char *name, const struct fg_lock_detail *d)
{
	return json_pack("{s:s, s:o, s:o, s:I, s:I, s:o, s:o}",
		"name", name,
		"mode", d->held ? json_string(fg_mode_name(d->mode)) : json_null(),
		"token", d->has_token ? json_integer((json_int_t)d->token)
				      : json_null(),
		"ttl_ms", (json_int_t)d->ttl_ms,
		"delay_ms", (json_int_t)d->delay_ms,
		"holders", parties(d->holders, d->nholders, "held_ms"),
		"waiters", parties(d->waiters, d->nwaiters, "waited_ms"));
}

struct ask {
	struct fg_list *l;
	size_t i;
};

static void on_detail(int err, const struct fg_lock_detail *d, void *arg)
{
	struct ask *a = arg;
	struct fg_list *l = a->l;
	struct entry *e = &l->e[a->i];
	free(a);
	if (!err && !l->told) {
		e->answered = true;
		e->active = d->active;
		e->seen = d->seen;
		if (d->active) {
			e->lock = lock_entry(e->name, d);
			if (!e->lock)
				err = FG_ENOMEM;
		}
	}
	if (err)
		tell(l, err);
	if (l->pending > 0 && --l->pending == 0)
		tell(l, FG_OK);
	unref(l);
}

static void on_names(int err, const char *const *names, size_t n, void *arg)
{
	struct fg_list *l = arg;
	if (n > l->limit) {
		l->more = true;
		n = l->limit;
	}
	if (!err && n > 0) {
		l->e = calloc(n, sizeof(*l->e));
		if (!l->e)
			err = FG_ENOMEM;
	}
	for (size_t i = 0; !err && i < n; i++) {
		l->e[i].name = strdup(names[i]);
		if (!l->e[i].name)
			err = FG_ENOMEM;
		else
			l->n = i + 1;
	}
	/* a name the index holds is valid: only acquires put names there */
	l->pending = l->n + 1; /* +1: nothing is told before all are sent */
	for (size_t i = 0; !err && !l->told && i < l->n; i++) {
		struct ask *a = malloc(sizeof(*a));
		if (!a) {
			err = FG_ENOMEM;
			break;
		}
		*a = (struct ask){ l, i };
		l->refs++;
		unsigned per = PAGE_PARTIES / l->limit;
		per = per < PARTIES_MIN ? PARTIES_MIN :
		      per > PARTIES_MAX ? PARTIES_MAX : per;
		int e = fg_alock_describe(l->as, l->e[i].name, per, on_detail, a);
		if (e) {
			l->refs--;
			free(a);
			err = e;
		}
	}
	if (err)
		tell(l, err); /* the answers still in flight only unref */
	else if (--l->pending == 0)
		tell(l, FG_OK);
	unref(l);
}

struct fg_list *fg_list_start(fg_astore *as, const char *prefix,
			      const char *after, unsigned limit,
			      fg_list_done_cb *done, void *arg, int *err)
{
	struct fg_list *l = calloc(1, sizeof(*l));
	if (!l) {
		*err = FG_ENOMEM;
		return NULL;
	}
	l->done = done;
	l->arg = arg;
	l->limit = limit;
	l->as = as;
	l->refs = 2; /* the request, and the index call */
	*err = fg_alock_index_page(as, prefix, after, limit + 1, on_names, l);
	if (*err) {
		free(l);
		return NULL;
	}
	return l;
}

json_t *fg_list_answer(struct fg_list *l, fg_astore *as)
{
	json_t *locks = json_array();
	json_t *o = json_object();
	if (!locks || !o)
		goto fail;
	for (size_t i = 0; i < l->n; i++) {
		struct entry *e = &l->e[i];
		if (!e->answered)
			continue;
		if (!e->active) {
			(void)fg_alock_index_drop(as, e->name, e->seen);
			continue;
		}
		if (json_array_append(locks, e->lock))
			goto fail;
	}
	json_t *cur = json_null();
	if (l->more) {
		char c[FG_LIST_CURSOR_MAX];
		if (fg_list_cursor(l->e[l->n - 1].name, c, sizeof(c)) < 0)
			goto fail;
		cur = json_string(c);
	}
	if (json_object_set_new(o, "locks", locks) ||
	    json_object_set_new(o, "cursor", cur))
		goto fail_o;
	return o;
fail:
	json_decref(locks);
fail_o:
	json_decref(o);
	return NULL;
}

void fg_list_free(struct fg_list *l)
{
	if (!l)
		return;
	l->done = NULL; /* nobody to tell any more */
	l->told = true;
	unref(l);
}

/* The cursor is the base64url of the last name read: opaque to clients,
 * checked as a name when it comes back. */
int fg_list_cursor(const char *name, char *out, size_t cap)
{
	return fg_b64url_encode((const uint8_t *)name, strlen(name), out, cap);
}

int fg_list_uncursor(const char *cursor, char name[FG_NAME_MAX + 1])
{
	int n = fg_b64url_decode(cursor, strlen(cursor), (uint8_t *)name,
				 FG_NAME_MAX);
	if (n <= 0 || !fg_name_valid(name, (size_t)n))
		return -1;
	name[n] = '\0';
	return 0;
}
