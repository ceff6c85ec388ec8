/*
 * test_h1client.c - unit tests of gateway/upstream/h1client.c: the
 * gateway's own HTTP/1.1 upstream client, a real fg_h1c on a libevent
 * base against a scripted upstream listening on loopback in the same
 * process and on the same base (it accepts, reads each request whole,
 * then answers or closes as its script says).
 *
 * What is asserted is what either end can see: which upstream connection
 * each request came on and how many times, the bytes the upstream got
 * before a close, how and how often an exchange ended. Every wait runs
 * the loop until what it waits for happens, bounded by a timer: a client
 * that hangs fails the test instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "base/config.h"
#include "upstream/h1client.h"

#define GUARD_S 5      /* the longest any wait may take */
#define MAX_CONNS 16
#define MAX_REQS 32
#define MAX_EX 16
#define NEVER SIZE_MAX

/* ---- the scripted upstream ----------------------------------------------- */

/* What the upstream does once request number i (0-based, counted over
 * every connection) is in whole. */
enum act {
	ANSWER,       /* writes reply (NULL: "answer <i+1>", kept alive) */
	CLOSE,        /* closes the connection without a byte */
};

struct step {
	enum act act;
	const char *reply;
	bool close_after; /* closes once the reply is written */
};

struct t;

struct upc {
	struct t *t;
	int fd;                /* -1 once closed by either side */
	struct event ev;
	char *in;              /* bytes of a request not yet whole */
	size_t len, cap;
	size_t got;            /* every byte received on it */
	int reqs;              /* whole requests received on it */
	bool eof;              /* the client closed (or reset) its side */
};

struct seen_req {
	int conn;              /* the connection it came on */
	char *bytes;
	size_t len;
};

/* ---- the client's side: one exchange ---------------------------------- */

struct ex {
	void *x;                /* the exchange; NULL once ended or
				   cancelled */
	bool in_start;          /* inside begin() */
	int ends;
	enum fg_up_end how;
	int sent;               /* sent() calls */
	char lines[4096];
	size_t nlines;
	char body[4096];
	size_t body_len;
	bool refuse_body;       /* on_body() says stop */
	size_t room_max;        /* room() says at most this (0: no bound) */
	bool room_shut;         /* room() says 0 */
	size_t last_room;
	bool over_room;         /* body() was handed more than room() said */
	/* fill(): the body, cut into pieces at pause_at and abort_at */
	const char *data;
	size_t data_len, off;
	size_t pause_at;        /* once off reaches it, PAUSE (NEVER: no) */
	size_t abort_at;        /* once off reaches it, ABORT (NEVER: no) */
	int pauses;
	size_t head_len;        /* the request head's bytes */
};

struct t {
	struct event_base *base;
	struct fg_h1c *c;
	struct fg_h1c *other;   /* a client for opts.to, when asked */
	int lfd;
	struct event lev;
	struct sockaddr_in sa;
	int accepts;
	struct upc conns[MAX_CONNS];
	struct seen_req reqs[MAX_REQS];
	int nreqs;
	struct step steps[MAX_REQS];
	struct event guard;
	bool timed_out;
	struct ex ex[MAX_EX];
	int nex;
};

static void up_close(struct upc *k)
{
	if (k->fd < 0)
		return;
	event_del(&k->ev);
	close(k->fd);
	k->fd = -1;
}

static void up_write(struct upc *k, const char *p, size_t n)
{
	assert_true(k->fd >= 0);
	while (n > 0) {
		ssize_t w = send(k->fd, p, n, MSG_NOSIGNAL);
		assert_true(w > 0);
		p += w;
		n -= (size_t)w;
	}
}

/* The length of the whole request at the start of p, 0: not all in yet. */
static size_t request_len(const char *p, size_t n)
{
	const char *end = memmem(p, n, "\r\n\r\n", 4);
	if (!end)
		return 0;
	size_t head = (size_t)(end - p) + 4, body = 0;
	for (const char *l = p; l < end;) {
		const char *eol = memmem(l, (size_t)(end + 2 - l), "\r\n", 2);
		if (strncasecmp(l, "Content-Length:", 15) == 0)
			body = strtoul(l + 15, NULL, 10);
		l = eol + 2;
	}
	return n >= head + body ? head + body : 0;
}

static void up_request(struct t *t, struct upc *k, size_t n)
{
	assert_true(t->nreqs < MAX_REQS);
	int i = t->nreqs++;
	struct seen_req *r = &t->reqs[i];
	r->conn = (int)(k - t->conns);
	r->bytes = malloc(n + 1);
	assert_non_null(r->bytes);
	memcpy(r->bytes, k->in, n);
	r->bytes[n] = '\0';
	r->len = n;
	k->reqs++;
	memmove(k->in, k->in + n, k->len - n);
	k->len -= n;

	const struct step *s = &t->steps[i];
	switch (s->act) {
	case ANSWER:
		if (s->reply) {
			up_write(k, s->reply, strlen(s->reply));
		} else {
			char b[128], body[32];
			int bn = snprintf(body, sizeof(body), "answer %d", i + 1);
			int m = snprintf(b, sizeof(b),
					 "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
					 bn, body);
			up_write(k, b, (size_t)m);
		}
		if (s->close_after)
			up_close(k);
		break;
	case CLOSE:
		up_close(k);
		break;
	}
}

