/*
 * curlx.c - libcurl as a backend of the upstream engine (curlx.h,
 * backend.h).
 *
 * The loop's multi handle is driven on its libevent base
 * (curl_multi_socket_action); everything here runs on the loop's thread.
 * curl is never called back into from its own callbacks: the engine posts
 * what it wants (begin, resume, cancel) and runs it on the loop's next
 * turn, then asks settle() for what ended meanwhile.
 *
 * It keeps, for curl, the engine's invariants (xfer.c), the last two
 * here: a write is sent once at most, a read at most twice (on_prereq()
 * counts curl's sends and refuses the one too many before a byte of it
 * goes), and an answer reaches only its request (a connection that could
 * carry bytes not its answer's is spent: struct sock, sock_spend()).
 * curl's words stay here: its ends reach the engine as outcomes
 * (curl_outcome()), its header lines as the final head's data.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "base/config.h"
#include "base/log.h"
#include "base/text.h"
#include "upstream/curlx.h"

#define EASY_POOL 64

/* One socket curl watches, by its descriptor. A connection's socket
 * (opened through open_socket()) keeps its event registered while the
 * connection idles in curl's cache (curl said REMOVE but kept it open),
 * so the next transfer on it costs the kernel no epoll_ctl; it is dropped
 * when the socket says something while curl does not watch it (the
 * upstream closed it) and always before curl closes the socket
 * (close_socket()). Any other socket curl watches (its resolver's) is
 * closed by curl without telling us: its registration goes on REMOVE.
 * So a descriptor number used again never meets a registration of the
 * old socket. */
struct sock {
	struct event ev;
	short mask;   /* EV_READ / EV_WRITE registered, when added */
	bool added;
	bool curl;    /* curl watches it now */
	bool conn;    /* a connection's: closes through close_socket() */
	int fd;
	bool spent;   /* never to carry another request (shut down) */
	/* a connection's ends, learnt when first asked (curl names a
	 * connection to its hooks by them, not by its socket) */
	bool named;
	int lport, pport;
	char pip[INET6_ADDRSTRLEN];
	struct sock *cnext, *cprev; /* the connections' list */
};

struct fg_curlx {
	struct event_base *base;
	const struct fg_config *cfg;
	CURLM *multi;
	CURL *pool[EASY_POOL];        /* reset handles for reuse */
	int npool;
	struct event *timer;          /* curl's own timeout */
	struct sock **socks;          /* by descriptor; NULL: none */
	int nsocks;
	struct sock *conns;           /* the connections' sockets */
	char *line;                   /* a request header line being made */
	size_t line_cap;
};

/* One exchange: a request on its easy handle. */
struct cx {
	struct fg_curlx *xs;
	struct fg_up_sink sink;
	void *arg;
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE]; /* curl's words for a failure */
	struct curl_slist *req_headers;
	bool added, read_paused, write_paused;
	bool head;                    /* HEAD: no answer body */
	bool has_body, chunked;       /* the request body: chunked, */
	uint64_t length;              /* else this many bytes */
	uint64_t handed;              /* body bytes handed to curl */
	bool upload_done;             /* curl was handed the body's last byte */
	/* the head curl is reading: its status, its names and values in
	 * one block (ch), where each is (hdrs, offsets until handed on),
	 * and whether it had a Transfer-Encoding or a Content-Length */
	int status;
	char *ch;
	size_t ch_len, ch_cap;
	struct fg_up_header *hdrs;
	size_t nhdrs, caphdrs;
	bool cut, te;
	int64_t clength;
	bool head_out;                /* the final head went: what curl hands
					 on after it is a trailer's, dropped
					 (as the own client drops it) */
	bool unframed;                /* a body the answer did not carry could
					 still come on its connection: a HEAD's
					 answer, a 1xx, 204 or 304 that announced
					 one (its connection is then spent) */
	bool retryable;               /* a safe method, no body: may be sent
					 twice, the second time on a new
					 connection; a write never is */
	/* curl's sends of it, counted by its pre-request hook, and the
	 * connections curl had made for it by the last one */
	int sends;
	long connects;
	bool resend_refused;          /* curl would have sent it again */
	bool fresh;                   /* refused a spent connection before any
					 byte went: to be begun again on a new
					 one (read_done()) */
	bool fresh_done;              /* it was: never a second time */
};

