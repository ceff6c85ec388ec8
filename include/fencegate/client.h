/*
 * fencegate/client.h - libfencegate-client: hold a fencegate lock and write
 * under it, from C.
 *
 * A client (struct fg_client) talks to one or more gateways (tried in
 * turn; the one that answered last is asked first) and holds at most one
 * lease at a time. Its use is scoped: fg_client_acquire() takes the lock
 * (waiting as long as asked), the caller does its writes stamped with the
 * grant's sequencer (fg_client_stamp()), and fg_client_release() gives
 * the lock back, saying whether the lease was lost meanwhile.
 *
 * Renewal. One renewer per client renews the lease every third of its
 * TTL. Its deadlines come from the gateway's answers alone: the lease is
 * taken to end ttl_ms (as answered) after the moment the granting or
 * renewing request was sent, on CLOCK_MONOTONIC; the gateway's wall
 * clock is never compared with this machine's. A renewal that fails for
 * a transient reason (no connection, a timeout, a 5xx) is tried again on
 * every gateway in turn (each attempt bounded by its share of what is
 * left of the lease), after a short back-off, until the lease's own
 * end; a definite answer about the lease (409, 410, 400, 403) ends it at
 * once. The lease is lost then, or when its end passes with no renewal
 * having succeeded, or when max_hold_ms has passed.
 *
 * Loss is signalled at once: fg_client_lease_lost() (an atomic flag and
 * the lease's end, readable from any thread) turns true, and the on_lost
 * callback of the acquire runs once, on the thread that found the loss.
 * Once it is lost, fg_client_stamp() refuses to stamp; fg_client_check()
 * is the gate to call before every write.
 *
 * No hidden threads. The renewer is either:
 *  - fg_client_tick(), called by the program's event loop: it does what is
 *    due now and returns the milliseconds until it must be called again.
 *    A renewal it makes is a blocking libcurl call, bounded by the
 *    client's timeout and by the lease's end; a loop that cannot afford
 *    that pause should run the renewer thread instead; or
 *  - fg_client_start_renewer(): one pthread that calls the tick for the
 *    client, until fg_client_stop_renewer() or fg_client_destroy().
 *
 * Waiting. fg_client_acquire() blocks for as long as its wait: calls of
 * at most 300 s each (the gateway's bound), each first finding a gateway
 * that answers (GET livez, so that a stopped one cannot hold the wait),
 * asked again after 5xx or no answer with a back-off of 250 ms doubling
 * to 5 s; while no gateway answers at all, for at most unreachable_ms. A
 * cancel fd cuts it short. An event loop tries once (wait_ms 0) or waits
 * on a thread of its own.
 *
 * Threads. fg_client_lease_lost(), fg_client_check(), fg_client_stamp(),
 * fg_client_token(), fg_client_s3_session_token(), fg_client_s3_prepare()
 * and fg_client_tick() may be called from any thread at any time. Every
 * other call belongs to one thread at a time (the caller's).
 *
 * Errors. Every call that can fail returns 0 (FG_CLIENT_OK) or a negative
 * enum fg_client_err; the contract's error codes (docs/api.md) each have
 * one. fg_client_last_error() tells the HTTP status, the code string and
 * the gateway's message of the caller's last failed call. A secret (a
 * key, a lease) is never part of a message.
 */
#ifndef FENCEGATE_CLIENT_H
#define FENCEGATE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fg_client;
/* libcurl's types, declared as curl/curl.h declares them */
typedef void CURL;
struct curl_slist;

