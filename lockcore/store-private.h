/*
 * store-private.h - what the event readers (evread.c) take from the
 * blocking store (store.c): its view of the masters, its connections, and
 * the one way a connection to Redis is made and logged in. This file is
 * private to lockcore.
 *
 * Invariant: a connection handed out is logged in (topo-private.h) and
 * bounded by the store's timeouts; whoever saw it fail tells the store
 * (fg__store_lost()), which drops it, so a late reply is never read as
 * the answer to a later command.
 */
#ifndef FENCEGATE_STORE_PRIVATE_H
#define FENCEGATE_STORE_PRIVATE_H

#include <stddef.h>

#include "fencegate/lock.h"
#include "fencegate/topo.h"

struct redisContext;
struct redisReply;

/** A fresh blocking connection to node, with connect_ms on connect() and
 *  command_ms on every read and write, logged in with topo's
 *  credentials; NULL with a reason in why[whylen] (the topology is then
 *  suspected). Caller owns it (redisFree()). */
struct redisContext *fg__store_connect(fg_topo *topo,
				       const struct fg_redis_node *node,
				       unsigned connect_ms, unsigned command_ms,
				       char *why, size_t whylen);

/** The topology the store follows (fg_store_opts.topo). */
fg_topo *fg__store_topo(const fg_store *st);

/** The store's view of the masters, brought up to the topology's
 *  generation; NULL on allocation failure. Valid until the store's next
 *  call. */
const struct fg_topo_view *fg__store_view(fg_store *st);

/** One command about key (NULL: any master), a redirection followed
 *  once; NULL when Redis could not be reached. Caller frees. */
struct redisReply *fg__store_command(fg_store *st, const char *key,
				     size_t keylen, int argc,
				     const char **argv, const size_t *argvlen);

/** The store's connection to node (made when needed, at the store's
 *  pace), for a pipeline; NULL when it cannot be had now. Valid until the
 *  store's next call. */
struct redisContext *fg__store_conn(fg_store *st,
				    const struct fg_redis_node *node);

/** A pipeline on node's connection failed (why: NULL for the
 *  connection's own error text): dropped, and the topology suspected. */
void fg__store_lost(fg_store *st, const struct fg_redis_node *node,
		    const char *why);

#endif
