/*
 * accesslog.h - the access and audit log: one line per request (JSON or
 * key=value text) to a file, stdout or stderr. Private to the gateway.
 *
 * Invariants: a line is one write(2), so lines of concurrent loops never
 * interleave in a file; a reopen (SIGHUP, for logrotate) swaps the file
 * under the same descriptor with dup2(), so a loop writing meanwhile
 * writes whole lines to the old file or the new one, never to a closed
 * or reused descriptor. A line carries what struct fg_rec holds and
 * nothing else: no lease, sequencer, key or query string.
 */
#ifndef FENCEGATE_ACCESSLOG_H
#define FENCEGATE_ACCESSLOG_H

#include <stdbool.h>
#include <stddef.h>

struct fg_config;
struct fg_rec;

/** Opens what cfg->access_log names (nothing for off/NULL). 0, or -1
 *  with err set (the process exits 2). */
int fg_accesslog_open(const struct fg_config *cfg, char *err, size_t errlen);

/** --check-config: could fg_accesslog_open() open what cfg->access_log
 *  names? An existing file is opened for appending and closed; a missing
 *  one is not created, its folder is asked instead. 0, or -1 with err
 *  set. */
int fg_accesslog_check(const struct fg_config *cfg, char *err, size_t errlen);

/** Reopens the file by its name (SIGHUP). A file that cannot be opened
 *  leaves the old one in use, and says so on stderr. */
void fg_accesslog_reopen(void);

/** True when lines are written. */
bool fg_accesslog_on(void);

/** Writes the line of a completed request's closed record, naming
 *  gateway gw_id. */
void fg_accesslog_write(const char *gw_id, const struct fg_rec *r);

/** Writes the request target's path as a line has it (query dropped,
 *  cut at 2048 bytes, escaped for JSON or text) into out, NUL-terminated,
 *  never past cap bytes; returns its length. For the tests and fuzzing. */
size_t fg_accesslog_path(const char *uri, bool text, char *out, size_t cap);

/** Closes the log at exit. */
void fg_accesslog_close(void);

#endif
