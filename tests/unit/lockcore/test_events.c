/*
 * tests/unit/lockcore/test_events.c - the events a lock records (contract
 * v1.5): what the lock functions append to the lock's stream, and the
 * appends of fg_aevents_add() and fg_events_add() (lockcore/astore.c,
 * lockcore/store.c, lockcore/lua/prelude/events.lua).
 *
 * Runs against a real redis-server started on a free loopback port (a
 * missing one fails the test). Each test uses its own lock names and reads
 * the stream with XRANGE from the position it started at, so tests do not
 * see each other's entries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "../../../lockcore/lockcore-private.h"

#define GW "0123456789abcdef"      /* the store's gateway id */
#define GW2 "00000000deadbeef"  /* another gateway, the waiters' */
#define GW_WAITER "fedcba9876543210" /* a waiter's loop (its channel) */
#define WAIT_MS 5000                /* bound on any one answer */

static pid_t redis_pid;
static int redis_port;
static redisContext *rc;   /* the test's own look at Redis */
static fg_topo *topo;
static struct event_base *base;

/* ---- a Redis of the test's own --------------------------------------- */

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	close(fd);
	return ntohs(a.sin_port);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int setup_redis(void **state)
{
	(void)state;
	redis_port = free_port();
	if (redis_port <= 0)
		return -1;
	char port[16];
	snprintf(port, sizeof(port), "%d", redis_port);
	redis_pid = fork();
	if (redis_pid == 0) {
		/* its log is not the test's output */
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		/* small stream nodes, so that MAXLEN ~ trims at a small bound */
		execlp("redis-server", "redis-server", "--port", port,
		       "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		       "--stream-node-max-entries", "10", (char *)NULL);
		_exit(127);
	}
	if (redis_pid < 0)
		return -1;
	uint64_t until = now_ms() + WAIT_MS;
	while (!rc && now_ms() < until) {
		struct timeval tv = { 0, 200000 };
		redisContext *c = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
		if (c && !c->err) {
			redisReply *r = redisCommand(c, "PING");
			if (r && r->type == REDIS_REPLY_STATUS)
				rc = c;
			if (r)
				freeReplyObject(r);
		}
		if (!rc) {
			if (c)
				redisFree(c);
			usleep(20000);
		}
	}
	if (!rc) {
		fprintf(stderr, "redis-server did not start on port %d\n",
			redis_port);
		return -1;
	}
	struct fg_redis_addr addr;
	char err[128];
	char hp[32];
	snprintf(hp, sizeof(hp), "127.0.0.1:%d", redis_port);
	if (fg_redis_addr_parse(hp, &addr, err, sizeof(err)))
		return -1;
	topo = fg_topo_create(&addr, 1000, 2000, NULL);
	base = event_base_new();
	return topo && base ? 0 : -1;
}

static int teardown_redis(void **state)
{
	(void)state;
	if (rc)
		redisFree(rc);
	fg_topo_destroy(topo);
	if (base)
		event_base_free(base);
	if (redis_pid > 0) {
		kill(redis_pid, SIGTERM);
		waitpid(redis_pid, NULL, 0);
	}
	return 0;
}

/* ---- the asynchronous store, driven to each answer -------------------- */

static unsigned gave_back_n; /* give-backs Redis answered */

static void on_gave_back(void *arg, unsigned reason, bool undone)
{
	(void)arg;
	(void)reason;
	(void)undone;
	gave_back_n++;
}

static void run_until(const int *flag)
{
	uint64_t until = now_ms() + WAIT_MS;
	while (!*flag && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_true(*flag);
}

static fg_astore *astore_of(bool events, unsigned retain, const char *gw)
{
	struct fg_store_opts o = {
		.topo = topo, .connect_timeout_ms = 1000,
		.command_timeout_ms = 2000, .idle_forget_ms = 60000,
		.write_margin_ms = 250, .gave_back = on_gave_back,
		.events = events, .events_retain = retain, .gateway_id = gw,
	};
	fg_astore *as = fg_astore_create(base, &o, NULL, NULL, NULL);
	assert_non_null(as);
	uint64_t until = now_ms() + WAIT_MS;
	while (!fg_astore_ready(as) && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_true(fg_astore_ready(as));
	return as;
}

static fg_astore *astore(bool events, unsigned retain)
{
	return astore_of(events, retain, GW);
}

struct answer {
	int done, err;
	struct fg_grant g;
};

static void on_grant(int err, const struct fg_grant *g, void *arg)
{
	struct answer *a = arg;
	a->err = err;
	if (g)
		a->g = *g;
	a->done = 1;
}

static struct fg_grant acquire(fg_astore *as, const struct fg_acquire *q)
{
	struct answer a = { 0 };
	assert_int_equal(fg_alock_acquire(as, q, on_grant, &a), 0);
	run_until(&a.done);
	assert_int_equal(a.err, 0);
	return a.g;
}

static struct fg_grant release(fg_astore *as, const char *name,
			       const char *lease)
{
	struct answer a = { 0 };
	assert_int_equal(fg_alock_release(as, name, lease, NULL, on_grant, &a), 0);
	run_until(&a.done);
	assert_int_equal(a.err, 0);
	return a.g;
}

/* ---- the stream, as the test reads it ---------------------------------- */

/* One entry's fields (pointers into the reply; NULL: absent). */
struct entry {
	const char *k, *l, *t, *p, *o, *c, *g, *d;
	size_t nfields;
};

static redisReply *entries;  /* the last read_after()'s XRANGE reply */

static const char *field(const redisReply *fv, const char *name)
{
	for (size_t i = 0; i + 1 < fv->elements; i += 2)
		if (strcmp(fv->element[i]->str, name) == 0)
			return fv->element[i + 1]->str;
	return NULL;
}

/* The id of the newest entry ("0-0" for none): where a test starts. */
static void mark(char id[64])
{
	redisReply *r = redisCommand(rc, "XREVRANGE %s + - COUNT 1", FG__EV_ONE);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	snprintf(id, 64, "%s", r->elements ? r->element[0]->element[0]->str
					    : "0-0");
	freeReplyObject(r);
}

/* The entries after `id` (at most n), into e[]; how many there are. */
static size_t read_after(const char *id, struct entry *e, size_t n)
{
	if (entries)
		freeReplyObject(entries);
	entries = redisCommand(rc, "XRANGE %s (%s +", FG__EV_ONE, id);
	assert_non_null(entries);
	assert_int_equal(entries->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < entries->elements && i < n; i++) {
		const redisReply *fv = entries->element[i]->element[1];
		e[i] = (struct entry){
			.k = field(fv, "k"), .l = field(fv, "l"),
			.t = field(fv, "t"), .p = field(fv, "p"),
			.o = field(fv, "o"), .c = field(fv, "c"),
			.g = field(fv, "g"), .d = field(fv, "d"),
			.nfields = fv->elements / 2,
		};
	}
	return entries->elements;
}

/* No field of any entry after `id` holds any of the leases. */
static void no_lease_after(const char *id, const char *const *leases,
			   size_t n)
{
	redisReply *r = redisCommand(rc, "XRANGE %s (%s +", FG__EV_ONE, id);
	assert_non_null(r);
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *fv = r->element[i]->element[1];
		for (size_t f = 0; f < fv->elements; f++)
			for (size_t k = 0; k < n; k++)
				assert_null(strstr(fv->element[f]->str, leases[k]));
	}
	freeReplyObject(r);
}

static void assert_str(const char *got, const char *want)
{
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
}

static void tok_is(const char *got, uint64_t want)
{
	char w[24];
	snprintf(w, sizeof(w), "%llu", (unsigned long long)want);
	assert_str(got, w);
}

#define L1 "LEASEAAAAAAAAAAAAAAAA1"
#define L2 "LEASEAAAAAAAAAAAAAAAA2"
#define L3 "LEASEAAAAAAAAAAAAAAAA3"

/* ---- the tests ------------------------------------------------------- */

/* A fresh grant (the short path) and its release (the short path too):
 * granted, then released, with every field the call knew. */
static void test_grant_and_release(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/one", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 30000, .owner = "build \"7\"", .owner_len = 9,
		.client = "10.0.0.7", .principal = "alice",
	};
	struct fg_grant g = acquire(as, &q);
	assert_int_equal(g.status, FG_GRANTED);
	g = release(as, "ev/one", L1);
	assert_int_equal(g.status, FG_GRANTED);

	struct entry e[4];
	assert_int_equal(read_after(at, e, 4), 2);
	assert_str(e[0].k, "granted");
	assert_str(e[0].l, "ev/one");
	tok_is(e[0].t, g.token);
	assert_str(e[0].p, "alice");
	assert_str(e[0].o, "build \"7\"");
	assert_str(e[0].c, "10.0.0.7");
	assert_str(e[0].g, GW);
	assert_str(e[0].d, "{\"mode\":\"exclusive\",\"ttl_ms\":30000}");
	assert_int_equal(e[0].nfields, 8);
	assert_str(e[1].k, "released");
	assert_str(e[1].l, "ev/one");
	tok_is(e[1].t, g.token);
	assert_str(e[1].p, "alice");
	assert_str(e[1].o, "build \"7\"");
	assert_str(e[1].c, "10.0.0.7");
	assert_str(e[1].g, GW);
	assert_null(e[1].d);
	static const char *const leases[] = { L1 };
	no_lease_after(at, leases, 1);
	fg_astore_destroy(as);
}

/* Re-entry and renewal record nothing; a release that leaves a hold
 * records nothing; the last hold's release is released (the general
 * path: the lease held twice). Open mode: no principal field. */
static void test_reentry_renew_silent(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/re", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 20000,
	};
	struct fg_grant g = acquire(as, &q);
	assert_int_equal(g.status, FG_GRANTED);
	struct fg_acquire re = q;
	re.reenter = L1;
	re.lease = L2;
	assert_int_equal(acquire(as, &re).holds, 2);
	struct answer a = { 0 };
	assert_int_equal(fg_alock_renew(as, "ev/re", L1, NULL, 25000, NULL, 0,
					on_grant, &a), 0);
	run_until(&a.done);
	assert_int_equal(a.g.status, FG_GRANTED);
	struct entry e[4];
	assert_int_equal(read_after(at, e, 4), 1);
	assert_int_equal(release(as, "ev/re", L1).holds, 1);
	assert_int_equal(read_after(at, e, 4), 1);
	assert_int_equal(release(as, "ev/re", L1).holds, 0);
	assert_int_equal(read_after(at, e, 4), 2);
	assert_str(e[0].k, "granted");
	assert_null(e[0].p);
	assert_null(e[0].c); /* no client given */
	assert_str(e[1].k, "released");
	tok_is(e[1].t, g.token);
	assert_null(e[1].p);
	fg_astore_destroy(as);
}