static void on_up_read(evutil_socket_t fd, short what, void *arg)
{
	struct upc *k = arg;
	(void)what;
	bool gone = false;
	for (;;) {
		if (k->cap - k->len < 65536) {
			k->cap = k->cap ? k->cap * 2 : 131072;
			k->in = realloc(k->in, k->cap);
			assert_non_null(k->in);
		}
		ssize_t n = recv(fd, k->in + k->len, k->cap - k->len, 0);
		if (n > 0) {
			k->len += (size_t)n;
			k->got += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		gone = true; /* its close, or a reset */
		break;
	}
	size_t n;
	while (k->fd >= 0 && (n = request_len(k->in, k->len)) > 0)
		up_request(k->t, k, n);
	if (gone) {
		k->eof = true;
		up_close(k);
	}
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct t *t = arg;
	(void)what;
	for (;;) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0)
			return;
		assert_true(t->accepts < MAX_CONNS);
		struct upc *k = &t->conns[t->accepts++];
		k->t = t;
		k->fd = cfd;
		event_assign(&k->ev, t->base, cfd, EV_READ | EV_PERSIST, on_up_read, k);
		assert_int_equal(event_add(&k->ev, NULL), 0);
	}
}

/* ---- the client's hooks ------------------------------------------------- */

/* The head, written down as its lines ("HTTP/1.1 <status>", then each
 * "Name: value"), each with its CRLF. */
static void h_head(void *arg, int status, const struct fg_up_header *h,
		   size_t n, bool cut)
{
	struct ex *e = arg;
	(void)cut;
	int w = snprintf(e->lines + e->nlines, sizeof(e->lines) - e->nlines,
			 "HTTP/1.1 %d\r\n", status);
	if (w > 0 && (size_t)w < sizeof(e->lines) - e->nlines)
		e->nlines += (size_t)w;
	for (size_t i = 0; i < n; i++) {
		w = snprintf(e->lines + e->nlines, sizeof(e->lines) - e->nlines,
			     "%.*s: %.*s\r\n", (int)h[i].name_len, h[i].name,
			     (int)h[i].value_len, h[i].value);
		if (w > 0 && (size_t)w < sizeof(e->lines) - e->nlines)
			e->nlines += (size_t)w;
	}
}

static size_t h_room(void *arg, size_t want)
{
	(void)want;
	struct ex *e = arg;
	size_t room = e->room_shut ? 0 : sizeof(e->body) - 1 - e->body_len;
	if (e->room_max && room > e->room_max)
		room = e->room_max;
	e->last_room = room;
	return room;
}

static bool h_body(void *arg, const char *p, size_t n)
{
	struct ex *e = arg;
	if (e->refuse_body)
		return false;
	if (n > e->last_room)
		e->over_room = true;
	e->last_room -= n < e->last_room ? n : e->last_room;
	if (e->body_len + n < sizeof(e->body)) {
		memcpy(e->body + e->body_len, p, n);
		e->body_len += n;
		e->body[e->body_len] = '\0';
	}
	return true;
}

static size_t h_fill(void *arg, char *buf, size_t max)
{
	struct ex *e = arg;
	if (e->off == e->abort_at)
		return FG_UP_FILL_ABORT;
	if (e->off == e->pause_at) {
		e->pauses++;
		return FG_UP_FILL_PAUSE;
	}
	size_t n = e->data_len - e->off;
	if (n > max)
		n = max;
	if (e->pause_at != NEVER && e->off < e->pause_at && n > e->pause_at - e->off)
		n = e->pause_at - e->off;
	if (e->abort_at != NEVER && e->off < e->abort_at && n > e->abort_at - e->off)
		n = e->abort_at - e->off;
	assert_true(n > 0); /* (never asked past the body's length) */
	memcpy(buf, e->data + e->off, n);
	e->off += n;
	return n;
}

static void h_sent(void *arg)
{
	struct ex *e = arg;
	e->sent++;
}

static void h_end(void *arg, struct fg_up_outcome out)
{
	struct ex *e = arg;
	assert_false(e->in_start); /* never from inside begin() */
	e->ends++;
	e->how = out.end;
	e->x = NULL;
}

static const struct fg_up_sink sink = {
	.on_head = h_head,
	.room = h_room,
	.on_body = h_body,
	.fill = h_fill,
	.on_sent = h_sent,
	.on_end = h_end,
};

