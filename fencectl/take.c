/*
 * take.c - acquire, waiting as long as asked (see take.h).
 * Invariant: fg_take() returns holding exactly one grant (FG_EXIT_OK) or
 * none; a grant it cannot use (a confirmation that failed, a signal after
 * the answer) is given back before it returns.
 */
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "duration.h"
#include "exits.h"
#include "lockurl.h"
#include "msg.h"
#include "sigs.h"
#include "take.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000

static uint64_t next_backoff(uint64_t b)
{
	if (b < BACKOFF_MIN_MS)
		return BACKOFF_MIN_MS;
	return b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
}

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

int fg_give_back(const struct fg_conn *cl, const char *name,
		 const char *lease, char *why, size_t whylen)
{
	struct fg_req r;
	int rc;

	if (fg_req_init(&r, cl, "DELETE", fg_lockurl_lock("", name, NULL),
			NULL, lease, 0) < 0) {
		snprintf(why, whylen, "out of memory");
		fg_req_finish(&r);
		return FG_EXIT_SOFTWARE;
	}
	fg_req_perform(&r);
	enum fg_outcome o = fg_req_outcome(&r);
	rc = fg_outcome_exit(o);
	if (o != FG_OK)
		fg_req_describe(&r, why, whylen);
	fg_req_finish(&r);
	return rc;
}

/*
 * Renews g at once and moves its start to this renewal's. 0 on success;
 * FG_LEASE_GONE or another outcome; a signal number through *sig.
 */
static enum fg_outcome confirm(const struct fg_conn *cl, const char *name,
			       struct fg_grant *g, int sigfd, int *sig,
			       char *why, size_t whylen)
{
	struct fg_req r;
	json_t *body = fg_api_renew_body(g->lease, g->ttl_ms, NULL);
	enum fg_outcome o = FG_NOMEM;

	if (fg_req_init(&r, cl, "PATCH", fg_lockurl_lock("", name, NULL),
			body, NULL, 0) < 0 || !body)
		goto out;
	*sig = fg_req_run(&r, sigfd);
	if (*sig)
		goto out;
	o = fg_req_outcome(&r);
	if (o == FG_OK) {
		uint64_t ttl;
		if (fg_req_uint(&r, "ttl_ms", &ttl) == 0 && ttl > 0)
			g->ttl_ms = ttl;
		g->valid_from_ms = r.sent_ms;
	} else {
		fg_req_describe(&r, why, whylen);
	}
out:
	json_decref(body);
	fg_req_finish(&r);
	return o;
}

int fg_take_status(const struct fg_take *t, int rc)
{
	if (rc == FG_EXIT_NOT_OBTAINED && t->conflict_exit_set)
		return t->conflict_exit;
	return rc;
}

int fg_take(const struct fg_conn *cl, const struct fg_take *t, int sigfd,
	    struct fg_grant *g, int *sig)
{
	uint64_t start = fg_now_ms();
	uint64_t deadline = t->wait_ms == FG_WAIT_FOREVER ||
			    t->wait_ms > UINT64_MAX - start ?
			    UINT64_MAX : start + t->wait_ms;
	uint64_t unreachable = t->unreachable_ms ? t->unreachable_ms :
			       FG_UNREACHABLE_DEFAULT_MS;
	uint64_t unreach_since = 0;	/* 0: some gateway answered last */
	uint64_t backoff = 0;
	bool noted = false;
	char why[512], d[32];
	int rc;

