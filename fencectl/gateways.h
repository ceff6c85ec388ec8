/*
 * gateways.h - the gateways fencectl may call, read from --gateway and
 * FENCEGATE_URL.
 *
 * Each source is a comma list of URLs; --gateway may also be repeated.
 * The list keeps the order given; calls go first to `current`, which
 * req.c moves to the gateway that last answered.
 */
#ifndef FENCECTL_GATEWAYS_H
#define FENCECTL_GATEWAYS_H

#include <stddef.h>

#define FG_GATEWAYS_MAX 16

struct fg_gateways {
	char *url[FG_GATEWAYS_MAX];	/* owned; e.g. http://127.0.0.1:8080 */
	size_t n;
	size_t current;
};

/**
 * Appends the URLs of comma list `list` to gw, each copied. An empty
 * element ("a,,b", "a,") or more than FG_GATEWAYS_MAX in all is refused:
 * -1 with a message naming `what` (the option or the variable) in
 * msg[msglen], and gw holds what it held before. 0 on success.
 */
int fg_gateways_add(struct fg_gateways *gw, const char *what,
		    const char *list, char *msg, size_t msglen);

/** Frees every URL; gw is empty after. */
void fg_gateways_clear(struct fg_gateways *gw);

/**
 * url as it may be shown in a message: a user and password in its
 * authority ("http://u:p@h/") are left out ("http://h/"). Into buf[len],
 * which is returned.
 */
const char *fg_gateways_shown(const char *url, char *buf, size_t len);

#endif
