/*
 * respond.c - the helpers that queue the gateway's own answers.
 *
 * Invariant: every non-2xx body the gateway writes is built here, as a JSON
 * object with "error" (a code of fg_errors[], base/errors.c) and "message"; every answer
 * the gateway makes itself is queued here and noted in the request's
 * record (its status, its error code, its length).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fencegate/error.h"
#include "http/respond.h"
#include "base/record.h"

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status,
				 int error, json_t *obj, const char *allow,
				 bool close)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!text)
		return MHD_NO;
	size_t len = strlen(text);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE ||
	    error == FG_E_TOO_MANY_FAILURES)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"fencegate\"");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	if (close)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	fg_rec_answered(status, error, len);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result fg_respond_json(struct MHD_Connection *c, unsigned status,
				json_t *obj)
{
	return send_json(c, status, -1, obj, NULL, false);
}

enum MHD_Result fg_respond_empty(struct MHD_Connection *c, unsigned status)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	fg_rec_answered(status, -1, 0);
	MHD_destroy_response(r);
	return ret;
}

static json_t *error_body(enum fg_error e, const char *message, json_t *extra)
{
	const struct fg_errdef *d = &fg_errors[e];
	json_t *o = json_object();
	if (!o) {
		json_decref(extra);
		return NULL;
	}
	json_object_set_new(o, "error", json_string(d->code));
	json_object_set_new(o, "message", json_string(message ? message : d->message));
	if (extra) {
		json_object_update(o, extra);
		json_decref(extra);
	}
	return o;
}

enum MHD_Result fg_respond_error(struct MHD_Connection *c, enum fg_error e,
				 const char *message, json_t *extra)
{
	return send_json(c, fg_errors[e].status, (int)e, error_body(e, message, extra), NULL,
			 false);
}

enum MHD_Result fg_respond_error_close(struct MHD_Connection *c, enum fg_error e,
				       const char *message)
{
	return send_json(c, fg_errors[e].status, (int)e, error_body(e, message, NULL), NULL,
			 true);
}

enum MHD_Result fg_respond_not_allowed(struct MHD_Connection *c,
				       const char *allow)
{
	return send_json(c, fg_errors[FG_E_METHOD_NOT_ALLOWED].status,
			 FG_E_METHOD_NOT_ALLOWED, error_body(FG_E_METHOD_NOT_ALLOWED, NULL, NULL), allow, false);
}

enum MHD_Result fg_respond_store_error(struct MHD_Connection *c, int err)
{
	switch (err) {
	case FG_EUNAVAIL:
	case FG_ENOKEY:
		return fg_respond_error(c, FG_E_LOCK_STORE_UNAVAILABLE, NULL, NULL);
	case FG_EREPLICAS:
		return fg_respond_error(c, FG_E_LOCK_STORE_UNAVAILABLE,
					"fewer Redis replicas than redis-replicas "
					"acknowledged the grant in time; it was "
					"given back", NULL);
	default:
		return fg_respond_error(c, FG_E_INTERNAL, fg_strerror(err), NULL);
	}
}

enum MHD_Result fg_respond_text(struct MHD_Connection *c, unsigned status,
				const char *content_type, char *text, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	fg_rec_answered(status, -1, len);
	return ret;
}