static int sock_named(struct fg_curlx *xs, long lport, const char *pip,
		      long pport);
static void read_done(struct fg_curlx *xs);
static void sock_spend(struct fg_curlx *xs, int fd);

/* ---- curl callbacks ----------------------------------------------------- */

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	struct cx *x = ud;
	size_t n = x->sink.fill(x->arg, buf, size * nitems);
	if (n == FG_UP_FILL_ABORT)
		return CURL_READFUNC_ABORT;
	if (n == FG_UP_FILL_PAUSE) {
		x->read_paused = true;
		return CURL_READFUNC_PAUSE;
	}
	x->handed += n;
	/* curl asks no more once it has a known length's last byte; a
	 * chunked body ends with 0 */
	if (!x->upload_done && (n == 0 || (!x->chunked && x->handed == x->length))) {
		x->upload_done = true;
		x->sink.on_sent(x->arg);
	}
	return n;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct cx *x = ud;
	size_t n = size * nmemb;
	if (x->sink.room(x->arg, n) < n) {
		x->write_paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	return x->sink.on_body(x->arg, ptr, n) ? n : 0; /* (0: abort) */
}

/* A header line of the head curl reads, kept in x->ch until the head
 * ends. */
static void curl_header(struct cx *x, const char *name, size_t nl,
			const char *v, size_t vl)
{
	if (nl == 14 && strncasecmp(name, "Content-Length", 14) == 0)
		x->clength = fg_value_number(v, vl);
	if (nl == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0)
		x->te = true;
	if (x->cut)
		return;
	if (x->nhdrs == FG_UP_HEADERS_MAX) {
		x->cut = true;
		return;
	}
	if (x->nhdrs == x->caphdrs) {
		size_t cap = x->caphdrs ? x->caphdrs * 2 : 16;
		struct fg_up_header *a = realloc(x->hdrs, cap * sizeof(*a));
		if (!a) {
			x->cut = true; /* (refused as one that could not be kept) */
			return;
		}
		x->hdrs = a;
		x->caphdrs = cap;
	}
	if (!fg_block_room(&x->ch, &x->ch_cap, x->ch_len, nl + vl, 512)) {
		x->cut = true;
		return;
	}
	/* (offsets until the head ends: the block moves as it grows) */
	struct fg_up_header *e = &x->hdrs[x->nhdrs++];
	e->name = (const char *)(uintptr_t)x->ch_len;
	e->name_len = nl;
	memcpy(x->ch + x->ch_len, name, nl);
	x->ch_len += nl;
	e->value = (const char *)(uintptr_t)x->ch_len;
	e->value_len = vl;
	memcpy(x->ch + x->ch_len, v, vl);
	x->ch_len += vl;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	struct cx *x = ud;
	size_t len = size * nitems, n = len;
	if (x->head_out)
		return len;
	while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n'))
		n--;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* a new status line: forget an interim (1xx) response */
		const char *sp = memchr(buf, ' ', n);
		x->status = sp ? atoi(sp + 1) : 502;
		x->ch_len = 0;
		x->nhdrs = 0;
		x->cut = false;
		x->te = false;
		x->clength = -1;
	} else if (n == 0) {
		/* a head without a body that announced one (any head of a
		 * HEAD's answer): what curl does not read of it could still
		 * come, and be read as the next request's answer */
		bool bodiless = x->head || x->status < 200 || x->status == 204 ||
				x->status == 304;
		if (x->head || (bodiless && (x->te || x->clength > 0)))
			x->unframed = true;
		if (x->status >= 200) {
			for (size_t i = 0; i < x->nhdrs; i++) {
				x->hdrs[i].name = x->ch + (uintptr_t)x->hdrs[i].name;
				x->hdrs[i].value = x->ch + (uintptr_t)x->hdrs[i].value;
			}
			x->head_out = true;
			x->sink.on_head(x->arg, x->status, x->hdrs, x->nhdrs, x->cut);
			x->nhdrs = 0;
		}
	} else {
		const char *colon = memchr(buf, ':', n);
		if (colon && colon > buf) {
			const char *v = colon + 1;
			while (v < buf + n && (*v == ' ' || *v == '\t'))
				v++;
			curl_header(x, buf, (size_t)(colon - buf), v,
				    (size_t)(buf + n - v));
		}
	}
	return len;
}