enum fg_client_err {
	FG_CLIENT_OK = 0,
	/* the client's own */
	FG_CLIENT_NOT_ACQUIRED = -1,	/* not granted within the wait */
	FG_CLIENT_LEASE_LOST = -2,	/* the client's lease was lost */
	FG_CLIENT_UNAVAILABLE = -3,	/* no gateway answered (connection,
					 * timeout), or all answered 5xx */
	FG_CLIENT_NOMEM = -4,
	FG_CLIENT_INVALID = -5,		/* bad argument; no lease held; one
					 * held already */
	FG_CLIENT_PROTOCOL = -6,	/* an answer the client does not
					 * understand */
	FG_CLIENT_TLS = -7,		/* TLS failed, or its files are bad */
	FG_CLIENT_CANCELLED = -8,	/* the acquire's cancel hook said stop */
	/* the contract's codes (docs/api.md, Error codes) */
	FG_CLIENT_BAD_LOCK_NAME = -20,
	FG_CLIENT_BAD_REQUEST = -21,
	FG_CLIENT_BAD_PATH = -22,
	FG_CLIENT_BAD_DESTINATION = -23,
	FG_CLIENT_SUBTREE_UNGUARDED = -24,
	FG_CLIENT_PAYLOAD_TOO_LARGE = -25,
	FG_CLIENT_NOT_FOUND = -26,
	FG_CLIENT_METHOD_NOT_ALLOWED = -27,
	FG_CLIENT_LOCK_HELD = -28,
	FG_CLIENT_LEASE_EXPIRED = -29,
	FG_CLIENT_TOO_MANY_WAITERS = -30,
	FG_CLIENT_TOKEN_REQUIRED = -31,
	FG_CLIENT_MALFORMED_TOKEN = -32,
	FG_CLIENT_FORGED_TOKEN = -33,
	FG_CLIENT_WRONG_LOCK = -34,
	FG_CLIENT_WRONG_MODE = -35,
	FG_CLIENT_STALE_TOKEN = -36,
	FG_CLIENT_LOCK_STORE_UNAVAILABLE = -37,
	FG_CLIENT_UPSTREAM_UNAVAILABLE = -38,
	FG_CLIENT_UPSTREAM_TIMEOUT = -39,
	FG_CLIENT_INTERNAL = -40,
	FG_CLIENT_UNAUTHENTICATED = -41,
	FG_CLIENT_FORBIDDEN = -42,
	FG_CLIENT_TOO_MANY_FAILURES = -43,
	FG_CLIENT_SHUTTING_DOWN = -44,
	FG_CLIENT_NOT_READY = -45,
};

/** What the caller's last failed call met. */
struct fg_client_error {
	int err;		/* enum fg_client_err */
	long status;		/* HTTP status; 0 when no answer came */
	char code[40];		/* the answer's "error" ("lease_expired"), or
				 * the client's own name ("unavailable") */
	char message[512];	/* the gateway's message, or what failed */
	bool coded;		/* code came from the answer's "error" */
	int transport;		/* libcurl's CURLcode; 0: an HTTP answer */
	size_t tried;		/* gateways tried by the call */
	bool answered;		/* some gateway gave an HTTP answer */
	bool has_retry_after;	/* a lock-delay refusal said when */
	uint64_t retry_after_ms;
};

/** One HTTP attempt, as told to on_attempt (for a program's own log). */
struct fg_client_attempt {
	const char *method;
	const char *url;	/* as configured, userinfo included */
	long status;		/* 0: no answer */
	const char *error;	/* libcurl's text when no answer, else NULL */
	uint64_t ms;
	bool next;		/* the call passes to the next gateway now */
};

/** The code string of err ("stale_token", "not_acquired"). Static. */
const char *fg_client_code(int err);

/** The enum of a contract code string; FG_CLIENT_PROTOCOL when unknown.
 *  For the answers of fenced writes, which the caller reads itself. */
int fg_client_err_of_code(const char *code);

