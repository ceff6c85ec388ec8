/*
 * test_fence.c - unit tests of gateway/fence/fence.c: the contract's
 * fencing table as pure steps, with no I/O. The tests play its driver:
 * they hand it headers, a key and the time, answer the Redis calls it asks
 * for, and check which row refuses in which order, a forged against a
 * stale token, the two-lock write sets of COPY and MOVE, the wait for
 * older writes and the deadline of an admitted write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fencegate/error.h"
#include "fencegate/lock.h"
#include "fencegate/sequencer.h"
#include "base/config.h"
#include "base/writeset.h"
#include "fence/fence.h"

#define KEY_LEN 32
static const uint8_t KEY[KEY_LEN + 1] = "0123456789abcdef0123456789abcdef";
static const uint8_t OTHER_KEY[KEY_LEN + 1] = "fedcba9876543210fedcba9876543210";

/* One request: its headers (they must outlive the fence) and its fence. */
struct rq {
	struct fg_config cfg;
	struct fg_writeset ws;
	char ft[2][FG_SEQ_MAX];   /* Fencing-Token values */
	char dft[2][FG_SEQ_MAX];  /* Destination-Fencing-Token values */
	unsigned count[2];
	const char *value[2];
	struct fg_fence f;
	struct fg_fence_in in;
	struct fg_fence_call call;
};

static void seq_with(const uint8_t *key, const char *lock, enum fg_mode mode,
		     uint64_t token, char out[FG_SEQ_MAX])
{
	if (fg_seq_encode(key, KEY_LEN, lock, strlen(lock), mode, token, out,
			  FG_SEQ_MAX) < 0)
		fail_msg("cannot encode a sequencer for %s", lock);
}

static void seq(const char *lock, enum fg_mode mode, uint64_t token,
		char out[FG_SEQ_MAX])
{
	seq_with(KEY, lock, mode, token, out);
}

/* The write set of `method target` (Destination `dest`, may be NULL). */
static void request(struct rq *r, const char *method, const char *target,
		    const char *dest, bool has_token)
{
	memset(r, 0, sizeof(*r));
	fg_config_init(&r->cfg);
	enum fg_error e = fg_writeset_build(&r->cfg, method, target, dest, "gw",
					    has_token, &r->ws);
	if (e != FG_E_COUNT)
		fail_msg("%s %s: refused before the table (%d)", method, target, e);
	r->in.key = KEY;
	r->in.key_len = KEY_LEN;
	r->in.now = 1000;
}

/* Sends header h (FG_WS_*) once more, with value v. */
static void header(struct rq *r, enum fg_ws_header h, const char *v)
{
	char (*slot)[FG_SEQ_MAX] = h == FG_WS_FENCING_TOKEN ? r->ft : r->dft;
	unsigned n = r->count[h]++;
	snprintf(slot[n], FG_SEQ_MAX, "%s", v);
	r->value[h] = slot[n];
}

static void begin(struct rq *r)
{
	fg_fence_start(&r->f, &r->ws, r->value, r->count);
}

static enum fg_fence_step step(struct rq *r)
{
	return fg_fence_step(&r->f, &r->in, &r->call);
}

static void done(struct rq *r)
{
	fg_config_finish(&r->cfg);
}

/* The next step asks for CheckSequencer(lock, token). */
static void wants_check(struct rq *r, const char *lock, uint64_t token)
{
	assert_int_equal(step(r), FG_FENCE_CHECK);
	assert_string_equal(r->call.lock, lock);
	assert_int_equal(r->call.token, token);
	assert_true(fg_fence_calling(&r->f));
	/* until the answer is in, nothing moves */
	assert_int_equal(step(r), FG_FENCE_PENDING);
}

static void answer_check(struct rq *r, enum fg_check_status st,
			 bool has_current, uint64_t current)
{
	struct fg_check c = { st, FG_MODE_EXCLUSIVE, has_current, current };
	fg_fence_check_answer(&r->f, 0, &c);
}

