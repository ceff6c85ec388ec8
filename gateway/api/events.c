/*
 * events.c - GET /_fence/v1/events (contract v1.5): what happened to the
 * locks under a prefix, as one JSON answer (a long poll with wait_ms) or
 * as a Server-Sent Events stream (Accept: text/event-stream).
 *
 * A reader (struct fg_evreader, one per request) reads in two phases:
 *
 *   HISTORY  what the process's ring (proc/evfeed.h) may not hold: from
 *            the oldest retained, or after an id older than the ring's
 *            start. A blocking XRANGE, so never on the loop: the read is
 *            a job for the feed's history thread (a queue of
 *            FG_EVFEED_JOBS_MAX jobs for the process, FG_EVFEED_SCAN
 *            entries a job; a full queue is answered 503 to a read, and
 *            a stream asks again later, RETRY_MIN_MS doubling to
 *            RETRY_MAX_MS, so that a crowd reconnecting at once is let
 *            in as the queue drains), and the loop is told when it is
 *            done. A stream reads its history a page
 *            at a time, the next one only once what it has to send fell
 *            below LOW_WATER, so a client that reads slowly slows its
 *            own replay and nothing else.
 *   LIVE     the ring, from the reader's place in it: at each turn the
 *            loop is told the ring grew, every live reader copies what it
 *            may show. No Redis call: idle readers cost Redis nothing.
 *
 * A long poll starts LIVE when the ring holds everything after its
 * `after`; a read that answers at once, a stream, and a long poll the
 * ring does not cover start in HISTORY (so that what was recorded before
 * the request is in its answer, whatever the follower read by then), and
 * go LIVE once a history read reached the end; a
 * reader that lost its place in the ring (it was pushed out first) reads
 * history again from where it was. `floor` is the last entry read, shown
 * or not: it is the answer's `next`, and an entry at or before it is
 * never shown twice.
 *
 * Each event is shown when its lock starts with the prefix and the
 * principal may observe it under the table in force at that moment
 * (fg_access_now(): a principal removed meanwhile ends the reader).
 *
 * A long poll parks its connection (rt/park.h: the client's close
 * watched, one timer for wait_ms) and is answered from the handler when
 * it is resumed. A stream is a libmicrohttpd callback response fed from
 * the reader's buffer, which is allocated when there is something to
 * send and freed once it is sent (an idle stream holds none); when it is
 * empty the content callback parks the connection (the client's close
 * watched, the keep-alive timer) and returns 0, and whatever fills it
 * resumes it. A stream whose unsent bytes would pass FG_SSE_BUFFER_MAX is
 * cut off and counted (fencegate_event_readers_cut_total).
 *
 * Invariants: everything runs on the request's loop; a reader is freed
 * when both its request and its response (a stream's) let go of it
 * (refs); a job in flight is never freed by the reader: it is cancelled
 * and freed when the feed hands it back (or by the feed at its end);
 * every park is resumed exactly once (park.h), and fg_evapi_stop()
 * resumes all of them before the daemon stops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "access/access.h"
#include "api/events.h"
#include "base/auth.h"
#include "base/clock.h"
#include "base/evquery.h"
#include "base/evtext.h"
#include "base/text.h"
#include "http/framing.h"
#include "http/req.h"
#include "http/respond.h"
#include "proc/evfeed.h"
#include "proc/gateway.h"
#include "proc/metrics.h"
#include "rt/park.h"
#include "rt/rt.h"

/* A stream's history page: events kept per read. LOW_WATER plus a page
 * of the largest events the gateway writes (about 1.5 KiB a frame) stays
 * below FG_SSE_BUFFER_MAX, so a reader that reads is never cut off by its
 * own replay. */
#define SSE_PAGE 64
/* A stream reads its next page of history once less than this waits. */
#define LOW_WATER (64 * 1024)
#define RETRY_MIN_MS 50    /* a stream the history queue had no room for */
#define RETRY_MAX_MS 1000
/* The block libmicrohttpd hands the content callback: small, as it is
 * allocated with every stream's response whether or not it sends. */
#define SSE_BLOCK 1024
/* The first allocation of a reader's buffer (it doubles). */
#define BUF_FIRST 4096
/* Query parameters looked at, at most (more: 400). */
#define ARGS_MAX 8