/* Shared holders: a join is granted under the grant's token; each
 * lease's leaving is released. */
static void test_shared_join(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/sh", .lease = L1, .mode = FG_MODE_SHARED,
		.ttl_ms = 15000, .principal = "bob", .client = "::1",
	};
	struct fg_grant g = acquire(as, &q);
	q.lease = L2;
	q.principal = "carol";
	assert_int_equal(acquire(as, &q).token, g.token);
	release(as, "ev/sh", L1);
	release(as, "ev/sh", L2);
	struct entry e[8];
	assert_int_equal(read_after(at, e, 8), 4);
	assert_str(e[0].k, "granted");
	assert_str(e[0].p, "bob");
	assert_str(e[0].d, "{\"mode\":\"shared\",\"ttl_ms\":15000}");
	assert_str(e[1].k, "granted");
	assert_str(e[1].p, "carol");
	assert_str(e[1].c, "::1");
	tok_is(e[1].t, g.token);
	assert_str(e[2].k, "released");
	assert_str(e[2].p, "bob");
	assert_str(e[3].k, "released");
	assert_str(e[3].p, "carol");
	tok_is(e[3].t, g.token);
	fg_astore_destroy(as);
}

/* A waiter handed the lock at a release: released, then granted with the
 * waiter's principal, owner, client and gateway (the one it was queued
 * through, not its loop's channel nor the releasing gateway), "waited":
 * true. */
