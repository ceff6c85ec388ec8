/*
 * gateway.h - the gateway process: what every part of it shares.
 * Private to the gateway.
 *
 * Concurrency model (docs/architecture.md): N event loops, one thread each
 * (loop.c). A loop owns everything a request needs: its libmicrohttpd
 * daemon, its asynchronous Redis connections, its waiters and its curl
 * multi handle, all on one libevent base. A request is served start to
 * finish on the loop that accepted it; nothing of a request crosses
 * threads. The process-wide services (settings, the HMAC key, the health
 * flags) are in struct fg_gateway and are read-only or atomic.
 */
#ifndef FENCEGATE_GATEWAY_H
#define FENCEGATE_GATEWAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "base/config.h"
#include "base/s3keys.h"

struct fg_loop;
struct fg_authtab;
struct fg_evfeed;

/* At most this many event loops (one per core unless `threads` says). */
#define FG_LOOPS_MAX 256
/* A loop turns at least this often (its heartbeat timer)... */
#define FG_LOOP_TURN_MS 250
/* ...and one that has not turned for this long is stuck: not ready. */
#define FG_LOOP_STUCK_MS 5000

struct fg_gateway {
	struct fg_config *cfg;
	char id[FG_GATEWAY_ID_LEN + 1];  /* random per process (logs) */
	struct fg_store_opts store_opts;
	int listen_fd;                   /* shared by every loop's daemon */
	struct fg_loop **loops;
	unsigned nloops;

	pthread_mutex_t key_mu;
	uint8_t key[FG_KEY_MAX];
	size_t key_len;                  /* 0 until the key is known */
	bool key_from_file;

	/* The auth-file in force (access.c): replaced on SIGHUP under
	 * auth_mu; auth_gen moves on each replacement so that a loop sees it
	 * with one atomic load. NULL: open. */
	pthread_mutex_t auth_mu;
	struct fg_authtab *auth;
	atomic_uint auth_gen;
	/* S3 mode: the keys clients sign with (s3-credentials), replaced
	 * with the auth-file under auth_mu, and the gateway's own at the
	 * store (upstream-s3-credentials, read once at start) */
	struct fg_s3keys *s3keys;
	struct fg_s3upstream *s3up;

	atomic_int redis_up;
	atomic_int upstream_up;


	fg_topo *topo;                   /* where Redis is; refreshed by maint */
	/* the event stream's follower and history reads (proc/evfeed.h):
	 * made by main.c before the loops, which only read it */
	struct fg_evfeed *evfeed;
	/* Called on the maintenance thread when the topology moved (set
	 * before it starts, by main.c: every loop's connections follow). */
	void (*topology_moved)(struct fg_gateway *gw);

	pthread_t maint;
	int maint_fd;                    /* eventfd: look again now */
	atomic_bool stopping;
	atomic_bool maint_done;          /* its last act: it can be joined */
	atomic_bool draining;            /* a stop signal came: not ready */

	/* Stopping (main.c waits on these, each loop adds to them once):
	 * loops that stopped accepting, loops with no request now,
	 * requests still running when the loops were stopped. */
	atomic_uint quiesced;
	atomic_uint drained;
	atomic_uint ended_at_bound;
	/* each loop's last turn, fg_clock_ms() (0: not running yet) */
	_Atomic uint64_t turned[FG_LOOPS_MAX];
	/* whether each loop's Redis connections could take a call at its
	 * last turn (false: not running yet) */
	atomic_bool loop_redis[FG_LOOPS_MAX];
};

/* Shared services (gateway.c). */
/** Reads the key file at path: FG_KEY_MIN..FG_KEY_MAX bytes into key and
 *  *len. 0, or -1 with err set (the path and why, never a byte of the
 *  file). The one reading of the key file, for the start and for
 *  --check-config; the caller wipes the key it no longer needs. */
int fg_gateway_read_key(const char *path, uint8_t key[FG_KEY_MAX],
			size_t *len, char *err, size_t errlen);
/** Reads the key file (if any), picks the gateway's id, fills the Redis
 *  options. 0, or -1 after printing why (the process exits 2). */
