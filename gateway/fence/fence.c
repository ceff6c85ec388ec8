/*
 * fence.c - the contract's fencing table (its fencing section), for every
 * lock of a request's write set, as pure steps.
 *
 * Invariant: a step says PASS or ADMITTED only after every member of the
 * write set passed every row of the table, in the contract's order; every
 * refusal is decided before the request body is read, so a refused write
 * leaves nothing upstream. A write holds admissions either for all its
 * write members or for none: a member that must wait or is refused leaves
 * the others' admissions marked for its driver to give back. No I/O here:
 * what the table needs from outside (headers, key, time, Redis answers) is
 * handed to it.
 */
#include <stdio.h>
#include <string.h>

#include "base/text.h"
#include "fence/fence.h"

enum stage {
	ST_LOCAL,    /* member i: the rows decided without Redis */
	ST_FORGED,   /* member i failed a local row: is its token forged? */
	ST_CHECK,    /* member i: CheckSequencer asked */
	ST_ADMIT,    /* admit the next write member from i */
	ST_ADMITTED, /* member i: its admission asked */
	ST_WAIT,     /* member f->waiting waits on the wait loop */
	ST_REFUSED,
	ST_FAILED,
};

static const char *header_name(enum fg_ws_header h)
{
	return h == FG_WS_FENCING_TOKEN ? FG_FENCE_TOKEN_HEADER
	       : h == FG_WS_SESSION_TOKEN ? "sequencer (session token)"
					  : FG_FENCE_DEST_TOKEN_HEADER;
}

/* The value of a member's sequencer, or NULL with the row that refuses it
 * in *row: the one header it names, or (S3 mode) the one of the
 * request's sequencers that names its lock, else the first. Each of those
 * decodes on the way, so the one taken decodes again below. */
static const char *member_value(struct fg_fence *f, const struct fg_ws_member *m,
				const struct fg_fence_in *in, size_t *len,
				enum fg_fence_row *row)
{
	if (m->header != FG_WS_SESSION_TOKEN) {
		unsigned n = f->count[m->header];
		const char *value = f->value[m->header];
		if (n != 1) {
			*row = n == 0 ? FG_FENCE_TOKEN_REQUIRED : FG_FENCE_TOKEN_REPEATED;
			return NULL;
		}
		/* a field value excludes the whitespace around it (RFC
		 * 9110 5.5); libmicrohttpd drops the leading only */
		*len = strlen(value);
		while (*len > 0 && (value[*len - 1] == ' ' || value[*len - 1] == '\t'))
			(*len)--;
		return value;
	}
	if (f->seqs_bad) {
		*row = FG_FENCE_TOKEN_REPEATED;
		return NULL;
	}
	if (f->nseqs == 0) {
		*row = FG_FENCE_TOKEN_REQUIRED;
		return NULL;
	}
	for (unsigned i = 0; i < f->nseqs; i++) {
		struct fg_seq seq;
		if (fg_seq_decode(in->key, in->key_len, f->seq_at[i], f->seq_len[i],
				  &seq) == FG_SEQ_VALID &&
		    strcmp(seq.name, m->lock) == 0) {
			*len = f->seq_len[i];
			return f->seq_at[i];
		}
	}
	*len = f->seq_len[0];
	return f->seq_at[0];
}

static enum fg_fence_step refuse(struct fg_fence *f, enum fg_fence_row row,
				 const char *lock, uint64_t token,
				 bool has_current, uint64_t current)
{
	struct fg_fence_refusal *r = &f->refusal;
	r->row = row;
	r->member = f->i;
	r->header = f->ws[f->i].header;
	fg_copy(r->lock, sizeof(r->lock), lock);
	r->token = token;
	r->has_current = has_current;
	r->current = current;
	f->stage = ST_REFUSED;
	return FG_FENCE_REFUSED;
}

