/*
 * evtext.c - an event's JSON, its Server-Sent Events frame and the order
 * of event ids (evtext.h).
 *
 * The JSON is made once per event, where it is read (the follower, a
 * history read), with jansson: every reader that shows the event copies
 * the same bytes, so showing it costs no allocation and no escaping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/evtext.h"

size_t fg_ev_time(uint64_t ms, char *out, size_t cap)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	if (cap < 32 || !gmtime_r(&s, &tm)) {
		if (cap)
			out[0] = '\0';
		return 0;
	}
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(out + n, cap - n, ".%03uZ", (unsigned)(ms % 1000));
	return n;
}

int fg_ev_cursor_cmp(const struct fg_ev_cursor *a, const struct fg_ev_cursor *b)
{
	if (!a->set || !b->set)
		return (int)a->set - (int)b->set;
	if (a->ms != b->ms)
		return a->ms < b->ms ? -1 : 1;
	if (a->slot != b->slot)
		return a->slot < b->slot ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return 0;
}

/* A string field: the string, or null when absent ("") or not UTF-8
 * (a principal or a lock name never is; an owner comes checked): the
 * event shows with a null rather than not at all. */
static json_t *str_or_null(const char *s)
{
	json_t *v = s && *s ? json_string(s) : NULL;
	return v ? v : json_null();
}

/* The detail object: e->detail's text when it is one, else {}. A
 * writer's bug in one event shows as {} in it, never as an answer that
 * does not parse. */
static json_t *detail_of(const char *text)
{
	if (!text || !*text)
		return json_object();
	json_t *d = json_loads(text, 0, NULL);
	if (d && json_is_object(d))
		return d;
	json_decref(d);
	return json_object();
}

struct fg_evitem *fg_evitem_make(const struct fg_event *e)
{
	struct fg_ev_cursor cur;
	if (fg_event_id_parse(e->id, &cur) != 0)
		return NULL;
	char at[32];
	fg_ev_time(e->at_ms, at, sizeof(at));
	json_t *o = json_object();
	if (!o)
		return NULL;
	struct fg_evitem *it = NULL;
	char *text = NULL;
	if (json_object_set_new(o, "id", json_string(e->id)) ||
	    json_object_set_new(o, "at", json_string(at)) ||
	    json_object_set_new(o, "kind", str_or_null(e->kind)) ||
	    json_object_set_new(o, "lock", str_or_null(e->lock)) ||
	    json_object_set_new(o, "token", e->has_token
				? json_integer((json_int_t)e->token) : json_null()) ||
	    json_object_set_new(o, "principal", str_or_null(e->principal)) ||
	    json_object_set_new(o, "owner", str_or_null(e->owner)) ||
	    json_object_set_new(o, "client", str_or_null(e->client)) ||
	    json_object_set_new(o, "gateway", str_or_null(e->gateway)) ||
	    json_object_set_new(o, "detail", detail_of(e->detail)))
		goto done;
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text)
		goto done;
	const char *kind = e->kind ? e->kind : "";
	const char *lock = e->lock ? e->lock : "";
	size_t idl = strlen(e->id), kl = strlen(kind), ll = strlen(lock);
	size_t jl = strlen(text);
	/* one block: the item, then id, kind, lock and JSON, NUL-ended */
	it = malloc(sizeof(*it) + idl + kl + ll + jl + 4);
	if (!it)
		goto done;
	char *p = (char *)(it + 1);
	it->cur = cur;
	it->at_ms = e->at_ms;
	it->id = memcpy(p, e->id, idl + 1);
	p += idl + 1;
	it->kind = memcpy(p, kind, kl + 1);
	p += kl + 1;
	it->lock = memcpy(p, lock, ll + 1);
	p += ll + 1;
	it->json = memcpy(p, text, jl + 1);
	it->json_len = jl;
done:
	free(text);
	json_decref(o);
	return it;
}

#define SSE_ID "id: "
#define SSE_DATA "\ndata: "
#define SSE_END "\n\n"
#define LIT(s) (sizeof(s) - 1)

size_t fg_sse_frame_len(const struct fg_evitem *it)
{
	return LIT(SSE_ID) + strlen(it->id) + LIT(SSE_DATA) + it->json_len +
	       LIT(SSE_END);
}

static char *put(char *out, const char *s, size_t n)
{
	memcpy(out, s, n);
	return out + n;
}

size_t fg_sse_frame(const struct fg_evitem *it, char *out)
{
	/* the JSON is compact: no line break in it ends the data line. No
	 * event: line: an event is a plain message (an EventSource's
	 * onmessage gets every one), its kind in the JSON */
	char *p = out;
	p = put(p, SSE_ID, LIT(SSE_ID));
	p = put(p, it->id, strlen(it->id));
	p = put(p, SSE_DATA, LIT(SSE_DATA));
	p = put(p, it->json, it->json_len);
	p = put(p, SSE_END, LIT(SSE_END));
	return (size_t)(p - out);
}

bool fg_ev_under(const struct fg_evitem *it, const char *prefix, size_t plen)
{
	return strncmp(it->lock, prefix, plen) == 0;
}
