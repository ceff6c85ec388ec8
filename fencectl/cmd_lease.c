/*
 * cmd_lease.c - `acquire`, `renew` and `release`: one lock call each, for
 * scripts that keep the lease themselves.
 *
 * `acquire` prints the lease (the user asked for it) as shell assignments,
 * so that `eval "$(fencectl acquire NAME)"` sets FENCE_LEASE and friends;
 * `renew`, `release` and `check` then find the lease and the sequencer in
 * the environment.
 * Invariant: apart from acquire's output, a lease is never printed, not
 * even in an error message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cli.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "take.h"

enum {
	OPT_LEASE = FG_TAKE_OPT_END,
};

struct lease_cmd {
	struct fg_cli *cli;
	struct fg_take take;	/* acquire; renew and release use args */
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	struct lease_cmd *c = ctx;

	int g = fg_cli_global(c->cli, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	g = fg_take_option(&c->take, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	if (id == OPT_LEASE) {
		if (fg_cli_lease_ok(value, msg, msglen) < 0)
			return -1;
		c->take.args.lease = value;
		return 0;
	}
	snprintf(msg, msglen, "%s is not an option of this command", name);
	return -1;
}

/*
 * Reads the arguments: one lock name, the options in table. 0 to go on;
 * otherwise *rc is the exit status (usage error, or --help shown).
 */
static int read_args(struct lease_cmd *c, const struct fg_opt *table,
		     const char *help, int argc, char **argv, int *rc)
{
	struct fg_args a;
	char msg[512];

	c->take.args.lock_delay_ms = -1;
	if (fg_opts_parse(table, argc, argv, 1, false, on_option, c, &a, msg,
			  sizeof(msg)) < 0) {
		*rc = fg_cli_usage_error(c->cli, msg);
		return -1;
	}
	if (c->cli->help) {
		*rc = fg_cli_print_help(help);
		return -1;
	}
	if (fg_cli_check(c->cli, msg, sizeof(msg)) < 0) {
		*rc = fg_cli_usage_error(c->cli, msg);
		return -1;
	}
	if (a.npos < 1 || !a.pos[0][0]) {
		*rc = fg_cli_usage_error(c->cli, "a lock name is needed");
		return -1;
	}
	c->take.name = a.pos[0];
	return 0;
}

/* --lease, else FENCE_LEASE; NULL (after a usage message) when neither. */
static const char *lease_of(struct lease_cmd *c, int *rc)
{
	char msg[256];
	const char *l = c->take.args.lease;

	if (!l) {
		l = getenv("FENCE_LEASE");
		if (l && fg_cli_lease_ok(l, msg, sizeof(msg)) < 0) {
			*rc = fg_cli_usage_error(c->cli, "FENCE_LEASE: the "
						 "lease contains a blank or a "
						 "byte that is not printable "
						 "ASCII");
			return NULL;
		}
	}
	if (!l || !*l) {
		*rc = fg_cli_usage_error(c->cli, "no lease: give --lease, or "
					 "set FENCE_LEASE");
		return NULL;
	}
	return l;
}

/* KEY='value'; export KEY -- as ssh-agent does, for eval; the value is
 * safe inside the single quotes whatever it holds */
static void print_assignment(const char *key, const char *value)
{
	fputs(key, stdout);
	fputs("='", stdout);
	for (const char *p = value; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*p);
	}
	printf("'; export %s\n", key);
}

static const struct fg_opt acquire_opts[] = {
	FG_TAKE_OPTS,
	{ "lease", 0, true, OPT_LEASE },
	FG_GLOBAL_OPTS
};

int fg_cmd_acquire(struct fg_cli *cli, int argc, char **argv)
{
	struct lease_cmd c = { .cli = cli };
	struct fg_grant g;
	int rc, sig;

	if (read_args(&c, acquire_opts, fg_help_acquire, argc, argv, &rc) < 0)
		return rc;
	fg_take_default_owner(&c.take);
	/* no signalfd: a Ctrl-C ends fencectl at once, and the gateway takes
	 * the closed call's waiter out of the queue */
	rc = fg_take(&cli->client, &c.take, -1, &g, &sig);
	if (rc != FG_EXIT_OK)
		return fg_take_status(&c.take, rc);
	if (cli->json) {
		fg_cli_print_json(g.answer);
	} else {
		char token[32];
		snprintf(token, sizeof(token), "%" PRIu64, g.token);
		print_assignment("FENCE_LOCK", g.name);
		print_assignment("FENCE_LEASE", g.lease);
		print_assignment("FENCE_TOKEN", token);
		print_assignment("FENCE_SEQUENCER", g.sequencer);
		fflush(stdout);
	}
	fg_grant_finish(&g);
	return FG_EXIT_OK;
}

/* One call with the lease; prints the answer with --json. */
static int lease_call(struct lease_cmd *c, const char *method, json_t *body,
		      const char *header_lease, const char *verb)
{
	const struct fg_conn *cl = &c->cli->client;
	struct fg_req r;
	char why[512];
	int rc;

	if (fg_req_init(&r, cl, method, fg_lockurl_lock("", c->take.name,
							NULL),
			body, header_lease, 0) < 0) {
		fg_req_finish(&r);
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	rc = fg_outcome_exit(o);
	if (o == FG_OK) {
		if (c->cli->json && r.json) {
			fg_cli_print_json(r.json);
		} else if (c->cli->json) {
			/* release answers 204, with no body */
			json_t *j = json_pack("{s:s, s:b}", "name",
					      c->take.name, "released", 1);
			if (j)
				fg_cli_print_json(j);
			json_decref(j);
		}
	} else if (o == FG_LEASE_GONE) {
		fg_say("cannot %s lock '%s': the lease does not hold it (%s)",
		       verb, c->take.name, fg_req_describe(&r, why,
							    sizeof(why)));
	} else {
		fg_say("cannot %s lock '%s': %s", verb, c->take.name,
		       fg_req_describe(&r, why, sizeof(why)));
	}
	fg_req_finish(&r);
	return rc;
}

static const struct fg_opt renew_opts[] = {
	{ "ttl", 0, true, FG_TAKE_OPT_TTL },
	{ "value", 0, true, FG_TAKE_OPT_VALUE },
	{ "lease", 0, true, OPT_LEASE },
	FG_GLOBAL_OPTS
};

int fg_cmd_renew(struct fg_cli *cli, int argc, char **argv)
{
	struct lease_cmd c = { .cli = cli };
	const char *lease;
	int rc;

	if (read_args(&c, renew_opts, fg_help_renew, argc, argv, &rc) < 0)
		return rc;
	if (!(lease = lease_of(&c, &rc)))
		return rc;
	json_t *body = fg_api_renew_body(lease, c.take.args.ttl_ms,
					 c.take.args.value);
	if (!body) {
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	rc = lease_call(&c, "PATCH", body, NULL, "renew");
	json_decref(body);
	return rc;
}

static const struct fg_opt release_opts[] = {
	{ "lease", 0, true, OPT_LEASE },
	FG_GLOBAL_OPTS
};

int fg_cmd_release(struct fg_cli *cli, int argc, char **argv)
{
	struct lease_cmd c = { .cli = cli };
	const char *lease;
	int rc;

	if (read_args(&c, release_opts, fg_help_release, argc, argv, &rc) < 0)
		return rc;
	if (!(lease = lease_of(&c, &rc)))
		return rc;
	return lease_call(&c, "DELETE", NULL, lease, "release");
}
