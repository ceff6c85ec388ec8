/*
 * main.c - the fencegate process: settings, start-up order, shutdown.
 *
 * The process runs one event loop per core (loop.c) and a maintenance
 * thread (maint.c); this file only starts and stops them.
 *
 * Start-up never waits for Redis or the upstream: both are reached lazily
 * and the gateway reports itself not ready (health 503) until they answer.
 * Exit codes: 0 after SIGINT/SIGTERM, 1 when the process cannot start
 * (e.g. the address is taken), 2 for bad settings.
 *
 * Under systemd (Type=notify) the process says READY=1 once every loop
 * accepts, STOPPING=1 when a stop signal came (readiness turns 503 at the
 * same moment). SIGHUP reopens the access log (logrotate) and reads the
 * auth-file and the TLS certificate, key and client CA again (access.c,
 * tls.c), then reads the settings again and names each one that changed:
 * those take effect only on a restart.
 *
 * Stopping (SIGTERM or SIGINT) drains: readiness is 503 at once; after
 * drain-delay-ms every loop stops accepting (the listening socket is
 * closed once none uses it) and answers its parked waiters 503
 * shutting_down; what is in flight runs on for at most drain-timeout-ms,
 * counted from then, and what still runs at that bound is ended as at a
 * lease's end. A second SIGTERM or SIGINT ends it all at once. Either
 * way the exit code is 0. Signals are waited for on this thread only,
 * so the waits between the steps are sigtimedwait()'s.
 *
 * `fencegate --new-key NAME` only makes a bearer key for principal NAME
 * (auth.h) and prints it with its auth-file line: no config is read.
 *
 * `fencegate --check-config` reads the settings and every file they name
 * through the same functions the start calls (the key file, the TLS
 * files, the auth-file, the upstream's TLS files, the access log, the
 * listen address), prints every reason found and exits 2, or prints
 * "configuration ok" and exits 0. It starts nothing: no socket listens,
 * no Redis or upstream connection is made.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

#include <curl/curl.h>
#include <event2/thread.h>
#include <openssl/crypto.h>
#include <systemd/sd-daemon.h>

#include "access/access.h"
#include "base/s3keys.h"
#include "base/s3ops.h"
#include "base/clock.h"
#include "upstream/creds.h"
#include "proc/accesslog.h"
#include "base/auth.h"
#include "proc/gateway.h"
#include "proc/held.h"
#include "base/log.h"
#include "base/writeset.h"
#include "http/front.h"
#include "loop.h"
#include "proc/evfeed.h"
#include "proc/metrics.h"
#include "proc/tls.h"

/* Many parked waiters are many open sockets. */
/* The maintenance thread saw Redis' topology move: every loop's
 * connections follow it now. */
static void follow_topology(struct fg_gateway *gw)
{
	for (unsigned i = 0; i < gw->nloops; i++)
		fg_loop_follow(gw->loops[i]);
}

/* The event feed read more, or a history read of loop `i` is done: the
 * loop (every loop for -1) looks again. The feed's threads run until
 * after the loops stopped and before they are freed. */