/* The next step asks to admit member `member` (naming the write first if
 * it was not named yet). */
static void wants_admit(struct rq *r, int member, const char *lock,
			 uint64_t token)
{
	enum fg_fence_step s = step(r);
	if (s == FG_FENCE_NAME_WRITE) {
		fg_fence_name_write(&r->f, "gw1-w7");
		s = step(r);
	}
	assert_int_equal(s, FG_FENCE_ADMIT);
	assert_int_equal(r->call.member, member);
	assert_string_equal(r->call.lock, lock);
	assert_int_equal(r->call.token, token);
	assert_string_equal(r->f.write_id, "gw1-w7");
}

static void answer_admit(struct rq *r, enum fg_admit_status st, int64_t ms,
			 bool has_current, uint64_t current)
{
	struct fg_admit a = { st, ms, 0, has_current, current };
	fg_fence_admit_answer(&r->f, 0, &a);
}

static void refused_by(struct rq *r, enum fg_fence_row row, int member,
			   const char *lock, uint64_t token)
{
	assert_int_equal(step(r), FG_FENCE_REFUSED);
	const struct fg_fence_refusal *x = &r->f.refusal;
	if (x->row != row)
		fail_msg("refused by row %d, want %d", x->row, row);
	assert_int_equal(x->member, member);
	assert_string_equal(x->lock, lock);
	assert_int_equal(x->token, token);
	/* a verdict stands */
	assert_int_equal(step(r), FG_FENCE_REFUSED);
	assert_false(fg_fence_calling(&r->f));
}

/* ---- reads ------------------------------------------------------------ */

static void test_unfenced_read_passes_without_a_call(void **state)
{
	struct rq r;
	(void)state;
	request(&r, "GET", "/a/x", NULL, false);
	r.in.key_len = 0; /* not even the key is needed */
	begin(&r);
	assert_int_equal(step(&r), FG_FENCE_PASS);
	assert_int_equal(r.f.n, 0);
	assert_false(r.f.write);
	assert_null(fg_fence_first_write(&r.f));
	done(&r);
}

static void test_fenced_read_checks_its_grant(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	request(&r, "GET", "/a/x", NULL, true);
	/* a shared grant may read */
	seq("a/x", FG_MODE_SHARED, 7, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "a/x", 7);
	answer_check(&r, FG_CHECK_VALID, true, 7);
	assert_int_equal(step(&r), FG_FENCE_PASS);
	assert_int_equal(r.f.n, 1);
	assert_false(r.f.m[0].write);
	assert_int_equal(r.f.m[0].token, 7);
	assert_null(fg_fence_first_write(&r.f));
	done(&r);
}

/* A header value's trailing whitespace is not part of it (RFC 9110 5.5);
 * any other byte after the sequencer still makes it no sequencer. */
static void test_trailing_whitespace_is_not_part_of_the_token(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX], v[FG_SEQ_MAX];
	(void)state;
	seq("a/x", FG_MODE_EXCLUSIVE, 7, s);
	size_t n = strlen(s);
	assert_true(n + 4 < sizeof(v));
	memcpy(v, s, n);
	memcpy(v + n, " \t ", 4);
	request(&r, "GET", "/a/x", NULL, true);
	header(&r, FG_WS_FENCING_TOKEN, v);
	begin(&r);
	wants_check(&r, "a/x", 7);
	done(&r);
	memcpy(v + n, " x", 3);
	request(&r, "GET", "/a/x", NULL, true);
	header(&r, FG_WS_FENCING_TOKEN, v);
	begin(&r);
	refused_by(&r, FG_FENCE_NOT_SEQUENCER, 0, "a/x", 0);
	done(&r);
}

/* ---- the local rows, in their order ------------------------------------ */

