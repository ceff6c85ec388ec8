/*
 * maint.c - the maintenance thread: the HMAC key and the health flags.
 *
 * Once a second (and at once on start) it finds where Redis is (the
 * Sentinels' master, the cluster's slot map: fencegate/topo.h), agrees on
 * the sequencer key through Redis unless a key file gave one, and notes
 * whether Redis and the upstream answer. Each going down and coming back
 * is logged with the address and the reason, at most one line per
 * dependency per FG_FLAP_QUIET_MS (base/flap.h). Once a period it asks
 * Redis about the grants made here whose lease ended (proc/held.h). A
 * loop whose Redis call failed
 * marks Redis down at once and has all of it asked again now; while Redis
 * is down or moving, it looks every RETRY_MS. When the topology moves,
 * every loop is told. Invariant: gw->key changes only here (or once in
 * main from the key file), always under gw->key_mu, and is never logged;
 * the topology is discovered only here.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/flap.h"
#include "proc/gateway.h"
#include "proc/held.h"
#include "base/log.h"

#define PERIOD_MS 1000
#define RETRY_MS 100        /* while Redis is down or its topology moving */
/* The listing index's sweep (fg_lock_index_sweep()): SWEEP_NAMES names
 * every SWEEP_MS per gateway while it finds nothing to drop, every
 * PERIOD_MS while it does or has not reached the end: a few hundred Redis
 * calls a second at most, and an index full of idle names shrinks at 100
 * names a second per gateway. */
#define SWEEP_MS 5000
#define SWEEP_NAMES 100
#define REFRESH_MIN_MS 50
#define PROBE_TIMEOUT_MS 500

/* Connects to the upstream (a TCP handshake, no request): 1 when it
 * answered, else 0 with why[] saying what failed. */
static int probe_upstream(struct fg_gateway *gw, char *why, size_t n)
{
	const struct fg_upstream *u = &gw->cfg->up;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	int up = 0;

	int gai = getaddrinfo(u->host, u->port, &hints, &ai);
	if (gai != 0 || !ai) {
		snprintf(why, n, "%s", gai ? gai_strerror(gai) : "no address");
		goto out;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, n, "socket: %s", strerror(errno));
		goto out;
	}
	int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
	if (r == 0) {
		up = 1;
	} else if (errno == EINPROGRESS) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		if (poll(&pfd, 1, PROBE_TIMEOUT_MS) == 1) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			up = soerr == 0;
			if (!up)
				snprintf(why, n, "%s", strerror(soerr));
		} else {
			snprintf(why, n, "no answer to connect within %d ms",
				 PROBE_TIMEOUT_MS);
		}
	} else {
		snprintf(why, n, "%s", strerror(errno));
	}
	close(fd);
out:
	if (ai)
		freeaddrinfo(ai);
	atomic_store(&gw->upstream_up, up);
	return up;
}

/* Logs what the rate limit lets through of one dependency's state (what:
 * "redis 127.0.0.1:6379", "upstream 127.0.0.1:8081"; why: the reason it
 * is down). */
static void tell(struct fg_flap *f, const char *what, bool up, const char *why)
{
	struct fg_flap_say say;
	char more[96] = "";

	switch (fg_flap_note(f, up, fg_clock_ms(), &say)) {
	case FG_FLAP_NONE:
		return;
	case FG_FLAP_FIRST_UP:
		fg_log_info("%s is up", what);
		return;
	case FG_FLAP_DOWN:
		if (say.hidden)
			snprintf(more, sizeof(more), " (%u changes up and down "
				 "not logged)", say.hidden);
		fg_log_warn("%s is down: %s%s", what, why[0] ? why : "no answer", more);
		return;
	case FG_FLAP_UP:
		if (say.down_ms && say.hidden)
			snprintf(more, sizeof(more), " after %.1f s down (%u changes "
				 "not logged)", (double)say.down_ms / 1000, say.hidden);
		else if (say.down_ms)
			snprintf(more, sizeof(more), " after %.1f s down",
				 (double)say.down_ms / 1000);
		else
			snprintf(more, sizeof(more), " (%u changes up and down "
				 "not logged)", say.hidden);
		fg_log_warn("%s is up again%s", what, more);
		return;
	case FG_FLAP_STILL_DOWN:
		fg_log_error("%s is still down after %.0f s: %s", what,
			     (double)say.down_ms / 1000, why[0] ? why : "no answer");
		return;
	}
}

