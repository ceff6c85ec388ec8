/*
 * h1client.c - the gateway's own HTTP/1.1 client for requests over plain
 * http with no body or a small one of known length (h1client.h).
 *
 * Invariants:
 * - A connection carries one exchange at a time; it goes back to the
 *   idle list only after a whole answer that h1.c calls reusable
 *   (keep-alive, nothing after it, no body announced that could still
 *   come). Every other end closes it, so a
 *   cancelled or failed exchange never leaves a request half-read on a
 *   connection that is used again.
 * - The request's head is written as curl would send it (request_head()),
 *   then exactly the body's length
 *   in bytes from fill(), each piece asked for right before it is sent
 *   (a refused piece, or any failure, cuts the request off with its
 *   connection: the upstream never sees it complete). A retry sends a
 *   retryable request (no body) again whole on a new connection, once,
 *   and only when the reused one gave no byte back; any other request is
 *   sent once at most. No request goes out on a reused connection that
 *   has said anything since its last answer (asked right before).
 * - A body is read only while the exchange's owner has room for it,
 *   never more than that room: memory per exchange is bounded by the
 *   owner's buffer, whatever the answer's size.
 * - on_end() is called exactly once per exchange that began, never from
 *   inside begin(), and never after cancel().
 * - An idle connection stays registered for reading; anything it says
 *   (its close, or bytes nobody asked for) drops it. An idle connection
 *   older than IDLE_MS is closed rather than used, as curl does.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/text.h"
#include "upstream/h1.h"
#include "upstream/h1client.h"

#define IDLE_MAX 256        /* idle connections kept (curl's cache: 256) */
#define IDLE_MS 118000      /* curl's default bound on a connection's idle age */
#define IN_MAX (64 * 1024)  /* bytes read at once */
#define PIECE_MAX (64 * 1024) /* body bytes asked of fill() at once */

struct conn {
	int fd;
	struct event ev;
	bool watched;
	short what;                 /* its events, while watched */
	struct fg_h1c *c;
	struct fg_h1x *x;           /* the exchange on it; NULL: idle */
	struct sockaddr_storage sa; /* whom it reaches */
	socklen_t salen;
	bool reused;                /* it carried a whole answer before */
	bool connecting;
	uint64_t idle_since;
	struct conn *next, *prev;   /* the idle list */
};

struct fg_h1c {
	struct event_base *base;
	/* the upstream, worked out at creation (settings never change while
	 * running): whether this client can reach it (plain http to an IP
	 * address), its address, and the Host header curl would send */
	bool ok;
	struct sockaddr_storage sa;
	socklen_t salen;
	char host[FG_HOST_MAX + 16];
	unsigned connect_timeout_ms;
	struct conn *idle;          /* the most recently used first */
	int nidle;
	char *in;                   /* IN_MAX bytes, for every read */
};

struct fg_h1x {
	struct fg_h1c *c;
	struct conn *k;
	struct fg_h1 rd;
	struct fg_up_sink hooks;
	void *arg;
	char *req;                  /* the head; owned, kept for a retry */
	size_t len, off;
	char *piece;                /* owned: the body's piece being sent */
	size_t piece_cap, piece_len, piece_off;
	size_t body_left;           /* body bytes not yet asked of fill() */
	bool head, paused, retried, sent, retryable, send_paused;
	bool starting;              /* inside fg_h1c_start() */
	struct event later;         /* an end found while starting */
	enum fg_up_end later_how;
	bool later_set;
	unsigned connect_timeout_ms;
	struct sockaddr_storage sa;
	socklen_t salen;
};

static void on_conn(evutil_socket_t fd, short what, void *arg);

/* ---- connections --------------------------------------------------------- */

static void unwatch(struct conn *k)
{
	if (k->watched)
		event_del(&k->ev);
	k->watched = false;
}

/* Watches for `what` (with a timeout when tv is set); a registration
 * already right is left alone: no epoll_ctl. */
static void watch(struct conn *k, short what, const struct timeval *tv)
{
	if (k->watched && k->what == what && !tv)
		return;
	unwatch(k);
	event_assign(&k->ev, k->c->base, k->fd, what, on_conn, k);
	k->watched = event_add(&k->ev, tv) == 0;
	k->what = what;
}

static void conn_close(struct conn *k)
{
	unwatch(k);
	close(k->fd);
	free(k);
}

static void idle_remove(struct fg_h1c *c, struct conn *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->idle = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->next = k->prev = NULL;
	c->nidle--;
}

