/*
 * fencegate/topo.h - where the lock state lives: one Redis, the master a
 * set of Sentinels names, or the masters of a Redis Cluster by hash slot.
 *
 * One fg_topo per gateway process. Only the maintenance thread discovers
 * (fg_topo_refresh(), blocking, bounded by the timeouts it was created
 * with); every other thread reads a copy of the result (fg_topo_view())
 * and learns that it moved by its generation number, which grows with
 * every change. Anyone may report trouble (fg_topo_suspect()): the hook
 * set with fg_topo_set_hook() then asks the maintenance thread to look
 * again. Invariant: a view only ever names servers that answered as
 * masters (ROLE, or the owner column of CLUSTER SLOTS) when it was made.
 * The topology also holds the credentials (fg_redis_auth) that every
 * connection to Redis, its own and the stores', logs in with.
 */
#ifndef FENCEGATE_TOPO_H
#define FENCEGATE_TOPO_H

#include <stddef.h>
#include <stdint.h>

enum fg_redis_mode {
	FG_REDIS_DIRECT = 0,   /* HOST:PORT or redis://HOST:PORT */
	FG_REDIS_SENTINEL = 1, /* redis-sentinel://H:P,H:P/MASTER */
	FG_REDIS_CLUSTER = 2,  /* redis-cluster://H:P,H:P */
};

#define FG_REDIS_HOST_MAX 256
#define FG_REDIS_SEEDS_MAX 16
#define FG_REDIS_MASTER_MAX 128
#define FG_SLOTS 16384
#define FG_SLOT_NONE 0xffffu

struct fg_redis_node {
	char host[FG_REDIS_HOST_MAX];
	int port;
};

/* What the `redis` setting names. */
struct fg_redis_addr {
	enum fg_redis_mode mode;
	struct fg_redis_node seeds[FG_REDIS_SEEDS_MAX]; /* the server, the
							   Sentinels, or the
							   cluster's seeds */
	size_t nseeds;
	char master[FG_REDIS_MASTER_MAX];               /* Sentinel's name */
};

/**
 * Reads "HOST:PORT", "redis://HOST:PORT", "redis-sentinel://H:P[,H:P...]/
 * NAME" (or "sentinel://") and "redis-cluster://H:P[,H:P...]" (or
 * "cluster://"). A host may be "[v6]". 0, or -1 with a reason in err.
 */
int fg_redis_addr_parse(const char *s, struct fg_redis_addr *out, char *err,
			size_t errlen);

/** The hash slot of a key (CRC16 of its hash tag, as Redis Cluster). */
unsigned fg_keyslot(const char *key, size_t len);

/* How every connection to Redis logs in: the servers, the Sentinels and
 * every cluster node alike, before any other command. */
struct fg_redis_auth {
	const char *user;     /* NULL: AUTH <password> (the default user) */
	const char *password; /* NULL: no AUTH at all */
	/* Optional. Told when a server refused the credentials, or a command
	 * for want of a right (WRONGPASS, NOAUTH, NOPERM): the user (NULL for
	 * the default user), the server, and its error text, never the
	 * password. Any thread, at every refusal (the caller rate-limits);
	 * must not block. */
	void (*refused)(void *arg, const char *user,
			const struct fg_redis_node *node, const char *why);
	void *refused_arg;
};

typedef struct fg_topo fg_topo;

/** Caller owns the result (fg_topo_destroy()); NULL on allocation failure.
 *  A DIRECT topology is complete at once; the others after a refresh.
 *  auth may be NULL (no AUTH); its strings are copied, and the copy of the
 *  password is wiped at fg_topo_destroy(). */
fg_topo *fg_topo_create(const struct fg_redis_addr *addr,
			unsigned connect_timeout_ms, unsigned command_timeout_ms,
			const struct fg_redis_auth *auth);
void fg_topo_destroy(fg_topo *t);

enum fg_redis_mode fg_topo_mode(const fg_topo *t);

/**
 * Discovers (blocking; the maintenance thread only). Sentinel: asks the
 * Sentinels in turn for the master, confirms it with ROLE, and keeps a
 * subscription to +switch-master on the Sentinel that answered. Cluster:
 * CLUSTER SLOTS from a known master or a seed. FG_OK when the view is
 * complete and confirmed, FG_EUNAVAIL when nobody could say (the old
 * view stays).
 */
int fg_topo_refresh(fg_topo *t);

/** Grows whenever the view changes; starts at 1. Any thread. */
uint64_t fg_topo_gen(const fg_topo *t);

/** Something looked wrong (a connection error, -READONLY, -MOVED): a
 *  refresh is wanted. Any thread; calls the hook. */
void fg_topo_suspect(fg_topo *t);
/** 1 when a refresh was asked for since the last one began. */
int fg_topo_suspected(const fg_topo *t);
/** The hook fg_topo_suspect() calls. Not synchronised: set it before the
 *  threads that may call fg_topo_suspect() start, clear it after they end. */
void fg_topo_set_hook(fg_topo *t, void (*hook)(void *), void *arg);

/** The Sentinel subscription's descriptor (-1 without one): readable when
 *  a Sentinel spoke. fg_topo_watch_read() takes what it said; 1 when it
 *  announced a switch of our master (refresh now). Maintenance thread. */
int fg_topo_watch_fd(const fg_topo *t);
int fg_topo_watch_read(fg_topo *t);

/* A copy of the view. nodes are the masters (one outside Cluster, none
 * while unknown); slots maps each slot to an index into nodes, or
 * FG_SLOT_NONE (Cluster only, else NULL). */
struct fg_topo_view {
	uint64_t gen;
	size_t nnodes;
	struct fg_redis_node *nodes;
	uint16_t *slots;
};

/** Fills *out (caller frees with fg_topo_view_finish()). FG_OK or
 *  FG_ENOMEM. */
int fg_topo_view(fg_topo *t, struct fg_topo_view *out);
void fg_topo_view_finish(struct fg_topo_view *v);

/* For tests: builds a view from a CLUSTER SLOTS reply. `from` is the node
 * that answered (a reply may leave a host empty: it means that node). */
struct redisReply;
int fg_topo_parse_slots(const struct redisReply *r,
			const struct fg_redis_node *from,
			struct fg_topo_view *out);

#endif
