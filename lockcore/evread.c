/*
 * evread.c - the reading side of the event streams (contract v1.5): event
 * ids, the history (fg_events_range), the trim (fg_events_trim) and the
 * follower (fg_evtail).
 *
 * Where the events are (evkeys.c): one Redis or Sentinel keeps one stream,
 * fg:{!ev}:s, whose ids are the events' ids; a Cluster keeps one stream per
 * hash slot, fg:{!evT}:s, and an event's id is "<ms>-<seq>.<slot>", in the
 * order (ms, slot, seq). After a cursor (m, s, q) a stream of slot s' is
 * read from (m+1)-0 when s' < s, after m-q when s' == s, and from m-0 when
 * s' > s (resume_from()), so a reader resuming never sees an event twice
 * and never passes one by, for every lock (one stream, growing ids).
 *
 * The history reads every stream from the cursor and merges by (ms, slot,
 * seq). On a Cluster it pipelines one XRANGE per slot to the slot's
 * master (XREAD over many keys is refused there: CROSSSLOT; pipelined
 * XRANGEs are as many commands, and each one's COUNT can be its own),
 * PIPE_MAX at a time, first with a small COUNT (8), then again, four times
 * as many each time up to `scan`, only for the streams that filled their
 * COUNT (the next entry to give waits for them only when one of them may
 * hold an earlier one: the merge's horizon). What a call holds is bounded
 * by about 8 entries per slot plus `scan`. Cost on a Cluster: a history
 * call sends 16384 XRANGEs, plus 16384 XINFO STREAM when `after` is given
 * (to tell a gap), plus a few rounds for the streams with many entries,
 * one master after the other; on three masters sharing a loaded two-core
 * machine with the reader, about 25 ms a call, 45 ms with `after`. One
 * Redis: one XINFO when `after` is given, then one XRANGE per 512 entries.
 *
 * The follower on one Redis blocks in XREAD BLOCK on a connection of its
 * own, from the last id it read (never "$" once it knows where it is, so
 * nothing appended between two calls is lost; "now" is the newest id when
 * it first connects). On a Cluster XREAD BLOCK cannot wait on streams of
 * many slots (CROSSSLOT again), so it learns which streams grew from
 * Redis itself: per master, one connection subscribed to
 * __redis__:invalidate with CLIENT TRACKING BCAST PREFIX fg:{!ev redirected
 * to itself (Redis 6+, nothing to configure), and one that reads the
 * streams named there with pipelined XRANGEs from each one's last id.
 * Redis sends such a message once per event loop turn at most, naming
 * every stream written in it. After connecting (again), and when the slot
 * map moved, every stream of the master's slots is read once (a slot's
 * events may have been written while nobody listened; tracking is on
 * before that read, so none falls between). Cost on a Cluster: idle,
 * nothing (the subscribers wait in poll()); busy, at most one pipeline per
 * master per 20 ms (FOLLOW_PACE_MS), of one XRANGE per stream written
 * since; at a (re)connection or a move of the map, one XRANGE per slot of
 * the master. A subscriber whose connection dies without a word (no FIN,
 * no RST) is not noticed: its master's events stop until the connection
 * errs.
 *
 * Invariants: no entry is given twice, or passed by, by one follower or
 * by a history resumed from its own `next`; whatever Redis holds under
 * these keys (anybody may XADD anything, or put another type there) is
 * read without crashing: fields missing are "", a token that is not
 * digits is no token, an entry without a stream id is passed over, a key
 * of another type reads as empty. A failure keeps the follower's position.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "fencegate/lock.h"
#include "fencegate/topo.h"
#include "lockcore-private.h"
#include "store-private.h"
#include "topo-private.h"

#define ONE_COUNT 512u      /* entries per XRANGE/XREAD of one stream */
#define FIRST_COUNT 8u      /* a Cluster history's first COUNT per slot */
#define PIPE_MAX 1024u      /* commands per pipeline before its replies */
#define FOLLOW_COUNT 256u   /* entries per stream per follower read */
#define FOLLOW_PACE_MS 20u  /* a master's streams read at most this often */
#define SUB_PING_MS 15000u  /* a silent subscriber is asked for a PONG */
#define TRACK_PREFIX "fg:{!ev"
#define SEQ_MAX 9999999999999999999ull /* 19 digits: the id's bound */

/* ---- ids -------------------------------------------------------------- */

/* 1..max decimal digits at *p, no sign, no space; moves *p past them. */
static int digits(const char **p, unsigned max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned n = 0;
	while (*s >= '0' && *s <= '9') {
		if (++n > max)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0'); /* 19 digits fit in 64 bits */
		s++;
	}
	if (n == 0)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

int fg_event_id_parse(const char *s, struct fg_ev_cursor *out)
{
	struct fg_ev_cursor c = { 0 };
	uint64_t slot = 0;
	if (!s || digits(&s, 15, &c.ms) || *s++ != '-' || digits(&s, 19, &c.seq))
		return -1;
	if (*s == '.') {
		s++;
		if (digits(&s, 5, &slot) || slot >= FG_SLOTS)
			return -1;
		c.cluster = true;
		c.slot = (unsigned)slot;
	}
	if (*s)
		return -1;
	c.set = true;
	*out = c;
	return 0;
}

size_t fg_event_id_format(const struct fg_ev_cursor *c, char *buf, size_t cap)
{
	int n;
	if (cap)
		buf[0] = '\0';
	if (!c || !c->set || !cap)
		return 0;
	if (c->cluster)
		n = snprintf(buf, cap, "%llu-%llu.%u", (unsigned long long)c->ms,
			     (unsigned long long)c->seq, c->slot);
	else
		n = snprintf(buf, cap, "%llu-%llu", (unsigned long long)c->ms,
			     (unsigned long long)c->seq);
	if (n < 0 || (size_t)n >= cap) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n;
}

/* A 64-bit number in decimal at *p, overflow refused. */
static int u64_at(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

/* A stream id as Redis writes it ("<ms>-<seq>", each up to 2^64 - 1):
 * 0, or -1 for anything else (a reply that is no string, a NUL inside). */
static int redis_id(const redisReply *r, uint64_t *ms, uint64_t *seq)
{
	const char *p;
	if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) ||
	    strlen(r->str) != r->len)
		return -1;
	p = r->str;
	if (u64_at(&p, ms) || *p++ != '-' || u64_at(&p, seq) || *p)
		return -1;
	return 0;
}

/* Can the API name it? Redis takes any id given to XADD, and the API's
 * ids have at most 15 and 19 digits: an entry beyond them (nothing Redis
 * makes by itself before the year 33658) is read past, never given, so a
 * reader can always resume from what it was given. */
static bool api_id(uint64_t ms, uint64_t seq)
{
	return ms <= 999999999999999ull && seq <= SEQ_MAX;
}