/* A client for the upstream at sa (the settings it reads: the URL, the
 * connect timeout). */
static struct fg_h1c *client_for(struct t *t, const struct sockaddr_in *sa)
{
	struct fg_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa->sin_port));
	cfg.upstream = url;
	assert_int_equal(fg_upstream_parse(url, &cfg.up), 0);
	cfg.upstream_connect_timeout_ms = 1000;
	struct fg_h1c *c = fg_h1c_create(t->base, &cfg);
	assert_non_null(c);
	return c;
}

/* ---- the fixture -------------------------------------------------------- */

static void on_guard(evutil_socket_t fd, short what, void *arg)
{
	struct t *t = arg;
	(void)fd;
	(void)what;
	t->timed_out = true;
}

static void arm(struct t *t)
{
	struct timeval tv = { GUARD_S, 0 };
	t->timed_out = false;
	evtimer_add(&t->guard, &tv);
}

/* Runs the loop until cond holds, GUARD_S at most. */
#define WAIT_FOR(t, cond)                                                  \
	do {                                                               \
		arm(t);                                                    \
		while (!(cond) && !(t)->timed_out)                         \
			event_base_loop((t)->base, EVLOOP_ONCE);           \
		evtimer_del(&(t)->guard);                                  \
		assert_false((t)->timed_out);                              \
	} while (0)

/* One turn of the loop for what is ready now: what an upstream's close
 * or bytes on loopback make ready at once. */
static void one_turn(struct t *t)
{
	event_base_loop(t->base, EVLOOP_NONBLOCK);
}

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof(*t));
	assert_non_null(t);
	t->base = event_base_new();
	assert_non_null(t->base);
	t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(t->lfd >= 0);
	t->sa.sin_family = AF_INET;
	t->sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(t->lfd, (struct sockaddr *)&t->sa, sizeof(t->sa)), 0);
	socklen_t sl = sizeof(t->sa);
	assert_int_equal(getsockname(t->lfd, (struct sockaddr *)&t->sa, &sl), 0);
	assert_int_equal(listen(t->lfd, 64), 0);
	t->c = client_for(t, &t->sa);
	event_assign(&t->lev, t->base, t->lfd, EV_READ | EV_PERSIST, on_accept, t);
	assert_int_equal(event_add(&t->lev, NULL), 0);
	evtimer_assign(&t->guard, t->base, on_guard, t);
	for (int i = 0; i < MAX_CONNS; i++)
		t->conns[i].fd = -1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	for (int i = 0; i < t->nex; i++)
		if (t->ex[i].x)
			fg_h1c_backend.cancel(t->ex[i].x);
	fg_h1c_destroy(t->c);
	fg_h1c_destroy(t->other);
	for (int i = 0; i < MAX_CONNS; i++) {
		up_close(&t->conns[i]);
		free(t->conns[i].in);
	}
	for (int i = 0; i < t->nreqs; i++)
		free(t->reqs[i].bytes);
	event_del(&t->lev);
	close(t->lfd);
	event_base_free(t->base);
	free(t);
	return 0;
}

/* A new exchange's record, fill() never pausing nor refusing. */
static struct ex *new_ex(struct t *t)
{
	assert_true(t->nex < MAX_EX);
	struct ex *e = &t->ex[t->nex++];
	memset(e, 0, sizeof(*e));
	e->pause_at = e->abort_at = NEVER;
	return e;
}

struct opts {
	const char *body;      /* NULL: none */
	bool retryable;
	bool is_head;
	size_t pad;            /* an X-Pad header of that many bytes */
	const struct sockaddr_in *to; /* NULL: the upstream */
};

/* Starts `method path` (with the body's Content-Length when it has one):
 * the request as data, its head as the client writes it counted here. */
static struct ex *start_ex(struct t *t, struct ex *e, const char *method,
			   const char *path, struct opts o)
{
	const struct sockaddr_in *to = o.to ? o.to : &t->sa;
	struct fg_h1c *c = t->c;
	if (o.to) {
		fg_h1c_destroy(t->other);
		c = t->other = client_for(t, o.to);
	}
	char url[1024];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", ntohs(to->sin_port),
		 path);
	char *pad = NULL;
	struct fg_up_header hdr[1];
	size_t nh = 0;
	if (o.pad) {
		pad = malloc(o.pad);
		assert_non_null(pad);
		memset(pad, 'p', o.pad);
		hdr[nh++] = (struct fg_up_header){ "X-Pad", 5, pad, o.pad };
	}
	e->data = o.body;
	e->data_len = o.body ? strlen(o.body) : 0;
	/* what the client sends before the body: its line, Host, X-Pad,
	 * the body's length, the blank line */
	e->head_len = strlen(method) + 1 + strlen(path) +
		      strlen(" HTTP/1.1\r\nHost: 127.0.0.1:\r\n") +
		      (size_t)snprintf(NULL, 0, "%d", ntohs(to->sin_port)) +
		      (o.pad ? o.pad + 9 : 0) +
		      (o.body ? (size_t)snprintf(NULL, 0, "Content-Length: %zu\r\n",
						 e->data_len) : 0) + 2;
	struct fg_up_request rq = {
		.method = method,
		.url = url,
		.headers = hdr,
		.nheaders = nh,
		.body = o.body ? FG_UP_BODY_LENGTH : FG_UP_BODY_NONE,
		.length = e->data_len,
		.is_head = o.is_head,
		.retryable = o.retryable,
	};
	e->x = fg_h1c_backend.prepare(c, &rq, &sink, e);
	free(pad); /* (the head is written: the request lives only here) */
	assert_non_null(e->x);
	e->in_start = true;
	bool began = fg_h1c_backend.begin(e->x);
	e->in_start = false;
	assert_true(began);
	assert_int_equal(e->ends, 0);
	return e;
}

