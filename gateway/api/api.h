/*
 * api.h - the lock API under /_fence/v1/ (locks.c): the route the HTTP
 * front hands every request under /_fence/. Private to the gateway.
 */
#ifndef FENCEGATE_API_H
#define FENCEGATE_API_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

struct fg_req;

/** A request under /_fence/ whose body is read: the access step, then
 *  the call its route (req->route) names; a resumed request answers from
 *  its waiter or its Redis call. */
enum MHD_Result fg_api_handle(struct fg_req *req, struct MHD_Connection *c);

/** The request ended (ok: its answer was sent whole): a grant whose
 *  answer was not delivered goes back, and its waiter and call are let
 *  go. */
void fg_api_finish(struct fg_req *req, bool ok);

#endif
