/*
 * budget.c - the budgets of unknown keys per client address (budget.h).
 *
 * Invariant (budget.h): placing an address never adds a unit to its set;
 * the only units a set gets are its never-used budgets' first fill and
 * the time that passes.
 */
#include <string.h>

#include "access/budget.h"

/* The time one unit takes to come back. */
#define UNIT_NS (1000000000u / FG_BUDGET_PER_S)

void fg_budgets_init(struct fg_budgets *t)
{
	memset(t, 0, sizeof(*t));
}

unsigned fg_budget_set_of(const unsigned char addr[FG_BUDGET_ADDR_LEN])
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (int i = 0; i < FG_BUDGET_ADDR_LEN; i++)
		h = (h ^ addr[i]) * 16777619u;
	return h % FG_BUDGET_SETS;
}

/* How long until the budget is full again: what it has spent. */
static uint64_t debt(const struct fg_budget *b, uint64_t now_ns)
{
	return b->full_at_ns > now_ns ? b->full_at_ns - now_ns : 0;
}

struct fg_budget *fg_budget_find(struct fg_budgets *t,
				 const unsigned char addr[FG_BUDGET_ADDR_LEN])
{
	struct fg_budget *set = t->set[fg_budget_set_of(addr)];
	struct fg_budget *unused = NULL, *fullest = NULL;
	for (unsigned w = 0; w < FG_BUDGET_WAYS; w++) {
		struct fg_budget *b = &set[w];
		if (!b->used) {
			if (!unused)
				unused = b;
			continue;
		}
		if (memcmp(b->addr, addr, FG_BUDGET_ADDR_LEN) == 0)
			return b;
		if (!fullest || b->full_at_ns < fullest->full_at_ns)
			fullest = b;
	}
	if (unused) {
		/* its first fill: the one time a set gets units but by time */
		unused->used = true;
		unused->full_at_ns = 0;
		memcpy(unused->addr, addr, FG_BUDGET_ADDR_LEN);
		return unused;
	}
	/* The fullest place, with what it has left: the address that had
	 * it, if it comes back, takes the fullest then, which has no more
	 * than this one had (no budget of the set gains but by time). */
	memcpy(fullest->addr, addr, FG_BUDGET_ADDR_LEN);
	return fullest;
}

bool fg_budget_spent(const struct fg_budget *b, uint64_t now_ns)
{
	return debt(b, now_ns) > (uint64_t)(FG_BUDGET_BURST - 1) * UNIT_NS;
}

void fg_budget_charge(struct fg_budget *b, uint64_t now_ns)
{
	uint64_t from = b->full_at_ns > now_ns ? b->full_at_ns : now_ns;
	b->full_at_ns = from + UNIT_NS;
}

unsigned fg_budget_left(const struct fg_budget *b, uint64_t now_ns)
{
	uint64_t d = debt(b, now_ns);
	uint64_t owed = (d + UNIT_NS - 1) / UNIT_NS; /* units not back yet */
	return owed >= FG_BUDGET_BURST ? 0 : FG_BUDGET_BURST - (unsigned)owed;
}
