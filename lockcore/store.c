/*
 * store.c - the blocking Redis connection of one gateway worker thread.
 *
 * Invariant: every call is bounded by connect_timeout_ms + 2 round trips of
 * command_timeout_ms; a connection that failed or timed out is dropped at
 * once (a late reply must never be read as the answer to a later command),
 * and reconnecting is tried at most once per connect_timeout_ms, so a down
 * Redis answers FG_EUNAVAIL fast instead of stacking waits.
 */
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <openssl/rand.h>

#include "lockcore-private.h"

struct fg_store {
	char *host;
	int port;
	unsigned connect_timeout_ms;
	unsigned command_timeout_ms;
	unsigned idle_forget_ms;
	unsigned write_margin_ms;
	redisContext *rc;
	uint64_t next_try_ms;
};

static struct timeval tv_ms(unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	return tv;
}

fg_store *fg_store_create(const struct fg_store_opts *o)
{
	fg_store *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->host = strdup(o->host);
	if (!st->host) {
		free(st);
		return NULL;
	}
	st->port = o->port;
	st->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 500;
	st->command_timeout_ms = o->command_timeout_ms ? o->command_timeout_ms : 2000;
	st->idle_forget_ms = o->idle_forget_ms;
	st->write_margin_ms = o->write_margin_ms;
	return st;
}

void fg_store_destroy(fg_store *st)
{
	if (!st)
		return;
	if (st->rc)
		redisFree(st->rc);
	free(st->host);
	free(st);
}

static void drop(fg_store *st)
{
	if (st->rc) {
		redisFree(st->rc);
		st->rc = NULL;
	}
}

/* Redis never speaks unasked, so an idle connection that is readable has
 * been closed (a restart, a failover, an idle timeout). Finding that out
 * before sending means a script is never sent on a dead connection, and is
 * never sent twice. */
static bool dead(const redisContext *rc)
{
	struct pollfd pfd = { .fd = rc->fd, .events = POLLIN };
	return poll(&pfd, 1, 0) != 0;
}

static int ensure(fg_store *st)
{
	if (st->rc && dead(st->rc))
		drop(st);
	if (st->rc)
		return FG_OK;
	uint64_t now = fg__mono_ms();
	if (now < st->next_try_ms)
		return FG_EUNAVAIL;
	st->rc = redisConnectWithTimeout(st->host, st->port,
					 tv_ms(st->connect_timeout_ms));
	if (!st->rc || st->rc->err ||
	    redisSetTimeout(st->rc, tv_ms(st->command_timeout_ms)) != REDIS_OK) {
		drop(st);
		st->next_try_ms = now + st->connect_timeout_ms;
		return FG_EUNAVAIL;
	}
	return FG_OK;
}

/* One command; NULL means the connection is gone (and was dropped). */
static redisReply *command(fg_store *st, int argc, const char **argv,
			   const size_t *argvlen)
{
	if (ensure(st) != FG_OK)
		return NULL;
	redisReply *r = redisCommandArgv(st->rc, argc, argv, argvlen);
	if (!r)
		drop(st);
	return r;
}

/* Loads the function library and sends the call again, in one round trip
 * (pipelined). NULL means the connection is gone (and was dropped); a
 * refused load shows as the call's error. */
static redisReply *load_and_run(fg_store *st, struct fg__call *c)
{
	const char *argv[FG__LOAD_ARGC];
	size_t len[FG__LOAD_ARGC];
	redisReply *loaded = NULL, *r = NULL;

	if (ensure(st) != FG_OK)
		return NULL;
	fg__load_argv(argv, len);
	if (redisAppendCommandArgv(st->rc, FG__LOAD_ARGC, argv, len) != REDIS_OK ||
	    redisAppendCommandArgv(st->rc, c->argc, c->argv, c->argvlen) != REDIS_OK ||
	    redisGetReply(st->rc, (void **)&loaded) != REDIS_OK ||
	    redisGetReply(st->rc, (void **)&r) != REDIS_OK) {
		if (loaded)
			freeReplyObject(loaded);
		drop(st);
		return NULL;
	}
	freeReplyObject(loaded);
	return r;
}

/* Runs a script call, loading the library when Redis does not have it.
 * Caller frees. */
static int run(fg_store *st, struct fg__call *c, redisReply **out)
{
	redisReply *r = command(st, c->argc, c->argv, c->argvlen);
	if (r && fg__reply_nofunction(r)) {
		freeReplyObject(r);
		r = load_and_run(st, c);
	}
	if (!r)
		return FG_EUNAVAIL;
	if (r->type == REDIS_REPLY_ERROR) {
		/* LOADING, MASTERDOWN, READONLY after a failover, OOM: Redis
		 * cannot take the change now; nothing was written. */
		freeReplyObject(r);
		return FG_EUNAVAIL;
	}
	*out = r;
	return FG_OK;
}