static struct ex *start(struct t *t, const char *method, const char *path,
			struct opts o)
{
	return start_ex(t, new_ex(t), method, path, o);
}

/* Waits for e's end: exactly one. */
static void wait_end(struct t *t, struct ex *e)
{
	WAIT_FOR(t, e->ends > 0);
	assert_int_equal(e->ends, 1);
	assert_null(e->x);
}

/* A GET that is answered whole (its answer: "answer <n>", n the count of
 * requests the upstream had then); the upstream connection it came on. */
static int get_ok(struct t *t, const char *path, bool retryable)
{
	struct ex *e = start(t, "GET", path, (struct opts){ .retryable = retryable });
	int before = t->nreqs;
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_OK);
	assert_true(t->nreqs > before);
	char want[32];
	snprintf(want, sizeof(want), "answer %d", t->nreqs);
	assert_string_equal(e->body, want);
	return t->reqs[t->nreqs - 1].conn;
}

/* How many requests the upstream had whose first line is `line`. */
static int times_seen(const struct t *t, const char *line)
{
	int n = 0;
	size_t ll = strlen(line);
	for (int i = 0; i < t->nreqs; i++)
		if (t->reqs[i].len > ll && memcmp(t->reqs[i].bytes, line, ll) == 0 &&
		    t->reqs[i].bytes[ll] == '\r')
			n++;
	return n;
}

#define OK_2(body) "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n" body

/* A request's exchange, waited for to its end. */
static struct ex *done(struct t *t, const char *method, const char *path,
		       struct opts o)
{
	struct ex *e = start(t, method, path, o);
	wait_end(t, e);
	return e;
}

/* ---- reuse ---------------------------------------------------------------- */

static void test_a_kept_alive_connection_carries_the_next_requests(void **state)
{
	struct t *t = *state;
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 1");
	assert_int_equal(e->sent, 1);
	assert_true(strncmp(e->lines, "HTTP/1.1 200\r\n", 14) == 0);
	int a = t->reqs[0].conn;
	int b = get_ok(t, "/b", false);
	e = done(t, "PUT", "/c", (struct opts){ .body = "hello" });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 3");
	int c = t->reqs[2].conn;
	assert_int_equal(t->accepts, 1);
	assert_int_equal(a, b);
	assert_int_equal(b, c);
	assert_int_equal(t->nreqs, 3);
	/* each request whole, once, in order */
	char want[128];
	snprintf(want, sizeof(want), "PUT /c HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Content-Length: 5\r\n\r\nhello", ntohs(t->sa.sin_port));
	assert_string_equal(t->reqs[2].bytes, want);
	assert_false(t->conns[0].eof);
}

static void test_no_reuse_after_an_answer_that_says_close(void **state)
{
	struct t *t = *state;
	/* the upstream leaves its side open: the client closes it */
	t->steps[0].reply = "HTTP/1.1 200 OK\r\nConnection: close\r\n"
			    "Content-Length: 2\r\n\r\nok";
	t->steps[1].reply = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "ok");
	WAIT_FOR(t, t->conns[0].eof);
	e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "ok");
	assert_int_equal(t->reqs[1].conn, 1);
	WAIT_FOR(t, t->conns[1].eof);
	assert_int_equal(get_ok(t, "/c", true), 2);
	assert_int_equal(t->accepts, 3);
}

static void test_no_reuse_after_bytes_past_the_answer(void **state)
{
	struct t *t = *state;
	/* a second answer nobody asked for, in the same write */
	t->steps[0].reply = OK_2("ok") "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray";
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "ok");
	/* the next one has its own answer, on a new connection */
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(t->accepts, 2);
	WAIT_FOR(t, t->conns[0].eof);
}

