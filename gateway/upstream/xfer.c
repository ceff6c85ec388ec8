/*
 * xfer.c - streaming requests to the upstream and answers back (xfer.h).
 *
 * Each loop drives its own libcurl multi handle on its libevent base
 * (curl_multi_socket_action): a transfer lives on the loop that accepted
 * its request, from the request head to the last byte of the answer, and
 * everything here runs on that loop's thread: no lock. Bodies stream both
 * ways through one bounded buffer each (BUF bytes): when a buffer is full
 * the producer stops (the client connection is suspended, or curl is
 * paused) and the consumer restarts it when it has drained. So memory per
 * transfer is bounded whatever the body size, and a slow side slows the
 * other down instead of filling memory.
 *
 * Invariants:
 * - curl is never called back into from its own callbacks: what the
 *   libmicrohttpd side wants of curl (start, unpause, abort) is posted as
 *   a command and run on the loop's next turn, in the order posted.
 * - A connection is resumed exactly when it was suspended, and every
 *   resume wakes the daemon (the host's resume()).
 * - The send gate (struct fg_xfer_hooks) is asked inside the client's
 *   read callback itself (curl's, or the own client's fill()), before
 *   each piece of the body is handed over, and before the transfer is
 *   handed to its client: a closed gate hands it no byte more, aborts a
 *   transfer still sending (its connection closed, so the upstream never
 *   completes a truncated request) and never begins one not begun. A
 *   client that leaves mid-body aborts the upstream request the same
 *   way: a truncated body never completes.
 * - While a request's body is incomplete and its connection waits on its
 *   socket, the loop watches that socket for the client's hang-up itself
 *   (libmicrohttpd can miss it, the host's reread()), so a client that
 *   leaves mid-body ends the upstream request at once, not at the
 *   connection's timeout.
 * - The done hook is called once, when the transfer ends, whether it was
 *   begun or not; nothing of the hooks is called after release.
 * - A write is sent once at most, whichever client carries it; a read
 *   (a safe method, no body) at most twice, the second time on a new
 *   connection. libcurl sends any request again on a new connection when
 *   a reused one closed before answering; every send it begins passes
 *   its pre-request hook (on_prereq()), which counts them and refuses the
 *   one too many before a byte of it goes.
 * - An answer reaches only its request: a libcurl connection is reused
 *   only when it said nothing since its last answer, and that answer
 *   ended where its framing said. An answer to HEAD, a 1xx, 204 or 304
 *   that announced a body (curl does not read it, and would hand it to
 *   the next request), and an idle connection that spoke, mark its socket
 *   spent (struct sock) and shut it down, so curl drops it; the
 *   pre-request hook also peeks at a reused socket, and a request that
 *   meets a spent one is begun again, before any byte went, on a new
 *   connection. (curl itself closes a connection after excess bytes.)
 *
 * A transfer is reference counted (a plain count: one thread); its
 * holders are the request (fg_xfer_create() to fg_xfer_close()), the loop
 * while it is started and not ended, the command queue while it is
 * queued, the libmicrohttpd response streaming its answer, and an owner's
 * calls in flight (fg_xfer_hold()).
 */
#include <errno.h>
#include <stdio.h>
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

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "base/record.h"
#include "base/recycle.h"
#include "base/redirect.h"
#include "base/text.h"
#include "base/writeset.h"
#include "proc/metrics.h"
#include "upstream/backend.h"
#include "upstream/h1client.h"
#include "upstream/headers.h"
#include "upstream/xfer.h"

/* Bytes buffered per direction. Below glibc's mmap threshold, so that a
 * transfer's buffers come from the heap, not from an mmap per request. */
#define BUF (64 * 1024)
#define EASY_POOL 64
/* Idle buffers kept per loop (BUF each): a 64 KiB malloc() per buffer
 * made glibc consolidate its fast bins on every request. */
#define BUF_POOL 32
#define HEADERS_MAX 256
/* The largest body of known length the gateway's own client carries
 * (larger ones, and chunked ones, go through curl): one buffer's worth,
 * so that it is in hand, whole, as soon as its client sent it. */
#define H1_BODY_MAX BUF

enum { CMD_START = 1, CMD_UNPAUSE_READ = 2, CMD_UNPAUSE_WRITE = 4, CMD_ABORT = 8 };

/* An answer header: where its name and value start in the transfer's
 * header block (hb), each NUL-ended. Offsets, not pointers: the block
 * moves as it grows. */
struct hdr {
	size_t name;
	size_t value;
};

struct fg_xfer {
	struct fg_xfers *xs;
	int refs;                     /* holders: the request, the loop while
					 started, the command queue while
					 queued, the response, calls in flight
					 (fg_xfer_hold()) */
	struct MHD_Connection *conn;
	struct fg_xfer_hooks hooks;   /* none: all NULL */
	bool head;                    /* HEAD: no response body follows */
	bool kept;                    /* the gateway's own question: its answer
					 (the first BUF bytes) is kept, never
					 sent on */
	bool chunked;                 /* the request body's framing: chunked, */
	uint64_t body_length;         /* else exactly this many bytes */
	bool has_body;

	/* the request body */
	char *rq;
	size_t rq_len;
	bool req_done, want_data, upload_suspended;
	bool upload_done;             /* curl was handed the body's last byte */
	uint64_t body_sent;
	uint64_t body_fed;            /* bytes taken from the client so far */

	/* the answer */
	int status;
	struct hdr *hdrs;             /* grows to HEADERS_MAX */
	int nhdrs, caphdrs;
	bool too_many_headers;        /* (or one that could not be kept) */
	/* the answer's header names and values, one block for all (two
	 * allocations per header were a tenth of a GET's instructions) */
	char *hb;
	size_t hb_len, hb_cap;
	bool has_connection;
	size_t connection;            /* the upstream's Connection header, in hb */
	int64_t content_length;
	/* the head curl is reading: its status, its names and values in
	 * one block (ch), where each is (chdrs, offsets until handed on),
	 * and whether it had a Transfer-Encoding or a Content-Length */
	int cstatus;
	char *ch;
	size_t ch_len, ch_cap;
	struct fg_up_header *chdrs;
	size_t nchdrs, capchdrs;
	bool ccut, cte;
	int64_t clength;
	bool unframed;                /* a body the answer did not carry could
					 still come on its connection: a HEAD's
					 answer, a 1xx, 204 or 304 that announced
					 one (curl's connection is then spent) */
	bool headers_done, waiting_headers, done, download_suspended, mhd_gone;
	bool kept_wait;               /* suspended until the kept answer ends */
	bool write_wants_room;
	struct fg_up_outcome result;
	char *rs;
	size_t rs_len;
	uint64_t resp_sent;           /* body bytes handed to libmicrohttpd */
	int64_t up_ns;                /* the transfer's duration, once ended */