/** How the client reaches the gateways. Strings are copied. */
struct fg_client_opts {
	const char *gateways;		/* comma list of base URLs (at most
					 * 16), e.g. "http://h1:8080,http://h2:8080" */
	const char *key;		/* bearer key; NULL: none */
	const char *cacert;		/* CA (PEM) for https://; NULL: the
					 * system's. Verification is always on */
	const char *cert;		/* client certificate (PEM); NULL: none */
	const char *cert_key;		/* its key (PEM); NULL: in cert */
	uint64_t timeout_ms;		/* bound on one call to one gateway,
					 * beyond the wait it asks for;
					 * 0: 10000 */
	uint64_t connect_timeout_ms;	/* 0: the smaller of timeout and 5000 */
	const char *user_agent;		/* NULL: "libfencegate-client" */
	size_t first_gateway;		/* index asked first (0: the first) */
	/* told of every attempt, on the thread that made it; NULL: none.
	 * It must not call into the client. */
	void (*on_attempt)(void *arg, const struct fg_client_attempt *a);
	void *on_attempt_arg;
};

/** Makes a client: 0 with *out, or an error (bad options, no memory). */
int fg_client_create(const struct fg_client_opts *opts, struct fg_client **out);

/** Stops the renewer thread, forgets (does not release) a lease still
 *  held, frees everything. Accepts NULL. */
void fg_client_destroy(struct fg_client *c);

/** The caller's last failure (valid until the next call on c). */
const struct fg_client_error *fg_client_last_error(const struct fg_client *c);

/** Why a lease was lost (the on_lost callback's argument). */
enum fg_client_loss {
	FG_CLIENT_LOSS_ANSWER = 1,	/* a renewal was answered 409/410/... */
	FG_CLIENT_LOSS_EXPIRED = 2,	/* its end passed with no renewal */
	FG_CLIENT_LOSS_MAX_HOLD = 3,	/* max_hold_ms passed (given back) */
};

/** What a renewal attempt came to (the on_renewal hook's argument). */
struct fg_client_renewal {
	bool ok;
	unsigned failures;	/* failed in a row: before this success, or
				 * with this failure */
	uint64_t ttl_ms;	/* the lease's length as now known */
	uint64_t left_ms;	/* until the lease's end as now known */
	bool final;		/* this answer ends the lease (409, 410...) */
	const struct fg_client_error *error;	/* on failure */
};

/** Told of a loss, once, on the thread that found it (the tick's caller or
 *  the renewer thread). It may read the client's flag and token; it must
 *  not call fg_client_release() or fg_client_destroy(). */
typedef void fg_client_lost_cb(struct fg_client *c, enum fg_client_loss why,
			       void *arg);

#define FG_CLIENT_WAIT_FOREVER UINT64_MAX
#define FG_CLIENT_UNREACHABLE_DEFAULT_MS 30000

struct fg_client_acquire_opts {
	uint64_t ttl_ms;		/* 0: the gateway's default (30 s) */
	uint64_t wait_ms;		/* 0: try once; FG_CLIENT_WAIT_FOREVER */
	bool shared;
	const char *owner;		/* NULL: none */
	const char *value;		/* NULL: none (election: the value) */
	bool lock_delay_set;		/* lock_delay_ms given */
	uint64_t lock_delay_ms;
	uint64_t unreachable_ms;	/* a wait that finds no gateway
					 * reachable keeps trying every one in
					 * turn at most this long, then fails
					 * FG_CLIENT_UNAVAILABLE; 0: 30 s */
	uint64_t max_hold_ms;		/* 0: none; else the hold ends itself
					 * (given back, reported as lost) */
	fg_client_lost_cb *on_lost;	/* NULL: none */
	void *on_lost_arg;
	/* told once when a wait first finds no gateway reachable, with what
	 * the last one said; NULL: not told */
	void (*on_unreachable)(struct fg_client *c, const char *why,
			       void *arg);
	void *on_unreachable_arg;
	/* told of every failure a wait goes on after (no gateway answered,
	 * a 5xx, a full queue), with what it was; NULL: not told */
	void (*on_retry)(struct fg_client *c, const struct fg_client_error *e,
			 void *arg);
	void *on_retry_arg;
	/* told of every renewal's outcome, on the renewing thread; it must
	 * not call into the client. NULL: not told */
	void (*on_renewal)(struct fg_client *c,
			   const struct fg_client_renewal *r, void *arg);
	void *on_renewal_arg;
	/* re-entry: the lease of a grant that holds the lock; NULL: new */
	const char *lease;
	/* a wait that can be cut short: when cancel_fd becomes readable,
	 * cancel(cancel_arg) is asked, and true ends the acquire with
	 * FG_CLIENT_CANCELLED (the call's connection closed: the gateway
	 * takes the waiter out of its queue). cancel NULL: not used */
	int cancel_fd;
	bool (*cancel)(void *arg);
	void *cancel_arg;
};

