/*
 * evquery.c - GET /_fence/v1/events' query, read strictly (evquery.h).
 */
#include <stdio.h>
#include <string.h>

#include "base/evquery.h"
#include "base/jsonio.h"

/* Does s hold only characters a lock name may (a prefix of names)? */
static bool prefix_ok(const char *s, size_t n)
{
	if (n > FG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789._~/-", s[i]) || s[i] == '\0')
			return false;
	return true;
}

static int refuse(char *msg, size_t cap, const char *why)
{
	snprintf(msg, cap, "%s", why);
	return -1;
}

static const char *const AFTER_SHAPE =
	"an event id as the events gave it (<ms>-<seq>, or <ms>-<seq>.<slot> "
	"on a Redis Cluster)";

int fg_evq_parse(const struct fg_evq_arg *args, size_t n,
		 const char *last_event_id, struct fg_evq *q, char *msg,
		 size_t cap)
{
	static const char *const known[] = { "prefix", "after", "wait_ms",
					     "limit" };
	const char *seen[4] = { NULL, NULL, NULL, NULL };
	bool given[4] = { false, false, false, false };
	char why[192];

	*q = (struct fg_evq){ .limit = FG_EV_LIMIT_DEFAULT };
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		while (k < 4 && strcmp(args[i].key, known[k]) != 0)
			k++;
		if (k == 4) {
			snprintf(why, sizeof(why), "unknown parameter '%.64s' (the "
				 "events take prefix, after, wait_ms and limit)",
				 args[i].key);
			return refuse(msg, cap, why);
		}
		if (given[k]) {
			snprintf(why, sizeof(why), "parameter %s is given more "
				 "than once", known[k]);
			return refuse(msg, cap, why);
		}
		given[k] = true;
		seen[k] = args[i].value;
	}
	const char *prefix = seen[0] ? seen[0] : "";
	size_t plen = strlen(prefix);
	if (!prefix_ok(prefix, plen))
		return refuse(msg, cap, "prefix must be the start of a lock name "
			      "(at most 255 of A-Z a-z 0-9 . _ ~ / -)");
	memcpy(q->prefix, prefix, plen + 1);
	q->prefix_len = plen;

	/* after is checked even when Last-Event-ID stands for it: a bad
	 * parameter is 400 whatever else the request carries */
	if (given[1] && (!seen[1] || fg_event_id_parse(seen[1], &q->after))) {
		snprintf(why, sizeof(why), "after must be %s", AFTER_SHAPE);
		return refuse(msg, cap, why);
	}
	if (last_event_id && fg_event_id_parse(last_event_id, &q->after)) {
		snprintf(why, sizeof(why), "Last-Event-ID must be %s",
			 AFTER_SHAPE);
		return refuse(msg, cap, why);
	}
	if (given[1] || last_event_id)
		q->after.set = true;
	uint64_t v;
	if (given[2]) {
		if (!seen[2] || fg_parse_u64(seen[2], FG_EV_WAIT_MAX, &v))
			return refuse(msg, cap, "wait_ms must be an integer in "
				      "0..60000");
		q->wait_ms = (uint32_t)v;
	}
	if (given[3]) {
		if (!seen[3] || fg_parse_u64(seen[3], FG_EV_LIMIT_MAX, &v) || v == 0)
			return refuse(msg, cap, "limit must be an integer in 1..1000");
		q->limit = (unsigned)v;
	}
	return 0;
}