static void test_write_without_token_is_refused_first(void **state)
{
	struct rq r;
	char buf[FG_NAME_MAX + 160];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	r.in.key_len = 0; /* ranked before a missing key */
	begin(&r);
	refused_by(&r, FG_FENCE_TOKEN_REQUIRED, 0, "a/x", 0);
	assert_false(r.f.refusal.has_current);
	assert_string_equal(fg_fence_message(&r.f, buf, sizeof(buf)),
			    "this write changes what lock a/x guards: "
			    "it needs a Fencing-Token header");
	done(&r);
}

static void test_no_key_fails_before_any_other_row(void **state)
{
	struct rq r;
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, "garbage");
	header(&r, FG_WS_FENCING_TOKEN, "garbage");
	r.in.key_len = 0;
	begin(&r);
	assert_int_equal(step(&r), FG_FENCE_FAILED);
	assert_int_equal(r.f.err, FG_ENOKEY);
	assert_int_equal(step(&r), FG_FENCE_FAILED);
	done(&r);
}

static void test_repeated_header_before_parsing(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX], buf[FG_NAME_MAX + 160];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	seq("a/x", FG_MODE_EXCLUSIVE, 3, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	refused_by(&r, FG_FENCE_TOKEN_REPEATED, 0, "a/x", 0);
	assert_string_equal(fg_fence_message(&r.f, buf, sizeof(buf)),
			    "more than one Fencing-Token header");
	done(&r);
}

static void test_unparseable_before_the_mac(void **state)
{
	struct rq r;
	char buf[FG_NAME_MAX + 160];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, "fg1.not-a-sequencer");
	begin(&r);
	refused_by(&r, FG_FENCE_NOT_SEQUENCER, 0, "a/x", 0);
	assert_string_equal(fg_fence_message(&r.f, buf, sizeof(buf)),
			    "the Fencing-Token is not a sequencer");
	done(&r);
}

static void test_bad_mac_is_forged_without_a_call(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX], buf[8];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	/* signed with another key, and for another lock: the MAC ranks first */
	seq_with(OTHER_KEY, "b/y", FG_MODE_SHARED, 3, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	refused_by(&r, FG_FENCE_BAD_MAC, 0, "a/x", 0);
	assert_null(fg_fence_message(&r.f, buf, sizeof(buf)));
	done(&r);
}

static void test_wrong_lock_asks_whether_forged_first(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX], buf[FG_NAME_MAX + 160];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	seq("b/y", FG_MODE_EXCLUSIVE, 9, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	/* the sequencer's own lock is asked about, not the member's */
	wants_check(&r, "b/y", 9);
	answer_check(&r, FG_CHECK_VALID, true, 9);
	refused_by(&r, FG_FENCE_WRONG_LOCK, 0, "a/x", 9);
	assert_false(r.f.refusal.has_current);
	assert_string_equal(fg_fence_message(&r.f, buf, sizeof(buf)),
			    "the Fencing-Token is for another lock than a/x, "
			    "which guards this path");
	done(&r);

	/* beyond any token issued for its lock: forged, naming that lock */
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "b/y", 9);
	answer_check(&r, FG_CHECK_FORGED, true, 4);
	refused_by(&r, FG_FENCE_BEYOND_ISSUED, 0, "b/y", 9);
	assert_true(r.f.refusal.has_current);
	assert_int_equal(r.f.refusal.current, 4);
	done(&r);

	/* the call failed: the local row still refuses */
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "b/y", 9);
	fg_fence_check_answer(&r.f, FG_EUNAVAIL, NULL);
	refused_by(&r, FG_FENCE_WRONG_LOCK, 0, "a/x", 9);
	done(&r);

	/* the call could not be sent: the lock store failed */
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "b/y", 9);
	fg_fence_unsent(&r.f, FG_EUNAVAIL);
	assert_false(fg_fence_calling(&r.f));
	assert_int_equal(step(&r), FG_FENCE_FAILED);
	assert_int_equal(r.f.err, FG_EUNAVAIL);
	done(&r);
}