	struct event hup;             /* the client's hang-up, mid-body */
	bool hup_set, hup_on;
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE]; /* curl's words for a failure */
	struct curl_slist *req_headers;
	bool added, read_paused, write_paused;
	uint64_t started;
	uint64_t started_ns;
	uint64_t rx_at;               /* when the response last gave bytes, or
					 the client last held its reading up
					 (a full buffer): check_heads() */
	struct fg_xfer *anext, *aprev;  /* active list */

	/* a request the gateway's own client sends (h1client.h) instead
	 * of curl: its request bytes until started, its exchange while
	 * running */
	bool h1, h1_sent;
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
	char *h1_req;
	size_t h1_req_len;
	struct fg_h1x *h1x;

	unsigned pending;             /* commands posted */
	bool queued;
	struct fg_xfer *qnext;
};

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

struct fg_xfers {
	struct fg_xfers_host host;
	CURLM *multi;
	CURL *pool[EASY_POOL];        /* reset handles for reuse */
	int npool;
	struct fg_xfer *queue, **queue_tail; /* commands, FIFO */
	struct event *cmd_ev;         /* runs the commands */
	struct event *curl_timer;     /* curl's own timeout */
	struct event *head_timer;     /* the bound on the response heads */
	struct fg_xfer *active;       /* handed to curl */
	struct sock **socks;          /* by descriptor; NULL: none */
	int nsocks;
	struct sock *conns;           /* the connections' sockets */
	char *bufs[BUF_POOL];         /* idle BUF-byte buffers, owned here */
	int nbufs;
	/* the gateway's own client, and the upstream as it sees it (worked
	 * out at creation: settings never change while running) */
	struct fg_h1c *h1c;
	bool h1_ok;                   /* plain http to an IP address */
	struct sockaddr_storage h1_sa;
	socklen_t h1_salen;
	char h1_host[FG_HOST_MAX + 16]; /* the Host header curl would send */
	/* a request's header lines while fg_xfer_start() makes it, each
	 * NUL-ended: the loop's, reused (a list node and a copy per line
	 * were a tenth of a GET's instructions); curl gets them as a list */
	char *rh;
	size_t rh_len, rh_cap;
	struct fg_recycle xfers;      /* freed transfers, made again */
};

#define now_ms fg_clock_ms

/* ---- references and commands ------------------------------------------ */

static void hup_unwatch(struct fg_xfer *x);
static int sock_named(struct fg_xfers *xs, long lport, const char *pip,
		      long pport);
static void sock_spend(struct fg_xfers *xs, int fd);

/* A BUF-byte buffer, owned by the caller until buf_put(). */
static char *buf_get(struct fg_xfers *xs)
{
	return xs->nbufs > 0 ? xs->bufs[--xs->nbufs] : malloc(BUF);
}

static void buf_put(struct fg_xfers *xs, char *b)
{
	if (!b)
		return;
	if (xs->nbufs < BUF_POOL)
		xs->bufs[xs->nbufs++] = b;
	else
		free(b);
}

static void xfer_free(struct fg_xfer *x)
{
	hup_unwatch(x);
	if (x->hooks.freed)
		x->hooks.freed(x->hooks.arg);
	free(x->hdrs);
	free(x->hb);
	free(x->ch);
	free(x->chdrs);
	buf_put(x->xs, x->rq);
	buf_put(x->xs, x->rs);
	fg_recycle_put(&x->xs->xfers, x);
	fg_metrics_gauge_add(FG_GAUGE_TRANSFERS, -1);
}

struct fg_xfer *fg_xfer_create(struct fg_xfers *xs, struct MHD_Connection *c)
{
	struct fg_xfer *x = fg_recycle_get(&xs->xfers, sizeof(*x));
	if (!x)
		return NULL;
	fg_metrics_gauge_add(FG_GAUGE_TRANSFERS, 1);
	x->up_ns = -1;
	x->xs = xs;
	x->refs = 1; /* the request's */
	x->conn = c;
	x->content_length = -1;
	return x;
}

void fg_xfer_hold(struct fg_xfer *x)
{
	x->refs++;
}

void fg_xfer_put(struct fg_xfer *x)
{
	if (--x->refs == 0)
		xfer_free(x);
}

/* Posts a command for the loop's next turn; the queue holds a reference. */
static void post(struct fg_xfer *x, unsigned cmd)
{
	struct fg_xfers *xs = x->xs;
	x->pending |= cmd;
	if (!x->queued) {
		x->queued = true;
		x->qnext = NULL;
		*xs->queue_tail = x;
		xs->queue_tail = &x->qnext;
		x->refs++;
	}
	event_active(xs->cmd_ev, EV_READ, 0);
}

static void resume(struct fg_xfer *x, bool *flag)
{
	if (*flag) {
		*flag = false;
		x->xs->host.resume(x->xs->host.ctx, x->conn);
	}
}

/* ---- a client that hangs up mid-body ---------------------------------- */

static void hup_unwatch(struct fg_xfer *x)
{
	if (x->hup_on) {
		event_del(&x->hup);
		x->hup_on = false;
	}
}

/* Level-triggered: fires while the client has hung up. Each reread makes
 * the daemon read at least one byte or the end, so it ends; while the
 * connection is suspended (the buffer is full) the watch is off, and the
 * body handler turns it on again when it hands the socket back. */
static void on_client_hup(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct fg_xfer *x = arg;
	if (!x->upload_suspended && !x->req_done && !x->mhd_gone)
		x->xs->host.reread(x->xs->host.ctx, x->conn);
	else
		hup_unwatch(x);
}

/* From the body handler, or when the transfer starts: the connection is
 * running and waits on its socket for more of the body. */
static void hup_watch(struct fg_xfer *x)
{
	if (x->hup_on)
		return;
	if (!x->hup_set) {
		if (!(event_base_get_features(x->xs->host.base) &
		      EV_FEATURE_EARLY_CLOSE))
			return; /* the connection's timeout still ends it */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || event_assign(&x->hup, x->xs->host.base,
					ci->connect_fd, EV_CLOSED | EV_PERSIST,
					on_client_hup, x) != 0)
			return; /* the connection's timeout still ends it */
		x->hup_set = true;
	}
	x->hup_on = event_add(&x->hup, NULL) == 0;
}

/* ---- curl callbacks ----------------------------------------------------- */

static bool gate_open(struct fg_xfer *x)
{
	return !x->hooks.may_send || x->hooks.may_send(x->hooks.arg);
}

/* The body's next bytes for the upstream, up to max, for either client:
 * how many, 0 at its end, or FG_H1X_FILL_PAUSE (none yet: the feed
 * unpauses) or FG_H1X_FILL_ABORT. */
