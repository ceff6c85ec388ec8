/*
 * client.c - the client, its one lease and its renewer (see
 * fencegate/client.h).
 *
 * Invariant: the lease's end (deadline) only ever comes from an answer of
 * the gateway: ttl_ms counted from when the granting or renewing request
 * was sent, on the monotonic clock. Once `lost` is set it stays set until
 * the next acquire, and on_lost has run exactly once for it. Ticks are
 * serialised by tick_mu (a release waits for a renewal in flight); the
 * lease's fields are read and written under mu, never across a call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "call.h"

#define DEFAULT_TIMEOUT_MS 10000
#define CONNECT_MAX_MS 5000
#define RENEW_MIN_INTERVAL_MS 50
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define RELEASE_BACKOFF_MIN_MS 100
#define RELEASE_BACKOFF_MAX_MS 1000

struct fg_client {
	struct fg__net net;
	CURL *easy;		/* the caller's calls */
	CURL *tick_easy;	/* renewals */
	struct fg_client_error err;

	pthread_mutex_t mu;	/* the lease's fields below */
	pthread_mutex_t tick_mu;
	bool holding;
	char *path;		/* the lock's URL path */
	char *lease;		/* secret */
	char *sequencer;
	char *grant_json;	/* holds the lease: wiped */
	atomic_uint_fast64_t token;
	atomic_bool lost;
	uint64_t ttl_ms;
	/* atomic, written under mu: fg_client_lease_lost() reads it
	 * without it. 0: no lease */
	atomic_uint_fast64_t deadline;	/* monotonic: the lease's end */
	uint64_t next_renew;
	uint64_t hold_end;	/* max_hold; 0: none */
	uint64_t backoff;
	fg_client_lost_cb *on_lost;
	void *on_lost_arg;
	void (*on_renewal)(struct fg_client *c,
			   const struct fg_client_renewal *r, void *arg);
	void *on_renewal_arg;
	unsigned failures;	/* renewals failed in a row */
	struct fg_client_error renew_err;	/* the tick's last failure */

	pthread_mutex_t thr_mu;	/* the renewer thread's flags */
	pthread_cond_t thr_cv;
	pthread_t thr;
	bool thr_running;
	bool thr_stop;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

uint64_t fg_client_now_ms(void)
{
	return fg__now_ms();
}

const struct fg_client_error *fg_client_last_error(const struct fg_client *c)
{
	return &c->err;
}

static int fail(struct fg_client *c, int err, const struct fg__answer *a,
		const char *what)
{
	fg__error_set(&c->err, err, a, what);
	return err;
}

static char *dup_or_null(const char *s, bool *bad)
{
	char *d;

	if (!s)
		return NULL;
	if (!(d = strdup(s)))
		*bad = true;
	return d;
}

static int add_gateways(struct fg__net *net, const char *list)
{
	const char *p = list;

	if (!p || !*p)
		return -1;
	for (;;) {
		size_t len = strcspn(p, ",");
		while (len > 0 && p[len - 1] == '/')
			len--;
		if (len == 0 || net->n == FG__GATEWAYS_MAX ||
		    (strncmp(p, "http://", 7) != 0 &&
		     strncmp(p, "https://", 8) != 0))
			return -1;
		if (!(net->gw[net->n] = strndup(p, len)))
			return -1;
		net->n++;
		p += strcspn(p, ",");
		if (!*p)
			return 0;
		p++;
	}
}

int fg_client_create(const struct fg_client_opts *o, struct fg_client **out)
{
	struct fg_client *c;
	pthread_condattr_t ca;
	bool bad = false;

	*out = NULL;
	if (!o || !o->gateways)
		return FG_CLIENT_INVALID;
	pthread_once(&curl_once, curl_init);
	if (!(c = calloc(1, sizeof(*c))))
		return FG_CLIENT_NOMEM;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->tick_mu, NULL);
	pthread_mutex_init(&c->thr_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->thr_cv, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&c->token, 0);
	atomic_init(&c->lost, false);
	atomic_init(&c->deadline, 0);
	atomic_init(&c->net.current, 0);
	if (add_gateways(&c->net, o->gateways) < 0) {
		fg_client_destroy(c);
		return FG_CLIENT_INVALID;
	}
	atomic_store(&c->net.current, o->first_gateway % c->net.n);
	c->net.timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->net.connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms :
			    c->net.timeout_ms < CONNECT_MAX_MS ?
			    c->net.timeout_ms : CONNECT_MAX_MS;
	c->net.user_agent = dup_or_null(o->user_agent, &bad);
	c->net.on_attempt = o->on_attempt;
	c->net.on_attempt_arg = o->on_attempt_arg;
	c->net.cacert = dup_or_null(o->cacert, &bad);
	c->net.cert = dup_or_null(o->cert, &bad);
	c->net.cert_key = dup_or_null(o->cert_key, &bad);
	if (o->key) {
		size_t n = strlen("Authorization: Bearer ") + strlen(o->key) + 1;
		if ((c->net.auth_header = malloc(n)))
			snprintf(c->net.auth_header, n,
				 "Authorization: Bearer %s", o->key);
		else
			bad = true;
	}
	c->easy = curl_easy_init();
	c->tick_easy = curl_easy_init();
	if (bad || !c->easy || !c->tick_easy) {
		fg_client_destroy(c);
		return FG_CLIENT_NOMEM;
	}
	*out = c;
	return FG_CLIENT_OK;
}