static void sync_key(struct fg_gateway *gw, fg_store *st)
{
	uint8_t mine[FG_KEY_MAX], agreed[FG_KEY_MAX];
	size_t mine_len = 0, agreed_len = 0;

	fg_gateway_key(gw, mine, &mine_len);
	/* SET NX ours (or a fresh one), then adopt whatever is there: after
	 * Redis lost its data, the first gateway back restores the key that
	 * all of them were using. */
	int err = fg_store_sync_key(st, mine_len ? mine : NULL, mine_len,
				    agreed, &agreed_len);
	if (err) {
		if (err != FG_EUNAVAIL)
			fg_log_warn("cannot agree on the sequencer key: %s",
				    fg_strerror(err));
		return;
	}
	if (mine_len == agreed_len && memcmp(mine, agreed, mine_len) == 0)
		return;
	fg_gateway_set_key(gw, agreed, agreed_len);
	if (mine_len)
		fg_log_warn("the sequencer key in Redis changed; using the new one "
			    "(earlier sequencers no longer verify)");
	else
		fg_log_info("sequencer key agreed through Redis");
}

/* Wakes the maintenance thread (any thread, any time). */
static void wake(struct fg_gateway *gw)
{
	uint64_t one = 1;
	ssize_t n = write(gw->maint_fd, &one, sizeof(one));
	(void)n; /* a full counter is a wake-up already pending */
}

static void on_suspect(void *arg)
{
	wake(arg);
}

void fg_maint_redis_failed(struct fg_gateway *gw)
{
	atomic_store(&gw->redis_up, 0);
	wake(gw);
}

/* Sleeps until ms pass, a wake-up, or a Sentinel announcing a switch. */
static void nap(struct fg_gateway *gw, int ms)
{
	struct pollfd p[2] = {
		{ .fd = gw->maint_fd, .events = POLLIN },
		{ .fd = fg_topo_watch_fd(gw->topo), .events = POLLIN },
	};
	nfds_t n = p[1].fd >= 0 ? 2 : 1;
	if (poll(p, n, ms) <= 0)
		return;
	if (p[0].revents) {
		uint64_t v;
		ssize_t r = read(gw->maint_fd, &v, sizeof(v));
		(void)r;
	}
	if (n == 2 && p[1].revents && fg_topo_watch_read(gw->topo)) {
		fg_log_info("a Sentinel announced a new master");
		fg_topo_suspect(gw->topo);
	}
}

/* Finds the masters again when asked to (or once a period), and tells
 * every loop when they moved. At most one refresh per REFRESH_MIN_MS, so
 * a flood of failing calls costs Redis one look, not one each. */
static int discover(struct fg_gateway *gw, uint64_t *last_ms, bool periodic)
{
	uint64_t now = fg_clock_ms();
	if (!fg_topo_suspected(gw->topo) && !periodic)
		return 0;
	if (now - *last_ms < REFRESH_MIN_MS)
		return 1; /* asked for again soon */
	*last_ms = now;
	uint64_t gen = fg_topo_gen(gw->topo);
	int err = fg_topo_refresh(gw->topo);
	if (fg_topo_gen(gw->topo) != gen) {
		fg_log_info("redis topology changed (generation %llu)",
			    (unsigned long long)fg_topo_gen(gw->topo));
		if (gw->topology_moved)
			gw->topology_moved(gw);
	}
	return err != FG_OK;
}