static size_t take_body(struct fg_xfer *x, char *buf, size_t max)
{
	/* the gate closed, or the client left mid-body: not one more byte,
	 * and the upstream request is aborted */
	if (!gate_open(x) || (x->mhd_gone && !x->req_done))
		return FG_H1X_FILL_ABORT;
	if (x->rq_len == 0) {
		if (x->req_done) {
			/* a body that ended before its length never completes */
			bool short_body = !x->chunked && x->body_sent != x->body_length;
			x->upload_done = !short_body;
			return short_body ? FG_H1X_FILL_ABORT : 0;
		}
		x->want_data = true;
		x->read_paused = true;
		return FG_H1X_FILL_PAUSE;
	}
	size_t n = x->rq_len < max ? x->rq_len : max;
	memcpy(buf, x->rq, n);
	memmove(x->rq, x->rq + n, x->rq_len - n);
	x->rq_len -= n;
	x->body_sent += n;
	/* curl asks no more once it has a known length's last byte */
	if (!x->chunked && x->body_sent == x->body_length)
		x->upload_done = true;
	resume(x, &x->upload_suspended);
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	size_t n = take_body(ud, buf, size * nitems);
	if (n == FG_H1X_FILL_ABORT)
		return CURL_READFUNC_ABORT;
	if (n == FG_H1X_FILL_PAUSE)
		return CURL_READFUNC_PAUSE;
	return n;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct fg_xfer *x = ud;
	size_t n = size * nmemb;
	if (x->mhd_gone)
		return 0; /* the client left: abort */
	if (x->kept && BUF - x->rs_len < n) {
		n = BUF - x->rs_len; /* enough to judge by; the rest is dropped */
		memcpy(x->rs + x->rs_len, ptr, n);
		x->rs_len += n;
		return size * nmemb;
	}
	if (BUF - x->rs_len < n) {
		x->write_wants_room = true;
		x->write_paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	memcpy(x->rs + x->rs_len, ptr, n);
	x->rs_len += n;
	x->rx_at = now_ms();
	resume(x, &x->download_suspended);
	return n;
}

static void forget_headers(struct fg_xfer *x)
{
	x->nhdrs = 0;
	x->hb_len = 0;
	x->too_many_headers = false;
	x->has_connection = false;
	x->content_length = -1;
}

/* A header value's number, as strtoll() reads it from a NUL-ended copy
 * (a value is not NUL-ended). */
static int64_t value_number(const char *v, size_t vl)
{
	char small[64];
	char *b = vl < sizeof(small) ? small : malloc(vl + 1);
	if (!b)
		return -1;
	memcpy(b, v, vl);
	b[vl] = '\0';
	int64_t n = strtoll(b, NULL, 10);
	if (b != small)
		free(b);
	return n;
}

/* Makes room for n more bytes in a block of header lines (*buf, *cap
 * bytes of which len are used), doubling from `first`. False without
 * memory (the block is as it was). */
static bool room(char **buf, size_t *cap, size_t len, size_t n, size_t first)
{
	if (n <= *cap - len)
		return true;
	size_t c = *cap ? *cap : first;
	while (c - len < n)
		c *= 2;
	char *b = realloc(*buf, c);
	if (!b)
		return false;
	*buf = b;
	*cap = c;
	return true;
}

/* Copies P (N bytes) and a NUL into the header block; sets *at to where
 * it begins. False without memory. */
static bool hb_put(struct fg_xfer *x, const char *p, size_t n, size_t *at)
{
	if (!room(&x->hb, &x->hb_cap, x->hb_len, n + 1, 512))
		return false;
	*at = x->hb_len;
	memcpy(x->hb + x->hb_len, p, n);
	x->hb[x->hb_len + n] = '\0';
	x->hb_len += n + 1;
	return true;
}

static const char *resp_connection(const struct fg_xfer *x)
{
	return x->has_connection ? x->hb + x->connection : NULL;
}

static void keep_header(struct fg_xfer *x, const char *name, size_t nl,
			const char *v, size_t vl)
{
	if (nl == 14 && strncasecmp(name, "Content-Length", 14) == 0)
		x->content_length = value_number(v, vl);
	if (nl == 10 && strncasecmp(name, "Connection", 10) == 0) {
		if (hb_put(x, v, vl, &x->connection))
			x->has_connection = true;
		else
			x->too_many_headers = true;
	}
	if (fg_hdr_hop_by_hop(name, nl))
		return;
	if (x->nhdrs == x->caphdrs && x->caphdrs < HEADERS_MAX) {
		int cap = x->caphdrs ? x->caphdrs * 2 : 16;
		struct hdr *h = realloc(x->hdrs, (size_t)cap * sizeof(*h));
		if (h) {
			x->hdrs = h;
			x->caphdrs = cap;
		}
	}
	size_t at_name, at_value;
	if (x->nhdrs == x->caphdrs || !hb_put(x, name, nl, &at_name) ||
	    !hb_put(x, v, vl, &at_value)) {
		x->too_many_headers = true;
		return;
	}
	x->hdrs[x->nhdrs].name = at_name;
	x->hdrs[x->nhdrs].value = at_value;
	x->nhdrs++;
}

/* The final head of the answer, from either client: its status and its
 * headers (`cut`: more came than a client hands on). */
static void take_head(struct fg_xfer *x, int status,
		      const struct fg_up_header *h, size_t n, bool cut)
{
	x->status = status;
	forget_headers(x);
	for (size_t i = 0; i < n; i++) {
		const char *v = h[i].value, *end = v + h[i].value_len;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		keep_header(x, h[i].name, h[i].name_len, v, (size_t)(end - v));
	}
	if (cut)
		x->too_many_headers = true;
	x->headers_done = true;
	x->rx_at = now_ms();
	resume(x, &x->waiting_headers);
}

/* A header line of the head curl reads, kept in x->ch until the head
 * ends. */
static void curl_header(struct fg_xfer *x, const char *name, size_t nl,
			const char *v, size_t vl)
{
	if (nl == 14 && strncasecmp(name, "Content-Length", 14) == 0)
		x->clength = value_number(v, vl);
	if (nl == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0)
		x->cte = true;
	if (x->ccut)
		return;
	if (x->nchdrs == FG_UP_HEADERS_MAX) {
		x->ccut = true;
		return;
	}
	if (x->nchdrs == x->capchdrs) {
		size_t cap = x->capchdrs ? x->capchdrs * 2 : 16;
		struct fg_up_header *a = realloc(x->chdrs, cap * sizeof(*a));
		if (!a) {
			x->ccut = true; /* (refused as one that could not be kept) */
			return;
		}
		x->chdrs = a;
		x->capchdrs = cap;
	}
	if (!room(&x->ch, &x->ch_cap, x->ch_len, nl + vl, 512)) {
		x->ccut = true;
		return;
	}
	/* (offsets until the head ends: the block moves as it grows) */
	struct fg_up_header *e = &x->chdrs[x->nchdrs++];
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
	struct fg_xfer *x = ud;
	size_t len = size * nitems, n = len;
	while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n'))
		n--;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* a new status line: forget an interim (1xx) response */
		const char *sp = memchr(buf, ' ', n);
		x->cstatus = sp ? atoi(sp + 1) : 502;
		x->ch_len = 0;
		x->nchdrs = 0;
		x->ccut = false;
		x->cte = false;
		x->clength = -1;
	} else if (n == 0) {
		/* a head without a body that announced one (any head of a
		 * HEAD's answer): what curl does not read of it could still
		 * come, and be read as the next request's answer */
		bool bodiless = x->head || x->cstatus < 200 || x->cstatus == 204 ||
				x->cstatus == 304;
		if (x->head || (bodiless && (x->cte || x->clength > 0)))
			x->unframed = true;
		if (x->cstatus >= 200) {
			for (size_t i = 0; i < x->nchdrs; i++) {
				x->chdrs[i].name = x->ch + (uintptr_t)x->chdrs[i].name;
				x->chdrs[i].value = x->ch + (uintptr_t)x->chdrs[i].value;
			}
			take_head(x, x->cstatus, x->chdrs, x->nchdrs, x->ccut);
			x->nchdrs = 0;
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

static int pause_bits(const struct fg_xfer *x)
{
	return (x->read_paused ? CURLPAUSE_SEND : 0) |
	       (x->write_paused ? CURLPAUSE_RECV : 0);
}

/* curl handles are reused: a reset handle keeps its allocations. */
static CURL *easy_get(struct fg_xfers *xs)
{
	if (xs->npool > 0)
		return xs->pool[--xs->npool];
	return curl_easy_init();
}

static void easy_put(struct fg_xfers *xs, CURL *e)
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
static struct fg_up_outcome curl_outcome(struct fg_xfers *xs,
					 const struct fg_xfer *x, CURLcode code)
{
	if (tls_failure(code))
		fg_log_warn("upstream %s:%s: TLS failed: %s",
			    xs->host.cfg->up.host, xs->host.cfg->up.port,
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

/* The transfer's own ends: a bound ran out or the gate closed; the
 * client left or the loop stops; it could not be handed to its client. */
static const struct fg_up_outcome TIMED_OUT = { FG_UP_TIMEOUT, NULL };
static const struct fg_up_outcome ABORTED = {
	FG_UP_ABORTED, "Operation was aborted by an application callback" };
static const struct fg_up_outcome NOT_BEGUN = {
	FG_UP_NO_MEMORY, "Failed initialization" };

/* The transfer ended (done, failed, aborted, or never begun): its
 * connection is resumed for its answer, its owner told. */
static void ended(struct fg_xfers *xs, struct fg_xfer *x,
		  struct fg_up_outcome out)
{
	bool began = x->added;
	if (x->added) {
		uint64_t ns = fg_rec_now_ns() - x->started_ns;
		int status = x->headers_done ? x->status : 0;
		x->up_ns = (int64_t)ns;
		fg_metrics_upstream(status, ns);
		if (x->h1) {
			if (x->h1x)
				fg_h1x_cancel(x->h1x);
			x->h1x = NULL;
		} else {
			curl_multi_remove_handle(xs->multi, x->easy);
		}
		x->added = false;
		if (x->aprev)
			x->aprev->anext = x->anext;
		else
			xs->active = x->anext;
		if (x->anext)
			x->anext->aprev = x->aprev;
	}
	x->done = true;
	x->result = out;
	resume(x, &x->waiting_headers);
	resume(x, &x->download_suspended);
	resume(x, &x->upload_suspended);
	resume(x, &x->kept_wait);
	if (x->hooks.done)
		x->hooks.done(x->hooks.arg, out.end == FG_UP_OK, began);
	curl_slist_free_all(x->req_headers);
	x->req_headers = NULL;
	free(x->h1_req);
	x->h1_req = NULL;
	easy_put(xs, x->easy);
	x->easy = NULL;
	fg_xfer_put(x); /* the loop's reference */
}

/* ---- the gateway's own client's side -------------------------------------- */

static bool h1_head(void *arg, int status, const struct fg_up_header *h,
		    size_t n, bool cut)
{
	take_head(arg, status, h, n, cut);
	return true;
}

static size_t h1_room(void *arg)
{
	struct fg_xfer *x = arg;
	if (x->mhd_gone)
		return BUF; /* body() refuses: the exchange ends */
	size_t room = BUF - x->rs_len;
	if (room == 0)
		x->write_wants_room = true; /* on_content() unpauses */
	return room;
}

static bool h1_body(void *arg, const char *p, size_t n)
{
	struct fg_xfer *x = arg;
	if (x->mhd_gone)
		return false; /* the client left: abort */
	memcpy(x->rs + x->rs_len, p, n); /* (n <= h1_room()) */
	x->rs_len += n;
	x->rx_at = now_ms();
	resume(x, &x->download_suspended);
	return true;
}

static size_t h1_fill(void *arg, char *buf, size_t max)
{
	size_t n = take_body(arg, buf, max);
	/* (a known length: the client asks for no byte past it, so an end
	 * here is a body cut short) */
	return n == 0 ? FG_H1X_FILL_ABORT : n;
}

static void h1_sent(void *arg)
{
	struct fg_xfer *x = arg;
	x->h1_sent = true;
}

static void h1_end(void *arg, struct fg_up_outcome how)
{
	struct fg_xfer *x = arg;
	x->h1x = NULL; /* (gone) */
	ended(x->xs, x, how);
}

static const struct fg_h1x_hooks h1_hooks = {
	.head = h1_head,
	.room = h1_room,
	.body = h1_body,
	.fill = h1_fill,
	.sent = h1_sent,
	.end = h1_end,
};

/* Hands x's request to the gateway's own client; false: nothing began. */
static bool h1_start(struct fg_xfers *xs, struct fg_xfer *x)
{
	struct fg_h1x_req req = {
		.head = x->h1_req,
		.len = x->h1_req_len,
		.body = x->has_body ? (size_t)x->body_length : 0,
		.is_head = x->head,
		.retryable = x->retryable,
	};
	x->h1_req = NULL; /* the client's now */
	x->h1x = fg_h1c_start(xs->h1c, (const struct sockaddr *)&xs->h1_sa,
			      xs->h1_salen, xs->host.cfg->upstream_connect_timeout_ms,
			      &req, &h1_hooks, x);
	return x->h1x != NULL;
}

static void run_commands(struct fg_xfers *xs)
{
	struct fg_xfer *list = xs->queue;
	xs->queue = NULL;
	xs->queue_tail = &xs->queue;
	while (list) {
		struct fg_xfer *x = list;
		list = x->qnext;
		unsigned cmd = x->pending;
		x->pending = 0;
		x->queued = false;

		if ((cmd & CMD_START) && (x->easy || x->h1_req) && !x->added) {
			/* a transfer whose gate closed meanwhile is not begun:
			 * a request without a body would go out whole */
			if (!gate_open(x)) {
				ended(xs, x, TIMED_OUT);
			} else if (x->h1 ? h1_start(xs, x)
				   : curl_multi_add_handle(xs->multi, x->easy) == CURLM_OK) {
				x->added = true;
				/* the body is still coming and the connection waits
				 * on its socket for it (not suspended, not gone) */
				if (x->has_body && !x->req_done &&
				    !x->upload_suspended && !x->mhd_gone)
					hup_watch(x);
				x->started = now_ms();
				x->started_ns = fg_rec_now_ns();
				x->aprev = NULL;
				x->anext = xs->active;
				if (xs->active)
					xs->active->aprev = x;
				xs->active = x;
			} else {
				ended(xs, x, NOT_BEGUN);
			}
		}
		if ((cmd & CMD_ABORT) && x->added)
			ended(xs, x, ABORTED);
		if (x->added && x->h1) {
			if ((cmd & CMD_UNPAUSE_WRITE) && x->h1x)
				fg_h1x_resume(x->h1x);
			if ((cmd & CMD_UNPAUSE_READ) && x->h1x)
				fg_h1x_resume_send(x->h1x);
		} else if (x->added && (cmd & (CMD_UNPAUSE_READ | CMD_UNPAUSE_WRITE))) {
			if (cmd & CMD_UNPAUSE_READ)
				x->read_paused = false;
			if (cmd & CMD_UNPAUSE_WRITE)
				x->write_paused = false;
			curl_easy_pause(x->easy, pause_bits(x));
		}
		fg_xfer_put(x); /* the queue's reference */
	}
}

/* The bounds on the upstream, upstream-timeout each (nginx's
 * proxy_read_timeout): a transfer whose answer's head has not come that
 * long after it started, or whose body then gave nothing for that long
 * while there was room for it, is ended. A body the client is slow to
 * take (its buffer full) is the client's wait, not the upstream's.
 * Returns the ms until the next one is due. */
static long check_heads(struct fg_xfers *xs)
{
	uint64_t now = now_ms();
	uint64_t limit = xs->host.cfg->upstream_timeout_ms;
	long next = 1000;
	struct fg_xfer *x = xs->active, *nx;
	for (; x; x = nx) {
		nx = x->anext;
		uint64_t from = x->started;
		if (x->headers_done) {
			if (x->rs_len >= BUF || x->write_paused)
				x->rx_at = now;
			from = x->rx_at;
		}
		if (now >= from + limit) {
			ended(xs, x, TIMED_OUT);
			continue;
		}
		long in = (long)(from + limit - now);
		if (in < next)
			next = in;
	}
	return next < 1 ? 1 : next;
}

/* Transfers that curl reports done. */
static void read_done(struct fg_xfers *xs)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(xs->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct fg_xfer *x;
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
		ended(xs, x, curl_outcome(xs, x, code));
	}
}

static void arm_heads(struct fg_xfers *xs)
{
	long ms = check_heads(xs);
	if (!xs->active) {
		evtimer_del(xs->head_timer);
		return;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(xs->head_timer, &tv);
}

static struct sock *sock_of(struct fg_xfers *xs, curl_socket_t fd)
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
static struct sock *sock_new(struct fg_xfers *xs, curl_socket_t fd)
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
static void sock_forget(struct fg_xfers *xs, curl_socket_t fd)
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
static int sock_named(struct fg_xfers *xs, long lport, const char *pip,
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
static void sock_spend(struct fg_xfers *xs, int fd)
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
	struct fg_xfers *xs = arg;
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
	struct fg_xfers *xs = arg;
	int running;
	(void)fd;
	(void)what;
	curl_multi_socket_action(xs->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	read_done(xs);
}

static void on_head_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	arm_heads(arg);
}

static void on_commands(evutil_socket_t fd, short what, void *arg)
{
	struct fg_xfers *xs = arg;
	(void)fd;
	(void)what;
	run_commands(xs);
	read_done(xs);
	arm_heads(xs);
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
	struct fg_xfer *x = ud;
	struct fg_xfers *xs = x->xs;
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
	struct fg_xfers *xs = userp;
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
	event_assign(&sk->ev, xs->host.base, fd, EV_PERSIST | mask,
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
	struct fg_xfers *xs = clientp;
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
	struct fg_xfers *xs = clientp;
	sock_forget(xs, fd);
	return close(fd);
}

/* curl asks for a timeout (CURLMOPT_TIMERFUNCTION); it is run from the
 * loop, never from inside this callback. */
static int set_curl_timer(CURLM *multi, long ms, void *userp)
{
	struct fg_xfers *xs = userp;
	(void)multi;
	if (ms < 0) {
		evtimer_del(xs->curl_timer);
		return 0;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(xs->curl_timer, &tv);
	return 0;
}

static bool h1_target(struct fg_xfers *xs);

struct fg_xfers *fg_xfers_create(const struct fg_xfers_host *host)
{
	struct fg_xfers *xs = calloc(1, sizeof(*xs));
	if (!xs)
		return NULL;
	xs->host = *host;
	xs->queue_tail = &xs->queue;
	xs->cmd_ev = event_new(host->base, -1, 0, on_commands, xs);
	xs->curl_timer = evtimer_new(host->base, on_curl_timer, xs);
	xs->head_timer = evtimer_new(host->base, on_head_timer, xs);
	if (!xs->cmd_ev || !xs->curl_timer || !xs->head_timer)
		goto error_events;
	xs->h1c = fg_h1c_create(host->base);
	if (!xs->h1c)
		goto error_events;
	h1_target(xs);
	xs->multi = curl_multi_init();
	if (!xs->multi)
		goto error_events;
	curl_multi_setopt(xs->multi, CURLMOPT_MAXCONNECTS, 256L);
	curl_multi_setopt(xs->multi, CURLMOPT_SOCKETFUNCTION, watch_socket);
	curl_multi_setopt(xs->multi, CURLMOPT_SOCKETDATA, xs);
	curl_multi_setopt(xs->multi, CURLMOPT_TIMERFUNCTION, set_curl_timer);
	curl_multi_setopt(xs->multi, CURLMOPT_TIMERDATA, xs);
	return xs;

error_events:
	fg_h1c_destroy(xs->h1c);
	if (xs->cmd_ev)
		event_free(xs->cmd_ev);
	if (xs->curl_timer)
		event_free(xs->curl_timer);
	if (xs->head_timer)
		event_free(xs->head_timer);
	free(xs);
	return NULL;
}

void fg_xfers_shutdown(struct fg_xfers *xs)
{
	if (!xs)
		return;
	run_commands(xs);
	while (xs->active)
		ended(xs, xs->active, ABORTED);
}

void fg_xfers_destroy(struct fg_xfers *xs)
{
	if (!xs)
		return;
	fg_xfers_shutdown(xs);
	/* commands posted while the connections closed */
	run_commands(xs);
	while (xs->npool > 0)
		curl_easy_cleanup(xs->pool[--xs->npool]);
	curl_multi_cleanup(xs->multi);
	fg_h1c_destroy(xs->h1c);
	for (int fd = 0; fd < xs->nsocks; fd++) {
		if (xs->socks[fd]) {
			sock_unregister(xs->socks[fd]);
			free(xs->socks[fd]);
		}
	}
	free(xs->socks);
	free(xs->rh);
	while (xs->nbufs > 0)
		free(xs->bufs[--xs->nbufs]);
	fg_recycle_drain(&xs->xfers);
	event_free(xs->cmd_ev);
	event_free(xs->curl_timer);
	event_free(xs->head_timer);
	free(xs);
}

/* ---- building a request ------------------------------------------------- */

struct hdr_ctx {
	struct fg_xfers *xs;
	unsigned flags;         /* FG_HDR_* */
	const char *connection; /* the Connection header: names more hop headers */
	char xff[FG_HDR_XFF_MAX]; /* every X-Forwarded-For value, in order */
	size_t xff_len;
	bool failed;
};

/* Appends the pieces of one header line, then its NUL, to xs->rh. */
static bool rh_put(struct fg_xfers *xs, const char *a, size_t an,
		   const char *b, size_t bn, const char *c, size_t cn)
{
	size_t n = an + bn + cn + 1;
	if (!room(&xs->rh, &xs->rh_cap, xs->rh_len, n, 1024))
		return false;
	char *o = xs->rh + xs->rh_len;
	memcpy(o, a, an);
	memcpy(o + an, b, bn);
	memcpy(o + an + bn, c, cn);
	o[an + bn + cn] = '\0';
	xs->rh_len += n;
	return true;
}

static bool append_line(void *arg, const char *line)
{
	return rh_put(arg, line, strlen(line), "", 0, "", 0);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind,
				  const char *key, const char *value)
{
	struct hdr_ctx *h = cls;
	(void)kind;
	if (fg_hdr_is_xff(key)) {
		if (fg_hdr_xff_join(h->xff, sizeof(h->xff), &h->xff_len, value) != 0) {
			h->failed = true; /* bounded like every header */
			return MHD_NO;
		}
		return MHD_YES;
	}
	if (!fg_hdr_pass(key, h->connection, h->flags))
		return MHD_YES;
	if (!rh_put(h->xs, key, strlen(key), ": ", 2, value, strlen(value))) {
		h->failed = true;
		return MHD_NO;
	}
	return MHD_YES;
}

static void client_ip(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	memcpy(out, "unknown", sizeof("unknown")); /* (cap >= INET6_ADDRSTRLEN) */
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET) {
		/* inet_ntop() formats an IPv4 address with sprintf(), once
		 * per request: the four numbers are written here */
		const uint8_t *b = (const uint8_t *)
			&((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		size_t n = 0;
		for (int i = 0; i < 4; i++) {
			n += fg_digits(out + n, b[i]);
			out[n++] = i < 3 ? '.' : '\0';
		}
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)cap);
	}
}

/* The headers every request upstream carries: the client's as the policy
 * passes them (headers.h), then the gateway's own, appended to xs->rh;
 * false when a header could not be added. */
static bool client_headers(struct fg_xfers *xs, struct MHD_Connection *c,
			   unsigned flags, bool tls, const char *host)
{
	char ip[64];
	struct hdr_ctx h = { xs, flags,
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION),
		{ 0 }, 0, false };
	MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
	client_ip(c, ip, sizeof(ip));
	struct fg_hdr_forward f = {
		.xff = h.xff,
		.client_ip = ip,
		.tls = tls,
		.host = host ? host : MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								  MHD_HTTP_HEADER_HOST),
		.has_accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							  MHD_HTTP_HEADER_ACCEPT) != NULL,
		.flags = flags,
	};
	return !h.failed && fg_hdr_add(&f, append_line, xs);
}

/* xs->rh as curl's list, in x->req_headers; false without memory. */
static bool rh_list(struct fg_xfers *xs, struct fg_xfer *x)
{
	for (size_t o = 0; o < xs->rh_len; o += strlen(xs->rh + o) + 1) {
		struct curl_slist *l = curl_slist_append(x->req_headers, xs->rh + o);
		if (!l)
			return false;
		x->req_headers = l;
	}
	return true;
}

/* What every upstream request of a transfer's handle is: its URL (the
 * path exactly as given), its headers, the transfer's callbacks, HTTP/1.1
 * over http or https only, and an https upstream verified (peer and host
 * name, against upstream-ca or the system's CAs) with our client
 * certificate when one is set. Every handle has the same TLS settings, so
 * curl reuses its upstream connections across them. */
static void easy_setup(CURL *e, struct fg_xfer *x, const char *url,
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

/* ---- the requests the gateway's own client carries ----------------------- */

/* Whether the gateway's own client can reach the upstream: plain http,
 * no user in the URL, its host an IP address (a name would need a
 * resolver on the loop). Sets xs->h1_ok, and the address and Host line
 * when it can. */
static bool h1_target(struct fg_xfers *xs)
{
	const struct fg_config *cfg = xs->host.cfg;
	xs->h1_ok = false;
	if (!cfg->upstream || strncasecmp(cfg->up.base, "http://", 7) != 0)
		return false;
	const char *auth = cfg->up.base + 7;
	if (memchr(auth, '@', strcspn(auth, "/?#")))
		return false; /* curl would send the user's credentials */
	long port = strtol(cfg->up.port, NULL, 10);
	struct sockaddr_in *v4 = (struct sockaddr_in *)&xs->h1_sa;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&xs->h1_sa;
	memset(&xs->h1_sa, 0, sizeof(xs->h1_sa));
	bool six = false;
	if (inet_pton(AF_INET, cfg->up.host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		xs->h1_salen = sizeof(*v4);
	} else if (inet_pton(AF_INET6, cfg->up.host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		xs->h1_salen = sizeof(*v6);
		six = true;
	} else {
		return false;
	}
	/* as curl writes it: the address as the URL gives it, the port
	 * unless it is http's own */
	snprintf(xs->h1_host, sizeof(xs->h1_host), "%s%s%s%s%s",
		 six ? "[" : "", cfg->up.host, six ? "]" : "",
		 port == 80 ? "" : ":", port == 80 ? "" : cfg->up.port);
	xs->h1_ok = true;
	return true;
}

/* The bytes of x's request head, as curl would send them for this spec,
 * kept in x->h1_req; false when the request is not one for the gateway's
 * own client (then curl carries it, and nothing here changes what is
 * sent): no body or one of known length up to H1_BODY_MAX, a method of
 * token characters other than CONNECT, a target of printable ASCII that
 * curl would send as it is, and header lines curl would send as they
 * are. The body's length goes last, as curl puts it. */
static bool h1_request(struct fg_xfers *xs, struct fg_xfer *x,
		       const struct fg_xfer_spec *spec)
{
	if (!xs->h1_ok || x->kept ||
	    (x->has_body && (x->chunked || x->body_length > H1_BODY_MAX)))
		return false;
	const char *m = spec->method;
	if (!*m || strlen(m) > 32 || strcmp(m, "CONNECT") == 0 ||
	    m[strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		     "0123456789!#$%&'*+-.^_`|~")])
		return false;
	if (strncasecmp(spec->url, "http://", 7) != 0)
		return false;
	const char *target = spec->url + 7 + strcspn(spec->url + 7, "/?#");
	if (*target != '/')
		return false;
	for (const char *p = target; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || *p == '#')
			return false; /* curl's URL parser would have its say */
	size_t total = strlen(spec->method) + 1 + strlen(target) +
		       sizeof(" HTTP/1.1\r\nHost: \r\n") + strlen(xs->h1_host) + 2 +
		       sizeof("Content-Length: 18446744073709551615\r\n");
	for (size_t o = 0, ln; o < xs->rh_len; o += ln + 1) {
		const char *l = xs->rh + o;
		ln = strlen(l);
		const char *colon = memchr(l, ':', ln);
		if (!colon || colon == l || strpbrk(l, "\r\n") ||
		    strncasecmp(l, "Host:", 5) == 0)
			return false; /* curl has rules of its own for these */
		total += ln + 2;
	}
	char *req = malloc(total);
	if (!req)
		return false;
	size_t n = 0;
#define PUT(p, l) (memcpy(req + n, (p), (l)), n += (l))
	PUT(spec->method, strlen(spec->method));
	PUT(" ", 1);
	PUT(target, strlen(target));
	PUT(" HTTP/1.1\r\nHost: ", 17);
	PUT(xs->h1_host, strlen(xs->h1_host));
	PUT("\r\n", 2);
	for (size_t o = 0, ln; o < xs->rh_len; o += ln + 1) {
		const char *l = xs->rh + o;
		ln = strlen(l);
		/* "Name:" with nothing after it only stops curl adding a
		 * header of its own: it is not sent */
		const char *v = strchr(l, ':') + 1;
		v += strspn(v, " \t\v\f");
		if (!*v)
			continue;
		memcpy(req + n, l, ln);
		memcpy(req + n + ln, "\r\n", 2);
		n += ln + 2;
	}
	if (x->has_body) {
		PUT("Content-Length: ", 16);
		n += fg_digits(req + n, x->body_length);
		PUT("\r\n", 2);
	}
	PUT("\r\n", 2);
#undef PUT
	x->h1_req = req;
	x->h1_req_len = n;
	return true;
}

/* x's curl handle, set up for the spec; -1 without memory (what was
 * taken stays in x for fg_xfer_start() to give back). */
static int curl_prepare(struct fg_xfers *xs, struct fg_xfer *x,
			const struct fg_xfer_spec *spec)
{
	x->easy = easy_get(xs);
	if (!x->easy)
		return -1;
	CURL *e = x->easy;
	easy_setup(e, x, spec->url, xs->host.cfg);
	if (x->head)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	/* Always explicit, and copied by curl: a body never turns the method
	 * into a PUT, and nothing shortens it. */
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, spec->method);
	if (x->kept) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, spec->kept_body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)spec->kept_body_len);
	}
	if (x->has_body) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 65536L);
		/* the length read is the length sent; a chunked body stays
		 * chunked (curl frames an upload of unknown size that way) */
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 x->chunked ? (curl_off_t)-1 : (curl_off_t)x->body_length);
	}
	return 0;
}

