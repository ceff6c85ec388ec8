/*
 * cmd_inspect.c - `inspect` (and `inspect --watch`) and `check`: the calls
 * that read, and need no lease.
 *
 * --watch follows a lock with the observe long-poll: while the lock is
 * held under token T it asks `?wait_ms=300000&after=T`, which answers as
 * soon as T no longer holds it, so nothing is missed; while it is free it
 * can only ask `?wait_ms=W` without `after`, which waits for a change
 * from the state at the moment the call arrives. A grant made in the one
 * round trip between two calls is therefore seen at the latest when that
 * call's W runs out; W is kept at 10 s for this reason.
 * Invariant: --watch prints one line (or one JSON object) per change of
 * `held` or `token`, in order, and nothing when neither changed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "sigs.h"

#define WATCH_HELD_WAIT_MS 300000
#define WATCH_FREE_WAIT_MS 10000
#define WATCH_BACKOFF_MAX_MS 5000

enum {
	OPT_WATCH = FG_OPT_FIRST_OWN,
};

struct read_cmd {
	struct fg_cli *cli;
	bool watch;
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	struct read_cmd *c = ctx;

	int g = fg_cli_global(c->cli, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	if (id == OPT_WATCH) {
		c->watch = true;
		return 0;
	}
	snprintf(msg, msglen, "%s is not an option of this command", name);
	return -1;
}

/* A value as JSON (quoted, escaped): what a terminal shows of it is
 * exactly what it is. */
static void print_json_value(FILE *f, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	fputs(s ? s : "?", f);
	free(s);
}

static const char *const inspect_fields[] = {
	"name", "held", "mode", "token", "holders", "waiters", "ttl_ms",
	"delay_ms", "owner", "value",
};

static void print_state(json_t *st)
{
	for (size_t i = 0; i < sizeof(inspect_fields) / sizeof(char *); i++) {
		json_t *v = json_object_get(st, inspect_fields[i]);
		if (!v)
			continue;
		printf("%s: ", inspect_fields[i]);
		if (json_is_string(v) && (i == 0 || i == 2))
			fputs(json_string_value(v), stdout);
		else
			print_json_value(stdout, v);
		putchar('\n');
	}
	fflush(stdout);
}

/* One line per change: UTC time, then the state. */
static void print_line(json_t *st)
{
	struct timespec ts;
	struct tm tm;
	json_t *v;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	printf("%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ", tm.tm_year + 1900,
	       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	       ts.tv_nsec / 1000000);
	bool held = json_is_true(json_object_get(st, "held"));
	fputs(held ? "held" : "free", stdout);
	if (held && json_is_string(v = json_object_get(st, "mode")))
		printf(" %s", json_string_value(v));
	static const char *const rest[] = {
		"token", "holders", "waiters", "ttl_ms", "delay_ms", "owner",
		"value",
	};
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++) {
		if ((v = json_object_get(st, rest[i])) != NULL) {
			printf(" %s=", rest[i]);
			print_json_value(stdout, v);
		}
	}
	putchar('\n');
	fflush(stdout);
}