/* (ms, seq) order within one stream */
static int id_cmp(uint64_t am, uint64_t aq, uint64_t bm, uint64_t bq)
{
	if (am != bm)
		return am < bm ? -1 : 1;
	return aq < bq ? -1 : aq > bq;
}

/* (ms, slot, seq), the order of the events of a Cluster */
static int key_cmp(uint64_t am, unsigned as, uint64_t aq, uint64_t bm,
		   unsigned bs, uint64_t bq)
{
	if (am != bm)
		return am < bm ? -1 : 1;
	if (as != bs)
		return as < bs ? -1 : 1;
	return aq < bq ? -1 : aq > bq;
}

/* Where the stream of `slot` is read from (inclusive) after cursor c:
 * the resume rule of the file-top comment. One Redis (or a cursor without
 * a slot): right after (ms, seq). false when nothing can come after
 * (the largest id there is). */
static bool resume_from(const struct fg_ev_cursor *c, bool cluster,
			unsigned slot, uint64_t *ms, uint64_t *seq)
{
	if (!c || !c->set) {
		*ms = 0;
		*seq = 0;
		return true;
	}
	if (cluster && c->cluster && slot != c->slot) {
		*ms = slot < c->slot ? c->ms + 1 : c->ms;
		*seq = 0;
		return true;
	}
	/* right after (ms, seq) */
	if (c->seq < UINT64_MAX) {
		*ms = c->ms;
		*seq = c->seq + 1;
	} else if (c->ms < UINT64_MAX) {
		*ms = c->ms + 1;
		*seq = 0;
	} else {
		*ms = *seq = UINT64_MAX;
		return false;
	}
	return true;
}

/* ---- entries -> events ---------------------------------------------- */

/* A token as the writers write it: decimal digits, below FG_TOKEN_MAX's
 * 64-bit room (anything else is no token). */
static bool token_of(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t v;
	/* (a token is a JSON integer: none above 2^63 - 1 is one of ours) */
	if (digits(&p, 19, &v) || *p || v > INT64_MAX)
		return false;
	*out = v;
	return true;
}

/*
 * One stream entry ([id, [field, value, ...]]) as an event of the stream
 * of `slot` (cluster) or the one stream. -1 when it has no stream id
 * (nothing Redis returns: passed over); 1 when its id is beyond the
 * API's (api_id(): *cur is set, to read past it; not to be given); any
 * fields are read as they come, unknown ones ignored, the first of a
 * repeated one kept.
 */
#define EV_FIELD_MAX 1024  /* a lock name, principal, owner, client, id */
#define EV_DETAIL_MAX 4096 /* a refusal's path (256 bytes) and its code, escaped */

static bool known_kind(const char *k)
{
	static const char *const kinds[] = { "granted", "released", "expired",
		"broken", "given_back", "lease_lost", "refused" };
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(k, kinds[i]) == 0)
			return true;
	return false;
}

static int entry_event(const redisReply *e, bool cluster, unsigned slot,
		       struct fg_event *ev, struct fg_ev_cursor *cur)
{
	uint64_t ms, seq;
	if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 1 ||
	    redis_id(e->element[0], &ms, &seq))
		return -1;
	if (!api_id(ms, seq)) {
		*cur = (struct fg_ev_cursor){ .ms = ms, .seq = seq, .slot = slot,
					      .cluster = cluster, .set = true };
		return 1;
	}
	memset(ev, 0, sizeof(*ev));
	ev->kind = ev->lock = ev->principal = ev->owner = ev->client =
		ev->gateway = ev->detail = "";
	bool bad = false;
	const char *token = NULL;
	const redisReply *f = e->elements >= 2 ? e->element[1] : NULL;
	if (f && f->type == REDIS_REPLY_ARRAY) {
		for (size_t i = 0; i + 1 < f->elements; i += 2) {
			const redisReply *k = f->element[i], *v = f->element[i + 1];
			if (k->type != REDIS_REPLY_STRING || k->len != 1 ||
			    v->type != REDIS_REPLY_STRING)
				continue;
			const char **to = NULL;
			switch (k->str[0]) {
			case 'k': to = &ev->kind; break;
			case 'l': to = &ev->lock; break;
			case 't': to = &token; break;
			case 'p': to = &ev->principal; break;
			case 'o': to = &ev->owner; break;
			case 'c': to = &ev->client; break;
			case 'g': to = &ev->gateway; break;
			case 'd': to = &ev->detail; break;
			default: break;
			}
			if (to && (!*to || !**to)) {
				/* longer than any the gateway writes: not one of
				 * its events (anyone who may XADD wrote it) */
				if (v->len > (k->str[0] == 'd' ? EV_DETAIL_MAX
							       : EV_FIELD_MAX))
					bad = true;
				*to = v->str; /* hiredis ends every string with NUL */
			}
		}
	}
	if (token && token_of(token, &ev->token))
		ev->has_token = true;
	*cur = (struct fg_ev_cursor){ .ms = ms, .seq = seq, .slot = slot,
				      .cluster = cluster, .set = true };
	/* an entry of a kind the contract does not know, or too big, is
	 * passed over (its id is read past): what a reader is shown is only
	 * what the gateway could have written, so no field can break the
	 * framing of a stream or outgrow a reader's buffer */
	if (bad || !known_kind(ev->kind))
		return 1;
	ev->at_ms = ms;
	fg_event_id_format(cur, ev->id, sizeof(ev->id));
	return 0;
}

/* ---- commands --------------------------------------------------------- */

/* One command built on the stack: its numbers in bufs. */
struct cmd {
	int argc;
	const char *argv[10];
	size_t len[10];
	char bufs[4][48];
	int nbufs;
};

static void push(struct cmd *c, const char *s)
{
	c->argv[c->argc] = s;
	c->len[c->argc++] = strlen(s);
}

static void argf(struct cmd *c, const char *fmt, unsigned long long a,
		 unsigned long long b)
{
	char *buf = c->bufs[c->nbufs++];
	snprintf(buf, sizeof(c->bufs[0]), fmt, a, b);
	push(c, buf);
}

/* XRANGE key ms-seq + COUNT n */
static void build_xrange(struct cmd *c, const char *key, uint64_t ms,
			 uint64_t seq, unsigned n)
{
	memset(c, 0, sizeof(*c));
	push(c, "XRANGE");
	push(c, key);
	argf(c, "%llu-%llu", ms, seq);
	push(c, "+");
	push(c, "COUNT");
	argf(c, "%llu", n, 0);
}

static void build_xinfo(struct cmd *c, const char *key)
{
	memset(c, 0, sizeof(*c));
	push(c, "XINFO");
	push(c, "STREAM");
	push(c, key);
}

