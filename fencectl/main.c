/*
 * main.c - the fencectl process: global options, then one subcommand.
 *
 * Nothing else happens here: each subcommand reads the rest of the
 * arguments and returns the exit status (exits.h).
 * Invariant: libcurl is set up once, around the one subcommand that runs,
 * and every path out of main() returns an exit status of exits.h.
 */
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"
#include "exits.h"
#include "msg.h"

static const struct {
	const char *name;
	int (*run)(struct fg_cli *, int, char **);
	const char *help;
} commands[] = {
	{ "lock", fg_cmd_lock, fg_help_lock },
	{ "elect", fg_cmd_elect, fg_help_elect },
	{ "acquire", fg_cmd_acquire, fg_help_acquire },
	{ "renew", fg_cmd_renew, fg_help_renew },
	{ "release", fg_cmd_release, fg_help_release },
	{ "inspect", fg_cmd_inspect, fg_help_inspect },
	{ "check", fg_cmd_check, fg_help_check },
	{ "break", fg_cmd_break, fg_help_break },
	{ "ls", fg_cmd_ls, fg_help_ls },
	{ "events", fg_cmd_events, fg_help_events },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct fg_opt main_opts[] = {
	{ "version", 0, false, FG_OPT_VERSION },
	FG_GLOBAL_OPTS
};

static int on_option(void *ctx, int id, const char *name, const char *value,
		     char *msg, size_t msglen)
{
	return fg_cli_global(ctx, id, name, value, msg, msglen);
}

static int help_of(struct fg_cli *cli, int argc, char **argv)
{
	if (argc == 0)
		return fg_cli_print_help(fg_help_main);
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[0], commands[i].name) == 0)
			return fg_cli_print_help(commands[i].help);
	char msg[256];
	snprintf(msg, sizeof(msg), "no command '%s'", argv[0]);
	return fg_cli_usage_error(cli, msg);
}

/* Everything but the libcurl setup around the one subcommand. */
static int run(struct fg_cli *cli, int argc, char **argv)
{
	struct fg_args a;
	char msg[512];
	int rc;

	if (fg_opts_parse(main_opts, argc - 1, argv + 1, 0, true, on_option,
			  cli, &a, msg, sizeof(msg)) < 0)
		return fg_cli_usage_error(cli, msg);
	if (cli->version) {
		printf("fencectl %s\n", FG_VERSION);
		return FG_EXIT_OK;
	}
	if (!a.cmd) {
		if (cli->help)
			return fg_cli_print_help(fg_help_main);
		return fg_cli_usage_error(cli, "no command given");
	}
	if (strcmp(a.cmd[0], "help") == 0)
		return help_of(cli, a.ncmd - 1, a.cmd + 1);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(a.cmd[0], commands[i].name) != 0)
			continue;
		cli->cmd = commands[i].name;
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			fg_say("cannot initialise libcurl");
			return FG_EXIT_SOFTWARE;
		}
		rc = commands[i].run(cli, a.ncmd - 1, a.cmd + 1);
		curl_global_cleanup();
		return rc;
	}
	snprintf(msg, sizeof(msg), "no command '%s'", a.cmd[0]);
	return fg_cli_usage_error(cli, msg);
}

int main(int argc, char **argv)
{
	struct fg_cli cli;
	int rc;

	fg_cli_init(&cli);
	rc = run(&cli, argc, argv);
	/* on every path: the key is wiped, the gateway list freed */
	fg_cli_finish(&cli);
	fflush(stdout);
	return rc;
}