int fg_xfer_start(struct fg_xfer *x, const struct fg_xfer_spec *spec,
		  const struct fg_xfer_hooks *hooks)
{
	struct fg_xfers *xs = x->xs;
	xs->rh_len = 0;
	bool ok = client_headers(xs, x->conn, spec->hdr_flags, spec->tls,
				 spec->host);
	for (const char *const *l = spec->extra; ok && l && *l; l++)
		ok = append_line(xs, *l);
	if (!ok)
		goto error;

	x->kept = spec->kept_body != NULL;
	x->head = strcmp(spec->method, "HEAD") == 0;
	x->chunked = spec->chunked;
	x->body_length = spec->length;
	x->has_body = !x->kept && !x->head && (spec->chunked || spec->length_given);
	/* the safe methods (RFC 9110, and WebDAV's PROPFIND) may go out
	 * twice, as curl would send them; a write never does */
	const char *m = spec->method;
	x->retryable = !x->has_body && !fg_method_is_write(xs->host.cfg, m) &&
		(x->head || strcmp(m, "GET") == 0 || strcmp(m, "OPTIONS") == 0 ||
		 strcmp(m, "PROPFIND") == 0);

	if (h1_request(xs, x, spec)) {
		/* the gateway's own client carries it: no curl handle, and
		 * its request head is made */
		x->h1 = true;
	} else if (!rh_list(xs, x) || curl_prepare(xs, x, spec) != 0) {
		goto error;
	}
	if (x->has_body) {
		x->rq = buf_get(xs);
		if (!x->rq)
			goto error;
	}
	x->rs = buf_get(xs);
	if (!x->rs)
		goto error;

	if (hooks)
		x->hooks = *hooks;
	x->refs++; /* the loop's, until ended() */
	if (x->kept) {
		x->kept_wait = true;
		MHD_suspend_connection(x->conn);
	}
	/* the hang-up watch begins with the start command, on the loop's
	 * next turn: a small body read in this turn never needs it */
	post(x, CMD_START);
	return 0;

error:
	easy_put(xs, x->easy);
	x->easy = NULL;
	curl_slist_free_all(x->req_headers);
	x->req_headers = NULL;
	free(x->h1_req);
	x->h1_req = NULL;
	x->h1 = false;
	buf_put(xs, x->rq);
	x->rq = NULL;
	buf_put(xs, x->rs);
	x->rs = NULL;
	x->kept = false;
	return -1;
}