/* A key that is not a stream (WRONGTYPE), or none (XINFO's "no such
 * key"): read as an empty stream. */
static bool reads_empty(const redisReply *r)
{
	return r->type == REDIS_REPLY_ERROR &&
	       (strncmp(r->str, "WRONGTYPE", 9) == 0 ||
		strstr(r->str, "no such key") != NULL);
}

/* ---- the history ------------------------------------------------------ */

/* One stream of the history being read. */
struct hstream {
	unsigned slot;
	size_t node;           /* index into the view's masters */
	uint64_t from_ms, from_seq; /* the next read starts here (inclusive) */
	unsigned count;        /* the next read's COUNT */
	redisReply *r;         /* the last read's entries, or NULL */
	size_t i;              /* the next of them to give */
	bool more;             /* the last read filled its COUNT */
	bool need;             /* to be read in the next round */
	/* the last entry read, for the horizon */
	uint64_t last_ms, last_seq;
	/* the gap test */
	uint64_t gap_ms, gap_seq; /* the first id the reader needs */
	int gapq;              /* 0 no, 1 yes, 2 ask XRANGE */
};

struct history {
	fg_store *st;
	const struct fg_topo_view *view;
	bool cluster;
	struct hstream *s;
	size_t n;
};

static void stream_key(const struct history *h, const struct hstream *s,
		       char *key, size_t cap)
{
	if (h->cluster)
		fg__ev_slot_key(s->slot, key, cap);
	else
		snprintf(key, cap, "%s", FG__EV_ONE);
}

/* What a reply to a pipelined command means: FG_OK to use it, or an
 * error that ends the call (a moved slot, a Redis that cannot answer). */
static int reply_ok(const redisReply *r)
{
	if (r->type != REDIS_REPLY_ERROR || reads_empty(r))
		return FG_OK;
	return FG_EUNAVAIL;
}

/* What a pipeline sends to which stream, and what it does with each
 * reply (keeps it or frees it). */
typedef bool want_fn(struct hstream *s);
typedef void build_fn(const struct history *h, struct hstream *s,
		      struct cmd *c, char *key, size_t cap);
typedef void take_fn(struct history *h, struct hstream *s, redisReply *r);

/* Errors that mean the map or the master moved: the connection goes (the
 * store makes another one), the topology is looked at again. */
static bool moved(const redisReply *r)
{
	return strncmp(r->str, "MOVED", 5) == 0 || strncmp(r->str, "ASK", 3) == 0 ||
	       strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
	       strncmp(r->str, "READONLY", 8) == 0;
}

/* One pipeline to master `node`: the streams of h->s from *at on that it
 * wants, PIPE_MAX at most; *at moves past them. */
static int pipeline_batch(struct history *h, size_t node, size_t *at,
			  size_t *batch, want_fn *want, build_fn *build,
			  take_fn *take)
{
	const struct fg_redis_node *where = &h->view->nodes[node];
	redisContext *rc = NULL;
	size_t nb = 0;
	int err = FG_OK;
	bool lost = false;

	for (; *at < h->n && nb < PIPE_MAX; (*at)++) {
		struct hstream *s = &h->s[*at];
		if (s->node != node || !want(s))
			continue;
		if (!rc && !(rc = fg__store_conn(h->st, where)))
			return FG_EUNAVAIL;
		char key[FG__EV_KEY_MAX];
		struct cmd c;
		build(h, s, &c, key, sizeof(key));
		if (redisAppendCommandArgv(rc, c.argc, c.argv, c.len) != REDIS_OK) {
			err = FG_ENOMEM;
			lost = true; /* what was appended is read below */
			break;
		}
		batch[nb++] = *at;
	}
	/* every reply is read, even after a bad one: the connection stays in
	 * step, and is dropped (if at all) only once it was read */
	for (size_t b = 0; b < nb; b++) {
		redisReply *r = NULL;
		if (redisGetReply(rc, (void **)&r) != REDIS_OK || !r) {
			fg__store_lost(h->st, where, NULL);
			return FG_EUNAVAIL;
		}
		int rerr = reply_ok(r);
		if (rerr) {
			lost = lost || moved(r);
			fg__login_refused(fg__store_topo(h->st), where, r->str);
			if (!err)
				err = rerr;
			freeReplyObject(r);
		} else if (err) {
			freeReplyObject(r);
		} else {
			take(h, &h->s[batch[b]], r);
		}
	}
	if (lost)
		fg__store_lost(h->st, where, err == FG_ENOMEM ? "out of memory" :
			       "the slot map moved");
	return err;
}

/*
 * Sends, per master, the command build() makes for each stream that
 * want() picks, pipelined (PIPE_MAX at a time), and hands each reply to
 * take() (which keeps it or frees it). FG_OK, or FG_EUNAVAIL (a
 * connection failed: dropped; or a redirection: the map is suspect).
 */
static int pipeline(struct history *h, want_fn *want, build_fn *build,
		    take_fn *take)
{
	size_t *batch = malloc(PIPE_MAX * sizeof(*batch));
	int err = FG_OK;
	if (!batch)
		return FG_ENOMEM;
	for (size_t node = 0; node < h->view->nnodes && !err; node++)
		for (size_t at = 0; at < h->n && !err;)
			err = pipeline_batch(h, node, &at, batch, want, build,
					     take);
	free(batch);
	return err;
}

static bool want_read(struct hstream *s)
{
	return s->need;
}

static void build_read(const struct history *h, struct hstream *s,
		       struct cmd *c, char *key, size_t cap)
{
	stream_key(h, s, key, cap);
	build_xrange(c, key, s->from_ms, s->from_seq, s->count);
}

static void take_read(struct history *h, struct hstream *s, redisReply *r)
{
	(void)h;
	if (s->r)
		freeReplyObject(s->r);
	s->r = NULL;
	s->i = 0;
	s->need = false;
	s->more = false;
	if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
		freeReplyObject(r);
		return;
	}
	s->r = r;
	s->more = r->elements >= s->count;
	/* the next read starts after the last entry with an id */
	for (size_t k = r->elements; k-- > 0;) {
		const redisReply *e = r->element[k];
		uint64_t ms, seq;
		if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
		    redis_id(e->element[0], &ms, &seq) == 0) {
			s->last_ms = ms;
			s->last_seq = seq;
			struct fg_ev_cursor c = { .ms = ms, .seq = seq, .set = true };
			if (!resume_from(&c, false, 0, &s->from_ms, &s->from_seq))
				s->more = false; /* the end of all ids */
			break;
		}
	}
}

/* XINFO STREAM's map, as a flat array of names and values */
static const redisReply *info_field(const redisReply *r, const char *name)
{
	if (r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2)
		if (r->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[i]->str, name) == 0)
			return r->element[i + 1];
	return NULL;
}

