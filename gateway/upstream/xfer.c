/*
 * xfer.c - streaming requests to the upstream and answers back (xfer.h):
 * the engine. It holds the transfer and its libmicrohttpd side, bounds it
 * in time, and picks the client that carries its request (backend.h): the
 * gateway's own (h1client.c) when it can, else libcurl (curlx.c), both
 * driven on the loop's libevent base. A transfer lives on the loop that
 * accepted its request, from the request head to the last byte of the
 * answer, and everything here runs on that loop's thread: no lock. Bodies
 * stream both
 * ways through one bounded buffer each (BUF bytes): when a buffer is full
 * the producer stops (the client connection is suspended, or curl is
 * paused) and the consumer restarts it when it has drained. So memory per
 * transfer is bounded whatever the body size, and a slow side slows the
 * other down instead of filling memory.
 *
 * Invariants:
 * - curl is never called back into from its own callbacks: what the
 *   libmicrohttpd side wants of curl (start, unpause, abort) is posted as
 *   a command and run on the loop's next turn, in the order posted (of
 *   either client: begin, resume_send/resume_recv, cancel).
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
 *   The pre-request hook and the sockets are curlx.c's; the own client
 *   keeps the same two rules itself (h1client.h).
 *
 * A transfer is reference counted (a plain count: one thread); its
 * holders are the request (fg_xfer_create() to fg_xfer_close()), the loop
 * while it is started and not ended, the command queue while it is
 * queued, the libmicrohttpd response streaming its answer, and an owner's
 * calls in flight (fg_xfer_hold()).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "base/record.h"
#include "base/recycle.h"
#include "base/redirect.h"
#include "proc/metrics.h"
#include "base/text.h"
#include "upstream/backend.h"
#include "upstream/curlx.h"
#include "upstream/h1client.h"
#include "upstream/head.h"
#include "upstream/headers.h"
#include "upstream/xfer.h"

/* Bytes buffered per direction. Below glibc's mmap threshold, so that a
 * transfer's buffers come from the heap, not from an mmap per request. */
#define BUF (64 * 1024)
/* Idle buffers kept per loop (BUF each): a 64 KiB malloc() per buffer
 * made glibc consolidate its fast bins on every request. */
#define BUF_POOL 32
#define HEADERS_MAX 256
/* The largest body of known length the gateway's own client carries
 * (larger ones, and chunked ones, go through curl): one buffer's worth,
 * so that it is in hand, whole, as soon as its client sent it. */
#define H1_BODY_MAX BUF

enum { CMD_START = 1, CMD_UNPAUSE_READ = 2, CMD_UNPAUSE_WRITE = 4, CMD_ABORT = 8 };

/* Where a transfer is. */
enum xfer_state {
	XS_NEW,      /* made (fg_xfer_create()), nothing asked of it yet */
	XS_READY,    /* its request prepared for its client, its start
			posted (fg_xfer_start()) */
	XS_RUNNING,  /* begun: its client carries it (the active list) */
	XS_ENDED,    /* answered, failed, cut or never begun (ended()) */
};

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
	enum xfer_state state;
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
	bool up_sent;                 /* the request's last byte went */
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
	bool headers_done;            /* the final head came */
	bool waiting_headers, download_suspended, mhd_gone;
	bool kept_wait;               /* suspended until the kept answer ends */
	bool write_wants_room;
	bool recv_held;               /* the client's receiving waits for room */
	struct fg_up_outcome result;
	char *rs;
	size_t rs_len;
	uint64_t resp_sent;           /* body bytes handed to libmicrohttpd */
	int64_t up_ns;                /* the transfer's duration, once ended */

	struct event hup;             /* the client's hang-up, mid-body */
	bool hup_set, hup_on;
	/* the client that carries it, and its exchange (from XS_READY until
	 * ended) */
	const struct fg_up_backend *be;
	void *ex;
	uint64_t started;
	uint64_t started_ns;
	uint64_t rx_at;               /* when the response last gave bytes, or
					 the client last held its reading up
					 (a full buffer): check_heads() */
	struct fg_xfer *anext, *aprev;  /* active list */

	unsigned pending;             /* commands posted */
	bool queued;
	struct fg_xfer *qnext;
};

