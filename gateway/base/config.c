/*
 * config.c - defaults, then the config file, then the flags.
 *
 * One table (settings[]) names every setting once: the flag is "--" plus
 * its name, the config file line is its name plus a value, and --help is
 * printed from the same words. Numbers are parsed strictly (decimal, no
 * sign, no trailing text) and checked against the table's range.
 *
 * A bad setting leaves the default in place and the reading goes on, so
 * one run names every mistake (fg_config_load's reasons, one a line).
 * A reason quotes what was written, except a password (only the file's
 * path is named) and the user information of a URL (shown_url()).
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/config.h"
#include "base/path.h"
#include "fencegate/name.h"
#include "base/log.h"

enum kind { K_BOOL, K_UINT, K_HOSTPORT_LISTEN, K_HOSTPORT_REDIS, K_STRING, K_LOGLEVEL, K_ROUTE,
	    K_LOGFORMAT, K_PROXYAUTH, K_READYZ, K_UPSTREAMAPI };

struct setting {
	const char *name;
	enum kind kind;
	size_t off;
	unsigned min, max;
	const char *help;
};

#define U(field, lo, hi, h) { #field, K_UINT, offsetof(struct fg_config, field), lo, hi, h }
#define S(field, h) { #field, K_STRING, offsetof(struct fg_config, field), 0, 0, h }

static const struct setting settings[] = {
	{ "listen", K_HOSTPORT_LISTEN, 0, 0, 0, "HOST:PORT  address to serve on (127.0.0.1:8080)" },
	{ "upstream", K_STRING, offsetof(struct fg_config, upstream), 0, 0, "URL        the storage behind the gateway (http:// or https://)" },
	{ "redis", K_HOSTPORT_REDIS, 0, 0, 0, "ADDRESS    the Redis holding lock state: HOST:PORT (127.0.0.1:6379),\n"
	  "                      redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER, or\n"
	  "                      redis-cluster://HOST:PORT[,HOST:PORT...] (seed nodes)" },
	U(redis_replicas, 0, 16, "N          answer a grant only once WAIT says N replicas have it (0)"),
	U(redis_replicas_timeout_ms, 1, 60000, "MS         WAIT's bound; below redis-timeout-ms (100)"),
	{ "key-file", K_STRING, offsetof(struct fg_config, key_file), 0, 0, "FILE       sequencer HMAC key, 16-64 bytes (default: agreed through Redis)" },
	U(threads, 0, 256, "N          event loops, one thread each; 0 = one per core (0)"),
	U(max_connections, 16, 1000000, "N          concurrent client connections (16384)"),
	U(max_waiters, 1, 1000000, "N          blocked acquires queued per lock (20000)"),
	U(idle_forget_ms, 0, 86400000, "MS         a lock free this long leaves no Redis keys (600000)"),
	U(lock_delay_ms, 0, 3600000, "MS         default lock-delay of an acquire (0)"),
	U(redis_timeout_ms, 10, 60000, "MS         bound on one Redis round trip (2000)"),
	U(waiter_liveness_ms, 1000, 600000, "MS         a waiter outlives its gateway's last sign of life by this (10000)"),
	U(max_header_bytes, 2048, 1048576, "BYTES      bound on a request's head (16384)"),
	U(client_timeout_s, 1, 3600, "S          idle client connections are closed after this (30)"),
	U(drain_delay_ms, 0, 3600000, "MS         on SIGTERM, readiness is 503 this long before accepting\n"
	  "                      stops (0)"),
	U(drain_timeout_ms, 0, 3600000, "MS         then what is in flight may run this long before it is\n"
	  "                      ended as at a lease's end (30000)"),
	{ "readyz-requires", K_READYZ, 0, 0, 0, "LIST       readiness also follows: redis, upstream, both (a comma\n"
	  "                      list), or none (none)" },
	{ "log-level", K_LOGLEVEL, 0, 0, 0, "LEVEL      error, warn, info or debug (info)" },
	{ "access-log", K_STRING, offsetof(struct fg_config, access_log), 0, 0, "FILE       one line per request: a file (reopened on SIGHUP), stdout,\n"
	  "                      stderr, or off (off)" },
	{ "access-log-format", K_LOGFORMAT, 0, 0, 0, "FORMAT     json or text (json)" },
	U(upstream_connect_timeout_ms, 10, 600000, "MS         bound on connecting to the upstream (2000)"),
	U(upstream_timeout_ms, 10, 3600000, "MS         bound on the upstream's response head, then on each stall of its body (30000)"),
	U(fence_margin_ms, 0, 600000, "MS         an admitted write must end this long before its lease (250)"),
	U(write_max_ms, 100, 86400000, "MS         longest an admitted write may run (3600000)"),
	{ "events", K_BOOL, offsetof(struct fg_config, events), 0, 1, "yes|no     record grants, ends and refusals for /_fence/v1/events (yes)" },
	U(events_retain, 100, 10000000, "N          events kept in Redis, at most (100000)"),
	U(events_retain_ms, 1000, 2592000000u, "MS         and none older than this (86400000)"),
	{ "forward-token", K_BOOL, offsetof(struct fg_config, forward_token), 0, 1, "yes|no     pass `Fencing-Token: <n>` to the upstream (no)" },
	{ "proxy-redirect", K_BOOL, offsetof(struct fg_config, proxy_redirect), 0, 1, "yes|no     Location and Content-Location naming the upstream name the\n"
	  "                      gateway instead, as nginx's proxy_redirect default (yes)" },
	{ "write-methods", K_STRING, offsetof(struct fg_config, write_methods), 0, 0, "\"M ...\"    methods that must be fenced (" FG_DEFAULT_WRITE_METHODS ")" },
	{ "read-methods", K_STRING, offsetof(struct fg_config, read_methods), 0, 0, "\"M ...\"    methods that pass without a token (" FG_DEFAULT_READ_METHODS "); any other is fenced" },
	{ "route", K_ROUTE, 0, 0, 0, "PREFIX LOCK  (config file only) paths under PREFIX are guarded by LOCK" },
	S(auth_file, "FILE       principals, their keys' SHA-256 and their rights (docs/security.md);\n"
	  "                      without it the gateway is open to anyone who reaches it"),
	{ "allow-open", K_BOOL, offsetof(struct fg_config, allow_open), 0, 1, "yes|no     serve without auth-file on an address other than loopback (no)" },
	{ "proxy-auth", K_PROXYAUTH, 0, 0, 0, "off|required  proxied requests must name a principal with read:/lock: (off)" },
	S(tls_cert, "FILE       serve HTTPS only (TLS 1.2 or later) with this certificate chain (PEM)"),
	S(tls_key, "FILE       the private key of tls-cert (PEM)"),
	S(tls_client_ca, "FILE       verify client certificates against this CA (PEM); their CN names a principal"),
	S(upstream_ca, "FILE       verify an https:// upstream against this CA (PEM) instead of the system's"),
	S(upstream_cert, "FILE       client certificate (PEM) presented to an https:// upstream"),
	S(upstream_key, "FILE       its private key (PEM)"),
	S(redis_user, "NAME       authenticate every Redis connection as this ACL user"),
	S(redis_password_file, "FILE       the Redis password (one trailing newline is not part of it)"),
	{ "upstream-api", K_UPSTREAMAPI, 0, 0, 0, "http|s3    how the upstream is spoken to: plain HTTP (WebDAV, REST),\n"
	  "                      or an S3 object store, the gateway verifying SigV4 and\n"
	  "                      signing again (docs/s3.md) (http)" },
	S(s3_credentials, "FILE       S3 mode: `ACCESS_KEY_ID SECRET PRINCIPAL [UPSTREAM_FILE]` lines,\n"
	  "                      the keys clients sign with (owner-only; read again on SIGHUP)"),
	S(upstream_s3_credentials, "FILE       S3 mode: the gateway's own key id, secret and optional\n"
	  "                      session token at the store, one a line (owner-only)"),
	S(s3_region, "REGION     S3 mode: the region requests are signed for (us-east-1)"),
	S(s3_domain, "DOMAIN     S3 mode: a Host BUCKET.DOMAIN names the bucket (virtual-host style)"),
};

const char fg_config_usage[] =
	"usage: fencegate [--config FILE] [--NAME VALUE]...\n"
	"\n"
	"A fencing-token gateway: leased locks over HTTP, and a proxy that refuses\n"
	"stale writes before they reach the storage behind it.\n"
	"\n"
	"  --config FILE       read settings from FILE (`name value` lines, # comments);\n"
	"                      flags given on the command line override the file\n"
	"  --check-config      read and check the settings and every file they name,\n"
	"                      print what is wrong and exit 2, or \"configuration ok\"\n"
	"                      and exit 0; starts nothing (never listens, no Redis)\n"
	"  --route-test PATH   (may be repeated; implies --check-config) print the\n"
	"                      lock that guards PATH and the route rule that gives it;\n"
	"                      exit 2 when PATH maps to no valid lock name\n"
	"  --new-key NAME      (alone) print a new bearer key and its auth-file line, exit\n"
	"  --new-s3-key NAME   (alone) print a new s3-credentials line for principal NAME,\n"
	"                      exit\n";

static void say(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, n, fmt, ap);
	va_end(ap);
}

/* Adds one reason to the lines in err (a string), cut at n. */
static void note(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void note(char *err, size_t n, const char *fmt, ...)
{
	size_t len = strnlen(err, n);
	if (len + 2 >= n)
		return; /* full: the lines so far stand */
	if (len)
		err[len++] = '\n';
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + len, n - len, fmt, ap);
	va_end(ap);
}