/* GET the lock (with query); 0 and *st (caller owns), or the outcome. */
static enum fg_outcome get_state(const struct fg_cli *cli, const char *name,
				 const char *query, uint64_t wait_ms,
				 json_t **st, char *why, size_t whylen)
{
	const struct fg_conn *cl = &cli->client;
	struct fg_req r;

	*st = NULL;
	if (fg_req_init(&r, cl, "GET", fg_lockurl_lock("", name, query),
			NULL, NULL, cl->timeout_ms + wait_ms) < 0) {
		fg_req_finish(&r);
		snprintf(why, whylen, "out of memory");
		return FG_NOMEM;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	if (o == FG_OK && (!r.json ||
			   !json_is_boolean(json_object_get(r.json, "held"))))
		o = FG_UNEXPECTED;
	if (o == FG_OK)
		*st = json_incref(r.json);
	else
		fg_req_describe(&r, why, whylen);
	fg_req_finish(&r);
	return o;
}

static bool same(json_t *a, json_t *b)
{
	return json_equal(json_object_get(a, "held"), json_object_get(b, "held")) &&
	       json_equal(json_object_get(a, "token"), json_object_get(b, "token"));
}

static int watch(struct fg_cli *cli, const char *name)
{
	json_t *last = NULL;
	uint64_t backoff = 0;
	bool failing = false;
	char why[512], query[96];

	for (;;) {
		uint64_t wait = 0;
		query[0] = '\0';
		if (last) {
			json_t *tok = json_object_get(last, "token");
			if (json_is_true(json_object_get(last, "held")) &&
			    json_is_integer(tok)) {
				wait = WATCH_HELD_WAIT_MS;
				snprintf(query, sizeof(query),
					 "wait_ms=%" PRIu64 "&after=%" PRId64,
					 wait, (int64_t)json_integer_value(tok));
			} else {
				wait = WATCH_FREE_WAIT_MS;
				snprintf(query, sizeof(query),
					 "wait_ms=%" PRIu64, wait);
			}
		}
		json_t *st;
		enum fg_outcome o = get_state(cli, name, query[0] ? query : NULL,
					      wait, &st, why, sizeof(why));
		if (o == FG_UNAVAILABLE || o == FG_UNEXPECTED) {
			if (!failing)
				fg_say("watching lock '%s': %s; still trying",
				       name, why);
			failing = true;
			backoff = backoff < 250 ? 250 :
				  backoff * 2 > WATCH_BACKOFF_MAX_MS ?
				  WATCH_BACKOFF_MAX_MS : backoff * 2;
			fg_sig_sleep(-1, backoff);
			continue;
		}
		if (o != FG_OK) {
			fg_say("cannot watch lock '%s': %s", name, why);
			json_decref(last);
			return fg_outcome_exit(o);
		}
		if (failing)
			fg_say("watching lock '%s' again", name);
		failing = false;
		backoff = 0;
		if (!last || !same(last, st)) {
			if (cli->json)
				fg_cli_print_json(st);
			else
				print_line(st);
		}
		json_decref(last);
		last = st;
	}
}

static const struct fg_opt inspect_opts[] = {
	{ "watch", 'w', false, OPT_WATCH },
	FG_GLOBAL_OPTS
};

int fg_cmd_inspect(struct fg_cli *cli, int argc, char **argv)
{
	struct read_cmd c = { .cli = cli };
	struct fg_args a;
	char msg[512];
	json_t *st;

	if (fg_opts_parse(inspect_opts, argc, argv, 1, false, on_option, &c,
			  &a, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(fg_help_inspect);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (a.npos < 1 || !a.pos[0][0])
		return fg_cli_usage_error(cli, "a lock name is needed");
	if (c.watch)
		return watch(cli, a.pos[0]);
	enum fg_outcome o = get_state(cli, a.pos[0], NULL, 0, &st, msg,
				      sizeof(msg));
	if (o != FG_OK) {
		fg_say("cannot inspect lock '%s': %s", a.pos[0], msg);
		return fg_outcome_exit(o);
	}
	if (cli->json)
		fg_cli_print_json(st);
	else
		print_state(st);
	json_decref(st);
	return FG_EXIT_OK;
}

static const struct {
	const char *reason, *meaning;
} reasons[] = {
	{ "stale", "a newer token has been issued for the lock" },
	{ "expired", "its grant no longer holds the lock" },
	{ "forged", "it was not issued by this service" },
	{ "malformed", "it is not a sequencer" },
};

static const struct fg_opt check_opts[] = {
	FG_GLOBAL_OPTS
};

int fg_cmd_check(struct fg_cli *cli, int argc, char **argv)
{
	struct read_cmd c = { .cli = cli };
	const struct fg_conn *cl = &cli->client;
	struct fg_args a;
	struct fg_req r;
	char msg[512];
	int rc;

	if (fg_opts_parse(check_opts, argc, argv, 1, false, on_option, &c, &a,
			  msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(fg_help_check);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	const char *seq = a.npos ? a.pos[0] : getenv("FENCE_SEQUENCER");
	if (!seq || !*seq)
		return fg_cli_usage_error(cli, "no sequencer: give one, or set "
					  "FENCE_SEQUENCER");
	if (fg_cli_text("the sequencer", seq, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);

	json_t *body = json_pack("{s:s}", "sequencer", seq);
	if (!body || fg_req_init(&r, cl, "POST",
				 fg_lockurl_join("", "/_fence/v1/check"),
				 body, NULL, 0) < 0) {
		json_decref(body);
		fg_req_finish(&r);
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	json_decref(body);
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	json_t *valid = r.json ? json_object_get(r.json, "valid") : NULL;
	if (o == FG_OK && !json_is_boolean(valid))
		o = FG_UNEXPECTED;
	if (o != FG_OK) {
		fg_say("cannot check the sequencer: %s",
		       fg_req_describe(&r, msg, sizeof(msg)));
		rc = fg_outcome_exit(o);
		goto out;
	}
	rc = json_is_true(valid) ? FG_EXIT_OK : FG_EXIT_INVALID;
	if (cli->json) {
		fg_cli_print_json(r.json);
	} else if (rc == FG_EXIT_OK) {
		const char *name = fg_req_str(&r, "name");
		const char *mode = fg_req_str(&r, "mode");
		uint64_t token = 0;
		fg_req_uint(&r, "token", &token);
		printf("valid: lock '%s', token %" PRIu64 ", %s\n",
		       name ? name : "?", token, mode ? mode : "?");
	} else {
		const char *reason = fg_req_str(&r, "reason");
		const char *meaning = NULL;
		for (size_t i = 0; reason && i < sizeof(reasons) /
						  sizeof(reasons[0]); i++)
			if (strcmp(reason, reasons[i].reason) == 0)
				meaning = reasons[i].meaning;
		printf("not valid: %s%s%s%s\n", reason ? reason : "?",
		       meaning ? " (" : "", meaning ? meaning : "",
		       meaning ? ")" : "");
	}
	fflush(stdout);
out:
	fg_req_finish(&r);
	return rc;
}
