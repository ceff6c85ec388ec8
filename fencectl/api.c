/*
 * api.c - lock API bodies and grants (see api.h).
 * Invariant: a grant is accepted only with every field fencectl relies on
 * present and well typed, so that nothing later meets a missing lease or
 * token.
 */
#include <string.h>

#include "api.h"
#include "take.h"

static int set(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

json_t *fg_api_acquire_body(const struct fg_acquire_args *a, uint64_t wait_ms)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (set(o, "wait_ms", json_integer((json_int_t)wait_ms)) < 0)
		goto error;
	if (a->ttl_ms && set(o, "ttl_ms", json_integer((json_int_t)a->ttl_ms)) < 0)
		goto error;
	if (a->shared && set(o, "mode", json_string("shared")) < 0)
		goto error;
	if (a->owner && set(o, "owner", json_string(a->owner)) < 0)
		goto error;
	if (a->value && set(o, "value", json_string(a->value)) < 0)
		goto error;
	if (a->lease && set(o, "lease", json_string(a->lease)) < 0)
		goto error;
	if (a->lock_delay_ms >= 0 &&
	    set(o, "lock_delay_ms", json_integer(a->lock_delay_ms)) < 0)
		goto error;
	return o;
error:
	json_decref(o);
	return NULL;
}

json_t *fg_api_renew_body(const char *lease, uint64_t ttl_ms, const char *value)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (set(o, "lease", json_string(lease)) < 0)
		goto error;
	if (ttl_ms && set(o, "ttl_ms", json_integer((json_int_t)ttl_ms)) < 0)
		goto error;
	if (value && set(o, "value", json_string(value)) < 0)
		goto error;
	return o;
error:
	json_decref(o);
	return NULL;
}

void fg_grant_finish(struct fg_grant *g)
{
	fg_hold_free(g->hold);
	json_decref(g->answer);
	memset(g, 0, sizeof(*g));
}
