/*
 * front.c - the HTTP front: libmicrohttpd setup, per-request state, body
 * limits, and the split between the lock API and the proxy, which it
 * reaches only through the routes its loop handed it (front.h).
 *
 * Invariants: a request's state (struct fg_req) is allocated when its
 * request line is read (the URI callback) and freed in the
 * request-completed callback, nowhere else, after its route finished it
 * and its record was reported; loop->inflight counts them (a stopping
 * loop waits for it to reach 0); an API body never grows past
 * FG_BODY_MAX bytes; every request under /_fence/ goes to the API, every
 * other one to the proxy.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "http/respond.h"
#include "http/framing.h"
#include "http/front.h"
#include "proc/accesslog.h"
#include "proc/report.h"
#include "http/req.h"
#include "proc/gateway.h"
#include "base/log.h"
#include "rt/rt.h"
#include "proc/tls.h"

#define API_PREFIX "/_fence/"
/* How much of an oversized body is read and dropped before the answer,
 * so that a client that ignores 413 cannot keep the connection busy. */
#define DISCARD_MAX (1024 * 1024)

/* The peer's address, for the access log. */
static void client_addr(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	out[0] = '\0';
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
			  out, (socklen_t)cap);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			  out, (socklen_t)cap);
}

const char *fg_req_client(struct fg_req *req)
{
	if (!req->rec.client[0])
		client_addr(req->conn, req->rec.client, sizeof(req->rec.client));
	return req->rec.client;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct fg_loop *loop = cls;
	struct fg_req *req = fg_recycle_get(&loop->req_blocks, sizeof(*req));
	if (!req)
		return NULL;
	req->loop = loop;
	loop->inflight++;
	req->gw = loop->gw;
	req->conn = c;
	req->uri = strdup(uri);
	fg_framing_note_target(req, uri);
	fg_rec_begin(&req->rec, uri);
	req->rec.uri = req->uri;
	req->rec.principal = req->principal;
	req->rec.route = &req->route;
	req->rec.s3 = req->gw->cfg->upstream_api_s3 && req->rec.proxied;
	/* the lock API keeps it with grants and waiters, for the listing */
	if (fg_accesslog_on() ||
	    strncmp(uri, API_PREFIX, sizeof(API_PREFIX) - 1) == 0)
		client_addr(c, req->rec.client, sizeof(req->rec.client));
	return req;
}

static bool is_api(const char *uri)
{
	return strncmp(uri, API_PREFIX, sizeof(API_PREFIX) - 1) == 0;
}

/* A request under /_fence/ is routed once (base/apiroute.h): at its first
 * handler call, once its target is in origin form, or, for one that never
 * got that far (refused by its framing, or by libmicrohttpd before any
 * handler ran), when it completes, so that its record counts it. */
static void route_once(struct fg_req *req, const char *method)
{
	if (!req->route.matched && req->uri && is_api(req->uri))
		fg_apiroute_match(&req->route, method, req->uri);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct fg_req *req = *con_cls;
	(void)cls;
	(void)c;
	if (!req)
		return;
	bool ok = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
	route_once(req, req->rec.method);
	if (is_api(req->uri ? req->uri : ""))
		req->loop->routes->api_finish(req, ok);
	else
		req->loop->routes->proxy_finish(req);
	fg_rec_close(&req->rec, ok, req->body_len);
	fg_report(req->gw->id, &req->rec);
	struct fg_loop *loop = req->loop;
	loop->inflight--;
	free(req->body);
	free(req->uri);
	free(req->target_host);
	fg_recycle_put(&loop->req_blocks, req);
	*con_cls = NULL;
}

static bool body_too_large(struct MHD_Connection *c)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!cl)
		return false;
	char *end;
	unsigned long long n = strtoull(cl, &end, 10);
	return *end != '\0' || n > FG_BODY_MAX;
}