static bool want_info(struct hstream *s)
{
	(void)s;
	return true;
}

static void build_info(const struct history *h, struct hstream *s,
		       struct cmd *c, char *key, size_t cap)
{
	stream_key(h, s, key, cap);
	build_xinfo(c, key);
}

/*
 * Is `after` older than what this stream retains? Trimming drops the
 * oldest entries (XTRIM and XADD's MAXLEN count none of them in
 * max-deleted-entry-id), so: something was dropped (entries-added >
 * length; a Redis before 7 does not say, then assume it was), and the
 * oldest entry left (or, with none left, the last id given) is at or past
 * the first the reader needs (gap_ms-gap_seq). An `after` that was
 * itself the last one dropped counts too: older than the oldest retained.
 * s->gapq: 0 no, 1 yes, 2 ask an XRANGE (below).
 */
static void take_info(struct history *h, struct hstream *s, redisReply *r)
{
	(void)h;
	uint64_t ms, seq;
	const redisReply *first = info_field(r, "first-entry");
	const redisReply *added = info_field(r, "entries-added");
	const redisReply *len = info_field(r, "length");
	const redisReply *lastgen = info_field(r, "last-generated-id");
	bool dropped = !added || !len || added->type != REDIS_REPLY_INTEGER ||
		       len->type != REDIS_REPLY_INTEGER ||
		       added->integer > len->integer;
	bool has_first = first && first->type == REDIS_REPLY_ARRAY &&
			 first->elements >= 1 &&
			 redis_id(first->element[0], &ms, &seq) == 0;
	s->gapq = 0;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r); /* no stream there */
		return;
	}
	if (dropped) {
		if (has_first) {
			if (id_cmp(ms, seq, s->gap_ms, s->gap_seq) >= 0)
				s->gapq = 1;
		} else if (redis_id(lastgen, &ms, &seq) == 0 &&
			   id_cmp(ms, seq, s->gap_ms, s->gap_seq) >= 0) {
			s->gapq = 1;
		}
	}
	/* the reader starts past gap (min_ms): an entry left in [gap,
	 * from) is one it skips; the oldest one left tells, unless it is
	 * older than gap */
	if (!s->gapq && has_first &&
	    id_cmp(s->gap_ms, s->gap_seq, s->from_ms, s->from_seq) < 0 &&
	    id_cmp(ms, seq, s->from_ms, s->from_seq) < 0) {
		if (id_cmp(ms, seq, s->gap_ms, s->gap_seq) >= 0)
			s->gapq = 1;
		else
			s->gapq = 2;
	}
	freeReplyObject(r);
}

static bool want_gapq(struct hstream *s)
{
	return s->gapq == 2;
}

static void build_gapq(const struct history *h, struct hstream *s,
		       struct cmd *c, char *key, size_t cap)
{
	stream_key(h, s, key, cap);
	build_xrange(c, key, s->gap_ms, s->gap_seq, 1);
}

static void take_gapq(struct history *h, struct hstream *s, redisReply *r)
{
	(void)h;
	uint64_t ms, seq;
	s->gapq = 0;
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_ARRAY &&
	    r->element[0]->elements >= 1 &&
	    redis_id(r->element[0]->element[0], &ms, &seq) == 0 &&
	    id_cmp(ms, seq, s->from_ms, s->from_seq) < 0)
		s->gapq = 1;
	freeReplyObject(r);
}

static void history_finish(struct history *h)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->s[i].r)
			freeReplyObject(h->s[i].r);
	free(h->s);
}

int fg_events_range(fg_store *st, const struct fg_ev_cursor *after,
		    unsigned scan, uint64_t min_ms, fg_event_cb *cb, void *arg,
		    struct fg_ev_cursor *next, bool *gap)
{
	struct history h = { .st = st };
	int err = FG_OK;
	bool aft = after && after->set;

	*gap = false;
	if (!scan)
		return FG_OK;
	h.view = fg__store_view(st);
	if (!h.view)
		return FG_ENOMEM;
	if (!h.view->nnodes)
		return FG_EUNAVAIL; /* nobody known yet (the store asked) */
	h.cluster = h.view->slots != NULL;
	h.n = h.cluster ? FG_SLOTS : 1;
	h.s = calloc(h.n, sizeof(*h.s));
	if (!h.s)
		return FG_ENOMEM;
	unsigned first = h.cluster ? FIRST_COUNT : ONE_COUNT;
	for (size_t i = 0; i < h.n; i++) {
		struct hstream *s = &h.s[i];
		s->slot = (unsigned)i;
		s->node = h.cluster ? h.view->slots[i] : 0;
		if (s->node == FG_SLOT_NONE || s->node >= h.view->nnodes) {
			err = FG_EUNAVAIL; /* a slot nobody serves: not all there */
			goto done;
		}
		resume_from(after, h.cluster, s->slot, &s->from_ms, &s->from_seq);
		s->gap_ms = s->from_ms;
		s->gap_seq = s->from_seq;
		if (min_ms > s->from_ms) {
			s->from_ms = min_ms;
			s->from_seq = 0;
		}
		s->count = first < scan ? first : scan;
		s->need = true;
	}
	if (aft) {
		err = pipeline(&h, want_info, build_info, take_info);
		if (!err)
			err = pipeline(&h, want_gapq, build_gapq, take_gapq);
		if (err)
			goto done;
		for (size_t i = 0; i < h.n; i++)
			if (h.s[i].gapq == 1)
				*gap = true;
	}