	memset(g, 0, sizeof(*g));
	*sig = 0;
	for (;;) {
		uint64_t now = fg_now_ms();
		uint64_t left = deadline > now ? deadline - now : 0;
		uint64_t chunk = left > FG_WAIT_MAX_MS ? FG_WAIT_MAX_MS : left;
		json_t *body = fg_api_acquire_body(&t->args, chunk);
		struct fg_req r;

		if (fg_req_init(&r, cl, "POST",
				fg_lockurl_lock("", t->name, NULL), body,
				NULL, cl->timeout_ms + chunk) < 0 || !body) {
			json_decref(body);
			fg_req_finish(&r);
			fg_say("out of memory");
			return FG_EXIT_SOFTWARE;
		}
		json_decref(body);
		*sig = fg_req_run(&r, sigfd);
		if (*sig) {
			/* the connection is gone: the gateway takes the
			 * waiter out of the queue, or gives back a grant it
			 * could not deliver */
			fg_req_finish(&r);
			return 128 + *sig;
		}
		enum fg_outcome o = fg_req_outcome(&r);
		uint64_t sent = r.sent_ms;
		bool r_answered = r.answered;
		/* a refusal for lock-delay alone says when the lock can be
		 * granted (the lock is free, nobody holds it) */
		uint64_t delay = 0;
		if (o == FG_HELD && fg_req_uint(&r, "retry_after_ms", &delay) != 0)
			delay = 0;
		fg_req_describe(&r, why, sizeof(why));
		if (o == FG_OK) {
			int bad = fg_api_grant(&r, g);
			uint64_t took = r.done_ms - r.sent_ms;
			fg_req_finish(&r);
			if (bad) {
				fg_say("the gateway's answer to acquire lock "
				       "'%s' is not a grant", t->name);
				return FG_EXIT_PROTOCOL;
			}
			if (!t->confirm || took <= g->ttl_ms / 3)
				return FG_EXIT_OK;
			o = confirm(cl, t->name, g, sigfd, sig, why,
				    sizeof(why));
			if (o == FG_OK)
				return FG_EXIT_OK;
			char ignored[256];
			if (o != FG_LEASE_GONE)
				fg_give_back(cl, t->name, g->lease, ignored,
					     sizeof(ignored));
			fg_grant_finish(g);
			if (*sig)
				return 128 + *sig;
			if (!t->quiet)
				fg_say("lock '%s': the grant could not be "
				       "confirmed (%s); asking again", t->name,
				       why);
			/* go round again, as for an unavailable gateway */
			o = FG_UNAVAILABLE;
		} else {
			fg_req_finish(&r);
		}

		now = fg_now_ms();
		switch (o) {
		case FG_HELD:
			unreach_since = 0;
			if (now >= deadline || t->wait_ms == 0) {
				if (t->wait_ms == 0 && delay > 0)
					fg_say("lock '%s' is in lock-delay: it "
					       "can be granted in %s", t->name,
					       fg_duration_format(delay, d,
								  sizeof(d)));
				else if (t->wait_ms == 0)
					fg_say("lock '%s' is held", t->name);
				else
					fg_say("lock '%s' was not granted "
					       "within %s", t->name,
					       fg_duration_format(t->wait_ms, d,
								  sizeof(d)));
				return FG_EXIT_NOT_OBTAINED;
			}
			/* a wait that ended early (it should not): do not
			 * spin on it */
			if (now - sent + 50 < chunk)
				backoff = next_backoff(backoff);
			else
				backoff = 0;
			break;
		case FG_QUEUE_FULL:
		case FG_UNAVAILABLE:
			if (t->wait_ms == 0 || now >= deadline) {
				fg_say("cannot take lock '%s': %s", t->name,
				       why);
				return o == FG_QUEUE_FULL ?
				       FG_EXIT_NOT_OBTAINED :
				       FG_EXIT_UNAVAILABLE;
			}
			if (o == FG_UNAVAILABLE && !r_answered) {
				/* no gateway answered at all: bounded */
				if (!unreach_since)
					unreach_since = now;
				if (now - unreach_since >= unreachable) {
					fg_say("cannot take lock '%s': no "
					       "gateway answered for %s "
					       "(--unreachable); the last: %s",
					       t->name, fg_duration_format(
						unreachable, d, sizeof(d)),
					       why);
					return FG_EXIT_UNAVAILABLE;
				}
				if (!noted && !t->quiet)
					fg_say("lock '%s': no gateway answers "
					       "(%s); still trying, each in "
					       "turn, for at most %s", t->name,
					       why, fg_duration_format(
						unreachable, d, sizeof(d)));
			} else {
				unreach_since = 0;
				if (!noted && !t->quiet)
					fg_say("lock '%s': %s; still trying",
					       t->name, why);
			}
			noted = true;
			backoff = next_backoff(backoff);
			break;
		case FG_LEASE_GONE:
			fg_say("the lease does not hold lock '%s' (%s)",
			       t->name, why);
			return FG_EXIT_LEASE_LOST;
		default:
			rc = fg_outcome_exit(o);
			fg_say("cannot take lock '%s': %s", t->name, why);
			return rc;
		}
		if (backoff) {
			uint64_t b = backoff;
			now = fg_now_ms();
			if (deadline != UINT64_MAX && now + b > deadline)
				b = deadline > now ? deadline - now : 0;
			if (unreach_since && now + b > unreach_since + unreachable)
				b = unreach_since + unreachable > now ?
				    unreach_since + unreachable - now : 0;
			*sig = fg_sig_sleep(sigfd, b);
			if (*sig)
				return 128 + *sig;
		}
	}
}