static void test_no_reuse_after_a_failed_answer(void **state)
{
	struct t *t = *state;
	/* malformed, the upstream's side left open */
	t->steps[0].reply = "HTTP/1.1 200 OK\r\nContent-Length: zz\r\n\r\n";
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_MALFORMED);
	WAIT_FOR(t, t->conns[0].eof);

	/* refused by the body hook: a good answer, dropped with its
	 * connection */
	e = new_ex(t);
	e->refuse_body = true;
	start_ex(t, e, "GET", "/b", (struct opts){ .retryable = true });
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_MALFORMED);
	assert_int_equal(t->reqs[1].conn, 1);
	WAIT_FOR(t, t->conns[1].eof);

	/* cut short by the upstream's close */
	t->steps[2].reply = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
	t->steps[2].close_after = true;
	e = done(t, "GET", "/c", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_CUT_SHORT);
	assert_string_equal(e->body, "abc");
	assert_int_equal(t->reqs[2].conn, 2);

	/* and nothing of them reaches the next request */
	assert_int_equal(get_ok(t, "/d", true), 3);
	assert_int_equal(t->accepts, 4);
	assert_int_equal(t->nreqs, 4);
}

/* ---- idle connections ----------------------------------------------------- */

static void test_an_idle_connection_that_speaks_is_dropped(void **state)
{
	struct t *t = *state;
	assert_int_equal(get_ok(t, "/a", true), 0);
	up_write(&t->conns[0], OK_2("no"), strlen(OK_2("no")));
	WAIT_FOR(t, t->conns[0].eof); /* the client closed it */
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(get_ok(t, "/c", false), 1);
	assert_int_equal(t->accepts, 2);
	assert_int_equal(t->nreqs, 3);
}

static void test_an_idle_connection_the_upstream_closed_is_not_used(void **state)
{
	struct t *t = *state;
	/* the loop has a turn to see the close */
	assert_int_equal(get_ok(t, "/a", true), 0);
	up_close(&t->conns[0]);
	one_turn(t);
	assert_int_equal(get_ok(t, "/b", false), 1);
	up_close(&t->conns[1]);
	one_turn(t);
	assert_int_equal(get_ok(t, "/c", true), 2);
	/* or not: the close comes in the same turn as the next request */
	up_close(&t->conns[2]);
	struct ex *e = done(t, "PUT", "/d", (struct opts){ .body = "hello" });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 4");
	assert_int_equal(t->reqs[3].conn, 3);
	up_close(&t->conns[3]);
	assert_int_equal(get_ok(t, "/e", true), 4);
	assert_int_equal(t->accepts, 5);
	assert_int_equal(t->nreqs, 5); /* each request once */
}

static void test_a_write_never_takes_an_idle_connection_that_spoke(void **state)
{
	struct t *t = *state;
	/* the stray answer comes in the same turn as the next request */
	assert_int_equal(get_ok(t, "/a", true), 0);
	up_write(&t->conns[0], OK_2("no"), strlen(OK_2("no")));
	struct ex *e = done(t, "PUT", "/b", (struct opts){ .body = "hello" });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 2");
	assert_int_equal(t->reqs[1].conn, 1);
	assert_int_equal(times_seen(t, "PUT /b HTTP/1.1"), 1);
	WAIT_FOR(t, t->conns[0].eof);
}

/* ---- retries -------------------------------------------------------------- */

static void test_a_retryable_request_is_sent_again_once_on_a_new_connection(void **state)
{
	struct t *t = *state;
	t->steps[1].act = CLOSE; /* the reused connection closes under it */
	assert_int_equal(get_ok(t, "/a", true), 0);
	struct ex *e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 3");
	assert_int_equal(t->nreqs, 3);
	assert_int_equal(t->accepts, 2);
	assert_int_equal(t->reqs[1].conn, 0);
	assert_int_equal(t->reqs[2].conn, 1);
	/* the same request again, whole */
	assert_int_equal(t->reqs[2].len, t->reqs[1].len);
	assert_memory_equal(t->reqs[2].bytes, t->reqs[1].bytes, t->reqs[1].len);
	assert_true(strncmp(e->lines, "HTTP/1.1 200\r\n", 14) == 0);
	/* its new connection is kept */
	assert_int_equal(get_ok(t, "/c", true), 1);
}