/* ---- driving curl on the loop ------------------------------------------- */

static int pause_bits(const struct cx *x)
{
	return (x->read_paused ? CURLPAUSE_SEND : 0) |
	       (x->write_paused ? CURLPAUSE_RECV : 0);
}

/* curl handles are reused: a reset handle keeps its allocations. */
static CURL *easy_get(struct fg_curlx *xs)
{
	if (xs->npool > 0)
		return xs->pool[--xs->npool];
	return curl_easy_init();
}

static void easy_put(struct fg_curlx *xs, CURL *e)
{
	if (!e)
		return;
	curl_easy_reset(e);
	if (xs->npool < EASY_POOL)
		xs->pool[xs->npool++] = e;
	else
		curl_easy_cleanup(e);
}

/* A failure of the upstream's TLS: its handshake, its certificate, the
 * CA file or our own certificate. */
static bool tls_failure(CURLcode code)
{
	switch (code) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/* curl's end of x's transfer, said as an outcome; a TLS failure is
 * logged (the client is answered 502; the operator needs curl's why:
 * "SSL certificate problem: unable to get local issuer certificate"). */
static struct fg_up_outcome curl_outcome(const struct fg_curlx *xs,
					 const struct cx *x, CURLcode code)
{
	if (tls_failure(code))
		fg_log_warn("upstream %s:%s: TLS failed: %s",
			    xs->cfg->up.host, xs->cfg->up.port,
			    x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
	if (x->resend_refused)
		return (struct fg_up_outcome){ FG_UP_NOT_SENT_AGAIN,
			"the upstream closed its connection before answering, "
			"and the request is not sent again" };
	const char *why = curl_easy_strerror(code);
	switch (code) {
	case CURLE_OK:
		return (struct fg_up_outcome){ FG_UP_OK, NULL };
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
		return (struct fg_up_outcome){ FG_UP_UNREACHABLE, NULL };
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
		return (struct fg_up_outcome){ FG_UP_TLS, NULL };
	case CURLE_OPERATION_TIMEDOUT:
		return (struct fg_up_outcome){ FG_UP_TIMEOUT, NULL };
	case CURLE_SEND_ERROR:
		return (struct fg_up_outcome){ FG_UP_SEND_FAILED, why };
	case CURLE_GOT_NOTHING:
		return (struct fg_up_outcome){ FG_UP_NO_ANSWER, why };
	case CURLE_WEIRD_SERVER_REPLY:
		return (struct fg_up_outcome){ FG_UP_MALFORMED, why };
	case CURLE_ABORTED_BY_CALLBACK:
	case CURLE_READ_ERROR:
	case CURLE_WRITE_ERROR:
		return (struct fg_up_outcome){ FG_UP_ABORTED, why };
	case CURLE_OUT_OF_MEMORY:
	case CURLE_FAILED_INIT:
		return (struct fg_up_outcome){ FG_UP_NO_MEMORY, why };
	default:
		return (struct fg_up_outcome){
			tls_failure(code) ? FG_UP_TLS : FG_UP_CUT_SHORT, why };
	}
}

static struct sock *sock_of(struct fg_curlx *xs, curl_socket_t fd)
{
	return fd >= 0 && fd < xs->nsocks ? xs->socks[fd] : NULL;
}

static void sock_unregister(struct sock *sk)
{
	if (sk->added)
		event_del(&sk->ev);
	sk->added = false;
}

/* The record of FD, made (owned by xs->socks: freed by sock_forget()). */
static struct sock *sock_new(struct fg_curlx *xs, curl_socket_t fd)
{
	if (fd >= xs->nsocks) {
		int n = fd + 64;
		struct sock **a = realloc(xs->socks, (size_t)n * sizeof(*a));
		if (!a)
			return NULL;
		memset(a + xs->nsocks, 0, (size_t)(n - xs->nsocks) * sizeof(*a));
		xs->socks = a;
		xs->nsocks = n;
	}
	struct sock *sk = calloc(1, sizeof(*sk));
	if (sk) {
		sk->fd = fd;
		xs->socks[fd] = sk;
	}
	return sk;
}

/* FD's record and registration go (before the socket is closed). */
static void sock_forget(struct fg_curlx *xs, curl_socket_t fd)
{
	struct sock *sk = sock_of(xs, fd);
	if (!sk)
		return;
	sock_unregister(sk);
	if (sk->conn) {
		if (sk->cprev)
			sk->cprev->cnext = sk->cnext;
		else
			xs->conns = sk->cnext;
		if (sk->cnext)
			sk->cnext->cprev = sk->cprev;
	}
	free(sk);
	xs->socks[fd] = NULL;
}

/* Learns a connection's ends once: its local port, its peer's address
 * and port, as curl names them (CURLINFO_LOCAL_PORT, _PRIMARY_IP and
 * _PRIMARY_PORT). */
static void sock_name(struct sock *sk, int fd)
{
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	if (sk->named)
		return;
	if (getsockname(fd, (struct sockaddr *)&a, &al) != 0)
		return;
	sk->lport = a.ss_family == AF_INET6
		? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
		: ntohs(((struct sockaddr_in *)&a)->sin_port);
	al = sizeof(a);
	if (getpeername(fd, (struct sockaddr *)&a, &al) != 0)
		return;
	const void *ip;
	if (a.ss_family == AF_INET6) {
		ip = &((struct sockaddr_in6 *)&a)->sin6_addr;
		sk->pport = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
	} else {
		ip = &((struct sockaddr_in *)&a)->sin_addr;
		sk->pport = ntohs(((struct sockaddr_in *)&a)->sin_port);
	}
	if (!inet_ntop(a.ss_family, ip, sk->pip, sizeof(sk->pip)))
		return;
	sk->named = true;
}

/* The connection curl names by its ends; -1 when none is known. */
static int sock_named(struct fg_curlx *xs, long lport, const char *pip,
		      long pport)
{
	for (struct sock *sk = xs->conns; sk; sk = sk->cnext) {
		sock_name(sk, sk->fd);
		if (sk->named && sk->lport == lport && sk->pport == pport &&
		    pip && strcmp(sk->pip, pip) == 0)
			return sk->fd;
	}
	return -1;
}

/* The connection on FD is never to carry another request: shut down, so
 * that curl, which finds a connection closed only when its socket says
 * so, drops it when it next considers it; and marked, for a request that
 * meets it before then (on_prereq()). */
static void sock_spend(struct fg_curlx *xs, int fd)
{
	struct sock *sk = sock_of(xs, fd);
	if (!sk || sk->spent)
		return;
	sk->spent = true;
	/* what came is read and dropped, so curl's look at the socket (a
	 * peek for its close) finds the close and not those bytes */
	char b[4096];
	while (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
		;
	shutdown(fd, SHUT_RDWR);
}

/* Has a reused connection said anything since its last answer (bytes, or
 * its close)? */
static bool sock_spoke(int fd)
{
	char b;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct fg_curlx *xs = arg;
	int running;
	struct sock *sk = sock_of(xs, fd);
	if (sk && !sk->curl) {
		/* an idle cached connection spoke: its close, or bytes nobody
		 * asked for, which curl would read as the next request's
		 * answer; either way it carries no request more */
		sock_unregister(sk);
		if (sk->conn)
			sock_spend(xs, fd);
		return;
	}
	int action = ((what & EV_READ) ? CURL_CSELECT_IN : 0) |
		     ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
	curl_multi_socket_action(xs->multi, fd, action, &running);
	read_done(xs);
}

static void on_curl_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_curlx *xs = arg;
	int running;
	(void)fd;
	(void)what;
	curl_multi_socket_action(xs->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	read_done(xs);
}

/* curl is about to send x's request on a connection it has picked
 * (CURLOPT_PREREQFUNCTION): once for its first send, and again for each
 * send of it curl begins on its own after a reused connection closed
 * before answering (curl 7.88 does so for any request without a body,
 * up to five times, on whichever connection it picks next). Here:
 * - the send too many is refused before any byte of it goes: a write's
 *   second, a read's third;
 * - a read's second send goes out on a new connection only;
 * - a reused connection that said anything since its last answer, or is
 *   spent, carries nothing.
 * What is refused for its connection ends the transfer before any byte
 * went, and read_done() begins it again on a new connection, once. */
static int on_prereq(void *ud, char *pip, char *lip, int pport, int lport)
{
	struct cx *x = ud;
	struct fg_curlx *xs = x->xs;
	(void)lip;
	if (x->sends >= (x->retryable ? 2 : 1)) {
		x->resend_refused = true;
		return CURL_PREREQFUNC_ABORT;
	}
	/* (curl counts the connections it made for the transfer, its own
	 * sends again included; none new since the last send: reused) */
	long connects = 0;
	curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &connects);
	bool reused = connects <= x->connects;
	x->connects = connects;
	if (reused) {
		int fd = sock_named(xs, lport, pip, pport);
		struct sock *sk = sock_of(xs, fd);
		bool spoke = sk && !sk->spent && sock_spoke(fd);
		if (spoke)
			sock_spend(xs, fd);
		/* (a connection we cannot name is refused too) */
		if (!sk || sk->spent || x->sends > 0) {
			if (x->fresh_done) {
				x->resend_refused = true;
				return CURL_PREREQFUNC_ABORT;
			}
			x->fresh = true;
			return CURL_PREREQFUNC_ABORT;
		}
	}
	x->sends++;
	return CURL_PREREQFUNC_OK;
}

/* curl asks to watch a socket (CURLMOPT_SOCKETFUNCTION). */
static int watch_socket(CURL *e, curl_socket_t fd, int what, void *userp,
			void *socketp)
{
	struct fg_curlx *xs = userp;
	(void)e;
	(void)socketp;
	if (fd < 0)
		return 0;
	struct sock *sk = sock_of(xs, fd);
	if (what == CURL_POLL_REMOVE) {
		if (sk && !sk->conn) {
			sock_forget(xs, fd);
			return 0;
		}
		/* kept registered while the connection idles: see struct
		 * sock; a write interest is of no use to an idle socket */
		if (sk) {
			sk->curl = false;
			if (sk->added && (sk->mask & EV_WRITE))
				sock_unregister(sk);
		}
		return 0;
	}
	if (!sk && !(sk = sock_new(xs, fd)))
		return -1;
	sk->curl = true;
	short mask = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) |
			     ((what & CURL_POLL_OUT) ? EV_WRITE : 0));
	if (sk->added && sk->mask == mask)
		return 0;
	sock_unregister(sk);
	event_assign(&sk->ev, xs->base, fd, EV_PERSIST | mask,
		     on_socket_event, xs);
	sk->mask = mask;
	sk->added = event_add(&sk->ev, NULL) == 0;
	return 0;
}

