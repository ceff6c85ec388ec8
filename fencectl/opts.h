/*
 * opts.h - one command line reader for every subcommand.
 *
 * Options may come before, between and after the positional arguments:
 * `--name value`, `--name=value`, or one-letter options as getopt(3)
 * reads them: `-x value`, `-xvalue`, and flags in one cluster (`-nE 3`,
 * where a letter that takes a value ends the cluster). A `--` ends
 * the options. For `lock` and `elect`, once the positional arguments are
 * all there, the next argument that is not an option, or whatever follows
 * `--`, starts the command to run; everything from there on belongs to the
 * command, options included.
 */
#ifndef FENCECTL_OPTS_H
#define FENCECTL_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#define FG_OPTS_MAX_POS 4

struct fg_opt {
	const char *name;	/* long name without "--" */
	char short_name;	/* or 0 */
	bool takes_value;
	int id;
};

struct fg_args {
	const char *pos[FG_OPTS_MAX_POS];	/* point into argv */
	size_t npos;
	char **cmd;				/* into argv; NULL: none */
	int ncmd;
};

/**
 * Called for each option in order. name is the option as written (for
 * messages), value NULL for an option that takes none. Returns 0, or -1
 * with a message in msg[msglen].
 */
typedef int (*fg_opt_fn)(void *ctx, int id, const char *name,
			 const char *value, char *msg, size_t msglen);

/**
 * Reads argv[0..argc) against opts (terminated by an entry whose name is
 * NULL). At most npos_max (<= FG_OPTS_MAX_POS) positional arguments; with
 * with_cmd, what follows them is the command (see above). Returns 0, or -1
 * with a message in msg[msglen]. *out points into argv.
 */
int fg_opts_parse(const struct fg_opt *opts, int argc, char **argv,
		  size_t npos_max, bool with_cmd, fg_opt_fn fn, void *ctx,
		  struct fg_args *out, char *msg, size_t msglen);

#endif
