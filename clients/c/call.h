/*
 * call.h - private to libfencegate-client: one lock API call over libcurl,
 * on each gateway in turn, and the table of error codes.
 *
 * Invariant: a call passes to the next gateway only when the one tried
 * gave no answer (no connection, a timeout) or a 5xx, so that an answer
 * about the lock (409, 410, 401...) is never asked again elsewhere; the
 * gateway that answered becomes the one asked first.
 */
#ifndef FENCEGATE_CLIENT_CALL_H
#define FENCEGATE_CLIENT_CALL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fencegate/client.h"

#define FG__GATEWAYS_MAX 16
#define FG__WAIT_MAX_MS 300000u

/* What reaching the gateways takes, shared by every handle of a client. */
struct fg__net {
	char *gw[FG__GATEWAYS_MAX];	/* base URLs, without a trailing '/' */
	size_t n;
	atomic_size_t current;		/* asked first */
	char *auth_header;		/* "Authorization: Bearer KEY"; secret */
	char *cacert, *cert, *cert_key;
	uint64_t timeout_ms, connect_ms;
	char *user_agent;
	void (*on_attempt)(void *arg, const struct fg_client_attempt *a);
	void *on_attempt_arg;
};

/* A call that a caller can cut short (see fg_client_acquire_opts). */
struct fg__cancel {
	int fd;
	bool (*fn)(void *arg);
	void *arg;
};

/* The answer of one call: the last attempt's. */
struct fg__answer {
	CURLcode result;
	long status;		/* 0: no HTTP answer */
	json_t *json;		/* owned; the answer when it is an object */
	bool answered;		/* some gateway answered (below 500 or not) */
	size_t tried;		/* gateways tried */
	uint64_t sent_ms;	/* monotonic: when the last attempt began */
	uint64_t done_ms;
	char errbuf[CURL_ERROR_SIZE];
	char *resp;		/* owned */
	size_t len;
};

/**
 * Runs method on path (below each gateway's base URL) with body (JSON
 * text, or NULL) and headers `lease` (the Fence-Lease value) and `extra`
 * (one whole header line), each NULL for none; each attempt is bounded
 * by timeout_ms (0: the client's). Uses easy h (reset first). Returns 0
 * for a 2xx, else the error of the answer; *a holds the last attempt
 * (caller: fg__answer_finish()).
 */
int fg__call(struct fg__net *net, CURL *h, const char *method,
	     const char *path, const char *body, const char *lease,
	     const char *extra, uint64_t timeout_ms, struct fg__answer *a);

/** fg__call() that cancel (NULL: none) can cut short: then
 *  FG_CLIENT_CANCELLED. */
int fg__call_c(struct fg__net *net, CURL *h, const char *method,
	       const char *path, const char *body, const char *lease,
	       const char *extra, uint64_t timeout_ms,
	       const struct fg__cancel *cancel, struct fg__answer *a);

/**
 * Before a call that asks a gateway to wait: GET /_fence/v1/livez on each
 * gateway in turn from the current one (each bounded by the client's
 * timeout) until one answers, which becomes the current one: a stopped or
 * wedged gateway takes connections but would hold the call for all of its
 * wait. 0, or the last attempt's error in *a (none answered) or
 * FG_CLIENT_CANCELLED.
 */
int fg__probe(struct fg__net *net, CURL *h, const struct fg__cancel *cancel,
	      struct fg__answer *a);

/** Sleeps ms, or less when cancel says stop: then FG_CLIENT_CANCELLED. */
int fg__sleep(uint64_t ms, const struct fg__cancel *cancel);

void fg__answer_finish(struct fg__answer *a);

/** Fills e from a failed call's answer (or from err alone, a NULL). */
void fg__error_set(struct fg_client_error *e, int err,
		   const struct fg__answer *a, const char *what);

/** Integer field in [0, 2^53): 0, or -1. */
int fg__json_uint(json_t *o, const char *key, uint64_t *out);

/** String field or NULL. */
const char *fg__json_str(json_t *o, const char *key);

/** "/_fence/v1/locks/" + name escaped per segment (+ "?" query). Owned. */
char *fg__lock_path(const char *name, const char *query);

/** Wipes n bytes where the compiler cannot drop it. */
void fg__wipe(void *p, size_t n);

/**
 * For the fenced requests (client.c, s3.c): *out = prefix + the held
 * lease's sequencer (owned by the caller), or FG_CLIENT_INVALID (none
 * held), FG_CLIENT_LEASE_LOST (lost, or its end has passed: marked lost
 * here), FG_CLIENT_NOMEM, with *out NULL. Any thread.
 */
int fg__lease_sequencer(struct fg_client *c, const char *prefix, char **out);

/** Monotonic ms. */
uint64_t fg__now_ms(void);

#endif