/* curl opens a connection's socket (CURLOPT_OPENSOCKETFUNCTION): marked,
 * since only such a socket is closed through close_socket(). */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose,
				 struct curl_sockaddr *a)
{
	struct fg_curlx *xs = clientp;
	(void)purpose;
	curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
	if (fd == CURL_SOCKET_BAD)
		return fd;
	sock_forget(xs, fd);   /* (none is left; never trust it) */
	struct sock *sk = sock_new(xs, fd);
	if (!sk) {
		close(fd);
		return CURL_SOCKET_BAD;
	}
	sk->conn = true;
	sk->cnext = xs->conns;
	if (xs->conns)
		xs->conns->cprev = sk;
	xs->conns = sk;
	return fd;
}

/* curl closes a connection's socket (CURLOPT_CLOSESOCKETFUNCTION): its
 * registration goes first. */
static int close_socket(void *clientp, curl_socket_t fd)
{
	struct fg_curlx *xs = clientp;
	sock_forget(xs, fd);
	return close(fd);
}

/* curl asks for a timeout (CURLMOPT_TIMERFUNCTION); it is run from the
 * loop, never from inside this callback. */
static int set_curl_timer(CURLM *multi, long ms, void *userp)
{
	struct fg_curlx *xs = userp;
	(void)multi;
	if (ms < 0) {
		evtimer_del(xs->timer);
		return 0;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(xs->timer, &tv);
	return 0;
}

/* What every upstream request of a transfer's handle is: its URL (the
 * path exactly as given), its headers, the transfer's callbacks, HTTP/1.1
 * over http or https only, and an https upstream verified (peer and host
 * name, against upstream-ca or the system's CAs) with our client
 * certificate when one is set. Every handle has the same TLS settings, so
 * curl reuses its upstream connections across them. */
static void easy_setup(CURL *e, struct cx *x, const char *url,
		       const struct fg_config *cfg)
{
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->req_headers);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	/* every upstream socket is closed through us (struct sock); xs
	 * outlives the multi handle and so every connection */
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x->xs);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
	curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, x->xs);
	curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
	curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->upstream_connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	/* The upstream is reached directly, as nginx's proxy_pass does: a
	 * proxy named in the environment (http_proxy, all_proxy, ...) would
	 * carry checked writes through a third party the operator never
	 * configured. "*" also spares curl five getenv() per request. */
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	x->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	/* curl's defaults, said here so that no later line can quietly turn
	 * them off */
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (cfg->upstream_ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, cfg->upstream_ca);
#if LIBCURL_VERSION_NUM >= 0x075700
	/* Read for every new upstream connection (not kept for curl's day),
	 * so a replaced upstream-ca counts from the next one on; open
	 * connections go on under the CA they were verified by. */
	curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif
	if (cfg->upstream_cert) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->upstream_cert);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->upstream_key);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