	/* the streams with entries read and not given yet (the only ones
	 * a merge step looks at: a few, when most slots are quiet) */
	size_t *live = malloc(h.n * sizeof(*live));
	if (!live) {
		err = FG_ENOMEM;
		goto done;
	}
	unsigned read = 0;
	bool stop = false;
	while (!stop && read < scan) {
		err = pipeline(&h, want_read, build_read, take_read);
		if (err)
			break;
		size_t nl = 0;
		for (size_t i = 0; i < h.n; i++)
			if (h.s[i].r)
				live[nl++] = i;
		/* give entries in (ms, slot, seq) order while none can come
		 * before them from a stream not read far enough yet */
		for (;;) {
			struct hstream *best = NULL;
			uint64_t bms = 0, bseq = 0;
			bool refill = false;
			for (size_t l = 0; l < nl; l++) {
				struct hstream *s = &h.s[live[l]];
				if (!s->r)
					continue;
				/* an entry without an id the API can name is
				 * passed over */
				uint64_t ms = 0, seq = 0;
				while (s->i < s->r->elements &&
				       (s->r->element[s->i]->type != REDIS_REPLY_ARRAY ||
					s->r->element[s->i]->elements < 1 ||
					redis_id(s->r->element[s->i]->element[0], &ms, &seq) ||
					!api_id(ms, seq)))
					s->i++;
				if (s->i >= s->r->elements) {
					freeReplyObject(s->r);
					s->r = NULL;
					if (s->more)
						s->need = true;
					continue;
				}
				if (!best || key_cmp(ms, s->slot, seq, bms, best->slot,
						     bseq) < 0) {
					best = s;
					bms = ms;
					bseq = seq;
				}
			}
			/* the horizon: a stream to read again whose last entry
			 * is before the best one may hold one before it */
			for (size_t l = 0; l < nl; l++) {
				struct hstream *s = &h.s[live[l]];
				if (s->need && (!best || key_cmp(s->last_ms, s->slot,
					s->last_seq, bms, best->slot, bseq) < 0)) {
					refill = true;
					s->count = s->count * 4 < scan ? s->count * 4 : scan;
				}
			}
			if (refill || !best)
				break;
			struct fg_event ev;
			struct fg_ev_cursor cur;
			entry_event(best->r->element[best->i++], h.cluster,
				    best->slot, &ev, &cur);
			read++;
			*next = cur;
			if (ev.at_ms >= min_ms && cb(arg, &ev)) {
				stop = true;
				break;
			}
			if (read >= scan)
				break;
		}
		bool any = false;
		for (size_t l = 0; l < nl && !any; l++)
			any = h.s[live[l]].need;
		if (!any)
			break;
	}
	free(live);
done:
	history_finish(&h);
	return err;
}

/* ---- trim ------------------------------------------------------------- */

struct trim {
	struct history h;
	uint64_t cut_ms;
};

static void build_trim(const struct history *h, struct hstream *s,
		       struct cmd *c, char *key, size_t cap)
{
	const struct trim *t = (const struct trim *)h;
	stream_key(h, s, key, cap);
	memset(c, 0, sizeof(*c));
	push(c, "XTRIM");
	push(c, key);
	push(c, "MINID");
	push(c, "~");
	argf(c, "%llu-%llu", t->cut_ms, 0);
}

static void take_free(struct history *h, struct hstream *s, redisReply *r)
{
	(void)h;
	(void)s;
	freeReplyObject(r);
}

/* Redis' clock, ms, on the connection to node. */
static int redis_time(redisContext *rc, uint64_t *ms)
{
	redisReply *r = redisCommand(rc, "TIME");
	int err = FG_EUNAVAIL;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING) {
		*ms = strtoull(r->element[0]->str, NULL, 10) * 1000u +
		      strtoull(r->element[1]->str, NULL, 10) / 1000u;
		err = FG_OK;
	}
	if (r)
		freeReplyObject(r);
	return err;
}

int fg_events_trim(fg_store *st, uint64_t retain_ms)
{
	struct trim t = { .h = { .st = st } };
	uint64_t now;
	int err;

	t.h.view = fg__store_view(st);
	if (!t.h.view)
		return FG_ENOMEM;
	if (!t.h.view->nnodes)
		return FG_EUNAVAIL;
	/* one master's clock: masters' clocks differ by little next to a
	 * retention of minutes or hours */
	redisContext *rc = fg__store_conn(st, &t.h.view->nodes[0]);
	if (!rc)
		return FG_EUNAVAIL;
	if (redis_time(rc, &now)) {
		fg__store_lost(st, &t.h.view->nodes[0], NULL);
		return FG_EUNAVAIL;
	}
	if (now <= retain_ms)
		return FG_OK;
	t.cut_ms = now - retain_ms;
	t.h.cluster = t.h.view->slots != NULL;
	t.h.n = t.h.cluster ? FG_SLOTS : 1;
	t.h.s = calloc(t.h.n, sizeof(*t.h.s));
	if (!t.h.s)
		return FG_ENOMEM;
	err = FG_OK;
	for (size_t i = 0; i < t.h.n; i++) {
		t.h.s[i].slot = (unsigned)i;
		t.h.s[i].node = t.h.cluster ? t.h.view->slots[i] : 0;
		if (t.h.s[i].node >= t.h.view->nnodes)
			err = FG_EUNAVAIL;
	}
	if (!err)
		err = pipeline(&t.h, want_info, build_trim, take_free);
	history_finish(&t.h);
	return err;
}

/* ---- the follower ----------------------------------------------------- */

/* One master the follower reads. */
struct tnode {
	struct fg_redis_node node;
	redisContext *rc;   /* one Redis: XREAD BLOCK; Cluster: the XRANGEs */
	redisContext *sub;  /* Cluster: subscribed to __redis__:invalidate */
	uint64_t next_try_ms;
	uint64_t last_read_ms;
	uint64_t heard_ms;  /* Cluster: the subscriber last spoke */
	uint64_t ping_ms;   /* Cluster: a PING unanswered since, or 0 */
	bool all;           /* Cluster: read every slot it serves */
};

struct fg_evtail {
	fg_topo *topo;
	unsigned connect_ms, command_ms;
	struct fg_topo_view view;
	struct tnode *nodes;
	size_t nnodes;
	struct fg_ev_cursor pos;   /* the last entry given, or the start */
	uint64_t rd_ms, rd_seq;    /* one Redis: the last entry read (given
				      or read past) */
	/* Cluster: per slot, where its stream is read from (inclusive), and
	 * whether it was written since it was last read */
	uint64_t *from_ms, *from_seq;
	unsigned char *dirty;
};

static void tnode_drop(struct tnode *n)
{
	if (n->rc)
		redisFree(n->rc);
	if (n->sub)
		redisFree(n->sub);
	n->rc = n->sub = NULL;
}

static void tail_nodes_free(fg_evtail *t)
{
	for (size_t i = 0; i < t->nnodes; i++)
		tnode_drop(&t->nodes[i]);
	free(t->nodes);
	t->nodes = NULL;
	t->nnodes = 0;
}

/* The view is brought up to the topology's generation: connections to
 * servers that are no longer masters go; on a Cluster every slot whose
 * master changed is read again from where it was (its stream moved with
 * it, its ids with it). */
