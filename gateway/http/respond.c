/*
 * respond.c - the helpers that queue the gateway's own answers.
 *
 * Invariant: every non-2xx body the gateway writes is built here, as a JSON
 * object with "error" (a code of fg_errors[], base/errors.c) and "message",
 * or, for a proxied request in S3 mode (its record says so), as S3's XML
 * error with the same status (base/s3err.c); every answer the gateway
 * makes itself is queued here and noted in the request's record (its
 * status, its error code, its length).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fencegate/error.h"
#include "http/respond.h"
#include "base/record.h"
#include "base/s3err.h"

static enum MHD_Result send_s3(struct MHD_Connection *c, unsigned status,
			       int error, const char *code, const char *message,
			       const struct fg_s3_stale *stale, bool retry_after,
			       const char *allow, bool close);

/* An error answer of a request in S3 mode: the JSON body's message and
 * token fields, in S3's XML. */
static enum MHD_Result send_json_as_s3(struct MHD_Connection *c, unsigned status,
				       int error, json_t *obj, const char *allow,
				       bool close)
{
	struct fg_s3_errdef d = fg_s3_fence_error((enum fg_error)error);
	const char *msg = json_string_value(json_object_get(obj, "message"));
	json_t *tok = json_object_get(obj, "token");
	json_t *cur = json_object_get(obj, "current");
	struct fg_s3_stale stale = {
		.token = (uint64_t)json_integer_value(tok),
		.has_current = json_is_integer(cur),
		.current = (uint64_t)json_integer_value(cur),
	};
	enum MHD_Result ret = send_s3(c, status, error, d.code,
				      msg ? msg : d.message,
				      json_is_integer(tok) ? &stale : NULL,
				      d.retry_after, allow, close);
	json_decref(obj);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status,
				 int error, json_t *obj, const char *allow,
				 bool close)
{
	const struct fg_rec *rec = fg_rec_current();
	if (rec && rec->s3 && error >= 0)
		return send_json_as_s3(c, status, error, obj, allow, close);
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

static enum MHD_Result send_s3(struct MHD_Connection *c, unsigned status,
			       int error, const char *code, const char *message,
			       const struct fg_s3_stale *stale, bool retry_after,
			       const char *allow, bool close)
{
	const struct fg_rec *rec = fg_rec_current();
	char resource[FG_S3_RESOURCE_MAX + 1] = "";
	char id[32];
	if (rec && rec->uri) {
		/* the path only: a presigned query holds a signature */
		size_t n = strcspn(rec->uri, "?");
		if (n > FG_S3_RESOURCE_MAX)
			n = FG_S3_RESOURCE_MAX;
		memcpy(resource, rec->uri, n);
		resource[n] = '\0';
	}
	snprintf(id, sizeof(id), "%016llx",
		 rec ? (unsigned long long)rec->t0_ns : 0ull);
	char *body = malloc(FG_S3_ERROR_BODY_MAX);
	if (!body)
		return MHD_NO;
	int len = fg_s3_error_body(body, FG_S3_ERROR_BODY_MAX, code, message,
				   resource, id, stale);
	if (len < 0) {
		free(body);
		return MHD_NO;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(
		(size_t)len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/xml");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "x-amz-request-id", id);
	if (retry_after || status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	if (close)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	fg_rec_answered(status, error, (size_t)len);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result fg_respond_s3(struct MHD_Connection *c, enum fg_s3_native n,
			      const char *message, bool close)
{
	struct fg_s3_errdef d = fg_s3_native_error(n);
	/* the nearest fencegate error, for the record's counts */
	int e = d.status == 400 ? FG_E_BAD_REQUEST
		: d.status == 403 && n != FG_S3N_ACCESS_DENIED ? FG_E_UNAUTHENTICATED
		: FG_E_FORBIDDEN;
	return send_s3(c, d.status, e, d.code, message ? message : d.message,
		       NULL, d.retry_after, NULL, close);
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

enum MHD_Result fg_respond_static(struct MHD_Connection *c, unsigned status,
				  const char *content_type, const void *data,
				  size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)data, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	fg_rec_answered(status, -1, len);
	return ret;
}

enum MHD_Result fg_respond_stream(struct MHD_Connection *c, unsigned status,
				  const char *content_type, size_t block,
				  MHD_ContentReaderCallback reader, void *cls,
				  MHD_ContentReaderFreeCallback free_cb)
{
	struct MHD_Response *r = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, block, reader, cls, free_cb);
	if (!r) {
		free_cb(cls);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	/* a buffering proxy in front would hold the events back */
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	fg_rec_answered(status, -1, 0);
	return ret;
}