/* The URL or address v as a reason may quote it: user information before
 * an '@' of its authority (a password, often) becomes "***". Returns v
 * itself when there is none, else buf. */
static const char *shown_url(const char *v, char *buf, size_t cap)
{
	const char *start = strstr(v, "://");
	start = start ? start + 3 : v;
	size_t auth = strcspn(start, "/?#");
	const char *at = NULL;
	for (const char *p = start; p < start + auth; p++)
		if (*p == '@')
			at = p;
	if (!at)
		return v;
	snprintf(buf, cap, "%.*s***%s", (int)(start - v), v, at);
	return buf;
}

void fg_config_init(struct fg_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->listen_host, "127.0.0.1");
	c->listen_port = 8080;
	strcpy(c->redis_host, "127.0.0.1");
	c->redis_port = 6379;
	c->redis.mode = FG_REDIS_DIRECT;
	strcpy(c->redis.seeds[0].host, "127.0.0.1");
	c->redis.seeds[0].port = 6379;
	c->redis.nseeds = 1;
	c->redis_replicas_timeout_ms = 100;
	c->threads = 0; /* one loop per core */
	c->max_connections = 16384;
	c->max_waiters = 20000;
	c->idle_forget_ms = 600000;
	c->lock_delay_ms = 0;
	c->redis_timeout_ms = 2000;
	c->waiter_liveness_ms = 10000;
	c->max_header_bytes = 16384;
	c->client_timeout_s = 30;
	c->drain_timeout_ms = 30000;
	c->proxy_redirect = 1;
	c->log_level = FG_LOG_INFO;
	c->upstream_connect_timeout_ms = 2000;
	c->upstream_timeout_ms = 30000;
	c->fence_margin_ms = 250;
	c->write_max_ms = 3600000;
	c->events = 1;
	c->events_retain = 100000;
	c->events_retain_ms = 86400000;
}