static void idle_put(struct fg_h1c *c, struct conn *k)
{
	if (c->nidle >= IDLE_MAX) {
		conn_close(k);
		return;
	}
	k->idle_since = fg_clock_ms();
	k->prev = NULL;
	k->next = c->idle;
	if (c->idle)
		c->idle->prev = k;
	c->idle = k;
	c->nidle++;
	watch(k, EV_READ | EV_PERSIST, NULL);
}

/* An idle connection to the address, young enough; taken off the list. */
static struct conn *idle_take(struct fg_h1c *c, const struct sockaddr *sa,
			      socklen_t salen)
{
	uint64_t now = fg_clock_ms();
	struct conn *k = c->idle, *next;
	for (; k; k = next) {
		next = k->next;
		if (now - k->idle_since > IDLE_MS) {
			idle_remove(c, k);
			conn_close(k);
			continue;
		}
		if (k->salen == salen && memcmp(&k->sa, sa, salen) == 0) {
			idle_remove(c, k);
			return k;
		}
	}
	return NULL;
}

/* A new connection, its connect begun. NULL (errno set) when the socket
 * or the connect failed at once. */
static struct conn *conn_new(struct fg_h1c *c, const struct sockaddr *sa,
			     socklen_t salen)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	bool connecting = false;
	if (connect(fd, sa, salen) != 0) {
		if (errno != EINPROGRESS) {
			int e = errno;
			close(fd);
			errno = e;
			return NULL;
		}
		connecting = true;
	}
	struct conn *k = calloc(1, sizeof(*k));
	if (!k) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	k->fd = fd;
	k->c = c;
	memcpy(&k->sa, sa, salen);
	k->salen = salen;
	k->connecting = connecting;
	return k;
}

/* ---- exchanges ----------------------------------------------------------- */

static void exchange_free(struct fg_h1x *x)
{
	if (x->later_set)
		event_del(&x->later);
	fg_h1_free(&x->rd);
	free(x->req);
	free(x->piece);
	free(x);
}

/* The reader's heads: an interim one is passed over, the final one goes
 * to the owner. */
static bool on_head(void *arg, int status, const struct fg_up_header *h,
		    size_t n, bool cut)
{
	struct fg_h1x *x = arg;
	if (status >= 200)
		x->hooks.on_head(x->arg, status, h, n, cut);
	return true;
}

static bool on_body(void *arg, const char *p, size_t n)
{
	struct fg_h1x *x = arg;
	return x->hooks.on_body(x->arg, p, n);
}

static const struct fg_h1_hooks reader = { on_head, on_body };

/* What each end says more than itself, in the words the upstream's
 * failures are reported in. */
static const char *why_of(enum fg_up_end how)
{
	switch (how) {
	case FG_UP_SEND_FAILED:
		return "Failed sending data to the peer";
	case FG_UP_NO_ANSWER:
		return "Server returned nothing (no headers, no data)";
	case FG_UP_CUT_SHORT:
		return "Transferred a partial file";
	case FG_UP_MALFORMED:
		return "Weird server reply";
	case FG_UP_ABORTED:
		return "Operation was aborted by an application callback";
	default:
		return NULL;
	}
}

/* The exchange ends: its connection is kept or closed, x freed, then the
 * owner told. */
static void finish(struct fg_h1x *x, enum fg_up_end how)
{
	if (x->starting) {
		/* (never from fg_h1c_start(): the loop's next turn) */
		if (!x->later_set) {
			x->later_how = how;
			x->later_set = true;
			event_active(&x->later, EV_READ, 0);
		}
		return;
	}
	struct conn *k = x->k;
	x->k = NULL;
	if (k) {
		k->x = NULL;
		if (how == FG_UP_OK && fg_h1_reusable(&x->rd)) {
			k->reused = true;
			idle_put(x->c, k);
		} else {
			conn_close(k);
		}
	}
	void (*end)(void *, struct fg_up_outcome) = x->hooks.on_end;
	void *arg = x->arg;
	exchange_free(x);
	end(arg, (struct fg_up_outcome){ how, why_of(how) });
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
	struct fg_h1x *x = arg;
	(void)fd;
	(void)what;
	x->later_set = false;
	finish(x, x->later_how);
}

static void read_some(struct fg_h1x *x);
static void begin(struct fg_h1x *x);

/* The connection closed (err 0) or failed (errno err) while the answer
 * was read, or while the request was sent. */