int fg_gateway_init(struct fg_gateway *gw, struct fg_config *cfg);
/** Frees what fg_gateway_init() made (after every loop and maint ended). */
void fg_gateway_finish(struct fg_gateway *gw);
/** Sets the HMAC key in force (the maintenance thread). */
void fg_gateway_set_key(struct fg_gateway *gw, const uint8_t *key, size_t len);
/** Copies the HMAC key in force. FG_OK, or FG_ENOKEY before it is known. */
int fg_gateway_key(struct fg_gateway *gw, uint8_t out[FG_KEY_MAX], size_t *len);

/** Reads auth-file (when set) into the table in force. 0, or -1 with
 *  err set (the process exits 2). Main thread, at start. */
int fg_gateway_auth_load(struct fg_gateway *gw, char *err, size_t errlen);
/** SIGHUP: reads auth-file again; a file that does not parse keeps the
 *  table in force, and the reason is logged. Main thread. */
void fg_gateway_auth_reload(struct fg_gateway *gw);
/** Frees the table in force (after every loop ended). */
void fg_gateway_auth_finish(struct fg_gateway *gw);
/** The generation of the table in force: moves on each replacement. */
unsigned fg_gateway_auth_gen(struct fg_gateway *gw);
/** A new reference to the table in force (NULL: open), and its
 *  generation in *gen. */
struct fg_authtab *fg_gateway_auth_ref(struct fg_gateway *gw, unsigned *gen);
/** S3 mode: a new reference to the s3-credentials table in force (NULL
 *  outside S3 mode), of the generation fg_gateway_auth_ref() says. */
struct fg_s3keys *fg_gateway_s3keys_ref(struct fg_gateway *gw);

/** The health flags (any thread). */
bool fg_gateway_redis_up(struct fg_gateway *gw);
bool fg_gateway_upstream_up(struct fg_gateway *gw);
/** A stop signal came: not ready. */
bool fg_gateway_draining(struct fg_gateway *gw);

/** Loop `index` turned at `now` (fg_clock_ms()). Its thread. */
/** A loop's Redis connections can (or cannot) take a call now; health
 *  says Redis is up only when every loop's can, so that a gateway found
 *  healthy serves a lock call on whichever loop takes it. */
void fg_gateway_loop_redis(struct fg_gateway *gw, unsigned index, bool ready);
bool fg_gateway_loops_redis(struct fg_gateway *gw);
void fg_gateway_loop_turned(struct fg_gateway *gw, unsigned index,
			    uint64_t now);
/** True unless a running loop last turned more than `bound` ms before
 *  `now`. Any thread. */
bool fg_gateway_loops_turning(struct fg_gateway *gw, uint64_t now,
			      uint64_t bound);

/** Stopping, told by each loop on its thread and read by main.c: the
 *  loop stopped accepting (once); it has no request left (idle), or has
 *  one again (a request on a connection opened before); `n` of its
 *  requests were still running when it was stopped (once). */
void fg_gateway_note_quiesced(struct fg_gateway *gw);
void fg_gateway_note_drained(struct fg_gateway *gw, bool idle);
void fg_gateway_note_ended(struct fg_gateway *gw, unsigned n);
unsigned fg_gateway_quiesced(struct fg_gateway *gw);
unsigned fg_gateway_drained(struct fg_gateway *gw);
unsigned fg_gateway_ended(struct fg_gateway *gw);

/** Starts / stops the maintenance thread (key sync, health probes): start
 *  before the loops start, stop after they stopped (the loops call the
 *  topology hook it sets). */
int fg_maint_start(struct fg_gateway *gw);
void fg_maint_stop(struct fg_gateway *gw);
/* The same in two steps, for a caller that watches for signals while the
 * thread ends (it may be in a Redis call of up to redis-timeout-ms):
 * ask once, then true once the thread has been joined. */
void fg_maint_ask_stop(struct fg_gateway *gw);
bool fg_maint_joined(struct fg_gateway *gw);
/* The process ends without waiting for the thread: one that is done is
 * joined, one still in a Redis call is detached. */
void fg_maint_let_go(struct fg_gateway *gw);
/** A loop's Redis call failed: health says "down" until a probe answers
 *  (asked for at once). Any thread. */
void fg_maint_redis_failed(struct fg_gateway *gw);

#endif
