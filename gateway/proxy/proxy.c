/*
 * proxy.c - streaming requests to the upstream and answers back.
 *
 * Each loop drives its own libcurl multi handle on its libevent base
 * (curl_multi_socket_action): a transfer lives on the loop that accepted
 * its request, from the request head to the last byte of the answer.
 * Bodies stream both ways through one bounded buffer
 * each (BUF bytes): when a buffer is full the producer stops (the client
 * connection is suspended, or curl is paused) and the consumer restarts it
 * when it has drained. So memory per transfer is bounded whatever the body
 * size, and a slow side slows the other down instead of filling memory.
 *
 * Invariants:
 * - curl is never called back into from its own callbacks: what the
 *   libmicrohttpd side wants of curl (start, unpause, abort) is posted as
 *   a command and run on the loop's next turn, in the order posted.
 * - A connection is resumed exactly when it was suspended.
 * - A fenced write hands curl no byte at or after its deadline (a release
 *   moves the deadline to now), and a write whose request is still being
 *   sent then is aborted (its connection closed), so an upstream never
 *   completes it late. One whose last byte left in time is awaited for
 *   the margin more (its record covers it) before it is cut off, so a
 *   quick storage's answer is passed on rather than "aborted" for a write
 *   it applied. A client that leaves mid-body aborts
 *   the upstream request the same way: a truncated body never completes.
 * - While a request's body is incomplete and its connection waits on its
 *   socket, the loop watches that socket for the client's hang-up itself
 *   (libmicrohttpd can miss it, loop.h), so a client that leaves mid-body
 *   ends the upstream request at once, not at the connection's timeout.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <uthash.h>

#include "access/access.h"
#include "base/clock.h"
#include "http/respond.h"
#include "fence/fence.h"
#include "proxy/fencing.h"
#include "proc/gateway.h"
#include "base/log.h"
#include "proc/metrics.h"
#include "rt/rt.h"
#include "proxy/admitq.h"
#include "proxy/proxy.h"
#include "base/redirect.h"
#include "proc/tls.h"

/* Bytes buffered per direction. Below glibc's mmap threshold, so that a
 * transfer's buffers come from the heap, not from an mmap per request. */
#define BUF (64 * 1024)
#define EASY_POOL 64
#define HEADERS_MAX 200
#define PROXY_ALLOW "GET, HEAD, OPTIONS, PROPFIND, PUT, POST, PATCH, DELETE, MKCOL, COPY, MOVE, PROPPATCH"
#define EXTEND_AHEAD_MS 100
#define URL_MAX 8192
/* Write ids aborted (their grant ended) or told to ask again (their lease
 * got shorter) before their transfer was registered: the window is a few
 * microseconds, the ring a bound. */
#define ABORTED_RING 1024

enum { CMD_START = 1, CMD_UNPAUSE_READ = 2, CMD_UNPAUSE_WRITE = 4, CMD_ABORT = 8 };

struct hdr {
	char *name;
	char *value;
};

struct fg_xfer {
	struct fg_proxy *px;
	pthread_mutex_t mu;
	int refs;                     /* under mu */
	struct MHD_Connection *conn;
	bool head;                    /* HEAD: no response body follows */
	bool probe;                   /* asks whether a COPY's or MOVE's
					 Destination is a collection: its
					 answer (the first BUF bytes) is read
					 by the worker, never sent on */
	bool chunked;                 /* the request body's framing: chunked, */
	uint64_t body_length;         /* else exactly this many bytes */

	/* fencing (set before the transfer starts) */
	struct fg_fence fence;
	bool fenced;
	uint64_t longest_end;         /* monotonic ms */
	UT_hash_handle hh;            /* px->writes, by fence.write_id */
	bool registered;              /* under px->mu */

	/* under mu */
	uint64_t deadline;            /* monotonic ms; 0: none */
	uint64_t mdeadline[2];        /* each member's; deadline is the least */
	int extending;                /* extensions in flight */
	uint64_t extend_asked;        /* when the pending extensions were sent */
	bool released;                /* the grant was released: abort */
	bool reask;                   /* its lease got shorter: ask for its
					 deadline now */
	bool has_body, req_done, want_data, upload_suspended;
	bool upload_done;             /* curl was handed the body's last byte */
	bool grace;                   /* sent whole by its deadline: awaiting
					 its answer for the margin */
	uint64_t body_sent;
	char *rq;
	size_t rq_len;
	int status;
	struct hdr *hdrs;             /* grows to HEADERS_MAX */
	int nhdrs, caphdrs;
	bool too_many_headers;
	char *resp_connection;        /* the upstream's Connection header */
	int64_t content_length;
	bool headers_done, waiting_headers, done, download_suspended, mhd_gone;
	bool probe_wait;              /* suspended until the probe ends */
	bool write_wants_room;
	CURLcode result;
	bool deadline_hit;
	bool cur_asked, cur_known;    /* the "current" token of a late write */
	uint64_t cur;
	char *rs;
	size_t rs_len;
	uint64_t resp_sent;           /* body bytes handed to libmicrohttpd */
	int64_t up_ns;                /* the transfer's duration, once ended */

	/* proxy thread only */
	struct event hup;             /* the client's hang-up, mid-body */
	bool hup_set, hup_on;
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE]; /* curl's words for a failure */
	struct curl_slist *req_headers;
	bool added, read_paused, write_paused;
	uint64_t started;
	uint64_t started_ns;
	struct fg_xfer *anext, *aprev;  /* active list */

	/* under px->mu */
	unsigned pending;
	bool queued;
	struct fg_xfer *qnext;
};

/* One socket curl watches. */
struct sock {
	struct event ev;
	bool added;
};

struct fg_proxy {
	struct fg_gateway *gw;
	struct fg_loop *loop;
	CURLM *multi;
	CURL *pool[EASY_POOL];        /* reset handles for reuse, under mu */
	int npool;
	pthread_mutex_t mu;
	struct fg_xfer *queue, **queue_tail; /* commands, FIFO */
	struct event *cmd_ev;         /* runs the commands */
	struct event *curl_timer;     /* curl's own timeout */
	struct event *deadline_timer; /* write deadlines, response heads */
	bool stopping;
	struct fg_xfer *active;
	struct fg_xfer *writes;       /* fenced transfers by write id, under mu */
	bool recheck;                 /* under mu: ask every running write's
					 grant again (release messages may have
					 been lost) */
	char aborted[ABORTED_RING][FG_WAITER_ID_MAX]; /* under mu */
	char aborted_kind[ABORTED_RING]; /* 'x' abort, 'e' ask again */
	uint64_t aborted_dl[ABORTED_RING]; /* 'e': the deadline at the latest */
	unsigned naborted;
	const char *base;             /* upstream URL without a trailing '/' */
	const char *base_path;        /* its path ("" or "/...") */
};

#define now_ms fg_clock_ms

/* ---- references and commands ------------------------------------------ */

static void hup_unwatch(struct fg_xfer *x);

static void xfer_free(struct fg_xfer *x)
{
	hup_unwatch(x);
	if (x->fenced) {
		pthread_mutex_lock(&x->px->mu);
		if (x->registered)
			HASH_DEL(x->px->writes, x);
		pthread_mutex_unlock(&x->px->mu);
	}
	for (int i = 0; i < x->nhdrs; i++) {
		free(x->hdrs[i].name);
		free(x->hdrs[i].value);
	}
	free(x->hdrs);
	free(x->rq);
	free(x->rs);
	free(x->resp_connection);
	pthread_mutex_destroy(&x->mu);
	free(x);
	fg_metrics_gauge_add(FG_GAUGE_TRANSFERS, -1);
}

/* A transfer for connection c, not begun. Two references: the worker's
 * (req->xfer) and the proxy thread's. NULL without memory. */
static struct fg_xfer *xfer_new(struct fg_proxy *px, struct MHD_Connection *c)
{
	struct fg_xfer *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	pthread_mutex_init(&x->mu, NULL);
	fg_metrics_gauge_add(FG_GAUGE_TRANSFERS, 1);
	x->up_ns = -1;
	x->px = px;
	x->refs = 2;
	x->conn = c;
	x->content_length = -1;
	return x;
}

