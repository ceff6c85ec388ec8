/*
 * http.c - the HTTP front: libmicrohttpd setup, per-request state, body
 * limits, and the split between the lock API and the proxy.
 *
 * Invariants: a request's state (struct fg_req) is allocated when its
 * request line is read (the URI callback) and freed in the
 * request-completed callback, nowhere else; an API body never grows past
 * FG_BODY_MAX bytes; every request under /_fence/ goes to the API, every
 * other one to the proxy.
 */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "errors.h"
#include "framing.h"
#include "gateway.h"
#include "log.h"
#include "proxy.h"
#include "waitq.h"

#define API_PREFIX "/_fence/"
/* How much of an oversized body is read and dropped before the answer,
 * so that a client that ignores 413 cannot keep the connection busy. */
#define DISCARD_MAX (1024 * 1024)

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct fg_req *req = calloc(1, sizeof(*req));
	(void)c;
	if (!req)
		return NULL;
	req->gw = cls;
	req->uri = strdup(uri);
	fg_framing_note_target(req, uri);
	return req;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct fg_gateway *gw = cls;
	struct fg_req *req = *con_cls;
	(void)c;
	if (!req)
		return;
	if (req->granted && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		fg_waitq_give_back(gw->wq, req->name, req->lease);
	fg_waiter_drop(gw->wq, req->waiter);
	fg_proxy_completed(req);
	free(req->body);
	free(req->uri);
	free(req);
	*con_cls = NULL;
}

static bool is_api(const char *uri)
{
	return strncmp(uri, API_PREFIX, sizeof(API_PREFIX) - 1) == 0;
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
	}
	if (!is_api(req->uri))
		return fg_proxy_handle(req, c, method, upload, upload_size);
	if (req->waiter)
		return fg_api_resume(req, c);
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
	const char *q = strchr(req->uri, '?');
	size_t plen = q ? (size_t)(q - req->uri) : strlen(req->uri);
	return fg_api_dispatch(req, c, method, req->uri, plen);
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

int fg_http_start(struct fg_gateway *gw)
{
	const struct fg_config *cfg = gw->cfg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE };
	struct addrinfo *ai = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%d", cfg->listen_port);
	if (getaddrinfo(cfg->listen_host, port, &hints, &ai) != 0 || !ai) {
		fg_log_error("cannot resolve listen address %s", cfg->listen_host);
		return -1;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			 MHD_USE_TURBO;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The connection's memory pool holds the request head, so it is the
	 * bound on header sizes (431/413 or a close past it). */
	size_t pool = cfg->max_header_bytes + 4096;
	gw->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, gw,
		MHD_OPTION_SOCK_ADDR, ai->ai_addr,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->client_timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, gw,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, gw,
		MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!gw->daemon) {
		fg_log_error("cannot listen on %s:%d", cfg->listen_host,
			     cfg->listen_port);
		return -1;
	}
	return 0;
}

void fg_http_stop(struct fg_gateway *gw)
{
	if (gw->daemon) {
		MHD_stop_daemon(gw->daemon);
		gw->daemon = NULL;
	}
}