void fg_config_finish(struct fg_config *c)
{
	if (!c)
		return;
	free(c->upstream);
	free(c->key_file);
	free(c->access_log);
	free(c->write_methods);
	free(c->read_methods);
	c->write_methods = c->read_methods = NULL;
	char **files[] = { &c->auth_file, &c->tls_cert, &c->tls_key,
			   &c->tls_client_ca, &c->upstream_ca, &c->upstream_cert,
			   &c->upstream_key, &c->redis_user,
			   &c->redis_password_file, &c->s3_credentials,
			   &c->upstream_s3_credentials, &c->s3_region,
			   &c->s3_domain };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		free(*files[i]);
		*files[i] = NULL;
	}
	if (c->redis_password) {
		OPENSSL_cleanse(c->redis_password, strlen(c->redis_password));
		free(c->redis_password);
		c->redis_password = NULL;
	}
	for (size_t i = 0; i < c->nroutes; i++)
		fg_route_finish(&c->routes[i]);
	free(c->routes);
	c->upstream = c->key_file = c->access_log = NULL;
	c->routes = NULL;
	c->nroutes = 0;
}

int fg_parse_hostport(const char *s, char *host, size_t cap, int *port)
{
	const char *colon;
	size_t hlen;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -1;
		hlen = (size_t)(end - s - 1);
		s++;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -1;
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= cap)
		return -1;
	/* a bracket is only the IPv6 form's delimiter, never part of a host */
	for (size_t i = 0; i < hlen; i++)
		if (s[i] <= ' ' || s[i] == '/' || s[i] == '@' || s[i] == '[' ||
		    s[i] == ']' || (unsigned char)s[i] >= 0x7f)
			return -1;
	const char *p = colon + 1;
	if (*p < '0' || *p > '9' || strlen(p) > 5)
		return -1;
	char *end;
	long v = strtol(p, &end, 10);
	if (*end || v < 1 || v > 65535)
		return -1;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	*port = (int)v;
	return 0;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	if (*s < '0' || *s > '9' || strlen(s) > 10)
		return -1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int fg_upstream_parse(const char *s, struct fg_upstream *out)
{
	const char *rest;
	memset(out, 0, sizeof(*out));
	if (strncasecmp(s, "http://", 7) == 0) {
		rest = s + 7;
		strcpy(out->port, "80");
	} else if (strncasecmp(s, "https://", 8) == 0) {
		rest = s + 8;
		strcpy(out->port, "443");
	} else {
		return -1;
	}
	if (*rest == '\0' || *rest == '/' || strlen(s) >= sizeof(out->base))
		return -1;
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || (unsigned char)*p >= 0x7f)
			return -1;
	size_t auth = strcspn(rest, "/?#");
	const char *at = memchr(rest, '@', auth);
	const char *host = at ? at + 1 : rest;
	const char *hend = rest + auth;
	const char *colon = NULL, *hb = host, *he;
	if (*host == '[') {
		const char *rb = memchr(host, ']', (size_t)(hend - host));
		if (!rb || rb == host + 1)
			return -1;
		hb = host + 1;
		he = rb;
		colon = rb + 1 < hend && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(host, ':', (size_t)(hend - host));
		he = colon ? colon : hend;
	}
	if (he == hb || (size_t)(he - hb) >= sizeof(out->host))
		return -1; /* no host */
	memcpy(out->host, hb, (size_t)(he - hb));
	if (colon) {
		size_t plen = (size_t)(hend - colon - 1);
		if (plen == 0 || plen > 5)
			return -1;
		long port = 0;
		for (const char *p = colon + 1; p < hend; p++) {
			if (*p < '0' || *p > '9')
				return -1;
			port = port * 10 + (*p - '0');
		}
		if (port < 1 || port > 65535)
			return -1;
		snprintf(out->port, sizeof(out->port), "%ld", port);
	}
	/* requests go to base + target: no trailing '/' */
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		n--;
	memcpy(out->base, s, n);
	out->base[n] = '\0';
	/* what a forwarded Destination starts with */
	const char *b = out->base + (rest - s);
	snprintf(out->base_path, sizeof(out->base_path), "%s", b + strcspn(b, "/"));
	return 0;
}

