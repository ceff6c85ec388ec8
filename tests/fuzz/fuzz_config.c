/*
 * fuzz_config - the config file reader (gateway/base/config.c): `name value`
 * lines, # comments, every setting's value parser, route rules. The input
 * is written to one temporary file (made once, rewritten per input) and
 * read with fg_config_read_file(), as `fencegate --config FILE` does.
 *
 * Properties:
 *  - fg_config_read_file() returns 0, or -1 with a message;
 *  - after 0, every setting is inside its documented range (the invariant
 *    of config.h), every route has a prefix starting with '/' and a valid
 *    lock name or a template of one (the prefix stored resolved:
 *    resolving it again changes nothing), the upstream is an http(s)
 *    URL, the method lists hold only [A-Z_-] and spaces and name at
 *    least one method;
 *  - fg_config_finish() frees everything, whether the read succeeded or
 *    not (LeakSanitizer checks every input), and may be called twice;
 *  - fg_parse_hostport() on the input as a C string: when it accepts, the
 *    host is non-empty and the port in 1..65535, and "host:port" (or
 *    "[host]:port") parses back to the same (except for the known finding
 *    noted in check_hostport()).
 *
 * `listen` resolves its host with getaddrinfo(); a DNS query per input
 * would make the harness slow and dependent on the network, so this file
 * replaces getaddrinfo() with a numeric-only lookup ("localhost" means
 * 127.0.0.1).
 */
#include <dlfcn.h>
#include <netdb.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/config.h"
#include "fencegate/name.h"
#include "fuzz.h"
#include "base/writeset.h"

int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	static int (*real)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	if (!real)
		real = (int (*)(const char *, const char *, const struct addrinfo *,
				struct addrinfo **))dlsym(RTLD_NEXT, "getaddrinfo");
	PROPERTY(real != NULL);
	struct addrinfo h = { 0 };
	if (hints)
		h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	if (node && strcasecmp(node, "localhost") == 0)
		node = "127.0.0.1";
	return real(node, service, &h, res);
}

/* The file is unlinked as soon as it is made (libFuzzer may leave with
 * _Exit, so no clean-up would run); it is read back through its
 * descriptor's /proc name. */
static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char tmpl[] = "/tmp/fencegate-fuzz-config-XXXXXX";
	(void)argc;
	(void)argv;
	fd = mkstemp(tmpl);
	PROPERTY(fd >= 0 && unlink(tmpl) == 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return 0;
}

static bool in(unsigned v, unsigned lo, unsigned hi)
{
	return v >= lo && v <= hi;
}

static bool method_list(const char *s)
{
	bool any = false;
	for (const char *p = s; *p; p++) {
		if (!((*p >= 'A' && *p <= 'Z') || *p == ' ' || *p == '-' || *p == '_'))
			return false;
		any |= *p != ' ';
	}
	return any;
}

