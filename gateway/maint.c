/*
 * maint.c - the maintenance thread: the HMAC key and the health flags.
 *
 * Once a second (and at once on start) it agrees on the sequencer key
 * through Redis unless a key file gave one, and notes whether Redis and
 * the upstream answer. A loop whose Redis call failed marks Redis down at
 * once and has it asked again now. Invariant: gw->key changes only here (or once in
 * main from the key file), always under gw->key_mu, and is never logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway.h"
#include "log.h"

#define PERIOD_MS 1000
#define PROBE_TIMEOUT_MS 500

static int probe_upstream(struct fg_gateway *gw)
{
	const struct fg_upstream *u = &gw->cfg->up;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	int up = 0;

	if (!gw->cfg->upstream || getaddrinfo(u->host, u->port, &hints, &ai) != 0 || !ai)
		return 0;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
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
			}
		}
		close(fd);
	}
	freeaddrinfo(ai);
	atomic_store(&gw->upstream_up, up);
	return up;
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

void fg_maint_redis_failed(struct fg_gateway *gw)
{
	atomic_store(&gw->redis_up, 0);
	pthread_mutex_lock(&gw->maint_mu);
	gw->maint_now = true;
	pthread_cond_signal(&gw->maint_cv);
	pthread_mutex_unlock(&gw->maint_mu);
}

static void *maint_main(void *arg)
{
	struct fg_gateway *gw = arg;
	fg_store *st = fg_store_create(&gw->store_opts);
	int was_redis = -1, was_up = -1;

	pthread_mutex_lock(&gw->maint_mu);
	while (!gw->stopping) {
		pthread_mutex_unlock(&gw->maint_mu);
		int redis = st && fg_store_ping(st) == FG_OK;
		if (redis && !gw->key_from_file)
			sync_key(gw, st);
		atomic_store(&gw->redis_up, redis);
		if (redis != was_redis)
			fg_log_info("redis %s:%d is %s", gw->cfg->redis_host,
				    gw->cfg->redis_port, redis ? "up" : "down");
		was_redis = redis;
		if (gw->cfg->upstream) {
			int up = probe_upstream(gw);
			if (up != was_up)
				fg_log_info("upstream is %s", up ? "up" : "down");
			was_up = up;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += PERIOD_MS / 1000;
		pthread_mutex_lock(&gw->maint_mu);
		if (!gw->stopping && !gw->maint_now)
			pthread_cond_timedwait(&gw->maint_cv, &gw->maint_mu, &ts);
		gw->maint_now = false;
	}
	pthread_mutex_unlock(&gw->maint_mu);
	fg_store_destroy(st);
	return NULL;
}

int fg_maint_start(struct fg_gateway *gw)
{
	return pthread_create(&gw->maint, NULL, maint_main, gw) == 0 ? 0 : -1;
}

void fg_maint_stop(struct fg_gateway *gw)
{
	pthread_mutex_lock(&gw->maint_mu);
	gw->stopping = true;
	pthread_cond_signal(&gw->maint_cv);
	pthread_mutex_unlock(&gw->maint_mu);
	pthread_join(gw->maint, NULL);
}