enum phase {
	PH_HISTORY,   /* a job in flight (or to be asked for) */
	PH_LIVE,      /* reading the ring */
	PH_DONE,      /* a long poll's answer is ready; a stream ended */
};

struct fg_evreaders {
	struct fg_loop *loop;
	struct fg_evfeed *feed;
	struct fg_evreader *all;     /* every reader of the loop */
	bool stopping;
};

struct fg_evreader {
	struct fg_evreaders *rs;
	struct fg_req *req;          /* NULL once it completed */
	struct MHD_Connection *conn;
	struct fg_evreader *prev, *next;
	int refs;                    /* the request; a stream's response */
	enum phase phase;
	bool sse;
	struct fg_evq q;
	struct fg_ev_cursor floor;   /* the last entry read */
	uint64_t pos;                /* LIVE: the next ring number */
	struct fg_evjob *job;        /* in flight */
	struct fg_park park;
	/* long poll: the events' JSON joined by ','; stream: frames */
	char *buf;
	size_t len, off, cap;
	unsigned count;              /* long poll: events in buf */
	bool gap;
	bool gone;                   /* the client left */
	bool failed;                 /* long poll: answer `fail` */
	enum fg_error fail;
	const char *fail_msg;
	bool answered;               /* long poll: its answer was queued */
	uint64_t deadline_ms;        /* long poll: fg_clock_ms() */
	bool more;                   /* stream: history is not read up */
	unsigned retry_ms;           /* stream: the queue was full; asks
					again this long after (0: it was not) */
	bool ended;                  /* stream: end it when buf is sent */
	uint64_t sent_ms;            /* stream: bytes last handed over */
	/* what one read shows (collect()) */
	const struct fg_principal *p;
	uint64_t min_ms;
};

/* ---- readers -------------------------------------------------------- */

static void unref(struct fg_evreader *r)
{
	if (--r->refs > 0)
		return;
	free(r->buf);
	free(r);
}

static void unlist(struct fg_evreader *r)
{
	struct fg_evreaders *rs = r->rs;
	if (!rs)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		rs->all = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
	r->rs = NULL;
	fg_metrics_gauge_add(FG_GAUGE_EVENT_READERS, -1);
	fg_evfeed_reader(rs->feed, false);
}

/* A job in flight is the feed's until it hands it back: only let go. */
static void drop_job(struct fg_evreader *r)
{
	if (!r->job)
		return;
	atomic_store(&r->job->cancelled, true);
	r->job->owner = NULL;
	r->job = NULL;
}

static bool room(struct fg_evreader *r, size_t n)
{
	return fg_block_room(&r->buf, &r->cap, r->len, n, BUF_FIRST);
}

static size_t unsent(const struct fg_evreader *r)
{
	return r->len - r->off;
}

/* ---- what a reader shows ----------------------------------------------- */

/* The principal under the table in force, and the age bound, for one
 * read. False: the principal is gone (the reader ends). */
static bool begin_read(struct fg_evreader *r)
{
	r->min_ms = fg_evfeed_min_ms(r->rs->feed);
	return !r->req || fg_access_now(r->req, &r->p);
}

static bool shown(const struct fg_evreader *r, const struct fg_evitem *it)
{
	return it->at_ms >= r->min_ms &&
	       fg_ev_under(it, r->q.prefix, r->q.prefix_len) &&
	       (!r->p || fg_principal_may(r->p, FG_RIGHT_OBSERVE, it->lock));
}

static void cut(struct fg_evreader *r);

/* Adds item it to what the reader sends. False: no more (a long poll's
 * limit, a stream cut off). */
static bool take(struct fg_evreader *r, const struct fg_evitem *it)
{
	if (fg_ev_cursor_cmp(&it->cur, &r->floor) <= 0)
		return true; /* read already */
	r->floor = it->cur;
	if (!shown(r, it))
		return true;
	if (r->sse) {
		size_t n = fg_sse_frame_len(it);
		if (unsent(r) + n > FG_SSE_BUFFER_MAX) {
			cut(r);
			return false;
		}
		if (!room(r, n)) {
			cut(r);
			return false;
		}
		r->len += fg_sse_frame(it, r->buf + r->len);
		return true;
	}
	if (!room(r, it->json_len + 1)) {
		r->failed = true;
		r->fail = FG_E_INTERNAL;
		r->fail_msg = "out of memory";
		return false;
	}
	if (r->count)
		r->buf[r->len++] = ',';
	memcpy(r->buf + r->len, it->json, it->json_len);
	r->len += it->json_len;
	return ++r->count < r->q.limit;
}