static void test_a_closed_under_request_that_is_not_retryable_is_sent_once(void **state)
{
	struct t *t = *state;
	t->steps[1].act = CLOSE;
	t->steps[3].act = CLOSE;
	t->steps[5].act = CLOSE;
	assert_int_equal(get_ok(t, "/a", true), 0);
	/* a write */
	struct ex *e = done(t, "PUT", "/w", (struct opts){ .body = "hello" });
	assert_int_equal(e->how, FG_UP_NO_ANSWER);
	assert_int_equal(get_ok(t, "/b", true), 1);
	/* one with a body, whatever its owner says */
	e = done(t, "PUT", "/w2", (struct opts){ .body = "hello", .retryable = true });
	assert_int_equal(e->how, FG_UP_NO_ANSWER);
	assert_int_equal(get_ok(t, "/c", true), 2);
	/* one without, that its owner does not call retryable */
	e = done(t, "GET", "/g", (struct opts){ .retryable = false });
	assert_int_equal(e->how, FG_UP_NO_ANSWER);
	/* (the last request goes through after any second send would have) */
	assert_int_equal(get_ok(t, "/d", true), 3);
	assert_int_equal(times_seen(t, "PUT /w HTTP/1.1"), 1);
	assert_int_equal(times_seen(t, "PUT /w2 HTTP/1.1"), 1);
	assert_int_equal(times_seen(t, "GET /g HTTP/1.1"), 1);
	assert_int_equal(t->nreqs, 7);
	assert_int_equal(t->accepts, 4);
}

static void test_a_retry_that_fails_too_is_not_sent_a_third_time(void **state)
{
	struct t *t = *state;
	t->steps[1].act = CLOSE;
	t->steps[2].act = CLOSE;
	assert_int_equal(get_ok(t, "/a", true), 0);
	struct ex *e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_NO_ANSWER);
	assert_int_equal(get_ok(t, "/c", true), 2);
	assert_int_equal(times_seen(t, "GET /b HTTP/1.1"), 2);
	assert_int_equal(t->nreqs, 4);
	assert_int_equal(t->accepts, 3);
}

static void test_no_retry_on_a_new_connection(void **state)
{
	struct t *t = *state;
	/* a new connection's close says nothing of a keep-alive bound */
	t->steps[0].act = CLOSE;
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_NO_ANSWER);
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(times_seen(t, "GET /a HTTP/1.1"), 1);
	assert_int_equal(t->accepts, 2);
}

static void test_no_retry_after_a_byte_of_the_answer(void **state)
{
	struct t *t = *state;
	t->steps[1].reply = "HTTP/1.1 200 OK\r\nContent-Len";
	t->steps[1].close_after = true;
	assert_int_equal(get_ok(t, "/a", true), 0);
	struct ex *e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_CUT_SHORT);
	assert_int_equal(get_ok(t, "/c", true), 1);
	assert_int_equal(times_seen(t, "GET /b HTTP/1.1"), 1);
}

/* ---- cancel ---------------------------------------------------------------- */

static const char body100[] =
	"0123456789012345678901234567890123456789012345678901234567890123456789"
	"012345678901234567890123456789";

static void test_cancel_mid_body_closes_the_connection(void **state)
{
	struct t *t = *state;
	struct ex *e = new_ex(t);
	e->pause_at = 10;
	start_ex(t, e, "PUT", "/w", (struct opts){ .body = body100 });
	WAIT_FOR(t, e->pauses == 1 && t->accepts == 1 &&
		 t->conns[0].got == e->head_len + 10);
	void *x = e->x;
	e->x = NULL;
	fg_h1c_backend.cancel(x);
	WAIT_FOR(t, t->conns[0].eof);
	assert_int_equal(t->conns[0].got, e->head_len + 10);
	assert_int_equal(t->nreqs, 0);
	/* the client goes on, on a new connection; end() never came */
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(e->ends, 0);
	assert_int_equal(e->sent, 0);
}

static void test_cancel_mid_answer_closes_the_connection(void **state)
{
	struct t *t = *state;
	t->steps[0].reply = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
	struct ex *e = start(t, "GET", "/a", (struct opts){ .retryable = true });
	WAIT_FOR(t, e->body_len == 3);
	void *x = e->x;
	e->x = NULL;
	fg_h1c_backend.cancel(x);
	WAIT_FOR(t, t->conns[0].eof);
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(e->ends, 0);
	assert_int_equal(t->nreqs, 2);
}

/* ---- fill(): pause, abort ---------------------------------------------------- */

static void test_a_paused_body_goes_on_when_resumed(void **state)
{
	struct t *t = *state;
	struct ex *e = new_ex(t);
	e->pause_at = 4;
	start_ex(t, e, "PUT", "/w", (struct opts){ .body = "0123456789" });
	WAIT_FOR(t, e->pauses == 1 && t->accepts == 1 &&
		 t->conns[0].got == e->head_len + 4);
	assert_int_equal(e->sent, 0);
	e->pause_at = NEVER;
	fg_h1c_backend.resume_send(e->x);
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 1");
	assert_int_equal(e->sent, 1);
	assert_int_equal(t->nreqs, 1);
	assert_int_equal(t->reqs[0].len, e->head_len + 10);
	assert_string_equal(t->reqs[0].bytes + e->head_len, "0123456789");
	assert_int_equal(get_ok(t, "/b", true), 0); /* kept alive */
}