static int tail_follow(fg_evtail *t)
{
	if (t->view.gen == fg_topo_gen(t->topo))
		return FG_OK;
	struct fg_topo_view v;
	if (fg_topo_view(t->topo, &v))
		return FG_ENOMEM;
	struct tnode *nodes = calloc(v.nnodes ? v.nnodes : 1, sizeof(*nodes));
	if (!nodes) {
		fg_topo_view_finish(&v);
		return FG_ENOMEM;
	}
	for (size_t i = 0; i < v.nnodes; i++) {
		nodes[i].node = v.nodes[i];
		for (size_t j = 0; j < t->nnodes; j++)
			if (t->nodes[j].node.port == v.nodes[i].port &&
			    strcmp(t->nodes[j].node.host, v.nodes[i].host) == 0) {
				nodes[i] = t->nodes[j];
				memset(&t->nodes[j], 0, sizeof(t->nodes[j]));
			}
	}
	if (v.slots && t->dirty)
		for (size_t s = 0; s < FG_SLOTS; s++)
			if (!t->view.slots || t->view.slots[s] >= t->view.nnodes ||
			    v.slots[s] >= v.nnodes ||
			    strcmp(t->view.nodes[t->view.slots[s]].host,
				   v.nodes[v.slots[s]].host) != 0 ||
			    t->view.nodes[t->view.slots[s]].port !=
			    v.nodes[v.slots[s]].port)
				t->dirty[s] = 1;
	tail_nodes_free(t);
	fg_topo_view_finish(&t->view);
	t->view = v;
	t->nodes = nodes;
	t->nnodes = v.nnodes;
	return FG_OK;
}

static struct timeval tv(unsigned ms)
{
	struct timeval x = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	return x;
}

static redisContext *tail_connect(fg_evtail *t, struct tnode *n)
{
	char why[FG_STORE_WHY_MAX];
	return fg__store_connect(t->topo, &n->node, t->connect_ms,
				 t->command_ms, why, sizeof(why));
}

/* A command on the follower's connection; NULL when it failed (then the
 * node's connections are dropped). */
static redisReply *tail_cmd(fg_evtail *t, struct tnode *n, redisContext *rc,
			    struct cmd *c)
{
	redisReply *r = redisCommandArgv(rc, c->argc, c->argv, c->len);
	if (!r) {
		tnode_drop(n);
		fg_topo_suspect(t->topo);
	}
	return r;
}

/* ---- one Redis -------------------------------------------------------- */

/* Where "now" is on one Redis: the stream's newest id (0-0 when it holds
 * nothing). */
static int one_start(fg_evtail *t, struct tnode *n)
{
	struct cmd c = { 0 };
	push(&c, "XREVRANGE");
	push(&c, FG__EV_ONE);
	push(&c, "+");
	push(&c, "-");
	push(&c, "COUNT");
	push(&c, "1");
	redisReply *r = tail_cmd(t, n, n->rc, &c);
	if (!r)
		return FG_EUNAVAIL;
	uint64_t ms = 0, seq = 0;
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_ARRAY &&
	    r->element[0]->elements >= 1 &&
	    redis_id(r->element[0]->element[0], &ms, &seq))
		ms = seq = 0;
	else if (r->type == REDIS_REPLY_ERROR && !reads_empty(r)) {
		freeReplyObject(r);
		return FG_EUNAVAIL;
	}
	freeReplyObject(r);
	t->rd_ms = ms;
	t->rd_seq = seq;
	if (!api_id(ms, seq))
		ms = seq = 0;
	t->pos = (struct fg_ev_cursor){ .ms = ms, .seq = seq, .set = true };
	return FG_OK;
}

/* One command of a subscriber's setup: true when answered with a reply
 * of type `want` (an integer's value into *out). A right refused
 * (NOPERM: the user lacks CLIENT or the channel) is told to the
 * topology's hook, as every refusal is. */
static bool setup_cmd(fg_evtail *t, struct tnode *n, int want, long long *out,
		      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(n->sub, fmt, ap);
	va_end(ap);
	bool ok = r && r->type == want;
	if (ok && out)
		*out = r->integer;
	if (r && r->type == REDIS_REPLY_ERROR)
		fg__login_refused(t->topo, &n->node, r->str);
	if (r)
		freeReplyObject(r);
	return ok;
}

static int tail_up(fg_evtail *t, struct tnode *n)
{
	if (n->rc)
		return FG_OK;
	uint64_t now = fg__mono_ms();
	if (now < n->next_try_ms)
		return FG_EUNAVAIL;
	n->next_try_ms = now + t->connect_ms;
	n->rc = tail_connect(t, n);
	if (!n->rc)
		return FG_EUNAVAIL;
	if (!t->view.slots) {
		if (!t->pos.set)
			return one_start(t, n);
		return FG_OK;
	}
	/* Cluster: the subscriber, told of every stream written from now
	 * on; then every slot of this master is read once */
	n->sub = tail_connect(t, n);
	if (!n->sub) {
		tnode_drop(n);
		return FG_EUNAVAIL;
	}
	long long id = -1;
	char ids[24];
	bool ok = setup_cmd(t, n, REDIS_REPLY_INTEGER, &id, "CLIENT ID");
	snprintf(ids, sizeof(ids), "%lld", id);
	ok = ok && setup_cmd(t, n, REDIS_REPLY_STATUS, NULL,
			     "CLIENT TRACKING on REDIRECT %s BCAST PREFIX %s",
			     ids, TRACK_PREFIX);
	ok = ok && setup_cmd(t, n, REDIS_REPLY_ARRAY, NULL,
			     "SUBSCRIBE __redis__:invalidate");
	if (!ok) {
		tnode_drop(n);
		fg_topo_suspect(t->topo);
		return FG_EUNAVAIL;
	}
	n->all = true;
	n->heard_ms = fg__mono_ms();
	n->ping_ms = 0;
	if (!t->pos.set) {
		uint64_t ms;
		if (redis_time(n->rc, &ms)) {
			tnode_drop(n);
			return FG_EUNAVAIL;
		}
		t->pos = (struct fg_ev_cursor){ .ms = ms, .cluster = true,
						.set = true };
		for (unsigned s = 0; s < FG_SLOTS; s++)
			resume_from(&t->pos, true, s, &t->from_ms[s],
				    &t->from_seq[s]);
	}
	return FG_OK;
}

static int one_next(fg_evtail *t, unsigned block_ms, fg_event_cb *cb,
		    void *arg)
{
	struct tnode *n = &t->nodes[0];
	int err = tail_up(t, n);
	if (err)
		return err;
	struct cmd c = { 0 };
	push(&c, "XREAD");
	push(&c, "COUNT");
	argf(&c, "%llu", ONE_COUNT, 0);
	if (block_ms) {
		push(&c, "BLOCK");
		argf(&c, "%llu", block_ms, 0);
	}
	push(&c, "STREAMS");
	push(&c, FG__EV_ONE);
	argf(&c, "%llu-%llu", t->rd_ms, t->rd_seq);
	redisSetTimeout(n->rc, tv(block_ms + t->command_ms));
	redisReply *r = tail_cmd(t, n, n->rc, &c);
	if (!r)
		return FG_EUNAVAIL;
	if (n->rc)
		redisSetTimeout(n->rc, tv(t->command_ms));
	int got = 0;
	if (r->type == REDIS_REPLY_ERROR) {
		got = reads_empty(r) ? 0 : FG_EUNAVAIL;
		if (got) {
			fg__login_refused(t->topo, &n->node, r->str);
			tnode_drop(n);
		}
		else if (block_ms)
			poll(NULL, 0, (int)block_ms); /* no stream to wait on:
							 wait as asked */
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
		   r->element[0]->type == REDIS_REPLY_ARRAY &&
		   r->element[0]->elements >= 2 &&
		   r->element[0]->element[1]->type == REDIS_REPLY_ARRAY) {
		const redisReply *es = r->element[0]->element[1];
		for (size_t i = 0; i < es->elements; i++) {
			struct fg_event ev;
			struct fg_ev_cursor cur;
			int e = entry_event(es->element[i], false, 0, &ev, &cur);
			if (e < 0)
				continue;
			/* XREAD gives only ids after rd */
			t->rd_ms = cur.ms;
			t->rd_seq = cur.seq;
			if (e > 0)
				continue;
			t->pos = cur;
			got++;
			if (cb(arg, &ev))
				break;
		}
	}
	freeReplyObject(r);
	return got;
}