static bool visit(void *arg, const struct fg_evitem *it)
{
	return take(arg, it);
}

/* ---- answering ------------------------------------------------------------ */

/* The long poll is answered: from the handler, once resumed. */
static void finish_poll(struct fg_evreader *r)
{
	r->phase = PH_DONE;
	drop_job(r);
	fg_park_resume(&r->park);
}

static void poll_fail(struct fg_evreader *r, enum fg_error e, const char *msg)
{
	r->failed = true;
	r->fail = e;
	r->fail_msg = msg;
	finish_poll(r);
}

static enum MHD_Result poll_answer(struct fg_evreader *r, struct MHD_Connection *c)
{
	if (r->failed)
		return fg_respond_error(c, r->fail, r->fail_msg, NULL);
	char next[64] = "null";
	if (r->floor.set) {
		char id[56];
		fg_event_id_format(&r->floor, id, sizeof(id));
		snprintf(next, sizeof(next), "\"%s\"", id);
	}
	static const char head[] = "{\"events\":[";
	size_t cap = sizeof(head) + r->len + sizeof(next) + 48;
	char *text = malloc(cap); /* the response's */
	if (!text)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	int n = snprintf(text, cap, "%s%.*s],\"next\":%s%s}", head, (int)r->len,
			 r->buf ? r->buf : "", next, r->gap ? ",\"gap\":true" : "");
	return fg_respond_text(c, MHD_HTTP_OK, "application/json", text, (size_t)n);
}

/* ---- a stream --------------------------------------------------------------- */

static void wake_stream(struct fg_evreader *r)
{
	if (unsent(r) > 0 || r->ended || r->gone)
		fg_park_resume(&r->park);
}

static void end_stream(struct fg_evreader *r)
{
	r->ended = true;
	r->phase = PH_DONE;
	drop_job(r);
	wake_stream(r);
}

/* Its unsent bytes passed the bound: what waits is dropped and the
 * stream ends. One that is parked (what it had was sent) ends at once,
 * cleanly; one that libmicrohttpd cannot write to (the client does not
 * read) has its socket shut, so that libmicrohttpd closes it now rather
 * than at its timeout. */
static void cut(struct fg_evreader *r)
{
	if (r->ended)
		return;
	bool parked = r->park.parked;
	free(r->buf);
	r->buf = NULL;
	r->len = r->off = r->cap = 0;
	fg_metrics_event_reader_cut();
	end_stream(r);
	if (!parked && !r->gone) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
			r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
	}
}

static void ask_history(struct fg_evreader *r);

/* The stream handed libmicrohttpd what it had: its next page of history,
 * when one is due. */
static void sent_some(struct fg_evreader *r)
{
	if (r->phase == PH_HISTORY && r->more && !r->job && unsent(r) < LOW_WATER)
		ask_history(r);
}

static ssize_t on_sse(void *cls, uint64_t pos, char *out, size_t max)
{
	struct fg_evreader *r = cls;
	(void)pos;
	if (r->gone)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (unsent(r) > 0) {
		size_t n = unsent(r) < max ? unsent(r) : max;
		memcpy(out, r->buf + r->off, n);
		r->off += n;
		if (r->off == r->len) {
			/* an idle stream holds no buffer */
			free(r->buf);
			r->buf = NULL;
			r->len = r->off = r->cap = 0;
		} else if (r->off > r->cap / 2) {
			memmove(r->buf, r->buf + r->off, r->len - r->off);
			r->len -= r->off;
			r->off = 0;
		}
		r->sent_ms = fg_clock_ms();
		sent_some(r);
		return (ssize_t)n;
	}
	if (r->ended || !r->rs)
		return MHD_CONTENT_READER_END_OF_STREAM;
	sent_some(r);
	return 0; /* parked below, by the caller's park */
}

static void on_stream_gone(void *arg)
{
	struct fg_evreader *r = arg;
	r->gone = true;
	end_stream(r);
}

static void on_keepalive(void *arg)
{
	struct fg_evreader *r = arg;
	size_t n = sizeof(FG_SSE_KEEPALIVE) - 1;
	/* (the timer may be a retry's: a comment only when it is due) */
	if (!r->ended && fg_clock_ms() - r->sent_ms >= FG_SSE_KEEPALIVE_MS &&
	    room(r, n)) {
		memcpy(r->buf + r->len, FG_SSE_KEEPALIVE, n);
		r->len += n;
	}
	fg_park_resume(&r->park);
}