/* `route /PREFIX LOCK`: exactly two words, compiled (base/route.c): a
 * prefix starting with '/', its captures whole segments, a lock that is a
 * valid lock name whatever the captures it uses hold. */
static int add_route(struct fg_config *c, const char *value, char *err, size_t n)
{
	const char *p = value, *w[3];
	size_t len[3];
	int words = 0;
	while (*p && words < 3) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		w[words] = p;
		len[words] = strcspn(p, " \t");
		p += len[words];
		words++;
	}
	if (words != 2 || w[0][0] != '/' || len[0] > FG_ROUTE_PREFIX_MAX) {
		say(err, n, "route: expected `route /PREFIX LOCK`, got '%s'", value);
		return -1;
	}
	struct fg_route *r = realloc(c->routes, (c->nroutes + 1) * sizeof(*r));
	if (!r) {
		say(err, n, "out of memory");
		return -1;
	}
	c->routes = r;
	if (fg_route_compile(&r[c->nroutes], w[0], len[0], w[1], len[1], err, n))
		return -1;
	c->nroutes++;
	return 0;
}

/* "redis", "upstream", a comma list of them, "none" or "": the whole
 * value is read before the setting changes. */
static int parse_readyz(struct fg_config *c, const char *value, char *err,
			size_t n)
{
	unsigned want = 0;
	const char *p = value;
	if (strcmp(value, "none") == 0 || value[0] == '\0')
		goto done;
	for (;;) {
		size_t len = strcspn(p, ",");
		if (len == 5 && strncmp(p, "redis", 5) == 0)
			want |= FG_READYZ_REDIS;
		else if (len == 8 && strncmp(p, "upstream", 8) == 0)
			want |= FG_READYZ_UPSTREAM;
		else {
			say(err, n, "readyz-requires: '%s' is not a comma list of "
			    "redis and upstream, or none", value);
			return -1;
		}
		if (!p[len])
			break;
		p += len + 1;
	}
done:
	c->readyz_requires = want;
	return 0;
}

static const struct setting *find_setting(const char *name)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		const char *a = settings[i].name, *b = name;
		/* "max-waiters" and "max_waiters" are the same setting */
		while (*a && *b && (*a == *b || (*a == '_' && *b == '-') ||
				    (*a == '-' && *b == '_'))) {
			a++;
			b++;
		}
		if (!*a && !*b)
			return &settings[i];
	}
	return NULL;
}

