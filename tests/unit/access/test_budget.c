/*
 * tests/unit/access/test_budget.c - the budgets of unknown keys per client
 * address (gateway/access/budget.c).
 *
 * Pins budget.h: a new address has FG_BUDGET_BURST units, refilled at
 * FG_BUDGET_PER_S a second; addresses of one set that take turns, however
 * many and in whatever order, are charged no more than the bound budget.h
 * states (per address, per set); an address being refused keeps its
 * place; one guessing address costs another of its set nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "access/budget.h"

#define SEC 1000000000ull
#define T0 (1000 * SEC) /* any monotonic instant well after 0 */
#define BURST FG_BUDGET_BURST
#define RATE FG_BUDGET_PER_S
#define WAYS FG_BUDGET_WAYS

typedef unsigned char addr_t[FG_BUDGET_ADDR_LEN];

/* 127.a.b.c as access.c keys it: a v4-mapped IPv6 address. */
static void v4(addr_t out, unsigned n)
{
	memset(out, 0, FG_BUDGET_ADDR_LEN);
	out[10] = out[11] = 0xff;
	out[12] = 127;
	out[13] = (unsigned char)(n >> 16);
	out[14] = (unsigned char)(n >> 8);
	out[15] = (unsigned char)n;
}

/* The first n addresses (127.0.0.1 on) that fall into set `set`, found
 * through the table's own hash. */
static void colliding(addr_t *out, unsigned n, unsigned set)
{
	unsigned found = 0;
	for (unsigned i = 1; found < n; i++) {
		v4(out[found], i);
		if (fg_budget_set_of(out[found]) == set)
			found++;
	}
}

/* Charges addr's unknown keys at now until it is refused, at most `max`;
 * how many were let through. */
static unsigned guess(struct fg_budgets *t, const addr_t addr, uint64_t now,
		      unsigned max)
{
	unsigned n = 0;
	while (n < max) {
		struct fg_budget *b = fg_budget_find(t, addr);
		if (fg_budget_spent(b, now))
			break;
		fg_budget_charge(b, now);
		n++;
	}
	return n;
}

/* The bound of budget.h for k addresses over secs seconds. */
static double bound(unsigned k, double secs)
{
	return (k < WAYS ? k : WAYS) * (BURST + RATE * secs);
}

static void test_a_new_address_has_the_burst_then_the_rate(void **state)
{
	(void)state;
	struct fg_budgets t;
	fg_budgets_init(&t);
	addr_t a;
	v4(a, 1);
	struct fg_budget *b = fg_budget_find(&t, a);
	assert_int_equal(fg_budget_left(b, T0), BURST);
	assert_int_equal(guess(&t, a, T0, 1000), BURST);
	assert_true(fg_budget_spent(fg_budget_find(&t, a), T0));
	assert_int_equal(fg_budget_left(fg_budget_find(&t, a), T0), 0);
	/* one unit back after 1/RATE s, not before */
	assert_int_equal(guess(&t, a, T0 + SEC / RATE - 1, 1000), 0);
	assert_int_equal(guess(&t, a, T0 + SEC / RATE, 1000), 1);
	/* full again after BURST/RATE s, and never more than full */
	uint64_t later = T0 + SEC / RATE + (uint64_t)BURST * SEC / RATE + 3600 * SEC;
	assert_int_equal(fg_budget_left(fg_budget_find(&t, a), later), BURST);
	assert_int_equal(guess(&t, a, later, 1000), BURST);
}

/* The attack that reset the budget: more addresses than ways, each
 * spending all it has and then giving its place to the next. */
static void test_colliding_addresses_taking_turns_share_their_sets_budget(void **state)
{
	(void)state;
	enum { N = 40, ROUNDS = 25 };
	static addr_t addrs[N];
	for (unsigned set = 0; set < FG_BUDGET_SETS; set += 21) {
		struct fg_budgets t;
		fg_budgets_init(&t);
		colliding(addrs, N, set);
		unsigned total = 0, first = 0;
		for (unsigned r = 0; r < ROUNDS; r++)
			for (unsigned i = 0; i < N; i++) {
				unsigned n = guess(&t, addrs[i], T0, 1000);
				if (r == 0 && i == 0)
					first = n;
				total += n;
			}
		/* the first address has its 100, and all of them together
		 * never more than the set's ways (no time passed) */
		assert_int_equal(first, BURST);
		assert_int_equal(total, WAYS * BURST);
		/* the other sets are untouched */
		addr_t other;
		unsigned i = 1;
		do
			v4(other, i++);
		while (fg_budget_set_of(other) == set);
		assert_int_equal(guess(&t, other, T0, 1000), BURST);
	}
}

