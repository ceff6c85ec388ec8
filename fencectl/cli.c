/*
 * cli.c - global options and the helpers every subcommand reads its
 * arguments with (see cli.h).
 * Invariant: a value that is out of range or not what its option takes is
 * refused here, with the option's name, before anything is sent. The
 * bearer key comes only from a file, never from the command line, where
 * ps(1) would show it to every user. The gateways come from --gateway
 * alone once it is given, else from FENCEGATE_URL, never from a mix.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "exits.h"
#include "msg.h"
#include "take.h"

void fg_cli_init(struct fg_cli *cli)
{
	memset(cli, 0, sizeof(*cli));
	cli->client.gw = &cli->gateways;
	cli->client.timeout_ms = FG_DEFAULT_TIMEOUT_MS;
	cli->client.connect_timeout_ms = FG_CONNECT_TIMEOUT_MAX_MS;
}

void fg_cli_finish(struct fg_cli *cli)
{
	fg_keyfile_wipe(cli->key, sizeof(cli->key));
	cli->client.key = NULL;
	fg_gateways_clear(&cli->gateways);
}

int fg_cli_duration(const char *name, const char *value, uint64_t min,
		    uint64_t max, uint64_t *ms, char *msg, size_t msglen)
{
	char why[128], a[32], b[32];
	uint64_t v;

	if (fg_duration_parse(value, &v, why, sizeof(why)) < 0) {
		snprintf(msg, msglen, "%s: '%s' is not a duration (%s); "
			 "examples: 500ms, 30s, 2m, 1h", name, value, why);
		return -1;
	}
	if (v < min || v > max) {
		snprintf(msg, msglen, "%s must be between %s and %s", name,
			 fg_duration_format(min, a, sizeof(a)),
			 fg_duration_format(max, b, sizeof(b)));
		return -1;
	}
	*ms = v;
	return 0;
}

int fg_cli_wait(const char *name, const char *value, uint64_t *ms, char *msg,
		size_t msglen)
{
	if (strcmp(value, "forever") == 0) {
		*ms = FG_WAIT_FOREVER;
		return 0;
	}
	return fg_cli_duration(name, value, 0, FG_WAIT_FOREVER - 1, ms, msg,
			       msglen);
}

int fg_cli_global(struct fg_cli *cli, int id, const char *name,
		  const char *value, char *msg, size_t msglen)
{
	switch (id) {
	case FG_OPT_GATEWAY:
		/* the first --gateway replaces FENCEGATE_URL; each more adds */
		cli->gateway_given = true;
		return fg_gateways_add(&cli->gateways, name, value, msg,
				       msglen);
	case FG_OPT_VERBOSE:
		cli->verbose = true;
		fg_msg_set_verbose(true);
		return 0;
	case FG_OPT_TIMEOUT:
		if (fg_cli_duration(name, value, 1, 3600000,
				    &cli->client.timeout_ms, msg, msglen) < 0)
			return -1;
		cli->client.connect_timeout_ms =
			cli->client.timeout_ms < FG_CONNECT_TIMEOUT_MAX_MS ?
			cli->client.timeout_ms : FG_CONNECT_TIMEOUT_MAX_MS;
		return 0;
	case FG_OPT_JSON:
		cli->json = true;
		return 0;
	case FG_OPT_HELP:
		cli->help = true;
		return 0;
	case FG_OPT_VERSION:
		cli->version = true;
		return 0;
	case FG_OPT_KEY_FILE:
		cli->key_file = value;
		return 0;
	case FG_OPT_CACERT:
		cli->client.cacert = value;
		return 0;
	case FG_OPT_CERT:
		cli->client.cert = value;
		return 0;
	case FG_OPT_KEY:
		cli->client.cert_key = value;
		return 0;
	}
	return 1;
}

/* A file given for TLS must be there to read now: curl's own complaint
 * would come only at the first call, and less plainly. */