static void test_handoff(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	fg_astore *as2 = astore_of(true, 1000, GW2);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/wait", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .principal = "alice", .client = "10.0.0.1",
	};
	struct fg_grant g1 = acquire(as, &q);
	struct fg_acquire w = {
		.name = "ev/wait", .lease = L2, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 12000, .wait_ms = 30000, .waiter_id = "wid-1",
		.gateway_id = GW_WAITER, .liveness_ms = 10000,
		.max_waiters = 10, .owner = "job-2", .owner_len = 5,
		.client = "10.0.0.2", .principal = "dave",
	};
	assert_int_equal(acquire(as2, &w).status, FG_QUEUED);
	release(as, "ev/wait", L1);
	struct entry e[8];
	assert_int_equal(read_after(at, e, 8), 3);
	assert_str(e[0].k, "granted");
	assert_str(e[1].k, "released");
	tok_is(e[1].t, g1.token);
	assert_str(e[1].p, "alice");
	assert_str(e[2].k, "granted");
	assert_str(e[2].p, "dave");
	assert_str(e[2].o, "job-2");
	assert_str(e[2].c, "10.0.0.2");
	assert_str(e[1].g, GW);
	assert_str(e[2].g, GW2);
	assert_str(e[2].d, "{\"mode\":\"exclusive\",\"ttl_ms\":12000,"
			   "\"waited\":true}");
	assert_true(strtoull(e[2].t, NULL, 10) > g1.token);
	static const char *const leases[] = { L1, L2 };
	no_lease_after(at, leases, 2);
	fg_astore_destroy(as2);
	fg_astore_destroy(as);
}

