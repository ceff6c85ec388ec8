/*
 * tests/unit/lockcore/redisproc.h - a real redis-server for a lockcore
 * test: started on a free loopback port in a scratch directory of its own,
 * stopped by its PID (never by name), its directory removed.
 *
 * A redis-server that cannot be started fails the test (no skip).
 */
#ifndef FG_TEST_REDISPROC_H
#define FG_TEST_REDISPROC_H

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

struct redisproc {
	pid_t pid;
	int port;
	char dir[256];
	char port_s[16];
};

/* A port nobody listens on now (the kernel's choice). */
static int rp_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return ntohs(a.sin_port);
}

static int rp_bindable(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A free port whose cluster bus port (port + 10000) is free too. */
static inline int rp_free_cluster_port(void)
{
	for (int i = 0; i < 1000; i++) {
		int p = rp_free_port();
		if (p > 0 && p + 10000 <= 65535 && rp_bindable(p + 10000))
			return p;
	}
	return -1;
}

static void rp_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static redisContext *rp_connect(const struct redisproc *p)
{
	struct timeval tv = { 1, 0 };
	redisContext *rc = redisConnectWithTimeout("127.0.0.1", p->port, tv);
	if (rc && rc->err) {
		redisFree(rc);
		return NULL;
	}
	return rc;
}

/* Starts redis-server on p->port (a free one when 0), with the extra
 * arguments (NULL-terminated, at most 8), and waits (5 s at most) until
 * it answers PING. 0, or -1. */
static int rp_start(struct redisproc *p, const char *const *extra)
{
	if (!p->port)
		p->port = rp_free_port();
	if (p->port <= 0)
		return -1;
	if (!p->dir[0]) {
		snprintf(p->dir, sizeof(p->dir), "%s/fg-evread-XXXXXX", P_tmpdir);
		if (!mkdtemp(p->dir))
			return -1;
	}
	snprintf(p->port_s, sizeof(p->port_s), "%d", p->port);
	const char *argv[32] = { "redis-server", "--port", p->port_s,
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", p->dir, "--daemonize", "no", "--loglevel", "warning" };
	int argc = 15;
	for (int i = 0; extra && extra[i] && i < 8; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execvp("redis-server", (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		redisContext *rc = rp_connect(p);
		redisReply *r = rc ? redisCommand(rc, "PING") : NULL;
		int ok = r && r->type == REDIS_REPLY_STATUS;
		if (r)
			freeReplyObject(r);
		if (rc)
			redisFree(rc);
		if (ok)
			return 0;
		int st;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->pid = 0;
			return -1;
		}
		rp_sleep_ms(10);
	}
	return -1;
}

/* Starts a Sentinel (redis-server in sentinel mode, its config file in
 * its own directory) on a free port, watching the master named `name` at
 * 127.0.0.1:master_port, quorum 1; waits until it answers PING. */
static inline int rp_start_sentinel(struct redisproc *p, const char *name,
				    int master_port)
{
	char conf[320];
	p->port = rp_free_port();
	snprintf(p->dir, sizeof(p->dir), "%s/fg-evread-XXXXXX", P_tmpdir);
	if (p->port <= 0 || !mkdtemp(p->dir))
		return -1;
	snprintf(conf, sizeof(conf), "%s/sentinel.conf", p->dir);
	FILE *f = fopen(conf, "w");
	if (!f)
		return -1;
	fprintf(f, "port %d\nbind 127.0.0.1\ndir %s\n"
		"sentinel monitor %s 127.0.0.1 %d 1\n", p->port, p->dir, name,
		master_port);
	fclose(f);
	snprintf(p->port_s, sizeof(p->port_s), "%d", p->port);
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("redis-server", "redis-server", conf, "--sentinel",
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) {
		redisContext *rc = rp_connect(p);
		redisReply *r = rc ? redisCommand(rc, "PING") : NULL;
		int ok = r && r->type == REDIS_REPLY_STATUS;
		if (r)
			freeReplyObject(r);
		if (rc)
			redisFree(rc);
		if (ok)
			return 0;
		rp_sleep_ms(10);
	}
	return -1;
}

/* SIGKILLs it and reaps it (a Redis gone at once, as a crash). */
static void rp_kill(struct redisproc *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
	p->pid = 0;
}

/* Stops it and removes its directory. */
static void rp_stop(struct redisproc *p)
{
	rp_kill(p);
	if (!p->dir[0])
		return;
	DIR *d = opendir(p->dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char f[600];
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(f, sizeof(f), "%s/%s", p->dir, e->d_name);
		unlink(f);
	}
	if (d)
		closedir(d);
	rmdir(p->dir);
	p->dir[0] = '\0';
}

#endif