/* ---- Cluster ---------------------------------------------------------- */

/* Reads what the subscriber has: every stream named is marked to read.
 * -1 when the connection is gone. */
static int take_invalidations(fg_evtail *t, struct tnode *n)
{
	if (redisBufferRead(n->sub) != REDIS_OK)
		return -1;
	for (;;) {
		redisReply *r = NULL;
		if (redisGetReplyFromReader(n->sub, (void **)&r) != REDIS_OK)
			return -1;
		if (!r)
			return 0;
		n->heard_ms = fg__mono_ms(); /* a PONG too */
		n->ping_ms = 0;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
		    r->element[0]->type == REDIS_REPLY_STRING &&
		    strcmp(r->element[0]->str, "message") == 0) {
			const redisReply *keys = r->element[2];
			if (keys->type == REDIS_REPLY_ARRAY) {
				for (size_t i = 0; i < keys->elements; i++) {
					const redisReply *k = keys->element[i];
					if (k->type != REDIS_REPLY_STRING)
						continue;
					unsigned s = fg_keyslot(k->str, k->len);
					char want[FG__EV_KEY_MAX];
					size_t wl = fg__ev_slot_key(s, want, sizeof(want));
					if (wl == k->len && memcmp(want, k->str, wl) == 0)
						t->dirty[s] = 1;
				}
			} else {
				n->all = true; /* a flush: every key */
			}
		}
		freeReplyObject(r);
	}
}

/* One entry read by the follower on a Cluster, to be given in order. */
struct tent {
	uint64_t ms, seq;
	unsigned slot;
	const redisReply *e;
};

static int tent_cmp(const void *a, const void *b)
{
	const struct tent *x = a, *y = b;
	return key_cmp(x->ms, x->slot, x->seq, y->ms, y->slot, y->seq);
}

/*
 * Reads the marked streams of master n (all of its slots when n->all),
 * FOLLOW_COUNT entries each, pipelined; gives their entries in (ms, slot,
 * seq) order. A stream that filled its COUNT stays marked. Returns how
 * many were given, or FG_EUNAVAIL (position kept for what was not).
 */
static int read_marked(fg_evtail *t, size_t ni, fg_event_cb *cb, void *arg,
		       bool *stop)
{
	struct tnode *n = &t->nodes[ni];
	unsigned *slots = malloc(FG_SLOTS * sizeof(*slots));
	redisReply **rs = calloc(FG_SLOTS, sizeof(*rs));
	struct tent *es = NULL;
	size_t ns = 0, nes = 0;
	int got = 0;

	if (!slots || !rs) {
		got = FG_ENOMEM;
		goto out;
	}
	for (unsigned s = 0; s < FG_SLOTS; s++)
		if (t->view.slots[s] == ni && (n->all || t->dirty[s]))
			slots[ns++] = s;
	n->all = false;
	for (size_t i = 0; i < ns; i++)
		t->dirty[slots[i]] = 0;
	n->last_read_ms = fg__mono_ms();
	for (size_t at = 0; at < ns;) {
		size_t end = at + PIPE_MAX < ns ? at + PIPE_MAX : ns;
		for (size_t i = at; i < end; i++) {
			char key[FG__EV_KEY_MAX];
			struct cmd c;
			fg__ev_slot_key(slots[i], key, sizeof(key));
			build_xrange(&c, key, t->from_ms[slots[i]],
				     t->from_seq[slots[i]], FOLLOW_COUNT);
			if (redisAppendCommandArgv(n->rc, c.argc, c.argv, c.len) != REDIS_OK)
				goto lost;
		}
		for (size_t i = at; i < end; i++)
			if (redisGetReply(n->rc, (void **)&rs[i]) != REDIS_OK || !rs[i])
				goto lost;
		at = end;
	}
	size_t total = 0;
	for (size_t i = 0; i < ns; i++) {
		if (rs[i]->type == REDIS_REPLY_ERROR && !reads_empty(rs[i])) {
			fg__login_refused(t->topo, &n->node, rs[i]->str);
			/* a slot that moved, a Redis that cannot answer: read
			 * them again once the map was looked at */
			for (size_t j = 0; j < ns; j++)
				t->dirty[slots[j]] = 1;
			fg_topo_suspect(t->topo);
			got = FG_EUNAVAIL;
			goto out;
		}
		if (rs[i]->type == REDIS_REPLY_ARRAY)
			total += rs[i]->elements;
	}
	es = malloc((total ? total : 1) * sizeof(*es));
	if (!es) {
		for (size_t j = 0; j < ns; j++)
			t->dirty[slots[j]] = 1;
		got = FG_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ns; i++) {
		const redisReply *r = rs[i];
		if (r->type != REDIS_REPLY_ARRAY)
			continue;
		if (r->elements >= FOLLOW_COUNT)
			t->dirty[slots[i]] = 1; /* more to read */
		for (size_t k = 0; k < r->elements; k++) {
			const redisReply *e = r->element[k];
			uint64_t ms, seq;
			if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
			    redis_id(e->element[0], &ms, &seq) == 0)
				es[nes++] = (struct tent){ ms, seq, slots[i], e };
		}
	}
	qsort(es, nes, sizeof(*es), tent_cmp);
	for (size_t k = 0; k < nes; k++) {
		struct fg_event ev;
		struct fg_ev_cursor cur;
		unsigned s = es[k].slot;
		if (id_cmp(es[k].ms, es[k].seq, t->from_ms[s], t->from_seq[s]) < 0)
			continue; /* never back, as on one Redis */
		int e = entry_event(es[k].e, true, s, &ev, &cur);
		resume_from(&cur, false, 0, &t->from_ms[s], &t->from_seq[s]);
		if (e)
			continue;
		t->pos = cur;
		got++;
		if (cb(arg, &ev)) {
			*stop = true;
			/* what was read and not given is read again */
			for (size_t j = k + 1; j < nes; j++)
				t->dirty[es[j].slot] = 1;
			break;
		}
	}
	goto out;