/* x and its handle go (curl's handle back to the pool). */
static void cx_free(struct cx *x)
{
	struct fg_curlx *xs = x->xs;
	if (x->added)
		curl_multi_remove_handle(xs->multi, x->easy);
	curl_slist_free_all(x->req_headers);
	easy_put(xs, x->easy);
	free(x->ch);
	free(x->hdrs);
	free(x);
}

/* The request's headers as curl's list: "Name: value", or "Name:" for an
 * empty value (which stops a header of curl's own). */
static bool header_list(struct fg_curlx *xs, struct cx *x,
			const struct fg_up_request *rq)
{
	for (size_t i = 0; i < rq->nheaders; i++) {
		const struct fg_up_header *h = &rq->headers[i];
		size_t n = h->name_len + 2 + h->value_len + 1;
		if (!fg_block_room(&xs->line, &xs->line_cap, 0, n, 256))
			return false;
		char *o = xs->line;
		memcpy(o, h->name, h->name_len);
		o += h->name_len;
		*o++ = ':';
		if (h->value_len) {
			*o++ = ' ';
			memcpy(o, h->value, h->value_len);
			o += h->value_len;
		}
		*o = '\0';
		struct curl_slist *l = curl_slist_append(x->req_headers, xs->line);
		if (!l)
			return false;
		x->req_headers = l;
	}
	return true;
}