/* Appends upload data; false once the body passed the limit. */
static bool take_body(struct fg_req *req, const char *data, size_t n)
{
	if (req->over) {
		req->body_len += n; /* counts what is dropped */
		return false;
	}
	if (req->body_len + n > FG_BODY_MAX) {
		req->over = true;
		req->body_len += n;
		return false;
	}
	if (!req->body) {
		req->body = malloc(FG_BODY_MAX + 1);
		if (!req->body)
			return false;
	}
	memcpy(req->body + req->body_len, data, n);
	req->body_len += n;
	req->body[req->body_len] = '\0';
	return true;
}

static enum MHD_Result handle(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *version,
			      const char *upload, size_t *upload_size);

/* The handler runs with the request as the thread's current one, so that
 * whatever answer it queues is noted in the request's record. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct fg_req *req = *con_cls;
	(void)cls;
	(void)url;
	if (!req || !req->uri)
		return MHD_NO;
	fg_rec_enter(&req->rec, method);
	enum MHD_Result ret = handle(req, c, method, version, upload, upload_size);
	fg_rec_leave();
	return ret;
}

/*
 * A server accepts a target in absolute form (RFC 9112 3.2.2), as a client
 * sends it to a proxy: "http://authority/path?query". Its authority stands
 * for the Host header, which is then ignored, and the rest is the target,
 * in origin form, from here on: the lock API and the proxy see only that.
 * A target with userinfo, an empty or overlong authority is refused. True
 * when req->uri is in origin form (possibly made so); else *why says why.
 */
static bool origin_form(struct fg_req *req, const char **why)
{
	const char *u = req->uri;
	size_t sl;
	if (strncasecmp(u, "http://", 7) == 0)
		sl = 7;
	else if (strncasecmp(u, "https://", 8) == 0)
		sl = 8;
	else
		return true; /* origin form, or refused as it is later */
	size_t al = strcspn(u + sl, "/?#");
	if (al == 0 || al > 255 || memchr(u + sl, '@', al)) {
		*why = "an absolute-form request target needs a host, and no userinfo";
		return false;
	}
	const char *rest = u + sl + al;
	char *host = strndup(u + sl, al);
	char *o = malloc(strlen(rest) + 2);
	if (!host || !o) {
		free(host);
		free(o);
		*why = "out of memory";
		return false;
	}
	o[0] = '/';
	strcpy(o + (*rest == '/' ? 0 : 1), rest);
	free(req->uri);
	req->uri = o;
	req->rec.uri = o;
	req->rec.proxied = !is_api(o);
	req->rec.s3 = req->gw->cfg->upstream_api_s3 && req->rec.proxied;
	req->target_host = host;
	/* what on_uri() does for the lock API, now that it is one */
	if (!req->rec.client[0] && is_api(o))
		client_addr(req->conn, req->rec.client, sizeof(req->rec.client));
	return true;
}

static enum MHD_Result handle(struct fg_req *req, struct MHD_Connection *c,
			      const char *method, const char *version,
			      const char *upload, size_t *upload_size)
{
	if (req->refused) {
		*upload_size = 0; /* answered, and the connection closes */
		return MHD_YES;
	}
	if (!req->framed) {
		enum MHD_Result ret;
		if (!fg_framing_ok_or_respond(req, c, method, version, &ret)) {
			req->refused = true;
			return ret;
		}
		const char *why;
		if (!origin_form(req, &why)) {
			req->refused = true;
			return fg_respond_error_close(c, FG_E_BAD_REQUEST, why);
		}
		route_once(req, method);
	}
	if (!is_api(req->uri))
		return req->loop->routes->proxy(req, c, method, upload, upload_size);
	if (!req->started) {
		req->started = true;
		if (body_too_large(c))
			return fg_respond_error(c, FG_E_PAYLOAD_TOO_LARGE, NULL, NULL);
		return MHD_YES;
	}
	if (*upload_size) {
		take_body(req, upload, *upload_size);
		*upload_size = 0;
		if (req->over && req->body_len > FG_BODY_MAX + DISCARD_MAX)
			return MHD_NO;
		return MHD_YES;
	}
	if (req->over)
		return fg_respond_error(c, FG_E_PAYLOAD_TOO_LARGE, NULL, NULL);
	if (req->body_len > 0 && !req->body)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	return req->loop->routes->api(req, c);
}

