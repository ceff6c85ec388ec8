/*
 * ui.h - the status page under /_fence/v1/ui/ (ui.c): its built-in files. Private to the gateway.
 */
#ifndef FENCEGATE_UI_H
#define FENCEGATE_UI_H

#include <microhttpd.h>

struct fg_req;

/** A GET or HEAD the route table sent to the page (FG_APIOP_UI): the
 *  file its path names, with the page's Content-Security-Policy and its
 *  ETag (304 when If-None-Match has it); /_fence/v1/ui is redirected to
 *  /_fence/v1/ui/, so that the page's relative links resolve. */
enum MHD_Result fg_ui_serve(struct fg_req *req, struct MHD_Connection *c);

#endif
