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
};

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
		     uint32_t ttl_ms)
{
	pthread_mutex_lock(&mu);
	struct grant *g = find(name, token);
	/* owned by the table from here; drop() and fg_held_finish() free it */
	if (!g && ngrants < FG_HELD_MAX && (g = calloc(1, sizeof(*g)))) {
		key_of(g->key, sizeof(g->key), name, token);
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
};

void fg_held_check_due(fg_store *st)
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
			if (chk.status != FG_CHECK_FORGED)
				fg_metrics_lock_expired(g->holders);
			drop(g);
		}
		pthread_mutex_unlock(&mu);
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