static void lost(struct fg_h1x *x, int err)
{
	struct conn *k = x->k;
	bool any = fg_h1_any(&x->rd);
	if (!any && k->reused && !x->retried && x->retryable) {
		/* closed under us by the upstream's keep-alive bound: the
		 * request again, whole, on a new connection */
		k->x = NULL;
		conn_close(k);
		x->k = NULL;
		x->retried = true;
		/* a new send, whole: its head from the first byte, and not
		 * out until its last byte is (a head that takes more than one
		 * sendmsg() would otherwise never be sent again) */
		x->off = 0;
		x->sent = false;
		fg_h1_free(&x->rd);
		if (fg_h1_init(&x->rd, x->head, &reader, x) != 0) {
			finish(x, FG_UP_UNREACHABLE);
			return;
		}
		begin(x);
		return;
	}
	if (err == 0 && fg_h1_eof(&x->rd) == FG_H1_DONE) {
		finish(x, FG_UP_OK);
		return;
	}
	if (!x->sent)
		finish(x, FG_UP_SEND_FAILED);
	else
		finish(x, any ? FG_UP_CUT_SHORT : FG_UP_NO_ANSWER);
}

/* The body's next piece from fill(), when the last one is out and more
 * is due. False when the exchange ended (fill() refused). */
static bool next_piece(struct fg_h1x *x)
{
	if (x->piece_off < x->piece_len || x->body_left == 0 || x->send_paused)
		return true;
	size_t want = x->body_left < x->piece_cap ? x->body_left : x->piece_cap;
	size_t n = x->hooks.fill(x->arg, x->piece, want);
	if (n == FG_UP_FILL_PAUSE) {
		x->send_paused = true;
		return true;
	}
	/* (a known length: no byte past it is asked for, so an end here is
	 * a body cut short) */
	if (n == FG_UP_FILL_ABORT || n == 0 || n > want) {
		finish(x, FG_UP_ABORTED);
		return false;
	}
	x->piece_len = n;
	x->piece_off = 0;
	x->body_left -= n;
	return true;
}

static void send_some(struct fg_h1x *x)
{
	struct conn *k = x->k;
	for (;;) {
		if (!next_piece(x))
			return;
		/* the head's rest and the body's piece, in one call: a small
		 * request leaves in one segment */
		struct iovec iov[2];
		int cnt = 0;
		if (x->off < x->len)
			iov[cnt++] = (struct iovec){ x->req + x->off, x->len - x->off };
		if (x->piece_off < x->piece_len)
			iov[cnt++] = (struct iovec){ x->piece + x->piece_off,
						     x->piece_len - x->piece_off };
		if (cnt == 0) {
			if (!x->send_paused)
				break; /* all of it is out */
			/* fill() has no more yet: nothing is watched until
			 * resume_send() (the upstream's answer waits in
			 * the socket) */
			unwatch(k);
			return;
		}
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		ssize_t n = sendmsg(k->fd, &mh, MSG_NOSIGNAL);
		if (n > 0) {
			size_t m = (size_t)n, h = x->len - x->off;
			if (h > m)
				h = m;
			x->off += h;
			x->piece_off += m - h;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* the rest when there is room (not on readability: an
			 * early answer is read once the request is out) */
			watch(k, EV_WRITE | EV_PERSIST, NULL);
			return;
		}
		lost(x, n < 0 ? errno : EPIPE);
		return;
	}
	if (!x->sent) {
		x->sent = true;
		x->hooks.on_sent(x->arg);
	}
	watch(k, EV_READ | EV_PERSIST, NULL);
}

static void read_some(struct fg_h1x *x)
{
	struct fg_h1c *c = x->c;
	for (;;) {
		size_t room = x->hooks.room(x->arg, 1);
		if (room == 0) {
			x->paused = true;
			unwatch(x->k);
			return;
		}
		size_t want = room < IN_MAX ? room : IN_MAX;
		ssize_t n = recv(x->k->fd, c->in, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			lost(x, n < 0 ? errno : 0);
			return;
		}
		switch (fg_h1_feed(&x->rd, c->in, (size_t)n)) {
		case FG_H1_ERROR:
			finish(x, FG_UP_MALFORMED);
			return;
		case FG_H1_DONE:
			finish(x, FG_UP_OK);
			return;
		case FG_H1_MORE:
			break;
		}
		if ((size_t)n < want)
			return; /* the socket is drained: its next event */
	}
}

static void on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct conn *k = arg;
	(void)fd;
	struct fg_h1x *x = k->x;
	if (!x) {
		/* an idle connection spoke: its close, or bytes nobody
		 * asked for; either way it is of no more use */
		idle_remove(k->c, k);
		conn_close(k);
		return;
	}
	if (k->connecting) {
		if (what & EV_TIMEOUT) {
			finish(x, FG_UP_TIMEOUT);
			return;
		}
		int err = 0;
		socklen_t el = sizeof(err);
		if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
			finish(x, FG_UP_UNREACHABLE);
			return;
		}
		k->connecting = false;
		send_some(x);
		return;
	}
	if (!x->sent) {
		send_some(x);
		return;
	}
	if (what & EV_READ)
		read_some(x);
}

