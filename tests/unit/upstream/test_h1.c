/*
 * test_h1.c - unit tests of gateway/upstream/h1.c: how the gateway's own
 * upstream client reads an answer's framing. Every answer is fed whole
 * and again one byte at a time; both must read the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/text.h"
#include "upstream/h1.h"

struct seen {
	char lines[8192];  /* every head handed on, as "<status>\r\n", a
			      "Name: value\r\n" per header, "\r\n" */
	size_t nlines;
	char body[8192];
	size_t body_len;
	size_t fed;        /* bytes fed so far */
	bool over;         /* a body was handed more than was fed */
	bool bad_line;     /* a name or value with a CR or LF in it */
	size_t nheaders;   /* of the last head */
	bool cut;          /* the last head was cut */
	bool refuse_line, refuse_body;
};

static void add(struct seen *s, const char *p, size_t len)
{
	if (s->nlines + len < sizeof(s->lines)) {
		memcpy(s->lines + s->nlines, p, len);
		s->nlines += len;
		s->lines[s->nlines] = '\0';
	}
}

static bool on_head(void *arg, int status, const struct fg_up_header *h,
		    size_t n, bool cut)
{
	struct seen *s = arg;
	char st[16];
	size_t k = fg_digits(st, (unsigned long long)status);
	add(s, st, k);
	add(s, "\r\n", 2);
	for (size_t i = 0; i < n; i++) {
		if (memchr(h[i].name, '\r', h[i].name_len) ||
		    memchr(h[i].name, '\n', h[i].name_len) ||
		    memchr(h[i].value, '\r', h[i].value_len) ||
		    memchr(h[i].value, '\n', h[i].value_len))
			s->bad_line = true;
		add(s, h[i].name, h[i].name_len);
		add(s, ": ", 2);
		add(s, h[i].value, h[i].value_len);
		add(s, "\r\n", 2);
	}
	add(s, "\r\n", 2);
	s->nheaders = n;
	s->cut = cut;
	return !s->refuse_line;
}

static bool on_body(void *arg, const char *p, size_t n)
{
	struct seen *s = arg;
	if (s->body_len + n > s->fed)
		s->over = true;
	if (s->body_len + n < sizeof(s->body)) {
		memcpy(s->body + s->body_len, p, n);
		s->body_len += n;
		s->body[s->body_len] = '\0';
	}
	return !s->refuse_body;
}

static const struct fg_h1_hooks hooks = { on_head, on_body };

struct result {
	enum fg_h1_state st;   /* after the last feed (and the close, if any) */
	bool reusable;
	struct seen s;
};

/* Feeds `in` whole (step 0) or `step` bytes at a time, then the close when
 * `eof`. */
static struct result run(const char *in, bool head, size_t step, bool eof,
			 bool refuse_line, bool refuse_body)
{
	struct result r;
	memset(&r, 0, sizeof(r));
	r.s.refuse_line = refuse_line;
	r.s.refuse_body = refuse_body;
	struct fg_h1 h;
	assert_int_equal(fg_h1_init(&h, head, &hooks, &r.s), 0);
	size_t n = strlen(in);
	r.st = FG_H1_MORE;
	for (size_t off = 0; off < n && r.st != FG_H1_ERROR;) {
		size_t k = step ? step : n;
		if (k > n - off)
			k = n - off;
		r.s.fed += k;
		r.st = fg_h1_feed(&h, in + off, k);
		off += k;
	}
	if (eof && r.st == FG_H1_MORE)
		r.st = fg_h1_eof(&h);
	r.reusable = fg_h1_reusable(&h);
	fg_h1_free(&h);
	assert_false(r.s.over);
	assert_false(r.s.bad_line);
	return r;
}

/* Whole and byte by byte read the same (what came before an error may
 * differ: the answer is dropped); returns the whole one's. */
static struct result both(const char *in, bool head, bool eof)
{
	struct result a = run(in, head, 0, eof, false, false);
	struct result b = run(in, head, 1, eof, false, false);
	assert_int_equal(a.st, b.st);
	assert_int_equal(a.reusable, b.reusable);
	if (a.st == FG_H1_ERROR)
		return a;
	assert_string_equal(a.s.lines, b.s.lines);
	assert_int_equal(a.s.body_len, b.s.body_len);
	assert_memory_equal(a.s.body, b.s.body, a.s.body_len);
	return a;
}