static void xfer_get(struct fg_xfer *x)
{
	pthread_mutex_lock(&x->mu);
	x->refs++;
	pthread_mutex_unlock(&x->mu);
}

static void xfer_put(struct fg_xfer *x)
{
	pthread_mutex_lock(&x->mu);
	int left = --x->refs;
	pthread_mutex_unlock(&x->mu);
	if (left == 0)
		xfer_free(x);
}

/* Posts a command to the proxy thread; the queue holds a reference. */
static void post(struct fg_xfer *x, unsigned cmd)
{
	struct fg_proxy *px = x->px;
	bool take = false;
	pthread_mutex_lock(&px->mu);
	x->pending |= cmd;
	if (!x->queued) {
		x->queued = true;
		x->qnext = NULL;
		*px->queue_tail = x;
		px->queue_tail = &x->qnext;
		take = true;
	}
	pthread_mutex_unlock(&px->mu);
	if (take)
		xfer_get(x);
	event_active(px->cmd_ev, EV_READ, 0);
}

static void resume_locked(struct fg_xfer *x, bool *flag)
{
	if (*flag) {
		*flag = false;
		fg_loop_resume(x->px->loop, x->conn);
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
	pthread_mutex_lock(&x->mu);
	bool reading = !x->upload_suspended && !x->req_done && !x->mhd_gone;
	pthread_mutex_unlock(&x->mu);
	if (reading)
		fg_loop_reread(x->px->loop, x->conn);
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
		if (!(event_base_get_features(x->px->loop->base) &
		      EV_FEATURE_EARLY_CLOSE))
			return; /* the connection's timeout still ends it */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || event_assign(&x->hup, x->px->loop->base,
					ci->connect_fd, EV_CLOSED | EV_PERSIST,
					on_client_hup, x) != 0)
			return; /* the connection's timeout still ends it */
		x->hup_set = true;
	}
	x->hup_on = event_add(&x->hup, NULL) == 0;
}

/* ---- fencing bookkeeping ---------------------------------------------- */

/* Marks an admitted write over, off the answer's path. */
static void fence_finish(struct fg_xfer *x)
{
	fg_fencing_finish(x->px->loop, &x->fence);
}

static uint64_t least_deadline(const struct fg_xfer *x)
{
	uint64_t dl = 0;
	for (int i = 0; i < x->fence.n; i++)
		if (x->fence.m[i].admitted && (!dl || x->mdeadline[i] < dl))
			dl = x->mdeadline[i];
	return dl;
}

/* An 'e': the write's grant ends sooner. Its deadline (each member's:
 * the message does not say which lock) moves to `dl` at the latest, at
 * once, whether or not the extension asked for next gets through; one
 * already awaiting its answer after its last byte keeps its grace. */
static void clamp_deadline(struct fg_xfer *x, uint64_t dl)
{
	if (!x->deadline || x->grace)
		return;
	if (dl < 1)
		dl = 1;
	if (x->deadline > dl)
		x->deadline = dl;
	for (int i = 0; i < x->fence.n; i++)
		if (x->mdeadline[i] > dl)
			x->mdeadline[i] = dl;
}

struct extend_arg {
	struct fg_xfer *x;
	int i;
};

static void on_extended(int err, const struct fg_admit *a, void *arg)
{
	struct extend_arg *e = arg;
	struct fg_xfer *x = e->x;
	pthread_mutex_lock(&x->mu);
	x->extending--;
	/* counted from when the call was sent, like the first deadline */
	if (!err && a->status == FG_ADMITTED && x->deadline && !x->released) {
		x->mdeadline[e->i] = x->extend_asked + (uint64_t)a->ms;
		x->deadline = least_deadline(x);
	} else if (!err && a->status != FG_ADMITTED && x->deadline) {
		/* the grant is over (a release whose message was lost, or an
		 * expiry), or its deadline passed while this call was on its
		 * way: not one more byte. A write whose last byte left before
		 * its deadline keeps the grace check_deadlines() gave it: the
		 * storage may be applying it, and its record covers that. */
		if (!x->grace) {
			x->released = true;
			x->deadline = 1;
		}
	}
	pthread_mutex_unlock(&x->mu);
	event_active(x->px->cmd_ev, EV_READ, 0); /* deadlines moved */
	free(e);
	xfer_put(x);
}

/* One extension per admitted member; each holds a reference. */
static void do_extend(fg_astore *as, struct fg_xfer *x)
{
	uint64_t now = now_ms();
	x->extend_asked = now;
	uint32_t left = x->longest_end > now ? (uint32_t)(x->longest_end - now) : 0;
	for (int i = 0; i < x->fence.n; i++) {
		if (!x->fence.m[i].admitted)
			continue;
		struct extend_arg *e = malloc(sizeof(*e));
		if (!e)
			continue; /* the deadline stands */
		pthread_mutex_lock(&x->mu);
		x->extending++;
		x->refs++;
		pthread_mutex_unlock(&x->mu);
		e->x = x;
		e->i = i;
		if (!as || fg_alock_extend(as, x->fence.m[i].lock, x->fence.m[i].token,
				    x->fence.write_id, x->px->gw->cfg->fence_margin_ms,
				    left, on_extended, e) != FG_OK)
			on_extended(FG_EUNAVAIL, NULL, e);
	}
	pthread_mutex_lock(&x->mu);
	x->extending--; /* the pending mark check_deadlines() set */
	pthread_mutex_unlock(&x->mu);
	xfer_put(x); /* the call's own */
}

/* ---- curl callbacks ----------------------------------------------------- */

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	struct fg_xfer *x = ud;
	size_t max = size * nitems;
	pthread_mutex_lock(&x->mu);
	if ((x->deadline && now_ms() >= x->deadline) ||
	    (x->mhd_gone && !x->req_done)) {
		/* past the lease, or the client left mid-body: not one more
		 * byte, and the upstream request is aborted */
		x->deadline_hit = x->deadline && now_ms() >= x->deadline;
		pthread_mutex_unlock(&x->mu);
		return CURL_READFUNC_ABORT;
	}
	if (x->rq_len == 0) {
		if (x->req_done) {
			/* a body that ended before its length never completes */
			bool short_body = !x->chunked && x->body_sent != x->body_length;
			x->upload_done = !short_body;
			pthread_mutex_unlock(&x->mu);
			return short_body ? CURL_READFUNC_ABORT : 0;
		}
		x->want_data = true;
		pthread_mutex_unlock(&x->mu);
		x->read_paused = true;
		return CURL_READFUNC_PAUSE;
	}
	size_t n = x->rq_len < max ? x->rq_len : max;
	memcpy(buf, x->rq, n);
	memmove(x->rq, x->rq + n, x->rq_len - n);
	x->rq_len -= n;
	x->body_sent += n;
	/* curl asks no more once it has a known length's last byte */
	if (!x->chunked && x->body_sent == x->body_length)
		x->upload_done = true;
	resume_locked(x, &x->upload_suspended);
	pthread_mutex_unlock(&x->mu);
	return n;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct fg_xfer *x = ud;
	size_t n = size * nmemb;
	pthread_mutex_lock(&x->mu);
	if (x->mhd_gone) {
		pthread_mutex_unlock(&x->mu);
		return 0; /* the client left: abort */
	}
	if (x->probe && BUF - x->rs_len < n) {
		n = BUF - x->rs_len; /* enough to judge by; the rest is dropped */
		memcpy(x->rs + x->rs_len, ptr, n);
		x->rs_len += n;
		pthread_mutex_unlock(&x->mu);
		return size * nmemb;
	}
	if (BUF - x->rs_len < n) {
		x->write_wants_room = true;
		pthread_mutex_unlock(&x->mu);
		x->write_paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	memcpy(x->rs + x->rs_len, ptr, n);
	x->rs_len += n;
	resume_locked(x, &x->download_suspended);
	pthread_mutex_unlock(&x->mu);
	return n;
}

