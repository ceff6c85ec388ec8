/*
 * budget.h - how many unknown keys a client address may still send: one
 * table per loop, kept by the access step (access.c). Private to the
 * gateway; pure (the caller passes the time), so that it is unit-tested.
 *
 * A budget holds up to FG_BUDGET_BURST units and refills at
 * FG_BUDGET_PER_S a second; an unknown key costs one unit, and an address
 * with less than one is refused before its key is hashed. The table keeps
 * FG_BUDGET_SETS sets of FG_BUDGET_WAYS budgets; an address belongs to the
 * set fg_budget_set_of() names.
 *
 * Invariant: placing an address never adds a unit to its set. A budget
 * that was never used starts full, once; an address placed by taking the
 * place of another takes over what that one had left, and the place it
 * takes is the fullest of the set (so an address being refused keeps its
 * place, and an address placed again never gets more than it would have
 * had by keeping its own). Hence, on one table, over any T seconds:
 *
 *   - one address is charged at most FG_BUDGET_BURST + FG_BUDGET_PER_S * T
 *     units (100 + 2T), as if it had a budget of its own;
 *   - the addresses of one set, however many and however they take turns,
 *     are charged at most FG_BUDGET_WAYS times that (400 + 8T), so k
 *     addresses of one set at most min(k, FG_BUDGET_WAYS) times it;
 *   - all addresses together at most FG_BUDGET_SETS * FG_BUDGET_WAYS times
 *     it (25,600 + 512T).
 *
 * A budget is kept as the instant it is full again ("theoretical arrival
 * time", as in GCRA), so that it is integer arithmetic and needs no refill
 * step: what is left is FG_BUDGET_BURST minus the time until then, in
 * units of 1/FG_BUDGET_PER_S seconds.
 */
#ifndef FENCEGATE_BUDGET_H
#define FENCEGATE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define FG_BUDGET_BURST 100u
#define FG_BUDGET_PER_S 2u
#define FG_BUDGET_SETS 64u
#define FG_BUDGET_WAYS 4u

/* An address: an IPv4 address as a v4-mapped IPv6 one, or an IPv6 /64
 * with its last 8 bytes zero. */
#define FG_BUDGET_ADDR_LEN 16

/** One address' budget. */
struct fg_budget {
	unsigned char addr[FG_BUDGET_ADDR_LEN];
	bool used;           /* false: never given to an address */
	uint64_t full_at_ns; /* monotonic: when it is full again */
};

/** A loop's table; zero-initialised (fg_budgets_init) before use. */
struct fg_budgets {
	struct fg_budget set[FG_BUDGET_SETS][FG_BUDGET_WAYS];
};

void fg_budgets_init(struct fg_budgets *t);

/** The set an address belongs to, in 0..FG_BUDGET_SETS-1 (FNV-1a of its
 *  16 bytes, modulo FG_BUDGET_SETS). */
unsigned fg_budget_set_of(const unsigned char addr[FG_BUDGET_ADDR_LEN]);

/** The address' budget, placed in its set if it had none (see the
 *  invariant). Never NULL; valid until the next call on the table. */
struct fg_budget *fg_budget_find(struct fg_budgets *t,
				 const unsigned char addr[FG_BUDGET_ADDR_LEN]);

/** Has the budget less than one unit at now_ns (its next key is refused
 *  before it is hashed)? */
bool fg_budget_spent(const struct fg_budget *b, uint64_t now_ns);

/** An unknown key: one unit less. Only for a budget that is not spent. */
void fg_budget_charge(struct fg_budget *b, uint64_t now_ns);

/** Whole units left at now_ns (0..FG_BUDGET_BURST). */
unsigned fg_budget_left(const struct fg_budget *b, uint64_t now_ns);

#endif