/**
 * Takes lock `name` (opts NULL: defaults, try once). 0: held, renewed from
 * now on by the tick or the renewer thread. FG_CLIENT_NOT_ACQUIRED when it
 * was not granted within the wait (the caller's body must not run then);
 * FG_CLIENT_UNAVAILABLE when no gateway was reachable for unreachable_ms
 * (or, trying once, at all); FG_CLIENT_INVALID when a lease is held
 * already; another error from the answer. A full queue (429
 * too_many_waiters) is FG_CLIENT_NOT_ACQUIRED too, its code kept in
 * fg_client_last_error(). A 200 that carries a lease but is not a whole
 * grant is given back before the error returns. A grant whose wait took more
 * than a third of its TTL is renewed at once, so that its end is known.
 */
int fg_client_acquire(struct fg_client *c, const char *name,
		      const struct fg_client_acquire_opts *opts);

/* fg_client_release() flags */
#define FG_CLIENT_RELEASE_IGNORE_LOST 1u	/* a lost lease is not an error */

/**
 * Gives the lease back. While no gateway can serve it (unreachable, a 5xx
 * such as a Redis stall) it is asked again, with a back-off of 100 ms
 * doubling to 1 s, until the lease's end or the client's timeout_ms,
 * whichever comes first; an answer about the lease ends it at once (a
 * 410 after an attempt answered 503 most likely means that attempt ran
 * once Redis answered again: the lease is gone, reported as a loss).
 * 0 (also when the lease ran out meanwhile: the lock is free);
 * FG_CLIENT_LEASE_LOST when it had been lost (nothing is sent then) unless
 * FG_CLIENT_RELEASE_IGNORE_LOST; another error when the gateway could not
 * be told (the lease then runs out by itself). The client holds nothing
 * afterwards, whatever the result.
 */
int fg_client_release(struct fg_client *c, unsigned flags);

/**
 * Whether the lease held (or last held) was lost: the flag, or the lease's
 * end having passed on the monotonic clock, whether or not a tick ran
 * since to find it. Any thread; it never blocks.
 */
bool fg_client_lease_lost(const struct fg_client *c);

/**
 * The gate before every write made under the lease: 0 while the lease
 * holds; FG_CLIENT_LEASE_LOST once it was lost or its end passed, a
 * passed end being marked lost here (on_lost runs, on this thread);
 * FG_CLIENT_INVALID when no lease is held. Any thread.
 */
int fg_client_check(struct fg_client *c);

/** Whether a lease is held (lost or not) since the last acquire. */
bool fg_client_holding(const struct fg_client *c);

/** The grant's fencing token; 0 when none is held. Any thread. */
uint64_t fg_client_token(const struct fg_client *c);

/** The grant's lease (a secret: the only proof of ownership; valid until
 *  release); NULL when none. For a program that hands it on itself. */
const char *fg_client_lease(const struct fg_client *c);

/** The grant's whole answer, JSON text (it holds the lease); NULL. */
const char *fg_client_grant_json(const struct fg_client *c);

/** The index (in the order given) of the gateway asked first now. */
size_t fg_client_gateway_index(const struct fg_client *c);

/** The grant's sequencer (valid until release); NULL when none. */
const char *fg_client_sequencer(const struct fg_client *c);