static void test_length_framed_answer(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
			       "X-A:  b c \r\n\r\nhello", false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_true(r.reusable);
	assert_string_equal(r.s.lines, "200\r\nContent-Length: 5\r\n"
				       "X-A: b c \r\n\r\n");
	assert_string_equal(r.s.body, "hello");
}

static void test_chunked_answer_is_unframed_and_its_trailer_dropped(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			       "5\r\nhello\r\n6;x=1\r\n world\r\n0\r\nT: 1\r\n\r\n",
			       false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_true(r.reusable);
	assert_string_equal(r.s.body, "hello world");
	/* the head has gone on before a trailer comes: it is dropped */
	assert_string_equal(r.s.lines, "200\r\nTransfer-Encoding: chunked\r\n"
				       "\r\n");
}

static void test_interim_answer_then_the_final_one(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.1 100 Continue\r\n\r\n"
			       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			       false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_string_equal(r.s.lines, "100\r\n\r\n200\r\n"
				       "Content-Length: 2\r\n\r\n");
	assert_string_equal(r.s.body, "ok");
	assert_true(r.reusable);
}

static void test_no_body_after_head_204_304(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
			       true, false);
	assert_int_equal(r.st, FG_H1_DONE);
	/* the body a HEAD's answer announced could still come */
	assert_false(r.reusable);
	assert_int_equal(r.s.body_len, 0);
	r = both("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_int_equal(r.s.body_len, 0);
	r = both("HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\n", false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_int_equal(r.s.body_len, 0);
	/* bytes where no body belongs are not this answer's */
	r = both("HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\nabc",
		 false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_false(r.reusable);
}

static void test_body_read_to_the_close(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.1 200 OK\r\n\r\nabc", false, false);
	assert_int_equal(r.st, FG_H1_MORE);
	r = both("HTTP/1.1 200 OK\r\n\r\nabc", false, true);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_false(r.reusable);
	assert_string_equal(r.s.body, "abc");
}

static void test_keep_alive_by_version_and_connection(void **state)
{
	(void)state;
	assert_false(both("HTTP/1.1 200 OK\r\nConnection: close\r\n"
			  "Content-Length: 0\r\n\r\n", false, false).reusable);
	assert_false(both("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
			  false, false).reusable);
	assert_true(both("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"
			 "Content-Length: 0\r\n\r\n", false, false).reusable);
	/* a second answer nobody asked for: not reused */
	struct result r = both("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
			       "HTTP/1.1 200 OK\r\n", false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_false(r.reusable);
}

static void test_status_as_the_code_says(void **state)
{
	(void)state;
	struct result r = both("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n",
			       false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_string_equal(r.s.lines, "404\r\nContent-Length: 0\r\n\r\n");
	r = both("HTTP/1.1 599 X\r\nContent-Length: 0\r\n\r\n", false, false);
	assert_string_equal(r.s.lines, "599\r\nContent-Length: 0\r\n\r\n");
}

static void test_digits(void **state)
{
	(void)state;
	const unsigned long long v[] = { 0, 7, 10, 999, 1000, 18446744073709551615ull };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char want[24], got[24];
		snprintf(want, sizeof(want), "%llu", v[i]);
		size_t n = fg_digits(got, v[i]);
		got[n] = '\0';
		assert_int_equal(n, strlen(want));
		assert_string_equal(got, want);
	}
}

static void test_copy_cuts_short_as_snprintf_would(void **state)
{
	(void)state;
	const char *src[] = { "", "a", "abcd", "abcde", "abcdefgh" };
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++) {
		char want[6], got[6];
		snprintf(want, sizeof(want), "%s", src[i]);
		assert_int_equal(fg_copy(got, sizeof(got), src[i]), strlen(want));
		assert_string_equal(got, want);
	}
}

static void test_cut_short_is_an_error(void **state)
{
	(void)state;
	assert_int_equal(both("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
			      false, true).st, FG_H1_ERROR);
	assert_int_equal(both("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "5\r\nab", false, true).st, FG_H1_ERROR);
	assert_int_equal(both("HTTP/1.1 200 OK\r\nContent-Le", false, true).st,
			 FG_H1_ERROR);
	/* nothing at all */
	struct fg_h1 h;
	struct seen s = { 0 };
	assert_int_equal(fg_h1_init(&h, false, &hooks, &s), 0);
	assert_false(fg_h1_any(&h));
	assert_int_equal(fg_h1_eof(&h), FG_H1_ERROR);
	assert_false(fg_h1_any(&h));
	fg_h1_free(&h);
}

static void test_malformed_answers(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/0.9 200 OK\r\nContent-Length: 0\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"<html>hello</html>",
		/* framing a smuggler would play with */
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
		"0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"ffffffffffffffffff\r\n",
		"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct result r = both(bad[i], false, true);
		if (r.st != FG_H1_ERROR)
			fail_msg("read as %d: %s", r.st, bad[i]);
		assert_false(r.reusable);
	}
}

static void test_a_line_past_the_bound_is_an_error(void **state)
{
	(void)state;
	static char in[FG_H1_LINE_MAX + 200];
	int n = snprintf(in, sizeof(in), "HTTP/1.1 200 OK\r\nX-Long: ");
	memset(in + n, 'a', FG_H1_LINE_MAX);
	strcpy(in + n + FG_H1_LINE_MAX, "\r\nContent-Length: 0\r\n\r\n");
	struct result r = run(in, false, 0, true, false, false);
	assert_int_equal(r.st, FG_H1_ERROR);
	/* one just within it is handed on whole */
	n = snprintf(in, sizeof(in), "HTTP/1.1 200 OK\r\nX-Long: ");
	memset(in + n, 'a', FG_H1_LINE_MAX - 8);
	strcpy(in + n + FG_H1_LINE_MAX - 8, "\r\nContent-Length: 0\r\n\r\n");
	r = run(in, false, 0, true, false, false);
	assert_int_equal(r.st, FG_H1_DONE);
}

static void test_a_head_past_the_most_headers_is_cut(void **state)
{
	(void)state;
	static char in[16 * FG_UP_HEADERS_MAX];
	size_t n = (size_t)snprintf(in, sizeof(in), "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i < FG_UP_HEADERS_MAX; i++)
		n += (size_t)snprintf(in + n, sizeof(in) - n, "X-%d: v\r\n", i);
	strcpy(in + n, "Content-Length: 0\r\n\r\n");
	struct result r = run(in, false, 0, false, false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_int_equal(r.s.nheaders, FG_UP_HEADERS_MAX);
	assert_true(r.s.cut);
	/* as many as that is whole */
	strcpy(in + n - strlen("X-1023: v\r\n"), "Content-Length: 0\r\n\r\n");
	r = run(in, false, 0, false, false, false);
	assert_int_equal(r.st, FG_H1_DONE);
	assert_int_equal(r.s.nheaders, FG_UP_HEADERS_MAX);
	assert_false(r.s.cut);
}

static void test_a_refusing_hook_stops_the_answer(void **state)
{
	(void)state;
	const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct result r = run(in, false, 0, false, true, false);
	assert_int_equal(r.st, FG_H1_ERROR);
	assert_false(r.reusable);
	r = run(in, false, 0, false, false, true);
	assert_int_equal(r.st, FG_H1_ERROR);
	assert_false(r.reusable);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_length_framed_answer),
		cmocka_unit_test(test_chunked_answer_is_unframed_and_its_trailer_dropped),
		cmocka_unit_test(test_interim_answer_then_the_final_one),
		cmocka_unit_test(test_no_body_after_head_204_304),
		cmocka_unit_test(test_body_read_to_the_close),
		cmocka_unit_test(test_keep_alive_by_version_and_connection),
		cmocka_unit_test(test_cut_short_is_an_error),
		cmocka_unit_test(test_malformed_answers),
		cmocka_unit_test(test_a_line_past_the_bound_is_an_error),
		cmocka_unit_test(test_a_refusing_hook_stops_the_answer),
		cmocka_unit_test(test_status_as_the_code_says),
		cmocka_unit_test(test_a_head_past_the_most_headers_is_cut),
		cmocka_unit_test(test_digits),
		cmocka_unit_test(test_copy_cuts_short_as_snprintf_would),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
