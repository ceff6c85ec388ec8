/*
 * take.c - acquire, waiting as long as asked, on the client library (see
 * take.h).
 * Invariant: fg_take() returns holding exactly one grant (FG_EXIT_OK) or
 * none; a grant it cannot use is given back before it returns. The lease
 * leaves this file only inside the library's calls (and in the grant's
 * answer, which acquire prints on purpose).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fencegate/client.h"

#include "clock.h"
#include "duration.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "sigs.h"
#include "take.h"

/*
 * A lease as the client library holds it, with what fencectl says of it:
 * the hooks run on the thread that made the call (the wait: this one;
 * renewals: the library's renewer thread), so what they share is under
 * mu, and a loss is told to supervise.c's loop through the pipe.
 */
struct fg_hold {
	struct fg_client *lc;		/* the library's; owns the lease */
	const struct fg_conn *cl;	/* for the words of req.c */
	char *name;
	int pipe[2];			/* a byte: the lease was lost */
	int sigfd;			/* the wait's signals (-1: none) */
	int sig;			/* the one that cut it short */
	bool quiet, noted;		/* the wait's "still trying", once */
	uint64_t unreachable_ms;
	pthread_mutex_t mu;		/* what follows */
	uint64_t ttl_ms;
	char last_url[512];
	char last_error[512];
	long last_status;
	char last_code[40];
	char why[800];			/* the loss, in words */
};

/* -E CODE: a whole number from 0 to 255, as flock(1) takes it. */
static int read_exit_code(struct fg_take *t, const char *name,
			  const char *value, char *msg, size_t msglen)
{
	int v = 0;
	const char *p = value;

	for (; *p >= '0' && *p <= '9' && v <= 255; p++)
		v = v * 10 + (*p - '0');
	if (p == value || *p || v > 255) {
		snprintf(msg, msglen, "%s: '%s' is not an exit status (a whole "
			 "number from 0 to 255)", name, value);
		return -1;
	}
	t->conflict_exit = v;
	t->conflict_exit_set = true;
	return 0;
}

/* Keeps what JSON and a terminal show plainly: printable ASCII. */
static void plain(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f ||
		    *s == '@' || *s == ':')
			*s = '?';
}