/* A break: broken with the grant's token, its holder, and who broke it;
 * the next waiter's grant after it. */
static void test_break(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/brk", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .principal = "alice", .client = "10.0.0.1",
		.owner = "o1", .owner_len = 2,
	};
	struct fg_grant g = acquire(as, &q);
	struct fg_acquire w = {
		.name = "ev/brk", .lease = L2, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .wait_ms = 30000, .waiter_id = "wid-2",
		.gateway_id = GW_WAITER, .liveness_ms = 10000,
		.max_waiters = 10,
	};
	assert_int_equal(acquire(as, &w).status, FG_QUEUED);
	struct answer a = { 0 };
	assert_int_equal(fg_alock_break_by(as, "ev/brk", g.token, "root",
					   on_grant, &a), 0);
	run_until(&a.done);
	assert_int_equal(a.g.status, FG_REMOVED);
	struct entry e[8];
	assert_int_equal(read_after(at, e, 8), 3);
	assert_str(e[1].k, "broken");
	tok_is(e[1].t, g.token);
	assert_str(e[1].p, "alice");
	assert_str(e[1].o, "o1");
	assert_str(e[1].c, "10.0.0.1");
	assert_str(e[1].g, GW);
	assert_str(e[1].d, "{\"by\":\"root\"}");
	assert_str(e[2].k, "granted");
	assert_str(e[2].d, "{\"mode\":\"exclusive\",\"ttl_ms\":10000,"
			   "\"waited\":true}");
	/* a break of a token that is not live records nothing */
	a.done = 0;
	assert_int_equal(fg_alock_break(as, "ev/brk", g.token, on_grant, &a), 0);
	run_until(&a.done);
	assert_int_equal(a.g.status, FG_EXPIRED);
	assert_int_equal(read_after(at, e, 8), 3);
	fg_astore_destroy(as);
}

/* Give-backs: a grant's (given_back with the reason and its token) and a
 * waiter's (given_back with the waiter's principal, no token). */