/* Any rotation, with time passing: an xorshift picks who guesses and how
 * much, and the clock moves on by a few ms between keys. */
static void test_any_rotation_keeps_the_bound(void **state)
{
	(void)state;
	enum { N = 12, KEYS = 200000 };
	static addr_t addrs[N];
	unsigned charged[N];
	for (unsigned k = 1; k <= N; k += (k < WAYS + 2 ? 1 : 5)) {
		struct fg_budgets t;
		fg_budgets_init(&t);
		colliding(addrs, k, 7);
		memset(charged, 0, sizeof(charged));
		uint64_t x = 88172645463325252ull ^ k, now = T0;
		unsigned total = 0;
		for (unsigned n = 0; n < KEYS; n++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			unsigned who = (unsigned)(x % k);
			now += (x >> 32) % (3 * 1000000); /* 0..3 ms */
			struct fg_budget *b = fg_budget_find(&t, addrs[who]);
			if (fg_budget_spent(b, now))
				continue;
			fg_budget_charge(b, now);
			charged[who]++;
			total++;
			double secs = (double)(now - T0) / SEC;
			assert_true(charged[who] <= bound(1, secs));
			assert_true(total <= bound(k, secs));
		}
		/* it was the budget that stopped them, not too few tries */
		assert_true(total >= 0.9 * bound(k, (double)(now - T0) / SEC));
	}
}

static void test_an_address_being_refused_keeps_its_place(void **state)
{
	(void)state;
	enum { N = 30 };
	static addr_t addrs[N];
	struct fg_budgets t;
	fg_budgets_init(&t);
	colliding(addrs, N, 3);
	assert_int_equal(guess(&t, addrs[0], T0, 1000), BURST);
	/* newcomers that guess nothing come and go around it */
	for (unsigned i = 1; i < N; i++)
		fg_budget_find(&t, addrs[i]);
	assert_true(fg_budget_spent(fg_budget_find(&t, addrs[0]), T0));
	assert_int_equal(guess(&t, addrs[0], T0, 1000), 0);
}

static void test_one_guesser_costs_another_address_of_its_set_nothing(void **state)
{
	(void)state;
	enum { N = 12 };
	static addr_t addrs[N];
	struct fg_budgets t;
	fg_budgets_init(&t);
	colliding(addrs, N, 11);
	/* the set full of other addresses that never guessed */
	for (unsigned i = 0; i < WAYS; i++)
		fg_budget_find(&t, addrs[i]);
	/* WAYS - 1 guessers spend everything, and stay */
	for (unsigned g = WAYS; g < 2 * WAYS - 1; g++)
		assert_int_equal(guess(&t, addrs[g], T0, 1000), BURST);
	/* every newcomer, and every address that comes back, still has its
	 * 100 (and takes nothing from the guessers' places) */
	for (unsigned i = 2 * WAYS - 1; i < N; i++)
		assert_int_equal(fg_budget_left(fg_budget_find(&t, addrs[i]), T0), BURST);
	for (unsigned i = 0; i < WAYS; i++)
		assert_int_equal(fg_budget_left(fg_budget_find(&t, addrs[i]), T0), BURST);
	for (unsigned g = WAYS; g < 2 * WAYS - 1; g++)
		assert_true(fg_budget_spent(fg_budget_find(&t, addrs[g]), T0));
}

static void test_a_set_spent_by_as_many_guessers_as_ways_gives_what_is_left(void **state)
{
	(void)state;
	enum { N = WAYS + 1 };
	static addr_t addrs[N];
	struct fg_budgets t;
	fg_budgets_init(&t);
	colliding(addrs, N, 42);
	for (unsigned g = 0; g < WAYS; g++)
		assert_int_equal(guess(&t, addrs[g], T0, 1000), BURST);
	/* the newcomer starts with what the set has left: nothing yet, then
	 * what time gives back */
	struct fg_budget *b = fg_budget_find(&t, addrs[WAYS]);
	assert_true(fg_budget_spent(b, T0));
	assert_false(fg_budget_spent(b, T0 + SEC / RATE));
	assert_int_equal(guess(&t, addrs[WAYS], T0 + 10 * SEC, 1000), 10 * RATE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_new_address_has_the_burst_then_the_rate),
		cmocka_unit_test(test_colliding_addresses_taking_turns_share_their_sets_budget),
		cmocka_unit_test(test_any_rotation_keeps_the_bound),
		cmocka_unit_test(test_an_address_being_refused_keeps_its_place),
		cmocka_unit_test(test_one_guesser_costs_another_address_of_its_set_nothing),
		cmocka_unit_test(test_a_set_spent_by_as_many_guessers_as_ways_gives_what_is_left),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
