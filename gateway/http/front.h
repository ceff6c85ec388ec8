/*
 * front.h - the HTTP front of a loop: the listening socket, the daemon,
 * and the routes the loop hands it. Private to the gateway.
 *
 * The front knows no handler: the API and the proxy sit above it and are
 * reached only through struct fg_routes, which loop.c fills.
 */
#ifndef FENCEGATE_FRONT_H
#define FENCEGATE_FRONT_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct fg_config;
struct fg_gateway;
struct fg_loop;
struct fg_req;

struct fg_routes {
	/* A request under /_fence/, once its body was read whole (at most
	 * FG_BODY_MAX bytes), and again each time it is resumed; what it is
	 * is req->route. */
	enum MHD_Result (*api)(struct fg_req *req, struct MHD_Connection *c);
	/* Any other request, at every call of the access handler (the body
	 * streams through it). */
	enum MHD_Result (*proxy)(struct fg_req *req, struct MHD_Connection *c,
				 const char *method, const char *upload,
				 size_t *upload_size);
	/* The request ended (ok: its answer was sent whole), before its
	 * record is reported and its state freed. */
	void (*api_finish)(struct fg_req *req, bool ok);
	void (*proxy_finish)(struct fg_req *req);
};

/** Opens the listening socket every loop's daemon accepts on. 0 or -1
 *  (logged with getaddrinfo's or the socket call's reason). */
int fg_http_listen(struct fg_gateway *gw);

/** --check-config: resolves the listen address as fg_http_listen() does
 *  and binds a socket to it on port 0, never listening, so a port held
 *  by the running gateway is no error but an address that is not this
 *  machine's is. 0, or -1 with err set. */
int fg_http_listen_check(const struct fg_config *cfg, char *err, size_t n);

/** A libmicrohttpd daemon driven by the loop (external epoll), serving
 *  through loop->routes. NULL on failure. */
struct MHD_Daemon *fg_http_daemon(struct fg_loop *loop);

/** The client's address of req (its record's, written now if the request
 *  did not need it before: a proxied request notes it only for the access
 *  log), "" when libmicrohttpd does not know it. */
const char *fg_req_client(struct fg_req *req);

#endif