int fg_config_set(struct fg_config *c, const char *name, const char *value,
		  char *err, size_t n)
{
	const struct setting *s = find_setting(name);
	if (!s) {
		say(err, n, "unknown setting '%s' (see --help)", name);
		return -1;
	}
	if (!value) {
		say(err, n, "%s needs a value", name);
		return -1;
	}
	switch (s->kind) {
	case K_BOOL: {
		unsigned *slot = (unsigned *)((char *)c + s->off);
		if (!strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "1"))
			*slot = 1;
		else if (!strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "0"))
			*slot = 0;
		else {
			say(err, n, "%s: '%s' is not yes or no", name, value);
			return -1;
		}
		return 0;
	}
	case K_UINT:
		if (parse_uint(value, s->min, s->max,
			       (unsigned *)((char *)c + s->off))) {
			say(err, n, "%s: '%s' is not a whole number in %u..%u",
			    name, value, s->min, s->max);
			return -1;
		}
		return 0;
	case K_HOSTPORT_LISTEN: {
		/* The address to serve on must exist now (Redis' and the
		 * upstream's may come later). */
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
					  .ai_flags = AI_PASSIVE };
		struct addrinfo *ai = NULL;
		char host[FG_HOST_MAX];
		int port;
		if (fg_parse_hostport(value, host, sizeof(host), &port)) {
			say(err, n, "listen: '%s' is not HOST:PORT of this machine", value);
			return -1;
		}
		int gai = getaddrinfo(host, NULL, &hints, &ai);
		if (gai != 0) {
			say(err, n, "listen: '%s' is not HOST:PORT of this machine "
			    "(cannot resolve %s: %s)", value, host, gai_strerror(gai));
			return -1;
		}
		freeaddrinfo(ai);
		memcpy(c->listen_host, host, sizeof(host));
		c->listen_port = port;
		return 0;
	}
	case K_HOSTPORT_REDIS: {
		char host[FG_HOST_MAX];
		int port;
		struct fg_redis_addr a;
		char why[256], shown[512];
		const char *v = shown_url(value, shown, sizeof(shown));
		if (v != value) {
			/* lockcore's reason would quote the password */
			say(err, n, "redis: '%s' is not an address (a user and "
			    "password go in redis-user and redis-password-file)", v);
			return -1;
		}
		if (strstr(value, "://")) {
			if (fg_redis_addr_parse(value, &a, why, sizeof(why))) {
				say(err, n, "redis: %s", why);
				return -1;
			}
		} else if (fg_parse_hostport(value, host, sizeof(host), &port)) {
			say(err, n, "redis: '%s' is not HOST:PORT", value);
			return -1;
		} else {
			memset(&a, 0, sizeof(a));
			a.mode = FG_REDIS_DIRECT;
			memcpy(a.seeds[0].host, host, sizeof(a.seeds[0].host));
			a.seeds[0].port = port;
			a.nseeds = 1;
		}
		c->redis = a;
		memcpy(c->redis_host, a.seeds[0].host, sizeof(c->redis_host));
		c->redis_port = a.seeds[0].port;
		return 0;
	}
	case K_STRING: {
		if (s->off == offsetof(struct fg_config, upstream) &&
		    fg_upstream_parse(value, &c->up) != 0) {
			char shown[512];
			say(err, n, "upstream: '%s' is not an http:// or https:// URL",
			    shown_url(value, shown, sizeof(shown)));
			return -1;
		}
		if (s->off == offsetof(struct fg_config, write_methods) ||
		    s->off == offsetof(struct fg_config, read_methods)) {
			bool any = false;
			for (const char *p = value; *p; p++) {
				if (!((*p >= 'A' && *p <= 'Z') || *p == ' ' || *p == '-' || *p == '_')) {
					say(err, n, "%s: '%s' is not a list of methods", name, value);
					return -1;
				}
				any |= *p != ' ';
			}
			if (!any) {
				say(err, n, "%s: at least one method is required", name);
				return -1;
			}
		}
		if (s->off == offsetof(struct fg_config, s3_domain) &&
		    (value[0] == '\0' || value[0] == '.' || strlen(value) > 253 ||
		     value[strlen(value) - 1] == '.' || strstr(value, "..") ||
		     strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != strlen(value))) {
			say(err, n, "s3-domain: '%s' is not a DNS name", value);
			return -1;
		}
		char **slot = (char **)((char *)c + s->off);
		char *copy = strdup(value);
		if (!copy) {
			say(err, n, "out of memory");
			return -1;
		}
		free(*slot);
		*slot = copy;
		return 0;
	}
	case K_LOGLEVEL: {
		static const char *const lv[] = { "error", "warn", "info", "debug" };
		for (int i = 0; i < 4; i++)
			if (strcmp(value, lv[i]) == 0) {
				c->log_level = i;
				return 0;
			}
		say(err, n, "log-level: '%s' is not error, warn, info or debug", value);
		return -1;
	}
	case K_LOGFORMAT:
		if (strcmp(value, "json") == 0 || strcmp(value, "text") == 0) {
			c->access_log_text = value[0] == 't';
			return 0;
		}
		say(err, n, "access-log-format: '%s' is not json or text", value);
		return -1;
	case K_ROUTE:
		return add_route(c, value, err, n);
	case K_PROXYAUTH:
		if (strcmp(value, "off") == 0 || strcmp(value, "required") == 0) {
			c->proxy_auth = value[0] == 'r';
			return 0;
		}
		say(err, n, "proxy-auth: '%s' is not off or required", value);
		return -1;
	case K_READYZ:
		return parse_readyz(c, value, err, n);
	case K_UPSTREAMAPI:
		if (strcmp(value, "http") == 0 || strcmp(value, "s3") == 0) {
			c->upstream_api_s3 = value[0] == 's';
			return 0;
		}
		say(err, n, "upstream-api: '%s' is not http or s3", value);
		return -1;
	}
	return -1;
}