static void test_giveback(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/gb", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .principal = "alice",
	};
	struct fg_grant g = acquire(as, &q);
	struct fg_acquire w = {
		.name = "ev/gb", .lease = L2, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .wait_ms = 30000, .waiter_id = "wid-3",
		.gateway_id = GW_WAITER, .liveness_ms = 10000,
		.max_waiters = 10, .principal = "erin", .client = "10.0.0.3",
	};
	assert_int_equal(acquire(as, &w).status, FG_QUEUED);
	unsigned before = gave_back_n;
	assert_int_equal(fg_alock_give_back(as, "ev/gb", L2, "wid-3",
					    FG_GIVEBACK_UNDELIVERED), 0);
	uint64_t until = now_ms() + WAIT_MS;
	while (gave_back_n == before && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_int_equal(gave_back_n, before + 1);
	assert_int_equal(fg_alock_give_back(as, "ev/gb", L1, NULL,
					    FG_GIVEBACK_TIMEOUT), 0);
	until = now_ms() + WAIT_MS;
	while (gave_back_n == before + 1 && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_int_equal(gave_back_n, before + 2);
	struct entry e[8];
	assert_int_equal(read_after(at, e, 8), 3);
	assert_str(e[1].k, "given_back");
	assert_null(e[1].t);
	assert_str(e[1].p, "erin");
	assert_str(e[1].c, "10.0.0.3");
	assert_str(e[1].g, GW);
	assert_str(e[1].d, "{\"reason\":\"undelivered\"}");
	assert_str(e[2].k, "given_back");
	tok_is(e[2].t, g.token);
	assert_str(e[2].p, "alice");
	assert_str(e[2].g, GW);
	assert_str(e[2].d, "{\"reason\":\"timeout\"}");
	static const char *const leases[] = { L1, L2 };
	no_lease_after(at, leases, 2);
	fg_astore_destroy(as);
}

/* Events off: the same cycle appends nothing, and neither do the
 * appends of the gateway's own events. */
static void test_off(void **state)
{
	(void)state;
	fg_astore *as = astore(false, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/off", .lease = L3, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 10000, .principal = "alice",
	};
	struct fg_grant g = acquire(as, &q);
	assert_int_equal(g.status, FG_GRANTED);
	release(as, "ev/off", L3);
	struct fg_event_rec r = { .kind = "expired", .lock = "ev/off" };
	assert_int_equal(fg_aevents_add(as, &r), 0);
	struct fg_store_opts o = { .topo = topo, .events = false,
				   .gateway_id = GW };
	fg_store *st = fg_store_create(&o);
	assert_int_equal(fg_events_add(st, &r), 0);
	fg_store_destroy(st);
	/* a round trip behind the append, had one been queued */
	struct answer a = { 0 };
	assert_int_equal(fg_alock_release(as, "ev/off", L3, NULL, on_grant, &a), 0);
	run_until(&a.done);
	struct entry e[2];
	assert_int_equal(read_after(at, e, 2), 0);
	fg_astore_destroy(as);
}

/* The gateway's appends: every field given, only those, the gateway id
 * the store's; a failure counted; a kind required. */
static void test_append(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_event_rec r = {
		.kind = "refused", .lock = "ev/ap", .principal = "alice",
		.owner = "", .client = "10.1.1.1",
		.detail = "{\"code\":\"stale_token\",\"method\":\"PUT\","
			  "\"path\":\"/a/b\",\"count\":3}",
		.token = 18446744073709551615ull, .has_token = true,
	};
	assert_int_equal(fg_aevents_add(as, &r), 0);
	struct fg_event_rec x = { .kind = "lease_lost", .lock = "ev/ap" };
	assert_int_equal(fg_aevents_add(as, &x), 0);
	struct fg_event_rec bad = { .lock = "ev/ap" };
	assert_int_equal(fg_aevents_add(as, &bad), FG_EINVAL);
	/* a lock call behind them on the same connection: answered after */
	struct answer a = { 0 };
	assert_int_equal(fg_alock_release(as, "ev/ap", L1, NULL, on_grant, &a), 0);
	run_until(&a.done);

	struct fg_store_opts o = { .topo = topo, .events = true,
				   .events_retain = 1000, .gateway_id = GW };
	fg_store *st = fg_store_create(&o);
	struct fg_event_rec y = { .kind = "expired", .lock = "ev/ap",
				  .token = 42, .has_token = true };
	assert_int_equal(fg_events_add(st, &y), 0);
	assert_int_equal(fg_events_add(st, &bad), FG_EINVAL);

	struct entry e[4];
	assert_int_equal(read_after(at, e, 4), 3);
	assert_str(e[0].k, "refused");
	assert_str(e[0].l, "ev/ap");
	assert_str(e[0].t, "18446744073709551615");
	assert_str(e[0].p, "alice");
	assert_null(e[0].o);
	assert_str(e[0].c, "10.1.1.1");
	assert_str(e[0].g, GW);
	assert_str(e[0].d, r.detail);
	assert_int_equal(e[0].nfields, 7);
	assert_str(e[1].k, "lease_lost");
	assert_null(e[1].t);
	assert_int_equal(e[1].nfields, 3);
	assert_str(e[2].k, "expired");
	assert_str(e[2].t, "42");
	assert_int_equal(fg_aevents_failed(as), 0);

	/* a stream Redis will not append to (another type under its name):
	 * the async append is counted, the blocking one answers it */
	redisReply *rr = redisCommand(rc, "RENAME %s ev-kept", FG__EV_ONE);
	freeReplyObject(rr);
	rr = redisCommand(rc, "SET %s x", FG__EV_ONE);
	freeReplyObject(rr);
	assert_int_equal(fg_aevents_add(as, &x), 0);
	struct answer b = { 0 };
	assert_int_equal(fg_alock_release(as, "ev/ap", L1, NULL, on_grant, &b), 0);
	run_until(&b.done);
	assert_int_equal(fg_aevents_failed(as), 1);
	assert_int_equal(fg_events_add(st, &y), FG_EUNAVAIL);
	rr = redisCommand(rc, "RENAME ev-kept %s", FG__EV_ONE);
	freeReplyObject(rr);
	fg_store_destroy(st);
	fg_astore_destroy(as);
}

/* MAXLEN ~ events_retain on every append: the stream stays near the
 * bound (whole nodes of stream-node-max-entries, 10 here, are trimmed),
 * both for the lock functions' appends and the gateway's. */
static void test_retain(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 20);
	for (int i = 0; i < 60; i++) {
		struct fg_acquire q = {
			.name = "ev/ret", .lease = L1,
			.mode = FG_MODE_EXCLUSIVE, .ttl_ms = 10000,
		};
		acquire(as, &q);
		release(as, "ev/ret", L1);
	}
	redisReply *r = redisCommand(rc, "XLEN %s", FG__EV_ONE);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	assert_true(r->integer >= 20 && r->integer <= 20 + 10);
	freeReplyObject(r);
	struct fg_event_rec x = { .kind = "expired", .lock = "ev/ret" };
	for (int i = 0; i < 100; i++)
		assert_int_equal(fg_aevents_add(as, &x), 0);
	struct answer a = { 0 };
	assert_int_equal(fg_alock_release(as, "ev/ret", L1, NULL, on_grant, &a), 0);
	run_until(&a.done);
	r = redisCommand(rc, "XLEN %s", FG__EV_ONE);
	assert_true(r->integer >= 20 && r->integer <= 20 + 10);
	freeReplyObject(r);
	fg_astore_destroy(as);
}

