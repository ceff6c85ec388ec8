/*
 * accesslog.c - one line per completed request, JSON or key=value text.
 *
 * Invariants: see accesslog.h. The descriptor is opened once and only
 * ever replaced in place (dup2), so its number stays valid for the whole
 * process; paths are written without their query string (a presigned
 * URL's signature is a credential) and with every byte outside printable
 * ASCII escaped, so a client cannot forge a line.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc/accesslog.h"
#include "base/config.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/record.h"

#define PATH_LOG_MAX 2048  /* longer paths are cut, and marked so */

static int log_fd = -1;
static char *log_path;     /* NULL: stdout or stderr, never reopened */
static bool log_text;

static int open_file(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

/* What access-log names: a descriptor of ours (STDOUT_FILENO,
 * STDERR_FILENO), -1 for none, or -2 for a file at that path. */
static int destination(const char *p)
{
	if (!p || !p[0] || strcmp(p, "off") == 0)
		return -1;
	if (strcmp(p, "stdout") == 0 || strcmp(p, "-") == 0)
		return STDOUT_FILENO;
	if (strcmp(p, "stderr") == 0)
		return STDERR_FILENO;
	return -2;
}

int fg_accesslog_check(const struct fg_config *cfg, char *err, size_t errlen)
{
	const char *p = cfg->access_log;
	if (destination(p) != -2)
		return 0;
	/* open_file()'s flags but O_CREAT: a check run by another user
	 * must not leave a file the gateway cannot write */
	int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == ENOENT) {
		/* created at start: its folder must let us */
		char *dir = strdup(p);
		if (!dir) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		char *slash = strrchr(dir, '/');
		const char *d = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
		int ok = access(d, W_OK | X_OK);
		int e = errno;
		free(dir);
		if (ok == 0)
			return 0;
		errno = e;
	}
	snprintf(err, errlen, "access-log: cannot open %s: %s", p, strerror(errno));
	return -1;
}

int fg_accesslog_open(const struct fg_config *cfg, char *err, size_t errlen)
{
	const char *p = cfg->access_log;
	log_text = cfg->access_log_text;
	int to = destination(p);
	if (to == -1)
		return 0;
	if (to >= 0) {
		log_fd = to;
		return 0;
	}
	log_path = strdup(p);
	if (!log_path) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	log_fd = open_file(p);
	if (log_fd < 0) {
		snprintf(err, errlen, "access-log: cannot open %s: %s", p,
			 strerror(errno));
		free(log_path);
		log_path = NULL;
		return -1;
	}
	return 0;
}

void fg_accesslog_reopen(void)
{
	if (!log_path)
		return;
	int fd = open_file(log_path);
	if (fd < 0) {
		fg_log_error("access-log: cannot reopen %s: %s; still writing to "
			     "the file open before", log_path, strerror(errno));
		return;
	}
	if (dup2(fd, log_fd) < 0)
		fg_log_error("access-log: cannot reopen %s: %s", log_path,
			     strerror(errno));
	close(fd);
	fg_log_info("access-log: reopened %s", log_path);
}

bool fg_accesslog_on(void)
{
	return log_fd >= 0;
}

void fg_accesslog_close(void)
{
	if (log_path)
		close(log_fd);
	free(log_path);
	log_path = NULL;
	log_fd = -1;
}

/* ---- the line ------------------------------------------------------------ */

static void fmt_time(const struct timespec *ts, char out[48])
{
	struct tm tm;
	gmtime_r(&ts->tv_sec, &tm);
	size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 48 - n, ".%03dZ", (int)(ts->tv_nsec / 1000000) % 1000);
}

/* A line is built in one buffer on the loop's stack: no allocation per
 * request. Every field is bounded (paths are cut at PATH_LOG_MAX), so
 * LINE_MAX always fits; a line that would not is cut, never overrun. */
#define LINE_MAX (PATH_LOG_MAX * 6 + 2048)

struct out {
	char *buf;
	size_t cap, len;   /* len < cap always: one byte stays free */
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n < o->cap - o->len ? (size_t)n
						      : o->cap - o->len - 1;
}

/* Length of the well-formed UTF-8 sequence at s (up to n bytes), or 0
 * (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

/* The path without its query, cut at PATH_LOG_MAX (then "..."), as a
 * JSON string's content (valid UTF-8 as is; any other byte, control bytes,
 * '"' and '\\' escaped) or, in text, with '"', '\\', spaces and every
 * byte outside printable ASCII as \xHH, so a client cannot forge a line. */
