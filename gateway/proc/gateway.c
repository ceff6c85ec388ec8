/*
 * gateway.c - the services every loop shares: the settings, the gateway's
 * id, the Redis connection options (credentials included), the HMAC key,
 * the auth table in force and the health flags. The only mutexes and
 * atomics of the request path's state are here and in proc/ beside it.
 *
 * Invariant: after fg_gateway_init() these are read-only, except the key
 * (under key_mu, changed only by the maintenance thread), the auth table
 * in force (under auth_mu, replaced on SIGHUP; a loop sees a new one by
 * its generation, one atomic load), the health flags, the loops'
 * heartbeats and the stop's counts (atomic); no loop owns any of them,
 * so loops never wait on each other. The Redis password goes to the topology (which keeps the copy
 * every connection logs in with) and into no log line.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "base/auth.h"
#include "base/clock.h"
#include "proc/gateway.h"
#include "base/log.h"

/* Every connection retries a refused login on its own pace (a loop's
 * every 200 ms, the maintenance thread's every 100 ms): one line in this
 * long says why Redis is down without flooding the log. */
#define REFUSED_LOG_EVERY_MS 10000

static atomic_uint_fast64_t refused_logged_at;

/* Told by lockcore, on any thread, of a refusal (fg_redis_auth.refused):
 * the user and Redis' error, never the password. */
static void redis_refused(void *arg, const char *user,
			  const struct fg_redis_node *node, const char *why)
{
	(void)arg;
	uint64_t now = fg_clock_ms();
	uint_fast64_t last = atomic_load(&refused_logged_at);
	if (last && now < last + REFUSED_LOG_EVERY_MS)
		return; /* logged lately */
	if (!atomic_compare_exchange_strong(&refused_logged_at, &last,
					    now ? now : 1))
		return; /* another thread logs it just now */
	if (user)
		fg_log_warn("Redis refused the credentials of user %s: %s "
			    "(%s:%d)", user, why, node->host, node->port);
	else
		fg_log_warn("Redis refused the credentials of the default "
			    "user: %s (%s:%d)", why, node->host, node->port);
}

int fg_gateway_read_key(const char *path, uint8_t key[FG_KEY_MAX],
			size_t *len, char *err, size_t errlen)
{
	uint8_t buf[FG_KEY_MAX + 1];
	size_t n = 0;
	int rc = -1;
	/* O_NONBLOCK: a FIFO in its place must not hang a check */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "cannot read key file '%s': %s", path,
			 strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "key file '%s' is not a regular file", path);
		goto out;
	}
	while (n < sizeof(buf)) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "cannot read key file '%s': %s", path,
				 strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n < FG_KEY_MIN || n > FG_KEY_MAX) {
		snprintf(err, errlen, "key file '%s' must hold %d to %d bytes",
			 path, FG_KEY_MIN, FG_KEY_MAX);
		goto out;
	}
	memcpy(key, buf, n);
	*len = n;
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	return rc;
}

static int read_key_file(struct fg_gateway *gw, const char *path)
{
	char err[512];
	if (fg_gateway_read_key(path, gw->key, &gw->key_len, err, sizeof(err))) {
		fprintf(stderr, "fencegate: %s\n", err);
		return -1;
	}
	gw->key_from_file = true;
	return 0;
}

int fg_gateway_init(struct fg_gateway *gw, struct fg_config *cfg)
{
	const struct fg_config *c = cfg;
	gw->cfg = cfg;
	gw->listen_fd = -1;
	if (c->key_file && read_key_file(gw, c->key_file))
		return -1;
	uint8_t id[FG_GATEWAY_ID_LEN / 2];
	if (RAND_bytes(id, sizeof(id)) != 1) {
		fprintf(stderr, "fencegate: no randomness\n");
		return -1;
	}
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(&gw->id[2 * i], 3, "%02x", id[i]);
	unsigned connect_ms = c->redis_timeout_ms < 500 ? c->redis_timeout_ms : 500;
	struct fg_redis_auth auth = {
		.user = c->redis_user,
		.password = c->redis_password,
		.refused = redis_refused,
	};
	gw->topo = fg_topo_create(&c->redis, connect_ms, c->redis_timeout_ms,
				  &auth);
	gw->maint_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!gw->topo || gw->maint_fd < 0) {
		fprintf(stderr, "fencegate: out of memory or descriptors\n");
		fg_topo_destroy(gw->topo);
		return -1;
	}
	gw->store_opts = (struct fg_store_opts){
		.topo = gw->topo,
		.connect_timeout_ms = connect_ms,
		.command_timeout_ms = c->redis_timeout_ms,
		.idle_forget_ms = c->idle_forget_ms,
		.write_margin_ms = c->fence_margin_ms,
		.replicas = c->redis_replicas,
		.replicas_timeout_ms = c->redis_replicas_timeout_ms,
		.events = c->events != 0,
		.events_retain = c->events_retain,
		.gateway_id = gw->id,
	};
	pthread_mutex_init(&gw->key_mu, NULL);
	return 0;
}

