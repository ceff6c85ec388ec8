/*
 * fence.h - the contract's fencing table, as pure steps: the checks a
 * fenced request must pass before any byte of it goes upstream, for every
 * lock of its write set. Private to the gateway.
 *
 * The table does no I/O: it reads no header, sends no Redis call, answers
 * and logs nothing and reads no clock. Its driver (proxy/flow.c) hands
 * it the request's inputs, asks fg_fence_step() what comes next, makes the
 * Redis call a step asks for and hands back its answer, until a step gives
 * a verdict.
 */
#ifndef FENCEGATE_FENCE_H
#define FENCEGATE_FENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fencegate/lock.h"
#include "fencegate/name.h"
#include "fencegate/sequencer.h"
#include "base/writeset.h"

#define FG_FENCE_TOKEN_HEADER "Fencing-Token"
#define FG_FENCE_DEST_TOKEN_HEADER "Destination-Fencing-Token"
/* The most sequencers one S3 request may carry. */
#define FG_FENCE_SEQS_MAX FG_WS_MAX

/* What a step of the table needs next, or its verdict. */
enum fg_fence_step {
	/* a Redis call is needed (struct fg_fence_call says for what); its
	 * answer goes to fg_fence_check_answer() / fg_fence_admit_answer(),
	 * or fg_fence_unsent() when it could not be sent */
	FG_FENCE_CHECK,      /* CheckSequencer(lock, token) */
	FG_FENCE_ADMIT,      /* AdmitWrite(lock, token) under f->write_id */
	FG_FENCE_NAME_WRITE, /* the checks passed and the request writes:
				name the write (fg_fence_name_write()) */
	FG_FENCE_PENDING,    /* the answer of the call asked for is not in */
	/* verdicts; a step after one gives it again */
	FG_FENCE_PASS,       /* an unfenced read, or a fenced read that checked */
	FG_FENCE_ADMITTED,   /* every write member admitted: forward it before
				f->deadline_at */
	FG_FENCE_WAIT,       /* member f->waiting must wait for older writes,
				asking again within f->ms */
	FG_FENCE_REFUSED,    /* f->refusal says by which row */
	FG_FENCE_FAILED,     /* the lock store failed (f->err, an fg_err):
				no key yet, or a Redis call failed */
};

/* The row of the table that refused, in the order they are tried. */
enum fg_fence_row {
	FG_FENCE_TOKEN_REQUIRED, /* no header for the member (428) */
	FG_FENCE_TOKEN_REPEATED, /* more than one (400 malformed_token) */
	FG_FENCE_NOT_SEQUENCER,  /* unparseable (400 malformed_token) */
	FG_FENCE_BAD_MAC,        /* the HMAC does not verify (403 forged_token) */
	FG_FENCE_BEYOND_ISSUED,  /* a token greater than any issued for its
				    lock (403 forged_token) */
	FG_FENCE_WRONG_LOCK,     /* another lock's sequencer (403) */
	FG_FENCE_WRONG_MODE,     /* a shared grant's, for a write (403) */
	FG_FENCE_STALE,          /* not the live grant's token (409) */
	FG_FENCE_EXPIRING,       /* the live grant ends before a write could
				    (409 stale_token) */
};

/* A refusal, with what its answer and its log line name. */
struct fg_fence_refusal {
	enum fg_fence_row row;
	int member;                  /* the write set member refused */
	enum fg_ws_header header;    /* where its sequencer came from */
	char lock[FG_NAME_MAX + 1];  /* the lock it names */
	uint64_t token;              /* 0: no token was read */
	bool has_current;
	uint64_t current;            /* the newest token the lock knows of */
};

/* The Redis call a step asks for. */
struct fg_fence_call {
	int member;
	const char *lock;  /* into the fence: valid until its next change */
	uint64_t token;
};

/* What a step is handed besides the fence's own state. */
struct fg_fence_in {
	const uint8_t *key;  /* the HMAC key in force */
	size_t key_len;      /* 0: not known yet */
	uint64_t now;        /* monotonic ms: an admission asked for in this
				step counts its deadline from it */
};

/* One lock of the write set, once its sequencer checked. */
struct fg_fence_lock {
	char lock[FG_NAME_MAX + 1];
	uint64_t token;
	bool write;            /* admitted as a write (else a fenced read) */
	bool admitted;         /* holds an admission record under write_id */
	uint64_t deadline_at;  /* admitted: monotonic ms, counted from when the
				  admission was asked for */
};

struct fg_fence {
	bool write;             /* some member that passed its local rows
				   is a write */
	int n;                  /* members checked: set once all were */
	struct fg_fence_lock m[FG_WS_MAX];
	char write_id[FG_WAITER_ID_MAX]; /* one id for every admission */
	int waiting;            /* WAIT: the member that waits */
	int64_t ms;             /* WAIT: ask again within this many ms */
	uint64_t deadline_at;   /* ADMITTED: the earliest member deadline */
	struct fg_fence_refusal refusal; /* REFUSED */
	int err;                /* FAILED */