/* The content callback had nothing to hand over: the connection waits,
 * suspended, for bytes, the client's close or the keep-alive. */
static ssize_t on_sse_park(void *cls, uint64_t pos, char *out, size_t max)
{
	struct fg_evreader *r = cls;
	ssize_t n = on_sse(cls, pos, out, max);
	if (n != 0)
		return n;
	if (fg_park_suspend(&r->park, r->rs->loop, r->conn, on_stream_gone,
			    on_keepalive, r) != 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	uint64_t idle = fg_clock_ms() - r->sent_ms;
	int64_t ms = idle >= FG_SSE_KEEPALIVE_MS ? 0
		     : (int64_t)(FG_SSE_KEEPALIVE_MS - idle);
	if (r->retry_ms && r->phase == PH_HISTORY && !r->job &&
	    (int64_t)r->retry_ms < ms)
		ms = (int64_t)r->retry_ms;
	fg_park_arm(&r->park, ms);
	return 0;
}

static void on_sse_free(void *cls)
{
	unref(cls); /* the response's */
}

/* ---- reading -------------------------------------------------------------- */

/* LIVE: what the ring holds after the reader's place. */
static void read_ring(struct fg_evreader *r)
{
	if (!begin_read(r)) {
		if (r->sse)
			end_stream(r);
		else
			poll_fail(r, FG_E_UNAUTHENTICATED,
				  "the credential was withdrawn while the request waited");
		return;
	}
	if (!fg_evfeed_read(r->rs->feed, &r->pos, visit, r)) {
		/* pushed out of the ring before it read: from Redis again */
		ask_history(r);
		return;
	}
	if (r->sse) {
		wake_stream(r);
	} else if (r->failed || r->count > 0 || r->q.wait_ms == 0 ||
		   fg_clock_ms() >= r->deadline_ms) {
		finish_poll(r);
	}
}

/* Goes LIVE after `floor` (must_cover: the ring must hold all after it;
 * else only nothing may have been pushed out since `first`). False: it
 * may not, and history is asked for instead. */
static bool go_live(struct fg_evreader *r, bool must_cover, uint64_t first)
{
	if (!fg_evfeed_seek(r->rs->feed, &r->floor, must_cover, first, &r->pos))
		return false;
	r->phase = PH_LIVE;
	if (!r->sse && r->q.wait_ms > 0) {
		uint64_t now = fg_clock_ms();
		fg_park_arm(&r->park, r->deadline_ms > now
				      ? (int64_t)(r->deadline_ms - now) : 0);
	}
	read_ring(r);
	return true;
}

/* A stream found the history queue full: it asks again once its timer
 * runs (on_sse_park() arms it, on_keepalive() resumes it). */
static void wait_queue(struct fg_evreader *r)
{
	r->more = true;
	r->retry_ms = !r->retry_ms ? RETRY_MIN_MS
		: r->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : r->retry_ms * 2;
	if (r->park.parked)
		fg_park_arm(&r->park, (int64_t)r->retry_ms);
}

static void ask_history(struct fg_evreader *r)
{
	r->phase = PH_HISTORY;
	if (r->job)
		return;
	struct fg_evjob *j = calloc(1, sizeof(*j));
	if (!j)
		goto unavailable;
	j->after = r->floor;
	memcpy(j->prefix, r->q.prefix, r->q.prefix_len + 1);
	j->prefix_len = r->q.prefix_len;
	j->scan = FG_EVFEED_SCAN;
	j->limit = r->sse ? SSE_PAGE : r->q.limit - r->count;
	j->loop = r->rs->loop->index;
	j->owner = r;
	if (fg_evfeed_submit(r->rs->feed, j) != 0) {
		free(j);
		if (r->sse && !r->rs->stopping) {
			wait_queue(r);
			return;
		}
		goto unavailable;
	}
	r->job = j;
	r->retry_ms = 0;
	return;
unavailable:
	if (r->sse)
		end_stream(r); /* the client comes back with Last-Event-ID */
	else
		poll_fail(r, FG_E_LOCK_STORE_UNAVAILABLE,
			  "too many reads of the event history at once; ask again");
}

/* A history read came back. */
static void history_done(struct fg_evreader *r, struct fg_evjob *j)
{
	r->job = NULL;
	if (j->err) {
		if (r->sse)
			end_stream(r);
		else
			poll_fail(r, FG_E_LOCK_STORE_UNAVAILABLE,
				  "the event history could not be read from Redis");
		return;
	}
	r->gap |= j->gap;
	if (j->gap && r->sse) {
		static const char gap[] = "event: gap\ndata: {\"gap\":true}\n\n";
		if (room(r, sizeof(gap) - 1)) {
			memcpy(r->buf + r->len, gap, sizeof(gap) - 1);
			r->len += sizeof(gap) - 1;
		}
	}
	bool more = true;
	if (!begin_read(r)) {
		read_ring(r); /* answers the principal's end */
		return;
	}
	for (size_t i = 0; i < j->n && more; i++)
		more = take(r, j->items[i]);
	/* what it looked at is read, shown or not */
	if (fg_ev_cursor_cmp(&j->next, &r->floor) > 0)
		r->floor = j->next;
	if (r->phase == PH_DONE)
		return; /* cut off */
	if (!r->sse) {
		if (r->failed || r->count > 0 || r->q.wait_ms == 0 || !j->caught_up ||
		    fg_clock_ms() >= r->deadline_ms) {
			finish_poll(r);
			return;
		}
	} else if (!j->caught_up) {
		r->more = true;
		wake_stream(r);
		sent_some(r);
		return;
	}
	r->more = false;
	if (!go_live(r, false, j->first))
		ask_history(r);
	else if (r->sse)
		wake_stream(r);
}

/* ---- the loop's readers ------------------------------------------------- */

struct fg_evreaders *fg_evapi_create(struct fg_loop *loop, struct fg_evfeed *feed)
{
	struct fg_evreaders *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return NULL;
	rs->loop = loop;
	rs->feed = feed;
	return rs;
}

void fg_evapi_destroy(struct fg_evreaders *rs)
{
	if (!rs)
		return;
	while (rs->all) /* none: every request completed */
		unlist(rs->all);
	free(rs);
}

void fg_evapi_wake(struct fg_evreaders *rs)
{
	if (!rs || !rs->feed)
		return;
	struct fg_evjob *j = fg_evfeed_done(rs->feed, rs->loop->index);
	while (j) {
		struct fg_evjob *next = j->link;
		struct fg_evreader *r = j->owner;
		if (r && r->job == j)
			history_done(r, j);
		fg_evjob_free(j);
		j = next;
	}
	/* a reader may end (and leave the list) while the list is walked */
	for (struct fg_evreader *r = rs->all, *next; r; r = next) {
		next = r->next;
		if (r->phase == PH_LIVE)
			read_ring(r);
	}
}

void fg_evapi_stop(struct fg_evreaders *rs)
{
	if (!rs)
		return;
	rs->stopping = true;
	for (struct fg_evreader *r = rs->all, *next; r; r = next) {
		next = r->next;
		if (r->sse)
			end_stream(r);
		else if (r->phase != PH_DONE)
			finish_poll(r); /* what it has: `next` still holds */
		/* a stream's connection resumed once more: it ends */
		fg_park_resume(&r->park);
	}
}

/* ---- the call ------------------------------------------------------------- */

struct args {
	struct fg_evq_arg a[ARGS_MAX];
	size_t n;
	bool over;
};

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *value)
{
	struct args *as = cls;
	(void)kind;
	if (as->n == ARGS_MAX) {
		as->over = true;
		return MHD_NO;
	}
	as->a[as->n++] = (struct fg_evq_arg){ key, value };
	return MHD_YES;
}

