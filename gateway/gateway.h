/*
 * gateway.h - the gateway process: what every part of it shares.
 * Private to the gateway.
 *
 * Concurrency model (docs/architecture.md): libmicrohttpd worker threads
 * each own one blocking Redis connection and answer the fast path (one
 * script round trip per request). Requests that must wait (blocking
 * acquire, observe) are suspended and handed to the wait loop, one libevent
 * thread with asynchronous Redis connections: a waiting request holds no
 * thread. A maintenance thread keeps the HMAC key and the health flags.
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
#include "config.h"
#include "fence.h"

#define FG_BODY_MAX (64 * 1024)

struct fg_waitq;
struct fg_waiter;
struct fg_proxy;
struct fg_xfer;

struct fg_gateway {
	struct fg_config *cfg;
	char id[FG_GATEWAY_ID_LEN + 1];  /* random per process */
	struct fg_store_opts store_opts;
	struct MHD_Daemon *daemon;
	struct fg_waitq *wq;
	struct fg_proxy *px;
	pthread_key_t store_key;         /* the calling thread's fg_store */

	pthread_mutex_t key_mu;
	uint8_t key[FG_KEY_MAX];
	size_t key_len;                  /* 0 until the key is known */
	bool key_from_file;

	atomic_int redis_up;
	atomic_int upstream_up;
	atomic_ullong waiter_seq;

	pthread_t maint;
	pthread_mutex_t maint_mu;
	pthread_cond_t maint_cv;
	bool stopping;
};

/* Per-request state, allocated when the request line is read and freed in
 * the request-completed callback (http.c), never anywhere else. */
struct fg_req {
	struct fg_gateway *gw;
	char *uri;                 /* the raw request-target, as sent */
	const char *uri_at;        /* where libmicrohttpd holds it (framing.c) */
	size_t uri_len;
	bool started;
	bool framed;               /* framing.c accepted the request head */
	bool refused;              /* framing.c answered 400: drop the rest */
	bool body_chunked;         /* the body is chunked (else body_length) */
	uint64_t body_length;      /* Content-Length, 0 without a body */
	bool body_length_given;    /* a Content-Length header came */
	bool granted;              /* a grant of name/lease was answered */
	bool over;                 /* the body passed FG_BODY_MAX */
	char *body;                /* NUL-terminated when complete */
	size_t body_len;
	struct fg_waiter *waiter;  /* a blocking acquire or observe */
	char name[FG_NAME_MAX + 1];  /* the lock it waits on */
	char lease[FG_LEASE_LEN + 1]; /* the lease it waits to get */
	struct fg_fence fence;     /* a proxied request's checks */
	const char *dest_raw;      /* COPY/MOVE: the Destination path forwarded */
	size_t dest_raw_len;
	struct fg_xfer *xfer;      /* a proxied request's upstream transfer */
};

/** The calling thread's blocking Redis connection (created on first use),
 *  or NULL on allocation failure. */
fg_store *fg_gateway_store(struct fg_gateway *gw);

/** Copies the HMAC key in force. FG_OK, or FG_ENOKEY before it is known. */
int fg_gateway_key(struct fg_gateway *gw, uint8_t out[FG_KEY_MAX], size_t *len);

/** Starts / stops the maintenance thread (key sync, health probes). */
int fg_maint_start(struct fg_gateway *gw);
void fg_maint_stop(struct fg_gateway *gw);
/** One probe of the upstream (TCP connect, bounded). 1 up, 0 down. */
int fg_probe_upstream(struct fg_gateway *gw);

/* HTTP (http.c). */
int fg_http_start(struct fg_gateway *gw);
void fg_http_stop(struct fg_gateway *gw);

/* Handlers (api_lock.c): route, translate, answer. */
enum MHD_Result fg_api_dispatch(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *path,
				size_t path_len);
/** A suspended request was resumed: answer from its waiter. */
enum MHD_Result fg_api_resume(struct fg_req *req, struct MHD_Connection *c);

#endif