void fg_take_default_owner(struct fg_take *t)
{
	char user[64], host[128];
	struct passwd *pw;

	if (t->args.owner || t->args.lease)
		return;
	pw = getpwuid(geteuid());
	if (pw && pw->pw_name && *pw->pw_name)
		snprintf(user, sizeof(user), "%s", pw->pw_name);
	else
		snprintf(user, sizeof(user), "%ld", (long)geteuid());
	if (gethostname(host, sizeof(host)) < 0 || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	plain(user);
	plain(host);
	snprintf(t->owner_buf, sizeof(t->owner_buf), "%s@%s:%ld", user, host,
		 (long)getpid());
	t->args.owner = t->owner_buf;
}

int fg_take_option(struct fg_take *t, int id, const char *name,
		   const char *value, char *msg, size_t msglen)
{
	struct fg_acquire_args *a = &t->args;
	uint64_t v;

	switch (id) {
	case FG_TAKE_OPT_TTL:
		return fg_cli_duration(name, value, FG_TTL_MIN_MS,
				       FG_TTL_MAX_MS, &a->ttl_ms, msg, msglen);
	case FG_TAKE_OPT_WAIT:
		return fg_cli_wait(name, value, &t->wait_ms, msg, msglen);
	case FG_TAKE_OPT_NO_WAIT:
		t->wait_ms = 0;
		return 0;
	case FG_TAKE_OPT_CONFLICT_EXIT:
		return read_exit_code(t, name, value, msg, msglen);
	case FG_TAKE_OPT_UNREACHABLE:
		return fg_cli_duration(name, value, 1, 86400000,
				       &t->unreachable_ms, msg, msglen);
	case FG_TAKE_OPT_SHARED:
		a->shared = true;
		return 0;
	case FG_TAKE_OPT_OWNER:
		a->owner = value;
		return fg_cli_text(name, value, msg, msglen);
	case FG_TAKE_OPT_VALUE:
		a->value = value;
		return fg_cli_text(name, value, msg, msglen);
	case FG_TAKE_OPT_LOCK_DELAY:
		if (fg_cli_duration(name, value, 0, FG_LOCK_DELAY_MAX_MS, &v,
				    msg, msglen) < 0)
			return -1;
		a->lock_delay_ms = (int64_t)v;
		return 0;
	}
	return 1;
}

int fg_take_status(const struct fg_take *t, int rc)
{
	if (rc == FG_EXIT_NOT_OBTAINED && t->conflict_exit_set)
		return t->conflict_exit;
	return rc;
}

/* ---- the lease, held by the client library ---------------------------- */

/* The gateway part of a call's URL, as shown: what precedes the API. */
static const char *base_shown(const char *url, char *buf, size_t len)
{
	char shown[512];
	const char *s = fg_gateways_shown(url, shown, sizeof(shown));
	const char *api = strstr(s, "/_fence/v1/");

	snprintf(buf, len, "%.*s", api ? (int)(api - s) : (int)strlen(s), s);
	return buf;
}

/* --verbose: each attempt, as req.c notes its own. */
static void on_attempt(void *arg, const struct fg_client_attempt *a)
{
	struct fg_hold *h = arg;
	char shown[512], why[512];

	pthread_mutex_lock(&h->mu);
	snprintf(h->last_url, sizeof(h->last_url), "%s", a->url);
	pthread_mutex_unlock(&h->mu);
	if (a->error)
		snprintf(why, sizeof(why), "%s", a->error);
	else
		snprintf(why, sizeof(why), "HTTP %ld", a->status);
	fg_note("%s %s: %s (%" PRIu64 "ms)", a->method,
		fg_gateways_shown(a->url, shown, sizeof(shown)), why, a->ms);
	if (a->next)
		fg_note("gateway %s did not answer; trying the next",
			base_shown(a->url, shown, sizeof(shown)));
}

/* The library's error as req.c's parts, for its words. */
static const char *describe(struct fg_hold *h, const struct fg_client_error *e,
			    char *buf, size_t len)
{
	char url[512];
	struct fg_result x = {
		.result = e->transport,
		.status = e->status,
		.code = e->coded ? e->code : NULL,
		.message = e->coded ? e->message : NULL,
		.errtext = e->transport ? e->message : NULL,
		.url = url,
		.tried = e->tried,
		.retry_after = -1,
	};

	pthread_mutex_lock(&h->mu);
	snprintf(url, sizeof(url), "%s", h->last_url);
	pthread_mutex_unlock(&h->mu);
	return fg_result_describe(h->cl, &x, buf, len);
}

static enum fg_outcome outcome(struct fg_hold *h, const struct fg_client_error *e)
{
	struct fg_result x = {
		.result = e->transport,
		.status = e->status,
		.code = e->coded ? e->code : NULL,
		.errtext = e->transport ? e->message : NULL,
		.url = h->last_url,
		.tried = e->tried,
		.retry_after = -1,
	};
	return fg_result_outcome(&x);
}

/* A wait that goes on after a failure says so, once. */
static void on_retry(struct fg_client *c, const struct fg_client_error *e,
		     void *arg)
{
	struct fg_hold *h = arg;
	char why[512], d[32];

	(void)c;
	if (h->noted || h->quiet)
		return;
	h->noted = true;
	describe(h, e, why, sizeof(why));
	if (!e->answered && e->err == FG_CLIENT_UNAVAILABLE)
		fg_say("lock '%s': no gateway answers (%s); still trying, each "
		       "in turn, for at most %s", h->name, why,
		       fg_duration_format(h->unreachable_ms, d, sizeof(d)));
	else
		fg_say("lock '%s': %s; still trying", h->name, why);
}

/* A signal that ends fencectl cuts the wait short. */
static bool on_signal(void *arg)
{
	struct fg_hold *h = arg;
	struct signalfd_siginfo si;
	int s;

	while ((s = fg_sig_next(h->sigfd, &si)) != 0)
		if (fg_sig_ends(s) && !h->sig)
			h->sig = s;
	return h->sig != 0;
}

/* Renewals, from the renewer thread: what supervise.c used to say. */
static void on_renewal(struct fg_client *c, const struct fg_client_renewal *r,
		       void *arg)
{
	struct fg_hold *h = arg;
	char why[512], d[32], base[512];

	(void)c;
	if (r->ok) {
		if (r->failures)
			fg_say("renewed the lease on lock '%s' again, after "
			       "%u failed attempt%s", h->name, r->failures,
			       r->failures == 1 ? "" : "s");
		fg_note("renewed the lease on lock '%s' (%" PRIu64 "ms)",
			h->name, r->ttl_ms);
		pthread_mutex_lock(&h->mu);
		h->ttl_ms = r->ttl_ms;
		pthread_mutex_unlock(&h->mu);
		return;
	}
	describe(h, r->error, why, sizeof(why));
	pthread_mutex_lock(&h->mu);
	snprintf(h->last_error, sizeof(h->last_error), "%s", why);
	h->last_status = r->error->status;
	snprintf(h->last_code, sizeof(h->last_code), "%s",
		 r->error->coded ? r->error->code : "");
	base_shown(h->last_url, base, sizeof(base));
	pthread_mutex_unlock(&h->mu);
	if (r->final)
		return;
	fg_note("renewing the lease on lock '%s' at %s failed: %s", h->name,
		base, why);
	if (r->failures == 1 && r->left_ms > 0)
		fg_say("renewing the lease on lock '%s' failed (%s); retrying, "
		       "the lease runs out in %s", h->name, why,
		       fg_duration_format(r->left_ms, d, sizeof(d)));
}

/* The loss, from whichever thread found it: words, then a byte on the
 * pipe supervise.c polls. */
static void on_lost(struct fg_client *c, enum fg_client_loss why, void *arg)
{
	struct fg_hold *h = arg;
	char d[32];

	(void)c;
	pthread_mutex_lock(&h->mu);
	if (why == FG_CLIENT_LOSS_ANSWER)
		snprintf(h->why, sizeof(h->why), "renew answered %ld %s",
			 h->last_status, h->last_code);
	else
		snprintf(h->why, sizeof(h->why), "no renewal succeeded within "
			 "its %s lease%s%s",
			 fg_duration_format(h->ttl_ms, d, sizeof(d)),
			 h->last_error[0] ? "; last error: " : "",
			 h->last_error);
	pthread_mutex_unlock(&h->mu);
	ssize_t w = write(h->pipe[1], "x", 1);
	(void)w;
}

void fg_hold_free(struct fg_hold *h)
{
	if (!h)
		return;
	/* forgets the lease, never releases it: the caller did, or hands
	 * it on (acquire) */
	fg_client_destroy(h->lc);
	if (h->pipe[0] >= 0)
		close(h->pipe[0]);
	if (h->pipe[1] >= 0)
		close(h->pipe[1]);
	pthread_mutex_destroy(&h->mu);
	free(h->name);
	free(h);
}

/* The library's client for cl's gateways and identity, and its hooks. */
static struct fg_hold *hold_new(const struct fg_conn *cl, const char *name)
{
	struct fg_hold *h = calloc(1, sizeof(*h));
	char *list = NULL;
	size_t n = 1;

	if (!h)
		return NULL;
	h->pipe[0] = h->pipe[1] = -1;
	pthread_mutex_init(&h->mu, NULL);
	h->cl = cl;
	h->name = strdup(name);
	for (size_t i = 0; i < cl->gw->n; i++)
		n += strlen(cl->gw->url[i]) + 1;
	if (!h->name || !(list = calloc(1, n)) ||
	    pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		goto error;
	for (size_t i = 0; i < cl->gw->n; i++) {
		if (i)
			strcat(list, ",");
		strcat(list, cl->gw->url[i]);
	}
	snprintf(h->last_url, sizeof(h->last_url), "%s",
		 cl->gw->url[cl->gw->current]);
	struct fg_client_opts o = {
		.gateways = list,
		.key = cl->key,
		.cacert = cl->cacert,
		.cert = cl->cert,
		.cert_key = cl->cert_key,
		.timeout_ms = cl->timeout_ms,
		.connect_timeout_ms = cl->connect_timeout_ms,
		.user_agent = "fencectl/" FG_VERSION,
		.first_gateway = cl->gw->current,
		.on_attempt = on_attempt,
		.on_attempt_arg = h,
	};
	if (fg_client_create(&o, &h->lc) != 0)
		goto error;
	free(list);
	return h;
error:
	free(list);
	fg_hold_free(h);
	return NULL;
}

int fg_hold_event_fd(const struct fg_hold *h)
{
	return h->pipe[0];
}

const char *fg_hold_lost(struct fg_hold *h, char *buf, size_t len)
{
	char c;

	while (read(h->pipe[0], &c, 1) == 1)
		;
	if (!fg_client_lease_lost(h->lc))
		return NULL;
	pthread_mutex_lock(&h->mu);
	snprintf(buf, len, "%s", h->why);
	pthread_mutex_unlock(&h->mu);
	return buf;
}

int fg_hold_start(struct fg_hold *h)
{
	return fg_client_start_renewer(h->lc) == 0 ? 0 : -1;
}

void fg_hold_stop(struct fg_hold *h)
{
	fg_client_stop_renewer(h->lc);
}

int fg_take_give_back(struct fg_grant *g, char *why, size_t whylen)
{
	struct fg_hold *h = g->hold;
	int e;

	fg_client_stop_renewer(h->lc);
	e = fg_client_release(h->lc, FG_CLIENT_RELEASE_IGNORE_LOST);
	if (e == FG_CLIENT_OK)
		return FG_EXIT_OK;
	const struct fg_client_error *err = fg_client_last_error(h->lc);
	describe(h, err, why, whylen);
	return fg_outcome_exit(outcome(h, err));
}

/* The grant the library holds, as fencectl's struct fg_grant. */
static int grant_of(struct fg_hold *h, struct fg_grant *g)
{
	const char *text = fg_client_grant_json(h->lc);
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;
	json_t *v;

	memset(g, 0, sizeof(*g));
	if (!json_is_object(j))
		goto error;
	g->answer = j;
	g->name = json_string_value(json_object_get(j, "name"));
	g->lease = json_string_value(json_object_get(j, "lease"));
	g->sequencer = json_string_value(json_object_get(j, "sequencer"));
	g->mode = json_string_value(json_object_get(j, "mode"));
	v = json_object_get(j, "ttl_ms");
	if (!g->name || !g->lease || !g->sequencer || !g->mode ||
	    !json_is_integer(v))
		goto error;
	g->ttl_ms = (uint64_t)json_integer_value(v);
	g->token = fg_client_token(h->lc);
	g->hold = h;
	return 0;
error:
	json_decref(j);
	memset(g, 0, sizeof(*g));
	return -1;
}

int fg_take(const struct fg_conn *cl, const struct fg_take *t, int sigfd,
	    struct fg_grant *g, int *sig)
{
	struct fg_hold *h = hold_new(cl, t->name);
	uint64_t start = fg_now_ms();
	char why[512], d[32];
	int e;

	memset(g, 0, sizeof(*g));
	*sig = 0;
	if (!h) {
		fg_say("out of memory");
		return FG_EXIT_SOFTWARE;
	}
	h->quiet = t->quiet;
	h->sigfd = sigfd;
	h->unreachable_ms = t->unreachable_ms ? t->unreachable_ms :
			    FG_UNREACHABLE_DEFAULT_MS;
	struct fg_client_acquire_opts o = {
		.ttl_ms = t->args.ttl_ms,
		.wait_ms = t->wait_ms,
		.shared = t->args.shared,
		.owner = t->args.owner,
		.value = t->args.value,
		.lock_delay_set = t->args.lock_delay_ms >= 0,
		.lock_delay_ms = t->args.lock_delay_ms >= 0 ?
				 (uint64_t)t->args.lock_delay_ms : 0,
		.lease = t->args.lease,
		.unreachable_ms = h->unreachable_ms,
		.on_lost = on_lost,
		.on_lost_arg = h,
		.on_renewal = on_renewal,
		.on_renewal_arg = h,
		.on_retry = on_retry,
		.on_retry_arg = h,
		.cancel_fd = sigfd,
		.cancel = sigfd >= 0 ? on_signal : NULL,
		.cancel_arg = h,
	};
	e = fg_client_acquire(h->lc, t->name, &o);
	cl->gw->current = fg_client_gateway_index(h->lc);
	if (e == FG_CLIENT_OK) {
		h->ttl_ms = 0;
		if (grant_of(h, g) == 0) {
			h->ttl_ms = g->ttl_ms;
			return FG_EXIT_OK;
		}
		fg_client_release(h->lc, FG_CLIENT_RELEASE_IGNORE_LOST);
		fg_hold_free(h);
		fg_say("the gateway's answer to acquire lock '%s' is not a "
		       "grant", t->name);
		return FG_EXIT_PROTOCOL;
	}
	const struct fg_client_error *err = fg_client_last_error(h->lc);
	int rc;
	if (e == FG_CLIENT_CANCELLED) {
		*sig = h->sig;
		fg_hold_free(h);
		return 128 + *sig;
	}
	describe(h, err, why, sizeof(why));
	if (e == FG_CLIENT_PROTOCOL && err->status >= 200 && err->status < 300) {
		fg_say("the gateway's answer to acquire lock '%s' is not a "
		       "grant", t->name);
		rc = FG_EXIT_PROTOCOL;
	} else if (e == FG_CLIENT_NOT_ACQUIRED) {
		if (strcmp(err->code, "too_many_waiters") == 0)
			fg_say("lock '%s' was not granted: its queue of waiters "
			       "is full", t->name);
		else if (t->wait_ms == 0 && err->has_retry_after &&
		    err->retry_after_ms > 0)
			fg_say("lock '%s' is in lock-delay: it can be granted "
			       "in %s", t->name,
			       fg_duration_format(err->retry_after_ms, d,
						  sizeof(d)));
		else if (t->wait_ms == 0)
			fg_say("lock '%s' is held", t->name);
		else
			fg_say("lock '%s' was not granted within %s", t->name,
			       fg_duration_format(t->wait_ms, d, sizeof(d)));
		rc = FG_EXIT_NOT_OBTAINED;
	} else if (e == FG_CLIENT_LEASE_EXPIRED) {
		fg_say("the lease does not hold lock '%s' (%s)", t->name, why);
		rc = FG_EXIT_LEASE_LOST;
	} else if (e == FG_CLIENT_UNAVAILABLE && !err->answered &&
		   t->wait_ms && fg_now_ms() - start < t->wait_ms) {
		fg_say("cannot take lock '%s': no gateway answered for %s "
		       "(--unreachable); the last: %s", t->name,
		       fg_duration_format(h->unreachable_ms, d, sizeof(d)),
		       why);
		rc = FG_EXIT_UNAVAILABLE;
	} else if (e == FG_CLIENT_NOMEM || e == FG_CLIENT_INVALID) {
		fg_say("out of memory");
		rc = FG_EXIT_SOFTWARE;
	} else {
		fg_say("cannot take lock '%s': %s", t->name, why);
		rc = fg_outcome_exit(outcome(h, err));
	}
	fg_hold_free(h);
	return rc;
}
