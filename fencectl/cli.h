/*
 * cli.h - what every subcommand shares: the global options, reading
 * option values, the usage error, and the subcommands themselves.
 *
 * Each subcommand is one function that reads its own arguments (global
 * options included, wherever they stand) and returns the exit status.
 */
#ifndef FENCECTL_CLI_H
#define FENCECTL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keyfile.h"
#include "opts.h"
#include "req.h"

#define FG_DEFAULT_GATEWAY "http://127.0.0.1:8080"
#define FG_DEFAULT_TIMEOUT_MS 10000
#define FG_CONNECT_TIMEOUT_MAX_MS 5000

enum {
	FG_OPT_GATEWAY = 1,
	FG_OPT_TIMEOUT,
	FG_OPT_JSON,
	FG_OPT_HELP,
	FG_OPT_VERSION,
	FG_OPT_KEY_FILE,
	FG_OPT_CACERT,
	FG_OPT_CERT,
	FG_OPT_KEY,
	FG_OPT_VERBOSE,
	FG_OPT_FIRST_OWN = 100,	/* a subcommand's own options from here */
};

/* The global options, for the end of every subcommand's table. */
#define FG_GLOBAL_OPTS \
	{ "gateway", 0, true, FG_OPT_GATEWAY }, \
	{ "timeout", 0, true, FG_OPT_TIMEOUT }, \
	{ "json", 0, false, FG_OPT_JSON }, \
	{ "key-file", 0, true, FG_OPT_KEY_FILE }, \
	{ "cacert", 0, true, FG_OPT_CACERT }, \
	{ "cert", 0, true, FG_OPT_CERT }, \
	{ "key", 0, true, FG_OPT_KEY }, \
	{ "verbose", 0, false, FG_OPT_VERBOSE }, \
	{ "help", 'h', false, FG_OPT_HELP }, \
	{ NULL, 0, false, 0 }

struct fg_cli {
	struct fg_conn client;
	struct fg_gateways gateways;	/* client.gw points here; owned */
	bool gateway_given;	/* --gateway: FENCEGATE_URL is not read */
	bool verbose;
	bool json;
	bool help;
	bool version;
	const char *cmd;	/* the subcommand, for messages */
	const char *key_file;	/* --key-file; NULL: FENCEGATE_KEY_FILE */
	char key[FG_KEY_MAX + 1];	/* the bearer key read from it (a
					 * secret); client.key points here */
};

/** Defaults; the gateways come from --gateway, else FENCEGATE_URL, else
 *  FG_DEFAULT_GATEWAY (see fg_cli_check()). */
void fg_cli_init(struct fg_cli *cli);

/** Wipes the key and frees the gateway list; cli is not used again. */
void fg_cli_finish(struct fg_cli *cli);

/**
 * Handles a global option: 0 done, -1 bad value (msg set), 1 when id is
 * not a global option.
 */
int fg_cli_global(struct fg_cli *cli, int id, const char *name,
		  const char *value, char *msg, size_t msglen);

/**
 * Checks what the global options left, once all are read (the gateways:
 * those of --gateway, else of FENCEGATE_URL, each a comma list), and reads
 * the bearer key (--key-file, else FENCEGATE_KEY_FILE) into cli->key: 0, or
 * -1 with msg (which never holds the key).
 */
int fg_cli_check(struct fg_cli *cli, char *msg, size_t msglen);

/** Reads a duration option into *ms, within [min, max]. 0 or -1 (msg). */
int fg_cli_duration(const char *name, const char *value, uint64_t min,
		    uint64_t max, uint64_t *ms, char *msg, size_t msglen);

/** Reads --wait: a duration, or "forever" (FG_WAIT_FOREVER). */
int fg_cli_wait(const char *name, const char *value, uint64_t *ms, char *msg,
		size_t msglen);

/** Refuses text that cannot go into JSON (it must be UTF-8). 0 or -1. */
int fg_cli_text(const char *name, const char *value, char *msg,
		size_t msglen);

/** Refuses a lease with bytes that cannot go in a header. 0 or -1. */
int fg_cli_lease_ok(const char *lease, char *msg, size_t msglen);

/** "fencectl: <msg>" and a pointer to --help on stderr; FG_EXIT_USAGE. */
int fg_cli_usage_error(const struct fg_cli *cli, const char *msg);

/** Prints s on stdout (a subcommand's help); FG_EXIT_OK. */
int fg_cli_print_help(const char *s);

/** Prints one JSON value on stdout, compact, on one line. */
void fg_cli_print_json(const json_t *j);

int fg_cmd_lock(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_elect(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_acquire(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_renew(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_release(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_inspect(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_check(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_break(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_ls(struct fg_cli *cli, int argc, char **argv);
int fg_cmd_events(struct fg_cli *cli, int argc, char **argv);

extern const char fg_help_main[], fg_help_lock[], fg_help_elect[],
	fg_help_acquire[], fg_help_renew[], fg_help_release[],
	fg_help_inspect[], fg_help_check[], fg_help_break[], fg_help_ls[],
	fg_help_events[];

#endif