/* Headers that describe one hop, not the message (RFC 9110 7.6.1), plus
 * those the gateway sets itself. */
static bool hop_by_hop(const char *name, size_t len)
{
	static const char *const names[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authenticate",
		"Proxy-Authorization", "Content-Length",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0)
			return true;
	return false;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	struct fg_xfer *x = ud;
	size_t len = size * nitems, n = len;
	while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n'))
		n--;
	pthread_mutex_lock(&x->mu);
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* a new status line: forget an interim (1xx) response */
		const char *sp = memchr(buf, ' ', n);
		x->status = sp ? atoi(sp + 1) : 502;
		for (int i = 0; i < x->nhdrs; i++) {
			free(x->hdrs[i].name);
			free(x->hdrs[i].value);
		}
		x->nhdrs = 0;
		x->too_many_headers = false;
		free(x->resp_connection);
		x->resp_connection = NULL;
		x->content_length = -1;
	} else if (n == 0) {
		if (x->status >= 200) {
			x->headers_done = true;
			resume_locked(x, &x->waiting_headers);
		}
	} else {
		const char *colon = memchr(buf, ':', n);
		if (colon && colon > buf) {
			size_t nl = (size_t)(colon - buf);
			const char *v = colon + 1;
			while (v < buf + n && (*v == ' ' || *v == '\t'))
				v++;
			size_t vl = (size_t)(buf + n - v);
			if (nl == 14 && strncasecmp(buf, "Content-Length", 14) == 0)
				x->content_length = strtoll(v, NULL, 10);
			if (nl == 10 && strncasecmp(buf, "Connection", 10) == 0) {
				free(x->resp_connection);
				x->resp_connection = strndup(v, vl);
			}
			if (!hop_by_hop(buf, nl)) {
				if (x->nhdrs == x->caphdrs && x->caphdrs < HEADERS_MAX) {
					int cap = x->caphdrs ? x->caphdrs * 2 : 16;
					struct hdr *h = realloc(x->hdrs, (size_t)cap * sizeof(*h));
					if (h) {
						x->hdrs = h;
						x->caphdrs = cap;
					}
				}
				if (x->nhdrs == x->caphdrs) {
					x->too_many_headers = true;
				} else {
					x->hdrs[x->nhdrs].name = strndup(buf, nl);
					x->hdrs[x->nhdrs].value = strndup(v, vl);
					x->nhdrs++;
				}
			}
		}
	}
	pthread_mutex_unlock(&x->mu);
	return len;
}

/* ---- driving curl on the loop ------------------------------------------- */

static int pause_bits(const struct fg_xfer *x)
{
	return (x->read_paused ? CURLPAUSE_SEND : 0) |
	       (x->write_paused ? CURLPAUSE_RECV : 0);
}

/* curl handles are reused: a reset handle keeps its allocations. */
static CURL *easy_get(struct fg_proxy *px)
{
	CURL *e = NULL;
	pthread_mutex_lock(&px->mu);
	if (px->npool > 0)
		e = px->pool[--px->npool];
	pthread_mutex_unlock(&px->mu);
	return e ? e : curl_easy_init();
}

static void easy_put(struct fg_proxy *px, CURL *e)
{
	if (!e)
		return;
	curl_easy_reset(e);
	pthread_mutex_lock(&px->mu);
	if (px->npool < EASY_POOL) {
		px->pool[px->npool++] = e;
		e = NULL;
	}
	pthread_mutex_unlock(&px->mu);
	if (e)
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

/* The transfer ended (done, failed, aborted): tell the worker. */
static void ended(struct fg_proxy *px, struct fg_xfer *x, CURLcode code)
{
	/* A write cut off after it began may still be applied by the storage
	 * (its last byte may have left): its record stays until its recorded
	 * end, so no newer write overtakes it. Only an answered write, or one
	 * never begun, lets newer writes go at once. */
	bool over = code == CURLE_OK || !x->added;
	if (x->added) {
		uint64_t ns = fg_rec_now_ns() - x->started_ns;
		pthread_mutex_lock(&x->mu);
		int status = x->headers_done ? x->status : 0;
		x->up_ns = (int64_t)ns;
		pthread_mutex_unlock(&x->mu);
		fg_metrics_upstream(status, ns);
		/* the client is answered 502; the operator needs curl's why
		 * ("SSL certificate problem: unable to get local issuer
		 * certificate") */
		if (tls_failure(code))
			fg_log_warn("upstream %s:%s: TLS failed: %s",
				    px->gw->cfg->up.host, px->gw->cfg->up.port,
				    x->errbuf[0] ? x->errbuf : curl_easy_strerror(code));
		curl_multi_remove_handle(px->multi, x->easy);
		x->added = false;
		if (x->aprev)
			x->aprev->anext = x->anext;
		else
			px->active = x->anext;
		if (x->anext)
			x->anext->aprev = x->aprev;
	}
	pthread_mutex_lock(&x->mu);
	x->done = true;
	x->result = code;
	resume_locked(x, &x->waiting_headers);
	resume_locked(x, &x->download_suspended);
	resume_locked(x, &x->upload_suspended);
	resume_locked(x, &x->probe_wait);
	pthread_mutex_unlock(&x->mu);
	if (x->fenced && over)
		fence_finish(x);
	curl_slist_free_all(x->req_headers);
	x->req_headers = NULL;
	easy_put(px, x->easy);
	x->easy = NULL;
	xfer_put(x); /* the proxy thread's reference */
}

static void run_commands(struct fg_proxy *px)
{
	pthread_mutex_lock(&px->mu);
	struct fg_xfer *list = px->queue;
	px->queue = NULL;
	px->queue_tail = &px->queue;
	pthread_mutex_unlock(&px->mu);
	while (list) {
		struct fg_xfer *x = list;
		pthread_mutex_lock(&px->mu);
		list = x->qnext;
		unsigned cmd = x->pending;
		x->pending = 0;
		x->queued = false;
		pthread_mutex_unlock(&px->mu);

		if ((cmd & CMD_START) && x->easy && !x->added) {
			/* a write whose grant ended meanwhile is not begun:
			 * a request without a body would go out whole */
			pthread_mutex_lock(&x->mu);
			bool late = x->deadline && now_ms() >= x->deadline;
			if (late)
				x->deadline_hit = true;
			pthread_mutex_unlock(&x->mu);
			if (late)
				ended(px, x, CURLE_OPERATION_TIMEDOUT);
			else if (curl_multi_add_handle(px->multi, x->easy) == CURLM_OK) {
				x->added = true;
				x->started = now_ms();
				x->started_ns = fg_rec_now_ns();
				x->aprev = NULL;
				x->anext = px->active;
				if (px->active)
					px->active->aprev = x;
				px->active = x;
			} else {
				ended(px, x, CURLE_FAILED_INIT);
			}
		}
		if ((cmd & CMD_ABORT) && x->added)
			ended(px, x, CURLE_ABORTED_BY_CALLBACK);
		if (x->added && (cmd & (CMD_UNPAUSE_READ | CMD_UNPAUSE_WRITE))) {
			if (cmd & CMD_UNPAUSE_READ)
				x->read_paused = false;
			if (cmd & CMD_UNPAUSE_WRITE)
				x->write_paused = false;
			curl_easy_pause(x->easy, pause_bits(x));
		}
		xfer_put(x); /* the queue's reference */
	}
}

/* Deadlines of fenced writes and the bound on the response head. Returns
 * the ms until the next one is due. */
static long check_deadlines(struct fg_proxy *px)
{
	uint64_t now = now_ms();
	pthread_mutex_lock(&px->mu);
	bool recheck = px->recheck;
	px->recheck = false;
	pthread_mutex_unlock(&px->mu);
	long next = 1000;
	struct fg_xfer *x = px->active, *nx;
	for (; x; x = nx) {
		nx = x->anext;
		bool sent = false;
		if (x->fenced && !x->has_body) {
			/* a request without a body is written whole as soon as
			 * curl begins it */
			curl_off_t pre = 0;
			curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &pre);
			sent = pre > 0;
		}
		pthread_mutex_lock(&x->mu);
		sent = sent || x->upload_done;
		if (x->deadline && now >= x->deadline && sent && !x->grace) {
			/* Its last byte left before the deadline: the storage
			 * may be applying it now, and hanging up would answer
			 * "aborted" for a write that was applied. Its answer is
			 * awaited for the margin its record still covers; only
			 * then is it cut off. */
			x->grace = true;
			x->deadline = (x->released ? now : x->deadline) +
				      px->gw->cfg->fence_margin_ms;
		}
		uint64_t dl = x->deadline;
		bool headers = x->headers_done;
		bool ask = dl && !x->extending && !x->released && !x->grace &&
			   (recheck || x->reask || now + EXTEND_AHEAD_MS >= dl);
		if (ask) {
			x->extending = 1; /* pending: do_extend() takes it over */
			x->reask = false;
		}
		if (dl && now >= dl)
			x->deadline_hit = true;
		pthread_mutex_unlock(&x->mu);
		if (dl && now >= dl) {
			fg_log_warn("write to lock %s %s: aborted upstream",
				    fg_fence_first_write(&x->fence)->lock,
				    x->released ? "ended by a release" : "passed its deadline");
			ended(px, x, CURLE_OPERATION_TIMEDOUT);
			continue;
		}
		if (!headers && now >= x->started + px->gw->cfg->upstream_timeout_ms) {
			ended(px, x, CURLE_OPERATION_TIMEDOUT);
			continue;
		}
		if (ask) {
			xfer_get(x);
			do_extend(px->loop->as, x);
		}
		if (dl) {
			long in = (long)(dl - now);
			if (in > EXTEND_AHEAD_MS && in - EXTEND_AHEAD_MS < next)
				next = in - EXTEND_AHEAD_MS;
			else if (in < next)
				next = in;
		}
		if (!headers) {
			long in = (long)(x->started + px->gw->cfg->upstream_timeout_ms - now);
			if (in < next)
				next = in;
		}
	}
	return next < 1 ? 1 : next;
}