static void tell_events(void *arg, int i)
{
	struct fg_gateway *gw = arg;
	for (unsigned k = 0; k < gw->nloops; k++)
		if (i < 0 || (unsigned)i == k)
			fg_loop_events(gw->loops[k]);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ---- stopping ------------------------------------------------------------ */

/* How often the main thread looks at the loops' progress while it waits
 * for a stop signal between the drain's steps. */
#define DRAIN_POLL_MS 10

enum wait_end { WAIT_DONE, WAIT_BOUND, WAIT_SIGNAL };

static void reload(struct fg_gateway *gw);

/* Waits until done(gw) (NULL: never), `until` (fg_clock_ms()) or a stop
 * signal, whichever comes first; SIGHUP still reloads meanwhile. */
static enum wait_end wait_for(struct fg_gateway *gw, const sigset_t *sigs,
			      uint64_t until,
			      bool (*done)(struct fg_gateway *gw))
{
	for (;;) {
		if (done && done(gw))
			return WAIT_DONE;
		uint64_t now = fg_clock_ms();
		if (now >= until)
			return WAIT_BOUND;
		uint64_t ms = until - now;
		if (done && ms > DRAIN_POLL_MS)
			ms = DRAIN_POLL_MS;
		struct timespec ts = { (time_t)(ms / 1000),
				       (long)(ms % 1000) * 1000000L };
		int sig = sigtimedwait(sigs, NULL, &ts);
		if (sig == SIGHUP)
			reload(gw);
		else if (sig == SIGINT || sig == SIGTERM)
			return WAIT_SIGNAL;
		else if (sig < 0 && errno != EAGAIN && errno != EINTR)
			return WAIT_BOUND;
	}
}

static bool all_quiesced(struct fg_gateway *gw)
{
	return fg_gateway_quiesced(gw) >= gw->nloops;
}

static bool all_drained(struct fg_gateway *gw)
{
	return fg_gateway_drained(gw) >= gw->nloops;
}

/* The stop after the first signal (gw->draining is set): the drain's
 * steps, each of which a second signal cuts short; then every loop
 * stops. True when a second signal came. */
static bool stop(struct fg_gateway *gw, const sigset_t *sigs)
{
	const struct fg_config *cfg = gw->cfg;
	enum wait_end end = wait_for(gw, sigs, fg_clock_ms() + cfg->drain_delay_ms,
				     NULL);
	if (end != WAIT_SIGNAL) {
		for (unsigned i = 0; i < gw->nloops; i++)
			fg_loop_drain(gw->loops[i]);
		uint64_t bound = fg_clock_ms() + cfg->drain_timeout_ms;
		end = wait_for(gw, sigs, bound, all_quiesced);
		if (end == WAIT_DONE) {
			/* no loop takes from it any more: connecting clients
			 * are refused now rather than left in the backlog */
			close(gw->listen_fd);
			gw->listen_fd = -1;
			fg_log_info("draining: no longer accepting; requests in "
				    "flight have %u ms", cfg->drain_timeout_ms);
			end = wait_for(gw, sigs, bound, all_drained);
		}
	}
	if (end == WAIT_SIGNAL)
		fg_log_info("a second stop signal: ending what runs now");
	/* the drain answered every reader of the events: the feed's
	 * follower ends within its block while the loops stop */
	fg_evfeed_ask_stop(gw->evfeed);
	for (unsigned i = 0; i < gw->nloops; i++)
		fg_loop_ask_stop(gw->loops[i]);
	for (unsigned i = 0; i < gw->nloops; i++)
		fg_loop_stop(gw->loops[i]);
	unsigned ended = fg_gateway_ended(gw);
	if (end == WAIT_DONE && ended == 0)
		fg_log_info("drained: every request in flight finished");
	else
		fg_log_info("drain ended %s: %u request%s still in flight ended "
			    "as at a lease's end", end == WAIT_SIGNAL
			    ? "by a second signal" : end == WAIT_BOUND
			    ? "at drain-timeout-ms" : "as one came in",
			    ended, ended == 1 ? "" : "s");
	return end == WAIT_SIGNAL;
}

/* After the stop: the maintenance thread ends, which may take a Redis
 * call's redis-timeout-ms. False when a stop signal came meanwhile (the
 * thread is then left to the process's end). */
static bool end_maint(struct fg_gateway *gw, const sigset_t *sigs)
{
	fg_maint_ask_stop(gw);
	while (!fg_maint_joined(gw)) {
		struct timespec ts = { 0, 20 * 1000000L };
		int sig = sigtimedwait(sigs, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			fg_log_info("a second stop signal: not waiting for the "
				    "maintenance thread's Redis call");
			return false;
		}
	}
	return true;
}

/* Each line of reasons on stderr, as "fencegate: REASON". */
static void print_reasons(const char *reasons)
{
	while (*reasons) {
		size_t len = strcspn(reasons, "\n");
		fprintf(stderr, "fencegate: %.*s\n", (int)len, reasons);
		reasons += len + (reasons[len] == '\n');
	}
}

/* Adds a reason to the lines in r (cut at n). */
static void add_reason(char *r, size_t n, const char *why)
{
	size_t len = strnlen(r, n);
	if (len + 2 < n)
		snprintf(r + len, n - len, "%s%s", len ? "\n" : "", why);
}

/* --route-test PATH: the lock each path gets, as the proxy decides it
 * (fg_route_decide()). 0, or 2 when one maps to no valid lock name. */
static int route_tests(const struct fg_config *cfg)
{
	int rc = 0;
	for (unsigned i = 0; i < cfg->nroute_tests; i++) {
		const char *path = cfg->route_test[i];
		char lock[FG_NAME_MAX + 1];
		const struct fg_route *rule;
		enum fg_error e = (cfg->upstream_api_s3 ? fg_s3_route_decide : fg_route_decide)(
			cfg, path, strlen(path), lock, &rule);
		char how[FG_ROUTE_PREFIX_MAX + 4 * FG_NAME_MAX + 16];
		if (rule)
			snprintf(how, sizeof(how), "(rule %s)", rule->line);
		else
			snprintf(how, sizeof(how), "(default)");
		if (e == FG_E_COUNT) {
			printf("%s -> lock %s %s\n", path, lock, how);
			continue;
		}
		rc = 2;
		if (e == FG_E_BAD_LOCK_NAME)
			printf("%s -> %s: no valid lock name %s\n", path,
			       fg_errors[e].code, how);
		else
			printf("%s -> %s: not a path the gateway proxies\n", path,
			       fg_errors[e].code);
	}
	return rc;
}

/* --check-config: the settings read (reasons: what was wrong with them),
 * then each file and address they name, as the start would read it.
 * Exit 0 or 2. */
static int check_config(struct fg_config *cfg, char *reasons, size_t n)
{
	char err[512];

	if (cfg->key_file) {
		uint8_t key[FG_KEY_MAX];
		size_t len = 0;
		if (fg_gateway_read_key(cfg->key_file, key, &len, err, sizeof(err)))
			add_reason(reasons, n, err);
		OPENSSL_cleanse(key, sizeof(key));
	}
	if (cfg->tls_cert && cfg->tls_key) {
		if (fg_tls_init(cfg, err, sizeof(err)))
			add_reason(reasons, n, err);
		fg_tls_finish();
	}
	if (cfg->auth_file) {
		struct fg_authtab *t = NULL;
		if (fg_authtab_load(cfg->auth_file, &t, err, sizeof(err)))
			add_reason(reasons, n, err);
		fg_authtab_unref(t);
	}
	if (cfg->s3_credentials) {
		struct fg_s3keys *k = NULL;
		if (fg_s3keys_load(cfg->s3_credentials, &k, err, sizeof(err)))
			add_reason(reasons, n, err);
		fg_s3keys_unref(k);
	}
	if (cfg->upstream_s3_credentials) {
		struct fg_s3upstream *u = NULL;
		if (fg_s3upstream_load(cfg->upstream_s3_credentials, &u, err, sizeof(err)))
			add_reason(reasons, n, err);
		fg_s3upstream_free(u);
	}
	if (fg_upstream_creds_check(cfg, err, sizeof(err)))
		add_reason(reasons, n, err);
	if (fg_accesslog_check(cfg, err, sizeof(err)))
		add_reason(reasons, n, err);
	if (fg_http_listen_check(cfg, err, sizeof(err)))
		add_reason(reasons, n, err);
	if (reasons[0]) {
		print_reasons(reasons);
		return 2;
	}
	printf("fencegate: configuration ok\n");
	int rc = route_tests(cfg);
	return fflush(stdout) == 0 ? rc : 1;
}

/* SIGHUP: the files the settings name are read again (the access log
 * reopened, the auth-file, the TLS files; each module logs its own
 * outcome), and the settings are read again as a restart would read them
 * and compared with those in force: none is applied while running, so
 * each one that changed is named as waiting for a restart. */
static void reload_settings(struct fg_gateway *gw, const struct fg_config *cfg,
			    int argc, char **argv)
{
	static struct fg_config next;
	static char reasons[4096];
	char changed[1024], files[256] = "";
	size_t len = 0;

	fg_accesslog_reopen();
	fg_gateway_auth_reload(gw);
	fg_tls_reload();
	const char *const reread[][2] = {
		{ "access-log", cfg->access_log && strcmp(cfg->access_log, "off") &&
				strcmp(cfg->access_log, "stdout") &&
				strcmp(cfg->access_log, "stderr") ? "" : NULL },
		{ "auth-file", cfg->auth_file },
		{ "tls-cert", cfg->tls_cert }, { "tls-key", cfg->tls_key },
		{ "tls-client-ca", cfg->tls_client_ca },
	};
	for (size_t i = 0; i < sizeof(reread) / sizeof(reread[0]); i++)
		if (reread[i][1] && len + 32 < sizeof(files))
			len += (size_t)snprintf(files + len, sizeof(files) - len,
						"%s%s", len ? ", " : "", reread[i][0]);
	fg_log_info("SIGHUP: read again: %s", len ? files : "nothing (no file to reload)");

	fg_config_init(&next);
	if (fg_config_load(&next, argc, argv, reasons, sizeof(reasons)) != FG_CONFIG_OK) {
		for (char *p = reasons; *p; p++)
			if (*p == '\n')
				*p = ';';
		fg_log_warn("SIGHUP: the settings no longer read (%s); the "
			    "running ones stay, and a restart would fail", reasons);
	} else if (fg_config_changed(cfg, &next, changed, sizeof(changed))) {
		fg_log_warn("SIGHUP: changed settings not applied until a "
			    "restart: %s", changed);
	} else {
		fg_log_info("SIGHUP: the settings are those in force");
	}
	fg_config_finish(&next);
}

/* The loops start accepting once a lock call can be served: the sequencer
 * key is known (without a key file it is agreed through Redis by the
 * maintenance thread's first look, milliseconds after the start) and so is
 * where the lock state lives (behind Sentinel or a Cluster, that same
 * first look finds the master or the slot map; a direct Redis is known
 * from the start). Until then every lock call would be refused 503. They
 * wait START_WAIT_MS at most (Redis down at the start: they then answer
 * 503 until it comes). Clients that connect meanwhile wait in the
 * listening socket's backlog, as at any busy moment. */
#define START_WAIT_MS 2000
#define START_POLL_MS 2

static bool can_serve_locks(struct fg_gateway *gw)
{
	uint8_t key[FG_KEY_MAX];
	size_t len;
	bool known = fg_gateway_key(gw, key, &len) == FG_OK &&
		     (fg_topo_mode(gw->topo) == FG_REDIS_DIRECT ||
		      fg_topo_gen(gw->topo) > 1);
	OPENSSL_cleanse(key, sizeof(key));
	return known;
}

static void wait_until_served(struct fg_gateway *gw)
{
	uint64_t until = fg_clock_ms() + START_WAIT_MS;
	while (!can_serve_locks(gw) && fg_clock_ms() < until) {
		struct timespec ts = { 0, START_POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* What a SIGHUP compares the settings with, and reads them from: set by
 * main() before any signal is waited for. */
static struct {
	const struct fg_config *cfg;
	int argc;
	char **argv;
} hup;

/* SIGHUP, while serving or draining. */
static void reload(struct fg_gateway *gw)
{
	sd_notify(0, "RELOADING=1");
	reload_settings(gw, hup.cfg, hup.argc, hup.argv);
	sd_notify(0, "READY=1");
}

/* `--new-key NAME`: the key on one line, then the line that names it in
 * the auth-file. Exit 0; 2 for a bad name or argument; 1 when no random
 * bytes or stdout failed. */
static int new_key(int argc, char **argv)
{
	char key[FG_AUTH_KEY_LEN + 1];
	char line[FG_PRINCIPAL_MAX + 80];
	int rc = 0;

	if (argc != 3) {
		fprintf(stderr, "fencegate: --new-key takes one NAME and nothing else\n");
		return 2;
	}
	if (!fg_auth_name_valid(argv[2], strlen(argv[2]))) {
		fprintf(stderr, "fencegate: --new-key: a principal's name is 1..%d bytes "
			"of A-Z a-z 0-9 . _ @ -\n", FG_PRINCIPAL_MAX);
		return 2;
	}
	if (fg_auth_new_key(argv[2], key, sizeof(key), line, sizeof(line))) {
		fprintf(stderr, "fencegate: --new-key: no random bytes to make a key from\n");
		return 1;
	}
	printf("%s\n%s   # add rights: lock:PREFIX observe:PREFIX ...\n", key, line);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "fencegate: --new-key: cannot write to stdout\n");
		rc = 1;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

/* `--new-s3-key NAME`: a fresh s3-credentials line for principal NAME.
 * Exit 0; 2 for a bad name or argument; 1 when no random bytes or stdout
 * failed. */
static int new_s3_key(int argc, char **argv)
{
	char line[FG_S3KEYS_NEW_LINE_MAX];
	int rc = 0;

	if (argc != 3) {
		fprintf(stderr, "fencegate: --new-s3-key takes one NAME and nothing else\n");
		return 2;
	}
	int r = fg_s3key_new(argv[2], line, sizeof(line));
	if (r == -1) {
		fprintf(stderr, "fencegate: --new-s3-key: a principal's name is 1..%d "
			"bytes of A-Z a-z 0-9 . _ @ -\n", FG_PRINCIPAL_MAX);
		return 2;
	}
	if (r != 0) {
		fprintf(stderr, "fencegate: --new-s3-key: no random bytes to make a key from\n");
		return 1;
	}
	printf("%s\n", line);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "fencegate: --new-s3-key: cannot write to stdout\n");
		rc = 1;
	}
	OPENSSL_cleanse(line, sizeof(line));
	return rc;
}

int main(int argc, char **argv)
{
	static struct fg_config cfg;
	static struct fg_gateway gw;
	static char reasons[8192];
	char err[512];
	int rc = 1;
	bool maint_ended = false;

	if (argc >= 2 && strcmp(argv[1], "--new-key") == 0)
		return new_key(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--new-s3-key") == 0)
		return new_s3_key(argc, argv);
	/* libxml2 (S3's DeleteObjects bodies) is set up before any thread */
	fg_s3ops_init();
	fg_config_init(&cfg);
	enum fg_config_result loaded = fg_config_load(&cfg, argc, argv, reasons,
						      sizeof(reasons));
	if (loaded == FG_CONFIG_EXIT) {
		fg_config_finish(&cfg);
		return 0;
	}
	hup.cfg = &cfg;
	hup.argc = argc;
	hup.argv = argv;
	if (cfg.check_only) {
		rc = check_config(&cfg, reasons, sizeof(reasons));
		fg_config_finish(&cfg);
		return rc;
	}
	if (loaded == FG_CONFIG_ERROR) {
		print_reasons(reasons);
		fg_config_finish(&cfg);
		return 2;
	}
	fg_log_level = cfg.log_level;
	if (!cfg.auth_file)
		fg_log_warn("no auth-file: the gateway is open, and anyone who "
			    "reaches %s:%d may take, renew, release and observe "
			    "any lock (docs/security.md)", cfg.listen_host,
			    cfg.listen_port);
	fg_metrics_init();
	if (fg_accesslog_open(&cfg, err, sizeof(err))) {
		fprintf(stderr, "fencegate: %s\n", err);
		fg_config_finish(&cfg);
		return 2;
	}
	if (fg_tls_init(&cfg, err, sizeof(err))) {
		fprintf(stderr, "fencegate: %s\n", err);
		fg_accesslog_close();
		fg_config_finish(&cfg);
		return 2;
	}
	if (fg_gateway_init(&gw, &cfg)) {
		fg_tls_finish();
		fg_accesslog_close();
		fg_config_finish(&cfg);
		return 2;
	}
	/* what lockcore tells of its scripts goes to the metrics */
	gw.store_opts.observe = fg_metrics_script;
	gw.store_opts.gave_back = fg_metrics_given_back;
	if (fg_gateway_auth_load(&gw, err, sizeof(err)) ||
	    fg_upstream_creds_check(&cfg, err, sizeof(err))) {
		fprintf(stderr, "fencegate: %s\n", err);
		fg_gateway_auth_finish(&gw);
		fg_gateway_finish(&gw);
		fg_tls_finish();
		fg_accesslog_close();
		fg_config_finish(&cfg);
		return 2;
	}
	raise_fd_limit();
	/* a stop request is the one event another thread activates */
	if (evthread_use_pthreads() != 0 ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		goto error_config;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	gw.nloops = cfg.threads ? cfg.threads : (cores > 0 ? (unsigned)cores : 1u);
	if (gw.nloops > FG_LOOPS_MAX)
		gw.nloops = FG_LOOPS_MAX;

	/* Signals are taken by sigwait() here; every thread inherits the mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (fg_http_listen(&gw))
		goto error_curl;
	gw.loops = calloc(gw.nloops, sizeof(*gw.loops));
	if (!gw.loops)
		goto error_listen;
	gw.evfeed = fg_evfeed_create(&gw.store_opts, gw.nloops, cfg.events_retain_ms,
				     tell_events, &gw);
	if (!gw.evfeed)
		goto error_loops;
	for (unsigned i = 0; i < gw.nloops; i++) {
		gw.loops[i] = fg_loop_create(&gw, i);
		if (!gw.loops[i]) {
			fg_log_error("cannot start event loop %u", i);
			goto error_loops;
		}
	}
	gw.topology_moved = follow_topology;
	if (fg_maint_start(&gw)) {
		fg_log_error("cannot start the maintenance thread");
		goto error_loops;
	}
	if (fg_evfeed_start(gw.evfeed)) {
		fg_log_error("cannot start the event stream's threads");
		goto error_running;
	}
	wait_until_served(&gw);
	for (unsigned i = 0; i < gw.nloops; i++)
		if (fg_loop_start(gw.loops[i])) {
			fg_log_error("cannot start the thread of loop %u", i);
			goto error_running;
		}
	/* the upstream by host and port: its URL may carry a password */
	char up[FG_HOST_MAX + 16];
	snprintf(up, sizeof(up), "%s:%s", cfg.upstream ? cfg.up.host : "none",
		 cfg.upstream ? cfg.up.port : "-");
	fg_log_info("fencegate %s listening on %s:%d (redis %s:%d, upstream %s, "
		    "%u loops, gateway %s)",
		    FG_VERSION, cfg.listen_host, cfg.listen_port, cfg.redis_host,
		    cfg.redis_port, up, gw.nloops, gw.id);

	sd_notifyf(0, "READY=1\nMAINPID=%lu\nSTATUS=listening on %s:%d",
		   (unsigned long)getpid(), cfg.listen_host, cfg.listen_port);
	int sig = 0;
	for (;;) {
		sigwait(&sigs, &sig);
		if (sig != SIGHUP)
			break;
		reload(&gw);
	}
	atomic_store(&gw.draining, true);
	sd_notify(0, "STOPPING=1");
	fg_log_info("signal %d: draining: not ready now, accepting for %u ms "
		    "more, then requests in flight have %u ms", sig,
		    cfg.drain_delay_ms, cfg.drain_timeout_ms);
	if (stop(&gw, &sigs) || !end_maint(&gw, &sigs)) {
		/* A second signal ends it all at once: every loop has ended
		 * its requests; the maintenance thread may be in a Redis call
		 * that takes up to redis-timeout-ms (a Redis that does not
		 * answer), and is not waited for. */
		fg_maint_let_go(&gw);
		fg_evfeed_let_go(gw.evfeed);
		fg_accesslog_close();
		_exit(0);
	}
	maint_ended = true;
	rc = 0;

	/* Each loop (stopped already after a signal) ends its transfers and
	 * closes its connections on its own thread. */
error_running:
	for (unsigned i = 0; i < gw.nloops; i++)
		fg_loop_stop(gw.loops[i]);
	if (!maint_ended)
		fg_maint_stop(&gw);
	/* its threads tell the loops: ended before any loop is freed */
	fg_evfeed_stop(gw.evfeed);
error_loops:
	for (unsigned i = 0; i < gw.nloops; i++)
		fg_loop_destroy(gw.loops[i]);
	free(gw.loops);
	fg_evfeed_destroy(gw.evfeed);
error_listen:
	if (gw.listen_fd >= 0)
		close(gw.listen_fd);
error_curl:
	curl_global_cleanup();
error_config:
	fg_gateway_auth_finish(&gw);
	fg_gateway_finish(&gw);
	fg_tls_finish();
	fg_accesslog_close();
	fg_held_finish();
	fg_config_finish(&cfg);
	return rc;
}
