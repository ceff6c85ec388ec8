/*
 * held.c - the grants made through this gateway, by lock and token, with
 * how many of their holders came through it and when the last of their
 * leases ends as this gateway counts it (held.h).
 *
 * Invariants: the table is touched under mu only, by the loops (a call
 * answered) and the maintenance thread (the checks); the locks-held gauge
 * moves with every holder added or removed here and nowhere else; Redis
 * is never called under mu.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "base/clock.h"
#include "proc/held.h"
#include "proc/metrics.h"

struct grant {
	char key[FG_NAME_MAX + 24];  /* "<token> <name>" */
	uint32_t holders;            /* leases of it granted here */
	uint32_t ttl_ms;             /* the last one asked for */
	uint64_t due_ms;             /* fg_clock_ms() to ask Redis at */
	UT_hash_handle hh;
	char who[];                  /* principal, owner, client: three
					NUL-ended strings ("" none), in the
					grant's own allocation */
};

/* The three strings of who, each cut to its field's size (a client's
 * address as the request's record holds it, base/record.h). */
#define WHO_CLIENT_MAX 47
#define WHO_MAX (FG_PRINCIPAL_MAX + 1 + FG_OWNER_MAX + 1 + WHO_CLIENT_MAX + 1)

static size_t who_len(const char *s, size_t max)
{
	return s ? strnlen(s, max) : 0;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct grant *grants;
static unsigned ngrants;

/* "<token> <name>", cut to n - 1 bytes as snprintf() would: written by
 * hand, since every grant and release looks its key up twice */
static void key_of(char *key, size_t n, const char *name, uint64_t token)
{
	char tmp[20];
	size_t d = 0, p = 0;

	do {
		tmp[sizeof(tmp) - ++d] = (char)('0' + token % 10);
		token /= 10;
	} while (token);
	for (size_t i = 0; i < d && p + 1 < n; i++)
		key[p++] = tmp[sizeof(tmp) - d + i];
	if (p + 1 < n)
		key[p++] = ' ';
	for (; *name && p + 1 < n; name++)
		key[p++] = *name;
	key[p] = '\0';
}

static struct grant *find(const char *name, uint64_t token)
{
	char key[FG_NAME_MAX + 24];
	struct grant *g;
	key_of(key, sizeof(key), name, token);
	HASH_FIND_STR(grants, key, g);
	return g;
}

/* Removes g, its holders leaving the gauge. Under mu. */
static void drop(struct grant *g)
{
	fg_metrics_gauge_add(FG_GAUGE_HELD, -(int)g->holders);
	HASH_DEL(grants, g);
	ngrants--;
	free(g);
}

void fg_held_granted(const char *name, uint64_t token, bool new_holder,
		     uint32_t ttl_ms, const struct fg_held_who *who)
{
	pthread_mutex_lock(&mu);
	struct grant *g = find(name, token);
	/* owned by the table from here; drop() and fg_held_finish() free it */
	size_t pl = who_len(who ? who->principal : NULL, FG_PRINCIPAL_MAX),
	       ol = who_len(who ? who->owner : NULL, FG_OWNER_MAX),
	       cl = who_len(who ? who->client : NULL, WHO_CLIENT_MAX);
	if (!g && ngrants < FG_HELD_MAX &&
	    (g = calloc(1, sizeof(*g) + pl + ol + cl + 3))) {
		key_of(g->key, sizeof(g->key), name, token);
		/* calloc()'s zeroes end each string */
		if (pl)
			memcpy(g->who, who->principal, pl);
		if (ol)
			memcpy(g->who + pl + 1, who->owner, ol);
		if (cl)
			memcpy(g->who + pl + ol + 2, who->client, cl);
		HASH_ADD_STR(grants, key, g);
		ngrants++;
		new_holder = true; /* the first this gateway knows of */
	}
	if (g) {
		if (new_holder) {
			g->holders++;
			fg_metrics_gauge_add(FG_GAUGE_HELD, 1);
		}
		uint64_t due = fg_clock_ms() + ttl_ms + FG_HELD_GRACE_MS;
		if (due > g->due_ms)
			g->due_ms = due;
		g->ttl_ms = ttl_ms;
	}
	pthread_mutex_unlock(&mu);
}

void fg_held_renewed(const char *name, uint64_t token, uint32_t ttl_ms)
{
	pthread_mutex_lock(&mu);
	struct grant *g = find(name, token);
	if (g) {
		uint64_t due = fg_clock_ms() + ttl_ms + FG_HELD_GRACE_MS;
		if (due > g->due_ms)
			g->due_ms = due;
		g->ttl_ms = ttl_ms;
	}
	pthread_mutex_unlock(&mu);
}

void fg_held_left(const char *name, uint64_t token)
{
	pthread_mutex_lock(&mu);
	struct grant *g = find(name, token);
	if (g && g->holders <= 1) {
		drop(g);
	} else if (g) {
		g->holders--;
		fg_metrics_gauge_add(FG_GAUGE_HELD, -1);
	}
	pthread_mutex_unlock(&mu);
}

void fg_held_ended(const char *name, uint64_t token)
{
	pthread_mutex_lock(&mu);
	struct grant *g = find(name, token);
	if (g)
		drop(g);
	pthread_mutex_unlock(&mu);
}

struct due {
	char name[FG_NAME_MAX + 1];
	uint64_t token;
	char who[WHO_MAX];  /* the grant's, as it keeps them */
};

/* The expired event of due grant d (outside mu: Redis is called). */
static void record_expired(fg_store *st, const struct due *d)
{
	const char *p = d->who, *o = p + strlen(p) + 1, *c = o + strlen(o) + 1;
	struct fg_event_rec e = {
		.kind = "expired",
		.lock = d->name,
		.principal = p,
		.owner = o,
		.client = c,
		.token = d->token,
		.has_token = true,
	};
	if (fg_events_add(st, &e) != FG_OK)
		fg_metrics_events_dropped(1);
}

void fg_held_check_due(fg_store *st, bool events)
{
	static struct due due[FG_HELD_CHECKS];  /* the maintenance thread's */
	size_t n = 0;
	uint64_t now = fg_clock_ms();

	pthread_mutex_lock(&mu);
	for (struct grant *g = grants; g && n < FG_HELD_CHECKS; g = g->hh.next) {
		if (g->due_ms > now)
			continue;
		char *sp = strchr(g->key, ' ');
		due[n].token = strtoull(g->key, NULL, 10);
		snprintf(due[n].name, sizeof(due[n].name), "%s", sp + 1);
		const char *p = g->who, *o = p + strlen(p) + 1,
			   *c = o + strlen(o) + 1;
		size_t pl = strlen(p), ol = strlen(o), cl = strlen(c);
		memcpy(due[n].who, p, pl + 1);
		memcpy(due[n].who + pl + 1, o, ol + 1);
		memcpy(due[n].who + pl + ol + 2, c, cl + 1);
		n++;
	}
	pthread_mutex_unlock(&mu);

	for (size_t i = 0; i < n; i++) {
		struct fg_check chk;
		/* a slow or failing Redis costs one call and the budget at
		 * most: the rest stay due for the next period */
		if (fg_clock_ms() - now > FG_HELD_BUDGET_MS)
			break;
		int err = fg_lock_check(st, due[i].name, due[i].token, &chk);
		bool gone = false;
		pthread_mutex_lock(&mu);
		struct grant *g = find(due[i].name, due[i].token);
		if (!g) {
			/* released or given back while Redis was asked */
		} else if (err) {
			g->due_ms = fg_clock_ms() + 1000;
		} else if (chk.status == FG_CHECK_VALID) {
			g->due_ms = fg_clock_ms() + (g->ttl_ms ? g->ttl_ms : 1000);
		} else {
			/* stale or expired: its leases ran out (forged: Redis
			 * lost it; it is not held either) */
			if (chk.status != FG_CHECK_FORGED) {
				fg_metrics_lock_expired(g->holders);
				gone = true;
			}
			drop(g);
		}
		pthread_mutex_unlock(&mu);
		if (gone && events)
			record_expired(st, &due[i]);
		if (err)
			break;
	}
}

void fg_held_finish(void)
{
	pthread_mutex_lock(&mu);
	struct grant *g, *tmp;
	HASH_ITER(hh, grants, g, tmp) {
		HASH_DEL(grants, g);
		free(g);
	}
	ngrants = 0;
	pthread_mutex_unlock(&mu);
}