int fg_store_ping(fg_store *st)
{
	const char *argv[] = { "PING" };
	size_t len[] = { 4 };
	redisReply *r = command(st, 1, argv, len);
	int ok = r && r->type == REDIS_REPLY_STATUS;
	if (r)
		freeReplyObject(r);
	return ok ? FG_OK : FG_EUNAVAIL;
}

int fg_store_sync_key(fg_store *st, const uint8_t *ours, size_t ours_len,
		      uint8_t key_out[FG_KEY_MAX], size_t *len)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t fresh[32];
	char enc[FG_KEY_MAX * 2];

	if (!ours) {
		if (RAND_bytes(fresh, sizeof(fresh)) != 1)
			return FG_EINVAL;
		ours = fresh;
		ours_len = sizeof(fresh);
	}
	if (ours_len < FG_KEY_MIN || ours_len > FG_KEY_MAX)
		return FG_EINVAL;
	for (size_t i = 0; i < ours_len; i++) {
		enc[2 * i] = hex[ours[i] >> 4];
		enc[2 * i + 1] = hex[ours[i] & 15];
	}
	const char *set[] = { "SET", "fg:hmac-key", enc, "NX" };
	size_t setlen[] = { 3, 11, ours_len * 2, 2 };
	redisReply *r = command(st, 4, set, setlen);
	if (!r)
		return FG_EUNAVAIL;
	freeReplyObject(r);
	const char *get[] = { "GET", "fg:hmac-key" };
	size_t getlen[] = { 3, 11 };
	r = command(st, 2, get, getlen);
	if (!r)
		return FG_EUNAVAIL;
	int err = FG_EPROTO;
	if (r->type == REDIS_REPLY_STRING && r->len % 2 == 0 &&
	    r->len / 2 >= FG_KEY_MIN && r->len / 2 <= FG_KEY_MAX) {
		err = FG_OK;
		for (size_t i = 0; i < r->len / 2 && err == FG_OK; i++) {
			char b[3] = { r->str[2 * i], r->str[2 * i + 1], 0 };
			char *end;
			key_out[i] = (uint8_t)strtoul(b, &end, 16);
			if (*end)
				err = FG_EPROTO;
		}
		*len = r->len / 2;
	}
	freeReplyObject(r);
	return err;
}

static int grant_call(fg_store *st, struct fg__call *c, struct fg_grant *out)
{
	redisReply *r;
	int err = run(st, c, &r);
	if (err)
		return err;
	err = fg__parse_grant(r, out);
	freeReplyObject(r);
	return err;
}

int fg_lock_acquire(fg_store *st, const struct fg_acquire *req,
		    struct fg_grant *out)
{
	struct fg__call c;
	if (req->wait_ms > 0 && (!req->waiter_id || !req->gateway_id))
		return FG_EINVAL;
	fg__build_acquire(&c, req, st->idle_forget_ms);
	return grant_call(st, &c, out);
}

int fg_lock_renew(fg_store *st, const char *name, const char *lease,
		  uint32_t ttl_ms, const char *value, size_t value_len,
		  struct fg_grant *out)
{
	struct fg__call c;
	fg__build_renew(&c, name, lease, ttl_ms, value, value_len,
			st->idle_forget_ms);
	return grant_call(st, &c, out);
}

int fg_lock_release(fg_store *st, const char *name, const char *lease,
		    struct fg_grant *out)
{
	struct fg__call c;
	fg__build_release(&c, name, lease, st->write_margin_ms, st->idle_forget_ms);
	return grant_call(st, &c, out);
}

int fg_lock_inspect(fg_store *st, const char *name, struct fg_lock_info *out)
{
	struct fg__call c;
	redisReply *r;
	memset(out, 0, sizeof(*out));
	fg__build_inspect(&c, name, st->idle_forget_ms);
	int err = run(st, &c, &r);
	if (err)
		return err;
	err = fg__parse_info(r, out);
	freeReplyObject(r);
	if (err)
		fg_lock_info_finish(out);
	return err;
}

int fg_lock_check(fg_store *st, const char *name, uint64_t token,
		  struct fg_check *out)
{
	struct fg__call c;
	redisReply *r;
	fg__build_check(&c, name, token, st->idle_forget_ms);
	int err = run(st, &c, &r);
	if (err)
		return err;
	err = fg__parse_check(r, out);
	freeReplyObject(r);
	return err;
}

int fg_lock_admit(fg_store *st, const char *name, uint64_t token,
		  const char *write_id, uint32_t margin_ms, uint32_t longest_ms,
		  struct fg_admit *out)
{
	struct fg__call c;
	redisReply *r;
	fg__build_admit(&c, FG__LUA_ADMIT, name, token, write_id, margin_ms,
			longest_ms, st->idle_forget_ms);
	int err = run(st, &c, &r);
	if (err)
		return err;
	err = fg__parse_admit(r, out);
	freeReplyObject(r);
	return err;
}