static void test_fill_abort_cuts_the_request_off(void **state)
{
	struct t *t = *state;
	struct ex *e = new_ex(t);
	e->abort_at = 4;
	start_ex(t, e, "PUT", "/w", (struct opts){ .body = "0123456789" });
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_ABORTED);
	assert_int_equal(e->sent, 0);
	WAIT_FOR(t, t->accepts == 1 && t->conns[0].eof);
	assert_true(t->conns[0].got < e->head_len + 10);
	assert_int_equal(t->nreqs, 0);

	/* after a pause */
	e = new_ex(t);
	e->pause_at = 4;
	start_ex(t, e, "PUT", "/w", (struct opts){ .body = "0123456789" });
	WAIT_FOR(t, e->pauses == 1 && t->accepts == 2 &&
		 t->conns[1].got == e->head_len + 4);
	e->pause_at = NEVER;
	e->abort_at = 4;
	fg_h1c_backend.resume_send(e->x);
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_ABORTED);
	WAIT_FOR(t, t->conns[1].eof);
	assert_int_equal(t->conns[1].got, e->head_len + 4);
	assert_int_equal(t->nreqs, 0);
}

static void test_an_abort_on_a_reused_connection_ends_after_start(void **state)
{
	struct t *t = *state;
	assert_int_equal(get_ok(t, "/a", true), 0);
	size_t got = t->conns[0].got;
	struct ex *e = new_ex(t);
	e->abort_at = 0;
	/* (start_ex() checks that end() did not come from inside) */
	start_ex(t, e, "PUT", "/w", (struct opts){ .body = "0123456789" });
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_ABORTED);
	WAIT_FOR(t, t->conns[0].eof);
	assert_true(t->conns[0].got < got + e->head_len + 10);
	assert_int_equal(t->nreqs, 1);
	assert_int_equal(get_ok(t, "/b", true), 1);
}

/* ---- the rest ----------------------------------------------------------------- */

static void test_no_connection_ends_after_start(void **state)
{
	struct t *t = *state;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t sl = sizeof(sa);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd); /* nobody listens there */
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true, .to = &sa });
	assert_int_equal(e->how, FG_UP_UNREACHABLE);
	assert_int_equal(e->sent, 0);
	assert_int_equal(get_ok(t, "/b", true), 0);
}

static void test_the_body_is_read_within_room(void **state)
{
	struct t *t = *state;
	t->steps[0].reply = "HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n"
			    "abcdefghijklmnopqrstuvwxyz";
	struct ex *e = new_ex(t);
	e->room_max = 5;
	start_ex(t, e, "GET", "/a", (struct opts){ .retryable = true });
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "abcdefghijklmnopqrstuvwxyz");
	assert_false(e->over_room);

	/* no room: nothing is read until there is */
	e = new_ex(t);
	e->room_shut = true;
	start_ex(t, e, "GET", "/b", (struct opts){ .retryable = true });
	WAIT_FOR(t, t->nreqs == 2);
	one_turn(t);
	one_turn(t);
	assert_int_equal(e->body_len, 0);
	assert_int_equal(e->ends, 0);
	e->room_shut = false;
	fg_h1c_backend.resume_recv(e->x);
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 2");
	assert_false(e->over_room);
	assert_int_equal(get_ok(t, "/c", true), 0);
}

/* ---- what the client gets wrong today -------------------------------------- */

/* An idle connection's stray bytes may come in the same loop turn as the
 * next request: they are not that request's answer. (Today a retryable
 * request takes the connection unchecked and reads them as its answer.) */
static void test_a_retryable_request_never_takes_an_idle_connection_that_spoke(void **state)
{
	struct t *t = *state;
	assert_int_equal(get_ok(t, "/a", true), 0);
	up_write(&t->conns[0], OK_2("no"), strlen(OK_2("no")));
	struct ex *e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 2");
	assert_int_equal(t->reqs[1].conn, 1);
}

/* The same with bytes past an answer that room() left in the socket: the
 * answer is read to its last byte and no further, so they are not seen
 * as excess, and the next request starts before the loop's next turn. */
static void test_a_retryable_request_never_reads_bytes_left_past_the_answer(void **state)
{
	struct t *t = *state;
	t->steps[0].reply = OK_2("ok") OK_2("no"); /* 40 bytes, then 40 */
	struct ex *e = new_ex(t);
	e->room_max = 2; /* (reads of 2 bytes: the first answer ends one) */
	start_ex(t, e, "GET", "/a", (struct opts){ .retryable = true });
	wait_end(t, e);
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "ok");
	e = done(t, "GET", "/b", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 2");
}

/* A retry's head goes out whole even when it takes more than one send.
 * (Today, once the first send of the retry is short, the rest is never
 * sent: the connection is watched for writing and nothing is written.)
 * The head is larger than the socket's buffers can take at once, the
 * upstream's new connections read through a small receive buffer. */