int fg_config_read_file(struct fg_config *c, const char *path, char *err,
			size_t n)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int lineno = 0, rc = 0;

	if (!f) {
		note(err, n, "cannot read config file '%s': %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t len = strlen(line);
		int next = len == sizeof(line) - 1 && line[len - 1] != '\n' ? fgetc(f) : EOF;
		if (next != EOF) {
			/* where the next line starts is unknown: stop here */
			note(err, n, "%s:%d: line too long", path, lineno);
			rc = -1;
			break;
		}
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		/* '#' starts a comment at the start of a word, so that
		 * `upstream http://h/x#frag` keeps its fragment */
		for (char *h = p; *h; h++)
			if (*h == '#' && (h == p || h[-1] == ' ' || h[-1] == '\t')) {
				*h = '\0';
				break;
			}
		char *end = p + strlen(p);
		while (end > p && (end[-1] == '\n' || end[-1] == '\r' ||
				   end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*p == '\0')
			continue;
		char *name = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		if (*p)
			*p++ = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		char msg[512];
		if (strcmp(name, "config") == 0) {
			note(err, n, "%s:%d: 'config' cannot be nested", path, lineno);
			rc = -1;
		} else if (fg_config_set(c, name, *p ? p : NULL, msg, sizeof(msg))) {
			note(err, n, "%s:%d: %s", path, lineno, msg);
			rc = -1;
		}
	}
	if (ferror(f)) {
		note(err, n, "cannot read config file '%s': %s", path, strerror(errno));
		rc = -1;
	}
	fclose(f);
	return rc;
}

/* 127.0.0.0/8, ::1 and "localhost": nobody but this machine reaches it. */
static bool is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false;
}

/* A secret file's contents: at most 1024 bytes, one trailing newline (or
 * CRLF) not part of it. Caller owns the result (cleanse, then free). */