/* An easy handle set up for the request; NULL without memory. */
static void *cx_prepare(void *self, const struct fg_up_request *rq,
			const struct fg_up_sink *sink, void *arg)
{
	struct fg_curlx *xs = self;
	struct cx *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->xs = xs;
	x->sink = *sink;
	x->arg = arg;
	x->head = rq->is_head;
	x->has_body = rq->body != FG_UP_BODY_NONE;
	x->chunked = rq->body == FG_UP_BODY_CHUNKED;
	x->length = rq->length;
	x->retryable = rq->retryable;
	x->clength = -1;
	if (!header_list(xs, x, rq) || !(x->easy = easy_get(xs))) {
		cx_free(x);
		return NULL;
	}
	CURL *e = x->easy;
	easy_setup(e, x, rq->url, xs->cfg);
	if (x->head)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	/* Always explicit, and copied by curl: a body never turns the method
	 * into a PUT, and nothing shortens it. */
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
	if (rq->fixed_body) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->fixed_body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)rq->fixed_len);
	}
	if (x->has_body) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 65536L);
		/* the length read is the length sent; a chunked body stays
		 * chunked (curl frames an upload of unknown size that way) */
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 x->chunked ? (curl_off_t)-1 : (curl_off_t)x->length);
	}
	return x;
}

static bool cx_begin(void *ex)
{
	struct cx *x = ex;
	x->added = curl_multi_add_handle(x->xs->multi, x->easy) == CURLM_OK;
	return x->added;
}

