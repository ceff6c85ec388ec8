/*
 * cmd_run.c - `lock` and `elect`: take a lock, run a command while it is
 * held, give it back.
 *
 * Order: signals are caught first (sigs.h), so that from the first call on
 * a Ctrl-C or a SIGTERM ends the wait cleanly; then the lock is taken
 * (take.c), the command runs under the lease (supervise.c), and the lease
 * is released whatever the command did. The exit status is the
 * command's, or fencectl's own when it could not get that far or the
 * lease was lost (exits.h).
 * Invariant: the lease leaves this file only in the renew and release
 * calls; the command's environment gets the lock, token and sequencer,
 * never the lease.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "cli.h"
#include "duration.h"
#include "exits.h"
#include "msg.h"
#include "sigs.h"
#include "supervise.h"
#include "take.h"

#define DEFAULT_KILL_AFTER_MS 10000

enum {
	OPT_KILL_AFTER = FG_TAKE_OPT_END,
	OPT_PROCESS_GROUP,
	OPT_COMMAND,
	OPT_S3,
};

struct run {
	struct fg_cli *cli;
	struct fg_take take;
	uint64_t kill_after_ms;
	bool own_group;
	bool s3;		/* --s3: the sequencer is AWS_SESSION_TOKEN too */
	const char *shell_cmd;	/* -c: run through the shell */
	char *shell_argv[4];	/* $SHELL -c CMD, as flock(1) runs it */
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	struct run *r = ctx;

	int g = fg_cli_global(r->cli, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	g = fg_take_option(&r->take, id, name, value, msg, msglen);
	if (g <= 0)
		return g;
	switch (id) {
	case OPT_KILL_AFTER:
		return fg_cli_duration(name, value, 0, 86400000,
				       &r->kill_after_ms, msg, msglen);
	case OPT_PROCESS_GROUP:
		r->own_group = true;
		return 0;
	case OPT_S3:
		r->s3 = true;
		return 0;
	case OPT_COMMAND:
		if (r->shell_cmd) {
			snprintf(msg, msglen, "%s is given twice", name);
			return -1;
		}
		r->shell_cmd = value;
		return 0;
	}
	snprintf(msg, msglen, "%s is not an option of this command", name);
	return -1;
}

static void set_env(const char *key, const char *value)
{
	if (setenv(key, value, 1) < 0)
		fg_say("cannot set %s for the command: %s", key,
		       strerror(errno));
}

/* --s3: an S3 client sends its session token, signed, on every request;
 * the gateway's S3 mode reads the sequencers of a write there. A session
 * token that holds sequencers already (`fencectl lock a --s3 -- fencectl
 * lock b --s3 -- CMD`) gets this one added after a comma, so that one
 * request may change what both locks guard; any other is replaced. The
 * value lives in buf (cap bytes); NULL when it does not fit. */
static const char *s3_session_token(const char *sequencer, char *buf, size_t cap)
{
	const char *old = getenv("AWS_SESSION_TOKEN");
	int n = old && strncmp(old, "fg1.", 4) == 0
		? snprintf(buf, cap, "%s,%s", old, sequencer)
		: snprintf(buf, cap, "%s", sequencer);
	return n >= 0 && (size_t)n < cap ? buf : NULL;
}

/* Without a command: what a script or a person needs of the grant (never
 * the lease), at once, so that a reader of the pipe need not wait. */
static void print_held(const struct fg_cli *cli, const struct fg_grant *g)
{
	if (cli->json) {
		json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:I}", "name",
				      g->name, "token", (json_int_t)g->token,
				      "mode", g->mode, "sequencer",
				      g->sequencer, "ttl_ms",
				      (json_int_t)g->ttl_ms);
		if (j)
			fg_cli_print_json(j);
		json_decref(j);
		return;
	}
	printf("FENCE_LOCK=%s\nFENCE_TOKEN=%" PRIu64 "\nFENCE_SEQUENCER=%s\n",
	       g->name, g->token, g->sequencer);
	fflush(stdout);
}

static void print_s3(const char *sequencer)
{
	char buf[8192];
	const char *t = s3_session_token(sequencer, buf, sizeof(buf));
	if (t) {
		printf("AWS_SESSION_TOKEN=%s\n", t);
		fflush(stdout);
	}
}

/* Takes the lock, runs the command under it (or holds it: cmd NULL),
 * gives it back. */
