/*
 * cmd_break.c - `break`: an operator ends the current grant of a lock, as
 * if its lease had run out (its writes are aborted, its lock-delay
 * applies).
 *
 * The gateway breaks a grant only when told its token (`Fence-Break`), so
 * that a break aimed at one grant never ends a newer one. Without
 * --token, fencectl first asks which token holds the lock now (inspect)
 * and then breaks that one; a grant that ends or changes between the two
 * calls is reported, never chased with a second break.
 * Invariant: at most one break call is made, and it names one token.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"

#define TOKEN_MAX ((uint64_t)9007199254740991)	/* 2^53 - 1 */

enum {
	OPT_TOKEN = FG_OPT_FIRST_OWN,
};

struct break_cmd {
	struct fg_cli *cli;
	uint64_t token;		/* 0: learn it first */
};

/* A token as the gateway issues them: decimal, 1 to 2^53 - 1. */
static int read_token(const char *name, const char *s, uint64_t *out,
		      char *msg, size_t msglen)
{
	uint64_t v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9' && v <= TOKEN_MAX; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (p == s || *p || v == 0 || v > TOKEN_MAX) {
		snprintf(msg, msglen, "%s: '%s' is not a token (a whole number "
			 "from 1 to %" PRIu64 ")", name, s, TOKEN_MAX);
		return -1;
	}
	*out = v;
	return 0;
}

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	struct break_cmd *c = ctx;

	int g = fg_cli_global(c->cli, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	if (id == OPT_TOKEN)
		return read_token(name, value, &c->token, msg, msglen);
	snprintf(msg, msglen, "%s is not an option of this command", name);
	return -1;
}

/*
 * The token of the grant that holds lock name now: FG_EXIT_OK and *token,
 * FG_EXIT_NOTHING when the lock is free, or another exit status after a
 * message.
 */
static int current_token(const struct fg_conn *cl, const char *name,
			 uint64_t *token)
{
	struct fg_req r;
	char why[512];
	int rc;

	if (fg_req_init(&r, cl, "GET", fg_lockurl_lock("", name, NULL),
			NULL, NULL, 0) < 0) {
		fg_req_finish(&r);
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	json_t *held = r.json ? json_object_get(r.json, "held") : NULL;
	if (o == FG_OK && !json_is_boolean(held))
		o = FG_UNEXPECTED;
	if (o != FG_OK) {
		fg_say("cannot break lock '%s': asking which token holds it: %s",
		       name, fg_req_describe(&r, why, sizeof(why)));
		rc = fg_outcome_exit(o);
	} else if (json_is_false(held)) {
		fg_say("lock '%s' is free: nothing to break", name);
		rc = FG_EXIT_NOTHING;
	} else if (fg_req_uint(&r, "token", token) < 0 || *token == 0) {
		fg_say("cannot break lock '%s': the gateway says it is held "
		       "but not under which token", name);
		rc = FG_EXIT_PROTOCOL;
	} else {
		rc = FG_EXIT_OK;
	}
	fg_req_finish(&r);
	return rc;
}

static int break_token(struct fg_cli *cli, const char *name, uint64_t token,
		       bool learnt)
{
	const struct fg_conn *cl = &cli->client;
	struct fg_req r;
	char why[512], header[64];
	int rc;

	snprintf(header, sizeof(header), "Fence-Break: %" PRIu64, token);
	if (fg_req_init(&r, cl, "DELETE", fg_lockurl_lock("", name, NULL),
			NULL, NULL, 0) < 0 || fg_req_add_header(&r, header) < 0) {
		fg_req_finish(&r);
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	const char *code = fg_req_str(&r, "error");
	bool stale = r.status == 409 && code && strcmp(code, "stale_token") == 0;

	if (o == FG_OK) {
		if (cli->json) {
			json_t *j = json_pack("{s:s, s:I, s:b}", "name", name,
					      "token", (json_int_t)token,
					      "broken", 1);
			if (j)
				fg_cli_print_json(j);
			json_decref(j);
		} else {
			printf("broke lock '%s', token %" PRIu64 "\n", name,
			       token);
			fflush(stdout);
		}
		rc = FG_EXIT_OK;
	} else if (stale && learnt) {
		fg_say("lock '%s' changed meanwhile: token %" PRIu64 " no "
		       "longer holds it (released, run out or broken since); "
		       "nothing was broken", name, token);
		rc = FG_EXIT_STALE;
	} else if (stale) {
		fg_say("token %" PRIu64 " is not the current grant of lock "
		       "'%s' (the lock is free, or another token holds it); "
		       "nothing was broken", token, name);
		rc = FG_EXIT_STALE;
	} else {
		fg_say("cannot break lock '%s': %s", name,
		       fg_req_describe(&r, why, sizeof(why)));
		rc = fg_outcome_exit(o);
	}
	fg_req_finish(&r);
	return rc;
}

static const struct fg_opt break_opts[] = {
	{ "token", 0, true, OPT_TOKEN },
	FG_GLOBAL_OPTS
};

int fg_cmd_break(struct fg_cli *cli, int argc, char **argv)
{
	struct break_cmd c = { .cli = cli };
	struct fg_args a;
	char msg[512];

	if (fg_opts_parse(break_opts, argc, argv, 1, false, on_option, &c, &a,
			  msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(fg_help_break);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (a.npos < 1 || !a.pos[0][0])
		return fg_cli_usage_error(cli, "a lock name is needed");

	const char *name = a.pos[0];
	uint64_t token = c.token;
	if (!token) {
		int rc = current_token(&cli->client, name, &token);
		if (rc != FG_EXIT_OK)
			return rc;
	}
	return break_token(cli, name, token, c.token == 0);
}