/* Transfers that curl reports done. */
static void read_done(struct fg_proxy *px)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(px->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct fg_xfer *x;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		ended(px, x, m->data.result);
	}
}

static void arm_deadlines(struct fg_proxy *px)
{
	long ms = check_deadlines(px);
	if (!px->active) {
		evtimer_del(px->deadline_timer);
		return;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(px->deadline_timer, &tv);
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct fg_proxy *px = arg;
	int running;
	int action = ((what & EV_READ) ? CURL_CSELECT_IN : 0) |
		     ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
	curl_multi_socket_action(px->multi, fd, action, &running);
	read_done(px);
}

static void on_curl_timer(evutil_socket_t fd, short what, void *arg)
{
	struct fg_proxy *px = arg;
	int running;
	(void)fd;
	(void)what;
	curl_multi_socket_action(px->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	read_done(px);
}

static void on_deadline_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	arm_deadlines(arg);
}

static void on_commands(evutil_socket_t fd, short what, void *arg)
{
	struct fg_proxy *px = arg;
	(void)fd;
	(void)what;
	run_commands(px);
	read_done(px);
	arm_deadlines(px);
}

/* curl asks to watch a socket (CURLMOPT_SOCKETFUNCTION). */
static int watch_socket(CURL *e, curl_socket_t fd, int what, void *userp,
			void *socketp)
{
	struct fg_proxy *px = userp;
	struct sock *sk = socketp;
	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (sk) {
			if (sk->added)
				event_del(&sk->ev);
			free(sk);
			curl_multi_assign(px->multi, fd, NULL);
		}
		return 0;
	}
	if (!sk) {
		sk = calloc(1, sizeof(*sk));
		if (!sk)
			return -1;
		curl_multi_assign(px->multi, fd, sk);
	} else if (sk->added) {
		event_del(&sk->ev);
	}
	short ev = EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
		   ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
	event_assign(&sk->ev, px->loop->base, fd, ev, on_socket_event, px);
	sk->added = event_add(&sk->ev, NULL) == 0;
	return 0;
}

/* curl asks for a timeout (CURLMOPT_TIMERFUNCTION); it is run from the
 * loop, never from inside this callback. */
static int set_curl_timer(CURLM *multi, long ms, void *userp)
{
	struct fg_proxy *px = userp;
	(void)multi;
	if (ms < 0) {
		evtimer_del(px->curl_timer);
		return 0;
	}
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(px->curl_timer, &tv);
	return 0;
}

struct fg_proxy *fg_proxy_create(struct fg_loop *loop)
{
	struct fg_gateway *gw = loop->gw;
	struct fg_proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return NULL;
	px->gw = gw;
	px->loop = loop;
	px->queue_tail = &px->queue;
	/* "" without an upstream: requests are answered 502 */
	px->base = gw->cfg->up.base;
	px->base_path = gw->cfg->up.base_path;
	pthread_mutex_init(&px->mu, NULL);
	px->cmd_ev = event_new(loop->base, -1, 0, on_commands, px);
	px->curl_timer = evtimer_new(loop->base, on_curl_timer, px);
	px->deadline_timer = evtimer_new(loop->base, on_deadline_timer, px);
	if (!px->cmd_ev || !px->curl_timer || !px->deadline_timer)
		goto error_events;
	px->multi = curl_multi_init();
	if (!px->multi)
		goto error_events;
	curl_multi_setopt(px->multi, CURLMOPT_MAXCONNECTS, 256L);
	curl_multi_setopt(px->multi, CURLMOPT_SOCKETFUNCTION, watch_socket);
	curl_multi_setopt(px->multi, CURLMOPT_SOCKETDATA, px);
	curl_multi_setopt(px->multi, CURLMOPT_TIMERFUNCTION, set_curl_timer);
	curl_multi_setopt(px->multi, CURLMOPT_TIMERDATA, px);
	return px;

error_events:
	if (px->cmd_ev)
		event_free(px->cmd_ev);
	if (px->curl_timer)
		event_free(px->curl_timer);
	if (px->deadline_timer)
		event_free(px->deadline_timer);
	pthread_mutex_destroy(&px->mu);
	free(px);
	return NULL;
}

void fg_proxy_shutdown(struct fg_proxy *px)
{
	if (!px)
		return;
	px->stopping = true;
	run_commands(px);
	while (px->active)
		ended(px, px->active, CURLE_ABORTED_BY_CALLBACK);
}

void fg_proxy_destroy(struct fg_proxy *px)
{
	if (!px)
		return;
	fg_proxy_shutdown(px);
	/* commands posted while the connections closed */
	run_commands(px);
	while (px->npool > 0)
		curl_easy_cleanup(px->pool[--px->npool]);
	curl_multi_cleanup(px->multi);
	event_free(px->cmd_ev);
	event_free(px->curl_timer);
	event_free(px->deadline_timer);
	pthread_mutex_destroy(&px->mu);
	free(px);
}

/* ---- the worker side --------------------------------------------------- */

struct hdr_ctx {
	struct curl_slist *list;
	bool shallow;           /* the client's Depth gives way to "Depth: 0" */
	bool probe;             /* a probe: no header that describes a body */
	const char *connection; /* the Connection header: names more hop headers */
	char xff[4096];         /* every X-Forwarded-For value, in order */
	size_t xff_len;
	bool failed;
};

static bool named_in_connection(const char *conn, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = conn; p && *p;) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		size_t n = strcspn(p, ", \t");
		if (n == nl && strncasecmp(p, name, n) == 0)
			return true;
		p += n;
	}
	return false;
}

/* Request headers the gateway never passes on: credentials for the gateway
 * (sequencers, leases, Fence-Authorization) stay here, the
 * gateway speaks for itself about forwarding, and the framing and the
 * Destination are the gateway's own (set in prepare()). */