static void check_config(const struct fg_config *c)
{
	PROPERTY(c->listen_host[0] != '\0' && in((unsigned)c->listen_port, 1, 65535));
	PROPERTY(c->redis_host[0] != '\0' && in((unsigned)c->redis_port, 1, 65535));
	PROPERTY(strnlen(c->listen_host, FG_HOST_MAX) < FG_HOST_MAX);
	PROPERTY(strnlen(c->redis_host, FG_HOST_MAX) < FG_HOST_MAX);
	PROPERTY(in(c->threads, 0, 256));
	PROPERTY(in(c->max_connections, 16, 1000000));
	PROPERTY(in(c->max_waiters, 1, 1000000));
	PROPERTY(in(c->idle_forget_ms, 0, 86400000));
	PROPERTY(in(c->lock_delay_ms, 0, 3600000));
	PROPERTY(in(c->redis_timeout_ms, 10, 60000));
	PROPERTY(in(c->waiter_liveness_ms, 1000, 600000));
	PROPERTY(in(c->max_header_bytes, 2048, 1048576));
	PROPERTY(in(c->client_timeout_s, 1, 3600));
	PROPERTY(c->log_level >= 0 && c->log_level <= 3);
	PROPERTY(in(c->upstream_connect_timeout_ms, 10, 600000));
	PROPERTY(in(c->upstream_timeout_ms, 10, 3600000));
	PROPERTY(in(c->fence_margin_ms, 0, 600000));
	PROPERTY(in(c->write_max_ms, 100, 86400000));
	PROPERTY(c->forward_token <= 1);
	if (c->upstream) {
		PROPERTY(strncasecmp(c->upstream, "http://", 7) == 0 ||
			 strncasecmp(c->upstream, "https://", 8) == 0);
		/* the one reading of the URL: a host, a port, and a base that
		 * is the URL less its trailing slashes */
		size_t bl = strlen(c->up.base);
		PROPERTY(c->up.host[0] != '\0' && c->up.port[0] != '\0');
		PROPERTY(bl > 0 && strncmp(c->up.base, c->upstream, bl) == 0);
		for (const char *p = c->upstream + bl; *p; p++)
			PROPERTY(*p == '/');
		PROPERTY(c->up.base_path[0] == '\0' || c->up.base_path[0] == '/');
	}
	if (c->write_methods)
		PROPERTY(method_list(c->write_methods));
	if (c->read_methods)
		PROPERTY(method_list(c->read_methods));
	PROPERTY((c->routes == NULL) == (c->nroutes == 0));
	for (size_t i = 0; i < c->nroutes; i++) {
		PROPERTY(c->routes[i].prefix && c->routes[i].prefix[0] == '/');
		/* stored resolved, as the paths it is matched against */
		char again[FG_PATH_MAX];
		size_t plen = strlen(c->routes[i].prefix), alen = 0;
		PROPERTY(fg_path_resolve(c->routes[i].prefix, plen, again,
					 sizeof(again), &alen) == FG_PATH_OK ||
			 strchr(c->routes[i].prefix, '%') != NULL);
		if (!strchr(c->routes[i].prefix, '%'))
			PROPERTY(alen == plen && memcmp(again, c->routes[i].prefix, plen) == 0);
		/* a lock, or a template using the prefix's captures
		 * (base/route.c checks it names a lock whatever they hold) */
		PROPERTY(c->routes[i].lock &&
			 (fg_name_valid(c->routes[i].lock, strlen(c->routes[i].lock)) ||
			  (strchr(c->routes[i].lock, '{') && c->routes[i].ncaps > 0)));
	}
}

static void check_file(const uint8_t *data, size_t size)
{
	PROPERTY(ftruncate(fd, 0) == 0);
	PROPERTY(pwrite(fd, data, size, 0) == (ssize_t)size);

	struct fg_config c;
	char err[512] = "";
	fg_config_init(&c);
	check_config(&c);
	int r = fg_config_read_file(&c, path, err, sizeof(err));
	PROPERTY(r == 0 || r == -1);
	if (r == 0)
		check_config(&c);
	else
		PROPERTY(err[0] != '\0');
	fg_config_finish(&c);
	fg_config_finish(&c);
}

static void check_hostport(const uint8_t *data, size_t size)
{
	if (size > 600)
		return;
	char s[601], host[FG_HOST_MAX], host2[FG_HOST_MAX];
	int port = -1, port2 = -1;
	memcpy(s, data, size);
	s[size] = '\0';
	if (fg_parse_hostport(s, host, sizeof(host), &port) != 0)
		return;
	PROPERTY(host[0] != '\0' && strlen(host) < sizeof(host));
	PROPERTY(port >= 1 && port <= 65535);
	/* no bracket survives into a host (the finding "[[vv5]:5", now in
	 * the corpus) */
	PROPERTY(!strpbrk(host, "[]"));
	char again[FG_HOST_MAX + 16];
	snprintf(again, sizeof(again), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
	PROPERTY(fg_parse_hostport(again, host2, sizeof(host2), &port2) == 0);
	PROPERTY(strcmp(host, host2) == 0 && port == port2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_file(data, size);
	check_hostport(data, size);
	return 0;
}