void fg_gateway_finish(struct fg_gateway *gw)
{
	fg_topo_destroy(gw->topo);
	gw->topo = NULL;
	if (gw->maint_fd >= 0)
		close(gw->maint_fd);
	gw->maint_fd = -1;
	pthread_mutex_destroy(&gw->key_mu);
}

int fg_gateway_key(struct fg_gateway *gw, uint8_t out[FG_KEY_MAX], size_t *len)
{
	pthread_mutex_lock(&gw->key_mu);
	size_t n = gw->key_len;
	if (n)
		memcpy(out, gw->key, n);
	pthread_mutex_unlock(&gw->key_mu);
	*len = n;
	return n ? FG_OK : FG_ENOKEY;
}

void fg_gateway_set_key(struct fg_gateway *gw, const uint8_t *key, size_t len)
{
	pthread_mutex_lock(&gw->key_mu);
	memcpy(gw->key, key, len);
	gw->key_len = len;
	pthread_mutex_unlock(&gw->key_mu);
}

/* ---- the auth table in force ------------------------------------------- */

int fg_gateway_auth_load(struct fg_gateway *gw, char *err, size_t errlen)
{
	pthread_mutex_init(&gw->auth_mu, NULL);
	atomic_store(&gw->auth_gen, 1u);
	gw->auth = NULL;
	gw->s3keys = NULL;
	gw->s3up = NULL;
	char why[512];
	if (gw->cfg->s3_credentials) {
		if (fg_s3keys_load(gw->cfg->s3_credentials, &gw->s3keys, why,
				   sizeof(why))) {
			snprintf(err, errlen, "%s", why);
			return -1;
		}
		fg_log_info("s3-credentials %s: %zu keys", gw->cfg->s3_credentials,
			    fg_s3keys_count(gw->s3keys));
	}
	if (gw->cfg->upstream_s3_credentials &&
	    fg_s3upstream_load(gw->cfg->upstream_s3_credentials, &gw->s3up, why,
			       sizeof(why))) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	if (!gw->cfg->auth_file)
		return 0;
	if (fg_authtab_load(gw->cfg->auth_file, &gw->auth, why, sizeof(why))) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	fg_log_info("auth-file %s: %zu principals", gw->cfg->auth_file,
		    fg_authtab_count(gw->auth));
	return 0;
}

/* SIGHUP: s3-credentials again; a file that does not load keeps the
 * table in force. */
static void s3keys_reload(struct fg_gateway *gw)
{
	if (!gw->cfg->s3_credentials)
		return;
	struct fg_s3keys *t = NULL;
	char why[512];
	if (fg_s3keys_load(gw->cfg->s3_credentials, &t, why, sizeof(why))) {
		fg_log_error("s3-credentials %s not reloaded, the previous keys "
			     "stay in force: %s", gw->cfg->s3_credentials, why);
		return;
	}
	pthread_mutex_lock(&gw->auth_mu);
	struct fg_s3keys *old = gw->s3keys;
	gw->s3keys = t;
	atomic_fetch_add(&gw->auth_gen, 1u);
	pthread_mutex_unlock(&gw->auth_mu);
	fg_s3keys_unref(old);
	fg_log_info("s3-credentials %s reloaded: %zu keys", gw->cfg->s3_credentials,
		    fg_s3keys_count(t));
}

struct fg_s3keys *fg_gateway_s3keys_ref(struct fg_gateway *gw)
{
	pthread_mutex_lock(&gw->auth_mu);
	struct fg_s3keys *t = fg_s3keys_ref(gw->s3keys);
	pthread_mutex_unlock(&gw->auth_mu);
	return t;
}