static void cx_pause(struct cx *x)
{
	curl_easy_pause(x->easy, pause_bits(x));
}

static void cx_resume_recv(void *ex)
{
	struct cx *x = ex;
	x->write_paused = false;
	cx_pause(x);
}

static void cx_resume_send(void *ex)
{
	struct cx *x = ex;
	x->read_paused = false;
	cx_pause(x);
}

/* A request without a body is written whole as soon as curl begins it;
 * one with a body has gone once curl was handed its last byte. */
static bool cx_sent(const void *ex)
{
	const struct cx *x = ex;
	if (x->has_body)
		return x->upload_done;
	curl_off_t pre = 0;
	curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
	return pre > 0;
}

static void cx_cancel(void *ex)
{
	cx_free(ex);
}

/* Transfers that curl reports done. */
static void read_done(struct fg_curlx *xs)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(xs->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct cx *x;
		CURLcode code = m->data.result;
		CURL *e = m->easy_handle;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
		if (code == CURLE_ABORTED_BY_CALLBACK && x->fresh) {
			/* refused a spent connection before any byte went: the
			 * same request, on a new connection, once */
			x->fresh = false;
			x->fresh_done = true;
			x->connects = 0; /* (curl counts afresh) */
			curl_multi_remove_handle(xs->multi, e);
			curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
			if (curl_multi_add_handle(xs->multi, e) == CURLM_OK)
				continue;
			x->added = false;
			code = CURLE_FAILED_INIT;
		}
		if (x->unframed) {
			long lport = 0, pport = 0;
			char *pip = NULL;
			curl_easy_getinfo(e, CURLINFO_LOCAL_PORT, &lport);
			curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &pport);
			curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &pip);
			int fd = sock_named(xs, lport, pip, pport);
			if (fd >= 0)
				sock_spend(xs, fd);
		}
		struct fg_up_outcome out = curl_outcome(xs, x, code);
		void (*end)(void *, struct fg_up_outcome) = x->sink.on_end;
		void *arg = x->arg;
		cx_free(x);
		end(arg, out);
	}
}

static void cx_settle(void *self)
{
	read_done(self);
}

const struct fg_up_backend fg_curlx_backend = {
	.prepare = cx_prepare,
	.begin = cx_begin,
	.resume_recv = cx_resume_recv,
	.resume_send = cx_resume_send,
	.sent = cx_sent,
	.cancel = cx_cancel,
	.settle = cx_settle,
};

struct fg_curlx *fg_curlx_create(struct event_base *base,
				 const struct fg_config *cfg)
{
	struct fg_curlx *xs = calloc(1, sizeof(*xs));
	if (!xs)
		return NULL;
	xs->base = base;
	xs->cfg = cfg;
	xs->timer = evtimer_new(base, on_curl_timer, xs);
	xs->multi = curl_multi_init();
	if (!xs->timer || !xs->multi) {
		if (xs->multi)
			curl_multi_cleanup(xs->multi);
		if (xs->timer)
			event_free(xs->timer);
		free(xs);
		return NULL;
	}
	curl_multi_setopt(xs->multi, CURLMOPT_MAXCONNECTS, 256L);
	curl_multi_setopt(xs->multi, CURLMOPT_SOCKETFUNCTION, watch_socket);
	curl_multi_setopt(xs->multi, CURLMOPT_SOCKETDATA, xs);
	curl_multi_setopt(xs->multi, CURLMOPT_TIMERFUNCTION, set_curl_timer);
	curl_multi_setopt(xs->multi, CURLMOPT_TIMERDATA, xs);
	return xs;
}

void fg_curlx_destroy(struct fg_curlx *xs)
{
	if (!xs)
		return;
	while (xs->npool > 0)
		curl_easy_cleanup(xs->pool[--xs->npool]);
	curl_multi_cleanup(xs->multi);
	for (int fd = 0; fd < xs->nsocks; fd++) {
		if (xs->socks[fd]) {
			sock_unregister(xs->socks[fd]);
			free(xs->socks[fd]);
		}
	}
	free(xs->socks);
	free(xs->line);
	event_free(xs->timer);
	free(xs);
}
