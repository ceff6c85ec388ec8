/*
 * procstat.c - the process_* figures from /proc, as client_golang's
 * process collector reads them: CPU and start time in clock ticks
 * (sysconf(_SC_CLK_TCK)), the resident set in pages, the start time
 * counted from /proc/stat's btime, the descriptors by listing
 * /proc/self/fd, their limit from /proc/self/limits.
 *
 * Invariant: the parsers never read past the text's NUL and never trust
 * the command name, which is the one field a process chooses.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/procstat.h"

#define STAT_MAX (1u << 20)

int fg_procstat_parse_stat(const char *text, uint64_t *utime, uint64_t *stime,
			   uint64_t *start_ticks, uint64_t *vsize, int64_t *rss_pages)
{
	/* "pid (comm) state ...": comm may hold ") " itself, so the fields
	 * start after the last ')' */
	const char *p = strrchr(text, ')');
	if (!p)
		return -1;
	p++;
	/* field 3 (state) is the first after comm; we want 14, 15, 22, 23, 24 */
	uint64_t v[25] = { 0 };
	int field = 3;
	while (field <= 24) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			return -1;
		if (field == 3) {
			while (*p && *p != ' ')
				p++;
		} else {
			char *end;
			long long x = strtoll(p, &end, 10);
			if (end == p)
				return -1;
			v[field] = (uint64_t)x;
			p = end;
		}
		field++;
	}
	*utime = v[14];
	*stime = v[15];
	*start_ticks = v[22];
	*vsize = v[23];
	*rss_pages = (int64_t)v[24];
	return 0;
}

int fg_procstat_parse_btime(const char *text, uint64_t *btime)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, "btime ", 6) == 0) {
			char *end;
			unsigned long long x = strtoull(p + 6, &end, 10);
			if (end == p + 6)
				return -1;
			*btime = x;
			return 0;
		}
	return -1;
}

int64_t fg_procstat_parse_max_fds(const char *text)
{
	static const char key[] = "Max open files";
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, sizeof(key) - 1) == 0) {
			const char *q = p + sizeof(key) - 1;
			while (*q == ' ')
				q++;
			if (strncmp(q, "unlimited", 9) == 0)
				return -1;
			char *end;
			long long x = strtoll(q, &end, 10);
			return end == q ? -1 : x;
		}
	return -1;
}

/* The whole of a small /proc file into buf (NUL-terminated). */
static int slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	ssize_t r;
	while (len + 1 < n && (r = read(fd, buf + len, n - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	return len ? 0 : -1;
}

static int64_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int64_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the listing's own descriptor */
}

int fg_procstat_read(struct fg_procstat *out)
{
	char buf[8192];
	uint64_t ut, st, start, vsize, btime;
	int64_t rss;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

	if (tck <= 0 || page <= 0 || slurp("/proc/self/stat", buf, sizeof(buf)) ||
	    fg_procstat_parse_stat(buf, &ut, &st, &start, &vsize, &rss))
		return -1;
	out->cpu_seconds = (double)(ut + st) / (double)tck;
	out->virtual_bytes = vsize;
	out->resident_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
	/* btime follows a line per CPU and the interrupt counts: far more
	 * than buf on a large machine */
	char *big = malloc(STAT_MAX);   /* owned here, freed below */
	if (big && slurp("/proc/stat", big, STAT_MAX) == 0 &&
	    fg_procstat_parse_btime(big, &btime) == 0)
		out->start_time = (double)btime + (double)start / (double)tck;
	free(big);
	out->open_fds = count_fds();
	out->max_fds = slurp("/proc/self/limits", buf, sizeof(buf)) == 0
			       ? fg_procstat_parse_max_fds(buf) : -1;
	return 0;
}
