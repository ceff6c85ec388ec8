/*
 * respond.h - queueing the gateway's own answers: JSON errors from the
 * table of base/errors.h, JSON bodies, text, empty answers.
 * Private to the gateway.
 */
#ifndef FENCEGATE_RESPOND_H
#define FENCEGATE_RESPOND_H

#include <microhttpd.h>
#include <jansson.h>

#include "base/errors.h"
#include "base/s3err.h"

/**
 * Queues the JSON error {"error","message"} (message: the table's, or
 * `message` when non-NULL) plus any fields of `extra` (stolen, may be
 * NULL). 503s carry Retry-After. Returns MHD_queue_response's result.
 */
enum MHD_Result fg_respond_error(struct MHD_Connection *c, enum fg_error e,
				 const char *message, json_t *extra);

/** fg_respond_error(), and the connection closes after the answer: what
 *  follows on it cannot be read as a request of its own. */
enum MHD_Result fg_respond_error_close(struct MHD_Connection *c, enum fg_error e,
				       const char *message);

/** 405 with an Allow header naming the methods that are. */
enum MHD_Result fg_respond_not_allowed(struct MHD_Connection *c,
				       const char *allow);

/** Maps a lockcore error (fg_err) to its answer and queues it. */
/** S3 mode: S3's own error n (base/s3err.h) with its status, message
 *  (NULL: its default), the connection closed after it when close. */
enum MHD_Result fg_respond_s3(struct MHD_Connection *c, enum fg_s3_native n,
			      const char *message, bool close);

enum MHD_Result fg_respond_store_error(struct MHD_Connection *c, int err);

/** Queues `obj` (stolen) as a JSON body with the given status. */
enum MHD_Result fg_respond_json(struct MHD_Connection *c, unsigned status,
				json_t *obj);

/** Queues `text` (len bytes, malloc'ed: stolen, freed by libmicrohttpd
 *  or here) with the given status and Content-Type. */
enum MHD_Result fg_respond_text(struct MHD_Connection *c, unsigned status,
				const char *content_type, char *text, size_t len);

/** Queues `len` bytes of `data`, which outlive the process's answers
 *  (static data: never copied, never freed), with the given status and
 *  Content-Type. */
enum MHD_Result fg_respond_static(struct MHD_Connection *c, unsigned status,
				  const char *content_type, const void *data,
				  size_t len);

/** Queues an answer of unknown length (chunked) whose body reader(cls,
 *  ...) hands libmicrohttpd as it comes, in blocks of at most `block`
 *  bytes, with the given status and Content-Type. free_cb(cls) runs once
 *  when libmicrohttpd lets go of it, or here when it cannot be made. */
enum MHD_Result fg_respond_stream(struct MHD_Connection *c, unsigned status,
				  const char *content_type, size_t block,
				  MHD_ContentReaderCallback reader, void *cls,
				  MHD_ContentReaderFreeCallback free_cb);

/** Queues an empty response (204 and the like). */
enum MHD_Result fg_respond_empty(struct MHD_Connection *c, unsigned status);

#endif