/* ---- the request's side -------------------------------------------------- */

void fg_xfer_close(struct fg_xfer *x)
{
	hup_unwatch(x);
	x->mhd_gone = true;
	if (!x->done)
		post(x, CMD_ABORT);
	fg_xfer_put(x);
}

void *fg_xfer_owner(const struct fg_xfer *x)
{
	return x->hooks.arg;
}

bool fg_xfer_is_kept(const struct fg_xfer *x)
{
	return x->kept;
}

enum fg_xfer_stage fg_xfer_stage(const struct fg_xfer *x)
{
	if (x->done)
		return FG_XFER_ENDED;
	if (!x->added)
		return FG_XFER_QUEUED;
	bool sent = x->upload_done;
	if (x->h1) {
		sent = x->h1_sent;
	} else if (!x->has_body) {
		/* a request without a body is written whole as soon as curl
		 * begins it */
		curl_off_t pre = 0;
		curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
		sent = pre > 0;
	}
	return sent ? FG_XFER_SENT : FG_XFER_SENDING;
}

void fg_xfer_end_now(struct fg_xfer *x)
{
	if (x->added)
		ended(x->xs, x, TIMED_OUT);
}

size_t fg_xfer_feed(struct fg_xfer *x, const char *data, size_t *size)
{
	if (x->done || !x->rq) {
		*size = 0; /* the answer is decided: drop the body */
		return 0;
	}
	size_t n = BUF - x->rq_len;
	if (n > *size)
		n = *size;
	memcpy(x->rq + x->rq_len, data, n);
	x->rq_len += n;
	x->body_fed += n;
	*size -= n;
	bool waits = *size == 0;
	/* a body of known length read whole: its end comes next, with no
	 * wait on the socket to watch */
	bool whole = !x->chunked && x->body_fed >= x->body_length;
	if (!waits) {
		x->upload_suspended = true;
		MHD_suspend_connection(x->conn);
	}
	bool wake = x->want_data;
	x->want_data = false;
	if (waits && !whole)
		hup_watch(x);
	if (wake)
		post(x, CMD_UNPAUSE_READ);
	return n;
}