struct fg_xfers {
	struct fg_xfers_host host;
	struct fg_xfer *queue, **queue_tail; /* commands, FIFO */
	struct event *cmd_ev;         /* runs the commands */
	struct event *head_timer;     /* the bound on the response heads */
	struct fg_xfer *active;       /* handed to curl */
	char *bufs[BUF_POOL];         /* idle BUF-byte buffers, owned here */
	int nbufs;
	/* the clients: the gateway's own, and libcurl */
	struct fg_h1c *h1c;
	struct fg_curlx *curl;
	struct fg_head head;          /* the request being made */
	struct fg_recycle xfers;      /* freed transfers, made again */
};

#define now_ms fg_clock_ms

/* ---- references and commands ------------------------------------------ */

static void hup_unwatch(struct fg_xfer *x);

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

/* ---- the sink: what the clients hand the transfer ---------------------- */

static bool gate_open(struct fg_xfer *x)
{
	return !x->hooks.may_send || x->hooks.may_send(x->hooks.arg);
}

/* The body's next bytes for the upstream, up to max, for either client
 * (the sink's fill()): how many, 0 at its end, or FG_UP_FILL_PAUSE (none
 * yet: the feed resumes the sending) or FG_UP_FILL_ABORT. */
static size_t take_body(void *arg, char *buf, size_t max)
{
	struct fg_xfer *x = arg;
	/* the gate closed, or the client left mid-body: not one more byte,
	 * and the upstream request is aborted */
	if (!gate_open(x) || (x->mhd_gone && !x->req_done))
		return FG_UP_FILL_ABORT;
	if (x->rq_len == 0) {
		if (x->req_done) {
			/* a body that ended before its length never completes */
			bool short_body = !x->chunked && x->body_sent != x->body_length;
			return short_body ? FG_UP_FILL_ABORT : 0;
		}
		x->want_data = true;
		return FG_UP_FILL_PAUSE;
	}
	size_t n = x->rq_len < max ? x->rq_len : max;
	memcpy(buf, x->rq, n);
	memmove(x->rq, x->rq + n, x->rq_len - n);
	x->rq_len -= n;
	x->body_sent += n;
	resume(x, &x->upload_suspended);
	return n;
}

/* How many answer bytes the transfer takes now (the sink's room()); when
 * fewer than `want`, the client waits until on_content() made room. */
static size_t take_room(void *arg, size_t want)
{
	struct fg_xfer *x = arg;
	if (x->mhd_gone || x->kept)
		return want > BUF ? want : BUF; /* take_data() refuses, or keeps
						   what fits */
	size_t room = BUF - x->rs_len;
	if (room < want) {
		x->write_wants_room = true; /* on_content() resumes it */
		x->recv_held = true;
	}
	return room;
}

/* Answer bytes (the sink's on_body()), never more than take_room() said. */
static bool take_data(void *arg, const char *p, size_t n)
{
	struct fg_xfer *x = arg;
	if (x->mhd_gone)
		return false; /* the client left: abort */
	if (x->kept) {
		/* enough to judge by; the rest is dropped */
		size_t k = BUF - x->rs_len < n ? BUF - x->rs_len : n;
		memcpy(x->rs + x->rs_len, p, k);
		x->rs_len += k;
		return true;
	}
	memcpy(x->rs + x->rs_len, p, n);
	x->rs_len += n;
	x->rx_at = now_ms();
	resume(x, &x->download_suspended);
	return true;
}

static void took_all(void *arg)
{
	struct fg_xfer *x = arg;
	x->up_sent = true;
}

static void forget_headers(struct fg_xfer *x)
{
	x->nhdrs = 0;
	x->hb_len = 0;
	x->too_many_headers = false;
	x->has_connection = false;
	x->content_length = -1;
}

