/*
 * opts.c - the command line reader (see opts.h).
 * Invariant: every argument is either an option of the table, a
 * positional argument, or part of the command; anything else is an error
 * that names it, and the callback is never called for it.
 */
#include <stdio.h>
#include <string.h>

#include "opts.h"

static const struct fg_opt *find_long(const struct fg_opt *opts,
				      const char *name, size_t len)
{
	for (const struct fg_opt *o = opts; o->name; o++)
		if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return o;
	return NULL;
}

static const struct fg_opt *find_short(const struct fg_opt *opts, char c)
{
	for (const struct fg_opt *o = opts; o->name; o++)
		if (o->short_name && o->short_name == c)
			return o;
	return NULL;
}

/*
 * Reads a cluster of one-letter options at argv[*i], as getopt(3) does:
 * "-n", "-nE 3", "-w5", "-nw 5". A letter that takes a value takes the
 * rest of the cluster, or else the next argument; *i is advanced past it.
 */
static int short_options(const struct fg_opt *opts, int argc, char **argv,
			 int *i, fg_opt_fn fn, void *ctx, char *msg,
			 size_t msglen)
{
	const char *arg = argv[*i];

	for (const char *p = arg + 1; *p; p++) {
		const struct fg_opt *o = find_short(opts, *p);
		const char *value = NULL;
		char spelled[8];

		snprintf(spelled, sizeof(spelled), "-%c", *p);
		if (!o) {
			if (p == arg + 1 && !p[1])
				snprintf(msg, msglen, "unknown option '%s'", arg);
			else
				snprintf(msg, msglen, "unknown option '%s' (in "
					 "'%s')", spelled, arg);
			return -1;
		}
		if (!o->takes_value) {
			if (fn(ctx, o->id, spelled, NULL, msg, msglen) < 0)
				return -1;
			continue;
		}
		if (p[1]) {
			value = p + 1;
		} else if (*i + 1 < argc) {
			value = argv[++*i];
		} else {
			snprintf(msg, msglen, "option '%s' needs a value", spelled);
			return -1;
		}
		return fn(ctx, o->id, spelled, value, msg, msglen);
	}
	return 0;
}

/* Reads the option at argv[*i]; advances *i past its value if it took one. */
static int one_option(const struct fg_opt *opts, int argc, char **argv,
		      int *i, fg_opt_fn fn, void *ctx, char *msg,
		      size_t msglen)
{
	const char *arg = argv[*i];
	const struct fg_opt *o;
	const char *value = NULL;
	char spelled[64];

	if (arg[1] != '-')
		return short_options(opts, argc, argv, i, fn, ctx, msg, msglen);
	const char *name = arg + 2;
	const char *eq = strchr(name, '=');
	size_t len = eq ? (size_t)(eq - name) : strlen(name);
	o = find_long(opts, name, len);
	snprintf(spelled, sizeof(spelled), "--%.*s", (int)len, name);
	if (!o) {
		snprintf(msg, msglen, "unknown option '%s'", spelled);
		return -1;
	}
	if (eq) {
		if (!o->takes_value) {
			snprintf(msg, msglen, "option '%s' takes no value",
				 spelled);
			return -1;
		}
		value = eq + 1;
	}
	if (o->takes_value && !value) {
		if (*i + 1 >= argc) {
			snprintf(msg, msglen, "option '%s' needs a value",
				 spelled);
			return -1;
		}
		value = argv[++*i];
	}
	return fn(ctx, o->id, spelled, value, msg, msglen);
}

int fg_opts_parse(const struct fg_opt *opts, int argc, char **argv,
		  size_t npos_max, bool with_cmd, fg_opt_fn fn, void *ctx,
		  struct fg_args *out, char *msg, size_t msglen)
{
	bool options_ended = false;

	memset(out, 0, sizeof(*out));
	if (npos_max > FG_OPTS_MAX_POS)
		npos_max = FG_OPTS_MAX_POS;
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (!options_ended && strcmp(arg, "--") == 0) {
			options_ended = true;
			continue;
		}
		if (!options_ended && arg[0] == '-' && arg[1] != '\0') {
			if (one_option(opts, argc, argv, &i, fn, ctx, msg,
				       msglen) < 0)
				return -1;
			continue;
		}
		if (out->npos < npos_max) {
			out->pos[out->npos++] = arg;
			continue;
		}
		if (with_cmd) {
			out->cmd = &argv[i];
			out->ncmd = argc - i;
			return 0;
		}
		snprintf(msg, msglen, "unexpected argument '%s'", arg);
		return -1;
	}
	return 0;
}