static void test_a_retry_goes_out_whole_when_it_takes_more_than_one_send(void **state)
{
	struct t *t = *state;
	t->steps[1].act = CLOSE;
	assert_int_equal(get_ok(t, "/a", true), 0);
	int small = 4096;
	assert_int_equal(setsockopt(t->lfd, SOL_SOCKET, SO_RCVBUF, &small,
				    sizeof(small)), 0);
	struct ex *e = done(t, "GET", "/b", (struct opts){ .retryable = true,
							    .pad = 8 << 20 });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, "answer 3");
	assert_int_equal(times_seen(t, "GET /b HTTP/1.1"), 2);
	assert_int_equal(t->reqs[2].len, t->reqs[1].len);
	assert_memory_equal(t->reqs[2].bytes, t->reqs[1].bytes, t->reqs[1].len);
}

/* ---- no reuse after an answer whose announced body was never read ---------- */

/* The answer ends at its head whatever it announces; an upstream that
 * sends the announced body anyway would have it read as the next
 * request's answer, so the connection is not used again. */
static void no_reuse_after(struct t *t, const char *method, bool is_head,
			   const char *reply, const char *body)
{
	t->steps[0].reply = reply;
	struct ex *e = done(t, method, "/a",
			    (struct opts){ .retryable = true, .is_head = is_head });
	assert_int_equal(e->how, FG_UP_OK);
	assert_string_equal(e->body, body);
	assert_int_equal(get_ok(t, "/b", true), 1);
	assert_int_equal(t->accepts, 2);
	WAIT_FOR(t, t->conns[0].eof); /* the client closed it */
}

static void test_no_reuse_after_an_answer_to_head_with_a_length(void **state)
{
	no_reuse_after(*state, "HEAD", true,
		       "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "");
}

static void test_no_reuse_after_an_answer_to_head_that_is_chunked(void **state)
{
	no_reuse_after(*state, "HEAD", true,
		       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "");
}

static void test_no_reuse_after_a_204_with_a_length(void **state)
{
	no_reuse_after(*state, "GET", false,
		       "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", "");
}

static void test_no_reuse_after_a_304_that_is_chunked(void **state)
{
	no_reuse_after(*state, "GET", false,
		       "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", "");
}

static void test_no_reuse_after_a_1xx_with_a_length(void **state)
{
	no_reuse_after(*state, "GET", false,
		       "HTTP/1.1 100 Continue\r\nContent-Length: 3\r\n\r\n"
		       OK_2("ok"), "ok");
}

/* (and for contrast: one that announces no body keeps it) */
static void test_a_204_without_a_length_keeps_the_connection(void **state)
{
	struct t *t = *state;
	t->steps[0].reply = "HTTP/1.1 204 No Content\r\n\r\n";
	struct ex *e = done(t, "GET", "/a", (struct opts){ .retryable = true });
	assert_int_equal(e->how, FG_UP_OK);
	assert_int_equal(get_ok(t, "/b", true), 0);
	assert_int_equal(t->accepts, 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_a_kept_alive_connection_carries_the_next_requests),
		T(test_no_reuse_after_an_answer_that_says_close),
		T(test_no_reuse_after_bytes_past_the_answer),
		T(test_no_reuse_after_a_failed_answer),
		T(test_an_idle_connection_that_speaks_is_dropped),
		T(test_an_idle_connection_the_upstream_closed_is_not_used),
		T(test_a_write_never_takes_an_idle_connection_that_spoke),
		T(test_a_retryable_request_is_sent_again_once_on_a_new_connection),
		T(test_a_closed_under_request_that_is_not_retryable_is_sent_once),
		T(test_a_retry_that_fails_too_is_not_sent_a_third_time),
		T(test_no_retry_on_a_new_connection),
		T(test_no_retry_after_a_byte_of_the_answer),
		T(test_cancel_mid_body_closes_the_connection),
		T(test_cancel_mid_answer_closes_the_connection),
		T(test_a_paused_body_goes_on_when_resumed),
		T(test_fill_abort_cuts_the_request_off),
		T(test_an_abort_on_a_reused_connection_ends_after_start),
		T(test_no_connection_ends_after_start),
		T(test_the_body_is_read_within_room),
		T(test_a_retryable_request_never_takes_an_idle_connection_that_spoke),
		T(test_a_retryable_request_never_reads_bytes_left_past_the_answer),
		T(test_a_retry_goes_out_whole_when_it_takes_more_than_one_send),
		T(test_no_reuse_after_an_answer_to_head_with_a_length),
		T(test_no_reuse_after_an_answer_to_head_that_is_chunked),
		T(test_no_reuse_after_a_204_with_a_length),
		T(test_no_reuse_after_a_304_that_is_chunked),
		T(test_no_reuse_after_a_1xx_with_a_length),
		T(test_a_204_without_a_length_keeps_the_connection),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