static bool gateway_owned(const char *name)
{
	static const char *const names[] = {
		"Host", "Expect", "Fencing-Token", "Destination-Fencing-Token",
		"Fence-Lease", "X-Forwarded-Proto", "X-Forwarded-Host",
		"Forwarded", "Destination", "Fence-Authorization",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i]) == 0)
			return true;
	return false;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind,
				  const char *key, const char *value)
{
	struct hdr_ctx *h = cls;
	(void)kind;
	size_t kl = strlen(key);
	if (strcasecmp(key, "X-Forwarded-For") == 0) {
		int n = snprintf(h->xff + h->xff_len, sizeof(h->xff) - h->xff_len,
				 "%s%s", h->xff_len ? ", " : "", value);
		if (n < 0 || (size_t)n >= sizeof(h->xff) - h->xff_len) {
			h->failed = true; /* bounded like every header */
			return MHD_NO;
		}
		h->xff_len += (size_t)n;
		return MHD_YES;
	}
	if (hop_by_hop(key, kl) || gateway_owned(key) ||
	    named_in_connection(h->connection, key) ||
	    ((h->shallow || h->probe) && strcasecmp(key, "Depth") == 0) ||
	    (h->probe && (strncasecmp(key, "Content-", 8) == 0 ||
			  strcasecmp(key, "Overwrite") == 0)))
		return MHD_YES;
	size_t vl = strlen(value);
	char *line = malloc(kl + vl + 3);
	if (!line) {
		h->failed = true;
		return MHD_NO;
	}
	memcpy(line, key, kl);
	memcpy(line + kl, ": ", 2);
	memcpy(line + kl + 2, value, vl + 1);
	struct curl_slist *l = curl_slist_append(h->list, line);
	free(line);
	if (!l) {
		h->failed = true;
		return MHD_NO;
	}
	h->list = l;
	return MHD_YES;
}

static bool append(struct curl_slist **list, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool append(struct curl_slist **list, const char *fmt, ...)
{
	char line[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line))
		return false;
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return false;
	*list = l;
	return true;
}

static void client_ip(struct MHD_Connection *c, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(out, cap, "unknown");
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)cap);
}

/* The headers every request upstream carries: the client's, less those
 * that are the gateway's own or describe one hop, then the gateway's
 * forwarding headers. A probe leaves out those that describe a body and
 * Depth. Appends to *list (the caller frees it); false when a header could
 * not be added. */
static bool client_headers(struct MHD_Connection *c, bool shallow, bool probe,
			   struct curl_slist **list)
{
	char ip[64];
	struct hdr_ctx h = { *list, shallow, probe,
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION),
		{ 0 }, 0, false };
	MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
	client_ip(c, ip, sizeof(ip));
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);
	bool ok = !h.failed &&
		  (h.xff_len ? append(&h.list, "X-Forwarded-For: %s, %s", h.xff, ip)
			     : append(&h.list, "X-Forwarded-For: %s", ip)) &&
		  append(&h.list, "X-Forwarded-Proto: %s", fg_tls_on() ? "https" : "http") &&
		  (!host || append(&h.list, "X-Forwarded-Host: %s", host)) &&
		  append(&h.list, "Via: 1.1 fencegate") &&
		  append(&h.list, "Expect:") &&
		  (!(shallow || probe) || append(&h.list, "Depth: 0"));
	/* curl adds "Accept: * / *" to a request without one: not ours to add */
	if (ok && !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT))
		ok = append(&h.list, "Accept:");
	*list = h.list;
	return ok;
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
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->upstream_connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
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

/* Builds the curl handle of a transfer: the checked method, target and
 * body framing, nothing left for curl to choose. 0, or -1. */
static int prepare(struct fg_proxy *px, struct fg_xfer *x, struct fg_req *req,
		   struct MHD_Connection *c, const char *method)
{
	const struct fg_config *cfg = px->gw->cfg;
	char url[URL_MAX];
	if (snprintf(url, sizeof(url), "%s%s", px->base, req->uri) >= (int)sizeof(url))
		return -1;
	x->easy = easy_get(px);
	if (!x->easy)
		return -1;
	CURL *e = x->easy;

	struct curl_slist *list = NULL;
	bool ok = client_headers(c, req->shallow, false, &list);
	/* the Destination, as the upstream's absolute URI: its base URL, then
	 * the raw path that was resolved and checked (redirect.c) */
	if (ok && req->dest_raw) {
		char dest[URL_MAX];
		ok = fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					     req->dest_raw,
					     req->dest_raw_len, dest, sizeof(dest)) == 0 &&
		     append(&list, "Destination: %s", dest);
	}
	/* the number of the (first) lock the request writes, never a read's */
	if (ok && x->fenced && cfg->forward_token)
		ok = append(&list, "Fencing-Token: %" PRIu64,
			    fg_fence_first_write(&x->fence)->token);
	x->req_headers = list;
	if (!ok)
		return -1;

	x->chunked = req->body_chunked;
	x->body_length = req->body_length;
	x->has_body = !x->head && (req->body_chunked || req->body_length_given);

	easy_setup(e, x, url, cfg);
	if (x->head)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	/* Always explicit, and copied by curl: a body never turns the method
	 * into a PUT, and nothing shortens it. */
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (x->has_body) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 65536L);
		/* the length read is the length sent; a chunked body stays
		 * chunked (curl frames an upload of unknown size that way) */
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 x->chunked ? (curl_off_t)-1 : (curl_off_t)x->body_length);
		x->rq = malloc(BUF);
		if (!x->rq)
			return -1;
	}
	x->rs = malloc(BUF);
	return x->rs ? 0 : -1;
}

/* Was this write's grant ended ('x'), or its lease shortened ('e', with
 * the earliest deadline said in *dl), before its transfer was
 * registered? 0 if neither; an end wins. */
static char aborted_before(struct fg_proxy *px, const char *write_id,
			   uint64_t *dl)
{
	unsigned n = px->naborted < ABORTED_RING ? px->naborted : ABORTED_RING;
	char kind = 0;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(px->aborted[i], write_id) != 0)
			continue;
		if (px->aborted_kind[i] == 'e' && (!*dl || px->aborted_dl[i] < *dl))
			*dl = px->aborted_dl[i];
		if (!kind || px->aborted_kind[i] == 'x')
			kind = px->aborted_kind[i];
	}
	return kind;
}

static enum MHD_Result respond_released(struct MHD_Connection *c,
					const struct fg_fence *f)
{
	return fg_respond_error(c, FG_E_STALE_TOKEN,
		"the grant was released or broken; its write was not forwarded",
		json_pack("{s:I, s:n}", "token",
			  (json_int_t)fg_fence_first_write(f)->token, "current"));
}

/* Starts the upstream request of an admitted (or unfenced) request. */
static enum MHD_Result start(struct fg_req *req, struct MHD_Connection *c,
			     const char *method, const struct fg_fence *f,
			     bool fenced)
{
	struct fg_proxy *px = req->loop->px;
	if (!px->base[0]) {
		if (fenced)
			fg_fencing_finish(req->loop, &req->fence);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"no upstream is configured", NULL);
	}
	struct fg_xfer *x = xfer_new(px, c);
	if (!x) {
		if (fenced)
			fg_fencing_finish(req->loop, &req->fence);
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	x->head = strcmp(method, "HEAD") == 0;
	if (fenced) {
		x->fence = *f;
		x->fenced = true;
		x->deadline = f->deadline_at;
		for (int i = 0; i < f->n; i++)
			x->mdeadline[i] = f->m[i].deadline_at;
		x->longest_end = now_ms() + px->gw->cfg->write_max_ms;
	}
	req->xfer = x;
	bool released = false;
	if (fenced) {
		pthread_mutex_lock(&px->mu);
		uint64_t dl = 0;
		char early = aborted_before(px, x->fence.write_id, &dl);
		released = early == 'x';
		x->reask = early == 'e';
		if (x->reask)
			clamp_deadline(x, dl);
		if (!released) {
			HASH_ADD_STR(px->writes, fence.write_id, x);
			x->registered = true;
		}
		pthread_mutex_unlock(&px->mu);
	}
	if (released || prepare(px, x, req, c, method)) {
		easy_put(px, x->easy);
		curl_slist_free_all(x->req_headers);
		x->easy = NULL;
		x->req_headers = NULL;
		if (fenced)
			fence_finish(x);
		x->refs = 1;
		if (released)
			return respond_released(c, f);
		return fg_respond_error(c, FG_E_INTERNAL, "cannot build the upstream request", NULL);
	}
	post(x, CMD_START);
	if (x->has_body)
		hup_watch(x);
	return MHD_YES;
}

