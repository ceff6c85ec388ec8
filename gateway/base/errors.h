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
	FG_E_SHUTTING_DOWN,
	FG_E_NOT_READY,
	FG_E_COUNT,
};

struct fg_errdef {
	unsigned status;
	const char *code;
	const char *message;
};

extern const struct fg_errdef fg_errors[FG_E_COUNT];

#endif
