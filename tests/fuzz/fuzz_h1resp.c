/*
 * fuzz_h1resp - an upstream answer as the gateway's own client reads it
 * (gateway/upstream/h1.c). The input: a flags byte (bit 0: the request
 * was a HEAD; bit 1: the upstream closes after the bytes), a step byte
 * (bytes per feed, 1..256), then the bytes the upstream sent.
 *
 * Properties:
 *  - a body is never handed more bytes than were fed so far;
 *  - every head handed on has a status of at most three digits and at most
 *    FG_UP_HEADERS_MAX headers, each a non-empty name of no CR, LF or
 *    colon and a value of no CR or LF, which together fit FG_H1_LINE_MAX;
 *  - DONE and ERROR are final: more bytes never change them;
 *  - reusable only when DONE;
 *  - fed in steps, the answer reads as it does fed whole (the same heads,
 *    the same body, the same end), unless it is an error.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "upstream/h1.h"

struct seen {
	char lines[1 << 16];   /* the heads, as "<status>\n" and a
				  "name:value\n" per header */
	size_t nlines;
	char body[1 << 16];
	size_t body_len;
	size_t body_total;
	size_t fed;
};

static void add(struct seen *s, const char *p, size_t len)
{
	if (s->nlines + len <= sizeof(s->lines)) {
		memcpy(s->lines + s->nlines, p, len);
		s->nlines += len;
	}
}

static bool on_head(void *arg, int status, const struct fg_up_header *h,
		    size_t n, bool cut)
{
	struct seen *s = arg;
	PROPERTY(status >= 0 && status <= 999); /* (http_parser's bound) */
	PROPERTY(n <= FG_UP_HEADERS_MAX);
	char st[4] = { (char)('0' + status / 100), (char)('0' + status / 10 % 10),
		       (char)('0' + status % 10), cut ? '+' : '\n' };
	add(s, st, 4);
	for (size_t i = 0; i < n; i++) {
		PROPERTY(h[i].name_len > 0);
		PROPERTY(h[i].name_len + 2 + h[i].value_len <= FG_H1_LINE_MAX);
		PROPERTY(!memchr(h[i].name, '\r', h[i].name_len) &&
			 !memchr(h[i].name, '\n', h[i].name_len) &&
			 !memchr(h[i].name, ':', h[i].name_len));
		PROPERTY(!memchr(h[i].value, '\r', h[i].value_len) &&
			 !memchr(h[i].value, '\n', h[i].value_len));
		add(s, h[i].name, h[i].name_len);
		add(s, ":", 1);
		add(s, h[i].value, h[i].value_len);
		add(s, "\n", 1);
	}
	return true;
}

static bool on_body(void *arg, const char *p, size_t n)
{
	struct seen *s = arg;
	s->body_total += n;
	PROPERTY(s->body_total <= s->fed);
	if (s->body_len + n <= sizeof(s->body)) {
		memcpy(s->body + s->body_len, p, n);
		s->body_len += n;
	}
	return true;
}

static const struct fg_h1_hooks hooks = { on_head, on_body };

static struct seen whole, stepped;

static enum fg_h1_state read_all(struct seen *s, const uint8_t *d, size_t n,
				 bool head, bool eof, size_t step, bool *reusable)
{
	memset(s, 0, sizeof(*s));
	struct fg_h1 h;
	if (fg_h1_init(&h, head, &hooks, s) != 0)
		abort();
	enum fg_h1_state st = FG_H1_MORE;
	for (size_t off = 0; off < n;) {
		size_t k = n - off < step ? n - off : step;
		s->fed += k;
		enum fg_h1_state next = fg_h1_feed(&h, (const char *)d + off, k);
		if (st != FG_H1_MORE)
			PROPERTY(next == st);
		st = next;
		off += k;
	}
	if (eof) {
		enum fg_h1_state next = fg_h1_eof(&h);
		if (st != FG_H1_MORE)
			PROPERTY(next == st);
		st = next;
	}
	*reusable = fg_h1_reusable(&h);
	if (*reusable)
		PROPERTY(st == FG_H1_DONE);
	fg_h1_free(&h);
	return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	bool head = data[0] & 1, eof = data[0] & 2;
	size_t step = (size_t)data[1] + 1;
	data += 2;
	size -= 2;
	bool ra, rb;
	enum fg_h1_state a = read_all(&whole, data, size, head, eof, size ? size : 1, &ra);
	enum fg_h1_state b = read_all(&stepped, data, size, head, eof, step, &rb);
	PROPERTY(a == b);
	PROPERTY(ra == rb);
	if (a != FG_H1_ERROR) {
		PROPERTY(whole.nlines == stepped.nlines &&
			 memcmp(whole.lines, stepped.lines, whole.nlines) == 0);
		PROPERTY(whole.body_total == stepped.body_total &&
			 whole.body_len == stepped.body_len &&
			 memcmp(whole.body, stepped.body, whole.body_len) == 0);
	}
	return 0;
}