bool fg_xfer_body_end(struct fg_xfer *x)
{
	hup_unwatch(x);
	bool wake = false;
	if (!x->req_done) {
		x->req_done = true;
		wake = x->want_data;
		x->want_data = false;
	}
	bool wait = !x->headers_done && !x->done;
	if (wait) {
		x->waiting_headers = true;
		MHD_suspend_connection(x->conn);
	}
	if (wake)
		post(x, CMD_UNPAUSE_READ);
	return !wait;
}

static ssize_t on_content(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fg_xfer *x = cls;
	(void)pos;
	if (x->rs_len > 0) {
		size_t n = x->rs_len < max ? x->rs_len : max;
		memcpy(buf, x->rs, n);
		memmove(x->rs, x->rs + n, x->rs_len - n);
		x->rs_len -= n;
		x->resp_sent += n;
		bool wake = x->write_wants_room;
		x->write_wants_room = false;
		if (wake)
			post(x, CMD_UNPAUSE_WRITE);
		return (ssize_t)n;
	}
	if (x->done)
		return x->result.end == FG_UP_OK ? MHD_CONTENT_READER_END_OF_STREAM
					     : MHD_CONTENT_READER_END_WITH_ERROR;
	x->download_suspended = true;
	MHD_suspend_connection(x->conn);
	return 0;
}