static void test_wrong_lock_before_wrong_mode(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	seq("b/y", FG_MODE_SHARED, 5, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "b/y", 5);
	answer_check(&r, FG_CHECK_VALID, false, 0);
	refused_by(&r, FG_FENCE_WRONG_LOCK, 0, "a/x", 5);
	done(&r);
}

static void test_shared_grant_may_not_write(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX], buf[8];
	(void)state;
	request(&r, "DELETE", "/a/x", NULL, false);
	seq("a/x", FG_MODE_SHARED, 5, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "a/x", 5);
	answer_check(&r, FG_CHECK_VALID, true, 5);
	refused_by(&r, FG_FENCE_WRONG_MODE, 0, "a/x", 5);
	assert_null(fg_fence_message(&r.f, buf, sizeof(buf)));
	done(&r);

	/* and a forged one is still forged */
	request(&r, "DELETE", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "a/x", 5);
	answer_check(&r, FG_CHECK_FORGED, true, 2);
	refused_by(&r, FG_FENCE_BEYOND_ISSUED, 0, "a/x", 5);
	done(&r);
}

/* ---- forged against stale ------------------------------------------------ */

static void test_forged_and_stale_by_check(void **state)
{
	static const struct {
		enum fg_check_status st;
		enum fg_fence_row row;
	} t[] = {
		{ FG_CHECK_FORGED, FG_FENCE_BEYOND_ISSUED },
		{ FG_CHECK_STALE, FG_FENCE_STALE },
		{ FG_CHECK_EXPIRED, FG_FENCE_STALE },
	};
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		request(&r, "GET", "/a/x", NULL, true);
		seq("a/x", FG_MODE_EXCLUSIVE, 40, s);
		header(&r, FG_WS_FENCING_TOKEN, s);
		begin(&r);
		wants_check(&r, "a/x", 40);
		answer_check(&r, t[i].st, true, 41);
		refused_by(&r, t[i].row, 0, "a/x", 40);
		assert_true(r.f.refusal.has_current);
		assert_int_equal(r.f.refusal.current, 41);
		done(&r);
	}
}

static void test_forged_and_stale_by_admission(void **state)
{
	static const struct {
		enum fg_admit_status st;
		enum fg_fence_row row;
		const char *message;
	} t[] = {
		{ FG_ADMIT_FORGED, FG_FENCE_BEYOND_ISSUED, NULL },
		{ FG_ADMIT_STALE, FG_FENCE_STALE, NULL },
		{ FG_ADMIT_EXPIRING, FG_FENCE_EXPIRING,
		  "the lease ends before a write could finish" },
	};
	struct rq r;
	char s[FG_SEQ_MAX], buf[FG_NAME_MAX + 160];
	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		request(&r, "PUT", "/a/x", NULL, false);
		seq("a/x", FG_MODE_EXCLUSIVE, 12, s);
		header(&r, FG_WS_FENCING_TOKEN, s);
		begin(&r);
		/* a lone write member is judged by its admission alone */
		wants_admit(&r, 0, "a/x", 12);
		answer_admit(&r, t[i].st, 0, true, 13);
		refused_by(&r, t[i].row, 0, "a/x", 12);
		assert_int_equal(r.f.refusal.current, 13);
		const char *m = fg_fence_message(&r.f, buf, sizeof(buf));
		if (t[i].message)
			assert_string_equal(m, t[i].message);
		else
			assert_null(m);
		assert_false(fg_fence_give_back(&r.f, 0));
		done(&r);
	}
}

