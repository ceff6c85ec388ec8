/*
 * errors.h - the one table of the gateway's error answers.
 * Private to the gateway.
 *
 * Every error the gateway sends comes from fg_errors[]: its status, its
 * snake_case code and its default message. docs/api.md lists the same
 * table; handlers never spell a code or a status themselves.
 */
#ifndef FENCEGATE_ERRORS_H
#define FENCEGATE_ERRORS_H

#include <microhttpd.h>
#include <jansson.h>

enum fg_error {
	FG_E_BAD_LOCK_NAME,
	FG_E_BAD_REQUEST,
	FG_E_PAYLOAD_TOO_LARGE,
	FG_E_NOT_FOUND,
	FG_E_METHOD_NOT_ALLOWED,
	FG_E_LOCK_HELD,
	FG_E_LEASE_EXPIRED,
	FG_E_TOO_MANY_WAITERS,
	FG_E_TOKEN_REQUIRED,
	FG_E_MALFORMED_TOKEN,
	FG_E_FORGED_TOKEN,
	FG_E_WRONG_LOCK,
	FG_E_WRONG_MODE,
	FG_E_STALE_TOKEN,
	FG_E_BAD_PATH,
	FG_E_BAD_DESTINATION,
	FG_E_SUBTREE_UNGUARDED,
	FG_E_LOCK_STORE_UNAVAILABLE,
	FG_E_UPSTREAM_UNAVAILABLE,
	FG_E_UPSTREAM_TIMEOUT,
	FG_E_INTERNAL,
	FG_E_UNAUTHENTICATED,
	FG_E_FORBIDDEN,
	FG_E_TOO_MANY_FAILURES,
	FG_E_COUNT,
};

struct fg_errdef {
	unsigned status;
	const char *code;
	const char *message;
};

extern const struct fg_errdef fg_errors[FG_E_COUNT];

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
enum MHD_Result fg_respond_store_error(struct MHD_Connection *c, int err);

/** Queues `obj` (stolen) as a JSON body with the given status. */
enum MHD_Result fg_respond_json(struct MHD_Connection *c, unsigned status,
				json_t *obj);

/** Queues `text` (len bytes, malloc'ed: stolen, freed by libmicrohttpd
 *  or here) with the given status and Content-Type. */
enum MHD_Result fg_respond_text(struct MHD_Connection *c, unsigned status,
				const char *content_type, char *text, size_t len);

/** Queues an empty response (204 and the like). */
enum MHD_Result fg_respond_empty(struct MHD_Connection *c, unsigned status);

#endif