static enum fg_fence_step fail(struct fg_fence *f, int err)
{
	f->err = err;
	f->stage = ST_FAILED;
	return FG_FENCE_FAILED;
}

static enum fg_fence_step ask(struct fg_fence *f, enum fg_fence_step what,
			      const char *lock, uint64_t token,
			      struct fg_fence_call *call)
{
	f->asked = true;
	f->answered = false;
	call->member = f->i;
	call->lock = lock;
	call->token = token;
	return what;
}

/* A refusal of member i's admission (by its admit call or the wait loop). */
static enum fg_fence_step refuse_admission(struct fg_fence *f,
					   const struct fg_admit *a)
{
	const struct fg_fence_lock *m = &f->m[f->i];
	enum fg_fence_row row = a->status == FG_ADMIT_FORGED   ? FG_FENCE_BEYOND_ISSUED
				: a->status == FG_ADMIT_EXPIRING ? FG_FENCE_EXPIRING
								 : FG_FENCE_STALE;
	return refuse(f, row, m->lock, m->token, a->has_current, a->current);
}

/* The local rows for member i. FG_FENCE_PASS when they passed (the member
 * is in f->m[i]); else what the table needs or its verdict. */
static enum fg_fence_step check_local(struct fg_fence *f,
				      const struct fg_fence_in *in,
				      struct fg_fence_call *call)
{
	const struct fg_ws_member *m = &f->ws[f->i];
	bool none = m->header == FG_WS_SESSION_TOKEN
		? f->nseqs == 0 && !f->seqs_bad : f->count[m->header] == 0;
	if (none)
		return refuse(f, FG_FENCE_TOKEN_REQUIRED, m->lock, 0, false, 0);
	if (in->key_len == 0)
		return fail(f, FG_ENOKEY);
	size_t len = 0;
	enum fg_fence_row row;
	const char *value = member_value(f, m, in, &len, &row);
	if (!value)
		return refuse(f, row, m->lock, 0, false, 0);
	struct fg_seq *seq = &f->seq;
	switch (fg_seq_decode(in->key, in->key_len, value, len, seq)) {
	case FG_SEQ_MALFORMED:
		return refuse(f, FG_FENCE_NOT_SEQUENCER, m->lock, 0, false, 0);
	case FG_SEQ_FORGED:
		return refuse(f, FG_FENCE_BAD_MAC, m->lock, 0, false, 0);
	case FG_SEQ_VALID:
		break;
	}
	bool wrong_lock = strcmp(seq->name, m->lock) != 0;
	bool wrong_mode = m->write && seq->mode == FG_MODE_SHARED;
	if (wrong_lock || wrong_mode) {
		/* A well-signed sequencer that fails a local row may still
		 * carry a token beyond any issued for its lock, which the
		 * table ranks first: one round trip decides. */
		f->local = wrong_lock ? FG_FENCE_WRONG_LOCK : FG_FENCE_WRONG_MODE;
		f->stage = ST_FORGED;
		return ask(f, FG_FENCE_CHECK, seq->name, seq->token, call);
	}
	struct fg_fence_lock *out = &f->m[f->i];
	memcpy(out->lock, m->lock, sizeof(out->lock));
	out->token = seq->token;
	out->write = m->write;
	return FG_FENCE_PASS;
}

void fg_fence_start(struct fg_fence *f, const struct fg_writeset *ws,
		    const char *const value[2], const unsigned count[2])
{
	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 2; i++) {
		f->count[i] = count[i];
		f->value[i] = value[i];
	}
	f->nws = ws->n;
	memcpy(f->ws, ws->m, sizeof(ws->m[0]) * (size_t)ws->n);
	f->stage = ST_LOCAL;
}