/* An idle connection has not said it is closed, nor said anything: its
 * close, or bytes nobody asked for, may have come in the same loop turn
 * as the request that wants it, before its idle watch ran. */
static bool still_open(const struct conn *k)
{
	char b;
	ssize_t n = recv(k->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* On an idle connection, or a new one. No request takes an idle
 * connection that has said anything since its last answer: a close would
 * cost a write its only send, and stray bytes would be read as the
 * answer. */
static void begin(struct fg_h1x *x)
{
	const struct sockaddr *sa = (const struct sockaddr *)&x->sa;
	struct conn *k = x->retried ? NULL : idle_take(x->c, sa, x->salen);
	while (k && !still_open(k)) {
		conn_close(k);
		k = idle_take(x->c, sa, x->salen);
	}
	if (!k) {
		k = conn_new(x->c, sa, x->salen);
		if (!k) {
			finish(x, FG_UP_UNREACHABLE);
			return;
		}
	}
	k->x = x;
	x->k = k;
	if (k->connecting) {
		unsigned ms = x->connect_timeout_ms;
		struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
		watch(k, EV_WRITE, &tv);
		return;
	}
	send_some(x);
}

/* The bytes of the request's head, as curl would send them, in x->req;
 * false when this client does not carry the request (then curl does, and
 * nothing here changes what is sent): one to the upstream it can reach,
 * no body or one of known length, no body of its own, a method of token
 * characters other than CONNECT, a target of printable ASCII that curl
 * would send as it is, and headers curl would send as they are. The
 * body's length goes last, as curl puts it. */
static bool request_head(struct fg_h1c *c, struct fg_h1x *x,
			 const struct fg_up_request *rq)
{
	if (!c->ok || rq->fixed_body || rq->body == FG_UP_BODY_CHUNKED)
		return false;
	const char *m = rq->method;
	if (!*m || strlen(m) > 32 || strcmp(m, "CONNECT") == 0 ||
	    m[strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		     "0123456789!#$%&'*+-.^_`|~")])
		return false;
	if (strncasecmp(rq->url, "http://", 7) != 0)
		return false;
	const char *target = rq->url + 7 + strcspn(rq->url + 7, "/?#");
	if (*target != '/')
		return false;
	for (const char *p = target; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || *p == '#')
			return false; /* curl's URL parser would have its say */
	size_t total = strlen(m) + 1 + strlen(target) +
		       sizeof(" HTTP/1.1\r\nHost: \r\n") + strlen(c->host) + 2 +
		       sizeof("Content-Length: 18446744073709551615\r\n");
	for (size_t i = 0; i < rq->nheaders; i++) {
		const struct fg_up_header *h = &rq->headers[i];
		if (h->name_len == 0 || memchr(h->name, '\r', h->name_len) ||
		    memchr(h->name, '\n', h->name_len) ||
		    memchr(h->value, '\r', h->value_len) ||
		    memchr(h->value, '\n', h->value_len) ||
		    (h->name_len == 4 && strncasecmp(h->name, "Host", 4) == 0))
			return false; /* curl has rules of its own for these */
		total += h->name_len + 2 + h->value_len + 2;
	}
	char *req = malloc(total);
	if (!req)
		return false;
	size_t n = 0;
#define PUT(p, l) (memcpy(req + n, (p), (l)), n += (l))
	PUT(m, strlen(m));
	PUT(" ", 1);
	PUT(target, strlen(target));
	PUT(" HTTP/1.1\r\nHost: ", 17);
	PUT(c->host, strlen(c->host));
	PUT("\r\n", 2);
	for (size_t i = 0; i < rq->nheaders; i++) {
		const struct fg_up_header *h = &rq->headers[i];
		/* a name with nothing after it only stops curl adding a
		 * header of its own: it is not sent */
		size_t blank = 0;
		while (blank < h->value_len && strchr(" \t\v\f", h->value[blank]) &&
		       h->value[blank])
			blank++;
		if (blank == h->value_len)
			continue;
		PUT(h->name, h->name_len);
		PUT(": ", 2);
		PUT(h->value, h->value_len);
		PUT("\r\n", 2);
	}
	if (rq->body == FG_UP_BODY_LENGTH) {
		PUT("Content-Length: ", 16);
		n += fg_digits(req + n, rq->length);
		PUT("\r\n", 2);
	}
	PUT("\r\n", 2);
#undef PUT
	x->req = req;
	x->len = n;
	return true;
}

static void *h1_prepare(void *self, const struct fg_up_request *rq,
			const struct fg_up_sink *sink, void *arg)
{
	struct fg_h1c *c = self;
	struct fg_h1x *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	size_t body = rq->body == FG_UP_BODY_LENGTH ? (size_t)rq->length : 0;
	if (!request_head(c, x, rq))
		goto fail;
	if (body > 0) {
		x->piece_cap = body < PIECE_MAX ? body : PIECE_MAX;
		x->piece = malloc(x->piece_cap);
		if (!x->piece)
			goto fail;
	}
	x->c = c;
	x->hooks = *sink;
	x->arg = arg;
	x->body_left = body;
	x->head = rq->is_head;
	/* a request with a body is sent once at most: its bytes are not
	 * kept to be sent again */
	x->retryable = rq->retryable && body == 0;
	x->connect_timeout_ms = c->connect_timeout_ms;
	memcpy(&x->sa, &c->sa, c->salen);
	x->salen = c->salen;
	return x;

fail:
	free(x->req);
	free(x->piece);
	free(x);
	return NULL;
}

static bool h1_begin(void *ex)
{
	struct fg_h1x *x = ex;
	if (fg_h1_init(&x->rd, x->head, &reader, x) != 0)
		return false;
	event_assign(&x->later, x->c->base, -1, 0, on_later, x);
	x->starting = true;
	begin(x);
	x->starting = false;
	return true;
}

static void h1_resume_recv(void *ex)
{
	struct fg_h1x *x = ex;
	if (!x->paused || !x->k)
		return;
	x->paused = false;
	/* level-triggered: what the socket holds wakes the loop's next turn */
	watch(x->k, EV_READ | EV_PERSIST, NULL);
}

static void h1_resume_send(void *ex)
{
	struct fg_h1x *x = ex;
	if (!x->send_paused || !x->k)
		return;
	x->send_paused = false;
	send_some(x);
}

static void h1_cancel(void *ex)
{
	struct fg_h1x *x = ex;
	struct conn *k = x->k;
	if (k) {
		k->x = NULL;
		conn_close(k);
	}
	exchange_free(x);
}

const struct fg_up_backend fg_h1c_backend = {
	.prepare = h1_prepare,
	.begin = h1_begin,
	.resume_recv = h1_resume_recv,
	.resume_send = h1_resume_send,
	.cancel = h1_cancel,
};

/* ---- the client ---------------------------------------------------------- */

/* Whether this client can reach the upstream: plain http, no user in the
 * URL, its host an IP address (a name would need a resolver on the
 * loop). Sets c->ok, and the address and Host line when it can. */
static void target(struct fg_h1c *c, const struct fg_config *cfg)
{
	c->ok = false;
	if (!cfg->upstream || strncasecmp(cfg->up.base, "http://", 7) != 0)
		return;
	const char *auth = cfg->up.base + 7;
	if (memchr(auth, '@', strcspn(auth, "/?#")))
		return; /* curl would send the user's credentials */
	long port = strtol(cfg->up.port, NULL, 10);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&c->sa;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&c->sa;
	memset(&c->sa, 0, sizeof(c->sa));
	bool six = false;
	if (inet_pton(AF_INET, cfg->up.host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		c->salen = sizeof(*v4);
	} else if (inet_pton(AF_INET6, cfg->up.host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		c->salen = sizeof(*v6);
		six = true;
	} else {
		return;
	}
	/* as curl writes it: the address as the URL gives it, the port
	 * unless it is http's own */
	snprintf(c->host, sizeof(c->host), "%s%s%s%s%s",
		 six ? "[" : "", cfg->up.host, six ? "]" : "",
		 port == 80 ? "" : ":", port == 80 ? "" : cfg->up.port);
	c->ok = true;
}

struct fg_h1c *fg_h1c_create(struct event_base *base, const struct fg_config *cfg)
{
	struct fg_h1c *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->in = malloc(IN_MAX);
	if (!c->in) {
		free(c);
		return NULL;
	}
	c->base = base;
	c->connect_timeout_ms = cfg->upstream_connect_timeout_ms;
	target(c, cfg);
	return c;
}

void fg_h1c_destroy(struct fg_h1c *c)
{
	if (!c)
		return;
	while (c->idle) {
		struct conn *k = c->idle;
		idle_remove(c, k);
		conn_close(k);
	}
	free(c->in);
	free(c);
}
