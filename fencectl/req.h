/*
 * req.h - one HTTP call to the gateway, over libcurl, and what its answer
 * means.
 *
 * Every call is bounded: a connect timeout, and a total timeout that is
 * the client's timeout plus whatever wait the call asks the gateway for.
 * A client may know several gateways: a call goes to the one that last
 * answered, and one that cannot be reached (or answers 5xx) passes the
 * call on to the next, in turn, each attempt bounded alike, until one
 * answers or all were tried.
 * Every socket is close-on-exec, so the command `lock` runs never inherits
 * a connection to the gateway. Every call carries the client's identity
 * (its bearer key, its client certificate) when it has one, and an
 * https:// gateway's certificate is always verified.
 *
 * What an answer means is said here once, in plain words, for every
 * subcommand alike: who the gateway thinks the caller is (401), what the
 * caller may not do (403), a certificate that cannot be verified.
 */
#ifndef FENCECTL_REQ_H
#define FENCECTL_REQ_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "gateways.h"

struct fg_conn {
	struct fg_gateways *gw;		/* at least one; current moves to the
					 * one that answered */
	uint64_t connect_timeout_ms;
	uint64_t timeout_ms;		/* bound on one call, beyond its wait */
	const char *key;		/* bearer key (a secret); NULL: none */
	const char *key_file;		/* where key came from, for messages */
	const char *cacert;		/* CA to verify an https:// gateway
					 * (PEM); NULL: the system's */
	const char *cert;		/* client certificate (PEM); NULL: none */
	const char *cert_key;		/* its private key; NULL: in cert */
};

/** What an answer means to fencectl, whatever the call. */
enum fg_outcome {
	FG_OK,			/* 2xx */
	FG_HELD,		/* 409 lock_held */
	FG_QUEUE_FULL,		/* 429 too_many_waiters */
	FG_LEASE_GONE,		/* 410 lease_expired */
	FG_REFUSED,		/* 400, 413, 431: the request is invalid */
	FG_UNAVAILABLE,		/* no answer (refused, timed out), or 5xx */
	FG_BAD_URL,		/* the gateway URL itself is unusable */
	FG_UNAUTHENTICATED,	/* 401: the gateway knows no principal by what
				 * was presented */
	FG_FORBIDDEN,		/* 403 forbidden: the principal lacks a right */
	FG_THROTTLED,		/* 429 too_many_failures: this address sent
				 * too many unknown keys */
	FG_TLS_UNVERIFIED,	/* the gateway's certificate did not verify */
	FG_TLS_FAILED,		/* the TLS handshake failed otherwise */
	FG_TLS_FILES,		/* --cacert, --cert or --key is unusable */
	FG_UNEXPECTED,		/* anything else */
	FG_NOMEM,
};

struct fg_req {
	const struct fg_conn *cl;	/* borrowed: outlives the call */
	CURL *easy;
	struct curl_slist *headers;
	const char *method;
	char *path;		/* below the gateway's URL */
	char *url;		/* the gateway being tried + path */
	size_t at;		/* the index of that gateway */
	size_t tried;		/* gateways tried by this call */
	char *body;
	char *resp;
	size_t resp_len;
	char errbuf[CURL_ERROR_SIZE];
	CURLcode result;
	long status;		/* 0: no HTTP answer */
	bool answered;		/* some gateway gave an HTTP answer (any
				 * status) to this call */
	json_t *json;		/* the answer, when it is a JSON object */
	uint64_t sent_ms;	/* monotonic: when the call started */
	uint64_t done_ms;	/* monotonic: when it ended */
	uint64_t timeout_ms;	/* the bound on each attempt */
};

/** The gateway calls go to first. */
const char *fg_conn_base(const struct fg_conn *cl);

/** Calls go first to the gateway after the current one from now on. */
void fg_conn_next(const struct fg_conn *cl);

/**
 * Prepares a call: method (a string constant) on path (below the gateway's
 * URL, from lockurl.h with base ""), with body (borrowed; JSON, or NULL for
 * none) and a Fence-Lease header when lease is not NULL, and the client's
 * identity (see struct fg_conn). timeout_ms bounds each attempt (0: the
 * client's timeout). path is owned by r from here on, and freed by
 * fg_req_finish() even when this fails. 0, or -1 when out of memory (r
 * can still be finished).
 */
int fg_req_init(struct fg_req *r, const struct fg_conn *cl,
		const char *method, char *path, json_t *body, const char *lease,
		uint64_t timeout_ms);

/** Adds one header line ("Name: value") to a prepared call; the copy r
 *  keeps is wiped when r is finished. 0, or -1 when out of memory. */
int fg_req_add_header(struct fg_req *r, const char *line);

/** Frees everything r holds. Accepts a zeroed or failed r. */
void fg_req_finish(struct fg_req *r);

/** Runs the call to its end, on each gateway in turn as needed (blocking;
 *  signals are not looked at). */
void fg_req_perform(struct fg_req *r);

/**
 * Runs the call to its end, on each gateway in turn as needed, or until a
 * signal that ends fencectl arrives on sigfd (see sigs.h; -1: none). 0
 * when the call ended, else the signal (the call is then abandoned, its
 * connection closed).
 */
int fg_req_run(struct fg_req *r, int sigfd);

/** For a caller that drives r->easy in its own multi handle (one attempt,
 *  on the current gateway): mark the start, and record the end with
 *  curl's result. */
void fg_req_started(struct fg_req *r);
void fg_req_complete(struct fg_req *r, CURLcode result);

enum fg_outcome fg_req_outcome(const struct fg_req *r);

/** --verbose: "METHOD URL: HTTP 200 (3ms)" or curl's error, on stderr.
 *  The URL is shown without any user or password it carries. */
void fg_req_note(const struct fg_req *r);

/**
 * What happened, for people: "410 lease_expired: this lease does not hold
 * the lock", "Failed to connect to 127.0.0.1 port 8080 ...: Connection
 * refused", "the gateway does not accept this key (from FILE)". Never
 * the key itself. Written into buf[len], which is returned.
 */
const char *fg_req_describe(const struct fg_req *r, char *buf, size_t len);

/** What an answer was, however it was had (a call of this file, or of
 *  the client library): what fg_result_outcome() and
 *  fg_result_describe() read. */
struct fg_result {
	int result;		/* CURLcode */
	long status;		/* 0: no HTTP answer */
	const char *code;	/* the answer's "error", or NULL */
	const char *message;	/* the answer's "message", or NULL */
	const char *errtext;	/* curl's error text, or NULL */
	const char *url;	/* the gateway tried last (+ path), or NULL */
	size_t tried;		/* gateways tried */
	long retry_after;	/* seconds; -1: not known */
};

enum fg_outcome fg_result_outcome(const struct fg_result *x);

/** fg_req_describe() of x: for people, never a key. */
const char *fg_result_describe(const struct fg_conn *cl,
			       const struct fg_result *x, char *buf,
			       size_t len);

/** The exit status for an outcome that ends a subcommand. */
int fg_outcome_exit(enum fg_outcome o);

/** Integer field of r->json in [0, 2^53): 0, or -1 when absent or not. */
int fg_req_uint(const struct fg_req *r, const char *key, uint64_t *out);

/** String field of r->json, or NULL. */
const char *fg_req_str(const struct fg_req *r, const char *key);

#endif