enum fg_fence_step fg_fence_step(struct fg_fence *f, const struct fg_fence_in *in,
				 struct fg_fence_call *call)
{
	if (f->asked) {
		if (!f->answered)
			return FG_FENCE_PENDING;
		f->asked = false;
		f->answered = false;
	}
	for (;;) {
		switch (f->stage) {
		case ST_LOCAL: {
			if (f->i == f->nws) {
				f->n = f->nws;
				if (!f->write)
					return FG_FENCE_PASS;
				if (!f->write_id[0])
					return FG_FENCE_NAME_WRITE;
				f->stage = ST_ADMIT;
				f->i = 0;
				continue;
			}
			enum fg_fence_step s = check_local(f, in, call);
			if (s != FG_FENCE_PASS)
				return s;
			const struct fg_ws_member *m = &f->ws[f->i];
			f->write = f->write || m->write;
			/* A read member is judged by CheckSequencer; a write
			 * member by its admission, except one that another
			 * member follows, which is checked first (COPY and
			 * MOVE across two locks pay that round trip). */
			if (m->write && f->i + 1 == f->nws) {
				f->i++;
				continue;
			}
			f->stage = ST_CHECK;
			return ask(f, FG_FENCE_CHECK, f->m[f->i].lock,
				   f->m[f->i].token, call);
		}
		case ST_FORGED: {
			const struct fg_ws_member *m = &f->ws[f->i];
			const struct fg_seq *seq = &f->seq;
			/* a failed call leaves the local row to refuse it */
			if (!f->err && f->chk.status == FG_CHECK_FORGED)
				return refuse(f, FG_FENCE_BEYOND_ISSUED, seq->name,
					      seq->token, f->chk.has_current,
					      f->chk.current);
			return refuse(f, f->local, m->lock, seq->token, false, 0);
		}
		case ST_CHECK: {
			const struct fg_fence_lock *fl = &f->m[f->i];
			if (f->err)
				return fail(f, f->err);
			if (f->chk.status != FG_CHECK_VALID)
				return refuse(f, f->chk.status == FG_CHECK_FORGED
						 ? FG_FENCE_BEYOND_ISSUED : FG_FENCE_STALE,
					      fl->lock, fl->token, f->chk.has_current,
					      f->chk.current);
			f->i++;
			f->stage = ST_LOCAL;
			continue;
		}
		case ST_ADMIT: {
			while (f->i < f->n && (!f->m[f->i].write || f->m[f->i].admitted))
				f->i++;
			if (f->i == f->n) {
				f->deadline_at = 0;
				for (int i = 0; i < f->n; i++)
					if (f->m[i].admitted &&
					    (!f->deadline_at || f->m[i].deadline_at < f->deadline_at))
						f->deadline_at = f->m[i].deadline_at;
				return FG_FENCE_ADMITTED;
			}
			struct fg_fence_lock *m = &f->m[f->i];
			f->stage = ST_ADMITTED;
			f->asked_at = in->now;
			return ask(f, FG_FENCE_ADMIT, m->lock, m->token, call);
		}
		case ST_ADMITTED: {
			struct fg_fence_lock *m = &f->m[f->i];
			if (f->err)
				return fail(f, f->err);
			if (f->adm.status == FG_ADMITTED) {
				m->admitted = true;
				m->deadline_at = f->asked_at + (uint64_t)f->adm.ms;
				f->stage = ST_ADMIT;
				continue;
			}
			if (f->adm.status == FG_ADMIT_WAIT) {
				f->waiting = f->i;
				f->ms = f->adm.ms;
				f->stage = ST_WAIT;
				return FG_FENCE_WAIT;
			}
			return refuse_admission(f, &f->adm);
		}
		case ST_WAIT:
			return FG_FENCE_WAIT;
		case ST_REFUSED:
			return FG_FENCE_REFUSED;
		case ST_FAILED:
		default:
			return FG_FENCE_FAILED;
		}
	}
}