static char *read_secret(const char *path, const char *what, char *err,
			 size_t n)
{
	char buf[1026];
	FILE *f = fopen(path, "r");
	if (!f) {
		say(err, n, "%s: cannot read '%s': %s", what, path, strerror(errno));
		return NULL;
	}
	size_t len = fread(buf, 1, sizeof(buf), f);
	bool bad = ferror(f);
	fclose(f);
	if (bad || len > 1025) {
		say(err, n, "%s: '%s' is %s", what, path,
		    bad ? "unreadable" : "longer than 1024 bytes");
		OPENSSL_cleanse(buf, sizeof(buf));
		return NULL;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	if (len == 0 || len > 1024 || memchr(buf, '\0', len)) {
		say(err, n, "%s: '%s' %s", what, path,
		    len == 0 ? "is empty" : len > 1024 ? "is longer than 1024 bytes"
						       : "holds a NUL byte");
		OPENSSL_cleanse(buf, sizeof(buf));
		return NULL;
	}
	char *s = malloc(len + 1);
	if (s) {
		memcpy(s, buf, len);
		s[len] = '\0';
	} else {
		say(err, n, "out of memory");
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return s;
}

/* The v1.2 settings that only make sense together, and open mode off
 * loopback (refused unless allow-open says it is meant, as Redis'
 * protected mode). 0, or -1 with each reason noted in err. */
static int check_who_may(struct fg_config *c, char *err, size_t n)
{
	int rc = 0;
	if (!c->tls_cert != !c->tls_key) {
		note(err, n, "tls-cert and tls-key go together");
		rc = -1;
	}
	if (c->tls_client_ca && !c->tls_cert) {
		note(err, n, "tls-client-ca needs tls-cert and tls-key");
		rc = -1;
	}
	if (!c->upstream_cert != !c->upstream_key) {
		note(err, n, "upstream-cert and upstream-key go together");
		rc = -1;
	}
	if (c->redis_user && !c->redis_password_file) {
		note(err, n, "redis-user needs redis-password-file");
		rc = -1;
	}
	if (c->proxy_auth && !c->auth_file) {
		note(err, n, "proxy-auth required needs auth-file");
		rc = -1;
	}
	if (c->upstream_api_s3 && !c->s3_credentials) {
		note(err, n, "upstream-api s3 needs s3-credentials (the keys clients "
		     "sign with)");
		rc = -1;
	}
	if (c->upstream_api_s3 && !c->upstream_s3_credentials) {
		note(err, n, "upstream-api s3 needs upstream-s3-credentials (the "
		     "gateway's own key at the store)");
		rc = -1;
	}
	if (!c->upstream_api_s3 && (c->s3_credentials || c->upstream_s3_credentials)) {
		note(err, n, "s3-credentials and upstream-s3-credentials need "
		     "upstream-api s3");
		rc = -1;
	}
	if (c->redis_password_file) {
		char why[512];
		c->redis_password = read_secret(c->redis_password_file,
						"redis-password-file", why,
						sizeof(why));
		if (!c->redis_password) {
			note(err, n, "%s", why);
			rc = -1;
		}
	}
	if (!c->auth_file && !c->allow_open && !is_loopback(c->listen_host)) {
		note(err, n, "listening on %s without auth-file would let anyone who "
		     "reaches it take any lock; set auth-file, or 'allow-open yes' "
		     "to serve open on purpose", c->listen_host);
		rc = -1;
	}
	return rc;
}

static void print_help(void)
{
	fputs(fg_config_usage, stdout);
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		char flag[64];
		snprintf(flag, sizeof(flag), "--%s", settings[i].name);
		for (char *p = flag; *p; p++)
			if (*p == '_')
				*p = '-';
		printf("  %-19s %s\n", flag, settings[i].help);
	}
	fputs("  --help              this text\n  --version           the version\n", stdout);
}

enum fg_config_result fg_config_load(struct fg_config *c, int argc,
				     char **argv, char *err, size_t n)
{
	const char *file = NULL;
	int rc = 0;

	if (n)
		err[0] = '\0';
	/* The file goes first wherever --config stands, so flags win. */
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			print_help();
			return FG_CONFIG_EXIT;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("fencegate %s\n", FG_VERSION);
			return FG_CONFIG_EXIT;
		}
		if (strcmp(argv[i], "--check-config") == 0)
			c->check_only = 1;
		if (strcmp(argv[i], "--route-test") == 0 ||
		    strncmp(argv[i], "--route-test=", 13) == 0) {
			/* a check of the routes is a check of the config */
			c->check_only = 1;
			if (!argv[i][12] && i + 1 < argc)
				i++; /* its path, whatever it is */
		}
		if (strcmp(argv[i], "--config") == 0) {
			if (i + 1 >= argc) {
				note(err, n, "--config needs a file name");
				return FG_CONFIG_ERROR;
			}
			file = argv[++i];
		} else if (strncmp(argv[i], "--config=", 9) == 0) {
			file = argv[i] + 9;
		}
	}
	if (file && fg_config_read_file(c, file, err, n))
		rc = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
			note(err, n, "unexpected argument '%s' (see --help)", a);
			rc = -1;
			continue;
		}
		a += 2;
		char name[64];
		const char *value;
		const char *eq = strchr(a, '=');
		if (strcmp(a, "check-config") == 0)
			continue;
		if (strcmp(a, "route-test") == 0 || strncmp(a, "route-test=", 11) == 0) {
			const char *path = a[10] ? a + 11 : i + 1 < argc ? argv[++i] : NULL;
			if (!path) {
				note(err, n, "--route-test needs a path");
				rc = -1;
			} else if (c->nroute_tests >= FG_ROUTE_TESTS_MAX) {
				note(err, n, "--route-test: at most %d paths", FG_ROUTE_TESTS_MAX);
				rc = -1;
			} else {
				c->route_test[c->nroute_tests++] = path;
			}
			continue;
		}
		if (eq) {
			if ((size_t)(eq - a) >= sizeof(name)) {
				note(err, n, "unknown flag '%.*s'", (int)(eq - argv[i]),
				     argv[i]);
				rc = -1;
				continue;
			}
			memcpy(name, a, (size_t)(eq - a));
			name[eq - a] = '\0';
			value = eq + 1;
		} else {
			/* an unknown flag takes no flag as its value, so that
			 * the next one is still read */
			bool takes = i + 1 < argc &&
				     (find_setting(a) || strcmp(a, "config") == 0 ||
				      strncmp(argv[i + 1], "--", 2) != 0);
			value = takes ? argv[++i] : NULL;
			if (strlen(a) >= sizeof(name)) {
				note(err, n, "unknown flag '%s'", argv[takes ? i - 1 : i]);
				rc = -1;
				continue;
			}
			strcpy(name, a);
		}
		if (strcmp(name, "config") == 0)
			continue;
		if (strcmp(name, "route") == 0) {
			note(err, n, "route is a config file setting");
			rc = -1;
			continue;
		}
		if (!value && find_setting(name)) {
			note(err, n, "--%s needs a value", name);
			rc = -1;
			continue;
		}
		char msg[512];
		if (fg_config_set(c, name, value, msg, sizeof(msg))) {
			note(err, n, "%s", msg);
			rc = -1;
		}
	}
	if (c->redis_replicas && c->redis_replicas_timeout_ms >= c->redis_timeout_ms) {
		/* a grant whose WAIT outlived the call could not be undone */
		note(err, n, "redis-replicas-timeout-ms (%u) must be below "
		     "redis-timeout-ms (%u)", c->redis_replicas_timeout_ms,
		     c->redis_timeout_ms);
		rc = -1;
	}
	if (check_who_may(c, err, n))
		rc = -1;
	return rc ? FG_CONFIG_ERROR : FG_CONFIG_OK;
}

