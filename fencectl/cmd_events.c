/*
 * cmd_events.c - `events [PREFIX] [--follow]`: what happened to the locks
 * under PREFIX (contract v1.5).
 *
 * Reads GET /_fence/v1/events?prefix=P page by page from the oldest event
 * the gateway keeps, each page `after` the last one's `next`, until a page
 * reads nothing new (its `next` is the `after` it was asked with, or
 * null: no event at all). With --follow it then asks the same with
 * wait_ms, a long-poll that answers as soon as an event exists after
 * `next`, forever; a gateway that does not answer is tried again, with a
 * pause that grows to 5 s, from where it was. Prints one line per event
 * (evline.h), or with --json each event's object on one line. A `gap`
 * (events after which this page starts were no longer kept) is said on
 * stderr. Invariant: every event is printed once, in the gateway's order;
 * a page is printed only once it was read whole.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "evline.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "sigs.h"

#define EV_PAGE 1000          /* events a page asks for (the API's most) */
#define EV_FOLLOW_WAIT_MS 30000
#define EV_BACKOFF_MAX_MS 5000
#define EV_PAGES_MAX 1000000  /* without --follow: a `next` that moves for
				 ever is a broken gateway */

enum {
	OPT_FOLLOW = FG_OPT_FIRST_OWN,
};

struct events_cmd {
	struct fg_cli *cli;
	bool follow;
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	struct events_cmd *c = ctx;
	int g = fg_cli_global(c->cli, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	if (id == OPT_FOLLOW) {
		c->follow = true;
		return 0;
	}
	snprintf(msg, msglen, "%s is not an option of this command", name);
	return -1;
}

static const struct fg_opt events_opts[] = {
	{ "follow", 'f', false, OPT_FOLLOW },
	FG_GLOBAL_OPTS
};

/* The path of one page: the prefix and `after` escaped for a query. */
static char *page_path(const char *prefix, const char *after, uint64_t wait_ms)
{
	size_t pl = 3 * strlen(prefix) + 1, al = after ? 3 * strlen(after) + 1 : 1;
	char *ep = malloc(pl), *ea = malloc(al), *p = NULL;
	if (!ep || !ea || fg_lockurl_escape(prefix, ep, pl) < 0 ||
	    (after && fg_lockurl_escape(after, ea, al) < 0))
		goto out;
	size_t cap = pl + al + 96;
	p = malloc(cap);
	if (!p)
		goto out;
	int n = snprintf(p, cap, "/_fence/v1/events?prefix=%s&limit=%d", ep,
			 EV_PAGE);
	if (after)
		n += snprintf(p + n, cap - (size_t)n, "&after=%s", ea);
	if (wait_ms)
		snprintf(p + n, cap - (size_t)n, "&wait_ms=%" PRIu64, wait_ms);
out:
	free(ep);
	free(ea);
	return p;
}

/* One page: FG_OK with *page (caller owns) holding an "events" array, or
 * the outcome and why. */
static enum fg_outcome get_page(const struct fg_cli *cli, const char *prefix,
				const char *after, uint64_t wait_ms,
				json_t **page, char *why, size_t whylen)
{
	const struct fg_conn *cl = &cli->client;
	struct fg_req r;
	*page = NULL;
	char *path = page_path(prefix, after, wait_ms);
	if (!path || fg_req_init(&r, cl, "GET", path, NULL, NULL,
				 cl->timeout_ms + wait_ms) < 0) {
		if (path)
			fg_req_finish(&r);
		snprintf(why, whylen, "out of memory");
		return FG_NOMEM;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	json_t *next = r.json ? json_object_get(r.json, "next") : NULL;
	if (o == FG_OK && (!r.json || !json_is_array(json_object_get(r.json, "events")) ||
			   !next || !(json_is_string(next) || json_is_null(next))))
		o = FG_UNEXPECTED;
	if (o == FG_OK)
		*page = json_incref(r.json);
	else
		fg_req_describe(&r, why, whylen);
	fg_req_finish(&r);
	return o;
}

static void print_page(const struct fg_cli *cli, json_t *page)
{
	size_t i;
	json_t *ev;
	json_array_foreach(json_object_get(page, "events"), i, ev) {
		if (cli->json)
			fg_cli_print_json(ev);
		else
			fg_evline_print(stdout, ev);
	}
	fflush(stdout);
}

int fg_cmd_events(struct fg_cli *cli, int argc, char **argv)
{
	struct events_cmd c = { .cli = cli };
	struct fg_args a;
	char msg[512];
	if (fg_opts_parse(events_opts, argc, argv, 1, false, on_option, &c, &a,
			  msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(fg_help_events);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (a.npos > 1)
		return fg_cli_usage_error(cli, "events takes one prefix at most");
	const char *prefix = a.npos ? a.pos[0] : "";

	char *after = NULL;     /* the last page's next; NULL: from the oldest */
	bool caught_up = false; /* a page read nothing new: the rest is waited for */
	bool failing = false;
	uint64_t backoff = 0;
	int rc = FG_EXIT_OK;
	for (unsigned long pages = 0;; pages++) {
		if (!c.follow && pages >= EV_PAGES_MAX) {
			fg_say("cannot read events: the gateway's next never ends");
			rc = fg_outcome_exit(FG_UNEXPECTED);
			break;
		}
		json_t *page;
		uint64_t wait = c.follow && caught_up ? EV_FOLLOW_WAIT_MS : 0;
		enum fg_outcome o = get_page(cli, prefix, after, wait, &page, msg,
					     sizeof(msg));
		if (c.follow && (o == FG_UNAVAILABLE || o == FG_UNEXPECTED)) {
			if (!failing)
				fg_say("following events under '%s': %s; still trying",
				       prefix, msg);
			failing = true;
			backoff = backoff < 250 ? 250 :
				  backoff * 2 > EV_BACKOFF_MAX_MS ?
				  EV_BACKOFF_MAX_MS : backoff * 2;
			fg_sig_sleep(-1, backoff);
			continue;
		}
		if (o != FG_OK) {
			fg_say("cannot read events under '%s': %s", prefix, msg);
			rc = fg_outcome_exit(o);
			break;
		}
		if (failing)
			fg_say("following events under '%s' again", prefix);
		failing = false;
		backoff = 0;
		if (json_is_true(json_object_get(page, "gap")))
			fg_say("events were lost before these: the gateway no "
			       "longer keeps the ones after %s",
			       after ? after : "the start");
		print_page(cli, page);
		json_t *next = json_object_get(page, "next");
		const char *nx = json_is_string(next) ? json_string_value(next) : NULL;
		bool moved = nx && (!after || strcmp(nx, after) != 0);
		if (moved) {
			free(after);
			after = strdup(nx);
			if (!after) {
				json_decref(page);
				fg_say("cannot read events: out of memory");
				rc = fg_outcome_exit(FG_NOMEM);
				break;
			}
		}
		/* a page that read nothing new is the end of what there is
		 * (one whose entries were all filtered out still moved) */
		caught_up = !moved;
		json_decref(page);
		if (caught_up && !c.follow)
			break;
	}
	free(after);
	return rc;
}
