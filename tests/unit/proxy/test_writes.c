/*
 * test_writes.c - unit tests of gateway/proxy/writes.c, its table alone:
 * the transfers and the Redis calls are faked by the operations it is
 * handed. An abort or a shortened lease before or after a write
 * registers, the ring's bound, the send gate, the grace of a write sent
 * whole, extensions asked ahead of the deadline and after a reconnect,
 * and what their answers do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>

#include "proxy/writes.h"

#define MARGIN 50

/* A write and what its fake transfer says and was told. */
struct fake {
	struct fg_write w;
	enum fg_write_stage stage;
	int aborts;
	int extends;
	int members_asked; /* extensions sent by the last extend */
};

static struct fake *fake_of(struct fg_write *w)
{
	return (struct fake *)((char *)w - offsetof(struct fake, w));
}

static enum fg_write_stage fake_stage(struct fg_write *w)
{
	return fake_of(w)->stage;
}

static void fake_abort(struct fg_write *w)
{
	struct fake *f = fake_of(w);
	f->aborts++;
	f->stage = FG_WRITE_OVER;
}

static void fake_extend(struct fg_write *w, uint64_t now)
{
	struct fake *f = fake_of(w);
	f->extends++;
	fg_write_extend_begin(w, now);
	f->members_asked = 0;
	for (int i = 0; i < w->n; i++) {
		if (!w->admitted[i])
			continue;
		fg_write_extend_sent(w);
		f->members_asked++;
	}
	fg_write_extend_end(w);
}

static const struct fg_writes_ops ops = {
	.stage = fake_stage,
	.abort = fake_abort,
	.extend = fake_extend,
};

struct env {
	struct event_base *base;
	struct fg_writes *ws;
};

static int setup(void **state)
{
	static struct env e;
	e.base = event_base_new();
	assert_non_null(e.base);
	e.ws = fg_writes_create(e.base, MARGIN, &ops);
	assert_non_null(e.ws);
	*state = &e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	fg_writes_destroy(e->ws);
	event_base_free(e->base);
	return 0;
}

/* One member admitted until `dl`; a second one, admitted or not. */
static void init(struct fake *f, const char *id, uint64_t dl)
{
	static const bool admitted[2] = { true, false };
	const uint64_t mdl[2] = { dl, 0 };
	memset(f, 0, sizeof(*f));
	fg_write_init(&f->w, id, 1, admitted, mdl, dl);
	f->stage = FG_WRITE_SENDING;
}

static void test_register_find_remove(void **state)
{
	struct env *e = *state;
	struct fake a, b;
	init(&a, "gw-w1", 1000);
	init(&b, "gw-w2", 1000);
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_writes_add(e->ws, &b.w));
	assert_ptr_equal(fg_writes_find(e->ws, "gw-w1"), &a.w);
	assert_ptr_equal(fg_writes_find(e->ws, "gw-w2"), &b.w);
	assert_null(fg_writes_find(e->ws, "gw-w3"));
	fg_writes_remove(e->ws, &a.w);
	assert_null(fg_writes_find(e->ws, "gw-w1"));
	fg_writes_remove(e->ws, &a.w); /* twice: nothing */
	fg_writes_remove(e->ws, &b.w);
}

static void test_abort_running(void **state)
{
	struct env *e = *state;
	struct fake a;
	init(&a, "gw-w1", 1000);
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_write_may_send(&a.w, 500));
	assert_false(a.w.deadline_hit);
	fg_writes_abort(e->ws, "gw-w1");
	assert_true(a.w.released);
	/* the gate closes at once, whatever the time */
	assert_false(fg_write_may_send(&a.w, 500));
	assert_true(a.w.deadline_hit);
	/* and the next look cuts it off */
	fg_writes_check(e->ws, 500);
	assert_int_equal(a.aborts, 1);
	assert_int_equal(a.extends, 0);
	fg_writes_remove(e->ws, &a.w);
}

/* The stop's bound: every running write ends as at its grant's end; one
 * sent whole is awaited the margin more, as after a release. */
