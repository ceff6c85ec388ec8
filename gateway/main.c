/*
 * main.c - the fencegate process: settings, start-up order, shutdown.
 *
 * Start-up never waits for Redis or the upstream: both are reached lazily
 * and the gateway reports itself not ready (health 503) until they answer.
 * Exit codes: 0 after SIGINT/SIGTERM, 1 when the process cannot start
 * (e.g. the address is taken), 2 for bad settings.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <openssl/rand.h>

#include "gateway.h"
#include "log.h"
#include "proxy.h"
#include "waitq.h"

static void store_key_destroy(void *st)
{
	fg_store_destroy(st);
}

fg_store *fg_gateway_store(struct fg_gateway *gw)
{
	fg_store *st = pthread_getspecific(gw->store_key);
	if (!st) {
		st = fg_store_create(&gw->store_opts);
		if (st && pthread_setspecific(gw->store_key, st) != 0) {
			fg_store_destroy(st);
			st = NULL;
		}
	}
	return st;
}

static int read_key_file(struct fg_gateway *gw, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fencegate: cannot read key file '%s'\n", path);
		return -1;
	}
	uint8_t buf[FG_KEY_MAX + 1];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n < FG_KEY_MIN || n > FG_KEY_MAX) {
		fprintf(stderr, "fencegate: key file '%s' must hold %d to %d bytes\n",
			path, FG_KEY_MIN, FG_KEY_MAX);
		return -1;
	}
	memcpy(gw->key, buf, n);
	gw->key_len = n;
	gw->key_from_file = true;
	return 0;
}

/* Many parked waiters are many open sockets. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static struct fg_config cfg;
	static struct fg_gateway gw;
	char err[512];
	int rc = 1;

	fg_config_init(&cfg);
	switch (fg_config_load(&cfg, argc, argv, err, sizeof(err))) {
	case FG_CONFIG_EXIT:
		fg_config_finish(&cfg);
		return 0;
	case FG_CONFIG_ERROR:
		fprintf(stderr, "fencegate: %s\n", err);
		fg_config_finish(&cfg);
		return 2;
	case FG_CONFIG_OK:
		break;
	}
	fg_log_level = cfg.log_level;
	gw.cfg = &cfg;
	if (cfg.key_file && read_key_file(&gw, cfg.key_file)) {
		fg_config_finish(&cfg);
		return 2;
	}

	uint8_t id[FG_GATEWAY_ID_LEN / 2];
	if (RAND_bytes(id, sizeof(id)) != 1) {
		fprintf(stderr, "fencegate: no randomness\n");
		goto error_config;
	}
	for (size_t i = 0; i < sizeof(id); i++)
		snprintf(&gw.id[2 * i], 3, "%02x", id[i]);
	gw.store_opts = (struct fg_store_opts){
		.host = cfg.redis_host,
		.port = cfg.redis_port,
		.connect_timeout_ms = cfg.redis_timeout_ms < 500 ? cfg.redis_timeout_ms : 500,
		.command_timeout_ms = cfg.redis_timeout_ms,
		.idle_forget_ms = cfg.idle_forget_ms,
		.write_margin_ms = cfg.fence_margin_ms,
	};
	pthread_mutex_init(&gw.key_mu, NULL);
	pthread_mutex_init(&gw.maint_mu, NULL);
	pthread_cond_init(&gw.maint_cv, NULL);
	if (pthread_key_create(&gw.store_key, store_key_destroy) != 0)
		goto error_config;
	raise_fd_limit();

	/* Signals are taken by sigwait() here; every thread inherits the mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	gw.wq = fg_waitq_create(&gw);
	if (!gw.wq) {
		fg_log_error("cannot start the wait loop");
		goto error_config;
	}
	gw.px = fg_proxy_create(&gw);
	if (!gw.px) {
		fg_log_error("cannot start the upstream thread");
		goto error_waitq;
	}
	if (fg_maint_start(&gw)) {
		fg_log_error("cannot start the maintenance thread");
		goto error_proxy;
	}
	if (fg_http_start(&gw))
		goto error_maint;
	fg_log_info("fencegate %s listening on %s:%d (redis %s:%d, upstream %s, gateway %s)",
		    FG_VERSION, cfg.listen_host, cfg.listen_port, cfg.redis_host,
		    cfg.redis_port, cfg.upstream ? cfg.upstream : "none", gw.id);

	int sig = 0;
	sigwait(&sigs, &sig);
	fg_log_info("signal %d: shutting down", sig);
	rc = 0;

	/* Waiters are answered (503) while HTTP still runs; then HTTP stops,
	 * so no worker touches the wait loop or the proxy when they are
	 * freed. */
	fg_waitq_stop(gw.wq);
	fg_http_stop(&gw);
error_maint:
	fg_maint_stop(&gw);
error_proxy:
	fg_proxy_destroy(gw.px);
error_waitq:
	fg_waitq_destroy(gw.wq);
error_config:
	fg_config_finish(&cfg);
	return rc;
}