/**
 * Stamps the sequencer on a caller's request: in *headers, a
 * `Fencing-Token:` line replaces any there (or is added), and the list is
 * set as h's CURLOPT_HTTPHEADER. The list stays the caller's (free it with
 * curl_slist_free_all() after the transfer). FG_CLIENT_LEASE_LOST once the
 * lease is lost (a lease whose end has passed counts: it is marked lost
 * here), FG_CLIENT_INVALID when none is held; *headers is then untouched.
 * Any thread.
 */
int fg_client_stamp(struct fg_client *c, CURL *h, struct curl_slist **headers);

/* ---- S3 mode (docs/s3.md): the sequencer in the session token ----- */

/** Room for any session token fg_client_s3_session_token() gives, its
 *  NUL included (what `fencectl lock --s3` bounds AWS_SESSION_TOKEN to). */
#define FG_CLIENT_S3_SESSION_TOKEN_MAX 8192

/**
 * Joins sequencer to an existing session token as `fencectl lock --s3`
 * does: "EXISTING,SEQUENCER" when existing holds sequencers already (it
 * starts with "fg1.": nested locks, one request that changes what both
 * guard), else SEQUENCER alone (any other token is replaced); existing
 * NULL counts as none. Into buf (cap bytes); FG_CLIENT_INVALID when it
 * does not fit in cap or in FG_CLIENT_S3_SESSION_TOKEN_MAX.
 */
int fg_client_s3_session_token_join(const char *existing,
				    const char *sequencer, char *buf,
				    size_t cap);

/**
 * The S3 session token of the held lease, exactly what `fencectl lock
 * --s3` exports as AWS_SESSION_TOKEN for it: the sequencer joined (as
 * above) to the AWS_SESSION_TOKEN of this process's environment. Into
 * buf (cap bytes; FG_CLIENT_S3_SESSION_TOKEN_MAX always suffices). It is
 * a secret while the lease lasts, as the sequencer is. FG_CLIENT_LEASE_LOST
 * once the lease is lost (its end having passed counts), FG_CLIENT_INVALID
 * when none is held or it does not fit; buf is then "". Any thread that
 * does not change the environment meanwhile (getenv()).
 */
int fg_client_s3_session_token(struct fg_client *c, char *buf, size_t cap);

/** What an S3 request through a gateway in S3 mode is signed with. */
struct fg_client_s3 {
	const char *key_id;	/* the access key id the gateway issued */
	const char *secret;	/* its secret */
	const char *region;	/* the gateway's s3-region, e.g. "us-east-1" */
	/* x-amz-content-sha256: the body's SHA-256 (64 lowercase hex
	 * digits), signed, and checked by the store against the bytes, or
	 * "UNSIGNED-PAYLOAD"; NULL: the caller's own x-amz-content-sha256
	 * line when its list has one, else UNSIGNED-PAYLOAD (libcurl 7.88
	 * sends no such header of its own, and S3 stores need one) */
	const char *payload_sha256;
};

/**
 * Prepares the caller's handle h for a fenced S3 request through a
 * gateway in S3 mode, signed by libcurl itself (CURLOPT_AWS_SIGV4
 * "aws:amz:REGION:s3", CURLOPT_USERPWD "KEY_ID:SECRET"): in *headers an
 * `x-amz-security-token:` line with fg_client_s3_session_token()
 * replaces any there (or is added), an `x-amz-content-sha256:` line is
 * set as s3 says, and the list is set as h's CURLOPT_HTTPHEADER (it
 * stays the caller's: curl_slist_free_all() after the transfer). libcurl
 * signs every line of the list, so the list must hold only headers that
 * are sent as they stand, "Name: value": a "Name:" line that removes a
 * header (such as "Expect:") or a "Name;" line would make the signature
 * fail (403 SignatureDoesNotMatch) and is refused. The URL is path-style
 * (GATEWAY/BUCKET/KEY) with the key as S3 signs it (each byte outside
 * [A-Za-z0-9-._~/] percent-encoded) and no query string, or one already
 * in canonical order (libcurl 7.88 signs it as it stands).
 * FG_CLIENT_LEASE_LOST once the lease is lost, FG_CLIENT_INVALID when none
 * is held, s3 is incomplete or the list holds such a line; *headers and h
 * are then untouched.
 * Any thread, as fg_client_s3_session_token().
 */