static void free_secret(char **p)
{
	if (*p) {
		fg__wipe(*p, strlen(*p));
		free(*p);
		*p = NULL;
	}
}

/* Forgets the lease; mu held. */
static void clear_lease(struct fg_client *c)
{
	c->holding = false;
	free_secret(&c->lease);
	free(c->path);
	c->path = NULL;
	free(c->sequencer);
	c->sequencer = NULL;
	free_secret(&c->grant_json);
	atomic_store(&c->token, 0);
	atomic_store(&c->deadline, 0);
	c->on_lost = NULL;
	c->on_renewal = NULL;
}

void fg_client_destroy(struct fg_client *c)
{
	if (!c)
		return;
	fg_client_stop_renewer(c);
	pthread_mutex_lock(&c->mu);
	clear_lease(c);
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < c->net.n; i++)
		free(c->net.gw[i]);
	free_secret(&c->net.auth_header);
	free(c->net.cacert);
	free(c->net.user_agent);
	free(c->net.cert);
	free(c->net.cert_key);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->tick_easy)
		curl_easy_cleanup(c->tick_easy);
	pthread_cond_destroy(&c->thr_cv);
	pthread_mutex_destroy(&c->thr_mu);
	pthread_mutex_destroy(&c->tick_mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

bool fg_client_lease_lost(const struct fg_client *c)
{
	struct fg_client *m = (struct fg_client *)c;
	uint64_t end = atomic_load(&m->deadline);

	if (atomic_load(&m->lost))
		return true;
	/* a loop stalled past the lease's end, no tick having run to find
	 * it, is told all the same */
	return end && fg__now_ms() >= end;
}

static bool lose_unlock(struct fg_client *c, enum fg_client_loss why);

/* With mu held: 0 while a lease is held, not lost and not past its end,
 * and mu is still held; otherwise the error, and mu is released. A lease
 * whose end passed is lost here, whether or not a tick ran: the one gate
 * of fg_client_check() and of every fenced request. */
static int gate_locked(struct fg_client *c)
{
	if (!c->holding) {
		pthread_mutex_unlock(&c->mu);
		return FG_CLIENT_INVALID;
	}
	if (!atomic_load(&c->lost) && fg__now_ms() >= c->deadline) {
		lose_unlock(c, FG_CLIENT_LOSS_EXPIRED);
		return FG_CLIENT_LEASE_LOST;
	}
	if (atomic_load(&c->lost)) {
		pthread_mutex_unlock(&c->mu);
		return FG_CLIENT_LEASE_LOST;
	}
	return FG_CLIENT_OK;
}

int fg_client_check(struct fg_client *c)
{
	pthread_mutex_lock(&c->mu);
	int e = gate_locked(c);
	if (e == FG_CLIENT_OK)
		pthread_mutex_unlock(&c->mu);
	return e;
}

bool fg_client_holding(const struct fg_client *c)
{
	struct fg_client *m = (struct fg_client *)c;
	bool h;

	pthread_mutex_lock(&m->mu);
	h = m->holding;
	pthread_mutex_unlock(&m->mu);
	return h;
}

uint64_t fg_client_token(const struct fg_client *c)
{
	return atomic_load(&((struct fg_client *)c)->token);
}

const char *fg_client_sequencer(const struct fg_client *c)
{
	return c->holding ? c->sequencer : NULL;
}

const char *fg_client_lease(const struct fg_client *c)
{
	return c->holding ? c->lease : NULL;
}

const char *fg_client_grant_json(const struct fg_client *c)
{
	return c->holding ? c->grant_json : NULL;
}

size_t fg_client_gateway_index(const struct fg_client *c)
{
	return atomic_load(&((struct fg_client *)c)->net.current) % c->net.n;
}

/*
 * Marks the lease lost (mu held on entry, released here); runs on_lost
 * once, outside mu. Returns whether this call was the one that lost it.
 */
static bool lose_unlock(struct fg_client *c, enum fg_client_loss why)
{
	fg_client_lost_cb *cb = NULL;
	void *arg = NULL;
	bool was = atomic_exchange(&c->lost, true);

	if (!was) {
		cb = c->on_lost;
		arg = c->on_lost_arg;
	}
	pthread_mutex_unlock(&c->mu);
	if (cb)
		cb(c, why, arg);
	return !was;
}

static uint64_t interval(uint64_t ttl)
{
	uint64_t i = ttl / 3;
	return i < RENEW_MIN_INTERVAL_MS ? RENEW_MIN_INTERVAL_MS : i;
}

static uint64_t next_backoff(uint64_t b)
{
	if (b < BACKOFF_MIN_MS)
		return BACKOFF_MIN_MS;
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

static char *renew_body(const char *lease, uint64_t ttl, const char *value)
{
	json_t *o = json_pack("{s:s, s:I}", "lease", lease, "ttl_ms",
			      (json_int_t)ttl);
	char *s = NULL;

	if (o && value && json_object_set_new(o, "value",
					      json_string(value)) < 0)
		goto out;
	if (o)
		s = json_dumps(o, JSON_COMPACT);
out:
	json_decref(o);
	return s;
}

/* A renewal answer that means the lease cannot be renewed any more. */
static bool definite(const struct fg__answer *a)
{
	return a->result == CURLE_OK &&
	       (a->status == 409 || a->status == 410 || a->status == 400 ||
		a->status == 403);
}

/* Milliseconds until the next thing due; mu held. */
static int64_t due_in(const struct fg_client *c, uint64_t now)
{
	uint64_t due = c->next_renew < c->deadline ? c->next_renew :
		       c->deadline;

	if (c->hold_end && c->hold_end < due)
		due = c->hold_end;
	return due > now ? (int64_t)(due - now) : 0;
}

/* Errors after which a give-back is sent again: no gateway could serve. */
static bool give_back_again(int err)
{
	return err == FG_CLIENT_UNAVAILABLE ||
	       err == FG_CLIENT_LOCK_STORE_UNAVAILABLE ||
	       err == FG_CLIENT_SHUTTING_DOWN || err == FG_CLIENT_INTERNAL ||
	       err == FG_CLIENT_NOT_READY;
}

/*
 * DELETEs lease on path with easy h, sent again with a back-off (100 ms
 * doubling to 1 s) while no gateway could serve it, until `end`
 * (monotonic); an answer about the lease (409, 410...) ends it. Returns the
 * last attempt's error, its answer in *a (caller: fg__answer_finish()).
 * Neither mu nor anything of the lease is used: the caller copies them.
 */
static int give_back(struct fg_client *c, CURL *h, const char *path,
		     const char *lease, uint64_t end, struct fg__answer *a)
{
	uint64_t backoff = 0;

	for (;;) {
		uint64_t now = fg__now_ms();
		uint64_t left = end > now ? end - now : 1;
		int err = fg__call(&c->net, h, "DELETE", path, NULL, lease,
				   NULL, left < c->net.timeout_ms ? left :
				   c->net.timeout_ms, a);

		if (!give_back_again(err))
			return err;
		backoff = backoff ? backoff * 2 : RELEASE_BACKOFF_MIN_MS;
		if (backoff > RELEASE_BACKOFF_MAX_MS)
			backoff = RELEASE_BACKOFF_MAX_MS;
		now = fg__now_ms();
		if (now + backoff >= end)
			return err;
		fg__answer_finish(a);
		fg__sleep(backoff, NULL);
	}
}

/* The max_hold end: the lease is given back (asked again while the
 * gateways cannot serve, until the lease's end) and reported lost. */
static void end_hold(struct fg_client *c, CURL *h)
{
	struct fg__answer a;
	char *lease = c->lease ? strdup(c->lease) : NULL;
	char *path = c->path ? strdup(c->path) : NULL;
	uint64_t end = c->deadline, now = fg__now_ms();

	/* the tick (and a stop of the renewer) waits for it: bounded by the
	 * client's timeout too, not by a long lease alone */
	if (end > now + c->net.timeout_ms)
		end = now + c->net.timeout_ms;
	lose_unlock(c, FG_CLIENT_LOSS_MAX_HOLD);
	if (lease && path) {
		give_back(c, h, path, lease, end, &a);
		fg__answer_finish(&a);
	}
	free_secret(&lease);
	free(path);
}

int64_t fg_client_tick(struct fg_client *c, uint64_t now)
{
	struct fg__answer a;
	char *body, *path;
	uint64_t timeout;
	int err;

	pthread_mutex_lock(&c->tick_mu);
	pthread_mutex_lock(&c->mu);
	if (!c->holding || atomic_load(&c->lost)) {
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		return -1;
	}
	if (c->hold_end && now >= c->hold_end) {
		end_hold(c, c->tick_easy);
		pthread_mutex_unlock(&c->tick_mu);
		return -1;
	}
	if (now >= c->deadline) {
		lose_unlock(c, FG_CLIENT_LOSS_EXPIRED);
		pthread_mutex_unlock(&c->tick_mu);
		return -1;
	}
	if (now < c->next_renew) {
		int64_t d = due_in(c, now);
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		return d;
	}
	body = renew_body(c->lease, c->ttl_ms, NULL);
	path = strdup(c->path);
	/* an answer after the lease's end is of no use, and every gateway
	 * gets its share of what is left, so that one that takes the
	 * connection but never answers cannot use it all */
	timeout = (c->deadline - now) / c->net.n;
	if (timeout < 200)
		timeout = c->deadline - now < 200 ? c->deadline - now : 200;
	if (timeout > c->net.timeout_ms)
		timeout = c->net.timeout_ms;
	pthread_mutex_unlock(&c->mu);

	if (!body || !path) {
		err = FG_CLIENT_NOMEM;
		memset(&a, 0, sizeof(a));
	} else {
		err = fg__call(&c->net, c->tick_easy, "PATCH", path, body, NULL,
			       NULL, timeout, &a);
	}
	if (body) {
		fg__wipe(body, strlen(body));
		free(body);
	}
	free(path);

	pthread_mutex_lock(&c->mu);
	uint64_t after = fg__now_ms();
	struct fg_client_renewal rn = { .ok = err == FG_CLIENT_OK };
	if (err == FG_CLIENT_OK) {
		uint64_t ttl;
		if (fg__json_uint(a.json, "ttl_ms", &ttl) == 0 && ttl > 0)
			c->ttl_ms = ttl;
		c->deadline = a.sent_ms + c->ttl_ms;
		c->next_renew = a.sent_ms + interval(c->ttl_ms);
		c->backoff = 0;
		rn.failures = c->failures;
		c->failures = 0;
	} else {
		fg__error_set(&c->renew_err, err, &a, "renew");
		rn.failures = ++c->failures;
		rn.error = &c->renew_err;
		rn.final = definite(&a);
	}
	rn.ttl_ms = c->ttl_ms;
	rn.left_ms = c->deadline > after ? c->deadline - after : 0;
	if (c->on_renewal) {
		/* told outside mu: it may read the flag or the token */
		void (*cb)(struct fg_client *, const struct fg_client_renewal *,
			   void *) = c->on_renewal;
		void *cb_arg = c->on_renewal_arg;
		pthread_mutex_unlock(&c->mu);
		cb(c, &rn, cb_arg);
		pthread_mutex_lock(&c->mu);
	}
	if (err == FG_CLIENT_OK) {
		/* done above */
	} else if (definite(&a)) {
		fg__answer_finish(&a);
		lose_unlock(c, FG_CLIENT_LOSS_ANSWER);
		pthread_mutex_unlock(&c->tick_mu);
		return -1;
	} else {
		/* every gateway was tried once in this tick: back off, but
		 * never past a third of the lease */
		c->backoff = next_backoff(c->backoff);
		uint64_t w = c->backoff < interval(c->ttl_ms) ? c->backoff :
			     interval(c->ttl_ms);
		c->next_renew = after + w;
		if (after >= c->deadline) {
			fg__answer_finish(&a);
			lose_unlock(c, FG_CLIENT_LOSS_EXPIRED);
			pthread_mutex_unlock(&c->tick_mu);
			return -1;
		}
	}
	fg__answer_finish(&a);
	int64_t d = due_in(c, after);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(&c->tick_mu);
	return d;
}

/* ---- acquire ------------------------------------------------------- */

static char *acquire_body(const struct fg_client_acquire_opts *o,
			  uint64_t wait_ms)
{
	json_t *j = json_object();
	char *s = NULL;

	if (!j)
		return NULL;
	if (json_object_set_new(j, "wait_ms", json_integer((json_int_t)wait_ms)) < 0 ||
	    (o->ttl_ms && json_object_set_new(j, "ttl_ms",
			json_integer((json_int_t)o->ttl_ms)) < 0) ||
	    (o->shared && json_object_set_new(j, "mode",
			json_string("shared")) < 0) ||
	    (o->owner && json_object_set_new(j, "owner",
			json_string(o->owner)) < 0) ||
	    (o->value && json_object_set_new(j, "value",
			json_string(o->value)) < 0) ||
	    (o->lock_delay_set && json_object_set_new(j, "lock_delay_ms",
			json_integer((json_int_t)o->lock_delay_ms)) < 0) ||
	    (o->lease && json_object_set_new(j, "lease",
			json_string(o->lease)) < 0))
		goto out;
	s = json_dumps(j, JSON_COMPACT);
out:
	json_decref(j);
	return s;
}

/* Takes the grant of a 200 into the client; mu not held. */
static int install(struct fg_client *c, const char *path,
		   const struct fg_client_acquire_opts *o,
		   const struct fg__answer *a)
{
	const char *lease = fg__json_str(a->json, "lease");
	const char *seq = fg__json_str(a->json, "sequencer");
	uint64_t token, ttl;

	if (!lease || !seq || fg__json_uint(a->json, "token", &token) < 0 ||
	    fg__json_uint(a->json, "ttl_ms", &ttl) < 0 || ttl == 0)
		return FG_CLIENT_PROTOCOL;
	pthread_mutex_lock(&c->mu);
	c->lease = strdup(lease);
	c->sequencer = strdup(seq);
	c->path = strdup(path);
	c->grant_json = json_dumps(a->json, JSON_COMPACT);
	if (!c->lease || !c->sequencer || !c->path || !c->grant_json) {
		clear_lease(c);
		pthread_mutex_unlock(&c->mu);
		return FG_CLIENT_NOMEM;
	}
	c->holding = true;
	atomic_store(&c->lost, false);
	atomic_store(&c->token, token);
	c->ttl_ms = ttl;
	/* granted no earlier than the request was sent */
	c->deadline = a->sent_ms + ttl;
	c->next_renew = a->sent_ms + interval(ttl);
	/* the hold counts from the grant, not from the wait in the queue */
	c->hold_end = o->max_hold_ms ? a->done_ms + o->max_hold_ms : 0;
	c->backoff = 0;
	c->on_lost = o->on_lost;
	c->on_lost_arg = o->on_lost_arg;
	c->on_renewal = o->on_renewal;
	c->on_renewal_arg = o->on_renewal_arg;
	c->failures = 0;
	pthread_mutex_unlock(&c->mu);
	return FG_CLIENT_OK;
}

/* A grant whose wait took long is renewed at once, so that its end is
 * known closely; 0, or the lease is gone (given back when it may not be). */
static int confirm(struct fg_client *c)
{
	struct fg__answer a;
	int err;

	pthread_mutex_lock(&c->mu);
	char *body = renew_body(c->lease, c->ttl_ms, NULL);
	char *path = strdup(c->path);
	pthread_mutex_unlock(&c->mu);
	if (!body || !path) {
		err = FG_CLIENT_NOMEM;
		memset(&a, 0, sizeof(a));
	} else {
		err = fg__call(&c->net, c->easy, "PATCH", path, body, NULL,
			       NULL, 0, &a);
	}
	if (err != FG_CLIENT_OK) {
		fail(c, err, &a, "renew");
		/* it may still hold: give it back, once */
		if (!definite(&a) && path) {
			struct fg__answer b;
			fg__call(&c->net, c->easy, "DELETE", path, NULL,
				 c->lease, NULL, 0, &b);
			fg__answer_finish(&b);
		}
	}
	pthread_mutex_lock(&c->mu);
	if (err == FG_CLIENT_OK) {
		uint64_t ttl;
		if (fg__json_uint(a.json, "ttl_ms", &ttl) == 0 && ttl > 0)
			c->ttl_ms = ttl;
		c->deadline = a.sent_ms + c->ttl_ms;
		c->next_renew = a.sent_ms + interval(c->ttl_ms);
	} else {
		clear_lease(c);
	}
	pthread_mutex_unlock(&c->mu);
	fg__answer_finish(&a);
	if (body) {
		fg__wipe(body, strlen(body));
		free(body);
	}
	free(path);
	return err;
}

static void wake_renewer(struct fg_client *c)
{
	pthread_mutex_lock(&c->thr_mu);
	pthread_cond_signal(&c->thr_cv);
	pthread_mutex_unlock(&c->thr_mu);
}

/* Errors after which a wait asks again: the gateway could not serve. */
static bool transient(int err)
{
	return err == FG_CLIENT_UNAVAILABLE ||
	       err == FG_CLIENT_LOCK_STORE_UNAVAILABLE ||
	       err == FG_CLIENT_SHUTTING_DOWN || err == FG_CLIENT_INTERNAL ||
	       err == FG_CLIENT_NOT_READY || err == FG_CLIENT_TOO_MANY_WAITERS;
}

int fg_client_acquire(struct fg_client *c, const char *name,
		      const struct fg_client_acquire_opts *opts)
{
	static const struct fg_client_acquire_opts none = { 0 };
	const struct fg_client_acquire_opts *o = opts ? opts : &none;
	uint64_t start = fg__now_ms();
	uint64_t deadline = o->wait_ms == FG_CLIENT_WAIT_FOREVER ||
			    o->wait_ms > UINT64_MAX - start ? UINT64_MAX :
			    start + o->wait_ms;
	uint64_t unreachable = o->unreachable_ms ? o->unreachable_ms :
			       FG_CLIENT_UNREACHABLE_DEFAULT_MS;
	uint64_t unreach_since = 0, backoff = 0;
	bool told = false;
	struct fg__cancel cancel = { o->cancel_fd, o->cancel, o->cancel_arg };
	const struct fg__cancel *cn = o->cancel ? &cancel : NULL;
	char *path;
	int err;

	if (!name || !*name)
		return fail(c, FG_CLIENT_INVALID, NULL, "a lock name is needed");
	if (fg_client_holding(c))
		return fail(c, FG_CLIENT_INVALID, NULL,
			    "a lease is held already: release it first");
	if (!(path = fg__lock_path(name, NULL)))
		return fail(c, FG_CLIENT_NOMEM, NULL, NULL);
	for (bool first = true;; first = false) {
		uint64_t now = fg__now_ms();
		/* the first call asks for the whole wait the caller named (a
		 * millisecond spent before it is not the caller's to lose);
		 * each later one for what is left of it */
		uint64_t left = first ? o->wait_ms :
				deadline > now ? deadline - now : 0;
		uint64_t chunk = left > FG__WAIT_MAX_MS ? FG__WAIT_MAX_MS : left;
		struct fg__answer a;
		char *body = acquire_body(o, chunk);

		if (!body) {
			err = fail(c, FG_CLIENT_NOMEM, NULL, NULL);
			break;
		}
		/* a call that waits goes to a gateway that answers */
		err = chunk ? fg__probe(&c->net, c->easy, cn, &a) : 0;
		if (err == 0) {
			if (chunk)
				fg__answer_finish(&a);
			err = fg__call_c(&c->net, c->easy, "POST", path, body,
					 NULL, NULL, c->net.timeout_ms + chunk,
					 cn, &a);
		}
		free(body);
		if (err == FG_CLIENT_CANCELLED) {
			fail(c, err, NULL, "cancelled");
			fg__answer_finish(&a);
			break;
		}
		if (err == FG_CLIENT_OK) {
			uint64_t took = a.done_ms - a.sent_ms;
			err = install(c, path, o, &a);
			if (err == FG_CLIENT_OK) {
				uint64_t ttl = c->ttl_ms;
				fg__answer_finish(&a);
				if (took > ttl / 3 && (err = confirm(c)) != 0) {
					if (transient(err) && o->wait_ms)
						continue;
					break;
				}
				wake_renewer(c);
				break;
			}
			fail(c, err, &a, "acquire");
			/* a lease came with it: the lock is held, give it back
			 * rather than leave it to its TTL */
			const char *lease = fg__json_str(a.json, "lease");
			if (lease) {
				struct fg__answer b;
				give_back(c, c->easy, path, lease,
					  fg__now_ms() + c->net.timeout_ms, &b);
				fg__answer_finish(&b);
			}
			fg__answer_finish(&a);
			break;
		}
		now = fg__now_ms();
		if (err == FG_CLIENT_LOCK_HELD) {
			if (o->wait_ms == 0 || now >= deadline) {
				fail(c, FG_CLIENT_NOT_ACQUIRED, &a, NULL);
				fg__answer_finish(&a);
				err = FG_CLIENT_NOT_ACQUIRED;
				break;
			}
			/* a wait that ended early: do not spin on it */
			backoff = now - a.sent_ms + 50 < chunk ?
				  next_backoff(backoff) : 0;
			unreach_since = 0;
		} else if (transient(err) && o->wait_ms && now < deadline) {
			if (o->on_retry) {
				struct fg_client_error e;
				fg__error_set(&e, err, &a, "acquire");
				o->on_retry(c, &e, o->on_retry_arg);
			}
			if (!a.answered) {
				if (!unreach_since)
					unreach_since = now;
				if (!told && o->on_unreachable) {
					char why[CURL_ERROR_SIZE + 64];
					snprintf(why, sizeof(why), "%s",
						 a.errbuf[0] ? a.errbuf :
						 curl_easy_strerror(a.result));
					o->on_unreachable(c, why,
							  o->on_unreachable_arg);
				}
				told = true;
				if (now - unreach_since >= unreachable) {
					fail(c, err, &a, NULL);
					fg__answer_finish(&a);
					break;
				}
			} else {
				unreach_since = 0;
			}
			backoff = next_backoff(backoff);
		} else if (err == FG_CLIENT_TOO_MANY_WAITERS) {
			/* a full queue is a lock not acquired, as the other
			 * clients say; the code stays in last_error */
			fail(c, FG_CLIENT_NOT_ACQUIRED, &a, NULL);
			fg__answer_finish(&a);
			err = FG_CLIENT_NOT_ACQUIRED;
			break;
		} else {
			fail(c, err, &a, "acquire");
			fg__answer_finish(&a);
			break;
		}
		fg__answer_finish(&a);
		if (backoff) {
			uint64_t b = backoff;
			now = fg__now_ms();
			if (deadline != UINT64_MAX && now + b > deadline)
				b = deadline > now ? deadline - now : 0;
			if (unreach_since && unreach_since + unreachable < now + b)
				b = unreach_since + unreachable > now ?
				    unreach_since + unreachable - now : 0;
			if (fg__sleep(b, cn) == FG_CLIENT_CANCELLED) {
				err = fail(c, FG_CLIENT_CANCELLED, NULL,
					   "cancelled");
				break;
			}
		}
	}
	free(path);
	return err;
}

int fg_client_campaign(struct fg_client *c, const char *name,
		       const char *value,
		       const struct fg_client_acquire_opts *opts)
{
	struct fg_client_acquire_opts o = opts ? *opts :
		(struct fg_client_acquire_opts){ 0 };

	o.value = value;
	return fg_client_acquire(c, name, &o);
}

int fg_client_release(struct fg_client *c, unsigned flags)
{
	struct fg__answer a;
	int err;

	pthread_mutex_lock(&c->tick_mu);
	pthread_mutex_lock(&c->mu);
	if (!c->holding) {
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		return fail(c, FG_CLIENT_INVALID, NULL, "no lease is held");
	}
	/* a lease whose end passed is lost, whatever was ticked */
	if (!atomic_load(&c->lost) && fg__now_ms() >= c->deadline) {
		lose_unlock(c, FG_CLIENT_LOSS_EXPIRED);
		pthread_mutex_lock(&c->mu);
	}
	if (atomic_load(&c->lost)) {
		clear_lease(c);
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		if (flags & FG_CLIENT_RELEASE_IGNORE_LOST)
			return FG_CLIENT_OK;
		return fail(c, FG_CLIENT_LEASE_LOST, NULL,
			    "the lease was lost before the release");
	}
	/* the call is made with only tick_mu held, on copies: stamp() and
	 * holding() on other threads must not wait for the network */
	char *lease = strdup(c->lease), *path = strdup(c->path);
	uint64_t end = c->deadline, now = fg__now_ms();
	pthread_mutex_unlock(&c->mu);
	/* asked again while the gateways cannot serve (a Redis stall), so
	 * that the lock is not left held to its TTL; bounded by the lease's
	 * end and by the client's timeout */
	if (end > now + c->net.timeout_ms)
		end = now + c->net.timeout_ms;
	if (!lease || !path) {
		memset(&a, 0, sizeof(a));
		err = FG_CLIENT_NOMEM;
	} else {
		err = give_back(c, c->easy, path, lease, end, &a);
	}
	free_secret(&lease);
	free(path);
	pthread_mutex_lock(&c->mu);
	if (give_back_again(err) && fg__now_ms() >= c->deadline) {
		/* the lease ran out meanwhile: the lock is free */
		err = FG_CLIENT_OK;
	}
	if (err == FG_CLIENT_LEASE_EXPIRED) {
		atomic_store(&c->lost, true);
		err = flags & FG_CLIENT_RELEASE_IGNORE_LOST ? FG_CLIENT_OK :
		      FG_CLIENT_LEASE_LOST;
	}
	if (err)
		fail(c, err, &a, "release");
	fg__answer_finish(&a);
	clear_lease(c);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(&c->tick_mu);
	return err;
}

int fg_client_resign(struct fg_client *c)
{
	return fg_client_release(c, 0);
}

int fg_client_proclaim(struct fg_client *c, const char *value)
{
	struct fg__answer a;
	int err;

	pthread_mutex_lock(&c->tick_mu);
	pthread_mutex_lock(&c->mu);
	if (!c->holding || atomic_load(&c->lost)) {
		err = c->holding ? FG_CLIENT_LEASE_LOST : FG_CLIENT_INVALID;
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		return fail(c, err, NULL, "no lease is held");
	}
	char *body = renew_body(c->lease, c->ttl_ms, value);
	char *path = strdup(c->path);
	if (!body || !path) {
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_unlock(&c->tick_mu);
		if (body) {
			fg__wipe(body, strlen(body));
			free(body);
		}
		free(path);
		return fail(c, FG_CLIENT_NOMEM, NULL, NULL);
	}
	/* the call is made with only tick_mu held (no renewal or release can
	 * run meanwhile), mu retaken for the answer */
	pthread_mutex_unlock(&c->mu);
	err = fg__call(&c->net, c->easy, "PATCH", path, body, NULL, NULL,
		       0, &a);
	fg__wipe(body, strlen(body));
	free(body);
	free(path);
	pthread_mutex_lock(&c->mu);
	if (err == FG_CLIENT_OK) {
		uint64_t ttl;
		if (fg__json_uint(a.json, "ttl_ms", &ttl) == 0 && ttl > 0)
			c->ttl_ms = ttl;
		c->deadline = a.sent_ms + c->ttl_ms;
		c->next_renew = a.sent_ms + interval(c->ttl_ms);
	} else {
		fail(c, err, &a, "renew");
	}
	bool gone = err != FG_CLIENT_OK && definite(&a);
	fg__answer_finish(&a);
	if (gone) {
		lose_unlock(c, FG_CLIENT_LOSS_ANSWER);
		err = FG_CLIENT_LEASE_LOST;
	} else {
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_unlock(&c->tick_mu);
	return err;
}

/* ---- fenced requests ----------------------------------------------- */

int fg__lease_sequencer(struct fg_client *c, const char *prefix, char **out)
{
	*out = NULL;
	pthread_mutex_lock(&c->mu);
	int e = gate_locked(c);
	if (e != FG_CLIENT_OK)
		return e;
	size_t n = strlen(prefix) + strlen(c->sequencer) + 1;
	if ((*out = malloc(n)))
		snprintf(*out, n, "%s%s", prefix, c->sequencer);
	pthread_mutex_unlock(&c->mu);
	return *out ? FG_CLIENT_OK : FG_CLIENT_NOMEM;
}

int fg_client_stamp(struct fg_client *c, CURL *h, struct curl_slist **headers)
{
	static const char name[] = "Fencing-Token:";
	struct curl_slist *l = NULL;
	char *line;
	int err;

	if ((err = fg__lease_sequencer(c, "Fencing-Token: ", &line)) != 0)
		return err;

	/* a new list: every line but an earlier Fencing-Token, then ours */
	for (struct curl_slist *p = *headers; p; p = p->next) {
		if (strncasecmp(p->data, name, sizeof(name) - 1) == 0)
			continue;
		struct curl_slist *q = curl_slist_append(l, p->data);
		if (!q)
			goto nomem;
		l = q;
	}
	struct curl_slist *q = curl_slist_append(l, line);
	if (!q)
		goto nomem;
	l = q;
	free(line);
	curl_slist_free_all(*headers);
	*headers = l;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
	return FG_CLIENT_OK;
nomem:
	free(line);
	curl_slist_free_all(l);
	return FG_CLIENT_NOMEM;
}

/* ---- the renewer thread -------------------------------------------- */

static void *renewer(void *arg)
{
	struct fg_client *c = arg;

	pthread_mutex_lock(&c->thr_mu);
	while (!c->thr_stop) {
		pthread_mutex_unlock(&c->thr_mu);
		int64_t ms = fg_client_tick(c, fg__now_ms());
		pthread_mutex_lock(&c->thr_mu);
		if (c->thr_stop)
			break;
		if (ms < 0) {
			/* nothing held: until an acquire or a stop wakes it,
			 * looking again now and then all the same */
			ms = 1000;
		}
		if (ms == 0)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(ms / 1000);
		ts.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->thr_cv, &c->thr_mu, &ts);
	}
	pthread_mutex_unlock(&c->thr_mu);
	return NULL;
}

int fg_client_start_renewer(struct fg_client *c)
{
	int err = FG_CLIENT_OK;

	pthread_mutex_lock(&c->thr_mu);
	if (c->thr_running) {
		err = FG_CLIENT_INVALID;
	} else {
		c->thr_stop = false;
		if (pthread_create(&c->thr, NULL, renewer, c) != 0)
			err = FG_CLIENT_NOMEM;
		else
			c->thr_running = true;
	}
	pthread_mutex_unlock(&c->thr_mu);
	return err;
}

void fg_client_stop_renewer(struct fg_client *c)
{
	pthread_mutex_lock(&c->thr_mu);
	if (!c->thr_running) {
		pthread_mutex_unlock(&c->thr_mu);
		return;
	}
	c->thr_stop = true;
	pthread_cond_signal(&c->thr_cv);
	pthread_mutex_unlock(&c->thr_mu);
	pthread_join(c->thr, NULL);
	pthread_mutex_lock(&c->thr_mu);
	c->thr_running = false;
	pthread_mutex_unlock(&c->thr_mu);
}

/* ---- inspect, observe, ls, break ----------------------------------- */

static char *dup_field(json_t *o, const char *key)
{
	const char *s = fg__json_str(o, key);
	return s ? strdup(s) : NULL;
}

void fg_client_state_finish(struct fg_client_state *s)
{
	free(s->value);
	free(s->owner);
	memset(s, 0, sizeof(*s));
}

static int read_state(json_t *j, struct fg_client_state *s)
{
	json_t *held = json_object_get(j, "held");
	const char *mode = fg__json_str(j, "mode");

	if (!json_is_boolean(held))
		return FG_CLIENT_PROTOCOL;
	s->held = json_is_true(held);
	s->shared = mode && strcmp(mode, "shared") == 0;
	s->has_token = fg__json_uint(j, "token", &s->token) == 0;
	fg__json_uint(j, "holders", &s->holders);
	fg__json_uint(j, "waiters", &s->waiters);
	fg__json_uint(j, "ttl_ms", &s->ttl_ms);
	fg__json_uint(j, "delay_ms", &s->delay_ms);
	s->value = dup_field(j, "value");
	s->owner = dup_field(j, "owner");
	return FG_CLIENT_OK;
}

static int get_state(struct fg_client *c, const char *name, const char *query,
		     uint64_t wait_ms, struct fg_client_state *s)
{
	struct fg__answer a;
	char *path = fg__lock_path(name, query);
	int err;

	memset(s, 0, sizeof(*s));
	if (!path)
		return fail(c, FG_CLIENT_NOMEM, NULL, NULL);
	err = fg__call(&c->net, c->easy, "GET", path, NULL, NULL, NULL,
		       c->net.timeout_ms + wait_ms, &a);
	free(path);
	if (err == FG_CLIENT_OK && (err = read_state(a.json, s)) != 0)
		fail(c, err, &a, "inspect");
	else if (err)
		fail(c, err, &a, "inspect");
	fg__answer_finish(&a);
	return err;
}

int fg_client_inspect(struct fg_client *c, const char *name,
		      struct fg_client_state *s)
{
	return get_state(c, name, NULL, 0, s);
}

int fg_client_observe(struct fg_client *c, const char *name, uint64_t after,
		      uint64_t wait_ms, struct fg_client_state *s)
{
	char q[64];

	if (wait_ms > FG__WAIT_MAX_MS)
		wait_ms = FG__WAIT_MAX_MS;
	if (after)
		snprintf(q, sizeof(q), "wait_ms=%llu&after=%llu",
			 (unsigned long long)wait_ms, (unsigned long long)after);
	else
		snprintf(q, sizeof(q), "wait_ms=%llu",
			 (unsigned long long)wait_ms);
	return get_state(c, name, q, wait_ms, s);
}

void fg_client_list_finish(struct fg_client_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->locks[i].name);
	free(l->locks);
	free(l->cursor);
	memset(l, 0, sizeof(*l));
}

int fg_client_ls(struct fg_client *c, const char *prefix, const char *cursor,
		 unsigned limit, struct fg_client_list *out)
{
	struct fg__answer a;
	char *ep = NULL, *ec = NULL, *path = NULL;
	int err = FG_CLIENT_NOMEM;

	memset(out, 0, sizeof(*out));
	if (!c->easy)
		return fail(c, FG_CLIENT_NOMEM, NULL, NULL);
	ep = curl_easy_escape(c->easy, prefix ? prefix : "", 0);
	ec = cursor ? curl_easy_escape(c->easy, cursor, 0) : NULL;
	size_t n = 64 + (ep ? strlen(ep) : 0) + (ec ? strlen(ec) : 0);
	if (!ep || (cursor && !ec) || !(path = malloc(n)))
		goto out;
	int w = snprintf(path, n, "/_fence/v1/locks?prefix=%s", ep);
	if (limit)
		w += snprintf(path + w, n - (size_t)w, "&limit=%u", limit);
	if (ec)
		snprintf(path + w, n - (size_t)w, "&cursor=%s", ec);
	err = fg__call(&c->net, c->easy, "GET", path, NULL, NULL, NULL, 0, &a);
	if (err == FG_CLIENT_OK) {
		json_t *locks = json_object_get(a.json, "locks");
		size_t i;
		json_t *e;
		if (!json_is_array(locks)) {
			err = FG_CLIENT_PROTOCOL;
		} else if (json_array_size(locks) &&
			   !(out->locks = calloc(json_array_size(locks),
						 sizeof(*out->locks)))) {
			err = FG_CLIENT_NOMEM;
		} else {
			json_array_foreach(locks, i, e) {
				struct fg_client_entry *x = &out->locks[out->n];
				const char *mode = fg__json_str(e, "mode");
				if (!(x->name = dup_field(e, "name")))
					continue;
				x->held = mode != NULL;
				x->shared = mode && strcmp(mode, "shared") == 0;
				x->has_token = fg__json_uint(e, "token",
							     &x->token) == 0;
				fg__json_uint(e, "ttl_ms", &x->ttl_ms);
				fg__json_uint(e, "delay_ms", &x->delay_ms);
				x->holders = json_array_size(
					json_object_get(e, "holders"));
				x->waiters = json_array_size(
					json_object_get(e, "waiters"));
				out->n++;
			}
			out->cursor = dup_field(a.json, "cursor");
		}
	}
	if (err)
		fail(c, err, &a, "ls");
	fg__answer_finish(&a);
out:
	if (err == FG_CLIENT_NOMEM)
		fail(c, err, NULL, NULL);
	curl_free(ep);
	curl_free(ec);
	free(path);
	if (err)
		fg_client_list_finish(out);
	return err;
}

int fg_client_break(struct fg_client *c, const char *name, uint64_t token)
{
	struct fg__answer a;
	char line[64];
	char *path = fg__lock_path(name, NULL);
	int err;

	if (!path)
		return fail(c, FG_CLIENT_NOMEM, NULL, NULL);
	snprintf(line, sizeof(line), "Fence-Break: %llu",
		 (unsigned long long)token);
	err = fg__call(&c->net, c->easy, "DELETE", path, NULL, NULL, line, 0,
		       &a);
	if (err)
		fail(c, err, &a, "break");
	fg__answer_finish(&a);
	free(path);
	return err;
}