/* A connection's start and close. Its socket context belongs to tls.c
 * (the certificate its handshake used, its client certificate's answer). */
static void on_connection(void *cls, struct MHD_Connection *c,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	fg_tls_connection(c, socket_context, code);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	size_t n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	fg_log_debug("http: %s", line);
}

/* The listen address as the socket will take it (port 0: any). 0, or -1
 * with err set to getaddrinfo's reason. */
static int listen_addr(const struct fg_config *cfg, int port,
		       struct addrinfo **ai, char *err, size_t n)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	char ports[8];
	snprintf(ports, sizeof(ports), "%d", port);
	*ai = NULL;
	int r = getaddrinfo(cfg->listen_host, ports, &hints, ai);
	if (r != 0 || !*ai) {
		snprintf(err, n, "cannot resolve listen address %s: %s",
			 cfg->listen_host, r ? gai_strerror(r) : "no address");
		if (*ai)
			freeaddrinfo(*ai);
		*ai = NULL;
		return -1;
	}
	return 0;
}

/* A socket of the address' family, bound to it. The descriptor, or -1
 * with errno set. */
static int bound_socket(const struct addrinfo *ai)
{
	int one = 1;
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	if (fd < 0)
		return -1;
	/* SO_REUSEADDR only (no SO_REUSEPORT): a second gateway on the same
	 * port fails to start instead of sharing it. The loops share this
	 * one socket; whichever is idle first accepts. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int fg_http_listen(struct fg_gateway *gw)
{
	const struct fg_config *cfg = gw->cfg;
	struct addrinfo *ai;
	char err[512];
	if (listen_addr(cfg, cfg->listen_port, &ai, err, sizeof(err))) {
		fg_log_error("%s", err);
		return -1;
	}
	int fd = bound_socket(ai);
	if (fd < 0 || listen(fd, 1024) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		fg_log_error("cannot listen on %s:%d: %s", cfg->listen_host,
			     cfg->listen_port, strerror(e));
		return -1;
	}
	freeaddrinfo(ai);
	gw->listen_fd = fd;
	return 0;
}

int fg_http_listen_check(const struct fg_config *cfg, char *err, size_t n)
{
	struct addrinfo *ai;
	if (listen_addr(cfg, 0, &ai, err, n))
		return -1;
	/* port 0, never listen(): the address is this machine's, whoever
	 * holds the configured port now */
	int fd = bound_socket(ai);
	freeaddrinfo(ai);
	if (fd < 0) {
		snprintf(err, n, "cannot listen on %s:%d: %s", cfg->listen_host,
			 cfg->listen_port, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

struct MHD_Daemon *fg_http_daemon(struct fg_loop *loop)
{
	const struct fg_config *cfg = loop->gw->cfg;
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_USE_ERROR_LOG | MHD_USE_TURBO | fg_tls_daemon_flags();
	struct MHD_OptionItem tls[FG_TLS_OPTIONS];
	fg_tls_daemon_options(tls);
	unsigned limit = cfg->max_connections / loop->gw->nloops;
	loop->max_connections = limit ? limit : 1u;
	/* The connection's memory pool holds the request head, so it is the
	 * bound on header sizes (431/413 or a close past it). */
	size_t pool = cfg->max_header_bytes + 4096;
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, loop,
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)loop->gw->listen_fd,
		MHD_OPTION_CONNECTION_LIMIT, loop->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->client_timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, loop,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, loop,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, loop,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, loop,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	if (!d)
		fg_log_error("cannot start the HTTP daemon of loop %u", loop->index);
	return d;
}