/* ---- is it a collection? ---------------------------------------------- */

/* A MOVE of a collection takes its members along, and a COPY or MOVE with
 * Overwrite deletes an existing Destination whole before it writes (RFC
 * 4918 9.8.4): when a MOVE's path or a Destination is named without its
 * '/' and no one lock guards what it would hold (writeset.h), the storage
 * is asked first, with a PROPFIND of Depth 0. The write is admitted
 * already (its record covers the question); the connection waits for the
 * answer. Only the asked path's lock holder can change what kind of object
 * it is meanwhile (safety.md 8.4). */
static const char PROBE_BODY[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>"
	"<D:propfind xmlns:D=\"DAV:\"><D:prop><D:resourcetype/></D:prop></D:propfind>";

static bool wants_probe(struct fg_req *req, struct MHD_Connection *c)
{
	if (req->probe_path)
		return true;
	if (!req->probe_dest)
		return false;
	const char *ow = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Overwrite");
	/* "F": an existing Destination is left alone (412) */
	return !(ow && strcasecmp(ow, "F") == 0);
}

static enum MHD_Result probe_start(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_proxy *px = req->loop->px;
	const struct fg_config *cfg = px->gw->cfg;
	char url[URL_MAX];
	struct fg_xfer *x = NULL;
	/* the request path first (a MOVE's), then the Destination */
	bool path = req->probe_path;
	if (path)
		req->probe_path = false;
	else
		req->probe_dest = false;
	if (!px->base[0] ||
	    (path ? snprintf(url, sizeof(url), "%s%s", px->base, req->uri) >=
			    (int)sizeof(url)
		  : fg_redirect_destination(cfg->up.base, cfg->up.base_path,
					    req->dest_raw, req->dest_raw_len,
					    url, sizeof(url)) != 0))
		goto error;
	x = xfer_new(px, c);
	if (!x)
		goto error;
	x->probe = true;
	x->rs = malloc(BUF);
	x->easy = easy_get(px);
	/* the client's own headers (its credentials for the storage, its
	 * User-Agent): the storage answers the probe as it will the write */
	if (!x->rs || !x->easy ||
	    !client_headers(c, false, true, &x->req_headers) ||
	    !append(&x->req_headers, "Content-Type: application/xml"))
		goto error_xfer;
	CURL *e = x->easy;
	easy_setup(e, x, url, cfg);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PROPFIND");
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, PROBE_BODY);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)(sizeof(PROBE_BODY) - 1));
	req->xfer = x;
	x->probe_wait = true;
	MHD_suspend_connection(c);
	post(x, CMD_START);
	return MHD_YES;

error_xfer:
	easy_put(px, x->easy);
	curl_slist_free_all(x->req_headers);
	x->easy = NULL;
	x->req_headers = NULL;
	x->refs = 1;
	xfer_put(x);
error:
	fg_fencing_finish(req->loop, &req->fence);
	return fg_respond_error(c, FG_E_INTERNAL, "cannot build the upstream request", NULL);
}

/* Does a 207 answer to the probe name a collection: an element named
 * "collection", with or without a prefix (only resourcetype was asked)? */
static bool names_collection(const char *body, size_t len)
{
	static const char word[] = "collection";
	const size_t wl = sizeof(word) - 1;
	for (size_t i = 0; i + wl < len; i++) {
		if (body[i] != '<')
			continue;
		size_t j = i + 1, k = j;
		while (k < len && body[k] != ':' && body[k] != '>' &&
		       body[k] != '/' && body[k] != ' ' && k - j <= 64)
			k++;
		if (k < len && body[k] == ':')
			j = k + 1;
		if (j + wl < len && memcmp(body + j, word, wl) == 0 &&
		    (body[j + wl] == '/' || body[j + wl] == '>' ||
		     body[j + wl] == ' ' || body[j + wl] == '\t' ||
		     body[j + wl] == '\r' || body[j + wl] == '\n'))
			return true;
	}
	return false;
}

/* The probe ended (the request's first call, resumed): answers the
 * request, asks the next question, or starts its transfer; the body, if
 * any, comes in the calls that follow. */
static enum MHD_Result probe_settle(struct fg_req *req, struct MHD_Connection *c,
				    const char *method)
{
	struct fg_xfer *x = req->xfer;
	pthread_mutex_lock(&x->mu);
	bool done = x->done, answered = x->done && x->result == CURLE_OK && x->headers_done;
	int status = x->status;
	bool coll = answered && status == 207 && names_collection(x->rs, x->rs_len);
	if (!done) {
		x->probe_wait = true; /* called again before it ended */
		MHD_suspend_connection(c);
	}
	pthread_mutex_unlock(&x->mu);
	if (!done)
		return MHD_YES;
	req->xfer = NULL;
	xfer_put(x);
	if (fg_loop_client_gone(c)) {
		fg_fencing_finish(req->loop, &req->fence);
		return MHD_NO;
	}
	/* Only a 207 that names no collection, or a 404 (nothing there),
	 * says it is not one; a redirect, a refusal or a failure says
	 * nothing, and the write is not risked on it. */
	if (!answered || !((status == 207 && !coll) || status == 404)) {
		char msg[128];
		if (answered)
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection (it answered %d)", status);
		else
			snprintf(msg, sizeof(msg), "the upstream did not say whether "
				 "the path is a collection");
		fg_fencing_finish(req->loop, &req->fence);
		if (coll)
			return fg_respond_error(c, FG_E_SUBTREE_UNGUARDED,
				"the upstream holds a collection there, and one lock "
				"does not guard all of it", NULL);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE, msg, NULL);
	}
	if (wants_probe(req, c))
		return probe_start(req, c);
	return start(req, c, method, &req->fence, true);
}

void fg_proxy_recheck_writes(struct fg_proxy *px)
{
	pthread_mutex_lock(&px->mu);
	px->recheck = true;
	pthread_mutex_unlock(&px->mu);
	event_active(px->cmd_ev, EV_READ, 0);
}

/* 'x': the write's grant ended; 'e': its lease ends sooner than its
 * deadline was set for, by `dl` (monotonic ms) at the latest. */
static void tell_write(struct fg_proxy *px, const char *write_id, char kind,
		       uint64_t dl)
{
	struct fg_xfer *x;
	pthread_mutex_lock(&px->mu);
	HASH_FIND_STR(px->writes, write_id, x);
	if (x) {
		pthread_mutex_lock(&x->mu);
		bool alive = x->refs > 0; /* else being freed */
		if (alive && kind == 'x') {
			x->refs++;
			x->released = true;
			/* not one more byte: on_read and check_deadlines() see
			 * a deadline in the past */
			x->deadline = 1;
		} else if (alive) {
			x->refs++;
			clamp_deadline(x, dl);
			x->reask = true; /* check_deadlines() asks at once */
		}
		pthread_mutex_unlock(&x->mu);
		if (!alive)
			x = NULL;
	} else {
		unsigned i = px->naborted % ABORTED_RING;
		snprintf(px->aborted[i], sizeof(px->aborted[0]), "%s", write_id);
		px->aborted_kind[i] = kind;
		px->aborted_dl[i] = dl;
		px->naborted++;
	}
	pthread_mutex_unlock(&px->mu);
	if (x) {
		event_active(px->cmd_ev, EV_READ, 0);
		xfer_put(x);
	}
}

void fg_proxy_abort_write(struct fg_proxy *px, const char *write_id)
{
	tell_write(px, write_id, 'x', 1);
}