	/* the table's progress (fence.c) */
	struct fg_ws_member ws[FG_WS_MAX];
	int nws;
	const char *value[FG_WS_HEADERS]; /* each header's sequencer, when
					     single */
	unsigned count[FG_WS_HEADERS];    /* how many of each header came */
	/* FG_WS_SESSION_TOKEN: the request's sequencers (fg_fence_sequencers()) */
	const char *seq_at[FG_FENCE_SEQS_MAX];
	size_t seq_len[FG_FENCE_SEQS_MAX];
	unsigned nseqs;
	bool seqs_bad;          /* more than FG_FENCE_SEQS_MAX, or an empty one */
	int stage, i;
	bool asked;             /* a Redis call was asked for; its answer is
				   not taken yet */
	bool answered;          /* its answer is in (err, chk or adm) */
	struct fg_check chk;
	struct fg_admit adm;
	uint64_t asked_at;      /* when the admission was asked for */
	struct fg_seq seq;      /* a sequencer whose token may be forged */
	enum fg_fence_row local; /* what it is refused for if not forged */
};

/**
 * Sets the table up for a request: its write set `ws` (copied), and for
 * each header (FG_WS_FENCING_TOKEN, FG_WS_DESTINATION_FENCING_TOKEN) how
 * many came and the value of one (NULL when none came; not copied: it
 * must live as long as the fence runs). A write set of no member passes.
 */
void fg_fence_start(struct fg_fence *f, const struct fg_writeset *ws,
		    const char *const value[2], const unsigned count[2]);

/**
 * S3 mode, after fg_fence_start(): the sequencers the FG_WS_SESSION_TOKEN
 * members are checked against, a comma-separated list of `len` bytes (not
 * copied: it must live as long as the fence runs; called once per list: a
 * session token's, then a Fencing-Token header's). Each member takes the
 * one that names its lock; with none that does, the first (refused for
 * the wrong lock); with none at all, it is refused as token required. An
 * empty item, or more than FG_FENCE_SEQS_MAX in all, is a malformed token.
 */
void fg_fence_sequencers(struct fg_fence *f, const char *list, size_t len);

/**
 * Runs the table from where it stands until it needs something or is
 * decided. The contract's order, member by member: token present,
 * parseable and single, HMAC, token not beyond any issued, the member's
 * lock, the mode; then (one Redis round trip per member) the live grant
 * (CheckSequencer for a read member and for a write member another member
 * follows) and the ordering of writes (one admission per write member, all
 * or none). *call is set for CHECK and ADMIT.
 *
 * After WAIT, REFUSED or FAILED, the admissions the fence still marks
 * (fg_fence_give_back()) are to be given back.
 */
enum fg_fence_step fg_fence_step(struct fg_fence *f, const struct fg_fence_in *in,
				 struct fg_fence_call *call);

/** The answer of the CHECK asked for (chk read only when err is 0). */
void fg_fence_check_answer(struct fg_fence *f, int err, const struct fg_check *chk);

/** The answer of the ADMIT asked for (a read only when err is 0). */
void fg_fence_admit_answer(struct fg_fence *f, int err, const struct fg_admit *a);

/** The call asked for could not be sent (err, an fg_err): the next step
 *  is FAILED. */
void fg_fence_unsent(struct fg_fence *f, int err);

/** Names the write (NAME_WRITE): `id` (copied) is its admissions' id. */
void fg_fence_name_write(struct fg_fence *f, const char *id);

/** After WAIT: the wait loop admitted member f->waiting with this deadline
 *  (monotonic ms); the next steps admit the other write members again. */
void fg_fence_wait_admitted(struct fg_fence *f, uint64_t deadline_at);

/** After WAIT: the wait loop's admission of member f->waiting was refused
 *  (a: stale, expiring or forged); the next step is REFUSED. */
void fg_fence_wait_refused(struct fg_fence *f, const struct fg_admit *a);

/** Is a Redis call asked for whose answer no step took yet? */
bool fg_fence_calling(const struct fg_fence *f);

/** Unmarks member i's admission. True when it held one: the caller ends
 *  that record in Redis. */
bool fg_fence_give_back(struct fg_fence *f, int i);

/** The first member admitted as a write (the one a forwarded token and a
 *  refusal name), or NULL for a fenced read. */
const struct fg_fence_lock *fg_fence_first_write(const struct fg_fence *f);

/** The message of a refusal when its row has one of its own (in buf, cap
 *  bytes), else NULL: the error's default message. */
const char *fg_fence_message(const struct fg_fence *f, char *buf, size_t cap);

#endif