static int readable(const char *opt, const char *path, char *msg,
		    size_t msglen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		snprintf(msg, msglen, "%s '%s': cannot read it: %s", opt, path,
			 strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static int check_tls(const struct fg_conn *cl, char *msg, size_t msglen)
{
	if (!cl->cacert && !cl->cert && !cl->cert_key)
		return 0;
	for (size_t i = 0; i < cl->gw->n; i++) {
		if (strncmp(cl->gw->url[i], "https://", 8) != 0) {
			/* a certificate that would silently not be sent */
			snprintf(msg, msglen, "--cacert, --cert and --key are "
				 "for an https:// gateway, and '%s' is not "
				 "one", cl->gw->url[i]);
			return -1;
		}
	}
	if (cl->cert_key && !cl->cert) {
		snprintf(msg, msglen, "--key is the private key of --cert: "
			 "give --cert too (the bearer key goes in --key-file)");
		return -1;
	}
	if ((cl->cacert && readable("--cacert", cl->cacert, msg, msglen) < 0) ||
	    (cl->cert && readable("--cert", cl->cert, msg, msglen) < 0) ||
	    (cl->cert_key && readable("--key", cl->cert_key, msg, msglen) < 0))
		return -1;
	return 0;
}

/* --key-file wins over FENCEGATE_KEY_FILE; neither: no key. */
static int load_key(struct fg_cli *cli, char *msg, size_t msglen)
{
	const char *path = cli->key_file;
	const char *what = "--key-file";

	if (!path) {
		path = getenv("FENCEGATE_KEY_FILE");
		what = "FENCEGATE_KEY_FILE";
		if (!path || !*path)
			return 0;
	}
	if (!*path) {
		snprintf(msg, msglen, "--key-file: the file name is empty");
		return -1;
	}
	if (fg_keyfile_read(path, what, cli->key, msg, msglen) !=
	    FG_KEYFILE_OK)
		return -1;
	cli->client.key = cli->key;
	cli->client.key_file = path;
	return 0;
}

static int check_url(const char *u, char *msg, size_t msglen)
{
	if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
		snprintf(msg, msglen, "the gateway URL '%s' must start with "
			 "http:// or https://", u);
		return -1;
	}
	for (const char *p = u; *p; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			snprintf(msg, msglen, "the gateway URL must not "
				 "contain blanks or control characters");
			return -1;
		}
	}
	return 0;
}

int fg_cli_check(struct fg_cli *cli, char *msg, size_t msglen)
{
	char d[32], c[32];

	if (!cli->gateway_given) {
		const char *env = getenv("FENCEGATE_URL");
		if (fg_gateways_add(&cli->gateways, "FENCEGATE_URL",
				    env && *env ? env : FG_DEFAULT_GATEWAY,
				    msg, msglen) < 0)
			return -1;
	}
	for (size_t i = 0; i < cli->gateways.n; i++)
		if (check_url(cli->gateways.url[i], msg, msglen) < 0)
			return -1;
	fg_note("%zu gateway%s, tried in turn; each call bounded by %s "
		"(connecting: %s)", cli->gateways.n,
		cli->gateways.n == 1 ? "" : "s",
		fg_duration_format(cli->client.timeout_ms, d, sizeof(d)),
		fg_duration_format(cli->client.connect_timeout_ms, c,
				   sizeof(c)));
	if (check_tls(&cli->client, msg, msglen) < 0)
		return -1;
	return load_key(cli, msg, msglen);
}

int fg_cli_text(const char *name, const char *value, char *msg,
		size_t msglen)
{
	/* jansson checks UTF-8 the way it will when the body is built */
	json_t *t = json_string(value);

	if (!t) {
		snprintf(msg, msglen, "%s must be UTF-8 text", name);
		return -1;
	}
	json_decref(t);
	return 0;
}

int fg_cli_lease_ok(const char *lease, char *msg, size_t msglen)
{
	if (!*lease) {
		snprintf(msg, msglen, "the lease is empty");
		return -1;
	}
	for (const char *p = lease; *p; p++) {
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
			/* never echo it: it may be a real lease, mistyped */
			snprintf(msg, msglen, "the lease contains a blank or a "
				 "byte that is not printable ASCII");
			return -1;
		}
	}
	return 0;
}

int fg_cli_usage_error(const struct fg_cli *cli, const char *msg)
{
	fg_say("%s", msg);
	if (cli->cmd)
		fprintf(stderr, "Try 'fencectl %s --help'.\n", cli->cmd);
	else
		fprintf(stderr, "Try 'fencectl --help'.\n");
	return FG_EXIT_USAGE;
}

int fg_cli_print_help(const char *s)
{
	fputs(s, stdout);
	return FG_EXIT_OK;
}

void fg_cli_print_json(const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

	if (s) {
		printf("%s\n", s);
		free(s);
	}
	fflush(stdout);
}