/* ---- what changed ------------------------------------------------------ */

static bool str_differ(const char *a, const char *b)
{
	if (!a || !b)
		return a != b;
	return strcmp(a, b) != 0;
}

static bool routes_differ(const struct fg_config *a, const struct fg_config *b)
{
	if (a->nroutes != b->nroutes)
		return true;
	for (size_t i = 0; i < a->nroutes; i++)
		if (strcmp(a->routes[i].prefix, b->routes[i].prefix) != 0 ||
		    strcmp(a->routes[i].lock, b->routes[i].lock) != 0)
			return true;
	return false;
}

static bool redis_differ(const struct fg_redis_addr *a, const struct fg_redis_addr *b)
{
	if (a->mode != b->mode || a->nseeds != b->nseeds ||
	    strcmp(a->master, b->master) != 0)
		return true;
	for (size_t i = 0; i < a->nseeds; i++)
		if (a->seeds[i].port != b->seeds[i].port ||
		    strcmp(a->seeds[i].host, b->seeds[i].host) != 0)
			return true;
	return false;
}

static bool setting_differs(const struct setting *s, const struct fg_config *a,
			    const struct fg_config *b)
{
	switch (s->kind) {
	case K_BOOL:
	case K_UINT:
		return *(const unsigned *)((const char *)a + s->off) !=
		       *(const unsigned *)((const char *)b + s->off);
	case K_STRING:
		return str_differ(*(char *const *)((const char *)a + s->off),
				  *(char *const *)((const char *)b + s->off));
	case K_HOSTPORT_LISTEN:
		return a->listen_port != b->listen_port ||
		       strcmp(a->listen_host, b->listen_host) != 0;
	case K_HOSTPORT_REDIS:
		return redis_differ(&a->redis, &b->redis);
	case K_LOGLEVEL:
		return a->log_level != b->log_level;
	case K_LOGFORMAT:
		return a->access_log_text != b->access_log_text;
	case K_ROUTE:
		return routes_differ(a, b);
	case K_PROXYAUTH:
		return a->proxy_auth != b->proxy_auth;
	case K_READYZ:
		return a->readyz_requires != b->readyz_requires;
	case K_UPSTREAMAPI:
		return a->upstream_api_s3 != b->upstream_api_s3;
	}
	return false;
}

/* Appends a setting's name as a flag spells it ("max-waiters"). */
static void add_name(char *out, size_t n, size_t *len, const char *name)
{
	if (*len + 3 >= n)
		return;
	if (*len) {
		out[(*len)++] = ',';
		out[(*len)++] = ' ';
	}
	for (const char *p = name; *p && *len + 1 < n; p++)
		out[(*len)++] = *p == '_' ? '-' : *p;
	out[*len] = '\0';
}

unsigned fg_config_changed(const struct fg_config *a, const struct fg_config *b,
			   char *out, size_t n)
{
	unsigned count = 0;
	size_t len = 0;

	if (n)
		out[0] = '\0';
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (setting_differs(&settings[i], a, b)) {
			add_name(out, n, &len, settings[i].name);
			count++;
		}
	/* the password's file may be the same and its content not */
	if (!setting_differs(find_setting("redis-password-file"), a, b) &&
	    str_differ(a->redis_password, b->redis_password)) {
		add_name(out, n, &len, "redis-password-file (its content)");
		count++;
	}
	return count;
}
