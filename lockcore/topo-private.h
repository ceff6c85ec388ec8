/*
 * topo-private.h - what store.c and astore-conn.c take from the topology
 * besides where Redis is: the credentials every connection logs in with
 * (topo.c holds the only copy of the password). This file is private to
 * lockcore.
 *
 * Invariant: a connection sends AUTH before anything else, and counts as
 * up only once AUTH said OK; the password leaves topo.c only as an AUTH
 * argument, never in an error text or a report.
 */
#ifndef FENCEGATE_TOPO_PRIVATE_H
#define FENCEGATE_TOPO_PRIVATE_H

#include <stddef.h>

#include "fencegate/topo.h"

struct redisContext;
struct redisReply;

#define FG__LOGIN_ARGC_MAX 3

/** The AUTH command of t's credentials: argv points into t (valid while t
 *  lives). Returns argc, or 0 when there are no credentials. */
int fg__login_argv(const fg_topo *t, const char *argv[FG__LOGIN_ARGC_MAX],
		   size_t argvlen[FG__LOGIN_ARGC_MAX]);

/** AUTH's reply on a connection to node (NULL: the connection was lost).
 *  FG_OK, or FG_EUNAVAIL (a refusal is told to the hook first). */
int fg__login_reply(const fg_topo *t, const struct fg_redis_node *node,
		    const struct redisReply *r);

/** Logs a fresh blocking connection to node in: FG_OK at once without
 *  credentials, else FG_OK or FG_EUNAVAIL (refused, or lost). */
int fg__login(const fg_topo *t, const struct fg_redis_node *node,
	      struct redisContext *rc);

/** An error text from node: when it refuses a right (NOPERM, NOAUTH,
 *  WRONGPASS), tells the hook and returns 1; else 0. */
int fg__login_refused(const fg_topo *t, const struct fg_redis_node *node,
		      const char *err);

#endif