static void on_content_free(void *cls)
{
	fg_xfer_put(cls); /* the response's */
}

/* The transfer ended well and its whole body, of the length its head
 * gave, is buffered: the answer can be handed over in one piece, framed
 * exactly as streaming it would have been (Content-Length). A HEAD answer,
 * a 204 or 304 and a body without a length keep the streaming path. */
static bool whole_in_hand(const struct fg_xfer *x)
{
	return x->done && x->result.end == FG_UP_OK && x->headers_done &&
	       !x->head && x->status != 204 && x->status != 304 &&
	       x->content_length >= 0 && x->resp_sent == 0 &&
	       (uint64_t)x->content_length == x->rs_len;
}

static struct MHD_Response *response(struct fg_xfer *x, const char *scheme,
				     const char *host)
{
	const struct fg_config *cfg = x->xs->host.cfg;
	/* The upstream's Content-Length is the body's length (curl undoes no
	 * content coding here); without one the answer is chunked. */
	uint64_t size = x->content_length >= 0 ? (uint64_t)x->content_length
					       : MHD_SIZE_UNKNOWN;
	/* 204 and 304 carry no body. libmicrohttpd 0.9.75 still writes
	 * "Content-Length: 0" on a 304 (an unknown size would make it chunk
	 * or downgrade the response, which is worse); docs/api.md says so. */
	if (x->status == 204 || x->status == 304)
		size = 0;
	struct MHD_Response *r;
	if (whole_in_hand(x)) {
		/* sent from the transfer's own buffer, head and body in one
		 * write; the transfer has ended, so nothing writes to it
		 * again, and the response holds it until it is freed (a
		 * copy was a 1 KiB malloc() per GET, and glibc
		 * consolidating its fast bins for it) */
		r = MHD_create_response_from_buffer_with_free_callback_cls(
			x->rs_len, x->rs, on_content_free, x);
		if (!r)
			return NULL;
		x->refs++; /* the response's */
		x->resp_sent += x->rs_len;
		x->rs_len = 0;
	} else {
		/* libmicrohttpd allocates the block zeroed with the response:
		 * an answer with no body to send (a HEAD's, a 204, a 304)
		 * asks for no 32 KiB it never fills */
		size_t block = x->head || size == 0 ? 256 : 32 * 1024;
		r = MHD_create_response_from_callback(size, block, on_content,
						      x, on_content_free);
		if (!r)
			return NULL;
		x->refs++; /* the response's */
	}
	for (int i = 0; i < x->nhdrs; i++) {
		const char *name = x->hb + x->hdrs[i].name;
		const char *value = x->hb + x->hdrs[i].value;
		if (fg_hdr_in_connection(resp_connection(x), name))
			continue;
		char *mine = NULL;
		bool drop = false;
		if (cfg->proxy_redirect && (strcasecmp(name, "Location") == 0 ||
					    strcasecmp(name, "Content-Location") == 0))
			mine = fg_redirect_answer(cfg->up.base, cfg->up.base_path,
						  value, scheme, host, &drop);
		if (drop)
			continue;
		MHD_add_response_header(r, name, mine ? mine : value);
		free(mine);
	}
	return r;
}

