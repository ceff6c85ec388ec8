/*
 * cmd_ls.c - `ls [PREFIX]`: who holds what (contract v1.3's listing).
 *
 * Pages through GET /_fence/v1/locks?prefix= until the cursor is null and
 * prints one row per lock (NAME MODE TOKEN TTL DELAY HOLDERS WAITERS),
 * each followed by one indented line per holder, then per waiter in queue
 * order; with --json, one object {"locks":[...]} with every page's locks.
 * Invariant: a lock is printed at most once, in the gateway's name order;
 * nothing is printed for a listing that failed part way but the error.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"

#define LS_PAGE 100 /* the gateway shows up to 100 holders and waiters a lock */
#define LS_PAGES_MAX 100000 /* a cursor that never ends is a broken gateway */

static const struct fg_opt ls_opts[] = {
	FG_GLOBAL_OPTS
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	return fg_cli_global(ctx, id, name, value, msg, msglen);
}

/* The path of one page: the prefix and cursor escaped for a query. */
static char *page_path(const char *prefix, const char *cursor)
{
	size_t cap = 3 * strlen(prefix) + (cursor ? 3 * strlen(cursor) : 0) + 96;
	char *p = malloc(cap), *ep = malloc(3 * strlen(prefix) + 1),
	     *ec = cursor ? malloc(3 * strlen(cursor) + 1) : NULL;
	if (!p || !ep || (cursor && !ec) ||
	    fg_lockurl_escape(prefix, ep, 3 * strlen(prefix) + 1) < 0 ||
	    (cursor && fg_lockurl_escape(cursor, ec, 3 * strlen(cursor) + 1) < 0)) {
		free(p);
		p = NULL;
	} else {
		snprintf(p, cap, "/_fence/v1/locks?prefix=%s&limit=%d%s%s", ep,
			 LS_PAGE, cursor ? "&cursor=" : "", cursor ? ec : "");
	}
	free(ep);
	free(ec);
	return p;
}

static const char *str_or(json_t *o, const char *k, const char *dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

/* Prints s with every byte that is not printable ASCII, and the space, as
 * \xHH: an owner is anybody's free text, and must not move the cursor,
 * clear the screen or fake a row on the operator's terminal. */
static void put_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p > ' ' && *p < 0x7f && *p != '\\')
			putchar(*p);
		else
			printf("\\x%02x", *p);
	}
}

static json_int_t int_or(json_t *o, const char *k, json_int_t dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static void print_party(const char *what, json_t *p, const char *ms_key)
{
	printf("  %-6s owner=", what);
	put_safe(str_or(p, "owner", "-"));
	printf(" principal=");
	put_safe(str_or(p, "principal", "-"));
	printf(" client=");
	put_safe(str_or(p, "client", "-"));
	printf(" %s=%" JSON_INTEGER_FORMAT "\n", ms_key, int_or(p, ms_key, 0));
}

static void print_lock(json_t *l)
{
	json_t *hs = json_object_get(l, "holders"), *ws = json_object_get(l, "waiters");
	char tok[32] = "-";
	if (json_is_integer(json_object_get(l, "token")))
		snprintf(tok, sizeof(tok), "%" JSON_INTEGER_FORMAT,
			 int_or(l, "token", 0));
	printf("%-32s %-9s %-18s %8" JSON_INTEGER_FORMAT " %8" JSON_INTEGER_FORMAT
	       " %7zu %7zu\n", str_or(l, "name", "?"), str_or(l, "mode", "-"), tok,
	       int_or(l, "ttl_ms", 0), int_or(l, "delay_ms", 0),
	       json_array_size(hs), json_array_size(ws));
	size_t i;
	json_t *p;
	json_array_foreach(hs, i, p)
		print_party("holder", p, "held_ms");
	json_array_foreach(ws, i, p)
		print_party("waiter", p, "waited_ms");
}

int fg_cmd_ls(struct fg_cli *cli, int argc, char **argv)
{
	struct fg_args a;
	char msg[512];
	if (fg_opts_parse(ls_opts, argc, argv, 1, false, on_option, cli, &a, msg,
			  sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(fg_help_ls);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (a.npos > 1)
		return fg_cli_usage_error(cli, "ls takes one prefix at most");
	const char *prefix = a.npos ? a.pos[0] : "";

	json_t *all = json_array();
	char *cursor = NULL;
	int rc = FG_EXIT_OK;
	if (!all)
		return fg_outcome_exit(FG_NOMEM);
	for (int page = 0;; page++) {
		struct fg_req r;
		char *path = page_path(prefix, cursor);
		enum fg_outcome o = FG_NOMEM;
		if (page >= LS_PAGES_MAX) {
			fg_say("cannot list locks: the gateway's cursor never ends");
			rc = fg_outcome_exit(FG_UNEXPECTED);
			break;
		}
		if (path && fg_req_init(&r, &cli->client, "GET", path, NULL, NULL,
					0) == 0) {
			fg_req_perform(&r);
			o = fg_req_outcome(&r);
			if (o == FG_OK && (!r.json || !json_is_array(
				json_object_get(r.json, "locks"))))
				o = FG_UNEXPECTED;
		} else {
			memset(&r, 0, sizeof(r));
		}
		if (o != FG_OK) {
			if (o == FG_NOMEM)
				snprintf(msg, sizeof(msg), "out of memory");
			else
				fg_req_describe(&r, msg, sizeof(msg));
			fg_say("cannot list locks under '%s': %s", prefix, msg);
			fg_req_finish(&r);
			rc = fg_outcome_exit(o);
			break;
		}
		json_array_extend(all, json_object_get(r.json, "locks"));
		json_t *c = json_object_get(r.json, "cursor");
		bool more = json_is_string(c);
		free(cursor);
		cursor = more ? strdup(json_string_value(c)) : NULL;
		fg_req_finish(&r); /* c goes with it */
		if (more && !cursor) {
			fg_say("cannot list locks under '%s': out of memory", prefix);
			rc = fg_outcome_exit(FG_NOMEM);
			break;
		}
		if (!cursor)
			break;
	}
	free(cursor);
	if (rc == FG_EXIT_OK) {
		if (cli->json) {
			json_t *o = json_pack("{s:O}", "locks", all);
			fg_cli_print_json(o);
			json_decref(o);
		} else {
			printf("%-32s %-9s %-18s %8s %8s %7s %7s\n", "NAME", "MODE",
			       "TOKEN", "TTL_MS", "DELAY_MS", "HOLDERS", "WAITERS");
			size_t i;
			json_t *l;
			json_array_foreach(all, i, l)
				print_lock(l);
			fflush(stdout);
		}
	}
	json_decref(all);
	return rc;
}