struct admitted {
	int done, err;
	struct fg_admit a;
};

static void on_admit(int err, const struct fg_admit *a, void *arg)
{
	struct admitted *x = arg;
	x->err = err;
	if (a)
		x->a = *a;
	x->done = 1;
}

/* A grant that expired with a waiter queued, and no tick: the next call
 * that looks at the lock hands it on, a write's admission (of the expired
 * grant's token, refused) or a check, and records the waiter's grant. */
static void test_handoff_inside_admit_and_check(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	for (int round = 0; round < 2; round++) {
		const char *name = round ? "ev/chk" : "ev/adm";
		struct fg_acquire q = {
			.name = name, .lease = L1, .mode = FG_MODE_EXCLUSIVE,
			.ttl_ms = 150,
		};
		struct fg_grant g = acquire(as, &q);
		struct fg_acquire w = {
			.name = name, .lease = L2, .mode = FG_MODE_SHARED,
			.ttl_ms = 9000, .wait_ms = 30000, .waiter_id = "wid-4",
			.gateway_id = GW_WAITER, .liveness_ms = 30000,
			.max_waiters = 10, .principal = "frank",
		};
		assert_int_equal(acquire(as, &w).status, FG_QUEUED);
		usleep(300 * 1000); /* past the grant's ttl: it expired */
		if (round == 0) {
			struct admitted x = { 0 };
			assert_int_equal(fg_alock_admit(as, name, g.token, GW "-w1",
							250, 1000, on_admit,
							&x), 0);
			run_until(&x.done);
			assert_int_equal(x.err, 0);
			assert_int_equal(x.a.status, FG_ADMIT_STALE);
		} else {
			struct fg_store_opts o = {
				.topo = topo, .events = true,
				.events_retain = 1000, .gateway_id = GW,
				.idle_forget_ms = 60000,
			};
			fg_store *st = fg_store_create(&o);
			struct fg_check c;
			assert_int_equal(fg_lock_check(st, name, g.token, &c), 0);
			assert_int_equal(c.status, FG_CHECK_STALE);
			fg_store_destroy(st);
		}
	}
	struct entry e[8];
	assert_int_equal(read_after(at, e, 8), 4);
	for (int i = 0; i < 4; i += 2) {
		assert_str(e[i].k, "granted");
		assert_str(e[i + 1].k, "granted");
		assert_str(e[i + 1].p, "frank");
		assert_str(e[i + 1].g, GW);
		assert_str(e[i + 1].d, "{\"mode\":\"shared\",\"ttl_ms\":9000,"
				       "\"waited\":true}");
	}
	assert_str(e[1].l, "ev/adm");
	assert_str(e[3].l, "ev/chk");
	fg_astore_destroy(as);
}

