/*
 * log.h - one line per event on stderr. Private to the gateway.
 * Invariant: leases and keys are never passed to these functions.
 */
#ifndef FENCEGATE_LOG_H
#define FENCEGATE_LOG_H

enum { FG_LOG_ERROR = 0, FG_LOG_WARN = 1, FG_LOG_INFO = 2, FG_LOG_DEBUG = 3 };

extern int fg_log_level;

void fg_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define fg_log_error(...) fg_log(FG_LOG_ERROR, __VA_ARGS__)
#define fg_log_warn(...) fg_log(FG_LOG_WARN, __VA_ARGS__)
#define fg_log_info(...) fg_log(FG_LOG_INFO, __VA_ARGS__)
#define fg_log_debug(...) fg_log(FG_LOG_DEBUG, __VA_ARGS__)

#endif