static bool wants_stream(struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);
	return accept && strcasestr(accept, "text/event-stream");
}

static void on_poll_gone(void *arg)
{
	struct fg_evreader *r = arg;
	r->gone = true;
	finish_poll(r);
}

static void on_poll_timer(void *arg)
{
	finish_poll(arg); /* wait_ms passed: what it has */
}

/* The start. A read that answers at once and a stream read Redis first:
 * the follower may be a few milliseconds behind what was recorded, and a
 * client that just released a lock finds its release. A long poll waits
 * anyway: LIVE at once when the ring holds all after `after`. */
static void start(struct fg_evreader *r)
{
	r->floor = r->q.after;
	bool ring_first = !r->sse && r->q.wait_ms > 0;
	if (!r->floor.set || !ring_first || !go_live(r, true, 0))
		ask_history(r);
}

static enum MHD_Result begin(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_evreaders *rs = req->loop->evr;
	struct args as = { .n = 0 };
	char msg[256];
	struct fg_evq q;
	const char *last_id;

	if (req->body_len > 0)
		return fg_respond_error(c, FG_E_BAD_REQUEST, "the events take no "
					"body; prefix, after, wait_ms and limit go "
					"in the query string", NULL);
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &as);
	if (as.over)
		return fg_respond_error(c, FG_E_BAD_REQUEST, "too many parameters "
					"(the events take prefix, after, wait_ms "
					"and limit)", NULL);
	bool sse = wants_stream(c);
	if (fg_header_count(c, "Last-Event-ID", &last_id) > 1)
		return fg_respond_error(c, FG_E_BAD_REQUEST,
					"more than one Last-Event-ID header", NULL);
	if (fg_evq_parse(as.a, as.n, sse ? last_id : NULL, &q, msg, sizeof(msg)))
		return fg_respond_error(c, FG_E_BAD_REQUEST, msg, NULL);
	if (!rs || !rs->feed || rs->stopping)
		return fg_respond_error(c, FG_E_SHUTTING_DOWN, NULL, NULL);
	bool head = strcmp(req->rec.method, "HEAD") == 0;
	if (head && sse) /* the head of a stream: no body is sent */
		return fg_respond_static(c, MHD_HTTP_OK, "text/event-stream", "", 0);
	if (head)
		q.wait_ms = 0;

	struct fg_evreader *r = calloc(1, sizeof(*r));
	if (!r)
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	r->rs = rs;
	r->req = req;
	r->conn = c;
	r->refs = 1;
	r->q = q;
	r->sse = sse;
	r->sent_ms = fg_clock_ms();
	r->deadline_ms = r->sent_ms + q.wait_ms;
	r->next = rs->all;
	if (rs->all)
		rs->all->prev = r;
	rs->all = r;
	fg_metrics_gauge_add(FG_GAUGE_EVENT_READERS, 1);
	fg_evfeed_reader(rs->feed, true);
	req->events = r;

	if (sse) {
		/* the opening comment: the client has bytes of the stream
		 * at once, not only after its first event or keep-alive */
		size_t n = sizeof(FG_SSE_OPENING) - 1;
		if (room(r, n)) {
			memcpy(r->buf, FG_SSE_OPENING, n);
			r->len = n;
		}
		r->refs++; /* the response's, let go in on_sse_free() */
		enum MHD_Result ret = fg_respond_stream(c, MHD_HTTP_OK,
			"text/event-stream", SSE_BLOCK, on_sse_park, r, on_sse_free);
		if (ret != MHD_YES)
			return ret;
		start(r);
		return MHD_YES;
	}
	start(r);
	if (r->phase == PH_DONE) { /* answered from the ring */
		r->answered = true;
		return poll_answer(r, c);
	}
	/* parked: the answer comes from the handler once resumed */
	if (fg_park_suspend(&r->park, rs->loop, c, on_poll_gone, on_poll_timer, r)) {
		drop_job(r);
		req->events = NULL;
		unlist(r);
		unref(r);
		return fg_respond_error(c, FG_E_INTERNAL, "out of memory", NULL);
	}
	/* (a poll still reading history waits no longer than wait_ms
	 * either: a history read may wait behind others) */
	if (r->phase == PH_LIVE || q.wait_ms > 0)
		fg_park_arm(&r->park, (int64_t)q.wait_ms);
	return MHD_YES;
}

enum MHD_Result fg_evapi_handle(struct fg_req *req, struct MHD_Connection *c)
{
	struct fg_evreader *r = req->events;
	if (!r)
		return begin(req, c);
	if (r->sse || r->phase != PH_DONE || r->answered)
		return MHD_YES; /* resumed for another reason */
	r->answered = true;
	if (r->gone)
		return MHD_NO;
	return poll_answer(r, c);
}

void fg_evapi_finish(struct fg_req *req)
{
	struct fg_evreader *r = req->events;
	if (!r)
		return;
	req->events = NULL;
	drop_job(r);
	unlist(r);
	r->req = NULL;
	r->p = NULL;
	unref(r);
}