void fg_gateway_auth_reload(struct fg_gateway *gw)
{
	s3keys_reload(gw);
	if (!gw->cfg->auth_file)
		return;
	struct fg_authtab *t = NULL;
	char why[512];
	if (fg_authtab_load(gw->cfg->auth_file, &t, why, sizeof(why))) {
		fg_log_error("auth-file %s not reloaded, the previous one stays "
			     "in force: %s", gw->cfg->auth_file, why);
		return;
	}
	pthread_mutex_lock(&gw->auth_mu);
	struct fg_authtab *old = gw->auth;
	gw->auth = t;
	atomic_fetch_add(&gw->auth_gen, 1u);
	pthread_mutex_unlock(&gw->auth_mu);
	fg_authtab_unref(old);
	fg_log_info("auth-file %s reloaded: %zu principals", gw->cfg->auth_file,
		    fg_authtab_count(t));
}

void fg_gateway_auth_finish(struct fg_gateway *gw)
{
	fg_authtab_unref(gw->auth);
	gw->auth = NULL;
	fg_s3keys_unref(gw->s3keys);
	gw->s3keys = NULL;
	fg_s3upstream_free(gw->s3up);
	gw->s3up = NULL;
	pthread_mutex_destroy(&gw->auth_mu);
}

unsigned fg_gateway_auth_gen(struct fg_gateway *gw)
{
	return atomic_load_explicit(&gw->auth_gen, memory_order_acquire);
}

struct fg_authtab *fg_gateway_auth_ref(struct fg_gateway *gw, unsigned *gen)
{
	pthread_mutex_lock(&gw->auth_mu);
	struct fg_authtab *t = gw->auth ? fg_authtab_ref(gw->auth) : NULL;
	*gen = atomic_load(&gw->auth_gen);
	pthread_mutex_unlock(&gw->auth_mu);
	return t;
}

/* ---- health flags ------------------------------------------------------ */

bool fg_gateway_redis_up(struct fg_gateway *gw)
{
	return atomic_load(&gw->redis_up);
}

bool fg_gateway_upstream_up(struct fg_gateway *gw)
{
	return atomic_load(&gw->upstream_up);
}

bool fg_gateway_draining(struct fg_gateway *gw)
{
	return atomic_load(&gw->draining);
}

/* ---- loops: heartbeats and stopping ------------------------------------ */

void fg_gateway_loop_redis(struct fg_gateway *gw, unsigned index, bool ready)
{
	if (index < FG_LOOPS_MAX)
		atomic_store_explicit(&gw->loop_redis[index], ready,
				      memory_order_relaxed);
}

bool fg_gateway_loops_redis(struct fg_gateway *gw)
{
	unsigned n = gw->nloops < FG_LOOPS_MAX ? gw->nloops : FG_LOOPS_MAX;
	for (unsigned i = 0; i < n; i++)
		if (!atomic_load_explicit(&gw->loop_redis[i], memory_order_relaxed))
			return false;
	return n > 0;
}

void fg_gateway_loop_turned(struct fg_gateway *gw, unsigned index,
			    uint64_t now)
{
	if (index < FG_LOOPS_MAX)
		atomic_store_explicit(&gw->turned[index], now,
				      memory_order_relaxed);
}

bool fg_gateway_loops_turning(struct fg_gateway *gw, uint64_t now,
			      uint64_t bound)
{
	unsigned n = gw->nloops < FG_LOOPS_MAX ? gw->nloops : FG_LOOPS_MAX;
	for (unsigned i = 0; i < n; i++) {
		uint64_t t = atomic_load_explicit(&gw->turned[i],
						  memory_order_relaxed);
		if (t && now > t && now - t > bound)
			return false;
	}
	return true;
}

void fg_gateway_note_quiesced(struct fg_gateway *gw)
{
	atomic_fetch_add(&gw->quiesced, 1);
}

void fg_gateway_note_drained(struct fg_gateway *gw, bool idle)
{
	if (idle)
		atomic_fetch_add(&gw->drained, 1);
	else
		atomic_fetch_sub(&gw->drained, 1);
}

void fg_gateway_note_ended(struct fg_gateway *gw, unsigned n)
{
	atomic_fetch_add(&gw->ended_at_bound, n);
}

unsigned fg_gateway_quiesced(struct fg_gateway *gw)
{
	return atomic_load(&gw->quiesced);
}

unsigned fg_gateway_drained(struct fg_gateway *gw)
{
	return atomic_load(&gw->drained);
}

unsigned fg_gateway_ended(struct fg_gateway *gw)
{
	return atomic_load(&gw->ended_at_bound);
}