void fg_proxy_reask_write(struct fg_proxy *px, const char *write_id,
			  long long ends_in_ms)
{
	/* counted from now, later than Redis' moment by the message's trip:
	 * the record keeps the margin for that (docs/safety.md 10.1) */
	long long left = ends_in_ms - (long long)px->gw->cfg->fence_margin_ms;
	uint64_t now = now_ms();
	tell_write(px, write_id, 'e', left > 0 ? now + (uint64_t)left : 1);
}

static const char *upstream_error(CURLcode code, enum fg_error *e)
{
	switch (code) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
		*e = FG_E_UPSTREAM_UNAVAILABLE;
		return NULL;
	case CURLE_OPERATION_TIMEDOUT:
		*e = FG_E_UPSTREAM_TIMEOUT;
		return NULL;
	default:
		*e = FG_E_UPSTREAM_UNAVAILABLE;
		return curl_easy_strerror(code);
	}
}

static ssize_t on_content(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fg_xfer *x = cls;
	(void)pos;
	pthread_mutex_lock(&x->mu);
	if (x->rs_len > 0) {
		size_t n = x->rs_len < max ? x->rs_len : max;
		memcpy(buf, x->rs, n);
		memmove(x->rs, x->rs + n, x->rs_len - n);
		x->rs_len -= n;
		x->resp_sent += n;
		bool wake = x->write_wants_room;
		x->write_wants_room = false;
		pthread_mutex_unlock(&x->mu);
		if (wake)
			post(x, CMD_UNPAUSE_WRITE);
		return (ssize_t)n;
	}
	if (x->done) {
		ssize_t r = x->result == CURLE_OK ? MHD_CONTENT_READER_END_OF_STREAM
						  : MHD_CONTENT_READER_END_WITH_ERROR;
		pthread_mutex_unlock(&x->mu);
		return r;
	}
	x->download_suspended = true;
	MHD_suspend_connection(x->conn);
	pthread_mutex_unlock(&x->mu);
	return 0;
}

static void on_content_free(void *cls)
{
	xfer_put(cls);
}

/* The newest token of a write's lock, for the answer to a late write. */
static void on_current(int err, const struct fg_check *chk, void *arg)
{
	struct fg_xfer *x = arg;
	if (!err && chk->has_current) {
		x->cur_known = true;
		x->cur = chk->current;
	}
	fg_loop_resume(x->px->loop, x->conn);
	xfer_put(x);
}

/* The request body is in and the response head is known: answer. */
static enum MHD_Result respond(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_xfer *x = req->xfer;
	pthread_mutex_lock(&x->mu);
	if (x->headers_done && x->too_many_headers) {
		pthread_mutex_unlock(&x->mu);
		return fg_respond_error(c, FG_E_UPSTREAM_UNAVAILABLE,
					"the upstream sent more headers than the gateway forwards",
					NULL);
	}
	if (!x->headers_done) {
		CURLcode code = x->result;
		bool deadline = x->deadline_hit, released = x->released;
		/* cut off after its whole request had left: the upstream may
		 * have applied it, and the answer says so */
		bool sent = x->grace;
		pthread_mutex_unlock(&x->mu);
		if (deadline) {
			/* a rare answer: worth one more round trip for "current" */
			const struct fg_fence_lock *m = fg_fence_first_write(&x->fence);
			if (!x->cur_asked) {
				x->cur_asked = true;
				xfer_get(x);
				if (req->loop->as &&
				    fg_alock_check(req->loop->as, m->lock, m->token,
						   on_current, x) == FG_OK) {
					MHD_suspend_connection(c);
					return MHD_YES;
				}
				xfer_put(x);
			}
			bool known = x->cur_known;
			const char *msg =
				sent ? (released ? "the grant was released or broken before "
						   "the upstream answered the write; the gateway hung up, and "
						   "the upstream may have applied it"
						 : "the lease ran out before the upstream answered "
						   "the write; the gateway hung up, and the "
						   "upstream may have applied it")
				     : (released ? "the grant was released or broken before "
						   "the write finished; it was aborted upstream"
						 : "the lease ran out before the write finished; "
						   "it was aborted upstream");
			return fg_respond_error(c, FG_E_STALE_TOKEN, msg,
				json_pack("{s:I, s:o}", "token", (json_int_t)m->token,
					  "current", known ? json_integer((json_int_t)x->cur)
							   : json_null()));
		}
		enum fg_error e;
		const char *msg = upstream_error(code, &e);
		return fg_respond_error(c, e, msg, NULL);
	}
	/* The upstream's Content-Length is the body's length (curl undoes no
	 * content coding here); without one the answer is chunked. */
	uint64_t size = x->content_length >= 0 ? (uint64_t)x->content_length
					       : MHD_SIZE_UNKNOWN;
	/* 204 and 304 carry no body. libmicrohttpd 0.9.75 still writes
	 * "Content-Length: 0" on a 304 (an unknown size would make it chunk
	 * or downgrade the response, which is worse); docs/api.md says so. */
	if (x->status == 204 || x->status == 304)
		size = 0;
	struct MHD_Response *r = MHD_create_response_from_callback(
		size, 32 * 1024, on_content, x, on_content_free);
	if (!r) {
		pthread_mutex_unlock(&x->mu);
		return MHD_NO;
	}
	x->refs++; /* the response's */
	const struct fg_config *cfg = req->gw->cfg;
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);
	for (int i = 0; i < x->nhdrs; i++) {
		const char *name = x->hdrs[i].name, *value = x->hdrs[i].value;
		if (named_in_connection(x->resp_connection, name))
			continue;
		char *mine = NULL;
		if (cfg->proxy_redirect && (strcasecmp(name, "Location") == 0 ||
					    strcasecmp(name, "Content-Location") == 0))
			mine = fg_redirect_answer(cfg->up.base, cfg->up.base_path,
						  value, fg_tls_on() ? "https" : "http", host);
		MHD_add_response_header(r, name, mine ? mine : value);
		free(mine);
	}
	int status = x->status;
	pthread_mutex_unlock(&x->mu);
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	fg_rec_answered((unsigned)status, -1, 0); /* the body is counted as sent */
	return ret;
}

/* Parks a write until the wait loop admits its waiting member. */
static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method);

/* Notes a verdict that decides the request in its record. */
static void note_verdict(struct fg_req *req, enum fg_fencing v)
{
	struct fg_rec *r = &req->rec;
	if (v == FG_FENCING_PENDING || v == FG_FENCING_WAIT)
		return;
	r->fenced = req->fence.n > 0 || v != FG_FENCING_PASS;
	if (r->fenced)
		r->admit_ns = (int64_t)(fg_rec_now_ns() - r->fence_t0_ns);
	if (v == FG_FENCING_PASS)
		r->decision = req->fence.n > 0 ? FG_DEC_CHECKED : FG_DEC_PASS;
	else if (v == FG_FENCING_ADMITTED)
		r->decision = FG_DEC_ADMITTED;
	else if (r->decision == FG_DEC_NONE) {
		/* answered without a refusal of its own: Redis down and the
		 * like; its error is the reason */
		r->decision = FG_DEC_REFUSED;
		r->refusal = r->error;
	}
}

static enum MHD_Result admitted_or_wait(struct fg_req *req, struct MHD_Connection *c,
					const char *method, enum fg_fencing v)
{
	note_verdict(req, v);
	switch (v) {
	case FG_FENCING_PENDING:
		return MHD_YES; /* suspended until Redis answers */
	case FG_FENCING_PASS:
		return start(req, c, method, NULL, false);
	case FG_FENCING_ADMITTED:
		if (wants_probe(req, c))
			return probe_start(req, c);
		return start(req, c, method, &req->fence, true);
	case FG_FENCING_WAIT:
		return wait_admission(req, c, method);
	case FG_FENCING_ANSWERED:
	default:
		return MHD_YES;
	}
}