static void *maint_main(void *arg)
{
	struct fg_gateway *gw = arg;
	fg_store *st = fg_store_create(&gw->store_opts);
	uint64_t last_refresh = 0, last_probe = 0, last_upstream = 0;
	uint64_t last_sweep = fg_clock_ms();
	char sweep_after[FG_NAME_MAX + 1] = "";
	bool sweep_busy = false;
	struct fg_flap redis_flap, up_flap;
	char redis_what[FG_HOST_MAX + 32], up_what[FG_HOST_MAX + 32];
	char up_why[160] = "";

	fg_flap_init(&redis_flap);
	fg_flap_init(&up_flap);
	snprintf(redis_what, sizeof(redis_what), "redis %s:%d%s",
		 gw->cfg->redis_host, gw->cfg->redis_port,
		 gw->cfg->redis.mode == FG_REDIS_SENTINEL ? " (sentinel)" :
		 gw->cfg->redis.mode == FG_REDIS_CLUSTER ? " (cluster)" : "");
	/* by host and port: the upstream's URL may carry a password */
	snprintf(up_what, sizeof(up_what), "upstream %s%s%s:%s",
		 strchr(gw->cfg->up.host, ':') ? "[" : "", gw->cfg->up.host,
		 strchr(gw->cfg->up.host, ':') ? "]" : "", gw->cfg->up.port);
	while (!atomic_load(&gw->stopping)) {
		uint64_t now = fg_clock_ms();
		bool periodic = now - last_probe >= PERIOD_MS;
		int redis = atomic_load(&gw->redis_up);
		/* while Redis is down, where it is may be what changed (a
		 * gateway started before its Sentinels or its cluster) */
		int again = discover(gw, &last_refresh, periodic || !redis) ||
			    fg_topo_suspected(gw->topo);
		if (periodic || !redis) {
			last_probe = now;
			redis = st && fg_store_ping(st) == FG_OK;
			if (redis && !gw->key_from_file)
				sync_key(gw, st);
			atomic_store(&gw->redis_up, redis);
			tell(&redis_flap, redis_what, redis,
			     st ? fg_store_why(st) : "out of memory");
			if (redis)
				fg_held_check_due(st, gw->cfg->events);
		}
		if (redis && st &&
		    now - last_sweep >= (sweep_busy ? PERIOD_MS : SWEEP_MS)) {
			unsigned dropped = 0;
			last_sweep = now;
			int serr = fg_lock_index_sweep(st, sweep_after, SWEEP_NAMES,
						       &dropped);
			sweep_busy = serr == FG_OK && (dropped > 0 || sweep_after[0]);
			if (dropped)
				fg_log_debug("listing index: %u idle locks dropped", dropped);
		}
		if (now - last_upstream >= PERIOD_MS && gw->cfg->upstream) {
			last_upstream = now;
			int up = probe_upstream(gw, up_why, sizeof(up_why));
			tell(&up_flap, up_what, up, up_why);
		}
		/* while Redis is down or moving, look again soon */
		nap(gw, again || !redis ? RETRY_MS : PERIOD_MS);
	}
	fg_store_destroy(st);
	atomic_store(&gw->maint_done, true);
	return NULL;
}

/* The loops call the suspect hook from their own threads, and the hook is
 * a plain pointer: it is set here, before any loop thread is created, and
 * cleared in fg_maint_stop(), after every loop thread was joined. */
int fg_maint_start(struct fg_gateway *gw)
{
	fg_topo_set_hook(gw->topo, on_suspect, gw);
	atomic_store(&gw->maint_done, false);
	if (pthread_create(&gw->maint, NULL, maint_main, gw) != 0) {
		fg_topo_set_hook(gw->topo, NULL, NULL);
		return -1;
	}
	return 0;
}

void fg_maint_ask_stop(struct fg_gateway *gw)
{
	atomic_store(&gw->stopping, true);
	wake(gw);
}

/* The thread says it is done, then returns: joining it after that waits
 * for no more than its return. (A join found by pthread_tryjoin_np()
 * polling was once reported by ThreadSanitizer as a leaked thread.) */
bool fg_maint_joined(struct fg_gateway *gw)
{
	if (!atomic_load(&gw->maint_done))
		return false;
	pthread_join(gw->maint, NULL);
	fg_topo_set_hook(gw->topo, NULL, NULL);
	return true;
}

void fg_maint_let_go(struct fg_gateway *gw)
{
	if (atomic_load(&gw->maint_done))
		pthread_join(gw->maint, NULL);
	else
		pthread_detach(gw->maint);
}

void fg_maint_stop(struct fg_gateway *gw)
{
	fg_maint_ask_stop(gw);
	pthread_join(gw->maint, NULL);
	fg_topo_set_hook(gw->topo, NULL, NULL);
}