void fg_fence_sequencers(struct fg_fence *f, const char *list, size_t len)
{
	size_t at = 0;
	while (at <= len) {
		const char *comma = memchr(list + at, ',', len - at);
		size_t end = comma ? (size_t)(comma - list) : len;
		size_t a = at, b = end;
		while (a < b && (list[a] == ' ' || list[a] == '\t'))
			a++;
		while (b > a && (list[b - 1] == ' ' || list[b - 1] == '\t'))
			b--;
		if (a == b || f->nseqs == FG_FENCE_SEQS_MAX) {
			f->seqs_bad = true;
			return;
		}
		f->seq_at[f->nseqs] = list + a;
		f->seq_len[f->nseqs++] = b - a;
		at = end + 1;
	}
}

void fg_fence_check_answer(struct fg_fence *f, int err, const struct fg_check *chk)
{
	f->err = err;
	if (!err)
		f->chk = *chk;
	f->answered = true;
}

void fg_fence_admit_answer(struct fg_fence *f, int err, const struct fg_admit *a)
{
	f->err = err;
	if (!err)
		f->adm = *a;
	f->answered = true;
}

void fg_fence_unsent(struct fg_fence *f, int err)
{
	f->asked = false;
	f->answered = false;
	fail(f, err);
}

void fg_fence_name_write(struct fg_fence *f, const char *id)
{
	fg_copy(f->write_id, sizeof(f->write_id), id);
}

void fg_fence_wait_admitted(struct fg_fence *f, uint64_t deadline_at)
{
	f->m[f->waiting].admitted = true;
	f->m[f->waiting].deadline_at = deadline_at;
	f->stage = ST_ADMIT;
	f->i = 0;
}

void fg_fence_wait_refused(struct fg_fence *f, const struct fg_admit *a)
{
	f->i = f->waiting;
	refuse_admission(f, a);
}

bool fg_fence_calling(const struct fg_fence *f)
{
	return f->asked;
}

bool fg_fence_give_back(struct fg_fence *f, int i)
{
	if (i < 0 || i >= f->n || !f->m[i].admitted)
		return false;
	f->m[i].admitted = false;
	return true;
}

const struct fg_fence_lock *fg_fence_first_write(const struct fg_fence *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->m[i].write)
			return &f->m[i];
	return NULL;
}

const char *fg_fence_message(const struct fg_fence *f, char *buf, size_t cap)
{
	const struct fg_fence_refusal *r = &f->refusal;
	const char *h = header_name(r->header);
	switch (r->row) {
	case FG_FENCE_TOKEN_REQUIRED:
		if (r->header == FG_WS_SESSION_TOKEN)
			snprintf(buf, cap, "this write changes what lock %s guards: "
				 "it needs that lock's sequencer in its session token "
				 "(AWS_SESSION_TOKEN; fencectl lock --s3) or a "
				 "Fencing-Token header", r->lock);
		else
			snprintf(buf, cap, "this write changes what lock %s guards: "
				 "it needs a %s header", r->lock, h);
		return buf;
	case FG_FENCE_TOKEN_REPEATED:
		if (r->header == FG_WS_SESSION_TOKEN)
			snprintf(buf, cap, "the session token's sequencers are not a "
				 "comma-separated list of at most %d, or more than one "
				 "Fencing-Token header came", FG_FENCE_SEQS_MAX);
		else
			snprintf(buf, cap, "more than one %s header", h);
		return buf;
	case FG_FENCE_NOT_SEQUENCER:
		snprintf(buf, cap, "the %s is not a sequencer", h);
		return buf;
	case FG_FENCE_WRONG_LOCK:
		if (r->header == FG_WS_SESSION_TOKEN)
			snprintf(buf, cap, "no sequencer the request carries is for "
				 "lock %s, which guards an object it changes", r->lock);
		else
			snprintf(buf, cap, "the %s is for another lock than %s, "
				 "which guards this path", h, r->lock);
		return buf;
	case FG_FENCE_EXPIRING:
		return "the lease ends before a write could finish";
	default:
		return NULL;
	}
}