static int run_locked(struct run *r, char **cmd)
{
	const struct fg_conn *cl = &r->cli->client;
	const char *name = r->take.name;
	struct fg_grant g;
	sigset_t saved;
	char why[512], token[32];
	int sig, rc;

	int sigfd = fg_sig_open(&saved);
	if (sigfd < 0) {
		fg_say("cannot catch signals: %s", strerror(errno));
		return FG_EXIT_OSERR;
	}
	rc = fg_take(cl, &r->take, sigfd, &g, &sig);
	if (rc != FG_EXIT_OK) {
		rc = fg_take_status(&r->take, rc);
		goto out_signals;
	}

	/* a signal that came with the grant: give it back, run nothing */
	struct signalfd_siginfo si;
	while ((sig = fg_sig_next(sigfd, &si)) != 0 && !fg_sig_ends(sig))
		;
	if (sig) {
		fg_take_give_back(&g, why, sizeof(why));
		rc = 128 + sig;
		goto out_grant;
	}

	fg_note("lock '%s' granted: token %" PRIu64 ", %s, lease %" PRIu64
		"ms", name, g.token, g.mode, g.ttl_ms);
	if (cmd) {
		snprintf(token, sizeof(token), "%" PRIu64, g.token);
		set_env("FENCE_LOCK", g.name);
		set_env("FENCE_TOKEN", token);
		set_env("FENCE_SEQUENCER", g.sequencer);
		set_env("FENCEGATE_URL", fg_conn_base(cl));
		if (r->s3) {
			char buf[8192];
			const char *t = s3_session_token(g.sequencer, buf, sizeof(buf));
			if (t)
				set_env("AWS_SESSION_TOKEN", t);
			else
				fg_say("AWS_SESSION_TOKEN would be too long; "
				       "it is not set");
		}
	} else {
		print_held(r->cli, &g);
		if (r->s3 && !r->cli->json)
			print_s3(g.sequencer);
	}

	struct fg_supervise s = {
		.name = name,
		.grant = &g,
		.kill_after_ms = r->kill_after_ms,
		.own_group = r->own_group,
		.argv = cmd,
		.sigfd = sigfd,
		.child_mask = &saved,
	};
	struct fg_supervised out;
	rc = fg_supervise(&s, &out);

	/* a lost lease has run out (or the gateway said it is gone): there
	 * is nothing to release, and a gateway that could not be reached
	 * would only hold up the exit */
	if (!out.lost) {
		int rel = fg_take_give_back(&g, why, sizeof(why));
		if (rel != FG_EXIT_OK) {
			fg_say("could not release lock '%s': %s", name, why);
			/* holding was the whole task: its end must be told */
			if (!cmd)
				rc = rel;
		} else {
			fg_note("released lock '%s'", name);
		}
	}
out_grant:
	fg_grant_finish(&g);
out_signals:
	/* the mask stays: a signal that came after the command ended must
	 * not turn its status into fencectl's death by that signal */
	close(sigfd);
	return rc;
}

static const struct fg_opt lock_opts[] = {
	FG_TAKE_OPTS,
	{ "kill-after", 0, true, OPT_KILL_AFTER },
	{ "process-group", 0, false, OPT_PROCESS_GROUP },
	{ "command", 'c', true, OPT_COMMAND },
	{ "s3", 0, false, OPT_S3 },
	FG_GLOBAL_OPTS
};

static const struct fg_opt elect_opts[] = {
	{ "ttl", 0, true, FG_TAKE_OPT_TTL },
	FG_TAKE_WAIT_OPTS,
	{ "owner", 0, true, FG_TAKE_OPT_OWNER },
	{ "lock-delay", 0, true, FG_TAKE_OPT_LOCK_DELAY },
	{ "kill-after", 0, true, OPT_KILL_AFTER },
	{ "process-group", 0, false, OPT_PROCESS_GROUP },
	{ "command", 'c', true, OPT_COMMAND },
	{ "s3", 0, false, OPT_S3 },
	FG_GLOBAL_OPTS
};

static int run_cmd(struct fg_cli *cli, int argc, char **argv, bool elect)
{
	struct run r = {
		.cli = cli,
		.take = {
			.args = { .lock_delay_ms = -1 },
			.wait_ms = FG_WAIT_FOREVER,
		},
		.kill_after_ms = DEFAULT_KILL_AFTER_MS,
	};
	struct fg_args a;
	char msg[512];
	size_t npos = elect ? 2 : 1;

	if (fg_opts_parse(elect ? elect_opts : lock_opts, argc, argv, npos,
			  true, on_option, &r, &a, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->help)
		return fg_cli_print_help(elect ? fg_help_elect : fg_help_lock);
	if (fg_cli_check(cli, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (a.npos < npos)
		return fg_cli_usage_error(cli, elect ?
			"elect needs an election name and a value" :
			"lock needs a lock name");
	if (!a.pos[0][0])
		return fg_cli_usage_error(cli, "the lock name is empty");
	char **cmd = a.cmd;
	if (cmd && r.shell_cmd)
		return fg_cli_usage_error(cli, "give the command either with "
					  "-c or after the lock name, not "
					  "both");
	if (r.shell_cmd) {
		/* as flock(1) and consul lock: the user's shell, else sh */
		const char *sh = getenv("SHELL");
		r.shell_argv[0] = (char *)(sh && *sh ? sh : "/bin/sh");
		r.shell_argv[1] = "-c";
		r.shell_argv[2] = (char *)r.shell_cmd;
		r.shell_argv[3] = NULL;
		cmd = r.shell_argv;
	}
	r.take.name = a.pos[0];
	fg_take_default_owner(&r.take);
	if (elect) {
		r.take.args.value = a.pos[1];
		if (fg_cli_text("the value", a.pos[1], msg, sizeof(msg)) < 0)
			return fg_cli_usage_error(cli, msg);
	}
	fg_note("owner %s", r.take.args.owner);
	return run_locked(&r, cmd);
}

int fg_cmd_lock(struct fg_cli *cli, int argc, char **argv)
{
	return run_cmd(cli, argc, argv, false);
}

int fg_cmd_elect(struct fg_cli *cli, int argc, char **argv)
{
	return run_cmd(cli, argc, argv, true);
}