int fg_client_s3_prepare(struct fg_client *c, CURL *h,
			 struct curl_slist **headers,
			 const struct fg_client_s3 *s3);

/** Monotonic milliseconds, the clock fg_client_tick() takes. */
uint64_t fg_client_now_ms(void);

/**
 * Does what the lease needs at `now` (fg_client_now_ms()): a renewal when
 * one is due (blocking, bounded by the timeout and the lease's end), the
 * loss when its end or max_hold_ms has passed. Returns the milliseconds
 * until it must be called again, or -1 when no lease is held (call it
 * again after the next acquire). Any thread; ticks are serialised.
 */
int64_t fg_client_tick(struct fg_client *c, uint64_t now);

/** Starts the renewer thread (once per client). 0 or an error. */
int fg_client_start_renewer(struct fg_client *c);

/** Stops it and waits for it (a renewal in flight ends first). */
void fg_client_stop_renewer(struct fg_client *c);

/* ---- election: campaign, proclaim, observe, resign ---------------- */

/** Campaign: an acquire with `value`, waiting as opts says. */
int fg_client_campaign(struct fg_client *c, const char *name,
		       const char *value,
		       const struct fg_client_acquire_opts *opts);

/** Proclaim: renews the held lease with a new value. */
int fg_client_proclaim(struct fg_client *c, const char *value);

/** Resign: fg_client_release(c, 0). */
int fg_client_resign(struct fg_client *c);

/** A lock's state, as inspect and observe answer it. */
struct fg_client_state {
	bool held;
	bool shared;		/* mode, while held */
	bool has_token;		/* token is known (else null) */
	uint64_t token;
	uint64_t holders, waiters;
	uint64_t ttl_ms, delay_ms;
	char *value;		/* owned; NULL when none */
	char *owner;		/* owned; NULL when none */
};

/** Frees what s holds; accepts a zeroed s. */
void fg_client_state_finish(struct fg_client_state *s);

/** Inspect: the lock's state now into *s (caller finishes it). */
int fg_client_inspect(struct fg_client *c, const char *name,
		      struct fg_client_state *s);

/**
 * Observe: waits at most wait_ms (<= 300000) for the lock to stop being
 * held under token `after` (after 0: for any change of held or token),
 * then answers its state into *s.
 */
int fg_client_observe(struct fg_client *c, const char *name, uint64_t after,
		      uint64_t wait_ms, struct fg_client_state *s);

/** One lock of a listing. */
struct fg_client_entry {
	char *name;
	bool held, shared, has_token;
	uint64_t token, ttl_ms, delay_ms;
	size_t holders, waiters;	/* as listed (a page bounds them) */
};

struct fg_client_list {
	struct fg_client_entry *locks;	/* owned */
	size_t n;
	char *cursor;			/* the next page's; NULL: the last */
};

void fg_client_list_finish(struct fg_client_list *l);

/** ls: one page of the locks whose names start with prefix (NULL: all)
 *  that are held, waited for or in lock-delay; cursor NULL for the first
 *  page; limit 0 for the gateway's default. */
int fg_client_ls(struct fg_client *c, const char *prefix, const char *cursor,
		 unsigned limit, struct fg_client_list *out);

/** Break: ends the grant with this token, whoever holds it (needs
 *  admin:). FG_CLIENT_STALE_TOKEN when it is not the current grant's. */
int fg_client_break(struct fg_client *c, const char *name, uint64_t token);

#ifdef __cplusplus
}
#endif

#endif