lost:
	for (size_t j = 0; j < ns; j++)
		t->dirty[slots[j]] = 1;
	tnode_drop(n);
	fg_topo_suspect(t->topo);
	got = FG_EUNAVAIL;
out:
	if (rs)
		for (size_t i = 0; i < FG_SLOTS; i++)
			if (rs[i])
				freeReplyObject(rs[i]);
	free(rs);
	free(slots);
	free(es);
	return got;
}

static bool has_marked(const fg_evtail *t, size_t ni)
{
	if (t->nodes[ni].all)
		return true;
	for (unsigned s = 0; s < FG_SLOTS; s++)
		if (t->dirty[s] && t->view.slots[s] == ni)
			return true;
	return false;
}

static int cluster_next(fg_evtail *t, unsigned block_ms, fg_event_cb *cb,
			void *arg)
{
	uint64_t end = fg__mono_ms() + block_ms;
	int down = FG_OK; /* a master not reached: told once nothing came */
	for (unsigned s = 0; s < FG_SLOTS; s++)
		if (t->view.slots[s] >= t->view.nnodes)
			down = FG_EUNAVAIL; /* a slot nobody serves (yet) */
	for (size_t i = 0; i < t->nnodes; i++) {
		int e = tail_up(t, &t->nodes[i]);
		if (e && !down)
			down = e;
	}
	struct pollfd *pfd = malloc(t->nnodes * sizeof(*pfd));
	size_t *pnode = malloc(t->nnodes * sizeof(*pnode));
	int got = 0;
	bool stop = false;
	if (!pfd || !pnode) {
		got = FG_ENOMEM;
		goto out;
	}
	for (;;) {
		/* wait for a subscriber to speak, or for a master whose
		 * streams are marked to be due again (at once when one is) */
		uint64_t now = fg__mono_ms(), wake = end;
		for (size_t i = 0; i < t->nnodes; i++) {
			struct tnode *n = &t->nodes[i];
			if (!n->rc || !has_marked(t, i))
				continue;
			uint64_t due = n->last_read_ms + FOLLOW_PACE_MS;
			if (due < wake)
				wake = due;
		}
		/* a subscriber silent for SUB_PING_MS is asked for a PONG,
		 * and one that gives none within command_ms is gone (its
		 * connection died without a word: tracking with it) */
		for (size_t i = 0; i < t->nnodes; i++) {
			struct tnode *n = &t->nodes[i];
			if (!n->sub)
				continue;
			if (n->ping_ms && now >= n->ping_ms + t->command_ms) {
				tnode_drop(n);
				fg_topo_suspect(t->topo);
				if (!down)
					down = FG_EUNAVAIL;
				continue;
			}
			if (!n->ping_ms && now >= n->heard_ms + SUB_PING_MS) {
				int done = 0;
				if (redisAppendCommand(n->sub, "PING") != REDIS_OK) {
					tnode_drop(n);
					continue;
				}
				while (!done)
					if (redisBufferWrite(n->sub, &done) != REDIS_OK)
						break;
				if (!done) {
					tnode_drop(n);
					fg_topo_suspect(t->topo);
					if (!down)
						down = FG_EUNAVAIL;
					continue;
				}
				n->ping_ms = now;
			}
			uint64_t due = n->ping_ms ? n->ping_ms + t->command_ms
						  : n->heard_ms + SUB_PING_MS;
			if (due < wake)
				wake = due;
		}
		size_t np = 0;
		for (size_t i = 0; i < t->nnodes; i++)
			if (t->nodes[i].sub) {
				pfd[np] = (struct pollfd){ .fd = t->nodes[i].sub->fd,
							   .events = POLLIN };
				pnode[np++] = i;
			}
		int pr = poll(pfd, np, (int)(wake > now ? wake - now : 0));
		if (pr < 0 && errno != EINTR) {
			if (!down)
				down = FG_EUNAVAIL;
			break;
		}
		for (size_t p = 0; p < np && pr > 0; p++) {
			struct tnode *n = &t->nodes[pnode[p]];
			if (pfd[p].revents && take_invalidations(t, n) < 0) {
				/* the subscriber is gone, and the tracking
				 * with it: read it all again once back */
				tnode_drop(n);
				fg_topo_suspect(t->topo);
				if (!down)
					down = FG_EUNAVAIL;
			}
		}
		now = fg__mono_ms();
		for (size_t i = 0; i < t->nnodes && !stop; i++) {
			struct tnode *n = &t->nodes[i];
			if (!n->rc || !has_marked(t, i) ||
			    now < n->last_read_ms + FOLLOW_PACE_MS)
				continue;
			int r = read_marked(t, i, cb, arg, &stop);
			if (r < 0 && !down)
				down = r;
			else if (r > 0)
				got += r;
		}
		if (got || stop || now >= end)
			break;
	}
out:
	free(pfd);
	free(pnode);
	if (got)
		return got;
	return down;
}

fg_evtail *fg_evtail_create(const struct fg_store_opts *o)
{
	fg_evtail *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->topo = o->topo;
	t->connect_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 500;
	t->command_ms = o->command_timeout_ms ? o->command_timeout_ms : 2000;
	t->from_ms = calloc(FG_SLOTS, sizeof(*t->from_ms));
	t->from_seq = calloc(FG_SLOTS, sizeof(*t->from_seq));
	t->dirty = calloc(FG_SLOTS, 1);
	if (!t->from_ms || !t->from_seq || !t->dirty) {
		fg_evtail_destroy(t);
		return NULL;
	}
	/* "now" is now, when Redis can be reached */
	if (tail_follow(t) == FG_OK)
		for (size_t i = 0; i < t->nnodes; i++)
			tail_up(t, &t->nodes[i]);
	return t;
}

void fg_evtail_destroy(fg_evtail *t)
{
	if (!t)
		return;
	tail_nodes_free(t);
	fg_topo_view_finish(&t->view);
	free(t->from_ms);
	free(t->from_seq);
	free(t->dirty);
	free(t);
}

int fg_evtail_next(fg_evtail *t, unsigned block_ms, fg_event_cb *cb,
		   void *arg)
{
	int err = tail_follow(t);
	if (err)
		return err;
	if (!t->nnodes) {
		fg_topo_suspect(t->topo);
		return FG_EUNAVAIL;
	}
	if (!t->view.slots)
		return one_next(t, block_ms, cb, arg);
	return cluster_next(t, block_ms, cb, arg);
}

void fg_evtail_position(const fg_evtail *t, struct fg_ev_cursor *out)
{
	*out = t->pos;
}
