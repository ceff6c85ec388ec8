/*
 * errors.c - the one table of the gateway's error answers: status, code,
 * default message. Pure data; http/respond.c writes the answers.
 */
#include "base/errors.h"

const struct fg_errdef fg_errors[FG_E_COUNT] = {
	[FG_E_BAD_LOCK_NAME] = { 400, "bad_lock_name",
		"lock names are 1-255 bytes of [A-Za-z0-9._~/-] with no empty, '.' or '..' segment" },
	[FG_E_BAD_REQUEST] = { 400, "bad_request", "the request is not valid" },
	[FG_E_PAYLOAD_TOO_LARGE] = { 413, "payload_too_large", "request bodies are limited to 64 KiB" },
	[FG_E_NOT_FOUND] = { 404, "not_found", "no such endpoint" },
	[FG_E_METHOD_NOT_ALLOWED] = { 405, "method_not_allowed", "method not allowed on this endpoint" },
	[FG_E_LOCK_HELD] = { 409, "lock_held", "the lock is held" },
	[FG_E_LEASE_EXPIRED] = { 410, "lease_expired", "this lease does not hold the lock" },
	[FG_E_TOO_MANY_WAITERS] = { 429, "too_many_waiters", "the lock's wait queue is full" },
	[FG_E_TOKEN_REQUIRED] = { 428, "token_required", "writes must carry a Fencing-Token header" },
	[FG_E_MALFORMED_TOKEN] = { 400, "malformed_token", "the Fencing-Token is not a sequencer" },
	[FG_E_FORGED_TOKEN] = { 403, "forged_token", "the Fencing-Token was not issued by this service" },
	[FG_E_WRONG_LOCK] = { 403, "wrong_lock", "the Fencing-Token is for another lock than the one guarding this path" },
	[FG_E_WRONG_MODE] = { 403, "wrong_mode", "a shared grant cannot write" },
	[FG_E_STALE_TOKEN] = { 409, "stale_token", "a newer token exists, or this grant ended" },
	[FG_E_BAD_PATH] = { 400, "bad_path", "the path is not one the upstream can resolve inside its root" },
	[FG_E_BAD_DESTINATION] = { 400, "bad_destination",
		"Destination must be a path, or an absolute URL on this gateway's Host, outside /_fence/" },
	[FG_E_SUBTREE_UNGUARDED] = { 403, "subtree_unguarded",
		"a collection is changed whole: only a route lock that guards its whole subtree can fence it" },
	[FG_E_LOCK_STORE_UNAVAILABLE] = { 503, "lock_store_unavailable", "the lock store (Redis) cannot be reached" },
	[FG_E_UPSTREAM_UNAVAILABLE] = { 502, "upstream_unavailable", "the upstream storage cannot be reached" },
	[FG_E_UPSTREAM_TIMEOUT] = { 504, "upstream_timeout", "the upstream did not answer in time" },
	[FG_E_INTERNAL] = { 500, "internal", "internal error" },
	[FG_E_UNAUTHENTICATED] = { 401, "unauthenticated",
		"a known bearer key or client certificate is required" },
	[FG_E_FORBIDDEN] = { 403, "forbidden", "the principal lacks the right for this call" },
	[FG_E_TOO_MANY_FAILURES] = { 429, "too_many_failures",
		"too many unknown keys from this address; try again later" },
	[FG_E_SHUTTING_DOWN] = { 503, "shutting_down",
		"this gateway is shutting down; ask another one, or again later" },
};