static void put_path(struct out *o, const char *uri, bool text)
{
	const unsigned char *u = (const unsigned char *)uri;
	size_t len = strcspn(uri, "?");
	bool cut = len > PATH_LOG_MAX;
	if (cut)
		len = PATH_LOG_MAX;
	for (size_t i = 0; i < len && o->len + 8 < o->cap; i++) {
		unsigned char ch = u[i];
		size_t seq;
		if (text) {
			if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
				put(o, "\\x%02x", ch);
			else
				o->buf[o->len++] = (char)ch;
		} else if (ch == '"' || ch == '\\') {
			o->buf[o->len++] = '\\';
			o->buf[o->len++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			put(o, "\\u%04x", ch);
		} else if (ch < 0x80) {
			o->buf[o->len++] = (char)ch;
		} else if ((seq = utf8_seq(u + i, len - i)) > 0) {
			memcpy(o->buf + o->len, u + i, seq);
			o->len += seq;
			i += seq - 1;
		} else {
			put(o, "\\u%04x", ch); /* a stray byte, as its code point */
		}
	}
	if (cut)
		put(o, "...");
}

size_t fg_accesslog_path(const char *uri, bool text, char *out, size_t cap)
{
	struct out o = { out, cap, 0 };
	if (cap == 0)
		return 0;
	put_path(&o, uri, text);
	out[o.len] = '\0';
	return o.len;
}

static const char *decision_name(const struct fg_rec *r)
{
	switch (r->decision) {
	case FG_DEC_PASS: return "pass";
	case FG_DEC_CHECKED: return "checked";
	case FG_DEC_ADMITTED: return "admitted";
	case FG_DEC_REFUSED:
		return r->refusal >= 0 && r->refusal < FG_E_COUNT
			       ? fg_errors[r->refusal].code : "refused";
	case FG_DEC_NONE:
	default:
		return NULL;
	}
}

/* What a line says besides the request's own fields. */
struct line {
	char time[48];
	const char *decision;            /* NULL: none */
	const char *error;               /* NULL: none */
	const char *lock, *lock2;
	bool has_token, has_token2, has_current;
	uint64_t token, token2, current;
	double ms, admit_ms, upstream_ms; /* < 0: none */
};

static void gather(const struct fg_rec *r, struct line *l)
{
	memset(l, 0, sizeof(*l));
	fmt_time(&r->wall, l->time);
	l->decision = decision_name(r);
	l->error = r->error >= 0 && r->error < FG_E_COUNT ? fg_errors[r->error].code
							  : NULL;
	l->ms = (double)(fg_rec_now_ns() - r->t0_ns) / 1e6;
	l->admit_ms = r->admit_ns >= 0 ? (double)r->admit_ns / 1e6 : -1;
	l->upstream_ms = r->upstream_ns >= 0 ? (double)r->upstream_ns / 1e6 : -1;
	if ((r->decision == FG_DEC_ADMITTED || r->decision == FG_DEC_CHECKED) &&
	    r->nlocks > 0) {
		l->lock = r->locks[0];
		l->token = r->tokens[0];
		l->has_token = true;
		if (r->nlocks > 1) {
			l->lock2 = r->locks[1];
			l->token2 = r->tokens[1];
			l->has_token2 = true;
		}
	} else if (r->lock[0]) {
		l->lock = r->lock;
		l->has_token = r->has_token;
		l->token = r->token;
		l->has_current = r->has_current;
		l->current = r->current;
	}
}

/* Lock names, codes, principals, methods and addresses are plain ASCII
 * without '"' or '\\' (name.c, errors.c, auth.c's name grammar,
 * libmicrohttpd's method grammar), so they go
 * into a JSON string as they are. */
static void json_str_or_null(struct out *o, const char *k, const char *v)
{
	if (v)
		put(o, ",\"%s\":\"%s\"", k, v);
	else
		put(o, ",\"%s\":null", k);
}

static void json_num(struct out *o, const char *k, bool has, uint64_t v)
{
	if (has)
		put(o, ",\"%s\":%llu", k, (unsigned long long)v);
	else
		put(o, ",\"%s\":null", k);
}

static void json_ms(struct out *o, const char *k, double ms)
{
	if (ms >= 0)
		put(o, ",\"%s\":%.3f", k, ms);
	else
		put(o, ",\"%s\":null", k);
}

static void json_line(struct out *o, const char *gw_id, const struct fg_rec *r,
		      const struct line *l)
{
	put(o, "{\"time\":\"%s\",\"gateway\":\"%s\",\"client\":\"%s\","
	       "\"method\":\"", l->time, gw_id, r->client);
	put_path(o, r->method, false);
	put(o, "\",\"path\":\"");
	put_path(o, r->uri ? r->uri : "", false);
	put(o, "\",\"endpoint\":\"%s\"", fg_endpoint_name(r->endpoint));
	json_str_or_null(o, "principal", r->principal[0] ? r->principal : NULL);
	json_num(o, "status", r->status != 0, r->status);
	put(o, ",\"completed\":%s", r->aborted ? "false" : "true");
	json_str_or_null(o, "error", l->error);
	json_str_or_null(o, "decision", l->decision);
	json_str_or_null(o, "lock", l->lock);
	json_num(o, "token", l->has_token, l->token);
	if (l->has_current)
		json_num(o, "current", true, l->current);
	if (l->lock2) {
		json_str_or_null(o, "lock2", l->lock2);
		json_num(o, "token2", l->has_token2, l->token2);
	}
	json_num(o, "upstream_status", r->upstream_status != 0,
		 (uint64_t)r->upstream_status);
	put(o, ",\"bytes_in\":%llu,\"bytes_out\":%llu",
	    (unsigned long long)r->bytes_in, (unsigned long long)r->bytes_out);
	json_ms(o, "duration_ms", l->ms);
	json_ms(o, "admission_ms", l->admit_ms);
	json_ms(o, "upstream_ms", l->upstream_ms);
	put(o, "}");
}

static void kv_num(struct out *o, const char *k, bool has, uint64_t v)
{
	if (has)
		put(o, " %s=%llu", k, (unsigned long long)v);
	else
		put(o, " %s=-", k);
}

static void kv_ms(struct out *o, const char *k, double ms)
{
	if (ms >= 0)
		put(o, " %s=%.3f", k, ms);
	else
		put(o, " %s=-", k);
}

static void text_line(struct out *o, const char *gw_id, const struct fg_rec *r,
		      const struct line *l)
{
	put(o, "%s %s %s \"", l->time, gw_id, r->client[0] ? r->client : "-");
	put_path(o, r->method, true);
	put(o, " ");
	put_path(o, r->uri ? r->uri : "", true);
	put(o, "\" %u endpoint=%s principal=%s completed=%s", r->status,
	    fg_endpoint_name(r->endpoint),
	    r->principal[0] ? r->principal : "-", r->aborted ? "no" : "yes");
	put(o, " error=%s decision=%s lock=%s", l->error ? l->error : "-",
	    l->decision ? l->decision : "-", l->lock ? l->lock : "-");
	kv_num(o, "token", l->has_token, l->token);
	if (l->has_current)
		kv_num(o, "current", true, l->current);
	if (l->lock2) {
		put(o, " lock2=%s", l->lock2);
		kv_num(o, "token2", l->has_token2, l->token2);
	}
	kv_num(o, "upstream_status", r->upstream_status != 0,
	       (uint64_t)r->upstream_status);
	put(o, " bytes_in=%llu bytes_out=%llu", (unsigned long long)r->bytes_in,
	    (unsigned long long)r->bytes_out);
	kv_ms(o, "duration_ms", l->ms);
	kv_ms(o, "admission_ms", l->admit_ms);
	kv_ms(o, "upstream_ms", l->upstream_ms);
}

void fg_accesslog_write(const char *gw_id, const struct fg_rec *r)
{
	if (log_fd < 0)
		return;
	struct line l;
	char buf[LINE_MAX];
	struct out o = { buf, sizeof(buf) - 1, 0 }; /* the last byte: '\n' */
	gather(r, &l);
	if (log_text)
		text_line(&o, gw_id, r, &l);
	else
		json_line(&o, gw_id, r, &l);
	o.buf[o.len++] = '\n';
	ssize_t w = write(log_fd, o.buf, o.len);
	(void)w; /* a full disk must not stop the gateway */
}
