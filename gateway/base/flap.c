/*
 * flap.c - the log lines of a dependency going down and coming back,
 * rate-limited (flap.h).
 *
 * Invariant: f->said is the state the log last reported; a line is due
 * whenever the dependency is not in that state, or changed and changed
 * back unsaid, and the quiet time since the last line has passed: a
 * flapping dependency costs one line per FG_FLAP_QUIET_MS, its final
 * state is always told, and no change goes uncounted.
 */
#include <string.h>

#include "base/flap.h"

void fg_flap_init(struct fg_flap *f)
{
	memset(f, 0, sizeof(*f));
	f->said = -1;
	f->is = -1;
}

enum fg_flap_line fg_flap_note(struct fg_flap *f, bool up, uint64_t now_ms,
			       struct fg_flap_say *say)
{
	int is = up ? 1 : 0;
	memset(say, 0, sizeof(*say));
	if (f->is != is) {
		if (f->is >= 0)
			f->hidden++;  /* taken back below when this one is said */
		if (!is) {
			f->down_since = now_ms;
			f->long_said = false;
		} else {
			f->up_since = now_ms;
		}
		f->is = is;
	}
	if (f->said < 0) {
		/* the first look: said at once, a change of nothing, so
		 * the quiet time does not run from it */
		f->hidden = 0;
		f->said = is;
		return is ? FG_FLAP_FIRST_UP : FG_FLAP_DOWN;
	}
	/* a change to tell, or changes that came and went unsaid: the
	 * line says the state now and counts the rest */
	if ((is != f->said || f->hidden) &&
	    (!f->timing || now_ms - f->said_at >= FG_FLAP_QUIET_MS)) {
		bool changed = is != f->said;
		say->hidden = f->hidden - (changed ? 1u : 0u);
		say->down_ms = is && changed ? f->up_since - f->down_since : 0;
		f->hidden = 0;
		f->said = is;
		f->said_at = now_ms;
		f->timing = true;
		return is ? FG_FLAP_UP : FG_FLAP_DOWN;
	}
	if (!is && !f->long_said && now_ms - f->down_since >= FG_FLAP_LONG_MS) {
		f->long_said = true;
		say->down_ms = now_ms - f->down_since;
		say->hidden = f->hidden;
		return FG_FLAP_STILL_DOWN;
	}
	return FG_FLAP_NONE;
}