/* Copies P (N bytes) and a NUL into the header block; sets *at to where
 * it begins. False without memory. */
static bool hb_put(struct fg_xfer *x, const char *p, size_t n, size_t *at)
{
	if (!fg_block_room(&x->hb, &x->hb_cap, x->hb_len, n + 1, 512))
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
		x->content_length = fg_value_number(v, vl);
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

/* The final head of the answer, from either client (the sink's
 * on_head()): its status and its headers (`cut`: more came than a client
 * hands on). */
static void take_head(void *arg, int status, const struct fg_up_header *h,
		      size_t n, bool cut)
{
	struct fg_xfer *x = arg;
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

/* ---- ends ------------------------------------------------------------------ */

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
	bool began = x->state == XS_RUNNING;
	if (began) {
		uint64_t ns = fg_rec_now_ns() - x->started_ns;
		int status = x->headers_done ? x->status : 0;
		x->up_ns = (int64_t)ns;
		fg_metrics_upstream(status, ns);
		if (x->aprev)
			x->aprev->anext = x->anext;
		else
			xs->active = x->anext;
		if (x->anext)
			x->anext->aprev = x->aprev;
	}
	if (x->ex) {
		/* (a client's own end has let its exchange go already) */
		x->be->cancel(x->ex);
		x->ex = NULL;
	}
	x->state = XS_ENDED;
	x->result = out;
	resume(x, &x->waiting_headers);
	resume(x, &x->download_suspended);
	resume(x, &x->upload_suspended);
	resume(x, &x->kept_wait);
	if (x->hooks.done)
		x->hooks.done(x->hooks.arg, out.end == FG_UP_OK, began);
	fg_xfer_put(x); /* the loop's reference */
}

/* A client's end of the exchange (the sink's on_end()): the exchange is
 * gone. */
static void client_ended(void *arg, struct fg_up_outcome out)
{
	struct fg_xfer *x = arg;
	x->ex = NULL;
	ended(x->xs, x, out);
}

static const struct fg_up_sink sink = {
	.on_head = take_head,
	.room = take_room,
	.on_body = take_data,
	.fill = take_body,
	.on_sent = took_all,
	.on_end = client_ended,
};

/* ---- driving the clients on the loop ------------------------------------ */

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

		if ((cmd & CMD_START) && x->state == XS_READY) {
			/* a transfer whose gate closed meanwhile is not begun:
			 * a request without a body would go out whole */
			if (!gate_open(x)) {
				ended(xs, x, TIMED_OUT);
			} else if (x->be->begin(x->ex)) {
				x->state = XS_RUNNING;
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
		if ((cmd & CMD_ABORT) && x->state == XS_RUNNING)
			ended(xs, x, ABORTED);
		if (x->state == XS_RUNNING && (cmd & CMD_UNPAUSE_WRITE)) {
			x->recv_held = false;
			x->be->resume_recv(x->ex);
		}
		if (x->state == XS_RUNNING && (cmd & CMD_UNPAUSE_READ))
			x->be->resume_send(x->ex);
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
			if (x->rs_len >= BUF || x->recv_held)
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
	/* what ended while the commands ran, through curl */
	fg_curlx_backend.settle(xs->curl);
	arm_heads(xs);
}

struct fg_xfers *fg_xfers_create(const struct fg_xfers_host *host)
{
	struct fg_xfers *xs = calloc(1, sizeof(*xs));
	if (!xs)
		return NULL;
	xs->host = *host;
	xs->queue_tail = &xs->queue;
	xs->cmd_ev = event_new(host->base, -1, 0, on_commands, xs);
	xs->head_timer = evtimer_new(host->base, on_head_timer, xs);
	if (!xs->cmd_ev || !xs->head_timer)
		goto error;
	xs->h1c = fg_h1c_create(host->base, host->cfg);
	if (!xs->h1c)
		goto error;
	xs->curl = fg_curlx_create(host->base, host->cfg);
	if (!xs->curl)
		goto error;
	return xs;

error:
	fg_h1c_destroy(xs->h1c);
	if (xs->cmd_ev)
		event_free(xs->cmd_ev);
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
	fg_curlx_destroy(xs->curl);
	fg_h1c_destroy(xs->h1c);
	fg_head_free(&xs->head);
	while (xs->nbufs > 0)
		free(xs->bufs[--xs->nbufs]);
	fg_recycle_drain(&xs->xfers);
	event_free(xs->cmd_ev);
	event_free(xs->head_timer);
	free(xs);
}

int fg_xfer_start(struct fg_xfer *x, const struct fg_xfer_spec *spec,
		  const struct fg_xfer_hooks *hooks)
{
	struct fg_xfers *xs = x->xs;
	x->kept = spec->kept_body != NULL;
	x->head = strcmp(spec->method, "HEAD") == 0;
	x->chunked = spec->chunked;
	x->body_length = spec->length;
	x->has_body = !x->kept && !spec->whole_body && !x->head &&
		      (spec->chunked || spec->length_given);
	struct fg_head_in in = {
		.conn = x->conn,
		.cfg = xs->host.cfg,
		.method = spec->method,
		.url = spec->url,
		.hdr_flags = spec->hdr_flags,
		.tls = spec->tls,
		.host = spec->host,
		.extra = spec->extra,
		.body = !x->has_body ? FG_UP_BODY_NONE
			: x->chunked ? FG_UP_BODY_CHUNKED : FG_UP_BODY_LENGTH,
		.length = x->body_length,
		.fixed_body = spec->kept_body ? spec->kept_body : spec->whole_body,
		.fixed_len = spec->kept_body ? spec->kept_body_len : spec->whole_body_len,
		.s3 = spec->s3,
	};
	struct fg_up_request rq;
	if (!fg_head_build(&xs->head, &in, &rq))
		goto error;
	/* The gateway's own client carries what it can of the requests
	 * whose body, if any, is in hand whole as soon as its client sent
	 * it; libcurl the rest. */
	if (!x->kept && (!x->has_body || (!x->chunked && x->body_length <= H1_BODY_MAX))) {
		x->be = &fg_h1c_backend;
		x->ex = fg_h1c_backend.prepare(xs->h1c, &rq, &sink, x);
	}
	if (!x->ex) {
		x->be = &fg_curlx_backend;
		x->ex = fg_curlx_backend.prepare(xs->curl, &rq, &sink, x);
	}
	if (!x->ex)
		goto error;
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
	x->state = XS_READY;
	if (x->kept) {
		x->kept_wait = true;
		MHD_suspend_connection(x->conn);
	}
	/* the hang-up watch begins with the start command, on the loop's
	 * next turn: a small body read in this turn never needs it */
	post(x, CMD_START);
	return 0;

error:
	if (x->ex)
		x->be->cancel(x->ex);
	x->ex = NULL;
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
	if (x->state != XS_ENDED)
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
	if (x->state == XS_ENDED)
		return FG_XFER_ENDED;
	if (x->state != XS_RUNNING)
		return FG_XFER_QUEUED;
	bool sent = x->up_sent || (x->be->sent && x->be->sent(x->ex));
	return sent ? FG_XFER_SENT : FG_XFER_SENDING;
}

void fg_xfer_end_now(struct fg_xfer *x)
{
	/* one not handed to its client yet never is */
	if (x->state == XS_RUNNING || x->state == XS_READY)
		ended(x->xs, x, TIMED_OUT);
}

size_t fg_xfer_feed(struct fg_xfer *x, const char *data, size_t *size)
{
	if (x->state == XS_ENDED || !x->rq) {
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
	bool wait = !x->headers_done && x->state != XS_ENDED;
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
	if (x->state == XS_ENDED)
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
	return x->state == XS_ENDED && x->result.end == FG_UP_OK && x->headers_done &&
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
	} else if (x->state == XS_ENDED && x->result.end != FG_UP_OK && x->rs_len == 0 &&
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
	if (x->state != XS_ENDED) {
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