struct fg_xfer_answer fg_xfer_answer(struct fg_xfer *x, const char *scheme,
				     const char *host)
{
	struct fg_xfer_answer a = {
		.failure = x->result.end == FG_UP_TIMEOUT ? FG_XFER_TIMEOUT
							  : FG_XFER_UNAVAILABLE,
		.why = x->result.why,
		.owner = x->hooks.arg,
	};
	if (!x->headers_done) {
		a.kind = FG_XFER_FAILED;
		return a;
	}
	a.status = (unsigned)x->status;
	if (x->too_many_headers) {
		a.kind = FG_XFER_TOO_MANY_HEADERS;
	} else if (x->done && x->result.end != FG_UP_OK && x->rs_len == 0 &&
		   x->resp_sent == 0) {
		a.kind = FG_XFER_BROKE_AFTER_HEAD;
	} else {
		a.kind = FG_XFER_ANSWERED;
		a.response = response(x, scheme, host);
	}
	return a;
}

bool fg_xfer_kept(struct fg_xfer *x, int *status, const char **body,
		  size_t *len)
{
	if (!x->done) {
		x->kept_wait = true; /* called again before it ended */
		MHD_suspend_connection(x->conn);
		return false;
	}
	bool answered = x->result.end == FG_UP_OK && x->headers_done;
	*status = answered ? x->status : 0;
	*body = x->rs;
	*len = x->rs_len;
	return true;
}

const char *fg_xfer_kept_header(const struct fg_xfer *x, const char *name,
				unsigned *count)
{
	const char *first = NULL;
	unsigned n = 0;
	for (int i = 0; i < x->nhdrs; i++) {
		if (strcasecmp(x->hb + x->hdrs[i].name, name) == 0) {
			if (!first)
				first = x->hb + x->hdrs[i].value;
			n++;
		}
	}
	*count = n;
	return first;
}

void fg_xfer_note(const struct fg_xfer *x, int *status, int64_t *ns,
		  uint64_t *sent)
{
	*status = x->headers_done ? x->status : 0;
	*ns = x->up_ns;
	*sent = x->resp_sent;
}
