/*
 * procstat.h - the process_* figures Prometheus' client libraries export
 * on Linux, read from the text of /proc files. Private to the gateway.
 * The parsers are pure (they take the files' text) and unit-tested; only
 * fg_procstat_read() touches /proc.
 */
#ifndef FENCEGATE_PROCSTAT_H
#define FENCEGATE_PROCSTAT_H

#include <stdbool.h>
#include <stdint.h>

struct fg_procstat {
	double cpu_seconds;        /* utime + stime */
	double start_time;         /* seconds since the Unix epoch */
	uint64_t virtual_bytes;
	uint64_t resident_bytes;
	int64_t open_fds;          /* -1: unknown */
	int64_t max_fds;           /* the soft limit; -1: unknown or unlimited */
};

/** The fields of /proc/self/stat's text (the command name may hold any
 *  byte, ')' and spaces included): CPU ticks, start ticks after boot,
 *  virtual size, resident pages. 0, or -1 when the text is not one. */
int fg_procstat_parse_stat(const char *text, uint64_t *utime, uint64_t *stime,
			   uint64_t *start_ticks, uint64_t *vsize, int64_t *rss_pages);

/** The boot time ("btime N") of /proc/stat's text. 0, or -1. */
int fg_procstat_parse_btime(const char *text, uint64_t *btime);

/** The soft "Max open files" of /proc/self/limits' text; -1 for
 *  "unlimited" or when absent. */
int64_t fg_procstat_parse_max_fds(const char *text);

/** Reads /proc now. 0, or -1 when /proc/self/stat cannot be read (the
 *  other figures are then left as they are). */
int fg_procstat_read(struct fg_procstat *out);

#endif