static void test_end_all(void **state)
{
	struct env *e = *state;
	struct fake a, b, c;
	init(&a, "gw-w1", 5000);
	init(&b, "gw-w2", 0); /* no deadline at all */
	init(&c, "gw-w3", 5000);
	c.stage = FG_WRITE_SENT;
	assert_int_equal(fg_writes_end_all(e->ws), 0);
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_writes_add(e->ws, &b.w));
	assert_true(fg_writes_add(e->ws, &c.w));
	assert_int_equal(fg_writes_end_all(e->ws), 3);
	assert_true(a.w.released && a.w.stopped);
	assert_true(b.w.released && b.w.stopped);
	assert_false(fg_write_may_send(&a.w, 100));
	assert_false(fg_write_may_send(&b.w, 100));
	fg_writes_check(e->ws, 100);
	assert_int_equal(a.aborts, 1);
	assert_int_equal(b.aborts, 1);
	assert_int_equal(c.aborts, 0);
	assert_true(c.w.grace);
	assert_int_equal(c.w.deadline, 100 + MARGIN);
	assert_int_equal(a.extends + b.extends + c.extends, 0);
	fg_writes_check(e->ws, 100 + MARGIN);
	assert_int_equal(c.aborts, 1);
	fg_writes_remove(e->ws, &a.w);
	fg_writes_remove(e->ws, &b.w);
	fg_writes_remove(e->ws, &c.w);
}

static void test_abort_before_register(void **state)
{
	struct env *e = *state;
	struct fake a;
	fg_writes_abort(e->ws, "gw-w7");
	init(&a, "gw-w7", 1000);
	assert_false(fg_writes_add(e->ws, &a.w)); /* never forwarded */
	assert_null(fg_writes_find(e->ws, "gw-w7"));
}

static void test_reask_before_register(void **state)
{
	struct env *e = *state;
	struct fake a;
	fg_writes_reask(e->ws, "gw-w8", 700);
	fg_writes_reask(e->ws, "gw-w8", 600); /* the earliest counts */
	init(&a, "gw-w8", 1000);
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_int_equal(a.w.deadline, 600);
	assert_int_equal(a.w.mdeadline[0], 600);
	assert_true(a.w.reask);
	/* asked for at once, far from its deadline */
	fg_writes_check(e->ws, 100);
	assert_int_equal(a.extends, 1);
	assert_false(a.w.reask);
	fg_writes_remove(e->ws, &a.w);
}

static void test_abort_wins_over_reask(void **state)
{
	struct env *e = *state;
	struct fake a;
	fg_writes_reask(e->ws, "gw-w9", 700);
	fg_writes_abort(e->ws, "gw-w9");
	fg_writes_reask(e->ws, "gw-w9", 800);
	init(&a, "gw-w9", 1000);
	assert_false(fg_writes_add(e->ws, &a.w));
}

static void test_ring_bound(void **state)
{
	struct env *e = *state;
	char id[FG_WAITER_ID_MAX];
	fg_writes_abort(e->ws, "gw-old");
	for (int i = 0; i < FG_WRITES_RING - 1; i++) {
		snprintf(id, sizeof(id), "gw-r%d", i);
		fg_writes_abort(e->ws, id);
	}
	struct fake a;
	init(&a, "gw-old", 1000);
	assert_false(fg_writes_add(e->ws, &a.w)); /* still in the ring */
	fg_writes_abort(e->ws, "gw-one-more");
	assert_true(fg_writes_add(e->ws, &a.w)); /* forgotten */
	fg_writes_remove(e->ws, &a.w);
}

static void test_reask_running(void **state)
{
	struct env *e = *state;
	struct fake a;
	init(&a, "gw-w1", 1000);
	assert_true(fg_writes_add(e->ws, &a.w));
	fg_writes_reask(e->ws, "gw-w1", 400);
	assert_int_equal(a.w.deadline, 400);
	assert_false(fg_write_may_send(&a.w, 400));
	/* a later end does not move it back */
	fg_writes_reask(e->ws, "gw-w1", 900);
	assert_int_equal(a.w.deadline, 400);
	fg_writes_remove(e->ws, &a.w);
}

static void test_deadline_abort_or_grace(void **state)
{
	struct env *e = *state;
	struct fake sending, sent, queued, over;
	init(&sending, "gw-w1", 1000);
	init(&sent, "gw-w2", 1000);
	init(&queued, "gw-w3", 1000);
	init(&over, "gw-w4", 1000);
	sent.stage = FG_WRITE_SENT;
	queued.stage = FG_WRITE_QUEUED;
	over.stage = FG_WRITE_OVER;
	struct fake *all[] = { &sending, &sent, &queued, &over };
	for (int i = 0; i < 4; i++)
		assert_true(fg_writes_add(e->ws, &all[i]->w));
	fg_writes_check(e->ws, 1000);
	/* still sending at its deadline: cut off */
	assert_int_equal(sending.aborts, 1);
	assert_true(sending.w.deadline_hit);
	/* sent whole: awaited for the margin */
	assert_int_equal(sent.aborts, 0);
	assert_true(sent.w.grace);
	assert_int_equal(sent.w.deadline, 1000 + MARGIN);
	assert_int_equal(sent.extends, 0); /* no extension in its grace */
	/* not begun, or ended: left alone */
	assert_int_equal(queued.aborts + over.aborts, 0);
	/* a shorter lease does not take the grace back */
	fg_writes_reask(e->ws, "gw-w2", 1001);
	assert_int_equal(sent.w.deadline, 1000 + MARGIN);
	fg_writes_check(e->ws, 1000 + MARGIN);
	assert_int_equal(sent.aborts, 1);
	for (int i = 0; i < 4; i++)
		fg_writes_remove(e->ws, &all[i]->w);
}