static void test_store_failures(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	request(&r, "GET", "/a/x", NULL, true);
	seq("a/x", FG_MODE_EXCLUSIVE, 1, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_check(&r, "a/x", 1);
	fg_fence_check_answer(&r.f, FG_EUNAVAIL, NULL);
	assert_int_equal(step(&r), FG_FENCE_FAILED);
	assert_int_equal(r.f.err, FG_EUNAVAIL);
	done(&r);

	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_admit(&r, 0, "a/x", 1);
	fg_fence_admit_answer(&r.f, FG_EUNAVAIL, NULL);
	assert_int_equal(step(&r), FG_FENCE_FAILED);
	done(&r);
}

/* ---- admission --------------------------------------------------------- */

static void test_admitted_deadline_counts_from_when_it_was_asked(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	seq("a/x", FG_MODE_EXCLUSIVE, 12, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	r.in.now = 5000;
	wants_admit(&r, 0, "a/x", 12);
	/* the answer comes later: the deadline is still the asking time's */
	r.in.now = 5300;
	answer_admit(&r, FG_ADMITTED, 800, true, 12);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	assert_int_equal(r.f.deadline_at, 5800);
	assert_int_equal(r.f.m[0].deadline_at, 5800);
	assert_true(r.f.m[0].admitted);
	assert_true(r.f.write);
	assert_int_equal(fg_fence_first_write(&r.f)->token, 12);
	/* over: its admission is given back once */
	assert_true(fg_fence_give_back(&r.f, 0));
	assert_false(fg_fence_give_back(&r.f, 0));
	done(&r);
}

static void test_wait_then_admitted(void **state)
{
	struct rq r;
	char s[FG_SEQ_MAX];
	(void)state;
	request(&r, "PUT", "/a/x", NULL, false);
	seq("a/x", FG_MODE_EXCLUSIVE, 12, s);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_admit(&r, 0, "a/x", 12);
	answer_admit(&r, FG_ADMIT_WAIT, 250, true, 12);
	assert_int_equal(step(&r), FG_FENCE_WAIT);
	assert_int_equal(r.f.waiting, 0);
	assert_int_equal(r.f.ms, 250);
	assert_int_equal(step(&r), FG_FENCE_WAIT);
	/* the wait loop admits it */
	fg_fence_wait_admitted(&r.f, 9000);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	assert_int_equal(r.f.deadline_at, 9000);
	assert_true(r.f.m[0].admitted);
	done(&r);

	/* or refuses it */
	request(&r, "PUT", "/a/x", NULL, false);
	header(&r, FG_WS_FENCING_TOKEN, s);
	begin(&r);
	wants_admit(&r, 0, "a/x", 12);
	answer_admit(&r, FG_ADMIT_WAIT, 250, true, 12);
	assert_int_equal(step(&r), FG_FENCE_WAIT);
	struct fg_admit a = { FG_ADMIT_STALE, 0, 0, true, 14 };
	fg_fence_wait_refused(&r.f, &a);
	refused_by(&r, FG_FENCE_STALE, 0, "a/x", 12);
	assert_int_equal(r.f.refusal.current, 14);
	done(&r);
}

/* ---- two locks: COPY and MOVE ------------------------------------------ */

static void test_move_checks_then_admits_both(void **state)
{
	struct rq r;
	char s1[FG_SEQ_MAX], s2[FG_SEQ_MAX];
	(void)state;
	request(&r, "MOVE", "/a/x", "/b/y", false);
	assert_int_equal(r.ws.n, 2);
	seq("a/x", FG_MODE_EXCLUSIVE, 3, s1);
	seq("b/y", FG_MODE_EXCLUSIVE, 8, s2);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	header(&r, FG_WS_DESTINATION_FENCING_TOKEN, s2);
	begin(&r);
	/* the first write member, followed by another, is checked first */
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	/* the last goes to its admission; both are admitted, in order */
	r.in.now = 1000;
	wants_admit(&r, 0, "a/x", 3);
	answer_admit(&r, FG_ADMITTED, 900, true, 3);
	r.in.now = 1040;
	wants_admit(&r, 1, "b/y", 8);
	answer_admit(&r, FG_ADMITTED, 500, true, 8);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	assert_int_equal(r.f.n, 2);
	assert_int_equal(r.f.m[0].deadline_at, 1900);
	assert_int_equal(r.f.m[1].deadline_at, 1540);
	assert_int_equal(r.f.deadline_at, 1540); /* the earliest */
	assert_string_equal(fg_fence_first_write(&r.f)->lock, "a/x");
	done(&r);
}

static void test_move_destination_rows_come_after_the_first_check(void **state)
{
	struct rq r;
	char s1[FG_SEQ_MAX], buf[FG_NAME_MAX + 160];
	(void)state;
	request(&r, "MOVE", "/a/x", "/b/y", false);
	seq("a/x", FG_MODE_EXCLUSIVE, 3, s1);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	begin(&r);
	/* member by member: the first one's round trip comes before the
	 * second one's missing header */
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	refused_by(&r, FG_FENCE_TOKEN_REQUIRED, 1, "b/y", 0);
	assert_int_equal(r.f.refusal.header, FG_WS_DESTINATION_FENCING_TOKEN);
	assert_string_equal(fg_fence_message(&r.f, buf, sizeof(buf)),
			    "this write changes what lock b/y guards: "
			    "it needs a Destination-Fencing-Token header");
	assert_int_equal(r.f.n, 0); /* not every member was checked */
	done(&r);

	/* a first member that is stale ends it there */
	request(&r, "MOVE", "/a/x", "/b/y", false);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	begin(&r);
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_STALE, true, 4);
	refused_by(&r, FG_FENCE_STALE, 0, "a/x", 3);
	done(&r);
}

static void test_move_admission_is_all_or_none(void **state)
{
	struct rq r;
	char s1[FG_SEQ_MAX], s2[FG_SEQ_MAX];
	(void)state;
	request(&r, "MOVE", "/a/x", "/b/y", false);
	seq("a/x", FG_MODE_EXCLUSIVE, 3, s1);
	seq("b/y", FG_MODE_EXCLUSIVE, 8, s2);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	header(&r, FG_WS_DESTINATION_FENCING_TOKEN, s2);
	begin(&r);
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	wants_admit(&r, 0, "a/x", 3);
	answer_admit(&r, FG_ADMITTED, 900, true, 3);
	wants_admit(&r, 1, "b/y", 8);
	answer_admit(&r, FG_ADMIT_WAIT, 60, true, 8);
	assert_int_equal(step(&r), FG_FENCE_WAIT);
	assert_int_equal(r.f.waiting, 1);
	assert_int_equal(r.f.ms, 60);
	/* the member admitted is given back while the other waits */
	assert_true(fg_fence_give_back(&r.f, 0));
	assert_false(fg_fence_give_back(&r.f, 1));
	/* once the waiting one is admitted, the other is admitted again */
	fg_fence_wait_admitted(&r.f, 3000);
	r.in.now = 2000;
	wants_admit(&r, 0, "a/x", 3);
	answer_admit(&r, FG_ADMITTED, 900, true, 3);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	assert_true(r.f.m[0].admitted && r.f.m[1].admitted);
	assert_int_equal(r.f.deadline_at, 2900);
	done(&r);

	/* refused on the second: the first is to be given back */
	request(&r, "MOVE", "/a/x", "/b/y", false);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	header(&r, FG_WS_DESTINATION_FENCING_TOKEN, s2);
	begin(&r);
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	wants_admit(&r, 0, "a/x", 3);
	answer_admit(&r, FG_ADMITTED, 900, true, 3);
	wants_admit(&r, 1, "b/y", 8);
	answer_admit(&r, FG_ADMIT_STALE, 0, true, 9);
	refused_by(&r, FG_FENCE_STALE, 1, "b/y", 8);
	assert_true(fg_fence_give_back(&r.f, 0));
	assert_false(fg_fence_give_back(&r.f, 1));
	done(&r);
}

static void test_copy_checks_its_source_and_admits_its_destination(void **state)
{
	struct rq r;
	char s1[FG_SEQ_MAX], s2[FG_SEQ_MAX];
	(void)state;
	request(&r, "COPY", "/a/x", "/b/y", true);
	assert_int_equal(r.ws.n, 2);
	/* the source is only read: a shared grant will do */
	seq("a/x", FG_MODE_SHARED, 3, s1);
	seq("b/y", FG_MODE_EXCLUSIVE, 8, s2);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	header(&r, FG_WS_DESTINATION_FENCING_TOKEN, s2);
	begin(&r);
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	r.in.now = 100;
	wants_admit(&r, 1, "b/y", 8);
	answer_admit(&r, FG_ADMITTED, 400, true, 8);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	assert_false(r.f.m[0].admitted);
	assert_true(r.f.m[1].admitted);
	assert_int_equal(r.f.deadline_at, 500);
	/* the write a forwarded token names is the destination's */
	assert_string_equal(fg_fence_first_write(&r.f)->lock, "b/y");
	assert_false(fg_fence_give_back(&r.f, 0));
	assert_true(fg_fence_give_back(&r.f, 1));
	done(&r);

	/* without a Destination-Fencing-Token */
	request(&r, "COPY", "/a/x", "/b/y", true);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	begin(&r);
	wants_check(&r, "a/x", 3);
	answer_check(&r, FG_CHECK_VALID, true, 3);
	refused_by(&r, FG_FENCE_TOKEN_REQUIRED, 1, "b/y", 0);
	done(&r);

	/* one lock for both paths: Fencing-Token alone, one admission */
	request(&r, "COPY", "/a/x", "/a/x", true);
	assert_int_equal(r.ws.n, 1);
	seq("a/x", FG_MODE_EXCLUSIVE, 3, s1);
	header(&r, FG_WS_FENCING_TOKEN, s1);
	begin(&r);
	wants_admit(&r, 0, "a/x", 3);
	answer_admit(&r, FG_ADMITTED, 400, true, 3);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	done(&r);
}

/* S3 mode: a write set of session-token members, as proxy/s3part.c builds
 * it (one member per lock the request changes). */
static void s3_request(struct rq *r, const char *const *locks, int n)
{
	memset(r, 0, sizeof(*r));
	fg_config_init(&r->cfg);
	r->ws.write = true;
	for (int i = 0; i < n; i++)
		assert_true(fg_ws_add_member(&r->ws, locks[i], true, FG_WS_SESSION_TOKEN));
	r->in.key = KEY;
	r->in.key_len = KEY_LEN;
	r->in.now = 1000;
}

static void test_session_token_members_take_the_sequencer_of_their_lock(void **state)
{
	struct rq r;
	char a[FG_SEQ_MAX], b[FG_SEQ_MAX], list[2 * FG_SEQ_MAX + 4];
	static const char *const locks[] = { "bkt/a", "bkt/b" };
	(void)state;
	seq("bkt/a", FG_MODE_EXCLUSIVE, 7, a);
	seq("bkt/b", FG_MODE_EXCLUSIVE, 8, b);
	/* in any order: each member finds its own */
	snprintf(list, sizeof(list), "%s, %s", b, a);
	s3_request(&r, locks, 2);
	begin(&r);
	fg_fence_sequencers(&r.f, list, strlen(list));
	/* a write member that another follows is checked first */
	wants_check(&r, "bkt/a", 7);
	answer_check(&r, FG_CHECK_VALID, true, 7);
	wants_admit(&r, 0, "bkt/a", 7);
	answer_admit(&r, FG_ADMITTED, 5000, true, 7);
	wants_admit(&r, 1, "bkt/b", 8);
	answer_admit(&r, FG_ADMITTED, 5000, true, 8);
	assert_int_equal(step(&r), FG_FENCE_ADMITTED);
	done(&r);
}

static void test_session_token_rows(void **state)
{
	struct rq r;
	char a[FG_SEQ_MAX], other[FG_SEQ_MAX], buf[FG_NAME_MAX + 200];
	static const char *const locks[] = { "bkt/a", "bkt/b" };
	(void)state;
	seq("bkt/a", FG_MODE_EXCLUSIVE, 7, a);
	seq("elsewhere", FG_MODE_EXCLUSIVE, 3, other);

	/* none carried: token required, naming where it travels */
	s3_request(&r, locks, 1);
	begin(&r);
	refused_by(&r, FG_FENCE_TOKEN_REQUIRED, 0, "bkt/a", 0);
	assert_non_null(strstr(fg_fence_message(&r.f, buf, sizeof(buf)),
			       "session token"));
	done(&r);

	/* one member's lock has none of its own: the wrong lock, after the
	 * first sequencer's own lock was asked whether it is forged */
	s3_request(&r, locks, 2);
	begin(&r);
	fg_fence_sequencers(&r.f, a, strlen(a));
	wants_check(&r, "bkt/a", 7);
	answer_check(&r, FG_CHECK_VALID, true, 7);
	wants_check(&r, "bkt/a", 7);
	answer_check(&r, FG_CHECK_VALID, true, 7);
	refused_by(&r, FG_FENCE_WRONG_LOCK, 1, "bkt/b", 7);
	done(&r);

	/* an empty item, and one that is no sequencer */
	s3_request(&r, locks, 1);
	begin(&r);
	char list[FG_SEQ_MAX + 8];
	snprintf(list, sizeof(list), "%s,,", a);
	fg_fence_sequencers(&r.f, list, strlen(list));
	refused_by(&r, FG_FENCE_TOKEN_REPEATED, 0, "bkt/a", 0);
	done(&r);

	s3_request(&r, locks, 1);
	begin(&r);
	fg_fence_sequencers(&r.f, "fg1.nope", 8);
	refused_by(&r, FG_FENCE_NOT_SEQUENCER, 0, "bkt/a", 0);
	done(&r);

	/* more than FG_FENCE_SEQS_MAX */
	s3_request(&r, locks, 1);
	begin(&r);
	for (int i = 0; i < FG_FENCE_SEQS_MAX + 1; i++)
		fg_fence_sequencers(&r.f, other, strlen(other));
	refused_by(&r, FG_FENCE_TOKEN_REPEATED, 0, "bkt/a", 0);
	done(&r);

	/* a forged one among them */
	char forged[FG_SEQ_MAX];
	seq_with(OTHER_KEY, "bkt/a", FG_MODE_EXCLUSIVE, 7, forged);
	s3_request(&r, locks, 1);
	begin(&r);
	fg_fence_sequencers(&r.f, forged, strlen(forged));
	refused_by(&r, FG_FENCE_BAD_MAC, 0, "bkt/a", 0);
	done(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unfenced_read_passes_without_a_call),
		cmocka_unit_test(test_fenced_read_checks_its_grant),
		cmocka_unit_test(test_trailing_whitespace_is_not_part_of_the_token),
		cmocka_unit_test(test_write_without_token_is_refused_first),
		cmocka_unit_test(test_no_key_fails_before_any_other_row),
		cmocka_unit_test(test_repeated_header_before_parsing),
		cmocka_unit_test(test_unparseable_before_the_mac),
		cmocka_unit_test(test_bad_mac_is_forged_without_a_call),
		cmocka_unit_test(test_wrong_lock_asks_whether_forged_first),
		cmocka_unit_test(test_wrong_lock_before_wrong_mode),
		cmocka_unit_test(test_shared_grant_may_not_write),
		cmocka_unit_test(test_forged_and_stale_by_check),
		cmocka_unit_test(test_forged_and_stale_by_admission),
		cmocka_unit_test(test_store_failures),
		cmocka_unit_test(test_admitted_deadline_counts_from_when_it_was_asked),
		cmocka_unit_test(test_wait_then_admitted),
		cmocka_unit_test(test_move_checks_then_admits_both),
		cmocka_unit_test(test_move_destination_rows_come_after_the_first_check),
		cmocka_unit_test(test_move_admission_is_all_or_none),
		cmocka_unit_test(test_copy_checks_its_source_and_admits_its_destination),
		cmocka_unit_test(test_session_token_members_take_the_sequencer_of_their_lock),
		cmocka_unit_test(test_session_token_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