static enum MHD_Result after_admission(struct fg_req *req, struct MHD_Connection *c,
				       const char *method)
{
	struct fg_admit a;
	uint64_t deadline_at;
	enum fg_admission_result res = fg_admitq_result(req->admission, &a, &deadline_at);
	fg_admitq_drop(req->admission);
	req->admission = NULL;
	switch (res) {
	case FG_ADMISSION_ADMITTED:
		return admitted_or_wait(req, c, method,
					fg_fencing_wait_admitted(req, c, method,
								 deadline_at));
	case FG_ADMISSION_REFUSED:
		return fg_fencing_wait_refused(req, c, method, &a);
	case FG_ADMISSION_GONE:
		return MHD_NO;
	default:
		return fg_respond_store_error(c, FG_EUNAVAIL);
	}
}

static enum MHD_Result wait_admission(struct fg_req *req, struct MHD_Connection *c,
				      const char *method)
{
	const struct fg_fence_lock *m = &req->fence.m[req->fence.waiting];
	req->admission = fg_admitq_new(req->loop->aq, m->lock, m->token,
				      req->fence.write_id,
				      req->gw->cfg->fence_margin_ms,
				      req->gw->cfg->write_max_ms);
	if (!req->admission)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	if (fg_admitq_park(req->admission, c, req->fence.ms))
		return MHD_YES;
	return after_admission(req, c, method);
}

static bool bodyless_read(const char *method)
{
	return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	       strcmp(method, "OPTIONS") == 0;
}

/* The WebDAV headers the gateway decides by (which objects a request
 * touches, whether it replaces a collection) each have one value: sent
 * twice, the gateway would check one and a storage might act on the
 * other. */
static const char *const single_headers[] = { "Depth", "Overwrite", "Destination" };
#define NSINGLE (sizeof(single_headers) / sizeof(single_headers[0]))

static enum MHD_Result count_single(void *cls, enum MHD_ValueKind kind,
				    const char *key, const char *value)
{
	unsigned *n = cls;
	(void)kind;
	(void)value;
	for (size_t i = 0; i < NSINGLE; i++)
		if (strcasecmp(key, single_headers[i]) == 0)
			n[i]++;
	return MHD_YES;
}

/* The first single-valued header that came twice, or NULL. */
static const char *repeated_header(struct MHD_Connection *c)
{
	unsigned n[NSINGLE] = { 0 };
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_single, n);
	for (size_t i = 0; i < NSINGLE; i++)
		if (n[i] > 1)
			return single_headers[i];
	return NULL;
}

enum MHD_Result fg_proxy_handle(struct fg_req *req, struct MHD_Connection *c,
				const char *method, const char *upload,
				size_t *upload_size)
{
	if (!req->started) {
		req->started = true;
		/* origin-form only; a '#' would let the storage see a shorter
		 * path than the one the guard lock was chosen from */
		if (req->uri[0] != '/' || strchr(req->uri, '#'))
			return fg_respond_error(c, FG_E_BAD_REQUEST,
						"only origin-form request targets without '#' are proxied",
						NULL);
		if (strcmp(method, "CONNECT") == 0 || strcmp(method, "TRACE") == 0)
			return fg_respond_not_allowed(c, PROXY_ALLOW);
		if (strlen(req->loop->px->base) + strlen(req->uri) >= URL_MAX)
			return fg_respond_error(c, FG_E_BAD_REQUEST,
						"the request target is too long", NULL);
		/* a body would make another request of it (curl uploads) */
		if (bodyless_read(method) && (req->body_chunked || req->body_length > 0))
			return fg_respond_error_close(c, FG_E_BAD_REQUEST,
				"GET, HEAD and OPTIONS requests carry no body here");
		const char *twice = repeated_header(c);
		if (twice) {
			char msg[96];
			snprintf(msg, sizeof(msg), "more than one %s header", twice);
			return fg_respond_error_close(c, FG_E_BAD_REQUEST, msg);
		}
		struct fg_writeset ws;
		bool has_token = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     "Fencing-Token") != NULL;
		enum fg_error e = fg_writeset_build(
			req->gw->cfg, method, req->uri,
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Destination"),
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
			has_token, &ws);
		enum MHD_Result ret;
		if (e != FG_E_COUNT && !fg_access_proxy(req, c, method, NULL, &ret))
			return ret;
		if (e != FG_E_COUNT)
			return fg_respond_error(c, e,
				e == FG_E_BAD_LOCK_NAME
					? "this path maps to no valid lock name; add a route rule"
					: NULL,
				NULL);
		if (!fg_access_proxy(req, c, method, &ws, &ret))
			return ret;
		req->shallow = ws.shallow;
		req->probe_path = ws.probe_path;
		req->probe_dest = ws.probe_dest;
		if (ws.has_dest) {
			/* ws.dest_raw points into the Destination header, which
			 * lives as long as the request */
			req->dest_raw = ws.dest_raw;
			req->dest_raw_len = ws.dest_raw_len;
		}
		req->rec.fence_t0_ns = fg_rec_now_ns();
		return admitted_or_wait(req, c, method,
					fg_fencing_start(req, c, method, &ws));
	}
	if (req->admission)
		return after_admission(req, c, method);
	if (fg_fence_calling(&req->fence))
		return admitted_or_wait(req, c, method,
					fg_fencing_resume(req, c, method));

	struct fg_xfer *x = req->xfer;
	if (x && x->probe)
		return probe_settle(req, c, method);
	if (!x)
		return MHD_YES; /* answered already; MHD drains the body */
	if (*upload_size) {
		pthread_mutex_lock(&x->mu);
		if (x->done || !x->rq) {
			*upload_size = 0; /* the answer is decided: drop the body */
			pthread_mutex_unlock(&x->mu);
			return MHD_YES;
		}
		size_t n = BUF - x->rq_len;
		if (n > *upload_size)
			n = *upload_size;
		memcpy(x->rq + x->rq_len, upload, n);
		x->rq_len += n;
		req->rec.bytes_in += n;
		*upload_size -= n;
		bool waits = *upload_size == 0;
		if (!waits) {
			x->upload_suspended = true;
			MHD_suspend_connection(c);
		}
		bool wake = x->want_data;
		x->want_data = false;
		pthread_mutex_unlock(&x->mu);
		if (waits)
			hup_watch(x);
		if (wake)
			post(x, CMD_UNPAUSE_READ);
		return MHD_YES;
	}
	hup_unwatch(x);
	pthread_mutex_lock(&x->mu);
	bool wake = false;
	if (!x->req_done) {
		x->req_done = true;
		wake = x->want_data;
		x->want_data = false;
	}
	if (!x->headers_done && !x->done) {
		x->waiting_headers = true;
		MHD_suspend_connection(c);
		pthread_mutex_unlock(&x->mu);
		if (wake)
			post(x, CMD_UNPAUSE_READ);
		return MHD_YES;
	}
	pthread_mutex_unlock(&x->mu);
	if (wake)
		post(x, CMD_UNPAUSE_READ);
	return respond(req, c);
}

static void note(struct fg_req *req)
{
	const struct fg_fence *f = &req->fence;
	struct fg_rec *r = &req->rec;
	r->write = f->write;
	r->nlocks = f->n;
	for (int i = 0; i < f->n && i < 2; i++) {
		r->locks[i] = f->m[i].lock;
		r->tokens[i] = f->m[i].token;
	}
	struct fg_xfer *x = req->xfer;
	if (!x)
		return;
	pthread_mutex_lock(&x->mu);
	req->rec.upstream_status = x->headers_done ? x->status : 0;
	req->rec.upstream_ns = x->up_ns;
	req->rec.bytes_out += x->resp_sent;
	pthread_mutex_unlock(&x->mu);
}

static void completed(struct fg_req *req)
{
	fg_admitq_drop(req->admission);
	req->admission = NULL;
	struct fg_xfer *x = req->xfer;
	if (!x)
		return;
	req->xfer = NULL;
	hup_unwatch(x);
	if (x->probe) /* the write it was asked for never starts */
		fg_fencing_finish(req->loop, &req->fence);
	pthread_mutex_lock(&x->mu);
	x->mhd_gone = true;
	bool running = !x->done;
	pthread_mutex_unlock(&x->mu);
	if (running)
		post(x, CMD_ABORT);
	xfer_put(x);
}

void fg_proxy_finish(struct fg_req *req)
{
	note(req);
	completed(req);
}