static void test_released_sent_grace_from_now(void **state)
{
	struct env *e = *state;
	struct fake a;
	init(&a, "gw-w1", 5000);
	a.stage = FG_WRITE_SENT;
	assert_true(fg_writes_add(e->ws, &a.w));
	fg_writes_abort(e->ws, "gw-w1");
	fg_writes_check(e->ws, 300);
	assert_true(a.w.grace);
	assert_int_equal(a.w.deadline, 300 + MARGIN);
	assert_int_equal(a.aborts, 0);
	fg_writes_remove(e->ws, &a.w);
}

static void test_extend_ahead_and_answers(void **state)
{
	struct env *e = *state;
	struct fake a;
	static const bool admitted[2] = { true, true };
	const uint64_t mdl[2] = { 1000, 1200 };
	memset(&a, 0, sizeof(a));
	fg_write_init(&a.w, "gw-w1", 2, admitted, mdl, 1000);
	a.stage = FG_WRITE_SENDING;
	assert_true(fg_writes_add(e->ws, &a.w));

	/* far from the deadline: nothing asked; look again ahead of it */
	long next = fg_writes_check(e->ws, 500);
	assert_int_equal(a.extends, 0);
	assert_int_equal(next, 1000 - FG_WRITE_EXTEND_AHEAD_MS - 500);

	/* within the lead: one ask, one call per admitted member */
	fg_writes_check(e->ws, 1000 - FG_WRITE_EXTEND_AHEAD_MS);
	assert_int_equal(a.extends, 1);
	assert_int_equal(a.members_asked, 2);
	assert_int_equal(a.w.extending, 2);
	/* while they are out, no second ask */
	fg_writes_check(e->ws, 950);
	assert_int_equal(a.extends, 1);

	/* counted from when asked; the deadline is the least member's */
	fg_write_extended(e->ws, &a.w, 0, FG_WRITE_EXT_GRANTED, 2000);
	assert_int_equal(a.w.deadline, 1200);
	fg_write_extended(e->ws, &a.w, 1, FG_WRITE_EXT_GRANTED, 1500);
	assert_int_equal(a.w.deadline, 900 + 1500);
	assert_int_equal(a.w.extending, 0);

	/* a failed call leaves the deadline */
	fg_writes_check(e->ws, 900 + 1500 - 50);
	assert_int_equal(a.extends, 2);
	fg_write_extended(e->ws, &a.w, 0, FG_WRITE_EXT_FAILED, 0);
	assert_int_equal(a.w.deadline, 900 + 1500);
	assert_false(a.w.released);

	/* a grant that is over: not one more byte */
	fg_write_extended(e->ws, &a.w, 1, FG_WRITE_EXT_ENDED, 0);
	assert_true(a.w.released);
	assert_false(fg_write_may_send(&a.w, 2350));
	fg_writes_remove(e->ws, &a.w);
}

static void test_ended_grant_keeps_grace(void **state)
{
	struct env *e = *state;
	struct fake a;
	init(&a, "gw-w1", 1000);
	a.stage = FG_WRITE_SENT;
	assert_true(fg_writes_add(e->ws, &a.w));
	fg_writes_check(e->ws, 1000);
	assert_true(a.w.grace);
	fg_write_extend_sent(&a.w); /* an answer still on its way */
	fg_write_extended(e->ws, &a.w, 0, FG_WRITE_EXT_ENDED, 0);
	assert_false(a.w.released);
	assert_int_equal(a.w.deadline, 1000 + MARGIN);
	fg_writes_remove(e->ws, &a.w);
}

static void test_recheck_asks_every_running_write(void **state)
{
	struct env *e = *state;
	struct fake a, b, q;
	init(&a, "gw-w1", 10000);
	init(&b, "gw-w2", 10000);
	init(&q, "gw-w3", 10000);
	b.stage = FG_WRITE_SENT;
	q.stage = FG_WRITE_QUEUED;
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_writes_add(e->ws, &b.w));
	assert_true(fg_writes_add(e->ws, &q.w));
	fg_writes_recheck(e->ws);
	long next = fg_writes_check(e->ws, 100);
	assert_int_equal(a.extends, 1);
	assert_int_equal(b.extends, 1);
	assert_int_equal(q.extends, 0); /* not begun yet */
	assert_int_equal(next, 1);      /* looked at again right after */
	/* once only */
	fg_write_extended(e->ws, &a.w, 0, FG_WRITE_EXT_GRANTED, 9000);
	fg_write_extended(e->ws, &b.w, 0, FG_WRITE_EXT_GRANTED, 9000);
	fg_writes_check(e->ws, 200);
	assert_int_equal(a.extends, 1);
	fg_writes_remove(e->ws, &a.w);
	fg_writes_remove(e->ws, &b.w);
	fg_writes_remove(e->ws, &q.w);
}