/* A re-entry undone (its answer lost) after its lease's other hold was
 * released: the undo ends the lease, given_back; an undo that leaves a
 * hold records nothing, as the re-entry itself did not. */
static void test_undo_of_a_reentry(void **state)
{
	(void)state;
	fg_astore *as = astore(true, 1000);
	char at[64];
	mark(at);
	struct fg_acquire q = {
		.name = "ev/undo", .lease = L1, .mode = FG_MODE_EXCLUSIVE,
		.ttl_ms = 20000, .principal = "gina",
	};
	struct fg_grant g = acquire(as, &q);
	struct fg_acquire re = q;
	re.reenter = L1;
	re.lease = L2;
	struct fg_grant r1 = acquire(as, &re);
	struct fg_grant r2 = acquire(as, &re);
	assert_int_equal(r2.holds, 3);
	assert_true(r1.undo_id[0] && r2.undo_id[0]);
	unsigned before = gave_back_n;
	assert_int_equal(fg_alock_undo(as, "ev/undo", L1, r2.undo_id,
				       FG_GIVEBACK_UNDELIVERED), 0);
	uint64_t until = now_ms() + WAIT_MS;
	while (gave_back_n == before && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_int_equal(gave_back_n, before + 1);
	struct entry e[4];
	assert_int_equal(read_after(at, e, 4), 1); /* holds 2 left */
	assert_int_equal(release(as, "ev/undo", L1).holds, 1);
	assert_int_equal(fg_alock_undo(as, "ev/undo", L1, r1.undo_id,
				       FG_GIVEBACK_TIMEOUT), 0);
	until = now_ms() + WAIT_MS;
	while (gave_back_n == before + 1 && now_ms() < until)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(500);
	assert_int_equal(gave_back_n, before + 2);
	assert_int_equal(read_after(at, e, 4), 2);
	assert_str(e[1].k, "given_back");
	tok_is(e[1].t, g.token);
	assert_str(e[1].p, "gina");
	assert_str(e[1].d, "{\"reason\":\"timeout\"}");
	fg_astore_destroy(as);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grant_and_release),
		cmocka_unit_test(test_reentry_renew_silent),
		cmocka_unit_test(test_shared_join),
		cmocka_unit_test(test_handoff),
		cmocka_unit_test(test_break),
		cmocka_unit_test(test_giveback),
		cmocka_unit_test(test_undo_of_a_reentry),
		cmocka_unit_test(test_handoff_inside_admit_and_check),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_retain),
	};
	int rc_ = cmocka_run_group_tests(tests, setup_redis, teardown_redis);
	if (entries)
		freeReplyObject(entries);
	return rc_;
}