/* The subscription came back while a write's extension was out, or
 * before a write began: Redis may have answered that extension before
 * the change whose message was lost, so each is asked again once it can
 * be. */
static void test_recheck_reaches_writes_extending_or_not_begun(void **state)
{
	struct env *e = *state;
	struct fake a, q;
	init(&a, "gw-w1", 1000);
	init(&q, "gw-w2", 10000);
	q.stage = FG_WRITE_QUEUED;
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_writes_add(e->ws, &q.w));
	/* a's extension goes out ahead of its deadline, and stays out */
	fg_writes_check(e->ws, 1000 - FG_WRITE_EXTEND_AHEAD_MS);
	assert_int_equal(a.extends, 1);
	assert_int_equal(a.w.extending, 1);
	fg_writes_recheck(e->ws);
	fg_writes_check(e->ws, 920);
	assert_int_equal(a.extends, 1); /* one out at a time */
	assert_int_equal(q.extends, 0);
	/* that extension is back, granted: a is asked again all the same */
	fg_write_extended(e->ws, &a.w, 0, FG_WRITE_EXT_GRANTED, 5000);
	fg_writes_check(e->ws, 930);
	assert_int_equal(a.extends, 2);
	/* q begins: it is asked at once, not at its deadline's lead */
	q.stage = FG_WRITE_SENDING;
	fg_writes_check(e->ws, 940);
	assert_int_equal(q.extends, 1);
	fg_writes_remove(e->ws, &a.w);
	fg_writes_remove(e->ws, &q.w);
}

static void test_no_deadline_unbounded(void **state)
{
	struct env *e = *state;
	struct fake a;
	init(&a, "gw-w1", 0);
	assert_true(fg_writes_add(e->ws, &a.w));
	assert_true(fg_write_may_send(&a.w, UINT64_MAX / 2));
	assert_int_equal(fg_writes_check(e->ws, 5000), 1000);
	assert_int_equal(a.extends + a.aborts, 0);
	fg_writes_remove(e->ws, &a.w);
}

/* An op may free a write other than its own (a Redis call that answers
 * other calls at once, whose callbacks drop another transfer's last
 * reference): here the abort of the first write frees the second, the
 * one a walk's cursor would point at next. */
static struct fake *victim;
static struct fg_writes *victim_table;

static void abort_frees_victim(struct fg_write *w)
{
	fake_abort(w);
	if (victim) {
		fg_writes_remove(victim_table, &victim->w);
		free(victim);
		victim = NULL;
	}
}

static const struct fg_writes_ops freeing_ops = {
	.stage = fake_stage,
	.abort = abort_frees_victim,
	.extend = fake_extend,
};

static void test_an_op_that_frees_another_write_leaves_the_walk_whole(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	assert_non_null(base);
	struct fg_writes *ws = fg_writes_create(base, MARGIN, &freeing_ops);
	assert_non_null(ws);
	struct fake a, c;
	init(&a, "gw-w1", 10);
	victim = malloc(sizeof(*victim));
	assert_non_null(victim);
	init(victim, "gw-w2", 10);
	init(&c, "gw-w3", 10);
	victim_table = ws;
	assert_true(fg_writes_add(ws, &a.w));   /* walked first */
	assert_true(fg_writes_add(ws, &victim->w));
	assert_true(fg_writes_add(ws, &c.w));
	fg_writes_check(ws, 100);               /* every deadline passed */
	assert_null(victim);
	assert_int_equal(a.aborts, 1);
	assert_int_equal(c.aborts, 1);          /* the walk went on past it */
	fg_writes_check(ws, 101);               /* once each: they are over */
	assert_int_equal(a.aborts, 1);
	assert_int_equal(c.aborts, 1);
	fg_writes_remove(ws, &a.w);
	fg_writes_remove(ws, &c.w);
	fg_writes_destroy(ws);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_register_find_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_end_all, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_before_register, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reask_before_register, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_wins_over_reask, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ring_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reask_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_abort_or_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_released_sent_grace_from_now, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extend_ahead_and_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ended_grant_keeps_grace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recheck_asks_every_running_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recheck_reaches_writes_extending_or_not_begun, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_deadline_unbounded, setup, teardown),
		cmocka_unit_test(test_an_op_that_frees_another_write_leaves_the_walk_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
